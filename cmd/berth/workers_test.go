package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/testenv"
)

// TestWorkersCredential runs berth workers credential, which needs no
// daemon: from HQ's secret file it prints a worker's credential, the same
// for the same secret and ID and another for another ID or secret, and a
// note when it goes to a file others can read; a bad ID, a secret file
// others can read and a short secret are refused with their reasons, and
// print nothing.
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

	// Written to a file others can read, it says to chmod 600 it; to a
	// private file, nothing.
	for _, tt := range []struct{ umask, note string }{{"022", "chmod 600"}, {"077", ""}} {
		out := filepath.Join(dir, "w1-"+tt.umask+".token")
		cmd := exec.Command("sh", "-c", `umask "$1"; exec "$2" workers credential w1 --service-token-file "$3" > "$4"`,
			"sh", tt.umask, c.bin, hq, out)
		stderr, err := cmd.CombinedOutput()
		if b, rerr := os.ReadFile(out); err != nil || rerr != nil || strings.TrimSpace(string(b)) != w1 {
			t.Errorf("umask %s: workers credential w1 > file: %v %v, %q in the file, want w1's credential", tt.umask, err, rerr, b)
		}
		if got := string(stderr); (tt.note == "") != (got == "") || !strings.Contains(got, tt.note) {
			t.Errorf("umask %s: workers credential w1 > file printed %q on stderr, want %q", tt.umask, got, tt.note)
		}
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
	if r := admin.ok("workers", "ls"); strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "ID") ||
		!strings.Contains(r.stderr, "no workers") || !strings.Contains(r.stderr, "role single") {
		t.Errorf("%v\nwant the table's header alone, and a note that a single daemon has no workers", r)
	}
	for _, sub := range []string{"get", "drain", "undrain"} {
		admin.fails(1, "worker_not_found", "workers", sub, "w1")
	}
	admin.fails(2, "", "workers", "get")

	// A key below admin is refused; the admin's ls above is the control.
	k := strings.TrimSpace(admin.ok("keys", "create", "ci", "--scope", "execution").stdout)
	admin.with("BERTH_TOKEN="+k).fails(1, "scope_insufficient", "workers", "ls")
}

// TestWorkersHQ runs berth workers against a cluster's HQ (a real berth
// process over a real Postgres) with two workers in its configuration: w1,
// started with the credential berth workers credential printed, and w2,
// never started. The credential is the one a real worker takes HQ's
// requests with (a create through HQ lands on w1); ls, get, drain and
// undrain show and change what HQ sees.
func TestWorkersHQ(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	pg := testenv.Postgres(t)
	dir := testenv.ShortTempDir(t)
	for _, sub := range []string{"hq", "w1"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "hq.token")
	if err := os.WriteFile(secret, []byte(cluster.NewSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	hq := testenv.StartDaemonProcess(t, filepath.Join(dir, "hq", "d"), "--role", "hq", "--database", pg,
		"--service-token-file", secret, "--worker", fmt.Sprintf("w1=http://127.0.0.1:%d", port),
		"--worker", "w2=http://127.0.0.1:1,tenant=acme")
	admin := newCLI(t, hq)

	cred := admin.ok("workers", "credential", "w1", "--service-token-file", secret).stdout
	credFile := filepath.Join(dir, "w1.token")
	if err := os.WriteFile(credFile, []byte(cred), 0o600); err != nil {
		t.Fatal(err)
	}
	w1 := testenv.StartDaemonProcess(t, filepath.Join(dir, "w1", "d"), "--role", "worker", "--database", pg,
		"--worker-id", "w1", "--hq", hq.URL, "--service-token-file", credFile,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--browser-warm-contexts", "-1")
	w1.Client = nil // its own key opens nothing there: only HQ's assertions do
	testenv.Eventually(t, 30*time.Second, "w1 live", func() bool {
		return strings.Contains(admin.ok("workers", "ls").stdout, "live")
	})

	// The credential works: HQ's create reaches w1 and w1 takes it.
	sb := strings.TrimSpace(admin.ok("sandbox", "create", "--lazy").stdout)
	if !strings.HasPrefix(sb, "sbx_") {
		t.Fatalf("sandbox create through HQ printed %q", sb)
	}
	defer admin.ok("sandbox", "rm", sb)

	ls := admin.ok("workers", "ls").stdout
	for _, re := range []string{
		`(?m)^ID\s+STATUS\s+TENANT\s+URL\s+LEASE\s+RUNTIMES\s+BROWSER\s+SANDBOXES\s+SESSIONS\s+ACTIONS$`,
		fmt.Sprintf(`(?m)^w1\s+live\s+-\s+http://127\.0\.0\.1:%d\s+expires in \d+s\s+\S*%s\S*\s+(yes|no)\s+1/\d+\s+0/\d+\s+\d+$`, port, testenv.Runtime()),
		`(?m)^w2\s+unknown\s+acme\s+http://127\.0\.0\.1:1\s+never held\s+-\s+-\s+0/-\s+0/-\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(ls) {
			t.Errorf("workers ls =\n%s\nwant a line matching %s", ls, re)
		}
	}
	var list apitype.WorkerList
	if out := admin.ok("workers", "ls", "--json").stdout; json.Unmarshal([]byte(out), &list) != nil || list.Role != "hq" || len(list.Workers) != 2 {
		t.Errorf("workers ls --json = %s, want role hq and two workers", out)
	}
	var w apitype.Worker
	if out := admin.ok("workers", "get", "w1").stdout; json.Unmarshal([]byte(out), &w) != nil || w.ID != "w1" ||
		w.Status != "live" || w.LeaseExpiresAt == nil || w.Placed.Sandboxes != 1 {
		t.Errorf("workers get w1 = %s, want w1 live with its lease and 1 sandbox placed", out)
	}

	if out := admin.ok("workers", "drain", "w1").stdout; out != "w1: draining\n" {
		t.Errorf("workers drain w1 printed %q, want w1: draining", out)
	}
	if !regexp.MustCompile(`(?m)^w1\s+draining\s`).MatchString(admin.ok("workers", "ls").stdout) {
		t.Error("workers ls after drain does not show w1 draining")
	}
	admin.fails(1, "no_worker_available", "sandbox", "create", "--lazy")
	if out := admin.ok("workers", "undrain", "w1").stdout; out != "w1: live\n" {
		t.Errorf("workers undrain w1 printed %q, want w1: live", out)
	}
	if err := json.Unmarshal([]byte(admin.ok("workers", "drain", "w2", "--json").stdout), &w); err != nil || w.ID != "w2" || !w.Draining {
		t.Errorf("workers drain w2 --json = %+v (%v), want w2 draining", w, err)
	}
	admin.fails(1, "worker_not_found", "workers", "get", "w3")
}
