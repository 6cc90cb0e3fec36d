/* Rollouts: the durable plan (waves, per-node states) and every step of the engine, each one
 * transaction, so a restart continues from exactly what was recorded (docs/rollouts.md). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"
#include "rollout/plan.h"

#define ACTIVE "('scheduled', 'running', 'paused')"

/* ---- Small helpers --------------------------------------------------------------------- */

static const char *
col_text(struct stmt *s, int i)
{
	return sql_type(s, i) == SQL_NULL ? NULL : sql_text(s, i);
}

/* What the engine needs of a rollout row. */
struct ro {
	int64_t id, start_at, max_failures, created_at;
	char uuid[RP_UUID_BUF];
	char kind[16], state[16];
	json_t *gate; /* owned */
};

static enum rp_err
ro_load(struct conn *c, int64_t id, struct ro *r)
{
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT uuid, kind, state, gate, max_failures, start_at, "
	                           "created_at FROM rollouts WHERE id = ?",
	                           id);
	enum rp_err e;

	if ((e = store_one(c, s, "rollout load")) != RP_ERR_OK)
		return e;
	r->id = id;
	snprintf(r->uuid, sizeof r->uuid, "%s", col_text(s, 0) ?: "");
	snprintf(r->kind, sizeof r->kind, "%s", col_text(s, 1) ?: "");
	snprintf(r->state, sizeof r->state, "%s", col_text(s, 2) ?: "");
	r->gate = json_loads(col_text(s, 3), 0, NULL);
	r->max_failures = sql_int(s, 4);
	r->start_at = sql_int(s, 5);
	r->created_at = sql_int(s, 6);
	sql_reset(s);
	if (r->gate == NULL)
		r->gate = json_object();
	return RP_ERR_OK;
}

static enum rp_err
ro_set_state(struct conn *c, struct ro *r, const char *state, const char *reason, int64_t now)
{
	struct stmt *s =
	        STMT_ARGS(c,
	                  "UPDATE rollouts SET state = ?2, state_reason = ?3, updated_at = ?4, "
	                  "started_at = CASE WHEN ?2 = 'running' THEN coalesce(started_at, ?4) "
	                  "ELSE started_at END, finished_at = CASE WHEN ?2 IN ('completed', "
	                  "'aborted') THEN ?4 ELSE finished_at END WHERE id = ?1",
	                  r->id, state, reason, now);

	snprintf(r->state, sizeof r->state, "%s", state);
	return store_exec(c, s, "rollout state");
}

