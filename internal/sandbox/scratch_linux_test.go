package sandbox_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/testenv"
)

// TestScratchWorkspace runs the kind of sandbox a job runtime is
// (Resources.Scratch) on the real container runtime: its workspace is a
// tmpfs of its disk size, full past it (ENOSPC, in bytes and in inodes); no image file or loop
// device is made for it; it refuses to hibernate (its workspace would be
// lost); its delete leaves no mount behind. The control is a sandbox of
// the same size without Scratch: an ext4 image, which hibernates.
func TestScratchWorkspace(t *testing.T) {
	testenv.OnePass(t) // it picks its runtime itself
	testenv.NeedRuntime(t, "container")
	ctx := context.Background()
	dir := testenv.ShortTempDir(t)
	ctr := runtimes.NewContainer(runtimes.OCIConfig{DataDir: dir})
	if err := ctr.Available(); err != nil {
		t.Fatalf("the container runtime: %v", err)
	}
	m := newManagerIn(t, dir, func(c *sandbox.Config) { c.DefaultRuntime = "container" }, runtimes.Process{}, ctr)
	sh := func(id, command string) string {
		t.Helper()
		rec, err := m.Exec(ctx, id, sandbox.ExecSpec{Command: command}, url.Values{"wait_ms": {"30000"}})
		if err != nil || rec.Status != apitype.CommandExited {
			t.Fatalf("%s in %s: %v %+v", command, id, err, rec)
		}
		return rec.Stdout + rec.Stderr
	}
	mounted := func(id string) []string {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		var out []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, id) {
				out = append(out, line)
			}
		}
		return out
	}

	scratch, _, err := m.Create(ctx, sandbox.CreateSpec{Resources: sandbox.Resources{DiskMB: 64, Scratch: true}})
	if err != nil {
		t.Fatal(err)
	}
	if fs := strings.TrimSpace(sh(scratch.ID, "stat -f -c %T /workspace")); fs != "tmpfs" {
		t.Errorf("a scratch workspace is %q, want tmpfs", fs)
	}
	if out := sh(scratch.ID, "dd if=/dev/zero of=/workspace/fill bs=1M count=100 2>&1; echo rc=$?"); !strings.Contains(out, "No space left on device") || strings.Contains(out, "rc=0") {
		t.Errorf("filling a 64 MiB scratch workspace: %q, want ENOSPC", out)
	}
	// Inodes are bounded too: 64 per MiB, 4096 here (the root takes one).
	if out := sh(scratch.ID, `rm /workspace/fill; i=0; while [ $i -lt 4200 ]; do true > /workspace/f$i || break; i=$((i+1)); done; echo $i`); !strings.HasPrefix(out, "4095\n") || !strings.Contains(out, "No space left on device") {
		t.Errorf("files made in a 64 MiB scratch workspace: %q, want 4095 then ENOSPC (its inode bound)", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes", scratch.ID, "workspace.img")); !os.IsNotExist(err) {
		t.Errorf("a scratch sandbox has a workspace image: %v", err)
	}
	if err := m.Hibernate(ctx, scratch.ID); errcode.CodeOf(err) != errcode.Conflict {
		t.Errorf("hibernating a scratch sandbox: err = %v, want conflict", err)
	}
	if got := state(t, m, scratch.ID); got != apitype.StateRunning {
		t.Errorf("after the refused hibernate the sandbox is %s, want running", got)
	}
	if err := m.Delete(ctx, scratch.ID); err != nil {
		t.Fatal(err)
	}
	if left := mounted(scratch.ID); len(left) > 0 {
		t.Errorf("the deleted scratch sandbox left mounts: %q", left)
	}

	// The control: the same size on disk.
	disk, _, err := m.Create(ctx, sandbox.CreateSpec{Resources: sandbox.Resources{DiskMB: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if fs := strings.TrimSpace(sh(disk.ID, "stat -f -c %T /workspace")); fs != "ext2/ext3" {
		t.Errorf("a workspace on disk is %q, want ext2/ext3 (ext4)", fs)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes", disk.ID, "workspace.img")); err != nil {
		t.Errorf("the workspace image: %v", err)
	}
	if err := m.Hibernate(ctx, disk.ID); err != nil {
		t.Errorf("hibernating a sandbox on disk: %v", err)
	}
}
