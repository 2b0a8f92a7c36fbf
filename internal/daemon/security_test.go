package daemon_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/probe"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/testenv"
)

// The adversarial suite (SECURITY.md section 2): the probes of
// internal/probe ("berth probe") run inside a sandbox of the isolated
// runtime under test and, as the positive control, in a process-runtime
// sandbox of the same daemon, which runs them as root on the host with no
// protection at all. Every negative result of the isolated runtime is
// paired with what the control shows for the same attempt, so that a
// "denied" cannot come from a broken probe.

// isolatedRuntime is the runtime the suite attacks: the one under test,
// which must isolate. make test runs the suite with
// BERTH_TEST_RUNTIME=container and =gvisor.
func isolatedRuntime(t *testing.T) string {
	t.Helper()
	switch rt := testenv.Runtime(); rt {
	case "container", "gvisor":
		return rt
	}
	t.Skip("the adversarial suite needs an isolated runtime: BERTH_TEST_RUNTIME=container or gvisor")
	return ""
}

// Small limits keep the resource probes quick.
var securityResources = apitype.Resources{CPUs: 0.5, MemoryMB: 128, Pids: 64, DiskMB: 64}

func newSandboxOf(t *testing.T, d *testenv.Daemon, runtime string, res *apitype.Resources) apitype.Sandbox {
	t.Helper()
	sb, err := d.Client.CreateSandbox(context.Background(), apitype.CreateSandboxRequest{Runtime: runtime, Resources: res})
	if err != nil {
		t.Fatalf("CreateSandbox(%s): %v", runtime, err)
	}
	if sb.State != apitype.StateRunning {
		t.Fatalf("CreateSandbox(%s) = %+v, want running", runtime, sb)
	}
	return sb
}

// probeBinary is where the berth binary is as sb sees it.
func probeBinary(t *testing.T, sb apitype.Sandbox) string {
	if sb.Runtime == "process" {
		return testenv.Binary(t)
	}
	return "/.berth/berth"
}

// probeCommand runs "berth probe --json args..." in sb and returns the
// finished command. It may run on any goroutine.
func probeCommand(d *testenv.Daemon, sb apitype.Sandbox, bin string, args ...string) (apitype.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{bin, "probe", "--json"}, args...)
	return d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Argv: argv, TimeoutMS: 90000})
}

// probeResults runs probes in sb, which must exit 0, and indexes the
// results by "ID attempt". It may run on any goroutine.
func probeResults(d *testenv.Daemon, sb apitype.Sandbox, bin string, args ...string) (map[string]probe.Result, error) {
	c, err := probeCommand(d, sb, bin, args...)
	if err != nil {
		return nil, fmt.Errorf("probe %v in %s: %w", args, sb.Runtime, err)
	}
	if c.Status != apitype.CommandExited || c.ExitCode == nil || *c.ExitCode != 0 {
		return nil, fmt.Errorf("probe %v in %s: %s %s exit %v signal %q; stderr: %s", args, sb.Runtime, c.Status, c.Reason, c.ExitCode, c.Signal, c.Stderr)
	}
	m := map[string]probe.Result{}
	for _, r := range probe.Parse(c.Stdout) {
		m[r.ID+" "+r.Attempt] = r
	}
	return m, nil
}

