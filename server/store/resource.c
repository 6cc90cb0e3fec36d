/*
 * The one create/get/update/delete skeleton of the resources kept as a row (plus children)
 * with a name, a uuid and a version: racks, recipes, boot profiles, BIOS profiles and
 * firmware baselines. A descriptor (struct store_res) says how to find, load, write and
 * announce one; every action here is one transaction and writes one event.
 */
#include <stdio.h>

#include "internal.h"

enum rp_err
store_res_event(struct conn *c, const struct store_res *r, const char *verb, json_t *obj,
                int64_t node_id, int64_t rack_id, json_t *diff, const char *actor)
{
	char action[64], summary[192];
	const char *name = json_string_value(json_object_get(obj, "name"));

	snprintf(action, sizeof action, "%s.%s", r->otype, verb);
	snprintf(summary, sizeof summary, "%s %s %s", r->noun ? r->noun : r->otype, name, verb);
	return store_event(c, actor, action, r->otype,
	                   json_string_value(json_object_get(obj, "id")), name, node_id, rack_id,
	                   summary, diff);
}

static enum rp_err
event(struct conn *c, struct store_res *r, const char *verb, json_t *obj, int64_t id, json_t *diff,
      const char *actor)
{
	return store_res_event(c, r, verb, obj, 0, r->rack_events ? id : 0, diff, actor);
}

enum rp_err
store_res_load(struct conn *c, struct store_res *r, int64_t id, json_t **out)
{
	struct stmt *s = store_prep(c, &r->s_load, r->sql_load);
	json_t *obj;
	enum rp_err e;

	sql_bind_int(s, 1, id);
	if ((e = store_one(c, s, r->otype)) != RP_ERR_OK)
		return e;
	obj = store_row(c, s);
	sql_reset(s);
	if (obj == NULL)
		return RP_ERR_INTERNAL;
	*out = obj;
	return RP_ERR_OK;
}

enum rp_err
store_res_current(struct conn *c, struct store_res *r, const char *key, int64_t if_match,
                  int64_t *id, json_t **out, json_t **detail)
{
	enum rp_err e;

	if ((e = store_id_of(c, r->table, key, id)) != RP_ERR_OK ||
	    (e = store_res_load(c, r, *id, out)) != RP_ERR_OK)
		return e;
	if (if_match && json_integer_value(json_object_get(*out, "version")) != if_match) {
		*detail = json_pack("{s:O}", "current_version", json_object_get(*out, "version"));
		json_decref(*out);
		*out = NULL;
		return RP_ERR_PRECONDITION_FAILED;
	}
	return RP_ERR_OK;
}

enum rp_err
store_res_insert(struct conn *c, struct store_res *r, json_t *in, const char *actor, int64_t *id,
                 json_t **out, json_t **detail)
{
	json_t *fresh = NULL, *diff = NULL, *empty = NULL;
	int64_t newid = 0;
	enum rp_err e;

	if ((e = r->save(c, r, &newid, in, detail)) != RP_ERR_OK ||
	    (e = store_res_load(c, r, newid, &fresh)) != RP_ERR_OK)
		goto out;
	if (r->created_diff)
		diff = store_diff(empty = json_object(), fresh, r->diff_skip);
	if ((e = event(c, r, "created", fresh, newid, diff, actor)) != RP_ERR_OK)
		goto out;
	*id = newid;
	if (out) {
		*out = fresh;
		fresh = NULL;
	}
out:
	json_decref(fresh);
	json_decref(diff);
	json_decref(empty);
	return e;
}

enum rp_err
store_res_create(struct rp_store *st, struct store_res *r, json_t *in, const char *actor,
                 json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *fresh = NULL;
	int64_t id;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = store_res_insert(c, r, in, actor, &id, &fresh, detail);
	return store_end(c, e, fresh, out);
}

enum rp_err
store_res_get(struct rp_store *st, struct store_res *r, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_id_of(c, r->table, key, &id)) != RP_ERR_OK)
		return e;
	return store_res_load(c, r, id, out);
}

enum rp_err
store_res_update(struct rp_store *st, struct store_res *r, const char *key, json_t *patch,
                 int64_t if_match, const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *before = NULL, *after = NULL, *fresh = NULL, *diff = NULL;
	int64_t id;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_res_current(c, r, key, if_match, &id, &before, detail)) != RP_ERR_OK)
		goto out;
	if ((after = json_deep_copy(before)) == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	if (r->apply)
		r->apply(after, patch);
	else
		store_merge(after, patch);
	if ((e = r->save(c, r, &id, after, detail)) != RP_ERR_OK ||
	    (e = store_res_load(c, r, id, &fresh)) != RP_ERR_OK)
		goto out;
	diff = store_diff(before, fresh, r->diff_skip);
	e = event(c, r, "updated", fresh, id, diff, actor);
out:
	json_decref(before);
	json_decref(after);
	json_decref(diff);
	return store_end(c, e, fresh, out);
}

enum rp_err
store_res_delete(struct rp_store *st, struct store_res *r, const char *key, int64_t if_match,
                 const char *actor, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *before = NULL;
	struct stmt *s;
	int64_t id;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_res_current(c, r, key, if_match, &id, &before, detail)) != RP_ERR_OK)
		goto out;
	if (r->may_delete && (e = r->may_delete(c, r, id, before, detail)) != RP_ERR_OK)
		goto out;
	s = store_prep(c, &r->s_delete, r->sql_delete);
	sql_bind_int(s, 1, id);
	if ((e = store_exec(c, s, r->otype)) != RP_ERR_OK ||
	    (e = event(c, r, "deleted", before, id, NULL, actor)) != RP_ERR_OK)
		goto out;
out:
	json_decref(before);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
store_res_list(struct rp_store *st, struct store_res *r, const struct rp_page_req *rq,
               struct rp_page *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	int i;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (rq->sort_by_name) {
		s = store_prep(c, &r->s_list_name, r->sql_list_name);
		sql_bind_text(s, 1, rq->after_key);
	} else {
		s = store_prep(c, &r->s_list_id, r->sql_list_id);
		sql_bind_int(s, 1, rq->after_id);
	}
	for (i = 0; i < 3 && r->list_filters[i]; i++)
		store_bind_str(s, i + 2, rq->filter, r->list_filters[i]);
	sql_bind_int(s, i + 2, rq->limit + 1);
	return store_page(c, s, rq, "name", out);
}
