package httpapi

import (
	"bytes"
	"context"
	"embed"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Live view and human control of browser sessions (browser/live.go,
// browser/control.go). Two ways to watch: the API's WebSocket with a key,
// and a view link for a person's browser: /live/{token}, a page whose URL
// is its own capability (a signed session ID and expiry, HMAC with the
// daemon's preview secret), so the API key never appears in a URL.

const (
	liveLinkTTL       = 10 * time.Minute
	liveFrameTimeHdr  = "Berth-Frame-Time"
	liveLinkPathStart = "/live/"
)

//go:embed live/live.html live/live.js
var liveFiles embed.FS

// liveCSP lets the page run its own script, open its own socket and show
// frames as data: images, and nothing else.
const liveCSP = "default-src 'none'; script-src 'self'; connect-src 'self'; img-src data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// liveToken is the capability of a view link of session id until exp
// (Unix seconds).
func (s *Server) liveToken(id string, exp int64) string {
	e := strconv.FormatInt(exp, 10)
	return id + "." + e + "." + s.mac("live-link", id, e)
}

// readLiveToken returns the session a view link token names, if its
// signature holds and it has not expired, with its expiry.
func (s *Server) readLiveToken(tok string) (string, time.Time, error) {
	parts := strings.Split(tok, ".")
	if len(parts) == 3 {
		exp, err := strconv.ParseInt(parts[1], 10, 64)
		if err == nil && time.Now().Unix() < exp && equalSecret(parts[2], s.mac("live-link", parts[0], parts[1])) {
			return parts[0], time.Unix(exp, 0), nil
		}
	}
	return "", time.Time{}, errcode.LiveLinkInvalid.New("this live view link is invalid or expired; ask for a new one (berth browser live SESSION)")
}

// leaseOf is the lease token r presents outside a body: the
// Berth-Control-Lease header, or ?lease=.
func leaseOf(r *http.Request) string {
	if v := r.Header.Get(browser.ControlLeaseHeader); v != "" {
		return v
	}
	return r.URL.Query().Get("lease")
}

// redactLivePath keeps a view link's token (a capability) out of the
// request log.
func redactLivePath(p string) string {
	if rest, ok := strings.CutPrefix(p, liveLinkPathStart); ok {
		if _, tail, ok := strings.Cut(rest, "/"); ok {
			return liveLinkPathStart + "REDACTED/" + tail
		}
		return liveLinkPathStart + "REDACTED"
	}
	return p
}

func isWebSocket(r *http.Request) bool {
	return isUpgrade(r) && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// handleBrowserLive is the live view's WebSocket for API clients.
func (s *Server) handleBrowserLive() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		if !isWebSocket(r) {
			s.fail(w, r, errcode.WebsocketRequired.New("this route needs a WebSocket upgrade request"))
			return
		}
		if err := s.cfg.Browsers.ServeLive(w, r, r.PathValue("id"), false); err != nil {
			s.fail(w, r, err)
		}
	})
}

// handleBrowserLiveFrame answers the current page as a PNG, with the
// time it was taken in Berth-Frame-Time.
func (s *Server) handleBrowserLiveFrame() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		png, at, err := s.cfg.Browsers.LiveFrame(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set(liveFrameTimeHdr, at.UTC().Format(time.RFC3339Nano))
		_, _ = w.Write(png)
	})
}

// handleBrowserLiveLink mints a view link of the session.
func (s *Server) handleBrowserLiveLink() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		id := r.PathValue("id")
		sess, err := s.cfg.Browsers.Get(id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if sess.State() != apitype.BrowserOpen {
			s.fail(w, r, errcode.SessionClosed.New("browser session %s is not open", id))
			return
		}
		exp := time.Now().Add(liveLinkTTL).Unix()
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		wire.Encode(w, http.StatusCreated, apitype.BrowserLiveLink{
			URL: scheme + "://" + r.Host + liveLinkPathStart + s.liveToken(id, exp), ExpiresAt: time.Unix(exp, 0).UTC()})
	})
}

// handleLivePage serves a view link's page (public: the token is the
// capability).
func (s *Server) handleLivePage(file string) http.Handler {
	body, err := liveFiles.ReadFile("live/" + file)
	if err != nil {
		panic(err) // embedded above
	}
	ctype := "text/html; charset=utf-8"
	if strings.HasSuffix(file, ".js") {
		ctype = "text/javascript; charset=utf-8"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.PathValue("token")
		if _, _, err := s.readLiveToken(tok); err != nil {
			s.fail(w, r, err)
			return
		}
		out := body
		if file == "live.html" {
			// The script's own path: a relative one would miss the token.
			out = bytes.Replace(body, []byte("SCRIPT_URL"), []byte(html.EscapeString(liveLinkPathStart+url.PathEscape(tok)+"/live.js")), 1)
		}
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Content-Security-Policy", liveCSP)
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		_, _ = w.Write(out)
	})
}

// handleLiveSocket is a view link's WebSocket: the same stream as the
// API's, from a page of the same origin only, ending when the link
// expires.
func (s *Server) handleLiveSocket() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		id, exp, err := s.readLiveToken(r.PathValue("token"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !isWebSocket(r) {
			s.fail(w, r, errcode.WebsocketRequired.New("this route needs a WebSocket upgrade request"))
			return
		}
		ctx, cancel := context.WithDeadline(r.Context(), exp)
		defer cancel()
		if err := s.cfg.Browsers.ServeLive(w, r.WithContext(ctx), id, true); err != nil {
			s.fail(w, r, err)
		}
	})
}

func (s *Server) handleAcquireControl() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		req, err := wire.Decode[apitype.BrowserControlRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if req.Token != "" {
			s.fail(w, r, errcode.InvalidFields(map[string]string{"token": "acquire takes ttl_ms only; renew an existing lease"}))
			return
		}
		out, err := s.cfg.Browsers.AcquireControl(r.PathValue("id"), req.TTLMS)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		wire.Encode(w, http.StatusCreated, out)
	})
}

func (s *Server) handleRenewControl() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		req, err := wire.Decode[apitype.BrowserControlRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if req.Token == "" {
			s.fail(w, r, errcode.InvalidFields(map[string]string{"token": "the lease token to renew"}))
			return
		}
		out, err := s.cfg.Browsers.RenewControl(r.PathValue("id"), req.Token, req.TTLMS)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleReleaseControl() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		req, err := wire.Decode[apitype.BrowserControlRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if req.Token == "" || req.TTLMS != 0 {
			s.fail(w, r, errcode.InvalidFields(map[string]string{"token": "release takes the lease token only"}))
			return
		}
		if err := s.cfg.Browsers.ReleaseControl(r.PathValue("id"), req.Token); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Server) handleGetControl() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		out, err := s.cfg.Browsers.Control(r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, out)
	})
}