// mustProbe is probeResults on the test's goroutine.
func mustProbe(t *testing.T, d *testenv.Daemon, sb apitype.Sandbox, args ...string) map[string]probe.Result {
	t.Helper()
	m, err := probeResults(d, sb, probeBinary(t, sb), args...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// probeEnv is what the probes are told about the host, as flags.
func probeEnv(t *testing.T, d *testenv.Daemon) []string {
	t.Helper()
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--daemon-port", port, "--daemon-pid", strconv.Itoa(os.Getpid()), "--data-dir", d.DataDir}
	if ip := hostIP(); ip != "" {
		args = append(args, "--host-ip", ip)
	}
	return args
}

// hostIP returns a non-loopback IPv4 address of this host, or "".
func hostIP() string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return ""
}

// check judges one result; nil means the result is as it must be.
type check func(r probe.Result) error

// is accepts the given outcomes ("allowed", "denied", "error" or an
// errno name).
func is(outcomes ...string) check {
	return func(r probe.Result) error {
		if slices.Contains(outcomes, r.Outcome()) {
			return nil
		}
		return fmt.Errorf("got %s, want one of %v", r.Outcome(), outcomes)
	}
}

// reached accepts anything that shows the call got past any filter: it
// succeeded, or failed with an errno other than those given.
func reached(notErrnos ...string) check {
	return func(r probe.Result) error {
		if r.Result == probe.Error || slices.Contains(notErrnos, r.Outcome()) {
			return fmt.Errorf("got %s, want the call to be reached (allowed, or not %v)", r.Outcome(), notErrnos)
		}
		return nil
	}
}

// hostHas accepts "allowed" when the host has path and ENOENT when it has
// not: the control can only open what exists.
func hostHas(path string) check {
	if _, err := os.Stat(path); err != nil {
		return is("ENOENT")
	}
	return is("allowed")
}

func hostLacks(path string) bool {
	_, err := os.Stat(path)
	return err != nil
}

// reportOnly documents a control that cannot be made meaningful here; the
// result is only logged.
func reportOnly(why string) check { return nil }

func detailMatches(re string) check {
	rx := regexp.MustCompile(re)
	return func(r probe.Result) error {
		if !rx.MatchString(r.Detail) {
			return fmt.Errorf("detail %q does not match %s", r.Detail, re)
		}
		return nil
	}
}

func either(a, b check) check {
	return func(r probe.Result) error {
		if err := a(r); err == nil {
			return nil
		}
		return b(r)
	}
}

func both(a, b check) check {
	return func(r probe.Result) error {
		if err := a(r); err != nil {
			return err
		}
		return b(r)
	}
}

// securityCase is one attempt of a probe: what the isolated runtime must
// answer (gvisor, when set, replaces iso under runsc) and what the control
// answers.
type securityCase struct {
	id, attempt string
	iso, gvisor check
	ctl         check
	// alike marks the few cases where the control may answer as the
	// sandbox must (an allowed query, a file this host lacks): the
	// control shows the probe works, not that the check discriminates.
	alike bool
}

// sandboxDev is what /dev of an isolated sandbox may hold.
var sandboxDev = []string{"console", "core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm",
	"stderr", "stdin", "stdout", "tty", "urandom", "zero"}

// gvisorDev are the devices runsc's sentry emulates beyond those: none
// reaches a host device (its tun needs CAP_NET_ADMIN inside gVisor's own
// network stack, its fuse a mount).
var gvisorDev = []string{"char", "fuse", "net"}

func devIn(allowed ...[]string) check {
	return func(r probe.Result) error {
		for _, name := range strings.Split(r.Detail, ",") {
			if !slices.ContainsFunc(allowed, func(set []string) bool { return slices.Contains(set, name) }) {
				return fmt.Errorf("/dev has %q (all: %s)", name, r.Detail)
			}
		}
		return nil
	}
}

func securityCases(rt, sandboxID string) []securityCase {
	eperm := is("EPERM")
	notRoot := "not a sandbox's init"
	return []securityCase{
		// ESC-01: host secrets. This host's PID 1 refuses even root
		// (/proc/1/root, /proc/1/environ), so those controls only report.
		{id: "ESC-01", attempt: "open /etc/shadow", iso: is("ENOENT"), ctl: is("allowed")},
		{id: "ESC-01", attempt: "list /root", iso: is("ENOENT"), ctl: is("allowed")},
		{id: "ESC-01", attempt: "open /proc/1/root/etc/shadow", iso: is("ENOENT", "EACCES"), ctl: reportOnly("the host's pid 1 may refuse root")},
		{id: "ESC-01", attempt: "pid 1", iso: detailMatches(`^/\.berth/berth agent --pid1 --sandbox-id ` + sandboxID + ` `),
			ctl: func(r probe.Result) error {
				if strings.Contains(r.Detail, "--pid1") {
					return fmt.Errorf("the control's pid 1 is a sandbox's init: %s", r.Detail)
				}
				return nil
			}},
		// Names only, never values: nothing there but the spec's own.
		{id: "ESC-01", attempt: "read /proc/1/environ",
			iso: either(is("EACCES"), both(is("allowed"), detailMatches(`^variables: ((GOGC|GOMAXPROCS|HOME|LANG|PATH),?)*$`))),
			ctl: reportOnly("the host's pid 1 may refuse root")},
		{id: "ESC-01", attempt: "stat <data dir>", iso: is("ENOENT"), ctl: is("allowed")},
		{id: "ESC-01", attempt: "stat <data dir>/berth.db", iso: is("ENOENT"), ctl: is("allowed")},
		{id: "ESC-01", attempt: "stat /proc/1/root/<data dir>", iso: is("ENOENT", "EACCES"), ctl: reportOnly("the host's pid 1 may refuse root")},

		// ESC-02: every thread of the probe.
		{id: "ESC-02", attempt: "capabilities", iso: is("denied"), ctl: is("allowed")},
		{id: "ESC-02", attempt: "no_new_privs", iso: is("denied"), ctl: is("allowed")},
		{id: "ESC-02", attempt: "seccomp", iso: is("denied"), ctl: is("allowed")},

		// ESC-03: the control runs the children as nobody and sees them
		// gain euid 0. In a sandbox the copy belongs to the sandbox's own
		// uid, so "denied" there is weak; the image's setuid-root su is
		// the real test (nosuid /usr and no_new_privs).
		{id: "ESC-03", attempt: "chmod u+s on a copy", iso: reportOnly("chmod of one's own file is allowed"), ctl: is("allowed")},
		{id: "ESC-03", attempt: "exec the setuid copy", iso: is("denied"), ctl: is("allowed")},
		{id: "ESC-03", attempt: "exec a setuid-root binary of the image", iso: is("denied"), ctl: is("allowed")},

		// ESC-04: the control's errnos come after the permission checks.
		{id: "ESC-04", attempt: "mount(tmpfs)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-04", attempt: "umount2(not a mount point)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-04", attempt: "pivot_root(not a mount point)", iso: eperm, ctl: is("EINVAL", "EBUSY")},
		{id: "ESC-04", attempt: "chroot(/)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-04", attempt: "fsopen(tmpfs)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-04", attempt: "open_tree(OPEN_TREE_CLONE)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-04", attempt: "mount_setattr(bad flags)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-04", attempt: "move_mount(bad flags)", iso: eperm, ctl: is("EINVAL")},

		// ESC-05.
		{id: "ESC-05", attempt: "clone(CLONE_NEWUSER)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-05", attempt: "clone(CLONE_NEWNET|CLONE_NEWNS)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-05", attempt: "unshare(CLONE_NEWUSER)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-05", attempt: "unshare(CLONE_NEWNS)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-05", attempt: "setns(/proc/self/ns/net)", iso: eperm, ctl: is("allowed")},
		// The profile answers clone3 with ENOSYS so that libc falls back
		// to the filtered clone. Under gVisor clone3 is allowed (runsc
		// would answer EPERM, on which libc does not fall back, and the
		// sentry is the kernel a namespace flag reaches): the sentry
		// rejects size 0 itself.
		{id: "ESC-05", attempt: "clone3(size 0)", iso: is("ENOSYS"), gvisor: is("EINVAL"), ctl: is("EINVAL"),
			alike: rt == "gvisor"},

		// ESC-06: the control reaches each call (this kernel may lack
		// kexec and modules: ENOSYS, still not a filter's EPERM).
		{id: "ESC-06", attempt: "bpf(bad command)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-06", attempt: "perf_event_open(bad flags)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-06", attempt: "keyctl(bad operation)", iso: eperm, ctl: is("EOPNOTSUPP")},
		{id: "ESC-06", attempt: "add_key(empty type)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-06", attempt: "request_key(empty type)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-06", attempt: "userfaultfd(bad flags)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-06", attempt: "io_uring_setup(0 entries)", iso: eperm, ctl: reached("EPERM")},
		{id: "ESC-06", attempt: "open_by_handle_at(empty handle)", iso: eperm, ctl: is("EINVAL")},
		// Classic AIO contexts count against fs.aio-max-nr, one limit for
		// the whole host and outside any cgroup: one sandbox's
		// io_setup(65536) leaves none for the host or any other sandbox.
		// runsc implements AIO in its sentry, on the sandbox's memory.
		{id: "ESC-06", attempt: "io_setup(1)", iso: eperm, gvisor: is("allowed", "EPERM"), ctl: is("allowed"),
			alike: rt == "gvisor"},
		{id: "ESC-06", attempt: "kexec_load(bad flag)", iso: eperm, ctl: is("EINVAL", "ENOSYS")},
		{id: "ESC-06", attempt: "init_module(empty image)", iso: eperm, ctl: is("ENOEXEC", "ENOSYS")},
		{id: "ESC-06", attempt: "process_vm_readv(self, address 0)", iso: eperm, ctl: is("EFAULT")},
		// The query the profile allows, beside the persona it refuses.
		{id: "ESC-06", attempt: "personality(query)", iso: is("allowed"), ctl: is("allowed"), alike: true},
		{id: "ESC-06", attempt: "personality(READ_IMPLIES_EXEC)", iso: eperm, ctl: is("allowed")},

		// ESC-11: opened for writing, never written.
		{id: "ESC-11", attempt: "open for writing /proc/sys/kernel/core_pattern", iso: is("EACCES", "EROFS", "ENOENT"), ctl: is("allowed")},
		{id: "ESC-11", attempt: "open for writing /proc/sysrq-trigger", iso: is("EACCES", "EROFS", "ENOENT"), ctl: hostHas("/proc/sysrq-trigger"), alike: hostLacks("/proc/sysrq-trigger")},
		{id: "ESC-11", attempt: "open for writing /proc/sys/vm/drop_caches", iso: is("EACCES", "EROFS", "ENOENT"), ctl: is("allowed")},
		{id: "ESC-11", attempt: "open for writing /sys/kernel/profiling", iso: is("EACCES", "EROFS", "ENOENT"), ctl: hostHas("/sys/kernel/profiling"), alike: hostLacks("/sys/kernel/profiling")},
		{id: "ESC-11", attempt: "open for writing <cgroup>/release_agent", iso: is("EACCES", "EROFS", "ENOENT"), ctl: is("allowed")},
		// Masked: empty or absent. /proc/kcore and /proc/sched_debug may
		// not exist on this kernel at all.
		{id: "ESC-11", attempt: "read /proc/kcore", iso: is("denied", "ENOENT", "EACCES"), ctl: hostHas("/proc/kcore"), alike: hostLacks("/proc/kcore")},
		{id: "ESC-11", attempt: "read /proc/keys", iso: is("denied", "ENOENT", "EACCES"), ctl: is("allowed")},
		{id: "ESC-11", attempt: "read /proc/timer_list", iso: is("denied", "ENOENT", "EACCES"), ctl: is("allowed")},
		{id: "ESC-11", attempt: "read /proc/sched_debug", iso: is("denied", "ENOENT", "EACCES"), ctl: hostHas("/proc/sched_debug"), alike: hostLacks("/proc/sched_debug")},
		{id: "ESC-11", attempt: "read /proc/interrupts", iso: is("denied", "ENOENT", "EACCES"), ctl: is("allowed")},
		{id: "ESC-11", attempt: "list /sys/firmware", iso: is("denied", "ENOENT", "EACCES"), ctl: is("allowed")},
		// A private cgroup namespace: every hierarchy at its root, or (pids,
		// on the container runtime) at the workload's own child of it.
		{id: "ESC-11", attempt: "read /proc/self/cgroup", iso: both(is("allowed"), detailMatches(`^(\d+:[^: ]*:/(workload)?( |$))+$`)),
			ctl: reportOnly("the host's own cgroups")},

		// ESC-12: the control sees the agent sockets of every sandbox in
		// the data directory (no isolation at all).
		{id: "ESC-12", attempt: "unix sockets under /run, /tmp and the data dir", iso: is("denied"),
			// The sandbox's own agent makes its socket inside (host-uds);
			// it answers only the daemon's token.
			gvisor: func(r probe.Result) error {
				if r.Result == probe.Denied || r.Detail == "/run/berth-sock/agent.sock" {
					return nil
				}
				return fmt.Errorf("sockets: %s", r.Detail)
			},
			ctl: is("allowed")},
		{id: "ESC-12", attempt: "abstract sockets in /proc/net/unix", iso: is("denied"), ctl: reportOnly("the host may have none")},
		{id: "ESC-12", attempt: "connect 127.0.0.1:<daemon port>", iso: is("ECONNREFUSED"), ctl: is("allowed")},

		// ESC-13.
		{id: "ESC-13", attempt: "mknod(char device)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-13", attempt: "mknod(block device)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-13", attempt: "open /dev/mem", iso: is("ENOENT"), ctl: hostHas("/dev/mem"), alike: hostLacks("/dev/mem")},
		{id: "ESC-13", attempt: "open /dev/kmsg", iso: is("ENOENT"), ctl: hostHas("/dev/kmsg"), alike: hostLacks("/dev/kmsg")},
		{id: "ESC-13", attempt: "open /dev/kvm", iso: is("ENOENT"), ctl: hostHas("/dev/kvm"), alike: hostLacks("/dev/kvm")},
		{id: "ESC-13", attempt: "open /dev/net/tun", iso: is("ENOENT"), gvisor: is("allowed", "ENOENT"), ctl: hostHas("/dev/net/tun"),
			alike: rt == "gvisor" || hostLacks("/dev/net/tun")},
		{id: "ESC-13", attempt: "list /dev", iso: devIn(sandboxDev), gvisor: devIn(sandboxDev, gvisorDev),
			ctl: func(r probe.Result) error {
				if devIn(sandboxDev, gvisorDev)(r) == nil {
					return fmt.Errorf("the host's /dev passes the sandbox check: %s", r.Detail)
				}
				return nil
			}},

		// ESC-14.
		{id: "ESC-14", attempt: "kill(<daemon pid>, 0)", iso: is("ESRCH"), ctl: is("allowed")},
		{id: "ESC-14", attempt: "kill(<other tenant's pid>, 0)", iso: is("ESRCH"), ctl: is("allowed")},
		// The probe never traces a host's init; the control's ptrace is
		// on a child of its own, and a call on pid 1 that is reached but
		// refused (ESRCH: not its tracee).
		{id: "ESC-14", attempt: "ptrace(PTRACE_SEIZE, pid 1)", iso: eperm, ctl: both(is("error"), detailMatches(notRoot))},
		{id: "ESC-14", attempt: "ptrace(PTRACE_PEEKDATA, pid 1)", iso: eperm, ctl: is("ESRCH")},
		// /proc/<pid>/mem needs no ptrace syscall, only ptrace access:
		// the agent must not be open to the sandbox's own uid (it holds
		// the daemon's token for it, and host-side descriptors). The
		// control opens a child of its own, as the sandbox may.
		{id: "ESC-14", attempt: "open /proc/1/mem for writing", iso: is("EACCES", "EPERM"), ctl: both(is("error"), detailMatches(notRoot))},
		{id: "ESC-14", attempt: "open /proc/<own child>/mem for writing", iso: is("allowed"), ctl: is("allowed"), alike: true},
		{id: "ESC-14", attempt: "ptrace(PTRACE_SEIZE, own child)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-14", attempt: "kill(-1, 0)", iso: reportOnly("reaches only the sandbox"), ctl: reportOnly("signal 0")},

		// ESC-16: the host side checks the file's owner.
		{id: "ESC-16", attempt: "read /proc/self/uid_map", iso: reportOnly("no user namespace; the uid is unprivileged"), ctl: is("allowed")},
		{id: "ESC-16", attempt: "create a file in the working directory",
			iso: both(is("allowed"), detailMatches(`owned by uid [3-9]\d{5,} .*process uid [3-9]\d{5,} euid [3-9]\d{5,}$`)),
			ctl: both(is("allowed"), detailMatches(`owned by uid 0 `))},

		// ESC-17: families the seccomp profile refuses, and raw IP
		// sockets (CAP_NET_RAW).
		{id: "ESC-17", attempt: "socket(AF_PACKET, SOCK_RAW)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-17", attempt: "socket(AF_INET, SOCK_RAW, ICMP)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-17", attempt: "socket(AF_INET6, SOCK_RAW, ICMPV6)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-17", attempt: "socket(AF_VSOCK)", iso: eperm, ctl: reached("EPERM")},
		{id: "ESC-17", attempt: "socket(AF_ALG)", iso: eperm, ctl: reached("EPERM")},

		// ESC-18.
		{id: "ESC-18", attempt: "clock_settime(no such clock)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-18", attempt: "settimeofday(NULL, NULL)", iso: eperm, ctl: is("allowed")},
		{id: "ESC-18", attempt: "adjtimex(ADJ_TICK, tick 1)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-18", attempt: "reboot(bad magic)", iso: eperm, ctl: is("EINVAL")},
		{id: "ESC-18", attempt: "swapon(missing file)", iso: eperm, ctl: is("ENOENT")},
		{id: "ESC-18", attempt: "acct(missing file)", iso: eperm, ctl: is("ENOENT")},
		{id: "ESC-18", attempt: "quotactl(Q_GETFMT, missing device)", iso: eperm, ctl: is("ENOENT")},
		// Allowed by the profile, but without CAP_SYS_ADMIN over its own
		// UTS namespace the sandbox cannot rename even that; the test
		// checks the host's name did not change.
		{id: "ESC-18", attempt: "sethostname", iso: is("EPERM", "allowed"), ctl: is("allowed"), alike: true},

		// NET-01.
		{id: "NET-01", attempt: "list interfaces", iso: is("denied"), ctl: is("allowed")},
		{id: "NET-01", attempt: "connect 1.1.1.1:53", iso: is("ENETUNREACH"), ctl: reached("ENETUNREACH")},
		{id: "NET-01", attempt: "connect [2606:4700:4700::1111]:53", iso: is("ENETUNREACH"), ctl: reportOnly("the host may have no IPv6 route")},
		{id: "NET-01", attempt: "resolve example.com", iso: reached("allowed"), ctl: reportOnly("the host may have no resolver either")},

		// NET-04: the daemon listens on 127.0.0.1 only; the control
		// reaches it on the spellings of that address.
		{id: "NET-04", attempt: "connect 127.0.0.1:<daemon port>", iso: is("ECONNREFUSED"), ctl: is("allowed")},
		{id: "NET-04", attempt: "connect 127.1.2.3:<daemon port>", iso: is("ECONNREFUSED"), ctl: reportOnly("the daemon binds 127.0.0.1 only")},
		{id: "NET-04", attempt: "connect ::1:<daemon port>", iso: is("ECONNREFUSED"), ctl: reportOnly("the daemon binds 127.0.0.1 only")},
		{id: "NET-04", attempt: "connect localhost:<daemon port>", iso: is("ECONNREFUSED"), ctl: is("allowed")},
		{id: "NET-04", attempt: "connect 0.0.0.0:<daemon port>", iso: is("ECONNREFUSED"), ctl: is("allowed")},
		{id: "NET-04", attempt: "connect <host ip>:<daemon port>", iso: is("ENETUNREACH"), ctl: reached("ENETUNREACH")},

		// RES-06 and RES-13.
		{id: "RES-06", attempt: "root mounted read-only", iso: is("denied"), ctl: is("allowed")},
		{id: "RES-06", attempt: "create a file in /", iso: is("EROFS"), gvisor: is("EROFS", "EACCES"), ctl: is("allowed")},
		{id: "RES-06", attempt: "create a file in /etc", iso: is("EROFS"), gvisor: is("EROFS", "EACCES"), ctl: is("allowed")},
		{id: "RES-06", attempt: "create a file in /usr", iso: is("EROFS"), gvisor: is("EROFS", "EACCES"), ctl: is("allowed")},
		{id: "RES-13", attempt: "RLIMIT_CORE", iso: is("denied"), ctl: reportOnly("the host's own default")},
	}
}

// TestSecurityProbes runs every light probe in an isolated sandbox and in
// the process-runtime control, and judges each attempt in both.
func TestSecurityProbes(t *testing.T) {
	t.Parallel()
	rt := isolatedRuntime(t)
	d := testenv.StartDaemon(t, nil)
	res := securityResources
	iso := newSandboxOf(t, d, rt, &res)
	other := newSandboxOf(t, d, rt, &res)
	ctl := newSandboxOf(t, d, "process", nil)
	otherAgents := d.AgentPIDs(other.ID)
	if len(otherAgents) == 0 {
		t.Fatalf("no agent process for %s", other.ID)
	}
	hostname, _ := os.Hostname()

	args := append(probeEnv(t, d), "--other-pid", strconv.Itoa(otherAgents[0]), "all")
	var isoRes, ctlRes, otherRes map[string]probe.Result
	var isoErr, ctlErr, otherErr error
	var wg sync.WaitGroup
	wg.Go(func() { isoRes, isoErr = probeResults(d, iso, probeBinary(t, iso), args...) })
	wg.Go(func() { ctlRes, ctlErr = probeResults(d, ctl, probeBinary(t, ctl), args...) })
	wg.Go(func() { otherRes, otherErr = probeResults(d, other, probeBinary(t, other), "ESC-16") })
	wg.Wait()
	for _, err := range []error{isoErr, ctlErr, otherErr} {
		if err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range securityCases(rt, iso.ID) {
		t.Run(tc.id+" "+tc.attempt, func(t *testing.T) {
			if strings.Contains(tc.attempt, "<host ip>") && hostIP() == "" {
				testenv.Missing(t, "this host has no non-loopback IPv4 address")
			}
			key := tc.id + " " + tc.attempt
			ir, ok1 := isoRes[key]
			cr, ok2 := ctlRes[key]
			if !ok1 || !ok2 {
				t.Fatalf("no result for %q (%s: %v, control: %v)", key, rt, ok1, ok2)
			}
			t.Logf("%s: %s", rt, ir)
			t.Logf("control: %s", cr)
			want := tc.iso
			if rt == "gvisor" && tc.gvisor != nil {
				want = tc.gvisor
			}
			if want != nil {
				if err := want(ir); err != nil {
					t.Errorf("%s: %s: %v", rt, ir, err)
				}
			}
			if tc.ctl != nil {
				if err := tc.ctl(cr); err != nil {
					t.Errorf("control (process runtime): %s: %v; the probe may be broken", cr, err)
				}
				// The control is positive: what the unprotected run shows
				// would fail the isolated runtime's check.
				if want != nil && !tc.alike && want(cr) == nil {
					t.Errorf("control (process runtime): %s passes the %s check too, so the check proves nothing", cr, rt)
				}
			}
		})
	}

	t.Run("ESC-16 host owner", func(t *testing.T) {
		// The file the probe made is owned, on the host, by the sandbox's
		// own unprivileged uid, another than its neighbour's.
		owner := func(sb apitype.Sandbox) uint32 {
			fi, err := os.Stat(filepath.Join(d.HostWorkspace(sb.ID), ".berth-probe-owner"))
			if err != nil {
				t.Fatal(err)
			}
			return fi.Sys().(*syscall.Stat_t).Uid
		}
		a, b, c := owner(iso), owner(other), owner(ctl)
		if a < 300000 || b < 300000 || a == b {
			t.Errorf("host owners of the sandboxes' files: %d and %d, want distinct uids >= 300000", a, b)
		}
		if c != 0 {
			t.Errorf("control: host owner %d, want 0 (the process runtime runs as the daemon)", c)
		}
		inside := otherRes["ESC-16 create a file in the working directory"].Detail
		if !strings.Contains(inside, fmt.Sprintf("owned by uid %d ", b)) {
			t.Errorf("inside the neighbour: %q, want the host uid %d", inside, b)
		}
	})
	t.Run("ESC-18 host name", func(t *testing.T) {
		if now, _ := os.Hostname(); now != hostname {
			t.Errorf("host name = %q after the probes, want %q", now, hostname)
		}
	})
	t.Run("RES-07 descriptors", func(t *testing.T) {
		// EMFILE at a bounded RLIMIT_NOFILE. The control has a limit of
		// its own (the daemon's), so it cannot show a difference; the
		// bound is what is checked.
		got := mustProbe(t, d, iso, "RES-07")["RES-07 open until it fails"]
		var n, soft, hard int
		fmt.Sscanf(got.Detail, "%d descriptors opened; RLIMIT_NOFILE %d (hard %d)", &n, &soft, &hard)
		if got.Outcome() != "EMFILE" || hard <= 0 || hard > 65536 || n > hard {
			t.Errorf("%s, want EMFILE at a limit of at most 65536", got)
		}
	})
	t.Run("AUTH-10 agent token on the daemon's API", func(t *testing.T) {
		// The sandbox can get at its agent's token (it lives in the
		// agent, inside the sandbox). The daemon's API must refuse it;
		// the admin key, the control, is accepted.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(d.DataDir, daemon.DBFile)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var token string
		if err := db.QueryRow(`SELECT agent_token FROM sandboxes WHERE id = $1`, iso.ID).Scan(&token); err != nil || token == "" {
			t.Fatalf("reading the agent token: %q, %v", token, err)
		}
		ctx := context.Background()
		withToken := client.New(d.URL, token)
		if _, err := withToken.ListSandboxes(ctx); !client.IsCode(err, errcode.Unauthenticated) {
			t.Errorf("ListSandboxes with the agent token: %v, want unauthenticated", err)
		}
		if _, err := withToken.GetSandbox(ctx, other.ID); !client.IsCode(err, errcode.Unauthenticated) {
			t.Errorf("GetSandbox(neighbour) with the agent token: %v, want unauthenticated", err)
		}
		if _, err := d.Client.GetSandbox(ctx, other.ID); err != nil {
			t.Errorf("control: GetSandbox(neighbour) with the admin key: %v", err)
		}
	})
	t.Run("AUTH-10 no credentials inside", func(t *testing.T) {
		// Whatever the sandbox can read of its init and itself holds
		// neither the admin key nor an agent token.
		c := run(t, d, iso.ID, apitype.CreateCommandRequest{
			Command: "cat /proc/1/cmdline /proc/1/environ /proc/self/environ; env; ls -la / /run /run/berth",
		})
		for _, secret := range []string{d.Token, "agt_"} {
			if strings.Contains(c.Stdout+c.Stderr, secret) {
				t.Errorf("the sandbox sees a credential (%.4s...): %q", secret, c.Stdout)
			}
		}
	})
}

// TestSecurityNetSandboxToSandbox (NET-17): a listener in one isolated
// sandbox is unreachable from another. Controls: the listener's own
// sandbox reaches it, and between two process-runtime sandboxes (no
// isolation) a listener is reachable.
func TestSecurityNetSandboxToSandbox(t *testing.T) {
	t.Parallel()
	rt := isolatedRuntime(t)
	d := testenv.StartDaemon(t, nil)
	res := securityResources
	a := newSandboxOf(t, d, rt, &res)
	b := newSandboxOf(t, d, rt, &res)
	p := newSandboxOf(t, d, "process", nil)
	q := newSandboxOf(t, d, "process", nil)

	isoPort := serveIn(t, d, b)
	hostPort := serveIn(t, d, p)
	tests := []struct {
		name string
		from apitype.Sandbox
		port int
		want string
	}{
		{"isolated to isolated", a, isoPort, "ECONNREFUSED"},
		{"isolated to process", a, hostPort, "ECONNREFUSED"},
		{"control: within the listener's sandbox", b, isoPort, "allowed"},
		{"control: process to process", q, hostPort, "allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustProbe(t, d, tt.from, "--peer-port", strconv.Itoa(tt.port), "NET-17")["NET-17 connect 127.0.0.1:<peer port>"]
			if got.Outcome() != tt.want {
				t.Errorf("from %s to port %d: %s, want %s", tt.from.Runtime, tt.port, got, tt.want)
			}
		})
	}
}

// serveIn starts "berth probe --serve 127.0.0.1:0" in sb, waits until it
// listens and returns its port. The listener is canceled at cleanup.
func serveIn(t *testing.T, d *testenv.Daemon, sb apitype.Sandbox) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{
		Argv:      []string{probeBinary(t, sb), "probe", "--json", "--serve", "127.0.0.1:0", "--serve-for", "2m"},
		TimeoutMS: 180000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = d.Client.Cancel(context.Background(), sb.ID, c.ID) })
	var addr string
	testenv.Eventually(t, 20*time.Second, "the listener to start", func() bool {
		got, err := d.Client.Command(ctx, sb.ID, c.ID, client.CommandQuery{})
		if err != nil || got.Done() {
			t.Fatalf("listener: %+v, %v", got, err)
		}
		for _, r := range probe.Parse(got.Stdout) {
			if r.Attempt == "listen" {
				addr = r.Detail
			}
		}
		return addr != ""
	})
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

