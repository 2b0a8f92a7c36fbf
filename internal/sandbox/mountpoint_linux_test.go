package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berthdev/berth/internal/errcode"
)

// TestCheckMountPoints: a template build's layer whose mount points are
// not real directories (a build that turned /proc into a link, say) is
// refused; the controls pass: real directories, none at all, links
// elsewhere. Package runtimes tests a sandbox's whole root the same way.
func TestCheckMountPoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		make  func(t *testing.T, dir string)
		check func(dir string) error
		ok    bool
	}{
		{"layer: proc a link", func(t *testing.T, dir string) { linkIn(t, "sys", dir, "proc") }, checkLayer, false},
		{"layer: etc a link", func(t *testing.T, dir string) { mkdirIn(t, dir, "usr/etc"); linkIn(t, "usr/etc", dir, "etc") }, checkLayer, false},
		{"layer: dev a file", func(t *testing.T, dir string) { writeIn(t, dir, "dev") }, checkLayer, false},
		{"layer control: opt and usr", func(t *testing.T, dir string) { mkdirIn(t, dir, "opt/x"); mkdirIn(t, dir, "proc") }, checkLayer, true},
		{"layer control: links elsewhere", func(t *testing.T, dir string) { linkIn(t, "/proc", dir, "procs") }, checkLayer, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.make(t, dir)
			err := tt.check(dir)
			if tt.ok {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if errcode.CodeOf(err) != errcode.Invalid || errcode.ReasonOf(err) != "image_mount_point_invalid" {
				t.Fatalf("check = %v, want invalid image_mount_point_invalid", err)
			}
		})
	}
}

func mkdirIn(t *testing.T, dir, name string) {
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeIn(t *testing.T, dir, name string) {
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func linkIn(t *testing.T, target, dir, name string) {
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}
