package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/inspector"
	cdpio "github.com/chromedp/cdproto/io"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/pptx"
)

// Defaults and bounds of the HTML actions.
const (
	defaultPNGWidth   = 1280
	defaultPNGHeight  = 800
	defaultPPTXWidth  = 1280
	defaultPPTXHeight = 720
	defaultPPTXScale  = 2
	defaultMargin     = 0.4 // inches, as Chromium's 1 cm
	pollInterval      = 50 * time.Millisecond
	networkIdle       = 500 * time.Millisecond
	loadPoll          = 250 * time.Millisecond // the document's readiness, beside the load event
	pdfChunk          = 1 << 20
	// maxShotPixels bounds a full-page screenshot's height in device
	// pixels, as Chromium's largest texture.
	maxShotPixels = 16384
	emuPerPx      = 9525
	maxSlides     = pptx.MaxSlides
)

// A slide's size in CSS pixels must be one PowerPoint takes (1 to 56
// inches).
const (
	minSlidePx = (pptx.MinSize + emuPerPx - 1) / emuPerPx
	maxSlidePx = pptx.MaxSize / emuPerPx
)

// render does an HTML action in a tab of its own.
func (c *chrome) render(ctx context.Context, j *job, in *os.Root, outDir string) (*jobspec.Result, error) {
	if why := c.lostReason(); why != "" {
		return nil, browserCrashed(why)
	}
	s := newSite(in, "")
	s.web = c.web
	pageName := j.main
	if j.action == jobspec.MarkdownPDF {
		b, err := markdownPage(in, j.main)
		if err != nil {
			return nil, err
		}
		pageName = j.main + ".html"
		s.files[pageName] = memFile{body: b, ctype: "text/html; charset=utf-8"}
	}
	if j.opts.MarkdownTemplate {
		b, err := markdownTemplatePage(in, j.main)
		if err != nil {
			return nil, err
		}
		s.files[pageName] = memFile{body: b, ctype: "text/html; charset=utf-8"}
	}
	t0 := time.Now()
	t, err := c.takeTab(ctx)
	if err != nil {
		return nil, err
	}
	tabDur := time.Since(t0)
	defer c.recycle(t)
	s.mainFrame = cdp.FrameID(t.id)
	c.site.Store(s)
	defer c.site.Store(nil)

	// The job's calls run in the tab's context, bounded by the job's
	// deadline and by the caller leaving; the job's end is the cause,
	// whichever of the two timers fires first.
	tctx, cancel := context.WithCancelCause(t.ctx)
	defer cancel(nil)
	if d, ok := ctx.Deadline(); ok {
		var cancelD context.CancelFunc
		tctx, cancelD = context.WithDeadline(tctx, d)
		defer cancelD()
	}
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()

	p := &pageRun{c: c, ctx: tctx, stop: cancel, s: s, j: j, outDir: outDir}
	out, err := p.run(pageName)
	if err != nil {
		return nil, p.failure(err)
	}
	c.log.DebugContext(ctx, "page rendered", "tab_ms", ms(tabDur), "load_ms", ms(p.loaded.Sub(t0)-tabDur),
		"output_ms", ms(time.Since(p.loaded)))
	return &jobspec.Result{Outputs: []jobspec.Output{out}, Blocked: s.refused()}, nil
}

var errRendererCrashed = errors.New("the page's renderer crashed")

// pageRun is one job's page.
type pageRun struct {
	c   *chrome
	ctx context.Context // the tab's, bounded by the job
	// stop ends ctx: a crashed renderer answers nothing more, so every
	// wait on the page (its load event, a selector) ends at once.
	stop   context.CancelCauseFunc
	s      *site
	j      *job
	outDir string
	loaded time.Time // when the page had loaded and waited

	// mu guards the fields below, which the tab's listener sets.
	mu       sync.Mutex
	crashed  bool
	inflight map[network.RequestID]bool
	lastNet  time.Time
	// The page's own response (URL actions): its status, and the egress
	// policy's refusal when Berth answered in the destination's place.
	mainStatus     int64
	mainStatusText string
	mainURL        string
	mainRefusal    string
}

