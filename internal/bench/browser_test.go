package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/testenv"
)

// benchPages serves the pages the browser benchmarks use: a small form,
// and a table of rows rows.
func benchPages(b *testing.B) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/form.html", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Form</title><label for=n>Name</label><input id=n>
<button id=go onclick="document.getElementById('out').textContent=document.getElementById('n').value">Go</button><p id=out></p>`)
	})
	mux.HandleFunc("/table.html", func(w http.ResponseWriter, r *http.Request) {
		rows, _ := strconv.Atoi(r.URL.Query().Get("rows"))
		var sb strings.Builder
		sb.WriteString(`<!doctype html><title>Table</title><table><tr><th>#</th><th>Name</th><th>Action</th></tr>`)
		for i := range rows {
			fmt.Fprintf(&sb, `<tr><td>%d</td><td>Item %d</td><td><button>Open %d</button></td></tr>`, i, i, i)
		}
		sb.WriteString(`</table>`)
		fmt.Fprint(w, sb.String())
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv.URL
}

// rawTab starts a browser with chromedp alone, the floor of the
// per-action benchmarks: the same Chromium, the same flags, no Berth.
func rawTab(b *testing.B) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser.FindChromium()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b.Cleanup(func() { cancel(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		b.Fatal(err)
	}
	return ctx
}

// BenchmarkBrowserSessionOpen measures opening (and, untimed, closing) a
// context-mode session through the API on the warm shared browser,
// against a new browser context and tab made with chromedp alone on a
// warm browser. Target: p50 <= 30 ms.
func BenchmarkBrowserSessionOpen(b *testing.B) {
	testenv.NeedChromium(b)
	d := testenv.StartDaemon(b, nil)
	c := d.Client
	ctx := context.Background()
	raw := rawTab(b)
	n := min(b.N, 100)
	var opens, floor []time.Duration
	for range 2 { // warm-up
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		_ = c.CloseBrowserSession(ctx, s.ID)
	}
	b.ResetTimer()
	for range n {
		start := time.Now()
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		opens = append(opens, time.Since(start))
		b.StopTimer()
		if err := c.CloseBrowserSession(ctx, s.ID); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		tctx, cancel := chromedp.NewContext(raw, chromedp.WithNewBrowserContext())
		if err := chromedp.Do(tctx); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(start))
		cancel()
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "browser session open (context mode, warm)", opens, "chromedp new browser context + tab", floor, "p50 <= 30ms")
}

