-- 0007: BIOS profiles applied by an agent recipe (the vendor's BIOS tool on the node) instead
-- of Redfish, and the durable record of such an apply.

ALTER TABLE bios_profiles ADD COLUMN method TEXT NOT NULL DEFAULT 'redfish'
    CHECK (method IN ('redfish', 'agent'));
ALTER TABLE bios_profiles ADD COLUMN recipe TEXT;   -- 'agent': the recipe's name

-- One row per bios_apply job that queued its recipe as a child steps job, written in the
-- transaction that queues the child: a restarted job follows `child` and never queues a second.
CREATE TABLE bios_applies (
    job_id      INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    node_id     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    child       TEXT NOT NULL,                  -- the steps job's uuid
    attributes  TEXT NOT NULL,                  -- JSON: what the recipe was asked to set
    sent_at     INTEGER NOT NULL
);
