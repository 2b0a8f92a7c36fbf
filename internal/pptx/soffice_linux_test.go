package pptx_test

import (
	"bytes"
	"context"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/pptx"
	"github.com/berthdev/berth/internal/testenv"
)

// run runs a command in its own process group, killed with the test
// process or when the timeout passes, and returns its combined output.
func run(t *testing.T, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// TestLibreOfficeRendersDeck converts a written deck to PDF with
// LibreOffice, once, and checks the PDF: one page per slide, the slide
// size, and each page filled edge to edge with its slide's picture, in
// order, even where the picture's aspect ratio is not the slide's.
func TestLibreOfficeRendersDeck(t *testing.T) {
	t.Parallel()
	soffice := testenv.NeedCommand(t, "soffice")
	pdfinfo := testenv.NeedCommand(t, "pdfinfo")
	pdftoppm := testenv.NeedCommand(t, "pdftoppm")

	colors := []color.RGBA{{220, 30, 30, 255}, {30, 180, 60, 255}, {40, 60, 220, 255}}
	deck := pptx.Deck{Title: "Render & check", Slides: []pptx.Slide{
		{Image: solidPNG(t, 160, 90, colors[0]), Notes: "Red first.\nTwo paragraphs."},
		{Image: solidPNG(t, 40, 40, colors[1])}, // square, stretched to 16:9
		{Image: solidPNG(t, 90, 160, colors[2]), Notes: "<blue> & \"last\""},
	}}
	dir := t.TempDir()
	in := filepath.Join(dir, "deck.pptx")
	if err := os.WriteFile(in, write(t, deck), 0o600); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(dir, "profile")
	out := filepath.Join(dir, "out")
	run(t, 3*time.Minute, soffice, "-env:UserInstallation=file://"+profile,
		"--headless", "--convert-to", "pdf", "--outdir", out, in)
	testenv.CheckNoProcesses(t, profile)

	pdf := filepath.Join(out, "deck.pdf")
	info := run(t, time.Minute, pdfinfo, pdf)
	pages := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(info)
	if pages == nil || string(pages[1]) != strconv.Itoa(len(deck.Slides)) {
		t.Errorf("pdfinfo of LibreOffice's PDF reports pages %q, want %d:\n%s", pages, len(deck.Slides), info)
	}
	// 12192000 x 6858000 EMU is 960 x 540 points; LibreOffice keeps sizes
	// in hundredths of a millimetre, so allow rounding.
	size := regexp.MustCompile(`(?m)^Page size:\s+([0-9.]+) x ([0-9.]+) pts`).FindSubmatch(info)
	if size == nil {
		t.Fatalf("pdfinfo printed no page size:\n%s", info)
	}
	w, _ := strconv.ParseFloat(string(size[1]), 64)
	h, _ := strconv.ParseFloat(string(size[2]), 64)
	if math.Abs(w-960) > 0.5 || math.Abs(h-540) > 0.5 {
		t.Errorf("LibreOffice's PDF page is %s x %s pts, want 960 x 540", size[1], size[2])
	}
	data, err := os.ReadFile(pdf)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := docfmt.PDF(bytes.NewReader(data), int64(len(data))); n != len(deck.Slides) || err != nil {
		t.Errorf("docfmt.PDF of LibreOffice's PDF = %d, %v; want %d, nil", n, err, len(deck.Slides))
	}

	run(t, time.Minute, pdftoppm, "-r", "20", "-png", pdf, filepath.Join(dir, "page"))
	shots, err := filepath.Glob(filepath.Join(dir, "page-*.png"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(shots)
	if len(shots) != len(deck.Slides) {
		t.Fatalf("pdftoppm rendered %d pages, want %d", len(shots), len(deck.Slides))
	}
	for i, shot := range shots {
		checkFilled(t, shot, colors[i])
	}
}

// checkFilled checks that the rendered page in file is c at its centre and
// near each corner.
func checkFilled(t *testing.T, file string, c color.RGBA) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	b := img.Bounds()
	const inset = 2 // pixels, past anti-aliased edges
	points := [][2]int{
		{b.Min.X + b.Dx()/2, b.Min.Y + b.Dy()/2},
		{b.Min.X + inset, b.Min.Y + inset}, {b.Max.X - 1 - inset, b.Min.Y + inset},
		{b.Min.X + inset, b.Max.Y - 1 - inset}, {b.Max.X - 1 - inset, b.Max.Y - 1 - inset},
	}
	for _, p := range points {
		r, g, bl, _ := img.At(p[0], p[1]).RGBA()
		got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
		want := [3]int{int(c.R), int(c.G), int(c.B)}
		for k := range got {
			if d := got[k] - want[k]; d < -12 || d > 12 {
				t.Errorf("%s at %v is %v, want %v", filepath.Base(file), p, got, want)
				break
			}
		}
	}
}
