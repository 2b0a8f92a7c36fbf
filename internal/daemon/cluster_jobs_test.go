package daemon_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// TestClusterJobs runs sandbox jobs through a cluster's HQ over a real
// Postgres, with HQ and three workers as separate processes (w3 dedicated
// to tenant acme): HQ queues, workers run, files pass through the shared
// database; a dedicated tenant's jobs run on its worker only; a draining
// worker takes none; a job cancelled on HQ stops on its worker; and a
// worker killed with SIGKILL in the middle of a job: the job runs again on
// another worker and ends once, with exactly one output, and the killed
// worker, restarted, leaves it be.
func TestClusterJobs(t *testing.T) {
	needJobs(t)
	ctx := context.Background()
	var acmeKey string
	pools := []string{"--job-pool", "browser=1", "--job-pool", "office=0"}
	c := testenv.StartCluster(t, testenv.ClusterSpec{
		Workers:       map[string]string{"w1": "", "w2": "", "w3": "acme"},
		WorkerArgs:    pools,
		DedicatedArgs: []string{"--default-runtime", "container"},
		BeforeWorkers: func(c *testenv.Cluster) {
			if _, err := c.HQ.Client.CreateTenant(ctx, apitype.CreateTenantRequest{Name: "acme"}); err != nil {
				t.Fatal(err)
			}
			k, err := c.HQ.Client.CreateKey(ctx, apitype.CreateKeyRequest{Name: "acme", Tenant: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			acmeKey = k.Secret
		}})
	hq := c.HQ.Client
	acme := client.New(c.HQ.URL, acmeKey)
	dir := t.TempDir()

	// The workers advertise the actions they can run; HQ's health follows.
	testenv.Eventually(t, 30*time.Second, "html-pdf available through HQ", func() bool {
		acts, err := hq.Actions(ctx)
		if err != nil {
			return false
		}
		for _, a := range acts {
			if a.Name == "html-pdf" {
				return a.Available
			}
		}
		return false
	})

	if l, err := hq.ListWorkers(ctx); err != nil || len(l.Workers) != 3 ||
		!slices.ContainsFunc(l.Workers[0].Capabilities.Actions, func(a string) bool { return strings.HasPrefix(a, "html-pdf@") }) {
		t.Errorf("workers through HQ = %+v, %v; want w1 advertising html-pdf", l, err)
	}

	t.Run("run", func(t *testing.T) {
		j := runJob(t, hq, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
		if j.Worker != "w1" && j.Worker != "w2" {
			t.Errorf("the default tenant's job ran on %q, want a shared worker (w1 or w2)", j.Worker)
		}
		// The output was stored by the worker and is read through HQ.
		pdf := output(t, hq, j, dir)
		if n := pdfPages(t, pdf); n != "3" {
			t.Errorf("output has %s pages, want 3", n)
		}
		// An upload to HQ is an input a worker reads.
		up, err := hq.UploadFile(ctx, strings.NewReader(`<!doctype html><h1>Uploaded to HQ</h1>`), "index.html")
		if err != nil {
			t.Fatal(err)
		}
		j = runJob(t, hq, apitype.CreateJobRequest{Action: "html-pdf",
			Inputs: map[string]apitype.JobInput{"index.html": {SHA256: up.SHA256}}})
		if text := pdfText(t, output(t, hq, j, dir)); !strings.Contains(text, "Uploaded to HQ") {
			t.Errorf("the uploaded page's PDF reads %q", text)
		}
		// The synchronous route and Gotenberg's are jobs through HQ too
		// (Gotenberg's footer is read back from the shared files on HQ).
		rc, _, err := hq.Convert(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.HasPrefix(b, []byte("%PDF-")) {
			t.Errorf("POST /v1/convert through HQ = %.20q, %v; want a PDF", b, err)
		}
		a := gotPost(t, c.HQ, "/forms/chromium/convert/html", []gotFile{{"index.html", []byte(`<h1>Gotenberg through HQ</h1>`)},
			{"footer.html", []byte(`<p style="font-size:10px">Folio <span class="pageNumber"></span></p>`)}}, nil, nil)
		if text := pdfText(t, a.want200(t, "application/pdf", "")); !strings.Contains(text, "Gotenberg through HQ") || !strings.Contains(text, "Folio 1") {
			t.Errorf("Gotenberg's route through HQ made a PDF that reads %q", text)
		}
	})

	t.Run("dedicated", func(t *testing.T) {
		j := runJob(t, acme, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
		if j.Worker != "w3" {
			t.Errorf("acme's job ran on %q, want its dedicated w3", j.Worker)
		}
		if _, err := acme.Job(ctx, j.ID); err != nil {
			t.Errorf("acme reads its job: %v", err)
		}
		// Positive control above; another tenant's job is not acme's to see.
		other := runJob(t, hq, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
		if _, err := acme.Job(ctx, other.ID); errcode.ReasonOf(err) != "job_not_found" {
			t.Errorf("acme reads the default tenant's job = %v, want job_not_found", err)
		}
	})

	t.Run("workspace", func(t *testing.T) {
		// A job reads its input from a sandbox's workspace and writes its
		// output into it: it runs on the sandbox's worker.
		sb, err := hq.CreateSandbox(ctx, apitype.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer hq.DeleteSandbox(ctx, sb.ID)
		if _, err := hq.WriteFile(ctx, sb.ID, "in/page.html", strings.NewReader(`<h1>From the workspace</h1>`), 0o644); err != nil {
			t.Fatal(err)
		}
		j := runJob(t, hq, apitype.CreateJobRequest{Action: "html-pdf",
			Inputs: map[string]apitype.JobInput{"index.html": {Sandbox: sb.ID, Path: "in/page.html"}},
			Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "out/"}})
		owner := (&testCluster{Cluster: c, t: t}).owner(sb.ID)
		if j.State != apitype.JobSucceeded || j.Worker != owner || len(j.Outputs) != 1 || j.Outputs[0].Workspace == nil {
			t.Fatalf("a job from and into %s's workspace on %s = %s on %q, outputs %+v, error %+v", sb.ID, owner, j.State, j.Worker, j.Outputs, j.Error)
		}
		rc, err := hq.ReadFile(ctx, sb.ID, j.Outputs[0].Workspace.Path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		p := dir + "/ws.pdf"
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if text := pdfText(t, p); !strings.Contains(text, "From the workspace") {
			t.Errorf("the PDF written into the workspace reads %q", text)
		}
		// Another tenant's sandbox is one that does not exist, for input
		// and output alike; a path out of the workspace is refused.
		for name, req := range map[string]apitype.CreateJobRequest{
			"input":  {Action: "html-pdf", Inputs: map[string]apitype.JobInput{"index.html": {Sandbox: sb.ID, Path: "in/page.html"}}},
			"output": {Action: "html-pdf", Inputs: threePages(), Output: &apitype.WorkspaceRef{Sandbox: sb.ID, Path: "out/"}},
		} {
			if _, err := acme.CreateJob(ctx, req); errcode.ReasonOf(err) != "sandbox_not_found" {
				t.Errorf("acme's job with the admin's sandbox as %s = %v, want sandbox_not_found", name, err)
			}
		}
		if _, err := hq.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf",
			Inputs: map[string]apitype.JobInput{"index.html": {Sandbox: sb.ID, Path: "../etc/passwd"}}}); !client.IsCode(err, errcode.Invalid) {
			t.Errorf("a job reading ../etc/passwd = %v, want invalid", err)
		}
	})

	t.Run("drain", func(t *testing.T) {
		if _, err := hq.DrainWorker(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if j := runJob(t, hq, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()}); j.Worker != "w2" {
				t.Errorf("a job while w1 drains ran on %q, want w2", j.Worker)
			}
		}
		if _, err := hq.UndrainWorker(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		j, err := hq.CreateJob(ctx, slowPage(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		running := waitRunning(t, hq, j.ID)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		got, err := hq.CancelJob(cctx, j.ID)
		if err != nil || got.State != apitype.JobCanceled {
			t.Fatalf("cancel through HQ of a job running on %s = %s, %v; want canceled\n%s", running.Worker, got.State, err, jobStory(hq, j.ID))
		}
	})

	t.Run("worker killed", func(t *testing.T) {
		j, err := hq.CreateJob(ctx, slowPage(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		first := waitRunning(t, hq, j.ID).Worker
		c.Workers[first].Kill9(t)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		done, err := hq.WaitJob(wctx, j.ID)
		if err != nil {
			t.Fatalf("waiting for the job of killed %s: %v\n%s", first, err, jobStory(hq, j.ID))
		}
		if done.State != apitype.JobSucceeded || len(done.Outputs) != 1 || done.Worker == first || done.Attempt != 2 {
			t.Fatalf("job after %s was killed: %s on %q, attempt %d, outputs %v; want succeeded once more on another worker with one output\n%s",
				first, done.State, done.Worker, done.Attempt, done.Outputs, jobStory(hq, j.ID))
		}
		story := jobStory(hq, j.ID)
		if !strings.Contains(story, "worker "+first+" stopped answering") || strings.Count(story, " succeeded ") != 1 {
			t.Errorf("the job's events do not tell one requeue after %s was lost and one success:\n%s", first, story)
		}
		if text := pdfText(t, output(t, hq, done, dir)); !strings.Contains(text, "Slow 10s") {
			t.Errorf("the output reads %q", text)
		}
		// The killed worker comes back: the job is not its to recover.
		c.StartWorker(first)
		c.WaitStatus(cluster.StatusLive, first)
		again, err := hq.Job(ctx, j.ID)
		if err != nil || again.State != apitype.JobSucceeded || again.Attempt != 2 || len(again.Outputs) != 1 ||
			again.Outputs[0].SHA256 != done.Outputs[0].SHA256 {
			t.Errorf("after %s restarted the job is %+v, %v; want it as it finished", first, again, err)
		}
		// A job runs on the restarted worker as on any.
		runJob(t, hq, apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages()})
	})
}

// waitRunning waits until job id runs and returns it.
func waitRunning(t *testing.T, c *client.Client, id string) apitype.Job {
	t.Helper()
	var j apitype.Job
	testenv.Eventually(t, 2*time.Minute, "job "+id+" running", func() bool {
		var err error
		j, err = c.Job(context.Background(), id)
		return err == nil && j.State == apitype.JobRunning && j.Worker != ""
	})
	return j
}

// TestClusterJobsPostgresOutage stops the cluster's Postgres for 10 s while
// a job runs on a worker and another is submitted: the submit answers 503
// within its deadline and stores nothing; once the database is back, the
// running job ends once with one output, and the submit repeated with its
// business_id makes exactly one job.
func TestClusterJobsPostgresOutage(t *testing.T) {
	needJobs(t)
	srv := testenv.NewPostgresServer(t)
	c := testenv.StartCluster(t, testenv.ClusterSpec{Workers: map[string]string{"w1": ""}, DSN: srv.DSN(),
		WorkerArgs: []string{"--job-pool", "browser=1", "--job-pool", "office=0"}})
	hq := c.HQ.Client
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "html-pdf available through HQ", func() bool {
		acts, err := hq.Actions(ctx)
		return err == nil && slices.ContainsFunc(acts, func(a apitype.ActionHealth) bool { return a.Name == "html-pdf" && a.Available })
	})
	running, err := hq.CreateJob(ctx, slowPage(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, hq, running.ID)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	req := apitype.CreateJobRequest{Action: "html-pdf", Inputs: threePages(), BusinessID: "outage-1"}
	refused := 0
	for time.Since(stopped) < 10*time.Second {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		start := time.Now()
		j, err := hq.CreateJob(cctx, req)
		cancel()
		switch {
		case time.Since(start) > 10*time.Second:
			t.Errorf("a job submitted while the database was down took %v", time.Since(start))
		case err == nil:
			t.Errorf("a job submitted while the database was down was accepted: %s", j.ID)
		case client.IsCode(err, errcode.Unavailable):
			refused++
		default:
			t.Errorf("a job submitted while the database was down = %v, want a 503", err)
		}
		time.Sleep(time.Second)
	}
	if refused == 0 {
		t.Error("no submit answered 503 while the database was down")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	done, err := hq.WaitJob(wctx, running.ID)
	if err != nil || done.State != apitype.JobSucceeded || len(done.Outputs) != 1 {
		t.Fatalf("the job that ran through the outage = %s (%+v), outputs %v, %v; want succeeded with one output\n%s",
			done.State, done.Error, done.Outputs, err, jobStory(hq, running.ID))
	}
	if story := jobStory(hq, running.ID); strings.Count(story, " succeeded ") != 1 {
		t.Errorf("the job succeeded more than once:\n%s", story)
	}
	var first apitype.Job
	testenv.Eventually(t, 30*time.Second, "a submit accepted after the outage", func() bool {
		first, err = hq.CreateJob(ctx, req)
		return err == nil
	})
	again, err := hq.CreateJob(ctx, req)
	if err != nil || again.ID != first.ID || !again.Repeat {
		t.Errorf("the submit repeated = %s (repeat %t), %v; want %s again", again.ID, again.Repeat, err, first.ID)
	}
	if j, err := hq.WaitJob(wctx, first.ID); err != nil || j.State != apitype.JobSucceeded {
		t.Errorf("the job submitted after the outage = %s, %v\n%s", j.State, err, jobStory(hq, first.ID))
	}
	all, err := hq.Jobs(ctx, client.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range all {
		if j.BusinessID == "outage-1" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d jobs have business_id outage-1, want 1", n)
	}
}