// TestSecurityPolicyFromOutside reads the policy a sandbox runs under
// from the host (SECURITY.md lesson 3): cgroupfs for its limits, and
// /proc for the credentials of every thread of every process in its
// cgroup and for its mounts. The control, read the same way, is the
// process-runtime agent: it runs privileged and in no cgroup of ours.
func TestSecurityPolicyFromOutside(t *testing.T) {
	t.Parallel()
	rt := isolatedRuntime(t)
	d := testenv.StartDaemon(t, nil)
	res := apitype.Resources{CPUs: 0.5, MemoryMB: 96, Pids: 48, DiskMB: 64}
	sb := newSandboxOf(t, d, rt, &res)
	ctl := newSandboxOf(t, d, "process", nil)
	// Something to look at beyond the agent: a shell with a child, and a
	// Go program (many threads).
	serveIn(t, d, sb)
	ctx := context.Background()
	sh, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "sleep 120 & exec sleep 121", TimeoutMS: 180000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = d.Client.Cancel(context.Background(), sb.ID, sh.ID) })

	procs := cgroupProcs(sb.ID)
	testenv.Eventually(t, 10*time.Second, "the sandbox's processes to show in its cgroup", func() bool {
		procs = cgroupProcs(sb.ID)
		return len(procs) >= 4
	})
	fi, err := os.Stat(d.HostWorkspace(sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid

	t.Run("cgroup limits", func(t *testing.T) {
		// Read back from cgroupfs, not from the spec we generated.
		for _, tt := range []struct{ controller, file, want string }{
			{"memory", "memory.limit_in_bytes", strconv.Itoa(96 << 20)},
			{"memory", "memory.memsw.limit_in_bytes", strconv.Itoa(96 << 20)}, // no swap beyond the limit
			{"pids", "pids.max", pidsMax(rt, 48)},
			{"pids", "workload/pids.max", workloadPidsMax(rt, 48)},
			{"cpu", "cpu.cfs_quota_us", "50000"},
			{"cpu", "cpu.cfs_period_us", "100000"},
		} {
			p := filepath.Join(cgroupDir(tt.controller, sb.ID), tt.file)
			b, err := os.ReadFile(p)
			if os.IsNotExist(err) && tt.file == "memory.memsw.limit_in_bytes" {
				continue // swap accounting is off on this kernel
			}
			if tt.want == "" {
				if err == nil {
					t.Errorf("%s exists, want none", p)
				}
				continue
			}
			if got := strings.TrimSpace(string(b)); err != nil || got != tt.want {
				t.Errorf("%s = %q (%v), want %q", p, got, err, tt.want)
			}
		}
	})

	t.Run("every thread", func(t *testing.T) {
		for _, pid := range d.AgentPIDs(sb.ID) {
			if !slices.Contains(procs, pid) {
				t.Errorf("agent %d is not in the sandbox's cgroup %v", pid, procs)
			}
		}
		for _, pid := range procs {
			cmd := hostCmdline(pid)
			t.Logf("process %d in the cgroup: %.80s", pid, cmd)
			if rt == "gvisor" {
				// The host sees runsc's own processes (sandbox, gofer,
				// systrap stubs, whose command line is empty); the
				// sandbox's tasks live inside the sentry. runsc keeps a
				// few capabilities by design (its sentry and gofer work in
				// an empty root behind their own seccomp filters), so only
				// no_new_privs and seccomp are checked.
				if cmd != "" && !strings.HasPrefix(cmd, "runsc-") {
					t.Errorf("process %d in a gvisor sandbox's cgroup is not runsc's: %q", pid, cmd)
				}
				for _, p := range threadProblems(pid, -1) {
					t.Errorf("process %d (%.60s): %s", pid, cmd, p)
				}
				continue
			}
			for _, p := range threadProblems(pid, int(uid)) {
				t.Errorf("process %d (%.60s): %s", pid, cmd, p)
			}
			if soft, hard := coreLimit(pid); soft != "0" || hard != "0" {
				t.Errorf("process %d: core file size limit %s/%s, want 0/0", pid, soft, hard)
			}
		}
		// The control: the same reading finds the unprotected agent's
		// privileges, so the checks above can fail.
		agents := d.AgentPIDs(ctl.ID)
		if len(agents) != 1 {
			t.Fatalf("control agents: %v", agents)
		}
		if p := threadProblems(agents[0], int(uid)); len(p) < 3 {
			t.Errorf("control: the process-runtime agent shows %v, want capabilities, no_new_privs 0, seccomp 0 and uid 0 found", p)
		}
	})

	t.Run("mounts", func(t *testing.T) {
		pids := d.AgentPIDs(sb.ID)
		if rt == "gvisor" {
			// The sentry's own root is an empty read-only tmpfs; the
			// sandbox's mounts are served to it by the gofer.
			pids = nil
			for _, pid := range procs {
				if strings.HasPrefix(hostCmdline(pid), "runsc-") {
					pids = append(pids, pid)
				}
			}
		}
		if len(pids) == 0 {
			t.Fatal("no process to read mounts of")
		}
		for _, pid := range pids {
			mi, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
			t.Logf("process %d (%.40s) mounts:\n%s", pid, hostCmdline(pid), mi)
			for _, p := range mountProblems(pid, d.DataDir, sb.ID) {
				t.Errorf("process %d (%.40s): %s", pid, hostCmdline(pid), p)
			}
		}
		// The control lives in the host's mount namespace.
		if p := mountProblems(d.AgentPIDs(ctl.ID)[0], d.DataDir, ctl.ID); len(p) == 0 {
			t.Error("control: the host's mounts pass the sandbox's checks")
		}
	})
}

// cgroupDir is a sandbox's cgroup directory for a v1 controller, or its
// v2 directory.
func cgroupDir(controller, id string) string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return filepath.Join("/sys/fs/cgroup/berth", id)
	}
	return filepath.Join("/sys/fs/cgroup", controller, "berth", id)
}

