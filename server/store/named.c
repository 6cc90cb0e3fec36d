/*
 * BIOS profiles and firmware baselines share one shape: a named map (attribute -> value,
 * component -> version) that applies to a node class. One implementation, two descriptors.
 */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

struct kind {
	enum store_table table;
	const char *otype; /* event object type */
	const char *map;   /* wire member holding the map */
	int json_values;   /* map values stored as canonical JSON (else plain strings) */
	/* Checks of the map against what the database knows (registries, images), or NULL. */
	enum rp_err (*check_map)(struct conn *c, int64_t self, json_t *obj, json_t **detail);
	const char *extra[2]; /* string members bound as ?6, ?7 of insert and update */
	const char *sql_load, *sql_list_id, *sql_list_name, *sql_insert, *sql_update, *sql_delete,
	        *sql_map_clear, *sql_map_insert, *sql_class_owner, *sql_in_use;
	int s_load, s_list_id, s_list_name, s_insert, s_update, s_delete, s_map_clear, s_map_insert,
	        s_class_owner, s_in_use;
};

#define PROFILE_COLS                                                                               \
	"SELECT p.id AS _id, p.uuid AS id, p.name, p.node_class, p.description, p.method, "        \
	"p.recipe, "                                                                               \
	"(SELECT json_group_object(name, json(value)) FROM bios_profile_attrs WHERE "              \
	"profile_id = p.id) AS \"attributes:json\", (SELECT count(*) FROM nodes WHERE "            \
	"bios_profile_id = p.id OR (bios_profile_id IS NULL AND node_class = p.node_class)) "      \
	"AS node_count, p.version, p.created_at AS \"created_at:time\", p.updated_at AS "          \
	"\"updated_at:time\" FROM bios_profiles p "

#define BASELINE_COLS                                                                              \
	"SELECT b.id AS _id, b.uuid AS id, b.name, b.node_class, b.description, "                  \
	"(SELECT json_group_object(bc.component, json_object('version', bc.version, 'image', "     \
	"i.name, 'method', bc.method, 'recipe', bc.recipe)) FROM baseline_components bc LEFT "     \
	"JOIN images i ON i.id = bc.image_id WHERE bc.baseline_id = b.id) AS "                     \
	"\"components:json\", (SELECT count(*) FROM nodes WHERE "                                  \
	"node_class = b.node_class) AS node_count, b.version, b.created_at AS "                    \
	"\"created_at:time\", b.updated_at AS \"updated_at:time\" FROM firmware_baselines b "

static struct kind profile_kind = {
        .table = T_PROFILE,
        .otype = "bios_profile",
        .map = "attributes",
        .json_values = 1,
        .sql_load = PROFILE_COLS "WHERE p.id = ?",
        .sql_list_id = PROFILE_COLS "WHERE p.id > ?1 AND (?2 IS NULL OR p.node_class = ?2) "
                                    "ORDER BY p.id LIMIT ?3",
        .sql_list_name = PROFILE_COLS "WHERE (?1 IS NULL OR p.name > ?1) AND (?2 IS NULL OR "
                                      "p.node_class = ?2) ORDER BY p.name LIMIT ?3",
        .sql_insert = "INSERT INTO bios_profiles(uuid, name, node_class, description, created_at, "
                      "updated_at, method, recipe) VALUES (?1, ?2, ?3, ?4, ?5, ?5, "
                      "coalesce(?6, 'redfish'), ?7)",
        .sql_update = "UPDATE bios_profiles SET name = ?2, node_class = ?3, description = ?4, "
                      "version = version + 1, updated_at = ?5, method = coalesce(?6, 'redfish'), "
                      "recipe = ?7 WHERE id = ?1",
        .extra = {"method", "recipe"},
        .sql_delete = "DELETE FROM bios_profiles WHERE id = ?",
        .sql_map_clear = "DELETE FROM bios_profile_attrs WHERE profile_id = ?",
        .sql_map_insert = "INSERT INTO bios_profile_attrs(profile_id, name, value) VALUES (?,?,?)",
        .sql_class_owner = "SELECT name FROM bios_profiles WHERE node_class = ? AND id != ?",
        .sql_in_use = "SELECT count(*) FROM nodes WHERE bios_profile_id = ?",
        .check_map = store_bios_profile_check,
};

