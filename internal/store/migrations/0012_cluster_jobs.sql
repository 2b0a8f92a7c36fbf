-- Sandbox jobs across a cluster's workers.
--
-- jobs.worker: the worker running the job's attempt ('' on one daemon, and
-- while queued). A worker that restarts requeues its own attempts only;
-- HQ requeues the attempts of a worker whose lease ran out.
ALTER TABLE jobs ADD COLUMN worker TEXT NOT NULL DEFAULT '';

-- blob_chunks: a file's content in pieces of at most 1 MiB, where every
-- node of a cluster reads it (each keeps a local copy as a cache). One
-- daemon alone keeps its files on its disk only and writes no rows here.
-- A blob's record (blobs) is written after its chunks and deleted with
-- them, so a record always has its content.
CREATE TABLE blob_chunks (
    sha256 TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    data   BLOB NOT NULL,
    PRIMARY KEY (sha256, seq)
);

-- lost_deletes: resources deleted through HQ while their worker was lost
-- (HQ forgot them without the worker's word). When the worker answers
-- again, HQ deletes each there and drops its row: nothing forgotten stays
-- behind on a worker that comes back.
CREATE TABLE lost_deletes (
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    worker_id  TEXT NOT NULL,
    tenant_id  TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    PRIMARY KEY (kind, id)
);
