package apitype

import "time"

// Browser session modes and states.
const (
	BrowserModeContext = "context" // a browser context in a shared, warm browser
	BrowserModeProcess = "process" // a browser process of its own
	BrowserModeRemote  = "remote"  // attached to a CDP WebSocket URL elsewhere
	// BrowserModeIsolated is a browser of its own in a sandbox of its own
	// (container or gvisor), on the egress network only.
	BrowserModeIsolated = "isolated"

	BrowserOpen    = "open"
	BrowserCrashed = "crashed" // its browser or page died; Reason says how
	BrowserClosed  = "closed"
)

// Viewport is a page's size in CSS pixels.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// CreateBrowserSessionRequest is the body of POST /v1/browser/sessions.
type CreateBrowserSessionRequest struct {
	Mode      string    `json:"mode,omitempty"`
	CDPURL    string    `json:"cdp_url,omitempty"`  // remote: the browser's CDP WebSocket URL
	Provider  string    `json:"provider,omitempty"` // remote, instead of CDPURL: browserbase or steel, with the daemon's credentials
	Viewport  *Viewport `json:"viewport,omitempty"`
	UserAgent string    `json:"user_agent,omitempty"`
	Locale    string    `json:"locale,omitempty"`
	Timezone  string    `json:"timezone,omitempty"`
	// Profile names a persistent profile (cookies, storage) kept between
	// sessions; it needs mode process, and one session at a time uses it.
	Profile string `json:"profile,omitempty"`
	// IdleTimeoutMS closes the session after this long without an action
	// (default 10 minutes); MaxDurationMS closes it this long after it
	// opened (default 1 hour).
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	MaxDurationMS int64 `json:"max_duration_ms,omitempty"`
	// CaptureConsole keeps console messages' text in the diagnostics ring
	// (otherwise only their level is kept: pages log secrets).
	CaptureConsole bool `json:"capture_console,omitempty"`
}

// BrowserSession is a browser session as the API shows it.
type BrowserSession struct {
	ID         string    `json:"id"`
	Mode       string    `json:"mode"`
	Profile    string    `json:"profile,omitempty"`
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	URL        string    `json:"url"`
	Title      string    `json:"title"`
	Pages      int       `json:"pages"`
	Viewport   Viewport  `json:"viewport"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	// Provider and ProviderSessionID name a remote session's browser at
	// its provider (the ID until it is released).
	Provider          string `json:"provider,omitempty"`
	ProviderSessionID string `json:"provider_session_id,omitempty"`
	// SandboxID is the sandbox an isolated session's browser runs in (an
	// internal sandbox: an admin key reads its network log).
	SandboxID string `json:"sandbox_id,omitempty"`
}

// BrowserSessionList is the body of GET /v1/browser/sessions.
type BrowserSessionList struct {
	Sessions []BrowserSession `json:"sessions"`
}

// BrowserTarget selects one element: a CSS selector, or a semantic query
// (By: role, text, label, test_id or ref).
type BrowserTarget struct {
	Selector string   `json:"selector,omitempty"`
	By       string   `json:"by,omitempty"`
	Value    string   `json:"value,omitempty"`
	Role     string   `json:"role,omitempty"`
	Name     string   `json:"name,omitempty"`
	Exact    bool     `json:"exact,omitempty"`
	Nth      *int     `json:"nth,omitempty"`
	Frame    []string `json:"frame,omitempty"`
}

// BrowserAction is the body of POST /v1/browser/sessions/{id}/actions: an
// op and its fields. Each op reads the fields it needs; see docs/api.md.
type BrowserAction struct {
	Op         string         `json:"op"`
	URL        string         `json:"url,omitempty"`
	Expression string         `json:"expression,omitempty"`
	Value      string         `json:"value,omitempty"`
	Values     []string       `json:"values,omitempty"`
	Selector   string         `json:"selector,omitempty"` // shorthand for target.selector
	Target     *BrowserTarget `json:"target,omitempty"`
	// State is what waitFor waits for: attached, visible (default),
	// hidden or detached; LoadState: load or domcontentloaded.
	State     string `json:"state,omitempty"`
	LoadState string `json:"load_state,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
	// PerKey types key by key (keyDown/keyUp) instead of inserting text.
	PerKey bool `json:"per_key,omitempty"`
	// Screenshot: FullPage, Format (png or jpeg), Quality (jpeg).
	FullPage bool   `json:"full_page,omitempty"`
	Format   string `json:"format,omitempty"`
	Quality  int    `json:"quality,omitempty"`
	// Scroll: by DeltaX/DeltaY pixels, or the target into view.
	DeltaX float64 `json:"delta_x,omitempty"`
	DeltaY float64 `json:"delta_y,omitempty"`
	// Mouse ops: X, Y (and ToX, ToY for dragCoordinates).
	X   float64 `json:"x,omitempty"`
	Y   float64 `json:"y,omitempty"`
	ToX float64 `json:"to_x,omitempty"`
	ToY float64 `json:"to_y,omitempty"`
	// Pages: Action list (default), new, select or close; Index.
	Action string `json:"action,omitempty"`
	Index  *int   `json:"index,omitempty"`
	// Dialog policy: Accept the next dialog (or dismiss it), with
	// PromptText for a prompt.
	Accept     bool   `json:"accept,omitempty"`
	PromptText string `json:"prompt_text,omitempty"`
	// Snapshot and inspect bounds.
	MaxElements int `json:"max_elements,omitempty"`
	// Upload: files for a file input (at most 16, 4 MiB decoded in all).
	Files []BrowserFile `json:"files,omitempty"`
	// Drag: the element to drop on.
	To *BrowserTarget `json:"to,omitempty"`
	// Dialog policy: TTLMS is how long it waits for a dialog (default
	// 10000, at most 30000).
	TTLMS int64 `json:"ttl_ms,omitempty"`
	// Diagnostics: ConsoleText switches keeping console text on or off
	// (off purges the kept text); Clear empties the ring.
	ConsoleText *bool `json:"console_text,omitempty"`
	Clear       bool  `json:"clear,omitempty"`
	// Inspect: MaxTextLength bounds each text field (default 256, at most
	// 4096).
	MaxTextLength int `json:"max_text_length,omitempty"`
	// Accessibility: Depth bounds the tree (default and most 20); Boxes adds
	// each ref's box.
	Depth int  `json:"depth,omitempty"`
	Boxes bool `json:"boxes,omitempty"`
	// ArtifactID names a session artifact (downloadRead, downloadDelete).
	ArtifactID string `json:"artifact_id,omitempty"`
	// Lease is the token of the session's human-control lease: while a
	// lease is held, only actions that carry its token run (409
	// control_held otherwise). It is never journaled or echoed.
	Lease string `json:"lease,omitempty"`
}

