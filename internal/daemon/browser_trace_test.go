package daemon_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/testenv"
)

// traceSite serves the pages of the trace, artifact and limit tests.
func traceSite(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><meta charset=utf-8>"+body)
		}
	}
	num := func(r *http.Request, name string, def int) int {
		if n, err := strconv.Atoi(r.URL.Query().Get(name)); err == nil {
			return n
		}
		return def
	}
	mux.HandleFunc("/{$}", page(`<title>Trace me</title><h1>Orders</h1>
<label for=secret>Secret</label><input id=secret>
<button id=go onclick="document.getElementById('out').textContent = 'went'">Go</button><p id=out></p>`))
	// /dl?n=N answers N bytes as an attachment: a download.
	mux.HandleFunc("/dl", func(w http.ResponseWriter, r *http.Request) {
		n := num(r, "n", 100)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="data-`+strconv.Itoa(n)+`.bin"`)
		w.Write(bytes.Repeat([]byte{'d'}, n))
	})
	// /console?n=N logs N messages as it loads.
	mux.HandleFunc("/console", func(w http.ResponseWriter, r *http.Request) {
		page(fmt.Sprintf(`<title>Console</title><script>for (let i = 0; i < %d; i++) console.log('message-' + i);</script>`, num(r, "n", 10)))(w, r)
	})
	// /many?n=N&len=L: N divs, each with text and three attributes of L
	// characters, and a password field with a value.
	mux.HandleFunc("/many", func(w http.ResponseWriter, r *http.Request) {
		n, l := num(r, "n", 10), num(r, "len", 10)
		var b strings.Builder
		b.WriteString(`<title>Many</title><input type=password id=pw value="pw-secret-value">`)
		long := strings.Repeat("t", l)
		for i := range n {
			fmt.Fprintf(&b, `<div data-a="%s" data-b="%s" data-c="%s">%d %s</div>`, long, long, long, i, long)
		}
		page(b.String())(w, r)
	})
	mux.HandleFunc("/frame", page(`<title>Frame</title><div style="height:300px">pad</div><iframe id=f src="/inner" style="position:absolute;left:50px;top:200px"></iframe>`))
	mux.HandleFunc("/inner", page(`<p id=in style="margin:0">inside</p>`))
	// /deep: buttons nested in groups 40 deep.
	mux.HandleFunc("/deep", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		b.WriteString(`<title>Deep</title><button>Top</button>`)
		for i := range 40 {
			fmt.Fprintf(&b, `<div role=group aria-label="g%d"><button>B%d</button>`, i, i)
		}
		b.WriteString(strings.Repeat("</div>", 40))
		page(b.String())(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// actErr runs an action that must fail and returns its error.
func actErr(t *testing.T, c *client.Client, id string, a apitype.BrowserAction) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.BrowserAction(ctx, id, a, nil)
	if err == nil {
		t.Fatalf("%s %+v succeeded, want an error", a.Op, a)
	}
	return err
}

// wantReason fails t unless err carries reason.
func wantReason(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if errcode.ReasonOf(err) != reason {
		t.Errorf("%s = %v (reason %q), want %s", what, err, errcode.ReasonOf(err), reason)
	}
}

// wantField fails t unless err is invalid with a problem on field.
func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.Invalid || ce.Problems[field] == "" {
		t.Errorf("%s = %v, want invalid with a problem on %s", what, err, field)
	}
}

// openProcess opens a session with a browser of its own.
func openProcess(t *testing.T, c *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeProcess,
		Viewport: &apitype.Viewport{Width: 400, Height: 300}})
	if err != nil {
		t.Fatalf("OpenBrowserSession(process): %v", err)
	}
	t.Cleanup(func() { _ = c.CloseBrowserSession(context.Background(), s.ID) })
	return s.ID
}

// readArtifact reads an artifact through the streaming route.
func readArtifact(t *testing.T, c *client.Client, id, artifactID string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := c.BrowserArtifact(context.Background(), id, artifactID, &buf); err != nil {
		t.Fatalf("BrowserArtifact(%s): %v", artifactID, err)
	}
	return buf.Bytes()
}

// traceEntries lists the trace working files and archives under a
// session's files directory.
func traceEntries(d *testenv.Daemon, id string) []string {
	names, _ := filepath.Glob(filepath.Join(d.DataDir, "browser", "files-"+id, "trace-*"))
	return names
}

// TestBrowserTraceArchive: traceStart and traceStop make a ZIP with a CDP
// trace, screenshots and the log of the actions run meanwhile, kept as an
// artifact that downloadRead and the artifacts route answer; the trace
// ops' errors; artifacts (downloads and traces) share the session's count;
// and they go with the session.
func TestBrowserTraceArchive(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.BrowserArtifacts = browser.ArtifactLimits{MaxFiles: 3} })
	site := traceSite(t)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// A context-mode session shares its browser: tracing it would record
	// other sessions' pages.
	shared, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantReason(t, "traceStart in context mode", actErr(t, c, shared.ID, apitype.BrowserAction{Op: "traceStart"}), "trace_needs_process_mode")
	_ = c.CloseBrowserSession(ctx, shared.ID)

	id := openProcess(t, c)
	wantReason(t, "traceStop before traceStart", actErr(t, c, id, apitype.BrowserAction{Op: "traceStop"}), "trace_not_active")
	act(t, c, id, apitype.BrowserAction{Op: "traceStart"}, nil)
	wantReason(t, "a second traceStart", actErr(t, c, id, apitype.BrowserAction{Op: "traceStart"}), "trace_active")
	act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/"}, nil)
	act(t, c, id, apitype.BrowserAction{Op: "fill", Selector: "#secret", Value: "typed-secret-4711"}, nil)
	act(t, c, id, apitype.BrowserAction{Op: "click", Selector: "#go"}, nil)
	_ = actErr(t, c, id, apitype.BrowserAction{Op: "click", Selector: "#missing", TimeoutMS: 300})
	var tr apitype.BrowserTrace
	act(t, c, id, apitype.BrowserAction{Op: "traceStop"}, &tr)
	if !strings.HasPrefix(tr.ID, "art_") || tr.Kind != apitype.ArtifactTrace || tr.Size == 0 || tr.MimeType != "application/zip" ||
		!strings.HasSuffix(tr.Filename, ".zip") || tr.Actions != 4 || tr.Screenshots < 2 {
		t.Errorf("traceStop = %+v, want a zip artifact with 4 actions and screenshots at start and stop at least", tr)
	}
	wantReason(t, "a second traceStop", actErr(t, c, id, apitype.BrowserAction{Op: "traceStop"}), "trace_not_active")

	raw := readArtifact(t, c, id, tr.ID)
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != tr.SHA256 || int64(len(raw)) != tr.Size {
		t.Errorf("the artifact route gave %d bytes of sha256 %x, want %d of %s", len(raw), sum, tr.Size, tr.SHA256)
	}
	z, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("the trace is not a ZIP: %v", err)
	}
	files := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], _ = io.ReadAll(r)
		r.Close()
	}
	var cdpTrace struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(files["trace.json"], &cdpTrace); err != nil || len(cdpTrace.TraceEvents) == 0 {
		t.Errorf("trace.json (%d bytes) = %d events, %v; want a CDP trace", len(files["trace.json"]), len(cdpTrace.TraceEvents), err)
	}
	shots := 0
	for name, b := range files {
		if strings.HasPrefix(name, "screenshots/") {
			shots++
			if !bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}) {
				t.Errorf("%s is not a JPEG", name)
			}
		}
	}
	if shots != tr.Screenshots {
		t.Errorf("the ZIP holds %d screenshots, traceStop said %d", shots, tr.Screenshots)
	}
	var log struct {
		Actions []struct {
			Op, Outcome, Screenshot string
			DurationMS              int64 `json:"duration_ms"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(files["actions.json"], &log); err != nil {
		t.Fatalf("actions.json: %v\n%s", err, files["actions.json"])
	}
	var ops []string
	named := 0
	for _, a := range log.Actions {
		ops = append(ops, a.Op+":"+a.Outcome)
		if a.Screenshot != "" {
			named++
			if files[a.Screenshot] == nil {
				t.Errorf("action %s names screenshot %s, not in the ZIP", a.Op, a.Screenshot)
			}
		}
	}
	// A capture after an action that ends while the previous capture runs
	// is skipped; the failed click waited 300 ms, long enough for one.
	if named == 0 {
		t.Errorf("no action of the log has a screenshot:\n%s", files["actions.json"])
	}
	if got, want := strings.Join(ops, " "), "navigate:ok fill:ok click:ok click:target_not_found"; got != want {
		t.Errorf("action log = %s, want %s", got, want)
	}
	if bytes.Contains(files["actions.json"], []byte("typed-secret-4711")) || bytes.Contains(files["actions.json"], []byte("#secret")) {
		t.Errorf("the action log holds a typed value or a target:\n%s", files["actions.json"])
	}
	var inline apitype.BrowserArtifactContent
	act(t, c, id, apitype.BrowserAction{Op: "downloadRead", ArtifactID: tr.ID}, &inline)
	if b, _ := base64.StdEncoding.DecodeString(inline.Base64); !bytes.Equal(b, raw) || inline.SHA256 != tr.SHA256 {
		t.Errorf("downloadRead of the trace gave %d bytes, the route %d", len(b), len(raw))
	}
	if left := traceEntries(d, id); len(left) != 1 || !strings.HasSuffix(left[0], ".zip") {
		t.Errorf("trace files kept after traceStop = %v, want the ZIP alone", left)
	}

	// Downloads share the trace's budget of 3 files.
	var dls []apitype.BrowserDownload
	for _, n := range []int{1000, 2000} {
		var dl apitype.BrowserDownload
		act(t, c, id, apitype.BrowserAction{Op: "download", URL: site + "/dl?n=" + strconv.Itoa(n)}, &dl)
		if dl.Size != int64(n) || !strings.HasPrefix(dl.ArtifactID, "art_") || dl.Filename != fmt.Sprintf("data-%d.bin", n) {
			t.Errorf("download = %+v, want %d bytes kept as an artifact", dl, n)
		}
		var got apitype.BrowserArtifactContent
		act(t, c, id, apitype.BrowserAction{Op: "downloadRead", ArtifactID: dl.ArtifactID}, &got)
		if b, _ := base64.StdEncoding.DecodeString(got.Base64); got.Kind != apitype.ArtifactDownload || len(b) != n || got.Base64 != dl.Base64 {
			t.Errorf("downloadRead(%s) = %+v (%d bytes)", dl.ArtifactID, got.BrowserArtifact, len(b))
		}
		dls = append(dls, dl)
	}
	list, err := c.BrowserArtifacts(ctx, id)
	if err != nil || list.Files != 3 || list.MaxFiles != 3 || list.Bytes != tr.Size+3000 || len(list.Artifacts) != 3 || list.Artifacts[0].ID != tr.ID {
		t.Errorf("artifacts = %+v, %v; want the trace and two downloads", list, err)
	}
	downDir := filepath.Join(d.DataDir, "browser", "files-"+id, "down")
	before, _ := os.ReadDir(downDir)
	wantReason(t, "a fourth artifact", actErr(t, c, id, apitype.BrowserAction{Op: "download", URL: site + "/dl?n=10"}), "artifact_limit")
	if after, _ := os.ReadDir(downDir); len(after) != len(before) {
		t.Errorf("a refused download left files: %d before, %d after", len(before), len(after))
	}
	wantReason(t, "traceStart with no room", actErr(t, c, id, apitype.BrowserAction{Op: "traceStart"}), "artifact_limit")
	if err := c.DeleteBrowserArtifact(ctx, id, dls[0].ArtifactID); err != nil {
		t.Fatalf("downloadDelete: %v", err)
	}
	wantReason(t, "downloadRead of a deleted artifact", actErr(t, c, id, apitype.BrowserAction{Op: "downloadRead", ArtifactID: dls[0].ArtifactID}), "artifact_not_found")
	wantReason(t, "downloadDelete of a deleted artifact", actErr(t, c, id, apitype.BrowserAction{Op: "downloadDelete", ArtifactID: dls[0].ArtifactID}), "artifact_not_found")
	if _, err := c.BrowserArtifact(ctx, id, dls[0].ArtifactID, io.Discard); errcode.ReasonOf(err) != "artifact_not_found" {
		t.Errorf("GET of a deleted artifact = %v, want artifact_not_found", err)
	}
	// Positive control: with room again, the same download is kept.
	var again apitype.BrowserDownload
	act(t, c, id, apitype.BrowserAction{Op: "download", URL: site + "/dl?n=10"}, &again)
	if again.ArtifactID == "" {
		t.Errorf("download after a delete = %+v", again)
	}

	// The artifacts go with the session.
	if err := c.CloseBrowserSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.DataDir, "browser", "files-"+id)); !os.IsNotExist(err) {
		t.Errorf("the session's files outlive it: %v", err)
	}
	if _, err := c.BrowserArtifact(ctx, id, tr.ID, io.Discard); errcode.ReasonOf(err) != "session_not_found" {
		t.Errorf("GET of a closed session's artifact = %v, want session_not_found", err)
	}
}