// cgroupProcs lists the processes in a sandbox's pids cgroup and in the
// cgroups below it (the workload's).
func cgroupProcs(id string) []int {
	var out []int
	_ = filepath.WalkDir(cgroupDir("pids", id), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out
}

func hostCmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// threadProblems lists how the threads of pid fall short of the
// sandbox's policy: capability sets not empty, no_new_privs not set,
// seccomp not filtering, or (uid >= 0) a uid other than uid.
func threadProblems(pid, uid int) []string {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil // gone meanwhile
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/status")
		if err != nil {
			continue
		}
		st := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				st[k] = strings.Join(strings.Fields(v), " ")
			}
		}
		if uid >= 0 {
			for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
				if strings.Trim(st[k], "0") != "" {
					add(fmt.Sprintf("%s %s", k, st[k]))
				}
			}
			want := strings.Repeat(strconv.Itoa(uid)+" ", 4)
			if st["Uid"]+" " != want {
				add("Uid " + st["Uid"])
			}
		}
		if st["NoNewPrivs"] != "1" {
			add("NoNewPrivs " + st["NoNewPrivs"])
		}
		if st["Seccomp"] != "2" {
			add("Seccomp " + st["Seccomp"])
		}
	}
	return out
}

// coreLimit reads a process's RLIMIT_CORE from /proc/<pid>/limits.
func coreLimit(pid int) (soft, hard string) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "Max core file size")); strings.HasPrefix(line, "Max core file size") && len(f) >= 2 {
			return f[0], f[1]
		}
	}
	return "?", "?"
}

