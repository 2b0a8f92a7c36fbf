package sandbox

import (
	"context"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/netpolicy"
)

// Sandbox is a sandbox's durable record.
type Sandbox struct {
	ID string
	// Tenant is the ID of the owning tenant; "" while in a warm pool and
	// for Berth's internal sandboxes.
	Tenant  string
	Name    string // optional; unique within its tenant when set
	Runtime string
	State   string // one of the apitype.State* values
	Reason  string // why it failed, when it did
	Env     map[string]string
	Labels  map[string]string
	// Resources are the limits of isolated runtimes (zero for process).
	Resources Resources
	// Idle is what happens to the sandbox when nobody uses it.
	Idle IdlePolicy
	// UID is the unprivileged host uid an isolated sandbox runs as, unique
	// among live sandboxes; 0 for the process runtime.
	UID int
	// Template is the ID of the template the sandbox's root is made from;
	// "" for the built-in base template.
	Template string
	// Pool, while set, is the warm pool the sandbox waits in, unclaimed.
	// A claim clears it and gives the sandbox its caller's name, env,
	// labels and idle policy.
	Pool string
	// Network is the sandbox's network policy (mode none: loopback only).
	Network netpolicy.Policy

	// AgentPID is the agent's host PID (process runtime) or 0.
	AgentPID int
	// AgentToken authenticates the daemon to the sandbox's agent. It is a
	// secret and never leaves the daemon.
	AgentToken string

	CreatedAt time.Time
	UpdatedAt time.Time
}

// Resources bound an isolated sandbox.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	DiskMB   int64   `json:"disk_mb,omitempty"`
	// ShmMB sizes /dev/shm (a tmpfs: it counts against memory).
	ShmMB int64 `json:"shm_mb,omitempty"`
	// Scratch puts the workspace in memory: a tmpfs of DiskMB whose pages
	// count in the sandbox's memory, lost when the sandbox stops. For
	// sandboxes Berth uses once and deletes (job runtimes): no disk image
	// to make, loop-mount and detach for each. Never set from the API, and
	// such a sandbox does not hibernate.
	Scratch bool `json:"scratch,omitempty"`
}

// API returns r as the API shows it (Scratch is Berth's own).
func (r Resources) API() apitype.Resources {
	return apitype.Resources{CPUs: r.CPUs, MemoryMB: r.MemoryMB, Pids: r.Pids, DiskMB: r.DiskMB, ShmMB: r.ShmMB}
}

// ResourcesFrom returns the resources an API request asks for.
func ResourcesFrom(a apitype.Resources) Resources {
	return Resources{CPUs: a.CPUs, MemoryMB: a.MemoryMB, Pids: a.Pids, DiskMB: a.DiskMB, ShmMB: a.ShmMB}
}

// IdlePolicy says how long a sandbox may go unused (no API call touching
// it, no command running) before it is paused (isolated runtimes only),
// hibernated and deleted. Zero disables a step. Durations in milliseconds.
type IdlePolicy struct {
	PauseAfterMS     int64 `json:"pause_after_ms,omitempty"`
	HibernateAfterMS int64 `json:"hibernate_after_ms,omitempty"`
	DeleteAfterMS    int64 `json:"delete_after_ms,omitempty"`
}

// DefaultIdle is the idle policy of sandboxes that state none: pause after
// 10 minutes, hibernate after an hour, never delete.
var DefaultIdle = IdlePolicy{PauseAfterMS: 10 * 60 * 1000, HibernateAfterMS: 60 * 60 * 1000}

// BinaryInSandbox is where isolated runtimes mount the berth binary (the
// agent) inside every sandbox; job sandboxes run it as the job runner.
const BinaryInSandbox = "/.berth/berth"

// Sandbox defaults and maxima for isolated runtimes.
var (
	DefaultResources = Resources{CPUs: 1, MemoryMB: 1024, Pids: 512, DiskMB: 2048, ShmMB: 256}
	MaxResources     = Resources{CPUs: 64, MemoryMB: 64 << 10, Pids: 32768, DiskMB: 1 << 20, ShmMB: 16 << 10}
)

// Live reports whether the sandbox should have running compute.
func (s *Sandbox) Live() bool {
	return s.State == apitype.StateRunning || s.State == apitype.StateStarting
}

// CommandRecord is the durable part of a command: what was asked and how
// it ended. Output lives with the agent.
type CommandRecord = apitype.Command

// Store is the persistence the Manager needs. Every method commits before
// it returns.
type Store interface {
	// CreateSandbox inserts sb. A name already in use is errcode.Conflict
	// with reason "name_taken".
	CreateSandbox(ctx context.Context, sb *Sandbox) error
	GetSandbox(ctx context.Context, id string) (*Sandbox, error)
	GetSandboxByName(ctx context.Context, tenant, name string) (*Sandbox, error)
	ListSandboxes(ctx context.Context) ([]*Sandbox, error)
	// SetSandboxState updates state, reason and agent PID.
	SetSandboxState(ctx context.Context, id, state, reason string, agentPID int) error
	// SetSandboxNetwork replaces a sandbox's network policy.
	SetSandboxNetwork(ctx context.Context, id string, p netpolicy.Policy) error
	DeleteSandbox(ctx context.Context, id string) error

	InsertCommand(ctx context.Context, c *CommandRecord) error
	// FinishCommand stores a finished command's outcome, if the stored
	// record still says running, and trims the finished commands of its
	// sandbox to the newest keep.
	FinishCommand(ctx context.Context, c *CommandRecord, keep int) error
	// DeleteCommand removes a record, for a command that never started.
	DeleteCommand(ctx context.Context, sandboxID, id string) error
	GetCommand(ctx context.Context, sandboxID, id string) (*CommandRecord, error)
	// ListCommands returns a sandbox's commands, newest first.
	ListCommands(ctx context.Context, sandboxID string, limit int) ([]*CommandRecord, error)

	// PutService stores a service intent, replacing one of the same name.
	PutService(ctx context.Context, s *ServiceIntent) error
	// ListServices returns a sandbox's service intents, by name.
	ListServices(ctx context.Context, sandboxID string) ([]*ServiceIntent, error)
	DeleteService(ctx context.Context, sandboxID, name string) error

	// ClaimPooled takes the oldest running sandbox of pool out of it and
	// gives it claim's name, env, labels, idle policy and times, in one
	// statement: two claims never get the same sandbox. It returns
	// errcode.NotFound when the pool is empty, and Conflict "name_taken"
	// when claim's name is used.
	ClaimPooled(ctx context.Context, pool string, claim *Sandbox) (*Sandbox, error)

	TemplateStore
}
