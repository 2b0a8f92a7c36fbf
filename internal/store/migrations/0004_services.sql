-- Service intents: what each sandbox should run, kept across hibernation
-- and daemon restarts. The agent supervises; this table remembers.
CREATE TABLE services (
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    spec       TEXT NOT NULL,
    stopped    INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, name)
);
