package client

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/berthdev/berth/internal/apitype"
)

func svcPath(sandboxID, name string, rest ...string) string {
	return sbPath(sandboxID, append([]string{"services", url.PathEscape(name)}, rest...)...)
}

// PutService starts a supervised service in a sandbox, or replaces the one
// of the same name. Putting an identical spec again changes nothing. The
// intent is kept: the service starts again when the sandbox wakes.
func (c *Client) PutService(ctx context.Context, sandboxID string, spec apitype.ServiceSpec) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodPost, sbPath(sandboxID, "services"), nil, spec, &out)
	return out, err
}

// Services lists a sandbox's services.
func (c *Client) Services(ctx context.Context, sandboxID string) ([]apitype.Service, error) {
	var out apitype.ServiceList
	err := c.doJSON(ctx, http.MethodGet, sbPath(sandboxID, "services"), nil, nil, &out)
	return out.Services, err
}

// Service returns one service's spec and state.
func (c *Client) Service(ctx context.Context, sandboxID, name string) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodGet, svcPath(sandboxID, name), nil, nil, &out)
	return out, err
}

// StopService stops a service; it stays stopped, also across wakes, until
// StartService.
func (c *Client) StopService(ctx context.Context, sandboxID, name string) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodPost, svcPath(sandboxID, name, "stop"), nil, nil, &out)
	return out, err
}

// StartService starts a stopped, exited or failed service again.
func (c *Client) StartService(ctx context.Context, sandboxID, name string) (apitype.Service, error) {
	var out apitype.Service
	err := c.doJSON(ctx, http.MethodPost, svcPath(sandboxID, name, "start"), nil, nil, &out)
	return out, err
}

// DeleteService stops a service and forgets it.
func (c *Client) DeleteService(ctx context.Context, sandboxID, name string) error {
	return c.doJSON(ctx, http.MethodDelete, svcPath(sandboxID, name), nil, nil, nil)
}

// LogQuery selects a window of a service's log.
type LogQuery struct {
	Offset   int64
	MaxBytes int64
	WaitMS   int64 // long-poll for bytes past Offset
}

// ServiceLogs reads a service's log from q.Offset; pass NextOffset back to
// follow it.
func (c *Client) ServiceLogs(ctx context.Context, sandboxID, name string, q LogQuery) (apitype.ServiceLogs, error) {
	v := url.Values{}
	v.Set("offset", strconv.FormatInt(q.Offset, 10))
	if q.MaxBytes > 0 {
		v.Set("max_bytes", strconv.FormatInt(q.MaxBytes, 10))
	}
	if q.WaitMS > 0 {
		v.Set("wait_ms", strconv.FormatInt(q.WaitMS, 10))
	}
	var out apitype.ServiceLogs
	err := c.doJSON(ctx, http.MethodGet, svcPath(sandboxID, name, "logs"), v, nil, &out)
	return out, err
}

// LogData returns the bytes of a log window, whichever encoding it came in.
func LogData(l apitype.ServiceLogs) ([]byte, error) {
	if l.DataBase64 != "" {
		return base64.StdEncoding.DecodeString(l.DataBase64)
	}
	return []byte(l.Data), nil
}

// Preview says how to reach port of a sandbox from a browser: the
// host-based URL, the sandbox's preview token, and a signed link that sets
// the preview cookie (valid for ttl; 0 means 15 minutes).
func (c *Client) Preview(ctx context.Context, sandboxID string, port int, ttl time.Duration) (apitype.Preview, error) {
	var q url.Values
	if ttl > 0 {
		q = url.Values{"ttl_s": {strconv.FormatInt(int64(ttl.Seconds()), 10)}}
	}
	var out apitype.Preview
	err := c.doJSON(ctx, http.MethodGet, sbPath(sandboxID, "previews", strconv.Itoa(port)), q, nil, &out)
	return out, err
}
