-- 0009: rack acceptance runs (docs/acceptance.md): one result per node and check, each written
-- as it settles, and the sign-offs of passed racks.

CREATE TABLE acceptance_runs (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    rack_id     INTEGER NOT NULL REFERENCES racks(id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,               -- 1, 2, ... per rack; a re-run is a new attempt
    state       TEXT NOT NULL CHECK (state IN ('running', 'passed', 'failed')),
    checks      TEXT NOT NULL,                  -- JSON array of the checks asked for
    burn_in     TEXT,                           -- JSON {recipes, args} or NULL
    created_by  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER,
    UNIQUE (rack_id, attempt)
);
-- At most one running run per rack, as a database fact.
CREATE UNIQUE INDEX acceptance_one_running ON acceptance_runs(rack_id) WHERE state = 'running';

CREATE TABLE acceptance_results (
    run_id      INTEGER NOT NULL REFERENCES acceptance_runs(id) ON DELETE CASCADE,
    node_id     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    check_name  TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'passed', 'failed', 'skipped')),
    message     TEXT,
    fix         TEXT,
    evidence    TEXT,                           -- JSON
    findings    TEXT,                           -- JSON array of {item, expected, actual, message, fix}
    child_job   TEXT,                           -- uuid of the job this check waits on
    attempt     INTEGER NOT NULL,               -- the run attempt that produced this result
    started_at  INTEGER,
    finished_at INTEGER,
    PRIMARY KEY (run_id, node_id, check_name)
) WITHOUT ROWID;

CREATE TABLE acceptance_signoffs (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES acceptance_runs(id) ON DELETE CASCADE,
    signed_by   TEXT NOT NULL,
    signed_at   INTEGER NOT NULL,
    report_sha256 TEXT NOT NULL,
    note        TEXT
);
