package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/jpeg"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
)

// Live view: people watch a session as it runs. One Page.startScreencast
// per session runs while at least one viewer watches, on the session's
// current page (it follows a page switch); Chromium sends a frame only
// when the page is drawn anew, so a still page sends none. Frames are
// acknowledged no faster than maxLiveFPS, which bounds the rate at the
// source, and fanned out to each viewer through a one-frame mailbox that
// drops the older frame: a slow viewer skips frames, nothing queues.
// Watching is not use: it never moves the session's idle clock.

// Live-view bounds.
const (
	MaxViewers         = 4  // viewers per session; more is 429 viewer_limit
	maxLiveFPS         = 10 // frames per second, at most
	liveJPEGQuality    = 70
	liveMaxSide        = 1920 // frames are scaled down to fit
	maxLiveMessage     = 8 << 10
	maxLiveText        = 4 << 10
	liveInputPerSec    = 100 // input messages per second per connection
	liveFollowEvery    = 250 * time.Millisecond
	liveWriteTimeout   = 10 * time.Second
	liveInputTimeout   = 5 * time.Second
	liveCaptureTimeout = 10 * time.Second
)

// liveHub is a session's live viewers and its screencast.
type liveHub struct {
	// mu guards viewers, stop, done and seq. Lock order: Session.mu is
	// never taken under it.
	mu      sync.Mutex
	viewers map[*viewer]struct{}
	stop    context.CancelFunc // ends the screencast; nil when none runs
	done    chan struct{}      // closed when the last screencast ended
	seq     int64
	// last is the newest frame message of the running screencast: a viewer
	// who joins it gets it at once (a still page sends no other).
	last []byte

	// capture is the one PNG capture of liveFrame at a time; last is the
	// latest PNG and when it was taken (guarded by pngMu).
	capture chan struct{}
	pngMu   sync.Mutex
	png     []byte
	pngAt   time.Time
}

// viewer is one live connection.
type viewer struct {
	frames chan []byte   // one encoded frame message; the newest wins
	gone   chan struct{} // closed when the session ends
}

// join adds a viewer, starting the screencast for the first.
func (s *Session) join() (*viewer, error) {
	h := &s.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.viewers) >= MaxViewers {
		return nil, errcode.ViewerLimit.New("browser session %s has %d live viewers, the maximum; close one first", s.id, MaxViewers)
	}
	if h.viewers == nil {
		h.viewers = map[*viewer]struct{}{}
	}
	v := &viewer{frames: make(chan []byte, 1), gone: make(chan struct{})}
	h.viewers[v] = struct{}{}
	if h.stop != nil && h.last != nil {
		v.frames <- h.last
	}
	if h.stop == nil {
		ctx, stop := context.WithCancel(context.Background())
		prev, done := h.done, make(chan struct{})
		h.stop, h.done = stop, done
		go func() {
			defer close(done)
			if prev != nil {
				<-prev // the previous screencast has stopped its page
			}
			s.screencast(ctx)
		}()
	}
	return v, nil
}

