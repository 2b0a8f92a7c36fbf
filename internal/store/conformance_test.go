package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/tenant"
)

// These tests cover, on both dialects, the store methods whose callers'
// own tests run on SQLite only (through the daemon): jobs and files,
// tenants, services, templates, warm-pool claims and key revocation.

func newJob(t *testing.T, db interface {
	InsertJob(context.Context, *jobs.Job, apitype.JobEvent) error
}, id, tenantID, owner, businessID string, at time.Time, inputs ...string) *jobs.Job {
	t.Helper()
	j := &jobs.Job{ID: id, Action: "html-pdf", ActionVersion: "1.0.0", State: apitype.JobQueued, Tenant: tenantID,
		Owner: owner, BusinessID: businessID, RequestSHA256: "sha-" + id, MaxAttempts: 3, CreatedAt: at, UpdatedAt: at}
	for _, sha := range inputs {
		j.Inputs = append(j.Inputs, apitype.FileRef{Name: "in", SHA256: sha, Size: 1, MIME: "text/html"})
	}
	if err := db.InsertJob(context.Background(), j, apitype.JobEvent{Type: apitype.JobQueued, At: at}); err != nil {
		t.Fatalf("InsertJob(%s): %v", id, err)
	}
	return j
}

func jobIDs(js []*jobs.Job) []string {
	out := []string{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// TestJobs: a job's life in the store (insert, business IDs, state
// changes with their events, lists in pages, counts) and its files.
func TestJobs(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		base := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
		a := newJob(t, db, "job_a", "ten_a", "key_1", "order-1", base, "sha1")
		b := newJob(t, db, "job_b", "ten_a", "key_2", "", base.Add(time.Second))
		c := newJob(t, db, "job_c", "ten_b", "key_3", "order-1", base.Add(2*time.Second))

		got, err := db.GetJob(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("GetJob (-want +got):\n%s", diff)
		}
		if _, err := db.GetJob(ctx, "job_none"); !errcode.Has(err, errcode.JobNotFound) {
			t.Errorf("GetJob(unknown) = %v, want job_not_found", err)
		}
		// A business ID is unique per tenant while its job is active.
		dup := &jobs.Job{ID: "job_dup", Action: "html-pdf", ActionVersion: "1.0.0", State: apitype.JobQueued,
			Tenant: "ten_a", Owner: "key_1", BusinessID: "order-1", RequestSHA256: "x", MaxAttempts: 3, CreatedAt: base, UpdatedAt: base}
		if err := db.InsertJob(ctx, dup, apitype.JobEvent{Type: apitype.JobQueued}); !errcode.Has(err, errcode.BusinessIDTaken) {
			t.Errorf("InsertJob(business ID in use) = %v, want business_id_taken", err)
		}
		if j, err := db.JobByBusinessID(ctx, "ten_b", "order-1"); err != nil || j.ID != c.ID {
			t.Errorf("JobByBusinessID(ten_b, order-1) = %v, %v; want %s", j, err, c.ID)
		}

		// Lists: newest first, filtered, in pages.
		for _, tt := range []struct {
			f    jobs.Filter
			want []string
		}{
			{jobs.Filter{}, []string{c.ID, b.ID, a.ID}},
			{jobs.Filter{Tenant: "ten_a"}, []string{b.ID, a.ID}},
			{jobs.Filter{Owner: "key_3"}, []string{c.ID}},
			{jobs.Filter{Limit: 2}, []string{c.ID, b.ID}},
			{jobs.Filter{Before: b.ID, BeforeAt: b.CreatedAt}, []string{a.ID}},
			{jobs.Filter{State: apitype.JobRunning}, []string{}},
		} {
			l, err := db.ListJobs(ctx, tt.f)
			if err != nil {
				t.Fatalf("ListJobs(%+v): %v", tt.f, err)
			}
			if diff := cmp.Diff(tt.want, jobIDs(l)); diff != "" {
				t.Errorf("ListJobs(%+v) (-want +got):\n%s", tt.f, diff)
			}
		}

		// State changes: from the expected state only, with events.
		attempt, sbx := 1, "sbx_job"
		if _, err := db.ChangeJob(ctx, a.ID, jobs.Change{From: []string{apitype.JobRunning}, To: apitype.JobSucceeded}); !errcode.Has(err, errcode.JobState) {
			t.Errorf("ChangeJob(from running) of a queued job = %v, want job_state", err)
		}
		j, err := db.ChangeJob(ctx, a.ID, jobs.Change{From: []string{apitype.JobQueued}, To: apitype.JobStarting,
			Attempt: &attempt, SandboxID: &sbx, NewRiver: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != apitype.JobStarting || j.StartedAt == nil || j.RiverID != 1<<40 || j.SandboxID != sbx {
			t.Errorf("after ChangeJob(starting) = %+v", j)
		}
		if _, err := db.ChangeJob(ctx, a.ID, jobs.Change{RiverID: 7, To: apitype.JobRunning}); !errcode.Has(err, errcode.JobState) {
			t.Errorf("ChangeJob by another queue job = %v, want job_state", err)
		}
		if g, tn, o, err := db.ActiveJobs(ctx, "ten_a", "key_1"); err != nil || g != 1 || tn != 1 || o != 1 {
			t.Errorf("ActiveJobs(ten_a, key_1) = %d, %d, %d, %v; want 1, 1, 1", g, tn, o, err)
		}
		out := []apitype.FileRef{{Name: "out.pdf", SHA256: "sha2", Size: 2, MIME: "application/pdf"}}
		j, err = db.ChangeJob(ctx, a.ID, jobs.Change{RiverID: 1 << 40, To: apitype.JobFailed, Outputs: out,
			Error: &apitype.JobError{Code: "invalid", Reason: "render_failed", Message: "no"}})
		if err != nil {
			t.Fatal(err)
		}
		if j.FinishedAt == nil || j.Error == nil || j.Error.Reason != "render_failed" {
			t.Errorf("after ChangeJob(failed) = %+v", j)
		}
		// A failed job frees its business ID.
		newJob(t, db, "job_retry", "ten_a", "key_1", "order-1", base.Add(3*time.Second))
		evs, err := db.JobEvents(ctx, a.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for i, ev := range evs {
			types = append(types, ev.Type)
			if ev.Seq != int64(i+1) {
				t.Errorf("event %d has seq %d, want %d", i, ev.Seq, i+1)
			}
		}
		if diff := cmp.Diff([]string{apitype.JobQueued, apitype.JobStarting, apitype.JobFailed}, types); diff != "" {
			t.Errorf("JobEvents (-want +got):\n%s", diff)
		}
		if later, _ := db.JobEvents(ctx, a.ID, 2); len(later) != 1 || later[0].Type != apitype.JobFailed {
			t.Errorf("JobEvents(after 2) = %+v, want the failed event", later)
		}
		active, err := db.JobsInStates(ctx, apitype.JobQueued, apitype.JobStarting)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{b.ID, c.ID, "job_retry"}, jobIDs(active)); diff != "" {
			t.Errorf("JobsInStates(queued, starting), oldest first (-want +got):\n%s", diff)
		}

		// Files: owned per tenant, swept when unused and old.
		for _, sha := range []string{"sha1", "sha2", "sha3"} {
			if err := db.PutBlob(ctx, jobs.Blob{SHA256: sha, Size: 1 << 33, MIME: "text/plain", CreatedAt: base}); err != nil {
				t.Fatal(err)
			}
		}
		if bl, err := db.GetBlob(ctx, "sha1"); err != nil || bl.Size != 1<<33 || !bl.CreatedAt.Equal(base) {
			t.Errorf("GetBlob(sha1) = %+v, %v", bl, err)
		}
		if err := db.AddBlobOwner(ctx, "ten_a", "sha3"); err != nil {
			t.Fatal(err)
		}
		if err := db.AddBlobOwner(ctx, "ten_a", "sha3"); err != nil {
			t.Errorf("AddBlobOwner again: %v", err)
		}
		if ok, err := db.BlobOwned(ctx, "ten_a", "sha3"); err != nil || !ok {
			t.Errorf("BlobOwned(ten_a, sha3) = %v, %v; want true", ok, err)
		}
		if ok, err := db.BlobOwned(ctx, "ten_b", "sha3"); err != nil || ok {
			t.Errorf("BlobOwned(ten_b, sha3) = %v, %v; want false", ok, err)
		}
		unused, err := db.UnusedBlobs(ctx, base.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"sha3"}, unused); diff != "" { // sha1 is a's input, sha2 its output
			t.Errorf("UnusedBlobs (-want +got):\n%s", diff)
		}
		if err := db.DeleteBlob(ctx, "sha1"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetBlob(ctx, "sha1"); err != nil {
			t.Errorf("a used blob was deleted: %v", err)
		}
		if err := db.DeleteBlob(ctx, "sha3"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := db.BlobOwned(ctx, "ten_a", "sha3"); ok {
			t.Errorf("a deleted blob is still owned")
		}

		// Finished jobs go after the cutoff, with their events and files.
		if n, err := db.DeleteFinishedJobs(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
			t.Errorf("DeleteFinishedJobs = %d, %v; want 1 (job_a)", n, err)
		}
		if evs, _ := db.JobEvents(ctx, a.ID, 0); len(evs) != 0 {
			t.Errorf("events of a deleted job: %d, want 0", len(evs))
		}
		if unused, _ := db.UnusedBlobs(ctx, base.Add(time.Minute)); len(unused) != 2 {
			t.Errorf("UnusedBlobs after the delete = %v, want sha1 and sha2", unused)
		}
	})
}

// TestChangeJobConcurrently: of changes racing from one state, exactly
// one moves the job (the others find it moved on), and every change is
// one event.
func TestChangeJobConcurrently(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		const racers = 8
		for i := range 10 {
			id := fmt.Sprintf("job_race%d", i)
			newJob(t, db, id, "ten_a", "key_1", "", time.Now().UTC())
			var (
				mu    sync.Mutex
				wins  int
				wg    sync.WaitGroup
				start = make(chan struct{})
			)
			for range racers {
				wg.Go(func() {
					<-start
					_, err := db.ChangeJob(ctx, id, jobs.Change{From: []string{apitype.JobQueued}, To: apitype.JobStarting})
					switch {
					case err == nil:
						mu.Lock()
						wins++
						mu.Unlock()
					case !errcode.Has(err, errcode.JobState):
						t.Errorf("ChangeJob(%s): %v", id, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if wins != 1 {
				t.Errorf("%s: %d of %d racing changes from queued won, want 1", id, wins, racers)
			}
			if evs, err := db.JobEvents(ctx, id, 0); err != nil || len(evs) != 2 {
				t.Errorf("%s: JobEvents = %d events, %v; want 2 (queued, starting)", id, len(evs), err)
			}
		}
	})
}

// TestTenants: create, find by ID or name, limits, and delete only when
// empty, revoking the tenant's keys.
func TestTenants(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		now := time.Now().UTC()
		acme := &tenant.Tenant{ID: "ten_acme", Name: "acme", CreatedAt: now, UpdatedAt: now}
		if err := db.CreateTenant(ctx, acme); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateTenant(ctx, &tenant.Tenant{ID: "ten_other", Name: "acme", CreatedAt: now, UpdatedAt: now}); !errcode.Has(err, errcode.NameTaken) {
			t.Errorf("CreateTenant(name in use) = %v, want name_taken", err)
		}
		for _, key := range []string{"ten_acme", "acme"} {
			if got, err := db.GetTenant(ctx, key); err != nil || got.ID != acme.ID {
				t.Errorf("GetTenant(%s) = %v, %v; want %s", key, got, err, acme.ID)
			}
		}
		limits := tenant.Limits{MaxSandboxes: 3, MaxMemoryMB: 1 << 40, MaxCPUs: 1.5, Jobs: 2}
		if err := db.SetTenantLimits(ctx, acme.ID, limits); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.GetTenant(ctx, "acme"); got.Limits != limits {
			t.Errorf("limits = %+v, want %+v", got.Limits, limits)
		}
		if err := db.SetTenantLimits(ctx, "ten_none", limits); !errcode.Has(err, errcode.TenantNotFound) {
			t.Errorf("SetTenantLimits(unknown) = %v, want tenant_not_found", err)
		}
		list, err := db.ListTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tn := range list {
			names = append(names, tn.Name)
		}
		if diff := cmp.Diff([]string{"acme", "default"}, names); diff != "" {
			t.Errorf("ListTenants by name (-want +got):\n%s", diff)
		}

		k := &auth.Key{ID: "key_acme", Name: "ci", Scope: auth.ScopeExecution, Prefix: "bk_x", Hash: "h-acme",
			TenantID: acme.ID, CreatedAt: now}
		if err := db.InsertKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		sb := newSandbox(t, db, "")
		if err := db.SetSandboxState(ctx, sb.ID, apitype.StateRunning, "", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().ExecContext(ctx, `UPDATE sandboxes SET tenant_id = $1 WHERE id = $2`, acme.ID, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.DeleteTenant(ctx, acme.ID); !errcode.Has(err, errcode.TenantNotEmpty) {
			t.Errorf("DeleteTenant(with a sandbox) = %v, want tenant_not_empty", err)
		}
		if err := db.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		revoked, err := db.DeleteTenant(ctx, acme.ID)
		if err != nil {
			t.Fatalf("DeleteTenant(empty): %v", err)
		}
		if diff := cmp.Diff([]string{k.ID}, revoked); diff != "" {
			t.Errorf("keys revoked by DeleteTenant (-want +got):\n%s", diff)
		}
		if _, err := db.GetTenant(ctx, "acme"); !errcode.Has(err, errcode.TenantNotFound) {
			t.Errorf("GetTenant after delete = %v, want tenant_not_found", err)
		}
		if _, err := db.DeleteTenant(ctx, acme.ID); !errcode.Has(err, errcode.TenantNotFound) {
			t.Errorf("DeleteTenant again = %v, want tenant_not_found", err)
		}
	})
}

// TestServicesTemplatesPools: service intents, templates by tenant, and
// warm-pool claims (concurrent ones each get their own sandbox).
func TestServicesTemplatesPools(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		sb := newSandbox(t, db, "svc")
		web := &sandbox.ServiceIntent{SandboxID: sb.ID, Spec: apitype.ServiceSpec{Name: "web", Command: "serve"}}
		api := &sandbox.ServiceIntent{SandboxID: sb.ID, Spec: apitype.ServiceSpec{Name: "api", Argv: []string{"api"}}, Stopped: true}
		for _, s := range []*sandbox.ServiceIntent{web, api} {
			if err := db.PutService(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		web.Spec.Command = "serve --port 80"
		if err := db.PutService(ctx, web); err != nil { // replaces
			t.Fatal(err)
		}
		got, err := db.ListServices(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]*sandbox.ServiceIntent{api, web}, got); diff != "" {
			t.Errorf("ListServices by name (-want +got):\n%s", diff)
		}
		if err := db.DeleteService(ctx, sb.ID, "api"); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.ListServices(ctx, sb.ID); len(got) != 1 {
			t.Errorf("services after a delete: %d, want 1", len(got))
		}

		now := time.Now().UTC()
		tpl := &sandbox.Template{ID: "tpl_1", Tenant: "ten_a", Name: "py", State: "building", Source: "built", CreatedAt: now, UpdatedAt: now}
		if err := db.CreateTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateTemplate(ctx, &sandbox.Template{ID: "tpl_2", Tenant: "ten_a", Name: "py", State: "ready", Source: "built",
			CreatedAt: now, UpdatedAt: now}); !errcode.Has(err, errcode.TemplateExists) {
			t.Errorf("CreateTemplate(name in use by the tenant) = %v, want template_exists", err)
		}
		tpl.State, tpl.SizeBytes = "ready", 5<<30
		if err := db.UpdateTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
		if got, err := db.GetTemplate(ctx, "tpl_1"); err != nil || got.State != "ready" || got.SizeBytes != 5<<30 {
			t.Errorf("GetTemplate after UpdateTemplate = %+v, %v", got, err)
		}
		if err := db.DeleteTemplate(ctx, "tpl_1"); err != nil {
			t.Fatal(err)
		}
		if l, err := db.ListTemplates(ctx); err != nil || len(l) != 0 {
			t.Errorf("ListTemplates after delete = %v, %v; want none", l, err)
		}

		// A pool of three; four claims at once: three win, one finds
		// none, and no sandbox is claimed twice.
		for i := range 3 {
			p := &sandbox.Sandbox{ID: ident.New("sbx_"), Runtime: "process", State: apitype.StateRunning, AgentToken: "t",
				Pool: "warm", CreatedAt: now.Add(time.Duration(i)), UpdatedAt: now}
			if err := db.CreateSandbox(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		var (
			mu      sync.Mutex
			claimed = map[string]bool{}
			misses  int
			wg      sync.WaitGroup
		)
		for i := range 4 {
			wg.Go(func() {
				sb, err := db.ClaimPooled(ctx, "warm", &sandbox.Sandbox{Name: fmt.Sprintf("c%d", i), Tenant: "ten_a"})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errcode.Has(err, errcode.PoolNotFound):
					misses++
				case err != nil:
					t.Errorf("ClaimPooled: %v", err)
				case claimed[sb.ID]:
					t.Errorf("sandbox %s claimed twice", sb.ID)
				default:
					claimed[sb.ID] = true
					if sb.Pool != "" || sb.Tenant != "ten_a" || !strings.HasPrefix(sb.Name, "c") {
						t.Errorf("claimed sandbox = %+v, want out of the pool, ten_a's, named", sb)
					}
				}
			})
		}
		wg.Wait()
		if len(claimed) != 3 || misses != 1 {
			t.Errorf("4 claims of a pool of 3: %d claimed, %d missed; want 3 and 1", len(claimed), misses)
		}
	})
}

// TestRevokedKeys: of the IDs asked about, those revoked or unknown.
func TestRevokedKeys(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		var ids []string
		for i := range 3 {
			k := &auth.Key{ID: fmt.Sprintf("key_%d", i), Name: "k", Scope: auth.ScopeExecution, Prefix: "bk_",
				Hash: fmt.Sprintf("h%d", i), CreatedAt: time.Now().UTC()}
			if err := db.InsertKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, k.ID)
		}
		if err := db.RevokeKey(ctx, "key_1"); err != nil {
			t.Fatal(err)
		}
		got, err := db.RevokedKeys(ctx, append(ids, "key_gone"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"key_1", "key_gone"}, got); diff != "" {
			t.Errorf("RevokedKeys (-want +got):\n%s", diff)
		}
		if n, err := db.AbandonUnfinishedIdempotency(ctx); err != nil || n != 0 {
			t.Errorf("AbandonUnfinishedIdempotency on none = %d, %v", n, err)
		}
	})
}
