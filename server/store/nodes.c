/* Nodes with their tags, MACs and BMC; inventory. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define NODE_COLS                                                                                  \
	"SELECT n.id AS _id, n.uuid AS id, n.name, r.name AS rack, n.u_position, n.u_height, "     \
	"n.serial, n.vendor, n.model, n.node_class, "                                              \
	"n.system_uuid, "                                                                          \
	"n.tags AS \"tags:json\", n.macs AS \"macs:json\", "                                       \
	"b.driver AS \"bmc.driver\", b.address AS \"bmc.address\", b.port AS \"bmc.port\", "       \
	"b.username AS \"bmc.username\", CASE WHEN b.node_id IS NULL THEN NULL ELSE "              \
	"b.password_sealed IS NOT NULL END AS \"bmc.password_set:bool\", CASE WHEN b.node_id IS "  \
	"NULL "                                                                                    \
	"THEN NULL ELSE b.tls_verify END AS \"bmc.tls_verify:bool\", "                             \
	"b.options AS \"bmc.options:json\", CASE WHEN b.fault IS NULL THEN NULL ELSE "             \
	"json_object('message', b.fault, 'since', strftime('%Y-%m-%dT%H:%M:%fZ', "                 \
	"b.fault_since / 1000.0, 'unixepoch'), 'failures', b.failures) END "                       \
	"AS \"bmc.fault:json\", b.identity AS \"bmc.identity:json\", "                             \
	"b.checked_at AS \"bmc.checked_at:time\", b.last_error AS \"bmc.last_error\", "            \
	"p.name AS bios_profile, n.provision_state, n.power_state, "                               \
	"n.power_state_at AS \"power_state_at:time\", n.maintenance AS \"maintenance:bool\", "     \
	"n.maintenance_reason, n.console_log, n.expected AS \"expected:json\", n.version, "        \
	"n.created_at AS \"created_at:time\", n.updated_at AS \"updated_at:time\", "               \
	"n.ssh_address AS \"ssh.address\", n.ssh_port AS \"ssh.port\", n.ssh_user AS "             \
	"\"ssh.user\", CASE WHEN k.node_id IS NULL THEN NULL ELSE json_object('type', "            \
	"k.key_type, 'fingerprint', k.fingerprint, 'pinned_at', strftime('%Y-%m-%dT%H:%M:%fZ', "   \
	"k.pinned_at / 1000.0, 'unixepoch'), 'pinned_by', k.pinned_by) END "                       \
	"AS \"ssh.host_key:json\", a.registered_at AS \"agent.registered_at:time\", "              \
	"a.seen_at AS \"agent.seen_at:time\", a.boot_id AS \"agent.boot_id\", a.version AS "       \
	"\"agent.version\", a.status AS \"agent.status\", a.hostname AS \"agent.hostname\", "      \
	"a.address AS \"agent.address\", a.port AS \"agent.port\", n.provision_error, "            \
	"(SELECT uuid FROM jobs WHERE id = n.provision_job_id) AS provision_job, "                 \
	"n.provision_at AS \"provision_at:time\", n.deployed_image, bp.name AS boot_profile "      \
	"FROM nodes n LEFT JOIN racks r ON r.id = n.rack_id LEFT JOIN bmcs b ON "                  \
	"b.node_id = n.id LEFT JOIN bios_profiles p ON p.id = n.bios_profile_id "                  \
	"LEFT JOIN ssh_host_keys k ON k.node_id = n.id LEFT JOIN agents a ON a.node_id = n.id "    \
	"LEFT JOIN boot_profiles bp ON bp.id = n.boot_profile_id "

/* Members of the wire object the caller cannot write (the API rejects them first). */
static const char *const computed[] = {
        "id",           "provision_state", "power_state", "power_state_at",  "version",
        "created_at",   "updated_at",      "agent",       "provision_error", "provision_job",
        "provision_at", "deployed_image",  NULL};
