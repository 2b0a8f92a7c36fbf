package browser

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdpio "github.com/chromedp/cdproto/io"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Traces: traceStart begins a CDP trace of the session's browser;
// traceStop ends it and keeps a ZIP (trace.json, the CDP trace in Chrome's
// JSON trace format; screenshots/NNNN.jpg, the page after each action;
// actions.json, the action log) as a session artifact. A trace past its
// time or its byte budget is discarded whole: the browser's trace is
// ended and its data dropped, and nothing partial is ever exported.

// Bounds of a trace besides ArtifactLimits.
const (
	maxTraceActions     = 1000
	maxTraceScreenshots = 300
	traceShotQuality    = 50
	traceChunk          = 1 << 20 // IO.read size
	traceEndWait        = 30 * time.Second
	// traceSample is how often the browser reports its trace buffer's use.
	traceSample = 50 * time.Millisecond
)

// traceCategories are the categories Chrome DevTools' performance panel
// records (as Puppeteer's page.tracing does), screenshots included.
var traceCategories = []string{
	"devtools.timeline", "v8.execute", "toplevel", "blink.console", "blink.user_timing", "latencyInfo",
	"disabled-by-default-devtools.timeline", "disabled-by-default-devtools.timeline.frame",
	"disabled-by-default-devtools.timeline.stack", "disabled-by-default-v8.cpu_profiler",
	"disabled-by-default-devtools.screenshot",
}

// Reasons a trace ends without an archive.
const (
	traceOverTime  = "it ran longer than its limit"
	traceOverBytes = "its data passed its byte budget"
	traceClosed    = "the session closed"
)

// traceState is a session's trace, if any.
type traceState struct {
	// mu guards cur. It is taken before a tracer's mu, never with the
	// session's mu.
	mu  sync.Mutex
	cur *tracer
}

// tracer is one trace in progress.
type tracer struct {
	s       *Session
	root    context.Context // the session's first page: its browser traces
	dir     string          // files-<session>/trace-<id>: screenshots, the raw trace
	started time.Time
	budget  int64
	timer   *time.Timer
	stop    context.CancelFunc // ends the event listener
	// complete receives the browser's tracingComplete.
	complete chan *tracing.EventTracingComplete
	// done is closed once the trace has ended and what it left is
	// removed or archived.
	done chan struct{}

	// mu guards the fields below.
	mu      sync.Mutex
	ending  bool   // traceStop or an abort has begun to end the trace
	aborted string // why the trace was discarded ("": it was not)
	bytes   int64  // screenshot bytes so far
	shots   int
	// shooting: a capture after an action runs (in wg); the next action's
	// is skipped meanwhile.
	shooting bool
	wg       sync.WaitGroup
	actions  []traceAction
	dropped  int // actions past maxTraceActions
}

