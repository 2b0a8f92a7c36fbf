package runtimes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// x86_64SyscallNames is the x86_64 syscall table (syscall_64.tbl, common and
// 64-bit entries; the SYS_* names of golang.org/x/sys/unix v0.50.0 except
// rseq_slice_yield). Tests only require that profile names appear here, so new
// kernel syscalls do not break them; add a name when the profile uses it.
const x86_64SyscallNames = `
read write open close stat fstat lstat poll lseek mmap mprotect munmap brk
rt_sigaction rt_sigprocmask rt_sigreturn ioctl pread64 pwrite64 readv writev
access pipe select sched_yield mremap msync mincore madvise shmget shmat shmctl
dup dup2 pause nanosleep getitimer alarm setitimer getpid sendfile socket
connect accept sendto recvfrom sendmsg recvmsg shutdown bind listen getsockname
getpeername socketpair setsockopt getsockopt clone fork vfork execve exit wait4
kill uname semget semop semctl shmdt msgget msgsnd msgrcv msgctl fcntl flock
fsync fdatasync truncate ftruncate getdents getcwd chdir fchdir rename mkdir
rmdir creat link unlink symlink readlink chmod fchmod chown fchown lchown umask
gettimeofday getrlimit getrusage sysinfo times ptrace getuid syslog getgid
setuid setgid geteuid getegid setpgid getppid getpgrp setsid setreuid setregid
getgroups setgroups setresuid getresuid setresgid getresgid getpgid setfsuid
setfsgid getsid capget capset rt_sigpending rt_sigtimedwait rt_sigqueueinfo
rt_sigsuspend sigaltstack utime mknod uselib personality ustat statfs fstatfs
sysfs getpriority setpriority sched_setparam sched_getparam sched_setscheduler
sched_getscheduler sched_get_priority_max sched_get_priority_min
sched_rr_get_interval mlock munlock mlockall munlockall vhangup modify_ldt
pivot_root _sysctl prctl arch_prctl adjtimex setrlimit chroot sync acct
settimeofday mount umount2 swapon swapoff reboot sethostname setdomainname iopl
ioperm create_module init_module delete_module get_kernel_syms query_module
quotactl nfsservctl getpmsg putpmsg afs_syscall tuxcall security gettid
readahead setxattr lsetxattr fsetxattr getxattr lgetxattr fgetxattr listxattr
llistxattr flistxattr removexattr lremovexattr fremovexattr tkill time futex
sched_setaffinity sched_getaffinity set_thread_area io_setup io_destroy
io_getevents io_submit io_cancel get_thread_area lookup_dcookie epoll_create
epoll_ctl_old epoll_wait_old remap_file_pages getdents64 set_tid_address
restart_syscall semtimedop fadvise64 timer_create timer_settime timer_gettime
timer_getoverrun timer_delete clock_settime clock_gettime clock_getres
clock_nanosleep exit_group epoll_wait epoll_ctl tgkill utimes vserver mbind
set_mempolicy get_mempolicy mq_open mq_unlink mq_timedsend mq_timedreceive
mq_notify mq_getsetattr kexec_load waitid add_key request_key keyctl ioprio_set
ioprio_get inotify_init inotify_add_watch inotify_rm_watch migrate_pages openat
mkdirat mknodat fchownat futimesat newfstatat unlinkat renameat linkat
symlinkat readlinkat fchmodat faccessat pselect6 ppoll unshare set_robust_list
get_robust_list splice tee sync_file_range vmsplice move_pages utimensat
epoll_pwait signalfd timerfd_create eventfd fallocate timerfd_settime
timerfd_gettime accept4 signalfd4 eventfd2 epoll_create1 dup3 pipe2
inotify_init1 preadv pwritev rt_tgsigqueueinfo perf_event_open recvmmsg
fanotify_init fanotify_mark prlimit64 name_to_handle_at open_by_handle_at
clock_adjtime syncfs sendmmsg setns getcpu process_vm_readv process_vm_writev
kcmp finit_module sched_setattr sched_getattr renameat2 seccomp getrandom
memfd_create kexec_file_load bpf execveat userfaultfd membarrier mlock2
copy_file_range preadv2 pwritev2 pkey_mprotect pkey_alloc pkey_free statx
io_pgetevents rseq uretprobe uprobe pidfd_send_signal io_uring_setup
io_uring_enter io_uring_register open_tree move_mount fsopen fsconfig fsmount
fspick pidfd_open clone3 close_range openat2 pidfd_getfd faccessat2
process_madvise epoll_pwait2 mount_setattr quotactl_fd landlock_create_ruleset
landlock_add_rule landlock_restrict_self memfd_secret process_mrelease
futex_waitv set_mempolicy_home_node cachestat fchmodat2 map_shadow_stack
futex_wake futex_wait futex_requeue statmount listmount lsm_get_self_attr
lsm_set_self_attr lsm_list_modules mseal setxattrat getxattrat listxattrat
removexattrat open_tree_attr file_getattr file_setattr listns
`

