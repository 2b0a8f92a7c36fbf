package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
)

// Bounds of uploads, downloads, inspection and diagnostics.
const (
	maxUploadFiles   = 16
	maxUploadBytes   = 4 << 20
	maxDownloadBytes = 32 << 20
	maxConsoleText   = 2048
	// maxDiagnostics is how many events the ring keeps (the seed's 200).
	maxDiagnostics = 200
	// Inspect: elements and characters per text field, by default and at
	// most, and the most bytes of JSON it answers.
	defaultInspectElements = 100
	maxInspectElements     = 500
	defaultInspectText     = 256
	maxInspectText         = 4096
	maxInspectBytes        = 4 << 20
)

// upload puts files in a file input, as a user choosing them would.
func (s *Session) upload(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	tgt, err := targetOf(a, true)
	if err != nil {
		return nil, err
	}
	if len(a.Files) == 0 || len(a.Files) > maxUploadFiles {
		return nil, errcode.InvalidFields(map[string]string{"files": fmt.Sprintf("give 1 to %d files", maxUploadFiles)})
	}
	dir := filepath.Join(s.m.cfg.DataDir, "files-"+s.id, "up-"+ident.New(""))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var paths []string
	total := 0
	for i, f := range a.Files {
		name := filepath.Base(f.Name)
		if name == "." || name == "/" || name == "" || strings.ContainsAny(f.Name, "/\\\x00") {
			return nil, errcode.InvalidFields(map[string]string{fmt.Sprintf("files[%d].name", i): "must be a plain file name"})
		}
		b, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			return nil, errcode.InvalidFields(map[string]string{fmt.Sprintf("files[%d].content_base64", i): "must be base64"})
		}
		if total += len(b); total > maxUploadBytes {
			return nil, errcode.UploadTooLarge.New("the files are more than %d bytes in all", maxUploadBytes)
		}
		p := filepath.Join(dir, fmt.Sprintf("%d", i))
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
		p = filepath.Join(p, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	el, err := waitActionable(ctx, t, *tgt, "upload")
	if err != nil {
		return nil, err
	}
	if el.Tag != "input" || el.Type != "file" {
		return nil, errcode.NotFileInput.New("the target is a %s, not an input of type file", el.Tag)
	}
	if _, err := chromedp.Call(ctx, dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: paths, ObjectID: el.ObjectID}); err != nil {
		return nil, err
	}
	return map[string]any{"files": len(paths), "bytes": total}, nil
}

// download clicks a target (or navigates to url) that starts a download,
// waits for it, and answers the file. The file stays the session's until
// it closes.
func (s *Session) download(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	tgt, err := targetOf(a, a.URL == "")
	if err != nil {
		return nil, err
	}
	if a.URL != "" {
		if err := allowedURL(a.URL); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(s.m.cfg.DataDir, "files-"+s.id, "down")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := chromedp.FromContext(t.ctx)
	yes := true
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: c.BrowserContextID,
		DownloadPath: dir, EventsEnabled: &yes,
	}); err != nil {
		return nil, err
	}
	type result struct {
		guid, name, url string
		state           cdpbrowser.DownloadProgressState
		received        float64
	}
	var mu sync.Mutex
	var got result
	done := make(chan struct{})
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := chromedp.ListenBrowser(lctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *cdpbrowser.EventDownloadWillBegin:
			if got.guid == "" {
				got.guid, got.name, got.url = e.GUID, e.SuggestedFilename, e.URL
			}
		case *cdpbrowser.EventDownloadProgress:
			if e.GUID != got.guid || got.state != "" {
				return
			}
			got.received = e.ReceivedBytes
			if e.State == cdpbrowser.DownloadProgressStateCompleted || e.State == cdpbrowser.DownloadProgressStateCanceled {
				got.state = e.State
				close(done)
			} else if e.ReceivedBytes > maxDownloadBytes {
				got.state = "too_large"
				close(done)
			}
		}
	}); err != nil {
		return nil, err
	}
	if tgt != nil {
		el, err := waitActionable(ctx, t, *tgt, "click")
		if err != nil {
			return nil, err
		}
		if err := click(ctx, el.X, el.Y, 1); err != nil {
			return nil, err
		}
	} else if _, err := chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: a.URL}); err != nil {
		return nil, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, errcode.DownloadTimeout.New("no download finished before the timeout")
	}
	mu.Lock()
	r := got
	mu.Unlock()
	path := filepath.Join(dir, r.guid)
	switch r.state {
	case "too_large":
		_, _ = chromedp.CallBrowser(ctx, cdpbrowser.CancelDownload, cdpbrowser.CancelDownloadParams{GUID: r.guid, BrowserContextID: c.BrowserContextID})
		_ = os.Remove(path)
		return nil, errcode.DownloadTooLarge.New("the download is more than %d bytes", maxDownloadBytes)
	case cdpbrowser.DownloadProgressStateCanceled:
		return nil, errcode.DownloadCanceled.New("the download was canceled")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The file is kept as an artifact of the session, within its budget
	// (artifacts.go); over it, the file goes and the download fails.
	name := filepath.Base(r.name)
	art, err := s.addArtifact(apitype.ArtifactDownload, name, path)
	if err != nil {
		return nil, err
	}
	return apitype.BrowserDownload{Filename: name, URL: RedactURL(r.url), Size: int64(len(b)),
		Base64: base64.StdEncoding.EncodeToString(b), ArtifactID: art.ID}, nil
}

