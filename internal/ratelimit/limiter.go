package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Caps, in nanoseconds, that keep the timestamp arithmetic from
// overflowing: a rate slower than one per maxInterval (about 13 days) is
// treated as one per maxInterval, and a bucket holds at most maxLimit (about
// 36 years) worth of tokens.
const (
	maxInterval = 1 << 50
	maxLimit    = 1 << 60
)

// A Limiter keeps one token bucket per key, for at most maxKeys keys. It is
// safe for concurrent use.
type Limiter struct {
	interval int64 // ns per token; 0 means unlimited
	limit    int64 // ns of tokens a full bucket holds: Burst * interval
	maxKeys  int
	epoch    time.Time
	now      func() time.Time // time.Now, except in tests

	// mu guards buckets and heap.
	mu      sync.Mutex
	buckets map[string]*bucket
	// heap holds the buckets in buckets as a min-heap on full: the root is
	// the bucket closest to full, the one to forget first.
	heap []*bucket
}

type bucket struct {
	key  string
	full int64 // ns since epoch at which the bucket is full again
	i    int   // index in Limiter.heap
}

// New returns a Limiter that allows r per key and tracks at most maxKeys
// keys, forgetting the bucket closest to full when it needs room. It panics
// if maxKeys < 1.
func New(r Rate, maxKeys int) *Limiter {
	return newLimiter(r, maxKeys, time.Now)
}

func newLimiter(r Rate, maxKeys int, now func() time.Time) *Limiter {
	if maxKeys < 1 {
		panic("ratelimit: maxKeys must be positive")
	}
	l := &Limiter{maxKeys: maxKeys, now: now, epoch: now()}
	if r.unlimited() {
		return l
	}
	burst := r.Burst
	if burst < 1 {
		burst = defaultBurst(r.PerSecond)
	}
	interval := min(math.Round(1e9/r.PerSecond), maxInterval)
	l.interval = int64(interval)
	l.limit = int64(min(interval*float64(burst), maxLimit))
	l.buckets = make(map[string]*bucket)
	return l
}

// Allow takes a token from key's bucket. If the bucket is empty it takes
// nothing and returns false and how long until the bucket holds a token.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l.interval == 0 {
		return true, 0
	}
	now := int64(l.now().Sub(l.epoch))
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		l.add(key, now+l.interval)
		return true, 0
	}
	full := max(now, b.full) + l.interval
	if wait := full - now - l.limit; wait > 0 {
		return false, time.Duration(wait)
	}
	b.full = full
	l.down(b.i)
	return true, 0
}

// empty reports whether key's bucket holds no token, and if so how long
// until it does, without taking one or remembering key.
func (l *Limiter) empty(key string) (bool, time.Duration) {
	if l.interval == 0 {
		return false, 0
	}
	now := int64(l.now().Sub(l.epoch))
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return false, 0
	}
	if wait := max(now, b.full) + l.interval - now - l.limit; wait > 0 {
		return true, time.Duration(wait)
	}
	return false, 0
}

// add starts tracking key, forgetting the bucket closest to full if the
// Limiter already tracks maxKeys keys. l.mu must be held.
func (l *Limiter) add(key string, full int64) {
	if len(l.heap) < l.maxKeys {
		b := &bucket{key: key, full: full, i: len(l.heap)}
		l.heap = append(l.heap, b)
		l.buckets[key] = b
		l.up(b.i)
		return
	}
	b := l.heap[0]
	delete(l.buckets, b.key)
	b.key, b.full = key, full
	l.buckets[key] = b
	l.down(0)
}

func (l *Limiter) up(i int) {
	h := l.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].full <= h[i].full {
			return
		}
		h[p], h[i] = h[i], h[p]
		h[p].i, h[i].i = p, i
		i = p
	}
}

func (l *Limiter) down(i int) {
	h := l.heap
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].full < h[c].full {
			c++
		}
		if h[i].full <= h[c].full {
			return
		}
		h[i], h[c] = h[c], h[i]
		h[i].i, h[c].i = i, c
		i = c
	}
}

// Failures throttles failed authentication per source: each failure takes
// a token, and a source with none left is Blocked until one refills. It is
// safe for concurrent use.
//
// Check Blocked before checking a request's credentials and call Failed
// when they are wrong, so a source guessing keys is refused without its
// guesses being checked while other sources are unaffected.
type Failures struct {
	l *Limiter
}

// NewFailures returns a Failures that allows r failures per key and tracks
// at most maxKeys keys, like New.
func NewFailures(r Rate, maxKeys int) *Failures {
	return &Failures{l: New(r, maxKeys)}
}

// Failed records a failure for key, taking a token from its bucket. It does
// nothing if the bucket is already empty.
func (f *Failures) Failed(key string) {
	f.l.Allow(key)
}

// Blocked reports whether key has no failures left and, if so, how long
// until it has one. It takes no token and does not start tracking key.
func (f *Failures) Blocked(key string) (blocked bool, retryAfter time.Duration) {
	return f.l.empty(key)
}
