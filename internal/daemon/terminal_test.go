package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// termWait bounds every wait for terminal output in these tests.
const termWait = 30 * time.Second

func newTerminal(t *testing.T, d *testenv.Daemon, sbID string, req apitype.CreateTerminalRequest) apitype.Terminal {
	t.Helper()
	if req.Cols == 0 {
		req.Cols, req.Rows = 80, 24
	}
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	term, err := d.Client.CreateTerminal(ctx, sbID, req)
	if err != nil {
		t.Fatalf("CreateTerminal(%+v): %v", req, err)
	}
	if !regexp.MustCompile(`^term_[a-z2-7]{26}$`).MatchString(term.ID) || term.Status != apitype.TerminalRunning || term.PID <= 0 ||
		term.Cols != req.Cols || term.Rows != req.Rows || term.StartedAt.IsZero() {
		t.Fatalf("CreateTerminal(%+v) = %+v, want a running term_ with a pid and the size asked for", req, term)
	}
	return term
}

// termReader follows a terminal's output through the HTTP output route.
type termReader struct {
	t      *testing.T
	d      *testenv.Daemon
	sbID   string
	id     string
	offset int64
	out    []byte
	last   apitype.TerminalOutput
}

func newTermReader(t *testing.T, d *testenv.Daemon, sbID, id string) *termReader {
	return &termReader{t: t, d: d, sbID: sbID, id: id}
}

// read makes one long-polling read from the reader's offset and appends
// what it gets.
func (r *termReader) read() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	o, err := r.d.Client.TerminalOutput(ctx, r.sbID, r.id, client.TerminalQuery{Offset: r.offset, WaitMS: 1000})
	if err != nil {
		r.t.Fatalf("reading terminal output: %v\noutput so far: %q", err, r.out)
	}
	b, err := client.TerminalData(o)
	if err != nil {
		r.t.Fatalf("terminal output is not base64: %v", err)
	}
	if o.Offset != r.offset || o.NextOffset != o.Offset+int64(len(b)) || o.Truncated {
		r.t.Fatalf("output(offset=%d) = offset %d, next %d, %d bytes, truncated %v; want a window from %d",
			r.offset, o.Offset, o.NextOffset, len(b), o.Truncated, r.offset)
	}
	r.out = append(r.out, b...)
	r.offset, r.last = o.NextOffset, o
}

// until reads until the output since the last mark matches re, and
// returns it. It fails the test after termWait, or when the terminal
// exits without a match.
func (r *termReader) until(re *regexp.Regexp) string {
	r.t.Helper()
	deadline := time.Now().Add(termWait)
	for !re.Match(r.out) {
		if r.last.Status == apitype.TerminalExited {
			r.t.Fatalf("terminal exited without printing %s; output: %q", re, r.out)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s after %s; output: %q", re, termWait, r.out)
		}
		r.read()
	}
	return string(r.out)
}

// seen reads for at most wait and reports whether re matched.
func (r *termReader) seen(re *regexp.Regexp, wait time.Duration) bool {
	r.t.Helper()
	deadline := time.Now().Add(wait)
	for !re.Match(r.out) {
		if r.last.Status == apitype.TerminalExited || time.Now().After(deadline) {
			return false
		}
		r.read()
	}
	return true
}

// mark forgets the output read so far: until matches what follows.
func (r *termReader) mark() { r.out = nil }

// waitExit reads until the terminal has exited, and returns the last read.
// The output is then complete: the agent reads the status before the bytes.
func (r *termReader) waitExit() apitype.TerminalOutput {
	r.t.Helper()
	deadline := time.Now().Add(termWait)
	for r.last.Status != apitype.TerminalExited {
		if time.Now().After(deadline) {
			r.t.Fatalf("terminal still %q after %s; output: %q", r.last.Status, termWait, r.out)
		}
		r.read()
	}
	return r.last
}

