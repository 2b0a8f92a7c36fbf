package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
)

// CreateTenant creates a tenant (admin key).
func (c *Client) CreateTenant(ctx context.Context, req apitype.CreateTenantRequest) (apitype.Tenant, error) {
	var out apitype.Tenant
	err := c.doJSON(ctx, http.MethodPost, "/v1/tenants", nil, req, &out)
	return out, err
}

// ListTenants lists the tenants (admin key).
func (c *Client) ListTenants(ctx context.Context) ([]apitype.Tenant, error) {
	var out apitype.TenantList
	err := c.doJSON(ctx, http.MethodGet, "/v1/tenants", nil, nil, &out)
	return out.Tenants, err
}

// GetTenant returns a tenant (ID or name) with its usage against its
// limits; a tenant's key sees only its own.
func (c *Client) GetTenant(ctx context.Context, id string) (apitype.Tenant, error) {
	var out apitype.Tenant
	err := c.doJSON(ctx, http.MethodGet, "/v1/tenants/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// SetTenant changes the limits req names (admin key).
func (c *Client) SetTenant(ctx context.Context, id string, req apitype.SetTenantRequest) (apitype.Tenant, error) {
	var out apitype.Tenant
	err := c.doJSON(ctx, http.MethodPatch, "/v1/tenants/"+url.PathEscape(id), nil, req, &out)
	return out, err
}

// DeleteTenant removes a tenant that owns nothing live, revoking its keys
// (admin key).
func (c *Client) DeleteTenant(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/tenants/"+url.PathEscape(id), nil, nil, nil)
}

// AuditQuery selects audit entries: a page of Limit (1-1000, default 100)
// after Cursor. An admin key sees every tenant's unless Tenant names one
// ("" for the operator's own calls); a tenant's key sees its tenant's.
type AuditQuery struct {
	Limit  int
	Cursor string
	Tenant *string
}

// Audit lists audit entries, newest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (apitype.AuditLog, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Tenant != nil {
		v.Set("tenant", *q.Tenant)
	}
	var out apitype.AuditLog
	err := c.doJSON(ctx, http.MethodGet, "/v1/audit", v, nil, &out)
	return out, err
}
