package browser

import (
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
)

// TestJournalSummary: what the journal keeps of an action, and never its
// secrets.
func TestJournalSummary(t *testing.T) {
	t.Parallel()
	nth := 2
	for _, tc := range []struct {
		name string
		a    apitype.BrowserAction
		want string
	}{
		{"navigate", apitype.BrowserAction{Op: "navigate", URL: "https://u:pw@example.com/a/b?token=s3cret#frag"}, "url=https://example.com/a/b"},
		{"fill", apitype.BrowserAction{Op: "fill", Selector: "#pw", Value: "s3cret", Lease: "lease-s3cret"}, "target=#pw value_chars=6"},
		{"type", apitype.BrowserAction{Op: "type", Target: &apitype.BrowserTarget{By: "label", Value: "Password"}, Value: "s3cret"}, `target=label:"Password" value_chars=6`},
		{"evaluate", apitype.BrowserAction{Op: "evaluate", Expression: "fetch('/x?k=s3cret')"}, "expression_bytes=20"},
		{"select", apitype.BrowserAction{Op: "select", Selector: "#plan", Values: []string{"s3cret", "b"}}, "target=#plan values=2"},
		{"upload", apitype.BrowserAction{Op: "upload", Selector: "#f", Files: []apitype.BrowserFile{{Name: "a.txt", ContentBase64: "czNjcmV0"}}}, "target=#f files=a.txt"},
		{"dialog", apitype.BrowserAction{Op: "dialog", Accept: true, PromptText: "s3cret"}, "accept=true"},
		{"role", apitype.BrowserAction{Op: "click", Target: &apitype.BrowserTarget{By: "role", Role: "button", Name: "Go", Nth: &nth}, TimeoutMS: 500}, `target=role:button/"Go"#2 timeout_ms=500`},
		{"long", apitype.BrowserAction{Op: "navigate", URL: "https://example.com/" + strings.Repeat("é", 400)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := journalSummary(tc.a)
			if strings.Contains(got, "s3cret") || strings.Contains(got, "frag") || strings.Contains(got, "pw@") {
				t.Errorf("journalSummary(%+v) = %q keeps a secret", tc.a, got)
			}
			if len(got) > maxSummary {
				t.Errorf("journalSummary = %d bytes, want at most %d", len(got), maxSummary)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("journalSummary(%+v) = %q, want %q", tc.a, got, tc.want)
			}
			if strings.ContainsRune(got, '\uFFFD') {
				t.Errorf("journalSummary cut a rune: %q", got)
			}
		})
	}
}

// TestCheckpointURL: http and https keep scheme, host and path only;
// everything else is about:blank.
func TestCheckpointURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8080/path?q=secret#frag":        "http://127.0.0.1:8080/path",
		"https://user:pass@example.com/a/b/?x=1":          "https://example.com/a/b/",
		"HTTPS://example.com":                             "https://example.com",
		"about:blank":                                     "about:blank",
		"data:text/html,<b>hi</b>":                        "about:blank",
		"chrome-error://chromewebdata/":                   "about:blank",
		"file:///etc/passwd":                              "about:blank",
		"http://example.com/" + strings.Repeat("a", 3000): "http://example.com/",
		"::not a url":                                     "about:blank",
	} {
		if got := CheckpointURL(in); got != want {
			t.Errorf("CheckpointURL(%.60q) = %q, want %q", in, got, want)
		}
	}
}