static const char *const diff_skip[] = {"id",
                                        "version",
                                        "created_at",
                                        "updated_at",
                                        "bmc.password_set",
                                        "bmc.checked_at",
                                        "bmc.fault",
                                        "bmc.identity",
                                        "bmc.last_error",
                                        "agent",
                                        "ssh.host_key",
                                        "provision_at",
                                        "provision_job",
                                        "provision_error",
                                        NULL};

/* Nodes are found, loaded and held to a version as the other resources are (resource.c);
 * their writes stay here (BMC passwords, MAC versions, events with node and rack). */
static struct store_res node_res = {
        .table = T_NODE,
        .otype = "node",
        .sql_load = NODE_COLS "WHERE n.id = ?",
};

/* Everything that needs the database before a node row is written: unique name, known
 * rack and profile, free rack units, unclaimed MACs. rack_id/profile_id are resolved. */
static enum rp_err
node_check(struct conn *c, int64_t self, json_t *obj, int64_t *rack_id, int64_t *profile_id,
           json_t **detail)
{
	const char *name = json_string_value(json_object_get(obj, "name"));
	const char *rack = json_string_value(json_object_get(obj, "rack"));
	const char *profile = json_string_value(json_object_get(obj, "bios_profile"));
	json_t *pos = json_object_get(obj, "u_position"), *macs = json_object_get(obj, "macs"), *m;
	json_t *bmc = json_object_get(obj, "bmc");
	struct stmt *s;
	int64_t other, lo, hi, height;
	enum rp_err e;
	size_t i;

	e = store_id_of(c, T_NODE, name, &other);
	if (e == RP_ERR_OK && other != self) {
		*detail = store_why("name", "a node named '%s' already exists", name);
		return RP_ERR_DUPLICATE;
	}
	if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		return e;
	if ((e = store_ref(c, T_RACK, rack, "rack", rack_id, detail)) != RP_ERR_OK ||
	    (e = store_ref(c, T_PROFILE, profile, "bios_profile", profile_id, detail)) != RP_ERR_OK)
		return e;
	if (json_is_string(json_object_get(obj, "boot_profile"))) {
		int64_t bp;
		const char *bpname = json_string_value(json_object_get(obj, "boot_profile"));

		e = store_id_of(c, T_BOOT_PROFILE, bpname, &bp);
		if (e == RP_ERR_NOT_FOUND) {
			*detail = store_why("boot_profile", "no boot profile named '%s'", bpname);
			return RP_ERR_INVALID_FIELD;
		}
		if (e != RP_ERR_OK)
			return e;
	}
	if (json_is_object(bmc) && !json_is_string(json_object_get(bmc, "driver"))) {
		*detail = store_why("bmc.driver", "a BMC needs a driver (ipmi, redfish or fake)");
		return RP_ERR_MISSING_FIELD;
	}
	if (json_is_integer(pos)) {
		if (*rack_id == 0) {
			*detail = store_why("u_position", "a rack position needs a rack");
			return RP_ERR_INVALID_FIELD;
		}
		lo = json_integer_value(pos);
		hi = lo +
		     (json_is_integer(json_object_get(obj, "u_height"))
		              ? json_integer_value(json_object_get(obj, "u_height"))
		              : 1) -
		     1;
		s = STMT_ARGS(c, "SELECT height_u FROM racks WHERE id = ?", *rack_id);
		/* The rack was found above, in this transaction. */
		if ((e = store_one(c, s, "rack height")) != RP_ERR_OK)
			return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
		height = sql_int(s, 0);
		sql_reset(s);
		if (hi > height) {
			*detail = store_why("u_position",
			                    "U%lld-U%lld does not fit in rack %s (%lld U)",
			                    (long long)lo, (long long)hi, rack, (long long)height);
			return RP_ERR_INVALID_FIELD;
		}
		s = STMT_ARGS(c,
		              "SELECT name, u_position, u_position + u_height - 1 FROM nodes "
		              "WHERE rack_id = ?1 AND id != ?2 AND u_position IS NOT NULL "
		              "AND u_position <= ?4 AND u_position + u_height - 1 >= ?3 LIMIT 1",
		              *rack_id, self, lo, hi);
		if ((e = store_one(c, s, "slot check")) == RP_ERR_OK) {
			*detail = json_pack("{s:s, s:s, s:s, s:I, s:I}", "field", "u_position",
			                    "reason", "rack units already occupied", "occupied_by",
			                    sql_text(s, 0), "from_u", (json_int_t)sql_int(s, 1),
			                    "to_u", (json_int_t)sql_int(s, 2));
			sql_reset(s);
			return RP_ERR_SLOT_OCCUPIED;
		}
		if (e != RP_ERR_NOT_FOUND)
			return e;
	}
	s = NULL;
	json_array_foreach(macs, i, m)
	{
		s = STMT_ARGS(c,
		              "SELECT n.name FROM node_macs m JOIN nodes n ON n.id = m.node_id "
		              "WHERE m.mac = ? AND m.node_id != ?",
		              json_string_value(m), self);
		if ((e = store_one(c, s, "mac check")) == RP_ERR_OK) {
			*detail = json_pack("{s:s, s:s, s:s}", "field", "macs", "reason",
			                    "MAC address already belongs to another node", "mac",
			                    json_string_value(m));
			json_object_set_new(*detail, "node", json_string(sql_text(s, 0)));
			sql_reset(s);
			return RP_ERR_DUPLICATE;
		}
		if (e != RP_ERR_NOT_FOUND)
			return e;
	}
	return RP_ERR_OK;
}

