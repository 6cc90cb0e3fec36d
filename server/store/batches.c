/* Batches: a job per node a selector picks (store_select_nodes, which rollouts also use), in
 * one transaction, and their progress. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

/* The node ids a selector picks, in id order (see store/internal.h). */
enum rp_err
store_select_nodes(struct conn *c, json_t *sel, json_t **ids, json_t **detail)
{
	json_t *list = json_array(), *v;
	struct stmt *s = NULL;
	const char *k, *which = NULL;
	size_t i, nkeys = 0;
	int64_t id = 0;
	enum rp_err e;

	json_object_foreach(sel, k, v)
	{
		nkeys++;
		which = k;
	}
	if (nkeys != 1) {
		*detail = store_why("selector", "give exactly one of rack, tag, class or nodes");
		e = RP_ERR_BAD_REQUEST;
		goto fail;
	}
	v = json_object_get(sel, which);
	if (!strcmp(which, "nodes")) {
		if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 100000) {
			*detail = store_why("selector.nodes",
			                    "must be a non-empty array of node names or ids");
			e = RP_ERR_BAD_REQUEST;
			goto fail;
		}
		json_t *item;

		json_array_foreach(v, i, item)
		{
			e = json_is_string(item)
			            ? store_id_of(c, T_NODE, json_string_value(item), &id)
			            : RP_ERR_NOT_FOUND;
			if (e == RP_ERR_NOT_FOUND) {
				*detail = json_pack("{s:s, s:s, s:O}", "field", "selector.nodes",
				                    "reason", "no such node", "node", item);
				e = RP_ERR_BAD_REQUEST;
				goto fail;
			}
			if (e != RP_ERR_OK)
				goto fail;
			/* A node named twice (by name and by UUID, say) gets one job. */
			{
				size_t seen;
				json_t *x;
				int dup = 0;

				json_array_foreach(list, seen, x) dup |=
				        json_integer_value(x) == id;
				if (!dup)
					json_array_append_new(list, json_integer(id));
			}
		}
		*ids = list;
		return RP_ERR_OK;
	}
	if (!json_is_string(v)) {
		*detail = store_why("selector", "%s must be a string", which);
		e = RP_ERR_BAD_REQUEST;
		goto fail;
	}
	if (!strcmp(which, "rack")) {
		if ((e = store_id_of(c, T_RACK, json_string_value(v), &id)) != RP_ERR_OK) {
			if (e == RP_ERR_NOT_FOUND) {
				*detail = store_why("selector.rack", "no rack named '%s'",
				                    json_string_value(v));
				e = RP_ERR_BAD_REQUEST;
			}
			goto fail;
		}
		s = STMT_ARGS(c, "SELECT id FROM nodes WHERE rack_id = ? ORDER BY id", id);
	} else if (!strcmp(which, "tag")) {
		s = STMT_ARGS(c, "SELECT node_id FROM node_tags WHERE tag = ? ORDER BY node_id",
		              json_string_value(v));
	} else if (!strcmp(which, "class")) {
		s = STMT_ARGS(c, "SELECT id FROM nodes WHERE node_class = ? ORDER BY id",
		              json_string_value(v));
	} else {
		*detail = store_why("selector", "unknown selector '%s' (rack, tag, class or nodes)",
		                    which);
		e = RP_ERR_BAD_REQUEST;
		goto fail;
	}
	while (store_next(c, s, "selector", &e))
		json_array_append_new(list, json_integer(sql_int(s, 0)));
	if (e != RP_ERR_OK)
		goto fail;
	if (json_array_size(list) == 0) {
		*detail = store_why("selector", "%s '%s' matches no node", which,
		                    json_string_value(v));
		e = RP_ERR_BAD_REQUEST;
		goto fail;
	}
	*ids = list;
	return RP_ERR_OK;
fail:
	json_decref(list);
	return e;
}

