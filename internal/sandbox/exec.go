package sandbox

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Commands: validation, start, the watchers that record how each ends,
// reads, and the OOM kills a command's end is annotated with.

// ExecSpec is a command to run.
type ExecSpec = apitype.CreateCommandRequest

// ValidExec checks a command request, and fills in the default timeout.
func (m *Manager) ValidExec(req *ExecSpec) error {
	p := map[string]string{}
	switch {
	case req.Command == "" && len(req.Argv) == 0:
		p["command"] = "command or argv is required"
	case req.Command != "" && len(req.Argv) > 0:
		p["argv"] = "set command or argv, not both"
	case len(req.Argv) > 0 && req.Argv[0] == "":
		p["argv"] = "argv[0] must not be empty"
	}
	if strings.ContainsRune(req.Command, 0) || slices.ContainsFunc(req.Argv, func(a string) bool { return strings.ContainsRune(a, 0) }) {
		p["command"] = "must not contain NUL"
	}
	ValidateEnv(req.Env, p, "env")
	switch {
	case req.TimeoutMS < 0:
		p["timeout_ms"] = "must not be negative"
	case req.TimeoutMS == 0:
		req.TimeoutMS = m.cfg.DefaultTimeout.Milliseconds()
	case req.TimeoutMS > m.cfg.MaxTimeout.Milliseconds():
		p["timeout_ms"] = fmt.Sprintf("must be at most %d (--max-command-timeout)", m.cfg.MaxTimeout.Milliseconds())
	}
	if len(p) > 0 {
		return errcode.InvalidFields(p)
	}
	return nil
}

// Exec starts a command in a running sandbox and returns its record. The
// record is committed before Exec returns. q may carry wait_ms (and the
// output window of a command read): Exec then returns when the command
// ends or the wait passes, with its output.
func (m *Manager) Exec(ctx context.Context, sandboxID string, req ExecSpec, q url.Values) (*CommandRecord, error) {
	if err := m.ValidExec(&req); err != nil {
		return nil, err
	}
	// Held: the idle reaper must not stop the sandbox under a command
	// being started (or waited for) before watch counts it.
	sb, release, err := m.readyHeld(ctx, sandboxID, true)
	defer release()
	if err != nil {
		return nil, err
	}
	c, err := m.agentOf(sb)
	if err != nil {
		return nil, err
	}
	env := sandboxEnv(sb)
	maps.Copy(env, req.Env)
	req.Env = env
	// Start the command and record it at once: the two are independent,
	// and exec latency is the sum of whichever is slower. If the daemon
	// dies between them, recovery reconciles (a record with no command is
	// interrupted; a command with no record is imported).
	id := ident.New("cmd_")
	m.noteOOMBase(sb, id)
	rec := CommandRecord{
		ID: id, SandboxID: sandboxID, Status: apitype.CommandRunning, Command: req.Command, Argv: req.Argv,
		Cwd: req.Cwd, TimeoutMS: req.TimeoutMS, StartedAt: time.Now().UTC(),
	}
	if req.Command != "" {
		rec.Argv = nil
	}
	inserted := make(chan error, 1)
	go func() { inserted <- m.store.InsertCommand(context.WithoutCancel(ctx), &rec) }()
	started, startErr := c.Start(ctx, agent.StartRequest{ID: id, CreateCommandRequest: req}, q)
	insertErr := <-inserted
	bg := context.WithoutCancel(ctx)
	if startErr != nil && ctx.Err() != nil && insertErr == nil {
		// The caller left while the agent started or ran the command: it
		// may well be running. Keep the record if the agent has it.
		if _, err := c.Command(bg, id, url.Values{"max_bytes": {"0"}}); err == nil {
			m.watch(sandboxID, c, id)
			return nil, startErr
		}
	}
	switch {
	case startErr != nil && insertErr == nil:
		// Not started, so not acknowledged: leave no row.
		if err := m.store.DeleteCommand(bg, sandboxID, id); err != nil {
			m.log.ErrorContext(ctx, "removing the record of a command that did not start", "command_id", id, "err", err)
		}
		return nil, startErr
	case startErr != nil:
		return nil, startErr
	case insertErr != nil:
		// Not acknowledged: leave nothing running.
		_, _ = c.Cancel(bg, id)
		_ = c.Forget(bg, id)
		return nil, fmt.Errorf("recording command: %w", insertErr)
	}
	rec = started
	rec.SandboxID = sandboxID
	m.annotateOOM(sb, &rec)
	if rec.Done() {
		// It could not start, or ended within the wait: the record of its
		// start is durable, its outcome is the agent's too (recovery reads
		// it there), so the store learns it off the request's path.
		m.finishLater(rec)
	} else {
		m.watch(sandboxID, c, id)
	}
	return &rec, nil
}

