package runtimes

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berthdev/berth/internal/agent"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

// Container runs each sandbox's agent as the init of an OCI
// container: every namespace but the user namespace, no capabilities,
// no-new-privileges, a deny-default seccomp profile, a read-only root made
// of the host template under a per-sandbox overlay, a non-root uid of its
// own, cgroup limits and no network but loopback. The same bundle runs
// under crun or runc ("container") or under gVisor's runsc ("gvisor").
type Container struct {
	name    string   // container or gvisor
	program string   // crun, runc or runsc
	argv    []string // command prefix: the runtime binary, maybe wrapped, and global flags
	dataDir string
	cgroups cgroupMode
	err     error // why the runtime is unavailable, or nil

}

var _ sandbox.Runtime = (*Container)(nil)

// NewContainer returns the "container" runtime (crun or runc).
func NewContainer(cfg OCIConfig) *Container {
	r := &Container{name: "container", dataDir: cfg.DataDir, cgroups: detectCgroups()}
	choice := cfg.OCIRuntime
	if choice == "" || choice == "auto" {
		// crun: it starts a container in about half of runc's time here,
		// even with the mount namespace hybrid hosts need (see below).
		choice = "crun"
		if _, err := exec.LookPath("crun"); err != nil {
			if _, err := exec.LookPath("runc"); err == nil {
				choice = "runc"
			}
		}
	}
	bin, err := exec.LookPath(choice)
	if err != nil {
		r.err = errcode.RuntimeUnavailable.New("runtime container is not available: %s is not installed (apt-get install crun)", choice)
		return r
	}
	r.program = choice
	root := filepath.Join(cfg.DataDir, "oci", choice)
	r.argv = []string{bin, "--root", root}
	if choice == "crun" && r.cgroups == cgroupHybrid {
		// crun refuses hybrid hosts; in a private mount namespace without
		// the (empty) v2 tree it sees plain v1.
		r.argv = append([]string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
			`umount /sys/fs/cgroup/unified 2>/dev/null; exec "$0" "$@"`}, r.argv...)
	}
	r.err = r.checkHost()
	return r
}

// NewGVisor returns the "gvisor" runtime: the same bundle under
// runsc with the systrap platform.
func NewGVisor(cfg OCIConfig) *Container {
	r := &Container{name: "gvisor", program: "runsc", dataDir: cfg.DataDir, cgroups: detectCgroups()}
	bin := cfg.Runsc
	if bin == "" {
		var err error
		if bin, err = FindRunsc(); err != nil {
			r.err = errcode.RuntimeUnavailable.New("runtime gvisor is not available: %v (make runsc builds it into tools/; or give --runsc PATH)", err)
			return r
		}
	} else if _, err := exec.LookPath(bin); err != nil {
		r.err = errcode.RuntimeUnavailable.New("runtime gvisor is not available: --runsc %s is not an executable", bin)
		return r
	}
	// gVisor cannot serve on a listening socket passed in, so its agent
	// makes its own, which the sentry creates on the host (host-uds).
	r.argv = []string{bin, "--root", filepath.Join(cfg.DataDir, "oci", "runsc"), "--platform=systrap",
		"--network=none", "--host-uds=create", "--oci-seccomp"}
	r.err = r.checkHost()
	return r
}

