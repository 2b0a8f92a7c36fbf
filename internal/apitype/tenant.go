package apitype

import "time"

// TenantLimits bound what a tenant holds at once; 0 (or absent) is no
// limit of the tenant's own. Jobs bounds its running jobs (0: the
// daemon's per-tenant capacity). The same fields as tenant.Limits, which
// converts to it.
type TenantLimits struct {
	MaxSandboxes        int     `json:"max_sandboxes,omitempty"`
	MaxRunningSandboxes int     `json:"max_running_sandboxes,omitempty"`
	MaxMemoryMB         int64   `json:"max_memory_mb,omitempty"`
	MaxCPUs             float64 `json:"max_cpus,omitempty"`
	MaxDiskMB           int64   `json:"max_disk_mb,omitempty"`
	MaxBrowserSessions  int     `json:"max_browser_sessions,omitempty"`
	Jobs                int     `json:"jobs,omitempty"`
}

// TenantUsage is what a tenant holds now, in the units of TenantLimits.
type TenantUsage struct {
	Sandboxes        int     `json:"sandboxes"`
	RunningSandboxes int     `json:"running_sandboxes"`
	MemoryMB         int64   `json:"memory_mb"`
	CPUs             float64 `json:"cpus"`
	DiskMB           int64   `json:"disk_mb"`
	BrowserSessions  int     `json:"browser_sessions"`
	Jobs             int     `json:"jobs"` // starting or running
}

// Tenant is a tenant as the API shows it.
type Tenant struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Limits    TenantLimits `json:"limits"`
	Usage     *TenantUsage `json:"usage,omitempty"` // GET /v1/tenants/{id} only
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// CreateTenantRequest is the body of POST /v1/tenants.
type CreateTenantRequest struct {
	Name   string       `json:"name"`
	Limits TenantLimits `json:"limits"`
}

// SetTenantRequest is the body of PATCH /v1/tenants/{id}: the limits it
// names change, the others stay.
type SetTenantRequest struct {
	MaxSandboxes        *int     `json:"max_sandboxes,omitempty"`
	MaxRunningSandboxes *int     `json:"max_running_sandboxes,omitempty"`
	MaxMemoryMB         *int64   `json:"max_memory_mb,omitempty"`
	MaxCPUs             *float64 `json:"max_cpus,omitempty"`
	MaxDiskMB           *int64   `json:"max_disk_mb,omitempty"`
	MaxBrowserSessions  *int     `json:"max_browser_sessions,omitempty"`
	Jobs                *int     `json:"jobs,omitempty"`
}

// TenantList is the body of GET /v1/tenants.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// AuditEntry is one mutating call in the audit log. It never holds a
// body or a secret.
type AuditEntry struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	At        time.Time `json:"at"`
	KeyID     string    `json:"key_id"`
	KeyName   string    `json:"key_name"`
	Method    string    `json:"method"`
	Route     string    `json:"route"`              // the route's pattern, as docs/api.md names it
	Resource  string    `json:"resource,omitempty"` // the ID the call named or made
	Status    int       `json:"status"`
	Reason    string    `json:"reason,omitempty"` // the error's reason, when it failed
	RequestID string    `json:"request_id"`
}

// AuditLog is the body of GET /v1/audit, newest first.
type AuditLog struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor,omitempty"`
}