// traceRound starts a trace, loads a page, clicks, waits (if wait > 0)
// and stops it: the trace or the error traceStop answers.
func traceRound(t *testing.T, c *client.Client, id, site string, wait time.Duration) (apitype.BrowserTrace, error) {
	t.Helper()
	act(t, c, id, apitype.BrowserAction{Op: "traceStart"}, nil)
	act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/"}, nil)
	act(t, c, id, apitype.BrowserAction{Op: "click", Selector: "#go"}, nil)
	time.Sleep(wait) // a trace's time limit can only be passed by waiting it out
	var tr apitype.BrowserTrace
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "traceStop"}, &tr)
	return tr, err
}

// TestBrowserTraceLimits: a trace past its byte budget or its time limit
// is discarded whole (trace_discarded, no artifact, no file), and the same
// trace within them (the positive control) is kept. The artifact byte
// budget refuses a download that does not fit.
func TestBrowserTraceLimits(t *testing.T) {
	t.Parallel()
	needChromium(t)
	site := traceSite(t)
	const limit = 30 * time.Second // the positive control must finish within it on a loaded machine
	tiny := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.BrowserArtifacts = browser.ArtifactLimits{TraceMaxBytes: 16 << 10, MaxBytes: 100 << 10}
	})
	short := testenv.StartDaemon(t, func(c *daemon.Config) { c.BrowserArtifacts = browser.ArtifactLimits{TraceMaxDuration: limit} })

	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		c := tiny.Client
		id := openProcess(t, c)
		_, err := traceRound(t, c, id, site, 0)
		wantReason(t, "traceStop past the byte budget", err, "trace_discarded")
		if list, err := c.BrowserArtifacts(context.Background(), id); err != nil || list.Files != 0 {
			t.Errorf("artifacts after a discarded trace = %+v, %v; want none", list, err)
		}
		testenv.Eventually(t, 60*time.Second, "the discarded trace's files to go", func() bool { return len(traceEntries(tiny, id)) == 0 })
		wantReason(t, "traceStop after the discard", actErr(t, c, id, apitype.BrowserAction{Op: "traceStop"}), "trace_not_active")

		// The artifact byte budget (100 KiB): 60 KB fits, 60 KB more does not.
		act(t, c, id, apitype.BrowserAction{Op: "download", URL: site + "/dl?n=60000"}, nil)
		wantReason(t, "a download past the byte budget", actErr(t, c, id, apitype.BrowserAction{Op: "download", URL: site + "/dl?n=60000"}), "artifact_limit")
		if list, _ := c.BrowserArtifacts(context.Background(), id); list.Files != 1 || list.Bytes != 60000 || list.MaxBytes != 100<<10 {
			t.Errorf("artifacts = %+v, want the one download", list)
		}
	})
	t.Run("time", func(t *testing.T) {
		t.Parallel()
		c := short.Client
		id := openProcess(t, c)
		// Positive control for both limits: the same trace, at once, with
		// the default byte budget.
		tr, err := traceRound(t, c, id, site, 0)
		if err != nil || tr.Size == 0 {
			t.Fatalf("a trace within its limits = %+v, %v", tr, err)
		}
		start := time.Now()
		_, err = traceRound(t, c, id, site, limit+2*time.Second)
		wantReason(t, fmt.Sprintf("traceStop after %s (limit %s)", time.Since(start).Round(time.Second), limit), err, "trace_discarded")
		if list, _ := c.BrowserArtifacts(context.Background(), id); list.Files != 1 || list.Artifacts[0].ID != tr.ID {
			t.Errorf("artifacts = %+v, want the first trace alone", list)
		}
		testenv.Eventually(t, 60*time.Second, "the discarded trace's files to go", func() bool { return len(traceEntries(short, id)) == 1 })
	})
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		// A session closing with a trace running discards it: nothing of
		// it (or of the session's files) is left.
		c := short.Client
		id := openProcess(t, c)
		act(t, c, id, apitype.BrowserAction{Op: "traceStart"}, nil)
		act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/"}, nil)
		if len(traceEntries(short, id)) != 1 {
			t.Fatalf("a running trace has no working directory: the check below would prove nothing")
		}
		if err := c.CloseBrowserSession(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(short.DataDir, "browser", "files-"+id)); !os.IsNotExist(err) {
			t.Errorf("a closed session's trace files are left: %v", err)
		}
	})
}

