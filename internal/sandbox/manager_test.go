package sandbox_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// newManager returns a started Manager over a real SQLite file with the
// process runtime, stopped (and every sandbox deleted) at cleanup.
func newManager(t *testing.T, tweak func(*sandbox.Config)) *sandbox.Manager {
	t.Helper()
	return newManagerIn(t, testenv.ShortTempDir(t), tweak, runtimes.Process{})
}

// newManagerIn is newManager with the data directory dir and runtimes rts.
func newManagerIn(t *testing.T, dir string, tweak func(*sandbox.Config), rts ...sandbox.Runtime) *sandbox.Manager {
	t.Helper()
	testenv.NeedLinux(t)
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(dir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sandbox.Config{DataDir: dir, AgentBinary: testenv.Binary(t), DefaultRuntime: "process",
		UIDRegistry: testenv.UIDRegistry(t)}
	if tweak != nil {
		tweak(&cfg)
	}
	m := sandbox.NewManager(cfg, db, rts...)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		all, _ := m.List(ctx)
		for _, sb := range all {
			if err := m.Delete(ctx, sb.ID); err != nil {
				t.Errorf("deleting %s at cleanup: %v", sb.ID, err)
			}
		}
		if err := m.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		db.Close()
		testenv.CheckNoProcesses(t, dir)
	})
	return m
}

func state(t *testing.T, m *sandbox.Manager, id string) string {
	t.Helper()
	sb, err := m.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return sb.State
}

func echo(t *testing.T, m *sandbox.Manager, id, word string) {
	t.Helper()
	rec, err := m.Exec(context.Background(), id, sandbox.ExecSpec{Command: "echo " + word}, url.Values{"wait_ms": {"20000"}})
	if err != nil {
		t.Fatalf("Exec(echo %s) in %s: %v", word, id, err)
	}
	if rec.Status != apitype.CommandExited || strings.TrimSpace(rec.Stdout) != word {
		t.Fatalf("echo %s in %s = %s %q, want exited %q", word, id, rec.Status, rec.Stdout, word)
	}
}

