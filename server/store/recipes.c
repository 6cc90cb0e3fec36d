/* Recipes: named step plans with ${arg} placeholders. Params and steps are kept as the JSON
 * the API validated. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"
#include "shipped.h"

#define RECIPE_COLS                                                                                \
	"SELECT id AS _id, uuid AS id, name, description, params AS \"params:json\", steps AS "    \
	"\"steps:json\", version, created_at AS \"created_at:time\", updated_at AS "               \
	"\"updated_at:time\" FROM recipes "

static const char *const diff_skip[] = {"version", "updated_at", NULL};

/* Insert (*id == 0) or rewrite a recipe row from a whole object. */
static enum rp_err
save(struct conn *c, struct store_res *r, int64_t *id, json_t *obj, json_t **detail)
{
	const char *name = json_string_value(json_object_get(obj, "name"));
	char uuid[RP_UUID_BUF], *params, *steps;
	json_t *p = json_object_get(obj, "params");
	struct stmt *s;
	int64_t other;
	enum rp_err e;

	e = store_id_of(c, T_RECIPE, name, &other);
	if (e == RP_ERR_OK && other != *id) {
		*detail = store_why("name", "a recipe named '%s' already exists", name);
		return RP_ERR_DUPLICATE;
	}
	if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		return e;
	(void)r;
	params = p ? store_canon(p) : strdup("{}");
	steps = store_canon(json_object_get(obj, "steps"));
	if (*id == 0) {
		if (rp_uuid_new(uuid) < 0) {
			free(params);
			free(steps);
			return RP_ERR_INTERNAL;
		}
		s = STMT(c,
		         "INSERT INTO recipes(uuid, name, description, params, steps, created_at, "
		         "updated_at) VALUES (?1,?2,?3,?4,?5,?6,?6)");
	} else {
		s = STMT(c,
		         "UPDATE recipes SET name = ?2, description = ?3, params = ?4, steps = ?5, "
		         "version = version + 1, updated_at = ?6 WHERE id = ?7");
	}
	if (params == NULL || steps == NULL) {
		free(params);
		free(steps);
		return RP_ERR_INTERNAL;
	}
	if (*id == 0)
		sql_bind_text(s, 1, uuid);
	else
		sql_bind_int(s, 7, *id);
	store_bind_str(s, 2, obj, "name");
	store_bind_str(s, 3, obj, "description");
	sql_bind_text_own(s, 4, params);
	sql_bind_text_own(s, 5, steps);
	sql_bind_int(s, 6, rp_time_now_ms());
	if ((e = store_exec(c, s, "recipe save")) != RP_ERR_OK)
		return e;
	if (*id == 0)
		*id = sql_last_id(c);
	return RP_ERR_OK;
}

/* Steps and params are replaced whole: merging two plans step by step means nothing. */
static void
apply(json_t *after, json_t *patch)
{
	static const char *const members[] = {"steps", "params", "name", "description", NULL};

	for (const char *const *m = members; *m; m++)
		if (json_object_get(patch, *m))
			json_object_set(after, *m, json_object_get(patch, *m));
}

static struct store_res recipe_res = {
        .table = T_RECIPE,
        .otype = "recipe",
        .diff_skip = diff_skip,
        .sql_load = RECIPE_COLS "WHERE id = ?",
        .sql_delete = "DELETE FROM recipes WHERE id = ?",
        .sql_list_id = RECIPE_COLS "WHERE recipes.id > ?1 ORDER BY recipes.id LIMIT ?2",
        .sql_list_name = RECIPE_COLS "WHERE (?1 IS NULL OR name > ?1) ORDER BY name LIMIT ?2",
        .save = save,
        .apply = apply,
};

STORE_RES_CALLS(recipe, &recipe_res)

/* ---- Shipped recipes -------------------------------------------------------------------- */

struct ship {
	json_t *recipes; /* the shipped recipes, parsed */
	json_t *loaded;  /* out: names inserted */
	json_t *kept;    /* out: names of stored recipes that differ from the shipped one */
};

static int
same_recipe(json_t *stored, json_t *shipped)
{
	static const char *const members[] = {"description", "params", "steps", NULL};

	for (const char *const *m = members; *m; m++)
		if (!json_equal(json_object_get(stored, *m), json_object_get(shipped, *m)))
			return 0;
	return 1;
}

/* One shipped recipe, inside ship_txn's transaction. ON CONFLICT rather than a look first:
 * another server sharing the database may insert the same name at the same time, and its row
 * is as good as ours. */
