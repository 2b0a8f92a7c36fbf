package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// NotFound is the answer for a resource of kind that HQ does not know (or
// that belongs to another tenant, which answers the same).
func NotFound(kind, id string) error {
	switch kind {
	case KindSandbox:
		return errcode.SandboxNotFound.New("sandbox %q not found", id)
	case KindBrowser:
		return errcode.SessionNotFound.New("browser session %q not found", id)
	case KindCheckpoint:
		return errcode.CheckpointNotFound.New("checkpoint %q not found", id)
	case KindRecording:
		return errcode.RecordingNotFound.New("recording %q not found", id)
	}
	return errcode.New(errcode.NotFound, "%s %q not found", kind, id)
}

// Record keeps p's owner.
func (h *HQ) Record(ctx context.Context, p *Placement) error {
	if err := h.cfg.Store.PutPlacement(ctx, p); err != nil {
		return err
	}
	h.keep(p)
	return nil
}

// Forget drops a resource's owner: it was deleted (or lost and deleted).
func (h *HQ) Forget(ctx context.Context, kind, id string) error {
	h.mu.Lock()
	delete(h.placements, kind+"/"+id)
	h.mu.Unlock()
	return h.cfg.Store.DeletePlacement(ctx, kind, id)
}

// ForgetLost drops the owner of a resource deleted while its worker was
// lost, and keeps it for FinishLostDeletes.
func (h *HQ) ForgetLost(ctx context.Context, kind, id string) error {
	p, err := h.placement(ctx, kind, id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.placements, kind+"/"+id)
	h.mu.Unlock()
	return h.cfg.Store.ForgetLost(ctx, p)
}

// resourcePaths are where a worker deletes a resource of each kind.
var resourcePaths = map[string]string{
	KindSandbox:    "/v1/sandboxes/",
	KindBrowser:    "/v1/browser/sessions/",
	KindCheckpoint: "/v1/browser/checkpoints/",
	KindRecording:  "/v1/browser/recordings/",
}

