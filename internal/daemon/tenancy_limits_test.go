package daemon_test

// Tenants' limits against the real daemon: rate limits per key and on
// creates, failed-authentication throttling per source (and behind a
// trusted proxy), tenant mode's refusals, a data directory bound to one
// tenant, idempotency keys on creates and the audit log.
//
// The buckets of these tests refill slowly (a token every 20 to 100
// seconds), so what a test sees depends on how many requests it sent, not
// on how quickly it sent them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/ratelimit"
	"github.com/berthdev/berth/internal/testenv"
)

// sourceClient is an HTTP client whose connections come from ip. On Linux
// all of 127.0.0.0/8 is local, so one test can be several sources.
func sourceClient(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// wantStatus fails t unless r has status.
func (r httpReply) wantStatus(t *testing.T, what string, status int) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s = %d %s, want %d", what, r.status, r.body, status)
	}
}

// wantRetryAfter fails t unless r's Retry-After is whole seconds from 1 to
// most.
func (r httpReply) wantRetryAfter(t *testing.T, what string, most int) {
	t.Helper()
	v := r.header.Get("Retry-After")
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > most {
		t.Errorf("%s: Retry-After = %q, want whole seconds from 1 to %d", what, v, most)
	}
}

// forwardedFor is an X-Forwarded-For header of addrs; none for "".
func forwardedFor(addrs string) http.Header {
	if addrs == "" {
		return nil
	}
	return http.Header{"X-Forwarded-For": {addrs}}
}

// unknownKey is a well-formed key that no daemon knows.
func unknownKey() string { return bearerAuth(ident.Token(auth.KeyPrefix)) }

// sandboxIDs lists the IDs of the sandboxes c sees, sorted.
func sandboxIDs(t *testing.T, c *client.Client) []string {
	t.Helper()
	list, err := c.ListSandboxes(context.Background())
	if err != nil {
		t.Fatalf("ListSandboxes: %v", err)
	}
	ids := []string{}
	for _, sb := range list {
		ids = append(ids, sb.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestRateLimitPerKey: past its bucket a key gets 429 rate_limited with a
// Retry-After, while another key of the same tenant goes on (the bucket is
// the key's); creates have a stricter bucket of their own.
func TestRateLimitPerKey(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	ctx := context.Background()
	list := func(d *testenv.Daemon, k apitype.Key) httpReply {
		return sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(k.Secret)})
	}
	// A body the limiters let through fails validation after them, so no
	// create makes anything.
	create := func(d *testenv.Daemon, secret string) httpReply {
		return sendProbe(t, d, httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(secret), body: `{"name":"not valid!"}`})
	}

	t.Run("requests", func(t *testing.T) {
		t.Parallel()
		// Every authenticated request takes a token from its key's
		// bucket, the admin key's too: it makes a tenant and two keys,
		// lists once, and lists again at cleanup, 5 of its 8.
		d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
			cfg.RateLimits = &httpapi.RateLimits{PerKey: ratelimit.Rate{PerSecond: 0.05, Burst: 8}}
		})
		if _, err := d.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		var keys []apitype.Key
		for _, name := range []string{"a", "b"} {
			k, err := d.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: name, Scope: auth.ScopeExecution, Tenant: "acme"})
			if err != nil {
				t.Fatalf("CreateKey(%s): %v", name, err)
			}
			keys = append(keys, k)
		}
		a, b := keys[0], keys[1]
		for i := range 8 {
			list(d, a).wantStatus(t, fmt.Sprintf("key a's GET %d", i+1), http.StatusOK)
		}
		r := list(d, a)
		r.wantError(t, "key a's GET 9", http.StatusTooManyRequests, errcode.ResourceExhausted, "rate_limited")
		r.wantRetryAfter(t, "key a's GET 9", 20)
		list(d, b).wantStatus(t, "key b's GET after key a's 429", http.StatusOK)
		if ids := sandboxIDs(t, d.Client); len(ids) != 0 {
			t.Errorf("sandboxes = %v, want none", ids)
		}
	})

	t.Run("creates", func(t *testing.T) {
		t.Parallel()
		// Creating a key is a create too: the admin key spends 1 of its
		// 2 on key c.
		d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
			cfg.RateLimits = &httpapi.RateLimits{CreatesKey: ratelimit.Rate{PerSecond: 0.01, Burst: 2}}
		})
		c := createAPIKey(t, d, "c", auth.ScopeExecution)
		for i := range 2 {
			create(d, c.Secret).wantError(t, fmt.Sprintf("key c's create %d", i+1), http.StatusBadRequest, errcode.Invalid, "")
		}
		r := create(d, c.Secret)
		e := r.wantError(t, "key c's create 3", http.StatusTooManyRequests, errcode.ResourceExhausted, "rate_limited")
		r.wantRetryAfter(t, "key c's create 3", 100)
		if !strings.Contains(e.Message, "creates") {
			t.Errorf("key c's create 3: message %q, want it to name the limit on creates", e.Message)
		}
		list(d, c).wantStatus(t, "key c's GET after its creates' 429", http.StatusOK)
		create(d, d.Token).wantError(t, "the admin key's create", http.StatusBadRequest, errcode.Invalid, "")
		if ids := sandboxIDs(t, d.Client); len(ids) != 0 {
			t.Errorf("sandboxes = %v, want none", ids)
		}
	})
}

