// Package browser runs browser sessions: headless Chromium, driven over
// the Chrome DevTools Protocol with chromedp as a thin transport, and
// Berth's own actions, waits and page snapshot on top.
//
// Modes: context (a browser context in one shared, warm browser: the
// fastest), process (a browser of its own, with its own profile
// directory) and remote (a CDP WebSocket URL elsewhere). Sessions are
// bounded in number, expire when idle and after a maximum duration, and
// every CDP call runs under a deadline. A crashed renderer or browser marks
// its sessions crashed with a reason; the next session gets a new browser.
package browser

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/tenant"
)

// Config configures a Manager. Zero values take the defaults.
type Config struct {
	// Chromium is the browser binary; "" finds chromium-headless-shell,
	// then chromium.
	Chromium string
	// DataDir holds profile directories (<data>/browser).
	DataDir     string
	MaxSessions int
	IdleTimeout time.Duration
	MaxDuration time.Duration
	// CallTimeout bounds one action (an action may ask for less, or for
	// up to MaxCallTimeout).
	CallTimeout time.Duration
	// WarmContexts is how many spare browser contexts to keep ready
	// (default 2; negative: none, and the shared browser starts only when
	// a session needs it).
	WarmContexts int
	Logger       *slog.Logger
	// Artifacts bounds a session's downloads and traces (artifacts.go).
	Artifacts ArtifactLimits
	// Isolated makes the sandboxes of isolated sessions (isolated.go); nil:
	// isolated mode is unavailable. IsolatedWarm is how many isolated
	// browsers to keep started (0: none).
	Isolated     Sandboxes
	IsolatedWarm int
	// Journal keeps the journal of actions and the checkpoints
	// (journal.go, checkpoint.go); nil (unit tests) keeps neither. The
	// journal keeps a session's latest MaxJournalEntries entries (default
	// 1000, at most 10000) within MaxJournalBytes (default 8 MiB); a
	// tenant keeps at most MaxCheckpoints checkpoints (default 64).
	Journal           JournalStore
	MaxJournalEntries int
	MaxJournalBytes   int64
	MaxCheckpoints    int
	// Recordings bounds session recordings (recording.go).
	Recordings RecordingConfig
	// Providers are the remote providers configured on this daemon, by
	// name (provider.go); a remote session names one instead of a CDP URL.
	Providers map[string]Provider
}

// Defaults.
const (
	DefaultMaxSessions  = 16
	DefaultIdleTimeout  = 10 * time.Minute
	DefaultMaxDuration  = time.Hour
	DefaultCallTimeout  = 30 * time.Second
	MaxCallTimeout      = 2 * time.Minute
	DefaultWarmContexts = 2
)

var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// chromiumCandidates are the browsers looked for, best first: the headless
// shell launches in a third of the time and uses a fifth of the memory per
// context.
var chromiumCandidates = []string{"chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell", "chromium"}

// Manager owns the browser sessions of one daemon.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*Session
	shared   *sharedBrowser // the browser of context sessions, started on demand

	// spares are browser contexts with a blank page, made ahead on the
	// shared browser so that a context-mode session opens without waiting
	// for Chromium to make one.
	spares chan spare

	// isolated is the warm pool of isolated browsers (isolated_pool.go).
	isolated *isolatedPool

	// stop ends what Start began; done is closed when it has ended.
	stop context.CancelFunc
	done chan struct{}

	recs recordings // recording.go

	pending pendingReleases // provider sessions to release again (provider.go)
}

// spare is a ready page in a browser context of its own.
type spare struct {
	t  *tab
	sb *sharedBrowser
}

// sharedBrowser is the one browser context-mode sessions share.
type sharedBrowser struct {
	ctx    context.Context // a chromedp context holding the browser (and a blank tab)
	cancel context.CancelFunc
	lost   <-chan struct{} // closed when the browser dies
	dir    string
}

