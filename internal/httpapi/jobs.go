package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/wire"
)

// maxJobBody bounds a JSON job request: inputs may come inline in base64;
// larger ones are uploaded with POST /v1/files first.
const maxJobBody = 48 << 20

func (s *Server) jobsUnavailable(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Jobs == nil {
		s.fail(w, r, errcode.WorkerUnavailable.New("sandbox jobs are not enabled on this daemon"))
		return true
	}
	return false
}

// UserHeader names the end user a tenant's application acts for.
const UserHeader = "Berth-User"

// jobPrincipal is who a request acts for: its key's tenant (an admin
// key's: the default tenant, seeing all) and the end user the Berth-User
// header names, else the key.
func (s *Server) jobPrincipal(r *http.Request) jobs.Principal {
	p := principalOf(r)
	return jobs.Principal{Tenant: s.tenantOf(r), User: cmp.Or(r.Header.Get(UserHeader), p.KeyID), Admin: p.Admin()}
}

func (s *Server) handleListActions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		out := apitype.Actions{Actions: s.cfg.Jobs.Actions()}
		out.RuntimeDigest, out.RuntimeDigestNow = s.cfg.Jobs.RuntimeDigest()
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleGetAction() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		h := s.cfg.Jobs.Health(r.PathValue("name"))
		if h.Reason == jobs.ActionMissing {
			s.fail(w, r, errcode.ActionMissing.New("%s (%s)", h.Message, h.Hint))
			return
		}
		wire.Encode(w, http.StatusOK, h)
	})
}

func (s *Server) handleUploadFile() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		if r.ContentLength > jobs.MaxInputBytes {
			s.fail(w, r, errcode.FileTooLarge.New("the file is %d bytes; at most %d", r.ContentLength, int64(jobs.MaxInputBytes)))
			return
		}
		ref, err := s.cfg.Jobs.PutFile(r.Context(), s.tenantOf(r), r.Body, r.URL.Query().Get("name"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/files/"+ref.SHA256)
		wire.Encode(w, http.StatusCreated, ref)
	})
}

func (s *Server) handleDownloadFile() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		sha := r.PathValue("sha256")
		ref, err := s.cfg.Jobs.File(r.Context(), s.jobPrincipal(r), sha)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.serveBlob(w, r, ref, "")
	})
}

// serveBlob writes a stored file as the response, named name if given.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, ref apitype.FileRef, name string) {
	f, err := s.cfg.Jobs.Blobs().Open(r.Context(), ref.SHA256)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", ref.MIME)
	w.Header().Set("ETag", `"`+ref.SHA256+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if name != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	http.ServeContent(w, r, "", time.Time{}, f)
}

func (s *Server) handleCreateJob() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		var req apitype.CreateJobRequest
		if err := wire.DecodeJSON(http.MaxBytesReader(w, r.Body, maxJobBody), &req); err != nil {
			s.fail(w, r, err)
			return
		}
		j, repeat, err := s.cfg.Jobs.Submit(r.Context(), s.jobPrincipal(r), req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		v := j.View()
		v.Repeat = repeat
		w.Header().Set("Location", "/v1/jobs/"+j.ID)
		status := http.StatusAccepted
		if repeat {
			status = http.StatusOK
		}
		wire.Encode(w, status, v)
	})
}

func (s *Server) handleListJobs() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		q := r.URL.Query()
		limit, err := pageLimit(q.Get("limit"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if limit == 0 {
			limit = 100
		}
		before, err := s.readPosition(r, "jobs")
		if err != nil {
			s.fail(w, r, err)
			return
		}
		// One more than a page says whether there is a next one.
		f := jobs.Filter{State: q.Get("state"), Action: q.Get("action"), Limit: limit + 1, Before: before.ID, BeforeAt: before.At}
		list, err := s.cfg.Jobs.List(r.Context(), s.jobPrincipal(r), f)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		list, next := nextPage(s, r, "jobs", list, limit, func(j *jobs.Job) position { return position{j.CreatedAt, j.ID} })
		out := apitype.Jobs{Jobs: []apitype.Job{}, NextCursor: next}
		for _, j := range list {
			out.Jobs = append(out.Jobs, j.View())
		}
		wire.Encode(w, http.StatusOK, out)
	})
}

func (s *Server) handleGetJob() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		j, err := s.cfg.Jobs.Get(r.Context(), s.jobPrincipal(r), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, j.View())
	})
}

func (s *Server) handleCancelJob() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		j, err := s.cfg.Jobs.Cancel(r.Context(), s.jobPrincipal(r), r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		wire.Encode(w, http.StatusOK, j.View())
	})
}

// handleJobEvents streams a job's events as server-sent events: those
// after Last-Event-ID (or ?after=), then new ones as they happen, until
// the job is finished.
func (s *Server) handleJobEvents() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		id := r.PathValue("id")
		if _, err := s.cfg.Jobs.Get(r.Context(), s.jobPrincipal(r), id); err != nil {
			s.fail(w, r, err)
			return
		}
		after := int64(0)
		for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
			if v == "" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.fail(w, r, errcode.InvalidFields(map[string]string{"after": "must be an event sequence number"}))
				return
			}
			after = n
		}
		poke, done := s.cfg.Jobs.Subscribe(id)
		defer done()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		keepalive := time.NewTicker(15 * time.Second)
		defer keepalive.Stop()
		for {
			evs, err := s.cfg.Jobs.Events(r.Context(), id, after)
			if err != nil {
				return
			}
			end := false
			for _, ev := range evs {
				b, _ := json.Marshal(ev)
				if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b); err != nil {
					return
				}
				after = ev.Seq
				end = end || apitype.JobTerminal(ev.Type)
			}
			_ = rc.Flush()
			if end {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-poke:
			case <-keepalive.C:
				if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
					return
				}
				_ = rc.Flush()
			}
		}
	})
}

