package sandbox

import (
	"context"
	"fmt"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// A sandbox's life after create: the one step by which a call wakes it
// (ready), bringing up a pending or hibernated sandbox, pause and resume,
// hibernate and delete.

// Delete stops a sandbox and removes everything it had: processes, socket,
// directories and records. The intent is recorded first, so a crash midway
// is finished by the next start.
func (m *Manager) Delete(ctx context.Context, id string) error {
	// Unknown IDs must not grow the lock map.
	if _, err := m.store.GetSandbox(ctx, id); err != nil {
		return err
	}
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if err := m.stoppable(sb); err != nil {
		return err
	}
	if err := m.store.SetSandboxState(ctx, id, apitype.StateStopping, "", sb.AgentPID); err != nil {
		return err
	}
	m.teardown(context.WithoutCancel(ctx), sb)
	if err := m.store.DeleteSandbox(context.WithoutCancel(ctx), id); err != nil {
		return err
	}
	m.releaseUID(context.WithoutCancel(ctx), sb)
	if sb.Pool == "" {
		m.log.InfoContext(ctx, "sandbox deleted", "sandbox_id", id, "name", sb.Name)
	}
	m.mu.Lock()
	delete(m.locks, id)
	delete(m.lastUse, id)
	delete(m.building, id)
	m.mu.Unlock()
	return nil
}

// stoppable refuses to delete a sandbox whose processes may run while the
// runtime that would stop them is unavailable (runsc gone from PATH): a
// delete that answered success would leave them running, unowned.
func (m *Manager) stoppable(sb *Sandbox) error {
	if !sb.Live() && sb.State != apitype.StatePaused {
		return nil
	}
	if err := m.runtimeGone(sb); err != nil {
		return errcode.RuntimeGone.New("%s; nothing was deleted: make the runtime available (berth doctor), restart berth serve, and delete it again", errcode.MessageOf(err))
	}
	return nil
}

// runtimeGone says why sb's runtime cannot reach it now, or nil when it can.
// Such a sandbox is left as it is (running, not adopted) until a daemon
// with the runtime starts.
func (m *Manager) runtimeGone(sb *Sandbox) error {
	rt, ok := m.runtimes[sb.Runtime]
	var why error
	if !ok {
		why = fmt.Errorf("runtime %q is not known to this daemon", sb.Runtime)
	} else if why = rt.Available(); why == nil {
		return nil
	}
	return errcode.RuntimeGone.New("sandbox %s runs on %s, which is not available to this daemon (%s)", sb.ID, sb.Runtime, errcode.MessageOf(why))
}

// Agent returns the client of sandbox id's agent once the sandbox is
// ready (see ready): every call that reaches an agent (commands, files,
// terminals, services, ports) comes through here or Exec.
func (m *Manager) Agent(ctx context.Context, id string) (*agent.Client, error) {
	sb, err := m.ready(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.agentOf(sb)
}

// ready is the one step by which a call wakes a sandbox: it returns
// sandbox id's record once the sandbox can serve, after provisioning it
// (pending), starting it again (hibernated) or resuming it (paused), and
// marks it used. Any call to a sleeping sandbox wakes it transparently.
func (m *Manager) ready(ctx context.Context, id string) (*Sandbox, error) {
	sb, release, err := m.readyHeld(ctx, id, false)
	release()
	return sb, err
}

// readyHeld is ready that, with hold, keeps the sandbox in use (the idle
// reaper leaves it alone) until release is called; release is never nil.
func (m *Manager) readyHeld(ctx context.Context, id string, hold bool) (sb *Sandbox, release func(), err error) {
	release = func() {}
	if sb, err = m.store.GetSandbox(ctx, id); err != nil {
		return nil, release, err
	}
	release, waited := m.use(id, hold)
	if waited {
		// The idle reaper was pausing, hibernating or deleting it.
		if sb, err = m.store.GetSandbox(ctx, id); err != nil {
			release()
			m.mu.Lock()
			delete(m.lastUse, id)
			m.mu.Unlock()
			return nil, func() {}, err
		}
	}
	switch sb.State {
	case apitype.StatePending, apitype.StateHibernated:
		err = m.bringUp(ctx, id, sb.State)
	case apitype.StatePaused:
		if err = m.Resume(ctx, id); errcode.Is(err, errcode.Conflict) {
			err = nil
		}
	default:
		return sb, release, nil
	}
	if err == nil {
		sb, err = m.store.GetSandbox(ctx, id)
	}
	if err != nil {
		release()
		return nil, func() {}, err
	}
	return sb, release, nil
}

// bringUp starts sandbox id's agent if the sandbox is still in state from:
// StatePending for a lazy sandbox's first start, StateHibernated to start
// it again on its kept files. Concurrent calls start it once. A failed
// start releases what it took: a pending sandbox is left with nothing
// behind, a hibernated one with its files; the next call tries again.
func (m *Manager) bringUp(ctx context.Context, id, from string) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil || sb.State != from {
		return err // gone, or brought up by a concurrent call
	}
	rt, err := m.runtimeOf(sb)
	if err != nil {
		return err
	}
	if err := m.runtimeGone(sb); err != nil {
		return err // registered, but unusable now (runsc removed, say)
	}
	m.createMu.Lock()
	err = m.checkQuota(ctx, nil, sb.Tenant, running(sb))
	m.createMu.Unlock()
	if err != nil {
		return err
	}
	if err := m.start(ctx, sb, rt); err != nil {
		if from == apitype.StatePending {
			m.teardown(context.WithoutCancel(ctx), sb)
		} else {
			_ = m.stopRuntime(context.WithoutCancel(ctx), rt, sb)
		}
		return err
	}
	m.log.InfoContext(ctx, "sandbox brought up", "sandbox_id", id, "from", from)
	return nil
}

// runtimeOf returns the runtime sb was started on, or runtime_gone when
// this daemon does not have it.
func (m *Manager) runtimeOf(sb *Sandbox) (Runtime, error) {
	rt, ok := m.runtimes[sb.Runtime]
	if !ok {
		return nil, errcode.RuntimeGone.New("runtime %q of sandbox %s is gone from this daemon", sb.Runtime, sb.ID)
	}
	return rt, nil
}

// Hibernate stops a sandbox's processes and keeps its files (root layer,
// workspace): it uses no memory or CPU until the next call wakes it.
// Commands that were running become interrupted; they are never replayed.
func (m *Manager) Hibernate(ctx context.Context, id string) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	switch sb.State {
	case apitype.StateHibernated:
		return nil
	case apitype.StateRunning, apitype.StatePaused:
	default:
		return errcode.SandboxNotRunning.New("sandbox %s is %s", id, sb.State)
	}
	if sb.Resources.Scratch {
		return errcode.New(errcode.Conflict, "sandbox %s keeps its workspace in memory (a job runtime); it cannot hibernate", id)
	}
	m.mu.Lock()
	if c, ok := m.agents[id]; ok {
		c.Close()
		delete(m.agents, id)
	}
	m.mu.Unlock()
	rt, err := m.runtimeOf(sb)
	if err != nil {
		return err
	}
	// Stop ends every process and releases mounts; the files stay.
	if err := m.stopRuntime(ctx, rt, sb); err != nil {
		return errcode.Wrap(errcode.Unavailable, err, "hibernating sandbox %s failed", id)
	}
	recs, err := m.store.ListCommands(ctx, id, m.cfg.MaxHistory+m.cfg.MaxCommands)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Status == apitype.CommandRunning {
			m.interrupt(ctx, id, r.ID, "sandbox hibernated")
		}
	}
	return m.store.SetSandboxState(ctx, id, apitype.StateHibernated, "", 0)
}

