package daemon_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
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
// store does not know: the next start finishes the one and removes the
// other, processes included.
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

	d2 := testenv.StartDaemonProcess(t, dataDir)
	list, err := d2.Client.ListSandboxes(ctx)
	if err != nil || len(list) != 0 {
		t.Errorf("sandboxes after restart = %v, %v; want none", list, err)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", id)); !os.IsNotExist(err) {
			t.Errorf("directory of %s: %v, want removed", id, err)
		}
		if left := d2.SandboxProcesses(id); len(left) > 0 {
			t.Errorf("processes of %s left: %v", id, left)
		}
	}
	testenv.CheckNoProcesses(t, filepath.Join(dataDir, "sandboxes"))
}

// TestSecondDaemonRefusesDataDir checks the data directory lock, with a
// positive control: a different directory starts fine.
func TestSecondDaemonRefusesDataDir(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	cfg := daemon.Config{DataDir: d.DataDir, Listen: "127.0.0.1:0", AgentBinary: testenv.Binary(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := daemon.Run(ctx, cfg)
	if errcode.ReasonOf(err) != "data_dir_locked" || !strings.Contains(err.Error(), "another berth daemon") {
		t.Fatalf("second daemon on %s: err = %v, want data_dir_locked", d.DataDir, err)
	}
	testenv.StartDaemon(t, nil) // positive control: another directory is fine
	if err := d.Client.Health(ctx); err != nil {
		t.Errorf("first daemon after the refused start: %v", err)
	}
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
