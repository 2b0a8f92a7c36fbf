package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Bounds of action results.
const (
	maxContentBytes   = 4 << 20
	maxEvaluateBytes  = 1 << 20
	maxExpressionSize = 64 << 10
	maxTypeChars      = 64 << 10
	maxPages          = 16
	pollInterval      = 50 * time.Millisecond
)

// Do runs one action on a session, under the action's deadline. A session
// runs one action at a time: a second one is refused with 409 busy.
func (m *Manager) Do(ctx context.Context, id string, a apitype.BrowserAction) (any, error) {
	s, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	timeout, err := m.callTimeout(a.TimeoutMS)
	if err != nil {
		return nil, err
	}
	if !s.lockAction(ctx) { // waits out a recording's capture (recording.go)
		return nil, errcode.Busy.New("browser session %s is running another action; actions on one session run one at a time", id)
	}
	defer s.busy.Unlock()
	if err := s.alive(); err != nil {
		return nil, err
	}
	// A person holding control excludes automation (control.go).
	if err := s.admitControl(a.Lease); err != nil {
		return nil, err
	}
	// The journal records the start before the action runs and its end
	// after (journal.go); a failed write admits nothing.
	finish, err := s.journalBegin(ctx, a)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := s.run(ctx, a, timeout)
	s.traceAction(a.Op, start, err) // a running trace logs it (trace.go)
	finish(err)
	return res, err
}

// run runs action a on the session's current page, holding busy.
func (s *Session) run(ctx context.Context, a apitype.BrowserAction, timeout time.Duration) (any, error) {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.lastUsed = time.Now()
		s.mu.Unlock()
	}()
	t, err := s.currentTab()
	if err != nil {
		return nil, err
	}
	// The action runs in the tab's context, bounded by its deadline and by
	// the caller leaving.
	actx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	res, err := s.do(actx, t, a)
	if err != nil {
		if aerr := s.alive(); aerr != nil {
			return nil, aerr // the browser died under the action
		}
		return nil, actionError(a.Op, err, actx, timeout)
	}
	return res, nil
}

// actionError classifies an action's failure.
func actionError(op string, err error, ctx context.Context, timeout time.Duration) error {
	var ce *errcode.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return errcode.ActionTimeout.New("%s did not finish within %s", op, timeout)
	case errors.Is(err, context.Canceled):
		return errcode.Wrap(errcode.Canceled, err, "%s was canceled", op)
	}
	var ee *chromedp.ExceptionError
	if errors.As(err, &ee) {
		return errcode.ScriptError.New("%s: the page threw: %s", op, ee.Error())
	}
	return errcode.Wrap(errcode.Unavailable, err, "%s failed", op)
}

// targetOf returns the action's target: Target, or Selector as shorthand.
func targetOf(a apitype.BrowserAction, required bool) (*Target, error) {
	var t Target
	switch {
	case a.Target != nil && a.Selector != "":
		return nil, errcode.InvalidFields(map[string]string{"target": "give selector or target, not both"})
	case a.Target != nil:
		t = Target(*a.Target)
	case a.Selector != "":
		t = Target{Selector: a.Selector}
	case required:
		return nil, errcode.InvalidFields(map[string]string{"target": a.Op + " needs a selector or a target"})
	default:
		return nil, nil
	}
	if p := t.Valid(); len(p) > 0 {
		return nil, errcode.InvalidFields(p)
	}
	return &t, nil
}

