package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Ports and previews. A port inside a sandbox is reached through its
// agent, never through the network: the daemon proxies to the agent's
// socket, the agent to 127.0.0.1:port in the sandbox. Two ways in:
//
//   - /v1/sandboxes/{id}/ports/{port}/... with an API key, for programs;
//   - http://{port}-{sandbox}.{preview domain}/... for browsers, with the
//     sandbox's preview token in a header, or in a cookie set by visiting
//     a signed link (/__berth/auth on that host).
//
// Berth's own credentials never reach the sandbox: the API key, the
// preview token and cookie are removed before the request is forwarded.
// A preview request to a paused or hibernated sandbox wakes it.

const (
	previewTokenHeader = "X-Berth-Preview-Token"
	previewCookie      = "berth_preview"
	previewAuthPath    = "/__berth/auth"
	previewTokenPrefix = "bpv_"

	defaultLinkTTL = 15 * time.Minute
	maxLinkTTL     = 7 * 24 * time.Hour
	cookieMaxAge   = 24 * time.Hour
)

// portMethods are the methods the /v1 port proxy takes, one route each.
var portMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions}

var previewB32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// mac returns the daemon's HMAC of the parts, joined unambiguously.
func (s *Server) mac(parts ...string) string {
	h := hmac.New(sha256.New, s.cfg.PreviewSecret)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return strings.ToLower(previewB32.EncodeToString(h.Sum(nil)))
}

// previewToken is a sandbox's preview token: derived, never stored, so a
// new preview secret revokes every token at once.
func (s *Server) previewToken(sandboxID string) string {
	return previewTokenPrefix + s.mac("preview-token", sandboxID)
}

func (s *Server) linkSignature(sandboxID string, port int, exp int64) string {
	return s.mac("preview-link", sandboxID, strconv.Itoa(port), strconv.FormatInt(exp, 10))
}

