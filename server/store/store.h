/*
 * store.h — the only door to the database. All SQL lives behind it, one function per
 * operation, so a PostgreSQL backend can replace the SQLite one without touching callers.
 *
 * Records cross this boundary as jansson objects in their wire shape (the JSON the API
 * returns), built by the store from its rows; inputs are objects the API has already
 * validated for type and range. The store checks everything that needs the database
 * (uniqueness, references, rack-unit overlaps, If-Match versions) inside the same
 * transaction that writes, so a failed call changes nothing.
 *
 * Threads: one struct rp_store is shared by all threads; each call takes a connection from
 * the store's pool (rp_store_set_connections) for its duration and gives it back at its end.
 * Calls are thread-safe.
 *
 * Errors: functions return RP_ERR_OK or an rp_err. Where a `detail` out-param exists it is
 * set only on failure, to a new object that explains it (caller owns it), or left NULL.
 * Every mutation records an event with `actor` in the same transaction.
 */
#ifndef RP_STORE_H
#define RP_STORE_H

#include <stdint.h>

#include <jansson.h>

#include "rackpilot/error.h"
#include "rackpilot/jobtypes.h"
#include "util/util.h"

struct rp_store;

/* Claim the leadership of the servers that share the database, until rp_store_free (the
 * leader alone runs the periodic work: the rollout engine, the power sweep): RP_ERR_OK, or
 * RP_ERR_CONFLICT with why when another rackpilotd leads (RP_ERR_INTERNAL when the claim
 * cannot be made now, say the database is unreachable). Called again, it checks the claim
 * and makes it again when the database lost it (a restart, which may have let another server
 * take it): the caller calls it every few seconds. A SQLite file needs no claim: the lock on
 * its data directory makes its one server the leader. */
enum rp_err rp_store_hold(struct rp_store *st, char *why, size_t whylen);

/* Copy every table of src into dst (rackpilotd --migrate-to), both at the same schema
 * version, dst empty but for what its migrations wrote: in one transaction of dst, each
 * table verified by its row count and a checksum of its rows on both sides before it
 * commits. *report: {tables: [{table, rows, checksum}], rows}. RP_ERR_OK; RP_ERR_CONFLICT
 * (why) when dst holds data or the versions differ; another error (why) when a row cannot be
 * copied or a table differs after the copy: then dst is unchanged. */
enum rp_err rp_store_copy(struct rp_store *src, struct rp_store *dst, json_t **report, char *why,
                          size_t whylen);

/* rackpilotd backup: the SQLite database at db_path (a server may be serving it: the copy is
 * one consistent snapshot) into the new file dest, a SQLite database of its own that carries
 * its manifest in table rp_backup: {format "rackpilot-backup-1", schema_version, created_at,
 * tables [{table, rows, checksum}], rows} and extra's members (rackpilotd's version, the key
 * file with --with-key). Published whole (link of a synced dest.partial) or not at all.
 * *manifest: the manifest without the key. RP_ERR_NOT_FOUND (no database), RP_ERR_CONFLICT
 * (dest exists; a schema this binary does not know), or another error, each with why. */
enum rp_err rp_store_backup(const char *db_path, const char *dest, json_t *extra, json_t **manifest,
                            char *why, size_t whylen);

/* rackpilotd restore: the backup file (a regular file) into the new database db_path, after
 * checking it whole in a copy (the file is left as it is): SQLite's integrity check, the
 * manifest present, its schema version one this binary knows and the database's own, exactly
 * the schema rackpilot's migrations make at that version (no table, column, index, trigger or
 * view of its own), and every table's rows and checksum as the manifest lists them. Then
 * ready(manifest, arg, why) runs (NULL: none; the caller's part, such as writing the key
 * file, done before the database appears); when it returns 0 the manifest's table and the
 * source's server heartbeats are dropped (secure_delete, VACUUM) and db_path appears. *manifest:
 * the manifest (it may carry the key file: the caller wipes it). RP_ERR_NOT_FOUND (no file),
 * RP_ERR_CONFLICT (db_path or its -wal, -shm or -journal exists; damaged, not a backup,
 * newer; ready refused), or another error, each with why; db_path not written then. */
enum rp_err rp_store_restore(const char *file, const char *db_path,
                             int (*ready)(json_t *manifest, void *arg, char *why, size_t whylen),
                             void *arg, json_t **manifest, char *why, size_t whylen);

/* The database as logs may name it: the SQLite file, or postgresql://user@host/dbname (never
 * a password). Valid until rp_store_free. */
const char *rp_store_name(struct rp_store *st);

/* 1 when target names a PostgreSQL database (a postgresql:// or postgres:// URI, or libpq's
 * key=value form), 0 when it is a file path (SQLite). */
int rp_store_is_url(const char *target);

/* Open or create the database at path, a SQLite file (":memory:" for a private in-memory
 * database is not supported: every thread needs the same file) or a PostgreSQL connection
 * string (rp_store_is_url; the database must exist, its tables are created here), and apply
 * pending schema migrations (on PostgreSQL under an advisory lock, so servers starting
 * together apply each once).
 * On failure writes a message into why and returns an error: RP_ERR_CONFLICT when the
 * database was written by a newer rackpilotd, RP_ERR_INTERNAL otherwise. */
enum rp_err rp_store_open(const char *path, struct rp_store **out, char *why, size_t whylen);

/* The server's secrets (util secret.c), borrowed for the store's lifetime: BMC passwords are
 * sealed with them, boot-script tokens derived from them. Set once, before other threads use
 * the store. Without it, writing a password or a boot token fails with RP_ERR_INTERNAL. */
void rp_store_set_secrets(struct rp_store *st, struct rp_secrets *sec);

/* Bring the database in line with its secret key at start, before anything else writes:
 * finish or abandon an interrupted key rotation (whichever key every sealed value carries),
 * seal BMC passwords an older version stored in clear (one transaction; the old bytes are
 * zeroed and the WAL truncated), then check that every sealed value opens. forget: clear the
 * ones that do not (rp_store_secrets_forget) instead of failing. RP_ERR_OK, or an error with
 * why: RP_ERR_CONFLICT when values do not open (why counts them and names the keys). */
enum rp_err rp_store_secrets_prepare(struct rp_store *st, int forget, char *why, size_t whylen);

/* Clear every BMC password the key cannot open, one node.bmc_password_cleared event each, in
 * one transaction. */
enum rp_err rp_store_secrets_forget(struct rp_store *st, char *why, size_t whylen);

/* Seal every BMC password again under the key rp_secrets_seal uses now (the next key during
 * a rotation: rp_secrets_rotate_begin, this, rp_secrets_rotate_finish), in one transaction;
 * *count: how many. RP_ERR_CONFLICT (nothing changed) when one does not open. */
enum rp_err rp_store_secrets_reseal(struct rp_store *st, int *count, char *why, size_t whylen);

/* Keep at most max connections to the database open (db_connections; 0, the default: no
 * limit). A thread takes one for each store call and gives it back at the call's end; one that
 * finds all max busy waits for one, up to 10 s, then the call fails (RP_ERR_INTERNAL, logged).
 * Set before other threads use the store. */
void rp_store_set_connections(struct rp_store *st, int max);

/* How many connections are open and how many of them a call is using now. */
void rp_store_connections(struct rp_store *st, int *open, int *busy);

/* Close every connection. Accepts NULL. Only call once no other thread uses the store. */
void rp_store_free(struct rp_store *st);

/* Schema version this binary knows (the highest migration compiled in). */
int rp_store_schema_latest(void);

/* Schema version of the open database. */
int rp_store_schema_version(struct rp_store *st);

/* The write generation: incremented after every committed write. A value read before a
 * read operation, equal to the current one later, proves nothing changed in between, so
 * callers may cache results keyed by it. On SQLite this process is the only writer
 * (rackpilotd holds a lock on its data directory); on a database several servers share it
 * moves with their commits too once rp_store_watch runs, as soon as each is heard of
 * (milliseconds after it). */
uint64_t rp_store_generation(struct rp_store *st);

/* Keep the generation moving with other servers' commits (a thread of its own listening on
 * a connection of its own, made again when lost); nothing to do on SQLite. 0, or -1 when the
 * thread cannot start. Stopped by rp_store_free. */
int rp_store_watch(struct rp_store *st);

/* ---- Pagination ---------------------------------------------------------------------- */

/* A keyset page request. `after_id` (internal row id) and `after_key` (sort key) come from
 * the previous page; zero/NULL for the first page. */
struct rp_page_req {
	int limit;        /* 1..1000 */
	int sort_by_name; /* 0: creation order, 1: name order */
	int64_t after_id;
	const char *after_key;
	json_t *filter; /* borrowed object of validated filter values, may be NULL */
	int want_text;  /* the items as JSON text (rp_page.text) instead of a tree, where the
	                   list can (a list that reshapes its items answers with items) */
};

/* A page: items (new array, caller owns) or, when asked for and given, text (the same array
 * as compact JSON, text_len bytes, NUL-terminated, caller frees; items is then NULL), `more`
 * when another page exists, and the keyset of the last item for the next cursor. */
struct rp_page {
	json_t *items;
	char *text;
	size_t text_len;
	int more;
	int64_t last_id;
	char last_key[128];
};

/* ---- Tokens ---------------------------------------------------------------------------- */

/* What an authenticated token is. Names are copied in. */
struct rp_token_info {
	char id[40];
	char name[64];
	char role[16];
	int64_t expires_at; /* ms since epoch; 0: never */
	int64_t node_id;    /* agent tokens: the node's row id; 0 otherwise */
};

/* Create an admin token with the given secret hash if no token exists at all (first start).
 * Sets *created to 1 when it did. */
enum rp_err rp_store_token_bootstrap(struct rp_store *st, const char *hash, int *created);

/* Create a token; out gets its wire object (without secret). role: admin|operator|viewer.
 * expires_at 0 means never. */
enum rp_err rp_store_token_create(struct rp_store *st, const char *name, const char *role,
                                  const char *hash, int64_t expires_at, const char *actor,
                                  json_t **out);

/* Look up a live (not revoked, not expired) token by secret hash. RP_ERR_UNAUTHORIZED when
 * none matches. */
enum rp_err rp_store_token_auth(struct rp_store *st, const char *hash, struct rp_token_info *out);

