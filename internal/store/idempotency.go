package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berthdev/berth/internal/tenant"
)

// BeginIdempotent claims (tenant, key) for a request. It returns (nil, nil)
// when the claim is new (the caller runs the request and then calls
// FinishIdempotent), or the existing record (Status 0 means another request
// with that key is still running). An expired record is replaced as if
// absent. Of concurrent claims of one key exactly one wins: the primary key
// decides, not a read before the write.
func (db *DB) BeginIdempotent(ctx context.Context, tenantID, key, route, requestSHA256 string, ttl time.Duration) (*tenant.IdempotencyRecord, error) {
	created := time.Now()
	// A claim whose record vanishes before it is read (abandoned by its
	// owner in between; only on Postgres, where the transaction does not
	// hold the write lock) is tried again.
	for range 3 {
		var rec *tenant.IdempotencyRecord
		err := db.tx(ctx, func(tx *sql.Tx) error {
			// One statement claims: it inserts, or replaces an expired
			// record, or (the WHERE is false) changes nothing.
			res, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys
				(tenant_id, key, route, request_sha256, status, body, created_at, expires_at)
				VALUES ($1, $2, $3, $4, 0, NULL, $5, $6)
				ON CONFLICT (tenant_id, key) DO UPDATE SET route = excluded.route,
					request_sha256 = excluded.request_sha256, status = 0, body = NULL,
					created_at = excluded.created_at, expires_at = excluded.expires_at
				WHERE idempotency_keys.expires_at <= excluded.created_at`,
				tenantID, key, route, requestSHA256, formatTime(created), formatTime(created.Add(ttl)))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n > 0 {
				return err
			}
			rec, err = scanIdempotency(tx.QueryRowContext(ctx, `SELECT `+idempotencyColumns+`
				FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, tenantID, key))
			return err
		})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("claiming idempotency key: %w", err)
		}
		return rec, nil
	}
	return nil, errors.New("claiming idempotency key: the key's record keeps vanishing")
}

const idempotencyColumns = `tenant_id, key, route, request_sha256, status, body, created_at, expires_at`

func scanIdempotency(row interface{ Scan(...any) error }) (*tenant.IdempotencyRecord, error) {
	var r tenant.IdempotencyRecord
	var created, expires string
	if err := row.Scan(&r.Tenant, &r.Key, &r.Route, &r.RequestSHA256, &r.Status, &r.Body, &created, &expires); err != nil {
		return nil, err
	}
	r.CreatedAt, r.ExpiresAt = parseTime(created), parseTime(expires)
	return &r, nil
}

// FinishIdempotent stores the answer (status, body) of a claimed key. The
// key must be claimed and not yet answered.
func (db *DB) FinishIdempotent(ctx context.Context, tenantID, key string, status int, body []byte) error {
	if status == 0 {
		return errors.New("finishing idempotency key: status 0 means unanswered")
	}
	res, err := db.w.ExecContext(ctx, `UPDATE idempotency_keys SET status = $1, body = $2
		WHERE tenant_id = $3 AND key = $4 AND status = 0`, status, body, tenantID, key)
	if err != nil {
		return fmt.Errorf("finishing idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finishing idempotency key %q of tenantID %q: no claim in progress", key, tenantID)
	}
	return nil
}

// AbandonIdempotent removes a claim whose request did not produce an answer
// worth replaying (it failed before doing anything, or the client's retry
// should run it again). An answered key, or one not claimed, is left as it is.
func (db *DB) AbandonIdempotent(ctx context.Context, tenantID, key string) error {
	_, err := db.w.ExecContext(ctx,
		`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND status = 0`, tenantID, key)
	if err != nil {
		return fmt.Errorf("abandoning idempotency key: %w", err)
	}
	return nil
}

// DeleteExpiredIdempotency removes records past their expiry at now and
// returns how many.
func (db *DB) DeleteExpiredIdempotency(ctx context.Context, now time.Time) (int, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, formatTime(now))
	if err != nil {
		return 0, fmt.Errorf("deleting expired idempotency keys: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
