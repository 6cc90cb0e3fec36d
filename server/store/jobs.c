/* Jobs and batches; the scheduler's claim and finish; power-sweep readings. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

static enum rp_err
job_id(struct conn *c, const char *uuid, int64_t *id)
{
	enum rp_err e;
	struct stmt *s;

	if (!rp_uuid_valid(uuid))
		return RP_ERR_NOT_FOUND;
	s = STMT_ARGS(c, "SELECT id FROM jobs WHERE uuid = lower(?)", uuid);
	if ((e = store_one(c, s, "job id")) != RP_ERR_OK)
		return e;
	*id = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

/* What else ends with a job, in the job's own transaction, in this order: its open step rows
 * close with its state (steps.c), and a provisioning job moves its node to the state the
 * provisioning asked for (provision.c). A new consequence of a job's end is a row here, not
 * one more call at each place a job ends. */
static enum rp_err
steps_end(struct conn *c, int64_t job_id, const char *state, const char *error)
{
	(void)error;
	return store_steps_close(c, job_id, state);
}

static enum rp_err (*const job_end_hooks[])(struct conn *c, int64_t job_id, const char *state,
                                            const char *error) = {
        steps_end,
        store_provision_settle,
};

enum rp_err
store_job_ended(struct conn *c, int64_t job_id, const char *state, const char *error)
{
	enum rp_err e = RP_ERR_OK;

	for (size_t i = 0; i < sizeof job_end_hooks / sizeof *job_end_hooks && e == RP_ERR_OK; i++)
		e = job_end_hooks[i](c, job_id, state, error);
	return e;
}

enum rp_err
rp_store_job_create(struct rp_store *st, const char *key, json_t *job, const char *actor,
                    json_t **out, json_t **detail)
{
	struct conn *c = NULL;
	struct node_ref n;
	json_t *obj = NULL;
	char why[256], summary[200];
	int64_t id = 0;
	enum rp_err e;

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	if ((e = store_job_ready(c, n.id, job, why, sizeof why)) != RP_ERR_OK) {
		if (e != RP_ERR_INTERNAL)
			*detail = store_why(NULL, "%s", why);
		goto out;
	}
	if ((e = store_job_add(c, &n, 0, job, actor, &id)) != RP_ERR_OK)
		goto out;
	if ((e = store_job_load(c, id, &obj)) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "%s job queued for %s",
	         json_string_value(json_object_get(job, "type")), n.name);
	e = store_event(c, actor, "job.queued", "job",
	                json_string_value(json_object_get(obj, "id")), n.name, n.id, n.rack_id,
	                summary, json_object_get(job, "params"));
out:
	return store_end(c, e, obj, out);
}

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
	struct conn *c = store_conn(st);
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
rp_store_job_get(struct rp_store *st, const char *key, json_t **out)
{
	struct conn *c = NULL;
	int64_t id = 0;
	enum rp_err e;
	json_t *obj = NULL, *steps;
	struct stmt *s;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = job_id(c, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = store_job_load(c, id, &obj)) != RP_ERR_OK)
		goto out;
	if (json_object_get(json_object_get(obj, "params"), "plan")) {
		e = RP_ERR_INTERNAL;
		if ((steps = store_steps_view(c, id)) == NULL)
			goto out;
		json_object_set_new(obj, "steps", steps);
		s = STMT_ARGS(c, "SELECT log_bytes, log_dropped FROM jobs WHERE id = ?", id);
		if ((e = store_one(c, s, "job log size")) != RP_ERR_OK)
			goto out;
		json_object_set_new(obj, "log",
		                    json_pack("{s:I, s:I}", "bytes", (json_int_t)sql_int(s, 0),
		                              "dropped", (json_int_t)sql_int(s, 1)));
		sql_reset(s);
	}
	*out = obj;
	obj = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(obj);
	return e;
}

