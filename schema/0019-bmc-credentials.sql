-- 0019: BMC credential rotation (docs/bmc.md). A rotation stores the new password as pending,
-- sealed like the current one, before it sends it to the BMC; after a crash the rotation
-- tries the pending one, then the current one, and keeps exactly the one that works.
ALTER TABLE bmcs ADD COLUMN password_pending_sealed TEXT;
ALTER TABLE bmcs ADD COLUMN password_pending_at INTEGER;
ALTER TABLE bmcs ADD COLUMN password_rotated_at INTEGER;    -- the latest rotation that took
-- A class's rotation policy: {rotate_on_enroll, length, symbols} (JSON; NULL: the defaults).
ALTER TABLE node_classes ADD COLUMN bmc_credentials TEXT;
