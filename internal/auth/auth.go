// Package auth issues and checks API keys.
//
// A key is "bk_" followed by 52 base32 characters (256 random bits). Only
// its SHA-256 is stored: keys are high-entropy, so a fast hash is enough and
// lookups stay cheap. The stored hash is compared in constant time.
//
// Keys have a scope and, except admin keys, a tenant. "admin" keys are the
// operator's: they belong to no tenant, see everything and manage tenants
// and keys. Every other key belongs to exactly one tenant and sees only its
// resources: "execution" keys use them, "read" keys list and read them.
//
// Revoking a key ends what it has open: Watch gives each long-lived
// request a context that is canceled when its key is revoked.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Scopes.
const (
	ScopeAdmin     = "admin"
	ScopeExecution = "execution"
	ScopeRead      = "read"
)

// ValidScope reports whether s names a scope.
func ValidScope(s string) bool { return s == ScopeAdmin || s == ScopeExecution || s == ScopeRead }

// KeyPrefix starts every API key, so leaked keys are easy to scan for.
const KeyPrefix = "bk_"

// Key is an API key's record. The secret itself is never stored.
type Key struct {
	ID     string
	Name   string
	Scope  string
	Prefix string // the first characters of the secret, for people to recognise it
	Hash   string
	// TenantID is the tenant the key belongs to; "" for admin keys.
	TenantID  string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Principal is who a request acts as.
type Principal struct {
	KeyID string
	Name  string
	Scope string
	// Tenant is the ID of the key's tenant; "" for an admin key, which
	// sees every tenant.
	Tenant string
}

// Admin reports whether p is the operator's (an admin key).
func (p Principal) Admin() bool { return p.Scope == ScopeAdmin }

// Can reports whether p may act with scope: admin may do everything,
// execution may also read.
func (p Principal) Can(scope string) bool {
	switch p.Scope {
	case ScopeAdmin:
		return true
	case ScopeExecution:
		return scope == ScopeExecution || scope == ScopeRead
	}
	return p.Scope == scope
}

// Store persists keys.
type Store interface {
	InsertKey(ctx context.Context, k *Key) error
	KeyByHash(ctx context.Context, hash string) (*Key, error)
	ListKeys(ctx context.Context) ([]*Key, error)
	RevokeKey(ctx context.Context, id string) error
	// RevokedKeys reports which of ids are revoked or gone.
	RevokedKeys(ctx context.Context, ids []string) ([]string, error)
}

// Secret is an API key's plaintext. It never prints itself in logs.
type Secret string

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String redacts the secret in %v and %s.
func (Secret) String() string { return "REDACTED" }

// Format redacts the secret for every verb, %#v and %d included, which
// would otherwise bypass String.
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "REDACTED") }

// Keys issues and checks API keys.
type Keys struct {
	store Store
	w     watchers

	// cache remembers keys that authenticated, by hash, for CacheTTL:
	// most calls then need no database read. Revoke drops a key's entry
	// at once; a revocation by another process shows within CacheTTL.
	mu    sync.Mutex
	cache map[string]cachedKey
}

type cachedKey struct {
	p       Principal
	expires time.Time
}

// CacheTTL is how long a key that authenticated is trusted without a
// database read.
const CacheTTL = time.Second

const maxCached = 1 << 14

// NewKeys returns a Keys over store.
func NewKeys(store Store) *Keys {
	return &Keys{store: store, w: watchers{byKey: map[string]map[*watch]bool{}}, cache: map[string]cachedKey{}}
}

func (ks *Keys) cached(hash string) (Principal, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	c, ok := ks.cache[hash]
	if !ok || time.Now().After(c.expires) {
		return Principal{}, false
	}
	return c.p, true
}

func (ks *Keys) remember(hash string, p Principal) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if len(ks.cache) >= maxCached {
		clear(ks.cache)
	}
	ks.cache[hash] = cachedKey{p: p, expires: time.Now().Add(CacheTTL)}
}

// forget drops the cached entries of keys ids.
func (ks *Keys) forget(ids ...string) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for h, c := range ks.cache {
		for _, id := range ids {
			if c.p.KeyID == id {
				delete(ks.cache, h)
			}
		}
	}
}

