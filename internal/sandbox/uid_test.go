package sandbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/testenv"
)

// testUIDs starts uids no account or process of a test host uses. The
// tests run in parallel, each on its own range: one runs processes as
// uids of its range, which the others' would skip.
const testUIDs = 4_000_000_000

// leaseOrFatal leases a uid for sandbox id of dataDir.
func leaseOrFatal(t *testing.T, r *sandbox.UIDRegistry, dataDir, id string) int {
	t.Helper()
	uid, err := r.Lease(dataDir, id, nil)
	if err != nil {
		t.Fatalf("Lease(%s) = %v", id, err)
	}
	return uid
}

func releaseOrFatal(t *testing.T, r *sandbox.UIDRegistry, uid int, dataDir, id string) bool {
	t.Helper()
	ok, err := r.Release(uid, dataDir, id)
	if err != nil {
		t.Fatalf("Release(%d, %s) = %v", uid, id, err)
	}
	return ok
}

func leasedUIDs(t *testing.T, r *sandbox.UIDRegistry) map[int]string {
	t.Helper()
	leases, err := r.Leases()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, l := range leases {
		out[l.UID] = l.SandboxID
	}
	return out
}

// TestUIDRegistryConcurrentDaemons leases from one registry file through
// many registries at once, as daemons of one host do (each its own open
// file, so the flock is what orders them): no uid is handed out twice.
func TestUIDRegistryConcurrentDaemons(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	path := filepath.Join(t.TempDir(), "registry", "uids")
	const daemons, each = 8, 10
	var (
		mu   sync.Mutex
		got  []int
		errs []error
		wg   sync.WaitGroup
	)
	for d := range daemons {
		dataDir := t.TempDir()
		wg.Go(func() {
			r := sandbox.NewUIDRegistry(path, testUIDs, 1000)
			for i := range each {
				uid, err := r.Lease(dataDir, fmt.Sprintf("sbx_%d_%d", d, i), nil)
				mu.Lock()
				got, errs = append(got, uid), append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	want := make([]int, daemons*each)
	for i := range want {
		want[i] = testUIDs + i
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uids leased by %d concurrent daemons (-want +got):\n%s", daemons, diff)
	}
	if n := len(leasedUIDs(t, sandbox.NewUIDRegistry(path, testUIDs, 1000))); n != daemons*each {
		t.Errorf("registry holds %d leases, want %d", n, daemons*each)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("registry file mode = %v (%v), want 0600", fi.Mode(), err)
	}
}

// TestUIDRegistryCoolDown: a released uid goes to the back of the line,
// after every never-used uid and every uid released before it.
func TestUIDRegistryCoolDown(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	r := sandbox.NewUIDRegistry(filepath.Join(t.TempDir(), "uids"), testUIDs, 4)
	dataDir := t.TempDir()
	a := leaseOrFatal(t, r, dataDir, "sbx_a")
	b := leaseOrFatal(t, r, dataDir, "sbx_b")
	if !releaseOrFatal(t, r, a, dataDir, "sbx_a") {
		t.Fatal("releasing a lease with nothing left was refused")
	}
	c := leaseOrFatal(t, r, dataDir, "sbx_c")
	d := leaseOrFatal(t, r, dataDir, "sbx_d")
	releaseOrFatal(t, r, b, dataDir, "sbx_b")
	e := leaseOrFatal(t, r, dataDir, "sbx_e")
	f := leaseOrFatal(t, r, dataDir, "sbx_f")
	got := []int{a, b, c, d, e, f}
	want := []int{testUIDs, testUIDs + 1, testUIDs + 2, testUIDs + 3, testUIDs, testUIDs + 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uids of a, b, c, d, e, f (-want +got):\n%s", diff)
	}
	if _, err := r.Lease(dataDir, "sbx_g", nil); errcode.ReasonOf(err) != "uid_range_exhausted" {
		t.Errorf("Lease with every uid leased = %v, want reason uid_range_exhausted", err)
	}
	// The caller's own store's uids are never leased.
	releaseOrFatal(t, r, c, dataDir, "sbx_c")
	if _, err := r.Lease(dataDir, "sbx_g", map[int]bool{c: true}); errcode.ReasonOf(err) != "uid_range_exhausted" {
		t.Errorf("Lease excluding the only free uid = %v, want reason uid_range_exhausted", err)
	}
	if g := leaseOrFatal(t, r, dataDir, "sbx_g"); g != c {
		t.Errorf("Lease without exclusions = %d, want the free %d", g, c)
	}
}

// TestUIDRegistryKeepsLeaseOfLeftovers: a lease is not released while
// anything of its sandbox is left in the data directory, its own directory
// or a copy moved aside.
func TestUIDRegistryKeepsLeaseOfLeftovers(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	r := sandbox.NewUIDRegistry(filepath.Join(t.TempDir(), "uids"), testUIDs, 8)
	dataDir := t.TempDir()
	for _, dir := range []string{"sandboxes/sbx_x", "quarantine/sbx_x", "quarantine/2026/sbx_x"} {
		t.Run(filepath.Dir(dir), func(t *testing.T) {
			uid := leaseOrFatal(t, r, dataDir, "sbx_x")
			p := filepath.Join(dataDir, dir)
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if releaseOrFatal(t, r, uid, dataDir, "sbx_x") {
				t.Errorf("Release with %s left = released, want held", dir)
			}
			if leasedUIDs(t, r)[uid] != "sbx_x" {
				t.Errorf("lease of %d gone while %s is left", uid, dir)
			}
			if err := os.RemoveAll(filepath.Join(dataDir, filepath.Dir(dir))); err != nil {
				t.Fatal(err)
			}
			if !releaseOrFatal(t, r, uid, dataDir, "sbx_x") {
				t.Errorf("Release with nothing left = held, want released")
			}
		})
	}
}

// TestUIDRegistryKeepsUIDOfLiveProcess runs a real process as a uid: while
// it lives, the uid's lease is not released and the uid is not leased
// (even never-used); once it is gone, both happen.
func TestUIDRegistryKeepsUIDOfLiveProcess(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	testenv.NeedRoot(t)
	const testUIDs = testUIDs + 100_000
	r := sandbox.NewUIDRegistry(filepath.Join(t.TempDir(), "uids"), testUIDs, 3)
	dataDir := t.TempDir()
	runAs := func(uid int) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	stop := func(cmd *exec.Cmd) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // reaped: no zombie left either
	}

	// A never-used uid a process runs as is skipped.
	squatter := runAs(testUIDs)
	if uid := leaseOrFatal(t, r, dataDir, "sbx_a"); uid != testUIDs+1 {
		t.Errorf("Lease with a process as %d = %d, want %d", testUIDs, uid, testUIDs+1)
	}
	stop(squatter)

	// A lease whose uid a process still runs as is held.
	uid := leaseOrFatal(t, r, dataDir, "sbx_b")
	left := runAs(uid)
	if releaseOrFatal(t, r, uid, dataDir, "sbx_b") {
		t.Errorf("Release of %d with a process of it alive = released, want held", uid)
	}
	if got := leasedUIDs(t, r)[uid]; got != "sbx_b" {
		t.Errorf("lease of %d = %q, want sbx_b kept", uid, got)
	}
	stop(left)
	if !releaseOrFatal(t, r, uid, dataDir, "sbx_b") {
		t.Errorf("Release of %d after its process is gone = held, want released", uid)
	}
}

// TestUIDRegistryReconcile: a daemon's store decides its own leases; data
// directories that are gone lose theirs; another's lease of a uid the
// store uses is reported, not taken.
func TestUIDRegistryReconcile(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	r := sandbox.NewUIDRegistry(filepath.Join(t.TempDir(), "uids"), testUIDs, 16)
	mine, other, gone := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	kept := leaseOrFatal(t, r, mine, "sbx_kept")
	stale := leaseOrFatal(t, r, mine, "sbx_stale")
	failed := leaseOrFatal(t, r, mine, "sbx_failed") // its files are left
	if err := os.MkdirAll(filepath.Join(mine, "sandboxes", "sbx_stale_files"), 0o700); err != nil {
		t.Fatal(err)
	}
	staleFiles := leaseOrFatal(t, r, mine, "sbx_stale_files")
	others := leaseOrFatal(t, r, other, "sbx_others")
	goneUID := leaseOrFatal(t, r, gone, "sbx_gone")
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	const adopted = testUIDs + 10 // recorded before the registry knew it
	conflicts, err := r.Reconcile(mine, map[string]int{
		"sbx_kept": kept, "sbx_failed": failed, "sbx_adopted": adopted, "sbx_shared": others,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{kept: "sbx_kept", failed: "sbx_failed", staleFiles: "sbx_stale_files",
		others: "sbx_others", adopted: "sbx_adopted"}
	if diff := cmp.Diff(want, leasedUIDs(t, r)); diff != "" {
		t.Errorf("leases after Reconcile (-want +got):\n%s", diff)
	}
	if len(conflicts) != 1 || conflicts[0].UID != others || conflicts[0].SandboxID != "sbx_shared" ||
		conflicts[0].Holder.DataDir != other {
		t.Errorf("conflicts = %+v, want uid %d of sbx_shared held by %s", conflicts, others, other)
	}
	// Released uids are reused last, oldest release first; stale and
	// gone were released, the adopted uid is leased, not reused.
	var next []int
	for i := range 16 - len(want) {
		next = append(next, leaseOrFatal(t, r, mine, fmt.Sprintf("sbx_new%d", i)))
	}
	if tail := next[len(next)-2:]; !slices.Contains(tail, stale) || !slices.Contains(tail, goneUID) || slices.Contains(next, adopted) {
		t.Errorf("uids leased after Reconcile = %v, want %d and %d last and never %d", next, stale, goneUID, adopted)
	}
}

// TestUIDRegistryWithoutFile: reconciling a daemon without isolated
// sandboxes makes no registry file.
func TestUIDRegistryWithoutFile(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	path := filepath.Join(t.TempDir(), "none", "uids")
	if _, err := sandbox.NewUIDRegistry(path, testUIDs, 4).Reconcile(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("Reconcile with nothing live made %s (%v)", filepath.Dir(path), err)
	}
}

// TestUIDRegistryBoundedFile: churn does not grow the registry file (every
// lease and release rewrites it whole); uids released longest ago are
// still leased again once the range is used up.
func TestUIDRegistryBoundedFile(t *testing.T) {
	t.Parallel()
	testenv.NeedLinux(t)
	path := filepath.Join(t.TempDir(), "uids")
	const count = 1100 // more than the line of released uids keeps
	r := sandbox.NewUIDRegistry(path, testUIDs+1_000_000, count)
	dataDir := t.TempDir()
	var first int
	for i := range count {
		id := fmt.Sprintf("sbx_%d", i)
		uid := leaseOrFatal(t, r, dataDir, id)
		if i == 0 {
			first = uid
		}
		releaseOrFatal(t, r, uid, dataDir, id)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Released []json.RawMessage `json:"released"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if n := len(file.Released); n > 1024 {
		t.Errorf("the registry file lines up %d released uids (%d bytes) after %d leases and releases, want at most 1024", n, len(b), count)
	}
	// Every uid has had a sandbox: the next lease is the one released
	// longest ago, which fell off the line.
	if got := leaseOrFatal(t, r, dataDir, "sbx_again"); got != first {
		t.Errorf("Lease after the range is used up = %d, want %d, released longest ago", got, first)
	}
}

// TestUIDRegistrySeesEveryCredential: Release looks at each process's
// effective uid and gid only (the owner of /proc/PID) and Lease at all four
// uids and gids (its status). A non-dumpable process, whose /proc files
// the kernel gives to root, still holds its lease; a process that has a uid
// or gid only as its real one (its effective ones root's) keeps Lease from
// handing either out. Each is let go once the process is gone.
func TestUIDRegistrySeesEveryCredential(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	testenv.NeedLinux(t)
	testenv.NeedRoot(t)
	setpriv := testenv.NeedCommand(t, "setpriv")
	const testUIDs = testUIDs + 200_000
	r := sandbox.NewUIDRegistry(filepath.Join(t.TempDir(), "uids"), testUIDs, 3)
	dataDir := t.TempDir()
	// start runs the command newCmd makes until it has exec'd.
	start := func(t *testing.T, newCmd func() *exec.Cmd) (pid int, stop func()) {
		t.Helper()
		// A file just written may still be open for writing in a child
		// another test forked meanwhile, until that child's exec: ETXTBSY.
		cmd := newCmd()
		err := cmd.Start()
		for i := 0; errors.Is(err, syscall.ETXTBSY) && i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
			cmd = newCmd()
			err = cmd.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		done := false
		stop = func() {
			if !done {
				done = true
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
		t.Cleanup(stop)
		testenv.Eventually(t, 5*time.Second, "the process exec'd", func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
			return string(b) == "sleep\n"
		})
		return cmd.Process.Pid, stop
	}

	t.Run("non-dumpable", func(t *testing.T) {
		uid := leaseOrFatal(t, r, dataDir, "sbx_nd")
		// Exec'ing a file one may not read makes a process non-dumpable.
		dir, err := os.MkdirTemp("", "berth-uid-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		b, err := os.ReadFile(testenv.NeedCommand(t, "sleep"))
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "sleep")
		if err := os.WriteFile(bin, b, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		pid, stop := start(t, func() *exec.Cmd {
			cmd := exec.Command(bin, "1000")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
			return cmd
		})
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/status", pid), &st); err != nil || st.Uid != 0 {
			t.Fatalf("the process's status file is owned by %d (%v), want 0: it is not non-dumpable, the test proves nothing", st.Uid, err)
		}
		if releaseOrFatal(t, r, uid, dataDir, "sbx_nd") {
			t.Errorf("Release of %d with a non-dumpable process of it alive = released, want held", uid)
		}
		stop()
		if !releaseOrFatal(t, r, uid, dataDir, "sbx_nd") {
			t.Errorf("Release of %d after its process is gone = held, want released", uid)
		}
	})

	t.Run("real ids only", func(t *testing.T) {
		// A range of two uids: one the process's real uid, the other its
		// real gid; its effective, saved and file-system ids are root's.
		first := testUIDs + 10
		r := sandbox.NewUIDRegistry(filepath.Join(t.TempDir(), "uids"), first, 2)
		_, stop := start(t, func() *exec.Cmd {
			return exec.Command(setpriv, "--ruid", strconv.Itoa(first), "--rgid", strconv.Itoa(first+1), "--keep-groups", "sleep", "1000")
		})
		if uid, err := r.Lease(dataDir, "sbx_real", nil); errcode.ReasonOf(err) != "uid_range_exhausted" {
			t.Errorf("Lease with a process whose real uid is %d and real gid %d = %d (%v), want reason uid_range_exhausted", first, first+1, uid, err)
		}
		stop()
		if uid := leaseOrFatal(t, r, dataDir, "sbx_real"); uid != first {
			t.Errorf("Lease after the process is gone = %d, want %d", uid, first)
		}
	})
}
