package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/wire"
)

// Client talks to one agent over its unix socket. It is safe for
// concurrent use.
type Client struct {
	socket string
	token  string
	hc     *http.Client
	call   wire.Caller // the JSON API over hc
}

// NewClient returns a client for the agent listening on socket.
func NewClient(socket, token string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialUnix(ctx, socket)
		},
		MaxIdleConns:        32,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	hc := &http.Client{Transport: tr}
	return &Client{socket: socket, token: token, hc: hc, call: wire.Caller{HTTP: hc, Base: "http://agent", Token: token,
		Unreachable: func(err error) error { return errcode.Wrap(errcode.Unavailable, err, "sandbox agent is not answering") }}}
}

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends a request to the agent and returns the response if its status
// is below 400, or the decoded error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	ct := ""
	if body != nil {
		ct = "application/json" // as the agent has always been sent; file bodies ignore it
	}
	return c.call.Do(ctx, method, path, q, body, ct)
}

func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, in, out any) error {
	return c.call.DoJSON(ctx, method, path, q, in, out)
}

// Ping checks that the agent answers and returns its PID.
func (c *Client) Ping(ctx context.Context) (int, error) {
	var out struct {
		PID int `json:"pid"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/v1/ping", nil, nil, &out)
	return out.PID, err
}

// Shutdown asks the agent to end every command and exit.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/shutdown", nil, nil, nil)
}

// Start starts a command.
// With q's wait_ms it answers when the command ends (or the wait passes),
// with output selected by q.
func (c *Client) Start(ctx context.Context, req StartRequest, q url.Values) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodPost, "/v1/commands", q, req, &out)
	return out, err
}

// Command reads a command record; q carries wait_ms, offsets, max_bytes.
func (c *Client) Command(ctx context.Context, id string, q url.Values) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodGet, "/v1/commands/"+url.PathEscape(id), q, nil, &out)
	return out, err
}

// Commands lists the agent's commands, newest first, without output.
func (c *Client) Commands(ctx context.Context) ([]apitype.Command, error) {
	var out apitype.CommandList
	err := c.doJSON(ctx, http.MethodGet, "/v1/commands", nil, nil, &out)
	return out.Commands, err
}

// Forget drops a finished command's record and output.
func (c *Client) Forget(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/commands/"+url.PathEscape(id), nil, nil, nil)
}

// Cancel kills a command's process group and returns its record.
func (c *Client) Cancel(ctx context.Context, id string) (apitype.Command, error) {
	var out apitype.Command
	err := c.doJSON(ctx, http.MethodPost, "/v1/commands/"+url.PathEscape(id)+"/cancel", nil, nil, &out)
	return out, err
}

// PutService starts a service, or replaces one whose spec changed or that
// has ended. created is false when the agent already ran an identical spec
// and left it alone.
func (c *Client) PutService(ctx context.Context, spec apitype.ServiceSpec) (_ apitype.Service, created bool, _ error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return apitype.Service{}, false, err
	}
	resp, err := c.do(ctx, http.MethodPut, "/v1/services/"+url.PathEscape(spec.Name), nil, bytes.NewReader(b))
	if err != nil {
		return apitype.Service{}, false, err
	}
	defer resp.Body.Close()
	var out apitype.Service
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return apitype.Service{}, false, fmt.Errorf("decoding agent response: %w", err)
	}
	return out, resp.StatusCode == http.StatusCreated, nil
}

// Services lists the agent's services, by name.
func (c *Client) Services(ctx context.Context) ([]apitype.Service, error) {
	var out apitype.ServiceList
	err := c.doJSON(ctx, http.MethodGet, "/v1/services", nil, nil, &out)
	return out.Services, err
}

// Service reads one service.
func (c *Client) Service(ctx context.Context, name string) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodGet, "/v1/services/"+url.PathEscape(name), nil, nil, &out)
	return out, err
}

// StopService stops a service (SIGTERM, then SIGKILL after the agent's
// grace period) and returns it once its processes are gone.
func (c *Client) StopService(ctx context.Context, name string) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/stop", nil, nil, &out)
	return out, err
}

// StartService starts a stopped, exited or failed service again, its
// restarts reset; an active one is left alone.
func (c *Client) StartService(ctx context.Context, name string) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/start", nil, nil, &out)
	return out, err
}

// DeleteService stops a service and forgets it, log included.
func (c *Client) DeleteService(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/services/"+url.PathEscape(name), nil, nil, nil)
}

// ServiceLogs reads a window of a service's log; q carries offset,
// max_bytes and wait_ms.
func (c *Client) ServiceLogs(ctx context.Context, name string, q url.Values) (apitype.ServiceLogs, error) {
	var out apitype.ServiceLogs
	err := c.doJSON(ctx, http.MethodGet, "/v1/services/"+url.PathEscape(name)+"/logs", q, nil, &out)
	return out, err
}
