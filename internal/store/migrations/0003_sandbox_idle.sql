-- Idle policy of each sandbox, as JSON durations in milliseconds.
ALTER TABLE sandboxes ADD COLUMN idle TEXT NOT NULL DEFAULT '{}';
