package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berthdev/berth/internal/browser"
	"github.com/berthdev/berth/internal/errcode"
)

var _ browser.JournalStore = (*DB)(nil)

// BeginBrowserAction stores the start of a browser action.
func (db *DB) BeginBrowserAction(ctx context.Context, e browser.JournalEntry) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO browser_journal (tenant_id, session_id, seq, op, summary, started_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, e.Tenant, e.Session, e.Seq, e.Op, e.Summary, formatTime(e.Started))
	return err
}

// FinishBrowserAction stores the end of a browser action and, in the same
// transaction, deletes the session's entries below pruneBelow. Both are
// scoped by the tenant: a row of another tenant is neither finished nor
// deleted, and finishing no row is an error.
func (db *DB) FinishBrowserAction(ctx context.Context, tenant, session string, seq int64, at time.Time, outcome, reason string, pruneBelow int64) error {
	finish := func(ex interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}) error {
		res, err := ex.ExecContext(ctx, `UPDATE browser_journal SET finished_at = $1, outcome = $2, reason = $3
			WHERE tenant_id = $4 AND session_id = $5 AND seq = $6 AND finished_at IS NULL`,
			formatTime(at), outcome, reason, tenant, session, seq)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("finishing journal entry %s/%d: no unfinished entry of tenant %s", session, seq, tenant)
		}
		return nil
	}
	if pruneBelow <= 0 {
		return finish(db.w) // one statement, one commit
	}
	return db.tx(ctx, func(tx *sql.Tx) error {
		if err := finish(tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM browser_journal WHERE tenant_id = $1 AND session_id = $2 AND seq < $3`,
			tenant, session, pruneBelow)
		return err
	})
}

// BrowserJournal returns session's journal entries after sequence number
// after (at most limit, oldest first) and the session's tenant ("" when
// the session has no entry).
func (db *DB) BrowserJournal(ctx context.Context, session string, after int64, limit int) (string, []browser.JournalEntry, error) {
	var tenant string
	err := db.db.QueryRowContext(ctx, `SELECT tenant_id FROM browser_journal WHERE session_id = $1 LIMIT 1`, session).Scan(&tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	rows, err := db.db.QueryContext(ctx, `SELECT seq, op, summary, started_at, finished_at, outcome, reason FROM browser_journal
		WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, session, after, limit)
	if err != nil {
		return "", nil, err
	}
	defer rows.Close()
	var out []browser.JournalEntry
	for rows.Next() {
		e := browser.JournalEntry{Tenant: tenant, Session: session}
		var started string
		var finished sql.NullString
		if err := rows.Scan(&e.Seq, &e.Op, &e.Summary, &started, &finished, &e.Outcome, &e.Reason); err != nil {
			return "", nil, err
		}
		e.Started = parseTime(started)
		if finished.Valid {
			e.Finished = parseTime(finished.String)
		}
		out = append(out, e)
	}
	return tenant, out, rows.Err()
}

// PutBrowserCheckpoint stores a checkpoint unless its tenant has max.
func (db *DB) PutBrowserCheckpoint(ctx context.Context, c browser.Checkpoint, max int) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if err := db.lockKey(ctx, tx, "checkpoints:"+c.Tenant); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM browser_checkpoints WHERE tenant_id = $1`, c.Tenant).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return errcode.CheckpointLimit.New("%d browser checkpoints are kept, the most a tenant may keep; delete one first", n)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO browser_checkpoints (id, tenant_id, mode, options, selected, urls, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.ID, c.Tenant, c.Mode, mustJSON(c.Options), c.Selected, mustJSON(c.URLs), formatTime(c.Created))
		return err
	})
}

const checkpointColumns = `id, tenant_id, mode, options, selected, urls, created_at`

func scanCheckpoint(row interface{ Scan(...any) error }) (browser.Checkpoint, error) {
	var c browser.Checkpoint
	var opts, urls, created string
	if err := row.Scan(&c.ID, &c.Tenant, &c.Mode, &opts, &c.Selected, &urls, &created); err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(opts), &c.Options); err != nil {
		return c, fmt.Errorf("checkpoint %s: options: %w", c.ID, err)
	}
	if err := json.Unmarshal([]byte(urls), &c.URLs); err != nil {
		return c, fmt.Errorf("checkpoint %s: urls: %w", c.ID, err)
	}
	c.Created = parseTime(created)
	return c, nil
}

// BrowserCheckpoint returns checkpoint id of tenant scope
// (browser.AnyTenant: of any tenant).
func (db *DB) BrowserCheckpoint(ctx context.Context, scope, id string) (browser.Checkpoint, error) {
	c, err := scanCheckpoint(db.db.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM browser_checkpoints
		WHERE id = $1 AND (tenant_id = $2 OR $2 = $3)`, id, scope, browser.AnyTenant))
	return c, notFound(err, errcode.CheckpointNotFound, "browser checkpoint", id)
}

// BrowserCheckpoints lists scope's checkpoints, oldest first.
func (db *DB) BrowserCheckpoints(ctx context.Context, scope string) ([]browser.Checkpoint, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+checkpointColumns+` FROM browser_checkpoints
		WHERE tenant_id = $1 OR $1 = $2 ORDER BY created_at, id`, scope, browser.AnyTenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []browser.Checkpoint
	for rows.Next() {
		c, err := scanCheckpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteBrowserCheckpoint deletes checkpoint id of scope.
func (db *DB) DeleteBrowserCheckpoint(ctx context.Context, scope, id string) error {
	res, err := db.w.ExecContext(ctx, `DELETE FROM browser_checkpoints WHERE id = $1 AND (tenant_id = $2 OR $2 = $3)`,
		id, scope, browser.AnyTenant)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errcode.CheckpointNotFound.New("browser checkpoint %q not found", id)
	}
	return nil
}