// watch follows a running command until it ends and stores its outcome.
func (m *Manager) watch(sandboxID string, c *agent.Client, id string) {
	m.mu.Lock()
	if m.watching[id] {
		m.mu.Unlock()
		return
	}
	m.watching[id] = true
	m.busy[sandboxID]++
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.watching, id)
			delete(m.oomBase, id)
			if m.busy[sandboxID]--; m.busy[sandboxID] <= 0 {
				delete(m.busy, sandboxID)
			}
			m.lastUse[sandboxID] = time.Now() // a command ending is use
			m.mu.Unlock()
		}()
		q := url.Values{"wait_ms": {fmt.Sprint(agent.MaxWait.Milliseconds())}, "max_bytes": {"0"}}
		backoff := 50 * time.Millisecond
		for m.bg.Err() == nil {
			rec, err := c.Command(m.bg, id, q)
			switch {
			case err == nil && rec.Done():
				rec.SandboxID = sandboxID
				if sb, err := m.store.GetSandbox(m.bg, sandboxID); err == nil {
					m.annotateOOM(sb, &rec)
				}
				if err := m.store.FinishCommand(m.bg, &rec, m.cfg.MaxHistory); err != nil && m.bg.Err() == nil {
					m.log.Error("storing command outcome", "sandbox_id", sandboxID, "command_id", id, "err", err)
				}
				return
			case err == nil:
				backoff = 50 * time.Millisecond
				continue
			case errcode.Is(err, errcode.NotFound):
				m.interrupt(m.bg, sandboxID, id, "agent lost the command")
				return
			}
			// The agent is unreachable: stop when the sandbox is gone (a
			// paused one comes back).
			if sb, gerr := m.store.GetSandbox(m.bg, sandboxID); gerr != nil ||
				(sb.State != apitype.StateRunning && sb.State != apitype.StatePaused) {
				return
			}
			select {
			case <-m.bg.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}()
}

// finishLater stores a finished command's outcome in the background.
func (m *Manager) finishLater(rec CommandRecord) {
	rec.Stdout, rec.Stderr = "", ""
	m.mu.Lock()
	delete(m.oomBase, rec.ID)
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.store.FinishCommand(m.bg, &rec, m.cfg.MaxHistory); err != nil && m.bg.Err() == nil {
			m.log.Error("storing command outcome", "sandbox_id", rec.SandboxID, "command_id", rec.ID, "err", err)
		}
	}()
}

func (m *Manager) interrupt(ctx context.Context, sandboxID, id, reason string) {
	now := time.Now().UTC()
	rec := CommandRecord{ID: id, SandboxID: sandboxID, Status: apitype.CommandInterrupted, Reason: reason, FinishedAt: &now}
	if err := m.store.FinishCommand(ctx, &rec, m.cfg.MaxHistory); err != nil && ctx.Err() == nil {
		m.log.Error("marking command interrupted", "sandbox_id", sandboxID, "command_id", id, "err", err)
	}
}

