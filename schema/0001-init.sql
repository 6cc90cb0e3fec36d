-- 0001: racks, nodes and their BMCs, inventory, BIOS, firmware, events, API tokens.
-- Times are integer milliseconds since the Unix epoch (UTC). JSON values are stored as text.
-- Landed migrations are never edited: add schema/NNNN-*.sql instead.

CREATE TABLE racks (
    id              INTEGER PRIMARY KEY,
    uuid            TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL UNIQUE,
    site            TEXT,
    row_name        TEXT,
    height_u        INTEGER NOT NULL DEFAULT 42 CHECK (height_u BETWEEN 1 AND 64),
    power_budget_kw REAL CHECK (power_budget_kw IS NULL OR power_budget_kw >= 0),
    notes           TEXT,
    version         INTEGER NOT NULL DEFAULT 1,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE TABLE bios_profiles (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    node_class  TEXT UNIQUE,            -- the class this profile applies to, if any
    description TEXT,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE bios_profile_attrs (
    profile_id INTEGER NOT NULL REFERENCES bios_profiles(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,           -- canonical compact JSON (string, number or boolean)
    PRIMARY KEY (profile_id, name)
) WITHOUT ROWID;

CREATE TABLE nodes (
    id                 INTEGER PRIMARY KEY,
    uuid               TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL UNIQUE,
    rack_id            INTEGER REFERENCES racks(id),
    u_position         INTEGER CHECK (u_position IS NULL OR u_position >= 1),
    u_height           INTEGER NOT NULL DEFAULT 1 CHECK (u_height BETWEEN 1 AND 16),
    serial             TEXT,
    vendor             TEXT,
    model              TEXT,
    node_class         TEXT,
    bios_profile_id    INTEGER REFERENCES bios_profiles(id),
    provision_state    TEXT NOT NULL DEFAULT 'enrolled',
    power_state        TEXT NOT NULL DEFAULT 'unknown',
    power_state_at     INTEGER,
    maintenance        INTEGER NOT NULL DEFAULT 0,
    maintenance_reason TEXT,
    expected           TEXT,            -- JSON object from the manifest
    version            INTEGER NOT NULL DEFAULT 1,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE INDEX nodes_rack ON nodes(rack_id, u_position);
CREATE INDEX nodes_class ON nodes(node_class);
CREATE INDEX nodes_state ON nodes(provision_state);
CREATE INDEX nodes_profile ON nodes(bios_profile_id);

CREATE TABLE node_tags (
    node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    tag     TEXT NOT NULL,
    PRIMARY KEY (node_id, tag)
) WITHOUT ROWID;
CREATE INDEX node_tags_tag ON node_tags(tag, node_id);

CREATE TABLE node_macs (
    mac     TEXT PRIMARY KEY,           -- normalised aa:bb:cc:dd:ee:ff, unique across the fleet
    node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX node_macs_node ON node_macs(node_id);

-- The password column never leaves store/ except towards a BMC driver.
CREATE TABLE bmcs (
    node_id    INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
    driver     TEXT NOT NULL CHECK (driver IN ('ipmi', 'redfish', 'fake')),
    address    TEXT,
    port       INTEGER CHECK (port IS NULL OR port BETWEEN 1 AND 65535),
    username   TEXT,
    password   TEXT,
    tls_verify INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE inventory (
    node_id      INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
    data         TEXT NOT NULL,         -- latest full inventory JSON
    source       TEXT NOT NULL,
    collected_at INTEGER NOT NULL,
    gpu_count    INTEGER,
    mem_bytes    INTEGER
);

CREATE TABLE bios_actual (
    node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    name    TEXT NOT NULL,
    value   TEXT NOT NULL,              -- canonical compact JSON
    source  TEXT NOT NULL,
    read_at INTEGER NOT NULL,
    PRIMARY KEY (node_id, name)
) WITHOUT ROWID;

CREATE TABLE firmware_components (
    node_id    INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    component  TEXT NOT NULL,
    version    TEXT NOT NULL,
    updateable INTEGER NOT NULL DEFAULT 0,
    source     TEXT NOT NULL,
    read_at    INTEGER NOT NULL,
    PRIMARY KEY (node_id, component)
) WITHOUT ROWID;

CREATE TABLE firmware_baselines (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    node_class  TEXT NOT NULL UNIQUE,
    description TEXT,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE baseline_components (
    baseline_id INTEGER NOT NULL REFERENCES firmware_baselines(id) ON DELETE CASCADE,
    component   TEXT NOT NULL,
    version     TEXT NOT NULL,
    PRIMARY KEY (baseline_id, component)
) WITHOUT ROWID;

-- Events outlive what they describe: no foreign keys, names copied in.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,          -- e.g. node.created, rack.updated
    object_type TEXT NOT NULL,
    object_id   TEXT,
    object_name TEXT,
    node_id     INTEGER,
    rack_id     INTEGER,
    summary     TEXT NOT NULL,
    detail      TEXT                    -- JSON: changed fields before -> after, secrets masked
);
CREATE INDEX events_node ON events(node_id, id) WHERE node_id IS NOT NULL;
CREATE INDEX events_rack ON events(rack_id, id) WHERE rack_id IS NOT NULL;
CREATE INDEX events_at ON events(at);

CREATE TABLE tokens (
    id         INTEGER PRIMARY KEY,
    uuid       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),
    hash       TEXT NOT NULL UNIQUE,    -- sha256 hex of the secret; the secret is never stored
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
