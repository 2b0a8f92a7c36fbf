package httpapi

import (
	"strings"
	"testing"
	"time"
)

// FuzzLiveToken: a view link's token reads back as the session it was
// minted for; anything else, a minted token changed in any way included,
// is refused, and nothing panics.
func FuzzLiveToken(f *testing.F) {
	s := New(Config{PreviewSecret: []byte("fuzz-secret-0123456789abcdef")})
	exp := time.Now().Add(time.Hour).Unix()
	good := s.liveToken("brs_abc", exp)
	for _, seed := range []string{good, "", ".", "..", "brs_abc.1.x", "brs_abc." + good, strings.ToUpper(good), good + "a"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		id, _, err := s.readLiveToken(tok)
		if tok == good {
			if err != nil || id != "brs_abc" {
				t.Fatalf("readLiveToken(minted) = %q, %v", id, err)
			}
			return
		}
		if err == nil {
			t.Fatalf("readLiveToken(%q) accepted a token the daemon did not mint: %q", tok, id)
		}
	})
}

// TestLiveTokenBounds: a token of another daemon (another secret) or past
// its expiry is refused; the positive control, the same daemon's fresh
// token, is read.
func TestLiveTokenBounds(t *testing.T) {
	s := New(Config{PreviewSecret: []byte("secret-one")})
	other := New(Config{PreviewSecret: []byte("secret-two")})
	fresh := time.Now().Add(time.Minute).Unix()
	if id, _, err := s.readLiveToken(s.liveToken("brs_x", fresh)); err != nil || id != "brs_x" {
		t.Fatalf("readLiveToken(fresh) = %q, %v", id, err)
	}
	for name, tok := range map[string]string{
		"another daemon's": other.liveToken("brs_x", fresh),
		"expired":          s.liveToken("brs_x", time.Now().Add(-time.Second).Unix()),
	} {
		if _, _, err := s.readLiveToken(tok); err == nil {
			t.Errorf("readLiveToken(%s token) = nil error, want live_link_invalid", name)
		}
	}
}

// TestRedactLivePath: the request log never holds a view link's token.
func TestRedactLivePath(t *testing.T) {
	for in, want := range map[string]string{
		"/live/brs_x.1.sig":               "/live/REDACTED",
		"/live/brs_x.1.sig/ws":            "/live/REDACTED/ws",
		"/live/brs_x.1.sig/live.js":       "/live/REDACTED/live.js",
		"/v1/browser/sessions/brs_x/live": "/v1/browser/sessions/brs_x/live",
	} {
		if got := redactLivePath(in); got != want {
			t.Errorf("redactLivePath(%q) = %q, want %q", in, got, want)
		}
	}
}
