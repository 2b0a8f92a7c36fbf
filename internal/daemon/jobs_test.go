package daemon_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net"
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
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/testenv"
)

// needJobs skips (fails under CI) without what jobs need: root for
// container sandboxes, Chromium, LibreOffice and poppler's tools. Jobs run
// in container sandboxes whatever the suite's runtime: once is enough.
func needJobs(t *testing.T) {
	t.Helper()
	if testenv.Runtime() != "process" {
		t.Skip("job tests run in the process-runtime pass of make test (jobs always use container sandboxes)")
	}
	testenv.NeedRuntime(t, "container")
	testenv.NeedChromium(t)
	testenv.NeedCommand(t, "soffice")
	testenv.NeedCommand(t, "pdfinfo")
	testenv.NeedCommand(t, "pdftotext")
}

// threePages is an HTML document of three printed pages, with a
// stylesheet and an image beside it.
func threePages() map[string]apitype.JobInput {
	html := `<!doctype html><html><head><title>Three pages</title><link rel="stylesheet" href="style.css"></head><body>
<section><h1>Page one</h1><p>Alpha paragraph.</p><img src="img/dot.png" width="40" height="40"></section>
<section><h1>Page two</h1><p>Bravo paragraph.</p></section>
<section><h1>Page three</h1><p>Charlie paragraph.</p></section></body></html>`
	css := `section { break-after: page; } section:last-child { break-after: auto; } h1 { color: #234; }`
	var img bytes.Buffer
	_ = png.Encode(&img, testImage(8, 8))
	return map[string]apitype.JobInput{
		"index.html":  inline([]byte(html)),
		"style.css":   inline([]byte(css)),
		"img/dot.png": inline(img.Bytes()),
	}
}

func inline(b []byte) apitype.JobInput {
	return apitype.JobInput{ContentBase64: base64.StdEncoding.EncodeToString(b)}
}

// runJob submits req and waits for the job to finish.
func runJob(t *testing.T, c *client.Client, req apitype.CreateJobRequest) apitype.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	j, err := c.CreateJob(ctx, req)
	if err != nil {
		t.Fatalf("creating a %s job: %v", req.Action, err)
	}
	if j.State != apitype.JobQueued || j.Repeat {
		t.Errorf("new job = %s (repeat %t), want queued", j.State, j.Repeat)
	}
	j, err = c.WaitJob(ctx, j.ID)
	if err != nil {
		t.Fatalf("waiting for job: %v\n%s", err, jobStory(c, j.ID))
	}
	return j
}

