package main_test

import (
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// TestNetworkCLI walks the commands: an egress sandbox, a refusal
// with its reason, a live allowlist, a secret set on the way out, the
// connection log, and the errors bad input gets.
func TestNetworkCLI(t *testing.T) {
	t.Parallel()
	// One daemon: on the test internet where the isolated half runs.
	rt := testenv.Runtime()
	var in *testenv.Internet
	var tweak func(*daemon.Config)
	if rt != "process" {
		in = testenv.NewInternet(t)
		tweak = in.Apply
	}
	d := testenv.StartDaemon(t, tweak)
	c := newCLI(t, d)
	c.fails(1, "network.mode", "sandbox", "create", "--runtime", "process", "--network", "egress")
	c.fails(1, "network.mode", "sandbox", "create", "--network", "sometimes")
	if rt == "process" {
		return // the isolated half runs in make test's container and gvisor passes
	}
	sb := strings.TrimSpace(c.ok("sandbox", "create", "--runtime", rt, "--network", "egress").stdout)
	if r := c.ok("exec", sb, "--", "curl", "-sS", "-m", "10", "http://www.test.example/"); !strings.Contains(r.stdout, "hello from the test internet") {
		t.Errorf("%v", r)
	}
	r := c.run("exec", sb, "--", "curl", "-sS", "-m", "10", "http://169.254.169.254/")
	if !strings.Contains(r.stdout, "destination_blocked") {
		t.Errorf("metadata: %v", r)
	}
	c.ok("sandbox", "network", "set", sb, "--allow-only", "other.test.example")
	if r := c.run("exec", sb, "--", "curl", "-sS", "-m", "10", "http://"+testenv.InternetHTTPIP+"/"); !strings.Contains(r.stdout, "not_allowed") {
		t.Errorf("after --allow-only: %v", r)
	}
	c.ok("sandbox", "network", "set", sb, "--clear")
	c.ok("secret", "set", sb, "--host", testenv.InternetHost, "--header", "Authorization", "--value", "Bearer cli-secret-42")
	if r := c.ok("secret", "ls", sb); !strings.Contains(r.stdout, testenv.InternetHost) || strings.Contains(r.stdout, "cli-secret") {
		t.Errorf("secret ls: %v", r)
	}
	c.ok("exec", sb, "--", "curl", "-sS", "-m", "10", "https://"+testenv.InternetHost+"/")
	if got := in.Header("Authorization"); len(got) != 1 || got[0] != "Bearer cli-secret-42" {
		t.Errorf("upstream saw %q", got)
	}
	log := c.ok("sandbox", "network", "log", sb).stdout
	for _, want := range []string{"DESTINATION", "169.254.169.254:80", "destination_blocked", "allow+secret", testenv.InternetHost} {
		if !strings.Contains(log, want) {
			t.Errorf("network log lacks %q:\n%s", want, log)
		}
	}
	c.fails(1, "network.allow[0]", "sandbox", "network", "set", sb, "--allow", "10.0.0.0/33")
	c.fails(1, "secrets[0].header", "secret", "set", sb, "--host", "x.example", "--header", "Host", "--value", "v")
	c.fails(2, "exactly one of --value and --value-file", "secret", "set", sb, "--host", "x.example", "--header", "A")
	c.ok("secret", "rm", sb, "--host", testenv.InternetHost)
	if r := c.ok("secret", "ls", sb); strings.Contains(r.stdout, testenv.InternetHost) {
		t.Errorf("after rm: %v", r)
	}
}
