package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// SpawnCommand is the berth subcommand the agent starts every process
// through when it has a workload budget (Config.WorkloadProcs or
// Config.WorkloadNProc): the helper puts itself inside the budget and then
// execs the real program, so nothing the program does runs outside it. A
// process moved in after it started could fork first and escape, and Go
// has no hook between fork and exec to do it in the child.
//
//	berth agent-spawn [--cgroup-fd=N] [--nproc=N] -- PATH ARGV...
//
// Fd 3 is a close-on-exec status pipe: it closes with nothing written once
// PATH runs, or carries the errno that stopped it.
const SpawnCommand = "agent-spawn"

// spawnStatusFD and spawnCgroupFD are the helper's descriptors.
const (
	spawnStatusFD = 3
	spawnCgroupFD = 4
)

// workloadBudget reports whether processes are started through the helper.
func (a *Agent) workloadBudget() bool {
	return a.cfg.WorkloadProcs != nil || a.cfg.WorkloadNProc > 0
}

// startProcess runs start (which calls cmd.Start, directly or through a
// PTY library) so that the process lands in the workload's budget: cmd is
// rewritten to run the spawn helper, which execs cmd's program. It returns
// once the program runs, or with the error that kept it from running, as
// cmd.Start does. Without a budget (the process runtime) it is start.
func (a *Agent) startProcess(cmd *exec.Cmd, start func() error) error {
	if !a.workloadBudget() || cmd.Err != nil {
		return start()
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("starting a process: extra files are not passed through the spawn helper")
	}
	self := a.self
	if self == "" {
		return errors.New("starting a process: the agent's own binary is unknown")
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer statusR.Close()
	path, args := cmd.Path, cmd.Args
	argv := []string{self, SpawnCommand}
	cmd.ExtraFiles = []*os.File{statusW}
	if a.cfg.WorkloadProcs != nil {
		argv = append(argv, "--cgroup-fd="+strconv.Itoa(spawnCgroupFD))
		cmd.ExtraFiles = append(cmd.ExtraFiles, a.cfg.WorkloadProcs)
	}
	if a.cfg.WorkloadNProc > 0 {
		argv = append(argv, "--nproc="+strconv.FormatUint(a.cfg.WorkloadNProc, 10))
	}
	argv = append(argv, "--", path)
	cmd.Path, cmd.Args = self, append(argv, args...)
	err = start()
	statusW.Close()
	cmd.Path, cmd.Args, cmd.ExtraFiles = path, args, nil
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(io.LimitReader(statusR, 64))
	if len(msg) == 0 {
		return nil
	}
	_ = cmd.Wait() // the helper exits at once
	n, perr := strconv.Atoi(strings.TrimSpace(string(msg)))
	if perr != nil {
		return fmt.Errorf("fork/exec %s: spawn helper: %q", path, msg)
	}
	return &os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(n)}
}

// Spawn is the spawn helper (SpawnCommand), args being what follows the
// subcommand. It never returns: it execs the program or exits 127 after
// writing the errno to the status pipe. It does as little as it can, on
// one thread: once inside the budget, a thread it had to start could be
// refused.
func Spawn(args []string) {
	runtime.LockOSThread()
	unix.CloseOnExec(spawnStatusFD)
	fail := func(err error) {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EINVAL
		}
		_, _ = unix.Write(spawnStatusFD, []byte(strconv.Itoa(int(errno))))
		os.Exit(127)
	}
	cgroupFD, nproc := -1, uint64(0)
	for len(args) > 0 && args[0] != "--" {
		k, v, _ := strings.Cut(args[0], "=")
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			fail(syscall.EINVAL)
		}
		switch k {
		case "--cgroup-fd":
			cgroupFD = int(n)
		case "--nproc":
			nproc = n
		default:
			fail(syscall.EINVAL)
		}
		args = args[1:]
	}
	if len(args) < 3 {
		fail(syscall.EINVAL)
	}
	path, argv := args[1], args[2:]
	if cgroupFD >= 0 {
		// "0" is the writer itself, all its threads.
		if _, err := unix.Write(cgroupFD, []byte("0")); err != nil {
			fail(err)
		}
		_ = unix.Close(cgroupFD)
	}
	if nproc > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: nproc, Max: nproc}); err != nil {
			fail(err)
		}
	}
	fail(unix.Exec(path, argv, os.Environ()))
}
