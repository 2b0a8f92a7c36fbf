package apitype

import "time"

// Human control of a browser session.
const (
	ControlAutomation = "automation" // no lease: actions run
	ControlHuman      = "human"      // a lease is held: only its token acts
)

// BrowserControlRequest is the body of POST .../control (acquire: TTLMS),
// .../control/renew (Token, TTLMS) and .../control/release (Token).
type BrowserControlRequest struct {
	// TTLMS is how long the lease lasts: 1000-120000 ms (default 30000).
	TTLMS int64  `json:"ttl_ms,omitempty"`
	Token string `json:"token,omitempty"`
}

// BrowserControlLease answers an acquire or a renew: the token is shown
// to the one who acquired the lease, and nowhere else.
type BrowserControlLease struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// BrowserControl is GET .../control: who drives the session. It never
// carries the token.
type BrowserControl struct {
	Mode      string     `json:"mode"` // automation or human
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// BrowserLiveLink is a view link: a page that streams the session, at a
// URL that is its own short-lived capability.
type BrowserLiveLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Live-view WebSocket message types.
const (
	LiveMsgFrame = "frame" // server: a JPEG frame of the page
	LiveMsgInput = "input" // client: an input event, with a lease token
	LiveMsgAck   = "ack"   // server: an input with an id was dispatched
	LiveMsgError = "error" // server: an input was refused (reason, message)
)

// LiveMessage is one message of the live-view WebSocket, either way (a
// text frame of JSON).
type LiveMessage struct {
	Type string `json:"type"`
	// Frame: the JPEG, base64; Timestamp is when Chromium drew it (Unix
	// milliseconds); Seq counts the frames this connection was sent.
	Data      string        `json:"data,omitempty"`
	Timestamp float64       `json:"timestamp,omitempty"`
	Seq       int64         `json:"seq,omitempty"`
	Viewport  *LiveViewport `json:"viewport,omitempty"`
	// Input: the lease token and the event; ID, if given, is echoed by
	// the ack or error that answers it.
	ID    int64       `json:"id,omitempty"`
	Lease string      `json:"lease,omitempty"`
	Event *LiveEvent  `json:"event,omitempty"`
	Error *LiveRefuse `json:"error,omitempty"`
}

// LiveViewport is the page geometry a frame was drawn at: the viewport in
// CSS pixels, the frame's pixels per CSS pixel, the scroll offsets.
type LiveViewport struct {
	Width             float64 `json:"width"`
	Height            float64 `json:"height"`
	DeviceScaleFactor float64 `json:"device_scale_factor"`
	ScrollX           float64 `json:"scroll_x"`
	ScrollY           float64 `json:"scroll_y"`
}

// LiveEvent is an input event of a live viewer holding control.
type LiveEvent struct {
	// Kind: mouse, wheel, key or text.
	Kind string `json:"kind"`
	// Mouse: Action is move, down, up or click; Button left (default),
	// middle or right. Wheel: DeltaX, DeltaY at X, Y. Coordinates are CSS
	// pixels of the viewport.
	Action    string  `json:"action,omitempty"`
	X         float64 `json:"x,omitempty"`
	Y         float64 `json:"y,omitempty"`
	Button    string  `json:"button,omitempty"`
	DeltaX    float64 `json:"delta_x,omitempty"`
	DeltaY    float64 `json:"delta_y,omitempty"`
	Modifiers int64   `json:"modifiers,omitempty"` // Alt=1, Ctrl=2, Meta=4, Shift=8
	// Key: a key or chord as the press action takes it (Enter, a,
	// Control+A). Text: text inserted where the focus is.
	Key  string `json:"key,omitempty"`
	Text string `json:"text,omitempty"`
}

// LiveRefuse is why an input was refused.
type LiveRefuse struct {
	Code    string `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}
