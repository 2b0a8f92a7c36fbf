package daemon_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// recordingDaemon starts a daemon whose recordings are bounded by rc.
func recordingDaemon(t *testing.T, rc browser.RecordingConfig) *testenv.Daemon {
	t.Helper()
	needChromium(t)
	return testenv.StartDaemon(t, func(c *daemon.Config) { c.BrowserRecordings = rc })
}

// waitRecording polls recording id until cond holds.
func waitRecording(t *testing.T, c *client.Client, id, what string, cond func(apitype.BrowserRecording) bool) apitype.BrowserRecording {
	t.Helper()
	var rec apitype.BrowserRecording
	testenv.Eventually(t, time.Minute, what, func() bool {
		var err error
		rec, err = c.Recording(context.Background(), id)
		if err != nil {
			t.Fatalf("Recording(%s): %v", id, err)
		}
		return cond(rec)
	})
	return rec
}

// rawGet answers GET path with token.
func rawGet(t *testing.T, d *testenv.Daemon, token, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// pngBytes marks a PNG, raw or base64-encoded: metadata must hold neither.
var pngBytes = regexp.MustCompile(`\x89PNG|iVBORw0KGgo`)

func mustPNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestBrowserRecording records a real page with nobody watching: a frame
// at the start and then at the interval, frames that follow the page, a
// stop that keeps them, the ZIP and MP4 exports, metadata without PNGs,
// then delete; closing a session stops its recording and keeps its frames.
func TestBrowserRecording(t *testing.T) {
	t.Parallel()
	d := recordingDaemon(t, browser.RecordingConfig{Interval: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client
	base := pages(t)
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 640, Height: 480}})
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/form.html"}, nil)

	rec, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
	if err != nil || !regexp.MustCompile(`^rec_[a-z2-7]{26}$`).MatchString(rec.ID) || rec.State != apitype.RecordingActive ||
		rec.SessionID != s.ID || rec.IntervalMS != 200 {
		t.Fatalf("StartRecording = %+v, %v", rec, err)
	}
	if len(rec.Frames) != 1 || rec.Frames[0].Width != 640 || rec.Frames[0].Height != 480 {
		t.Errorf("StartRecording frames = %+v, want the first frame, 640x480, taken at the start", rec.Frames)
	}
	rec = waitRecording(t, c, rec.ID, "three frames at the interval", func(r apitype.BrowserRecording) bool { return len(r.Frames) >= 3 })
	for i := 1; i < len(rec.Frames); i++ {
		if gap := rec.Frames[i].At.Sub(rec.Frames[i-1].At); gap < 150*time.Millisecond {
			t.Errorf("frames %d and %d are %s apart, want about the 200ms interval", i-1, i, gap)
		}
	}
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate",
		Expression: `document.body.innerHTML = '<h1 style="font-size:90px">CHANGED</h1>'; document.body.style.background = '#c00'; 1`}, nil)
	// Counted after the change (captures go on while a loaded machine is
	// slow to send it): of the frames after this count, only the first
	// may be one the change waited for, stored after it; the second is of
	// the changed page.
	rec, err = c.Recording(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	before := len(rec.Frames)
	rec = waitRecording(t, c, rec.ID, "frames after the change", func(r apitype.BrowserRecording) bool { return len(r.Frames) >= before+2 })
	first, err := c.RecordingFrame(ctx, rec.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last, err := c.RecordingFrame(ctx, rec.ID, len(rec.Frames)-1)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, last) {
		t.Error("the frames before and after the page changed are the same")
	}
	img := mustPNG(t, last)
	if img.Bounds().Dx() != 640 {
		t.Errorf("last frame is %v, want 640 wide", img.Bounds())
	}
	if r, g, b, _ := img.At(5, 5).RGBA(); r>>8 < 0xb0 || g>>8 > 0x20 || b>>8 > 0x20 {
		t.Errorf("last frame's corner is %02x%02x%02x, want the page's red", r>>8, g>>8, b>>8)
	}
	if r, _, _, _ := mustPNG(t, first).At(5, 5).RGBA(); r>>8 < 0xf0 {
		t.Errorf("first frame's corner red is %02x, want the form's white", r>>8)
	}

	// Metadata never carries a PNG, in the one recording or the list.
	for _, path := range []string{"/v1/browser/recordings/" + rec.ID, "/v1/browser/recordings"} {
		status, body := rawGet(t, d, d.Token, path)
		if status != http.StatusOK || pngBytes.Match(body) || len(body) > 16<<10 {
			t.Errorf("GET %s = %d, %d bytes; want metadata without PNG data", path, status, len(body))
		}
	}
	if _, err := c.RecordingFrame(ctx, rec.ID, 100000); !errcode.Has(err, errcode.RecordingFrameNotFound) {
		t.Errorf("frame 100000: %v, want recording_frame_not_found", err)
	}
	if _, err := c.RecordingFrame(ctx, "rec_"+strings.Repeat("a", 26), 0); !errcode.Has(err, errcode.RecordingNotFound) {
		t.Errorf("frame of a missing recording: %v, want recording_not_found", err)
	}
	if _, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{IntervalMS: 5}); errcode.CodeOf(err) != errcode.Invalid {
		t.Errorf("interval 5ms: %v, want invalid", err)
	}

	stopped, err := c.StopRecording(ctx, rec.ID)
	if err != nil || stopped.State != apitype.RecordingStopped || stopped.StoppedBy != "user" || stopped.StoppedAt == nil || stopped.ExpiresAt == nil {
		t.Fatalf("StopRecording = %+v, %v", stopped, err)
	}
	time.Sleep(600 * time.Millisecond) // three intervals: a stopped recording takes no frame
	if again, err := c.Recording(ctx, rec.ID); err != nil || len(again.Frames) != len(stopped.Frames) {
		t.Errorf("after stop: %d frames, %v; want %d", len(again.Frames), err, len(stopped.Frames))
	}

	// The ZIP export has every frame, byte for byte, and an index that
	// matches the metadata.
	var zbuf bytes.Buffer
	if err := c.ExportRecording(ctx, rec.ID, "zip", &zbuf); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(zbuf.Bytes()), int64(zbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	var idx struct {
		apitype.BrowserRecording
		Files []string `json:"files"`
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if diff := cmp.Diff(stopped, idx.BrowserRecording); diff != "" {
		t.Errorf("index.json differs from the metadata (-meta +index):\n%s", diff)
	}
	if len(files) != len(stopped.Frames)+1 || len(idx.Files) != len(stopped.Frames) {
		t.Errorf("zip has %d files, index names %d; want %d frames and index.json", len(files), len(idx.Files), len(stopped.Frames))
	}
	for i, name := range idx.Files {
		want, err := c.RecordingFrame(ctx, rec.ID, i)
		if err != nil || !bytes.Equal(files[name], want) || int64(len(want)) != stopped.Frames[i].Bytes {
			t.Errorf("zip %s: %d bytes, want frame %d's %d bytes (%v)", name, len(files[name]), i, len(want), err)
		}
	}
	if err := c.ExportRecording(ctx, rec.ID, "gif", io.Discard); errcode.CodeOf(err) != errcode.Invalid {
		t.Errorf("format gif: %v, want invalid", err)
	}

	// MP4, when ffmpeg is installed (make deps installs it).
	testenv.NeedCommand(t, "ffmpeg")
	var mp4 bytes.Buffer
	if err := c.ExportRecording(ctx, rec.ID, "mp4", &mp4); err != nil {
		t.Fatalf("mp4 export: %v", err)
	}
	checkMP4(t, mp4.Bytes(), len(stopped.Frames))
	if ents, _ := os.ReadDir(filepath.Join(d.DataDir, "browser", "recordings")); len(ents) != 1 {
		t.Errorf("recordings directory after exports holds %d entries, want the recording alone (no export left)", len(ents))
	}

	// Closing the session stops its recording and keeps the frames.
	rec2, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{IntervalMS: 100})
	if err != nil {
		t.Fatal(err)
	}
	waitRecording(t, c, rec2.ID, "frames of the second recording", func(r apitype.BrowserRecording) bool { return len(r.Frames) >= 2 })
	if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	closed, err := c.Recording(ctx, rec2.ID)
	if err != nil || closed.State != apitype.RecordingStopped || closed.StoppedBy != "session_closed" || len(closed.Frames) < 2 {
		t.Fatalf("after the session closed: %+v, %v; want stopped by session_closed with its frames", closed, err)
	}
	if _, err := c.RecordingFrame(ctx, rec2.ID, 1); err != nil {
		t.Errorf("a frame of a closed session's recording: %v", err)
	}

	// Delete releases the recording and its files.
	list, err := c.Recordings(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("Recordings = %d, %v; want 2", len(list), err)
	}
	if err := c.DeleteRecording(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recording(ctx, rec.ID); !errcode.Has(err, errcode.RecordingNotFound) {
		t.Errorf("a deleted recording: %v, want recording_not_found", err)
	}
	if _, err := os.Stat(filepath.Join(d.DataDir, "browser", "recordings", rec.ID)); !os.IsNotExist(err) {
		t.Errorf("a deleted recording's directory: %v, want it gone", err)
	}
	if list, _ := c.Recordings(ctx); len(list) != 1 || list[0].ID != rec2.ID {
		t.Errorf("Recordings after delete = %+v, want %s alone", list, rec2.ID)
	}
}

// checkMP4 checks b is an MP4 (an ftyp box first) holding frames frames
// of H.264 (ffprobe counts them).
func checkMP4(t *testing.T, b []byte, frames int) {
	t.Helper()
	if len(b) < 12 || string(b[4:8]) != "ftyp" || binary.BigEndian.Uint32(b[:4]) < 8 {
		t.Fatalf("mp4 export (%d bytes) does not start with an ftyp box", len(b))
	}
	path := filepath.Join(t.TempDir(), "rec.mp4")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ffprobe := testenv.NeedCommand(t, "ffprobe")
	out, err := exec.Command(ffprobe, "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "h264,"+strconv.Itoa(frames); got != want {
		t.Errorf("ffprobe = %q, want %q", got, want)
	}
}

// TestBrowserRecordingBusy: a capture due while an action holds the
// session is skipped and counted, not queued; captures go on after it; and
// actions that meet a capture wait for it instead of answering busy.
func TestBrowserRecordingBusy(t *testing.T) {
	t.Parallel()
	d := recordingDaemon(t, browser.RecordingConfig{Interval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Skipped != 0 {
		t.Errorf("skipped before any action = %d, want 0", rec.Skipped)
	}
	// Quick actions among captures every 100ms: none is refused busy.
	for i := range 40 {
		if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1+1"}, nil); err != nil {
			t.Fatalf("action %d during the recording: %v", i, err)
		}
	}
	// An action holding the session for 2s: the captures due meanwhile are
	// skipped.
	pre, err := c.Recording(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The page's own clock brackets the hold: the action holds the session
	// from before the first Date.now() to after the second, however slow
	// the round trip around it.
	var held [2]float64
	act(t, c, s.ID, apitype.BrowserAction{Op: "evaluate",
		Expression: `(async () => { const a = Date.now(); await new Promise(r => setTimeout(r, 2000)); return [a, Date.now()]; })()`}, &held)
	start, end := time.UnixMilli(int64(held[0])), time.UnixMilli(int64(held[1]))
	post, err := c.Recording(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	// About 20 at 100ms; how many depends on how often a loaded machine
	// wakes the capture loop, but at least one came due in 2s.
	if skipped := post.Skipped - pre.Skipped; skipped < 1 {
		t.Errorf("captures skipped during a 2s action at 100ms = %d, want some (about 20)", skipped)
	}
	// A frame's time is stamped once its file is written, after the
	// capture gave the session back: the one capture the action may have
	// waited for can be stamped inside the hold, no other.
	var inside []apitype.RecordingFrame
	for _, f := range post.Frames {
		if f.At.After(start) && f.At.Before(end) {
			inside = append(inside, f)
		}
	}
	if len(inside) > 1 {
		t.Errorf("frames %+v taken while the action held the session (%s to %s)", inside, start, end)
	}
	// Positive control: captures resume once the session is free.
	waitRecording(t, c, rec.ID, "frames after the long action", func(r apitype.BrowserRecording) bool { return len(r.Frames) >= len(post.Frames)+3 })
}

// TestBrowserRecordingLimits: reaching the frames of one recording, the
// recordings of the daemon or the bytes of the daemon stops capture (or
// refuses a start) and keeps what was taken; deleting releases the room.
func TestBrowserRecordingLimits(t *testing.T) {
	t.Parallel()
	t.Run("frames_and_recordings", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		d := recordingDaemon(t, browser.RecordingConfig{Interval: 100 * time.Millisecond, MaxFrames: 3, MaxRecordings: 2})
		c := d.Client
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		r1, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
		if err != nil || r1.State != apitype.RecordingActive {
			t.Fatalf("StartRecording = %+v, %v; want recording", r1, err)
		}
		r1 = waitRecording(t, c, r1.ID, "the frame limit", func(r apitype.BrowserRecording) bool { return r.State == apitype.RecordingStopped })
		if r1.StoppedBy != "frame_limit" || len(r1.Frames) != 3 {
			t.Fatalf("at the frame limit: stopped by %q with %d frames, want frame_limit with 3", r1.StoppedBy, len(r1.Frames))
		}
		for i := range 3 {
			if _, err := c.RecordingFrame(ctx, r1.ID, i); err != nil {
				t.Errorf("frame %d kept at the frame limit: %v", i, err)
			}
		}
		r2, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{IntervalMS: 60000})
		if err != nil {
			t.Fatalf("the second recording (positive control): %v", err)
		}
		if _, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{}); !errcode.Has(err, errcode.RecordingLimit) {
			t.Fatalf("a third recording with --max-recordings 2: %v, want recording_limit", err)
		}
		if err := c.DeleteRecording(ctx, r1.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{}); err != nil {
			t.Errorf("a recording after a delete made room: %v", err)
		}
		if got, _ := c.Recording(ctx, r2.ID); got.State != apitype.RecordingActive {
			t.Errorf("the second recording is %s, want still recording", got.State)
		}
	})

	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// A white 200x150 viewport is a PNG of a few hundred bytes: some
		// frames fit in 4 KiB, not many.
		const maxBytes = 4096
		d := recordingDaemon(t, browser.RecordingConfig{Interval: 100 * time.Millisecond, MaxBytes: maxBytes})
		c := d.Client
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 200, Height: 150}})
		if err != nil {
			t.Fatal(err)
		}
		r1, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
		if err != nil || r1.State != apitype.RecordingActive || len(r1.Frames) != 1 {
			t.Fatalf("StartRecording = %+v, %v; want recording with its first frame", r1, err)
		}
		r1 = waitRecording(t, c, r1.ID, "the byte limit", func(r apitype.BrowserRecording) bool { return r.State == apitype.RecordingStopped })
		if r1.StoppedBy != "byte_limit" || len(r1.Frames) < 2 || r1.Bytes > maxBytes {
			t.Fatalf("at the byte limit: stopped by %q with %d frames of %d bytes, want byte_limit with the frames that fit in %d",
				r1.StoppedBy, len(r1.Frames), r1.Bytes, maxBytes)
		}
		if _, err := c.RecordingFrame(ctx, r1.ID, len(r1.Frames)-1); err != nil {
			t.Errorf("the last frame kept at the byte limit: %v", err)
		}
		// Deleting releases the bytes: a new recording captures again.
		if err := c.DeleteRecording(ctx, r1.ID); err != nil {
			t.Fatal(err)
		}
		r2, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
		if err != nil {
			t.Fatal(err)
		}
		waitRecording(t, c, r2.ID, "frames after a delete released bytes", func(r apitype.BrowserRecording) bool { return len(r.Frames) >= 2 })
	})
}

