package main_test

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/probe"
	"github.com/berthdev/berth/internal/testenv"
)

// TestProbe runs the hidden "berth probe" command here, unsandboxed: the
// probes it names answer in JSON lines, and misuse is a usage error.
// internal/daemon's security suite runs it inside sandboxes.
func TestProbe(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the probes run on Linux only")
	}
	c := bareCLI(t)
	r := c.ok("probe", "--json", "ESC-02", "RES-13")
	var got []string
	for _, res := range probe.Parse(r.stdout) {
		got = append(got, res.ID+" "+res.Attempt)
		if res.Result == probe.Error {
			t.Errorf("%s", res)
		}
	}
	want := []string{"ESC-02 capabilities", "ESC-02 no_new_privs", "ESC-02 seccomp", "RES-13 RLIMIT_CORE"}
	if !slices.Equal(got, want) {
		t.Errorf("berth probe --json ESC-02 RES-13 printed %v, want %v\n%s", got, want, r.stdout)
	}
	if r := c.ok("probe", "esc-02"); !strings.HasPrefix(r.stdout, "ESC-02 capabilities: ") {
		t.Errorf("text output: %q", r.stdout)
	}
	c.fails(2, "name the probes", "probe")
	c.fails(2, `unknown probe "ESC-99"`, "probe", "ESC-99")
}