// BenchmarkBrowserActions measures navigate, click by ref, fill,
// screenshot and snapshot through the API against the nearest raw
// chromedp calls, interleaved in the same run. Target: within 1.2x.
func BenchmarkBrowserActions(b *testing.B) {
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
	raw := rawTab(b)
	do := func(a apitype.BrowserAction, out any) {
		if err := c.BrowserAction(ctx, s.ID, a, out); err != nil {
			b.Fatalf("%s: %v", a.Op, err)
		}
	}
	rawDo := func(a chromedp.Action[chromedp.Void]) {
		if err := chromedp.Do(raw, a); err != nil {
			b.Fatal(err)
		}
	}
	url := base + "/form.html"
	do(apitype.BrowserAction{Op: "navigate", URL: url}, nil)
	rawDo(chromedp.Navigate(url))
	var snap apitype.BrowserSnapshot
	do(apitype.BrowserAction{Op: "snapshot"}, &snap)
	ref := refOf(b, snap.YAML, `button "Go"`)
	rawShot := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng})
		return err
	})
	rawAX := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		return err
	})
	ops := []struct {
		what, floorWhat string
		api             apitype.BrowserAction
		raw             chromedp.Action[chromedp.Void]
	}{
		{"navigate", "chromedp.Navigate", apitype.BrowserAction{Op: "navigate", URL: url}, chromedp.Navigate(url)},
		{"click by ref", "chromedp.Click(CSS)", apitype.BrowserAction{Op: "click", Target: &apitype.BrowserTarget{By: "ref", Value: ref}}, chromedp.Click(chromedp.CSS("#go"))},
		{"fill", "clear by script + chromedp.SendKeys(CSS)", apitype.BrowserAction{Op: "fill", Selector: "#n", Value: "hello"},
			chromedp.Steps(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.getElementById('n').value = '') === ''`))
				return err
			}), chromedp.SendKeys(chromedp.CSS("#n"), "hello"))},
		{"screenshot", "Page.captureScreenshot", apitype.BrowserAction{Op: "screenshot"}, rawShot},
		{"snapshot", "Accessibility.getFullAXTree", apitype.BrowserAction{Op: "snapshot"}, rawAX},
	}
	for _, op := range ops {
		b.Run(strings.ReplaceAll(op.what, " ", "_"), func(b *testing.B) {
			n := min(b.N, 100)
			var got, floor []time.Duration
			for range n {
				start := time.Now()
				do(op.api, nil)
				got = append(got, time.Since(start))
				if op.what == "navigate" {
					// Refs of the first snapshot are stale after it.
					do(apitype.BrowserAction{Op: "snapshot"}, &snap)
					op2 := ops[1]
					op2.api.Target.Value = refOf(b, snap.YAML, `button "Go"`)
					ops[1] = op2
				}
				start = time.Now()
				rawDo(op.raw)
				floor = append(floor, time.Since(start))
			}
			report(b, "browser "+op.what+" through the API", got, op.floorWhat, floor, "within 1.2x")
		})
	}
}

func refOf(b *testing.B, yaml, line string) string {
	i := strings.Index(yaml, line+" [ref=")
	if i < 0 {
		b.Fatalf("no %s with a ref in\n%s", line, yaml)
	}
	rest := yaml[i+len(line)+len(" [ref="):]
	return rest[:strings.IndexByte(rest, ']')]
}

// BenchmarkBrowserSnapshotTable measures the snapshot of a 1,500-row
// table page (4,500 cells, 1,500 buttons), against CDP's full
// accessibility tree of the same page. Target: <= 60 ms.
func BenchmarkBrowserSnapshotTable(b *testing.B) {
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
	url := base + "/table.html?rows=1500"
	if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: url}, nil); err != nil {
		b.Fatal(err)
	}
	raw := rawTab(b)
	if err := chromedp.Do(raw, chromedp.Navigate(url)); err != nil {
		b.Fatal(err)
	}
	n := min(b.N, 30)
	var got, floor []time.Duration
	var snap apitype.BrowserSnapshot
	for range n {
		start := time.Now()
		if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "snapshot", MaxElements: 20000}, &snap); err != nil {
			b.Fatal(err)
		}
		got = append(got, time.Since(start))
		start = time.Now()
		if _, err := chromedp.Call(raw, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{}); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(start))
	}
	b.ReportMetric(float64(len(snap.YAML)), "yaml-bytes")
	report(b, fmt.Sprintf("snapshot of a 1,500-row table (%d refs, %d bytes, truncated %t)", snap.Refs, len(snap.YAML), snap.Truncated),
		got, "(peer) Accessibility.getFullAXTree", floor, "<= 60ms")
}

// BenchmarkBrowserIdleSessions opens 10 idle context-mode sessions, each on
// a small page, and reads what they add to the Chromium processes' PSS.
func BenchmarkBrowserIdleSessions(b *testing.B) {
	if b.N == 1 {
		return
	}
	testenv.NeedChromium(b)
	d := testenv.StartDaemon(b, nil)
	base := benchPages(b)
	c := d.Client
	ctx := context.Background()
	// The shared browser first, with one session, so the figure is the
	// cost of one more.
	first, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseBrowserSession(ctx, first.ID)
	time.Sleep(time.Second)
	before := chromiumPSS(b, d)
	const n = 10
	for range n {
		s, err := c.OpenBrowserSession(ctx, apitype.CreateBrowserSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.CloseBrowserSession(ctx, s.ID)
		if err := c.BrowserAction(ctx, s.ID, apitype.BrowserAction{Op: "navigate", URL: base + "/form.html"}, nil); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	after := chromiumPSS(b, d)
	per := (after - before) / n
	b.ReportMetric(per, "MiB/session")
	b.ReportMetric(0, "ns/op")
	b.Logf("idle context-mode session (a small page open): %.1f MiB of Chromium PSS each (%.0f -> %.0f MiB for %d sessions)", per, before, after, n)
}

// chromiumPSS sums the PSS of the daemon's Chromium processes (each
// browser found by its profile directory, and all its descendants:
// renderers and helpers do not carry the flag), in MiB.
func chromiumPSS(b *testing.B, d *testenv.Daemon) float64 {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	var total float64
	todo := testenv.ProcessesUnder("--user-data-dir=" + d.DataDir + "/browser/")
	seen := map[int]bool{}
	for len(todo) > 0 {
		pid := todo[0]
		todo = todo[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if _, pss, err := procMemory(pid); err == nil {
			total += pss
		}
		todo = append(todo, children[pid]...)
	}
	return total
}
