package daemon_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

func newSandbox(t *testing.T, d *testenv.Daemon) apitype.Sandbox {
	t.Helper()
	sb, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: testenv.Runtime()})
	if err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	if sb.State != apitype.StateRunning || !strings.HasPrefix(sb.ID, "sbx_") {
		t.Fatalf("CreateSandbox = %+v, want a running sbx_", sb)
	}
	return sb
}

func run(t *testing.T, d *testenv.Daemon, sbID string, req apitype.CreateCommandRequest) apitype.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := d.Client.Run(ctx, sbID, req)
	if err != nil {
		t.Fatalf("Run(%+v): %v", req, err)
	}
	return c
}

func TestExecExitCodes(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	tests := []struct {
		name       string
		req        apitype.CreateCommandRequest
		wantStatus string
		wantCode   int // -1: none
		wantSignal string
		wantOut    string
		wantErr    string
	}{
		{"success", apitype.CreateCommandRequest{Command: "echo hi"}, "exited", 0, "", "hi\n", ""},
		{"exit code", apitype.CreateCommandRequest{Command: "echo out; echo err >&2; exit 3"}, "exited", 3, "", "out\n", "err\n"},
		{"argv", apitype.CreateCommandRequest{Argv: []string{"printf", "%s|", "a b", "c"}}, "exited", 0, "", "a b|c|", ""},
		{"signal", apitype.CreateCommandRequest{Command: "kill -TERM $$"}, "exited", -1, "SIGTERM", "", ""},
		{"not found", apitype.CreateCommandRequest{Argv: []string{"no-such-binary-here"}}, "failed", -1, "", "", ""},
		{"stdin", apitype.CreateCommandRequest{Command: "tr a-z A-Z", Stdin: "hello"}, "exited", 0, "", "HELLO", ""},
		{"env", apitype.CreateCommandRequest{Command: "echo $FOO", Env: map[string]string{"FOO": "bar"}}, "exited", 0, "", "bar\n", ""},
		{"cwd", apitype.CreateCommandRequest{Command: "mkdir -p sub && cd sub && pwd"}, "exited", 0, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := run(t, d, sb.ID, tt.req)
			if c.Status != tt.wantStatus {
				t.Fatalf("status = %q (%s), want %q", c.Status, c.Reason, tt.wantStatus)
			}
			switch {
			case tt.wantCode < 0 && c.ExitCode != nil:
				t.Errorf("exit_code = %d, want none", *c.ExitCode)
			case tt.wantCode >= 0 && (c.ExitCode == nil || *c.ExitCode != tt.wantCode):
				t.Errorf("exit_code = %v, want %d", c.ExitCode, tt.wantCode)
			}
			if c.Signal != tt.wantSignal {
				t.Errorf("signal = %q, want %q", c.Signal, tt.wantSignal)
			}
			if tt.wantOut != "" && c.Stdout != tt.wantOut {
				t.Errorf("stdout = %q, want %q", c.Stdout, tt.wantOut)
			}
			if c.Stderr != tt.wantErr {
				t.Errorf("stderr = %q, want %q", c.Stderr, tt.wantErr)
			}
		})
	}
}

func TestExecOutputOffsetsAndCap(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.OutputCap = 1000 })
	sb := newSandbox(t, d)
	ctx := context.Background()

	c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "head -c 5000 /dev/zero | tr '\\0' x; printf 'é' >&2"})
	if len(c.Stdout) != 1000 || c.StdoutBytes != 5000 || !c.StdoutTruncated {
		t.Errorf("capped stdout: len %d, stdout_bytes %d, truncated %v; want 1000, 5000, true", len(c.Stdout), c.StdoutBytes, c.StdoutTruncated)
	}
	if c.Stderr != "é" || c.StderrTruncated {
		t.Errorf("stderr = %q (truncated %v), want %q", c.Stderr, c.StderrTruncated, "é")
	}

	c = run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "printf abcdefghij"})
	for _, tt := range []struct {
		offset, max int64
		want        string
		wantNext    int64
	}{
		{0, 0, "abcdefghij", 10},
		{3, 0, "defghij", 10},
		{3, 4, "defg", 7},
		{10, 0, "", 10},
		{99, 0, "", 10},
	} {
		got, err := d.Client.Command(ctx, sb.ID, c.ID, client.CommandQuery{StdoutOffset: tt.offset, MaxBytes: tt.max})
		if err != nil {
			t.Fatal(err)
		}
		if got.Stdout != tt.want || got.NextStdoutOffset != tt.wantNext {
			t.Errorf("Command(stdout_offset=%d, max_bytes=%d) = %q next %d, want %q next %d",
				tt.offset, tt.max, got.Stdout, got.NextStdoutOffset, tt.want, tt.wantNext)
		}
	}
	b64, err := d.Client.Command(ctx, sb.ID, c.ID, client.CommandQuery{Base64: true})
	if err != nil {
		t.Fatal(err)
	}
	if b64.Encoding != "base64" || b64.Stdout != base64.StdEncoding.EncodeToString([]byte("abcdefghij")) {
		t.Errorf("base64 read = %q (%s)", b64.Stdout, b64.Encoding)
	}
}

