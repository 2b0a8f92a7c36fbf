package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

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
// against its uid's RLIMIT_NPROC. It is what each Lease costs, so it reads
// each process's status with one read into a reused buffer and parses it in
// place: a third of the CPU of os.ReadFile and a line scanner, most of what
// is left being the kernel's formatting of the file.
func processUIDs() (map[int]bool, error) {
	dir, names, err := listProcesses()
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	dirfd := int(dir.Fd())
	out := map[int]bool{}
	buf := make([]byte, 4096) // a status is about 1.5 KiB; Uid and Gid are its 9th and 10th lines
	for _, name := range names {
		fd, err := unix.Openat(dirfd, name+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // exited meanwhile
		}
		n, err := unix.Read(fd, buf)
		unix.Close(fd)
		if err != nil || n <= 0 {
			continue // exited meanwhile
		}
		addStatusIDs(out, buf[:n], "\nUid:")
		addStatusIDs(out, buf[:n], "\nGid:")
	}
	return out, nil
}

// addStatusIDs adds the ids on the line of status that starts with key
// ("\nUid:" or "\nGid:").
func addStatusIDs(out map[int]bool, status []byte, key string) {
	i := bytes.Index(status, []byte(key))
	if i < 0 {
		return
	}
	line := status[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	id, digits := 0, false
	for _, c := range line {
		switch {
		case c >= '0' && c <= '9':
			id, digits = id*10+int(c-'0'), true
		case digits:
			out[id], id, digits = true, 0, false
		}
	}
	if digits {
		out[id] = true
	}
}

// processesAs returns the processes whose effective uid or gid is id,
// zombies included, from the owner of each /proc/PID: the kernel sets it
// from the process's effective uid and gid, even for a process that made
// itself non-dumpable (which only the files under it hide). A stat costs a
// fraction of a status read. It sees every process of a sandbox, whose
// four uids and gids are all its own: they hold no capability, run with
// no_new_privs and exec nothing setuid, so none can make them differ.
func processesAs(id int) ([]int, error) {
	dir, names, err := listProcesses()
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	dirfd := int(dir.Fd())
	var out []int
	for _, name := range names {
		if runsAs(dirfd, name, id) {
			pid, _ := strconv.Atoi(name)
			out = append(out, pid)
		}
	}
	return out, nil
}

// stillAs returns those of pids whose process still exists with an
// effective uid or gid of id (a PID reused by another process drops out).
func stillAs(pids []int, id int) []int {
	return slices.DeleteFunc(pids, func(pid int) bool { return !runsAs(unix.AT_FDCWD, "/proc/"+strconv.Itoa(pid), id) })
}

// runsAs reports whether the process directory name (under dirfd) exists
// and its process's effective uid or gid is id.
func runsAs(dirfd int, name string, id int) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, 0); err != nil {
		return false // exited meanwhile
	}
	return int(st.Uid) == id || int(st.Gid) == id
}

// listProcesses opens /proc and lists the names of its process directories.
func listProcesses() (*os.File, []string, error) {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil, nil, fmt.Errorf("listing processes: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		dir.Close()
		return nil, nil, fmt.Errorf("listing processes: %w", err)
	}
	return dir, slices.DeleteFunc(names, func(n string) bool { return n == "" || n[0] < '0' || n[0] > '9' }), nil
}