/* Write the node row and its children. id == 0 inserts (the new id is returned through
 * *id). keep_password leaves the stored BMC password as it is. */
static enum rp_err
node_write(struct conn *c, int64_t *id, json_t *obj, int64_t rack_id, int64_t profile_id,
           int keep_password)
{
	enum rp_err e;
	struct stmt *s;
	json_t *v, *tags, *macs, *bmc = json_object_get(obj, "bmc");
	char uuid[RP_UUID_BUF], *expected = NULL, *options = NULL, *tags_text, *macs_text;
	int64_t now = rp_time_now_ms();
	int maint = json_is_true(json_object_get(obj, "maintenance"));
	size_t i;

	if (*id == 0) {
		if (rp_uuid_new(uuid) < 0)
			return RP_ERR_INTERNAL;
		s = STMT(c,
		         "INSERT INTO nodes(name, rack_id, u_position, u_height, serial, vendor, "
		         "model, node_class, bios_profile_id, maintenance, maintenance_reason, "
		         "expected, uuid, created_at, updated_at, system_uuid, ssh_address, "
		         "ssh_port, ssh_user, boot_profile_id, tags, macs, console_log) VALUES "
		         "(?1,?2,?3,coalesce(?4,1),?5,?6,"
		         "?7,?8,?9,?10,?11,?12,?13,?14,?14,?16,?17,?18,?19,"
		         "(SELECT id FROM boot_profiles WHERE name = ?20 OR uuid = "
		         "lower(?20)), ?21, ?22, ?23)");
	} else {
		s = STMT(c,
		         "UPDATE nodes SET name = ?1, rack_id = ?2, u_position = ?3, "
		         "u_height = coalesce(?4,1), serial = ?5, vendor = ?6, model = ?7, "
		         "node_class = ?8, bios_profile_id = ?9, maintenance = ?10, "
		         "maintenance_reason = ?11, expected = ?12, version = version + 1, "
		         "updated_at = ?14, system_uuid = ?16, ssh_address = ?17, ssh_port = ?18, "
		         "ssh_user = ?19, boot_profile_id = (SELECT id FROM boot_profiles WHERE "
		         "name = ?20 OR uuid = lower(?20)), tags = ?21, macs = ?22, console_log = "
		         "?23 WHERE id = ?15");
	}
	store_bind_str(s, 1, obj, "name");
	if (rack_id)
		sql_bind_int(s, 2, rack_id);
	store_bind_int(s, 3, obj, "u_position");
	store_bind_int(s, 4, obj, "u_height");
	store_bind_str(s, 5, obj, "serial");
	store_bind_str(s, 6, obj, "vendor");
	store_bind_str(s, 7, obj, "model");
	store_bind_str(s, 8, obj, "node_class");
	if (profile_id)
		sql_bind_int(s, 9, profile_id);
	sql_bind_int(s, 10, maint);
	/* Leaving maintenance clears its reason: a stale reason misleads the next reader. */
	if (maint)
		store_bind_str(s, 11, obj, "maintenance_reason");
	v = json_object_get(obj, "expected");
	if (json_is_object(v) && (expected = store_canon(v)) != NULL)
		sql_bind_text_own(s, 12, expected);
	if (*id == 0)
		sql_bind_text(s, 13, uuid);
	sql_bind_int(s, 14, now);
	if (*id != 0)
		sql_bind_int(s, 15, *id);
	store_bind_str(s, 16, obj, "system_uuid");
	store_bind_str(s, 17, json_object_get(obj, "ssh"), "address");
	store_bind_int(s, 18, json_object_get(obj, "ssh"), "port");
	store_bind_str(s, 19, json_object_get(obj, "ssh"), "user");
	store_bind_str(s, 20, obj, "boot_profile");
	store_bind_str(s, 23, obj, "console_log");
	/* The lists as the API shows them, in the form store_node_lists writes them. */
	if ((tags_text = store_set_text(tags = json_object_get(obj, "tags"))) == NULL ||
	    (macs_text = store_set_text(macs = json_object_get(obj, "macs"))) == NULL) {
		free(tags_text);
		sql_reset(s);
		return RP_ERR_INTERNAL;
	}
	sql_bind_text_own(s, 21, tags_text);
	sql_bind_text_own(s, 22, macs_text);
	if ((e = store_exec(c, s, "node write")) != RP_ERR_OK)
		return e;
	/* An update rewrites the name and the MACs: dnsmasq's hosts may change either way. */
	if (*id != 0 || json_array_size(macs) > 0)
		store_macs_changed(c);
	if (*id == 0) {
		*id = sql_last_id(c);
	} else {
		if ((e = EXEC(c, "tags clear", "DELETE FROM node_tags WHERE node_id = ?", *id)) !=
		    RP_ERR_OK)
			return e;
		if ((e = EXEC(c, "macs clear", "DELETE FROM node_macs WHERE node_id = ?", *id)) !=
		    RP_ERR_OK)
			return e;
	}
	json_array_foreach(tags, i, v)
	{
		if ((e = EXEC(c, "tag insert",
		              "INSERT INTO node_tags(node_id, tag) VALUES (?, ?) ON CONFLICT DO "
		              "NOTHING",
		              *id, json_string_value(v))) != RP_ERR_OK)
			return e;
	}
	json_array_foreach(macs, i, v)
	{
		if ((e = EXEC(c, "mac insert",
		              "INSERT INTO node_macs(mac, node_id) VALUES (?, ?) ON CONFLICT DO "
		              "NOTHING",
		              json_string_value(v), *id)) != RP_ERR_OK)
			return e;
	}
	if (json_is_object(bmc)) {
		/* A new address, driver or user makes the old health and identity meaningless. */
		char *sealed = NULL;
		enum rp_err se;

		if (!keep_password &&
		    (se = store_seal(c, json_string_value(json_object_get(bmc, "password")),
		                     &sealed)) != RP_ERR_OK)
			return se;
		s = STMT_ARGS(
		        c,
		        "INSERT INTO bmcs(node_id, driver, address, port, username, "
		        "password_sealed, "
		        "tls_verify, options) VALUES (?1,?2,?3,?4,?5,?6,coalesce(?7,1),?9) "
		        "ON CONFLICT(node_id) DO UPDATE SET driver = excluded.driver, "
		        "address = excluded.address, port = excluded.port, "
		        "username = excluded.username, password_sealed = CASE WHEN ?8 THEN "
		        "bmcs.password_sealed ELSE excluded.password_sealed END, password = NULL, "
		        "tls_verify = excluded.tls_verify, "
		        "options = excluded.options, "
		        "fault = CASE WHEN bmcs.driver IS NOT DISTINCT FROM excluded.driver AND "
		        "bmcs.address IS NOT DISTINCT FROM "
		        "excluded.address AND bmcs.port IS NOT DISTINCT FROM excluded.port AND "
		        "bmcs.username IS NOT DISTINCT FROM "
		        "excluded.username AND ?8 THEN bmcs.fault END, "
		        "fault_since = CASE WHEN bmcs.driver IS NOT DISTINCT FROM excluded.driver "
		        "AND bmcs.address "
		        "IS NOT DISTINCT FROM "
		        "excluded.address AND bmcs.port IS NOT DISTINCT FROM excluded.port AND "
		        "bmcs.username IS NOT DISTINCT FROM "
		        "excluded.username AND ?8 THEN bmcs.fault_since END, "
		        "failures = CASE WHEN bmcs.driver IS NOT DISTINCT FROM excluded.driver AND "
		        "bmcs.address IS NOT DISTINCT FROM "
		        "excluded.address AND bmcs.port IS NOT DISTINCT FROM excluded.port AND "
		        "bmcs.username IS NOT DISTINCT FROM "
		        "excluded.username AND ?8 THEN bmcs.failures ELSE 0 END, "
		        "last_error = CASE WHEN bmcs.driver IS NOT DISTINCT FROM excluded.driver "
		        "AND bmcs.address IS NOT DISTINCT FROM "
		        "excluded.address AND bmcs.port IS NOT DISTINCT FROM excluded.port AND "
		        "bmcs.username IS NOT DISTINCT FROM "
		        "excluded.username AND ?8 THEN bmcs.last_error END, "
		        "checked_at = CASE WHEN bmcs.driver IS NOT DISTINCT FROM excluded.driver "
		        "AND bmcs.address IS NOT DISTINCT FROM "
		        "excluded.address AND bmcs.port IS NOT DISTINCT FROM excluded.port AND "
		        "bmcs.username IS NOT DISTINCT FROM "
		        "excluded.username AND ?8 THEN bmcs.checked_at END, "
		        "identity = CASE WHEN bmcs.address IS NOT DISTINCT FROM excluded.address "
		        "AND bmcs.port IS NOT DISTINCT FROM "
		        "excluded.port THEN bmcs.identity END",
		        *id);
		store_bind_str(s, 2, bmc, "driver");
		store_bind_str(s, 3, bmc, "address");
		store_bind_int(s, 4, bmc, "port");
		store_bind_str(s, 5, bmc, "username");
		if (sealed)
			sql_bind_text_own(s, 6, sealed);
		store_bind_int(s, 7, bmc, "tls_verify");
		sql_bind_int(s, 8, keep_password);
		if (json_is_object(json_object_get(bmc, "options")) &&
		    (options = store_canon(json_object_get(bmc, "options"))) != NULL)
			sql_bind_text_own(s, 9, options);
	} else {
		s = STMT_ARGS(c, "DELETE FROM bmcs WHERE node_id = ?", *id);
	}
	return store_exec(c, s, "bmc write");
}

