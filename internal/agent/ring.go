package agent

import "sync"

// ring keeps the last size bytes written to a stream, addressed by
// absolute offsets: offset N is the Nth byte ever written, whether or not
// it is still kept. Readers that fall behind by more than size bytes lose
// the oldest bytes and are told so; the writer never waits for them.
//
// The buffer grows as bytes arrive, up to size, so an idle terminal costs
// little memory.
type ring struct {
	size int

	// mu guards the fields below.
	mu sync.Mutex
	// buf holds offsets [total-len(buf), total) while it grows; once full
	// (len(buf) == size) offset o is at buf[o%size].
	buf     []byte
	total   int64 // bytes ever written: the offset just past the last one
	closed  bool  // no more writes will come
	changed chan struct{}
}

func newRing(size int) *ring {
	return &ring{size: size, changed: make(chan struct{})}
}

// Write appends p, dropping the oldest bytes beyond the ring's size. It
// never fails.
func (r *ring) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(p) > r.size {
		r.total += int64(len(p) - r.size)
		p = p[len(p)-r.size:]
	}
	if int64(len(r.buf)) == r.total && len(r.buf)+len(p) <= r.size {
		// Still growing: the buffer starts at offset 0.
		if cap(r.buf)-len(r.buf) < len(p) {
			grown := make([]byte, len(r.buf), min(max(2*cap(r.buf), len(r.buf)+len(p), 4096), r.size))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, p...)
		r.total += int64(len(p))
	} else {
		if len(r.buf) < r.size {
			// Offsets below size sit at their own index, so the bytes
			// kept so far stay where a full ring expects them.
			full := make([]byte, r.size)
			copy(full, r.buf)
			r.buf = full
		}
		for len(p) > 0 {
			c := copy(r.buf[r.total%int64(r.size):], p)
			p = p[c:]
			r.total += int64(c)
		}
	}
	r.notifyLocked()
	return n, nil
}

// close marks the stream finished and wakes waiting readers.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.notifyLocked()
}

func (r *ring) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// ringState is a consistent view of a ring's counters.
type ringState struct {
	total   int64
	closed  bool
	changed <-chan struct{} // closed at the next write or close
}

func (r *ring) state() ringState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ringState{r.total, r.closed, r.changed}
}

// read returns up to maxBytes bytes from offset. An offset past the end
// reads from the end (nothing). truncated reports that offset had already
// been dropped: the bytes returned then start at the oldest one kept, and
// start says where.
func (r *ring) read(offset, maxBytes int64) (b []byte, start, next int64, truncated bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	oldest := r.total - int64(len(r.buf))
	offset = min(max(offset, 0), r.total)
	if offset < oldest {
		offset, truncated = oldest, true
	}
	n := min(r.total-offset, maxBytes)
	if n <= 0 {
		return nil, offset, offset, truncated
	}
	b = make([]byte, n)
	for got := int64(0); got < n; {
		i := (offset + got) % int64(r.size)
		got += int64(copy(b[got:], r.buf[i:]))
	}
	return b, offset, offset + n, truncated
}
