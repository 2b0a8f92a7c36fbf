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
	// os.Root reports escapes (through "..", absolute or relative symlinks)
	// with an unexported error; its text is the only handle.
	case strings.Contains(err.Error(), "path escapes from parent"):
		return errcode.WithReason(errcode.Invalid, ReasonPathEscapes, "path %q resolves outside the workspace", p)
	case errors.Is(err, fs.ErrNotExist):
		return errcode.WithReason(errcode.NotFound, "file_not_found", "%q does not exist", p)
	// Before fs.ErrExist, which ENOTEMPTY also matches.
	case errors.Is(err, syscall.ENOTEMPTY):
		return errcode.WithReason(errcode.Conflict, ReasonNotEmpty, "directory %q is not empty (use recursive=true)", p)
	case errors.Is(err, fs.ErrExist):
		return errcode.WithReason(errcode.Conflict, ReasonExists, "%q already exists", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errcode.WithReason(errcode.Invalid, ReasonNotDirectory, "a parent of %q is not a directory", p)
	case errors.Is(err, syscall.EISDIR):
		return errcode.WithReason(errcode.Invalid, ReasonIsDirectory, "%q is a directory", p)
	case errors.Is(err, syscall.ELOOP):
		return errcode.WithReason(errcode.Invalid, ReasonIsSymlink, "%q is a symbolic link loop or not allowed", p)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return errcode.WithReason(errcode.Invalid, ReasonPathTooLong, "path %q is too long", p)
	case errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.ENODEV):
		return errcode.WithReason(errcode.Invalid, ReasonNotRegular, "%q is not a regular file", p)
	case errors.Is(err, fs.ErrPermission):
		return errcode.WithReason(errcode.PermissionDenied, "file_permission", "permission denied on %q", p)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errcode.WithReason(errcode.ResourceExhausted, "disk_full", "no space left in the workspace")
	}
	return err
}

// queryPath reads and cleans the "path" query parameter.
func (a *Agent) queryPath(r *http.Request, dflt string, follow bool) (string, string, error) {
	raw := r.URL.Query().Get("path")
	if raw == "" && dflt != "" {
		raw = dflt
	}
	clean, err := a.cleanPath(raw, follow)
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
// whatever the directory's size.
func (a *Agent) handleListFiles(w http.ResponseWriter, r *http.Request) {
	raw, dir, err := a.queryPath(r, ".", true)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit := DefaultListLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			a.fail(w, r, errcode.WithReason(errcode.Invalid, "query_invalid", "limit must be a positive integer"))
			return
		}
		limit = min(n, MaxListLimit)
	}
	cursor := r.URL.Query().Get("cursor")
	// O_DIRECTORY makes the kernel refuse anything else before opening
	// it, so listing a FIFO cannot block and listing a device never
	// reaches its driver.
	f, err := a.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		err = errcode.WithReason(errcode.Invalid, ReasonNotDirectory, "%q is not a directory", raw)
	}
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	} else if !fi.IsDir() {
		a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonNotDirectory, "%q is not a directory", raw))
		return
	}
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
	out := apitype.FileList{Path: dir, Entries: []apitype.FileInfo{}}
	if len(names) > limit {
		names = names[:limit]
		out.NextCursor = names[limit-1]
	}
	for _, n := range names {
		p := path.Join(dir, n)
		fi, err := a.root.Lstat(p)
		if err != nil {
			continue // removed while listing
		}
		out.Entries = append(out.Entries, apitype.FileInfo{
			Name: n, Path: p, Type: fileType(fi.Mode()), Size: fi.Size(),
			Mode: fi.Mode().String(), ModifiedAt: fi.ModTime().UTC(),
		})
	}
	wire.Encode(w, http.StatusOK, out)
}

// openRegular opens p for reading only if it is a regular file. The type
// is checked on the open descriptor, so a file swapped in between cannot
// slip through, and O_NONBLOCK keeps a FIFO from blocking the open.
func (a *Agent) openRegular(raw, p string) (*os.File, fs.FileInfo, error) {
	fi, err := a.root.Stat(p)
	if err != nil {
		return nil, nil, fileError(err, raw)
	}
	if !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return nil, nil, errcode.WithReason(errcode.Invalid, ReasonIsDirectory, "%q is a directory", raw)
		}
		return nil, nil, errcode.WithReason(errcode.Invalid, ReasonNotRegular, "%q is not a regular file", raw)
	}
	f, err := a.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fileError(err, raw)
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errcode.WithReason(errcode.Invalid, ReasonNotRegular, "%q is not a regular file", raw)
	}
	return f, fi, nil
}

