package jobspec

import (
	"strings"
	"testing"
)

// TestParseOptions: options decode as strictly as request bodies, and an
// unknown name comes with the option it was likely meant to be.
func TestParseOptions(t *testing.T) {
	for _, tt := range []struct {
		raw, want string // want: a substring of the error; "" for none
	}{
		{`{"paper":"A4","scale":1.5}`, ""},
		{`null`, ""},
		{`{"papr":"A4"}`, `unknown field "papr"; did you mean "paper"?`},
		{`{"landscpe":true}`, `did you mean "landscape"?`},
		{`{"background":true}`, `did you mean "print_background"?`},
		{`{"zzzzzz":1}`, `unknown field "zzzzzz"`},
		{`{"Scale":1}`, `"Scale"`},
		{`{"scale":1,"scale":2}`, `"scale"`},
		{"{\"paper\":\"A4\xff\"}", `UTF-8`},
		{`{"scale":"big"}`, `"scale"`},
	} {
		o, err := ParseOptions([]byte(tt.raw))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ParseOptions(%s) = %v, want it accepted", tt.raw, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ParseOptions(%s) = %+v, %v; want an error with %s", tt.raw, o, err, tt.want)
		case tt.want != "" && strings.Contains(err.Error(), "did you mean") != strings.Contains(tt.want, "did you mean"):
			t.Errorf("ParseOptions(%s) = %v; a suggestion only where one is near", tt.raw, err)
		}
	}
	if o, _ := ParseOptions([]byte(`{"paper":"A4","scale":1.5}`)); o.Paper != "A4" || o.Scale != 1.5 {
		t.Errorf("decoded %+v", o)
	}
}
