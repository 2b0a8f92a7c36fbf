package runner

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/testenv"
)

// fixture is a started runner behind a test server, with input and output
// directories of its own.
type fixture struct {
	t       *testing.T
	r       *Runner
	srv     *httptest.Server
	in, out string
}

// newFixture starts a runner that serves many jobs, as a reused runtime
// does (--job-runtime-reuse): most tests run several jobs on one.
func newFixture(t *testing.T, profile string) *fixture {
	t.Helper()
	return newFixtureJobs(t, profile, 100)
}

func newFixtureJobs(t *testing.T, profile string, jobs int) *fixture {
	t.Helper()
	cfg := Config{Profile: profile, InputDir: t.TempDir(), OutputDir: t.TempDir(), Jobs: jobs, Logger: testLogger(t)}
	switch profile {
	case jobspec.ProfileBrowser:
		cfg.Chromium = testenv.NeedChromium(t)
	case jobspec.ProfileOffice:
		cfg.Soffice = testenv.NeedCommand(t, "soffice")
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, r: r, srv: httptest.NewServer(r.Handler()), in: cfg.InputDir, out: cfg.OutputDir}
	t.Cleanup(f.srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { f.closeAndCheck() })
	return f
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// closeAndCheck closes the runner and fails the test if a process it
// started outlives Close.
func (f *fixture) closeAndCheck() {
	t := f.t
	t.Helper()
	var pids []int
	var dirs []string
	f.r.mu.Lock()
	if c := f.r.chrome; c != nil && c.pid != 0 {
		pids = append([]int{c.pid}, descendants(c.pid)...)
	}
	if o := f.r.office; o != nil {
		dirs = append(dirs, o.dir)
	}
	f.r.mu.Unlock()
	if err := f.r.Stop(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d (%s) outlived Close", pid, cmdline(pid))
		}
	}
	for _, d := range dirs {
		if ps := testenv.ProcessesUnder(d); len(ps) > 0 {
			t.Errorf("processes %v on %s outlived Close", ps, d)
		}
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("office directory %s is still there after Stop (%v)", d, err)
		}
	}
}

// descendants returns the processes whose parent chain leads to pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, _, ok := procStat(p); ok {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q, n := parent[p], 0; q > 1 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// procStat returns a process's parent and state.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return ppid, fields[0][0], true
}

