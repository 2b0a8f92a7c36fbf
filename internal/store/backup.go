package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berthdev/berth/internal/errcode"
)

// Summary says what a database file holds.
type Summary struct {
	// Migrations are the schema versions applied; none for a file that
	// is not (yet) a Berth database.
	Migrations []string
	Keys       int // API keys, revoked ones included
	Sandboxes  int
	Templates  int
	Jobs       int
}

// Empty reports whether the database holds no state at all: no key, no
// sandbox, no template, no job. A database a daemon has ever served from
// holds at least its admin key.
func (s Summary) Empty() bool {
	return s.Keys == 0 && s.Sandboxes == 0 && s.Templates == 0 && s.Jobs == 0
}

// Inspect summarises the SQLite database at path without changing its
// schema (it reads through the file's write-ahead log like any reader). A
// missing or zero-length file is an empty Summary; a file that is not a
// SQLite database is an Invalid error with reason not_a_berth_database.
func Inspect(ctx context.Context, path string) (Summary, error) {
	if err := sqliteOnly("inspect", path); err != nil {
		return Summary{}, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return Summary{}, nil
	}
	if err != nil {
		return Summary{}, err
	}
	db, err := openExisting(path)
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	return summarize(ctx, db, path)
}

// Verify checks that path is a whole Berth database this build can open:
// SQLite's quick_check passes, it has Berth's schema, and no migration
// newer than this build's. It returns the file's Summary.
func Verify(ctx context.Context, path string) (Summary, error) {
	if err := sqliteOnly("verify", path); err != nil {
		return Summary{}, err
	}
	db, err := openExisting(path)
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil {
		return Summary{}, notBerth(path, err)
	}
	if check != "ok" {
		return Summary{}, errcode.DatabaseCorrupt.New("%s fails SQLite's integrity check: %s", path, check)
	}
	s, err := summarize(ctx, db, path)
	if err != nil {
		return Summary{}, err
	}
	if len(s.Migrations) == 0 {
		return Summary{}, notBerth(path, errors.New("no schema_migrations table"))
	}
	known, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return Summary{}, err
	}
	for _, v := range s.Migrations {
		found := false
		for _, name := range known {
			found = found || name == "migrations/"+v+".sql"
		}
		if !found {
			return Summary{}, errcode.DatabaseNewerThanBerth.New("%s has schema version %s, which this build of berth does not know; use a newer berth", path, v)
		}
	}
	return s, nil
}

// Backup writes a consistent copy of the database at src to the new file
// dst (mode 0600) with VACUUM INTO, which reads one snapshot: it is safe
// while a daemon writes to src, and the copy holds what src's write-ahead
// log held. dst must not exist: an existing file is never overwritten.
// The copy is made beside dst and linked into place only once complete
// and synced. It returns the copy's Summary.
func Backup(ctx context.Context, src, dst string) (Summary, error) {
	if err := sqliteOnly("back up", src); err != nil {
		return Summary{}, err
	}
	if _, err := Verify(ctx, src); err != nil {
		return Summary{}, err
	}
	if _, err := os.Lstat(dst); err == nil {
		return Summary{}, errcode.BackupFileExists.New("%s exists; berth backup never overwrites a file, name a new one", dst)
	}
	// VACUUM INTO writes into an empty file with that file's mode.
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return Summary{}, fmt.Errorf("creating the backup: %w", err)
	}
	tmpPath := tmp.Name()
	defer os.Remove(tmpPath)
	if err := tmp.Close(); err != nil {
		return Summary{}, err
	}
	db, err := openExisting(src)
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO $1`, tmpPath); err != nil {
		return Summary{}, fmt.Errorf("copying %s: %w", src, err)
	}
	if err := syncFile(tmpPath); err != nil {
		return Summary{}, err
	}
	s, err := Verify(ctx, tmpPath)
	if err != nil {
		return Summary{}, fmt.Errorf("checking the copy: %w", err)
	}
	// A link fails if dst appeared meanwhile, where a rename would replace it.
	if err := os.Link(tmpPath, dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Summary{}, errcode.BackupFileExists.New("%s exists; berth backup never overwrites a file, name a new one", dst)
		}
		return Summary{}, fmt.Errorf("writing %s: %w", dst, err)
	}
	return s, syncFile(filepath.Dir(dst))
}

// sqliteOnly refuses a Postgres target of a SQLite file tool with
// sqlite_only: a Postgres URL is no path, and is never read as a missing
// (empty) file.
func sqliteOnly(what, target string) error {
	if IsPostgres(target) {
		return errcode.SQLiteOnly.New("cannot %s a Postgres database: this works on Berth's embedded SQLite file; use pg_dump and pg_restore", what)
	}
	return nil
}

// openExisting opens the SQLite file at path for reading and writing
// without creating it, and without changing its journal mode.
func openExisting(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

func summarize(ctx context.Context, db *sql.DB, path string) (Summary, error) {
	var s Summary
	tables := map[string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return Summary{}, notBerth(path, err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return Summary{}, err
		}
		tables[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Summary{}, notBerth(path, err)
	}
	if tables["schema_migrations"] {
		rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
		if err != nil {
			return Summary{}, err
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return Summary{}, err
			}
			s.Migrations = append(s.Migrations, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return Summary{}, err
		}
	}
	for table, n := range map[string]*int{"api_keys": &s.Keys, "sandboxes": &s.Sandboxes, "templates": &s.Templates, "jobs": &s.Jobs} {
		if !tables[table] {
			continue
		}
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(n); err != nil {
			return Summary{}, err
		}
	}
	return s, nil
}

func notBerth(path string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "file is not a database") {
		msg = "not a SQLite database"
	}
	return errcode.NotABerthDatabase.Wrap(err, "%s is not a Berth database (%s)", path, msg)
}

// syncFile fsyncs the file or directory at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
