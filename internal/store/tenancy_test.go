package store_test

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/berthdev/berth/internal/apitype"
	"github.com/berthdev/berth/internal/errcode"
	"github.com/berthdev/berth/internal/jobs"
	"github.com/berthdev/berth/internal/sandbox"
	"github.com/berthdev/berth/internal/store"
	"github.com/berthdev/berth/internal/tenant"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		const route = "POST /v1/sandboxes"
		begin := func(tenantID, key, sha string, ttl time.Duration) *tenant.IdempotencyRecord {
			t.Helper()
			rec, err := db.BeginIdempotent(ctx, tenantID, key, route, sha, ttl)
			if err != nil {
				t.Fatalf("BeginIdempotent(%s, %s): %v", tenantID, key, err)
			}
			return rec
		}

		// A new key is claimed; a second request with it finds the claim in
		// progress; another tenant's key of the same name is its own.
		if rec := begin("ten_a", "k1", "sha1", time.Hour); rec != nil {
			t.Fatalf("BeginIdempotent(new key) = %+v, want nil (claimed)", rec)
		}
		rec := begin("ten_a", "k1", "sha2", time.Hour)
		if rec == nil || rec.Status != 0 || rec.Tenant != "ten_a" || rec.Key != "k1" || rec.Route != route ||
			rec.RequestSHA256 != "sha1" || rec.Body != nil {
			t.Fatalf("BeginIdempotent(key in progress) = %+v, want the first claim with status 0", rec)
		}
		if got := rec.ExpiresAt.Sub(rec.CreatedAt); got != time.Hour {
			t.Errorf("claim lives %v, want 1h", got)
		}
		if rec := begin("ten_b", "k1", "sha1", time.Hour); rec != nil {
			t.Errorf("BeginIdempotent(other tenant, same key) = %+v, want nil (claimed)", rec)
		}

		// The answer is kept as given, bytes that are not text included, and
		// replayed.
		body := []byte{0, 0xff, 'o', 'k', 0}
		if err := db.FinishIdempotent(ctx, "ten_a", "k1", 201, body); err != nil {
			t.Fatalf("FinishIdempotent: %v", err)
		}
		rec = begin("ten_a", "k1", "sha1", time.Hour)
		if rec == nil || rec.Status != 201 || !bytes.Equal(rec.Body, body) || rec.RequestSHA256 != "sha1" {
			t.Fatalf("BeginIdempotent(answered key) = %+v, want status 201 and body %q", rec, body)
		}
		typeOf, binary := "typeof(body)", "blob"
		if db.Dialect() == store.Postgres {
			typeOf, binary = "pg_typeof(body)::text", "bytea"
		}
		var typ string
		if err := db.SQL().QueryRowContext(ctx,
			`SELECT `+typeOf+` FROM idempotency_keys WHERE tenant_id = 'ten_a' AND key = 'k1'`).Scan(&typ); err != nil || typ != binary {
			t.Errorf("%s = %q, %v; want %s", typeOf, typ, err, binary)
		}
		if err := db.FinishIdempotent(ctx, "ten_a", "k1", 500, nil); err == nil {
			t.Errorf("FinishIdempotent(answered key) = nil, want an error")
		}
		if err := db.FinishIdempotent(ctx, "ten_a", "nope", 201, nil); err == nil {
			t.Errorf("FinishIdempotent(unclaimed key) = nil, want an error")
		}
		// Abandoning leaves an answer alone.
		if err := db.AbandonIdempotent(ctx, "ten_a", "k1"); err != nil {
			t.Fatal(err)
		}
		if rec := begin("ten_a", "k1", "sha1", time.Hour); rec == nil || rec.Status != 201 {
			t.Errorf("after AbandonIdempotent(answered key): %+v, want the answer still there", rec)
		}

		// An abandoned claim is free for the retry.
		if rec := begin("ten_a", "k2", "sha1", time.Hour); rec != nil {
			t.Fatalf("BeginIdempotent(k2) = %+v, want nil", rec)
		}
		if err := db.AbandonIdempotent(ctx, "ten_a", "k2"); err != nil {
			t.Fatalf("AbandonIdempotent: %v", err)
		}
		if rec := begin("ten_a", "k2", "sha1", time.Hour); rec != nil {
			t.Errorf("BeginIdempotent(abandoned key) = %+v, want nil (claimed again)", rec)
		}

		// An expired record, answered or not, is replaced as if absent.
		if rec := begin("ten_a", "k3", "old", -time.Minute); rec != nil {
			t.Fatalf("BeginIdempotent(k3) = %+v, want nil", rec)
		}
		if err := db.FinishIdempotent(ctx, "ten_a", "k3", 200, []byte("old answer")); err != nil {
			t.Fatal(err)
		}
		if rec := begin("ten_a", "k3", "new", time.Hour); rec != nil {
			t.Fatalf("BeginIdempotent(expired key) = %+v, want nil (replaced)", rec)
		}
		rec = begin("ten_a", "k3", "other", time.Hour)
		if rec == nil || rec.Status != 0 || rec.Body != nil || rec.RequestSHA256 != "new" || !rec.ExpiresAt.After(time.Now()) {
			t.Errorf("after replacing an expired record: %+v, want the new claim (status 0, no body, sha new)", rec)
		}

		// Sweeping: nothing has expired yet, then one record, then all.
		now := time.Now()
		if n, err := db.DeleteExpiredIdempotency(ctx, now); err != nil || n != 0 {
			t.Errorf("DeleteExpiredIdempotency(now) = %d, %v; want 0", n, err)
		}
		begin("ten_a", "k4", "sha1", -time.Minute)
		if n, err := db.DeleteExpiredIdempotency(ctx, now); err != nil || n != 1 {
			t.Errorf("DeleteExpiredIdempotency(now) = %d, %v; want 1 (k4)", n, err)
		}
		if n, err := db.DeleteExpiredIdempotency(ctx, now.Add(2*time.Hour)); err != nil || n != 4 {
			t.Errorf("DeleteExpiredIdempotency(now+2h) = %d, %v; want 4 (ten_a k1 k2 k3, ten_b k1)", n, err)
		}
		if rec := begin("ten_a", "k1", "sha1", time.Hour); rec != nil {
			t.Errorf("BeginIdempotent(swept key) = %+v, want nil", rec)
		}
	})
}

