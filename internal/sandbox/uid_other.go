//go:build !linux

package sandbox

import (
	"os"

	"github.com/berthdev/berth/internal/errcode"
)

var errUIDRegistryLinuxOnly = errcode.UIDRegistryUnsupported.New("the sandbox uid registry needs Linux")

func lockRegistry(string) (*os.File, error) { return nil, errUIDRegistryLinuxOnly }
func writeRegistry(string, []byte) error    { return errUIDRegistryLinuxOnly }
func processUIDs() (map[int]bool, error)    { return nil, errUIDRegistryLinuxOnly }
func processesAs(int) ([]int, error)        { return nil, errUIDRegistryLinuxOnly }
func stillAs([]int, int) []int              { return nil }
