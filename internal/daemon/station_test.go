package daemon_test

// The Station-compatible method API against the real daemon: the seed's
// request bodies verbatim (and the methods it lists without a body),
// answered {"data": ...} in Station's field names; a wrong station ID,
// an unknown method, a method not carried yet; and the REST checks it
// inherits: another tenant's sandbox is missing, a read key cannot
// create.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/ratelimit"
	"github.com/berthdev/berth/internal/testenv"
)

// stationPath is the method API path of primitive on station.
func stationPath(station, primitive string) string {
	return "/api/v1/stations/" + station + "/execution/" + primitive
}

// callStation sends body to path with secret and, on 200, decodes data
// into out. It returns the reply for error checks.
func callStation(t *testing.T, d *testenv.Daemon, secret, path, body string, out any) httpReply {
	t.Helper()
	return callStationWith(t, d, nil, secret, path, body, out)
}

// callStationWith is callStation with more request headers.
func callStationWith(t *testing.T, d *testenv.Daemon, h http.Header, secret, path, body string, out any) httpReply {
	t.Helper()
	r := sendProbe(t, d, httpProbe{method: http.MethodPost, path: path, auth: bearerAuth(secret), body: body, header: h})
	if r.status != http.StatusOK || out == nil {
		return r
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &env); err != nil || env.Data == nil {
		t.Fatalf("POST %s %s = %q: want {\"data\": ...} (%v)", path, body, r.body, err)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		t.Fatalf("POST %s %s: data %s: %v", path, body, env.Data, err)
	}
	return r
}

// mustStation is callStation that fails the test unless it answers 200.
func mustStation(t *testing.T, d *testenv.Daemon, secret, path, body string, out any) {
	t.Helper()
	if r := callStation(t, d, secret, path, body, out); r.status != http.StatusOK {
		t.Fatalf("POST %s %s = %d %s, want 200", path, body, r.status, r.body)
	}
}

// seed fills a body of the seed with IDs.
func seed(body string, ids ...string) string {
	return strings.NewReplacer(ids...).Replace(body)
}

// stationCommand is a command as the method API answers it.
type stationCommand struct {
	ID         string  `json:"id"`
	SandboxID  string  `json:"sandboxId"`
	Status     string  `json:"status"`
	ExitCode   *int    `json:"exitCode"`
	FinishedAt *string `json:"finishedAt"`
	TimeoutMs  int64   `json:"timeoutMs"`
	Stdout     string  `json:"stdout"`
	Stderr     string  `json:"stderr"`
}

// pollCommand polls the command method until the command has finishedAt.
func pollCommand(t *testing.T, d *testenv.Daemon, path, sbx, run string) stationCommand {
	t.Helper()
	var c stationCommand
	body := seed(`{ "method": "command", "id": "WORKSPACE_ID", "runId": "COMMAND_ID" }`, "WORKSPACE_ID", sbx, "COMMAND_ID", run)
	testenv.Eventually(t, time.Minute, "command "+run+" finishes", func() bool {
		mustStation(t, d, d.Token, path, body, &c)
		return c.FinishedAt != nil
	})
	return c
}