// TestIdempotencyRace: of requests racing to claim one key, exactly one
// wins; the others see its claim.
func TestIdempotencyRace(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		const racers = 8
		for i := range 20 {
			key := fmt.Sprintf("key-%d", i)
			var (
				mu   sync.Mutex
				wins int
			)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range racers {
				wg.Go(func() {
					<-start
					rec, err := db.BeginIdempotent(ctx, "ten_a", key, "POST /v1/jobs", "sha", time.Hour)
					if err != nil {
						t.Errorf("BeginIdempotent(%s): %v", key, err)
						return
					}
					if rec != nil && (rec.Key != key || rec.Status != 0) {
						t.Errorf("BeginIdempotent(%s) lost to %+v, want the winner's claim in progress", key, rec)
					}
					if rec == nil {
						mu.Lock()
						wins++
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			if wins != 1 {
				t.Errorf("%s: %d of %d racers claimed it, want exactly 1", key, wins, racers)
			}
		}
	})
}

// newestFirst sorts entries as ListAudit returns them.
func newestFirst(es []*tenant.AuditEntry) {
	slices.SortFunc(es, func(a, b *tenant.AuditEntry) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}

func auditIDs(es []*tenant.AuditEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func insertAudit(t *testing.T, db *store.DB, tenantID string, at time.Time, keep int) *tenant.AuditEntry {
	t.Helper()
	e := &tenant.AuditEntry{Tenant: tenantID, At: at, KeyID: "key_1", KeyName: "ci", Method: "POST",
		Route: "POST /v1/sandboxes", Resource: "sbx_1", Status: 201, RequestID: "req_1"}
	if err := db.InsertAudit(context.Background(), []*tenant.AuditEntry{e}, keep); err != nil {
		t.Fatalf("InsertAudit: %v", err)
	}
	return e
}

func listAllAudit(t *testing.T, db *store.DB, tenantID string, pageSize int) []*tenant.AuditEntry {
	t.Helper()
	var all []*tenant.AuditEntry
	var pos tenant.AuditPosition
	for range 1000 {
		page, err := db.ListAudit(context.Background(), tenantID, pos, pageSize)
		if err != nil {
			t.Fatalf("ListAudit(%s, %+v): %v", tenantID, pos, err)
		}
		if len(page) > pageSize {
			t.Fatalf("ListAudit(%s, limit %d) returned %d entries", tenantID, pageSize, len(page))
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		last := page[len(page)-1]
		pos = tenant.AuditPosition{At: last.At, ID: last.ID}
	}
	t.Fatalf("ListAudit(%s) never ran out of pages", tenantID)
	return nil
}

func TestAuditTrim(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

		var a, b []*tenant.AuditEntry
		for i := range 7 {
			a = append(a, insertAudit(t, db, "ten_a", base.Add(time.Duration(i)*time.Second), 3))
			if i < 4 {
				b = append(b, insertAudit(t, db, "ten_b", base.Add(time.Duration(i)*time.Second), 10))
			}
		}
		if !strings.HasPrefix(a[0].ID, "aud_") {
			t.Errorf("InsertAudit gave ID %q, want an aud_ ID", a[0].ID)
		}
		newestFirst(a)
		newestFirst(b)
		got, err := db.ListAudit(ctx, "ten_a", tenant.AuditPosition{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(a[:3], got); diff != "" {
			t.Errorf("ten_a after 7 inserts keeping 3 (-want +got):\n%s", diff)
		}
		got, err = db.ListAudit(ctx, "ten_b", tenant.AuditPosition{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(auditIDs(b), auditIDs(got)); diff != "" {
			t.Errorf("ten_b, untouched by ten_a's trim (-want +got):\n%s", diff)
		}

		// Entries of one instant are trimmed by ID, as they are listed.
		var c []*tenant.AuditEntry
		for range 6 {
			c = append(c, insertAudit(t, db, "ten_c", base, 4))
		}
		newestFirst(c)
		got, err = db.ListAudit(ctx, "ten_c", tenant.AuditPosition{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(auditIDs(c[:4]), auditIDs(got)); diff != "" {
			t.Errorf("ten_c, 6 entries of one instant keeping 4 (-want +got):\n%s", diff)
		}

		// keep <= 0 keeps everything.
		for i := range 5 {
			insertAudit(t, db, "ten_b", base.Add(time.Hour+time.Duration(i)), 0)
		}
		if got := listAllAudit(t, db, "ten_b", 100); len(got) != 9 {
			t.Errorf("ten_b after 5 more inserts keeping all: %d entries, want 9", len(got))
		}
	})
}

func TestAuditPages(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		db := open(t)
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var all []*tenant.AuditEntry
		for i := range 25 {
			tenantID := "ten_a"
			if i%3 == 1 {
				tenantID = "ten_b"
			}
			// Pairs of entries share an instant, so pages break inside them.
			e := &tenant.AuditEntry{Tenant: tenantID, At: base.Add(time.Duration(i/2) * time.Millisecond),
				KeyID: "key_" + tenantID, KeyName: "name", Method: "DELETE", Route: "DELETE /v1/sandboxes/{id}",
				Resource: fmt.Sprintf("sbx_%d", i), Status: 404, Reason: "sandbox_not_found", RequestID: fmt.Sprintf("req_%d", i)}
			if err := db.InsertAudit(context.Background(), []*tenant.AuditEntry{e}, 1000); err != nil {
				t.Fatal(err)
			}
			all = append(all, e)
		}
		newestFirst(all)
		ofTenant := func(tenantID string) []*tenant.AuditEntry {
			var out []*tenant.AuditEntry
			for _, e := range all {
				if e.Tenant == tenantID {
					out = append(out, e)
				}
			}
			return out
		}

		tests := []struct {
			tenantID string
			want     []*tenant.AuditEntry
		}{
			{"*", all},
			{"ten_a", ofTenant("ten_a")},
			{"ten_b", ofTenant("ten_b")},
			{"ten_none", nil},
		}
		for _, tt := range tests {
			for _, size := range []int{1, 2, 3, 4, 7, 100} {
				got := listAllAudit(t, db, tt.tenantID, size)
				if diff := gocmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ListAudit(%s) in pages of %d (-want +got):\n%s", tt.tenantID, size, diff)
				}
			}
		}
	})
}

// TestTenancyMigrationFresh: 0008 applies to a new database.
func TestTenancyMigrationFresh(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		db := open(t)
		var version, name string
		if err := db.SQL().QueryRowContext(ctx,
			`SELECT version FROM schema_migrations WHERE version = '0008_tenants'`).Scan(&version); err != nil {
			t.Errorf("0008_tenants not recorded: %v", err)
		}
		if err := db.SQL().QueryRowContext(ctx, `SELECT name FROM tenants WHERE id = 'ten_default'`).Scan(&name); err != nil || name != "default" {
			t.Errorf("default tenant: %q, %v; want default", name, err)
		}
	})
}

// previousRelease makes the database at target (a SQLite path or a
// Postgres URL) as the previous release left it: the migration files
// before 0008, applied and recorded as its migrator did (the package
// embeds these files; an external test reads them from disk). It returns
// the open connection and an exec that fails the test on error; the
// caller adds rows and closes it.
func previousRelease(t *testing.T, target string) (*sql.DB, func(string, ...any)) {
	t.Helper()
	ctx := context.Background()
	driver, dsn, schema := "sqlite", store.DSN(target), func(ddl string) string { return ddl }
	if store.IsPostgres(target) {
		driver, dsn, schema = "pgx", target, store.PostgresSchema
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	t.Cleanup(func() { raw.Close() })
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(schema(`CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`))
	files := os.DirFS("migrations")
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Contains(names, "0008_tenants.sql") {
		t.Fatalf("migrations = %v, want 0008_tenants.sql among them", names)
	}
	for _, name := range names {
		if name >= "0008" {
			break
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		exec(schema(string(body)))
		exec(`INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
			strings.TrimSuffix(name, ".sql"), "2026-01-01T00:00:00.000000000Z")
	}
	return raw, exec
}

// TestTenancyMigration upgrades a database the previous release made
// (migrations 0001 to 0007, with its rows) and checks what 0008 made of
// every row it touches.
func TestTenancyMigration(t *testing.T) {
	t.Parallel()
	forEachTarget(t, testTenancyMigration)
}

func testTenancyMigration(t *testing.T, path string) {
	ctx := context.Background()
	raw, exec := previousRelease(t, path)

	// Its rows. In the previous release a job's tenant was its key.
	const ts = "2026-02-01T00:00:00.000000000Z"
	exec(`INSERT INTO api_keys (id, name, scope, prefix, hash, created_at) VALUES
		('key_admin', 'ops', 'admin', 'bk_aaaaaa', 'hash-admin', $1),
		('key_exec', 'ci', 'execution', 'bk_bbbbbb', 'hash-exec', $1)`, ts)
	exec(`INSERT INTO sandboxes (id, name, runtime, state, agent_token, created_at, updated_at, pool) VALUES
		('sbx_one', 'one', 'process', 'running', 'agt_1', $1, $1, ''),
		('sbx_two', 'two', 'process', 'stopped', 'agt_2', $1, $1, ''),
		('sbx_pooled', NULL, 'process', 'running', 'agt_3', $1, $1, 'p')`, ts)
	exec(`INSERT INTO commands (id, sandbox_id, timeout_ms, status, started_at, seq) VALUES
		('cmd_1', 'sbx_one', 1000, 'exited', $1, 1)`, ts)
	exec(`INSERT INTO services (sandbox_id, name, spec, created_at, updated_at) VALUES
		('sbx_one', 'web', '{}', $1, $1)`, ts)
	exec(`INSERT INTO sandbox_network_keys (sandbox_id, ca_cert, ca_key) VALUES ('sbx_two', 'cert', $1)`, []byte{1, 2})
	exec(`INSERT INTO templates (id, name, state, source, created_at, updated_at) VALUES
		('tpl_1', 'python', 'ready', 'image', $1, $1)`, ts)
	const sha = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	exec(`INSERT INTO jobs (id, action, action_version, state, tenant, owner, business_id, business_key,
			request_sha256, inputs, max_attempts, created_at, updated_at) VALUES
		('job_a', 'render', '1', 'running', 'key_exec', 'key_exec', 'order-1', 'order-1', 'x', '[]', 3, $1, $1),
		('job_b', 'render', '1', 'queued', 'key_exec2', 'key_exec2', 'order-1', 'order-1', 'y', '[]', 3, $1, $1),
		('job_c', 'render', '1', 'succeeded', 'key_exec', 'key_exec', 'solo', 'solo', 'z', '[]', 3, $1, $1)`, ts)
	exec(`INSERT INTO job_files (job_id, sha256, role) VALUES ('job_a', $1, 'input'), ('job_b', $1, 'output')`, sha)
	exec(`INSERT INTO blobs (sha256, size, mime, created_at) VALUES ($1, 10, 'text/plain', $2)`, sha, ts)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(database of the previous release): %v", err)
	}
	defer db.Close()
	q := db.SQL()
	rows := func(query string, args ...any) []string {
		t.Helper()
		rs, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rs.Close()
		cols, _ := rs.Columns()
		var out []string
		for rs.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, v := range vals {
				fields = append(fields, v.String)
			}
			out = append(out, strings.Join(fields, " "))
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}

	check("tenants", rows(`SELECT id, name FROM tenants`), []string{"ten_default default"})
	check("keys", rows(`SELECT id, tenant_id FROM api_keys ORDER BY id`),
		[]string{"key_admin ", "key_exec ten_default"})
	check("sandboxes", rows(`SELECT id, name, tenant_id, pool, agent_token FROM sandboxes ORDER BY id`),
		[]string{"sbx_one one ten_default  agt_1", "sbx_pooled   p agt_3", "sbx_two two ten_default  agt_2"})
	check("commands", rows(`SELECT id, sandbox_id FROM commands`), []string{"cmd_1 sbx_one"})
	check("services", rows(`SELECT sandbox_id, name FROM services`), []string{"sbx_one web"})
	check("network keys", rows(`SELECT sandbox_id, ca_cert FROM sandbox_network_keys`), []string{"sbx_two cert"})
	check("templates", rows(`SELECT id, name, tenant_id FROM templates`), []string{"tpl_1 python "})
	check("jobs", rows(`SELECT id, tenant, business_key FROM jobs ORDER BY id`), []string{
		"job_a ten_default key_exec/order-1", "job_b ten_default key_exec2/order-1", "job_c ten_default solo"})
	check("job files", rows(`SELECT job_id, role FROM job_files ORDER BY job_id`), []string{"job_a input", "job_b output"})
	check("blob owners", rows(`SELECT tenant_id, sha256 FROM blob_owners`), []string{"ten_default " + sha})
	check("schema_migrations", rows(`SELECT version FROM schema_migrations WHERE version LIKE '0008%'`), []string{"0008_tenants"})
	postgres := db.Dialect() == store.Postgres
	if postgres {
		// Postgres's 0008 alters in place: the indexes are named for
		// the constraints.
		check("sandbox indexes", rows(`SELECT indexname FROM pg_indexes WHERE tablename = 'sandboxes'
			ORDER BY indexname`), []string{"sandboxes_by_pool", "sandboxes_by_tenant", "sandboxes_pkey", "sandboxes_tenant_id_name_key"})
	} else {
		check("foreign_key_check", rows(`PRAGMA foreign_key_check`), nil)
		check("integrity_check", rows(`PRAGMA integrity_check`), []string{"ok"})
		check("sandbox indexes", rows(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sandboxes'
			AND name NOT LIKE 'sqlite_autoindex%' ORDER BY name`), []string{"sandboxes_by_pool", "sandboxes_by_tenant"})
	}

	// Uniqueness after the rebuild: names per tenant, business keys per
	// tenant.
	if _, err := q.ExecContext(ctx, `INSERT INTO sandboxes (id, tenant_id, name, runtime, state, agent_token, created_at, updated_at)
		VALUES ('sbx_dup', 'ten_default', 'one', 'process', 'running', 'agt_4', $1, $1)`, ts); err == nil {
		t.Errorf("a second sandbox named one in ten_default was accepted")
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO sandboxes (id, tenant_id, name, runtime, state, agent_token, created_at, updated_at)
		VALUES ('sbx_other', 'ten_other', 'one', 'process', 'running', 'agt_5', $1, $1)`, ts); err != nil {
		t.Errorf("a sandbox named one in another tenantID: %v", err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO jobs (id, action, action_version, state, tenant, owner, business_id, business_key,
			request_sha256, inputs, max_attempts, created_at, updated_at)
		VALUES ('job_dup', 'render', '1', 'queued', 'ten_default', 'key_exec', 'solo', 'solo', 'w', '[]', 3, $1, $1)`, ts); err == nil {
		t.Errorf("a second job with business key solo in ten_default was accepted")
	}

	// Foreign keys are on again: on a new connection, and on the writer's,
	// which ran the migration with them off (a delete cascades). Postgres
	// never turned them off; the cascade holds there too.
	if !postgres {
		check("foreign_keys on a new connection", rows(`PRAGMA foreign_keys`), []string{"1"})
	}
	if err := db.DeleteSandbox(ctx, "sbx_one"); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	check("commands after deleting sbx_one", rows(`SELECT id FROM commands`), nil)
	check("services after deleting sbx_one", rows(`SELECT name FROM services`), nil)
}

// TestTenancyMigrationJobsMove: the active jobs whose business IDs 0008
// told apart (two keys used one) can still change state. The store
// recomputes business_key from business_id on every change.
func TestTenancyMigrationJobsMove(t *testing.T) {
	t.Parallel()
	forEachTarget(t, testTenancyMigrationJobsMove)
}

func testTenancyMigrationJobsMove(t *testing.T, path string) {
	ctx := context.Background()
	raw, exec := previousRelease(t, path)
	const ts = "2026-02-01T00:00:00.000000000Z"
	exec(`INSERT INTO jobs (id, action, action_version, state, tenant, owner, business_id, business_key,
			request_sha256, inputs, max_attempts, created_at, updated_at) VALUES
		('job_a', 'render', '1', 'running', 'key_a', 'key_a', 'order-1', 'order-1', 'x', '[]', 3, $1, $1),
		('job_b', 'render', '1', 'running', 'key_b', 'key_b', 'order-1', 'order-1', 'y', '[]', 3, $1, $1)`, ts)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	for _, id := range []string{"job_a", "job_b"} {
		if _, err := db.ChangeJob(ctx, id, jobs.Change{To: apitype.JobSucceeded}); err != nil {
			t.Errorf("ChangeJob(%s, succeeded) after the migration: %v", id, err)
		}
	}
}

// TestTemplateFor: a tenant sees its own templates and the shared ones,
// its own first by name, never another's; AnyTenant sees all, shared
// first. Many lookups in a row finish: none holds a reader (the pool has
// eight) after it answers.
func TestTemplateFor(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, open opener) {
		db := open(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		now := time.Now().UTC()
		mk := func(id, tenantID, name string) {
			t.Helper()
			if err := db.CreateTemplate(ctx, &sandbox.Template{ID: id, Tenant: tenantID, Name: name, State: "ready",
				Source: "built", CreatedAt: now, UpdatedAt: now}); err != nil {
				t.Fatalf("CreateTemplate(%s): %v", id, err)
			}
		}
		mk("tpl_shared", "", "web")
		mk("tpl_a", "ten_a", "web")
		mk("tpl_b", "ten_b", "own")
		tests := []struct{ tenantID, nameOrID, want string }{
			{"ten_a", "web", "tpl_a"},      // its own first
			{"ten_b", "web", "tpl_shared"}, // the shared one
			{"ten_b", "own", "tpl_b"},
			{"ten_a", "own", ""},   // another's: not found
			{"ten_a", "tpl_b", ""}, // by ID too
			{"ten_a", "tpl_shared", "tpl_shared"},
			{sandbox.AnyTenant, "web", "tpl_shared"}, // shared first
			{sandbox.AnyTenant, "tpl_b", "tpl_b"},
			{sandbox.AnyTenant, "own", "tpl_b"},
		}
		for range 4 { // 36 lookups: a reader held by each would exhaust the pool
			for _, tt := range tests {
				got, err := db.TemplateFor(ctx, tt.tenantID, tt.nameOrID)
				switch {
				case tt.want == "" && !errcode.Has(err, errcode.TemplateNotFound):
					t.Fatalf("TemplateFor(%s, %s) = %v, %v; want template_not_found", tt.tenantID, tt.nameOrID, got, err)
				case tt.want != "" && (err != nil || got.ID != tt.want):
					t.Fatalf("TemplateFor(%s, %s) = %v, %v; want %s", tt.tenantID, tt.nameOrID, got, err, tt.want)
				}
			}
		}
	})
}
