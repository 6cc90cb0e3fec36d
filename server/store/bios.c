/* BIOS: actual values per node, the desired profile, per-node diff and fleet drift. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

/* The profile that applies to a node: its own assignment, else its class's. */
#define TARGET_PROFILE                                                                             \
	"coalesce(n.bios_profile_id, (SELECT id FROM bios_profiles WHERE node_class = "            \
	"n.node_class))"

enum rp_err
rp_store_node_bios(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *actual = NULL, *desired_attrs = NULL, *diff = NULL, *res = NULL, *v;
	const char *name, *profile = NULL, *via = NULL;
	char pname[128] = "";
	struct stmt *s;
	struct node_ref n;
	int64_t id, pid = 0;
	enum rp_err e;

	if ((e = store_read_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	id = n.id;
	s = STMT_ARGS(c,
	              "SELECT name, value, source, read_at FROM bios_actual WHERE node_id = ? "
	              "ORDER BY name",
	              id);
	actual = json_object();
	while (store_next(c, s, "bios actual", &e)) {
		char ts[RP_TIME_BUF];

		v = json_loads(sql_text(s, 1), JSON_DECODE_ANY, NULL);
		json_object_set_new(actual, sql_text(s, 0),
		                    json_pack("{s:o, s:s, s:s}", "value", v ? v : json_null(),
		                              "source", sql_text(s, 2), "read_at",
		                              rp_time_format(sql_int(s, 3), ts)));
	}
	if (e != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(
	        c,
	        "SELECT p.id, p.name, CASE WHEN n.bios_profile_id IS NOT NULL THEN 'node' "
	        "ELSE 'node_class' END FROM nodes n JOIN bios_profiles p ON p.id = " TARGET_PROFILE
	        " WHERE n.id = ?",
	        id);
	if ((e = store_one(c, s, "bios profile")) == RP_ERR_OK) {
		pid = sql_int(s, 0);
		snprintf(pname, sizeof pname, "%s", sql_text(s, 1));
		profile = pname;
		via = strcmp(sql_text(s, 2), "node") == 0 ? "node" : "node_class";
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		goto out;
	desired_attrs = json_object();
	diff = json_array();
	if (pid) {
		s = STMT_ARGS(
		        c,
		        "SELECT pa.name, pa.value, a.value FROM bios_profile_attrs pa LEFT JOIN "
		        "bios_actual a ON a.node_id = ?2 AND a.name = pa.name "
		        "WHERE pa.profile_id = ?1 ORDER BY pa.name",
		        pid, id);
		while (store_next(c, s, "bios diff", &e)) {
			const char *want = sql_text(s, 1);
			const char *have = sql_text(s, 2);
			json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);

			name = sql_text(s, 0);
			json_object_set(desired_attrs, name, w ? w : json_null());
			if (have == NULL || strcmp(have, want) != 0) {
				json_t *h = have ? json_loads(have, JSON_DECODE_ANY, NULL) : NULL;

				json_array_append_new(diff,
				                      json_pack("{s:s, s:o, s:O}", "name", name,
				                                "actual", h ? h : json_null(),
				                                "desired", w ? w : json_null()));
			}
			json_decref(w);
		}
		if (e != RP_ERR_OK)
			goto out;
	}
	e = RP_ERR_INTERNAL;
	res = json_pack("{s:s, s:O, s:{s:s?, s:s?, s:O}, s:O, s:b}", "node", n.name, "actual",
	                actual, "desired", "profile", profile, "via", via, "attributes",
	                desired_attrs, "diff", diff, "in_sync",
	                pid != 0 && json_array_size(diff) == 0);
	if (res == NULL)
		goto out;
	*out = res;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(actual);
	json_decref(desired_attrs);
	json_decref(diff);
	return e;
}

/* store_node_reading's write: attributes into bios_actual. */
static enum rp_err
bios_write(struct conn *c, const struct node_ref *n, json_t *attributes, const char *source,
           int64_t now)
{
	const char *name;
	json_t *v;
	enum rp_err e;

	json_object_foreach(attributes, name, v)
	{
		char *text = store_canon(v);
		struct stmt *s;

		if (text == NULL)
			return RP_ERR_INTERNAL;
		s = STMT_ARGS(c,
		              "INSERT INTO bios_actual(node_id, name, value, source, read_at) "
		              "VALUES (?,?,?,?,?) ON CONFLICT(node_id, name) DO UPDATE SET "
		              "value = excluded.value, source = excluded.source, read_at = "
		              "excluded.read_at",
		              n->id, name, text, source, now);
		free(text);
		if ((e = store_exec(c, s, "bios set")) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

enum rp_err
rp_store_node_bios_set(struct rp_store *st, const char *key, const char *source, json_t *attributes,
                       const char *actor)
{
	return store_node_reading(st, key, source, attributes, actor, "node.bios_read",
	                          "BIOS attribute(s)", bios_write);
}

static struct store_drift_kind bios_drift = {
        .sql_count = "SELECT count(*) FROM nodes n WHERE " TARGET_PROFILE
                     " IS NOT NULL AND " STORE_DRIFT_WHERE,
        .sql_rows = "SELECT n.name, r.name, n.node_class, p.name, pa.name, a.value, pa.value "
                    "FROM nodes n JOIN bios_profiles p ON p.id = " TARGET_PROFILE
                    " JOIN bios_profile_attrs pa ON pa.profile_id = p.id LEFT JOIN bios_actual "
                    "a ON a.node_id = n.id AND a.name = pa.name LEFT JOIN racks r ON r.id = "
                    "n.rack_id WHERE a.value IS DISTINCT FROM pa.value AND " STORE_DRIFT_WHERE
                    "ORDER BY n.name, pa.name",
        .target_key = "profile",
        .list_key = "attributes",
        .member_key = "name",
        .json_values = 1,
};

enum rp_err
rp_store_bios_drift(struct rp_store *st, json_t *filter, json_t **out)
{
	return store_drift(st, filter, &bios_drift, out);
}

/* ---- Attribute registries ------------------------------------------------------------- */

/* Why value is not acceptable for registry entry def, or NULL when it is. */
static const char *
registry_refuses(json_t *def, json_t *value, char *buf, size_t len)
{
	const char *type = json_string_value(json_object_get(def, "type")) ?: "";
	json_t *values = json_object_get(def, "values"), *x;
	size_t i;

	if (json_is_true(json_object_get(def, "read_only")))
		return "is read-only";
	if (!strcmp(type, "Enumeration")) {
		if (!json_is_string(value))
			return "must be one of the listed values (a string)";
		json_array_foreach(values, i, x)
		{
			if (json_equal(x, value))
				return NULL;
		}
		{
			char *list = json_dumps(values, JSON_COMPACT);

			snprintf(buf, len, "must be one of %.300s", list ? list : "[]");
			free(list);
		}
		return buf;
	}
	if (!strcmp(type, "Integer")) {
		json_t *lo = json_object_get(def, "lower"), *hi = json_object_get(def, "upper");

		if (!json_is_integer(value))
			return "must be an integer";
		if ((lo && json_number_value(value) < json_number_value(lo)) ||
		    (hi && json_number_value(value) > json_number_value(hi))) {
			snprintf(buf, len, "must be between %g and %g",
			         lo ? json_number_value(lo) : -1e18,
			         hi ? json_number_value(hi) : 1e18);
			return buf;
		}
		return NULL;
	}
	if (!strcmp(type, "Boolean"))
		return json_is_boolean(value) ? NULL : "must be true or false";
	if (!strcmp(type, "String") || !strcmp(type, "Password")) {
		json_t *max = json_object_get(def, "max_length");

		if (!json_is_string(value))
			return "must be a string";
		if (json_is_integer(max) &&
		    (json_int_t)json_string_length(value) > json_integer_value(max)) {
			snprintf(buf, len, "at most %lld characters",
			         (long long)json_integer_value(max));
			return buf;
		}
	}
	return NULL;
}

/* attrs against one registry's definitions (registry reg, read from node): the first
 * attribute it does not know or whose value it refuses is RP_ERR_INVALID_FIELD. */
static enum rp_err
registry_check(json_t *defs, json_t *attrs, const char *reg, const char *node, json_t **detail)
{
	const char *name;
	char field[200], buf[400];
	json_t *v, *d;
	size_t i;

	json_object_foreach(attrs, name, v)
	{
		const char *why = "is not in the registry";
		json_t *def = NULL;

		json_array_foreach(defs, i, d)
		{
			if (!strcmp(json_string_value(json_object_get(d, "name")) ?: "", name)) {
				def = d;
				break;
			}
		}
		if (def && (why = registry_refuses(def, v, buf, sizeof buf)) == NULL)
			continue;
		snprintf(field, sizeof field, "attributes.%.128s", name);
		*detail = json_pack(
		        "{s:s, s:o, s:s, s:s}", "field", field, "reason",
		        json_sprintf("%s %s (registry %s of node %s)", name, why, reg, node),
		        "registry", reg, "node", node);
		return RP_ERR_INVALID_FIELD;
	}
	return RP_ERR_OK;
}

enum rp_err
store_bios_profile_check(struct conn *c, int64_t self, json_t *obj, json_t **detail)
{
	json_t *attrs = json_object_get(obj, "attributes");
	const char *cls = json_string_value(json_object_get(obj, "node_class"));
	struct stmt *s;
	enum rp_err e = RP_ERR_OK;

	{
		const char *method = json_string_value(json_object_get(obj, "method")) ?: "redfish";
		const char *recipe = json_string_value(json_object_get(obj, "recipe"));
		int64_t rid;

		if (!strcmp(method, "agent") && recipe == NULL) {
			*detail = store_why("recipe",
			                    "method agent needs a recipe (the vendor BIOS tool's "
			                    "steps)");
			return RP_ERR_INVALID_FIELD;
		}
		if (strcmp(method, "agent") != 0 && recipe) {
			*detail = store_why("recipe", "a recipe goes only with method agent");
			return RP_ERR_INVALID_FIELD;
		}
		if ((e = store_ref(c, T_RECIPE, recipe, "recipe", &rid, detail)) != RP_ERR_OK)
			return e;
	}
	if (json_object_size(attrs) == 0)
		return RP_ERR_OK;
	/* One registry per distinct id among the nodes the profile applies to. */
	s = STMT_ARGS(c,
	              "SELECT r.registry, min(r.attributes), min(n.name) FROM bios_registries r "
	              "JOIN nodes "
	              "n ON n.id = r.node_id WHERE (?1 IS NOT NULL AND n.node_class = ?1 AND "
	              "n.bios_profile_id IS NULL) OR n.bios_profile_id = ?2 GROUP BY r.registry "
	              "LIMIT 16",
	              cls, self);
	while (store_next(c, s, "profile check", &e)) {
		json_t *defs = json_loads(sql_text(s, 1), 0, NULL);

		e = registry_check(defs, attrs, sql_text(s, 0), sql_text(s, 2), detail);
		json_decref(defs);
		if (e != RP_ERR_OK) {
			sql_reset(s);
			return e;
		}
	}
	return e;
}

enum rp_err
store_bios_node_check(struct conn *c, int64_t node_id, int64_t profile_id, json_t **detail)
{
	struct stmt *s;
	json_t *attrs = NULL, *defs = NULL;
	enum rp_err e;

	s = STMT_ARGS(c,
	              "SELECT r.registry, r.attributes, n.name, (SELECT json_group_object(a.name, "
	              "json(a.value)) FROM bios_profile_attrs a WHERE a.profile_id = ?2) FROM "
	              "bios_registries r JOIN nodes n ON n.id = r.node_id WHERE r.node_id = ?1",
	              node_id, profile_id);
	if ((e = store_one(c, s, "node registry check")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e; /* no registry: nothing to check */
	defs = json_loads(sql_text(s, 1), 0, NULL);
	attrs = json_loads(sql_text(s, 3) ?: "{}", 0, NULL);
	e = registry_check(defs, attrs, sql_text(s, 0), sql_text(s, 2), detail);
	if (e != RP_ERR_OK) {
		json_t *f = json_object_get(*detail, "field");

		/* The field the caller sent is the assignment, not the profile's attribute. */
		json_object_set_new(*detail, "attribute", json_string(json_string_value(f) + 11));
		json_object_set_new(*detail, "field", json_string("bios_profile"));
	}
	sql_reset(s);
	json_decref(attrs);
	json_decref(defs);
	return e;
}

enum rp_err
rp_store_bios_registry_set(struct rp_store *st, const char *key, const char *registry,
                           json_t *attributes)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	char *text = NULL;
	struct stmt *s;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	if ((text = store_canon(attributes)) == NULL)
		return store_end(c, RP_ERR_INTERNAL, NULL, NULL);
	s = STMT_ARGS(c,
	              "INSERT INTO bios_registries(node_id, registry, attributes, read_at) VALUES "
	              "(?,?,?,?) ON CONFLICT(node_id) DO UPDATE SET registry = excluded.registry, "
	              "attributes = excluded.attributes, read_at = excluded.read_at",
	              n.id, registry, text, rp_time_now_ms());
	free(text);
	return store_end(c, store_exec(c, s, "registry set"), NULL, NULL);
}

enum rp_err
rp_store_bios_desired(struct rp_store *st, const char *key, const char *profile, json_t **out,
                      json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *attrs = NULL;
	char pname[128] = "", method[16] = "redfish", recipe[128] = "";
	struct stmt *s;
	struct node_ref n;
	int64_t pid = 0;
	enum rp_err e;

	if ((e = store_read_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	if (profile) {
		if ((e = store_ref(c, T_PROFILE, profile, "profile", &pid, detail)) != RP_ERR_OK)
			goto out;
		s = STMT_ARGS(c, "SELECT id, name, method, recipe FROM bios_profiles WHERE id = ?",
		              pid);
	} else
		s = STMT_ARGS(
		        c,
		        "SELECT p.id, p.name, p.method, p.recipe FROM nodes n JOIN bios_profiles p "
		        "ON p.id = " TARGET_PROFILE " WHERE n.id = ?",
		        n.id);
	if ((e = store_one(c, s, "bios desired")) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND) {
			*detail = store_why(
			        NULL,
			        "node %s has no BIOS profile (neither its own nor its class's)",
			        n.name);
			e = RP_ERR_CONFLICT;
		}
		goto out;
	}
	pid = sql_int(s, 0);
	snprintf(pname, sizeof pname, "%s", sql_text(s, 1));
	snprintf(method, sizeof method, "%s", sql_text(s, 2));
	snprintf(recipe, sizeof recipe, "%s", sql_text(s, 3) ?: "");
	sql_reset(s);
	s = STMT_ARGS(
	        c, "SELECT name, value FROM bios_profile_attrs WHERE profile_id = ? ORDER BY name",
	        pid);
	attrs = json_object();
	while (store_next(c, s, "bios desired attrs", &e)) {
		json_t *v = json_loads(sql_text(s, 1), JSON_DECODE_ANY, NULL);

		json_object_set_new(attrs, sql_text(s, 0), v ? v : json_null());
	}
	if (e != RP_ERR_OK)
		goto out;
	*out = json_pack("{s:s, s:s, s:O, s:s, s:s?}", "node", n.name, "profile", pname,
	                 "attributes", attrs, "method", method, "recipe",
	                 recipe[0] ? recipe : NULL);
	e = *out ? RP_ERR_OK : RP_ERR_INTERNAL;
out:
	store_read_end(c);
	json_decref(attrs);
	return e;
}

enum rp_err
rp_store_bios_agent_apply(struct rp_store *st, int64_t job_id, const char *profile,
                          const char *recipe, json_t *attributes, char *child, size_t len,
                          json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	json_t *params = NULL, *args = NULL, *extra = NULL;
	struct node_ref n;
	struct rp_buf lines = {0};
	struct stmt *s;
	int64_t now = rp_time_now_ms();
	char summary[256], uuid[RP_UUID_BUF] = "", *attrs_json = NULL;
	const char *k;
	json_t *v;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	/* The recipe gets the settings twice: as JSON and as Name=Value lines, for whichever
	 * form the vendor's tool reads. */
	attrs_json = json_dumps(attributes, JSON_COMPACT | JSON_SORT_KEYS);
	json_object_foreach(attributes, k, v)
	{
		char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

		rp_buf_printf(&lines, "%s=%s\n", k, t ? t : json_string_value(v));
		free(t);
	}
	args = json_pack("{s:s, s:s, s:s}", "profile", profile, "attributes",
	                 attrs_json ? attrs_json : "{}", "settings", lines.data ? lines.data : "");
	extra = json_pack("{s:s}", "bios_profile", profile);
	if (attrs_json == NULL || args == NULL || extra == NULL || lines.oom) {
		e = RP_ERR_INTERNAL;
		goto done;
	}
	if ((e = store_begin(c)) != RP_ERR_OK)
		goto done;
	e = store_recipe_child(c, job_id, recipe, args, "a BIOS apply", extra, &n, uuid, &params,
	                       detail);
	if (e != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(
	        c,
	        "INSERT INTO bios_applies(job_id, node_id, child, attributes, sent_at) VALUES "
	        "(?1, ?2, ?3, ?4, ?5)",
	        job_id, n.id, uuid, attrs_json, now);
	if ((e = store_exec(c, s, "bios apply row")) != RP_ERR_OK) {
		if (e == RP_ERR_CONFLICT)
			e = RP_ERR_DUPLICATE;
		goto out;
	}
	if ((e = store_job_sent(c, job_id, "bios recipe", "polling", now)) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary,
	         "steps job queued for %s: recipe %s applies BIOS profile %s", n.name, recipe,
	         profile);
	if ((e = store_event(c, "rackpilotd", "job.queued", "job", uuid, n.name, n.id, n.rack_id,
	                     summary, params)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	snprintf(child, len, "%s", uuid);
out:
	store_rollback(c);
done:
	free(attrs_json);
	rp_buf_free(&lines);
	json_decref(params);
	json_decref(args);
	json_decref(extra);
	return e;
}

enum rp_err
rp_store_bios_apply_get(struct rp_store *st, int64_t job_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return store_one_row(c,
	                     STMT_ARGS(c,
	                               "SELECT child, attributes AS \"attributes:json\", sent_at "
	                               "FROM bios_applies WHERE job_id = ?",
	                               job_id),
	                     "bios apply row", out);
}
