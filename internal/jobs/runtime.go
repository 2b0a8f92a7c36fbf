package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/netpolicy"
	"github.com/berthdev/berth/internal/sandbox"
)

// Profile is a runtime profile: what a job's sandbox gets. The defaults
// are the seed's: 2 CPUs, 4 GiB of memory, 1 GiB of /dev/shm, 4 GiB of
// temporary storage (the workspace: a tmpfs, since a runtime is used once;
// its pages count in the memory), a 300 s task timeout and a 360 s hard
// deadline. Every job sandbox is a container: non-root, read-only
// root, no capabilities, no new privileges, seccomp, no network.
type Profile struct {
	Name         string
	Resources    sandbox.Resources
	Timeout      time.Duration
	HardDeadline time.Duration
}

// DefaultProfile returns the profile name with the seed's defaults.
func DefaultProfile(name string) Profile {
	return Profile{
		Name:         name,
		Resources:    sandbox.Resources{CPUs: 2, MemoryMB: 4096, Pids: 1024, DiskMB: 4096, ShmMB: 1024, Scratch: true},
		Timeout:      300 * time.Second,
		HardDeadline: 360 * time.Second,
	}
}

// MinMemoryMB is the least memory a job profile may be given: Chromium
// and LibreOffice do not start in less.
const MinMemoryMB int64 = 512

// WithMemory returns p with mb MiB of memory, and /dev/shm (which counts
// in it) a quarter of that, at most the default's 1 GiB.
func (p Profile) WithMemory(mb int64) Profile {
	p.Resources.MemoryMB = mb
	p.Resources.ShmMB = min(mb/4, DefaultProfile(p.Name).Resources.ShmMB)
	return p
}

// runtime is a job sandbox with its runner up. By default it serves one
// job and is deleted; with Config.Reuse above 1 it serves up to that many
// jobs of one tenant, one after another, each in a fresh browser context
// with the inputs and outputs of the one before removed.
type runtime struct {
	sandboxID string
	agent     *agent.Client
	profile   string

	tenant string    // the tenant of its first job: the only one it serves
	jobs   int       // jobs it has served
	idle   time.Time // when it was given back
}

// runtimePool keeps pre-started runtimes of one profile, so a job gets a
// fresh sandbox with Chromium already up without waiting for one.
type runtimePool struct {
	s       *Service
	profile string
	size    int
	ready   chan *runtime
	kick    chan struct{}

	mu       sync.Mutex
	failures int                   // consecutive failed starts
	lastErr  string                // the last start's error
	used     map[string][]*runtime // given back after a job, by tenant (Reuse > 1)
}

func newRuntimePool(s *Service, profile string, size int) *runtimePool {
	return &runtimePool{s: s, profile: profile, size: size, ready: make(chan *runtime, max(size, 1)),
		kick: make(chan struct{}, 1)}
}

// take returns a runtime for a job of tenant: one it used before (when
// runtimes are reused), a fresh one from the pool, or one started now.
func (p *runtimePool) take(ctx context.Context, tenant string) (*runtime, error) {
	p.mu.Lock()
	if list := p.used[tenant]; len(list) > 0 {
		rt := list[len(list)-1]
		p.used[tenant] = list[:len(list)-1]
		p.mu.Unlock()
		return rt, nil
	}
	p.mu.Unlock()
	// A pooled runtime's program (Chromium, a warm LibreOffice) may have
	// died while it waited: its runner's health says so, and it is
	// discarded for the next one, or a new one.
	for {
		select {
		case rt := <-p.ready:
			p.wake()
			h, err := runnerHealth(ctx, rt.agent)
			if err == nil && h.RunnerAPI == jobspec.RunnerAPI {
				// Started in the background; now a job's.
				if err := p.s.mgr.SetCPUShares(ctx, rt.sandboxID, defaultCPUShares); err != nil {
					p.s.log.Warn("raising a job runtime's CPU weight", "sandbox_id", rt.sandboxID, "err", err)
				}
				return rt, nil
			}
			p.s.log.Warn("a pooled job runtime is unhealthy; discarding it", "profile", p.profile, "sandbox_id", rt.sandboxID, "err", err)
			p.s.discard(rt)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		default:
		}
		break
	}
	p.wake()
	return p.s.startRuntime(ctx, p.profile, false)
}