// NewManager returns a Manager. It starts no browser until needed (or
// Start's warm-up).
func NewManager(cfg Config) *Manager {
	if cfg.Chromium == "" {
		cfg.Chromium = FindChromium()
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = DefaultMaxDuration
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WarmContexts == 0 {
		cfg.WarmContexts = DefaultWarmContexts
	}
	cfg.MaxJournalEntries = clamp(cfg.MaxJournalEntries, DefaultJournalEntries, 1, MaxJournalEntries)
	cfg.MaxJournalBytes = clamp(cfg.MaxJournalBytes, DefaultJournalBytes, MinJournalBytes, DefaultJournalBytes)
	cfg.MaxCheckpoints = clamp(cfg.MaxCheckpoints, DefaultCheckpoints, 1, DefaultCheckpoints)
	cfg.Recordings = cfg.Recordings.WithDefaults()
	return &Manager{cfg: cfg, log: cfg.Logger, sessions: map[string]*Session{}, spares: make(chan spare, max(cfg.WarmContexts, 0)),
		isolated: newIsolatedPool(cfg.IsolatedWarm)}
}

// FindChromium returns the path of the best Chromium on this machine, or "".
func FindChromium() string {
	for _, c := range chromiumCandidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// Config returns the effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Available reports whether sessions can be opened here.
func (m *Manager) Available() error {
	if m.cfg.Chromium == "" {
		return errcode.BrowserUnavailable.New("no Chromium found; install Debian's chromium-headless-shell (make deps does)")
	}
	return nil
}

// allocatorOptions are the flags of every browser Berth starts.
func (m *Manager) allocatorOptions(dir string) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(m.cfg.Chromium),
		chromedp.UserDataDir(dir),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		// Berth's own sessions keep running in the background: never
		// throttle a page because no window shows it.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root otherwise
	}
	// An allowlisted environment and a private home, never the daemon's (env.go).
	opts = append(opts, envOptions(dir)...)
	return opts
}

// sharedContext returns the shared browser, starting it if it is not
// running.
func (m *Manager) sharedContext() (*sharedBrowser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sb := m.shared; sb != nil {
		select {
		case <-sb.lost:
			sb.cancel()
			m.shared = nil
		default:
			return sb, nil
		}
	}
	dir := filepath.Join(m.cfg.DataDir, "shared-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), m.allocatorOptions(dir)...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	cancel := func() {
		cancelCtx()
		cancelAlloc()
		_ = os.RemoveAll(dir)
	}
	// The first Run starts the browser, which lives as long as that call's
	// context: it gets none of its own, and the wait is bounded instead.
	if err := FirstRun(context.Background(), ctx, 30*time.Second); err != nil {
		cancel()
		return nil, errcode.Wrap(errcode.Unavailable, err, "starting Chromium failed")
	}
	sb := &sharedBrowser{ctx: ctx, cancel: cancel, lost: chromedp.FromContext(ctx).Browser.LostConnection, dir: dir}
	m.shared = sb
	m.log.Info("shared browser started", "chromium", m.cfg.Chromium, "pid", browserPID(ctx))
	return sb, nil
}

func browserPID(ctx context.Context) int {
	if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
		return c.Browser.Process().Pid
	}
	return 0
}

// Open opens a session.
// Owner is who opens a session: its tenant and that tenant's limit on
// open sessions (0: none of its own).
type Owner struct {
	Tenant      string
	MaxSessions int
}

