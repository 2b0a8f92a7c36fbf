package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
)

// The operations here work on a data directory from the outside, for the
// berth backup, restore and quarantine commands. Those that change the
// directory take its lock, so they refuse while a daemon runs on it and a
// daemon refuses to start while they run.

// Backup writes a consistent copy of dataDir's database to the new file
// file. It works while a daemon runs: it reads one snapshot, write-ahead
// log included.
func Backup(ctx context.Context, dataDir, file string) (store.Summary, error) {
	src := filepath.Join(dataDir, DBFile)
	if _, err := os.Stat(src); err != nil {
		return store.Summary{}, errcode.DatabaseNotFound.New("%s has no database (%s): is --data right?", dataDir, DBFile)
	}
	return store.Backup(ctx, src, file)
}

// Restored is what Restore did.
type Restored struct {
	Summary store.Summary // what the restored database holds
	// Previous is where the database it replaced was kept, with its -wal
	// and -shm beside it under the same name ("" if there was none).
	Previous string
}

// Restore replaces dataDir's database with the backup file, offline: it
// refuses while a daemon (or another berth command) holds the data
// directory. It checks a copy of file is a whole Berth database, moves
// the current berth.db and its -wal and -shm aside to
// berth.db.before-restore-<time> (never deleting them), and renames the
// copy into place. A failed check changes nothing.
func Restore(ctx context.Context, dataDir, file string) (Restored, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return Restored{}, fmt.Errorf("creating data directory: %w", err)
	}
	unlock, err := lockDataDir(dataDir, "berth restore")
	if err != nil {
		return Restored{}, err
	}
	defer unlock()
	dst := filepath.Join(dataDir, DBFile)
	if a, err := os.Stat(file); err != nil {
		return Restored{}, errcode.BackupNotFound.New("cannot read backup %s: %v", file, err)
	} else if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
		return Restored{}, errcode.RestoreOntoItself.New("%s is the data directory's database itself; nothing was changed", file)
	}
	// Check the copy that goes into place, not the file it came from.
	tmp := dst + ".restoring"
	if err := copyFile(file, tmp); err != nil {
		_ = os.Remove(tmp)
		return Restored{}, fmt.Errorf("copying %s: %w", file, err)
	}
	defer os.Remove(tmp)
	s, err := store.Verify(ctx, tmp)
	if err != nil {
		return Restored{}, err
	}
	// Verifying may have left a -wal or -shm of the copy's own.
	for _, suffix := range []string{"-wal", "-shm"} {
		_ = os.Remove(tmp + suffix)
	}
	r := Restored{Summary: s}
	if _, err := os.Lstat(dst); err == nil {
		// The old WAL goes aside before the new file is in place: SQLite
		// would otherwise replay it into the restored database. Until the
		// rename, berth.db is the old file by a second name too.
		r.Previous = dst + ".before-restore-" + time.Now().UTC().Format("20060102T150405.000Z")
		if err := os.Link(dst, r.Previous); err != nil {
			return Restored{}, fmt.Errorf("keeping the current database: %w", err)
		}
		for _, suffix := range []string{"-wal", "-shm"} {
			if err := os.Rename(dst+suffix, r.Previous+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return Restored{}, fmt.Errorf("keeping the current database's %s: %w", suffix, err)
			}
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Restored{}, fmt.Errorf("putting the restored database in place: %w", err)
	}
	if err := syncPath(dataDir); err != nil {
		return Restored{}, err
	}
	return r, nil
}

// copyFile copies src to the new file dst (0600) and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Quarantine lists dataDir's quarantined sandbox directories. It only
// reads, so it works while a daemon runs.
func Quarantine(dataDir string) ([]sandbox.QuarantineEntry, error) {
	if _, err := os.Stat(dataDir); err != nil {
		return nil, errcode.DataDirNotFound.New("no data directory %s: %v", dataDir, err)
	}
	return sandbox.ListQuarantine(dataDir)
}

// RestoreQuarantined moves quarantine entry name back to its sandbox
// directory, offline, and returns that directory. It does so only if
// dataDir's database knows the sandbox (restore a backup that does
// first); the next start then re-adopts it like any sandbox whose daemon
// died, marking it failed (agent_lost) if nothing of it runs.
func RestoreQuarantined(ctx context.Context, dataDir, name string) (string, error) {
	unlock, err := lockExisting(dataDir, "berth quarantine restore")
	if err != nil {
		return "", err
	}
	defer unlock()
	path := filepath.Join(dataDir, DBFile)
	var db *store.DB
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	return sandbox.RestoreQuarantined(dataDir, name, func(id string) (bool, error) {
		if s, err := store.Inspect(ctx, path); err != nil || s.Empty() {
			return false, err
		}
		if db, err = store.Open(ctx, path); err != nil {
			return false, err
		}
		_, err := db.GetSandbox(ctx, id)
		if errcode.Is(err, errcode.NotFound) {
			return false, nil
		}
		return err == nil, err
	})
}

// PurgeQuarantined deletes the quarantine entries names for good, offline,
// and returns the paths they had. It checks every name before it deletes
// any: a mistyped one purges nothing.
func PurgeQuarantined(dataDir string, names []string) ([]string, error) {
	unlock, err := lockExisting(dataDir, "berth quarantine purge")
	if err != nil {
		return nil, err
	}
	defer unlock()
	for _, name := range names {
		if _, err := sandbox.QuarantinedEntry(dataDir, name); err != nil {
			return nil, err
		}
	}
	var purged []string
	for _, name := range names {
		path, err := sandbox.PurgeQuarantined(dataDir, name)
		if err != nil {
			return purged, err
		}
		purged = append(purged, path)
	}
	return purged, nil
}

// lockExisting locks a data directory that must exist already.
func lockExisting(dataDir, what string) (func(), error) {
	if _, err := os.Stat(dataDir); err != nil {
		return nil, errcode.DataDirNotFound.New("no data directory %s: %v", dataDir, err)
	}
	return lockDataDir(dataDir, what)
}
