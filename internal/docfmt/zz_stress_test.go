package docfmt_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/berthdev/berth/internal/docfmt"
)

func TestStressTiming(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	seeds := validPDFs()
	var worst time.Duration
	for i := range 30000 {
		b := bytes.Clone(seeds[rng.IntN(len(seeds))].pdf)
		for range 1 + rng.IntN(8) {
			switch rng.IntN(4) {
			case 0:
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			case 1:
				p := rng.IntN(len(b))
				b = append(b[:p], append([]byte{"0123456789 []<>/R"[rng.IntN(17)]}, b[p:]...)...)
			case 2:
				p := rng.IntN(len(b))
				q := min(len(b), p+rng.IntN(64))
				b = append(b[:p], b[q:]...)
			case 3:
				p := rng.IntN(len(b))
				b[p] = "0123456789"[rng.IntN(10)]
			}
		}
		start := time.Now()
		docfmt.PDF(bytes.NewReader(b), int64(len(b)))
		if d := time.Since(start); d > worst {
			worst = d
			t.Logf("iter %d: %v", i, d)
			if d > 100*time.Millisecond {
				os.WriteFile("/tmp/slow.pdf", b, 0o644)
			}
		}
	}
}
