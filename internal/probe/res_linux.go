package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RES-01: start children (sleep) until fork fails or c.ForkMax run, then
// kill and reap them all.
func res01(ctx context.Context, c *Config, r *recorder) {
	const attempt = "fork until it fails"
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		r.errorf(attempt, "%v", err)
		return
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		r.errorf(attempt, "%v", err)
		return
	}
	defer devnull.Close()
	fd := devnull.Fd()
	attr := &syscall.ProcAttr{
		Files: []uintptr{fd, fd, fd},
		// Should this probe die, its children die with it.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	// The Go runtime may need a thread while fork fails for want of pids:
	// start some now, while it can, and let them idle.
	warmThreads(8)
	var pids []int
	var ferr error
	for len(pids) < c.ForkMax && ctx.Err() == nil {
		pid, err := syscall.ForkExec(sleep, []string{"sleep", "300"}, attr)
		if err != nil {
			ferr = err
			break
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}
	detail := fmt.Sprintf("%d children started, killed and reaped", len(pids))
	if ferr == nil {
		r.allowed(attempt, detail+"; stopped at the cap")
		return
	}
	r.add(attempt, ferr, detail)
}

// warmThreads makes the runtime start n threads and leaves them idle for
// reuse.
func warmThreads(n int) {
	done := make(chan struct{})
	ready := make(chan struct{}, n)
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready <- struct{}{}
			<-done
		}()
	}
	for range n {
		<-ready
	}
	close(done)
}

// RES-03: allocate and touch memory, 4 MiB at a time, up to
// c.MemoryMaxMB. Under a memory limit the OOM killer ends this process
// first, and nothing is printed.
func res03(ctx context.Context, c *Config, r *recorder) {
	debug.SetGCPercent(-1)
	defer debug.SetGCPercent(100)
	const chunk = 4 << 20
	var chunks [][]byte
	total := 0
	for total < c.MemoryMaxMB<<20 && ctx.Err() == nil {
		b := make([]byte, chunk)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		chunks = append(chunks, b)
		total += chunk
	}
	r.allowed("allocate and touch memory", fmt.Sprintf("%d MiB, not killed", total>>20))
	runtime.KeepAlive(chunks)
}

// RES-04: write a file in the working directory until the disk is full
// or c.DiskMaxMB MiB are written, then remove it.
func res04(ctx context.Context, c *Config, r *recorder) {
	const attempt = "write until the disk is full"
	p := probePrefix + "fill"
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		r.errorf(attempt, "%v", err)
		return
	}
	defer os.Remove(p)
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 0xb5
	}
	var written int64
	var werr error
	for written < int64(c.DiskMaxMB)<<20 && ctx.Err() == nil {
		n, err := f.Write(buf)
		written += int64(n)
		if err != nil {
			werr = err
			break
		}
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	var st unix.Statfs_t
	size := "unknown"
	if unix.Statfs(".", &st) == nil {
		size = strconv.FormatUint(st.Blocks*uint64(st.Bsize)>>20, 10) + " MiB"
	}
	detail := fmt.Sprintf("wrote %d MiB (%d bytes); file system size %s", written>>20, written, size)
	if werr == nil {
		detail += "; stopped at the cap"
	}
	r.add(attempt, werr, detail)
}

// RES-06: create a file in the read-only parts of the root, removing
// whatever gets created; and how the root is mounted.
func res06(ctx context.Context, c *Config, r *recorder) {
	if opts, err := rootMountOptions(); err != nil {
		r.errorf("root mounted read-only", "%v", err)
	} else if slices.Contains(strings.Split(opts, ","), "ro") {
		r.denied("root mounted read-only", "", "/ is mounted "+opts)
	} else {
		r.allowed("root mounted read-only", "/ is mounted "+opts)
	}
	for _, dir := range []string{"/", "/etc", "/usr", "/usr/bin"} {
		p := filepath.Join(dir, probePrefix+strconv.Itoa(os.Getpid()))
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
			unix.Unlink(p)
		}
		r.add("create a file in "+dir, err, "")
	}
}

// RES-07: open descriptors until the limit or c.FDMax, then close them.
func res07(ctx context.Context, c *Config, r *recorder) {
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	var fds []int
	var ferr error
	for len(fds) < c.FDMax {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ferr = err
			break
		}
		fds = append(fds, fd)
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	detail := fmt.Sprintf("%d descriptors opened; RLIMIT_NOFILE %d (hard %d)", len(fds), rl.Cur, rl.Max)
	if ferr == nil {
		r.allowed("open until it fails", detail+"; stopped at the cap")
		return
	}
	r.add("open until it fails", ferr, detail)
}

// RES-13: core dumps.
func res13(ctx context.Context, c *Config, r *recorder) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &rl); err != nil {
		r.add("RLIMIT_CORE", err, "")
		return
	}
	detail := fmt.Sprintf("soft %d, hard %d", rl.Cur, rl.Max)
	if rl.Cur == 0 && rl.Max == 0 {
		r.denied("RLIMIT_CORE", "", detail)
	} else {
		r.allowed("RLIMIT_CORE", detail)
	}
}

// rootMountOptions returns the per-mount options of / (the last mount on
// it) from /proc/self/mountinfo.
func rootMountOptions() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	opts := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[4] == "/" {
			opts = f[5]
		}
	}
	if opts == "" {
		return "", errors.New("no mount on / in /proc/self/mountinfo")
	}
	return opts, nil
}
