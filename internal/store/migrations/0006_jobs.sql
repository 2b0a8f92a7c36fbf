-- Sandbox jobs: the user-visible state and durable results of every job
-- (River's own tables hold only the queue, and forget finished work).
CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,
    action         TEXT NOT NULL,
    action_version TEXT NOT NULL,
    state          TEXT NOT NULL,
    tenant         TEXT NOT NULL,
    owner          TEXT NOT NULL,
    business_id    TEXT NOT NULL DEFAULT '',
    -- business_key is business_id while the job is active or succeeded and
    -- NULL otherwise: a failed or canceled job leaves the id free to retry.
    business_key   TEXT,
    request_sha256 TEXT NOT NULL,
    inputs         TEXT NOT NULL,
    options        TEXT NOT NULL DEFAULT '{}',
    outputs        TEXT NOT NULL DEFAULT '[]',
    error          TEXT NOT NULL DEFAULT '',
    blocked        TEXT NOT NULL DEFAULT '[]',
    attempt        INTEGER NOT NULL DEFAULT 0,
    max_attempts   INTEGER NOT NULL,
    -- river_id is the queue job now responsible for this job: a stale
    -- queue job (from before a crash) finds another and does nothing.
    river_id       INTEGER NOT NULL DEFAULT 0,
    sandbox_id     TEXT NOT NULL DEFAULT '',
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    started_at     TEXT,
    finished_at    TEXT
);
CREATE UNIQUE INDEX jobs_by_business ON jobs (tenant, business_key) WHERE business_key IS NOT NULL;
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_owner ON jobs (owner, created_at);

CREATE TABLE job_events (
    job_id  TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    at      TEXT NOT NULL,
    type    TEXT NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- Content-addressed files: job inputs (uploaded or inline) and outputs.
CREATE TABLE blobs (
    sha256     TEXT PRIMARY KEY,
    size       INTEGER NOT NULL,
    mime       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
-- Which jobs use which blobs; a blob no job uses is swept after a grace
-- period (an upload waits for the job that will name it).
CREATE TABLE job_files (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    sha256 TEXT NOT NULL,
    role   TEXT NOT NULL,
    PRIMARY KEY (job_id, sha256, role)
);
CREATE INDEX job_files_by_sha ON job_files (sha256);
