//go:build !linux

package sandbox

import (
	"context"

	"github.com/berthdev/berth/internal/errcode"
)

// ProcessRuntime is Linux-only; off Linux it reports itself unavailable so
// the rest of Berth still builds (for the client and CLI).
type ProcessRuntime struct{}

var errLinuxOnly = errcode.WithReason(errcode.Unimplemented, "runtime_unsupported", "the process runtime needs Linux")

func (ProcessRuntime) Name() string     { return "process" }
func (ProcessRuntime) Isolated() bool   { return false }
func (ProcessRuntime) Available() error { return errLinuxOnly }
func (ProcessRuntime) Start(context.Context, *Sandbox, Layout, AgentArgs) (int, error) {
	return 0, errLinuxOnly
}
func (ProcessRuntime) Alive(*Sandbox, Layout) bool                  { return false }
func (ProcessRuntime) Stop(context.Context, *Sandbox, Layout) error { return nil }
