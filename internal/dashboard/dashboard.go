package dashboard

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Config configures the dashboard.
type Config struct {
	// Off serves no dashboard.
	Off bool
	// InsecureCookies drops the Secure attribute of the session cookie,
	// for plain-HTTP development (serve --insecure-cookies). Without it a
	// browser keeps the cookie over HTTPS (or http://localhost) only.
	InsecureCookies bool
	// IdleTimeout and MaxAge end sessions (0: DefaultIdleTimeout,
	// DefaultMaxAge).
	IdleTimeout, MaxAge time.Duration
	Logger              *slog.Logger
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pageCSP is every page's Content-Security-Policy: the dashboard's own
// scripts, styles and images, nothing inline, no plugins, no framing.
const pageCSP = "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// rawCSP is the policy of a sandbox's file served as it is: no script, no
// plugin, a sandboxed origin, so even a file a browser renders cannot act
// on the dashboard.
const rawCSP = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; object-src 'none'; frame-ancestors 'none'"

// Dashboard serves the web dashboard.
type Dashboard struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	static   http.Handler
	rtCache  runtimeCache
	secrets  secretShelf // new keys' secrets, shown once (admin.go)
	leases   leases      // control leases taken through the dashboard (browser_session.go)
}

// New builds a dashboard. It panics if an embedded template is broken
// (a build error, caught by every test).
func New(cfg Config) *Dashboard {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.IdleTimeout, cfg.MaxAge), pages: map[string]*template.Template{}}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		d.pages[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", n))
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	d.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	return d
}

// Handler returns the dashboard's handler, whose pages call api (the
// daemon's whole HTTP handler) in process.
func (d *Dashboard) Handler(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range d.routes() {
		mux.Handle(rt.pattern, rt.h)
	}
	pages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiKey{}, api)))
	})
	return pages
}

type apiKey struct{}

// route is one line of the dashboard's surface.
type route struct {
	pattern string
	h       http.Handler
}