func (r *Container) checkHost() error {
	switch {
	case os.Geteuid() != 0:
		return errcode.RuntimeUnavailable.New("runtime %s is not available: berth serve must run as root to create containers", r.name)
	case r.cgroups == cgroupNone:
		return errcode.RuntimeUnavailable.New("runtime %s is not available: no cgroup hierarchy is mounted", r.name)
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(b, []byte("overlay")) {
		return errcode.RuntimeUnavailable.New("runtime %s is not available: overlayfs is missing (modprobe overlay)", r.name)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return errcode.RuntimeUnavailable.New("runtime %s is not available: mkfs.ext4 is missing for workspace disks (apt-get install e2fsprogs)", r.name)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return errcode.RuntimeUnavailable.New("runtime %s is not available: no loop devices for workspace disks (modprobe loop)", r.name)
	}
	return nil
}

func (r *Container) Name() string     { return r.name }
func (r *Container) Isolated() bool   { return true }
func (r *Container) Available() error { return r.err }

// Program says which OCI runtime program runs the bundles, for doctor.
func (r *Container) Program() string { return r.program }

// Paths inside the sandbox.
const (
	agentPathInSandbox = sandbox.BinaryInSandbox
	stateInSandbox     = "/run/berth"
)

// containerLayout adds the isolated runtimes' directories to l.
type containerLayout struct {
	sandbox.Layout
	upper, work, rootfs, bundle, pidFile string
	sock                                 string // gvisor: the directory the agent makes its socket in
}

func containerLayoutFor(l sandbox.Layout) containerLayout {
	return containerLayout{
		Layout:  l,
		upper:   l.Upper,
		work:    filepath.Join(l.Dir, "work"),
		rootfs:  filepath.Join(l.Dir, "rootfs"),
		bundle:  filepath.Join(l.Dir, "bundle"),
		pidFile: filepath.Join(l.Run, "pid"),
		sock:    filepath.Join(l.Run, "sock"),
	}
}

func (r *Container) hostTemplate() (*hostTemplate, error) {
	return sharedHostTemplate(filepath.Join(r.dataDir, "templates"))
}

// Start prepares the sandbox's root (overlay over the host template), its
// bundle, and runs the container detached, with the agent as its init.
func (r *Container) Start(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout, a sandbox.AgentArgs) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	tmpl, err := r.hostTemplate()
	if err != nil {
		return 0, fmt.Errorf("building the host template: %w", err)
	}
	cl := containerLayoutFor(l)
	for _, d := range []string{cl.work, cl.bundle} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return 0, err
		}
	}
	// The overlay's root takes the upper directory's mode: the sandbox
	// user must be able to traverse it.
	for _, d := range []string{cl.upper, cl.rootfs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return 0, err
		}
	}
	if r.program == "runsc" && !isMountPoint(l.Run) {
		// The agent's socket directory is writable from inside, so it may
		// not be on the host's disk (it would escape the disk quota): a
		// small tmpfs, which also holds the daemon's link to the socket.
		if err := unix.Mount("tmpfs", l.Run, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m,mode=700"); err != nil {
			return 0, fmt.Errorf("mounting the agent's socket directory: %w", err)
		}
	}
	if err := os.MkdirAll(cl.sock, 0o700); err != nil {
		return 0, err
	}
	mountWorkspace := mountWorkspaceDisk
	if sb.Resources.Scratch {
		mountWorkspace = mountScratchWorkspace
	}
	if err := mountWorkspace(l.Dir, l.Workspace, sb.Resources.DiskMB, sb.UID); err != nil {
		return 0, fmt.Errorf("preparing the workspace disk: %w", err)
	}
	for _, d := range []string{l.Workspace, l.State, cl.sock} {
		if err := os.Chown(d, sb.UID, sb.UID); err != nil {
			return 0, err
		}
	}
	if err := sandboxEtc(filepath.Join(cl.upper, "etc"), sb.UID); err != nil {
		return 0, err
	}
	if a.Root.Writable {
		if err := prepareWritableRoot(cl.upper, sb.UID, a.Root.Image); err != nil {
			return 0, err
		}
	}
	// The template's layers over the host's (or an image's whole root).
	lower := append(slices.Clone(a.Root.Layers), tmpl.rootfs)
	if a.Root.Image {
		lower = a.Root.Layers
	}
	if !isMountPoint(cl.rootfs) {
		opts := "lowerdir=" + strings.Join(lower, ":") + ",upperdir=" + cl.upper + ",workdir=" + cl.work
		if err := unix.Mount("overlay", cl.rootfs, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return 0, fmt.Errorf("mounting the sandbox's root: %w", err)
		}
	}
	// Imports and builds check their layers; this is the whole root, as
	// the runtime will mount over it.
	var binds []string
	if !a.Root.Image {
		binds = tmpl.binds
	}
	if err := checkRoot(cl.rootfs, binds); err != nil {
		return 0, err
	}
	spec := r.spec(sb, cl, tmpl, a)
	b, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(cl.bundle, "config.json"), b, 0o600); err != nil {
		return 0, err
	}

	var lnF, procsF *os.File
	if r.program != "runsc" {
		if lnF, err = agent.ListenFile(l.Socket); err != nil {
			return 0, fmt.Errorf("making the agent's socket: %w", err)
		}
		defer lnF.Close()
		if r.workloadCgroup() {
			// Made before the container, so that the agent has it from
			// its first command; Stop removes it with the sandbox's.
			if procsF, err = newSandboxCgroup(r.cgroups, sb.ID).makeWorkload(sb.Resources.Pids); err != nil {
				return 0, err
			}
			defer procsF.Close()
		}
	} else {
		os.Remove(filepath.Join(cl.sock, "agent.sock"))
	}
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer closeAll(tokR, tokW)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer closeAll(readyR, readyW)
	if _, err := tokW.WriteString(a.Token + "\n"); err != nil {
		return 0, err
	}
	tokW.Close()

	_ = os.Remove(cl.pidFile)
	args := r.runArgs(sb.ID, cl, a.Network != nil)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.ExtraFiles = []*os.File{lnF, tokR, readyW}
	if procsF != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, procsF)
	}
	if lnF == nil {
		cmd.ExtraFiles = []*os.File{tokR, readyW}
	}
	logf, err := os.OpenFile(l.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	// The container inherits the runtime's stdout and stderr, so they must
	// be a file: a pipe would stay open as long as the sandbox lives.
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s run: %v: %s", r.program, err, logTail(l.Log))
	}
	closeAll(tokR, readyW, procsF)
	if lnF != nil {
		lnF.Close()
	}

	if err := waitReady(ctx, readyR, l.Log); err != nil {
		return 0, err
	}
	if r.program == "runsc" {
		if err := adoptSocket(filepath.Join(cl.sock, "agent.sock"), l.Socket); err != nil {
			return 0, err
		}
	}
	b, err = os.ReadFile(cl.pidFile)
	if err != nil {
		return 0, fmt.Errorf("reading the container's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("reading the container's pid: %w", err)
	}
	if r.program != "runsc" {
		// The OOM killer must take a command, never the agent (which puts
		// each command back at 0). Set from here: the runtime would do it
		// after dropping the privilege to lower it. Not for gVisor, whose
		// sandbox process is where the sandbox's memory is.
		// Best effort: it needs CAP_SYS_RESOURCE, which a daemon in a
		// restricted environment may lack.
		_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("-1000"), 0)
	}
	return pid, nil
}

