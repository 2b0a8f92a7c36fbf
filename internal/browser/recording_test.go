package browser

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
)

// TestLoadRecordings: a start recovers what a previous daemon left on
// disk: a recording it left capturing is stopped (daemon_restart) at its
// last frame, files its metadata does not name are removed, a directory
// without metadata and one past its TTL are deleted, an export's
// temporary directory is removed, and the frames' bytes are counted. A
// later sweep deletes the recovered one once its TTL passes.
func TestLoadRecordings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := NewManager(Config{DataDir: dir, Chromium: "none", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Recordings: RecordingConfig{TTL: time.Hour}})
	root := m.recordingRoot()
	now := time.Now().UTC().Truncate(time.Millisecond)
	write := func(id string, meta *recordingMeta, files ...string) {
		t.Helper()
		d := filepath.Join(root, id)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if meta != nil {
			b, _ := json.Marshal(meta)
			if err := os.WriteFile(filepath.Join(d, "meta.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte("png!"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	frames := []apitype.RecordingFrame{{Index: 0, At: now.Add(-2 * time.Minute), Bytes: 4}, {Index: 1, At: now.Add(-time.Minute), Bytes: 4}}
	write("rec_live", &recordingMeta{ID: "rec_live", Tenant: "ten_a", SessionID: "brs_x", State: apitype.RecordingActive, IntervalMS: 5000,
		CreatedAt: now.Add(-3 * time.Minute), Frames: frames}, "000000.png", "000001.png", "000002.png", "meta.json.tmp", "000002.png.tmp")
	write("rec_kept", &recordingMeta{ID: "rec_kept", State: apitype.RecordingStopped, StoppedBy: "user", CreatedAt: now.Add(-time.Hour),
		StoppedAt: now.Add(-30 * time.Minute), Frames: frames[:1]}, "000000.png")
	write("rec_old", &recordingMeta{ID: "rec_old", State: apitype.RecordingStopped, StoppedBy: "user", CreatedAt: now.Add(-3 * time.Hour),
		StoppedAt: now.Add(-2 * time.Hour), Frames: frames[:1]}, "000000.png")
	write("rec_nometa", nil, "000000.png")
	write(".export-123", nil, "000000.png")

	m.loadRecordings()

	var ids []string
	for _, r := range m.Recordings(func(string) bool { return true }) {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if want := []string{"rec_kept", "rec_live"}; !slices.Equal(ids, want) {
		t.Fatalf("recordings after load = %v, want %v", ids, want)
	}
	got, err := m.Recording("rec_live")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != apitype.RecordingStopped || got.StoppedBy != apitype.RecordingStoppedDaemon || got.StoppedAt == nil ||
		!got.StoppedAt.Equal(frames[1].At) || len(got.Frames) != 2 {
		t.Errorf("recovered recording = %+v, want stopped by daemon_restart at its last frame, with 2 frames", got)
	}
	if tenant, _ := m.RecordingTenant("rec_live"); tenant != "ten_a" {
		t.Errorf("tenant = %q, want ten_a", tenant)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "rec_live"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"000000.png", "000001.png", "meta.json"}; !slices.Equal(names, want) {
		t.Errorf("rec_live holds %v after load, want %v", names, want)
	}
	var meta recordingMeta
	b, _ := os.ReadFile(filepath.Join(root, "rec_live", "meta.json"))
	if err := json.Unmarshal(b, &meta); err != nil || meta.State != apitype.RecordingStopped {
		t.Errorf("rec_live's meta.json after load: state %q (%v), want stopped on disk too", meta.State, err)
	}
	for _, gone := range []string{"rec_old", "rec_nometa", ".export-123"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s after load: %v, want removed", gone, err)
		}
	}
	if m.recs.bytes != 12 {
		t.Errorf("bytes after load = %d, want 12 (three kept frames of 4)", m.recs.bytes)
	}
	if _, err := m.RecordingFrame("rec_live", 1); err != nil {
		t.Errorf("frame 1 of the recovered recording: %v", err)
	}

	m.sweepRecordings(now.Add(50 * time.Minute)) // rec_kept's TTL passed, rec_live's not
	if _, err := m.Recording("rec_kept"); err == nil {
		t.Error("rec_kept is kept past its TTL")
	}
	if _, err := m.Recording("rec_live"); err != nil {
		t.Errorf("rec_live within its TTL: %v", err)
	}
	if m.recs.bytes != 8 {
		t.Errorf("bytes after the sweep = %d, want 8", m.recs.bytes)
	}
}