// TestRateLimitAuthFailuresBySource: a source that sent too many bad keys
// gets 429 auth_throttled for every bad key from then on (a guesser learns
// nothing from its guesses while throttled), while a valid key from it
// still works, and other sources are unaffected (docs/api.md, Rate
// limits).
func TestRateLimitAuthFailuresBySource(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
		cfg.RateLimits = &httpapi.RateLimits{AuthFailures: ratelimit.Rate{PerSecond: 0.01, Burst: 5}}
	})
	// This test gets 127.0.0.1 throttled; the cleanup lists and deletes
	// through d.Client, which goes from 127.0.0.2 instead.
	from2 := sourceClient(t, "127.0.0.2")
	d.Client = client.New(d.URL, d.Token, client.WithHTTPClient(from2))

	list := func(authz string) httpProbe {
		return httpProbe{method: "GET", path: "/v1/sandboxes", auth: authz}
	}
	sendProbe(t, d, list(bearerAuth(d.Token))).wantStatus(t, "admin key from 127.0.0.1 before", http.StatusOK)
	bad := []string{unknownKey(), "Bearer x", bearerAuth(d.Token + "a"), unknownKey(), "Basic eDp5"}
	for i, authz := range bad {
		r := sendProbe(t, d, list(authz))
		r.wantError(t, fmt.Sprintf("bad key %d from 127.0.0.1", i+1), http.StatusUnauthorized, errcode.Unauthenticated, "")
	}
	r := sendProbe(t, d, list(unknownKey()))
	r.wantError(t, "bad key 6 from 127.0.0.1", http.StatusTooManyRequests, errcode.ResourceExhausted, "auth_throttled")
	r.wantRetryAfter(t, "bad key 6 from 127.0.0.1", 100)
	r = sendProbe(t, d, list("Bearer x"))
	r.wantError(t, "a malformed key from throttled 127.0.0.1", http.StatusTooManyRequests, errcode.ResourceExhausted, "auth_throttled")
	// The key's owner goes on from the same address.
	sendProbe(t, d, list(bearerAuth(d.Token))).wantStatus(t, "admin key from throttled 127.0.0.1", http.StatusOK)

	sendProbeFrom(t, from2, d, list(bearerAuth(d.Token))).wantStatus(t, "admin key from 127.0.0.2", http.StatusOK)
	r = sendProbeFrom(t, sourceClient(t, "127.0.0.3"), d, list(unknownKey()))
	r.wantError(t, "bad key from 127.0.0.3", http.StatusUnauthorized, errcode.Unauthenticated, "")
}

// TestRateLimitTrustedProxy: behind a trusted proxy the source is the
// nearest untrusted address in X-Forwarded-For; from any other peer the
// header is ignored, so a fresh forged one per request escapes nothing.
func TestRateLimitTrustedProxy(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	failures := ratelimit.Rate{PerSecond: 0.01, Burst: 3}
	list := func(authz, xff string) httpProbe {
		return httpProbe{method: "GET", path: "/v1/sandboxes", auth: authz, header: forwardedFor(xff)}
	}

	t.Run("trusted", func(t *testing.T) {
		t.Parallel()
		trusted, err := ratelimit.ParseTrusted([]string{"127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
			cfg.RateLimits = &httpapi.RateLimits{AuthFailures: failures, TrustedProxies: trusted}
		})
		for i := range 3 {
			r := sendProbe(t, d, list(unknownKey(), "203.0.113.7"))
			r.wantError(t, fmt.Sprintf("bad key %d for 203.0.113.7", i+1), http.StatusUnauthorized, errcode.Unauthenticated, "")
		}
		for _, c := range []struct{ what, authz, xff string }{
			{"bad key 4 for 203.0.113.7", unknownKey(), "203.0.113.7"},
			// The client's own X-Forwarded-For, which the proxy appends
			// to: the address the proxy saw is still the last one.
			{"bad key for 203.0.113.7 claiming 203.0.113.8", unknownKey(), "203.0.113.8, 203.0.113.7"},
		} {
			sendProbe(t, d, list(c.authz, c.xff)).wantError(t, c.what, http.StatusTooManyRequests, errcode.ResourceExhausted, "auth_throttled")
		}
		sendProbe(t, d, list(bearerAuth(d.Token), "203.0.113.8")).wantStatus(t, "admin key for 203.0.113.8", http.StatusOK)
		sendProbe(t, d, list(bearerAuth(d.Token), "")).wantStatus(t, "admin key from the proxy itself", http.StatusOK)
		sendProbe(t, d, list(unknownKey(), "203.0.113.8")).wantError(t, "bad key for 203.0.113.8",
			http.StatusUnauthorized, errcode.Unauthenticated, "")
	})

	t.Run("untrusted", func(t *testing.T) {
		t.Parallel()
		d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
			cfg.RateLimits = &httpapi.RateLimits{AuthFailures: failures}
		})
		// 127.0.0.4 gets throttled; 127.0.0.1 (the cleanup's) does not.
		from4 := sourceClient(t, "127.0.0.4")
		for i := range 3 {
			r := sendProbeFrom(t, from4, d, list(unknownKey(), fmt.Sprintf("198.51.100.%d", i+1)))
			r.wantError(t, fmt.Sprintf("bad key %d from 127.0.0.4", i+1), http.StatusUnauthorized, errcode.Unauthenticated, "")
		}
		r := sendProbeFrom(t, from4, d, list(unknownKey(), "198.51.100.10"))
		r.wantError(t, "bad key 4 from 127.0.0.4, a fresh X-Forwarded-For", http.StatusTooManyRequests, errcode.ResourceExhausted, "auth_throttled")
		r = sendProbeFrom(t, from4, d, list(unknownKey(), "198.51.100.11"))
		r.wantError(t, "bad key 5 from 127.0.0.4, a fresh X-Forwarded-For", http.StatusTooManyRequests, errcode.ResourceExhausted, "auth_throttled")
		sendProbe(t, d, list(bearerAuth(d.Token), "")).wantStatus(t, "admin key from 127.0.0.1", http.StatusOK)
	})
}