// pauser is implemented by runtimes that can freeze a sandbox in place.
type pauser interface {
	Pause(ctx context.Context, sb *Sandbox, l Layout) error
	Resume(ctx context.Context, sb *Sandbox, l Layout) error
}

// Pause freezes a running sandbox (its cgroup): processes keep their
// memory and use no CPU. Pausing a paused sandbox is a no-op.
func (m *Manager) Pause(ctx context.Context, id string) error {
	return m.freeze(ctx, id, apitype.StateRunning, apitype.StatePaused, errcode.SandboxNotRunning, pauser.Pause)
}

// Resume thaws a paused sandbox. Resuming a running sandbox is a no-op.
func (m *Manager) Resume(ctx context.Context, id string) error {
	return m.freeze(ctx, id, apitype.StatePaused, apitype.StateRunning, errcode.SandboxNotPaused, pauser.Resume)
}

// freeze moves a sandbox from state from to state to through the
// runtime's pause or resume (do); a sandbox already in state to is left
// alone, one in any other state is a conflict with reason notFrom.
func (m *Manager) freeze(ctx context.Context, id, from, to string, notFrom errcode.Reason,
	do func(pauser, context.Context, *Sandbox, Layout) error) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	switch sb.State {
	case to:
		return nil
	case from:
	default:
		return notFrom.New("sandbox %s is %s", id, sb.State)
	}
	p, ok := m.runtimes[sb.Runtime].(pauser)
	if !ok {
		return errcode.PauseUnsupported.New("the %s runtime cannot pause sandboxes (it has no cgroup to freeze)", sb.Runtime)
	}
	if err := do(p, ctx, sb, LayoutFor(m.cfg.DataDir, id)); err != nil {
		return errcode.Wrap(errcode.Unavailable, err, "sandbox %s: %s failed", id, to)
	}
	return m.store.SetSandboxState(ctx, id, to, "", sb.AgentPID)
}

func (m *Manager) agentOf(sb *Sandbox) (*agent.Client, error) {
	m.mu.Lock()
	c, ok := m.agents[sb.ID]
	m.mu.Unlock()
	if !ok && sb.State == apitype.StateRunning {
		if err := m.runtimeGone(sb); err != nil {
			return nil, err
		}
	}
	if !ok || sb.State != apitype.StateRunning {
		msg := fmt.Sprintf("sandbox %s is %s", sb.ID, sb.State)
		if sb.Reason != "" {
			msg += " (" + sb.Reason + ")"
		}
		return nil, errcode.SandboxNotRunning.New("%s", msg)
	}
	return c, nil
}
