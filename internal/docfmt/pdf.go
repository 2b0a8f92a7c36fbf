package docfmt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/berthdev/berth/internal/errcode"
)

// Limits of PDF checking.
const (
	// MaxPDFScan is the largest PDF whose pages are counted by scanning the
	// whole file, held in memory, when its cross-reference chain cannot be
	// followed.
	MaxPDFScan = 64 << 20

	// maxInflate bounds the bytes decompressed from all streams of one PDF.
	// Only object and cross-reference streams are decompressed, and real
	// ones are a few megabytes at most.
	maxInflate = 64 << 20
	// maxObjectBytes bounds how much of the file one object's dictionary,
	// one cross-reference table or one compressed stream may take.
	maxObjectBytes = 64 << 20
	// maxXrefSections bounds the cross-reference sections followed through
	// /Prev and /XRefStm.
	maxXrefSections = 1024
	// maxXrefEntries bounds the objects a PDF may have. Each takes bytes
	// of the file too, so smaller files get a smaller bound (see
	// xrefLimit): a few kilobytes of compressed cross-reference stream must
	// not make a map of millions of entries.
	maxXrefEntries = 10_000_000
	// maxResolveDepth bounds nested object lookups (a stream whose /Length
	// is in an object stream, and so on), so reference cycles end.
	maxResolveDepth = 16
	// headWindow and tailWindow are how far from its start and end a PDF's
	// header and %%EOF may be.
	headWindow = 1024
	tailWindow = 1024
)

// xrefLimit is the most objects a file of size bytes may have: far more
// than a real file of that size holds (an object takes well over 4 bytes),
// and at most maxXrefEntries.
func xrefLimit(size int64) int {
	return int(min(max(size/4, 4096), maxXrefEntries))
}

func pdfError(format string, args ...any) *errcode.Error {
	return errcode.PDFInvalid.New(format, args...)
}

// PDF checks that r (size bytes) is a structurally sound PDF and returns
// its page count: the /Count of the page tree root that the document
// catalog names, or, when the cross-reference chain to it is broken, the
// number of /Type /Page objects in the file. It returns an [errcode] error
// if the file is not a PDF, is truncated, or has no pages, and a plain
// wrapped error if reading r fails.
func PDF(r io.ReaderAt, size int64) (pages int, err error) {
	pages, err = countPages(r, size)
	if re := (*readError)(nil); errors.As(err, &re) {
		return 0, re.err
	}
	return pages, err
}

func countPages(r io.ReaderAt, size int64) (int, error) {
	d, xrefOff, err := openPDF(r, size)
	if err != nil {
		return 0, err
	}
	n, treeErr := d.pageTreeCount(xrefOff)
	switch {
	case errors.As(treeErr, new(*readError)):
		return 0, treeErr
	case treeErr == nil && n == 0:
		return 0, pdfError("PDF has no pages")
	case treeErr == nil:
		return n, nil
	}
	// The catalog could not be followed: count page objects instead.
	n, err = d.scanPages()
	switch {
	case errors.As(err, new(*readError)):
		return 0, err
	case err != nil:
		return 0, pdfError("PDF page tree is unreadable (%v) and scanning failed: %v", treeErr, err)
	case n == 0:
		e := pdfError("PDF has no pages")
		e.Err = treeErr
		return 0, e
	}
	return n, nil
}

