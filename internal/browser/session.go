package browser

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/tenant"
)

// Session is one browser session: a browser context (or a browser) with
// one or more pages, driven by one action at a time.
type Session struct {
	m       *Manager
	id      string
	tenant  string // the owning tenant's ID
	mode    string
	req     apitype.CreateBrowserSessionRequest
	created time.Time
	idle    time.Duration
	maxDur  time.Duration

	// busy is held by the action in progress: a second one gets 409.
	busy sync.Mutex

	ctl  control    // the human-control lease (control.go)
	live liveHub    // the live viewers (live.go)
	arts artifacts  // downloads and traces kept (artifacts.go)
	tr   traceState // the trace in progress (trace.go)

	mu       sync.Mutex
	state    string
	reason   string
	lastUsed time.Time
	pages    []*tab
	current  int
	dialog   *dialogPolicy
	diag     diagnostics
	adopted  map[target.ID]bool // popups made pages
	cancel   context.CancelFunc // ends the session's browser context or browser
	root     context.Context    // the chromedp context pages are made from
	dir      string             // process mode: the profile directory
	provider providerState      // remote mode with a provider: its session there (provider.go)
	iso      *isolatedBrowser   // isolated mode: the browser and its sandbox (isolated.go)
	journal  journal            // journal.go

	capturing chan struct{} // closed when the recording capture holding busy ends (recording.go)
}

// tab is one page of a session.
type tab struct {
	id     target.ID // set for adopted popups
	ctx    context.Context
	cancel context.CancelFunc
	dom    *DOM
}

// dialogPolicy answers the next JavaScript dialog; without one, dialogs are
// dismissed at once.
type dialogPolicy struct {
	accept     bool
	promptText string
	expires    time.Time
}

// Tenant is the ID of the tenant that owns the session.
func (s *Session) Tenant() string { return s.tenant }

// ProfileDir is where tenant's persistent profile name lives: the default
// tenant's (every profile made before tenants) under profiles/, another
// tenant's under tenant-profiles/<tenant>/.
func ProfileDir(dataDir, tenantID, name string) string {
	if tenantID == "" || tenantID == tenant.DefaultID {
		return filepath.Join(dataDir, "profiles", name)
	}
	return filepath.Join(dataDir, "tenant-profiles", tenantID, name)
}

func newSession(m *Manager, id string, req apitype.CreateBrowserSessionRequest) *Session {
	s := &Session{m: m, id: id, mode: req.Mode, req: req, created: time.Now(), state: apitype.BrowserOpen, adopted: map[target.ID]bool{},
		idle: m.cfg.IdleTimeout, maxDur: m.cfg.MaxDuration}
	s.lastUsed = s.created
	if req.IdleTimeoutMS > 0 {
		s.idle = time.Duration(req.IdleTimeoutMS) * time.Millisecond
	}
	if req.MaxDurationMS > 0 {
		s.maxDur = time.Duration(req.MaxDurationMS) * time.Millisecond
	}
	return s
}

// ID returns the session's ID.
func (s *Session) ID() string { return s.id }

