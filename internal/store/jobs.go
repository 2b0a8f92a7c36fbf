package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
)

const jobColumns = `id, action, action_version, state, tenant, owner, business_id, request_sha256, inputs, options,
	outputs, error, blocked, attempt, max_attempts, river_id, sandbox_id, created_at, updated_at, started_at, finished_at,
	output_dest, worker`

func scanJob(row interface{ Scan(...any) error }) (*jobs.Job, error) {
	var j jobs.Job
	var inputs, options, outputs, jerr, blocked, created, updated string
	var started, finished sql.NullString
	var dest string
	if err := row.Scan(&j.ID, &j.Action, &j.ActionVersion, &j.State, &j.Tenant, &j.Owner, &j.BusinessID,
		&j.RequestSHA256, &inputs, &options, &outputs, &jerr, &blocked, &j.Attempt, &j.MaxAttempts, &j.RiverID,
		&j.SandboxID, &created, &updated, &started, &finished, &dest, &j.Worker); err != nil {
		return nil, err
	}
	if dest != "" {
		j.Output = &apitype.WorkspaceRef{}
		_ = json.Unmarshal([]byte(dest), j.Output)
	}
	_ = json.Unmarshal([]byte(inputs), &j.Inputs)
	if options != "" && options != "{}" && options != "null" {
		j.Options = json.RawMessage(options)
	}
	_ = json.Unmarshal([]byte(outputs), &j.Outputs)
	if jerr != "" {
		j.Error = &apitype.JobError{}
		_ = json.Unmarshal([]byte(jerr), j.Error)
	}
	_ = json.Unmarshal([]byte(blocked), &j.Blocked)
	j.CreatedAt, j.UpdatedAt = parseTime(created), parseTime(updated)
	j.StartedAt, j.FinishedAt = parseTimePtr(started), parseTimePtr(finished)
	return &j, nil
}

// businessKey is the value of jobs.business_key for a job in state.
func businessKey(j *jobs.Job) any {
	if j.BusinessID == "" || j.State == apitype.JobFailed || j.State == apitype.JobCanceled {
		return nil
	}
	return j.BusinessID
}

func (db *DB) InsertJob(ctx context.Context, j *jobs.Job, ev apitype.JobEvent) error {
	options := "{}"
	if len(j.Options) > 0 {
		options = string(j.Options)
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		t := formatTime(j.CreatedAt)
		if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, action, action_version, state, tenant, owner,
			business_id, business_key, request_sha256, inputs, options, max_attempts, created_at, updated_at, output_dest)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14)`,
			j.ID, j.Action, j.ActionVersion, j.State, j.Tenant, j.Owner, j.BusinessID, businessKey(j),
			j.RequestSHA256, mustJSON(j.Inputs), options, j.MaxAttempts, t, outputDest(j)); err != nil {
			return err
		}
		for _, in := range j.Inputs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_files (job_id, sha256, role) VALUES ($1, $2, 'input')
				ON CONFLICT DO NOTHING`,
				j.ID, in.SHA256); err != nil {
				return err
			}
		}
		return insertEvent(ctx, tx, j.ID, ev)
	})
	if err != nil && (strings.Contains(err.Error(), "UNIQUE constraint failed: jobs.tenant, jobs.business_key") ||
		strings.Contains(err.Error(), `unique constraint "jobs_by_business"`)) {
		return errcode.BusinessIDTaken.New("business_id %q is in use", j.BusinessID)
	}
	return err
}

// outputDest is the jobs.output_dest of j: its destination as JSON, or
// empty for none.
func outputDest(j *jobs.Job) string {
	if j.Output == nil {
		return ""
	}
	return mustJSON(j.Output)
}

func insertEvent(ctx context.Context, tx *sql.Tx, id string, ev apitype.JobEvent) error {
	if ev.Type == "" {
		return nil
	}
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	body, _ := json.Marshal(ev)
	_, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, seq, at, type, body)
		VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = $1), $2, $3, $4)`,
		id, formatTime(ev.At), ev.Type, string(body))
	return err
}

func (db *DB) GetJob(ctx context.Context, id string) (*jobs.Job, error) {
	j, err := scanJob(db.db.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	return j, notFound(err, errcode.JobNotFound, "job", id)
}

func (db *DB) JobByBusinessID(ctx context.Context, tenant, businessID string) (*jobs.Job, error) {
	j, err := scanJob(db.w.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE tenant = $1 AND business_key = $2`,
		tenant, businessID))
	return j, notFound(err, errcode.JobNotFound, "job", businessID)
}

