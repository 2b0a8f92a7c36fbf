package runtimes

import (
	"bufio"
	"bytes"
	"context"

	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// Process runs the agent as a host process in its own session, in
// the sandbox's workspace directory. It isolates nothing: use it only for
// trusted code.
type Process struct{}

var _ sandbox.Runtime = Process{}

func (Process) Name() string     { return "process" }
func (Process) Isolated() bool   { return false }
func (Process) Available() error { return nil }

// agentStartTimeout bounds how long an agent may take to listen.
const agentStartTimeout = 10 * time.Second

// Start execs "berth agent" with a fresh session, so it outlives the daemon
// and can be re-adopted. The token travels on a pipe (fd 3), never in argv
// or the environment; the agent says it is ready on another (fd 4).
func (Process) Start(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout, a sandbox.AgentArgs) (int, error) {
	logf, err := os.OpenFile(l.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer tokR.Close()
	defer tokW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer readyR.Close()
	defer readyW.Close()
	lnF, err := agent.ListenFile(l.Socket)
	if err != nil {
		return 0, fmt.Errorf("making the agent's socket: %w", err)
	}
	defer lnF.Close()

	cmd := exec.Command(a.Binary, "agent", "--sandbox-id", sb.ID,
		"--workspace", l.Workspace, "--state", l.State,
		"--output-cap", strconv.FormatInt(a.OutputCap, 10),
		"--max-commands", strconv.Itoa(a.MaxCommands),
		"--max-history", strconv.Itoa(a.MaxHistory),
		"--max-upload", strconv.FormatInt(a.MaxUpload, 10),
		"--listen-fd", "3", "--token-fd", "4", "--ready-fd", "5")
	cmd.Dir = l.Workspace
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{lnF, tokR, readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting agent: %w", err)
	}
	// Reap the agent if it exits while this daemon lives; after a daemon
	// restart it is no longer our child and init (or a subreaper) reaps it.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	closeAll(lnF, tokR, readyW)
	if _, err := tokW.WriteString(a.Token + "\n"); err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("passing agent token: %w", err)
	}
	tokW.Close()

	if err := waitReady(ctx, readyR, l.Log); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// waitReady waits for an agent to say "ready" on r, at most
// agentStartTimeout; a failure quotes the agent's log.
func waitReady(ctx context.Context, r io.Reader, log string) error {
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	t := time.NewTimer(agentStartTimeout)
	defer t.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("agent did not start: %s", logTail(log))
		}
		return nil
	case <-t.C:
		return errcode.AgentStartTimeout.New("agent did not listen within %s", agentStartTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logTail returns the last line of the agent's log, for error messages.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	if len(b) == 0 {
		return "no output"
	}
	return string(b)
}

// Alive checks the recorded PID still runs this sandbox's agent, so a
// recycled PID is never taken for it.
func (Process) Alive(sb *sandbox.Sandbox, l sandbox.Layout) bool {
	return sb.AgentPID > 0 && isAgent(sb.AgentPID, l)
}

// isAgent reports whether pid runs the agent of the sandbox laid out at l:
// "berth agent" with l's state directory.
func isAgent(pid int, l sandbox.Layout) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 1 && args[1] == "agent" && bytes.Contains(b, []byte("\x00"+l.State+"\x00"))
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Stop asks the agent to end its commands and exit (SIGTERM), then kills
// whatever of the sandbox's processes are left: the agent's process tree,
// and processes whose working directory is in the sandbox, which catches
// those orphaned by an agent that died without cleaning up. (The process
// runtime has no cgroup to kill by; the isolated runtimes do.)
func (Process) Stop(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout) error {
	// A live agent is a subreaper: everything the sandbox started is in its
	// process tree. Only when it is gone are orphans looked for by working
	// directory (which could also catch an operator's shell in there).
	if pid := sb.AgentPID; pid > 0 && isAgent(pid, l) {
		tree := descendants(pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(5 * time.Second)
		for isAgent(pid, l) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if isAgent(pid, l) {
			tree = append(tree, descendants(pid)...)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, p := range tree {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		for isAgent(pid, l) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		left := processesOf(l)
		if len(left) == 0 {
			return nil
		}
		if attempt == 100 {
			return fmt.Errorf("processes %v of sandbox %s survive SIGKILL", left, sb.ID)
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ctx.Err()
}

// processesOf lists the live processes that belong to a sandbox: its
// agent, and every process whose working directory is inside it.
func processesOf(l sandbox.Layout) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if isAgent(pid, l) {
			out = append(out, pid)
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err == nil && (cwd == l.Dir || strings.HasPrefix(cwd, l.Dir+"/")) {
			out = append(out, pid)
		}
	}
	return out
}

// descendants returns every process below pid.
func descendants(pid int) []int {
	tree := agent.ProcessTree()
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range tree[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
