package daemon_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/testenv"
)

// Sandbox uids are leased from 300000 (firstSandboxUID) on.
const firstUID, uidCount = 300000, 1 << 16

// sandboxUID is the host uid sandbox id runs as, as it sees itself.
func sandboxUID(t *testing.T, d *testenv.Daemon, id string) int {
	t.Helper()
	c := run(t, d, id, apitype.CreateCommandRequest{Command: "id -u"})
	uid, err := strconv.Atoi(strings.TrimSpace(c.Stdout))
	if err != nil {
		t.Fatalf("id -u in %s = %q: %v", id, c.Stdout, err)
	}
	return uid
}

// leases returns the tests' registry's leases, by uid.
func leases(t *testing.T) map[int]sandbox.UIDLease {
	t.Helper()
	all, err := sandbox.NewUIDRegistry(testenv.UIDRegistry(t), firstUID, uidCount).Leases()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]sandbox.UIDLease{}
	for _, l := range all {
		out[l.UID] = l
	}
	return out
}

// waitReleased waits until the lease of uid is released and reports
// whether it is still held after 30s.
func waitReleased(t *testing.T, uid int) (sandbox.UIDLease, bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, held := leases(t)[uid]
		if !held || time.Now().After(deadline) {
			return l, held
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUIDDisjointAcrossDaemons runs two daemons on one host (two data
// directories, one uid registry, as every daemon of a host shares
// /var/lib/berth/uids): their isolated sandboxes get disjoint uids, each in
// the sandbox range, each leased to its own daemon's sandbox.
func TestUIDDisjointAcrossDaemons(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	a := testenv.StartDaemon(t, nil)
	b := testenv.StartDaemon(t, nil) // the same test's registry
	owner := map[int]string{}
	for _, d := range []*testenv.Daemon{a, b, a, b} {
		sb := newSandbox(t, d)
		uid := sandboxUID(t, d, sb.ID)
		if uid < firstUID || uid >= firstUID+uidCount {
			t.Errorf("sandbox %s of %s runs as uid %d, want one in %d-%d", sb.ID, d.DataDir, uid, firstUID, firstUID+uidCount-1)
		}
		if prev, ok := owner[uid]; ok {
			t.Errorf("sandbox %s of %s runs as uid %d, already %s's", sb.ID, d.DataDir, uid, prev)
		}
		owner[uid] = sb.ID
		if l := leases(t)[uid]; l.SandboxID != sb.ID || l.DataDir != d.DataDir {
			t.Errorf("lease of uid %d = %+v, want sandbox %s of %s", uid, l, sb.ID, d.DataDir)
		}
	}
}

// TestUIDNotReusedAfterDelete: a deleted sandbox's uid is not the next
// sandbox's, and while a process runs as it (here one the test starts as
// that uid, outside the sandbox) its lease outlives the delete. The
// control: once the process is gone, the lease is released, and a delete
// with nothing left releases at once.
func TestUIDNotReusedAfterDelete(t *testing.T) {
	t.Parallel()
	needIsolated(t)
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := newSandbox(t, d)
	uid := sandboxUID(t, d, first.ID)
	lingering := exec.Command("sleep", "1000")
	lingering.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := lingering.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lingering.Process.Kill(); _ = lingering.Wait() })
	if err := d.Client.DeleteSandbox(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if l := leases(t)[uid]; l.SandboxID != first.ID {
		t.Errorf("lease of uid %d after delete, with a process of it alive = %+v, want %s's kept", uid, l, first.ID)
	}
	second := newSandbox(t, d)
	if got := sandboxUID(t, d, second.ID); got == uid {
		t.Errorf("sandbox created after deleting %s runs as its uid %d", first.ID, uid)
	}

	_ = lingering.Process.Kill()
	_ = lingering.Wait()
	if l, held := waitReleased(t, uid); held {
		t.Errorf("lease of uid %d once its process is gone = %+v, want released", uid, l)
	}

	secondUID := sandboxUID(t, d, second.ID)
	if err := d.Client.DeleteSandbox(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	// Its processes were killed; the last may be a zombie for a moment.
	if l, held := waitReleased(t, secondUID); held {
		t.Errorf("lease of uid %d after deleting its sandbox with nothing left = %+v, want released", secondUID, l)
	}
	third := newSandbox(t, d)
	if got := sandboxUID(t, d, third.ID); got == secondUID || got == uid {
		t.Errorf("sandbox created after two deletes runs as %d, a released uid (%d, %d) before any never-used one", got, uid, secondUID)
	}
}

// TestUIDLeasesRecoveredAtStart: a lease the registry holds for a sandbox
// of this data directory that its store does not have (a daemon died
// between the two) is released when the daemon starts; another data
// directory's lease stays.
func TestUIDLeasesRecoveredAtStart(t *testing.T) {
	testenv.OnePass(t)
	t.Parallel()
	dataDir := filepath.Join(testenv.ShortTempDir(t), "d")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	reg := sandbox.NewUIDRegistry(testenv.UIDRegistry(t), firstUID, uidCount)
	stale, err := reg.Lease(dataDir, "sbx_neverstored", nil)
	if err != nil {
		t.Fatal(err)
	}
	others, err := reg.Lease(other, "sbx_others", nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartDaemon(t, func(c *daemon.Config) { c.DataDir = dataDir })
	if l, held := waitReleased(t, stale); held {
		t.Errorf("lease of uid %d for a sandbox the store never had = %+v 30s after start, want released", stale, l)
	}
	if l := leases(t)[others]; l.DataDir != other {
		t.Errorf("lease of uid %d of another data directory = %+v, want kept", others, l)
	}
}
