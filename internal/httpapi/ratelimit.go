package httpapi

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ratelimit"
)

// Rate limits. Token buckets per source address (every request, before
// its key is read), per key, and stricter per key on creates; a source
// that sends bad keys is throttled (auth_throttled) before its keys are
// even checked, while other sources go on. Beyond a bucket the answer is
// 429 with Retry-After. The source is the peer's address, or for a peer
// in TrustedProxies the nearest untrusted address in X-Forwarded-For.

// RateLimits configures the limits; a zero Rate is no limit.
type RateLimits struct {
	PerSource  ratelimit.Rate
	PerKey     ratelimit.Rate
	CreatesKey ratelimit.Rate
	// PerTenant and CreatesTenant bound a tenant's keys together, so
	// that more keys do not make a tenant a louder neighbour.
	PerTenant     ratelimit.Rate
	CreatesTenant ratelimit.Rate
	AuthFailures  ratelimit.Rate // failed authentications per source
	// TrustedProxies are the only peers whose X-Forwarded-For counts.
	TrustedProxies []netip.Prefix
}

// DefaultRateLimits are generous for one machine's clients and still end
// floods and key guessing.
var DefaultRateLimits = RateLimits{
	PerSource:     ratelimit.Rate{PerSecond: 1000, Burst: 2000},
	PerKey:        ratelimit.Rate{PerSecond: 200, Burst: 400},
	CreatesKey:    ratelimit.Rate{PerSecond: 20, Burst: 40},
	PerTenant:     ratelimit.Rate{PerSecond: 400, Burst: 800},
	CreatesTenant: ratelimit.Rate{PerSecond: 40, Burst: 80},
	AuthFailures:  ratelimit.Rate{PerSecond: 20.0 / 60, Burst: 20},
}

const rateLimitKeys = 1 << 16

type limiters struct {
	cfg                   RateLimits
	source, key, creates  *ratelimit.Limiter
	tenant, tenantCreates *ratelimit.Limiter
	authFailures          *ratelimit.Failures
}

func newLimiters(cfg RateLimits) *limiters {
	return &limiters{cfg: cfg,
		source:        ratelimit.New(cfg.PerSource, rateLimitKeys),
		key:           ratelimit.New(cfg.PerKey, rateLimitKeys),
		creates:       ratelimit.New(cfg.CreatesKey, rateLimitKeys),
		tenant:        ratelimit.New(cfg.PerTenant, rateLimitKeys),
		tenantCreates: ratelimit.New(cfg.CreatesTenant, rateLimitKeys),
		authFailures:  ratelimit.NewFailures(cfg.AuthFailures, rateLimitKeys),
	}
}

// sourceOf is the address r comes from, as a bucket's key. An IPv6
// client is keyed by its /64, which one host usually owns whole.
func (l *limiters) sourceOf(r *http.Request) string {
	a := ratelimit.ClientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), l.cfg.TrustedProxies)
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

func retryAfter(w http.ResponseWriter, d time.Duration) string {
	secs := int(math.Ceil(d.Seconds()))
	secs = max(secs, 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return strconv.Itoa(secs)
}

// throttleSource limits requests per source.
func (s *Server) throttleSource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isInner(r) { // the method API call around it paid
			next.ServeHTTP(w, r)
			return
		}
		if ok, wait := s.limits.source.Allow(s.limits.sourceOf(r)); !ok {
			s.fail(w, r, errcode.RateLimited.New("this address's rate limit is reached; retry in %ss", retryAfter(w, wait)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authFailed answers a failed authentication: 429 auth_throttled when r's
// source has failed too often (a valid key from it still passes: guessing
// ends, the key's owner goes on), else it counts the failure and answers
// err.
func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, err error) {
	src := s.limits.sourceOf(r)
	if blocked, wait := s.limits.authFailures.Blocked(src); blocked {
		s.fail(w, r, errcode.AuthThrottled.New("too many failed authentications from this address; retry in %ss", retryAfter(w, wait)))
		return
	}
	s.limits.authFailures.Failed(src)
	w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
	s.fail(w, r, err)
}

// throttleKey limits an authenticated request per key, creates more
// strictly.
func (s *Server) throttleKey(pattern string, next http.Handler) http.Handler {
	// Creates of resources that hold the daemon's memory, disk or
	// processes; commands are not among them: an agent runs them by the
	// hundred, and the per-key limit bounds them.
	create := idempotentRoutes[pattern] || pattern == "POST /v1/convert/{action}"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		buckets := []struct {
			l        *ratelimit.Limiter
			key, who string
			on       bool
		}{
			// A method API call's REST request: the call paid these.
			{s.limits.key, p.KeyID, "this key's rate limit", !isInner(r)},
			{s.limits.tenant, p.Tenant, "this tenant's rate limit", p.Tenant != "" && !isInner(r)},
			{s.limits.creates, p.KeyID, "this key's rate limit on creates", create},
			{s.limits.tenantCreates, p.Tenant, "this tenant's rate limit on creates", create && p.Tenant != ""},
		}
		for _, b := range buckets {
			if !b.on {
				continue
			}
			if ok, wait := b.l.Allow(b.key); !ok {
				s.fail(w, r, errcode.RateLimited.New("%s is reached; retry in %ss", b.who, retryAfter(w, wait)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
