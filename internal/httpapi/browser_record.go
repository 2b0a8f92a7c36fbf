package httpapi

import (
	"net/http"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/wire"
)

// Recordings of browser sessions: metadata as JSON, frames one PNG at a
// time, exports as a ZIP or an MP4 (internal/browser/recording.go).

func (s *Server) handleStartRecording() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		req, err := wire.Decode[apitype.StartRecordingRequest](w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rec, err := s.cfg.Browsers.StartRecording(r.Context(), r.PathValue("id"), req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/browser/recordings/"+rec.ID)
		wire.Encode(w, http.StatusCreated, rec)
	})
}

func (s *Server) handleListRecordings() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		scope := scopeOf(r)
		list := s.cfg.Browsers.Recordings(func(tenant string) bool { return scope == sandbox.AnyTenant || tenant == scope })
		wire.Encode(w, http.StatusOK, apitype.BrowserRecordingList{Recordings: list})
	})
}

func (s *Server) handleGetRecording() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		rec, err := s.cfg.Browsers.Recording(r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, rec)
	})
}

func (s *Server) handleStopRecording() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		rec, err := s.cfg.Browsers.StopRecording(r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, rec)
	})
}

func (s *Server) handleDeleteRecording() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		if err := s.cfg.Browsers.DeleteRecording(r.PathValue("id")); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleRecordingFrame answers frame {n} as the PNG itself.
func (s *Server) handleRecordingFrame() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		id := r.PathValue("id")
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 0 {
			s.fail(w, r, errcode.RecordingFrameNotFound.New("recording %s has no frame %q; frames are numbered from 0", id, r.PathValue("n")))
			return
		}
		b, err := s.cfg.Browsers.RecordingFrame(id, n)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Header().Set("Cache-Control", "private, max-age=86400, immutable") // a stored frame never changes
		_, _ = w.Write(b)
	})
}

// handleExportRecording answers ?format=zip (the default) or mp4 as an
// attachment.
func (s *Server) handleExportRecording() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		exp, err := s.cfg.Browsers.ExportRecording(r.Context(), r.PathValue("id"), r.URL.Query().Get("format"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer exp.Close()
		w.Header().Set("Content-Type", exp.ContentType)
		w.Header().Set("Content-Disposition", `attachment; filename="`+exp.Filename+`"`)
		w.Header().Set("Cache-Control", "no-store")
		if err := exp.Send(w); err != nil {
			// The status is sent: the client sees a cut archive.
			s.log.WarnContext(r.Context(), "recording export cut short", "recording_id", r.PathValue("id"), "err", err)
		}
	})
}

func (s *Server) ownsRecording(r *http.Request) error {
	p := principalOf(r)
	if p.Admin() || s.cfg.Browsers == nil {
		return nil // the handler says browser sessions are off
	}
	id := r.PathValue("id")
	t, err := s.cfg.Browsers.RecordingTenant(id)
	if err != nil {
		return err
	}
	if t != p.Tenant {
		return errcode.RecordingNotFound.New("recording %q not found", id)
	}
	return nil
}
