package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Warm pools keep sandboxes started ahead of demand, so that a create
// costs one database update instead of a container start. A pool member is
// an ordinary running sandbox marked with its pool; it is not listed, has
// no idle policy, and counts toward --max-sandboxes like any other (the
// pool never takes the machine past its limits: a create that finds the
// limit reached evicts a member rather than fail). A claim takes the
// oldest member in one statement and hands it the caller's name, env,
// labels and idle policy; env is applied per command, so nothing in the
// sandbox has to change. The pool refills in the background.

// PoolSpec is one warm pool: Size running sandboxes of Template on the
// daemon's default runtime with default resources.
type PoolSpec struct {
	Template string
	Size     int
}

// BaseTemplate names the built-in template: the host's system, read-only.
const BaseTemplate = "base"

// MaxPoolSize bounds one pool.
const MaxPoolSize = 1000

// ParsePoolSpec reads TEMPLATE=N, as --warm-pool takes it.
func ParsePoolSpec(s string) (PoolSpec, error) {
	name, n, ok := strings.Cut(s, "=")
	size, err := strconv.Atoi(n)
	if !ok || name == "" || err != nil || size < 0 || size > MaxPoolSize {
		return PoolSpec{}, fmt.Errorf("warm pool %q must be TEMPLATE=N with N between 0 and %d", s, MaxPoolSize)
	}
	return PoolSpec{Template: name, Size: size}, nil
}

// PoolStatus is a pool's size and fill, for /v1/system and metrics, and
// why it is short when its refills fail.
type PoolStatus struct {
	Template string
	Runtime  string
	Size     int
	Ready    int
	Reason   string
	Message  string
	Failures int
}

// Refill backoff: a pool whose start fails waits before its next try,
// doubling from poolRetryMin to poolRetryMax, so a pool that cannot fill
// (a template not yet built) neither floods the log nor holds up the
// others. A template that becomes ready ends the wait at once.
const (
	poolRetryMin = time.Second
	poolRetryMax = time.Minute
)

// poolFailures are the pools whose last refill failed; the zero value is
// ready to use.
type poolFailures struct {
	mu sync.Mutex
	by map[string]*poolFailure // by pool key
}

type poolFailure struct {
	n               int
	next            time.Time
	reason, message string
}

// waiting reports whether pool is in its backoff at now.
func (f *poolFailures) waiting(pool string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	pf := f.by[pool]
	return pf != nil && now.Before(pf.next)
}

// failed records a refill failure and returns the record.
func (f *poolFailures) failed(pool string, err error, now time.Time) poolFailure {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]*poolFailure{}
	}
	pf := f.by[pool]
	if pf == nil {
		pf = &poolFailure{}
		f.by[pool] = pf
	}
	pf.n++
	wait := poolRetryMax
	if pf.n < 8 {
		wait = min(poolRetryMin<<(pf.n-1), poolRetryMax)
	}
	pf.next = now.Add(wait)
	pf.reason, pf.message = cmp.Or(errcode.ReasonOf(err), "pool_start_failed"), err.Error()
	return *pf
}

// clear forgets pool's failures (every pool's for ""), and reports
// whether there were any.
func (f *poolFailures) clear(pool string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pool == "" {
		n := len(f.by)
		clear(f.by)
		return n > 0
	}
	_, ok := f.by[pool]
	delete(f.by, pool)
	return ok
}

func (f *poolFailures) status(st *PoolStatus, pool string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pf := f.by[pool]; pf != nil {
		st.Reason, st.Message, st.Failures = pf.reason, pf.message, pf.n
	}
}

// retryPools ends every pool's backoff, when what they lacked may have
// come (a template became ready).
func (m *Manager) retryPools() {
	if m.poolErrs.clear("") {
		m.wakePools()
	}
}

// poolKey names a pool in the store: runtime and template.
func poolKey(runtime, template string) string { return runtime + "/" + template }

// InternalPool prefixes the pool of sandboxes Berth runs for itself
// (CreateSpec.Internal); no runtime has this name, so no claim matches.
const InternalPool = "internal/"

// poolFor returns the pool a create could claim from, or "".
func (m *Manager) poolFor(spec CreateSpec) string {
	if len(m.cfg.Pools) == 0 || spec.Lazy || spec.pool != "" || spec.build || spec.Network.Egress() {
		return ""
	}
	rt := spec.Runtime
	if rt == "" {
		rt = m.cfg.DefaultRuntime
	}
	if rt != m.cfg.DefaultRuntime {
		return ""
	}
	if r := spec.Resources; r != (Resources{}) && r.withDefaults() != DefaultResources {
		return ""
	}
	tmpl := spec.Template
	if tmpl == "" {
		tmpl = BaseTemplate
	}
	for _, p := range m.cfg.Pools {
		if p.Template == tmpl && p.Size > 0 {
			return poolKey(rt, tmpl)
		}
	}
	return ""
}

