package apitype

import (
	"encoding/json"
	"time"
)

// Job states.
const (
	JobQueued    = "queued"
	JobWaiting   = "waiting" // for capacity; consumes no retry
	JobStarting  = "starting"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCanceled  = "canceled"
)

// JobTerminal reports whether a job in state s is finished.
func JobTerminal(s string) bool { return s == JobSucceeded || s == JobFailed || s == JobCanceled }

// FileRef is a stored file: inputs and outputs are content-addressed.
type FileRef struct {
	Name   string `json:"name,omitempty"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	MIME   string `json:"mime"`
	Pages  int    `json:"pages,omitempty"` // PDF pages, PPTX slides
	// Workspace is where in a sandbox's workspace the file was read from
	// (an input) or written to (an output), when it was.
	Workspace *WorkspaceRef `json:"workspace,omitempty"`
}

// WorkspaceRef names a file (or, for an output ending in "/", a
// directory) in a sandbox's workspace.
type WorkspaceRef struct {
	Sandbox string `json:"sandbox"`
	Path    string `json:"path"`
}

// JobInput is one input of a job request: inline bytes, a file uploaded
// with POST /v1/files, or a file in a sandbox's workspace (Sandbox and
// Path, read when the job is submitted).
type JobInput struct {
	ContentBase64 string `json:"content_base64,omitempty"`
	SHA256        string `json:"sha256,omitempty"`
	Sandbox       string `json:"sandbox,omitempty"`
	Path          string `json:"path,omitempty"`
}

// CreateJobRequest is the body of POST /v1/jobs (and of POST
// /v1/convert/{action}, whose action comes from the path).
type CreateJobRequest struct {
	Action     string `json:"action"`
	BusinessID string `json:"business_id,omitempty"`
	// User names the end user the tenant's application acts for; jobs
	// count capacity per user with it. "" takes the Berth-User header,
	// then the key.
	User    string              `json:"user,omitempty"`
	Inputs  map[string]JobInput `json:"inputs"`
	Options json.RawMessage     `json:"options,omitempty"`
	// Version, when set, must be the action's version (else
	// VERSION_MISMATCH, before anything is queued).
	Version string `json:"version,omitempty"`
	// Output, when set, is where in a sandbox's workspace the outputs are
	// written too: a directory ending in "/" keeps each output's name,
	// another path is the file's (one output only).
	Output *WorkspaceRef `json:"output,omitempty"`
}

// JobError says why a job failed.
type JobError struct {
	Code      string `json:"code"`   // an errcode: invalid, deadline_exceeded, unavailable...
	Reason    string `json:"reason"` // specific: invalid_input, timeout, runtime_start...
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Job is a job as the API shows it.
type Job struct {
	ID            string          `json:"id"`
	Action        string          `json:"action"`
	ActionVersion string          `json:"action_version"`
	State         string          `json:"state"`
	BusinessID    string          `json:"business_id,omitempty"`
	RequestSHA256 string          `json:"request_sha256"`
	Inputs        []FileRef       `json:"inputs"`
	Options       json.RawMessage `json:"options,omitempty"`
	Outputs       []FileRef       `json:"outputs"`
	// Output is the workspace destination the request named.
	Output      *WorkspaceRef `json:"output,omitempty"`
	Error       *JobError     `json:"error,omitempty"`
	Attempt     int           `json:"attempt"`
	MaxAttempts int           `json:"max_attempts"`
	// Blocked lists requests the document made that were refused.
	Blocked    []string   `json:"blocked,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Worker is the cluster worker that ran (or runs) its last attempt;
	// absent on one daemon.
	Worker string `json:"worker,omitempty"`
	// Repeat is set on POST /v1/jobs answers that return an earlier job
	// for the same business_id and request.
	Repeat bool `json:"repeat,omitempty"`
}

// JobEvent is one entry of a job's event log (GET /v1/jobs/{id}/events).
type JobEvent struct {
	Seq     int64     `json:"seq"`
	Type    string    `json:"type"` // a state, or "progress"
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt,omitempty"`
	Message string    `json:"message,omitempty"`
	// Percent is set on progress events.
	Percent int       `json:"percent,omitempty"`
	Error   *JobError `json:"error,omitempty"`
}

// Jobs is a page of GET /v1/jobs.
type Jobs struct {
	Jobs []Job `json:"jobs"`
	// NextCursor, when set, fetches the next page (?cursor=).
	NextCursor string `json:"next_cursor,omitempty"`
}

// ActionHealth is an action as GET /v1/actions shows it.
type ActionHealth struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Profile     string   `json:"profile"`
	Base        string   `json:"base"`
	Builtin     bool     `json:"builtin"`
	Description string   `json:"description,omitempty"`
	Output      string   `json:"output,omitempty"`
	Extensions  []string `json:"extensions,omitempty"`
	// RuntimeDigest is the job runtime digest the action needs: the one a
	// bundle pins, else the runtime's recorded when this daemon started.
	RuntimeDigest string `json:"runtime_digest,omitempty"`
	// Available is true when a job of this action would be accepted now;
	// otherwise Reason is the most specific cause (ACTION_MISSING,
	// ACTION_INVALID, PROFILE_MISSING, RUNTIME_UNBOUND, VERSION_MISMATCH,
	// PROFILE_UNHEALTHY, PROVIDER_UNAVAILABLE, WORKER_UNAVAILABLE).
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	Hint      string `json:"hint,omitempty"`
	// Options are the options the action takes, with a bundle's defaults;
	// OptionsSchema is the same as a JSON Schema (2020-12).
	Options       []ActionOption  `json:"options,omitempty"`
	OptionsSchema json.RawMessage `json:"options_schema,omitempty"`
}

// ActionOption is one option of an action: its type, default and bounds
// as JSON Schema names them, and what it does.
type ActionOption struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"` // string, number, integer or boolean
	Default any      `json:"default,omitempty"`
	Enum    []string `json:"enum,omitempty"`
	Min     *float64 `json:"minimum,omitempty"`
	Max     *float64 `json:"maximum,omitempty"`
	// MaxLength bounds a string, in bytes.
	MaxLength   int    `json:"max_length,omitempty"`
	Description string `json:"description"`
}

// Actions is the answer of GET /v1/actions.
type Actions struct {
	Actions []ActionHealth `json:"actions"`
	// RuntimeDigest identifies the job runtime this daemon recorded when
	// it built it; RuntimeDigestNow is what it holds now, when that
	// differs (every action is then PROFILE_UNHEALTHY).
	RuntimeDigest    string `json:"runtime_digest,omitempty"`
	RuntimeDigestNow string `json:"runtime_digest_now,omitempty"`
}
