package runtimes

import (
	"errors"
	"fmt"
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

// workloadCgroup is the child of a container sandbox's cgroup, in the pids
// hierarchy only, that holds every process the agent starts (commands,
// terminals, services and all they fork). Its pids.max is the sandbox's
// pids; the sandbox's own cgroup, where the agent stays, has
// AgentPidsReserve more, so that a workload that takes every PID it may
// have still leaves the agent's Go runtime the threads it needs.
const workloadCgroup = "workload"

// AgentPidsReserve is how many PIDs (processes and threads) a container
// sandbox's cgroup has beyond its workload's budget, for the agent and the
// short-lived helpers that move each new process into the workload cgroup
// (see agent.SpawnCommand).
const AgentPidsReserve = 128

// makeWorkload creates the workload cgroup with pids.max = pids and opens
// its cgroup.procs for writing, for the agent: a file opened by root lets
// its holder move any process it can name into the cgroup (cgroup v1
// checks the opener's credentials), and nothing else. Only cgroup v1 (and
// hybrid) hosts: on v2 the agent would need a leaf cgroup of its own
// beside the workload's, so there the workload shares the sandbox's budget
// with the agent. It returns nil, nil when there is no workload cgroup to
// make.
func (c sandboxCgroup) makeWorkload(pids int64) (*os.File, error) {
	if c.mode != cgroupV1 && c.mode != cgroupHybrid {
		return nil, nil
	}
	dir := filepath.Join(c.dir("pids"), workloadCgroup)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the workload cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(pids, 10)), 0); err != nil {
		return nil, fmt.Errorf("setting the workload's pids.max: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the workload cgroup: %w", err)
	}
	return f, nil
}

// procs lists the PIDs in the cgroup and its children (the workload's).
func (c sandboxCgroup) procs() []int {
	var out []int
	for _, d := range cgroupTree(c.dir("pids")) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// cgroupTree lists a cgroup directory and the cgroups below it, children
// before their parents (the order they can be removed in).
func cgroupTree(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, cgroupTree(filepath.Join(dir, e.Name()))...)
		}
	}
	return append(out, dir)
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

// setCPUShares sets the cgroup's CPU weight relative to its siblings, in
// cgroup v1's units (1024 is the default; 2-262144); on v2 it is mapped
// onto cpu.weight (100 the default; 1-10000).
func (c sandboxCgroup) setCPUShares(shares uint64) error {
	shares = min(max(shares, 2), 262144)
	file, v := filepath.Join(c.dir("cpu"), "cpu.shares"), shares
	if c.mode == cgroupV2 {
		file, v = filepath.Join(c.dir(""), "cpu.weight"), 1+(shares-2)*9999/262142
	}
	return os.WriteFile(file, []byte(strconv.FormatUint(v, 10)), 0)
}

// cpuUsage returns the CPU time the cgroup's processes have used, those
// that ended included; false when the host does not account it there.
func (c sandboxCgroup) cpuUsage() (time.Duration, bool) {
	if c.mode == cgroupV2 {
		b, err := os.ReadFile(filepath.Join(c.dir(""), "cpu.stat"))
		if err != nil {
			return 0, false
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(us) * time.Microsecond, err == nil
			}
		}
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir("cpuacct"), "cpuacct.usage"))
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err == nil
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

// remove deletes the cgroup's directories, children first (empty cgroups
// only).
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
	for _, top := range dirs {
		for _, d := range cgroupTree(top) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
