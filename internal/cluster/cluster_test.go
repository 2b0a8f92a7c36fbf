package cluster_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/store"
)

func TestAssertion(t *testing.T) {
	secret := []byte(cluster.NewSecret())
	cred := []byte(cluster.WorkerCredential(secret, "w1"))
	if len(cred) < cluster.MinSecretLen || string(cred) == cluster.WorkerCredential(secret, "w2") {
		t.Fatalf("credentials %q: too short, or the same for another worker", cred)
	}
	v := cluster.NewVerifier("w1", cred)
	caller := cluster.Caller{Principal: auth.Principal{KeyID: "key_1", Scope: auth.ScopeExecution, Tenant: "ten_a"}, TenantName: "a"}
	req := func(method, uri, header string) error {
		r := httptest.NewRequest(method, uri, nil)
		if header != "" {
			r.Header.Set(cluster.AssertionHeader, header)
		}
		got, err := v.Verify(r)
		if err == nil && got != caller {
			t.Errorf("Verify = %+v, want %+v", got, caller)
		}
		return err
	}
	now := time.Now()
	// Positive control.
	good := cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes?limit=2", now)
	if err := req("GET", "/v1/sandboxes?limit=2", good); err != nil {
		t.Fatalf("a good assertion: %v", err)
	}
	other := []byte(cluster.WorkerCredential(secret, "w2"))
	tampered := cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes", now)
	f := strings.Split(tampered, ".")
	f[4] = strings.Repeat("A", len(f[4]))
	for name, tc := range map[string]struct{ method, uri, header string }{
		"replayed":             {"GET", "/v1/sandboxes?limit=2", good},
		"none":                 {"GET", "/v1/sandboxes", ""},
		"malformed":            {"GET", "/v1/sandboxes", "v1.w1.x"},
		"another worker's":     {"GET", "/v1/sandboxes", cluster.Assert(other, "w2", caller, "GET", "/v1/sandboxes", now)},
		"w2's key, w1's name":  {"GET", "/v1/sandboxes", cluster.Assert(other, "w1", caller, "GET", "/v1/sandboxes", now)},
		"expired":              {"GET", "/v1/sandboxes", cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes", now.Add(-cluster.AssertionTTL-time.Second))},
		"far future":           {"GET", "/v1/sandboxes", cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes", now.Add(time.Hour))},
		"another path":         {"GET", "/v1/sandboxes/sb_x", cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes", now)},
		"another method":       {"DELETE", "/v1/sandboxes", cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes", now)},
		"another query":        {"GET", "/v1/sandboxes?limit=3", cluster.Assert(cred, "w1", caller, "GET", "/v1/sandboxes?limit=2", now)},
		"a tampered principal": {"GET", "/v1/sandboxes", strings.Join(f, ".")},
	} {
		if err := req(tc.method, tc.uri, tc.header); errcode.ReasonOf(err) != "service_credential_invalid" {
			t.Errorf("%s: %v, want service_credential_invalid", name, err)
		}
	}
}

func TestParseWorker(t *testing.T) {
	w, err := cluster.ParseWorker("w-1=http://10.0.0.2:7081,tenant=acme")
	if err != nil || w.ID != "w-1" || w.URL.String() != "http://10.0.0.2:7081" || w.Tenant != "acme" {
		t.Fatalf("ParseWorker = %+v, %v", w, err)
	}
	for _, bad := range []string{"w1", "W1=http://a:1", "w1=ftp://a", "w1=http://", "w1=http://a:1/x", "w1=http://u:p@a:1",
		"w1=http://a:1?x=1", "w1=http://a:1,team=x", "w1=http://a:1,tenant=Bad Name", "=http://a:1"} {
		if _, err := cluster.ParseWorker(bad); errcode.ReasonOf(err) != "worker_config_invalid" {
			t.Errorf("ParseWorker(%q) = %v, want worker_config_invalid", bad, err)
		}
	}
}

// newHQ is an HQ of the workers specs (serve --worker's form) over a new
// SQLite store.
func newHQ(t *testing.T, specs ...string) (*cluster.HQ, *store.DB) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var workers []cluster.WorkerConfig
	for _, spec := range specs {
		w, err := cluster.ParseWorker(spec)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	hq, err := cluster.NewHQ(cluster.HQConfig{Secret: []byte(cluster.NewSecret()), Workers: workers, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hq.Close)
	return hq, db
}

// TestPlace places on leases and placements in a real (SQLite) store.
func TestPlace(t *testing.T) {
	ctx := context.Background()
	hq, db := newHQ(t, "w1=http://127.0.0.1:1", "w2=http://127.0.0.1:2,tenant=acme", "w3=http://127.0.0.1:3",
		"w4=http://127.0.0.1:4", "w5=http://127.0.0.1:5")
	now := time.Now()
	lease := func(id string, expires time.Time, tenant string, runtimes ...string) {
		if err := db.RenewLease(ctx, &cluster.Lease{ID: id, Incarnation: "inc_" + id, StartedAt: now, HeartbeatAt: now, ExpiresAt: expires,
			Capabilities: cluster.Capabilities{Runtimes: runtimes, Tenant: tenant, MaxSandboxes: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	lease("w1", now.Add(time.Minute), "", "container", "process")
	lease("w2", now.Add(time.Minute), "acme", "container")
	lease("w3", now.Add(-time.Second), "", "container") // offline
	lease("w4", now.Add(time.Minute), "", "container")
	lease("w5", now.Add(time.Minute), "other", "container") // HQ pins it to every tenant: a mismatch
	if err := hq.SetDraining(ctx, "w4", true); err != nil {
		t.Fatal(err)
	}
	place := func(tenant, runtime, station string) (string, error) {
		w, err := hq.Place(ctx, cluster.Want{Kind: cluster.KindSandbox, TenantName: tenant, Runtime: runtime, Station: station})
		return w.ID, err
	}
	if id, err := place("default", "", ""); id != "w1" || err != nil {
		t.Errorf("default tenant placed on %q, %v; want w1 (w2 is acme's, w3 offline, w4 draining, w5 mismatched)", id, err)
	}
	if id, err := place("acme", "", ""); id != "w2" || err != nil {
		t.Errorf("acme placed on %q, %v; want its dedicated w2", id, err)
	}
	if _, err := place("acme", "process", ""); errcode.ReasonOf(err) != "no_worker_available" {
		t.Errorf("acme with process = %v, want no_worker_available: acme's own w2 has no process runtime, and acme uses no shared worker", err)
	}
	if _, err := place("default", "gvisor", ""); errcode.ReasonOf(err) != "no_worker_available" || !strings.Contains(err.Error(), "w1 has no gvisor runtime") {
		t.Errorf("gvisor = %v, want no_worker_available naming why", err)
	}
	if _, err := place("default", "", "w2"); errcode.ReasonOf(err) != "no_worker_available" {
		t.Errorf("default pinned to acme's w2 = %v, want no_worker_available", err)
	}
	// w1 full: 2 of 2.
	for _, id := range []string{"sb_1", "sb_2"} {
		if err := hq.Record(ctx, &cluster.Placement{Kind: cluster.KindSandbox, ID: id, Worker: "w1", Tenant: "ten_default", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := place("default", "", ""); errcode.ReasonOf(err) != "no_worker_available" || !strings.Contains(err.Error(), "w1 is full") {
		t.Errorf("with w1 full = %v, want no_worker_available naming it", err)
	}
	// Owners: live, offline, lost.
	if _, ws, err := hq.Owner(ctx, cluster.KindSandbox, "sb_1"); err != nil || ws.ID != "w1" {
		t.Errorf("owner of sb_1 = %s, %v", ws.ID, err)
	}
	if err := hq.Record(ctx, &cluster.Placement{Kind: cluster.KindSandbox, ID: "sb_3", Worker: "w3", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := hq.Owner(ctx, cluster.KindSandbox, "sb_3"); errcode.ReasonOf(err) != "owner_unavailable" || !strings.Contains(err.Error(), "w3") {
		t.Errorf("owner of sb_3 on offline w3 = %v, want owner_unavailable naming w3", err)
	}
	if _, _, err := hq.Owner(ctx, cluster.KindSandbox, "sb_none"); errcode.ReasonOf(err) != "sandbox_not_found" {
		t.Errorf("owner of an unknown sandbox = %v", err)
	}
}

// TestPlaceTemplate: a sandbox from a template goes to a worker whose lease
// lists it (a tenant's own or a shared one), every time; when none lists
// it, to any worker, which answers for it.
func TestPlaceTemplate(t *testing.T) {
	ctx := context.Background()
	hq, db := newHQ(t, "wa=http://127.0.0.1:1", "wb=http://127.0.0.1:2")
	now := time.Now()
	for id, tpls := range map[string][]string{"wa": {cluster.TemplateKey("ten_acme", "tools"), "shared"}, "wb": nil} {
		if err := db.RenewLease(ctx, &cluster.Lease{ID: id, Incarnation: "inc_" + id, StartedAt: now, HeartbeatAt: now,
			ExpiresAt: now.Add(time.Minute), Capabilities: cluster.Capabilities{Runtimes: []string{"container"}, MaxSandboxes: 10, Templates: tpls}}); err != nil {
			t.Fatal(err)
		}
	}
	placed := func(tenantID, template string) map[string]int {
		on := map[string]int{}
		for range 20 {
			w, err := hq.Place(ctx, cluster.Want{Kind: cluster.KindSandbox, TenantName: "acme", TenantID: tenantID, Template: template})
			if err != nil {
				t.Fatal(err)
			}
			on[w.ID]++
		}
		return on
	}
	for _, tt := range []struct {
		tenant, template string
		onlyWA           bool
	}{
		{"ten_acme", "tools", true},   // acme's own, on wa
		{"ten_acme", "shared", true},  // a shared one, on wa
		{"ten_other", "tools", false}, // not this tenant's: no worker lists it for them
		{"ten_acme", "", false},       // no template: either
		{"ten_acme", "base", false},
		{"ten_acme", "missing", false}, // either, which answers template_not_found
	} {
		on := placed(tt.tenant, tt.template)
		if tt.onlyWA && on["wa"] != 20 {
			t.Errorf("%s's sandboxes from %q placed %v, want all on wa, which lists it", tt.tenant, tt.template, on)
		}
		if !tt.onlyWA && (on["wa"] == 0 || on["wb"] == 0) {
			t.Errorf("%s's sandboxes from %q placed %v, want both workers used", tt.tenant, tt.template, on)
		}
	}
}
