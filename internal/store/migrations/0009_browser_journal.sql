-- The durable journal of browser actions, and browser checkpoints.
-- Sessions live in memory, but what they did outlives them: an entry is
-- written before its action runs and finished after it; one never
-- finished reads as outcome unknown. Every row carries its tenant.
CREATE TABLE browser_journal (
    tenant_id   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    op          TEXT NOT NULL,
    summary     TEXT NOT NULL DEFAULT '',
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    outcome     TEXT NOT NULL DEFAULT '' CHECK (outcome IN ('', 'ok', 'error')),
    reason      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE browser_checkpoints (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    mode       TEXT NOT NULL,
    options    TEXT NOT NULL DEFAULT '{}',
    selected   INTEGER NOT NULL DEFAULT 0,
    urls       TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);
CREATE INDEX browser_checkpoints_by_tenant ON browser_checkpoints (tenant_id, created_at);
