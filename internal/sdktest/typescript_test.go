// Package sdktest tests Berth's SDKs in other languages against the real
// daemon: each SDK's own test suite, run by its own test runner.
package sdktest

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// sdkDir is the TypeScript SDK's directory, from this package's.
const sdkDir = "../../sdk/typescript"

// TestTypeScriptSDK runs the TypeScript SDK's checks and its node --test
// suite against a real daemon: the committed dist/ must be what tsc builds
// from src/, the tests type-check, the package installs and imports as
// @berth/sdk, and every test passes.
func TestTypeScriptSDK(t *testing.T) {
	if testenv.Runtime() != "process" {
		t.Skip("the TypeScript SDK runs in the process-runtime pass of make test")
	}
	testenv.NeedLinux(t)
	node := testenv.NeedCommand(t, "node")
	npm := testenv.NeedCommand(t, "npm")
	needNode(t, node, 18)
	t.Parallel()

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := copySDK(t)
	npmRun(ctx, t, dir, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")

	t.Run("dist is built from src", func(t *testing.T) {
		out := t.TempDir()
		npmRun(ctx, t, dir, tsc, "-p", "tsconfig.json", "--outDir", out)
		compareTrees(t, filepath.Join(dir, "dist"), out)
	})
	t.Run("tests type-check", func(t *testing.T) {
		npmRun(ctx, t, dir, tsc, "-p", "tsconfig.test.json")
	})

	browserOK, jobsOK := capabilities(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		if jobsOK {
			c.JobPools = map[string]int{"browser": 1}
		}
	})
	env := append(os.Environ(), "BERTH_URL="+d.URL, "BERTH_TOKEN="+d.Token,
		"BERTH_SDK_RUNTIME="+testenv.Runtime(), "BERTH_SDK_BROWSER="+flag(browserOK), "BERTH_SDK_JOBS="+flag(jobsOK))

	t.Run("installs and imports as @berth/sdk", func(t *testing.T) {
		app := t.TempDir()
		if err := os.WriteFile(filepath.Join(app, "package.json"), []byte(`{"name":"app","private":true,"type":"module"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		// --install-links packs the SDK as a registry install would,
		// so a file missing from "files" fails here.
		npmRun(ctx, t, app, npm, "install", "--no-audit", "--no-fund", "--offline", "--install-links", dir)
		script := `import { Berth, BerthError } from "@berth/sdk";
const b = new Berth();
const sys = await b.system();
try { await b.sandboxes.get("sbx_nope"); } catch (e) {
  if (!(e instanceof BerthError)) throw e;
  console.log("ok", sys.version, e.status, e.reason);
}`
		if err := os.WriteFile(filepath.Join(app, "main.mjs"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		out := runIn(ctx, t, app, env, node, "main.mjs")
		if !strings.Contains(out, "ok test 404 sandbox_not_found") {
			t.Errorf("the installed package printed %q, want ok test 404 sandbox_not_found", out)
		}
	})

	t.Run("node --test", func(t *testing.T) {
		out := runIn(ctx, t, dir, env, node, "--test", "--test-reporter=spec", "test/")
		t.Log(out)
	})
}

// needNode requires node of at least major version want.
func needNode(t *testing.T, node string, want int) {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if err != nil || major < want {
		testenv.Missing(t, "the TypeScript SDK needs Node.js %d or newer; node --version says %q (%v)", want, out, err)
	}
}

// capabilities reports whether the browser tests (Chromium) and the job
// test (Chromium and the container runtime, as root) can run here; under
// CI both must.
func capabilities(t *testing.T) (browserOK, jobsOK bool) {
	t.Helper()
	browserOK = browser.FindChromium() != ""
	_, crunErr := exec.LookPath("crun")
	_, runcErr := exec.LookPath("runc")
	jobsOK = browserOK && os.Geteuid() == 0 && (crunErr == nil || runcErr == nil)
	switch {
	case !browserOK:
		missingPart(t, "Chromium is not installed: the SDK's browser and job tests do not run")
	case !jobsOK:
		missingPart(t, "jobs need root and crun or runc: the SDK's job test does not run")
	}
	return browserOK, jobsOK
}

// missingPart notes a prerequisite of part of the suite that is missing:
// a log line locally, a failure under CI.
func missingPart(t *testing.T, msg string) {
	t.Helper()
	if testenv.InCI() {
		t.Fatalf("prerequisite missing under CI: %s", msg)
	}
	t.Logf("prerequisite missing: %s", msg)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// copySDK copies the SDK, without node_modules, into a temporary
// directory: npm ci and the build check write there, not in the tree.
func copySDK(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(sdkDir)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "typescript")
	err = filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() && e.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copying the SDK: %v", err)
	}
	return dst
}

// npmRun runs a build step; a failure is the test's.
func npmRun(ctx context.Context, t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// runIn runs a command with env and returns its output; a failure fails t.
func runIn(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// compareTrees fails t unless the files under want and got are the same.
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				rel, _ := filepath.Rel(root, p)
				m[rel], _ = os.ReadFile(p)
			}
			return nil
		})
		return m
	}
	w, g := files(want), files(got)
	for name, b := range g {
		if wb, ok := w[name]; !ok {
			t.Errorf("dist/%s is missing: run npm run build in sdk/typescript", name)
		} else if !bytes.Equal(wb, b) {
			t.Errorf("dist/%s is not what tsc builds from src/: run npm run build in sdk/typescript", name)
		}
	}
	for name := range w {
		if _, ok := g[name]; !ok {
			t.Errorf("dist/%s is built from nothing in src/: remove it", name)
		}
	}
}