/* All live tokens, newest first, without secrets. */
enum rp_err rp_store_token_list(struct rp_store *st, json_t **out);

/* Revoke by id. RP_ERR_NOT_FOUND when unknown or already revoked; RP_ERR_CONFLICT when it is
 * the last live admin token (revoking it would lock everyone out). */
enum rp_err rp_store_token_revoke(struct rp_store *st, const char *id, const char *actor,
                                  json_t **detail);

/* ---- Racks ----------------------------------------------------------------------------- */

/* Rack keys are a UUID or a name. Rack objects: id, name, site, row, height_u,
 * power_budget_kw, notes, node_count, version, created_at, updated_at. */
enum rp_err rp_store_rack_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                                 json_t **detail);
enum rp_err rp_store_rack_get(struct rp_store *st, const char *key, json_t **out);
enum rp_err rp_store_rack_list(struct rp_store *st, const struct rp_page_req *rq,
                               struct rp_page *out);

/* Merge `patch` into the rack. if_match: required version, or 0 for none
 * (RP_ERR_PRECONDITION_FAILED on mismatch). Shrinking below a placed node is a conflict. */
enum rp_err rp_store_rack_update(struct rp_store *st, const char *key, json_t *patch,
                                 int64_t if_match, const char *actor, json_t **out,
                                 json_t **detail);

/* Delete a rack that holds no nodes (RP_ERR_IN_USE otherwise). */
enum rp_err rp_store_rack_delete(struct rp_store *st, const char *key, int64_t if_match,
                                 const char *actor, json_t **detail);

/* The rack's U slots from top to bottom with the node occupying each, plus nodes in the
 * rack without a position. */
enum rp_err rp_store_rack_elevation(struct rp_store *st, const char *key, json_t **out);

/* ---- Nodes ----------------------------------------------------------------------------- */

/* Node objects: id, name, rack, u_position, u_height, serial, vendor, model, node_class,
 * tags, macs, bmc {driver, address, port, username, password_set, tls_verify} or null,
 * bios_profile, provision_state, power_state, power_state_at, maintenance,
 * maintenance_reason, expected, version, created_at, updated_at. The BMC password is
 * write-only: accepted in `in`/`patch` as bmc.password, never returned. */
enum rp_err rp_store_node_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                                 json_t **detail);
enum rp_err rp_store_node_get(struct rp_store *st, const char *key, json_t **out);

/* Filters (all optional strings): rack, state, tag, class, power, maintenance ("true"/
 * "false"), q (substring of name or serial). */
enum rp_err rp_store_node_list(struct rp_store *st, const struct rp_page_req *rq,
                               struct rp_page *out);

/* JSON merge patch (RFC 7396): objects merge, arrays and scalars replace, null removes. */
enum rp_err rp_store_node_update(struct rp_store *st, const char *key, json_t *patch,
                                 int64_t if_match, const char *actor, json_t **out,
                                 json_t **detail);
enum rp_err rp_store_node_delete(struct rp_store *st, const char *key, int64_t if_match,
                                 const char *actor, json_t **detail);

/* Latest inventory: {source, collected_at, data} with nulls when none was reported. */
enum rp_err rp_store_node_inventory(struct rp_store *st, const char *key, json_t **out);

/* Store a node's full inventory as reported by `source` (agent, redfish, ...). */
enum rp_err rp_store_node_inventory_set(struct rp_store *st, const char *key, const char *source,
                                        json_t *data, const char *actor);

/* ---- BIOS ------------------------------------------------------------------------------ */

/* Profile objects: id, name, node_class, description, attributes {name: value}, node_count,
 * version, created_at, updated_at. */
enum rp_err rp_store_bios_profile_create(struct rp_store *st, json_t *in, const char *actor,
                                         json_t **out, json_t **detail);
enum rp_err rp_store_bios_profile_get(struct rp_store *st, const char *key, json_t **out);
enum rp_err rp_store_bios_profile_list(struct rp_store *st, const struct rp_page_req *rq,
                                       struct rp_page *out);
enum rp_err rp_store_bios_profile_update(struct rp_store *st, const char *key, json_t *patch,
                                         int64_t if_match, const char *actor, json_t **out,
                                         json_t **detail);
enum rp_err rp_store_bios_profile_delete(struct rp_store *st, const char *key, int64_t if_match,
                                         const char *actor, json_t **detail);

/* A node's BIOS: {node (name), actual {name: {value, source, read_at}}, desired {profile, via,
 * attributes} , diff [{name, actual, desired}], in_sync}. */
enum rp_err rp_store_node_bios(struct rp_store *st, const char *key, json_t **out);

/* Record actual attribute values read from `source`; replaces values of the same names. */
enum rp_err rp_store_node_bios_set(struct rp_store *st, const char *key, const char *source,
                                   json_t *attributes, const char *actor);

/* Fleet BIOS drift. Filters: rack, class, node. {nodes_checked, nodes_drifted, items
 * [{node, rack, node_class, profile, attributes [{name, actual, desired}]}]}. */
enum rp_err rp_store_bios_drift(struct rp_store *st, json_t *filter, json_t **out);

/* ---- Firmware -------------------------------------------------------------------------- */

/* Baseline objects: id, name, node_class, description, components {component: version},
 * node_count, version, created_at, updated_at. */
enum rp_err rp_store_baseline_create(struct rp_store *st, json_t *in, const char *actor,
                                     json_t **out, json_t **detail);
enum rp_err rp_store_baseline_get(struct rp_store *st, const char *key, json_t **out);
enum rp_err rp_store_baseline_list(struct rp_store *st, const struct rp_page_req *rq,
                                   struct rp_page *out);
enum rp_err rp_store_baseline_update(struct rp_store *st, const char *key, json_t *patch,
                                     int64_t if_match, const char *actor, json_t **out,
                                     json_t **detail);
enum rp_err rp_store_baseline_delete(struct rp_store *st, const char *key, int64_t if_match,
                                     const char *actor, json_t **detail);

/* A node's firmware: {node (name), baseline, components [{component, version, updateable, source,
 * read_at, desired, status}]} where status is ok|drift|missing|unmanaged. */
enum rp_err rp_store_node_firmware(struct rp_store *st, const char *key, json_t **out);

/* Record component versions read from `source` (array of {component, version, updateable}). */
enum rp_err rp_store_node_firmware_set(struct rp_store *st, const char *key, const char *source,
                                       json_t *components, const char *actor);

/* ---- Firmware and BIOS operations (firmware.c, bios.c; docs/firmware.md) ---- */

/* What a firmware update of node `key` aims at: {node, baseline, targets [{component, version,
 * image, file, sha256, method, recipe, current, source}]} from its class's baseline (current:
 * the stored version or null). only: NULL/empty for every component, else an array of
 * component names (RP_ERR_INVALID_FIELD with *detail when one is not in the baseline).
 * RP_ERR_CONFLICT with *detail when the node's class has no baseline; RP_ERR_NOT_FOUND. */
enum rp_err rp_store_firmware_targets(struct rp_store *st, const char *key, json_t *only,
                                      json_t **out, json_t **detail);

/* A firmware_update job's per-component progress: {component: {component, from, to, image,
 * state, task, error}} (new object; empty when it sent nothing yet). */
enum rp_err rp_store_firmware_updates(struct rp_store *st, int64_t job_id, json_t **out);

/* Durably record "about to send the update of component" for running job job_id (also sets
 * the job's sent mark), before the request leaves. RP_ERR_DUPLICATE when that job already
 * recorded it: it must never be sent twice. */
enum rp_err rp_store_firmware_update_sent(struct rp_store *st, int64_t job_id,
                                          const char *component, const char *from, const char *to,
                                          const char *image);

/* Move a recorded update to state (polling, rebooting, verifying, done, failed), keeping
 * task/error when NULL. state NULL forgets the row (the request provably never reached the
 * BMC, so it may be sent again). */
enum rp_err rp_store_firmware_update_set(struct rp_store *st, int64_t job_id, const char *component,
                                         const char *state, const char *task, const char *error);

/* Method agent: in one transaction, queue a (non-mutating) steps job for running job
 * job_id's node whose plan is recipe's steps filled with args (an object of strings; the
 * recipe's defaults for what args lacks), and record component's update as `polling` with
 * that job's id as its task (also the job's sent mark). *child gets the steps job's id.
 * RP_ERR_DUPLICATE when job_id already recorded component (never a second flash);
 * RP_ERR_NOT_FOUND (no such recipe: *detail), RP_ERR_MISSING_FIELD (the recipe requires an
 * argument args lacks: *detail), RP_ERR_CONFLICT / RP_ERR_INVALID_STATE (the node cannot run
 * a plan over SSH now: *detail says why). */
enum rp_err rp_store_firmware_agent_flash(struct rp_store *st, int64_t job_id,
                                          const char *component, const char *from, const char *to,
                                          const char *image, const char *recipe, json_t *args,
                                          char *child, size_t len, json_t **detail);

/* Store the BIOS attribute registry node `key`'s BMC serves (id + [{name, type, read_only,
 * values?, lower?, upper?, max_length?}]); profiles for the node are validated against it. */
enum rp_err rp_store_bios_registry_set(struct rp_store *st, const char *key, const char *registry,
                                       json_t *attributes);

/* Method agent: in one transaction, queue a (non-mutating) steps job for running job job_id's
 * node running recipe with arguments profile, attributes (JSON of the values to set) and
 * settings (Name=Value lines), and record it in bios_applies (with the attributes) as the
 * job's sent mark. *child gets the steps job's id. RP_ERR_DUPLICATE when job_id already
 * queued one (never a second); RP_ERR_NOT_FOUND / RP_ERR_MISSING_FIELD / RP_ERR_CONFLICT /
 * RP_ERR_INVALID_STATE with *detail as for rp_store_firmware_agent_flash. */
enum rp_err rp_store_bios_agent_apply(struct rp_store *st, int64_t job_id, const char *profile,
                                      const char *recipe, json_t *attributes, char *child,
                                      size_t len, json_t **detail);

/* The recipe child job job_id queued: {child, attributes, sent_at}; RP_ERR_NOT_FOUND when none
 * yet. */
enum rp_err rp_store_bios_apply_get(struct rp_store *st, int64_t job_id, json_t **out);

