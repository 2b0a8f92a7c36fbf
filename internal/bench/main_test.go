package bench

import (
	"testing"

	"github.com/berthdev/berth/internal/testenv"
)

// TestMain stops the test Postgres (cluster_test.go) after the benchmarks.
func TestMain(m *testing.M) { testenv.PostgresMain(m) }