// drag presses the mouse on a target (or at x, y), moves it in steps to
// another target (or to_x, to_y) and releases it there.
func (s *Session) drag(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	var x0, y0, x1, y1 float64
	if a.Op == "dragCoordinates" {
		x0, y0, x1, y1 = a.X, a.Y, a.ToX, a.ToY
		if min(x0, y0, x1, y1) < 0 {
			return nil, errcode.InvalidFields(map[string]string{"x": "coordinates must not be negative"})
		}
	} else {
		from, err := targetOf(a, true)
		if err != nil {
			return nil, err
		}
		if a.To == nil {
			return nil, errcode.InvalidFields(map[string]string{"to": "drag needs a target to drop on"})
		}
		to := Target(*a.To)
		if p := to.Valid(); len(p) > 0 {
			return nil, errcode.InvalidFields(p)
		}
		src, err := waitActionable(ctx, t, *from, "click")
		if err != nil {
			return nil, err
		}
		dst, err := waitActionable(ctx, t, to, "drop")
		if err != nil {
			return nil, err
		}
		x0, y0, x1, y1 = src.X, src.Y, dst.X, dst.Y
	}
	ev := func(typ input.DispatchMouseEventType, x, y float64) error {
		p := input.DispatchMouseEventParams{Type: typ, X: x, Y: y, Button: input.MouseButtonLeft, Buttons: 1, ClickCount: 1}
		if typ == input.DispatchMouseEventTypeMouseMoved {
			p.ClickCount = 0
		}
		_, err := chromedp.Call(ctx, input.DispatchMouseEvent, p)
		return err
	}
	if err := mouse(ctx, "mouseMove", x0, y0); err != nil {
		return nil, err
	}
	if err := ev(input.DispatchMouseEventTypeMousePressed, x0, y0); err != nil {
		return nil, err
	}
	const steps = 10
	for i := 1; i <= steps; i++ {
		f := float64(i) / steps
		if err := ev(input.DispatchMouseEventTypeMouseMoved, x0+(x1-x0)*f, y0+(y1-y0)*f); err != nil {
			return nil, err
		}
	}
	return nil, ev(input.DispatchMouseEventTypeMouseReleased, x1, y1)
}

