package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// needIsolated skips (fails under CI) unless the suites run on an
// isolated runtime; make test runs them on container and gvisor.
func needIsolated(t *testing.T) string {
	t.Helper()
	rt := testenv.Runtime()
	if rt != "container" && rt != "gvisor" {
		t.Skip("runs on an isolated runtime: make test sets BERTH_TEST_RUNTIME=container and gvisor")
	}
	return rt
}

// hostLeftovers lists what a sandbox could leave on the host: mounts, loop
// devices and cgroups naming it.
func hostLeftovers(t *testing.T, dataDir, id string) []string {
	t.Helper()
	var out []string
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, id) {
				out = append(out, "mount: "+line)
			}
		}
	}
	if entries, err := os.ReadDir("/sys/block"); err == nil {
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file"))
			if strings.Contains(string(b), id) {
				out = append(out, "loop device: "+e.Name())
			}
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/berth/" + id)
	if more, _ := filepath.Glob("/sys/fs/cgroup/berth/" + id); len(more) > 0 {
		cgroups = append(cgroups, more...)
	}
	for _, c := range cgroups {
		out = append(out, "cgroup: "+c)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", id)); err == nil {
		out = append(out, "directory: "+id)
	}
	return out
}

// TestIsolatedCreateRollsBack makes the OCI runtime fail after the
// sandbox's root and workspace disk are mounted: the create fails with a
// clear error and leaves no row, directory, mount, loop device or cgroup.
func TestIsolatedCreateRollsBack(t *testing.T) {
	t.Parallel()
	if needIsolated(t) != "container" {
		t.Skip("injects its failure through --oci-runtime, a container runtime setting")
	}
	d := testenv.StartDaemon(t, func(c *daemon.Config) { c.OCIRuntime = "false" })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "container"})
	if !client.IsCode(err, errcode.Unavailable) {
		t.Fatalf("create with a failing OCI runtime: err = %v, want unavailable", err)
	}
	list, err := d.Client.ListSandboxes(ctx)
	if err != nil || len(list) != 0 {
		t.Errorf("sandboxes after a failed create = %v, %v; want none", list, err)
	}
	entries, _ := os.ReadDir(filepath.Join(d.DataDir, "sandboxes"))
	for _, e := range entries {
		if left := hostLeftovers(t, d.DataDir, e.Name()); len(left) > 0 {
			t.Errorf("failed create of %s left %v", e.Name(), left)
		}
	}
	if len(entries) > 0 {
		t.Errorf("sandbox directories after a failed create: %d, want 0", len(entries))
	}
}

// TestIsolatedDeleteLeavesNothing checks, from the host, that an isolated
// sandbox had its mounts, loop device and cgroups while it lived (the
// positive control), and that deleting it leaves none of them.
func TestIsolatedDeleteLeavesNothing(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb := newSandbox(t, d)
	if c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "echo x > /workspace/f && sleep 300 &"}); c.Status != apitype.CommandExited {
		t.Fatalf("command: %s %s", c.Status, c.Reason)
	}
	before := hostLeftovers(t, d.DataDir, sb.ID)
	for _, want := range []string{"mount: ", "loop device: ", "cgroup: ", "directory: "} {
		if !strings.Contains(strings.Join(before, "\n"), want) {
			t.Errorf("while it runs, the sandbox has no %q on the host (%v): the probe is broken", want, before)
		}
	}
	if err := d.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if left := hostLeftovers(t, d.DataDir, sb.ID); len(left) > 0 {
		t.Errorf("delete left %v", left)
	}
	if left := d.SandboxProcesses(sb.ID); len(left) > 0 {
		t.Errorf("delete left processes %v", left)
	}
}

// TestIsolatedUIDsAreDistinct checks that two isolated sandboxes run as
// different unprivileged host uids, and that files they write belong, on
// the host, to those uids.
func TestIsolatedUIDsAreDistinct(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	uids := map[string]bool{}
	for range 2 {
		sb := newSandbox(t, d)
		c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "id -u && touch /workspace/mine"})
		uid := strings.TrimSpace(c.Stdout)
		if uid == "" || uid == "0" || uids[uid] {
			t.Errorf("sandbox %s runs as uid %q; want a non-root uid of its own (seen %v)", sb.ID, uid, uids)
		}
		uids[uid] = true
		fi, err := os.Stat(filepath.Join(d.HostWorkspace(sb.ID), "mine"))
		if err != nil {
			t.Fatal(err)
		}
		if owner := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)); owner != uid {
			t.Errorf("host owner of a file sandbox %s wrote = %s, want its uid %s", sb.ID, owner, uid)
		}
	}
}

