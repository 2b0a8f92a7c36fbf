package sandbox

import (
	"context"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Idle policies: use is tracked in memory (touch), and reapIdle pauses,
// hibernates or deletes a sandbox by how long it has gone unused.

// touch records that a sandbox was used now.
func (m *Manager) touch(id string) {
	m.mu.Lock()
	m.lastUse[id] = time.Now()
	m.mu.Unlock()
}

// reapIdle applies every sandbox's idle policy: pause, then hibernate,
// then delete, by how long it has gone unused. A sandbox with a command
// running is in use. Use is tracked in memory: a daemon restart counts as
// use of every sandbox.
func (m *Manager) reapIdle(ctx context.Context) {
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	for _, sb := range all {
		m.mu.Lock()
		last, seen := m.lastUse[sb.ID]
		if !seen {
			m.lastUse[sb.ID] = now
		}
		busy := m.busy[sb.ID] > 0
		m.mu.Unlock()
		if !seen || busy {
			continue
		}
		idle := now.Sub(last).Milliseconds()
		p := sb.Idle
		var err error
		switch {
		case p.DeleteAfterMS > 0 && idle >= p.DeleteAfterMS && sb.State != apitype.StateStopping:
			m.log.InfoContext(ctx, "deleting idle sandbox", "sandbox_id", sb.ID, "idle_ms", idle)
			err = m.Delete(ctx, sb.ID)
		case p.HibernateAfterMS > 0 && idle >= p.HibernateAfterMS &&
			(sb.State == apitype.StateRunning || sb.State == apitype.StatePaused):
			m.log.InfoContext(ctx, "hibernating idle sandbox", "sandbox_id", sb.ID, "idle_ms", idle)
			err = m.Hibernate(ctx, sb.ID)
		case p.PauseAfterMS > 0 && idle >= p.PauseAfterMS && sb.State == apitype.StateRunning:
			if _, ok := m.runtimes[sb.Runtime].(pauser); ok {
				m.log.InfoContext(ctx, "pausing idle sandbox", "sandbox_id", sb.ID, "idle_ms", idle)
				err = m.Pause(ctx, sb.ID)
			}
		}
		if err != nil && ctx.Err() == nil && !errcode.Is(err, errcode.NotFound) {
			m.log.ErrorContext(ctx, "applying idle policy", "sandbox_id", sb.ID, "err", err)
		}
	}
}