// CPU weights of job runtimes (cgroup v1 units). A runtime the pool starts
// ahead gets a tenth of a job's weight until a job takes it: when the CPUs
// are busy, starting runtimes for later jobs does not slow the jobs that
// have one, and when they are idle it costs nothing.
const (
	poolCPUShares    = 102
	defaultCPUShares = 1024
)

func (p *runtimePool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// giveBack ends a runtime's job: it is deleted, or, when runtimes are
// reused and this one may serve more, emptied and kept for its tenant.
// reusable is false when the job's failure may have left it unsound.
func (p *runtimePool) giveBack(ctx context.Context, rt *runtime, tenant string, reusable bool) {
	rt.jobs++
	if rt.tenant == "" {
		rt.tenant = tenant
	}
	// A web runtime is never reused: a page from the network ran in it.
	if !reusable || rt.jobs >= p.s.cfg.Reuse || rt.tenant != tenant || ctx.Err() != nil || p.profile == jobspec.ProfileWeb {
		p.s.discard(rt)
		return
	}
	for _, dir := range []string{"in", "out"} {
		if err := rt.agent.RemoveAll(ctx, dir); err != nil && !errcode.Is(err, errcode.NotFound) {
			p.s.discard(rt)
			return
		}
	}
	if h, err := runnerHealth(ctx, rt.agent); err != nil || h.RunnerAPI != jobspec.RunnerAPI {
		p.s.discard(rt)
		return
	}
	rt.idle = time.Now()
	p.mu.Lock()
	if p.used == nil {
		p.used = map[string][]*runtime{}
	}
	p.used[tenant] = append(p.used[tenant], rt)
	p.mu.Unlock()
}

// expire deletes runtimes given back longer than ReuseIdle ago (all of
// them when all is set).
func (p *runtimePool) expire(all bool) {
	p.mu.Lock()
	var gone []*runtime
	for tenant, list := range p.used {
		kept := list[:0]
		for _, rt := range list {
			if all || time.Since(rt.idle) > ReuseIdle {
				gone = append(gone, rt)
			} else {
				kept = append(kept, rt)
			}
		}
		if len(kept) == 0 {
			delete(p.used, tenant)
		} else {
			p.used[tenant] = kept
		}
	}
	p.mu.Unlock()
	for _, rt := range gone {
		p.s.discard(rt)
	}
}

// ReuseIdle is how long a reused runtime waits for its tenant's next job.
var ReuseIdle = 30 * time.Second

// health is why the pool's runtimes do not start, or "".
func (p *runtimePool) health() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failures >= 3 {
		return p.lastErr
	}
	return ""
}

func (p *runtimePool) note(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.failures, p.lastErr = 0, ""
		return
	}
	p.failures++
	p.lastErr = err.Error()
}

// run keeps the pool full until ctx ends, then deletes what it holds.
func (p *runtimePool) run(ctx context.Context) {
	defer func() {
		p.expire(true)
		for {
			select {
			case rt := <-p.ready:
				p.s.discard(rt)
			default:
				return
			}
		}
	}()
	backoff := time.Second
	for {
		if len(p.ready) < p.size {
			rt, err := p.s.startRuntime(ctx, p.profile, true)
			if ctx.Err() != nil {
				if rt != nil {
					p.s.discard(rt)
				}
				return
			}
			p.note(err)
			if err != nil {
				p.s.log.Warn("starting a job runtime failed", "profile", p.profile, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Minute)
				continue
			}
			backoff = time.Second
			p.ready <- rt
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-time.After(ReuseIdle / 2):
			p.expire(false)
		}
	}
}

