package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
)

// GetNetwork returns a sandbox's network policy.
func (c *Client) GetNetwork(ctx context.Context, id string) (apitype.Network, error) {
	var out apitype.Network
	err := c.doJSON(ctx, http.MethodGet, sbPath(id, "network"), nil, nil, &out)
	return out, err
}

// SetNetwork replaces a sandbox's network policy. A running sandbox's new
// connections obey at once; its open connections the policy now refuses
// are closed.
func (c *Client) SetNetwork(ctx context.Context, id string, p apitype.Network) (apitype.Network, error) {
	var out apitype.Network
	err := c.doJSON(ctx, http.MethodPut, sbPath(id, "network"), nil, p, &out)
	return out, err
}

// NetworkLog returns the newest limit entries (0: all kept) of a
// sandbox's connection log, newest first.
func (c *Client) NetworkLog(ctx context.Context, id string, limit int) ([]apitype.NetworkLogEntry, error) {
	var out apitype.NetworkLog
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	err := c.doJSON(ctx, http.MethodGet, sbPath(id, "network", "log"), q, nil, &out)
	return out.Entries, err
}

// Secrets lists the secrets bound to a sandbox's egress, without values.
func (c *Client) Secrets(ctx context.Context, id string) ([]apitype.Secret, error) {
	var out apitype.SecretList
	err := c.doJSON(ctx, http.MethodGet, sbPath(id, "secrets"), nil, nil, &out)
	return out.Secrets, err
}

// SetSecrets replaces every secret bound to a sandbox's egress.
func (c *Client) SetSecrets(ctx context.Context, id string, secrets []apitype.Secret) ([]apitype.Secret, error) {
	var out apitype.SecretList
	err := c.doJSON(ctx, http.MethodPut, sbPath(id, "secrets"), nil, apitype.SecretList{Secrets: secrets}, &out)
	return out.Secrets, err
}

// PutSecret binds one secret (a header set on HTTPS requests to a host),
// replacing the one of the same host and header.
func (c *Client) PutSecret(ctx context.Context, id string, sec apitype.Secret) ([]apitype.Secret, error) {
	var out apitype.SecretList
	err := c.doJSON(ctx, http.MethodPost, sbPath(id, "secrets"), nil, sec, &out)
	return out.Secrets, err
}

// DeleteSecret removes the secrets bound to host (only header's, when
// header is not "").
func (c *Client) DeleteSecret(ctx context.Context, id, host, header string) ([]apitype.Secret, error) {
	var out apitype.SecretList
	q := url.Values{"host": {host}}
	if header != "" {
		q.Set("header", header)
	}
	err := c.doJSON(ctx, http.MethodDelete, sbPath(id, "secrets"), q, nil, &out)
	return out.Secrets, err
}