// openPDF checks the header, the end of the file and startxref, and
// returns a doc to follow objects with and the offset of the last
// cross-reference section.
func openPDF(r io.ReaderAt, size int64) (*doc, int64, error) {
	if size < 0 {
		return nil, 0, fmt.Errorf("checking PDF: negative size %d", size)
	}
	head, err := readAt(r, 0, min(size, headWindow))
	if err != nil {
		return nil, 0, err
	}
	headerOff, ok := findHeader(head)
	if !ok {
		return nil, 0, pdfError("not a PDF: no %%PDF- header")
	}
	tailOff := size - min(size, tailWindow)
	tail, err := readAt(r, tailOff, size-tailOff)
	if err != nil {
		return nil, 0, err
	}
	eof := bytes.LastIndex(tail, []byte("%%EOF"))
	if eof < 0 {
		return nil, 0, pdfError("truncated PDF: no %%%%EOF")
	}
	sx := bytes.LastIndex(tail[:eof], []byte("startxref"))
	if sx < 0 {
		return nil, 0, pdfError("truncated PDF: no startxref")
	}
	l := &lexer{buf: tail[sx+len("startxref") : eof], eof: true}
	xrefOff, err := l.integer()
	if err != nil {
		return nil, 0, pdfError("PDF startxref has no offset: %v", err)
	}
	if xrefOff < 0 || xrefOff >= size {
		return nil, 0, pdfError("PDF startxref offset %d is outside the file (%d bytes)", xrefOff, size)
	}

	d := &doc{r: r, size: size, inflateLeft: maxInflate}
	// Offsets count from the start of the file, but a few writers count
	// from the header when junk precedes it; readers accept both.
	kind, err := d.sectionKind(xrefOff)
	if err != nil {
		return nil, 0, err
	}
	if kind == "" && headerOff > 0 {
		if kind, err = d.sectionKind(xrefOff + int64(headerOff)); err != nil {
			return nil, 0, err
		}
		if kind != "" {
			d.shift = int64(headerOff)
		}
	}
	if kind == "" {
		return nil, 0, pdfError("PDF startxref offset %d does not point at a cross-reference table or stream", xrefOff)
	}
	return d, xrefOff, nil
}

// findHeader finds "%PDF-1.x" or "%PDF-2.0" in head.
func findHeader(head []byte) (int, bool) {
	for off := 0; ; {
		i := bytes.Index(head[off:], []byte("%PDF-"))
		if i < 0 {
			return 0, false
		}
		off += i
		v := head[off+5:]
		if len(v) >= 3 && v[1] == '.' && (v[0] == '1' && v[2] >= '0' && v[2] <= '9' || v[0] == '2' && v[2] == '0') {
			return off, true
		}
		off += 5
	}
}

// readError is a failure of the underlying reader, as opposed to a
// malformed file: it is returned as it is, never papered over by a fallback.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// readAt reads n bytes at off, which the caller has checked lie inside the
// file.
func readAt(r io.ReaderAt, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if m, err := r.ReadAt(b, off); m < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, &readError{fmt.Errorf("reading PDF at %d: %w", off, err)}
	}
	return b, nil
}

// xrefEntry says where an object is: at a byte offset (inStream false), or
// at an index in an object stream.
type xrefEntry struct {
	inStream bool
	off      int64 // offset, or the object stream's number
	index    int64
}

// doc follows a PDF's objects.
type doc struct {
	r     io.ReaderAt
	size  int64
	shift int64 // added to every offset; see openPDF

	xref    map[int64]xrefEntry
	trailer pdfDict
	objStms map[int64]*objStm

	depth       int   // current nesting of object lookups
	inflateLeft int64 // decompression budget left
}

// sectionKind reports what is at a startxref offset: "xref" (a table),
// "stream" (an object, presumably a cross-reference stream) or "".
func (d *doc) sectionKind(off int64) (string, error) {
	if off < 0 || off >= d.size {
		return "", nil
	}
	b, err := readAt(d.r, off, min(64, d.size-off))
	if err != nil {
		return "", err
	}
	l := &lexer{buf: b, eof: off+int64(len(b)) >= d.size}
	l.skipSpace()
	if bytes.HasPrefix(b[l.pos:], []byte("xref")) {
		return "xref", nil
	}
	if _, _, err := l.objectHeader(); err == nil {
		return "stream", nil
	}
	return "", nil
}

