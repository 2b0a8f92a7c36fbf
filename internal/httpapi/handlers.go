package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/wire"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func (s *Server) handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.Encode(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

func (s *Server) handleReadyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.DB.Ping(r.Context()); err != nil {
			s.fail(w, r, errcode.Wrap(errcode.Unavailable, err, "database is not answering"))
			return
		}
		wire.Encode(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

func (s *Server) handleSystem() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Cluster != nil {
			s.hqSystem(w, r)
			return
		}
		m := s.cfg.Sandboxes
		cfg := m.Config()
		out := apitype.System{
			Version: s.cfg.Version,
			DataDir: s.cfg.DataDir,
			Limits: apitype.Limits{
				MaxSandboxes: cfg.MaxSandboxes, MaxCommands: cfg.MaxCommands, MaxHistory: cfg.MaxHistory,
				OutputCapBytes: cfg.OutputCap, MaxUploadBytes: s.cfg.MaxUpload,
				DefaultTimeoutMS: cfg.DefaultTimeout.Milliseconds(), MaxTimeoutMS: cfg.MaxTimeout.Milliseconds(),
				MaxJSONBodyBytes: maxJSON, MaxDownloadBytes: agent.DefaultMaxDownload,
				MaxListPageEntries: agent.MaxListLimit, ListPageEntriesDflt: agent.DefaultListLimit,
				DefaultResources: sandbox.DefaultResources.API(),
				MaxResources:     sandbox.MaxResources.API(),
			},
		}
		for _, rt := range m.Runtimes() {
			info := apitype.RuntimeInfo{Name: rt.Name(), Isolated: rt.Isolated(), Available: true, Default: rt.Name() == cfg.DefaultRuntime}
			if err := rt.Available(); err != nil {
				info.Available, info.Reason = false, err.Error()
				var ce *errcode.Error
				if errorsAs(err, &ce) {
					info.Reason = ce.Message
				}
			}
			out.Runtimes = append(out.Runtimes, info)
		}
		p := principalOf(r)
		if p.Admin() {
			counts, err := m.Count(r.Context())
			if err != nil {
				s.fail(w, r, err)
				return
			}
			for _, n := range counts {
				out.Counts.Sandboxes += n
			}
		} else {
			// A tenant's key learns nothing of other tenants, nor where the
			// daemon keeps its data.
			out.DataDir = ""
			u, err := m.Usage(r.Context(), p.Tenant)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			out.Counts.Sandboxes = u.Sandboxes
		}
		pools, err := m.Pools(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if b := s.cfg.Browsers; b != nil {
			bc := b.Config()
			out.Browser = apitype.BrowserInfo{Available: true, Chromium: bc.Chromium, Sessions: len(b.List()), MaxSessions: bc.MaxSessions,
				Providers: b.ProviderNames()}
			if !p.Admin() {
				out.Browser.Sessions = b.Count(p.Tenant)
			}
			if err := b.Available(); err != nil {
				out.Browser.Available, out.Browser.Reason = false, err.Error()
			}
			out.Browser.IsolatedReady, out.Browser.IsolatedWarm = b.IsolatedPool()
			if err := b.IsolatedAvailable(); err != nil {
				out.Browser.IsolatedReason = err.Error()
			} else {
				out.Browser.IsolatedAvailable = true
			}
		}
		out.Pools = []apitype.Pool{}
		for _, p := range pools {
			out.Pools = append(out.Pools, apitype.Pool(p))
			out.Counts.Pooled += p.Ready
		}
		if s.cfg.Jobs != nil {
			out.Jobs = s.cfg.Jobs.Info(r.Context())
		}

		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) toAPISandbox(sb *sandbox.Sandbox) apitype.Sandbox {
	out := apitype.Sandbox{
		ID: sb.ID, Name: sb.Name, Runtime: sb.Runtime, State: sb.State, Reason: sb.Reason,
		Labels: sb.Labels, CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, Idle: apitype.Idle(sb.Idle),
		Workspace: sandbox.LayoutFor(s.cfg.DataDir, sb.ID).Workspace, Template: sandbox.BaseTemplate,
	}
	if sb.Template != "" {
		out.Template = sb.Template
		if t, err := s.cfg.Sandboxes.Template(context.Background(), sandbox.AnyTenant, sb.Template); err == nil {
			out.Template = t.Name
		}
	}
	for k := range sb.Env {
		out.EnvKeys = append(out.EnvKeys, k)
	}
	if sb.Resources != (sandbox.Resources{}) {
		res := sb.Resources.API()
		out.Resources = &res
		out.Workspace = "/workspace" // as the sandbox sees it
	}
	sort.Strings(out.EnvKeys)
	out.Network = apitype.Network(sb.Network.Normalize())
	return out
}

func (s *Server) handleCreateSandbox() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.CreateSandboxRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		spec := sandbox.CreateSpec{Tenant: s.tenantOf(r), Runtime: req.Runtime, Name: req.Name, Env: req.Env, Labels: req.Labels, Lazy: req.Lazy,
			Template: req.Template}
		if req.Resources != nil {
			spec.Resources = sandbox.ResourcesFrom(*req.Resources)
		}
		if req.Idle != nil {
			idle := sandbox.IdlePolicy(*req.Idle)
			spec.Idle = &idle
		}
		if req.Network != nil {
			spec.Network = netpolicy.Policy(*req.Network)
		}
		sb, created, err := s.cfg.Sandboxes.Create(r.Context(), spec)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
		wire.Encode(w, status, s.toAPISandbox(sb))
	})
}