enum rp_err
store_node_lists(struct conn *c, int64_t id)
{
	return EXEC(c, "node lists",
	            "UPDATE nodes SET tags = (SELECT json_group_array(tag) FROM (SELECT tag FROM "
	            "node_tags WHERE node_id = ?1 ORDER BY tag) AS t), macs = (SELECT "
	            "json_group_array(mac) FROM (SELECT mac FROM node_macs WHERE node_id = ?1 "
	            "ORDER BY mac) AS m) WHERE id = ?1",
	            id);
}

/* Insert one node and its creation event inside the caller's transaction (import uses it).
 * The event's detail is written from the new row as text (store_created_text): reading the
 * node back as a tree, diffing it against nothing and printing the diff was half an
 * import's time. */
enum rp_err
store_node_insert(struct conn *c, json_t *in, const char *actor, int64_t *id, json_t **detail)
{
	struct stmt *s;
	struct rp_buf text;
	int64_t rack_id, profile_id, newid = 0;
	enum rp_err e;
	char summary[192];
	const char *name, *rack, *uuid;
	int cu, members;

	rp_buf_init(&text, 0);
	e = node_check(c, -1, in, &rack_id, &profile_id, detail);
	if (e != RP_ERR_OK)
		goto out;
	e = node_write(c, &newid, in, rack_id, profile_id, 0);
	if (e != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c, NODE_COLS "WHERE n.id = ?", newid);
	if ((e = store_one(c, s, "node load")) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			e = RP_ERR_INTERNAL;
		goto out;
	}
	members = store_created_text(c, s, diff_skip, &text);
	name = sql_text(s, store_col(c, s, "name"));
	rack = sql_text(s, store_col(c, s, "rack"));
	uuid = sql_text(s, store_col(c, s, "id"));
	cu = store_col(c, s, "u_position");
	if (rack && sql_type(s, cu) == SQL_INT)
		snprintf(summary, sizeof summary, "node %s created in rack %s at U%lld", name, rack,
		         (long long)sql_int(s, cu));
	else
		snprintf(summary, sizeof summary, "node %s created", name);
	if (text.oom) {
		sql_reset(s);
		e = RP_ERR_INTERNAL;
		goto out;
	}
	/* uuid and name stay valid until the reset, after the event is written. */
	e = store_event_text(c, actor, "node.created", "node", uuid, name, newid, rack_id, summary,
	                     members > 0 ? text.data : NULL);
	sql_reset(s);
	if (e != RP_ERR_OK)
		goto out;
	*id = newid;
out:
	rp_buf_free(&text);
	return e;
}