// mountProblems lists what in /proc/<pid>/mountinfo a sandbox must not
// have: a writable root, host secrets or state mounted in, the daemon's
// data other than the sandbox's own directory, or any socket.
func mountProblems(pid int, dataDir, id string) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	own := filepath.Join(dataDir, "sandboxes", id) + "/"
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	quotaDev := "" // the workspace's device, which has the disk quota
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/workspace" {
			quotaDev = f[2]
		}
	}
	var out []string
	rootRO := false
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		root, point, opts := f[3], f[4], strings.Split(f[5], ",")
		if point == "/" {
			rootRO = slices.Contains(opts, "ro") // the last mount on / counts
		}
		for _, host := range []string{"/etc/shadow", "/root", "/home", "/var", "/run/docker.sock", "/run/containerd"} {
			if point == host || strings.HasPrefix(point, host+"/") || root == host || strings.HasPrefix(root, host+"/") {
				add := fmt.Sprintf("mounts %s at %s", root, point)
				out = append(out, add)
			}
		}
		if (strings.HasPrefix(root, dataDir) && !strings.HasPrefix(root, own)) || strings.HasPrefix(point, dataDir) {
			out = append(out, fmt.Sprintf("mounts the daemon's data %s at %s", root, point))
		}
		if strings.HasSuffix(root, ".sock") || strings.HasSuffix(point, ".sock") {
			out = append(out, fmt.Sprintf("mounts a socket %s at %s", root, point))
		}
		// Writable space is on the workspace's device, which has the disk
		// quota, or in memory, which has the memory limit: anything else
		// is host disk the sandbox could fill past its disk_mb (RES-04).
		if sep := slices.Index(f, "-"); sep > 0 && sep+2 < len(f) && slices.Contains(opts, "rw") && f[2] != quotaDev {
			fstype, source := f[sep+1], f[sep+2]
			if !slices.Contains([]string{"tmpfs", "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2", "devtmpfs"}, fstype) {
				out = append(out, fmt.Sprintf("%s is writable on %s %s (%s), outside the disk quota", point, fstype, source, root))
			}
		}
	}
	if !rootRO {
		out = append(out, "the root is not mounted read-only")
	}
	return out
}

