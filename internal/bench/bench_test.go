// Package bench holds Berth's benchmarks against DESIGN.md section 8. Each
// runs the real daemon through the real client, and measures a floor in the
// same run so that the result is a ratio, comparable across machines:
//
//	make bench   # go test -run '^$' -bench . -benchtime 200x ./internal/bench/...
package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// maxCreates bounds the create benchmark's iterations: each makes and
// deletes a sandbox, a process tree and a directory.
const maxCreates = 100

// BenchmarkExecRoundTrip measures `true` on a running sandbox, API to
// result, as an agent runs a tool call: one POST with wait_ms that answers
// when the command has ended. The floor is fork+exec of /bin/true from Go,
// the least any exec can cost.
func BenchmarkExecRoundTrip(b *testing.B) {
	benchExec(b, "exec round trip", func(ctx context.Context, c *client.Client, sbID string) (apitype.Command, error) {
		return c.ExecWait(ctx, sbID, apitype.CreateCommandRequest{Argv: []string{"true"}}, client.CommandQuery{WaitMS: 10000})
	})
}

// BenchmarkExecStartThenRead is the same round trip as two calls: start,
// then a read with wait_ms, as a client that polls does it.
func BenchmarkExecStartThenRead(b *testing.B) {
	benchExec(b, "exec start + read", func(ctx context.Context, c *client.Client, sbID string) (apitype.Command, error) {
		return c.Exec(ctx, sbID, apitype.CreateCommandRequest{Argv: []string{"true"}})
	})
}

func benchExec(b *testing.B, name string, start func(context.Context, *client.Client, string) (apitype.Command, error)) {
	d := testenv.StartDaemon(b, nil)
	c := d.Client
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "process"})
	if err != nil {
		b.Fatal(err)
	}
	roundTrip := func() error {
		cmd, err := start(ctx, c, sb.ID)
		if err != nil {
			return err
		}
		return waitDone(ctx, c, sb.ID, cmd, func(cmd apitype.Command) error {
			if cmd.Status != apitype.CommandExited || cmd.ExitCode == nil || *cmd.ExitCode != 0 {
				return fmt.Errorf("true: status %q (%s), exit code %v", cmd.Status, cmd.Reason, cmd.ExitCode)
			}
			return nil
		})
	}
	// Warm up connections and the agent, untimed.
	for range 5 {
		if err := roundTrip(); err != nil {
			b.Fatal(err)
		}
	}

	n := b.N
	got := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		start := time.Now()
		if err := roundTrip(); err != nil {
			b.Fatal(err)
		}
		got = append(got, time.Since(start))
	}
	b.StopTimer()

	floor := measure(b, n, func() error { return exec.Command("/bin/true").Run() })
	report(b, name, got, "fork+exec /bin/true", floor, "p50 <= 3ms")
}

// BenchmarkCreateToFirstOutput measures a new process sandbox to the first
// output of its first command (`echo ready`). Deleting it is not counted.
// Two floors: fork+exec of /bin/true, and a start of the berth binary
// itself (`berth version`), the program every sandbox's agent runs.
func BenchmarkCreateToFirstOutput(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	c := d.Client
	ctx := context.Background()
	one := createToFirstOutput(ctx, b, c, "process")
	// Warm up, untimed.
	for range 3 {
		if _, err := one(); err != nil {
			b.Fatal(err)
		}
	}

	n := min(b.N, maxCreates)
	got := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		dur, err := one()
		if err != nil {
			b.Fatal(err)
		}
		got = append(got, dur)
	}
	b.StopTimer()

	bin := testenv.Binary(b)
	floorTrue := measure(b, n, func() error { return exec.Command("/bin/true").Run() })
	floorBerth := measure(b, n, func() error { return exec.Command(bin, "version").Run() })
	report(b, "create to first output", got, "fork+exec /bin/true", floorTrue, "")
	reportFloor(b, "berth-", "start of berth version", floorBerth, got)
}

// waitDone reads cmd with wait until it is done, then checks it.
func waitDone(ctx context.Context, c *client.Client, sbID string, cmd apitype.Command, check func(apitype.Command) error) error {
	var err error
	for !cmd.Done() {
		if cmd, err = c.Command(ctx, sbID, cmd.ID, client.CommandQuery{WaitMS: 10000}); err != nil {
			return err
		}
	}
	return check(cmd)
}