enum rp_err
rp_store_node_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                     json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *obj = NULL;
	enum rp_err e;
	int64_t id;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_insert(c, in, actor, &id, detail)) != RP_ERR_OK ||
	    (e = store_rotate_on_enroll(c, id, 0, actor, NULL)) != RP_ERR_OK)
		goto out;
	e = store_res_load(c, &node_res, id, &obj);
out:
	return store_end(c, e, obj, out);
}

enum rp_err
rp_store_node_get(struct rp_store *st, const char *key, json_t **out)
{
	return store_res_get(st, &node_res, key, out);
}

#define NODE_FILTER                                                                                \
	"AND (CAST(?2 AS BIGINT) IS NULL OR n.rack_id = ?2) AND (?3 IS NULL OR n.provision_state " \
	"= ?3) "                                                                                   \
	"AND (?4 IS NULL OR EXISTS (SELECT 1 FROM node_tags t WHERE t.node_id = n.id AND "         \
	"t.tag = ?4)) AND (?5 IS NULL OR n.node_class = ?5) AND (?6 IS NULL OR "                   \
	"n.power_state = ?6) AND (CAST(?7 AS BIGINT) IS NULL OR n.maintenance = ?7) AND (?8 IS "   \
	"NULL OR "                                                                                 \
	"instr(n.name, ?8) > 0 OR instr(coalesce(n.serial, ''), ?8) > 0) "

