package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
)

// jobEvent is what a job's page reads from its event stream: the API's
// event, and on the last one the job's outputs (the page lists them as
// text).
type jobEvent struct {
	Type    string            `json:"type"`
	Percent int               `json:"percent,omitempty"`
	Message string            `json:"message,omitempty"`
	Attempt int               `json:"attempt,omitempty"`
	Error   *apitype.JobError `json:"error,omitempty"`
	Outputs []jobOutput       `json:"outputs,omitempty"`
}

type jobOutput struct {
	Name string `json:"name"`
	Href string `json:"href"`
	MIME string `json:"mime"`
	Size int64  `json:"size"`
}

// handleJobEvents relays a job's events (the API's GET
// /v1/jobs/{id}/events) as server-sent events named "job", each with its
// sequence number as its id, so a browser that reconnects goes on from
// Last-Event-ID. The stream ends when the job does: the last event, named
// "end", carries the job's final state and outputs.
func (d *Dashboard) handleJobEvents(rq *req) {
	id := rq.r.PathValue("id")
	after, _ := strconv.ParseInt(rq.r.Header.Get("Last-Event-ID"), 10, 64)
	w := rq.w
	flusher, _ := w.(http.Flusher)
	started := false
	send := func(name string, seq int64, ev jobEvent) error {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b, _ := json.Marshal(ev)
		idLine := ""
		if seq > 0 {
			idLine = fmt.Sprintf("id: %d\n", seq)
		}
		if _, err := fmt.Fprintf(w, "%sevent: %s\ndata: %s\n\n", idLine, name, b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	err := rq.c.JobEvents(rq.ctx(), id, max(after, 0), func(ev apitype.JobEvent) error {
		return send("job", ev.Seq, jobEvent{Type: ev.Type, Percent: ev.Percent, Message: ev.Message, Attempt: ev.Attempt, Error: ev.Error})
	})
	if err != nil {
		if !started {
			d.apiFailed(rq, err)
		} else {
			_ = send("failed", 0, jobEvent{Message: errMessage(err)})
		}
		return
	}
	job, err := rq.c.Job(rq.ctx(), id)
	if err != nil {
		_ = send("failed", 0, jobEvent{Message: errMessage(err)})
		return
	}
	end := jobEvent{Type: job.State, Error: job.Error, Percent: 100}
	for _, o := range job.Outputs {
		name := o.Name
		if name == "" {
			name = "output"
		}
		end.Outputs = append(end.Outputs, jobOutput{Name: name, MIME: o.MIME, Size: o.Size,
			Href: "/ui/jobs/" + url.PathEscape(job.ID) + "/outputs/" + url.PathEscape(o.SHA256)})
	}
	if job.State != apitype.JobSucceeded {
		end.Percent = 0
	}
	_ = send("end", 0, end)
}
