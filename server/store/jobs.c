/* Jobs: creation, views, cancellation, recovery after a restart, the scheduler's claim and
 * the recording of outcomes. Batches are in batches.c, BMC columns and power readings in
 * bmcs.c. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

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

/* A job's secret payload (a deploy's user data) is needed while it runs, never after. */
static enum rp_err
secret_end(struct conn *c, int64_t job_id, const char *state, const char *error)
{
	(void)state, (void)error;
	return store_exec(c,
	                  STMT_ARGS(c,
	                            "UPDATE jobs SET secret_sealed = NULL WHERE id = ? AND "
	                            "secret_sealed IS NOT NULL",
	                            job_id),
	                  "job secret wipe");
}

static enum rp_err (*const job_end_hooks[])(struct conn *c, int64_t job_id, const char *state,
                                            const char *error) = {
        steps_end,
        secret_end,
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
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	json_t *obj = NULL;
	char why[256];
	enum rp_err e;

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	if ((e = store_job_ready(c, n.id, job, why, sizeof why)) != RP_ERR_OK) {
		if (e != RP_ERR_INTERNAL)
			*detail = store_why(NULL, "%s", why);
		goto out;
	}
	e = store_job_queue(c, &n, job, actor, &obj);
out:
	return store_end(c, e, obj, out);
}

enum rp_err
store_job_queue(struct conn *c, const struct node_ref *n, json_t *job, const char *actor,
                json_t **out)
{
	json_t *obj = NULL;
	char summary[200];
	int64_t id = 0;
	enum rp_err e;

	if ((e = store_job_add(c, n, 0, job, actor, &id)) != RP_ERR_OK ||
	    (e = store_job_load(c, id, &obj)) != RP_ERR_OK)
		return e;
	snprintf(summary, sizeof summary, "%s job queued for %s",
	         json_string_value(json_object_get(job, "type")), n->name);
	e = store_event(c, actor, "job.queued", "job",
	                json_string_value(json_object_get(obj, "id")), n->name, n->id, n->rack_id,
	                summary, json_object_get(job, "params"));
	if (e != RP_ERR_OK) {
		json_decref(obj);
		return e;
	}
	*out = obj;
	return RP_ERR_OK;
}

