// Package client is the Go SDK for Berth's HTTP API. The berth CLI is
// built on it.
//
//	c := client.New("http://127.0.0.1:7070", os.Getenv("BERTH_TOKEN"))
//	sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"})
//	cmd, err := c.Exec(ctx, sb.ID, apitype.CreateCommandRequest{Command: "echo hi"})
//	cmd, err = c.Command(ctx, sb.ID, cmd.ID, client.CommandQuery{WaitMS: 30000})
//
// Errors returned for API failures are *errcode.Error values carrying the
// server's code, reason and message.
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Client calls one Berth daemon. It is safe for concurrent use.
type Client struct {
	base   string
	token  string
	hc     *http.Client
	header http.Header
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient uses hc for requests.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUser names the end user every request acts for (the Berth-User
// header): jobs count capacity per user with it.
func WithUser(user string) Option {
	return func(c *Client) {
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header.Set("Berth-User", user)
	}
}

// WithIdempotencyKey returns ctx under which a create (sandbox, browser
// session, template, key, job, tenant) carries Idempotency-Key key: a
// retry with the same key returns the first answer and makes nothing new.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return wire.WithHeader(ctx, "Idempotency-Key", key)
}

// New returns a client for the daemon at baseURL, authenticating with
// token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 16, Proxy: http.ProxyFromEnvironment},
	}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the daemon's URL.
func (c *Client) BaseURL() string { return c.base }

// do sends a request and returns the response for statuses below 400; the
// caller closes its body. Errors are decoded into *errcode.Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	return c.caller().Do(ctx, method, path, q, body, contentType)
}

func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, in, out any) error {
	return c.caller().DoJSON(ctx, method, path, q, in, out)
}

func (c *Client) caller() *wire.Caller {
	return &wire.Caller{HTTP: c.hc, Base: c.base, Token: c.token, Header: c.header}
}

func sbPath(id string, rest ...string) string {
	p := "/v1/sandboxes/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Health calls /healthz.
func (c *Client) Health(ctx context.Context) error {
	return c.doJSON(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// System describes the daemon: version, runtimes, limits.
func (c *Client) System(ctx context.Context) (apitype.System, error) {
	var out apitype.System
	err := c.doJSON(ctx, http.MethodGet, "/v1/system", nil, nil, &out)
	return out, err
}

// CreateSandbox creates a sandbox (or returns the one with req.Name).
func (c *Client) CreateSandbox(ctx context.Context, req apitype.CreateSandboxRequest) (apitype.Sandbox, error) {
	var out apitype.Sandbox
	err := c.doJSON(ctx, http.MethodPost, "/v1/sandboxes", nil, req, &out)
	return out, err
}

// ListSandboxes lists the sandboxes the key sees (its tenant's; an admin
// key's: all).
func (c *Client) ListSandboxes(ctx context.Context) ([]apitype.Sandbox, error) {
	var out apitype.SandboxList
	err := c.doJSON(ctx, http.MethodGet, "/v1/sandboxes", nil, nil, &out)
	return out.Sandboxes, err
}

// ListSandboxesPage lists at most limit sandboxes after cursor ("" for the
// first page); the answer's NextCursor fetches the next.
func (c *Client) ListSandboxesPage(ctx context.Context, limit int, cursor string) (apitype.SandboxList, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out apitype.SandboxList
	err := c.doJSON(ctx, http.MethodGet, "/v1/sandboxes", q, nil, &out)
	return out, err
}

// GetSandbox returns one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (apitype.Sandbox, error) {
	var out apitype.Sandbox
	err := c.doJSON(ctx, http.MethodGet, sbPath(id), nil, nil, &out)
	return out, err
}

// DeleteSandbox deletes a sandbox and everything in it.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, sbPath(id), nil, nil, nil)
}

// PauseSandbox freezes a sandbox: memory kept, no CPU. Any later call to
// it resumes it.
func (c *Client) PauseSandbox(ctx context.Context, id string) (apitype.Sandbox, error) {
	var out apitype.Sandbox
	err := c.doJSON(ctx, http.MethodPost, sbPath(id, "pause"), nil, nil, &out)
	return out, err
}

// ResumeSandbox thaws a paused sandbox.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (apitype.Sandbox, error) {
	var out apitype.Sandbox
	err := c.doJSON(ctx, http.MethodPost, sbPath(id, "resume"), nil, nil, &out)
	return out, err
}

