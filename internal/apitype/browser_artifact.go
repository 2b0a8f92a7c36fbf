package apitype

import "time"

// Kinds of browser session artifacts.
const (
	ArtifactDownload = "download" // a file a download op caught
	ArtifactTrace    = "trace"    // a ZIP traceStop made
)

// BrowserArtifact is a file a browser session keeps until it closes: a
// download or a trace. Downloads and traces share the session's artifact
// budget (a count and bytes).
type BrowserArtifact struct {
	ID        string    `json:"id"` // art_...
	Kind      string    `json:"kind"`
	Filename  string    `json:"filename"`
	MimeType  string    `json:"mime_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

// BrowserArtifactList is the answer of downloadRead without an
// artifact_id: the session's artifacts, oldest first, and its budget.
type BrowserArtifactList struct {
	Artifacts []BrowserArtifact `json:"artifacts"`
	Files     int               `json:"files"`
	Bytes     int64             `json:"bytes"`
	MaxFiles  int               `json:"max_files"`
	MaxBytes  int64             `json:"max_bytes"`
}

// BrowserArtifactContent is the answer of downloadRead with an
// artifact_id: the artifact and its bytes, base64.
type BrowserArtifactContent struct {
	BrowserArtifact
	Base64 string `json:"base64"`
}

// BrowserTrace is the answer of traceStop: the trace's artifact.
type BrowserTrace struct {
	BrowserArtifact
	// Actions and Screenshots count what the ZIP holds besides the CDP
	// trace.
	Actions     int `json:"actions"`
	Screenshots int `json:"screenshots"`
}
