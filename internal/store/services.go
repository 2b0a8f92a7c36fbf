package store

import (
	"context"
	"encoding/json"

	"github.com/berthdev/berth/internal/sandbox"
)

// PutService stores a service intent, replacing one of the same name.
func (db *DB) PutService(ctx context.Context, s *sandbox.ServiceIntent) error {
	t := now()
	_, err := db.w.ExecContext(ctx, `INSERT INTO services (sandbox_id, name, spec, stopped, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT (sandbox_id, name) DO UPDATE SET spec = excluded.spec, stopped = excluded.stopped,
			updated_at = excluded.updated_at`,
		s.SandboxID, s.Spec.Name, mustJSON(s.Spec), boolInt(s.Stopped), t)
	return err
}

// ListServices returns a sandbox's service intents by name.
func (db *DB) ListServices(ctx context.Context, sandboxID string) ([]*sandbox.ServiceIntent, error) {
	rows, err := db.db.QueryContext(ctx,
		`SELECT spec, stopped FROM services WHERE sandbox_id = $1 ORDER BY name`, sandboxID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sandbox.ServiceIntent
	for rows.Next() {
		s := &sandbox.ServiceIntent{SandboxID: sandboxID}
		var spec string
		var stopped int
		if err := rows.Scan(&spec, &stopped); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(spec), &s.Spec); err != nil {
			return nil, err
		}
		s.Stopped = stopped != 0
		out = append(out, s)
	}
	return out, rows.Err()
}

// DeleteService removes a service intent; removing none is not an error.
func (db *DB) DeleteService(ctx context.Context, sandboxID, name string) error {
	_, err := db.w.ExecContext(ctx, `DELETE FROM services WHERE sandbox_id = $1 AND name = $2`, sandboxID, name)
	return err
}