/* The BIOS values node `key` should have: {node, profile, attributes {}, method, recipe} from
 * the named
 * profile, else the node's own, else its class's. RP_ERR_INVALID_FIELD (unknown profile) or
 * RP_ERR_CONFLICT (no profile applies) with *detail; RP_ERR_NOT_FOUND for the node. */
enum rp_err rp_store_bios_desired(struct rp_store *st, const char *key, const char *profile,
                                  json_t **out, json_t **detail);

/* Fleet firmware drift. Filters: rack, class, node. {nodes_checked, nodes_drifted, items
 * [{node, rack, node_class, baseline, components [{component, actual, desired}]}]}. */
enum rp_err rp_store_firmware_drift(struct rp_store *st, json_t *filter, json_t **out);

/* ---- Events ---------------------------------------------------------------------------- */

/* Events newest first. Filters: node or rack (keys; not both), since, until (integer ms),
 * action (prefix such as "node."). Objects: id, at, actor, action, object {type, id, name},
 * summary, detail. */
enum rp_err rp_store_event_list(struct rp_store *st, const struct rp_page_req *rq,
                                struct rp_page *out);

/* Events after event id after_id, oldest first, at most limit, filtered like the list (node,
 * rack, action prefix; not since/until). *out: new array. RP_ERR_NOT_FOUND for an unknown
 * node or rack. */
enum rp_err rp_store_event_after(struct rp_store *st, int64_t after_id, json_t *filter, int limit,
                                 json_t **out);

/* The newest event's id (0 when there is none). */
enum rp_err rp_store_event_head(struct rp_store *st, int64_t *out);

/* ---- Demo ------------------------------------------------------------------------------ */

/* *demo: the database was seeded by `rackpilotd --demo`; *empty: it holds no rack or node. */
enum rp_err rp_store_demo_get(struct rp_store *st, int *demo, int *empty);

/* Mark the database as demo data (for good), with an event. */
enum rp_err rp_store_demo_mark(struct rp_store *st);

/* ---- Node classes and the cabling plan (classes.c; docs/acceptance.md) ---------------- */

/* Class objects: name, description, bom {}, node_count, version, created_at, updated_at.
 * Put creates or replaces in->name's class from a validated {name, description, bom}; *out
 * the class after it, *created whether it is new. */
enum rp_err rp_store_class_put(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                               int *created);
enum rp_err rp_store_class_get(struct rp_store *st, const char *name, json_t **out);
/* A class's deploy_defaults (docs/deploy.md) with its user_data unsealed: a new object, or
 * *out NULL when the class has none. RP_ERR_NOT_FOUND for no such class. The caller wipes
 * user_data before releasing it. */
enum rp_err rp_store_class_deploy_defaults(struct rp_store *st, const char *name, json_t **out);
/* {items: [...]} by name. */
enum rp_err rp_store_class_list(struct rp_store *st, json_t **out);
enum rp_err rp_store_class_delete(struct rp_store *st, const char *name, const char *actor);

/* A rack's cabling plan: {rack, entries [{node, interface, port_guid, switch, port}]}. */
enum rp_err rp_store_cabling_get(struct rp_store *st, const char *rack, json_t **out);

/* Replace the plan of the rack's nodes with entries (validated shapes), all or nothing:
 * RP_ERR_INVALID_FIELD (a node that does not exist or is not in the rack) or
 * RP_ERR_DUPLICATE (a port twice), *detail naming entries[i].field. */
enum rp_err rp_store_cabling_put(struct rp_store *st, const char *rack, json_t *entries,
                                 const char *actor, json_t **detail);

/* ---- Rack acceptance runs (accept.c; docs/acceptance.md) ------------------------------ */

/* Start a run of rack's acceptance in one transaction: in {checks (validated names, in order),
 * burn_in?}; plans {node name: commission plan} for the pxe check. One result per node and
 * check (a re-run copies the previous run's passed results and runs the rest), one
 * non-mutating `acceptance` job per node with something to run, an event. *out: the report
 * (rp_store_accept_get). RP_ERR_CONFLICT while a run of the rack is running; RP_ERR_BAD_REQUEST
 * for a rack without nodes; RP_ERR_NOT_FOUND for the rack. */
enum rp_err rp_store_accept_start(struct rp_store *st, const char *rack, json_t *in, json_t *plans,
                                  const char *actor, json_t **out, json_t **detail);

/* The rack's run (attempt 0: the latest): {id, rack, attempt, state, checks, burn_in,
 * created_by, created_at, finished_at, results [{node, node_id, u_position, check, state,
 * message, fix, evidence, findings, job, attempt, started_at, finished_at}], signoffs
 * [{signed_by, signed_at, report_sha256, note}]}. RP_ERR_NOT_FOUND: no rack or no run. */
enum rp_err rp_store_accept_get(struct rp_store *st, const char *rack, int attempt, json_t **out);

/* What a node's acceptance job needs: {results [{check, state, job, started_at}], running,
 * created_at (ms), cabling [entries]}. */
enum rp_err rp_store_accept_node(struct rp_store *st, const char *run, int64_t node_id,
                                 json_t **out);

/* Queue the job a check waits on and mark the check running with it, in one transaction:
 * action "commission" goes through the lifecycle (rp_store_provision), NULL queues job
 * as is (the node must be able to take a BMC job). prev NULL: the check must be pending;
 * else it must be running on child prev (the next job of a chain). *child gets the job's id.
 * RP_ERR_DUPLICATE when the check is not in that state (never a second child); the
 * provision or BMC errors with *detail. */
enum rp_err rp_store_accept_child(struct rp_store *st, const char *run, int64_t node_id,
                                  const char *check, const char *prev, const char *action,
                                  json_t *job, char *child, size_t len, json_t **detail);

/* Settle a check: result {state passed|failed|skipped, message, fix?, evidence?, findings?};
 * a check settled before is left as it was. The run settles with its last check. */
enum rp_err rp_store_accept_record(struct rp_store *st, const char *run, int64_t node_id,
                                   const char *check, json_t *result);

/* ---- Across nodes: the fabric and NCCL checks (pairs.c; docs/acceptance.md) ------------ */

/* The cross-node state of run for the acceptance jobs that drive it: {running, options (the
 * run's {fabric, nccl} or {}), nodes [{id, uuid, name, index (rack order: U from the top, then
 * name; no U last), class, fabric, nccl (each: that check's state, null when the run has
 * none), pxe (state or null), held (the pxe check's commission job runs in phase "hold": the
 * agent is up for the rack's tests), pxe_ended (that job ended), alive (the node's acceptance
 * job for the run is queued or running)}], pairs [{kind, round, server, client
 * (node ids; client null for nccl), state, message, tests, rev, started_at, finished_at}]}
 * (pairs by kind, round, server's index). RP_ERR_NOT_FOUND: no such run. */
enum rp_err rp_store_accept_cross(struct rp_store *st, const char *run, json_t **out);

/* Lay out the run's pairs of kind ("fabric", "nccl") once: pairs [{round, server, client
 * (node ids, client null for nccl)}], inserted pending in one transaction unless the run has
 * rows of that kind already (another node's job laid them out first): RP_ERR_OK either way;
 * RP_ERR_INVALID_STATE when the run no longer runs. */
enum rp_err rp_store_accept_pairs_init(struct rp_store *st, const char *run, const char *kind,
                                       json_t *pairs);

/* Move one pair (kind, round, server) in one transaction, only while its rev is still rev
 * (else RP_ERR_DUPLICATE: someone moved it; read it again): upd {state, message?, tests}
 * (tests stored as given), started_at set when it first leaves pending, finished_at when it
 * settles, rev + 1. jobs (may be NULL): [{node (id), job}] queued in the same transaction
 * (store_job_add; job.uuid, when given, is the job's id, so that tests can name it before it
 * exists). RP_ERR_INVALID_STATE when the run no longer runs (nothing changes). */
enum rp_err rp_store_accept_pair_update(struct rp_store *st, const char *run, const char *kind,
                                        int round, int64_t server, int64_t rev, json_t *upd,
                                        json_t *jobs);

/* Whether node_id's commission for run stays up (*hold 1): the run is running and the node's
 * fabric or nccl check is pending or running. */
enum rp_err rp_store_accept_holds(struct rp_store *st, const char *run, int64_t node_id, int *hold);

/* Sign off the rack's latest run, which must have passed (RP_ERR_INVALID_STATE), recording
 * who, when and the report's sha256, with a rack.signed_off event. *out: the run after it. */
enum rp_err rp_store_accept_signoff(struct rp_store *st, const char *rack, const char *sha256,
                                    const char *note, const char *actor, json_t **out,
                                    json_t **detail);

/* ---- Import ---------------------------------------------------------------------------- */

/* All-or-nothing import of a validated manifest {racks: [...], nodes: [...]} whose nodes
 * reference racks by name (declared in the manifest or existing). create_racks: racks a node
 * names that exist nowhere are created from the node's "_rack" member or defaults (CSV);
 * otherwise they are row errors. On RP_ERR_IMPORT_INVALID, *detail is
 * {"errors": [{kind, index, name, code, field, reason}]} with index into racks or nodes.
 * With dry_run nothing is written either way. On success *out is {racks_created,
 * nodes_created, dry_run}. */
enum rp_err rp_store_import(struct rp_store *st, json_t *manifest, int create_racks, int dry_run,
                            const char *actor, json_t **out, json_t **detail);

/* ---- Jobs ------------------------------------------------------------------------------- */

/* Job objects: id, type, node, batch, params, state, attempts, max_attempts,
 * cancel_requested, result, error {code, message} or null, created_by, created_at,
 * started_at, finished_at, not_before, updated_at. */

/* Queue a job {type, params, mutating, max_attempts} for the node `key`, after checking the
 * node can take it: RP_ERR_INVALID_STATE in maintenance, RP_ERR_CONFLICT without a usable
 * BMC (driver, address, credentials). */
enum rp_err rp_store_job_create(struct rp_store *st, const char *key, json_t *job,
                                const char *actor, json_t **out, json_t **detail);

/* Queue the job for every node the selector picks ({rack}, {tag}, {class} or {nodes: [...]},
 * exactly one), as one batch. Nodes that cannot take it are skipped and listed. Out:
 * {id, kind, params, jobs, skipped [{node, reason}], counts}. RP_ERR_BAD_REQUEST when the
 * selector is malformed or picks nothing (detail says which), RP_ERR_CONFLICT when every
 * node was skipped. */
