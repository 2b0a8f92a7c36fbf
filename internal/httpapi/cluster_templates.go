package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Templates through HQ. A template is made on every worker that may hold
// the caller's sandboxes (a build or an import is sent to each, and a
// delete), so a sandbox made from it can be placed on any of them. A
// change reaches all of them or none: every one must be reachable first,
// and one that refuses undoes it on those that took it. Reads gather the
// workers' templates, one per name, with the state of the least advanced
// copy.

// hqTemplates is HQ's handler for the template route pattern.
func (s *Server) hqTemplates(pattern string) http.Handler {
	switch pattern {
	case "GET /v1/templates":
		return http.HandlerFunc(s.hqListTemplates)
	case "GET /v1/templates/{name}":
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t, _, err := s.hqTemplate(r, r.PathValue("name"))
			if err != nil {
				s.fail(w, r, err)
				return
			}
			wire.Encode(w, http.StatusOK, t)
		})
	case "GET /v1/templates/{name}/log":
		return http.HandlerFunc(s.hqTemplateLog)
	case "POST /v1/templates":
		return http.HandlerFunc(s.hqBuildTemplate)
	case "POST /v1/templates/import":
		return http.HandlerFunc(s.hqImportTemplate)
	case "DELETE /v1/templates/{name}":
		return http.HandlerFunc(s.hqDeleteTemplate)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errcode.ClusterUnsupported.New("this is a cluster's HQ, which does not serve %s", pattern))
	})
}

// templateWorkers are the caller of r and the workers that may hold its
// sandboxes: every worker but those dedicated to another tenant. For a
// change (every), each must be reachable; for a read, those that are not
// are returned apart.
func (s *Server) templateWorkers(r *http.Request, every bool) (caller cluster.Caller, reach []cluster.WorkerStatus, missing []string, _ error) {
	caller, err := s.caller(r)
	if err != nil {
		return caller, nil, nil, err
	}
	all, err := s.cfg.Cluster.Statuses(r.Context())
	if err != nil {
		return caller, nil, nil, err
	}
	for _, ws := range all {
		if caller.TenantName != "" && ws.Tenant != "" && ws.Tenant != caller.TenantName {
			continue
		}
		if !ws.Reachable() {
			if every {
				return caller, nil, nil, errcode.OwnerUnavailable.New("a template is made on every worker, and worker %s is %s: %s; try again when it is back (berth workers ls)",
					ws.ID, ws.Status, ws.Reason)
			}
			if ws.Status != cluster.StatusUnknown {
				missing = append(missing, ws.ID)
			}
			continue
		}
		reach = append(reach, ws)
	}
	if len(reach) == 0 && every {
		return caller, nil, nil, errcode.NoWorkerAvailable.New("no worker takes this tenant's sandboxes; see berth workers ls")
	}
	return caller, reach, missing, nil
}

