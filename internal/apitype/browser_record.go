package apitype

import "time"

// States of a browser recording.
const (
	RecordingActive  = "recording"
	RecordingStopped = "stopped"
)

// Why a recording stopped.
const (
	RecordingStoppedByUser       = "user"
	RecordingStoppedSessionEnded = "session_closed"
	RecordingStoppedFrameLimit   = "frame_limit"
	RecordingStoppedByteLimit    = "byte_limit"
	RecordingStoppedDaemon       = "daemon_restart"
	RecordingStoppedFailed       = "capture_failed"
)

// StartRecordingRequest starts a recording of a browser session.
type StartRecordingRequest struct {
	// IntervalMS is the time between captures (0: the daemon's default,
	// 5000; else 100-60000).
	IntervalMS int64 `json:"interval_ms,omitempty"`
}

// BrowserRecording is a recording's metadata: never its PNGs, which are
// read one at a time from its frames route.
type BrowserRecording struct {
	ID         string     `json:"id"`
	SessionID  string     `json:"session_id"`
	State      string     `json:"state"`
	StoppedBy  string     `json:"stopped_by,omitempty"`
	IntervalMS int64      `json:"interval_ms"`
	CreatedAt  time.Time  `json:"created_at"`
	StoppedAt  *time.Time `json:"stopped_at,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	// Skipped counts captures skipped because an action held the session;
	// Failed those the browser did not answer.
	Skipped int              `json:"skipped"`
	Failed  int              `json:"failed"`
	Bytes   int64            `json:"bytes"`
	Frames  []RecordingFrame `json:"frames"`
}

// RecordingFrame describes one captured frame (a viewport PNG).
type RecordingFrame struct {
	Index  int       `json:"index"`
	At     time.Time `json:"at"`
	Bytes  int64     `json:"bytes"`
	Width  int       `json:"width"`
	Height int       `json:"height"`
}

// BrowserRecordingList is the answer of a recordings list.
type BrowserRecordingList struct {
	Recordings []BrowserRecording `json:"recordings"`
}

// Valid checks the request's bounds.
func (r *StartRecordingRequest) Valid() map[string]string {
	if r.IntervalMS != 0 && (r.IntervalMS < 100 || r.IntervalMS > 60000) {
		return map[string]string{"interval_ms": "must be 0 (the daemon's default) or between 100 and 60000"}
	}
	return nil
}