// claim takes a sandbox from pool for spec; ok is false when the pool is
// empty and the caller must start one.
func (m *Manager) claim(ctx context.Context, pool string, spec CreateSpec) (sb *Sandbox, ok bool, err error) {
	c := &Sandbox{Tenant: spec.Tenant, Name: spec.Name, Env: spec.Env, Labels: spec.Labels, Idle: DefaultIdle}
	if rt := m.runtimes[cmp.Or(spec.Runtime, m.cfg.DefaultRuntime)]; rt != nil && rt.Isolated() {
		c.Resources = DefaultResources // what a pool member has: for the quota check
	}
	if spec.Idle != nil {
		c.Idle = *spec.Idle
	}
	m.createMu.Lock()
	if err := m.checkQuota(ctx, nil, spec.Tenant, adding(c, false)); err != nil {
		m.createMu.Unlock()
		return nil, false, err
	}
	sb, err = m.store.ClaimPooled(ctx, pool, c)
	m.createMu.Unlock()
	if errcode.Is(err, errcode.NotFound) {
		m.wakePools()
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	m.touch(sb.ID)
	m.wakePools()
	return sb, true, nil
}

func (m *Manager) wakePools() {
	select {
	case m.poolWake <- struct{}{}:
	default:
	}
}

// Pools reports every pool's fill.
func (m *Manager) Pools(ctx context.Context) ([]PoolStatus, error) {
	if len(m.cfg.Pools) == 0 {
		return nil, nil
	}
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	var out []PoolStatus
	for _, p := range m.cfg.Pools {
		st := PoolStatus{Template: p.Template, Runtime: m.cfg.DefaultRuntime, Size: p.Size}
		key := poolKey(st.Runtime, p.Template)
		m.poolErrs.status(&st, key)
		for _, sb := range all {
			if sb.Pool == key && sb.State == apitype.StateRunning {
				st.Ready++
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// runPools keeps the pools full until ctx ends: one start at a time, so a
// refill never competes with callers for more than one start's worth of
// the machine.
func (m *Manager) runPools(ctx context.Context) {
	if len(m.cfg.Pools) == 0 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for m.fillOne(ctx) {
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.poolWake:
		}
	}
}

// fillOne starts one sandbox for the first pool short of its size and
// not waiting out a failure, and reports whether it did.
func (m *Manager) fillOne(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return false
	}
	live := 0
	members := map[string]int{}
	for _, sb := range all {
		if sb.Live() || sb.State == apitype.StateStopping {
			live++
		}
		if sb.Pool != "" {
			members[sb.Pool]++
		}
	}
	if live >= m.cfg.MaxSandboxes {
		return false // the pool only ever takes spare room
	}
	for _, p := range m.cfg.Pools {
		key := poolKey(m.cfg.DefaultRuntime, p.Template)
		if members[key] >= p.Size || m.poolErrs.waiting(key, time.Now()) {
			continue
		}
		tmpl := p.Template
		if tmpl == BaseTemplate {
			tmpl = ""
		}
		_, _, err := m.Create(ctx, CreateSpec{Template: tmpl, Idle: &IdlePolicy{}, pool: key})
		if ctx.Err() != nil || errcode.Has(err, errcode.SandboxLimit) {
			return false // no spare room after all: a caller took it
		}
		if err != nil {
			pf := m.poolErrs.failed(key, err, time.Now())
			m.log.WarnContext(ctx, "warm pool cannot fill", "template", p.Template, "reason", pf.reason,
				"err", err, "failures", pf.n, "retry_in", time.Until(pf.next).Round(time.Second))
			continue // the other pools still fill
		}
		if m.poolErrs.clear(key) {
			m.log.InfoContext(ctx, "warm pool filling again", "template", p.Template)
		}
		return true
	}
	return false
}

// evictPooled deletes one pool member to make room for a caller's
// sandbox, and reports whether there was one. Internal sandboxes are in
// use (a job's, an isolated browser session's) and never evicted.
func (m *Manager) evictPooled(ctx context.Context) bool { return m.deletePooled(ctx, 1) > 0 }

// deletePooled deletes up to n unclaimed pool members (all for n < 0) and
// returns how many it deleted.
func (m *Manager) deletePooled(ctx context.Context, n int) int {
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return 0
	}
	deleted := 0
	for _, sb := range all {
		if sb.Pool == "" || deleted == n || (n >= 0 && strings.HasPrefix(sb.Pool, InternalPool)) {
			continue
		}
		if err := m.Delete(ctx, sb.ID); err != nil {
			m.log.ErrorContext(ctx, "deleting a pooled sandbox", "sandbox_id", sb.ID, "err", err)
			continue
		}
		deleted++
	}
	return deleted
}

// Internal lists the sandboxes Berth runs for itself whose internal name
// (CreateSpec.Internal) starts with prefix.
func (m *Manager) Internal(ctx context.Context, prefix string) ([]*Sandbox, error) {
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Sandbox
	for _, sb := range all {
		if strings.HasPrefix(sb.Pool, InternalPool+prefix) {
			out = append(out, sb)
		}
	}
	return out, nil
}
