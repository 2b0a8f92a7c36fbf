package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
	"github.com/berthdev/berth/internal/testenv/providerfake"
)

// providerDaemon starts a daemon whose only provider is a fake of kind,
// the fake's sessions being process sessions on that same daemon, and
// captures the daemon's log.
func providerDaemon(t *testing.T, kind string) (*testenv.Daemon, *providerfake.Fake, *lockedBuffer) {
	t.Helper()
	f := providerfake.New(t, kind)
	var p browser.Provider
	var err error
	switch kind {
	case providerfake.Browserbase:
		p, err = browser.NewBrowserbase(browser.BrowserbaseConfig{APIKey: browser.Secret(f.Key), ProjectID: f.ProjectID, BaseURL: f.URL})
	case providerfake.Steel:
		p, err = browser.NewSteel(browser.SteelConfig{APIKey: browser.Secret(f.Key), BaseURL: f.URL})
	}
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.BrowserProviders = map[string]browser.Provider{kind: p}
	})
	f.SetBackend(d.URL, d.Token)
	return d, f, logs
}

// postSession sends a raw body to POST /v1/browser/sessions.
func postSession(t *testing.T, d *testenv.Daemon, body string) (int, apitype.ErrorBody, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/browser/sessions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb apitype.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb, string(b)
}

