package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// TestSweep runs the sweeper over a real database and data directory: it
// removes files no job uses, stale temporary files and job sandboxes no
// pool or job holds, and keeps what is in use.
func TestSweep(t *testing.T) {
	testenv.NeedLinux(t)
	ctx := context.Background()
	dir := testenv.ShortTempDir(t)
	db, err := store.Open(ctx, filepath.Join(dir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mgr := sandbox.NewManager(sandbox.Config{DataDir: dir, AgentBinary: testenv.Binary(t), DefaultRuntime: "process"},
		db, runtimes.Process{})
	defer func() { _ = mgr.Stop(context.Background()) }()
	// Finished jobs are kept a millisecond, unfinished ones forever.
	svc, err := jobs.New(jobs.Config{DataDir: dir, Runtime: "none", Retention: time.Millisecond}, db, nil, mgr)
	if err != nil {
		t.Fatal(err)
	}

	used, err := svc.PutFile(ctx, "ten_default", strings.NewReader("<p>used</p>"), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	unused, err := svc.PutFile(ctx, "ten_default", strings.NewReader("nobody names me"), "x.txt")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	job := &jobs.Job{ID: "job_sweeptest", Action: "html-pdf", ActionVersion: "1.0.0", State: apitype.JobQueued,
		Tenant: "t", Owner: "u", RequestSHA256: "x", Inputs: []apitype.FileRef{{Name: "index.html", SHA256: used.SHA256}},
		MaxAttempts: 3, CreatedAt: now, UpdatedAt: now}
	if err := db.InsertJob(ctx, job, apitype.JobEvent{Type: apitype.JobQueued}); err != nil {
		t.Fatal(err)
	}
	done, err := svc.PutFile(ctx, "ten_default", strings.NewReader("<p>done</p>"), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	finished := *job
	finished.ID, finished.Inputs = "job_sweepdone", []apitype.FileRef{{Name: "index.html", SHA256: done.SHA256}}
	if err := db.InsertJob(ctx, &finished, apitype.JobEvent{Type: apitype.JobQueued}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ChangeJob(ctx, finished.ID, jobs.Change{To: apitype.JobCanceled}); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "files", "tmp", "put-stale")
	fresh := filepath.Join(dir, "files", "tmp", "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	orphan, _, err := mgr.Create(ctx, sandbox.CreateSpec{Runtime: "process", Internal: "job-browser", Idle: &sandbox.IdlePolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	user, _, err := mgr.Create(ctx, sandbox.CreateSpec{Runtime: "process"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mgr.Delete(ctx, user.ID) }()

	// Positive control: within the grace periods nothing goes.
	svc.Sweep(ctx)
	for _, p := range []string{svc.Blobs().Path(unused.SHA256), svc.Blobs().Path(used.SHA256), stale, fresh} {
		if _, err := os.Stat(p); err != nil && p != stale {
			t.Errorf("%s was removed within its grace period", p)
		}
	}
	if _, err := mgr.Get(ctx, orphan.ID); err != nil {
		t.Errorf("a young job sandbox was deleted: %v", err)
	}

	jobs.BlobGrace, jobs.OrphanAge = 0, 0
	defer func() { jobs.BlobGrace, jobs.OrphanAge = time.Hour, 2*time.Minute }()
	time.Sleep(10 * time.Millisecond)
	svc.Sweep(ctx)
	if _, err := os.Stat(svc.Blobs().Path(unused.SHA256)); err == nil {
		t.Error("a file no job uses survived the sweep")
	}
	if _, err := svc.Blobs().Ref(ctx, unused.SHA256); err == nil {
		t.Error("the record of a swept file survived")
	}
	if _, err := svc.Blobs().Ref(ctx, used.SHA256); err != nil {
		t.Errorf("a file a job uses was swept: %v", err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a stale temporary file survived")
	}
	if _, err := mgr.Get(ctx, orphan.ID); err == nil {
		t.Error("an orphaned job sandbox survived")
	}
	if _, err := mgr.Get(ctx, user.ID); err != nil {
		t.Errorf("a user's sandbox was swept: %v", err)
	}
	if _, err := db.GetJob(ctx, finished.ID); err == nil {
		t.Error("a job finished before its retention survived")
	}
	if _, err := db.GetJob(ctx, job.ID); err != nil {
		t.Errorf("an unfinished job was swept: %v", err)
	}
	if _, err := svc.Blobs().Ref(ctx, done.SHA256); err == nil {
		t.Error("the file of a deleted job survived")
	}
}
