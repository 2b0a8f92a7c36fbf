package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/testenv"
)

// inspectorOnce installs the pinned MCP Inspector CLI once per test binary.
var inspectorOnce struct {
	sync.Once
	dir, out string
	err      error
}

// inspector returns the directory of an installed MCP Inspector CLI
// (testdata/mcp-inspector, from its lockfile); it skips without node and
// npm (fails under CI).
func inspector(t *testing.T) string {
	t.Helper()
	testenv.NeedCommand(t, "node")
	npm := testenv.NeedCommand(t, "npm")
	inspectorOnce.Do(func() {
		dir, err := filepath.Abs("testdata/mcp-inspector")
		if err != nil {
			inspectorOnce.err = err
			return
		}
		inspectorOnce.dir = dir
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "mcp-inspector-cli")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			inspectorOnce.err, inspectorOnce.out = err, string(out)
		}
	})
	if inspectorOnce.err != nil {
		t.Fatalf("npm ci in testdata/mcp-inspector: %v\n%s", inspectorOnce.err, inspectorOnce.out)
	}
	return inspectorOnce.dir
}

// runInspector runs the Inspector's CLI mode with args and decodes its
// JSON answer.
func runInspector(t *testing.T, dir string, env []string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "mcp-inspector-cli"), append([]string{"--cli"}, args...)...)
	// The CLI finds its package.json relative to the working directory.
	cmd.Dir = filepath.Join(dir, "node_modules")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("inspector %v: %v in %q (stderr %s)", args, err, stdout.String(), stderr.String())
	}
	return out
}

// TestMCPInspector lists and calls Berth's tools with the MCP Inspector's
// CLI from npm, over streamable HTTP and over stdio (`berth mcp`).
func TestMCPInspector(t *testing.T) {
	if testenv.Runtime() != "process" {
		t.Skip("the MCP Inspector runs in the process-runtime pass of make test")
	}
	dir := inspector(t)
	d := testenv.StartDaemon(t, nil)
	targets := map[string][]string{
		"http": {d.URL + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + d.Token},
		// Each run is a process of its own: a named toolset, kept between
		// runs, makes them one toolset.
		"stdio": {testenv.Binary(t), "mcp", "--toolset", "inspector", "--keep"},
	}
	env := []string{"BERTH_URL=" + d.URL, "BERTH_TOKEN=" + d.Token}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			list := runInspector(t, dir, env, append(target, "--method", "tools/list")...)
			tools, _ := list["tools"].([]any)
			if len(tools) != len(mcpTools) {
				t.Fatalf("tools/list: %d tools, want %d", len(tools), len(mcpTools))
			}
			open := runInspector(t, dir, env, append(target, "--method", "tools/call", "--tool-name", "sandbox_open",
				"--tool-arg", "name=inspector-"+name, "--tool-arg", "runtime=process")...)
			id, _ := open["structuredContent"].(map[string]any)["id"].(string)
			if !strings.HasPrefix(id, "sbx_") {
				t.Fatalf("sandbox_open: %v", open)
			}
			run := runInspector(t, dir, env, append(target, "--method", "tools/call", "--tool-name", "sandbox_exec",
				"--tool-arg", "sandbox="+id, "--tool-arg", "command=echo from-the-inspector")...)
			if b, _ := json.Marshal(run["content"]); !strings.Contains(string(b), "from-the-inspector") || run["isError"] == true {
				t.Fatalf("sandbox_exec: %v", run)
			}
			if name == "http" {
				return
			}
			// An unnamed berth mcp is a toolset of its own: it does not
			// list the named one's sandbox.
			fresh := runInspector(t, dir, env, testenv.Binary(t), "mcp", "--method", "tools/call", "--tool-name", "sandbox_list")
			if b, _ := json.Marshal(fresh["structuredContent"]); strings.Contains(string(b), id) || !strings.Contains(string(b), "sandboxes") {
				t.Fatalf("another berth mcp lists: %s", b)
			}
		})
	}
}