// daemonConfig is testenv.StartDaemon's configuration, on dataDir with
// default runtime rt.
func daemonConfig(t *testing.T, dataDir, rt string) daemon.Config {
	return daemon.Config{
		DataDir: dataDir, Listen: "127.0.0.1:0", Version: "test",
		AgentBinary: testenv.Binary(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DefaultRuntime: rt, UIDRegistry: testenv.UIDRegistry(t),
		JobPools: map[string]int{"browser": 0, "office": 0}, RateLimits: &httpapi.RateLimits{},
	}
}

// startOrRefuse runs the daemon with cfg in this process until it serves
// or fails to start, and returns it, or Run's error. stop ends it and
// returns what Run returned; the cleanup stops it too.
func startOrRefuse(t *testing.T, cfg daemon.Config) (d *testenv.Daemon, stop func() error, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	cfg.Ready = func(addr string) { ready <- addr }
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		return nil, nil, err
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("the daemon neither served nor failed within 60s")
	}
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("the daemon did not stop within 30s")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	key, err := os.ReadFile(filepath.Join(cfg.DataDir, daemon.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	d = &testenv.Daemon{URL: "http://" + addr, Token: strings.TrimSpace(string(key)), DataDir: cfg.DataDir}
	d.Client = client.New(d.URL, d.Token)
	return d, stop, nil
}

// isolatedOrSkip returns the isolated runtime to test on: the suite's, or
// container when the suite runs on process.
func isolatedOrSkip(t *testing.T) string {
	t.Helper()
	rt := testenv.Runtime()
	if rt == "process" {
		rt = "container"
	}
	testenv.NeedRuntime(t, rt)
	return rt
}

// TestTenantModeRefusals: tenant mode refuses what is not isolated: a
// daemon whose default runtime is process does not start, and a daemon on
// an isolated runtime refuses process sandboxes and host browser sessions,
// to admin and tenant keys alike, creating nothing.
func TestTenantModeRefusals(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()

	t.Run("process default runtime", func(t *testing.T) {
		t.Parallel()
		testenv.NeedLinux(t)
		data := filepath.Join(testenv.ShortTempDir(t), "d")
		t.Cleanup(func() { testenv.CheckNoProcesses(t, data) })
		cfg := daemonConfig(t, data, "process")
		cfg.TenantMode = true
		if _, _, err := startOrRefuse(t, cfg); errcode.ReasonOf(err) != "tenant_mode" {
			t.Errorf("tenant mode on the process runtime: Run = %v, want a refusal to start (tenant_mode)", err)
		}
		// Control: the same daemon without tenant mode serves.
		_, stop, err := startOrRefuse(t, daemonConfig(t, data, "process"))
		if err != nil {
			t.Fatalf("the process runtime without tenant mode: %v", err)
		}
		if err := stop(); err != nil {
			t.Errorf("daemon.Run: %v", err)
		}
	})

	t.Run("isolated runtime", func(t *testing.T) {
		t.Parallel()
		rt := isolatedOrSkip(t)
		d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
			cfg.TenantMode = true
			cfg.DefaultRuntime = rt
		})
		_, k := tenantKey(t, d, "acme", auth.ScopeExecution)
		for _, who := range []struct{ name, secret string }{{"admin key", d.Token}, {"tenant key", k.Secret}} {
			r := sendProbe(t, d, httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(who.secret),
				body: `{"runtime":"process","name":"on-the-host"}`})
			r.wantError(t, "process sandbox in tenant mode ("+who.name+")", http.StatusForbidden, errcode.PermissionDenied, "tenant_mode")
			r = sendProbe(t, d, httpProbe{method: "POST", path: "/v1/browser/sessions", auth: bearerAuth(who.secret), body: "{}"})
			r.wantError(t, "browser session in tenant mode ("+who.name+")", http.StatusForbidden, errcode.PermissionDenied, "tenant_mode")
		}
		if ids := sandboxIDs(t, d.Client); len(ids) != 0 {
			t.Fatalf("sandboxes after the refusals = %v, want none", ids)
		}
		// Control: the isolated runtime is served, and runs commands.
		c := client.New(d.URL, k.Secret)
		ctx := context.Background()
		sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt})
		if err != nil {
			t.Fatalf("creating a %s sandbox in tenant mode: %v", rt, err)
		}
		if sb.Runtime != rt {
			t.Errorf("sandbox runtime = %q, want %q", sb.Runtime, rt)
		}
		cmd, err := c.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo isolated"})
		if err != nil || !strings.Contains(cmd.Stdout, "isolated") {
			t.Errorf("echo in the %s sandbox = %+v, %v", rt, cmd, err)
		}
		if ids := sandboxIDs(t, d.Client); !slices.Equal(ids, []string{sb.ID}) {
			t.Errorf("sandboxes = %v, want [%s]", ids, sb.ID)
		}
	})

	// A process sandbox made before tenant mode was turned on is a
	// sandbox on the process runtime too: the daemon either refuses to
	// start in tenant mode (tenant_mode) or refuses to run anything in it.
	t.Run("process sandbox from before", func(t *testing.T) {
		t.Parallel()
		rt := isolatedOrSkip(t)
		data := filepath.Join(testenv.ShortTempDir(t), "d")
		t.Cleanup(func() { testenv.CheckNoProcesses(t, data) })
		ctx := context.Background()
		plain, stop, err := startOrRefuse(t, daemonConfig(t, data, "process"))
		if err != nil {
			t.Fatal(err)
		}
		_, k := tenantKey(t, plain, "acme", auth.ScopeExecution)
		sb, err := client.New(plain.URL, k.Secret).CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"})
		if err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		cfg := daemonConfig(t, data, rt)
		cfg.TenantMode = true
		tm, stop, err := startOrRefuse(t, cfg)
		if err != nil {
			if errcode.ReasonOf(err) != "tenant_mode" {
				t.Errorf("tenant mode with a process sandbox: Run = %v, want it served or refused with tenant_mode", err)
			}
		} else {
			marker := filepath.Join(testenv.ShortTempDir(t), "ran-on-the-host")
			r := sendProbe(t, tm, httpProbe{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/commands?wait_ms=10000",
				auth: bearerAuth(k.Secret), body: `{"command":"touch ` + marker + `; echo ran"}`})
			r.wantError(t, "a command in a process sandbox in tenant mode", http.StatusForbidden, errcode.PermissionDenied, "tenant_mode")
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("in tenant mode a tenant's command ran on the host: it made %s", marker)
			}
			if err := stop(); err != nil {
				t.Errorf("daemon.Run: %v", err)
			}
		}

		// Without tenant mode the sandbox is deleted (nothing is left).
		plain, _, err = startOrRefuse(t, daemonConfig(t, data, "process"))
		if err != nil {
			t.Fatal(err)
		}
		if err := plain.Client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Error(err)
		}
	})
}