enum rp_err rp_store_batch_create(struct rp_store *st, const char *kind, json_t *selector,
                                  json_t *job, const char *actor, json_t **out, json_t **detail);

enum rp_err rp_store_job_get(struct rp_store *st, const char *id, json_t **out);

/* Newest first. Filters: node, state, type, batch. */
enum rp_err rp_store_job_list(struct rp_store *st, const struct rp_page_req *rq,
                              struct rp_page *out);

/* {id, kind, params, created_by, created_at, skipped [{node, reason}], total, counts {state:
 * n}, done}. */
enum rp_err rp_store_batch_get(struct rp_store *st, const char *id, json_t **out);

/* Cancel: a queued job ends at once (*running 0); a running one is flagged and stops at its
 * next safe point (*running 1). RP_ERR_CONFLICT when it has already ended. */
enum rp_err rp_store_job_cancel(struct rp_store *st, const char *id, const char *actor,
                                json_t **out, int *running, json_t **detail);

/* Scheduler side. */

/* Running jobs that no live server holds, back to queued, flagged to verify instead of
 * acting again (a job.interrupted event each, naming whose they were): those whose lease ran
 * out and, when self is not NULL (a server starting under the name self), those leased to
 * self's earlier run. Sets *n to how many. With self NULL (the periodic look) it costs one
 * read when there are none. */
enum rp_err rp_store_jobs_recover(struct rp_store *st, const char *self, int *n);

/* Extend to now + lease_ms the leases of the jobs in held (an array of job ids: those owner
 * is running) that are still running under owner's lease, in one statement. *renewed: a new
 * array of their ids; a held job missing from it was taken over by another server. owner's
 * jobs it no longer holds (an outcome it could not record) are left to run out and be
 * recovered. */
enum rp_err rp_store_jobs_renew(struct rp_store *st, const char *owner, json_t *held,
                                int64_t lease_ms, json_t **renewed);

/* ---- Servers sharing the database --------------------------------------------------- */

/* This server as its row in the servers table names it. */
struct rp_server_self {
	const char *name;     /* server_name */
	const char *instance; /* random, new at each process start */
	const char *host;
	long pid;
	int64_t lease_ms; /* how long a heartbeat keeps the row live */
};

/* A heartbeat: keep me's row live until now + lease_ms and record whether it leads. A row
 * under me->name that is absent, no longer live, me's own, or (take set) any, becomes me's
 * (started now when it was not me's). RP_ERR_CONFLICT when another live instance holds the
 * name: *holder (new) is that row {name, instance, host, pid, started_at, seen_until}, times
 * in ms. On success *live (new, may be NULL when not wanted) is every live server, sorted by
 * name: [{name, host, pid, started_at, seen_until, leader}]. Single statements, no
 * transaction: a heartbeat wakes no event stream. */
enum rp_err rp_store_server_beat(struct rp_store *st, const struct rp_server_self *me, int leader,
                                 int take, json_t **live, json_t **holder);

/* me stops: its row is removed (when still its own), so the others rebalance at once. */
enum rp_err rp_store_server_leave(struct rp_store *st, const struct rp_server_self *me);

/* ---- Sensors and rack power (sensors.c; docs/power.md) ---------------------------------- */

/* Sensors kept per node: a read's first this many. */
#define RP_STORE_SENSORS_MAX 256

struct rp_sensor_opts {
	double drive_warning_c; /* a drive without an upper warning from its BMC warns here; 0:
	                           none */
	int64_t settle_ms;      /* a read this long after a power-on came back measures the node */
	int mark_read;          /* a history row (name "", no value) marks each node's read */
};

/* Record a sensor sweep's readings [{id, at (ms: when its BMC read began; later than now or
 * absent: now), ok, error?, sensors? (rp_bmc_sensors' array), limit?}] in one transaction,
 * each node's values as of its at:
 * - per node that answered: sensor_reads (read_at, power_w: its type power, kind system
 *   sensor), each sensor's row (written only when something in it changed), a history sample
 *   when its value moved past a dead band (2 degrees; 2 % and 10 W; 5 % and 300 RPM) or an
 *   hour passed, and the sensors it no longer reports removed;
 * - per node that did not: its try and error (its latest values stay);
 * - a sensor's state is the worse of its BMC's health and its value against its thresholds;
 *   each change of state is an event (sensor.warning, sensor.critical, sensor.cleared);
 * - per rack of those nodes: its measured draw (the sum of its nodes' latest power_w), a
 *   rack_power_history step (5 minutes: peak and latest), and an event when it crosses its
 *   limit (budget x power_limit_pct) either way: rack.power_over_limit, rack.power_ok.
 * - per node that answered: its power-on admission ends when its power-on came back
 *   o->settle_ms or more before (rp_store_power_started); a reading's limit {watts, active}
 *   or {error} is recorded as rp_store_power_cap_seen records it.
 * Nodes deleted meanwhile are passed over. *events (may be NULL): the events written. */
enum rp_err rp_store_sensors_record(struct rp_store *st, json_t *readings,
                                    const struct rp_sensor_opts *o, int *events);

/* A node's latest sensors: {node, read_at, tried_at, error, power_w, sensors [{name, type,
 * kind, value, unit, thresholds {upper_warning, upper_critical, lower_warning,
 * lower_critical} (null when it has none), health (ok|warning|critical: ours), bmc_health,
 * source, read_at, changed_at}]}. Never read: read_at null, sensors []. RP_ERR_NOT_FOUND for
 * an unknown node. */
enum rp_err rp_store_node_sensors(struct rp_store *st, const char *node, json_t **out);

/* A sensor's samples in [since, until) (ms), oldest first, at most limit: {node, sensor,
 * unit, samples [{at, value}], truncated}. RP_ERR_NOT_FOUND for an unknown node, or a sensor
 * the node neither has now nor has samples of in the range. */
enum rp_err rp_store_sensor_history(struct rp_store *st, const char *node, const char *sensor,
                                    int64_t since, int64_t until, size_t limit, json_t **out);

/* A rack's power: {rack, budget_w, limit_pct, limit_w, measured_w, projected_w, admitted,
 * nameplate_w, headroom_w, headroom_pct, over_limit, read_at, nodes [{node, class, watts,
 * read_at, error, max_power_w, admission {admitted_at, started_at, peak_w, forced} or
 * null}]}. limit_w = budget x limit_pct; headroom = limit_w - measured_w (its pct of the
 * budget); projected_w: measured_w plus, for each of the admitted power-ons not measured yet,
 * its peak in place of what it drew when admitted (rp_store_power_admit); nameplate_w: the
 * sum of the nodes' classes' max_power_w, null unless every node's class has one. Nulls
 * where the rack has no budget or no reading yet.
 * RP_ERR_NOT_FOUND for an unknown rack. */
enum rp_err rp_store_rack_power(struct rp_store *st, const char *rack, json_t **out);

/* Every rack as rp_store_rack_power shows it without nodes, by name: {measured_w, budget_w
 * (sums), racks [...]}. */
enum rp_err rp_store_power_overview(struct rp_store *st, json_t **out);

/* A rack's totals in [since, until): {rack, step_s, samples [{at, peak_w, last_w}]}. */
enum rp_err rp_store_rack_power_history(struct rp_store *st, const char *rack, int64_t since,
                                        int64_t until, json_t **out);

/* Power-on admission (admission.c). */
struct rp_admit_opts {
	unsigned stagger;    /* nodes per rack whose power-on is in flight at once; 0: no cap */
	unsigned stagger_ms; /* between two admissions in a rack; 0: none */
};

struct rp_admit {
	int admitted;       /* 1: go on and power the node on; 0: wait (why, retry_ms) */
	int never;          /* not admitted, and never will be: the node's peak alone passes the
	                       rack's limit (why) */
	int forced;         /* admitted by force past what would have held it (evented) */
	int64_t retry_ms;   /* when waiting: ask again after this */
	double projected_w; /* the rack's projected draw with this node at its peak */
	double limit_w;     /* the rack's limit; -1: it has no budget */
	char why[256];      /* when waiting: "waiting: rack r01 projected 37.2 kW of 36.0 kW ..." */
	char note[320];     /* when admitted: a caveat (a class without max_power_w), or "" */
};

/* Before a job (job_id) powers node (UUID or name) on: take its admission, in one
 * transaction. A node without a rack, or with an admission already (a retried job), is
 * admitted. Otherwise, in its rack: at most o->stagger power-ons in flight (admitted, not yet
 * started), o->stagger_ms between admissions, and, when the rack has a budget, its projected
 * draw (its nodes' latest power_w, plus for each admission not yet measured its class's
 * max_power_w in place of what it drew when admitted, plus this node likewise) at most
 * budget x power_limit_pct. When one of those holds it back: admitted 0, why and retry_ms
 * set, nothing written; unless force: then admitted, and an event power.admission_forced
 * (actor) says what it passed. A node's peak is its class's max_power_w, or the power limit
 * its BMC was last read to enforce when lower (rp_store_power_caps). A node whose peak alone
 * passes the limit is
 * not admitted and never will be (never 1, why set; force passes it). A class without
 * max_power_w counts as 0 W (note says so). An admission of the node in another rack (it
 * moved) is taken again in its own.
 * Admissions in flight for 10 minutes, or not measured for 30, are given up. *out written on
 * success. RP_ERR_NOT_FOUND: no such node. */
enum rp_err rp_store_power_admit(struct rp_store *st, int64_t job_id, const char *node, int force,
                                 const char *actor, const struct rp_admit_opts *o,
                                 struct rp_admit *out);

/* The power-on for which node's admission was taken will not be sent (the job failed before
 * sending it): the admission goes, unless its command already came back. */
enum rp_err rp_store_power_release(struct rp_store *st, const char *node);

/* The power-on command for node came back (done or failed): its admission no longer counts
 * as in flight for the stagger; its peak counts until a sensor read measures it (a read that
 * answers settle_ms or more after this ends the admission: rp_store_sensors_record). */
enum rp_err rp_store_power_started(struct rp_store *st, const char *node);

/* Power capping (caps.c). */

