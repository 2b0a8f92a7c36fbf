package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
	"github.com/berthdev/berth/internal/wire"
)

// api is the HTTP API over a real SQLite file and a Manager with the
// process runtime (no browsers, no jobs), with an admin and an execution
// key.
type api struct {
	url        string
	admin, exe string
}

func newAPI(t *testing.T) *api {
	t.Helper()
	testenv.NeedLinux(t)
	ctx := context.Background()
	dir := testenv.ShortTempDir(t)
	db, err := store.Open(ctx, filepath.Join(dir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	mgr := sandbox.NewManager(sandbox.Config{DataDir: dir, AgentBinary: testenv.Binary(t), DefaultRuntime: "process",
		UIDRegistry: testenv.UIDRegistry(t)}, db, runtimes.Process{})
	keys := auth.NewKeys(db)
	_, admin, err := keys.Create(ctx, "admin", auth.ScopeAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	_, exe, err := keys.Create(ctx, "exe", auth.ScopeExecution, "ten_default")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Version: "test", DataDir: dir, Logger: slog.New(slog.DiscardHandler),
		Sandboxes: mgr, Keys: keys, DB: db}))
	t.Cleanup(func() {
		srv.Close()
		all, _ := mgr.List(ctx)
		for _, sb := range all {
			_ = mgr.Delete(ctx, sb.ID)
		}
		_ = mgr.Stop(ctx)
		db.Close()
		testenv.CheckNoProcesses(t, dir)
	})
	return &api{url: srv.URL, admin: string(admin), exe: string(exe)}
}

// call sends a request and returns its status and decoded error, if any.
func (a *api) call(t *testing.T, key, method, path, body string) (int, apitype.ErrorDetail, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e apitype.ErrorBody
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error, string(b)
}

// TestAPIErrors: the API's own answers, without a daemon: authentication
// and scope, routes and methods, strict decoding and the body cap, each a
// specific status and reason. The control is the same request done right,
// which succeeds.
func TestAPIErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	big := `{"name": "` + strings.Repeat("x", wire.MaxJSONBody) + `"}`
	tests := []struct {
		name, key, method, path, body string
		status                        int
		reason, field                 string // field: named in problems, or else in the message
	}{
		{"no key", "", "GET", "/v1/sandboxes", "", 401, "", ""},
		{"bad key", "brk_nope", "GET", "/v1/sandboxes", "", 401, "", ""},
		{"execution key on an admin route", a.exe, "GET", "/v1/keys", "", 403, "scope_insufficient", ""},
		{"unknown route", a.exe, "GET", "/v1/nothing", "", 404, "route_not_found", ""},
		{"wrong method", a.exe, "PATCH", "/v1/sandboxes", "", 405, "method_not_allowed", ""},
		{"unknown field", a.exe, "POST", "/v1/sandboxes", `{"nmae": "x"}`, 400, "body_invalid", "nmae"},
		{"duplicate field", a.exe, "POST", "/v1/sandboxes", `{"name": "a", "name": "b"}`, 400, "body_duplicate_field", "name"},
		{"miscased field", a.exe, "POST", "/v1/sandboxes", `{"Name": "a"}`, 400, "body_field_case", "Name"},
		{"truncated JSON", a.exe, "POST", "/v1/sandboxes", `{"name": `, 400, "body_invalid", ""},
		{"over the body cap", a.exe, "POST", "/v1/sandboxes", big, 413, "body_too_large", ""},
		{"invalid runtime", a.exe, "POST", "/v1/sandboxes", `{"runtime": "nope"}`, 400, "runtime_unknown", ""},
		{"missing sandbox", a.exe, "GET", "/v1/sandboxes/sbx_none", "", 404, "sandbox_not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e, body := a.call(t, tt.key, tt.method, tt.path, tt.body)
			if status != tt.status || e.Reason != tt.reason {
				t.Fatalf("%s %s = %d %s, want %d reason %q", tt.method, tt.path, status, strings.TrimSpace(body[:min(len(body), 300)]), tt.status, tt.reason)
			}
			if e.Message == "" || e.RequestID == "" {
				t.Errorf("error %+v: want a message and a request ID", e)
			}
			if _, ok := e.Problems[tt.field]; tt.field != "" && !ok && !strings.Contains(e.Message, tt.field) {
				t.Errorf("error %+v, want %q named", e, tt.field)
			}
		})
	}
	// Controls: the same routes, done right.
	if status, _, body := a.call(t, a.exe, "POST", "/v1/sandboxes", `{"name": "ok", "lazy": true}`); status != 201 {
		t.Errorf("control: create = %d %s, want 201", status, body)
	}
	if status, _, body := a.call(t, a.admin, "GET", "/v1/keys", ""); status != 200 {
		t.Errorf("control: admin lists keys = %d %s, want 200", status, body)
	}
}