// TestTenantDataDirBinding: serve --tenant NAME binds the data directory
// to tenant NAME: it is made on the first start, admin keys create in it,
// no other tenant can be made or given keys, and the directory refuses to
// start for another tenant or for none.
func TestTenantDataDirBinding(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	data := filepath.Join(testenv.ShortTempDir(t), "d")
	t.Cleanup(func() { testenv.CheckNoProcesses(t, data) }) // runs after the daemons' cleanups
	ctx := context.Background()
	d := testenv.StartDaemonProcess(t, data, "--tenant", "acme")

	boundTo := func() string {
		b, err := os.ReadFile(filepath.Join(data, daemon.TenantFile))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := boundTo(); got != "acme" {
		t.Errorf("%s = %q, want acme", daemon.TenantFile, got)
	}
	acme, err := d.Client.GetTenant(ctx, "acme")
	if err != nil {
		t.Fatalf("GetTenant(acme): %v", err)
	}
	k, err := d.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: "acme-exec", Scope: auth.ScopeExecution, Tenant: "acme"})
	if err != nil {
		t.Fatalf("CreateKey in acme: %v", err)
	}
	// The admin key's sandbox is acme's: acme's key sees it.
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if ids := sandboxIDs(t, client.New(d.URL, k.Secret)); !slices.Equal(ids, []string{sb.ID}) {
		t.Errorf("acme's key lists %v, want the admin key's sandbox %s", ids, sb.ID)
	}
	if got, err := d.Client.GetTenant(ctx, "acme"); err != nil || got.Usage == nil || got.Usage.Sandboxes != 1 {
		t.Errorf("acme's usage = %+v, %v; want 1 sandbox", got.Usage, err)
	}

	r := sendProbe(t, d, httpProbe{method: "POST", path: "/v1/tenants", auth: bearerAuth(d.Token), body: `{"name":"other"}`})
	r.wantError(t, "creating tenant other", http.StatusConflict, errcode.Conflict, "tenant_bound")
	r = sendProbe(t, d, httpProbe{method: "POST", path: "/v1/keys", auth: bearerAuth(d.Token), body: `{"name":"x","tenant":"default"}`})
	r.wantError(t, "a key of tenant default", http.StatusConflict, errcode.Conflict, "tenant_bound")
	tenants, err := d.Client.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ten := range tenants {
		if ten.Name == "other" {
			t.Errorf("tenant other exists after its refusal: %+v", ten)
		}
	}
	if err := d.Stop(t); err != nil {
		t.Fatalf("stopping the daemon: %v", err)
	}

	for _, args := range [][]string{{"--tenant", "other"}, nil} {
		out := serveRefused(t, data, args...)
		if !strings.Contains(out, "tenant_bound") || !strings.Contains(out, `"acme"`) {
			t.Errorf("berth serve %v on a directory bound to acme said:\n%s\nwant tenant_bound naming acme", args, out)
		}
	}
	if got := boundTo(); got != "acme" {
		t.Errorf("%s after the refusals = %q, want acme", daemon.TenantFile, got)
	}

	// Control: the bound tenant starts again, with what it had.
	d = testenv.StartDaemonProcess(t, data, "--tenant", "acme")
	if again, err := d.Client.GetTenant(ctx, "acme"); err != nil || again.ID != acme.ID {
		t.Errorf("acme after the restart = %+v, %v; want ID %s", again, err, acme.ID)
	}
	if ids := sandboxIDs(t, client.New(d.URL, k.Secret)); !slices.Equal(ids, []string{sb.ID}) {
		t.Errorf("acme's key lists %v after the restart, want [%s]", ids, sb.ID)
	}
	if err := d.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// TestIdempotencyKeys: a create with an Idempotency-Key runs once per
