/* Racks: CRUD and elevation. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define RACK_COLS                                                                                  \
	"SELECT r.id AS _id, r.uuid AS id, r.name, r.site, r.row_name AS row, r.height_u, "        \
	"r.power_budget_kw, r.notes, (SELECT count(*) FROM nodes WHERE rack_id = r.id) "           \
	"AS node_count, r.version, r.created_at AS \"created_at:time\", "                          \
	"r.updated_at AS \"updated_at:time\" FROM racks r "

static const char *const rack_diff_skip[] = {"version", "updated_at", "node_count", NULL};

static enum rp_err
rack_load(struct conn *c, int64_t id, json_t **out)
{
	enum rp_err e;
	struct stmt *s = STMT(c, RACK_COLS "WHERE r.id = ?");

	sql_bind_int(s, 1, id);
	if ((e = store_one(c, s, "rack load")) != RP_ERR_OK)
		return e;
	*out = store_row(c, s);
	sql_reset(s);
	return RP_ERR_OK;
}

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

enum rp_err
store_rack_insert(struct conn *c, json_t *in, const char *actor, int64_t *id, json_t **detail)
{
	struct stmt *s;
	char uuid[RP_UUID_BUF], summary[160];
	const char *name = json_string_value(json_object_get(in, "name"));
	int64_t now = rp_time_now_ms(), newid;
	enum rp_err e;

	e = name_free(c, name, -1, detail);
	if (e != RP_ERR_OK)
		return e;
	if (rp_uuid_new(uuid) < 0)
		return RP_ERR_INTERNAL;
	s = STMT(c, "INSERT INTO racks(uuid, name, site, row_name, height_u, power_budget_kw, "
	            "notes, created_at, updated_at) VALUES (?,?,?,?,coalesce(?, 42),?,?,?,?)");
	sql_bind_text(s, 1, uuid);
	store_bind_str(s, 2, in, "name");
	store_bind_str(s, 3, in, "site");
	store_bind_str(s, 4, in, "row");
	store_bind_int(s, 5, in, "height_u");
	store_bind_real(s, 6, in, "power_budget_kw");
	store_bind_str(s, 7, in, "notes");
	sql_bind_int(s, 8, now);
	sql_bind_int(s, 9, now);
	if ((e = store_exec(c, s, "rack insert")) != RP_ERR_OK)
		return e;
	newid = sql_last_id(c);
	snprintf(summary, sizeof summary, "rack %s created", name);
	e = store_event(c, actor, "rack.created", "rack", uuid, name, 0, newid, summary, NULL);
	if (e != RP_ERR_OK)
		return e;
	*id = newid;
	return RP_ERR_OK;
}

enum rp_err
rp_store_rack_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                     json_t **detail)
{
	struct conn *c = store_conn(st);
	enum rp_err e;
	int64_t id;
	json_t *obj = NULL;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	e = store_rack_insert(c, in, actor, &id, detail);
	if (e != RP_ERR_OK)
		goto out;
	e = rack_load(c, id, &obj);
	if (e != RP_ERR_OK)
		goto out;
	e = store_commit(c);
	if (e != RP_ERR_OK)
		goto out;
	*out = obj;
	obj = NULL;
out:
	store_rollback(c);
	json_decref(obj);
	return e;
}

enum rp_err
rp_store_rack_get(struct rp_store *st, const char *key, json_t **out)
{
	struct conn *c = store_conn(st);
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	e = store_id_of(c, T_RACK, key, &id);
	if (e != RP_ERR_OK)
		return e;
	return rack_load(c, id, out);
}

enum rp_err
rp_store_rack_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	struct conn *c = store_conn(st);
	struct stmt *s;
	const char *site = json_string_value(json_object_get(rq->filter, "site"));
	const char *row = json_string_value(json_object_get(rq->filter, "row"));

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if (rq->sort_by_name) {
		s = STMT(c, RACK_COLS
		         "WHERE (?1 IS NULL OR r.name > ?1) AND (?2 IS NULL OR r.site = ?2) "
		         "AND (?3 IS NULL OR r.row_name = ?3) ORDER BY r.name LIMIT ?4");
		sql_bind_text(s, 1, rq->after_key);
	} else {
		s = STMT(c, RACK_COLS "WHERE r.id > ?1 AND (?2 IS NULL OR r.site = ?2) "
		                      "AND (?3 IS NULL OR r.row_name = ?3) ORDER BY r.id LIMIT ?4");
		sql_bind_int(s, 1, rq->after_id);
	}
	sql_bind_text(s, 2, site);
	sql_bind_text(s, 3, row);
	sql_bind_int(s, 4, rq->limit + 1);
	return store_page(c, s, rq, "name", out);
}

static int64_t
version_of(json_t *o)
{
	return json_integer_value(json_object_get(o, "version"));
}

enum rp_err
rp_store_rack_update(struct rp_store *st, const char *key, json_t *patch, int64_t if_match,
                     const char *actor, json_t **out, json_t **detail)
{
	struct conn *c = store_conn(st);
	json_t *before = NULL, *after = NULL, *diff = NULL, *fresh = NULL;
	struct stmt *s;
	enum rp_err e;
	int64_t id;
	char summary[160];

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = rack_load(c, id, &before)) != RP_ERR_OK)
		goto out;
	if (if_match && version_of(before) != if_match) {
		e = RP_ERR_PRECONDITION_FAILED;
		*detail = json_pack("{s:I}", "current_version", (json_int_t)version_of(before));
		goto out;
	}
	after = json_deep_copy(before);
	store_merge(after, patch);
	if (json_object_get(after, "height_u") == NULL)
		json_object_set_new(after, "height_u", json_integer(42));
	if ((e = name_free(c, json_string_value(json_object_get(after, "name")), id, detail)) !=
	    RP_ERR_OK)
		goto out;
	s = STMT(c, "SELECT name, u_position + u_height - 1 AS top FROM nodes WHERE rack_id = ? "
	            "AND u_position IS NOT NULL ORDER BY top DESC LIMIT 1");
	sql_bind_int(s, 1, id);
	e = store_one(c, s, "rack top");
	if (e == RP_ERR_OK &&
	    sql_int(s, 1) > json_integer_value(json_object_get(after, "height_u"))) {
		*detail = store_why("height_u", "node %s occupies U%lld, above the new height",
		                    sql_text(s, 0), (long long)sql_int(s, 1));
		sql_reset(s);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	if (e == RP_ERR_OK)
		sql_reset(s);
	else if (e != RP_ERR_NOT_FOUND)
		goto out;
	s = STMT(c, "UPDATE racks SET name = ?, site = ?, row_name = ?, height_u = ?, "
	            "power_budget_kw = ?, notes = ?, version = version + 1, updated_at = ? "
	            "WHERE id = ?");
	store_bind_str(s, 1, after, "name");
	store_bind_str(s, 2, after, "site");
	store_bind_str(s, 3, after, "row");
	store_bind_int(s, 4, after, "height_u");
	store_bind_real(s, 5, after, "power_budget_kw");
	store_bind_str(s, 6, after, "notes");
	sql_bind_int(s, 7, rp_time_now_ms());
	sql_bind_int(s, 8, id);
	if ((e = store_exec(c, s, "rack update")) != RP_ERR_OK)
		goto out;
	if ((e = rack_load(c, id, &fresh)) != RP_ERR_OK)
		goto out;
	diff = store_diff(before, fresh, rack_diff_skip);
	snprintf(summary, sizeof summary, "rack %s updated",
	         json_string_value(json_object_get(fresh, "name")));
	e = store_event(c, actor, "rack.updated", "rack",
	                json_string_value(json_object_get(fresh, "id")),
	                json_string_value(json_object_get(fresh, "name")), 0, id, summary, diff);
	if (e != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = fresh;
	fresh = NULL;
out:
	store_rollback(c);
	json_decref(before);
	json_decref(after);
	json_decref(diff);
	json_decref(fresh);
	return e;
}

enum rp_err
rp_store_rack_delete(struct rp_store *st, const char *key, int64_t if_match, const char *actor,
                     json_t **detail)
{
	struct conn *c = store_conn(st);
	json_t *before = NULL;
	struct stmt *s;
	enum rp_err e;
	int64_t id, count;
	char summary[160];

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = rack_load(c, id, &before)) != RP_ERR_OK)
		goto out;
	if (if_match && version_of(before) != if_match) {
		*detail = json_pack("{s:O}", "current_version", json_object_get(before, "version"));
		e = RP_ERR_PRECONDITION_FAILED;
		goto out;
	}
	count = json_integer_value(json_object_get(before, "node_count"));
	if (count > 0) {
		*detail = store_why(NULL, "rack holds %lld node(s); move or delete them first",
		                    (long long)count);
		e = RP_ERR_IN_USE;
		goto out;
	}
	s = STMT(c, "DELETE FROM racks WHERE id = ?");
	sql_bind_int(s, 1, id);
	if ((e = store_exec(c, s, "rack delete")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "rack %s deleted",
	         json_string_value(json_object_get(before, "name")));
	e = store_event(c, actor, "rack.deleted", "rack",
	                json_string_value(json_object_get(before, "id")),
	                json_string_value(json_object_get(before, "name")), 0, id, summary, NULL);
	if (e != RP_ERR_OK)
		goto out;
	e = store_commit(c);
out:
	store_rollback(c);
	json_decref(before);
	return e;
}

enum rp_err
rp_store_rack_elevation(struct rp_store *st, const char *key, json_t **out)
{
	struct conn *c = store_conn(st);
	json_t *rack = NULL, *nodes = NULL, *slots = NULL, *unplaced = NULL, *placed = NULL;
	struct stmt *s;
	enum rp_err e;
	int64_t id, height, u;
	size_t i;
	json_t *n;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	/* One read transaction so rack and nodes come from the same snapshot. */
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = rack_load(c, id, &rack)) != RP_ERR_OK)
		goto out;
	s = STMT(c, "SELECT n.id AS _id, n.uuid AS id, n.name, n.u_position, n.u_height, "
	            "n.node_class, n.provision_state, n.power_state, "
	            "n.maintenance AS \"maintenance:bool\" "
	            "FROM nodes n WHERE n.rack_id = ? ORDER BY n.u_position DESC, n.name");
	sql_bind_int(s, 1, id);
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