// TestBrowserProviders drives a session at each remote provider through
// Berth (really a process session of the same daemon behind the
// provider's fake): open, navigate, snapshot, click, close and idle
// expiry release the provider session; a provider not configured, a
// request carrying credentials or a URL for a provider, and an unknown
// provider are refused; no credential reaches the log or an answer.
func TestBrowserProviders(t *testing.T) {
	t.Parallel()
	needChromium(t)
	for _, kind := range []string{providerfake.Browserbase, providerfake.Steel} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d, f, logs := providerDaemon(t, kind)
			base := pages(t)
			c := d.Client
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var answers bytes.Buffer // every answer, to look for the credential in

			s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeRemote, Provider: kind})
			if err != nil || s.Mode != apitype.BrowserModeRemote || s.Provider != kind || s.ProviderSessionID == "" || s.State != apitype.BrowserOpen {
				t.Fatalf("OpenBrowserSession(provider %s) = %+v, %v", kind, s, err)
			}
			json.NewEncoder(&answers).Encode(s)
			if created, released, running, refused := f.Counts(); created != 1 || released != 0 || running != 1 || refused != 0 {
				t.Errorf("after open the fake has created %d, released %d, running %d, refused %d; want 1, 0, 1, 0", created, released, running, refused)
			}
			var nav map[string]any
			act(t, c, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/form.html"}, &nav)
			var snap apitype.BrowserSnapshot
			act(t, c, s.ID, apitype.BrowserAction{Op: "snapshot"}, &snap)
			ref := regexp.MustCompile(`checkbox "Subscribe" \[ref=(e\d+)\]`).FindStringSubmatch(snap.YAML)
			if nav["status"] != float64(200) || snap.Title != "Sign up" || ref == nil {
				t.Fatalf("navigate = %v; snapshot title %q:\n%s", nav, snap.Title, snap.YAML)
			}
			act(t, c, s.ID, apitype.BrowserAction{Op: "click", Target: &apitype.BrowserTarget{By: "ref", Value: ref[1]}}, nil)
			if got := evalString(t, c, s.ID, `String(document.getElementById("sub").checked)`); got != "true" {
				t.Errorf("checkbox after click = %s, want true", got)
			}
			// The page really is in the backend's browser, reached through
			// the provider's connect URL.
			if !strings.Contains(strings.Join(f.Requests(), "\n"), "GET /connect") || f.BerthSession(s.ProviderSessionID) == "" {
				t.Errorf("the session did not go through the provider's connect URL: %v", f.Requests())
			}
			got, _ := c.BrowserSession(ctx, s.ID)
			list, _ := c.BrowserSessions(ctx)
			sys, _ := c.System(ctx)
			json.NewEncoder(&answers).Encode([]any{got, list, sys})
			if len(sys.Browser.Providers) != 1 || sys.Browser.Providers[0] != kind {
				t.Errorf("system browser providers = %v, want [%s]", sys.Browser.Providers, kind)
			}

			if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if created, released, running, _ := f.Counts(); created != 1 || released != 1 || running != 0 {
				t.Errorf("after close the fake has created %d, released %d, running %d; want 1, 1, 0", created, released, running)
			}

			// Idle expiry releases too.
			s2, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: kind, IdleTimeoutMS: 8000})
			if err != nil || s2.Mode != apitype.BrowserModeRemote {
				t.Fatalf("open without mode = %+v, %v; want a remote session", s2, err)
			}
			if !f.WaitRunning(0, 90*time.Second) {
				t.Error("the idle session's provider session was not released")
			}
			if created, released, _, _ := f.Counts(); created != 2 || released != 2 {
				t.Errorf("after idle expiry the fake has created %d, released %d; want 2, 2", created, released)
			}
			if _, err := c.BrowserSession(ctx, s2.ID); !errcode.Has(err, errcode.SessionNotFound) {
				t.Errorf("idle session = %v, want session_not_found", err)
			}

			// The provider ends a session on its own: Berth's session
			// crashes, and Berth releases it at once (a release of an ended
			// session is a success), not at idle expiry.
			s3, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: kind})
			if err != nil {
				t.Fatal(err)
			}
			f.EndSession(s3.ProviderSessionID)
			releaseReq := "POST /v1/sessions/" + s3.ProviderSessionID
			if kind == providerfake.Steel {
				releaseReq += "/release"
			}
			deadline := time.Now().Add(90 * time.Second)
			for !slices.Contains(f.Requests(), releaseReq) && time.Now().Before(deadline) {
				_ = c.BrowserAction(ctx, s3.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
				time.Sleep(200 * time.Millisecond)
			}
			err = c.BrowserAction(ctx, s3.ID, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
			if !errcode.Has(err, errcode.SessionCrashed) || !slices.Contains(f.Requests(), releaseReq) {
				t.Errorf("after the provider ended it: action = %v (want session_crashed), release sent %v", err,
					slices.Contains(f.Requests(), releaseReq))
			}
			_ = c.CloseBrowserSession(ctx, s3.ID)

			// Refusals, each beside the open above that succeeded.
			other := providerfake.Steel
			if kind == providerfake.Steel {
				other = providerfake.Browserbase
			}
			_, err = c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: other})
			if !errcode.Has(err, errcode.ProviderNotConfigured) || !strings.Contains(errcode.MessageOf(err), "--"+other+"-api-key-file") {
				t.Errorf("open at %s, not configured = %v, want provider_not_configured naming the flag", other, err)
			}
			for _, tc := range []struct{ body, field string }{
				{`{"mode":"remote","provider":"` + kind + `","api_key":"sk-from-the-request"}`, "api_key"},
				{`{"mode":"remote","provider":"` + kind + `","project_id":"sk-from-the-request"}`, "project_id"},
			} {
				status, eb, raw := postSession(t, d, tc.body)
				if status != http.StatusBadRequest || eb.Error.Reason != "body_invalid" || !strings.Contains(eb.Error.Message, tc.field) ||
					strings.Contains(raw, "sk-from-the-request") {
					t.Errorf("POST %s = %d %s; want 400 body_invalid naming %s without its value", tc.body, status, raw, tc.field)
				}
			}
			for _, tc := range []struct{ body, field string }{
				{`{"mode":"remote","provider":"` + kind + `","cdp_url":"wss://elsewhere.example/devtools"}`, "cdp_url"},
				{`{"mode":"remote","provider":"browserless"}`, "provider"},
				{`{"mode":"process","provider":"` + kind + `"}`, "provider"},
			} {
				status, eb, raw := postSession(t, d, tc.body)
				if status != http.StatusBadRequest || eb.Error.Problems[tc.field] == "" {
					t.Errorf("POST %s = %d %s; want 400 with a problem for %s", tc.body, status, raw, tc.field)
				}
			}
			if created, _, running, _ := f.Counts(); created != 3 || running != 0 {
				t.Errorf("refused requests reached the provider: created %d, running %d", created, running)
			}

			// Plain cdp_url remote mode keeps working: at a process
			// session's own browser.
			ps, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeProcess})
			if err != nil {
				t.Fatal(err)
			}
			port, err := os.ReadFile(filepath.Join(d.DataDir, "browser", "profile-"+ps.ID, "DevToolsActivePort"))
			lines := strings.Split(strings.TrimSpace(string(port)), "\n")
			if err != nil || len(lines) != 2 {
				t.Fatalf("DevToolsActivePort = %q, %v", port, err)
			}
			rs, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeRemote, CDPURL: "ws://127.0.0.1:" + lines[0] + lines[1]})
			if err != nil || rs.Provider != "" {
				t.Fatalf("remote session at a cdp_url = %+v, %v", rs, err)
			}
			act(t, c, rs.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/docs.html"}, nil)
			if got := evalString(t, c, rs.ID, `location.pathname`); got != "/docs.html" {
				t.Errorf("remote session at a cdp_url is at %q", got)
			}
			_ = c.CloseBrowserSession(ctx, rs.ID)
			_ = c.CloseBrowserSession(ctx, ps.ID)

			// The credential is nowhere to be seen; the log is the
			// daemon's (positive control: it names the provider session).
			for name, text := range map[string]string{"log": logs.String(), "answers": answers.String()} {
				for _, secret := range []string{f.Key, "signingKey=", "apiKey="} {
					if strings.Contains(text, secret) {
						t.Errorf("the %s holds %q", name, secret)
					}
				}
			}
			if !strings.Contains(logs.String(), "provider_session_id="+s.ProviderSessionID) {
				t.Errorf("the captured log does not name provider session %s: not the daemon's?", s.ProviderSessionID)
			}
		})
	}
}