// jobStory is what a job that did not finish went through: its state and
// events, for a failure's message.
func jobStory(c *client.Client, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := c.Job(ctx, id)
	if err != nil {
		return fmt.Sprintf("job %s: %v", id, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: state %s, attempt %d\n", id, j.State, j.Attempt)
	evctx, evcancel := context.WithTimeout(ctx, 2*time.Second)
	defer evcancel()
	_ = c.JobEvents(evctx, id, 0, func(e apitype.JobEvent) error {
		fmt.Fprintf(&b, "  %s %s attempt %d %d%% %s\n", e.At.Format("15:04:05.000"), e.Type, e.Attempt, e.Percent, e.Message)
		return nil
	})
	return b.String()
}

// output downloads a job's only output into dir and returns its path.
func output(t *testing.T, c *client.Client, j apitype.Job, dir string) string {
	t.Helper()
	if j.State != apitype.JobSucceeded || len(j.Outputs) != 1 {
		t.Fatalf("job %s: %s, outputs %v, error %+v; want succeeded with one output", j.ID, j.State, j.Outputs, j.Error)
	}
	rc, err := c.DownloadFile(context.Background(), j.Outputs[0].SHA256)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != j.Outputs[0].SHA256 || int64(len(b)) != j.Outputs[0].Size {
		t.Fatalf("downloaded %d bytes that do not match the output's record %+v", len(b), j.Outputs[0])
	}
	p := filepath.Join(dir, "out"+filepath.Ext(j.Outputs[0].Name))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pdfInfo runs pdfinfo and returns its fields.
func pdfInfo(t *testing.T, path string) map[string]string {
	t.Helper()
	out, err := exec.Command("pdfinfo", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo %s: %v: %s", path, err, out)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func pdfText(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("pdftotext", "-layout", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext %s: %v: %s", path, err, out)
	}
	return string(out)
}

func eventTypes(t *testing.T, c *client.Client, id string) []string {
	t.Helper()
	var types []string
	err := c.JobEvents(context.Background(), id, 0, func(ev apitype.JobEvent) error {
		types = append(types, ev.Type)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func TestJobHTMLToPDF(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobPools = map[string]int{"browser": 1} })
	dir := t.TempDir()

	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
	if j.Attempt != 1 || j.Outputs[0].MIME != "application/pdf" || j.Outputs[0].Pages != 3 {
		t.Errorf("job = attempt %d, outputs %+v; want attempt 1, one 3-page PDF", j.Attempt, j.Outputs)
	}
	p := output(t, d.Client, j, dir)
	info := pdfInfo(t, p)
	if info["Pages"] != "3" || !strings.HasPrefix(info["Page size"], "612 x 792") {
		t.Errorf("pdfinfo: pages %s, size %s; want 3 Letter pages", info["Pages"], info["Page size"])
	}
	text := pdfText(t, p)
	for _, want := range []string{"Page one", "Alpha paragraph.", "Bravo paragraph.", "Charlie paragraph."} {
		if !strings.Contains(text, want) {
			t.Errorf("the PDF's text lacks %q:\n%s", want, text)
		}
	}
	if types := eventTypes(t, d.Client, j.ID); !isSubsequence([]string{"queued", "starting", "running", "succeeded"}, types) {
		t.Errorf("events = %v, want queued, starting, running, succeeded in order", types)
	}
	if m := metricsText(t, d); !strings.Contains(m, `berth_jobs_finished_total{action="html-pdf",state="succeeded"} 1`) ||
		!strings.Contains(m, `berth_job_runtimes_ready{profile="browser"}`) {
		t.Errorf("/metrics lacks the finished job or the runtime pool:\n%s", m)
	}

	// Options reach printToPDF: A4 landscape with a footer.
	opts := json.RawMessage(`{"paper": "A4", "landscape": true, "footer_template": "<div style='font-size:9px'>Footer <span class='pageNumber'></span></div>", "margin_bottom": 0.6}`)
	j = runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages(), Options: opts})
	p = output(t, d.Client, j, dir)
	info = pdfInfo(t, p)
	if !strings.HasPrefix(info["Page size"], "841.9") || !strings.Contains(info["Page size"], "x 595") {
		t.Errorf("A4 landscape page size = %q, want 841.92 x 595.2", info["Page size"])
	}
	if text := pdfText(t, p); !strings.Contains(text, "Footer 2") {
		t.Errorf("the footer template is missing from the text:\n%s", text)
	}

	// The same request through the synchronous route returns the PDF itself.
	rc, id, err := d.Client.Convert(context.Background(), apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.HasPrefix(b, []byte("%PDF-")) || !strings.HasPrefix(id, "job_") {
		t.Errorf("convert answered %d bytes starting %q, job %q; want a PDF and a job id", len(b), b[:min(len(b), 8)], id)
	}
}

func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func TestJobConvertMultipart(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("files", "notes.md")
	_, _ = fw.Write([]byte("# Notes\n\n| Fruit | Count |\n|---|---|\n| Apple | 3 |\n| Pear | 5 |\n"))
	_ = mw.WriteField("paper", "A5")
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/convert/markdown-pdf", &body)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("convert = %s %s: %.300s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, "notes.pdf") {
		t.Errorf("Content-Disposition = %q, want notes.pdf", cd)
	}
	p := filepath.Join(t.TempDir(), "notes.pdf")
	_ = os.WriteFile(p, b, 0o600)
	if info := pdfInfo(t, p); !strings.HasPrefix(info["Page size"], "420 x 59") {
		t.Errorf("A5 page size = %q, want 420 x 595.92", info["Page size"])
	}
	text := pdfText(t, p)
	if !regexp.MustCompile(`Apple\s+3`).MatchString(text) || !regexp.MustCompile(`Pear\s+5`).MatchString(text) {
		t.Errorf("the table's cells are missing from the PDF's text:\n%s", text)
	}
}

func TestJobPNGAndPPTX(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobPools = map[string]int{"browser": 1} })
	dir := t.TempDir()

	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-png", Inputs: threePages(),
		Options: json.RawMessage(`{"width": 640, "height": 400, "device_scale_factor": 2}`)})
	f, err := os.Open(output(t, d.Client, j, dir))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
		t.Errorf("screenshot is %dx%d, want 1280x800 (640x400 at 2x)", b.Dx(), b.Dy())
	}

	slides := `<!doctype html><html><head><title>Deck</title><style>
body { margin: 0 } section { width: 1280px; height: 720px; display: flex; align-items: center; justify-content: center; font: 64px sans-serif }
section:nth-child(2) { background: #fc0 }</style></head><body>
<section><h1>First slide</h1><aside class="notes">Say hello first.</aside></section>
<section><h1>Second slide</h1><aside class="notes">Then the numbers.</aside></section>
<section><h1>Third slide</h1></section></body></html>`
	j = runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pptx", Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(slides))}})
	p := output(t, d.Client, j, dir)
	zr, err := zip.OpenReader(p)
	if err != nil {
		t.Fatalf("the PPTX is not a zip: %v", err)
	}
	defer zr.Close()
	var slideParts []string
	notes := ""
	for _, f := range zr.File {
		if regexp.MustCompile(`^ppt/slides/slide\d+\.xml$`).MatchString(f.Name) {
			slideParts = append(slideParts, f.Name)
		}
		if strings.HasPrefix(f.Name, "ppt/notesSlides/") && strings.HasSuffix(f.Name, ".xml") {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			notes += string(b)
		}
	}
	if len(slideParts) != 3 || j.Outputs[0].Pages != 3 {
		t.Errorf("slides = %v (pages %d), want 3", slideParts, j.Outputs[0].Pages)
	}
	if !strings.Contains(notes, "Say hello first.") || !strings.Contains(notes, "Then the numbers.") {
		t.Errorf("speaker notes are missing: %.500s", notes)
	}

	// Editable mode: each slide's heading is a text box, not a picture.
	j = runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pptx", Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(slides))},
		Options: json.RawMessage(`{"mode": "editable"}`)})
	ez, err := zip.OpenReader(output(t, d.Client, j, dir))
	if err != nil {
		t.Fatalf("the editable PPTX is not a zip: %v", err)
	}
	defer ez.Close()
	var slide2 []byte
	for _, f := range ez.File {
		if strings.HasPrefix(f.Name, "ppt/media/") {
			t.Errorf("editable deck of text has a picture part %s", f.Name)
		}
		if f.Name == "ppt/slides/slide2.xml" {
			rc, _ := f.Open()
			slide2, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	if !strings.Contains(string(slide2), `<a:t>Second slide</a:t>`) || !strings.Contains(string(slide2), `<a:srgbClr val="FFCC00"/>`) {
		t.Errorf("editable slide 2 lacks its heading as text or its background: %.800s", slide2)
	}
}

func TestJobOfficeToPDF(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobPools = map[string]int{"office": 1} })
	dir := t.TempDir()
	ctx := context.Background()

	// An upload first, then a job naming it by its hash.
	ref, err := d.Client.UploadFile(ctx, bytes.NewReader(testenv.DOCX("Quarterly report", "Second page text")), "report.docx")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ref.MIME, "wordprocessingml") || ref.Size == 0 {
		t.Errorf("upload = %+v, want a DOCX", ref)
	}
	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "office-pdf",
		Inputs: map[string]apitype.JobInput{"report.docx": {SHA256: ref.SHA256}}})
	p := output(t, d.Client, j, dir)
	if info := pdfInfo(t, p); info["Pages"] != "2" {
		t.Errorf("pdfinfo pages = %s, want 2", info["Pages"])
	}
	text := pdfText(t, p)
	if !strings.Contains(text, "Quarterly report") || !strings.Contains(text, "Second page text") {
		t.Errorf("the PDF's text lacks the document's:\n%s", text)
	}

	// Garbage under a .docx name fails for good: one attempt, not retryable.
	j = runJob(t, d.Client, apitype.CreateJobRequest{Action: "office-pdf",
		Inputs: map[string]apitype.JobInput{"broken.docx": inline([]byte("this is not a word document \x00\x01\x02"))}})
	if j.State != apitype.JobFailed || j.Error == nil || j.Error.Retryable || j.Attempt != 1 {
		t.Errorf("garbage docx: %s attempt %d error %+v; want failed after one attempt, not retryable", j.State, j.Attempt, j.Error)
	}
}