// startRuntime creates a job sandbox and starts its runner, returning
// once the runner answers its health check. A runtime started ahead, for
// the pool, runs at a low CPU weight until a job takes it.
func (s *Service) startRuntime(ctx context.Context, profile string, ahead bool) (*runtime, error) {
	prof := s.profiles[profile]
	start := time.Now()
	spec := sandbox.CreateSpec{
		Runtime: s.cfg.Runtime, Internal: "job-" + profile, Resources: prof.Resources, Idle: &sandbox.IdlePolicy{},
	}
	if profile == jobspec.ProfileWeb {
		// The URL actions' page comes from the network, through the
		// daemon's egress policy: public addresses on the web's ports,
		// never the host, a private network or a metadata service.
		spec.Network = netpolicy.Policy{Mode: netpolicy.ModeEgress}
	}
	sb, _, err := s.mgr.Create(ctx, spec)
	if err != nil {
		return nil, errcode.Wrap(errcode.Unavailable, err, "starting a job sandbox failed")
	}
	rt := &runtime{sandboxID: sb.ID, profile: profile}
	s.mu.Lock()
	s.held[sb.ID] = true
	s.mu.Unlock()
	fail := func(err error) (*runtime, error) {
		s.discard(rt)
		return nil, err
	}
	if ahead {
		if err := s.mgr.SetCPUShares(ctx, sb.ID, poolCPUShares); err != nil {
			s.log.Warn("lowering a pooled job runtime's CPU weight", "sandbox_id", sb.ID, "err", err)
		}
	}
	c, err := s.mgr.Agent(ctx, sb.ID)
	if err != nil {
		return fail(err)
	}
	rt.agent = c
	argv := []string{sandbox.BinaryInSandbox, "runner", "--profile", profile,
		"--listen", "127.0.0.1:" + strconv.Itoa(jobspec.RunnerPort), "--in", jobspec.InputDir, "--out", jobspec.OutputDir}
	if s.cfg.Reuse > 1 && profile != jobspec.ProfileWeb {
		argv = append(argv, "--jobs", strconv.Itoa(s.cfg.Reuse))
	}
	if s.cfg.Chromium != "" {
		argv = append(argv, "--chromium", s.cfg.Chromium)
	}
	if s.cfg.Soffice != "" {
		argv = append(argv, "--soffice", s.cfg.Soffice)
	}
	if _, _, err := c.PutService(ctx, apitype.ServiceSpec{Name: "runner", Argv: argv,
		Restart: apitype.RestartPolicy{Policy: "never"}}); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Once the runner listens, one request waits for it to be ready.
		h, err := runnerHealthWait(ctx, c, max(time.Until(deadline), 0))
		if err == nil && h.RunnerAPI == jobspec.RunnerAPI {
			cpu, _ := s.mgr.CPUUsage(ctx, sb.ID)
			if cpu > 0 {
				s.metrics.startCPU.WithLabelValues(profile).Observe(cpu.Seconds())
			}
			s.log.Debug("job runtime ready", "profile", profile, "sandbox_id", sb.ID,
				"ms", time.Since(start).Milliseconds(), "cpu_ms", cpu.Milliseconds())
			return rt, nil
		}
		if err == nil {
			return fail(fmt.Errorf("the runner speaks API %d, not %d", h.RunnerAPI, jobspec.RunnerAPI))
		}
		if svc, serr := c.Service(ctx, "runner"); serr == nil && svc.Status != "running" && svc.Status != "starting" {
			logs, _ := c.ServiceLogs(ctx, "runner", nil)
			return fail(fmt.Errorf("the runner exited (%s): %s", svc.Status, tail(logs.Data, 400)))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fail(fmt.Errorf("the runner was not ready in 60 s: %v", err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// discard deletes a runtime's sandbox, in the background: no caller waits
// for a teardown.
func (s *Service) discard(rt *runtime) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cpu, ok := s.mgr.CPUUsage(ctx, rt.sandboxID); ok && cpu > 0 {
			s.metrics.runtimeCPU.WithLabelValues(rt.profile).Observe(cpu.Seconds())
		}
		if err := s.mgr.Delete(ctx, rt.sandboxID); err != nil && !errcode.Is(err, errcode.NotFound) {
			s.log.Error("deleting a job sandbox", "sandbox_id", rt.sandboxID, "err", err)
		}
		s.mu.Lock()
		delete(s.held, rt.sandboxID)
		s.mu.Unlock()
	}()
}

// runnerRequest sends a request to the runner through the agent's port
// proxy and returns the response whatever its status.
func runnerRequest(ctx context.Context, c *agent.Client, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	return c.Port(ctx, method, jobspec.RunnerPort, path, "application/json", rd)
}

func runnerHealth(ctx context.Context, c *agent.Client) (jobspec.Health, error) {
	return runnerHealthWait(ctx, c, 0)
}

// runnerHealthWait asks the runner's health; a runner still starting
// answers when it is ready or after wait.
func runnerHealthWait(ctx context.Context, c *agent.Client, wait time.Duration) (jobspec.Health, error) {
	var h jobspec.Health
	ctx, cancel := context.WithTimeout(ctx, wait+2*time.Second)
	defer cancel()
	p := "/healthz"
	if wait > 0 {
		p += "?wait=" + strconv.FormatInt(wait.Milliseconds(), 10)
	}
	resp, err := runnerRequest(ctx, c, http.MethodGet, p, nil)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("runner health: %s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}
