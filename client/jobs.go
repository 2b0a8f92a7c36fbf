package client

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
)

// Job types, under names code outside this module can use.
type (
	Job              = apitype.Job
	JobEvent         = apitype.JobEvent
	JobInput         = apitype.JobInput
	JobError         = apitype.JobError
	FileRef          = apitype.FileRef
	CreateJobRequest = apitype.CreateJobRequest
	ActionHealth     = apitype.ActionHealth
	WorkspaceRef     = apitype.WorkspaceRef
)

// WorkspaceInput is a job input read from path in sandbox's workspace.
func WorkspaceInput(sandbox, path string) JobInput {
	return JobInput{Sandbox: sandbox, Path: path}
}

// ActionCatalog reports every action's health with the job runtime's
// digest, as recorded when the daemon started and (when it changed since)
// as it is now.
func (c *Client) ActionCatalog(ctx context.Context) (apitype.Actions, error) {
	var out apitype.Actions
	err := c.doJSON(ctx, http.MethodGet, "/v1/actions", nil, nil, &out)
	return out, err
}

// Actions reports every action's health.
func (c *Client) Actions(ctx context.Context) ([]apitype.ActionHealth, error) {
	var out apitype.Actions
	err := c.doJSON(ctx, http.MethodGet, "/v1/actions", nil, nil, &out)
	return out.Actions, err
}

// Action reports one action's health (an unknown action is a NotFound
// error).
func (c *Client) Action(ctx context.Context, name string) (apitype.ActionHealth, error) {
	var out apitype.ActionHealth
	err := c.doJSON(ctx, http.MethodGet, "/v1/actions/"+url.PathEscape(name), nil, nil, &out)
	return out, err
}

// UploadFile stores a job input and returns its reference; name helps
// the server tell its type.
func (c *Client) UploadFile(ctx context.Context, r io.Reader, name string) (apitype.FileRef, error) {
	var q url.Values
	if name != "" {
		q = url.Values{"name": {name}}
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/files", q, r, "application/octet-stream")
	if err != nil {
		return apitype.FileRef{}, err
	}
	defer resp.Body.Close()
	var ref apitype.FileRef
	return ref, json.NewDecoder(resp.Body).Decode(&ref)
}

// DownloadFile returns a stored file's content; close it.
func (c *Client) DownloadFile(ctx context.Context, sha256 string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/files/"+url.PathEscape(sha256), nil, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// CreateJob queues a job. A repeat of an earlier request (same
// business_id and request) returns the earlier job with Repeat set.
func (c *Client) CreateJob(ctx context.Context, req apitype.CreateJobRequest) (apitype.Job, error) {
	var out apitype.Job
	err := c.doJSON(ctx, http.MethodPost, "/v1/jobs", nil, req, &out)
	return out, err
}

// Job returns a job.
func (c *Client) Job(ctx context.Context, id string) (apitype.Job, error) {
	var out apitype.Job
	err := c.doJSON(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// JobFilter selects jobs to list: a page of Limit (default 100) after
// Cursor (a page's NextCursor).
type JobFilter struct {
	State, Action string
	Limit         int
	Cursor        string
}

// Jobs lists jobs, newest first: the first page f selects.
func (c *Client) Jobs(ctx context.Context, f JobFilter) ([]apitype.Job, error) {
	page, err := c.JobsPage(ctx, f)
	return page.Jobs, err
}

// JobsPage lists a page of jobs, newest first, with the cursor of the
// next page when there is one.
func (c *Client) JobsPage(ctx context.Context, f JobFilter) (apitype.Jobs, error) {
	q := url.Values{}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Action != "" {
		q.Set("action", f.Action)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out apitype.Jobs
	err := c.doJSON(ctx, http.MethodGet, "/v1/jobs", q, nil, &out)
	return out, err
}

// CancelJob cancels a job and returns it once canceled.
func (c *Client) CancelJob(ctx context.Context, id string) (apitype.Job, error) {
	var out apitype.Job
	err := c.doJSON(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil, &out)
	return out, err
}

// JobEvents streams a job's events after seq to fn until the job is
// finished (nil), fn returns an error, or ctx ends.
func (c *Client) JobEvents(ctx context.Context, id string, after int64, fn func(apitype.JobEvent) error) error {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev apitype.JobEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return ctx.Err()
}

// WaitJob waits until the job is finished and returns it.
func (c *Client) WaitJob(ctx context.Context, id string) (apitype.Job, error) {
	if err := c.JobEvents(ctx, id, 0, func(apitype.JobEvent) error { return nil }); err != nil {
		return apitype.Job{}, err
	}
	return c.Job(ctx, id)
}

// Convert runs a job synchronously (POST /v1/convert/{action}) and
// returns the output's content (close it) and the job's ID.
func (c *Client) Convert(ctx context.Context, req apitype.CreateJobRequest) (io.ReadCloser, string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/convert/"+url.PathEscape(req.Action), nil, strings.NewReader(string(b)), "application/json")
	if err != nil {
		return nil, "", err
	}
	return resp.Body, resp.Header.Get("Berth-Job-Id"), nil
}
