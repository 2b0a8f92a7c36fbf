package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/cluster"
	"github.com/berthdev/berth/internal/testenv"
)

// maxClusterCalls bounds the cluster benchmarks' timed calls.
const maxClusterCalls = 400

// BenchmarkClusterExec measures what HQ adds to an exec round trip (`true`
// on a running sandbox, as in BenchmarkExecRoundTrip): through HQ, which
// authenticates the key, finds the owner in Postgres and forwards with
// its assertion, against straight to the worker with HQ's assertion (the
// floor), alternating so that load from elsewhere weighs on both alike.
// Target: HQ adds <= 1 ms at p50.
func BenchmarkClusterExec(b *testing.B) {
	c := testenv.StartCluster(b, testenv.ClusterSpec{Workers: map[string]string{"w1": ""}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hq := c.HQ.Client
	sb := benchSandbox(ctx, b, hq)
	direct := c.WorkerClient("w1", cluster.Caller{Principal: auth.Principal{KeyID: "bench", Scope: auth.ScopeAdmin}})
	for range 5 { // warm up connections and the agent, untimed
		if err := execTrue(ctx, hq, sb); err != nil {
			b.Fatal(err)
		}
		if err := execTrue(ctx, direct, sb); err != nil {
			b.Fatal(err)
		}
	}
	n := min(b.N, maxClusterCalls)
	floor := make([]time.Duration, 0, n)
	got := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		floor = append(floor, measure(b, 1, func() error { return execTrue(ctx, direct, sb) })...)
		got = append(got, measure(b, 1, func() error { return execTrue(ctx, hq, sb) })...)
	}
	b.StopTimer()
	report(b, "exec round trip through HQ", got, "straight to the worker", floor, "HQ adds <= 1 ms at p50")
	if b.N > 1 {
		p50, f50 := percentile(got, 50), percentile(floor, 50)
		logSummary(b, fmt.Sprintf("  HQ adds %.2fms at p50", ms(p50-f50)))
		b.ReportMetric(ms(p50-f50), "added-p50-ms")
	}
}

// BenchmarkClusterCreates measures sandbox creates per second through HQ,
// 6 clients at once, spread over three workers against one worker (the
// floor), each cluster on this machine. On one machine the workers share
// its CPUs, so the ratio shows what placement and routing cost or gain,
// not what three machines would give.
func BenchmarkClusterCreates(b *testing.B) {
	n := min(b.N, 60)
	run := func(workers map[string]string) (float64, []time.Duration) {
		c := testenv.StartCluster(b, testenv.ClusterSpec{Workers: workers})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		return createsPerSecond(ctx, b, c.HQ.Client, n)
	}
	oneRate, oneLat := run(map[string]string{"w1": ""})
	threeRate, threeLat := run(map[string]string{"w1": "", "w2": "", "w3": ""})
	report(b, "create latency, 3 workers", threeLat, "1 worker", oneLat, "")
	b.ReportMetric(threeRate, "creates/s-3-workers")
	b.ReportMetric(oneRate, "creates/s-1-worker")
	logSummary(b, fmt.Sprintf("  creates/s: 3 workers %.1f, 1 worker %.1f; ratio %.2fx (n=%d each, 6 clients)", threeRate, oneRate, threeRate/oneRate, n))
}

// createsPerSecond makes n sandboxes through c, 6 at a time, and deletes
// them (untimed).
func createsPerSecond(ctx context.Context, b *testing.B, c *client.Client, n int) (float64, []time.Duration) {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		ids  []string
		next = make(chan struct{}, n)
		wg   sync.WaitGroup
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	start := time.Now()
	for range 6 {
		wg.Go(func() {
			for range next {
				t0 := time.Now()
				sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: testenv.Runtime()})
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					b.Error(err)
				} else {
					lat, ids = append(lat, d), append(ids, sb.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rate := float64(len(ids)) / time.Since(start).Seconds()
	for _, id := range ids {
		if err := c.DeleteSandbox(ctx, id); err != nil {
			b.Errorf("deleting %s: %v", id, err)
		}
	}
	return rate, lat
}
