package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/berthdev/berth/internal/errcode"
)

// DefaultUIDRegistry is the host-wide file that leases sandbox uids to every
// daemon of the host. It is outside any data directory, and on disk: a uid
// owns files in a data directory until its sandbox is deleted, reboots
// included.
const DefaultUIDRegistry = "/var/lib/berth/uids"

// Sandbox uids: firstSandboxUID is above the ranges distributions give users
// and subordinate ids (100000-165535).
const (
	firstSandboxUID = 300000
	sandboxUIDCount = 1 << 16
)

// uidReconcileInterval is how often Run reconciles this daemon's leases with
// its store, retrying releases a lingering process held back.
const uidReconcileInterval = time.Minute

// UIDRegistry leases the host uids of isolated sandboxes across every daemon
// of a host, from one file. Each operation holds an exclusive flock on the
// file for its whole read-modify-write, so daemons never hand out one uid
// twice; the file is replaced by rename, so a crash leaves the old or the
// new leases, never half.
//
// A uid goes to a sandbox only if no lease holds it and no process runs as
// it. Never-used uids come first, lowest first; a released uid joins the
// back of the line, so it is reused only after every never-used uid and
// every uid released before it: the longest cool-down the range allows.
// A lease is released only when no process runs as its uid and nothing of
// its sandbox is left in the data directory (see Release).
//
// Its methods are safe for concurrent use, in one process or many.
type UIDRegistry struct {
	path         string
	first, count int
	// inUse returns the uids (real, effective, saved, file system; and
	// gids) of every process on the host: Lease and Reconcile read them.
	inUse func() (map[int]bool, error)
	// holders returns the processes whose effective uid or gid is the
	// one given: Release reads them (see processesAs).
	holders func(int) ([]int, error)
}

// NewUIDRegistry returns the registry in the file at path, handing out uids
// first to first+count-1. The file and its directory are made on first use.
func NewUIDRegistry(path string, first, count int) *UIDRegistry {
	return &UIDRegistry{path: path, first: first, count: count, inUse: processUIDs, holders: processesAs}
}

// UIDLease is one uid held for one sandbox of one data directory.
type UIDLease struct {
	UID       int       `json:"uid"`
	DataDir   string    `json:"data_dir"`
	SandboxID string    `json:"sandbox_id"`
	Since     time.Time `json:"since"`
}

// uidState is the registry file's content.
type uidState struct {
	// Next is the lowest uid never handed out: every uid from first to
	// Next-1 has had a sandbox (or was skipped as in use).
	Next   int        `json:"next"`
	Leases []UIDLease `json:"leases"`
	// Released are uids whose lease ended, the longest released first.
	Released []releasedUID `json:"released"`
}

type releasedUID struct {
	UID int       `json:"uid"`
	At  time.Time `json:"at"`
}

func (s *uidState) leased(uid int) (int, bool) {
	i := slices.IndexFunc(s.Leases, func(l UIDLease) bool { return l.UID == uid })
	return i, i >= 0
}

// maxReleased bounds the line of released uids. Every lease and release
// reads and rewrites the whole file, so an unbounded line (one entry per
// uid ever released) made each create and delete cost milliseconds of CPU
// under churn. A uid that falls off the front was released longest ago:
// Lease, once the range is used up, takes free uids outside the line
// before those in it, so it still comes first.
const maxReleased = 1024

// release ends lease i and puts its uid at the back of the line.
func (s *uidState) release(i int) {
	uid := s.Leases[i].UID
	s.Leases = slices.Delete(s.Leases, i, i+1)
	s.Released = slices.DeleteFunc(s.Released, func(r releasedUID) bool { return r.UID == uid })
	s.Released = append(s.Released, releasedUID{UID: uid, At: time.Now().UTC()})
	if n := len(s.Released); n > maxReleased {
		s.Released = slices.Delete(s.Released, 0, n-maxReleased)
	}
}

// Lease gives sandbox sandboxID of dataDir a uid no lease holds, no process
// runs as and exclude does not name (the uids the caller's own store
// records). It fails with resource_exhausted when the range has none.
func (r *UIDRegistry) Lease(dataDir, sandboxID string, exclude map[int]bool) (int, error) {
	var uid int
	err := r.update(true, func(s *uidState) (bool, error) {
		busy, err := r.inUse()
		if err != nil {
			return false, err
		}
		r.reclaimGone(s, busy)
		free := func(u int) bool {
			_, held := s.leased(u)
			return !held && !exclude[u] && !busy[u]
		}
		uid = 0
		for u := max(s.Next, r.first); u < r.first+r.count; u++ {
			if free(u) {
				uid, s.Next = u, u+1
				break
			}
		}
		if uid == 0 {
			// Every uid has been used. First those not in the line of
			// released ones: released before the line's oldest (it is
			// bounded), skipped as in use, or leases lost with an old
			// file. Then the line's, the longest released first.
			inLine := make(map[int]bool, len(s.Released))
			for _, rel := range s.Released {
				inLine[rel.UID] = true
			}
			for u := r.first; u < r.first+r.count; u++ {
				if free(u) && !inLine[u] {
					uid = u
					break
				}
			}
		}
		if uid == 0 {
			for i, rel := range s.Released {
				if free(rel.UID) {
					uid = rel.UID
					s.Released = slices.Delete(s.Released, i, i+1)
					break
				}
			}
		}
		if uid == 0 {
			return false, errcode.UIDRangeExhausted.New("every sandbox uid (%d-%d) is leased or in use on this host; delete sandboxes first", r.first, r.first+r.count-1)
		}
		s.Leases = append(s.Leases, UIDLease{UID: uid, DataDir: dataDir, SandboxID: sandboxID, Since: time.Now().UTC()})
		return true, nil
	})
	return uid, err
}

