package agent

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes the agent inherit processes its commands orphan, so
// it can reap them and, on shutdown, kill them. It also makes the agent
// non-dumpable: commands run as the same uid and could otherwise read and
// write its memory (/proc/<pid>/mem, ptrace) and take its token. Commands
// are dumpable again, as execve makes every ordinary program.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// resetOOMScore puts a command's OOM score adjustment back to 0: the agent
// of an isolated sandbox runs at -1000 so that the OOM killer never picks
// it, and children inherit that. Raising it needs no privilege.
func resetOOMScore(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("0"), 0)
}

// commandAttr puts a command in its own process group (killed as one) and
// kills it if the agent dies.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminalAttr starts a terminal's process in a session of its own with the
// PTY (its standard input) as controlling terminal, and kills it if the
// agent dies.
func terminalAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
}