// HibernateSandbox stops a sandbox's processes and keeps its files; any
// later call to it wakes it.
func (c *Client) HibernateSandbox(ctx context.Context, id string) (apitype.Sandbox, error) {
	var out apitype.Sandbox
	err := c.doJSON(ctx, http.MethodPost, sbPath(id, "hibernate"), nil, nil, &out)
	return out, err
}

// Exec starts a command and returns its record (status running, or failed
// when it could not start).
func (c *Client) Exec(ctx context.Context, sandboxID string, req apitype.CreateCommandRequest) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "commands"), nil, req, &out)
	return out, err
}

// ExecWait starts a command and waits up to q.WaitMS for it to end, in one
// round trip: the record it returns carries the output q selects, and is
// final when Done reports true.
func (c *Client) ExecWait(ctx context.Context, sandboxID string, req apitype.CreateCommandRequest, q CommandQuery) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "commands"), q.values(), req, &out)
	return out, err
}

// CommandQuery selects what a command read returns.
type CommandQuery struct {
	WaitMS       int64 // long-poll until the command ends or this passes
	StdoutOffset int64
	StderrOffset int64
	MaxBytes     int64 // per stream; 0 means the server default
	Base64       bool  // output as base64 instead of text
}

func (q CommandQuery) values() url.Values {
	v := url.Values{}
	if q.WaitMS > 0 {
		v.Set("wait_ms", strconv.FormatInt(q.WaitMS, 10))
	}
	if q.StdoutOffset > 0 {
		v.Set("stdout_offset", strconv.FormatInt(q.StdoutOffset, 10))
	}
	if q.StderrOffset > 0 {
		v.Set("stderr_offset", strconv.FormatInt(q.StderrOffset, 10))
	}
	if q.MaxBytes > 0 {
		v.Set("max_bytes", strconv.FormatInt(q.MaxBytes, 10))
	}
	if q.Base64 {
		v.Set("encoding", "base64")
	}
	return v
}

// Command reads a command record with a window of its output.
func (c *Client) Command(ctx context.Context, sandboxID, id string, q CommandQuery) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodGet, sbPath(sandboxID, "commands", url.PathEscape(id)), q.values(), nil, &out)
	return out, err
}

// Commands lists a sandbox's retained commands, newest first.
func (c *Client) Commands(ctx context.Context, sandboxID string) ([]apitype.Command, error) {
	var out apitype.CommandList
	err := c.doJSON(ctx, http.MethodGet, sbPath(sandboxID, "commands"), nil, nil, &out)
	return out.Commands, err
}

// Cancel cancels a running command and returns its record.
func (c *Client) Cancel(ctx context.Context, sandboxID, id string) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "commands", url.PathEscape(id), "cancel"), nil, nil, &out)
	return out, err
}

// Stdin writes to a command's standard input; eof closes it.
func (c *Client) Stdin(ctx context.Context, sandboxID, id string, req apitype.StdinRequest) error {
	return c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "commands", url.PathEscape(id), "stdin"), nil, req, nil)
}

// Event is one event of a command stream.
type Event struct {
	Name string // stdout, stderr or exit
	apitype.StreamEvent
}

