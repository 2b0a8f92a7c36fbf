package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/netpolicy"
)

// Creating sandboxes: what a caller may ask for, its validation, the
// count-then-insert under --max-sandboxes, a start and its rollback.

// CreateSpec is what a caller asks for in a new sandbox.
type CreateSpec struct {
	// Tenant owns the sandbox; names are unique within it.
	Tenant    string
	Runtime   string
	Name      string
	Env       map[string]string
	Labels    map[string]string
	Resources Resources // zero fields take DefaultResources (isolated runtimes)
	// Lazy records the sandbox without compute (state pending); the first
	// call that needs it (a command, a file) provisions it.
	Lazy bool
	// Idle is the sandbox's idle policy; nil takes DefaultIdle.
	Idle *IdlePolicy
	// Template names the template to start from; "" is the base.
	Template string
	// Network is the sandbox's network policy; zero is mode none.
	Network netpolicy.Policy
	// Internal marks a sandbox Berth runs for itself (a job's, named by
	// the subsystem): unlisted, never claimed, drained at shutdown like
	// warm pool members.
	Internal string

	pool  string // set when filling a warm pool
	build bool   // a template build: writable root
}

var (
	nameRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Limits on what a spec may carry.
const (
	maxEnvVars    = 128
	maxEnvBytes   = 64 << 10
	maxLabels     = 64
	maxLabelBytes = 256
)

// ValidateEnv checks environment variables for a sandbox or command.
func ValidateEnv(env map[string]string, problems map[string]string, field string) {
	if len(env) > maxEnvVars {
		problems[field] = fmt.Sprintf("at most %d variables", maxEnvVars)
		return
	}
	total := 0
	for k, v := range env {
		total += len(k) + len(v)
		if !envKeyRE.MatchString(k) {
			problems[field+"."+k] = "name must match [A-Za-z_][A-Za-z0-9_]*"
		} else if strings.ContainsRune(v, 0) {
			problems[field+"."+k] = "value must not contain NUL"
		}
	}
	if total > maxEnvBytes {
		problems[field] = fmt.Sprintf("at most %d bytes in all", maxEnvBytes)
	}
}

// Valid returns the spec's problems, by field.
func (s *CreateSpec) Valid() map[string]string {
	p := map[string]string{}
	if s.Name != "" && !nameRE.MatchString(s.Name) {
		p["name"] = "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	ValidateEnv(s.Env, p, "env")
	if len(s.Labels) > maxLabels {
		p["labels"] = fmt.Sprintf("at most %d labels", maxLabels)
	}
	for k, v := range s.Labels {
		if k == "" || len(k) > maxLabelBytes || len(v) > maxLabelBytes {
			p["labels."+k] = fmt.Sprintf("keys and values are 1-%d bytes", maxLabelBytes)
		}
		if strings.HasPrefix(k, "berth.") && !s.build {
			p["labels."+k] = "the berth. prefix is reserved"
		}
	}
	if s.Template != "" && !templateNameRE.MatchString(s.Template) && !strings.HasPrefix(s.Template, "tpl_") {
		p["template"] = "is not a template name"
	}
	if i := s.Idle; i != nil {
		const maxIdle = 30 * 24 * 60 * 60 * 1000 // 30 days
		for name, v := range map[string]int64{"idle.pause_after_ms": i.PauseAfterMS,
			"idle.hibernate_after_ms": i.HibernateAfterMS, "idle.delete_after_ms": i.DeleteAfterMS} {
			if v < 0 || v > maxIdle {
				p[name] = fmt.Sprintf("must be between 0 (never) and %d (30 days)", int64(maxIdle))
			}
		}
	}
	r, m := s.Resources, MaxResources
	switch {
	case r.CPUs < 0 || r.CPUs > m.CPUs:
		p["resources.cpus"] = fmt.Sprintf("must be between 0.01 and %g", m.CPUs)
	case r.CPUs > 0 && r.CPUs < 0.01:
		p["resources.cpus"] = "must be at least 0.01"
	}
	if r.MemoryMB < 0 || r.MemoryMB > m.MemoryMB || (r.MemoryMB > 0 && r.MemoryMB < 32) {
		p["resources.memory_mb"] = fmt.Sprintf("must be between 32 and %d", m.MemoryMB)
	}
	if r.Pids < 0 || r.Pids > m.Pids || (r.Pids > 0 && r.Pids < 16) {
		p["resources.pids"] = fmt.Sprintf("must be between 16 and %d", m.Pids)
	}
	if r.DiskMB < 0 || r.DiskMB > m.DiskMB || (r.DiskMB > 0 && r.DiskMB < 64) {
		p["resources.disk_mb"] = fmt.Sprintf("must be between 64 and %d", m.DiskMB)
	}
	if r.ShmMB < 0 || r.ShmMB > m.ShmMB || (r.ShmMB > 0 && r.ShmMB < 16) {
		p["resources.shm_mb"] = fmt.Sprintf("must be between 16 and %d", m.ShmMB)
	}
	return p
}

// withDefaults fills zero resource fields from DefaultResources.
func (r Resources) withDefaults() Resources {
	d := DefaultResources
	if r.CPUs == 0 {
		r.CPUs = d.CPUs
	}
	if r.MemoryMB == 0 {
		r.MemoryMB = d.MemoryMB
	}
	if r.Pids == 0 {
		r.Pids = d.Pids
	}
	if r.DiskMB == 0 {
		r.DiskMB = d.DiskMB
	}
	if r.ShmMB == 0 {
		r.ShmMB = d.ShmMB
	}
	return r
}

// Create creates and starts a sandbox. If spec.Name names an existing
// sandbox, that sandbox is returned with created false.
func (m *Manager) Create(ctx context.Context, spec CreateSpec) (sb *Sandbox, created bool, err error) {
	defer func() {
		if created && spec.pool == "" {
			m.log.InfoContext(ctx, "sandbox created", "sandbox_id", sb.ID, "name", sb.Name, "runtime", sb.Runtime,
				"state", sb.State, "template", cmp.Or(spec.Template, BaseTemplate))
		}
	}()
	if p := spec.Valid(); len(p) > 0 {
		return nil, false, errcode.InvalidFields(p)
	}
	if spec.Internal != "" {
		spec.pool = InternalPool + spec.Internal
	}
	if spec.Runtime == "" {
		spec.Runtime = m.cfg.DefaultRuntime
	}
	rt, ok := m.runtimes[spec.Runtime]
	if !ok {
		return nil, false, errcode.RuntimeUnknown.New("runtime %q is not known; see GET /v1/system", spec.Runtime)
	}
	if err := rt.Available(); err != nil {
		return nil, false, err
	}
	if m.cfg.Refuse != nil {
		if err := m.cfg.Refuse(&spec, rt); err != nil {
			return nil, false, err
		}
	}
	spec.Network = spec.Network.Normalize()
	if err := m.validNetwork(spec.Network, rt); err != nil {
		return nil, false, err
	}
	if spec.Name != "" {
		if sb, err := m.store.GetSandboxByName(ctx, spec.Tenant, spec.Name); err == nil {
			return sb, false, nil
		} else if !errcode.Is(err, errcode.NotFound) {
			return nil, false, err
		}
	}
	tmpl, err := m.readyTemplate(ctx, spec.Tenant, spec.Template)
	if err != nil {
		return nil, false, err
	}
	if tmpl.ID != "" && !rt.Isolated() {
		return nil, false, errcode.InvalidFields(map[string]string{"template": "templates need an isolated runtime (container or gvisor)"})
	}
	if len(tmpl.Config.Env) > 0 {
		env := maps.Clone(tmpl.Config.Env)
		maps.Copy(env, spec.Env)
		spec.Env = env
	}
	// A claim keeps the template's env too: env is applied per command.
	if pool := m.poolFor(spec); pool != "" && tmpl.Tenant == "" {
		sb, ok, err := m.claim(ctx, pool, spec)
		if errcode.Has(err, errcode.NameTaken) {
			if existing, gerr := m.store.GetSandboxByName(ctx, spec.Tenant, spec.Name); gerr == nil {
				return existing, false, nil
			}
		}
		if err != nil || ok {
			return sb, ok, err
		}
	}

	now := time.Now().UTC()
	sb = &Sandbox{
		ID: ident.New("sbx_"), Tenant: spec.Tenant, Name: spec.Name, Runtime: rt.Name(), State: apitype.StateStarting,
		Env: spec.Env, Labels: spec.Labels, AgentToken: ident.Token("agt_"), CreatedAt: now, UpdatedAt: now,
	}
	if spec.Lazy {
		sb.State = apitype.StatePending
	}
	sb.Pool = spec.pool
	sb.Template = tmpl.ID
	sb.Network = spec.Network
	sb.Idle = DefaultIdle
	if spec.Idle != nil {
		sb.Idle = *spec.Idle
	}
	if rt.Isolated() {
		sb.Resources = spec.Resources.withDefaults()
	} else if spec.Resources != (Resources{}) {
		return nil, false, errcode.InvalidFields(map[string]string{"resources": "the process runtime enforces no limits; use runtime container or gvisor"})
	}
	err = m.insertWithinLimit(ctx, sb)
	if errcode.Has(err, errcode.SandboxLimit) && spec.pool == "" {
		// A caller comes before the pool: the room a pool member gives up
		// is held for this create until it inserts.
		m.evicting.Add(1)
		if m.evictPooled(ctx) {
			err = m.insertWithinLimit(ctx, sb)
		}
		m.evicting.Add(-1)
	}
	if err != nil {
		if errcode.Has(err, errcode.NameTaken) {
			if existing, gerr := m.store.GetSandboxByName(ctx, spec.Tenant, spec.Name); gerr == nil {
				return existing, false, nil
			}
		}
		return nil, false, err
	}
	if spec.Lazy {
		return sb, true, nil
	}
	unlock := m.lock(sb.ID)
	defer unlock()
	if spec.build {
		m.mu.Lock()
		m.building[sb.ID] = true
		m.mu.Unlock()
	}
	if err := m.start(ctx, sb, rt); err != nil {
		// Roll back completely: no process, no directory, no row.
		m.teardown(context.WithoutCancel(ctx), sb)
		if derr := m.store.DeleteSandbox(context.WithoutCancel(ctx), sb.ID); derr != nil {
			m.log.ErrorContext(ctx, "rolling back sandbox", "sandbox_id", sb.ID, "err", derr)
		} else {
			m.releaseUID(context.WithoutCancel(ctx), sb)
		}
		return nil, false, err
	}
	return sb, true, nil
}

func (m *Manager) insertWithinLimit(ctx context.Context, sb *Sandbox) error {
	m.createMu.Lock()
	defer m.createMu.Unlock()
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	live := 0
	uids := map[int]bool{}
	for _, s := range all {
		if s.Live() || s.State == apitype.StateStopping {
			live++
		}
		uids[s.UID] = true // failed sandboxes keep files owned by theirs
	}
	if sb.Pool != "" {
		live += int(m.evicting.Load()) // room held for callers
	}
	if live >= m.cfg.MaxSandboxes {
		return errcode.SandboxLimit.New("%d sandboxes exist, the maximum (--max-sandboxes); delete one first", live)
	}
	if err := m.checkQuota(ctx, all, sb.Tenant, adding(sb, sb.State == apitype.StatePending)); err != nil {
		return err
	}
	if sb.Resources != (Resources{}) {
		// Each isolated sandbox runs as a host uid of its own, unused by
		// any other sandbox of any daemon on this host, so nothing one
		// writes is another's and per-uid kernel limits are its own. The
		// host-wide registry leases it; this store's uids are excluded
		// too, for sandboxes recorded before the registry knew them.
		uid, err := m.uids.Lease(m.cfg.DataDir, sb.ID, uids)
		if err != nil {
			return err
		}
		sb.UID = uid
	}
	if err := m.store.CreateSandbox(ctx, sb); err != nil {
		m.releaseUID(ctx, sb)
		return err
	}
	return nil
}

// buildLabel marks a template build's sandbox.
const buildLabel = "berth.template_build"

// start lays out the sandbox's directories, starts its agent and records
// it as running.
func (m *Manager) start(ctx context.Context, sb *Sandbox, rt Runtime) error {
	l := LayoutFor(m.cfg.DataDir, sb.ID)
	for _, d := range []string{l.Dir, l.Workspace, l.State, l.Run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating sandbox directory: %w", err)
		}
	}
	// The workspace is the sandbox's home; 0755 like a home directory.
	if err := os.Chmod(l.Workspace, 0o755); err != nil {
		return err
	}
	root, err := m.rootSpec(ctx, sb.Template)
	if err != nil {
		return err
	}
	m.mu.Lock()
	root.Writable = m.building[sb.ID]
	m.mu.Unlock()
	network, err := m.networkUp(ctx, sb, l)
	if err != nil {
		return err
	}
	pid, err := rt.Start(ctx, sb, l, AgentArgs{
		Binary: m.cfg.AgentBinary, Token: sb.AgentToken, OutputCap: m.cfg.OutputCap,
		MaxCommands: m.cfg.MaxCommands, MaxHistory: m.cfg.MaxHistory, MaxUpload: m.cfg.MaxUpload,
		Root: root, Network: network,
	})
	if err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			return err
		}
		return errcode.Wrap(errcode.Unavailable, err, "starting the %s runtime failed", rt.Name())
	}
	sb.AgentPID = pid
	c := agent.NewClient(l.Socket, sb.AgentToken)
	if _, err := c.Ping(ctx); err != nil {
		c.Close()
		return errcode.Wrap(errcode.Unavailable, err, "sandbox agent did not answer")
	}
	// The client first: whoever reads the state running must find it.
	m.mu.Lock()
	m.agents[sb.ID] = c
	m.mu.Unlock()
	if err := m.store.SetSandboxState(ctx, sb.ID, apitype.StateRunning, "", pid); err != nil {
		m.mu.Lock()
		delete(m.agents, sb.ID)
		m.mu.Unlock()
		c.Close()
		return err
	}
	sb.State, sb.UpdatedAt = apitype.StateRunning, time.Now().UTC()
	m.restoreServices(ctx, sb.ID, c, false)
	return nil
}

// teardown stops the sandbox's runtime and removes its directory.
func (m *Manager) teardown(ctx context.Context, sb *Sandbox) {
	l := LayoutFor(m.cfg.DataDir, sb.ID)
	m.mu.Lock()
	if c, ok := m.agents[sb.ID]; ok {
		c.Close()
		delete(m.agents, sb.ID)
	}
	m.mu.Unlock()
	if rt, ok := m.runtimes[sb.Runtime]; ok {
		if err := m.stopRuntime(ctx, rt, sb); err != nil {
			m.log.ErrorContext(ctx, "stopping sandbox runtime", "sandbox_id", sb.ID, "err", err)
		}
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		m.log.ErrorContext(ctx, "removing sandbox directory", "sandbox_id", sb.ID, "err", err)
	}
}