/* Plan rack's power caps from its policy, in one transaction: each node's target (racks
 * power_cap "budget": the rack's limit, budget x power_limit_pct, shared in proportion to the
 * nodes' classes' max_power_w, a node whose class has none counting as their average, and
 * never above its own max_power_w; "off": no limit) kept in power_caps, and an event
 * rack.power_cap_planned; of the rack's nodes with a BMC (a class rated 0 W counts as
 * unrated). *out: {rack, policy, targets [{node, target_w (null: none)}]}. RP_ERR_NOT_FOUND
 * (rack); RP_ERR_CONFLICT with detail when a "budget" rack has no budget; RP_ERR_BAD_REQUEST
 * with detail when it has no node with a BMC (nothing planned). */
enum rp_err rp_store_power_cap_plan(struct rp_store *st, const char *rack, const char *actor,
                                    json_t **out, json_t **detail);

/* Node's planned limit: *has 1 and *watts, or *has 0 (none: remove). RP_ERR_NOT_FOUND when the
 * node (or a plan for it) does not exist. */
enum rp_err rp_store_power_cap_target(struct rp_store *st, const char *node, int *has,
                                      unsigned *watts);

/* What node's BMC was read to enforce (watts, active), or why the read or set failed (error
 * not NULL: the values are not changed). */
enum rp_err rp_store_power_cap_seen(struct rp_store *st, const char *node, unsigned watts,
                                    int active, const char *error);

/* The planned nodes (of rack, or all when NULL; only those that drift when drift_only) by
 * rack and name: [{node, rack, policy, target_w, planned_at, bmc_w, bmc_active, read_at,
 * error, drift}]. drift: the BMC was read to enforce another limit, none where one is due, or
 * one where none is. RP_ERR_NOT_FOUND: no such rack. */
enum rp_err rp_store_power_caps(struct rp_store *st, const char *rack, int drift_only,
                                json_t **out);

/* What node's sensors and rack reached in [since, until) (ms), for acceptance's
 * power_thermal check: {samples (its reads marked in the window, rp_sensor_opts.mark_read:
 * 0, it was not read then),
 * sensors [{name, type, kind, unit, upper_warning, upper_critical, peak}], rack {rack,
 * limit_w, peak_w} or null}. peak: the highest of the sensor's samples in the window, or,
 * without any, the value it held when the window opened (null: none); the rack's peak_w is
 * the highest
 * 5-minute step peak overlapping the window. RP_ERR_NOT_FOUND: no such node. */
enum rp_err rp_store_sensor_peaks(struct rp_store *st, const char *node, int64_t since,
                                  int64_t until, json_t **out);

/* When node_id's sensors were last read and answered (ms; 0: never), into *at. */
enum rp_err rp_store_sensor_read_at(struct rp_store *st, int64_t node_id, int64_t *at);

/* One stored sensor, for /metrics. Strings are valid during the callback only. */
struct rp_sensor_row {
	const char *node, *rack, *name, *type, *kind, *state, *unit;
	double value; /* NAN: the BMC gave none */
};

/* Call fn for every sensor of type (NULL: every type), by node and name, until it returns
 * non-zero. */
enum rp_err rp_store_sensor_rows(struct rp_store *st, const char *type,
                                 int (*fn)(void *arg, const struct rp_sensor_row *r), void *arg);

/* ---- Retention --------------------------------------------------------------------------- */

/* What rp_store_prune removed. */
struct rp_prune_counts {
	int64_t events, job_logs, tokens, bootstrap_tokens, servers, deliveries;
	int64_t samples, rack_steps; /* sensor_history, rack_power_history rows */
	int capped; /* the samples were over samples_max: prune again in minutes, not an hour */
	int more;   /* the budget ran out first: call again */
};

/* How long rp_store_prune keeps what it prunes, in ms; 0 keeps it. */
struct rp_prune_keep {
	int64_t events_ms;     /* events, job logs, dead tokens, ended webhook deliveries */
	int64_t samples_ms;    /* sensor history */
	int64_t samples_max;   /* ...and at most about this many rows of it; 0: no cap */
	int64_t rack_steps_ms; /* rack power history */
};

/* Remove what has outlived its use at time now: events older than keep->events_ms; the logs
 * of jobs that ended longer than that ago (the jobs stay, their log_dropped counting the
 * bytes); API tokens expired or revoked longer than that ago; webhook deliveries that ended
 * longer than that ago; sensor samples older than keep->samples_ms (and the oldest of them
 * while there are more than keep->samples_max: as many stay as leave room for an hour's
 * more, at least a tenth of samples_max) and rack power steps older than
 * keep->rack_steps_ms; bootstrap tokens a day past their expiry; rows of servers
 * not heard from for a day. In transactions of at most a few thousand rows (samples: of 64 nodes or
 * racks), so a large backlog never holds the write lock for long, and for about budget_ms at most
 * (counts->more then says there is more; the passes over the histories go on where they stopped
 * at the next call). One caller at a time (the leader's pruner). counts (may be NULL) is written
 * only on success. */
enum rp_err rp_store_prune(struct rp_store *st, int64_t now, const struct rp_prune_keep *keep,
                           int64_t budget_ms, struct rp_prune_counts *counts);

/* A job the scheduler claimed, with what its worker needs of the node and its BMC. Strings
 * are NULL where the row has none. bmc.password is the opened BMC password (NULL when none or
 * it does not open): it never enters jansson and rp_store_claim_free wipes it. */
/* A node's BMC as a worker needs it to open a session: the password opened straight into a
 * buffer that is wiped on free (never a jansson string). Strings owned, NULL when unset. */
struct rp_store_bmc {
	char *driver, *address, *username;
	char *password;
	size_t password_len;
	unsigned port;
	int tls_verify;
	json_t *options; /* owned, NULL when none */
};

struct rp_job_claim {
	struct rp_job_claim *next; /* the rest of a claimed list */
	int64_t id;
	char uuid[RP_UUID_BUF];
	enum rp_job_type type; /* RP_JOB_UNKNOWN: a name no row of jobtypes.h knows */
	char type_name[32];
	json_t *params; /* owned, never NULL */
	int recover;    /* interrupted by a restart */
	int sent;       /* sent_at is set: it may have acted */
	int attempts, max_attempts;
	char *phase; /* provisioning phase, NULL when none */
	int64_t phase_at;
	struct {
		int64_t id;
		char uuid[RP_UUID_BUF];
		char *name, *serial, *system_uuid;
	} node;
	struct rp_store_bmc bmc;
};

/* Free c and the claims after it (c->next...), wiping their passwords. Accepts NULL. */
void rp_store_claim_free(struct rp_job_claim *c);

/* Claim up to max runnable jobs of lane (RP_JOB_LANE_BMC or RP_JOB_LANE_SSH: they run in
 * separate worker pools, so hour-long plans never hold up power actions) for owner, in one
 * transaction, FIFO, at most one mutating job per node. *out: the claims in id order (a
 * list; NULL when none), free with rp_store_claim_free. */
enum rp_err rp_store_jobs_take(struct rp_store *st, const char *owner, enum rp_job_lane lane,
                               int max, int64_t lease_ms, struct rp_job_claim **out);

/* rp_store_jobs_take as JSON, for tests and tools: ssh 1 the SSH lane, 0 the BMC lane. *out:
 * array of {id, uuid, type, params, recover, sent, attempts, max_attempts, phase?, phase_at,
 * node: {id, uuid, name, serial, system_uuid}, bmc: {driver, address, port, username,
 * tls_verify, options}} (no password). */
enum rp_err rp_store_jobs_claim(struct rp_store *st, const char *owner, int ssh, int max,
                                int64_t lease_ms, json_t **out);

/* Durably note that job id is about to send its mutating command, before sending it: a
 * job interrupted after this point must not send it again. */
enum rp_err rp_store_job_mark_sent(struct rp_store *st, int64_t id);

/* How a job run ends; RP_JOB_END_RETRY sends it back to the queue. */
enum rp_job_end { RP_JOB_END_SUCCEEDED, RP_JOB_END_FAILED, RP_JOB_END_CANCELLED, RP_JOB_END_RETRY };

/* "succeeded", "failed", "cancelled" or "retry" (the jobs.state and event names). */
const char *rp_store_job_end_name(enum rp_job_end e);

/* What a worker found: rp_store_outcome_new's, filled by the worker, recorded by
 * rp_store_jobs_record. Strings and JSON are owned (NULL: none). */
struct rp_job_outcome {
	struct rp_job_outcome *next; /* the rest of a list to record */
	int64_t id;                  /* the job */
	enum rp_job_end state;
	json_t *result;   /* the job's result (kept on the row; the event's detail) */
	char *error_code; /* with error: why it failed or is retried */
	char *error;
	int64_t not_before; /* retry: not before this (ms since the epoch) */
	int wait;           /* retry: waiting on something else, no failed attempt */
	char power[16];     /* the power state observed ("on", "off", ...), "" when not read */
	json_t *identity;   /* the BMC's identity, stored on the node's BMC */
	int bmc_ok;         /* 1 the BMC answered, 0 it did not, -1 no contact to count */
};

/* A new outcome of job id ending as state, bmc_ok -1; NULL when out of memory. */
struct rp_job_outcome *rp_store_outcome_new(int64_t id, enum rp_job_end state);

/* Free o and the outcomes after it. Accepts NULL. */
void rp_store_outcome_free(struct rp_job_outcome *o);

/* Record outcomes (the list from o) in one transaction, each only while its job is still
 * running under owner's lease (one another server took over is left to it). A retry of a
 * job someone cancelled ends as cancelled. A job that ends leaves its pending steps skipped
 * and running ones failed. The outcomes are not changed. */
enum rp_err rp_store_jobs_record(struct rp_store *st, const char *owner,
                                 const struct rp_job_outcome *o, int fault_threshold);

/* rp_store_jobs_record from JSON, for tests and tools. Each: {id, state:
 * succeeded|failed|cancelled|retry, result?, error_code?, error?, not_before? (retry), wait?
 * (a retry that is no failed attempt), power? ("on"/"off" observed), identity?, bmc_ok?
 * (true/false: whether the BMC answered)}. */
enum rp_err rp_store_jobs_finish(struct rp_store *st, const char *owner, json_t *outcomes,
                                 int fault_threshold);

/* IPMI workarounds a job found that node's BMC needs (names: a non-empty array of
 * options.workarounds names, borrowed): set bmc.options.workarounds to them and record a
 * bmc.workarounds_detected event ({workarounds, address, port}) in one transaction, so the
 * next session opens directly. node: UUID or name. address and port (0 when none is stored)
 * are the BMC the job talked to.
 * RP_ERR_CONFLICT, nothing changed, when the options already name workarounds (any value
 * but null, [] included: an operator's choice is never overwritten) or the node's BMC is no
 * longer that ipmi BMC (edited while the job ran). RP_ERR_NOT_FOUND: no such node or no BMC.
 * RP_ERR_BAD_REQUEST: names is not a non-empty array of strings. */
