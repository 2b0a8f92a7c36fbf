package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// BenchmarkEgress measures the egress network against a direct route, in
// one run: the same client (curl) from inside an egress sandbox, and from
// a plain network namespace whose route leads straight to the test
// internet (testenv.Internet's dialing namespace). Per runtime:
//
//   - http: TCP connect and one small HTTP GET, as curl times it (target
//     p50 ratio <= 1.5x);
//   - download: a 100 MiB download's throughput (target >= 0.5x direct);
//   - create: cold create to first output, egress vs none (target <= +10ms p50);
//   - memory: the daemon's memory per idle egress sandbox beyond a none
//     one (target <= 1 MiB).
func BenchmarkEgress(b *testing.B) {
	in := testenv.NewInternet(b)
	d := testenv.StartDaemon(b, in.Apply)
	ip := testenv.NeedCommand(b, "ip")
	direct := func(script string) (string, error) {
		out, err := exec.Command(ip, "netns", "exec", strings.TrimPrefix(in.Out, "/run/netns/"), "sh", "-c", script).CombinedOutput()
		return string(out), err
	}
	for _, rt := range isolatedRuntimes {
		b.Run(rt.name, func(b *testing.B) {
			needIsolated(b, d, rt.name)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			c := d.Client
			sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.name, Network: &apitype.Network{Mode: "egress"}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.DeleteSandbox(context.WithoutCancel(ctx), sb.ID)
			inSandbox := func(script string) (string, error) {
				cmd, err := c.Run(ctx, sb.ID, apitype.CreateCommandRequest{Command: script, TimeoutMS: 300000})
				if err != nil {
					return "", err
				}
				if cmd.ExitCode == nil || *cmd.ExitCode != 0 {
					return "", fmt.Errorf("%s: %s %s", script, cmd.Status, cmd.Stderr)
				}
				return cmd.Stdout, nil
			}

			b.Run("http", func(b *testing.B) {
				n := min(b.N, 200)
				// Rounds of 20 each way, interleaved, so that load from
				// elsewhere weighs on both alike.
				loop := fmt.Sprintf("for i in $(seq %d); do curl -sS -o /dev/null -w '%%{time_total}\\n' http://%s/; done", 20, testenv.InternetHTTPIP)
				var got, floor []time.Duration
				for len(got) < n {
					out, err := inSandbox(loop)
					if err != nil {
						b.Fatal(err)
					}
					got = append(got, seconds(b, out)...)
					out, err = direct(loop)
					if err != nil {
						b.Fatal(err, out)
					}
					floor = append(floor, seconds(b, out)...)
				}
				report(b, rt.name+" egress: TCP connect + small HTTP GET", got, "direct route", floor, "ratio <= 1.5x")
			})

			b.Run("download", func(b *testing.B) {
				const size = 100 << 20
				get := fmt.Sprintf("curl -sS -o /dev/null -w '%%{speed_download}\\n' 'http://%s/bytes?n=%d'", testenv.InternetHTTPIP, size)
				var through, straight []float64
				for range 3 {
					out, err := inSandbox(get)
					if err != nil {
						b.Fatal(err)
					}
					through = append(through, number(b, out))
					out, err = direct(get)
					if err != nil {
						b.Fatal(err, out)
					}
					straight = append(straight, number(b, out))
				}
				slices.Sort(through)
				slices.Sort(straight)
				t, s := through[1]/(1<<20), straight[1]/(1<<20)
				b.ReportMetric(t, "MiB/s")
				b.ReportMetric(s, "direct-MiB/s")
				b.ReportMetric(t/s, "ratio")
				b.ReportMetric(0, "ns/op")
				logSummary(b, fmt.Sprintf("%s egress: 100 MiB download median %.0f MiB/s; direct route %.0f MiB/s; ratio %.2fx (target >= 0.5x)", rt.name, t, s, t/s))
			})

			b.Run("create", func(b *testing.B) {
				n := min(b.N, rt.maxCreates/2)
				create := func(network *apitype.Network) (time.Duration, error) {
					start := time.Now()
					s, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.name, Network: network})
					if err != nil {
						return 0, err
					}
					defer c.DeleteSandbox(context.WithoutCancel(ctx), s.ID)
					cmd, err := c.ExecWait(ctx, s.ID, apitype.CreateCommandRequest{Command: "echo ready"}, client.CommandQuery{WaitMS: 10000})
					if err != nil {
						return 0, err
					}
					if err := waitOutput(ctx, c, s.ID, cmd); err != nil {
						return 0, err
					}
					return time.Since(start), nil
				}
				var got, floor []time.Duration
				for i := range n + 1 {
					e, err := create(&apitype.Network{Mode: "egress"})
					if err != nil {
						b.Fatal(err)
					}
					f, err := create(nil)
					if err != nil {
						b.Fatal(err)
					}
					if i > 0 { // the first pair warms up
						got, floor = append(got, e), append(floor, f)
					}
				}
				report(b, rt.name+" cold create to first output, egress", got, "network none", floor, "<= +10ms p50")
				logSummary(b, fmt.Sprintf("  p50 difference %+.1fms", ms(percentile(got, 50)-percentile(floor, 50))))
			})

			b.Run("memory", func(b *testing.B) {
				const k = 10
				rss := func() int64 {
					runtime.GC()
					debug.FreeOSMemory()
					time.Sleep(200 * time.Millisecond)
					return vmRSS(b)
				}
				hold := func(network *apitype.Network) int64 {
					before := rss()
					var ids []string
					for range k {
						s, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.name, Network: network})
						if err != nil {
							b.Fatal(err)
						}
						ids = append(ids, s.ID)
					}
					after := rss()
					for _, id := range ids {
						_ = c.DeleteSandbox(context.WithoutCancel(ctx), id)
					}
					return after - before
				}
				none := hold(nil)
				egress := hold(&apitype.Network{Mode: "egress"})
				per := float64(egress-none) / k / (1 << 20)
				b.ReportMetric(per, "MiB/sandbox")
				b.ReportMetric(0, "ns/op")
				logSummary(b, fmt.Sprintf("%s egress: the daemon's memory per idle egress sandbox beyond a none one: %.2f MiB (%d of each; target <= 1 MiB)", rt.name, per, k))
			})
		})
	}
}

// seconds parses one duration in seconds per line.
func seconds(b *testing.B, out string) []time.Duration {
	var ds []time.Duration
	for _, f := range strings.Fields(out) {
		s, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatalf("parsing %q: %v", f, err)
		}
		ds = append(ds, time.Duration(s*float64(time.Second)))
	}
	return ds
}

func number(b *testing.B, out string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		b.Fatalf("parsing %q: %v", out, err)
	}
	return f
}

// vmRSS is this process's resident memory, in bytes.
func vmRSS(b *testing.B) int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
