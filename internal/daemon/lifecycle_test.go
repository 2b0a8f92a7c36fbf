package daemon_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// workspaceDigest reads the named files through the file API and hashes
// them together.
func workspaceDigest(t *testing.T, c *client.Client, id string, names ...string) string {
	t.Helper()
	h := sha256.New()
	for _, n := range names {
		rc, err := c.ReadFile(context.Background(), id, n)
		if err != nil {
			t.Fatalf("ReadFile(%s): %v", n, err)
		}
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestHibernateWakeCycles hibernates and wakes a sandbox many times: each
// time its processes are gone, a running command is interrupted, the next
// call wakes it, and its files are byte-identical.
func TestHibernateWakeCycles(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := newSandbox(t, d)
	blob := make([]byte, 3<<20)
	_, _ = rand.Read(blob)
	if _, err := d.Client.WriteFile(ctx, sb.ID, "data/blob.bin", bytesReader(blob), 0); err != nil {
		t.Fatal(err)
	}
	run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "mkdir -p src && seq 1 50000 > src/numbers.txt && ln -s numbers.txt src/link"})
	files := []string{"data/blob.bin", "src/numbers.txt", "src/link"}
	want := workspaceDigest(t, d.Client, sb.ID, files...)

	for cycle := range 10 {
		long, err := d.Client.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "sleep 300"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Client.HibernateSandbox(ctx, sb.ID)
		if err != nil || got.State != apitype.StateHibernated {
			t.Fatalf("cycle %d: HibernateSandbox = %s, %v", cycle, got.State, err)
		}
		if left := d.SandboxProcesses(sb.ID); len(left) > 0 {
			t.Fatalf("cycle %d: a hibernated sandbox runs %v", cycle, left)
		}
		// The first call wakes it; the command that was running is
		// interrupted, never replayed.
		rec, err := d.Client.Command(ctx, sb.ID, long.ID, client.CommandQuery{})
		if err != nil || rec.Status != apitype.CommandInterrupted {
			t.Fatalf("cycle %d: command across hibernation = %s, %v; want interrupted", cycle, rec.Status, err)
		}
		if s, _ := d.Client.GetSandbox(ctx, sb.ID); s.State != apitype.StateRunning {
			t.Fatalf("cycle %d: after a call the sandbox is %s, want running", cycle, s.State)
		}
		if got := workspaceDigest(t, d.Client, sb.ID, files...); got != want {
			t.Fatalf("cycle %d: workspace digest %s, want %s", cycle, got, want)
		}
	}
	if c := run(t, d, sb.ID, apitype.CreateCommandRequest{Command: "tail -n 1 src/numbers.txt"}); c.Stdout != "50000\n" {
		t.Errorf("after the cycles: %q", c.Stdout)
	}
}

// TestIdlePolicy lets a sandbox go unused: it is paused (isolated
// runtimes), hibernated and deleted in turn. A running command is use.
func TestIdlePolicy(t *testing.T) {
	t.Parallel()
	d := testenv.StartDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := testenv.Runtime()
	state := func(id string) string {
		s, err := d.Client.GetSandbox(ctx, id)
		if err != nil {
			if client.IsCode(err, client.NotFound) {
				return "deleted"
			}
			t.Fatal(err)
		}
		return s.State
	}

	// Busy: a running command keeps it from hibernating.
	busy, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt,
		Idle: &apitype.Idle{HibernateAfterMS: 200}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Exec(ctx, busy.ID, apitype.CreateCommandRequest{Command: "sleep 3"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // several reaper rounds past the 200 ms
	if s := state(busy.ID); s != apitype.StateRunning {
		t.Errorf("a sandbox with a running command is %s after 2s, want running", s)
	}
	// Positive control: once the command ends, it hibernates.
	testenv.Eventually(t, 20*time.Second, "the busy sandbox to hibernate once idle", func() bool {
		return state(busy.ID) == apitype.StateHibernated
	})

	idle := apitype.Idle{PauseAfterMS: 300, HibernateAfterMS: 2500, DeleteAfterMS: 5000}
	if rt != "process" {
		// The reaper looks once a second and acts on one sandbox after
		// another: on a loaded machine a late look may find the sandbox
		// idle past both marks and hibernate it at once (rightly). A wide
		// gap between them keeps the pause to be seen.
		idle = apitype.Idle{PauseAfterMS: 300, HibernateAfterMS: 8000, DeleteAfterMS: 11000}
	}
	sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt, Idle: &idle})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Idle != idle {
		t.Errorf("idle policy = %+v, want %+v", sb.Idle, idle)
	}
	if rt != "process" {
		testenv.Eventually(t, 20*time.Second, "the idle sandbox to pause", func() bool { return state(sb.ID) == apitype.StatePaused })
	}
	testenv.Eventually(t, 20*time.Second, "the idle sandbox to hibernate", func() bool { return state(sb.ID) == apitype.StateHibernated })
	testenv.Eventually(t, 20*time.Second, "the idle sandbox to be deleted", func() bool { return state(sb.ID) == "deleted" })
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

// sliceReader is an io.Reader over a byte slice that hides its length, so
// uploads of it are chunked like a stream's.
type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