enum rp_err
rp_store_job_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	struct conn *c = store_conn(st);
	json_t *f = rq->filter;
	const char *node = json_string_value(json_object_get(f, "node"));
	const char *batch = json_string_value(json_object_get(f, "batch"));
	int64_t node_id = 0, batch_id = 0;
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if (node && (e = store_id_of(c, T_NODE, node, &node_id)) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_BAD_QUERY : e;
	if (batch) {
		s = STMT_ARGS(c, "SELECT id FROM batches WHERE uuid = lower(?)", batch);
		if ((e = store_one(c, s, "batch id")) != RP_ERR_OK)
			return e == RP_ERR_NOT_FOUND ? RP_ERR_BAD_QUERY : e;
		batch_id = sql_int(s, 0);
		sql_reset(s);
	}
	s = STMT_ARGS(c,
	              STORE_JOB_COLS
	              "WHERE j.id < ?1 AND (?2 = 0 OR j.node_id = ?2) AND (?3 = 0 OR "
	              "j.batch_id = ?3) AND (?4 IS NULL OR j.state = ?4) AND (?5 IS NULL OR "
	              "j.type = ?5) ORDER BY j.id DESC LIMIT ?6",
	              rq->after_id > 0 ? rq->after_id : INT64_MAX, node_id, batch_id);
	store_bind_str(s, 4, f, "state");
	store_bind_str(s, 5, f, "type");
	sql_bind_int(s, 6, rq->limit + 1);
	return store_page(c, s, rq, "id", out);
}