// TestBrowserRecordingRestart kills the daemon with SIGKILL while it
// records: the next daemon on the data directory lists the recording as
// stopped (daemon_restart) with its frames readable, and its TTL (60s here)
// then removes it.
func TestBrowserRecordingRestart(t *testing.T) {
	t.Parallel()
	needChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir, "--browser-recording-interval", "200ms")
	s, err := d.Client.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := d.Client.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
	if err != nil || rec.IntervalMS != 200 {
		t.Fatalf("StartRecording = %+v, %v; want the 200ms of --browser-recording-interval", rec, err)
	}
	before := waitRecording(t, d.Client, rec.ID, "frames before the crash", func(r apitype.BrowserRecording) bool { return len(r.Frames) >= 3 })
	want, err := d.Client.RecordingFrame(ctx, rec.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	d.Kill9(t)

	// A TTL long enough to see the recording (it counts from the last
	// frame, before the kill, and a daemon may take 30 s to serve on a
	// loaded machine), short enough to see it go.
	d2 := testenv.StartDaemonProcess(t, dataDir, "--browser-recording-ttl", "60s")
	after, err := d2.Client.Recording(ctx, rec.ID)
	if err != nil {
		t.Fatalf("the recording after a restart: %v", err)
	}
	if after.State != apitype.RecordingStopped || after.StoppedBy != "daemon_restart" || len(after.Frames) < len(before.Frames) {
		t.Fatalf("after the restart: %s by %q with %d frames; want stopped by daemon_restart with at least %d",
			after.State, after.StoppedBy, len(after.Frames), len(before.Frames))
	}
	if got, err := d2.Client.RecordingFrame(ctx, rec.ID, 2); err != nil || !bytes.Equal(got, want) {
		t.Errorf("frame 2 after the restart: %d bytes, %v; want the %d bytes captured before", len(got), err, len(want))
	}
	if list, err := d2.Client.Recordings(ctx); err != nil || len(list) != 1 || list[0].ID != rec.ID {
		t.Errorf("Recordings after the restart = %+v, %v", list, err)
	}
	// The TTL counts from the stop (the last frame): the sweep removes it.
	testenv.Eventually(t, 2*time.Minute, "the expired recording to be removed", func() bool {
		_, err := d2.Client.Recording(ctx, rec.ID)
		return errcode.Has(err, errcode.RecordingNotFound)
	})
	if _, err := os.Stat(filepath.Join(dataDir, "browser", "recordings", rec.ID)); !os.IsNotExist(err) {
		t.Errorf("an expired recording's directory: %v, want it gone", err)
	}
}

