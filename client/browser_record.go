package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
)

func recPath(id string, rest ...string) string {
	p := "/v1/browser/recordings/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// StartRecording starts recording a browser session: a viewport PNG now
// and then every req.IntervalMS (0: the daemon's default, 5 s).
func (c *Client) StartRecording(ctx context.Context, sessionID string, req apitype.StartRecordingRequest) (apitype.BrowserRecording, error) {
	var out apitype.BrowserRecording
	err := c.doJSON(ctx, http.MethodPost, brsPath(sessionID, "recordings"), nil, req, &out)
	return out, err
}

// Recordings lists the recordings of the key's tenant.
func (c *Client) Recordings(ctx context.Context) ([]apitype.BrowserRecording, error) {
	var out apitype.BrowserRecordingList
	err := c.doJSON(ctx, http.MethodGet, "/v1/browser/recordings", nil, nil, &out)
	return out.Recordings, err
}

// Recording returns a recording's metadata (frames described, not
// included).
func (c *Client) Recording(ctx context.Context, id string) (apitype.BrowserRecording, error) {
	var out apitype.BrowserRecording
	err := c.doJSON(ctx, http.MethodGet, recPath(id), nil, nil, &out)
	return out, err
}

// StopRecording stops a recording, keeping its frames.
func (c *Client) StopRecording(ctx context.Context, id string) (apitype.BrowserRecording, error) {
	var out apitype.BrowserRecording
	err := c.doJSON(ctx, http.MethodPost, recPath(id, "stop"), nil, nil, &out)
	return out, err
}

// DeleteRecording deletes a recording and its frames.
func (c *Client) DeleteRecording(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, recPath(id), nil, nil, nil)
}

// RecordingFrame returns frame n of a recording as PNG bytes.
func (c *Client) RecordingFrame(ctx context.Context, id string, n int) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, recPath(id, "frames", strconv.Itoa(n)), nil, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// ExportRecording writes a recording's export to w: format "zip" (the
// frames and index.json) or "mp4" (needs ffmpeg on the daemon's host).
func (c *Client) ExportRecording(ctx context.Context, id, format string, w io.Writer) error {
	q := url.Values{}
	if format != "" {
		q.Set("format", format)
	}
	resp, err := c.do(ctx, http.MethodGet, recPath(id, "export"), q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}
