package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berthdev/berth/internal/apitype"
)

// BrowserJournal returns one page of a browser session's journal: the
// entries after sequence number afterSeq, at most limit (0: the server's
// default, 1000). The session may be closed, or of an earlier run of the
// daemon. A page's NextAfterSeq, when set, continues it.
func (c *Client) BrowserJournal(ctx context.Context, id string, afterSeq int64, limit int) (apitype.BrowserJournal, error) {
	q := url.Values{}
	if afterSeq > 0 {
		q.Set("after_seq", strconv.FormatInt(afterSeq, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out apitype.BrowserJournal
	err := c.doJSON(ctx, http.MethodGet, brsPath(id, "journal"), q, nil, &out)
	return out, err
}

// BrowserJournalAll returns every entry of a session's journal, paging
// through it.
func (c *Client) BrowserJournalAll(ctx context.Context, id string) ([]apitype.BrowserJournalEntry, error) {
	var all []apitype.BrowserJournalEntry
	var after int64
	for {
		page, err := c.BrowserJournal(ctx, id, after, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Entries...)
		if page.NextAfterSeq == 0 {
			return all, nil
		}
		after = page.NextAfterSeq
	}
}

func bcpPath(id string, rest ...string) string {
	p := "/v1/browser/checkpoints/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// CheckpointBrowserSession records a session's mode, options and pages'
// URLs in a checkpoint.
func (c *Client) CheckpointBrowserSession(ctx context.Context, id string) (apitype.BrowserCheckpoint, error) {
	var out apitype.BrowserCheckpoint
	err := c.doJSON(ctx, http.MethodPost, brsPath(id, "checkpoints"), nil, nil, &out)
	return out, err
}

// BrowserCheckpoints lists the key's tenant's checkpoints, oldest first.
func (c *Client) BrowserCheckpoints(ctx context.Context) ([]apitype.BrowserCheckpoint, error) {
	var out apitype.BrowserCheckpointList
	err := c.doJSON(ctx, http.MethodGet, "/v1/browser/checkpoints", nil, nil, &out)
	return out.Checkpoints, err
}

// BrowserCheckpoint returns one checkpoint.
func (c *Client) BrowserCheckpoint(ctx context.Context, id string) (apitype.BrowserCheckpoint, error) {
	var out apitype.BrowserCheckpoint
	err := c.doJSON(ctx, http.MethodGet, bcpPath(id), nil, nil, &out)
	return out, err
}

// DeleteBrowserCheckpoint deletes a checkpoint.
func (c *Client) DeleteBrowserCheckpoint(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, bcpPath(id), nil, nil, nil)
}

// ResumeBrowserCheckpoint opens a new session like a checkpoint: the same
// mode and options, its pages at their URLs, the same page selected.
func (c *Client) ResumeBrowserCheckpoint(ctx context.Context, id string) (apitype.BrowserSession, error) {
	var out apitype.BrowserSession
	err := c.doJSON(ctx, http.MethodPost, bcpPath(id, "resume"), nil, nil, &out)
	return out, err
}
