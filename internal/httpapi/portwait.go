package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
)

// A preview or port request that wakes its sandbox (hibernated, paused or
// lazy) reaches the app only once the app listens again: its services
// restart after the wake, which takes a moment. Until then the agent
// answers 503 port_unreachable; such a request waits for the port, up to
// wakePortWait, instead of passing that answer on. Only requests without a
// body are retried, so nothing is sent twice.
const (
	wakePortWait = 20 * time.Second
	portPoll     = 200 * time.Millisecond
)

// asleep reports whether the sandbox would have to wake (or start) to
// answer a request now.
func (s *Server) asleep(ctx context.Context, id string) bool {
	sb, err := s.cfg.Sandboxes.Get(ctx, id)
	if err != nil {
		return false
	}
	switch sb.State {
	case apitype.StateHibernated, apitype.StatePaused, apitype.StatePending:
		return true
	}
	return false
}

// portWaitTransport retries a bodiless request while the agent says the
// port is unreachable, until the deadline.
type portWaitTransport struct {
	base  http.RoundTripper
	until time.Time
}

func (t portWaitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := t.base.RoundTrip(req)
		if err != nil || (req.Body != nil && req.Body != http.NoBody) || !time.Now().Before(t.until) {
			return resp, err
		}
		unreachable, resp := isPortUnreachable(resp)
		if !unreachable {
			return resp, nil
		}
		resp.Body.Close()
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(portPoll):
		}
	}
}

// isPortUnreachable reports whether resp is the agent's 503
// port_unreachable, and returns a response with its body still readable.
func isPortUnreachable(resp *http.Response) (bool, *http.Response) {
	if resp.StatusCode != http.StatusServiceUnavailable {
		return false, resp
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return err == nil && bytes.Contains(b, []byte(`"port_unreachable"`)), resp
}

// startingPage is what a browser gets for a preview whose app does not
// listen (yet): a page that tries again, never the API's JSON.
const startingPage = `<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>Starting…</title>
<style>body{font:16px system-ui,sans-serif;margin:4em auto;max-width:36em;color:#333}</style></head>
<body><h1>Starting…</h1>
<p>Nothing answers on this sandbox port yet: its app may still be starting
(after a wake, its services start again). This page tries again every two seconds.</p>
</body></html>
`

// wantsHTML reports whether r comes from a browser navigating to a page.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// htmlForUnreachable turns the agent's port_unreachable answer to a
// browser's preview request into startingPage.
func htmlForUnreachable(resp *http.Response) error {
	unreachable, _ := isPortUnreachable(resp)
	if !unreachable {
		return nil
	}
	resp.Body = io.NopCloser(strings.NewReader(startingPage))
	resp.ContentLength = int64(len(startingPage))
	resp.Header = http.Header{}
	resp.Header.Set("Content-Type", "text/html; charset=utf-8")
	resp.Header.Set("Cache-Control", "no-store")
	resp.Header.Set("Retry-After", "2")
	return nil
}
