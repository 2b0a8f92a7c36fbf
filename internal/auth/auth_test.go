package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/store"
)

// newKeys returns Keys over a real store in t's temporary directory.
func newKeys(t *testing.T) *auth.Keys {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "berth.db"))
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return auth.NewKeys(db)
}

// testTenant is the tenant non-admin test keys belong to.
const testTenant = "ten_default"

func tenantFor(scope string) string {
	if scope == auth.ScopeAdmin {
		return ""
	}
	return testTenant
}

func create(t *testing.T, ks *auth.Keys, name, scope string) (*auth.Key, auth.Secret) {
	t.Helper()
	k, secret, err := ks.Create(context.Background(), name, scope, tenantFor(scope))
	if err != nil {
		t.Fatalf("Create(%q, %q): %v", name, scope, err)
	}
	return k, secret
}

var secretRE = regexp.MustCompile(`^bk_[a-z2-7]{52}$`)

func TestCreate(t *testing.T) {
	t.Parallel()
	ks := newKeys(t)
	seen := map[auth.Secret]bool{}
	for _, scope := range []string{auth.ScopeAdmin, auth.ScopeExecution, auth.ScopeRead} {
		k, secret := create(t, ks, "ci "+scope, scope)
		s := string(secret)
		if !secretRE.MatchString(s) {
			t.Errorf("Create(%s) secret = %q, want %s", scope, s, secretRE)
		}
		if seen[secret] {
			t.Errorf("Create(%s) returned a secret seen before", scope)
		}
		seen[secret] = true
		if !strings.HasPrefix(k.ID, "key_") || k.Scope != scope || k.Name != "ci "+scope || k.TenantID != tenantFor(scope) {
			t.Errorf("Create(%s) key = %+v, want key_ ID, scope %s, name %q", scope, k, scope, "ci "+scope)
		}
		if !strings.HasPrefix(s, k.Prefix) || len(k.Prefix) != len(auth.KeyPrefix)+6 {
			t.Errorf("Create(%s) prefix = %q, want the secret's first %d characters", scope, k.Prefix, len(auth.KeyPrefix)+6)
		}
		if k.Hash != auth.Hash(s) || strings.Contains(k.Hash, s[len(auth.KeyPrefix):]) {
			t.Errorf("Create(%s) hash = %q, want Hash(secret) = %q", scope, k.Hash, auth.Hash(s))
		}
	}

	tests := []struct {
		name, keyName, scope, tenant string
		wantField                    string
	}{
		{"unknown scope", "x", "root", testTenant, "scope"},
		{"empty scope", "x", "", testTenant, "scope"},
		{"empty name", "", auth.ScopeExecution, testTenant, "name"},
		{"long name", strings.Repeat("n", 101), auth.ScopeExecution, testTenant, "name"},
		{"execution key without a tenant", "x", auth.ScopeExecution, "", "tenant"},
		{"read key without a tenant", "x", auth.ScopeRead, "", "tenant"},
		{"admin key with a tenant", "x", auth.ScopeAdmin, testTenant, "tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, secret, err := ks.Create(context.Background(), tt.keyName, tt.scope, tt.tenant)
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.Invalid || e.Problems[tt.wantField] == "" {
				t.Fatalf("Create(%q, %q) = %v, want invalid with a problem for %q", tt.keyName, tt.scope, err, tt.wantField)
			}
			if secret != "" {
				t.Errorf("Create(%q, %q) secret = %q, want none", tt.keyName, tt.scope, secret)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ks := newKeys(t)
	adminKey, admin := create(t, ks, "admin", auth.ScopeAdmin)
	execKey, exec := create(t, ks, "worker", auth.ScopeExecution)
	revokedKey, revoked := create(t, ks, "gone", auth.ScopeAdmin)
	if err := ks.Revoke(ctx, revokedKey.ID); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	unknown := "bk_" + strings.Repeat("a", 52)

	tests := []struct {
		name   string
		header string
		want   *auth.Principal // nil: unauthenticated
	}{
		{"admin", "Bearer " + string(admin), &auth.Principal{KeyID: adminKey.ID, Name: "admin", Scope: auth.ScopeAdmin}},
		{"execution", "Bearer " + string(exec), &auth.Principal{KeyID: execKey.ID, Name: "worker", Scope: auth.ScopeExecution, Tenant: testTenant}},
		{"revoked", "Bearer " + string(revoked), nil},
		{"unknown well-formed", "Bearer " + unknown, nil},
		{"empty", "", nil},
		{"bearer only", "Bearer ", nil},
		{"bearer x", "Bearer x", nil},
		{"prefix only", "Bearer bk_", nil},
		{"no scheme", string(admin), nil},
		{"basic", "Basic YWRtaW46" + string(admin), nil},
		{"token scheme", "Token " + string(admin), nil},
		{"two spaces", "Bearer  " + string(admin), nil},
		{"trailing character", "Bearer " + string(admin) + "x", nil},
		{"truncated", "Bearer " + string(admin)[:40], nil},
		{"overlong", "Bearer bk_" + strings.Repeat("a", 200), nil},
		{"overlong with a valid key", "Bearer " + string(admin) + strings.Repeat("a", 100), nil},
		{"hash instead of key", "Bearer " + adminKey.Hash, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ks.Authenticate(ctx, tt.header)
			if tt.want != nil {
				if err != nil || got != *tt.want {
					t.Fatalf("Authenticate(%s) = %+v, %v, want %+v", tt.name, got, err, *tt.want)
				}
				return
			}
			if !errcode.Is(err, errcode.Unauthenticated) {
				t.Fatalf("Authenticate(%s) = %+v, %v, want unauthenticated", tt.name, got, err)
			}
			if got != (auth.Principal{}) {
				t.Errorf("Authenticate(%s) principal = %+v, want zero", tt.name, got)
			}
			for _, s := range []auth.Secret{admin, exec, revoked} {
				if strings.Contains(err.Error(), string(s)) {
					t.Errorf("Authenticate(%s) error %q contains a secret", tt.name, err)
				}
			}
		})
	}

	// A revoked key and an unknown one fail identically.
	_, errRevoked := ks.Authenticate(ctx, "Bearer "+string(revoked))
	_, errUnknown := ks.Authenticate(ctx, "Bearer "+unknown)
	if errRevoked.Error() != errUnknown.Error() {
		t.Errorf("revoked key error %q differs from unknown key error %q", errRevoked, errUnknown)
	}
}

func TestPrincipalCan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scope, need string
		want        bool
	}{
		{auth.ScopeAdmin, auth.ScopeAdmin, true},
		{auth.ScopeAdmin, auth.ScopeExecution, true},
		{auth.ScopeExecution, auth.ScopeExecution, true},
		{auth.ScopeExecution, auth.ScopeAdmin, false},
		{"", auth.ScopeAdmin, false},
		{"", auth.ScopeExecution, false},
	}
	for _, tt := range tests {
		p := auth.Principal{Scope: tt.scope}
		if got := p.Can(tt.need); got != tt.want {
			t.Errorf("Principal{Scope: %q}.Can(%q) = %v, want %v", tt.scope, tt.need, got, tt.want)
		}
	}
}

func readKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func checkAdminFile(t *testing.T, ks *auth.Keys, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode = %v, want 0600", path, fi.Mode().Perm())
	}
	key := readKey(t, path)
	p, err := ks.Authenticate(context.Background(), "Bearer "+key)
	if err != nil || p.Scope != auth.ScopeAdmin {
		t.Errorf("Authenticate(key in %s) = %+v, %v, want an admin principal", path, p, err)
	}
	return key
}

func TestEnsureAdminKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ks := newKeys(t)
	path := filepath.Join(t.TempDir(), "admin.key")

	created, err := ks.EnsureAdminKey(ctx, path)
	if err != nil || !created {
		t.Fatalf("EnsureAdminKey(new file) = %v, %v, want true, nil", created, err)
	}
	first := checkAdminFile(t, ks, path)

	created, err = ks.EnsureAdminKey(ctx, path)
	if err != nil || created {
		t.Fatalf("EnsureAdminKey(existing) = %v, %v, want false, nil", created, err)
	}
	if got := checkAdminFile(t, ks, path); got != first {
		t.Errorf("EnsureAdminKey(existing) replaced the key")
	}
	if keys, _ := ks.List(ctx); len(keys) != 1 {
		t.Errorf("keys after two EnsureAdminKey calls = %d, want 1", len(keys))
	}

	_, execSecret := create(t, ks, "worker", auth.ScopeExecution)
	revokedKey, revokedSecret := create(t, ks, "gone", auth.ScopeAdmin)
	if err := ks.Revoke(ctx, revokedKey.ID); err != nil {
		t.Fatal(err)
	}
	// A file whose key does not work as an admin key is replaced, with
	// mode 0600 whatever the old file's mode was.
	tests := []struct {
		name, content string
	}{
		{"unknown key", "bk_" + strings.Repeat("b", 52) + "\n"},
		{"revoked key", string(revokedSecret) + "\n"},
		{"execution key", string(execSecret) + "\n"},
		{"empty", ""},
		{"garbage", "not a key\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "admin.key")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			created, err := ks.EnsureAdminKey(ctx, path)
			if err != nil || !created {
				t.Fatalf("EnsureAdminKey(%s) = %v, %v, want true, nil", tt.name, created, err)
			}
			if got := checkAdminFile(t, ks, path); got == strings.TrimSpace(tt.content) {
				t.Errorf("EnsureAdminKey(%s) kept the old key", tt.name)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Errorf("EnsureAdminKey(%s) left %d files, want only admin.key", tt.name, len(entries))
			}
		})
	}
}

