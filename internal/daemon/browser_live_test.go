package daemon_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/testenv"
)

// livePage serves the page the live-view tests drive: a "Sign in" button
// that counts its clicks on the page, and a text field.
func livePage(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Live</title>
<button id=b style="position:absolute;left:20px;top:20px;width:200px;height:60px"
 onclick="n.textContent = +n.textContent + 1; document.body.style.background = 'rgb(' + (40 * +n.textContent % 255) + ',90,160)'">Sign in</button>
<p id=n style="position:absolute;left:20px;top:100px;font-size:40px">0</p>
<input id=f style="position:absolute;left:20px;top:200px;width:300px">`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// openLive opens a context-mode session on the live page.
func openLive(t *testing.T, c *client.Client, req apitype.CreateBrowserSessionRequest) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if req.Viewport == nil {
		req.Viewport = &apitype.Viewport{Width: 640, Height: 400}
	}
	s, err := c.OpenBrowserSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseBrowserSession(context.Background(), s.ID) })
	return s.ID
}

// nextFrame reads messages until a frame, within d; ok is false when none
// came.
func nextFrame(t *testing.T, l *client.LiveConn, d time.Duration) (apitype.LiveMessage, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		m, err := l.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return m, false
			}
			t.Fatalf("reading the live view: %v", err)
		}
		if m.Type == apitype.LiveMsgFrame {
			return m, true
		}
	}
}

// quiet reads frames until none comes for 3 s: the page is still (a
// loaded machine may pause a repaint for a second or more). It fails when
// frames keep coming for a minute.
func quiet(t *testing.T, l *client.LiveConn) apitype.LiveMessage {
	t.Helper()
	var last apitype.LiveMessage
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		m, ok := nextFrame(t, l, 3*time.Second)
		if !ok {
			return last
		}
		last = m
	}
	t.Fatal("frames kept coming for a minute from a page that does not change")
	return last
}

// reply reads messages until the ack or error of input id.
func reply(t *testing.T, l *client.LiveConn, id int64) apitype.LiveMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		m, err := l.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the answer to input %d: %v", id, err)
		}
		if (m.Type == apitype.LiveMsgAck || m.Type == apitype.LiveMsgError) && m.ID == id {
			return m
		}
	}
}

func refusal(m apitype.LiveMessage) string {
	if m.Error == nil {
		return m.Type
	}
	return m.Error.Reason
}

// TestBrowserLiveFrames: the live view sends JPEG frames with timestamps
// and viewport metadata; none while the page is still, a new one, showing
// the change, when the page changes; liveFrame answers a PNG with its time.
func TestBrowserLiveFrames(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := openLive(t, c, apitype.CreateBrowserSessionRequest{})
	act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: livePage(t)}, nil)

	l, err := c.DialBrowserLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, ok := nextFrame(t, l, time.Minute)
	if !ok {
		t.Fatal("no first frame within a minute of watching")
	}
	jpeg, err := base64.StdEncoding.DecodeString(first.Data)
	if err != nil || !bytes.HasPrefix(jpeg, []byte{0xff, 0xd8}) {
		t.Fatalf("frame data is not a JPEG: %v %x", err, jpeg[:min(4, len(jpeg))])
	}
	if v := first.Viewport; v == nil || v.Width != 640 || v.Height != 400 || v.DeviceScaleFactor != 1 || first.Seq < 1 {
		t.Errorf("frame metadata = seq %d viewport %+v, want 640x400", first.Seq, v)
	}
	if ts := time.UnixMilli(int64(first.Timestamp)); time.Since(ts) > time.Minute || time.Until(ts) > time.Minute {
		t.Errorf("frame timestamp %v is not now", ts)
	}

	// A still page sends nothing.
	still := quiet(t, l)
	if still.Data == "" {
		still = first
	}
	if m, ok := nextFrame(t, l, 2*time.Second); ok {
		t.Errorf("a frame (seq %d) came from a page that did not change", m.Seq)
	}
	// A change sends a frame that differs.
	before := time.Now()
	act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: `document.body.style.background = 'rgb(200,0,0)'; n.textContent = 'changed'; 1`}, nil)
	changed, ok := nextFrame(t, l, time.Minute)
	if !ok {
		t.Fatal("no frame within a minute of the page changing")
	}
	last := quiet(t, l)
	if last.Data == "" {
		last = changed
	}
	if last.Data == still.Data || last.Seq <= still.Seq {
		t.Errorf("the frame after the change (seq %d) is the same image as before it (seq %d)", last.Seq, still.Seq)
	}
	// A viewer who joins while the page is still gets its newest frame at
	// once: the page sends no other.
	l2, err := c.DialBrowserLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if joined, ok := nextFrame(t, l2, 30*time.Second); !ok || joined.Data != last.Data {
		t.Errorf("a second viewer of a still page got frame %v (seq %d), want the newest (seq %d)", ok, joined.Seq, last.Seq)
	}
	if ts := time.UnixMilli(int64(changed.Timestamp)); ts.Before(before.Add(-time.Second)) {
		t.Errorf("the changed frame's timestamp %v is before the change at %v", ts, before)
	}

	png, at, err := c.BrowserLiveFrame(ctx, id)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) || time.Since(at) > time.Minute {
		t.Errorf("BrowserLiveFrame = %d bytes, %v, %v; want a PNG taken now", len(png), at, err)
	}
	// The WebSocket route is a WebSocket only.
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/browser/sessions/"+id+"/live", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET .../live without an upgrade = %v, %v; want 400 websocket_required", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestBrowserLiveInputNeedsLease: input through the live socket is refused
// without a lease (control_not_held), with another's token (control_held)
// and after release; with the lease it reaches the page.
func TestBrowserLiveInputNeedsLease(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := openLive(t, c, apitype.CreateBrowserSessionRequest{})
	act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: livePage(t)}, nil)
	l, err := c.DialBrowserLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	click := apitype.LiveEvent{Kind: "mouse", Action: "click", X: 100, Y: 50}
	counter := func(lease string) string {
		var s string
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: "n.textContent", Lease: lease}, &s)
		return s
	}

	if err := l.Input(ctx, 1, "", click); err != nil {
		t.Fatal(err)
	}
	if m := reply(t, l, 1); refusal(m) != "control_not_held" {
		t.Errorf("input without a lease = %+v, want control_not_held", m)
	}
	lease, err := c.AcquireBrowserControl(ctx, id, 2*time.Minute) // the longest: the steps below run on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Input(ctx, 2, "bcl_forged", click); err != nil {
		t.Fatal(err)
	}
	if m := reply(t, l, 2); refusal(m) != "control_held" {
		t.Errorf("input with another token = %+v, want control_held", m)
	}
	if got := counter(lease.Token); got != "0" {
		t.Fatalf("refused clicks reached the page: counter %q", got)
	}
	// Positive control: with the lease, the same click lands, and text
	// goes where the focus is.
	if err := l.Input(ctx, 3, lease.Token, click); err != nil {
		t.Fatal(err)
	}
	if m := reply(t, l, 3); m.Type != apitype.LiveMsgAck {
		t.Fatalf("input with the lease = %+v, want an ack", m)
	}
	if got := counter(lease.Token); got != "1" {
		t.Errorf("counter after a leased click = %q, want 1", got)
	}
	for i, ev := range []apitype.LiveEvent{{Kind: "mouse", Action: "click", X: 100, Y: 210}, {Kind: "text", Text: "hello"},
		{Kind: "key", Key: "Backspace"}, {Kind: "text", Text: "!"}, {Kind: "wheel", X: 10, Y: 10, DeltaY: 40}} {
		if err := l.Input(ctx, int64(10+i), lease.Token, ev); err != nil {
			t.Fatal(err)
		}
		if m := reply(t, l, int64(10+i)); m.Type != apitype.LiveMsgAck {
			t.Fatalf("input %+v = %+v %+v, want an ack", ev, m, m.Error)
		}
	}
	var value string
	act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: "f.value", Lease: lease.Token}, &value)
	if value != "hell!" {
		t.Errorf("field after text, Backspace, text = %q, want hell!", value)
	}
	// Bad events are refused with the field named.
	for i, ev := range []apitype.LiveEvent{{Kind: "teleport"}, {Kind: "mouse", Action: "click", X: -1}, {Kind: "text"},
		{Kind: "key", Key: "Hyper+Q"}, {Kind: "mouse", Action: "click", Button: "fourth"}} {
		if err := l.Input(ctx, int64(20+i), lease.Token, ev); err != nil {
			t.Fatal(err)
		}
		if m := reply(t, l, int64(20+i)); refusal(m) != "invalid" {
			t.Errorf("input %+v = %+v, want invalid", ev, m)
		}
	}
	if err := c.ReleaseBrowserControl(ctx, id, lease.Token); err != nil {
		t.Fatal(err)
	}
	if err := l.Input(ctx, 30, lease.Token, click); err != nil {
		t.Fatal(err)
	}
	if m := reply(t, l, 30); refusal(m) != "control_not_held" {
		t.Errorf("input with a released lease = %+v, want control_not_held", m)
	}
	if got := counter(""); got != "1" {
		t.Errorf("counter after the refused clicks = %q, want 1", got)
	}
}

// TestBrowserControlLease: while a lease is held, actions without its
// token get 409 control_held, with it they run; GET control reports the
// mode and expiry, never the token; release and expiry hand control back.
func TestBrowserControlLease(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := openLive(t, c, apitype.CreateBrowserSessionRequest{})
	base := livePage(t)
	do := func(lease string) error {
		return c.BrowserAction(ctx, id, apitype.BrowserAction{Op: "navigate", URL: base, Lease: lease}, nil)
	}
	if err := do(""); err != nil {
		t.Fatalf("automation before any lease: %v", err)
	}
	if st, err := c.BrowserControlState(ctx, id); err != nil || st.Mode != "automation" || st.ExpiresAt != nil {
		t.Errorf("control before a lease = %+v, %v; want automation", st, err)
	}
	for _, ttl := range []time.Duration{500 * time.Millisecond, 121 * time.Second} {
		if _, err := c.AcquireBrowserControl(ctx, id, ttl); !errcode.Is(err, errcode.Invalid) {
			t.Errorf("acquire with ttl %s = %v, want invalid", ttl, err)
		}
	}

	// The lease runs 60 s from the server's now, which is between the
	// request and its answer: however slow the round trip.
	asked := time.Now()
	lease, err := c.AcquireBrowserControl(ctx, id, 60*time.Second)
	if err != nil || !strings.HasPrefix(lease.Token, "bcl_") || lease.ExpiresAt.Before(asked.Add(59*time.Second)) ||
		lease.ExpiresAt.After(time.Now().Add(61*time.Second)) {
		t.Fatalf("AcquireBrowserControl = %+v, %v", lease, err)
	}
	if err := do(""); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("automation during a lease = %v, want control_held", err)
	}
	if err := do("bcl_forged"); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("automation with a forged token = %v, want control_held", err)
	}
	if _, err := c.BrowserScreenshot(ctx, id, false); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("screenshot during a lease = %v, want control_held", err)
	}
	if err := do(lease.Token); err != nil {
		t.Errorf("action with the lease = %v", err)
	}
	shot, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/browser/sessions/"+id+"/screenshot", nil)
	shot.Header.Set("Authorization", "Bearer "+d.Token)
	shot.Header.Set(client.ControlLeaseHeader, lease.Token)
	if resp, err := http.DefaultClient.Do(shot); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("screenshot with the lease header = %v, %v; want a PNG", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := c.AcquireBrowserControl(ctx, id, 0); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("a second acquire = %v, want control_held", err)
	}
	// GET control: mode and expiry, never the token.
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/browser/sessions/"+id+"/control", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st apitype.BrowserControl
	if json.Unmarshal(body, &st) != nil || st.Mode != "human" || st.ExpiresAt == nil || !st.ExpiresAt.Equal(lease.ExpiresAt) {
		t.Errorf("GET control during a lease = %s, want human until %v", body, lease.ExpiresAt)
	}
	if bytes.Contains(body, []byte(lease.Token)) || bytes.Contains(body, []byte("bcl_")) {
		t.Errorf("GET control shows the token: %s", body)
	}
	if _, err := c.RenewBrowserControl(ctx, id, "bcl_forged", 0); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("renew with another token = %v, want control_held", err)
	}
	if renewed, err := c.RenewBrowserControl(ctx, id, lease.Token, 90*time.Second); err != nil || !renewed.ExpiresAt.After(lease.ExpiresAt) {
		t.Errorf("renew = %+v, %v; want a later expiry than %v", renewed, err, lease.ExpiresAt)
	}
	// A client's close honours the lease.
	if err := c.CloseBrowserSession(ctx, id); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("DELETE during a lease = %v, want control_held", err)
	}
	if err := c.ReleaseBrowserControl(ctx, id, "bcl_forged"); !errcode.Has(err, errcode.ControlHeld) {
		t.Errorf("release with another token = %v, want control_held", err)
	}

	// Release hands control back at once.
	if err := c.ReleaseBrowserControl(ctx, id, lease.Token); err != nil {
		t.Fatal(err)
	}
	if err := do(""); err != nil {
		t.Errorf("automation after release = %v", err)
	}
	if err := do(lease.Token); !errcode.Has(err, errcode.ControlNotHeld) {
		t.Errorf("an action with a released lease = %v, want control_not_held", err)
	}
	if err := c.ReleaseBrowserControl(ctx, id, lease.Token); !errcode.Has(err, errcode.ControlNotHeld) {
		t.Errorf("a second release = %v, want control_not_held", err)
	}

	// Expiry hands control back too.
	short, err := c.AcquireBrowserControl(ctx, id, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// An answer that came back before the expiry was decided before it; a
	// later one (a loaded machine) proves nothing either way.
	if err := do(""); !errcode.Has(err, errcode.ControlHeld) {
		if time.Now().Before(short.ExpiresAt) {
			t.Errorf("automation during the short lease = %v, want control_held", err)
		} else {
			t.Logf("automation answered after the short lease expired (%v): not checked", err)
		}
	}
	time.Sleep(time.Until(short.ExpiresAt) + 100*time.Millisecond)
	if err := do(""); err != nil {
		t.Errorf("automation after the lease expired = %v", err)
	}
	if st, err := c.BrowserControlState(ctx, id); err != nil || st.Mode != "automation" {
		t.Errorf("control after expiry = %+v, %v; want automation", st, err)
	}

	// Close with the token closes.
	again, err := c.AcquireBrowserControl(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CloseBrowserSessionLease(ctx, id, again.Token); err != nil {
		t.Errorf("DELETE with the lease = %v", err)
	}
	if _, err := c.BrowserSession(ctx, id); !errcode.Has(err, errcode.SessionNotFound) {
		t.Errorf("session after DELETE with the lease: %v, want session_not_found", err)
	}
}

// TestBrowserLiveIdle: neither watching nor polling frames keeps a session
// alive, and a held lease does not stop idle expiry; a session in use (the
// control) stays open over the same time.
func TestBrowserLiveIdle(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Long enough that opening the other two sessions, and one round of
	// the loop below, fit in it on a loaded machine.
	const idle = 15000
	watched := openLive(t, c, apitype.CreateBrowserSessionRequest{IdleTimeoutMS: idle})
	leased := openLive(t, c, apitype.CreateBrowserSessionRequest{IdleTimeoutMS: idle})
	used := openLive(t, c, apitype.CreateBrowserSessionRequest{IdleTimeoutMS: idle})
	if _, err := c.AcquireBrowserControl(ctx, leased, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	l, err := c.DialBrowserLive(ctx, watched)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The page animates, so frames flow all along.
	act(t, c, watched, apitype.BrowserAction{Op: "evaluate", Expression: `setInterval(() => document.title = document.body.textContent = Date.now(), 50); 1`}, nil)
	closed := make(chan error, 1)
	go func() {
		for {
			if _, err := l.Next(ctx); err != nil {
				closed <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	gone := func(id string) bool {
		_, err := c.BrowserSession(ctx, id)
		return errcode.Has(err, errcode.SessionNotFound)
	}
	for time.Now().Before(deadline) && !(gone(watched) && gone(leased)) {
		_ = c.BrowserAction(ctx, used, apitype.BrowserAction{Op: "evaluate", Expression: "1"}, nil)
		_, _, _ = c.BrowserLiveFrame(ctx, watched)
		time.Sleep(300 * time.Millisecond)
	}
	if !gone(watched) {
		t.Error("a watched (and polled) session outlived its idle timeout")
	}
	if !gone(leased) {
		t.Error("a session under a control lease outlived its idle timeout")
	}
	if gone(used) {
		t.Error("the session in use expired too: the probe cannot tell use from idleness")
	}
	select {
	case err := <-closed:
		if websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Errorf("the viewer of the expired session ended with %v, want going away", err)
		}
	case <-time.After(time.Minute):
		t.Error("the viewer of an expired session stays connected")
	}
}

// TestBrowserLiveViewerLimit: a session takes MaxViewers viewers; one
// more is 429 viewer_limit, and a place freed takes a viewer again.
func TestBrowserLiveViewerLimit(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := openLive(t, c, apitype.CreateBrowserSessionRequest{})
	var conns []*client.LiveConn
	for i := range 4 {
		l, err := c.DialBrowserLive(ctx, id)
		if err != nil {
			t.Fatalf("viewer %d: %v", i+1, err)
		}
		conns = append(conns, l)
	}
	if _, err := c.DialBrowserLive(ctx, id); !errcode.Has(err, errcode.ViewerLimit) {
		t.Errorf("a fifth viewer = %v, want viewer_limit", err)
	}
	_ = conns[0].Close()
	testenv.Eventually(t, time.Minute, "a freed place to take a viewer", func() bool {
		l, err := c.DialBrowserLive(ctx, id)
		if err == nil {
			conns[0] = l
		}
		return err == nil
	})
	for _, l := range conns {
		_ = l.Close()
	}
}

// TestBrowserLiveLink: a view link is a page with a strict CSP whose
// socket streams the session without the API key; a forged or foreign
// token is 401 live_link_invalid, and the key never appears in the URL.
func TestBrowserLiveLink(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := openLive(t, c, apitype.CreateBrowserSessionRequest{})
	link, err := c.BrowserLiveLink(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link.URL, d.URL+"/live/") || strings.Contains(link.URL, d.Token) || time.Until(link.ExpiresAt) > 11*time.Minute {
		t.Fatalf("link = %+v", link)
	}
	get := func(u string) (int, http.Header, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	code, h, body := get(link.URL)
	if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || !strings.Contains(body, `src="/live/`+strings.TrimPrefix(link.URL, d.URL+"/live/")+`/live.js"`) ||
		strings.Contains(body, "<script>") {
		t.Errorf("link page = %d %v\n%s", code, h, body)
	}
	if code, h, body := get(link.URL + "/live.js"); code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/javascript") || !strings.Contains(body, "WebSocket") {
		t.Errorf("link script = %d %v", code, h)
	}
	wsURL := "ws" + strings.TrimPrefix(link.URL, "http") + "/ws"
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {d.URL}}})
	if err != nil {
		t.Fatalf("the link's socket: %v", err)
	}
	conn.SetReadLimit(32 << 20)
	_, b, err := conn.Read(ctx)
	var m apitype.LiveMessage
	if err != nil || json.Unmarshal(b, &m) != nil || m.Type != apitype.LiveMsgFrame {
		t.Errorf("first message through the link = %.100s, %v; want a frame", b, err)
	}
	conn.CloseNow()
	// Another origin's page may not open the link's socket.
	if _, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("the link's socket from another origin = %v, %v; want 403", resp, err)
	}

	// The page itself, in a real browser: it shows the session's frames
	// under its CSP, sends nothing without a lease, and a person who
	// pastes the lease clicks through it.
	act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: livePage(t)}, nil)
	watcher := openLive(t, c, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 1024, Height: 768}})
	act(t, c, watcher, apitype.BrowserAction{Op: "navigate", URL: link.URL}, nil)
	act(t, c, watcher, apitype.BrowserAction{Op: "waitFor", Target: &apitype.BrowserTarget{Selector: "#frame[src^='data:image/jpeg']"}, State: "attached",
		TimeoutMS: 55000}, nil)
	if st := evalString(t, c, watcher, "document.getElementById('status').textContent"); !strings.HasPrefix(st, "live · frame") {
		t.Errorf("the link page's status = %q, want live frames", st)
	}
	// The point (100, 50) of the watched page, on the watcher's screen.
	var at [2]float64
	act(t, c, watcher, apitype.BrowserAction{Op: "evaluate", Expression: `(() => { const r = document.getElementById('frame').getBoundingClientRect();
		return [r.left + 100 * r.width / 640, r.top + 50 * r.height / 400]; })()`}, &at)
	clickThrough := func() {
		act(t, c, watcher, apitype.BrowserAction{Op: "mouseClick", X: at[0], Y: at[1]}, nil)
	}
	counter := func(lease string) string {
		var s string
		act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: "n.textContent", Lease: lease}, &s)
		return s
	}
	clickThrough()
	time.Sleep(time.Second) // the page's input is fire and forget: give a wrong one time to land
	if got := counter(""); got != "0" {
		t.Errorf("a click on the link page without a lease reached the page: counter %q", got)
	}
	lease, err := c.AcquireBrowserControl(ctx, id, 2*time.Minute) // the longest: the steps below run on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	act(t, c, watcher, apitype.BrowserAction{Op: "fill", Selector: "#lease", Value: lease.Token}, nil)
	clickThrough()
	var got string
	testenv.Eventually(t, time.Minute, "a click on the link page with the lease pasted to reach the page", func() bool {
		got = counter(lease.Token)
		return got != "0"
	})
	if got != "1" {
		t.Errorf("a click on the link page with the lease pasted: counter %q, want 1", got)
	}
	if err := c.ReleaseBrowserControl(ctx, id, lease.Token); err != nil {
		t.Fatal(err)
	}

	other := openLive(t, c, apitype.CreateBrowserSessionRequest{})
	tok := strings.TrimPrefix(link.URL, d.URL+"/live/")
	parts := strings.Split(tok, ".")
	for name, bad := range map[string]string{
		"forged signature":  parts[0] + "." + parts[1] + "." + strings.Repeat("a", len(parts[2])),
		"another session":   other + "." + parts[1] + "." + parts[2],
		"a later expiry":    parts[0] + "." + fmt.Sprint(time.Now().Add(time.Hour).Unix()) + "." + parts[2],
		"not a token":       "nothing",
		"expired, resigned": parts[0] + ".1." + parts[2],
	} {
		if code, _, body := get(d.URL + "/live/" + bad); code != http.StatusUnauthorized || !strings.Contains(body, "live_link_invalid") {
			t.Errorf("%s: GET = %d %s, want 401 live_link_invalid", name, code, body)
		}
		if _, resp, err := websocket.Dial(ctx, d.URL+"/live/"+bad+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {d.URL}}}); err == nil ||
			resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: socket = %v, %v; want 401", name, resp, err)
		}
	}
}

// TestBrowserCDPControlLease: while a lease is held, a CDP client's input
// and navigation get a CDP error carrying control_held and do not reach
// the page, unless its connection presented the lease; reads still work;
// after release the same call goes through.
func TestBrowserCDPControlLease(t *testing.T) {
	t.Parallel()
	needChromium(t)
	d := testenv.StartDaemon(t, nil)
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := openLive(t, c, apitype.CreateBrowserSessionRequest{Mode: "process"})
	base := livePage(t)
	act(t, c, id, apitype.BrowserAction{Op: "navigate", URL: base}, nil)

	type cdpConn struct {
		conn *websocket.Conn
		sid  string
		next int
	}
	dial := func(lease string) *cdpConn {
		h := http.Header{"Authorization": {"Bearer " + d.Token}}
		if lease != "" {
			h.Set(client.ControlLeaseHeader, lease)
		}
		conn, _, err := websocket.Dial(ctx, strings.Replace(d.URL, "http://", "ws://", 1)+"/v1/browser/sessions/"+id+"/cdp",
			&websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadLimit(64 << 20)
		t.Cleanup(func() { conn.CloseNow() })
		return &cdpConn{conn: conn}
	}
	call := func(cc *cdpConn, method string, params any) map[string]any {
		cc.next++
		msg := map[string]any{"id": cc.next, "method": method, "params": params}
		if cc.sid != "" && !strings.HasPrefix(method, "Target.") {
			msg["sessionId"] = cc.sid
		}
		b, _ := json.Marshal(msg)
		if err := cc.conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := cc.conn.Read(ctx)
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var r map[string]any
			_ = json.Unmarshal(b, &r)
			if r["id"] == float64(cc.next) {
				return r
			}
		}
	}
	attach := func(cc *cdpConn) {
		targets := call(cc, "Target.getTargets", map[string]any{})
		for _, ti := range targets["result"].(map[string]any)["targetInfos"].([]any) {
			if m := ti.(map[string]any); m["type"] == "page" {
				r := call(cc, "Target.attachToTarget", map[string]any{"targetId": m["targetId"], "flatten": true})
				cc.sid = r["result"].(map[string]any)["sessionId"].(string)
				return
			}
		}
		t.Fatal("no page target")
	}
	errMsg := func(r map[string]any) string {
		if e, ok := r["error"].(map[string]any); ok {
			return fmt.Sprint(e["message"])
		}
		return ""
	}
	plain := dial("")
	attach(plain)
	lease, err := c.AcquireBrowserControl(ctx, id, 2*time.Minute) // the longest: the steps below run on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	withLease := dial(lease.Token)
	attach(withLease)
	stale := dial("bcl_forged")
	attach(stale)

	click := map[string]any{"type": "mousePressed", "x": 100, "y": 50, "button": "left", "clickCount": 1}
	release := map[string]any{"type": "mouseReleased", "x": 100, "y": 50, "button": "left", "clickCount": 1}
	for _, cc := range []*cdpConn{plain, stale} {
		for _, m := range []struct {
			method string
			params any
		}{{"Input.dispatchMouseEvent", click}, {"Input.dispatchMouseEvent", release}, {"Input.insertText", map[string]any{"text": "x"}},
			{"Page.navigate", map[string]any{"url": "about:blank"}}, {"Page.reload", map[string]any{}}} {
			r := call(cc, m.method, m.params)
			if msg := errMsg(r); !strings.HasPrefix(msg, "control_held") || r["sessionId"] != cc.sid {
				t.Errorf("%s during a lease = %v, want a CDP error control_held in the page's session", m.method, r)
			}
		}
		// Reads are not gated.
		if r := call(cc, "Runtime.evaluate", map[string]any{"expression": "n.textContent", "returnByValue": true}); errMsg(r) != "" {
			t.Errorf("Runtime.evaluate during a lease = %v", r)
		}
	}
	var counter string
	act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: "n.textContent + location.href", Lease: lease.Token}, &counter)
	if counter != "0"+base+"/" {
		t.Errorf("page after refused CDP input = %q, want 0 and still %s", counter, base)
	}
	// Positive control: the connection that presented the lease clicks.
	for _, p := range []any{click, release} {
		if r := call(withLease, "Input.dispatchMouseEvent", p); errMsg(r) != "" {
			t.Errorf("Input with the lease = %v", r)
		}
	}
	act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: "n.textContent", Lease: lease.Token}, &counter)
	if counter != "1" {
		t.Errorf("counter after the leased CDP click = %q, want 1", counter)
	}
	// After release the plain connection clicks too.
	if err := c.ReleaseBrowserControl(ctx, id, lease.Token); err != nil {
		t.Fatal(err)
	}
	for _, p := range []any{click, release} {
		if r := call(plain, "Input.dispatchMouseEvent", p); errMsg(r) != "" {
			t.Errorf("Input after release = %v", r)
		}
	}
	act(t, c, id, apitype.BrowserAction{Op: "evaluate", Expression: "n.textContent"}, &counter)
	if counter != "2" {
		t.Errorf("counter after the click following release = %q, want 2", counter)
	}
}