// adoptSocket hard-links the socket an agent made inside its sandbox into
// the daemon's own directory, where the sandbox cannot reach, and checks
// that what it linked is a socket. The link never follows a symbolic
// link, so a sandbox cannot point the daemon at another socket; and later
// swaps of the sandbox's path leave the daemon's link alone.
func adoptSocket(inSandbox, daemonPath string) error {
	os.Remove(daemonPath)
	if err := os.Link(inSandbox, daemonPath); err != nil {
		return fmt.Errorf("adopting the agent's socket: %w", err)
	}
	fi, err := os.Lstat(daemonPath)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		os.Remove(daemonPath)
		return errcode.AgentSocketInvalid.New("the sandbox's agent socket is not a socket")
	}
	return nil
}

// workloadCgroup reports whether the sandbox's processes go into a workload
// cgroup of their own, apart from the agent (see makeWorkload): under crun
// or runc on a cgroup v1 host. gVisor's tasks are not host processes; its
// agent bounds them with RLIMIT_NPROC instead (see spec).
func (r *Container) workloadCgroup() bool {
	return r.program != "runsc" && (r.cgroups == cgroupV1 || r.cgroups == cgroupHybrid)
}

// runArgs is the command line that runs the bundle detached, passing the
// agent's listener, token pipe and ready pipe as fds 3, 4 and 5, and the
// workload cgroup's cgroup.procs as fd 6.
func (r *Container) runArgs(id string, cl containerLayout, egress bool) []string {
	args := append([]string{}, r.argv...)
	if egress && r.program == "runsc" {
		// The sentry's own stack serves the namespace's one device.
		args[slices.Index(args, "--network=none")] = "--network=sandbox"
	}
	switch r.program {
	case "runsc":
		args = append(args, "run", "--detach", "--pid-file", cl.pidFile, "--bundle", cl.bundle,
			"--pass-fd", "3:3", "--pass-fd", "4:4", id)
	default:
		fds := "3"
		if r.workloadCgroup() {
			fds = "4"
		}
		args = append(args, "run", "--detach", "--preserve-fds", fds, "--pid-file", cl.pidFile, "--bundle", cl.bundle, id)
	}
	return args
}

// GVisorPidsHeadroom is added to a gvisor sandbox's pids limit for the
// host threads of runsc itself, which share its cgroup.
const GVisorPidsHeadroom = 128

// ociSpecVersion is the runtime-spec version bundles declare: the oldest
// that has every field Berth sets, so older runtimes (crun 1.8 refuses
// "1.3.0") take them.
const ociSpecVersion = "1.0.2"

