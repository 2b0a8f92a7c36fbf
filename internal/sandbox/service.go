package sandbox

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// ServiceIntent is what a sandbox should run: the store keeps it, the agent
// supervises it. A stopped intent is kept (its spec, its logs while the
// sandbox lives) but not started on wake.
type ServiceIntent struct {
	SandboxID string
	Spec      apitype.ServiceSpec
	Stopped   bool
}

// PutService starts (or replaces) a service in a sandbox, waking the
// sandbox if needed. The intent is stored first, so a daemon that dies
// before the agent answers starts the service at the next adoption; if the
// agent refuses, the previous intent is put back. An identical spec of a
// running service changes nothing and answers created false.
func (m *Manager) PutService(ctx context.Context, sandboxID string, spec apitype.ServiceSpec) (apitype.Service, bool, error) {
	p := spec.Valid()
	if p == nil {
		p = map[string]string{}
	}
	ValidateEnv(spec.Env, p, "env")
	if len(p) > 0 {
		return apitype.Service{}, false, errcode.InvalidFields(p)
	}
	c, err := m.Agent(ctx, sandboxID)
	if err != nil {
		return apitype.Service{}, false, err
	}
	unlock := m.lock(sandboxID)
	defer unlock()
	prev, err := m.serviceIntent(ctx, sandboxID, spec.Name)
	if err != nil {
		return apitype.Service{}, false, err
	}
	if prev == nil {
		intents, err := m.store.ListServices(ctx, sandboxID)
		if err != nil {
			return apitype.Service{}, false, err
		}
		if len(intents) >= apitype.MaxServices {
			return apitype.Service{}, false, errcode.TooManyServices.New("sandbox %s has %d services, the maximum; delete one first", sandboxID, len(intents))
		}
	}
	intent := &ServiceIntent{SandboxID: sandboxID, Spec: spec}
	if err := m.store.PutService(ctx, intent); err != nil {
		return apitype.Service{}, false, err
	}
	svc, created, err := c.PutService(ctx, m.agentSpec(ctx, sandboxID, spec))
	if err != nil {
		bg := context.WithoutCancel(ctx)
		if prev != nil {
			err2 := m.store.PutService(bg, prev)
			m.logError(ctx, err2, "restoring a service intent", sandboxID)
		} else {
			m.logError(ctx, m.store.DeleteService(bg, sandboxID, spec.Name), "removing a service intent", sandboxID)
		}
		return apitype.Service{}, false, err
	}
	svc.SandboxID, svc.Spec = sandboxID, spec
	return svc, created, nil
}

// agentSpec is the spec as the agent runs it: the sandbox's environment
// (its own and its template's), then the service's. Callers see the spec
// they gave: sandbox environment values are never echoed back.
func (m *Manager) agentSpec(ctx context.Context, sandboxID string, spec apitype.ServiceSpec) apitype.ServiceSpec {
	sb, err := m.store.GetSandbox(ctx, sandboxID)
	if err != nil {
		return spec
	}
	env := sandboxEnv(sb)
	maps.Copy(env, spec.Env)
	spec.Env = env
	return spec
}

