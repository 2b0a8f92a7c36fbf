// Package store persists Berth's state in SQLite (the embedded default) or
// in Postgres (a cluster's shared database), with one SQL text for both
// wherever it can. It implements the small Store interfaces the domain
// packages declare.
//
// Durability: SQLite runs in WAL mode with synchronous=FULL, so a committed
// transaction survives power loss; every method commits before it returns.
// Migrations are embedded and each runs in its own transaction.
//
// The migrations are written once, in the types both engines read alike,
// and translated for Postgres as they run (see pgSchema): INTEGER becomes
// BIGINT (sizes, byte counts and timeouts pass 2^31), BLOB becomes BYTEA,
// and TEXT compares bytewise (COLLATE "C"), as SQLite's does, so that
// orders and comparisons are the same on both whatever the server's
// locale. A file in migrations/postgres/ replaces the migration of the
// same name on Postgres where SQLite needs SQL Postgres refuses.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/berthdev/berth/internal/errcode"
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrations embed.FS

// The dialects a DB speaks, as Dialect returns them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// DB is Berth's database.
//
// SQLite has one writer at a time. Writes go through a pool of one
// connection, so writers queue in Go; left to SQLite's busy handler they
// would sleep in steps of milliseconds. Reads use a pool of their own,
// which WAL lets run beside the writer. On Postgres one pool serves both.
type DB struct {
	db      *sql.DB // reads
	w       *sql.DB // writes and transactions; db itself on Postgres
	dialect string  // SQLite or Postgres
}

// postgresConns bounds a Postgres pool: enough for a busy worker, few
// enough that several workers and HQ share one server's default 100.
const postgresConns = 16

// IsPostgres reports whether target (Open's argument) names a Postgres
// database: a postgres:// or postgresql:// URL. Anything else is a SQLite
// file's path.
func IsPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// Open opens the database at target and brings its schema up to date:
// target is a Postgres URL (see IsPostgres) or the path of a SQLite file,
// created if needed. The SQLite file and its -wal and -shm files are
// private (0600), whatever the umask or an older version left.
func Open(ctx context.Context, target string) (*DB, error) {
	if IsPostgres(target) {
		return openPostgres(ctx, target)
	}
	path := target
	if err := makePrivate(path); err != nil {
		return nil, err
	}
	dsn := DSN(path)
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	db := &DB{w: w, dialect: SQLite}
	// Migrate before the readers open, so they never see an old schema.
	if err := db.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("opening database: %w", err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	r.SetConnMaxLifetime(0)
	db.db = r
	return db, nil
}

// openPostgres opens the Postgres database at dsn through pgx and
// migrates it. Several processes may open one database at once: their
// migrations take turns (see migrate).
func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	p, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	p.SetMaxOpenConns(postgresConns)
	p.SetMaxIdleConns(postgresConns)
	p.SetConnMaxIdleTime(5 * time.Minute)
	db := &DB{db: p, w: p, dialect: Postgres}
	if err := db.migrate(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return db, nil
}

// Dialect returns the database's engine: SQLite or Postgres.
func (db *DB) Dialect() string { return db.dialect }

// makePrivate creates the database file at path with mode 0600 if it is
// missing, and sets the mode of it and of its -wal and -shm files to 0600.
// SQLite creates -wal and -shm with the database file's mode, so they are
// private from the start too.
func makePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening database: %w", err)
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if cerr := os.Chmod(path+suffix, 0o600); cerr != nil && !errors.Is(cerr, fs.ErrNotExist) {
			err = errors.Join(err, cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("making the database private: %w", err)
	}
	return nil
}

// DSN is the database/sql data source of the database at path: WAL,
// synchronous=FULL, a busy timeout, foreign keys, and transactions that
// take the write lock when they begin (a read that later writes cannot
// deadlock). Other pools on the same file (River's) use it too.
func DSN(path string) string {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Close closes the database.
func (db *DB) Close() error {
	if db.w == db.db {
		return db.db.Close()
	}
	return errors.Join(db.db.Close(), db.w.Close())
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.db.PingContext(ctx) }

const createMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`

func (db *DB) migrate(ctx context.Context) error {
	if err := db.migrationTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, db.schema(createMigrations))
		return err
	}); err != nil {
		return fmt.Errorf("creating migrations table: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
		if err := db.applyMigration(ctx, name, version); err != nil {
			return fmt.Errorf("migration %s: %w", version, err)
		}
	}
	return nil
}

// foreignKeysOff, as a migration's first line, runs it with foreign keys
// off: SQLite's way to rebuild a table that others reference (a DROP would
// cascade). foreign_key_check must come back empty before it commits.
const foreignKeysOff = "-- berth:foreign-keys-off"

// applyMigration runs one migration and records it in one transaction, so
// a crash leaves the old schema or the new one, never half.
func (db *DB) applyMigration(ctx context.Context, name, version string) error {
	if db.dialect == Postgres {
		if _, err := fs.Stat(migrations, "migrations/postgres/"+version+".sql"); err == nil {
			name = "migrations/postgres/" + version + ".sql"
		}
	}
	body, err := migrations.ReadFile(name)
	if err != nil {
		return err
	}
	if db.dialect == Postgres && strings.HasPrefix(string(body), foreignKeysOff) {
		return errors.New("a foreign-keys-off migration needs a Postgres variant in migrations/postgres/")
	}
	if strings.HasPrefix(string(body), foreignKeysOff) {
		// The pragma is a no-op inside a transaction, and belongs to a
		// connection: the writers' pool has exactly one.
		if _, err := db.w.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return err
		}
		defer func() { _, _ = db.w.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`) }()
	}
	return db.migrationTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, version).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, db.schema(string(body))); err != nil {
			return err
		}
		if strings.HasPrefix(string(body), foreignKeysOff) {
			rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
			if err != nil {
				return err
			}
			broken := rows.Next()
			rows.Close()
			if broken {
				return errors.New("the migration left rows whose foreign keys point nowhere")
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, version, now())
		return err
	})
}

