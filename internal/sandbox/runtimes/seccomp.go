package runtimes

import (
	"runtime"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Seccomp profile for sandboxes run by an OCI runtime (runc, crun).
//
// The profile is a deny-default allowlist written for Berth (SECURITY.md
// ESC-02, ESC-04..06, ESC-17, ESC-18 and "Kernel attack surface reachable by
// syscalls"): every syscall not named here fails with EPERM, and the process
// keeps running (ERRNO over KILL; the one exception is a syscall made
// through a foreign ABI, see seccompArchFor). The list is sized for
// ordinary developer workloads: shells, coreutils, python3, node, git, C/Go
// compilers, make, pip/npm installs and curl inside a network-none sandbox.
//
// Deliberately absent, so they return EPERM: the mount API old and new
// (mount, umount2, pivot_root, chroot, fsopen, fsconfig, fsmount, fspick,
// move_mount, open_tree, open_tree_attr, mount_setattr, statmount,
// listmount), namespace entry (unshare, setns, listns; clone is filtered
// below), bpf, perf_event_open, the key syscalls, userfaultfd, io_uring,
// open_by_handle_at/name_to_handle_at, kexec, kernel modules, cross-process
// memory access (process_vm_readv/writev, ptrace, pidfd_getfd, kcmp,
// process_madvise, process_mrelease, move_pages, migrate_pages), clock and
// time setters, reboot, swap, acct, quotactl, syslog, fanotify, modify_ldt,
// iopl/ioperm, and obsolete syscalls (uselib, ustat, sysfs, _sysctl,
// create_module, ...). Only the native syscall ABI is covered; see
// seccompArchFor.
//
// Names a runtime's libseccomp does not know (syscalls newer than it) are
// skipped by runc and crun. runc answers every syscall numbered above the
// highest one the filter resolves with ENOSYS (the errno libc expects before
// falling back to an older syscall), so under runc the newest absent ones
// (statmount, listmount, open_tree_attr, listns, ...) fail with ENOSYS
// rather than EPERM; crun 1.8 answers them with the default EPERM.

// Linux values, fixed by the kernel ABI on every architecture Berth runs on;
// spelled out so this file builds on any GOOS.
const (
	errnoEPERM  = 1
	errnoENOSYS = 38

	afUNIX    = 1
	afINET    = 2
	afINET6   = 10
	afNETLINK = 16

	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	// cloneNamespaceFlags are the namespace flags clone(2) accepts.
	// CLONE_NEWTIME (0x80) is not among them: clone(2) cannot create a time
	// namespace (the bit overlaps the exit signal), only unshare and clone3
	// can, and both are refused.
	cloneNamespaceFlags = cloneNewNS | cloneNewCgroup | cloneNewUTS |
		cloneNewIPC | cloneNewUser | cloneNewPID | cloneNewNet
)

// seccompAllowed are the syscalls allowed whatever their arguments. Each
// group is sorted; a name appears in one group only.
var seccompAllowed = [][]string{
	// Process lifecycle: exec, exit, fork, wait, process groups and sessions.
	// clone is filtered (no namespace flags) and clone3 gets ENOSYS; see
	// SeccompProfile.
	{
		"execve", "execveat", "exit", "exit_group", "fork", "getpgid",
		"getpgrp", "getpid", "getppid", "getsid", "gettid", "pidfd_open",
		"restart_syscall", "set_tid_address", "setpgid", "setsid", "vfork",
		"wait4", "waitid",
	},
	// Per-process setup done by libc, language runtimes and sandboxes
	// within the sandbox: TLS, rseq, robust futex lists, prctl (used widely:
	// thread names, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG), and seccomp and
	// landlock, which can only narrow what the process may do.
	{
		"arch_prctl", "landlock_add_rule", "landlock_create_ruleset",
		"landlock_restrict_self", "prctl", "rseq", "seccomp",
		"set_robust_list",
	},
	// Credentials. Changing them needs capabilities the sandbox does not
	// have beyond its own user namespace mapping; capset can only drop.
	{
		"capget", "capset", "getegid", "geteuid", "getgid", "getgroups",
		"getresgid", "getresuid", "getuid", "setfsgid", "setfsuid",
		"setgid", "setgroups", "setregid", "setresgid", "setresuid",
		"setreuid", "setuid",
	},
	// Signals. kill reaches only processes in the sandbox's PID namespace.
	{
		"kill", "pause", "pidfd_send_signal", "rt_sigaction",
		"rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
		"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
		"rt_tgsigqueueinfo", "sigaltstack", "signalfd", "signalfd4",
		"tgkill", "tkill",
	},
	// Memory: allocation, protection (JITs in node and python, pkeys in V8),
	// locking (bounded by RLIMIT_MEMLOCK), NUMA policy of the caller's own
	// memory, memfd_create (used by JITs, Chromium, systemd tools).
	{
		"brk", "get_mempolicy", "madvise", "map_shadow_stack", "mbind",
		"membarrier", "memfd_create", "mincore", "mlock", "mlock2",
		"mlockall", "mmap", "mprotect", "mremap", "mseal", "msync",
		"munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
		"pkey_mprotect", "set_mempolicy",
	},
	// Threads, synchronisation and scheduling of the sandbox's own tasks.
	// Raising priority or real-time policies still needs CAP_SYS_NICE.
	{
		"futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
		"getpriority", "ioprio_get", "ioprio_set", "sched_get_priority_max",
		"sched_get_priority_min", "sched_getaffinity", "sched_getattr",
		"sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
		"sched_setaffinity", "sched_setattr", "sched_setparam",
		"sched_setscheduler", "sched_yield", "setpriority",
	},
	// Clocks, sleeping and timers (reading only: every clock setter is
	// refused, ESC-18).
	{
		"alarm", "clock_getres", "clock_gettime", "clock_nanosleep",
		"getitimer", "gettimeofday", "nanosleep", "setitimer", "time",
		"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
		"timer_settime", "timerfd_create", "timerfd_gettime",
		"timerfd_settime", "times",
	},
	// File descriptors and I/O on them.
	{
		"close", "close_range", "copy_file_range", "dup", "dup2", "dup3",
		"fadvise64", "fallocate", "fcntl", "fdatasync", "flock", "fsync",
		"ftruncate", "ioctl", "lseek", "pread64", "preadv", "preadv2",
		"pwrite64", "pwritev", "pwritev2", "read", "readahead", "readv",
		"sendfile", "splice", "sync", "sync_file_range", "syncfs", "tee",
		"vmsplice", "write", "writev",
	},
	// Paths: open, stat, directories, links, permissions, ownership, times,
	// FIFOs (mknod; device nodes need CAP_MKNOD and the device cgroup).
	{
		"access", "chdir", "chmod", "chown", "creat", "faccessat",
		"faccessat2", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown",
		"fchownat", "fstat", "fstatfs", "futimesat", "getcwd", "getdents",
		"getdents64", "lchown", "link", "linkat", "lstat", "mkdir",
		"mkdirat", "mknod", "mknodat", "newfstatat", "open", "openat",
		"openat2", "readlink", "readlinkat", "rename", "renameat",
		"renameat2", "rmdir", "stat", "statfs", "statx", "symlink",
		"symlinkat", "truncate", "umask", "unlink", "unlinkat", "utime",
		"utimensat", "utimes",
	},
	// Extended attributes (pip, tar, cp -a, git on some filesystems).
	{
		"fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr",
		"getxattrat", "lgetxattr", "listxattr", "listxattrat", "llistxattr",
		"lremovexattr", "lsetxattr", "removexattr", "removexattrat",
		"setxattr", "setxattrat",
	},
	// Waiting on many descriptors: pipes, eventfds, poll/select/epoll,
	// inotify (file watchers in node, make-like tools), page-cache stats.
	{
		"cachestat", "epoll_create", "epoll_create1", "epoll_ctl",
		"epoll_pwait", "epoll_pwait2", "epoll_wait", "eventfd", "eventfd2",
		"inotify_add_watch", "inotify_init", "inotify_init1",
		"inotify_rm_watch", "pipe", "pipe2", "poll", "ppoll", "pselect6",
		"select",
	},
	// Sockets once created. socket and socketpair are filtered by address
	// family; see SeccompProfile.
	{
		"accept", "accept4", "bind", "connect", "getpeername",
		"getsockname", "getsockopt", "listen", "recvfrom", "recvmmsg",
		"recvmsg", "sendmmsg", "sendmsg", "sendto", "setsockopt",
		"shutdown",
	},
	// System V and POSIX IPC; the IPC namespace is private to the sandbox.
	{
		"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
		"mq_timedsend", "mq_unlink", "msgctl", "msgget", "msgrcv", "msgsnd",
		"semctl", "semget", "semop", "semtimedop", "shmat", "shmctl",
		"shmdt", "shmget",
	},
	// System information and resource limits. sethostname and
	// setdomainname change only the sandbox's own UTS namespace (ESC-18).
	{
		"getcpu", "getrandom", "getrlimit", "getrusage", "prlimit64",
		"setdomainname", "sethostname", "setrlimit", "sysinfo", "uname",
	},
}

// seccompPersonalities are the personality(2) arguments allowed: PER_LINUX,
// PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and 0xffffffff, which queries
// the current persona. Others (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...)
// weaken exploit mitigations and are refused.
var seccompPersonalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// seccompSocketFamilies are the address families socket(2) may create:
// unix sockets, IP (the sandbox has its own network namespace), and netlink
// (getifaddrs uses NETLINK_ROUTE; useradd and other libaudit users abort
// when opening a NETLINK_AUDIT socket fails with EPERM, so netlink protocols
// are not filtered).
// AF_PACKET, AF_ALG, AF_VSOCK, AF_KEY, ... get EPERM (ESC-17).
var seccompSocketFamilies = []uint64{afUNIX, afINET, afINET6, afNETLINK}

// seccompArch describes how the profile is built for one GOARCH.
type seccompArch struct {
	// archs are the syscall ABIs the filter covers.
	archs []specs.Arch
	// cloneFlagsArg is the index of clone(2)'s flags argument.
	cloneFlagsArg uint
}

// seccompArchFor lists the native ABI only (SECURITY.md: deny non-native
// architectures). Listing SCMP_ARCH_X86 as well would not let 32-bit
// programs run (mmap2, fstat64, set_thread_area, ... are not allowed), but
// it would open the i386 entry point of every allowed syscall, and through
// it a bypass of the socket family filter: libseccomp turns the socket rule
// into "socketcall(SYS_SOCKET, ...)" for i386 and has to drop the family
// comparison, because socketcall passes its arguments in memory (measured
// with runc and crun on libseccomp 2.5.4: socketcall(SYS_SOCKET, AF_VSOCK)
// succeeds). With the native ABI only, a foreign-ABI syscall (int $0x80,
// x32) hits the runtime's bad-architecture action and the thread is killed
// with SIGSYS: the one place this profile kills rather than returns EPERM.
func seccompArchFor(goarch string) seccompArch {
	switch goarch {
	case "amd64":
		return seccompArch{archs: []specs.Arch{specs.ArchX86_64}}
	case "arm64":
		return seccompArch{archs: []specs.Arch{specs.ArchAARCH64}}
	case "s390x":
		// clone(stack, flags, ...) on s390.
		return seccompArch{archs: []specs.Arch{specs.ArchS390X}, cloneFlagsArg: 1}
	default:
		// No list: the runtime filters the native ABI only.
		return seccompArch{}
	}
}

// SeccompProfile returns the seccomp profile for sandboxes on this host's
// architecture: deny by default with EPERM, an allowlist of ordinary
// syscalls, argument filters on clone, personality, socket and socketpair,
// and ENOSYS for clone3 so that libc falls back to the filtered clone.
// Classic AIO (io_setup...) is refused like io_uring: its contexts count
// against a host-wide limit (fs.aio-max-nr) one sandbox could exhaust.
// Each call returns a new value the caller may modify.
func SeccompProfile() *specs.LinuxSeccomp {
	return seccompProfileFor(runtime.GOARCH)
}

func seccompProfileFor(goarch string) *specs.LinuxSeccomp {
	arch := seccompArchFor(goarch)
	p := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: errnoPtr(errnoEPERM),
		Architectures:   slices.Clone(arch.archs),
	}
	for _, group := range seccompAllowed {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names:  slices.Clone(group),
			Action: specs.ActAllow,
		})
	}

	// clone without any namespace flag: threads, fork, vfork, posix_spawn.
	// Masked equality compares all 64 bits of the flags, so no high-bit
	// trick gets a namespace flag past it (ESC-05).
	p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
		Names:  []string{"clone"},
		Action: specs.ActAllow,
		Args: []specs.LinuxSeccompArg{{
			Index: arch.cloneFlagsArg,
			Value: cloneNamespaceFlags,
			Op:    specs.OpMaskedEqual,
		}},
	})
	// clone3 passes its flags in memory, where seccomp cannot see them.
	// ENOSYS (not EPERM) makes glibc and others retry with clone.
	p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
		Names:    []string{"clone3"},
		Action:   specs.ActErrno,
		ErrnoRet: errnoPtr(errnoENOSYS),
	})

	// One rule per allowed value: arguments within a rule are ANDed, rules
	// are ORed. Equality on a 64-bit value only ever refuses more, so the
	// kernel's truncation of int arguments cannot widen these rules.
	for _, v := range seccompPersonalities {
		p.Syscalls = append(p.Syscalls, argEqualRule("personality", 0, v))
	}
	for _, v := range seccompSocketFamilies {
		p.Syscalls = append(p.Syscalls, argEqualRule("socket", 0, v))
	}
	p.Syscalls = append(p.Syscalls, argEqualRule("socketpair", 0, afUNIX))
	return p
}

func argEqualRule(name string, index uint, value uint64) specs.LinuxSyscall {
	return specs.LinuxSyscall{
		Names:  []string{name},
		Action: specs.ActAllow,
		Args:   []specs.LinuxSeccompArg{{Index: index, Value: value, Op: specs.OpEqualTo}},
	}
}

func errnoPtr(errno uint) *uint { return &errno }

// GVisorSeccompProfile is SeccompProfile for runsc, which applies it
// inside the sandbox: there clone3 is allowed, because runsc ignores a
// rule's errno (clone3 would get EPERM, on which libc does not fall back
// to clone, and no thread could start; google/gvisor#14688), and the
// sentry, not the host kernel, is what a namespace flag would reach.
func GVisorSeccompProfile() *specs.LinuxSeccomp {
	p := SeccompProfile()
	for i, sc := range p.Syscalls {
		if slices.Equal(sc.Names, []string{"clone3"}) {
			p.Syscalls[i] = specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActAllow}
		}
	}
	return p
}
