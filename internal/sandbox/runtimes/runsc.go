package runtimes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
)

// FindRunsc finds gVisor's runsc when --runsc names none: on PATH, else
// where `make runsc` puts it beside a checkout's bin/berth (../tools/runsc
// from the running binary), else beside the binary itself. So
// ./bin/berth serve, run outside make, finds the runsc make built.
func FindRunsc() (string, error) {
	if p, err := exec.LookPath("runsc"); err == nil {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	dir := filepath.Dir(exe)
	for _, p := range []string{filepath.Join(dir, "..", "tools", "runsc"), filepath.Join(dir, "runsc")} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Clean(p), nil
		}
	}
	return "", errors.New("runsc is not on PATH, nor in tools/ beside this berth")
}
