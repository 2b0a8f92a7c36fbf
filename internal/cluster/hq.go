package cluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/tenant"
)

// WorkerConfig is what HQ's configuration pins about a worker: where it
// listens and the tenant it is dedicated to. Its credential is derived from
// HQ's secret and its ID. A heartbeat changes none of them.
type WorkerConfig struct {
	ID     string
	URL    *url.URL
	Tenant string // a tenant's name; "" serves every tenant
}

// ParseWorker parses serve --worker's value: ID=URL[,tenant=NAME].
func ParseWorker(s string) (WorkerConfig, error) {
	id, rest, ok := strings.Cut(s, "=")
	if !ok {
		return WorkerConfig{}, errcode.WorkerConfigInvalid.New("--worker %q: want ID=URL[,tenant=NAME], e.g. w1=http://10.0.0.2:7081", s)
	}
	if err := ValidWorkerID(id); err != nil {
		return WorkerConfig{}, err
	}
	raw, opts, _ := strings.Cut(rest, ",")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return WorkerConfig{}, errcode.WorkerConfigInvalid.New("--worker %s: %q is not a base URL such as http://10.0.0.2:7081", id, raw)
	}
	u.Path = ""
	wc := WorkerConfig{ID: id, URL: u}
	if opts != "" {
		k, v, _ := strings.Cut(opts, "=")
		if k != "tenant" {
			return WorkerConfig{}, errcode.WorkerConfigInvalid.New("--worker %s: unknown option %q (the one option is tenant=NAME)", id, k)
		}
		if err := tenant.ValidName(v); err != nil {
			return WorkerConfig{}, errcode.WorkerConfigInvalid.New("--worker %s: tenant: %v", id, err)
		}
		wc.Tenant = v
	}
	return wc, nil
}

// ValidWorkerID checks a worker's ID: 1 to 63 of a-z, 0-9 and '-'.
func ValidWorkerID(id string) error {
	ok := id != "" && len(id) <= 63
	for _, c := range id {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
	}
	if !ok {
		return errcode.WorkerConfigInvalid.New("worker ID %q: use 1 to 63 of a-z, 0-9 and '-'", id)
	}
	return nil
}

// Worker statuses, as GET /v1/workers reports them.
const (
	StatusLive     = "live"     // its lease holds
	StatusDraining = "draining" // its lease holds; no new work
	StatusOffline  = "offline"  // its lease ran out less than LostAfter ago
	StatusLost     = "lost"     // its lease ran out LostAfter ago or more
	StatusUnknown  = "unknown"  // it has never heartbeat
	StatusMismatch = "mismatch" // it advertises another tenant than HQ pins
)

// WorkerStatus is a worker as HQ sees it: its pinned configuration and its
// lease.
type WorkerStatus struct {
	WorkerConfig
	Lease  *Lease // nil before its first heartbeat
	Status string
	Reason string // why it takes no work, when it does not
}

// Reachable reports whether requests may go to the worker: its lease holds.
func (ws WorkerStatus) Reachable() bool {
	return ws.Status == StatusLive || ws.Status == StatusDraining
}

// HQConfig configures a Headquarters.
type HQConfig struct {
	Secret  []byte
	Workers []WorkerConfig
	Store   Store
	// LostAfter is how long after its lease ran out a worker's resources
	// are reported lost (default 5 minutes).
	LostAfter time.Duration
	// MaxJSON caps a forwarded JSON answer (default 33 MiB: a method
	// API answer with base64 content); MaxResponse caps any other
	// forwarded body but a stream's (default 4 GiB, the largest file
	// download).
	MaxJSON     int64
	MaxResponse int64
	Logger      *slog.Logger
}

// HQ places resources on workers and forwards requests to their owners.
type HQ struct {
	cfg       HQConfig
	byID      map[string]WorkerConfig
	creds     map[string][]byte
	transport *http.Transport
	now       func() time.Time

	// Every forwarded request needs its resource's owner and the owner's
	// lease. A placement never changes (nothing moves), so it is kept once
	// read; leases are kept for leaseCacheTTL, a fraction of the time a
	// lease lasts.
	mu         sync.Mutex
	placements map[string]*Placement // kind/id
	leases     []*Lease
	leasesAt   time.Time
}