// handleListSandboxes lists the key's tenant's sandboxes (an admin key's:
// every tenant's), oldest first; ?limit=N pages them, ?cursor= goes on.
func (s *Server) handleListSandboxes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, err := pageLimit(q.Get("limit"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		after, err := s.readPosition(r, "sandboxes")
		if err != nil {
			s.fail(w, r, err)
			return
		}
		all, err := s.cfg.Sandboxes.List(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		scope, state := scopeOf(r), q.Get("state")
		var page []*sandbox.Sandbox
		for _, sb := range all {
			if sb.Pool != "" || // not anyone's yet
				(scope != sandbox.AnyTenant && sb.Tenant != scope) ||
				!after.before(sb.CreatedAt, sb.ID) || (state != "" && sb.State != state) {
				continue
			}
			if page = append(page, sb); limit > 0 && len(page) > limit {
				break
			}
		}
		out := apitype.SandboxList{Sandboxes: []apitype.Sandbox{}}
		if limit > 0 {
			page, out.NextCursor = nextPage(s, r, "sandboxes", page, limit,
				func(sb *sandbox.Sandbox) position { return position{sb.CreatedAt, sb.ID} })
		}
		for _, sb := range page {
			out.Sandboxes = append(out.Sandboxes, s.toAPISandbox(sb))
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleGetSandbox() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sb, err := s.cfg.Sandboxes.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, s.toAPISandbox(sb))
	})
}

func (s *Server) handleDeleteSandbox() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Sandboxes.Delete(r.Context(), r.PathValue("id")); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleLifecycle runs a state change (pause, resume) and answers with
// the sandbox.
func (s *Server) handleLifecycle(change func(context.Context, string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := change(r.Context(), id); err != nil {
			s.fail(w, r, err)
			return
		}
		sb, err := s.cfg.Sandboxes.Get(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, s.toAPISandbox(sb))
	})
}

func (s *Server) handleExec() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := agent.ParseOutputQuery(r); err != nil {
			s.fail(w, r, err)
			return
		}
		req, err := wire.Decode[apitype.CreateCommandRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rec, err := s.cfg.Sandboxes.Exec(r.Context(), r.PathValue("id"), req, r.URL.Query())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/sandboxes/"+rec.SandboxID+"/commands/"+rec.ID)
		wire.Encode(w, http.StatusAccepted, rec)
	})
}

func (s *Server) handleGetCommand() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := agent.ParseOutputQuery(r); err != nil {
			s.fail(w, r, err)
			return
		}
		rec, err := s.cfg.Sandboxes.Command(r.Context(), r.PathValue("id"), r.PathValue("cid"), r.URL.Query())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, rec)
	})
}

func (s *Server) handleListCommands() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recs, err := s.cfg.Sandboxes.Commands(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		status := r.URL.Query().Get("status")
		out := apitype.CommandList{Commands: []apitype.Command{}}
		for _, c := range recs {
			if status == "" || c.Status == status {
				out.Commands = append(out.Commands, *c)
			}
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleCreateKey() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.CreateKeyRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if req.Scope == "" {
			req.Scope = auth.ScopeExecution
		}
		tenantID := ""
		if req.Tenant == "" && req.Scope != auth.ScopeAdmin {
			req.Tenant = s.cfg.DefaultTenant
		}
		if req.Tenant != "" {
			t, err := s.cfg.Tenants.GetTenant(r.Context(), req.Tenant)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			if b := s.cfg.BoundTenant; b != "" && t.Name != b {
				s.fail(w, r, errcode.TenantBound.New("this data directory serves tenant %q only (--tenant)", b))
				return
			}
			tenantID = t.ID
		}
		k, secret, err := s.cfg.Keys.Create(r.Context(), strings.TrimSpace(req.Name), req.Scope, tenantID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := apitype.Key{ID: k.ID, Name: k.Name, Scope: k.Scope, Tenant: k.TenantID, Prefix: k.Prefix,
			CreatedAt: k.CreatedAt, Secret: string(secret)}
		w.Header().Set("Location", "/v1/keys/"+k.ID)
		wire.Encode(w, http.StatusCreated, out)
	})
}

func (s *Server) handleListKeys() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys, err := s.cfg.Keys.List(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		only := r.URL.Query().Get("tenant")
		if only != "" {
			t, err := s.cfg.Tenants.GetTenant(r.Context(), only)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			only = t.ID
		}
		out := apitype.KeyList{Keys: []apitype.Key{}}
		for _, k := range keys {
			if only != "" && k.TenantID != only {
				continue
			}
			out.Keys = append(out.Keys, apitype.Key{ID: k.ID, Name: k.Name, Scope: k.Scope, Tenant: k.TenantID,
				Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt})
		}
		slices.SortFunc(out.Keys, func(a, b apitype.Key) int { return a.CreatedAt.Compare(b.CreatedAt) })
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleRevokeKey() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Keys.Revoke(r.Context(), r.PathValue("id")); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
