package store

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/sandbox"
)

var _ sandbox.Store = (*DB)(nil)

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// CreateSandbox inserts a sandbox.
func (db *DB) CreateSandbox(ctx context.Context, sb *sandbox.Sandbox) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO sandboxes
		(id, name, runtime, state, reason, env, labels, agent_pid, agent_token, created_at, updated_at, resources, uid, idle,
		 template, pool, network, tenant_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		sb.ID, nullString(sb.Name), sb.Runtime, sb.State, sb.Reason, mustJSON(sb.Env), mustJSON(sb.Labels),
		sb.AgentPID, sb.AgentToken, formatTime(sb.CreatedAt), formatTime(sb.UpdatedAt), mustJSON(sb.Resources), sb.UID, mustJSON(sb.Idle),
		sb.Template, sb.Pool, mustJSON(sb.Network), sb.Tenant)
	if isUnique(err) {
		return errcode.NameTaken.New("a sandbox named %q exists", sb.Name)
	}
	return err
}

const sandboxColumns = `id, name, runtime, state, reason, env, labels, agent_pid, agent_token, created_at, updated_at,
	resources, uid, idle, template, pool, network, tenant_id`

func scanSandbox(row interface{ Scan(...any) error }) (*sandbox.Sandbox, error) {
	var sb sandbox.Sandbox
	var name sql.NullString
	var env, labels, created, updated, resources, idle, network string
	if err := row.Scan(&sb.ID, &name, &sb.Runtime, &sb.State, &sb.Reason, &env, &labels,
		&sb.AgentPID, &sb.AgentToken, &created, &updated, &resources, &sb.UID, &idle, &sb.Template, &sb.Pool, &network, &sb.Tenant); err != nil {
		return nil, err
	}
	_ = json.Unmarshal([]byte(network), &sb.Network)
	_ = json.Unmarshal([]byte(resources), &sb.Resources)
	_ = json.Unmarshal([]byte(idle), &sb.Idle)
	sb.Name = name.String
	_ = json.Unmarshal([]byte(env), &sb.Env)
	_ = json.Unmarshal([]byte(labels), &sb.Labels)
	sb.CreatedAt, sb.UpdatedAt = parseTime(created), parseTime(updated)
	return &sb, nil
}

// GetSandbox returns a sandbox by ID.
func (db *DB) GetSandbox(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	sb, err := scanSandbox(db.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = $1`, id))
	return sb, notFound(err, errcode.SandboxNotFound, "sandbox", id)
}

// GetSandboxByName returns tenant's sandbox called name.
func (db *DB) GetSandboxByName(ctx context.Context, tenant, name string) (*sandbox.Sandbox, error) {
	sb, err := scanSandbox(db.db.QueryRowContext(ctx,
		`SELECT `+sandboxColumns+` FROM sandboxes WHERE tenant_id = $1 AND name = $2`, tenant, name))
	return sb, notFound(err, errcode.SandboxNotFound, "sandbox", name)
}

// ListSandboxes returns every sandbox, oldest first.
func (db *DB) ListSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sandbox.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

// SetSandboxState updates a sandbox's state, reason and agent PID.
func (db *DB) SetSandboxState(ctx context.Context, id, state, reason string, agentPID int) error {
	res, err := db.w.ExecContext(ctx,
		`UPDATE sandboxes SET state = $1, reason = $2, agent_pid = $3, updated_at = $4 WHERE id = $5`,
		state, reason, agentPID, now(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errcode.SandboxNotFound.New("sandbox %q not found", id)
	}
	return nil
}

// ClaimPooled takes the oldest running sandbox out of pool for claim.
func (db *DB) ClaimPooled(ctx context.Context, pool string, claim *sandbox.Sandbox) (*sandbox.Sandbox, error) {
	t := now()
	// On Postgres concurrent claims skip each other's sandbox (SQLite's
	// writers take turns), and the outer pool test keeps a sandbox from
	// being claimed twice in any case.
	skip := ""
	if db.dialect == Postgres {
		skip = " FOR UPDATE SKIP LOCKED"
	}
	sb, err := scanSandbox(db.w.QueryRowContext(ctx, `UPDATE sandboxes
		SET pool = '', name = $1, env = $2, labels = $3, idle = $4, created_at = $5, updated_at = $5, tenant_id = $7
		WHERE id = (SELECT id FROM sandboxes WHERE pool = $6 AND state = 'running' ORDER BY created_at, id LIMIT 1`+skip+`)
			AND pool = $6
		RETURNING `+sandboxColumns,
		nullString(claim.Name), mustJSON(claim.Env), mustJSON(claim.Labels), mustJSON(claim.Idle), t, pool, claim.Tenant))
	if isUnique(err) {
		return nil, errcode.NameTaken.New("a sandbox named %q exists", claim.Name)
	}
	return sb, notFound(err, errcode.PoolNotFound, "pool", pool)
}

// DeleteSandbox deletes a sandbox and its commands.
func (db *DB) DeleteSandbox(ctx context.Context, id string) error {
	_, err := db.w.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = $1`, id)
	return err
}