// TestBrowserDiagnosticsDialogInspectLimits checks the seed's limits: the
// diagnostics ring (200 events, console text off by default, switched on
// and off, cleared), the dialog policy's lifetime, inspect's bounds and
// coordinate space, and accessibility's depth.
func TestBrowserDiagnosticsDialogInspectLimits(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	site := traceSite(t)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 800, Height: 600}})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID
	type diagView struct {
		Events      []apitype.BrowserEvent `json:"events"`
		Dropped     int                    `json:"dropped"`
		ConsoleText bool                   `json:"console_text"`
	}
	diag := func(a apitype.BrowserAction) diagView {
		t.Helper()
		a.Op = "diagnostics"
		var v diagView
		act(t, c, id, a, &v)
		return v
	}
	texts := func(v diagView) []string {
		var out []string
		for _, e := range v.Events {
			if e.Kind == "console" && e.Text != "" {
				out = append(out, e.Text)
			}
		}
		return out
	}
	on, off := true, false

	t.Run("diagnostics", func(t *testing.T) {
		act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/console?n=250"}, nil)
		var v diagView
		testenv.Eventually(t, 60*time.Second, "250 console events", func() bool {
			v = diag(apitype.BrowserAction{})
			return len(v.Events) == 200 && v.Dropped >= 50
		})
		if len(texts(v)) != 0 || v.ConsoleText {
			t.Errorf("console text kept by default: %q (console_text %t)", texts(v), v.ConsoleText)
		}
		v = diag(apitype.BrowserAction{ConsoleText: &on})
		if !v.ConsoleText {
			t.Errorf("console_text after switching it on = false")
		}
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: `console.log('kept-' + 'x'.repeat(3000)); console.log('short-one')`}, nil)
		testenv.Eventually(t, 60*time.Second, "console text", func() bool { return len(texts(diag(apitype.BrowserAction{}))) == 2 })
		got := texts(diag(apitype.BrowserAction{}))
		if len(got[0]) != 2048 || !strings.HasPrefix(got[0], "kept-") || got[1] != "short-one" {
			t.Errorf("console texts = %d bytes starting %.10q, %q; want 2048 bytes, then short-one", len(got[0]), got[0], got[1])
		}
		v = diag(apitype.BrowserAction{ConsoleText: &off})
		if len(texts(v)) != 0 || v.ConsoleText || len(v.Events) != 200 {
			t.Errorf("after switching console text off: %d events, texts %q, console_text %t; want the texts purged", len(v.Events), texts(v), v.ConsoleText)
		}
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: `console.log('after-off')`}, nil)
		if v := diag(apitype.BrowserAction{}); len(texts(v)) != 0 {
			t.Errorf("console text kept while off: %q", texts(v))
		}
		if v := diag(apitype.BrowserAction{Clear: true}); len(v.Events) != 0 || v.Dropped != 0 {
			t.Errorf("diagnostics after clear = %d events, %d dropped", len(v.Events), v.Dropped)
		}
		// Positive control: the emptied ring still records.
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: `console.warn('again')`}, nil)
		testenv.Eventually(t, 60*time.Second, "an event after clear", func() bool {
			v := diag(apitype.BrowserAction{})
			return len(v.Events) == 1 && v.Events[0].Level == "warning" && v.Events[0].Text == ""
		})
	})

	t.Run("dialog", func(t *testing.T) {
		var p map[string]any
		act(t, c, id, apitype.BrowserAction{Op: "dialog", Accept: true}, &p)
		if p["expires_in_ms"] != float64(10000) {
			t.Errorf("dialog policy = %v, want it to last 10000 ms by default", p)
		}
		for _, ms := range []int64{30001, -1, 3_600_000} {
			wantField(t, fmt.Sprintf("dialog ttl_ms %d", ms), actErr(t, c, id, apitype.BrowserAction{Op: "dialog", TTLMS: ms}), "ttl_ms")
		}
		act(t, c, id, apitype.BrowserAction{Op: "dialog", Accept: true, PromptText: "answer-secret", TTLMS: 30000}, &p)
		if p["expires_in_ms"] != float64(30000) {
			t.Errorf("dialog policy of 30000 ms = %v", p)
		}
		var answer string
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: `prompt('question-secret') || 'none'`}, &answer)
		if answer != "answer-secret" {
			t.Errorf("prompt answered %q under an accepting policy", answer)
		}
		var confirmed bool
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: `confirm('again?')`}, &confirmed)
		if confirmed {
			t.Errorf("a second dialog was accepted: the policy is one-shot")
		}
		v := diag(apitype.BrowserAction{})
		var actions []string
		for _, e := range v.Events {
			if e.Kind == "dialog" {
				actions = append(actions, e.Level+":"+e.Action)
				if e.Text != "" {
					t.Errorf("dialog event has text %q", e.Text)
				}
			}
		}
		if got := strings.Join(actions, " "); got != "prompt:accepted confirm:dismissed" {
			t.Errorf("dialog events = %s, want prompt:accepted confirm:dismissed", got)
		}
		b, _ := json.Marshal(v)
		if bytes.Contains(b, []byte("secret")) {
			t.Errorf("diagnostics hold a dialog's message or answer: %s", b)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		type node struct {
			Tag        string            `json:"tag"`
			Text       string            `json:"text"`
			Attributes map[string]string `json:"attributes"`
			Value      *string           `json:"value"`
			Box        [4]float64        `json:"box"`
		}
		type result struct {
			Nodes           []node `json:"nodes"`
			Truncated       bool   `json:"truncated"`
			CoordinateSpace string `json:"coordinate_space"`
		}
		act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/many?n=600&len=5000"}, nil)
		var r result
		act(t, c, id, apitype.BrowserAction{Op: "inspect"}, &r)
		if len(r.Nodes) != 100 || !r.Truncated || r.CoordinateSpace != "main_viewport" {
			t.Errorf("inspect = %d nodes, truncated %t, space %q; want 100, true, main_viewport", len(r.Nodes), r.Truncated, r.CoordinateSpace)
		}
		for _, n := range r.Nodes {
			if len([]rune(n.Text)) > 257 || len([]rune(n.Attributes["data-a"])) > 257 {
				t.Fatalf("a field of %d characters passed the default 256", len([]rune(n.Text)))
			}
			if n.Tag == "input" && (n.Value != nil || n.Attributes["value"] != "") {
				t.Errorf("inspect shows a password: %+v", n)
			}
		}
		// The most: 500 elements and 4096 characters, and 4 MiB in all.
		var raw json.RawMessage
		act(t, c, id, apitype.BrowserAction{Op: "inspect", MaxElements: 500, MaxTextLength: 4096}, &raw)
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if len(raw) > 4<<20 || !r.Truncated || len(r.Nodes) >= 500 || len(r.Nodes) < 100 || len([]rune(r.Nodes[10].Text)) != 4097 {
			t.Errorf("inspect at the most = %d bytes, %d nodes, truncated %t; want under 4 MiB, cut by size", len(raw), len(r.Nodes), r.Truncated)
		}
		act(t, c, id, apitype.BrowserAction{Op: "inspect", MaxElements: 500, MaxTextLength: 10, Selector: "body"}, &r)
		if len(r.Nodes) != 500 || !r.Truncated {
			t.Errorf("inspect of 500 short elements = %d nodes, truncated %t", len(r.Nodes), r.Truncated)
		}
		wantField(t, "inspect max_elements 501", actErr(t, c, id, apitype.BrowserAction{Op: "inspect", MaxElements: 501}), "max_elements")
		wantField(t, "inspect max_text_length 4097", actErr(t, c, id, apitype.BrowserAction{Op: "inspect", MaxTextLength: 4097}), "max_text_length")

		act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/frame"}, nil)
		act(t, c, id, apitype.BrowserAction{Op: "inspect", Target: &apitype.BrowserTarget{Selector: "#in", Frame: []string{"#f"}}}, &r)
		// The frame's body margin (8 px) from the frame's corner, not the
		// frame's place on the page (50, 500).
		if len(r.Nodes) != 1 || r.CoordinateSpace != "frame_viewport" || r.Nodes[0].Box[0] != 8 || r.Nodes[0].Box[1] != 8 {
			t.Errorf("inspect in a frame = %+v, want one node at (8, 8) in frame_viewport", r)
		}
		act(t, c, id, apitype.BrowserAction{Op: "inspect", Selector: "#f"}, &r)
		if len(r.Nodes) != 1 || r.CoordinateSpace != "main_viewport" || r.Nodes[0].Box[0] < 50 || r.Nodes[0].Box[1] < 200 {
			t.Errorf("inspect of the iframe = %+v, want its place on the page in main_viewport", r)
		}
	})

	t.Run("accessibility", func(t *testing.T) {
		act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: site + "/deep"}, nil)
		deepest := func(yaml string) int {
			most := 0
			for line := range strings.SplitSeq(yaml, "\n") {
				trimmed := strings.TrimLeft(line, " ")
				if strings.HasPrefix(trimmed, "- ") {
					most = max(most, (len(line)-len(trimmed))/2+1)
				}
			}
			return most
		}
		type result struct {
			YAML            string                `json:"yaml"`
			Depth           int                   `json:"depth"`
			Boxes           map[string][4]float64 `json:"boxes"`
			CoordinateSpace string                `json:"coordinate_space"`
		}
		var r result
		act(t, c, id, apitype.BrowserAction{Op: "accessibility"}, &r)
		if got := deepest(r.YAML); r.Depth != 20 || got > 20 || got < 15 || !strings.Contains(r.YAML, `button "Top"`) {
			t.Errorf("accessibility = depth %d, deepest line %d; want 20 at most:\n%s", r.Depth, got, r.YAML)
		}
		act(t, c, id, apitype.BrowserAction{Op: "accessibility", Depth: 3, Boxes: true}, &r)
		if got := deepest(r.YAML); got > 3 || r.Boxes == nil || r.CoordinateSpace != "main_viewport" {
			t.Errorf("accessibility depth 3 = deepest line %d, boxes %v:\n%s", got, r.Boxes, r.YAML)
		}
		ref := regexp.MustCompile(`button "Top" \[ref=(e\d+)\]`).FindStringSubmatch(r.YAML)
		if ref == nil {
			t.Fatalf("no ref for Top:\n%s", r.YAML)
		}
		if b := r.Boxes[ref[1]]; b[2] <= 0 || b[3] <= 0 {
			t.Errorf("box of %s = %v, want a size", ref[1], b)
		}
		wantField(t, "accessibility depth 21", actErr(t, c, id, apitype.BrowserAction{Op: "accessibility", Depth: 21}), "depth")
	})
}