// State returns open, crashed or closed.
func (s *Session) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// start creates the session's browser context (or browser) and first page.
func (s *Session) start(ctx context.Context) error {
	var parent context.Context
	var opts []chromedp.ContextOption
	var t *tab
	switch s.mode {
	case apitype.BrowserModeContext:
		// A browser context of its own: cookies, storage and cache apart
		// from every other session's; disposed of with the session. A
		// spare one, made ahead, when there is one.
		if t = s.m.takeSpare(); t != nil {
			if err := s.attach(ctx, t); err != nil {
				t.cancel()
				return openError(err)
			}
			break
		}
		sb, err := s.m.sharedContext()
		if err != nil {
			return err
		}
		parent = sb.ctx
		opts = append(opts, chromedp.WithNewBrowserContext())
	case apitype.BrowserModeProcess:
		s.dir = filepath.Join(s.m.cfg.DataDir, "profile-"+s.id)
		if s.req.Profile != "" {
			// A named profile outlives the session (see close).
			s.dir = ProfileDir(s.m.cfg.DataDir, s.tenant, s.req.Profile)
		}
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return err
		}
		// A debugging port on loopback, so the CDP endpoint can hand this
		// browser (and only it) to a Playwright or Puppeteer client.
		opts := append(s.m.allocatorOptions(s.dir),
			chromedp.Flag("remote-debugging-address", "127.0.0.1"), chromedp.Flag("remote-debugging-port", "0"), remote.WebSocket,
			// A loaded machine may take a while to start Chromium: as long as FirstRun waits.
			chromedp.WSURLReadTimeout(30*time.Second))
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		parent = allocCtx
		s.cancel = cancelAlloc
	case apitype.BrowserModeIsolated:
		return s.startIsolated(ctx)
	case apitype.BrowserModeRemote:
		cdpURL, ropts := s.req.CDPURL, []remote.Option(nil)
		if s.req.Provider != "" {
			var err error
			if cdpURL, err = s.createProviderSession(ctx); err != nil {
				return err
			}
			ropts = append(ropts, remote.NoModifyURL) // the provider's URL is the browser's, with its credential
		}
		allocCtx, cancelAlloc := remote.NewAllocator(context.Background(), cdpURL, ropts...)
		parent = allocCtx
		s.cancel = cancelAlloc
	}
	if t == nil {
		var err error
		if t, err = s.newTab(ctx, parent, opts...); err != nil {
			return openError(s.connectFailure(err))
		}
	}
	s.mu.Lock()
	s.root = t.ctx
	s.pages = []*tab{t}
	s.mu.Unlock()
	return nil
}

// newTab opens a page under parent and sets it up for the session.
func (s *Session) newTab(ctx context.Context, parent context.Context, opts ...chromedp.ContextOption) (*tab, error) {
	t, err := makeTab(parent, opts...)
	if err != nil {
		return nil, err
	}
	if err := s.attach(ctx, t); err != nil {
		t.cancel()
		return nil, err
	}
	return t, nil
}

// makeTab opens a page under parent, not yet any session's.
func makeTab(parent context.Context, opts ...chromedp.ContextOption) (*tab, error) {
	tctx, cancel := chromedp.NewContext(parent, opts...)
	if err := FirstRun(context.Background(), tctx, 30*time.Second); err != nil {
		cancel()
		return nil, err
	}
	return &tab{ctx: tctx, cancel: cancel, dom: NewDOM()}, nil
}

// attach makes a page the session's: crash and dialog listeners, and the
// session's emulation.
func (s *Session) attach(ctx context.Context, t *tab) error {
	start, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := chromedp.Listen(t.ctx, func(ev any) { s.onEvent(t, ev) }); err != nil {
		return err
	}
	return s.setup(start, t.ctx)
}