// do dispatches an action.
func (s *Session) do(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	switch a.Op {
	case "navigate":
		return s.navigate(ctx, t, a.URL)
	case "back", "forward":
		return nil, s.history(ctx, t, a.Op)
	case "reload":
		return nil, chromedp.Do(ctx, chromedp.Reload())
	case "evaluate":
		return evaluate(ctx, a.Expression)
	case "click", "dblclick", "hover", "focus", "check", "uncheck", "fill", "select", "scroll", "type", "press":
		return s.elementAction(ctx, t, a)
	case "waitFor":
		return s.waitFor(ctx, t, a)
	case "content":
		return content(ctx)
	case "screenshot":
		return s.screenshot(ctx, t, a)
	case "snapshot":
		snap, err := t.dom.Snapshot(ctx, SnapshotOptions{MaxElements: a.MaxElements})
		if err != nil {
			return nil, err
		}
		return apitype.BrowserSnapshot{URL: snap.URL, Title: snap.Title, YAML: snap.YAML, Refs: snap.Refs, Truncated: snap.Truncated}, nil
	case "pages":
		return s.pagesAction(ctx, a)
	case "dialog":
		return s.dialogOp(a)
	case "mouseClick", "mouseMove":
		return nil, mouse(ctx, a.Op, a.X, a.Y)
	case "drag", "dragCoordinates":
		return s.drag(ctx, t, a)
	case "upload":
		return s.upload(ctx, t, a)
	case "download":
		return s.download(ctx, t, a)
	case "inspect":
		return s.inspect(ctx, t, a)
	case "diagnostics":
		return s.diagnosticsOp(a), nil
	case "accessibility":
		return s.accessibility(ctx, t, a)
	case "traceStart":
		return s.traceStart(ctx, t)
	case "traceStop":
		return s.traceStop(ctx)
	case "downloadRead":
		return s.downloadRead(a)
	case "downloadDelete":
		return s.downloadDelete(a)
	case "":
		return nil, errcode.InvalidFields(map[string]string{"op": "is required"})
	}
	return nil, errcode.OpUnknown.New("op %q is not known; see docs/api.md for the ops", a.Op)
}

func (s *Session) navigate(ctx context.Context, t *tab, u string) (any, error) {
	if err := allowedURL(u); err != nil {
		return nil, err
	}
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(u))
	if err != nil {
		if strings.Contains(err.Error(), "net::") {
			return nil, errcode.NavigationFailed.New("navigating to %s failed: %v", RedactURL(u), err)
		}
		return nil, err
	}
	t.dom.Reset()
	out := map[string]any{"url": u}
	if resp != nil {
		out["url"], out["status"] = resp.URL, resp.Status // after redirects
	}
	return out, nil
}

func (s *Session) history(ctx context.Context, t *tab, op string) error {
	h, err := chromedp.Run(ctx, chromedp.NavigationEntries())
	if err != nil {
		return err
	}
	i := int(h.CurrentIndex)
	if (op == "back" && i == 0) || (op == "forward" && i >= len(h.Entries)-1) {
		return errcode.NoHistory.New("there is no page to go %s to", op)
	}
	step := chromedp.NavigateBack()
	if op == "forward" {
		step = chromedp.NavigateForward()
	}
	t.dom.Reset()
	return chromedp.Do(ctx, step)
}

