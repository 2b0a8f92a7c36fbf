package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// Tenancy at the API's edge. Every route that names a resource by ID is
// checked here, before its handler runs, against the tenant of the key
// (ownerOf reads the kind from the route's path, so a new route cannot be
// missed: an ID of a kind it does not know stops the daemon from
// starting). Another tenant's resource answers exactly as one that does
// not exist, and nothing happens to it. Creates and lists take the tenant
// themselves; behind this edge the domain packages act on IDs.

// principalOf is who r acts as (set by authenticate).
func principalOf(r *http.Request) auth.Principal {
	p, _ := r.Context().Value(principalKey).(auth.Principal)
	return p
}

// tenantOf is the tenant r's creates belong to: its key's, or for an admin
// key the daemon's default (or bound) tenant.
func (s *Server) tenantOf(r *http.Request) string {
	if p := principalOf(r); !p.Admin() {
		return p.Tenant
	}
	return s.cfg.DefaultTenant
}

// scopeOf is the tenant whose resources r sees: sandbox.AnyTenant for an
// admin key.
func scopeOf(r *http.Request) string {
	if p := principalOf(r); !p.Admin() {
		return p.Tenant
	}
	return sandbox.AnyTenant
}

// ownerKind is the kind of resource a route's ID names.
type ownerKind string

const (
	ownsSandbox    ownerKind = "sandbox"
	ownsBrowser    ownerKind = "browser_session"
	ownsCheckpoint ownerKind = "browser_checkpoint"
	ownsRecording  ownerKind = "browser_recording"
	ownsJob        ownerKind = "job"      // jobs.Service checks the principal's tenant
	ownsFile       ownerKind = "file"     // jobs.Service checks the principal's tenant
	ownsTemplate   ownerKind = "template" // the handler looks it up in the key's tenant
	ownsKey        ownerKind = "key"      // admin routes
	ownsTenant     ownerKind = "tenant"   // admin routes, and a tenant's own
	ownsWorker     ownerKind = "worker"   // admin routes
)

// ownerOf returns the kind of resource path's ID names, "" for a path
// without one. It panics on a path whose wildcard it does not know.
func ownerOf(path string) ownerKind {
	switch {
	case !strings.Contains(path, "{"):
		return ""
	case strings.HasPrefix(path, "/v1/sandboxes/{id}"):
		return ownsSandbox
	case strings.HasPrefix(path, "/v1/browser/sessions/{id}"):
		return ownsBrowser
	case strings.HasPrefix(path, "/v1/browser/checkpoints/{id}"):
		return ownsCheckpoint
	case strings.HasPrefix(path, "/v1/browser/recordings/{id}"):
		return ownsRecording
	case strings.HasPrefix(path, "/v1/jobs/{id}"):
		return ownsJob
	case path == "/v1/files/{sha256}":
		return ownsFile
	case strings.HasPrefix(path, "/v1/templates/{name}"):
		return ownsTemplate
	case strings.HasPrefix(path, "/v1/keys/{id}"):
		return ownsKey
	case strings.HasPrefix(path, "/v1/tenants/{id}"):
		return ownsTenant
	case strings.HasPrefix(path, "/v1/workers/{id}"):
		return ownsWorker
	case path == "/v1/actions/{name}", path == "/v1/convert/{action}":
		return "" // the action catalogue: the same for every tenant
	case strings.HasPrefix(path, "/live/{token}"):
		return "" // a view link: its signed token is the capability, and names its session
	case strings.HasPrefix(path, "/api/v1/stations/{stationId}/execution/"),
		strings.HasPrefix(path, "/api/v1/tenant/stations/{stationId}/execution/"):
		return "" // the method API: IDs are in the body, and each method's REST route checks its owner
	}
	panic("httpapi: route " + path + " names a resource whose owner is not checked; add it to ownerOf")
}

// guard checks that r's key may reach the resource the route's ID names,
// before next runs. Admin keys reach everything. Jobs, files and
// templates need no check here: the one call their handlers make to find
// them takes the principal (jobs.Principal, the template scope) and
// answers another tenant's as missing, so a check here would read them
// twice.
func (s *Server) guard(kind ownerKind, next http.Handler) http.Handler {
	check := map[ownerKind]func(*http.Request) error{
		ownsSandbox:    s.ownsSandbox,
		ownsBrowser:    s.ownsBrowserSession,
		ownsCheckpoint: s.ownsBrowserCheckpoint,
		ownsRecording:  s.ownsRecording,
	}[kind]
	if check == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := check(r); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tenantCache caches each sandbox's tenant: once set it never changes
// (a warm-pool member has none until its claim gives it one) and IDs are
// never reused, so an entry can only be stale for a deleted sandbox, which
// the handler then finds missing.
type tenantCache struct {
	mu sync.Mutex
	m  map[string]string
}

const tenantCacheMax = 1 << 16

func (c *tenantCache) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[id]
	return t, ok
}

