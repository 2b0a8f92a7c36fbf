package bench

import (
	"context"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// BenchmarkBrowserTraceClick measures a click through the API on a
// process session while a trace runs (each action is logged and followed
// by a JPEG capture for the trace), against the same click with no trace,
// interleaved in the same run on the same session: each iteration starts
// a trace, clicks (timed), stops the trace and deletes its ZIP (untimed),
// then clicks again without a trace (the floor).
func BenchmarkBrowserTraceClick(b *testing.B) {
	testenv.NeedChromium(b)
	d := testenv.StartDaemon(b, nil)
	base := benchPages(b)
	c := d.Client
	ctx := context.Background()
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeProcess})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.CloseBrowserSession(context.Background(), s.ID) })
	do := func(a apitype.BrowserAction) {
		if err := c.BrowserAction(ctx, s.ID, a, nil); err != nil {
			b.Fatalf("%s: %v", a.Op, err)
		}
	}
	do(apitype.BrowserAction{Op: "navigate", URL: base + "/form.html"})
	click := apitype.BrowserAction{Op: "click", Selector: "#go"}
	for range 3 { // warm-up
		do(click)
	}
	n := min(b.N, 200)
	var traced, plain []time.Duration
	b.ResetTimer()
	for range n {
		b.StopTimer()
		do(apitype.BrowserAction{Op: "traceStart"})
		b.StartTimer()
		start := time.Now()
		do(click)
		traced = append(traced, time.Since(start))
		b.StopTimer()
		var tr apitype.BrowserTrace
		if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "traceStop"}, &tr); err != nil {
			b.Fatal(err)
		}
		do(apitype.BrowserAction{Op: "downloadDelete", ArtifactID: tr.ID})
		start = time.Now()
		do(click)
		plain = append(plain, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "browser click while tracing (process mode)", traced, "the same click, no trace", plain, "")
}
