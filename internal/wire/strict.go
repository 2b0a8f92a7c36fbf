package wire

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/berthdev/berth/internal/errcode"
)

// maxJSONDepth bounds the nesting of a request body, as encoding/json's
// own scanner does.
const maxJSONDepth = 10000

// checkStrict walks the JSON value in body with the tokenizer and refuses
// what encoding/json's Unmarshal would let through silently: a member name
// twice in one object (Unmarshal keeps the last), a name that matches a
// field of t only when case is ignored (Unmarshal takes it), invalid UTF-8
// and lone UTF-16 surrogate escapes in strings (Unmarshal puts U+FFFD in
// their place). It also refuses syntax errors and data after the value. An
// empty body passes. Unknown names and wrong types are left to Unmarshal.
func checkStrict(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a token is never converted to float64, which may overflow
	s := &strictWalk{dec: dec, body: body}
	tok, err := s.next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.value(tok, t, "", 0); err != nil {
		return err
	}
	switch _, err := s.next(); err {
	case io.EOF:
		return nil
	case nil:
		return errcode.BodyInvalid.New("request body has data after the JSON value")
	default:
		return err
	}
}

// strictWalk is one walk of checkStrict.
type strictWalk struct {
	dec  *json.Decoder
	body []byte
	end  int64 // offset just past the last token
	raw  []byte
}

// next returns the next token, with s.raw set to its bytes in the body
// (and what separated it from the previous token: whitespace, ',' or ':').
func (s *strictWalk) next() (json.Token, error) {
	tok, err := s.dec.Token()
	if err != nil {
		return nil, err
	}
	start := s.end
	s.end = s.dec.InputOffset()
	s.raw = s.body[start:s.end]
	return tok, nil
}

// within returns the next token inside a value: the end of the body there
// is a truncated body.
func (s *strictWalk) within() (json.Token, error) {
	tok, err := s.next()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return tok, err
}

// value checks the value that starts with tok, to be decoded into t (nil
// when anything goes: an interface, a json.Unmarshaler, a field Unmarshal
// will refuse anyway). field names it in messages.
func (s *strictWalk) value(tok json.Token, t reflect.Type, field string, depth int) error {
	switch tok := tok.(type) {
	case string:
		return s.checkString(field, false)
	case json.Delim:
		if depth >= maxJSONDepth {
			return errcode.BodyInvalid.New("request body nests deeper than %d", maxJSONDepth)
		}
		t = shapeOf(t)
		if tok == '{' {
			return s.object(t, field, depth+1)
		}
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; ; i++ {
			tok, err := s.within()
			if err != nil {
				return err
			}
			if tok == json.Delim(']') {
				return nil
			}
			if err := s.value(tok, elem, field+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// object checks the members of an object, after its '{'.
func (s *strictWalk) object(t reflect.Type, field string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = structFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for {
		tok, err := s.within()
		if err != nil {
			return err
		}
		if tok == json.Delim('}') {
			return nil
		}
		if err := s.checkString(field, true); err != nil {
			return err
		}
		key, _ := tok.(string) // the tokenizer allows only strings here
		name := key
		if field != "" {
			name = field + "." + key
		}
		if seen[key] {
			return problem(errcode.BodyDuplicateField, name, "appears more than once",
				"request body has field %q more than once", name)
		}
		seen[key] = true
		vt := elem
		if fields != nil {
			var ok bool
			if vt, ok = fields[key]; !ok {
				for f := range fields {
					if strings.EqualFold(f, key) {
						return problem(errcode.BodyFieldCase, name, fmt.Sprintf("must be written %q", f),
							"request body has field %q: field names are case-sensitive; write %q", name, f)
					}
				}
			}
		}
		tok, err = s.within()
		if err != nil {
			return err
		}
		if err := s.value(tok, vt, name, depth); err != nil {
			return err
		}
	}
}

// checkString checks the string token just read, as it is in the body:
// encoding/json would replace invalid UTF-8, and escapes of lone UTF-16
// surrogates, with U+FFFD. field names the member the string is the value
// of or, for a name, the object it is in.
func (s *strictWalk) checkString(field string, isName bool) error {
	raw := s.raw[bytes.IndexByte(s.raw, '"'):] // separators have no quotes
	why := ""
	if !utf8.Valid(raw) {
		why = "is not valid UTF-8"
	}
	for i := 0; why == "" && i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if raw[i] != 'u' {
			continue
		}
		r := hex4(raw[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xdc00 && r < 0xe000:
			why = fmt.Sprintf("escapes a lone UTF-16 surrogate (\\u%04x)", r)
		case r >= 0xd800 && r < 0xdc00:
			// A high surrogate must come with a low one.
			if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(raw[i+3 : i+7]); lo >= 0xdc00 && lo < 0xe000 {
					i += 6
					continue
				}
			}
			why = fmt.Sprintf("escapes a lone UTF-16 surrogate (\\u%04x)", r)
		}
	}
	switch {
	case why == "":
		return nil
	case isName && field == "":
		return errcode.BodyInvalidUTF8.New("request body has a field name that %s", why)
	case isName:
		return problem(errcode.BodyInvalidUTF8, field, "has a field name that "+why,
			"request body has a field name in %q that %s", field, why)
	case field == "":
		return errcode.BodyInvalidUTF8.New("request body is a string that %s", why)
	}
	return problem(errcode.BodyInvalidUTF8, field, why, "request body field %q %s", field, why)
}

// hex4 decodes four hex digits, which the tokenizer has checked.
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// problem is an invalid body error with reason that names field.
func problem(reason errcode.Reason, field, why, format string, args ...any) error {
	e := reason.New(format, args...)
	e.Problems = map[string]string{field: why}
	return e
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf returns the type whose members t's JSON has, or nil when any
// member is acceptable: t is nil, an interface, or decodes itself.
func shapeOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(unmarshalerType) || p.Implements(textUnmarshalerType) {
		return nil
	}
	return t
}

// fieldCache holds structFields' answers, by type.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields returns the JSON member names of struct type t and their
// types, as encoding/json names them: the json tag's name, else the Go
// name; "-" is left out; the fields of an untagged embedded struct are
// promoted, a field nearer the top winning.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	level := []reflect.Type{t}
	visited := map[reflect.Type]bool{}
	for len(level) > 0 {
		var next []reflect.Type
		found := map[string]reflect.Type{}
		for _, st := range level {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
					next = append(next, ft)
					continue
				}
				if !sf.IsExported() {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				if _, ok := fields[name]; !ok {
					found[name] = sf.Type
				}
			}
		}
		for name, ft := range found {
			fields[name] = ft
		}
		level = next
	}
	fieldCache.Store(t, fields)
	return fields
}
