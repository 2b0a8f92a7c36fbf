package browser

import (
	"context"
	"encoding/base64"
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
	maxUploadFiles     = 16
	maxUploadBytes     = 4 << 20
	maxDownloadBytes   = 32 << 20
	maxInspectElements = 200
	maxDiagnostics     = 500
	maxConsoleText     = 2048
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
	return apitype.BrowserDownload{Filename: filepath.Base(r.name), URL: RedactURL(r.url), Size: int64(len(b)),
		Base64: base64.StdEncoding.EncodeToString(b)}, nil
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

// inspectJS describes an element and its descendants, bounded: tag, id,
// classes, role, attributes (values cut at 200 characters; never the value
// of a password or file input), own text, box, visibility.
const inspectJS = `function(max) {
	const out = [];
	let truncated = false;
	const walk = (el, depth) => {
		if (out.length >= max) { truncated = true; return; }
		const r = el.getBoundingClientRect();
		const st = getComputedStyle(el);
		const attrs = {};
		for (const a of el.attributes) {
			if (a.name === 'value' && el.tagName === 'INPUT' && /^(password|file)$/i.test(el.type)) continue;
			attrs[a.name] = a.value.length > 200 ? a.value.slice(0, 200) + '…' : a.value;
		}
		let text = '';
		for (const n of el.childNodes) if (n.nodeType === 3) text += n.textContent;
		text = text.replace(/\s+/g, ' ').trim();
		const node = {depth, tag: el.tagName.toLowerCase(), attributes: attrs,
			text: text.length > 200 ? text.slice(0, 200) + '…' : text,
			box: [Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)],
			visible: r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none',
			children: el.children.length};
		if ('value' in el && !(el.tagName === 'INPUT' && /^(password|file)$/i.test(el.type)) && typeof el.value === 'string') {
			node.value = el.value.length > 200 ? el.value.slice(0, 200) + '…' : el.value;
		}
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
	max := a.MaxElements
	if max <= 0 || max > maxInspectElements {
		max = 50
	}
	el, err := t.dom.Locate(ctx, *tgt)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := callOnValue(ctx, el, inspectJS, &out, max); err != nil {
		return nil, err
	}
	return out, nil
}

// diagnostics is a session's bounded ring of page events.
type diagnostics struct {
	mu      sync.Mutex
	events  []apitype.BrowserEvent
	dropped int
}

func (d *diagnostics) add(e apitype.BrowserEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.At = time.Now().UTC()
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
		if s.req.CaptureConsole {
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
		s.diag.add(apitype.BrowserEvent{Kind: "dialog", Level: string(e.Type)})
	}
}
