package browser

// Recordings: a session's viewport captured as PNG frames, at the start
// and then every interval, whether anyone watches or not. A recording is a
// sequence of stills, not a video or an audit of every action.
//
// Layout on disk, under <data>/browser/recordings/<rec_id>/:
//
//	meta.json   the recording's metadata (never its PNGs), replaced
//	            atomically (a temporary file, then rename)
//	000000.png  the frames, by index; a frame's file is written (and
//	            synced) before meta.json names it
//
// The Manager loads every recording at Start: one a daemon left recording
// is stopped (daemon_restart), one past its TTL is deleted, and temporary
// files and frames meta.json does not name are removed.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// RecordingConfig bounds the recordings of a daemon. Zero values take the
// defaults.
type RecordingConfig struct {
	// Interval is the time between captures of a recording that asks for
	// none (default 5s).
	Interval time.Duration
	// MaxFrames is the most frames of one recording (default 120):
	// reaching it stops the recording (frame_limit).
	MaxFrames int
	// MaxRecordings is the most recordings kept, stopped ones included
	// (default 16): starting another is refused (recording_limit).
	MaxRecordings int
	// MaxBytes is the most PNG bytes of every recording together (default
	// 64 MiB): a frame that would pass it stops its recording
	// (byte_limit), and starting one at the limit is refused.
	MaxBytes int64
	// TTL is how long a stopped recording is kept (default 7 days).
	TTL time.Duration
	// FFmpeg is the ffmpeg binary of MP4 exports ("" finds it on PATH).
	FFmpeg string
}

// Defaults and bounds of recordings.
const (
	DefaultRecordingInterval  = 5 * time.Second
	DefaultMaxRecordingFrames = 120
	DefaultMaxRecordings      = 16
	DefaultMaxRecordingBytes  = 64 << 20
	DefaultRecordingTTL       = 7 * 24 * time.Hour
	MinRecordingInterval      = 100 * time.Millisecond
	MaxRecordingInterval      = time.Minute

	// captureTimeout bounds one screenshot.
	captureTimeout = 10 * time.Second
	// maxCaptureFailures consecutive failed captures stop a recording.
	maxCaptureFailures = 10
	// maxFrameBytes bounds one frame read back (a PNG of an 8192x8192
	// viewport stays far below it).
	maxFrameBytes = 64 << 20
	// exportTimeout bounds an MP4 encode.
	exportTimeout = 2 * time.Minute
	// maxMP4Bytes bounds an MP4 export (ffmpeg -fs).
	maxMP4Bytes = 512 << 20
	// sweepEvery is how often recordings past their TTL are deleted (or
	// a quarter of the TTL, when that is shorter).
	sweepEvery = time.Minute
)

// WithDefaults returns c with its zero values set to the defaults.
func (c RecordingConfig) WithDefaults() RecordingConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultRecordingInterval
	}
	if c.MaxFrames <= 0 {
		c.MaxFrames = DefaultMaxRecordingFrames
	}
	if c.MaxRecordings <= 0 {
		c.MaxRecordings = DefaultMaxRecordings
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxRecordingBytes
	}
	if c.TTL <= 0 {
		c.TTL = DefaultRecordingTTL
	}
	return c
}

// recordings are the Manager's recordings. The zero value is ready.
type recordings struct {
	// mu guards the fields below and every recording's meta, and
	// serialises writes of meta.json and frame files. Lock order: a
	// Session's mu is never held while taking it.
	mu        sync.Mutex
	byID      map[string]*recording
	bytes     int64 // PNG bytes of every recording
	lastSweep time.Time
}

// recording is one recording. Its capture goroutine, while active, is
// owned by whoever stops it: they cancel it and wait for done.
type recording struct {
	meta   recordingMeta
	dir    string
	cancel context.CancelFunc // active only
	done   chan struct{}      // closed when the capture goroutine has returned (nil: none ran)
	fails  int                // consecutive failed captures
}

