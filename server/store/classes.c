/* Node classes' bills of materials and the cabling plan: what rack acceptance compares with. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define CLASS_COLS                                                                                 \
	"SELECT c.id AS _id, c.name, c.description, c.bom AS \"bom:json\", c.max_power_w, "        \
	"c.idle_power_w, c.bmc_credentials AS \"bmc_credentials:json\", c.deploy_defaults AS "     \
	"\"deploy_defaults:json\", c.deploy_user_data_sealed IS NOT NULL AS "                      \
	"\"deploy_user_data:bool\", (SELECT count(*) "                                             \
	"FROM nodes WHERE node_class = c.name) AS node_count, c.version, c.created_at AS "         \
	"\"created_at:time\", c.updated_at AS \"updated_at:time\" FROM node_classes c "

enum rp_err
store_class_put(struct conn *c, json_t *in, const char *actor, int *created)
{
	const char *name = json_string_value(json_object_get(in, "name"));
	json_t *empty = json_object_get(in, "bom") ? NULL : json_object();
	char *bom = json_dumps(empty ? empty : json_object_get(in, "bom"),
	                       JSON_COMPACT | JSON_SORT_KEYS);
	struct stmt *s;
	int64_t now = rp_time_now_ms();
	char summary[200];
	enum rp_err e = RP_ERR_INTERNAL;

	if (bom == NULL)
		goto out;
	s = STMT_ARGS(c, "SELECT 1 FROM node_classes WHERE name = ?", name);
	if ((e = store_one(c, s, "class")) == RP_ERR_OK)
		sql_reset(s);
	else if (e != RP_ERR_NOT_FOUND)
		goto out;
	*created = e == RP_ERR_NOT_FOUND;
	s = STMT_ARGS(
	        c,
	        "INSERT INTO node_classes(name, description, bom, created_at, updated_at, "
	        "max_power_w, idle_power_w, bmc_credentials, deploy_defaults, "
	        "deploy_user_data_sealed) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8, ?9) ON "
	        "CONFLICT(name) DO UPDATE SET description = ?2, bom = ?3, version = "
	        "node_classes.version + 1, updated_at = ?4, max_power_w = ?5, idle_power_w = ?6, "
	        "bmc_credentials = ?7, deploy_defaults = ?8, deploy_user_data_sealed = ?9",
	        name);
	store_bind_str(s, 2, in, "description");
	sql_bind_text(s, 3, bom);
	sql_bind_int(s, 4, now);
	store_bind_int(s, 5, in, "max_power_w");
	store_bind_int(s, 6, in, "idle_power_w");
	if (json_is_object(json_object_get(in, "bmc_credentials"))) {
		char *cred = json_dumps(json_object_get(in, "bmc_credentials"),
		                        JSON_COMPACT | JSON_SORT_KEYS);

		if (cred == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_text_own(s, 7, cred);
	}
	if (json_is_object(json_object_get(in, "deploy_defaults"))) {
		/* The user data is sealed apart (it may hold secrets); the rest is plain. */
		json_t *dd = json_deep_copy(json_object_get(in, "deploy_defaults"));
		const char *ud = json_string_value(json_object_get(dd, "user_data"));
		char *text = NULL, *sealed = NULL;

		if (dd == NULL || (e = store_seal(c, ud, &sealed)) != RP_ERR_OK) {
			json_decref(dd);
			e = RP_ERR_INTERNAL;
			goto out;
		}
		json_object_del(dd, "user_data");
		text = json_dumps(dd, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(dd);
		if (text == NULL) {
			free(sealed);
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_text_own(s, 8, text);
		if (sealed)
			sql_bind_text_own(s, 9, sealed);
	}
	if ((e = store_exec(c, s, "class put")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "node class %s %s", name,
	         *created ? "created" : "updated");
	e = store_event(c, actor, *created ? "node_class.created" : "node_class.updated",
	                "node_class", NULL, name, 0, 0, summary, json_object_get(in, "bom"));
out:
	json_decref(empty);
	free(bom);
	return e;
}

enum rp_err
rp_store_class_put(struct rp_store *st, json_t *in, const char *actor, json_t **out, int *created)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	enum rp_err e;
	int made = 0;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_class_put(c, in, actor, &made)) == RP_ERR_OK &&
	    (e = store_commit(c)) == RP_ERR_OK) {
		store_rollback(c);
		*created = made;
		return rp_store_class_get(st, json_string_value(json_object_get(in, "name")), out);
	}
	store_rollback(c);
	return e;
}

enum rp_err
rp_store_class_get(struct rp_store *st, const char *name, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return store_one_row(c, STMT_ARGS(c, CLASS_COLS "WHERE c.name = ?", name), "class get",
	                     out);
}