func (a *Agent) handleReadFile(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, "", true)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f, fi, err := a.openRegular(raw, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer f.Close()
	if fi.Size() > a.cfg.MaxDownload {
		a.fail(w, r, errcode.WithReason(errcode.PayloadTooLarge, ReasonFileTooLarge,
			"%q is %d bytes, more than the download limit of %d", raw, fi.Size(), a.cfg.MaxDownload))
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
// the same directory, then renamed over the target, so readers never see a
// partial file and a failed upload leaves nothing behind. The final
// component is never followed: writing onto a symbolic link is refused.
func (a *Agent) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, "", false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if p == "." {
		a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonWorkspaceOp, "cannot write the workspace itself"))
		return
	}
	mode := fs.FileMode(0o644)
	if s := r.URL.Query().Get("mode"); s != "" {
		m, err := strconv.ParseUint(s, 8, 32)
		if err != nil || m > 0o7777 {
			a.fail(w, r, errcode.WithReason(errcode.Invalid, "query_invalid", "mode must be octal permission bits, like 644"))
			return
		}
		mode = fs.FileMode(m) & fs.ModePerm // never setuid, setgid or sticky
	}
	if r.ContentLength > a.cfg.MaxUpload {
		a.fail(w, r, errcode.WithReason(errcode.PayloadTooLarge, ReasonFileTooLarge,
			"upload is %d bytes, more than the limit of %d", r.ContentLength, a.cfg.MaxUpload))
		return
	}
	if fi, err := a.root.Lstat(p); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if _, serr := a.root.Stat(p); serr != nil && errcode.ReasonOf(fileError(serr, raw)) == ReasonPathEscapes {
				a.fail(w, r, fileError(serr, raw))
				return
			}
			a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonIsSymlink, "%q is a symbolic link; write to its target instead", raw))
			return
		case fi.IsDir():
			a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonIsDirectory, "%q is a directory", raw))
			return
		case !fi.Mode().IsRegular():
			a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonNotRegular, "%q is not a regular file", raw))
			return
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		a.fail(w, r, fileError(err, raw))
		return
	}
	dir := path.Dir(p)
	if err := a.root.MkdirAll(dir, 0o755); err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".berth-upload-"+hex.EncodeToString(rnd[:]))
	f, err := a.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxUpload)
	n, err := io.Copy(f, body)
	if err == nil {
		err = f.Chmod(mode) // umask must not decide the mode
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = a.root.Rename(tmp, p)
	}
	if err != nil {
		_ = a.root.Remove(tmp)
		// Read the rest of the body (it is capped) so that the client,
		// still sending, gets this answer rather than a broken pipe.
		_, _ = io.Copy(io.Discard, body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = errcode.WithReason(errcode.PayloadTooLarge, ReasonFileTooLarge, "upload is larger than the limit of %d bytes", a.cfg.MaxUpload)
		}
		a.fail(w, r, fileError(err, raw))
		return
	}
	fi, err := a.root.Lstat(p)
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	wire.Encode(w, http.StatusOK, apitype.FileInfo{
		Name: path.Base(p), Path: p, Type: "file", Size: n,
		Mode: fi.Mode().String(), ModifiedAt: fi.ModTime().UTC(),
	})
}

func (a *Agent) handleMkdir(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.MkdirRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.cleanPath(req.Path, true)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.root.MkdirAll(p, 0o755); err != nil {
		a.fail(w, r, fileError(err, req.Path))
		return
	}
	fi, err := a.root.Stat(p)
	if err != nil {
		a.fail(w, r, fileError(err, req.Path))
		return
	}
	wire.Encode(w, http.StatusOK, apitype.FileInfo{
		Name: path.Base(p), Path: p, Type: fileType(fi.Mode()), Mode: fi.Mode().String(), ModifiedAt: fi.ModTime().UTC(),
	})
}

func (a *Agent) handleMove(w http.ResponseWriter, r *http.Request) {
	req, err := wire.Decode[apitype.MoveRequest](w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	from, err := a.cleanPath(req.From, false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	to, err := a.cleanPath(req.To, false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if from == "." || to == "." {
		a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonWorkspaceOp, "cannot move the workspace itself"))
		return
	}
	// rename(2) would refuse with EINVAL; refusing first also keeps
	// MkdirAll below from creating directories inside the source.
	if strings.HasPrefix(to, from+"/") {
		a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonPathInvalid, "cannot move %q into itself", req.From))
		return
	}
	if _, err := a.root.Lstat(from); err != nil {
		a.fail(w, r, fileError(err, req.From))
		return
	}
	if !req.Overwrite {
		if _, err := a.root.Lstat(to); err == nil {
			a.fail(w, r, errcode.WithReason(errcode.Conflict, ReasonExists, "%q already exists (set overwrite to replace it)", req.To))
			return
		}
	}
	if err := a.root.MkdirAll(path.Dir(to), 0o755); err != nil {
		a.fail(w, r, fileError(err, req.To))
		return
	}
	if err := a.root.Rename(from, to); err != nil {
		if errors.Is(err, syscall.EINVAL) { // into itself, through a symbolic link
			err = errcode.WithReason(errcode.Invalid, ReasonPathInvalid, "cannot move %q into itself", req.From)
		}
		a.fail(w, r, fileError(err, req.To))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Agent) handleRemove(w http.ResponseWriter, r *http.Request) {
	raw, p, err := a.queryPath(r, "", false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if p == "." {
		a.fail(w, r, errcode.WithReason(errcode.Invalid, ReasonWorkspaceOp, "cannot remove the workspace itself"))
		return
	}
	if _, err := a.root.Lstat(p); err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	if r.URL.Query().Get("recursive") == "true" {
		err = a.root.RemoveAll(p)
	} else {
		err = a.root.Remove(p)
	}
	if err != nil {
		a.fail(w, r, fileError(err, raw))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