// tenant and key; a retry gets the first answer, marked replayed; the key
// with another body is refused; other tenants' keys are their own.
func TestIdempotencyKeys(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx := context.Background()
	_, ka := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, kb := tenantKey(t, d, "beta", auth.ScopeExecution)
	a, b := client.New(d.URL, ka.Secret), client.New(d.URL, kb.Secret)

	k1 := client.WithIdempotencyKey(ctx, "k1")
	req := apitype.CreateSandboxRequest{Lazy: true, Labels: map[string]string{"try": "1"}}
	first, err := a.CreateSandbox(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.CreateSandbox(k1, req)
	if err != nil || again.ID != first.ID {
		t.Fatalf("the retry = %s, %v; want the first sandbox %s", again.ID, err, first.ID)
	}
	_, err = a.CreateSandbox(k1, apitype.CreateSandboxRequest{Lazy: true, Labels: map[string]string{"try": "2"}})
	if errcode.ReasonOf(err) != "idempotency_key_reused" {
		t.Errorf("k1 with another body: %v, want idempotency_key_reused", err)
	}
	if ids := sandboxIDs(t, a); !slices.Equal(ids, []string{first.ID}) {
		t.Fatalf("acme's sandboxes = %v, want [%s]", ids, first.ID)
	}

	// The same by hand, to see the headers.
	p := httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(ka.Secret),
		body: `{"lazy":true,"labels":{"try":"raw"}}`, header: http.Header{"Idempotency-Key": {"k2"}}}
	r1 := sendProbe(t, d, p)
	r1.wantStatus(t, "k2's first create", http.StatusCreated)
	if v := r1.header.Get("Idempotent-Replayed"); v != "" {
		t.Errorf("k2's first create: Idempotent-Replayed = %q, want none", v)
	}
	r2 := sendProbe(t, d, p)
	if r2.status != r1.status || r2.body != r1.body || r2.header.Get("Location") != r1.header.Get("Location") {
		t.Errorf("k2's retry = %d %s (Location %q), want the first answer %d %s (Location %q)",
			r2.status, r2.body, r2.header.Get("Location"), r1.status, r1.body, r1.header.Get("Location"))
	}
	if v := r2.header.Get("Idempotent-Replayed"); v != "true" {
		t.Errorf("k2's retry: Idempotent-Replayed = %q, want true", v)
	}
	var raw apitype.Sandbox
	if err := json.Unmarshal([]byte(r1.body), &raw); err != nil || raw.ID == "" {
		t.Fatalf("k2's create answered %s: %v", r1.body, err)
	}
	p.body = `{"lazy":true,"labels":{"try":"other"}}`
	sendProbe(t, d, p).wantError(t, "k2 with another body", http.StatusUnprocessableEntity, errcode.Unprocessable, "idempotency_key_reused")

	// Another tenant's k1, and the operator's, are their own.
	other, err := b.CreateSandbox(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	admins, err := d.Client.CreateSandbox(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == first.ID || admins.ID == first.ID || admins.ID == other.ID {
		t.Errorf("k1 made %s for acme, %s for beta, %s for the admin key; want three sandboxes", first.ID, other.ID, admins.ID)
	}
	if ids := sandboxIDs(t, b); !slices.Equal(ids, []string{other.ID}) {
		t.Errorf("beta's sandboxes = %v, want [%s]", ids, other.ID)
	}

	// A key is 1-255 characters.
	p.header = http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}
	p.body = `{"lazy":true,"labels":{"try":"long"}}`
	e := sendProbe(t, d, p).wantError(t, "a 256-character key", http.StatusBadRequest, errcode.Invalid, "")
	if _, ok := e.Problems["Idempotency-Key"]; !ok {
		t.Errorf("a 256-character key: problems %v, want Idempotency-Key", e.Problems)
	}
	p.header = http.Header{"Idempotency-Key": {strings.Repeat("k", 255)}}
	r := sendProbe(t, d, p)
	r.wantStatus(t, "a 255-character key", http.StatusCreated)
	var long apitype.Sandbox
	_ = json.Unmarshal([]byte(r.body), &long)
	want := []string{first.ID, raw.ID, long.ID}
	slices.Sort(want)
	if ids := sandboxIDs(t, a); !slices.Equal(ids, want) {
		t.Errorf("acme's sandboxes = %v, want %v", ids, want)
	}

	// Keys: the retry answers the same secret and makes no second key.
	before, err := d.Client.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kk := client.WithIdempotencyKey(ctx, "key-1")
	kreq := apitype.CreateKeyRequest{Name: "idem", Scope: auth.ScopeExecution, Tenant: "acme"}
	key1, err := d.Client.CreateKey(kk, kreq)
	if err != nil {
		t.Fatal(err)
	}
	key2, err := d.Client.CreateKey(kk, kreq)
	if err != nil || key2.ID != key1.ID || key2.Secret != key1.Secret || key1.Secret == "" {
		t.Errorf("the key's retry = %s %q, %v; want %s with the same secret", key2.ID, key2.Secret, err, key1.ID)
	}
	after, err := d.Client.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+1 {
		t.Errorf("keys: %d before, %d after, want one more", len(before), len(after))
	}
	if ids := sandboxIDs(t, client.New(d.URL, key2.Secret)); !slices.Equal(ids, want) {
		t.Errorf("the replayed key lists %v, want acme's %v", ids, want)
	}

	// Concurrent first requests with one key: one runs; each other one
	// gets its answer or 409 idempotency_in_progress with Retry-After: 1.
	replies := make([]httpReply, 8)
	errs := make([]error, len(replies))
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() {
			req, err := http.NewRequest("POST", d.URL+"/v1/sandboxes", strings.NewReader(`{"lazy":true,"labels":{"try":"race"}}`))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Authorization", bearerAuth(kb.Secret))
			req.Header.Set("Idempotency-Key", "k3")
			resp, err := probeClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			replies[i], errs[i] = httpReply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
		})
	}
	wg.Wait()
	var made string
	for i, r := range replies {
		what := fmt.Sprintf("concurrent create %d with k3", i)
		switch {
		case errs[i] != nil:
			t.Errorf("%s: %v", what, errs[i])
		case r.status == http.StatusConflict:
			r.wantError(t, what, http.StatusConflict, errcode.Conflict, "idempotency_in_progress")
			if v := r.header.Get("Retry-After"); v != "1" {
				t.Errorf("%s: Retry-After = %q, want 1", what, v)
			}
		case r.status == http.StatusCreated:
			if made != "" && r.body != made {
				t.Errorf("%s = %s, want the first answer %s", what, r.body, made)
			}
			made = r.body
		default:
			t.Errorf("%s = %d %s, want 201 or 409", what, r.status, r.body)
		}
	}
	// The retry after them all gets the one answer.
	r = sendProbe(t, d, httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(kb.Secret),
		body: `{"lazy":true,"labels":{"try":"race"}}`, header: http.Header{"Idempotency-Key": {"k3"}}})
	if r.status != http.StatusCreated || (made != "" && r.body != made) || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("k3's retry = %d %s (replayed %q), want the first answer %s", r.status, r.body, r.header.Get("Idempotent-Replayed"), made)
	}
	var race apitype.Sandbox
	_ = json.Unmarshal([]byte(r.body), &race)
	wantB := []string{other.ID, race.ID}
	slices.Sort(wantB)
	if ids := sandboxIDs(t, b); !slices.Equal(ids, wantB) {
		t.Errorf("beta's sandboxes after the race = %v, want %v", ids, wantB)
	}
}