func TestExecStreamAndReconnect(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{
		Command: "for i in 1 2 3 4 5; do echo line$i; echo err$i >&2; sleep 0.05; done; exit 7",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	final, err := d.Client.Stream(ctx, sb.ID, c.ID, 0, 0, func(ev client.Event) error {
		switch ev.Name {
		case "stdout":
			if int64(out.Len()) != ev.Offset {
				t.Errorf("stdout event at offset %d, have %d bytes", ev.Offset, out.Len())
			}
			out.WriteString(ev.Data)
		case "stderr":
			errOut.WriteString(ev.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantOut := "line1\nline2\nline3\nline4\nline5\n"
	if out.String() != wantOut || !strings.Contains(errOut.String(), "err5") {
		t.Errorf("streamed stdout %q stderr %q, want %q and err1..err5", out.String(), errOut.String(), wantOut)
	}
	if final == nil || final.ExitCode == nil || *final.ExitCode != 7 {
		t.Fatalf("exit event = %+v, want exit code 7", final)
	}

	// Reconnecting from an offset replays only what follows it.
	var rest strings.Builder
	if _, err := d.Client.Stream(ctx, sb.ID, c.ID, 12, 0, func(ev client.Event) error {
		if ev.Name == "stdout" {
			rest.WriteString(ev.Data)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rest.String() != wantOut[12:] {
		t.Errorf("stream from offset 12 = %q, want %q", rest.String(), wantOut[12:])
	}
}

func TestExecWaitReturnsWhileRunning(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx := context.Background()
	c, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo started; sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Client.Command(ctx, sb.ID, c.ID, client.CommandQuery{WaitMS: 200})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != apitype.CommandRunning {
		t.Errorf("status after a short wait = %q, want running", got.Status)
	}
	testenv.Eventually(t, 10*time.Second, "output to appear", func() bool {
		got, err = d.Client.Command(ctx, sb.ID, c.ID, client.CommandQuery{})
		return err == nil && got.Stdout == "started\n"
	})
	canceled, err := d.Client.Cancel(ctx, sb.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if canceled.Status != apitype.CommandCanceled {
		t.Errorf("status after cancel = %q, want canceled", canceled.Status)
	}
	// The record in the store catches up: list shows canceled too.
	testenv.Eventually(t, 10*time.Second, "list to show canceled", func() bool {
		list, err := d.Client.Commands(ctx, sb.ID)
		return err == nil && len(list) == 1 && list[0].Status == apitype.CommandCanceled
	})
}

func TestExecTimeoutAndCleanupLeaveNoProcess(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)

	// A timed-out command is killed with its whole process group.
	c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "sleep 300 & sleep 301; echo never", TimeoutMS: 300})
	if c.Status != apitype.CommandTimedOut || strings.Contains(c.Stdout, "never") {
		t.Errorf("status = %q stdout %q, want timed_out and no output", c.Status, c.Stdout)
	}
	// Background processes the shell leaves are ended when it exits.
	c = run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "sleep 302 & echo bye"})
	if c.Status != apitype.CommandExited || c.Stdout != "bye\n" {
		t.Errorf("status = %q stdout %q, want exited, bye", c.Status, c.Stdout)
	}
	// A process that left the group (setsid) still holds the sandbox's
	// output pipe: the command ends within the drain bound anyway.
	c = run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "setsid sleep 303 & sleep 0.3; echo detached"})
	if c.Status != apitype.CommandExited {
		t.Errorf("status = %q, want exited", c.Status)
	}
	// inside lists the sleeps the sandbox runs, as it sees them: under
	// gVisor its processes are not host processes.
	inside := func() string {
		c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "ps -eo args | grep '^sleep 30' || true"})
		return c.Stdout
	}
	escaped := func() bool {
		for _, pid := range d.SandboxProcesses(sb.ID) {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.Contains(string(b), "sleep\x00303") {
				return true
			}
		}
		return false
	}
	// Positive control: the escape worked, so the delete below has
	// something to kill.
	if got := inside(); !strings.Contains(got, "sleep 303") {
		t.Fatalf("setsid sleep 303 is not running (sleeps: %q): the escape probe is broken", got)
	}
	testenv.Eventually(t, 10*time.Second, "group members to die", func() bool {
		got := inside()
		return !strings.Contains(got, "sleep 300") && !strings.Contains(got, "sleep 301") && !strings.Contains(got, "sleep 302")
	})
	// The escaped setsid process dies with the sandbox.
	if err := d.Client.DeleteSandbox(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if escaped() {
		t.Error("setsid sleep 303 survived the sandbox's deletion")
	}
	if left := d.SandboxProcesses(sb.ID); len(left) > 0 {
		t.Errorf("processes left after delete: %v", left)
	}
	if _, err := os.Stat(filepath.Dir(d.HostWorkspace(sb.ID))); !os.IsNotExist(err) {
		t.Errorf("sandbox directory after delete: stat err = %v, want not exist", err)
	}
	if _, err := d.Client.GetSandbox(context.Background(), sb.ID); !client.IsCode(err, errcode.NotFound) {
		t.Errorf("GetSandbox after delete: err = %v, want not_found", err)
	}
}

func TestExecStdinAPI(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx := context.Background()
	c, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "cat; echo done", StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Client.Stdin(ctx, sb.ID, c.ID, apitype.StdinRequest{Data: "one "}); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.Stdin(ctx, sb.ID, c.ID, apitype.StdinRequest{DataBase64: base64.StdEncoding.EncodeToString([]byte("two")), EOF: true}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Client.Command(ctx, sb.ID, c.ID, client.CommandQuery{WaitMS: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if got.Stdout != "one twodone\n" {
		t.Errorf("stdout = %q, want %q", got.Stdout, "one twodone\n")
	}
	err = d.Client.Stdin(ctx, sb.ID, c.ID, apitype.StdinRequest{Data: "late"})
	if errcode.ReasonOf(err) != "command_finished" {
		t.Errorf("stdin after exit: err = %v, want command_finished", err)
	}
	// Without stdin_open, standard input is closed (or the given text).
	c2 := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "cat; echo eof"})
	if c2.Stdout != "eof\n" {
		t.Errorf("stdout without stdin = %q, want eof", c2.Stdout)
	}
}

func TestExecConcurrencyLimitsAndHistory(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.MaxCommands = 3; c.MaxHistory = 5 })
	sb := newSandbox(t, d)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: fmt.Sprintf("sleep 0.2; echo %d", i)})
			if err == nil && c.Stdout != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("command %d printed %q", i, c.Stdout)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	var running []string
	for range 3 {
		c, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "sleep 60"})
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, c.ID)
	}
	_, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "true"})
	if !client.IsCode(err, errcode.ResourceExhausted) || errcode.ReasonOf(err) != "command_limit" {
		t.Errorf("exec beyond the limit: err = %v, want resource_exhausted command_limit", err)
	}
	for _, id := range running {
		if _, err := d.Client.Cancel(ctx, sb.ID, id); err != nil {
			t.Fatal(err)
		}
	}

	var first string
	for i := range 8 {
		c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "echo " + strconv.Itoa(i)})
		if i == 0 {
			first = c.ID
		}
	}
	testenv.Eventually(t, 10*time.Second, "history to be pruned to 5", func() bool {
		list, err := d.Client.Commands(ctx, sb.ID)
		return err == nil && len(list) == 5 && list[0].Stdout == "" && list[4].StartedAt.Before(list[0].StartedAt)
	})
	if _, err := d.Client.Command(ctx, sb.ID, first, client.CommandQuery{}); !client.IsCode(err, errcode.NotFound) {
		t.Errorf("pruned command: err = %v, want not_found", err)
	}
}