enum rp_err
rp_store_batch_get(struct rp_store *st, const char *key, json_t **out)
{
	struct conn *c = store_conn(st);
	json_t *counts = NULL, *obj = NULL;
	struct stmt *s;
	int64_t id = 0, total = 0, open = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
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

enum rp_err
rp_store_job_cancel(struct rp_store *st, const char *key, const char *actor, json_t **out,
                    int *running, json_t **detail)
{
	struct conn *c = NULL;
	json_t *obj = NULL;
	struct stmt *s;
	const char *state;
	int64_t id = 0, now = rp_time_now_ms();
	char summary[200];
	int was_running;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = job_id(c, key, &id)) != RP_ERR_OK)
		goto out;
	if ((e = store_job_load(c, id, &obj)) != RP_ERR_OK)
		goto out;
	state = json_string_value(json_object_get(obj, "state"));
	if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0) {
		*detail = store_why(NULL, "job already ended (%s)", state);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	was_running = !strcmp(state, "running");
	s = was_running
	            ? STMT(c, "UPDATE jobs SET cancel_requested = 1, updated_at = ?2 WHERE id = ?1")
	            : STMT(c, "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, "
	                      "finished_at = ?2, updated_at = ?2 WHERE id = ?1");
	sql_bind_int(s, 1, id);
	sql_bind_int(s, 2, now);
	if ((e = store_exec(c, s, "job cancel")) != RP_ERR_OK)
		goto out;
	if (!was_running && (e = store_job_ended(c, id, "cancelled", "cancelled")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "%s job for %s %s",
	         json_string_value(json_object_get(obj, "type")),
	         json_string_value(json_object_get(obj, "node")),
	         was_running ? "asked to stop" : "cancelled");
	if ((e = store_event(c, actor, was_running ? "job.cancel_requested" : "job.cancelled",
	                     "job", json_string_value(json_object_get(obj, "id")),
	                     json_string_value(json_object_get(obj, "node")), 0, 0, summary,
	                     NULL)) != RP_ERR_OK)
		goto out;
	json_decref(obj);
	obj = NULL;
	if ((e = store_job_load(c, id, &obj)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = obj;
	obj = NULL;
	*running = was_running;
out:
	store_rollback(c);
	json_decref(obj);
	return e;
}

enum rp_err
rp_store_jobs_recover(struct rp_store *st, int *n)
{
	struct conn *c = NULL;
	struct stmt *s;
	json_t *list = NULL, *j;
	enum rp_err e;
	size_t i;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "UPDATE jobs SET state = 'queued', recover = 1, lease_owner = NULL, "
	              "lease_until = NULL, updated_at = ?1 WHERE state = 'running' "
	              "RETURNING uuid, type, node_name, node_id",
	              rp_time_now_ms());
	list = json_array();
	while (store_next(c, s, "jobs recover", &e))
		json_array_append_new(list,
		                      json_pack("{s:s, s:s, s:s, s:I}", "uuid", sql_text(s, 0),
		                                "type", sql_text(s, 1), "node", sql_text(s, 2),
		                                "node_id", (json_int_t)sql_int(s, 3)));
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(list, i, j)
	{
		char summary[200];

		if (rp_job_type_find(json_string_value(json_object_get(j, "type"))) == RP_JOB_STEPS)
			snprintf(summary, sizeof summary,
			         "steps job for %s was running when rackpilotd stopped; it resumes "
			         "after "
			         "the steps that succeeded",
			         json_string_value(json_object_get(j, "node")));
		else
			snprintf(summary, sizeof summary,
			         "%s job for %s was running when rackpilotd stopped; it will "
			         "verify, not "
			         "repeat",
			         json_string_value(json_object_get(j, "type")),
			         json_string_value(json_object_get(j, "node")));
		if ((e = store_event(c, "rackpilotd", "job.interrupted", "job",
		                     json_string_value(json_object_get(j, "uuid")),
		                     json_string_value(json_object_get(j, "node")),
		                     json_integer_value(json_object_get(j, "node_id")), 0, summary,
		                     NULL)) != RP_ERR_OK)
			goto out;
	}
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*n = (int)json_array_size(list);
out:
	store_rollback(c);
	json_decref(list);
	return e;
}

static void
bmc_free(struct rp_store_bmc *b)
{
	free(b->driver);
	free(b->address);
	free(b->username);
	rp_secrets_plain_free(b->password, b->password_len);
	json_decref(b->options);
}

void
rp_store_claim_free(struct rp_job_claim *c)
{
	struct rp_job_claim *next;

	for (; c; c = next) {
		next = c->next;
		json_decref(c->params);
		free(c->phase);
		free(c->node.name);
		free(c->node.serial);
		free(c->node.system_uuid);
		bmc_free(&c->bmc);
		free(c);
	}
}

/* A copy of column i, or NULL for SQL NULL; sets *oom when the copy fails. */
static char *
col_dup(struct stmt *s, int i, int *oom)
{
	char *v;

	if (sql_type(s, i) == SQL_NULL)
		return NULL;
	if ((v = strdup(sql_text(s, i))) == NULL)
		*oom = 1;
	return v;
}

/* The BMC of node `name` from columns i.. of s: driver, address, port, username,
 * password_sealed, tls_verify, options. A password that cannot be opened is logged and left
 * NULL (the driver then says the BMC refused the login). */
static void
bmc_cols(struct conn *c, struct stmt *s, int i, const char *name, struct rp_store_bmc *b, int *oom)
{
	const char *sealed = sql_text(s, i + 4);
	char why[256];

	b->driver = col_dup(s, i, oom);
	b->address = col_dup(s, i + 1, oom);
	b->port = (unsigned)sql_int(s, i + 2);
	b->username = col_dup(s, i + 3, oom);
	if (sealed &&
	    (c->st->secrets == NULL || rp_secrets_open(c->st->secrets, sealed, &b->password,
	                                               &b->password_len, why, sizeof why) < 0))
		rp_log_error("node %s: cannot open its BMC password: %s", name,
		             c->st->secrets ? why : "no secret key loaded");
	b->tls_verify = sql_type(s, i + 5) == SQL_NULL || sql_int(s, i + 5);
	if (sql_type(s, i + 6) != SQL_NULL)
		b->options = json_loads(sql_text(s, i + 6), 0, NULL);
}

/* The claim of the row the claim read statement s is on. NULL when out of memory. */
static struct rp_job_claim *
claim_row(struct conn *c, struct stmt *s)
{
	struct rp_job_claim *cl = calloc(1, sizeof *cl);
	int oom = 0;

	if (cl == NULL)
		return NULL;
	cl->id = sql_int(s, 0);
	snprintf(cl->uuid, sizeof cl->uuid, "%s", sql_text(s, 1));
	snprintf(cl->type_name, sizeof cl->type_name, "%s", sql_text(s, 2));
	cl->type = rp_job_type_find(cl->type_name);
	cl->params = json_loads(sql_text(s, 3), 0, NULL) ?: json_object();
	cl->recover = sql_int(s, 4);
	cl->attempts = sql_int(s, 5);
	cl->max_attempts = sql_int(s, 6);
	cl->node.id = sql_int(s, 7);
	snprintf(cl->node.uuid, sizeof cl->node.uuid, "%s", sql_text(s, 8));
	cl->node.name = col_dup(s, 9, &oom);
	cl->node.serial = col_dup(s, 10, &oom);
	cl->node.system_uuid = col_dup(s, 11, &oom);
	bmc_cols(c, s, 12, cl->node.name, &cl->bmc, &oom);
	cl->sent = sql_int(s, 19);
	cl->phase = col_dup(s, 20, &oom);
	cl->phase_at = sql_int(s, 21);
	if (oom || cl->params == NULL) {
		rp_store_claim_free(cl);
		return NULL;
	}
	return cl;
}

enum rp_err
rp_store_jobs_take(struct rp_store *st, const char *owner, enum rp_job_lane lane, int max,
                   int64_t lease_ms, struct rp_job_claim **out)
{
	struct conn *c = NULL;
	struct stmt *s;
	json_t *ids = NULL, *v;
	struct rp_job_claim *head = NULL, **tail = &head, *cl;
	int64_t now = rp_time_now_ms();
	enum rp_err e;
	size_t i;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	/* FIFO per node: a mutating job waits while an older one for its node is queued or
	 * running, so "PXE, then cycle" never runs out of order. */
	s = STMT_ARGS(
	        c,
	        "SELECT j.id FROM jobs j WHERE j.state = 'queued' AND j.not_before <= ?1 "
	        "AND j.node_id IS NOT NULL AND (j.mutating = 0 OR (NOT EXISTS (SELECT 1 FROM jobs "
	        "r WHERE r.node_id = j.node_id AND r.state = 'running' AND r.mutating = 1) AND "
	        "NOT EXISTS (SELECT 1 FROM jobs q WHERE q.node_id = j.node_id AND q.mutating = 1 "
	        "AND q.state = 'queued' AND q.id < j.id))) AND (j.type IN " STORE_SSH_TYPES_SQL
	        ") = ?3 "
	        "ORDER BY j.id LIMIT ?2",
	        now, max, lane == RP_JOB_LANE_SSH);
	ids = json_array();
	while (store_next(c, s, "claim select", &e))
		json_array_append_new(ids, json_integer(sql_int(s, 0)));
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(ids, i, v)
	{
		if ((e = EXEC(c, "claim",
		              "UPDATE jobs SET state = 'running', attempts = attempts + 1, "
		              "lease_owner "
		              "= ?2, "
		              "lease_until = ?3, started_at = coalesce(started_at, ?4), updated_at "
		              "= ?4 "
		              "WHERE id = ?1 AND state = 'queued'",
		              json_integer_value(v), owner, now + lease_ms, now)) != RP_ERR_OK)
			goto out;
		s = STMT_ARGS(
		        c,
		        "SELECT j.id, j.uuid, j.type, j.params, j.recover, j.attempts, "
		        "j.max_attempts, n.id, n.uuid, n.name, n.serial, n.system_uuid, b.driver, "
		        "b.address, b.port, b.username, b.password_sealed, b.tls_verify, "
		        "b.options, "
		        "j.sent_at IS NOT NULL, j.phase, coalesce(j.phase_at, 0) "
		        "FROM jobs j JOIN nodes n ON n.id = j.node_id LEFT JOIN bmcs b ON "
		        "b.node_id = n.id WHERE j.id = ?",
		        json_integer_value(v));
		if ((e = store_one(c, s, "claim read")) != RP_ERR_OK)
			goto out;
		cl = claim_row(c, s);
		sql_reset(s);
		if (cl == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		*tail = cl;
		tail = &cl->next;
	}
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = head;
	head = NULL;
out:
	store_rollback(c);
	json_decref(ids);
	rp_store_claim_free(head);
	return e;
}

enum rp_err
rp_store_jobs_claim(struct rp_store *st, const char *owner, int ssh, int max, int64_t lease_ms,
                    json_t **out)
{
	struct rp_job_claim *head = NULL, *cl;
	json_t *claimed;
	enum rp_err e;

	e = rp_store_jobs_take(st, owner, ssh ? RP_JOB_LANE_SSH : RP_JOB_LANE_BMC, max, lease_ms,
	                       &head);
	if (e != RP_ERR_OK)
		return e;
	claimed = json_array();
	for (cl = head; cl; cl = cl->next) {
		json_t *bmc =
		        json_pack("{s:s?, s:s?, s:I, s:s?, s:b}", "driver", cl->bmc.driver,
		                  "address", cl->bmc.address, "port", (json_int_t)cl->bmc.port,
		                  "username", cl->bmc.username, "tls_verify", cl->bmc.tls_verify);
		json_t *o;

		if (cl->bmc.options)
			json_object_set(bmc, "options", cl->bmc.options);
		o = json_pack("{s:I, s:s, s:s, s:O, s:b, s:b, s:i, s:i, s:{s:I, s:s, s:s?, s:s?, "
		              "s:s?}, s:o, s:I}",
		              "id", (json_int_t)cl->id, "uuid", cl->uuid, "type", cl->type_name,
		              "params", cl->params, "recover", cl->recover, "sent", cl->sent,
		              "attempts", cl->attempts, "max_attempts", cl->max_attempts, "node",
		              "id", (json_int_t)cl->node.id, "uuid", cl->node.uuid, "name",
		              cl->node.name, "serial", cl->node.serial, "system_uuid",
		              cl->node.system_uuid, "bmc", bmc, "phase_at",
		              (json_int_t)cl->phase_at);
		if (o && cl->phase)
			json_object_set_new(o, "phase", json_string(cl->phase));
		json_array_append_new(claimed, o);
	}
	rp_store_claim_free(head);
	*out = claimed;
	return RP_ERR_OK;
}

/* A power state seen at the node's BMC: store it, with an event when it changed. */
static enum rp_err
power_seen(struct conn *c, const struct node_ref *n, const char *power, int64_t now, int *changed)
{
	enum rp_err e;
	struct stmt *s = STMT(c, "SELECT power_state FROM nodes WHERE id = ?");
	char before[16] = "", summary[200];

	sql_bind_int(s, 1, n->id);
	if ((e = store_one(c, s, "power read")) != RP_ERR_OK)
		return e;
	snprintf(before, sizeof before, "%s", sql_text(s, 0));
	sql_reset(s);
	s = STMT_ARGS(c, "UPDATE nodes SET power_state = ?2, power_state_at = ?3 WHERE id = ?1",
	              n->id, power, now);
	if ((e = store_exec(c, s, "power write")) != RP_ERR_OK)
		return e;
	if (strcmp(before, power) == 0)
		return RP_ERR_OK;
	if (changed)
		(*changed)++;
	snprintf(summary, sizeof summary, "%s power %s -> %s", n->name, before, power);
	{
		json_t *d = json_pack("{s:s, s:s}", "from", before, "to", power);
		e = store_event(c, "rackpilotd", "node.power", "node", n->uuid, n->name, n->id,
		                n->rack_id, summary, d);

		json_decref(d);
		return e;
	}
}

/* One contact with a node's BMC: reset or count failures; raise or clear the fault. */
static enum rp_err
bmc_health(struct conn *c, const struct node_ref *n, int ok, const char *error, int threshold,
           int64_t now)
{
	struct stmt *s;
	char summary[400];
	int failures, had_fault;
	enum rp_err e;

	s = STMT_ARGS(c, "SELECT failures, fault IS NOT NULL FROM bmcs WHERE node_id = ?", n->id);
	if ((e = store_one(c, s, "bmc health")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e;
	failures = sql_int(s, 0);
	had_fault = sql_int(s, 1);
	sql_reset(s);
	failures = ok ? 0 : failures + 1;
	s = STMT_ARGS(c,
	              "UPDATE bmcs SET failures = ?2, checked_at = ?3, last_error = ?4, "
	              "fault = CASE WHEN ?2 = 0 THEN NULL WHEN ?2 >= ?5 THEN ?4 ELSE fault END, "
	              "fault_since = CASE WHEN ?2 = 0 THEN NULL WHEN ?2 >= ?5 THEN "
	              "coalesce(fault_since, ?3) ELSE fault_since END WHERE node_id = ?1",
	              n->id, failures, now, ok ? NULL : error, threshold);
	if ((e = store_exec(c, s, "bmc health write")) != RP_ERR_OK)
		return e;
	if (!ok && !had_fault && failures >= threshold) {
		snprintf(summary, sizeof summary, "BMC of %s failed %d times in a row: %s", n->name,
		         failures, error ? error : "");
		e = store_event(c, "rackpilotd", "node.bmc_fault", "node", n->uuid, n->name, n->id,
		                n->rack_id, summary, NULL);
	} else if (ok && had_fault) {
		snprintf(summary, sizeof summary, "BMC of %s answers again", n->name);
		e = store_event(c, "rackpilotd", "node.bmc_recovered", "node", n->uuid, n->name,
		                n->id, n->rack_id, summary, NULL);
	}
	return e;
}

static const char *const end_names[] = {
        [RP_JOB_END_SUCCEEDED] = "succeeded",
        [RP_JOB_END_FAILED] = "failed",
        [RP_JOB_END_CANCELLED] = "cancelled",
        [RP_JOB_END_RETRY] = "retry",
};

const char *
rp_store_job_end_name(enum rp_job_end e)
{
	return e >= 0 && e <= RP_JOB_END_RETRY ? end_names[e] : "failed";
}

struct rp_job_outcome *
rp_store_outcome_new(int64_t id, enum rp_job_end state)
{
	struct rp_job_outcome *o = calloc(1, sizeof *o);

	if (o == NULL)
		return NULL;
	o->id = id;
	o->state = state;
	o->bmc_ok = -1;
	return o;
}

void
rp_store_outcome_free(struct rp_job_outcome *o)
{
	struct rp_job_outcome *next;

	for (; o; o = next) {
		next = o->next;
		json_decref(o->result);
		json_decref(o->identity);
		free(o->error_code);
		free(o->error);
		free(o);
	}
}

enum rp_err
rp_store_jobs_record(struct rp_store *st, const struct rp_job_outcome *o, int fault_threshold)
{
	struct conn *c = NULL;
	char *cancelled = NULL;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	for (; o; o = o->next) {
		const char *state = rp_store_job_end_name(o->state);
		const char *power = o->power[0] ? o->power : NULL, *error = o->error;
		const char *error_code = o->error_code;
		json_t *result = o->result, *job = NULL, *identity = o->identity;
		int64_t id = o->id, now = rp_time_now_ms();
		int64_t node_id = 0;
		char *rtext = NULL, summary[300], action[40];
		struct node_ref n;
		struct stmt *s;
		int retry = o->state == RP_JOB_END_RETRY;

		s = STMT_ARGS(c,
		              "SELECT node_id, cancel_requested FROM jobs WHERE id = ? AND state = "
		              "'running'",
		              id);
		if ((e = store_one(c, s, "job finish read")) == RP_ERR_NOT_FOUND)
			continue; /* not ours any more */
		if (e != RP_ERR_OK)
			goto out;
		node_id = sql_int(s, 0);
		/* A retry of a job someone cancelled ends as cancelled instead. */
		if (retry && sql_int(s, 1)) {
			retry = 0;
			state = "cancelled";
			free(cancelled);
			if (asprintf(&cancelled,
			             "cancelled while waiting to retry (last error: %s)",
			             error ?: "none") < 0) {
				cancelled = NULL;
				sql_reset(s);
				e = RP_ERR_INTERNAL;
				goto out;
			}
			error = cancelled;
			error_code = "cancelled";
		}
		sql_reset(s);
		if (retry) {
			/* sent_at stays: should rackpilotd stop before the retry, the job still
			 * knows it may have acted, and verifies instead of sending again. */
			/* A wait (for a node to come back from a reboot) is no failed attempt. */
			s = STMT(c,
			         "UPDATE jobs SET state = 'queued', error_code = ?2, error = ?3, "
			         "not_before = ?4, lease_owner = NULL, lease_until = NULL, "
			         "updated_at = ?5, "
			         "attempts = attempts - ?6 WHERE id = ?1");
			sql_bind_int(s, 4, o->not_before);
			sql_bind_int(s, 6, o->wait != 0);
		} else {
			s = STMT(c, "UPDATE jobs SET state = ?6, error_code = ?2, error = ?3, "
			            "result = ?7, "
			            "finished_at = ?5, lease_owner = NULL, lease_until = NULL, "
			            "updated_at = ?5 "
			            "WHERE id = ?1");
			sql_bind_text(s, 6, state);
			if (result && (rtext = store_canon(result)) != NULL)
				sql_bind_text_own(s, 7, rtext);
		}
		sql_bind_int(s, 1, id);
		sql_bind_text(s, 2, error_code);
		sql_bind_text(s, 3, error);
		sql_bind_int(s, 5, now);
		if ((e = store_exec(c, s, "job finish")) != RP_ERR_OK)
			goto out;
		if (node_id == 0 || (e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK) {
			if (node_id == 0)
				continue;
			goto out;
		}
		if (power && (e = power_seen(c, &n, power, now, NULL)) != RP_ERR_OK)
			goto out;
		if (json_is_object(identity)) {
			char *itext = store_canon(identity);

			if (itext == NULL) {
				e = RP_ERR_INTERNAL;
				goto out;
			}
			s = STMT(c, "UPDATE bmcs SET identity = ? WHERE node_id = ?");
			sql_bind_text_own(s, 1, itext);
			sql_bind_int(s, 2, node_id);
			if ((e = store_exec(c, s, "identity")) != RP_ERR_OK)
				goto out;
		}
		if (o->bmc_ok >= 0 &&
		    (e = bmc_health(c, &n, o->bmc_ok, error, fault_threshold, now)) != RP_ERR_OK)
			goto out;
		if (retry)
			continue;
		if ((e = store_job_ended(c, id, state, error)) != RP_ERR_OK)
			goto out;
		if ((e = store_job_load(c, id, &job)) != RP_ERR_OK)
			goto out;
		snprintf(action, sizeof action, "job.%s", state);
		if (!strcmp(state, "succeeded"))
			snprintf(summary, sizeof summary, "%s job for %s succeeded",
			         json_string_value(json_object_get(job, "type")), n.name);
		else
			snprintf(summary, sizeof summary, "%s job for %s %s: %s",
			         json_string_value(json_object_get(job, "type")), n.name, state,
			         error ?: "");
		e = store_event(c, "rackpilotd", action, "job",
		                json_string_value(json_object_get(job, "id")), n.name, n.id,
		                n.rack_id, summary, result);
		json_decref(job);
		if (e != RP_ERR_OK)
			goto out;
	}
	e = store_commit(c);
out:
	store_rollback(c);
	free(cancelled);
	return e;
}

/* A copy of o's string member key, or NULL when it has none; sets *oom when the copy fails. */
static char *
member_dup(json_t *o, const char *key, int *oom)
{
	const char *v = json_string_value(json_object_get(o, key));
	char *d;

	if (v == NULL)
		return NULL;
	if ((d = strdup(v)) == NULL)
		*oom = 1;
	return d;
}

enum rp_err
rp_store_jobs_finish(struct rp_store *st, json_t *outcomes, int fault_threshold)
{
	struct rp_job_outcome *head = NULL, **tail = &head, *t;
	enum rp_err e = RP_ERR_INTERNAL;
	json_t *o;
	size_t i;
	int oom = 0;

	json_array_foreach(outcomes, i, o)
	{
		const char *state = json_string_value(json_object_get(o, "state")) ?: "";
		const char *power = json_string_value(json_object_get(o, "power"));
		json_t *ok = json_object_get(o, "bmc_ok");
		enum rp_job_end end = !strcmp(state, "succeeded")   ? RP_JOB_END_SUCCEEDED
		                      : !strcmp(state, "cancelled") ? RP_JOB_END_CANCELLED
		                      : !strcmp(state, "retry")     ? RP_JOB_END_RETRY
		                                                    : RP_JOB_END_FAILED;

		if ((t = rp_store_outcome_new(json_integer_value(json_object_get(o, "id")), end)) ==
		    NULL)
			goto out;
		*tail = t;
		tail = &t->next;
		t->result = json_incref(json_object_get(o, "result"));
		t->identity = json_incref(json_object_get(o, "identity"));
		t->error_code = member_dup(o, "error_code", &oom);
		t->error = member_dup(o, "error", &oom);
		t->not_before = json_integer_value(json_object_get(o, "not_before"));
		t->wait = json_is_true(json_object_get(o, "wait"));
		snprintf(t->power, sizeof t->power, "%s", power ?: "");
		t->bmc_ok = json_is_boolean(ok) ? json_is_true(ok) : -1;
		if (oom)
			goto out;
	}
	e = rp_store_jobs_record(st, head, fault_threshold);
out:
	rp_store_outcome_free(head);
	return e;
}

enum rp_err
rp_store_power_targets(struct rp_store *st, struct rp_power_target **out, size_t *n)
{
	struct conn *c = store_conn(st);
	struct rp_power_target *list = NULL, *t;
	size_t len = 0, cap = 0;
	struct stmt *s;
	enum rp_err e = RP_ERR_OK;
	int oom = 0;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	s = STMT(c,
	         "SELECT n.id, n.uuid, n.name, b.driver, b.address, b.port, b.username, "
	         "b.password_sealed, b.tls_verify, b.options FROM nodes n JOIN bmcs b ON "
	         "b.node_id = n.id WHERE n.maintenance = 0 AND (b.driver = 'fake' OR (b.address IS "
	         "NOT NULL AND b.username IS NOT NULL AND b.password_sealed IS NOT NULL)) ORDER BY "
	         "n.id");
	while (!oom && store_next(c, s, "power targets", &e)) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 256;

			if ((t = realloc(list, ncap * sizeof *t)) == NULL) {
				oom = 1;
				break;
			}
			list = t;
			cap = ncap;
		}
		t = &list[len++];
		memset(t, 0, sizeof *t);
		t->id = sql_int(s, 0);
		snprintf(t->uuid, sizeof t->uuid, "%s", sql_text(s, 1));
		t->name = col_dup(s, 2, &oom);
		bmc_cols(c, s, 3, t->name, &t->bmc, &oom);
	}
	if (oom)
		sql_reset(s); /* left before its end */
	if (oom || e != RP_ERR_OK) {
		rp_store_power_targets_free(list, len);
		return oom ? RP_ERR_INTERNAL : e;
	}
	*out = list;
	*n = len;
	return RP_ERR_OK;
}

void
rp_store_power_targets_free(struct rp_power_target *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		free(t[i].name);
		bmc_free(&t[i].bmc);
	}
	free(t);
}

enum rp_err
rp_store_power_record(struct rp_store *st, json_t *readings, int fault_threshold, int *changed)
{
	struct conn *c = NULL;
	json_t *r;
	size_t i;
	int64_t now = rp_time_now_ms();
	enum rp_err e;
	int n_changed = 0;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	json_array_foreach(readings, i, r)
	{
		struct node_ref n;
		const char *power = json_string_value(json_object_get(r, "power"));
		int ok = json_is_true(json_object_get(r, "ok"));

		e = store_node_by_id(c, json_integer_value(json_object_get(r, "id")), &n);
		if (e == RP_ERR_NOT_FOUND)
			continue; /* deleted during the sweep */
		if (e != RP_ERR_OK)
			goto out;
		if (ok && power && (e = power_seen(c, &n, power, now, &n_changed)) != RP_ERR_OK)
			goto out;
		if ((e = bmc_health(c, &n, ok, json_string_value(json_object_get(r, "error")),
		                    fault_threshold, now)) != RP_ERR_OK)
			goto out;
	}
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*changed = n_changed;
out:
	store_rollback(c);
	return e;
}