// Open opens a session for owner. Profiles are the owner's: two tenants'
// profiles of one name are two directories.
func (m *Manager) Open(ctx context.Context, owner Owner, req apitype.CreateBrowserSessionRequest) (*Session, error) {
	if p := validSessionRequest(&req); len(p) > 0 {
		return nil, errcode.InvalidFields(p)
	}
	if req.Provider != "" && m.cfg.Providers[req.Provider] == nil {
		return nil, errcode.ProviderNotConfigured.New("this daemon has no %s credentials: start berth serve with --%s-api-key-file", req.Provider, req.Provider)
	}
	switch req.Mode {
	case apitype.BrowserModeRemote:
	case apitype.BrowserModeIsolated:
		if err := m.isolatedAvailable(); err != nil {
			return nil, err
		}
	default:
		if err := m.Available(); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	open, ofTenant := 0, 0
	for _, s := range m.sessions {
		if s.State() == apitype.BrowserOpen {
			open++
			if s.tenant == owner.Tenant {
				ofTenant++
			}
		}
	}
	if owner.MaxSessions > 0 && ofTenant >= owner.MaxSessions {
		m.mu.Unlock()
		return nil, tenant.Exceeded("max_browser_sessions", owner.MaxSessions, ofTenant)
	}
	if req.Profile != "" {
		for _, o := range m.sessions {
			if o.tenant == owner.Tenant && o.req.Profile == req.Profile && o.State() != apitype.BrowserClosed {
				m.mu.Unlock()
				return nil, errcode.ProfileInUse.New("profile %q is in use by session %s; close it first", req.Profile, o.id)
			}
		}
	}
	if open >= m.cfg.MaxSessions {
		m.mu.Unlock()
		return nil, errcode.SessionLimit.New("%d browser sessions are open, the maximum (--max-browser-sessions); close one first", open)
	}
	s := newSession(m, ident.New("brs_"), req)
	s.tenant = owner.Tenant
	m.sessions[s.id] = s // holds the place against the limit while it opens
	m.mu.Unlock()

	if err := s.start(ctx); err != nil {
		m.mu.Lock()
		delete(m.sessions, s.id)
		m.mu.Unlock()
		s.close("start_failed")
		return nil, err
	}
	s.watchPopups()
	m.log.Info("browser session opened", "session_id", s.id, "mode", s.mode)
	return s, nil
}

func validSessionRequest(req *apitype.CreateBrowserSessionRequest) map[string]string {
	p := map[string]string{}
	if req.Mode == "" && req.Provider != "" {
		req.Mode = apitype.BrowserModeRemote
	}
	switch req.Provider {
	case "", ProviderBrowserbase, ProviderSteel:
		if req.Provider != "" && req.Mode != apitype.BrowserModeRemote {
			p["provider"] = "a provider session is mode remote"
		}
	default:
		p["provider"] = "must be browserbase or steel"
	}
	switch req.Mode {
	case "":
		req.Mode = apitype.BrowserModeContext
	case apitype.BrowserModeContext, apitype.BrowserModeProcess, apitype.BrowserModeIsolated:
	case apitype.BrowserModeRemote:
		switch {
		case req.Provider != "" && req.CDPURL != "":
			p["cdp_url"] = "a provider session's CDP URL comes from the provider: give provider or cdp_url, not both"
		case req.Provider != "":
		case !strings.HasPrefix(req.CDPURL, "ws://") && !strings.HasPrefix(req.CDPURL, "wss://"):
			p["cdp_url"] = "remote mode needs a ws:// or wss:// CDP URL, or a provider"
		}
	default:
		p["mode"] = "must be context, process, remote or isolated"
	}
	if req.Profile != "" {
		switch {
		case !profileNameRE.MatchString(req.Profile):
			p["profile"] = "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
		case req.Mode == apitype.BrowserModeIsolated:
			p["profile"] = "isolated sessions keep no profile: their browser and its sandbox go with the session"
		case req.Mode != apitype.BrowserModeProcess:
			p["profile"] = "a persistent profile needs mode process"
		}
	}
	if req.Mode != apitype.BrowserModeRemote && req.CDPURL != "" {
		p["cdp_url"] = "only remote mode takes a CDP URL"
	}
	if v := req.Viewport; v != nil && (v.Width < 100 || v.Width > 8192 || v.Height < 100 || v.Height > 8192) {
		p["viewport"] = "width and height must be between 100 and 8192"
	}
	if len(req.UserAgent) > 512 || strings.ContainsAny(req.UserAgent, "\r\n") {
		p["user_agent"] = "at most 512 characters on one line"
	}
	if len(req.Locale) > 35 || strings.ContainsAny(req.Locale, " \r\n") {
		p["locale"] = "must be a BCP 47 tag such as en-US"
	}
	if len(req.Timezone) > 64 || strings.ContainsAny(req.Timezone, " \r\n") {
		p["timezone"] = "must be an IANA zone such as Europe/Paris"
	}
	for name, v := range map[string]int64{"idle_timeout_ms": req.IdleTimeoutMS, "max_duration_ms": req.MaxDurationMS} {
		if v < 0 || v > (24*time.Hour).Milliseconds() {
			p[name] = "must be between 0 (the default) and 86400000"
		}
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// Count returns how many sessions tenant has open.
func (m *Manager) Count(tenant string) int {
	n := 0
	for _, s := range m.List() {
		if s.tenant == tenant && s.State() == apitype.BrowserOpen {
			n++
		}
	}
	return n
}

// Get returns a session.
func (m *Manager) Get(id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return nil, errcode.SessionNotFound.New("browser session %q not found", id)
	}
	return s, nil
}

// List returns the sessions, oldest first.
func (m *Manager) List() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Session) int { return a.created.Compare(b.created) })
	return out
}

// Close closes a session and forgets it.
func (m *Manager) Close(id string) error {
	m.mu.Lock()
	s, ok := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if !ok {
		return errcode.SessionNotFound.New("browser session %q not found", id)
	}
	s.close("closed")
	m.log.Info("browser session closed", "session_id", id)
	return nil
}

// Start kills the browsers a previous daemon left on profiles under the
// data directory (before any session can open: it would kill that
// session's browser too), then expires idle sessions until Stop. It warms
// the shared browser in the background, so the first session opens fast.
// It deletes the isolated browsers' sandboxes a previous daemon left.
func (m *Manager) Start(start context.Context) error {
	if n := SweepOrphans(m.cfg.DataDir); n > 0 {
		m.log.Info("killed browsers a previous daemon left", "processes", n)
	}
	if m.cfg.Isolated != nil {
		if n, err := m.cfg.Isolated.DeleteAllBrowsers(start); err != nil {
			m.log.Error("deleting the isolated browsers a previous daemon left", "err", err)
		} else if n > 0 {
			m.log.Info("deleted the isolated browsers a previous daemon left", "sandboxes", n)
		}
	}
	m.loadRecordings()
	ctx, stop := context.WithCancel(context.Background())
	m.stop, m.done = stop, make(chan struct{})
	go func() {
		defer close(m.done)
		m.run(ctx)
	}()
	return nil
}

