/* Racks: CRUD and elevation. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define RACK_COLS                                                                                  \
	"SELECT r.id AS _id, r.uuid AS id, r.name, r.site, r.row_name AS row, r.height_u, "        \
	"r.power_budget_kw, r.power_limit_pct, r.power_cap, r.notes, (SELECT count(*) FROM nodes " \
	"WHERE "                                                                                   \
	"rack_id = r.id) "                                                                         \
	"AS node_count, r.version, r.created_at AS \"created_at:time\", "                          \
	"r.updated_at AS \"updated_at:time\" FROM racks r "

static enum rp_err
name_free(struct conn *c, const char *name, int64_t self, json_t **detail)
{
	int64_t other;
	enum rp_err e = store_id_of(c, T_RACK, name, &other);

	if (e == RP_ERR_NOT_FOUND || (e == RP_ERR_OK && other == self))
		return RP_ERR_OK;
	if (e == RP_ERR_OK) {
		*detail = store_why("name", "a rack named '%s' already exists", name);
		return RP_ERR_DUPLICATE;
	}
	return e;
}

/* Insert (*id == 0) or rewrite a rack from a whole object: a unique name, and no node above
 * a lowered height. */
static enum rp_err
rack_save(struct conn *c, struct store_res *r, int64_t *id, json_t *obj, json_t **detail)
{
	struct stmt *s;
	char uuid[RP_UUID_BUF];
	int64_t now = rp_time_now_ms();
	enum rp_err e;

	(void)r;
	if ((e = name_free(c, json_string_value(json_object_get(obj, "name")), *id ? *id : -1,
	                   detail)) != RP_ERR_OK)
		return e;
	if (*id == 0) {
		if (rp_uuid_new(uuid) < 0)
			return RP_ERR_INTERNAL;
		s = STMT(
		        c,
		        "INSERT INTO racks(uuid, name, site, row_name, height_u, "
		        "power_budget_kw, notes, created_at, updated_at, power_limit_pct, "
		        "power_cap) VALUES (?9,?1,?2,?3,coalesce(?4, 42),?5,?6,?7,?7,coalesce(?10, "
		        "80),coalesce(?11, 'off'))");
		sql_bind_text(s, 9, uuid);
	} else {
		s = STMT_ARGS(c,
		              "SELECT name, u_position + u_height - 1 AS top FROM nodes WHERE "
		              "rack_id = ? AND u_position IS NOT NULL ORDER BY top DESC LIMIT 1",
		              *id);
		e = store_one(c, s, "rack top");
		if (e == RP_ERR_OK &&
		    sql_int(s, 1) > json_integer_value(json_object_get(obj, "height_u"))) {
			*detail = store_why("height_u",
			                    "node %s occupies U%lld, above the new height",
			                    sql_text(s, 0), (long long)sql_int(s, 1));
			sql_reset(s);
			return RP_ERR_CONFLICT;
		}
		if (e == RP_ERR_OK)
			sql_reset(s);
		else if (e != RP_ERR_NOT_FOUND)
			return e;
		s = STMT(c, "UPDATE racks SET name = ?1, site = ?2, row_name = ?3, height_u = ?4, "
		            "power_budget_kw = ?5, notes = ?6, version = version + 1, "
		            "updated_at = ?7, power_limit_pct = coalesce(?10, 80), "
		            "power_cap = coalesce(?11, 'off') WHERE id = ?8");
		sql_bind_int(s, 8, *id);
	}
	store_bind_str(s, 1, obj, "name");
	store_bind_str(s, 2, obj, "site");
	store_bind_str(s, 3, obj, "row");
	store_bind_int(s, 4, obj, "height_u");
	store_bind_real(s, 5, obj, "power_budget_kw");
	store_bind_str(s, 6, obj, "notes");
	sql_bind_int(s, 7, now);
	store_bind_int(s, 10, obj, "power_limit_pct");
	store_bind_str(s, 11, obj, "power_cap");
	if ((e = store_exec(c, s, "rack write")) != RP_ERR_OK)
		return e;
	if (*id == 0)
		*id = sql_last_id(c);
	return RP_ERR_OK;
}

