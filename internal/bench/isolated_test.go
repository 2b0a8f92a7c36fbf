package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/testenv"
)

// isolatedRuntimes are the runtimes the isolated benchmarks run on, with
// their bounds: creates per run of the cold-create benchmark, and idle
// sandboxes held by the idle-overhead one.
var isolatedRuntimes = []struct {
	name       string
	maxCreates int
	idle       int
}{
	{"container", 40, 10},
	{"gvisor", 20, 5},
}

// maxExecs bounds the isolated exec round-trip benchmark's iterations.
const maxExecs = 2000

// coldResult is what one runtime's cold-create sub-benchmark measured,
// kept for the side-by-side summary.
type coldResult struct {
	program string // the OCI program that ran the sandboxes
	got     []time.Duration
	peers   []peer
}

// peer is a floor or a peer measured in the same run.
type peer struct {
	prefix, what string
	got          []time.Duration
}

// BenchmarkColdCreateIsolated measures a new container or gVisor sandbox
// to the first output of its first command (`echo ready`, by ExecWait);
// deleting it is not counted. Peers run interleaved with the creates, on
// a minimal bundle (/usr bound read-only, default spec): for container
// `crun run` and `runc run` of /bin/true and bwrap of /bin/true, for
// gvisor `runsc run` of /bin/true. On a hybrid cgroup host crun is run
// the way Berth runs it, in a private mount namespace without the v2 tree
// (unshare + sh + umount). A last sub-benchmark, summary, shows them all
// side by side.
func BenchmarkColdCreateIsolated(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	results := map[string]*coldResult{}
	for _, rt := range isolatedRuntimes {
		b.Run(rt.name, func(b *testing.B) {
			needIsolated(b, d, rt.name)
			res := benchColdCreate(b, d, rt.name, min(b.N, rt.maxCreates))
			if b.N > 1 {
				results[rt.name] = res
			}
		})
	}
	// The parent's own log is not shown when it has sub-benchmarks, so
	// the side-by-side view is one more.
	b.Run("summary", func(b *testing.B) {
		if len(results) == 0 {
			b.Skip("no runtime was measured")
		}
		logColdSummary(b, results)
	})
}

func benchColdCreate(b *testing.B, d *testenv.Daemon, rt string, n int) *coldResult {
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	one := createToFirstOutput(ctx, b, c, rt)
	// Warm up, untimed: the first create builds the host template.
	for range 2 {
		if _, err := one(); err != nil {
			b.Fatal(err)
		}
	}

	// The peers run interleaved with the creates, one of each per
	// iteration, so that load from elsewhere on the machine weighs on
	// both alike.
	bundle := minimalBundle(b)
	var runners []*peerRunner
	if rt == "gvisor" {
		runners = append(runners, runscRunTrue(b, bundle))
	} else {
		runners = append(runners, crunRunTrue(b, bundle), runcRunTrue(b, bundle), bwrapTrue(b))
	}
	runners = slices.DeleteFunc(runners, func(r *peerRunner) bool { return r == nil })
	if len(runners) == 0 {
		runners = append(runners, &peerRunner{what: "fork+exec /bin/true",
			run: func() error { return exec.Command("/bin/true").Run() }})
	}
	for _, r := range runners {
		if err := r.run(); err != nil { // warm-up, and the check that it runs here
			b.Fatal(err)
		}
	}

	got := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		dur, err := one()
		if err != nil {
			b.Fatal(err)
		}
		got = append(got, dur)
		b.StopTimer()
		for _, r := range runners {
			start := time.Now()
			if err := r.run(); err != nil {
				b.Fatal(err)
			}
			r.got = append(r.got, time.Since(start))
		}
		b.StartTimer()
	}
	b.StopTimer()

	res := &coldResult{program: ociProgram(d, rt), got: got}
	for _, r := range runners {
		res.peers = append(res.peers, peer{r.prefix, r.what, r.got})
	}

	what := fmt.Sprintf("%s (%s) create to first output", rt, res.program)
	target := ""
	if rt == "container" {
		target = "p50 <= 60ms"
	}
	first := res.peers[0]
	report(b, what, got, first.what, first.got, target)
	for _, p := range res.peers[1:] {
		reportFloor(b, p.prefix, p.what, p.got, got)
	}
	return res
}

