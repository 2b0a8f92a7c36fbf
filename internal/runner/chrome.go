package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/fetch"
	cdpio "github.com/chromedp/cdproto/io"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/browser"
)

// chrome is the runner's browser: one Chromium, one blank tab made ahead
// for the next job, and the interception of every request.
type chrome struct {
	log     *slog.Logger
	ctx     context.Context // the chromedp context of the browser's first tab
	cancel  context.CancelFunc
	lost    <-chan struct{} // closed when the browser is gone
	version string
	pid     int
	// oneJob: the runtime serves a single job, and Chromium runs as one
	// process (see allocatorOptions).
	oneJob bool
	// web: the runtime is the web profile's, in a sandbox with egress; a
	// job's page may reach the network (see site.answer).
	web bool

	// site is the job whose requests are served; nil between jobs, when
	// every request is refused.
	site atomic.Pointer[site]

	// next holds the tab the next job uses, made after the previous job.
	next chan tabResult

	// closing is set by close: the browser's end is no crash then.
	closing atomic.Bool
	// crashMu guards crashed: why the browser is gone, once it is.
	crashMu sync.Mutex
	crashed string

	wg sync.WaitGroup // the interception loop, tab makers and closers
}

// tab is one job's page.
type tab struct {
	ctx    context.Context
	cancel context.CancelFunc
	id     target.ID
}

type tabResult struct {
	t   *tab
	err error
}

// warmURL is the blank page a tab made ahead shows, between jobs only.
// It has a line of text, so that it takes fonts and layout into use.
const warmURL = "http://" + siteHost + "/"

var warmPage = []byte(`<!DOCTYPE html><html><head><title></title></head><body><p style="color:#fff">berth</p></body></html>`)

// interceptWorkers bounds the requests answered at once.
const interceptWorkers = 8

// allocatorOptions are the flags of the runner's browser. The sandbox is
// the container: no network, seccomp, not root; Chromium's own sandbox
// cannot nest in it.
//
// When the runtime serves one job (oneJob), Chromium runs as one process:
// the browser, the renderer, the GPU and network services are threads of
// it, with no zygote. The processes would isolate nothing the container
// does not, and starting them is most of what a fresh runtime costs:
// starting Chromium and printing a page took 1.65 s of CPU in six
// processes and 0.76 s in one, on a 2-core machine. Chromium may crash
// while exiting in this mode, after its work; the runtime is discarded
// without asking it to exit. One process has one browser context, so a
// runtime that serves several jobs (each in a fresh browser context) keeps
// the processes.
//
// A web runtime's Chromium has no dead proxy: its pages reach the network
// through the sandbox's egress (the daemon's policy), and the interception
// refuses the sandbox's own loopback, where the runner listens.
func allocatorOptions(exe string, oneJob, web bool) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		// /dev/shm is large in job sandboxes; the default list turns it off.
		chromedp.Flag("disable-dev-shm-usage", false),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		// Pages may not open windows (the default list allows it).
		chromedp.Flag("disable-popup-blocking", false),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		// chromedp puts the profile in a new directory under os.TempDir()
		// and removes it, and any process left on it, when the browser ends.
	)
	if !web {
		// Behind the interception, a second wall: anything that escapes it
		// (a WebSocket, say, which Fetch does not see) goes to a proxy that
		// is not there, loopback included.
		opts = append(opts, chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
			chromedp.Flag("proxy-bypass-list", "<-loopback>"))
	}
	if oneJob {
		opts = append(opts, chromedp.Flag("single-process", true), chromedp.Flag("no-zygote", true))
	}
	return opts
}

// startChrome launches Chromium, turns on the interception and makes the
// first job's tab.
func startChrome(ctx context.Context, exe string, oneJob, web bool, log *slog.Logger) (*chrome, error) {
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocatorOptions(exe, oneJob, web)...)
	bctx, cancelCtx := chromedp.NewContext(allocCtx)
	c := &chrome{log: log, ctx: bctx, oneJob: oneJob, web: web, next: make(chan tabResult, 1)}
	c.cancel = func() {
		cancelCtx()
		cancelAlloc()
	}
	// The first run starts the browser, which lives as long as that run's
	// context: it gets none, and the wait is bounded instead.
	if err := browser.FirstRun(ctx, bctx, startTimeout); err != nil {
		c.cancel()
		return nil, err
	}
	cc := chromedp.FromContext(bctx)
	c.lost = cc.Browser.LostConnection
	if p := cc.Browser.Process(); p != nil {
		c.pid = p.Pid
	}
	if err := c.setup(ctx); err != nil {
		c.close()
		return nil, err
	}
	t, err := c.newTab(ctx)
	if err != nil {
		c.close()
		return nil, err
	}
	if err := warmPrint(ctx, t); err != nil {
		t.cancel()
		c.close()
		return nil, err
	}
	c.next <- tabResult{t: t}
	return c, nil
}

