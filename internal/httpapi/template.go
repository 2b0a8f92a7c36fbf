package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/wire"
)

// maxBuildBody bounds a template build request: copy steps carry their
// files inline.
const maxBuildBody = 32 << 20

// DefaultMaxImport bounds an imported image archive.
const DefaultMaxImport = 8 << 30

func (s *Server) handleListTemplates() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := s.cfg.Sandboxes.Templates(r.Context(), scopeOf(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out := apitype.TemplateList{Templates: []apitype.Template{}}
		for _, t := range list {
			out.Templates = append(out.Templates, sandbox.TemplateInfo(t))
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleGetTemplate() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.cfg.Sandboxes.Template(r.Context(), scopeOf(r), r.PathValue("name"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, sandbox.TemplateInfo(t))
	})
}

// handleTemplateLog answers a built template's build log, as text.
func (s *Server) handleTemplateLog() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.cfg.Sandboxes.Template(r.Context(), scopeOf(r), r.PathValue("name"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		f, err := os.Open(filepath.Join(s.cfg.DataDir, "templates", t.ID, "build.log"))
		if err != nil || t.ID == "" {
			s.fail(w, r, errcode.LogNotFound.New("template %q has no build log", t.Name))
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.Copy(w, f)
	})
}

func (s *Server) handleBuildTemplate() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req apitype.BuildTemplateRequest
		if err := wire.DecodeJSON(http.MaxBytesReader(w, r.Body, maxBuildBody), &req); err != nil {
			s.fail(w, r, err)
			return
		}
		// An admin key builds a shared template; a tenant's key one of its own.
		owner := principalOf(r).Tenant
		t, err := s.cfg.Sandboxes.BuildTemplate(r.Context(), owner, req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/templates/"+t.Name)
		wire.Encode(w, http.StatusAccepted, sandbox.TemplateInfo(t))
	})
}

// handleImportTemplate takes an image archive (OCI layout tar or docker
// save) as the body, spools it to disk, and unpacks it into a template.
func (s *Server) handleImportTemplate() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		// The name first: a bad or taken one fails before the upload.
		if err := s.cfg.Sandboxes.CheckNewTemplateName(r.Context(), "", q.Get("name")); err != nil {
			s.fail(w, r, err)
			return
		}
		spool, err := s.spoolImport(w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer os.Remove(spool)
		t, err := s.cfg.Sandboxes.ImportTemplate(r.Context(), q.Get("name"), spool, q.Get("ref"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/templates/"+t.Name)
		wire.Encode(w, http.StatusCreated, sandbox.TemplateInfo(t))
	})
}

// spoolImport writes an import's image archive (the body, at most
// MaxImport) to a new file under the data directory and returns its path;
// nothing is left behind when it fails.
func (s *Server) spoolImport(w http.ResponseWriter, r *http.Request) (string, error) {
	limit := s.cfg.MaxImport
	if limit <= 0 {
		limit = DefaultMaxImport
	}
	if r.ContentLength > limit {
		return "", errcode.ImageTooLarge.New("the image archive is %d bytes, more than the limit of %d", r.ContentLength, limit)
	}
	dir := filepath.Join(s.cfg.DataDir, "templates")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	spool := filepath.Join(dir, "import-"+ident.New("")+".tar")
	f, err := os.OpenFile(spool, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, limit))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		err = errcode.ImageTooLarge.New("the image archive is larger than the limit of %d bytes", limit)
	case err != nil:
		err = errcode.Wrap(errcode.Invalid, err, "reading the image archive")
	}
	if err != nil {
		_ = os.Remove(spool)
		return "", err
	}
	return spool, nil
}

func (s *Server) handleDeleteTemplate() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Sandboxes.DeleteTemplate(r.Context(), scopeOf(r), r.PathValue("name")); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