// TestStationSandboxMethods runs every sandbox method of the seed through
// the method API of a daemon whose station ID is set, and the errors of
// the API itself.
func TestStationSandboxMethods(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.StationID = "worker-a" })
	path := stationPath("worker-a", "sandbox")

	var ws struct {
		ID, State, Runtime string
	}
	mustStation(t, d, d.Token, path, `{ "method": "create" }`, &ws)
	if !strings.HasPrefix(ws.ID, "sbx_") {
		t.Fatalf("create = %+v, want a sandbox", ws)
	}
	ids := []string{"WORKSPACE_ID", ws.ID}

	// The seed's exec, verbatim: node may be missing here, so only the
	// record's shape is checked, and that it finishes.
	var started stationCommand
	mustStation(t, d, d.Token, path, seed(`{ "method": "exec", "id": "WORKSPACE_ID", "command": "node --version", "timeoutMs": 30000 }`, ids...), &started)
	if !strings.HasPrefix(started.ID, "cmd_") || started.SandboxID != ws.ID || started.TimeoutMs != 30000 {
		t.Errorf("exec = %+v, want a command of %s with timeoutMs 30000", started, ws.ID)
	}
	pollCommand(t, d, path, ws.ID, started.ID)

	// A command that exists everywhere: its result once finishedAt is set.
	mustStation(t, d, d.Token, path, seed(`{ "method": "exec", "id": "WORKSPACE_ID", "command": "printf hello > greeting.txt && cat greeting.txt && echo oops >&2", "timeoutMs": 30000 }`, ids...), &started)
	res := pollCommand(t, d, path, ws.ID, started.ID)
	if res.Status != "exited" || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "hello" || res.Stderr != "oops\n" {
		t.Errorf("command = %+v, want exited 0 with stdout hello, stderr oops", res)
	}

	// Cancel, the seed's body.
	mustStation(t, d, d.Token, path, seed(`{ "method": "exec", "id": "WORKSPACE_ID", "command": "sleep 60", "timeoutMs": 90000 }`, ids...), &started)
	var canceled stationCommand
	mustStation(t, d, d.Token, path, seed(`{ "method": "cancel", "id": "WORKSPACE_ID", "runId": "COMMAND_ID" }`, append(ids, "COMMAND_ID", started.ID)...), &canceled)
	if canceled.ID != started.ID {
		t.Errorf("cancel = %+v, want command %s", canceled, started.ID)
	}
	if got := pollCommand(t, d, path, ws.ID, started.ID); got.Status != "canceled" {
		t.Errorf("canceled command = %+v, want status canceled", got)
	}

	var list struct {
		Sandboxes []struct{ ID string } `json:"sandboxes"`
	}
	mustStation(t, d, d.Token, path, `{ "method": "list" }`, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != ws.ID {
		t.Errorf("list = %+v, want [%s]", list, ws.ID)
	}
	var got struct{ ID, State string }
	mustStation(t, d, d.Token, path, seed(`{ "method": "get", "id": "WORKSPACE_ID" }`, ids...), &got)
	if got.ID != ws.ID || got.State != "running" {
		t.Errorf("get = %+v, want %s running", got, ws.ID)
	}

	// The API's own errors.
	errs := []struct {
		name, path, body string
		status           int
		code             errcode.Code
		reason           string
	}{
		{"another station", stationPath("local", "sandbox"), `{ "method": "list" }`, 404, errcode.NotFound, "station_not_found"},
		{"unknown primitive", stationPath("worker-a", "gpu"), `{ "method": "list" }`, 404, errcode.NotFound, "route_not_found"},
		{"unknown method", path, `{ "method": "teleport" }`, 400, errcode.Invalid, "station_method_unknown"},
		{"browser method on sandbox", path, seed(`{ "method": "liveFrame", "id": "WORKSPACE_ID" }`, ids...), 400, errcode.Invalid, "station_method_unknown"},
		{"not carried yet", path, seed(`{ "method": "writeFile", "id": "WORKSPACE_ID" }`, ids...), 501, errcode.Unimplemented, "station_method_unimplemented"},
		{"no method", path, `{}`, 400, errcode.Invalid, ""},
		{"unknown field", path, seed(`{ "method": "get", "id": "WORKSPACE_ID", "x": 1 }`, ids...), 400, errcode.Invalid, "body_invalid"},
		{"duplicate field", path, `{ "method": "list", "method": "create" }`, 400, errcode.Invalid, "body_duplicate_field"},
		{"missing sandbox", path, `{ "method": "get", "id": "sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa" }`, 404, errcode.NotFound, "sandbox_not_found"},
		{"not an ID", path, `{ "method": "get", "id": "../keys" }`, 400, errcode.Invalid, ""},
		{"too large", path, `{ "method": "exec", "id": "x", "command": "` + strings.Repeat("a", 129<<10) + `" }`, 413, errcode.PayloadTooLarge, "body_too_large"},
	}
	for _, e := range errs {
		r := callStation(t, d, d.Token, e.path, e.body, nil)
		r.wantError(t, e.name, e.status, e.code, e.reason)
	}
	if r := callStation(t, d, d.Token, path, `{}`, nil); !strings.Contains(r.body, `"method":"required"`) {
		t.Errorf("no method = %s, want problems.method", r.body)
	}

	// The station describes itself to an admin key, and to no other.
	var info struct {
		Stations []struct {
			StationID    string `json:"stationId"`
			Status       string `json:"status"`
			Capabilities struct {
				Primitives []string `json:"primitives"`
				Sandbox    struct{ Methods []string }
			} `json:"capabilities"`
			Backends struct{ Sandbox []string } `json:"backends"`
		} `json:"stations"`
	}
	r := sendProbe(t, d, httpProbe{method: http.MethodGet, path: "/api/v1/execution", auth: bearerAuth(d.Token)})
	if err := json.Unmarshal([]byte(r.body), &struct {
		Data any `json:"data"`
	}{Data: &info}); err != nil || r.status != 200 || len(info.Stations) != 1 {
		t.Fatalf("GET /api/v1/execution = %d %s (%v)", r.status, r.body, err)
	}
	st := info.Stations[0]
	if st.StationID != "worker-a" || st.Status != "online" || len(st.Capabilities.Primitives) == 0 ||
		st.Capabilities.Primitives[0] != "sandbox" || len(st.Capabilities.Sandbox.Methods) != 7 ||
		len(st.Backends.Sandbox) == 0 || st.Backends.Sandbox[0] != testenv.Runtime() {
		t.Errorf("GET /api/v1/execution = %s, want station worker-a online with sandbox on %s", r.body, testenv.Runtime())
	}
	_, exe := tenantKey(t, d, "acme", auth.ScopeExecution)
	sendProbe(t, d, httpProbe{method: http.MethodGet, path: "/api/v1/execution", auth: bearerAuth(exe.Secret)}).
		wantError(t, "GET /api/v1/execution (execution key)", 403, errcode.PermissionDenied, "scope_insufficient")

	// A create with an Idempotency-Key is made once: its retry answers
	// the first sandbox again; the key with another body is refused.
	idem := http.Header{"Idempotency-Key": {"station-create-1"}}
	var first, again struct{ ID string }
	callStationWith(t, d, idem, d.Token, path, `{ "method": "create", "name": "idem" }`, &first)
	r = callStationWith(t, d, idem, d.Token, path, `{ "method": "create", "name": "idem" }`, &again)
	if first.ID == "" || again.ID != first.ID || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("create twice with one Idempotency-Key = %s, %s (replayed %q), want one sandbox, replayed",
			first.ID, again.ID, r.header.Get("Idempotent-Replayed"))
	}
	callStationWith(t, d, idem, d.Token, path, `{ "method": "create", "name": "other" }`, nil).
		wantError(t, "Idempotency-Key reused", 422, errcode.Unprocessable, "idempotency_key_reused")

	// Destroy, the seed's body; the sandbox is gone after.
	var destroyed struct {
		ID        string
		Destroyed bool
	}
	mustStation(t, d, d.Token, path, seed(`{ "method": "destroy", "id": "WORKSPACE_ID" }`, ids...), &destroyed)
	if destroyed.ID != ws.ID || !destroyed.Destroyed {
		t.Errorf("destroy = %+v", destroyed)
	}
	callStation(t, d, d.Token, path, seed(`{ "method": "get", "id": "WORKSPACE_ID" }`, ids...), nil).
		wantError(t, "get after destroy", 404, errcode.NotFound, "sandbox_not_found")
}

