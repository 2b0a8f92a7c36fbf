package runner

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/testenv"
)

// TestPDFEngines: merge sums the pages in name order, split makes the
// parts asked for, metadata written is read back; a file that is not a
// PDF is the input's fault.
func TestPDFEngines(t *testing.T) {
	testenv.NeedCommand(t, "qpdf")
	testenv.NeedCommand(t, "exiftool")
	f := newFixture(t, jobspec.ProfilePDF)
	clear := func() {
		for _, d := range []string{f.in, f.out} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				_ = os.RemoveAll(filepath.Join(d, e.Name()))
			}
		}
	}
	t.Run("merge", func(t *testing.T) {
		clear()
		f.write("b.pdf", testenv.PDF("Bee", 2))
		f.write("a.pdf", testenv.PDF("Ay", 1))
		out, _ := f.mustRun(jobspec.Request{Action: jobspec.PDFMerge}, resultPDF, "application/pdf")
		if n, _, _ := pdfInfo(t, out); n != 3 {
			t.Errorf("merged pages = %d, want 3", n)
		}
		if txt := pdfText(t, out); strings.Index(txt, "Ay page 1") > strings.Index(txt, "Bee page 1") {
			t.Errorf("a.pdf is not first: %q", txt)
		}
	})
	t.Run("split", func(t *testing.T) {
		clear()
		f.write("doc.pdf", testenv.PDF("Doc", 5))
		r := f.run(jobspec.Request{Action: jobspec.PDFSplit, Options: jobspec.Options{SplitMode: "intervals", SplitSpan: "2"}})
		if r.status != http.StatusOK || len(r.result.Outputs) != 3 {
			t.Fatalf("split = %d %s, want 3 outputs", r.status, r.raw)
		}
		if n, _, _ := pdfInfo(t, filepath.Join(f.out, "doc_2.pdf")); n != 1 {
			t.Errorf("last part has %d pages, want 1", n)
		}
		r = f.run(jobspec.Request{Action: jobspec.PDFSplit, Options: jobspec.Options{SplitMode: "pages", SplitSpan: "2-3", SplitUnify: true}})
		if r.status != http.StatusOK || len(r.result.Outputs) != 1 {
			t.Fatalf("split unify = %d %s, want 1 output", r.status, r.raw)
		}
		if txt := pdfText(t, filepath.Join(f.out, "doc_0.pdf")); !strings.Contains(txt, "Doc page 2") || strings.Contains(txt, "Doc page 1") {
			t.Errorf("unified part reads %q, want pages 2-3", txt)
		}
	})
	t.Run("metadata", func(t *testing.T) {
		clear()
		f.write("m.pdf", testenv.PDF("Meta", 1))
		f.mustRun(jobspec.Request{Action: jobspec.PDFMetadataWrite, Options: jobspec.Options{Metadata: map[string]any{
			"Title": "Quarterly", "Author": "Ann", "Keywords": []any{"one", "two"}}}}, "m.pdf", "application/pdf")
		if err := os.Rename(filepath.Join(f.out, "m.pdf"), filepath.Join(f.in, "m.pdf")); err != nil {
			t.Fatal(err)
		}
		out, _ := f.mustRun(jobspec.Request{Action: jobspec.PDFMetadataRead}, metadataJSON, "application/json")
		b, _ := os.ReadFile(out)
		var m map[string]map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if got := m["m.pdf"]; got["Title"] != "Quarterly" || got["Author"] != "Ann" || fmt.Sprint(got["Keywords"]) != "[one two]" {
			t.Errorf("metadata = %s", b)
		}
	})
	t.Run("not a PDF", func(t *testing.T) {
		clear()
		f.write("bad.pdf", []byte("not a pdf"))
		wantFailure(t, f.run(jobspec.Request{Action: jobspec.PDFMerge}), http.StatusUnprocessableEntity, "invalid_input", false)
		clear()
		f.write("good.pdf", testenv.PDF("Good", 1))
		f.mustRun(jobspec.Request{Action: jobspec.PDFMerge}, resultPDF, "application/pdf")
	})
}
