package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestJobOfficeWarm converts office documents in runtimes whose
// LibreOffice was started, listening, before the job (see docs/jobs.md):
// each format's pages and text, LibreOffice's PDF options, options refused
// before anything is queued, and a warm LibreOffice killed before its job
// (the job still succeeds, in another fresh runtime).
func TestJobOfficeWarm(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.JobPools = map[string]int{"browser": 0, "office": 1} })
	ctx := context.Background()
	dir := t.TempDir() // outlives the subtests: the plain DOCX is a control of the options
	office := func(t *testing.T, name string, doc []byte, opts string) (string, apitype.Job) {
		t.Helper()
		req := apitype.CreateJobRequest{Action: "office-pdf", Inputs: map[string]apitype.JobInput{name: inline(doc)}}
		if opts != "" {
			req.Options = json.RawMessage(opts)
		}
		j := runJob(t, d.Client, req)
		out, err := os.MkdirTemp(dir, "job")
		if err != nil {
			t.Fatal(err)
		}
		return output(t, d.Client, j, out), j
	}
	wantText := func(t *testing.T, p string, want ...string) {
		t.Helper()
		text := pdfText(t, p)
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("the PDF's text lacks %q:\n%s", w, text)
			}
		}
	}

	// The plain DOCX is also the control of the options below: portrait,
	// no PDF/A identification, every page.
	var plainDOCX string
	t.Run("formats", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			doc   []byte
			pages string
			text  []string
		}{
			{"report.docx", testenv.DOCX("DOCX first page", "DOCX second page"), "2", []string{"DOCX first page", "DOCX second page"}},
			{"letter.odt", testenv.ODT("ODT first page", "ODT second page"), "2", []string{"ODT first page", "ODT second page"}},
			{"sheet.xlsx", testenv.XLSX([]string{"city", "population"}, []string{"Lyon", "522228"}), "1", []string{"Lyon", "522228"}},
			{"deck.pptx", testenv.PPTX("PPTX slide one", "PPTX slide two"), "2", []string{"PPTX slide one", "PPTX slide two"}},
		} {
			p, _ := office(t, tc.name, tc.doc, "")
			if info := pdfInfo(t, p); info["Pages"] != tc.pages {
				t.Errorf("%s: pdfinfo pages = %s, want %s", tc.name, info["Pages"], tc.pages)
			}
			wantText(t, p, tc.text...)
			if tc.name == "report.docx" {
				plainDOCX = p
			}
		}
	})

	doc := testenv.DOCX("Options page one", "Options page two", "Options page three")
	t.Run("options", func(t *testing.T) {
		if plainDOCX == "" {
			t.Skip("no control: the formats failed")
		}
		isPDFA := func(p string) bool {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Contains(b, []byte("pdfaid:part>2<")) || bytes.Contains(b, []byte(`pdfaid:part="2"`))
		}
		wide := func(p string) bool {
			var w, h float64
			size := pdfInfo(t, p)["Page size"]
			if _, err := fmtSscan(size, &w, &h); err != nil {
				t.Fatalf("page size %q: %v", size, err)
			}
			return w > h
		}
		p, j := office(t, "options.docx", doc, `{"pdfa": "PDF/A-2b", "landscape": true, "page_ranges": "2-3", "quality": 80}`)
		if !isPDFA(p) {
			t.Error("a PDF/A-2b job's PDF has no pdfaid part 2 in its XMP metadata")
		}
		if !wide(p) {
			t.Errorf("landscape: page size %s, want wider than high", pdfInfo(t, p)["Page size"])
		}
		if info := pdfInfo(t, p); info["Pages"] != "2" || j.Outputs[0].Pages != 2 {
			t.Errorf("page_ranges 2-3: pdfinfo pages %s, record %d; want 2", info["Pages"], j.Outputs[0].Pages)
		}
		wantText(t, p, "Options page two", "Options page three")
		if strings.Contains(pdfText(t, p), "Options page one") {
			t.Error("page_ranges 2-3 kept page one")
		}
		if isPDFA(plainDOCX) || wide(plainDOCX) {
			t.Errorf("control: the plain DOCX's PDF is PDF/A %t, landscape %t; want neither", isPDFA(plainDOCX), wide(plainDOCX))
		}
	})
	t.Run("bad_options", func(t *testing.T) {
		before, err := d.Client.Jobs(ctx, client.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for opts, field := range map[string]string{
			`{"pdfa": "PDF/A-4"}`:           "options.pdfa",
			`{"quality": 101}`:              "options.quality",
			`{"max_image_resolution": 100}`: "options.max_image_resolution",
			`{"scale": 1.5}`:                "options.scale",
			`{"export_form_fields": "yes"}`: "export_form_fields",
		} {
			_, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "office-pdf",
				Inputs: map[string]apitype.JobInput{"x.docx": inline(doc)}, Options: json.RawMessage(opts)})
			if !errcode.Is(err, errcode.Invalid) || !strings.Contains(err.Error()+problemsOf(err), field) {
				t.Errorf("options %s: %v (%s), want invalid naming %s", opts, err, problemsOf(err), field)
			}
		}
		// Office options on an HTML action are refused too.
		_, err = d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages(),
			Options: json.RawMessage(`{"pdfa": "PDF/A-1b"}`)})
		if !errcode.Is(err, errcode.Invalid) || !strings.Contains(problemsOf(err), "is not an option of html-pdf") {
			t.Errorf("pdfa on html-pdf: %v (%s), want refused", err, problemsOf(err))
		}
		after, err := d.Client.Jobs(ctx, client.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("jobs %d before the refused ones, %d after: something was queued", len(before), len(after))
		}
	})
	t.Run("killed_before_its_job", func(t *testing.T) {
		waitOfficePool(t, d.Client)
		pids := sofficeUnder(d.DataDir)
		if len(pids) == 0 {
			t.Fatalf("no soffice.bin of this daemon's pooled runtime found (data dir %s)", d.DataDir)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		testenv.Eventually(t, 10*time.Second, "the killed soffice.bin to be gone", func() bool {
			for _, pid := range pids {
				if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
					if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z") {
						return false
					}
				}
			}
			return true
		})
		p, j := office(t, "after.docx", testenv.DOCX("Survived the crash"), "")
		wantText(t, p, "Survived the crash")
		if j.State != apitype.JobSucceeded {
			t.Errorf("job after the kill = %s %+v, want succeeded", j.State, j.Error)
		}
	})
}