// Stream follows a command's output from the given offsets, calling fn for
// each event, until the exit event (returned as the final record), ctx
// ends, or fn fails.
func (c *Client) Stream(ctx context.Context, sandboxID, id string, stdoutOffset, stderrOffset int64, fn func(Event) error) (*apitype.Command, error) {
	q := CommandQuery{StdoutOffset: stdoutOffset, StderrOffset: stderrOffset}.values()
	resp, err := c.do(ctx, http.MethodGet, sbPath(sandboxID, "commands", url.PathEscape(id), "stream"), q, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev = Event{Name: strings.TrimPrefix(line, "event: ")}
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.StreamEvent); err != nil {
				return nil, fmt.Errorf("decoding stream event: %w", err)
			}
		case line == "" && ev.Name != "":
			if err := fn(ev); err != nil {
				return nil, err
			}
			if ev.Name == "exit" {
				return ev.Command, nil
			}
			ev = Event{}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, errcode.New(errcode.Unavailable, "command stream ended before the command exited")
}

// ListFiles lists a directory of a sandbox's workspace, one page at a time.
func (c *Client) ListFiles(ctx context.Context, sandboxID, dir, cursor string, limit int) (apitype.FileList, error) {
	q := url.Values{"path": {dir}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out apitype.FileList
	err := c.doJSON(ctx, http.MethodGet, sbPath(sandboxID, "files"), q, nil, &out)
	return out, err
}

// ReadFile streams a file of a sandbox's workspace; the caller closes it.
func (c *Client) ReadFile(ctx context.Context, sandboxID, path string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, sbPath(sandboxID, "files", "content"), url.Values{"path": {path}}, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// WriteFile stores r at path in a sandbox's workspace, creating parent
// directories. mode is octal permission bits such as 0o644 (0: default).
func (c *Client) WriteFile(ctx context.Context, sandboxID, path string, r io.Reader, mode uint32) (apitype.FileInfo, error) {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode), 8))
	}
	resp, err := c.do(ctx, http.MethodPut, sbPath(sandboxID, "files", "content"), q, r, "application/octet-stream")
	if err != nil {
		return apitype.FileInfo{}, err
	}
	defer resp.Body.Close()
	var out apitype.FileInfo
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("decoding response: %w", err)
	}
	return out, nil
}

// Mkdir creates a directory and its parents.
func (c *Client) Mkdir(ctx context.Context, sandboxID, path string) error {
	return c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "files", "mkdir"), nil, apitype.MkdirRequest{Path: path}, nil)
}

// Move renames a file or directory.
func (c *Client) Move(ctx context.Context, sandboxID string, req apitype.MoveRequest) error {
	return c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "files", "move"), nil, req, nil)
}

// Remove deletes a file, or a directory tree when recursive.
func (c *Client) Remove(ctx context.Context, sandboxID, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.doJSON(ctx, http.MethodDelete, sbPath(sandboxID, "files"), q, nil, nil)
}

// CreateKey issues an API key; its Secret is shown only here.
func (c *Client) CreateKey(ctx context.Context, req apitype.CreateKeyRequest) (apitype.Key, error) {
	var out apitype.Key
	err := c.doJSON(ctx, http.MethodPost, "/v1/keys", nil, req, &out)
	return out, err
}

// ListKeys lists API keys (never their secrets).
func (c *Client) ListKeys(ctx context.Context) ([]apitype.Key, error) {
	var out apitype.KeyList
	err := c.doJSON(ctx, http.MethodGet, "/v1/keys", nil, nil, &out)
	return out.Keys, err
}

// RevokeKey revokes an API key.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, nil, nil)
}

// Run starts a command and waits for it to finish, returning its record
// with up to the first max_bytes of each stream.
func (c *Client) Run(ctx context.Context, sandboxID string, req apitype.CreateCommandRequest) (apitype.Command, error) {
	cmd, err := c.ExecWait(ctx, sandboxID, req, CommandQuery{WaitMS: 60000})
	for err == nil && !cmd.Done() {
		cmd, err = c.Command(ctx, sandboxID, cmd.ID, CommandQuery{WaitMS: 60000})
	}
	return cmd, err
}

// IsCode reports whether err is an API error with code.
func IsCode(err error, code errcode.Code) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == code
}

// IsReason reports whether err is an API error with reason.
func IsReason(err error, reason string) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Reason == reason
}
