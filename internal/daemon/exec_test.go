package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

func newSandbox(t *testing.T, d *testenv.Daemon) apitype.Sandbox {
	t.Helper()
	sb, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: "process"})
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
	_ = client.CommandQuery{}
}