// failure turns a page's error into the job's: a gone browser or a
// crashed page first, since they cause the other errors.
func (p *pageRun) failure(err error) error {
	if p.c.closing.Load() {
		return fail(http.StatusServiceUnavailable, "closed", "the runner is shutting down")
	}
	if why := p.c.lostReason(); why != "" {
		if p.c.oneJob {
			// The page's renderer is a thread of the browser's one
			// process: its crash is the browser's.
			return fail(http.StatusServiceUnavailable, "renderer_crashed", "Chromium crashed while it rendered the page (out of memory?): %s", why)
		}
		return browserCrashed(why)
	}
	p.mu.Lock()
	crashed := p.crashed
	p.mu.Unlock()
	if crashed {
		return fail(http.StatusServiceUnavailable, "renderer_crashed", "the page's renderer crashed (out of memory?)")
	}
	return err
}

func (p *pageRun) run(pageName string) (jobspec.Output, error) {
	p.inflight = map[network.RequestID]bool{}
	p.lastNet = time.Now()
	if err := chromedp.Listen(p.ctx, p.onEvent); err != nil {
		return jobspec.Output{}, err
	}
	if err := p.emulate(); err != nil {
		return jobspec.Output{}, err
	}
	if p.j.opts.WaitNetworkIdle {
		if _, err := chromedp.Call(p.ctx, network.Enable, network.EnableParams{}); err != nil {
			return jobspec.Output{}, err
		}
	}
	if p.web() {
		if err := p.loadURL(); err != nil {
			return jobspec.Output{}, err
		}
	} else if err := p.load(siteURL(pageName)); err != nil {
		return jobspec.Output{}, err
	}
	if err := p.wait(); err != nil {
		return jobspec.Output{}, err
	}
	p.loaded = time.Now()
	switch p.j.action {
	case jobspec.HTMLPDF, jobspec.MarkdownPDF, jobspec.URLPDF:
		return p.pdf()
	case jobspec.HTMLPNG, jobspec.URLPNG:
		return p.png()
	case jobspec.HTMLPPTX:
		return p.pptx()
	}
	return jobspec.Output{}, fmt.Errorf("no renderer for %s", p.j.action)
}

// localResourcePrefix starts Chromium's log entry for a file: URL it
// refused itself (before any interception sees the request).
const localResourcePrefix = "Not allowed to load local resource: "

// onEvent watches the tab. It runs in chromedp's read loop: no CDP call.
func (p *pageRun) onEvent(ev any) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.mu.Lock()
		p.inflight[e.RequestID] = true
		p.lastNet = time.Now()
		p.mu.Unlock()
	case *network.EventResponseReceived:
		if e.Type == network.ResourceTypeDocument && e.FrameID == p.s.mainFrame && e.Response != nil {
			p.mu.Lock()
			p.mainStatus, p.mainStatusText, p.mainURL = e.Response.Status, e.Response.StatusText, e.Response.URL
			p.mainRefusal = headerValue(e.Response.Headers, "X-Berth-Reason")
			p.mu.Unlock()
		}
	case *network.EventLoadingFinished:
		p.netDone(e.RequestID)
	case *network.EventLoadingFailed:
		p.netDone(e.RequestID)
	case *cdplog.EventEntryAdded:
		if e.Entry != nil {
			if u, ok := strings.CutPrefix(e.Entry.Text, localResourcePrefix); ok {
				p.s.block(strings.TrimSpace(u))
			}
		}
	case *inspector.EventTargetCrashed:
		p.mu.Lock()
		p.crashed = true
		p.mu.Unlock()
		p.stop(errRendererCrashed)
	case *page.EventJavascriptDialogOpening:
		// A dialog would stop the page until answered: dismiss it.
		ctx := p.ctx
		p.c.wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, _ = chromedp.Call(dctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		})
	}
}

