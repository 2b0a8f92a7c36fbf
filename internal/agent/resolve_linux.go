package agent

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The file API resolves every path on descriptors, never by handing a path
// string to a call that resolves it again: a directory is reached from the
// workspace's descriptor, and the operation then acts on one name relative
// to that directory's descriptor (openat, fstatat, mkdirat, renameat2,
// unlinkat) without following it. A program in the sandbox that swaps a
// directory for a symbolic link can change which directory a request
// reaches, but not make it leave the workspace.
//
// Directories are resolved by openat2 with RESOLVE_BENEATH where the kernel
// has it (Linux 5.6, and gVisor since August 2026), and otherwise by walking
// one component at a time (walk). os.Root is not used: it walks with
// openat(O_NOFOLLOW|O_DIRECTORY), which gVisor follows when the name is a
// symbolic link to a directory (google/gvisor#14786), so under gVisor an
// os.Root can be walked out of.

// errNoOpenat2 says openat2 cannot be used here; walk instead.
var errNoOpenat2 = errors.New("openat2 unavailable")

// Bounds on resolution.
const (
	// maxWalkSteps bounds the components a walk visits, ".." restarts
	// and link targets included.
	maxWalkSteps = 8192
	// maxRemoveDepth bounds the nesting removeAll descends into.
	maxRemoveDepth = 1024
)

// wsRoot is the workspace's directory, held open for one request.
type wsRoot struct {
	fd int // O_PATH|O_DIRECTORY
	// walkOnly resolves by walk alone, as on kernels without openat2
	// (set by tests, so that both resolvers are tested everywhere).
	walkOnly bool
}

// workspace opens the workspace for one request, from the agent's os.Root
// (a descriptor, not the workspace's path).
func (a *Agent) workspace() (*wsRoot, error) {
	f, err := a.root.OpenFile(".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	return &wsRoot{fd: fd}, nil
}

// Close releases the workspace's descriptor.
func (w *wsRoot) Close() error { return unix.Close(w.fd) }

// dir is an O_PATH descriptor of a directory inside the workspace.
type dir struct{ fd int }

// Close releases the directory's descriptor.
func (d *dir) Close() error { return unix.Close(d.fd) }

// openDir resolves p, a path relative to the workspace, to the directory it
// names, following every symbolic link on the way, never leaving the
// workspace. p may hold ".." and need not be clean.
func (w *wsRoot) openDir(p string) (*dir, error) {
	if w.walkOnly {
		return w.walk(p)
	}
	d, err := w.beneath(p)
	if errors.Is(err, errNoOpenat2) {
		return w.walk(p)
	}
	return d, err
}

// beneath is openDir by openat2 with RESOLVE_BENEATH: the kernel refuses
// ".." above the workspace and absolute links (EXDEV), and fails a lookup
// through ".." that a rename raced (EAGAIN).
func (w *wsRoot) beneath(p string) (*dir, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(w.fd, p, &how)
		switch {
		case err == nil:
			return &dir{fd: fd}, nil
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN && try < maxRetries:
			continue
		case err == unix.EAGAIN:
			// Renames keep racing the ".." lookups; the walk does
			// not depend on them.
			return nil, errNoOpenat2
		case err == unix.EXDEV:
			return nil, errEscapes
		// Kernels before 5.6, seccomp filters that refuse it, and
		// kernels that know openat2 but not these flags.
		case err == unix.ENOSYS, err == unix.EPERM, err == unix.EINVAL:
			return nil, errNoOpenat2
		}
		return nil, err
	}
}

