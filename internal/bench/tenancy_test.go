package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/httpapi"
	"github.com/berthdev/berth/internal/testenv"
)

// maxTenancyCalls bounds the tenancy benchmarks' timed calls: they are
// paced under the per-key rate limit.
const maxTenancyCalls = 400

// BenchmarkTenancyExec measures what tenancy costs an exec round trip
// (`true` on a running sandbox of the tests' runtime, as in
// BenchmarkExecRoundTrip): a tenant's execution key on a daemon with the
// default rate limits, against the floor of the admin key on a daemon
// without limits, both started in this run. Calls alternate between the
// two, so that load from elsewhere weighs on both alike, and are paced
// under the default per-key limit (200/s), so that none is refused.
// Target: overhead <= 5% at p50.
func BenchmarkTenancyExec(b *testing.B) {
	limits := httpapi.DefaultRateLimits
	floorD := testenv.StartDaemon(b, func(cfg *daemon.Config) { cfg.RateLimits = &httpapi.RateLimits{} })
	tenD := testenv.StartDaemon(b, func(cfg *daemon.Config) { cfg.RateLimits = &limits })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	key := tenantExecKey(ctx, b, tenD.Client, "bench-tenant", "bench")
	floorC, tenC := floorD.Client, client.New(tenD.URL, key.Secret)
	floorSb := benchSandbox(ctx, b, floorC)
	tenSb := benchSandbox(ctx, b, tenC)

	// Warm up connections and agents, untimed.
	for range 5 {
		if err := execTrue(ctx, floorC, floorSb); err != nil {
			b.Fatal(err)
		}
		if err := execTrue(ctx, tenC, tenSb); err != nil {
			b.Fatal(err)
		}
	}

	n := min(b.N, maxTenancyCalls)
	interval := paceFor(limits)
	floor := make([]time.Duration, 0, n)
	got := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := range n {
		next := time.Now().Add(interval)
		tenFirst := i%2 == 1
		for j := range 2 {
			c, sb, out := floorC, floorSb, &floor
			if (j == 0) == tenFirst {
				c, sb, out = tenC, tenSb, &got
			}
			start := time.Now()
			if err := execTrue(ctx, c, sb); err != nil {
				b.Fatal(err)
			}
			*out = append(*out, time.Since(start))
		}
		time.Sleep(time.Until(next))
	}
	b.StopTimer()

	p50, p99 := percentile(got, 50), percentile(got, 99)
	f50, f99 := percentile(floor, 50), percentile(floor, 99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	reportFloor(b, "", "admin key, no rate limits", floor, got)
	b.ReportMetric(ratio(p99, f99), "ratio-p99")
	b.ReportMetric(0, "ns/op")
	logSummary(b, fmt.Sprintf("tenancy exec round trip (tenant key, default rate limits): p50 %.2fms p99 %.2fms; "+
		"floor admin key, no rate limits p50 %.2fms p99 %.2fms; ratio p50 %.3fx p99 %.3fx (n=%d, paced %v apart; target <= 1.05x at p50)",
		ms(p50), ms(p99), ms(f50), ms(f99), ratio(p50, f50), ratio(p99, f99), len(got), interval.Round(time.Millisecond)))
}

// BenchmarkTenancyNoisyNeighbour measures tenant B's exec round trip
// (paced as in BenchmarkTenancyExec) quiet, then while tenant A floods
// the same daemon (default rate limits) for a bounded time: A's flooders,
// each with its own execution key, loop creating sandboxes beyond A's
// quota, running commands in those they got and deleting them, as fast as
// the limits let them (a refusal for rate means waiting the least
// Retry-After, 1s). Every call of B must succeed. Target: B's p50 under
// the flood within 2x of its quiet p50 (reported, not asserted).
func BenchmarkTenancyNoisyNeighbour(b *testing.B) {
	const (
		flooders     = 4
		quota        = 4
		floodFor     = 15 * time.Second
		warmFlood    = time.Second // A's bursts spent before B is measured
		heldPerRound = 2           // flooders × heldPerRound > quota: A meets its quota
		execsPerHeld = 3
	)
	limits := httpapi.DefaultRateLimits
	d := testenv.StartDaemon(b, func(cfg *daemon.Config) { cfg.RateLimits = &limits })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	keyB := tenantExecKey(ctx, b, d.Client, "tenant-b", "b")
	var aClients []*client.Client
	for i := range flooders {
		name := "tenant-a"
		k := tenantExecKey(ctx, b, d.Client, name, fmt.Sprintf("a%d", i))
		if i == 0 {
			q := quota
			if _, err := d.Client.SetTenant(ctx, name, apitype.SetTenantRequest{MaxSandboxes: &q}); err != nil {
				b.Fatal(err)
			}
		}
		aClients = append(aClients, client.New(d.URL, k.Secret))
	}
	cb := client.New(d.URL, keyB.Secret)
	sbB := benchSandbox(ctx, b, cb)
	defer deleteTenantSandboxes(b, aClients[0])
	for range 5 {
		if err := execTrue(ctx, cb, sbB); err != nil {
			b.Fatal(err)
		}
	}

	n := min(b.N, maxTenancyCalls)
	interval := paceFor(limits)
	// measureB runs B's paced execs until n or ctx's end; it returns the
	// times of those that succeeded and how many were called.
	measureB := func(ctx context.Context) (ok []time.Duration, calls int) {
		failed := 0
		for range n {
			if ctx.Err() != nil {
				break
			}
			next := time.Now().Add(interval)
			start := time.Now()
			err := execTrue(ctx, cb, sbB)
			elapsed := time.Since(start)
			switch {
			case err != nil && ctx.Err() != nil: // the flood's time ended mid-call
				return ok, calls
			case err != nil:
				if failed++; failed <= 5 {
					b.Errorf("tenant B's exec: %v", err)
				}
			default:
				ok = append(ok, elapsed)
			}
			calls++
			time.Sleep(time.Until(next))
		}
		return ok, calls
	}

	b.ResetTimer()
	quiet, quietCalls := measureB(ctx)

	var st floodStats
	floodCtx, stopFlood := context.WithTimeout(ctx, floodFor)
	defer stopFlood()
	var wg sync.WaitGroup
	for _, ca := range aClients {
		wg.Go(func() { st.flood(floodCtx, b, ca, heldPerRound, execsPerHeld) })
	}
	select {
	case <-time.After(warmFlood):
	case <-floodCtx.Done():
	}
	floodStart := time.Now()
	loud, loudCalls := measureB(floodCtx)
	measured := time.Since(floodStart)
	stopFlood()
	wg.Wait()
	b.StopTimer()

	q50, q99 := percentile(quiet, 50), percentile(quiet, 99)
	l50, l99 := percentile(loud, 50), percentile(loud, 99)
	bCalls, bOK := quietCalls+loudCalls, len(quiet)+len(loud)
	success := 100.0
	if bCalls > 0 {
		success = 100 * float64(bOK) / float64(bCalls)
	}
	b.ReportMetric(ms(q50), "quiet-p50-ms")
	b.ReportMetric(ms(q99), "quiet-p99-ms")
	b.ReportMetric(ms(l50), "flood-p50-ms")
	b.ReportMetric(ms(l99), "flood-p99-ms")
	b.ReportMetric(ratio(l50, q50), "ratio-p50")
	b.ReportMetric(ratio(l99, q99), "ratio-p99")
	b.ReportMetric(success, "b-success-%")
	b.ReportMetric(float64(st.quota.Load()), "a-quota-429s")
	b.ReportMetric(float64(st.rate.Load()), "a-rate-429s")
	b.ReportMetric(0, "ns/op")
	logSummary(b, fmt.Sprintf("tenant B exec round trip: quiet p50 %.2fms p99 %.2fms (n=%d); under tenant A's flood p50 %.2fms p99 %.2fms (n=%d in %.1fs); "+
		"ratio p50 %.2fx p99 %.2fx (target <= 2x at p50); B's calls ok: quiet %d/%d, flood %d/%d",
		ms(q50), ms(q99), len(quiet), ms(l50), ms(l99), len(loud), measured.Seconds(),
		ratio(l50, q50), ratio(l99, q99), len(quiet), quietCalls, len(loud), loudCalls))
	logSummary(b, fmt.Sprintf("  tenant A (%d flooders, a key each, max_sandboxes %d, %v): %d calls, %d sandboxes created, %d commands run, %d deleted; "+
		"refused %d quota_exceeded, %d rate_limited; %d other errors",
		flooders, quota, floodFor, st.calls.Load(), st.created.Load(), st.execs.Load(), st.deleted.Load(),
		st.quota.Load(), st.rate.Load(), st.other.Load()))
}

// floodStats counts a flooding tenant's calls and how they ended.
type floodStats struct {
	calls, created, execs, deleted atomic.Int64
	quota, rate, other             atomic.Int64
}

// flood loops until ctx ends: create up to held sandboxes with c, run
// execs commands in each it got, delete them. Refusals for quota are
// expected; after one for rate it waits a second, the least Retry-After.
func (st *floodStats) flood(ctx context.Context, b *testing.B, c *client.Client, held, execs int) {
	// check counts the outcome of a call and reports whether it succeeded.
	check := func(err error) bool {
		if ctx.Err() != nil {
			return err == nil
		}
		st.calls.Add(1)
		switch {
		case err == nil:
			return true
		case client.IsReason(err, errcode.QuotaExceeded.String()):
			st.quota.Add(1)
		case client.IsReason(err, errcode.RateLimited.String()):
			st.rate.Add(1)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		default:
			if st.other.Add(1) <= 5 {
				b.Errorf("tenant A's flood: %v", err)
			}
		}
		return false
	}
	for ctx.Err() == nil {
		var ids []string
		for range held {
			sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: testenv.Runtime()})
			if check(err) {
				st.created.Add(1)
				ids = append(ids, sb.ID)
			}
		}
		for _, id := range ids {
			for range execs {
				if _, err := c.Run(ctx, id, apitype.CreateCommandRequest{Argv: []string{"echo", "x"}}); check(err) {
					st.execs.Add(1)
				}
			}
		}
		// Deleted even as the flood ends, so that none is left to the
		// cleanup.
		for _, id := range ids {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			err := c.DeleteSandbox(dctx, id)
			cancel()
			if check(err) {
				st.deleted.Add(1)
			}
		}
	}
}

