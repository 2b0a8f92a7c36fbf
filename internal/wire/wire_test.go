package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

func TestEveryCodeHasAStatus(t *testing.T) {
	t.Parallel()
	seen := map[int]errcode.Code{}
	for _, c := range errcode.All {
		s, ok := statuses[c]
		if !ok {
			t.Errorf("statuses[%q] missing: Status(%q) falls back to 500", c, c)
			continue
		}
		if s < 400 || s > 599 {
			t.Errorf("Status(%q) = %d, want a 4xx or 5xx", c, s)
		}
		// Clients map statuses back to codes, so no two codes share one.
		if other, dup := seen[s]; dup {
			t.Errorf("Status(%q) = %d, the same as Status(%q)", c, s, other)
		}
		seen[s] = c
		if got := codeForStatus(s); got != c {
			t.Errorf("codeForStatus(%d) = %q, want %q", s, got, c)
		}
	}
	if len(statuses) != len(errcode.All) {
		t.Errorf("len(statuses) = %d, want %d (one per code in errcode.All)", len(statuses), len(errcode.All))
	}
	if got := Status("no_such_code"); got != http.StatusInternalServerError {
		t.Errorf("Status(no_such_code) = %d, want 500", got)
	}
}

func TestWriteErrorRoundTrip(t *testing.T) {
	t.Parallel()
	cause := errors.New("open /var/lib/berth/secret.db: disk I/O error")
	tests := []struct {
		name    string
		err     error
		want    *errcode.Error
		wantLog bool // 5xx: logged once, with the cause
	}{
		{"not found", errcode.New(errcode.NotFound, "sandbox %q not found", "sbx_1"),
			&errcode.Error{Code: errcode.NotFound, Message: `sandbox "sbx_1" not found`}, false},
		{"reason", errcode.BodyInvalid.New("request body is truncated JSON"),
			&errcode.Error{Code: errcode.Invalid, Reason: "body_invalid", Message: "request body is truncated JSON"}, false},
		{"problems", errcode.InvalidFields(map[string]string{"timeout_ms": "must not be negative", "env.A": "bad"}),
			&errcode.Error{Code: errcode.Invalid, Message: "request is invalid",
				Problems: map[string]string{"timeout_ms": "must not be negative", "env.A": "bad"}}, false},
		{"too large", errcode.BodyTooLarge.New("too big"),
			&errcode.Error{Code: errcode.PayloadTooLarge, Reason: "body_too_large", Message: "too big"}, false},
		{"wrapped", fmt.Errorf("creating: %w", errcode.NameTaken.New("taken")),
			&errcode.Error{Code: errcode.Conflict, Reason: "name_taken", Message: "taken"}, false},
		{"unavailable with cause", errcode.Wrap(errcode.Unavailable, cause, "database is not answering"),
			&errcode.Error{Code: errcode.Unavailable, Message: "database is not answering"}, true},
		{"internal without message", &errcode.Error{Code: errcode.Internal, Err: cause},
			&errcode.Error{Code: errcode.Internal, Message: "internal error"}, true},
		{"plain error", fmt.Errorf("querying: %w", cause),
			&errcode.Error{Code: errcode.Internal, Message: "internal error"}, true},
		{"canceled", fmt.Errorf("waiting: %w", context.Canceled),
			&errcode.Error{Code: errcode.Canceled, Message: "request canceled"}, false},
		{"deadline", context.DeadlineExceeded,
			&errcode.Error{Code: errcode.DeadlineExceeded, Message: "deadline exceeded"}, true},
	}
	for _, code := range errcode.All {
		tests = append(tests, struct {
			name    string
			err     error
			want    *errcode.Error
			wantLog bool
		}{"code " + string(code), errcode.New(code, "m"), &errcode.Error{Code: code, Message: "m"}, Status(code) >= 500})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logBuf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
			WriteError(rec, req, log, tt.err, "req_abc")
			resp := rec.Result()

			if got, want := resp.StatusCode, Status(tt.want.Code); got != want {
				t.Errorf("WriteError(%v) status = %d, want %d", tt.err, got, want)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("WriteError(%v) Content-Type = %q, want application/json", tt.err, got)
			}
			body := rec.Body.String()
			var eb apitype.ErrorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error.RequestID != "req_abc" {
				t.Errorf("WriteError(%v) body = %s, want JSON with request_id req_abc", tt.err, body)
			}
			if strings.Contains(body, "/var/lib/berth") || strings.Contains(body, "disk I/O") {
				t.Errorf("WriteError(%v) body = %s, shows the internal cause", tt.err, body)
			}
			logged := strings.Count(logBuf.String(), "request failed")
			if tt.wantLog && (logged != 1 || !strings.Contains(logBuf.String(), "req_abc")) {
				t.Errorf("WriteError(%v) logged %d times:\n%s\nwant once, with the request id", tt.err, logged, logBuf.String())
			}
			if !tt.wantLog && logged != 0 {
				t.Errorf("WriteError(%v) logged a client error:\n%s", tt.err, logBuf.String())
			}

			got := ErrorFromResponse(resp)
			want := *tt.want
			want.RequestID = "req_abc" // the client keeps the server's request id
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("ErrorFromResponse(WriteError(%v)) mismatch (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestWriteErrorNilLogger(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest(http.MethodGet, "/", nil), nil, errors.New("boom"), "req_1")
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("WriteError(nil logger) status = %d, want 500", rec.Code)
	}
}

func TestErrorFromForeignResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		want    errcode.Code
		wantMsg string
	}{
		{"proxy html", http.StatusBadGateway, "<html>bad gateway</html>", errcode.Unavailable, "HTTP 502: <html>bad gateway</html>"},
		{"mux 404", http.StatusNotFound, "404 page not found\n", errcode.NotFound, "HTTP 404: 404 page not found\n"},
		{"mux 405", http.StatusMethodNotAllowed, "Method Not Allowed\n", errcode.Invalid, "HTTP 405: Method Not Allowed\n"},
		{"header too large", http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large", errcode.PayloadTooLarge, "HTTP 431: 431 Request Header Fields Too Large"},
		{"teapot", http.StatusTeapot, "", errcode.Invalid, "HTTP 418"},
		{"unknown 5xx", 599, "", errcode.Unavailable, "HTTP 599"},
		{"long body", http.StatusInternalServerError, strings.Repeat("x", 600), errcode.Internal, "HTTP 500"},
		{"JSON without a code", http.StatusForbidden, `{"error":{"message":"no"}}`, errcode.PermissionDenied, `HTTP 403: {"error":{"message":"no"}}`},
		{"other JSON", http.StatusUnauthorized, `{"message":"no"}`, errcode.Unauthenticated, `HTTP 401: {"message":"no"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))}
			err := ErrorFromResponse(resp)
			var e *errcode.Error
			if !errors.As(err, &e) {
				t.Fatalf("ErrorFromResponse(%d %q) = %T, want *errcode.Error", tt.status, tt.body, err)
			}
			if e.Code != tt.want || e.Message != tt.wantMsg {
				t.Errorf("ErrorFromResponse(%d %q) = %q %q, want %q %q", tt.status, tt.body, e.Code, e.Message, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    apitype.CreateCommandRequest
		wantErr string // "" for success, else "code reason: message substring"
	}{
		{"empty body", "", apitype.CreateCommandRequest{}, ""},
		{"whitespace", " \n\t", apitype.CreateCommandRequest{}, ""},
		{"empty object", "{}", apitype.CreateCommandRequest{}, ""},
		{"null", "null", apitype.CreateCommandRequest{}, ""},
		{"full", `{"command":"echo hi","cwd":"sub","env":{"A":"1"},"timeout_ms":1000,"stdin":"x","stdin_open":true}`,
			apitype.CreateCommandRequest{Command: "echo hi", Cwd: "sub", Env: map[string]string{"A": "1"}, TimeoutMS: 1000, Stdin: "x", StdinOpen: true}, ""},
		{"argv", `{"argv":["ls","-l"]}`, apitype.CreateCommandRequest{Argv: []string{"ls", "-l"}}, ""},
		{"trailing whitespace", "{\"command\":\"x\"}\n\n", apitype.CreateCommandRequest{Command: "x"}, ""},
		{"negative timeout decodes", `{"timeout_ms":-1}`, apitype.CreateCommandRequest{TimeoutMS: -1}, ""},
		{"escaped unicode", `{"command":"\u00e9"}`, apitype.CreateCommandRequest{Command: "é"}, ""},

		{"truncated", `{"command":`, apitype.CreateCommandRequest{}, "invalid body_invalid: truncated JSON"},
		{"open brace", `{`, apitype.CreateCommandRequest{}, "invalid body_invalid: truncated JSON"},
		{"syntax", `{"command" "x"}`, apitype.CreateCommandRequest{}, "invalid body_invalid: not valid JSON (at byte"},
		{"single quotes", `{'command':'x'}`, apitype.CreateCommandRequest{}, "invalid body_invalid: not valid JSON"},
		{"binary", "\x00\xff\xfe", apitype.CreateCommandRequest{}, "invalid body_invalid: not valid JSON"},
		{"unknown field", `{"comand":"x"}`, apitype.CreateCommandRequest{}, `invalid body_invalid: unknown field "comand"`},
		{"second value", `{"command":"x"}{"command":"y"}`, apitype.CreateCommandRequest{}, "invalid body_invalid: data after the JSON value"},
		{"second value after space", `{} []`, apitype.CreateCommandRequest{}, "invalid body_invalid: data after the JSON value"},
		{"trailing garbage", `{"command":"x"} garbage`, apitype.CreateCommandRequest{}, "invalid body_invalid: not valid JSON"},
		{"string for int", `{"timeout_ms":"10"}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "timeout_ms" must be a 64-bit integer, not string`},
		{"float for int", `{"timeout_ms":1.5}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "timeout_ms" must be a 64-bit integer, not number 1.5`},
		{"exponent for int", `{"timeout_ms":1e12}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "timeout_ms" must be a 64-bit integer`},
		{"int overflow", `{"timeout_ms":9223372036854775808}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "timeout_ms" must be a 64-bit integer`},
		{"number for string", `{"command":1}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "command" must be a string, not number`},
		{"string for array", `{"argv":"ls"}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "argv" must be an array, not string`},
		{"array for map", `{"env":["A=1"]}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "env" must be an object, not array`},
		{"string for bool", `{"stdin_open":"yes"}`, apitype.CreateCommandRequest{}, `invalid body_invalid: field "stdin_open" must be a boolean, not string`},
		{"array body", `[]`, apitype.CreateCommandRequest{}, "invalid body_invalid: request body must be an object, not array"},
		{"string body", `"echo hi"`, apitype.CreateCommandRequest{}, "invalid body_invalid: request body must be an object, not string"},
		{"deep nesting", strings.Repeat("[", 20000), apitype.CreateCommandRequest{}, "invalid body_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got apitype.CreateCommandRequest
			err := DecodeJSON(strings.NewReader(tt.in), &got)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("DecodeJSON(%q) = %v, want nil", tt.in, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("DecodeJSON(%q) mismatch (-want +got):\n%s", tt.in, diff)
				}
				return
			}
			var e *errcode.Error
			if !errors.As(err, &e) {
				t.Fatalf("DecodeJSON(%q) = %v (%T), want *errcode.Error", tt.in, err, err)
			}
			code, rest, _ := strings.Cut(tt.wantErr, " ")
			reason, msg, _ := strings.Cut(rest, ": ")
			if string(e.Code) != code || e.Reason != reason || !strings.Contains(e.Message, msg) {
				t.Errorf("DecodeJSON(%q) = %s %s: %q, want %s %s: containing %q", tt.in, e.Code, e.Reason, e.Message, code, reason, msg)
			}
			for _, leak := range []string{"apitype.", "int64", "[]string", "map[string]string"} {
				if strings.Contains(e.Message, leak) {
					t.Errorf("DecodeJSON(%q) message %q names the Go type %q", tt.in, e.Message, leak)
				}
			}
		})
	}
}

// strictReasons are the reasons DecodeJSON refuses a body with.
var strictReasons = map[string]bool{"body_invalid": true, "body_duplicate_field": true, "body_field_case": true, "body_invalid_utf8": true}

// embedded has a promoted field, for the strict name check.
type embedded struct {
	Inner
	Own string `json:"own"`
}

type Inner struct {
	Deep   string `json:"deep"`
	Untagd string
}

// TestDecodeJSONStrict: what encoding/json alone would accept silently (a
// repeated member, a name in the wrong case, invalid UTF-8 and lone
// surrogate escapes) is refused with a reason that names the field, at any
// depth; the same bodies made valid (the controls) decode.
func TestDecodeJSONStrict(t *testing.T) {
	t.Parallel()
	cmd := func() any { return new(apitype.CreateCommandRequest) }
	build := func() any { return new(apitype.BuildTemplateRequest) }
	job := func() any { return new(apitype.CreateJobRequest) }
	sbx := func() any { return new(apitype.CreateSandboxRequest) }
	emb := func() any { return new(embedded) }
	anyv := func() any { return new(any) }
	tests := []struct {
		name    string
		to      func() any
		in      string
		reason  string // "" for success
		field   string // the problem's field
		message string // a substring of the message
	}{
		// Repeated members: the last would win.
		{"duplicate", cmd, `{"command":"echo first","command":"echo second"}`, "body_duplicate_field", "command", `field "command" more than once`},
		{"duplicate by escape", cmd, `{"command":"a","\u0063ommand":"b"}`, "body_duplicate_field", "command", ""},
		{"duplicate in a map", cmd, `{"env":{"A":"1","A":"2"}}`, "body_duplicate_field", "env.A", `"env.A"`},
		{"duplicate in a struct in an array", build, `{"name":"x","steps":[{"run":"a"},{"run":"b","run":"c"}]}`, "body_duplicate_field", "steps[1].run", ""},
		{"duplicate deeper", build, `{"steps":[{"copy":{"path":"a","path":"b"}}]}`, "body_duplicate_field", "steps[0].copy.path", ""},
		{"duplicate in raw options", job, `{"action":"a","options":{"scale":1,"scale":2}}`, "body_duplicate_field", "options.scale", ""},
		{"duplicate in any", anyv, `[{"a":{"b":1,"b":2}}]`, "body_duplicate_field", "[0].a.b", ""},
		{"duplicate unknown field", cmd, `{"x":1,"x":2}`, "body_duplicate_field", "x", ""},
		{"control: same name in two objects", build, `{"name":"x","steps":[{"run":"a"},{"run":"b"}]}`, "", "", ""},
		{"control: map keys differing in case", cmd, `{"env":{"A":"1","a":"2"}}`, "", "", ""},

		// Names in another case: encoding/json would take them.
		{"case", sbx, `{"Runtime":"process"}`, "body_field_case", "Runtime", `write "runtime"`},
		{"case upper", cmd, `{"COMMAND":"x"}`, "body_field_case", "COMMAND", ""},
		{"case nested", build, `{"steps":[{"Run":"x"}]}`, "body_field_case", "steps[0].Run", `write "run"`},
		{"case deeper", build, `{"steps":[{"copy":{"Path":"a"}}]}`, "body_field_case", "steps[0].copy.Path", ""},
		{"case by Unicode folding", cmd, `{"\u017ftdin":"x"}`, "body_field_case", "ſtdin", `write "stdin"`}, // ſ folds to s
		{"case of a promoted field", emb, `{"Deep":"x"}`, "body_field_case", "Deep", `write "deep"`},
		{"case of an untagged field", emb, `{"untagd":"x"}`, "body_field_case", "untagd", `write "Untagd"`},
		{"control: promoted and untagged fields", emb, `{"deep":"x","Untagd":"y","own":"z"}`, "", "", ""},
		{"control: map keys are free", cmd, `{"env":{"Command":"x","COMMAND":"y"}}`, "", "", ""},
		{"control: raw options are free", job, `{"action":"a","options":{"Scale":1}}`, "", "", ""},
		{"control: unknown stays body_invalid", cmd, `{"comand":"x"}`, "body_invalid", "", `unknown field "comand"`},

		// Strings that are not Unicode text: U+FFFD would take their place.
		{"invalid UTF-8", cmd, "{\"command\":\"echo \xff\"}", "body_invalid_utf8", "command", `"command" is not valid UTF-8`},
		{"truncated UTF-8", cmd, "{\"cwd\":\"\xe2\x82\"}", "body_invalid_utf8", "cwd", ""},
		{"overlong UTF-8", cmd, "{\"cwd\":\"\xc0\xaf\"}", "body_invalid_utf8", "cwd", ""},
		{"UTF-8 surrogate", cmd, "{\"cwd\":\"\xed\xa0\x80\"}", "body_invalid_utf8", "cwd", ""},
		{"invalid UTF-8 in a map value", cmd, "{\"env\":{\"A\":\"\xff\"}}", "body_invalid_utf8", "env.A", ""},
		{"invalid UTF-8 in an array", cmd, "{\"argv\":[\"ls\",\"\xff\"]}", "body_invalid_utf8", "argv[1]", ""},
		{"invalid UTF-8 in a name", cmd, "{\"env\":{\"\xff\":\"1\"}}", "body_invalid_utf8", "env", "field name"},
		{"lone high surrogate", cmd, `{"command":"\ud800"}`, "body_invalid_utf8", "command", `\ud800`},
		{"lone high surrogate then text", cmd, `{"command":"\ud800abcdef"}`, "body_invalid_utf8", "command", ""},
		{"high surrogate then another high", cmd, `{"command":"\ud800\ud800"}`, "body_invalid_utf8", "command", ""},
		{"lone low surrogate", cmd, `{"command":"\uDC00"}`, "body_invalid_utf8", "command", `\udc00`},
		{"invalid UTF-8 top level", anyv, "\"\xff\"", "body_invalid_utf8", "", ""},
		{"control: surrogate pair", cmd, `{"command":"\ud83d\ude00"}`, "", "", ""},
		{"control: escaped backslash before u", cmd, `{"command":"\\ud800"}`, "", "", ""},
		{"control: U+FFFD itself", cmd, "{\"command\":\"\xef\xbf\xbd \\ufffd\"}", "", "", ""},
		{"control: multi-byte UTF-8", cmd, `{"command":"échø 日本 😀"}`, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := DecodeJSON(strings.NewReader(tt.in), tt.to())
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("DecodeJSON(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.Invalid || e.Reason != tt.reason || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("DecodeJSON(%q) = %v, want invalid %s containing %q", tt.in, err, tt.reason, tt.message)
			}
			if tt.field != "" && e.Problems[tt.field] == "" {
				t.Errorf("DecodeJSON(%q) problems = %v, want one for %q", tt.in, e.Problems, tt.field)
			}
		})
	}
}

// TestDecodeJSONStrictValue: a body the strict checks pass decodes as
// encoding/json decodes it.
func TestDecodeJSONStrictValue(t *testing.T) {
	t.Parallel()
	in := `{"name":"t","steps":[{"run":"a \ud83d\ude00","timeout_ms":5},{"copy":{"path":"p","content_base64":"eA==","mode":420}}],"env":{"A":"1","a":"2"}}`
	var got, want apitype.BuildTemplateRequest
	if err := DecodeJSON(strings.NewReader(in), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DecodeJSON(%s) mismatch (-json.Unmarshal +DecodeJSON):\n%s", in, diff)
	}
}

// valid is a request type with validation, for Decode.
type valid struct {
	N int `json:"n"`
}

func (v *valid) Valid() map[string]string {
	if v.N < 0 {
		return map[string]string{"n": "must not be negative"}
	}
	return nil
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		body         string
		want         valid
		wantCode     errcode.Code
		wantReason   string
		wantProblems map[string]string
	}{
		{"ok", `{"n":3}`, valid{N: 3}, "", "", nil},
		{"empty", ``, valid{}, "", "", nil},
		{"just under the cap", `{"n":1}` + strings.Repeat(" ", MaxJSONBody-len(`{"n":1}`)), valid{N: 1}, "", "", nil},
		{"over the cap", `{"n":1}` + strings.Repeat(" ", MaxJSONBody), valid{}, errcode.PayloadTooLarge, "body_too_large", nil},
		{"over the cap in a string", `{"n":"` + strings.Repeat("a", MaxJSONBody), valid{}, errcode.PayloadTooLarge, "body_too_large", nil},
		{"invalid field", `{"n":-1}`, valid{}, errcode.Invalid, "", map[string]string{"n": "must not be negative"}},
		{"malformed", `{"n":`, valid{}, errcode.Invalid, "body_invalid", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			got, err := Decode[valid](rec, req)
			if tt.wantCode == "" {
				if err != nil || got != tt.want {
					t.Errorf("Decode(%.40q) = %+v, %v, want %+v, nil", tt.body, got, err, tt.want)
				}
				return
			}
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != tt.wantCode || e.Reason != tt.wantReason {
				t.Fatalf("Decode(%.40q) = %v, want %s %s", tt.body, err, tt.wantCode, tt.wantReason)
			}
			if diff := cmp.Diff(tt.wantProblems, e.Problems); diff != "" {
				t.Errorf("Decode(%.40q) problems (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

// FuzzDecodeJSON feeds arbitrary bytes to the decoder every request body
// goes through. It must not panic; it fails only with invalid or
// payload_too_large *errcode.Error values; and what it accepts survives a
// round trip through encoding/json unchanged.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"command":"echo hi","timeout_ms":1000}`, `{"argv":["a","b"],"env":{"A":"1"}}`,
		`{"runtime":"process","name":"x","labels":{"k":"v"}}`, `{"command":`, `[]`, `{"a":1}`, `{} {}`,
		`{"timeout_ms":1e12}`, `{"timeout_ms":-1}`, `{"name":"\ud800"}`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(what string, v any, limit int64) {
			var r io.Reader = bytes.NewReader(data)
			if limit > 0 {
				r = http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(r), limit)
			}
			err := DecodeJSON(r, v)
			if err != nil {
				var e *errcode.Error
				if !errors.As(err, &e) {
					t.Fatalf("DecodeJSON(%q, %s) = %v (%T), want *errcode.Error", data, what, err, err)
				}
				switch {
				case e.Code == errcode.Invalid && strictReasons[e.Reason]:
				case e.Code == errcode.PayloadTooLarge && limit > 0 && int64(len(data)) > limit:
				default:
					t.Fatalf("DecodeJSON(%q, %s) = %v, want invalid with a strict reason or (over %d bytes) payload_too_large", data, what, err, limit)
				}
				return
			}
			// Accepted: encoding and decoding again gives the same value.
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("json.Marshal(DecodeJSON(%q, %s)): %v", data, what, err)
			}
			again := newLike(v)
			if err := DecodeJSON(bytes.NewReader(b), again); err != nil {
				t.Fatalf("DecodeJSON(%s) of re-encoded %q: %v", what, b, err)
			}
			if diff := cmp.Diff(v, again, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("DecodeJSON(%q, %s) round trip changed it (-first +again):\n%s", data, what, diff)
			}
		}
		for _, limit := range []int64{0, 32} {
			check("CreateCommandRequest", new(apitype.CreateCommandRequest), limit)
			check("CreateSandboxRequest", new(apitype.CreateSandboxRequest), limit)
		}
	})
}

func newLike(v any) any {
	switch v.(type) {
	case *apitype.CreateCommandRequest:
		return new(apitype.CreateCommandRequest)
	case *apitype.CreateSandboxRequest:
		return new(apitype.CreateSandboxRequest)
	}
	panic(fmt.Sprintf("newLike(%T)", v))
}
