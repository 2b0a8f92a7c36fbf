package testenv

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/httpapi"
)

// Daemon is a Berth daemon started for a test.
type Daemon struct {
	URL     string
	Token   string
	DataDir string
	Client  *client.Client
	// Cmd is set for daemons run as a separate process.
	Cmd *exec.Cmd

	exited  chan struct{} // closed when Cmd has been waited for
	waitErr error
}

// StartDaemon runs the real daemon in this process on 127.0.0.1:0 with a
// fresh data directory, the real berth binary as the sandbox agent, and the
// given config tweaks. At cleanup it deletes every sandbox through the API,
// stops the daemon and checks that no process of it is left.
func StartDaemon(t testing.TB, tweak func(*daemon.Config)) *Daemon {
	t.Helper()
	NeedLinux(t)
	NeedRuntime(t, Runtime())
	dir := ShortTempDir(t)
	cfg := daemon.Config{
		DataDir: filepath.Join(dir, "d"), Listen: "127.0.0.1:0", Version: "test",
		AgentBinary: Binary(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DefaultRuntime: Runtime(), UIDRegistry: UIDRegistry(t),
		// No warm job runtimes unless a test asks: they are containers
		// with Chromium or LibreOffice up.
		JobPools: map[string]int{"browser": 0, "office": 0},
		// No Chromium warmed ahead unless a test asks: most tests open no
		// browser session, and every daemon would start one and wait for
		// it at its stop. A session starts it when it needs it.
		BrowserWarmContexts: -1,
		// No rate limits unless a test sets them: tests that check other
		// things send requests faster than any client would, and a
		// failed-authentication test would throttle the rest of its
		// daemon. The limits' own tests set them.
		RateLimits: &httpapi.RateLimits{},
	}
	if os.Getenv("BERTH_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ready := make(chan string, 1)
	cfg.Ready = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(2 * time.Minute): // a loaded machine (the whole suite running) is slow to start one
		cancel()
		t.Fatal("daemon did not start within 2 minutes")
	}
	key, err := os.ReadFile(filepath.Join(cfg.DataDir, daemon.KeyFile))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	d := &Daemon{URL: "http://" + addr, Token: strings.TrimSpace(string(key)), DataDir: cfg.DataDir}
	d.Client = client.New(d.URL, d.Token)
	t.Cleanup(func() {
		d.DeleteAll(t)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("daemon did not stop within 30s")
		}
		CheckNoProcesses(t, cfg.DataDir)
	})
	return d
}

// UIDRegistry returns the sandbox uid registry of the tests' daemons: one
// file for every test of every test binary on this host, as every daemon
// of a host shares the host's. Per-test files would let two tests' daemons
// lease one uid, since each sees only the other's running processes, not
// its leases. It is not the host's own registry, so tests never hold uids
// in a developer's running daemon's file; leases of a test's data
// directory are reclaimed once the directory is gone. A test wanting
// another sets daemon.Config.UIDRegistry (or passes --uid-registry).
func UIDRegistry(testing.TB) string {
	return filepath.Join(os.TempDir(), "berth-test-uids")
}

// DeleteAll deletes every sandbox of the daemon; each failure fails t.
func (d *Daemon) DeleteAll(t testing.TB) {
	t.Helper()
	d.deleteAll(t.Errorf)
}

// deleteAll deletes every sandbox of the daemon it can, telling report
// what it cannot.
func (d *Daemon) deleteAll(report func(format string, args ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := d.Client.ListSandboxes(ctx)
	if err != nil {
		report("listing sandboxes at cleanup: %v", err)
		return
	}
	// A few at once: a test's cleanup waits for the slowest delete, not
	// for their sum (a gVisor sandbox takes a while to go).
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for _, sb := range list {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := d.Client.DeleteSandbox(ctx, sb.ID); err != nil {
				report("deleting %s at cleanup: %v", sb.ID, err)
			}
		})
	}
	wg.Wait()
}