// deleteTenantSandboxes deletes what c's tenant still holds, such as a
// sandbox whose create the flood's end interrupted.
func deleteTenantSandboxes(b *testing.B, c *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 5 {
		list, err := c.ListSandboxes(ctx)
		if err == nil {
			for _, sb := range list {
				// One whose create the flood's end interrupted may be
				// rolled back meanwhile.
				if err = c.DeleteSandbox(ctx, sb.ID); client.IsCode(err, errcode.NotFound) {
					err = nil
				} else if err != nil {
					break
				}
			}
		}
		if err == nil {
			return
		}
		if !client.IsReason(err, errcode.RateLimited.String()) {
			b.Errorf("deleting tenant A's sandboxes: %v", err)
			return
		}
		time.Sleep(time.Second)
	}
}

// tenantExecKey creates tenant name unless it exists, and an execution key
// of it called keyName.
func tenantExecKey(ctx context.Context, b *testing.B, admin *client.Client, name, keyName string) apitype.Key {
	b.Helper()
	if _, err := admin.GetTenant(ctx, name); client.IsCode(err, errcode.NotFound) {
		if _, err := admin.CreateTenant(ctx, apitype.CreateTenantRequest{Name: name}); err != nil {
			b.Fatalf("creating tenant %s: %v", name, err)
		}
	} else if err != nil {
		b.Fatalf("tenant %s: %v", name, err)
	}
	k, err := admin.CreateKey(ctx, apitype.CreateKeyRequest{Name: keyName, Scope: auth.ScopeExecution, Tenant: name})
	if err != nil {
		b.Fatalf("creating a key of %s: %v", name, err)
	}
	return k
}

