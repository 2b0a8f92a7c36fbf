-- Templates a sandbox starts from, and warm pools of pre-started sandboxes.
CREATE TABLE templates (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    state      TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    source     TEXT NOT NULL,
    base       TEXT NOT NULL DEFAULT '',
    config     TEXT NOT NULL DEFAULT '{}',
    size_bytes INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- template: the template's ID, '' for the built-in base.
ALTER TABLE sandboxes ADD COLUMN template TEXT NOT NULL DEFAULT '';
-- pool: the warm pool a pre-started, unclaimed sandbox waits in; '' once
-- claimed (or never pooled).
ALTER TABLE sandboxes ADD COLUMN pool TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_by_pool ON sandboxes (pool) WHERE pool <> '';
