package browser

import (
	"context"
	"time"
)

// The warm pool of isolated browsers: Config.IsolatedWarm browsers kept
// started (sandbox up, Chromium answering, CDP connected, a blank page),
// so an isolated session opens with an attach instead of a sandbox and a
// browser start. Each is claimed by one session and deleted with it:
// never given back, never shared. The pool refills in the background.

// isolatedPool holds the ready browsers. Only fillIsolated sends on ready.
type isolatedPool struct {
	size  int
	ready chan *isolatedBrowser
	kick  chan struct{} // a claim was made: fill again
}

func newIsolatedPool(size int) *isolatedPool {
	size = max(size, 0)
	return &isolatedPool{size: size, ready: make(chan *isolatedBrowser, size), kick: make(chan struct{}, 1)}
}

// Backoff of the filler after a failed start.
const (
	isolatedRetryMin = 5 * time.Second
	isolatedRetryMax = time.Minute
)

// IsolatedPool returns how many warm isolated browsers are ready, and the
// pool's size.
func (m *Manager) IsolatedPool() (ready, size int) {
	return len(m.isolated.ready), m.isolated.size
}

// takeIsolated returns a ready browser of the pool, or nil.
func (m *Manager) takeIsolated() *isolatedBrowser {
	p := m.isolated
	defer func() {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}()
	for {
		select {
		case b := <-p.ready:
			if b.alive() {
				return b
			}
			b.close() // its browser or sandbox died while it waited
		default:
			return nil
		}
	}
}

// fillIsolated keeps the pool full until ctx ends. It starts one browser
// at a time, only when the pool has room, so the pool never holds more
// than its size.
func (m *Manager) fillIsolated(ctx context.Context) {
	p := m.isolated
	backoff := isolatedRetryMin
	for ctx.Err() == nil {
		if len(p.ready) >= p.size {
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-time.After(30 * time.Second): // drop members that died waiting
				m.pruneIsolated()
			}
			continue
		}
		b, err := m.startIsolated(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Error("starting a warm isolated browser", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, isolatedRetryMax)
			continue
		}
		backoff = isolatedRetryMin
		p.ready <- b // room was checked, and only this goroutine sends
	}
}

// pruneIsolated closes the pool members whose browser has died.
func (m *Manager) pruneIsolated() {
	p := m.isolated
	for range len(p.ready) {
		select {
		case b := <-p.ready:
			if b.alive() {
				p.ready <- b
			} else {
				b.close()
			}
		default:
			return
		}
	}
}

// drainIsolated deletes every browser of the pool. fillIsolated must have
// returned.
func (m *Manager) drainIsolated() {
	for {
		select {
		case b := <-m.isolated.ready:
			b.close()
		default:
			return
		}
	}
}
