package httpapi

import (
	"net/http"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/tenant"
	"github.com/berthdev/berth/internal/wire"
)

func tenantView(t *tenant.Tenant) apitype.Tenant {
	return apitype.Tenant{ID: t.ID, Name: t.Name, Limits: apitype.TenantLimits(t.Limits), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// usage is what tenant t holds now, across sandboxes, browsers and jobs.
func (s *Server) usage(r *http.Request, id string) (apitype.TenantUsage, error) {
	if s.cfg.Cluster != nil {
		l, err := s.cfg.Cluster.Usage(r.Context(), id)
		return apitype.TenantUsage{Sandboxes: l.Sandboxes, BrowserSessions: l.BrowserSessions}, err
	}
	u, err := s.cfg.Sandboxes.Usage(r.Context(), id)
	if err != nil {
		return apitype.TenantUsage{}, err
	}
	out := apitype.TenantUsage(u)
	if s.cfg.Browsers != nil {
		out.BrowserSessions = s.cfg.Browsers.Count(id)
	}
	if s.cfg.Jobs != nil {
		if out.Jobs, err = s.cfg.Jobs.Running(r.Context(), id); err != nil {
			return apitype.TenantUsage{}, err
		}
	}
	return out, nil
}

// tenantLimits is the daemon's source of tenant quotas: the store's.
func (s *Server) tenantLimits(r *http.Request) tenant.Limits {
	t, err := s.cfg.Tenants.GetTenant(r.Context(), s.tenantOf(r))
	if err != nil {
		return tenant.Limits{}
	}
	return t.Limits
}

func (s *Server) handleCreateTenant() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.CreateTenantRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := tenant.ValidName(req.Name); err != nil {
			s.fail(w, r, err)
			return
		}
		l := tenant.Limits(req.Limits)
		if p := l.Valid(); len(p) > 0 {
			s.fail(w, r, errcode.InvalidFields(p))
			return
		}
		if b := s.cfg.BoundTenant; b != "" && req.Name != b {
			s.fail(w, r, errcode.TenantBound.New("this data directory serves tenant %q only (--tenant)", b))
			return
		}
		now := time.Now().UTC()
		t := &tenant.Tenant{ID: ident.New("ten_"), Name: req.Name, Limits: l, CreatedAt: now, UpdatedAt: now}
		if err := s.cfg.Tenants.CreateTenant(r.Context(), t); err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/tenants/"+t.ID)
		wire.Encode(w, http.StatusCreated, tenantView(t))
	})
}

func (s *Server) handleListTenants() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := s.cfg.Tenants.ListTenants(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := apitype.TenantList{Tenants: []apitype.Tenant{}}
		for _, t := range list {
			out.Tenants = append(out.Tenants, tenantView(t))
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

// lookupTenant finds the tenant r's {id} names (ID or name); a tenant key
// finds only its own.
func (s *Server) lookupTenant(r *http.Request) (*tenant.Tenant, error) {
	id := r.PathValue("id")
	t, err := s.cfg.Tenants.GetTenant(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if p := principalOf(r); !p.Admin() && t.ID != p.Tenant {
		return nil, errcode.TenantNotFound.New("tenant %q not found", id)
	}
	return t, nil
}

func (s *Server) handleGetTenant() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.lookupTenant(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		u, err := s.usage(r, t.ID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := tenantView(t)
		out.Usage = &u
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleSetTenant() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.SetTenantRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		t, err := s.lookupTenant(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		l := t.Limits
		setIf(&l.MaxSandboxes, req.MaxSandboxes)
		setIf(&l.MaxRunningSandboxes, req.MaxRunningSandboxes)
		setIf(&l.MaxMemoryMB, req.MaxMemoryMB)
		setIf(&l.MaxCPUs, req.MaxCPUs)
		setIf(&l.MaxDiskMB, req.MaxDiskMB)
		setIf(&l.MaxBrowserSessions, req.MaxBrowserSessions)
		setIf(&l.Jobs, req.Jobs)
		if p := l.Valid(); len(p) > 0 {
			s.fail(w, r, errcode.InvalidFields(p))
			return
		}
		if err := s.cfg.Tenants.SetTenantLimits(r.Context(), t.ID, l); err != nil {
			s.fail(w, r, err)
			return
		}
		t.Limits, t.UpdatedAt = l, time.Now().UTC()
		wire.Encode(w, http.StatusOK, tenantView(t))
	})
}

func (s *Server) handleDeleteTenant() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.lookupTenant(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if t.ID == tenant.DefaultID || t.ID == s.cfg.DefaultTenant {
			s.fail(w, r, errcode.TenantDefault.New("tenant %q is where admin keys create; it cannot be removed", t.Name))
			return
		}
		if s.cfg.Browsers != nil && s.cfg.Browsers.Count(t.ID) > 0 {
			s.fail(w, r, errcode.TenantNotEmpty.New("tenant %q has browser sessions open; close them first", t.Name))
			return
		}
		revoked, err := s.cfg.Tenants.DeleteTenant(r.Context(), t.ID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.cfg.Keys.Revoked(revoked...)
		w.WriteHeader(http.StatusNoContent)
	})
}

// setIf sets *dst to *v when a request gave v.
func setIf[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}
