package docfmt_test

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// pdfWriter builds PDFs for tests, recording where each object starts.
type pdfWriter struct {
	b    bytes.Buffer
	offs map[int]int
	crlf bool // end object lines with CRLF and a comment
}

func newPDF(version string) *pdfWriter {
	w := &pdfWriter{offs: make(map[int]int)}
	fmt.Fprintf(&w.b, "%%PDF-%s\n%%\xe2\xe3\xcf\xd3\n", version)
	return w
}

func (w *pdfWriter) obj(num int, body string) {
	w.offs[num] = w.b.Len()
	fmt.Fprintf(&w.b, w.objFormat(), num, body)
}

func (w *pdfWriter) objFormat() string {
	if w.crlf {
		return "%d 0 obj\r\n%s\r\nendobj %% a comment\r\n"
	}
	return "%d 0 obj\n%s\nendobj\n"
}

// stream writes a stream object; length, if not "", replaces the direct
// /Length (with an indirect reference, say).
func (w *pdfWriter) stream(num int, dict string, data []byte, length string) {
	if length == "" {
		length = strconv.Itoa(len(data))
	}
	w.offs[num] = w.b.Len()
	fmt.Fprintf(&w.b, "%d 0 obj\n<<%s /Length %s>>\nstream\n", num, dict, length)
	w.b.Write(data)
	w.b.WriteString("\nendstream\nendobj\n")
}

// xrefTable writes a table of objects 0..size-1 (those not written are
// free), the trailer and the file's end, and returns the table's offset.
func (w *pdfWriter) xrefTable(size int, trailer string) int {
	off := w.b.Len()
	fmt.Fprintf(&w.b, "xref\n0 %d\n0000000000 65535 f \n", size)
	for i := 1; i < size; i++ {
		if o, ok := w.offs[i]; ok {
			fmt.Fprintf(&w.b, "%010d 00000 n \n", o)
		} else {
			w.b.WriteString("0000000000 65535 f \n")
		}
	}
	fmt.Fprintf(&w.b, "trailer\n<<%s /Size %d>>\nstartxref\n%d\n%%%%EOF\n", trailer, size, off)
	return off
}

// xrefEntry is a row of a cross-reference stream: type 1 (offset) or 2
// (object stream, index).
type xrefEntry struct{ typ, a, b int }

// xrefStreamObj writes cross-reference stream object num for objects
// 0..size-1, compressed and, if predict, with the PNG Up predictor. It
// returns its offset; end says whether to finish the file after it.
func (w *pdfWriter) xrefStreamObj(num, size int, entries map[int]xrefEntry, extra string, predict, end bool) int {
	off := w.b.Len()
	entries[num] = xrefEntry{1, off, 0}
	const rowLen = 7 // W [1 4 2]
	var raw []byte
	prev := make([]byte, rowLen)
	for i := range size {
		e := entries[i]
		row := make([]byte, rowLen)
		row[0] = byte(e.typ)
		binary.BigEndian.PutUint32(row[1:5], uint32(e.a))
		binary.BigEndian.PutUint16(row[5:7], uint16(e.b))
		if predict {
			raw = append(raw, 2)
			for j := range row {
				raw = append(raw, row[j]-prev[j])
			}
		} else {
			raw = append(raw, row...)
		}
		prev = row
	}
	dict := fmt.Sprintf("/Type /XRef /Size %d /W [1 4 2] /Filter /FlateDecode %s", size, extra)
	if predict {
		dict += " /DecodeParms <</Predictor 12 /Columns 7>>"
	}
	w.stream(num, dict, deflate(raw), "")
	if end {
		fmt.Fprintf(&w.b, "startxref\n%d\n%%%%EOF\n", off)
	}
	return off
}

// objStm writes object stream num holding bodies (object number to body)
// with the given /Length ("" for the direct one), and returns each object's
// index in it and the length of the compressed data.
func (w *pdfWriter) objStm(num int, nums []int, bodies map[int]string, length string) (map[int]int, int) {
	var head, body strings.Builder
	index := make(map[int]int)
	for i, n := range nums {
		index[n] = i
		fmt.Fprintf(&head, "%d %d ", n, body.Len())
		body.WriteString(bodies[n] + "\n")
	}
	dict := fmt.Sprintf("/Type /ObjStm /N %d /First %d /Filter /FlateDecode", len(nums), head.Len())
	z := deflate([]byte(head.String() + body.String()))
	w.stream(num, dict, z, length)
	return index, len(z)
}