func TestSecretRedacted(t *testing.T) {
	t.Parallel()
	ks := newKeys(t)
	_, secret := create(t, ks, "x", auth.ScopeAdmin)
	raw := string(secret)

	formats := []string{"%v", "%s", "%+v", "%#v", "%q", "%x", "%d"}
	for _, f := range formats {
		if got := fmt.Sprintf(f, secret); strings.Contains(got, raw) || strings.Contains(got, fmt.Sprintf("%x", raw)) {
			t.Errorf("Sprintf(%q, secret) = %q, want the secret absent", f, got)
		}
	}
	inStruct := struct{ Key auth.Secret }{secret}
	for _, f := range []string{"%v", "%+v", "%#v"} {
		if got := fmt.Sprintf(f, inStruct); strings.Contains(got, raw) {
			t.Errorf("Sprintf(%q, struct with secret) = %q, want the secret absent", f, got)
		}
	}
	if got := secret.String(); got != "REDACTED" {
		t.Errorf("String() = %q, want REDACTED", got)
	}
	if got := secret.LogValue(); got.String() != "REDACTED" {
		t.Errorf("LogValue() = %v, want REDACTED", got)
	}

	handlers := map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	}
	for name, h := range handlers {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("issued key", "secret", secret)
		log.Info("issued key", slog.Any("secret", secret))
		log.With("secret", secret).Info("bound")
		log.Info("grouped", slog.Group("key", "secret", secret))
		log.Info("formatted", "msg", fmt.Sprint(secret))
		out := buf.String()
		if strings.Contains(out, raw) {
			t.Errorf("%s log contains the secret:\n%s", name, out)
		}
		// Positive control: the records were written, redacted.
		if n := strings.Count(out, "REDACTED"); n != 5 {
			t.Errorf("%s log has REDACTED %d times, want 5:\n%s", name, n, out)
		}
	}
}

// TestRevokeBeatsTheCache: a key that authenticated (and is cached) fails
// at once after Revoke.
func TestRevokeBeatsTheCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ks := newKeys(t)
	k, secret := create(t, ks, "cached", auth.ScopeExecution)
	for range 2 { // the second from the cache
		if _, err := ks.Authenticate(ctx, "Bearer "+string(secret)); err != nil {
			t.Fatalf("Authenticate before revoking: %v", err)
		}
	}
	if err := ks.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Authenticate(ctx, "Bearer "+string(secret)); !errcode.Is(err, errcode.Unauthenticated) {
		t.Errorf("Authenticate after Revoke = %v, want unauthenticated", err)
	}
}
