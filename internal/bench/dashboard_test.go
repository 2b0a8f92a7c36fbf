package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// dashboardSandboxes is how many sandboxes the dashboard benchmark's
// daemon holds; maxDashboardPages bounds its timed page loads.
const (
	dashboardSandboxes = 1000
	maxDashboardPages  = 300
)

// BenchmarkDashboardSandboxesPage measures the server time of the
// dashboard's sandboxes page (its first page of 50, rendered) on a daemon
// holding 1,000 sandboxes, signed in with the admin key: one GET over
// loopback from a Go client. The sandboxes are lazy creates (pending, no
// compute), which list like any other. The floor is the API call the page
// makes, GET /v1/sandboxes?limit=50, as JSON. Target: p50 <= 50 ms.
func BenchmarkDashboardSandboxesPage(b *testing.B) {
	testenv.OnePass(b)
	// Go's cookie jar sends no Secure cookie over http://127.0.0.1.
	d := testenv.StartDaemon(b, func(cfg *daemon.Config) { cfg.Dashboard.InsecureCookies = true })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fillSandboxes(ctx, b, d, dashboardSandboxes)

	hc := signInDashboard(ctx, b, d)
	page := func() error {
		resp, err := hc.Get(d.URL + "/ui/sandboxes")
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || strings.Count(string(body), "<tr>") < 50 {
			return fmt.Errorf("GET /ui/sandboxes = %d with %d rows", resp.StatusCode, strings.Count(string(body), "<tr>"))
		}
		return nil
	}
	api := func() error {
		_, err := d.Client.ListSandboxesPage(ctx, 50, "")
		return err
	}
	for range 5 { // warm up, untimed
		if err := page(); err != nil {
			b.Fatal(err)
		}
	}

	n := min(b.N, maxDashboardPages)
	got := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		start := time.Now()
		if err := page(); err != nil {
			b.Fatal(err)
		}
		got = append(got, time.Since(start))
	}
	b.StopTimer()
	floor := measure(b, n, api)
	report(b, fmt.Sprintf("dashboard sandboxes page (%d sandboxes)", dashboardSandboxes), got,
		"GET /v1/sandboxes?limit=50", floor, "p50 <= 50ms")
}

// fillSandboxes makes n lazy sandboxes with the admin key, 8 at a time.
func fillSandboxes(ctx context.Context, b *testing.B, d *testenv.Daemon, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if _, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{
					Name: fmt.Sprintf("bench-%04d", i), Lazy: true, Runtime: "process"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			b.Fatalf("creating sandbox %d: %v", i, err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signInDashboard signs an HTTP client with a cookie jar in to d's
// dashboard with the admin key.
func signInDashboard(ctx context.Context, b *testing.B, d *testenv.Daemon) *http.Client {
	b.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/", nil)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(body)
	if m == nil {
		b.Fatalf("the sign-in page has no csrf field: %.300s", body)
	}
	resp, err = hc.PostForm(d.URL+"/login", url.Values{"key": {d.Token}, "csrf": {string(m[1])}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/ui/sandboxes") {
		b.Fatalf("signing in = %d at %s, want the sandboxes page", resp.StatusCode, resp.Request.URL)
	}
	return hc
}