// auditCall is a call the audit log should hold.
type auditCall struct {
	route, resource string
	r               httpReply
}

// getAudit reads GET /v1/audit?query with secret.
func getAudit(t *testing.T, d *testenv.Daemon, secret string, query url.Values) (apitype.AuditLog, httpReply) {
	t.Helper()
	r := sendProbe(t, d, httpProbe{method: "GET", path: "/v1/audit?" + query.Encode(), auth: bearerAuth(secret)})
	var log apitype.AuditLog
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &log) != nil {
		t.Fatalf("GET /v1/audit?%s = %d %s", query.Encode(), r.status, r.body)
	}
	return log, r
}

// pollAudit reads the audit log until done holds: entries are written
// behind the requests.
func pollAudit(t *testing.T, d *testenv.Daemon, secret string, query url.Values, done func(apitype.AuditLog) bool) (apitype.AuditLog, httpReply) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		log, r := getAudit(t, d, secret, query)
		if done(log) {
			return log, r
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/audit?%s after 10s: %s", query.Encode(), r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func requestIDs(log apitype.AuditLog) []string {
	var ids []string
	for _, e := range log.Entries {
		ids = append(ids, e.RequestID)
	}
	return ids
}

func hasRequest(log apitype.AuditLog, id string) bool { return slices.Contains(requestIDs(log), id) }