// evaluate runs a JavaScript expression (promises awaited) and answers its
// JSON-compatible value.
func evaluate(ctx context.Context, expr string) (any, error) {
	if expr == "" || len(expr) > maxExpressionSize {
		return nil, errcode.InvalidFields(map[string]string{"expression": fmt.Sprintf("must be 1 to %d bytes", maxExpressionSize)})
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
	if errors.Is(err, chromedp.ErrJSUndefined) || errors.Is(err, chromedp.ErrJSNull) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(raw) > maxEvaluateBytes {
		return nil, errcode.ResultTooLarge.New("the result is %d bytes of JSON, more than %d", len(raw), maxEvaluateBytes)
	}
	return raw, nil
}

func content(ctx context.Context) (any, error) {
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement ? document.documentElement.outerHTML : ""`))
	if err != nil {
		return nil, err
	}
	truncated := len(html) > maxContentBytes
	if truncated {
		html = html[:maxContentBytes]
	}
	return map[string]any{"html": html, "truncated": truncated}, nil
}

// elementAction runs an op on the element its target names (or, for type
// and press without a target, on whatever has focus).
func (s *Session) elementAction(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	needsTarget := a.Op != "type" && a.Op != "press" && !(a.Op == "scroll" && (a.DeltaX != 0 || a.DeltaY != 0))
	tgt, err := targetOf(a, needsTarget)
	if err != nil {
		return nil, err
	}
	if a.Op == "type" || a.Op == "fill" {
		if len(a.Value) > maxTypeChars {
			return nil, errcode.InvalidFields(map[string]string{"value": fmt.Sprintf("at most %d bytes", maxTypeChars)})
		}
	}
	if tgt == nil {
		switch a.Op {
		case "type":
			return nil, typeText(ctx, a.Value, a.PerKey)
		case "press":
			return nil, press(ctx, a.Value)
		default: // scroll by a delta
			_, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](fmt.Sprintf("window.scrollBy(%g, %g)", a.DeltaX, a.DeltaY)))
			return nil, err
		}
	}
	el, err := waitActionable(ctx, t, *tgt, a.Op)
	if err != nil {
		return nil, err
	}
	switch a.Op {
	case "click":
		return nil, click(ctx, el.X, el.Y, 1)
	case "dblclick":
		return nil, click(ctx, el.X, el.Y, 2)
	case "hover":
		return nil, mouse(ctx, "mouseMove", el.X, el.Y)
	case "scroll":
		return nil, nil // Locate scrolled it into view
	case "focus":
		return nil, callOn(ctx, el, `function() { this.focus(); }`)
	case "check", "uncheck":
		want := a.Op == "check"
		var checked bool
		if err := callOnValue(ctx, el, `function() { return !!this.checked; }`, &checked); err != nil {
			return nil, err
		}
		if checked != want {
			if err := click(ctx, el.X, el.Y, 1); err != nil {
				return nil, err
			}
			if err := callOnValue(ctx, el, `function() { return !!this.checked; }`, &checked); err != nil {
				return nil, err
			}
			if checked != want {
				return nil, errcode.StateUnchanged.New("clicking did not %s the element", a.Op)
			}
		}
		return map[string]any{"checked": checked}, nil
	case "fill":
		if !el.Editable {
			return nil, errcode.NotEditable.New("the target is not an editable field (it is a %s)", el.Tag)
		}
		if err := callOn(ctx, el, clearFieldJS); err != nil {
			return nil, err
		}
		return nil, typeText(ctx, a.Value, a.PerKey)
	case "type":
		if err := callOn(ctx, el, `function() { this.focus(); }`); err != nil {
			return nil, err
		}
		return nil, typeText(ctx, a.Value, a.PerKey)
	case "press":
		if err := callOn(ctx, el, `function() { this.focus(); }`); err != nil {
			return nil, err
		}
		return nil, press(ctx, a.Value)
	case "select":
		values := a.Values
		if a.Value != "" {
			values = append([]string{a.Value}, values...)
		}
		if len(values) == 0 {
			return nil, errcode.InvalidFields(map[string]string{"value": "select needs value or values"})
		}
		var picked []string
		if err := callOnValue(ctx, el, selectJS, &picked, values); err != nil {
			return nil, err
		}
		if len(picked) == 0 {
			return nil, errcode.OptionNotFound.New("no option of the select has value or label %q", values)
		}
		return map[string]any{"selected": picked}, nil
	}
	return nil, nil
}

// clearFieldJS focuses a field and empties it, as a user selecting all and
// deleting would, with the input event frameworks listen to.
const clearFieldJS = `function() {
	this.focus();
	if ('value' in this) {
		this.value = '';
	} else if (this.isContentEditable) {
		this.textContent = '';
	}
	this.dispatchEvent(new Event('input', {bubbles: true}));
}`

// selectJS selects the options of a select matching values (by value, then
// by label) and answers their values.
const selectJS = `function(values) {
	if (this.tagName !== 'SELECT') throw new Error('the target is not a select element');
	const hits = [...this.options].filter(o =>
		values.includes(o.value) || values.includes(o.label) || values.includes(o.textContent.trim()));
	if (hits.length === 0) return [];
	if (this.multiple) {
		for (const o of this.options) o.selected = hits.includes(o);
	} else {
		// Selecting one option deselects the others; deselecting the
		// selected one of a single select would make the browser select
		// the first again.
		hits[0].selected = true;
	}
	this.dispatchEvent(new Event('input', {bubbles: true}));
	this.dispatchEvent(new Event('change', {bubbles: true}));
	return [...this.options].filter(o => o.selected).map(o => o.value);
}`

// waitActionable waits (within ctx) until the target resolves to one
// visible element; ambiguity and stale refs fail at once.
func waitActionable(ctx context.Context, t *tab, tgt Target, op string) (Located, error) {
	locate := t.dom.Locate
	needVisible, needEnabled := true, true
	switch op {
	case "click", "dblclick":
		locate = t.dom.Point // the mouse needs a place, not the element
	case "hover", "scroll", "drop":
		locate, needEnabled = t.dom.Point, false
	case "focus", "screenshot":
		needEnabled = false
	case "upload":
		needVisible = false // file inputs are often hidden behind a styled button
	}
	var notFound error // the last answer that the target is not there yet
	for {
		el, err := locate(ctx, tgt)
		switch {
		case err == nil && (el.Visible || !needVisible) && (el.Enabled || !needEnabled):
			return el, nil
		case err != nil && ctx.Err() != nil && notFound != nil:
			return Located{}, notFound // the deadline cut a look: say what the last one found
		case errcode.Has(err, errcode.TargetNotFound):
			notFound = err
		case err != nil:
			return Located{}, err
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return Located{}, err
			}
			return Located{}, errcode.TargetNotActionable.New("the target stayed hidden or disabled (visible %t, enabled %t)", el.Visible, el.Enabled)
		case <-time.After(pollInterval):
		}
	}
}

// click presses and releases the left button at x, y (count times, for a
// double click). No separate move first: Chromium aligns a mouse move to
// the next frame (up to 16 ms), and the press at a new point updates the
// hover state itself.
func click(ctx context.Context, x, y float64, count int) error {
	for i := 1; i <= count; i++ {
		for _, typ := range []input.DispatchMouseEventType{input.DispatchMouseEventTypeMousePressed, input.DispatchMouseEventTypeMouseReleased} {
			if _, err := chromedp.Call(ctx, input.DispatchMouseEvent, input.DispatchMouseEventParams{
				Type: typ, X: x, Y: y, Button: input.MouseButtonLeft, ClickCount: int64(i),
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func mouse(ctx context.Context, op string, x, y float64) error {
	if x < 0 || y < 0 {
		return errcode.InvalidFields(map[string]string{"x": "x and y must not be negative"})
	}
	if op == "mouseClick" {
		// At raw coordinates the pointer moves there first, as a person's
		// would: pages that track movement see it.
		if err := mouse(ctx, "mouseMove", x, y); err != nil {
			return err
		}
		return click(ctx, x, y, 1)
	}
	_, err := chromedp.Call(ctx, input.DispatchMouseEvent, input.DispatchMouseEventParams{
		Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y})
	return err
}

// typeText types into whatever has focus: one insertText (fast, the
// default), or key by key.
func typeText(ctx context.Context, text string, perKey bool) error {
	if perKey {
		return chromedp.Do(ctx, chromedp.KeyEvent(text))
	}
	_, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: text})
	return err
}

// keyNames are the named keys press takes, as Playwright names them.
var keyNames = map[string]string{
	"Enter": kb.Enter, "Tab": kb.Tab, "Escape": kb.Escape, "Backspace": kb.Backspace, "Delete": kb.Delete,
	"ArrowUp": kb.ArrowUp, "ArrowDown": kb.ArrowDown, "ArrowLeft": kb.ArrowLeft, "ArrowRight": kb.ArrowRight,
	"Home": kb.Home, "End": kb.End, "PageUp": kb.PageUp, "PageDown": kb.PageDown, "Space": " ",
}

var modifierNames = map[string]chromedp.Modifier{
	"Alt": chromedp.ModifierAlt, "Control": chromedp.ModifierCtrl, "Meta": chromedp.ModifierMeta, "Shift": chromedp.ModifierShift,
}

// press presses a key or a chord: "Enter", "a", "Control+A", "Shift+Tab".
func press(ctx context.Context, keys string) error {
	parts := strings.Split(keys, "+")
	key := parts[len(parts)-1]
	var mods []chromedp.Modifier
	for _, p := range parts[:len(parts)-1] {
		m, ok := modifierNames[p]
		if !ok {
			return errcode.InvalidFields(map[string]string{"value": fmt.Sprintf("unknown modifier %q (Alt, Control, Meta, Shift)", p)})
		}
		mods = append(mods, m)
	}
	if k, ok := keyNames[key]; ok {
		key = k
	} else if len([]rune(key)) != 1 {
		return errcode.InvalidFields(map[string]string{"value": fmt.Sprintf("unknown key %q: a character, or Enter, Tab, Escape, Backspace, Delete, Arrow..., Home, End, PageUp, PageDown, Space", key)})
	}
	return chromedp.Do(ctx, chromedp.KeyEvent(key, chromedp.KeyModifiers(mods...)))
}

func callOn(ctx context.Context, el Located, fn string, args ...any) error {
	var discard json.RawMessage
	return callOnValue(ctx, el, fn, &discard, args...)
}

// callOnValue calls a function with this = the element and decodes its
// result into out.
func callOnValue(ctx context.Context, el Located, fn string, out any, args ...any) error {
	params := runtime.CallFunctionOnParams{FunctionDeclaration: fn, ObjectID: el.ObjectID, ReturnByValue: ptr(true), AwaitPromise: ptr(true)}
	for _, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		params.Arguments = append(params.Arguments, &runtime.CallArgument{Value: b})
	}
	res, err := chromedp.Call(ctx, runtime.CallFunctionOn, params)
	if err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return errcode.ElementError.New("%s", exceptionText(res.ExceptionDetails))
	}
	if res.Result == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		s := d.Exception.Description
		if i := strings.IndexByte(s, '\n'); i > 0 {
			s = s[:i]
		}
		return s
	}
	return d.Text
}

// waitFor waits for a target's state, a URL, or a load state.
func (s *Session) waitFor(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	tgt, err := targetOf(a, false)
	if err != nil {
		return nil, err
	}
	state := a.State
	if state == "" {
		state = "visible"
	}
	switch state {
	case "attached", "visible", "hidden", "detached":
	default:
		return nil, errcode.InvalidFields(map[string]string{"state": "must be attached, visible, hidden or detached"})
	}
	switch a.LoadState {
	case "", "load", "domcontentloaded":
	default:
		return nil, errcode.InvalidFields(map[string]string{"load_state": "must be load or domcontentloaded"})
	}
	if tgt == nil && a.URL == "" && a.LoadState == "" {
		return nil, errcode.InvalidFields(map[string]string{"target": "waitFor needs a target, a url or a load_state"})
	}
	for {
		ok, err := s.waitCondition(ctx, t, tgt, state, a.URL, a.LoadState)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The deadline cut a look short (a busy machine can take the
			// whole timeout for one): the condition was not seen to hold.
			return nil, errcode.WaitTimeout.New("the condition did not hold before the timeout")
		}
		if err != nil {
			return nil, err
		}
		if ok {
			return map[string]any{"matched": true}, nil
		}
		select {
		case <-ctx.Done():
			return nil, errcode.WaitTimeout.New("the condition did not hold before the timeout")
		case <-time.After(pollInterval):
		}
	}
}

func (s *Session) waitCondition(ctx context.Context, t *tab, tgt *Target, state, urlPart, loadState string) (bool, error) {
	if urlPart != "" {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil || !strings.Contains(loc, urlPart) {
			return false, nil
		}
	}
	if loadState != "" {
		rs, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`))
		if err != nil || rs == "loading" || (loadState == "load" && rs != "complete") {
			return false, nil
		}
	}
	if tgt == nil {
		return true, nil
	}
	switch state {
	case "attached", "detached":
		n, err := t.dom.Count(ctx, *tgt)
		if err != nil && !errcode.Has(err, errcode.FrameNotFound) {
			return false, err
		}
		return (n > 0) == (state == "attached"), nil
	}
	el, err := t.dom.Locate(ctx, *tgt)
	switch {
	case errcode.Has(err, errcode.TargetNotFound) || errcode.Has(err, errcode.FrameNotFound):
		return state == "hidden", nil
	case err != nil:
		return false, err
	}
	return el.Visible == (state == "visible"), nil
}

