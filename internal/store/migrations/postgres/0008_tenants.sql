-- Postgres's 0008_tenants: the same schema as ../0008_tenants.sql, which
-- it replaces on Postgres. SQLite cannot change a column's UNIQUE
-- constraint in place, so there sandboxes and templates are copied into
-- new tables and the old ones dropped with foreign keys off; Postgres
-- refuses to drop a table others reference, and needs no copy: it adds the
-- tenant column and swaps the constraints in place. Everything else is as
-- in the SQLite file; keep the two in step.
CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    limits     TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
INSERT INTO tenants (id, name, limits, created_at, updated_at)
    VALUES ('ten_default', 'default', '{}', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z');

-- tenant_id: '' for admin keys (the operator's, tenant-less), else the
-- tenant's ID.
ALTER TABLE api_keys ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
UPDATE api_keys SET tenant_id = 'ten_default' WHERE scope <> 'admin';

-- tenant_id: the owner; '' for warm-pool members and Berth's internal
-- sandboxes until a claim gives them one. Names are unique per tenant.
ALTER TABLE sandboxes ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
UPDATE sandboxes SET tenant_id = 'ten_default' WHERE pool = '';
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_name_key;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_tenant_id_name_key UNIQUE (tenant_id, name);
CREATE INDEX sandboxes_by_tenant ON sandboxes (tenant_id, created_at);

-- tenant_id: '' for shared templates (the operator's, every tenant may use
-- them), else the tenant whose own template it is.
ALTER TABLE templates ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE templates DROP CONSTRAINT templates_name_key;
ALTER TABLE templates ADD CONSTRAINT templates_tenant_id_name_key UNIQUE (tenant_id, name);

-- Jobs counted "tenant" as the key; every job is the default tenant's now.
-- Business IDs are unique per tenant: where two keys used the same one,
-- each keeps it under its key's ID (business_key is business_id or NULL,
-- as ChangeJob keeps it).
UPDATE jobs SET business_id = owner || '/' || business_id, business_key = owner || '/' || business_key
    WHERE business_key IN (SELECT business_key FROM jobs WHERE business_key IS NOT NULL
                           GROUP BY business_key HAVING COUNT(DISTINCT owner) > 1);
UPDATE jobs SET tenant = 'ten_default';

-- Which tenants may read a stored file: those that uploaded it or whose
-- job made it. A blob is shared on disk, never across tenants by API.
CREATE TABLE blob_owners (
    tenant_id  TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, sha256)
);
INSERT INTO blob_owners (tenant_id, sha256, created_at) SELECT 'ten_default', sha256, created_at FROM blobs;
CREATE INDEX blob_owners_by_sha ON blob_owners (sha256);

-- Safe retries: the first answer to a create with an Idempotency-Key,
-- per tenant ('' for admin keys), kept 24 hours. body is sealed: a key's
-- creation answers with its secret.
CREATE TABLE idempotency_keys (
    tenant_id      TEXT NOT NULL,
    key            TEXT NOT NULL,
    route          TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    status         INTEGER NOT NULL DEFAULT 0,
    body           BLOB,
    created_at     TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);

-- The audit log: one row per mutating call, bounded per tenant. Never a
-- body or a secret.
CREATE TABLE audit_log (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    at         TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    key_name   TEXT NOT NULL,
    method     TEXT NOT NULL,
    route      TEXT NOT NULL,
    resource   TEXT NOT NULL DEFAULT '',
    status     INTEGER NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    request_id TEXT NOT NULL
);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant_id, at, id);