// TestJobGuards renders a page that reaches for local files and a
// private (loopback) address every way SECURITY.md's NET-08, NET-11 and
// NET-12 list: subresources, CSS imports and fonts, prefetch, fetch,
// WebSocket, EventSource, beacons, a service worker, meta refresh, script
// navigation, file:, view-source: and chrome: frames. The server gets
// nothing, the PDF shows nothing of it, the job still succeeds, and the
// blocked requests are reported.
func TestJobGuards(t *testing.T) {
	needJobs(t)
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "SECRET-FROM-PRIVATE-ADDRESS")
	}))
	defer srv.Close()
	// Positive control: the server answers from here.
	if resp, err := http.Get(srv.URL); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if hits.Load() != 1 {
		t.Fatalf("the control request did not reach the server")
	}
	d := testenv.StartDaemon(t, nil)
	page := `<!doctype html><html><body><p>Visible text.</p>
<iframe src="file:///etc/passwd" width="600" height="200"></iframe>
<img src="file:///etc/hostname">
<iframe src="` + srv.URL + `/frame" width="600" height="100"></iframe>
<img src="` + srv.URL + `/img.png">
<link rel="stylesheet" href="` + srv.URL + `/style.css">
<link rel="prefetch" href="` + srv.URL + `/prefetch"><link rel="preconnect" href="` + srv.URL + `">
<style>@import url("` + srv.URL + `/import.css"); @font-face { font-family: X; src: url("` + srv.URL + `/font.woff"); }
body { font-family: X, serif; background: url("` + srv.URL + `/bg.png"); }</style>
<iframe src="view-source:file:///etc/passwd"></iframe><iframe src="chrome://version"></iframe>
<iframe srcdoc="<meta http-equiv=refresh content='0;url=` + srv.URL + `/refresh'>"></iframe>
<script>fetch("` + srv.URL + `/fetch").then(r => r.text()).then(t => document.body.append(t)).catch(e => document.body.append("fetch failed"));
fetch("file:///etc/passwd").then(r => r.text()).then(t => document.body.append(t)).catch(e => {});
try { new WebSocket("` + strings.Replace(srv.URL, "http:", "ws:", 1) + `/ws"); } catch (e) {}
try { new EventSource("` + srv.URL + `/events"); } catch (e) {}
try { navigator.sendBeacon("` + srv.URL + `/beacon", "x"); } catch (e) {}
try { navigator.serviceWorker.register("` + srv.URL + `/sw.js").catch(e => {}); } catch (e) {}
setTimeout(() => { try { location.href = "` + srv.URL + `/navigate"; } catch (e) {} }, 50);</script>
</body></html>`
	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(page))}, Options: json.RawMessage(`{"wait_delay_ms": 300}`)})
	p := output(t, d.Client, j, t.TempDir())
	text := pdfText(t, p)
	if !strings.Contains(text, "Visible text.") {
		t.Errorf("the page's own text is missing:\n%s", text)
	}
	if strings.Contains(text, "root:x:0") || strings.Contains(text, "SECRET-FROM-PRIVATE-ADDRESS") {
		t.Errorf("the PDF shows what the guards should have kept out:\n%s", text)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the private server got %d requests from the job, want 0", n-1)
	}
	blocked := strings.Join(j.Blocked, " ")
	for _, want := range []string{"file:///etc/passwd", srv.URL + "/frame"} {
		if !strings.Contains(blocked, want) {
			t.Errorf("blocked = %v, want it to list %s", j.Blocked, want)
		}
	}
}