enum rp_err rp_store_bmc_workarounds_detected(struct rp_store *st, const char *node,
                                              const char *address, unsigned port, json_t *names);

/* ---- BMC credentials ------------------------------------------------------------------ */

/* A rotation's default new password: 20 characters, symbols included (a class's
 * bmc_credentials policy may say otherwise). */
#define RP_BMC_PASSWORD_LENGTH 20

/* The node's pending BMC password (a rotation stores it, sealed, before sending it), opened:
 * *out a new buffer of *len bytes and a NUL, released with rp_secrets_plain_free (it wipes).
 * RP_ERR_NOT_FOUND when none is pending or there is no such node; RP_ERR_INTERNAL when it
 * cannot be opened (logged). node: UUID or name. */
enum rp_err rp_store_bmc_pending_get(struct rp_store *st, const char *node, char **out,
                                     size_t *len);

/* Store password (non-empty) as the node's pending BMC password, sealed, replacing a pending
 * one, with a bmc.password_pending event (no secret in it), in one transaction: a rotation
 * calls it before it sends the password. RP_ERR_CONFLICT: the node has no BMC or no username;
 * RP_ERR_BAD_REQUEST: an empty password. */
enum rp_err rp_store_bmc_pending_set(struct rp_store *st, const char *node, const char *password,
                                     const char *actor);

/* End a rotation in one transaction. promote 1: the pending password (proved to work) becomes
 * the node's BMC password, password_rotated_at is now, the BMC's fault state is cleared, event
 * bmc.credentials_rotated; promote 0: the pending one is dropped (the stored one works, or the
 * BMC refused the new one), event bmc.password_dropped. why (may be NULL) ends the event's
 * summary. The sealed text moves as it is. RP_ERR_NOT_FOUND when nothing is pending. */
enum rp_err rp_store_bmc_pending_settle(struct rp_store *st, const char *node, int promote,
                                        const char *actor, const char *why);

/* The rotation policy of the node's class, its node_class's bmc_credentials over the defaults:
 * *out a new object {length (8..64, default RP_BMC_PASSWORD_LENGTH), symbols (default true),
 * rotate_on_enroll (default false)}. */
enum rp_err rp_store_bmc_password_policy(struct rp_store *st, const char *node, json_t **out);

/* Queue a credential rotation job ({type bmc_rotate, params, mutating}) for node in one
 * transaction, as rp_store_job_create does; with password (an admin's explicit one, not
 * NULL), it is stored as pending in the same transaction (the job sets that one instead of a
 * generated one). RP_ERR_CONFLICT with *detail: no BMC or username, a rotation of the node
 * queued or running, or (with password) a pending password an interrupted rotation left,
 * which a rotation without one settles first; and as rp_store_job_create (maintenance). */
enum rp_err rp_store_bmc_rotate(struct rp_store *st, const char *node, const char *password,
                                json_t *job, const char *actor, json_t **out, json_t **detail);

/* ---- Agents --------------------------------------------------------------------------- */

/* Bootstrap token objects: id, node (name, or null: any machine may register with it),
 * created_by, created_at, expires_at, used_at, used_by, state (live|used|expired|revoked).
 * node NULL: a discovery token. RP_ERR_NOT_FOUND when node does not exist. */
enum rp_err rp_store_bootstrap_create(struct rp_store *st, const char *node, const char *hash,
                                      int64_t expires_at, const char *actor, json_t **out);

/* Live bootstrap tokens (unused, unexpired, not revoked), newest first, at most 1000. */
enum rp_err rp_store_bootstrap_list(struct rp_store *st, json_t **out);

/* Revoke an unused one. RP_ERR_NOT_FOUND when unknown, used or already revoked. */
enum rp_err rp_store_bootstrap_revoke(struct rp_store *st, const char *id, const char *actor);

/* RP_ERR_OK when hash is a live bootstrap token, else RP_ERR_UNAUTHORIZED with a reason; a
 * known token that is used, expired or revoked also leaves a bootstrap_token.refused event
 * naming peer (the client address; may be NULL). */
enum rp_err rp_store_bootstrap_check(struct rp_store *st, const char *hash, const char *peer,
                                     json_t **detail);

/* A registration the API has validated (docs/agent-protocol.md). */
struct rp_agent_reg {
	const char *bootstrap_hash; /* of the bootstrap token presented */
	const char *token_hash;     /* of the new agent token */
	json_t *body;               /* {hostname, boot_id, agent_version, macs (normalised,
	                               1..64), ssh {address, port}?, inventory?} */
	const struct rp_sshkey *host_key;
	const char *peer; /* address the request came from, or NULL */
	int source_check; /* boot_source_check: a token from a boot script opens a
	                     registration only from the address that fetched it */
};

/* Register in one transaction: check and consume the bootstrap token, find the node (the
 * token's; for a token bound to no node, a new `discovered` one or the `discovered` node that
 * owns the token's MAC), add unclaimed MACs, store the inventory, pin the host key, replace
 * the agent token. *out: {node {id, name}, created}. RP_ERR_CONFLICT (nothing changed; an
 * agent.register_refused event naming peer, coalesced per node and address) when the MACs
 * belong to another node, a discovery token names an enrolled node, or the host key differs
 * from the pinned one outside a provisioning action with a node-bound token.
 * RP_ERR_UNAUTHORIZED (detail says why) for an unknown, used, expired or revoked token;
 * RP_ERR_CONFLICT when MACs belong to another node than the token's, or to several. */
enum rp_err rp_store_agent_register(struct rp_store *st, const struct rp_agent_reg *r, json_t **out,
                                    json_t **detail);

/* Look up an agent token by hash: role "agent", id/name of its node, node_id.
 * RP_ERR_UNAUTHORIZED when none matches. */
enum rp_err rp_store_agent_auth(struct rp_store *st, const char *hash, struct rp_token_info *out);

/* Record a heartbeat {boot_id?, agent_version?, status?}; a new boot_id is an event. */
enum rp_err rp_store_agent_heartbeat(struct rp_store *st, int64_t node_id, json_t *hb);

/* Store the inventory an agent reported for its node. */
enum rp_err rp_store_agent_inventory(struct rp_store *st, int64_t node_id, json_t *inventory);

/* Pin (hk) or unpin (hk NULL) a node's SSH host key by hand. *out (may be NULL): the pinned
 * key {type, fingerprint, pinned_at, pinned_by} (pin only). Unpinning a node without a key is
 * RP_ERR_NOT_FOUND. */
enum rp_err rp_store_node_host_key_set(struct rp_store *st, const char *key,
                                       const struct rp_sshkey *hk, const char *actor, json_t **out);

/* A steps job as its agent sees it: {id, state, cancel_requested, steps [{id, index, type,
 * state}]}. RP_ERR_FORBIDDEN when the job is another node's, RP_ERR_NOT_FOUND when none. */
enum rp_err rp_store_agent_job(struct rp_store *st, int64_t node_id, const char *job, json_t **out);

/* An agent's step report {state running|succeeded|failed, boot_id?, exit_code?, duration_ms?,
 * output?, output_bytes?, output_truncated?, error?, result?}. RP_ERR_FORBIDDEN (another
 * node's job), RP_ERR_NOT_FOUND, RP_ERR_INVALID_STATE (job ended, or cancelled for a
 * `running` report), RP_ERR_CONFLICT (step already ended otherwise). Repeating the same end
 * state is accepted and changes nothing. */
enum rp_err rp_store_step_report(struct rp_store *st, int64_t node_id, const char *job,
                                 const char *step, json_t *rep, json_t **detail);

/* Worker side of steps jobs. */

/* The job's steps in order: [{id, index, type, state, continue_on_error, boot_id, started_at
 * (ms or null), error}]. */
enum rp_err rp_store_job_steps(struct rp_store *st, int64_t job_id, json_t **out);

/* Settle one step from the server's side (a reboot seen to complete or time out). */
enum rp_err rp_store_step_finish(struct rp_store *st, int64_t job_id, int index, const char *state,
                                 const char *error);

/* Where and how to reach a node over SSH now: {address, port, user, key_type, key_b64,
 * fingerprint, boot_id, seen_at, registered_at, maintenance, maintenance_reason} (times in ms;
 * key, address and reason may be null). */
enum rp_err rp_store_ssh_target(struct rp_store *st, int64_t node_id, json_t **out);

/* Record that a node presented another host key than the pinned one. */
enum rp_err rp_store_host_key_mismatch(struct rp_store *st, int64_t node_id, const char *job,
                                       const char *pinned, const char *seen);

/* Append SSH output to a job's log, keeping at most cap bytes per job (the rest is counted
 * as dropped). */
enum rp_err rp_store_job_log_append(struct rp_store *st, int64_t job_id, const void *data,
                                    size_t len, size_t cap);

/* A job's log from byte offset on, appended to out; *meta: {state, type, bytes, dropped}. */
enum rp_err rp_store_job_log(struct rp_store *st, const char *job, int64_t offset,
                             struct rp_buf *out, json_t **meta);

/* ---- Webhooks (docs/webhooks.md) ------------------------------------------------------- */

/* Webhook objects (a name given when created without: "webhook-" and the first 8 digits of its
 * UUID): id, name, url, events [patterns: "*", "rollout.started", "rollout.*"],
 * enabled, secret_set, secret_updated_at, pending (deliveries waiting), version, created_at,
 * updated_at. "secret" is written (sealed; a patch without it keeps the old one) and never
 * read back; creating one needs it (the API checks). Events about a webhook go to the others,
 * never to itself. */
enum rp_err rp_store_webhook_create(struct rp_store *st, json_t *in, const char *actor,
                                    json_t **out, json_t **detail);
enum rp_err rp_store_webhook_get(struct rp_store *st, const char *key, json_t **out);
enum rp_err rp_store_webhook_list(struct rp_store *st, const struct rp_page_req *rq,
                                  struct rp_page *out);
enum rp_err rp_store_webhook_update(struct rp_store *st, const char *key, json_t *patch,
                                    int64_t if_match, const char *actor, json_t **out,
                                    json_t **detail);
