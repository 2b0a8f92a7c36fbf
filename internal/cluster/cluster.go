// Package cluster splits Berth over machines: a Headquarters (serve --role
// hq) that serves the public API and owns nothing that runs, and workers
// (serve --role worker) that own sandboxes and browser sessions. They share
// a Postgres database, which holds each worker's lease (renewed by its
// heartbeat, with its capabilities and load) and each resource's owner.
//
// HQ places a new resource on a live worker with the capability and room,
// records the owner when the worker answers, and routes every later request
// (streams and WebSockets too) to that owner, signing each with a short-lived
// assertion made from the worker's own credential (cred.go). Nothing is ever
// moved: an owner that is gone is reported as such (owner_unavailable, then
// lost), never replaced. docs/operations.md is the operator's side.
package cluster

import (
	"context"
	"time"
)

// Kinds of resources a placement records.
const (
	KindSandbox    = "sandbox"
	KindBrowser    = "browser_session"
	KindCheckpoint = "browser_checkpoint"
	KindRecording  = "browser_recording"
)

// Capabilities are what a worker advertises in its lease.
type Capabilities struct {
	// Runtimes are the sandbox runtimes available there, the default first.
	Runtimes []string `json:"runtimes"`
	// Browser reports whether browser sessions can open there.
	Browser bool `json:"browser"`
	// Tenant is the name of the one tenant the worker serves ("" for any).
	Tenant string `json:"tenant,omitempty"`
	// MaxSandboxes and MaxBrowserSessions are its capacity.
	MaxSandboxes       int    `json:"max_sandboxes"`
	MaxBrowserSessions int    `json:"max_browser_sessions"`
	Version            string `json:"version,omitempty"`
	// Actions are the sandbox job actions it would run now, as
	// name@version.
	Actions []string `json:"actions,omitempty"`
	// Templates are the ready templates sandboxes can start from there
	// (base aside), as TemplateKey makes them.
	Templates []string `json:"templates,omitempty"`
}

// TemplateKey names template name of tenant (its ID; "" for a shared
// template) in a worker's capabilities.
func TemplateKey(tenant, name string) string {
	if tenant == "" {
		return name
	}
	return tenant + "/" + name
}

// Load is what a worker runs now.
type Load struct {
	Sandboxes       int `json:"sandboxes"`
	BrowserSessions int `json:"browser_sessions"`
}

// Lease is a worker's row: written by its heartbeat, except Draining, which
// only an operator sets through HQ.
type Lease struct {
	ID           string
	Incarnation  string // new at each start of the worker's process
	StartedAt    time.Time
	HeartbeatAt  time.Time
	ExpiresAt    time.Time
	Capabilities Capabilities
	Load         Load
	Draining     bool
}

// Placement records which worker owns a resource.
type Placement struct {
	Kind      string
	ID        string
	Worker    string
	Tenant    string
	CreatedAt time.Time
}

// Store is what the cluster keeps in the shared database.
type Store interface {
	// RenewLease writes l's lease, capabilities and load, keeping the
	// draining flag an operator set.
	RenewLease(ctx context.Context, l *Lease) error
	// ReleaseLease ends the lease of worker id at once (a clean stop),
	// if incarnation still holds it.
	ReleaseLease(ctx context.Context, id, incarnation string) error
	ListLeases(ctx context.Context) ([]*Lease, error)
	// SetDraining sets worker id's draining flag; a worker that never
	// heartbeat gets a row with an expired lease.
	SetDraining(ctx context.Context, id string, draining bool) error

	PutPlacement(ctx context.Context, p *Placement) error
	// GetPlacement answers errcode's not-found reason for kind when
	// nothing holds id.
	GetPlacement(ctx context.Context, kind, id string) (*Placement, error)
	DeletePlacement(ctx context.Context, kind, id string) error
	// CountPlacements counts kind's placements per worker.
	CountPlacements(ctx context.Context, kind string) (map[string]int, error)
	// TenantPlacements counts a tenant's placements per kind.
	TenantPlacements(ctx context.Context, tenant string) (map[string]int, error)

	// ForgetLost deletes p's placement and keeps p to delete on its worker
	// when it answers again; LostDeletes lists those, and DoneLostDelete
	// drops one the worker deleted.
	ForgetLost(ctx context.Context, p *Placement) error
	LostDeletes(ctx context.Context) ([]*Placement, error)
	DoneLostDelete(ctx context.Context, kind, id string) error
}