// Release ends the lease of uid for sandbox sandboxID of dataDir, unless a
// process still runs as uid or something of the sandbox is left under
// dataDir (an entry named by its id, one or two levels down: its sandbox
// directory, or a copy moved aside). It reports whether the lease ended (or
// was not there); a held lease stays for a later Release or Reconcile.
//
// A process runs as uid here if its effective uid or gid is uid, which
// sees every process of a sandbox (whose ids are all its uid, see
// processesAs) at the cost of a stat per process. A process of something
// else that holds uid only as its real, saved or file-system id does not
// hold the lease; Lease, which reads all of them, still never hands uid
// out while it lives.
func (r *UIDRegistry) Release(uid int, dataDir, sandboxID string) (bool, error) {
	released := true
	err := r.update(false, func(s *uidState) (bool, error) {
		i, ok := s.leased(uid)
		if !ok || s.Leases[i].DataDir != dataDir || s.Leases[i].SandboxID != sandboxID {
			return false, nil // another's, or released already
		}
		pids, err := r.holders(uid)
		if err != nil {
			return false, err
		}
		if len(pids) > 0 || leftOver(dataDir, sandboxID) {
			released = false
			return false, nil
		}
		s.release(i)
		return true, nil
	})
	return released, err
}

// UIDConflict is a uid this daemon's store gives a sandbox while another
// sandbox holds its lease: two daemons have shared it (from before the
// registry, or a registry file lost).
type UIDConflict struct {
	UID       int
	SandboxID string
	Holder    UIDLease
}

// Reconcile makes the leases of dataDir match live, the uid of each sandbox
// its store records: it leases what the store has and the registry lacks,
// and releases (as Release would) leases of sandboxes the store no longer
// has. It also releases leases of data directories that no longer exist,
// once no process runs as their uid. It returns the uids the store shares
// with another daemon's sandbox. Without a registry file and with nothing
// live it does nothing, so a daemon without isolated sandboxes never makes
// one.
func (r *UIDRegistry) Reconcile(dataDir string, live map[string]int) ([]UIDConflict, error) {
	var conflicts []UIDConflict
	err := r.update(len(live) > 0, func(s *uidState) (bool, error) {
		busy, err := r.inUse()
		if err != nil {
			return false, err
		}
		changed := r.reclaimGone(s, busy)
		for i := 0; i < len(s.Leases); i++ {
			l := s.Leases[i]
			if l.DataDir != dataDir || live[l.SandboxID] == l.UID || busy[l.UID] || leftOver(dataDir, l.SandboxID) {
				continue
			}
			s.release(i)
			i--
			changed = true
		}
		for _, id := range slices.Sorted(maps.Keys(live)) {
			uid := live[id]
			if i, ok := s.leased(uid); ok {
				if l := s.Leases[i]; l.DataDir != dataDir || l.SandboxID != id {
					conflicts = append(conflicts, UIDConflict{UID: uid, SandboxID: id, Holder: l})
				}
				continue
			}
			s.Released = slices.DeleteFunc(s.Released, func(rel releasedUID) bool { return rel.UID == uid })
			s.Leases = append(s.Leases, UIDLease{UID: uid, DataDir: dataDir, SandboxID: id, Since: time.Now().UTC()})
			changed = true
		}
		return changed, nil
	})
	return conflicts, err
}

// Leases returns the current leases, for tests and diagnostics.
func (r *UIDRegistry) Leases() ([]UIDLease, error) {
	var out []UIDLease
	err := r.update(false, func(s *uidState) (bool, error) {
		out = slices.Clone(s.Leases)
		return false, nil
	})
	return out, err
}

// reclaimGone releases the leases of data directories that no longer exist
// (their files went with them), unless a process still runs as the uid.
func (r *UIDRegistry) reclaimGone(s *uidState, busy map[int]bool) bool {
	changed := false
	for i := 0; i < len(s.Leases); i++ {
		l := s.Leases[i]
		if _, err := os.Lstat(l.DataDir); !errors.Is(err, os.ErrNotExist) || busy[l.UID] {
			continue
		}
		s.release(i)
		i--
		changed = true
	}
	return changed
}