enum rp_err rp_store_webhook_delete(struct rp_store *st, const char *key, int64_t if_match,
                                    const char *actor, json_t **detail);

/* The deliveries due at now, at most max: each enabled webhook's oldest pending one (the later
 * ones wait behind it: a webhook sees its events in order), when its next_at has come.
 * [{delivery, webhook (uuid), name, url, secret (opened), attempts, event_id, action,
 * created_at (ms), last_error, version (the webhook's), event (as GET /v1/events shows it; null
 * when retention removed it)}] into *out, to be released with rp_store_webhook_wipe. A secret that
 * does not open is logged and its webhook skipped. */
enum rp_err rp_store_webhook_due(struct rp_store *st, int64_t now, int max, json_t **out);

/* Overwrite the secrets of a due list, then release it (NULL: nothing). */
void rp_store_webhook_wipe(json_t *due);

/* Record an attempt before it is made: attempts + 1, last_at now, and not due again before
 * next_at (a crash mid-POST retries then, at least once). Only while the delivery is as the
 * due list read it (attempts, the webhook's version, enabled): RP_ERR_NOT_FOUND otherwise
 * (tried meanwhile, the webhook changed, disabled or deleted): read it again. */
enum rp_err rp_store_webhook_attempt(struct rp_store *st, int64_t delivery, int64_t attempts,
                                     int64_t version, int64_t now, int64_t next_at);

enum rp_webhook_outcome {
	RP_WEBHOOK_DELIVERED, /* 2xx */
	RP_WEBHOOK_RETRY,     /* anything else: pending again, due at next_at */
	RP_WEBHOOK_GAVE_UP,   /* failed for good: older than webhook_max_age; event webhook.gave_up
	                         (none when the delivery carried a webhook.gave_up itself) */
};

/* The attempt's outcome, with the HTTP status (0: none) and error text (NULL: none), in one
 * transaction. RP_ERR_NOT_FOUND when the delivery is no longer pending. */
enum rp_err rp_store_webhook_result(struct rp_store *st, int64_t delivery,
                                    enum rp_webhook_outcome outcome, int status, const char *error,
                                    int64_t now, int64_t next_at);

/* A webhook's delivery log, newest first, optionally of one state (filter "state"): {id,
 * event_id, action, state, attempts, created_at, last_at, last_status, last_error, next_at
 * (pending only), finished_at}. */
enum rp_err rp_store_webhook_deliveries(struct rp_store *st, const char *key,
                                        const struct rp_page_req *rq, struct rp_page *out);

/* ---- Recipes -------------------------------------------------------------------------- */

/* Recipe objects: id, name, description, params {arg: {required, default, description}},
 * steps [...] (a plan with ${arg} placeholders), version, created_at, updated_at. Updates
 * replace params and steps whole. */
enum rp_err rp_store_recipe_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                                   json_t **detail);
enum rp_err rp_store_recipe_get(struct rp_store *st, const char *key, json_t **out);
enum rp_err rp_store_recipe_list(struct rp_store *st, const struct rp_page_req *rq,
                                 struct rp_page *out);
enum rp_err rp_store_recipe_update(struct rp_store *st, const char *key, json_t *patch,
                                   int64_t if_match, const char *actor, json_t **out,
                                   json_t **detail);
enum rp_err rp_store_recipe_delete(struct rp_store *st, const char *key, int64_t if_match,
                                   const char *actor, json_t **detail);

/* Load the recipes rackpilotd ships (the scripts in recipes/, compiled in: store/shipped.h), once
 * at start, in one transaction: each one whose name no recipe has yet is inserted, with a
 * recipe.created event by "rackpilotd" (detail {"shipped": true}). A stored recipe of the same
 * name is never changed: when it differs from the shipped one (the operator's own, or edited)
 * that is logged ("recipe X is the operator's; the shipped one is not loaded"), once per call.
 * Another server sharing the database inserting the same name meanwhile is no error (its row
 * stays). *loaded (may be NULL) gets how many were inserted. RP_ERR_OK or the store's error;
 * RP_ERR_INTERNAL also when a shipped recipe is not a JSON object (a broken build). */
enum rp_err rp_store_recipe_ship(struct rp_store *st, int *loaded);

/* A recipe's steps (any JSON) with every ${name} that values (an object of strings) names
 * replaced by its value; other placeholders stay. New reference (a pure function). */
json_t *rp_store_recipe_fill(json_t *steps, json_t *values);

/* ---- Network boot ----------------------------------------------------------------------- */

/* Image objects: id, name, kind, file (its name in the image directory), size, sha256,
 * description, version, created_by, created_at, updated_at. Create takes them validated
 * (the API hashed the file); RP_ERR_DUPLICATE for a taken name or file. */
enum rp_err rp_store_image_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                                  json_t **detail);
enum rp_err rp_store_image_get(struct rp_store *st, const char *key, json_t **out);
/* Filter: kind. */
enum rp_err rp_store_image_list(struct rp_store *st, const struct rp_page_req *rq,
                                struct rp_page *out);
/* Delete the record (*out: what it was, so the caller can remove the file). RP_ERR_IN_USE
 * while a boot profile uses it. */
enum rp_err rp_store_image_delete(struct rp_store *st, const char *key, const char *actor,
                                  json_t **out, json_t **detail);

/* Boot profile objects: id, name, node_class, kernel, initrd (image names), cmdline,
 * description, node_count, version, created_at, updated_at. RP_ERR_INVALID_FIELD for an
 * unknown image. */
enum rp_err rp_store_boot_profile_create(struct rp_store *st, json_t *in, const char *actor,
                                         json_t **out, json_t **detail);
enum rp_err rp_store_boot_profile_get(struct rp_store *st, const char *key, json_t **out);
enum rp_err rp_store_boot_profile_list(struct rp_store *st, const struct rp_page_req *rq,
                                       struct rp_page *out);
enum rp_err rp_store_boot_profile_update(struct rp_store *st, const char *key, json_t *patch,
                                         int64_t if_match, const char *actor, json_t **out,
                                         json_t **detail);
enum rp_err rp_store_boot_profile_delete(struct rp_store *st, const char *key, int64_t if_match,
                                         const char *actor, json_t **detail);

/* What a MAC boots: {node: {id (row), id, name, state, maintenance, node_class, phase} or
 * absent, profile: {name, cmdline, kernel, initrd} or absent (the node's, its class's, or
 * "default"). */
enum rp_err rp_store_boot_lookup(struct rp_store *st, const char *mac, json_t **out);

/* A boot script's token request. */
struct rp_boot_req {
	int64_t node_id;    /* the node being provisioned; 0: discovery of an unknown MAC */
	const char *mac;    /* the MAC that asked (normalised) */
	const char *source; /* the address that asked, recorded on the token; may be NULL */
	int bind_source;    /* boot_source_check: tokens belong to (MAC, source), not the MAC */
	int64_t ttl_ms;     /* lifetime of a new token */
	int max_discovery;  /* MACs that may hold a live discovery token at once */
	int max_per_source; /* of those, per source address (0: no limit) */
	int max_discovered; /* no discovery token while this many nodes are `discovered` (0: no
	                       limit) */
};

/* Bootstrap tokens (used, revoked or not) are deleted this long after their expiry. */
#define RP_BOOT_TOKEN_RETAIN_MS (24LL * 3600 * 1000)

/* The bootstrap token for a boot script into secret (RP_TOKEN_BUF bytes): the live one of this
 * node (or discovery) and MAC (and source, with bind_source) while at least half its lifetime
 * remains, else a new one. Fetching a script never revokes a token. The secret is derived
 * from the server key (rp_store_set_secrets) and the token's id; only its hash is stored.
 * Prunes long-dead tokens. RP_ERR_UNAVAILABLE, why filled, when a discovery slot is needed and
 * max_discovery MACs (or max_per_source from this source) hold one already, or max_discovered
 * discovered nodes wait for an operator. */
enum rp_err rp_store_boot_token(struct rp_store *st, const struct rp_boot_req *r,
                                char secret[RP_TOKEN_BUF], char *why, size_t whylen);

/* A counter bumped by every change to MACs or node names. */
enum rp_err rp_store_macs_version(struct rp_store *st, int64_t *out);

/* dnsmasq's dhcp-hostsfile: "MAC,NAME" per known MAC (dnsmasq tags them "known"), appended
 * to out. */
enum rp_err rp_store_dhcp_hosts(struct rp_store *st, struct rp_buf *out);

/* ---- Lifecycle ---------------------------------------------------------------------------- */

/* Start action (manage, adopt, commission, deploy, release) on a node: checks the state allows
 * it (RP_ERR_INVALID_STATE, detail {state, action, allowed}; also in maintenance) and that the
 * BMC can take it (RP_ERR_CONFLICT), queues `job` ({type, params, mutating, max_attempts};
 * ignored for adopt, which is immediate) and moves the node to the action's running state, in
 * one transaction. *out: {node, action, state, job}. */
enum rp_err rp_store_provision(struct rp_store *st, const char *key, const char *action,
                               json_t *job, const char *actor, json_t **out, json_t **detail);

/* Abort: when the node's action job still runs, its id goes to job (the caller cancels it, and
 * the node settles when it ends); else the node moves to the action's failed state at once and
 * job is "". RP_ERR_INVALID_STATE when nothing runs. */
enum rp_err rp_store_provision_abort(struct rp_store *st, const char *key, const char *actor,
                                     char *job, size_t joblen, json_t **detail);

/* *newer 1 when a job of the same type for the same node was queued after job_id (a later
 * identify request takes over the light), else 0. */
enum rp_err rp_store_job_superseded(struct rp_store *st, int64_t job_id, int *newer);

/* ---- Configured deploys (deploy.c; docs/deploy.md) ------------------------------------ */

/* The first-boot token of deploy job (its UUID) into out (at least 110 bytes):
 * "rpfb1.<job>.<64 hex>", derived from the server's key, the same after a restart, never
 * stored. RP_ERR_INTERNAL without a key. */
enum rp_err rp_store_first_boot_token(struct rp_store *st, const char *job, char *out, size_t len);

