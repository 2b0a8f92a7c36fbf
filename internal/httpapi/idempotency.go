package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/tenant"
)

// Safe retries. A create that carries an Idempotency-Key header runs once
// per (tenant, key): its first answer is kept (sealed: a key's creation
// answers with its secret) for IdempotencyTTL and a retry gets it again,
// with Idempotent-Replayed: true, making nothing new. The same key with
// another body or on another route is a 422; a retry while the first is
// still running is a 409 with Retry-After. The first runs to its end even
// if its client gives up, so the retry finds its answer. Answers of 5xx,
// and 429s, are not kept: the retry runs again.

// IdempotencyStore keeps first answers (the store's).
type IdempotencyStore interface {
	BeginIdempotent(ctx context.Context, tenant, key, route, requestSHA256 string, ttl time.Duration) (*tenant.IdempotencyRecord, error)
	FinishIdempotent(ctx context.Context, tenant, key string, status int, body []byte) error
	AbandonIdempotent(ctx context.Context, tenant, key string) error
}

// Sealer seals what is kept at rest (broker.Sealer).
type Sealer interface {
	Seal(plaintext []byte, context string) ([]byte, error)
	Open(sealed []byte, context string) ([]byte, error)
}

// IdempotencyTTL is how long a first answer is kept.
const IdempotencyTTL = 24 * time.Hour

// IdempotencyHeader carries a client's idempotency key.
const IdempotencyHeader = "Idempotency-Key"

// maxIdempotentBody bounds a create body that carries a key (a template
// build's, with its files inline, is the largest).
const maxIdempotentBody = maxBuildBody

// keptAnswer is what a record's sealed body holds.
type keptAnswer struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Location    string `json:"location,omitempty"`
	Body        []byte `json:"body"`
}

// idempotentRoutes are the creates that take an Idempotency-Key.
var idempotentRoutes = map[string]bool{
	"POST /v1/sandboxes": true, "POST /v1/browser/sessions": true, "POST /v1/templates": true,
	"POST /v1/keys": true, "POST /v1/jobs": true, "POST /v1/tenants": true,
}

// captureWriter passes the answer on and keeps a copy of it.
type captureWriter struct {
	statusWriter
	body bytes.Buffer
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.body.Write(b)
	return c.statusWriter.Write(b)
}

func (s *Server) idempotent(pattern string, next http.Handler) http.Handler {
	if !idempotentRoutes[pattern] || s.cfg.Idempotency == nil || s.cfg.Sealer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(IdempotencyHeader)
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		if len(key) > 255 || !printable(key) {
			s.fail(w, r, errcode.InvalidFields(map[string]string{IdempotencyHeader: "must be 1-255 printable ASCII characters"}))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxIdempotentBody))
		if err != nil {
			s.fail(w, r, errcode.BodyTooLarge.New("a create with an Idempotency-Key is at most %d bytes", maxIdempotentBody))
			return
		}
		sum := sha256.Sum256(body)
		digest := hex.EncodeToString(sum[:])
		tenant := principalOf(r).Tenant
		ctx := context.WithoutCancel(r.Context())
		rec, err := s.cfg.Idempotency.BeginIdempotent(ctx, tenant, key, pattern, digest, IdempotencyTTL)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if rec != nil {
			s.replay(w, r, rec, pattern, digest)
			return
		}
		cw := &captureWriter{statusWriter: statusWriter{ResponseWriter: w}}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// The first run ends what it began even if its client leaves: the
		// retry is what the key is for.
		next.ServeHTTP(cw, r.WithContext(ctx))
		if cw.status >= 500 || cw.status == http.StatusTooManyRequests || cw.status == 0 {
			if err := s.cfg.Idempotency.AbandonIdempotent(ctx, tenant, key); err != nil {
				s.log.Warn("abandoning an idempotency key", "err", err, "request_id", requestID(r))
			}
			return
		}
		kept, _ := json.Marshal(keptAnswer{Status: cw.status, ContentType: cw.Header().Get("Content-Type"),
			Location: cw.Header().Get("Location"), Body: cw.body.Bytes()})
		sealed, err := s.cfg.Sealer.Seal(kept, idempotencyContext(tenant, key))
		if err == nil {
			err = s.cfg.Idempotency.FinishIdempotent(ctx, tenant, key, cw.status, sealed)
		}
		if err != nil {
			s.log.Warn("keeping an idempotent answer", "err", err, "request_id", requestID(r))
			_ = s.cfg.Idempotency.AbandonIdempotent(ctx, tenant, key)
		}
	})
}

func idempotencyContext(tenant, key string) string { return "idempotency\x00" + tenant + "\x00" + key }

func (s *Server) replay(w http.ResponseWriter, r *http.Request, rec *tenant.IdempotencyRecord, pattern, digest string) {
	switch {
	case rec.Route != pattern || rec.RequestSHA256 != digest:
		s.fail(w, r, errcode.IdempotencyKeyReused.New(
			"Idempotency-Key %q was first used with another request (%s with another body); use a new key for a new request",
			rec.Key, rec.Route))
		return
	case rec.Status == 0:
		w.Header().Set("Retry-After", "1")
		s.fail(w, r, errcode.IdempotencyInProgress.New("the first request with Idempotency-Key %q is still running; retry shortly", rec.Key))
		return
	}
	plain, err := s.cfg.Sealer.Open(rec.Body, idempotencyContext(rec.Tenant, rec.Key))
	var kept keptAnswer
	if err == nil {
		err = json.Unmarshal(plain, &kept)
	}
	if err != nil {
		s.fail(w, r, errcode.Wrap(errcode.Internal, err, "the kept answer of Idempotency-Key %q cannot be read", rec.Key))
		return
	}
	if kept.ContentType != "" {
		w.Header().Set("Content-Type", kept.ContentType)
	}
	if kept.Location != "" {
		w.Header().Set("Location", kept.Location)
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.Header().Set("Content-Length", strconv.Itoa(len(kept.Body)))
	w.WriteHeader(kept.Status)
	_, _ = w.Write(kept.Body)
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
