package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// cli runs the real berth binary the way a person or a script would.
type cli struct {
	t   *testing.T
	bin string
	env []string // BERTH_* settings; the rest of the environment is inherited
	dir string   // working directory: empty, so no ./.berth is found by accident
}

// newCLI returns a cli talking to d with its admin key.
func newCLI(t *testing.T, d *testenv.Daemon) *cli {
	t.Helper()
	c := bareCLI(t)
	c.env = []string{"BERTH_URL=" + d.URL, "BERTH_TOKEN=" + d.Token}
	return c
}

// bareCLI returns a cli with no BERTH_* settings at all.
func bareCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{t: t, bin: testenv.Binary(t), dir: t.TempDir()}
}

// with returns a copy of c with extra (overriding) environment settings.
func (c *cli) with(env ...string) *cli {
	cc := *c
	cc.env = append(append([]string(nil), c.env...), env...)
	return &cc
}

// result is what one run of the binary produced.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return "berth " + strings.Join(r.args, " ") + ": exit " + strconv.Itoa(r.code) +
		"\nstdout: " + r.stdout + "\nstderr: " + r.stderr
}

// command builds the exec.Cmd for args without running it.
func (c *cli) command(ctx context.Context, stdin string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = c.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BERTH_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// runIn runs berth with args and stdin, and returns what it printed and its
// exit code. It fails the test only if the binary could not run at all.
func (c *cli) runIn(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, stdout, stderr := c.command(ctx, stdin, args...)
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		r.code = ee.ExitCode()
	default:
		c.t.Fatalf("running berth %s: %v\nstderr: %s", strings.Join(args, " "), err, r.stderr)
	}
	return r
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn("", args...)
}

// ok runs berth and fails the test unless it exits 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("%v\nwant exit 0", r)
	}
	return r
}

// fails runs berth and checks its exit code and that its standard error
// contains want.
func (c *cli) fails(code int, want string, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		c.t.Errorf("%v\nwant exit %d with %q on stderr", r, code, want)
	}
	return r
}

// newSandbox creates a sandbox (of the runtime under test) through the CLI
// and returns its id.
func (c *cli) newSandbox() string {
	c.t.Helper()
	r := c.ok("sandbox", "create", "--runtime", testenv.Runtime())
	id := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`^sbx_[0-9A-Za-z]+$`).MatchString(id) {
		c.t.Fatalf("sandbox create printed %q, want one sbx_ id", r.stdout)
	}
	return id
}