// waitOutput reads cmd with wait until it has printed ready.
func waitOutput(ctx context.Context, c *client.Client, sbID string, cmd apitype.Command) error {
	var err error
	for cmd.Stdout == "" {
		if cmd.Done() && cmd.Stdout == "" {
			return fmt.Errorf("echo ready: status %q (%s), no output", cmd.Status, cmd.Reason)
		}
		if cmd, err = c.Command(ctx, sbID, cmd.ID, client.CommandQuery{WaitMS: 10000}); err != nil {
			return err
		}
	}
	if cmd.Stdout != "ready\n" {
		return fmt.Errorf("echo ready printed %q", cmd.Stdout)
	}
	return nil
}

// measure times fn n times.
func measure(b *testing.B, n int, fn func() error) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method; it sorts ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(p/100*float64(len(ds)) + 0.999999)
	return ds[min(max(rank, 1), len(ds))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report reports p50 and p99 of got and of floor, and their p50 ratio, as
// metrics and as one line for people.
func report(b *testing.B, what string, got []time.Duration, floorWhat string, floor []time.Duration, target string) {
	b.Helper()
	p50, p99 := percentile(got, 50), percentile(got, 99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	f50, f99 := reportFloor(b, "", floorWhat, floor, got)
	line := fmt.Sprintf("%s: p50 %.2fms p99 %.2fms; floor %s p50 %.2fms p99 %.2fms; ratio %.1fx (n=%d)",
		what, ms(p50), ms(p99), floorWhat, ms(f50), ms(f99), ratio(p50, f50), len(got))
	if target != "" {
		line += " (target " + target + ")"
	}
	logSummary(b, line)
	// Without a metric named ns/op the default one stays, which is the
	// mean including untimed work: drop it in favour of the percentiles.
	b.ReportMetric(0, "ns/op")
}

// reportFloor reports a floor's p50 and p99, and got's p50 ratio to it,
// with prefix on the metric names; it returns the floor's p50 and p99.
func reportFloor(b *testing.B, prefix, what string, floor, got []time.Duration) (time.Duration, time.Duration) {
	b.Helper()
	f50, f99 := percentile(floor, 50), percentile(floor, 99)
	b.ReportMetric(ms(f50), prefix+"floor-p50-ms")
	b.ReportMetric(ms(f99), prefix+"floor-p99-ms")
	b.ReportMetric(ratio(percentile(got, 50), f50), prefix+"ratio-p50")
	if prefix != "" {
		line := fmt.Sprintf("  floor %s: p50 %.2fms p99 %.2fms; ratio %.1fx",
			what, ms(f50), ms(f99), ratio(percentile(got, 50), f50))
		logSummary(b, line)
	}
	return f50, f99
}

// logSummary logs a line for people, except in the run with b.N == 1 by
// which the testing package sizes benchmarks (also under -benchtime Nx),
// whose percentiles mean nothing.
func logSummary(b *testing.B, line string) {
	b.Helper()
	if b.N > 1 {
		b.Log(line)
	}
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// createToFirstOutput returns one timed iteration of the create
// benchmarks: a new sandbox of runtime rt to the first output of `echo
// ready` (one ExecWait call, then reads if need be). Deleting the sandbox
// is outside the benchmark's timer and the returned duration.
func createToFirstOutput(ctx context.Context, b *testing.B, c *client.Client, rt string) func() (time.Duration, error) {
	createToOutput := func() (string, error) {
		sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt})
		if err != nil {
			return "", err
		}
		if sb.Runtime != rt {
			return sb.ID, fmt.Errorf("asked for runtime %s, got %s", rt, sb.Runtime)
		}
		cmd, err := c.ExecWait(ctx, sb.ID, apitype.CreateCommandRequest{Argv: []string{"echo", "ready"}},
			client.CommandQuery{WaitMS: 10000})
		if err != nil {
			return sb.ID, err
		}
		return sb.ID, waitOutput(ctx, c, sb.ID, cmd)
	}
	return func() (time.Duration, error) {
		start := time.Now()
		id, err := createToOutput()
		elapsed := time.Since(start)
		if id != "" {
			b.StopTimer()
			if derr := c.DeleteSandbox(ctx, id); derr != nil && err == nil {
				err = derr
			}
			b.StartTimer()
		}
		return elapsed, err
	}
}
