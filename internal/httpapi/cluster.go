package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/tenant"
	"github.com/berthdev/berth/internal/wire"
)

// A Headquarters (Config.Cluster) serves the same routes as one daemon, but
// what runs lives on workers: every route that names a sandbox or a browser
// resource is forwarded to the worker that owns it, creates are placed on
// a worker first, and lists gather every worker's. Keys, tenants, the audit
// log and the workers themselves are HQ's own. A worker (Config.Worker)
// serves its routes as one daemon does, to HQ only: its requests carry
// HQ's assertion instead of a key (internal/cluster). Sandbox jobs are
// HQ's own (its job service queues them for the workers); templates are
// made on every worker (cluster_templates.go).

// clusterKinds are the owner kinds whose routes HQ forwards to the owner.
var clusterKinds = map[ownerKind]string{
	ownsSandbox:    cluster.KindSandbox,
	ownsBrowser:    cluster.KindBrowser,
	ownsCheckpoint: cluster.KindCheckpoint,
	ownsRecording:  cluster.KindRecording,
}

// clustered is the handler HQ serves for pattern in place of next.
func (s *Server) clustered(pattern string, next http.Handler) http.Handler {
	method, path, _ := cutSpace(pattern)
	if strings.HasPrefix(path, "/v1/templates") {
		return s.hqTemplates(pattern)
	}
	if strings.HasPrefix(path, "/live/{token}") {
		return http.HandlerFunc(s.forwardLive)
	}
	if kind, ok := clusterKinds[ownerOf(path)]; ok {
		return s.forwardToOwner(kind, method+" "+path)
	}
	switch pattern {
	case "POST /v1/sandboxes":
		return s.placeAndForward(cluster.KindSandbox)
	case "POST /v1/browser/sessions":
		return s.placeAndForward(cluster.KindBrowser)
	case "GET /v1/sandboxes":
		return s.gather("sandboxes", true)
	case "GET /v1/browser/sessions":
		return s.gather("sessions", false)
	case "GET /v1/browser/checkpoints":
		return s.gather("checkpoints", false)
	case "GET /v1/browser/recordings":
		return s.gather("recordings", false)
	}
	return next
}

// afterForward are what HQ records when a forwarded route answers: the
// placements a create made or a delete ended.
var afterForward = map[string]struct {
	record string // the kind of the new resource whose ID the answer holds
	forget string // the kind whose placement the route ends
}{
	"DELETE /v1/sandboxes/{id}":                  {forget: cluster.KindSandbox},
	"DELETE /v1/browser/sessions/{id}":           {forget: cluster.KindBrowser},
	"DELETE /v1/browser/checkpoints/{id}":        {forget: cluster.KindCheckpoint},
	"DELETE /v1/browser/recordings/{id}":         {forget: cluster.KindRecording},
	"POST /v1/browser/sessions/{id}/checkpoints": {record: cluster.KindCheckpoint},
	"POST /v1/browser/sessions/{id}/recordings":  {record: cluster.KindRecording},
	"POST /v1/browser/checkpoints/{id}/resume":   {record: cluster.KindBrowser},
}

// drainingAllows reports whether r may reach a draining worker: reading,
// and what ends or shrinks work there.
func drainingAllows(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		return true
	}
	for _, end := range []string{"/cancel", "/stop", "/pause", "/hibernate", "/control/release"} {
		if strings.HasSuffix(r.URL.Path, end) {
			return true
		}
	}
	return false
}

// forwardToOwner forwards a route naming a resource of kind to its owner.
// Another tenant's resource answers as a missing one, here and again on
// the worker.
func (s *Server) forwardToOwner(kind, pattern string) http.Handler {
	after := afterForward[pattern]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hq := s.cfg.Cluster
		id := r.PathValue("id")
		p, ws, err := hq.Owner(r.Context(), kind, id)
		if p != nil && (scopeOf(r) != sandbox.AnyTenant && p.Tenant != scopeOf(r) || !pinnedTo(r, p.Worker)) {
			err = cluster.NotFound(kind, id)
		}
		if errcode.Is(err, errcode.Conflict) && r.Method == http.MethodDelete {
			s.deleteLost(w, r, kind, id, ws)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ws.Status == cluster.StatusDraining && !drainingAllows(r) {
			s.fail(w, r, errcode.WorkerDraining.New("%s %s is on worker %s, which is draining: it takes no new work; reading, cancelling and deleting still work",
				strings.ReplaceAll(kind, "_", " "), id, ws.ID))
			return
		}
		caller, err := s.caller(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		f := cluster.Forward{Worker: ws.WorkerConfig, Caller: caller, RequestID: requestID(r), Fail: s.fail}
		if after.record != "" || after.forget != "" {
			f.Inspect = func(status int, body []byte) error {
				switch {
				case after.forget != "" && (status < 300 || status == http.StatusNotFound):
					return hq.Forget(context.WithoutCancel(r.Context()), after.forget, id)
				case after.record != "" && status < 300:
					return s.record(r, after.record, ws.ID, p.Tenant, body)
				}
				return nil
			}
		}
		capBody(w, r, pattern, s.cfg.MaxUpload)
		hq.Serve(w, r, f)
	})
}