// Sizes of the sandbox's in-memory file systems (they count against its
// memory limit).
const (
	tmpSizeMB   = 512
	shmSizeMB   = 256
	stateSizeMB = 128 // command output beyond it is counted, not kept
)

func (r *Container) spec(sb *sandbox.Sandbox, cl containerLayout, tmpl *hostTemplate, a sandbox.AgentArgs) *specs.Spec {
	res := sb.Resources
	uid := uint32(sb.UID)
	memory := res.MemoryMB << 20
	period := uint64(100000)
	quota := int64(res.CPUs * float64(period))
	pids := res.Pids
	// Open files: as many as the daemon may have, at most 65536 (a limit
	// above the daemon's own hard limit is refused by the kernel).
	nofile := uint64(65536)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		nofile = min(nofile, rl.Max)
	}
	rlimits := []specs.POSIXRlimit{
		{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
		{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile},
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%dm", cmp.Or(res.ShmMB, shmSizeMB))}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%dm", tmpSizeMB)}},
		{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "mode=755", "size=16m"}},
	}
	if !a.Root.Image {
		for _, d := range tmpl.binds {
			mounts = append(mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		}
	}
	if a.Root.Seed != "" {
		mounts = append(mounts, specs.Mount{Destination: "/template", Type: "bind", Source: a.Root.Seed,
			Options: []string{"rbind", "ro", "nosuid", "nodev"}})
	}
	mounts = append(mounts,
		specs.Mount{Destination: "/workspace", Type: "bind", Source: cl.Workspace, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
		// The agent's state (command output) is in memory, counted against
		// the sandbox's memory limit and capped: on the host's disk it would
		// escape the disk quota.
		specs.Mount{Destination: stateInSandbox, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec",
			"mode=700", fmt.Sprintf("uid=%d", uid), fmt.Sprintf("gid=%d", uid), fmt.Sprintf("size=%dm", stateSizeMB)}},
		specs.Mount{Destination: agentPathInSandbox, Type: "bind", Source: a.Binary, Options: []string{"bind", "ro", "nosuid", "nodev"}},
	)
	empty := []string{}
	if r.workloadCgroup() {
		// The workload's cgroup has pids; the agent keeps the reserve.
		pids += AgentPidsReserve
	}
	s := &specs.Spec{
		Version:  ociSpecVersion,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: cl.rootfs, Readonly: !a.Root.Writable},
		Process: &specs.Process{
			User: specs.User{UID: uid, GID: uid},
			Args: []string{agentPathInSandbox, "agent", "--pid1", "--sandbox-id", sb.ID,
				"--workspace", "/workspace", "--state", stateInSandbox,
				"--output-cap", strconv.FormatInt(a.OutputCap, 10),
				"--max-commands", strconv.Itoa(a.MaxCommands),
				"--max-history", strconv.Itoa(a.MaxHistory),
				"--max-upload", strconv.FormatInt(a.MaxUpload, 10),
				"--listen-fd", "3", "--token-fd", "4", "--ready-fd", "5", "--workload-cgroup-fd", "6"},
			// The agent's own Go runtime: a smaller heap target and one P
			// keep an idle sandbox under 3 MiB. Commands never see these:
			// the agent builds their environment from scratch.
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/workspace", "LANG=C.UTF-8",
				"GOGC=50", "GOMAXPROCS=1"},
			Cwd:             "/workspace",
			Capabilities:    &specs.LinuxCapabilities{Bounding: empty, Effective: empty, Inheritable: empty, Permitted: empty, Ambient: empty},
			NoNewPrivileges: true,
			Rlimits:         rlimits,
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
			},
			CgroupsPath: cgroupParent + "/" + sb.ID,
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Memory:  &specs.LinuxMemory{Limit: &memory, Swap: &memory},
				CPU:     &specs.LinuxCPU{Quota: &quota, Period: &period},
				Pids:    &specs.LinuxPids{Limit: &pids},
			},
			Seccomp: SeccompProfile(),
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
				"/sys/firmware", "/sys/devices/virtual/powercap", "/proc/interrupts",
			},
			ReadonlyPaths: []string{
				"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
			},
		},
	}
	if !r.workloadCgroup() {
		s.Process.Args = s.Process.Args[:len(s.Process.Args)-2]
	}
	if n := a.Network; n != nil {
		// Egress: the namespace Berth made, whose one device leads to
		// Berth, and the files that name Berth's resolver and CA.
		s.Linux.Namespaces[1] = specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: n.NetNS}
		for _, dst := range slices.Sorted(maps.Keys(n.Files)) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: dst, Type: "bind", Source: n.Files[dst],
				Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
		}
	}
	if r.program == "runsc" {
		// The agent makes its socket in a directory of its own (see
		// adoptSocket) and reads token and readiness from fds 3 and 4.
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/run/berth-sock", Type: "bind", Source: cl.sock,
			Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"}})
		args := s.Process.Args[:len(s.Process.Args)-6]
		// The Sentry's tasks are not host processes, so a host cgroup
		// cannot tell the workload's from the agent's. The Sentry counts
		// tasks per uid against RLIMIT_NPROC, checked against the limit of
		// the task that forks: the agent starts each process with a limit
		// of pids and keeps its own, so the workload runs out first.
		s.Process.Args = append(args, "--socket", "/run/berth-sock/agent.sock", "--token-fd", "3", "--ready-fd", "4",
			"--workload-nproc", strconv.FormatInt(res.Pids, 10))
		// gVisor has no cgroup namespace to offer.
		s.Linux.Namespaces = s.Linux.Namespaces[:5]
		s.Linux.Seccomp = GVisorSeccompProfile()
		// runsc's own threads (sentry, gofer) count against pids.max too.
		pids := res.Pids + GVisorPidsHeadroom
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: &pids}
	}
	return s
}

