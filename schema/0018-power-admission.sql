-- 0018: admission of power-ons against each rack's budget, and power capping (docs/power.md). A job that is
-- about to power a node on takes an admission first: only while the rack's projected draw
-- stays under its limit, and a few nodes per rack at a time. The admission holds the node's
-- peak (its class's max_power_w) in the rack's projection until a sensor read measures the
-- node after its power-on.
CREATE TABLE power_admissions (
    node_id     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    rack_id     INTEGER NOT NULL REFERENCES racks(id) ON DELETE CASCADE,
    job_id      INTEGER,                -- the job that took it
    peak_w      REAL,                   -- the node's class's max_power_w (NULL: unknown)
    base_w      REAL,                   -- the node's latest reading then, in measured_w
    admitted_at INTEGER NOT NULL,
    started_at  INTEGER,                -- its power-on command came back (NULL: in flight)
    forced      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (node_id)
);
CREATE INDEX power_admissions_rack ON power_admissions(rack_id);

-- Power capping: a rack's policy, and per node the limit it sets at the BMC and the limit
-- the BMC was last read to enforce (drift when they differ).
ALTER TABLE racks ADD COLUMN power_cap TEXT NOT NULL DEFAULT 'off'
    CHECK (power_cap IN ('off', 'budget'));
CREATE TABLE power_caps (
    node_id       INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    target_w      INTEGER,              -- the limit the policy sets (NULL: none, removed)
    planned_at    INTEGER NOT NULL,
    bmc_w         INTEGER,              -- the BMC's limit as last read
    bmc_active    INTEGER,              -- ...and whether it enforces it (NULL: never read)
    read_at       INTEGER,
    error         TEXT,                 -- why the latest read or set failed (NULL: it worked)
    PRIMARY KEY (node_id)
);
