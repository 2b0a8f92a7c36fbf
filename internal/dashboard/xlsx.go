package dashboard

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// An XLSX preview reads the first sheet of a workbook with the standard
// library only (archive/zip, encoding/xml): a new Go dependency's
// initialisation would run in every Berth process, sandbox agents
// included. It trusts nothing in the file: the file, each part it reads
// (by its declared and its actual size) and all the bytes it inflates
// are bounded, so a zip bomb stops at the bound.
const (
	// maxXLSXFile bounds the file read (a zip is read at random, so it
	// is held in memory).
	maxXLSXFile = 16 << 20
	// maxXLSXPart bounds one part, inflated.
	maxXLSXPart = 64 << 20
	// maxXLSXTotal bounds all the bytes inflated for one preview.
	maxXLSXTotal = 128 << 20
	// maxSharedStrings bounds the shared strings kept.
	maxSharedStrings = 1 << 20
)

// errNotXLSX marks a file that is not a workbook this preview reads; its
// message says why, for the page.
var errNotXLSX = errors.New("not a valid XLSX")

func notXLSX(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotXLSX, fmt.Sprintf(format, args...))
}

// xlsxSheet is the first sheet of a workbook, as far as the preview reads.
type xlsxSheet struct {
	Name string
	Rows [][]string
	// Truncated says there were more rows or columns than were kept;
	// Cut says which.
	Truncated bool
	Cut       tableCut
}

// readXLSX reads the first sheet of the workbook data: at most maxRows
// rows and maxCols columns, each cell as its text (a shared or inline
// string, or a number, boolean or error as the file writes it). An error
// wrapping errNotXLSX says what is wrong with the file.
func readXLSX(data []byte) (xlsxSheet, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return xlsxSheet{}, notXLSX("not a zip file (%v)", err)
	}
	x := &xlsxReader{files: map[string]*zip.File{}, budget: maxXLSXTotal}
	for _, f := range zr.File {
		x.files[strings.ToLower(strings.TrimPrefix(f.Name, "/"))] = f
	}

	// The workbook: the package's officeDocument relationship, else its
	// usual name.
	book := "xl/workbook.xml"
	var pkgRels relationships
	if err := x.decode("_rels/.rels", &pkgRels); err == nil {
		if t := pkgRels.target("", "/officeDocument"); t != "" {
			book = t
		}
	} else if !errors.Is(err, errPartMissing) {
		return xlsxSheet{}, err
	}
	var wb struct {
		Sheets []struct {
			Name string     `xml:"name,attr"`
			Attr []xml.Attr `xml:",any,attr"`
		} `xml:"sheets>sheet"`
	}
	if err := x.decode(book, &wb); err != nil {
		return xlsxSheet{}, err
	}
	if len(wb.Sheets) == 0 {
		return xlsxSheet{}, notXLSX("the workbook lists no sheets")
	}
	var rid string
	for _, a := range wb.Sheets[0].Attr {
		if a.Name.Local == "id" && a.Name.Space != "" {
			rid = a.Value
		}
	}
	var bookRels relationships
	relsName := path.Join(path.Dir(book), "_rels", path.Base(book)+".rels")
	if err := x.decode(relsName, &bookRels); err != nil {
		return xlsxSheet{}, err
	}
	sheetPart := bookRels.targetByID(path.Dir(book), rid)
	if sheetPart == "" {
		return xlsxSheet{}, notXLSX("the first sheet (%q) has no part in the workbook's relationships", wb.Sheets[0].Name)
	}
	var shared []string
	if ss := bookRels.target(path.Dir(book), "/sharedStrings"); ss != "" {
		if shared, err = x.sharedStrings(ss); err != nil {
			return xlsxSheet{}, err
		}
	}
	sheet, err := x.sheet(sheetPart, shared)
	sheet.Name = wb.Sheets[0].Name
	return sheet, err
}

// errPartMissing is a part the workbook's zip does not hold.
var errPartMissing = errors.New("part missing")

type xlsxReader struct {
	files map[string]*zip.File
	// budget is what is left of maxXLSXTotal.
	budget int64
}

