package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
)

// Network serves the outbound network of isolated sandboxes whose policy
// has mode egress (package egress). Without one, such sandboxes are
// refused.
type Network interface {
	// Limits are the daemon-wide defaults and limits policies are held to.
	Limits() netpolicy.Limits
	// Up serves sb's egress, making (or re-adopting) its network namespace,
	// and says what the runtime must give the sandbox.
	Up(ctx context.Context, sb *Sandbox, l Layout) (*NetworkSetup, error)
	// Down stops serving sandbox id's egress and removes its namespace.
	// It is idempotent and safe for a sandbox that never had egress.
	Down(id string, l Layout) error
	// Update applies sb's policy, and its secrets, to its served egress at
	// once; a sandbox not served now takes them at its next Up.
	Update(ctx context.Context, sb *Sandbox) error
	// EditSecrets replaces sandbox sb's bound secrets with what edit makes
	// of them (values included), validated, stored sealed and applied
	// live; nothing changes when the result is invalid.
	EditSecrets(ctx context.Context, sb *Sandbox, edit func([]apitype.Secret) []apitype.Secret) error
	// Secrets lists sb's bound secrets without their values.
	Secrets(ctx context.Context, sb *Sandbox) ([]apitype.Secret, error)
	// Log returns the newest entries of sandbox id's connection log.
	Log(id string, limit int) []apitype.NetworkLogEntry
}

// NetworkSetup is what a runtime gives an egress sandbox.
type NetworkSetup struct {
	// NetNS is the network namespace to run the sandbox in.
	NetNS string
	// Files are bind-mounted read-only into the sandbox: path inside to
	// host path (resolv.conf, the CA bundle that trusts Berth's
	// per-sandbox CA).
	Files map[string]string
	// Env is added to every command's environment (CA bundle variables).
	Env map[string]string
}

// validNetwork checks a policy for a sandbox on runtime rt.
func (m *Manager) validNetwork(p netpolicy.Policy, rt Runtime) error {
	if !p.Egress() {
		if problems := p.Validate(netpolicy.Limits{}); len(problems) > 0 {
			return errcode.InvalidFields(problems)
		}
		return nil
	}
	if !rt.Isolated() {
		return errcode.InvalidFields(map[string]string{"network.mode": "egress needs an isolated runtime (container or gvisor): the process runtime runs on the host's own network"})
	}
	if m.cfg.Network == nil {
		return errcode.NetworkUnavailable.New("this daemon serves no egress network (it was started with --egress=false, or not as root on Linux)")
	}
	if problems := p.Validate(m.cfg.Network.Limits()); len(problems) > 0 {
		return errcode.InvalidFields(problems)
	}
	return nil
}

// networkUp serves an egress sandbox's network before its runtime starts.
func (m *Manager) networkUp(ctx context.Context, sb *Sandbox, l Layout) (*NetworkSetup, error) {
	if !sb.Network.Egress() {
		return nil, nil
	}
	if m.cfg.Network == nil {
		return nil, errcode.NetworkUnavailable.New("sandbox %s has egress, which this daemon does not serve", sb.ID)
	}
	setup, err := m.cfg.Network.Up(ctx, sb, l)
	if err != nil {
		return nil, errcode.NetworkUnavailable.Wrap(err, "serving the egress network of sandbox %s failed", sb.ID)
	}
	return setup, nil
}

// stopRuntime stops sb's runtime, then its network.
func (m *Manager) stopRuntime(ctx context.Context, rt Runtime, sb *Sandbox) error {
	l := LayoutFor(m.cfg.DataDir, sb.ID)
	err := rt.Stop(ctx, sb, l)
	if m.cfg.Network != nil {
		if nerr := m.cfg.Network.Down(sb.ID, l); nerr != nil && err == nil {
			err = nerr
		}
	}
	return err
}

