package runtimes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// TestCheckMountPoints: a sandbox's whole root whose mount points are not
// real directories (a /workspace or agent binary that is a link, say) is
// refused; the control passes. Package sandbox tests a template build's
// layer the same way.
func TestCheckMountPoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		make  func(t *testing.T, dir string)
		check func(dir string) error
		ok    bool
	}{
		{"root: workspace a link", func(t *testing.T, dir string) { skeletonIn(t, dir, "workspace"); linkIn(t, "/", dir, "workspace") }, rootCheck, false},
		{"root: agent binary a link", func(t *testing.T, dir string) {
			skeletonIn(t, dir, "")
			os.Remove(filepath.Join(dir, ".berth/berth"))
			linkIn(t, "/etc/passwd", dir, ".berth/berth")
		}, rootCheck, false},
		{"root: a bind target a link", func(t *testing.T, dir string) { skeletonIn(t, dir, ""); linkIn(t, "/", dir, "usr") }, rootCheck, false},
		{"root control", func(t *testing.T, dir string) { skeletonIn(t, dir, ""); mkdirIn(t, dir, "usr") }, rootCheck, true},
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

func rootCheck(dir string) error { return checkRoot(dir, []string{"/usr"}) }

// skeletonIn makes the mount points in dir, but skip, and the agent's file.
func skeletonIn(t *testing.T, dir, skip string) {
	for _, p := range sandbox.MountPoints() {
		if p != skip {
			mkdirIn(t, dir, p)
		}
	}
	writeIn(t, dir, ".berth/berth")
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
