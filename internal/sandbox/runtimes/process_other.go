//go:build !linux

package runtimes

import (
	"context"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// Process is Linux-only; off Linux it reports itself unavailable so
// the rest of Berth still builds (for the client and CLI).
type Process struct{}

var errLinuxOnly = errcode.RuntimeUnsupported.New("the process runtime needs Linux")

func (Process) Name() string     { return "process" }
func (Process) Isolated() bool   { return false }
func (Process) Available() error { return errLinuxOnly }
func (Process) Start(context.Context, *sandbox.Sandbox, sandbox.Layout, sandbox.AgentArgs) (int, error) {
	return 0, errLinuxOnly
}
func (Process) Alive(*sandbox.Sandbox, sandbox.Layout) bool                  { return false }
func (Process) Stop(context.Context, *sandbox.Sandbox, sandbox.Layout) error { return nil }
