package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// The keys, tenants and audit pages. Keys and tenants are the API's admin
// routes: a tenant's key gets the API's own refusal, shown on the page.

// maxTenantUsage bounds the tenants whose usage the tenants page reads
// (one GET /v1/tenants/{id} each).
const maxTenantUsage = 100

type keysPage struct {
	// Refused is the API's refusal (a key that is not an admin's), if so.
	Refused string
	Keys    []apitype.Key
	Tenants []apitype.Tenant
}

func (d *Dashboard) handleKeys(rq *req) {
	var p keysPage
	keys, err := rq.c.ListKeys(rq.ctx())
	if !d.adminRefusal(rq, err, &p.Refused) {
		return
	}
	p.Keys = keys
	if p.Refused == "" {
		p.Tenants, _ = rq.c.ListTenants(rq.ctx())
	}
	rq.render(d, "keys", p)
}

// adminRefusal sorts err from an admin route: nil or a permission
// refusal (the page shows its message in *refused) lets the page go on
// (true); anything else is answered here (false).
func (d *Dashboard) adminRefusal(rq *req, err error, refused *string) bool {
	switch {
	case err == nil:
		return true
	case client.IsCode(err, errcode.PermissionDenied):
		*refused = errMessage(err)
		return true
	}
	d.apiFailed(rq, err)
	return false
}

// handleCreateKey issues a key and sends the browser to the key's page,
// where its secret is shown once: the secret waits in the daemon's memory
// for that one GET of this session (never in a URL), so reloading the
// page, or the back button, shows it no more.
func (d *Dashboard) handleCreateKey(rq *req) {
	f := postForm(rq)
	k, err := rq.c.CreateKey(rq.ctx(), apitype.CreateKeyRequest{
		Name:   strings.TrimSpace(f.Get("name")),
		Scope:  f.Get("scope"),
		Tenant: strings.TrimSpace(f.Get("tenant")),
	})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	d.secrets.put(rq.sess, k.ID, k.Secret)
	rq.redirect("/ui/keys/" + url.PathEscape(k.ID))
}

type keyPage struct {
	Key apitype.Key
	// Secret is the new key's secret, on the one GET after it was made.
	Secret string
	// TenantName is the key's tenant's name, when the list has it.
	TenantName string
}

func (d *Dashboard) handleKey(rq *req) {
	id := rq.r.PathValue("id")
	keys, err := rq.c.ListKeys(rq.ctx())
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := keyPage{Secret: d.secrets.take(rq.sess, id)}
	found := false
	for _, k := range keys {
		if k.ID == id {
			p.Key, found = k, true
		}
	}
	if !found {
		d.fail(rq.w, rq.r, errcode.KeyNotFound.New("no key %s", id))
		return
	}
	rq.render(d, "key", p)
}

