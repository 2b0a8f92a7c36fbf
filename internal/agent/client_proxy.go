package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/errcode"
)

// ForwardedAuthHeader carries the Authorization header a preview's client
// sent for the app: the daemon's hop to the agent uses Authorization for
// the agent's token, and the agent's port proxy puts this one back.
const ForwardedAuthHeader = "X-Berth-Forwarded-Authorization"

// PortPath is the agent's path to path (escaped as a client sent it, from
// "/") on port inside the sandbox.
func PortPath(port int, path string) string {
	return "/v1/ports/" + strconv.Itoa(port) + path
}

// Proxy returns a reverse proxy to the agent. Each request goes to the
// agent path target gives for it (escaped, as a client would send it; its
// query is the incoming one) with the agent's token as its Authorization.
// prepare, when not nil, adjusts the outgoing request first (headers for
// the agent or the app; whatever it sets as Authorization is replaced).
// WebSocket upgrades pass through: the proxy hijacks the client's
// connection and splices it to the agent's. The caller sets its
// ErrorHandler, and may wrap its Transport.
func (c *Client) Proxy(target func(in *http.Request) string, prepare func(*httputil.ProxyRequest)) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			if prepare != nil {
				prepare(pr)
			}
			out := pr.Out
			out.URL.Scheme, out.URL.Host, out.Host = "http", "agent", "agent"
			p := target(pr.In)
			u, err := url.Parse(p)
			if err != nil {
				u = &url.URL{Path: p}
			}
			out.URL.Path, out.URL.RawPath = u.Path, u.RawPath
			out.URL.RawQuery = pr.In.URL.RawQuery
			out.Header.Set("Authorization", "Bearer "+c.token)
		},
		Transport:     c.hc.Transport,
		FlushInterval: -1,
	}
}

// Port sends a request to path on port inside the sandbox, through the
// agent's port proxy, and returns the app's response whatever its status:
// only a failure to reach the agent is an error. contentType is set when
// body is not nil.
func (c *Client) Port(ctx context.Context, method string, port int, path, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+PortPath(port, path), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errcode.Wrap(errcode.Unavailable, err, "sandbox agent is not answering")
	}
	return resp, nil
}
