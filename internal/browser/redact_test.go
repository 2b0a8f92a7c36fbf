package browser_test

import (
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/browser"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://user:pw@10.0.0.1:8080/a/b?token=x#frag": "http://10.0.0.1:8080/a/b",
		"file:///etc/passwd":                            "file:///etc/passwd",
		"https://example.com":                           "https://example.com",
		"data:text/html,<script>":                       "data:",
		"ws://127.0.0.1:9/ws?q":                         "ws://127.0.0.1:9/ws",
		"http://[::1/":                                  "(unparsable URL)",
	} {
		if got := browser.RedactURL(in); got != want {
			t.Errorf("browser.RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"http://u:p@h/p?q#f", "file:///etc/passwd", "data:,x", "%", "http://h/" + strings.Repeat("a", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := browser.RedactURL(raw)
		if len(got) > browser.MaxRedactedURL {
			t.Errorf("browser.RedactURL(%q) is %d bytes, more than %d", raw, len(got), browser.MaxRedactedURL)
		}
		if strings.Contains(raw, "?secret") && strings.Contains(got, "?secret") {
			t.Errorf("browser.RedactURL(%q) = %q keeps the query", raw, got)
		}
	})
}
