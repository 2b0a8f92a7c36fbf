package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func probes() []Probe {
	return []Probe{
		{ID: "ESC-01", Title: "host secrets: /etc/shadow, /root, PID 1, the daemon's data", run: esc01},
		{ID: "ESC-02", Title: "privileges of every thread: capabilities, no_new_privs, seccomp", run: esc02},
		{ID: "ESC-03", Title: "setuid escalation", run: esc03},
		{ID: "ESC-04", Title: "mount API, old and new", run: esc04},
		{ID: "ESC-05", Title: "new namespaces", run: esc05},
		{ID: "ESC-06", Title: "kernel-surface syscalls", run: esc06},
		{ID: "ESC-11", Title: "host knobs in /proc and /sys; masked files", run: esc11},
		{ID: "ESC-12", Title: "control sockets", run: esc12},
		{ID: "ESC-13", Title: "devices", run: esc13},
		{ID: "ESC-14", Title: "other processes: signals and ptrace", run: esc14},
		{ID: "ESC-16", Title: "identity mapping and file ownership", run: esc16},
		{ID: "ESC-17", Title: "raw and unusual sockets", run: esc17},
		{ID: "ESC-18", Title: "host state: clock, reboot, swap, accounting, quotas, host name", run: esc18},
		{ID: "NET-01", Title: "network none: interfaces, public addresses, DNS", run: net01},
		{ID: "NET-04", Title: "the daemon and the host", run: net04},
		{ID: "NET-17", Title: "another sandbox's listener", run: net17},
		{ID: "RES-01", Title: "fork bomb (bounded)", Heavy: true, run: res01},
		{ID: "RES-03", Title: "memory bomb (until killed or the cap)", Heavy: true, run: res03},
		{ID: "RES-04", Title: "disk fill (until ENOSPC or the cap)", Heavy: true, run: res04},
		{ID: "RES-06", Title: "writes outside the writable areas", run: res06},
		{ID: "RES-07", Title: "file descriptor exhaustion", Heavy: true, run: res07},
		{ID: "RES-13", Title: "core dumps", run: res13},
	}
}

// Harmless arguments the kernel rejects after its permission checks.
const (
	badClockID     = 1000                       // no such clock: EINVAL
	badKexecFlag   = 0x8000                     // not a KEXEC_* flag, and arch bits 0: EINVAL
	badMountFlags  = 0x40000000                 // no such AT_*/MOVE_MOUNT_* flag: EINVAL
	badPerfFlags   = 1 << 20                    // no such PERF_FLAG_*: EINVAL
	badUffdFlags   = 0x2                        // no such userfaultfd flag: EINVAL
	badBPFCommand  = 1000                       // no such bpf command: EINVAL
	badKeyctlOp    = 9999                       // no such keyctl operation: EOPNOTSUPP
	badRebootMagic = 0                          // not LINUX_REBOOT_MAGIC1: EINVAL
	missingPath    = "/nonexistent-berth-probe" // ENOENT once permitted
	probePrefix    = ".berth-probe-"            // files the probes make in the working directory
)

// ESC-01: host secrets.
func esc01(ctx context.Context, c *Config, r *recorder) {
	// Opened, never read: the control runs on a real host.
	r.add("open /etc/shadow", openOnly("/etc/shadow", unix.O_RDONLY), "")
	names, err := dirNames("/root")
	r.add("list /root", err, countOf(names, "entries"))
	r.add("open /proc/1/root/etc/shadow", openOnly("/proc/1/root/etc/shadow", unix.O_RDONLY), "")

	pid1 := cmdline(1)
	r.allowed("pid 1", truncate(pid1, 300))
	f, err := os.Open("/proc/1/environ")
	if err != nil {
		r.add("read /proc/1/environ", err, "")
	} else {
		detail := "opened, not read: pid 1 is not a sandbox's init"
		if isSandboxInit(pid1) {
			b, _ := io.ReadAll(io.LimitReader(f, 1<<16))
			var keys []string
			for kv := range strings.SplitSeq(string(b), "\x00") {
				if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
					keys = append(keys, k)
				}
			}
			detail = "variables: " + list(keys, 40) // names only, never values
		}
		f.Close()
		r.allowed("read /proc/1/environ", detail)
	}
	if c.DataDir == "" {
		r.errorf("stat data dir", "no --data-dir given")
		return
	}
	for _, p := range []struct{ name, path string }{
		{"stat <data dir>", c.DataDir},
		{"stat <data dir>/berth.db", c.DataDir + "/berth.db"},
		{"stat /proc/1/root/<data dir>", "/proc/1/root" + c.DataDir},
	} {
		_, err := os.Stat(p.path)
		r.add(p.name, err, p.path)
	}
}

