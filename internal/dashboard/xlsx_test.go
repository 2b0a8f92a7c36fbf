package dashboard

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// MakeXLSX is makeXLSX for the dashboard's browser test.
var MakeXLSX = makeXLSX

// makeXLSX writes a minimal workbook with archive/zip: one sheet named
// sheet whose part holds sheetXML's rows, and the shared strings given.
func makeXLSX(t testing.TB, sheet, sheetXML string, shared ...string) []byte {
	t.Helper()
	parts := map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
			`<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>` +
			`<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>` +
			`<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>`,
		"_rels/.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml": `<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">` +
			`<sheets><sheet name="` + sheet + `" sheetId="1" r:id="rId1"/></sheets></workbook>`,
		"xl/_rels/workbook.xml.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>` +
			`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`,
		"xl/worksheets/sheet1.xml": `<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` +
			sheetXML + `</sheetData></worksheet>`,
	}
	var ss strings.Builder
	for _, s := range shared {
		ss.WriteString("<si><t>" + s + "</t></si>")
	}
	parts["xl/sharedStrings.xml"] = `<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">` + ss.String() + `</sst>`
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range parts {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadXLSX(t *testing.T) {
	t.Parallel()
	rows := `<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>` +
		`<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>42.50</v></c><c r="D2" t="inlineStr"><is><r><t>in</t></r><r><t>line</t></r></is></c></row>` +
		`<row r="4"><c t="b"><v>1</v></c><c t="e"><v>#DIV/0!</v></c><c t="str"><f>A1</f><v>formula</v></c></row>`
	data := makeXLSX(t, "Scores", rows, "name", "score", "alice &amp; bob")
	got, err := readXLSX(data)
	if err != nil {
		t.Fatalf("readXLSX: %v", err)
	}
	want := xlsxSheet{Name: "Scores", Rows: [][]string{
		{"name", "score"},
		{"alice & bob", "42.50", "", "inline"},
		nil,
		{"TRUE", "#DIV/0!", "formula"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readXLSX (-want +got):\n%s", diff)
	}
}

func TestReadXLSXBounds(t *testing.T) {
	t.Parallel()
	t.Run("rows and columns", func(t *testing.T) {
		var b strings.Builder
		for r := 1; r <= maxRows+5; r++ {
			b.WriteString("<row>")
			if r == 1 {
				for range maxCols + 3 {
					b.WriteString("<c><v>1</v></c>")
				}
			}
			b.WriteString("</row>")
		}
		got, err := readXLSX(makeXLSX(t, "Big", b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Rows) != maxRows || len(got.Rows[0]) != maxCols || !got.Truncated {
			t.Errorf("readXLSX of %d rows x %d columns = %d rows x %d, truncated %v; want %d x %d, truncated",
				maxRows+5, maxCols+3, len(got.Rows), len(got.Rows[0]), got.Truncated, maxRows, maxCols)
		}
	})
	t.Run("zip bomb", func(t *testing.T) {
		// A sheet part of mib MiB of spaces (they deflate about 1000:1,
		// and are XML character data, so the reader keeps reading).
		bomb := func(mib int) []byte {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			// The fastest deflate keeps the test short under -race.
			zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
				return flate.NewWriter(w, flate.BestSpeed)
			})
			for name, body := range map[string]string{
				"xl/workbook.xml":            `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" r:id="rId1"/></sheets></workbook>`,
				"xl/_rels/workbook.xml.rels": `<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`,
			} {
				w, _ := zw.Create(name)
				_, _ = w.Write([]byte(body))
			}
			w, _ := zw.Create("xl/worksheets/sheet1.xml")
			_, _ = w.Write([]byte("<worksheet><sheetData><row><c><v>"))
			spaces := bytes.Repeat([]byte(" "), 1<<20)
			for range mib {
				_, _ = w.Write(spaces)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
		big := bomb(maxXLSXPart>>20 + 1)
		if len(big) > maxXLSXFile {
			t.Fatalf("the bomb is %d bytes, over the file bound: it would not test the inflate bound", len(big))
		}
		_, err := readXLSX(big)
		if !errors.Is(err, errNotXLSX) || !strings.Contains(err.Error(), "over the preview's bound") {
			t.Errorf("readXLSX(bomb) = %v, want the part bound", err)
		}
		// The control: the same file under the bound is inflated and
		// read to its end (it stops in the middle of a cell: not XML).
		_, err = readXLSX(bomb(1))
		if !errors.Is(err, errNotXLSX) || strings.Contains(err.Error(), "bound") || !strings.Contains(err.Error(), "not XML") {
			t.Errorf("readXLSX(1 MiB of spaces) = %v, want not XML", err)
		}
		// The total bound: a budget smaller than the part stops it too.
		two := bomb(2)
		zr, _ := zip.NewReader(bytes.NewReader(two), int64(len(two)))
		x := &xlsxReader{files: map[string]*zip.File{}, budget: 1 << 20}
		for _, f := range zr.File {
			x.files[f.Name] = f
		}
		if _, err := x.sheet("xl/worksheets/sheet1.xml", nil); err == nil || !strings.Contains(err.Error(), "inflates to over") {
			t.Errorf("reading 2 MiB on a budget of 1 MiB = %v, want the total bound", err)
		}
	})
	t.Run("lying sizes", func(t *testing.T) {
		data := makeXLSX(t, "S", `<row><c><v>1</v></c></row>`)
		// Each entry's central directory says 1 byte: reading more
		// fails instead of trusting the number.
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			if f.Name == "xl/worksheets/sheet1.xml" {
				f.UncompressedSize64 = 1
			}
		}
		x := &xlsxReader{files: map[string]*zip.File{}, budget: maxXLSXTotal}
		for _, f := range zr.File {
			x.files[f.Name] = f
		}
		if _, err := x.sheet("xl/worksheets/sheet1.xml", nil); !errors.Is(err, errNotXLSX) {
			t.Errorf("reading a part longer than it declares = %v, want an error", err)
		}
	})
	t.Run("not XLSX", func(t *testing.T) {
		for name, data := range map[string][]byte{
			"text":          []byte("just text, not a zip"),
			"empty zip":     func() []byte { var b bytes.Buffer; _ = zip.NewWriter(&b).Close(); return b.Bytes() }(),
			"bad shared":    makeXLSX(t, "S", `<row><c t="s"><v>7</v></c></row>`),
			"bad ref":       makeXLSX(t, "S", `<row><c r="1A"><v>7</v></c></row>`),
			"broken XML":    makeXLSX(t, "S", `<row><c><v>7</c></row>`),
			"rows reversed": makeXLSX(t, "S", `<row r="3"/><row r="2"/>`),
		} {
			if _, err := readXLSX(data); !errors.Is(err, errNotXLSX) {
				t.Errorf("readXLSX(%s) = %v, want errNotXLSX", name, err)
			}
		}
	})
}

func TestCellColumn(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]int{"A1": 0, "Z9": 25, "AA10": 26, "az3": 51, "XFD1": 16383} {
		if got, ok := cellColumn(ref); !ok || got != want {
			t.Errorf("cellColumn(%q) = %d, %v; want %d", ref, got, ok, want)
		}
	}
	for _, ref := range []string{"", "A", "1", "XFE1", "A1B"} {
		if _, ok := cellColumn(ref); ok {
			t.Errorf("cellColumn(%q) ok, want refused", ref)
		}
	}
}

// FuzzReadXLSX feeds the reader arbitrary files: it never panics, and
// what it reads stays within the preview's rows and columns.
func FuzzReadXLSX(f *testing.F) {
	f.Add(makeXLSX(f, "S", `<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1"><v>2</v></c></row>`, "x"))
	f.Add(makeXLSX(f, "S", `<row><c t="inlineStr"><is><t>a</t></is></c></row>`))
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := readXLSX(data)
		if err != nil {
			if !errors.Is(err, errNotXLSX) {
				t.Fatalf("readXLSX = %v, want errNotXLSX", err)
			}
			return
		}
		if len(s.Rows) > maxRows {
			t.Fatalf("readXLSX = %d rows, over %d", len(s.Rows), maxRows)
		}
		for _, r := range s.Rows {
			if len(r) > maxCols {
				t.Fatalf("readXLSX = a row of %d cells, over %d", len(r), maxCols)
			}
		}
	})
}