// TestStationTenancy: through the method API (and its tenant path) a
// tenant's key reaches its own sandbox and not another tenant's, which
// answers as missing and is left as it was; a read key reads and cannot
// create. Each refusal has its positive control.
func TestStationTenancy(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	_, acme := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, acmeRead := tenantKey(t, d, "acme", auth.ScopeRead)
	_, globex := tenantKey(t, d, "globex", auth.ScopeExecution)
	paths := map[string]string{
		"operator": stationPath("local", "sandbox"),
		"tenant":   "/api/v1/tenant/stations/local/execution/sandbox",
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			var ws struct{ ID string }
			created := callStation(t, d, acme.Secret, path, `{ "method": "create" }`, &ws)
			if created.status != http.StatusOK || ws.ID == "" {
				t.Fatalf("create = %d %s", created.status, created.body)
			}
			ids := []string{"WORKSPACE_ID", ws.ID}
			// The audit log has the REST create, under the method call's
			// request ID.
			reqID := created.header.Get("X-Request-Id")
			testenv.Eventually(t, 30*time.Second, "the create is audited", func() bool {
				log, err := client.New(d.URL, acme.Secret).Audit(context.Background(), client.AuditQuery{Limit: 50})
				if err != nil {
					t.Fatalf("Audit: %v", err)
				}
				for _, e := range log.Entries {
					if e.Route == "POST /v1/sandboxes" && e.Resource == ws.ID && e.RequestID == reqID && e.KeyID == acme.ID {
						return true
					}
				}
				return false
			})
			probes := []string{
				`{ "method": "get", "id": "WORKSPACE_ID" }`,
				`{ "method": "exec", "id": "WORKSPACE_ID", "command": "touch pwned", "timeoutMs": 30000 }`,
				`{ "method": "destroy", "id": "WORKSPACE_ID" }`,
			}
			for _, p := range probes {
				body := seed(p, ids...)
				callStation(t, d, globex.Secret, path, body, nil).
					wantError(t, "globex "+body, 404, errcode.NotFound, "sandbox_not_found")
			}
			var list struct {
				Sandboxes []struct{ ID string } `json:"sandboxes"`
			}
			mustStation(t, d, globex.Secret, path, `{ "method": "list" }`, &list)
			if len(list.Sandboxes) != 0 {
				t.Errorf("globex list = %+v, want none", list)
			}
			// Positive control: acme reaches it, and globex's probes did
			// nothing.
			var got struct{ ID, State string }
			mustStation(t, d, acme.Secret, path, seed(`{ "method": "get", "id": "WORKSPACE_ID" }`, ids...), &got)
			if got.ID != ws.ID || got.State != "running" {
				t.Errorf("acme get = %+v, want %s running", got, ws.ID)
			}
			var c stationCommand
			mustStation(t, d, acme.Secret, path, seed(`{ "method": "exec", "id": "WORKSPACE_ID", "command": "ls", "waitMs": 30000 }`, ids...), &c)
			if c.FinishedAt == nil || strings.Contains(c.Stdout, "pwned") {
				t.Errorf("acme ls = %+v, want finished, without pwned", c)
			}

			// A read key reads, and cannot create; an execution key (above)
			// can.
			mustStation(t, d, acmeRead.Secret, path, seed(`{ "method": "get", "id": "WORKSPACE_ID" }`, ids...), &got)
			callStation(t, d, acmeRead.Secret, path, `{ "method": "create" }`, nil).
				wantError(t, "read key create", 403, errcode.PermissionDenied, "scope_insufficient")
			callStation(t, d, acmeRead.Secret, path, seed(`{ "method": "exec", "id": "WORKSPACE_ID", "command": "true" }`, ids...), nil).
				wantError(t, "read key exec", 403, errcode.PermissionDenied, "scope_insufficient")
			callStation(t, d, "", path, `{ "method": "list" }`, nil).
				wantError(t, "no key", 401, errcode.Unauthenticated, "")
			mustStation(t, d, acme.Secret, path, seed(`{ "method": "destroy", "id": "WORKSPACE_ID" }`, ids...), nil)
		})
	}
	// A tenant key describes its station on the tenant path.
	r := sendProbe(t, d, httpProbe{method: http.MethodGet, path: "/api/v1/tenant/execution", auth: bearerAuth(acmeRead.Secret)})
	if r.status != 200 || !strings.Contains(r.body, `"stationId":"local"`) {
		t.Errorf("GET /api/v1/tenant/execution = %d %s, want station local", r.status, r.body)
	}
}