// printedLine matches s printed on a line of its own: after a newline, or
// after the carriage return that ends a shell's prompt redraw.
func printedLine(s string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)(^|\r)` + regexp.QuoteMeta(s) + `\r$`)
}

func typeIn(t *testing.T, d *testenv.Daemon, sbID, id, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	if err := d.Client.TerminalInput(ctx, sbID, id, []byte(s)); err != nil {
		t.Fatalf("TerminalInput(%q): %v", s, err)
	}
}

// TestTerminalRoundTrip types into an interactive shell over the HTTP
// routes and reads what it prints: arithmetic, the tty it runs on, its
// size before and after a resize, and its exit status.
func TestTerminalRoundTrip(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Cols: 80, Rows: 24})
	r := newTermReader(t, d, sb.ID, term.ID)

	// The input line echoes as "$((6*7))": 42 on a line of its own is the
	// shell's answer.
	typeIn(t, d, sb.ID, term.ID, "echo $((6*7))\n")
	r.until(printedLine("42"))

	r.mark()
	typeIn(t, d, sb.ID, term.ID, "tty; echo \"T=$TERM\"\n")
	out := r.until(regexp.MustCompile(`(?m)(^|\r)T=\S+\r$`))
	if !regexp.MustCompile(`(?m)(^|\r)/dev/pts/\d+\r$`).MatchString(out) || !strings.Contains(out, "T=xterm-256color\r") {
		t.Errorf("tty and TERM printed %q, want a /dev/pts/N line and T=xterm-256color", out)
	}

	r.mark()
	typeIn(t, d, sb.ID, term.ID, "stty size\n")
	r.until(printedLine("24 80"))

	resized, err := d.Client.ResizeTerminal(ctx, sb.ID, term.ID, 132, 43)
	if err != nil || resized.Cols != 132 || resized.Rows != 43 {
		t.Fatalf("ResizeTerminal(132, 43) = %+v, %v, want cols 132 rows 43", resized, err)
	}
	r.mark()
	typeIn(t, d, sb.ID, term.ID, "stty size\n")
	r.until(printedLine("43 132"))

	list, err := d.Client.Terminals(ctx, sb.ID)
	// The prompt may still be arriving: output_bytes is at least what was read.
	if err != nil || len(list) != 1 || list[0].ID != term.ID || list[0].Cols != 132 || list[0].OutputBytes < r.offset {
		t.Errorf("Terminals = %+v, %v, want %s alone, 132 columns, output_bytes at least %d", list, err, term.ID, r.offset)
	}

	typeIn(t, d, sb.ID, term.ID, "exit 5\n")
	last := r.waitExit()
	if last.ExitCode == nil || *last.ExitCode != 5 || last.Signal != "" {
		t.Errorf("after exit 5: exit_code %v, signal %q, want 5", last.ExitCode, last.Signal)
	}
	// An exited terminal keeps its output and status until deleted.
	o, err := d.Client.TerminalOutput(ctx, sb.ID, term.ID, client.TerminalQuery{})
	if b, _ := client.TerminalData(o); err != nil || o.Status != apitype.TerminalExited || !bytes.Contains(b, []byte("42\r\n")) {
		t.Errorf("output from 0 after the exit = %q, %s, %v, want all of it, exited", b, o.Status, err)
	}
	if err := d.Client.TerminalInput(ctx, sb.ID, term.ID, []byte("echo late\n")); errcode.ReasonOf(err) != "terminal_exited" {
		t.Errorf("input after the exit = %v, want 409 terminal_exited", err)
	}
	if err := d.Client.DeleteTerminal(ctx, sb.ID, term.ID); err != nil {
		t.Fatalf("DeleteTerminal: %v", err)
	}
	if _, err := d.Client.TerminalOutput(ctx, sb.ID, term.ID, client.TerminalQuery{}); errcode.ReasonOf(err) != "terminal_not_found" {
		t.Errorf("output after delete = %v, want 404 terminal_not_found", err)
	}
}

// TestTerminalExitStatus checks how a terminal's end is reported: the
// command's exit code, or the signal that killed it.
func TestTerminalExitStatus(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	tests := []struct {
		command    string
		wantCode   int // -1: none
		wantSignal string
		wantOut    string
	}{
		{"echo done; exit 3", 3, "", "done\r\n"},
		{"true", 0, "", ""},
		{"kill -TERM $$", -1, "SIGTERM", ""},
		{"printf 'a\\tb\\n'", 0, "", "a\tb\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Command: tt.command})
			if term.Command != tt.command {
				t.Errorf("command = %q, want %q", term.Command, tt.command)
			}
			r := newTermReader(t, d, sb.ID, term.ID)
			last := r.waitExit()
			switch {
			case tt.wantCode < 0 && last.ExitCode != nil:
				t.Errorf("exit_code = %d, want none", *last.ExitCode)
			case tt.wantCode >= 0 && (last.ExitCode == nil || *last.ExitCode != tt.wantCode):
				t.Errorf("exit_code = %v, want %d", last.ExitCode, tt.wantCode)
			}
			if last.Signal != tt.wantSignal {
				t.Errorf("signal = %q, want %q", last.Signal, tt.wantSignal)
			}
			if string(r.out) != tt.wantOut {
				t.Errorf("output = %q, want %q", r.out, tt.wantOut)
			}
		})
	}
}

// TestTerminalFullScreen runs programs that drive the screen with escape
// sequences and checks that the sequences arrive whole: cursor addressing,
// and less on the alternate screen, redrawn at a resize and quit by a key.
func TestTerminalFullScreen(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Command: "clear; tput cup 5 5; echo X"})
	r := newTermReader(t, d, sb.ID, term.ID)
	r.waitExit()
	// clear homes the cursor and erases the screen; tput cup 5 5 moves to
	// row 6, column 6 (1-based).
	if out := string(r.out); !strings.Contains(out, "\x1b[H\x1b[2J") || !strings.Contains(out, "\x1b[6;6HX") {
		t.Errorf("clear; tput cup 5 5; echo X printed %q, want ESC[H ESC[2J and ESC[6;6H before X", out)
	}

	if err := runOK(ctx, d, sb.ID, "seq 1 500 > nums.txt"); err != nil {
		t.Fatal(err)
	}
	term = newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Command: "less nums.txt; echo less-ended", Cols: 80, Rows: 24})
	r = newTermReader(t, d, sb.ID, term.ID)
	// less switches to the alternate screen and fills it: 23 lines and
	// its prompt.
	r.until(regexp.MustCompile(`\x1b\[\?1049h(?s:.*)\b23\b`))
	if strings.Contains(string(r.out), "\n24\r") {
		t.Errorf("less on 24 rows showed line 24: %q", r.out)
	}
	r.mark()
	// At SIGWINCH less redraws the page for 40 rows. less has a window of
	// its own: a SIGWINCH that lands after it flushed the screen but before
	// it blocks reading the keyboard can wait for the next key (seen once
	// in CI). A
	// second change of size, once it reads, wakes it; the kernel sends
	// SIGWINCH only when the size changes, hence 41 then 40 rows.
	redrawn := false
	for _, rows := range []int{40, 41, 40} {
		if _, err := d.Client.ResizeTerminal(ctx, sb.ID, term.ID, 80, rows); err != nil {
			t.Fatal(err)
		}
		if redrawn = r.seen(regexp.MustCompile(`\b39\b`), 5*time.Second); redrawn {
			break
		}
	}
	if !redrawn {
		t.Fatalf("less did not redraw for 40 rows after three resizes; output: %q", r.out)
	}
	r.mark()
	typeIn(t, d, sb.ID, term.ID, "q")
	r.until(regexp.MustCompile(`\x1b\[\?1049l(?s:.*)less-ended`))
	if last := r.waitExit(); last.ExitCode == nil || *last.ExitCode != 0 {
		t.Errorf("less terminal exit_code = %v, want 0", last.ExitCode)
	}
}

func runOK(ctx context.Context, d *testenv.Daemon, sbID, command string) error {
	c, err := d.Client.Run(ctx, sbID, apitype.CreateCommandRequest{Command: command})
	if err != nil {
		return err
	}
	if c.ExitCode == nil || *c.ExitCode != 0 {
		return fmt.Errorf("%s: %s %v: %s%s", command, c.Status, c.ExitCode, c.Stdout, c.Stderr)
	}
	return nil
}

// wsClient is a WebSocket attached to a terminal, with what it received.
type wsClient struct {
	t     *testing.T
	conn  *websocket.Conn
	start int64 // offset of the first byte in out
	out   []byte
	exit  *apitype.TerminalMessage
}

func attach(t *testing.T, d *testenv.Daemon, sbID, id string, offset int64) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	conn, err := d.Client.AttachTerminal(ctx, sbID, id, offset)
	if err != nil {
		t.Fatalf("AttachTerminal(offset %d): %v", offset, err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn, start: offset}
}

// until reads frames until the output matches re (or, for a nil re, until
// the exit message), failing after termWait.
func (c *wsClient) until(re *regexp.Regexp) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	for re == nil && c.exit == nil || re != nil && !re.Match(c.out) {
		typ, b, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("WebSocket read waiting for %v: %v\noutput: %q", re, err, c.out)
		}
		if typ == websocket.MessageBinary {
			c.out = append(c.out, b...)
			continue
		}
		var m apitype.TerminalMessage
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("text frame %q is not a message: %v", b, err)
		}
		switch m.Type {
		case apitype.TerminalMsgExit:
			c.exit = &m
			if re != nil && !re.Match(c.out) {
				c.t.Fatalf("terminal exited before printing %s; output %q", re, c.out)
			}
		case apitype.TerminalMsgTruncated:
			c.t.Fatalf("unexpected truncated message %s", b)
		default:
			c.t.Fatalf("unexpected message %s", b)
		}
	}
	return string(c.out)
}

// message reads frames until a text message, keeping output, and
// returns it.
func (c *wsClient) message() apitype.TerminalMessage {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	for {
		typ, b, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("WebSocket read waiting for a message: %v", err)
		}
		if typ == websocket.MessageBinary {
			c.out = append(c.out, b...)
			continue
		}
		var m apitype.TerminalMessage
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("text frame %q is not a message: %v", b, err)
		}
		return m
	}
}

func (c *wsClient) send(typ websocket.MessageType, b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	if err := c.conn.Write(ctx, typ, b); err != nil {
		c.t.Fatalf("WebSocket write: %v", err)
	}
}

// TestTerminalWebSocket attaches two WebSocket clients to one terminal
// through the daemon: both see output typed by either, a resize message
// reaches the terminal, a client reconnecting from an offset gets exactly
// the bytes from there, and both get the exit message.
func TestTerminalWebSocket(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{})

	a := attach(t, d, sb.ID, term.ID, 0)
	b := attach(t, d, sb.ID, term.ID, 0)
	a.send(websocket.MessageBinary, []byte("echo from-a-$((1+1))\n"))
	for _, c := range []*wsClient{a, b} {
		c.until(printedLine("from-a-2"))
	}
	b.send(websocket.MessageBinary, []byte("echo from-b-$((2+2))\n"))
	for _, c := range []*wsClient{a, b} {
		c.until(printedLine("from-b-4"))
	}

	resize, _ := json.Marshal(apitype.TerminalMessage{Type: apitype.TerminalMsgResize, Cols: 101, Rows: 33})
	a.send(websocket.MessageText, resize)
	a.send(websocket.MessageBinary, []byte("stty size\n"))
	a.until(printedLine("33 101"))

	// A leaves; output goes on without it. It comes back from where it
	// stopped and gets exactly what it missed.
	stopped := a.start + int64(len(a.out))
	a.conn.Close(websocket.StatusNormalClosure, "")
	typeIn(t, d, sb.ID, term.ID, "echo while-away-$((3+3))\n")
	b.until(printedLine("while-away-6"))
	a = attach(t, d, sb.ID, term.ID, stopped)
	a.until(printedLine("while-away-6"))
	o, err := d.Client.TerminalOutput(ctx, sb.ID, term.ID, client.TerminalQuery{Offset: stopped, MaxBytes: int64(len(a.out))})
	if got, _ := client.TerminalData(o); err != nil || !bytes.Equal(got, a.out) {
		t.Errorf("replay from offset %d = %q, want the same bytes as the output route: %q (%v)", stopped, a.out, got, err)
	}
	// And from 0, the whole history.
	full := attach(t, d, sb.ID, term.ID, 0)
	full.until(regexp.MustCompile(`(?s)from-a-2.*from-b-4.*while-away-6`))

	// A bad control message is answered, and the connection stays up.
	for _, bad := range []string{`{"type":"resize","cols":0,"rows":5}`, `{"type":"paste"}`, `not json`} {
		full.send(websocket.MessageText, []byte(bad))
		if m := full.message(); m.Type != apitype.TerminalMsgError || m.Message == "" {
			t.Errorf("after the control message %s: %+v, want an error message", bad, m)
		}
	}
	full.send(websocket.MessageBinary, []byte("echo still-up-$((4+4))\n"))
	full.until(printedLine("still-up-8"))

	a.send(websocket.MessageBinary, []byte("exit 4\n"))
	for _, c := range []*wsClient{a, b, full} {
		c.until(nil)
		if c.exit.ExitCode == nil || *c.exit.ExitCode != 4 || c.exit.Status != apitype.TerminalExited {
			t.Errorf("exit message = %+v, want exited with code 4", c.exit)
		}
		if _, _, err := c.conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			t.Errorf("read after the exit message = %v, want a normal closure", err)
		}
	}
}

// TestTerminalReplayTruncates writes more than the replay buffer and
// checks that a read from 0 says it lost the start, and where the kept
// bytes begin.
func TestTerminalReplayTruncates(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const total = 3 << 20
	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Command: "head -c " + strconv.Itoa(total) + " /dev/zero | tr '\\0' x"})
	// An offset past the end waits for more output or the end, and
	// returns no bytes.
	var o apitype.TerminalOutput
	for deadline := time.Now().Add(termWait); o.Status != apitype.TerminalExited; {
		if time.Now().After(deadline) {
			t.Fatalf("terminal still %q after %s", o.Status, termWait)
		}
		var err error
		if o, err = d.Client.TerminalOutput(ctx, sb.ID, term.ID, client.TerminalQuery{Offset: 1 << 40, WaitMS: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	o, err := d.Client.TerminalOutput(ctx, sb.ID, term.ID, client.TerminalQuery{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := client.TerminalData(o)
	if !o.Truncated || o.Offset != total-1<<20 || o.NextOffset != total || len(b) != 1<<20 || len(bytes.Trim(b, "x")) != 0 {
		t.Errorf("output from 0 = truncated %v, offset %d, next %d, %d bytes; want true, %d, %d, 1 MiB of x",
			o.Truncated, o.Offset, o.NextOffset, len(b), total-1<<20, total)
	}
}

// sandboxProcesses counts the processes in sandbox sbID whose command line
// matches pattern, as the sandbox sees them.
func sandboxProcesses(t *testing.T, d *testenv.Daemon, sbID, pattern string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	c, err := d.Client.Run(ctx, sbID, apitype.CreateCommandRequest{Command: "ps -eo args | grep -cE '" + pattern + "' || true"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(c.Stdout))
	if err != nil {
		t.Fatalf("counting processes: %q: %v", c.Stdout, err)
	}
	return n
}

// TestTerminalDeleteLeavesNoProcess deletes a terminal whose shell has
// background jobs, each in a process group of its own, one immune to
// SIGHUP, and one stopped: none survives. Before the delete the probe
// sees them all (the positive control).
func TestTerminalDeleteLeavesNoProcess(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A shell under a name of its own, so the probe counts only it.
	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Command: "exec -a shell3140 bash -i"})
	r := newTermReader(t, d, sb.ID, term.ID)
	typeIn(t, d, sb.ID, term.ID, "sleep 3141 & nohup sleep 3142 >/dev/null 2>&1 & sleep 3143 & kill -STOP $!; echo started-$((1+2))\n")
	r.until(printedLine("started-3"))
	const pattern = "^(sleep 314[123]|shell3140 -i)$"
	if n := sandboxProcesses(t, d, sb.ID, pattern); n != 4 {
		t.Fatalf("before the delete the sandbox runs %d of the shell and its 3 sleeps; the probe is broken", n)
	}
	start := time.Now()
	if err := d.Client.DeleteTerminal(ctx, sb.ID, term.ID); err != nil {
		t.Fatalf("DeleteTerminal: %v", err)
	}
	if n := sandboxProcesses(t, d, sb.ID, pattern); n != 0 {
		t.Errorf("after the delete (%s) %d of the shell and its sleeps are left", time.Since(start).Round(time.Millisecond), n)
	}
	if list, err := d.Client.Terminals(ctx, sb.ID); err != nil || len(list) != 0 {
		t.Errorf("Terminals after the delete = %+v, %v, want none", list, err)
	}
}

// TestTerminalErrors checks the terminal routes' refusals.
func TestTerminalErrors(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, tt := range []struct {
		name string
		req  apitype.CreateTerminalRequest
		want string // code/reason, or code/field with a problem
	}{
		{"no size", apitype.CreateTerminalRequest{}, "invalid/cols"},
		{"no size", apitype.CreateTerminalRequest{}, "invalid/rows"},
		{"too wide", apitype.CreateTerminalRequest{Cols: 1001, Rows: 10}, "invalid/cols"},
		{"no rows", apitype.CreateTerminalRequest{Cols: 80, Rows: 0}, "invalid/rows"},
		{"NUL in command", apitype.CreateTerminalRequest{Cols: 80, Rows: 24, Command: "echo \x00"}, "invalid/command"},
		{"bad env", apitype.CreateTerminalRequest{Cols: 80, Rows: 24, Env: map[string]string{"1X": "y"}}, "invalid/env.1X"},
		{"cwd escapes", apitype.CreateTerminalRequest{Cols: 80, Rows: 24, Cwd: "../.."}, "invalid/path_escapes_workspace"},
		{"cwd missing", apitype.CreateTerminalRequest{Cols: 80, Rows: 24, Cwd: "no/such/dir"}, "not_found/file_not_found"},
	} {
		_, err := d.Client.CreateTerminal(ctx, sb.ID, tt.req)
		code, what, _ := strings.Cut(tt.want, "/")
		var e *errcode.Error
		if !errors.As(err, &e) || string(e.Code) != code || e.Reason != what && e.Problems[what] == "" {
			t.Errorf("%s: CreateTerminal = %v (%+v), want %s", tt.name, err, e, tt.want)
		}
	}
	// Positive control for the size bounds: 1x1 and 1000x1000 are fine.
	for _, n := range []int{1, 1000} {
		term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Cols: n, Rows: n, Command: "stty size"})
		r := newTermReader(t, d, sb.ID, term.ID)
		r.until(regexp.MustCompile(fmt.Sprintf(`%d %d`, n, n)))
	}

	unknown := "term_" + strings.Repeat("a", 26)
	if _, err := d.Client.TerminalOutput(ctx, sb.ID, unknown, client.TerminalQuery{}); errcode.ReasonOf(err) != "terminal_not_found" {
		t.Errorf("output of an unknown terminal = %v, want terminal_not_found", err)
	}
	if _, err := d.Client.AttachTerminal(ctx, sb.ID, unknown, 0); errcode.ReasonOf(err) != "terminal_not_found" {
		t.Errorf("attach to an unknown terminal = %v, want terminal_not_found", err)
	}
	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{})
	if _, err := d.Client.ResizeTerminal(ctx, sb.ID, term.ID, 0, 10); !client.IsCode(err, errcode.Invalid) {
		t.Errorf("resize to 0 columns = %v, want invalid", err)
	}
	// The WebSocket route without an upgrade answers in the error shape.
	r := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/terminals/" + term.ID + "/ws", auth: bearerAuth(d.Token)})
	r.wantError(t, "GET .../ws without an upgrade", 400, errcode.Invalid, "websocket_required")
	r = sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/terminals/" + term.ID + "/output?offset=-1", auth: bearerAuth(d.Token)})
	r.wantError(t, "GET .../output?offset=-1", 400, errcode.Invalid, "query_invalid")

	// At most 16 terminals run at once; an exited one frees its place.
	var ids []string
	for range 15 {
		ids = append(ids, newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{Command: "sleep 600"}).ID)
	}
	if _, err := d.Client.CreateTerminal(ctx, sb.ID, apitype.CreateTerminalRequest{Cols: 80, Rows: 24}); errcode.ReasonOf(err) != "terminal_limit" {
		t.Errorf("a 17th terminal = %v, want 429 terminal_limit", err)
	}
	if err := d.Client.DeleteTerminal(ctx, sb.ID, ids[0]); err != nil {
		t.Fatal(err)
	}
	newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{})
}

// TestTerminalAttachedIsInUse checks that a sandbox whose terminal has a
// WebSocket attached is in use, though no API call comes: its idle policy
// (hibernate after 1.5 s here) leaves it alone while the client is
// attached, and applies once it leaves (the positive control).
func TestTerminalAttachedIsInUse(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: testenv.Runtime(), Idle: &apitype.Idle{HibernateAfterMS: 1500}})
	if err != nil {
		t.Fatal(err)
	}
	term := newTerminal(t, d, sb.ID, apitype.CreateTerminalRequest{})
	c := attach(t, d, sb.ID, term.ID, 0)
	// Three idle periods with nothing but the open connection. (No clock
	// to advance: the daemon's idle reaper runs on its own.)
	time.Sleep(4500 * time.Millisecond)
	if got, err := d.Client.GetSandbox(ctx, sb.ID); err != nil || got.State != apitype.StateRunning {
		t.Fatalf("with a terminal attached for 3 idle periods the sandbox is %s (%v), want running", got.State, err)
	}
	c.send(websocket.MessageBinary, []byte("echo alive-$((1+1))\n"))
	c.until(printedLine("alive-2"))

	c.conn.Close(websocket.StatusNormalClosure, "")
	testenv.Eventually(t, 15*time.Second, "the sandbox hibernates once the terminal is detached", func() bool {
		got, err := d.Client.GetSandbox(ctx, sb.ID)
		return err == nil && got.State == apitype.StateHibernated
	})
}