// leaseCacheTTL is how long HQ reuses the leases it read; maxPlacements
// bounds the placements it keeps.
const (
	leaseCacheTTL = time.Second
	maxPlacements = 100_000
)

// NewHQ checks cfg and builds the Headquarters' router.
func NewHQ(cfg HQConfig) (*HQ, error) {
	if len(cfg.Secret) < MinSecretLen {
		return nil, errcode.ServiceTokenInvalid.New("HQ's service secret must be at least %d characters", MinSecretLen)
	}
	cfg.LostAfter = cmp.Or(cfg.LostAfter, 5*time.Minute)
	cfg.MaxJSON = cmp.Or(cfg.MaxJSON, 33<<20)
	cfg.MaxResponse = cmp.Or(cfg.MaxResponse, 4<<30)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &HQ{cfg: cfg, byID: map[string]WorkerConfig{}, creds: map[string][]byte{}, now: time.Now,
		placements: map[string]*Placement{}}
	for _, w := range cfg.Workers {
		if _, dup := h.byID[w.ID]; dup {
			return nil, errcode.WorkerConfigInvalid.New("worker %s is given twice", w.ID)
		}
		h.byID[w.ID] = w
		h.creds[w.ID] = []byte(WorkerCredential(cfg.Secret, w.ID))
	}
	h.transport = &http.Transport{
		Proxy:                  nil, // straight to the worker, whatever the environment says
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return h, nil
}

// Close closes idle connections to workers.
func (h *HQ) Close() { h.transport.CloseIdleConnections() }

// Statuses returns every configured worker with its lease, by ID.
func (h *HQ) Statuses(ctx context.Context) ([]WorkerStatus, error) {
	leases, err := h.listLeases(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Lease{}
	for _, l := range leases {
		byID[l.ID] = l
	}
	var out []WorkerStatus
	for _, w := range h.cfg.Workers {
		out = append(out, h.status(w, byID[w.ID]))
	}
	slices.SortFunc(out, func(a, b WorkerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Status returns worker id's status.
func (h *HQ) Status(ctx context.Context, id string) (WorkerStatus, error) {
	w, ok := h.byID[id]
	if !ok {
		return WorkerStatus{}, errcode.WorkerNotFound.New("no worker %q is configured on this HQ (serve --worker)", id)
	}
	leases, err := h.listLeases(ctx)
	if err != nil {
		return WorkerStatus{}, err
	}
	for _, l := range leases {
		if l.ID == id {
			return h.status(w, l), nil
		}
	}
	return h.status(w, nil), nil
}

// listLeases returns the workers' leases, read at most leaseCacheTTL ago.
func (h *HQ) listLeases(ctx context.Context) ([]*Lease, error) {
	h.mu.Lock()
	if h.leases != nil && h.now().Sub(h.leasesAt) < leaseCacheTTL {
		defer h.mu.Unlock()
		return h.leases, nil
	}
	h.mu.Unlock()
	leases, err := h.cfg.Store.ListLeases(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.leases, h.leasesAt = leases, h.now()
	h.mu.Unlock()
	return leases, nil
}

// forgetLeases makes the next read of the leases go to the database.
func (h *HQ) forgetLeases() {
	h.mu.Lock()
	h.leases = nil
	h.mu.Unlock()
}

// placement returns a resource's placement.
func (h *HQ) placement(ctx context.Context, kind, id string) (*Placement, error) {
	key := kind + "/" + id
	h.mu.Lock()
	p := h.placements[key]
	h.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := h.cfg.Store.GetPlacement(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	h.keep(p)
	return p, nil
}

func (h *HQ) keep(p *Placement) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.placements) >= maxPlacements {
		clear(h.placements)
	}
	h.placements[p.Kind+"/"+p.ID] = p
}

func (h *HQ) status(w WorkerConfig, l *Lease) WorkerStatus {
	ws := WorkerStatus{WorkerConfig: w, Lease: l}
	now := h.now()
	switch {
	case l == nil || l.Incarnation == "":
		ws.Status, ws.Reason = StatusUnknown, "it has not heartbeat yet"
	case !now.Before(l.ExpiresAt) && now.Sub(l.ExpiresAt) >= h.cfg.LostAfter:
		ws.Status, ws.Reason = StatusLost, fmt.Sprintf("its lease ran out at %s and it has not come back", l.ExpiresAt.Format(time.RFC3339))
	case !now.Before(l.ExpiresAt):
		ws.Status, ws.Reason = StatusOffline, fmt.Sprintf("its lease ran out at %s", l.ExpiresAt.Format(time.RFC3339))
	case l.Capabilities.Tenant != w.Tenant:
		ws.Status, ws.Reason = StatusMismatch, fmt.Sprintf("it serves tenant %q but HQ pins it to %q", l.Capabilities.Tenant, w.Tenant)
	case l.Draining:
		ws.Status, ws.Reason = StatusDraining, "an operator is draining it"
	default:
		ws.Status = StatusLive
	}
	return ws
}

// Want is what a new resource asks of its worker.
type Want struct {
	Kind string
	// TenantName and TenantID are its tenant's.
	TenantName, TenantID string
	// Runtime is a sandbox's runtime ("" for the worker's default);
	// Template the template it starts from ("" or base: any worker).
	Runtime, Template string
	// Station, when set, names the one worker to use (the Station method
	// API's owner): it is refused, not replaced, when it cannot take the
	// resource.
	Station string
}

// Place picks the worker for a new resource: a live worker with the
// capability (the runtime, the template, browsers) and room, among the
// workers dedicated to its tenant if it has any, else among those serving
// every tenant; the least loaded.
func (h *HQ) Place(ctx context.Context, want Want) (WorkerConfig, error) {
	kind, tenantName, runtime, station := want.Kind, want.TenantName, want.Runtime, want.Station
	all, err := h.Statuses(ctx)
	if err != nil {
		return WorkerConfig{}, err
	}
	counts, err := h.cfg.Store.CountPlacements(ctx, kind)
	if err != nil {
		return WorkerConfig{}, err
	}
	// A tenant with workers of its own is placed on them only.
	dedicated := false
	for _, ws := range all {
		dedicated = dedicated || (tenantName != "" && ws.Tenant == tenantName)
	}
	type candidate struct {
		w    WorkerConfig
		load float64
		has  bool // lists the template asked for
	}
	var cs []candidate
	var why []string
	for _, ws := range all {
		c := ws.Lease
		switch {
		case station != "" && ws.ID != station:
			continue
		case ws.Status != StatusLive:
			why = append(why, fmt.Sprintf("%s is %s", ws.ID, ws.Status))
			continue
		case dedicated && ws.Tenant != tenantName:
			continue // a shared worker: this tenant has its own
		case ws.Tenant != "" && ws.Tenant != tenantName:
			if station != "" {
				why = append(why, fmt.Sprintf("%s is dedicated to another tenant", ws.ID))
			}
			continue // another tenant's: not even worth naming
		case kind == KindSandbox && runtime != "" && !slices.Contains(c.Capabilities.Runtimes, runtime):
			why = append(why, fmt.Sprintf("%s has no %s runtime", ws.ID, runtime))
			continue
		case kind == KindBrowser && !c.Capabilities.Browser:
			why = append(why, fmt.Sprintf("%s runs no browser sessions", ws.ID))
			continue
		}
		capacity := c.Capabilities.MaxSandboxes
		if kind == KindBrowser {
			capacity = c.Capabilities.MaxBrowserSessions
		}
		n := counts[ws.ID]
		if capacity > 0 && n >= capacity {
			why = append(why, fmt.Sprintf("%s is full (%d of %d)", ws.ID, n, capacity))
			continue
		}
		load := float64(n)
		if capacity > 0 {
			load = float64(n) / float64(capacity)
		}
		has := kind == KindSandbox && want.Template != "" && want.Template != "base" &&
			(slices.Contains(c.Capabilities.Templates, TemplateKey(want.TenantID, want.Template)) ||
				slices.Contains(c.Capabilities.Templates, TemplateKey("", want.Template)))
		cs = append(cs, candidate{w: ws.WorkerConfig, load: load, has: has})
	}
	// A sandbox from a template goes to a worker that lists it, if one
	// does. If none does (a lease not renewed since the template became
	// ready, or no such template), any may take it and its worker says.
	if withTemplate := slices.DeleteFunc(slices.Clone(cs), func(c candidate) bool { return !c.has }); len(withTemplate) > 0 {
		cs = withTemplate
	}
	if len(cs) == 0 {
		detail := "no worker is configured"
		if len(why) > 0 {
			detail = strings.Join(why, "; ")
		} else if len(all) > 0 {
			detail = "every worker is dedicated to another tenant"
		}
		return WorkerConfig{}, errcode.NoWorkerAvailable.New("no worker can take this %s now: %s; see berth workers ls", kindName(kind), detail)
	}
	// The least loaded; ties at random so that creates spread.
	rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	slices.SortStableFunc(cs, func(a, b candidate) int { return cmp.Compare(a.load, b.load) })
	return cs[0].w, nil
}

// JobRoute tells where a job of tenantName's for action (name@version)
// would run: dedicated when the tenant has workers of its own (its jobs
// queue for them alone). A job is queued, not placed: any of those
// workers that is live, not draining and has the action may take it. When
// none is, the error says why of each.
func (h *HQ) JobRoute(ctx context.Context, tenantName, action string) (dedicated bool, err error) {
	all, err := h.Statuses(ctx)
	if err != nil {
		return false, err
	}
	for _, ws := range all {
		dedicated = dedicated || (tenantName != "" && ws.Tenant == tenantName)
	}
	var why []string
	for _, ws := range all {
		switch {
		case dedicated && ws.Tenant != tenantName, !dedicated && ws.Tenant != "":
			continue
		case ws.Status != StatusLive:
			why = append(why, fmt.Sprintf("%s is %s", ws.ID, ws.Status))
		case !slices.Contains(ws.Lease.Capabilities.Actions, action):
			why = append(why, fmt.Sprintf("%s cannot run %s now", ws.ID, action))
		default:
			return dedicated, nil
		}
	}
	detail := strings.Join(why, "; ")
	if detail == "" {
		detail = "no worker takes this tenant's work"
	}
	return dedicated, errcode.NoWorkerAvailable.New("no worker can run %s now: %s; see berth workers ls and berth actions on a worker", action, detail)
}

func kindName(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

// Owner returns the placement of a resource and its owner's status. An
// owner whose lease ran out answers owner_unavailable naming it, or, past
// LostAfter, resource_lost; nothing is moved to another worker.
func (h *HQ) Owner(ctx context.Context, kind, id string) (*Placement, WorkerStatus, error) {
	p, err := h.placement(ctx, kind, id)
	if err != nil {
		return nil, WorkerStatus{}, err
	}
	ws, err := h.Status(ctx, p.Worker)
	if errcode.Is(err, errcode.NotFound) {
		ws = WorkerStatus{WorkerConfig: WorkerConfig{ID: p.Worker}, Status: StatusLost}
		return p, ws, errcode.ResourceLost.New("%s %s is on worker %s, which this HQ no longer lists (serve --worker): its state is lost here (delete it to forget it)", kindName(kind), id, p.Worker)
	}
	if err != nil {
		return p, ws, err
	}
	return p, ws, ownerError(kind, id, ws)
}

// ownerError is why a request cannot reach a resource on ws, or nil.
func ownerError(kind, id string, ws WorkerStatus) error {
	switch ws.Status {
	case StatusLive, StatusDraining:
		return nil
	case StatusLost:
		return errcode.ResourceLost.New("%s %s was on worker %s, and %s: its state is lost (delete it to forget it)", kindName(kind), id, ws.ID, ws.Reason)
	}
	return errcode.OwnerUnavailable.New("%s %s is on worker %s, which is %s: %s; try again when it is back (berth workers ls)", kindName(kind), id, ws.ID, ws.Status, ws.Reason)
}

// Forward is one request's trip to a worker.
type Forward struct {
	Worker WorkerConfig
	Caller Caller
	// RequestID is sent as X-Request-Id.
	RequestID string
	// Inspect, if set, reads the answer (a create's ID) before it is
	// passed on unchanged: it gets the status and at most 1 MiB of the
	// body. An error it returns is answered instead.
	Inspect func(status int, body []byte) error
	// Fail writes an error answer.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
}

// maxInspect bounds the body Inspect reads.
const maxInspect = 1 << 20

// Serve forwards r to f.Worker and copies the answer back. The client's
// credentials (Authorization, cookies) never travel; the worker sees HQ's
// assertion for f.Caller instead. Redirects are passed back, never
// followed. A failure before the request reached the worker is
// owner_unavailable; after, for a request that changes things,
// owner_outcome_unknown: the client should look before repeating it.
func (h *HQ) Serve(w http.ResponseWriter, r *http.Request, f Forward) {
	cred := h.creds[f.Worker.ID]
	rp := &httputil.ReverseProxy{
		Transport:     h.transport,
		FlushInterval: -1, // streams (SSE, NDJSON) pass at once
		ErrorLog:      slog.NewLogLogger(h.cfg.Logger.Handler(), slog.LevelDebug),
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The Host header stays the client's: the worker's links (a
			// preview's, a CDP endpoint's, a view link's) name HQ, and
			// preview hosts are routed by it.
			pr.Out.URL.Scheme, pr.Out.URL.Host = f.Worker.URL.Scheme, f.Worker.URL.Host
			for _, k := range []string{"Authorization", "Cookie", "Proxy-Authorization", AssertionHeader, "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
				pr.Out.Header.Del(k)
			}
			pr.Out.Header.Set(AssertionHeader, Assert(cred, f.Worker.ID, f.Caller, pr.Out.Method, pr.Out.URL.RequestURI(), h.now()))
			if f.RequestID != "" {
				pr.Out.Header.Set("X-Request-Id", f.RequestID)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			limit := h.cfg.MaxResponse
			switch ct := resp.Header.Get("Content-Type"); {
			case strings.HasPrefix(ct, "application/json"):
				limit = h.cfg.MaxJSON
			case strings.HasPrefix(ct, "text/event-stream"), resp.StatusCode == http.StatusSwitchingProtocols:
				limit = 0 // a stream: as long as the client follows it
			}
			if limit > 0 {
				if resp.ContentLength > limit {
					return errResponseTooLarge
				}
				resp.Body = &cappedBody{ReadCloser: resp.Body, left: limit}
			}
			if f.Inspect == nil || resp.StatusCode == http.StatusSwitchingProtocols {
				return nil
			}
			b, err := io.ReadAll(io.LimitReader(resp.Body, maxInspect))
			if err != nil {
				return err
			}
			resp.Body = readCloser{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
			return f.Inspect(resp.StatusCode, b)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left; nobody reads an answer
			}
			f.Fail(w, r, h.forwardError(r, f.Worker, err))
		},
	}
	rp.ServeHTTP(w, r)
}

var errResponseTooLarge = errors.New("the worker's answer is larger than HQ forwards")

type cappedBody struct {
	io.ReadCloser
	left int64
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (h *HQ) forwardError(r *http.Request, w WorkerConfig, err error) error {
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return ce // Inspect's
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errcode.BodyTooLarge.New("request body is larger than the limit of %d bytes", tooBig.Limit)
	}
	if errors.Is(err, errResponseTooLarge) {
		return errcode.OwnerOutcomeUnknown.Wrap(err, "worker %s's answer is larger than HQ forwards (%d bytes of JSON, %d of anything else)", w.ID, h.cfg.MaxJSON, h.cfg.MaxResponse)
	}
	if notDelivered(err) || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return errcode.OwnerUnavailable.Wrap(err, "worker %s is not answering", w.ID)
	}
	return errcode.OwnerOutcomeUnknown.Wrap(err, "worker %s stopped answering after the request reached it: "+
		"whether it took effect is unknown; look (GET) before repeating it", w.ID)
}

// notDelivered reports whether err says the request never reached the
// worker: no connection could be made.
func notDelivered(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}
