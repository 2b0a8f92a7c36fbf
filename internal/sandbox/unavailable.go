package sandbox

import (
	"context"

	"github.com/berthdev/berth/internal/errcode"
)

// UnavailableRuntime stands for a runtime this build or machine cannot
// offer, so that the API can name it and say why instead of calling it
// unknown.
type UnavailableRuntime struct {
	RuntimeName string
	IsIsolated  bool
	Why         string // a sentence saying why, and what to do
}

var _ Runtime = UnavailableRuntime{}

func (u UnavailableRuntime) Name() string   { return u.RuntimeName }
func (u UnavailableRuntime) Isolated() bool { return u.IsIsolated }

func (u UnavailableRuntime) Available() error {
	return errcode.WithReason(errcode.Unimplemented, "runtime_unavailable", "runtime %s is not available: %s", u.RuntimeName, u.Why)
}

func (u UnavailableRuntime) Start(context.Context, *Sandbox, Layout, AgentArgs) (int, error) {
	return 0, u.Available()
}

func (u UnavailableRuntime) Alive(*Sandbox, Layout) bool { return false }

func (u UnavailableRuntime) Stop(context.Context, *Sandbox, Layout) error { return nil }