// TestAuditLog: each mutating call is logged with who, what, which
// resource, how it ended and its request ID, never a body or a secret; a
// tenant's key reads its tenant's entries only, an admin key every
// tenant's or one's; pages are bound to the tenant that listed them.
func TestAuditLog(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ta, ka := tenantKey(t, d, "acme", auth.ScopeExecution)
	_, kb := tenantKey(t, d, "beta", auth.ScopeExecution)
	marker := "marker" + strings.TrimPrefix(ident.New("m_"), "m_")

	var calls []auditCall // acme's, in order
	call := func(route, resource string, p httpProbe) httpReply {
		t.Helper()
		r := sendProbe(t, d, p)
		calls = append(calls, auditCall{route, resource, r})
		return r
	}
	r := call("POST /v1/sandboxes", "", httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(ka.Secret),
		body: `{"env":{"MARKER":"` + marker + `"}}`})
	var sb apitype.Sandbox
	if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &sb) != nil {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	calls[0].resource = sb.ID
	r = call("POST /v1/sandboxes/{id}/commands", sb.ID, httpProbe{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/commands",
		auth: bearerAuth(ka.Secret), body: `{"command":"echo ` + marker + `"}`})
	if r.status >= 300 {
		t.Fatalf("exec = %d %s", r.status, r.body)
	}
	r = call("POST /v1/sandboxes", "", httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(ka.Secret),
		body: `{"name":"not valid!","env":{"MARKER":"` + marker + `"}}`})
	failed := r.wantError(t, "create with an invalid name", http.StatusBadRequest, errcode.Invalid, "")
	failedReason := failed.Reason
	if failedReason == "" {
		failedReason = failed.Code
	}
	r = call("DELETE /v1/sandboxes/{id}", sb.ID, httpProbe{method: "DELETE", path: "/v1/sandboxes/" + sb.ID, auth: bearerAuth(ka.Secret)})
	if r.status >= 300 {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	rb := sendProbe(t, d, httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(kb.Secret), body: `{"lazy":true}`})
	var bsb apitype.Sandbox
	if rb.status != http.StatusCreated || json.Unmarshal([]byte(rb.body), &bsb) != nil {
		t.Fatalf("beta's create = %d %s", rb.status, rb.body)
	}
	bID := rb.header.Get("X-Request-Id")

	// The admin key sees every tenant's; once beta's (the last call) is
	// in, every earlier one is (one writer, in order).
	all, rawAll := pollAudit(t, d, d.Token, nil, func(l apitype.AuditLog) bool { return hasRequest(l, bID) })
	for _, c := range calls {
		if !hasRequest(all, c.r.header.Get("X-Request-Id")) {
			t.Errorf("the admin key's audit log lacks %s (%s)", c.route, c.r.header.Get("X-Request-Id"))
		}
	}

	logA, rawA := getAudit(t, d, ka.Secret, nil)
	if len(logA.Entries) != len(calls) {
		t.Fatalf("acme's audit log = %s, want its %d calls", rawA.body, len(calls))
	}
	for i, e := range logA.Entries {
		c := calls[len(calls)-1-i] // newest first
		want := apitype.AuditEntry{ID: e.ID, Tenant: ta.ID, At: e.At, KeyID: ka.ID, KeyName: ka.Name,
			Method: strings.Fields(c.route)[0], Route: c.route, Resource: c.resource, Status: c.r.status,
			RequestID: c.r.header.Get("X-Request-Id")}
		if c.r.status >= 400 {
			want.Reason = failedReason
		}
		if e != want {
			t.Errorf("acme's entry %d = %+v\nwant %+v", i, e, want)
		}
		if i > 0 && e.At.After(logA.Entries[i-1].At) {
			t.Errorf("acme's entries are not newest first: %v after %v", e.At, logA.Entries[i-1].At)
		}
	}

	logB, rawB := getAudit(t, d, kb.Secret, nil)
	if ids := requestIDs(logB); !slices.Equal(ids, []string{bID}) {
		t.Errorf("beta's audit log = %s, want its one call %s", rawB.body, bID)
	} else if e := logB.Entries[0]; e.Route != "POST /v1/sandboxes" || e.Resource != bsb.ID || e.Status != http.StatusCreated {
		t.Errorf("beta's entry = %+v", e)
	}

	for _, sel := range []string{ta.ID, "acme"} {
		l, _ := getAudit(t, d, d.Token, url.Values{"tenant": {sel}})
		if !slices.Equal(requestIDs(l), requestIDs(logA)) {
			t.Errorf("the admin key's ?tenant=%s = %v, want acme's %v", sel, requestIDs(l), requestIDs(logA))
		}
	}
	ops, _ := getAudit(t, d, d.Token, url.Values{"tenant": {""}})
	if len(ops.Entries) < 4 { // two tenants and two keys
		t.Errorf("the operator's own entries = %+v, want the tenants' and keys' creation", ops.Entries)
	}
	for _, e := range ops.Entries {
		if e.Tenant != "" || e.KeyID == ka.ID || e.KeyID == kb.ID {
			t.Errorf("the admin key's ?tenant= lists %+v, want only admin keys' calls", e)
		}
	}
	// A create's resource is what it made: the tenant (the control), and
	// the key.
	for _, made := range []struct{ route, id string }{{"POST /v1/tenants", ta.ID}, {"POST /v1/keys", ka.ID}, {"POST /v1/keys", kb.ID}} {
		if !slices.ContainsFunc(ops.Entries, func(e apitype.AuditEntry) bool { return e.Route == made.route && e.Resource == made.id }) {
			var got []string
			for _, e := range ops.Entries {
				got = append(got, e.Route+" -> "+strconv.Quote(e.Resource))
			}
			t.Errorf("the operator's log has no %s entry naming what it made, %s; it has %v", made.route, made.id, got)
		}
	}

	for _, raw := range []httpReply{rawAll, rawA, rawB} {
		for what, secret := range map[string]string{"a body's content": marker, "acme's key": ka.Secret,
			"beta's key": kb.Secret, "the admin key": d.Token} {
			if strings.Contains(raw.body, secret) {
				t.Errorf("an audit log contains %s: %s", what, raw.body)
			}
		}
	}

	// Pages of one walk acme's log whole, without overlap.
	var walked []string
	var firstCursor string
	q := url.Values{"limit": {"1"}}
	for page := 0; ; page++ {
		if page > len(calls) {
			t.Fatalf("more than %d pages of one entry: %v", len(calls), walked)
		}
		l, raw := getAudit(t, d, ka.Secret, q)
		if len(l.Entries) != 1 {
			t.Fatalf("page %d = %s, want one entry", page, raw.body)
		}
		walked = append(walked, l.Entries[0].ID)
		if l.NextCursor == "" {
			break
		}
		if firstCursor == "" {
			firstCursor = l.NextCursor
		}
		q.Set("cursor", l.NextCursor)
	}
	var wantIDs []string
	for _, e := range logA.Entries {
		wantIDs = append(wantIDs, e.ID)
	}
	if !slices.Equal(walked, wantIDs) {
		t.Errorf("pages of one = %v, want %v", walked, wantIDs)
	}
	r = sendProbe(t, d, httpProbe{method: "GET", path: "/v1/audit?limit=1&cursor=" + url.QueryEscape(firstCursor), auth: bearerAuth(kb.Secret)})
	r.wantError(t, "acme's cursor with beta's key", http.StatusBadRequest, errcode.Invalid, "cursor_invalid")
}

