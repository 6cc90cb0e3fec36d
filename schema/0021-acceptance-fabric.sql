-- 0021: rack acceptance across nodes (docs/acceptance.md). A run's options for the fabric and
-- NCCL checks, and their tests: one row per pair of nodes and round (fabric) or per run (nccl),
-- each driven by one node's acceptance job; the child jobs a row waits on are named in its
-- tests, written in the transaction that queues them. And the board id (on ConnectX, the
-- PSID) the agent reports beside a component's version: an image fits a PSID, not a version.
ALTER TABLE acceptance_runs ADD COLUMN options TEXT;  -- JSON {fabric {...}, nccl {...}}
CREATE TABLE acceptance_pairs (
    run_id      INTEGER NOT NULL REFERENCES acceptance_runs(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('fabric', 'nccl')),
    round       INTEGER NOT NULL,
    server_id   INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE, -- drives it; nccl: rank 0
    client_id   INTEGER REFERENCES nodes(id) ON DELETE CASCADE,          -- NULL for nccl
    state       TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'passed', 'failed', 'skipped')),
    message     TEXT,
    tests       TEXT,                  -- JSON array: per port (fabric) or rank (nccl)
    rev         INTEGER NOT NULL DEFAULT 0,  -- bumped by every update: a stale writer loses
    started_at  INTEGER,
    finished_at INTEGER,
    PRIMARY KEY (run_id, kind, round, server_id)
);
ALTER TABLE firmware_components ADD COLUMN board_id TEXT;  -- agent rows of HCAs: the PSID
