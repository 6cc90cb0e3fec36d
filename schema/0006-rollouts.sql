-- 0006: firmware and BIOS rollouts in waves with health gates (docs/rollouts.md).
-- The plan (which node goes in which wave, which were skipped and why) is written whole at
-- creation; the engine then moves waves and nodes forward, one transaction per step, so a
-- restart continues from exactly the recorded state.

CREATE TABLE rollouts (
    id            INTEGER PRIMARY KEY,
    uuid          TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL CHECK (kind IN ('firmware', 'bios')),
    state         TEXT NOT NULL CHECK (state IN ('scheduled', 'running', 'paused', 'completed',
                                                 'aborted')),
    state_reason  TEXT,                     -- why it is paused, aborted...
    selector      TEXT NOT NULL,            -- JSON, as given
    waves_spec    TEXT NOT NULL,            -- JSON {canary, batch, max_per_rack}, as given
    gate          TEXT NOT NULL,            -- JSON {wait_s, timeout_s, require, recipe?, plan?}
    max_failures  INTEGER NOT NULL CHECK (max_failures >= 0),
    failures_seen INTEGER NOT NULL DEFAULT 0,  -- node failures ever (retries included)
    start_at      INTEGER NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX rollouts_active ON rollouts(state) WHERE state IN ('scheduled', 'running', 'paused');

-- state: pending (not started), running (its jobs are queued or running), gating (every job
-- ended; the gate is being evaluated), done (gate evaluated).
CREATE TABLE rollout_waves (
    rollout_id  INTEGER NOT NULL REFERENCES rollouts(id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,           -- 0 is the canary wave when there is one
    canary      INTEGER NOT NULL DEFAULT 0,
    state       TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'gating', 'done')),
    started_at  INTEGER,                    -- first start
    finished_at INTEGER,                    -- last job ended
    done_at     INTEGER,                    -- gate evaluated
    PRIMARY KEY (rollout_id, idx)
) WITHOUT ROWID;

-- One row per selected node. wave NULL: skipped at planning. phase while running: job (its
-- update job is queued or running) or gate (job succeeded, gate not yet passed).
CREATE TABLE rollout_nodes (
    rollout_id   INTEGER NOT NULL REFERENCES rollouts(id) ON DELETE CASCADE,
    node_id      INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    node_name    TEXT NOT NULL,
    rack_name    TEXT,
    wave         INTEGER,
    state        TEXT NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'failed',
                                                'skipped')),
    phase        TEXT CHECK (phase IS NULL OR phase IN ('job', 'gate')),
    reason       TEXT,                      -- why skipped or failed
    attempt      INTEGER NOT NULL DEFAULT 0, -- jobs started for this node (a resume may retry)
    job_id       INTEGER REFERENCES jobs(id),
    gate_job_id  INTEGER REFERENCES jobs(id),
    result       TEXT,                      -- JSON: the update job's result
    started_at   INTEGER,
    job_done_at  INTEGER,
    finished_at  INTEGER,
    PRIMARY KEY (rollout_id, node_id)
) WITHOUT ROWID;
CREATE INDEX rollout_nodes_wave ON rollout_nodes(rollout_id, wave, state);
CREATE INDEX rollout_nodes_node ON rollout_nodes(node_id, state);
CREATE INDEX rollout_nodes_running ON rollout_nodes(state, rollout_id) WHERE state = 'running';
