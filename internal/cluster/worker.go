package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/berthdev/berth/internal/ident"
)

// Heartbeat timing: a lease lasts LeaseTTL and is renewed every
// HeartbeatEvery, so two missed beats in a row still leave it held.
const (
	LeaseTTL       = 10 * time.Second
	HeartbeatEvery = 3 * time.Second
)

// Member keeps a worker's lease in the shared database.
type Member struct {
	ID          string
	Incarnation string
	Store       Store
	// Describe returns the capabilities and load to advertise now.
	Describe func(context.Context) (Capabilities, Load)
	Logger   *slog.Logger
	started  time.Time
}

// NewMember makes worker id's membership, with a new incarnation.
func NewMember(id string, st Store, describe func(context.Context) (Capabilities, Load), log *slog.Logger) *Member {
	return &Member{ID: id, Incarnation: ident.New("inc_"), Store: st, Describe: describe, Logger: log, started: time.Now()}
}

// Beat renews the lease once.
func (m *Member) Beat(ctx context.Context) error {
	caps, load := m.Describe(ctx)
	now := time.Now()
	return m.Store.RenewLease(ctx, &Lease{ID: m.ID, Incarnation: m.Incarnation, StartedAt: m.started,
		HeartbeatAt: now, ExpiresAt: now.Add(LeaseTTL), Capabilities: caps, Load: load})
}

// Run renews the lease until ctx ends, then releases it, so HQ reports the
// worker offline at once rather than when the lease runs out. A failed
// beat is logged and retried at the next; the lease lapses only when beats
// fail for LeaseTTL.
func (m *Member) Run(ctx context.Context) {
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := m.Store.ReleaseLease(rctx, m.ID, m.Incarnation); err != nil {
				m.Logger.Warn("releasing the worker's lease", "worker", m.ID, "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, HeartbeatEvery)
		err := m.Beat(bctx)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			m.Logger.Warn("worker heartbeat failed; retrying", "worker", m.ID, "err", err)
		case err == nil && failing:
			failing = false
			m.Logger.Info("worker heartbeat recovered", "worker", m.ID)
		}
	}
}