// TestSecurityNeighbours runs a fork bomb, a memory bomb and a disk fill,
// each in an isolated sandbox of its own, while their neighbour keeps
// answering and the daemon stays healthy; then every bombed sandbox is
// still deletable and leaves nothing behind. Each bomb has its sandbox to
// itself so that none starves another's start: a disk fill started while
// a fork bomb in the same sandbox holds every PID fails to start at all
// (EAGAIN), which made this test depend on which bomb the scheduler ran
// first. TestForkBombLeavesAgent covers a bomb's own sandbox.
func TestSecurityNeighbours(t *testing.T) {
	t.Parallel()
	rt := isolatedRuntime(t)
	d := testenv.StartDaemon(t, nil)
	res := securityResources
	b := newSandboxOf(t, d, rt, &res)
	type bomb struct {
		name string
		args []string
		sb   apitype.Sandbox
	}
	bombs := []*bomb{
		{name: "RES-01", args: []string{"RES-01", "--fork-max", "5000"}},
		// Caps of 8x the memory limit and 2x the disk limit keep a sandbox
		// without limits from taking the host down with it.
		{name: "RES-03", args: []string{"RES-03", "--memory-max-mb", strconv.Itoa(8 * int(res.MemoryMB))}},
		{name: "RES-04", args: []string{"RES-04", "--disk-max-mb", strconv.Itoa(2 * int(res.DiskMB))}},
	}
	for _, bm := range bombs {
		bm.sb = newSandboxOf(t, d, rt, &res)
	}
	// The bombs are bounded by these limits: make sure they hold before
	// setting them off.
	if got, _ := os.ReadFile(filepath.Join(cgroupDir("pids", bombs[0].sb.ID), "pids.max")); strings.TrimSpace(string(got)) != pidsMax(rt, 64) {
		t.Fatalf("pids.max of the sandbox = %q, want %s: not bombing an unbounded sandbox", got, pidsMax(rt, 64))
	}
	bin := probeBinary(t, bombs[0].sb)
	// The controls: in a process-runtime sandbox nothing stops the same
	// bombs below caps set above the limits (twice pids, memory and
	// disk), so the limits are what stops them in the isolated sandbox.
	t.Run("controls", func(t *testing.T) {
		ctl := newSandboxOf(t, d, "process", nil)
		for _, args := range [][]string{
			{"RES-01", "--fork-max", strconv.Itoa(2 * int(res.Pids))},
			{"RES-03", "--memory-max-mb", strconv.Itoa(2 * int(res.MemoryMB))},
			{"RES-04", "--disk-max-mb", strconv.Itoa(2 * int(res.DiskMB))},
		} {
			for _, r := range mustProbe(t, d, ctl, args...) {
				if r.Result != probe.Allowed {
					t.Errorf("control %v: %s, want it to reach its cap", args, r)
				}
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // generous; no timing is asserted
	defer cancel()
	type outcome struct {
		bomb *bomb
		c    apitype.Command
		err  error
	}
	var outcomes []outcome
	done := make(chan outcome, len(bombs))
	for _, bm := range bombs {
		go func() {
			argv := append([]string{bin, "probe", "--json"}, bm.args...)
			c, err := d.Client.Run(ctx, bm.sb.ID, apitype.CreateCommandRequest{Argv: argv, TimeoutMS: 60000})
			done <- outcome{bm, c, err}
		}()
	}
	// Meanwhile the neighbour and the daemon keep answering. The loop
	// ends with the bombs, or with ctx.
	answered := 0
	for left := len(bombs); left > 0; {
		select {
		case o := <-done:
			outcomes = append(outcomes, o)
			left--
			continue
		default:
		}
		if ctx.Err() != nil {
			t.Fatalf("the bombs did not end within 60s (%d left)", left)
		}
		c, err := d.Client.Run(ctx, b.ID, apitype.CreateCommandRequest{Command: "echo ok"})
		if err != nil || c.Stdout != "ok\n" {
			t.Errorf("neighbour: %q, %v; want ok", c.Stdout, err)
		}
		if err := d.Client.Health(ctx); err != nil {
			t.Errorf("daemon health: %v", err)
		}
		answered++
	}
	if answered == 0 {
		t.Error("the neighbour was never asked while the bombs ran")
	}

	for _, o := range outcomes {
		rs := probe.Parse(o.c.Stdout)
		t.Logf("%s: %s %s signal %q, %v: %v", o.bomb.name, o.c.Status, o.c.Reason, o.c.Signal, o.err, rs)
		switch o.bomb.name {
		case "RES-01":
			// The workload's own budget stops it, inside a sandbox that
			// keeps room for its agent (and, under gVisor, for runsc).
			if o.err != nil || len(rs) != 1 || rs[0].Outcome() != "EAGAIN" {
				t.Errorf("fork bomb: %v, %v; want fork to fail with EAGAIN at the workload's limit", rs, o.err)
			}
		case "RES-03":
			// The OOM killer ends the bomb: it never reports reaching its
			// cap. It may end the whole sandbox: under runsc the host OOM
			// killer picks the Sentry, and in a container a second OOM
			// kill can pick the agent (see docs/security.md). The daemon
			// must then record the sandbox failed, for oom.
			if o.err == nil && o.c.Status == apitype.CommandFailed && o.c.Reason == "oom" && len(rs) == 0 {
				break
			}
			if o.err == nil && (rt != "gvisor" || len(rs) != 0) {
				t.Errorf("memory bomb: %s %s signal %q %v, want it killed for the memory limit", o.c.Status, o.c.Reason, o.c.Signal, rs)
				break
			}
			testenv.Eventually(t, 20*time.Second, "the memory-bombed sandbox to be marked failed", func() bool {
				got, err := d.Client.GetSandbox(context.Background(), o.bomb.sb.ID)
				return err == nil && got.State == apitype.StateFailed
			})
			got, _ := d.Client.GetSandbox(context.Background(), o.bomb.sb.ID)
			t.Logf("the OOM killer ended the whole memory-bombed sandbox: %s (%s)", got.State, got.Reason)
			reasons := []string{"oom"}
			if rt == "gvisor" {
				// runsc removes the cgroup, and its OOM count, soon after
				// the Sentry dies: the daemon may be too late to see it.
				reasons = append(reasons, "agent_lost")
			}
			if !slices.Contains(reasons, got.Reason) {
				t.Errorf("memory-bombed sandbox failed with reason %q, want %v", got.Reason, reasons)
			}
		case "RES-04":
			if o.err != nil || len(rs) != 1 || !slices.Contains([]string{"ENOSPC", "EDQUOT"}, rs[0].Outcome()) {
				t.Errorf("disk fill: %v, %v; want ENOSPC or EDQUOT", rs, o.err)
				break
			}
			var mib int64
			fmt.Sscanf(rs[0].Detail, "wrote %d MiB", &mib)
			if mib > res.DiskMB {
				t.Errorf("disk fill: %s, want at most disk_mb (%d MiB) written", rs[0].Detail, res.DiskMB)
			}
		}
	}

	for _, bm := range bombs {
		delCtx, delCancel := context.WithTimeout(context.Background(), time.Minute)
		err := d.Client.DeleteSandbox(delCtx, bm.sb.ID)
		delCancel()
		if err != nil {
			t.Fatalf("deleting the %s sandbox: %v", bm.name, err)
		}
		id := bm.sb.ID
		testenv.Eventually(t, 10*time.Second, "the "+bm.name+" sandbox's processes to go", func() bool {
			return len(d.SandboxProcesses(id)) == 0 && len(cgroupProcs(id)) == 0
		})
		if dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "berth", id)); len(dirs) > 0 {
			t.Errorf("cgroups left after deleting the %s sandbox: %v", bm.name, dirs)
		}
		if dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "berth", id)); len(dirs) > 0 {
			t.Errorf("cgroups left after deleting the %s sandbox: %v", bm.name, dirs)
		}
		if _, err := os.Stat(filepath.Join(d.DataDir, "sandboxes", id)); !os.IsNotExist(err) {
			t.Errorf("the %s sandbox's directory is left after delete: %v", bm.name, err)
		}
	}
	if c := run(t, d, b.ID, apitype.CreateCommandRequest{Command: "echo ok"}); c.Stdout != "ok\n" {
		t.Errorf("neighbour after the deletes: %q", c.Stdout)
	}
}

