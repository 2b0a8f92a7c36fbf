package agent

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// portTransport dials ports on the sandbox's own loopback. It never uses
// a proxy from the environment.
var portTransport = &http.Transport{
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	MaxIdleConnsPerHost:   8,
	IdleConnTimeout:       60 * time.Second,
	ResponseHeaderTimeout: 0, // long polls and streams are the app's business
	DisableCompression:    true,
}

// handlePort proxies /v1/ports/{port}/{path...} to 127.0.0.1:port inside
// the sandbox, WebSocket upgrades included. The agent token is removed
// and the app's own Authorization, if the daemon forwarded one, restored.
func (a *Agent) handlePort(w http.ResponseWriter, r *http.Request) {
	portStr := r.PathValue("port")
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		a.fail(w, r, errcode.PortInvalid.New("port %q must be between 1 and 65535", portStr))
		return
	}
	_, rest, _ := strings.Cut(r.URL.EscapedPath(), "/v1/ports/"+portStr)
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	target, err := url.Parse(rest)
	if err != nil {
		a.fail(w, r, errcode.PathInvalid.New("path %q is not valid", rest))
		return
	}
	addr := net.JoinHostPort("127.0.0.1", portStr)
	reqID := r.Header.Get("X-Request-Id")
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host = "http", addr
			out.URL.Path, out.URL.RawPath = target.Path, target.RawPath
			out.URL.RawQuery = r.URL.RawQuery
			// The daemon set these; Rewrite dropped them from Out.
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v := pr.In.Header.Values(h); len(v) > 0 {
					out.Header[h] = v
				}
			}
			out.Host = addr
			if h := pr.In.Header.Get("X-Forwarded-Host"); h != "" {
				out.Host = h // what the browser asked for: dev servers check it
			}
			out.Header.Del("Authorization")
			out.Header.Del("X-Request-Id")
			if v := pr.In.Header.Get(ForwardedAuthHeader); v != "" {
				out.Header.Set("Authorization", v)
			}
			out.Header.Del(ForwardedAuthHeader)
		},
		Transport:     portTransport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			a.log.Debug("port proxy", "port", port, "err", err, "request_id", reqID)
			wire.WriteError(w, r, a.log, errcode.PortUnreachable.New("nothing answered on port %d in the sandbox; is a server running there (see its service logs)?", port), reqID)
		},
	}
	rp.ServeHTTP(w, r)
}
