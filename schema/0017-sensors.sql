-- 0017: sensors and rack power (docs/power.md). The sensor sweep reads each node's BMC
-- sensors; the latest values live here, a bounded history beside them, and each rack's
-- total draw against its budget.

-- The share of a rack's budget its measured and projected draw may reach (80: 20 % headroom).
ALTER TABLE racks ADD COLUMN power_limit_pct INTEGER NOT NULL DEFAULT 80
    CHECK (power_limit_pct BETWEEN 1 AND 100);
-- A class's nameplate (peak) and idle draw, in watts: the rack's nameplate sum and the
-- admission of power-ons.
ALTER TABLE node_classes ADD COLUMN max_power_w INTEGER
    CHECK (max_power_w IS NULL OR max_power_w >= 0);
ALTER TABLE node_classes ADD COLUMN idle_power_w INTEGER
    CHECK (idle_power_w IS NULL OR idle_power_w >= 0);

-- Each node's latest sensor read: written by every sweep that reads it.
CREATE TABLE sensor_reads (
    node_id  INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    read_at  INTEGER,                 -- the latest read that answered (NULL: none yet)
    power_w  REAL,                    -- its system draw (NULL: the BMC gives none)
    tried_at INTEGER NOT NULL,        -- the latest try
    error    TEXT,                    -- why that try failed (NULL: it answered)
    PRIMARY KEY (node_id)
);

-- The latest value of each sensor of a node (as of sensor_reads.read_at). A row is written
-- only when something in it changes, so a steady fleet costs a sweep one row per node.
CREATE TABLE sensors (
    node_id        INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    type           TEXT NOT NULL,     -- power | temperature | fan | psu
    kind           TEXT NOT NULL,     -- system inlet exhaust cpu gpu memory drive board psu fan other
    unit           TEXT NOT NULL,
    value          REAL,
    upper_warning  REAL,
    upper_critical REAL,
    lower_warning  REAL,
    lower_critical REAL,
    bmc_health     TEXT,              -- the BMC's own judgement (NULL: it gives none)
    state          TEXT NOT NULL CHECK (state IN ('ok', 'warning', 'critical')),
    source         TEXT NOT NULL,
    changed_at     INTEGER NOT NULL,  -- when value or state last changed
    logged_at      INTEGER,           -- the latest history sample of it
    logged_value   REAL,
    PRIMARY KEY (node_id, name)
) WITHOUT ROWID;

-- Samples of each sensor, at sweep resolution: one when the value moved past a dead band
-- since the latest sample, or an hour passed. Kept sensor_history_hours, and within
-- sensor_history_max_rows.
CREATE TABLE sensor_history (
    node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    at      INTEGER NOT NULL,
    name    TEXT NOT NULL,
    value   REAL,
    PRIMARY KEY (node_id, at, name)
) WITHOUT ROWID;

-- Each rack's measured draw as of the latest sweep, and whether it is over its limit (the
-- events rack.power_over_limit and rack.power_ok fire once per crossing).
CREATE TABLE rack_power (
    rack_id    INTEGER NOT NULL REFERENCES racks(id) ON DELETE CASCADE,
    measured_w REAL NOT NULL,
    read_at    INTEGER NOT NULL,
    over       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (rack_id)
);

-- Rack totals in steps of rack_history_step_s: the peak within the step and the latest.
-- Kept rack_history_days.
CREATE TABLE rack_power_history (
    rack_id INTEGER NOT NULL REFERENCES racks(id) ON DELETE CASCADE,
    at      INTEGER NOT NULL,         -- the step's start
    peak_w  REAL NOT NULL,
    last_w  REAL NOT NULL,
    PRIMARY KEY (rack_id, at)
) WITHOUT ROWID;