// isSandboxInit reports whether a command line is a Berth sandbox's init,
// the agent run with --pid1.
func isSandboxInit(cmdline string) bool {
	return strings.Contains(cmdline, " agent ") && strings.Contains(cmdline, "--pid1")
}

// ESC-02: the privileges of every thread of this process, from /proc.
func esc02(ctx context.Context, c *Config, r *recorder) {
	// A few goroutines blocked in syscalls make sure there are threads
	// beyond the first to look at.
	stop := make(chan struct{})
	defer close(stop)
	for range 3 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-stop
		}()
	}
	time.Sleep(20 * time.Millisecond)

	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		r.add("capabilities", err, "")
		return
	}
	var caps, nnp, sec []string
	nnpAll, secAll, missing := true, true, []string{}
	for _, t := range tasks {
		st, err := statusFields("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if v, ok := st[k]; !ok {
				missing = append(missing, k)
			} else if strings.Trim(v, "0") != "" {
				caps = append(caps, t.Name()+":"+k+"="+v)
			}
		}
		v, ok := st["NoNewPrivs"]
		if !ok {
			missing = append(missing, "NoNewPrivs")
		}
		nnpAll = nnpAll && v == "1"
		nnp = append(nnp, t.Name()+"="+v)
		v, ok = st["Seccomp"]
		if !ok {
			missing = append(missing, "Seccomp")
		}
		secAll = secAll && v == "2"
		sec = append(sec, t.Name()+"="+v)
	}
	n := fmt.Sprintf("%d threads", len(tasks))
	switch {
	case len(caps) > 0:
		r.allowed("capabilities", n+"; non-zero: "+list(caps, 10))
	case len(missing) > 0:
		r.errorf("capabilities", "%s; status lacks %s", n, list(uniq(missing), 10))
	default:
		r.denied("capabilities", "", n+"; every set 0 in every thread")
	}
	for _, a := range []struct {
		name, field, want string
		all               bool
		vals              []string
	}{{"no_new_privs", "NoNewPrivs", "1", nnpAll, nnp}, {"seccomp", "Seccomp", "2", secAll, sec}} {
		switch {
		case contains(missing, a.field):
			r.errorf(a.name, "%s; status has no %s field", n, a.field)
		case a.all:
			r.denied(a.name, "", fmt.Sprintf("%s; %s %s in every thread", n, a.field, a.want))
		default:
			r.allowed(a.name, n+"; "+a.field+" by thread: "+list(a.vals, 20))
		}
	}
}

