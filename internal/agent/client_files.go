package agent

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// WriteFile writes data to path in the workspace, atomically, with mode
// (0 for the default).
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode), 8))
	}
	resp, err := c.Do(ctx, http.MethodPut, "/v1/files/content", q, bytes.NewReader(data))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}
