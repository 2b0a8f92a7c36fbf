package runner

import (
	"image/color"
	"slices"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/jobspec"
)

func TestScratchAB(t *testing.T) {
	var fs []*fixture
	for i := 0; i < 2; i++ {
		f := newFixture(t, jobspec.ProfileBrowser)
		f.copyTree("testdata/threepage")
		f.write("img/logo.png", pngBytes(t, 40, 20, color.RGBA{200, 30, 30, 255}))
		f.r.chrome.lean = i == 0
		// replace the pre-made tab
		f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF}, resultPDF, "application/pdf")
		fs = append(fs, f)
	}
	ds := [2][]time.Duration{}
	for range 25 {
		for i, f := range fs {
			time.Sleep(150 * time.Millisecond)
			t0 := time.Now()
			f.mustRun(jobspec.Request{Action: jobspec.HTMLPDF}, resultPDF, "application/pdf")
			ds[i] = append(ds[i], time.Since(t0))
		}
	}
	for i := range ds {
		slices.Sort(ds[i])
		t.Logf("lean=%v p50 %v p25 %v", i == 0, ds[i][len(ds[i])/2], ds[i][len(ds[i])/4])
	}
}
