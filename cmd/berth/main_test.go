package main_test

import (
	"testing"

	"github.com/berthdev/berth/internal/testenv"
)

// TestMain stops the test Postgres (TestWorkersHQ) after the tests.
func TestMain(m *testing.M) { testenv.PostgresMain(m) }
