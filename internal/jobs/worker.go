package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/docfmt"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobspec"
)

type riverJobRow = rivertype.JobRow

// runArgs is a queue job: it carries the job's ID only; the job itself
// (inputs, options) is in the jobs table, its files in the blob store.
type runArgs struct {
	JobID string `json:"job_id"`
}

func (runArgs) Kind() string { return "berth_job" }

type worker struct {
	river.WorkerDefaults[runArgs]
	s *Service
}

func (w *worker) Work(ctx context.Context, rj *river.Job[runArgs]) error {
	return w.s.work(ctx, rj.ID, rj.Args.JobID)
}

// failure is how one attempt ended badly.
type failure struct {
	apitype.JobError
	cause error
}

func (f *failure) Error() string { return f.Reason + ": " + f.Message }

func fail(code errcode.Code, reason string, retryable bool, format string, args ...any) *failure {
	return &failure{JobError: apitype.JobError{Code: string(code), Reason: reason, Message: fmt.Sprintf(format, args...),
		Retryable: retryable}}
}

// work runs one attempt of a job for queue job riverID. Its result tells
// River what to do: nil (done, whatever the job's outcome), a snooze
// (waiting for capacity: no attempt used) or an error (retry later).
func (s *Service) work(ctx context.Context, riverID int64, id string) error {
	j, err := s.store.GetJob(ctx, id)
	if errcode.Is(err, errcode.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// River may hand the job over before Submit has recorded its queue
	// job (river_id 0): the first queue job to come claims it.
	if (j.RiverID != 0 && j.RiverID != riverID) || (j.State != apitype.JobQueued && j.State != apitype.JobWaiting) {
		return nil // finished, canceled, or another queue job has it
	}
	a := s.actions[j.Action]
	if a == nil || a.invalid != "" {
		_, err := s.change(ctx, id, Change{From: []string{apitype.JobQueued, apitype.JobWaiting}, RiverID: riverID,
			To: apitype.JobFailed, Error: &apitype.JobError{Code: string(errcode.Unavailable), Reason: ActionMissing,
				Message: fmt.Sprintf("action %s is gone or invalid", j.Action)}})
		return ignoreState(err)
	}
	prof := s.profiles[a.spec.Profile]
	if c := s.cfg.Cluster; c != nil && c.Draining != nil && c.Draining(ctx) {
		// HQ drains this worker: back to the queue, for another.
		return river.JobSnooze(time.Second)
	}

	// Capacity: over a bound, wait without using an attempt.
	s.admitMu.Lock()
	global, tenant, user, err := s.store.ActiveJobs(ctx, j.Tenant, j.Owner)
	if err != nil {
		s.admitMu.Unlock()
		return err
	}
	c := s.cfg.Capacity
	if s.cfg.TenantJobs != nil {
		if n := s.cfg.TenantJobs(ctx, j.Tenant); n > 0 {
			c.Tenant = n
		}
	}
	if global >= c.Global || tenant >= c.Tenant || user >= c.User {
		s.admitMu.Unlock()
		if j.State == apitype.JobQueued {
			msg := fmt.Sprintf("waiting for capacity (%d/%d running in all, %d/%d for the tenant, %d/%d for the user)",
				global, c.Global, tenant, c.Tenant, user, c.User)
			if _, err := s.change(ctx, id, Change{From: []string{apitype.JobQueued}, RiverID: riverID, NewRiver: riverID,
				To: apitype.JobWaiting, Event: apitype.JobEvent{Message: msg}}); err != nil {
				return ignoreState(err)
			}
		}
		return river.JobSnooze(250 * time.Millisecond)
	}
	attempt := j.Attempt + 1
	var self *string
	if s.cfg.Cluster != nil {
		self = &s.cfg.Cluster.Worker
	}
	j, err = s.change(ctx, id, Change{From: []string{apitype.JobQueued, apitype.JobWaiting}, RiverID: riverID,
		NewRiver: riverID, To: apitype.JobStarting, Attempt: &attempt, Worker: self})
	s.admitMu.Unlock()
	if err != nil {
		return ignoreState(err)
	}
	// From here on a cancel reaches this work (and only the work that
	// owns the job registers).
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	s.running[id] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
	}()

	hard, stopHard := context.WithTimeoutCause(workCtx, prof.HardDeadline, errHardDeadline)
	defer stopHard()
	outputs, blocked, ferr := s.attempt(hard, j, a, prof)
	if ferr == nil {
		outputs, ferr = s.deliver(hard, j, outputs)
	}
	if ferr == nil {
		_, err := s.record(ctx, id, Change{From: []string{apitype.JobRunning}, RiverID: riverID,
			To: apitype.JobSucceeded, Outputs: outputs, Blocked: blocked})
		return ignoreState(err)
	}
	// The attempt failed: canceled, retryable, or for good.
	finalCtx := context.WithoutCancel(ctx)
	from := []string{apitype.JobStarting, apitype.JobRunning}
	// A cancel on this daemon ends the work with errCanceled; one on a
	// cluster's HQ reaches it through River.
	if errors.Is(context.Cause(workCtx), errCanceled) || errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) {
		_, err := s.record(ctx, id, Change{From: from, RiverID: riverID, To: apitype.JobCanceled, Blocked: blocked,
			Event: apitype.JobEvent{Message: "canceled while it ran; its sandbox was deleted"}})
		return ignoreState(err)
	}
	if ctx.Err() != nil {
		// The daemon is stopping: the next start requeues the job.
		return ctx.Err()
	}
	jerr := ferr.JobError
	if memoryReasons[jerr.Reason] {
		jerr.Message += fmt.Sprintf(" (the %s profile's sandbox has %d MiB of memory; berth serve --job-memory %s=MB changes it)",
			prof.Name, prof.Resources.MemoryMB, prof.Name)
	}
	again := jerr.Retryable && documentReasons[jerr.Reason] && s.failedBefore(finalCtx, id, jerr.Reason)
	if again {
		jerr.Message += "; the previous attempt failed the same way, so it is not tried again"
	}
	if !jerr.Retryable || again || attempt >= j.MaxAttempts {
		_, err := s.record(ctx, id, Change{From: from, RiverID: riverID, To: apitype.JobFailed, Error: &jerr, Blocked: blocked})
		return ignoreState(err)
	}
	if _, err := s.record(ctx, id, Change{From: from, RiverID: riverID, To: apitype.JobQueued,
		Event: apitype.JobEvent{Message: fmt.Sprintf("attempt %d failed (%s: %s); retrying", attempt, jerr.Reason, jerr.Message), Error: &jerr}}); err != nil {
		return ignoreState(err)
	}
	return ferr // River retries it after its backoff
}

