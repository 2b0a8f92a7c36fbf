package httpapi

import (
	"net/http"
	"sync"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/openapi"
)

// handleOpenAPI serves the OpenAPI document of this route table. It is
// built at the first request and kept: the table never changes.
func (s *Server) handleOpenAPI() http.Handler {
	var (
		once sync.Once
		doc  []byte
		err  error
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { doc, err = openapi.JSON(s.OpenAPIRoutes()) })
		if err != nil {
			s.fail(w, r, errcode.Wrap(errcode.Internal, err, "building the OpenAPI document"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(doc)
	})
}

// OpenAPIRoutes lists the routes as package openapi takes them: the
// document is built from this table, and its tests compare the two.
func (s *Server) OpenAPIRoutes() []openapi.Route {
	names := map[access]openapi.Access{public: openapi.Public, read: openapi.Read, execution: openapi.Execution, admin: openapi.Admin}
	var out []openapi.Route
	for _, r := range s.routes() {
		method, path, _ := cutSpace(r.pattern)
		out = append(out, openapi.Route{Method: method, Path: path, Access: names[r.access]})
	}
	return out
}