// ESC-03: setuid escalation, with a copy of a small binary (true; this
// binary, tens of MiB, would not fit a small sandbox's disk) made setuid
// and with a setuid-root binary of the image. A root caller (the control)
// runs the child as nobody, so that a working setuid bit shows.
func esc03(ctx context.Context, c *Config, r *recorder) {
	dst := probePrefix + "suid"
	_ = os.Remove(dst)
	defer os.Remove(dst)
	src := "/proc/self/exe"
	for _, p := range []string{"/usr/bin/true", "/bin/true"} {
		if _, err := os.Stat(p); err == nil {
			src = p
			break
		}
	}
	if err := copyFile(src, dst); err != nil {
		r.errorf("chmod u+s on a copy", "copying %s: %v", src, err)
		r.errorf("exec the setuid copy", "no copy to run: %v", err)
	} else {
		err := unix.Chmod(dst, 0o4755)
		var st unix.Stat_t
		kept := unix.Stat(dst, &st) == nil && st.Mode&unix.S_ISUID != 0
		r.add("chmod u+s on a copy", err, fmt.Sprintf("setuid bit kept: %v", kept))
		f, err := os.Open(dst)
		if err != nil {
			r.errorf("exec the setuid copy", "%v", err)
		} else {
			// Through the descriptor: nobody may not traverse to it.
			addExecResult(ctx, r, "exec the setuid copy", "/proc/self/fd/3", []string{"version"}, f)
			f.Close()
		}
	}
	bin := setuidRootBinary()
	if bin == "" {
		r.errorf("exec a setuid-root binary of the image", "none found")
		return
	}
	// su waits for a password on its standard input (a pipe never
	// written to) while the child's credentials are read.
	addExecResult(ctx, r, "exec a setuid-root binary of the image", bin, []string{"root", "-c", "true"}, nil)
}

// addExecResult runs path and records whether its effective uid ever
// differed from its real one, reading its status from /proc (which keeps
// a zombie's, so a quick exit loses nothing) for up to 200ms after exec.
// The child's standard input is a pipe that stays open meanwhile.
func addExecResult(ctx context.Context, r *recorder, attempt, path string, args []string, file *os.File) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	if file != nil {
		cmd.ExtraFiles = []*os.File{file}
	}
	as := "as itself"
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		as = "as nobody"
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.errorf(attempt, "%v", err)
		return
	}
	if err := cmd.Start(); err != nil {
		stdin.Close()
		r.add(attempt, err, path)
		return
	}
	defer func() {
		// Killing works unless the child gained privileges; then the
		// end of its input ends it.
		_ = cmd.Process.Kill()
		stdin.Close()
		_ = cmd.Wait()
	}()
	status := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"
	var uid, euid string
	for i := 0; i < 40; i++ {
		st, err := statusFields(status)
		uids := strings.Fields(st["Uid"])
		if err != nil || len(uids) < 2 {
			r.errorf(attempt, "reading the child's status: %v", err)
			return
		}
		uid, euid = uids[0], uids[1]
		if uid != euid || strings.HasPrefix(st["State"], "Z") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	detail := fmt.Sprintf("%s %s: uid %s, euid %s", path, as, uid, euid)
	if uid != euid {
		r.allowed(attempt, detail)
	} else {
		r.denied(attempt, "", detail)
	}
}

// setuidRootBinary finds su, setuid root, in the root file system.
func setuidRootBinary() string {
	for _, p := range []string{"/usr/bin/su", "/bin/su"} {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_ISUID != 0 && st.Uid == 0 {
			return p
		}
	}
	return ""
}

// ESC-04: the mount API, on a directory of the working directory.
func esc04(ctx context.Context, c *Config, r *recorder) {
	dir, err := os.MkdirTemp(".", probePrefix+"mnt-")
	if err != nil {
		r.errorf("mount(tmpfs)", "making a directory to mount on: %v", err)
		return
	}
	defer os.Remove(dir)
	err = unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m")
	detail := ""
	if err == nil {
		detail = "mounted; unmounted again: " + errText(unix.Unmount(dir, unix.MNT_DETACH))
	}
	r.add("mount(tmpfs)", err, detail)
	// Not a mount point: EINVAL (or EBUSY) once permitted.
	r.add("umount2(not a mount point)", unix.Unmount(dir, 0), "")
	r.add("pivot_root(not a mount point)", unix.PivotRoot(dir, dir), "")
	// The root it already has: nothing changes if allowed.
	r.add("chroot(/)", unix.Chroot("/"), "")
	fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	closeFD(fd, err)
	r.add("fsopen(tmpfs)", err, "")
	// A detached copy of the mount, dropped when closed.
	fd, err = unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	closeFD(fd, err)
	r.add("open_tree(OPEN_TREE_CLONE)", err, "")
	r.add("mount_setattr(bad flags)", unix.MountSetattr(unix.AT_FDCWD, dir, badMountFlags, &unix.MountAttr{}), "")
	r.add("move_mount(bad flags)", unix.MoveMount(unix.AT_FDCWD, dir, unix.AT_FDCWD, dir, badMountFlags), "")
}