// writeBundle writes an action bundle on html-pdf into dir/name.
func writeBundle(t *testing.T, dir, name string, mutate func(m map[string]any)) string {
	t.Helper()
	bdir := filepath.Join(dir, name)
	files := map[string]string{
		"header.html": `<!doctype html><html><body><h1>Invoice header</h1></body></html>`,
		"invoice.css": `h1 { color: #900 }`,
	}
	sums := map[string]any{}
	for n, body := range files {
		if err := os.MkdirAll(bdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bdir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256([]byte(body))
		sums[n] = hex.EncodeToString(s[:])
	}
	m := map[string]any{"name": name, "version": "1.0.0", "base": "html-pdf", "profile": "browser", "runner_api": 1,
		"options": map[string]any{"paper": "A4"}, "files": sums}
	if mutate != nil {
		mutate(m)
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(bdir, jobs.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return bdir
}

// TestJobHealth provokes every health reason for real, each beside an
// action that stays available, and checks that a refused job queues
// nothing.
func TestJobHealth(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx := context.Background()
	actions := t.TempDir()
	writeBundle(t, actions, "invoice", nil)
	tampered := writeBundle(t, actions, "tampered", nil)
	if err := os.WriteFile(filepath.Join(tampered, "invoice.css"), []byte("h1 { color: red }"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, actions, "future", func(m map[string]any) { m["runner_api"] = 99 })
	writeBundle(t, actions, "gpu", func(m map[string]any) { m["profile"] = "gpu" })
	changing := writeBundle(t, actions, "changing", nil)

	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.ActionsDir = actions })
	health := func(name string) apitype.ActionHealth {
		t.Helper()
		h, err := d.Client.Action(ctx, name)
		if err != nil && h.Reason == "" && !errcode.Is(err, errcode.NotFound) {
			t.Fatal(err)
		}
		if errcode.Is(err, errcode.NotFound) {
			return apitype.ActionHealth{Name: name, Reason: jobs.ActionMissing}
		}
		return h
	}
	for name, want := range map[string]string{"html-pdf": "", "office-pdf": "", "invoice": "", "changing": "",
		"tampered": jobs.ActionInvalid, "future": jobs.VersionMismatch, "gpu": jobs.ProfileMissing, "nope": jobs.ActionMissing} {
		h := health(name)
		if h.Available != (want == "") || h.Reason != want {
			t.Errorf("%s: available %t reason %q (%s), want reason %q", name, h.Available, h.Reason, h.Message, want)
		}
		if want != "" && want != jobs.ActionMissing && h.Hint == "" {
			t.Errorf("%s: no operator hint", name)
		}
	}
	// A bundle changed after load is reported at once.
	if err := os.WriteFile(filepath.Join(changing, "extra.js"), []byte("alert(1)"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h := health("changing"); h.Reason != jobs.ActionInvalid || !strings.Contains(h.Message, "extra.js") {
		t.Errorf("changed bundle: %q %q, want ACTION_INVALID naming extra.js", h.Reason, h.Message)
	}
	for name, want := range map[string]string{"nope": jobs.ActionMissing, "tampered": jobs.ActionInvalid,
		"future": jobs.VersionMismatch, "gpu": jobs.ProfileMissing, "changing": jobs.ActionInvalid} {
		_, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: name,
			Inputs: map[string]apitype.JobInput{"index.html": inline([]byte("<p>x</p>"))}})
		if errcode.ReasonOf(err) != want {
			t.Errorf("a %s job: %v, want refused with %s", name, err, want)
		}
	}
	if list, err := d.Client.Jobs(ctx, client.JobFilter{}); err != nil || len(list) != 0 {
		t.Errorf("refused jobs left %d jobs (%v), want none", len(list), err)
	}
	// The bundle's files and default options (A4) reach the job.
	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "invoice",
		Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(`<link rel="stylesheet" href="invoice.css"><h1>Invoice 42</h1>`))}})
	p := output(t, d.Client, j, t.TempDir())
	if info := pdfInfo(t, p); !strings.HasPrefix(info["Page size"], "595.") {
		t.Errorf("bundle default paper: page size %q, want A4", info["Page size"])
	}

	t.Run("daemon-level", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			tweak  func(*daemon.Config)
			action string
			want   string
		}{
			{"missing chromium", func(c *daemon.Config) { c.JobChromium = "/nonexistent/chromium" }, "html-pdf", jobs.ProfileUnhealthy},
			{"missing soffice", func(c *daemon.Config) { c.Soffice = "/nonexistent/soffice" }, "office-pdf", jobs.ProfileUnhealthy},
			{"no consumer", func(c *daemon.Config) { c.NoJobWorkers = true }, "html-pdf", jobs.WorkerUnavailable},
			{"no runtime", func(c *daemon.Config) { c.JobsRuntime = "none" }, "html-pdf", jobs.RuntimeUnbound},
			{"unsafe runtime", func(c *daemon.Config) { c.JobsRuntime = "process" }, "office-pdf", jobs.RuntimeUnbound},
			{"runtime unavailable", func(c *daemon.Config) { c.JobsRuntime = "gvisor"; c.Runsc = "/nonexistent/runsc" }, "html-pdf", jobs.ProviderUnavailable},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := testenv.StartDaemon(t, tc.tweak)
				h, err := d.Client.Action(ctx, tc.action)
				if err != nil || h.Available || h.Reason != tc.want || h.Hint == "" {
					t.Errorf("%s: %+v, %v; want %s with a hint", tc.action, h, err, tc.want)
				}
				_, err = d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: tc.action,
					Inputs:  map[string]apitype.JobInput{"index.html": inline([]byte("<p>x</p>")), "a.docx": inline(testenv.DOCX("x"))},
					Options: json.RawMessage(`{"main": "` + map[bool]string{true: "index.html", false: "a.docx"}[tc.action == "html-pdf"] + `"}`)})
				if errcode.ReasonOf(err) != tc.want {
					t.Errorf("submitting: %v, want refused with %s", err, tc.want)
				}
				if list, _ := d.Client.Jobs(ctx, client.JobFilter{}); len(list) != 0 {
					t.Errorf("a refused job was stored: %+v", list)
				}
			})
		}
	})
}

// slowPage renders after delay (a wait the runner honours).
func slowPage(delay time.Duration) apitype.CreateJobRequest {
	return apitype.CreateJobRequest{Action: "html-pdf",
		Inputs:  map[string]apitype.JobInput{"index.html": inline([]byte("<h1>Slow " + delay.String() + "</h1>"))},
		Options: json.RawMessage(`{"wait_delay_ms": ` + strconv.Itoa(int(delay.Milliseconds())) + `}`)}
}

