package agent

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes the agent inherit processes its commands orphan, so
// it can reap them and, on shutdown, kill them.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// commandAttr puts a command in its own process group (killed as one) and
// kills it if the agent dies.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
