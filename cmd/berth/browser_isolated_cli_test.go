package main_test

import (
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// TestBrowserIsolatedCommands runs the command: an isolated
// session opened by the CLI prints its ID on stdout (its CDP endpoint on
// stderr), browses the test internet through Berth's egress, is refused
// the metadata address, and closes.
func TestBrowserIsolatedCommands(t *testing.T) {
	t.Parallel()
	if testenv.Runtime() == "process" {
		t.Skip("isolated browser sessions need an isolated runtime; make test runs them on container and gvisor")
	}
	testenv.NeedChromium(t)
	in := testenv.NewInternet(t)
	d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
		in.Apply(cfg)
		cfg.BrowserIsolatedRuntime = testenv.Runtime()
	})
	c := newCLI(t, d)
	r := c.ok("browser", "open", "--mode", "isolated")
	b := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(b, "brs_") || strings.Contains(b, "\n") {
		t.Fatalf("browser open printed %q, want the session ID alone", r.stdout)
	}
	if !strings.Contains(r.stderr, "/v1/browser/sessions/"+b+"/cdp") {
		t.Errorf("browser open --mode isolated printed no CDP endpoint: %q", r.stderr)
	}
	c.ok("browser", "goto", b, "http://www.test.example/")
	if got := c.ok("browser", "eval", b, "document.body.innerText").stdout; !strings.Contains(got, "hello from the test internet") {
		t.Errorf("page text = %s", got)
	}
	if got := c.ok("browser", "goto", b, "http://169.254.169.254/latest/meta-data/").stdout; !strings.Contains(got, `"status":403`) {
		t.Errorf("goto metadata = %s, want Berth's 403", got)
	}
	if got := c.ok("browser", "ls").stdout; !strings.Contains(got, b) || !strings.Contains(got, "isolated") {
		t.Errorf("browser ls = %s", got)
	}
	c.ok("browser", "close", b)
}