/* Record the first boot a deployed OS reports with token: RP_ERR_UNAUTHORIZED for any token
 * this server did not derive (or whose job is gone or no deploy), RP_ERR_INVALID_FIELD when
 * report's instance_id is not this deploy's, RP_ERR_CONFLICT when its first boot was already
 * reported (the token is good once) or the deploy ended. Else the report (checked by the
 * caller) is kept with source, a node.first_boot event is written, and *out is {job, node,
 * reported_at}. */
enum rp_err rp_store_first_boot_record(struct rp_store *st, const char *token, json_t *report,
                                       const char *source, json_t **out, json_t **detail);

/* The first boot job_id's OS reported: the report plus reported_at and source, or
 * RP_ERR_NOT_FOUND while none came. */
enum rp_err rp_store_first_boot_get(struct rp_store *st, int64_t job_id, json_t **out);

/* A job's secret payload (the `secret` it was created with), unsealed: a new value (wipe
 * its strings before releasing it), or *out NULL when it has none, or no longer (it is
 * dropped when the job ends). */
enum rp_err rp_store_job_secret(struct rp_store *st, int64_t job_id, json_t **out);

/* Record the phase a multi-phase job reached (durably, with the time). */
enum rp_err rp_store_job_phase(struct rp_store *st, int64_t job_id, const char *phase);

/* ---- Power sync ------------------------------------------------------------------------ */

/* A node a power sweep reads. */
struct rp_power_target {
	int64_t id;
	char uuid[RP_UUID_BUF];
	int capped; /* has a power cap plan: the sensor sweep reads its limit too */
	char *name;
	struct rp_store_bmc bmc;
};

/* Nodes a power sweep reads: with a usable BMC, not in maintenance, in row order. *out: a new
 * array of *n targets (NULL when none), released with rp_store_power_targets_free. */
enum rp_err rp_store_power_targets(struct rp_store *st, struct rp_power_target **out, size_t *n);

/* ---- Serial consoles (console.c) ------------------------------------------------------- */

/* The nodes whose serial console is to be logged now (mode: the server's console_log setting,
 * "active", "always" or "off"): with an ipmi or redfish BMC with an address, not in
 * maintenance, the node's console_log not "off", and: mode or the node's console_log
 * "always", or (mode "active") a provisioning action that boots it (verifying,
 * commissioning, deploying, releasing) or an acceptance job queued or running. *out a new
 * array of {uuid, name}. */
enum rp_err rp_store_console_wanted(struct rp_store *st, const char *mode, json_t **out);

/* One node's BMC for its console, whatever its state: *out filled (its parts released with
 * rp_store_power_target_clear). RP_ERR_NOT_FOUND: no such node; RP_ERR_CONFLICT: no ipmi or
 * redfish BMC with an address. */
enum rp_err rp_store_console_target(struct rp_store *st, const char *node,
                                    struct rp_power_target *out);

/* node's (UUID or name) UUID and name. RP_ERR_NOT_FOUND when there is no such node. */
enum rp_err rp_store_node_names(struct rp_store *st, const char *node, char uuid[RP_UUID_BUF],
                                char *name, size_t namelen);

/* Record an event about node (its UUID or name) in its own transaction. */
enum rp_err rp_store_node_event(struct rp_store *st, const char *node, const char *actor,
                                const char *action, const char *summary, json_t *detail);

/* Free the n targets of t, wiping their passwords. Accepts NULL. */
void rp_store_power_targets_free(struct rp_power_target *t, size_t n);

/* Free what one target holds (its name, its BMC's strings, the password wiped), not t itself,
 * and zero them. Accepts NULL. */
void rp_store_power_target_clear(struct rp_power_target *t);

/* Record a sweep's readings [{id, ok, power?, error?}] in one transaction: power state and
 * time, failure counts, faults set after fault_threshold failures in a row and cleared by a
 * success, and an event for every change seen. Sets *changed to the power changes. */
enum rp_err rp_store_power_record(struct rp_store *st, json_t *readings, int fault_threshold,
                                  int *changed);

/* ---- Rollouts (rollouts.c; docs/rollouts.md) ------------------------------------------- */

/* Plan a rollout in one transaction. in (validated by the API): {kind firmware|bios,
 * selector (as for batches), waves {canary (default 1), batch (integer, or "P%" of the nodes
 * that take part), max_per_rack (0: no cap)}, max_failures, gate {wait_s, timeout_s, require
 * [power_on|agent_heartbeat|version_match], recipe?, plan? (the recipe expanded)},
 * start_at? (ms)}. Selected nodes in maintenance, without a usable BMC, without a
 * baseline/profile or already at target are recorded as skipped with the reason; the rest are
 * assigned to waves. *out: the rollout (as rp_store_rollout_get). RP_ERR_BAD_REQUEST for a
 * selector that is malformed or picks nothing; RP_ERR_CONFLICT (detail {reason, nodes
 * [{node, rollout}]}) when a node is already in an active rollout, or (detail {reason,
 * skipped}) when no node needs the rollout. */
enum rp_err rp_store_rollout_create(struct rp_store *st, json_t *in, const char *actor,
                                    json_t **out, json_t **detail);

/* What a firmware update, BIOS apply or rollout will need, read in one transaction (the
 * pre-flight check is rp_api_preflight's). what: {kind firmware|bios, node (one node: the
 * node's own update or apply) or selector (a rollout: only the nodes its plan would give a
 * job: not in maintenance, with a target, off it), components? (firmware, one node),
 * profile? (bios, one node)}. *out (caller owns): {kind, nodes [{node, driver (null without
 * a BMC), address, username, password (booleans: set), and for firmware baseline, targets
 * [{component, version, method, recipe, recipe_params (null: no such recipe), image, file,
 * size, sha256}] (components the store shows at target left out), for bios profile {name,
 * method, recipe, recipe_params, attributes (count)}}]}. Errors as the one-node checks:
 * RP_ERR_NOT_FOUND (node), RP_ERR_CONFLICT (no baseline / no profile, detail {reason}),
 * RP_ERR_INVALID_FIELD (a component not in the baseline, an unknown profile; detail),
 * RP_ERR_BAD_REQUEST (a selector that is malformed or picks nothing; detail). */
enum rp_err rp_store_preflight(struct rp_store *st, json_t *what, json_t **out, json_t **detail);

/* A rollout by id: {id, kind, state, reason, selector, waves_spec, gate, max_failures,
 * start_at, created_by, created_at, started_at, finished_at, updated_at, counts {pending,
 * running, succeeded, failed, skipped, total}, failures {current, seen, max}, wave_count,
 * current_wave, waves [{index, canary, state, nodes, counts, started_at, finished_at,
 * gate_done_at}], nodes [{node, rack, wave, state, phase, reason, attempt, job, gate_job,
 * result, started_at, job_finished_at, finished_at, duration_ms}], failed [{node, wave,
 * reason}], skipped [{node, reason}], mean_node_ms, estimated_finish_at}. */
enum rp_err rp_store_rollout_get(struct rp_store *st, const char *key, json_t **out);

/* Newest first, without waves and nodes. Filters: state, kind. */
enum rp_err rp_store_rollout_list(struct rp_store *st, const struct rp_page_req *rq,
                                  struct rp_page *out);

/* action pause (running or scheduled), resume (paused; opts {retry_failed (default true),
 * max_failures?}) or abort (not ended: queued jobs cancelled, running ones finish), with an
 * event. *out: the rollout after it. RP_ERR_NOT_FOUND, RP_ERR_INVALID_STATE (detail {reason,
 * state}), RP_ERR_CONFLICT when a resume would leave more failed nodes than max_failures. */
enum rp_err rp_store_rollout_control(struct rp_store *st, const char *key, const char *action,
                                     json_t *opts, const char *actor, json_t **out,
                                     json_t **detail);

/* Engine side. Row ids of rollouts the engine must look at (active ones, and ended ones whose
 * last jobs still run), as a new array. */
enum rp_err rp_store_rollouts_active(struct rp_store *st, json_t **out);

/* Move rollout id forward in one transaction: settle nodes whose jobs ended, pause past
 * max_failures, start the next wave (its jobs inserted in the same transaction), evaluate
 * gates, complete. *moved: something was committed. *need_power: a gate waits for a power
 * reading newer than a node's update (the caller may start a power sweep). */
enum rp_err rp_store_rollout_advance(struct rp_store *st, int64_t id, int *need_power, int *moved);

/* ---- Exports ---------------------------------------------------------------------------- */

/* The nodes of rack, tag or class `by` named value (by NULL: every node), discovered machines
 * left out, by name, each handed to fn as {name, rack, node_class, provision_state, tags [],
 * address (ssh.address, else where its agent registered from; null when neither), gpu_model,
 * gpu_count (the class's BOM; null)} and, with `inventory`, bom (the class's bill of
 * materials; null when the class is not defined), inventory (the agent's latest report; null)
 * and inventory_at: borrowed for the call, so that a fleet's inventories are never all in
 * memory at once. fn returns 0 to go on, else the walk stops and that error is returned. The
 * read is one snapshot. RP_ERR_OK (no node: fn is never called); RP_ERR_NOT_FOUND with *detail
 * {field: "rack", reason} for a rack that does not exist; a storage error. */
enum rp_err rp_store_export_nodes(struct rp_store *st, const char *by, const char *value,
                                  int inventory, enum rp_err (*fn)(json_t *node, void *arg),
                                  void *arg, json_t **detail);

/* ---- Health and metrics ---------------------------------------------------------------- */

/* {nodes_by_state {state: n}, nodes, racks, db_bytes, jobs {queued, running}, bmc_faults,
 * webhooks_pending (deliveries waiting)}. */
enum rp_err rp_store_stats(struct rp_store *st, json_t **out);

/* The database, for GET /v1: {kind "sqlite" | "postgresql", name (as logs show it: no
 * password), schema_version, size_bytes (null when the database cannot tell)}. RP_ERR_OK, or
 * RP_ERR_UNAVAILABLE / RP_ERR_INTERNAL (*out untouched). */
enum rp_err rp_store_about(struct rp_store *st, json_t **out);

/* Cheap liveness probe of this thread's connection. */
enum rp_err rp_store_ping(struct rp_store *st);

/* Why writes fail now: RP_ERR_OK, or RP_ERR_STORAGE_FULL / _READONLY / _IO since the last
 * failed write (cleared by the next successful one; reads keep working meanwhile), with a
 * human reason that names the database's directory in why. */
enum rp_err rp_store_health(struct rp_store *st, char *why, size_t whylen);

#endif
