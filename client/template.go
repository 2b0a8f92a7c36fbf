package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/berthdev/berth/internal/apitype"
)

// Templates lists the templates, the built-in base first.
func (c *Client) Templates(ctx context.Context) ([]apitype.Template, error) {
	var out apitype.TemplateList
	err := c.doJSON(ctx, http.MethodGet, "/v1/templates", nil, nil, &out)
	return out.Templates, err
}

// Template returns one template; a build in progress shows state building.
func (c *Client) Template(ctx context.Context, name string) (apitype.Template, error) {
	var out apitype.Template
	err := c.doJSON(ctx, http.MethodGet, "/v1/templates/"+url.PathEscape(name), nil, nil, &out)
	return out, err
}

// TemplateLog returns a built template's build log.
func (c *Client) TemplateLog(ctx context.Context, name string) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/templates/"+url.PathEscape(name)+"/log", nil, nil, "")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return string(b), err
}

// BuildTemplate starts a template build (admin key); poll Template until
// its state is ready or failed.
func (c *Client) BuildTemplate(ctx context.Context, req apitype.BuildTemplateRequest) (apitype.Template, error) {
	var out apitype.Template
	err := c.doJSON(ctx, http.MethodPost, "/v1/templates", nil, req, &out)
	return out, err
}

// ImportTemplate makes a template from an image archive: an OCI image
// layout tar or a docker save tarball (admin key). ref picks an image
// when the archive has several.
func (c *Client) ImportTemplate(ctx context.Context, name, ref string, archive io.Reader) (apitype.Template, error) {
	q := url.Values{"name": {name}}
	if ref != "" {
		q.Set("ref", ref)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/templates/import", q, archive, "application/x-tar")
	if err != nil {
		return apitype.Template{}, err
	}
	defer resp.Body.Close()
	var out apitype.Template
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("decoding response: %w", err)
	}
	return out, nil
}

// DeleteTemplate removes a template no sandbox uses (admin key).
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/templates/"+url.PathEscape(name), nil, nil, nil)
}
