package browser

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Steel's Sessions API, as its public reference documents it:
//   - authentication: the steel-api-key header on the REST API, the apiKey
//     query parameter on the CDP WebSocket;
//     https://docs.steel.dev/overview/authentication
//   - create: POST /v1/sessions, body {sessionId (a UUID of the caller's
//     choosing), timeout (milliseconds)} -> the session ({id, status: live,
//     released or failed, websocketUrl, ...});
//     https://docs.steel.dev/overview/sessions-api/session-lifecycle and
//     the SDK generated from Steel's OpenAPI document,
//     https://github.com/steel-dev/steel-node/blob/main/src/resources/sessions/sessions.ts
//   - retrieve: GET /v1/sessions/{id}; release: POST
//     /v1/sessions/{id}/release -> {success, message};
//   - connecting: the websocketUrl with &apiKey= added, dialed as it is
//     (chromedp's NoModifyURL); https://docs.steel.dev/cookbook/chromedp
//
// Berth chooses the session's ID itself, a UUID derived from its own
// session ID, so a creation whose answer was lost is found by that ID.

// DefaultSteelURL is Steel's public API.
const DefaultSteelURL = "https://api.steel.dev"

// SteelConfig configures the Steel provider.
type SteelConfig struct {
	APIKey Secret
	// BaseURL is the API ("" is DefaultSteelURL).
	BaseURL string
	// Timeout bounds one API call (default DefaultProviderTimeout).
	Timeout time.Duration
}

// Steel is the Steel provider.
type Steel struct {
	call providerCall
	base string
}

var _ Provider = (*Steel)(nil)

// NewSteel returns the Steel provider, or an error when the configuration
// is incomplete.
func NewSteel(cfg SteelConfig) (*Steel, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("steel needs an API key")
	}
	base, err := baseURL(cfg.BaseURL, DefaultSteelURL)
	if err != nil {
		return nil, fmt.Errorf("steel URL: %w", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultProviderTimeout
	}
	return &Steel{call: providerCall{client: providerHTTP(), header: "steel-api-key", key: cfg.APIKey, timeout: cfg.Timeout}, base: base}, nil
}

// Name is steel.
func (*Steel) Name() string { return ProviderSteel }

type steelSession struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	WebsocketURL string `json:"websocketUrl"`
}

// steelID is the Steel session ID of Berth session tag: a version-4-shaped
// UUID from a hash of it, so that it can be found again without an answer.
func steelID(tag string) string {
	h := sha256.Sum256([]byte("berth-steel-session:" + tag))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Create creates the session of ID steelID(tag), ending after maxDuration.
func (st *Steel) Create(ctx context.Context, tag string, maxDuration time.Duration) (string, string, error) {
	in := map[string]any{"sessionId": steelID(tag), "timeout": (maxDuration + time.Minute).Milliseconds()}
	var out steelSession
	err := st.call.do(ctx, http.MethodPost, st.base+"/v1/sessions", in, &out)
	if err := createAnswer(err, out.ID); err != nil {
		return "", "", err
	}
	connect, err := st.connectURL(out.WebsocketURL)
	if err != nil {
		return "", "", releaseUnusable(ctx, st, out.ID, err)
	}
	return out.ID, connect, nil
}

// connectURL is the session's websocketUrl with the API key added.
func (st *Steel) connectURL(ws string) (string, error) {
	if err := checkConnectURL(ProviderSteel, ws, st.base); err != nil {
		return "", err
	}
	u, _ := url.Parse(ws)
	q := u.Query()
	q.Set("apiKey", string(st.call.key))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Release releases the session. One that is unknown, or no longer live,
// is released.
func (st *Steel) Release(ctx context.Context, id string) error {
	u := st.base + "/v1/sessions/" + url.PathEscape(id)
	err := st.call.do(ctx, http.MethodPost, u+"/release", map[string]any{}, nil)
	var he *httpError
	if err == nil || !errors.As(err, &he) || he.status >= 500 {
		return err
	}
	if he.status == http.StatusNotFound {
		return nil
	}
	var s steelSession
	if gerr := st.call.do(ctx, http.MethodGet, u, nil, &s); gerr == nil && s.Status != "live" {
		return nil
	}
	return err
}

// Find looks the session of ID steelID(tag) up.
func (st *Steel) Find(ctx context.Context, tag string) ([]string, error) {
	var s steelSession
	err := st.call.do(ctx, http.MethodGet, st.base+"/v1/sessions/"+steelID(tag), nil, &s)
	var he *httpError
	switch {
	case errors.As(err, &he) && he.status == http.StatusNotFound:
		return nil, nil
	case err != nil:
		return nil, err
	case s.Status == "live":
		return []string{s.ID}, nil
	}
	return nil, nil
}
