// Package apitype holds the JSON wire types of Berth's HTTP API. They are
// shared by the server (internal/httpapi), the in-sandbox agent protocol and
// the public Go client, and never contain domain structs.
//
// Conventions: snake_case names, RFC 3339 UTC times, opaque prefixed IDs.
package apitype

import "time"

// ErrorBody is the one shape of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes an error. Code is coarse and stable; Reason, when
// set, is the specific cause a client can branch on.
type ErrorDetail struct {
	Code      string            `json:"code"`
	Reason    string            `json:"reason,omitempty"`
	Message   string            `json:"message"`
	RequestID string            `json:"request_id,omitempty"`
	Problems  map[string]string `json:"problems,omitempty"`
}

// Sandbox states.
const (
	StatePending    = "pending"
	StateStarting   = "starting"
	StateRunning    = "running"
	StatePaused     = "paused"     // frozen: memory kept, no CPU; any call resumes it
	StateHibernated = "hibernated" // stopped, files kept; any call wakes it
	StateStopping   = "stopping"
	StateTerminated = "terminated"
	StateFailed     = "failed"
)

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	Runtime   string            `json:"runtime,omitempty"`
	Name      string            `json:"name,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Resources *Resources        `json:"resources,omitempty"`
	// Lazy returns at once with a pending sandbox that has no compute; the
	// first command or file call provisions it.
	Lazy bool `json:"lazy,omitempty"`
	// Idle overrides the daemon's idle policy for this sandbox.
	Idle *Idle `json:"idle,omitempty"`
	// Template names the template the sandbox starts from (default base).
	Template string `json:"template,omitempty"`
	// Network is the sandbox's network policy; absent is mode none
	// (loopback only).
	Network *Network `json:"network,omitempty"`
}

// Idle is a sandbox's idle policy: after how long without use (no API call
// touching it, no command running) it is paused (isolated runtimes),
// hibernated and deleted. 0 disables a step.
type Idle struct {
	PauseAfterMS     int64 `json:"pause_after_ms"`
	HibernateAfterMS int64 `json:"hibernate_after_ms"`
	DeleteAfterMS    int64 `json:"delete_after_ms"`
}

// Resources bound an isolated sandbox (container, gvisor). Zero fields take
// the daemon's defaults; see GET /v1/system for defaults and maxima.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	DiskMB   int64   `json:"disk_mb,omitempty"`
	ShmMB    int64   `json:"shm_mb,omitempty"` // size of /dev/shm (counts against memory)
}

// Sandbox is a sandbox as the API shows it. Environment values are not
// echoed back: they often hold credentials.
type Sandbox struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	Runtime   string            `json:"runtime"`
	State     string            `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	EnvKeys   []string          `json:"env_keys,omitempty"`
	Resources *Resources        `json:"resources,omitempty"`
	Template  string            `json:"template"`
	Idle      Idle              `json:"idle"`
	Workspace string            `json:"workspace"`
	Network   Network           `json:"network"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
	// NextCursor, when set, fetches the next page (?cursor=).
	NextCursor string `json:"next_cursor,omitempty"`
}

// Command statuses.
const (
	CommandRunning     = "running"
	CommandExited      = "exited"
	CommandFailed      = "failed"
	CommandCanceled    = "canceled"
	CommandTimedOut    = "timed_out"
	CommandInterrupted = "interrupted"
)

// CreateCommandRequest is the body of POST /v1/sandboxes/{id}/commands.
// Exactly one of Command (run by /bin/sh -c) and Argv must be set.
type CreateCommandRequest struct {
	Command   string            `json:"command,omitempty"`
	Argv      []string          `json:"argv,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
	// Stdin is written to the command's standard input. Unless StdinOpen
	// is set, standard input is closed after it.
	Stdin     string `json:"stdin,omitempty"`
	StdinOpen bool   `json:"stdin_open,omitempty"`
}

// Command is a command record with a window of its output.
//
// Offsets are byte offsets into the command's whole output stream. Stdout
// holds the bytes from StdoutOffset up to NextStdoutOffset; pass the latter
// back to continue. Output past the retention cap is dropped and marked by
// StdoutTruncated; StdoutBytes counts everything the command wrote.
type Command struct {
	ID         string     `json:"id"`
	SandboxID  string     `json:"sandbox_id,omitempty"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason,omitempty"`
	Command    string     `json:"command,omitempty"`
	Argv       []string   `json:"argv,omitempty"`
	Cwd        string     `json:"cwd,omitempty"`
	TimeoutMS  int64      `json:"timeout_ms"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	PID        int        `json:"pid,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`

	Stdout           string `json:"stdout"`
	Stderr           string `json:"stderr"`
	Encoding         string `json:"encoding,omitempty"`
	StdoutOffset     int64  `json:"stdout_offset"`
	StderrOffset     int64  `json:"stderr_offset"`
	NextStdoutOffset int64  `json:"next_stdout_offset"`
	NextStderrOffset int64  `json:"next_stderr_offset"`
	StdoutBytes      int64  `json:"stdout_bytes"`
	StderrBytes      int64  `json:"stderr_bytes"`
	StdoutTruncated  bool   `json:"stdout_truncated"`
	StderrTruncated  bool   `json:"stderr_truncated"`
}