// setup applies the session's emulation to a page.
func (s *Session) setup(ctx context.Context, tctx context.Context) error {
	c, cancel := context.WithTimeout(tctx, time.Until(deadline(ctx)))
	defer cancel()
	steps := []chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, page.Enable, page.EnableParams{}); err != nil {
			return err
		}
		// Network events feed the diagnostics ring.
		_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
		return err
	})}
	if v := s.req.Viewport; v != nil {
		steps = append(steps, chromedp.EmulateViewport(int64(v.Width), int64(v.Height)))
	}
	if s.req.UserAgent != "" || s.req.Locale != "" {
		ua := s.req.UserAgent
		steps = append(steps, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			if ua == "" {
				v, err := chromedp.CallBrowser(ctx, cdpbrowser.GetVersion, cdp.Empty{})
				if err != nil {
					return err
				}
				ua = v.UserAgent
			}
			_, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{
				UserAgent: ua, AcceptLanguage: s.req.Locale})
			return err
		}))
	}
	if s.req.Locale != "" {
		steps = append(steps, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: s.req.Locale})
			return err
		}))
	}
	if s.req.Timezone != "" {
		steps = append(steps, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: s.req.Timezone})
			if err != nil {
				return errcode.InvalidFields(map[string]string{"timezone": "Chromium does not know this zone"})
			}
			return nil
		}))
	}
	return chromedp.Do(c, steps...)
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// onEvent watches a page: a crashed renderer ends the session; dialogs are
// answered by the policy or dismissed; popups to forbidden URLs are closed.
func (s *Session) onEvent(t *tab, ev any) {
	s.record(ev)
	switch e := ev.(type) {
	case *page.EventFrameNavigated:
		if e.Frame != nil && e.Frame.ParentID == "" {
			t.dom.Invalidate()
		}
	case *runtime.EventExecutionContextsCleared:
		t.dom.Invalidate()
	case *inspector.EventTargetCrashed:
		s.markCrashed("renderer_crashed")
	case *inspector.EventDetached:
		if e.Reason == "target_closed" {
			return
		}
		s.markCrashed("page_detached: " + e.Reason)
	case *page.EventJavascriptDialogOpening:
		accept, text := false, ""
		s.mu.Lock()
		if p := s.dialog; p != nil && time.Now().Before(p.expires) {
			accept, text = p.accept, p.promptText
			s.dialog = nil
		}
		s.mu.Unlock()
		go func() {
			ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
			defer cancel()
			params := page.HandleJavaScriptDialogParams{Accept: accept}
			if accept && e.Type == page.DialogTypePrompt {
				params.PromptText = text
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, params)
		}()
	case *page.EventWindowOpen:
		if allowedURL(e.URL) != nil {
			// Chromium refuses such popups for web pages itself; note it.
			s.diag.add(apitype.BrowserEvent{Kind: "blocked", URL: RedactURL(e.URL), Text: "popup"})
		}
	}
}

func (s *Session) markCrashed(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == apitype.BrowserOpen {
		s.state, s.reason = apitype.BrowserCrashed, reason
		s.m.log.Warn("browser session crashed", "session_id", s.id, "reason", reason)
		if s.provider.id != "" {
			go s.releaseProvider(reason) // a provider bills the minutes of a browser nobody can use
		}
	}
}

