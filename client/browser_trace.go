package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/berthdev/berth/internal/apitype"
)

// BrowserTraceStart starts a trace of a session's browser (a session of
// mode process); traceStop ends it.
func (c *Client) BrowserTraceStart(ctx context.Context, id string) error {
	return c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "traceStart"}, nil)
}

// BrowserTraceStop ends a session's trace and returns the ZIP artifact it
// kept (read it with BrowserArtifact). A trace past its limits answers
// trace_discarded, and nothing is kept.
func (c *Client) BrowserTraceStop(ctx context.Context, id string) (apitype.BrowserTrace, error) {
	var out apitype.BrowserTrace
	err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "traceStop"}, &out)
	return out, err
}

// BrowserArtifacts lists a session's artifacts (downloads and traces) and
// its artifact budget.
func (c *Client) BrowserArtifacts(ctx context.Context, id string) (apitype.BrowserArtifactList, error) {
	var out apitype.BrowserArtifactList
	err := c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "downloadRead"}, &out)
	return out, err
}

// DeleteBrowserArtifact deletes one of a session's artifacts.
func (c *Client) DeleteBrowserArtifact(ctx context.Context, id, artifactID string) error {
	return c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "downloadDelete", ArtifactID: artifactID}, nil)
}

// BrowserArtifact copies an artifact's bytes to w, streamed, and returns
// how many it copied. It checks the bytes against the SHA-256 the daemon
// sends, so a cut transfer is an error.
func (c *Client) BrowserArtifact(ctx context.Context, id, artifactID string, w io.Writer) (int64, error) {
	resp, err := c.do(ctx, http.MethodGet, brsPath(id, "artifacts", url.PathEscape(artifactID)), nil, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), resp.Body)
	if err != nil {
		return n, err
	}
	if want := resp.Header.Get("X-Content-SHA256"); want != "" && want != hex.EncodeToString(h.Sum(nil)) {
		return n, fmt.Errorf("artifact %s: the %d bytes read do not match the daemon's SHA-256", artifactID, n)
	}
	return n, nil
}
