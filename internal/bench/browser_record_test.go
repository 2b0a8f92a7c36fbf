package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// BenchmarkBrowserRecordingCost measures what a recording costs the
// actions of its session: the same action loop (an evaluate round trip, a
// click) with a recording capturing every 100 ms (fifty times the default
// rate, to make the cost visible) and without one, interleaved in phases
// on one session. The floor is the loop without a
// recording. Phases last 500 ms, five capture intervals, so that the
// timed actions meet the captures; b.N sets the number of phases (2-20,
// b.N/50). Target: p50 ratio <= 1.05.
func BenchmarkBrowserRecordingCost(b *testing.B) {
	testenv.NeedChromium(b)
	d := testenv.StartDaemon(b, nil)
	base := benchPages(b)
	c := d.Client
	ctx := context.Background()
	s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseBrowserSession(ctx, s.ID)
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/form.html"}, nil); err != nil {
		b.Fatal(err)
	}
	for _, op := range []struct {
		what string
		a    apitype.BrowserAction
	}{
		{"evaluate", apitype.BrowserAction{Op: "evaluate", Expression: "1+1"}},
		{"click", apitype.BrowserAction{Op: "click", Selector: "#go"}},
	} {
		b.Run(op.what, func(b *testing.B) {
			const phase = 500 * time.Millisecond
			phases := max(2, min(b.N/50, 20))
			var with, without []time.Duration
			var skipped, frames int
			run := func(into *[]time.Duration) {
				for end := time.Now().Add(phase); time.Now().Before(end); {
					start := time.Now()
					if err := c.BrowserAction(ctx, s.ID, op.a, nil); err != nil {
						b.Fatalf("%s: %v", op.what, err)
					}
					*into = append(*into, time.Since(start))
				}
			}
			for range 3 { // warm-up
				_ = c.BrowserAction(ctx, s.ID, op.a, nil)
			}
			b.ResetTimer()
			for range phases {
				b.StopTimer()
				rec, err := c.StartRecording(ctx, s.ID, apitype.StartRecordingRequest{IntervalMS: 100})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				run(&with)
				b.StopTimer()
				stopped, err := c.StopRecording(ctx, rec.ID)
				if err != nil {
					b.Fatal(err)
				}
				skipped, frames = skipped+stopped.Skipped, frames+len(stopped.Frames)
				if err := c.DeleteRecording(ctx, rec.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				run(&without)
			}
			b.StopTimer()
			report(b, fmt.Sprintf("browser %s with a recording every 100ms (%d frames, %d captures skipped)", op.what, frames, skipped),
				with, op.what+" without a recording", without, "p50 ratio <= 1.05")
		})
	}
}
