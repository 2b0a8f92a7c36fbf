package store_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/ident"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/testenv"
)

// The store's tests are one conformance suite: each runs on SQLite and on
// Postgres (a server the test binary starts, or $BERTH_TEST_POSTGRES),
// through forEachDialect. Those of SQLite's file tools (backup, restore,
// file modes, PRAGMAs) are named TestSQLite... and run on SQLite only.
func TestMain(m *testing.M) { testenv.PostgresMain(m) }

// opener opens a fresh, empty, migrated database of one dialect, closed
// when t ends.
type opener func(t *testing.T) *store.DB

// dialects are the targets a test can open: a new SQLite file in t's
// temporary directory, or a new Postgres database.
var dialects = []struct {
	name   string
	target func(t *testing.T) string
}{
	{store.SQLite, func(t *testing.T) string { return filepath.Join(t.TempDir(), "berth.db") }},
	{store.Postgres, func(t *testing.T) string { return testenv.Postgres(t) }},
}

// forEachDialect runs fn once per dialect, as parallel subtests named for
// the dialect, each with an opener of that dialect.
func forEachDialect(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, func(t *testing.T) *store.DB {
				t.Helper()
				return openTarget(t, d.target(t))
			})
		})
	}
}

// forEachTarget is forEachDialect for tests that open one target more than
// once: fn gets the target (a path or a DSN) of a fresh database.
func forEachTarget(t *testing.T, fn func(t *testing.T, target string)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d.target(t))
		})
	}
}

func openTarget(t *testing.T, target string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), target)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestDialect: a path opens SQLite, a postgres:// or postgresql:// URL
// opens Postgres.
func TestDialect(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]bool{
		"/var/lib/berth/berth.db": false, "berth.db": false, "postgres://h/db": true,
		"postgresql://u@h:5432/db?sslmode=disable": true, "postgres.db": false, "file:postgres://x": false,
	} {
		if got := store.IsPostgres(target); got != want {
			t.Errorf("IsPostgres(%q) = %v, want %v", target, got, want)
		}
	}
	forEachTarget(t, func(t *testing.T, target string) {
		db := openTarget(t, target)
		if got, want := db.Dialect(), filepath.Base(t.Name()); got != want {
			t.Errorf("Open(%s).Dialect() = %q, want %q", target, got, want)
		}
	})
}

// TestMigrateConcurrently: processes that start together on one new
// Postgres database (several workers of a cluster) all open it, and each
// migration is applied once. A SQLite database has one daemon at a time
// (the data directory's lock), so only Postgres is opened this way.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	target := testenv.Postgres(t)
	ctx := context.Background()
	const n = 4
	dbs := make([]*store.DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = store.Open(ctx, target) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d of %d at once: %v", i, n, err)
			continue
		}
		defer dbs[i].Close()
	}
	if t.Failed() {
		return
	}
	var versions, distinct int
	if err := dbs[0].SQL().QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).
		Scan(&versions, &distinct); err != nil {
		t.Fatal(err)
	}
	if versions == 0 || versions != distinct {
		t.Errorf("schema_migrations: %d rows, %d versions; want each version once", versions, distinct)
	}
}

// TestWideIntegers: sizes, byte counts and timeouts past 2^31 are kept
// (Postgres's INTEGER is 32 bits; the migrations' INTEGER is 64 on both).
func TestWideIntegers(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		sb := newSandbox(t, db, "")
		const big = 1 << 40
		c := &sandbox.CommandRecord{ID: ident.New("cmd_"), SandboxID: sb.ID, Status: apitype.CommandRunning,
			Argv: []string{"true"}, TimeoutMS: big, StdoutBytes: big + 1, StartedAt: time.Now().UTC()}
		if err := db.InsertCommand(ctx, c); err != nil {
			t.Fatalf("InsertCommand(timeout %d ms): %v", int64(big), err)
		}
		got, err := db.GetCommand(ctx, sb.ID, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("GetCommand (-want +got):\n%s", diff)
		}
		tpl := &sandbox.Template{ID: ident.New("tpl_"), Name: "big", State: "ready", Source: "built",
			SizeBytes: big, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
		if err := db.CreateTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
		if got, err := db.GetTemplate(ctx, "big"); err != nil || got.SizeBytes != big {
			t.Errorf("GetTemplate(big) = %+v, %v; want size %d", got, err, int64(big))
		}
	})
}