// Command returns a command with a window of its output; q carries
// wait_ms, stdout_offset, stderr_offset, max_bytes and encoding. Commands
// the agent no longer has come from the store, without output.
func (m *Manager) Command(ctx context.Context, sandboxID, id string, q url.Values) (*CommandRecord, error) {
	sb, err := m.ready(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	if c, err := m.agentOf(sb); err == nil {
		rec, err := c.Command(ctx, id, q)
		if err == nil {
			rec.SandboxID = sandboxID
			m.annotateOOM(sb, &rec)
			return &rec, nil
		}
		if !errcode.Is(err, errcode.NotFound) {
			return nil, err
		}
	}
	return m.store.GetCommand(ctx, sandboxID, id)
}

// Commands lists a sandbox's retained commands, newest first, with live
// statuses from the agent where it has them.
func (m *Manager) Commands(ctx context.Context, sandboxID string) ([]*CommandRecord, error) {
	sb, err := m.ready(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	recs, err := m.store.ListCommands(ctx, sandboxID, m.cfg.MaxHistory+m.cfg.MaxCommands)
	if err != nil {
		return nil, err
	}
	if c, err := m.agentOf(sb); err == nil {
		if live, err := c.Commands(ctx); err == nil {
			byID := make(map[string]apitype.Command, len(live))
			for _, r := range live {
				byID[r.ID] = r
			}
			for i, r := range recs {
				if l, ok := byID[r.ID]; ok {
					l.SandboxID = sandboxID
					m.annotateOOM(sb, &l)
					recs[i] = &l
				}
			}
		}
	}
	return recs, nil
}

// cpuMeter is implemented by runtimes that account a sandbox's CPU time.
type cpuMeter interface {
	CPUUsage(id string) (time.Duration, bool)
}

// CPUUsage returns the CPU time sandbox id's processes have used so far,
// those that ended included; false when its runtime does not account it
// (the process runtime) or the sandbox is gone.
func (m *Manager) CPUUsage(ctx context.Context, id string) (time.Duration, bool) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return 0, false
	}
	cm, ok := m.runtimes[sb.Runtime].(cpuMeter)
	if !ok {
		return 0, false
	}
	return cm.CPUUsage(id)
}

// cpuWeigher is implemented by runtimes that can weigh a sandbox's CPU
// against the others'.
type cpuWeigher interface {
	SetCPUShares(id string, shares uint64) error
}

// SetCPUShares sets sandbox id's CPU weight against the other sandboxes',
// in cgroup v1's units (1024, the default, for all: equal shares when the
// CPUs are busy). Under a runtime that cannot (the process runtime) it
// does nothing.
func (m *Manager) SetCPUShares(ctx context.Context, id string, shares uint64) error {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return err
	}
	if cw, ok := m.runtimes[sb.Runtime].(cpuWeigher); ok {
		return cw.SetCPUShares(id, shares)
	}
	return nil
}

// oomCounter is implemented by runtimes that can tell how many processes
// the kernel's OOM killer ended in a sandbox.
type oomCounter interface {
	OOMKills(id string) int
}

func (m *Manager) oomKills(sb *Sandbox) int {
	if oc, ok := m.runtimes[sb.Runtime].(oomCounter); ok {
		return oc.OOMKills(sb.ID)
	}
	return 0
}

// noteOOMBase remembers the sandbox's OOM kill count as a command starts.
func (m *Manager) noteOOMBase(sb *Sandbox, cmdID string) {
	if _, ok := m.runtimes[sb.Runtime].(oomCounter); !ok {
		return
	}
	n := m.oomKills(sb)
	m.mu.Lock()
	m.oomBase[cmdID] = n
	m.mu.Unlock()
}

// annotateOOM reports a command the OOM killer ended as failed with
// reason "oom": it (or, through its shell, its child) died of SIGKILL,
// which the agent did not send, while the sandbox's OOM kill count rose. Without a remembered base (after a
// daemon restart) any OOM kill in the sandbox counts.
func (m *Manager) annotateOOM(sb *Sandbox, rec *CommandRecord) {
	// Killed by SIGKILL, itself or (as a shell reports it) its last child.
	killed := rec.Signal == "SIGKILL" || (rec.ExitCode != nil && *rec.ExitCode == 128+9)
	if !rec.Done() || !killed || rec.Status != apitype.CommandExited {
		return
	}
	if _, ok := m.runtimes[sb.Runtime].(oomCounter); !ok {
		return
	}
	m.mu.Lock()
	base := m.oomBase[rec.ID]
	m.mu.Unlock()
	if m.oomKills(sb) > base {
		rec.Status, rec.Reason = apitype.CommandFailed, "oom"
	}
}
