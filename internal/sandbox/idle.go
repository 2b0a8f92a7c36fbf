package sandbox

import (
	"context"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Idle policies: use is tracked in memory (touch), and reapIdle pauses,
// hibernates or deletes a sandbox by how long it has gone unused.

// touch records that a sandbox was used now. If the idle reaper has
// already committed to pausing, hibernating or deleting it, touch waits
// for that to finish, so the caller reads the state it left (and wakes
// the sandbox) instead of racing it; it reports whether it waited.
func (m *Manager) touch(id string) (waited bool) {
	release, waited := m.use(id, false)
	release()
	return waited
}

// use is touch that, with hold, also counts the caller as a command in
// the sandbox until it calls release, so the reaper leaves it alone for
// the whole of a call (an exec that waits for its command, say).
func (m *Manager) use(id string, hold bool) (release func(), waited bool) {
	m.mu.Lock()
	m.lastUse[id] = time.Now()
	if hold {
		m.busy[id]++
	}
	reaping := m.reaping[id]
	m.mu.Unlock()
	release = func() {}
	if hold {
		release = func() {
			m.mu.Lock()
			if m.busy[id]--; m.busy[id] <= 0 {
				delete(m.busy, id)
			}
			m.lastUse[id] = time.Now()
			m.mu.Unlock()
		}
	}
	if reaping != nil {
		<-reaping
	}
	return release, reaping != nil
}

// claimIdle commits the reaper to acting on sandbox id if it is still
// unused since last and has no command running; done ends the claim.
// Checking and claiming under m.mu with touch orders the two: a call
// either lands before the claim (and the sandbox is in use) or waits for
// the reaper's action to end.
func (m *Manager) claimIdle(id string, last time.Time) (done func(), ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lastUse[id].Equal(last) || m.busy[id] > 0 || m.reaping[id] != nil {
		return nil, false
	}
	ch := make(chan struct{})
	m.reaping[id] = ch
	return func() {
		m.mu.Lock()
		delete(m.reaping, id)
		m.mu.Unlock()
		close(ch)
	}, true
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
		var act func(context.Context, string) error
		var what string
		switch {
		case p.DeleteAfterMS > 0 && idle >= p.DeleteAfterMS && sb.State != apitype.StateStopping:
			act, what = m.Delete, "deleting idle sandbox"
		case p.HibernateAfterMS > 0 && idle >= p.HibernateAfterMS &&
			(sb.State == apitype.StateRunning || sb.State == apitype.StatePaused):
			act, what = m.Hibernate, "hibernating idle sandbox"
		case p.PauseAfterMS > 0 && idle >= p.PauseAfterMS && sb.State == apitype.StateRunning:
			if _, ok := m.runtimes[sb.Runtime].(pauser); ok {
				act, what = m.Pause, "pausing idle sandbox"
			}
		}
		if act == nil {
			continue
		}
		done, ok := m.claimIdle(sb.ID, last)
		if !ok {
			continue // used since the list was read
		}
		m.log.InfoContext(ctx, what, "sandbox_id", sb.ID, "idle_ms", idle)
		err := act(ctx, sb.ID)
		done()
		if err != nil && ctx.Err() == nil && !errcode.Is(err, errcode.NotFound) {
			m.log.ErrorContext(ctx, "applying idle policy", "sandbox_id", sb.ID, "err", err)
		}
	}
}