// ESC-05: new namespaces. Whatever is allowed is made on a thread that
// then exits, or in a child that runs "berth version".
func esc05(ctx context.Context, c *Config, r *recorder) {
	run := func(sys *syscall.SysProcAttr) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/proc/self/exe", "version")
		cmd.SysProcAttr = sys
		return cmd.Run()
	}
	r.add("clone(CLONE_NEWUSER)", run(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}), "")
	r.add("clone(CLONE_NEWNET|CLONE_NEWNS)", run(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS}), "")
	r.add("unshare(CLONE_NEWUSER)", run(&syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWUSER}), "in a child")
	r.add("unshare(CLONE_NEWNS)", onThread(func() error { return unix.Unshare(unix.CLONE_NEWNS) }), "on a thread that then exits")
	r.add("setns(/proc/self/ns/net)", onThread(func() error {
		fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Setns(fd, unix.CLONE_NEWNET)
	}), "")
	// Too small an argument: EINVAL once reached, and nothing is cloned.
	_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	r.add("clone3(size 0)", errnoErr(e), "")
}

// ESC-06: kernel-surface syscalls, each with an argument the kernel
// rejects once the call is permitted.
func esc06(ctx context.Context, c *Config, r *recorder) {
	_, _, e := unix.Syscall(unix.SYS_BPF, badBPFCommand, 0, 0)
	r.add("bpf(bad command)", errnoErr(e), "")
	fd, _, e := unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), badPerfFlags, 0)
	closeFD(int(fd), errnoErr(e))
	r.add("perf_event_open(bad flags)", errnoErr(e), "")
	_, _, e = unix.Syscall(unix.SYS_KEYCTL, badKeyctlOp, 0, 0)
	r.add("keyctl(bad operation)", errnoErr(e), "")
	_, err := unix.AddKey("", "berth-probe", nil, 0)
	r.add("add_key(empty type)", err, "")
	_, err = unix.RequestKey("", "berth-probe", "", 0)
	r.add("request_key(empty type)", err, "")
	fd, _, e = unix.Syscall(unix.SYS_USERFAULTFD, badUffdFlags, 0, 0)
	closeFD(int(fd), errnoErr(e))
	r.add("userfaultfd(bad flags)", errnoErr(e), "")
	var params [120]byte // struct io_uring_params, zero entries
	fd, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 0, uintptr(unsafe.Pointer(&params[0])), 0)
	closeFD(int(fd), errnoErr(e))
	r.add("io_uring_setup(0 entries)", errnoErr(e), "")
	// Classic AIO contexts count against fs.aio-max-nr, one limit for
	// the whole host: one context of one event, destroyed at once.
	var aioCtx uintptr
	_, _, e = unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&aioCtx)), 0)
	detail := ""
	if e == 0 {
		nr, _ := os.ReadFile("/proc/sys/fs/aio-nr")
		max, _ := os.ReadFile("/proc/sys/fs/aio-max-nr")
		detail = fmt.Sprintf("aio-nr %s of aio-max-nr %s while it lived", strings.TrimSpace(string(nr)), strings.TrimSpace(string(max)))
		unix.Syscall(unix.SYS_IO_DESTROY, aioCtx, 0, 0)
	}
	r.add("io_setup(1)", errnoErr(e), detail)
	fd2, err := unix.OpenByHandleAt(unix.AT_FDCWD, unix.NewFileHandle(1, nil), unix.O_RDONLY)
	closeFD(fd2, err)
	r.add("open_by_handle_at(empty handle)", err, "")
	_, _, e = unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, badKexecFlag, 0, 0)
	r.add("kexec_load(bad flag)", errnoErr(e), "")
	r.add("init_module(empty image)", unix.InitModule(nil, ""), "")
	// Of itself, at an unmapped address: EFAULT once permitted.
	var buf [8]byte
	_, err = unix.ProcessVMReadv(os.Getpid(), []unix.Iovec{{Base: &buf[0], Len: 1}}, []unix.RemoteIovec{{Base: 0, Len: 1}}, 0)
	r.add("process_vm_readv(self, address 0)", err, "")
	cur, _, e := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	r.add("personality(query)", errnoErr(e), fmt.Sprintf("persona %#x", cur))
	const readImpliesExec = 0x0400000
	r.add("personality(READ_IMPLIES_EXEC)", onThread(func() error {
		_, _, e := unix.Syscall(unix.SYS_PERSONALITY, cur|readImpliesExec, 0, 0)
		if e == 0 {
			unix.Syscall(unix.SYS_PERSONALITY, cur, 0, 0)
		}
		return errnoErr(e)
	}), "")
}