// alive reports whether a process runs (a zombie has ended).
func alive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z'
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	s := strings.ReplaceAll(string(b), "\x00", " ")
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// write puts an input file in place.
func (f *fixture) write(name string, data []byte) {
	f.t.Helper()
	p := filepath.Join(f.in, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// copyTree copies a testdata directory into the inputs.
func (f *fixture) copyTree(dir string) {
	f.t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f.write(filepath.ToSlash(rel), b)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// response is the runner's answer to a request.
type response struct {
	status  int
	result  jobspec.Result
	failure jobspec.Failure
	raw     string
}

func (f *fixture) run(req jobspec.Request) response {
	f.t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.post(string(b))
}

func (f *fixture) post(body string) response {
	f.t.Helper()
	resp, err := http.Post(f.srv.URL+"/run", "application/json", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, raw: string(raw)}
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(raw, &r.result)
	} else {
		err = json.Unmarshal(raw, &r.failure)
	}
	if err != nil {
		f.t.Fatalf("decoding %q: %v", raw, err)
	}
	return r
}

// mustRun runs a request that must succeed and returns the path of its
// one output.
func (f *fixture) mustRun(req jobspec.Request, wantName, wantMIME string) (string, jobspec.Result) {
	f.t.Helper()
	r := f.run(req)
	if r.status != http.StatusOK {
		f.t.Fatalf("run %s = %d %s, want 200", req.Action, r.status, r.raw)
	}
	if len(r.result.Outputs) != 1 || r.result.Outputs[0].Name != wantName || r.result.Outputs[0].MIME != wantMIME {
		f.t.Fatalf("run %s outputs = %+v, want one %s (%s)", req.Action, r.result.Outputs, wantName, wantMIME)
	}
	return filepath.Join(f.out, wantName), r.result
}

func wantFailure(t *testing.T, r response, status int, reason string, retryable bool) {
	t.Helper()
	if r.status != status || r.failure.Reason != reason || r.failure.Retryable != retryable {
		t.Errorf("answer = %d %s, want %d with reason %s, retryable %v", r.status, r.raw, status, reason, retryable)
	}
}

// pdfInfo returns pdfinfo's page count and first page size in points.
func pdfInfo(t *testing.T, path string) (pages int, w, h float64) {
	t.Helper()
	out, err := exec.Command(testenv.NeedCommand(t, "pdfinfo"), path).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo %s: %v\n%s", path, err, out)
	}
	if m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(out); m != nil {
		pages, _ = strconv.Atoi(string(m[1]))
	}
	if m := regexp.MustCompile(`(?m)^Page size:\s+([\d.]+) x ([\d.]+) pts`).FindSubmatch(out); m != nil {
		w, _ = strconv.ParseFloat(string(m[1]), 64)
		h, _ = strconv.ParseFloat(string(m[2]), 64)
	}
	if pages == 0 || w == 0 {
		t.Fatalf("pdfinfo %s: no page count or size in\n%s", path, out)
	}
	return pages, w, h
}

func pdfText(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(testenv.NeedCommand(t, "pdftotext"), "-layout", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext %s: %v\n%s", path, err, out)
	}
	return string(out)
}

func pngBytes(t *testing.T, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func near(got, want float64) bool { return got > want-2 && got < want+2 }

func TestHTMLPDF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.copyTree("testdata/threepage")
	f.write("img/logo.png", pngBytes(t, 40, 20, color.RGBA{200, 30, 30, 255}))

	t.Run("default", func(t *testing.T) {
		path, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF}, resultPDF, "application/pdf")
		pages, w, h := pdfInfo(t, path)
		if pages != 3 || res.Outputs[0].Pages != 3 {
			t.Errorf("pages = %d (pdfinfo), %d (result), want 3", pages, res.Outputs[0].Pages)
		}
		if !near(w, 612) || !near(h, 792) {
			t.Errorf("page size = %g x %g pts, want Letter 612 x 792", w, h)
		}
		text := pdfText(t, path)
		for _, want := range []string{"PAGE-ONE-TEXT", "PAGE-TWO-TEXT", "PAGE-THREE-TEXT", "IMAGE-LOADED-40", "alpha"} {
			if !strings.Contains(text, want) {
				t.Errorf("PDF text lacks %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "CSS-NOT-LOADED") {
			t.Errorf("the stylesheet did not load: PDF text has CSS-NOT-LOADED")
		}
		if len(res.Blocked) != 0 {
			t.Errorf("blocked = %v, want none", res.Blocked)
		}
		leftovers, _ := filepath.Glob(filepath.Join(f.out, ".*"))
		if len(leftovers) != 0 {
			t.Errorf("temporary files left in the output directory: %v", leftovers)
		}
	})
	t.Run("a4_landscape", func(t *testing.T) {
		path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF,
			Options: jobspec.Options{Paper: "A4", Landscape: true}}, resultPDF, "application/pdf")
		if _, w, h := pdfInfo(t, path); !near(w, 842) || !near(h, 595) {
			t.Errorf("page size = %g x %g pts, want A4 landscape 842 x 595", w, h)
		}
	})
	t.Run("header_footer", func(t *testing.T) {
		m := 0.8
		path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, Options: jobspec.Options{
			MarginTop: &m, MarginBottom: &m,
			HeaderTemplate: `<div style="font-size:10px">HEADER-MARK <span class="title"></span></div>`,
			FooterTemplate: `<div style="font-size:10px">FOOTER-MARK <span class="pageNumber"></span> of <span class="totalPages"></span></div>`,
		}}, resultPDF, "application/pdf")
		text := pdfText(t, path)
		for _, want := range []string{"HEADER-MARK Three Page Report", "FOOTER-MARK 1 of 3", "FOOTER-MARK 3 of 3"} {
			if !strings.Contains(text, want) {
				t.Errorf("PDF text lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("page_ranges", func(t *testing.T) {
		path, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, Options: jobspec.Options{PageRanges: "2-3"}},
			resultPDF, "application/pdf")
		if pages, _, _ := pdfInfo(t, path); pages != 2 || res.Outputs[0].Pages != 2 {
			t.Errorf("pages = %d (pdfinfo), %d (result), want 2", pages, res.Outputs[0].Pages)
		}
		if text := pdfText(t, path); strings.Contains(text, "PAGE-ONE-TEXT") || !strings.Contains(text, "PAGE-TWO-TEXT") {
			t.Errorf("pages 2-3 text:\n%s", text)
		}
	})
	t.Run("page_range_out_of_range", func(t *testing.T) {
		wantFailure(t, f.run(jobspec.Request{Action: jobspec.HTMLPDF, Options: jobspec.Options{PageRanges: "7-9"}}),
			http.StatusUnprocessableEntity, "invalid_options", false)
	})
}