func TestJobCapacityAndIdempotency(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobCapacity = jobs.Capacity{Global: 20, Tenant: 4, User: 2} })

	// Four slow jobs for one user: two run, two wait, none uses a retry.
	var ids []string
	for i := range 4 {
		req := slowPage(2 * time.Second)
		req.Inputs["n.txt"] = inline([]byte(strconv.Itoa(i)))
		j, err := d.Client.CreateJob(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	maxActive, sawWaiting := 0, false
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := d.Client.Jobs(ctx, client.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		active, done := 0, 0
		for _, j := range list {
			switch j.State {
			case apitype.JobStarting, apitype.JobRunning:
				active++
			case apitype.JobWaiting:
				sawWaiting = true
			case apitype.JobSucceeded, apitype.JobFailed, apitype.JobCanceled:
				done++
			}
		}
		maxActive = max(maxActive, active)
		if done == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if maxActive > 2 || maxActive == 0 {
		t.Errorf("at most %d jobs ran at once, want 1-2 (2 per user)", maxActive)
	}
	if !sawWaiting {
		t.Error("no job was seen waiting for capacity")
	}
	for _, id := range ids {
		j, err := d.Client.Job(ctx, id)
		if err != nil || j.State != apitype.JobSucceeded || j.Attempt != 1 {
			t.Errorf("job %s: %s attempt %d (%v); want succeeded on its first attempt", id, j.State, j.Attempt, err)
		}
	}

	// Idempotency: a repeat returns the job, active or done; other inputs
	// under the same business id conflict.
	req := slowPage(500 * time.Millisecond)
	req.BusinessID = "order-42"
	first, err := d.Client.CreateJob(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Client.CreateJob(ctx, req)
	if err != nil || again.ID != first.ID || !again.Repeat {
		t.Errorf("repeat while active = %s repeat %t (%v), want %s", again.ID, again.Repeat, err, first.ID)
	}
	if _, err := d.Client.WaitJob(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	again, err = d.Client.CreateJob(ctx, req)
	if err != nil || again.ID != first.ID || again.State != apitype.JobSucceeded {
		t.Errorf("repeat after success = %s %s (%v), want %s succeeded", again.ID, again.State, err, first.ID)
	}
	other := slowPage(600 * time.Millisecond)
	other.BusinessID = "order-42"
	if _, err := d.Client.CreateJob(ctx, other); errcode.ReasonOf(err) != "business_id_conflict" || !errcode.Is(err, errcode.Conflict) {
		t.Errorf("same business id, other inputs: %v, want conflict business_id_conflict", err)
	}
	// Concurrent first requests make one job.
	conc := slowPage(100 * time.Millisecond)
	conc.BusinessID = "order-43"
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			j, err := d.Client.CreateJob(ctx, conc)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[j.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != 1 {
		t.Errorf("5 concurrent requests with one business id made jobs %v, want one", seen)
	}
}

func TestJobCancel(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobCapacity = jobs.Capacity{Global: 20, Tenant: 4, User: 1} })

	running, err := d.Client.CreateJob(ctx, slowPage(9*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	queued, err := d.Client.CreateJob(ctx, slowPage(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Either may be admitted first: one runs, the other waits.
	testenv.Eventually(t, time.Minute, "one job to run and the other to wait", func() bool {
		a, _ := d.Client.Job(ctx, running.ID)
		b, _ := d.Client.Job(ctx, queued.ID)
		if a.State == apitype.JobWaiting && b.State == apitype.JobRunning {
			running, queued = queued, running
			return true
		}
		return a.State == apitype.JobRunning && b.State == apitype.JobWaiting
	})
	// Waiting: canceled at once, and it never runs.
	j, err := d.Client.CancelJob(ctx, queued.ID)
	if err != nil || j.State != apitype.JobCanceled || j.Attempt != 0 {
		t.Errorf("cancel waiting = %s attempt %d (%v), want canceled before any attempt", j.State, j.Attempt, err)
	}
	// Running: its sandbox is killed.
	start := time.Now()
	j, err = d.Client.CancelJob(ctx, running.ID)
	if err != nil || j.State != apitype.JobCanceled || len(j.Outputs) != 0 {
		t.Errorf("cancel running = %s outputs %v (%v), want canceled without outputs", j.State, j.Outputs, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("canceling a running job took %s: it was not stopped", time.Since(start))
	}
	// Canceling again is a no-op; a finished job cannot be canceled.
	if j, err := d.Client.CancelJob(ctx, running.ID); err != nil || j.State != apitype.JobCanceled {
		t.Errorf("second cancel = %s, %v", j.State, err)
	}
	done := runJob(t, d.Client, slowPage(0))
	if _, err := d.Client.CancelJob(ctx, done.ID); errcode.ReasonOf(err) != "job_finished" {
		t.Errorf("cancel succeeded job: %v, want job_finished", err)
	}
	// Queued (no capacity check yet): the queue forgets it.
	q, err := d.Client.CreateJob(ctx, slowPage(0))
	if err != nil {
		t.Fatal(err)
	}
	if j, err := d.Client.CancelJob(ctx, q.ID); err != nil || j.State != apitype.JobCanceled {
		// It may have started already on this fast path; then it was killed.
		t.Errorf("cancel queued = %s, %v", j.State, err)
	}
	time.Sleep(500 * time.Millisecond)
	if j, _ := d.Client.Job(ctx, q.ID); j.State != apitype.JobCanceled || len(j.Outputs) != 0 {
		t.Errorf("a canceled job went on to %s", j.State)
	}
}

// TestJobRetryableFailure: a job that passes its hard deadline is killed
// and retried in a fresh sandbox until its attempts are used up.
func TestJobRetryableFailure(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		p := jobs.DefaultProfile("browser")
		p.Timeout, p.HardDeadline = 20*time.Second, 2*time.Second
		c.JobProfiles = map[string]jobs.Profile{"browser": p}
	})
	j := runJob(t, d.Client, slowPage(8*time.Second))
	if j.State != apitype.JobFailed || j.Error == nil || !j.Error.Retryable || j.Error.Reason != "timeout" || j.Attempt != j.MaxAttempts {
		t.Errorf("job = %s attempt %d/%d error %+v; want failed with a retryable timeout after every attempt",
			j.State, j.Attempt, j.MaxAttempts, j.Error)
	}
	types := eventTypes(t, d.Client, j.ID)
	if n := countOf(types, "starting"); n != j.MaxAttempts {
		t.Errorf("events %v: %d starts, want %d", types, n, j.MaxAttempts)
	}
	// Invalid options are refused before anything is queued.
	_, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: threePages(), Options: json.RawMessage(`{"scale": 5, "colour": "red"}`)})
	if !errcode.Is(err, errcode.Invalid) {
		t.Errorf("invalid options: %v, want invalid", err)
	}
}

// TestJobRendererOutOfMemory: a page that needs more memory than its
// profile has crashes its renderer; the error says how much memory the
// profile has and how to change it (--job-memory), and the retry, meeting
// the same crash, ends the job instead of using every attempt. The
// control is TestJobRetryableFailure: a timeout (not the document's
// doing) is still retried until the attempts run out. A second control
// here: the same profile renders an ordinary page.
func TestJobRendererOutOfMemory(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.JobPools = map[string]int{"browser": 0, "office": 0}
		c.JobProfiles = map[string]jobs.Profile{"browser": jobs.DefaultProfile("browser").WithMemory(768)}
	})
	// Buffers outside V8's heap, touched so the kernel backs them: only
	// the sandbox's memory limit stops it.
	hog := `<h1>Hog</h1><script>const a = []; for (;;) a.push(new Uint8Array(32 << 20).fill(7));</script>`
	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: map[string]apitype.JobInput{"index.html": inline([]byte(hog))}})
	if j.State != apitype.JobFailed || j.Error == nil {
		t.Fatalf("memory hog job = %s, error %+v; want failed", j.State, j.Error)
	}
	if !strings.Contains(j.Error.Message, "768 MiB of memory") || !strings.Contains(j.Error.Message, "--job-memory browser=MB") {
		t.Errorf("error %+v, want the profile's memory and --job-memory named", j.Error)
	}
	if j.Error.Reason != "renderer_crashed" || j.Attempt != 2 || !strings.Contains(j.Error.Message, "failed the same way") {
		t.Errorf("job ended at attempt %d/%d with %+v; want renderer_crashed twice, then no third attempt",
			j.Attempt, j.MaxAttempts, j.Error)
	}
	if ok := runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()}); ok.State != apitype.JobSucceeded {
		t.Errorf("control: an ordinary page on the 768 MiB profile = %s, %+v; want succeeded", ok.State, ok.Error)
	}
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestJobSurvivesKill9 kills the daemon while a job runs: the restarted
// daemon runs it again in a fresh sandbox and it completes exactly once.
func TestJobSurvivesKill9(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	j, err := d.Client.CreateJob(ctx, slowPage(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the job to run", func() bool {
		got, _ := d.Client.Job(ctx, j.ID)
		return got.State == apitype.JobRunning
	})
	d.Kill9(t)
	d2 := testenv.StartDaemonProcess(t, dataDir)
	got, err := d2.Client.WaitJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != apitype.JobSucceeded || got.Attempt != 2 || len(got.Outputs) != 1 {
		t.Errorf("job after kill -9 = %s attempt %d outputs %d (%+v), want succeeded on attempt 2 with one output",
			got.State, got.Attempt, len(got.Outputs), got.Error)
	}
	types := eventTypes(t, d2.Client, j.ID)
	if countOf(types, "succeeded") != 1 || countOf(types, "starting") != 2 {
		t.Errorf("events = %v, want two starts and exactly one succeeded", types)
	}
	// Nothing of either attempt's sandbox is left running.
	var sandboxes []string
	_ = d2.Client.JobEvents(ctx, j.ID, 0, func(ev apitype.JobEvent) error {
		if m := regexp.MustCompile(`sbx_\w+`).FindString(ev.Message); m != "" {
			sandboxes = append(sandboxes, m)
		}
		return nil
	})
	if len(sandboxes) != 2 {
		t.Fatalf("events name sandboxes %v, want one per attempt", sandboxes)
	}
	testenv.Eventually(t, 30*time.Second, "no job sandbox left", func() bool {
		for _, id := range sandboxes {
			if len(d2.SandboxProcesses(id)) > 0 {
				return false
			}
		}
		return onlyPool(d2)
	})
}