// ESC-11: host knobs, opened for writing but never written; masked files,
// of which at most 64 bytes are read and none shown.
func esc11(ctx context.Context, c *Config, r *recorder) {
	releaseAgent := "/sys/fs/cgroup/memory/release_agent"
	for _, p := range []string{"/sys/fs/cgroup/release_agent", "/sys/fs/cgroup/pids/release_agent", "/sys/fs/cgroup/unified/release_agent"} {
		if _, err := os.Stat(p); err == nil {
			releaseAgent = p
			break
		}
	}
	for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches",
		"/sys/kernel/profiling", "/sys/kernel/uevent_helper"} {
		r.add("open for writing "+p, openOnly(p, unix.O_WRONLY), "opened only, nothing written")
	}
	r.add("open for writing <cgroup>/release_agent", openOnly(releaseAgent, unix.O_WRONLY), releaseAgent+": opened only, nothing written")
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/interrupts"} {
		n, err := readSome(p, 64)
		switch {
		case err != nil:
			r.add("read "+p, err, "")
		case n == 0:
			r.denied("read "+p, "", "empty")
		default:
			r.allowed("read "+p, fmt.Sprintf("%d bytes (not shown)", n))
		}
	}
	names, err := dirNames("/sys/firmware")
	switch {
	case err != nil:
		r.add("list /sys/firmware", err, "")
	case len(names) == 0:
		r.denied("list /sys/firmware", "", "empty")
	default:
		r.allowed("list /sys/firmware", list(names, 20))
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	r.add("read /proc/self/cgroup", err, truncate(strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " "), 400))
}

// ESC-12: control sockets.
func esc12(ctx context.Context, c *Config, r *recorder) {
	roots := []string{"/run", "/var/run", "/tmp"}
	if c.DataDir != "" {
		roots = append(roots, c.DataDir)
	}
	socks := uniq(findSockets(roots, 6, 50000))
	if len(socks) > 0 {
		r.allowed("unix sockets under /run, /tmp and the data dir", list(socks, 20))
	} else {
		r.denied("unix sockets under /run, /tmp and the data dir", "", "none")
	}
	var abstract []string
	if f, err := os.Open("/proc/net/unix"); err != nil {
		r.add("abstract sockets in /proc/net/unix", err, "")
	} else {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 8 && strings.HasPrefix(fs[7], "@") {
				abstract = append(abstract, fs[7])
			}
		}
		f.Close()
		if len(abstract) > 0 {
			r.allowed("abstract sockets in /proc/net/unix", list(uniq(abstract), 20))
		} else {
			r.denied("abstract sockets in /proc/net/unix", "", "none")
		}
	}
	if c.DaemonPort == 0 {
		r.errorf("connect 127.0.0.1:<daemon port>", "no --daemon-port given")
		return
	}
	r.add("connect 127.0.0.1:<daemon port>", dialTCP(ctx, c, "127.0.0.1", c.DaemonPort), "")
}