// seccompMustDeny are syscalls that must fail with EPERM (SECURITY.md ESC-04,
// ESC-05, ESC-06, ESC-18 and the kernel-attack-surface CVE class).
var seccompMustDeny = []string{
	// Mounts, old and new API (ESC-04).
	"chroot", "fsconfig", "fsmount", "fsopen", "fspick", "mount",
	"mount_setattr", "move_mount", "open_tree", "open_tree_attr",
	"pivot_root", "umount2",
	// Namespaces (ESC-05).
	"setns", "unshare",
	// Kernel attack surface (ESC-06).
	"add_key", "bpf", "io_uring_enter", "io_uring_register",
	"io_uring_setup", "kcmp", "keyctl", "name_to_handle_at",
	"open_by_handle_at", "perf_event_open", "request_key", "userfaultfd",
	// Kernel code loading and replacement.
	"create_module", "delete_module", "finit_module", "init_module",
	"kexec_file_load", "kexec_load",
	// Other processes' memory.
	"pidfd_getfd", "process_madvise", "process_vm_readv",
	"process_vm_writev", "ptrace",
	// Host state (ESC-18).
	"acct", "adjtimex", "clock_adjtime", "clock_settime", "quotactl",
	"quotactl_fd", "reboot", "settimeofday", "swapoff", "swapon", "syslog",
	"vhangup",
	// Hardware access and obsolete interfaces.
	"_sysctl", "get_kernel_syms", "ioperm", "iopl", "lookup_dcookie",
	"modify_ldt", "nfsservctl", "query_module", "sysfs", "uselib", "ustat",
}

// seccompMustAllow is a sanity set that every ordinary program needs.
var seccompMustAllow = []string{
	"accept4", "arch_prctl", "bind", "brk", "close", "connect", "dup3",
	"epoll_ctl", "epoll_pwait", "eventfd2", "execve", "exit", "exit_group",
	"fcntl", "futex", "getdents64", "getpid", "getrandom", "ioctl", "kill",
	"lseek", "madvise", "memfd_create", "mmap", "mprotect", "munmap",
	"newfstatat", "openat", "pipe2", "prctl", "pread64", "read", "readlinkat",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sched_getaffinity",
	"set_robust_list", "set_tid_address", "sethostname", "setsockopt",
	"sigaltstack", "statx", "timer_create", "uname", "vfork", "wait4",
	"write",
}

// seccompFiltered are allowed only with the argument values the profile
// names; an unconditional allow rule would void the filter.
var seccompFiltered = []string{"clone", "personality", "socket", "socketpair"}

func rulesFor(p *specs.LinuxSeccomp, name string) []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, r := range p.Syscalls {
		if slices.Contains(r.Names, name) {
			rules = append(rules, r)
		}
	}
	return rules
}

// allowedUnconditionally reports whether some rule allows name whatever its
// arguments.
func allowedUnconditionally(p *specs.LinuxSeccomp, name string) bool {
	for _, r := range rulesFor(p, name) {
		if r.Action == specs.ActAllow && len(r.Args) == 0 {
			return true
		}
	}
	return false
}