/* An event about rollout r (and, when n is given, one of its nodes). */
static enum rp_err ro_event(struct conn *c, const char *actor, const struct ro *r,
                            const char *action, const struct node_ref *n, json_t *detail,
                            const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static enum rp_err
ro_event(struct conn *c, const char *actor, const struct ro *r, const char *action,
         const struct node_ref *n, json_t *detail, const char *fmt, ...)
{
	char summary[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(summary, sizeof summary, fmt, ap);
	va_end(ap);
	return store_event(c, actor, action, "rollout", r->uuid, n ? n->name : NULL, n ? n->id : 0,
	                   n ? n->rack_id : 0, summary, detail);
}

/* ---- Planning -------------------------------------------------------------------------- */

/* A node that takes part, as rollout_nodes records it (its wave comes from
 * rp_rollout_plan_waves). */
struct cand {
	int64_t id, rack_id;
	char name[64], rack[64];
};

/* A node already in an active rollout (not skipped there): that rollout's id into buf. */
static enum rp_err
node_busy(struct conn *c, int64_t node_id, char *buf, size_t len)
{
	struct stmt *s = STMT(c, "SELECT ro.uuid FROM rollout_nodes rn JOIN rollouts ro ON ro.id = "
	                         "rn.rollout_id WHERE rn.node_id = ? AND rn.state != 'skipped' AND "
	                         "ro.state IN " ACTIVE " LIMIT 1");
	enum rp_err e;

	buf[0] = '\0';
	sql_bind_int(s, 1, node_id);
	if ((e = store_one(c, s, "rollout busy")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e;
	snprintf(buf, len, "%s", col_text(s, 0) ?: "");
	sql_reset(s);
	return RP_ERR_OK;
}

static enum rp_err
node_insert(struct conn *c, int64_t rollout, const struct cand *cd, int wave, const char *state,
            const char *reason)
{
	struct stmt *s =
	        STMT_ARGS(c,
	                  "INSERT INTO rollout_nodes(rollout_id, node_id, node_name, rack_name, "
	                  "wave, state, reason) VALUES (?,?,?,?,?,?,?)",
	                  rollout, cd->id, cd->name, cd->rack[0] ? cd->rack : NULL);

	if (wave >= 0)
		sql_bind_int(s, 5, wave);
	sql_bind_text(s, 6, state);
	sql_bind_text(s, 7, reason);
	return store_exec(c, s, "rollout node");
}

/* rp_store_rollout_create's transaction (store_txn): the view of the new rollout into obj. */
struct create_ctx {
	json_t *in;
	const char *actor;
	json_t **detail;
	json_t *obj;
};

/* The job a rollout of kind gives each node. */
static const char *
rollout_job_type(const char *kind)
{
	return !strcmp(kind, "firmware") ? "firmware_update"
	       : !strcmp(kind, "bios")   ? "bios_apply"
	                                 : "bmc_rotate";
}

static enum rp_err
create_txn(struct conn *c, void *arg)
{
	struct create_ctx *x = arg;
	json_t *in = x->in, **detail = x->detail;
	const char *kind = json_string_value(json_object_get(in, "kind")), *actor = x->actor;
	json_t *waves = json_object_get(in, "waves"), *ids = NULL, *busy = json_array();
	json_t *skipped = json_array(), *v, *obj = NULL;
	json_t *bv = json_object_get(waves, "batch");
	struct rp_rollout_spec spec = {.canary = 1};
	struct rp_rollout_cand *pc = NULL;
	struct cand *cs = NULL;
	size_t i, n = 0, nc = 0;
	int64_t now = rp_time_now_ms(), id = 0, start_at;
	int nwaves = 0, w;
	char uuid[RP_UUID_BUF], why[256], *sel = NULL, *wspec = NULL, *gate = NULL;
	struct ro r = {0};
	struct stmt *s;
	enum rp_err e;

	json_decref(x->obj);
	x->obj = NULL;
	if ((e = store_select_nodes(c, json_object_get(in, "selector"), &ids, detail)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	n = json_array_size(ids);
	if ((cs = calloc(n ? n : 1, sizeof *cs)) == NULL)
		goto out;
	/* Who takes part: not in maintenance, with a usable BMC, with a target, and off it. */
	json_array_foreach(ids, i, v)
	{
		struct cand cd = {.id = json_integer_value(v)};
		int maint, target = 0, busy_now = 0;
		char other[RP_UUID_BUF], what[300];

		why[0] = '\0';

		s = STMT_ARGS(
		        c,
		        "SELECT n.name, coalesce(n.rack_id, 0), r.name, n.maintenance, "
		        "n.maintenance_reason FROM nodes n LEFT JOIN racks r ON r.id = n.rack_id "
		        "WHERE n.id = ?",
		        cd.id);
		if ((e = store_one(c, s, "rollout candidate")) != RP_ERR_OK)
			goto out;
		snprintf(cd.name, sizeof cd.name, "%s", col_text(s, 0) ?: "");
		cd.rack_id = sql_int(s, 1);
		snprintf(cd.rack, sizeof cd.rack, "%s", col_text(s, 2) ? col_text(s, 2) : "");
		maint = sql_int(s, 3);
		if (maint)
			snprintf(why, sizeof why, "node is in maintenance%s%s",
			         col_text(s, 4) ? ": " : "", col_text(s, 4) ? col_text(s, 4) : "");
		sql_reset(s);
		if (!maint) {
			if ((e = store_bmc_ready(c, cd.id, why, sizeof why)) == RP_ERR_INTERNAL)
				goto out;
			if (e == RP_ERR_OK) {
				if ((e = store_rollout_drift(c, cd.id, kind, &target, what,
				                             sizeof what)) != RP_ERR_OK)
					goto out;
				if (!target)
					snprintf(why, sizeof why, "%s",
					         !strcmp(kind, "firmware")
					                 ? "no firmware baseline for its class"
					         : !strcmp(kind, "bios")
					                 ? "no BIOS profile for it or its class"
					                 : "its BMC has no username");
				else if (what[0] == '\0')
					snprintf(why, sizeof why, "already at target");
				else {
					if ((e = node_busy(c, cd.id, other, sizeof other)) !=
					    RP_ERR_OK)
						goto out;
					busy_now = other[0] != '\0';
					if (busy_now)
						json_array_append_new(
						        busy, json_pack("{s:s, s:s}", "node",
						                        cd.name, "rollout", other));
					why[0] = '\0';
				}
			}
		}
		/* Skipped nodes are recorded too, below, with their reason. */
		if (why[0])
			json_array_append_new(
			        skipped, json_pack("{s:s, s:s}", "node", cd.name, "reason", why));
		else if (!busy_now)
			cs[nc++] = cd;
	}
	e = RP_ERR_INTERNAL;
	if (json_array_size(busy) > 0) {
		*detail = json_pack("{s:s, s:O}", "reason",
		                    "nodes are already in an active rollout", "nodes", busy);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	if (nc == 0) {
		*detail = json_pack("{s:s, s:O}", "reason", "no selected node needs this rollout",
		                    "skipped", skipped);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	if (json_is_integer(json_object_get(waves, "canary")))
		spec.canary = (int)json_integer_value(json_object_get(waves, "canary"));
	spec.max_per_rack = (int)json_integer_value(json_object_get(waves, "max_per_rack"));
	if (json_is_string(bv)) { /* "P%" (checked by the API): of the nodes that take part */
		spec.batch = atoi(json_string_value(bv));
		spec.pct = 1;
	} else if (json_is_integer(bv)) {
		spec.batch = json_integer_value(bv) < 1 ? 1 : (int)json_integer_value(bv);
	}
	if ((pc = calloc(nc, sizeof *pc)) == NULL)
		goto out;
	for (i = 0; i < nc; i++)
		pc[i] = (struct rp_rollout_cand){.id = cs[i].id, .rack_id = cs[i].rack_id};
	if ((nwaves = rp_rollout_plan_waves(pc, nc, &spec)) < 0)
		goto out;
	start_at = json_is_integer(json_object_get(in, "start_at"))
	                   ? json_integer_value(json_object_get(in, "start_at"))
	                   : now;
	sel = store_canon(json_object_get(in, "selector"));
	wspec = waves ? store_canon(waves) : strdup("{}");
	gate = json_object_get(in, "gate") ? store_canon(json_object_get(in, "gate"))
	                                   : strdup("{}");
	if (rp_uuid_new(uuid) < 0 || !sel || !wspec || !gate)
		goto out;
	if ((e = EXEC(
	             c, "rollout insert",
	             "INSERT INTO rollouts(uuid, kind, state, selector, waves_spec, gate, "
	             "max_failures, "
	             "start_at, created_by, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
	             uuid, kind, start_at > now ? "scheduled" : "running", sel, wspec, gate,
	             json_integer_value(json_object_get(in, "max_failures")), start_at, actor, now,
	             now)) != RP_ERR_OK)
		goto out;
	id = sql_last_id(c);
	if (start_at <= now) {
		if ((e = EXEC(c, "rollout started",
		              "UPDATE rollouts SET started_at = ?2 WHERE id = ?1", id, now)) !=
		    RP_ERR_OK)
			goto out;
	}
	for (w = 0; w < nwaves; w++) {
		s = STMT_ARGS(c,
		              "INSERT INTO rollout_waves(rollout_id, idx, canary) VALUES (?,?,?)",
		              id, w, w == 0 && spec.canary > 0);
		if ((e = store_exec(c, s, "rollout wave")) != RP_ERR_OK)
			goto out;
	}
	for (i = 0; i < nc; i++)
		if ((e = node_insert(c, id, &cs[i], pc[i].wave, "pending", NULL)) != RP_ERR_OK)
			goto out;
	json_array_foreach(skipped, i, v)
	{
		struct node_ref nr;
		struct cand cd = {0};

		if ((e = store_node_ref(c, json_string_value(json_object_get(v, "node")), &nr)) !=
		    RP_ERR_OK)
			goto out;
		cd.id = nr.id;
		snprintf(cd.name, sizeof cd.name, "%s", nr.name);
		if ((e = node_insert(c, id, &cd, -1, "skipped",
		                     json_string_value(json_object_get(v, "reason")))) != RP_ERR_OK)
			goto out;
	}
	r.id = id;
	snprintf(r.uuid, sizeof r.uuid, "%s", uuid);
	obj = json_pack("{s:s, s:O, s:I, s:I, s:I, s:O}", "kind", kind, "selector",
	                json_object_get(in, "selector"), "nodes", (json_int_t)nc, "waves",
	                (json_int_t)nwaves, "skipped", (json_int_t)json_array_size(skipped),
	                "skipped_nodes", skipped);
	e = ro_event(c, actor, &r, "rollout.created", NULL, obj,
	             "%s rollout: %zu node(s) in %d wave(s), %zu skipped", kind, nc, nwaves,
	             json_array_size(skipped));
	json_decref(obj);
	obj = NULL;
	if (e != RP_ERR_OK)
		goto out;
	if ((e = store_rollout_view(c, id, 1, &obj)) != RP_ERR_OK)
		goto out;
	x->obj = obj;
	obj = NULL;
out:
	free(pc);
	free(cs);
	free(sel);
	free(wspec);
	free(gate);
	json_decref(ids);
	json_decref(busy);
	json_decref(skipped);
	json_decref(obj);
	return e;
}

enum rp_err
rp_store_rollout_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                        json_t **detail)
{
	STORE_HOLD(st);
	struct create_ctx x = {.in = in, .actor = actor, .detail = detail};
	enum rp_err e = store_txn(st, create_txn, &x);

	if (e == RP_ERR_OK)
		*out = x.obj;
	else
		json_decref(x.obj);
	return e;
}

/* ---- Operator actions ------------------------------------------------------------------ */

static enum rp_err
count_failed(struct conn *c, int64_t id, int64_t *n)
{
	struct stmt *s =
	        STMT_ARGS(c,
	                  "SELECT count(*) FROM rollout_nodes WHERE rollout_id = ? AND state = "
	                  "'failed'",
	                  id);
	enum rp_err e;

	if ((e = store_one(c, s, "rollout failures")) != RP_ERR_OK)
		return e;
	*n = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

/* Abort: queued jobs of the rollout end cancelled (their nodes skipped), nodes not started are
 * skipped, nodes waiting on their gate keep the update they got; running jobs finish. */
static enum rp_err
do_abort(struct conn *c, struct ro *r, const char *actor, const char *reason, int64_t now)
{
	struct stmt *s;
	json_t *jobs = json_array(), *v;
	enum rp_err e;
	size_t i;

	s = STMT_ARGS(
	        c,
	        "SELECT j.id FROM rollout_nodes rn JOIN jobs j ON j.id IN (rn.job_id, "
	        "rn.gate_job_id) WHERE rn.rollout_id = ? AND rn.state = 'running' AND j.state = "
	        "'queued'",
	        r->id);
	while (store_next(c, s, "rollout abort jobs", &e))
		json_array_append_new(jobs, json_integer(sql_int(s, 0)));
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(jobs, i, v)
	{
		s = STMT_ARGS(
		        c,
		        "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, error_code = "
		        "'cancelled', error = 'rollout aborted', finished_at = ?2, updated_at = ?2 "
		        "WHERE id = ?1 AND state = 'queued'",
		        json_integer_value(v), now);
		if ((e = store_exec(c, s, "rollout cancel job")) != RP_ERR_OK ||
		    (e = store_job_ended(c, json_integer_value(v), "cancelled",
		                         "rollout aborted")) != RP_ERR_OK)
			goto out;
	}
	if ((e = EXEC(c, "rollout abort nodes",
	              "UPDATE rollout_nodes SET state = 'skipped', phase = NULL, reason = 'rollout "
	              "aborted', finished_at = ?2 WHERE rollout_id = ?1 AND (state = 'pending' OR "
	              "(state = 'running' AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_id AND "
	              "j.state = 'cancelled')))",
	              r->id, now)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(
	        c,
	        "UPDATE rollout_nodes SET state = 'succeeded', phase = NULL, reason = 'updated; "
	        "gate not evaluated (rollout aborted)', finished_at = ?2 WHERE rollout_id = ?1 "
	        "AND state = 'running' AND phase = 'gate'",
	        r->id, now);
	if ((e = store_exec(c, s, "rollout abort gate")) != RP_ERR_OK)
		goto out;
	if ((e = ro_set_state(c, r, "aborted", reason, now)) != RP_ERR_OK)
		goto out;
	e = ro_event(c, actor, r, "rollout.aborted", NULL, NULL,
	             "rollout aborted (%s): %zu queued job(s) cancelled; running ones finish",
	             reason, json_array_size(jobs));
out:
	json_decref(jobs);
	return e;
}

/* Resume: failed nodes (with retry_failed) go back to pending in their wave, which runs
 * again before any later one; the failure count must then be within max_failures. */
static enum rp_err
do_resume(struct conn *c, struct ro *r, json_t *opts, const char *actor, int64_t now,
          json_t **detail)
{
	json_t *mf = json_object_get(opts, "max_failures");
	int retry = !json_is_false(json_object_get(opts, "retry_failed"));
	int64_t failed = 0, retried = 0;
	struct stmt *s;
	enum rp_err e;

	if (json_is_integer(mf)) {
		r->max_failures = json_integer_value(mf);
		if ((e = EXEC(c, "rollout max_failures",
		              "UPDATE rollouts SET max_failures = ?2 WHERE id = ?1", r->id,
		              r->max_failures)) != RP_ERR_OK)
			return e;
	}
	if (retry) {
		if ((e = EXEC(
		             c, "rollout reopen waves",
		             "UPDATE rollout_waves SET state = 'pending' WHERE rollout_id = ?1 AND "
		             "idx IN "
		             "(SELECT wave FROM rollout_nodes WHERE rollout_id = ?1 AND state = "
		             "'failed')",
		             r->id)) != RP_ERR_OK)
			return e;
		s = STMT_ARGS(
		        c,
		        "UPDATE rollout_nodes SET state = 'pending', phase = NULL, reason = NULL, "
		        "job_id = NULL, gate_job_id = NULL, finished_at = NULL WHERE rollout_id = "
		        "?1 "
		        "AND state = 'failed'",
		        r->id);
		if ((e = store_exec(c, s, "rollout retry nodes")) != RP_ERR_OK)
			return e;
		retried = sql_changes(c);
	}
	if ((e = count_failed(c, r->id, &failed)) != RP_ERR_OK)
		return e;
	if (failed > r->max_failures) {
		*detail = json_pack(
		        "{s:s, s:I, s:I}", "reason",
		        "the failed nodes exceed max_failures: retry them (retry_failed) or "
		        "raise max_failures",
		        "failed", (json_int_t)failed, "max_failures", (json_int_t)r->max_failures);
		return RP_ERR_CONFLICT;
	}
	if ((e = ro_set_state(c, r, now >= r->start_at ? "running" : "scheduled", NULL, now)) !=
	    RP_ERR_OK)
		return e;
	return ro_event(c, actor, r, "rollout.resumed", NULL, NULL,
	                "rollout resumed; %lld failed node(s) retried", (long long)retried);
}

/* rp_store_rollout_control's transaction (store_txn): the rollout's view after it into obj. */
struct control_ctx {
	const char *key, *action, *actor;
	json_t *opts, **detail;
	json_t *obj;
};

static enum rp_err
control_txn(struct conn *c, void *arg)
{
	struct control_ctx *x = arg;
	const char *key = x->key, *action = x->action, *actor = x->actor;
	json_t *opts = x->opts, **detail = x->detail;
	struct ro r = {0};
	int64_t id = 0, now = rp_time_now_ms();
	json_t *obj = NULL;
	enum rp_err e;

	json_decref(x->obj);
	x->obj = NULL;
	if ((e = store_id_of(c, T_ROLLOUT, key, &id)) != RP_ERR_OK ||
	    (e = ro_load(c, id, &r)) != RP_ERR_OK)
		goto out;
	if (!strcmp(action, "pause")) {
		if (strcmp(r.state, "running") && strcmp(r.state, "scheduled")) {
			*detail = json_pack("{s:s, s:s}", "reason",
			                    "only a running or scheduled rollout can "
			                    "be paused",
			                    "state", r.state);
			e = RP_ERR_INVALID_STATE;
			goto out;
		}
		if ((e = ro_set_state(c, &r, "paused", "paused by an operator", now)) !=
		            RP_ERR_OK ||
		    (e = ro_event(c, actor, &r, "rollout.paused", NULL, NULL,
		                  "rollout paused by an operator; the running wave finishes")) !=
		            RP_ERR_OK)
			goto out;
	} else if (!strcmp(action, "resume")) {
		if (strcmp(r.state, "paused")) {
			*detail =
			        json_pack("{s:s, s:s}", "reason",
			                  "only a paused rollout can be resumed", "state", r.state);
			e = RP_ERR_INVALID_STATE;
			goto out;
		}
		if ((e = do_resume(c, &r, opts, actor, now, detail)) != RP_ERR_OK)
			goto out;
	} else {
		if (!strcmp(r.state, "completed") || !strcmp(r.state, "aborted")) {
			*detail = json_pack("{s:s, s:s}", "reason", "the rollout has already ended",
			                    "state", r.state);
			e = RP_ERR_INVALID_STATE;
			goto out;
		}
		if ((e = do_abort(c, &r, actor, "aborted by an operator", now)) != RP_ERR_OK)
			goto out;
	}
	if ((e = store_rollout_view(c, id, 1, &obj)) != RP_ERR_OK)
		goto out;
	x->obj = obj;
	obj = NULL;
out:
	json_decref(obj);
	json_decref(r.gate);
	return e;
}

enum rp_err
rp_store_rollout_control(struct rp_store *st, const char *key, const char *action, json_t *opts,
                         const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct control_ctx x = {
	        .key = key, .action = action, .actor = actor, .opts = opts, .detail = detail};
	enum rp_err e = store_txn(st, control_txn, &x);

	if (e == RP_ERR_OK)
		*out = x.obj;
	else
		json_decref(x.obj);
	return e;
}

/* ---- The engine's steps ---------------------------------------------------------------- */

enum rp_err
rp_store_rollouts_active(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *ids;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	/* Active ones, and ended ones whose last jobs still run (their nodes settle). */
	s = STMT(c, "SELECT id FROM rollouts WHERE state IN " ACTIVE " UNION SELECT DISTINCT "
	            "rollout_id FROM rollout_nodes WHERE state = 'running' ORDER BY 1");
	ids = json_array();
	while (store_next(c, s, "rollouts active", &e))
		json_array_append_new(ids, json_integer(sql_int(s, 0)));
	if (e != RP_ERR_OK) {
		json_decref(ids);
		return e;
	}
	*out = ids;
	return RP_ERR_OK;
}

/* A node of the rollout leaves `running`: failed (counted) or succeeded. */
static enum rp_err
node_settle(struct conn *c, struct ro *r, int64_t node_id, const char *state, const char *reason,
            int64_t now)
{
	struct stmt *s = STMT(c, "UPDATE rollout_nodes SET state = ?3, phase = NULL, reason = ?4, "
	                         "finished_at = ?5 WHERE rollout_id = ?1 AND node_id = ?2");
	struct node_ref n;
	enum rp_err e;

	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, node_id);
	sql_bind_text(s, 3, state);
	sql_bind_text(s, 4, reason);
	sql_bind_int(s, 5, now);
	if ((e = store_exec(c, s, "rollout node settle")) != RP_ERR_OK)
		return e;
	if (strcmp(state, "failed") != 0)
		return RP_ERR_OK;
	s = STMT_ARGS(
	        c,
	        "UPDATE rollouts SET failures_seen = failures_seen + 1, updated_at = ?2 WHERE "
	        "id = ?1",
	        r->id, now);
	if ((e = store_exec(c, s, "rollout failures")) != RP_ERR_OK)
		return e;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		return e;
	return ro_event(c, "rackpilotd", r, "rollout.node_failed", &n, NULL,
	                "%s failed in the rollout: %s", n.name, reason ? reason : "");
}

/* Jobs of running nodes that ended: update jobs move a node to its gate (or fail it), gate
 * recipe jobs are picked up by the gate itself. */
static enum rp_err
sync_jobs(struct conn *c, struct ro *r, int64_t now, int *changed)
{
	struct stmt *s;
	json_t *ended = json_array(), *v;
	enum rp_err e;
	size_t i;

	s = STMT_ARGS(
	        c,
	        "SELECT rn.node_id, j.state, j.error, j.result, coalesce(j.finished_at, ?2) "
	        "FROM rollout_nodes rn JOIN jobs j ON j.id = rn.job_id WHERE rn.rollout_id = ?1 "
	        "AND rn.state = 'running' AND rn.phase = 'job' AND j.state IN ('succeeded', "
	        "'failed', 'cancelled')",
	        r->id, now);
	while (store_next(c, s, "rollout sync", &e))
		json_array_append_new(ended,
		                      json_pack("{s:I, s:s, s:s?, s:s?, s:I}", "node",
		                                (json_int_t)sql_int(s, 0), "state", col_text(s, 1),
		                                "error", col_text(s, 2), "result", col_text(s, 3),
		                                "at", (json_int_t)sql_int(s, 4)));
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(ended, i, v)
	{
		int64_t node = json_integer_value(json_object_get(v, "node"));
		const char *js = json_string_value(json_object_get(v, "state"));
		char reason[600];

		s = STMT_ARGS(
		        c,
		        "UPDATE rollout_nodes SET result = ?3, job_done_at = ?4, phase = 'gate' "
		        "WHERE rollout_id = ?1 AND node_id = ?2",
		        r->id, node);
		store_bind_str(s, 3, v, "result");
		sql_bind_int(s, 4, json_integer_value(json_object_get(v, "at")));
		if ((e = store_exec(c, s, "rollout job done")) != RP_ERR_OK)
			goto out;
		*changed = 1;
		if (!strcmp(js, "succeeded")) {
			/* An aborted rollout evaluates no gates. */
			if (!strcmp(r->state, "aborted") &&
			    (e = node_settle(c, r, node, "succeeded",
			                     "gate not evaluated (rollout aborted)", now)) !=
			            RP_ERR_OK)
				goto out;
			continue;
		}
		snprintf(reason, sizeof reason, "%s job %s: %s", rollout_job_type(r->kind), js,
		         json_string_value(json_object_get(v, "error")) ?: "no reason given");
		if ((e = node_settle(c, r, node, "failed", reason, now)) != RP_ERR_OK)
			goto out;
	}
	e = RP_ERR_OK;
out:
	json_decref(ended);
	return e;
}

/* Start wave w: an update job for each of its pending nodes, all in this transaction. */
static enum rp_err
wave_start(struct conn *c, struct ro *r, int64_t w, int64_t now)
{
	struct stmt *s;
	json_t *nodes = json_array(), *v, *job = NULL;
	enum rp_err e;
	int64_t started = 0, skipped = 0;
	size_t i;

	s = STMT_ARGS(
	        c,
	        "SELECT node_id FROM rollout_nodes WHERE rollout_id = ? AND wave = ? AND state = "
	        "'pending' ORDER BY node_id",
	        r->id, w);
	while (store_next(c, s, "rollout wave nodes", &e))
		json_array_append_new(nodes, json_integer(sql_int(s, 0)));
	if (e != RP_ERR_OK)
		goto out;
	job = json_pack("{s:s, s:{s:s}, s:b}", "type", rollout_job_type(r->kind), "params",
	                "rollout", r->uuid, "mutating", 1);
	if (!strcmp(r->kind, "bmc_credentials"))
		json_object_set_new(json_object_get(job, "params"), "explicit", json_false());
	json_array_foreach(nodes, i, v)
	{
		struct node_ref n;
		char why[256];
		int64_t job_id = 0;

		if ((e = store_node_by_id(c, json_integer_value(v), &n)) != RP_ERR_OK)
			goto out;
		/* Things change between planning and a later wave: a node put in maintenance (or
		 * left without a usable BMC) since is skipped, not failed. */
		e = store_bmc_ready(c, n.id, why, sizeof why);
		if (e == RP_ERR_INVALID_STATE || e == RP_ERR_CONFLICT) {
			if ((e = EXEC(c, "rollout skip",
			              "UPDATE rollout_nodes SET state = 'skipped', reason = ?3, "
			              "finished_at = "
			              "?4 WHERE rollout_id = ?1 AND node_id = ?2",
			              r->id, n.id, why, now)) != RP_ERR_OK)
				goto out;
			skipped++;
			continue;
		}
		if (e != RP_ERR_OK)
			goto out;
		if ((e = store_job_add(c, &n, 0, job, "rollout", &job_id)) != RP_ERR_OK)
			goto out;
		if ((e = EXEC(c, "rollout node start",
		              "UPDATE rollout_nodes SET state = 'running', phase = 'job', job_id = "
		              "?3, "
		              "attempt = attempt + 1, started_at = ?4, job_done_at = NULL, reason "
		              "= NULL "
		              "WHERE rollout_id = ?1 AND node_id = ?2 AND state = 'pending'",
		              r->id, n.id, job_id, now)) != RP_ERR_OK)
			goto out;
		started++;
	}
	s = STMT_ARGS(
	        c,
	        "UPDATE rollout_waves SET state = 'running', started_at = coalesce(started_at, "
	        "?3), "
	        "finished_at = NULL, done_at = NULL WHERE rollout_id = ?1 AND idx = ?2",
	        r->id, w, now);
	if ((e = store_exec(c, s, "rollout wave start")) != RP_ERR_OK)
		goto out;
	e = ro_event(c, "rackpilotd", r, "rollout.wave_started", NULL, NULL,
	             "wave %lld started: %lld %s job(s) queued, %lld node(s) skipped", (long long)w,
	             (long long)started, json_string_value(json_object_get(job, "type")),
	             (long long)skipped);
out:
	json_decref(nodes);
	json_decref(job);
	return e;
}

/* What the gate's required checks (req) need to know about node_id into *f: only what they
 * require is read. */
static enum rp_err
gate_facts(struct conn *c, struct ro *r, int64_t node_id, json_t *req, struct rp_rollout_facts *f)
{
	struct stmt *s;
	json_t *v;
	size_t i;
	enum rp_err e;

	json_array_foreach(req, i, v)
	{
		const char *q = json_string_value(v);

		if (q == NULL)
			continue;
		if (!strcmp(q, "power_on")) {
			s = STMT_ARGS(c,
			              "SELECT power_state, coalesce(power_state_at, 0) FROM nodes "
			              "WHERE id = ?",
			              node_id);
			if ((e = store_one(c, s, "gate power")) != RP_ERR_OK)
				return e;
			snprintf(f->power, sizeof f->power, "%s", col_text(s, 0) ?: "");
			f->power_at = sql_int(s, 1);
			sql_reset(s);
		} else if (!strcmp(q, "agent_heartbeat")) {
			s = STMT_ARGS(c, "SELECT seen_at FROM agents WHERE node_id = ?", node_id);
			e = store_one(c, s, "gate heartbeat");
			if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
				return e;
			f->agent = e == RP_ERR_OK;
			if (f->agent) {
				f->agent_seen = sql_int(s, 0);
				sql_reset(s);
			}
		} else if (!strcmp(q, "version_match")) {
			if ((e = store_rollout_drift(c, node_id, r->kind, &f->target, f->drift,
			                             sizeof f->drift)) != RP_ERR_OK)
				return e;
		}
	}
	return RP_ERR_OK;
}

/* Why node n does not pass the gate yet ("" when it does; rp_rollout_gate_require and
 * rp_rollout_gate_recipe decide). *need_power: only a fresh power reading is missing. A gate
 * recipe job is queued here once the rest passes. */
static enum rp_err
gate_check(struct conn *c, struct ro *r, int64_t node_id, int64_t wave_end, int64_t job_done,
           char *why, size_t len, int *need_power, int *changed)
{
	json_t *req = json_object_get(r->gate, "require"), *plan = json_object_get(r->gate, "plan");
	struct rp_rollout_facts f = {.kind = r->kind, .job_done = job_done, .wave_end = wave_end};
	struct node_ref n;
	struct stmt *s;
	int64_t gate_job = 0;
	char nwhy[256];
	json_t *job;
	enum rp_err e;
	int none;

	why[0] = '\0';
	if ((e = gate_facts(c, r, node_id, req, &f)) != RP_ERR_OK)
		return e;
	if (rp_rollout_gate_require(req, &f, why, len))
		*need_power = 1;
	if (why[0] || !json_is_array(plan))
		return RP_ERR_OK;
	/* The health-check recipe, as a steps job, once per node and attempt. */
	s = STMT_ARGS(c,
	              "SELECT coalesce(rn.gate_job_id, 0), j.state, j.error FROM rollout_nodes rn "
	              "LEFT JOIN jobs j ON j.id = rn.gate_job_id WHERE rn.rollout_id = ? AND "
	              "rn.node_id = ?",
	              r->id, node_id);
	if ((e = store_one(c, s, "gate recipe")) != RP_ERR_OK)
		return e;
	gate_job = sql_int(s, 0);
	none = rp_rollout_gate_recipe(gate_job ? col_text(s, 1) : NULL, col_text(s, 2), why, len);
	sql_reset(s);
	if (!none)
		return RP_ERR_OK;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		return e;
	if ((e = store_ssh_ready(c, node_id, nwhy, sizeof nwhy)) != RP_ERR_OK) {
		if (e == RP_ERR_INTERNAL)
			return e;
		snprintf(why, len, "!health check recipe cannot run: %s", nwhy);
		return RP_ERR_OK;
	}
	job = json_pack("{s:s, s:{s:O, s:O, s:s}, s:b, s:i}", "type", "steps", "params", "plan",
	                plan, "recipe", json_object_get(r->gate, "recipe"), "rollout", r->uuid,
	                "mutating", 1, "max_attempts", 8);
	e = store_job_add(c, &n, 0, job, "rollout", &gate_job);
	json_decref(job);
	if (e != RP_ERR_OK)
		return e;
	if ((e = EXEC(c, "gate job",
	              "UPDATE rollout_nodes SET gate_job_id = ?3 WHERE rollout_id = ?1 AND "
	              "node_id = ?2",
	              r->id, node_id, gate_job)) != RP_ERR_OK)
		return e;
	*changed = 1;
	snprintf(why, len, "health check recipe queued");
	return RP_ERR_OK;
}

/* The gate of wave w (every job ended at wave_end): once it opens (rp_rollout_gate_open),
 * each node waiting on it gets its verdict (rp_rollout_gate_verdict). */
static enum rp_err
wave_gate(struct conn *c, struct ro *r, int64_t w, int64_t wave_end, int64_t now, int *done,
          int *need_power, int *changed)
{
	struct rp_rollout_gate g;
	json_t *nodes = json_array(), *v;
	struct stmt *s;
	enum rp_err e = RP_ERR_INTERNAL;
	int64_t waiting = 0;
	size_t i;

	*done = 0;
	rp_rollout_gate_policy(r->gate, &g);
	if (!rp_rollout_gate_open(&g, wave_end, now)) {
		e = RP_ERR_OK;
		goto out;
	}
	s = STMT_ARGS(
	        c,
	        "SELECT node_id, coalesce(job_done_at, 0) FROM rollout_nodes WHERE rollout_id = ? "
	        "AND wave = ? AND state = 'running' AND phase = 'gate'",
	        r->id, w);
	while (store_next(c, s, "gate nodes", &e))
		json_array_append_new(nodes, json_pack("[I, I]", (json_int_t)sql_int(s, 0),
		                                       (json_int_t)sql_int(s, 1)));
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(nodes, i, v)
	{
		int64_t node = json_integer_value(json_array_get(v, 0));
		char why[400], reason[450];

		if ((e = gate_check(c, r, node, wave_end, json_integer_value(json_array_get(v, 1)),
		                    why, sizeof why, need_power, changed)) != RP_ERR_OK)
			goto out;
		switch (rp_rollout_gate_verdict(&g, wave_end, now, why)) {
		case RP_ROLLOUT_PASS:
			if ((e = node_settle(c, r, node, "succeeded", NULL, now)) != RP_ERR_OK)
				goto out;
			*changed = 1;
			break;
		case RP_ROLLOUT_FAIL:
			snprintf(reason, sizeof reason, "gate: %s", why[0] == '!' ? why + 1 : why);
			if ((e = node_settle(c, r, node, "failed", reason, now)) != RP_ERR_OK)
				goto out;
			*changed = 1;
			break;
		case RP_ROLLOUT_UNDECIDED:
			waiting++;
			break;
		}
	}
	*done = waiting == 0;
	e = RP_ERR_OK;
out:
	json_decref(nodes);
	return e;
}

static enum rp_err
wave_set(struct conn *c, struct ro *r, int64_t w, const char *state, int64_t now)
{
	return EXEC(c, "rollout wave state",
	            "UPDATE rollout_waves SET state = ?3, finished_at = CASE WHEN ?3 = "
	            "'gating' THEN ?4 ELSE finished_at END, done_at = CASE WHEN ?3 = "
	            "'done' THEN ?4 ELSE done_at END WHERE rollout_id = ?1 AND idx = ?2",
	            r->id, w, state, now);
}

/* A count(*) over rollout r's nodes, in wave w unless w < 0 (state and phase as in sql). */
static enum rp_err
count_of(struct conn *c, struct stmt *s, int64_t id, int64_t w, int64_t *n, const char *what)
{
	enum rp_err e;

	sql_bind_int(s, 1, id);
	sql_bind_int(s, 2, w);
	if ((e = store_one(c, s, what)) != RP_ERR_OK)
		return e;
	*n = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

/* One step of the state machine (rp_rollout_next decides which); *progress when it moved
 * (call again). */
static enum rp_err
advance_once(struct conn *c, struct ro *r, int64_t now, int *progress, int *need_power)
{
	struct rp_rollout_status st = {.state = r->state,
	                               .now = now,
	                               .start_at = r->start_at,
	                               .max_failures = r->max_failures,
	                               .wave = -1};
	struct stmt *s;
	int64_t wave_end = 0, bad = 0;
	char wstate[16] = "", reason[160];
	enum rp_err e;
	int changed = 0, done = 0;

	*progress = 0;
	if ((e = sync_jobs(c, r, now, &changed)) != RP_ERR_OK)
		return e;
	if ((e = count_failed(c, r->id, &st.failed)) != RP_ERR_OK)
		return e;
	/* The current wave: the first one not done. */
	s = STMT_ARGS(
	        c,
	        "SELECT idx, state, coalesce(finished_at, 0) FROM rollout_waves WHERE rollout_id "
	        "= ? AND state != 'done' ORDER BY idx LIMIT 1",
	        r->id);
	if ((e = store_one(c, s, "rollout current wave")) == RP_ERR_OK) {
		st.wave = sql_int(s, 0);
		snprintf(wstate, sizeof wstate, "%s", col_text(s, 1) ?: "");
		st.wave_state = wstate;
		wave_end = sql_int(s, 2);
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND) {
		return e;
	}
	if (st.wave >= 0 && !strcmp(wstate, "running") &&
	    (e = count_of(c,
	                  STMT(c, "SELECT count(*) FROM rollout_nodes WHERE rollout_id = ? AND "
	                          "wave = ? AND state = 'running' AND phase = 'job'"),
	                  r->id, st.wave, &st.wave_running, "rollout wave running")) != RP_ERR_OK)
		return e;
	switch (rp_rollout_next(&st)) {
	case RP_ROLLOUT_HOLD:
		return RP_ERR_OK;
	case RP_ROLLOUT_WAIT:
		*progress = changed;
		return RP_ERR_OK;
	case RP_ROLLOUT_START:
		if ((e = ro_set_state(c, r, "running", NULL, now)) != RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.started", NULL, NULL,
		                  "scheduled rollout started")) != RP_ERR_OK)
			return e;
		break;
	case RP_ROLLOUT_PAUSE:
		snprintf(reason, sizeof reason, "%lld node(s) failed, more than max_failures %lld",
		         (long long)st.failed, (long long)r->max_failures);
		if ((e = ro_set_state(c, r, "paused", reason, now)) != RP_ERR_OK ||
		    (e = ro_event(
		             c, "rackpilotd", r, "rollout.paused", NULL, NULL,
		             "rollout paused: %s; the running wave finishes, no later wave starts",
		             reason)) != RP_ERR_OK)
			return e;
		break;
	case RP_ROLLOUT_COMPLETE:
		if ((e = ro_set_state(c, r, "completed",
		                      st.failed ? "completed with failed nodes" : NULL, now)) !=
		            RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.completed", NULL, NULL,
		                  "rollout completed: %lld node(s) failed",
		                  (long long)st.failed)) != RP_ERR_OK)
			return e;
		break;
	case RP_ROLLOUT_WAVE_START:
		if ((e = wave_start(c, r, st.wave, now)) != RP_ERR_OK)
			return e;
		break;
	case RP_ROLLOUT_WAVE_GATING:
		if ((e = wave_set(c, r, st.wave, "gating", now)) != RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.wave_finished", NULL, NULL,
		                  "wave %lld: every job ended; gate next", (long long)st.wave)) !=
		            RP_ERR_OK)
			return e;
		break;
	case RP_ROLLOUT_WAVE_GATE:
		if ((e = wave_gate(c, r, st.wave, wave_end, now, &done, need_power, &changed)) !=
		    RP_ERR_OK)
			return e;
		*progress = changed;
		if (!done)
			return RP_ERR_OK;
		if ((e = count_of(c,
		                  STMT(c, "SELECT count(*) FROM rollout_nodes WHERE rollout_id = ? "
		                          "AND wave = ? AND state = 'failed'"),
		                  r->id, st.wave, &bad, "rollout wave failures")) != RP_ERR_OK ||
		    (e = wave_set(c, r, st.wave, "done", now)) != RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.wave_done", NULL, NULL,
		                  "wave %lld gate evaluated: %lld node(s) failed in it",
		                  (long long)st.wave, (long long)bad)) != RP_ERR_OK)
			return e;
		break;
	}
	*progress = 1;
	return RP_ERR_OK;
}

/* rp_store_rollout_advance's transaction (store_txn). */
struct advance_ctx {
	int64_t id;
	int need_power, moved;
};

static enum rp_err
advance_txn(struct conn *c, void *arg)
{
	struct advance_ctx *x = arg;
	struct ro r = {0};
	int64_t now = rp_time_now_ms();
	int progress = 0, any = 0, i;
	enum rp_err e;

	x->need_power = 0;
	x->moved = 0;
	if ((e = ro_load(c, x->id, &r)) != RP_ERR_OK)
		goto out;
	/* A few steps at a time (a wave ends, its gate passes, the next starts) keep each
	 * transaction short. */
	for (i = 0; i < 8; i++) {
		if ((e = advance_once(c, &r, now, &progress, &x->need_power)) != RP_ERR_OK)
			goto out;
		if (!progress)
			break;
		any = 1;
	}
	/* Nothing moved: leave the database (and its generation) untouched. */
	if (!any)
		store_rollback(c);
	x->moved = any;
out:
	json_decref(r.gate);
	return e;
}

enum rp_err
rp_store_rollout_advance(struct rp_store *st, int64_t id, int *need_power, int *moved)
{
	STORE_HOLD(st);
	struct advance_ctx x = {.id = id};
	enum rp_err e = store_txn(st, advance_txn, &x);

	*need_power = x.need_power;
	*moved = e == RP_ERR_OK && x.moved;
	return e;
}
