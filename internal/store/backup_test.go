package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/store"
)

// copyFile copies src to dst the way a backup tool that knows nothing of
// SQLite would.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteBackupHoldsTheWAL backs up a database whose writes are still only
// in its write-ahead log (a live daemon's): the backup has them. The
// positive control copies berth.db alone, which is empty, so the writes
// really were in the WAL.
func TestSQLiteBackupHoldsTheWAL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	newSandbox(t, db, "one")
	newSandbox(t, db, "two")
	if _, _, err := auth.NewKeys(db).Create(ctx, "admin", auth.ScopeAdmin, ""); err != nil {
		t.Fatal(err)
	}

	plain := filepath.Join(dir, "plain-copy.db")
	copyFile(t, path, plain)
	if s, err := store.Inspect(ctx, plain); err != nil || !s.Empty() {
		t.Fatalf("Inspect(copy of berth.db alone) = %+v, %v; want empty (the writes are in the WAL)", s, err)
	}

	backup := filepath.Join(dir, "backup.db")
	s, err := store.Backup(ctx, path, backup)
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if s.Sandboxes != 2 || s.Keys != 1 || len(s.Migrations) == 0 {
		t.Errorf("Backup = %+v, want 2 sandboxes, 1 key and the migrations", s)
	}
	if got, err := store.Verify(ctx, backup); err != nil || got.Sandboxes != 2 || got.Keys != 1 {
		t.Errorf("Verify(backup) = %+v, %v; want 2 sandboxes, 1 key", got, err)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	// The backup opens as a database of its own.
	restored, err := store.Open(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if list, err := restored.ListSandboxes(ctx); err != nil || len(list) != 2 {
		t.Errorf("sandboxes in the backup = %d, %v; want 2", len(list), err)
	}
}

// TestSQLiteBackupNeverOverwrites checks that a backup onto an existing file
// fails and leaves the file as it was.
func TestSQLiteBackupNeverOverwrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dst := filepath.Join(dir, "precious")
	if err := os.WriteFile(dst, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = store.Backup(ctx, path, dst)
	if errcode.ReasonOf(err) != "backup_file_exists" {
		t.Errorf("Backup onto an existing file: %v, want backup_file_exists", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep me" {
		t.Errorf("existing file after the refused backup = %q, want it unchanged", b)
	}
	// Positive control: a new name works.
	if _, err := store.Backup(ctx, path, filepath.Join(dir, "new")); err != nil {
		t.Errorf("Backup to a new file: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name()[0] == '.' {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestSQLiteVerifyRefuses checks that files which are not a Berth database this
// build can open are refused with a specific reason.
func TestSQLiteVerifyRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("this is not a database, not even close; "+string(make([]byte, 200))), 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	newer := filepath.Join(dir, "newer.db")
	for _, p := range []string{foreign, newer} {
		raw, err := sql.Open("sqlite", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
			t.Fatal(err)
		}
		raw.Close()
	}
	db, err := store.Open(ctx, newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES ('9999_future', 'x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	good := filepath.Join(dir, "good.db")
	if db, err := store.Open(ctx, good); err != nil {
		t.Fatal(err)
	} else {
		db.Close()
	}
	tests := []struct {
		name, path, reason string
	}{
		{"not SQLite", garbage, "not_a_berth_database"},
		{"SQLite without Berth's schema", foreign, "not_a_berth_database"},
		{"a newer schema", newer, "database_newer_than_berth"},
		{"a Berth database", good, ""}, // positive control
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := store.Verify(ctx, tt.path)
			if got := errcode.ReasonOf(err); got != tt.reason || (tt.reason == "" && err != nil) {
				t.Errorf("Verify(%s) = %v, want reason %q", tt.name, err, tt.reason)
			}
		})
	}
}

// TestSQLiteOpenMakesFilesPrivate checks that the database and its -wal and -shm
// are 0600 whatever the umask, including a database file an older version
// left 0644. The positive control is a database SQLite creates on its own
// in the same directory: 0644, so the modes are Open's doing.
func TestSQLiteOpenMakesFilesPrivate(t *testing.T) {
	// Not parallel: it sets the process umask.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := t.TempDir()

	control := filepath.Join(dir, "control.db")
	raw, err := sql.Open("sqlite", store.DSN(control))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(control); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("control database made by SQLite alone: %v, %v; want 0644", fi.Mode(), err)
	}
	raw.Close()

	for _, preexisting := range []bool{false, true} {
		path := filepath.Join(dir, "new.db")
		if preexisting {
			path = filepath.Join(dir, "old.db")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		db, err := store.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		newSandbox(t, db, "x") // a write, so the WAL exists
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mode of %s (pre-existing %v) = %v, want 0600", filepath.Base(p), preexisting, fi.Mode().Perm())
			}
		}
		db.Close()
	}
}

// TestSQLiteInspectMissing checks that a missing database is empty, and that
// Inspect does not create it.
func TestSQLiteInspectMissing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "berth.db")
	s, err := store.Inspect(context.Background(), path)
	if err != nil || !s.Empty() {
		t.Errorf("Inspect(missing) = %+v, %v; want empty", s, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Inspect created %s: %v", path, err)
	}
}