// Done reports whether the command has finished, whatever the outcome.
func (c *Command) Done() bool { return c.Status != "" && c.Status != CommandRunning }

// CommandList is the body of GET /v1/sandboxes/{id}/commands.
type CommandList struct {
	Commands []Command `json:"commands"`
}

// StdinRequest is the body of POST .../commands/{cid}/stdin.
type StdinRequest struct {
	Data string `json:"data,omitempty"`
	// DataBase64 carries binary input; it is written after Data.
	DataBase64 string `json:"data_base64,omitempty"`
	// EOF closes standard input after the data is written.
	EOF bool `json:"eof,omitempty"`
}

// StreamEvent is the data of one Server-Sent Event on a command stream.
// Event names are "stdout", "stderr" and "exit"; output events carry Data
// (or DataBase64 for bytes that are not UTF-8) and the Offset at which it
// starts; the exit event carries the final Command record without output.
type StreamEvent struct {
	Offset     int64    `json:"offset"`
	Data       string   `json:"data,omitempty"`
	DataBase64 string   `json:"data_base64,omitempty"`
	Command    *Command `json:"command,omitempty"`
}

// FileInfo describes one entry of a directory listing.
type FileInfo struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, dir, symlink, other
	Size       int64     `json:"size"`
	Mode       string    `json:"mode"`
	ModifiedAt time.Time `json:"modified_at"`
}

// FileList is the body of GET /v1/sandboxes/{id}/files. Entries are sorted
// by name; NextCursor, when set, fetches the next page.
type FileList struct {
	Path       string     `json:"path"`
	Entries    []FileInfo `json:"entries"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// MkdirRequest is the body of POST /v1/sandboxes/{id}/files/mkdir.
type MkdirRequest struct {
	Path string `json:"path"`
}

// MoveRequest is the body of POST /v1/sandboxes/{id}/files/move.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// Key is an API key's metadata; the secret appears only once, on create.
type Key struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Tenant is the ID of the key's tenant; absent for admin keys.
	Tenant    string     `json:"tenant,omitempty"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Secret    string     `json:"secret,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	Name  string `json:"name"`
	Scope string `json:"scope,omitempty"` // execution (the default), read or admin
	// Tenant (ID or name) owns the key; required unless scope is admin.
	Tenant string `json:"tenant,omitempty"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// System is the body of GET /v1/system.
type System struct {
	Version  string        `json:"version"`
	DataDir  string        `json:"data_dir,omitempty"`
	Runtimes []RuntimeInfo `json:"runtimes"`
	Limits   Limits        `json:"limits"`
	Counts   Counts        `json:"counts"`
	Pools    []Pool        `json:"pools"`
	Browser  BrowserInfo   `json:"browser"`
	Jobs     JobsInfo      `json:"jobs"`
}

// JobsInfo is the state of the job service: its warm runtime pools and
// the job sandboxes that exist (in pools and running jobs).
type JobsInfo struct {
	Runtime   string        `json:"runtime"`
	Pools     []JobPoolInfo `json:"pools"`
	Sandboxes int           `json:"sandboxes"`
	Active    int           `json:"active"` // jobs starting or running
}

// JobPoolInfo is one profile's pool of fresh runtimes.
type JobPoolInfo struct {
	Profile string `json:"profile"`
	Size    int    `json:"size"`
	Ready   int    `json:"ready"`
}

// BrowserInfo says whether browser sessions can be opened here.
type BrowserInfo struct {
	Available   bool   `json:"available"`
	Chromium    string `json:"chromium,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Sessions    int    `json:"sessions"`
	MaxSessions int    `json:"max_sessions"`
	// Isolated sessions (Chromium in a sandbox of its own): whether they
	// can open here (else why not), and the warm pool's ready browsers
	// of its size.
	IsolatedAvailable bool   `json:"isolated_available"`
	IsolatedReason    string `json:"isolated_reason,omitempty"`
	IsolatedReady     int    `json:"isolated_ready"`
	IsolatedWarm      int    `json:"isolated_warm"`
	// Providers are the remote providers configured on the daemon.
	Providers []string `json:"providers,omitempty"`
}

// Pool is a warm pool: Size sandboxes of Template kept started on Runtime,
// Ready of them now. A create with that template (and the default runtime
// and resources) claims one.
//
// A pool short of its size because its starts fail says why (Reason and
// Message: the last failure, Failures: how many in a row); it retries with
// a backoff of up to a minute, and at once when a template becomes ready.
type Pool struct {
	Template string `json:"template"`
	Runtime  string `json:"runtime"`
	Size     int    `json:"size"`
	Ready    int    `json:"ready"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Failures int    `json:"failures,omitempty"`
}

// RuntimeInfo says whether a sandbox runtime can be used here, and why not.
type RuntimeInfo struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Default   bool   `json:"default,omitempty"`
	Isolated  bool   `json:"isolated"`
	Reason    string `json:"reason,omitempty"`
	Fix       string `json:"fix,omitempty"`
}