// logColdSummary prints the runtimes and their peers side by side, and
// reports their p50s and p50 ratios as metrics.
func logColdSummary(b *testing.B, results map[string]*coldResult) {
	b.Helper()
	var lines []string
	row := func(what string, ds []time.Duration) {
		lines = append(lines, fmt.Sprintf("  %-58s p50 %8.2fms  p99 %8.2fms  (n=%d)",
			what, ms(percentile(ds, 50)), ms(percentile(ds, 99)), len(ds)))
	}
	p50s := map[string]time.Duration{}
	seen := map[string]bool{}
	var peers []peer
	for _, rt := range isolatedRuntimes {
		res := results[rt.name]
		if res == nil {
			lines = append(lines, fmt.Sprintf("  %-58s skipped", rt.name+" create to first output"))
			continue
		}
		row(fmt.Sprintf("%s (%s) create to first output", rt.name, res.program), res.got)
		p50s[rt.name] = percentile(res.got, 50)
		b.ReportMetric(ms(p50s[rt.name]), rt.name+"-p50-ms")
		b.ReportMetric(ms(percentile(res.got, 99)), rt.name+"-p99-ms")
		for _, p := range res.peers {
			if !seen[p.what] {
				seen[p.what] = true
				peers = append(peers, p)
			}
		}
	}
	for _, p := range peers {
		row(p.what, p.got)
		p50s[p.prefix] = percentile(p.got, 50)
		b.ReportMetric(ms(p50s[p.prefix]), p.prefix+"p50-ms")
	}
	var ratios []string
	for _, r := range []struct{ a, b string }{
		{"container", "crun-"}, {"container", "runc-"}, {"container", "bwrap-"},
		{"gvisor", "runsc-"}, {"gvisor", "container"},
	} {
		if p50s[r.a] > 0 && p50s[r.b] > 0 {
			what := r.a + "/" + strings.TrimSuffix(r.b, "-")
			ratios = append(ratios, fmt.Sprintf("%s %.1fx", what, ratio(p50s[r.a], p50s[r.b])))
			b.ReportMetric(ratio(p50s[r.a], p50s[r.b]), strings.ReplaceAll(what, "/", "-vs-")+"-ratio-p50")
		}
	}
	if len(ratios) > 0 {
		lines = append(lines, "  p50 ratios: "+strings.Join(ratios, ", "))
	}
	if p, ok := p50s["container"]; ok {
		verdict := "met"
		if p > 60*time.Millisecond {
			verdict = "NOT met"
		}
		lines = append(lines, fmt.Sprintf("  target container p50 <= 60ms: %s (%.2fms)", verdict, ms(p)))
	}
	b.ReportMetric(0, "ns/op")
	logSummary(b, "cold create, side by side:\n"+strings.Join(lines, "\n"))
}

// BenchmarkExecRoundTripIsolated measures `true` on a running container
// or gVisor sandbox, API to result, in one ExecWait call. The floor is
// fork+exec of /bin/true from Go.
func BenchmarkExecRoundTripIsolated(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	for _, rt := range isolatedRuntimes {
		b.Run(rt.name, func(b *testing.B) {
			needIsolated(b, d, rt.name)
			c := d.Client
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.name})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
					b.Error(err)
				}
			}()
			roundTrip := func() error {
				cmd, err := c.ExecWait(ctx, sb.ID, apitype.CreateCommandRequest{Argv: []string{"true"}},
					client.CommandQuery{WaitMS: 10000})
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
			n := min(b.N, maxExecs)
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
			report(b, rt.name+" exec round trip", got, "fork+exec /bin/true", floor, "p50 <= 3ms")
		})
	}
}

// idleTargetMiB is DESIGN.md's bound on an idle sandbox's overhead.
const idleTargetMiB = 3.0

// BenchmarkIdleOverhead holds a few idle container or gVisor sandboxes,
// waits for them to settle, and reads what each costs: its memory
// cgroup's usage (and the rss/cache split of it), and the RSS and PSS of
// the processes in the cgroup (for container, the agent alone). PSS
// shares the pages of the berth binary, which every agent maps, among
// them, so it is the fairer per-sandbox figure. Each run does the same
// bounded work whatever b.N.
func BenchmarkIdleOverhead(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	for _, rt := range isolatedRuntimes {
		b.Run(rt.name, func(b *testing.B) {
			needIsolated(b, d, rt.name)
			benchIdle(b, d, rt.name, rt.idle)
		})
	}
}

