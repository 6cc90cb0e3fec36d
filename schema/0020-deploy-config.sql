-- 0020: deploys that come up configured (docs/deploy.md). A class's deploy defaults (keys,
-- user-data, network); the user data a deploy carries, sealed like BMC passwords and wiped
-- when the job ends; the first boot a deployed OS reports; static addresses handed out, one
-- node each; and the progress a running step reports (bytes written, rate).
ALTER TABLE node_classes ADD COLUMN deploy_defaults TEXT;          -- JSON, user_data removed
ALTER TABLE node_classes ADD COLUMN deploy_user_data_sealed TEXT;  -- its user_data, sealed
ALTER TABLE jobs ADD COLUMN secret_sealed TEXT;  -- a running job's secret payload (sealed JSON)
CREATE TABLE first_boots (
    job_id      INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    node_id     INTEGER REFERENCES nodes(id) ON DELETE CASCADE,
    reported_at INTEGER NOT NULL,
    source      TEXT,                 -- the address the report came from
    report      TEXT NOT NULL,        -- JSON: instance_id, hostname, kernel, addresses
    PRIMARY KEY (job_id)
);
CREATE TABLE node_addresses (
    address TEXT NOT NULL,            -- canonical IP address, no prefix
    node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    job_id  INTEGER,                  -- the deploy that gave it
    PRIMARY KEY (address)
);
CREATE INDEX node_addresses_node ON node_addresses(node_id);
ALTER TABLE job_steps ADD COLUMN progress TEXT;      -- JSON: bytes_read, bytes_written, total, rate_bps
ALTER TABLE job_steps ADD COLUMN progress_at INTEGER;