// Limits are the daemon's configured bounds.
type Limits struct {
	MaxSandboxes        int   `json:"max_sandboxes"`
	MaxCommands         int   `json:"max_concurrent_commands"`
	MaxHistory          int   `json:"max_command_history"`
	OutputCapBytes      int64 `json:"output_cap_bytes"`
	MaxUploadBytes      int64 `json:"max_upload_bytes"`
	DefaultTimeoutMS    int64 `json:"default_timeout_ms"`
	MaxTimeoutMS        int64 `json:"max_timeout_ms"`
	MaxJSONBodyBytes    int64 `json:"max_json_body_bytes"`
	MaxDownloadBytes    int64 `json:"max_download_bytes"`
	MaxListPageEntries  int   `json:"max_list_page_entries"`
	ListPageEntriesDflt int   `json:"default_list_page_entries"`
	// Resources of isolated sandboxes: what a create gets for fields it
	// leaves zero, and the most it may ask for.
	DefaultResources Resources `json:"default_resources"`
	MaxResources     Resources `json:"max_resources"`
}

// Counts are live resource counts.
type Counts struct {
	// Sandboxes counts callers' sandboxes; Pooled the unclaimed ones
	// waiting in warm pools.
	Sandboxes int `json:"sandboxes"`
	Pooled    int `json:"pooled"`
}

// Network is a sandbox's network policy. Mode none (the default) is
// loopback only; egress reaches public destinations through Berth on the
// policy's ports (80 and 443 unless the daemon says otherwise). Entries are
// domains (example.com, *.example.com), IPs or CIDRs, each with an optional
// :port. Deny always wins; a non-empty allow_only allowlist refuses
// everything not in it (or in allow); allow adds destinations, usually with
// a port beyond the policy's (github.com:22). See docs/network.md.
type Network struct {
	Mode      string   `json:"mode"`
	Allow     []string `json:"allow,omitempty"`
	Deny      []string `json:"deny,omitempty"`
	AllowOnly []string `json:"allow_only,omitempty"`
	Ports     []int    `json:"ports,omitempty"`
}

// Secret binds a header to a host: Berth sets it on every HTTPS request
// the sandbox sends to the host, on the way out; the value never enters
// the sandbox. Value is write-only: lists show it empty.
type Secret struct {
	Host   string `json:"host"`
	Header string `json:"header"`
	Value  string `json:"value,omitempty"`
}

// SecretList is the body of PUT and GET /v1/sandboxes/{id}/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// NetworkLogEntry is one connection (or DNS refusal) in a sandbox's
// network log.
type NetworkLogEntry struct {
	Time      time.Time `json:"time"`
	Domain    string    `json:"domain,omitempty"` // from SNI, Host or Berth's DNS answers
	IP        string    `json:"ip,omitempty"`     // the address dialed, or that would have been
	Port      int       `json:"port,omitempty"`
	Proto     string    `json:"proto,omitempty"` // tls, http, dns or "" (other)
	Decision  string    `json:"decision"`        // allow or deny
	Reason    string    `json:"reason,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	BytesUp   int64     `json:"bytes_up"`         // sandbox to destination
	BytesDown int64     `json:"bytes_down"`       // destination to sandbox
	Secret    bool      `json:"secret,omitempty"` // a bound secret's header was set
	Open      bool      `json:"open,omitempty"`   // still open
}

// NetworkLog is the body of GET /v1/sandboxes/{id}/network/log, newest
// first.
type NetworkLog struct {
	Entries []NetworkLogEntry `json:"entries"`
}
