package store

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

const templateColumns = `id, name, state, reason, source, base, config, size_bytes, created_at, updated_at, tenant_id`

func scanTemplate(row interface{ Scan(...any) error }) (*sandbox.Template, error) {
	var t sandbox.Template
	var config, created, updated string
	if err := row.Scan(&t.ID, &t.Name, &t.State, &t.Reason, &t.Source, &t.Base, &config, &t.SizeBytes,
		&created, &updated, &t.Tenant); err != nil {
		return nil, err
	}
	_ = json.Unmarshal([]byte(config), &t.Config)
	t.CreatedAt, t.UpdatedAt = parseTime(created), parseTime(updated)
	return &t, nil
}

// CreateTemplate inserts a template; a name in use is Conflict
// "template_exists".
func (db *DB) CreateTemplate(ctx context.Context, t *sandbox.Template) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO templates (`+templateColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		t.ID, t.Name, t.State, t.Reason, t.Source, t.Base, mustJSON(t.Config), t.SizeBytes,
		formatTime(t.CreatedAt), formatTime(t.UpdatedAt), t.Tenant)
	if isUnique(err) {
		return errcode.TemplateExists.New("a template named %q exists; remove it first", t.Name)
	}
	return err
}

// UpdateTemplate stores a template's state, reason, config and size.
func (db *DB) UpdateTemplate(ctx context.Context, t *sandbox.Template) error {
	_, err := db.w.ExecContext(ctx, `UPDATE templates SET state = $1, reason = $2, config = $3, size_bytes = $4,
		updated_at = $5 WHERE id = $6`, t.State, t.Reason, mustJSON(t.Config), t.SizeBytes, now(), t.ID)
	return err
}

// GetTemplate returns a template by name or ID.
func (db *DB) GetTemplate(ctx context.Context, nameOrID string) (*sandbox.Template, error) {
	t, err := scanTemplate(db.db.QueryRowContext(ctx,
		`SELECT `+templateColumns+` FROM templates WHERE name = $1 OR id = $1`, nameOrID))
	return t, notFound(err, errcode.TemplateNotFound, "template", nameOrID)
}

// TemplateFor returns template nameOrID as tenant sees it: one of its own
// or a shared one; by name its own comes first. sandbox.AnyTenant sees
// every template, shared ones first by name.
func (db *DB) TemplateFor(ctx context.Context, tenant, nameOrID string) (*sandbox.Template, error) {
	// One query runs: a *sql.Row holds its connection until scanned.
	var row *sql.Row
	if tenant == sandbox.AnyTenant {
		row = db.db.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates
		WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC, tenant_id, id LIMIT 1`, nameOrID)
	} else {
		row = db.db.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates
		WHERE (id = $1 OR name = $1) AND tenant_id IN ($2, '') ORDER BY tenant_id DESC LIMIT 1`, nameOrID, tenant)
	}
	t, err := scanTemplate(row)
	return t, notFound(err, errcode.TemplateNotFound, "template", nameOrID)
}

// ListTemplates returns every template by name.
func (db *DB) ListTemplates(ctx context.Context) ([]*sandbox.Template, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+templateColumns+` FROM templates ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sandbox.Template
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteTemplate deletes a template's record.
func (db *DB) DeleteTemplate(ctx context.Context, id string) error {
	_, err := db.w.ExecContext(ctx, `DELETE FROM templates WHERE id = $1`, id)
	return err
}
