//go:build !linux

package sandbox

import (
	"context"

	"github.com/berthdev/berth/internal/errcode"
)

// ContainerRuntime is Linux-only; elsewhere it reports itself unavailable.
type ContainerRuntime struct{ name string }

// NewContainerRuntime returns the (unavailable) container runtime.
func NewContainerRuntime(OCIConfig) *ContainerRuntime { return &ContainerRuntime{name: "container"} }

// NewGVisorRuntime returns the (unavailable) gvisor runtime.
func NewGVisorRuntime(OCIConfig) *ContainerRuntime { return &ContainerRuntime{name: "gvisor"} }

func (r *ContainerRuntime) Name() string    { return r.name }
func (r *ContainerRuntime) Isolated() bool  { return true }
func (r *ContainerRuntime) Program() string { return "" }
func (r *ContainerRuntime) Available() error {
	return errcode.WithReason(errcode.Unimplemented, "runtime_unavailable", "runtime %s needs Linux", r.name)
}
func (r *ContainerRuntime) Start(context.Context, *Sandbox, Layout, AgentArgs) (int, error) {
	return 0, r.Available()
}
func (r *ContainerRuntime) Alive(*Sandbox, Layout) bool                  { return false }
func (r *ContainerRuntime) Stop(context.Context, *Sandbox, Layout) error { return nil }