enum rp_err
rp_store_job_get(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	int64_t id = 0;
	enum rp_err e;
	json_t *obj = NULL, *steps;
	struct stmt *s;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_JOB, key, &id)) != RP_ERR_OK)
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
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *f = rq->filter;
	const char *node = json_string_value(json_object_get(f, "node"));
	const char *batch = json_string_value(json_object_get(f, "batch"));
	int64_t node_id = 0, batch_id = 0;
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
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
rp_store_job_cancel(struct rp_store *st, const char *key, const char *actor, json_t **out,
                    int *running, json_t **detail)
{
	STORE_HOLD(st);
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
	if ((e = store_id_of(c, T_JOB, key, &id)) != RP_ERR_OK)
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

/* The running jobs nobody holds: leased to self (an earlier run of this server: it is
 * starting, so none of them is running here), to an owner of the time before leases were
 * renewed ("rackpilotd/PID", always the one server of its database), or with a lease run out.
 * ?1: now, ?2: self or NULL. */
#define UNHELD                                                                                     \
	"state = 'running' AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < ?1 "   \
	"OR lease_owner = ?2 OR (?2 IS NOT NULL AND lease_owner LIKE 'rackpilotd/%'))"

enum rp_err
rp_store_jobs_recover(struct rp_store *st, const char *self, int *n)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *list = NULL, *j;
	int64_t now = rp_time_now_ms();
	enum rp_err e;
	size_t i;

	/* The periodic look (self NULL) reads first: most of the time there is nothing to take,
	 * and a read costs no write transaction. */
	if (self == NULL) {
		c = store_conn(st);
		s = STMT_ARGS(c, "SELECT EXISTS (SELECT 1 FROM jobs WHERE " UNHELD ")", now, self);
		if ((e = store_one(c, s, "jobs expired")) != RP_ERR_OK)
			return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
		i = (size_t)sql_int(s, 0);
		sql_reset(s);
		if (i == 0) {
			*n = 0;
			return RP_ERR_OK;
		}
	}
	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	/* The owners before the update: RETURNING shows the row after it. */
	s = STMT_ARGS(c,
	              "SELECT uuid, type, node_name, node_id, lease_owner FROM jobs WHERE " UNHELD
	              " ORDER BY id",
	              now, self);
	list = json_array();
	while (store_next(c, s, "jobs recover", &e))
		json_array_append_new(
		        list, json_pack("{s:s, s:s, s:s, s:I, s:s?}", "uuid", sql_text(s, 0),
		                        "type", sql_text(s, 1), "node", sql_text(s, 2), "node_id",
		                        (json_int_t)sql_int(s, 3), "owner", sql_text(s, 4)));
	if (e != RP_ERR_OK)
		goto out;
	if ((e = EXEC(c, "jobs recover",
	              "UPDATE jobs SET state = 'queued', recover = 1, lease_owner = NULL, "
	              "lease_until = NULL, updated_at = ?1 WHERE " UNHELD,
	              now, self)) != RP_ERR_OK)
		goto out;
	json_array_foreach(list, i, j)
	{
		const char *owner = json_string_value(json_object_get(j, "owner"));
		char summary[300], where[120];

		/* Whose it was: this server's earlier run, or another that stopped renewing. */
		if (self &&
		    (owner == NULL || !strcmp(owner, self) || !strncmp(owner, "rackpilotd/", 11)))
			snprintf(where, sizeof where, "when rackpilotd stopped");
		else
			snprintf(where, sizeof where, "on %s, whose lease on it ran out",
			         owner ? owner : "a server");
		if (rp_job_type_find(json_string_value(json_object_get(j, "type"))) == RP_JOB_STEPS)
			snprintf(summary, sizeof summary,
			         "steps job for %s was running %s; it resumes after the steps that "
			         "succeeded",
			         json_string_value(json_object_get(j, "node")), where);
		else
			snprintf(summary, sizeof summary,
			         "%s job for %s was running %s; it will verify, not repeat",
			         json_string_value(json_object_get(j, "type")),
			         json_string_value(json_object_get(j, "node")), where);
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

enum rp_err
rp_store_jobs_renew(struct rp_store *st, const char *owner, json_t *held, int64_t lease_ms,
                    json_t **renewed)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	char *text = json_dumps(held, JSON_COMPACT);
	json_t *ids;
	enum rp_err e;

	if (text == NULL)
		return RP_ERR_INTERNAL;
	ids = json_array();
	/* One statement: its own transaction. */
	s = STMT_ARGS(
	        c,
	        "UPDATE jobs SET lease_until = ?3 WHERE state = 'running' AND lease_owner = ?1 "
	        "AND id IN (SELECT CAST(value AS BIGINT) FROM json_each(?2)) RETURNING id",
	        owner, text, rp_time_now_ms() + lease_ms);
	while (store_next(c, s, "jobs renew", &e))
		json_array_append_new(ids, json_integer(sql_int(s, 0)));
	free(text);
	if (e != RP_ERR_OK) {
		json_decref(ids);
		return e;
	}
	*renewed = ids;
	return RP_ERR_OK;
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
		store_bmc_free(&c->bmc);
		free(c);
	}
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
	cl->node.name = store_col_dup(s, 9, &oom);
	cl->node.serial = store_col_dup(s, 10, &oom);
	cl->node.system_uuid = store_col_dup(s, 11, &oom);
	store_bmc_cols(c, s, 12, cl->node.name, &cl->bmc, &oom);
	cl->sent = sql_int(s, 19);
	cl->phase = store_col_dup(s, 20, &oom);
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
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *ids = NULL;
	struct rp_job_claim *head = NULL, **tail = &head, *cl;
	int64_t now = rp_time_now_ms();
	enum rp_err e;

	if ((e = store_claim(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	/* FIFO per node: a mutating job waits while an older one for its node is queued or
	 * running, so "PXE, then cycle" never runs out of order. One statement claims them all
	 * and one reads them back: two round trips, however many. Where rows lock (PostgreSQL)
	 * claims of several servers run at once and each passes over the rows another has
	 * locked: that one's older job keeps a node's younger ones waiting all the same (it is
	 * queued until that claim commits, running after), and jobs_one_mutating refuses what
	 * would slip through. */
#define CLAIM_SQL(lock)                                                                            \
	"UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = ?4, "           \
	"lease_until = ?5, started_at = coalesce(started_at, ?1), updated_at = ?1 WHERE "          \
	"state = 'queued' AND id IN (SELECT j.id FROM jobs j WHERE j.state = 'queued' AND "        \
	"j.not_before <= ?1 AND j.node_id IS NOT NULL AND (j.mutating = 0 OR (NOT EXISTS "         \
	"(SELECT 1 FROM jobs r WHERE r.node_id = j.node_id AND r.state = 'running' AND "           \
	"r.mutating = 1) AND NOT EXISTS (SELECT 1 FROM jobs q WHERE q.node_id = j.node_id "        \
	"AND q.mutating = 1 AND q.state = 'queued' AND q.id < j.id))) AND (j.type "                \
	"IN " STORE_SSH_TYPES_SQL ") = ?3 ORDER BY j.id LIMIT ?2" lock ") RETURNING id"
	if (c->drv->skip_locked)
		s = STMT_ARGS(c, CLAIM_SQL(" FOR UPDATE OF j SKIP LOCKED"), now, max,
		              lane == RP_JOB_LANE_SSH, owner, now + lease_ms);
	else
		s = STMT_ARGS(c, CLAIM_SQL(""), now, max, lane == RP_JOB_LANE_SSH, owner,
		              now + lease_ms);
#undef CLAIM_SQL
	ids = json_array();
	while (store_next(c, s, "claim", &e))
		json_array_append_new(ids, json_integer(sql_int(s, 0)));
	if (e != RP_ERR_OK)
		goto out;
	if (json_array_size(ids) > 0) {
		char *text = json_dumps(ids, JSON_COMPACT);

		if (text == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		s = STMT_ARGS(
		        c,
		        "SELECT j.id, j.uuid, j.type, j.params, j.recover, j.attempts, "
		        "j.max_attempts, n.id, n.uuid, n.name, n.serial, n.system_uuid, "
		        "b.driver, b.address, b.port, b.username, b.password_sealed, "
		        "b.tls_verify, b.options, j.sent_at IS NOT NULL, j.phase, "
		        "coalesce(j.phase_at, 0) FROM jobs j JOIN nodes n ON n.id = j.node_id "
		        "LEFT JOIN bmcs b ON b.node_id = n.id WHERE j.id IN (SELECT CAST(value "
		        "AS BIGINT) FROM json_each(?)) ORDER BY j.id",
		        text);
		while (store_next(c, s, "claim read", &e)) {
			if ((cl = claim_row(c, s)) == NULL) {
				sql_reset(s);
				e = RP_ERR_INTERNAL;
				break;
			}
			*tail = cl;
			tail = &cl->next;
		}
		free(text);
		if (e != RP_ERR_OK)
			goto out;
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
rp_store_jobs_record(struct rp_store *st, const char *owner, const struct rp_job_outcome *o,
                     int fault_threshold)
{
	STORE_HOLD(st);
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

		/* Only while the lease is still ours: a job another server took over is its. */
		s = STMT_ARGS(c,
		              "SELECT node_id, cancel_requested FROM jobs WHERE id = ? AND state = "
		              "'running' AND lease_owner = ?",
		              id, owner);
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
		if (power && (e = store_power_seen(c, &n, power, now, NULL)) != RP_ERR_OK)
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
		if (o->bmc_ok >= 0 && (e = store_bmc_health(c, &n, o->bmc_ok, error,
		                                            fault_threshold, now)) != RP_ERR_OK)
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
rp_store_jobs_finish(struct rp_store *st, const char *owner, json_t *outcomes, int fault_threshold)
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
	e = rp_store_jobs_record(st, owner, head, fault_threshold);
out:
	rp_store_outcome_free(head);
	return e;
}