// Services lists a sandbox's services with their live state.
func (m *Manager) Services(ctx context.Context, sandboxID string) ([]apitype.Service, error) {
	c, err := m.Agent(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	list, err := c.Services(ctx)
	if err != nil {
		return nil, err
	}
	intents, err := m.store.ListServices(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	specs := map[string]apitype.ServiceSpec{}
	for _, in := range intents {
		specs[in.Spec.Name] = in.Spec
	}
	for i := range list {
		list[i].SandboxID = sandboxID
		if sp, ok := specs[list[i].Name]; ok {
			list[i].Spec = sp
		}
		known[list[i].Name] = true
	}
	// A service stopped before a wake has no process to show, and the new
	// agent has never heard of it; its intent is still there.
	for _, in := range intents {
		if !known[in.Spec.Name] {
			list = append(list, stoppedService(in))
		}
	}
	slices.SortFunc(list, func(a, b apitype.Service) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

func stoppedService(in *ServiceIntent) apitype.Service {
	return apitype.Service{Name: in.Spec.Name, SandboxID: in.SandboxID, Spec: in.Spec, Status: apitype.ServiceStopped}
}

// Service returns one service.
func (m *Manager) Service(ctx context.Context, sandboxID, name string) (apitype.Service, error) {
	c, err := m.Agent(ctx, sandboxID)
	if err != nil {
		return apitype.Service{}, err
	}
	svc, err := c.Service(ctx, name)
	in, ierr := m.serviceIntent(ctx, sandboxID, name)
	if ierr != nil {
		return apitype.Service{}, ierr
	}
	if errcode.Is(err, errcode.NotFound) && in != nil {
		return stoppedService(in), nil
	}
	if in != nil {
		svc.Spec = in.Spec
	}
	svc.SandboxID = sandboxID
	return svc, err
}

// StopService stops a service and records that it should stay stopped,
// also across wakes; StartService undoes that.
func (m *Manager) StopService(ctx context.Context, sandboxID, name string) (apitype.Service, error) {
	return m.setServiceStopped(ctx, sandboxID, name, true, (*agent.Client).StopService)
}

// StartService starts a stopped, exited or failed service again.
func (m *Manager) StartService(ctx context.Context, sandboxID, name string) (apitype.Service, error) {
	return m.setServiceStopped(ctx, sandboxID, name, false, (*agent.Client).StartService)
}

func (m *Manager) setServiceStopped(ctx context.Context, sandboxID, name string, stopped bool,
	do func(*agent.Client, context.Context, string) (apitype.Service, error)) (apitype.Service, error) {
	c, err := m.Agent(ctx, sandboxID)
	if err != nil {
		return apitype.Service{}, err
	}
	unlock := m.lock(sandboxID)
	defer unlock()
	intent, err := m.serviceIntent(ctx, sandboxID, name)
	if err != nil {
		return apitype.Service{}, err
	}
	if intent == nil {
		return apitype.Service{}, errcode.ServiceNotFound.New("service %q not found", name)
	}
	svc, err := do(c, ctx, name)
	if errcode.Is(err, errcode.NotFound) {
		// Stopped before the sandbox woke: this agent has never run it.
		if stopped {
			svc, err = stoppedService(intent), nil
		} else {
			svc, _, err = c.PutService(ctx, m.agentSpec(ctx, sandboxID, intent.Spec))
		}
	}
	if err != nil {
		return apitype.Service{}, err
	}
	if intent.Stopped != stopped {
		intent.Stopped = stopped
		if err := m.store.PutService(ctx, intent); err != nil {
			return apitype.Service{}, err
		}
	}
	svc.SandboxID, svc.Spec = sandboxID, intent.Spec
	return svc, nil
}

// DeleteService stops a service and forgets it.
func (m *Manager) DeleteService(ctx context.Context, sandboxID, name string) error {
	c, err := m.Agent(ctx, sandboxID)
	if err != nil {
		return err
	}
	unlock := m.lock(sandboxID)
	defer unlock()
	intent, err := m.serviceIntent(ctx, sandboxID, name)
	if err != nil {
		return err
	}
	if err := c.DeleteService(ctx, name); err != nil && !(intent != nil && errcode.Is(err, errcode.NotFound)) {
		return err
	}
	return m.store.DeleteService(ctx, sandboxID, name)
}

func (m *Manager) serviceIntent(ctx context.Context, sandboxID, name string) (*ServiceIntent, error) {
	intents, err := m.store.ListServices(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	for _, s := range intents {
		if s.Spec.Name == name {
			return s, nil
		}
	}
	return nil, nil
}

// restoreServices hands a sandbox's stored intents to its agent: after a
// start or wake (a new agent, nothing running) and after adoption (only the
// intents the agent never received, the daemon having died). A service that
// fails to start is logged and shows as failed in its status; it does not
// fail the sandbox.
func (m *Manager) restoreServices(ctx context.Context, sandboxID string, c *agent.Client, adopted bool) {
	intents, err := m.store.ListServices(ctx, sandboxID)
	if err != nil || len(intents) == 0 {
		m.logError(ctx, err, "listing service intents", sandboxID)
		return
	}
	// An adopted agent keeps its services as they are (an exited one stays
	// exited); it only gets what it never heard of.
	known := map[string]bool{}
	if adopted {
		live, err := c.Services(ctx)
		if err != nil {
			m.logError(ctx, err, "listing an adopted agent's services", sandboxID)
			return
		}
		for _, s := range live {
			known[s.Name] = true
		}
	}
	for _, s := range intents {
		if s.Stopped || known[s.Spec.Name] {
			continue
		}
		if _, _, err := c.PutService(ctx, m.agentSpec(ctx, sandboxID, s.Spec)); err != nil {
			m.log.ErrorContext(ctx, "restoring a service", "sandbox_id", sandboxID, "service", s.Spec.Name, "err", err)
		}
	}
}

func (m *Manager) logError(ctx context.Context, err error, what, sandboxID string) {
	if err != nil {
		m.log.ErrorContext(ctx, what, "sandbox_id", sandboxID, "err", err)
	}
}
