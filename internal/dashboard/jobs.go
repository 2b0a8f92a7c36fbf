package dashboard

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

type jobsPage struct {
	Actions []apitype.ActionHealth
	// Off says why jobs cannot run here (the API's message), if so.
	Off        string
	Jobs       []apitype.Job
	NextCursor string
}

func (d *Dashboard) handleJobs(rq *req) {
	var p jobsPage
	actions, err := rq.c.Actions(rq.ctx())
	if d.unavailable(rq, err, &p.Off) {
		return
	}
	p.Actions = actions
	page, err := rq.c.JobsPage(rq.ctx(), client.JobFilter{Limit: pageSize, Cursor: rq.r.URL.Query().Get("cursor")})
	if d.unavailable(rq, err, &p.Off) {
		return
	}
	p.Jobs, p.NextCursor = page.Jobs, page.NextCursor
	rq.render(d, "jobs", p)
}

// handleSubmitJob reads a multipart form (action, options as JSON, one
// file), uploads the file as the job's input and submits the job.
func (d *Dashboard) handleSubmitJob(rq *req) {
	mr, err := rq.r.MultipartReader()
	if err != nil {
		d.fail(rq.w, rq.r, errcode.BodyInvalid.New("a job submission is a multipart form: %v", err))
		return
	}
	req := apitype.CreateJobRequest{Inputs: map[string]apitype.JobInput{}}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			d.fail(rq.w, rq.r, errcode.BodyInvalid.New("reading the form: %v", err))
			return
		}
		switch part.FormName() {
		case "action", "options":
			b, _ := io.ReadAll(io.LimitReader(part, maxForm))
			if part.FormName() == "action" {
				req.Action = strings.TrimSpace(string(b))
			} else if o := bytes.TrimSpace(b); len(o) > 0 {
				if !json.Valid(o) {
					part.Close()
					d.fail(rq.w, rq.r, errcode.InvalidFields(map[string]string{"options": "must be a JSON object"}))
					return
				}
				req.Options = o
			}
		case "file":
			name := path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
			if part.FileName() == "" {
				break
			}
			ref, err := rq.c.UploadFile(rq.ctx(), part, name)
			if err != nil {
				part.Close()
				d.apiFailed(rq, err)
				return
			}
			req.Inputs[name] = apitype.JobInput{SHA256: ref.SHA256}
		}
		part.Close()
	}
	job, err := rq.c.CreateJob(rq.ctx(), req)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/jobs/" + url.PathEscape(job.ID))
}

type jobPage struct {
	Job     apitype.Job
	Options string
	Done    bool
}

func (d *Dashboard) handleJob(rq *req) {
	job, err := rq.c.Job(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	p := jobPage{Job: job, Options: string(job.Options), Done: job.FinishedAt != nil}
	rq.render(d, "job", p)
}

func (d *Dashboard) handleCancelJob(rq *req) {
	id := rq.r.PathValue("id")
	if _, err := rq.c.CancelJob(rq.ctx(), id); err != nil {
		d.apiFailed(rq, err)
		return
	}
	rq.redirect("/ui/jobs/" + url.PathEscape(id))
}

// handleJobOutput downloads one of a job's outputs, as an attachment.
func (d *Dashboard) handleJobOutput(rq *req) {
	job, err := rq.c.Job(rq.ctx(), rq.r.PathValue("id"))
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	sha := rq.r.PathValue("sha256")
	var out *apitype.FileRef
	for i := range job.Outputs {
		if job.Outputs[i].SHA256 == sha {
			out = &job.Outputs[i]
		}
	}
	if out == nil {
		d.fail(rq.w, rq.r, errcode.FileNotFound.New("job %s has no output %s", job.ID, sha))
		return
	}
	body, err := rq.c.DownloadFile(rq.ctx(), sha)
	if err != nil {
		d.apiFailed(rq, err)
		return
	}
	defer body.Close()
	name := out.Name
	if name == "" {
		name = "output"
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = io.Copy(rq.w, body)
}