// TestBrowserProviderUnknownOutcome makes the provider create a session
// and close the connection instead of answering: the open fails clearly,
// and Berth finds the session by its tag and releases it, at once or,
// when the look-up fails too, from the background.
func TestBrowserProviderUnknownOutcome(t *testing.T) {
	t.Parallel()
	needChromium(t)
	for _, kind := range []string{providerfake.Browserbase, providerfake.Steel} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d, f, logs := providerDaemon(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := d.Client

			f.DropNextCreates(1)
			_, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: kind})
			if !errcode.Has(err, errcode.ProviderFailed) || !strings.Contains(errcode.MessageOf(err), "did not answer") ||
				!strings.Contains(errcode.MessageOf(err), "was released") {
				t.Errorf("open whose answer is lost = %v; want provider_failed saying the session made was released", err)
			}
			if created, released, running, _ := f.Counts(); created != 1 || released != 1 || running != 0 {
				t.Errorf("after a lost answer the fake has created %d, released %d, running %d; want 1, 1, 0", created, released, running)
			}

			// The look-up fails too: the background releases it.
			f.DropNextCreates(1)
			f.FailNextFinds(2)
			_, err = c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: kind})
			if !errcode.Has(err, errcode.ProviderFailed) || !strings.Contains(errcode.MessageOf(err), "keeps trying") {
				t.Errorf("open whose answer and look-up fail = %v; want provider_failed saying Berth keeps trying", err)
			}
			if _, _, running, _ := f.Counts(); running != 1 {
				t.Errorf("the fake runs %d sessions before the retry, want 1", running)
			}
			if !f.WaitRunning(0, 60*time.Second) {
				t.Error("the session of the lost answer was never released")
			}

			// Made but unreachable over CDP: released before the error is
			// answered, and the connect URL's credential stays out of the log.
			f.RefuseNextConnects(1)
			_, err = c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: kind})
			if !errcode.Has(err, errcode.ProviderFailed) || !strings.Contains(errcode.MessageOf(err), "connecting to the "+kind+" session failed") {
				t.Errorf("open whose connection is refused = %v, want provider_failed saying the connection failed", err)
			}
			if created, released, running, _ := f.Counts(); created != 3 || released != 3 || running != 0 {
				t.Errorf("after a refused connection the fake has created %d, released %d, running %d; want 3, 3, 0", created, released, running)
			}
			if l := logs.String(); strings.Contains(l, f.Key) || strings.Contains(l, "signingKey=") || !strings.Contains(l, "could not dial") {
				t.Errorf("the log of the refused connection holds a credential, or no dial error:\n%s", l)
			}

			// Positive control: with nothing lost, a session opens and
			// closes, and exactly one more is created and released.
			s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: kind})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if created, released, running, _ := f.Counts(); created != 4 || released != 4 || running != 0 {
				t.Errorf("at the end the fake has created %d, released %d, running %d; want 4, 4, 0", created, released, running)
			}
		})
	}
}

// TestBrowserProviderRefusesBadKey: a wrong key is refused by the
// provider, and the open answers provider_failed saying so; nothing runs.
func TestBrowserProviderRefusesBadKey(t *testing.T) {
	t.Parallel()
	needChromium(t)
	f := providerfake.New(t, providerfake.Steel)
	p, err := browser.NewSteel(browser.SteelConfig{APIKey: "not-the-key", BaseURL: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.BrowserProviders = map[string]browser.Provider{"steel": p} })
	f.SetBackend(d.URL, d.Token)
	_, err = d.Client.OpenBrowserSession(context.Background(), apitype.CreateBrowserSessionRequest{Provider: "steel"})
	if !errcode.Has(err, errcode.ProviderFailed) || !strings.Contains(errcode.MessageOf(err), "HTTP 401") {
		t.Errorf("open with a wrong key = %v, want provider_failed with HTTP 401", err)
	}
	if created, _, running, refused := f.Counts(); created != 0 || running != 0 || refused != 1 {
		t.Errorf("the fake has created %d, running %d, refused %d; want 0, 0, 1", created, running, refused)
	}
}
