package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/berthdev/berth/internal/auth"
	"github.com/berthdev/berth/internal/errcode"
)

var _ auth.Store = (*DB)(nil)

// InsertKey stores a new key.
func (db *DB) InsertKey(ctx context.Context, k *auth.Key) error {
	_, err := db.w.ExecContext(ctx,
		`INSERT INTO api_keys (id, name, scope, prefix, hash, tenant_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.Name, k.Scope, k.Prefix, k.Hash, k.TenantID, formatTime(k.CreatedAt))
	return err
}

const keyColumns = `id, name, scope, prefix, hash, tenant_id, created_at, revoked_at`

func scanKey(row interface{ Scan(...any) error }) (*auth.Key, error) {
	var k auth.Key
	var created string
	var revoked sql.NullString
	if err := row.Scan(&k.ID, &k.Name, &k.Scope, &k.Prefix, &k.Hash, &k.TenantID, &created, &revoked); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt = parseTime(created), parseTimePtr(revoked)
	return &k, nil
}

// KeyByHash returns the key with hash.
func (db *DB) KeyByHash(ctx context.Context, hash string) (*auth.Key, error) {
	k, err := scanKey(db.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash))
	return k, notFound(err, errcode.KeyNotFound, "key", "")
}

// ListKeys returns every key, oldest first.
func (db *DB) ListKeys(ctx context.Context) ([]*auth.Key, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*auth.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey marks a key revoked. Revoking a revoked key is a no-op.
func (db *DB) RevokeKey(ctx context.Context, id string) error {
	res, err := db.w.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, now(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errcode.KeyNotFound.New("key %q not found", id)
	}
	return nil
}

// RevokedKeys returns those of ids that are revoked or no longer exist.
func (db *DB) RevokedKeys(ctx context.Context, ids []string) ([]string, error) {
	live := map[string]bool{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		marks := make([]string, len(chunk))
		for i, id := range chunk {
			args[i], marks[i] = id, fmt.Sprintf("$%d", i+1)
		}
		rows, err := db.db.QueryContext(ctx,
			`SELECT id FROM api_keys WHERE revoked_at IS NULL AND id IN (`+strings.Join(marks, ", ")+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			live[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, id := range ids {
		if !live[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
