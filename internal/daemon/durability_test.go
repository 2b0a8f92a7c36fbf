package daemon_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// TestKill9AndRestartReadopts kills the daemon with SIGKILL while a command
// runs, restarts it on the same data directory, and checks that the sandbox
// is re-adopted with its agent, that the running command finishes with its
// output readable, and that finished commands are still there.
func TestKill9AndRestartReadopts(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo before"})
	if err != nil {
		t.Fatal(err)
	}
	long, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{
		Command: "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick$i; sleep 0.1; done",
	})
	if err != nil {
		t.Fatal(err)
	}
	agentsBefore := d.AgentPIDs(sb.ID)
	if len(agentsBefore) != 1 {
		t.Fatalf("agents before the crash: %v, want one", agentsBefore)
	}

	d.Kill9(t)
	d2 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d2.DeleteAll(t) })

	got, err := d2.Client.GetSandbox(ctx, sb.ID)
	if err != nil || got.State != apitype.StateRunning {
		t.Fatalf("sandbox after restart = %+v, %v; want running", got, err)
	}
	agentsAfter := d2.AgentPIDs(sb.ID)
	if len(agentsAfter) != 1 || agentsAfter[0] != agentsBefore[0] {
		t.Errorf("agents after restart = %v, want the same agent %v", agentsAfter, agentsBefore)
	}
	rec, err := d2.Client.Command(ctx, sb.ID, long.ID, client.CommandQuery{WaitMS: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != apitype.CommandExited || !strings.HasPrefix(rec.Stdout, "tick1\n") || !strings.HasSuffix(rec.Stdout, "tick10\n") {
		t.Errorf("command that ran across the crash = %s %q, want exited with tick1..tick10", rec.Status, rec.Stdout)
	}
	old, err := d2.Client.Command(ctx, sb.ID, done.ID, client.CommandQuery{})
	if err != nil || old.Stdout != "before\n" {
		t.Errorf("command finished before the crash = %q, %v; want before", old.Stdout, err)
	}
	testenv.Eventually(t, 10*time.Second, "the store to record the outcome", func() bool {
		list, err := d2.Client.Commands(ctx, sb.ID)
		return err == nil && len(list) == 2 && list[0].Status == apitype.CommandExited
	})
	after, err := d2.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo after"})
	if err != nil || after.Stdout != "after\n" {
		t.Errorf("new command after restart = %q, %v", after.Stdout, err)
	}
}

// TestRestartMarksLostSandboxes kills the daemon and the sandbox's agent:
// the restarted daemon marks the sandbox failed (agent_lost) and its
// running command interrupted, and deleting it still cleans up.
func TestRestartMarksLostSandboxes(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	long, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "sleep 120"})
	if err != nil {
		t.Fatal(err)
	}
	d.Kill9(t)
	for _, pid := range d.AgentPIDs(sb.ID) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // the agent this test's daemon started
	}
	testenv.Eventually(t, 10*time.Second, "agent to die", func() bool { return len(d.AgentPIDs(sb.ID)) == 0 })

	d2 := testenv.StartDaemonProcess(t, dataDir)
	got, err := d2.Client.GetSandbox(ctx, sb.ID)
	if err != nil || got.State != apitype.StateFailed || got.Reason != "agent_lost" {
		t.Fatalf("sandbox = %+v, %v; want failed, agent_lost", got, err)
	}
	rec, err := d2.Client.Command(ctx, sb.ID, long.ID, client.CommandQuery{})
	if err != nil || rec.Status != apitype.CommandInterrupted {
		t.Errorf("command = %+v, %v; want interrupted", rec, err)
	}
	_, err = d2.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "true"})
	if errcode.ReasonOf(err) != "sandbox_not_running" {
		t.Errorf("exec in a failed sandbox: err = %v, want sandbox_not_running", err)
	}
	if err := d2.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", sb.ID)); !os.IsNotExist(err) {
		t.Errorf("sandbox directory after delete: %v, want gone", err)
	}
	if left := d2.SandboxProcesses(sb.ID); len(left) > 0 {
		t.Errorf("processes of %s left: %v", sb.ID, left)
	}
	testenv.CheckNoProcesses(t, filepath.Join(dataDir, "sandboxes"))
}

