package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMode is how this host mounts cgroups.
type cgroupMode int

const (
	cgroupNone   cgroupMode = iota
	cgroupV1                // controllers under /sys/fs/cgroup/<name>
	cgroupHybrid            // v1, with a (controller-less) v2 tree at /sys/fs/cgroup/unified
	cgroupV2                // unified
)

func (m cgroupMode) String() string {
	return [...]string{"none", "v1", "hybrid", "v2"}[m]
}

func detectCgroups() cgroupMode {
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) != nil {
		return cgroupNone
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return cgroupV2
	}
	if syscall.Statfs("/sys/fs/cgroup/unified", &st) == nil && st.Type == cgroup2Magic {
		return cgroupHybrid
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		return cgroupV1
	}
	return cgroupNone
}

// cgroupParent is the cgroup every sandbox's cgroup lives under.
const cgroupParent = "/berth"

// sandboxCgroup is a sandbox's cgroup, in the host's layout.
type sandboxCgroup struct {
	mode cgroupMode
	path string // relative, like /berth/sbx_...
}

func newSandboxCgroup(mode cgroupMode, id string) sandboxCgroup {
	return sandboxCgroup{mode: mode, path: cgroupParent + "/" + id}
}

// dir returns the cgroup's directory for a v1 controller ("" on v2).
func (c sandboxCgroup) dir(controller string) string {
	if c.mode == cgroupV2 {
		return filepath.Join("/sys/fs/cgroup", c.path)
	}
	return filepath.Join("/sys/fs/cgroup", controller, c.path)
}

// procs lists the PIDs in the cgroup.
func (c sandboxCgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(c.dir("pids"), "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// oomKills returns how many processes the kernel's OOM killer ended in
// the cgroup.
func (c sandboxCgroup) oomKills() int {
	file, key := "memory.events", "oom_kill"
	if c.mode != cgroupV2 {
		file = "memory.oom_control"
	}
	b, err := os.ReadFile(filepath.Join(c.dir("memory"), file))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// kill ends every process in the cgroup and removes it: cgroup.kill on v2;
// on v1, freeze, SIGKILL every member, thaw, until it is empty. Killing by
// cgroup catches what double-forks away from any process tree.
func (c sandboxCgroup) kill() error {
	if c.mode == cgroupV2 {
		_ = os.WriteFile(filepath.Join(c.dir(""), "cgroup.kill"), []byte("1"), 0)
	}
	freezer := filepath.Join(c.dir("freezer"), "freezer.state")
	for range 200 {
		pids := c.procs()
		if len(pids) == 0 {
			break
		}
		if c.mode != cgroupV2 {
			_ = os.WriteFile(freezer, []byte("FROZEN"), 0)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if c.mode != cgroupV2 {
			_ = os.WriteFile(freezer, []byte("THAWED"), 0)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if left := c.procs(); len(left) > 0 {
		return errors.New("cgroup " + c.path + " still has processes after SIGKILL")
	}
	return c.remove()
}

// remove deletes the cgroup's directories (empty cgroups only).
func (c sandboxCgroup) remove() error {
	var errs []error
	dirs := []string{c.dir("")}
	if c.mode != cgroupV2 {
		dirs = nil
		entries, _ := os.ReadDir("/sys/fs/cgroup")
		for _, e := range entries {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), c.path))
		}
	}
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
