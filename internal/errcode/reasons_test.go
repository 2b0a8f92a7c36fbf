package errcode_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/errcode"
)

// TestReasons: every declared reason has a name clients can match, once,
// and a code of the list; an error made from it carries both. The
// control: Named finds a declared reason and not an undeclared one.
func TestReasons(t *testing.T) {
	seen := map[string]bool{}
	valid := regexp.MustCompile(`^([a-z][a-z0-9_]*|[A-Z][A-Z_]*)$`)
	for _, r := range errcode.Reasons {
		if !valid.MatchString(r.String()) {
			t.Errorf("reason %q: want lower_snake_case (or the seed's UPPER_CASE job health)", r)
		}
		if seen[r.String()] {
			t.Errorf("reason %q is declared twice", r)
		}
		seen[r.String()] = true
		if !strings.Contains(" "+joinCodes()+" ", " "+string(r.Code())+" ") {
			t.Errorf("reason %q has code %q, not one of errcode.All", r, r.Code())
		}
		e := r.New("x %d", 1)
		if e.Code != r.Code() || e.Reason != r.String() || e.Message != "x 1" || !errcode.Has(e, r) {
			t.Errorf("%s.New = %+v", r, e)
		}
	}
	if len(errcode.Reasons) < 100 {
		t.Errorf("%d reasons declared, want them all", len(errcode.Reasons))
	}
	if r, ok := errcode.Named("sandbox_limit"); !ok || r != errcode.SandboxLimit {
		t.Errorf(`Named("sandbox_limit") = %v, %v`, r, ok)
	}
	if _, ok := errcode.Named("no_such_reason"); ok {
		t.Error(`Named("no_such_reason") found one`)
	}
}

func joinCodes() string {
	var s []string
	for _, c := range errcode.All {
		s = append(s, string(c))
	}
	return strings.Join(s, " ")
}

// TestReasonsDocumented: docs/api.md names every reason the code declares
// (as `reason`), so a client can look each one up. The control: a name
// that is not a reason is not found by the same match.
func TestReasonsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	documented := func(name string) bool { return strings.Contains(doc, "`"+name+"`") }
	for _, r := range errcode.Reasons {
		if !documented(r.String()) {
			t.Errorf("docs/api.md does not name reason `%s` (%s)", r, r.Code())
		}
	}
	if documented("no_such_reason_anywhere") {
		t.Error("control: an undeclared name counts as documented")
	}
}
