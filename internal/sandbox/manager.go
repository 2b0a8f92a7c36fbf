package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/tenant"
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
	// Network serves sandboxes with network mode egress; nil refuses them.
	Network Network
	// TenantLimits returns a tenant's quotas; nil: no tenant quotas.
	TenantLimits func(ctx context.Context, tenantID string) (tenant.Limits, error)
	// Refuse, when set, vets a create before anything is made (tenant
	// mode refuses runtimes that are not isolated): a non-nil error is the
	// answer.
	Refuse func(spec *CreateSpec, rt Runtime) error
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultMaxSandboxes   = 64
	DefaultCommandTimeout = 10 * time.Minute
	DefaultMaxTimeout     = 24 * time.Hour
)

// Manager owns the sandboxes of one daemon. It is safe for concurrent use.
//
// Its files, by concern: create.go (validation, the limit, a start and its
// rollback), lifecycle.go (ready: the one step by which any call wakes a
// sandbox; bringing a pending or hibernated one up; pause, resume,
// hibernate, delete), exec.go (commands and their watchers, OOM notes),
// idle.go (idle policies), recover.go (start-up reconciliation and the
// liveness check), pool.go, service.go, template.go and uid.go.
//
// Locks, taken in this order and never the other way:
//
//  1. lock(id), one per sandbox: held across a lifecycle change of that
//     sandbox (start, bring up, pause, resume, hibernate, delete), so two
//     changes of one sandbox never interleave. Never held while taking
//     another sandbox's.
//  2. createMu: the count-then-insert of a create (and the uid reconcile,
//     which must not see a uid leased and not yet inserted).
//  3. mu: the in-memory maps below, held only to read or write them,
//     never across I/O or a runtime call.
type Manager struct {
	cfg      Config
	store    Store
	runtimes map[string]Runtime
	log      *slog.Logger
	uids     *UIDRegistry

	// bg is the lifetime of background work (command watchers, template
	// builds, uid releases); cancelled by Stop. The periodic loops Start
	// runs have one of their own, which Stop ends first.
	bg        context.Context
	stopBg    context.CancelFunc
	wg        sync.WaitGroup
	loops     sync.WaitGroup
	stopLoops context.CancelFunc

	// createMu serialises the count-then-insert of Create.
	createMu sync.Mutex
	// evicting counts callers' creates that evicted a pool member to make
	// room and have not inserted yet: the pool must not take that room
	// back in between (insertWithinLimit keeps it for them).
	evicting atomic.Int32

	// mu guards the seven maps that follow.
	mu       sync.Mutex
	agents   map[string]*agent.Client // by sandbox ID, for live sandboxes
	locks    map[string]*sync.Mutex   // lifecycle locks by sandbox ID
	watching map[string]bool          // command IDs with a watcher
	oomBase  map[string]int           // OOM kill count of a command's sandbox when it started
	lastUse  map[string]time.Time     // when each sandbox was last used, for idle policies
	busy     map[string]int           // running commands being watched, by sandbox
	reaping  map[string]chan struct{} // idle actions under way, closed when each ends (touch waits)
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
		reaping:  make(map[string]chan struct{}),
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

// Start reconciles the store with reality (see reconcile), then runs the
// background work until Stop: the agents' liveness check, idle policies,
// warm pools and uid reconciliation. A Manager serves calls before Start
// too, without that work.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.reconcile(ctx); err != nil {
		return fmt.Errorf("recovering sandboxes: %w", err)
	}
	loops, stop := context.WithCancel(m.bg)
	m.stopLoops = stop
	m.loops.Go(func() { m.run(loops) })
	return nil
}

// Stop ends what Start began and waits for it, then deletes the unclaimed
// warm-pool members (nobody's: a stopped daemon leaves none), ends the
// commands' watchers, and lets each runtime release what it holds beyond
// its sandboxes. The callers' sandboxes keep running: the next daemon
// re-adopts them. It is safe without Start.
func (m *Manager) Stop(ctx context.Context) error {
	if m.stopLoops != nil {
		m.stopLoops()
	}
	m.loops.Wait()
	m.deletePooled(ctx, -1)
	m.stopBg()
	m.wg.Wait()
	var errs []error
	for _, rt := range m.Runtimes() {
		if c, ok := rt.(interface{ Close(context.Context) error }); ok {
			if err := c.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing runtime %s: %w", rt.Name(), err))
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.agents {
		c.Close()
	}
	return errors.Join(errs...)
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

// Get returns a sandbox.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	return m.store.GetSandbox(ctx, id)
}

// List returns every sandbox, oldest first.
func (m *Manager) List(ctx context.Context) ([]*Sandbox, error) {
	return m.store.ListSandboxes(ctx)
}

// agentCheckInterval is how often run checks that live agents still run.
const agentCheckInterval = time.Second

// run watches live sandboxes until ctx ends: one whose agent died (killed,
// crashed, out of memory) is marked failed with reason agent_lost. It
// applies idle policies, keeps the warm pools filled and reconciles this
// daemon's uid leases with its store, at once and then periodically (see
// reconcileUIDs).
func (m *Manager) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { m.runPools(ctx) })
	wg.Go(func() { m.runUIDReconcile(ctx) })
	t := time.NewTicker(agentCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
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
