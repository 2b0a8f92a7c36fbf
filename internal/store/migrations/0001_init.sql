-- Keys, sandboxes and commands. Written for both SQLite and Postgres:
-- TEXT times in RFC 3339 UTC, INTEGER booleans, $N placeholders in queries.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    revoked_at   TEXT
);

CREATE TABLE sandboxes (
    id          TEXT PRIMARY KEY,
    name        TEXT UNIQUE,
    runtime     TEXT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    env         TEXT NOT NULL DEFAULT '{}',
    labels      TEXT NOT NULL DEFAULT '{}',
    agent_pid   INTEGER NOT NULL DEFAULT 0,
    agent_token TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE commands (
    id               TEXT PRIMARY KEY,
    sandbox_id       TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    command          TEXT NOT NULL DEFAULT '',
    argv             TEXT NOT NULL DEFAULT '[]',
    cwd              TEXT NOT NULL DEFAULT '',
    timeout_ms       INTEGER NOT NULL,
    status           TEXT NOT NULL,
    reason           TEXT NOT NULL DEFAULT '',
    exit_code        INTEGER,
    signal           TEXT NOT NULL DEFAULT '',
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    stdout_bytes     INTEGER NOT NULL DEFAULT 0,
    stderr_bytes     INTEGER NOT NULL DEFAULT 0,
    stdout_truncated INTEGER NOT NULL DEFAULT 0,
    stderr_truncated INTEGER NOT NULL DEFAULT 0,
    seq              INTEGER NOT NULL
);

CREATE INDEX commands_by_sandbox ON commands (sandbox_id, seq);