// Hash returns the stored form of a secret.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Create issues a key and returns its record and its secret, which is not
// recoverable later. An admin key has no tenant; every other key has one
// (the caller checks that it exists).
func (ks *Keys) Create(ctx context.Context, name, scope, tenantID string) (*Key, Secret, error) {
	problems := map[string]string{}
	if !ValidScope(scope) {
		problems["scope"] = "must be admin, execution or read"
	}
	if name == "" || len(name) > 100 {
		problems["name"] = "is required, at most 100 bytes"
	}
	switch {
	case scope == ScopeAdmin && tenantID != "":
		problems["tenant"] = "admin keys are the operator's and belong to no tenant"
	case scope != ScopeAdmin && tenantID == "":
		problems["tenant"] = "is required for execution and read keys"
	}
	if len(problems) > 0 {
		return nil, "", errcode.InvalidFields(problems)
	}
	secret := ident.Token(KeyPrefix)
	k := &Key{
		ID: ident.New("key_"), Name: name, Scope: scope, Prefix: secret[:len(KeyPrefix)+6],
		Hash: Hash(secret), TenantID: tenantID, CreatedAt: time.Now().UTC(),
	}
	if err := ks.store.InsertKey(ctx, k); err != nil {
		return nil, "", fmt.Errorf("storing key: %w", err)
	}
	return k, Secret(secret), nil
}

// List returns every key, revoked ones included.
func (ks *Keys) List(ctx context.Context) ([]*Key, error) { return ks.store.ListKeys(ctx) }

// Revoke revokes a key; requests with it fail from then on, and what it
// has open (streams, WebSockets) is closed.
func (ks *Keys) Revoke(ctx context.Context, id string) error {
	if err := ks.store.RevokeKey(ctx, id); err != nil {
		return err
	}
	ks.forget(id)
	ks.w.revoked(id)
	return nil
}

var errBadKey = errcode.New(errcode.Unauthenticated, "missing, malformed, unknown or revoked API key")

// Authenticate checks an Authorization header value and returns the
// principal. Every failure is the same errcode.Unauthenticated, so a
// caller cannot tell a revoked key from an unknown one.
func (ks *Keys) Authenticate(ctx context.Context, header string) (Principal, error) {
	secret, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 128 {
		return Principal{}, errBadKey
	}
	hash := Hash(secret)
	if p, ok := ks.cached(hash); ok {
		return p, nil
	}
	k, err := ks.store.KeyByHash(ctx, hash)
	if err != nil {
		if errcode.Is(err, errcode.NotFound) {
			return Principal{}, errBadKey
		}
		return Principal{}, err
	}
	if subtle.ConstantTimeCompare([]byte(k.Hash), []byte(hash)) != 1 || k.RevokedAt != nil {
		return Principal{}, errBadKey
	}
	p := Principal{KeyID: k.ID, Name: k.Name, Scope: k.Scope, Tenant: k.TenantID}
	ks.remember(hash, p)
	return p, nil
}

// EnsureAdminKey makes sure path holds a working admin key. On first start
// (or when the file does not hold a working admin key) it creates one and
// writes it to path with mode 0600. It reports whether it created a key.
func (ks *Keys) EnsureAdminKey(ctx context.Context, path string) (bool, error) {
	if b, err := os.ReadFile(path); err == nil {
		// A key that works but is not an admin key (an execution key
		// put there by hand) does not count.
		if p, err := ks.Authenticate(ctx, "Bearer "+strings.TrimSpace(string(b))); err == nil && p.Scope == ScopeAdmin {
			return false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("reading admin key: %w", err)
	}
	_, secret, err := ks.Create(ctx, "admin", ScopeAdmin, "")
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(path, []byte(string(secret)+"\n"), 0o600); err != nil {
		return false, fmt.Errorf("writing admin key: %w", err)
	}
	return true, nil
}

// writeFileAtomic writes data to path through a synced temporary file and a
// rename, so a crash leaves the old file or the new one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