// InsertCommand stores a new command record, whatever its status. Its
// seq is one more than the sandbox's newest; on Postgres inserts into one
// sandbox take turns so that no two get the same.
func (db *DB) InsertCommand(ctx context.Context, c *sandbox.CommandRecord) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if err := db.lockKey(ctx, tx, "commands:"+c.SandboxID); err != nil {
			return err
		}
		return insertCommand(ctx, tx, c)
	})
}

func insertCommand(ctx context.Context, tx *sql.Tx, c *sandbox.CommandRecord) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO commands
		(id, sandbox_id, command, argv, cwd, timeout_ms, status, reason, exit_code, signal, started_at, finished_at,
		 stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
		        (SELECT COALESCE(MAX(seq), 0) + 1 FROM commands WHERE sandbox_id = $2))`,
		c.ID, c.SandboxID, c.Command, mustJSON(c.Argv), c.Cwd, c.TimeoutMS, c.Status, c.Reason, c.ExitCode, c.Signal,
		formatTime(c.StartedAt), timePtrValue(c.FinishedAt), c.StdoutBytes, c.StderrBytes,
		boolInt(c.StdoutTruncated), boolInt(c.StderrTruncated))
	return err
}

// DeleteCommand deletes one command record.
func (db *DB) DeleteCommand(ctx context.Context, sandboxID, id string) error {
	_, err := db.w.ExecContext(ctx, `DELETE FROM commands WHERE id = $1 AND sandbox_id = $2`, id, sandboxID)
	return err
}

// FinishCommand stores how a command ended, once (a record that no longer
// says running is left alone), and trims the sandbox's finished commands
// to the newest keep, in one transaction: one sync to disk, not two.
func (db *DB) FinishCommand(ctx context.Context, c *sandbox.CommandRecord, keep int) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, finishCommandSQL,
			c.Status, c.Reason, c.ExitCode, c.Signal, timePtrValue(c.FinishedAt), c.StdoutBytes, c.StderrBytes,
			boolInt(c.StdoutTruncated), boolInt(c.StderrTruncated), c.ID, c.SandboxID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, pruneCommandsSQL, c.SandboxID, keep)
		return err
	})
}

const finishCommandSQL = `UPDATE commands SET status = $1, reason = $2, exit_code = $3, signal = $4,
	finished_at = $5, stdout_bytes = $6, stderr_bytes = $7, stdout_truncated = $8, stderr_truncated = $9
	WHERE id = $10 AND sandbox_id = $11 AND status = 'running'`

const commandColumns = `id, sandbox_id, command, argv, cwd, timeout_ms, status, reason, exit_code, signal,
	started_at, finished_at, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated`

func scanCommand(row interface{ Scan(...any) error }) (*sandbox.CommandRecord, error) {
	var c sandbox.CommandRecord
	var argv, started string
	var finished sql.NullString
	var exit sql.NullInt64
	var outTrunc, errTrunc int
	if err := row.Scan(&c.ID, &c.SandboxID, &c.Command, &argv, &c.Cwd, &c.TimeoutMS, &c.Status, &c.Reason,
		&exit, &c.Signal, &started, &finished, &c.StdoutBytes, &c.StderrBytes, &outTrunc, &errTrunc); err != nil {
		return nil, err
	}
	_ = json.Unmarshal([]byte(argv), &c.Argv)
	if exit.Valid {
		code := int(exit.Int64)
		c.ExitCode = &code
	}
	c.StartedAt, c.FinishedAt = parseTime(started), parseTimePtr(finished)
	c.StdoutTruncated, c.StderrTruncated = outTrunc != 0, errTrunc != 0
	return &c, nil
}

// GetCommand returns one command of a sandbox.
func (db *DB) GetCommand(ctx context.Context, sandboxID, id string) (*sandbox.CommandRecord, error) {
	c, err := scanCommand(db.db.QueryRowContext(ctx,
		`SELECT `+commandColumns+` FROM commands WHERE id = $1 AND sandbox_id = $2`, id, sandboxID))
	return c, notFound(err, errcode.CommandNotFound, "command", id)
}

// ListCommands returns a sandbox's commands, newest first.
func (db *DB) ListCommands(ctx context.Context, sandboxID string, limit int) ([]*sandbox.CommandRecord, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+commandColumns+` FROM commands
		WHERE sandbox_id = $1 ORDER BY seq DESC LIMIT $2`, sandboxID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sandbox.CommandRecord
	for rows.Next() {
		c, err := scanCommand(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PruneCommands deletes a sandbox's oldest finished commands beyond keep.
func (db *DB) PruneCommands(ctx context.Context, sandboxID string, keep int) error {
	_, err := db.w.ExecContext(ctx, pruneCommandsSQL, sandboxID, keep)
	return err
}

const pruneCommandsSQL = `DELETE FROM commands WHERE sandbox_id = $1 AND status <> 'running' AND seq <= (
	SELECT seq FROM commands WHERE sandbox_id = $1 AND status <> 'running' ORDER BY seq DESC LIMIT 1 OFFSET $2)`
