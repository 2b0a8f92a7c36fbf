package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// mountsUnder lists this mount namespace's mount points at or under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// TestGVisorLeavesNoMounts: runsc pins its gofers' empty network namespace
// at <data>/oci/runsc/null-netns while gVisor sandboxes run (the control),
// and keeps it across a daemon restart with one running, which is
// re-adopted; once the last is deleted and the daemon stopped, nothing is
// mounted under the data directory.
func TestGVisorLeavesNoMounts(t *testing.T) {
	// Its sandbox is gVisor's whatever the pass: once is enough.
	if testenv.Runtime() != "gvisor" {
		t.Skip("runs in the gvisor pass of make test")
	}
	t.Parallel()
	testenv.NeedRuntime(t, "gvisor")
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	pin := filepath.Join(dataDir, "oci", "runsc", "null-netns")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(t, pin); len(m) == 0 {
		t.Errorf("no mount at %s while a gvisor sandbox runs; the probe looks in the wrong place", pin)
	}

	if err := d.Stop(t); err != nil {
		t.Fatalf("stopping the daemon: %v", err)
	}
	if m := mountsUnder(t, pin); len(m) == 0 {
		t.Errorf("daemon stopped with a gvisor sandbox running unmounted %s", pin)
	}
	d2 := testenv.StartDaemonProcess(t, dataDir)
	c, err := d2.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo alive"})
	if err != nil || strings.TrimSpace(c.Stdout) != "alive" {
		t.Fatalf("gvisor sandbox after a restart: %+v, %v; want it re-adopted and answering", c, err)
	}

	if err := d2.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(t, dataDir); len(m) > 0 {
		t.Errorf("mounts under the data directory after deleting the last gvisor sandbox: %v", m)
	}
	if err := d2.Stop(t); err != nil {
		t.Fatalf("stopping the daemon: %v", err)
	}
	if m := mountsUnder(t, dataDir); len(m) > 0 {
		t.Errorf("mounts under the data directory after the daemon stopped: %v", m)
	}
}
