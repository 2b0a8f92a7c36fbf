package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
)

// Recovery and liveness: reconciling the store with reality at start
// (re-adopting live agents, marking lost ones, quarantining unknown
// directories), and the periodic check that live agents still run.

// reconcile makes the store and reality agree after a (re)start: it finishes
// interrupted deletes, re-adopts live sandboxes whose agent still runs,
// marks the others failed, and moves sandbox directories the store does
// not know into the quarantine (after stopping what runs there): it never
// deletes data it cannot account for.
func (m *Manager) reconcile(ctx context.Context) error {
	if err := m.recoverTemplates(ctx); err != nil {
		return err
	}
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, sb := range all {
		known[sb.ID] = true
		switch {
		case sb.State == apitype.StateStopping || sb.Labels[buildLabel] != "":
			// A build sandbox's build died with the last daemon.
			m.log.InfoContext(ctx, "removing the sandbox of an interrupted delete or template build", "sandbox_id", sb.ID)
			m.teardown(ctx, sb)
			if err := m.store.DeleteSandbox(ctx, sb.ID); err != nil {
				return err
			}
		case sb.Live() || sb.State == apitype.StatePaused:
			if err := m.adopt(ctx, sb); err != nil {
				return err
			}
		}
	}
	// Containers a runtime still runs for sandboxes the store does not know.
	for _, rt := range m.runtimes {
		lister, ok := rt.(interface {
			List(context.Context) ([]string, error)
		})
		if !ok {
			continue
		}
		ids, err := lister.List(ctx)
		if err != nil {
			m.log.ErrorContext(ctx, "listing containers", "runtime", rt.Name(), "err", err)
			continue
		}
		for _, id := range ids {
			if !known[id] {
				m.log.WarnContext(ctx, "removing unknown container", "runtime", rt.Name(), "sandbox_id", id)
				if err := m.stopRuntime(ctx, rt, &Sandbox{ID: id}); err != nil {
					m.log.ErrorContext(ctx, "removing unknown container", "sandbox_id", id, "err", err)
				}
			}
		}
	}
	entries, err := os.ReadDir(filepath.Join(m.cfg.DataDir, "sandboxes"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if known[e.Name()] {
			continue
		}
		for _, rt := range m.runtimes {
			if err := m.stopRuntime(ctx, rt, &Sandbox{ID: e.Name()}); err != nil {
				m.log.ErrorContext(ctx, "stopping unknown sandbox", "sandbox_id", e.Name(), "runtime", rt.Name(), "err", err)
			}
		}
		// A directory that cannot be moved stays where it is: the next
		// start tries again, and nothing is lost meanwhile.
		if dst, err := quarantine(m.cfg.DataDir, e.Name(), time.Now()); err != nil {
			m.log.ErrorContext(ctx, "quarantining unknown sandbox directory", "sandbox_id", e.Name(), "err", err)
		} else {
			m.log.WarnContext(ctx, "quarantined unknown sandbox directory", "sandbox_id", e.Name(), "path", dst)
		}
	}
	return nil
}

func (m *Manager) adopt(ctx context.Context, sb *Sandbox) error {
	l := LayoutFor(m.cfg.DataDir, sb.ID)
	rt, ok := m.runtimes[sb.Runtime]
	if err := m.runtimeGone(sb); ok && err != nil {
		// Its processes may well run on: marking it lost would let a
		// delete leave them behind. The next daemon with the runtime
		// adopts it.
		m.log.WarnContext(ctx, "sandbox not adopted: its runtime is unavailable", "sandbox_id", sb.ID, "runtime", sb.Runtime, "why", err.Error())
		return nil
	}
	var c *agent.Client
	if ok && rt.Alive(sb, l) {
		c = agent.NewClient(l.Socket, sb.AgentToken)
		// A paused agent is frozen and cannot answer; being alive is enough.
		if sb.State != apitype.StatePaused {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Ping(pctx)
			cancel()
			if err != nil {
				c.Close()
				c = nil
			}
		}
	}
	recs, err := m.store.ListCommands(ctx, sb.ID, m.cfg.MaxHistory+m.cfg.MaxCommands)
	if err != nil {
		return err
	}
	if c == nil {
		return m.markLost(ctx, sb, recs)
	}
	if sb.State != apitype.StateRunning && sb.State != apitype.StatePaused {
		if err := m.store.SetSandboxState(ctx, sb.ID, apitype.StateRunning, "", sb.AgentPID); err != nil {
			c.Close()
			return err
		}
	}
	m.mu.Lock()
	m.agents[sb.ID] = c
	m.mu.Unlock()
	m.log.InfoContext(ctx, "sandbox re-adopted", "sandbox_id", sb.ID, "agent_pid", sb.AgentPID)
	if sb.Network.Egress() {
		// Its namespace and device outlived the daemon that served them;
		// connections open then were lost with that daemon's stack.
		if _, err := m.networkUp(ctx, sb, l); err != nil {
			m.log.WarnContext(ctx, "sandbox egress not served again", "sandbox_id", sb.ID, "err", err)
		}
	}

	// Commands the agent ran but the store never recorded (the daemon died
	// between the two) are imported, so nothing runs unseen.
	stored := map[string]bool{}
	for _, r := range recs {
		stored[r.ID] = true
		if r.Status == apitype.CommandRunning {
			m.watch(sb.ID, c, r.ID)
		}
	}
	if sb.State == apitype.StatePaused {
		// Its frozen agent cannot list commands now; the watchers resume
		// when it thaws. (A command it started unrecorded just before a
		// crash shows up in GET .../commands/{id} but not in the list.)
		return nil
	}
	m.restoreServices(ctx, sb.ID, c, true)
	live, err := c.Commands(ctx)
	if err != nil {
		return nil // the watchers will notice
	}
	for _, r := range slices.Backward(live) {
		if stored[r.ID] {
			continue
		}
		r.SandboxID = sb.ID
		if err := m.store.InsertCommand(ctx, &r); err != nil {
			return err
		}
		if !r.Done() {
			m.watch(sb.ID, c, r.ID)
		}
	}
	return nil
}

// markLost records that a live sandbox's agent is gone: it kills what is
// left of the sandbox, marks it failed (reason agent_lost) and its running
// commands interrupted. The workspace stays until the sandbox is deleted.
func (m *Manager) markLost(ctx context.Context, sb *Sandbox, recs []*CommandRecord) error {
	reason := "agent_lost"
	if m.oomKills(sb) > 0 {
		reason = "oom" // the kernel killed the agent for the sandbox's memory limit
	}
	m.log.WarnContext(ctx, "sandbox agent lost", "sandbox_id", sb.ID, "agent_pid", sb.AgentPID, "reason", reason)
	m.mu.Lock()
	if c, ok := m.agents[sb.ID]; ok {
		c.Close()
		delete(m.agents, sb.ID)
	}
	m.mu.Unlock()
	if rt, ok := m.runtimes[sb.Runtime]; ok {
		if err := m.stopRuntime(ctx, rt, sb); err != nil {
			m.log.ErrorContext(ctx, "stopping lost sandbox", "sandbox_id", sb.ID, "err", err)
		}
	}
	// Commands first: whoever sees the sandbox failed must find them ended.
	for _, r := range recs {
		if r.Status == apitype.CommandRunning {
			m.interrupt(ctx, sb.ID, r.ID, "sandbox agent lost ("+reason+")")
		}
	}
	return m.store.SetSandboxState(ctx, sb.ID, apitype.StateFailed, reason, 0)
}
