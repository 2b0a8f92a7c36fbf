package daemon_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/daemon"
	"github.com/berthdev/berth/internal/testenv"
)

// TestJobRuntimeCPU: a runtime the pool starts ahead runs at a low CPU
// weight (so that starting it does not slow a job that has a runtime) and
// gets a job's full weight when a job takes it; the CPU each runtime used
// to start, and in all, is in the metrics.
func TestJobRuntimeCPU(t *testing.T) {
	needJobs(t)
	t.Parallel()
	d := testenv.StartDaemon(t, func(c *daemon.Config) {
		c.JobPools = map[string]int{"browser": 1, "office": 0, "pdf": 0}
	})
	// The pooled runtime is the one sandbox under the data directory
	// until a job takes it.
	var id string
	testenv.Eventually(t, 2*time.Minute, "a pooled browser runtime", func() bool {
		entries, _ := os.ReadDir(filepath.Join(d.DataDir, "sandboxes"))
		if len(entries) != 1 {
			return false
		}
		id = entries[0].Name()
		return metricCount(t, d, `berth_job_runtime_start_cpu_seconds_count{profile="browser"}`) >= 1
	})
	shares := filepath.Join("/sys/fs/cgroup/cpu/berth", id, "cpu.shares")
	if _, err := os.Stat(shares); err != nil {
		testenv.Missing(t, "no cgroup v1 cpu controller for the sandbox here: %v", err)
	}
	if got := readTrim(shares); got != "102" {
		t.Errorf("the pooled runtime's cpu.shares = %s, want 102", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	in := map[string]apitype.JobInput{"index.html": inline([]byte(`<html><body>WEIGHT</body></html>`))}
	j, err := d.Client.CreateJob(ctx, apitype.CreateJobRequest{Action: "html-pdf", Inputs: in,
		Options: []byte(`{"wait_delay_ms": 4000}`)})
	if err != nil {
		t.Fatal(err)
	}
	// While the job waits in its page, its runtime has a job's weight.
	testenv.Eventually(t, time.Minute, "the job's runtime at the default CPU weight", func() bool {
		return readTrim(shares) == "1024"
	})
	if j, err = d.Client.WaitJob(ctx, j.ID); err != nil || j.State != apitype.JobSucceeded {
		t.Fatalf("job = %s, %+v, %v; want succeeded", j.State, j.Error, err)
	}
	testenv.Eventually(t, time.Minute, "the discarded runtime's CPU in the metrics", func() bool {
		return metricCount(t, d, `berth_job_runtime_cpu_seconds_count{profile="browser"}`) >= 1
	})
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// metricCount returns the value of the series named exactly by series in
// the daemon's /metrics, or 0.
func metricCount(t *testing.T, d *testenv.Daemon, series string) float64 {
	t.Helper()
	r := sendProbe(t, d, httpProbe{method: "GET", path: "/metrics", auth: bearerAuth(d.Token)})
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d", r.status)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(r.body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
