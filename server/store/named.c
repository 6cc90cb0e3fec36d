/*
 * BIOS profiles and firmware baselines share one shape: a named map (attribute -> value,
 * component -> version) that applies to a node class. One implementation, two descriptors.
 */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

struct kind {
	struct store_res res; /* first: resource.c hands it back to the callbacks */
	const char *map;      /* wire member holding the map */
	int json_values;      /* map values stored as canonical JSON (else plain strings) */
	/* Checks of the map against what the database knows (registries, images), or NULL. */
	enum rp_err (*check_map)(struct conn *c, int64_t self, json_t *obj, json_t **detail);
	const char *extra[2]; /* string members bound as ?6, ?7 of insert and update */
	const char *sql_insert, *sql_update, *sql_map_clear, *sql_map_insert, *sql_class_owner,
	        *sql_in_use;
	int s_insert, s_update, s_map_clear, s_map_insert, s_class_owner, s_in_use;
};

static const char *const diff_skip[] = {"version", "updated_at", "node_count", NULL};
static enum rp_err named_save(struct conn *c, struct store_res *r, int64_t *id, json_t *obj,
                              json_t **detail);
static enum rp_err named_in_use(struct conn *c, struct store_res *r, int64_t id, json_t *before,
                                json_t **detail);

#define NAMED_RES(tab, type, load, delete, list_id, list_name)                                     \
	{                                                                                          \
		.table = (tab), .otype = (type), .created_diff = 1, .diff_skip = diff_skip,        \
		.sql_load = (load), .sql_delete = (delete), .sql_list_id = (list_id),              \
		.sql_list_name = (list_name), .list_filters = {"class"}, .save = named_save,       \
		.may_delete = named_in_use                                                         \
	}

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
        .res = NAMED_RES(T_PROFILE, "bios_profile", PROFILE_COLS "WHERE p.id = ?",
                         "DELETE FROM bios_profiles WHERE id = ?",
                         PROFILE_COLS "WHERE p.id > ?1 AND (?2 IS NULL OR p.node_class = ?2) "
                                      "ORDER BY p.id LIMIT ?3",
                         PROFILE_COLS "WHERE (?1 IS NULL OR p.name > ?1) AND (?2 IS NULL OR "
                                      "p.node_class = ?2) ORDER BY p.name LIMIT ?3"),
        .map = "attributes",
        .json_values = 1,
        .sql_insert = "INSERT INTO bios_profiles(uuid, name, node_class, description, created_at, "
                      "updated_at, method, recipe) VALUES (?1, ?2, ?3, ?4, ?5, ?5, "
                      "coalesce(?6, 'redfish'), ?7)",
        .sql_update = "UPDATE bios_profiles SET name = ?2, node_class = ?3, description = ?4, "
                      "version = version + 1, updated_at = ?5, method = coalesce(?6, 'redfish'), "
                      "recipe = ?7 WHERE id = ?1",
        .extra = {"method", "recipe"},
        .sql_map_clear = "DELETE FROM bios_profile_attrs WHERE profile_id = ?",
        .sql_map_insert = "INSERT INTO bios_profile_attrs(profile_id, name, value) VALUES (?,?,?)",
        .sql_class_owner = "SELECT name FROM bios_profiles WHERE node_class = ? AND id != ?",
        .sql_in_use = "SELECT count(*) FROM nodes WHERE bios_profile_id = ?",
        .check_map = store_bios_profile_check,
};

static struct kind baseline_kind = {
        .res = NAMED_RES(T_BASELINE, "firmware_baseline", BASELINE_COLS "WHERE b.id = ?",
                         "DELETE FROM firmware_baselines WHERE id = ?",
                         BASELINE_COLS "WHERE b.id > ?1 AND (?2 IS NULL OR b.node_class = ?2) "
                                       "ORDER BY b.id LIMIT ?3",
                         BASELINE_COLS "WHERE (?1 IS NULL OR b.name > ?1) AND (?2 IS NULL OR "
                                       "b.node_class = ?2) ORDER BY b.name LIMIT ?3"),
        .map = "components",
        .json_values = 1,
        .check_map = store_baseline_check,
        .sql_insert = "INSERT INTO firmware_baselines(uuid, name, node_class, description, "
                      "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        .sql_update = "UPDATE firmware_baselines SET name = ?2, node_class = ?3, description = ?4, "
                      "version = version + 1, updated_at = ?5 WHERE id = ?1",
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

static enum rp_err
check(struct conn *c, struct kind *k, int64_t self, json_t *obj, json_t **detail)
{
	const char *name = json_string_value(json_object_get(obj, "name"));
	const char *cls = json_string_value(json_object_get(obj, "node_class"));
	struct stmt *s;
	int64_t other;
	enum rp_err e;

	e = store_id_of(c, k->res.table, name, &other);
	if (e == RP_ERR_OK && other != self) {
		*detail = store_why("name", "a %s named '%s' already exists", k->res.otype, name);
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
	if ((e = store_one(c, s, k->res.otype)) == RP_ERR_OK) {
		*detail = store_why("node_class", "%s '%s' already applies to node class '%s'",
		                    k->res.otype, sql_text(s, 0), cls);
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
	if ((e = store_exec(c, s, k->res.otype)) != RP_ERR_OK)
		return e;
	if (*id == 0)
		*id = sql_last_id(c);
	s = store_prep(c, &k->s_map_clear, k->sql_map_clear);
	sql_bind_int(s, 1, *id);
	if ((e = store_exec(c, s, k->res.otype)) != RP_ERR_OK)
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
		if ((e = store_exec(c, s, k->res.otype)) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

static enum rp_err
named_save(struct conn *c, struct store_res *r, int64_t *id, json_t *obj, json_t **detail)
{
	struct kind *k = (struct kind *)r;
	enum rp_err e;

	if ((e = check(c, k, *id ? *id : -1, obj, detail)) != RP_ERR_OK)
		return e;
	return save(c, k, id, obj);
}

static enum rp_err
named_in_use(struct conn *c, struct store_res *r, int64_t id, json_t *before, json_t **detail)
{
	struct kind *k = (struct kind *)r;
	struct stmt *s;
	enum rp_err e;

	(void)before;
	if (k->sql_in_use == NULL)
		return RP_ERR_OK;
	s = store_prep(c, &k->s_in_use, k->sql_in_use);
	sql_bind_int(s, 1, id);
	/* A count: always a row. */
	if ((e = store_one(c, s, k->res.otype)) != RP_ERR_OK)
		return e;
	if (sql_int(s, 0) > 0) {
		*detail = store_why(NULL, "%lld node(s) name this %s; reassign them first",
		                    (long long)sql_int(s, 0), k->res.otype);
		e = RP_ERR_IN_USE;
	}
	sql_reset(s);
	return e;
}

STORE_RES_CALLS(bios_profile, &profile_kind.res)
STORE_RES_CALLS(baseline, &baseline_kind.res)
