package main_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/testenv"
)

// TestToolboxNPM builds the toolbox's npm half (templates/toolbox/build.sh
// --npm-only) through a template build with network egress, from the real
// npm registry, and runs each tool once in a sandbox of it. A registry at a
// special-purpose address (a mirror) is marked public for the daemon, as
// an operator would.
func TestToolboxNPM(t *testing.T) {
	if testenv.Runtime() != "container" {
		t.Skip("template builds run on the container runtime; the container pass covers this")
	}
	t.Parallel()
	testenv.NeedCommand(t, "npm")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", "registry.npmjs.org")
	if err != nil || len(addrs) == 0 {
		testenv.Missing(t, "the npm registry does not resolve: %v", err)
	}
	var public []string
	for _, a := range addrs {
		if _, special := netpolicy.SpecialPurpose(a.Unmap()); special {
			public = append(public, netip.PrefixFrom(a.Unmap(), 32).String())
		}
	}
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.Egress.Public = public })
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, filepath.Join(root, "templates", "toolbox", "build.sh"), "--npm-only", "toolbox-npm")
	build.Env = append(os.Environ(), "BERTH="+testenv.Binary(t), "BERTH_URL="+d.URL, "BERTH_TOKEN="+d.Token)
	out, err := build.CombinedOutput()
	if err != nil {
		log, _ := d.Client.TemplateLog(ctx, "toolbox-npm")
		t.Fatalf("building the toolbox's npm half: %v\n%s\nbuild log:\n%s", err, out, log)
	}
	c := newCLI(t, d)
	sb := strings.TrimSpace(c.ok("sandbox", "create", "--runtime", "container", "--template", "toolbox-npm").stdout)
	for cmd, want := range map[string]string{
		"bun --version":                           "1.4.4",
		"biome --version":                         "2.6.8",
		"typescript-language-server --version":    "6.0.2",
		"tsc --version":                           "Version 5.",
		"npm config get prefix":                   "/workspace/.local",
		"ls /template/app/node_modules/@tanstack": "react-start",
		// npm install -g works in the read-only root: into $HOME/.local.
		`mkdir -p /tmp/hello && cd /tmp/hello && printf '{"name":"hello","version":"1.0.0","bin":{"hello":"h.js"}}' > package.json && printf '#!/usr/bin/env node\nconsole.log("hello from a global package")\n' > h.js && npm install -g --offline . >/dev/null 2>&1 && hello`: "hello from a global package",
	} {
		r := c.run("exec", sb, "--", "sh", "-c", cmd)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("%s in a sandbox of the toolbox: %v\nwant %q", cmd, r, want)
		}
	}
}
