package agent

import (
	"container/heap"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Listing page sizes.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

// fileError classifies a file-system error on the client's path p.
func fileError(err error, p string) error {
	var e *errcode.Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, errEscapes):
		return errcode.PathEscapesWorkspace.New("path %q resolves outside the workspace", p)
	case errors.Is(err, errChanged):
		return errcode.PathChanged.New("%q kept changing while it was resolved; try again", p)
	// os.Root (cleanPath's resolveBeneath) reports escapes with an
	// unexported error; its text is the only handle.
	case strings.Contains(err.Error(), "path escapes from parent"):
		return errcode.PathEscapesWorkspace.New("path %q resolves outside the workspace", p)
	case errors.Is(err, fs.ErrNotExist):
		return errcode.FileNotFound.New("%q does not exist", p)
	// Before fs.ErrExist, which ENOTEMPTY also matches.
	case errors.Is(err, syscall.ENOTEMPTY):
		return errcode.DirectoryNotEmpty.New("directory %q is not empty (use recursive=true)", p)
	case errors.Is(err, fs.ErrExist):
		return errcode.FileExists.New("%q already exists", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errcode.NotDirectory.New("a parent of %q is not a directory", p)
	case errors.Is(err, syscall.EISDIR):
		return errcode.IsDirectory.New("%q is a directory", p)
	case errors.Is(err, syscall.ELOOP):
		return errcode.PathIsSymlink.New("%q is a symbolic link loop or not allowed", p)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return errcode.PathTooLong.New("path %q is too long", p)
	case errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.ENODEV):
		return errcode.NotRegularFile.New("%q is not a regular file", p)
	case errors.Is(err, fs.ErrPermission):
		return errcode.FilePermission.New("permission denied on %q", p)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errcode.DiskFull.New("no space left in the workspace")
	}
	return err
}

// queryPath reads and cleans the "path" query parameter.
func (a *Agent) queryPath(r *http.Request, dflt string) (string, string, error) {
	raw := r.URL.Query().Get("path")
	if raw == "" && dflt != "" {
		raw = dflt
	}
	clean, err := a.workspacePath(raw)
	return raw, clean, err
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// nameHeap is a max-heap of names, used to keep the smallest N names of a
// directory without holding all of them.
type nameHeap []string

func (h nameHeap) Len() int           { return len(h) }
func (h nameHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h nameHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nameHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *nameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// handleListFiles lists a directory sorted by name, limit entries after
// cursor (the last name of the previous page). Memory is bounded by limit,
// whatever the directory's size. Entries are described relative to the
// listed directory's descriptor, so a name swapped meanwhile is described
// as it is in that directory, or left out if it is gone.
func (a *Agent) handleListFiles(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, ".")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit := DefaultListLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			a.fail(w, r, errcode.QueryInvalid.New("limit must be a positive integer"))
			return
		}
		limit = min(n, MaxListLimit)
	}
	cursor := r.URL.Query().Get("cursor")
	ws, err := a.workspace()
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer ws.Close()
	// Resolution asks for a directory (O_DIRECTORY) and opens with
	// O_PATH, so listing a FIFO cannot block and listing a device never
	// reaches its driver.
	d, err := ws.openDir(p)
	if errors.Is(err, syscall.ENOTDIR) {
		err = errcode.NotDirectory.New("%q is not a directory", raw)
	}
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer d.Close()
	f, err := d.readDir()
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer f.Close()
	// Keep limit+1 names to know whether another page follows.
	h := &nameHeap{}
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if n <= cursor && cursor != "" {
				continue
			}
			if h.Len() <= limit {
				heap.Push(h, n)
			} else if n < (*h)[0] {
				(*h)[0] = n
				heap.Fix(h, 0)
			}
		}
		if err == io.EOF || len(names) == 0 {
			break
		}
		if err != nil {
			a.fail(w, r, fileError(err, raw))
			return
		}
	}
	names := make([]string, h.Len())
	for i := len(names) - 1; i >= 0; i-- {
		names[i] = heap.Pop(h).(string)
	}
	out := apitype.FileList{Path: p, Entries: []apitype.FileInfo{}}
	if len(names) > limit {
		names = names[:limit]
		out.NextCursor = names[limit-1]
	}
	for _, n := range names {
		fi, err := d.lstat(n)
		if err != nil {
			continue // removed while listing
		}
		out.Entries = append(out.Entries, apitype.FileInfo{
			Name: n, Path: path.Join(p, n), Type: fileType(fi.Mode()), Size: fi.Size(),
			Mode: fi.Mode().String(), ModifiedAt: fi.ModTime().UTC(),
		})
	}
	wire.Encode(w, http.StatusOK, out)
}