// routes is the dashboard's whole surface, one line per route. The daemon
// mounts "/", "/login", "/logout" and "/ui/" here (httpapi's
// dashboardPaths); a GET shows a page, a POST changes something and needs
// the session's CSRF token.
func (d *Dashboard) routes() []route {
	return []route{
		{"GET /{$}", http.HandlerFunc(d.handleSignInPage)},
		{"POST /login", http.HandlerFunc(d.handleLogin)},
		{"POST /logout", d.signedIn(d.handleLogout)},
		{"GET /ui/static/", d.static},

		{"GET /ui/{$}", http.RedirectHandler("/ui/sandboxes", http.StatusSeeOther)},
		{"GET /ui/sandboxes", d.signedIn(d.handleSandboxes)},
		{"POST /ui/sandboxes", d.signedIn(d.handleCreateSandbox)},
		{"GET /ui/sandboxes/{id}", d.signedIn(d.handleSandbox)},
		{"POST /ui/sandboxes/{id}/{op}", d.signedIn(d.handleLifecycle)},
		{"POST /ui/sandboxes/{id}/commands", d.signedIn(d.handleExec)},
		{"GET /ui/sandboxes/{id}/commands/{cid}", d.signedIn(d.handleCommand)},
		{"GET /ui/sandboxes/{id}/commands/{cid}/stream", d.signedIn(d.handleCommandStream)},
		{"POST /ui/sandboxes/{id}/commands/{cid}/cancel", d.signedIn(d.handleCancel)},
		{"GET /ui/sandboxes/{id}/files", d.signedIn(d.handleFiles)},
		{"POST /ui/sandboxes/{id}/files", d.signedIn(d.handleUpload)},
		{"GET /ui/sandboxes/{id}/files/view", d.signedIn(d.handleView)},
		{"GET /ui/sandboxes/{id}/files/raw", d.signedIn(d.handleRaw)},
		{"POST /ui/sandboxes/{id}/terminals", d.signedIn(d.handleCreateTerminal)},
		{"GET /ui/sandboxes/{id}/terminals/{tid}", d.signedIn(d.handleTerminal)},
		{"GET /ui/sandboxes/{id}/terminals/{tid}/output", d.signedIn(d.handleTerminalOutput)},
		{"POST /ui/sandboxes/{id}/terminals/{tid}/input", d.signedIn(d.handleTerminalInput)},
		{"POST /ui/sandboxes/{id}/terminals/{tid}/resize", d.signedIn(d.handleTerminalResize)},
		{"POST /ui/sandboxes/{id}/services", d.signedIn(d.handleCreateService)},
		{"POST /ui/sandboxes/{id}/services/{name}/{op}", d.signedIn(d.handleServiceOp)},
		{"GET /ui/sandboxes/{id}/previews/{port}", d.signedIn(d.handlePreview)},

		{"GET /ui/jobs", d.signedIn(d.handleJobs)},
		{"POST /ui/jobs", d.signedIn(d.handleSubmitJob)},
		{"GET /ui/jobs/{id}", d.signedIn(d.handleJob)},
		{"POST /ui/jobs/{id}/cancel", d.signedIn(d.handleCancelJob)},
		{"GET /ui/jobs/{id}/outputs/{sha256}", d.signedIn(d.handleJobOutput)},

		{"GET /ui/browsers", d.signedIn(d.handleBrowsers)},
		{"POST /ui/browsers", d.signedIn(d.handleOpenBrowser)},
		{"POST /ui/browsers/{id}/close", d.signedIn(d.handleCloseBrowser)},
		{"POST /ui/browsers/{id}/live", d.signedIn(d.handleLiveView)},
		{"GET /ui/browsers/{id}", d.signedIn(d.handleBrowserSession)},
		{"POST /ui/browsers/{id}/navigate", d.signedIn(d.handleBrowserNavigate)},
		{"POST /ui/browsers/{id}/pages", d.signedIn(d.handleBrowserPages)},
		{"GET /ui/browsers/{id}/screenshot", d.signedIn(d.handleBrowserScreenshot)},
		{"GET /ui/browsers/{id}/frame", d.signedIn(d.handleBrowserFrame)},
		{"POST /ui/browsers/{id}/control", d.signedIn(d.handleTakeControl)},
		{"POST /ui/browsers/{id}/release", d.signedIn(d.handleReleaseControl)},
		{"POST /ui/browsers/{id}/click", d.signedIn(d.handleBrowserClick)},
		{"POST /ui/browsers/{id}/checkpoints", d.signedIn(d.handleCreateCheckpoint)},
		{"POST /ui/browsers/{id}/recordings", d.signedIn(d.handleStartRecording)},
		{"POST /ui/checkpoints/{id}/resume", d.signedIn(d.handleResumeCheckpoint)},
		{"POST /ui/checkpoints/{id}/delete", d.signedIn(d.handleDeleteCheckpoint)},
		{"GET /ui/recordings/{id}", d.signedIn(d.handleRecording)},
		{"GET /ui/recordings/{id}/frames/{n}", d.signedIn(d.handleRecordingFrame)},
		{"POST /ui/recordings/{id}/stop", d.signedIn(d.handleStopRecording)},
		{"POST /ui/recordings/{id}/delete", d.signedIn(d.handleDeleteRecording)},
		{"GET /ui/templates", d.signedIn(d.handleTemplates)},
		{"POST /ui/templates", d.signedIn(d.handleBuildTemplate)},
		{"GET /ui/templates/{name}", d.signedIn(d.handleTemplate)},
		{"POST /ui/templates/{name}/delete", d.signedIn(d.handleDeleteTemplate)},
		{"GET /ui/system", d.signedIn(d.handleSystem)},

		{"GET /ui/keys", d.signedIn(d.handleKeys)},
		{"POST /ui/keys", d.signedIn(d.handleCreateKey)},
		{"GET /ui/keys/{id}", d.signedIn(d.handleKey)},
		{"POST /ui/keys/{id}/revoke", d.signedIn(d.handleRevokeKey)},
		{"GET /ui/tenants", d.signedIn(d.handleTenants)},
		{"POST /ui/tenants", d.signedIn(d.handleCreateTenant)},
		{"GET /ui/tenants/{id}", d.signedIn(d.handleTenant)},
		{"POST /ui/tenants/{id}", d.signedIn(d.handleSetTenant)},
		{"POST /ui/tenants/{id}/delete", d.signedIn(d.handleDeleteTenant)},
		{"GET /ui/audit", d.signedIn(d.handleAudit)},
		{"GET /ui/sandboxes/{id}/files/diff", d.signedIn(d.handleDiff)},
		{"GET /ui/jobs/{id}/events", d.signedIn(d.handleJobEvents)},

		{"/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d.fail(w, r, errcode.RouteNotFound.New("no dashboard page at %s %s", r.Method, r.URL.Path))
		})},
	}
}

// req is a signed-in request: its session and a client that calls the
// API with the session's key.
type req struct {
	w    http.ResponseWriter
	r    *http.Request
	sess *session
	sid  string
	c    *client.Client
}

func (rq *req) ctx() context.Context { return rq.r.Context() }

// signedIn runs h for a request with a live session: a GET without one
// goes to the sign-in page; a POST without one, or without the session's
// CSRF token, is refused. A multipart POST carries its token in the URL's
// csrf parameter (checked before the body is read); a fetch in the
// X-CSRF-Token header; a form in its csrf field.
func (d *Dashboard) signedIn(h func(*req)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := d.cookie(r, sessionCookie)
		sess := d.sessions.get(sid)
		if sess == nil {
			if r.Method == http.MethodGet && !isStream(r) {
				http.Redirect(w, r, "/", http.StatusSeeOther)
				return
			}
			d.fail(w, r, errcode.DashboardSignedOut.New("you are not signed in to the dashboard, or your session expired; sign in again at /"))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := checkOrigin(r); err != nil {
				d.fail(w, r, err)
				return
			}
			tok := r.Header.Get("X-CSRF-Token")
			if tok == "" {
				tok = r.URL.Query().Get("csrf")
			}
			if tok == "" && !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
				r.Body = http.MaxBytesReader(w, r.Body, maxForm)
				tok = r.PostFormValue("csrf")
			}
			if !equalToken(tok, sess.csrf) {
				d.fail(w, r, errcode.CSRFInvalid.New("this request does not carry your session's CSRF token; reload the page and try again"))
				return
			}
		}
		r = r.WithContext(forwarded(r))
		h(&req{w: w, r: r, sess: sess, sid: sid, c: apiClient(r, sess.key)})
	})
}

