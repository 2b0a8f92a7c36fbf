package agent

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
)

// WriteFile writes what r holds to path in the workspace, atomically,
// with mode (0 for the default).
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode), 8))
	}
	resp, err := c.do(ctx, http.MethodPut, "/v1/files/content", q, r)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// ReadFile opens the file at path in the workspace; the caller closes it.
func (c *Client) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/files/content", url.Values{"path": {path}}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// RemoveAll removes path in the workspace and everything under it. A path
// that does not exist is a NotFound error.
func (c *Client) RemoveAll(ctx context.Context, path string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/files", url.Values{"path": {path}, "recursive": {"true"}}, nil, nil)
}

// CreateTerminal starts a terminal in the sandbox.
func (c *Client) CreateTerminal(ctx context.Context, req apitype.CreateTerminalRequest) (apitype.Terminal, error) {
	var t apitype.Terminal
	err := c.doJSON(ctx, http.MethodPost, "/v1/terminals", nil, req, &t)
	return t, err
}
