package main_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// TestTenants runs the commands for tenants through the real
// binary: an admin creates a tenant and its key; the key's sandboxes are
// the tenant's alone; another tenant's key is told they do not exist; the
// operator sets quotas and reads use against them.
func TestTenants(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	admin := newCLI(t, d)

	id := strings.TrimSpace(admin.ok("tenant", "create", "acme").stdout)
	if !strings.HasPrefix(id, "ten_") {
		t.Fatalf("tenant create printed %q, want a ten_ ID", id)
	}
	admin.fails(1, "name_taken", "tenant", "create", "acme")
	admin.fails(2, "", "tenant", "create")
	admin.ok("tenant", "create", "globex")
	k := strings.TrimSpace(admin.ok("keys", "create", "--tenant", "acme", "--scope", "execution", "--name", "ci").stdout)
	if !strings.HasPrefix(k, "bk_") {
		t.Fatalf("keys create printed %q, want one secret", k)
	}
	other := strings.TrimSpace(admin.ok("keys", "create", "other", "--tenant", "globex").stdout)
	admin.fails(1, "tenant_not_found", "keys", "create", "x", "--tenant", "nobody")
	admin.fails(1, "tenant", "keys", "create", "x", "--tenant", "acme", "--scope", "admin")
	if ls := admin.ok("keys", "ls").stdout; !regexp.MustCompile(`ci\s+execution\s+` + id).MatchString(ls) {
		t.Errorf("keys ls = %q, want ci execution %s", ls, id)
	}

	acme := admin.with("BERTH_TOKEN=" + k)
	sb := strings.TrimSpace(acme.ok("sandbox", "create", "--name", "chat-42", "--lazy").stdout)
	if !strings.HasPrefix(sb, "sbx_") {
		t.Fatalf("sandbox create printed %q", sb)
	}
	globex := admin.with("BERTH_TOKEN=" + other)
	globex.ok("sandbox", "create", "--name", "chat-42", "--lazy") // names are per tenant
	if ls := acme.ok("sandbox", "ls").stdout; !strings.Contains(ls, sb) || strings.Count(ls, "chat-42") != 1 {
		t.Errorf("acme's sandbox ls = %q, want only its chat-42 %s", ls, sb)
	}
	// Another tenant's key: the same answer as a sandbox that never existed.
	r1 := globex.fails(1, "sandbox_not_found", "sandbox", "get", sb)
	r2 := globex.fails(1, "sandbox_not_found", "sandbox", "get", "sbx_"+strings.Repeat("a", 26))
	if strings.ReplaceAll(r1.stderr, sb, "ID") != strings.ReplaceAll(r2.stderr, "sbx_"+strings.Repeat("a", 26), "ID") {
		t.Errorf("another tenant's sandbox and a missing one read differently:\n%s\n%s", r1.stderr, r2.stderr)
	}
	acme.ok("sandbox", "get", sb) // the positive control
	acme.fails(1, "scope_insufficient", "tenant", "ls")

	admin.ok("tenant", "set", "acme", "--max-sandboxes", "1", "--max-memory-mb", "65536", "--max-browser-sessions", "8", "--jobs", "4")
	admin.fails(2, "give at least one limit", "tenant", "set", "acme")
	acme.fails(1, "quota_exceeded", "sandbox", "create", "--lazy")
	get := acme.ok("tenant", "get", "acme").stdout
	for _, want := range []string{"sandboxes", "1 / 1", "memory MiB", "0 / 65536", "browser sessions", "0 / 8", "running jobs", "0 / 4"} {
		if !strings.Contains(get, want) {
			t.Errorf("tenant get = %q, want %q in it", get, want)
		}
	}
	var ten apitype.Tenant
	if err := json.Unmarshal([]byte(admin.ok("tenant", "get", "acme", "--json").stdout), &ten); err != nil ||
		ten.Limits.MaxSandboxes != 1 || ten.Usage == nil || ten.Usage.Sandboxes != 1 {
		t.Errorf("tenant get --json = %+v (%v), want 1 of 1 sandboxes", ten, err)
	}
	if ls := admin.ok("tenant", "ls").stdout; !strings.Contains(ls, "sandboxes=1") || !strings.Contains(ls, "globex") {
		t.Errorf("tenant ls = %q", ls)
	}
	admin.fails(1, "tenant_not_empty", "tenant", "rm", "acme")

	// The audit log: acme's key sees acme's calls.
	testenv.Eventually(t, 5e9, "acme's create in its audit log", func() bool {
		return strings.Contains(acme.ok("audit").stdout, "POST /v1/sandboxes")
	})
	if out := acme.ok("audit", "--json").stdout; strings.Contains(out, k) || strings.Contains(out, other) {
		t.Errorf("the audit log holds a key: %s", out)
	}
}