// FinishLostDeletes deletes, on each worker that answers again, what was
// deleted through HQ while it was lost (ForgetLost). A worker that still
// does not answer keeps its list for the next call.
func (h *HQ) FinishLostDeletes(ctx context.Context) error {
	lost, err := h.cfg.Store.LostDeletes(ctx)
	if err != nil || len(lost) == 0 {
		return err
	}
	all, err := h.Statuses(ctx)
	if err != nil {
		return err
	}
	hq := Caller{Principal: auth.Principal{KeyID: "hq", Name: "HQ", Scope: auth.ScopeAdmin}}
	var errs []error
	for _, p := range lost {
		i := slices.IndexFunc(all, func(ws WorkerStatus) bool { return ws.ID == p.Worker })
		if i >= 0 && !all[i].Reachable() {
			continue
		}
		if i >= 0 {
			call := Call{Method: http.MethodDelete, URI: resourcePaths[p.Kind] + url.PathEscape(p.ID)}
			if err := h.Call(ctx, all[i].WorkerConfig, hq, call, nil); err != nil && !errcode.Is(err, errcode.NotFound) {
				errs = append(errs, fmt.Errorf("deleting %s %s on worker %s: %w", kindName(p.Kind), p.ID, p.Worker, err))
				continue
			}
			h.cfg.Logger.Info("deleted on its returned worker what was deleted while it was lost", "kind", p.Kind, "id", p.ID, "worker", p.Worker)
		}
		// Deleted there, or its worker is no longer configured.
		if err := h.cfg.Store.DoneLostDelete(ctx, p.Kind, p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetDraining sets worker id's draining flag.
func (h *HQ) SetDraining(ctx context.Context, id string, draining bool) error {
	if _, ok := h.byID[id]; !ok {
		return errcode.WorkerNotFound.New("no worker %q is configured on this HQ (serve --worker)", id)
	}
	defer h.forgetLeases()
	return h.cfg.Store.SetDraining(ctx, id, draining)
}

// Census returns every worker's status and what HQ has placed on each.
func (h *HQ) Census(ctx context.Context) ([]WorkerStatus, map[string]Load, error) {
	all, err := h.Statuses(ctx)
	if err != nil {
		return nil, nil, err
	}
	placed, err := h.Placed(ctx)
	return all, placed, err
}

// Placed counts the sandboxes and browser sessions recorded on each worker.
func (h *HQ) Placed(ctx context.Context) (map[string]Load, error) {
	sbs, err := h.cfg.Store.CountPlacements(ctx, KindSandbox)
	if err != nil {
		return nil, err
	}
	brs, err := h.cfg.Store.CountPlacements(ctx, KindBrowser)
	if err != nil {
		return nil, err
	}
	out := map[string]Load{}
	for id, n := range sbs {
		l := out[id]
		l.Sandboxes = n
		out[id] = l
	}
	for id, n := range brs {
		l := out[id]
		l.BrowserSessions = n
		out[id] = l
	}
	return out, nil
}

// Get reads uri (path and query) from worker w as c into out (JSON), with
// a bounded answer.
func (h *HQ) Get(ctx context.Context, w WorkerConfig, c Caller, uri, requestID string, out any) error {
	return h.Call(ctx, w, c, Call{Method: http.MethodGet, URI: uri, RequestID: requestID}, out)
}

// Call is a request HQ makes to a worker on its own account (not a
// client's request passed on).
type Call struct {
	Method, URI string // URI: path and query
	RequestID   string
	// ContentType and Body, when set, are the request's body.
	ContentType string
	Body        io.Reader
}

// Call sends call to worker w as c and reads its JSON answer into out
// (when not nil), at most 64 MiB. A GET has 30 s; a call with a body as
// long as ctx. An error answer is the worker's error; a call that never
// reached the worker is owner_unavailable, one whose answer never came
// owner_outcome_unknown.
func (h *HQ) Call(ctx context.Context, w WorkerConfig, c Caller, call Call, out any) error {
	if call.Body == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	resp, err := h.send(ctx, w, c, call)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	body := io.LimitReader(resp.Body, 64<<20)
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("reading worker %s's answer: %w", w.ID, err)
	}
	return nil
}

// Open sends call to worker w as c and returns its answer's body, for as
// long as ctx lasts: the caller reads and closes it.
func (h *HQ) Open(ctx context.Context, w WorkerConfig, c Caller, call Call) (io.ReadCloser, error) {
	resp, err := h.send(ctx, w, c, call)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// send sends call and returns a successful answer; an error answer is
// the worker's error.
func (h *HQ) send(ctx context.Context, w WorkerConfig, c Caller, call Call) (*http.Response, error) {
	u := *w.URL
	ref, err := url.Parse(call.URI)
	if err != nil {
		return nil, err
	}
	u.Path, u.RawQuery = ref.Path, ref.RawQuery
	req, err := http.NewRequestWithContext(ctx, call.Method, u.String(), call.Body)
	if err != nil {
		return nil, err
	}
	if call.ContentType != "" {
		req.Header.Set("Content-Type", call.ContentType)
	}
	req.Header.Set(AssertionHeader, Assert(h.creds[w.ID], w.ID, c, call.Method, req.URL.RequestURI(), h.now()))
	if call.RequestID != "" {
		req.Header.Set("X-Request-Id", call.RequestID)
	}
	resp, err := (&http.Client{Transport: h.transport, CheckRedirect: noRedirects}).Do(req)
	if err != nil {
		return nil, h.forwardError(req, w, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, wire.ErrorFromResponse(resp)
	}
	return resp, nil
}

// SandboxWorker returns the worker that owns sandbox id, for tenant (its
// ID; admin: any tenant's), if it answers, and, when action is set, if it
// is live and would run a job of action (name@version) now: a job that
// writes into the sandbox's workspace runs there. Another tenant's sandbox
// is one that does not exist.
func (h *HQ) SandboxWorker(ctx context.Context, tenant string, admin bool, id, action string) (WorkerStatus, error) {
	p, ws, err := h.Owner(ctx, KindSandbox, id)
	if p != nil && !admin && p.Tenant != tenant {
		err = NotFound(KindSandbox, id)
	}
	switch {
	case err != nil || action == "":
		return ws, err
	case ws.Status == StatusDraining:
		return ws, errcode.WorkerDraining.New("sandbox %s is on worker %s, which is draining: a job writing into its workspace would run there", id, ws.ID)
	case !slices.Contains(ws.Lease.Capabilities.Actions, action):
		return ws, errcode.NoWorkerAvailable.New("sandbox %s is on worker %s, which cannot run %s now; a job writing into its workspace runs there", id, ws.ID, action)
	}
	return ws, nil
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Usage counts what tenant holds across the cluster, from the placements.
func (h *HQ) Usage(ctx context.Context, tenant string) (Load, error) {
	n, err := h.cfg.Store.TenantPlacements(ctx, tenant)
	return Load{Sandboxes: n[KindSandbox], BrowserSessions: n[KindBrowser]}, err
}