// TestAuditLogRefusedCalls: a mutating call with a valid key that its
// scope refuses is an authenticated call, and is logged with how it ended.
func TestAuditLogRefusedCalls(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	_, reader := tenantKey(t, d, "acme", auth.ScopeRead)
	_, writer := tenantKey(t, d, "acme", auth.ScopeExecution)
	refused := sendProbe(t, d, httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(reader.Secret), body: `{"lazy":true}`})
	refused.wantError(t, "a read key's create", http.StatusForbidden, errcode.PermissionDenied, "scope_insufficient")
	// Control: a later call of the tenant, failed too, is logged; once it
	// is, every earlier entry is (one writer, in order).
	later := sendProbe(t, d, httpProbe{method: "POST", path: "/v1/sandboxes", auth: bearerAuth(writer.Secret), body: `{"name":"not valid!"}`})
	later.wantError(t, "an invalid create", http.StatusBadRequest, errcode.Invalid, "")
	log, raw := pollAudit(t, d, writer.Secret, nil, func(l apitype.AuditLog) bool { return hasRequest(l, later.header.Get("X-Request-Id")) })
	i := slices.Index(requestIDs(log), refused.header.Get("X-Request-Id"))
	if i < 0 {
		t.Fatalf("acme's audit log has no entry of the read key's refused create (%s): %s", refused.header.Get("X-Request-Id"), raw.body)
	}
	if e := log.Entries[i]; e.KeyID != reader.ID || e.Route != "POST /v1/sandboxes" || e.Status != http.StatusForbidden || e.Reason != "scope_insufficient" {
		t.Errorf("the refused create's entry = %+v, want the read key's, 403 scope_insufficient", e)
	}
}

// TestRateLimitPerTenant: a tenant's keys share the tenant's bucket, so
// more keys do not buy more requests; another tenant's key goes on.
func TestRateLimitPerTenant(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(cfg *daemon.Config) {
		cfg.RateLimits = &httpapi.RateLimits{PerTenant: ratelimit.Rate{PerSecond: 0.05, Burst: 6}}
	})
	var acme []apitype.Key
	for range 3 {
		_, k := tenantKey(t, d, "acme", auth.ScopeExecution)
		acme = append(acme, k)
	}
	_, other := tenantKey(t, d, "globex", auth.ScopeExecution)
	list := func(k apitype.Key) httpReply {
		return sendProbe(t, d, httpProbe{method: "GET", path: "/v1/sandboxes", auth: bearerAuth(k.Secret)})
	}
	for i := range 6 { // two from each of acme's keys
		list(acme[i%3]).wantStatus(t, fmt.Sprintf("acme's GET %d", i+1), http.StatusOK)
	}
	for _, k := range acme {
		r := list(k)
		r.wantError(t, "acme's key "+k.ID+" past the tenant's bucket", http.StatusTooManyRequests, errcode.ResourceExhausted, "rate_limited")
		if !strings.Contains(r.body, "tenant's rate limit") {
			t.Errorf("the refusal does not name the tenant's limit: %s", r.body)
		}
	}
	list(other).wantStatus(t, "another tenant's key", http.StatusOK)
}
