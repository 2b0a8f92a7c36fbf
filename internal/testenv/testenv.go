// Package testenv gives tests the real components they need: the berth
// binary, a running daemon, root. A missing prerequisite skips the test
// locally and fails it under CI=true, so CI can never pass by skipping.
package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/browser"
)

// InCI reports whether tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t locally, or fails it under CI, because a prerequisite is
// missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("prerequisite missing under CI: %s", msg)
	}
	t.Skipf("prerequisite missing: %s", msg)
}

// NeedRoot requires running as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root")
	}
}

// NeedLinux requires Linux.
func NeedLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		Missing(t, "needs Linux, not %s", runtime.GOOS)
	}
}

// NeedCommand requires an executable on PATH and returns its path.
func NeedCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is not installed", name)
	}
	return p
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the berth binary: $BERTH_BIN when set (make
// test builds it), else one built once per test process.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("BERTH_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("BERTH_BIN=%s: %v", p, err)
		}
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "berth")
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildPath, "./cmd/berth")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building berth: %v", buildErr)
	}
	return buildPath
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above %s", dir)
		}
		dir = parent
	}
}

// ShortTempDir returns a temporary directory with a short path, removed
// after the test. Unix socket paths under it stay well within sun_path.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// gVisor's runsc leaves a mount in its state directory.
		unmountUnder(dir)
		os.RemoveAll(dir)
	})
	return dir
}

// ProcessesUnder returns the PIDs of processes whose command line mentions
// s (a data directory, say) or whose working directory is under it, other
// than the test process itself.
func ProcessesUnder(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie
		}
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if strings.Contains(string(b), s) || strings.HasPrefix(cwd, s) {
			out = append(out, pid)
		}
	}
	return out
}

// Eventually polls cond every 10ms until it holds or d passes.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FreePort returns a loopback TCP port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// NeedChromium requires Debian's Chromium (chromium-headless-shell, else
// chromium) and returns its path.
func NeedChromium(t testing.TB) string {
	t.Helper()
	p := browser.FindChromium()
	if p == "" {
		Missing(t, "Chromium is not installed (apt-get install chromium-headless-shell)")
	}
	return p
}