// perWorker runs fn for each worker at once and returns the errors by
// worker ID.
func perWorker(ws []cluster.WorkerStatus, fn func(cluster.WorkerStatus) error) map[string]error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := map[string]error{}
	for _, w := range ws {
		wg.Go(func() {
			err := fn(w)
			mu.Lock()
			errs[w.ID] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// stateRank orders template states from the least advanced.
var stateRank = map[string]int{apitype.TemplateFailed: 0, apitype.TemplateBuilding: 1, apitype.TemplateReady: 2}

// mergeTemplate folds copy, worker's copy of a template, into t: the
// least advanced state wins, and a failure says where.
func mergeTemplate(t *apitype.Template, worker string, copy apitype.Template) {
	first := t.Name == ""
	if first {
		*t = copy
	}
	if first || stateRank[copy.State] < stateRank[t.State] {
		t.State, t.Reason = copy.State, copy.Reason
		if copy.State == apitype.TemplateFailed {
			t.Reason = "on worker " + worker + ": " + copy.Reason
		}
	}
	if copy.UpdatedAt.After(t.UpdatedAt) {
		t.UpdatedAt = copy.UpdatedAt
	}
}

// absentFrom adds to t's reason the workers that lack it.
func absentFrom(t *apitype.Template, workers []string) {
	if len(workers) == 0 {
		return
	}
	slices.Sort(workers)
	note := fmt.Sprintf("not on worker %s, where a sandbox from it cannot start (delete it and make it again)", strings.Join(workers, ", "))
	t.Reason = strings.TrimPrefix(t.Reason+"; "+note, "; ")
}

func (s *Server) hqListTemplates(w http.ResponseWriter, r *http.Request) {
	caller, ws, missing, err := s.templateWorkers(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	lists := map[string]apitype.TemplateList{}
	var mu sync.Mutex
	for id, err := range perWorker(ws, func(wk cluster.WorkerStatus) error {
		var l apitype.TemplateList
		err := s.cfg.Cluster.Get(r.Context(), wk.WorkerConfig, caller, "/v1/templates", requestID(r), &l)
		mu.Lock()
		lists[wk.ID] = l
		mu.Unlock()
		return err
	}) {
		if err != nil {
			s.log.WarnContext(r.Context(), "a worker did not answer a list", "worker", id, "err", err)
			missing = append(missing, id)
			delete(lists, id)
		}
	}
	byName := map[string]*apitype.Template{}
	has := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(lists)) {
		for _, t := range lists[id].Templates {
			if byName[t.Name] == nil {
				byName[t.Name] = &apitype.Template{}
			}
			mergeTemplate(byName[t.Name], id, t)
			has[t.Name] = append(has[t.Name], id)
		}
	}
	out := apitype.TemplateList{Templates: []apitype.Template{}}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		t := byName[name]
		var lacking []string
		for id := range lists {
			if !slices.Contains(has[name], id) {
				lacking = append(lacking, id)
			}
		}
		absentFrom(t, lacking)
		out.Templates = append(out.Templates, *t)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		w.Header().Set("Berth-Unavailable-Workers", strings.Join(missing, ","))
	}
	wire.Encode(w, http.StatusOK, out)
}

// hqTemplate is template name as the workers have it, and the worker of
// its least advanced copy (whose build log tells why).
func (s *Server) hqTemplate(r *http.Request, name string) (apitype.Template, cluster.WorkerConfig, error) {
	caller, ws, _, err := s.templateWorkers(r, false)
	if err != nil {
		return apitype.Template{}, cluster.WorkerConfig{}, err
	}
	copies := map[string]apitype.Template{}
	var mu sync.Mutex
	errs := perWorker(ws, func(wk cluster.WorkerStatus) error {
		var t apitype.Template
		err := s.cfg.Cluster.Get(r.Context(), wk.WorkerConfig, caller, "/v1/templates/"+url.PathEscape(name), requestID(r), &t)
		if err == nil {
			mu.Lock()
			copies[wk.ID] = t
			mu.Unlock()
		}
		return err
	})
	var out apitype.Template
	var from cluster.WorkerConfig
	var lacking []string
	for _, wk := range ws {
		if err := errs[wk.ID]; errcode.Is(err, errcode.NotFound) {
			lacking = append(lacking, wk.ID)
			continue
		} else if err != nil {
			return out, from, err
		}
		before := out.State
		mergeTemplate(&out, wk.ID, copies[wk.ID])
		if from.ID == "" || out.State != before {
			from = wk.WorkerConfig
		}
	}
	if out.Name == "" {
		return out, from, errcode.TemplateNotFound.New("template %q not found", name)
	}
	absentFrom(&out, lacking)
	return out, from, nil
}

func (s *Server) hqTemplateLog(w http.ResponseWriter, r *http.Request) {
	_, from, err := s.hqTemplate(r, r.PathValue("name"))
	if err == nil {
		var caller cluster.Caller
		if caller, err = s.caller(r); err == nil {
			s.cfg.Cluster.Serve(w, r, cluster.Forward{Worker: from, Caller: caller, RequestID: requestID(r), Fail: s.fail})
			return
		}
	}
	s.fail(w, r, err)
}

// broadcast sends a new template to every worker ws, each call made by
// call: first it checks that none has one of that name; then, if a worker
// refuses, the template is deleted again where it was made (once its
// build ends), and the refusal is the answer. The answers merge into one.
func (s *Server) broadcast(r *http.Request, caller cluster.Caller, ws []cluster.WorkerStatus, name string,
	call func() (cluster.Call, error)) (apitype.Template, error) {
	if name != "" {
		var have []string
		var mu sync.Mutex
		errs := perWorker(ws, func(wk cluster.WorkerStatus) error {
			var t apitype.Template
			err := s.cfg.Cluster.Get(r.Context(), wk.WorkerConfig, caller, "/v1/templates/"+url.PathEscape(name), requestID(r), &t)
			if err == nil {
				mu.Lock()
				have = append(have, wk.ID)
				mu.Unlock()
			}
			return err
		})
		for _, wk := range ws {
			if err := errs[wk.ID]; err != nil && !errcode.Is(err, errcode.NotFound) {
				return apitype.Template{}, err
			}
		}
		if len(have) > 0 {
			slices.Sort(have)
			return apitype.Template{}, errcode.TemplateExists.New("template %q exists on worker %s", name, strings.Join(have, ", "))
		}
	}
	answers := map[string]apitype.Template{}
	var mu sync.Mutex
	errs := perWorker(ws, func(wk cluster.WorkerStatus) error {
		c, err := call()
		if err != nil {
			return err
		}
		if cl, ok := c.Body.(io.Closer); ok {
			defer cl.Close()
		}
		var t apitype.Template
		if err := s.cfg.Cluster.Call(r.Context(), wk.WorkerConfig, caller, c, &t); err != nil {
			return err
		}
		mu.Lock()
		answers[wk.ID] = t
		mu.Unlock()
		return nil
	})
	var failed error
	for _, wk := range ws {
		if err := errs[wk.ID]; err != nil && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		for id := range answers {
			i := slices.IndexFunc(ws, func(w cluster.WorkerStatus) bool { return w.ID == id })
			go s.undoTemplate(context.WithoutCancel(r.Context()), ws[i].WorkerConfig, caller, name, requestID(r))
		}
		return apitype.Template{}, failed
	}
	var out apitype.Template
	for _, wk := range ws {
		mergeTemplate(&out, wk.ID, answers[wk.ID])
	}
	return out, nil
}

// undoTemplate deletes template name from worker w, waiting (up to 15
// minutes) for its build to end first.
func (s *Server) undoTemplate(ctx context.Context, w cluster.WorkerConfig, caller cluster.Caller, name, reqID string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	del := cluster.Call{Method: http.MethodDelete, URI: "/v1/templates/" + url.PathEscape(name), RequestID: reqID}
	for {
		err := s.cfg.Cluster.Call(ctx, w, caller, del, nil)
		if err == nil || errcode.Is(err, errcode.NotFound) {
			return
		}
		if !errcode.Has(err, errcode.TemplateBuilding) {
			s.log.WarnContext(ctx, "undoing a template on a worker after another refused it", "worker", w.ID, "template", name, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			s.log.WarnContext(ctx, "undoing a template on a worker: its build did not end", "worker", w.ID, "template", name)
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *Server) hqBuildTemplate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBuildBody))
	if err != nil {
		s.fail(w, r, errcode.Wrap(errcode.Invalid, err, "reading the request"))
		return
	}
	var req apitype.BuildTemplateRequest
	if err := wire.DecodeJSON(bytes.NewReader(body), &req); err != nil {
		s.fail(w, r, err)
		return
	}
	caller, ws, _, err := s.templateWorkers(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.broadcast(r, caller, ws, req.Name, func() (cluster.Call, error) {
		return cluster.Call{Method: http.MethodPost, URI: "/v1/templates", RequestID: requestID(r),
			ContentType: "application/json", Body: bytes.NewReader(body)}, nil
	})
	s.answerTemplate(w, r, http.StatusAccepted, t, err)
}

func (s *Server) hqImportTemplate(w http.ResponseWriter, r *http.Request) {
	caller, ws, _, err := s.templateWorkers(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	spool, err := s.spoolImport(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer os.Remove(spool)
	name := r.URL.Query().Get("name")
	t, err := s.broadcast(r, caller, ws, name, func() (cluster.Call, error) {
		f, err := os.Open(spool)
		if err != nil {
			return cluster.Call{}, err
		}
		return cluster.Call{Method: http.MethodPost, URI: r.URL.RequestURI(), RequestID: requestID(r),
			ContentType: r.Header.Get("Content-Type"), Body: f}, nil
	})
	s.answerTemplate(w, r, http.StatusCreated, t, err)
}

// answerTemplate answers a new template (status, with its Location), or
// err.
func (s *Server) answerTemplate(w http.ResponseWriter, r *http.Request, status int, t apitype.Template, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/templates/"+t.Name)
	wire.Encode(w, status, t)
}

func (s *Server) hqDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	caller, ws, _, err := s.templateWorkers(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	errs := perWorker(ws, func(wk cluster.WorkerStatus) error {
		return s.cfg.Cluster.Call(r.Context(), wk.WorkerConfig, caller,
			cluster.Call{Method: http.MethodDelete, URI: "/v1/templates/" + url.PathEscape(name), RequestID: requestID(r)}, nil)
	})
	found := false
	for _, wk := range ws {
		switch err := errs[wk.ID]; {
		case err == nil:
			found = true
		case errcode.Is(err, errcode.NotFound):
		default:
			s.fail(w, r, err) // deleted where it answered: a repeat finishes it
			return
		}
	}
	if !found {
		s.fail(w, r, errcode.TemplateNotFound.New("template %q not found", name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
