package store

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/tenant"
)

var _ tenant.Store = (*DB)(nil)

const tenantColumns = `id, name, limits, created_at, updated_at`

func scanTenant(row interface{ Scan(...any) error }) (*tenant.Tenant, error) {
	var t tenant.Tenant
	var limits, created, updated string
	if err := row.Scan(&t.ID, &t.Name, &limits, &created, &updated); err != nil {
		return nil, err
	}
	_ = json.Unmarshal([]byte(limits), &t.Limits)
	t.CreatedAt, t.UpdatedAt = parseTime(created), parseTime(updated)
	return &t, nil
}

// CreateTenant inserts a tenant; a name in use is name_taken.
func (db *DB) CreateTenant(ctx context.Context, t *tenant.Tenant) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO tenants (`+tenantColumns+`) VALUES ($1, $2, $3, $4, $5)`,
		t.ID, t.Name, mustJSON(t.Limits), formatTime(t.CreatedAt), formatTime(t.UpdatedAt))
	if isUnique(err) {
		return errcode.NameTaken.New("a tenant named %q exists", t.Name)
	}
	return err
}

// GetTenant returns a tenant by ID or name.
func (db *DB) GetTenant(ctx context.Context, idOrName string) (*tenant.Tenant, error) {
	t, err := scanTenant(db.db.QueryRowContext(ctx,
		`SELECT `+tenantColumns+` FROM tenants WHERE id = $1 OR name = $1`, idOrName))
	return t, notFound(err, errcode.TenantNotFound, "tenant", idOrName)
}

// ListTenants returns every tenant by name.
func (db *DB) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*tenant.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetTenantLimits replaces a tenant's limits.
func (db *DB) SetTenantLimits(ctx context.Context, id string, l tenant.Limits) error {
	res, err := db.w.ExecContext(ctx, `UPDATE tenants SET limits = $1, updated_at = $2 WHERE id = $3`, mustJSON(l), now(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errcode.TenantNotFound.New("tenant %q not found", id)
	}
	return nil
}

// DeleteTenant deletes a tenant that owns nothing live: no sandbox,
// template or active job. Its keys are revoked (their IDs returned, so
// what they have open can be closed); its finished jobs, file ownership,
// idempotency records and audit log go with it.
func (db *DB) DeleteTenant(ctx context.Context, id string) (revoked []string, err error) {
	err = db.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM sandboxes WHERE tenant_id = $1) +
			(SELECT COUNT(*) FROM templates WHERE tenant_id = $1) +
			(SELECT COUNT(*) FROM jobs WHERE tenant = $1 AND state IN ('queued', 'waiting', 'starting', 'running'))`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errcode.TenantNotEmpty.New("tenant %q still owns %d sandboxes, templates or active jobs; remove them first", id, n)
		}
		rows, err := tx.QueryContext(ctx, `UPDATE api_keys SET revoked_at = $1
			WHERE tenant_id = $2 AND revoked_at IS NULL RETURNING id`, now(), id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			revoked = append(revoked, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM jobs WHERE tenant = $1`,
			`DELETE FROM blob_owners WHERE tenant_id = $1`,
			`DELETE FROM idempotency_keys WHERE tenant_id = $1`,
			`DELETE FROM audit_log WHERE tenant_id = $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM tenants WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errcode.TenantNotFound.New("tenant %q not found", id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return revoked, nil
}

// AbandonUnfinishedIdempotency releases every idempotency key whose first
// request has no answer: at start-up none is running, so a previous
// daemon's unfinished ones would answer "in progress" until they expire.
func (db *DB) AbandonUnfinishedIdempotency(ctx context.Context) (int, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE status = 0`)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