// recordingMeta is meta.json.
type recordingMeta struct {
	ID         string                   `json:"id"`
	Tenant     string                   `json:"tenant"`
	SessionID  string                   `json:"session_id"`
	State      string                   `json:"state"`
	StoppedBy  string                   `json:"stopped_by,omitempty"`
	IntervalMS int64                    `json:"interval_ms"`
	CreatedAt  time.Time                `json:"created_at"`
	StoppedAt  time.Time                `json:"stopped_at,omitzero"`
	Skipped    int                      `json:"skipped"`
	Failed     int                      `json:"failed"`
	Frames     []apitype.RecordingFrame `json:"frames"`
}

func (m *Manager) recordingRoot() string { return filepath.Join(m.cfg.DataDir, "recordings") }

func frameName(i int) string { return fmt.Sprintf("%06d.png", i) }

// view renders r for the API. Call with recordings.mu held.
func (m *Manager) viewRecording(r *recording) apitype.BrowserRecording {
	out := apitype.BrowserRecording{ID: r.meta.ID, SessionID: r.meta.SessionID, State: r.meta.State, StoppedBy: r.meta.StoppedBy,
		IntervalMS: r.meta.IntervalMS, CreatedAt: r.meta.CreatedAt.UTC(), Skipped: r.meta.Skipped, Failed: r.meta.Failed,
		Frames: slices.Clone(r.meta.Frames)}
	if out.Frames == nil {
		out.Frames = []apitype.RecordingFrame{}
	}
	for _, f := range r.meta.Frames {
		out.Bytes += f.Bytes
	}
	if !r.meta.StoppedAt.IsZero() {
		at, exp := r.meta.StoppedAt.UTC(), r.meta.StoppedAt.Add(m.cfg.Recordings.TTL).UTC()
		out.StoppedAt, out.ExpiresAt = &at, &exp
	}
	return out
}

// writeMeta replaces r's meta.json. Call with recordings.mu held.
func (r *recording) writeMeta() error {
	b, err := json.MarshalIndent(r.meta, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(r.dir, "meta.json"), b)
}

// writeFileAtomic writes b to path through a synced temporary file and a
// rename: a reader (or a restart) sees the old file or the new, never half.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// StartRecording starts recording session sessionID: a frame now (unless
// an action holds the session), then one every interval until it is
// stopped, the session closes, or a limit is reached. It returns
// SessionNotFound for an unknown session, SessionCrashed or SessionClosed
// for one that cannot be captured, and RecordingLimit when MaxRecordings
// are kept or MaxBytes are stored.
func (m *Manager) StartRecording(ctx context.Context, sessionID string, req apitype.StartRecordingRequest) (apitype.BrowserRecording, error) {
	if p := req.Valid(); len(p) > 0 {
		return apitype.BrowserRecording{}, errcode.InvalidFields(p)
	}
	s, err := m.Get(sessionID)
	if err != nil {
		return apitype.BrowserRecording{}, err
	}
	if err := s.alive(); err != nil {
		return apitype.BrowserRecording{}, err
	}
	cfg := m.cfg.Recordings
	interval := cfg.Interval
	if req.IntervalMS > 0 {
		interval = time.Duration(req.IntervalMS) * time.Millisecond
	}
	r := &recording{meta: recordingMeta{ID: ident.New("rec_"), Tenant: s.Tenant(), SessionID: s.id, State: apitype.RecordingActive,
		IntervalMS: interval.Milliseconds(), CreatedAt: time.Now().UTC(), Frames: []apitype.RecordingFrame{}}}
	r.dir = filepath.Join(m.recordingRoot(), r.meta.ID)

	rs := &m.recs
	rs.mu.Lock()
	if rs.byID == nil {
		rs.byID = map[string]*recording{}
	}
	if n := len(rs.byID); n >= cfg.MaxRecordings {
		rs.mu.Unlock()
		return apitype.BrowserRecording{}, errcode.RecordingLimit.New("%d recordings are kept, the maximum (--max-recordings); delete one first", n)
	}
	if rs.bytes >= cfg.MaxBytes {
		rs.mu.Unlock()
		return apitype.BrowserRecording{}, errcode.RecordingLimit.New("recordings hold %d bytes of frames, the maximum (--max-recording-bytes); delete one first", rs.bytes)
	}
	err = os.MkdirAll(r.dir, 0o700)
	if err == nil {
		err = r.writeMeta()
	}
	if err != nil {
		rs.mu.Unlock()
		_ = os.RemoveAll(r.dir)
		return apitype.BrowserRecording{}, fmt.Errorf("creating recording %s: %w", r.meta.ID, err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	rs.byID[r.meta.ID] = r
	rs.mu.Unlock()

	m.captureFrame(cctx, r, s) // the first frame, now
	go func() {
		defer close(r.done)
		m.capture(cctx, r, s, interval)
	}()
	m.log.Info("browser recording started", "recording_id", r.meta.ID, "session_id", s.id, "interval", interval)
	return m.Recording(r.meta.ID)
}

// capture captures a frame an interval after the last one ended, until
// ctx ends: frames are at least an interval apart however long a capture
// (or its write) takes on a loaded machine, and never catch up in a burst.
func (m *Manager) capture(ctx context.Context, r *recording, s *Session, interval time.Duration) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.captureFrame(ctx, r, s)
			t.Reset(interval)
		}
	}
}