// TestBrowserRecordingTenancy: another tenant's recording answers 404 on
// every route, as a missing one does, and is not listed; its owner (the
// positive control) reaches it.
func TestBrowserRecordingTenancy(t *testing.T) {
	t.Parallel()
	d := recordingDaemon(t, browser.RecordingConfig{Interval: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, keyA := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, keyB := tenantKey(t, d, "globex", auth.ScopeExecution)
	ca, cb := client.New(d.URL, keyA.Secret), client.New(d.URL, keyB.Secret)
	s, err := ca.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{}); !errcode.Has(err, errcode.SessionNotFound) {
		t.Errorf("globex recording acme's session: %v, want session_not_found", err)
	}
	rec, err := ca.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	missing := "rec_" + strings.Repeat("a", 26)
	calls := map[string]func(*client.Client, string) error{
		"get":    func(c *client.Client, id string) error { _, err := c.Recording(ctx, id); return err },
		"frame":  func(c *client.Client, id string) error { _, err := c.RecordingFrame(ctx, id, 0); return err },
		"export": func(c *client.Client, id string) error { return c.ExportRecording(ctx, id, "zip", io.Discard) },
		"stop":   func(c *client.Client, id string) error { _, err := c.StopRecording(ctx, id); return err },
		"delete": func(c *client.Client, id string) error { return c.DeleteRecording(ctx, id) },
	}
	for _, name := range []string{"get", "frame", "export", "stop", "delete"} {
		call := calls[name]
		err := call(cb, rec.ID)
		errMissing := call(cb, missing)
		if !errcode.Has(err, errcode.RecordingNotFound) ||
			strings.ReplaceAll(errcode.MessageOf(err), rec.ID, "ID") != strings.ReplaceAll(errcode.MessageOf(errMissing), missing, "ID") {
			t.Errorf("%s of acme's recording as globex: %v; want recording_not_found as for a missing one (%v)", name, err, errMissing)
		}
	}
	if list, err := cb.Recordings(ctx); err != nil || len(list) != 0 {
		t.Errorf("globex's recordings = %+v, %v; want none", list, err)
	}
	// Positive control: acme reaches it, and globex's calls changed nothing.
	got, err := ca.Recording(ctx, rec.ID)
	if err != nil || got.State != apitype.RecordingActive {
		t.Fatalf("acme's recording as acme = %+v, %v; want still recording", got, err)
	}
	if list, err := ca.Recordings(ctx); err != nil || len(list) != 1 {
		t.Errorf("acme's recordings = %d, %v; want 1", len(list), err)
	}
	if _, err := ca.RecordingFrame(ctx, rec.ID, 0); err != nil {
		t.Errorf("acme's frame: %v", err)
	}
	if err := ca.DeleteRecording(ctx, rec.ID); err != nil {
		t.Errorf("acme deleting its recording: %v", err)
	}
}
