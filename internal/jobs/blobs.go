package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Blobs stores files by the SHA-256 of their content under a directory:
// <dir>/<first two hex digits>/<sha256>. A file is written to a temporary
// name, synced and renamed into place, so a crash never leaves a partial
// file under a real name.
//
// In a cluster the content is in the shared database too (Contents), and
// the directory is this node's cache of it: a node that lacks a file reads
// it from the database into the directory.
type Blobs struct {
	dir    string
	store  Store
	shared Contents // nil: the directory is the only copy
}

// Contents keeps blob contents where every node of a cluster reads them.
type Contents interface {
	// PutBlobContent stores all of r as blob sha's content, or nothing.
	PutBlobContent(ctx context.Context, sha string, r io.Reader) error
	// OpenBlobContent reads it back; none stored is FileNotFound.
	OpenBlobContent(ctx context.Context, sha string) (io.ReadCloser, error)
}

// NewBlobs returns the blob store in dir; shared (optional) holds the
// contents a cluster's nodes share.
func NewBlobs(dir string, store Store, shared Contents) (*Blobs, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	return &Blobs{dir: dir, store: store, shared: shared}, nil
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidSHA reports whether s is a lower-case hex SHA-256.
func ValidSHA(s string) bool { return shaRE.MatchString(s) }

// Path is where the blob sha lives.
func (b *Blobs) Path(sha string) string { return filepath.Join(b.dir, sha[:2], sha) }

// Put stores what r yields, at most limit bytes, and returns its
// reference. name (optional) helps tell its MIME type.
func (b *Blobs) Put(ctx context.Context, r io.Reader, limit int64, name string) (apitype.FileRef, error) {
	tmp, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "put-*")
	if err != nil {
		return apitype.FileRef{}, err
	}
	defer func() {
		tmp.Close()
		_ = os.Remove(tmp.Name()) // gone already after a rename
	}()
	h := sha256.New()
	var head headBuffer
	n, err := io.Copy(io.MultiWriter(tmp, h, &head), io.LimitReader(r, limit+1))
	if err != nil {
		return apitype.FileRef{}, errcode.Wrap(errcode.Invalid, err, "reading the file failed")
	}
	if n > limit {
		return apitype.FileRef{}, errcode.FileTooLarge.New("the file is larger than %d bytes", limit)
	}
	if err := tmp.Sync(); err != nil {
		return apitype.FileRef{}, err
	}
	sha := hex.EncodeToString(h.Sum(nil))
	ref := apitype.FileRef{Name: name, SHA256: sha, Size: n, MIME: DetectMIME(name, head.b)}
	final := b.Path(sha)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return apitype.FileRef{}, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return apitype.FileRef{}, err
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return apitype.FileRef{}, err
	}
	if b.shared != nil {
		f, err := os.Open(final)
		if err != nil {
			return apitype.FileRef{}, err
		}
		err = b.shared.PutBlobContent(ctx, sha, f)
		f.Close()
		if err != nil {
			return apitype.FileRef{}, fmt.Errorf("storing file %s in the cluster's database: %w", sha, err)
		}
	}
	if err := b.store.PutBlob(ctx, Blob{SHA256: sha, Size: n, MIME: ref.MIME, CreatedAt: time.Now().UTC()}); err != nil {
		return apitype.FileRef{}, err
	}
	return ref, nil
}

// Ref returns the reference of a stored blob; a blob whose record or
// file is missing is NotFound.
func (b *Blobs) Ref(ctx context.Context, sha string) (apitype.FileRef, error) {
	if !ValidSHA(sha) {
		return apitype.FileRef{}, errcode.InvalidSHA256.New("%q is not a lower-case hex SHA-256", sha)
	}
	rec, err := b.store.GetBlob(ctx, sha)
	if err != nil {
		return apitype.FileRef{}, err
	}
	if _, err := os.Stat(b.Path(sha)); err != nil && b.shared == nil {
		return apitype.FileRef{}, errcode.FileNotFound.New("file %s is gone", sha)
	}
	return apitype.FileRef{SHA256: sha, Size: rec.Size, MIME: rec.MIME}, nil
}

// Open opens a stored blob; in a cluster, one this node lacks is copied
// from the shared database first.
func (b *Blobs) Open(ctx context.Context, sha string) (*os.File, error) {
	if !ValidSHA(sha) {
		return nil, errcode.InvalidSHA256.New("%q is not a lower-case hex SHA-256", sha)
	}
	f, err := os.Open(b.Path(sha))
	if errors.Is(err, fs.ErrNotExist) && b.shared != nil {
		if err = b.fetch(ctx, sha); err == nil {
			f, err = os.Open(b.Path(sha))
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errcode.FileNotFound.New("file %s not found", sha)
	}
	return f, err
}

// fetch copies blob sha from the shared database into the directory,
// checking its SHA-256 on the way: written to a temporary name and renamed,
// like Put, so a reader never sees part of it.
func (b *Blobs) fetch(ctx context.Context, sha string) error {
	rc, err := b.shared.OpenBlobContent(ctx, sha)
	if errcode.Is(err, errcode.NotFound) {
		return fs.ErrNotExist
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Join(b.dir, "tmp"), "fetch-*")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), rc); err != nil {
		return fmt.Errorf("reading file %s from the cluster's database: %w", sha, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return fmt.Errorf("file %s read from the cluster's database has SHA-256 %s", sha, got)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.Path(sha)), 0o700); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), b.Path(sha))
}

// evict removes cached copies of shared blobs not used for olderThan (the
// database keeps them; a node reads one again when it needs it).
func (b *Blobs) evict(olderThan time.Duration) {
	if b.shared == nil {
		return
	}
	dirs, _ := os.ReadDir(b.dir)
	for _, d := range dirs {
		if !d.IsDir() || len(d.Name()) != 2 {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(b.dir, d.Name()))
		for _, e := range entries {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > olderThan {
				_ = os.Remove(filepath.Join(b.dir, d.Name(), e.Name()))
			}
		}
	}
}

// remove deletes a blob's file (its record first: see Sweep).
func (b *Blobs) remove(sha string) error {
	err := os.Remove(b.Path(sha))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// clearTemp removes temporary files left by a crash.
func (b *Blobs) clearTemp(olderThan time.Duration) {
	entries, _ := os.ReadDir(filepath.Join(b.dir, "tmp"))
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > olderThan {
			_ = os.Remove(filepath.Join(b.dir, "tmp", e.Name()))
		}
	}
}

// headBuffer keeps the first 512 bytes written to it, for sniffing.
type headBuffer struct{ b []byte }

func (h *headBuffer) Write(p []byte) (int, error) {
	if n := 512 - len(h.b); n > 0 {
		h.b = append(h.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

// officeTypes are the MIME types of the extensions Go's table may not know.
var officeTypes = map[string]string{
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".doc":  "application/msword",
	".xls":  "application/vnd.ms-excel",
	".ppt":  "application/vnd.ms-powerpoint",
	".odt":  "application/vnd.oasis.opendocument.text",
	".ods":  "application/vnd.oasis.opendocument.spreadsheet",
	".odp":  "application/vnd.oasis.opendocument.presentation",
	".rtf":  "application/rtf",
	".md":   "text/markdown; charset=utf-8",
	".csv":  "text/csv; charset=utf-8",
}

// DetectMIME tells a file's MIME type by its name's extension, else by
// its first bytes.
func DetectMIME(name string, head []byte) string {
	ext := strings.ToLower(filepath.Ext(name))
	if t, ok := officeTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" && ext != "" {
		return t
	}
	return http.DetectContentType(head)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
