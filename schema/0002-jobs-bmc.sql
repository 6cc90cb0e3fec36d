-- 0002: durable jobs and batches; BMC driver options, health and reported identity;
-- the system UUID a node is expected to report.

ALTER TABLE nodes ADD COLUMN system_uuid TEXT;

ALTER TABLE bmcs ADD COLUMN options TEXT;            -- JSON: driver options (cipher suite, timeouts...)
ALTER TABLE bmcs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;  -- consecutive failed contacts
ALTER TABLE bmcs ADD COLUMN last_error TEXT;
ALTER TABLE bmcs ADD COLUMN checked_at INTEGER;      -- last contact attempt
ALTER TABLE bmcs ADD COLUMN fault TEXT;              -- set after N failures in a row, cleared by a success
ALTER TABLE bmcs ADD COLUMN fault_since INTEGER;
ALTER TABLE bmcs ADD COLUMN identity TEXT;           -- JSON: what the BMC last reported about itself

CREATE TABLE batches (
    id         INTEGER PRIMARY KEY,
    uuid       TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,                        -- e.g. power
    params     TEXT NOT NULL,                        -- JSON: selector, target
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- A job is the one way anything long happens. A worker claims it (state running, lease),
-- acts outside any transaction, then records the outcome in one transaction.
CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    uuid             TEXT NOT NULL UNIQUE,
    type             TEXT NOT NULL,                  -- power, boot, verify
    node_id          INTEGER REFERENCES nodes(id) ON DELETE SET NULL,
    node_name        TEXT NOT NULL,                  -- kept when the node is deleted
    batch_id         INTEGER REFERENCES batches(id),
    params           TEXT NOT NULL,                  -- JSON
    mutating         INTEGER NOT NULL,               -- at most one running per node
    state            TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 4,
    recover          INTEGER NOT NULL DEFAULT 0,     -- was running when rackpilotd stopped
    sent_at          INTEGER,                        -- committed just before a mutating BMC
                                                     -- command: after a crash, such a job
                                                     -- verifies instead of sending again
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    not_before       INTEGER NOT NULL,               -- earliest (next) attempt, for backoff
    lease_owner      TEXT,
    lease_until      INTEGER,
    result           TEXT,                           -- JSON
    error_code       TEXT,
    error            TEXT,
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX jobs_state ON jobs(state, not_before, id);
CREATE INDEX jobs_node ON jobs(node_id, id);
CREATE INDEX jobs_batch ON jobs(batch_id, state);
-- The store, not a mutex, serialises mutating actions on one node; this survives restarts.
CREATE UNIQUE INDEX jobs_one_mutating ON jobs(node_id) WHERE state = 'running' AND mutating = 1;
