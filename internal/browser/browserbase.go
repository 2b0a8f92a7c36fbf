package browser

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Browserbase's Sessions API, as its public reference documents it:
//   - create: POST /v1/sessions, header X-BB-API-Key, body {projectId,
//     userMetadata, timeout (seconds, 60-21600)} -> 201 with the session
//     ({id, status, connectUrl, ...});
//     https://docs.browserbase.com/reference/api/create-a-session
//   - release: POST /v1/sessions/{id} with {projectId, status:
//     "REQUEST_RELEASE"} -> 200 with the session;
//     https://docs.browserbase.com/reference/api/update-a-session
//   - list: GET /v1/sessions?status=...&q=user_metadata['k']:'v' -> 200
//     with an array of sessions; statuses PENDING, RUNNING, ERROR,
//     TIMED_OUT, COMPLETED;
//     https://docs.browserbase.com/reference/api/list-sessions and
//     https://docs.browserbase.com/features/session-metadata
//
// The connect URL Browserbase answers carries the credential it checks
// (a signing key), so it is used as it is and kept secret.

// DefaultBrowserbaseURL is Browserbase's public API.
const DefaultBrowserbaseURL = "https://api.browserbase.com"

// browserbaseTagKey is the userMetadata key that holds Berth's session ID.
const browserbaseTagKey = "berth_session_id"

// BrowserbaseConfig configures the Browserbase provider.
type BrowserbaseConfig struct {
	APIKey    Secret
	ProjectID string
	// BaseURL is the API ("" is DefaultBrowserbaseURL).
	BaseURL string
	// Timeout bounds one API call (default DefaultProviderTimeout).
	Timeout time.Duration
}

// Browserbase is the Browserbase provider.
type Browserbase struct {
	call      providerCall
	base      string
	projectID string
}

var _ Provider = (*Browserbase)(nil)

// NewBrowserbase returns the Browserbase provider, or an error when the
// configuration is incomplete.
func NewBrowserbase(cfg BrowserbaseConfig) (*Browserbase, error) {
	if cfg.APIKey == "" || cfg.ProjectID == "" {
		return nil, errors.New("browserbase needs an API key and a project ID")
	}
	base, err := baseURL(cfg.BaseURL, DefaultBrowserbaseURL)
	if err != nil {
		return nil, fmt.Errorf("browserbase URL: %w", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultProviderTimeout
	}
	return &Browserbase{
		call: providerCall{client: providerHTTP(), header: "X-BB-API-Key", key: cfg.APIKey, timeout: cfg.Timeout},
		base: base, projectID: cfg.ProjectID,
	}, nil
}

// Name is browserbase.
func (*Browserbase) Name() string { return ProviderBrowserbase }

type browserbaseSession struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	ConnectURL string `json:"connectUrl"`
}

// Create creates a session with Berth's session ID in its userMetadata
// and a timeout of maxDuration (within Browserbase's 60 s to 6 h).
func (b *Browserbase) Create(ctx context.Context, tag string, maxDuration time.Duration) (string, string, error) {
	secs := min(max(int64(maxDuration/time.Second)+60, 60), 21600)
	in := map[string]any{"projectId": b.projectID, "userMetadata": map[string]string{browserbaseTagKey: tag}, "timeout": secs}
	var out browserbaseSession
	err := b.call.do(ctx, http.MethodPost, b.base+"/v1/sessions", in, &out)
	if err := createAnswer(err, out.ID); err != nil {
		return "", "", err
	}
	if err := checkConnectURL(ProviderBrowserbase, out.ConnectURL, b.base); err != nil {
		return "", "", releaseUnusable(ctx, b, out.ID, err)
	}
	return out.ID, out.ConnectURL, nil
}

// Release asks for the session to end (REQUEST_RELEASE). A refusal of a
// session that has ended already is a success.
func (b *Browserbase) Release(ctx context.Context, id string) error {
	u := b.base + "/v1/sessions/" + url.PathEscape(id)
	err := b.call.do(ctx, http.MethodPost, u, map[string]string{"projectId": b.projectID, "status": "REQUEST_RELEASE"}, nil)
	var he *httpError
	if err == nil || !errors.As(err, &he) || he.status >= 500 {
		return err
	}
	if he.status == http.StatusNotFound {
		return nil
	}
	var s browserbaseSession
	if gerr := b.call.do(ctx, http.MethodGet, u, nil, &s); gerr == nil && s.Status != "RUNNING" && s.Status != "PENDING" {
		return nil
	}
	return err
}

// Find lists the sessions whose userMetadata holds tag and that are
// pending or running.
func (b *Browserbase) Find(ctx context.Context, tag string) ([]string, error) {
	q := url.Values{"q": {"user_metadata['" + browserbaseTagKey + "']:'" + tag + "'"}}
	var out []browserbaseSession
	if err := b.call.do(ctx, http.MethodGet, b.base+"/v1/sessions?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range out {
		if s.Status == "RUNNING" || s.Status == "PENDING" {
			ids = append(ids, s.ID)
		}
	}
	return ids, nil
}