func benchIdle(b *testing.B, d *testenv.Daemon, rt string, n int) {
	c := d.Client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ids []string
	defer func() {
		for _, id := range ids {
			if err := c.DeleteSandbox(ctx, id); err != nil {
				b.Errorf("deleting %s: %v", id, err)
			}
		}
	}()
	for range n {
		sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, sb.ID)
		// One command, so that the agent has served once, as a real
		// sandbox's has.
		cmd, err := c.ExecWait(ctx, sb.ID, apitype.CreateCommandRequest{Argv: []string{"echo", "ready"}},
			client.CommandQuery{WaitMS: 10000})
		if err != nil {
			b.Fatal(err)
		}
		if err := waitOutput(ctx, c, sb.ID, cmd); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)

	var usage, cgRSS, cgCache, rss, pss []float64
	var procsSeen string
	for _, id := range ids {
		dir := memoryCgroupDir(id)
		if dir == "" {
			b.Fatalf("sandbox %s: no memory cgroup found under /sys/fs/cgroup", id)
		}
		u, err := readMiBFile(dir, "memory.usage_in_bytes", "memory.current")
		if err != nil {
			b.Fatalf("sandbox %s: %v", id, err)
		}
		usage = append(usage, u)
		stat := readKV(filepath.Join(dir, "memory.stat"))
		if v, ok := stat["total_rss"]; ok { // v1
			cgRSS = append(cgRSS, float64(v)/(1<<20))
			cgCache = append(cgCache, float64(stat["total_cache"])/(1<<20))
		} else if v, ok := stat["anon"]; ok { // v2
			cgRSS = append(cgRSS, float64(v)/(1<<20))
			cgCache = append(cgCache, float64(stat["file"])/(1<<20))
		}
		pids := cgroupProcs(dir)
		if rt == "container" {
			pids = slices.DeleteFunc(pids, func(pid int) bool {
				return !strings.Contains(cmdline(pid), "agent")
			})
			if len(pids) != 1 {
				b.Fatalf("sandbox %s: want one agent in its cgroup, found %v", id, pids)
			}
		}
		if len(pids) == 0 {
			b.Fatalf("sandbox %s: no process in its cgroup %s", id, dir)
		}
		var r, p float64
		var names []string
		for _, pid := range pids {
			pr, pp, err := procMemory(pid)
			if err != nil {
				b.Fatalf("sandbox %s: pid %d: %v", id, pid, err)
			}
			r += pr
			p += pp
			names = append(names, fmt.Sprintf("%s %.1f/%.1f", procName(pid), pr, pp))
		}
		rss = append(rss, r)
		pss = append(pss, p)
		if procsSeen == "" {
			procsSeen = strings.Join(names, ", ")
		}
	}

	who := "agent"
	if rt != "container" {
		who = "cgroup procs"
	}
	b.ReportMetric(meanF(usage), "cgroup-mean-MiB")
	b.ReportMetric(p50F(usage), "cgroup-p50-MiB")
	b.ReportMetric(meanF(rss), "rss-mean-MiB")
	b.ReportMetric(p50F(rss), "rss-p50-MiB")
	b.ReportMetric(meanF(pss), "pss-mean-MiB")
	b.ReportMetric(p50F(pss), "pss-p50-MiB")
	b.ReportMetric(0, "ns/op")
	line := fmt.Sprintf("%s idle overhead (n=%d, after 2s): memory cgroup mean %.2f MiB p50 %.2f MiB",
		rt, n, meanF(usage), p50F(usage))
	if len(cgRSS) > 0 {
		line += fmt.Sprintf(" (of which rss p50 %.2f, cache p50 %.2f)", p50F(cgRSS), p50F(cgCache))
	}
	line += fmt.Sprintf("; %s RSS mean %.2f MiB p50 %.2f MiB; %s PSS mean %.2f MiB p50 %.2f MiB; target <= %.0f MiB: cgroup p50 %.1fx, PSS p50 %.1fx",
		who, meanF(rss), p50F(rss), who, meanF(pss), p50F(pss), idleTargetMiB,
		p50F(usage)/idleTargetMiB, p50F(pss)/idleTargetMiB)
	line += "; first sandbox's processes (RSS/PSS MiB): " + procsSeen
	// Unlike the latency benchmarks, each run's numbers mean something
	// whatever b.N, but one line per configuration is enough.
	logSummary(b, line)
}

