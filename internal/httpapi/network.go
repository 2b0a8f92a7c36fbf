package httpapi

import (
	"net/http"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/wire"
)

// A sandbox's network: its policy, its connection log and the secrets
// bound to its egress.

func (s *Server) handleGetNetwork() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sb, err := s.cfg.Sandboxes.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, apitype.Network(sb.Network.Normalize()))
	})
}

func (s *Server) handlePutNetwork() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.Network](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		sb, err := s.cfg.Sandboxes.SetNetwork(r.Context(), r.PathValue("id"), netpolicy.Policy(req))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, apitype.Network(sb.Network.Normalize()))
	})
}

func (s *Server) handleNetworkLog() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, err := wire.QueryInt(r.URL.Query(), "limit", 0, 100000)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		entries, err := s.cfg.Sandboxes.NetworkLog(r.Context(), r.PathValue("id"), int(limit))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, apitype.NetworkLog{Entries: entries})
	})
}

func (s *Server) handleListSecrets() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := s.cfg.Sandboxes.Secrets(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, apitype.SecretList{Secrets: list})
	})
}

func (s *Server) handlePutSecrets() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.SecretList](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.secretsChanged(w, r, s.cfg.Sandboxes.SetSecrets(r.Context(), r.PathValue("id"), req.Secrets))
	})
}

func (s *Server) handlePostSecret() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := wire.Decode[apitype.Secret](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.secretsChanged(w, r, s.cfg.Sandboxes.PutSecret(r.Context(), r.PathValue("id"), req))
	})
}

func (s *Server) handleDeleteSecret() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("host") == "" {
			s.fail(w, r, errcode.InvalidFields(map[string]string{"host": "name the host whose secrets to remove (?host=)"}))
			return
		}
		s.secretsChanged(w, r, s.cfg.Sandboxes.DeleteSecret(r.Context(), r.PathValue("id"), q.Get("host"), q.Get("header")))
	})
}

// secretsChanged answers a change of a sandbox's secrets with the list as
// it now is (without values), or err.
func (s *Server) secretsChanged(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := s.cfg.Sandboxes.Secrets(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wire.Encode(w, http.StatusOK, apitype.SecretList{Secrets: list})
}
