package docfmt

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// PDF objects as the parser returns them: int64, float64, bool, nil (null),
// pdfName, pdfString, pdfRef, pdfArray, pdfDict, and pdfKeyword for bare
// words such as obj, endobj, stream and R.
type (
	pdfName    string
	pdfString  string
	pdfKeyword string
	pdfArray   []any
	pdfDict    map[pdfName]any
	pdfRef     struct{ num, gen int64 }
)

// maxNesting bounds how deeply arrays and dictionaries nest. Real files
// stay in single digits; the bound keeps hostile ones off the stack.
const maxNesting = 64

// errShort reports that the lexer reached the end of its buffer before the
// end of the input: the caller reads more and tries again.
var errShort = errors.New("need more input")

// lexer reads PDF syntax from buf. eof says whether buf ends where the
// input does; if not, running off its end gives errShort.
type lexer struct {
	buf []byte
	pos int
	eof bool
}

func isSpace(c byte) bool {
	switch c {
	case 0, '\t', '\n', '\f', '\r', ' ':
		return true
	}
	return false
}

func isDelim(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

func isRegular(c byte) bool { return !isSpace(c) && !isDelim(c) }

// end returns the error for running out of buffer.
func (l *lexer) end() error {
	if l.eof {
		return errors.New("unexpected end of data")
	}
	return errShort
}

// skipSpace skips white space and comments.
func (l *lexer) skipSpace() {
	for l.pos < len(l.buf) {
		c := l.buf[l.pos]
		switch {
		case isSpace(c):
			l.pos++
		case c == '%':
			for l.pos < len(l.buf) && l.buf[l.pos] != '\n' && l.buf[l.pos] != '\r' {
				l.pos++
			}
		default:
			return
		}
	}
}

// word returns the run of regular characters at pos. A word that reaches
// the end of a buffer that is not the end of input may be cut short.
func (l *lexer) word() ([]byte, error) {
	start := l.pos
	for l.pos < len(l.buf) && isRegular(l.buf[l.pos]) {
		l.pos++
	}
	if l.pos == len(l.buf) && !l.eof {
		return nil, errShort
	}
	return l.buf[start:l.pos], nil
}

// keyword reads the bare word want, or fails.
func (l *lexer) keyword(want string) error {
	l.skipSpace()
	if l.pos >= len(l.buf) {
		return l.end()
	}
	w, err := l.word()
	if err != nil {
		return err
	}
	if string(w) != want {
		return fmt.Errorf("found %q, want %q", truncate(w), want)
	}
	return nil
}

// integer reads a non-negative or negative integer.
func (l *lexer) integer() (int64, error) {
	l.skipSpace()
	if l.pos >= len(l.buf) {
		return 0, l.end()
	}
	w, err := l.word()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(w), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("found %q, want an integer", truncate(w))
	}
	return n, nil
}

// objectHeader reads "num gen obj".
func (l *lexer) objectHeader() (num, gen int64, err error) {
	if num, err = l.integer(); err != nil {
		return 0, 0, err
	}
	if gen, err = l.integer(); err != nil {
		return 0, 0, err
	}
	if err := l.keyword("obj"); err != nil {
		return 0, 0, err
	}
	return num, gen, nil
}

// object reads one object. References (num gen R) are recognised here, so
// a bare integer is only returned once the two words after it are known not
// to complete a reference.
func (l *lexer) object(depth int) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("objects nested more than %d deep", maxNesting)
	}
	l.skipSpace()
	if l.pos >= len(l.buf) {
		return nil, l.end()
	}
	switch c := l.buf[l.pos]; {
	case c == '/':
		l.pos++
		w, err := l.word()
		if err != nil {
			return nil, err
		}
		return pdfName(decodeName(w)), nil
	case c == '(':
		return l.literalString()
	case c == '<':
		if l.pos+1 >= len(l.buf) {
			return nil, l.end()
		}
		if l.buf[l.pos+1] == '<' {
			l.pos += 2
			return l.dict(depth)
		}
		return l.hexString()
	case c == '[':
		l.pos++
		return l.array(depth)
	case c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9'):
		return l.number()
	case isRegular(c):
		w, err := l.word()
		if err != nil {
			return nil, err
		}
		switch string(w) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null":
			return nil, nil
		}
		return pdfKeyword(w), nil
	default:
		l.pos++
		return nil, fmt.Errorf("unexpected %q", c)
	}
}

func (l *lexer) number() (any, error) {
	w, err := l.word()
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(string(w), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(w), 64)
		if ferr != nil {
			return nil, fmt.Errorf("bad number %q", truncate(w))
		}
		return f, nil
	}
	if n < 0 {
		return n, nil
	}
	save := l.pos
	ref, ok, err := l.refTail(n)
	if err != nil {
		return nil, err
	}
	if ok {
		return ref, nil
	}
	l.pos = save
	return n, nil
}

