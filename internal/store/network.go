package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/netpolicy"
)

// SetSandboxNetwork replaces a sandbox's network policy.
func (db *DB) SetSandboxNetwork(ctx context.Context, id string, p netpolicy.Policy) error {
	res, err := db.w.ExecContext(ctx, `UPDATE sandboxes SET network = $1, updated_at = $2 WHERE id = $3`, mustJSON(p), now(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errcode.SandboxNotFound.New("sandbox %q not found", id)
	}
	return nil
}

// NetworkKeys are an egress sandbox's CA and secrets, as stored: the CA's
// key and the secrets sealed by the caller.
type NetworkKeys struct {
	CACert  []byte // PEM
	CAKey   []byte // sealed
	Secrets []byte // sealed; nil when none were ever set
}

// GetNetworkKeys returns sandbox id's network keys, or nil when it has
// none yet.
func (db *DB) GetNetworkKeys(ctx context.Context, id string) (*NetworkKeys, error) {
	var k NetworkKeys
	var cert string
	err := db.db.QueryRowContext(ctx, `SELECT ca_cert, ca_key, secrets FROM sandbox_network_keys WHERE sandbox_id = $1`, id).
		Scan(&cert, &k.CAKey, &k.Secrets)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k.CACert = []byte(cert)
	return &k, nil
}

// PutNetworkKeys stores sandbox id's network keys, replacing any.
func (db *DB) PutNetworkKeys(ctx context.Context, id string, k *NetworkKeys) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO sandbox_network_keys (sandbox_id, ca_cert, ca_key, secrets)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (sandbox_id) DO UPDATE SET ca_cert = excluded.ca_cert, ca_key = excluded.ca_key, secrets = excluded.secrets`,
		id, string(k.CACert), k.CAKey, k.Secrets)
	if isForeignKey(err) {
		return errcode.SandboxNotFound.New("sandbox %q not found", id)
	}
	return err
}