// migrationLock is the key of the Postgres advisory lock that migrations
// hold: processes that start together on one database migrate in turn,
// and each finds what the one before it applied.
const migrationLock = 0x62657274_68000001 // "berth", 1

// migrationTx runs fn in a transaction that, on Postgres, first takes the
// migration lock; it is released with the transaction. SQLite's
// transactions take the write lock when they begin, which serializes them
// already.
func (db *DB) migrationTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if db.dialect == Postgres {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
				return fmt.Errorf("waiting for other migrations: %w", err)
			}
		}
		return fn(tx)
	})
}

var (
	integerType = regexp.MustCompile(`\bINTEGER\b`)
	blobType    = regexp.MustCompile(`\bBLOB\b`)
	textType    = regexp.MustCompile(`\bTEXT\b`)
)

// schema returns DDL written for both engines as this database's engine
// reads it: unchanged on SQLite; on Postgres with 64-bit INTEGERs, BYTEA
// for BLOB, and TEXT that compares bytewise like SQLite's. Type names
// are upper case in the migrations, SQL keywords, never other words.
func (db *DB) schema(ddl string) string {
	if db.dialect != Postgres {
		return ddl
	}
	ddl = integerType.ReplaceAllString(ddl, "BIGINT")
	ddl = blobType.ReplaceAllString(ddl, "BYTEA")
	return textType.ReplaceAllString(ddl, `TEXT COLLATE "C"`)
}

// lockKey serializes, on Postgres, the transactions that read then write
// rows under one key (a sandbox's command numbers, a job's state, a
// tenant's checkpoints) with a transaction-scoped advisory lock. SQLite
// needs none: its transactions take the write lock when they begin.
func (db *DB) lockKey(ctx context.Context, tx *sql.Tx, key string) error {
	if db.dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key)
	return err
}

func (db *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func now() string { return formatTime(time.Now()) }

// timeLayout is RFC 3339 in UTC with all nine fractional digits. Unlike
// RFC3339Nano, which trims trailing zeros (".1Z" sorts after ".15Z"), it
// sorts as text in time order, which ORDER BY on the TEXT columns needs.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func parseTimePtr(s sql.NullString) *time.Time {
	if !s.Valid || s.String == "" {
		return nil
	}
	t := parseTime(s.String)
	return &t
}

func timePtrValue(t *time.Time) any {
	if t == nil {
		return nil
	}
	return formatTime(*t)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "UNIQUE constraint failed") ||
		strings.Contains(err.Error(), "duplicate key value"))
}

// notFound turns "no row" into reason's error, "<what> <id> not found".
func notFound(err error, reason errcode.Reason, what, id string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return reason.New("%s %q not found", what, id)
	}
	return err
}

func isForeignKey(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "FOREIGN KEY constraint failed") ||
		strings.Contains(err.Error(), "violates foreign key constraint"))
}
