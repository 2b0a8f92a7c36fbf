// Package tenant is Berth's tenancy: who owns what, and how much of the
// daemon each owner may use.
//
// A tenant is a named owner of resources. Every non-admin key belongs to
// exactly one tenant (see auth), and every sandbox, template of its own,
// browser session, job and stored file records its tenant; the API answers
// another tenant's resource as if it did not exist. Limits bound what a
// tenant may hold at once; zero means no limit of the tenant's own (the
// daemon's limits still apply).
package tenant

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/berthdev/berth/internal/errcode"
)

// DefaultID is the tenant that owns everything made before tenants
// existed, and what admin keys create unless the daemon is bound to
// another.
const DefaultID = "ten_default"

// DefaultName is the default tenant's name.
const DefaultName = "default"

// Tenant is a tenant's record.
type Tenant struct {
	ID        string
	Name      string
	Limits    Limits
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Limits bound what a tenant holds at once. Zero is no limit of the
// tenant's own.
type Limits struct {
	MaxSandboxes        int     `json:"max_sandboxes,omitempty"`
	MaxRunningSandboxes int     `json:"max_running_sandboxes,omitempty"`
	MaxMemoryMB         int64   `json:"max_memory_mb,omitempty"`
	MaxCPUs             float64 `json:"max_cpus,omitempty"`
	MaxDiskMB           int64   `json:"max_disk_mb,omitempty"`
	MaxBrowserSessions  int     `json:"max_browser_sessions,omitempty"`
	// Jobs is how many of the tenant's jobs run at once (the rest queue);
	// zero takes the daemon's per-tenant job capacity.
	Jobs int `json:"jobs,omitempty"`
}

// Usage is what a tenant holds now, in the units of Limits.
type Usage struct {
	Sandboxes        int     `json:"sandboxes"`
	RunningSandboxes int     `json:"running_sandboxes"`
	MemoryMB         int64   `json:"memory_mb"`
	CPUs             float64 `json:"cpus"`
	DiskMB           int64   `json:"disk_mb"`
	BrowserSessions  int     `json:"browser_sessions"`
	Jobs             int     `json:"jobs"`
}

// Store persists tenants.
type Store interface {
	CreateTenant(ctx context.Context, t *Tenant) error
	// GetTenant finds a tenant by ID or name.
	GetTenant(ctx context.Context, idOrName string) (*Tenant, error)
	ListTenants(ctx context.Context) ([]*Tenant, error)
	SetTenantLimits(ctx context.Context, id string, l Limits) error
	// DeleteTenant deletes a tenant that owns no sandbox, template or
	// active job, revoking its keys; it returns their IDs.
	DeleteTenant(ctx context.Context, id string) (revokedKeys []string, err error)
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidName checks a tenant's name: 1-63 lowercase letters, digits and
// '-', starting with a letter or digit; not shaped like a tenant ID.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return errcode.InvalidFields(map[string]string{"name": "must be 1-63 lowercase letters, digits or '-', starting with a letter or digit"})
	}
	return nil
}

// Valid reports the limits' problems, by field.
func (l Limits) Valid() map[string]string {
	p := map[string]string{}
	check := func(field string, bad bool) {
		if bad {
			p[field] = "must be 0 (no limit) or more"
		}
	}
	check("max_sandboxes", l.MaxSandboxes < 0)
	check("max_running_sandboxes", l.MaxRunningSandboxes < 0)
	check("max_memory_mb", l.MaxMemoryMB < 0)
	check("max_cpus", l.MaxCPUs < 0)
	check("max_disk_mb", l.MaxDiskMB < 0)
	check("max_browser_sessions", l.MaxBrowserSessions < 0)
	check("jobs", l.Jobs < 0)
	return p
}

// Exceeded is the 429 for a quota: its name, limit and use.
func Exceeded(quota string, limit, use any) error {
	return errcode.QuotaExceeded.New("tenant quota %s is %v and %v is in use; free some or ask the operator to raise it",
		quota, limit, use)
}

// Check returns the first quota that use plus more would exceed.
func (l Limits) Check(use, more Usage) error {
	type q struct {
		name       string
		limit      float64
		use, after float64
	}
	for _, c := range []q{
		{"max_sandboxes", float64(l.MaxSandboxes), float64(use.Sandboxes), float64(use.Sandboxes + more.Sandboxes)},
		{"max_running_sandboxes", float64(l.MaxRunningSandboxes), float64(use.RunningSandboxes), float64(use.RunningSandboxes + more.RunningSandboxes)},
		{"max_memory_mb", float64(l.MaxMemoryMB), float64(use.MemoryMB), float64(use.MemoryMB + more.MemoryMB)},
		{"max_cpus", l.MaxCPUs, use.CPUs, use.CPUs + more.CPUs},
		{"max_disk_mb", float64(l.MaxDiskMB), float64(use.DiskMB), float64(use.DiskMB + more.DiskMB)},
		{"max_browser_sessions", float64(l.MaxBrowserSessions), float64(use.BrowserSessions), float64(use.BrowserSessions + more.BrowserSessions)},
	} {
		if c.limit > 0 && c.after > c.limit && c.after > c.use {
			return Exceeded(c.name, trim(c.limit), trim(c.use))
		}
	}
	return nil
}

func trim(f float64) string { return fmt.Sprintf("%g", f) }