func (db *DB) ListJobs(ctx context.Context, f jobs.Filter) ([]*jobs.Job, error) {
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE 1 = 1`
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		q += " AND " + strings.ReplaceAll(cond, "?", "$"+itoa(len(args)))
	}
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	if f.Owner != "" {
		add("owner = ?", f.Owner)
	}
	if f.State != "" {
		add("state = ?", f.State)
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if f.Before != "" {
		args = append(args, formatTime(f.BeforeAt), f.Before)
		at, id := "$"+itoa(len(args)-1), "$"+itoa(len(args))
		q += " AND (created_at < " + at + " OR (created_at = " + at + " AND id < " + id + "))"
	}
	limit := f.Limit
	if limit <= 0 || limit > 1001 {
		limit = 100
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT " + itoa(limit)
	return db.queryJobs(ctx, db.db, q, args...)
}

func (db *DB) queryJobs(ctx context.Context, from interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) ([]*jobs.Job, error) {
	rows, err := from.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*jobs.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func (db *DB) JobsInStates(ctx context.Context, states ...string) ([]*jobs.Job, error) {
	if len(states) == 0 {
		return nil, nil
	}
	var args []any
	var marks []string
	for _, s := range states {
		args = append(args, s)
		marks = append(marks, "$"+itoa(len(args)))
	}
	return db.queryJobs(ctx, db.w, `SELECT `+jobColumns+` FROM jobs WHERE state IN (`+strings.Join(marks, ", ")+
		`) ORDER BY created_at, id`, args...)
}

func (db *DB) ChangeJob(ctx context.Context, id string, c jobs.Change) (*jobs.Job, error) {
	var out *jobs.Job
	err := db.tx(ctx, func(tx *sql.Tx) error {
		// It reads, checks, then writes: on Postgres, changes of one job
		// take turns.
		if err := db.lockKey(ctx, tx, "job:"+id); err != nil {
			return err
		}
		j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
		if err != nil {
			return notFound(err, errcode.JobNotFound, "job", id)
		}
		if len(c.From) > 0 && !slices.Contains(c.From, j.State) {
			return errcode.JobState.New("job %s is %s", id, j.State)
		}
		// A job whose queue job is not recorded yet (river_id 0) goes to
		// the first queue job that claims it.
		if (c.RiverID != 0 && j.RiverID != 0 && j.RiverID != c.RiverID) || (c.Unclaimed && j.RiverID != 0) {
			return errcode.JobState.New("job %s is run by another queue job", id)
		}
		now := time.Now().UTC()
		if c.To != "" && c.To != j.State {
			j.State = c.To
			if c.To == apitype.JobStarting && j.StartedAt == nil {
				j.StartedAt = &now
			}
			if apitype.JobTerminal(c.To) {
				j.FinishedAt = &now
			}
		}
		if c.Attempt != nil {
			j.Attempt = *c.Attempt
		}
		if c.SandboxID != nil {
			j.SandboxID = *c.SandboxID
		}
		if c.Worker != nil {
			j.Worker = *c.Worker
		}
		if c.Outputs != nil {
			j.Outputs = c.Outputs
		}
		if c.Error != nil {
			j.Error = c.Error
		}
		if c.Blocked != nil {
			j.Blocked = c.Blocked
		}
		if c.ResetRiver {
			j.RiverID = 0
		}
		if c.NewRiver != 0 {
			j.RiverID = c.NewRiver
		}
		j.UpdatedAt = now
		jerr := ""
		if j.Error != nil {
			jerr = mustJSON(j.Error)
		}
		var started, finished any
		if j.StartedAt != nil {
			started = formatTime(*j.StartedAt)
		}
		if j.FinishedAt != nil {
			finished = formatTime(*j.FinishedAt)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $1, business_key = $2, outputs = $3, error = $4,
			blocked = $5, attempt = $6, river_id = $7, sandbox_id = $8, updated_at = $9, started_at = $10, finished_at = $11,
			worker = $12 WHERE id = $13`, j.State, businessKey(j), mustJSON(j.Outputs), jerr, mustJSON(j.Blocked), j.Attempt,
			j.RiverID, j.SandboxID, formatTime(now), started, finished, j.Worker, id); err != nil {
			return err
		}
		for _, o := range c.Outputs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_files (job_id, sha256, role) VALUES ($1, $2, 'output')
				ON CONFLICT DO NOTHING`,
				id, o.SHA256); err != nil {
				return err
			}
		}
		ev := c.Event
		if ev.Type == "" && c.To != "" {
			ev.Type = c.To
		}
		ev.Attempt = j.Attempt
		if ev.Error == nil && apitype.JobTerminal(c.To) {
			ev.Error = c.Error
		}
		if err := insertEvent(ctx, tx, id, ev); err != nil {
			return err
		}
		out = j
		return nil
	})
	return out, err
}

func (db *DB) JobEvents(ctx context.Context, id string, after int64) ([]apitype.JobEvent, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT seq, body FROM job_events WHERE job_id = $1 AND seq > $2 ORDER BY seq`, id, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []apitype.JobEvent
	for rows.Next() {
		var ev apitype.JobEvent
		var body string
		if err := rows.Scan(&ev.Seq, &body); err != nil {
			return nil, err
		}
		seq := ev.Seq
		_ = json.Unmarshal([]byte(body), &ev)
		ev.Seq = seq
		out = append(out, ev)
	}
	return out, rows.Err()
}

