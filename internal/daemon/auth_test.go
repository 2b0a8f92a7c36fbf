package daemon_test

// Authentication and API-abuse tests (SECURITY.md AUTH-01, AUTH-06,
// AUTH-08, API-01, API-02, API-06, API-12) against the real daemon. The
// per-route checks are generated from the httpapi route table, so a new
// route is covered the day it is added.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/testenv"
	"github.com/berthdev/berth/internal/wire"
)

// probeClient sends the hand-made requests of these tests; its timeout
// turns a hung daemon into a failure instead of a stuck test.
var probeClient = &http.Client{Timeout: 2 * time.Minute}

// httpProbe is one hand-made request.
type httpProbe struct {
	method, path string
	auth         string // the Authorization header; "" sends none
	body         string
	header       http.Header
}

// httpReply is a response, read whole.
type httpReply struct {
	status int
	header http.Header
	body   string
}

func sendProbe(t *testing.T, d *testenv.Daemon, p httpProbe) httpReply {
	t.Helper()
	return sendProbeFrom(t, probeClient, d, p)
}

// sendProbeFrom is sendProbe through hc.
func sendProbeFrom(t *testing.T, hc *http.Client, d *testenv.Daemon, p httpProbe) httpReply {
	t.Helper()
	r, err := probeOnce(hc, d, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// probeOnce sends p through hc; it may run on any goroutine.
func probeOnce(hc *http.Client, d *testenv.Daemon, p httpProbe) (httpReply, error) {
	var body io.Reader
	if p.body != "" {
		body = strings.NewReader(p.body)
	}
	req, err := http.NewRequest(p.method, d.URL+p.path, body)
	if err != nil {
		return httpReply{}, fmt.Errorf("%s %s: %v", p.method, p.path, err)
	}
	for k, vs := range p.header {
		req.Header[k] = vs
	}
	if p.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return httpReply{}, fmt.Errorf("%s %s: %v", p.method, p.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpReply{}, fmt.Errorf("%s %s: reading body: %v", p.method, p.path, err)
	}
	return httpReply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// wantError checks that r is an error response in the one wire shape, with
// status, code and (when not "") reason, and a request id that matches the
// X-Request-Id header. It returns the detail.
func (r httpReply) wantError(t *testing.T, what string, status int, code errcode.Code, reason string) apitype.ErrorDetail {
	t.Helper()
	var eb apitype.ErrorBody
	if err := json.Unmarshal([]byte(r.body), &eb); err != nil {
		t.Errorf("%s = %d %q, want a JSON error body: %v", what, r.status, r.body, err)
		return eb.Error
	}
	e := eb.Error
	if r.status != status || e.Code != string(code) || (reason != "" && e.Reason != reason) {
		t.Errorf("%s = %d %s %s (%s), want %d %s %s", what, r.status, e.Code, e.Reason, e.Message, status, code, reason)
		if e.Code == "" {
			return e // not an error body; the checks below would only repeat that
		}
	}
	if e.Message == "" {
		t.Errorf("%s: error message is empty", what)
	}
	if e.RequestID == "" || e.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("%s: request_id %q, X-Request-Id %q, want equal and set", what, e.RequestID, r.header.Get("X-Request-Id"))
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type = %q, want application/json", what, ct)
	}
	return e
}

// bearerAuth is the Authorization header for secret; none for "".
func bearerAuth(secret string) string {
	if secret == "" {
		return ""
	}
	return "Bearer " + secret
}

// routeTable returns the daemon's route table. The server is built without
// dependencies: only its table is used.
func routeTable(t *testing.T) []httpapi.Route {
	t.Helper()
	rs := httpapi.New(httpapi.Config{}).Routes()
	if len(rs) < 10 {
		t.Fatalf("httpapi routes = %d, want the whole table", len(rs))
	}
	return rs
}

// fillPath fills rt's path parameters with sandboxID and commandID, or
// with well-formed IDs of nothing when they are "". Key routes get a key
// ID, terminal routes a terminal ID made from commandID.
func fillPath(t *testing.T, rt httpapi.Route, sandboxID, commandID string) string {
	t.Helper()
	if sandboxID == "" {
		sandboxID = ident.New("sbx_")
	}
	if commandID == "" {
		commandID = ident.New("cmd_")
	}
	id := sandboxID
	if strings.HasPrefix(rt.Path, "/v1/keys/") {
		id = ident.New("key_")
	}
	// Terminal routes get a terminal ID in the same shape as commandID, so
	// hostile IDs reach them too.
	terminalID := "term_" + strings.TrimPrefix(commandID, "cmd_")
	if !strings.HasPrefix(commandID, "cmd_") {
		terminalID = commandID
	}
	if strings.HasPrefix(rt.Path, "/v1/templates/") {
		id = "no-such-template"
	}
	p := strings.NewReplacer("{id}", id, "{cid}", commandID, "{tid}", terminalID, "{name}", "no-such-service",
		"{port}", "8000", "{path...}", "some/path", "{sha256}", strings.Repeat("0", 64),
		"{action}", "no-such-action", "{token}", "brs_x.1.forged", "{artifact}", "art_none", "{n}", "0",
		"{stationId}", "local", "{primitive}", "sandbox").Replace(rt.Path)
	if strings.HasPrefix(rt.Path, "/v1/templates/{name}") {
		p = strings.Replace(rt.Path, "{name}", "no-such-template", 1)
	}
	if strings.ContainsAny(p, "{}") {
		t.Fatalf("route %s %s has a path parameter this test does not fill; teach fillPath about it", rt.Method, rt.Path)
	}
	return p
}

// probeBody is a body for rt that an authorized request gets rejected
// (invalid, or its sandbox not found), so positive controls create nothing.
func probeBody(rt httpapi.Route) string {
	switch rt.Method + " " + rt.Path {
	case "POST /v1/sandboxes":
		return `{"name":"not a valid name!"}`
	case "POST /v1/keys":
		return `{"name":"x","scope":"no-such-scope"}`
	}
	if rt.Method == http.MethodPost || rt.Method == http.MethodPut {
		return "{}"
	}
	return ""
}

func createAPIKey(t *testing.T, d *testenv.Daemon, name, scope string) apitype.Key {
	t.Helper()
	k, err := d.Client.CreateKey(context.Background(), apitype.CreateKeyRequest{Name: name, Scope: scope})
	if err != nil {
		t.Fatalf("CreateKey(%s, %s): %v", name, scope, err)
	}
	if !strings.HasPrefix(k.Secret, auth.KeyPrefix) {
		t.Fatalf("CreateKey(%s, %s) secret = %q, want a bk_ key", name, scope, k.Secret)
	}
	return k
}

// TestAuthEveryRouteNeedsAKey is AUTH-01: every route but the health
// checks answers 401 to a missing, malformed, unknown or revoked key, and
// (the positive control) something else to the admin key.
func TestAuthEveryRouteNeedsAKey(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()

	revoked := createAPIKey(t, d, "soon revoked", auth.ScopeExecution)
	if r := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(revoked.Secret)}); r.status != http.StatusOK {
		t.Fatalf("GET /v1/sandboxes with the key before revoking = %d %s, want 200", r.status, r.body)
	}
	if err := d.Client.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}

	bad := []struct{ name, header string }{
		{"no header", ""},
		{"bearer x", "Bearer x"},
		{"bearer without key", "Bearer"},
		{"basic", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+d.Token))},
		{"other scheme", "Token " + d.Token},
		{"admin key plus a character", bearerAuth(d.Token + "a")},
		{"admin key truncated", bearerAuth(d.Token[:len(d.Token)-1])},
		{"unknown well-formed key", bearerAuth(ident.Token(auth.KeyPrefix))},
		{"revoked key", bearerAuth(revoked.Secret)},
		{"overlong", bearerAuth(auth.KeyPrefix + strings.Repeat("a", 300))},
	}
	var public []string
	for _, rt := range routeTable(t) {
		if rt.Public {
			public = append(public, rt.Method+" "+rt.Path)
		}
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			t.Parallel()
			path := fillPath(t, rt, "", "")
			if rt.Public {
				// A view link's routes take no key: their token is the
				// capability, and a forged one is refused whatever the key.
				want := http.StatusOK
				if strings.HasPrefix(rt.Path, "/live/") {
					want = http.StatusUnauthorized
				}
				for _, b := range append(bad, struct{ name, header string }{"admin key", bearerAuth(d.Token)}) {
					if r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: b.header}); r.status != want {
						t.Errorf("%s %s (%s) = %d %s, want %d", rt.Method, path, b.name, r.status, r.body, want)
					}
				}
				return
			}
			messages := map[string]bool{}
			for _, b := range bad {
				if b.name == "basic" && strings.HasPrefix(rt.Path, "/forms/") {
					continue // the Gotenberg routes take the key as a Basic password (TestGotenbergRoutes)
				}
				what := fmt.Sprintf("%s %s (%s)", rt.Method, path, b.name)
				r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: b.header, body: probeBody(rt)})
				e := r.wantError(t, what, http.StatusUnauthorized, errcode.Unauthenticated, "")
				messages[e.Message] = true
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("%s: WWW-Authenticate = %q, want a Bearer challenge", what, got)
				}
				if strings.Contains(r.body, d.Token) || strings.Contains(r.body, revoked.Secret) {
					t.Errorf("%s: body %s contains a key", what, r.body)
				}
			}
			// Every failure reads the same: a caller cannot tell a revoked
			// key from an unknown one or a malformed one.
			if len(messages) != 1 {
				t.Errorf("%s %s: 401 messages differ by cause: %v", rt.Method, path, messages)
			}

			if rt.Method == http.MethodGet {
				// ServeMux routes HEAD to GET patterns: it is checked too.
				if r := sendProbe(t, d, httpProbe{method: http.MethodHead, path: path}); r.status != http.StatusUnauthorized {
					t.Errorf("HEAD %s without a key = %d, want 401", path, r.status)
				}
			}

			// Positive control: the same request with the admin key gets
			// past authentication.
			r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(d.Token), body: probeBody(rt)})
			if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
				t.Errorf("%s %s with the admin key = %d %s, want past authentication", rt.Method, path, r.status, r.body)
			}
		})
	}
	if diff := cmp.Diff([]string{"GET /healthz", "GET /readyz", "GET /v1/openapi.json", "GET /live/{token}", "GET /live/{token}/live.js", "GET /live/{token}/ws", "GET /health"}, public); diff != "" {
		t.Errorf("public routes (-want +got):\n%s", diff)
	}
}