static struct kind baseline_kind = {
        .table = T_BASELINE,
        .otype = "firmware_baseline",
        .map = "components",
        .json_values = 1,
        .check_map = store_baseline_check,
        .sql_load = BASELINE_COLS "WHERE b.id = ?",
        .sql_list_id = BASELINE_COLS "WHERE b.id > ?1 AND (?2 IS NULL OR b.node_class = ?2) "
                                     "ORDER BY b.id LIMIT ?3",
        .sql_list_name = BASELINE_COLS "WHERE (?1 IS NULL OR b.name > ?1) AND (?2 IS NULL OR "
                                       "b.node_class = ?2) ORDER BY b.name LIMIT ?3",
        .sql_insert = "INSERT INTO firmware_baselines(uuid, name, node_class, description, "
                      "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        .sql_update = "UPDATE firmware_baselines SET name = ?2, node_class = ?3, description = ?4, "
                      "version = version + 1, updated_at = ?5 WHERE id = ?1",
        .sql_delete = "DELETE FROM firmware_baselines WHERE id = ?",
        .sql_map_clear = "DELETE FROM baseline_components WHERE baseline_id = ?",
        .sql_map_insert =
                "INSERT INTO baseline_components(baseline_id, component, version, image_id, "
                "method, recipe) VALUES (?1, ?2, json_extract(?3, '$.version'), (SELECT id "
                "FROM images WHERE name = json_extract(?3, '$.image')), "
                "coalesce(json_extract(?3, '$.method'), 'redfish'), "
                "json_extract(?3, '$.recipe'))",
        .sql_class_owner = "SELECT name FROM firmware_baselines WHERE node_class = ? AND id != ?",
        .sql_in_use = NULL,
};

static const char *const diff_skip[] = {"version", "updated_at", "node_count", NULL};

static enum rp_err
load(struct conn *c, struct kind *k, int64_t id, json_t **out)
{
	struct stmt *s = store_prep(c, &k->s_load, k->sql_load);
	enum rp_err e;

	sql_bind_int(s, 1, id);
	if ((e = store_one(c, s, k->otype)) != RP_ERR_OK)
		return e;
	*out = store_row(c, s);
	sql_reset(s);
	return RP_ERR_OK;
}

static enum rp_err
check(struct conn *c, struct kind *k, int64_t self, json_t *obj, json_t **detail)
{
	const char *name = json_string_value(json_object_get(obj, "name"));
	const char *cls = json_string_value(json_object_get(obj, "node_class"));
	struct stmt *s;
	int64_t other;
	enum rp_err e;

	e = store_id_of(c, k->table, name, &other);
	if (e == RP_ERR_OK && other != self) {
		*detail = store_why("name", "a %s named '%s' already exists", k->otype, name);
		return RP_ERR_DUPLICATE;
	}
	if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		return e;
	if (k->check_map && (e = k->check_map(c, self, obj, detail)) != RP_ERR_OK)
		return e;
	if (cls == NULL)
		return RP_ERR_OK;
	s = store_prep(c, &k->s_class_owner, k->sql_class_owner);
	sql_bind_text(s, 1, cls);
	sql_bind_int(s, 2, self);
	if ((e = store_one(c, s, k->otype)) == RP_ERR_OK) {
		*detail = store_why("node_class", "%s '%s' already applies to node class '%s'",
		                    k->otype, sql_text(s, 0), cls);
		sql_reset(s);
		return RP_ERR_DUPLICATE;
	}
	return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e;
}