// Stop closes every session, stops the shared browser and waits for the
// background work. It is safe without Start.
func (m *Manager) Stop(context.Context) error {
	if m.stop == nil {
		m.shutdown()
		return nil
	}
	m.stop()
	<-m.done
	return nil
}

// run warms the shared browser, then expires sessions until ctx ends,
// then closes them all and stops the shared browser.
func (m *Manager) run(ctx context.Context) {
	if m.Available() == nil && m.cfg.WarmContexts > 0 { // none warm (tenant mode): no shared browser until needed
		if _, err := m.sharedContext(); err != nil {
			m.log.Error("warming the shared browser", "err", err)
		}
	}
	var wg sync.WaitGroup
	if m.Available() == nil && m.cfg.WarmContexts > 0 {
		wg.Go(func() { m.fillSpares(ctx) })
	}
	if m.isolatedAvailable() == nil && m.isolated.size > 0 {
		wg.Go(func() { m.fillIsolated(ctx) })
	}
	wg.Go(func() { m.retryReleases(ctx) })
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			m.shutdown()
			return
		case now := <-t.C:
			m.expire()
			m.sweepRecordings(now)
		}
	}
}

// fillSpares keeps the spare browser contexts made, until ctx ends.
func (m *Manager) fillSpares(ctx context.Context) {
	for ctx.Err() == nil {
		sb, err := m.sharedContext()
		var t *tab
		if err == nil {
			t, err = makeTab(sb.ctx, chromedp.WithNewBrowserContext())
		}
		if err != nil {
			m.log.Error("making a spare browser context", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			continue
		}
		select {
		case m.spares <- spare{t: t, sb: sb}:
		case <-ctx.Done():
			t.cancel()
		}
	}
}

// takeSpare returns a spare page of the running shared browser, or nil.
func (m *Manager) takeSpare() *tab {
	for {
		select {
		case sp := <-m.spares:
			select {
			case <-sp.sb.lost:
				sp.t.cancel() // made on a browser that has since died
				continue
			default:
				return sp.t
			}
		default:
			return nil
		}
	}
}

// expire closes sessions past their idle timeout or maximum duration, and
// forgets crashed ones after the idle timeout.
func (m *Manager) expire() {
	now := time.Now()
	for _, s := range m.List() {
		if reason := s.expired(now); reason != "" {
			m.mu.Lock()
			delete(m.sessions, s.id)
			m.mu.Unlock()
			s.close(reason)
			m.log.Info("browser session expired", "session_id", s.id, "reason", reason)
		}
	}
}

func (m *Manager) shutdown() {
	m.releaseProviders("daemon_stopped") // all at once, bounded, before the closes one by one
	for _, s := range m.List() {
		s.close("daemon_stopped")
	}
	m.flushReleases()
	for t := m.takeSpare(); t != nil; t = m.takeSpare() {
		t.cancel()
	}
	m.drainIsolated()
	m.mu.Lock()
	m.sessions = map[string]*Session{}
	sb := m.shared
	m.shared = nil
	m.mu.Unlock()
	if sb != nil {
		sb.cancel()
	}
}

// SweepOrphans kills the Chromium processes whose profile directory is dir
// or under it: browsers a daemon that died without closing them left
// behind, or a closed session's browser that did not exit. It returns how
// many it killed.
func SweepOrphans(dir string) int {
	if dir == "" {
		return 0
	}
	dir = filepath.Clean(dir)
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for arg := range strings.SplitSeq(string(b), "\x00") {
			v, ok := strings.CutPrefix(arg, "--user-data-dir=")
			if ok && (v == dir || strings.HasPrefix(v, dir+string(filepath.Separator))) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}

// callTimeout is the deadline of one action.
func (m *Manager) callTimeout(ms int64) (time.Duration, error) {
	if ms == 0 {
		return m.cfg.CallTimeout, nil
	}
	d := time.Duration(ms) * time.Millisecond
	if ms < 0 || d > MaxCallTimeout {
		return 0, errcode.InvalidFields(map[string]string{"timeout_ms": fmt.Sprintf("must be between 1 and %d", MaxCallTimeout.Milliseconds())})
	}
	return d, nil
}

// FirstRun runs the first (empty) action of chromedp context cdpCtx,
// which starts its browser or opens its tab, waiting at most d or until ctx
// ends. The run itself must not carry a deadline: chromedp ends the browser
// or tab with it.
func FirstRun(ctx, cdpCtx context.Context, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(cdpCtx) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("no answer within %s", d)
	case <-ctx.Done():
		return ctx.Err()
	}
}