// pidsMax is the pids.max of the cgroup of a sandbox asking for pids:
// containers get the agent's reserve on top (their workload cgroup has
// pids), gVisor's room for runsc's own threads.
func pidsMax(rt string, pids int) string {
	if rt == "gvisor" {
		return strconv.Itoa(pids + runtimes.GVisorPidsHeadroom)
	}
	return strconv.Itoa(pids + runtimes.AgentPidsReserve)
}

// workloadPidsMax is the pids.max of a container sandbox's workload
// cgroup; gVisor sandboxes have none on the host ("").
func workloadPidsMax(rt string, pids int) string {
	if rt == "gvisor" {
		return ""
	}
	return strconv.Itoa(pids)
}

// forkBombScript starts children (sleep) until that fails or 5000 run,
// prints how it failed, holds the children for argv[1] seconds (so every
// PID of the workload stays taken meanwhile), then kills and reaps them.
// Bounded in count (5000 children) and time (each child exits after 120s
// on its own). The children are spawned (vfork and exec), not forked
// copies of Python: under gVisor those cost the Sentry enough memory that
// the bomb is a memory bomb first.
const forkBombScript = `
import errno, os, shutil, signal, sys, time
sleep, hold = shutil.which("sleep"), float(sys.argv[1])
kids, err = [], None
while len(kids) < 5000:
    try:
        kids.append(os.posix_spawn(sleep, ["sleep", "120"], {}))
    except OSError as e:
        err = e.errno
        break
print("fork failed: %s after %d children" % (errno.errorcode.get(err, err), len(kids)), flush=True)
time.sleep(hold)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print("released", flush=True)
`