// TestIsolatedTemplateSurvivesRestart: each daemon process builds a fresh
// host template; one that a running sandbox's overlay uses must stay
// whole when a restarted daemon builds the next.
func TestIsolatedTemplateSurvivesRestart(t *testing.T) {
	t.Parallel()
	rt := needIsolated(t)
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t); err != nil {
		t.Fatalf("stopping the daemon: %v", err)
	}
	d2 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d2.DeleteAll(t) })
	if _, err := d2.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt}); err != nil {
		t.Fatal(err) // builds the second template
	}
	templates, _ := filepath.Glob(filepath.Join(dataDir, "templates", "host-*"))
	if len(templates) != 2 {
		t.Errorf("templates = %v, want two: one per daemon process, both in use", templates)
	}
	c, err := d2.Client.Run(ctx, first.ID, apitype.CreateCommandRequest{Command: "ls /bin/sh /etc/passwd /etc/ssl/certs >/dev/null && echo whole"})
	if err != nil || c.Stdout != "whole\n" {
		t.Errorf("the first sandbox after the second template was built: %q %q (%s), %v", c.Stdout, c.Stderr, c.Status, err)
	}
}

// TestIsolatedDiskQuota fills a small workspace: the sandbox gets ENOSPC,
// an upload past the space left gets 429 disk_full with nothing left
// behind, and the host file system loses at most the quota.
func TestIsolatedDiskQuota(t *testing.T) {
	t.Parallel()
	rt := needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt, Resources: &apitype.Resources{DiskMB: 64}})
	if err != nil {
		t.Fatal(err)
	}
	c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; echo rc=$?"})
	if !strings.Contains(c.Stdout, "No space left on device") || strings.Contains(c.Stdout, "rc=0") {
		t.Errorf("filling a 64 MiB workspace: %q, want ENOSPC", c.Stdout)
	}
	img, err := os.Stat(filepath.Join(d.DataDir, "sandboxes", sb.ID, "workspace.img"))
	if err != nil {
		t.Fatal(err)
	}
	if used := img.Sys().(*syscall.Stat_t).Blocks * 512; used > 64<<20 {
		t.Errorf("the workspace image uses %d bytes on the host, more than its 64 MiB quota", used)
	}
	// Upload into the full workspace, larger than what is left.
	_, err = d.Client.WriteFile(ctx, sb.ID, "more.bin", strings.NewReader(strings.Repeat("x", 8<<20)), 0)
	if !client.IsCode(err, errcode.ResourceExhausted) || errcode.ReasonOf(err) != "disk_full" {
		t.Errorf("upload into a full workspace: err = %v, want resource_exhausted disk_full", err)
	}
	list, err := d.Client.ListFiles(ctx, sb.ID, ".", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Entries {
		if e.Name != "fill" {
			t.Errorf("after the failed upload the workspace has %q", e.Name)
		}
	}
	// Positive control: after freeing space the same upload works.
	if err := d.Client.Remove(ctx, sb.ID, "fill", false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.WriteFile(ctx, sb.ID, "more.bin", strings.NewReader(strings.Repeat("x", 8<<20)), 0); err != nil {
		t.Errorf("upload after freeing space: %v", err)
	}
}

// TestIsolatedThreadsAndTools runs ordinary programs under the seccomp
// profile: threads (clone3 must fall back to clone, or be allowed), a
// subprocess, and a compiler-free toolchain staple.
func TestIsolatedThreadsAndTools(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	sb := newSandbox(t, d)
	c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: `python3 -c '
import threading, subprocess
t = threading.Thread(target=print, args=("thread ok",)); t.start(); t.join()
print(subprocess.run(["echo", "subprocess ok"], capture_output=True, text=True).stdout, end="")
' && echo a,b | awk -F, '{print $2}' && git --version >/dev/null && echo git ok`})
	want := "thread ok\nsubprocess ok\nb\ngit ok\n"
	if c.Stdout != want {
		t.Errorf("ordinary programs: stdout %q, stderr %q (%s %s), want %q", c.Stdout, c.Stderr, c.Status, c.Reason, want)
	}
}

