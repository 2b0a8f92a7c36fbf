package daemon_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestRuntimeGoneKeepsSandbox: a daemon started without the runtime a
// sandbox runs on (runsc not found) neither marks it lost nor deletes it
// while its processes run: a delete is refused with runtime_gone and
// changes nothing. The control: a daemon with the runtime back adopts it,
// runs a command in it, and deletes it.
func TestRuntimeGoneKeepsSandbox(t *testing.T) {
	if testenv.Runtime() != "gvisor" {
		t.Skip("runs in the gvisor pass: it starts a daemon whose runsc is missing")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo kept > kept.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t); err != nil {
		t.Fatal(err)
	}

	d2 := testenv.StartDaemonProcess(t, dataDir, "--runsc", "/nonexistent/runsc")
	err = d2.Client.DeleteSandbox(ctx, sb.ID)
	if errcode.ReasonOf(err) != "runtime_gone" {
		t.Fatalf("delete of a sandbox whose runtime is gone = %v, want runtime_gone", err)
	}
	if got, err := d2.Client.GetSandbox(ctx, sb.ID); err != nil || got.State != apitype.StateRunning {
		t.Fatalf("after the refused delete: %+v, %v; want it still running", got, err)
	}
	if _, err := d2.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "true"}); errcode.ReasonOf(err) != "runtime_gone" {
		t.Errorf("command in it = %v, want runtime_gone", err)
	}
	if err := d2.Stop(t); err != nil {
		t.Fatal(err)
	}

	d3 := testenv.StartDaemonProcess(t, dataDir)
	rec, err := d3.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "cat kept.txt"})
	if err != nil || rec.Stdout != "kept\n" {
		t.Fatalf("command after the runtime came back = %+v, %v; want the sandbox as it was", rec, err)
	}
	if err := d3.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// Nothing of the sandbox is left once the daemon (whose own process
	// and browser name the data directory too) has stopped.
	if err := d3.Stop(t); err != nil {
		t.Fatal(err)
	}
	testenv.CheckNoProcesses(t, dataDir)
}