func deflate(b []byte) []byte {
	var out bytes.Buffer
	zw := zlib.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// pageTree returns the bodies of a catalog (1), a page tree root (2) and n
// pages (3..n+2).
func pageTree(n int, count int) map[int]string {
	bodies := map[int]string{1: "<</Type /Catalog /Pages 2 0 R>>"}
	var kids []string
	for i := range n {
		kids = append(kids, fmt.Sprintf("%d 0 R", i+3))
		bodies[i+3] = "<</Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]>>"
	}
	bodies[2] = fmt.Sprintf("<</Type /Pages /Kids [%s] /Count %d>>", strings.Join(kids, " "), count)
	return bodies
}

// classicPDF has a cross-reference table and n pages. The catalog carries a
// padding string longer than one read, so that reading it must grow.
func classicPDF(n int) []byte { return classicPDFOf(newPDF("1.7"), n) }

func classicPDFOf(w *pdfWriter, n int) []byte {
	bodies := pageTree(n, n)
	bodies[1] = "<</Type /Catalog /Pages 2 0 R /Padding (" + strings.Repeat("x", 10000) + ")>>"
	for i := 1; i <= n+2; i++ {
		w.obj(i, bodies[i])
	}
	w.xrefTable(n+3, "/Root 1 0 R")
	return w.b.Bytes()
}

// compressedPDF keeps every object but its streams in an object stream
// whose /Length is an indirect object, with a cross-reference stream.
func compressedPDF(n int, predict bool) []byte {
	w := newPDF("1.5")
	bodies := pageTree(n, n)
	stm, lenObj, xref := n+3, n+4, n+5
	nums := make([]int, 0, n+2)
	for i := 1; i <= n+2; i++ {
		nums = append(nums, i)
	}
	index, zlen := w.objStm(stm, nums, bodies, fmt.Sprintf("%d 0 R", lenObj))
	w.obj(lenObj, strconv.Itoa(zlen))
	entries := map[int]xrefEntry{stm: {1, w.offs[stm], 0}, lenObj: {1, w.offs[lenObj], 0}}
	for _, num := range nums {
		entries[num] = xrefEntry{2, stm, index[num]}
	}
	w.xrefStreamObj(xref, xref+1, entries, "/Root 1 0 R", predict, true)
	return w.b.Bytes()
}

// hybridPDF has a table that marks the compressed objects free and a
// /XRefStm that has them, as files written for old and new readers alike.
func hybridPDF(n int) []byte {
	w := newPDF("1.5")
	bodies := pageTree(n, n)
	stm, xref := n+3, n+4
	var nums []int
	for i := 1; i <= n+2; i++ {
		nums = append(nums, i)
	}
	index, _ := w.objStm(stm, nums, bodies, "")
	entries := map[int]xrefEntry{stm: {1, w.offs[stm], 0}}
	for _, num := range nums {
		entries[num] = xrefEntry{2, stm, index[num]}
	}
	xoff := w.xrefStreamObj(xref, xref+1, entries, "", false, false)
	// The table lists only what has an offset: the two streams.
	off := w.b.Len()
	fmt.Fprintf(&w.b, "xref\n0 1\n0000000000 65535 f \n%d 2\n%010d 00000 n \n%010d 00000 n \n", stm, w.offs[stm], xoff)
	fmt.Fprintf(&w.b, "trailer\n<</Root 1 0 R /XRefStm %d /Size %d>>\nstartxref\n%d\n%%%%EOF\n", xoff, xref+1, off)
	return w.b.Bytes()
}

// incrementalPDF starts with a pages and an update appends more and
// replaces the page tree root, with a second table whose /Prev is the
// first.
func incrementalPDF(a, more int) []byte {
	w := newPDF("1.4")
	bodies := pageTree(a, a)
	for i := 1; i <= a+2; i++ {
		w.obj(i, bodies[i])
	}
	prev := w.xrefTable(a+3, "/Root 1 0 R")
	n := a + more
	var kids []string
	for i := range n {
		kids = append(kids, fmt.Sprintf("%d 0 R", i+3))
	}
	for i := a; i < n; i++ {
		w.obj(i+3, "<</Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]>>")
	}
	w.obj(2, fmt.Sprintf("<</Type /Pages /Kids [%s] /Count %d>>", strings.Join(kids, " "), n))
	off := w.b.Len()
	fmt.Fprintf(&w.b, "xref\n0 1\n0000000000 65535 f \n2 1\n%010d 00000 n \n%d %d\n", w.offs[2], a+3, more)
	for i := a; i < n; i++ {
		fmt.Fprintf(&w.b, "%010d 00000 n \n", w.offs[i+3])
	}
	fmt.Fprintf(&w.b, "trailer\n<</Size %d /Root 1 0 R /Prev %d>>\nstartxref\n%d\n%%%%EOF\n", n+3, prev, off)
	return w.b.Bytes()
}

// brokenXref shifts every offset of a table so that no object is where the
// table says.
func brokenXref(pdf []byte) []byte {
	re := regexp.MustCompile(`(?m)^(\d{10}) 00000 n`)
	return re.ReplaceAllFunc(pdf, func(m []byte) []byte {
		o, _ := strconv.Atoi(string(m[:10]))
		return fmt.Appendf(nil, "%010d 00000 n", o+7)
	})
}

// brokenCompressedPDF is compressedPDF whose trailer names a catalog that
// does not exist, so that only scanning (into the object stream) finds the
// pages.
func brokenCompressedPDF(n int) []byte {
	b := compressedPDF(n, false)
	return bytes.Replace(b, []byte("/Root 1 0 R"), []byte("/Root 9999 0 R"), 1)
}

func withPrefix(prefix string, pdf []byte) []byte {
	return append([]byte(prefix), pdf...)
}

type pdfCase struct {
	name  string
	pdf   []byte
	pages int
	// pdfinfo says whether pdfinfo (poppler) agrees on the count; it is
	// false for files poppler counts differently or refuses.
	pdfinfo bool
	// scanned says the page tree cannot be followed and the count comes
	// from scanning for page objects.
	scanned bool
}

func validPDFs() []pdfCase {
	return []pdfCase{
		{"classic one page", classicPDF(1), 1, true, false},
		{"classic five pages", classicPDF(5), 5, true, false},
		{"object and xref streams", compressedPDF(4, false), 4, true, false},
		{"xref stream with PNG predictor", compressedPDF(3, true), 3, true, false},
		{"hybrid", hybridPDF(2), 2, true, false},
		{"incremental update", incrementalPDF(2, 3), 5, true, false},
		{"broken table, scanned", brokenXref(classicPDF(3)), 3, true, true},
		{"broken catalog in object stream, scanned", brokenCompressedPDF(6), 6, false, true},
		{"lying count, scanned", bytes.Replace(classicPDF(2), []byte("/Count 2"), []byte("/Count 9"), 1), 2, false, true},
		{"junk before header", withPrefix("JUNK\n", classicPDF(2)), 2, true, false},
		{"PDF 2.0", bytes.Replace(classicPDF(2), []byte("%PDF-1.7"), []byte("%PDF-2.0"), 1), 2, true, false},
		{"CRLF and comments", func() []byte {
			w := newPDF("1.6")
			w.crlf = true
			return classicPDFOf(w, 2)
		}(), 2, true, false},
	}
}

func TestPDFValid(t *testing.T) {
	t.Parallel()
	for _, tt := range validPDFs() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := docfmt.PDF(bytes.NewReader(tt.pdf), int64(len(tt.pdf)))
			if err != nil || got != tt.pages {
				t.Errorf("PDF() = %d, %v; want %d, nil", got, err, tt.pages)
			}
			// Check which way the count was found.
			tree, err := docfmt.PageTreeCount(bytes.NewReader(tt.pdf), int64(len(tt.pdf)))
			switch {
			case tt.scanned && err == nil:
				t.Errorf("PageTreeCount() = %d, nil; want an error (the case is for the scanning fallback)", tree)
			case !tt.scanned && (err != nil || tree != tt.pages):
				t.Errorf("PageTreeCount() = %d, %v; want %d, nil", tree, err, tt.pages)
			}
		})
	}
}

