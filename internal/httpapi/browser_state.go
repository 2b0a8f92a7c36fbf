package httpapi

import (
	"net/http"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// The journal of browser actions and browser checkpoints.

// handleBrowserJournal answers a session's journal, ?after_seq=N&limit=M
// (default and most 1000): a live session's or a closed one's, including
// one of an earlier run of the daemon.
func (s *Server) handleBrowserJournal() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		q := r.URL.Query()
		var after int64
		if v := q.Get("after_seq"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.fail(w, r, errcode.QueryInvalid.New("after_seq must be a sequence number (0 or more)"))
				return
			}
			after = n
		}
		limit, err := pageLimit(q.Get("limit"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if limit == 0 {
			limit = 1000
		}
		id := r.PathValue("id")
		entries, err := s.cfg.Browsers.Journal(r.Context(), scopeOf(r), id, after, limit+1)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := apitype.BrowserJournal{SessionID: id, Entries: entries}
		if len(entries) > limit {
			out.Entries = entries[:limit]
			out.NextAfterSeq = entries[limit-1].Seq
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleCreateBrowserCheckpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		c, err := s.cfg.Browsers.Checkpoint(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/browser/checkpoints/"+c.ID)
		wire.Encode(w, http.StatusCreated, c.View())
	})
}

func (s *Server) handleListBrowserCheckpoints() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		cs, err := s.cfg.Browsers.Checkpoints(r.Context(), scopeOf(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := apitype.BrowserCheckpointList{Checkpoints: make([]apitype.BrowserCheckpoint, 0, len(cs))}
		for _, c := range cs {
			out.Checkpoints = append(out.Checkpoints, c.View())
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleGetBrowserCheckpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		c, err := s.cfg.Browsers.GetCheckpoint(r.Context(), scopeOf(r), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, c.View())
	})
}

func (s *Server) handleDeleteBrowserCheckpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		if err := s.cfg.Browsers.DeleteCheckpoint(r.Context(), scopeOf(r), r.PathValue("id")); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleResumeBrowserCheckpoint opens a new session like a checkpoint. The
// session belongs to the checkpoint's tenant (the caller's own, or for an
// admin key the checkpoint's), under that tenant's session limit.
func (s *Server) handleResumeBrowserCheckpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		c, err := s.cfg.Browsers.GetCheckpoint(r.Context(), scopeOf(r), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if s.cfg.TenantMode && c.Mode != apitype.BrowserModeIsolated {
			// As an open of the same mode (handleOpenBrowserSession).
			s.fail(w, r, errcode.TenantMode.New("browser sessions of mode %q run outside a sandbox, which tenant mode refuses", c.Mode))
			return
		}
		owner := browser.Owner{Tenant: c.Tenant}
		if t, err := s.cfg.Tenants.GetTenant(r.Context(), c.Tenant); err == nil {
			owner.MaxSessions = t.Limits.MaxBrowserSessions
		}
		sess, err := s.cfg.Browsers.Resume(r.Context(), owner, c)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/browser/sessions/"+sess.ID())
		wire.Encode(w, http.StatusCreated, sess.View(r.Context()))
	})
}
