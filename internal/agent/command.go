package agent

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// StartRequest asks the agent to start a command. The daemon picks the ID,
// so a start it retries after losing the answer is idempotent.
type StartRequest struct {
	ID string `json:"id"`
	apitype.CreateCommandRequest
}

// drainBound is how long the agent waits, after a command's shell exited and
// its process group was killed, for processes that escaped the group to
// close its output pipes.
const drainBound = 2 * time.Second

// command is one command the agent started (or loaded from its state
// directory after a restart).
type command struct {
	id     string
	dir    string
	stdout *output
	stderr *output
	done   chan struct{}

	// mu guards the fields below.
	mu         sync.Mutex
	rec        apitype.Command // without output fields
	stdin      *os.File        // nil when closed or never opened
	killStatus string          // canceled or timed_out once we began killing
	pgid       int
}

// meta is what the agent persists about a command in meta.json.
type meta struct {
	apitype.Command
	StdoutTotal int64 `json:"stdout_total"`
	StderrTotal int64 `json:"stderr_total"`
}

func (c *command) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// start validates req and starts its command. It returns the new record, or
// the existing one when req.ID is already known.
func (a *Agent) start(req StartRequest) (*command, error) {
	if !validID(req.ID, "cmd_") {
		return nil, errcode.New(errcode.Invalid, "command id %q is malformed", req.ID)
	}
	argv, err := commandArgv(req.CreateCommandRequest)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		return nil, errcode.New(errcode.Invalid, "timeout_ms must be positive")
	}
	cwd, err := a.workDir(req.Cwd)
	if err != nil {
		return nil, err
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cmds[req.ID]; ok {
		return c, nil
	}
	if a.closing {
		return nil, errcode.New(errcode.Unavailable, "agent is shutting down")
	}
	if a.running >= a.cfg.MaxCommands {
		return nil, errcode.CommandLimit.New("sandbox already runs %d commands, the maximum", a.cfg.MaxCommands)
	}

	c, err := a.newCommand(req, argv, cwd, timeout)
	if err != nil {
		return nil, err
	}
	a.cmds[c.id] = c
	a.order = append(a.order, c.id)
	if !c.isDone() {
		a.running++
	}
	return c, nil
}

func commandArgv(req apitype.CreateCommandRequest) ([]string, error) {
	switch {
	case req.Command != "" && len(req.Argv) > 0:
		return nil, errcode.New(errcode.Invalid, "set command or argv, not both")
	case req.Command != "":
		return []string{"/bin/sh", "-c", req.Command}, nil
	case len(req.Argv) > 0 && req.Argv[0] != "":
		return req.Argv, nil
	}
	return nil, errcode.New(errcode.Invalid, "command or argv is required")
}

// workDir validates the cwd of a command, terminal or service (relative to
// the workspace, or absolute under it; "" is the workspace) and returns it
// cleaned: it must resolve, inside the workspace, to a directory. Services
// are checked with it when put, as commands are, and again at each start.
func (a *Agent) workDir(cwd string) (string, error) {
	clean, err := a.cleanPath(cmp.Or(cwd, "."), true)
	if err != nil || clean == "." {
		return clean, err
	}
	if fi, err := a.root.Stat(clean); err != nil {
		return "", fileError(err, cwd)
	} else if !fi.IsDir() {
		return "", errcode.NotDirectory.New("cwd %q is not a directory", cwd)
	}
	return clean, nil
}

