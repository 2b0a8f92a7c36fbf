package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"sync"
	"time"
)

// Session expiry: a session ends after IdleTimeout without a request, and
// MaxAge after sign-in whatever its use. Sessions live in the daemon's
// memory only, so a restart signs everyone out.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxAge      = 12 * time.Hour
	// maxSessions bounds the sessions held; past it the least recently
	// used is dropped.
	maxSessions = 10000
)

// session is one signed-in person. Its key is the API key every page
// calls the API with; it is never written to a page, a URL or a log.
type session struct {
	key     string
	csrf    string
	created time.Time
	seen    time.Time
}

// LogValue keeps the key out of logs should a session ever be logged.
func (s *session) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// sessions holds the signed-in sessions, by the SHA-256 of their cookie
// value (so a lookup's timing says nothing about a valid ID).
type sessions struct {
	idle, maxAge time.Duration
	now          func() time.Time

	mu sync.Mutex // guards m
	m  map[[32]byte]*session
}

func newSessions(idle, maxAge time.Duration) *sessions {
	return &sessions{idle: idle, maxAge: maxAge, now: time.Now, m: map[[32]byte]*session{}}
}

// randomToken returns 256 random bits, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for key and returns its cookie value.
func (ss *sessions) create(key string) (string, *session) {
	id := randomToken()
	now := ss.now()
	s := &session{key: key, csrf: randomToken(), created: now, seen: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) >= maxSessions {
		ss.evictLocked(now)
	}
	ss.m[sha256.Sum256([]byte(id))] = s
	return id, s
}

// get returns the live session of cookie value id and marks it used.
func (ss *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	h := sha256.Sum256([]byte(id))
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[h]
	if s == nil {
		return nil
	}
	if ss.expired(s, now) {
		delete(ss.m, h)
		return nil
	}
	s.seen = now
	return s
}

// end drops the session of cookie value id.
func (ss *sessions) end(id string) {
	h := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	delete(ss.m, h)
	ss.mu.Unlock()
}

// endKey drops every session of key (the API no longer takes it).
func (ss *sessions) endKey(key string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for h, s := range ss.m {
		if s.key == key {
			delete(ss.m, h)
		}
	}
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.seen) > ss.idle || now.Sub(s.created) > ss.maxAge
}

// evictLocked drops the expired sessions, and the least recently used if
// none was.
func (ss *sessions) evictLocked(now time.Time) {
	var oldest [32]byte
	var at time.Time
	n := len(ss.m)
	for h, s := range ss.m {
		if ss.expired(s, now) {
			delete(ss.m, h)
			continue
		}
		if at.IsZero() || s.seen.Before(at) {
			oldest, at = h, s.seen
		}
	}
	if len(ss.m) == n {
		delete(ss.m, oldest)
	}
}

// equalToken compares tokens in constant time.
func equalToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
