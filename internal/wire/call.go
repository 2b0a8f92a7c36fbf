package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Caller sends requests to one JSON API in Berth's shape: the daemon's
// (package client) or a sandbox agent's (agent.Client). Errors come back
// decoded (ErrorFromResponse), with their code, reason and request ID.
type Caller struct {
	HTTP  *http.Client
	Base  string // the server's URL, without a trailing slash
	Token string // sent as a Bearer token when set
	// Unreachable, when set, is the error a caller sees when the server
	// could not be reached at all (the context's own error wins).
	Unreachable func(error) error
	// Header holds more headers every request carries.
	Header http.Header
}

type headerKey struct{}

// WithHeader returns ctx carrying header name: value for the requests a
// Caller sends under it (an Idempotency-Key for one create, say).
func WithHeader(ctx context.Context, name, value string) context.Context {
	h := http.Header{}
	if prev, ok := ctx.Value(headerKey{}).(http.Header); ok {
		h = prev.Clone()
	}
	h.Set(name, value)
	return context.WithValue(ctx, headerKey{}, h)
}

// Do sends a request and returns the response if its status is below 400,
// or the decoded error. The caller closes the response's body.
func (c *Caller) Do(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.Base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	if h, ok := ctx.Value(headerKey{}).(http.Header); ok {
		for k, vs := range h {
			req.Header[k] = vs
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if c.Unreachable != nil {
			return nil, c.Unreachable(err)
		}
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, ErrorFromResponse(resp)
	}
	return resp, nil
}

// DoJSON sends in (when not nil) as JSON and decodes the answer into out
// (when not nil; otherwise the body is read and dropped).
func (c *Caller) DoJSON(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.Do(ctx, method, path, q, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the response of %s %s: %w", method, path, err)
	}
	return nil
}
