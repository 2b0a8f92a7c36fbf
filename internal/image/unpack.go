package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/berthdev/berth/internal/errcode"
)

const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
	maxZstdWindow  = 128 << 20 // zstd --long=27; bounds decoder memory
)

// applier applies layers to a destination tree. It is not safe for
// concurrent use.
type applier struct {
	root       *os.Root
	chown      bool // whether to chown entries to 0:0: only root can
	max, total int64
	entries    int

	// known holds directories checked to be real directories, not
	// symlinks. It is cleared whenever a directory is removed, so that a
	// symlink later put in its place is never taken for it.
	known map[string]bool
	// dirs holds each directory entry's mode and mtime, set by finish:
	// set earlier, the mtime would change as children arrive, and a
	// read-only directory would refuse them.
	dirs map[string]dirMeta

	// For the layer being applied:
	layer string // digest or path, for messages
	// touched holds the entries it created, and their parents: whiteouts
	// hide only what earlier layers left, and the tar may put an opaque
	// whiteout after entries of its directory.
	touched map[string]bool
}

type dirMeta struct {
	mode  fs.FileMode
	mtime time.Time
}

func newApplier(root *os.Root, max int64) (*applier, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("opening destination: %w", err)
	}
	names, err := f.Readdirnames(1)
	f.Close()
	if len(names) > 0 {
		return nil, errcode.New(errcode.Invalid, "destination %s is not empty", root.Name())
	}
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading destination: %w", err)
	}
	return &applier{
		root:  root,
		chown: os.Geteuid() == 0,
		max:   max,
		known: make(map[string]bool),
		dirs:  make(map[string]dirMeta),
	}, nil
}

// apply verifies, decompresses and applies one layer.
func (a *applier) apply(ctx context.Context, s source, l layer) error {
	a.layer = l.name
	rc, err := s.Open(l.name)
	if err != nil {
		return err
	}
	defer rc.Close()
	var blob io.Reader = rc
	if l.desc != nil {
		a.layer = l.desc.Digest.String()
		blob = newVerifier(rc, l.desc.Digest, l.desc.Size, "layer "+a.layer)
	}
	br := bufio.NewReaderSize(blob, 64<<10)
	err = a.applyStream(ctx, br, l.diffID)
	if err == nil || errcode.Has(err, errcode.ImageInvalid) {
		// Read the blob to its end so that its verifier has its say. A
		// corrupt blob usually trips the decompressor first: blame the
		// digest then, not the data.
		if _, derr := io.Copy(io.Discard, br); derr != nil {
			return a.decodeError(derr)
		}
	}
	return err
}

func (a *applier) applyStream(ctx context.Context, r *bufio.Reader, diffID digest.Digest) error {
	un, err := decompress(r)
	if err != nil {
		return a.decodeError(err)
	}
	defer un.Close()
	diff := newVerifier(un, diffID, -1, "layer "+a.layer+" uncompressed")
	if err := a.applyTar(ctx, tar.NewReader(diff)); err != nil {
		return err
	}
	// The tar reader stops at the end-of-archive marker, but the diff ID
	// covers the padding after it too.
	if _, err := io.Copy(io.Discard, diff); err != nil {
		return a.decodeError(err)
	}
	return nil
}

// decompress sniffs r's compression, whatever the media type says: legacy
// docker layer.tar files may be gzipped or not.
func decompress(r *bufio.Reader) (io.ReadCloser, error) {
	magic, _ := r.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return zr, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(r), nil
}

// decodeError classifies an error from reading a layer: the image is
// malformed, unless the error already says more.
func (a *applier) decodeError(err error) error {
	if errors.As(err, new(*errcode.Error)) {
		return err
	}
	return errorf(errcode.ImageInvalid, err, "layer %s: %v", a.layer, err)
}

func (a *applier) applyTar(ctx context.Context, tr *tar.Reader) error {
	a.touched = make(map[string]bool)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return a.decodeError(err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		a.entries++
		if a.entries > maxEntries {
			return errcode.ImageTooManyEntries.New("image has more than %d entries (layer %s)", maxEntries, a.layer)
		}
		if err := a.entry(hdr, tr); err != nil {
			if errors.As(err, new(*errcode.Error)) {
				return err
			}
			return fmt.Errorf("layer %s: entry %.200q: %w", a.layer, hdr.Name, err)
		}
	}
	return nil
}

