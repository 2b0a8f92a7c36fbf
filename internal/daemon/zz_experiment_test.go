package daemon_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/testenv"
)

func TestZZExperimentTenantModeExisting(t *testing.T) {
	data := filepath.Join(testenv.ShortTempDir(t), "d")
	t.Cleanup(func() { testenv.CheckNoProcesses(t, data) })
	ctx := context.Background()
	d := testenv.StartDaemonProcess(t, data, "--default-runtime", "process")
	_, k := tenantKey(t, d, "acme", auth.ScopeExecution)
	c := client.New(d.URL, k.Secret)
	sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := c.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "id; hostname"})
	t.Logf("before: %+v %v", cmd.Stdout, err)
	if err := d.Stop(t); err != nil {
		t.Fatal(err)
	}
	d = testenv.StartDaemonProcess(t, data, "--default-runtime", "container", "--tenant-mode")
	c = client.New(d.URL, k.Secret)
	got, err := c.GetSandbox(ctx, sb.ID)
	t.Logf("after restart: state %s runtime %s err %v", got.State, got.Runtime, err)
	cmd, err = c.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "id; cat /proc/1/cmdline | head -c 100; echo; ls /root | head"})
	t.Logf("after: %+v / %v", cmd.Stdout, err)
	_ = d.Client.DeleteSandbox(ctx, sb.ID)
}
