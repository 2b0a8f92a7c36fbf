//go:build !linux

package sandbox

import (
	"os"

	"github.com/berthdev/berth/internal/errcode"
)

var errUIDRegistryLinuxOnly = errcode.WithReason(errcode.Unimplemented, "uid_registry_unsupported", "the sandbox uid registry needs Linux")

func lockRegistry(string) (*os.File, error) { return nil, errUIDRegistryLinuxOnly }
func writeRegistry(string, []byte) error    { return errUIDRegistryLinuxOnly }
func processUIDs() (map[int]bool, error)    { return nil, errUIDRegistryLinuxOnly }