func (p *pageRun) netDone(id network.RequestID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inflight, id)
	p.lastNet = time.Now()
}

// viewport returns the job's viewport and device scale factor.
func (p *pageRun) viewport() (w, h int64, dsf float64) {
	o := p.j.opts
	switch p.j.action {
	case jobspec.HTMLPNG, jobspec.URLPNG:
		w, h, dsf = defaultPNGWidth, defaultPNGHeight, 1
	case jobspec.HTMLPPTX:
		w, h, dsf = defaultPPTXWidth, defaultPPTXHeight, defaultPPTXScale
	default:
		return 0, 0, 0
	}
	if o.Width != 0 {
		w = int64(o.Width)
	}
	if o.Height != 0 {
		h = int64(o.Height)
	}
	if o.DeviceScaleFactor != 0 {
		dsf = o.DeviceScaleFactor
	}
	return w, h, dsf
}

// emulate sets, before the page loads, the viewport of the screenshot
// actions (so that it lays out at that size) and the job's emulation
// options: user agent, media type and features.
func (p *pageRun) emulate() error {
	o := p.j.opts
	if w, h, dsf := p.viewport(); w != 0 {
		if _, err := chromedp.Call(p.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: w, Height: h, DeviceScaleFactor: dsf, ScreenWidth: w, ScreenHeight: h}); err != nil {
			return err
		}
	}
	if o.UserAgent != "" {
		if _, err := chromedp.Call(p.ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: o.UserAgent}); err != nil {
			return err
		}
	}
	if o.EmulatedMediaType != "" || len(o.EmulatedMediaFeatures) > 0 {
		params := emulation.SetEmulatedMediaParams{Media: o.EmulatedMediaType}
		for _, f := range o.EmulatedMediaFeatures {
			params.Features = append(params.Features, &emulation.MediaFeature{Name: f.Name, Value: f.Value})
		}
		if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, params); err != nil {
			return err
		}
	}
	return nil
}

// load navigates to the page and waits for its load event.
func (p *pageRun) load(u string) error {
	lctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	loaded := chromedp.Events(lctx, page.LoadEventFired) // before navigating: no event missed
	nav, err := chromedp.Call(p.ctx, page.Navigate, page.NavigateParams{URL: u})
	if err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fail(http.StatusUnprocessableEntity, "invalid_input", "loading %s failed: %s", p.j.main, nav.ErrorText)
	}
	return awaitLoad(p.ctx, loaded)
}