func TestHTMLPDFTiming(t *testing.T) {
	// Not parallel: the timings are of one job on an otherwise quiet
	// machine. Logged, never asserted (see STYLE.md).
	f := newFixture(t, jobspec.ProfileBrowser)
	f.copyTree("testdata/threepage")
	f.write("img/logo.png", pngBytes(t, 40, 20, color.RGBA{200, 30, 30, 255}))
	var ds []time.Duration
	for range 21 {
		t0 := time.Now()
		_, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF}, resultPDF, "application/pdf")
		d := time.Since(t0)
		if res.Outputs[0].Pages != 3 {
			t.Fatalf("pages = %d, want 3", res.Outputs[0].Pages)
		}
		ds = append(ds, d)
		// Warm, as a pooled runner is when its job comes: the next tab is
		// made.
		testenv.Eventually(t, 30*time.Second, "the next job's tab", func() bool { return len(f.r.chrome.next) == 1 })
	}
	first := ds[0]
	ds = ds[1:]
	slices.Sort(ds)
	t.Logf("html-pdf, 3 pages, warm runner, %d runs: p50 %v, p90 %v, min %v, max %v (first job %v)",
		len(ds), ds[len(ds)/2].Round(100*time.Microsecond), ds[len(ds)*9/10].Round(100*time.Microsecond),
		ds[0].Round(100*time.Microsecond), ds[len(ds)-1].Round(100*time.Microsecond), first.Round(100*time.Microsecond))
}

func TestHTMLPNG(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("index.html", []byte(`<!DOCTYPE html><html><body style="margin:0;background:#3060c0">
<div style="height:3000px">tall page</div></body></html>`))
	f.write("short.html", []byte(`<!DOCTYPE html><html><body style="margin:0"><p>short</p></body></html>`))
	for _, tc := range []struct {
		name       string
		main       string
		opts       jobspec.Options
		wantW      int
		wantH      int
		wantBelowH bool // full page: taller than the viewport
	}{
		{name: "default_viewport", opts: jobspec.Options{}, wantW: 1280, wantH: 800},
		{name: "viewport_and_scale", opts: jobspec.Options{Width: 400, Height: 300, DeviceScaleFactor: 2}, wantW: 800, wantH: 600},
		{name: "full_page", opts: jobspec.Options{Width: 400, Height: 300, FullPage: true}, wantW: 400, wantH: 3000},
		{name: "full_page_short", main: "short.html", opts: jobspec.Options{Width: 400, Height: 300, FullPage: true}, wantW: 400, wantH: 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPNG, Main: tc.main, Options: tc.opts}, resultPNG, "image/png")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("decoding the PNG: %v", err)
			}
			if got := img.Bounds().Size(); got.X != tc.wantW || got.Y != tc.wantH {
				t.Errorf("PNG size = %dx%d, want %dx%d", got.X, got.Y, tc.wantW, tc.wantH)
			}
		})
	}
}

func TestHTMLPPTX(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("index.html", []byte(`<!DOCTYPE html><html><head><title>Deck Title</title><style>
body { margin: 0 } section { width: 100vw; height: 100vh; font-size: 48px }
aside.notes { color: red }
</style></head><body>
<section style="background:#f00">Slide one<aside class="notes"><p>Note for slide one.</p><p>Second line.</p></aside></section>
<section style="background:#0f0">Slide two<aside class="notes">Note two</aside></section>
<section style="background:#00f">Slide three</section>
</body></html>`))
	f.write("long.html", []byte(`<!DOCTYPE html><html><body style="margin:0"><div style="height:1700px">long</div></body></html>`))

	t.Run("sections", func(t *testing.T) {
		path, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPPTX}, resultPPTX, pptxMIME)
		if res.Outputs[0].Pages != 3 {
			t.Errorf("pages = %d, want 3", res.Outputs[0].Pages)
		}
		files := unzip(t, path)
		for i := 1; i <= 3; i++ {
			if _, ok := files[fmt.Sprintf("ppt/slides/slide%d.xml", i)]; !ok {
				t.Errorf("no ppt/slides/slide%d.xml", i)
			}
		}
		if _, ok := files["ppt/slides/slide4.xml"]; ok {
			t.Errorf("a 4th slide, for 3 sections")
		}
		notes := files["ppt/notesSlides/notesSlide1.xml"]
		for _, want := range []string{"Note for slide one.", "Second line."} {
			if !strings.Contains(notes, want) {
				t.Errorf("notes of slide 1 lack %q: %s", want, notes)
			}
		}
		if !strings.Contains(files["ppt/notesSlides/notesSlide2.xml"], "Note two") {
			t.Errorf("notes of slide 2 lack %q", "Note two")
		}
		if !strings.Contains(files["docProps/core.xml"], "Deck Title") {
			t.Errorf("core.xml lacks the title: %s", files["docProps/core.xml"])
		}
		// Each picture is exactly its slide: the slide size times the
		// default device scale factor 2, in the section's colour.
		for i, want := range []color.RGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}} {
			img, err := png.Decode(strings.NewReader(files[fmt.Sprintf("ppt/media/image%d.png", i+1)]))
			if err != nil {
				t.Fatalf("slide %d picture: %v", i+1, err)
			}
			if got := img.Bounds().Size(); got.X != 2560 || got.Y != 1440 {
				t.Errorf("slide %d picture = %dx%d, want 2560x1440", i+1, got.X, got.Y)
			}
			r, g, b, _ := img.At(2000, 1300).RGBA()
			if got := (color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}); got != want {
				t.Errorf("slide %d colour = %v, want %v", i+1, got, want)
			}
		}
	})
	t.Run("pages", func(t *testing.T) {
		path, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPPTX, Main: "long.html",
			Options: jobspec.Options{Width: 800, Height: 600, DeviceScaleFactor: 1}}, resultPPTX, pptxMIME)
		if res.Outputs[0].Pages != 3 { // 1700 / 600
			t.Errorf("pages = %d, want 3", res.Outputs[0].Pages)
		}
		files := unzip(t, path)
		cfg, err := png.DecodeConfig(strings.NewReader(files["ppt/media/image3.png"]))
		if err != nil || cfg.Width != 800 || cfg.Height != 600 {
			t.Errorf("slide 3 picture = %dx%d (%v), want 800x600", cfg.Width, cfg.Height, err)
		}
	})
	t.Run("too_small", func(t *testing.T) {
		wantFailure(t, f.run(jobspec.Request{Action: jobspec.HTMLPPTX, Options: jobspec.Options{Width: 50}}),
			http.StatusUnprocessableEntity, "invalid_options", false)
	})
}