// open opens part name, bounded by its declared size, maxXLSXPart and
// what is left of the budget.
func (x *xlsxReader) open(name string) (io.ReadCloser, error) {
	f := x.files[strings.ToLower(strings.TrimPrefix(name, "/"))]
	if f == nil {
		return nil, fmt.Errorf("%w: %s: %w", errNotXLSX, name, errPartMissing)
	}
	if f.UncompressedSize64 > maxXLSXPart {
		return nil, notXLSX("part %s declares %d bytes, over the preview's bound of %d", name, f.UncompressedSize64, maxXLSXPart)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, notXLSX("part %s: %v", name, err)
	}
	return &boundedPart{rc: rc, name: name, left: min(int64(f.UncompressedSize64), maxXLSXPart), x: x}, nil
}

// boundedPart reads a part and fails past its declared size (a zip whose
// entries lie about their size) or the preview's budget.
type boundedPart struct {
	rc   io.ReadCloser
	name string
	left int64
	x    *xlsxReader
}

func (b *boundedPart) Read(p []byte) (int, error) {
	if b.left <= 0 || b.x.budget <= 0 {
		// One byte more says whether the part really ends here.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			if b.x.budget <= 0 {
				return 0, notXLSX("the workbook inflates to over %d bytes, the preview's bound", maxXLSXTotal)
			}
			return 0, notXLSX("part %s holds more than the size it declares", b.name)
		}
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.left, b.x.budget)]
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	b.x.budget -= int64(n)
	if err != nil && err != io.EOF {
		return n, notXLSX("part %s: %v", b.name, err)
	}
	return n, err
}

func (b *boundedPart) Close() error { return b.rc.Close() }

// decode reads part name's XML into v.
func (x *xlsxReader) decode(name string, v any) error {
	rc, err := x.open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := xml.NewDecoder(rc).Decode(v); err != nil {
		if errors.Is(err, errNotXLSX) {
			return err
		}
		return notXLSX("part %s is not XML (%v)", name, err)
	}
	return nil
}

// relationships is an OPC relationships part.
type relationships struct {
	Rels []struct {
		ID     string `xml:"Id,attr"`
		Type   string `xml:"Type,attr"`
		Target string `xml:"Target,attr"`
		Mode   string `xml:"TargetMode,attr"`
	} `xml:"Relationship"`
}

// target is the part of the first relationship whose type ends in
// suffix, resolved against dir ("" when there is none).
func (r relationships) target(dir, suffix string) string {
	for _, rel := range r.Rels {
		if strings.HasSuffix(rel.Type, suffix) && rel.Mode != "External" {
			return resolvePart(dir, rel.Target)
		}
	}
	return ""
}

func (r relationships) targetByID(dir, id string) string {
	for _, rel := range r.Rels {
		if rel.ID == id && id != "" && rel.Mode != "External" {
			return resolvePart(dir, rel.Target)
		}
	}
	return ""
}

// resolvePart resolves a relationship's target against the directory of
// the part that has it; a target starting with / is from the root.
func resolvePart(dir, target string) string {
	if strings.HasPrefix(target, "/") {
		return path.Clean(target)[1:]
	}
	return strings.TrimPrefix(path.Join(dir, target), "/")
}

// sharedStrings reads the shared strings part: each <si>'s text (its
// <t>, or its runs' <t>s; phonetic runs are left out).
func (x *xlsxReader) sharedStrings(name string) ([]string, error) {
	rc, err := x.open(name)
	if err != nil {
		if errors.Is(err, errPartMissing) {
			return nil, nil
		}
		return nil, err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	var out []string
	var cur strings.Builder
	inSI, inT, phonetic := false, false, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, xmlFailed(name, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				inSI = true
				cur.Reset()
			case "rPh":
				phonetic++
			case "t":
				inT = inSI && phonetic == 0
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "si":
				if len(out) == maxSharedStrings {
					return nil, notXLSX("over %d shared strings", maxSharedStrings)
				}
				out = append(out, cur.String())
				inSI = false
			case "rPh":
				phonetic--
			case "t":
				inT = false
			}
		case xml.CharData:
			if inT {
				cur.Write(t)
			}
		}
	}
}

func xmlFailed(name string, err error) error {
	if errors.Is(err, errNotXLSX) {
		return err
	}
	return notXLSX("part %s is not XML (%v)", name, err)
}