// benchSandbox creates a sandbox of the tests' runtime with c, deleted at
// cleanup.
func benchSandbox(ctx context.Context, b *testing.B, c *client.Client) string {
	b.Helper()
	sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: testenv.Runtime()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.DeleteSandbox(ctx, sb.ID); err != nil && !client.IsCode(err, errcode.NotFound) {
			b.Errorf("deleting %s: %v", sb.ID, err)
		}
	})
	return sb.ID
}

// execTrue runs `true` in sandbox sbID as BenchmarkExecRoundTrip does: one
// POST with wait_ms, then reads until the command is done.
func execTrue(ctx context.Context, c *client.Client, sbID string) error {
	cmd, err := c.ExecWait(ctx, sbID, apitype.CreateCommandRequest{Argv: []string{"true"}}, client.CommandQuery{WaitMS: 10000})
	if err != nil {
		return err
	}
	return waitDone(ctx, c, sbID, cmd, func(cmd apitype.Command) error {
		if cmd.Status != apitype.CommandExited || cmd.ExitCode == nil || *cmd.ExitCode != 0 {
			return fmt.Errorf("true: status %q (%s), exit code %v", cmd.Status, cmd.Reason, cmd.ExitCode)
		}
		return nil
	})
}

// paceFor is the interval between one key's execs that stays under
// limits' rate per key, with a quarter to spare.
func paceFor(limits httpapi.RateLimits) time.Duration {
	if limits.PerKey.PerSecond <= 0 {
		return 0
	}
	return time.Duration(1.25 * float64(time.Second) / limits.PerKey.PerSecond)
}
