package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Revocation of what is open. A request that stays open (an exec stream,
// a terminal or CDP WebSocket, a preview, job events) runs under Watch's
// context; Revoke cancels it at once, and a poll catches keys revoked
// behind this process's back (another process on the same database)
// within RevocationPoll.

// RevocationPoll is how often watched keys are checked in the store. With
// Revoke's own cancel it bounds how long a revoked key's stream stays open.
const RevocationPoll = 2 * time.Second

type watch struct{ cancel context.CancelFunc }

type watchers struct {
	mu    sync.Mutex
	byKey map[string]map[*watch]bool
}

// Watch returns ctx, canceled as well when keyID is revoked, and the
// function that stops watching (call it when the request ends).
func (ks *Keys) Watch(ctx context.Context, keyID string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watch{cancel: cancel}
	ks.w.mu.Lock()
	if ks.w.byKey[keyID] == nil {
		ks.w.byKey[keyID] = map[*watch]bool{}
	}
	ks.w.byKey[keyID][w] = true
	ks.w.mu.Unlock()
	return ctx, func() {
		cancel()
		ks.w.mu.Lock()
		// A key's set is dropped only when empty, so w is in the current one.
		if set := ks.w.byKey[keyID]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(ks.w.byKey, keyID)
			}
		}
		ks.w.mu.Unlock()
	}
}

func (w *watchers) revoked(keyID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for x := range w.byKey[keyID] {
		x.cancel()
	}
}

func (w *watchers) keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.byKey))
	for k := range w.byKey {
		out = append(out, k)
	}
	return out
}

// PollRevocations checks the watched keys in the store every
// RevocationPoll until ctx ends, and closes what a revoked key has open.
func (ks *Keys) PollRevocations(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(RevocationPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := ks.w.keys()
		if len(ids) == 0 {
			continue
		}
		gone, err := ks.store.RevokedKeys(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("checking for revoked keys", "err", err)
			}
			continue
		}
		ks.Revoked(gone...)
	}
}

// Revoked closes what the keys ids have open, for keys revoked in the store
// by someone other than Revoke (a tenant's removal revokes all of its).
func (ks *Keys) Revoked(ids ...string) {
	ks.forget(ids...)
	for _, id := range ids {
		ks.w.revoked(id)
	}
}
