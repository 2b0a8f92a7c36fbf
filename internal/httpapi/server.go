// Package httpapi is the daemon's HTTP API: the route table, handlers,
// middleware (request IDs, logging, recovery, authentication) and the one
// mapping from errors to responses.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/tenant"
	"github.com/berthdev/berth/internal/wire"
)

const maxJSON = wire.MaxJSONBody

// Pinger is a dependency /readyz checks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config wires a Server.
type Config struct {
	Version   string
	DataDir   string
	MaxUpload int64
	Logger    *slog.Logger
	Sandboxes *sandbox.Manager
	Browsers  *browser.Manager // nil: browser sessions off
	Jobs      *jobs.Service    // nil: sandbox jobs off
	Keys      *auth.Keys
	DB        Pinger
	// PreviewDomain turns on host-based previews: {port}-{sandbox}.{domain}.
	PreviewDomain string
	// PreviewSecret keys preview tokens and signed preview links.
	PreviewSecret []byte
	// MaxImport bounds an image archive for a template import.
	MaxImport int64
	// Collectors are more metrics to serve (the egress network's).
	Collectors []prometheus.Collector
	// Tenants stores the tenants.
	Tenants tenant.Store
	// DefaultTenant is the ID of the tenant admin keys create in: the
	// default tenant, or the one the data directory is bound to.
	DefaultTenant string
	// BoundTenant, when set, is the name of the only tenant this data
	// directory serves (serve --tenant).
	BoundTenant string
	// TenantMode refuses what is not isolated: the process runtime and
	// browser sessions that run on the host (serve --tenant-mode).
	TenantMode bool
	// Audit keeps the audit log; nil keeps none.
	Audit AuditStore
	// Idempotency and Sealer keep the first answers of creates with an
	// Idempotency-Key; either nil turns the header off.
	Idempotency IdempotencyStore
	Sealer      Sealer
	// RateLimits bound requests per source and per key; nil takes
	// DefaultRateLimits.
	RateLimits *RateLimits
	// StationID is this daemon's station ID in the Station method API
	// (station.go); "" is DefaultStationID.
	StationID string
	// Dashboard, when set, builds the web dashboard (internal/dashboard)
	// over the server it is given, which its pages call in process; it is
	// mounted at dashboardPaths (routes.go). Nil serves no dashboard.
	Dashboard func(api http.Handler) http.Handler
	// Cluster, when set, makes this server a cluster's Headquarters
	// (cluster.go): what runs is forwarded to the worker that owns it, and
	// Sandboxes, Browsers and Jobs are nil.
	Cluster *cluster.HQ
	// Worker, when set, makes this server a cluster's worker: requests
	// carry HQ's assertion instead of a key (cluster.go).
	Worker *cluster.Verifier
	// DBUnavailable, when set, tells a database that cannot be reached
	// from other failures: such a failure answers 503
	// database_unavailable (store.IsUnavailable).
	DBUnavailable func(error) bool
}

// Server serves the API.
type Server struct {
	cfg            Config
	sandboxTenants tenantCache
	audit          *auditor
	limits         *limiters
	log            *slog.Logger
	mux            *http.ServeMux
	reg            *prometheus.Registry
	reqDur         *prometheus.HistogramVec
	handler        http.Handler
	toolsets       toolsets // the MCP endpoint's (mcp.go)
	tenantNames    sync.Map // a Headquarters' tenant names by ID (cluster.go)
}

