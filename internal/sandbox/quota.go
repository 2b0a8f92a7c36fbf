package sandbox

import (
	"context"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/tenant"
)

// Tenant quotas on sandboxes. What a tenant holds is counted from the
// store under createMu, so two creates of one tenant cannot both take the
// last room: a create (insert or warm-pool claim) checks every quota, a
// wake (a lazy sandbox's first start, a hibernated one's) the running ones.

// usage is what tenantID's sandboxes hold: every row counts as a sandbox
// and its disk; live ones as running, with their memory and CPUs.
func usage(all []*Sandbox, tenantID string) tenant.Usage {
	var u tenant.Usage
	for _, s := range all {
		if s.Tenant != tenantID || s.Pool != "" {
			continue
		}
		u.Sandboxes++
		u.DiskMB += s.Resources.DiskMB
		if s.Live() || s.State == apitype.StatePaused {
			u.RunningSandboxes++
			u.MemoryMB += s.Resources.MemoryMB
			u.CPUs += s.Resources.CPUs
		}
	}
	return u
}

// running is what sb adds to its tenant's use when it starts.
func running(sb *Sandbox) tenant.Usage {
	return tenant.Usage{RunningSandboxes: 1, MemoryMB: sb.Resources.MemoryMB, CPUs: sb.Resources.CPUs}
}

// adding is what a new sandbox sb adds to its tenant's use.
func adding(sb *Sandbox, lazy bool) tenant.Usage {
	u := tenant.Usage{Sandboxes: 1, DiskMB: sb.Resources.DiskMB}
	if !lazy {
		r := running(sb)
		u.RunningSandboxes, u.MemoryMB, u.CPUs = r.RunningSandboxes, r.MemoryMB, r.CPUs
	}
	return u
}

// limits returns tenantID's limits; none for Berth's own sandboxes or
// without a source of limits.
func (m *Manager) limits(ctx context.Context, tenantID string) (tenant.Limits, error) {
	if tenantID == "" || m.cfg.TenantLimits == nil {
		return tenant.Limits{}, nil
	}
	return m.cfg.TenantLimits(ctx, tenantID)
}

// checkQuota returns quota_exceeded when more would take tenantID past a
// limit. Call it under createMu with all the store's sandboxes, or nil to
// have them listed when the tenant has limits.
func (m *Manager) checkQuota(ctx context.Context, all []*Sandbox, tenantID string, more tenant.Usage) error {
	l, err := m.limits(ctx, tenantID)
	if err != nil || l == (tenant.Limits{}) {
		return err
	}
	if all == nil {
		if all, err = m.store.ListSandboxes(ctx); err != nil {
			return err
		}
	}
	return l.Check(usage(all, tenantID), more)
}

// Usage is what tenantID's sandboxes hold now.
func (m *Manager) Usage(ctx context.Context, tenantID string) (tenant.Usage, error) {
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return tenant.Usage{}, err
	}
	return usage(all, tenantID), nil
}
