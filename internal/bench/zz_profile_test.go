package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/jobs"
)

func machineCPU() float64 {
	b, _ := os.ReadFile("/proc/stat")
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += n
	}
	return busy / 100
}

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func selfChildrenCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func BenchmarkZZProfileHTML(b *testing.B) {
	needJobs(b)
	fresh := jobsDaemon(b, map[string]int{"browser": jobs.DefaultPools["browser"], "office": 0}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req := apitype.CreateJobRequest{Action: "html-pdf", Inputs: map[string]apitype.JobInput{
		"index.html": {ContentBase64: base64.StdEncoding.EncodeToString([]byte(threePageHTML))}}}
	waitPool(ctx, b, fresh.Client)
	m0, s0, c0 := machineCPU(), selfCPU(), selfChildrenCPU()
	rate := throughput(ctx, b, fresh.Client, req)
	m1, s1, c1 := machineCPU(), selfCPU(), selfChildrenCPU()
	n := float64(rate.n)
	b.Logf("rate %s; per job: machine %.3f s, test process (daemon+client) %.3f s, reaped children %.3f s", rate, (m1-m0)/n, (s1-s0)/n, (c1-c0)/n)
	fmt.Println()
}
