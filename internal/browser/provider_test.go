package browser

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
)

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	k := Secret("sk-very-secret")
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "key", k, "cfg", SteelConfig{APIKey: k})
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%s %v %+v %#v", k, k, SteelConfig{APIKey: k}, BrowserbaseConfig{APIKey: k}), logs.String()} {
		if strings.Contains(s, "sk-very-secret") || !strings.Contains(s, "REDACTED") {
			t.Errorf("printed secret = %q, want REDACTED only", s)
		}
	}
	if string(k) != "sk-very-secret" { // positive control: the value is there to send
		t.Errorf("string(secret) = %q", string(k))
	}
}

func TestSteelID(t *testing.T) {
	t.Parallel()
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := steelID("brs_a"), steelID("brs_b")
	if !uuid.MatchString(a) || !uuid.MatchString(b) || a == b || steelID("brs_a") != a {
		t.Errorf("steelID = %q, %q: want distinct, stable version-4 UUIDs", a, b)
	}
}

func TestCheckConnectURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, api string
		ok       bool
	}{
		{"wss://connect.example?signingKey=x", "https://api.example", true},
		{"ws://connect.example?signingKey=x", "https://api.example", false},
		{"ws://127.0.0.1:9/connect?x=1", "http://127.0.0.1:9", true},
		{"https://connect.example", "https://api.example", false},
		{"", "https://api.example", false},
	} {
		if err := checkConnectURL("p", tc.url, tc.api); (err == nil) != tc.ok {
			t.Errorf("checkConnectURL(%q, %q) = %v, want ok %v", tc.url, tc.api, err, tc.ok)
		}
	}
}

func TestValidProviderRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		req     apitype.CreateBrowserSessionRequest
		field   string // "" for valid
		mode    string
		problem string
	}{
		{"provider alone", apitype.CreateBrowserSessionRequest{Provider: "steel"}, "", apitype.BrowserModeRemote, ""},
		{"remote provider", apitype.CreateBrowserSessionRequest{Mode: "remote", Provider: "browserbase"}, "", apitype.BrowserModeRemote, ""},
		{"plain cdp_url", apitype.CreateBrowserSessionRequest{Mode: "remote", CDPURL: "ws://127.0.0.1:1/x"}, "", apitype.BrowserModeRemote, ""},
		{"provider and url", apitype.CreateBrowserSessionRequest{Mode: "remote", Provider: "steel", CDPURL: "wss://x"}, "cdp_url", "", "not both"},
		{"unknown provider", apitype.CreateBrowserSessionRequest{Provider: "browserless"}, "provider", "", "browserbase or steel"},
		{"provider in process mode", apitype.CreateBrowserSessionRequest{Mode: "process", Provider: "steel"}, "provider", "", "mode remote"},
		{"remote without either", apitype.CreateBrowserSessionRequest{Mode: "remote"}, "cdp_url", "", "or a provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			p := validSessionRequest(&req)
			switch {
			case tc.field == "" && len(p) > 0, tc.field == "" && req.Mode != tc.mode:
				t.Errorf("validSessionRequest(%+v) = %v, mode %q; want valid, mode %q", tc.req, p, req.Mode, tc.mode)
			case tc.field != "" && !strings.Contains(p[tc.field], tc.problem):
				t.Errorf("validSessionRequest(%+v) = %v; want %s: ...%s...", tc.req, p, tc.field, tc.problem)
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	t.Parallel()
	if u, err := baseURL("", DefaultSteelURL); u != DefaultSteelURL || err != nil {
		t.Errorf("baseURL default = %q, %v", u, err)
	}
	if u, err := baseURL("http://127.0.0.1:8080/", ""); u != "http://127.0.0.1:8080" || err != nil {
		t.Errorf("baseURL(local) = %q, %v", u, err)
	}
	for _, bad := range []string{"ftp://x", "https://user:pw@x", "https://x?apiKey=1", "x", "https://"} {
		if _, err := baseURL(bad, ""); err == nil || strings.Contains(err.Error(), "pw@") || strings.Contains(err.Error(), "apiKey=1") {
			t.Errorf("baseURL(%q) = %v, want an error without its credential", bad, err)
		}
	}
}

// FuzzScrubSecrets: what scrubSecrets returns never holds the secret
// (unless the secret is part of the marker it leaves).
func FuzzScrubSecrets(f *testing.F) {
	f.Add("could not dial \"wss://c.example?apiKey=sk%2Fab+c&x=1\"", "sk/ab c")
	f.Add("key key key", "key ")
	f.Fuzz(func(t *testing.T, s, secret string) {
		out := scrubSecrets(s, secret)
		if len(secret) >= 4 && !strings.ContainsAny(secret, "REDACT") && strings.Contains(out, secret) {
			t.Errorf("scrubSecrets(%q, %q) = %q holds the secret", s, secret, out)
		}
	})
}
