package main_test

import (
	"archive/zip"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/testenv"
)

// TestBrowserTraceCommands records a trace with the CLI: trace start, a
// few actions, trace stop writing the ZIP.
func TestBrowserTraceCommands(t *testing.T) {
	t.Parallel()
	testenv.NeedChromium(t)
	if testenv.Runtime() != "process" {
		t.Skip("browser tests run in the process-runtime pass of make test")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!doctype html><title>Traced</title><button onclick="document.title = 'clicked'">Go</button>`))
	}))
	defer srv.Close()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	b := strings.TrimSpace(c.ok("browser", "open", "--mode", "process").stdout)
	defer c.run("browser", "close", b)
	file := filepath.Join(c.dir, "trace.zip")
	c.fails(1, "trace_not_active", "browser", "trace", "stop", b, file)
	c.ok("browser", "trace", "start", b)
	c.fails(1, "trace_active", "browser", "trace", "start", b)
	c.ok("browser", "goto", b, srv.URL+"/")
	c.ok("browser", "click", b, "role=button:Go")
	r := c.ok("browser", "trace", "stop", b, file)
	if !strings.Contains(r.stderr, "2 actions") {
		t.Errorf("trace stop said %q, want the 2 actions", r.stderr)
	}
	z, err := zip.OpenReader(file)
	if err != nil {
		t.Fatalf("trace stop wrote no ZIP: %v", err)
	}
	defer z.Close()
	names := map[string]bool{}
	for _, f := range z.File {
		names[f.Name] = true
	}
	if !names["trace.json"] || !names["actions.json"] || !names["screenshots/0001.jpg"] {
		t.Errorf("the ZIP holds %v, want trace.json, actions.json and screenshots", names)
	}
	// Without --keep the ZIP leaves the session once written; with it, it
	// stays as an artifact.
	ctx := context.Background()
	if list, err := d.Client.BrowserArtifacts(ctx, b); err != nil || list.Files != 0 {
		t.Errorf("artifacts after trace stop = %+v, %v; want none", list, err)
	}
	c.ok("browser", "trace", "start", b)
	c.ok("browser", "trace", "stop", "--keep", b, filepath.Join(c.dir, "kept.zip"))
	if list, err := d.Client.BrowserArtifacts(ctx, b); err != nil || list.Files != 1 || list.Artifacts[0].Kind != "trace" {
		t.Errorf("artifacts after trace stop --keep = %+v, %v; want the trace", list, err)
	}
}