enum rp_err
rp_store_node_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *f = rq->filter;
	const char *rack = json_string_value(json_object_get(f, "rack"));
	const char *maint = json_string_value(json_object_get(f, "maintenance"));
	int64_t rack_id = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (rack && (e = store_id_of(c, T_RACK, rack, &rack_id)) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_BAD_QUERY : e;
	if (rq->sort_by_name) {
		s = STMT_ARGS(c,
		              NODE_COLS "WHERE (?1 IS NULL OR n.name > ?1) " NODE_FILTER
		                        "ORDER BY n.name LIMIT ?9",
		              rq->after_key);
	} else {
		s = STMT_ARGS(c, NODE_COLS "WHERE n.id > ?1 " NODE_FILTER "ORDER BY n.id LIMIT ?9",
		              rq->after_id);
	}
	if (rack_id)
		sql_bind_int(s, 2, rack_id);
	store_bind_str(s, 3, f, "state");
	store_bind_str(s, 4, f, "tag");
	store_bind_str(s, 5, f, "class");
	store_bind_str(s, 6, f, "power");
	if (maint)
		sql_bind_int(s, 7, strcmp(maint, "true") == 0);
	store_bind_str(s, 8, f, "q");
	sql_bind_int(s, 9, rq->limit + 1);
	return store_page(c, s, rq, "name", out);
}