// TestAuthExecutionScope is AUTH-06: an execution key gets 403 on the
// admin-only routes and works on the sandbox routes.
func TestAuthExecutionScope(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	execKey := createAPIKey(t, d, "agent", auth.ScopeExecution)

	var adminOnly int
	for _, rt := range routeTable(t) {
		// Keys, tenants (a tenant's key may read its own), image imports
		// (shared templates), the daemon's metrics, a cluster's workers and
		// the operator's station description.
		want := strings.HasPrefix(rt.Path, "/v1/keys") || rt.Path == "/v1/templates/import" || rt.Path == "/metrics" ||
			strings.HasPrefix(rt.Path, "/v1/workers") ||
			rt.Path == "/api/v1/execution" ||
			(strings.HasPrefix(rt.Path, "/v1/tenants") && !(rt.Method == http.MethodGet && rt.Path == "/v1/tenants/{id}"))
		if rt.AdminOnly != want {
			t.Errorf("route %s %s: admin-only %v, want %v (keys, tenants, imports, metrics, workers, station)", rt.Method, rt.Path, rt.AdminOnly, want)
		}
		if !rt.AdminOnly {
			if rt.Public {
				continue
			}
			// Every other route lets the execution key past authorization.
			path := fillPath(t, rt, "", "")
			if r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(execKey.Secret), body: probeBody(rt)}); r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
				t.Errorf("%s %s (execution key) = %d %s, want past authorization", rt.Method, path, r.status, r.body)
			}
			continue
		}
		adminOnly++
		path := fillPath(t, rt, "", "")
		what := fmt.Sprintf("%s %s (execution key)", rt.Method, path)
		r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(execKey.Secret), body: `{"name":"escalate","scope":"admin"}`})
		r.wantError(t, what, http.StatusForbidden, errcode.PermissionDenied, "scope_insufficient")
		// Positive control: the admin key passes.
		if r := sendProbe(t, d, httpProbe{method: rt.Method, path: path, auth: bearerAuth(d.Token), body: probeBody(rt)}); r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
			t.Errorf("%s %s (admin key) = %d %s, want past authorization", rt.Method, path, r.status, r.body)
		}
	}
	if adminOnly == 0 {
		t.Fatal("no admin-only routes in the table; the scope check tests nothing")
	}

	// The execution key cannot mint keys or revoke the admin key...
	ec := client.New(d.URL, execKey.Secret)
	keys, err := d.Client.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := ec.RevokeKey(ctx, k.ID); !client.IsCode(err, errcode.PermissionDenied) {
			t.Errorf("RevokeKey(%s) with the execution key = %v, want permission_denied", k.Name, err)
		}
	}
	if after, _ := d.Client.ListKeys(ctx); !cmp.Equal(keys, after) {
		t.Errorf("keys changed after the execution key's attempts:\nbefore %+v\nafter  %+v", keys, after)
	}

	// ...and uses sandboxes fully.
	sb, err := ec.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"})
	if err != nil {
		t.Fatalf("CreateSandbox with the execution key: %v", err)
	}
	c, err := ec.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo scoped"})
	if err != nil || c.Stdout != "scoped\n" {
		t.Errorf("Run with the execution key = %q, %v, want scoped", c.Stdout, err)
	}
	if _, err := ec.WriteFile(ctx, sb.ID, "f.txt", strings.NewReader("hi"), 0); err != nil {
		t.Errorf("WriteFile with the execution key: %v", err)
	}
	if list, err := ec.ListSandboxes(ctx); err != nil || len(list) != 1 {
		t.Errorf("ListSandboxes with the execution key = %d, %v, want 1", len(list), err)
	}
	if _, err := ec.System(ctx); err != nil {
		t.Errorf("System with the execution key: %v", err)
	}
	if err := ec.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Errorf("DeleteSandbox with the execution key: %v", err)
	}
}

