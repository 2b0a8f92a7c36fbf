package browser

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// ArtifactLimits bound what a session keeps: its artifacts (downloads and
// traces share one count and one byte budget) and each trace. Zero
// values take the defaults.
type ArtifactLimits struct {
	MaxFiles int
	MaxBytes int64
	// TraceMaxBytes bounds a trace's raw CDP data (and the browser's trace
	// buffer); TraceMaxDuration is how long a trace may run. A trace past
	// either is discarded whole.
	TraceMaxBytes    int64
	TraceMaxDuration time.Duration
}

// Defaults of ArtifactLimits, and the most downloadRead answers inline.
const (
	DefaultArtifactFiles    = 16
	DefaultArtifactBytes    = 128 << 20
	DefaultTraceBytes       = 64 << 20
	DefaultTraceDuration    = 60 * time.Second
	maxInlineArtifact       = 32 << 20
	artifactPrefix          = "art_"
	artifactMimeOctetStream = "application/octet-stream"
)

func (l ArtifactLimits) withDefaults() ArtifactLimits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultArtifactFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultArtifactBytes
	}
	if l.TraceMaxBytes <= 0 {
		l.TraceMaxBytes = DefaultTraceBytes
	}
	if l.TraceMaxDuration <= 0 {
		l.TraceMaxDuration = DefaultTraceDuration
	}
	return l
}

// artifacts are the files a session keeps until it closes.
type artifacts struct {
	// mu guards the fields below. It is taken alone, never with the
	// session's mu.
	mu     sync.Mutex
	items  []*artifact // oldest first
	closed bool        // the session closed: no more artifacts
}

// artifact is one kept file. The file is the session's (under its files-
// directory) and goes when the artifact is deleted or the session closes.
type artifact struct {
	apitype.BrowserArtifact
	tenant string
	path   string
}

// limits are the session's artifact limits.
func (s *Session) limits() ArtifactLimits { return s.m.cfg.Artifacts.withDefaults() }

// filesDir is the session's directory of uploads, downloads and traces,
// removed when it closes.
func (s *Session) filesDir() string { return filepath.Join(s.m.cfg.DataDir, "files-"+s.id) }

// roomForArtifact reports artifact_limit if the session keeps as many
// artifacts as it may, or if size more bytes would not fit.
func (s *Session) roomForArtifact(size int64) error {
	l := s.limits()
	s.arts.mu.Lock()
	defer s.arts.mu.Unlock()
	return s.arts.room(l, size)
}

// room is roomForArtifact with mu held.
func (a *artifacts) room(l ArtifactLimits, size int64) error {
	var used int64
	for _, it := range a.items {
		used += it.Size
	}
	switch {
	case len(a.items) >= l.MaxFiles:
		return errcode.ArtifactLimit.New("the session keeps %d artifacts, the most it may; delete one with downloadDelete", len(a.items))
	case used+size > l.MaxBytes:
		return errcode.ArtifactLimit.New("the session's artifacts would be %d bytes, more than its %d; delete some with downloadDelete", used+size, l.MaxBytes)
	}
	return nil
}