// BrowserFile is a file an upload puts in a file input.
type BrowserFile struct {
	Name          string `json:"name"`
	ContentBase64 string `json:"content_base64"`
}

// BrowserDownload is a file a download op caught: kept by the session
// (removed when it closes) and returned inline.
type BrowserDownload struct {
	Filename string `json:"filename"`
	URL      string `json:"url"` // without credentials, query or fragment
	Size     int64  `json:"size"`
	Base64   string `json:"base64"`
	// ArtifactID is the session artifact the file is kept as (read and
	// delete it with downloadRead and downloadDelete).
	ArtifactID string `json:"artifact_id"`
}

// BrowserEvent is one entry of a session's diagnostics ring.
type BrowserEvent struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"` // console, request_failed, response, dialog, blocked
	Level  string    `json:"level,omitempty"`
	Text   string    `json:"text,omitempty"` // console text only when the session captures it
	URL    string    `json:"url,omitempty"`  // without credentials, query or fragment
	Status int64     `json:"status,omitempty"`
	Method string    `json:"method,omitempty"`
	// Action is what was done with a dialog: accepted or dismissed.
	Action string `json:"action,omitempty"`
}

// BrowserActionResult is the answer of an action.
type BrowserActionResult struct {
	Result any `json:"result"`
}

// Image is an image result, as a screenshot's.
type Image struct {
	MimeType string `json:"mime_type"`
	Base64   string `json:"base64"`
}

// BrowserPage is one page (tab) of a session.
type BrowserPage struct {
	Index   int    `json:"index"`
	URL     string `json:"url"`
	Title   string `json:"title"`
	Current bool   `json:"current"`
}

// BrowserSnapshot is the result of the snapshot op: the page as YAML
// lines, with refs (e12, f1e3 in frames) that targets take as
// {"by": "ref", "value": "e12"} until the next snapshot.
type BrowserSnapshot struct {
	URL       string `json:"url"`
	Title     string `json:"title"`
	YAML      string `json:"yaml"`
	Refs      int    `json:"refs"`
	Truncated bool   `json:"truncated"`
}
