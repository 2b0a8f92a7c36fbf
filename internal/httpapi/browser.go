package httpapi

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/wire"
)

// maxActionBody bounds an action request: uploads carry files inline.
const maxActionBody = 24 << 20

func (s *Server) browserUnavailable(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Browsers == nil {
		s.fail(w, r, errcode.BrowserUnavailable.New("browser sessions are not enabled on this daemon"))
		return true
	}
	return false
}

func (s *Server) handleOpenBrowserSession() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		req, err := wire.Decode[apitype.CreateBrowserSessionRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if s.cfg.TenantMode && req.Mode != apitype.BrowserModeIsolated {
			// Context and process sessions run Chromium on the host; remote
			// ones let the daemon dial any address a tenant names.
			s.fail(w, r, errcode.TenantMode.New("browser sessions of mode %q run outside a sandbox, which tenant mode refuses; "+
				"open one with mode \"isolated\" (Chromium in a sandbox of its own)", cmp.Or(req.Mode, apitype.BrowserModeContext)))
			return
		}
		owner := browser.Owner{Tenant: s.tenantOf(r), MaxSessions: s.tenantLimits(r).MaxBrowserSessions}
		sess, err := s.cfg.Browsers.Open(r.Context(), owner, req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/browser/sessions/"+sess.ID())
		wire.Encode(w, http.StatusCreated, sess.View(r.Context()))
	})
}

func (s *Server) handleListBrowserSessions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		out := apitype.BrowserSessionList{Sessions: []apitype.BrowserSession{}}
		scope := scopeOf(r)
		for _, sess := range s.cfg.Browsers.List() {
			if scope == sandbox.AnyTenant || sess.Tenant() == scope {
				out.Sessions = append(out.Sessions, sess.View(r.Context()))
			}
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleGetBrowserSession() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		sess, err := s.cfg.Browsers.Get(r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, sess.View(r.Context()))
	})
}

func (s *Server) handleCloseBrowserSession() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		// A client's close honours a human-control lease (browser_live.go).
		if err := s.cfg.Browsers.CloseBy(r.PathValue("id"), leaseOf(r)); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Server) handleBrowserAction() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		var a apitype.BrowserAction
		if err := wire.DecodeJSON(http.MaxBytesReader(w, r.Body, maxActionBody), &a); err != nil {
			s.fail(w, r, err)
			return
		}
		res, err := s.cfg.Browsers.Do(r.Context(), r.PathValue("id"), a)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, apitype.BrowserActionResult{Result: res})
	})
}

// handleBrowserScreenshot answers a screenshot as the image itself:
// ?full_page=true, ?format=jpeg&quality=N, ?selector=CSS.
func (s *Server) handleBrowserScreenshot() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		q := r.URL.Query()
		a := apitype.BrowserAction{Op: "screenshot", FullPage: q.Get("full_page") == "true", Format: q.Get("format"), Selector: q.Get("selector"),
			Lease: leaseOf(r)}
		if v := q.Get("quality"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				s.fail(w, r, errcode.QueryInvalid.New("quality must be a number between 1 and 100"))
				return
			}
			a.Quality = n
		}
		res, err := s.cfg.Browsers.Do(r.Context(), r.PathValue("id"), a)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		img, ok := res.(apitype.Image)
		if !ok {
			s.fail(w, r, errcode.New(errcode.Internal, "screenshot answered %T", res))
			return
		}
		b, err := base64.StdEncoding.DecodeString(img.Base64)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", img.MimeType)
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(b)
	})
}

// handleBrowserCDP is the session's CDP endpoint: an authenticated
// WebSocket proxy for Playwright's connectOverCDP and Puppeteer's connect.
func (s *Server) handleBrowserCDP() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		if err := s.cfg.Browsers.ProxyCDP(w, r, r.PathValue("id")); err != nil {
			s.fail(w, r, err)
		}
	})
}
