package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockRegistry opens the registry file at path (making it and its
// directory if need be) and takes an exclusive flock on it. Writers replace
// the file by rename, so a lock taken on a file no longer at path (renamed
// over, or removed) is dropped and taken again on the current one: only the
// holder of the lock on the file at path may change it.
func lockRegistry(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flockRetry(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("locking: %w", err)
		}
		var held, cur unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &held); err != nil {
			f.Close()
			return nil, err
		}
		err = unix.Stat(path, &cur)
		if err == nil && held.Dev == cur.Dev && held.Ino == cur.Ino {
			return f, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, err
		}
	}
}

func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// writeRegistry replaces the registry file with b: a temporary file beside
// it, synced, renamed over it, and the directory synced. The caller holds
// the lock on the file it replaces.
func writeRegistry(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing the uid registry: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing the uid registry: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// processUIDs returns every uid and gid any process on the host has (real,
// effective, saved, file system), zombies included: a zombie still counts
// against its uid's RLIMIT_NPROC.
func processUIDs() (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	out := map[int]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "Uid:") && !strings.HasPrefix(line, "Gid:") {
				continue
			}
			for _, f := range strings.Fields(line)[1:] {
				if id, err := strconv.Atoi(f); err == nil {
					out[id] = true
				}
			}
		}
	}
	return out, nil
}