enum rp_err
rp_store_class_deploy_defaults(struct rp_store *st, const char *name, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT deploy_defaults, deploy_user_data_sealed FROM "
	                           "node_classes WHERE name = ?",
	                           name);
	json_t *dd = NULL, *ud = NULL;
	enum rp_err e;

	if ((e = store_one(c, s, "class deploy defaults")) != RP_ERR_OK)
		return e;
	if (sql_type(s, 0) != SQL_NULL)
		dd = json_loads(sql_text(s, 0), 0, NULL);
	if (sql_type(s, 1) != SQL_NULL &&
	    (ud = store_unseal(c, sql_text(s, 1), "node class deploy user data")) == NULL) {
		sql_reset(s);
		json_decref(dd);
		return RP_ERR_INTERNAL;
	}
	sql_reset(s);
	if (dd == NULL && ud == NULL) {
		*out = NULL;
		return RP_ERR_OK;
	}
	if (dd == NULL)
		dd = json_object();
	if (ud)
		json_object_set_new(dd, "user_data", ud);
	*out = dd;
	return RP_ERR_OK;
}

enum rp_err
rp_store_class_list(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *items = store_rows(c, STMT(c, CLASS_COLS "ORDER BY c.name LIMIT 10000"));

	if (items == NULL)
		return RP_ERR_INTERNAL;
	*out = json_pack("{s:o}", "items", items);
	return RP_ERR_OK;
}

enum rp_err
rp_store_class_delete(struct rp_store *st, const char *name, const char *actor)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	char summary[200];
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c, "DELETE FROM node_classes WHERE name = ?", name);
	if ((e = store_exec(c, s, "class delete")) != RP_ERR_OK)
		goto out;
	if (sql_changes(c) == 0) {
		e = RP_ERR_NOT_FOUND;
		goto out;
	}
	snprintf(summary, sizeof summary, "node class %s deleted", name);
	e = store_event(c, actor, "node_class.deleted", "node_class", NULL, name, 0, 0, summary,
	                NULL);
out:
	return store_end(c, e, NULL, NULL);
}

/* ---- Cabling --------------------------------------------------------------------------- */

enum rp_err
store_cable_insert(struct conn *c, json_t *entry, int64_t rack_id, json_t **detail)
{
	const char *node = json_string_value(json_object_get(entry, "node"));
	struct node_ref n;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_node_ref(c, node, &n)) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND) {
			*detail = store_why("node", "no node named '%s'", node);
			e = RP_ERR_INVALID_FIELD;
		}
		return e;
	}
	if (rack_id && n.rack_id != rack_id) {
		*detail = store_why("node", "node %s is not in this rack", n.name);
		return RP_ERR_INVALID_FIELD;
	}
	s = STMT_ARGS(c,
	              "INSERT INTO cabling(node_id, interface, port_guid, switch, port) VALUES "
	              "(?, ?, ?, ?, ?)",
	              n.id);
	store_bind_str(s, 2, entry, "interface");
	store_bind_str(s, 3, entry, "port_guid");
	store_bind_str(s, 4, entry, "switch");
	store_bind_str(s, 5, entry, "port");
	if ((e = store_exec(c, s, "cable insert")) == RP_ERR_CONFLICT) {
		*detail = store_why(json_object_get(entry, "interface") ? "interface" : "port_guid",
		                    "node %s's port is planned twice", n.name);
		return RP_ERR_DUPLICATE;
	}
	return e;
}

#define CABLE_COLS                                                                                 \
	"SELECT n.name AS node, k.interface, k.port_guid, k.switch, k.port FROM cabling k "        \
	"JOIN nodes n ON n.id = k.node_id "

enum rp_err
store_cabling_of_node(struct conn *c, int64_t node_id, json_t **out)
{
	struct stmt *s = STMT_ARGS(c, CABLE_COLS "WHERE k.node_id = ? ORDER BY k.id", node_id);
	json_t *items;

	if ((items = store_rows(c, s)) == NULL)
		return RP_ERR_INTERNAL;
	*out = items;
	return RP_ERR_OK;
}

enum rp_err
rp_store_cabling_get(struct rp_store *st, const char *rack, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *items;
	int64_t rid;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_id_of(c, T_RACK, rack, &rid)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c, CABLE_COLS "WHERE n.rack_id = ? ORDER BY n.name, k.id", rid);
	if ((items = store_rows(c, s)) == NULL)
		return RP_ERR_INTERNAL;
	*out = json_pack("{s:s, s:o}", "rack", rack, "entries", items);
	return RP_ERR_OK;
}

enum rp_err
rp_store_cabling_put(struct rp_store *st, const char *rack, json_t *entries, const char *actor,
                     json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *en, *why = NULL;
	int64_t rid;
	char summary[200];
	enum rp_err e;
	size_t i;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, rack, &rid)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(
	        c, "DELETE FROM cabling WHERE node_id IN (SELECT id FROM nodes WHERE rack_id = ?)",
	        rid);
	if ((e = store_exec(c, s, "cabling clear")) != RP_ERR_OK)
		goto out;
	json_array_foreach(entries, i, en)
	{
		if ((e = store_cable_insert(c, en, rid, &why)) != RP_ERR_OK) {
			if (why) {
				char field[64];

				snprintf(field, sizeof field, "entries[%zu].%s", i,
				         json_string_value(json_object_get(why, "field")) ?: "");
				json_object_set_new(why, "field", json_string(field));
				*detail = why;
			}
			goto out;
		}
	}
	snprintf(summary, sizeof summary, "cabling plan of rack %s: %zu entries", rack,
	         json_array_size(entries));
	e = store_event(c, actor, "rack.cabling_set", "rack", NULL, rack, 0, rid, summary, NULL);
out:
	return store_end(c, e, NULL, NULL);
}