func (d *Dashboard) handleRevokeKey(rq *req) {
	if err := rq.c.RevokeKey(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/keys")
}

type tenantsPage struct {
	Refused string
	Rows    []tenantRow
	Fields  []limitField
	// Unread counts the tenants whose usage was not read (past
	// maxTenantUsage).
	Unread int
}

// tenantRow is a tenant with a cell per limit: what it uses and may.
type tenantRow struct {
	Tenant apitype.Tenant
	Cells  []usageCell
}

type usageCell struct{ Label, Used, Limit string }

// limitField is one limit's form field.
type limitField struct{ Name, Label, Value string }

// limitNames are the limits' form fields and labels, in the pages' order.
var limitNames = [...][2]string{
	{"max_sandboxes", "Sandboxes"}, {"max_running_sandboxes", "Running"}, {"max_memory_mb", "Memory MB"},
	{"max_cpus", "CPUs"}, {"max_disk_mb", "Disk MB"}, {"max_browser_sessions", "Browser sessions"}, {"jobs", "Jobs"},
}

// limitValues are t's limits in limitNames' order.
func limitValues(l apitype.TenantLimits) [7]float64 {
	return [7]float64{float64(l.MaxSandboxes), float64(l.MaxRunningSandboxes), float64(l.MaxMemoryMB),
		l.MaxCPUs, float64(l.MaxDiskMB), float64(l.MaxBrowserSessions), float64(l.Jobs)}
}

func limitFields(l apitype.TenantLimits) []limitField {
	vals := limitValues(l)
	out := make([]limitField, len(limitNames))
	for i, n := range limitNames {
		out[i] = limitField{Name: n[0], Label: n[1]}
		if vals[i] != 0 {
			out[i].Value = strconv.FormatFloat(vals[i], 'f', -1, 64)
		}
	}
	return out
}

func newTenantRow(t apitype.Tenant) tenantRow {
	row := tenantRow{Tenant: t}
	lim := limitValues(t.Limits)
	var used [7]float64
	if u := t.Usage; u != nil {
		used = [7]float64{float64(u.Sandboxes), float64(u.RunningSandboxes), float64(u.MemoryMB),
			u.CPUs, float64(u.DiskMB), float64(u.BrowserSessions), float64(u.Jobs)}
	}
	for i, n := range limitNames {
		c := usageCell{Label: n[1], Used: "?", Limit: "∞"}
		if t.Usage != nil {
			c.Used = strconv.FormatFloat(used[i], 'f', -1, 64)
		}
		if lim[i] != 0 {
			c.Limit = strconv.FormatFloat(lim[i], 'f', -1, 64)
		}
		row.Cells = append(row.Cells, c)
	}
	return row
}

func (d *Dashboard) handleTenants(rq *req) {
	p := tenantsPage{Fields: limitFields(apitype.TenantLimits{})}
	ts, err := rq.c.ListTenants(rq.ctx())
	if !d.adminRefusal(rq, err, &p.Refused) {
		return
	}
	for i, t := range ts {
		if i >= maxTenantUsage {
			p.Unread++
		} else if full, err := rq.c.GetTenant(rq.ctx(), t.ID); err == nil {
			t = full
		}
		p.Rows = append(p.Rows, newTenantRow(t))
	}
	rq.render(d, "tenants", p)
}

func (d *Dashboard) handleCreateTenant(rq *req) {
	f := postForm(rq)
	lim, problems := limitsForm(f)
	if len(problems) > 0 {
		d.fail(rq.w, rq.r, errcode.InvalidFields(problems))
		return
	}
	t, err := rq.c.CreateTenant(rq.ctx(), apitype.CreateTenantRequest{Name: strings.TrimSpace(f.Get("name")), Limits: lim})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/tenants/" + url.PathEscape(t.ID))
}

type tenantPage struct {
	Row    tenantRow
	Fields []limitField
}

func (d *Dashboard) handleTenant(rq *req) {
	t, err := rq.c.GetTenant(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.render(d, "tenant", tenantPage{Row: newTenantRow(t), Fields: limitFields(t.Limits)})
}

// handleSetTenant sets every limit of the form (an empty field is 0, no
// limit of the tenant's own).
func (d *Dashboard) handleSetTenant(rq *req) {
	id := rq.r.PathValue("id")
	lim, problems := limitsForm(postForm(rq))
	if len(problems) > 0 {
		d.fail(rq.w, rq.r, errcode.InvalidFields(problems))
		return
	}
	_, err := rq.c.SetTenant(rq.ctx(), id, apitype.SetTenantRequest{
		MaxSandboxes: &lim.MaxSandboxes, MaxRunningSandboxes: &lim.MaxRunningSandboxes,
		MaxMemoryMB: &lim.MaxMemoryMB, MaxCPUs: &lim.MaxCPUs, MaxDiskMB: &lim.MaxDiskMB,
		MaxBrowserSessions: &lim.MaxBrowserSessions, Jobs: &lim.Jobs,
	})
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/tenants/" + url.PathEscape(id))
}

func (d *Dashboard) handleDeleteTenant(rq *req) {
	if err := rq.c.DeleteTenant(rq.ctx(), rq.r.PathValue("id")); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/tenants")
}

// postForm is the request's urlencoded form (read already when the CSRF
// token came in it), bounded by maxForm.
func postForm(rq *req) url.Values {
	if rq.r.PostForm == nil {
		rq.r.Body = http.MaxBytesReader(rq.w, rq.r.Body, maxForm)
		_ = rq.r.ParseForm()
	}
	return rq.r.PostForm
}

// limitsForm reads a tenant's limits from a form: whole numbers (CPUs
// may be fractional), empty for 0.
func limitsForm(f url.Values) (apitype.TenantLimits, map[string]string) {
	var lim apitype.TenantLimits
	problems := map[string]string{}
	num := func(name string) int64 {
		s := strings.TrimSpace(f.Get(name))
		if s == "" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			problems[name] = "must be a whole number, 0 or more"
		}
		return n
	}
	lim.MaxSandboxes = int(num("max_sandboxes"))
	lim.MaxRunningSandboxes = int(num("max_running_sandboxes"))
	lim.MaxMemoryMB = num("max_memory_mb")
	lim.MaxDiskMB = num("max_disk_mb")
	lim.MaxBrowserSessions = int(num("max_browser_sessions"))
	lim.Jobs = int(num("jobs"))
	if s := strings.TrimSpace(f.Get("max_cpus")); s != "" {
		c, err := strconv.ParseFloat(s, 64)
		if err != nil || c < 0 || c > 1<<20 {
			problems["max_cpus"] = "must be a number, 0 or more"
		}
		lim.MaxCPUs = c
	}
	return lim, problems
}

type auditPage struct {
	Refused    string
	Entries    []apitype.AuditEntry
	Cursor     string
	NextCursor string
}

// handleAudit lists the audit log, newest first, 100 a page: an admin key
// sees every tenant's entries, a tenant's key its tenant's.
func (d *Dashboard) handleAudit(rq *req) {
	cursor := rq.r.URL.Query().Get("cursor")
	p := auditPage{Cursor: cursor}
	log, err := rq.c.Audit(rq.ctx(), client.AuditQuery{Limit: 100, Cursor: cursor})
	if !d.adminRefusal(rq, err, &p.Refused) {
		return
	}
	p.Entries, p.NextCursor = log.Entries, log.NextCursor
	rq.render(d, "audit", p)
}

// secretTTL is how long a new key's secret waits for its page.
const secretTTL = time.Minute

// maxSecrets bounds the secrets waiting; past it the oldest is dropped
// (its page then says the secret is not kept).
const maxSecrets = 1000

// secretShelf holds new keys' secrets between the POST that made one and
// the GET of its page, for the session that made it, once. The zero value
// is ready.
type secretShelf struct {
	mu sync.Mutex // guards m
	m  map[shelfKey]shelved
}

// shelfKey names a secret by the session that made it (the session
// itself, not its cookie value) and its key's ID.
type shelfKey struct {
	sess  *session
	keyID string
}

type shelved struct {
	secret string
	at     time.Time
}

func (s *secretShelf) put(sess *session, keyID, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[shelfKey]shelved{}
	}
	now := time.Now()
	if len(s.m) >= maxSecrets {
		var oldest shelfKey
		var at time.Time
		for k, v := range s.m {
			if now.Sub(v.at) > secretTTL {
				delete(s.m, k)
				continue
			}
			if at.IsZero() || v.at.Before(at) {
				oldest, at = k, v.at
			}
		}
		if len(s.m) >= maxSecrets {
			delete(s.m, oldest)
		}
	}
	s.m[shelfKey{sess, keyID}] = shelved{secret: secret, at: now}
}

// take returns the secret of key keyID made in session sess, once: it is
// forgotten as it is returned ("" when there is none or it is stale).
func (s *secretShelf) take(sess *session, keyID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := shelfKey{sess, keyID}
	v, ok := s.m[k]
	delete(s.m, k)
	if !ok || time.Since(v.at) > secretTTL {
		return ""
	}
	return v.secret
}
