package apitype

import (
	"strings"
	"time"
)

// Terminal statuses.
const (
	TerminalRunning = "running"
	TerminalExited  = "exited"
)

// Terminal size bounds, for creates, resizes and WebSocket resize messages.
const (
	MinTerminalSize = 1
	MaxTerminalSize = 1000
)

// CreateTerminalRequest is the body of POST /v1/sandboxes/{id}/terminals.
// Without Command the terminal runs an interactive shell.
type CreateTerminalRequest struct {
	Cols    int               `json:"cols"`
	Rows    int               `json:"rows"`
	Command string            `json:"command,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Valid reports the request's invalid fields.
func (r *CreateTerminalRequest) Valid() map[string]string {
	problems := map[string]string{}
	sizeProblems(problems, r.Cols, r.Rows)
	if strings.ContainsRune(r.Command, 0) {
		problems["command"] = "must not contain NUL"
	}
	if len(problems) == 0 {
		return nil
	}
	return problems
}

// ResizeTerminalRequest is the body of POST .../terminals/{tid}/resize.
type ResizeTerminalRequest struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Valid reports the request's invalid fields.
func (r *ResizeTerminalRequest) Valid() map[string]string {
	problems := map[string]string{}
	sizeProblems(problems, r.Cols, r.Rows)
	if len(problems) == 0 {
		return nil
	}
	return problems
}

func sizeProblems(problems map[string]string, cols, rows int) {
	for _, f := range []struct {
		name string
		v    int
	}{{"cols", cols}, {"rows", rows}} {
		if f.v < MinTerminalSize || f.v > MaxTerminalSize {
			problems[f.name] = "must be between 1 and 1000"
		}
	}
}

// TerminalInputRequest is the body of POST .../terminals/{tid}/input.
type TerminalInputRequest struct {
	Data string `json:"data,omitempty"`
	// DataBase64 carries bytes that are not text; it is written after Data.
	DataBase64 string `json:"data_base64,omitempty"`
}

// Terminal is a terminal: a process on a pseudo-terminal inside a sandbox.
//
// Output is one byte stream (the PTY merges stdout and stderr) with
// absolute offsets: OutputBytes is the offset just past the last byte
// written so far.
type Terminal struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Command     string     `json:"command,omitempty"`
	Cwd         string     `json:"cwd,omitempty"`
	Cols        int        `json:"cols"`
	Rows        int        `json:"rows"`
	PID         int        `json:"pid,omitempty"`
	ExitCode    *int       `json:"exit_code,omitempty"`
	Signal      string     `json:"signal,omitempty"`
	OutputBytes int64      `json:"output_bytes"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// TerminalList is the body of GET /v1/sandboxes/{id}/terminals.
type TerminalList struct {
	Terminals []Terminal `json:"terminals"`
}

// TerminalOutput is the body of GET .../terminals/{tid}/output: the bytes
// from Offset up to NextOffset, base64-encoded (terminal output is bytes,
// not always whole UTF-8 runes). Truncated is true when the requested
// offset had already left the replay buffer: Offset is then where the
// retained output starts.
type TerminalOutput struct {
	DataBase64 string `json:"data_base64"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Truncated  bool   `json:"truncated"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
}

// Terminal WebSocket control message types (text frames).
const (
	TerminalMsgResize    = "resize"    // client to server: Cols, Rows
	TerminalMsgTruncated = "truncated" // server to client: output resumes at Offset
	TerminalMsgExit      = "exit"      // server to client: the terminal ended
	TerminalMsgError     = "error"     // server to client: a frame could not be applied
)

// TerminalMessage is a JSON control message on a terminal's WebSocket,
// sent as a text frame. Output and input travel as binary frames.
type TerminalMessage struct {
	Type     string `json:"type"`
	Cols     int    `json:"cols,omitempty"`
	Rows     int    `json:"rows,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Status   string `json:"status,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Message  string `json:"message,omitempty"`
}
