package jobs_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/sandbox/runtimes"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// newService returns a started job service over a real SQLite file (River
// on it too) and a sandbox Manager with the container runtime, with no
// runtimes kept warm. cfg's zero fields take the defaults.
func newService(t *testing.T, cfg jobs.Config) *jobs.Service {
	t.Helper()
	testenv.NeedRuntime(t, "container")
	testenv.NeedChromium(t)
	ctx := context.Background()
	dir := testenv.ShortTempDir(t)
	path := filepath.Join(dir, "berth.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	riverDB, err := sql.Open("sqlite", store.DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	riverDB.SetMaxOpenConns(1)
	oci := runtimes.OCIConfig{DataDir: dir}
	mgr := sandbox.NewManager(sandbox.Config{DataDir: dir, AgentBinary: testenv.Binary(t), DefaultRuntime: "container",
		UIDRegistry: testenv.UIDRegistry(t)}, db, runtimes.Process{}, runtimes.NewContainer(oci))
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Pools = dir, map[string]int{"browser": 0, "office": 0}
	svc, err := jobs.New(cfg, db, riverDB, mgr)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("jobs Stop: %v", err)
		}
		all, _ := mgr.List(ctx)
		for _, sb := range all {
			_ = mgr.Delete(ctx, sb.ID)
		}
		if err := mgr.Stop(ctx); err != nil {
			t.Errorf("sandboxes Stop: %v", err)
		}
		riverDB.Close()
		db.Close()
	})
	return svc
}

func htmlInput(s string) apitype.JobInput {
	return apitype.JobInput{ContentBase64: base64.StdEncoding.EncodeToString([]byte(s))}
}

// TestSubmitAdmission: Submit refuses what cannot run with the health
// reason (before looking at the inputs), and invalid requests with the
// field named, queueing nothing; a business_id repeat returns the first
// job, and the same business_id with another request is a conflict. The
// control: a valid request is queued.
func TestSubmitAdmission(t *testing.T) {
	t.Parallel()
	svc := newService(t, jobs.Config{Workers: true})
	ctx := context.Background()
	who := jobs.Principal{Tenant: "t", User: "u"}
	page := map[string]apitype.JobInput{"index.html": htmlInput("<h1>one</h1>")}

	_, _, err := svc.Submit(ctx, who, apitype.CreateJobRequest{Action: "no-such-action", Inputs: page})
	if !errcode.Has(err, errcode.ActionMissing) || !errcode.Is(err, errcode.NotFound) {
		t.Errorf("unknown action = %v, want not_found %s", err, errcode.ActionMissing)
	}
	for _, tt := range []struct {
		name  string
		req   apitype.CreateJobRequest
		field string
	}{
		{"no inputs", apitype.CreateJobRequest{Action: "html-pdf"}, "inputs"},
		{"bad option", apitype.CreateJobRequest{Action: "html-pdf", Inputs: page, Options: json.RawMessage(`{"scale": 5}`)}, "options.scale"},
		{"unknown option", apitype.CreateJobRequest{Action: "html-pdf", Inputs: page, Options: json.RawMessage(`{"papr": "A4"}`)}, "options"},
		{"both content and sha256", apitype.CreateJobRequest{Action: "html-pdf",
			Inputs: map[string]apitype.JobInput{"index.html": {ContentBase64: "eA==", SHA256: "ab"}}}, "inputs.index.html"},
		{"bad name", apitype.CreateJobRequest{Action: "html-pdf", Inputs: map[string]apitype.JobInput{"../x.html": htmlInput("x")}}, "inputs.../x.html"},
	} {
		_, _, err := svc.Submit(ctx, who, tt.req)
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.Invalid || e.Problems[tt.field] == "" {
			t.Errorf("%s: Submit = %v (problems %v), want invalid naming %s", tt.name, err, problemsOf(err), tt.field)
		}
	}
	if list, err := svc.List(ctx, who, jobs.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("after refused requests: %d jobs, %v; want none", len(list), err)
	}

	// Control, and idempotency by business_id.
	req := apitype.CreateJobRequest{Action: "html-pdf", Inputs: page, BusinessID: "order-1"}
	first, repeat, err := svc.Submit(ctx, who, req)
	if err != nil || repeat {
		t.Fatalf("control: Submit = %v, repeat %v", err, repeat)
	}
	again, repeat, err := svc.Submit(ctx, who, req)
	if err != nil || !repeat || again.ID != first.ID {
		t.Errorf("the same request again = %v, repeat %v, %v; want %s as a repeat", again, repeat, err, first.ID)
	}
	other := req
	other.Inputs = map[string]apitype.JobInput{"index.html": htmlInput("<h1>two</h1>")}
	if _, _, err := svc.Submit(ctx, who, other); !errcode.Has(err, errcode.BusinessIDConflict) {
		t.Errorf("the same business_id with other inputs = %v, want %s", err, errcode.BusinessIDConflict)
	}
	// Another tenant's business_id space is its own.
	theirs, repeat, err := svc.Submit(ctx, jobs.Principal{Tenant: "t2", User: "v"}, req)
	if err != nil || repeat || theirs.ID == first.ID {
		t.Errorf("another tenant's order-1 = %v, repeat %v, %v; want a job of its own", theirs, repeat, err)
	}
}

// TestSubmitWithoutWorkers: a daemon that consumes no queue refuses jobs
// with WORKER_UNAVAILABLE, and a job service bound to no isolated runtime
// with RUNTIME_UNBOUND.
func TestSubmitWithoutWorkers(t *testing.T) {
	t.Parallel()
	page := map[string]apitype.JobInput{"index.html": htmlInput("<h1>one</h1>")}
	who := jobs.Principal{Tenant: "t", User: "u"}
	svc := newService(t, jobs.Config{Workers: false})
	if _, _, err := svc.Submit(context.Background(), who, apitype.CreateJobRequest{Action: "html-pdf", Inputs: page}); !errcode.Has(err, errcode.WorkerUnavailable) {
		t.Errorf("Submit without workers = %v, want %s", err, errcode.WorkerUnavailable)
	}
	unbound := newService(t, jobs.Config{Workers: true, Runtime: "none"})
	if _, _, err := unbound.Submit(context.Background(), who, apitype.CreateJobRequest{Action: "html-pdf", Inputs: page}); !errcode.Has(err, errcode.RuntimeUnbound) {
		t.Errorf("Submit with --jobs-runtime none = %v, want %s", err, errcode.RuntimeUnbound)
	}
}

func problemsOf(err error) map[string]string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Problems
	}
	return nil
}
