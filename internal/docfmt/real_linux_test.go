package docfmt_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/pptx"
	"github.com/berthdev/berth/internal/testenv"
)

// run runs a command in its own process group, killed with the test
// process or when the timeout passes.
func run(t *testing.T, timeout time.Duration, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkPDF checks docfmt.PDF's page count of file against pdfinfo's and
// against want.
func checkPDF(t *testing.T, file string, want int) {
	t.Helper()
	b := readFile(t, file)
	got, err := docfmt.PDF(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("PDF(%s): %v", filepath.Base(file), err)
	}
	if info := pdfinfoPages(t, testenv.NeedCommand(t, "pdfinfo"), file); got != info || got != want {
		t.Errorf("PDF(%s) = %d pages, pdfinfo says %d, want %d", filepath.Base(file), got, info, want)
	}
	// Real files are counted through their catalog, not by scanning.
	if n, err := docfmt.PageTreeCount(bytes.NewReader(b), int64(len(b))); n != want || err != nil {
		t.Errorf("PageTreeCount(%s) = %d, %v; want %d, nil", filepath.Base(file), n, err, want)
	}
}

func chromiumBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "no chromium-headless-shell or chromium")
	return ""
}

func TestPDFFromChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumBinary(t)
	testenv.NeedCommand(t, "pdfinfo")
	dir := t.TempDir()
	html := filepath.Join(dir, "in.html")
	page := `<div class="page">Page %d</div>`
	doc := `<!doctype html><html><head><style>.page{page-break-after:always}.page:last-child{page-break-after:auto}</style></head><body>` +
		fmt.Sprintf(page, 1) + fmt.Sprintf(page, 2) + fmt.Sprintf(page, 3) + `</body></html>`
	if err := os.WriteFile(html, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pdf")
	profile := filepath.Join(dir, "profile")
	run(t, 2*time.Minute, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
		"--user-data-dir="+profile, "--print-to-pdf="+out, "file://"+html)
	testenv.CheckNoProcesses(t, profile)
	checkPDF(t, out, 3)

	// The same file cut short is refused (negative control on real data).
	b := readFile(t, out)
	if n, err := docfmt.PDF(bytes.NewReader(b[:len(b)-100]), int64(len(b)-100)); err == nil {
		t.Errorf("PDF() of Chromium's PDF less its last 100 bytes = %d, nil; want an error", n)
	}
}

// TestLibreOffice checks docfmt on LibreOffice's output: a PDF of a text
// file several pages long, and the PPTX LibreOffice writes when it
// re-saves a deck of pptx.Write (another producer's idea of the format).
func TestLibreOffice(t *testing.T) {
	t.Parallel()
	soffice := testenv.NeedCommand(t, "soffice")
	testenv.NeedCommand(t, "pdfinfo")
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile")
	convert := func(format, outdir, in string) {
		run(t, 3*time.Minute, soffice, "-env:UserInstallation=file://"+profile,
			"--headless", "--convert-to", format, "--outdir", outdir, in)
		testenv.CheckNoProcesses(t, profile)
	}

	var text strings.Builder
	for i := range 300 {
		fmt.Fprintf(&text, "Line %d of a text long enough to fill several pages.\n", i+1)
	}
	txt := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(txt, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	convert("pdf", filepath.Join(dir, "pdf"), txt)
	pdf := filepath.Join(dir, "pdf", "long.pdf")
	pages := pdfinfoPages(t, testenv.NeedCommand(t, "pdfinfo"), pdf)
	if pages < 2 {
		t.Errorf("LibreOffice made %d pages of 300 lines, want several", pages)
	}
	checkPDF(t, pdf, pages)

	var deck pptx.Deck
	for i := range 3 {
		deck.Slides = append(deck.Slides, pptx.Slide{Image: smallPNG(t), Notes: fmt.Sprintf("Slide %d", i+1)})
	}
	var b bytes.Buffer
	if err := pptx.Write(&b, deck); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "deck.pptx")
	if err := os.WriteFile(in, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	convert("pptx", filepath.Join(dir, "pptx"), in)
	resaved := readFile(t, filepath.Join(dir, "pptx", "deck.pptx"))
	if bytes.Equal(resaved, b.Bytes()) {
		t.Fatal("LibreOffice's PPTX is the input itself")
	}
	if n, err := docfmt.PPTX(bytes.NewReader(resaved), int64(len(resaved))); n != 3 || err != nil {
		t.Errorf("PPTX() of LibreOffice's re-saved deck = %d, %v; want 3, nil", n, err)
	}
}
