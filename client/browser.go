package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/berthdev/berth/internal/apitype"
)

func brsPath(id string, rest ...string) string {
	p := "/v1/browser/sessions/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// OpenBrowserSession opens a browser session.
func (c *Client) OpenBrowserSession(ctx context.Context, req apitype.CreateBrowserSessionRequest) (apitype.BrowserSession, error) {
	var out apitype.BrowserSession
	err := c.doJSON(ctx, http.MethodPost, "/v1/browser/sessions", nil, req, &out)
	return out, err
}

// BrowserSessions lists the open (and crashed) browser sessions.
func (c *Client) BrowserSessions(ctx context.Context) ([]apitype.BrowserSession, error) {
	var out apitype.BrowserSessionList
	err := c.doJSON(ctx, http.MethodGet, "/v1/browser/sessions", nil, nil, &out)
	return out.Sessions, err
}

// BrowserSession returns one session.
func (c *Client) BrowserSession(ctx context.Context, id string) (apitype.BrowserSession, error) {
	var out apitype.BrowserSession
	err := c.doJSON(ctx, http.MethodGet, brsPath(id), nil, nil, &out)
	return out, err
}

// CloseBrowserSession closes a session and its browser context.
func (c *Client) CloseBrowserSession(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, brsPath(id), nil, nil, nil)
}

// BrowserAction runs one action and decodes its result into out (nil to
// discard it).
func (c *Client) BrowserAction(ctx context.Context, id string, a apitype.BrowserAction, out any) error {
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	if err := c.doJSON(ctx, http.MethodPost, brsPath(id, "actions"), nil, a, &res); err != nil {
		return err
	}
	if out == nil || len(res.Result) == 0 || string(res.Result) == "null" {
		return nil
	}
	return json.Unmarshal(res.Result, out)
}

// BrowserScreenshot returns a PNG of the session's current page (the
// viewport, or the whole page with fullPage).
func (c *Client) BrowserScreenshot(ctx context.Context, id string, fullPage bool) ([]byte, error) {
	q := url.Values{}
	if fullPage {
		q.Set("full_page", "true")
	}
	resp, err := c.do(ctx, http.MethodGet, brsPath(id, "screenshot"), q, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}