// newCommand creates the command's state and starts its process. A command
// whose process cannot start is returned already finished, as failed.
// Called with a.mu held.
func (a *Agent) newCommand(req StartRequest, argv []string, cwd string, timeout time.Duration) (_ *command, err error) {
	dir := filepath.Join(a.cfg.StateDir, "cmds", req.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating command state: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	outF, err := os.OpenFile(filepath.Join(dir, "stdout"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	errF, err := os.OpenFile(filepath.Join(dir, "stderr"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		outF.Close()
		return nil, err
	}
	c := &command{
		id:     req.ID,
		dir:    dir,
		stdout: newOutput(outF, a.cfg.OutputCap),
		stderr: newOutput(errF, a.cfg.OutputCap),
		done:   make(chan struct{}),
		rec: apitype.Command{
			ID: req.ID, SandboxID: a.cfg.SandboxID, Status: apitype.CommandRunning, Command: req.Command, Argv: argv,
			Cwd: req.Cwd, TimeoutMS: timeout.Milliseconds(), StartedAt: time.Now().UTC(),
		},
	}
	if req.Command != "" {
		c.rec.Argv = nil // the shell string says it all
	}

	env := a.commandEnv(req.Env)
	// Not exec.Command: it would search the agent's PATH, not the
	// command's, and cost a round of stat calls on every start.
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: filepath.Join(a.cfg.Workspace, cwd), Env: env, SysProcAttr: commandAttr()}
	if !strings.Contains(argv[0], "/") {
		cmd.Path, cmd.Err = lookPath(argv[0], envValue(env, "PATH"), cmd.Dir)
	}

	// Pipes we own, so that the process's exit (not EOF on its output) ends
	// the command, and escaped descendants cannot hold it open forever.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if req.Stdin != "" || req.StdinOpen {
		inR, w, err := os.Pipe()
		if err != nil {
			closeAll(outR, outW, errR, errW)
			return nil, err
		}
		cmd.Stdin, inW = inR, w
		defer inR.Close()
	}
	startErr := a.startProcess(cmd, cmd.Start)
	closeAll(outW, errW)
	if startErr != nil {
		closeAll(outR, errR, inW)
		c.finish(-1, "", apitype.CommandFailed, "start: "+startMessage(startErr))
		a.persist(c)
		return c, nil
	}
	c.pgid = cmd.Process.Pid
	c.rec.PID = cmd.Process.Pid
	resetOOMScore(c.pgid)
	// meta.json is written when the command ends. A command the agent
	// dies in the middle of has none and is dropped at the next load; the
	// daemon's store, which recorded the start, marks it interrupted.

	var copiers sync.WaitGroup
	copiers.Add(2)
	go func() { defer copiers.Done(); copyOut(c.stdout, outR) }()
	go func() { defer copiers.Done(); copyOut(c.stderr, errR) }()

	if inW != nil {
		c.stdin = inW
		if req.Stdin != "" {
			go c.writeInitialStdin(req.Stdin, !req.StdinOpen)
		} else if !req.StdinOpen {
			c.closeStdin()
		}
	}

	timer := time.AfterFunc(timeout, func() { a.kill(c, apitype.CommandTimedOut) })
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		werr := cmd.Wait()
		timer.Stop()
		// The shell is gone: end what it left behind in its group.
		_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
		waitBounded(&copiers, drainBound, func() { closeAll(outR, errR) })
		closeAll(outR, errR)
		c.closeStdin()
		a.finished(c, cmd.ProcessState, werr)
	}()
	return c, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// encodeOutput renders output bytes for JSON: as text, or as base64 when
// asked (text readers get U+FFFD for bytes that are not UTF-8).
func encodeOutput(b []byte, b64 bool) string {
	if b64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return string(b)
}

// copyOut copies r to w until r fails (EOF included). w never fails.
func copyOut(w io.Writer, r *os.File) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// waitBounded waits for wg, calling onTimeout once if it takes longer than d.
func waitBounded(wg *sync.WaitGroup, d time.Duration, onTimeout func()) {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(d):
		onTimeout()
		<-ch
	}
}

func startMessage(err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return fmt.Sprintf("%s: %v", ee.Name, ee.Err)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %v", filepath.Base(pe.Path), pe.Err)
	}
	return err.Error()
}

func (c *command) writeInitialStdin(data string, closeAfter bool) {
	c.mu.Lock()
	w := c.stdin
	c.mu.Unlock()
	if w != nil {
		_, _ = w.WriteString(data) // a command that exits early closes the pipe: fine
	}
	if closeAfter {
		c.closeStdin()
	}
}

func (c *command) closeStdin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
	}
}

// writeStdin writes data to the command's standard input, waiting at most a
// few seconds for a command that does not read.
func (c *command) writeStdin(data []byte, eof bool) error {
	c.mu.Lock()
	w := c.stdin
	c.mu.Unlock()
	if c.isDone() {
		return errcode.CommandFinished.New("command %s has finished", c.id)
	}
	if w == nil {
		return errcode.StdinClosed.New("standard input of %s is closed (start the command with stdin_open to write to it)", c.id)
	}
	if len(data) > 0 {
		_ = w.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := w.Write(data); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return errcode.StdinBlocked.New("command is not reading its standard input")
			}
			return errcode.StdinClosed.New("writing standard input: %v", err)
		}
	}
	if eof {
		c.closeStdin()
	}
	return nil
}