// leave removes a viewer; the last one stops the screencast and waits
// for it to end.
func (s *Session) leave(v *viewer) {
	h := &s.live
	h.mu.Lock()
	delete(h.viewers, v)
	var done chan struct{}
	if len(h.viewers) == 0 && h.stop != nil {
		h.stop()
		h.stop, done, h.last = nil, h.done, nil
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// fanOut gives a frame to every viewer, replacing one it has not taken.
func (h *liveHub) fanOut(msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = msg
	for v := range h.viewers {
		select {
		case v.frames <- msg:
		default:
			select {
			case <-v.frames: // the viewer is behind: it skips that frame
			default:
			}
			select {
			case v.frames <- msg:
			default:
			}
		}
	}
}

// ended tells every viewer the session has ended.
func (h *liveHub) ended() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for v := range h.viewers {
		select {
		case <-v.gone:
		default:
			close(v.gone)
		}
	}
}

// screencast streams the session's current page until ctx ends or the
// session does.
func (s *Session) screencast(ctx context.Context) {
	for ctx.Err() == nil {
		if s.State() != apitype.BrowserOpen {
			s.live.ended()
			return
		}
		t, err := s.currentTab()
		if err == nil {
			err = s.castTab(ctx, t)
		}
		if err != nil && ctx.Err() == nil {
			s.m.log.Debug("live screencast", "session_id", s.id, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(liveFollowEvery):
			}
		}
	}
}

// castTab screencasts page t until ctx ends, the session's current page
// is another, or the session ends.
func (s *Session) castTab(ctx context.Context, t *tab) error {
	cctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	// At most one frame is unacknowledged (Chromium sends no other until
	// the ack), so the mailbox never overflows.
	frames := make(chan *page.EventScreencastFrame, 2)
	if err := chromedp.Listen(cctx, func(ev any) {
		if f, ok := ev.(*page.EventScreencastFrame); ok {
			select {
			case frames <- f:
			default:
			}
		}
	}); err != nil {
		return err
	}
	call := func(f func(context.Context) error) error {
		c, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		defer cancel()
		return f(c)
	}
	q, last := int64(liveJPEGQuality), true
	if err := call(func(c context.Context) error {
		_, err := chromedp.Call(c, page.StartScreencast, page.StartScreencastParams{Format: page.StartScreencastFormatJpeg,
			Quality: &q, MaxWidth: liveMaxSide, MaxHeight: liveMaxSide, EveryNthFrame: 1, MaxFramesInFlight: 1, SendLastFrame: &last})
		return err
	}); err != nil {
		return err
	}
	defer func() {
		_ = call(func(c context.Context) error {
			_, err := chromedp.Call(c, page.StopScreencast, cdp.Empty{})
			return err
		})
	}()
	follow := time.NewTicker(liveFollowEvery)
	defer follow.Stop()
	var sent time.Time
	for {
		select {
		case <-cctx.Done():
			return cctx.Err() // the viewers left (not logged), or the page closed
		case <-follow.C:
			cur, err := s.currentTab()
			if err != nil || cur != t || s.State() != apitype.BrowserOpen {
				return nil // the next round follows the page, or ends
			}
		case f := <-frames:
			s.live.publish(f)
			// Pace the acknowledgement: Chromium draws the next frame
			// only after it, so this bounds the frame rate at the source.
			if wait := time.Second/maxLiveFPS - time.Since(sent); wait > 0 {
				select {
				case <-cctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			sent = time.Now()
			if err := call(func(c context.Context) error {
				_, err := chromedp.Call(c, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: f.SessionID})
				return err
			}); err != nil {
				return err
			}
		}
	}
}

// publish encodes a frame once and fans it out.
func (h *liveHub) publish(f *page.EventScreencastFrame) {
	h.mu.Lock()
	h.seq++
	seq := h.seq
	h.mu.Unlock()
	msg := apitype.LiveMessage{Type: apitype.LiveMsgFrame, Data: base64.StdEncoding.EncodeToString(f.Data), Seq: seq,
		Timestamp: float64(time.Now().UnixMilli())}
	if md := f.Metadata; md != nil {
		if md.Timestamp > 0 {
			msg.Timestamp = float64(int64(md.Timestamp.Float64() * 1000))
		}
		msg.Viewport = &apitype.LiveViewport{Width: md.DeviceWidth, Height: md.DeviceHeight, DeviceScaleFactor: 1,
			ScrollX: md.ScrollOffsetX, ScrollY: md.ScrollOffsetY}
		// Frame pixels per CSS pixel: what maps a point on the image to
		// the page (below 1 when the frame was scaled down to fit).
		if cfg, err := jpeg.DecodeConfig(bytes.NewReader(f.Data)); err == nil && md.DeviceWidth > 0 {
			msg.Viewport.DeviceScaleFactor = float64(cfg.Width) / md.DeviceWidth
		}
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return
	}
	h.fanOut(b)
}

// ServeLive serves r's WebSocket as a live viewer of session id: frames
// out, input events in (dispatched only with the session's live lease).
// sameOrigin refuses a handshake from a page of another origin (the view
// link's page); API clients send their key instead. An error is returned
// before the upgrade only.
func (m *Manager) ServeLive(w http.ResponseWriter, r *http.Request, id string, sameOrigin bool) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	if err := s.alive(); err != nil {
		return err
	}
	v, err := s.join()
	if err != nil {
		return err
	}
	defer s.leave(v)
	if err := s.alive(); err != nil {
		return err // closed meanwhile: its screencast may have told its viewers already
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: !sameOrigin})
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxLiveMessage)
	ctx, stop := context.WithCancel(r.Context())
	replies := make(chan []byte, 16)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		defer stop()
		s.readLive(ctx, conn, replies)
	})
	write := func(b []byte) error {
		c, cancel := context.WithTimeout(ctx, liveWriteTimeout)
		defer cancel()
		return conn.Write(c, websocket.MessageText, b)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.gone:
			conn.Close(websocket.StatusGoingAway, "session ended")
			return nil
		case b := <-v.frames:
			if write(b) != nil {
				return nil
			}
		case b := <-replies:
			if write(b) != nil {
				return nil
			}
		}
	}
}