// TestManagerStateMachine walks a sandbox through its states with the
// Manager alone (a real SQLite file, the process runtime, the real agent):
// running, hibernated, woken by a command; a lazy one pending until its
// first command; the transitions the process runtime cannot make refused
// with their reasons; delete. The controls are the states read back from
// the store after each step.
func TestManagerStateMachine(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()

	sb, created, err := m.Create(ctx, sandbox.CreateSpec{Name: "walk"})
	if err != nil || !created {
		t.Fatalf("Create = %v, created %v", err, created)
	}
	if got := state(t, m, sb.ID); got != apitype.StateRunning {
		t.Fatalf("after create: %s, want running", got)
	}
	echo(t, m, sb.ID, "one")

	// The same name again is the same sandbox, not a second one.
	again, created, err := m.Create(ctx, sandbox.CreateSpec{Name: "walk"})
	if err != nil || created || again.ID != sb.ID {
		t.Errorf("Create(same name) = %v, created %v, %v; want %s, not created", again, created, err, sb.ID)
	}

	// Hibernate, then a command wakes it: the one step every call takes.
	if err := m.Hibernate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got := state(t, m, sb.ID); got != apitype.StateHibernated {
		t.Fatalf("after hibernate: %s", got)
	}
	if err := m.Hibernate(ctx, sb.ID); err != nil {
		t.Errorf("hibernating a hibernated sandbox = %v, want nil", err)
	}
	echo(t, m, sb.ID, "two")
	if got := state(t, m, sb.ID); got != apitype.StateRunning {
		t.Fatalf("after a command woke it: %s, want running", got)
	}

	// The process runtime cannot freeze a sandbox; resuming a running one
	// changes nothing.
	if err := m.Pause(ctx, sb.ID); !errcode.Has(err, errcode.PauseUnsupported) {
		t.Errorf("Pause on the process runtime = %v, want %s", err, errcode.PauseUnsupported)
	}
	if err := m.Resume(ctx, sb.ID); err != nil {
		t.Errorf("Resume of a running sandbox = %v, want nil (nothing to do)", err)
	}

	// A lazy sandbox has no compute until its first command.
	lazy, _, err := m.Create(ctx, sandbox.CreateSpec{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := state(t, m, lazy.ID); got != apitype.StatePending {
		t.Fatalf("lazy sandbox: %s, want pending", got)
	}
	echo(t, m, lazy.ID, "three")
	if got := state(t, m, lazy.ID); got != apitype.StateRunning {
		t.Fatalf("lazy sandbox after its first command: %s, want running", got)
	}

	// Pausing needs a running sandbox.
	if err := m.Hibernate(ctx, lazy.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx, lazy.ID); !errcode.Has(err, errcode.SandboxNotRunning) {
		t.Errorf("Pause of a hibernated sandbox = %v, want %s", err, errcode.SandboxNotRunning)
	}

	// Delete: gone from the store, and a command to it is not_found.
	if err := m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, sb.ID); !errcode.Has(err, errcode.SandboxNotFound) {
		t.Errorf("Get after delete = %v, want %s", err, errcode.SandboxNotFound)
	}
	if _, err := m.Exec(ctx, sb.ID, sandbox.ExecSpec{Command: "true"}, nil); !errcode.Is(err, errcode.NotFound) {
		t.Errorf("Exec after delete = %v, want not_found", err)
	}
}

// TestManagerLimitAndValidation: the sandbox limit refuses a create past
// it with sandbox_limit and records nothing; invalid specs are refused
// with the field named. The control: a create under the limit succeeds.
// (A lazy, pending sandbox has no compute and does not count.)
func TestManagerLimitAndValidation(t *testing.T) {
	t.Parallel()
	m := newManager(t, func(c *sandbox.Config) { c.MaxSandboxes = 1 })
	ctx := context.Background()
	if _, _, err := m.Create(ctx, sandbox.CreateSpec{}); err != nil {
		t.Fatalf("control: create under the limit: %v", err)
	}
	if _, _, err := m.Create(ctx, sandbox.CreateSpec{}); !errcode.Has(err, errcode.SandboxLimit) {
		t.Errorf("create past --max-sandboxes 1 = %v, want %s", err, errcode.SandboxLimit)
	}
	if all, _ := m.List(ctx); len(all) != 1 {
		t.Errorf("after a refused create: %d sandboxes, want 1", len(all))
	}
	_, _, err := m.Create(ctx, sandbox.CreateSpec{Runtime: "nope"})
	if !errcode.Has(err, errcode.RuntimeUnknown) {
		t.Errorf("create on runtime nope = %v, want %s", err, errcode.RuntimeUnknown)
	}
	_, _, err = m.Create(ctx, sandbox.CreateSpec{Resources: sandbox.Resources{MemoryMB: 64}})
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.Invalid || e.Problems["resources"] == "" {
		t.Errorf("resources on the process runtime = %v, want invalid naming resources", err)
	}
	if _, err := m.Exec(ctx, "sbx_none", sandbox.ExecSpec{Command: "true"}, nil); !errcode.Has(err, errcode.SandboxNotFound) {
		t.Errorf("Exec in a sandbox that never existed = %v, want %s", err, errcode.SandboxNotFound)
	}
}

// TestIdleReaperRacesCalls calls a sandbox without pause while its idle
// policy hibernates it at every reaper round: a call that arrives while
// the reaper hibernates it waits and wakes it, and never fails with
// sandbox_not_running (a call once met the sandbox between its agent's
// stop and its hibernated state). The control: the reaper did hibernate
// it during the calls, seen as new agent processes after wakes.
func TestIdleReaperRacesCalls(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	ctx := context.Background()
	sb, _, err := m.Create(ctx, sandbox.CreateSpec{Idle: &sandbox.IdlePolicy{HibernateAfterMS: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Calls at random gaps of up to 30 ms: the reaper's rounds (every
	// second) meet the sandbox idle, and calls meet it mid-hibernation.
	pids := map[int]bool{}
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && len(pids) < 5; {
		echo(t, m, sb.ID, "up")
		if s, err := m.Get(ctx, sb.ID); err == nil && s.AgentPID != 0 {
			pids[s.AgentPID] = true
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	}
	if len(pids) < 2 {
		t.Errorf("the sandbox ran one agent (%v) through 15 s of a 1 ms idle policy: the reaper never hibernated it", pids)
	}
}