// refTail reads the " gen R" that makes num a reference, if it is there.
func (l *lexer) refTail(num int64) (pdfRef, bool, error) {
	l.skipSpace()
	if l.pos >= len(l.buf) {
		return pdfRef{}, false, l.short()
	}
	if c := l.buf[l.pos]; c < '0' || c > '9' {
		return pdfRef{}, false, nil
	}
	w, err := l.word()
	if err != nil {
		return pdfRef{}, false, err
	}
	gen, err := strconv.ParseInt(string(w), 10, 64)
	if err != nil {
		return pdfRef{}, false, nil
	}
	l.skipSpace()
	if l.pos >= len(l.buf) {
		return pdfRef{}, false, l.short()
	}
	if l.buf[l.pos] != 'R' {
		return pdfRef{}, false, nil
	}
	if l.pos+1 == len(l.buf) {
		if !l.eof {
			return pdfRef{}, false, errShort
		}
	} else if isRegular(l.buf[l.pos+1]) {
		return pdfRef{}, false, nil
	}
	l.pos++
	return pdfRef{num, gen}, true, nil
}

// short is errShort if more input may follow, else nil: at the real end of
// input a lookahead simply finds nothing.
func (l *lexer) short() error {
	if l.eof {
		return nil
	}
	return errShort
}

func (l *lexer) array(depth int) (any, error) {
	var a pdfArray
	for {
		l.skipSpace()
		if l.pos >= len(l.buf) {
			return nil, l.end()
		}
		if l.buf[l.pos] == ']' {
			l.pos++
			return a, nil
		}
		v, err := l.object(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, ok := v.(pdfKeyword); ok {
			return nil, fmt.Errorf("unexpected %q in array", v)
		}
		a = append(a, v)
	}
}

func (l *lexer) dict(depth int) (any, error) {
	d := pdfDict{}
	for {
		l.skipSpace()
		if l.pos >= len(l.buf) {
			return nil, l.end()
		}
		if l.buf[l.pos] == '>' {
			if l.pos+1 >= len(l.buf) {
				return nil, l.end()
			}
			if l.buf[l.pos+1] != '>' {
				return nil, errors.New("unexpected '>' in dictionary")
			}
			l.pos += 2
			return d, nil
		}
		k, err := l.object(depth + 1)
		if err != nil {
			return nil, err
		}
		key, ok := k.(pdfName)
		if !ok {
			return nil, fmt.Errorf("dictionary key is %T, not a name", k)
		}
		v, err := l.object(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, ok := v.(pdfKeyword); ok {
			return nil, fmt.Errorf("unexpected %q in dictionary", v)
		}
		d[key] = v
	}
}

// literalString reads a (string). Escapes are decoded loosely: nothing here
// needs the exact bytes of a string, only where it ends.
func (l *lexer) literalString() (any, error) {
	l.pos++ // (
	var b bytes.Buffer
	depth := 1
	for l.pos < len(l.buf) {
		c := l.buf[l.pos]
		l.pos++
		switch c {
		case '\\':
			if l.pos >= len(l.buf) {
				return nil, l.end()
			}
			b.WriteByte(l.buf[l.pos])
			l.pos++
			continue
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return pdfString(b.String()), nil
			}
		}
		b.WriteByte(c)
	}
	return nil, l.end()
}

func (l *lexer) hexString() (any, error) {
	l.pos++ // <
	end := bytes.IndexByte(l.buf[l.pos:], '>')
	if end < 0 {
		return nil, l.end()
	}
	s := l.buf[l.pos : l.pos+end]
	l.pos += end + 1
	var b []byte
	var hi byte
	odd := false
	for _, c := range s {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		case isSpace(c):
			continue
		default:
			return nil, fmt.Errorf("bad hex string character %q", c)
		}
		if odd {
			b = append(b, hi<<4|v)
		} else {
			hi = v
		}
		odd = !odd
	}
	if odd {
		b = append(b, hi<<4)
	}
	return pdfString(b), nil
}

// decodeName decodes #xx escapes of a name.
func decodeName(w []byte) string {
	if bytes.IndexByte(w, '#') < 0 {
		return string(w)
	}
	var b []byte
	for i := 0; i < len(w); i++ {
		if w[i] == '#' && i+2 < len(w) {
			if v, err := strconv.ParseUint(string(w[i+1:i+3]), 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, w[i])
	}
	return string(b)
}

// streamStart reads the "stream" keyword and its end of line after a
// stream's dictionary, and returns the position of the data, or -1 when the
// object is not a stream.
func (l *lexer) streamStart() (int, error) {
	l.skipSpace()
	if l.pos+6 > len(l.buf) {
		if l.eof {
			return -1, nil
		}
		return 0, errShort
	}
	if !bytes.HasPrefix(l.buf[l.pos:], []byte("stream")) {
		return -1, nil
	}
	p := l.pos + 6
	// The keyword is followed by CRLF or LF; a lone CR is tolerated.
	if p < len(l.buf) && l.buf[p] == '\r' {
		p++
	}
	if p < len(l.buf) && l.buf[p] == '\n' {
		p++
	}
	if p >= len(l.buf) && !l.eof {
		return 0, errShort
	}
	return p, nil
}

// truncate shortens w for error messages.
func truncate(w []byte) string {
	if len(w) > 20 {
		return string(w[:20]) + "..."
	}
	return string(w)
}

// name returns d[key] if it is a name.
func (d pdfDict) name(key pdfName) pdfName {
	n, _ := d[key].(pdfName)
	return n
}