// ESC-13: devices.
func esc13(ctx context.Context, c *Config, r *recorder) {
	for _, d := range []struct {
		name string
		mode uint32
		dev  int
	}{{"char", unix.S_IFCHR, int(unix.Mkdev(1, 3))}, {"block", unix.S_IFBLK, int(unix.Mkdev(7, 0))}} {
		p := probePrefix + d.name
		_ = os.Remove(p)
		err := unix.Mknod(p, d.mode|0o600, d.dev)
		if err == nil {
			os.Remove(p)
		}
		r.add("mknod("+d.name+" device)", err, "")
	}
	disks := globFirst("/dev/vd[a-z]", "/dev/sd[a-z]", "/dev/nvme0n1", "/dev/xvd[a-z]")
	for _, p := range []string{"/dev/mem", "/dev/kmsg", "/dev/kvm", "/dev/net/tun", disks} {
		r.add("open "+p, openOnly(p, unix.O_RDONLY|unix.O_NONBLOCK), "opened only")
	}
	names, err := dirNames("/dev")
	r.add("list /dev", err, list(names, 60))
}

// ESC-14: other processes.
func esc14(ctx context.Context, c *Config, r *recorder) {
	if c.DaemonPID > 0 {
		r.add("kill(<daemon pid>, 0)", unix.Kill(c.DaemonPID, 0), strconv.Itoa(c.DaemonPID))
	} else {
		r.errorf("kill(<daemon pid>, 0)", "no --daemon-pid given")
	}
	for _, pid := range c.OtherPIDs {
		r.add("kill(<other tenant's pid>, 0)", unix.Kill(pid, 0), strconv.Itoa(pid))
	}
	if isSandboxInit(cmdline(1)) {
		// A seized tracee keeps running; leaving it detaches it.
		r.add("ptrace(PTRACE_SEIZE, pid 1)", onThread(func() error { return unix.PtraceSeize(1) }), "pid 1 is the sandbox's init")
	} else {
		r.errorf("ptrace(PTRACE_SEIZE, pid 1)", "pid 1 is not a sandbox's init; not tracing a host's init")
	}
	// The agent's memory: with it, its token and its host-side
	// descriptors (the host's agent log), and the daemon's trust.
	if isSandboxInit(cmdline(1)) {
		r.add("open /proc/1/mem for writing", openOnly("/proc/1/mem", unix.O_RDWR), "pid 1 is the sandbox's init")
	} else {
		r.errorf("open /proc/1/mem for writing", "pid 1 is not a sandbox's init; not opening a host's init")
	}
	r.add("open /proc/<own child>/mem for writing", childMem(ctx), "")
	// Not attached to pid 1: ESRCH once permitted.
	_, err := unix.PtracePeekData(1, 0, make([]byte, 8))
	r.add("ptrace(PTRACE_PEEKDATA, pid 1)", err, "")
	r.add("ptrace(PTRACE_SEIZE, own child)", traceChild(ctx), "")
	r.add("kill(-1, 0)", unix.Kill(-1, 0), "signal 0 only")
}

// childMem opens the memory of a child of its own for writing.
func childMem(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sleep", "10")
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	return openOnly("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/mem", unix.O_RDWR)
}

// traceChild seizes a child of its own, on a thread that then exits.
func traceChild(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sleep", "10")
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	return onThread(func() error { return unix.PtraceSeize(cmd.Process.Pid) })
}

// ESC-16: identity mapping.
func esc16(ctx context.Context, c *Config, r *recorder) {
	b, err := os.ReadFile("/proc/self/uid_map")
	r.add("read /proc/self/uid_map", err, strings.Join(strings.Fields(string(b)), " "))
	// The file stays, for the host side to check its owner.
	p := probePrefix + "owner"
	err = os.WriteFile(p, []byte("berth probe\n"), 0o644)
	var st unix.Stat_t
	if err == nil {
		err = unix.Stat(p, &st)
	}
	r.add("create a file in the working directory", err,
		fmt.Sprintf("%s owned by uid %d gid %d; process uid %d euid %d", p, st.Uid, st.Gid, os.Getuid(), os.Geteuid()))
}

