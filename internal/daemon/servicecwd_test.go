package daemon_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestServiceCwdRefused: a service whose cwd is a link to / (or a file, or
// missing) is refused when put, with the reason a command with that cwd
// gets, and leaves no service (before, it was accepted and failed at its
// start); the control, a real subdirectory, starts and runs there.
func TestServiceCwdRefused(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := runIn(t, d.Client, sb.ID, apitype.CreateCommandRequest{Command: "mkdir sub && ln -s / rootlink && touch file"}); rec.ExitCode == nil || *rec.ExitCode != 0 {
		t.Fatalf("setup: %+v", rec)
	}
	for _, tt := range []struct {
		cwd    string
		code   errcode.Code
		reason string
	}{
		{"rootlink", errcode.Invalid, "path_escapes_workspace"},
		{"/workspace/rootlink", errcode.Invalid, "path_escapes_workspace"},
		{"file", errcode.Invalid, "not_directory"},
		{"missing", errcode.NotFound, "file_not_found"},
	} {
		// A command with the same cwd: the refusal the service must match.
		_, cerr := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "pwd", Cwd: tt.cwd})
		_, serr := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "svc", Command: "sleep 600", Cwd: tt.cwd})
		if errcode.CodeOf(serr) != tt.code || errcode.ReasonOf(serr) != tt.reason {
			t.Errorf("PutService(cwd %q) = %v, want %s %s", tt.cwd, serr, tt.code, tt.reason)
		}
		if errcode.CodeOf(cerr) != errcode.CodeOf(serr) || errcode.ReasonOf(cerr) != errcode.ReasonOf(serr) {
			t.Errorf("cwd %q: command refused with %v, service with %v; want the same", tt.cwd, cerr, serr)
		}
	}
	if list, err := d.Client.Services(ctx, sb.ID); err != nil || len(list) != 0 {
		t.Errorf("services after the refusals = %+v, %v; want none", list, err)
	}

	svc, err := d.Client.PutService(ctx, sb.ID, apitype.ServiceSpec{Name: "svc", Command: "pwd > where; exec sleep 600", Cwd: "sub"})
	if err != nil {
		t.Fatalf("PutService(cwd sub): %v", err)
	}
	waitService(t, d.Client, sb.ID, svc.Name, "the service to run", func(s apitype.Service) bool { return s.Status == apitype.ServiceRunning })
	testenv.Eventually(t, 30*time.Second, "the service to write sub/where", func() bool {
		r, err := d.Client.ReadFile(ctx, sb.ID, "sub/where")
		if err != nil {
			return false
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return strings.HasSuffix(strings.TrimSpace(string(b)), "/sub")
	})
}