// needIsolated skips b (fails it under CI) unless runtime rt can run
// here and the daemon says it is available.
func needIsolated(b *testing.B, d *testenv.Daemon, rt string) {
	b.Helper()
	testenv.NeedRuntime(b, rt)
	sys, err := d.Client.System(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, info := range sys.Runtimes {
		if info.Name == rt {
			if !info.Available {
				testenv.Missing(b, "runtime %s: %s %s", rt, info.Reason, info.Fix)
			}
			return
		}
	}
	testenv.Missing(b, "the daemon has no runtime %s", rt)
}

// ociProgram names the OCI runtime program the daemon ran rt's sandboxes
// with, from the state directories it keeps under <data>/oci.
func ociProgram(d *testenv.Daemon, rt string) string {
	if rt == "gvisor" {
		return "runsc"
	}
	for _, p := range []string{"crun", "runc"} {
		if _, err := os.Stat(filepath.Join(d.DataDir, "oci", p)); err == nil {
			return p
		}
	}
	return "?"
}

// cgroupHybrid reports whether the host mounts cgroup v1 with an empty v2
// tree at /sys/fs/cgroup/unified, which crun refuses.
func cgroupHybrid() bool {
	const cgroup2Magic = 0x63677270
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) != nil || st.Type == cgroup2Magic {
		return false
	}
	return syscall.Statfs("/sys/fs/cgroup/unified", &st) == nil && st.Type == cgroup2Magic
}

// minimalBundle writes an OCI bundle that runs /bin/true: the default
// spec of `crun spec` (or `runc spec`, `runsc spec`) without a terminal, on a read-only
// root of empty directories, the usual symbolic links into /usr, and /usr
// bound read-only from the host. It lives in a temporary directory of b.
func minimalBundle(b *testing.B) string {
	b.Helper()
	bundle := filepath.Join(testenv.ShortTempDir(b), "b")
	rootfs := filepath.Join(bundle, "rootfs")
	for _, dir := range []string{"usr", "proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, dir), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if err := os.Symlink("usr/"+l, filepath.Join(rootfs, l)); err != nil {
			b.Fatal(err)
		}
	}
	var specOut []byte
	for _, prog := range []string{"crun", "runc", "runsc"} {
		if _, err := exec.LookPath(prog); err != nil {
			continue
		}
		cmd := exec.Command(prog, "spec")
		cmd.Dir = bundle
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s spec: %v: %s", prog, err, out)
		}
		var err error
		if specOut, err = os.ReadFile(filepath.Join(bundle, "config.json")); err != nil {
			b.Fatal(err)
		}
		break
	}
	if specOut == nil {
		testenv.Missing(b, "none of crun, runc and runsc is installed to write a default spec")
	}
	var spec specs.Spec
	if err := json.Unmarshal(specOut, &spec); err != nil {
		b.Fatalf("parsing the default spec: %v", err)
	}
	spec.Process.Terminal = false
	spec.Process.Args = []string{"/bin/true"}
	spec.Root = &specs.Root{Path: rootfs, Readonly: true}
	spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/usr", Type: "bind", Source: "/usr",
		Options: []string{"rbind", "ro", "nosuid", "nodev"}})
	out, err := json.MarshalIndent(&spec, "", "\t")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), out, 0o600); err != nil {
		b.Fatal(err)
	}
	return bundle
}

// peerRunner runs one peer once; got collects its times.
type peerRunner struct {
	prefix, what string
	run          func() error
	got          []time.Duration
}