// parseAt runs parse on the bytes from off, reading more and starting
// again while parse reports errShort, up to maxObjectBytes.
func (d *doc) parseAt(off int64, parse func(l *lexer) error) error {
	off += d.shift
	if off < 0 || off >= d.size {
		return fmt.Errorf("offset %d is outside the file", off)
	}
	for n := int64(4096); ; n *= 4 {
		n = min(n, d.size-off, maxObjectBytes)
		b, err := readAt(d.r, off, n)
		if err != nil {
			return err
		}
		eof := off+n >= d.size
		err = parse(&lexer{buf: b, eof: eof})
		if !errors.Is(err, errShort) {
			return err
		}
		if eof || n == maxObjectBytes {
			return fmt.Errorf("object at %d is larger than %d bytes", off, maxObjectBytes)
		}
	}
}

// pageTreeCount follows the cross-reference chain from off to the catalog
// and returns the /Count of its page tree.
func (d *doc) pageTreeCount(off int64) (int, error) {
	if err := d.loadXref(off); err != nil {
		return 0, fmt.Errorf("cross-reference: %w", err)
	}
	rootRef, ok := d.trailer["Root"].(pdfRef)
	if !ok {
		return 0, errors.New("trailer has no /Root reference")
	}
	root, err := d.resolve(rootRef)
	if err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	catalog, ok := root.(pdfDict)
	if !ok {
		return 0, fmt.Errorf("catalog is %T, not a dictionary", root)
	}
	pagesRef, ok := catalog["Pages"].(pdfRef)
	if !ok {
		return 0, errors.New("catalog has no /Pages reference")
	}
	pv, err := d.resolve(pagesRef)
	if err != nil {
		return 0, fmt.Errorf("page tree: %w", err)
	}
	pages, ok := pv.(pdfDict)
	if !ok {
		return 0, fmt.Errorf("page tree root is %T, not a dictionary", pv)
	}
	if t := pages.name("Type"); t != "Pages" {
		return 0, fmt.Errorf("page tree root has /Type /%s, not /Pages", t)
	}
	cv, err := d.resolve(pages["Count"])
	if err != nil {
		return 0, fmt.Errorf("page count: %w", err)
	}
	count, ok := cv.(int64)
	switch {
	case !ok:
		return 0, fmt.Errorf("page tree /Count is %T, not an integer", cv)
	case count < 0:
		return 0, fmt.Errorf("page tree /Count is %d", count)
	case count > int64(len(d.xref)):
		// Every page is an object of its own.
		return 0, fmt.Errorf("page tree /Count %d is more than the %d objects in the file", count, len(d.xref))
	}
	return int(count), nil
}

// loadXref reads the cross-reference sections from off back through /Prev.
// Newer sections come first and win; free entries are not recorded, so an
// entry a hybrid file's table marks free is taken from its /XRefStm.
func (d *doc) loadXref(off int64) error {
	d.xref = make(map[int64]xrefEntry)
	d.trailer = pdfDict{}
	seen := make(map[int64]bool)
	queue := []int64{off}
	for len(queue) > 0 {
		off := queue[0]
		queue = queue[1:]
		if seen[off] {
			continue // a /Prev loop
		}
		if len(seen) == maxXrefSections {
			return fmt.Errorf("more than %d sections", maxXrefSections)
		}
		seen[off] = true
		kind, err := d.sectionKind(off + d.shift)
		if err != nil {
			return err
		}
		var trailer pdfDict
		switch kind {
		case "xref":
			trailer, err = d.xrefTable(off)
		case "stream":
			trailer, err = d.xrefStream(off)
		default:
			err = errors.New("no table or stream there")
		}
		if err != nil {
			return fmt.Errorf("section at %d: %w", off, err)
		}
		for k, v := range trailer {
			if _, ok := d.trailer[k]; !ok && k != "Prev" && k != "XRefStm" {
				d.trailer[k] = v
			}
		}
		// A hybrid file's stream is read before older sections, as if it
		// were part of this one.
		if s, ok := trailer["XRefStm"].(int64); ok && kind == "xref" {
			queue = append([]int64{s}, queue...)
		}
		if p, ok := trailer["Prev"].(int64); ok {
			queue = append(queue, p)
		}
	}
	return nil
}

