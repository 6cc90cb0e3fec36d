-- Trust boundaries (docs/security.md).
-- The address that fetched a boot script's token: registration may be held to it
-- (boot_source_check), and discovery slots are counted per address.
ALTER TABLE bootstrap_tokens ADD COLUMN source TEXT;
-- Dead tokens are pruned by their expiry (store/boot.c), a few per boot script.
CREATE INDEX bootstrap_expires ON bootstrap_tokens(expires_at);
-- BMC passwords sealed under the server's key file (rpsec1:..., server/util/secret.c). The
-- plaintext column stays only for databases written before this version: rackpilotd seals
-- what it finds there at its first start and clears it, in one transaction.
ALTER TABLE bmcs ADD COLUMN password_sealed TEXT;
-- Refusals from unauthenticated peers are counted into one event per action, object and
-- address (store_refusal): found by action and time, not by scanning the log.
CREATE INDEX events_action_at ON events(action, at);