// addArtifact keeps the file at path as an artifact of kind. Over the
// session's budget (or once it closed) the file is removed and nothing is
// kept.
func (s *Session) addArtifact(kind, filename, path string) (apitype.BrowserArtifact, error) {
	sum, size, err := hashFile(path)
	if err != nil {
		_ = os.Remove(path)
		return apitype.BrowserArtifact{}, err
	}
	mt := mime.TypeByExtension(filepath.Ext(filename))
	if mt == "" {
		mt = artifactMimeOctetStream
	}
	it := &artifact{BrowserArtifact: apitype.BrowserArtifact{ID: ident.New(artifactPrefix), Kind: kind, Filename: filename,
		MimeType: mt, Size: size, SHA256: sum, CreatedAt: time.Now().UTC()}, tenant: s.tenant, path: path}
	l := s.limits()
	s.arts.mu.Lock()
	defer s.arts.mu.Unlock()
	if s.arts.closed {
		_ = os.Remove(path)
		return apitype.BrowserArtifact{}, errcode.SessionClosed.New("browser session %s is closed", s.id)
	}
	if err := s.arts.room(l, size); err != nil {
		_ = os.Remove(path)
		return apitype.BrowserArtifact{}, err
	}
	s.arts.items = append(s.arts.items, it)
	return it.BrowserArtifact, nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// artifactList answers downloadRead without an artifact_id.
func (s *Session) artifactList() apitype.BrowserArtifactList {
	l := s.limits()
	s.arts.mu.Lock()
	defer s.arts.mu.Unlock()
	out := apitype.BrowserArtifactList{Artifacts: []apitype.BrowserArtifact{}, MaxFiles: l.MaxFiles, MaxBytes: l.MaxBytes}
	for _, it := range s.arts.items {
		out.Artifacts = append(out.Artifacts, it.BrowserArtifact)
		out.Bytes += it.Size
	}
	out.Files = len(out.Artifacts)
	return out
}

// find returns the artifact id, or artifact_not_found. Call with mu held.
func (a *artifacts) find(id string) (int, *artifact, error) {
	for i, it := range a.items {
		if it.ID == id {
			return i, it, nil
		}
	}
	return 0, nil, errcode.ArtifactNotFound.New("artifact %q not found in this session", id)
}

// openArtifact opens an artifact's file. The file stays readable until it
// is closed, even if the artifact is deleted meanwhile.
func (s *Session) openArtifact(id string) (*os.File, apitype.BrowserArtifact, error) {
	s.arts.mu.Lock()
	defer s.arts.mu.Unlock()
	_, it, err := s.arts.find(id)
	if err != nil {
		return nil, apitype.BrowserArtifact{}, err
	}
	f, err := os.Open(it.path)
	if err != nil {
		return nil, apitype.BrowserArtifact{}, err
	}
	return f, it.BrowserArtifact, nil
}

// downloadRead lists the session's artifacts, or answers one of them
// inline (base64, up to maxInlineArtifact bytes; larger ones are read
// with GET .../artifacts/{artifact}).
func (s *Session) downloadRead(a apitype.BrowserAction) (any, error) {
	if a.ArtifactID == "" {
		return s.artifactList(), nil
	}
	f, meta, err := s.openArtifact(a.ArtifactID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if meta.Size > maxInlineArtifact {
		return nil, errcode.ResultTooLarge.New("artifact %s is %d bytes, more than the %d downloadRead answers inline; GET /v1/browser/sessions/%s/artifacts/%s reads it",
			meta.ID, meta.Size, maxInlineArtifact, s.id, meta.ID)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxInlineArtifact+1))
	if err != nil {
		return nil, err
	}
	return apitype.BrowserArtifactContent{BrowserArtifact: meta, Base64: base64.StdEncoding.EncodeToString(b)}, nil
}

// downloadDelete deletes an artifact and its file.
func (s *Session) downloadDelete(a apitype.BrowserAction) (any, error) {
	if a.ArtifactID == "" {
		return nil, errcode.InvalidFields(map[string]string{"artifact_id": "is required"})
	}
	s.arts.mu.Lock()
	i, it, err := s.arts.find(a.ArtifactID)
	if err == nil {
		s.arts.items = append(s.arts.items[:i], s.arts.items[i+1:]...)
	}
	s.arts.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := os.Remove(it.path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("deleting artifact %s: %w", it.ID, err)
	}
	return map[string]any{"deleted": it.ID}, nil
}

// closeArtifacts forgets the artifacts of a closing session (close
// removes their files with its files- directory) and refuses new ones.
func (s *Session) closeArtifacts() {
	s.arts.mu.Lock()
	defer s.arts.mu.Unlock()
	s.arts.closed = true
	s.arts.items = nil
}

// OpenArtifact opens artifact artifactID of session id for reading; the
// caller closes the file. Errors: session_not_found, artifact_not_found.
func (m *Manager) OpenArtifact(id, artifactID string) (*os.File, apitype.BrowserArtifact, error) {
	s, err := m.Get(id)
	if err != nil {
		return nil, apitype.BrowserArtifact{}, err
	}
	return s.openArtifact(artifactID)
}