// openRegular opens p for reading only if it is a regular file. Its last
// component is checked with fstatat and opened with O_NOFOLLOW relative to
// the directory it was found in, and the type is checked again on the
// open descriptor, so a file swapped in between cannot slip through, and
// O_NONBLOCK keeps a FIFO from blocking the open. A name that becomes a
// link between the look-up and the open is looked up again, a few times,
// then refused as path_changed.
func (a *Agent) openRegular(ws *wsRoot, raw, p string) (*os.File, fs.FileInfo, error) {
	for range maxRetries {
		d, name, err := ws.lookup(p, true)
		if err != nil {
			return nil, nil, fileError(err, raw)
		}
		f, fi, err := openRegularAt(d, name, raw)
		d.Close()
		if !errors.Is(err, errIsLink) {
			return f, fi, err
		}
	}
	return nil, nil, fileError(errChanged, raw)
}

// openRegularAt is openRegular on name in d; errIsLink when name is a
// link (it changed since it was followed).
func openRegularAt(d *dir, name, raw string) (*os.File, fs.FileInfo, error) {
	fi, err := d.lstat(name)
	switch {
	case err != nil:
		return nil, nil, fileError(err, raw)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, nil, errIsLink
	case fi.IsDir():
		return nil, nil, errcode.IsDirectory.New("%q is a directory", raw)
	case !fi.Mode().IsRegular():
		return nil, nil, errcode.NotRegularFile.New("%q is not a regular file", raw)
	}
	f, err := d.openRead(name)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, errIsLink
	}
	if err != nil {
		return nil, nil, fileError(err, raw)
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errcode.NotRegularFile.New("%q is not a regular file", raw)
	}
	return f, fi, nil
}

