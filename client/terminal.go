package client

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/wire"
)

// Terminal wire types, under names code outside this module can use.
type (
	Terminal              = apitype.Terminal
	CreateTerminalRequest = apitype.CreateTerminalRequest
	TerminalOutput        = apitype.TerminalOutput
	TerminalMessage       = apitype.TerminalMessage
)

// Terminal statuses and WebSocket message types.
const (
	TerminalRunning = apitype.TerminalRunning
	TerminalExited  = apitype.TerminalExited

	TerminalMsgResize    = apitype.TerminalMsgResize
	TerminalMsgTruncated = apitype.TerminalMsgTruncated
	TerminalMsgExit      = apitype.TerminalMsgExit
	TerminalMsgError     = apitype.TerminalMsgError
)

func termPath(sandboxID, tid string, rest ...string) string {
	return sbPath(sandboxID, append([]string{"terminals", url.PathEscape(tid)}, rest...)...)
}

// CreateTerminal starts a terminal: req.Command on a pseudo-terminal, or
// an interactive shell.
func (c *Client) CreateTerminal(ctx context.Context, sandboxID string, req apitype.CreateTerminalRequest) (apitype.Terminal, error) {
	var out apitype.Terminal
	err := c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "terminals"), nil, req, &out)
	return out, err
}

// Terminals lists a sandbox's terminals, running and exited, newest first.
func (c *Client) Terminals(ctx context.Context, sandboxID string) ([]apitype.Terminal, error) {
	var out apitype.TerminalList
	err := c.doJSON(ctx, http.MethodGet, sbPath(sandboxID, "terminals"), nil, nil, &out)
	return out.Terminals, err
}

// TerminalQuery selects what a terminal output read returns.
type TerminalQuery struct {
	Offset   int64 // absolute offset to read from
	WaitMS   int64 // long-poll until output past Offset arrives, or the terminal exits
	MaxBytes int64 // 0 means the server default (the whole replay buffer)
}

// TerminalOutput reads a window of a terminal's replay buffer, with its
// status. Decode the data with TerminalData.
func (c *Client) TerminalOutput(ctx context.Context, sandboxID, tid string, q TerminalQuery) (apitype.TerminalOutput, error) {
	v := url.Values{"offset": {strconv.FormatInt(q.Offset, 10)}}
	if q.WaitMS > 0 {
		v.Set("wait_ms", strconv.FormatInt(q.WaitMS, 10))
	}
	if q.MaxBytes > 0 {
		v.Set("max_bytes", strconv.FormatInt(q.MaxBytes, 10))
	}
	var out apitype.TerminalOutput
	err := c.doJSON(ctx, http.MethodGet, termPath(sandboxID, tid, "output"), v, nil, &out)
	return out, err
}

// TerminalData decodes the bytes of an output read.
func TerminalData(o apitype.TerminalOutput) ([]byte, error) {
	return base64.StdEncoding.DecodeString(o.DataBase64)
}

// TerminalInput types data into a terminal.
func (c *Client) TerminalInput(ctx context.Context, sandboxID, tid string, data []byte) error {
	req := apitype.TerminalInputRequest{DataBase64: base64.StdEncoding.EncodeToString(data)}
	return c.doJSON(ctx, http.MethodPost, termPath(sandboxID, tid, "input"), nil, req, nil)
}

// ResizeTerminal sets a terminal's size (1-1000 columns and rows).
func (c *Client) ResizeTerminal(ctx context.Context, sandboxID, tid string, cols, rows int) (apitype.Terminal, error) {
	var out apitype.Terminal
	err := c.doJSON(ctx, http.MethodPost, termPath(sandboxID, tid, "resize"), nil,
		apitype.ResizeTerminalRequest{Cols: cols, Rows: rows}, &out)
	return out, err
}

// DeleteTerminal hangs a terminal up (SIGHUP, then SIGKILL) and forgets it.
func (c *Client) DeleteTerminal(ctx context.Context, sandboxID, tid string) error {
	return c.doJSON(ctx, http.MethodDelete, termPath(sandboxID, tid), nil, nil, nil)
}

// AttachTerminal opens a WebSocket to a terminal. The server sends its
// output from offset on as binary messages, and JSON TerminalMessage text
// messages: "truncated" when offset had left the replay buffer, "exit"
// when the terminal ends (then it closes the connection). Send input as
// binary messages and {"type":"resize","cols":C,"rows":R} as text. The
// caller closes the connection.
func (c *Client) AttachTerminal(ctx context.Context, sandboxID, tid string, offset int64) (*websocket.Conn, error) {
	// Dial takes the daemon's http:// (https://) URL as ws:// (wss://).
	u := c.base + termPath(sandboxID, tid, "ws") + "?offset=" + strconv.FormatInt(offset, 10)
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, wire.ErrorFromResponse(resp)
		}
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}