var errHardDeadline = errors.New("the job's hard deadline passed")

// record is change for an attempt's end: the outcome is in hand, so a
// database that does not answer (a cluster's Postgres restarting) is
// waited for, up to RecordPatience or until the work is stopped, rather
// than the outcome lost and the job left running.
func (s *Service) record(ctx context.Context, id string, c Change) (*Job, error) {
	delay, deadline := 100*time.Millisecond, time.Now().Add(RecordPatience)
	for {
		j, err := s.change(context.WithoutCancel(ctx), id, c)
		if err == nil || errcode.Has(err, errcode.JobState) || errcode.Is(err, errcode.NotFound) || time.Now().After(deadline) {
			return j, err
		}
		if delay == 100*time.Millisecond {
			s.log.Warn("recording how a job's attempt ended failed; retrying", "job_id", id, "to", c.To, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// RecordPatience is how long an attempt's end is retried while the
// database fails.
const RecordPatience = 2 * time.Minute

// memoryReasons are failures that running out of memory causes: their
// message says how much the profile has and how to change it.
var memoryReasons = map[string]bool{"renderer_crashed": true, "browser_crashed": true, "runtime_lost": true}

// documentReasons are retryable failures the document itself can cause (a
// page too large for the renderer, a print Chromium refuses): a retry in an
// identical fresh sandbox usually meets them again, so one that repeats
// the previous attempt's reason ends the job instead of trying blindly
// until the attempts run out.
var documentReasons = map[string]bool{"renderer_crashed": true, "render_failed": true, "office_crashed": true}

// failedBefore reports whether the job's last failed attempt before this
// one failed with reason.
func (s *Service) failedBefore(ctx context.Context, id, reason string) bool {
	evs, err := s.store.JobEvents(ctx, id, 0)
	if err != nil {
		return false
	}
	for _, ev := range slices.Backward(evs) {
		if ev.Error != nil {
			return ev.Error.Reason == reason
		}
	}
	return false
}

// ignoreState turns "the job moved on under us" into success: someone
// else (a cancel, a newer queue job) owns the outcome.
func ignoreState(err error) error {
	if errcode.Has(err, errcode.JobState) || errcode.Is(err, errcode.NotFound) {
		return nil
	}
	return err
}

// attempt runs the job once in a fresh sandbox and returns its stored,
// validated outputs.
func (s *Service) attempt(ctx context.Context, j *Job, a *action, prof Profile) (_ []apitype.FileRef, blocked []string, ferr *failure) {
	pool := s.pools[a.spec.Profile]
	rt, err := pool.take(ctx, j.Tenant)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctxFailure(ctx)
		}
		return nil, nil, &failure{JobError: apitype.JobError{Code: string(errcode.Unavailable), Reason: "runtime_start",
			Message: errMessage(err), Retryable: true}, cause: err}
	}
	// The runtime is kept for the tenant's next job only when this one
	// ended cleanly: succeeded, or failed for its own input.
	defer func() {
		reusable := ferr == nil || (!ferr.Retryable && ferr.Reason != "canceled" && ferr.Reason != "timeout")
		pool.giveBack(context.WithoutCancel(ctx), rt, j.Tenant, reusable && ctx.Err() == nil)
	}()
	sandboxID := rt.sandboxID
	// Stage the bundle's files and the inputs.
	for name, b := range a.files {
		if err := rt.agent.WriteFile(ctx, path.Join("in", name), bytes.NewReader(b), 0o644); err != nil {
			return nil, nil, stageFailure(ctx, err)
		}
	}
	for _, in := range j.Inputs {
		if err := s.stage(ctx, rt, in); err != nil {
			return nil, nil, stageFailure(ctx, err)
		}
	}
	if _, err := s.change(ctx, j.ID, Change{From: []string{apitype.JobStarting}, To: apitype.JobRunning, SandboxID: &sandboxID,
		Event: apitype.JobEvent{Message: "inputs staged in sandbox " + sandboxID}}); err != nil {
		return nil, nil, changeFailure(ctx, err)
	}
	opts, _ := jobspec.ParseOptions(j.Options)
	req := jobspec.Request{Action: a.spec.Base, Options: opts, TimeoutMS: prof.Timeout.Milliseconds()}
	req.Main = mainInput(a, opts, inputNames(j.Inputs))
	resp, err := runnerRequest(ctx, rt.agent, http.MethodPost, "/run", req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctxFailure(ctx)
		}
		return nil, nil, &failure{JobError: apitype.JobError{Code: string(errcode.Unavailable), Reason: "runtime_lost",
			Message: "the job's sandbox stopped answering (out of memory?)", Retryable: true}, cause: err}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var f jobspec.Failure
		if json.Unmarshal(body, &f) != nil || f.Reason == "" {
			return nil, nil, fail(errcode.Unavailable, "runtime_lost", true, "the runner answered %s: %s", resp.Status, tail(string(body), 200))
		}
		code := errcode.Invalid
		switch {
		case f.Reason == "timeout":
			code = errcode.DeadlineExceeded
		case f.Retryable:
			code = errcode.Unavailable
		}
		return nil, nil, &failure{JobError: apitype.JobError{Code: string(code), Reason: f.Reason, Message: f.Message, Retryable: f.Retryable}}
	}
	var res jobspec.Result
	if err := json.Unmarshal(body, &res); err != nil || len(res.Outputs) == 0 {
		return nil, nil, fail(errcode.Internal, "invalid_output", false, "the runner returned no outputs")
	}
	// Progress is told when it can be: a database that fails now is the
	// outcome's to wait for (record), not a reason to render again.
	if _, err := s.change(ctx, j.ID, Change{Event: apitype.JobEvent{Type: "progress", Percent: 80, Message: "rendered; validating"}}); err != nil &&
		(ctx.Err() != nil || errcode.Has(err, errcode.JobState) || errcode.Is(err, errcode.NotFound)) {
		return nil, res.Blocked, ctxFailure(ctx)
	}
	var outs []apitype.FileRef
	var total int64
	for _, o := range res.Outputs {
		ref, f := s.collect(ctx, j, rt, o, MaxOutputBytes-total)
		if f != nil {
			return nil, res.Blocked, f
		}
		total += ref.Size
		outs = append(outs, ref)
	}
	return outs, res.Blocked, nil
}

func inputNames(refs []apitype.FileRef) map[string]apitype.JobInput {
	m := map[string]apitype.JobInput{}
	for _, r := range refs {
		m[r.Name] = apitype.JobInput{SHA256: r.SHA256}
	}
	return m
}

// stage copies one input from the blob store into the sandbox.
func (s *Service) stage(ctx context.Context, rt *runtime, in apitype.FileRef) error {
	f, err := s.blobs.Open(ctx, in.SHA256)
	if err != nil {
		return err
	}
	defer f.Close()
	return rt.agent.WriteFile(ctx, path.Join("in", in.Name), f, 0o644)
}

func stageFailure(ctx context.Context, err error) *failure {
	if ctx.Err() != nil {
		return ctxFailure(ctx)
	}
	if errcode.Is(err, errcode.PayloadTooLarge) {
		return &failure{JobError: apitype.JobError{Code: string(errcode.PayloadTooLarge), Reason: "input_too_large",
			Message: errMessage(err)}, cause: err}
	}
	return &failure{JobError: apitype.JobError{Code: string(errcode.Unavailable), Reason: "runtime_lost",
		Message: "staging the inputs failed: " + errMessage(err), Retryable: true}, cause: err}
}

// ctxFailure says why ctx ended: the hard deadline (retryable) or a
// cancel (the caller turns that into canceled).
// changeFailure is how an attempt ends when recording its progress
// failed: the job moved on under it (a cancel; HQ queued it again), or the
// database failed, which another attempt may not meet.
func changeFailure(ctx context.Context, err error) *failure {
	if ctx.Err() != nil || errcode.Has(err, errcode.JobState) || errcode.Is(err, errcode.NotFound) {
		return ctxFailure(ctx)
	}
	return fail(errcode.Unavailable, "database_unavailable", true, "recording the job's progress failed: %s", errMessage(err))
}

func ctxFailure(ctx context.Context) *failure {
	if errors.Is(context.Cause(ctx), errHardDeadline) {
		return fail(errcode.DeadlineExceeded, "timeout", true, "the job passed its hard deadline; its sandbox was killed")
	}
	return fail(errcode.Canceled, "canceled", false, "canceled")
}

// collect copies one output out of the sandbox into the blob store and
// validates it.
func (s *Service) collect(ctx context.Context, j *Job, rt *runtime, o jobspec.Output, room int64) (apitype.FileRef, *failure) {
	if err := jobspec.CheckName(o.Name); err != nil || strings.Contains(o.Name, "/") {
		return apitype.FileRef{}, fail(errcode.Internal, "invalid_output", false, "the runner named an output %q", o.Name)
	}
	body, err := rt.agent.ReadFile(ctx, path.Join("out", o.Name))
	if err != nil {
		if ctx.Err() != nil {
			return apitype.FileRef{}, ctxFailure(ctx)
		}
		return apitype.FileRef{}, fail(errcode.Unavailable, "runtime_lost", true, "reading output %s failed: %s", o.Name, errMessage(err))
	}
	defer body.Close()
	ref, err := s.blobs.Put(ctx, body, room, o.Name)
	if err == nil {
		err = s.store.AddBlobOwner(ctx, j.Tenant, ref.SHA256)
	}
	if errcode.Is(err, errcode.PayloadTooLarge) {
		return apitype.FileRef{}, fail(errcode.PayloadTooLarge, "output_too_large", false,
			"the outputs come to more than %d bytes", MaxOutputBytes)
	}
	if err != nil {
		if ctx.Err() != nil {
			return apitype.FileRef{}, ctxFailure(ctx)
		}
		return apitype.FileRef{}, fail(errcode.Unavailable, "runtime_lost", true, "reading output %s failed: %s", o.Name, errMessage(err))
	}
	ref.MIME = o.MIME
	pages, verr := s.validate(ctx, ref)
	if verr != nil {
		return apitype.FileRef{}, fail(errcode.Invalid, "invalid_output", false, "output %s is not valid: %v", o.Name, verr)
	}
	ref.Pages = pages
	return ref, nil
}

// validate checks an output's structure by its type and returns its page
// (or slide) count.
func (s *Service) validate(ctx context.Context, ref apitype.FileRef) (int, error) {
	f, err := s.blobs.Open(ctx, ref.SHA256)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	switch {
	case strings.HasPrefix(ref.MIME, "application/pdf"):
		return docfmt.PDF(f, ref.Size)
	case strings.HasPrefix(ref.MIME, "image/png"):
		_, _, err := docfmt.PNG(f)
		return 0, err
	case strings.Contains(ref.MIME, "presentationml"):
		return docfmt.PPTX(f, ref.Size)
	case strings.HasPrefix(ref.MIME, "application/json"):
		b, err := io.ReadAll(io.LimitReader(f, 64<<20+1))
		if err != nil || len(b) > 64<<20 || !json.Valid(b) {
			return 0, errors.New("not a JSON document of at most 64 MiB")
		}
		return 0, nil
	}
	return 0, fmt.Errorf("unexpected type %s", ref.MIME)
}

// recover makes every unfinished job runnable again after a restart: a
// job that was starting or running lost its attempt (its sandbox is
// deleted) and is queued again, or failed if that was its last; a queued
// job whose queue job is gone gets a new one. A cluster's worker recovers
// only the attempts it ran (HQ the rest: see Rescue); HQ only queued jobs.
func (s *Service) recover(ctx context.Context) error {
	open, err := s.store.JobsInStates(ctx, apitype.JobQueued, apitype.JobWaiting, apitype.JobStarting, apitype.JobRunning)
	if err != nil {
		return err
	}
	var mine, waiting []*Job // this node's to recover; those of them not in an attempt
	for _, j := range open {
		attempt := j.inAttempt()
		if c := s.cfg.Cluster; c != nil && ((attempt && (c.Worker == "" || j.Worker != c.Worker)) || (!attempt && c.Worker != "")) {
			continue
		}
		mine = append(mine, j)
		if !attempt {
			waiting = append(waiting, j)
		}
	}
	live, err := s.liveQueueJobs(ctx, waiting)
	if err != nil {
		return err
	}
	for _, j := range mine {
		attempt := j.inAttempt()
		if !attempt && live[j.RiverID] {
			continue // still queued in River
		}
		if j.SandboxID != "" && attempt {
			if err := s.mgr.Delete(ctx, j.SandboxID); err != nil && !errcode.Is(err, errcode.NotFound) {
				s.log.Warn("deleting an interrupted job's sandbox", "job_id", j.ID, "sandbox_id", j.SandboxID, "err", err)
			}
		}
		msg := "queued again after a daemon restart"
		if attempt {
			msg = fmt.Sprintf("attempt %d was interrupted by a daemon restart; queued again", j.Attempt)
		}
		if err := s.requeue(ctx, j, 0, msg, "the daemon stopped during the job's last attempt"); err != nil {
			return err
		}
		s.log.Info("recovered a job", "job_id", j.ID, "was", j.State)
	}
	return nil
}

// requeue queues job j again in a new queue job, in the River queue of its
// last: its attempt was interrupted (or, past its last attempt, it fails
// with lastWhy), or its queue job was lost. With fence set, only while
// queue job fence still owns it.
func (s *Service) requeue(ctx context.Context, j *Job, fence int64, msg, lastWhy string) error {
	if j.inAttempt() && j.Attempt >= j.MaxAttempts {
		_, err := s.change(ctx, j.ID, Change{From: []string{j.State}, RiverID: fence, To: apitype.JobFailed,
			Error: &apitype.JobError{Code: string(errcode.Unavailable), Reason: "interrupted", Message: lastWhy, Retryable: true}})
		return ignoreState(err)
	}
	// Queued first, for the first queue job that comes (as Submit does):
	// a consumer may take the new queue job before its ID is recorded.
	// Then the queue job, then its ID, unless one has claimed the job by
	// then. A failure in between leaves a queued job without a queue job,
	// which the next start (or HQ's Rescue) finds.
	queue := s.queueOf(ctx, j)
	none := ""
	if _, err := s.change(ctx, j.ID, Change{From: []string{j.State}, RiverID: fence, To: apitype.JobQueued, ResetRiver: true,
		Worker: &none, Event: apitype.JobEvent{Type: apitype.JobQueued, Message: msg}}); err != nil {
		return ignoreState(err)
	}
	res, err := s.river.Insert(ctx, runArgs{JobID: j.ID}, &river.InsertOpts{Queue: queue})
	if err != nil {
		return err
	}
	_, err = s.change(ctx, j.ID, Change{From: []string{apitype.JobQueued}, Unclaimed: true, NewRiver: res.Job.ID})
	return ignoreState(err)
}

// queueOf is the River queue job j was queued in.
func (s *Service) queueOf(ctx context.Context, j *Job) string {
	if j.RiverID != 0 {
		if rj, err := s.river.JobGet(ctx, j.RiverID); err == nil {
			return rj.Queue
		}
	}
	if s.cfg.Cluster == nil {
		return river.QueueDefault
	}
	profile := jobspec.ProfileBrowser
	if a := s.actions[j.Action]; a != nil {
		profile = a.spec.Profile
	}
	owner := s.cfg.Cluster.Tenant
	if s.hq() {
		owner, _ = s.cfg.Cluster.Route(ctx, j.Tenant, j.Action+"@"+j.ActionVersion)
	}
	return Queue(profile, owner)
}

// Rescue is HQ's part in a cluster's recovery, run every few seconds: the
// attempts of workers that reachable says no longer answer (their lease
// ran out) are queued again for another worker, fenced by their queue
// job, so a worker that was only cut off cannot record its attempt's end
// over the new one's; and queued jobs whose queue job was never written
// (the database failed between the two) or was lost get one, once older
// than queuedGrace.
func (s *Service) Rescue(ctx context.Context, reachable func(worker string) bool, queuedGrace time.Duration) error {
	open, err := s.store.JobsInStates(ctx, apitype.JobQueued, apitype.JobWaiting, apitype.JobStarting, apitype.JobRunning)
	if err != nil {
		return err
	}
	var queued []*Job // waiting longer than queuedGrace
	for _, j := range open {
		switch j.State {
		case apitype.JobStarting, apitype.JobRunning:
			if j.Worker == "" || reachable(j.Worker) {
				continue
			}
			msg := fmt.Sprintf("attempt %d was interrupted: worker %s stopped answering; queued again for another", j.Attempt, j.Worker)
			last := fmt.Sprintf("worker %s stopped answering during the job's last attempt", j.Worker)
			if err := s.requeue(ctx, j, j.RiverID, msg, last); err != nil {
				return err
			}
			s.log.Warn("requeued a lost worker's job", "job_id", j.ID, "worker", j.Worker, "attempt", j.Attempt)
		default:
			if time.Since(j.UpdatedAt) >= queuedGrace {
				queued = append(queued, j)
			}
		}
	}
	live, err := s.liveQueueJobs(ctx, queued)
	if err != nil {
		return err
	}
	for _, j := range queued {
		if live[j.RiverID] {
			continue
		}
		if err := s.requeue(ctx, j, j.RiverID, "queued again: its queue job was lost", ""); err != nil {
			return err
		}
		s.log.Warn("queued a job whose queue job was lost", "job_id", j.ID)
	}
	return nil
}

// liveQueueJobs reports which of the jobs' River jobs exist and are not
// finalized, a thousand at a time in one query each (a job may wait long
// for capacity: Rescue looks at it every few seconds). A job without one
// (RiverID 0) is never live.
func (s *Service) liveQueueJobs(ctx context.Context, js []*Job) (map[int64]bool, error) {
	var ids []int64
	for _, j := range js {
		if j.RiverID != 0 {
			ids = append(ids, j.RiverID)
		}
	}
	live := map[int64]bool{}
	for chunk := range slices.Chunk(ids, 1000) {
		res, err := s.river.JobList(ctx, river.NewJobListParams().IDs(chunk...).First(len(chunk)))
		if err != nil {
			return nil, err
		}
		for _, rj := range res.Jobs {
			live[rj.ID] = !finalized(rj.State)
		}
	}
	return live, nil
}

// inAttempt reports whether an attempt of j was under way.
func (j *Job) inAttempt() bool {
	return j.State == apitype.JobStarting || j.State == apitype.JobRunning
}

func finalized(st rivertype.JobState) bool {
	return st == rivertype.JobStateCompleted || st == rivertype.JobStateCancelled || st == rivertype.JobStateDiscarded
}

// sweep removes, every minute: jobs finished longer ago than the
// retention, job sandboxes nobody holds (left by a crash), temporary
// files, and blobs no job uses an hour after upload.
func (s *Service) sweep(ctx context.Context) {
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}

// Sweep is one pass of the sweeper.
func (s *Service) Sweep(ctx context.Context) {
	if n, err := s.store.DeleteFinishedJobs(ctx, time.Now().Add(-s.cfg.Retention)); err != nil {
		s.log.Warn("deleting old jobs", "err", err)
	} else if n > 0 {
		s.log.Info("deleted finished jobs past their retention", "jobs", n)
	}
	s.blobs.clearTemp(BlobGrace)
	s.blobs.evict(BlobGrace)
	unused, err := s.store.UnusedBlobs(ctx, time.Now().Add(-BlobGrace))
	if err != nil {
		return
	}
	for _, sha := range unused {
		if err := s.store.DeleteBlob(ctx, sha); err != nil {
			continue
		}
		if err := s.blobs.remove(sha); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("removing an unused file", "sha256", sha, "err", err)
		}
	}
	s.sweepSandboxes(ctx)
}

// BlobGrace is how long an upload no job names, or a temporary file, is
// kept; OrphanAge how old a job sandbox no pool or job holds must be to be
// deleted (younger ones may be starting). Tests shorten them.
var (
	BlobGrace = time.Hour
	OrphanAge = 2 * time.Minute
)

// sweepSandboxes deletes job sandboxes no pool and no job holds: those a
// crashed daemon left, or a teardown that failed.
func (s *Service) sweepSandboxes(ctx context.Context) {
	if s.mgr == nil {
		return // a cluster's HQ has none
	}
	all, err := s.mgr.Internal(ctx, "job-")
	if err != nil {
		return
	}
	for _, sb := range all {
		s.mu.Lock()
		held := s.held[sb.ID]
		s.mu.Unlock()
		if held || time.Since(sb.CreatedAt) < OrphanAge {
			continue
		}
		s.log.Info("deleting an orphaned job sandbox", "sandbox_id", sb.ID)
		if err := s.mgr.Delete(ctx, sb.ID); err != nil && !errcode.Is(err, errcode.NotFound) {
			s.log.Warn("deleting an orphaned job sandbox", "sandbox_id", sb.ID, "err", err)
		}
	}
}