enum rp_err
rp_store_batch_create(struct rp_store *st, const char *kind, json_t *selector, json_t *job,
                      const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	json_t *ids = NULL, *skipped = json_array(), *jobs = json_array(), *v, *params = NULL;
	char buuid[RP_UUID_BUF], why[256], summary[200], *ptext = NULL;
	int64_t batch_id, id;
	struct stmt *s;
	struct node_ref n;
	enum rp_err e;
	size_t i;

	if (c == NULL) {
		e = RP_ERR_INTERNAL;
		goto done;
	}
	if ((e = store_begin(c)) != RP_ERR_OK)
		goto done;
	if ((e = store_select_nodes(c, selector, &ids, detail)) != RP_ERR_OK)
		goto out;
	params = json_pack("{s:O, s:O}", "selector", selector, "job",
	                   json_object_get(job, "params"));
	if (rp_uuid_new(buuid) < 0 || params == NULL || (ptext = store_canon(params)) == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	s = STMT_ARGS(c,
	              "INSERT INTO batches(uuid, kind, params, created_by, created_at) "
	              "VALUES (?,?,?,?,?)",
	              buuid, kind, ptext, actor, rp_time_now_ms());
	if ((e = store_exec(c, s, "batch insert")) != RP_ERR_OK)
		goto out;
	batch_id = sql_last_id(c);
	json_array_foreach(ids, i, v)
	{
		if ((e = store_node_by_id(c, json_integer_value(v), &n)) != RP_ERR_OK)
			goto out;
		e = store_job_ready(c, n.id, job, why, sizeof why);
		if (e == RP_ERR_INVALID_STATE || e == RP_ERR_CONFLICT) {
			json_array_append_new(
			        skipped, json_pack("{s:s, s:s}", "node", n.name, "reason", why));
			continue;
		}
		if (e != RP_ERR_OK)
			goto out;
		if ((e = store_job_add(c, &n, batch_id, job, actor, &id)) != RP_ERR_OK)
			goto out;
		json_array_append_new(jobs, json_integer(id));
	}
	if (json_array_size(jobs) == 0) {
		*detail = json_pack("{s:s, s:O}", "reason", "no selected node can take the action",
		                    "skipped", skipped);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	{
		char *sk = json_dumps(skipped, JSON_COMPACT);

		if (sk == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		s = STMT(c, "UPDATE batches SET skipped = ? WHERE id = ?");
		sql_bind_text_own(s, 1, sk);
		sql_bind_int(s, 2, batch_id);
		if ((e = store_exec(c, s, "batch skipped")) != RP_ERR_OK)
			goto out;
	}
	snprintf(summary, sizeof summary, "%s batch: %zu job(s) queued, %zu node(s) skipped", kind,
	         json_array_size(jobs), json_array_size(skipped));
	if ((e = store_event(c, actor, "batch.created", "batch", buuid, NULL, 0, 0, summary,
	                     params)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = json_pack("{s:s, s:s, s:O, s:I, s:O, s:{s:I}}", "id", buuid, "kind", kind, "params",
	                 params, "jobs", (json_int_t)json_array_size(jobs), "skipped", skipped,
	                 "counts", "queued", (json_int_t)json_array_size(jobs));
out:
	store_rollback(c);
done:
	json_decref(ids);
	json_decref(skipped);
	json_decref(jobs);
	json_decref(params);
	free(ptext);
	return e;
}

enum rp_err
rp_store_batch_get(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *counts = NULL, *obj = NULL;
	struct stmt *s;
	int64_t id = 0, total = 0, open = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (!rp_uuid_valid(key))
		return RP_ERR_NOT_FOUND;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT id AS _id, uuid AS id, kind, params AS \"params:json\", created_by, "
	              "created_at AS \"created_at:time\", skipped AS \"skipped:json\" FROM batches "
	              "WHERE uuid = lower(?)",
	              key);
	if ((e = store_one(c, s, "batch")) != RP_ERR_OK)
		goto out;
	id = sql_int(s, 0);
	obj = store_row(c, s);
	sql_reset(s);
	s = STMT_ARGS(c, "SELECT state, count(*) FROM jobs WHERE batch_id = ? GROUP BY state", id);
	counts = json_pack("{s:i, s:i, s:i, s:i, s:i}", "queued", 0, "running", 0, "succeeded", 0,
	                   "failed", 0, "cancelled", 0);
	while (store_next(c, s, "batch counts", &e)) {
		const char *state = sql_text(s, 0);
		int64_t n = sql_int(s, 1);

		json_object_set_new(counts, state, json_integer(n));
		total += n;
		if (!strcmp(state, "queued") || !strcmp(state, "running"))
			open += n;
	}
	if (e != RP_ERR_OK)
		goto out;
	json_object_set_new(obj, "total", json_integer(total));
	json_object_set(obj, "counts", counts);
	json_object_set_new(obj, "done", json_boolean(open == 0));
	*out = obj;
	obj = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(obj);
	json_decref(counts);
	return e;
}