func TestSeccompDenyDefault(t *testing.T) {
	p := SeccompProfile()
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("DefaultAction = %q, want %q", p.DefaultAction, specs.ActErrno)
	}
	if p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 {
		t.Errorf("DefaultErrnoRet = %v, want EPERM (1)", p.DefaultErrnoRet)
	}
	if len(p.Flags) != 0 || p.ListenerPath != "" {
		t.Errorf("unexpected flags %v / listener %q", p.Flags, p.ListenerPath)
	}
	for _, r := range p.Syscalls {
		switch r.Action {
		case specs.ActAllow:
			if r.ErrnoRet != nil {
				t.Errorf("allow rule %v has an errno", r.Names)
			}
		case specs.ActErrno:
			if r.ErrnoRet == nil || *r.ErrnoRet == 0 {
				t.Errorf("errno rule %v returns no errno (would report success)", r.Names)
			}
		default:
			// ERRNO over KILL, consistently (ESC-06); no TRACE/NOTIFY/LOG.
			t.Errorf("rule %v has action %q; only ALLOW and ERRNO are used", r.Names, r.Action)
		}
	}
}

// Native ABI only: a compat ABI in the list would reopen every allowed
// syscall through its 32-bit entry point and let i386 socketcall bypass the
// socket family filter (see seccompArchFor).
func TestSeccompArchitectures(t *testing.T) {
	for _, tc := range []struct {
		goarch string
		want   []specs.Arch
	}{
		{"amd64", []specs.Arch{specs.ArchX86_64}},
		{"arm64", []specs.Arch{specs.ArchAARCH64}},
	} {
		if got := seccompProfileFor(tc.goarch).Architectures; !slices.Equal(got, tc.want) {
			t.Errorf("%s: Architectures = %v, want %v", tc.goarch, got, tc.want)
		}
	}
}

func TestSeccompDeniedSyscalls(t *testing.T) {
	p := SeccompProfile()
	for _, name := range seccompMustDeny {
		for _, r := range rulesFor(p, name) {
			if r.Action != specs.ActErrno {
				t.Errorf("%s: rule with action %q (args %v); it must only ever fail", name, r.Action, r.Args)
			}
		}
	}
}

func TestSeccompMustAllow(t *testing.T) {
	p := SeccompProfile()
	for _, name := range seccompMustAllow {
		if !allowedUnconditionally(p, name) {
			t.Errorf("%s is not allowed", name)
		}
	}
}

func TestSeccompFilteredSyscalls(t *testing.T) {
	p := SeccompProfile()
	for _, name := range seccompFiltered {
		if allowedUnconditionally(p, name) {
			t.Errorf("%s has an unconditional allow rule", name)
		}
		if len(rulesFor(p, name)) == 0 {
			t.Errorf("%s has no rule at all; it is needed", name)
		}
	}

	// argValues returns the value compared by each allow rule for name,
	// checking that each rule has exactly one comparison of the wanted shape.
	argValues := func(name string, op specs.LinuxSeccompOperator) []uint64 {
		var vals []uint64
		for _, r := range rulesFor(p, name) {
			if len(r.Names) != 1 || len(r.Args) != 1 || r.Args[0].Index != 0 || r.Args[0].Op != op {
				t.Errorf("%s: unexpected rule %+v", name, r)
				continue
			}
			vals = append(vals, r.Args[0].Value)
			if op == specs.OpMaskedEqual {
				vals = append(vals, r.Args[0].ValueTwo)
			}
		}
		slices.Sort(vals)
		return vals
	}

	// clone: mask = every namespace flag, value 0 (ESC-05).
	const nsFlags = 0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 |
		0x20000000 | 0x40000000 | 0x02000000
	if got, want := argValues("clone", specs.OpMaskedEqual), []uint64{0, nsFlags}; !slices.Equal(got, want) {
		t.Errorf("clone: mask/value = %#x, want mask %#x value 0", got, uint64(nsFlags))
	}
	if got, want := argValues("personality", specs.OpEqualTo), []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}; !slices.Equal(got, want) {
		t.Errorf("personality: values = %#x, want %#x", got, want)
	}
	// AF_UNIX, AF_INET, AF_INET6, AF_NETLINK; never AF_PACKET (17, ESC-17).
	if got, want := argValues("socket", specs.OpEqualTo), []uint64{1, 2, 10, 16}; !slices.Equal(got, want) {
		t.Errorf("socket: families = %v, want %v", got, want)
	}
	if got, want := argValues("socketpair", specs.OpEqualTo), []uint64{1}; !slices.Equal(got, want) {
		t.Errorf("socketpair: families = %v, want %v", got, want)
	}

	// clone3: ENOSYS so libc falls back to the filtered clone.
	rules := rulesFor(p, "clone3")
	if len(rules) != 1 || rules[0].Action != specs.ActErrno || rules[0].ErrnoRet == nil || *rules[0].ErrnoRet != 38 || len(rules[0].Args) != 0 {
		t.Errorf("clone3: rules = %+v, want a single ERRNO(ENOSYS=38) rule", rules)
	}
}

