package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

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
	u := *w.URL
	ref, err := url.Parse(call.URI)
	if err != nil {
		return err
	}
	u.Path, u.RawQuery = ref.Path, ref.RawQuery
	req, err := http.NewRequestWithContext(ctx, call.Method, u.String(), call.Body)
	if err != nil {
		return err
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
		return h.forwardError(req, w, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return wire.ErrorFromResponse(resp)
	}
	if out == nil {
		return nil
	}
	body := io.LimitReader(resp.Body, 64<<20)
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("reading worker %s's answer: %w", w.ID, err)
	}
	return nil
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Usage counts what tenant holds across the cluster, from the placements.
func (h *HQ) Usage(ctx context.Context, tenant string) (Load, error) {
	n, err := h.cfg.Store.TenantPlacements(ctx, tenant)
	return Load{Sandboxes: n[KindSandbox], BrowserSessions: n[KindBrowser]}, err
}