func unzip(t *testing.T, path string) map[string]string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer zr.Close()
	files := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[zf.Name] = string(b)
	}
	return files
}

func TestMarkdownPDF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("docs/guide.md", []byte("# Field Guide\n\nSome *text* and ~~struck~~ words, see https://example.com.\n\n"+
		"| Name | Count |\n|------|------:|\n| apples | 12 |\n| pears | 7 |\n\n"+
		"- [x] done task\n- [ ] open task\n\n![dot](img/dot.png)\n\n<p id=raw>RAW-HTML-KEPT</p>\n"))
	f.write("docs/img/dot.png", pngBytes(t, 8, 8, color.Black))
	path, res := f.mustRun(jobspec.Request{Action: jobspec.MarkdownPDF, Options: jobspec.Options{
		Paper: "A4", HeaderTemplate: `<div style="font-size:10px">TITLE <span class="title"></span></div>`,
	}}, resultPDF, "application/pdf")
	text := pdfText(t, path)
	for _, want := range []string{"Field Guide", "apples", "12", "pears", "RAW-HTML-KEPT", "TITLE Field Guide"} {
		if !strings.Contains(text, want) {
			t.Errorf("PDF text lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`Name\s+Count`).MatchString(text) {
		t.Errorf("the table's header cells are not side by side:\n%s", text)
	}
	if _, w, _ := pdfInfo(t, path); !near(w, 595) {
		t.Errorf("page width = %g pts, want A4's 595", w)
	}
	if len(res.Blocked) != 0 {
		t.Errorf("blocked = %v, want none (the image is an input)", res.Blocked)
	}
	// Two Markdown inputs and no main: which one is ambiguous.
	f.write("other.markdown", []byte("# Other\n"))
	wantFailure(t, f.run(jobspec.Request{Action: jobspec.MarkdownPDF}), http.StatusUnprocessableEntity, "invalid_input", false)
}

func TestGuards(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	var hits atomic.Int32
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "LOOPBACK-SECRET")
	}))
	defer victim.Close()
	// Positive control of the victim: it answers whoever reaches it.
	if resp, err := http.Get(victim.URL + "/control"); err != nil {
		t.Fatalf("the victim server is not reachable from the test: %v", err)
	} else {
		resp.Body.Close()
	}
	hits.Store(0)
	host := strings.TrimPrefix(victim.URL, "http://")
	if err := os.Symlink("/etc/passwd", filepath.Join(f.in, "secret.txt")); err != nil {
		t.Fatal(err)
	}
	f.write("data.txt", []byte("ALLOWED-DATA"))
	f.write("index.html", []byte(`<!DOCTYPE html><html><body>
<p>PROBE-PAGE</p>
<iframe src="file:///etc/passwd"></iframe>
<img src="file:///etc/hostname">
<img src="`+victim.URL+`/img?token=abc">
<iframe src="`+victim.URL+`/frame"></iframe>
<pre id="log"></pre>
<script>
const log = (s) => { document.getElementById('log').textContent += s + '\n'; };
new WebSocket('ws://`+host+`/ws');
window.open('http://berth.job/data.txt');
const probes = [
  fetch('data.txt').then(r => r.text()).then(t => log('same-origin: ' + t), e => log('same-origin: failed')),
  fetch('`+victim.URL+`/fetch?x=1').then(r => r.text()).then(t => log('loopback: ' + t), e => log('loopback: failed')),
  fetch('secret.txt').then(r => log('symlink: ' + r.status)),
  fetch('/%2e%2e/%2e%2e/etc/passwd').then(r => log('dotdot: ' + r.status)),
];
window.open('`+victim.URL+`/popup');
Promise.all(probes).then(() => {
  // Navigating away must leave the page as it is.
  location.href = '`+victim.URL+`/nav?secret=1';
  setTimeout(() => { const p = document.createElement('p'); p.id = 'done'; p.textContent = 'PROBES-DONE'; document.body.append(p); }, 500);
});
</script></body></html>`))
	path, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, TimeoutMS: 20000, Options: jobspec.Options{WaitForSelector: "#done"}},
		resultPDF, "application/pdf")
	text := pdfText(t, path)
	// The probes ran: the allowed request got through (the positive
	// control), the others were refused.
	for _, want := range []string{"PROBE-PAGE", "PROBES-DONE", "same-origin: ALLOWED-DATA", "loopback: failed", "symlink: 404", "dotdot: 404"} {
		if !strings.Contains(text, want) {
			t.Errorf("PDF text lacks %q:\n%s", want, text)
		}
	}
	for _, leak := range []string{"root:", "LOOPBACK-SECRET"} {
		if strings.Contains(text, leak) {
			t.Errorf("PDF text has %q:\n%s", leak, text)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests from the page, want 0", n)
	}
	for _, want := range []string{"file:///etc/passwd", "file:///etc/hostname", victim.URL + "/img", victim.URL + "/frame",
		victim.URL + "/fetch", victim.URL + "/nav"} {
		if !slices.Contains(res.Blocked, want) {
			t.Errorf("blocked = %v, want it to list %s", res.Blocked, want)
		}
	}
	for _, u := range res.Blocked {
		if strings.Contains(u, "?") || strings.Contains(u, "token") {
			t.Errorf("blocked URL %q keeps its query", u)
		}
	}
	// The windows the page opened were closed.
	targets, err := chromedp.Targets(f.r.chrome.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range targets {
		if ti.OpenerID != "" {
			t.Errorf("a window the page opened is still open: %s", ti.URL)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("index.html", []byte(`<html><body>ok</body></html>`))
	f.write("notes.txt", []byte(`text`))
	for _, tc := range []struct {
		name   string
		body   string
		status int
		reason string
	}{
		{"scale_out_of_range", `{"action":"html-pdf","options":{"scale":5}}`, 422, "invalid_options"},
		{"unknown_option", `{"action":"html-pdf","options":{"colour":"red"}}`, 422, "invalid_options"},
		{"option_of_another_action", `{"action":"html-pdf","options":{"full_page":true}}`, 422, "invalid_options"},
		{"missing_main", `{"action":"html-pdf","main":"nope.html"}`, 422, "invalid_input"},
		{"main_escapes", `{"action":"html-pdf","main":"../index.html"}`, 422, "invalid_input"},
		{"main_wrong_extension", `{"action":"html-pdf","main":"notes.txt"}`, 422, "invalid_input"},
		{"invalid_selector", `{"action":"html-pdf","options":{"wait_for_selector":"[[["}}`, 422, "invalid_options"},
		{"unknown_action", `{"action":"html-docx"}`, 422, "unknown_action"},
		{"other_profile", `{"action":"office-pdf"}`, 422, "wrong_profile"},
		{"not_json", `{"action":`, 400, "invalid_input"},
		{"negative_timeout", `{"action":"html-pdf","timeout_ms":-1}`, 422, "invalid_options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFailure(t, f.post(tc.body), tc.status, tc.reason, false)
		})
	}
	// None of them left an output behind.
	if entries, _ := os.ReadDir(f.out); len(entries) != 0 {
		t.Errorf("output directory has %d entries after failed jobs", len(entries))
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("index.html", []byte(`<html><body>never ready</body></html>`))
	f.write("spin.html", []byte(`<html><body>spin<script>for (;;) {}</script></body></html>`))
	f.write("ok.html", []byte(`<html><body>AFTER-TIMEOUTS</body></html>`))

	t0 := time.Now()
	wantFailure(t, f.run(jobspec.Request{Action: jobspec.HTMLPDF, TimeoutMS: 3000,
		Options: jobspec.Options{WaitForSelector: "#never"}}), http.StatusUnprocessableEntity, "wait_for_selector", false)
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("a 3 s job took %v", d)
	}
	wantFailure(t, f.run(jobspec.Request{Action: jobspec.HTMLPDF, Main: "spin.html", TimeoutMS: 800}),
		http.StatusGatewayTimeout, "timeout", true)
	path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, Main: "ok.html"}, resultPDF, "application/pdf")
	if text := pdfText(t, path); !strings.Contains(text, "AFTER-TIMEOUTS") {
		t.Errorf("the job after the timeouts printed:\n%s", text)
	}
}

func TestWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("late.txt", []byte("LATE-DATA"))
	// After its load event the page fetches ten times, 100 ms apart
	// (well under the 500 ms that count as idle, even on a loaded
	// machine), then writes what it got;
	// the other page writes after a second.
	f.write("index.html", []byte(`<html><body><p>LOADED</p><script>
const later = (n) => setTimeout(() => fetch('late.txt').then(r => r.text()).then(t => {
  if (n > 1) { later(n - 1); return; }
  const p = document.createElement('p'); p.textContent = t; document.body.append(p); }), 100);
addEventListener('load', () => later(10));
</script></body></html>`))
	f.write("delay.html", []byte(`<html><body><p>LOADED</p><script>
addEventListener('load', () => setTimeout(() => document.body.append('DELAYED-TEXT'), 1000));
</script></body></html>`))
	for _, tc := range []struct {
		name string
		main string
		opts jobspec.Options
		want string
		has  bool
	}{
		// The controls: without the wait, the page is printed before.
		{"no_wait_network", "index.html", jobspec.Options{}, "LATE-DATA", false},
		{"wait_network_idle", "index.html", jobspec.Options{WaitNetworkIdle: true}, "LATE-DATA", true},
		{"no_delay", "delay.html", jobspec.Options{}, "DELAYED-TEXT", false},
		{"wait_delay", "delay.html", jobspec.Options{WaitDelayMS: 2000}, "DELAYED-TEXT", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, Main: tc.main, Options: tc.opts}, resultPDF, "application/pdf")
			text := pdfText(t, path)
			if !strings.Contains(text, "LOADED") || strings.Contains(text, tc.want) != tc.has {
				t.Errorf("PDF text has LOADED and %q: %v, want %v:\n%s", tc.want, strings.Contains(text, tc.want), tc.has, text)
			}
		})
	}
}

func TestOneJobAtATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("index.html", []byte(`<html><body>slow</body></html>`))
	var wg sync.WaitGroup
	var first response
	wg.Go(func() {
		first = f.run(jobspec.Request{Action: jobspec.HTMLPDF, Options: jobspec.Options{WaitDelayMS: 1500}})
	})
	testenv.Eventually(t, 10*time.Second, "the first job to start", f.r.running.Load)
	wantFailure(t, f.run(jobspec.Request{Action: jobspec.HTMLPDF}), http.StatusConflict, "busy", true)
	wg.Wait()
	if first.status != http.StatusOK {
		t.Errorf("first job = %d %s, want 200", first.status, first.raw)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	chromium := testenv.NeedChromium(t)
	r, err := New(Config{Profile: jobspec.ProfileBrowser, Chromium: chromium, InputDir: t.TempDir(), OutputDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	health := func() (int, jobspec.Health) {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h jobspec.Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, h
	}
	if code, _ := health(); code != http.StatusServiceUnavailable {
		t.Errorf("healthz before Start = %d, want 503", code)
	}
	resp, err := http.Post(srv.URL+"/run", "application/json", strings.NewReader(`{"action":"html-pdf"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("run before Start = %d, want 503", resp.StatusCode)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, h := health()
	if code != http.StatusOK || h.RunnerAPI != jobspec.RunnerAPI || h.Profile != jobspec.ProfileBrowser || !strings.Contains(h.Chromium, "Chrome") {
		t.Errorf("healthz after Start = %d %+v", code, h)
	}
	// The browser dying makes the runner unhealthy, and jobs fail as
	// retryable.
	r.mu.Lock()
	pid := r.chrome.pid
	r.mu.Unlock()
	// Debian's chromium-headless-shell is a script that runs the browser
	// as its child: kill them all.
	for _, p := range append(descendants(pid), pid) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	testenv.Eventually(t, 10*time.Second, "healthz to report the browser gone", func() bool {
		code, _ := health()
		return code == http.StatusServiceUnavailable
	})
	f := &fixture{t: t, r: r, srv: srv}
	wantFailure(t, f.post(`{"action":"html-pdf"}`), http.StatusServiceUnavailable, "browser_crashed", true)
	_ = r.Stop(context.Background())
	if code, _ := health(); code != http.StatusServiceUnavailable {
		t.Errorf("healthz after Close = %d, want 503", code)
	}
}

func TestOfficePDF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileOffice)
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(i*7 + i/13)
	}
	inputs := map[string][]byte{
		"letter.docx": testenv.DOCX("First paragraph DOCXALPHA", "Second paragraph DOCXBETA"),
		"sheet.csv":   []byte("city,population\nLyon,522228\nNantes,320732\n"),
		"x.docx":      garbage,
		"tool.exe":    []byte("MZ"),
	}
	for name, b := range inputs {
		f.write(name, b)
	}
	t.Run("docx", func(t *testing.T) {
		path, res := f.mustRun(jobspec.Request{Action: jobspec.OfficePDF, Main: "letter.docx"}, resultPDF, "application/pdf")
		pages, _, _ := pdfInfo(t, path)
		if pages != 2 || res.Outputs[0].Pages != 2 {
			t.Errorf("pages = %d (pdfinfo), %d (result), want 2", pages, res.Outputs[0].Pages)
		}
		text := pdfText(t, path)
		for _, want := range []string{"DOCXALPHA", "DOCXBETA"} {
			if !strings.Contains(text, want) {
				t.Errorf("PDF text lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("csv", func(t *testing.T) {
		path, _ := f.mustRun(jobspec.Request{Action: jobspec.OfficePDF, Options: jobspec.Options{Main: "sheet.csv"}},
			resultPDF, "application/pdf")
		if pages, _, _ := pdfInfo(t, path); pages < 1 {
			t.Errorf("pages = %d, want at least 1", pages)
		}
		text := pdfText(t, path)
		for _, want := range []string{"Lyon", "522228", "Nantes"} {
			if !strings.Contains(text, want) {
				t.Errorf("PDF text lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("garbage_docx", func(t *testing.T) {
		wantFailure(t, f.run(jobspec.Request{Action: jobspec.OfficePDF, Main: "x.docx"}),
			http.StatusUnprocessableEntity, "invalid_input", false)
	})
	t.Run("unsupported_extension", func(t *testing.T) {
		wantFailure(t, f.run(jobspec.Request{Action: jobspec.OfficePDF, Main: "tool.exe"}),
			http.StatusUnprocessableEntity, "invalid_input", false)
	})
	t.Run("no_main_among_several", func(t *testing.T) {
		wantFailure(t, f.run(jobspec.Request{Action: jobspec.OfficePDF}), http.StatusUnprocessableEntity, "invalid_input", false)
	})
}

func TestOfficeCloseDuringConversion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileOffice)
	var csv bytes.Buffer
	for i := range 200000 {
		fmt.Fprintf(&csv, "%d,row %d,%d.5\n", i, i, i*3)
	}
	f.write("big.csv", csv.Bytes())
	f.r.mu.Lock()
	dir := f.r.office.dir
	f.r.mu.Unlock()
	done := make(chan response, 1)
	go func() { done <- f.run(jobspec.Request{Action: jobspec.OfficePDF}) }()
	testenv.Eventually(t, 20*time.Second, "the conversion to start", func() bool {
		entries, _ := filepath.Glob(filepath.Join(dir, "job-*", "in", "big.csv"))
		return f.r.running.Load() && len(entries) > 0
	})
	time.Sleep(200 * time.Millisecond) // the converter has the job: LibreOffice loads it
	f.closeAndCheck()
	select {
	case r := <-done:
		wantFailure(t, r, http.StatusServiceUnavailable, "closed", true)
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not end after Close")
	}
}

func TestServePaths(t *testing.T) {
	t.Parallel()
	in := t.TempDir()
	if err := os.MkdirAll(filepath.Join(in, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"index.html": "<p>hi</p>", "sub/a b.css": "p{}", "x.unknownext": "?"} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(in, "out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("index.html", filepath.Join(in, "in.html")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(in)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s := newSite(root, "")
	s.files["gen.md.html"] = memFile{body: []byte("generated"), ctype: "text/html; charset=utf-8"}
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/index.html", 200, "text/html; charset=utf-8", "<p>hi</p>"},
		{"GET", "/sub/a b.css", 200, "text/css; charset=utf-8", "p{}"},
		{"GET", "/sub/../index.html", 200, "text/html; charset=utf-8", "<p>hi</p>"},
		{"GET", "/../../etc/passwd", 404, "", ""},
		{"GET", "/out.txt", 404, "", ""},
		{"GET", "/in.html", 200, "text/html; charset=utf-8", "<p>hi</p>"},
		{"GET", "/sub", 404, "", ""},
		{"GET", "/", 404, "", ""},
		{"GET", "/missing.png", 404, "", ""},
		{"GET", "/gen.md.html", 200, "text/html; charset=utf-8", "generated"},
		{"GET", "/x.unknownext", 200, "application/octet-stream", "?"},
		{"HEAD", "/index.html", 200, "text/html; charset=utf-8", ""},
		{"POST", "/index.html", 405, "", ""},
	} {
		status, hdr, body := s.serve(tc.method, tc.path)
		ctype := ""
		for _, h := range hdr {
			if h.Name == "Content-Type" && status == 200 {
				ctype = h.Value
			}
		}
		if status != tc.status || ctype != tc.ctype || string(body) != tc.body {
			t.Errorf("serve(%s %s) = %d %q %q, want %d %q %q", tc.method, tc.path, status, ctype, body, tc.status, tc.ctype, tc.body)
		}
	}
}

func TestSniffOffice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var odt bytes.Buffer
	zw := zip.NewWriter(&odt)
	w, _ := zw.Create("mimetype")
	io.WriteString(w, "application/vnd.oasis.opendocument.text")
	zw.Close()
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"a.docx", testenv.DOCX("First paragraph DOCXALPHA", "Second paragraph DOCXBETA"), true},
		{"b.docx", []byte("not a zip at all"), false},
		{"c.xlsx", odt.Bytes(), false}, // a zip, but not OOXML
		{"d.odt", odt.Bytes(), true},
		{"e.doc", []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1rest"), true},
		{"f.xls", []byte("\xEF\xBB\xBF  <table><tr><td>1</td></tr></table>"), true},
		{"g.doc", []byte("random bytes"), false},
		{"h.rtf", []byte(`{\rtf1 hello}`), true},
		{"i.rtf", []byte(`hello`), false},
		{"j.csv", []byte("a,b\n"), true},
	} {
		if err := os.WriteFile(filepath.Join(dir, tc.name), tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		err = sniffOffice(root, tc.name)
		root.Close()
		if (err == nil) != tc.ok {
			t.Errorf("sniffOffice(%s) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestJobsDoNotShareState runs two jobs in one runner, as a reused
// runtime does: what the first page stores (a cookie, localStorage) is not
// there for the second, which has a browser context of its own.
func TestJobsDoNotShareState(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("set.html", []byte(`<html><body><p id=o>x</p><script>
document.cookie = "secret=COOKIE-ONE; path=/"; localStorage.setItem("secret", "STORAGE-ONE");
document.getElementById("o").textContent = "SET " + document.cookie + " " + localStorage.getItem("secret");
</script></body></html>`))
	f.write("get.html", []byte(`<html><body><p id=o>x</p><script>
document.getElementById("o").textContent = "GOT [" + document.cookie + "] [" + localStorage.getItem("secret") + "]";
</script></body></html>`))
	// The control: in its own job the page reads what it stored.
	path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, Main: "set.html"}, resultPDF, "application/pdf")
	if text := pdfText(t, path); !strings.Contains(text, "COOKIE-ONE") || !strings.Contains(text, "STORAGE-ONE") {
		t.Fatalf("the first job could not store state:\n%s", text)
	}
	path, _ = f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF, Main: "get.html"}, resultPDF, "application/pdf")
	text := pdfText(t, path)
	if !strings.Contains(text, "GOT [] [null]") {
		t.Errorf("the second job saw the first's state:\n%s", text)
	}
}

// TestOneJobRuntime: a runtime that serves one job runs Chromium as one
// process (no renderer, GPU, utility or zygote process beside the
// browser's), and its job works; one that serves several keeps Chromium's
// processes (the control), so that each job gets a browser context.
func TestOneJobRuntime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		jobs    int
		wantOne bool
	}{{1, true}, {2, false}} {
		f := newFixtureJobs(t, jobspec.ProfileBrowser, tc.jobs)
		f.write("index.html", []byte(`<html><body>ONE-JOB</body></html>`))
		path, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF}, resultPDF, "application/pdf")
		if text := pdfText(t, path); !strings.Contains(text, "ONE-JOB") {
			t.Errorf("jobs=%d: the PDF reads:\n%s", tc.jobs, text)
		}
		f.r.mu.Lock()
		pid := f.r.chrome.pid
		f.r.mu.Unlock()
		var typed []string // the --type= of Chromium's helper processes
		for _, p := range append(descendants(pid), pid) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
			// Chromium rewrites its helpers' command lines, NULs to spaces.
			for _, arg := range strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")) {
				if strings.HasPrefix(arg, "--type=") {
					typed = append(typed, arg)
				}
			}
		}
		if one := len(typed) == 0; one != tc.wantOne {
			t.Errorf("jobs=%d: Chromium's helper processes %q; want one process: %v", tc.jobs, typed, tc.wantOne)
		}
	}
}

// TestNavigateAwayBeforeLoad: a page whose script sends it to an address
// the runner refuses before its load event fires still prints (the
// document stays), at once, rather than waiting for a load event that
// never comes until the job's timeout.
func TestNavigateAwayBeforeLoad(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	f.write("index.html", []byte(`<html><body><p>BEFORE-NAV</p><script>location.href = "http://10.255.255.1/away";</script><p>AFTER-NAV</p></body></html>`))
	done := make(chan response, 1)
	go func() { done <- f.run(jobspec.Request{Action: jobspec.HTMLPDF}) }()
	var r response
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the job did not finish within a minute: it waits for a load event that never comes")
	}
	if r.status != http.StatusOK {
		t.Fatalf("run = %d %s, want 200", r.status, r.raw)
	}
	if !slices.Contains(r.result.Blocked, "http://10.255.255.1/away") {
		t.Errorf("blocked = %v, want the navigation's address", r.result.Blocked)
	}
	if text := pdfText(t, filepath.Join(f.out, resultPDF)); !strings.Contains(text, "BEFORE-NAV") {
		t.Errorf("the PDF lacks the page's text:\n%s", text)
	}
}
