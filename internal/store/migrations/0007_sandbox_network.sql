-- Each sandbox's network policy (JSON; {} is mode none), and the keys of
-- its egress: its CA and its bound secrets, sealed under the data
-- directory's key file, so a copy of the database alone reveals neither.
ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT '{}';

CREATE TABLE sandbox_network_keys (
    sandbox_id TEXT PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
    ca_cert    TEXT NOT NULL,
    ca_key     BLOB NOT NULL,
    secrets    BLOB
);