// traceAction is one line of the action log: no values, targets or URLs,
// which can be secrets.
type traceAction struct {
	Op         string    `json:"op"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	Outcome    string    `json:"outcome"` // ok, or the error's reason (or code)
	Screenshot string    `json:"screenshot,omitempty"`
}

// traceOps are the ops that are not logged or captured while tracing.
var traceOps = map[string]bool{"traceStart": true, "traceStop": true, "downloadRead": true, "downloadDelete": true}

// traceStart begins a trace of the session's browser.
func (s *Session) traceStart(ctx context.Context, t *tab) (any, error) {
	if s.mode == apitype.BrowserModeContext {
		// Tracing covers a whole browser: the shared one's trace would hold
		// other sessions' (other tenants') pages.
		return nil, errcode.TraceNeedsProcessMode.New("a trace records the whole browser; open the session with mode \"process\" to trace it")
	}
	l := s.limits()
	s.tr.mu.Lock()
	defer s.tr.mu.Unlock()
	if cur := s.tr.cur; cur != nil {
		cur.mu.Lock()
		aborted := cur.aborted
		cur.mu.Unlock()
		if aborted == "" {
			return nil, errcode.TraceActive.New("a trace is running since %s; stop it with traceStop first", cur.started.UTC().Format(time.RFC3339))
		}
		// A discarded trace nobody stopped: let its cleanup finish first,
		// so the browser's tracing has ended.
		select {
		case <-cur.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.tr.cur = nil
	}
	if err := s.roomForArtifact(0); err != nil {
		return nil, err
	}
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	tr := &tracer{s: s, root: root, dir: filepath.Join(s.filesDir(), "trace-"+ident.New("")), started: time.Now(), budget: l.TraceMaxBytes,
		complete: make(chan *tracing.EventTracingComplete, 1), done: make(chan struct{})}
	if err := os.MkdirAll(filepath.Join(tr.dir, "screenshots"), 0o700); err != nil {
		return nil, err
	}
	// The timer exists before anything can abort the trace; it fires long
	// after traceStart returns.
	tr.timer = time.AfterFunc(l.TraceMaxDuration, func() { tr.abort(traceOverTime) })
	lctx, stop := context.WithCancel(root)
	tr.stop = stop
	if err := chromedp.ListenBrowser(lctx, tr.onEvent); err != nil {
		tr.timer.Stop()
		stop()
		tr.discardFiles()
		return nil, err
	}
	_, err := chromedp.CallBrowser(ctx, tracing.Start, tracing.StartParams{
		TransferMode: tracing.StartTransferModeReturnAsStream, StreamFormat: tracing.StreamFormatJSON,
		BufferUsageReportingInterval: float64(traceSample.Milliseconds()),
		TraceConfig: &tracing.TraceConfig{RecordMode: tracing.TraceConfigRecordModeRecordUntilFull,
			TraceBufferSizeInKb: float64(max(l.TraceMaxBytes>>10, 1)), IncludedCategories: traceCategories, ExcludedCategories: []string{"*"}},
	})
	if err != nil {
		tr.timer.Stop()
		stop()
		tr.discardFiles()
		return nil, fmt.Errorf("starting the trace: %w", err)
	}
	s.tr.cur = tr
	tr.capture(ctx, t)
	return map[string]any{"started_at": tr.started.UTC(), "max_duration_ms": l.TraceMaxDuration.Milliseconds(), "max_bytes": l.TraceMaxBytes}, nil
}

// onEvent watches the browser's tracing events. It runs in chromedp's
// event loop, so it must not block.
func (tr *tracer) onEvent(ev any) {
	switch e := ev.(type) {
	case *tracing.EventBufferUsage:
		if max(e.PercentFull, e.Value) >= 1 {
			go tr.abort(traceOverBytes)
		}
	case *tracing.EventTracingComplete:
		select {
		case tr.complete <- e:
		default:
		}
	}
}

// abort discards the trace for reason, unless it is already ending.
func (tr *tracer) abort(reason string) {
	tr.mu.Lock()
	if tr.ending {
		tr.mu.Unlock()
		return
	}
	tr.ending, tr.aborted = true, reason
	tr.mu.Unlock()
	tr.s.m.log.Info("browser trace discarded", "session_id", tr.s.id, "reason", reason)
	tr.end(context.Background(), false)
}

// end ends the browser's trace. With keep, it copies the trace's data into
// a file while counting it, and answers that file; otherwise (or past the
// budget) it drops the data and removes the trace's files. It closes done.
func (tr *tracer) end(ctx context.Context, keep bool) (string, error) {
	defer close(tr.done)
	tr.timer.Stop()
	tr.wg.Wait() // the capture in flight (ending is set: no other starts)
	defer tr.stop()
	ctx, cancel := context.WithTimeout(ctx, traceEndWait)
	defer cancel()
	// Calls go through the session's first page, so they end with it.
	cctx, ccancel := context.WithCancel(tr.root)
	defer ccancel()
	defer context.AfterFunc(ctx, ccancel)()
	path, err := tr.collect(cctx, keep)
	if err != nil || !keep {
		tr.discardFiles()
		_ = os.Remove(path)
		return "", err
	}
	return path, nil
}

// collect ends tracing, waits for the browser's stream and reads it into
// dir/trace.json (with keep) within the budget.
func (tr *tracer) collect(ctx context.Context, keep bool) (string, error) {
	if _, err := chromedp.CallBrowser(ctx, tracing.End, cdp.Empty{}); err != nil {
		return "", fmt.Errorf("ending the trace: %w", err)
	}
	var done *tracing.EventTracingComplete
	select {
	case done = <-tr.complete:
	case <-ctx.Done():
		return "", fmt.Errorf("the browser did not finish the trace: %w", ctx.Err())
	}
	if done.Stream == "" {
		return "", errors.New("the browser returned no trace stream")
	}
	defer func() { _, _ = chromedp.CallBrowser(ctx, cdpio.Close, cdpio.CloseParams{Handle: done.Stream}) }()
	if done.DataLossOccurred {
		tr.markAborted(traceOverBytes)
		return "", errcode.TraceDiscarded.New("the trace was discarded: %s", traceOverBytes)
	}
	if !keep {
		return "", nil
	}
	path := filepath.Join(tr.dir, "trace.json")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr.mu.Lock()
	used := tr.bytes
	tr.mu.Unlock()
	for {
		chunk, err := chromedp.CallBrowser(ctx, cdpio.Read, cdpio.ReadParams{Handle: done.Stream, Size: traceChunk})
		if err != nil {
			return path, fmt.Errorf("reading the trace: %w", err)
		}
		if used += int64(len(chunk.Data)); used > tr.budget {
			tr.markAborted(traceOverBytes)
			return path, errcode.TraceDiscarded.New("the trace was discarded: %s (%d bytes)", traceOverBytes, tr.budget)
		}
		if _, err := f.Write(chunk.Data); err != nil {
			return path, err
		}
		if chunk.EOF {
			return path, f.Close()
		}
	}
}

func (tr *tracer) markAborted(reason string) {
	tr.mu.Lock()
	if tr.aborted == "" {
		tr.aborted = reason
	}
	tr.mu.Unlock()
}

// discardFiles removes the trace's working directory.
func (tr *tracer) discardFiles() { _ = os.RemoveAll(tr.dir) }

// capture screenshots page t into the trace and answers the file's name
// in the ZIP. It is best effort: a page that cannot be captured (within
// 5 s) leaves no screenshot, and captures past the trace's count skip.
// Screenshots count against the trace's byte budget.
func (tr *tracer) capture(ctx context.Context, t *tab) string {
	tr.mu.Lock()
	if tr.ending || tr.shots >= maxTraceScreenshots {
		tr.mu.Unlock()
		return ""
	}
	tr.shots++
	n := tr.shots
	tr.mu.Unlock()
	cctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	q := int64(traceShotQuality)
	res, err := chromedp.Call(cctx, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatJpeg, Quality: &q,
		OptimizeForSpeed: ptr(true)})
	if err != nil {
		return ""
	}
	tr.mu.Lock()
	tr.bytes += int64(len(res.Data))
	over := tr.bytes > tr.budget
	ending := tr.ending
	tr.mu.Unlock()
	if over {
		go tr.abort(traceOverBytes)
		return ""
	}
	if ending {
		return ""
	}
	name := fmt.Sprintf("screenshots/%04d.jpg", n)
	if err := os.WriteFile(filepath.Join(tr.dir, name), res.Data, 0o600); err != nil {
		return ""
	}
	return name
}

// traceAction notes an action in the running trace's log, and captures
// the page after it. Do calls it after every action, holding busy.
func (s *Session) traceAction(op string, start time.Time, err error) {
	if traceOps[op] {
		return
	}
	s.tr.mu.Lock()
	tr := s.tr.cur
	s.tr.mu.Unlock()
	if tr == nil {
		return
	}
	tr.mu.Lock()
	running := !tr.ending
	tr.mu.Unlock()
	if !running {
		return
	}
	a := traceAction{Op: op, StartedAt: start.UTC(), DurationMS: time.Since(start).Milliseconds(), Outcome: "ok"}
	if err != nil {
		a.Outcome = errcode.ReasonOf(err)
		if a.Outcome == "" {
			a.Outcome = string(errcode.CodeOf(err))
		}
	}
	tr.mu.Lock()
	if len(tr.actions) >= maxTraceActions {
		tr.dropped++
		tr.mu.Unlock()
		return
	}
	tr.actions = append(tr.actions, a)
	idx := len(tr.actions) - 1
	tr.mu.Unlock()
	if t, terr := s.currentTab(); terr == nil && s.alive() == nil {
		tr.captureAfter(t, idx)
	}
}

// captureAfter captures the page after action idx of the log in the
// background, so the action answers without waiting for a frame (a
// capture waits for the compositor: some 40 ms). One capture runs at a
// time: an action that ends while one runs gets none, as a busy recording
// skips a frame rather than queueing it.
func (tr *tracer) captureAfter(t *tab, idx int) {
	tr.mu.Lock()
	if tr.ending || tr.shooting {
		tr.mu.Unlock()
		return
	}
	tr.shooting = true
	tr.wg.Add(1) // under mu, before ending can be set: end's Wait sees it
	tr.mu.Unlock()
	go func() {
		defer tr.wg.Done()
		name := tr.capture(context.Background(), t)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.shooting = false
		if name != "" && idx < len(tr.actions) {
			tr.actions[idx].Screenshot = name
		}
	}()
}

// traceStop ends the trace and keeps its ZIP as an artifact.
func (s *Session) traceStop(ctx context.Context) (any, error) {
	s.tr.mu.Lock()
	tr := s.tr.cur
	s.tr.cur = nil
	s.tr.mu.Unlock()
	if tr == nil {
		return nil, errcode.TraceNotActive.New("no trace is running; start one with traceStart")
	}
	if t, err := s.currentTab(); err == nil {
		tr.capture(ctx, t) // the page as the trace ends
	}
	tr.mu.Lock()
	if tr.ending {
		reason := tr.aborted
		tr.mu.Unlock()
		return nil, errcode.TraceDiscarded.New("the trace was discarded: %s; nothing was kept", reason)
	}
	tr.ending = true
	tr.mu.Unlock()
	raw, err := tr.end(ctx, true)
	if err != nil {
		if errcode.Has(err, errcode.TraceDiscarded) {
			return nil, err
		}
		return nil, errcode.TraceDiscarded.Wrap(err, "the trace was discarded: it could not be collected (%v)", err)
	}
	defer tr.discardFiles()
	zpath := filepath.Join(s.filesDir(), "trace-"+strconv.FormatInt(tr.started.UnixMilli(), 10)+"-"+ident.New("")+".zip")
	tr.mu.Lock()
	actions, dropped := tr.actions, tr.dropped
	tr.mu.Unlock()
	if err := writeTraceZip(zpath, raw, tr.dir, actions, dropped, tr.started); err != nil {
		_ = os.Remove(zpath)
		return nil, fmt.Errorf("writing the trace archive: %w", err)
	}
	art, err := s.addArtifact(apitype.ArtifactTrace, "trace-"+tr.started.UTC().Format("20060102T150405Z")+".zip", zpath)
	if err != nil {
		return nil, err
	}
	names, _ := filepath.Glob(filepath.Join(tr.dir, "screenshots", "*.jpg"))
	return apitype.BrowserTrace{BrowserArtifact: art, Actions: len(actions), Screenshots: len(names)}, nil
}

// writeTraceZip writes the archive: trace.json, the screenshots, and
// actions.json. A failure leaves a partial file the caller removes.
func writeTraceZip(path, raw, dir string, actions []traceAction, dropped int, started time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	z := zip.NewWriter(f)
	add := func(name, src string, method uint16) error {
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		w, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: method, Modified: started})
		if err != nil {
			return err
		}
		_, err = io.Copy(w, in)
		return err
	}
	if err := add("trace.json", raw, zip.Deflate); err != nil {
		return err
	}
	shots, _ := filepath.Glob(filepath.Join(dir, "screenshots", "*.jpg"))
	for _, p := range shots {
		if err := add("screenshots/"+filepath.Base(p), p, zip.Store); err != nil {
			return err
		}
	}
	w, err := z.CreateHeader(&zip.FileHeader{Name: "actions.json", Method: zip.Deflate, Modified: started})
	if err != nil {
		return err
	}
	if actions == nil {
		actions = []traceAction{}
	}
	log := struct {
		StartedAt time.Time     `json:"started_at"`
		Actions   []traceAction `json:"actions"`
		Dropped   int           `json:"dropped"`
	}{started.UTC(), actions, dropped}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(log); err != nil {
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	return f.Close()
}

// closeTrace discards a running trace of a closing session and waits
// (bounded) for its cleanup.
func (s *Session) closeTrace() {
	s.tr.mu.Lock()
	tr := s.tr.cur
	s.tr.cur = nil
	s.tr.mu.Unlock()
	if tr == nil {
		return
	}
	tr.abort(traceClosed)
	select {
	case <-tr.done:
	case <-time.After(traceEndWait):
	}
}
