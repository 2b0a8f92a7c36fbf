package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
)

// Between HQ and a worker, no client key ever travels. Each worker has its
// own credential, derived from HQ's service secret and the worker's ID
// (WorkerCredential): HQ computes every worker's from its one secret, and a
// worker holds only its own. The credential itself never travels either:
// each request HQ forwards carries an assertion (AssertionHeader) that
// names the worker and its audience, the method and path, the caller's
// principal and an expiry a few seconds ahead, with a MAC keyed by the
// worker's credential and a nonce the worker refuses to see twice. A
// worker therefore refuses an assertion made for another worker (another
// key, another audience), an old one, a replayed one, and one moved to
// another route.

// AssertionHeader carries HQ's assertion on a forwarded request.
const AssertionHeader = "Berth-Assertion"

// MinSecretLen is the least length of a service secret or credential.
const MinSecretLen = 32

// AssertionTTL is how long an assertion is good for. Workers and HQ need
// clocks within a few seconds of each other (NTP).
const AssertionTTL = 30 * time.Second

const credentialPrefix = "bwc_"

// WorkerCredential is worker id's credential under HQ's secret.
func WorkerCredential(secret []byte, id string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("berth worker credential v1\x00" + id))
	return credentialPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ReadSecret reads a service secret or credential from path: one line of at
// least MinSecretLen characters, in a file only its owner can read.
func ReadSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, errcode.ServiceTokenInvalid.Wrap(err, "reading the service token file: %v", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, errcode.ServiceTokenInvalid.New("the service token file %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errcode.ServiceTokenInvalid.Wrap(err, "reading the service token file: %v", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < MinSecretLen || strings.ContainsAny(s, " \t\r\n") {
		return nil, errcode.ServiceTokenInvalid.New("the service token file %s must hold one line of at least %d characters without spaces", path, MinSecretLen)
	}
	return []byte(s), nil
}

// NewSecret makes a new service secret for HQ.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "bhq_" + base64.RawURLEncoding.EncodeToString(b)
}

func audience(worker string) string { return "berth-worker:" + worker }

// principalClaim is the caller HQ authenticated, as a worker sees it.
type principalClaim struct {
	KeyID      string `json:"kid"`
	Name       string `json:"name,omitempty"`
	Scope      string `json:"scope"`
	Tenant     string `json:"tenant,omitempty"`
	TenantName string `json:"tenant_name,omitempty"`
}

// Caller is who a forwarded request acts as.
type Caller struct {
	auth.Principal
	// TenantName is the name of the principal's tenant ("" for admin).
	TenantName string
}

func mac(cred []byte, worker, exp, nonce, method, uri, principal string) string {
	m := hmac.New(sha256.New, cred)
	fmt.Fprintf(m, "berth-assertion-v1\n%s\n%s\n%s\n%s\n%s\n%s\n%s", audience(worker), worker, exp, nonce, method, uri, principal)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Assert makes the assertion for a request to worker with its credential,
// acting as c, good until now+AssertionTTL.
func Assert(cred []byte, worker string, c Caller, method, uri string, now time.Time) string {
	b, _ := json.Marshal(principalClaim{KeyID: c.KeyID, Name: c.Name, Scope: c.Scope, Tenant: c.Tenant, TenantName: c.TenantName})
	p := base64.RawURLEncoding.EncodeToString(b)
	exp := strconv.FormatInt(now.Add(AssertionTTL).UnixMilli(), 10)
	nb := make([]byte, 16)
	_, _ = rand.Read(nb)
	nonce := base64.RawURLEncoding.EncodeToString(nb)
	return strings.Join([]string{"v1", worker, exp, nonce, p, mac(cred, worker, exp, nonce, method, uri, p)}, ".")
}

// Verifier checks the assertions a worker receives.
type Verifier struct {
	worker string
	cred   []byte
	now    func() time.Time

	mu      sync.Mutex
	seen    map[string]time.Time // nonce: its assertion's expiry
	sweepAt int                  // sweep expired nonces at this many
}

// NewVerifier checks assertions for worker, whose credential is cred.
func NewVerifier(worker string, cred []byte) *Verifier {
	return &Verifier{worker: worker, cred: cred, now: time.Now, seen: map[string]time.Time{}}
}

// maxNonces bounds the replay cache: at AssertionTTL, about 30,000
// forwarded requests a second.
const maxNonces = 1 << 20

// Verify checks r's assertion and returns who it acts as.
func (v *Verifier) Verify(r *http.Request) (Caller, error) {
	a := r.Header.Get(AssertionHeader)
	if a == "" {
		return Caller{}, errcode.ServiceCredentialInvalid.New("this is a Berth worker: it takes requests from its Headquarters only (no %s header)", AssertionHeader)
	}
	f := strings.Split(a, ".")
	if len(f) != 6 || f[0] != "v1" {
		return Caller{}, errcode.ServiceCredentialInvalid.New("the %s header is malformed", AssertionHeader)
	}
	worker, exp, nonce, p, sum := f[1], f[2], f[3], f[4], f[5]
	if worker != v.worker {
		return Caller{}, errcode.ServiceCredentialInvalid.New("the assertion is for worker %q; this is worker %q", worker, v.worker)
	}
	want := mac(v.cred, worker, exp, nonce, r.Method, r.URL.RequestURI(), p)
	if !hmac.Equal([]byte(sum), []byte(want)) {
		return Caller{}, errcode.ServiceCredentialInvalid.New("the assertion's signature does not match this worker's credential (another worker's, or HQ's --service-token-file differs)")
	}
	ms, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return Caller{}, errcode.ServiceCredentialInvalid.New("the assertion's expiry is malformed")
	}
	expires, now := time.UnixMilli(ms), v.now()
	switch {
	case !now.Before(expires):
		return Caller{}, errcode.ServiceCredentialInvalid.New("the assertion expired %v ago (are HQ's and this worker's clocks in step?)", now.Sub(expires).Round(time.Millisecond))
	case expires.Sub(now) > 2*AssertionTTL:
		return Caller{}, errcode.ServiceCredentialInvalid.New("the assertion expires too far ahead (are HQ's and this worker's clocks in step?)")
	}
	if err := v.remember(nonce, expires, now); err != nil {
		return Caller{}, err
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	var pc principalClaim
	if err == nil {
		err = json.Unmarshal(b, &pc)
	}
	if err != nil {
		return Caller{}, errcode.ServiceCredentialInvalid.New("the assertion's principal is malformed")
	}
	return Caller{Principal: auth.Principal{KeyID: pc.KeyID, Name: pc.Name, Scope: pc.Scope, Tenant: pc.Tenant}, TenantName: pc.TenantName}, nil
}

func (v *Verifier) remember(nonce string, expires, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.seen[nonce]; ok {
		return errcode.ServiceCredentialInvalid.New("the assertion was used before (a replay)")
	}
	if len(v.seen) >= max(v.sweepAt, 4096) {
		for n, e := range v.seen {
			if !now.Before(e) {
				delete(v.seen, n)
			}
		}
		v.sweepAt = 2 * len(v.seen)
		if len(v.seen) >= maxNonces {
			return errcode.ServiceCredentialInvalid.New("too many assertions in flight; try again")
		}
	}
	v.seen[nonce] = expires
	return nil
}
