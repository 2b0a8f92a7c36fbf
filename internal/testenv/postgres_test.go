package testenv_test

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/berthdev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.PostgresMain(m) }

// TestPostgres: each call gives a database of its own, empty and
// writable, that is dropped when its test ends.
func TestPostgres(t *testing.T) {
	t.Parallel()
	testenv.OnePass(t)
	ctx := context.Background()
	var first string
	t.Run("a", func(t *testing.T) {
		first = testenv.Postgres(t)
		db, err := sql.Open("pgx", first)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("tables in a fresh database = %d, %v; want 0", n, err)
		}
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (x BIGINT)`); err != nil {
			t.Fatal(err)
		}
	})
	second := testenv.Postgres(t)
	if second == first {
		t.Fatalf("two calls gave one database: %s", first)
	}
	db, err := sql.Open("pgx", second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exists := func(dsn string) bool {
		t.Helper()
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`,
			strings.TrimPrefix(u.Path, "/")).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if exists(first) {
		t.Errorf("database %s exists after its test ended, want dropped", first)
	}
	if !exists(second) { // the positive control: the probe finds a live one
		t.Errorf("database %s of the running test is not listed", second)
	}
}
