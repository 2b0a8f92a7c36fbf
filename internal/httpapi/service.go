package httpapi

import (
	"context"
	"net/http"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/wire"
)

func (s *Server) handlePutService() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spec, err := wire.Decode[apitype.ServiceSpec](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		id := r.PathValue("id")
		svc, created, err := s.cfg.Sandboxes.PutService(r.Context(), id, spec)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		w.Header().Set("Location", "/v1/sandboxes/"+id+"/services/"+svc.Name)
		wire.Encode(w, status, svc)
	})
}

func (s *Server) handleListServices() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := s.cfg.Sandboxes.Services(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if list == nil {
			list = []apitype.Service{}
		}
		wire.Encode(w, http.StatusOK, apitype.ServiceList{Services: list})
	})
}

// handleService answers with one service after get, stop or start.
func (s *Server) handleService(do func(ctx context.Context, id, name string) (apitype.Service, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc, err := do(r.Context(), r.PathValue("id"), r.PathValue("name"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, svc)
	})
}

func (s *Server) handleDeleteService() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Sandboxes.DeleteService(r.Context(), r.PathValue("id"), r.PathValue("name")); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