static enum rp_err
save(struct conn *c, struct kind *k, int64_t *id, json_t *obj)
{
	struct stmt *s;
	char uuid[RP_UUID_BUF];
	const char *key;
	json_t *v;
	enum rp_err e;

	if (*id == 0) {
		if (rp_uuid_new(uuid) < 0)
			return RP_ERR_INTERNAL;
		s = store_prep(c, &k->s_insert, k->sql_insert);
		sql_bind_text(s, 1, uuid);
	} else {
		s = store_prep(c, &k->s_update, k->sql_update);
		sql_bind_int(s, 1, *id);
	}
	store_bind_str(s, 2, obj, "name");
	store_bind_str(s, 3, obj, "node_class");
	store_bind_str(s, 4, obj, "description");
	sql_bind_int(s, 5, rp_time_now_ms());
	if (k->extra[0])
		store_bind_str(s, 6, obj, k->extra[0]);
	if (k->extra[1])
		store_bind_str(s, 7, obj, k->extra[1]);
	if ((e = store_exec(c, s, k->otype)) != RP_ERR_OK)
		return e;
	if (*id == 0)
		*id = sql_last_id(c);
	s = store_prep(c, &k->s_map_clear, k->sql_map_clear);
	sql_bind_int(s, 1, *id);
	if ((e = store_exec(c, s, k->otype)) != RP_ERR_OK)
		return e;
	json_object_foreach(json_object_get(obj, k->map), key, v)
	{
		char *text = k->json_values ? store_canon(v) : NULL;

		s = store_prep(c, &k->s_map_insert, k->sql_map_insert);
		sql_bind_int(s, 1, *id);
		sql_bind_text(s, 2, key);
		if (text)
			sql_bind_text_own(s, 3, text);
		else
			sql_bind_text(s, 3, json_string_value(v));
		if ((e = store_exec(c, s, k->otype)) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

static enum rp_err
event(struct conn *c, struct kind *k, const char *verb, json_t *obj, json_t *diff,
      const char *actor)
{
	char action[64], summary[192];
	const char *name = json_string_value(json_object_get(obj, "name"));

	snprintf(action, sizeof action, "%s.%s", k->otype, verb);
	snprintf(summary, sizeof summary, "%s %s %s", k->otype, name, verb);
	return store_event(c, actor, action, k->otype,
	                   json_string_value(json_object_get(obj, "id")), name, 0, 0, summary,
	                   diff);
}

static enum rp_err
create(struct rp_store *st, struct kind *k, json_t *in, const char *actor, json_t **out,
       json_t **detail)
{
	struct conn *c = store_conn(st);
	json_t *fresh = NULL, *diff = NULL, *empty = json_object();
	int64_t id = 0;
	enum rp_err e;

	if (c == NULL) {
		json_decref(empty);
		return RP_ERR_INTERNAL;
	}
	if ((e = store_begin(c)) != RP_ERR_OK)
		goto out;
	if ((e = check(c, k, -1, in, detail)) != RP_ERR_OK)
		goto out;
	if ((e = save(c, k, &id, in)) != RP_ERR_OK)
		goto out;
	if ((e = load(c, k, id, &fresh)) != RP_ERR_OK)
		goto out;
	diff = store_diff(empty, fresh, diff_skip);
	if ((e = event(c, k, "created", fresh, diff, actor)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = fresh;
	fresh = NULL;
out:
	store_rollback(c);
	json_decref(fresh);
	json_decref(diff);
	json_decref(empty);
	return e;
}

static enum rp_err
get(struct rp_store *st, struct kind *k, const char *key, json_t **out)
{
	struct conn *c = store_conn(st);
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_id_of(c, k->table, key, &id)) != RP_ERR_OK)
		return e;
	return load(c, k, id, out);
}

static enum rp_err
list(struct rp_store *st, struct kind *k, const struct rp_page_req *rq, struct rp_page *out)
{
	struct conn *c = store_conn(st);
	struct stmt *s;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if (rq->sort_by_name) {
		s = store_prep(c, &k->s_list_name, k->sql_list_name);
		sql_bind_text(s, 1, rq->after_key);
	} else {
		s = store_prep(c, &k->s_list_id, k->sql_list_id);
		sql_bind_int(s, 1, rq->after_id);
	}
	store_bind_str(s, 2, rq->filter, "class");
	sql_bind_int(s, 3, rq->limit + 1);
	return store_page(c, s, rq, "name", out);
}

static enum rp_err
update(struct rp_store *st, struct kind *k, const char *key, json_t *patch, int64_t if_match,
       const char *actor, json_t **out, json_t **detail)
{
	struct conn *c = store_conn(st);
	json_t *before = NULL, *after = NULL, *fresh = NULL, *diff = NULL;
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, k->table, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = load(c, k, id, &before)) != RP_ERR_OK)
		goto out;
	if (if_match && json_integer_value(json_object_get(before, "version")) != if_match) {
		*detail = json_pack("{s:O}", "current_version", json_object_get(before, "version"));
		e = RP_ERR_PRECONDITION_FAILED;
		goto out;
	}
	after = json_deep_copy(before);
	store_merge(after, patch);
	if ((e = check(c, k, id, after, detail)) != RP_ERR_OK)
		goto out;
	if ((e = save(c, k, &id, after)) != RP_ERR_OK)
		goto out;
	if ((e = load(c, k, id, &fresh)) != RP_ERR_OK)
		goto out;
	diff = store_diff(before, fresh, diff_skip);
	if ((e = event(c, k, "updated", fresh, diff, actor)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = fresh;
	fresh = NULL;
out:
	store_rollback(c);
	json_decref(before);
	json_decref(after);
	json_decref(fresh);
	json_decref(diff);
	return e;
}

static enum rp_err
destroy(struct rp_store *st, struct kind *k, const char *key, int64_t if_match, const char *actor,
        json_t **detail)
{
	struct conn *c = store_conn(st);
	json_t *before = NULL;
	struct stmt *s;
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, k->table, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = load(c, k, id, &before)) != RP_ERR_OK)
		goto out;
	if (if_match && json_integer_value(json_object_get(before, "version")) != if_match) {
		*detail = json_pack("{s:O}", "current_version", json_object_get(before, "version"));
		e = RP_ERR_PRECONDITION_FAILED;
		goto out;
	}
	if (k->sql_in_use) {
		s = store_prep(c, &k->s_in_use, k->sql_in_use);
		sql_bind_int(s, 1, id);
		/* A count: always a row. */
		if ((e = store_one(c, s, k->otype)) != RP_ERR_OK)
			goto out;
		if (sql_int(s, 0) > 0) {
			*detail = store_why(NULL, "%lld node(s) name this %s; reassign them first",
			                    (long long)sql_int(s, 0), k->otype);
			sql_reset(s);
			e = RP_ERR_IN_USE;
			goto out;
		}
		sql_reset(s);
	}
	s = store_prep(c, &k->s_delete, k->sql_delete);
	sql_bind_int(s, 1, id);
	if ((e = store_exec(c, s, k->otype)) != RP_ERR_OK)
		goto out;
	if ((e = event(c, k, "deleted", before, NULL, actor)) != RP_ERR_OK)
		goto out;
	e = store_commit(c);
out:
	store_rollback(c);
	json_decref(before);
	return e;
}

enum rp_err
rp_store_bios_profile_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                             json_t **detail)
{
	return create(st, &profile_kind, in, actor, out, detail);
}

