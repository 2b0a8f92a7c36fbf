package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berthdev/berth/internal/apitype"
)

// ListWorkers lists a cluster's workers as its Headquarters sees them (admin
// key). A single daemon (berth serve alone) answers role "single" and no
// workers.
func (c *Client) ListWorkers(ctx context.Context) (apitype.WorkerList, error) {
	var out apitype.WorkerList
	err := c.doJSON(ctx, http.MethodGet, "/v1/workers", nil, nil, &out)
	return out, err
}

// GetWorker returns one worker of a cluster (admin key); an unknown ID, or
// any ID on a single daemon, fails with reason worker_not_found.
func (c *Client) GetWorker(ctx context.Context, id string) (apitype.Worker, error) {
	var out apitype.Worker
	err := c.doJSON(ctx, http.MethodGet, "/v1/workers/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// DrainWorker stops new placements and browser actions and new commands on
// a worker; what is there can still be inspected, cancelled, stopped and
// deleted (admin key).
func (c *Client) DrainWorker(ctx context.Context, id string) (apitype.Worker, error) {
	var out apitype.Worker
	err := c.doJSON(ctx, http.MethodPost, "/v1/workers/"+url.PathEscape(id)+"/drain", nil, nil, &out)
	return out, err
}

// UndrainWorker lets a drained worker take new work again (admin key).
func (c *Client) UndrainWorker(ctx context.Context, id string) (apitype.Worker, error) {
	var out apitype.Worker
	err := c.doJSON(ctx, http.MethodPost, "/v1/workers/"+url.PathEscape(id)+"/undrain", nil, nil, &out)
	return out, err
}
