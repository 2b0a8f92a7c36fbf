package jobs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRuntimeLock: the digest covers the files' content and the package
// list, is computed again only when a file's stamp moves, and changes when
// a file is replaced. It logs what one computation costs here.
func TestRuntimeLock(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth")
	if err := os.WriteFile(bin, []byte("one binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := &runtimeLock{files: lockFiles(bin)}
	rec, cost, err := l.record()
	if err != nil || len(rec) != len("sha256:")+64 {
		t.Fatalf("record: %q, %v", rec, err)
	}
	t.Logf("digest %s of %s and %d packages in %v", rec, bin, packages(t), cost)
	if r, now, why := l.check(); r != rec || now != rec || why != "" {
		t.Errorf("unchanged: check = %q %q %q", r, now, why)
	}
	// A binary of the real size costs what the daemon pays at start.
	if exe, err := os.Executable(); err == nil {
		big := &runtimeLock{files: lockFiles(exe)}
		start := time.Now()
		if _, _, err := big.record(); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(exe)
		t.Logf("with a %d MB binary: %v", fi.Size()>>20, time.Since(start))
	}
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, []byte("another binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	if r, now, why := l.check(); r != rec || now == rec || why != "" {
		t.Errorf("replaced: check = %q %q %q, want a new digest", r, now, why)
	}
}

func packages(t *testing.T) int {
	pkgs, err := dpkgPackages(DpkgStatus)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(pkgs)
}