// handleConvert runs a job and answers with its output: for callers used
// to Gotenberg. The body is the JSON of POST /v1/jobs (action from the
// path) or a multipart form: files are the inputs; a field "options"
// holds JSON options, "business_id" the business id, and any other field
// is one option (JSON values such as true or 2.5, else strings).
func (s *Server) handleConvert() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jobsUnavailable(w, r) {
			return
		}
		action := r.PathValue("action")
		var req apitype.CreateJobRequest
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct == "multipart/form-data" {
			var err error
			if req, err = s.multipartJob(r); err != nil {
				s.fail(w, r, err)
				return
			}
		} else if err := wire.DecodeJSON(http.MaxBytesReader(w, r.Body, maxJobBody), &req); err != nil {
			s.fail(w, r, err)
			return
		}
		if req.Action != "" && req.Action != action {
			s.fail(w, r, errcode.InvalidFields(map[string]string{"action": "differs from the action in the path"}))
			return
		}
		req.Action = action
		who := s.jobPrincipal(r)
		j, _, err := s.cfg.Jobs.Submit(r.Context(), who, req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Berth-Job-Id", j.ID)
		j, err = s.cfg.Jobs.Wait(r.Context(), j.ID)
		if err != nil {
			if r.Context().Err() != nil {
				// The caller left: the job is theirs no longer.
				_, _ = s.cfg.Jobs.Cancel(context.WithoutCancel(r.Context()), who, j.ID)
			}
			s.fail(w, r, err)
			return
		}
		switch {
		case j.State == apitype.JobSucceeded && len(j.Outputs) > 0:
			out := j.Outputs[0]
			s.serveBlob(w, r, out, strings.TrimSuffix(mainName(j), extOf(mainName(j)))+extOf(out.Name))
		case j.Error != nil:
			s.fail(w, r, &errcode.Error{Code: errcode.Code(j.Error.Code), Reason: j.Error.Reason,
				Message: fmt.Sprintf("job %s failed: %s", j.ID, j.Error.Message)})
		default:
			s.fail(w, r, errcode.JobCanceled.New("job %s was %s", j.ID, j.State))
		}
	})
}

func mainName(j *jobs.Job) string {
	if len(j.Inputs) > 0 {
		return j.Inputs[0].Name
	}
	return "result"
}

func extOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[i:]
	}
	return ""
}

// putPart stores a form's file part as the tenant's file called name and
// adds its size to *total, which may not pass jobs.MaxInputBytes.
func (s *Server) putPart(r *http.Request, part *multipart.Part, name string, total *int64) (apitype.FileRef, error) {
	ref, err := s.cfg.Jobs.PutFile(r.Context(), s.tenantOf(r), part, name)
	part.Close()
	if err != nil {
		return ref, err
	}
	if *total += ref.Size; *total > jobs.MaxInputBytes {
		return ref, errcode.InputsTooLarge.New("the inputs come to more than %d bytes", int64(jobs.MaxInputBytes))
	}
	return ref, nil
}

// multipartJob reads a multipart form into a job request, storing each
// file part as it streams in.
func (s *Server) multipartJob(r *http.Request) (apitype.CreateJobRequest, error) {
	req := apitype.CreateJobRequest{Inputs: map[string]apitype.JobInput{}}
	mr, err := r.MultipartReader()
	if err != nil {
		return req, errcode.Wrap(errcode.Invalid, err, "the body is not a multipart form")
	}
	opts := map[string]json.RawMessage{}
	var total int64
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return req, errcode.Wrap(errcode.Invalid, err, "reading the multipart form failed")
		}
		field, file := part.FormName(), part.FileName()
		if file != "" {
			ref, err := s.putPart(r, part, file, &total)
			if err != nil {
				return req, err
			}
			req.Inputs[file] = apitype.JobInput{SHA256: ref.SHA256}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(part, 1<<20))
		part.Close()
		if err != nil {
			return req, errcode.Wrap(errcode.Invalid, err, "reading the multipart form failed")
		}
		switch field {
		case "business_id":
			req.BusinessID = string(b)
		case "version":
			req.Version = string(b)
		case "output":
			// A workspace destination: {"sandbox": "sbx_...", "path": "exports/"}.
			req.Output = &apitype.WorkspaceRef{}
			if err := wire.DecodeJSON(bytes.NewReader(b), req.Output); err != nil {
				return req, errcode.InvalidFields(map[string]string{"output": `must be a JSON object {"sandbox": ..., "path": ...}`})
			}
		case "options":
			// Strictly, as a JSON body is: a repeated or miscased name, or
			// invalid UTF-8, is refused with its reason.
			err := wire.DecodeJSON(bytes.NewReader(b), &opts)
			if err != nil && !errcode.Has(err, errcode.BodyInvalid) {
				return req, err
			}
			if err != nil || len(bytes.TrimSpace(b)) == 0 {
				return req, errcode.InvalidFields(map[string]string{"options": "must be a JSON object"})
			}
		default:
			if json.Valid(b) {
				opts[field] = b
			} else {
				q, _ := json.Marshal(string(b))
				opts[field] = q
			}
		}
	}
	if len(opts) > 0 {
		req.Options, _ = json.Marshal(opts)
	}
	return req, nil
}