/* A patch that removes the height leaves the default one. */
static void
rack_apply(json_t *after, json_t *patch)
{
	store_merge(after, patch);
	if (json_object_get(after, "height_u") == NULL)
		json_object_set_new(after, "height_u", json_integer(42));
	if (json_object_get(after, "power_limit_pct") == NULL)
		json_object_set_new(after, "power_limit_pct", json_integer(80));
	if (json_object_get(after, "power_cap") == NULL)
		json_object_set_new(after, "power_cap", json_string("off"));
}

static enum rp_err
rack_empty(struct conn *c, struct store_res *r, int64_t id, json_t *before, json_t **detail)
{
	int64_t count = json_integer_value(json_object_get(before, "node_count"));

	(void)c, (void)r, (void)id;
	if (count == 0)
		return RP_ERR_OK;
	*detail = store_why(NULL, "rack holds %lld node(s); move or delete them first",
	                    (long long)count);
	return RP_ERR_IN_USE;
}

static const char *const rack_diff_skip[] = {"version", "updated_at", "node_count", NULL};

static struct store_res rack_res = {
        .table = T_RACK,
        .otype = "rack",
        .rack_events = 1,
        .diff_skip = rack_diff_skip,
        .sql_load = RACK_COLS "WHERE r.id = ?",
        .sql_delete = "DELETE FROM racks WHERE id = ?",
        .sql_list_id = RACK_COLS "WHERE r.id > ?1 AND (?2 IS NULL OR r.site = ?2) "
                                 "AND (?3 IS NULL OR r.row_name = ?3) ORDER BY r.id LIMIT ?4",
        .sql_list_name = RACK_COLS "WHERE (?1 IS NULL OR r.name > ?1) AND (?2 IS NULL OR "
                                   "r.site = ?2) AND (?3 IS NULL OR r.row_name = ?3) ORDER BY "
                                   "r.name LIMIT ?4",
        .list_filters = {"site", "row"},
        .save = rack_save,
        .apply = rack_apply,
        .may_delete = rack_empty,
};

enum rp_err
store_rack_insert(struct conn *c, json_t *in, const char *actor, int64_t *id, json_t **detail)
{
	return store_res_insert(c, &rack_res, in, actor, id, NULL, detail);
}

STORE_RES_CALLS(rack, &rack_res)

enum rp_err
rp_store_rack_elevation(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *rack = NULL, *nodes = NULL, *slots = NULL, *unplaced = NULL, *placed = NULL;
	struct stmt *s;
	enum rp_err e;
	int64_t id, height, u;
	size_t i;
	json_t *n;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	/* One read transaction so rack and nodes come from the same snapshot. */
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = store_res_load(c, &rack_res, id, &rack)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c,
	              "SELECT n.id AS _id, n.uuid AS id, n.name, n.u_position, n.u_height, "
	              "n.node_class, n.provision_state, n.power_state, "
	              "n.maintenance AS \"maintenance:bool\" "
	              "FROM nodes n WHERE n.rack_id = ? ORDER BY n.u_position DESC, n.name",
	              id);
	nodes = store_rows(c, s);
	if (nodes == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	height = json_integer_value(json_object_get(rack, "height_u"));
	slots = json_array();
	unplaced = json_array();
	placed = json_array();
	for (u = height; u >= 1; u--)
		json_array_append_new(slots, json_pack("{s:I, s:n}", "u", (json_int_t)u, "node"));
	json_array_foreach(nodes, i, n)
	{
		json_t *pos = json_object_get(n, "u_position");
		int64_t lo, hi;

		if (!json_is_integer(pos)) {
			json_array_append(unplaced, n);
			continue;
		}
		json_array_append(placed, n);
		lo = json_integer_value(pos);
		hi = lo + json_integer_value(json_object_get(n, "u_height")) - 1;
		for (u = lo; u <= hi && u <= height; u++)
			json_object_set(json_array_get(slots, (size_t)(height - u)), "node",
			                json_object_get(n, "name"));
	}
	*out = json_pack("{s:O, s:O, s:I, s:o, s:o, s:o}", "rack", json_object_get(rack, "name"),
	                 "rack_id", json_object_get(rack, "id"), "height_u", (json_int_t)height,
	                 "slots", slots, "nodes", placed, "unplaced", unplaced);
	slots = placed = unplaced = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(rack);
	json_decref(nodes);
	json_decref(slots);
	json_decref(unplaced);
	json_decref(placed);
	return e;
}
