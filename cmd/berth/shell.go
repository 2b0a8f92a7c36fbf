package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
)

// shellReconnects bounds how often berth shell reattaches after losing its
// WebSocket while the terminal lives on.
const shellReconnects = 5

func (a *app) shellCommand() *cobra.Command {
	var (
		cwd string
		env []string
	)
	cmd := &cobra.Command{
		Use:   "shell SANDBOX [-- COMMAND [ARG...]]",
		Short: "Open an interactive shell in a sandbox, on a terminal",
		Long: `Open an interactive shell (bash if the sandbox has it, else sh) in a sandbox, on
a pseudo-terminal the size of yours, or run COMMAND on one. Your terminal is put in
raw mode, so keys (Ctrl-C included) go to the sandbox, and window size changes
follow. berth exits with the shell's exit code and deletes the terminal.

Standard input need not be a terminal: piped input is typed into the shell, and
its end is sent as Ctrl-D.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			envMap, err := parseKV(env, "--env")
			if err != nil {
				return err
			}
			req := apitype.CreateTerminalRequest{Command: shellJoin(args[1:]), Cwd: cwd, Env: envMap}
			return a.shell(cmd.Context(), c, args[0], req)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cwd, "cwd", "", "working directory, relative to the workspace")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	return cmd
}

// safeWord matches arguments the shell reads as themselves.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin quotes argv into one shell command line.
func shellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		if safeWord.MatchString(w) {
			words[i] = w
		} else {
			words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// ttyFD returns the file descriptor of v when it is a terminal.
func ttyFD(v any) (int, bool) {
	f, ok := v.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return int(f.Fd()), true
}

// localSize is the size of the local terminal, or 80x24 when there is none.
func (a *app) localSize() (cols, rows int) {
	for _, v := range []any{a.stdout, a.stdin} {
		if fd, ok := ttyFD(v); ok {
			if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
				return min(w, apitype.MaxTerminalSize), min(h, apitype.MaxTerminalSize)
			}
		}
	}
	return 80, 24
}

// shell runs a terminal in the sandbox attached to the local one, and
// deletes it at the end.
func (a *app) shell(ctx context.Context, c *client.Client, sbID string, req apitype.CreateTerminalRequest) error {
	req.Cols, req.Rows = a.localSize()
	// Finish creating the terminal even when interrupted meanwhile: one
	// created but unseen could not be deleted.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	t, err := c.CreateTerminal(createCtx, sbID, req)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.DeleteTerminal(ctx, sbID, t.ID)
	}()
	if ctx.Err() != nil {
		return exitError{exitCanceled}
	}

	exit, err := a.attach(ctx, c, sbID, t.ID)
	switch {
	case ctx.Err() != nil:
		return exitError{exitCanceled}
	case err != nil:
		return err
	case exit.ExitCode != nil:
		if *exit.ExitCode == 0 {
			return nil
		}
		return exitError{*exit.ExitCode}
	case exit.Signal != "":
		fmt.Fprintf(a.stderr, "berth: shell killed by %s\n", exit.Signal)
		return exitError{128 + agent.SignalNumber(exit.Signal)}
	}
	return exitError{exitInterrupted}
}

// attach connects the local terminal to a terminal in a sandbox until it
// exits, and returns how it ended. The local terminal is in raw mode
// meanwhile.
func (a *app) attach(ctx context.Context, c *client.Client, sbID, tid string) (*apitype.TerminalMessage, error) {
	conn, err := c.AttachTerminal(ctx, sbID, tid, 0)
	if err != nil {
		return nil, err
	}
	out := &wsConn{conn: conn}
	defer func() { out.get().CloseNow() }()

	if fd, ok := ttyFD(a.stdin); ok {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return nil, fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer term.Restore(fd, old)
	}
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { a.followResizes(ctx, out) })
	// Not waited for: a read of standard input cannot be interrupted. It
	// ends with the process.
	go a.typeInput(ctx, out)

	var offset int64
	for attempt := 0; ; {
		exit, err := a.showOutput(ctx, out, &offset)
		if exit != nil || ctx.Err() != nil {
			_ = out.get().Close(websocket.StatusNormalClosure, "")
			return exit, nil
		}
		// The connection is lost; the terminal may live on.
		o, oerr := c.TerminalOutput(ctx, sbID, tid, client.TerminalQuery{Offset: offset})
		if oerr == nil && o.Status == apitype.TerminalExited {
			if b, err := client.TerminalData(o); err == nil {
				_, _ = a.stdout.Write(b)
			}
			return &apitype.TerminalMessage{Type: apitype.TerminalMsgExit, Status: o.Status, ExitCode: o.ExitCode, Signal: o.Signal}, nil
		}
		if attempt++; attempt > shellReconnects {
			return nil, fmt.Errorf("lost the connection to the terminal: %w", err)
		}
		select {
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		case <-ctx.Done():
			return nil, nil
		}
		if next, err := c.AttachTerminal(ctx, sbID, tid, offset); err == nil {
			out.set(next)
		}
	}
}

// showOutput copies output from the current connection to standard
// output, advancing *offset, until the exit message (returned) or a
// failure.
func (a *app) showOutput(ctx context.Context, out *wsConn, offset *int64) (*apitype.TerminalMessage, error) {
	conn := out.get()
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			return nil, err
		}
		out.lastRead.Store(time.Now().UnixNano())
		if typ == websocket.MessageBinary {
			if _, err := a.stdout.Write(b); err != nil {
				return nil, err
			}
			*offset += int64(len(b))
			continue
		}
		var m apitype.TerminalMessage
		if err := json.Unmarshal(b, &m); err != nil {
			continue // a message of a later version
		}
		switch m.Type {
		case apitype.TerminalMsgExit:
			return &m, nil
		case apitype.TerminalMsgTruncated:
			*offset = m.Offset
		case apitype.TerminalMsgError:
			fmt.Fprintf(a.stderr, "\r\nberth: %s\r\n", m.Message)
		}
	}
}

// typeInput sends standard input to the terminal. At its end it sends
// Ctrl-D, which ends a shell reading at a prompt, and again whenever the
// terminal has been quiet for a second: a Ctrl-D typed ahead while the
// line discipline is still in canonical mode reaches a shell that then
// switches to raw mode (bash's readline does) as a NUL, not as the end.
func (a *app) typeInput(ctx context.Context, out *wsConn) {
	if a.stdin == nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := a.stdin.Read(buf)
		if n > 0 {
			if out.write(ctx, websocket.MessageBinary, buf[:n]) != nil && ctx.Err() != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				a.endInput(ctx, out)
			}
			return
		}
	}
}

// endInput types Ctrl-D until ctx ends: at once, then each time the
// terminal has printed nothing for a second.
func (a *app) endInput(ctx context.Context, out *wsConn) {
	const quiet = time.Second
	tick := time.NewTicker(quiet / 4)
	defer tick.Stop()
	var sent time.Time
	for {
		if last := time.Unix(0, out.lastRead.Load()); time.Since(sent) >= quiet && time.Since(last) >= quiet || sent.IsZero() {
			_ = out.write(ctx, websocket.MessageBinary, []byte{4})
			sent = time.Now()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// followResizes sends the local terminal's size whenever it changes.
func (a *app) followResizes(ctx context.Context, out *wsConn) {
	if _, ok := ttyFD(a.stdout); !ok {
		if _, ok := ttyFD(a.stdin); !ok {
			return
		}
	}
	// SIGWINCH is the local terminal telling its new size, not a request
	// to stop: it is handled here, where the size is used.
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		select {
		case <-winch:
			cols, rows := a.localSize()
			msg, _ := json.Marshal(apitype.TerminalMessage{Type: apitype.TerminalMsgResize, Cols: cols, Rows: rows})
			_ = out.write(ctx, websocket.MessageText, msg)
		case <-ctx.Done():
			return
		}
	}
}

// wsConn is the current WebSocket of an attached terminal, replaced when
// berth shell reconnects.
type wsConn struct {
	lastRead atomic.Int64 // when a frame last arrived, in Unix nanoseconds

	// mu guards conn.
	mu   sync.Mutex
	conn *websocket.Conn
}

func (w *wsConn) get() *websocket.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn
}

func (w *wsConn) set(c *websocket.Conn) {
	w.mu.Lock()
	old := w.conn
	w.conn = c
	w.mu.Unlock()
	_ = old.CloseNow()
}

// write sends one message on the current connection, waiting at most 30s.
func (w *wsConn) write(ctx context.Context, typ websocket.MessageType, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return w.get().Write(ctx, typ, b)
}