// TestPauseResume freezes an isolated sandbox with a command running: the
// command makes no progress while paused (checked from the host through
// the file it writes), the sandbox says paused, and the next call to it
// resumes it transparently. The process runtime, with no cgroup, refuses.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if rt := testenv.Runtime(); rt == "process" {
		sb := newSandbox(t, d)
		if _, err := d.Client.PauseSandbox(ctx, sb.ID); !client.IsCode(err, errcode.Unimplemented) || errcode.ReasonOf(err) != "pause_unsupported" {
			t.Errorf("pausing a process sandbox: err = %v, want unimplemented pause_unsupported", err)
		}
		return
	}
	sb := newSandbox(t, d)
	if _, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{
		Command: "i=0; while true; do i=$((i+1)); echo $i > /workspace/tick; sleep 0.05; done",
	}); err != nil {
		t.Fatal(err)
	}
	tick := func() string {
		b, _ := os.ReadFile(filepath.Join(d.HostWorkspace(sb.ID), "tick"))
		return strings.TrimSpace(string(b))
	}
	testenv.Eventually(t, 10*time.Second, "the counter to start", func() bool { return tick() != "" })
	got, err := d.Client.PauseSandbox(ctx, sb.ID)
	if err != nil || got.State != apitype.StatePaused {
		t.Fatalf("PauseSandbox = %s, %v; want paused", got.State, err)
	}
	frozen := tick()
	time.Sleep(300 * time.Millisecond) // the counter would tick about six times meanwhile
	if now := tick(); now != frozen {
		t.Errorf("the counter went from %s to %s while paused", frozen, now)
	}
	if again, err := d.Client.GetSandbox(ctx, sb.ID); err != nil || again.State != apitype.StatePaused {
		t.Errorf("GetSandbox of a paused sandbox = %s, %v; want paused (reading it does not wake it)", again.State, err)
	}
	// Any call that needs the sandbox wakes it.
	c, err := d.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo awake"})
	if err != nil || c.Stdout != "awake\n" {
		t.Fatalf("command on a paused sandbox = %q, %v; want awake", c.Stdout, err)
	}
	if again, _ := d.Client.GetSandbox(ctx, sb.ID); again.State != apitype.StateRunning {
		t.Errorf("state after a call = %s, want running", again.State)
	}
	testenv.Eventually(t, 10*time.Second, "the counter to move again", func() bool { return tick() != frozen })
	// Explicit pause, resume, and delete while paused.
	if _, err := d.Client.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Client.ResumeSandbox(ctx, sb.ID); err != nil || got.State != apitype.StateRunning {
		t.Fatalf("ResumeSandbox = %s, %v", got.State, err)
	}
	if _, err := d.Client.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatalf("deleting a paused sandbox: %v", err)
	}
	if left := hostLeftovers(t, d.DataDir, sb.ID); len(left) > 0 {
		t.Errorf("deleting a paused sandbox left %v", left)
	}
	if left := d.SandboxProcesses(sb.ID); len(left) > 0 {
		t.Errorf("deleting a paused sandbox left processes %v", left)
	}
}

// TestPausedSurvivesRestart: a paused sandbox (whose frozen agent cannot
// answer) is re-adopted as paused after a daemon crash, and wakes on use.
func TestPausedSurvivesRestart(t *testing.T) {
	t.Parallel()
	rt := needIsolated(t)
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	d := testenv.StartDaemonProcess(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	d.Kill9(t)
	d2 := testenv.StartDaemonProcess(t, dataDir)
	t.Cleanup(func() { d2.DeleteAll(t) })
	if got, err := d2.Client.GetSandbox(ctx, sb.ID); err != nil || got.State != apitype.StatePaused {
		t.Fatalf("after a restart the paused sandbox is %s (%s), %v; want paused", got.State, got.Reason, err)
	}
	if c, err := d2.Client.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo back"}); err != nil || c.Stdout != "back\n" {
		t.Errorf("command after the restart = %q, %v", c.Stdout, err)
	}
}