// TestSyntheticPDFsAgreeWithPdfinfo checks the test's own PDFs against
// poppler, so that a count is not right only by the test's notion of PDF.
func TestSyntheticPDFsAgreeWithPdfinfo(t *testing.T) {
	t.Parallel()
	pdfinfo := testenv.NeedCommand(t, "pdfinfo")
	dir := t.TempDir()
	for i, tt := range validPDFs() {
		if !tt.pdfinfo {
			continue
		}
		file := filepath.Join(dir, fmt.Sprintf("%d.pdf", i))
		if err := os.WriteFile(file, tt.pdf, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := pdfinfoPages(t, pdfinfo, file); got != tt.pages {
			t.Errorf("%s: pdfinfo counts %d pages, want %d", tt.name, got, tt.pages)
		}
	}
}

// pdfinfoPages returns the page count pdfinfo reports for file.
func pdfinfoPages(t testing.TB, pdfinfo, file string) int {
	t.Helper()
	out, err := exec.Command(pdfinfo, file).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo %s: %v\n%s", file, err, out)
	}
	m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("pdfinfo %s printed no page count:\n%s", file, out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func TestPDFInvalid(t *testing.T) {
	t.Parallel()
	good := classicPDF(2)
	garbage := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	startxref := func(pdf []byte, off string) []byte {
		return regexp.MustCompile(`startxref\n\d+`).ReplaceAll(bytes.Clone(pdf), []byte("startxref\n"+off))
	}
	noPages := func() []byte {
		w := newPDF("1.7")
		w.obj(1, "<</Type /Catalog /Pages 2 0 R>>")
		w.obj(2, "<</Type /Pages /Kids [] /Count 0>>")
		w.xrefTable(3, "/Root 1 0 R")
		return w.b.Bytes()
	}()
	tests := []struct {
		name, msg string
		pdf       []byte
	}{
		{"empty", "not a PDF: no %PDF- header", nil},
		{"garbage", "not a PDF: no %PDF- header", garbage},
		{"no header", "not a PDF: no %PDF- header", bytes.Replace(good, []byte("%PDF-1.7"), []byte("%XYZ-1.7"), 1)},
		{"unknown version", "not a PDF: no %PDF- header", bytes.Replace(good, []byte("%PDF-1.7"), []byte("%PDF-3.0"), 1)},
		{"header too late", "not a PDF: no %PDF- header", withPrefix(strings.Repeat(" ", 1100), good)},
		{"truncated", "truncated PDF: no %%EOF", good[:len(good)/2]},
		{"cut before EOF marker", "truncated PDF: no %%EOF", good[:len(good)-4]},
		{"EOF marker too early", "truncated PDF: no %%EOF", append(bytes.Clone(good), make([]byte, 2000)...)},
		{"no startxref", "truncated PDF: no startxref", bytes.Replace(good, []byte("startxref"), []byte("startxrex"), 1)},
		{"startxref without offset", "PDF startxref has no offset", startxref(good, "x")},
		{"startxref outside", "PDF startxref offset 99999999 is outside the file", startxref(good, "99999999")},
		{"startxref negative", "is outside the file", startxref(good, "-5")},
		{"startxref at garbage", "PDF startxref offset 3 does not point at a cross-reference table or stream", startxref(good, "3")},
		{"zero pages", "PDF has no pages", noPages},
		{"no page objects at all", "PDF has no pages", brokenXref(noPages)},
		{"garbage with PDF ends", "PDF has no pages", []byte("%PDF-1.4\nxref\n0 1\n0000000000 65535 f \ntrailer\n<<>>\nstartxref\n9\n%%EOF\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := docfmt.PDF(bytes.NewReader(tt.pdf), int64(len(tt.pdf)))
			if err == nil {
				t.Fatalf("PDF() = %d, nil; want an error containing %q", n, tt.msg)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("PDF() error = %q, want it to contain %q", err, tt.msg)
			}
			if !errcode.Is(err, errcode.Invalid) || errcode.ReasonOf(err) != "pdf_invalid" {
				t.Errorf("PDF() error = %v (code %s, reason %q), want invalid/pdf_invalid", err, errcode.CodeOf(err), errcode.ReasonOf(err))
			}
		})
	}
}

var errDisk = errors.New("disk on fire")

// failingReaderAt fails every read that touches [lo, hi).
type failingReaderAt struct {
	b      []byte
	lo, hi int64
}

func (r failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < r.hi && off+int64(len(p)) > r.lo {
		return 0, errDisk
	}
	return bytes.NewReader(r.b).ReadAt(p, off)
}

func TestPDFReadError(t *testing.T) {
	t.Parallel()
	good := classicPDF(2)
	size := int64(len(good))
	// Reads fail at the header, at the end, and in the catalog's padding,
	// read only when the objects are.
	for _, bad := range [][2]int64{{0, 1}, {size - 10, size}, {2000, 3000}} {
		n, err := docfmt.PDF(failingReaderAt{good, bad[0], bad[1]}, size)
		if !errors.Is(err, errDisk) || errcode.Is(err, errcode.Invalid) {
			t.Errorf("PDF() with reads of %d..%d failing = %d, %v; want %v, not classified invalid", bad[0], bad[1], n, err, errDisk)
		}
	}
	// A size larger than the data is a read error too, not a bad file.
	if _, err := docfmt.PDF(bytes.NewReader(good), size+100); err == nil || errcode.Is(err, errcode.Invalid) {
		t.Errorf("PDF() with a size past the data = %v, want a read error", err)
	}
	// Positive control: the same reader failing nowhere in the file.
	if n, err := docfmt.PDF(failingReaderAt{good, size, size + 1}, size); n != 2 || err != nil {
		t.Errorf("PDF() with reads failing past the end = %d, %v; want 2, nil", n, err)
	}
}

func FuzzPDF(f *testing.F) {
	for _, tt := range validPDFs() {
		f.Add(tt.pdf)
	}
	f.Add([]byte("%PDF-1.4\n1 0 obj<</Type/Page>>endobj\nstartxref\n9\n%%EOF"))
	f.Add([]byte("%PDF-1.5\n1 0 obj<</Type/XRef/W[1 2 1]/Size 1/Length 0>>stream\n\nendstream endobj\nstartxref\n9\n%%EOF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := docfmt.PDF(bytes.NewReader(b), int64(len(b)))
		switch {
		case err == nil && n < 1:
			t.Errorf("PDF() = %d, nil; want at least one page or an error", n)
		case err != nil && n != 0:
			t.Errorf("PDF() = %d, %v; want 0 with an error", n, err)
		case err != nil && errcode.ReasonOf(err) != "pdf_invalid":
			t.Errorf("PDF() error %v has reason %q, want pdf_invalid", err, errcode.ReasonOf(err))
		}
	})
}

// TestPDFXrefBomb is not parallel: it measures the process's allocations.
// A few kilobytes of cross-reference stream list a million objects; the
// map of them must not be built.
func TestPDFXrefBomb(t *testing.T) {
	const n = 1_000_000
	w := newPDF("1.5")
	w.obj(1, "<</Type /Catalog /Pages 2 0 R>>")
	w.obj(2, "<</Type /Pages /Kids [3 0 R] /Count 1>>")
	w.obj(3, "<</Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]>>")
	entries := make(map[int]xrefEntry, n)
	for i := 1; i < n; i++ {
		entries[i] = xrefEntry{1, w.offs[min(i, 3)], 0}
	}
	w.xrefStreamObj(n, n+1, entries, "/Root 1 0 R", false, true)
	b := w.b.Bytes()
	if len(b) > 100_000 {
		t.Fatalf("the bomb is %d bytes, want it small", len(b))
	}
	var pages int
	var err error
	got := allocated(func() { pages, err = docfmt.PDF(bytes.NewReader(b), int64(len(b))) })
	// The rows decompress to 7 MB (more with the buffers' growth and the
	// race detector: 64 MB seen); building the map of a million entries
	// took 174 MB. The bound sits between.
	if got > 110<<20 {
		t.Errorf("PDF() of a %d-byte file listing %d objects allocated %d MB, want under 110", len(b), n, got>>20)
	}
	// The file is otherwise sound: scanning finds its one page.
	if pages != 1 || err != nil {
		t.Errorf("PDF() = %d, %v; want 1, nil", pages, err)
	}
}