// warmPrint prints the blank page once, so that the first job does not
// pay for the first use of Chromium's PDF path (fonts, PDF backend).
func warmPrint(ctx context.Context, t *tab) error {
	wctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	res, err := chromedp.Call(wctx, page.PrintToPDF, page.PrintToPDFParams{TransferMode: page.PrintToPDFTransferModeReturnAsStream})
	if err != nil {
		return fmt.Errorf("printing a blank page: %w", err)
	}
	for {
		chunk, err := chromedp.Call(wctx, cdpio.Read, cdpio.ReadParams{Handle: res.Stream, Size: pdfChunk})
		if err != nil {
			return fmt.Errorf("printing a blank page: %w", err)
		}
		if chunk.EOF {
			break
		}
	}
	_, err = chromedp.Call(wctx, cdpio.Close, cdpio.CloseParams{Handle: res.Stream})
	return err
}

// setup turns on the browser-wide interception (it covers every tab,
// frame and worker, unlike a tab's own), refuses downloads, and closes
// windows that pages open.
func (c *chrome) setup(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	v, err := chromedp.CallBrowser(sctx, cdpbrowser.GetVersion, cdp.Empty{})
	if err != nil {
		return fmt.Errorf("asking Chromium its version: %w", err)
	}
	c.version = v.Product
	if _, err := chromedp.CallBrowser(sctx, cdpbrowser.SetDownloadBehavior,
		cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorDeny}); err != nil {
		return fmt.Errorf("refusing downloads: %w", err)
	}
	// Subscribe before enabling, so that no paused request is missed.
	paused := chromedp.BrowserEvents(c.ctx, fetch.RequestPaused)
	if _, err := chromedp.CallBrowser(sctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		return fmt.Errorf("enabling the interception: %w", err)
	}
	c.wg.Go(func() { c.intercept(paused) })
	if err := chromedp.ListenBrowser(c.ctx, func(ev any) {
		if e, ok := ev.(*target.EventTargetCreated); ok && e.TargetInfo != nil && e.TargetInfo.OpenerID != "" {
			// No CDP call may run in a listener: hand it over.
			c.wg.Go(func() { c.closePopup(*e.TargetInfo) })
		}
	}); err != nil {
		return err
	}
	c.wg.Go(c.watch)
	return nil
}

// watch notes the browser's end.
func (c *chrome) watch() {
	select {
	case <-c.lost:
		c.markCrashed("the browser exited or crashed")
	case <-c.ctx.Done():
		// chromedp ends the context when the connection is lost, too.
		select {
		case <-c.lost:
			c.markCrashed("the browser exited or crashed")
		default:
		}
	}
}

func (c *chrome) markCrashed(why string) {
	c.crashMu.Lock()
	defer c.crashMu.Unlock()
	if c.crashed == "" && !c.closing.Load() {
		c.crashed = why
		c.log.Error("browser lost", "reason", why)
	}
}

// lostReason is why the browser is gone, or "".
func (c *chrome) lostReason() string {
	select {
	case <-c.lost:
		c.markCrashed("the browser exited or crashed")
	default:
	}
	c.crashMu.Lock()
	defer c.crashMu.Unlock()
	return c.crashed
}

// intercept answers paused requests until the browser ends: the current
// job's site serves or refuses them; between jobs all are refused.
func (c *chrome) intercept(paused func(func(fetch.EventRequestPaused, error) bool)) {
	sem := make(chan struct{}, interceptWorkers)
	for ev, err := range paused {
		if err != nil {
			return
		}
		sem <- struct{}{}
		c.wg.Go(func() {
			defer func() { <-sem }()
			c.answer(ev)
		})
	}
}