// TestBrowserChromiumEnvironment: every Chromium the daemon starts (the
// shared browser of context mode, and process mode's) has an allowlisted
// environment and a private home, not the daemon's environment. The
// positive control: the daemon's own environment holds the marker.
//
// Not parallel: it sets an environment variable of the test process,
// which the daemon process inherits.
func TestBrowserChromiumEnvironment(t *testing.T) {
	needChromium(t)
	marker := "berth-env-marker-" + ident.New("")
	t.Setenv("BERTH_TEST_MARKER", marker)
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	environ := func(pid int) []string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return nil
		}
		return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	if env := environ(d.Cmd.Process.Pid); !strings.Contains(strings.Join(env, "\n"), marker) {
		t.Fatalf("the daemon's environment lacks the marker: the probe would prove nothing")
	}
	for _, mode := range []string{apitype.BrowserModeContext, apitype.BrowserModeProcess} {
		s, err := d.Client.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: mode})
		if err != nil {
			t.Fatalf("OpenBrowserSession(%s): %v", mode, err)
		}
		defer d.Client.CloseBrowserSession(context.WithoutCancel(ctx), s.ID)
	}
	browserDir := filepath.Join(d.DataDir, "browser") + "/"
	profiles := map[string]bool{}
	pids := testenv.ProcessesUnder("--user-data-dir=" + browserDir)
	for _, pid := range pids {
		env := environ(pid)
		if env == nil {
			continue // gone meanwhile
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		profile := ""
		for arg := range strings.SplitSeq(string(cmdline), "\x00") {
			if v, ok := strings.CutPrefix(arg, "--user-data-dir="); ok {
				profile = v
			}
		}
		profiles[profile] = true
		vars := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
			if strings.Contains(kv, marker) {
				t.Errorf("chromium %d (%s) has the daemon's variable %s", pid, profile, k)
			}
		}
		if want := filepath.Join(profile, ".home"); vars["HOME"] != want {
			t.Errorf("chromium %d: HOME = %q, want %q", pid, vars["HOME"], want)
		}
		if fi, err := os.Stat(vars["HOME"]); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("chromium %d: HOME %s is not a private directory: %v %v", pid, vars["HOME"], fi, err)
		}
		if vars["PATH"] != "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" {
			t.Errorf("chromium %d: PATH = %q, want the system's", pid, vars["PATH"])
		}
	}
	var shared, process bool
	for p := range profiles {
		shared = shared || strings.HasPrefix(filepath.Base(p), "shared-")
		process = process || strings.HasPrefix(filepath.Base(p), "profile-")
	}
	if !shared || !process {
		t.Errorf("checked %d processes of profiles %v, want the shared browser's and a process session's", len(pids), profiles)
	}
}