// Alive reports whether the sandbox's container still runs its init.
func (r *Container) Alive(sb *sandbox.Sandbox, l sandbox.Layout) bool {
	if sb.AgentPID <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(sb.AgentPID) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte(sb.ID))
}

// Stop kills the container (by its cgroup, so nothing escapes), deletes
// it, and unmounts its root. It is idempotent and safe to call on a
// sandbox this runtime never started.
func (r *Container) Stop(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout) error {
	if r.err != nil {
		return nil
	}
	cl := containerLayoutFor(l)
	var errs []error
	_ = r.runtime(ctx, "kill", sb.ID, "KILL")
	if err := newSandboxCgroup(r.cgroups, sb.ID).kill(); err != nil {
		errs = append(errs, err)
	}
	if err := r.runtime(ctx, "delete", "--force", sb.ID); err != nil && !strings.Contains(err.Error(), "does not exist") &&
		!strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	for _, mp := range mountsUnder(cl.Dir) {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	// The workspace's loop device detaches itself once the last holder of
	// its mount (under gVisor, the exiting gofer) lets go. A scratch
	// workspace has none.
	if !sb.Resources.Scratch {
		if err := waitLoopDetached(ctx, filepath.Join(cl.Dir, diskImage)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.unpinNullNetNS(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runtime runs one OCI runtime subcommand.
func (r *Container) runtime(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	all := append(append([]string{}, r.argv...), args...)
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", r.program, args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// List returns the IDs of the containers this runtime knows.
func (r *Container) List(ctx context.Context) ([]string, error) {
	if r.err != nil {
		return nil, nil
	}
	all := append(append([]string{}, r.argv...), "list", "--format", "json")
	out, err := exec.CommandContext(ctx, all[0], all[1:]...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s list: %w", r.program, err)
	}
	var states []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &states); err != nil && len(bytes.TrimSpace(out)) > 0 && string(bytes.TrimSpace(out)) != "null" {
		return nil, fmt.Errorf("%s list: %w", r.program, err)
	}
	var ids []string
	for _, s := range states {
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// Pause freezes the sandbox's cgroup through the OCI runtime.
func (r *Container) Pause(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout) error {
	return r.runtime(ctx, "pause", sb.ID)
}

// Resume thaws the sandbox's cgroup.
func (r *Container) Resume(ctx context.Context, sb *sandbox.Sandbox, l sandbox.Layout) error {
	return r.runtime(ctx, "resume", sb.ID)
}

// SetCPUShares sets the sandbox's CPU weight against other sandboxes'
// (cgroup v1 units: 1024 is the default).
func (r *Container) SetCPUShares(id string, shares uint64) error {
	return newSandboxCgroup(r.cgroups, id).setCPUShares(shares)
}

// CPUUsage reports the CPU time the sandbox's processes have used.
func (r *Container) CPUUsage(id string) (time.Duration, bool) {
	return newSandboxCgroup(r.cgroups, id).cpuUsage()
}

// OOMKills reports how many processes the OOM killer ended in the
// sandbox's cgroup.
func (r *Container) OOMKills(id string) int {
	return newSandboxCgroup(r.cgroups, id).oomKills()
}