// TestTour runs the README's five-minute tour.
func TestTour(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)

	id := c.newSandbox()

	r := c.run("exec", id, "--", "sh", "-c", "echo hi; exit 3")
	if r.code != 3 || r.stdout != "hi\n" {
		t.Errorf("%v\nwant exit 3 and stdout %q", r, "hi\n")
	}

	local := filepath.Join(c.dir, "local.txt")
	if err := os.WriteFile(local, []byte("tour notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("fs", "put", id, "./local.txt", "notes/a.txt")
	if got := c.ok("fs", "cat", id, "notes/a.txt").stdout; got != "tour notes\n" {
		t.Errorf("fs cat after fs put = %q, want %q", got, "tour notes\n")
	}

	if ls := c.ok("sandbox", "ls").stdout; !strings.Contains(ls, id) {
		t.Errorf("sandbox ls = %q, want it to list %s", ls, id)
	}
	if got := c.ok("sandbox", "rm", id).stdout; strings.TrimSpace(got) != id {
		t.Errorf("sandbox rm printed %q, want %q", got, id)
	}
	if ls := c.ok("sandbox", "ls").stdout; strings.Contains(ls, id) {
		t.Errorf("sandbox ls after rm = %q, still lists %s", ls, id)
	}
}

func TestExecExitCodes(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	id := c.newSandbox()

	tests := []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string // a substring; "" checks that stderr is empty
	}{
		{"success", "", []string{"--", "echo", "hello world"}, 0, "hello world\n", ""},
		{"exit code", "", []string{"--", "sh", "-c", "echo hi; exit 3"}, 3, "hi\n", ""},
		{"stderr", "", []string{"--", "sh", "-c", "echo out; echo oops >&2; exit 4"}, 4, "out\n", "oops\n"},
		{"signal", "", []string{"--", "sh", "-c", "kill -9 $$"}, 137, "", "SIGKILL"},
		{"term", "", []string{"--", "sh", "-c", "kill -TERM $$"}, 143, "", "SIGTERM"},
		{"not found", "", []string{"--", "no-such-cmd"}, 127, "", "berth: command failed"},
		{"stdin", "hello", []string{"-i", "--", "tr", "a-z", "A-Z"}, 0, "HELLO", ""},
		{"no stdin without -i", "hello", []string{"--", "cat"}, 0, "", ""},
		{"env and cwd", "", []string{"-e", "FOO=bar", "--cwd", "sub", "--", "sh", "-c", `echo "$FOO" "${PWD##*/}"`}, 0, "bar sub\n", ""},
		// Flags stop at the sandbox ID: what follows is the command's.
		{"no dash", "", []string{"printf", "%s-%s", "-l", "a"}, 0, "-l-a", ""},
		{"flags need a dash", "", []string{"--cwd", "sub", "pwd"}, 2, "", "put flags before --"},
		{"nothing after dash", "", []string{"--cwd", "sub", "--"}, 2, "", "no command after --"},
	}
	c.ok("fs", "mkdir", id, "sub")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d)
			r := c.runIn(tt.stdin, append([]string{"exec", id}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("%v\nwant exit %d", r, tt.wantCode)
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
			if tt.wantStderr == "" && r.stderr != "" || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

// interrupt starts cmd, waits until ready reports true, sends it SIGINT
// (Ctrl-C) and returns its exit code.
func interrupt(t *testing.T, cmd *exec.Cmd, what string, ready func() bool) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, what, ready)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatalf("waiting for %s: %v", cmd.Args, err)
	}
	return ee.ExitCode()
}

// sleeps counts the `sleep SECS` processes sandbox id runs, as the
// sandbox sees them (under gVisor its processes are not host processes).
func sleeps(t *testing.T, d *testenv.Daemon, id, secs string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.Client.Run(ctx, id, apitype.CreateCommandRequest{Command: "ps -eo args | grep -c '^sleep " + secs + "$' || true"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(c.Stdout))
	if err != nil {
		t.Fatalf("counting sleeps: %q: %v", c.Stdout, err)
	}
	return n
}

// TestExecTimeoutAndCancel checks that a timed-out and a canceled command
// exit 124 and 130 and leave no process behind. The subtests sleep for
// different times so that each probe sees only its own sleep; the ctrl-c
// one first sees its sleep running, so "none left" cannot come from a
// broken probe.
func TestExecTimeoutAndCancel(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	id := c.newSandbox()

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, d)
		r := c.fails(124, "timed out", "exec", "--timeout", "300ms", id, "--", "sleep", "10")
		if r.stdout != "" {
			t.Errorf("stdout = %q, want none", r.stdout)
		}
		// A command reported as timed out is gone already.
		if left := sleeps(t, d, id, "10"); left > 0 {
			t.Errorf("after exec timed out, %d sleep 10 still running", left)
		}
	})
	t.Run("ctrl-c", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd, _, stderr := c.command(ctx, "", "exec", id, "--", "sh", "-c", "exec sleep 11")
		code := interrupt(t, cmd, "sleep 11 to run in the sandbox", func() bool { return sleeps(t, d, id, "11") > 0 })
		if code != 130 {
			t.Errorf("berth exec interrupted: exit %d, want 130\nstderr: %s", code, stderr)
		}
		// The CLI cancels the command in the sandbox before it exits; allow
		// the kill a moment to land.
		deadline := time.Now().Add(5 * time.Second)
		for sleeps(t, d, id, "11") > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if left := sleeps(t, d, id, "11"); left > 0 {
			t.Errorf("after ctrl-c on berth exec, %d sleep 11 still running", left)
		}
		cmds, err := d.Client.Commands(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range cmds {
			if len(cm.Argv) == 3 && cm.Argv[2] == "exec sleep 11" && cm.Status != apitype.CommandCanceled {
				t.Errorf("interrupted command %s: status %q, want %q", cm.ID, cm.Status, apitype.CommandCanceled)
			}
		}
	})
}

