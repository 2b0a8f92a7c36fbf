package sandbox

import (
	"context"
	"path/filepath"
)

// Runtime starts and stops a sandbox's agent. The implementations,
// process, container and gvisor, are in package runtimes; the daemon hands
// them to NewManager. Every runtime must pass the same end-to-end suite.
type Runtime interface {
	// Name is the runtime's API name.
	Name() string
	// Isolated reports whether the runtime is a security boundary.
	Isolated() bool
	// Available returns nil when the runtime can be used on this machine,
	// or an error whose reason and message say what is missing.
	Available() error
	// Start starts the sandbox's agent and returns once it listens on
	// l.Socket. It returns the agent's host PID.
	Start(ctx context.Context, sb *Sandbox, l Layout, a AgentArgs) (pid int, err error)
	// Alive reports whether the agent of a sandbox started earlier (maybe
	// by another daemon process) is still running.
	Alive(sb *Sandbox, l Layout) bool
	// Stop ends the agent and every process of the sandbox, and releases
	// what the runtime holds for it. It is idempotent.
	Stop(ctx context.Context, sb *Sandbox, l Layout) error
}

// Layout is where a sandbox lives on the host.
type Layout struct {
	Dir       string // <data>/sandboxes/<id>
	Workspace string // the workspace directory
	State     string // the agent's private state
	// Run holds what only the daemon may touch: the agent's socket, which
	// the daemon creates and hands to the agent as a file descriptor, so a
	// sandbox cannot swap it for a link to another socket.
	Run    string
	Socket string // the agent's unix socket, in Run
	Log    string // the agent's log
	// Upper is the writable layer of the sandbox's root on the isolated
	// runtimes: what a template build installed, which the template
	// freezes into its layer.
	Upper string
}

// LayoutFor returns the layout of sandbox id under dataDir.
func LayoutFor(dataDir, id string) Layout {
	dir := filepath.Join(dataDir, "sandboxes", id)
	return Layout{
		Dir:       dir,
		Workspace: filepath.Join(dir, "workspace"),
		State:     filepath.Join(dir, "agent"),
		Run:       filepath.Join(dir, "run"),
		Socket:    filepath.Join(dir, "run", "agent.sock"),
		Log:       filepath.Join(dir, "agent.log"),
		Upper:     filepath.Join(dir, "upper"),
	}
}

// AgentArgs are the agent's settings, passed on its command line.
type AgentArgs struct {
	Binary      string // the berth binary
	Token       string
	OutputCap   int64
	MaxCommands int
	MaxHistory  int
	MaxUpload   int64
	// Root is what the sandbox's root is made of (isolated runtimes).
	Root RootSpec
	// Network, when set, is the egress network to run the sandbox in;
	// nil is loopback only.
	Network *NetworkSetup
}
