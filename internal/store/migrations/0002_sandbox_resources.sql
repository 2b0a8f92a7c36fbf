-- Isolated runtimes: each sandbox's resource limits and its own host uid.
ALTER TABLE sandboxes ADD COLUMN resources TEXT NOT NULL DEFAULT '{}';
ALTER TABLE sandboxes ADD COLUMN uid INTEGER NOT NULL DEFAULT 0;
