package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// livePages serves a page whose button turns the page another colour on
// each press (the input the live benchmark sends), and one that redraws
// all the time (for the CPU cost of a viewer).
func livePages(b *testing.B) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/press.html", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Press</title><body style="margin:0">
<div id=b style="position:absolute;left:0;top:0;width:400px;height:300px;background:#88f"
 onmousedown="this.style.background = this.style.background == 'red' ? 'blue' : 'red'"></div>`)
	})
	mux.HandleFunc("/animated.html", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Animated</title><p id=t style="font-size:40px"></p>
<script>setInterval(() => { t.textContent = Date.now(); }, 16)</script>`)
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv.URL
}

// drainFrames reads live messages until none has come for quiet.
func drainFrames(b *testing.B, l *client.LiveConn, quiet time.Duration) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		_, err := l.Next(ctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.Fatal(err)
		}
	}
}

// BenchmarkBrowserLiveInput measures a person's click through the live
// socket until the first frame that shows it arrives (the page is still
// before each click, so the first frame after it is the change), against
// the floor of the same click as a mouseClick action followed by a
// screenshot action, taken in the same run under the same lease.
func BenchmarkBrowserLiveInput(b *testing.B) {
	testenv.NeedChromium(b)
	d := testenv.StartDaemon(b, nil)
	c := d.Client
	ctx := context.Background()
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 800, Height: 600}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseBrowserSession(ctx, s.ID)
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: livePages(b) + "/press.html"}, nil); err != nil {
		b.Fatal(err)
	}
	lease, err := c.AcquireBrowserControl(ctx, s.ID, 2*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer c.ReleaseBrowserControl(ctx, s.ID, lease.Token)
	l, err := c.DialBrowserLive(ctx, s.ID)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	drainFrames(b, l, time.Second)

	n := min(b.N, 50)
	var got, floor []time.Duration
	click := apitype.LiveEvent{Kind: "mouse", Action: "click", X: 200, Y: 150}
	for i := range n {
		if i%10 == 0 {
			if _, err := c.RenewBrowserControl(ctx, s.ID, lease.Token, 2*time.Minute); err != nil {
				b.Fatal(err)
			}
		}
		drainFrames(b, l, 300*time.Millisecond) // still: the next frame is the click's
		start := time.Now()
		if err := l.Input(ctx, 0, lease.Token, click); err != nil {
			b.Fatal(err)
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := l.Next(rctx)
			cancel()
			if err != nil {
				b.Fatalf("no frame after the click: %v", err)
			}
			if m.Type == apitype.LiveMsgError {
				b.Fatalf("input refused: %+v", m.Error)
			}
			if m.Type == apitype.LiveMsgFrame {
				break
			}
		}
		got = append(got, time.Since(start))

		drainFrames(b, l, 300*time.Millisecond)
		start = time.Now()
		if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "mouseClick", X: 200, Y: 150, Lease: lease.Token}, nil); err != nil {
			b.Fatal(err)
		}
		var img apitype.Image
		if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "screenshot", Format: "jpeg", Quality: 70, Lease: lease.Token}, &img); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(start))
	}
	report(b, "browser live: input through the socket to the first frame showing it", got,
		"mouseClick action + JPEG screenshot action", floor, "within 1.5x")
}

// BenchmarkBrowserLiveViewerCPU prints the CPU time the daemon and its
// Chromium spend per second of viewing a page that redraws all the time:
// with no viewer (the page's own cost), one viewer and four.
func BenchmarkBrowserLiveViewerCPU(b *testing.B) {
	if b.N == 1 {
		return
	}
	testenv.NeedChromium(b)
	d := testenv.StartDaemonProcess(b, filepath.Join(testenv.ShortTempDir(b), "d"))
	c := d.Client
	ctx := context.Background()
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Viewport: &apitype.Viewport{Width: 800, Height: 600}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseBrowserSession(ctx, s.ID)
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: livePages(b) + "/animated.html"}, nil); err != nil {
		b.Fatal(err)
	}
	const window = 5 * time.Second
	measure := func(viewers int) (cpuPerSec float64, framesPerSec float64) {
		var conns []*client.LiveConn
		frames := make(chan int, viewers)
		vctx, stop := context.WithCancel(ctx)
		for range viewers {
			l, err := c.DialBrowserLive(ctx, s.ID)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, l)
			go func() {
				n := 0
				defer func() { frames <- n }()
				for {
					m, err := l.Next(vctx)
					if err != nil {
						return
					}
					if m.Type == apitype.LiveMsgFrame {
						n++
					}
				}
			}()
		}
		time.Sleep(time.Second) // settle
		pid := d.Cmd.Process.Pid
		before, start := treeCPU(pid), time.Now()
		time.Sleep(window)
		after, el := treeCPU(pid), time.Since(start)
		stop()
		total := 0
		for range viewers {
			total += <-frames
		}
		for _, l := range conns {
			_ = l.Close()
		}
		time.Sleep(500 * time.Millisecond)
		return (after - before).Seconds() / el.Seconds(), float64(total) / float64(max(viewers, 1)) / (el + time.Second).Seconds()
	}
	base, _ := measure(0)
	one, fps1 := measure(1)
	four, fps4 := measure(4)
	per1, per4 := one-base, (four-base)/4
	b.ReportMetric(per1*1000, "cpu-ms/s-1viewer")
	b.ReportMetric(per4*1000, "cpu-ms/s-per-viewer-of-4")
	b.ReportMetric(0, "ns/op")
	b.Logf("live view CPU (daemon + Chromium, a page redrawing every 16 ms): no viewer %.0f ms/s; 1 viewer +%.0f ms/s (%.1f frames/s); "+
		"4 viewers +%.0f ms/s each (%.1f frames/s each)", base*1000, per1*1000, fps1, per4*1000, fps4)
}

// treeCPU sums the user and system CPU time of pid and its descendants.
func treeCPU(pid int) time.Duration {
	children := map[int][]int{}
	cpu := map[int]time.Duration{}
	entries, _ := os.ReadDir("/proc")
	const hz = 100 // USER_HZ on Linux
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		children[ppid] = append(children[ppid], p)
		cpu[p] = time.Duration(utime+stime) * time.Second / hz
	}
	var total time.Duration
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		total += cpu[p]
		todo = append(todo, children[p]...)
	}
	return total
}
