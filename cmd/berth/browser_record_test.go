package main_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// TestBrowserRecordCommands runs the commands: record start, ls,
// stop, get, frame, export (ZIP, and MP4 with ffmpeg), rm.
func TestBrowserRecordCommands(t *testing.T) {
	t.Parallel()
	testenv.NeedChromium(t)
	if testenv.Runtime() != "process" {
		t.Skip("browser tests run in the process-runtime pass of make test")
	}
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.BrowserRecordings = browser.RecordingConfig{Interval: 200 * time.Millisecond}
	})
	c := newCLI(t, d)
	b := strings.TrimSpace(c.ok("browser", "open").stdout)
	r := strings.TrimSpace(c.ok("browser", "record", "start", b).stdout)
	if !strings.HasPrefix(r, "rec_") || strings.Contains(r, "\n") {
		t.Fatalf("record start printed %q, want the recording's id alone", r)
	}
	c.fails(2, "between 100ms and 1m", "serve", "--browser-recording-interval", "10ms")
	c.fails(1, "interval_ms", "browser", "record", "start", b, "--interval", "10ms")
	testenv.Eventually(t, time.Minute, "three frames", func() bool {
		var rec apitype.BrowserRecording
		return json.Unmarshal([]byte(c.ok("browser", "record", "get", r).stdout), &rec) == nil && len(rec.Frames) >= 3
	})
	if ls := c.ok("browser", "record", "ls").stdout; !strings.Contains(ls, r) || !strings.Contains(ls, "recording") {
		t.Errorf("record ls = %q, want %s recording", ls, r)
	}
	if out := c.ok("browser", "record", "stop", r).stdout; !strings.HasPrefix(out, r+" stopped: ") {
		t.Errorf("record stop printed %q", out)
	}
	var rec apitype.BrowserRecording
	if err := json.Unmarshal([]byte(c.ok("browser", "record", "get", r).stdout), &rec); err != nil || rec.State != "stopped" || rec.StoppedBy != "user" {
		t.Fatalf("record get = %+v, %v; want stopped by user", rec, err)
	}

	c.ok("browser", "record", "frame", r, "1", "f1.png")
	f1, err := os.ReadFile(filepath.Join(c.dir, "f1.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(f1)); err != nil || int64(len(f1)) != rec.Frames[1].Bytes {
		t.Errorf("frame 1: %d bytes (%v), want the PNG of %d bytes get described", len(f1), err, rec.Frames[1].Bytes)
	}
	c.fails(1, "recording_frame_not_found", "browser", "record", "frame", r, "9999", "none.png")
	if _, err := os.Stat(filepath.Join(c.dir, "none.png")); !os.IsNotExist(err) {
		t.Errorf("a failed frame left none.png: %v", err)
	}

	c.ok("browser", "record", "export", r, "rec.zip")
	zr, err := zip.OpenReader(filepath.Join(c.dir, "rec.zip"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
	}
	zr.Close()
	if !names["index.json"] || !names["frames/000000.png"] || len(names) != len(rec.Frames)+1 {
		t.Errorf("rec.zip holds %v, want index.json and %d frames", names, len(rec.Frames))
	}

	testenv.NeedCommand(t, "ffmpeg")
	c.ok("browser", "record", "export", r, "rec.mp4")
	c.ok("browser", "record", "export", r, "out.bin", "--format", "mp4")
	for _, name := range []string{"rec.mp4", "out.bin"} {
		if b, err := os.ReadFile(filepath.Join(c.dir, name)); err != nil || len(b) < 12 || string(b[4:8]) != "ftyp" {
			t.Errorf("%s: %d bytes, %v; want an MP4", name, len(b), err)
		}
	}

	c.ok("browser", "record", "rm", r)
	c.fails(1, "recording_not_found", "browser", "record", "get", r)
	c.fails(1, "recording_not_found", "browser", "record", "export", r, "gone.zip")
	if _, err := os.Stat(filepath.Join(c.dir, "gone.zip")); !os.IsNotExist(err) {
		t.Errorf("a failed export left gone.zip: %v", err)
	}
	if ls := c.ok("browser", "record", "ls").stdout; strings.Contains(ls, r) {
		t.Errorf("record ls after rm = %q", ls)
	}
}