// inspectJS describes an element and its descendants, bounded: tag,
// attributes (values cut at maxText characters; never the value of a
// password or file input), own text, box (CSS pixels in the viewport of
// the element's frame), visibility; at most max elements and maxBytes of
// JSON.
const inspectJS = `function(max, maxText, maxBytes) {
	const out = [];
	let truncated = false, size = 0;
	const enc = new TextEncoder();
	const cut = (s) => s.length > maxText ? s.slice(0, maxText) + '…' : s;
	const walk = (el, depth) => {
		if (truncated) return;
		if (out.length >= max) { truncated = true; return; }
		const r = el.getBoundingClientRect();
		const st = getComputedStyle(el);
		const attrs = {};
		for (const a of el.attributes) {
			if (a.name === 'value' && el.tagName === 'INPUT' && /^(password|file)$/i.test(el.type)) continue;
			attrs[cut(a.name)] = cut(a.value);
		}
		let text = '';
		for (const n of el.childNodes) if (n.nodeType === 3) text += n.textContent;
		text = text.replace(/\s+/g, ' ').trim();
		const node = {depth, tag: el.tagName.toLowerCase(), attributes: attrs,
			text: cut(text),
			box: [Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)],
			visible: r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none',
			children: el.children.length};
		if ('value' in el && !(el.tagName === 'INPUT' && /^(password|file)$/i.test(el.type)) && typeof el.value === 'string') {
			node.value = cut(el.value);
		}
		const n = enc.encode(JSON.stringify(node)).length + 1;
		if (size + n > maxBytes) { truncated = true; return; }
		size += n;
		out.push(node);
		if (depth < 6) for (const c of el.children) walk(c, depth + 1);
	};
	walk(this, 0);
	return {nodes: out, truncated};
}`

// inspect answers bounded DOM metadata of a target (default: body).
func (s *Session) inspect(ctx context.Context, t *tab, a apitype.BrowserAction) (any, error) {
	tgt, err := targetOf(a, false)
	if err != nil {
		return nil, err
	}
	if tgt == nil {
		tgt = &Target{Selector: "body"}
	}
	maxEl, maxText := a.MaxElements, a.MaxTextLength
	p := map[string]string{}
	if maxEl < 0 || maxEl > maxInspectElements {
		p["max_elements"] = fmt.Sprintf("must be between 1 and %d (0: %d)", maxInspectElements, defaultInspectElements)
	}
	if maxText < 0 || maxText > maxInspectText {
		p["max_text_length"] = fmt.Sprintf("must be between 1 and %d (0: %d)", maxInspectText, defaultInspectText)
	}
	if len(p) > 0 {
		return nil, errcode.InvalidFields(p)
	}
	if maxEl == 0 {
		maxEl = defaultInspectElements
	}
	if maxText == 0 {
		maxText = defaultInspectText
	}
	el, err := t.dom.Locate(ctx, *tgt)
	if err != nil {
		return nil, err
	}
	// Room for the wrapper around the nodes.
	var out struct {
		Nodes     []json.RawMessage `json:"nodes"`
		Truncated bool              `json:"truncated"`
	}
	if err := callOnValue(ctx, el, inspectJS, &out, maxEl, maxText, maxInspectBytes-256); err != nil {
		return nil, err
	}
	if out.Nodes == nil {
		out.Nodes = []json.RawMessage{}
	}
	// Boxes are CSS pixels of the viewport of the element's document: a
	// target in frames has its frame's.
	space := "main_viewport"
	if len(tgt.Frame) > 0 {
		space = "frame_viewport"
	}
	return map[string]any{"nodes": out.Nodes, "truncated": out.Truncated, "coordinate_space": space,
		"max_elements": maxEl, "max_text_length": maxText}, nil
}

// Dialog policy: how long it waits for a dialog, by default and at most.
const (
	defaultDialogTTL = 10 * time.Second
	maxDialogTTL     = 30 * time.Second
)

