-- The cluster (serve --role hq|worker, internal/cluster). Written for both
-- SQLite and Postgres; only a cluster's shared Postgres holds rows here.
--
-- workers: each worker's lease, renewed by its heartbeat. A heartbeat
-- writes the lease, capabilities and load; only an admin (HQ's API) sets
-- draining. Where a worker listens, its tenant and its credential are HQ's
-- configuration, never read from here.
CREATE TABLE workers (
    id               TEXT PRIMARY KEY,
    incarnation      TEXT NOT NULL,
    started_at       TEXT NOT NULL,
    heartbeat_at     TEXT NOT NULL,
    lease_expires_at TEXT NOT NULL,
    capabilities     TEXT NOT NULL DEFAULT '{}',
    load             TEXT NOT NULL DEFAULT '{}',
    draining         INTEGER NOT NULL DEFAULT 0
);

-- placements: which worker owns each sandbox or browser resource, and its
-- tenant, recorded by HQ when the worker answered the create.
CREATE TABLE placements (
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    worker_id  TEXT NOT NULL,
    tenant_id  TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX placements_by_worker ON placements (worker_id, kind);
CREATE INDEX placements_by_tenant ON placements (tenant_id, kind);