func (c *chrome) answer(ev fetch.EventRequestPaused) {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	var err error
	if s := c.site.Load(); s != nil {
		err = s.answer(ctx, ev)
	} else if ev.Request.URL == warmURL {
		_, err = chromedp.CallBrowser(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
			RequestID: ev.RequestID, ResponseCode: http.StatusOK, Body: warmPage,
			ResponseHeaders: []*fetch.HeaderEntry{
				{Name: "Content-Type", Value: "text/html; charset=utf-8"}, {Name: "Cache-Control", Value: "no-store"}},
		})
	} else {
		_, err = chromedp.CallBrowser(ctx, fetch.FailRequest, fetch.FailRequestParams{
			RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
	}
	if err != nil && ctx.Err() == nil && c.ctx.Err() == nil {
		// The request is gone (its page closed) or the browser is.
		c.log.Debug("answering a request", "url", browser.RedactURL(ev.Request.URL), "err", err)
	}
}

// closePopup closes a window a page opened.
func (c *chrome) closePopup(info target.Info) {
	if s := c.site.Load(); s != nil && info.URL != "" && info.URL != "about:blank" {
		s.block(info.URL)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	_, _ = chromedp.CallBrowser(ctx, target.CloseTarget, target.CloseTargetParams{TargetID: info.TargetID})
}

// newTab opens a blank tab in a browser context of its own: a runtime
// that serves several jobs (the daemon's --job-runtime-reuse) gives each a
// fresh one, with no cookie, storage, cache or service worker of the one
// before. Closing the tab disposes of its context.
func (c *chrome) newTab(ctx context.Context) (*tab, error) {
	// A job's tab has a browser context of its own (its cookies, storage
	// and cache), unless the runtime serves only it.
	var opts []chromedp.ContextOption
	if !c.oneJob {
		opts = append(opts, chromedp.WithNewBrowserContext())
	}
	tctx, cancel := chromedp.NewContext(c.ctx, opts...)
	if err := browser.FirstRun(ctx, tctx, 30*time.Second); err != nil {
		cancel()
		return nil, fmt.Errorf("opening a tab: %w", err)
	}
	t := &tab{ctx: tctx, cancel: cancel, id: chromedp.FromContext(tctx).Target.TargetID}
	// chromedp tracks the DOM and the network of its tabs; a job needs
	// neither (it evaluates scripts), and both cost time on every load.
	// A job that waits for the network to be idle turns the network back on.
	for _, cmd := range []cdp.Command[cdp.Empty, cdp.Empty]{css.Disable, dom.Disable, network.Disable} {
		if _, err := chromedp.Call(tctx, cmd, cdp.Empty{}); err != nil {
			cancel()
			return nil, fmt.Errorf("setting a tab up: %s: %w", cmd.Method, err)
		}
	}
	// The tab loads an empty page of the jobs' origin: its renderer
	// process is then the one the job's page loads in, not one started
	// for it.
	wctx, wcancel := context.WithTimeout(tctx, 10*time.Second)
	defer wcancel()
	stop := context.AfterFunc(ctx, wcancel)
	defer stop()
	loaded := chromedp.Events(wctx, page.LoadEventFired)
	if _, err := chromedp.Call(wctx, page.Navigate, page.NavigateParams{URL: warmURL}); err != nil {
		cancel()
		return nil, fmt.Errorf("loading a blank page: %w", err)
	}
	if err := firstEvent(loaded); err != nil {
		cancel()
		return nil, fmt.Errorf("loading a blank page: %w", err)
	}
	return t, nil
}

// takeTab returns the tab made ahead for this job (waiting for it if it is
// still being made), or makes one.
func (c *chrome) takeTab(ctx context.Context) (*tab, error) {
	select {
	case tr := <-c.next:
		if tr.err == nil {
			return tr.t, nil
		}
		if c.closing.Load() {
			return nil, fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
		}
		if c.lostReason() != "" {
			return nil, browserCrashed(c.lostReason())
		}
		c.log.Warn("the tab made ahead failed; making another", "err", tr.err)
		return c.newTab(ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.lost:
		return nil, browserCrashed(c.lostReason())
	}
}

// recycle closes a job's tab and makes the next job's, in the background:
// the job's answer does not wait for either. The old tab goes first: its
// page may still be running (spinning, even), and Chromium could give the
// new tab its renderer process.
func (c *chrome) recycle(t *tab) {
	c.wg.Go(func() {
		t0 := time.Now()
		t.cancel() // closes the tab, and waits (briefly) until it is gone
		if c.ctx.Err() != nil {
			c.next <- tabResult{err: errors.New("the browser is closed")}
			return
		}
		t1 := time.Now()
		nt, err := c.newTab(c.ctx)
		c.next <- tabResult{t: nt, err: err}
		c.log.Debug("tab recycled", "close_ms", ms(t1.Sub(t0)), "open_ms", ms(time.Since(t1)), "err", err)
	})
}

// close ends the browser gracefully, then for sure, and waits for its
// processes.
func (c *chrome) close() {
	c.closing.Store(true)
	gctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	_ = chromedp.Cancel(gctx)
	cancel()
	c.cancel()
	c.wg.Wait()
	select {
	case tr := <-c.next:
		if tr.t != nil {
			tr.t.cancel()
		}
	default:
	}
}