// dialogOp sets the one-shot dialog policy: the next dialog within ttl_ms
// is accepted (with prompt_text for a prompt) or dismissed.
func (s *Session) dialogOp(a apitype.BrowserAction) (any, error) {
	ttl := defaultDialogTTL
	switch ms := a.TTLMS; {
	case ms < 0 || time.Duration(ms)*time.Millisecond > maxDialogTTL:
		return nil, errcode.InvalidFields(map[string]string{"ttl_ms": fmt.Sprintf("must be between 1 and %d (0: %d)", maxDialogTTL.Milliseconds(), defaultDialogTTL.Milliseconds())})
	case ms > 0:
		ttl = time.Duration(ms) * time.Millisecond
	}
	s.mu.Lock()
	s.dialog = &dialogPolicy{accept: a.Accept, promptText: a.PromptText, expires: time.Now().Add(ttl)}
	s.mu.Unlock()
	return map[string]any{"accept": a.Accept, "expires_in_ms": ttl.Milliseconds()}, nil
}

// diagnostics is a session's bounded ring of page events.
type diagnostics struct {
	// mu guards the fields below.
	mu      sync.Mutex
	events  []apitype.BrowserEvent
	dropped int
	// text: console text is kept; set once the diagnostics op switched it
	// (until then, the session's capture_console says).
	text, textSet bool
}

// keepText reports whether console text is kept now; def is the
// session's capture_console.
func (d *diagnostics) keepText(def bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.textSet {
		return d.text
	}
	return def
}

// diagnosticsOp answers the ring, after switching console text on or off
// (off purges the text kept) and clearing it, as a asks.
func (s *Session) diagnosticsOp(a apitype.BrowserAction) any {
	d := &s.diag
	d.mu.Lock()
	if a.ConsoleText != nil {
		d.text, d.textSet = *a.ConsoleText, true
		if !d.text {
			for i := range d.events {
				if d.events[i].Kind == "console" {
					d.events[i].Text = ""
				}
			}
		}
	}
	if a.Clear {
		d.events, d.dropped = nil, 0
	}
	text := d.text
	if !d.textSet {
		text = s.req.CaptureConsole
	}
	d.mu.Unlock()
	out := d.view()
	out["console_text"] = text
	out["max_events"] = maxDiagnostics
	return out
}

func (d *diagnostics) add(e apitype.BrowserEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.At = time.Now().UTC()
	if e.Kind == "console" && d.textSet && !d.text {
		e.Text = "" // switched off while the event was on its way
	}
	if len(d.events) >= maxDiagnostics {
		d.events = d.events[1:]
		d.dropped++
	}
	d.events = append(d.events, e)
}

func (d *diagnostics) view() map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return map[string]any{"events": append([]apitype.BrowserEvent{}, d.events...), "dropped": d.dropped}
}

// record notes a page event in the session's diagnostics, if it is one.
func (s *Session) record(ev any) {
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		de := apitype.BrowserEvent{Kind: "console", Level: string(e.Type)}
		if s.diag.keepText(s.req.CaptureConsole) {
			var parts []string
			for _, arg := range e.Args {
				switch {
				case len(arg.Value) > 0:
					parts = append(parts, strings.Trim(string(arg.Value), `"`))
				case arg.Description != "":
					parts = append(parts, arg.Description)
				}
			}
			de.Text = strings.Join(parts, " ")
			if len(de.Text) > maxConsoleText {
				de.Text = de.Text[:maxConsoleText]
			}
		}
		s.diag.add(de)
	case *network.EventResponseReceived:
		if e.Response != nil && e.Type == network.ResourceTypeDocument || e.Response != nil && e.Response.Status >= 400 {
			s.diag.add(apitype.BrowserEvent{Kind: "response", URL: RedactURL(e.Response.URL), Status: e.Response.Status})
		}
	case *network.EventLoadingFailed:
		s.diag.add(apitype.BrowserEvent{Kind: "request_failed", Text: e.ErrorText})
	case *page.EventJavascriptDialogOpening:
		// The type and what is done with it (as onEvent will decide), never
		// the message, the default prompt or the answer.
		action := "dismissed"
		s.mu.Lock()
		if p := s.dialog; p != nil && time.Now().Before(p.expires) && p.accept {
			action = "accepted"
		}
		s.mu.Unlock()
		s.diag.add(apitype.BrowserEvent{Kind: "dialog", Level: string(e.Type), Action: action})
	}
}