func equalSecret(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// previewTarget is the sandbox and port a preview host names.
type previewTarget struct {
	sandboxID string
	port      int
}

// previewLabel is the first DNS label of a preview host: a sandbox ID has
// an underscore, which hostnames do not, so "sbx_" is written "sbx-".
func previewLabel(sandboxID string, port int) string {
	return strconv.Itoa(port) + "-" + strings.Replace(sandboxID, "_", "-", 1)
}

// parsePreviewHost reads {port}-{sandbox}.{domain}[:port] from a Host.
func (s *Server) parsePreviewHost(host string) (previewTarget, bool) {
	domain := s.cfg.PreviewDomain
	if domain == "" {
		return previewTarget{}, false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || strings.Contains(label, ".") {
		return previewTarget{}, false
	}
	portStr, rest, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil || port < 1 || port > 65535 {
		return previewTarget{}, false
	}
	// The sandbox ID as printed (sbx_...) works too, where a client
	// accepts the underscore.
	id, ok := strings.CutPrefix(rest, "sbx-")
	if !ok {
		if id, ok = strings.CutPrefix(rest, "sbx_"); !ok {
			return previewTarget{}, false
		}
	}
	return previewTarget{sandboxID: "sbx_" + id, port: port}, true
}

// withPreviews sends requests for preview hosts to the sandbox, and every
// other request on to the API. Previews skip the API's query-credential
// check: an app's query string is its own business.
func (s *Server) withPreviews(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t, ok := s.parsePreviewHost(r.Host); ok {
			if s.cfg.Cluster != nil {
				s.forwardPreview(w, r, t)
				return
			}
			s.servePreview(w, r, t)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, t previewTarget) {
	if r.URL.Path == previewAuthPath {
		s.previewLogin(w, r, t)
		return
	}
	token := r.Header.Get(previewTokenHeader)
	if token == "" {
		if c, err := r.Cookie(previewCookie); err == nil {
			token = c.Value
		}
	}
	if token == "" || !equalSecret(token, s.previewToken(t.sandboxID)) {
		s.fail(w, r, errcode.PreviewTokenRequired.New("this preview needs the sandbox's preview token (header %s) or a signed link; see GET /v1/sandboxes/{id}/previews/{port}",
			previewTokenHeader))
		return
	}
	s.proxyPort(w, r, t.sandboxID, t.port, r.URL.EscapedPath(), true)
}

// previewLogin checks a signed link and sets the preview cookie for this
// host, then redirects to the link's next path.
func (s *Server) previewLogin(w http.ResponseWriter, r *http.Request, t previewTarget) {
	q := r.URL.Query()
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil || time.Now().Unix() > exp || !equalSecret(q.Get("sig"), s.linkSignature(t.sandboxID, t.port, exp)) {
		s.fail(w, r, errcode.PreviewLinkInvalid.New("this preview link is invalid or expired; ask the API for a new one"))
		return
	}
	next := q.Get("next")
	// Only a path on this host: never an open redirect.
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		next = "/"
	}
	http.SetCookie(w, &http.Cookie{
		Name: previewCookie, Value: s.previewToken(t.sandboxID), Path: "/",
		MaxAge: int(cookieMaxAge.Seconds()), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handlePreviewInfo answers how to reach a port from a browser.
func (s *Server) handlePreviewInfo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		port, err := parsePort(r.PathValue("port"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ttl := defaultLinkTTL
		if v := r.URL.Query().Get("ttl_s"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || time.Duration(n)*time.Second > maxLinkTTL {
				s.fail(w, r, errcode.QueryInvalid.New("ttl_s must be between 1 and %d", int64(maxLinkTTL.Seconds())))
				return
			}
			ttl = time.Duration(n) * time.Second
		}
		if _, err := s.cfg.Sandboxes.Get(r.Context(), id); err != nil {
			s.fail(w, r, err)
			return
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		exp := time.Now().Add(ttl).Unix()
		out := apitype.Preview{
			SandboxID: id, Port: port, ExpiresAt: time.Unix(exp, 0).UTC(),
			PathURL: scheme + "://" + r.Host + "/v1/sandboxes/" + id + "/ports/" + strconv.Itoa(port) + "/",
		}
		if d := s.cfg.PreviewDomain; d != "" {
			host := previewLabel(id, port) + "." + d
			if _, p, err := net.SplitHostPort(r.Host); err == nil {
				host = net.JoinHostPort(host, p)
			}
			out.URL = scheme + "://" + host + "/"
			out.Token = s.previewToken(id)
			out.AuthURL = out.URL + strings.TrimPrefix(previewAuthPath, "/") + "?" + url.Values{
				"exp": {strconv.FormatInt(exp, 10)}, "sig": {s.linkSignature(id, port, exp)}, "next": {"/"},
			}.Encode()
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func parsePort(s string) (int, error) {
	port, err := strconv.Atoi(s)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != s {
		return 0, errcode.PortInvalid.New("port %q must be a number between 1 and 65535", s)
	}
	return port, nil
}

// handlePort proxies /v1/sandboxes/{id}/ports/{port}/{path...} into the
// sandbox, for API key holders.
func (s *Server) handlePort() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, portStr := r.PathValue("id"), r.PathValue("port")
		port, err := parsePort(portStr)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		// The rest of the path as the client escaped it.
		_, rest, _ := strings.Cut(r.URL.EscapedPath(), "/ports/"+portStr)
		s.proxyPort(w, r, id, port, rest, false)
	})
}

// proxyPort forwards r to port inside the sandbox, through its agent. A
// preview request keeps its own Authorization header for the app; an API
// request's Authorization is Berth's key and is dropped.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request, sandboxID string, port int, path string, preview bool) {
	waking := s.asleep(r.Context(), sandboxID)
	c, err := s.cfg.Sandboxes.Agent(r.Context(), sandboxID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if isUpgrade(r) {
		// A long-lived connection (a dev server's hot reload, say) is use
		// of the sandbox while it lasts.
		ctx, stop := context.WithCancel(r.Context())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		wg.Go(func() { s.keepInUse(ctx, sandboxID) })
	}
	// path is escaped as the client sent it; it stays so.
	rp := c.Proxy(func(*http.Request) string { return agent.PortPath(port, path) }, func(pr *httputil.ProxyRequest) {
		pr.SetXForwarded()
		out := pr.Out
		out.Header.Del(agent.ForwardedAuthHeader)
		out.Header.Del(previewTokenHeader)
		if a := r.Header.Get("Authorization"); preview && a != "" {
			out.Header.Set(agent.ForwardedAuthHeader, a)
		}
		stripCookie(out.Header, previewCookie)
		out.Header.Set("X-Request-Id", requestID(r))
	})
	if waking {
		rp.Transport = portWaitTransport{base: rp.Transport, until: time.Now().Add(wakePortWait)}
	}
	if preview && wantsHTML(r) {
		rp.ModifyResponse = htmlForUnreachable
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil {
			s.fail(w, r, errcode.Wrap(errcode.Unavailable, err, "sandbox agent is not answering"))
		}
	}
	rp.ServeHTTP(w, r)
}

// stripCookie removes one cookie from a request's Cookie headers, keeping
// the others for the app.
func stripCookie(h http.Header, name string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		var parts []string
		for part := range strings.SplitSeq(line, ";") {
			if k, _, _ := strings.Cut(strings.TrimSpace(part), "="); k != name && strings.TrimSpace(part) != "" {
				parts = append(parts, strings.TrimSpace(part))
			}
		}
		if len(parts) > 0 {
			keep = append(keep, strings.Join(parts, "; "))
		}
	}
	h.Del("Cookie")
	for _, v := range keep {
		h.Add("Cookie", v)
	}
}

func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return true
			}
		}
	}
	return false
}
