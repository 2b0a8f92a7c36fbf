package daemon_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// gotFile is one file of a Gotenberg form.
type gotFile struct {
	name string
	body []byte
}

// gotAnswer is a Gotenberg route's answer.
type gotAnswer struct {
	status int
	header http.Header
	body   []byte
}

// gotPost sends a form as a Gotenberg client does: every file under
// "files", fields as text, and the given headers (Authorization among
// them: none means the daemon's key as Bearer).
func gotPost(t *testing.T, d *testenv.Daemon, route string, files []gotFile, fields map[string]string, headers map[string]string) gotAnswer {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range files {
		fw, _ := mw.CreateFormFile("files", f.name)
		_, _ = fw.Write(f.body)
	}
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, d.URL+route, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+d.Token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return gotAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

// want200 checks a successful answer of type ctype named name, and
// writes its body into a file.
func (a gotAnswer) want200(t *testing.T, ctype, name string) string {
	t.Helper()
	if a.status != http.StatusOK || a.header.Get("Content-Type") != ctype {
		t.Fatalf("answer = %d %s (%s): %.400s", a.status, a.header.Get("Content-Type"), a.header.Get("Berth-Error"), a.body)
	}
	if name != "" {
		_, params, _ := mime.ParseMediaType(a.header.Get("Content-Disposition"))
		if params["filename"] != name {
			t.Errorf("Content-Disposition = %q, want the file name %s", a.header.Get("Content-Disposition"), name)
		}
	}
	p := filepath.Join(t.TempDir(), "out"+filepath.Ext(name))
	if err := os.WriteFile(p, a.body, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantPlain checks a Gotenberg error: its status and a plain-text body
// matching re.
func (a gotAnswer) wantPlain(t *testing.T, status int, re string) {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != "text/plain; charset=UTF-8" || !regexp.MustCompile(re).Match(a.body) {
		t.Errorf("answer = %d %s %q, want %d text/plain matching %q", a.status, a.header.Get("Content-Type"), a.body, status, re)
	}
}

// unzipAll returns a zip answer's files by name.
func unzipAll(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("the answer is not a zip: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	return out
}

func pdfPages(t *testing.T, path string) string { t.Helper(); return pdfInfo(t, path)["Pages"] }

// TestGotenbergRoutes: every Gotenberg-compatible route with Gotenberg's
// fields, through a real daemon, as a Gotenberg client sends them; bad
// fields get Gotenberg's 400 and message; the key works as a Basic-auth
// password on /forms/ only; each request is a job in the jobs list.
func TestGotenbergRoutes(t *testing.T) {
	needJobs(t)
	testenv.NeedCommand(t, "qpdf")
	testenv.NeedCommand(t, "exiftool")
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobPools = map[string]int{"browser": 1, "office": 1} })

	page := `<!doctype html><html><head><link rel="stylesheet" href="style.css"></head><body>
<script>setTimeout(() => { document.querySelector("h1").textContent += " ready"; window.globalVar = "ready"; }, 300)</script>
<section><h1>Page one</h1></section><section><h1>Page two</h1></section><section><h1>Page three</h1></section></body></html>`
	css := []byte(`section { break-after: page; } section:last-child { break-after: auto; }`)

	t.Run("html", func(t *testing.T) {
		a := gotPost(t, d, "/forms/chromium/convert/html", []gotFile{{"index.html", []byte(page)}, {"style.css", css},
			{"footer.html", []byte(`<p style="font-size:10px">Folio <span class="pageNumber"></span> of <span class="totalPages"></span></p>`)}},
			map[string]string{"paperWidth": "210mm", "paperHeight": "11.7", "marginBottom": "1", "nativePageRanges": "1-2",
				"waitDelay": "100ms", "printBackground": "true", "waitForExpression": "window.globalVar === 'ready'"},
			map[string]string{"Gotenberg-Output-Filename": "report", "Gotenberg-Trace": "trace-html"})
		p := a.want200(t, "application/pdf", "report.pdf")
		if a.header.Get("Gotenberg-Trace") != "trace-html" {
			t.Errorf("Gotenberg-Trace = %q, want the one sent", a.header.Get("Gotenberg-Trace"))
		}
		info := pdfInfo(t, p)
		if info["Pages"] != "2" || !strings.HasPrefix(info["Page size"], "595") {
			t.Errorf("pages %s, size %s; want 2 pages of 595 x 842 points", info["Pages"], info["Page size"])
		}
		if txt := pdfText(t, p); !strings.Contains(txt, "Page one ready") || !strings.Contains(txt, "Page two") ||
			strings.Contains(txt, "Page three") || !strings.Contains(txt, "Folio 2 of") {
			t.Errorf("text:\n%s\nwant pages one (after waitForExpression) and two with the footer", txt)
		}
	})
	t.Run("markdown", func(t *testing.T) {
		a := gotPost(t, d, "/forms/chromium/convert/markdown", []gotFile{
			{"index.html", []byte(`<!doctype html><html><body><div class="doc">{{ toHTML "notes.md" }}</div></body></html>`)},
			{"notes.md", []byte("# Notes\n\n| Fruit | Count |\n|---|---|\n| Apple | 3 |\n")}}, nil, nil)
		p := a.want200(t, "application/pdf", "")
		if txt := pdfText(t, p); !regexp.MustCompile(`Apple\s+3`).MatchString(txt) || strings.Contains(txt, "toHTML") {
			t.Errorf("text:\n%s\nwant the Markdown table rendered", txt)
		}
	})
	t.Run("screenshots", func(t *testing.T) {
		for _, tc := range []struct {
			route string
			files []gotFile
		}{
			{"/forms/chromium/screenshot/html", []gotFile{{"index.html", []byte(page)}, {"style.css", css}}},
			{"/forms/chromium/screenshot/markdown", []gotFile{{"index.html", []byte(`<body>{{ toHTML "a.md" }}</body>`)}, {"a.md", []byte("# Shot\n")}}},
		} {
			a := gotPost(t, d, tc.route, tc.files, map[string]string{"width": "400", "height": "300", "clip": "true", "format": "png"},
				map[string]string{"Gotenberg-Output-Filename": "shot"})
			a.want200(t, "image/png", "shot.png")
			img, err := png.Decode(bytes.NewReader(a.body))
			if err != nil || img.Bounds().Dx() != 400 || img.Bounds().Dy() != 300 {
				t.Errorf("%s: PNG %v (%v), want 400 x 300", tc.route, err, img.Bounds())
			}
		}
	})
	t.Run("emulation", func(t *testing.T) {
		probe := []gotFile{{"index.html", []byte(`<!doctype html><html><head><style>
.p, .s { display: none } @media print { .p { display: block } } @media screen { .s { display: block } }</style></head>
<body><p class="p">media print</p><p class="s">media screen</p><p id="ua"></p><p id="scheme"></p>
<script>document.getElementById("ua").textContent = "agent " + navigator.userAgent;
document.getElementById("scheme").textContent = "scheme " + (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");</script>
</body></html>`)}}
		// The control: Chromium's own agent, the print media, a light scheme.
		txt := pdfText(t, gotPost(t, d, "/forms/chromium/convert/html", probe, nil, nil).want200(t, "application/pdf", ""))
		if !strings.Contains(txt, "media print") || strings.Contains(txt, "media screen") || !strings.Contains(txt, "HeadlessChrome") ||
			!strings.Contains(txt, "scheme light") {
			t.Errorf("without emulation the page reads:\n%s\nwant the print media, Chromium's agent, a light scheme", txt)
		}
		txt = pdfText(t, gotPost(t, d, "/forms/chromium/convert/html", probe, map[string]string{"userAgent": "BerthProbe/1.0",
			"emulatedMediaType": "screen", "emulatedMediaFeatures": `[{"name":"prefers-color-scheme","value":"dark"}]`}, nil).
			want200(t, "application/pdf", ""))
		if !strings.Contains(txt, "media screen") || strings.Contains(txt, "media print") || !strings.Contains(txt, "agent BerthProbe/1.0") ||
			!strings.Contains(txt, "scheme dark") {
			t.Errorf("with emulation the page reads:\n%s\nwant the screen media, agent BerthProbe/1.0, a dark scheme", txt)
		}
	})
	t.Run("url of the sandbox's loopback refused", func(t *testing.T) {
		// The url routes themselves are TestJobURL's, on a test internet.
		a := gotPost(t, d, "/forms/chromium/convert/url", nil, map[string]string{"url": "http://127.0.0.1:7777/run"}, nil)
		a.wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'url' is invalid \(got 'http://127.0.0.1:7777/run', resulting to must not be the job sandbox's own loopback`)
		if a.header.Get("Gotenberg-Trace") == "" {
			t.Error("no Gotenberg-Trace made for a request without one")
		}
	})
	t.Run("libreoffice merge", func(t *testing.T) {
		a := gotPost(t, d, "/forms/libreoffice/convert", []gotFile{
			{"a.docx", testenv.DOCX("Alpha letter", "Alpha second")}, {"b.docx", testenv.DOCX("Bravo memo")}},
			map[string]string{"merge": "true", "nativePageRanges": "1", "landscape": "true", "exportFormFields": "false", "quality": "80"},
			map[string]string{"Gotenberg-Output-Filename": "both"})
		p := a.want200(t, "application/pdf", "both.pdf")
		info := pdfInfo(t, p)
		var w, h float64
		_, _ = fmt.Sscanf(info["Page size"], "%g x %g", &w, &h)
		if info["Pages"] != "2" || w <= h {
			t.Errorf("merged pages = %s of %s, want 1 + 1 (nativePageRanges 1), landscape", info["Pages"], info["Page size"])
		}
		txt := pdfText(t, p)
		if strings.Index(txt, "Alpha letter") > strings.Index(txt, "Bravo memo") || strings.Contains(txt, "Alpha second") {
			t.Errorf("text:\n%s\nwant page 1 of a.docx, then of b.docx", txt)
		}
		gotPost(t, d, "/forms/libreoffice/convert", []gotFile{{"a.docx", testenv.DOCX("x")}}, map[string]string{"pdfa": "PDF/A-9z"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: options.pdfa: `)
	})
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("gotenberg:"+d.Token))
	t.Run("merge with basic auth", func(t *testing.T) {
		a := gotPost(t, d, "/forms/pdfengines/merge", []gotFile{{"b.pdf", testenv.PDF("Bee", 2)}, {"a.pdf", testenv.PDF("Ay", 1)}}, nil,
			map[string]string{"Authorization": basic})
		p := a.want200(t, "application/pdf", "")
		if n := pdfPages(t, p); n != "3" {
			t.Errorf("merged pages = %s, want 1 + 2", n)
		}
		if txt := pdfText(t, p); strings.Index(txt, "Ay page 1") > strings.Index(txt, "Bee page 1") {
			t.Errorf("text:\n%s\nwant a.pdf first (name order)", txt)
		}
		wrong := "Basic " + base64.StdEncoding.EncodeToString([]byte("gotenberg:brt_wrong"))
		if a := gotPost(t, d, "/forms/pdfengines/merge", []gotFile{{"a.pdf", testenv.PDF("Ay", 1)}}, nil,
			map[string]string{"Authorization": wrong}); a.status != http.StatusUnauthorized {
			t.Errorf("a wrong password = %d, want 401", a.status)
		}
		req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/jobs", nil)
		req.Header.Set("Authorization", basic)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Basic auth on /v1/jobs = %d, want 401: only the /forms/ routes take it", resp.StatusCode)
		}
	})
	t.Run("split", func(t *testing.T) {
		a := gotPost(t, d, "/forms/pdfengines/split", []gotFile{{"doc.pdf", testenv.PDF("Doc", 3)}},
			map[string]string{"splitMode": "intervals", "splitSpan": "1"}, map[string]string{"Gotenberg-Output-Filename": "parts"})
		a.want200(t, "application/zip", "parts.zip")
		files := unzipAll(t, a.body)
		if len(files) != 3 {
			t.Fatalf("zip holds %d files, want 3", len(files))
		}
		for name, b := range files {
			p := filepath.Join(t.TempDir(), name)
			_ = os.WriteFile(p, b, 0o600)
			if n := pdfPages(t, p); n != "1" {
				t.Errorf("%s has %s pages, want 1", name, n)
			}
		}
		gotPost(t, d, "/forms/pdfengines/split", []gotFile{{"doc.pdf", testenv.PDF("Doc", 3)}}, map[string]string{"splitSpan": "1"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'splitMode' is required$`)
	})
	t.Run("metadata round trip", func(t *testing.T) {
		a := gotPost(t, d, "/forms/pdfengines/metadata/write", []gotFile{{"m.pdf", testenv.PDF("Meta", 1)}},
			map[string]string{"metadata": `{"Title":"Quarterly","Author":"Ann Example","Keywords":["first","second"]}`}, nil)
		a.want200(t, "application/pdf", "")
		r := gotPost(t, d, "/forms/pdfengines/metadata/read", []gotFile{{"m.pdf", a.body}}, nil, nil)
		r.want200(t, "application/json", "")
		var m map[string]map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("metadata %s: %v", r.body, err)
		}
		if got := m["m.pdf"]; got["Title"] != "Quarterly" || got["Author"] != "Ann Example" || fmt.Sprint(got["Keywords"]) != "[first second]" {
			t.Errorf("metadata read = %s", r.body)
		}
		gotPost(t, d, "/forms/pdfengines/metadata/write", []gotFile{{"m.pdf", testenv.PDF("Meta", 1)}}, map[string]string{"metadata": "foo"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'metadata' is invalid \(got 'foo', resulting to unmarshal metadata: `)
	})
	t.Run("bad fields", func(t *testing.T) {
		files := []gotFile{{"index.html", []byte(page)}}
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"paperWidth": "abc"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'paperWidth' is invalid \(got 'abc', resulting to strconv.ParseFloat: parsing "abc": invalid syntax\)$`)
		gotPost(t, d, "/forms/chromium/screenshot/html", files, map[string]string{"omitBackground": "true"}, nil).
			wantPlain(t, http.StatusBadRequest, `form field 'omitBackground' is invalid \(got 'true', resulting to Berth does not support it`)
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"cookies": `[{"name":"a","value":"b","domain":"x"}]`}, nil).
			wantPlain(t, http.StatusBadRequest, `form field 'cookies' is invalid \(got '.*', resulting to Berth does not support it`)
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"emulatedMediaType": "tv"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'emulatedMediaType' is invalid \(got 'tv', resulting to wrong value, expected either 'screen', 'print' or empty\)$`)
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"emulatedMediaFeatures": `{"name":"x"}`}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'emulatedMediaFeatures' is invalid \(got '.*', resulting to unmarshal emulatedMediaFeatures: `)
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"emulatedMediaFeatures": `[{"name":"prefers-color-scheme","value":"dark;x"}]`}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: .*emulated_media_features.*CSS keywords`)
		gotPost(t, d, "/forms/chromium/convert/html", []gotFile{{"page.html", []byte(page)}}, nil, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form file 'index.html' is required$`)
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"scale": "9"}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: .*scale.*between 0.1 and 2`)
		gotPost(t, d, "/forms/pdfengines/merge", nil, nil, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: no form file found for extensions: \[\.pdf\]$`)
		// The bound on a field: one byte over 1 MiB is refused; at 1 MiB it
		// is read (and refused only as the header it is not).
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"userAgent": strings.Repeat("a", 1<<20+1)}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: form field 'userAgent' is more than 1 MiB`)
		gotPost(t, d, "/forms/chromium/convert/html", files, map[string]string{"userAgent": strings.Repeat("a", 1<<20)}, nil).
			wantPlain(t, http.StatusBadRequest, `^Invalid form data: .*user_agent.*at most 512 bytes`)
	})
	t.Run("health and jobs", func(t *testing.T) {
		resp, err := http.Get(d.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Status  string                       `json:"status"`
			Details map[string]map[string]string `json:"details"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || h.Status != "up" || h.Details["chromium"]["status"] != "up" || h.Details["libreoffice"]["status"] != "up" {
			t.Errorf("GET /health = %d %+v, want 200 up", resp.StatusCode, h)
		}
		list, err := d.Client.Jobs(context.Background(), client.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, j := range list {
			if j.State == apitype.JobSucceeded {
				seen[j.Action] = true
			}
		}
		for _, a := range []string{"html-pdf", "html-png", "office-pdf", "pdf-merge", "pdf-split", "pdf-metadata-read", "pdf-metadata-write"} {
			if !seen[a] {
				t.Errorf("no succeeded %s job in the jobs list: %v", a, seen)
			}
		}
	})
}
