package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/errcode"
)

// MaxJSONBody caps ordinary JSON request bodies.
const MaxJSONBody = 128 << 10

// Validator is implemented by request types. Valid returns a problem per
// invalid field, or nil.
type Validator interface {
	Valid() map[string]string
}

// Decode reads a JSON body of at most MaxJSONBody bytes into a T, rejecting
// unknown fields and trailing data, and validates it when T implements
// Validator. An empty body decodes as the zero T.
func Decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	body := http.MaxBytesReader(w, r.Body, MaxJSONBody)
	if err := DecodeJSON(body, &v); err != nil {
		return v, err
	}
	if val, ok := any(&v).(Validator); ok {
		if problems := val.Valid(); len(problems) > 0 {
			return v, errcode.InvalidFields(problems)
		}
	}
	return v, nil
}

// DecodeJSON decodes one JSON value from r into v strictly. It is the
// decoder every request path shares (and the fuzz target). Besides what
// encoding/json refuses, and unknown fields and data after the value, it
// refuses what encoding/json would quietly accept (see checkStrict): a
// member name twice in one object (body_duplicate_field), a field name in
// the wrong case (body_field_case), and strings that are not valid UTF-8
// (body_invalid_utf8), each naming the field in the message and problems.
// It reads all of r: callers cap it (http.MaxBytesReader).
func DecodeJSON(r io.Reader, v any) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return decodeError(err)
	}
	if err := checkStrict(body, reflect.TypeOf(v)); err != nil {
		return decodeError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return decodeError(err)
	}
	return nil
}

// decodeError classifies an error from reading or decoding a body.
func decodeError(err error) error {
	if e := new(errcode.Error); errors.As(err, &e) {
		return e
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errcode.BodyTooLarge.New("request body is larger than %d bytes", tooBig.Limit)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errcode.BodyInvalid.New("request body is not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		return errcode.BodyInvalid.New("request body must be %s, not %s", jsonType(typ.Type), typ.Value)
	case errors.As(err, &typ):
		return errcode.BodyInvalid.New("field %q must be %s, not %s", typ.Field, jsonType(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return errcode.BodyInvalid.New("request body has an %s", strings.TrimPrefix(err.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errcode.BodyInvalid.New("request body is truncated JSON")
	}
	return errcode.BodyInvalid.New("request body: %s", err.Error())
}

// jsonType names the JSON form of t for messages: clients write JSON, so
// "an object" tells them more than "apitype.CreateSandboxRequest".
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a %d-bit integer", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a non-negative %d-bit integer", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}

// Encode writes v as JSON with status.
func Encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		// The status is out; all we can do is stop writing.
		return
	}
}

// QueryInt reads the non-negative integer query parameter name of v: dflt
// when it is absent, at most maxV (a larger value is clamped, as a wait
// or a window may be asked for generously). Anything else is a
// query_invalid error naming the parameter.
func QueryInt(v url.Values, name string, dflt, maxV int64) (int64, error) {
	s := v.Get(name)
	if s == "" {
		return dflt, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errcode.QueryInvalid.New("%s must be a non-negative integer", name)
	}
	return min(n, maxV), nil
}