func (c *tenantCache) put(id, tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= tenantCacheMax {
		c.m = map[string]string{}
	}
	c.m[id] = tenant
}

func (s *Server) ownsSandbox(r *http.Request) error {
	p := principalOf(r)
	if p.Admin() {
		return nil
	}
	id := r.PathValue("id")
	t, ok := s.sandboxTenants.get(id)
	if !ok {
		sb, err := s.cfg.Sandboxes.Get(r.Context(), id)
		if err != nil {
			return err
		}
		if t = sb.Tenant; t != "" {
			s.sandboxTenants.put(id, t)
		}
	}
	if t != p.Tenant {
		return errcode.SandboxNotFound.New("sandbox %q not found", id)
	}
	return nil
}

func (s *Server) ownsBrowserSession(r *http.Request) error {
	p := principalOf(r)
	if p.Admin() || s.cfg.Browsers == nil {
		return nil // the handler says browser sessions are off
	}
	id := r.PathValue("id")
	sess, err := s.cfg.Browsers.Get(id)
	owner := ""
	if err == nil {
		owner = sess.Tenant()
	} else if errcode.Has(err, errcode.SessionNotFound) {
		// A session no longer live (closed, or of an earlier run of the
		// daemon) is its journal's: the tenant recorded there owns it.
		if owner, err = s.cfg.Browsers.JournalTenant(r.Context(), id); err != nil {
			return err
		}
	} else {
		return err
	}
	if owner != p.Tenant {
		return errcode.SessionNotFound.New("browser session %q not found", id)
	}
	return nil
}

func (s *Server) ownsBrowserCheckpoint(r *http.Request) error {
	p := principalOf(r)
	if p.Admin() || s.cfg.Browsers == nil {
		return nil // the handler says browser sessions are off
	}
	_, err := s.cfg.Browsers.GetCheckpoint(r.Context(), p.Tenant, r.PathValue("id"))
	return err
}

// Cursors. A list's next page is named by an opaque cursor that binds the
// position to the tenant that listed it: a cursor from another tenant (or
// forged) is a 400, never another tenant's page.

func (s *Server) cursorMAC(scope, list, pos string) []byte {
	m := hmac.New(sha256.New, s.cfg.PreviewSecret)
	m.Write([]byte("berth-cursor\x00" + scope + "\x00" + list + "\x00" + pos))
	return m.Sum(nil)[:16]
}

// cursor returns the cursor of position pos in list for r's tenant.
func (s *Server) cursor(r *http.Request, list, pos string) string {
	raw := append([]byte(pos+"\x00"), s.cursorMAC(scopeOf(r), list, pos)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// readCursor returns the position r's ?cursor= names in list, "" for none.
func (s *Server) readCursor(r *http.Request, list string) (string, error) {
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	i := strings.IndexByte(string(raw), 0)
	if err != nil || i < 0 || !hmac.Equal(raw[i+1:], s.cursorMAC(scopeOf(r), list, string(raw[:i]))) {
		return "", errcode.CursorInvalid.New("the cursor is not one this list gave this key's tenant; start again without it")
	}
	return string(raw[:i]), nil
}

// position is a place in a list ordered by (time, ID): what a cursor
// carries.
type position struct {
	At time.Time
	ID string
}

func (p position) String() string { return p.At.UTC().Format(time.RFC3339Nano) + " " + p.ID }

// before reports whether (at, id) comes after p in ascending order; the
// zero position comes before everything.
func (p position) before(at time.Time, id string) bool {
	if p.ID == "" {
		return true
	}
	return at.After(p.At) || (at.Equal(p.At) && id > p.ID)
}

// readPosition reads r's ?cursor= of list as a position.
func (s *Server) readPosition(r *http.Request, list string) (position, error) {
	c, err := s.readCursor(r, list)
	if err != nil || c == "" {
		return position{}, err
	}
	at, id, ok := strings.Cut(c, " ")
	t, terr := time.Parse(time.RFC3339Nano, at)
	if !ok || terr != nil || id == "" {
		return position{}, errcode.CursorInvalid.New("the cursor is malformed; start again without it")
	}
	return position{t, id}, nil
}

// nextPage trims items, listed with one more than limit, to limit, and
// returns the cursor of the next page of list when there is one.
func nextPage[T any](s *Server, r *http.Request, list string, items []T, limit int, pos func(T) position) ([]T, string) {
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	return items, s.cursor(r, list, pos(items[limit-1]).String())
}

// pageLimit reads ?limit=: 0 (all) when absent, else 1-1000.
func pageLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, errcode.InvalidFields(map[string]string{"limit": "must be 1-1000"})
	}
	return n, nil
}