// ESC-17: raw and unusual sockets.
func esc17(ctx context.Context, c *Config, r *recorder) {
	for _, s := range []struct {
		name                  string
		family, typ, protocol int
	}{
		{"socket(AF_PACKET, SOCK_RAW)", unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))},
		{"socket(AF_INET, SOCK_RAW, ICMP)", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP},
		{"socket(AF_INET6, SOCK_RAW, ICMPV6)", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6},
		{"socket(AF_VSOCK)", unix.AF_VSOCK, unix.SOCK_STREAM, 0},
		{"socket(AF_ALG)", unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
	} {
		fd, err := unix.Socket(s.family, s.typ|unix.SOCK_CLOEXEC, s.protocol)
		closeFD(fd, err)
		r.add(s.name, err, "")
	}
}

// ESC-18: host state.
func esc18(ctx context.Context, c *Config, r *recorder) {
	r.add("clock_settime(no such clock)", unix.ClockSettime(badClockID, &unix.Timespec{}), "")
	// NULL time and NULL zone: permitted, it changes nothing.
	_, _, e := unix.Syscall(unix.SYS_SETTIMEOFDAY, 0, 0, 0)
	r.add("settimeofday(NULL, NULL)", errnoErr(e), "")
	// A modifying mode with an out-of-range tick: EINVAL once permitted.
	_, err := unix.Adjtimex(&unix.Timex{Modes: unix.ADJ_TICK, Tick: 1})
	r.add("adjtimex(ADJ_TICK, tick 1)", err, "")
	_, _, e = unix.Syscall6(unix.SYS_REBOOT, badRebootMagic, 0, 0, 0, 0, 0)
	r.add("reboot(bad magic)", errnoErr(e), "")
	p, _ := unix.BytePtrFromString(missingPath)
	_, _, e = unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(p)), 0, 0)
	r.add("swapon(missing file)", errnoErr(e), "")
	r.add("acct(missing file)", unix.Acct(missingPath+"/acct"), "")
	const qGetFmt = 0x800004
	_, _, e = unix.Syscall6(unix.SYS_QUOTACTL, uintptr(qGetFmt<<8), uintptr(unsafe.Pointer(p)), 0, 0, 0, 0)
	r.add("quotactl(Q_GETFMT, missing device)", errnoErr(e), "")

	before, _ := os.Hostname()
	where := ""
	err = onThread(func() error {
		// The control runs on a host: rename only a namespace of one thread.
		if unix.Unshare(unix.CLONE_NEWUTS) == nil {
			where = "in a new UTS namespace of one thread"
			return unix.Sethostname([]byte("berth-probe"))
		}
		if before != "sandbox" {
			return errors.New("not renaming: the host name is not a sandbox's")
		}
		where = "in the sandbox's UTS namespace"
		err := unix.Sethostname([]byte("berth-probe"))
		if err == nil {
			where += ", then set back"
			_ = unix.Sethostname([]byte(before))
		}
		return err
	})
	after, _ := os.Hostname()
	r.add("sethostname", err, fmt.Sprintf("%s; host name before %q, after %q", where, before, after))
}

// onThread runs f on a thread of its own that exits afterwards, so that
// what f changes about its thread (namespaces, persona) dies with it.
func onThread(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the runtime ends a thread locked at exit.
		ch <- f()
	}()
	return <-ch
}

// openOnly opens p with flags and closes it again.
func openOnly(p string, flags int) error {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// readSome reads at most n bytes of p and says how many it got.
func readSome(p string, n int) (int, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(n)))
	if len(b) > 0 {
		err = nil
	}
	return len(b), err
}

func dirNames(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(100000)
	if errors.Is(err, io.EOF) {
		err = nil // empty
	}
	return names, err
}

func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// statusFields parses a /proc status file.
func statusFields(p string) (map[string]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func closeFD(fd int, err error) {
	if err == nil && fd >= 0 {
		unix.Close(fd)
	}
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func countOf(names []string, what string) string {
	if names == nil {
		return ""
	}
	return fmt.Sprintf("%d %s", len(names), what)
}

func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
