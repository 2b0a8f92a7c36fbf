package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/wire"
)

// Terminal defaults.
const (
	DefaultTerminalBuffer = 1 << 20 // replay buffer per terminal
	DefaultMaxTerminals   = 16      // running terminals per agent; as many exited ones are kept
)

// Terminal reasons.
const ()

// terminalTERM is what terminals tell programs they are: what xterm.js and
// every common terminal emulator understand.
const terminalTERM = "xterm-256color"

// inputTimeout bounds a write to a terminal whose program does not read.
const inputTimeout = 5 * time.Second

// wsWriteTimeout bounds one WebSocket write to a client that does not read.
const wsWriteTimeout = 30 * time.Second

// wsChunk is the most output one WebSocket frame carries.
const wsChunk = 32 << 10

// terminal is a process on a pseudo-terminal, in its own session with the
// PTY as its controlling terminal.
type terminal struct {
	id   string
	out  *ring
	done chan struct{} // closed once the process is reaped and its output drained
	sid  int           // session (and process group) ID: the process's PID

	// inMu serializes input writes, which set the PTY's write deadline.
	inMu sync.Mutex
	// ptmx is the PTY's controller side, non-blocking so that deadlines and
	// Close reach a blocked read or write. Closed when the process ends.
	ptmx *os.File

	// mu guards the fields below.
	mu  sync.Mutex
	rec apitype.Terminal
}

func (t *terminal) isDone() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// view returns the terminal's record.
func (t *terminal) view() apitype.Terminal {
	st := t.out.state()
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.rec
	rec.OutputBytes = st.total
	return rec
}

// shellPath is the shell terminals run: bash where the sandbox has it (as
// people expect at a prompt), else sh.
func shellPath() string {
	if fi, err := os.Stat("/bin/bash"); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// startTerminal validates req and starts its terminal.
func (a *Agent) startTerminal(req apitype.CreateTerminalRequest) (*terminal, error) {
	if p := req.Valid(); p != nil {
		return nil, errcode.InvalidFields(p)
	}
	cwd, err := a.workDir(req.Cwd)
	if err != nil {
		return nil, err
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return nil, errcode.New(errcode.Unavailable, "agent is shutting down")
	}
	running := 0
	for _, t := range a.terms {
		if !t.isDone() {
			running++
		}
	}
	if running >= a.cfg.MaxTerminals {
		return nil, errcode.TerminalLimit.New("sandbox already runs %d terminals, the maximum", a.cfg.MaxTerminals)
	}

	shell := shellPath()
	argv := []string{shell, "-i"}
	if req.Command != "" {
		argv = []string{shell, "-c", req.Command}
	}
	env := map[string]string{"SHELL": shell}
	for k, v := range req.Env {
		env[k] = v
	}
	env["TERM"] = terminalTERM
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: filepath.Join(a.cfg.Workspace, cwd), Env: a.commandEnv(env)}
	var ptmx *os.File
	err = a.startProcess(cmd, func() (err error) {
		ptmx, err = pty.StartWithAttrs(cmd, &pty.Winsize{Cols: uint16(req.Cols), Rows: uint16(req.Rows)}, terminalAttr())
		return err
	})
	if err != nil {
		if ptmx != nil {
			ptmx.Close()
		}
		return nil, errcode.Wrap(errcode.Unavailable, err, "starting the terminal: %s", startMessage(err))
	}
	pid := cmd.Process.Pid
	resetOOMScore(pid)
	// creack/pty put the controller side in blocking mode (Fd does): a
	// blocked read could then never be interrupted. A non-blocking copy
	// goes through the runtime's poller instead.
	ctl, err := pollable(ptmx)
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("preparing the terminal: %w", err)
	}

	t := &terminal{
		id:   ident.New("term_"),
		out:  newRing(a.cfg.TerminalBuffer),
		done: make(chan struct{}),
		sid:  pid,
		ptmx: ctl,
		rec: apitype.Terminal{
			Status: apitype.TerminalRunning, Command: req.Command, Cwd: req.Cwd,
			Cols: req.Cols, Rows: req.Rows, PID: pid, StartedAt: time.Now().UTC(),
		},
	}
	t.rec.ID = t.id
	a.terms[t.id] = t
	a.termOrder = append(a.termOrder, t.id)
	a.pruneTerminalsLocked()

	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		// Ends with EIO once no process holds the PTY's other side, or
		// when the deadline below is set.
		copyOut(t.out, ctl)
	}()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		werr := cmd.Wait()
		// The session leader is gone (the kernel hung up its terminal):
		// end what is left of the session.
		signalSession(t.sid, syscall.SIGKILL)
		waitBounded(&reader, drainBound, func() { _ = ctl.SetReadDeadline(time.Now()) })
		t.inMu.Lock()
		ctl.Close()
		t.inMu.Unlock()
		t.out.close()
		t.finish(cmd.ProcessState, werr)
		close(t.done)
	}()
	return t, nil
}