func (d *doc) addEntry(num int64, e xrefEntry) error {
	if _, ok := d.xref[num]; ok {
		return nil
	}
	if len(d.xref) >= xrefLimit(d.size) {
		return fmt.Errorf("more than %d objects in %d bytes", xrefLimit(d.size), d.size)
	}
	d.xref[num] = e
	return nil
}

// xrefTable reads a cross-reference table and its trailer dictionary.
func (d *doc) xrefTable(off int64) (pdfDict, error) {
	var entries []struct {
		num int64
		e   xrefEntry
	}
	var trailer pdfDict
	err := d.parseAt(off, func(l *lexer) error {
		entries = entries[:0]
		if err := l.keyword("xref"); err != nil {
			return err
		}
		for {
			l.skipSpace()
			if l.pos >= len(l.buf) {
				return l.end()
			}
			if bytes.HasPrefix(l.buf[l.pos:], []byte("trailer")) {
				l.pos += len("trailer")
				v, err := l.object(0)
				if err != nil {
					return fmt.Errorf("trailer: %w", err)
				}
				t, ok := v.(pdfDict)
				if !ok {
					return fmt.Errorf("trailer is %T, not a dictionary", v)
				}
				trailer = t
				return nil
			}
			start, err := l.integer()
			if err != nil {
				return fmt.Errorf("subsection: %w", err)
			}
			count, err := l.integer()
			if err != nil {
				return fmt.Errorf("subsection: %w", err)
			}
			// An entry takes at least 18 bytes; a count the rest of the
			// buffer cannot hold is a lie or needs more input.
			if start < 0 || count < 0 || count > int64(len(l.buf)-l.pos)/18+1 {
				if !l.eof && count >= 0 && count <= maxObjectBytes/18 {
					return errShort
				}
				return fmt.Errorf("subsection %d %d does not fit", start, count)
			}
			for i := range count {
				o, err := l.integer()
				if err != nil {
					return fmt.Errorf("entry %d: %w", start+i, err)
				}
				if _, err := l.integer(); err != nil {
					return fmt.Errorf("entry %d: %w", start+i, err)
				}
				l.skipSpace()
				w, err := l.word()
				if err != nil {
					return err
				}
				switch string(w) {
				case "n":
					entries = append(entries, struct {
						num int64
						e   xrefEntry
					}{start + i, xrefEntry{off: o}})
				case "f":
				default:
					return fmt.Errorf("entry %d has type %q", start+i, truncate(w))
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := d.addEntry(e.num, e.e); err != nil {
			return nil, err
		}
	}
	return trailer, nil
}

// xrefStream reads a cross-reference stream; its dictionary is the trailer.
func (d *doc) xrefStream(off int64) (pdfDict, error) {
	dict, data, err := d.streamAt(off)
	if err != nil {
		return nil, err
	}
	if t := dict.name("Type"); t != "XRef" {
		return nil, fmt.Errorf("object has /Type /%s, not /XRef", t)
	}
	wa, ok := dict["W"].(pdfArray)
	if !ok || len(wa) != 3 {
		return nil, errors.New("cross-reference stream has no valid /W")
	}
	var w [3]int
	row := 0
	for i, v := range wa {
		n, ok := v.(int64)
		if !ok || n < 0 || n > 8 {
			return nil, fmt.Errorf("cross-reference stream /W %v is invalid", wa)
		}
		w[i] = int(n)
		row += w[i]
	}
	if row == 0 {
		return nil, errors.New("cross-reference stream /W is all zero")
	}
	index, ok := dict["Index"].(pdfArray)
	if !ok {
		size, ok := dict["Size"].(int64)
		if !ok {
			return nil, errors.New("cross-reference stream has no /Size")
		}
		index = pdfArray{int64(0), size}
	}
	if len(index)%2 != 0 {
		return nil, errors.New("cross-reference stream /Index has an odd length")
	}
	field := func(b []byte) int64 {
		var v int64
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		return v
	}
	for i := 0; i < len(index); i += 2 {
		start, ok1 := index[i].(int64)
		count, ok2 := index[i+1].(int64)
		if !ok1 || !ok2 || start < 0 || count < 0 {
			return nil, fmt.Errorf("cross-reference stream /Index %v is invalid", index)
		}
		for j := int64(0); j < count && len(data) >= row; j++ {
			e := data[:row]
			data = data[row:]
			typ := int64(1)
			if w[0] > 0 {
				typ = field(e[:w[0]])
			}
			a, b := field(e[w[0]:w[0]+w[1]]), field(e[w[0]+w[1]:])
			switch typ {
			case 1:
				err = d.addEntry(start+j, xrefEntry{off: a})
			case 2:
				err = d.addEntry(start+j, xrefEntry{inStream: true, off: a, index: b})
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return dict, nil
}

// resolve follows v while it is a reference.
func (d *doc) resolve(v any) (any, error) {
	for range maxResolveDepth {
		ref, ok := v.(pdfRef)
		if !ok {
			return v, nil
		}
		var err error
		if v, err = d.object(ref.num); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("references nested too deep")
}

// object returns object num (without its stream data).
func (d *doc) object(num int64) (any, error) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxResolveDepth {
		return nil, fmt.Errorf("object %d: lookups nested more than %d deep", num, maxResolveDepth)
	}
	e, ok := d.xref[num]
	if !ok {
		return nil, fmt.Errorf("object %d is not in the cross-reference", num)
	}
	if e.inStream {
		s, err := d.objStm(e.off)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", num, err)
		}
		return s.object(e.index, num)
	}
	var v any
	err := d.parseAt(e.off, func(l *lexer) error {
		n, _, err := l.objectHeader()
		if err != nil {
			return err
		}
		if n != num {
			return fmt.Errorf("found object %d", n)
		}
		v, err = l.object(0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("object %d at %d: %w", num, e.off, err)
	}
	return v, nil
}

// streamAt reads the stream object at off and returns its dictionary and
// decoded data.
func (d *doc) streamAt(off int64) (pdfDict, []byte, error) {
	var dict pdfDict
	var dataOff int64
	err := d.parseAt(off, func(l *lexer) error {
		if _, _, err := l.objectHeader(); err != nil {
			return err
		}
		v, err := l.object(0)
		if err != nil {
			return err
		}
		var ok bool
		if dict, ok = v.(pdfDict); !ok {
			return fmt.Errorf("object is %T, not a stream", v)
		}
		p, err := l.streamStart()
		if err != nil {
			return err
		}
		if p < 0 {
			return errors.New("object is not a stream")
		}
		dataOff = off + d.shift + int64(p)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	lv, err := d.resolve(dict["Length"])
	if err != nil {
		return nil, nil, fmt.Errorf("stream /Length: %w", err)
	}
	n, ok := lv.(int64)
	if !ok || n < 0 || n > d.size-dataOff || n > maxObjectBytes {
		return nil, nil, fmt.Errorf("stream /Length %v does not fit the file", lv)
	}
	raw, err := readAt(d.r, dataOff, n)
	if err != nil {
		return nil, nil, err
	}
	data, err := decodeStream(dict, raw, &d.inflateLeft)
	if err != nil {
		return nil, nil, err
	}
	return dict, data, nil
}

// objStm is a decoded object stream.
type objStm struct {
	data    []byte
	first   int64
	nums    []int64
	offsets []int64
}

func (d *doc) objStm(num int64) (*objStm, error) {
	if s, ok := d.objStms[num]; ok {
		return s, nil
	}
	e, ok := d.xref[num]
	if !ok || e.inStream {
		return nil, fmt.Errorf("object stream %d is not in the file", num)
	}
	dict, data, err := d.streamAt(e.off)
	if err != nil {
		return nil, fmt.Errorf("object stream %d: %w", num, err)
	}
	s, err := parseObjStm(dict, data)
	if err != nil {
		return nil, fmt.Errorf("object stream %d: %w", num, err)
	}
	if d.objStms == nil {
		d.objStms = make(map[int64]*objStm)
	}
	d.objStms[num] = s
	return s, nil
}

func parseObjStm(dict pdfDict, data []byte) (*objStm, error) {
	if t := dict.name("Type"); t != "ObjStm" {
		return nil, fmt.Errorf("/Type is /%s, not /ObjStm", t)
	}
	n, ok1 := dict["N"].(int64)
	first, ok2 := dict["First"].(int64)
	// Each of the N header pairs takes at least four bytes.
	if !ok1 || !ok2 || n < 0 || first < 0 || first > int64(len(data)) || n > first/4+1 {
		return nil, fmt.Errorf("/N %v /First %v do not fit %d bytes", dict["N"], dict["First"], len(data))
	}
	s := &objStm{data: data, first: first}
	l := &lexer{buf: data[:first], eof: true}
	for range n {
		num, err := l.integer()
		if err != nil {
			return nil, err
		}
		off, err := l.integer()
		if err != nil {
			return nil, err
		}
		s.nums = append(s.nums, num)
		s.offsets = append(s.offsets, off)
	}
	return s, nil
}

func (s *objStm) object(index, num int64) (any, error) {
	if index < 0 || index >= int64(len(s.nums)) {
		return nil, fmt.Errorf("object %d: index %d is outside its object stream", num, index)
	}
	if s.nums[index] != num {
		return nil, fmt.Errorf("object %d: its object stream has object %d there", num, s.nums[index])
	}
	return s.at(index)
}

func (s *objStm) at(index int64) (any, error) {
	off := s.first + s.offsets[index]
	if s.offsets[index] < 0 || off >= int64(len(s.data)) {
		return nil, fmt.Errorf("object %d: offset %d is outside its object stream", s.nums[index], s.offsets[index])
	}
	l := &lexer{buf: s.data[off:], eof: true}
	return l.object(0)
}

// objStart finds object headers ("12 0 obj") when scanning.
var objStart = regexp.MustCompile(`(?:^|[^0-9])([0-9]{1,10})[\x00\t\n\f\r ]+[0-9]{1,5}[\x00\t\n\f\r ]+obj`)

// scanPages counts /Type /Page objects anywhere in the file, as viewers do
// to recover a damaged file. A later definition of an object number
// replaces an earlier one, as an incremental update would.
func (d *doc) scanPages() (int, error) {
	if d.size > MaxPDFScan {
		return 0, fmt.Errorf("the file is larger than %d bytes", MaxPDFScan)
	}
	data, err := readAt(d.r, 0, d.size)
	if err != nil {
		return 0, err
	}
	isPage := make(map[int64]bool)
	for _, m := range objStart.FindAllSubmatchIndex(data, -1) {
		num, err := strconv.ParseInt(string(data[m[2]:m[3]]), 10, 64)
		if err != nil {
			continue
		}
		l := &lexer{buf: data[m[1]:], eof: true}
		v, err := l.object(0)
		if err != nil {
			continue
		}
		dict, ok := v.(pdfDict)
		isPage[num] = ok && dict.name("Type") == "Page"
		if !ok || dict.name("Type") != "ObjStm" {
			continue
		}
		p, err := l.streamStart()
		if err != nil || p < 0 {
			continue
		}
		raw := data[m[1]+p:]
		if n, ok := dict["Length"].(int64); ok && n >= 0 && n <= int64(len(raw)) {
			raw = raw[:n]
		} else if end := bytes.Index(raw, []byte("endstream")); end >= 0 {
			raw = raw[:end]
		}
		decoded, err := decodeStream(dict, raw, &d.inflateLeft)
		if err != nil {
			continue
		}
		s, err := parseObjStm(dict, decoded)
		if err != nil {
			continue
		}
		for i := range s.nums {
			v, err := s.at(int64(i))
			if err != nil {
				continue
			}
			dict, ok := v.(pdfDict)
			isPage[s.nums[i]] = ok && dict.name("Type") == "Page"
		}
	}
	n := 0
	for _, p := range isPage {
		if p {
			n++
		}
	}
	return n, nil
}
