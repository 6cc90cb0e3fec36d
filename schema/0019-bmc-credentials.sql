-- 0019: BMC credential rotation (docs/bmc.md). A rotation stores the new password as pending,
-- sealed like the current one, before it sends it to the BMC; after a crash the rotation
-- tries the pending one, then the current one, and keeps exactly the one that works.
ALTER TABLE bmcs ADD COLUMN password_pending_sealed TEXT;
ALTER TABLE bmcs ADD COLUMN password_pending_at INTEGER;
ALTER TABLE bmcs ADD COLUMN password_rotated_at INTEGER;    -- the latest rotation that took
-- A class's rotation policy: {rotate_on_enroll, length, symbols} (JSON; NULL: the defaults).
ALTER TABLE node_classes ADD COLUMN bmc_credentials TEXT;
-- A node's serial console log (docs/bmc.md): NULL follows the server's console_log setting;
-- 'always' keeps its SOL session logged at all times, 'off' never.
ALTER TABLE nodes ADD COLUMN console_log TEXT CHECK (console_log IS NULL OR console_log IN
    ('always', 'off'));
-- Rollouts of a third kind: credential rotations in waves. The kind's CHECK is the column's,
-- so the column is replaced (added with the wider CHECK, filled, the old one dropped), which
-- SQLite and PostgreSQL both do in place, keeping every row and reference.
ALTER TABLE rollouts ADD COLUMN kind_new TEXT NOT NULL DEFAULT 'firmware'
    CHECK (kind_new IN ('firmware', 'bios', 'bmc_credentials'));
UPDATE rollouts SET kind_new = kind;
ALTER TABLE rollouts DROP COLUMN kind;
ALTER TABLE rollouts RENAME COLUMN kind_new TO kind;