// decodePNG decodes an image answer {mimeType, base64}.
func decodePNG(t *testing.T, what string, img struct{ MimeType, Base64 string }) {
	t.Helper()
	if img.MimeType != "image/png" {
		t.Errorf("%s mimeType = %q, want image/png", what, img.MimeType)
	}
	b, err := base64.StdEncoding.DecodeString(img.Base64)
	if err != nil {
		t.Fatalf("%s base64: %v", what, err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("%s is not a PNG: %v", what, err)
	}
}

// TestStationBrowserMethods runs every browser method of the seed against
// real Chromium, the seed's bodies verbatim (navigating to a local page
// instead of example.com).
func TestStationBrowserMethods(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	site := pages(t)
	path := stationPath("local", "browser")
	call := func(body string, out any) { t.Helper(); mustStation(t, d, d.Token, path, body, out) }

	var sess struct{ ID, State, Mode string }
	call(`{ "method": "open" }`, &sess)
	if !strings.HasPrefix(sess.ID, "brs_") || sess.State != "open" {
		t.Fatalf("open = %+v", sess)
	}
	ids := []string{"SESSION_ID", sess.ID}
	defer callStation(t, d, d.Token, path, seed(`{ "method": "close", "id": "SESSION_ID" }`, ids...), nil)

	var nav struct {
		URL    string
		Status int
	}
	call(seed(`{ "method": "action", "id": "SESSION_ID", "action": "navigate", "value": "https://example.com" }`,
		append(ids, "https://example.com", site+"/form.html")...), &nav)
	if nav.URL != site+"/form.html" || nav.Status != 200 {
		t.Errorf("action navigate = %+v, want %s/form.html 200", nav, site)
	}
	var page struct {
		Nodes           []map[string]any `json:"nodes"`
		CoordinateSpace string           `json:"coordinateSpace"`
		MaxElements     int              `json:"maxElements"`
	}
	call(seed(`{ "method": "execute", "id": "SESSION_ID", "command": { "op": "inspect" } }`, ids...), &page)
	if len(page.Nodes) == 0 || page.CoordinateSpace != "main_viewport" || page.MaxElements != 100 {
		t.Errorf("execute inspect = %+v, want nodes in camelCase", page)
	}
	call(seed(`{ "method": "execute", "id": "SESSION_ID", "command": { "op": "inspect", "maxElements": 5, "maxTextLength": 16 } }`, ids...), &page)
	if page.MaxElements != 5 {
		t.Errorf("execute inspect maxElements 5 = %d", page.MaxElements)
	}
	var title any
	call(seed(`{ "method": "action", "id": "SESSION_ID", "action": "evaluate", "value": "({page_title: document.title})" }`, ids...), &title)
	if m, ok := title.(map[string]any); !ok || m["page_title"] == nil {
		t.Errorf("action evaluate = %#v, want the page's own value, keys kept", title)
	}
	var shot struct{ MimeType, Base64 string }
	call(seed(`{ "method": "action", "id": "SESSION_ID", "action": "screenshot" }`, ids...), &shot)
	decodePNG(t, "action screenshot", shot)
	call(seed(`{ "method": "liveFrame", "id": "SESSION_ID" }`, ids...), &shot)
	decodePNG(t, "liveFrame", shot)
	callStation(t, d, d.Token, path, seed(`{ "method": "action", "id": "SESSION_ID", "action": "fly" }`, ids...), nil).
		wantError(t, "action fly", 400, errcode.Invalid, "station_action_unknown")
	callStation(t, d, d.Token, path, seed(`{ "method": "execute", "id": "SESSION_ID", "command": { "op": "fly" } }`, ids...), nil).
		wantError(t, "execute fly", 400, errcode.Invalid, "op_unknown")

	// Control: while the lease is held an action needs it.
	var lease struct {
		Token     string
		ExpiresAt string `json:"expiresAt"`
	}
	call(seed(`{ "method": "controlAcquire", "id": "SESSION_ID", "ttlMs": 30000 }`, ids...), &lease)
	if lease.Token == "" || lease.ExpiresAt == "" {
		t.Fatalf("controlAcquire = %+v", lease)
	}
	callStation(t, d, d.Token, path, seed(`{ "method": "action", "id": "SESSION_ID", "action": "screenshot" }`, ids...), nil).
		wantError(t, "screenshot under a lease", 409, errcode.Conflict, "control_held")
	call(seed(fmt.Sprintf(`{ "method": "action", "id": "SESSION_ID", "action": "screenshot", "lease": %q }`, lease.Token), ids...), &shot)
	var ctl struct{ Mode string }
	call(seed(`{ "method": "control", "id": "SESSION_ID" }`, ids...), &ctl)
	if ctl.Mode != "human" {
		t.Errorf("control = %+v, want human", ctl)
	}
	call(seed(fmt.Sprintf(`{ "method": "controlRelease", "id": "SESSION_ID", "token": %q }`, lease.Token), ids...), nil)

	var cp struct {
		ID   string
		URLs []string `json:"urls"`
	}
	call(seed(`{ "method": "checkpoint", "id": "SESSION_ID" }`, ids...), &cp)
	if !strings.HasPrefix(cp.ID, "bcp_") || len(cp.URLs) != 1 || cp.URLs[0] != site+"/form.html" {
		t.Errorf("checkpoint = %+v, want the form page", cp)
	}

	// Recordings: start (session id), then by recording id.
	type recording struct {
		ID, State string
		SessionID string `json:"sessionId"`
		Frames    []struct {
			ID    int `json:"id"`
			Index int `json:"index"`
		} `json:"frames"`
	}
	var rec recording
	call(seed(`{ "method": "recordingStart", "id": "SESSION_ID" }`, ids...), &rec)
	if rec.SessionID != sess.ID || rec.State != "recording" {
		t.Fatalf("recordingStart = %+v", rec)
	}
	rids := []string{"RECORDING_ID", rec.ID}
	testenv.Eventually(t, time.Minute, "a frame is recorded", func() bool {
		call(seed(`{ "method": "recording", "id": "RECORDING_ID" }`, rids...), &rec)
		return len(rec.Frames) > 0
	})
	call(seed(`{ "method": "recordingStop", "id": "RECORDING_ID" }`, rids...), &rec)
	if rec.State != "stopped" {
		t.Errorf("recordingStop = %+v", rec)
	}
	var recs struct{ Recordings []recording }
	call(`{ "method": "recordings" }`, &recs)
	if len(recs.Recordings) != 1 || recs.Recordings[0].ID != rec.ID {
		t.Errorf("recordings = %+v, want [%s]", recs, rec.ID)
	}
	call(seed(fmt.Sprintf(`{ "method": "recordingFrame", "id": "RECORDING_ID", "frameId": %d }`, rec.Frames[0].ID), rids...), &shot)
	decodePNG(t, "recordingFrame", shot)
	callStation(t, d, d.Token, path, seed(`{ "method": "recordingFrame", "id": "RECORDING_ID", "frameId": 999 }`, rids...), nil).
		wantError(t, "recordingFrame 999", 404, errcode.NotFound, "recording_frame_not_found")
	call(seed(`{ "method": "recordingDelete", "id": "RECORDING_ID" }`, rids...), nil)
	callStation(t, d, d.Token, path, seed(`{ "method": "recording", "id": "RECORDING_ID" }`, rids...), nil).
		wantError(t, "recording after delete", 404, errcode.NotFound, "recording_not_found")

	var list struct{ Sessions []struct{ ID string } }
	call(`{ "method": "list" }`, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != sess.ID {
		t.Errorf("list = %+v, want [%s]", list, sess.ID)
	}
	// Another tenant's key finds no such session, and closes nothing: the
	// close below (the control) still finds it open.
	_, globex := tenantKey(t, d, "globex", auth.ScopeExecution)
	for _, p := range []string{
		`{ "method": "liveFrame", "id": "SESSION_ID" }`,
		`{ "method": "action", "id": "SESSION_ID", "action": "screenshot" }`,
		`{ "method": "recordingStart", "id": "SESSION_ID" }`,
		`{ "method": "close", "id": "SESSION_ID" }`,
	} {
		callStation(t, d, globex.Secret, path, seed(p, ids...), nil).
			wantError(t, "globex "+p, 404, errcode.NotFound, "session_not_found")
	}
	var closed struct {
		ID     string
		Closed bool
	}
	call(seed(`{ "method": "close", "id": "SESSION_ID" }`, ids...), &closed)
	if !closed.Closed {
		t.Errorf("close = %+v", closed)
	}
	callStation(t, d, d.Token, path, seed(`{ "method": "action", "id": "SESSION_ID", "action": "screenshot" }`, ids...), nil).
		wantError(t, "screenshot after close", 404, errcode.NotFound, "session_not_found")
}

// TestStationRateLimits: a method call counts once against the per-key
// limit (the REST request it makes is not counted again), and a create
// through it meets the creates' limit as the REST create does.
func TestStationRateLimits(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.RateLimits = &httpapi.RateLimits{PerKey: ratelimit.Rate{PerSecond: 0.01, Burst: 4},
			CreatesKey: ratelimit.Rate{PerSecond: 0.01, Burst: 1}}
	})
	k := createAPIKey(t, d, "station", auth.ScopeExecution)
	path := stationPath("local", "sandbox")
	// The first create passes (the control), the second meets the creates'
	// limit: calls 1 and 2 of the key's 4.
	var ws struct{ ID string }
	mustStation(t, d, k.Secret, path, `{ "method": "create" }`, &ws)
	callStation(t, d, k.Secret, path, `{ "method": "create" }`, nil).
		wantError(t, "second create", 429, errcode.ResourceExhausted, "rate_limited")
	// Calls 3 and 4 pass: had the REST requests counted too, the key's
	// burst of 4 would be spent already.
	for i := 3; i <= 4; i++ {
		if r := callStation(t, d, k.Secret, path, `{ "method": "list" }`, nil); r.status != http.StatusOK {
			t.Fatalf("call %d = %d %s, want 200: the method API counted twice", i, r.status, r.body)
		}
	}
	callStation(t, d, k.Secret, path, `{ "method": "list" }`, nil).
		wantError(t, "call 5", 429, errcode.ResourceExhausted, "rate_limited")
	if err := d.Client.DeleteSandbox(context.Background(), ws.ID); err != nil {
		t.Fatal(err)
	}
}
