package apitype

import "time"

// BrowserJournalEntry is one action in a browser session's journal.
type BrowserJournalEntry struct {
	Seq     int64  `json:"seq"`
	Op      string `json:"op"`
	Summary string `json:"summary,omitempty"` // target, URL and argument shapes; never typed text or secrets
	// Outcome is ok, error, running (the action running now) or unknown
	// (started and never finished: the daemon stopped under it; never
	// replayed).
	Outcome    string     `json:"outcome"`
	Reason     string     `json:"reason,omitempty"` // for error: the reason and message
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// BrowserJournal is the body of GET /v1/browser/sessions/{id}/journal.
// NextAfterSeq, when set, is the after_seq of the next page.
type BrowserJournal struct {
	SessionID    string                `json:"session_id"`
	Entries      []BrowserJournalEntry `json:"entries"`
	NextAfterSeq int64                 `json:"next_after_seq,omitempty"`
}

// BrowserCheckpoint is a recorded browser session: what a resume opens
// again.
type BrowserCheckpoint struct {
	ID      string                      `json:"id"`
	Mode    string                      `json:"mode"`
	Options CreateBrowserSessionRequest `json:"options"`
	// Selected is the index in URLs of the page that was selected.
	Selected int `json:"selected"`
	// URLs are the pages' URLs: scheme, host and path only, or
	// about:blank.
	URLs      []string  `json:"urls"`
	CreatedAt time.Time `json:"created_at"`
}

// BrowserCheckpointList is the body of GET /v1/browser/checkpoints.
type BrowserCheckpointList struct {
	Checkpoints []BrowserCheckpoint `json:"checkpoints"`
}
