-- 0005: firmware and BIOS operations on one node: how a baseline component is flashed, the
-- BIOS attribute registry each BMC reported, and the durable progress of firmware updates.

-- A baseline component is flashed from an image of the image store, by a method.
ALTER TABLE baseline_components ADD COLUMN image_id INTEGER REFERENCES images(id);
ALTER TABLE baseline_components ADD COLUMN method TEXT NOT NULL DEFAULT 'redfish'
    CHECK (method IN ('redfish', 'redfish-push', 'agent'));
ALTER TABLE baseline_components ADD COLUMN recipe TEXT;   -- 'agent': the flasher recipe's name
CREATE INDEX baseline_components_image ON baseline_components(image_id);

-- The BIOS attribute registry a node's BMC serves: types, allowed values, read-only flags.
CREATE TABLE bios_registries (
    node_id     INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
    registry    TEXT NOT NULL,                  -- AttributeRegistry id, e.g. BiosAttributeRegistryX.v1_0_0
    attributes  TEXT NOT NULL,                  -- JSON: [{name, type, read_only, values?, lower?, upper?, max_length?}]
    read_at     INTEGER NOT NULL
);

-- One row per component a firmware_update job flashes. `sent_at` is committed before the
-- update request leaves: a job that finds it after a restart follows `task` (or, without
-- one, checks the version) and never sends a second update for the same target.
CREATE TABLE firmware_updates (
    id           INTEGER PRIMARY KEY,
    job_id       INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    node_id      INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    component    TEXT NOT NULL,
    from_version TEXT,
    to_version   TEXT NOT NULL,
    image        TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'sent'
                 CHECK (state IN ('sent', 'polling', 'rebooting', 'verifying', 'done', 'failed')),
    task         TEXT,                          -- task monitor URI the BMC answered with
    error        TEXT,
    sent_at      INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (job_id, component)
);
CREATE INDEX firmware_updates_node ON firmware_updates(node_id, component);
