package apitype

import "time"

// Worker is a worker of a cluster, as its Headquarters sees it (GET
// /v1/workers): what HQ's configuration pins (ID, URL, tenant) and what its
// lease says.
type Worker struct {
	ID string `json:"id"`
	// URL is where HQ reaches it (HQ's configuration, never the worker's
	// word).
	URL string `json:"url"`
	// Tenant is the name of the one tenant it serves; "" for every tenant.
	Tenant string `json:"tenant,omitempty"`
	// Status is live, draining, offline (its lease ran out), lost (ran
	// out long ago), unknown (never heartbeat) or mismatch (it serves
	// another tenant than HQ pins).
	Status string `json:"status"`
	// Reason says why it takes no new work, when it does not.
	Reason   string `json:"reason,omitempty"`
	Draining bool   `json:"draining"`
	// Incarnation changes at each start of the worker's process.
	Incarnation    string           `json:"incarnation,omitempty"`
	StartedAt      *time.Time       `json:"started_at,omitempty"`
	HeartbeatAt    *time.Time       `json:"heartbeat_at,omitempty"`
	LeaseExpiresAt *time.Time       `json:"lease_expires_at,omitempty"`
	Capabilities   WorkerCapability `json:"capabilities"`
	Load           WorkerLoad       `json:"load"`
	// Placed counts the resources HQ has recorded on it.
	Placed WorkerLoad `json:"placed"`
}

// WorkerCapability is what a worker advertises.
type WorkerCapability struct {
	Runtimes           []string `json:"runtimes"`
	Browser            bool     `json:"browser"`
	MaxSandboxes       int      `json:"max_sandboxes"`
	MaxBrowserSessions int      `json:"max_browser_sessions"`
	Version            string   `json:"version,omitempty"`
	// Actions are the sandbox job actions it would run now, as
	// name@version.
	Actions []string `json:"actions,omitempty"`
	// Templates are its ready templates: a shared one by name, a tenant's
	// as TENANT_ID/name.
	Templates []string `json:"templates,omitempty"`
}

// WorkerLoad counts what runs on a worker.
type WorkerLoad struct {
	Sandboxes       int `json:"sandboxes"`
	BrowserSessions int `json:"browser_sessions"`
}

// WorkerList is GET /v1/workers's answer. Role is this daemon's: "hq", or
// "single" for berth serve alone (which has no workers).
type WorkerList struct {
	Role    string   `json:"role"`
	Workers []Worker `json:"workers"`
}
