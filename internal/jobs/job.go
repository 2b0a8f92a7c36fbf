// Package jobs runs sandbox jobs: one-shot, resource-bounded Actions (HTML
// to PDF, PNG or PPTX, Markdown to PDF, office documents to PDF), each in
// a fresh container sandbox, accepted only when they can really run.
//
// The queue is River on the daemon's SQLite. River holds only the queue;
// the jobs table holds what users see: state, inputs, outputs, errors and
// an event log. A job row names the River job responsible for it
// (river_id), so a queue job left over from before a crash finds another
// in charge and does nothing: a job completes once.
package jobs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/berthdev/berth/internal/apitype"
)

// Job is a job as stored.
type Job struct {
	ID            string
	Action        string
	ActionVersion string
	State         string
	Tenant        string
	Owner         string // the key that created it
	BusinessID    string
	RequestSHA256 string
	Inputs        []apitype.FileRef
	Options       json.RawMessage
	Outputs       []apitype.FileRef
	Output        *apitype.WorkspaceRef // where the outputs are written too, or nil
	Error         *apitype.JobError
	Blocked       []string
	Attempt       int
	MaxAttempts   int
	RiverID       int64
	SandboxID     string
	Worker        string // the cluster worker running its attempt ("" alone)
	CreatedAt     time.Time
	UpdatedAt     time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
}

// View returns the job as the API shows it.
func (j *Job) View() apitype.Job {
	v := apitype.Job{
		ID: j.ID, Action: j.Action, ActionVersion: j.ActionVersion, State: j.State, BusinessID: j.BusinessID,
		RequestSHA256: j.RequestSHA256, Inputs: j.Inputs, Options: j.Options, Outputs: j.Outputs, Error: j.Error,
		Output: j.Output, Blocked: j.Blocked, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CreatedAt: j.CreatedAt,
		UpdatedAt: j.UpdatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Worker: j.Worker,
	}
	if v.Inputs == nil {
		v.Inputs = []apitype.FileRef{}
	}
	if v.Outputs == nil {
		v.Outputs = []apitype.FileRef{}
	}
	return v
}

// Change is a state transition of a job, applied with its event in one
// transaction, only if the job is in one of From (and, when RiverID is
// set, run by that queue job or by none recorded yet).
type Change struct {
	From    []string
	RiverID int64
	// To is the new state; "" keeps it (a progress event, say).
	To string
	// Fields to set; nil leaves them.
	Attempt   *int
	SandboxID *string
	Worker    *string // the cluster worker running the attempt
	Outputs   []apitype.FileRef
	Error     *apitype.JobError
	Blocked   []string
	NewRiver  int64 // a new queue job takes over
	// ResetRiver leaves the job to the first queue job that claims it
	// (river_id 0), as a new job is; Unclaimed applies the change only
	// while none has.
	ResetRiver, Unclaimed bool
	Event                 apitype.JobEvent
}

// Filter selects jobs to list.
type Filter struct {
	Tenant string // "" for all
	Owner  string // "" for all
	State  string
	Action string
	Limit  int
	// Before, when set, lists only jobs older than (BeforeAt, Before) in
	// the newest-first order: the next page.
	Before   string
	BeforeAt time.Time
}

// Blob is a stored file's record.
type Blob struct {
	SHA256    string
	Size      int64
	MIME      string
	CreatedAt time.Time
}

// Store persists jobs, their events and blobs.
type Store interface {
	// InsertJob stores a new job with its first event. A business id in
	// use (an active or succeeded job of the tenant) is a Conflict with
	// reason business_id_taken.
	InsertJob(ctx context.Context, j *Job, ev apitype.JobEvent) error
	GetJob(ctx context.Context, id string) (*Job, error)
	JobByBusinessID(ctx context.Context, tenant, businessID string) (*Job, error)
	ListJobs(ctx context.Context, f Filter) ([]*Job, error)
	// ChangeJob applies c and returns the job after it; a job not in
	// c.From (or run by another queue job) is a Conflict with reason
	// job_state.
	ChangeJob(ctx context.Context, id string, c Change) (*Job, error)
	JobEvents(ctx context.Context, id string, after int64) ([]apitype.JobEvent, error)
	// ActiveJobs counts jobs starting or running: all, of tenant, of owner.
	ActiveJobs(ctx context.Context, tenant, owner string) (global, ofTenant, ofOwner int, err error)
	// JobsInStates lists jobs in any of states, oldest first.
	JobsInStates(ctx context.Context, states ...string) ([]*Job, error)

	// DeleteFinishedJobs deletes jobs finished before cutoff, with their
	// events (their files become unused, for the sweeper).
	DeleteFinishedJobs(ctx context.Context, cutoff time.Time) (int, error)

	PutBlob(ctx context.Context, b Blob) error
	GetBlob(ctx context.Context, sha string) (*Blob, error)
	// UnusedBlobs lists blobs created before cutoff that no job uses.
	UnusedBlobs(ctx context.Context, cutoff time.Time) ([]string, error)
	DeleteBlob(ctx context.Context, sha string) error
	// AddBlobOwner lets tenant read blob sha (it uploaded it, or its job
	// made it); BlobOwned reports whether it may.
	AddBlobOwner(ctx context.Context, tenant, sha string) error
	BlobOwned(ctx context.Context, tenant, sha string) (bool, error)
}