// apiClient is a client of the API, in process, with key, as r's caller:
// from r's address, so rate limits and the audit log name the person's.
func apiClient(r *http.Request, key string) *client.Client {
	api, _ := r.Context().Value(apiKey{}).(http.Handler)
	return client.New("http://"+r.Host, key, client.WithHTTPClient(&http.Client{
		Transport: wire.InProcess{Handler: api, RemoteAddr: r.RemoteAddr},
	}))
}

// forwarded returns r's context carrying r's X-Forwarded-For to the API
// calls made under it: the API reads it from trusted proxies only
// (--trusted-proxy), as it would on a direct call.
func forwarded(r *http.Request) context.Context {
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		return wire.WithHeader(r.Context(), "X-Forwarded-For", xff)
	}
	return r.Context()
}

// maxForm bounds a urlencoded form.
const maxForm = 64 << 10

// isStream reports whether r is a script's read (a command's stream, a
// terminal's output) rather than a page: without a session it gets an
// error, not the sign-in page.
func isStream(r *http.Request) bool {
	return strings.HasSuffix(r.URL.Path, "/stream") || strings.HasSuffix(r.URL.Path, "/output") ||
		strings.HasSuffix(r.URL.Path, "/events")
}

// checkOrigin refuses a POST that a browser says comes from another
// origin. SameSite=Strict keeps the cookie from other sites' requests, but
// a preview host ({port}-{sandbox}.localhost, the sandbox's own app) is
// the same site as a dashboard opened at localhost; the CSRF token stops
// such a forgery, and this is one more wall.
func checkOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errcode.CSRFInvalid.New("this request comes from another origin")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errcode.CSRFInvalid.New("this request comes from another origin")
		}
	}
	return nil
}

// apiFailed handles err from an API call: a key the API no longer takes
// ends the session; anything else is shown.
func (d *Dashboard) apiFailed(rq *req, err error) {
	if client.IsCode(err, errcode.Unauthenticated) {
		d.sessions.endKey(rq.sess.key)
		if rq.r.Method == http.MethodGet && !isStream(rq.r) {
			http.Redirect(rq.w, rq.r, "/", http.StatusSeeOther)
			return
		}
	}
	d.fail(rq.w, rq.r, err)
}

// unavailable handles the error of a call a page is built on: a key the
// API no longer takes ends the page as apiFailed does; any other error
// says why that capability is off here, kept in off (if it says nothing
// yet) for the page to show. It reports whether the page must stop.
func (d *Dashboard) unavailable(rq *req, err error, off *string) bool {
	if client.IsCode(err, errcode.Unauthenticated) {
		d.apiFailed(rq, err)
		return true
	}
	if err != nil && *off == "" {
		*off = errMessage(err)
	}
	return false
}

// errorPage is what an error page shows.
type errorPage struct {
	Status  int
	Code    string
	Reason  string
	Message string
	Request string
}

// fail answers r with err: an HTML page to a browser's navigation, the
// API's JSON error shape to anything else (fetch, scripts, tests).
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *errcode.Error
	if !errors.As(err, &e) {
		e = errcode.Wrap(errcode.Internal, err, "internal error")
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		wire.WriteError(w, r, d.log, err, e.RequestID)
		return
	}
	status := wire.Status(e.Code)
	if status >= 500 && e.Err != nil {
		d.log.ErrorContext(r.Context(), "dashboard request failed", "path", r.URL.Path, "err", err)
	}
	d.render(w, r, status, "error", nil, errorPage{Status: status, Code: string(e.Code), Reason: e.Reason, Message: e.Message, Request: e.RequestID})
}

// view is what the layout gets: the page's data, and the session's CSRF
// token for its forms (empty when signed out).
type view struct {
	CSRF string
	Nav  string
	Data any
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, page string, sess *session, data any) {
	t := d.pages[page]
	v := view{Nav: page, Data: data}
	if sess != nil {
		v.CSRF = sess.csrf
	}
	var buf strings.Builder
	if err := t.Execute(&buf, v); err != nil {
		d.log.ErrorContext(r.Context(), "dashboard template failed", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

func (rq *req) render(d *Dashboard, page string, data any) {
	d.render(rq.w, rq.r, http.StatusOK, page, rq.sess, data)
}

func (rq *req) redirect(to string) { http.Redirect(rq.w, rq.r, to, http.StatusSeeOther) }
