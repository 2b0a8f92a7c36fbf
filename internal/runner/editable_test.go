package runner

import (
	"encoding/xml"
	"image/color"
	"image/png"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/testenv"
)

// editableDeck is two slides of what editable mode maps: styled text,
// lists, a bordered rounded box, a table, a picture, a canvas (the
// fallback) and hostile text.
const editableDeck = `<!DOCTYPE html><html><head><title>Editable</title><style>
body { margin: 0 } section { position: relative; width: 100vw; height: 100vh; overflow: hidden }
section > * { position: absolute; margin: 0 }
</style></head><body>
<section style="background:#fdf6e3">
<h1 style="left:100px;top:50px;width:600px;font:bold 48px 'DejaVu Sans';color:#c0392b;text-align:center">Quarterly <i>review</i></h1>
<p style="left:100px;top:150px;width:500px;font:20px 'DejaVu Serif';color:#1a2b3c">First line<br>Second <b>bold</b> line</p>
<div style="left:800px;top:100px;width:200px;height:100px;background:#2255aa;border:4px solid #ff8800;border-radius:10px"></div>
<ul style="left:100px;top:250px;font:24px 'DejaVu Sans'"><li>Alpha</li><li>Beta<ol><li>Nested</li></ol></li></ul>
<aside class="notes">Speaker says hi</aside>
</section>
<section>
<table style="left:100px;top:100px;border-collapse:collapse;font:18px 'DejaVu Sans'">
<tr><th style="background:#eeeeee">Region</th><th>Sales</th></tr><tr><td>North</td><td>42</td></tr><tr><td colspan="2">Total row</td></tr></table>
<img src="pic.png" alt="a <red> & square" style="left:600px;top:100px;width:100px;height:100px">
<canvas id="c" width="200" height="100" style="left:800px;top:300px"></canvas>
<script>const x = document.getElementById('c').getContext('2d'); x.fillStyle = '#00ff00'; x.fillRect(0, 0, 200, 100);</script>
<p style="left:100px;top:400px;width:1000px;font:16px 'DejaVu Sans'">&lt;script&gt;alert(1)&lt;/script&gt; Tom &amp; Jerry &#1;&#x1F; ]]&gt; ` + "LONG" + `</p>
</section>
</body></html>`

