package store

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/berthdev/berth/internal/cluster"
)

var _ cluster.Store = (*DB)(nil)

// RenewLease writes a worker's lease, capabilities and load; an operator's
// draining flag stays as it is.
func (db *DB) RenewLease(ctx context.Context, l *cluster.Lease) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO workers
			(id, incarnation, started_at, heartbeat_at, lease_expires_at, capabilities, load, draining)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 0)
		ON CONFLICT (id) DO UPDATE SET incarnation = excluded.incarnation, started_at = excluded.started_at,
			heartbeat_at = excluded.heartbeat_at, lease_expires_at = excluded.lease_expires_at,
			capabilities = excluded.capabilities, load = excluded.load`,
		l.ID, l.Incarnation, formatTime(l.StartedAt), formatTime(l.HeartbeatAt), formatTime(l.ExpiresAt),
		mustJSON(l.Capabilities), mustJSON(l.Load))
	return err
}

// ReleaseLease expires worker id's lease now, if incarnation holds it.
func (db *DB) ReleaseLease(ctx context.Context, id, incarnation string) error {
	_, err := db.w.ExecContext(ctx, `UPDATE workers SET lease_expires_at = $1 WHERE id = $2 AND incarnation = $3`,
		now(), id, incarnation)
	return err
}

// ListLeases returns every worker's row, by ID.
func (db *DB) ListLeases(ctx context.Context) ([]*cluster.Lease, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT id, incarnation, started_at, heartbeat_at, lease_expires_at,
		capabilities, load, draining FROM workers ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*cluster.Lease
	for rows.Next() {
		var l cluster.Lease
		var started, beat, expires, caps, load string
		var draining int
		if err := rows.Scan(&l.ID, &l.Incarnation, &started, &beat, &expires, &caps, &load, &draining); err != nil {
			return nil, err
		}
		l.StartedAt, l.HeartbeatAt, l.ExpiresAt = parseTime(started), parseTime(beat), parseTime(expires)
		_ = json.Unmarshal([]byte(caps), &l.Capabilities)
		_ = json.Unmarshal([]byte(load), &l.Load)
		l.Draining = draining != 0
		out = append(out, &l)
	}
	return out, rows.Err()
}

// SetDraining sets a worker's draining flag. A worker that has never
// heartbeat gets a row whose lease is already over, so the flag holds from
// its first start.
func (db *DB) SetDraining(ctx context.Context, id string, draining bool) error {
	t := now()
	_, err := db.w.ExecContext(ctx, `INSERT INTO workers
			(id, incarnation, started_at, heartbeat_at, lease_expires_at, draining)
		VALUES ($1, '', $2, $2, $2, $3)
		ON CONFLICT (id) DO UPDATE SET draining = excluded.draining`, id, t, boolInt(draining))
	return err
}

// PutPlacement records (or moves nothing: replaces only its own row) the
// owner of a resource.
func (db *DB) PutPlacement(ctx context.Context, p *cluster.Placement) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO placements (kind, id, worker_id, tenant_id, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, id) DO NOTHING`,
		p.Kind, p.ID, p.Worker, p.Tenant, formatTime(p.CreatedAt))
	return err
}

// GetPlacement returns the owner of a resource.
func (db *DB) GetPlacement(ctx context.Context, kind, id string) (*cluster.Placement, error) {
	var p cluster.Placement
	var created string
	err := db.db.QueryRowContext(ctx, `SELECT kind, id, worker_id, tenant_id, created_at FROM placements
		WHERE kind = $1 AND id = $2`, kind, id).Scan(&p.Kind, &p.ID, &p.Worker, &p.Tenant, &created)
	if err == sql.ErrNoRows {
		return nil, cluster.NotFound(kind, id)
	}
	if err != nil {
		return nil, err
	}
	p.CreatedAt = parseTime(created)
	return &p, nil
}

// DeletePlacement forgets a resource's owner.
func (db *DB) DeletePlacement(ctx context.Context, kind, id string) error {
	_, err := db.w.ExecContext(ctx, `DELETE FROM placements WHERE kind = $1 AND id = $2`, kind, id)
	return err
}

// CountPlacements counts kind's placements on each worker.
func (db *DB) CountPlacements(ctx context.Context, kind string) (map[string]int, error) {
	return db.countBy(ctx, `SELECT worker_id, COUNT(*) FROM placements WHERE kind = $1 GROUP BY worker_id`, kind)
}

// TenantPlacements counts a tenant's placements per kind.
func (db *DB) TenantPlacements(ctx context.Context, tenant string) (map[string]int, error) {
	return db.countBy(ctx, `SELECT kind, COUNT(*) FROM placements WHERE tenant_id = $1 GROUP BY kind`, tenant)
}

// countBy runs query, whose rows are a key and a count, into a map.
func (db *DB) countBy(ctx context.Context, query string, args ...any) (map[string]int, error) {
	rows, err := db.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// ForgetLost forgets p's owner and keeps it to delete on the worker when
// it answers again, in one transaction.
func (db *DB) ForgetLost(ctx context.Context, p *cluster.Placement) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM placements WHERE kind = $1 AND id = $2`, p.Kind, p.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO lost_deletes (kind, id, worker_id, tenant_id, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, id) DO NOTHING`, p.Kind, p.ID, p.Worker, p.Tenant, now())
		return err
	})
}

// LostDeletes lists the resources forgotten while their worker was lost,
// oldest first.
func (db *DB) LostDeletes(ctx context.Context) ([]*cluster.Placement, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT kind, id, worker_id, tenant_id, created_at FROM lost_deletes ORDER BY created_at, kind, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*cluster.Placement
	for rows.Next() {
		var p cluster.Placement
		var created string
		if err := rows.Scan(&p.Kind, &p.ID, &p.Worker, &p.Tenant, &created); err != nil {
			return nil, err
		}
		p.CreatedAt = parseTime(created)
		out = append(out, &p)
	}
	return out, rows.Err()
}

// DoneLostDelete drops a forgotten resource's row: its worker deleted it.
func (db *DB) DoneLostDelete(ctx context.Context, kind, id string) error {
	_, err := db.w.ExecContext(ctx, `DELETE FROM lost_deletes WHERE kind = $1 AND id = $2`, kind, id)
	return err
}