// readLive reads a viewer's messages until the connection ends, and
// answers each input with an ack or an error on replies.
func (s *Session) readLive(ctx context.Context, conn *websocket.Conn, replies chan<- []byte) {
	tokens, refill := float64(liveInputPerSec), time.Now()
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var msg apitype.LiveMessage
		err = nil
		switch {
		case typ != websocket.MessageText:
			err = errcode.BodyInvalid.New("live messages are JSON text")
		case json.Unmarshal(b, &msg) != nil:
			err = errcode.BodyInvalid.New("a live message must be a JSON object")
		case msg.Type != apitype.LiveMsgInput || msg.Event == nil:
			err = errcode.BodyInvalid.New(`the only message a viewer sends is {"type":"input","lease":...,"event":{...}}`)
		}
		if err == nil {
			now := time.Now()
			tokens = min(float64(liveInputPerSec), tokens+now.Sub(refill).Seconds()*liveInputPerSec)
			refill = now
			if tokens < 1 {
				err = errcode.RateLimited.New("at most %d input events a second", liveInputPerSec)
			} else {
				tokens--
				err = s.input(ctx, msg.Lease, *msg.Event)
			}
		}
		reply := apitype.LiveMessage{Type: apitype.LiveMsgAck, ID: msg.ID}
		if err != nil {
			reply.Type = apitype.LiveMsgError
			var ce *errcode.Error
			if !errors.As(err, &ce) {
				ce = errcode.Wrap(errcode.Unavailable, err, "dispatching the input failed")
			}
			reply.Error = &apitype.LiveRefuse{Code: string(ce.Code), Reason: ce.Reason, Message: ce.Message}
			if ce.Reason == "" {
				reply.Error.Reason = string(ce.Code)
			}
		} else if msg.ID == 0 {
			continue // nothing asked for an ack
		}
		out, _ := json.Marshal(reply)
		select {
		case replies <- out:
		case <-ctx.Done():
			return
		}
	}
}

// LiveInput dispatches one input event to session id's current page, for
// the holder of its lease (control_not_held without one, control_held
// with another's). It counts as use of the session.
func (m *Manager) LiveInput(ctx context.Context, id, lease string, ev apitype.LiveEvent) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	return s.input(ctx, lease, ev)
}

func (s *Session) input(ctx context.Context, lease string, ev apitype.LiveEvent) error {
	if err := s.alive(); err != nil {
		return err
	}
	if err := s.holder(lease); err != nil {
		return err
	}
	t, err := s.currentTab()
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(t.ctx, liveInputTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	s.touch()
	if err := dispatchInput(c, ev); err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			return err
		}
		return errcode.Wrap(errcode.Unavailable, err, "dispatching the %s input failed", ev.Kind)
	}
	return nil
}

var liveButtons = map[string]input.MouseButton{"": input.MouseButtonLeft, "left": input.MouseButtonLeft,
	"middle": input.MouseButtonMiddle, "right": input.MouseButtonRight}

var buttonBits = map[input.MouseButton]int64{input.MouseButtonLeft: 1, input.MouseButtonRight: 2, input.MouseButtonMiddle: 4}