// onlyPool reports whether the daemon holds no job sandbox beyond its
// pools (tests run with none).
func onlyPool(d *testenv.Daemon) bool {
	sys, err := d.Client.System(context.Background())
	return err == nil && sys.Jobs.Sandboxes == 0
}

func TestJobFiles(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()
	body := []byte("hello, files")
	ref, err := d.Client.UploadFile(ctx, bytes.NewReader(body), "hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if ref.SHA256 != hex.EncodeToString(sum[:]) || ref.Size != int64(len(body)) || !strings.HasPrefix(ref.MIME, "text/plain") {
		t.Errorf("upload = %+v", ref)
	}
	rc, err := d.Client.DownloadFile(ctx, ref.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, body) {
		t.Errorf("download = %q", got)
	}
	if _, err := d.Client.DownloadFile(ctx, strings.Repeat("0", 64)); !errcode.Is(err, errcode.NotFound) {
		t.Errorf("unknown file: %v, want not found", err)
	}
	if _, err := d.Client.DownloadFile(ctx, "../../etc/passwd"); err == nil {
		t.Error("a path as a file id was served")
	}
	_, err = d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: map[string]apitype.JobInput{"index.html": {SHA256: strings.Repeat("a", 64)}}})
	if !errcode.Is(err, errcode.NotFound) {
		t.Errorf("a job naming a missing upload: %v, want not found", err)
	}
	_, err = d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: map[string]apitype.JobInput{"../index.html": inline([]byte("x"))}})
	if !errcode.Is(err, errcode.Invalid) {
		t.Errorf("an input named ../index.html: %v, want invalid", err)
	}
	// No temporary file is left by the uploads.
	tmp, _ := os.ReadDir(filepath.Join(d.DataDir, "files", "tmp"))
	if len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// testImage is a w x h image of one colour.
func testImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	return img
}

