package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Config configures a Manager. Zero values take the defaults.
type Config struct {
	DataDir        string
	AgentBinary    string
	DefaultRuntime string
	MaxSandboxes   int
	MaxCommands    int // concurrent, per sandbox
	MaxHistory     int // retained commands, per sandbox
	OutputCap      int64
	MaxUpload      int64
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// Pools are the warm pools to keep full.
	Pools []PoolSpec
	// UIDRegistry is the host-wide file that leases isolated sandboxes
	// their host uids, shared by every daemon of the host
	// (DefaultUIDRegistry when empty).
	UIDRegistry string
	Logger      *slog.Logger
}

// Defaults.
const (
	DefaultMaxSandboxes   = 64
	DefaultCommandTimeout = 10 * time.Minute
	DefaultMaxTimeout     = 24 * time.Hour
)

// Manager owns the sandboxes of one daemon. It is safe for concurrent use.
type Manager struct {
	cfg      Config
	store    Store
	runtimes map[string]Runtime
	log      *slog.Logger
	uids     *UIDRegistry

	// bg is the lifetime of background command watchers; cancelled by Close.
	bg     context.Context
	stopBg context.CancelFunc
	wg     sync.WaitGroup

	// createMu serialises the count-then-insert of Create.
	createMu sync.Mutex
	// evicting counts callers' creates that evicted a pool member to make
	// room and have not inserted yet: the pool must not take that room
	// back in between (insertWithinLimit keeps it for them).
	evicting atomic.Int32

	// mu guards agents, locks and watching.
	mu       sync.Mutex
	agents   map[string]*agent.Client // by sandbox ID, for live sandboxes
	locks    map[string]*sync.Mutex   // lifecycle locks by sandbox ID
	watching map[string]bool          // command IDs with a watcher
	oomBase  map[string]int           // OOM kill count of a command's sandbox when it started
	lastUse  map[string]time.Time     // when each sandbox was last used, for idle policies
	busy     map[string]int           // running commands being watched, by sandbox
	building map[string]bool          // template build sandboxes, whose root is writable

	poolWake chan struct{} // asks the pool filler to look now
	poolErrs poolFailures  // pools whose refills fail, waiting to retry
}