// pollable returns a non-blocking duplicate of f and closes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// finish records how the terminal's process ended.
func (t *terminal) finish(ps *os.ProcessState, werr error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now().UTC()
	t.rec.Status, t.rec.FinishedAt = apitype.TerminalExited, &now
	if ps == nil {
		return
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			code := ws.ExitStatus()
			t.rec.ExitCode = &code
		case ws.Signaled():
			t.rec.Signal = signalName(ws.Signal())
		}
	}
}

// write sends input to the terminal, waiting at most inputTimeout for a
// program that does not read it.
func (t *terminal) write(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	t.inMu.Lock()
	defer t.inMu.Unlock()
	if t.isDone() {
		return errcode.TerminalExited.New("terminal %s has exited", t.id)
	}
	_ = t.ptmx.SetWriteDeadline(time.Now().Add(inputTimeout))
	if _, err := t.ptmx.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errcode.TerminalInputBlocked.New("the terminal's program is not reading its input")
		}
		return errcode.TerminalExited.New("terminal %s has exited", t.id)
	}
	return nil
}

// resize sets the terminal's size; the kernel tells its foreground
// programs with SIGWINCH.
func (t *terminal) resize(cols, rows int) error {
	t.inMu.Lock()
	defer t.inMu.Unlock()
	if t.isDone() {
		return errcode.TerminalExited.New("terminal %s has exited", t.id)
	}
	sc, err := t.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := sc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	}); err != nil {
		return err
	}
	if ioErr != nil {
		return fmt.Errorf("resizing terminal %s: %w", t.id, ioErr)
	}
	t.mu.Lock()
	t.rec.Cols, t.rec.Rows = cols, rows
	t.mu.Unlock()
	return nil
}

// hangUp ends a terminal as a hangup would: SIGHUP (and SIGCONT, for
// stopped jobs) to every process of its session, then SIGKILL after grace.
// It returns once the process is reaped, or after a bound.
func (a *Agent) hangUp(t *terminal, grace time.Duration) {
	if t.isDone() {
		return
	}
	signalSession(t.sid, syscall.SIGHUP)
	signalSession(t.sid, syscall.SIGCONT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-t.done:
		return
	case <-timer.C:
	}
	signalSession(t.sid, syscall.SIGKILL)
	timer.Reset(drainBound + time.Second)
	select {
	case <-t.done:
	case <-timer.C:
		a.log.Warn("terminal did not end after SIGKILL", "terminal_id", t.id)
	}
}

// signalSession sends sig to the process group sid and to every process
// whose session is sid: interactive shells put each job in a group of its
// own, so the leader's group alone is not the whole terminal.
func signalSession(sid int, sig syscall.Signal) {
	if sid <= 0 {
		return
	}
	_ = syscall.Kill(-sid, sig)
	for _, pid := range sessionMembers(sid) {
		_ = syscall.Kill(pid, sig)
	}
}

// sessionMembers lists the PIDs in session sid, from /proc.
func sessionMembers(sid int) []int { return procsWith(statSession, sid) }

// groupMembers lists the PIDs in process group pgid, zombies included.
func groupMembers(pgid int) []int { return procsWith(statPgrp, pgid) }

// procsWith lists the processes whose stat field (counted after the
// command name) is id.
func procsWith(field, id int) []int {
	var out []int
	want := strconv.Itoa(id)
	for pid, f := range procStats() {
		if f[field] == want {
			out = append(out, pid)
		}
	}
	return out
}

// pruneTerminalsLocked forgets the oldest exited terminals beyond
// MaxTerminals. Called with a.mu held.
func (a *Agent) pruneTerminalsLocked() {
	exited := 0
	for _, t := range a.terms {
		if t.isDone() {
			exited++
		}
	}
	a.termOrder = slices.DeleteFunc(a.termOrder, func(id string) bool {
		if exited <= a.cfg.MaxTerminals || !a.terms[id].isDone() {
			return false
		}
		delete(a.terms, id)
		exited--
		return true
	})
}

