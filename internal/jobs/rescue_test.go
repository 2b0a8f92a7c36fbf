package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/testenv"
)

// TestRescue is HQ's Rescue over a real Postgres and River: a running
// attempt of a worker that answers is left (positive control), one of a
// worker that does not is queued again in a new River job of its queue,
// fenced off from the old, or failed on its last attempt; a queued job
// with no River job is given one once older than the grace, not before;
// one whose River job lives is left, one whose River job is gone is queued
// again.
func TestRescue(t *testing.T) {
	testenv.OnePass(t)
	ctx := context.Background()
	db, pool := postgresStore(t)
	svc, err := jobs.New(jobs.Config{DataDir: testenv.ShortTempDir(t), RiverPool: pool, Cluster: &jobs.Cluster{
		Route: func(context.Context, string, string) (string, error) { return "", nil }}}, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(ctx)

	old := time.Now().UTC().Add(-time.Hour)
	insert := func(id string, at time.Time) {
		t.Helper()
		j := &jobs.Job{ID: id, Action: "html-pdf", ActionVersion: "1.0.0", State: apitype.JobQueued, Tenant: "ten_default",
			Owner: "key_1", RequestSHA256: "sha-" + id, MaxAttempts: 3, CreatedAt: at, UpdatedAt: at}
		if err := db.InsertJob(ctx, j, apitype.JobEvent{Type: apitype.JobQueued, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(id string, attempt int, river int64) {
		t.Helper()
		insert(id, old)
		w := "w1"
		if _, err := db.ChangeJob(ctx, id, jobs.Change{To: apitype.JobRunning, Attempt: &attempt, Worker: &w, NewRiver: river}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(id string) *jobs.Job {
		t.Helper()
		j, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	running("job_lost", 1, 555)
	running("job_last", 3, 556)
	insert("job_orphan", old)             // queued, no River job, long ago
	insert("job_fresh", time.Now().UTC()) // queued, no River job yet: a submit in flight

	if err := svc.Rescue(ctx, func(string) bool { return true }, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if j := get("job_lost"); j.State != apitype.JobRunning || j.RiverID != 555 {
		t.Errorf("a job of a worker that answers = %s, river %d; want left running under 555", j.State, j.RiverID)
	}
	if err := svc.Rescue(ctx, func(string) bool { return false }, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	lost := get("job_lost")
	if lost.State != apitype.JobQueued || lost.Worker != "" || lost.RiverID == 0 || lost.RiverID == 555 {
		t.Fatalf("a lost worker's job = %+v; want queued, no worker, a new River job", lost)
	}
	var queue string
	if err := pool.QueryRow(ctx, `SELECT queue FROM river_job WHERE id = $1`, lost.RiverID).Scan(&queue); err != nil || queue != jobs.Queue("browser", "") {
		t.Errorf("its new River job's queue = %q, %v; want %s", queue, err, jobs.Queue("browser", ""))
	}
	// The old River job's work can no longer end it.
	if _, err := db.ChangeJob(ctx, "job_lost", jobs.Change{From: []string{apitype.JobQueued, apitype.JobRunning}, RiverID: 555,
		To: apitype.JobSucceeded}); err == nil {
		t.Error("the old River job recorded an end over the requeued job")
	}
	if j := get("job_last"); j.State != apitype.JobFailed || j.Error == nil || j.Error.Reason != "interrupted" {
		t.Errorf("a lost worker's job on its last attempt = %s, %+v; want failed, interrupted", j.State, j.Error)
	}
	orphan := get("job_orphan")
	if orphan.RiverID == 0 {
		t.Error("a queued job without a River job for an hour got none")
	}
	if j := get("job_fresh"); j.RiverID != 0 || j.State != apitype.JobQueued {
		t.Errorf("a queued job within the grace = %s, river %d; want left alone", j.State, j.RiverID)
	}

	// A live River job is left; one that is gone is replaced.
	insert("job_gone", old)
	if _, err := db.ChangeJob(ctx, "job_gone", jobs.Change{NewRiver: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Rescue(ctx, func(string) bool { return false }, 0); err != nil {
		t.Fatal(err)
	}
	if j := get("job_orphan"); j.RiverID != orphan.RiverID {
		t.Errorf("a queued job whose River job lives got another: %d, was %d", j.RiverID, orphan.RiverID)
	}
	if j := get("job_gone"); j.RiverID == 0 || j.RiverID == 1<<40 {
		t.Errorf("a queued job whose River job is gone = river %d; want a new one", j.RiverID)
	}
}
