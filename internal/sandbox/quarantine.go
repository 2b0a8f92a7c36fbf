package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/errcode"
)

// The start-up sweep never deletes a sandbox directory the store does not
// know: the store may be the one that is wrong (a lost write-ahead log, an
// older backup restored). It stops what runs there and moves the directory
// to <data>/quarantine/<time>-<sandbox id>, where an operator can look at
// it, move it back (once a database that knows the sandbox is in place) or
// purge it.

// quarantineTime is the layout of an entry's time: UTC, sortable as text,
// free of characters a shell or a file system minds.
const quarantineTime = "20060102T150405.000Z"

// QuarantineDir is the quarantine of data directory dataDir.
func QuarantineDir(dataDir string) string { return filepath.Join(dataDir, "quarantine") }

// SandboxDirs returns the names of the entries of dataDir's sandbox
// directory (each a sandbox ID, if nothing else put files there).
func SandboxDirs(dataDir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dataDir, "sandboxes"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

// QuarantineEntry is one sandbox directory moved aside.
type QuarantineEntry struct {
	Name      string    // the entry's name in the quarantine, to restore or purge it by
	SandboxID string    // the sandbox whose directory it was
	At        time.Time // when it was moved aside
	Path      string    // where it is now
}

// quarantine moves sandbox directory id of dataDir into the quarantine and
// returns its new path. The move is a rename within the data directory:
// the directory is whole in one place or the other, never copied in part.
func quarantine(dataDir, id string, now time.Time) (string, error) {
	qdir := QuarantineDir(dataDir)
	if err := os.MkdirAll(qdir, 0o700); err != nil {
		return "", fmt.Errorf("creating the quarantine: %w", err)
	}
	dst := filepath.Join(qdir, now.UTC().Format(quarantineTime)+"-"+id)
	if _, err := os.Lstat(dst); err == nil {
		return "", fmt.Errorf("quarantine entry %s exists", dst)
	}
	if err := os.Rename(LayoutFor(dataDir, id).Dir, dst); err != nil {
		return "", fmt.Errorf("moving sandbox directory %s into the quarantine: %w", id, err)
	}
	return dst, syncDir(qdir)
}

// ListQuarantine lists the quarantine of dataDir, oldest first. Entries it
// cannot parse (put there by hand) are listed with only Name and Path.
func ListQuarantine(dataDir string) ([]QuarantineEntry, error) {
	qdir := QuarantineDir(dataDir)
	entries, err := os.ReadDir(qdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []QuarantineEntry
	for _, e := range entries {
		q := QuarantineEntry{Name: e.Name(), Path: filepath.Join(qdir, e.Name())}
		if at, id, ok := strings.Cut(e.Name(), "-"); ok {
			if t, err := time.Parse(quarantineTime, at); err == nil {
				q.At, q.SandboxID = t, id
			}
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b QuarantineEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// QuarantinedEntry finds entry name of dataDir's quarantine.
func QuarantinedEntry(dataDir, name string) (QuarantineEntry, error) {
	list, err := ListQuarantine(dataDir)
	if err != nil {
		return QuarantineEntry{}, err
	}
	for _, q := range list {
		if q.Name == name {
			return q, nil
		}
	}
	return QuarantineEntry{}, errcode.QuarantineEntryNotFound.New("%s has no quarantine entry %q (berth quarantine ls lists them)", QuarantineDir(dataDir), name)
}

// RestoreQuarantined moves quarantine entry name of dataDir back to its
// sandbox directory and returns that directory. known reports whether the
// database the next daemon will open knows the sandbox: a directory goes
// back only then, since the start-up sweep would move it aside again
// otherwise. It refuses (and moves nothing) when the sandbox directory
// exists. The caller holds the data directory's lock.
func RestoreQuarantined(dataDir, name string, known func(id string) (bool, error)) (string, error) {
	q, err := QuarantinedEntry(dataDir, name)
	if err != nil {
		return "", err
	}
	if q.SandboxID == "" {
		return "", errcode.QuarantineEntryUnnamed.New("quarantine entry %q is not named <time>-<sandbox id>; move it by hand", name)
	}
	ok, err := known(q.SandboxID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errcode.SandboxNotInDatabase.New("the database does not know sandbox %s, so the next start would move its directory aside again; "+
			"restore a backup that knows it first (berth restore FILE), or copy what you need out of %s", q.SandboxID, q.Path)
	}
	l := LayoutFor(dataDir, q.SandboxID)
	if _, err := os.Lstat(l.Dir); err == nil {
		return "", errcode.SandboxDirectoryExists.New("sandbox %s already has a directory %s; nothing was moved", q.SandboxID, l.Dir)
	}
	if err := os.MkdirAll(filepath.Dir(l.Dir), 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(q.Path, l.Dir); err != nil {
		return "", fmt.Errorf("moving %s back: %w", q.Path, err)
	}
	return l.Dir, errors.Join(syncDir(filepath.Dir(l.Dir)), syncDir(QuarantineDir(dataDir)))
}

// PurgeQuarantined deletes quarantine entry name of dataDir for good and
// returns its path. The caller holds the data directory's lock.
func PurgeQuarantined(dataDir, name string) (string, error) {
	q, err := QuarantinedEntry(dataDir, name)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(q.Path); err != nil {
		return "", fmt.Errorf("purging %s: %w", q.Path, err)
	}
	return q.Path, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