// terminalPIDsLocked adds the PIDs of running terminals' processes, which
// their own goroutines wait for, to pids. Called with a.mu held.
func (a *Agent) terminalPIDsLocked(pids map[int]bool) {
	for _, t := range a.terms {
		if !t.isDone() {
			pids[t.sid] = true
		}
	}
}

// killTerminals ends every terminal, at shutdown.
func (a *Agent) killTerminals() {
	a.mu.Lock()
	var live []*terminal
	for _, t := range a.terms {
		if !t.isDone() {
			live = append(live, t)
		}
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range live {
		wg.Go(func() { a.hangUp(t, 0) })
	}
	wg.Wait()
}

func (a *Agent) lookupTerminal(r *http.Request) (*terminal, error) {
	id := r.PathValue("tid")
	a.mu.Lock()
	t, ok := a.terms[id]
	a.mu.Unlock()
	if !ok || !validID(id, "term_") {
		return nil, errcode.TerminalNotFound.New("terminal %q not found", id)
	}
	return t, nil
}

func (a *Agent) handleCreateTerminal(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.CreateTerminalRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.startTerminal(req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusCreated, t.view())
}

func (a *Agent) handleListTerminals(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	ts := make([]*terminal, 0, len(a.termOrder))
	for i := len(a.termOrder) - 1; i >= 0; i-- {
		ts = append(ts, a.terms[a.termOrder[i]])
	}
	a.mu.Unlock()
	out := apitype.TerminalList{Terminals: []apitype.Terminal{}}
	for _, t := range ts {
		out.Terminals = append(out.Terminals, t.view())
	}
	wire.Encode(w, http.StatusOK, out)
}

// terminalQuery reads offset, wait_ms and max_bytes from a terminal read.
func terminalQuery(r *http.Request, bufSize int64) (offset int64, wait time.Duration, maxBytes int64, err error) {
	v := r.URL.Query()
	num := func(name string, dflt, maxV int64) (int64, error) { return wire.QueryInt(v, name, dflt, maxV) }
	if offset, err = num("offset", 0, 1<<62); err != nil {
		return
	}
	var ms int64
	if ms, err = num("wait_ms", 0, MaxWait.Milliseconds()); err != nil {
		return
	}
	if maxBytes, err = num("max_bytes", bufSize, MaxOutputWindow); err != nil {
		return
	}
	return offset, time.Duration(ms) * time.Millisecond, maxBytes, nil
}

// handleTerminalOutput answers a window of the replay buffer. With
// wait_ms it waits for output past offset, or the end of the terminal.
func (a *Agent) handleTerminalOutput(w http.ResponseWriter, r *http.Request) {
	offset, wait, maxBytes, err := terminalQuery(r, int64(a.cfg.TerminalBuffer))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.lookupTerminal(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
	wait:
		for st := t.out.state(); st.total <= offset && !st.closed; st = t.out.state() {
			select {
			case <-st.changed:
			case <-timer.C:
				break wait
			case <-r.Context().Done():
				break wait
			}
		}
	}
	// Status first: once it says exited, the output below is complete.
	rec := t.view()
	b, start, next, truncated := t.out.read(offset, maxBytes)
	wire.Encode(w, http.StatusOK, apitype.TerminalOutput{
		DataBase64: base64.StdEncoding.EncodeToString(b), Offset: start, NextOffset: next, Truncated: truncated,
		Status: rec.Status, ExitCode: rec.ExitCode, Signal: rec.Signal,
	})
}

func (a *Agent) handleTerminalInput(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.TerminalInputRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	data, err := inputData(req.Data, req.DataBase64)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.lookupTerminal(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := t.write(data); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Agent) handleTerminalResize(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.ResizeTerminalRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.lookupTerminal(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := t.resize(req.Cols, req.Rows); err != nil {
		a.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusOK, t.view())
}

// handleDeleteTerminal hangs a terminal up, waits for its processes to
// end, and forgets it.
func (a *Agent) handleDeleteTerminal(w http.ResponseWriter, r *http.Request) {
	t, err := a.lookupTerminal(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.hangUp(t, a.cfg.KillGrace)
	a.mu.Lock()
	if a.terms[t.id] == t {
		delete(a.terms, t.id)
		a.termOrder = slices.DeleteFunc(a.termOrder, func(id string) bool { return id == t.id })
	}
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	has := func(key, token string) bool {
		for _, v := range r.Header.Values(key) {
			for f := range strings.SplitSeq(v, ",") {
				if strings.EqualFold(strings.TrimSpace(f), token) {
					return true
				}
			}
		}
		return false
	}
	return has("Connection", "upgrade") && has("Upgrade", "websocket")
}

// handleTerminalWS attaches a WebSocket client to a terminal: output from
// ?offset= on as binary frames, then an exit message when the terminal
// ends; binary frames from the client are input, text frames JSON control
// messages (resize). Any number of clients may attach at once.
func (a *Agent) handleTerminalWS(w http.ResponseWriter, r *http.Request) {
	offset, _, _, err := terminalQuery(r, int64(a.cfg.TerminalBuffer))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.lookupTerminal(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !isWebSocket(r) {
		a.fail(w, r, errcode.WebsocketRequired.New("this route needs a WebSocket upgrade request"))
		return
	}
	// No origin check: the API takes only bearer tokens, never cookies, so
	// a page on another site cannot attach with someone's credentials.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the request
	}
	conn.SetReadLimit(wire.MaxJSONBody)
	ctx, cancel := context.WithCancel(r.Context())
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		defer cancel()
		a.terminalInput(ctx, conn, t)
	}()
	if a.terminalOutput(ctx, conn, t, offset) {
		_ = conn.Close(websocket.StatusNormalClosure, "terminal exited")
	}
	cancel()
	_ = conn.CloseNow()
	<-inputDone
}

// terminalOutput sends the terminal's output from offset until it exits
// (then it sends the exit message and returns true) or ctx ends.
func (a *Agent) terminalOutput(ctx context.Context, conn *websocket.Conn, t *terminal, offset int64) bool {
	send := func(typ websocket.MessageType, b []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
		defer cancel()
		return conn.Write(wctx, typ, b) == nil
	}
	for {
		// Observe the end before reading, so that nothing written before
		// it can be missed.
		done := t.isDone()
		st := t.out.state()
		for {
			b, start, next, truncated := t.out.read(offset, wsChunk)
			if truncated {
				msg, _ := json.Marshal(apitype.TerminalMessage{Type: apitype.TerminalMsgTruncated, Offset: start})
				if !send(websocket.MessageText, msg) {
					return false
				}
			}
			offset = next
			if len(b) == 0 {
				break
			}
			if !send(websocket.MessageBinary, b) {
				return false
			}
		}
		if done {
			rec := t.view()
			msg, _ := json.Marshal(apitype.TerminalMessage{Type: apitype.TerminalMsgExit, Offset: offset,
				Status: rec.Status, ExitCode: rec.ExitCode, Signal: rec.Signal})
			return send(websocket.MessageText, msg)
		}
		select {
		case <-st.changed:
		case <-t.done:
		case <-ctx.Done():
			return false
		}
	}
}

// terminalInput relays a client's frames to the terminal until the client
// goes away or ctx ends. A failed write or a bad control message is
// reported to the client as an error message; the connection stays up.
func (a *Agent) terminalInput(ctx context.Context, conn *websocket.Conn, t *terminal) {
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			return
		}
		switch typ {
		case websocket.MessageBinary:
			err = t.write(b)
		case websocket.MessageText:
			var m apitype.TerminalMessage
			switch err = wire.DecodeJSON(bytes.NewReader(b), &m); {
			case err != nil:
			case m.Type == apitype.TerminalMsgResize:
				req := apitype.ResizeTerminalRequest{Cols: m.Cols, Rows: m.Rows}
				if p := req.Valid(); p != nil {
					err = errcode.InvalidFields(p)
				} else {
					err = t.resize(m.Cols, m.Rows)
				}
			default:
				err = errcode.New(errcode.Invalid, "unknown message type %q", m.Type)
			}
		}
		if err != nil {
			msg, _ := json.Marshal(apitype.TerminalMessage{Type: apitype.TerminalMsgError, Message: wire.Detail(err, "").Message})
			wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
			werr := conn.Write(wctx, websocket.MessageText, msg)
			cancel()
			if werr != nil {
				return
			}
		}
	}
}