// NewManager returns a Manager over store with the given runtimes.
func NewManager(cfg Config, store Store, runtimes ...Runtime) *Manager {
	if cfg.MaxSandboxes <= 0 {
		cfg.MaxSandboxes = DefaultMaxSandboxes
	}
	if cfg.MaxCommands <= 0 {
		cfg.MaxCommands = agent.DefaultMaxCommands
	}
	if cfg.MaxHistory <= 0 {
		cfg.MaxHistory = agent.DefaultMaxHistory
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = agent.DefaultOutputCap
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = agent.DefaultMaxUpload
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultCommandTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	cfg.DefaultTimeout = min(cfg.DefaultTimeout, cfg.MaxTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.UIDRegistry == "" {
		cfg.UIDRegistry = DefaultUIDRegistry
	}
	m := &Manager{
		cfg: cfg, store: store, log: cfg.Logger,
		runtimes: make(map[string]Runtime),
		agents:   make(map[string]*agent.Client),
		locks:    make(map[string]*sync.Mutex),
		watching: make(map[string]bool),
		oomBase:  make(map[string]int),
		lastUse:  make(map[string]time.Time),
		busy:     make(map[string]int),
		poolWake: make(chan struct{}, 1),
		building: make(map[string]bool),
	}
	for _, rt := range runtimes {
		m.runtimes[rt.Name()] = rt
	}
	if m.cfg.DefaultRuntime == "" {
		m.cfg.DefaultRuntime = "process"
	}
	m.uids = NewUIDRegistry(cfg.UIDRegistry, firstSandboxUID, sandboxUIDCount)
	m.bg, m.stopBg = context.WithCancel(context.Background())
	return m
}

// Config returns the manager's effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Runtimes returns the registered runtimes, sorted by name.
func (m *Manager) Runtimes() []Runtime {
	names := slices.Sorted(maps.Keys(m.runtimes))
	out := make([]Runtime, 0, len(names))
	for _, n := range names {
		out = append(out, m.runtimes[n])
	}
	return out
}

// Close stops the background watchers and waits for them, and lets each
// runtime release what it holds beyond its sandboxes. Sandboxes keep
// running: a restarted daemon re-adopts them.
func (m *Manager) Close() {
	m.stopBg()
	m.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, rt := range m.Runtimes() {
		if c, ok := rt.(interface{ Close(context.Context) error }); ok {
			if err := c.Close(ctx); err != nil {
				m.log.ErrorContext(ctx, "closing runtime", "runtime", rt.Name(), "err", err)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.agents {
		c.Close()
	}
}

func (m *Manager) lock(id string) func() {
	m.mu.Lock()
	l, ok := m.locks[id]
	if !ok {
		l = new(sync.Mutex)
		m.locks[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// CreateSpec is what a caller asks for in a new sandbox.
type CreateSpec struct {
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
		return nil, false, errcode.WithReason(errcode.Invalid, "runtime_unknown", "runtime %q is not known; see GET /v1/system", spec.Runtime)
	}
	if err := rt.Available(); err != nil {
		return nil, false, err
	}
	if spec.Name != "" {
		if sb, err := m.store.GetSandboxByName(ctx, spec.Name); err == nil {
			return sb, false, nil
		} else if !errcode.Is(err, errcode.NotFound) {
			return nil, false, err
		}
	}
	tmpl, err := m.readyTemplate(ctx, spec.Template)
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
	if pool := m.poolFor(spec); pool != "" {
		sb, ok, err := m.claim(ctx, pool, spec)
		if errcode.ReasonOf(err) == "name_taken" {
			if existing, gerr := m.store.GetSandboxByName(ctx, spec.Name); gerr == nil {
				return existing, false, nil
			}
		}
		if err != nil || ok {
			return sb, ok, err
		}
	}

	now := time.Now().UTC()
	sb = &Sandbox{
		ID: ident.New("sbx_"), Name: spec.Name, Runtime: rt.Name(), State: apitype.StateStarting,
		Env: spec.Env, Labels: spec.Labels, AgentToken: ident.Token("agt_"), CreatedAt: now, UpdatedAt: now,
	}
	if spec.Lazy {
		sb.State = apitype.StatePending
	}
	sb.Pool = spec.pool
	sb.Template = tmpl.ID
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
	if errcode.ReasonOf(err) == "sandbox_limit" && spec.pool == "" {
		// A caller comes before the pool: the room a pool member gives up
		// is held for this create until it inserts.
		m.evicting.Add(1)
		if m.evictPooled(ctx) {
			err = m.insertWithinLimit(ctx, sb)
		}
		m.evicting.Add(-1)
	}
	if err != nil {
		if errcode.ReasonOf(err) == "name_taken" {
			if existing, gerr := m.store.GetSandboxByName(ctx, spec.Name); gerr == nil {
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

// provision starts a pending (lazy) sandbox. Concurrent first calls start
// it once. A failed start leaves it pending, with nothing behind, for the
// next call to try again.
func (m *Manager) provision(ctx context.Context, id string) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil || sb.State != apitype.StatePending {
		return err // gone, or provisioned by a concurrent call
	}
	rt, ok := m.runtimes[sb.Runtime]
	if !ok {
		return errcode.WithReason(errcode.Unavailable, "runtime_unknown", "runtime %q is gone", sb.Runtime)
	}
	if err := rt.Available(); err != nil {
		return err
	}
	if err := m.start(ctx, sb, rt); err != nil {
		m.teardown(context.WithoutCancel(ctx), sb)
		return err
	}
	m.log.InfoContext(ctx, "lazy sandbox provisioned", "sandbox_id", id)
	return nil
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
		return errcode.WithReason(errcode.ResourceExhausted, "sandbox_limit",
			"%d sandboxes exist, the maximum (--max-sandboxes); delete one first", live)
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
	pid, err := rt.Start(ctx, sb, l, AgentArgs{
		Binary: m.cfg.AgentBinary, Token: sb.AgentToken, OutputCap: m.cfg.OutputCap,
		MaxCommands: m.cfg.MaxCommands, MaxHistory: m.cfg.MaxHistory, MaxUpload: m.cfg.MaxUpload,
		Root: root,
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
		if err := rt.Stop(ctx, sb, l); err != nil {
			m.log.ErrorContext(ctx, "stopping sandbox runtime", "sandbox_id", sb.ID, "err", err)
		}
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		m.log.ErrorContext(ctx, "removing sandbox directory", "sandbox_id", sb.ID, "err", err)
	}
}

// Get returns a sandbox.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	return m.store.GetSandbox(ctx, id)
}

// List returns every sandbox, oldest first.
func (m *Manager) List(ctx context.Context) ([]*Sandbox, error) {
	return m.store.ListSandboxes(ctx)
}

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
		return errcode.WithReason(errcode.Unavailable, "runtime_unavailable",
			"%s; nothing was deleted: make the runtime available (berth doctor), restart berth serve, and delete it again", errcode.MessageOf(err))
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
	return errcode.WithReason(errcode.Unavailable, "runtime_unavailable",
		"sandbox %s runs on %s, which is not available to this daemon (%s)", sb.ID, sb.Runtime, errcode.MessageOf(why))
}

// Agent returns the client of a running sandbox's agent, resuming the
// sandbox first if it is paused.
func (m *Manager) Agent(ctx context.Context, id string) (*agent.Client, error) {
	sb, err := m.awake(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.agentOf(sb)
}

// awake returns a sandbox's record, resuming it first if it is paused:
// any call to a paused sandbox wakes it transparently.
func (m *Manager) awake(ctx context.Context, id string) (*Sandbox, error) {
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	m.touch(id)
	switch sb.State {
	case apitype.StateHibernated:
		if err := m.wake(ctx, id); err != nil {
			return nil, err
		}
	case apitype.StatePaused:
		if err := m.Resume(ctx, id); err != nil && !errcode.Is(err, errcode.Conflict) {
			return nil, err
		}
	case apitype.StatePending:
		if err := m.provision(ctx, id); err != nil {
			return nil, err
		}
	default:
		return sb, nil
	}
	return m.store.GetSandbox(ctx, id)
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
		return errcode.WithReason(errcode.Conflict, "sandbox_not_running", "sandbox %s is %s", id, sb.State)
	}
	m.mu.Lock()
	if c, ok := m.agents[id]; ok {
		c.Close()
		delete(m.agents, id)
	}
	m.mu.Unlock()
	rt, ok := m.runtimes[sb.Runtime]
	if !ok {
		return errcode.WithReason(errcode.Unavailable, "runtime_unknown", "runtime %q is gone", sb.Runtime)
	}
	// Stop ends every process and releases mounts; the files stay.
	if err := rt.Stop(ctx, sb, LayoutFor(m.cfg.DataDir, id)); err != nil {
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

// wake starts a hibernated sandbox again on its kept files.
func (m *Manager) wake(ctx context.Context, id string) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil || sb.State != apitype.StateHibernated {
		return err // gone, or woken by a concurrent call
	}
	rt, ok := m.runtimes[sb.Runtime]
	if !ok {
		return errcode.WithReason(errcode.Unavailable, "runtime_unknown", "runtime %q is gone", sb.Runtime)
	}
	if err := m.start(ctx, sb, rt); err != nil {
		// Release what the failed start took, keep the files.
		_ = rt.Stop(context.WithoutCancel(ctx), sb, LayoutFor(m.cfg.DataDir, id))
		return err
	}
	m.log.InfoContext(ctx, "sandbox woken", "sandbox_id", id)
	return nil
}

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

// pauser is implemented by runtimes that can freeze a sandbox in place.
type pauser interface {
	Pause(ctx context.Context, sb *Sandbox, l Layout) error
	Resume(ctx context.Context, sb *Sandbox, l Layout) error
}

// Pause freezes a running sandbox (its cgroup): processes keep their
// memory and use no CPU. Pausing a paused sandbox is a no-op.
func (m *Manager) Pause(ctx context.Context, id string) error {
	return m.freeze(ctx, id, apitype.StateRunning, apitype.StatePaused, "sandbox_not_running", pauser.Pause)
}

// Resume thaws a paused sandbox. Resuming a running sandbox is a no-op.
func (m *Manager) Resume(ctx context.Context, id string) error {
	return m.freeze(ctx, id, apitype.StatePaused, apitype.StateRunning, "sandbox_not_paused", pauser.Resume)
}

// freeze moves a sandbox from state from to state to through the
// runtime's pause or resume (do); a sandbox already in state to is left
// alone, one in any other state is a conflict with reason notFrom.
func (m *Manager) freeze(ctx context.Context, id, from, to, notFrom string,
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
		return errcode.WithReason(errcode.Conflict, notFrom, "sandbox %s is %s", id, sb.State)
	}
	p, ok := m.runtimes[sb.Runtime].(pauser)
	if !ok {
		return errcode.WithReason(errcode.Unimplemented, "pause_unsupported",
			"the %s runtime cannot pause sandboxes (it has no cgroup to freeze)", sb.Runtime)
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
		return nil, errcode.WithReason(errcode.Conflict, "sandbox_not_running", "%s", msg)
	}
	return c, nil
}

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
	sb, err := m.awake(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	c, err := m.agentOf(sb)
	if err != nil {
		return nil, err
	}
	env := maps.Clone(sb.Env)
	if env == nil {
		env = map[string]string{}
	}
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
	sb, err := m.awake(ctx, sandboxID)
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
	sb, err := m.awake(ctx, sandboxID)
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

// Recover reconciles the store with reality after a (re)start: it finishes
// interrupted deletes, re-adopts live sandboxes whose agent still runs,
// marks the others failed, and moves sandbox directories the store does
// not know into the quarantine (after stopping what runs there): it never
// deletes data it cannot account for.
func (m *Manager) Recover(ctx context.Context) error {
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
				if err := rt.Stop(ctx, &Sandbox{ID: id}, LayoutFor(m.cfg.DataDir, id)); err != nil {
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
		l := LayoutFor(m.cfg.DataDir, e.Name())
		for _, rt := range m.runtimes {
			if err := rt.Stop(ctx, &Sandbox{ID: e.Name()}, l); err != nil {
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
		if err := rt.Stop(ctx, sb, LayoutFor(m.cfg.DataDir, sb.ID)); err != nil {
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

// agentCheckInterval is how often Run checks that live agents still run.
const agentCheckInterval = time.Second

// Run watches live sandboxes until ctx ends: one whose agent died (killed,
// crashed, out of memory) is marked failed with reason agent_lost. It also
// reconciles this daemon's uid leases with its store, at once and then
// periodically (see reconcileUIDs).
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { m.runPools(ctx) })
	wg.Go(func() { m.runUIDReconcile(ctx) })
	t := time.NewTicker(agentCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.checkAgents(ctx)
			m.reapIdle(ctx)
		}
	}
}

func (m *Manager) checkAgents(ctx context.Context) {
	m.mu.Lock()
	ids := slices.Collect(maps.Keys(m.agents))
	m.mu.Unlock()
	for _, id := range ids {
		if err := m.checkAgent(ctx, id); err != nil && ctx.Err() == nil {
			m.log.ErrorContext(ctx, "checking sandbox agent", "sandbox_id", id, "err", err)
		}
	}
}

func (m *Manager) checkAgent(ctx context.Context, id string) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil || sb.State != apitype.StateRunning {
		return nil // deleted or changing: whoever changed it owns it
	}
	rt, ok := m.runtimes[sb.Runtime]
	if !ok || rt.Alive(sb, LayoutFor(m.cfg.DataDir, sb.ID)) {
		return nil
	}
	recs, err := m.store.ListCommands(ctx, sb.ID, m.cfg.MaxHistory+m.cfg.MaxCommands)
	if err != nil {
		return err
	}
	return m.markLost(ctx, sb, recs)
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

// Count returns the number of sandboxes by state.
func (m *Manager) Count(ctx context.Context) (map[string]int, error) {
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, sb := range all {
		if sb.Pool == "" { // pool members are counted by Pools
			out[sb.State]++
		}
	}
	return out, nil
}