// alive checks, before an action, that the session's browser still runs.
func (s *Session) alive() error {
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	if root != nil {
		if c := chromedp.FromContext(root); c != nil && c.Browser != nil {
			select {
			case <-c.Browser.LostConnection:
				s.markCrashed("browser_exited")
			default:
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case apitype.BrowserOpen:
		return nil
	case apitype.BrowserCrashed:
		return errcode.SessionCrashed.New("browser session %s crashed (%s); close it and open another", s.id, s.reason)
	}
	return errcode.SessionClosed.New("browser session %s is closed", s.id)
}

// close ends the session's pages and browser context (or browser).
func (s *Session) close(reason string) {
	// Recordings stop first, keeping their frames: none captures a page
	// being closed.
	s.m.sessionRecordingsEnd(s.id, reason)
	s.mu.Lock()
	pages := s.pages
	s.pages = nil
	cancel := s.cancel
	s.cancel = nil
	iso := s.iso
	if s.state == apitype.BrowserOpen {
		s.state, s.reason = apitype.BrowserClosed, reason
	}
	s.mu.Unlock()
	if s.req.Profile != "" && len(pages) > 0 {
		// A kept profile needs its browser to close gracefully: Chromium
		// writes cookies and storage out then.
		gctx, cancel := context.WithTimeout(pages[0].ctx, 5*time.Second)
		_ = chromedp.Cancel(gctx)
		cancel()
	}
	for i := len(pages) - 1; i >= 0; i-- {
		pages[i].cancel() // the first page's cancel disposes of the browser context
	}
	if cancel != nil {
		cancel() // process and remote modes: the browser, or the connection
	}
	s.releaseProvider(reason) // remote mode with a provider: its session there
	if iso != nil {
		iso.close() // isolated mode: the browser's sandbox, deleted
	}
	if s.dir != "" {
		SweepOrphans(s.dir)
		if s.req.Profile == "" {
			_ = os.RemoveAll(s.dir)
		} else {
			// Kept for the next session of the profile; the port file of
			// this browser is not.
			_ = os.Remove(filepath.Join(s.dir, "DevToolsActivePort"))
		}
	}
	// A running trace is discarded (its browser is gone); the artifacts
	// go with the files- directory.
	s.closeTrace()
	s.closeArtifacts()
	_ = os.RemoveAll(filepath.Join(s.m.cfg.DataDir, "files-"+s.id)) // uploads and downloads
}

// expired says why a session should be closed now, or "".
func (s *Session) expired(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	idle := now.Sub(s.lastUsed) > s.idle
	switch {
	case s.state != apitype.BrowserOpen && idle:
		return "crashed_and_idle"
	case now.Sub(s.created) > s.maxDur:
		return "max_duration"
	case idle && s.busy.TryLock(): // a running action is use, however long
		s.busy.Unlock()
		return "idle_timeout"
	}
	return ""
}

// View renders the session for the API.
func (s *Session) View(ctx context.Context) apitype.BrowserSession {
	s.mu.Lock()
	out := apitype.BrowserSession{ID: s.id, Mode: s.mode, Profile: s.req.Profile, State: s.state, Reason: s.reason, Pages: len(s.pages),
		CreatedAt: s.created.UTC(), LastUsedAt: s.lastUsed.UTC(), ExpiresAt: s.created.Add(s.maxDur).UTC()}
	if s.iso != nil {
		out.SandboxID = s.iso.sandboxID
	}
	out.Provider, out.ProviderSessionID = s.req.Provider, s.provider.id
	if idleEnd := s.lastUsed.Add(s.idle); idleEnd.Before(out.ExpiresAt) {
		out.ExpiresAt = idleEnd.UTC()
	}
	var cur *tab
	if s.state == apitype.BrowserOpen && s.current < len(s.pages) {
		cur = s.pages[s.current]
	}
	s.mu.Unlock()
	if v := s.req.Viewport; v != nil {
		out.Viewport = *v
	}
	if cur != nil && s.busy.TryLock() {
		defer s.busy.Unlock()
		c, cancel := context.WithTimeout(cur.ctx, 2*time.Second)
		defer cancel()
		if info, err := chromedp.Run(c, chromedp.Evaluate[[3]float64](`[innerWidth, innerHeight, 0]`)); err == nil && out.Viewport.Width == 0 {
			out.Viewport = apitype.Viewport{Width: int(info[0]), Height: int(info[1])}
		}
		out.URL, _ = chromedp.Run(c, chromedp.Location())
		out.Title, _ = chromedp.Run(c, chromedp.Title())
	}
	return out
}

// currentTab returns the page actions go to.
func (s *Session) currentTab() (*tab, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current >= len(s.pages) {
		return nil, errcode.NoPage.New("browser session %s has no page open", s.id)
	}
	return s.pages[s.current], nil
}

// allowedURL is the URL guard: http, https and about:blank only, and no
// credentials in the URL.
func allowedURL(raw string) error {
	if raw == "about:blank" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errcode.URLBlocked.New("%q is not an absolute http or https URL", RedactURL(raw))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return errcode.URLBlocked.New("the %s: scheme is not allowed; only http, https and about:blank", u.Scheme)
	}
	if u.User != nil {
		return errcode.URLBlocked.New("URLs with credentials are not allowed")
	}
	return nil
}

// MaxRedactedURL bounds what RedactURL returns.
const MaxRedactedURL = 512

// RedactURL is a URL fit for logs, diagnostics and reports of blocked
// requests: scheme, host and path, without credentials, query or fragment,
// at most MaxRedactedURL bytes; an opaque URL (data:, about:) is its
// scheme only.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.Opaque != "" {
		return u.Scheme + ":"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	s := u.String()
	if len(s) > MaxRedactedURL {
		s = s[:MaxRedactedURL]
	}
	return s
}

// openError keeps a caller's mistake (an unknown timezone, say) as it is,
// and reports anything else as the browser failing.
func openError(err error) error {
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return err
	}
	return errcode.Wrap(errcode.Unavailable, err, "opening the browser session failed")
}