// sheet reads a worksheet part's first maxRows rows and maxCols columns.
// It stops reading at the first row past them.
func (x *xlsxReader) sheet(name string, shared []string) (xlsxSheet, error) {
	var s xlsxSheet
	rc, err := x.open(name)
	if err != nil {
		return s, err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	var (
		row      []string
		inRow    bool
		nextRow  = 1 // the row number a row without r= gets
		col      int // the column of the cell being read (0-based)
		nextCol  int
		cellType string
		inCell   bool
		inV      bool
		inIS     bool
		inT      bool
		text     strings.Builder
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return s, xmlFailed(name, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "row":
				n := nextRow
				if r := attr(t, "r"); r != "" {
					v, err := strconv.Atoi(r)
					if err != nil || v < nextRow {
						return s, notXLSX("row number %q out of order", r)
					}
					n = v
				}
				if n > maxRows {
					s.Truncated, s.Cut.Rows = true, true
					return s, nil
				}
				// Empty rows the file skips are drawn empty.
				for len(s.Rows) < n-1 {
					s.Rows = append(s.Rows, nil)
				}
				inRow, row, nextRow, nextCol = true, nil, n+1, 0
			case "c":
				if !inRow {
					continue
				}
				col = nextCol
				if r := attr(t, "r"); r != "" {
					c, ok := cellColumn(r)
					if !ok {
						return s, notXLSX("cell reference %q", r)
					}
					col = c
				}
				nextCol = col + 1
				cellType, inCell = attr(t, "t"), true
				text.Reset()
			case "v":
				inV = inCell
			case "is":
				inIS = inCell
			case "t":
				inT = inIS
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "row":
				s.Rows = append(s.Rows, row)
				inRow = false
			case "c":
				if !inCell {
					continue
				}
				inCell = false
				if col >= maxCols {
					s.Truncated, s.Cut.Cols = true, true
					continue
				}
				v, err := cellText(cellType, text.String(), shared)
				if err != nil {
					return s, err
				}
				for len(row) < col {
					row = append(row, "")
				}
				row = append(row, v)
			case "v":
				inV = false
			case "is":
				inIS = false
			case "t":
				inT = false
			}
		case xml.CharData:
			if inV || inT {
				text.Write(t)
			}
		}
	}
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

// cellText is a cell's text by its type: a shared string's index, an
// inline string, a boolean, or a number, formula string or error as the
// file writes it.
func cellText(typ, v string, shared []string) (string, error) {
	switch typ {
	case "s":
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || i < 0 || i >= len(shared) {
			return "", notXLSX("shared string %q does not exist", v)
		}
		return shared[i], nil
	case "b":
		switch strings.TrimSpace(v) {
		case "1":
			return "TRUE", nil
		case "0":
			return "FALSE", nil
		}
	}
	return v, nil
}

// cellColumn is the 0-based column of a cell reference ("C7" is 2).
func cellColumn(ref string) (int, bool) {
	col, i := 0, 0
	for ; i < len(ref); i++ {
		c := ref[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c < 'A' || c > 'Z' {
			break
		}
		col = col*26 + int(c-'A'+1)
		if col > 16384 { // XFD, the last column Excel has
			return 0, false
		}
	}
	if i == 0 || i == len(ref) {
		return 0, false
	}
	if _, err := strconv.Atoi(ref[i:]); err != nil {
		return 0, false
	}
	return col - 1, true
}

// viewXLSX fills v with the first sheet of workbook p as a table, or
// with why the file is not one this preview reads.
func (d *Dashboard) viewXLSX(rq *req, v viewPage) {
	body, err := rq.c.ReadFile(rq.ctx(), v.SandboxID, v.Path)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	data, err := io.ReadAll(io.LimitReader(body, maxXLSXFile+1))
	body.Close()
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	if len(data) > maxXLSXFile {
		v.Kind, v.Problem = kindInvalid, "This workbook is over 16 MiB, too large to preview: download it."
		rq.render(d, "view", v)
		return
	}
	sheet, err := readXLSX(data)
	if err != nil {
		v.Kind, v.Problem = kindInvalid, "This file is not a valid XLSX workbook, or not one the preview reads: "+
			strings.TrimPrefix(err.Error(), errNotXLSX.Error()+": ")+". Download it to open it elsewhere."
		rq.render(d, "view", v)
		return
	}
	v.Kind, v.Rows, v.Cut, v.Sheet = kindTable, sheet.Rows, sheet.Cut, sheet.Name
	rq.render(d, "view", v)
}