// New builds the server and its route table.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), reg: prometheus.NewRegistry()}
	s.reqDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_http_request_duration_seconds",
		Help:    "HTTP request latency by route and status class.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route", "code"})
	s.reg.MustRegister(s.reqDur,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_sandboxes_running", Help: "Sandboxes in the running state.",
		}, func() float64 {
			if cfg.Sandboxes == nil {
				return 0 // a Headquarters runs none
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			counts, err := cfg.Sandboxes.Count(ctx)
			if err != nil {
				return -1
			}
			return float64(counts["running"])
		}),
	)
	if cfg.Jobs != nil {
		s.reg.MustRegister(cfg.Jobs.Collectors()...)
	}
	s.reg.MustRegister(cfg.Collectors...)
	if cfg.Sandboxes != nil {
		for _, p := range cfg.Sandboxes.Config().Pools {
			s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "berth_warm_pool_ready", Help: "Started, unclaimed sandboxes in a warm pool.",
				ConstLabels: prometheus.Labels{"template": p.Template},
			}, func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				pools, err := cfg.Sandboxes.Pools(ctx)
				if err != nil {
					return -1
				}
				for _, st := range pools {
					if st.Template == p.Template {
						return float64(st.Ready)
					}
				}
				return 0
			}))
		}
	}
	rl := DefaultRateLimits
	if cfg.RateLimits != nil {
		rl = *cfg.RateLimits
	}
	s.limits = newLimiters(rl)
	if cfg.Audit != nil {
		s.audit = newAuditor(cfg.Audit, s)
		s.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "berth_audit_dropped_total", Help: "Audit entries dropped because the log's queue was full.",
		}, func() float64 { return float64(s.audit.dropped.Load()) }))
	}
	for _, r := range s.routes() {
		_, path, _ := cutSpace(r.pattern)
		var h http.Handler
		if _, forwarded := clusterKinds[ownerOf(path)]; forwarded && cfg.Cluster != nil {
			h = s.clustered(r.pattern, r.handler) // checks the owner's tenant itself
		} else if cfg.Cluster != nil {
			h = s.guard(ownerOf(path), s.clustered(r.pattern, r.handler))
		} else {
			h = s.guard(ownerOf(path), r.handler)
		}
		if r.access != public {
			h = s.authenticate(s.throttleKey(r.pattern, s.audited(r.pattern, s.authorize(r.access, s.idempotent(r.pattern, h)))))
			h = s.throttleSource(h)
		}
		s.mux.Handle(r.pattern, s.instrument(r.pattern, h))
	}
	if cfg.Dashboard != nil {
		dash := cfg.Dashboard(s)
		for _, p := range dashboardPaths {
			s.mux.Handle(p, s.instrument(p, dash))
		}
	}
	s.handler = s.withRequestID(s.withLogging(s.withRecover(s.withPreviews(s.rejectQueryCredentials(s.routed(s.mux))))))
	return s
}

// routed answers requests that match no route in the one error shape:
// ServeMux's own 404 and 405 answers are plain text. A request that
// matches no pattern gets ServeMux's handler for it, whose status (and
// Allow header) says which of the two it is.
func (s *Server) routed(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		probe := httptest.NewRecorder()
		h.ServeHTTP(probe, r)
		switch probe.Code {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", probe.Header().Get("Allow"))
			d := wire.Detail(errcode.MethodNotAllowed.New("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, probe.Header().Get("Allow")), requestID(r))
			wire.Encode(w, http.StatusMethodNotAllowed, apitype.ErrorBody{Error: d})
		case http.StatusNotFound:
			s.fail(w, r, errcode.RouteNotFound.New("no route for %s %s; see docs/api.md", r.Method, r.URL.Path))
		default:
			// A redirect to the clean path, say: ServeMux knows best.
			mux.ServeHTTP(w, r)
		}
	})
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

type ctxKey int

const (
	requestIDKey ctxKey = iota
	principalKey
	stationKey // the worker a method API call names, on a Headquarters
)

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// fail writes err as the error response of r.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ce *errcode.Error
	if s.cfg.DBUnavailable != nil && !errorsAs(err, &ce) && s.cfg.DBUnavailable(err) {
		err = errcode.DatabaseUnavailable.Wrap(err, "the database is not answering; try again shortly")
	}
	noteReason(r, err)
	wire.WriteError(w, r, s.log, err, requestID(r))
}

// Close writes what the audit log has queued; call it after the HTTP
// server has stopped.
func (s *Server) Close() {
	if s.audit != nil {
		s.audit.close()
	}
}

func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ident.New("req_")
		if outer := requestID(r); outer != "" && isInner(r) {
			id = outer // a method API call's REST request is the same request
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// statusWriter records the status for logs and metrics. It forwards
// Flush and Unwrap so streaming keeps working.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) withLogging(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "path", redactLivePath(r.URL.Path),
			"status", sw.status, "duration_ms", float64(time.Since(start).Microseconds())/1000,
			"request_id", requestID(r))
	})
}