// fmtSscan reads pdfinfo's "W x H pts" page size.
func fmtSscan(size string, w, h *float64) (int, error) {
	f := strings.Fields(size)
	if len(f) < 3 {
		return 0, errcode.New(errcode.Invalid, "no page size")
	}
	var err error
	if *w, err = strconv.ParseFloat(f[0], 64); err != nil {
		return 0, err
	}
	if *h, err = strconv.ParseFloat(f[2], 64); err != nil {
		return 1, err
	}
	return 2, nil
}

// problemsOf returns the problems of an API error, rendered.
func problemsOf(err error) string {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return ""
	}
	var b strings.Builder
	for k, v := range ce.Problems {
		b.WriteString(k + ": " + v + "; ")
	}
	return b.String()
}

// waitOfficePool waits until the office pool holds its runtimes.
func waitOfficePool(t *testing.T, c *client.Client) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, "the office pool to be full", func() bool {
		sys, err := c.System(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range sys.Jobs.Pools {
			if p.Profile == "office" {
				return p.Size > 0 && p.Ready >= p.Size
			}
		}
		return false
	})
}

// sofficeUnder returns the soffice.bin processes of the daemon whose
// data directory is dataDir: those in the cgroup of one of its sandboxes.
func sofficeUnder(dataDir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "soffice.bin" {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		for _, f := range strings.FieldsFunc(string(cg), func(r rune) bool { return r == '/' || r == '\n' || r == ':' }) {
			if !strings.HasPrefix(f, "sbx_") {
				continue
			}
			if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", f)); err == nil {
				out = append(out, pid)
			}
			break
		}
	}
	return out
}
