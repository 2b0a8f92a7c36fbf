package httpapi

import (
	"io"
	"mime"
	"net/http"
	"strconv"
)

// handleBrowserArtifact answers a session artifact (a download or a
// trace ZIP) as its raw bytes, streamed: the way to read one larger than
// downloadRead answers inline.
func (s *Server) handleBrowserArtifact() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.browserUnavailable(w, r) {
			return
		}
		f, art, err := s.cfg.Browsers.OpenArtifact(r.PathValue("id"), r.PathValue("artifact"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", art.MimeType)
		w.Header().Set("Content-Length", strconv.FormatInt(art.Size, 10))
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": art.Filename}))
		w.Header().Set("X-Content-SHA256", art.SHA256)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, io.LimitReader(f, art.Size))
	})
}