// dispatchInput sends one live input event to the page of ctx.
func dispatchInput(ctx context.Context, ev apitype.LiveEvent) error {
	bad := func(field, why string) error { return errcode.InvalidFields(map[string]string{"event." + field: why}) }
	if ev.X < 0 || ev.Y < 0 || ev.X > 1e5 || ev.Y > 1e5 {
		return bad("x", "x and y must be between 0 and 100000")
	}
	if ev.Modifiers < 0 || ev.Modifiers > 15 {
		return bad("modifiers", "a bit field of Alt=1, Ctrl=2, Meta=4, Shift=8")
	}
	mouseEv := func(typ input.DispatchMouseEventType, b input.MouseButton, count int64) error {
		p := input.DispatchMouseEventParams{Type: typ, X: ev.X, Y: ev.Y, Modifiers: ev.Modifiers, Button: b, ClickCount: count}
		if typ == input.DispatchMouseEventTypeMousePressed {
			p.Buttons = buttonBits[b]
		}
		_, err := chromedp.Call(ctx, input.DispatchMouseEvent, p)
		return err
	}
	switch ev.Kind {
	case "mouse":
		b, ok := liveButtons[ev.Button]
		if !ok {
			return bad("button", "must be left, middle or right")
		}
		switch ev.Action {
		case "move":
			return mouseEv(input.DispatchMouseEventTypeMouseMoved, input.MouseButtonNone, 0)
		case "down":
			return mouseEv(input.DispatchMouseEventTypeMousePressed, b, 1)
		case "up":
			return mouseEv(input.DispatchMouseEventTypeMouseReleased, b, 1)
		case "click":
			if err := mouseEv(input.DispatchMouseEventTypeMouseMoved, input.MouseButtonNone, 0); err != nil {
				return err
			}
			if err := mouseEv(input.DispatchMouseEventTypeMousePressed, b, 1); err != nil {
				return err
			}
			return mouseEv(input.DispatchMouseEventTypeMouseReleased, b, 1)
		}
		return bad("action", "must be move, down, up or click")
	case "wheel":
		if abs(ev.DeltaX) > 1e5 || abs(ev.DeltaY) > 1e5 {
			return bad("delta_y", "deltas must be within ±100000")
		}
		_, err := chromedp.Call(ctx, dispatchWheel, wheelParams{Type: input.DispatchMouseEventTypeMouseWheel,
			X: ev.X, Y: ev.Y, DeltaX: ev.DeltaX, DeltaY: ev.DeltaY, Modifiers: ev.Modifiers})
		return err
	case "key":
		if ev.Key == "" || len(ev.Key) > 64 || strings.ContainsAny(ev.Key, "\x00") {
			return bad("key", "a key or chord such as Enter, a or Control+A")
		}
		if err := press(ctx, ev.Key); err != nil {
			var ce *errcode.Error
			if errors.As(err, &ce) && ce.Code == errcode.Invalid {
				return bad("key", ce.Message)
			}
			return err
		}
		return nil
	case "text":
		if ev.Text == "" || len(ev.Text) > maxLiveText {
			return bad("text", "1 to 4096 bytes of text")
		}
		_, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: ev.Text})
		return err
	}
	return bad("kind", "must be mouse, wheel, key or text")
}

// wheelParams is Input.dispatchMouseEvent for a wheel: Chromium wants
// both deltas, which cdproto's params leave out when they are 0.
type wheelParams struct {
	Type      input.DispatchMouseEventType `json:"type"`
	X         float64                      `json:"x"`
	Y         float64                      `json:"y"`
	DeltaX    float64                      `json:"deltaX"`
	DeltaY    float64                      `json:"deltaY"`
	Modifiers int64                        `json:"modifiers"`
}

var dispatchWheel = cdp.Command[wheelParams, cdp.Empty]{Method: input.CommandDispatchMouseEvent}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// LiveFrame answers a PNG of session id's current page and when it was
// taken, for clients that poll. One capture runs at a time per session:
// a request meanwhile gets the latest frame (older, as its time says)
// rather than queueing another. It does not count as use.
func (m *Manager) LiveFrame(ctx context.Context, id string) ([]byte, time.Time, error) {
	s, err := m.Get(id)
	if err != nil {
		return nil, time.Time{}, err
	}
	if err := s.alive(); err != nil {
		return nil, time.Time{}, err
	}
	h := &s.live
	h.pngMu.Lock()
	if h.capture == nil {
		h.capture = make(chan struct{}, 1)
	}
	sem := h.capture
	h.pngMu.Unlock()
	latest := func() ([]byte, time.Time, bool) {
		h.pngMu.Lock()
		defer h.pngMu.Unlock()
		return h.png, h.pngAt, h.png != nil
	}
	select {
	case sem <- struct{}{}:
	default:
		if b, at, ok := latest(); ok {
			return b, at, nil // a capture is running: skip, do not queue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, time.Time{}, errcode.Wrap(errcode.Canceled, ctx.Err(), "liveFrame was canceled")
		}
	}
	defer func() { <-sem }()
	t, err := s.currentTab()
	if err != nil {
		return nil, time.Time{}, err
	}
	c, cancel := context.WithTimeout(t.ctx, liveCaptureTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	res, err := chromedp.Call(c, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng})
	if err != nil {
		if aerr := s.alive(); aerr != nil {
			return nil, time.Time{}, aerr
		}
		return nil, time.Time{}, actionError("liveFrame", err, c, liveCaptureTimeout)
	}
	at := time.Now().UTC()
	h.pngMu.Lock()
	h.png, h.pngAt = res.Data, at
	h.pngMu.Unlock()
	return res.Data, at, nil
}