// TestForkBombLeavesAgent holds every PID a sandbox's workload may have
// and checks that the agent keeps answering: a command started before the
// bomb keeps its output, commands started meanwhile get an answer (a start
// refused for EAGAIN is one), the bomb's fork fails with EAGAIN, and once
// it lets go the same sandbox runs echo again. Before the workload had a
// PID budget apart from the agent's, the agent's Go runtime failed to
// start a thread in a container (fatal error: newosproc) and the sandbox
// was lost with its output; under gVisor runsc ran out of host PIDs and
// fork failed with ENOMEM.
func TestForkBombLeavesAgent(t *testing.T) {
	t.Parallel()
	rt := isolatedRuntime(t)
	d := testenv.StartDaemon(t, nil)
	res := securityResources
	sb := newSandboxOf(t, d, rt, &res)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	before := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "echo before"})
	if before.Stdout != "before\n" {
		t.Fatalf("echo before the bomb: %q", before.Stdout)
	}
	bomb, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{
		Argv: []string{"python3", "-c", forkBombScript, "20"}, TimeoutMS: 90000})
	if err != nil || bomb.Status != apitype.CommandRunning {
		t.Fatalf("starting the bomb: %+v, %v", bomb, err)
	}
	testenv.Eventually(t, 60*time.Second, "the bomb to run out of PIDs", func() bool {
		c, err := d.Client.Command(ctx, sb.ID, bomb.ID, client.CommandQuery{})
		if err != nil || c.Status != apitype.CommandRunning {
			t.Fatalf("the bomb while it forks: %s %s, %v; stderr: %s", c.Status, c.Reason, err, c.Stderr)
		}
		return strings.Contains(c.Stdout, "fork failed")
	})
	// The positive control: the bomb took every PID the workload has,
	// and the sandbox's cgroup still has room: for the agent (container),
	// or for runsc's own host threads (gVisor, whose workload is bounded
	// inside the Sentry, where the host cannot read it; the bomb's EAGAIN
	// below says the workload's limit stopped it, where ENOMEM would be
	// runsc out of host PIDs).
	sbCur, sbMax := cgroupPids(t, cgroupDir("pids", sb.ID))
	if rt == "container" {
		cur, max := cgroupPids(t, filepath.Join(cgroupDir("pids", sb.ID), "workload"))
		if cur < max {
			t.Errorf("during the bomb the workload has %d PIDs of %d: not exhausted", cur, max)
		}
		t.Logf("during the bomb: workload pids %d of %d", cur, max)
	}
	t.Logf("during the bomb: sandbox pids %d of %d", sbCur, sbMax)
	if sbCur >= sbMax {
		t.Errorf("during the bomb the sandbox's cgroup has %d PIDs of %d: nothing left for the agent or runsc", sbCur, sbMax)
	}

	// Meanwhile, the agent answers, with requests in parallel so that its
	// Go runtime wants threads.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo during", TimeoutMS: 10000})
			switch {
			case err != nil:
				errs <- fmt.Errorf("echo %d during the bomb: %w", i, err)
			case c.Status == apitype.CommandExited && c.Stdout == "during\n":
			case c.Status == apitype.CommandFailed && strings.Contains(c.Reason, "start:"):
				// Refused for want of PIDs: an answer, not a lost agent.
			default:
				errs <- fmt.Errorf("echo %d during the bomb: %s %s %q", i, c.Status, c.Reason, c.Stdout)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Client.Command(ctx, sb.ID, before.ID, client.CommandQuery{})
			if err != nil || c.Stdout != "before\n" {
				errs <- fmt.Errorf("the earlier command during the bomb: %q, %v", c.Stdout, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	var final apitype.Command
	testenv.Eventually(t, 60*time.Second, "the bomb to end", func() bool {
		final, err = d.Client.Command(ctx, sb.ID, bomb.ID, client.CommandQuery{WaitMS: 5000})
		if err != nil {
			t.Fatalf("waiting for the bomb: %v", err)
		}
		return final.Status != apitype.CommandRunning
	})
	t.Logf("the bomb: %s %q", final.Status, final.Stdout)
	if final.Status != apitype.CommandExited || !strings.Contains(final.Stdout, "fork failed: EAGAIN ") || !strings.Contains(final.Stdout, "released") {
		t.Errorf("the bomb: %s %s %q, stderr %q; want fork failed with EAGAIN, then released", final.Status, final.Reason, final.Stdout, final.Stderr)
	}
	if c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "echo after"}); c.Stdout != "after\n" {
		t.Errorf("echo after the bomb: %s %s %q", c.Status, c.Reason, c.Stdout)
	}
	if c, err := d.Client.Command(ctx, sb.ID, before.ID, client.CommandQuery{}); err != nil || c.Stdout != "before\n" {
		t.Errorf("the earlier command after the bomb: %q, %v", c.Stdout, err)
	}
	if got, err := d.Client.GetSandbox(ctx, sb.ID); err != nil || got.State != apitype.StateRunning {
		t.Errorf("the sandbox after the bomb: %s %s, %v; want running", got.State, got.Reason, err)
	}
}

// cgroupPids reads pids.current and pids.max of a cgroup directory.
func cgroupPids(t *testing.T, dir string) (current, max int) {
	t.Helper()
	read := func(name string) int {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return n
	}
	return read("pids.current"), read("pids.max")
}