// captureFrame captures one frame of s into r, or counts it skipped when an
// action holds the session. It does not count as use of the session: a
// recording does not keep a session from its idle timeout.
func (m *Manager) captureFrame(ctx context.Context, r *recording, s *Session) {
	if s.State() != apitype.BrowserOpen {
		m.stopRecording(r, apitype.RecordingStoppedSessionEnded)
		return
	}
	release, ok := s.tryCapture()
	if !ok {
		m.recs.mu.Lock()
		r.meta.Skipped++
		m.recs.mu.Unlock()
		return
	}
	b, err := s.captureViewport(ctx)
	release()
	if ctx.Err() != nil {
		return // stopped under the capture
	}
	if err != nil {
		m.log.Debug("browser recording capture failed", "recording_id", r.meta.ID, "err", err)
		m.recs.mu.Lock()
		r.meta.Failed++
		r.fails++
		fails := r.fails
		m.recs.mu.Unlock()
		if fails >= maxCaptureFailures {
			m.stopRecording(r, apitype.RecordingStoppedFailed)
		}
		return
	}
	m.commitFrame(r, b)
}

// tryCapture takes the session for a capture if no action holds it, and
// returns the function that gives it back. An action arriving meanwhile
// waits for the capture (lockAction) instead of being refused busy.
func (s *Session) tryCapture() (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capturing != nil || !s.busy.TryLock() {
		return nil, false
	}
	ch := make(chan struct{})
	s.capturing = ch
	return func() {
		s.mu.Lock()
		s.capturing = nil
		s.busy.Unlock()
		s.mu.Unlock()
		close(ch)
	}, true
}

