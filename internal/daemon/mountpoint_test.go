package daemon_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestTemplateImportMountPoints imports images whose /proc, /sys, /dev or
// /tmp is not a directory once their layers are applied: each is refused
// with 400 image_mount_point_invalid naming the path, and leaves no
// template (before, proc -> /x was a 500, and proc -> sys imported: crun
// then refused it with a 503, gVisor mounted procfs at /sys). The control,
// a plain image, imports and starts. A template whose root is tampered
// with on disk after its import is refused the same way when a sandbox
// starts (the runtime's own check), while the untampered one starts.
func TestTemplateImportMountPoints(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, tt := range []struct {
		name   string
		layers []map[string]string
		path   string
	}{
		{"proc-abs", []map[string]string{{"proc": "-> /x"}}, "/proc"},
		{"proc-sys", []map[string]string{{"sys/": "", "proc": "-> sys", "etc/motd": "hi\n"}}, "/proc"},
		{"dev-file", []map[string]string{{"dev": "a file"}}, "/dev"},
		{"tmp-later", []map[string]string{{"tmp/": "", "tmp/f": "f"}, {"tmp": "-> /var/tmp"}}, "/tmp"},
	} {
		_, err := d.Client.ImportTemplate(ctx, tt.name, "", bytes.NewReader(ociLayout(t, tt.layers, nil)))
		if errcode.CodeOf(err) != errcode.Invalid || errcode.ReasonOf(err) != "image_mount_point_invalid" ||
			!strings.Contains(err.Error(), tt.path+" is") {
			t.Errorf("ImportTemplate(%s) = %v, want invalid image_mount_point_invalid naming %s", tt.name, err, tt.path)
		}
	}
	if list, err := d.Client.Templates(ctx); err != nil || len(list) != 1 {
		t.Errorf("Templates = %+v, %v; want only base", list, err)
	}

	// The control: the same kind of image with real directories.
	plain := ociLayout(t, []map[string]string{{"sys/": "", "proc/": "", "dev/": "", "tmp/": "", "etc/motd": "hi\n"}}, nil)
	for _, name := range []string{"plain", "tampered"} {
		if _, err := d.Client.ImportTemplate(ctx, name, "", bytes.NewReader(plain)); err != nil {
			t.Fatalf("ImportTemplate(%s): %v", name, err)
		}
	}
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "plain"})
	if err != nil || sb.State != apitype.StateRunning {
		t.Fatalf("CreateSandbox(plain) = %+v, %v; want running", sb, err)
	}
	if err := d.Client.Mkdir(ctx, sb.ID, "works"); err != nil {
		t.Errorf("Mkdir in the plain image's sandbox: %v", err)
	}

	// Past the import, the start-time check holds: proc -> sys in the
	// template's root on disk.
	tpl, err := d.Client.Template(ctx, "tampered")
	if err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(d.DataDir, "templates", tpl.ID, "rootfs", "proc")
	if err := os.Remove(proc); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sys", proc); err != nil {
		t.Fatal(err)
	}
	_, err = d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Template: "tampered"})
	if errcode.CodeOf(err) != errcode.Invalid || errcode.ReasonOf(err) != "image_mount_point_invalid" || !strings.Contains(err.Error(), "/proc is") {
		t.Errorf("CreateSandbox(tampered) = %v, want invalid image_mount_point_invalid naming /proc", err)
	}
}