static enum rp_err
ship_one(struct conn *c, json_t *rec, json_t *loaded, json_t *kept)
{
	const char *name = json_string_value(json_object_get(rec, "name"));
	char uuid[RP_UUID_BUF];
	char *params = store_canon(json_object_get(rec, "params"));
	char *steps = store_canon(json_object_get(rec, "steps"));
	json_t *row = NULL, *detail = NULL;
	int64_t id, changed;
	enum rp_err e = RP_ERR_INTERNAL;

	if (params == NULL || steps == NULL || rp_uuid_new(uuid) < 0)
		goto out;
	if ((e = EXEC(c, "shipped recipe",
	              "INSERT INTO recipes(uuid, name, description, params, steps, created_at, "
	              "updated_at) VALUES (?1,?2,?3,?4,?5,?6,?6) ON CONFLICT(name) DO NOTHING",
	              uuid, name, json_string_value(json_object_get(rec, "description")), params,
	              steps, rp_time_now_ms())) != RP_ERR_OK)
		goto out;
	changed = sql_changes(c);
	if ((e = store_id_of(c, T_RECIPE, name, &id)) != RP_ERR_OK ||
	    (e = store_res_load(c, &recipe_res, id, &row)) != RP_ERR_OK)
		goto out;
	if (changed == 0) {
		e = same_recipe(row, rec)
		            ? RP_ERR_OK
		            : (json_array_append_new(kept, json_string(name)) < 0 ? RP_ERR_INTERNAL
		                                                                  : RP_ERR_OK);
		goto out;
	}
	e = RP_ERR_INTERNAL;
	if ((detail = json_pack("{s:b}", "shipped", 1)) == NULL ||
	    json_array_append_new(loaded, json_string(name)) < 0)
		goto out;
	e = store_res_event(c, &recipe_res, "created", row, 0, 0, detail, "rackpilotd");
out:
	free(params);
	free(steps);
	json_decref(row);
	json_decref(detail);
	return e;
}

/* Whether every shipped recipe's name is taken already (*missing 0), in one read snapshot:
 * then the start writes nothing, and a read-only database starts as before. kept gets the
 * names whose stored recipe differs. */
static enum rp_err
ship_missing(struct rp_store *st, json_t *recipes, json_t *kept, int *missing)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *rec, *row;
	int64_t id;
	size_t i;
	enum rp_err e;

	*missing = 0;
	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	json_array_foreach(recipes, i, rec)
	{
		e = store_id_of(c, T_RECIPE, json_string_value(json_object_get(rec, "name")), &id);
		if (e == RP_ERR_NOT_FOUND) {
			*missing = 1;
			e = RP_ERR_OK;
			break;
		}
		if (e != RP_ERR_OK || (e = store_res_load(c, &recipe_res, id, &row)) != RP_ERR_OK)
			break;
		if (!same_recipe(row, rec) &&
		    json_array_append(kept, json_object_get(rec, "name")) < 0)
			e = RP_ERR_INTERNAL;
		json_decref(row);
		if (e != RP_ERR_OK)
			break;
	}
	store_read_end(c);
	return e;
}