// lockAction takes busy for an action. A capture holding it is waited for
// (it is one screenshot); an action holding it is not: false.
func (s *Session) lockAction(ctx context.Context) bool {
	for {
		if s.busy.TryLock() {
			return true
		}
		// Captures take and give back busy under mu: with mu held, busy
		// held and no capture means an action holds it.
		s.mu.Lock()
		ch := s.capturing
		if ch == nil {
			ok := s.busy.TryLock()
			s.mu.Unlock()
			return ok
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// captureViewport returns a PNG of the current page's viewport.
func (s *Session) captureViewport(ctx context.Context) ([]byte, error) {
	t, err := s.currentTab()
	if err != nil {
		return nil, err
	}
	c, cancel := context.WithTimeout(t.ctx, captureTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	res, err := chromedp.Call(c, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng})
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}

// commitFrame stores frame b of r: the file, then the metadata naming it.
func (m *Manager) commitFrame(r *recording, b []byte) {
	cfg := m.cfg.Recordings
	var w, h int
	if c, err := png.DecodeConfig(bytes.NewReader(b)); err == nil {
		w, h = c.Width, c.Height
	}
	rs := &m.recs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.meta.State != apitype.RecordingActive {
		return // stopped while it captured
	}
	if rs.bytes+int64(len(b)) > cfg.MaxBytes {
		m.stopLocked(r, apitype.RecordingStoppedByteLimit)
		return
	}
	i := len(r.meta.Frames)
	path := filepath.Join(r.dir, frameName(i))
	err := writeFileAtomic(path, b)
	if err == nil {
		r.meta.Frames = append(r.meta.Frames, apitype.RecordingFrame{Index: i, At: time.Now().UTC(), Bytes: int64(len(b)), Width: w, Height: h})
		if err = r.writeMeta(); err != nil {
			r.meta.Frames = r.meta.Frames[:i]
			_ = os.Remove(path)
		}
	}
	if err != nil {
		m.log.Error("storing a recording frame", "recording_id", r.meta.ID, "err", err)
		r.meta.Failed++
		if r.fails++; r.fails >= maxCaptureFailures {
			m.stopLocked(r, apitype.RecordingStoppedFailed)
		}
		return
	}
	r.fails = 0
	rs.bytes += int64(len(b))
	if len(r.meta.Frames) >= cfg.MaxFrames {
		m.stopLocked(r, apitype.RecordingStoppedFrameLimit)
	}
}

// stopLocked marks r stopped by reason and ends its capture goroutine
// (without waiting for it). Call with recordings.mu held.
func (m *Manager) stopLocked(r *recording, reason string) {
	if r.meta.State != apitype.RecordingActive {
		return
	}
	r.meta.State, r.meta.StoppedBy, r.meta.StoppedAt = apitype.RecordingStopped, reason, time.Now().UTC()
	if r.cancel != nil {
		r.cancel()
	}
	if err := r.writeMeta(); err != nil {
		m.log.Error("writing a stopped recording's metadata", "recording_id", r.meta.ID, "err", err)
	}
	m.log.Info("browser recording stopped", "recording_id", r.meta.ID, "session_id", r.meta.SessionID, "stopped_by", reason,
		"frames", len(r.meta.Frames))
}

// stopRecording stops r by reason, from its own capture goroutine or
// after waiting for it (stopAndWait).
func (m *Manager) stopRecording(r *recording, reason string) {
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	m.stopLocked(r, reason)
}

// stopAndWait stops r by reason and waits until its capture goroutine
// has returned.
func (m *Manager) stopAndWait(r *recording, reason string) {
	m.stopRecording(r, reason)
	if r.done != nil {
		<-r.done
	}
}

// sessionRecordingsEnd stops the recordings of a session that closes
// (with closeReason), keeping their frames. It waits for their capture
// goroutines, so that none captures a page being closed.
func (m *Manager) sessionRecordingsEnd(sessionID, closeReason string) {
	reason := apitype.RecordingStoppedSessionEnded
	if closeReason == "daemon_stopped" {
		reason = apitype.RecordingStoppedDaemon
	}
	m.recs.mu.Lock()
	var active []*recording
	for _, r := range m.recs.byID {
		if r.meta.SessionID == sessionID && r.meta.State == apitype.RecordingActive {
			active = append(active, r)
		}
	}
	m.recs.mu.Unlock()
	for _, r := range active {
		m.stopAndWait(r, reason)
	}
}

func (m *Manager) getRecording(id string) (*recording, error) {
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	if r, ok := m.recs.byID[id]; ok {
		return r, nil
	}
	return nil, errcode.RecordingNotFound.New("recording %q not found", id)
}

// Recording returns a recording's metadata, or RecordingNotFound.
func (m *Manager) Recording(id string) (apitype.BrowserRecording, error) {
	r, err := m.getRecording(id)
	if err != nil {
		return apitype.BrowserRecording{}, err
	}
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	return m.viewRecording(r), nil
}

// RecordingTenant returns the tenant that owns a recording, or
// RecordingNotFound.
func (m *Manager) RecordingTenant(id string) (string, error) {
	r, err := m.getRecording(id)
	if err != nil {
		return "", err
	}
	return r.meta.Tenant, nil // set at creation, never changed
}

// Recordings lists the recordings of the tenants visible accepts, oldest
// first.
func (m *Manager) Recordings(visible func(tenant string) bool) []apitype.BrowserRecording {
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	out := []apitype.BrowserRecording{}
	for _, r := range m.recs.byID {
		if visible(r.meta.Tenant) {
			out = append(out, m.viewRecording(r))
		}
	}
	slices.SortFunc(out, func(a, b apitype.BrowserRecording) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// StopRecording stops a recording, keeping its frames; stopping a stopped
// one changes nothing. It returns RecordingNotFound for an unknown ID.
func (m *Manager) StopRecording(id string) (apitype.BrowserRecording, error) {
	r, err := m.getRecording(id)
	if err != nil {
		return apitype.BrowserRecording{}, err
	}
	m.stopAndWait(r, apitype.RecordingStoppedByUser)
	return m.Recording(id)
}

// DeleteRecording stops a recording and deletes it with its frames,
// releasing their bytes.
func (m *Manager) DeleteRecording(id string) error {
	r, err := m.getRecording(id)
	if err != nil {
		return err
	}
	m.stopAndWait(r, apitype.RecordingStoppedByUser)
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	if _, ok := m.recs.byID[id]; !ok {
		return errcode.RecordingNotFound.New("recording %q not found", id) // deleted meanwhile
	}
	m.removeLocked(r)
	m.log.Info("browser recording deleted", "recording_id", id)
	return nil
}

// removeLocked deletes a stopped recording. Call with recordings.mu held.
func (m *Manager) removeLocked(r *recording) {
	delete(m.recs.byID, r.meta.ID)
	for _, f := range r.meta.Frames {
		m.recs.bytes -= f.Bytes
	}
	// meta.json first: a crash part way leaves a directory the next
	// start removes, not a recording missing frames.
	_ = os.Remove(filepath.Join(r.dir, "meta.json"))
	if err := os.RemoveAll(r.dir); err != nil {
		m.log.Error("deleting a recording's files", "recording_id", r.meta.ID, "err", err)
	}
}

// RecordingFrame returns frame n of a recording as PNG bytes, or
// RecordingNotFound, or RecordingFrameNotFound for an index it does not
// have.
func (m *Manager) RecordingFrame(id string, n int) ([]byte, error) {
	r, err := m.getRecording(id)
	if err != nil {
		return nil, err
	}
	m.recs.mu.Lock()
	have := len(r.meta.Frames)
	var f *os.File
	if n >= 0 && n < have {
		// Opened under the lock: a delete after it does not take the
		// bytes from under the reader.
		f, err = os.Open(filepath.Join(r.dir, frameName(n)))
	}
	m.recs.mu.Unlock()
	if n < 0 || n >= have {
		return nil, errcode.RecordingFrameNotFound.New("recording %s has %d frames (0-%d); no frame %d", id, have, have-1, n)
	}
	if err != nil {
		return nil, fmt.Errorf("reading frame %d of %s: %w", n, id, err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFrameBytes))
}

// Export formats.
const (
	ExportZIP = "zip"
	ExportMP4 = "mp4"
)

// RecordingExport is an export being made: write it with Send, then
// Close it.
type RecordingExport struct {
	ContentType string
	Filename    string
	write       func(io.Writer) error
	close       func()
}

// Send writes the export to w.
func (e *RecordingExport) Send(w io.Writer) error { return e.write(w) }

// Close releases what the export holds (open frames, a temporary file).
func (e *RecordingExport) Close() { e.close() }

// recordingIndex is index.json of a ZIP export: the metadata, and the
// file in the archive of each frame (Files[i] is Frames[i]'s).
type recordingIndex struct {
	apitype.BrowserRecording
	Files []string `json:"files"`
}

// ExportRecording exports the frames a recording has now: format zip (the
// PNGs and index.json) or mp4 (ffmpeg encodes them; FFmpegUnavailable
// without ffmpeg). The frames are fixed when it returns: frames captured
// later, or a delete, do not change it.
func (m *Manager) ExportRecording(ctx context.Context, id, format string) (*RecordingExport, error) {
	r, err := m.getRecording(id)
	if err != nil {
		return nil, err
	}
	var ffmpeg string
	switch format {
	case "", ExportZIP:
		format = ExportZIP
	case ExportMP4:
		if ffmpeg = m.ffmpeg(); ffmpeg == "" {
			return nil, errcode.FFmpegUnavailable.New("MP4 export needs ffmpeg, which this host lacks (Debian: apt-get install ffmpeg; make deps installs it); export as zip instead")
		}
	default:
		return nil, errcode.InvalidFields(map[string]string{"format": "must be zip or mp4"})
	}
	// Open every frame under the lock: the export keeps them even if the
	// recording is deleted while it streams.
	m.recs.mu.Lock()
	view := m.viewRecording(r)
	files := make([]*os.File, 0, len(view.Frames))
	for _, f := range view.Frames {
		fh, err := os.Open(filepath.Join(r.dir, frameName(f.Index)))
		if err != nil {
			m.recs.mu.Unlock()
			closeAll(files)
			return nil, fmt.Errorf("opening frame %d of %s: %w", f.Index, id, err)
		}
		files = append(files, fh)
	}
	m.recs.mu.Unlock()
	if format == ExportZIP {
		return &RecordingExport{ContentType: "application/zip", Filename: id + ".zip",
			write: func(w io.Writer) error { return writeZIP(w, view, files) }, close: func() { closeAll(files) }}, nil
	}
	defer closeAll(files)
	if len(files) == 0 {
		return nil, errcode.RecordingFrameNotFound.New("recording %s has no frames to encode", id)
	}
	return m.encodeMP4(ctx, ffmpeg, view, files)
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// writeZIP writes frames/000000.png... and index.json. PNGs are stored,
// not deflated: they are compressed already.
func writeZIP(w io.Writer, view apitype.BrowserRecording, files []*os.File) error {
	zw := zip.NewWriter(w)
	idx := recordingIndex{BrowserRecording: view, Files: make([]string, len(view.Frames))}
	for i, f := range view.Frames {
		name := "frames/" + frameName(f.Index)
		idx.Files[i] = name
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: f.At})
		if err != nil {
			return err
		}
		if _, err := io.Copy(fw, io.LimitReader(files[i], maxFrameBytes)); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	fw, err := zw.CreateHeader(&zip.FileHeader{Name: "index.json", Method: zip.Deflate, Modified: time.Now()})
	if err != nil {
		return err
	}
	if _, err := fw.Write(b); err != nil {
		return err
	}
	return zw.Close()
}

// ffmpeg returns the ffmpeg binary of MP4 exports, or "".
func (m *Manager) ffmpeg() string {
	name := m.cfg.Recordings.FFmpeg
	if name == "" {
		name = "ffmpeg"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// encodeMP4 encodes frames to H.264 in an MP4, one frame per interval,
// in a temporary directory under the recordings root that is gone once
// the export is closed (or at the next start, after a crash).
func (m *Manager) encodeMP4(ctx context.Context, ffmpeg string, view apitype.BrowserRecording, files []*os.File) (*RecordingExport, error) {
	tmp, err := os.MkdirTemp(m.recordingRoot(), ".export-")
	if err != nil {
		return nil, fmt.Errorf("making the export's directory: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	// Hard links would be cheaper, but the frames may be deleted already:
	// copies of the open files are what the export promised.
	for i, f := range files {
		out, err := os.OpenFile(filepath.Join(tmp, frameName(i)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = io.Copy(out, io.LimitReader(f, maxFrameBytes))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("staging frames for ffmpeg: %w", err)
		}
	}
	first := view.Frames[0]
	w, h := max(first.Width&^1, 2), max(first.Height&^1, 2)
	out := filepath.Join(tmp, "out.mp4")
	ectx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	cmd := exec.CommandContext(ectx, ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error",
		"-framerate", fmt.Sprintf("1000/%d", max(view.IntervalMS, 1)), "-start_number", "0", "-i", filepath.Join(tmp, "%06d.png"),
		"-frames:v", strconv.Itoa(len(files)),
		// yuv420p (what players take) needs even sizes; frames of another
		// size (the viewport changed) are scaled to the first's.
		"-vf", fmt.Sprintf("scale=%d:%d", w, h), "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart",
		"-fs", strconv.Itoa(maxMP4Bytes), "-y", out)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4 << 10}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		cleanup()
		if ectx.Err() != nil && ctx.Err() == nil {
			return nil, errcode.Wrap(errcode.DeadlineExceeded, err, "encoding the MP4 took longer than %s", exportTimeout)
		}
		return nil, fmt.Errorf("ffmpeg: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	f, err := os.Open(out)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &RecordingExport{ContentType: "video/mp4", Filename: view.ID + ".mp4",
		write: func(w io.Writer) error { _, err := io.Copy(w, f); return err },
		close: func() { _ = f.Close(); cleanup() }}, nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// loadRecordings reads the recordings a previous daemon kept: one left
// recording is stopped (daemon_restart), expired ones are deleted, and
// what a crash left half written is removed.
func (m *Manager) loadRecordings() {
	root := m.recordingRoot()
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			m.log.Error("reading recordings", "err", err)
		}
		return
	}
	rs := &m.recs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byID == nil {
		rs.byID = map[string]*recording{}
	}
	now := time.Now()
	for _, e := range entries {
		path := filepath.Join(root, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "rec_") {
			_ = os.RemoveAll(path) // an export's temporary directory, or a stray file
			continue
		}
		r, err := readRecording(path)
		if err != nil || r.meta.ID != e.Name() {
			m.log.Warn("removing a recording without readable metadata", "dir", path, "err", err)
			_ = os.RemoveAll(path)
			continue
		}
		if r.meta.State == apitype.RecordingActive {
			r.meta.State, r.meta.StoppedBy, r.meta.StoppedAt = apitype.RecordingStopped, apitype.RecordingStoppedDaemon, r.meta.CreatedAt
			if n := len(r.meta.Frames); n > 0 {
				r.meta.StoppedAt = r.meta.Frames[n-1].At
			}
			if err := r.writeMeta(); err != nil {
				m.log.Error("writing a recovered recording's metadata", "recording_id", r.meta.ID, "err", err)
			}
		}
		rs.byID[r.meta.ID] = r
		for _, f := range r.meta.Frames {
			rs.bytes += f.Bytes
		}
		if now.Sub(r.meta.StoppedAt) > m.cfg.Recordings.TTL {
			m.removeLocked(r)
		}
	}
	if n := len(rs.byID); n > 0 {
		m.log.Info("browser recordings loaded", "recordings", n, "bytes", rs.bytes)
	}
}

// readRecording reads a recording's directory and removes the files its
// metadata does not name (temporary files, a frame written before a
// crash kept meta.json from naming it).
func readRecording(dir string) (*recording, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	r := &recording{dir: dir}
	if err := json.Unmarshal(b, &r.meta); err != nil {
		return nil, err
	}
	if r.meta.State != apitype.RecordingActive && r.meta.State != apitype.RecordingStopped {
		return nil, fmt.Errorf("state %q", r.meta.State)
	}
	named := map[string]bool{"meta.json": true}
	for i, f := range r.meta.Frames {
		if f.Index != i {
			return nil, fmt.Errorf("frame %d has index %d", i, f.Index)
		}
		named[frameName(i)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !named[e.Name()] {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return r, nil
}

// sweepRecordings deletes stopped recordings past their TTL, at most every
// sweepEvery (or a quarter of the TTL).
func (m *Manager) sweepRecordings(now time.Time) {
	ttl := m.cfg.Recordings.TTL
	rs := &m.recs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if now.Sub(rs.lastSweep) < min(sweepEvery, ttl/4) {
		return
	}
	rs.lastSweep = now
	for _, r := range rs.byID {
		if r.meta.State == apitype.RecordingStopped && now.Sub(r.meta.StoppedAt) > ttl {
			m.removeLocked(r)
			m.log.Info("browser recording expired", "recording_id", r.meta.ID)
		}
	}
}