// walk is openDir one component at a time: each is opened with O_PATH and
// O_NOFOLLOW relative to the directory before it, and fstat on the new
// descriptor says what it is. A link is read from its own descriptor
// (readlinkat with an empty name), so it cannot be swapped between the
// check and the read; its target replaces it in the components still to
// walk. ".." goes back to the directory the walk came from, by walking
// the names before it again from the workspace, so it never reaches above
// the workspace.
func (w *wsRoot) walk(p string) (*dir, error) {
	cur := -1 // the current directory; -1 is the workspace
	closeCur := func() {
		if cur >= 0 {
			unix.Close(cur)
		}
		cur = -1
	}
	defer closeCur()
	at := func() int {
		if cur < 0 {
			return w.fd
		}
		return cur
	}
	var done []string // the directories walked through, from the workspace
	todo := strings.Split(p, "/")
	for links, steps := 0, 0; len(todo) > 0; steps++ {
		if steps > maxWalkSteps {
			return nil, unix.ENAMETOOLONG
		}
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return nil, errEscapes
			}
			todo = append(done[:len(done)-1:len(done)-1], todo...)
			done = nil
			closeCur()
			continue
		}
		fd, typ, err := openNoFollow(at(), c)
		if err != nil {
			return nil, err
		}
		switch typ {
		case unix.S_IFDIR:
			closeCur()
			cur = fd
			done = append(done, c)
		case unix.S_IFLNK:
			target, err := readlinkFd(fd)
			unix.Close(fd)
			if err != nil {
				return nil, err
			}
			if links++; links > maxSymlinkHops {
				return nil, unix.ELOOP
			}
			if strings.HasPrefix(target, "/") {
				return nil, errEscapes
			}
			if target == "" {
				return nil, unix.ENOENT
			}
			todo = append(strings.Split(target, "/"), todo...)
		default:
			unix.Close(fd)
			return nil, unix.ENOTDIR
		}
	}
	if cur < 0 {
		fd, err := openatRetry(w.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		return &dir{fd: fd}, nil
	}
	d := &dir{fd: cur}
	cur = -1
	return d, nil
}

// splitLast splits p before its last component, without cleaning it:
// "a/b/../c" is "a/b/.." and "c", since b may be a link.
func splitLast(p string) (string, string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i], p[i+1:]
}

// lookup resolves p to the directory holding its last component and that
// component's name. With follow, a last component that is a symbolic link
// is followed (inside the workspace), so the name returned is what the
// links lead to: not a link, unless it changed since, or missing. Without
// follow, the last component is left as it is, for operations that act on
// a link itself. A path that ends at a directory ("." or "..", from a link)
// gives that directory and ".".
func (w *wsRoot) lookup(p string, follow bool) (*dir, string, error) {
	for links := 0; ; {
		parent, name := splitLast(p)
		if name == "" || name == "." || name == ".." {
			d, err := w.openDir(p)
			return d, ".", err
		}
		d, err := w.openDir(parent)
		if err != nil {
			return nil, "", err
		}
		if !follow {
			return d, name, nil
		}
		target, err := d.readlink(name)
		if err != nil {
			// EINVAL: not a link; ENOENT: missing. Either way the
			// operation acts on the name as it finds it.
			if err == unix.EINVAL || err == unix.ENOENT {
				return d, name, nil
			}
			d.Close()
			return nil, "", err
		}
		d.Close()
		if links++; links > maxSymlinkHops {
			return nil, "", unix.ELOOP
		}
		if strings.HasPrefix(target, "/") {
			return nil, "", errEscapes
		}
		if target == "" {
			return nil, "", unix.ENOENT
		}
		if len(parent)+1+len(target) > 2*MaxPathBytes {
			return nil, "", unix.ENAMETOOLONG
		}
		p = parent + "/" + target
	}
}

// mkdirAll makes the directory p (clean, relative) and its missing
// parents, each with mkdirat in the directory made or found before it, and
// returns it. Existing links on the way are followed inside the workspace.
func (w *wsRoot) mkdirAll(p string, perm fs.FileMode) (*dir, error) {
	d, err := w.openDir(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || p == "." {
		return d, err
	}
	parts := strings.Split(p, "/")
	// The deepest directory that exists.
	i := len(parts) - 1
	for ; i > 0; i-- {
		if d, err = w.openDir(strings.Join(parts[:i], "/")); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if i == 0 {
		if d, err = w.openDir("."); err != nil {
			return nil, err
		}
	}
	for ; i < len(parts); i++ {
		if err := unix.Mkdirat(d.fd, parts[i], uint32(perm)); err != nil && err != unix.EEXIST {
			d.Close()
			return nil, err
		}
		next, err := d.child(parts[i])
		if errors.Is(err, errIsLink) {
			// A link was there already (or was swapped in): resolve
			// the whole prefix, inside the workspace.
			next, err = w.openDir(strings.Join(parts[:i+1], "/"))
		}
		d.Close()
		if err != nil {
			return nil, err
		}
		d = next
	}
	return d, nil
}

// child opens the directory name in d without following a link
// (errIsLink).
func (d *dir) child(name string) (*dir, error) {
	fd, typ, err := openNoFollow(d.fd, name)
	if err != nil {
		return nil, err
	}
	switch typ {
	case unix.S_IFDIR:
		return &dir{fd: fd}, nil
	case unix.S_IFLNK:
		unix.Close(fd)
		return nil, errIsLink
	}
	unix.Close(fd)
	return nil, unix.ENOTDIR
}

// lstat describes name in d, not following a link.
func (d *dir) lstat(name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		return newStatInfo(name, &st), nil
	}
}

// stat describes d itself.
func (d *dir) stat(name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return nil, err
	}
	return newStatInfo(name, &st), nil
}