// jobSandbox returns the sandbox a job's (last) attempt ran in, from its
// events.
func jobSandbox(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	sb := ""
	err := c.JobEvents(context.Background(), id, 0, func(ev apitype.JobEvent) error {
		if m := regexp.MustCompile(`sbx_\w+`).FindString(ev.Message); m != "" {
			sb = m
		}
		return nil
	})
	if err != nil || sb == "" {
		t.Fatalf("job %s names no sandbox in its events (%v)", id, err)
	}
	return sb
}

// TestJobRuntimeReuse: with --job-runtime-reuse 2 a tenant's second job
// runs in the sandbox of its first, without the first's files; its third
// in a new one; and another tenant never shares a sandbox with the first.
func TestJobRuntimeReuse(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx := context.Background()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobReuse = 2 })
	if _, err := d.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	key, err := d.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: "other", Scope: "execution", Tenant: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other := client.New(d.URL, key.Secret)
	// The page shows old.txt if the job has it, NO-OLD-FILE if not.
	reader := []byte(`<p id=o>x</p><script>fetch("old.txt").then(r => r.ok ? r.text() : "NO-OLD-FILE")
.then(t => document.getElementById("o").textContent = t)</script>`)
	withOld := apitype.CreateJobRequest{Action: "html-pdf", Options: json.RawMessage(`{"wait_network_idle": true}`),
		Inputs: map[string]apitype.JobInput{"index.html": inline(reader), "old.txt": inline([]byte("OLD-CONTENT"))}}
	withoutOld := apitype.CreateJobRequest{Action: "html-pdf", Options: json.RawMessage(`{"wait_network_idle": true}`),
		Inputs: map[string]apitype.JobInput{"index.html": inline(reader)}}
	dir := t.TempDir()

	first := runJob(t, d.Client, withOld)
	if text := pdfText(t, output(t, d.Client, first, dir)); !strings.Contains(text, "OLD-CONTENT") {
		t.Fatalf("the control job does not show its own old.txt:\n%s", text)
	}
	second := runJob(t, d.Client, withoutOld)
	if text := pdfText(t, output(t, d.Client, second, dir)); !strings.Contains(text, "NO-OLD-FILE") {
		t.Errorf("the second job saw the first job's file:\n%s", text)
	}
	third := runJob(t, d.Client, withoutOld)
	s1, s2, s3 := jobSandbox(t, d.Client, first.ID), jobSandbox(t, d.Client, second.ID), jobSandbox(t, d.Client, third.ID)
	if s1 != s2 || s3 == s2 {
		t.Errorf("sandboxes of three jobs = %s %s %s, want the first two the same (reuse 2) and the third new", s1, s2, s3)
	}
	j := runJob(t, other, withoutOld)
	if sb := jobSandbox(t, other, j.ID); sb == s1 || sb == s3 {
		t.Errorf("another tenant's job ran in sandbox %s of the first tenant's", sb)
	}
}

func metricsText(t *testing.T, d *testenv.Daemon) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestJobsOnGVisor runs an HTML and an office job in gVisor sandboxes
// (--jobs-runtime gvisor), in the gvisor pass of make test.
func TestJobsOnGVisor(t *testing.T) {
	if testenv.Runtime() != "gvisor" {
		t.Skip("runs in the gvisor pass of make test")
	}
	testenv.NeedRuntime(t, "gvisor")
	testenv.NeedChromium(t)
	testenv.NeedCommand(t, "soffice")
	testenv.NeedCommand(t, "pdfinfo")
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobsRuntime = "gvisor" })
	if sys, err := d.Client.System(context.Background()); err != nil || sys.Jobs.Runtime != "gvisor" {
		t.Fatalf("jobs runtime = %q (%v), want gvisor", sys.Jobs.Runtime, err)
	}
	dir := t.TempDir()
	j := runJob(t, d.Client, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
	if info := pdfInfo(t, output(t, d.Client, j, dir)); info["Pages"] != "3" {
		t.Errorf("html-pdf under gVisor: %s pages, want 3", info["Pages"])
	}
	j = runJob(t, d.Client, apitype.CreateJobRequest{Action: "office-pdf",
		Inputs: map[string]apitype.JobInput{"report.docx": inline(testenv.DOCX("Under gVisor", "Page two"))}})
	p := output(t, d.Client, j, dir)
	if info := pdfInfo(t, p); info["Pages"] != "2" || !strings.Contains(pdfText(t, p), "Under gVisor") {
		t.Errorf("office-pdf under gVisor: %s pages, text %q", info["Pages"], pdfText(t, p))
	}
}

// TestJobBounds: requests past a bound are refused with the field or
// reason named, and nothing is stored.
func TestJobBounds(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx := context.Background()
	d := testenv.StartDaemon(t, nil)

	many := map[string]apitype.JobInput{"index.html": inline([]byte("<p>x</p>"))}
	for i := range jobs.MaxInputs {
		many[fmt.Sprintf("asset%d.txt", i)] = inline([]byte("x"))
	}
	_, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: many})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Problems["inputs"] == "" {
		t.Errorf("%d inputs: %v, want invalid with a problem for inputs", len(many), err)
	}
	_, err = d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf", BusinessID: strings.Repeat("b", 201),
		Inputs: map[string]apitype.JobInput{"index.html": inline([]byte("<p>x</p>"))}})
	if !errors.As(err, &ce) || ce.Problems["business_id"] == "" {
		t.Errorf("a 201-byte business_id: %v, want invalid with a problem for business_id", err)
	}
	// An upload that says it is larger than the bound is refused before
	// its body is read.
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		d.Token, jobs.MaxInputBytes+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "file_too_large") {
		t.Errorf("an upload of %d bytes: %s %s, want 413 file_too_large", jobs.MaxInputBytes+1, resp.Status, body)
	}
	// Multipart options that are not a JSON object.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("files", "index.html")
	_, _ = fw.Write([]byte("<p>x</p>"))
	_ = mw.WriteField("options", "[1, 2]")
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/convert/html-pdf", &form)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"options"`) {
			t.Errorf("convert with options [1, 2]: %s %s, want 400 naming options", resp.Status, body)
		}
	}
	if list, _ := d.Client.Jobs(ctx, client.JobFilter{}); len(list) != 0 {
		t.Errorf("refused requests stored jobs: %+v", list)
	}
}

