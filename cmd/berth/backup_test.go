package main_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// loseWAL kills d with SIGKILL and removes its database's write-ahead log
// and shared-memory file, as an operator putting back a copy of berth.db
// alone would.
func loseWAL(t *testing.T, d *testenv.Daemon) {
	t.Helper()
	d.Kill9(t)
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(filepath.Join(d.DataDir, "berth.db"+suffix)); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, c *client.Client, id, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := c.ReadFile(ctx, id, path)
	if err != nil {
		t.Fatalf("reading %s of %s: %v", path, id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBackupRestore backs up a running daemon's database, loses its WAL,
// and restores the backup: the daemon comes back with the same sandboxes
// (workspace files readable) and keys, and the old admin and execution
// keys still work. Restores that make no sense (while the daemon runs, of
// a file that is not a Berth database) are refused and change nothing.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := bareCLI(t)
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.WriteFile(ctx, sb.ID, "notes.txt", strings.NewReader("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	execKey := strings.TrimSpace(c.ok("--data", dataDir, "keys", "create", "worker").stdout)

	backup := filepath.Join(t.TempDir(), "berth-backup.db")
	r := c.ok("--data", dataDir, "backup", backup)
	if !strings.Contains(r.stderr, "1 sandboxes, 2 keys") {
		t.Errorf("%v\nwant a summary of 1 sandbox and 2 keys", r)
	}
	c.fails(1, "backup_file_exists", "--data", dataDir, "backup", backup)
	c.fails(1, "data_dir_locked", "--data", dataDir, "restore", backup)
	if err := d.Client.Health(ctx); err != nil {
		t.Errorf("daemon after the refused restore: %v", err)
	}

	loseWAL(t, d)
	db := filepath.Join(dataDir, "berth.db")
	stale, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.fails(1, "not_a_berth_database", "--data", dataDir, "restore", garbage)
	if b, _ := os.ReadFile(db); string(b) != string(stale) {
		t.Errorf("berth.db changed by a refused restore")
	}

	r = c.ok("--data", dataDir, "restore", backup)
	if !strings.Contains(r.stderr, "1 sandboxes, 2 keys") || !strings.Contains(r.stderr, "berth.db.before-restore-") {
		t.Errorf("%v\nwant a summary and where the previous database is", r)
	}
	if kept, _ := filepath.Glob(db + ".before-restore-*"); len(kept) != 1 {
		t.Errorf("previous database kept as %v, want one file", kept)
	} else if b, _ := os.ReadFile(kept[0]); string(b) != string(stale) {
		t.Errorf("previous database kept as %s differs from berth.db before the restore", kept[0])
	}
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("restored berth.db: %v, %v; want mode 0600", fi.Mode(), err)
	}

	d2 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d2.DeleteAll(t) })
	if d2.Token != d.Token {
		t.Errorf("admin key replaced after the restore: the restored database should know the old one")
	}
	admin := client.New(d2.URL, d.Token)
	list, err := admin.ListSandboxes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != sb.ID || list[0].Name != "kept" {
		t.Fatalf("sandboxes after the restore = %+v, %v; want %s (kept)", list, err, sb.ID)
	}
	if got := readFile(t, admin, sb.ID, "notes.txt"); got != "precious" {
		t.Errorf("workspace file after the restore = %q, want precious", got)
	}
	keys, err := admin.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"admin", "worker"}) {
		t.Errorf("keys after the restore = %v, want admin and worker", names)
	}
	if _, err := client.New(d2.URL, execKey).ListSandboxes(ctx); err != nil {
		t.Errorf("execution key made before the backup: %v", err)
	}
}

// quarantineEntries runs berth quarantine ls and returns its entries by
// sandbox ID.
func quarantineEntries(c *cli, dataDir string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	lines := strings.Split(strings.TrimSpace(c.ok("--data", dataDir, "quarantine", "ls").stdout), "\n")
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[1]] = f[0]
		}
	}
	return out
}

// TestQuarantineCommands starts on a database that lost its WAL with
// --allow-empty-database, then lists, restores and purges what the sweep
// quarantined. Restore refuses while a daemon runs and for a database that
// does not know the sandbox (the next start would move it aside again);
// purge refuses a list with an unknown entry in it, purging nothing. Once
// a backup that knows the sandbox is restored, restore puts the directory
// back and the next start keeps it.
func TestQuarantineCommands(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := bareCLI(t)
	var ids []string
	for range 2 {
		sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	if _, err := d.Client.WriteFile(ctx, ids[0], "notes.txt", strings.NewReader("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "berth-backup.db")
	c.ok("--data", dataDir, "backup", backup)
	loseWAL(t, d)

	d2 := testenv.StartDaemonProcess(t, dataDir, "--allow-empty-database")
	entries := quarantineEntries(c, dataDir) // ls works beside a daemon
	if len(entries) != 2 || entries[ids[0]] == "" || entries[ids[1]] == "" {
		t.Fatalf("quarantine = %v, want entries of %v", entries, ids)
	}
	keep, purge := entries[ids[0]], entries[ids[1]]
	c.fails(1, "data_dir_locked", "--data", dataDir, "quarantine", "restore", keep)
	c.fails(1, "data_dir_locked", "--data", dataDir, "quarantine", "purge", purge)
	if err := d2.Stop(t); err != nil {
		t.Fatal(err)
	}

	c.fails(1, "sandbox_not_in_database", "--data", dataDir, "quarantine", "restore", keep)
	c.fails(1, "quarantine_entry_not_found", "--data", dataDir, "quarantine", "purge", purge, "no-such-entry")
	if got := quarantineEntries(c, dataDir); len(got) != 2 {
		t.Errorf("quarantine after refused restore and purge = %v, want both entries kept", got)
	}

	c.ok("--data", dataDir, "restore", backup)
	c.ok("--data", dataDir, "quarantine", "restore", keep)
	c.fails(1, "quarantine_entry_not_found", "--data", dataDir, "quarantine", "restore", keep)
	c.ok("--data", dataDir, "quarantine", "purge", purge)
	if got := quarantineEntries(c, dataDir); len(got) != 0 {
		t.Errorf("quarantine after restore and purge = %v, want empty", got)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", ids[0])); err != nil {
		t.Errorf("restored sandbox directory: %v", err)
	}

	// The next start knows the sandbox and keeps its directory: its agent
	// was stopped when it was quarantined, so it is failed, agent_lost.
	d3 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d3.DeleteAll(t) })
	got, err := d3.Client.GetSandbox(ctx, ids[0])
	if err != nil || got.State != apitype.StateFailed || got.Reason != "agent_lost" {
		t.Errorf("restored sandbox = %+v, %v; want failed, agent_lost", got, err)
	}
	if got := quarantineEntries(c, dataDir); len(got) != 0 {
		t.Errorf("quarantine after the next start = %v, want empty", got)
	}
	if testenv.Runtime() == "process" { // elsewhere the workspace is a disk image
		if b, err := os.ReadFile(filepath.Join(d3.HostWorkspace(ids[0]), "notes.txt")); err != nil || string(b) != "precious" {
			t.Errorf("workspace file of the restored sandbox = %q, %v; want precious", b, err)
		}
	}
}