func (db *DB) ActiveJobs(ctx context.Context, tenant, owner string) (global, ofTenant, ofOwner int, err error) {
	err = db.w.QueryRowContext(ctx, `SELECT COUNT(*),
		COALESCE(SUM(CASE WHEN tenant = $1 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN tenant = $1 AND owner = $2 THEN 1 ELSE 0 END), 0)
		FROM jobs WHERE state IN ('starting', 'running')`, tenant, owner).Scan(&global, &ofTenant, &ofOwner)
	return
}

func (db *DB) DeleteFinishedJobs(ctx context.Context, cutoff time.Time) (int, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM jobs WHERE finished_at IS NOT NULL AND finished_at < $1`, formatTime(cutoff))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (db *DB) PutBlob(ctx context.Context, b jobs.Blob) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO blobs (sha256, size, mime, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (sha256) DO UPDATE SET created_at = excluded.created_at`, b.SHA256, b.Size, b.MIME, formatTime(b.CreatedAt))
	return err
}

func (db *DB) GetBlob(ctx context.Context, sha string) (*jobs.Blob, error) {
	var b jobs.Blob
	var created string
	err := db.db.QueryRowContext(ctx, `SELECT sha256, size, mime, created_at FROM blobs WHERE sha256 = $1`, sha).
		Scan(&b.SHA256, &b.Size, &b.MIME, &created)
	if err != nil {
		return nil, notFound(err, errcode.FileNotFound, "file", sha)
	}
	b.CreatedAt = parseTime(created)
	return &b, nil
}

func (db *DB) UnusedBlobs(ctx context.Context, cutoff time.Time) ([]string, error) {
	rows, err := db.w.QueryContext(ctx, `SELECT sha256 FROM blobs WHERE created_at < $1
		AND NOT EXISTS (SELECT 1 FROM job_files f WHERE f.sha256 = blobs.sha256)`, formatTime(cutoff))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (db *DB) DeleteBlob(ctx context.Context, sha string) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE sha256 = $1
			AND NOT EXISTS (SELECT 1 FROM job_files f WHERE f.sha256 = blobs.sha256)`, sha)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			if _, err = tx.ExecContext(ctx, `DELETE FROM blob_owners WHERE sha256 = $1`, sha); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE sha256 = $1`, sha)
		}
		return err
	})
}

func (db *DB) AddBlobOwner(ctx context.Context, tenant, sha string) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO blob_owners (tenant_id, sha256, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (tenant_id, sha256) DO NOTHING`, tenant, sha, now())
	return err
}

func (db *DB) BlobOwned(ctx context.Context, tenant, sha string) (bool, error) {
	var n int
	err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM blob_owners WHERE tenant_id = $1 AND sha256 = $2`, tenant, sha).Scan(&n)
	return n > 0, err
}

var _ jobs.Store = (*DB)(nil)

func itoa(i int) string { return strconv.Itoa(i) }

// blobChunk is the size of one blob_chunks row.
const blobChunk = 1 << 20

// PutBlobContent stores what r yields as the content of blob sha, in
// chunks, in one transaction: all of it or none. Content already stored
// is kept (the same SHA-256 is the same content).
func (db *DB) PutBlobContent(ctx context.Context, sha string, r io.Reader) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM blob_chunks WHERE sha256 = $1 AND seq = 0`, sha).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		buf := make([]byte, blobChunk)
		for seq := 0; ; seq++ {
			k, err := io.ReadFull(r, buf)
			if k > 0 || seq == 0 {
				if _, err := tx.ExecContext(ctx, `INSERT INTO blob_chunks (sha256, seq, data) VALUES ($1, $2, $3)
					ON CONFLICT (sha256, seq) DO NOTHING`, sha, seq, buf[:k]); err != nil {
					return err
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
}

// OpenBlobContent reads blob sha's stored content, a chunk at a time; one
// with none stored is FileNotFound.
func (db *DB) OpenBlobContent(ctx context.Context, sha string) (io.ReadCloser, error) {
	var n int
	if err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM blob_chunks WHERE sha256 = $1`, sha).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errcode.FileNotFound.New("file %s has no stored content", sha)
	}
	return &chunkReader{ctx: ctx, db: db, sha: sha, n: n}, nil
}

// chunkReader reads a blob's chunks in order.
type chunkReader struct {
	ctx  context.Context
	db   *DB
	sha  string
	n    int // chunks in all
	next int
	buf  []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.next >= c.n {
			return 0, io.EOF
		}
		var data []byte
		if err := c.db.db.QueryRowContext(c.ctx, `SELECT data FROM blob_chunks WHERE sha256 = $1 AND seq = $2`,
			c.sha, c.next).Scan(&data); err != nil {
			return 0, fmt.Errorf("reading chunk %d of file %s: %w", c.next, c.sha, err)
		}
		c.buf, c.next = data, c.next+1
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

var _ jobs.Contents = (*DB)(nil)