enum rp_err
rp_store_bios_profile_get(struct rp_store *st, const char *key, json_t **out)
{
	return get(st, &profile_kind, key, out);
}

enum rp_err
rp_store_bios_profile_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	return list(st, &profile_kind, rq, out);
}

enum rp_err
rp_store_bios_profile_update(struct rp_store *st, const char *key, json_t *patch, int64_t if_match,
                             const char *actor, json_t **out, json_t **detail)
{
	return update(st, &profile_kind, key, patch, if_match, actor, out, detail);
}

enum rp_err
rp_store_bios_profile_delete(struct rp_store *st, const char *key, int64_t if_match,
                             const char *actor, json_t **detail)
{
	return destroy(st, &profile_kind, key, if_match, actor, detail);
}

enum rp_err
rp_store_baseline_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                         json_t **detail)
{
	return create(st, &baseline_kind, in, actor, out, detail);
}

enum rp_err
rp_store_baseline_get(struct rp_store *st, const char *key, json_t **out)
{
	return get(st, &baseline_kind, key, out);
}

enum rp_err
rp_store_baseline_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	return list(st, &baseline_kind, rq, out);
}

enum rp_err
rp_store_baseline_update(struct rp_store *st, const char *key, json_t *patch, int64_t if_match,
                         const char *actor, json_t **out, json_t **detail)
{
	return update(st, &baseline_kind, key, patch, if_match, actor, out, detail);
}

enum rp_err
rp_store_baseline_delete(struct rp_store *st, const char *key, int64_t if_match, const char *actor,
                         json_t **detail)
{
	return destroy(st, &baseline_kind, key, if_match, actor, detail);
}