func (a *Agent) handleReadFile(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ws, err := a.workspace()
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer ws.Close()
	f, fi, err := a.openRegular(ws, raw, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer f.Close()
	if fi.Size() > a.cfg.MaxDownload {
		a.fail(w, r, errcode.FileTooLarge.New("%q is %d bytes, more than the download limit of %d", raw, fi.Size(), a.cfg.MaxDownload))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.Header().Set("Last-Modified", fi.ModTime().UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
	// Stream at most the size we announced, even if the file grows.
	_, _ = io.Copy(w, io.LimitReader(f, fi.Size()))
}

// handleWriteFile stores the request body at path: into a temporary file in
// the same directory, then renamed over the target, both relative to that
// directory's descriptor, so readers never see a partial file, a failed
// upload leaves nothing behind, and a swap of a parent for a link cannot
// move the write elsewhere. The final component is never followed:
// writing onto a symbolic link is refused.
func (a *Agent) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if p == "." {
		a.fail(w, r, errcode.WorkspaceRoot.New("cannot write the workspace itself"))
		return
	}
	mode := fs.FileMode(0o644)
	if s := r.URL.Query().Get("mode"); s != "" {
		m, err := strconv.ParseUint(s, 8, 32)
		if err != nil || m > 0o7777 {
			a.fail(w, r, errcode.QueryInvalid.New("mode must be octal permission bits, like 644"))
			return
		}
		mode = fs.FileMode(m) & fs.ModePerm // never setuid, setgid or sticky
	}
	if r.ContentLength > a.cfg.MaxUpload {
		a.fail(w, r, errcode.FileTooLarge.New("upload is %d bytes, more than the limit of %d", r.ContentLength, a.cfg.MaxUpload))
		return
	}
	ws, err := a.workspace()
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer ws.Close()
	d, err := ws.mkdirAll(path.Dir(p), 0o755)
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer d.Close()
	name := path.Base(p)
	if err := writableAt(ws, d, name, raw, p); err != nil {
		a.fail(w, r, err)
		return
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".berth-upload-" + hex.EncodeToString(rnd[:])
	f, err := d.create(tmp, mode)
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxUpload)
	n, err := io.Copy(f, body)
	if err == nil {
		err = f.Chmod(mode) // umask must not decide the mode
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rename(d, tmp, d, name, false)
	}
	if err != nil {
		_ = d.remove(tmp)
		// Read the rest of the body (it is capped) so that the client,
		// still sending, gets this answer rather than a broken pipe.
		_, _ = io.Copy(io.Discard, body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = errcode.FileTooLarge.New("upload is larger than the limit of %d bytes", a.cfg.MaxUpload)
		}
		a.fail(w, r, fileError(err, raw))
		return
	}
	wire.Encode(w, http.StatusOK, apitype.FileInfo{
		Name: name, Path: p, Type: "file", Size: n,
		Mode: fi.Mode().String(), ModifiedAt: fi.ModTime().UTC(),
	})
}

// writableAt refuses an upload onto name in d unless it is missing or a
// regular file. A link is refused as path_escapes_workspace when it leads
// out and path_is_symlink otherwise.
func writableAt(ws *wsRoot, d *dir, name, raw, p string) error {
	fi, err := d.lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fileError(err, raw)
	case fi.Mode()&fs.ModeSymlink != 0:
		td, _, lerr := ws.lookup(p, true)
		if lerr == nil {
			td.Close()
		} else if errors.Is(lerr, errEscapes) {
			return fileError(lerr, raw)
		}
		return errcode.PathIsSymlink.New("%q is a symbolic link; write to its target instead", raw)
	case fi.IsDir():
		return errcode.IsDirectory.New("%q is a directory", raw)
	case !fi.Mode().IsRegular():
		return errcode.NotRegularFile.New("%q is not a regular file", raw)
	}
	return nil
}

func (a *Agent) handleMkdir(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.MkdirRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.workspacePath(req.Path)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ws, err := a.workspace()
	if err != nil {
		a.fail(w, r, fileError(err, req.Path))
		return
	}
	defer ws.Close()
	d, err := ws.mkdirAll(p, 0o755)
	if errors.Is(err, syscall.ENOTDIR) && existsNotDir(ws, p) {
		err = errcode.FileExists.New("%q already exists and is not a directory", req.Path)
	}
	if err != nil {
		a.fail(w, r, fileError(err, req.Path))
		return
	}
	defer d.Close()
	fi, err := d.stat(path.Base(p))
	if err != nil {
		a.fail(w, r, fileError(err, req.Path))
		return
	}
	wire.Encode(w, http.StatusOK, apitype.FileInfo{
		Name: path.Base(p), Path: p, Type: fileType(fi.Mode()), Mode: fi.Mode().String(), ModifiedAt: fi.ModTime().UTC(),
	})
}

// existsNotDir reports whether p's last component (followed) exists and
// is not a directory: then making p is file_exists, not not_directory.
func existsNotDir(ws *wsRoot, p string) bool {
	d, name, err := ws.lookup(p, true)
	if err != nil {
		return false
	}
	defer d.Close()
	fi, err := d.lstat(name)
	return err == nil && !fi.IsDir()
}

func (a *Agent) handleMove(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.MoveRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	from, err := a.workspacePath(req.From)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	to, err := a.workspacePath(req.To)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if from == "." || to == "." {
		a.fail(w, r, errcode.WorkspaceRoot.New("cannot move the workspace itself"))
		return
	}
	// rename(2) would refuse with EINVAL; refusing first also keeps
	// mkdirAll below from creating directories inside the source.
	if strings.HasPrefix(to, from+"/") {
		a.fail(w, r, errcode.PathInvalid.New("cannot move %q into itself", req.From))
		return
	}
	ws, err := a.workspace()
	if err != nil {
		a.fail(w, r, fileError(err, req.From))
		return
	}
	defer ws.Close()
	fd, fromName, err := ws.lookup(from, false)
	if err != nil {
		a.fail(w, r, fileError(err, req.From))
		return
	}
	defer fd.Close()
	ffi, err := fd.lstat(fromName)
	if err != nil {
		a.fail(w, r, fileError(err, req.From))
		return
	}
	td, err := ws.mkdirAll(path.Dir(to), 0o755)
	if err != nil {
		a.fail(w, r, fileError(err, req.To))
		return
	}
	defer td.Close()
	toName := path.Base(to)
	tfi, err := td.lstat(toName)
	switch {
	case err == nil && !req.Overwrite:
		a.fail(w, r, errcode.FileExists.New("%q already exists (set overwrite to replace it)", req.To))
		return
	case err == nil && tfi.IsDir() && !os.SameFile(tfi, ffi):
		// As os.Rename: a directory is never replaced, even empty.
		a.fail(w, r, errcode.FileExists.New("%q is an existing directory", req.To))
		return
	}
	if err := rename(fd, fromName, td, toName, !req.Overwrite); err != nil {
		if errors.Is(err, syscall.EINVAL) { // into itself, through a symbolic link
			err = errcode.PathInvalid.New("cannot move %q into itself", req.From)
		}
		a.fail(w, r, fileError(err, req.To))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Agent) handleRemove(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if p == "." {
		a.fail(w, r, errcode.WorkspaceRoot.New("cannot remove the workspace itself"))
		return
	}
	ws, err := a.workspace()
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer ws.Close()
	d, name, err := ws.lookup(p, false)
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer d.Close()
	if _, err := d.lstat(name); err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	if r.URL.Query().Get("recursive") == "true" {
		err = d.removeAll(name)
	} else {
		err = d.remove(name)
	}
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
