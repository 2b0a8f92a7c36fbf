package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// BenchmarkBrowserIsolatedOpen measures opening an isolated browser
// session (Chromium in a sandbox of its own) through the API, per
// runtime, against opening a context-mode session on the same daemon in
// the same run (the floor):
//
//   - warm: from the warm pool (--browser-isolated-warm 1); between
//     opens, untimed, the session is closed and the pool refilled.
//     Target: p50 <= 100 ms.
//   - cold: with no pool, a sandbox and Chromium started per open (no
//     target; it is what the pool saves).
func BenchmarkBrowserIsolatedOpen(b *testing.B) {
	testenv.NeedChromium(b)
	in := testenv.NewInternet(b)
	for _, rt := range isolatedRuntimes {
		for _, mode := range []struct {
			name string
			warm int
			max  int
		}{{"warm", 1, 50}, {"cold", 0, 10}} {
			b.Run(rt.name+"/"+mode.name, func(b *testing.B) {
				testenv.NeedRuntime(b, rt.name)
				d := testenv.StartDaemon(b, func(cfg *daemon.Config) {
					in.Apply(cfg)
					cfg.BrowserIsolatedRuntime = rt.name
					cfg.BrowserIsolatedWarm = mode.warm
				})
				needIsolated(b, d, rt.name)
				c := d.Client
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
				defer cancel()
				sandboxes := func() int {
					entries, _ := os.ReadDir(filepath.Join(d.DataDir, "sandboxes"))
					return len(entries)
				}
				// ready waits, untimed, until nothing but the pool's
				// members is left, and they are ready.
				ready := func() {
					deadline := time.Now().Add(2 * time.Minute)
					for {
						sys, err := c.System(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if sandboxes() == mode.warm && sys.Browser.IsolatedReady == mode.warm {
							return
						}
						if time.Now().After(deadline) {
							b.Fatalf("%d sandboxes and %d warm browsers ready, want the pool's %d", sandboxes(), sys.Browser.IsolatedReady, mode.warm)
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				open := func(req apitype.CreateBrowserSessionRequest) time.Duration {
					start := time.Now()
					s, err := c.OpenBrowserSession(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					took := time.Since(start)
					if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
						b.Fatal(err)
					}
					return took
				}
				for range 2 { // warm-up: the shared browser, the first sandboxes
					ready()
					open(apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeIsolated})
					open(apitype.CreateBrowserSessionRequest{})
				}
				n := min(b.N, mode.max)
				var got, floor []time.Duration
				b.ResetTimer()
				for range n {
					b.StopTimer()
					ready()
					b.StartTimer()
					got = append(got, open(apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeIsolated}))
					b.StopTimer()
					floor = append(floor, open(apitype.CreateBrowserSessionRequest{}))
					b.StartTimer()
				}
				b.StopTimer()
				target := ""
				if mode.warm > 0 {
					target = "p50 <= 100ms"
				}
				report(b, "isolated browser session open ("+rt.name+", "+mode.name+")", got, "context-mode session open", floor, target)
			})
		}
	}
}