func TestFS(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	id := c.newSandbox()

	if err := os.WriteFile(filepath.Join(c.dir, "local.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("fs", "put", id, "./local.txt", "notes/a.txt")
	if got := c.ok("fs", "cat", id, "notes/a.txt").stdout; got != "alpha\n" {
		t.Errorf("fs cat notes/a.txt = %q, want %q", got, "alpha\n")
	}

	// Standard input, binary.
	bin := "\x00\x01\xff\xfe binary\n"
	if r := c.runIn(bin, "fs", "put", id, "-", "x.bin"); r.code != 0 {
		t.Fatalf("%v\nwant exit 0", r)
	}
	if got := c.ok("fs", "cat", id, "x.bin").stdout; got != bin {
		t.Errorf("fs cat x.bin = %q, want %q", got, bin)
	}

	// Download to a named file, and to the base name in the working directory.
	c.ok("fs", "get", id, "notes/a.txt", "out.txt")
	if b, err := os.ReadFile(filepath.Join(c.dir, "out.txt")); err != nil || string(b) != "alpha\n" {
		t.Errorf("out.txt after fs get = %q, %v; want %q", b, err, "alpha\n")
	}
	c.ok("fs", "get", id, "notes/a.txt")
	if b, err := os.ReadFile(filepath.Join(c.dir, "a.txt")); err != nil || string(b) != "alpha\n" {
		t.Errorf("a.txt after fs get = %q, %v; want %q", b, err, "alpha\n")
	}

	c.ok("fs", "mkdir", id, "notes/deep/er")
	ls := c.ok("fs", "ls", id, "notes").stdout
	if !regexp.MustCompile(`(?m)\s6\s.*\sa\.txt$`).MatchString(ls) || !regexp.MustCompile(`(?m)\sdeep/$`).MatchString(ls) {
		t.Errorf("fs ls notes = %q, want a.txt (6 bytes) and deep/", ls)
	}
	var entries []apitype.FileInfo
	if err := json.Unmarshal([]byte(c.ok("fs", "ls", "--json", id, "notes").stdout), &entries); err != nil || len(entries) != 2 {
		t.Errorf("fs ls --json notes = %+v, %v; want 2 entries", entries, err)
	}

	c.ok("fs", "mv", id, "notes/a.txt", "notes/deep/b.txt")
	c.fails(1, "not_found", "fs", "cat", id, "notes/a.txt")
	if got := c.ok("fs", "cat", id, "notes/deep/b.txt").stdout; got != "alpha\n" {
		t.Errorf("fs cat after mv = %q, want %q", got, "alpha\n")
	}
	// mv does not replace a file without -f.
	c.ok("fs", "put", id, "./local.txt", "other.txt")
	c.fails(1, "conflict", "fs", "mv", id, "other.txt", "notes/deep/b.txt")
	c.ok("fs", "mv", "-f", id, "other.txt", "notes/deep/b.txt")

	// rm without -r refuses a non-empty directory; with -r it goes.
	c.fails(1, "berth:", "fs", "rm", id, "notes")
	c.ok("fs", "rm", "-r", id, "notes")
	c.fails(1, "not_found", "fs", "ls", id, "notes")
	c.ok("fs", "rm", id, "x.bin")
	if ls := c.ok("fs", "ls", id).stdout; strings.Contains(ls, "x.bin") || strings.Contains(ls, "notes") {
		t.Errorf("fs ls after rm = %q, want neither x.bin nor notes", ls)
	}

	// The file API is confined to the workspace. Positive control: the same
	// kind of read of a path inside works (above), and the file is there.
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	for _, p := range []string{"../../etc/passwd", "/etc/passwd"} {
		r := c.fails(1, "path_escapes_workspace", "fs", "cat", id, p)
		if strings.Contains(r.stdout, "root:") {
			t.Errorf("fs cat %s printed the host's file: %q", p, r.stdout)
		}
	}
	c.fails(1, "path_escapes_workspace", "fs", "put", id, "./local.txt", "../escape.txt")
}

func TestSandboxCommands(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)

	r := c.ok("sandbox", "create", "--runtime", "process", "--name", "demo", "--label", "team=a", "--json")
	var sb apitype.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil {
		t.Fatalf("sandbox create --json printed %q: %v", r.stdout, err)
	}
	if !strings.HasPrefix(sb.ID, "sbx_") || sb.Name != "demo" || sb.Runtime != "process" {
		t.Errorf("sandbox create --json = %+v, want an sbx_ named demo on process", sb)
	}
	// The name is unique: creating it again returns the same sandbox.
	if got := strings.TrimSpace(c.ok("sandbox", "create", "--name", "demo").stdout); got != sb.ID {
		t.Errorf("sandbox create --name demo again = %q, want %q", got, sb.ID)
	}

	if ls := c.ok("sandbox", "ls").stdout; !strings.Contains(ls, sb.ID) || !strings.Contains(ls, "demo") {
		t.Errorf("sandbox ls = %q, want %s (demo)", ls, sb.ID)
	}
	var list []apitype.Sandbox
	if err := json.Unmarshal([]byte(c.ok("sandbox", "ls", "--json").stdout), &list); err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("sandbox ls --json = %+v, %v; want just %s", list, err, sb.ID)
	}

	var got apitype.Sandbox
	if r := c.ok("sandbox", "get", sb.ID); json.Unmarshal([]byte(r.stdout), &got) != nil {
		t.Errorf("sandbox get printed %q, want JSON", r.stdout)
	}
	if got.ID != sb.ID || got.State != apitype.StateRunning {
		t.Errorf("sandbox get = %+v, want %s running", got, sb.ID)
	}

	c.fails(2, "--env", "sandbox", "create", "--env", "NOEQUALS")

	c.ok("sandbox", "rm", sb.ID)
	c.fails(1, "berth: not_found:", "sandbox", "get", sb.ID)
	c.fails(1, "not_found", "sandbox", "rm", sb.ID)
	c.fails(1, "not_found", "exec", sb.ID, "--", "true")
}

