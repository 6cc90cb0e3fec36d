-- 0004 on PostgreSQL: as 0004-boot-lifecycle.sql without its three macs_version triggers,
-- which 0012 drops on SQLite (store_commit bumps the version instead); PostgreSQL never had
-- them.
-- 0004: network boot (the image store, boot profiles), discovery tokens bound to a MAC,
-- the provisioning lifecycle (its jobs keep a durable phase), and a counter the dnsmasq writer
-- watches.

-- Files the boot service serves: kernels, initrds, OS images, firmware. `file` is a plain name
-- inside the image directory; names in URLs are looked up here, never used as paths.
CREATE TABLE images (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL CHECK (kind IN ('kernel', 'initrd', 'os', 'firmware', 'other')),
    file        TEXT NOT NULL UNIQUE,
    size        INTEGER NOT NULL,
    sha256      TEXT NOT NULL,
    description TEXT,
    version     INTEGER NOT NULL DEFAULT 1,
    created_by  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- What the agent ramdisk boots: kernel and initrd images and extra kernel arguments.
CREATE TABLE boot_profiles (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    node_class  TEXT UNIQUE,
    kernel_id   INTEGER NOT NULL REFERENCES images(id),
    initrd_id   INTEGER NOT NULL REFERENCES images(id),
    cmdline     TEXT NOT NULL DEFAULT '',
    description TEXT,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

ALTER TABLE nodes ADD COLUMN boot_profile_id INTEGER REFERENCES boot_profiles(id);
ALTER TABLE nodes ADD COLUMN provision_error TEXT;        -- why the last action failed
ALTER TABLE nodes ADD COLUMN provision_job_id INTEGER;    -- the action's job while one runs
ALTER TABLE nodes ADD COLUMN provision_at INTEGER;        -- last transition
ALTER TABLE nodes ADD COLUMN deployed_image TEXT;         -- image name, while deployed

-- A discovery token is for the one unknown MAC that asked for it.
ALTER TABLE bootstrap_tokens ADD COLUMN mac TEXT;
CREATE INDEX bootstrap_live ON bootstrap_tokens(node_id, mac) WHERE used_at IS NULL AND revoked_at IS NULL;

-- Multi-phase jobs (commission, deploy, release) record where they are.
ALTER TABLE jobs ADD COLUMN phase TEXT;
ALTER TABLE jobs ADD COLUMN phase_at INTEGER;

-- Bumped by every change to what dnsmasq must know (MACs and the names beside them).
INSERT INTO meta(key, value) VALUES ('macs_version', '0');