// TestCommandsConcurrently: commands inserted into one sandbox at once get
// distinct sequence numbers (ListCommands orders by them).
func TestCommandsConcurrently(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		sb := newSandbox(t, db, "")
		const n = 16
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				c := &sandbox.CommandRecord{ID: ident.New("cmd_"), SandboxID: sb.ID, Status: apitype.CommandRunning,
					Argv: []string{"true"}, TimeoutMS: 1000, StartedAt: time.Now().UTC()}
				if err := db.InsertCommand(ctx, c); err != nil {
					t.Errorf("InsertCommand: %v", err)
				}
			})
		}
		wg.Wait()
		var rows, seqs int
		if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT seq) FROM commands WHERE sandbox_id = $1`,
			sb.ID).Scan(&rows, &seqs); err != nil {
			t.Fatal(err)
		}
		if rows != n || seqs != n {
			t.Errorf("%d concurrent inserts: %d rows with %d distinct seqs, want %d and %d", n, rows, seqs, n, n)
		}
	})
}

// TestSQLiteOnlyTools: inspect, verify and backup, SQLite file tools,
// refuse a Postgres URL with sqlite_only instead of reading it as a
// missing file; the same calls on a SQLite file work (the positive
// control).
func TestSQLiteOnlyTools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const dsn = "postgres://berth@127.0.0.1:1/berth"
	if _, err := store.Inspect(ctx, dsn); !errcode.Has(err, errcode.SQLiteOnly) {
		t.Errorf("Inspect(postgres URL) = %v, want sqlite_only", err)
	}
	if _, err := store.Verify(ctx, dsn); !errcode.Has(err, errcode.SQLiteOnly) {
		t.Errorf("Verify(postgres URL) = %v, want sqlite_only", err)
	}
	dir := t.TempDir()
	if _, err := store.Backup(ctx, dsn, filepath.Join(dir, "copy.db")); !errcode.Has(err, errcode.SQLiteOnly) {
		t.Errorf("Backup(postgres URL) = %v, want sqlite_only", err)
	}
	path := filepath.Join(dir, "berth.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := store.Inspect(ctx, path); err != nil {
		t.Errorf("Inspect(SQLite file) = %v", err)
	}
	if _, err := store.Backup(ctx, path, filepath.Join(dir, "copy.db")); err != nil {
		t.Errorf("Backup(SQLite file) = %v", err)
	}
}

// TestMigrationTypeNames: the migrations spell the types Postgres's
// translation rewrites (INTEGER, BLOB, TEXT) in upper case, outside
// comments; a lower-case one would stay 32-bit, binary-less or
// locale-ordered on Postgres.
func TestMigrationTypeNames(t *testing.T) {
	t.Parallel()
	lower := regexp.MustCompile(`(?i)\b(integer|blob|text)\b`)
	if got := lower.FindAllString("x integer NOT NULL, -- y", -1); len(got) != 1 { // the probe's control
		t.Fatalf("the probe finds %q in a lower-case column, want integer", got)
	}
	names, err := fs.Glob(os.DirFS("migrations"), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := fs.Glob(os.DirFS("migrations"), "postgres/*.sql")
	names = append(names, more...)
	if len(names) < 11 || !slices.Contains(names, "postgres/0008_tenants.sql") {
		t.Fatalf("migrations found: %v", names)
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("migrations", name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "--")
			for _, m := range lower.FindAllString(code, -1) {
				if m != strings.ToUpper(m) {
					t.Errorf("%s:%d: type %q in lower case; write %s", name, i+1, m, strings.ToUpper(m))
				}
			}
		}
	}
}

// TestPostgresOutage: while Postgres is down the store's calls fail
// within their deadline, and once it is back the same DB serves again
// (its pool drops the dead connections) with nothing lost.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := testenv.NewPostgresServer(t)
	db := openTarget(t, server.DSN())
	newSandbox(t, db, "before")
	if err := server.Stop(); err != nil {
		t.Fatal(err)
	}
	down, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := db.GetSandboxByName(down, "", "before"); err == nil || errcode.Is(err, errcode.NotFound) {
		t.Errorf("GetSandboxByName with Postgres down = %v, want a connection error", err)
	}
	if down.Err() != nil {
		t.Errorf("the call with Postgres down waited out its 5s deadline, want a prompt failure")
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the store answers again after Postgres returns", func() bool {
		_, err := db.GetSandboxByName(ctx, "", "before")
		return err == nil
	})
	newSandbox(t, db, "after")
	if l, err := db.ListSandboxes(ctx); err != nil || len(l) != 2 {
		t.Errorf("ListSandboxes after the outage = %d, %v; want 2", len(l), err)
	}
}
