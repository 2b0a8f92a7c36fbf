//go:build !linux

package sandbox

import (
	"context"

	"github.com/berthdev/berth/internal/errcode"
)

// ImportTemplate needs Linux.
func (m *Manager) ImportTemplate(ctx context.Context, name, src, ref string) (*Template, error) {
	return nil, errcode.New(errcode.Unimplemented, "templates need Linux")
}

func freezeTree(src, dst string, skip map[string]bool) error {
	return errcode.New(errcode.Unimplemented, "templates need Linux")
}