// readlink reads the link name in d: EINVAL if it is not one.
func (d *dir) readlink(name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		got, err := unix.Readlinkat(d.fd, name, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		if got < n || n > 2*MaxPathBytes {
			return string(b[:got]), nil
		}
	}
}

// readlinkFd reads the link that fd (O_PATH|O_NOFOLLOW) is.
func readlinkFd(fd int) (string, error) {
	var d = dir{fd: fd}
	return d.readlink("")
}

// openRead opens name in d for reading, without following a link
// (ELOOP), blocking on a FIFO or making a terminal the agent's.
func (d *dir) openRead(name string) (*os.File, error) {
	fd, err := openatRetry(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readDir opens d for reading its entries.
func (d *dir) readDir() (*os.File, error) {
	fd, err := openatRetry(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "."), nil
}

// create makes the new file name in d, exclusively (never through a link).
func (d *dir) create(name string, perm fs.FileMode) (*os.File, error) {
	fd, err := openatRetry(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// remove removes the file or empty directory name in d (a link itself,
// never its target).
func (d *dir) remove(name string) error {
	err := unix.Unlinkat(d.fd, name, 0)
	if err == nil || (err != unix.EISDIR && err != unix.EPERM) {
		return err
	}
	if rerr := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); rerr != unix.ENOTDIR {
		return rerr
	}
	return err
}

// removeAll removes name in d and everything under it. It descends only
// into directories it opened without following a link, so a link (or a
// directory swapped for one) is removed, never what it leads to.
func (d *dir) removeAll(name string) error { return removeAllAt(d.fd, name, 0) }

func removeAllAt(parent int, name string, depth int) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	if depth >= maxRemoveDepth {
		return unix.ENAMETOOLONG
	}
	for try := 0; ; try++ {
		sub, err := (&dir{fd: parent}).child(name)
		switch {
		case errors.Is(err, errIsLink), errors.Is(err, unix.ENOTDIR):
			// No longer a directory: remove whatever it is now.
			err = unix.Unlinkat(parent, name, 0)
			fallthrough
		case err != nil:
			if err == unix.ENOENT {
				return nil
			}
			return err
		}
		err = removeEntries(sub, depth)
		sub.Close()
		if err != nil {
			return err
		}
		err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		switch {
		case err == unix.ENOENT:
			return nil
		case err == unix.ENOTEMPTY && try < maxRetries:
			continue // entries appeared meanwhile
		}
		return err
	}
}

// removeEntries removes everything in d, a batch of names at a time.
func removeEntries(d *dir, depth int) error {
	f, err := d.readDir()
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		names, rerr := f.Readdirnames(1024)
		for _, n := range names {
			if err := removeAllAt(d.fd, n, depth+1); err != nil {
				return err
			}
		}
		if rerr == io.EOF || len(names) == 0 {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// rename moves fromName in from to toName in to, never following either.
// With noReplace, an existing toName is EEXIST, decided by the kernel
// (RENAME_NOREPLACE) rather than by a check before.
func rename(from *dir, fromName string, to *dir, toName string, noReplace bool) error {
	if noReplace {
		err := unix.Renameat2(from.fd, fromName, to.fd, toName, unix.RENAME_NOREPLACE)
		if err != unix.EINVAL && err != unix.ENOSYS {
			return err
		}
		// The file system may not know the flag (EINVAL also means a
		// move into itself, which renameat reports again). Fall back
		// to a check and a plain rename.
		if _, err := to.lstat(toName); err == nil {
			return unix.EEXIST
		}
	}
	return unix.Renameat(from.fd, fromName, to.fd, toName)
}

// openNoFollow opens name in dirfd with O_PATH and O_NOFOLLOW, which
// opens a link itself and never a device or FIFO, and returns the
// descriptor with its file type (S_IFDIR, S_IFLNK, ...) from fstat.
func openNoFollow(dirfd int, name string) (int, uint32, error) {
	fd, err := openatRetry(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, st.Mode & unix.S_IFMT, nil
}

// openatRetry is openat, retried on EINTR.
func openatRetry(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// statInfo is an fs.FileInfo from fstatat.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func newStatInfo(name string, st *unix.Stat_t) *statInfo {
	return &statInfo{name: name, st: *st}
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

var _ fs.FileInfo = (*statInfo)(nil)
