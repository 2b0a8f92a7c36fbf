package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/testenv"
)

// TestWorkersCredential runs berth workers credential, which needs no
// daemon: from HQ's secret file it prints a worker's credential, the same
// for the same secret and ID and another for another ID or secret; a bad
// ID, a secret file others can read and a short secret are refused with
// their reasons, and print nothing.
func TestWorkersCredential(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	c := bareCLI(t)
	dir := t.TempDir()
	secretFile := func(name, secret string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(secret+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	hq := secretFile("hq.token", cluster.NewSecret(), 0o600)
	other := secretFile("other.token", cluster.NewSecret(), 0o600)
	cred := func(id, file string) string {
		t.Helper()
		out := c.ok("workers", "credential", id, "--service-token-file", file).stdout
		s := strings.TrimSuffix(out, "\n")
		if len(s) < cluster.MinSecretLen || strings.ContainsAny(s, " \t\r\n") {
			t.Fatalf("workers credential %s printed %q, want one line of at least %d characters", id, out, cluster.MinSecretLen)
		}
		return s
	}

	w1 := cred("w1", hq)
	if again := cred("w1", hq); again != w1 {
		t.Errorf("w1's credential changed between two runs: %q, then %q", w1, again)
	}
	if w2 := cred("w2", hq); w2 == w1 {
		t.Errorf("w1 and w2 have the same credential %q", w1)
	}
	if o := cred("w1", other); o == w1 {
		t.Errorf("w1's credential is the same under another HQ secret: %q", w1)
	}
	// The credential is what a worker started with it verifies HQ's
	// assertions with: HQ's side computes the same from its secret.
	secret, err := cluster.ReadSecret(hq)
	if err != nil {
		t.Fatal(err)
	}
	if want := cluster.WorkerCredential(secret, "w1"); w1 != want {
		t.Errorf("workers credential w1 = %q, want HQ's %q", w1, want)
	}

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad ID", []string{"W_1", "--service-token-file", hq}, 1, "worker_config_invalid"},
		{"ID too long", []string{strings.Repeat("w", 64), "--service-token-file", hq}, 1, "worker_config_invalid"},
		{"world-readable secret", []string{"w1", "--service-token-file", secretFile("open.token", cluster.NewSecret(), 0o644)}, 1, "service_token_invalid"},
		{"group-readable secret", []string{"w1", "--service-token-file", secretFile("group.token", cluster.NewSecret(), 0o640)}, 1, "service_token_invalid"},
		{"short secret", []string{"w1", "--service-token-file", secretFile("short.token", "too-short", 0o600)}, 1, "service_token_invalid"},
		{"missing secret file", []string{"w1", "--service-token-file", filepath.Join(dir, "nope")}, 1, "service_token_invalid"},
		{"no secret file flag", []string{"w1"}, 2, "--service-token-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := c.with()
			c.t = t
			if r := c.fails(tt.code, tt.want, append([]string{"workers", "credential"}, tt.args...)...); r.stdout != "" {
				t.Errorf("%v\nwant nothing on stdout", r)
			}
		})
	}
}

// TestWorkersSingle runs berth workers against berth serve alone: it is no
// cluster, so it lists no workers and knows none by ID; the routes are the
// admin's.
func TestWorkersSingle(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	admin := newCLI(t, d)

	var list apitype.WorkerList
	out := admin.ok("workers", "ls", "--json").stdout
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Role != "single" || list.Workers == nil || len(list.Workers) != 0 {
		t.Errorf("workers ls --json = %s (%v), want role single and an empty workers list", out, err)
	}
	if ls := admin.ok("workers", "ls").stdout; !strings.Contains(ls, "no workers") || !strings.Contains(ls, "role single") {
		t.Errorf("workers ls = %q, want it to say a single daemon has no workers", ls)
	}
	for _, sub := range []string{"get", "drain", "undrain"} {
		admin.fails(1, "worker_not_found", "workers", sub, "w1")
	}
	admin.fails(2, "", "workers", "get")

	// A key below admin is refused; the admin's ls above is the control.
	k := strings.TrimSpace(admin.ok("keys", "create", "ci", "--scope", "execution").stdout)
	admin.with("BERTH_TOKEN="+k).fails(1, "scope_insufficient", "workers", "ls")
}
