package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// maxLiveOpens bounds the timed live view opens of the benchmark below.
const maxLiveOpens = 30

// BenchmarkDashboardLiveFirstFrame measures the live view page's first
// frame after open, as a person's browser gets it from the dashboard: the
// session's Live view button (POST /ui/browsers/{id}/live, which mints a
// view link and redirects), the daemon's live page it lands on and its
// script, then the page's WebSocket until the first frame message. A
// second line times the dashboard session page's own live panel: the page,
// then its first polled frame (GET /ui/browsers/{id}/frame). The floor is
// one screenshot through the API (GET /v1/browser/sessions/{id}/screenshot).
func BenchmarkDashboardLiveFirstFrame(b *testing.B) {
	testenv.OnePass(b)
	testenv.NeedChromium(b)
	// Go's cookie jar sends no Secure cookie over http://127.0.0.1.
	d := testenv.StartDaemon(b, func(cfg *daemon.Config) { cfg.Dashboard.InsecureCookies = true })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := d.Client
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 800, Height: 600}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseBrowserSession(ctx, s.ID)
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: livePages(b) + "/press.html"}, nil); err != nil {
		b.Fatal(err)
	}

	hc := signInDashboard(ctx, b, d)
	pageURL := d.URL + "/ui/browsers/" + s.ID
	get := func(u string) ([]byte, error) {
		resp, err := hc.Get(u)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s = %d: %.300s", u, resp.StatusCode, body)
		}
		return body, nil
	}
	page, err := get(pageURL)
	if err != nil {
		b.Fatal(err)
	}
	m := csrfField.FindSubmatch(page)
	if m == nil {
		b.Fatalf("the session page has no csrf field: %.300s", page)
	}
	csrf := string(m[1])

	open := func() error {
		resp, err := hc.PostForm(pageURL+"/live", url.Values{"csrf": {csrf}})
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		live := resp.Request.URL
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(live.Path, "/live/") {
			return fmt.Errorf("Live view = %d at %s, want the live page", resp.StatusCode, live)
		}
		if _, err := get(d.URL + live.Path + "/live.js"); err != nil {
			return err
		}
		h := http.Header{}
		h.Set("Origin", d.URL)
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+live.Path+"/ws", &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			return fmt.Errorf("dialing the live page's socket: %w", err)
		}
		// A graceful close: the daemon's viewer leaves, and the next open
		// starts a screencast of its own (whose first frame is the page's
		// last), as a person's first look does.
		defer ws.Close(websocket.StatusNormalClosure, "")
		ws.SetReadLimit(16 << 20)
		for {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, msg, err := ws.Read(rctx)
			cancel()
			if err != nil {
				return fmt.Errorf("no frame after open: %w", err)
			}
			var lm apitype.LiveMessage
			if err := json.Unmarshal(msg, &lm); err != nil {
				return err
			}
			if lm.Type == apitype.LiveMsgFrame {
				return nil
			}
		}
	}
	panel := func() error {
		if _, err := get(pageURL); err != nil {
			return err
		}
		png, err := get(pageURL + "/frame")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(png), "\x89PNG") {
			return fmt.Errorf("the frame is not a PNG: %.8q", png)
		}
		return nil
	}
	shot := func() error {
		_, err := c.BrowserScreenshot(ctx, s.ID, false)
		return err
	}
	for range 3 { // warm up, untimed
		time.Sleep(300 * time.Millisecond)
		if err := open(); err != nil {
			b.Fatal(err)
		}
		if err := panel(); err != nil {
			b.Fatal(err)
		}
	}

	n := min(b.N, maxLiveOpens)
	b.ResetTimer()
	got := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(300 * time.Millisecond) // untimed: the last viewer's leave ends its screencast
		start := time.Now()
		if err := open(); err != nil {
			b.Fatal(err)
		}
		got = append(got, time.Since(start))
	}
	b.StopTimer()
	panels := measure(b, n, panel)
	floor := measure(b, n, shot)
	report(b, "dashboard live view page: Live view to the first frame", got,
		"GET /v1/browser/sessions/{id}/screenshot", floor, "")
	b.ReportMetric(ms(percentile(panels, 50)), "panel-p50-ms")
	b.ReportMetric(ms(percentile(panels, 99)), "panel-p99-ms")
	reportFloor(b, "panel-", "GET /v1/browser/sessions/{id}/screenshot", floor, panels)
	logSummary(b, fmt.Sprintf("  dashboard session page + its first polled frame: p50 %.2fms p99 %.2fms",
		ms(percentile(panels, 50)), ms(percentile(panels, 99))))
}
