package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.PostgresMain(m) }

// postgresStore opens the store and a pgx pool (River's) on a new
// Postgres database, both closed at cleanup.
func postgresStore(t *testing.T) (*store.DB, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return db, pool
}

// TestQueueOnPostgres: with a pgx pool (cfg.RiverPool), River keeps its
// queue in the Postgres database through riverpgxv5. First two services
// start on one new database at once (workers of a cluster): River's
// migrations take turns. Then a queued job that a starting service finds
// is queued in River there: River's row is in Postgres's river_job, and
// the job's record names it.
func TestQueueOnPostgres(t *testing.T) {
	testenv.OnePass(t)
	ctx := context.Background()
	db, pool := postgresStore(t)
	agent := testenv.Binary(t)

	// start starts a service on the database with no consumer (Workers
	// false), so what it queues stays queued to be seen.
	start := func() (*jobs.Service, error) {
		dir := testenv.ShortTempDir(t)
		mgr := sandbox.NewManager(sandbox.Config{DataDir: dir, AgentBinary: agent, DefaultRuntime: "process"},
			db, runtimes.Process{})
		svc, err := jobs.New(jobs.Config{DataDir: dir, Runtime: "none", RiverPool: pool}, db, nil, mgr)
		if err != nil {
			return nil, err
		}
		return svc, svc.Start(ctx)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			svc, err := start()
			if err == nil {
				err = svc.Stop(ctx)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a service starting beside another on a new database: %v", err)
		}
	}

	now := time.Now().UTC()
	job := &jobs.Job{ID: "job_pgqueue", Action: "html-pdf", ActionVersion: "1.0.0", State: apitype.JobQueued,
		Tenant: "ten_default", Owner: "key_1", RequestSHA256: "x", MaxAttempts: 3, CreatedAt: now, UpdatedAt: now}
	if err := db.InsertJob(ctx, job, apitype.JobEvent{Type: apitype.JobQueued}); err != nil {
		t.Fatal(err)
	}
	svc, err := start()
	if err != nil {
		t.Fatalf("Start on Postgres: %v", err)
	}
	defer func() {
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	got, err := db.GetJob(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RiverID == 0 {
		t.Fatalf("job after Start: river_id 0, want the River job that queued it")
	}
	var kind, state, args string
	if err := pool.QueryRow(ctx, `SELECT kind, state::text, args::text FROM river_job WHERE id = $1`, got.RiverID).
		Scan(&kind, &state, &args); err != nil {
		t.Fatalf("River job %d in Postgres's river_job: %v", got.RiverID, err)
	}
	if state != "available" || !strings.Contains(args, job.ID) {
		t.Errorf("River job %d = kind %s, state %s, args %s; want available, naming %s", got.RiverID, kind, state, args, job.ID)
	}
}