/* store_txn may run this again: it starts from empty out-lists every time. */
static enum rp_err
ship_txn(struct conn *c, void *ctx)
{
	struct ship *sh = ctx;
	json_t *rec;
	size_t i;
	enum rp_err e;

	json_array_clear(sh->loaded);
	json_array_clear(sh->kept);
	json_array_foreach(sh->recipes, i, rec)
	{
		if ((e = ship_one(c, rec, sh->loaded, sh->kept)) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

enum rp_err
rp_store_recipe_ship(struct rp_store *st, int *loaded)
{
	struct ship sh = {json_array(), json_array(), json_array()};
	json_t *rec, *v;
	size_t i;
	int missing;
	enum rp_err e = RP_ERR_INTERNAL;

	if (sh.recipes == NULL || sh.loaded == NULL || sh.kept == NULL)
		goto out;
	for (i = 0; i < rp_shipped_recipe_count; i++) {
		json_error_t err;

		/* The build checked it is JSON; a recipe that is not means a broken build. */
		rec = json_loads(rp_shipped_recipes[i].json, 0, &err);
		if (!json_is_object(rec) || json_array_append_new(sh.recipes, rec) < 0) {
			rp_log_error("shipped recipe %s: %s", rp_shipped_recipes[i].name, err.text);
			goto out;
		}
	}
	if ((e = ship_missing(st, sh.recipes, sh.kept, &missing)) != RP_ERR_OK ||
	    (missing && (e = store_txn(st, ship_txn, &sh)) != RP_ERR_OK))
		goto out;
	/* Logged after the commit: the transaction may have run more than once. */
	json_array_foreach(sh.kept, i, v) rp_log_info(
	        "recipe %s is the operator's; the shipped one is not loaded", json_string_value(v));
	if (json_array_size(sh.loaded) > 0) {
		char *names = json_dumps(sh.loaded, JSON_COMPACT);

		rp_log_info("loaded %zu shipped recipes: %s", json_array_size(sh.loaded),
		            names ? names : "?");
		free(names);
	}
	if (loaded)
		*loaded = (int)json_array_size(sh.loaded);
out:
	json_decref(sh.recipes);
	json_decref(sh.loaded);
	json_decref(sh.kept);
	return e;
}

/* Replace ${name} for every declared name in s. New string. */
static json_t *
expand_string(const char *s, json_t *values)
{
	struct rp_buf b = {0};
	const char *p = s;
	json_t *out;

	while (*p) {
		const char *end;

		if (p[0] == '$' && p[1] == '{' && (end = strchr(p + 2, '}')) != NULL) {
			char name[80];
			size_t n = (size_t)(end - p - 2);
			json_t *v;

			if (n < sizeof name) {
				memcpy(name, p + 2, n);
				name[n] = '\0';
				if ((v = json_object_get(values, name)) != NULL) {
					rp_buf_append(&b, json_string_value(v),
					              json_string_length(v));
					p = end + 1;
					continue;
				}
			}
		}
		rp_buf_append(&b, p, 1);
		p++;
	}
	out = b.oom ? NULL : json_stringn(b.data ? b.data : "", b.len);
	rp_buf_free(&b);
	return out;
}

json_t *
rp_store_recipe_fill(json_t *v, json_t *values)
{
	json_t *out, *e;
	const char *k;
	size_t i;

	if (json_is_string(v))
		return expand_string(json_string_value(v), values);
	if (json_is_array(v)) {
		out = json_array();
		json_array_foreach(v, i, e)
		        json_array_append_new(out, rp_store_recipe_fill(e, values));
		return out;
	}
	if (json_is_object(v)) {
		out = json_object();
		json_object_foreach(v, k, e)
		        json_object_set_new(out, k, rp_store_recipe_fill(e, values));
		return out;
	}
	return json_incref(v);
}

enum rp_err
store_recipe_child(struct conn *c, int64_t job_id, const char *recipe, json_t *args,
                   const char *what, json_t *extra, struct node_ref *n, char *uuid, json_t **params,
                   json_t **detail)
{
	json_t *rec = NULL, *values = json_object(), *plan = NULL, *job = NULL, *p;
	struct stmt *s;
	int64_t rid, node_id, cid = 0;
	char why[256], parent[RP_UUID_BUF] = "";
	const char *k;
	enum rp_err e = RP_ERR_INTERNAL;

	if (values == NULL)
		goto out;
	s = STMT_ARGS(
	        c,
	        "SELECT node_id, uuid FROM jobs WHERE id = ? AND state = 'running' AND node_id "
	        "IS NOT NULL",
	        job_id);
	if ((e = store_one(c, s, "recipe child job")) != RP_ERR_OK)
		goto out;
	node_id = sql_int(s, 0);
	snprintf(parent, sizeof parent, "%s", sql_text(s, 1));
	sql_reset(s);
	if ((e = store_node_by_id(c, node_id, n)) != RP_ERR_OK)
		goto out;
	if ((e = store_id_of(c, T_RECIPE, recipe, &rid)) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			*detail = store_why("recipe", "no recipe named '%s'", recipe);
		goto out;
	}
	s = STMT_ARGS(
	        c,
	        "SELECT params AS \"params:json\", steps AS \"steps:json\" FROM recipes WHERE "
	        "id = ?",
	        rid);
	if ((e = store_one(c, s, "recipe child recipe")) != RP_ERR_OK)
		goto out;
	rec = store_row(c, s);
	sql_reset(s);
	if (rec == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	/* Our arguments where the recipe declares them, else its defaults. */
	json_object_foreach(json_object_get(rec, "params"), k, p)
	{
		json_t *v = json_object_get(args, k), *d = json_object_get(p, "default");

		if (v == NULL && json_is_true(json_object_get(p, "required"))) {
			*detail = store_why("recipe",
			                    "recipe '%s' requires argument '%s', which %s does not "
			                    "supply",
			                    recipe, k, what);
			e = RP_ERR_MISSING_FIELD;
			goto out;
		}
		json_object_set_new(values, k,
		                    json_string(v                   ? json_string_value(v) ?: ""
		                                : json_is_string(d) ? json_string_value(d)
		                                                    : ""));
	}
	plan = rp_store_recipe_fill(json_object_get(rec, "steps"), values);
	if ((e = store_ssh_ready(c, node_id, why, sizeof why)) != RP_ERR_OK) {
		if (e != RP_ERR_INTERNAL)
			*detail = store_why(NULL, "%s", why);
		goto out;
	}
	e = RP_ERR_INTERNAL;
	/* Not mutating: the job that waits for it holds the node's slot. */
	job = json_pack("{s:s, s:{s:O, s:s, s:s}, s:b, s:i}", "type", "steps", "params", "plan",
	                plan, "recipe", recipe, "parent", parent, "mutating", 0, "max_attempts", 8);
	if (job == NULL || json_object_update(json_object_get(job, "params"), extra) < 0)
		goto out;
	if ((e = store_job_add(c, n, 0, job, "rackpilotd", &cid)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c, "SELECT uuid FROM jobs WHERE id = ?", cid);
	if ((e = store_one(c, s, "recipe child")) != RP_ERR_OK)
		goto out;
	snprintf(uuid, RP_UUID_BUF, "%s", sql_text(s, 0));
	sql_reset(s);
	*params = json_incref(json_object_get(job, "params"));
	e = RP_ERR_OK;
out:
	json_decref(rec);
	json_decref(values);
	json_decref(plan);
	json_decref(job);
	return e;
}
