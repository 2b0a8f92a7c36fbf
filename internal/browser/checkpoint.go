package browser

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Checkpoints: what a session was (its mode, its validated open options,
// its pages' URLs and which one was selected) so that a new session can
// be opened like it later. A checkpoint keeps no cookies, storage or page
// state, and nothing resumes by itself: only an explicit resume opens a
// session from one, never the daemon's start.

// CheckpointStore keeps checkpoints (satisfied by *store.DB).
type CheckpointStore interface {
	// PutBrowserCheckpoint stores c, or fails with checkpoint_limit when
	// its tenant has max already.
	PutBrowserCheckpoint(ctx context.Context, c Checkpoint, max int) error
	// BrowserCheckpoint returns checkpoint id of tenant scope (AnyTenant:
	// of any), or checkpoint_not_found.
	BrowserCheckpoint(ctx context.Context, scope, id string) (Checkpoint, error)
	// BrowserCheckpoints lists scope's checkpoints, oldest first.
	BrowserCheckpoints(ctx context.Context, scope string) ([]Checkpoint, error)
	// DeleteBrowserCheckpoint deletes checkpoint id of scope, or fails
	// with checkpoint_not_found.
	DeleteBrowserCheckpoint(ctx context.Context, scope, id string) error
}

// AnyTenant is the scope of an admin key: every tenant's (the value of
// sandbox.AnyTenant).
const AnyTenant = "*"

// DefaultCheckpoints is how many checkpoints a tenant keeps at most.
const DefaultCheckpoints = 64

// maxCheckpointURL bounds a recorded URL; a longer one is recorded as its
// origin.
const maxCheckpointURL = 2048

// Checkpoint is a recorded session.
type Checkpoint struct {
	ID       string
	Tenant   string
	Mode     string
	Options  apitype.CreateBrowserSessionRequest // as validated at open; never a CDP URL
	Selected int                                 // the index of the selected page
	URLs     []string                            // the pages' URLs, sanitized
	Created  time.Time
}

// View renders the checkpoint for the API.
func (c Checkpoint) View() apitype.BrowserCheckpoint {
	return apitype.BrowserCheckpoint{ID: c.ID, Mode: c.Mode, Options: c.Options, Selected: c.Selected, URLs: c.URLs, CreatedAt: c.Created.UTC()}
}

func (m *Manager) checkpoints() (CheckpointStore, error) {
	if m.cfg.Journal == nil {
		return nil, errcode.BrowserUnavailable.New("this daemon keeps no browser checkpoints")
	}
	return m.cfg.Journal, nil
}

// Checkpoint records session id. A remote session is refused: opening it
// again needs its CDP URL, which may carry credentials and is never
// stored. It waits for no action: a session running one answers busy.
func (m *Manager) Checkpoint(ctx context.Context, id string) (Checkpoint, error) {
	st, err := m.checkpoints()
	if err != nil {
		return Checkpoint{}, err
	}
	s, err := m.Get(id)
	if err != nil {
		return Checkpoint{}, err
	}
	if s.mode == apitype.BrowserModeRemote {
		return Checkpoint{}, errcode.CheckpointUnsupported.New("a remote session cannot be checkpointed: resuming it needs its CDP URL, " +
			"which Berth does not store; open a new remote session instead")
	}
	if !s.lockAction(ctx) { // a recording's capture is waited for, an action is not
		return Checkpoint{}, errcode.Busy.New("browser session %s is running an action; checkpoint it when it is done", id)
	}
	defer s.busy.Unlock()
	if err := s.alive(); err != nil {
		return Checkpoint{}, err
	}
	s.mu.Lock()
	pages := append([]*tab(nil), s.pages...)
	cur := s.current
	s.mu.Unlock()
	c := Checkpoint{ID: ident.New("bcp_"), Tenant: s.tenant, Mode: s.mode, Options: s.req, Selected: cur, Created: time.Now()}
	c.Options.CDPURL = ""
	for i, p := range pages {
		pctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		stop := context.AfterFunc(ctx, cancel)
		u, err := chromedp.Run(pctx, chromedp.Location())
		stop()
		cancel()
		if err != nil {
			return Checkpoint{}, errcode.Wrap(errcode.Unavailable, err, "reading the URL of page %d failed", i)
		}
		c.URLs = append(c.URLs, CheckpointURL(u))
	}
	if err := st.PutBrowserCheckpoint(ctx, c, m.cfg.MaxCheckpoints); err != nil {
		return Checkpoint{}, err
	}
	m.log.InfoContext(ctx, "browser checkpoint taken", "session_id", id, "checkpoint_id", c.ID, "pages", len(c.URLs))
	return c, nil
}

// CheckpointURL is what a checkpoint keeps of a page's URL: an http or
// https URL's scheme, host and path (no credentials, query or fragment;
// its origin alone when longer than 2048 bytes); about:blank for
// anything else (about:blank itself, a data: page, an error page).
func CheckpointURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "about:blank"
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return "about:blank"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	if s := u.String(); len(s) <= maxCheckpointURL {
		return s
	}
	u.Path, u.RawPath = "/", ""
	if s := u.String(); len(s) <= maxCheckpointURL {
		return s
	}
	return "about:blank"
}

// GetCheckpoint returns checkpoint id as scope sees it.
func (m *Manager) GetCheckpoint(ctx context.Context, scope, id string) (Checkpoint, error) {
	st, err := m.checkpoints()
	if err != nil {
		return Checkpoint{}, err
	}
	return st.BrowserCheckpoint(ctx, scope, id)
}

// Checkpoints lists scope's checkpoints, oldest first.
func (m *Manager) Checkpoints(ctx context.Context, scope string) ([]Checkpoint, error) {
	st, err := m.checkpoints()
	if err != nil {
		return nil, err
	}
	return st.BrowserCheckpoints(ctx, scope)
}

// DeleteCheckpoint deletes checkpoint id of scope.
func (m *Manager) DeleteCheckpoint(ctx context.Context, scope, id string) error {
	st, err := m.checkpoints()
	if err != nil {
		return err
	}
	return st.DeleteBrowserCheckpoint(ctx, scope, id)
}

// Resume opens a new session for owner like checkpoint c: the same mode
// and options, its pages at their URLs (each navigation an action in the
// new session's journal) and the same page selected. If any step fails
// the new session is closed and the error returned: nothing half-resumed
// is left.
func (m *Manager) Resume(ctx context.Context, owner Owner, c Checkpoint) (*Session, error) {
	s, err := m.Open(ctx, owner, c.Options)
	if err != nil {
		return nil, err
	}
	if err := m.restore(ctx, s, c); err != nil {
		_ = m.Close(s.id)
		return nil, err
	}
	m.log.InfoContext(ctx, "browser checkpoint resumed", "checkpoint_id", c.ID, "session_id", s.id)
	return s, nil
}

func (m *Manager) restore(ctx context.Context, s *Session, c Checkpoint) error {
	for i, u := range c.URLs {
		var a apitype.BrowserAction
		switch {
		case i == 0 && u == "about:blank":
			continue
		case i == 0:
			a = apitype.BrowserAction{Op: "navigate", URL: u}
		default:
			a = apitype.BrowserAction{Op: "pages", Action: "new"}
			if u != "about:blank" {
				a.URL = u
			}
		}
		if _, err := m.Do(ctx, s.id, a); err != nil {
			return err
		}
	}
	if len(c.URLs) > 1 && c.Selected != len(c.URLs)-1 {
		if _, err := m.Do(ctx, s.id, apitype.BrowserAction{Op: "pages", Action: "select", Index: ptr(c.Selected)}); err != nil {
			return err
		}
	}
	return nil
}