// TestJobProfileUnhealthyAfterFailedStarts: a profile whose runtimes keep
// failing to start (a "Chromium" that exits at once) turns
// PROFILE_UNHEALTHY after three failures, and jobs are refused with it.
func TestJobProfileUnhealthyAfterFailedStarts(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx := context.Background()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.JobChromium = "/bin/false"
		c.JobPools = map[string]int{"browser": 1}
	})
	// The control: before any start has failed three times, it is available.
	if h, err := d.Client.Action(ctx, "html-pdf"); err != nil || (!h.Available && h.Reason != jobs.ProfileUnhealthy) {
		t.Fatalf("html-pdf at start: %+v, %v", h, err)
	}
	var h apitype.ActionHealth
	testenv.Eventually(t, 2*time.Minute, "html-pdf to turn PROFILE_UNHEALTHY", func() bool {
		h, _ = d.Client.Action(ctx, "html-pdf")
		return h.Reason == jobs.ProfileUnhealthy
	})
	if !strings.Contains(h.Message, "fail to start") {
		t.Errorf("message %q, want it to say the sandboxes fail to start", h.Message)
	}
	if _, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
		Inputs: map[string]apitype.JobInput{"index.html": inline([]byte("<p>x</p>"))}}); errcode.ReasonOf(err) != jobs.ProfileUnhealthy {
		t.Errorf("submitting: %v, want refused with PROFILE_UNHEALTHY", err)
	}
	if h, err := d.Client.Action(ctx, "office-pdf"); err != nil || !h.Available {
		t.Errorf("office-pdf: %+v, %v; want available (its profile is sound)", h, err)
	}
}

// TestJobCapacityPerEndUser: the end user a tenant's application names
// (Berth-User, or the job's user field) is whom the per-user capacity
// counts, and a tenant's own jobs limit bounds all its users together.
func TestJobCapacityPerEndUser(t *testing.T) {
	needJobs(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobCapacity = jobs.Capacity{Global: 20, Tenant: 4, User: 1} })
	alice := client.New(d.URL, d.Token, client.WithUser("alice"))

	// run submits jobs and returns the most of them seen active at once.
	run := func(submit func(i int) (apitype.Job, error), n int) int {
		t.Helper()
		var ids []string
		for i := range n {
			j, err := submit(i)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		most := 0
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			active, done := 0, 0
			for _, id := range ids {
				j, err := d.Client.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				switch j.State {
				case apitype.JobStarting, apitype.JobRunning:
					active++
				case apitype.JobSucceeded, apitype.JobFailed, apitype.JobCanceled:
					done++
				}
			}
			most = max(most, active)
			if done == n {
				break
			}
		}
		for _, id := range ids {
			if j, _ := d.Client.Job(ctx, id); j.State != apitype.JobSucceeded {
				t.Errorf("job %s ended %s", id, j.State)
			}
		}
		return most
	}
	page := func(i int) apitype.CreateJobRequest {
		req := slowPage(2 * time.Second)
		req.Inputs["n.txt"] = inline([]byte(strconv.Itoa(i)))
		return req
	}
	// Two users of one key: one job each at a time, both at once.
	if most := run(func(i int) (apitype.Job, error) {
		if i%2 == 0 {
			return alice.CreateJob(ctx, page(i))
		}
		req := page(i)
		req.User = "bob"
		return d.Client.CreateJob(ctx, req)
	}, 4); most != 2 {
		t.Errorf("alice's and bob's jobs (1 per user): at most %d ran at once, want 2", most)
	}
	// The tenant's own limit of 1 holds them all to one.
	one := 1
	if _, err := d.Client.SetTenant(ctx, "default", apitype.SetTenantRequest{Jobs: &one}); err != nil {
		t.Fatal(err)
	}
	if most := run(func(i int) (apitype.Job, error) {
		req := page(i)
		req.User = "user-" + strconv.Itoa(i)
		return d.Client.CreateJob(ctx, req)
	}, 3); most != 1 {
		t.Errorf("three users' jobs under the tenant's jobs limit 1: at most %d ran at once, want 1", most)
	}

	// The list pages, newest first, with a cursor only its tenant may use.
	all, err := d.Client.Jobs(ctx, client.JobFilter{})
	if err != nil || len(all) != 7 {
		t.Fatalf("Jobs = %d, %v, want the 7 jobs", len(all), err)
	}
	var walked []string
	f := client.JobFilter{Limit: 3}
	var cursor string
	for range 5 {
		page, err := d.Client.JobsPage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			walked = append(walked, j.ID)
		}
		if cursor == "" {
			cursor = page.NextCursor
		}
		if f.Cursor = page.NextCursor; f.Cursor == "" {
			break
		}
	}
	var want []string
	for _, j := range all {
		want = append(want, j.ID)
	}
	if !slices.Equal(walked, want) {
		t.Errorf("pages of 3 walked %v, want %v", walked, want)
	}
	if _, err := d.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	k, err := d.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: "other", Tenant: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other := client.New(d.URL, k.Secret)
	if list, err := other.Jobs(ctx, client.JobFilter{}); err != nil || len(list) != 0 {
		t.Errorf("another tenant's Jobs = %d, %v, want none", len(list), err)
	}
	if _, err := other.JobsPage(ctx, client.JobFilter{Limit: 3, Cursor: cursor}); !client.IsReason(err, "cursor_invalid") {
		t.Errorf("the default tenant's cursor with another tenant's key = %v, want cursor_invalid", err)
	}
}