// CheckNoProcesses fails t if any process still mentions dataDir, and
// kills such processes so that one failing test does not leak into others.
func CheckNoProcesses(t testing.TB, dataDir string) {
	t.Helper()
	var left []int
	deadline := time.Now().Add(5 * time.Second)
	for {
		left = ProcessesUnder(dataDir)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range left {
		b, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
		t.Errorf("process %d left behind: %s", pid, strings.ReplaceAll(string(b), "\x00", " "))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// StartDaemonProcess runs "berth serve" as a separate process on dataDir
// (so that a test can kill -9 it) and waits until it serves.
func StartDaemonProcess(t testing.TB, dataDir string, extraArgs ...string) *Daemon {
	t.Helper()
	bin := Binary(t)
	_ = os.Remove(filepath.Join(dataDir, daemon.InfoFile))
	NeedRuntime(t, Runtime())
	// No warm job runtimes or isolated browsers unless a test asks (a
	// later --job-pool or --browser-isolated-warm wins).
	args := append([]string{"serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--log-level", "debug",
		"--default-runtime", Runtime(), "--job-pool", "browser=0", "--job-pool", "office=0", "--browser-isolated-warm", "0",
		"--uid-registry", UIDRegistry(t)}, extraArgs...)
	cmd := exec.Command(bin, args...)
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(dataDir), "daemon.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{DataDir: dataDir, Cmd: cmd, exited: make(chan struct{})}
	go func() { d.waitErr = cmd.Wait(); close(d.exited) }()
	exited := d.exited
	t.Cleanup(func() {
		// A daemon that still runs deletes what it holds first: stopping
		// leaves sandboxes running for the next daemon, and the data
		// directory goes with the test. Best effort: a test may have made
		// a sandbox undeletable on purpose.
		select {
		case <-exited:
		default:
			if d.Client != nil {
				d.deleteAll(t.Logf)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var info daemon.Info
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dataDir, daemon.InfoFile))
		if err == nil && json.Unmarshal(b, &info) == nil && info.PID == cmd.Process.Pid {
			break
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(filepath.Dir(dataDir), "daemon.log"))
			t.Fatalf("daemon exited before serving:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon did not serve within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(dataDir, daemon.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	d.URL, d.Token = info.URL, strings.TrimSpace(string(key))
	d.Client = client.New(d.URL, d.Token)
	return d
}

// Stop sends SIGTERM to a process daemon and returns how it exited.
func (d *Daemon) Stop(t testing.TB) error {
	t.Helper()
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return d.waitErr
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop within 30s of SIGTERM")
		return nil
	}
}

// Kill9 kills a process daemon with SIGKILL and waits until it is gone.
func (d *Daemon) Kill9(t testing.TB) {
	t.Helper()
	if d.Cmd == nil {
		t.Fatal("Kill9 needs a daemon started with StartDaemonProcess")
	}
	_ = d.Cmd.Process.Kill()
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not die within 10s of SIGKILL")
	}
}

// Runtime is the sandbox runtime the end-to-end suites run on:
// $BERTH_TEST_RUNTIME, or process. make test runs them on every runtime.
func Runtime() string {
	if r := os.Getenv("BERTH_TEST_RUNTIME"); r != "" {
		return r
	}
	return "process"
}

// OnePass skips t in make test's container and gvisor passes: its
// subject (authentication, tenancy, the API's edges, the CLI's and MCP's
// plumbing) does not depend on the sandbox runtime, so the process-runtime
// pass covers it once. A test of what a runtime does (isolation,
// lifecycle, files, exec, terminals, services, egress, templates,
// hibernation) runs in every pass; docs/ARCHITECTURE.md's Testing has the
// rule.
func OnePass(t testing.TB) {
	t.Helper()
	if Runtime() != "process" {
		t.Skip("runs in the process-runtime pass of make test: its subject does not depend on the runtime")
	}
}

// OneIsolatedPass skips t except in make test's container pass: its
// subject needs an isolated runtime (a template build, say) but does not
// depend on which one, so the gvisor pass does not repeat it.
func OneIsolatedPass(t testing.TB) {
	t.Helper()
	if Runtime() != "container" {
		t.Skip("runs in the container pass of make test: it needs an isolated runtime, not a particular one")
	}
}

// NeedRuntime requires what runtime rt needs on this machine.
func NeedRuntime(t testing.TB, rt string) {
	t.Helper()
	switch rt {
	case "process":
	case "container":
		NeedRoot(t)
		if _, err := exec.LookPath("crun"); err != nil {
			NeedCommand(t, "runc")
		}
	case "gvisor":
		NeedRoot(t)
		NeedCommand(t, "runsc")
	default:
		t.Fatalf("BERTH_TEST_RUNTIME=%q is not a runtime", rt)
	}
}

// HostWorkspace is where sandbox id's workspace is on the host.
func (d *Daemon) HostWorkspace(id string) string {
	return filepath.Join(d.DataDir, "sandboxes", id, "workspace")
}

// SandboxProcesses lists the live processes of sandbox id, whatever its
// runtime: members of its cgroup, processes naming it (its agent, runsc),
// and processes working in its host directory.
func (d *Daemon) SandboxProcesses(id string) []int {
	seen := map[int]bool{}
	for _, f := range []string{
		"/sys/fs/cgroup/pids/berth/" + id + "/cgroup.procs",
		"/sys/fs/cgroup/berth/" + id + "/cgroup.procs",
	} {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				seen[pid] = true
			}
		}
	}
	for _, pid := range ProcessesUnder(id) {
		seen[pid] = true
	}
	for _, pid := range ProcessesUnder(filepath.Join(d.DataDir, "sandboxes", id)) {
		seen[pid] = true
	}
	var out []int
	for pid := range seen {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && len(b) > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// AgentPIDs lists the host processes that are sandbox id's agent: "berth
// agent --sandbox-id id" for process and container sandboxes, the runsc
// sandbox process for gvisor ones (the agent itself lives inside it).
func (d *Daemon) AgentPIDs(id string) []int {
	if pids := ProcessesUnder("--sandbox-id\x00" + id + "\x00"); len(pids) > 0 {
		return pids
	}
	var out []int
	for _, pid := range ProcessesUnder(id) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.Contains(string(b), "runsc-sandbox") || strings.Contains(string(b), "\x00boot\x00") {
			out = append(out, pid)
		}
	}
	return out
}