// kill ends a running command's process group: SIGTERM, then SIGKILL after
// the grace period. status (canceled or timed_out) is what it will report.
func (a *Agent) kill(c *command, status string) {
	c.mu.Lock()
	if c.killStatus != "" || c.pgid == 0 || c.isDone() {
		c.mu.Unlock()
		return
	}
	c.killStatus = status
	pgid := c.pgid
	c.mu.Unlock()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-c.done:
		case <-time.After(a.cfg.KillGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
}

// finished records how c's process ended and persists it.
func (a *Agent) finished(c *command, ps *os.ProcessState, werr error) {
	c.mu.Lock()
	killStatus := c.killStatus
	c.mu.Unlock()
	status, reason, code, sig := apitype.CommandExited, "", -1, ""
	if ps != nil {
		ws := ps.Sys().(syscall.WaitStatus)
		switch {
		case ws.Exited():
			code = ws.ExitStatus()
		case ws.Signaled():
			sig = signalName(ws.Signal())
		}
	} else if werr != nil {
		status, reason = apitype.CommandFailed, werr.Error()
	}
	if killStatus != "" {
		status = killStatus
	}
	c.finish(code, sig, status, reason)
	a.persist(c)

	a.mu.Lock()
	a.running--
	a.pruneLocked()
	a.mu.Unlock()
}

// finish marks c done. code < 0 means no exit code.
func (c *command) finish(code int, sig, status, reason string) {
	c.stdout.close()
	c.stderr.close()
	c.mu.Lock()
	now := time.Now().UTC()
	c.rec.Status, c.rec.Reason, c.rec.Signal, c.rec.FinishedAt = status, reason, sig, &now
	if code >= 0 {
		c.rec.ExitCode = &code
	}
	c.mu.Unlock()
	close(c.done)
}

// persist writes c's metadata to its state directory, atomically.
func (a *Agent) persist(c *command) {
	c.mu.Lock()
	m := meta{Command: c.rec, StdoutTotal: c.stdout.state().total, StderrTotal: c.stderr.state().total}
	c.mu.Unlock()
	b, err := json.Marshal(m)
	if err == nil {
		tmp := filepath.Join(c.dir, "meta.json.tmp")
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(c.dir, "meta.json"))
		}
	}
	if err != nil {
		a.log.Error("persisting command", "command_id", c.id, "err", err)
	}
}

// pruneLocked forgets the oldest finished commands beyond the history bound.
// Called with a.mu held.
func (a *Agent) pruneLocked() {
	finished := len(a.order) - a.running
	for i := 0; finished > a.cfg.MaxHistory && i < len(a.order); {
		c := a.cmds[a.order[i]]
		if !c.isDone() {
			i++
			continue
		}
		a.forgetLocked(c)
		finished--
	}
}

func (a *Agent) forgetLocked(c *command) {
	delete(a.cmds, c.id)
	a.order = slices.DeleteFunc(a.order, func(id string) bool { return id == c.id })
	c.stdout.f.Close()
	c.stderr.f.Close()
	os.RemoveAll(c.dir)
}

// view renders c with a window of its output.
func (c *command) view(q outputQuery) (apitype.Command, error) {
	c.mu.Lock()
	rec := c.rec
	c.mu.Unlock()
	for _, s := range []struct {
		o                  *output
		offset             int64
		data               *string
		start, next, total *int64
		truncated          *bool
	}{
		{c.stdout, q.stdoutOffset, &rec.Stdout, &rec.StdoutOffset, &rec.NextStdoutOffset, &rec.StdoutBytes, &rec.StdoutTruncated},
		{c.stderr, q.stderrOffset, &rec.Stderr, &rec.StderrOffset, &rec.NextStderrOffset, &rec.StderrBytes, &rec.StderrTruncated},
	} {
		st := s.o.state()
		*s.total, *s.truncated = st.total, st.truncated()
		if q.maxBytes == 0 {
			*s.start, *s.next = min(s.offset, st.retained), min(s.offset, st.retained)
			continue
		}
		b, next, err := s.o.read(s.offset, q.maxBytes)
		if err != nil {
			return rec, fmt.Errorf("reading output of %s: %w", c.id, err)
		}
		*s.start, *s.next = next-int64(len(b)), next
		*s.data = encodeOutput(b, q.base64)
	}
	if q.base64 {
		rec.Encoding = "base64"
	}
	return rec, nil
}

// outputQuery selects a window of a command's output.
type outputQuery struct {
	stdoutOffset, stderrOffset int64
	maxBytes                   int64 // 0: no output, only counters
	base64                     bool
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

// SignalNumber returns the number of a signal named by signalName, or 0.
func SignalNumber(name string) int {
	for i := 1; i < 65; i++ {
		if signalName(syscall.Signal(i)) == name {
			return i
		}
	}
	return 0
}

// lookPath finds file in the directories of pathEnv, resolving relative
// entries against dir, as the command's own shell would.
func lookPath(file, pathEnv, dir string) (string, error) {
	for d := range strings.SplitSeq(pathEnv, ":") {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// validID reports whether id is prefix followed by 1-64 lowercase
// alphanumerics: safe as a file name.
func validID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" || len(rest) > 64 {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
