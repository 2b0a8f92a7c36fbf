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
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := *w.URL
	ref, err := url.Parse(uri)
	if err != nil {
		return err
	}
	u.Path, u.RawQuery = ref.Path, ref.RawQuery
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(AssertionHeader, Assert(h.creds[w.ID], w.ID, c, http.MethodGet, req.URL.RequestURI(), h.now()))
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := (&http.Client{Transport: h.transport, CheckRedirect: noRedirects}).Do(req)
	if err != nil {
		return h.forwardError(req, w, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return wire.ErrorFromResponse(resp)
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