func (s *Server) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "request_id", requestID(r),
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				s.fail(w, r, errcode.New(errcode.Internal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// credentialParams are query parameters that look like credentials. Keys
// in URLs end up in logs and browser history, so they are refused.
var credentialParams = []string{"token", "access_token", "api_key", "apikey", "key", "bearer", "auth"}

// keyShape matches an API key anywhere in a value, whatever the parameter.
var keyShape = regexp.MustCompile(regexp.QuoteMeta(auth.KeyPrefix) + `[a-z2-7]{52}`)

func (s *Server) rejectQueryCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.URL.Query drops every pair that holds a ';' (no longer a
		// separator), which would let "?token=KEY;x=1" through unseen; read
		// semicolons as separators here so nothing is skipped.
		q, _ := url.ParseQuery(strings.ReplaceAll(r.URL.RawQuery, ";", "&"))
		for _, p := range credentialParams {
			if q.Has(p) {
				s.fail(w, r, errcode.CredentialsInQuery.New("API keys are not accepted in the query string; send Authorization: Bearer"))
				return
			}
		}
		for _, vs := range q {
			for _, v := range vs {
				if keyShape.MatchString(v) {
					s.fail(w, r, errcode.CredentialsInQuery.New("API keys are not accepted in the query string; send Authorization: Bearer"))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate checks the request's key and runs next as its principal,
// under a context its revocation cancels.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Worker != nil {
			s.authenticateHQ(next, w, r)
			return
		}
		authz := r.Header.Get("Authorization")
		if isGotenbergPath(r.URL.Path) {
			authz = gotenbergAuthorization(r) // the key as a Basic-auth password too
		}
		p, err := s.cfg.Keys.Authenticate(r.Context(), authz)
		if errcode.Is(err, errcode.Unauthenticated) {
			s.authFailed(w, r, err)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		// What the request opens (a stream, a WebSocket) ends when its key
		// is revoked.
		ctx, stop := s.cfg.Keys.Watch(context.WithValue(r.Context(), principalKey, p), p.KeyID)
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authorize refuses a key whose scope is less than the route needs. It
// runs inside the audit log, so a refused call is recorded too.
func (s *Server) authorize(need access, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		switch {
		case need == admin && !p.Can(auth.ScopeAdmin):
			s.fail(w, r, errcode.ScopeInsufficient.New("this route needs an admin key; this key's scope is %s", p.Scope))
			return
		case need == execution && !p.Can(auth.ScopeExecution):
			s.fail(w, r, errcode.ScopeInsufficient.New("this route changes things and needs an execution key; this key's scope is %s", p.Scope))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) instrument(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.reqDur.WithLabelValues(pattern, fmt.Sprintf("%dxx", max(sw.status, 200)/100)).Observe(time.Since(start).Seconds())
	})
}

func (s *Server) handleMetrics() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

// proxyToAgent forwards a sandbox-scoped request to the sandbox's agent at
// agentPath ("{cid}" and "{tid}" are replaced), with the agent's token
// instead of the caller's key. bodyCap > 0 caps the request body (413
// beyond it). WebSocket upgrades pass through: ReverseProxy hijacks the
// client's connection and splices it to the agent's.
func (s *Server) proxyToAgent(agentPath string, bodyCap int64) http.Handler {
	// An oversized file is file_too_large, as the agent says it; other
	// bodies are body_too_large, as the JSON decoder says it.
	reason := errcode.BodyTooLarge
	if bodyCap > maxJSON {
		reason = errcode.FileTooLarge
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bodyCap > 0 {
			if r.ContentLength > bodyCap {
				s.fail(w, r, reason.New(
					"request body is %d bytes, more than the limit of %d", r.ContentLength, bodyCap))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, bodyCap)
		}
		c, err := s.cfg.Sandboxes.Agent(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		path := strings.NewReplacer("{cid}", url.PathEscape(r.PathValue("cid")),
			"{tid}", url.PathEscape(r.PathValue("tid")), "{name}", url.PathEscape(r.PathValue("name"))).Replace(agentPath)
		rp := c.Proxy(func(*http.Request) string { return path }, func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Set("X-Request-Id", requestID(r))
		})
		rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			var tooBig *http.MaxBytesError
			switch {
			case errorsAs(err, &tooBig):
				s.fail(w, r, reason.New(
					"request body is larger than the limit of %d bytes", tooBig.Limit))
			case r.Context().Err() != nil:
				// The client left; nobody reads an answer.
			default:
				s.fail(w, r, errcode.Wrap(errcode.Unavailable, err, "sandbox agent is not answering"))
			}
		}
		rp.ServeHTTP(w, r)
	})
}