// SetNetwork replaces sandbox id's network policy. A running sandbox's
// new connections obey at once and its open connections the new policy
// refuses are closed; the policy is stored, so a paused, hibernated or
// restarted sandbox keeps it. The mode cannot change after create.
func (m *Manager) SetNetwork(ctx context.Context, id string, p netpolicy.Policy) (*Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	p = p.Normalize()
	if mode := sb.Network.Normalize().Mode; p.Mode != mode {
		return nil, errcode.InvalidFields(map[string]string{"network.mode": fmt.Sprintf("is %s for this sandbox and cannot change after create", mode)})
	}
	rt, err := m.runtimeOf(sb)
	if err != nil {
		return nil, err
	}
	if err := m.validNetwork(p, rt); err != nil {
		return nil, err
	}
	if err := m.store.SetSandboxNetwork(ctx, id, p); err != nil {
		return nil, err
	}
	sb.Network = p
	if p.Egress() {
		if err := m.cfg.Network.Update(ctx, sb); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// SetSecrets replaces the secrets bound to sandbox id's egress.
func (m *Manager) SetSecrets(ctx context.Context, id string, secrets []apitype.Secret) error {
	return m.editSecrets(ctx, id, func([]apitype.Secret) []apitype.Secret { return secrets })
}

// PutSecret binds one secret, replacing the one of the same host and
// header.
func (m *Manager) PutSecret(ctx context.Context, id string, sec apitype.Secret) error {
	return m.editSecrets(ctx, id, func(list []apitype.Secret) []apitype.Secret {
		// First, so that a problem with it is reported as secrets[0].
		out := slices.DeleteFunc(list, func(s apitype.Secret) bool { return sameSecret(s, sec) })
		return append([]apitype.Secret{sec}, out...)
	})
}

// DeleteSecret removes the secrets bound to host (with header, only that
// one). Removing one that is not there is not an error.
func (m *Manager) DeleteSecret(ctx context.Context, id, host, header string) error {
	return m.editSecrets(ctx, id, func(list []apitype.Secret) []apitype.Secret {
		return slices.DeleteFunc(list, func(s apitype.Secret) bool {
			return strings.EqualFold(strings.TrimSuffix(s.Host, "."), strings.TrimSuffix(host, ".")) &&
				(header == "" || strings.EqualFold(s.Header, header))
		})
	})
}

func sameSecret(a, b apitype.Secret) bool {
	return strings.EqualFold(strings.TrimSuffix(a.Host, "."), strings.TrimSuffix(b.Host, ".")) && strings.EqualFold(a.Header, b.Header)
}

func (m *Manager) editSecrets(ctx context.Context, id string, edit func([]apitype.Secret) []apitype.Secret) error {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.egressSandbox(ctx, id)
	if err != nil {
		return err
	}
	return m.cfg.Network.EditSecrets(ctx, sb, edit)
}

// Secrets lists the secrets bound to sandbox id's egress, without values.
func (m *Manager) Secrets(ctx context.Context, id string) ([]apitype.Secret, error) {
	sb, err := m.egressSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.cfg.Network.Secrets(ctx, sb)
}

// NetworkLog returns the newest entries of sandbox id's connection log
// (empty while its egress is not served: the log is kept in memory).
func (m *Manager) NetworkLog(ctx context.Context, id string, limit int) ([]apitype.NetworkLogEntry, error) {
	sb, err := m.egressSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.cfg.Network.Log(sb.ID, limit), nil
}

func (m *Manager) egressSandbox(ctx context.Context, id string) (*Sandbox, error) {
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sb.Network.Egress() {
		return nil, errcode.NetworkNone.New("sandbox %s has network mode none: it reaches nothing, so it has no secrets or connection log (create it with network mode egress)", id)
	}
	if m.cfg.Network == nil {
		return nil, errcode.NetworkUnavailable.New("this daemon serves no egress network")
	}
	return sb, nil
}

// EgressCABundle is the CA bundle an egress sandbox sees: the host's roots
// and the sandbox's own egress CA (package egress mounts it).
const EgressCABundle = "/etc/ssl/certs/ca-certificates.crt"

// sandboxEnv is the environment a sandbox's processes start from: for an
// egress sandbox, the variables that make every common TLS client trust
// its CA bundle; then the sandbox's own (its template's and its caller's).
func sandboxEnv(sb *Sandbox) map[string]string {
	env := map[string]string{}
	if sb.Network.Egress() {
		for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
			env[k] = EgressCABundle
		}
	}
	maps.Copy(env, sb.Env)
	return env
}