func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	name, err := a.clean(hdr.Name)
	if err != nil {
		return err
	}
	if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
		return a.whiteout(name)
	}
	if strings.Contains("/"+path.Dir(name), "/"+whiteoutPrefix) {
		return nil // inside a whiteout: malformed, and never shown
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return a.mkdir(name, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		return a.writeFile(name, hdr, r)
	case tar.TypeSymlink:
		return a.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return a.link(name, hdr.Linkname)
	}
	return nil // devices, FIFOs and unknown types: sandboxes cannot use them
}

// clean turns an entry name into a path relative to dst. Absolute names are
// taken relative to the image root, as Docker does; ".." is refused.
func (a *applier) clean(name string) (string, error) {
	if len(name) > maxNameBytes {
		return "", a.invalid(errcode.ImageInvalid, name, "name longer than %d bytes", maxNameBytes)
	}
	rel := strings.TrimLeft(name, "/")
	for c := range strings.SplitSeq(rel, "/") {
		if c == ".." {
			return "", a.invalid(errcode.UnsafePath, name, "path has a .. component")
		}
	}
	return path.Clean(rel), nil // "" becomes "."
}

func (a *applier) invalid(reason errcode.Reason, name, format string, args ...any) error {
	return reason.New("layer %s: entry %.200q: %s", a.layer, name, fmt.Sprintf(format, args...))
}

// parents checks that every parent directory of name is a real directory,
// creating missing ones if create is set. This, not os.Root, is what keeps
// an image from writing through a symlink it planted: os.Root follows links
// that stay inside dst. Without create, a missing parent is an error
// wrapping fs.ErrNotExist.
func (a *applier) parents(name string, create bool) error {
	for i := range len(name) {
		if name[i] != '/' {
			continue
		}
		dir := name[:i]
		if create {
			a.touched[dir] = true
		}
		if a.known[dir] {
			continue
		}
		fi, err := a.root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := a.root.Mkdir(dir, 0o755); err != nil {
				return err
			}
			if err := a.lchown(dir); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.Mode().Type() == fs.ModeSymlink:
			return a.invalid(errcode.UnsafePath, name, "parent %q is a symlink", dir)
		case !fi.IsDir():
			return a.invalid(errcode.ImageInvalid, name, "parent %q is not a directory", dir)
		}
		a.known[dir] = true
	}
	return nil
}

// lstat is Lstat that refuses to follow a symlink in p's parents.
func (a *applier) lstat(p string) (fs.FileInfo, error) {
	if err := a.parents(p, false); err != nil {
		return nil, err
	}
	return a.root.Lstat(p)
}

// replace prepares name for a new entry: its parents are made real
// directories and what earlier entries left at name is removed, unless both
// are directories, which merge. It reports whether a directory remains.
func (a *applier) replace(name string, dir bool) (bool, error) {
	if err := a.parents(name, true); err != nil {
		return false, err
	}
	fi, err := a.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.IsDir() && dir:
		return true, nil
	case name == ".":
		return false, a.invalid(errcode.ImageInvalid, name, "replaces the root directory")
	case fi.IsDir():
		a.forget(name)
		return false, a.root.RemoveAll(name)
	}
	// Never write into an existing file: it may be hard linked elsewhere.
	return false, a.root.Remove(name)
}

// remove removes p and anything under it, if it exists, without following
// symlinks at p or above it.
func (a *applier) remove(p string) error {
	fi, err := a.lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		a.forget(p)
	}
	return a.root.RemoveAll(p)
}

// forget drops what the applier knows of directory p and those under it,
// before p is removed.
func (a *applier) forget(p string) {
	clear(a.known)
	for name := range a.dirs {
		if name == p || strings.HasPrefix(name, p+"/") {
			delete(a.dirs, name)
		}
	}
}

// mode returns an entry's permission and sticky bits: setuid and setgid are
// dropped.
func mode(hdr *tar.Header) fs.FileMode {
	return hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSticky)
}