func TestKeys(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	admin := newCLI(t, d)

	r := admin.ok("keys", "create", "ci", "--scope", "execution")
	secret := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(secret, "bk_") || strings.ContainsAny(secret, " \n") {
		t.Fatalf("keys create printed %q, want one bk_ secret", r.stdout)
	}
	m := regexp.MustCompile(`created (key_\S+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("keys create stderr = %q, want the key id", r.stderr)
	}
	keyID := m[1]
	if ls := admin.ok("keys", "ls").stdout; !regexp.MustCompile(keyID + `\s+ci\s+execution`).MatchString(ls) {
		t.Errorf("keys ls = %q, want %s ci execution", ls, keyID)
	}

	ci := admin.with("BERTH_TOKEN=" + secret)
	id := ci.newSandbox()
	if r := ci.run("exec", id, "--", "echo", "ok"); r.code != 0 || r.stdout != "ok\n" {
		t.Errorf("%v\nwant exit 0 and ok", r)
	}
	ci.ok("sandbox", "ls")
	ci.fails(1, "permission_denied", "keys", "ls")
	ci.fails(1, "permission_denied", "keys", "create", "escalate", "--scope", "admin")
	// --token beats BERTH_TOKEN.
	admin.with("BERTH_TOKEN=bk_wrong").ok("--token", d.Token, "keys", "ls")

	admin.ok("keys", "revoke", keyID)
	ci.fails(1, "unauthenticated", "sandbox", "ls")
	// The REVOKED column, last, now holds a time.
	if ls := admin.ok("keys", "ls").stdout; !regexp.MustCompile(`(?m)^` + keyID + `\s.*\d\d:\d\d:\d\d\s+\S+\s+\d\d:\d\d:\d\d\s*$`).MatchString(ls) {
		t.Errorf("keys ls after revoke = %q, want %s with a revocation time", ls, keyID)
	}
	admin.with("BERTH_TOKEN=bk_nonsense").fails(1, "unauthenticated", "sandbox", "ls")
}

// TestDataDir checks that a client on the daemon's machine needs nothing but
// the data directory: the key from admin.key, the address from daemon.json.
func TestDataDir(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := bareCLI(t)

	c.ok("--data", d.DataDir, "sandbox", "ls")
	c.with("BERTH_DATA="+d.DataDir).ok("sandbox", "ls")
	// Control: without it there is no key to find.
	c.fails(2, "no API key", "sandbox", "ls")
	// BERTH_URL beats daemon.json: a wrong one fails even with --data.
	c.with("BERTH_URL=http://127.0.0.1:1").fails(1, "berth:", "--data", d.DataDir, "sandbox", "ls")
	// ./.berth is the default data directory.
	if err := os.Symlink(d.DataDir, filepath.Join(c.dir, ".berth")); err != nil {
		t.Fatal(err)
	}
	c.ok("sandbox", "ls")
}

func TestUsageErrors(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	c := bareCLI(t).with("BERTH_URL=http://127.0.0.1:1", "BERTH_TOKEN=bk_unused")
	tests := []struct {
		name string
		args []string
	}{
		{"unknown flag", []string{"sandbox", "ls", "--no-such-flag"}},
		{"unknown global flag", []string{"--no-such-flag", "version"}},
		{"bad flag value", []string{"exec", "--timeout", "soon", "sbx_x", "--", "true"}},
		{"missing args", []string{"exec", "sbx_x"}},
		{"extra args", []string{"sandbox", "get", "a", "b"}},
		{"unknown command", []string{"no-such-command"}},
		{"unknown subcommand", []string{"sandbox", "frobnicate"}},
		{"bad env", []string{"exec", "-e", "NOEQUALS", "sbx_x", "--", "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := c.with()
			c.t = t
			r := c.run(tt.args...)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "berth: ") {
				t.Errorf("%v\nwant exit 2 and a berth: message", r)
			}
		})
	}
}

// TestHelp is the control for TestUsageErrors: asking for help, or naming
// only a group of commands, prints help and succeeds.
func TestHelp(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	c := bareCLI(t)
	for _, args := range [][]string{{}, {"sandbox"}, {"fs"}, {"help", "exec"}, {"exec", "--help"}, {"keys", "create", "-h"}} {
		if r := c.ok(args...); !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%v\nwant usage on stdout", r)
		}
	}
}

func TestDoctorAndVersion(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)

	out := c.ok("doctor").stdout
	if !regexp.MustCompile(`(?m)^ok\s+runtime process\s`).MatchString(out) {
		t.Errorf("doctor = %q, want an ok line for runtime process", out)
	}
	if !regexp.MustCompile(`(?m)^ok\s+daemon\s+` + regexp.QuoteMeta(d.URL) + `.*process`).MatchString(out) {
		t.Errorf("doctor = %q, want an ok daemon line with %s", out, d.URL)
	}
	// Without a daemon, doctor still reports (and says how to fix it).
	out = bareCLI(t).with("BERTH_URL=http://127.0.0.1:1", "BERTH_TOKEN=bk_x").ok("doctor").stdout
	if !regexp.MustCompile(`(?m)^missing\s+daemon\s`).MatchString(out) || !strings.Contains(out, "berth serve") {
		t.Errorf("doctor without a daemon = %q, want a missing daemon line with a fix", out)
	}

	if v := strings.TrimSpace(c.ok("version").stdout); v == "" {
		t.Error("version printed nothing")
	}
	if v := strings.TrimSpace(c.ok("--version").stdout); !strings.Contains(v, "version") {
		t.Errorf("--version = %q, want a version line", v)
	}
}

func TestServeValidation(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	c := bareCLI(t)
	dir := filepath.Join(c.dir, "data")
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"log format", nil, []string{"--log-format", "yaml"}, "--log-format"},
		{"log level", nil, []string{"--log-level", "loud"}, "--log-level"},
		{"size", nil, []string{"--max-upload", "lots"}, "max-upload"},
		{"extra args", nil, []string{"now"}, "berth:"},
		{"env log format", []string{"BERTH_LOG_FORMAT=yaml"}, nil, "--log-format"},
		{"env size", []string{"BERTH_OUTPUT_CAP=lots"}, nil, "BERTH_OUTPUT_CAP"},
		{"warm pool", nil, []string{"--warm-pool", "base"}, "--warm-pool"},
		{"warm pool size", nil, []string{"--warm-pool", "base=-1"}, "--warm-pool"},
		{"journal entries", nil, []string{"--browser-journal-entries", "10001"}, "--browser-journal-entries must be 1-10000"},
		{"env journal entries", []string{"BERTH_BROWSER_JOURNAL_ENTRIES=0"}, nil, "--browser-journal-entries"},
		{"station id", nil, []string{"--station-id", "a/b"}, "--station-id must be"},
		{"empty station id", nil, []string{"--station-id", ""}, "--station-id must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := c.with(tt.env...)
			c.t = t
			args := append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, tt.args...)
			r := c.run(args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("%v\nwant exit 2 with %q on stderr", r, tt.want)
			}
		})
	}
}

func TestServeSecondDaemonRefused(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	c := bareCLI(t)

	r := c.run("serve", "--data", dataDir, "--listen", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "another berth daemon") {
		t.Errorf("%v\nwant a failure mentioning another berth daemon", r)
	}
	// The first daemon is untouched, and its daemon.json still leads to it.
	c.ok("--data", dataDir, "sandbox", "ls")
	if err := d.Cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("first daemon: %v", err)
	}
}

// TestSandboxResources checks the resource flags: refused by the process
// runtime (which enforces none), kept by an isolated one.
func TestSandboxResources(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	c := newCLI(t, d)
	c.fails(1, "resources", "sandbox", "create", "--runtime", "process", "--memory-mb", "64")
	c.fails(1, "resources.memory_mb", "sandbox", "create", "--runtime", "container", "--memory-mb", "1")
	rt := testenv.Runtime()
	if rt == "process" {
		return // the isolated half runs in make test's container and gvisor passes
	}
	r := c.ok("sandbox", "create", "--runtime", rt, "--memory-mb", "128", "--pids", "64", "--json")
	var sb apitype.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil {
		t.Fatalf("sandbox create --json printed %q: %v", r.stdout, err)
	}
	if sb.Resources == nil || sb.Resources.MemoryMB != 128 || sb.Resources.Pids != 64 || sb.Resources.CPUs == 0 {
		t.Errorf("resources = %+v, want memory 128, pids 64 and the default cpus", sb.Resources)
	}
}

// TestServeTellsTheOperator: berth serve says what to do next once it
// serves, and logs each sandbox's creation and deletion with its ID.
func TestServeTellsTheOperator(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	testenv.StartDaemonProcess(t, dataDir, "--log-level", "info")
	c := bareCLI(t).with("BERTH_DATA=" + dataDir)
	id := strings.TrimSpace(c.ok("sandbox", "create").stdout)
	c.ok("sandbox", "rm", id)
	logPath := filepath.Join(filepath.Dir(dataDir), "daemon.log")
	for _, want := range []string{"export BERTH_TOKEN=$(cat " + filepath.Join(dataDir, "admin.key") + ")",
		"berth doctor; berth sandbox create", "The dashboard is at http://", `msg="sandbox created" sandbox_id=` + id, `msg="sandbox deleted" sandbox_id=` + id} {
		testenv.Eventually(t, 10*time.Second, "the daemon's log to say "+want, func() bool {
			b, _ := os.ReadFile(logPath)
			return strings.Contains(string(b), want)
		})
	}
}

// TestDoctorFindsRunscBesideBinary: ./bin/berth run outside make (tools/
// not on PATH) finds the runsc `make runsc` put in tools/; with no runsc
// there, doctor says so and how to fix it.
func TestDoctorFindsRunscBesideBinary(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	runsc := testenv.NeedCommand(t, "runsc")
	bin := testenv.Binary(t)
	// A PATH with the system's directories only: no runsc on it.
	path := "/usr/local/sbin:/usr/sbin:/sbin:/bin"
	if _, err := os.Stat("/usr/bin/runsc"); err == nil {
		t.Skip("runsc is installed in /usr/bin; nothing to find beside berth")
	}
	path += ":/usr/bin"
	gvisor := regexp.MustCompile(`(?m)^(ok|missing)\s+runtime gvisor\s+(.*)\n(\s+fix: .*)?`)
	for _, withTools := range []bool{true, false} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		// Copied by cp, not written from here: a descriptor open for
		// writing in this process leaks into any child a parallel test
		// forks meanwhile, and exec of the copy then fails with "text
		// file busy" (golang/go#22315).
		if out, err := exec.Command("cp", bin, filepath.Join(root, "bin", "berth")).CombinedOutput(); err != nil {
			t.Fatalf("copying the binary: %v: %s", err, out)
		}
		if withTools {
			if err := os.MkdirAll(filepath.Join(root, "tools"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(runsc, filepath.Join(root, "tools", "runsc")); err != nil {
				t.Fatal(err)
			}
		}
		c := bareCLI(t).with("PATH="+path, "BERTH_URL=http://127.0.0.1:1", "BERTH_TOKEN=bk_x")
		c.bin = filepath.Join(root, "bin", "berth")
		m := gvisor.FindStringSubmatch(c.ok("doctor").stdout)
		switch {
		case m == nil:
			t.Errorf("doctor printed no runtime gvisor line")
		case withTools && m[1] != "ok":
			t.Errorf("doctor with tools/runsc beside bin/berth: %q, want gvisor ok", m[0])
		case !withTools && (m[1] != "missing" || !strings.Contains(m[0], "make runsc") || !strings.Contains(m[0], "--runsc")):
			t.Errorf("doctor with no runsc anywhere: %q, want gvisor missing with a fix naming make runsc and --runsc", m[0])
		}
	}
}

// TestHelpShowsPlainBooleans: a boolean flag is listed as --json, not as
// pflag's --json[=true|false], and the usage column stays aligned. The
// control: the same listings do show flags that take a value with their
// type (--in stringArray), so the check reads real flag lines.
func TestHelpShowsPlainBooleans(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	c := bareCLI(t)
	for _, args := range [][]string{
		{"sandbox", "ls", "--help"}, {"job", "run", "--help"}, {"serve", "--help"}, {"exec", "--help"},
	} {
		out := c.ok(args...).stdout
		if strings.Contains(out, "[=true|false]") {
			t.Errorf("berth %s lists a boolean as [=true|false]:\n%s", strings.Join(args, " "), out)
		}
		// Every flag line of one block starts its usage in one column.
		for _, block := range strings.Split(out, "\n\n") {
			col := -1
			for _, l := range strings.Split(block, "\n") {
				f := strings.TrimLeft(l, " ")
				if !strings.HasPrefix(f, "-") {
					continue
				}
				i := strings.Index(f, "   ")
				if i < 0 {
					continue
				}
				at := len(l) - len(strings.TrimLeft(f[i:], " "))
				if col >= 0 && at != col {
					t.Errorf("berth %s: usage of %q starts at column %d, want %d:\n%s", strings.Join(args, " "), l, at, col, block)
				}
				col = at
			}
		}
	}
	if out := c.ok("job", "run", "--help").stdout; !strings.Contains(out, "--in stringArray") || !strings.Contains(out, "--detach ") {
		t.Errorf("control: berth job run --help = %q, want --in stringArray and --detach", out)
	}
}