// TestHTMLPPTXEditable renders a deck in editable mode and checks its
// slides' XML (shapes, positions, fonts, colours, table, pictures,
// escaping), then has LibreOffice turn it into a PDF whose text
// pdftotext finds.
func TestHTMLPPTXEditable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobspec.ProfileBrowser)
	long := strings.Repeat("lorem ipsum ", 2000)
	f.write("index.html", []byte(strings.Replace(editableDeck, "LONG", long, 1)))
	pic := pngBytes(t, 10, 10, color.RGBA{255, 0, 0, 255})
	f.write("pic.png", pic)

	path, res := f.mustRun(jobspec.Request{Action: jobspec.HTMLPPTX, Options: jobspec.Options{Mode: jobspec.PPTXEditable}}, resultPPTX, pptxMIME)
	if res.Outputs[0].Pages != 2 {
		t.Errorf("pages = %d, want 2", res.Outputs[0].Pages)
	}
	files := unzip(t, path)
	for name, body := range files {
		if strings.HasSuffix(name, ".xml") || strings.HasSuffix(name, ".rels") {
			d := xml.NewDecoder(strings.NewReader(body))
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Errorf("%s is not well-formed XML: %v", name, err)
					break
				}
			}
		}
	}
	s1, s2 := files["ppt/slides/slide1.xml"], files["ppt/slides/slide2.xml"]
	if _, ok := files["ppt/media/image1.png"]; ok {
		t.Errorf("editable slide 1 has a whole-slide picture")
	}
	// A shape's offset, within 3 CSS pixels of want (1 px = 9525 EMU).
	at := func(xmlText, marker string, wantX, wantY float64) {
		t.Helper()
		i := strings.Index(xmlText, marker)
		if i < 0 {
			t.Errorf("no %q in the slide", marker)
			return
		}
		start := strings.LastIndex(xmlText[:i], "<p:sp>")
		if j := strings.LastIndex(xmlText[:i], "<p:pic>"); j > start {
			start = j
		}
		if j := strings.LastIndex(xmlText[:i], "<p:graphicFrame>"); j > start {
			start = j
		}
		m := regexp.MustCompile(`<a:off x="(-?\d+)" y="(-?\d+)"/>`).FindStringSubmatch(xmlText[start:])
		if m == nil {
			t.Errorf("no offset for %q", marker)
			return
		}
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		if math.Abs(x/9525-wantX) > 3 || math.Abs(y/9525-wantY) > 3 {
			t.Errorf("%q at (%.1f, %.1f) px, want (%.0f, %.0f)", marker, x/9525, y/9525, wantX, wantY)
		}
	}
	for _, want := range []string{
		`<p:bg><p:bgPr><a:solidFill><a:srgbClr val="FDF6E3"/>`,
		`algn="ctr"`, `sz="3600" b="1"`, `<a:srgbClr val="C0392B"/>`, `<a:latin typeface="DejaVu Sans"/>`,
		`i="1"`, `<a:t>review</a:t>`,
		`<a:t>First line</a:t></a:r><a:br>`, `<a:latin typeface="DejaVu Serif"/>`, `<a:srgbClr val="1A2B3C"/>`,
		`prst="roundRect"`, `<a:srgbClr val="2255AA"/>`, `<a:ln w="38100"><a:solidFill><a:srgbClr val="FF8800"/>`,
		`<a:buChar char="•"/>`, `<a:buAutoNum type="arabicPeriod" startAt="1"/>`, `lvl="1"`, `<a:t>Nested</a:t>`,
	} {
		if !strings.Contains(s1, want) {
			t.Errorf("slide 1 lacks %s", want)
		}
	}
	at(s1, "<a:t>Quarterly", 100, 50)
	at(s1, "<a:t>First line", 100, 150)
	at(s1, `prst="roundRect"`, 802, 102) // the border's middle
	if !strings.Contains(files["ppt/notesSlides/notesSlide1.xml"], "Speaker says hi") || strings.Contains(s1, "Speaker") {
		t.Errorf("the notes are not (only) in slide 1's notes")
	}

	for _, want := range []string{`<a:tbl>`, `<a:t>Region</a:t>`, `<a:t>North</a:t>`, `<a:t>42</a:t>`, `gridSpan="2"`, `hMerge="1"`,
		`<a:srgbClr val="EEEEEE"/>`, `descr="a &lt;red&gt; &amp; square"`,
		`<a:t>&lt;script&gt;alert(1)&lt;/script&gt; Tom &amp; Jerry ]]&gt; lorem ipsum`} {
		if !strings.Contains(s2, want) {
			t.Errorf("slide 2 lacks %s", want)
		}
	}
	if strings.ContainsAny(s2, "\x01\x1f") || strings.Contains(s2, "<script>") || strings.Contains(s2, "fillStyle") || !strings.Contains(s2, strings.Repeat("lorem ipsum ", 1999)) {
		t.Errorf("slide 2's hostile text is not escaped, cleaned and kept whole")
	}
	at(s2, "<a:t>Region", 100, 100)
	at(s2, `descr="a &lt;red`, 600, 100)
	// The <img> is a picture of its own bytes.
	if got := files["ppt/media/slide2-image1.png"]; got != string(pic) {
		t.Errorf("the img's picture part is not its PNG (%d bytes, want %d)", len(got), len(pic))
	}
	// The canvas is a picture of only itself: its box, all green, at
	// the device scale factor 2.
	canvas := files["ppt/media/slide2-image2.png"]
	img, err := png.Decode(strings.NewReader(canvas))
	if err != nil {
		t.Fatalf("canvas picture: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 200 {
		t.Errorf("canvas picture is %dx%d, want 400x200", b.Dx(), b.Dy())
	}
	for _, p := range [][2]int{{1, 1}, {398, 1}, {200, 100}, {1, 198}, {398, 198}} {
		r, g, b, a := img.At(p[0], p[1]).RGBA()
		if r>>8 > 10 || g>>8 < 245 || b>>8 > 10 || a>>8 < 245 {
			t.Errorf("canvas picture at %v = %d,%d,%d,%d, want opaque green", p, r>>8, g>>8, b>>8, a>>8)
		}
	}
	i := strings.Index(s2, `r:embed="rId102"`)
	if i < 0 {
		t.Fatalf("no picture related as rId102 in slide 2")
	}
	at(s2[:i+200], `r:embed="rId102"`, 800, 300)

	// LibreOffice opens it, and the slides' text is text.
	soffice := testenv.NeedCommand(t, "soffice")
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), soffice, "-env:UserInstallation=file://"+filepath.Join(dir, "profile"),
		"--headless", "--convert-to", "pdf", "--outdir", dir, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	testenv.CheckNoProcesses(t, filepath.Join(dir, "profile"))
	pdf := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".pptx")+".pdf")
	if pages, _, _ := pdfInfo(t, pdf); pages != 2 {
		t.Errorf("LibreOffice's PDF has %d pages, want 2", pages)
	}
	text := strings.Join(strings.Fields(pdfText(t, pdf)), " ")
	for _, want := range []string{"Quarterly review", "First line", "Second bold line", "Alpha", "Nested", "Region", "North", "Total row",
		"<script>alert(1)</script> Tom & Jerry"} {
		if !strings.Contains(text, want) {
			t.Errorf("LibreOffice's PDF lacks the text %q:\n%.600s", want, text)
		}
	}

	// Without slide elements (this replaces the output), one slide per viewport-high page.
	f.write("pages.html", []byte(`<!DOCTYPE html><body style="margin:0;font:20px/20px 'DejaVu Sans'">`+
		`<p style="margin:0">Page one</p><p style="margin:780px 0 0 40px">Page two</p></body>`))
	path2, _ := f.mustRun(jobspec.Request{Action: jobspec.HTMLPPTX, Main: "pages.html", Options: jobspec.Options{Mode: jobspec.PPTXEditable}}, resultPPTX, pptxMIME)
	pages := unzip(t, path2)
	if p2 := pages["ppt/slides/slide2.xml"]; !strings.Contains(pages["ppt/slides/slide1.xml"], "Page one") || strings.Contains(p2, "Page one") {
		t.Errorf("page 1's text is not on slide 1 only")
	} else {
		at(p2, "<a:t>Page two", 40, 80)
	}

}