func (a *applier) lchown(name string) error {
	if !a.chown {
		return nil
	}
	return a.root.Lchown(name, 0, 0)
}

func (a *applier) mkdir(name string, hdr *tar.Header) error {
	exists, err := a.replace(name, true)
	if err != nil {
		return err
	}
	if !exists {
		if err := a.root.Mkdir(name, 0o755); err != nil {
			return err
		}
		if err := a.lchown(name); err != nil {
			return err
		}
	}
	a.known[name] = true
	a.touched[name] = true
	a.dirs[name] = dirMeta{mode: mode(hdr), mtime: hdr.ModTime}
	return nil
}

func (a *applier) writeFile(name string, hdr *tar.Header, r io.Reader) error {
	a.total += hdr.Size
	if a.total > a.max {
		return errcode.ImageTooLarge.New("image unpacks to more than %d bytes (layer %s, entry %.200q)", a.max, a.layer, name)
	}
	if _, err := a.replace(name, false); err != nil {
		return err
	}
	f, err := a.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		if errors.As(err, new(*fs.PathError)) {
			return err // writing failed, not reading the layer
		}
		return a.decodeError(err)
	}
	if a.chown {
		err = f.Chown(0, 0)
	}
	if err == nil {
		err = f.Chmod(mode(hdr))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	a.touched[name] = true
	return a.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}

func (a *applier) symlink(name, target string) error {
	if len(target) > maxNameBytes {
		return a.invalid(errcode.ImageInvalid, name, "symlink target longer than %d bytes", maxNameBytes)
	}
	if _, err := a.replace(name, false); err != nil {
		return err
	}
	if err := a.root.Symlink(target, name); err != nil {
		return err
	}
	a.touched[name] = true
	return a.lchown(name)
}

func (a *applier) link(name, target string) error {
	target, err := a.clean(target)
	if err != nil {
		return err
	}
	// The target must be a regular file reached through real directories:
	// a hard link to a symlink, or through one, could reach outside dst.
	fi, err := a.lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return a.invalid(errcode.ImageInvalid, name, "hard link target %q does not exist", target)
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return a.invalid(errcode.UnsafePath, name, "hard link target %q is not a regular file", target)
	case target == name:
		return nil
	}
	if _, err := a.replace(name, false); err != nil {
		return err
	}
	if err := a.root.Link(target, name); err != nil {
		return err
	}
	a.touched[name] = true
	return nil
}

// whiteout applies a whiteout entry; the entry itself is never created.
func (a *applier) whiteout(name string) error {
	dir, base := path.Dir(name), path.Base(name)
	if base == opaqueWhiteout {
		return a.prune(dir)
	}
	if strings.HasPrefix(base, whiteoutPrefix+whiteoutPrefix) {
		return nil // other AUFS metadata
	}
	hidden := strings.TrimPrefix(base, whiteoutPrefix)
	if hidden == "" || hidden == "." || hidden == ".." {
		return a.invalid(errcode.UnsafePath, name, "whiteout of %q", hidden)
	}
	target := path.Join(dir, hidden)
	if a.touched[target] {
		return nil
	}
	return a.remove(target)
}

// prune removes everything under dir that the current layer did not create:
// entries that come later in the layer do not exist yet.
func (a *applier) prune(dir string) error {
	fi, err := a.lstat(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return nil
	}
	if err != nil {
		return err
	}
	f, err := a.root.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !a.touched[p] {
			err = a.remove(p)
		} else {
			err = a.prune(p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finish sets directory modes and mtimes, children before parents, so
// that a read-only directory is set last.
func (a *applier) finish() error {
	names := slices.Sorted(maps.Keys(a.dirs))
	slices.Reverse(names)
	for _, name := range names {
		fi, err := a.lstat(name)
		if err != nil || !fi.IsDir() {
			continue // a later layer removed or replaced it, or a parent
		}
		m := a.dirs[name]
		if err := a.root.Chmod(name, m.mode); err != nil {
			return fmt.Errorf("setting mode of %s: %w", name, err)
		}
		if err := a.root.Chtimes(name, m.mtime, m.mtime); err != nil {
			return fmt.Errorf("setting mtime of %s: %w", name, err)
		}
	}
	return nil
}
