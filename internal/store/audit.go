package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/berthdev/berth/internal/ident"

	"github.com/berthdev/berth/internal/tenant"
)

// InsertAudit appends entries (giving each an ID if it has none) in one
// transaction and keeps at most keep entries of each tenant among them,
// deleting the oldest beyond that; keep <= 0 keeps them all.
func (db *DB) InsertAudit(ctx context.Context, entries []*tenant.AuditEntry, keep int) error {
	if len(entries) == 0 {
		return nil
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		tenants := map[string]bool{}
		for _, e := range entries {
			if e.ID == "" {
				e.ID = ident.New("aud_")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (`+auditColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
				e.ID, e.Tenant, formatTime(e.At), e.KeyID, e.KeyName, e.Method, e.Route, e.Resource,
				e.Status, e.Reason, e.RequestID); err != nil {
				return err
			}
			tenants[e.Tenant] = true
		}
		if keep <= 0 {
			return nil
		}
		// One index walk to the newest entry beyond keep, then a range
		// delete of it and everything older. At steady state those are
		// the entries the inserts pushed out.
		for t := range tenants {
			if _, err := tx.ExecContext(ctx, trimAuditSQL, t, keep); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("inserting audit entries: %w", err)
	}
	return nil
}

// trimAuditSQL deletes a tenant's ($1) entries from the (keep+1)-th newest
// (OFFSET $2) on. Row-value comparison with a one-row subquery is standard
// SQL, in SQLite since 3.15 and in Postgres.
const trimAuditSQL = `DELETE FROM audit_log WHERE tenant_id = $1 AND (at, id) <= (
	SELECT at, id FROM audit_log WHERE tenant_id = $1 ORDER BY at DESC, id DESC LIMIT 1 OFFSET $2)`

const auditColumns = `id, tenant_id, at, key_id, key_name, method, route, resource, status, reason, request_id`

// ListAudit lists tenant's entries ("*": every tenant's), newest first, at
// most limit (1000 at most; 100 if limit <= 0), strictly older than before
// (its zero value: from the newest).
func (db *DB) ListAudit(ctx context.Context, tenantID string, before tenant.AuditPosition, limit int) ([]*tenant.AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	q := `SELECT ` + auditColumns + ` FROM audit_log WHERE 1 = 1`
	var args []any
	if tenantID != "*" {
		args = append(args, tenantID)
		q += ` AND tenant_id = $1`
	}
	if !before.At.IsZero() || before.ID != "" {
		args = append(args, formatTime(before.At), before.ID)
		at, id := "$"+itoa(len(args)-1), "$"+itoa(len(args))
		q += ` AND (at < ` + at + ` OR (at = ` + at + ` AND id < ` + id + `))`
	}
	args = append(args, limit)
	q += ` ORDER BY at DESC, id DESC LIMIT $` + itoa(len(args))
	rows, err := db.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing audit entries: %w", err)
	}
	defer rows.Close()
	var out []*tenant.AuditEntry
	for rows.Next() {
		var e tenant.AuditEntry
		var at string
		if err := rows.Scan(&e.ID, &e.Tenant, &at, &e.KeyID, &e.KeyName, &e.Method, &e.Route, &e.Resource,
			&e.Status, &e.Reason, &e.RequestID); err != nil {
			return nil, err
		}
		e.At = parseTime(at)
		out = append(out, &e)
	}
	return out, rows.Err()
}
