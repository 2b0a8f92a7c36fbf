package testenv

import (
	"os"
	"strings"
	"syscall"
)

// unmountUnder detaches every mount at or below dir.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			_ = syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
}