// screenshot captures the viewport, the full page, or an element, as PNG
// or JPEG.
func (s *Session) screenshot(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	format, mime := page.CaptureScreenshotFormatPng, "image/png"
	switch a.Format {
	case "", "png":
	case "jpeg", "jpg":
		format, mime = page.CaptureScreenshotFormatJpeg, "image/jpeg"
	default:
		return nil, errcode.InvalidFields(map[string]string{"format": "must be png or jpeg"})
	}
	if a.Quality < 0 || a.Quality > 100 {
		return nil, errcode.InvalidFields(map[string]string{"quality": "must be between 1 and 100"})
	}
	params := page.CaptureScreenshotParams{Format: format}
	if format == page.CaptureScreenshotFormatJpeg {
		q := int64(a.Quality)
		if q == 0 {
			q = 80
		}
		params.Quality = &q
	}
	tgt, err := targetOf(a, false)
	if err != nil {
		return nil, err
	}
	switch {
	case tgt != nil:
		el, err := waitActionable(ctx, t, *tgt, "screenshot")
		if err != nil {
			return nil, err
		}
		var box [4]float64
		if err := callOnValue(ctx, el, `function() { const r = this.getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }`, &box); err != nil {
			return nil, err
		}
		if box[2] < 1 || box[3] < 1 {
			return nil, errcode.ElementEmpty.New("the element has no size to capture")
		}
		params.Clip = &page.Viewport{X: box[0], Y: box[1], Width: box[2], Height: box[3], Scale: 1}
	case a.FullPage:
		params.CaptureBeyondViewport = ptr(true)
		metrics, err := chromedp.Call(ctx, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		w, h := metrics.CSSContentSize.Width, metrics.CSSContentSize.Height
		params.Clip = &page.Viewport{X: 0, Y: 0, Width: w, Height: min(h, 16384), Scale: 1}
	}
	res, err := chromedp.Call(ctx, page.CaptureScreenshot, params)
	if err != nil {
		return nil, err
	}
	return apitype.Image{MimeType: mime, Base64: base64.StdEncoding.EncodeToString(res.Data)}, nil
}

// pagesAction lists, opens, selects or closes the session's pages.
func (s *Session) pagesAction(ctx context.Context, a apitype.BrowserAction) (any, error) {
	switch a.Action {
	case "", "list":
	case "new":
		if a.URL != "" {
			if err := allowedURL(a.URL); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		n, root := len(s.pages), s.root
		s.mu.Unlock()
		if n >= maxPages {
			return nil, errcode.PageLimit.New("a session has at most %d pages", maxPages)
		}
		// A sibling of the first page: same browser context.
		nt, err := s.newTab(ctx, root)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.pages = append(s.pages, nt)
		s.current = len(s.pages) - 1
		s.mu.Unlock()
		if a.URL != "" {
			nctx, cancel := context.WithTimeout(nt.ctx, time.Until(deadline(ctx)))
			defer cancel()
			if _, err := s.navigate(nctx, nt, a.URL); err != nil {
				return nil, err
			}
		}
	case "select", "close":
		s.mu.Lock()
		if a.Index == nil || *a.Index < 0 || *a.Index >= len(s.pages) {
			n := len(s.pages)
			s.mu.Unlock()
			return nil, errcode.InvalidFields(map[string]string{"index": fmt.Sprintf("must be between 0 and %d", n-1)})
		}
		i := *a.Index
		if a.Action == "close" {
			if i == 0 {
				s.mu.Unlock()
				return nil, errcode.FirstPage.New("the first page lives as long as the session; close the session instead")
			}
			p := s.pages[i]
			s.pages = append(s.pages[:i], s.pages[i+1:]...)
			if s.current >= len(s.pages) || s.current == i {
				s.current = 0
			}
			s.mu.Unlock()
			p.cancel()
		} else {
			s.current = i
			s.mu.Unlock()
		}
	default:
		return nil, errcode.InvalidFields(map[string]string{"action": "must be list, new, select or close"})
	}
	return s.listPages(), nil
}

func (s *Session) listPages() []apitype.BrowserPage {
	s.mu.Lock()
	pages := append([]*tab(nil), s.pages...)
	cur := s.current
	s.mu.Unlock()
	out := make([]apitype.BrowserPage, 0, len(pages))
	for i, p := range pages {
		bp := apitype.BrowserPage{Index: i, Current: i == cur}
		c, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		bp.URL, _ = chromedp.Run(c, chromedp.Location())
		bp.Title, _ = chromedp.Run(c, chromedp.Title())
		cancel()
		out = append(out, bp)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