// Only EQ and MASKED_EQ are used: an allowlist entry built on NE, LT or GT
// can be widened by the kernel truncating an int argument to 32 bits.
func TestSeccompArgOperators(t *testing.T) {
	for _, r := range SeccompProfile().Syscalls {
		for _, a := range r.Args {
			if a.Op != specs.OpEqualTo && a.Op != specs.OpMaskedEqual {
				t.Errorf("%v: operator %q", r.Names, a.Op)
			}
		}
	}
}

func TestSeccompNoConflictingRules(t *testing.T) {
	p := SeccompProfile()
	type verdict struct {
		action specs.LinuxSeccompAction
		errno  uint
	}
	seen := map[string]verdict{}
	unconditional := map[string]int{}
	for _, r := range p.Syscalls {
		if len(r.Names) == 0 {
			t.Errorf("rule without names: %+v", r)
		}
		v := verdict{action: r.Action}
		if r.ErrnoRet != nil {
			v.errno = *r.ErrnoRet
		}
		for _, name := range r.Names {
			if prev, ok := seen[name]; ok && prev != v {
				t.Errorf("%s appears with conflicting actions %v and %v", name, prev, v)
			}
			seen[name] = v
			if len(r.Args) == 0 {
				unconditional[name]++
			}
		}
	}
	for name, n := range unconditional {
		if n > 1 {
			t.Errorf("%s is listed unconditionally %d times", name, n)
		}
		if len(rulesFor(p, name)) > n {
			t.Errorf("%s has both an unconditional rule and argument filters", name)
		}
	}
}

func TestSeccompNamesAreX86_64Syscalls(t *testing.T) {
	known := map[string]bool{}
	for _, name := range strings.Fields(x86_64SyscallNames) {
		known[name] = true
	}
	for _, r := range SeccompProfile().Syscalls {
		for _, name := range r.Names {
			if !known[name] {
				t.Errorf("%q is not an x86_64 syscall name", name)
			}
		}
	}
	// The test's own lists must be real names too, or a typo would make a
	// denial check vacuous.
	for _, list := range [][]string{seccompMustDeny, seccompMustAllow, seccompFiltered} {
		for _, name := range list {
			if !known[name] {
				t.Errorf("test list name %q is not an x86_64 syscall name", name)
			}
		}
	}
}

func TestSeccompGroupsSorted(t *testing.T) {
	for _, group := range seccompAllowed {
		if !slices.IsSorted(group) {
			t.Errorf("group starting %q is not sorted", group[0])
		}
	}
}

func TestSeccompFreshValueAndJSON(t *testing.T) {
	a := SeccompProfile()
	a.Syscalls[0].Names[0] = "mount"
	*a.DefaultErrnoRet = 0
	b := SeccompProfile()
	if b.Syscalls[0].Names[0] == "mount" || *b.DefaultErrnoRet != 1 {
		t.Fatal("SeccompProfile shares state between calls")
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back specs.LinuxSeccomp
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"defaultErrnoRet":1`) || len(back.Syscalls) != len(b.Syscalls) {
		t.Errorf("JSON round trip lost data: %s", data)
	}
}