// safeID is what a sandbox ID must look like to be used in a glob pattern.
var safeID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// leftOver reports whether anything named by sandbox id is left one or two
// levels under dataDir: <data>/sandboxes/<id>, or the same moved aside
// (<data>/<dir>/<id>, <data>/<dir>/<sub>/<id>, and quarantined as
// <data>/quarantine/<time>-<id>).
func leftOver(dataDir, id string) bool {
	if !safeID.MatchString(id) {
		return true // cannot tell: keep the lease
	}
	for _, pattern := range []string{filepath.Join(dataDir, "*", id), filepath.Join(dataDir, "*", "*", id),
		filepath.Join(QuarantineDir(dataDir), "*-"+id)} {
		if m, err := filepath.Glob(pattern); err != nil || len(m) > 0 {
			return true
		}
	}
	return false
}

// update runs fn on the registry's state under its lock, and writes the
// state back when fn reports a change. With create false, a registry file
// that does not exist is an empty state and is not made.
func (r *UIDRegistry) update(create bool, fn func(*uidState) (bool, error)) error {
	if !create {
		if _, err := os.Stat(r.path); errors.Is(err, os.ErrNotExist) {
			_, err := fn(&uidState{})
			return err
		}
	}
	f, err := lockRegistry(r.path)
	if err != nil {
		return errcode.Wrap(errcode.Unavailable, err, "opening the uid registry %s", r.path)
	}
	defer f.Close() // releases the lock
	var s uidState
	b, err := readAll(f)
	if err != nil {
		return fmt.Errorf("reading the uid registry: %w", err)
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &s); err != nil {
			return errcode.Wrap(errcode.Internal, err, "the uid registry %s is corrupt", r.path)
		}
	}
	changed, err := fn(&s)
	if err != nil || !changed {
		return err
	}
	b, err = json.MarshalIndent(&s, "", "  ")
	if err != nil {
		return err
	}
	return writeRegistry(r.path, append(b, '\n'))
}

func readAll(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// releaseUID ends sb's uid lease after its record is gone. The sandbox's
// processes were killed, but the last may still be exiting, or a zombie
// its parent has not reaped yet (a zombie counts against RLIMIT_NPROC).
// Those found at once are waited for one by one (a stat of each /proc/PID,
// no lock and no pass over every process); once they are gone, Release
// checks every process again, once. A held lease is retried in the
// background for a while, then left to Run's periodic reconcile.
func (m *Manager) releaseUID(ctx context.Context, sb *Sandbox) {
	if sb.UID == 0 {
		return
	}
	pids, err := m.uids.holders(sb.UID)
	if err == nil && len(pids) == 0 && m.tryReleaseUID(ctx, sb) {
		return
	}
	m.wg.Go(func() {
		for wait, waited := 10*time.Millisecond, time.Duration(0); waited < uidReconcileInterval; wait = min(2*wait, 5*time.Second) {
			t := time.NewTimer(wait)
			select {
			case <-m.bg.Done():
				t.Stop()
				return
			case <-t.C:
			}
			waited += wait
			if pids = stillAs(pids, sb.UID); len(pids) > 0 {
				continue
			}
			if m.tryReleaseUID(m.bg, sb) {
				return
			}
			pids, _ = m.uids.holders(sb.UID) // new ones, or left files
		}
		m.log.InfoContext(m.bg, "sandbox uid held until its processes are gone", "sandbox_id", sb.ID, "uid", sb.UID)
	})
}

// tryReleaseUID releases sb's lease if nothing of it is left, and reports
// whether the lease is gone; errors are logged, not retried.
func (m *Manager) tryReleaseUID(ctx context.Context, sb *Sandbox) bool {
	ok, err := m.uids.Release(sb.UID, m.cfg.DataDir, sb.ID)
	if err != nil {
		m.log.ErrorContext(ctx, "releasing sandbox uid", "sandbox_id", sb.ID, "uid", sb.UID, "err", err)
		return true
	}
	return ok
}

// reconcileUIDs brings this daemon's leases in line with its store: the
// sandboxes it records keep (or get) theirs, the others' are released.
func (m *Manager) reconcileUIDs(ctx context.Context) error {
	m.createMu.Lock() // no lease between Lease and CreateSandbox is seen
	defer m.createMu.Unlock()
	all, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	live := map[string]int{}
	for _, sb := range all {
		if sb.UID != 0 {
			live[sb.ID] = sb.UID
		}
	}
	conflicts, err := m.uids.Reconcile(m.cfg.DataDir, live)
	for _, c := range conflicts {
		m.log.WarnContext(ctx, "sandbox uid shared with another sandbox on this host", "sandbox_id", c.SandboxID,
			"uid", c.UID, "holder_data_dir", c.Holder.DataDir, "holder_sandbox_id", c.Holder.SandboxID)
	}
	return err
}

// runUIDReconcile reconciles the uid leases at start (after reconcile, which
// finished interrupted deletes), then every uidReconcileInterval until ctx
// ends, so a release a lingering process held back happens once it is gone.
func (m *Manager) runUIDReconcile(ctx context.Context) {
	t := time.NewTicker(uidReconcileInterval)
	defer t.Stop()
	for {
		if err := m.reconcileUIDs(ctx); err != nil && ctx.Err() == nil {
			m.log.ErrorContext(ctx, "reconciling sandbox uid leases", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
