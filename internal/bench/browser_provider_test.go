package bench

import (
	"context"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
	"github.com/berthdev/berth/internal/testenv/providerfake"
)

// BenchmarkBrowserProviderOpen measures opening (and, untimed, closing) a
// remote session at a provider (Steel's fake, whose sessions are process
// sessions of the same daemon) against the floor of opening that process
// session through the API directly: the ratio is what the provider's
// create, the bridge and the remote connection add.
func BenchmarkBrowserProviderOpen(b *testing.B) {
	testenv.NeedChromium(b)
	f := providerfake.New(b, providerfake.Steel)
	p, err := browser.NewSteel(browser.SteelConfig{APIKey: browser.Secret(f.Key), BaseURL: f.URL})
	if err != nil {
		b.Fatal(err)
	}
	d := testenv.StartDaemon(b, func(c *daemon.Config) { c.BrowserProviders = map[string]browser.Provider{"steel": p} })
	f.SetBackend(d.URL, d.Token)
	c := d.Client
	ctx := context.Background()
	n := min(b.N, 20)
	var opens, floor []time.Duration
	b.ResetTimer()
	for range n {
		start := time.Now()
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Provider: "steel"})
		if err != nil {
			b.Fatal(err)
		}
		opens = append(opens, time.Since(start))
		b.StopTimer()
		if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		ps, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{Mode: apitype.BrowserModeProcess})
		if err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(start))
		_ = c.CloseBrowserSession(ctx, ps.ID)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "browser session open at a provider (Steel's fake)", opens, "process-mode session open through the API", floor, "")
}