func TestSandboxLimitsAndNames(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.MaxSandboxes = 2 })
	ctx := context.Background()
	a, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "conv-1", Labels: map[string]string{"team": "x"}, Env: map[string]string{"SECRET": "s3"}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "conv-1"})
	if err != nil || again.ID != a.ID {
		t.Fatalf("create by existing name = %v, %v; want the same sandbox %s", again.ID, err, a.ID)
	}
	if c := run(t, d, a.ID, apitype.CreateCommandRequest{Command: "echo $SECRET"}); c.Stdout != "s3\n" {
		t.Errorf("sandbox env: stdout = %q, want s3", c.Stdout)
	}
	if len(a.EnvKeys) != 1 || a.EnvKeys[0] != "SECRET" {
		t.Errorf("env_keys = %v, want [SECRET] (values are not echoed)", a.EnvKeys)
	}
	newSandbox(t, d)
	_, err = d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if !client.IsCode(err, errcode.ResourceExhausted) || errcode.ReasonOf(err) != "sandbox_limit" {
		t.Errorf("third sandbox: err = %v, want resource_exhausted sandbox_limit", err)
	}
	for _, tt := range []struct {
		name string
		req  apitype.CreateSandboxRequest
	}{
		{"unknown runtime", apitype.CreateSandboxRequest{Runtime: "vm"}},
		{"bad name", apitype.CreateSandboxRequest{Name: "../x"}},
		{"bad env", apitype.CreateSandboxRequest{Env: map[string]string{"A=B": "c"}}},
	} {
		if _, err := d.Client.CreateSandbox(ctx, tt.req); !client.IsCode(err, errcode.Invalid) {
			t.Errorf("%s: err = %v, want invalid", tt.name, err)
		}
	}
	// A runtime the daemon knows but cannot offer here says why.
	sys, err := d.Client.System(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range sys.Runtimes {
		if rt.Available {
			continue
		}
		if _, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.Name}); !client.IsCode(err, errcode.Unimplemented) || errcode.ReasonOf(err) != "runtime_unavailable" {
			t.Errorf("unavailable runtime %s: err = %v, want unimplemented runtime_unavailable", rt.Name, err)
		}
	}
	list, err := d.Client.ListSandboxes(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("ListSandboxes = %d sandboxes, %v; want 2 (failed creates leave no rows)", len(list), err)
	}
}