enum rp_err
rp_store_node_update(struct rp_store *st, const char *key, json_t *patch, int64_t if_match,
                     const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *before = NULL, *after = NULL, *fresh = NULL, *diff = NULL;
	json_t *pbmc = json_object_get(patch, "bmc");
	int64_t id, rack_id, profile_id;
	const char *const *k;
	enum rp_err e;
	int keep_pw;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_res_current(c, &node_res, key, if_match, &id, &before, detail)) != RP_ERR_OK)
		goto out;
	after = json_deep_copy(before);
	for (k = computed; *k; k++)
		json_object_del(after, *k);
	/* Drop what the node shows about its BMC but nobody writes. */
	if (json_is_object(json_object_get(after, "bmc"))) {
		json_t *b = json_object_get(after, "bmc");

		json_object_del(b, "password_set");
		json_object_del(b, "fault");
		json_object_del(b, "identity");
		json_object_del(b, "checked_at");
		json_object_del(b, "last_error");
	}
	json_object_del(json_object_get(after, "ssh"), "host_key");
	store_merge(after, patch);
	/* Options belong to a driver: a new driver has exactly the options sent with it (none
	 * when none were), never leftovers of the old one that it would refuse at its first job. */
	if (json_is_object(pbmc) && json_is_string(json_object_get(pbmc, "driver")) &&
	    !json_equal(json_object_get(pbmc, "driver"),
	                json_object_get(json_object_get(before, "bmc"), "driver"))) {
		json_t *want = json_object_get(pbmc, "options"), *ov;
		const char *ok;

		json_object_del(json_object_get(after, "bmc"), "options");
		if (json_is_object(want)) {
			json_t *opts = json_object();

			json_object_foreach(want, ok, ov)
			{
				if (!json_is_null(ov))
					json_object_set(opts, ok, ov);
			}
			json_object_set_new(json_object_get(after, "bmc"), "options", opts);
		}
	}
	keep_pw = !(json_is_null(pbmc) ||
	            (json_is_object(pbmc) && json_object_get(pbmc, "password")));
	if ((e = node_check(c, id, after, &rack_id, &profile_id, detail)) != RP_ERR_OK)
		goto out;
	/* A profile assigned to a node whose BMC published a registry must fit it, as at the
	 * profile's creation; an unrelated change never trips over an older assignment. */
	if (profile_id && json_is_string(json_object_get(patch, "bios_profile")) &&
	    (e = store_bios_node_check(c, id, profile_id, detail)) != RP_ERR_OK)
		goto out;
	if ((e = node_write(c, &id, after, rack_id, profile_id, keep_pw)) != RP_ERR_OK)
		goto out;
	if ((e = store_res_load(c, &node_res, id, &fresh)) != RP_ERR_OK)
		goto out;
	diff = store_diff(before, fresh, diff_skip);
	/* The password never appears in events, only the fact that it changed. */
	if (!keep_pw && json_is_object(pbmc)) {
		if (diff == NULL)
			diff = json_object();
		json_object_set_new(diff, "bmc.password", json_string("changed"));
	}
	e = store_res_event(c, &node_res, "updated", fresh, id, rack_id, diff, actor);
out:
	json_decref(before);
	json_decref(after);
	json_decref(diff);
	return store_end(c, e, fresh, out);
}