// pinnedTo reports whether r may reach a resource on worker: a method API
// call names its station, and reaches that station's resources only.
func pinnedTo(r *http.Request, worker string) bool {
	id, ok := r.Context().Value(stationKey).(string)
	return !ok || id == worker
}

// capBody bounds what HQ forwards as pattern's body: uploads and a port's
// traffic to maxUpload, everything else to maxJSON, as one daemon's
// routes do. Past it the forward fails with 413.
func capBody(w http.ResponseWriter, r *http.Request, pattern string, maxUpload int64) {
	limit := int64(maxJSON)
	if strings.HasSuffix(pattern, "/files/content") || strings.Contains(pattern, "/ports/{port}/") {
		limit = maxUpload
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
}

// deleteLost deletes a resource whose owner is lost: on the owner if it
// answers after all (its lease may just be stale, after the database was
// away), else by forgetting it. What a worker that comes back later still
// holds of it is its own to clean.
func (s *Server) deleteLost(w http.ResponseWriter, r *http.Request, kind, id string, ws cluster.WorkerStatus) {
	hq := s.cfg.Cluster
	forget := func(w http.ResponseWriter, r *http.Request) {
		if err := hq.Forget(context.WithoutCancel(r.Context()), kind, id); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	if ws.URL == nil { // no longer configured: nowhere to ask
		forget(w, r)
		return
	}
	caller, err := s.caller(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	hq.Serve(w, r, cluster.Forward{Worker: ws.WorkerConfig, Caller: caller, RequestID: requestID(r),
		Inspect: func(status int, _ []byte) error {
			if status < 300 || status == http.StatusNotFound {
				return hq.Forget(context.WithoutCancel(r.Context()), kind, id)
			}
			return nil
		},
		Fail: func(w http.ResponseWriter, r *http.Request, err error) {
			if errcode.ReasonOf(err) == errcode.OwnerUnavailable.String() {
				// It did not answer: lost indeed. Forgotten here, and
				// deleted there if it ever answers again.
				if err := hq.ForgetLost(context.WithoutCancel(r.Context()), kind, id); err != nil {
					s.fail(w, r, err)
					return
				}
				w.WriteHeader(http.StatusNoContent)
				return
			}
			s.fail(w, r, err)
		}})
}

// placeAndForward places a create of kind on a worker, forwards it, and
// records the new resource's owner from the answer.
func (s *Server) placeAndForward(kind string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSON))
		if err != nil {
			s.fail(w, r, errcode.BodyTooLarge.New("request body is larger than the limit of %d bytes", maxJSON))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var spec struct {
			Runtime  string `json:"runtime"`
			Template string `json:"template"`
		}
		_ = json.Unmarshal(body, &spec) // the worker says what is wrong with a bad body
		caller, err := s.caller(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		owner := s.tenantOf(r)
		ownerName, err := s.tenantName(r.Context(), owner)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		hq := s.cfg.Cluster
		if err := s.clusterQuota(r.Context(), kind, owner); err != nil {
			s.fail(w, r, err)
			return
		}
		station, _ := r.Context().Value(stationKey).(string)
		wc, err := hq.Place(r.Context(), cluster.Want{Kind: kind, TenantName: ownerName, TenantID: owner,
			Runtime: spec.Runtime, Template: spec.Template, Station: station})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		hq.Serve(w, r, cluster.Forward{Worker: wc, Caller: caller, RequestID: requestID(r), Fail: s.fail,
			Inspect: func(status int, body []byte) error {
				if status >= 300 {
					return nil
				}
				return s.record(r, kind, wc.ID, owner, body)
			}})
	})
}

// clusterQuota checks a create of kind against its tenant's limits on
// sandboxes and browser sessions, counted across the workers from the
// placements (each worker checks memory, CPUs and disk, and its own counts,
// again). Two creates at once may both pass here; the workers' own checks
// still hold.
func (s *Server) clusterQuota(ctx context.Context, kind, tenantID string) error {
	t, err := s.cfg.Tenants.GetTenant(ctx, tenantID)
	if err != nil {
		return err
	}
	use, err := s.cfg.Cluster.Usage(ctx, tenantID)
	if err != nil {
		return err
	}
	more := tenant.Usage{Sandboxes: 1}
	if kind == cluster.KindBrowser {
		more = tenant.Usage{BrowserSessions: 1}
	}
	return t.Limits.Check(tenant.Usage{Sandboxes: use.Sandboxes, BrowserSessions: use.BrowserSessions}, more)
}

// record keeps the owner of the resource whose ID the answer body holds.
func (s *Server) record(r *http.Request, kind, worker, tenantID string, body []byte) error {
	var created struct {
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.ID == "" {
		return errcode.OwnerOutcomeUnknown.New("worker %s answered the create without an ID; look for the resource before repeating it", worker)
	}
	err := s.cfg.Cluster.Record(context.WithoutCancel(r.Context()), &cluster.Placement{
		Kind: kind, ID: created.ID, Worker: worker, Tenant: tenantID, CreatedAt: cmp.Or(created.CreatedAt, time.Now())})
	if err != nil {
		return errcode.OwnerOutcomeUnknown.Wrap(err, "%s %s was made on worker %s, but HQ could not record it: look for it before repeating the create",
			strings.ReplaceAll(kind, "_", " "), created.ID, worker)
	}
	return nil
}

// caller is who a forwarded request acts as.
func (s *Server) caller(r *http.Request) (cluster.Caller, error) {
	p := principalOf(r)
	c := cluster.Caller{Principal: p}
	if p.Tenant != "" {
		name, err := s.tenantName(r.Context(), p.Tenant)
		if err != nil {
			return c, err
		}
		c.TenantName = name
	}
	return c, nil
}

// tenantName is the name of the tenant id. Names never change, so they are
// kept once read.
func (s *Server) tenantName(ctx context.Context, id string) (string, error) {
	if v, ok := s.tenantNames.Load(id); ok {
		return v.(string), nil
	}
	t, err := s.cfg.Tenants.GetTenant(ctx, id)
	if err != nil {
		return "", err
	}
	s.tenantNames.Store(id, t.Name)
	return t.Name, nil
}

// gather answers a list route from every worker that may hold the
// caller's resources, merged in (created_at, id) order. Workers that do
// not answer are named in the Berth-Unavailable-Workers header; their
// resources are missing from the page. paged lists take ?limit= and
// ?cursor= as one daemon's do.
func (s *Server) gather(field string, paged bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, after := 0, position{}
		if paged {
			var err error
			if limit, err = pageLimit(q.Get("limit")); err != nil {
				s.fail(w, r, err)
				return
			}
			if after, err = s.readPosition(r, field); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		caller, err := s.caller(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		hq := s.cfg.Cluster
		all, err := hq.Statuses(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		fq := url.Values{}
		for k, v := range q {
			if k != "limit" && k != "cursor" {
				fq[k] = v
			}
		}
		type item struct {
			raw json.RawMessage
			pos position
		}
		var (
			mu      sync.Mutex
			items   []item
			missing []string
			wg      sync.WaitGroup
		)
		for _, ws := range all {
			if caller.TenantName != "" && ws.Tenant != "" && ws.Tenant != caller.TenantName {
				continue // another tenant's worker holds nothing of this one's
			}
			if !ws.Reachable() {
				if ws.Status != cluster.StatusUnknown {
					missing = append(missing, ws.ID)
				}
				continue
			}
			wg.Go(func() {
				var page map[string][]json.RawMessage
				err := hq.Get(r.Context(), ws.WorkerConfig, caller, r.URL.Path+"?"+fq.Encode(), requestID(r), &page)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					s.log.WarnContext(r.Context(), "a worker did not answer a list", "worker", ws.ID, "err", err)
					missing = append(missing, ws.ID)
					return
				}
				for _, raw := range page[field] {
					var k struct {
						ID        string    `json:"id"`
						CreatedAt time.Time `json:"created_at"`
					}
					_ = json.Unmarshal(raw, &k)
					if after.before(k.CreatedAt, k.ID) {
						items = append(items, item{raw, position{k.CreatedAt, k.ID}})
					}
				}
			})
		}
		wg.Wait()
		slices.SortFunc(items, func(a, b item) int {
			return cmp.Or(a.pos.At.Compare(b.pos.At), strings.Compare(a.pos.ID, b.pos.ID))
		})
		out := map[string]any{}
		if limit > 0 {
			var next string
			items, next = nextPage(s, r, field, items, limit, func(it item) position { return it.pos })
			if next != "" {
				out["next_cursor"] = next
			}
		}
		raws := make([]json.RawMessage, 0, len(items))
		for _, it := range items {
			raws = append(raws, it.raw)
		}
		out[field] = raws
		if len(missing) > 0 {
			slices.Sort(missing)
			w.Header().Set("Berth-Unavailable-Workers", strings.Join(missing, ","))
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

// Workers: GET /v1/workers and one worker's routes.

func (s *Server) handleListWorkers() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := apitype.WorkerList{Role: "single", Workers: []apitype.Worker{}}
		if s.cfg.Cluster != nil {
			out.Role = "hq"
			all, placed, err := s.cfg.Cluster.Census(r.Context())
			if err != nil {
				s.fail(w, r, err)
				return
			}
			for _, ws := range all {
				out.Workers = append(out.Workers, toAPIWorker(ws, placed[ws.ID]))
			}
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleWorker(drain *bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if s.cfg.Cluster == nil {
			s.fail(w, r, errcode.WorkerNotFound.New("this daemon runs alone (berth serve) and has no workers; workers belong to a cluster's HQ (--role hq)"))
			return
		}
		hq := s.cfg.Cluster
		if drain != nil { // refuses a worker HQ does not list, as Status does
			if err := hq.SetDraining(r.Context(), id, *drain); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		ws, err := hq.Status(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		placed, err := hq.Placed(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, toAPIWorker(ws, placed[id]))
	})
}

func toAPIWorker(ws cluster.WorkerStatus, placed cluster.Load) apitype.Worker {
	out := apitype.Worker{ID: ws.ID, URL: ws.URL.String(), Tenant: ws.Tenant, Status: ws.Status, Reason: ws.Reason,
		Placed: apitype.WorkerLoad(placed), Capabilities: apitype.WorkerCapability{Runtimes: []string{}}}
	if l := ws.Lease; l != nil {
		out.Draining = l.Draining
		if l.Incarnation != "" {
			out.Incarnation = l.Incarnation
			out.StartedAt, out.HeartbeatAt, out.LeaseExpiresAt = &l.StartedAt, &l.HeartbeatAt, &l.ExpiresAt
		}
		c := l.Capabilities
		out.Capabilities = apitype.WorkerCapability{Runtimes: append([]string{}, c.Runtimes...), Browser: c.Browser,
			MaxSandboxes: c.MaxSandboxes, MaxBrowserSessions: c.MaxBrowserSessions, Version: c.Version,
			Actions: c.Actions, Templates: c.Templates}
		out.Load = apitype.WorkerLoad(l.Load)
	}
	return out
}

// forwardPreview sends a preview host's request to the sandbox's owner:
// the worker checks the preview token.
func (s *Server) forwardPreview(w http.ResponseWriter, r *http.Request, t previewTarget) {
	hq := s.cfg.Cluster
	_, ws, err := hq.Owner(r.Context(), cluster.KindSandbox, t.sandboxID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	hq.Serve(w, r, cluster.Forward{Worker: ws.WorkerConfig, RequestID: requestID(r), Fail: s.fail})
}

// forwardLive sends a view link's page and socket to the owner of the
// session its token names; the worker checks the token's signature.
func (s *Server) forwardLive(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(r.PathValue("token"), ".")
	hq := s.cfg.Cluster
	_, ws, err := hq.Owner(r.Context(), cluster.KindBrowser, id)
	if errcode.Is(err, errcode.NotFound) {
		err = errcode.LiveLinkInvalid.New("this view link is not valid (it expired, or its session is gone)")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	hq.Serve(w, r, cluster.Forward{Worker: ws.WorkerConfig, RequestID: requestID(r), Fail: s.fail})
}

// authenticateHQ is a worker's authentication: HQ's assertion names the
// caller. A worker dedicated to a tenant refuses every other tenant's
// callers too (HQ checks first).
func (s *Server) authenticateHQ(next http.Handler, w http.ResponseWriter, r *http.Request) {
	c, err := s.cfg.Worker.Verify(r)
	if err != nil {
		s.authFailed(w, r, err)
		return
	}
	if b := s.cfg.BoundTenant; b != "" && !c.Admin() && c.TenantName != b {
		s.fail(w, r, errcode.TenantBound.New("this worker serves tenant %q only", b))
		return
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, c.Principal)))
}

// hqSystem is GET /v1/system on a Headquarters: its version, and the
// runtimes its live workers offer, with counts from the placements.
func (s *Server) hqSystem(w http.ResponseWriter, r *http.Request) {
	out := apitype.System{Version: s.cfg.Version, Runtimes: []apitype.RuntimeInfo{}, Pools: []apitype.Pool{}}
	p := principalOf(r)
	if p.Admin() {
		out.DataDir = s.cfg.DataDir
	}
	all, err := s.cfg.Cluster.Statuses(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	seen := map[string]bool{}
	for _, ws := range all {
		if ws.Status != cluster.StatusLive {
			continue
		}
		for _, rt := range ws.Lease.Capabilities.Runtimes {
			if !seen[rt] {
				seen[rt] = true
				out.Runtimes = append(out.Runtimes, apitype.RuntimeInfo{Name: rt, Isolated: rt != "process", Available: true})
			}
		}
		out.Browser.Available = out.Browser.Available || ws.Lease.Capabilities.Browser
	}
	if p.Admin() {
		placed, err := s.cfg.Cluster.Placed(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, l := range placed {
			out.Counts.Sandboxes += l.Sandboxes
			out.Browser.Sessions += l.BrowserSessions
		}
	} else {
		l, err := s.cfg.Cluster.Usage(r.Context(), p.Tenant)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Counts.Sandboxes, out.Browser.Sessions = l.Sandboxes, l.BrowserSessions
	}
	if s.cfg.Jobs != nil {
		out.Jobs = s.cfg.Jobs.Info(r.Context()) // the cluster's active jobs; pools are the workers'
	}
	wire.Encode(w, http.StatusOK, out)
}

// hqStations is GET /api/v1/execution on a Headquarters: each worker as a
// station, with what its lease advertises. A tenant's key sees the workers
// that may hold its resources.
func (s *Server) hqStations(w http.ResponseWriter, r *http.Request) {
	caller, err := s.caller(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	all, placed, err := s.cfg.Cluster.Census(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := stationList{Stations: []stationInfo{}}
	for _, ws := range all {
		if caller.TenantName != "" && ws.Tenant != "" && ws.Tenant != caller.TenantName {
			continue
		}
		info := stationInfo{StationID: ws.ID, Status: ws.Status,
			Capabilities: stationCapabilities{Primitives: []string{}, Runtimes: []apitype.RuntimeInfo{},
				Sandbox: stationPrimitive{Methods: methodList(primitiveSandbox)}},
			Backends: stationBackends{Sandbox: []string{}, Browser: []string{}},
		}
		if ws.Status == cluster.StatusLive {
			info.Status = "online"
		}
		l := ws.Lease
		if l != nil && l.Incarnation != "" {
			c := l.Capabilities
			info.Version = c.Version
			info.Backends.Sandbox = append(info.Backends.Sandbox, c.Runtimes...)
			for i, rt := range c.Runtimes {
				info.Capabilities.Runtimes = append(info.Capabilities.Runtimes, apitype.RuntimeInfo{Name: rt, Isolated: rt != "process", Available: true, Default: i == 0})
			}
			if len(c.Runtimes) > 0 {
				info.Capabilities.Primitives = append(info.Capabilities.Primitives, primitiveSandbox)
			}
			if c.Browser {
				info.Capabilities.Primitives = append(info.Capabilities.Primitives, primitiveBrowser)
				info.Capabilities.Browser = &stationPrimitive{Methods: methodList(primitiveBrowser)}
				info.Backends.Browser = append(info.Backends.Browser, "chromium")
			}
			takes := ws.Status == cluster.StatusLive
			n := placed[ws.ID]
			info.Availability.Sandbox = stationSlots{Available: takes && len(c.Runtimes) > 0 && (c.MaxSandboxes == 0 || n.Sandboxes < c.MaxSandboxes),
				Active: n.Sandboxes, Max: c.MaxSandboxes}
			info.Availability.Browser = stationSlots{Available: takes && c.Browser && (c.MaxBrowserSessions == 0 || n.BrowserSessions < c.MaxBrowserSessions),
				Active: n.BrowserSessions, Max: c.MaxBrowserSessions}
		}
		if !ws.Reachable() || ws.Status == cluster.StatusDraining {
			info.Availability.Sandbox.Reason, info.Availability.Browser.Reason = ws.Reason, ws.Reason
		}
		out.Stations = append(out.Stations, info)
	}
	wire.Encode(w, http.StatusOK, stationAnswer{Data: out})
}
