package httpapi

import (
	"context"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/tenant"
	"github.com/berthdev/berth/internal/wire"
)

// The audit log: one entry per authenticated mutating call (who, what,
// which resource, how it ended, the request ID), never a body or a secret.
// Entries are written behind the request by one goroutine, so a call never
// waits on the log; at most auditQueue wait, and beyond that entries are
// dropped and counted (berth_audit_dropped_total). Each tenant keeps its
// newest AuditKeep entries; admin keys' calls are the operator's (tenant
// "").

// AuditStore keeps the audit log (the store's).
type AuditStore interface {
	InsertAudit(ctx context.Context, entries []*tenant.AuditEntry, keep int) error
	ListAudit(ctx context.Context, tenant string, before tenant.AuditPosition, limit int) ([]*tenant.AuditEntry, error)
}

// AuditKeep is how many entries each tenant's log keeps.
const AuditKeep = 10000

const (
	auditQueue = 4096
	auditBatch = 256
)

type auditor struct {
	store   AuditStore
	ch      chan *tenant.AuditEntry
	dropped atomic.Int64
	done    chan struct{}
	once    sync.Once
}

func newAuditor(st AuditStore, s *Server) *auditor {
	a := &auditor{store: st, ch: make(chan *tenant.AuditEntry, auditQueue), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		// What queued while the last batch was written goes in one
		// transaction: one commit for a burst, not one per call.
		batch := make([]*tenant.AuditEntry, 0, auditBatch)
		for e := range a.ch {
			batch = append(batch[:0], e)
		drain:
			for len(batch) < auditBatch {
				select {
				case e, ok := <-a.ch:
					if !ok {
						break drain
					}
					batch = append(batch, e)
				default:
					break drain
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := a.store.InsertAudit(ctx, batch, AuditKeep); err != nil {
				s.log.Warn("writing the audit log", "err", err, "entries", len(batch), "first_request_id", batch[0].RequestID)
			}
			cancel()
		}
	}()
	return a
}

func (a *auditor) add(e *tenant.AuditEntry) {
	select {
	case a.ch <- e:
	default:
		a.dropped.Add(1)
	}
}

// close writes what is queued and stops.
func (a *auditor) close() {
	a.once.Do(func() { close(a.ch) })
	<-a.done
}

// auditNote is where fail leaves the reason of a failed request for its
// audit entry.
type auditNote struct{ reason string }

const auditNoteKey ctxKey = 100

func noteReason(r *http.Request, err error) {
	if n, ok := r.Context().Value(auditNoteKey).(*auditNote); ok {
		n.reason = errcode.ReasonOf(err)
		if n.reason == "" {
			n.reason = string(errcode.CodeOf(err))
		}
	}
}

// audited records every call of a mutating route in the audit log.
func (s *Server) audited(pattern string, next http.Handler) http.Handler {
	method, _, _ := cutSpace(pattern)
	if s.audit == nil || method == http.MethodGet || method == http.MethodHead {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note := &auditNote{}
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), auditNoteKey, note))
		next.ServeHTTP(sw, r)
		p := principalOf(r)
		resource := r.PathValue("id")
		if resource == "" {
			resource = r.PathValue("name")
		}
		if resource == "" {
			resource = r.PathValue("sha256")
		}
		if loc := sw.Header().Get("Location"); resource == "" && loc != "" {
			resource = path.Base(loc)
		}
		s.audit.add(&tenant.AuditEntry{Tenant: p.Tenant, At: time.Now().UTC(), KeyID: p.KeyID, KeyName: p.Name,
			Method: r.Method, Route: pattern, Resource: resource, Status: max(sw.status, http.StatusOK),
			Reason: note.reason, RequestID: requestID(r)})
	})
}

// handleAudit lists the audit log, newest first: a tenant key its
// tenant's, an admin key every tenant's (?tenant= one of them, "" for the
// operator's own calls). ?limit= (1-1000, default 100), ?cursor= goes on.
func (s *Server) handleAudit() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.audit == nil {
			s.fail(w, r, errcode.New(errcode.Unimplemented, "this daemon keeps no audit log"))
			return
		}
		q := r.URL.Query()
		limit, err := pageLimit(q.Get("limit"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if limit == 0 {
			limit = 100
		}
		before, err := s.readPosition(r, "audit")
		if err != nil {
			s.fail(w, r, err)
			return
		}
		scope := scopeOf(r)
		if scope == sandbox.AnyTenant {
			scope = "*"
			if q.Has("tenant") {
				scope = q.Get("tenant")
				if scope != "" {
					t, err := s.cfg.Tenants.GetTenant(r.Context(), scope)
					if err != nil {
						s.fail(w, r, err)
						return
					}
					scope = t.ID
				}
			}
		}
		list, err := s.audit.store.ListAudit(r.Context(), scope, tenant.AuditPosition(before), limit+1)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		list, next := nextPage(s, r, "audit", list, limit, func(e *tenant.AuditEntry) position { return position{e.At, e.ID} })
		out := apitype.AuditLog{Entries: []apitype.AuditEntry{}, NextCursor: next}
		for _, e := range list {
			out.Entries = append(out.Entries, apitype.AuditEntry{ID: e.ID, Tenant: e.Tenant, At: e.At, KeyID: e.KeyID,
				KeyName: e.KeyName, Method: e.Method, Route: e.Route, Resource: e.Resource, Status: e.Status,
				Reason: e.Reason, RequestID: e.RequestID})
		}
		wire.Encode(w, http.StatusOK, out)
	})
}
