-- 0003: the on-node agent (tokens, registration, heartbeats), pinned SSH host keys, step
-- plans pushed over SSH (job steps and logs), and recipes.

-- Where the server connects to push steps. NULL address: the address the agent registered from.
ALTER TABLE nodes ADD COLUMN ssh_address TEXT;
ALTER TABLE nodes ADD COLUMN ssh_port INTEGER CHECK (ssh_port IS NULL OR ssh_port BETWEEN 1 AND 65535);
ALTER TABLE nodes ADD COLUMN ssh_user TEXT;

-- What the node's agent last said about itself.
CREATE TABLE agents (
    node_id       INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
    token_hash    TEXT NOT NULL UNIQUE,     -- sha256 hex of the node's agent token
    registered_at INTEGER NOT NULL,
    seen_at       INTEGER NOT NULL,         -- last registration or heartbeat
    boot_id       TEXT,
    version       TEXT,
    status        TEXT,                     -- idle | busy
    hostname      TEXT,
    address       TEXT,                     -- where the agent said (or was seen) to be reachable
    port          INTEGER                   -- its SSH port, when it said
);

-- Single-use registration secrets; node_id NULL: any machine (discovery).
CREATE TABLE bootstrap_tokens (
    id         INTEGER PRIMARY KEY,
    uuid       TEXT NOT NULL UNIQUE,
    hash       TEXT NOT NULL UNIQUE,
    node_id    INTEGER REFERENCES nodes(id) ON DELETE CASCADE,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    used_by    TEXT,                        -- name of the node that registered with it
    revoked_at INTEGER
);

-- The one host key the server accepts from a node's SSH server.
CREATE TABLE ssh_host_keys (
    node_id     INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
    key_type    TEXT NOT NULL,              -- ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa ...
    key_b64     TEXT NOT NULL,              -- the public key blob, base64 as in authorized_keys
    fingerprint TEXT NOT NULL,              -- SHA256:... as ssh-keygen -l prints it
    pinned_at   INTEGER NOT NULL,
    pinned_by   TEXT NOT NULL
);

-- One row per step of a steps job, created with the job; results arrive from the agent.
CREATE TABLE job_steps (
    job_id           INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    idx              INTEGER NOT NULL,
    step_id          TEXT NOT NULL,
    type             TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'skipped')),
    continue_on_error INTEGER NOT NULL DEFAULT 0,
    runs             INTEGER NOT NULL DEFAULT 0,   -- times it was started
    boot_id          TEXT,                         -- node's boot when it last started
    exit_code        INTEGER,
    started_at       INTEGER,
    finished_at      INTEGER,
    duration_ms      INTEGER,
    output           TEXT,                         -- tail, at most 64 KiB
    output_bytes     INTEGER,
    output_truncated INTEGER NOT NULL DEFAULT 0,
    error            TEXT,
    result           TEXT,                         -- JSON
    PRIMARY KEY (job_id, idx),
    UNIQUE (job_id, step_id)
);

-- The SSH channel's output of a job, in order, capped per job.
CREATE TABLE job_logs (
    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    at     INTEGER NOT NULL,
    data   BLOB NOT NULL,
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
ALTER TABLE jobs ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0;    -- bytes kept in job_logs
ALTER TABLE jobs ADD COLUMN log_dropped INTEGER NOT NULL DEFAULT 0;  -- bytes past the cap

-- Named, parameterised plans.
CREATE TABLE recipes (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    description TEXT,
    params      TEXT NOT NULL,              -- JSON {arg: {required, default, description}}
    steps       TEXT NOT NULL,              -- JSON array of steps with ${arg} placeholders
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