// TestPrintedPathsWork checks that an absolute path a command prints (its
// working directory, under the process runtime the host workspace) works
// in the file API and as a cwd, and that the sibling directory does not.
func TestPrintedPathsWork(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	ctx := context.Background()
	c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "mkdir -p sub && echo x > sub/f && pwd"})
	ws := strings.TrimSpace(c.Stdout)
	if ws != sb.Workspace {
		t.Fatalf("pwd = %q, want the sandbox's workspace %q", ws, sb.Workspace)
	}
	rc, err := d.Client.ReadFile(ctx, sb.ID, ws+"/sub/f")
	if err != nil {
		t.Fatalf("ReadFile(%s/sub/f): %v", ws, err)
	}
	rc.Close()
	if c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "cat f", Cwd: ws + "/sub"}); c.Stdout != "x\n" {
		t.Errorf("cwd %s/sub: stdout = %q, want x", ws, c.Stdout)
	}
	// A prefix that is not a path component does not count.
	if _, err := d.Client.ReadFile(ctx, sb.ID, ws+"x/sub/f"); errcode.ReasonOf(err) != "path_escapes_workspace" {
		t.Errorf("ReadFile(%sx/sub/f): err = %v, want path_escapes_workspace", ws, err)
	}
}

// TestLazySandbox: a lazy sandbox exists without compute until the first
// call that needs it, which provisions it once however many arrive at
// the same time.
func TestLazySandbox(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := testenv.Runtime()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt, Lazy: true, Name: "lazy-1"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != apitype.StatePending {
		t.Fatalf("lazy create: state %s, want pending", sb.State)
	}
	if pids := d.AgentPIDs(sb.ID); len(pids) > 0 {
		t.Errorf("a pending sandbox runs agents %v", pids)
	}
	if _, err := os.Stat(filepath.Dir(d.HostWorkspace(sb.ID))); !os.IsNotExist(err) {
		t.Errorf("a pending sandbox has a directory (stat: %v)", err)
	}
	if again, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt, Lazy: true, Name: "lazy-1"}); err != nil || again.ID != sb.ID {
		t.Errorf("get-or-create of a pending sandbox = %s, %v; want %s", again.ID, err, sb.ID)
	}

	var wg sync.WaitGroup
	outs := make([]string, 5)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo " + strconv.Itoa(i)})
			if err != nil {
				t.Errorf("first calls, %d: %v", i, err)
			}
			outs[i] = c.Stdout
		}()
	}
	wg.Wait()
	for i, out := range outs {
		if out != strconv.Itoa(i)+"\n" {
			t.Errorf("first calls, %d: stdout %q", i, out)
		}
	}
	if got, _ := d.Client.GetSandbox(ctx, sb.ID); got.State != apitype.StateRunning {
		t.Errorf("after its first calls the sandbox is %s, want running", got.State)
	}
	if pids := d.AgentPIDs(sb.ID); len(pids) != 1 {
		t.Errorf("agents after concurrent first calls = %v, want exactly one", pids)
	}

	// A file call provisions too; a pending sandbox deletes cleanly.
	other, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt, Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.WriteFile(ctx, other.ID, "hello.txt", strings.NewReader("hi"), 0); err != nil {
		t.Fatalf("upload to a pending sandbox: %v", err)
	}
	if c := run(t, d, other.ID, apitype.CreateCommandRequest{Command: "cat hello.txt"}); c.Stdout != "hi" {
		t.Errorf("file written at provisioning = %q, want hi", c.Stdout)
	}
	third, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt, Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Client.DeleteSandbox(ctx, third.ID); err != nil {
		t.Errorf("deleting a pending sandbox: %v", err)
	}
}