// TestRestartFinishesInterruptedDeleteAndSweeps covers a crash in the
// middle of a delete (the row says stopping) and a sandbox directory the
// store does not know: the next start finishes the one, and stops the
// other's processes and moves its directory into the quarantine, whole.
func TestRestartFinishesInterruptedDeleteAndSweeps(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	for range 2 {
		sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "sleep 120"}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	d.Kill9(t)

	db, err := sql.Open("sqlite", filepath.Join(dataDir, daemon.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	// ids[0]: the daemon died after recording the delete's intent.
	if _, err := db.Exec(`UPDATE sandboxes SET state = 'stopping' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	// ids[1]: the store lost it (restored from an older backup, say).
	if _, err := db.Exec(`DELETE FROM sandboxes WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := dirNames(t, filepath.Join(dataDir, "sandboxes", ids[1]))

	d2 := testenv.StartDaemonProcess(t, dataDir)
	list, err := d2.Client.ListSandboxes(ctx)
	if err != nil || len(list) != 0 {
		t.Errorf("sandboxes after restart = %v, %v; want none", list, err)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", id)); !os.IsNotExist(err) {
			t.Errorf("directory of %s: %v, want gone from sandboxes/", id, err)
		}
		if left := d2.SandboxProcesses(id); len(left) > 0 {
			t.Errorf("processes of %s left: %v", id, left)
		}
	}
	q, err := sandbox.ListQuarantine(dataDir)
	if err != nil || len(q) != 1 || q[0].SandboxID != ids[1] {
		t.Fatalf("quarantine = %+v, %v; want the unknown sandbox %s only", q, err, ids[1])
	}
	if diff := cmp.Diff(before, dirNames(t, q[0].Path)); diff != "" {
		t.Errorf("quarantined directory differs from the sandbox directory (-before +quarantined):\n%s", diff)
	}
	testenv.CheckNoProcesses(t, filepath.Join(dataDir, "sandboxes"))
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestSecondDaemonRefusesDataDir checks the data directory lock, also
// after the lock file was removed or replaced (the lock is on the
// directory, not the file), with positive controls: a different directory
// starts fine, and so does the same one once the first daemon stopped.
func TestSecondDaemonRefusesDataDir(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := func() error {
		cfg := daemon.Config{DataDir: dataDir, Listen: "127.0.0.1:0", AgentBinary: testenv.Binary(t),
			UIDRegistry: testenv.UIDRegistry(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		runCtx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		return daemon.Run(runCtx, cfg)
	}
	pid := strconv.Itoa(d.Cmd.Process.Pid)
	err := second()
	if errcode.ReasonOf(err) != "data_dir_locked" || !strings.Contains(err.Error(), "another berth daemon") || !strings.Contains(err.Error(), pid) {
		t.Fatalf("second daemon on %s: err = %v, want data_dir_locked naming pid %s", dataDir, err, pid)
	}
	lock := filepath.Join(dataDir, daemon.LockFile)
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := second(); errcode.ReasonOf(err) != "data_dir_locked" {
		t.Fatalf("second daemon after rm %s: err = %v, want data_dir_locked", daemon.LockFile, err)
	}
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := second(); errcode.ReasonOf(err) != "data_dir_locked" {
		t.Fatalf("second daemon after replacing %s: err = %v, want data_dir_locked", daemon.LockFile, err)
	}
	if err := d.Client.Health(ctx); err != nil {
		t.Errorf("first daemon after the refused starts: %v", err)
	}
	testenv.StartDaemon(t, nil) // positive control: another directory is fine

	// Positive control: the lock goes with the daemon holding it.
	if err := d.Stop(t); err != nil {
		t.Fatal(err)
	}
	testenv.StartDaemonProcess(t, dataDir)
}

// TestDataDirIsPrivate starts a daemon on a data directory made
// beforehand with mode 0755: the directory becomes 0700, and the database
// and its -wal and -shm are 0600.
func TestDataDirIsPrivate(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	// Positive control: the probe reads the mode the directory has.
	if fi, err := os.Stat(dataDir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("data directory before the start: %v, %v; want 0755", fi.Mode(), err)
	}
	testenv.StartDaemonProcess(t, dataDir)
	want := map[string]os.FileMode{".": 0o700}
	for _, name := range []string{daemon.DBFile, daemon.DBFile + "-wal", daemon.DBFile + "-shm", daemon.KeyFile, daemon.LockFile} {
		want[name] = 0o600
	}
	got := map[string]os.FileMode{}
	for name := range want {
		fi, err := os.Stat(filepath.Join(dataDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got[name] = fi.Mode().Perm()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("modes in the data directory (-want +got):\n%s", diff)
	}
}

// serveRefused runs "berth serve" on dataDir, expecting it to refuse to
// start, and returns what it printed. A daemon that starts instead is
// killed and fails the test.
func serveRefused(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--default-runtime", testenv.Runtime(),
		"--job-pool", "browser=0", "--job-pool", "office=0", "--uid-registry", testenv.UIDRegistry(t)}, args...)
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("berth serve on %s: %v, want a refusal to start\n%s", dataDir, err, out)
	}
	return string(out)
}

// TestLostWALKeepsWorkspaces loses the database's write-ahead log the way
// an operator restoring a copy of berth.db would (kill -9, remove
// berth.db-wal and -shm): the start refuses, says why, and changes
// nothing: the workspaces, the running sandboxes, the admin key, the
// empty database all stay as they were. With --allow-empty-database (the
// control that the state really was lost) the daemon starts anew and the
// directories are quarantined whole, their processes stopped, never
// removed.
func TestLostWALKeepsWorkspaces(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	contents := map[string][]string{}
	for i := range 2 {
		sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Client.WriteFile(ctx, sb.ID, "work.txt", strings.NewReader("work "+strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		contents[sb.ID] = dirNames(t, filepath.Join(dataDir, "sandboxes", sb.ID))
	}
	key, err := os.ReadFile(filepath.Join(dataDir, daemon.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	d.Kill9(t)
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dataDir, daemon.DBFile+suffix)); err != nil {
			t.Fatal(err)
		}
	}

	out := serveRefused(t, dataDir)
	for _, want := range []string{"database_empty_with_data", "2 sandbox directories", "berth restore", "--allow-empty-database"} {
		if !strings.Contains(out, want) {
			t.Errorf("refused start's output lacks %q:\n%s", want, out)
		}
	}
	for i, id := range ids {
		b, err := os.ReadFile(filepath.Join(d.HostWorkspace(id), "work.txt"))
		if err != nil || string(b) != "work "+strconv.Itoa(i) {
			t.Errorf("workspace file of %s after the refused start = %q, %v; want it kept", id, b, err)
		}
		if len(d.AgentPIDs(id)) == 0 {
			t.Errorf("agent of %s stopped by the refused start", id)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dataDir, daemon.KeyFile)); string(b) != string(key) {
		t.Errorf("admin key replaced by the refused start")
	}
	if s, err := store.Inspect(ctx, filepath.Join(dataDir, daemon.DBFile)); err != nil || !s.Empty() {
		t.Errorf("database after the refused start = %+v, %v; want it still empty (no new key)", s, err)
	}

	d2 := testenv.StartDaemonProcess(t, dataDir, "--allow-empty-database")
	if list, err := d2.Client.ListSandboxes(ctx); err != nil || len(list) != 0 {
		t.Errorf("sandboxes after the start on the empty database = %v, %v; want none", list, err)
	}
	q, err := sandbox.ListQuarantine(dataDir)
	if err != nil || len(q) != len(ids) {
		t.Fatalf("quarantine = %+v, %v; want %d entries", q, err, len(ids))
	}
	for _, e := range q {
		want, ok := contents[e.SandboxID]
		if !ok {
			t.Errorf("quarantine entry %s is of no sandbox of this test", e.Name)
			continue
		}
		if diff := cmp.Diff(want, dirNames(t, e.Path)); diff != "" {
			t.Errorf("quarantined %s differs from its sandbox directory (-before +quarantined):\n%s", e.SandboxID, diff)
		}
		if testenv.Runtime() == "process" { // elsewhere the workspace is a disk image
			if b, err := os.ReadFile(filepath.Join(e.Path, "workspace", "work.txt")); err != nil || !strings.HasPrefix(string(b), "work ") {
				t.Errorf("workspace file in quarantine entry %s = %q, %v", e.Name, b, err)
			}
		}
		if left := d2.SandboxProcesses(e.SandboxID); len(left) > 0 {
			t.Errorf("processes of quarantined %s left: %v", e.SandboxID, left)
		}
	}
	testenv.CheckNoProcesses(t, filepath.Join(dataDir, "sandboxes"))
}

// TestSIGTERMShutsDownGracefully checks that SIGTERM ends the daemon with
// status 0, removes its address file, and leaves sandboxes running for the
// next start to re-adopt.
func TestSIGTERMShutsDownGracefully(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v, want status 0", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, daemon.InfoFile)); !os.IsNotExist(err) {
		t.Errorf("%s after shutdown: %v, want removed", daemon.InfoFile, err)
	}
	d2 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d2.DeleteAll(t) })
	c, err := d2.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo still here"})
	if err != nil || c.Stdout != "still here\n" {
		t.Errorf("command in the sandbox after a restart = %q, %v", c.Stdout, err)
	}
}

// TestAgentDeathIsDetected kills a running sandbox's agent under a live
// daemon: the sandbox becomes failed (agent_lost), its command interrupted,
// and nothing of it keeps running.
func TestAgentDeathIsDetected(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb := newSandbox(t, d)
	other := newSandbox(t, d)
	long, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "sleep 120"})
	if err != nil {
		t.Fatal(err)
	}
	agents := d.AgentPIDs(sb.ID)
	if len(agents) != 1 {
		t.Fatalf("agents = %v, want one", agents)
	}
	_ = syscall.Kill(agents[0], syscall.SIGKILL) // the agent this test's daemon started

	testenv.Eventually(t, 15*time.Second, "sandbox to be marked failed", func() bool {
		got, err := d.Client.GetSandbox(ctx, sb.ID)
		return err == nil && got.State == apitype.StateFailed && got.Reason == "agent_lost"
	})
	rec, err := d.Client.Command(ctx, sb.ID, long.ID, client.CommandQuery{})
	if err != nil || rec.Status != apitype.CommandInterrupted {
		t.Errorf("command = %+v, %v; want interrupted", rec, err)
	}
	testenv.Eventually(t, 10*time.Second, "the sandbox's processes to be gone", func() bool {
		return len(d.SandboxProcesses(sb.ID)) == 0
	})
	// Positive control: the other sandbox is untouched.
	if c, err := d.Client.Run(ctx, other.ID, apitype.CreateCommandRequest{Command: "echo ok"}); err != nil || c.Stdout != "ok\n" {
		t.Errorf("other sandbox: %q, %v", c.Stdout, err)
	}
}
