package runner

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/jobspec"
	"github.com/berthdev/berth/internal/testenv"
)

// bigCSV is a spreadsheet LibreOffice takes several seconds to load.
func bigCSV() []byte {
	var csv bytes.Buffer
	for i := range 200000 {
		fmt.Fprintf(&csv, "%d,row %d,%d.5\n", i, i, i*3)
	}
	return csv.Bytes()
}

// TestOfficeHangAndCrash: a conversion that outlives the job's timeout,
// and one during which LibreOffice dies, fail with their own reasons
// (timeout; office_crashed, which the daemon retries once), leave no
// process behind, and leave the runner unhealthy (office_lost), so the
// daemon discards its runtime. The control: a small document converts
// first in each runner.
func TestOfficeHangAndCrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		kill   bool
		status int
		reason string
	}{
		{"hang", false, http.StatusGatewayTimeout, "timeout"},
		{"crash", true, http.StatusServiceUnavailable, "office_crashed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, jobspec.ProfileOffice)
			f.write("small.docx", testenv.DOCX("Control"))
			f.write("big.csv", bigCSV())
			f.mustRun(jobspec.Request{Action: jobspec.OfficePDF, Main: "small.docx"}, resultPDF, "application/pdf")
			f.r.mu.Lock()
			o := f.r.office
			f.r.mu.Unlock()
			req := jobspec.Request{Action: jobspec.OfficePDF, Main: "big.csv"}
			if !tc.kill {
				req.TimeoutMS = 1500
			}
			done := make(chan response, 1)
			go func() { done <- f.run(req) }()
			if tc.kill {
				testenv.Eventually(t, 20*time.Second, "the conversion to start", func() bool {
					m, _ := filepath.Glob(filepath.Join(o.dir, "job-*", "in", "big.csv"))
					return len(m) > 0
				})
				time.Sleep(300 * time.Millisecond)
				for _, pid := range testenv.ProcessesUnder(o.profile[len("file://"):]) {
					_ = syscall.Kill(pid, syscall.SIGKILL) // soffice.bin and its launcher
				}
			}
			select {
			case r := <-done:
				wantFailure(t, r, tc.status, tc.reason, true)
			case <-time.After(60 * time.Second):
				t.Fatal("the job did not end")
			}
			if ps := testenv.ProcessesUnder(o.dir); len(ps) > 0 {
				t.Errorf("processes %v of the office outlived the failed job", ps)
			}
			var lost *failure
			if _, err := f.r.health(); !errors.As(err, &lost) || lost.f.Reason != "office_lost" {
				t.Errorf("health after the failed job = %v, want office_lost", err)
			}
			wantFailure(t, f.run(jobspec.Request{Action: jobspec.OfficePDF, Main: "small.docx"}),
				http.StatusServiceUnavailable, "office_lost", true)
		})
	}
}
