-- A job's workspace destination ({sandbox, path} as JSON), '' for none:
-- where its outputs are written when it succeeds.
ALTER TABLE jobs ADD COLUMN output_dest TEXT NOT NULL DEFAULT '';
