package main_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/testenv"
)

// TestBrowserLiveCommands runs the commands: a view link, then a
// control lease that shuts automation out (409 control_held) until the
// holder, acting with --lease, releases it.
func TestBrowserLiveCommands(t *testing.T) {
	t.Parallel()
	testenv.NeedChromium(t)
	if testenv.Runtime() != "process" {
		t.Skip("browser tests run in the process-runtime pass of make test")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!doctype html><title>0</title><button onclick="document.title = +document.title + 1">Sign in</button>`))
	}))
	defer srv.Close()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	b := strings.TrimSpace(c.ok("browser", "open").stdout)
	c.ok("browser", "goto", b, srv.URL+"/")

	link := strings.TrimSpace(c.ok("browser", "live", b).stdout)
	if !strings.HasPrefix(link, d.URL+"/live/") || strings.Contains(link, d.Token) {
		t.Fatalf("browser live printed %q, want a /live/ link without the key", link)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), strings.TrimPrefix(link, d.URL)+"/live.js") {
		t.Errorf("GET %s = %d %s", link, resp.StatusCode, page)
	}

	if got := strings.TrimSpace(c.ok("browser", "control", "status", b).stdout); got != "automation" {
		t.Errorf("control status before a lease = %q", got)
	}
	c.fails(2, "between 1s and 2m", "browser", "control", "acquire", b, "--ttl", "5m")
	lease := strings.TrimSpace(c.ok("browser", "control", "acquire", b, "--ttl", "2m").stdout) // the longest: the steps below run on a loaded machine
	if !strings.HasPrefix(lease, "bcl_") || strings.Contains(lease, "\n") {
		t.Fatalf("control acquire printed %q, want the token only", lease)
	}
	if got := c.ok("browser", "control", "status", b).stdout; !strings.HasPrefix(got, "human until ") || strings.Contains(got, lease) {
		t.Errorf("control status during a lease = %q", got)
	}
	c.fails(1, "control_held", "browser", "click", b, "role=button:Sign in")
	c.fails(1, "control_held", "browser", "close", b)
	c.ok("browser", "click", b, "--lease", lease, "role=button:Sign in")
	if got := strings.TrimSpace(c.ok("browser", "eval", b, "--lease", lease, "document.title").stdout); got != `"1"` {
		t.Errorf("title after the leased click = %s, want \"1\"", got)
	}
	c.ok("browser", "control", "renew", b, lease, "--ttl", "90s")
	c.ok("browser", "control", "release", b, lease)
	c.fails(1, "control_not_held", "browser", "control", "release", b, lease)
	c.ok("browser", "click", b, "role=button:Sign in")
	if got := strings.TrimSpace(c.ok("browser", "eval", b, "document.title").stdout); got != `"2"` {
		t.Errorf("title after release and a click = %s, want \"2\"", got)
	}
	c.ok("browser", "close", b)
}