// TestAuthQueryCredentialsRejected is AUTH-08: keys in the query string
// are refused, even next to a valid header, before anything happens.
func TestAuthQueryCredentialsRejected(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	tests := []struct {
		name, query string
	}{
		{"token", "token=abc"},
		{"access_token", "access_token=abc"},
		{"api_key", "api_key=abc"},
		{"apikey", "apikey=abc"},
		{"empty token", "token="},
		{"real key as token", "token=" + url.QueryEscape(d.Token)},
		{"real key in another parameter", "state=" + url.QueryEscape(d.Token)},
		{"real key among others", "state=running&name=" + url.QueryEscape(d.Token)},
		// Go's query parser drops pairs with a semicolon; the check must not.
		{"token before a semicolon", "token=abc;state=running"},
		{"real key after a semicolon", "state=running;x=" + url.QueryEscape(d.Token)},
		{"escaped parameter name", "%74oken=abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, p := range []httpProbe{
				{method: "GET", path: "/v1/sandboxes?" + tt.query, auth: bearerAuth(d.Token)},
				{method: "GET", path: "/healthz?" + tt.query},
				{method: "POST", path: "/v1/keys?" + tt.query, auth: bearerAuth(d.Token), body: `{"name":"from query test"}`},
			} {
				what := fmt.Sprintf("%s %s", p.method, p.path)
				r := sendProbe(t, d, p)
				r.wantError(t, what, http.StatusBadRequest, errcode.Invalid, "credentials_in_query")
				if strings.Contains(r.body, d.Token) {
					t.Errorf("%s: body %s echoes the key", what, r.body)
				}
			}
		})
	}
	t.Cleanup(func() {
		// Nothing was done on behalf of a rejected request.
		keys, err := d.Client.ListKeys(context.Background())
		if err != nil || len(keys) != 1 {
			t.Errorf("keys after rejected creates = %d, %v, want only the admin key", len(keys), err)
		}
	})

	// Positive control: the same requests without credentials in the
	// query are served.
	for _, p := range []httpProbe{
		{method: "GET", path: "/v1/sandboxes?state=running", auth: bearerAuth(d.Token)},
		{method: "GET", path: "/healthz?verbose=1"},
	} {
		if r := sendProbe(t, d, p); r.status != http.StatusOK {
			t.Errorf("%s %s = %d %s, want 200", p.method, p.path, r.status, r.body)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the daemon's concurrent logging.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuthSecretsNeverStoredOrShown is AUTH-08: key material is not in the
// database, the logs, the metrics or error bodies, and the admin key file
// is private.
func TestAuthSecretsNeverStoredOrShown(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	var logs lockedBuffer
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	secrets := []string{d.Token}
	for _, scope := range []string{auth.ScopeAdmin, auth.ScopeExecution, auth.ScopeExecution} {
		secrets = append(secrets, createAPIKey(t, d, "hygiene "+scope, scope).Secret)
	}
	revoked := createAPIKey(t, d, "hygiene revoked", auth.ScopeExecution)
	if err := d.Client.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, revoked.Secret)

	// Use every key, and fail with every key, the ways a client might.
	var bodies []string
	for _, s := range secrets {
		for _, p := range []httpProbe{
			{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(s)},
			{method: "GET", path: "/v1/keys", auth: bearerAuth(s)},
			{method: "GET", path: "/v1/sandboxes/" + ident.New("sbx_"), auth: bearerAuth(s)},
			{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(s + "x")},
			{method: "GET", path: "/v1/sandboxes", auth: "Basic " + s},
			{method: "GET", path: "/v1/sandboxes?token=" + s, auth: bearerAuth(s)},
			{method: "POST", path: "/v1/keys", auth: bearerAuth(s), body: `{"name":"` + s + `","scope":"` + s + `"}`},
			{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(s), body: `{"name":"` + s + `!"}`},
		} {
			bodies = append(bodies, sendProbe(t, d, p).body)
		}
	}
	metrics := sendProbe(t, d, httpProbe{method: "GET", path: "/metrics", auth: bearerAuth(d.Token)})
	if metrics.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d", metrics.status)
	}
	keyList := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/keys", auth: bearerAuth(d.Token)})

	for i, s := range secrets {
		for _, b := range bodies {
			if strings.Contains(b, s) {
				t.Errorf("a response body contains secret %d: %s", i, b)
			}
		}
		if strings.Contains(metrics.body, s) || strings.Contains(keyList.body, s) {
			t.Errorf("metrics or the key list contain secret %d", i)
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("the daemon's log contains secret %d", i)
		}
	}
	// Positive control for the log check: requests were logged.
	if !strings.Contains(logs.String(), "/v1/keys") {
		t.Errorf("the daemon's log has no request lines; the log check tests nothing:\n%s", logs.String())
	}

	fi, err := os.Stat(filepath.Join(d.DataDir, daemon.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode = %v, want 0600", daemon.KeyFile, fi.Mode().Perm())
	}
	if fi, err := os.Stat(d.DataDir); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("data directory mode = %v, %v, want no group or other access", fi.Mode().Perm(), err)
	}

	// The database files, read raw (WAL included), hold key hashes and
	// never a key. Positive control: each hash is found, so the files read
	// are the ones that hold the keys.
	var db []byte
	for _, name := range []string{daemon.DBFile, daemon.DBFile + "-wal", daemon.DBFile + "-shm"} {
		b, err := os.ReadFile(filepath.Join(d.DataDir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		db = append(db, b...)
	}
	for i, s := range secrets {
		random := s[len(auth.KeyPrefix):]
		if bytes.Contains(db, []byte(random)) || bytes.Contains(bytes.ToUpper(db), []byte(strings.ToUpper(random))) {
			t.Errorf("the database contains secret %d in plaintext", i)
		}
		if !bytes.Contains(db, []byte(auth.Hash(s))) {
			t.Errorf("the database does not contain the hash of secret %d; the raw read missed the keys table", i)
		}
	}
	// No other file in the data directory holds a key either.
	err = filepath.WalkDir(d.DataDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() == daemon.KeyFile {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a socket or a file that went away
		}
		for i, s := range secrets {
			if bytes.Contains(b, []byte(s[len(auth.KeyPrefix):])) {
				t.Errorf("%s contains secret %d", path, i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rawExchange writes head (request line and headers, no final blank line)
// and then what body writes, over a fresh connection, and returns the
// response. body may stop short of what the headers declare: the response
// must come anyway, which shows the daemon did not wait for the rest.
func rawExchange(t *testing.T, d *testenv.Daemon, head string, body func(io.Writer) error) httpReply {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(d.URL, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	wrote := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(conn)
		_, err := io.WriteString(w, head+"\r\n\r\n")
		if err == nil {
			err = body(w)
		}
		if err == nil {
			err = w.Flush()
		}
		wrote <- err
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	conn.Close()
	<-wrote // done, or failed on the closed connection
	return httpReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// nameBodyPrefix is the start of a body whose one string field runs on.
const nameBodyPrefix = `{"name":"`

// partialBody writes the start of a JSON body and n bytes of a string,
// and stops: never the whole declared body.
func partialBody(n int) func(io.Writer) error {
	return func(w io.Writer) error {
		if _, err := io.WriteString(w, nameBodyPrefix); err != nil {
			return err
		}
		_, err := io.Copy(w, io.LimitReader(byteRepeater('a'), int64(n)))
		return err
	}
}

// partialChunks is partialBody in chunked transfer encoding, without the
// final chunk.
func partialChunks(n int) func(io.Writer) error {
	return func(w io.Writer) error {
		chunk := []byte(nameBodyPrefix + strings.Repeat("a", 32<<10-len(nameBodyPrefix)))
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return err
			}
			chunk = bytes.Repeat([]byte("a"), 32<<10)
		}
		return nil
	}
}

type byteRepeater byte

func (r byteRepeater) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestAPIBodyCap is API-01: a JSON body 10 MB over the cap is refused
// with 413 as soon as the cap is passed, with a declared length or
// chunked, on every JSON route.
func TestAPIBodyCap(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	const maxUpload = 1 << 20
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.MaxUpload = maxUpload })
	sb := newSandbox(t, d)
	const over = wire.MaxJSONBody + 10<<20
	const sent = 1 << 20 // what is actually sent: 8 times the cap, a tenth of the declared body
	head := func(method, path, framing string) string {
		return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: berth\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s",
			method, path, d.Token, framing)
	}
	length := fmt.Sprintf("Content-Length: %d", over)
	chunked := "Transfer-Encoding: chunked"
	tests := []struct {
		name, method, path, framing string
		body                        func(io.Writer) error
	}{
		{"create sandbox", "POST", "/v1/sandboxes", length, partialBody(sent)},
		{"create sandbox chunked", "POST", "/v1/sandboxes", chunked, partialChunks(sent)},
		{"create key", "POST", "/v1/keys", length, partialBody(sent)},
		{"create key chunked", "POST", "/v1/keys", chunked, partialChunks(sent)},
		{"exec", "POST", "/v1/sandboxes/" + sb.ID + "/commands", length, partialBody(sent)},
		{"exec chunked", "POST", "/v1/sandboxes/" + sb.ID + "/commands", chunked, partialChunks(sent)},
		{"mkdir", "POST", "/v1/sandboxes/" + sb.ID + "/files/mkdir", length, partialBody(sent)},
		{"mkdir chunked", "POST", "/v1/sandboxes/" + sb.ID + "/files/mkdir", chunked, partialChunks(sent)},
		{"stdin chunked", "POST", "/v1/sandboxes/" + sb.ID + "/commands/" + ident.New("cmd_") + "/stdin", chunked, partialChunks(sent)},
		{"move", "POST", "/v1/sandboxes/" + sb.ID + "/files/move", length, partialBody(sent)},
		{"stdin", "POST", "/v1/sandboxes/" + sb.ID + "/commands/" + ident.New("cmd_") + "/stdin", length, partialBody(sent)},
		{"create terminal", "POST", "/v1/sandboxes/" + sb.ID + "/terminals", length, partialBody(sent)},
		{"create terminal chunked", "POST", "/v1/sandboxes/" + sb.ID + "/terminals", chunked, partialChunks(sent)},
		{"terminal input", "POST", "/v1/sandboxes/" + sb.ID + "/terminals/" + ident.New("term_") + "/input", length, partialBody(sent)},
		{"terminal input chunked", "POST", "/v1/sandboxes/" + sb.ID + "/terminals/" + ident.New("term_") + "/input", chunked, partialChunks(sent)},
		{"terminal resize", "POST", "/v1/sandboxes/" + sb.ID + "/terminals/" + ident.New("term_") + "/resize", length, partialBody(sent)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := rawExchange(t, d, head(tt.method, tt.path, tt.framing), tt.body)
			r.wantError(t, tt.method+" "+tt.path, http.StatusRequestEntityTooLarge, errcode.PayloadTooLarge, "body_too_large")
		})
	}
	// Uploads have their own cap, --max-upload.
	upload := "/v1/sandboxes/" + sb.ID + "/files/content?path=big.bin"
	uploads := []struct {
		name, framing string
		body          func(io.Writer) error
	}{
		{"upload", fmt.Sprintf("Content-Length: %d", maxUpload+10<<20), partialBody(2 * maxUpload)},
		{"upload chunked", chunked, partialChunks(2 * maxUpload)},
	}
	for _, tt := range uploads {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := rawExchange(t, d, head("PUT", upload, tt.framing), tt.body)
			r.wantError(t, "PUT "+upload, http.StatusRequestEntityTooLarge, errcode.PayloadTooLarge, "")
		})
	}

	// Positive control: the same body just under the cap is read whole and
	// judged on its content.
	t.Run("under the cap", func(t *testing.T) {
		t.Parallel()
		body := nameBodyPrefix + strings.Repeat("a", wire.MaxJSONBody-len(nameBodyPrefix)-2) + `"}`
		r := rawExchange(t, d, head("POST", "/v1/sandboxes", fmt.Sprintf("Content-Length: %d", len(body))),
			func(w io.Writer) error { _, err := io.WriteString(w, body); return err })
		e := r.wantError(t, "POST /v1/sandboxes (under the cap)", http.StatusBadRequest, errcode.Invalid, "")
		if e.Problems["name"] == "" {
			t.Errorf("POST /v1/sandboxes (under the cap) problems = %v, want one for name", e.Problems)
		}
	})
	t.Cleanup(func() {
		if r := sendProbe(t, d, httpProbe{method: "GET", path: "/healthz"}); r.status != http.StatusOK {
			t.Errorf("GET /healthz after oversized bodies = %d", r.status)
		}
	})
}

// TestAPIMalformedBody is API-01's other half: bodies that are not the
// request type get 400 body_invalid with a message that says what is wrong.
func TestAPIMalformedBody(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	exec := "/v1/sandboxes/" + ident.New("sbx_") + "/commands" // decoding comes before the lookup
	tests := []struct {
		name, path, body string
		wantMsg          string
	}{
		{"truncated", "/v1/sandboxes", `{"runtime":"process"`, "truncated"},
		{"not JSON", "/v1/sandboxes", `runtime=process`, "not valid JSON"},
		{"unknown field", "/v1/sandboxes", `{"runtime":"process","memory":"1TB"}`, `unknown field "memory"`},
		{"trailing garbage", "/v1/sandboxes", `{"runtime":"process"} trailing`, "not valid JSON"},
		{"second value", "/v1/sandboxes", `{"runtime":"process"}{}`, "data after the JSON value"},
		{"wrong type", "/v1/sandboxes", `{"labels":["a"]}`, `"labels" must be an object`},
		{"array body", "/v1/sandboxes", `[{"runtime":"process"}]`, "must be an object"},
		{"exec wrong type", exec, `{"argv":"ls -l"}`, `"argv" must be an array`},
		{"exec string timeout", exec, `{"command":"true","timeout_ms":"5s"}`, `"timeout_ms" must be a 64-bit integer`},
		{"exec unknown field", exec, `{"command":"true","cpus":1000}`, `unknown field "cpus"`},
		{"key wrong type", "/v1/keys", `{"name":7}`, `"name" must be a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sendProbe(t, d, httpProbe{method: "POST", path: tt.path, auth: bearerAuth(d.Token), body: tt.body})
			e := r.wantError(t, "POST "+tt.path+" "+tt.body, http.StatusBadRequest, errcode.Invalid, "body_invalid")
			if !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("POST %s %s message = %q, want it to contain %q", tt.path, tt.body, e.Message, tt.wantMsg)
			}
		})
	}
	t.Cleanup(func() {
		if list, err := d.Client.ListSandboxes(context.Background()); err != nil || len(list) != 0 {
			t.Errorf("sandboxes after malformed creates = %d, %v, want none", len(list), err)
		}
	})
}

// TestAPIHeaderCap is API-02: headers beyond MaxHeaderBytes get 431.
func TestAPIHeaderCap(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	many := func(n int) http.Header {
		h := http.Header{}
		for i := range n {
			h.Set(fmt.Sprintf("X-Header-%05d", i), "v")
		}
		return h
	}
	tests := []struct {
		name   string
		header http.Header
		want   int
	}{
		{"one 80 KiB header", http.Header{"X-Big": {strings.Repeat("a", 80<<10)}}, http.StatusRequestHeaderFieldsTooLarge},
		{"one 1 MiB header", http.Header{"X-Big": {strings.Repeat("a", 1<<20)}}, http.StatusRequestHeaderFieldsTooLarge},
		{"5000 headers", many(5000), http.StatusRequestHeaderFieldsTooLarge},
		// Positive controls: large but allowed headers are served.
		{"one 32 KiB header", http.Header{"X-Big": {strings.Repeat("a", 32<<10)}}, http.StatusOK},
		{"500 headers", many(500), http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(d.Token), header: tt.header})
			if r.status != tt.want {
				t.Errorf("GET /v1/sandboxes with %s = %d, want %d", tt.name, r.status, tt.want)
			}
		})
	}
}

// TestAPIOutOfRangeParams is API-06: out-of-range numbers in bodies and
// queries are refused with 400 naming the parameter, or clamped where the
// API documents a maximum (wait_ms, limit).
func TestAPIOutOfRangeParams(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	done := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "echo done"})
	commands := "/v1/sandboxes/" + sb.ID + "/commands"

	bodies := []struct {
		name, body  string
		wantStatus  int
		wantProblem string // a key of problems, or "" for a body_invalid message naming timeout_ms
	}{
		{"timeout -1", `{"command":"true","timeout_ms":-1}`, 400, "timeout_ms"},
		{"timeout 1e12 as an integer", `{"command":"true","timeout_ms":1000000000000}`, 400, "timeout_ms"},
		{"timeout max int64", `{"command":"true","timeout_ms":9223372036854775807}`, 400, "timeout_ms"},
		{"timeout 1e12", `{"command":"true","timeout_ms":1e12}`, 400, ""},
		{"timeout over int64", `{"command":"true","timeout_ms":9223372036854775808}`, 400, ""},
		{"timeout fraction", `{"command":"true","timeout_ms":0.5}`, 400, ""},
		// Positive control: an in-range timeout is accepted.
		{"timeout 5s", `{"command":"true","timeout_ms":5000}`, 202, ""},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sendProbe(t, d, httpProbe{method: "POST", path: commands, auth: bearerAuth(d.Token), body: tt.body})
			what := "POST " + commands + " " + tt.body
			switch {
			case tt.wantStatus == http.StatusAccepted:
				if r.status != tt.wantStatus {
					t.Errorf("%s = %d %s, want 202", what, r.status, r.body)
				}
			case tt.wantProblem != "":
				if e := r.wantError(t, what, tt.wantStatus, errcode.Invalid, ""); e.Problems[tt.wantProblem] == "" {
					t.Errorf("%s problems = %v, want one for %s", what, e.Problems, tt.wantProblem)
				}
			default:
				if e := r.wantError(t, what, tt.wantStatus, errcode.Invalid, "body_invalid"); !strings.Contains(e.Message, "timeout_ms") {
					t.Errorf("%s message = %q, want it to name timeout_ms", what, e.Message)
				}
			}
		})
	}

	cmdPath := commands + "/" + done.ID
	queries := []struct {
		name, path string
		wantStatus int
	}{
		{"wait_ms -5", cmdPath + "?wait_ms=-5", 400},
		{"wait_ms 1e9", cmdPath + "?wait_ms=1e9", 400},
		{"wait_ms overflow", cmdPath + "?wait_ms=99999999999999999999", 400},
		{"stdout_offset abc", cmdPath + "?stdout_offset=abc", 400},
		{"stderr_offset -1", cmdPath + "?stderr_offset=-1", 400},
		{"max_bytes -1", cmdPath + "?max_bytes=-1", 400},
		{"encoding rot13", cmdPath + "?encoding=rot13", 400},
		{"files limit -1", "/v1/sandboxes/" + sb.ID + "/files?limit=-1", 400},
		{"files limit abc", "/v1/sandboxes/" + sb.ID + "/files?limit=abc", 400},
		// Documented maxima clamp instead of failing.
		{"huge wait_ms is clamped", cmdPath + "?wait_ms=999999999999", 200},
		{"huge max_bytes is clamped", cmdPath + "?max_bytes=999999999999", 200},
		{"files limit 1e9 is clamped", "/v1/sandboxes/" + sb.ID + "/files?limit=1000000000", 200},
		// Positive control: the same reads with sane values.
		{"wait_ms 0", cmdPath + "?wait_ms=0&stdout_offset=0", 200},
		{"files limit 10", "/v1/sandboxes/" + sb.ID + "/files?limit=10", 200},
	}
	for _, tt := range queries {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sendProbe(t, d, httpProbe{method: "GET", path: tt.path, auth: bearerAuth(d.Token)})
			if tt.wantStatus == http.StatusOK {
				if r.status != http.StatusOK {
					t.Errorf("GET %s = %d %s, want 200", tt.path, r.status, r.body)
				}
				return
			}
			r.wantError(t, "GET "+tt.path, tt.wantStatus, errcode.Invalid, "query_invalid")
		})
	}
}

// TestAPIErrorHygiene is API-12: errors provoked on every route show no
// stack traces, host paths, addresses, SQL or Go internals.
func TestAPIErrorHygiene(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	done := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "echo x"})
	execKey := createAPIKey(t, d, "hygiene", auth.ScopeExecution)
	host, _ := os.Hostname()
	leaks := []string{
		"goroutine ", ".go:", "panic", "runtime.", "/usr/local/go", "github.com/berthdev",
		d.DataDir, filepath.Dir(d.DataDir), os.TempDir() + "/", "/proc/", "/home/", "/root",
		"127.0.0.1", "sqlite", "SQL", "SELECT ", "constraint", "apitype.", "agent_token",
	}
	if host != "" && len(host) > 3 {
		leaks = append(leaks, host)
	}

	// The probes (thousands) go four at a time.
	var provoked atomic.Int64
	probes := make(chan httpProbe)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for p := range probes {
				r, err := probeOnce(probeClient, d, p)
				if err != nil {
					t.Error(err)
					continue
				}
				if r.status < 400 {
					continue
				}
				provoked.Add(1)
				what := fmt.Sprintf("%s %s %.40q", p.method, p.path, p.body)
				for _, leak := range leaks {
					if strings.Contains(r.body, leak) {
						t.Errorf("%s = %d %s: body shows %q", what, r.status, r.body, leak)
					}
				}
				if strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") &&
					(r.status == http.StatusNotFound || r.status == http.StatusMethodNotAllowed) {
					continue // ServeMux's own answer for a path outside the table ("..")
				}
				if strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") && strings.HasPrefix(p.path, "/forms/") {
					continue // the Gotenberg routes answer plain text, as Gotenberg does
				}
				if e := mustErrorBody(t, r); e.RequestID == "" || e.RequestID != r.header.Get("X-Request-Id") {
					t.Errorf("%s: request_id %q, X-Request-Id %q, want equal and set", what, e.RequestID, r.header.Get("X-Request-Id"))
				}
			}
		})
	}
	// What a sandbox's agent answers may differ by runtime; the rest of
	// the surface does not. The container and gvisor passes probe only a
	// sandbox's own routes, on the sandbox, with the admin key.
	agentOnly := testenv.Runtime() != "process"
	keys := []string{d.Token, execKey.Secret, ""}
	if agentOnly {
		keys = keys[:1]
	}
	for _, rt := range routeTable(t) {
		if agentOnly && !strings.HasPrefix(rt.Path, "/v1/sandboxes/{id}/") {
			continue
		}
		// Client input echoed back is no leak, so the probes carry no host
		// paths of the daemon's own.
		queries := []string{"", "?path=../../../../etc/passwd", "?path=%2Fetc%2Fshadow", "?path=no/such/file&limit=-1&wait_ms=-1&mode=999",
			"?cursor=%00&recursive=maybe", "?encoding=" + url.QueryEscape("</script>")}
		bodies := []string{probeBody(rt)}
		if rt.Method == http.MethodPost || rt.Method == http.MethodPut {
			bodies = append(bodies, `{"bogus":`, `{"path":"../../x","from":"/etc/passwd","to":"../y","name":"../z"}`,
				`{"argv":["/no/such/binary"],"cwd":"../../.."}`, "\x00\xff")
		}
		ids := [][2]string{{"", ""}, {sb.ID, ""}, {sb.ID, done.ID}, {"..", "..%2F.."}}
		for _, id := range ids {
			if rt.Method == http.MethodDelete && rt.Path == "/v1/sandboxes/{id}" && id[0] == sb.ID {
				continue // would delete the sandbox the other probes use
			}
			if agentOnly && id[0] != sb.ID {
				continue
			}
			path := fillPath(t, rt, id[0], id[1])
			for _, q := range queries {
				for _, body := range bodies {
					for _, key := range keys {
						probes <- httpProbe{method: rt.Method, path: path + q, auth: bearerAuth(key), body: body}
					}
				}
			}
		}
	}
	close(probes)
	wg.Wait()
	if provoked := provoked.Load(); provoked < 100 {
		t.Errorf("provoked %d error responses, want at least 100; the probes do not reach the handlers", provoked)
	}
}

func mustErrorBody(t *testing.T, r httpReply) apitype.ErrorDetail {
	t.Helper()
	var eb apitype.ErrorBody
	if err := json.Unmarshal([]byte(r.body), &eb); err != nil || eb.Error.Code == "" {
		t.Errorf("error response %d %q is not a JSON error body", r.status, r.body)
	}
	return eb.Error
}

// TestAPIRequestIDs checks that every response carries a fresh request id
// minted by the daemon, and error bodies repeat it.
func TestAPIRequestIDs(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	idRE := regexp.MustCompile(`^req_[a-z2-7]{26}$`)
	probes := []httpProbe{
		{method: "GET", path: "/healthz"},
		{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(d.Token)},
		{method: "GET", path: "/v1/sandboxes"},
		{method: "GET", path: "/v1/sandboxes/" + ident.New("sbx_"), auth: bearerAuth(d.Token)},
		{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(d.Token), body: "{"},
		{method: "GET", path: "/v1/sandboxes?token=x", auth: bearerAuth(d.Token)},
	}
	var mu sync.Mutex
	seen := map[string]string{} // request id -> request
	t.Run("requests", func(t *testing.T) {
		for i := range 60 {
			p := probes[i%len(probes)]
			p.header = http.Header{"X-Request-Id": {"client-chosen"}}
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				r := sendProbe(t, d, p)
				id := r.header.Get("X-Request-Id")
				if !idRE.MatchString(id) {
					t.Errorf("%s %s: X-Request-Id = %q, want one the daemon minted (%s)", p.method, p.path, id, idRE)
				}
				if r.status >= 400 {
					if e := mustErrorBody(t, r); e.RequestID != id {
						t.Errorf("%s %s: body request_id %q, header %q, want equal", p.method, p.path, e.RequestID, id)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := seen[id]; dup {
					t.Errorf("request id %s given to both %s and %s %s", id, prev, p.method, p.path)
				}
				seen[id] = p.method + " " + p.path
			})
		}
	})
	if len(seen) != 60 {
		t.Errorf("distinct request ids = %d, want 60", len(seen))
	}
}

// TestAPIMetrics checks /metrics: Prometheus text with the request
// histogram, labelled by route pattern, never by the IDs in paths.
func TestAPIMetrics(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	fake := ident.New("sbx_")
	sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(d.Token)})
	sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes/" + fake, auth: bearerAuth(d.Token)})
	r := sendProbe(t, d, httpProbe{method: "GET", path: "/metrics", auth: bearerAuth(d.Token)})
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s, want 200 text/plain", r.status, r.header.Get("Content-Type"))
	}
	for _, want := range []string{
		"# TYPE berth_http_request_duration_seconds histogram",
		`berth_http_request_duration_seconds_count{code="2xx",route="GET /v1/sandboxes"} 1`,
		`berth_http_request_duration_seconds_count{code="4xx",route="GET /v1/sandboxes/{id}"} 1`,
		"berth_sandboxes_running 0",
		"go_goroutines",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	if strings.Contains(r.body, fake) {
		t.Errorf("GET /metrics contains the sandbox ID %s from a path", fake)
	}
}

// TestAPISystemRuntimes checks that /v1/system lists the process runtime
// as available here.
func TestAPISystemRuntimes(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	sys, err := d.Client.System(context.Background())
	if err != nil {
		t.Fatalf("System: %v", err)
	}
	var found bool
	for _, rt := range sys.Runtimes {
		if rt.Name == "process" {
			found = true
			if !rt.Available || rt.Reason != "" {
				t.Errorf("runtime process: available %v (%s), want available", rt.Available, rt.Reason)
			}
		}
	}
	if !found {
		t.Errorf("System().Runtimes = %+v, want process among them", sys.Runtimes)
	}
	if sys.Limits.MaxJSONBodyBytes != wire.MaxJSONBody {
		t.Errorf("System().Limits.MaxJSONBodyBytes = %d, want %d", sys.Limits.MaxJSONBodyBytes, wire.MaxJSONBody)
	}
}

// TestAPIUnroutedRequestsAnswerJSON checks that paths and methods outside
// the route table get the one error shape, not ServeMux's plain text.
func TestAPIUnroutedRequestsAnswerJSON(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	for _, tt := range []struct {
		method, path string
		status       int
		reason       string
	}{
		{"GET", "/v1/nope", 404, "route_not_found"},
		{"GET", "/nope", 404, "route_not_found"}, // "/" itself is the dashboard's sign-in page
		{"PATCH", "/v1/sandboxes", 405, "method_not_allowed"},
		{"PUT", "/healthz", 405, "method_not_allowed"},
	} {
		req, _ := http.NewRequest(tt.method, d.URL+tt.path, nil)
		req.Header.Set("Authorization", "Bearer "+d.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body apitype.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tt.status || body.Error.Reason != tt.reason || body.Error.RequestID == "" {
			t.Errorf("%s %s = %d %+v (decode err %v), want %d %s in the JSON error shape",
				tt.method, tt.path, resp.StatusCode, body.Error, err, tt.status, tt.reason)
		}
		if tt.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: no Allow header", tt.method, tt.path)
		}
	}
}