enum rp_err
rp_store_node_delete(struct rp_store *st, const char *key, int64_t if_match, const char *actor,
                     json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *before = NULL;
	struct stmt *s;
	int64_t id, rack_id = 0;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_res_current(c, &node_res, key, if_match, &id, &before, detail)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(
	        c, "SELECT count(*) FROM jobs WHERE node_id = ? AND state IN ('queued', 'running')",
	        id);
	/* A count: always a row. */
	if ((e = store_one(c, s, "node jobs")) != RP_ERR_OK)
		goto out;
	if (sql_int(s, 0) > 0) {
		*detail = store_why(NULL, "node has %lld unfinished job(s); cancel them or wait",
		                    (long long)sql_int(s, 0));
		sql_reset(s);
		e = RP_ERR_IN_USE;
		goto out;
	}
	sql_reset(s);
	s = STMT_ARGS(c, "DELETE FROM nodes WHERE id = ? RETURNING rack_id", id);
	/* RETURNING: a row for the node deleted (found above), then the statement's end. */
	if ((e = store_one(c, s, "node delete")) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			e = RP_ERR_INTERNAL;
		goto out;
	}
	rack_id = sql_int(s, 0);
	if ((e = store_exec(c, s, "node delete")) != RP_ERR_OK)
		goto out;
	store_macs_changed(c); /* its MACs went with it */
	e = store_res_event(c, &node_res, "deleted", before, id, rack_id, NULL, actor);
out:
	json_decref(before);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_node_inventory(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_id_of(c, T_NODE, key, &id)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(
	        c,
	        "SELECT n.name AS node, i.source, i.collected_at AS \"collected_at:time\", "
	        "i.data AS \"data:json\" FROM nodes n LEFT JOIN inventory i ON i.node_id = n.id "
	        "WHERE n.id = ?",
	        id);
	return store_one_row(c, s, "inventory", out);
}

enum rp_err
store_inventory_write(struct conn *c, const struct node_ref *n, const char *source, json_t *data,
                      const char *actor)
{
	enum rp_err e;
	struct stmt *s;
	char *text = store_canon(data), summary[160];
	json_t *gpus = json_object_get(json_object_get(data, "pci"), "gpu_count");
	json_t *mem = json_object_get(json_object_get(data, "memory"), "total_bytes");

	if (text == NULL)
		return RP_ERR_INTERNAL;
	/* The summary columns feed filters and acceptance; the whole report stays as sent. */
	s = STMT_ARGS(
	        c,
	        "INSERT INTO inventory(node_id, data, source, collected_at, gpu_count, mem_bytes) "
	        "VALUES (?,?,?,?,?,?) ON CONFLICT(node_id) DO UPDATE SET data = excluded.data, "
	        "source = excluded.source, collected_at = excluded.collected_at, "
	        "gpu_count = excluded.gpu_count, mem_bytes = excluded.mem_bytes",
	        n->id);
	sql_bind_text_own(s, 2, text);
	sql_bind_text(s, 3, source);
	sql_bind_int(s, 4, rp_time_now_ms());
	if (json_is_integer(gpus))
		sql_bind_int(s, 5, json_integer_value(gpus));
	if (json_is_integer(mem))
		sql_bind_int(s, 6, json_integer_value(mem));
	if ((e = store_exec(c, s, "inventory set")) != RP_ERR_OK)
		return e;
	/* Firmware versions the host sees (DMI BIOS, VBIOS, HCA) join the Redfish ones. */
	{
		e = store_firmware_from_inventory(c, n, data);

		if (e != RP_ERR_OK)
			return e;
	}
	snprintf(summary, sizeof summary, "inventory of %s reported by %s", n->name, source);
	return store_event(c, actor, "node.inventory", "node", n->uuid, n->name, n->id, n->rack_id,
	                   summary, NULL);
}

enum rp_err
rp_store_node_inventory_set(struct rp_store *st, const char *key, const char *source, json_t *data,
                            const char *actor)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	e = store_inventory_write(c, &n, source, data, actor);
	return store_end(c, e, NULL, NULL);
}