// ociRunTrue runs `<argv> --root R run --bundle bundle <id>`, each time a
// fresh container named by this process and a counter, in a state root
// of its own. A failed run's container is deleted by force.
func ociRunTrue(b *testing.B, prefix, what string, argv []string, bundle string) *peerRunner {
	b.Helper()
	// ShortTempDir's cleanup also unmounts the null-netns bind mount
	// that runsc --network=none leaves in its state root.
	root := filepath.Join(testenv.ShortTempDir(b), "r")
	base := fmt.Sprintf("bb%d-%s", os.Getpid(), strings.TrimSuffix(prefix, "-"))
	i := 0
	run := func() error {
		i++
		id := fmt.Sprintf("%s-%d", base, i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		args := append(slices.Clone(argv), "--root", root, "run", "--bundle", bundle, id)
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			del := append(slices.Clone(argv), "--root", root, "delete", "--force", id)
			_ = exec.Command(del[0], del[1:]...).Run()
			return fmt.Errorf("%s: %v: %s", what, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return &peerRunner{prefix: prefix, what: what, run: run}
}

func crunRunTrue(b *testing.B, bundle string) *peerRunner {
	b.Helper()
	bin, err := exec.LookPath("crun")
	if err != nil {
		b.Log("crun is not installed: no crun peer")
		return nil
	}
	argv, what := []string{bin}, "crun run /bin/true"
	if cgroupHybrid() {
		// As Berth runs it on this host: crun refuses hybrid hosts, and
		// sees plain v1 in a mount namespace without the v2 tree.
		argv = []string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
			`umount /sys/fs/cgroup/unified 2>/dev/null; exec "$0" "$@"`, bin}
		what = "crun run /bin/true (via unshare+sh+umount: hybrid cgroups)"
	}
	return ociRunTrue(b, "crun-", what, argv, bundle)
}

func runcRunTrue(b *testing.B, bundle string) *peerRunner {
	b.Helper()
	bin, err := exec.LookPath("runc")
	if err != nil {
		b.Log("runc is not installed: no runc peer")
		return nil
	}
	return ociRunTrue(b, "runc-", "runc run /bin/true", []string{bin}, bundle)
}

func runscRunTrue(b *testing.B, bundle string) *peerRunner {
	b.Helper()
	bin, err := exec.LookPath("runsc")
	if err != nil {
		b.Log("runsc is not installed: no runsc peer")
		return nil
	}
	// Global flags as Berth passes them, but for its host-uds and seccomp
	// options, which /bin/true does not need.
	return ociRunTrue(b, "runsc-", "runsc run /bin/true (systrap, network none)",
		[]string{bin, "--platform=systrap", "--network=none"}, bundle)
}

func bwrapTrue(b *testing.B) *peerRunner {
	b.Helper()
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		b.Log("bwrap is not installed: no bwrap peer")
		return nil
	}
	run := func() error {
		out, err := exec.Command(bin, "--unshare-all", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--proc", "/proc", "--dev", "/dev", "true").CombinedOutput()
		if err != nil {
			return fmt.Errorf("bwrap true: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return &peerRunner{prefix: "bwrap-", what: "bwrap --unshare-all /bin/true", run: run}
}

// memoryCgroupDir is sandbox id's memory cgroup: v1's memory controller,
// or the unified tree; "" if neither exists.
func memoryCgroupDir(id string) string {
	for _, dir := range []string{"/sys/fs/cgroup/memory/berth/" + id, "/sys/fs/cgroup/berth/" + id} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir
		}
	}
	return ""
}

// readMiBFile reads the first of names that exists in dir, a byte count,
// in MiB.
func readMiBFile(dir string, names ...string) (float64, error) {
	for _, name := range names {
		bs, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(bs)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s: %v", dir, name, err)
		}
		return float64(v) / (1 << 20), nil
	}
	return 0, fmt.Errorf("none of %v in %s", names, dir)
}

// readKV reads a "key value" file such as memory.stat.
func readKV(path string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// cgroupProcs lists the live processes in the cgroup at dir.
func cgroupProcs(dir string) []int {
	bs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(bs)) {
		if pid, err := strconv.Atoi(f); err == nil && cmdline(pid) != "" {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) string {
	bs, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(strings.TrimRight(string(bs), "\x00"), "\x00", " ")
}

// procName names a process for people: runsc's re-executions of itself
// (comm "exe") by their subcommand.
func procName(pid int) string {
	args := strings.Fields(cmdline(pid))
	for _, sub := range []string{"boot", "gofer", "agent"} {
		if slices.Contains(args, sub) {
			if base := filepath.Base(args[0]); !strings.Contains(base, sub) {
				return base + " " + sub
			}
			return filepath.Base(args[0])
		}
	}
	bs, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(bs))
}

// procMemory returns a process's RSS (VmRSS in status) and PSS (Pss in
// smaps_rollup), in MiB.
func procMemory(pid int) (rss, pss float64, err error) {
	p := "/proc/" + strconv.Itoa(pid)
	kib := func(file, key string) (float64, error) {
		bs, err := os.ReadFile(filepath.Join(p, file))
		if err != nil {
			return 0, err
		}
		for line := range strings.Lines(string(bs)) {
			if rest, ok := strings.CutPrefix(line, key+":"); ok {
				fields := strings.Fields(rest)
				if len(fields) == 0 {
					break
				}
				v, err := strconv.ParseFloat(fields[0], 64)
				return v / 1024, err
			}
		}
		return 0, fmt.Errorf("no %s in %s/%s", key, p, file)
	}
	if rss, err = kib("status", "VmRSS"); err != nil {
		return 0, 0, err
	}
	if pss, err = kib("smaps_rollup", "Pss"); err != nil {
		return 0, 0, err
	}
	return rss, pss, nil
}

func meanF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// p50F is the median of xs by the nearest-rank method, as percentile.
func p50F(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[(len(s)+1)/2-1]
}

// BenchmarkPauseResume measures pausing and resuming a running isolated
// sandbox through the API (the daemon runs the OCI runtime's pause and
// resume). The summary line reports pause with resume, measured in the
// same run, in the column of the floor. Target: each <= 10 ms.
func BenchmarkPauseResume(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	for _, rt := range isolatedRuntimes {
		b.Run(rt.name, func(b *testing.B) {
			needIsolated(b, d, rt.name)
			c := d.Client
			ctx := context.Background()
			sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.name})
			if err != nil {
				b.Fatal(err)
			}
			defer c.DeleteSandbox(ctx, sb.ID)
			n := min(b.N, 200)
			var pauses, resumes []time.Duration
			b.ResetTimer()
			for range n {
				start := time.Now()
				if _, err := c.PauseSandbox(ctx, sb.ID); err != nil {
					b.Fatal(err)
				}
				pauses = append(pauses, time.Since(start))
				start = time.Now()
				if _, err := c.ResumeSandbox(ctx, sb.ID); err != nil {
					b.Fatal(err)
				}
				resumes = append(resumes, time.Since(start))
			}
			b.StopTimer()
			report(b, rt.name+" pause", pauses, "(not a floor) "+rt.name+" resume", resumes, "each <= 10ms")
		})
	}
}

// BenchmarkWakeFromHibernation measures a hibernated sandbox to the
// output of its next command (the call wakes it), against a cold create
// to first output measured in the same run: waking reuses the sandbox's
// files. Target: <= 150 ms.
func BenchmarkWakeFromHibernation(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	for _, rt := range isolatedRuntimes {
		b.Run(rt.name, func(b *testing.B) {
			needIsolated(b, d, rt.name)
			c := d.Client
			ctx := context.Background()
			sb, err := c.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: rt.name})
			if err != nil {
				b.Fatal(err)
			}
			defer c.DeleteSandbox(ctx, sb.ID)
			n := min(b.N, 30)
			var wakes []time.Duration
			b.ResetTimer()
			for range n {
				b.StopTimer()
				if _, err := c.HibernateSandbox(ctx, sb.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				cmd, err := c.ExecWait(ctx, sb.ID, apitype.CreateCommandRequest{Argv: []string{"echo", "ready"}}, client.CommandQuery{WaitMS: 10000})
				if err == nil {
					err = waitOutput(ctx, c, sb.ID, cmd)
				}
				if err != nil {
					b.Fatal(err)
				}
				wakes = append(wakes, time.Since(start))
			}
			b.StopTimer()
			one := createToFirstOutput(ctx, b, c, rt.name)
			var creates []time.Duration
			for range n {
				dur, err := one()
				if err != nil {
					b.Fatal(err)
				}
				creates = append(creates, dur)
			}
			report(b, rt.name+" wake from hibernation to first output", wakes, "(peer) cold create to first output", creates, "<= 150ms")
		})
	}
}