// awaitLoad waits for the first event of loaded (the page's load event), or
// for the document to be complete, whichever comes first. A page that
// navigates away before its load event (a script setting location to an
// address the runner refuses) never fires one: the document stays, and is
// what there is to print once the browser has finished with it.
func awaitLoad[E any](ctx context.Context, loaded iter.Seq2[E, error]) error {
	done := make(chan error, 1)
	go func() { done <- firstEvent(loaded) }()
	tick := time.NewTicker(loadPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`)); err == nil && state == "complete" {
				return nil
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// firstEvent waits for the first event of seq and returns its error.
func firstEvent[E any](seq iter.Seq2[E, error]) error {
	err := errors.New("the page closed before it loaded")
	seq(func(_ E, e error) bool {
		err = e
		return false
	})
	return err
}

// wait does the job's waits: for a selector, for the network to be idle,
// then for a delay.
func (p *pageRun) wait() error {
	o := p.j.opts
	if sel := o.WaitForSelector; sel != "" {
		q, _ := json.Marshal(sel)
		expr := "document.querySelector(" + string(q) + ") !== null"
		for {
			found, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](expr))
			if err == nil && found {
				break
			}
			var ee *chromedp.ExceptionError
			if errors.As(err, &ee) {
				return fail(http.StatusUnprocessableEntity, "invalid_options", "options.wait_for_selector: %s", ee.Error())
			}
			if err == nil {
				err = sleep(p.ctx, pollInterval)
			}
			if err != nil {
				if errors.Is(context.Cause(p.ctx), context.DeadlineExceeded) {
					return fail(http.StatusUnprocessableEntity, "wait_for_selector",
						"no element matched %q before the job's timeout", sel)
				}
				return err
			}
		}
	}
	if x := o.WaitForExpression; x != "" {
		if err := p.waitTrue("(" + x + "\n) === true"); err != nil {
			if errors.Is(context.Cause(p.ctx), context.DeadlineExceeded) {
				return fail(http.StatusUnprocessableEntity, "wait_for_expression", "%q was not true before the job's timeout", x)
			}
			return err
		}
	}
	if o.WaitNetworkIdle {
		for {
			p.mu.Lock()
			idle := len(p.inflight) == 0 && time.Since(p.lastNet) >= networkIdle
			p.mu.Unlock()
			if idle {
				break
			}
			if err := sleep(p.ctx, pollInterval); err != nil {
				return err
			}
		}
	}
	if o.WaitDelayMS > 0 {
		if err := sleep(p.ctx, time.Duration(o.WaitDelayMS)*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// ms is d in milliseconds, for logs.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pdfParams are the job's printToPDF parameters.
func pdfParams(o jobspec.Options) page.PrintToPDFParams {
	paper := jobspec.Papers["letter"]
	if o.Paper != "" {
		paper = jobspec.Papers[strings.ToLower(o.Paper)]
	}
	if o.PaperWidth != 0 {
		paper[0] = o.PaperWidth
	}
	if o.PaperHeight != 0 {
		paper[1] = o.PaperHeight
	}
	margin := func(v *float64) *float64 {
		m := defaultMargin
		if v != nil {
			m = *v
		}
		return &m
	}
	p := page.PrintToPDFParams{
		PaperWidth: paper[0], PaperHeight: paper[1],
		MarginTop: margin(o.MarginTop), MarginBottom: margin(o.MarginBottom),
		MarginLeft: margin(o.MarginLeft), MarginRight: margin(o.MarginRight),
		Landscape: &o.Landscape, PrintBackground: &o.PrintBackground,
		Scale: o.Scale, PageRanges: o.PageRanges, PreferCSSPageSize: &o.PreferCSSPage,
		TransferMode: page.PrintToPDFTransferModeReturnAsStream,
	}
	if o.HeaderTemplate != "" || o.FooterTemplate != "" {
		yes := true
		p.DisplayHeaderFooter = &yes
		// An empty template would print Chromium's own header or footer.
		p.HeaderTemplate = cmp.Or(o.HeaderTemplate, "<span></span>")
		p.FooterTemplate = cmp.Or(o.FooterTemplate, "<span></span>")
	}
	return p
}

// pdf prints the page, streaming the PDF from Chromium into the output.
func (p *pageRun) pdf() (jobspec.Output, error) {
	res, err := chromedp.Call(p.ctx, page.PrintToPDF, pdfParams(p.j.opts))
	if err != nil {
		var ce *cdproto.Error
		if errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.Message), "page range") {
			return jobspec.Output{}, fail(http.StatusUnprocessableEntity, "invalid_options", "options.page_ranges: %s", ce.Message)
		}
		return jobspec.Output{}, fmt.Errorf("printing: %w", err)
	}
	defer func() {
		// The browser keeps the stream until it is closed, also when the
		// job's time is up.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 5*time.Second)
		defer cancel()
		_, _ = chromedp.Call(cctx, cdpio.Close, cdpio.CloseParams{Handle: res.Stream})
	}()
	out, err := createOutput(p.outDir, resultPDF)
	if err != nil {
		return jobspec.Output{}, err
	}
	defer out.abort()
	for {
		chunk, err := chromedp.Call(p.ctx, cdpio.Read, cdpio.ReadParams{Handle: res.Stream, Size: pdfChunk})
		if err != nil {
			return jobspec.Output{}, fmt.Errorf("reading the PDF: %w", err)
		}
		if _, err := out.Write(chunk.Data); err != nil {
			return jobspec.Output{}, fmt.Errorf("writing the PDF: %w", err)
		}
		if chunk.EOF {
			break
		}
	}
	if err := out.commit(); err != nil {
		return jobspec.Output{}, err
	}
	return jobspec.Output{Name: resultPDF, MIME: "application/pdf", Pages: out.pdfPages()}, nil
}

// png takes the screenshot: the viewport, or the whole page.
func (p *pageRun) png() (jobspec.Output, error) {
	params := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng}
	if p.j.opts.FullPage {
		w, _, dsf := p.viewport()
		m, err := chromedp.Call(p.ctx, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return jobspec.Output{}, err
		}
		width, height := float64(w), float64(0)
		if cs := m.CSSContentSize; cs != nil {
			width, height = math.Max(width, math.Ceil(cs.Width)), math.Ceil(cs.Height)
		}
		height = math.Max(1, math.Min(height, math.Floor(maxShotPixels/dsf)))
		yes := true
		params.CaptureBeyondViewport = &yes
		params.Clip = &page.Viewport{X: 0, Y: 0, Width: width, Height: height, Scale: 1}
	}
	res, err := chromedp.Call(p.ctx, page.CaptureScreenshot, params)
	if err != nil {
		return jobspec.Output{}, fmt.Errorf("taking the screenshot: %w", err)
	}
	if err := writeOutput(p.outDir, resultPNG, res.Data); err != nil {
		return jobspec.Output{}, err
	}
	return jobspec.Output{Name: resultPNG, MIME: "image/png"}, nil
}

func writeOutput(dir, name string, b []byte) error {
	out, err := createOutput(dir, name)
	if err != nil {
		return err
	}
	defer out.abort()
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return out.commit()
}

// slidesJS finds a deck's slides, reads their notes and hides the notes.
// It answers the slides' boxes (document coordinates, measured with the
// notes hidden), their notes and the document's title and size.
const slidesJS = `(function(slideSel, notesSel, max) {
	const BLOCK = /^(ADDRESS|ARTICLE|ASIDE|BLOCKQUOTE|DD|DIV|DL|DT|FIELDSET|FIGCAPTION|FIGURE|FOOTER|FORM|H[1-6]|HEADER|HR|LI|MAIN|NAV|OL|P|PRE|SECTION|TABLE|TR|UL)$/;
	const text = (node, out) => {
		for (const n of node.childNodes) {
			if (n.nodeType === 3) { out.push(n.data.replace(/\s+/g, ' ')); continue; }
			if (n.nodeType !== 1) continue;
			if (n.tagName === 'BR') { out.push('\n'); continue; }
			if (n.tagName === 'SCRIPT' || n.tagName === 'STYLE' || n.tagName === 'TEMPLATE') continue;
			const block = BLOCK.test(n.tagName);
			if (block) out.push('\n');
			text(n, out);
			if (block) out.push('\n');
		}
	};
	const notesOf = (el) => {
		const parts = [];
		for (const n of el.querySelectorAll(notesSel)) {
			const out = [];
			text(n, out);
			const lines = out.join('').split('\n').map(l => l.trim());
			const kept = [];
			for (const l of lines) if (l !== '' || (kept.length && kept[kept.length-1] !== '')) kept.push(l);
			while (kept.length && kept[kept.length-1] === '') kept.pop();
			if (kept.length) parts.push(kept.join('\n'));
		}
		return parts.join('\n');
	};
	const els = slideSel === 'page' ? [] : Array.from(document.querySelectorAll(slideSel));
	if (els.length > max) return {count: els.length, slides: []};
	const notes = els.map(notesOf);
	document.querySelectorAll(notesSel); // a bad selector throws here, before the style
	const style = document.createElement('style');
	style.textContent = notesSel + ' { display: none !important; }';
	(document.head || document.documentElement).appendChild(style);
	const slides = [];
	els.forEach((el, i) => {
		const r = el.getBoundingClientRect();
		if (r.width < 1 || r.height < 1) return;
		slides.push({x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height, notes: notes[i], i});
	});
	const d = document.documentElement;
	return {count: els.length, slides, title: document.title,
		height: Math.max(d.scrollHeight, document.body ? document.body.scrollHeight : 0)};
})`

type slideBox struct {
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	W     float64 `json:"w"`
	H     float64 `json:"h"`
	Notes string  `json:"notes"`
	I     int     `json:"i"` // the slide element's index among the matches; -1 for a page
}

type deckInfo struct {
	Count  int        `json:"count"`
	Slides []slideBox `json:"slides"`
	Title  string     `json:"title"`
	Height float64    `json:"height"`
}

// pptx captures each slide as an exact picture and builds the deck.
func (p *pageRun) pptx() (jobspec.Output, error) {
	o := p.j.opts
	slideSel := cmp.Or(o.SlideSelector, "section")
	notesSel := cmp.Or(o.NotesSelector, "aside.notes")
	args, _ := json.Marshal([]any{slideSel, notesSel, maxSlides})
	expr := slidesJS + "(..." + string(args) + ")"
	info, err := chromedp.Run(p.ctx, chromedp.Evaluate[deckInfo](expr))
	if err != nil {
		var ee *chromedp.ExceptionError
		if errors.As(err, &ee) {
			return jobspec.Output{}, fail(http.StatusUnprocessableEntity, "invalid_options",
				"options.slide_selector or notes_selector: %s", ee.Error())
		}
		return jobspec.Output{}, fmt.Errorf("finding the slides: %w", err)
	}
	if info.Count > maxSlides {
		return jobspec.Output{}, fail(http.StatusUnprocessableEntity, "too_many_slides",
			"%d elements match %q; a deck has at most %d slides", info.Count, slideSel, maxSlides)
	}
	w, h, _ := p.viewport()
	slides := info.Slides
	if len(slides) == 0 {
		// No slide elements: one slide per viewport-high page.
		n := int(math.Ceil(info.Height / float64(h)))
		if n > maxSlides {
			return jobspec.Output{}, fail(http.StatusUnprocessableEntity, "too_many_slides",
				"the document is %d slides high; a deck has at most %d", n, maxSlides)
		}
		for k := range max(n, 1) {
			slides = append(slides, slideBox{X: 0, Y: float64(k) * float64(h), W: float64(w), H: float64(h), I: -1})
		}
	}
	deck := pptx.Deck{Width: w * emuPerPx, Height: h * emuPerPx, Title: info.Title}
	pictures := slides // the slides captured as one picture each
	if o.Mode == jobspec.PPTXEditable {
		pictures = nil
		deck.Slides, err = p.editableSlides(slideSel, slides, w)
		if err != nil {
			return jobspec.Output{}, err
		}
	}
	yes := true
	for i, sl := range pictures {
		res, err := chromedp.Call(p.ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format:                page.CaptureScreenshotFormatPng,
			CaptureBeyondViewport: &yes,
			// Scaled so that the picture is the slide's size.
			Clip: &page.Viewport{X: sl.X, Y: sl.Y, Width: sl.W, Height: sl.H, Scale: float64(w) / sl.W},
		})
		if err != nil {
			return jobspec.Output{}, fmt.Errorf("capturing slide %d: %w", i+1, err)
		}
		deck.Slides = append(deck.Slides, pptx.Slide{Image: res.Data, Notes: sl.Notes})
	}
	out, err := createOutput(p.outDir, resultPPTX)
	if err != nil {
		return jobspec.Output{}, err
	}
	defer out.abort()
	if err := pptx.Write(out.f, deck); err != nil {
		return jobspec.Output{}, fmt.Errorf("writing the deck: %w", err)
	}
	if err := out.commit(); err != nil {
		return jobspec.Output{}, err
	}
	return jobspec.Output{Name: resultPPTX, MIME: pptxMIME, Pages: len(deck.Slides)}, nil
}

const pptxMIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
