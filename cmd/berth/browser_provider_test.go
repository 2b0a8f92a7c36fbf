package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/testenv"
	"github.com/berthdev/berth/internal/testenv/providerfake"
)

// TestBrowserProviderCommands runs berth serve with a Steel key file
// pointed at Steel's fake, then berth browser open --provider steel and
// close: the provider session is created and released (and one left open
// when the daemon stops), and the key is not in the daemon's log. Bad
// provider flags are usage errors.
func TestBrowserProviderCommands(t *testing.T) {
	t.Parallel()
	testenv.NeedChromium(t)
	if testenv.Runtime() != "process" {
		t.Skip("browser tests run in the process-runtime pass of make test")
	}
	f := providerfake.New(t, providerfake.Steel)
	dir := testenv.ShortTempDir(t)
	keyFile := filepath.Join(dir, "steel.key")
	if err := os.WriteFile(keyFile, []byte(f.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := testenv.StartDaemonProcess(t, filepath.Join(dir, "data"), "--steel-api-key-file", keyFile, "--steel-url", f.URL)
	f.SetBackend(d.URL, d.Token)
	c := newCLI(t, d)

	b := strings.TrimSpace(c.ok("browser", "open", "--mode", "remote", "--provider", "steel").stdout)
	if !strings.HasPrefix(b, "brs_") {
		t.Fatalf("browser open printed %q, want a session ID", b)
	}
	if created, _, running, _ := f.Counts(); created != 1 || running != 1 {
		t.Errorf("after open the fake has created %d, running %d; want 1, 1", created, running)
	}
	c.fails(1, "provider_not_configured", "browser", "open", "--provider", "browserbase")
	c.ok("browser", "close", b)
	if created, released, running, _ := f.Counts(); created != 1 || released != 1 || running != 0 {
		t.Errorf("after close the fake has created %d, released %d, running %d; want 1, 1, 0", created, released, running)
	}
	// A session left open is released when the daemon stops.
	c.ok("browser", "open", "--provider", "steel")
	if err := d.Stop(t); err != nil {
		t.Errorf("daemon stop: %v", err)
	}
	if created, released, running, _ := f.Counts(); created != 2 || released != 2 || running != 0 {
		t.Errorf("after the daemon stopped the fake has created %d, released %d, running %d; want 2, 2, 0", created, released, running)
	}
	log, err := os.ReadFile(filepath.Join(dir, "daemon.log"))
	if err != nil || !strings.Contains(string(log), "provider session released") || strings.Contains(string(log), f.Key) {
		t.Errorf("daemon log (err %v) does not name the release, or holds the key:\n%s", err, log)
	}

	empty := filepath.Join(dir, "empty.key")
	_ = os.WriteFile(empty, []byte("\n"), 0o600)
	bare := bareCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--browserbase-api-key-file", keyFile}, "needs --browserbase-project-id"},
		{[]string{"--browserbase-project-id", "p"}, "needs --browserbase-api-key-file"},
		{[]string{"--steel-api-key-file", empty}, "is empty"},
		{[]string{"--steel-api-key-file", filepath.Join(dir, "missing.key")}, "no such file"},
		{[]string{"--steel-api-key-file", keyFile, "--steel-url", "ftp://x"}, "--steel-url"},
	} {
		args := append([]string{"serve", "--data", filepath.Join(dir, "never"), "--listen", "127.0.0.1:0"}, tc.args...)
		r := bare.run(args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, f.Key) {
			t.Errorf("%v\nwant exit 2 naming %q, without the key", r, tc.want)
		}
	}
}
