//go:build !linux

package runtimes

import (
	"context"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// Container is Linux-only; elsewhere it reports itself unavailable.
type Container struct{ name string }

// NewContainer returns the (unavailable) container runtime.
func NewContainer(OCIConfig) *Container { return &Container{name: "container"} }

// NewGVisor returns the (unavailable) gvisor runtime.
func NewGVisor(OCIConfig) *Container { return &Container{name: "gvisor"} }

func (r *Container) Name() string    { return r.name }
func (r *Container) Isolated() bool  { return true }
func (r *Container) Program() string { return "" }
func (r *Container) Available() error {
	return errcode.RuntimeUnavailable.New("runtime %s needs Linux", r.name)
}
func (r *Container) Start(context.Context, *sandbox.Sandbox, sandbox.Layout, sandbox.AgentArgs) (int, error) {
	return 0, r.Available()
}
func (r *Container) Alive(*sandbox.Sandbox, sandbox.Layout) bool                  { return false }
func (r *Container) Stop(context.Context, *sandbox.Sandbox, sandbox.Layout) error { return nil }
