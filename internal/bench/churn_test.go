package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/testenv"
)

// maxChurn bounds the sandbox churn benchmark's create+delete cycles.
const maxChurn = 40

// BenchmarkSandboxChurnCPU measures the daemon's own CPU (this process's,
// where the test daemon runs) per create+delete of a container sandbox, the
// daemon's share of a job's cost: each cycle creates a sandbox, starts
// four background processes in it and runs one command, then deletes it;
// the run ends when every uid lease of the daemon is released (releases
// retried in the background count). The CPU of the OCI runtime's processes
// (crun, the daemon's children) is reported apart. A second run does the
// same with 400 more idle processes on the host, as on a busy host: the
// uid registry's scans of every process grow with them.
func BenchmarkSandboxChurnCPU(b *testing.B) {
	d := testenv.StartDaemon(b, nil)
	needIsolated(b, d, "container")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cycle := func() error {
		sb, err := d.Client.CreateSandbox(ctx, apitype.CreateSandboxRequest{Runtime: "container"})
		if err != nil {
			return err
		}
		cmd, err := d.Client.ExecWait(ctx, sb.ID, apitype.CreateCommandRequest{Argv: []string{"sh", "-c",
			"for i in 1 2 3 4; do sleep 1000 >/dev/null 2>&1 & done; echo ready"}}, client.CommandQuery{WaitMS: 10000})
		if err == nil {
			err = waitOutput(ctx, d.Client, sb.ID, cmd)
		}
		if derr := d.Client.DeleteSandbox(ctx, sb.ID); err == nil {
			err = derr
		}
		return err
	}
	if err := cycle(); err != nil { // warm-up: the host template
		b.Fatal(err)
	}
	registry := sandbox.NewUIDRegistry(testenv.UIDRegistry(b), 0, 0)
	run := func(b *testing.B) {
		n := min(b.N, maxChurn)
		self0, children0 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
		start := time.Now()
		for range n {
			if err := cycle(); err != nil {
				b.Fatal(err)
			}
		}
		// Releases held back by exiting processes are retried in the
		// background: their CPU counts too. Looked at seldom, as reading
		// the registry costs CPU here as well.
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			leases, err := registry.Leases()
			if err != nil {
				b.Fatal(err)
			}
			if !slices.ContainsFunc(leases, func(l sandbox.UIDLease) bool { return l.DataDir == d.DataDir }) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("after 90s: uid leases of the daemon still held")
			}
		}
		elapsed := time.Since(start)
		self := (rusage(syscall.RUSAGE_SELF) - self0) / time.Duration(n)
		children := (rusage(syscall.RUSAGE_CHILDREN) - children0) / time.Duration(n)
		b.ReportMetric(ms(self), "daemon-cpu-ms/sandbox")
		b.ReportMetric(ms(children), "runtime-cpu-ms/sandbox")
		b.ReportMetric(0, "ns/op")
		logSummary(b, fmt.Sprintf("%d processes on the host: per container sandbox created and deleted, daemon CPU %.1f ms, OCI runtime CPU %.1f ms (%d cycles, %.1f s, releases included)",
			hostProcesses(), ms(self), ms(children), n, elapsed.Seconds()))
	}
	b.Run("host", run)
	b.Run("busy", func(b *testing.B) {
		for range 400 {
			cmd := exec.Command("sleep", "1000")
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		}
		run(b)
	})
}

// rusage returns the user and system CPU of who (RUSAGE_SELF or
// RUSAGE_CHILDREN).
func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostProcesses counts the processes in /proc.
func hostProcesses() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(filepath.Base(e.Name())); err == nil {
			n++
		}
	}
	return n
}
