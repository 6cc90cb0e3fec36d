/* Rollouts read back: the wire view of a rollout (counts, waves, nodes, the estimate), the list,
 * each node's drift from its target, and the pre-flight (what an update, apply or rollout will
 * need), each read in one snapshot (docs/rollouts.md). */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define TARGET_PROFILE                                                                             \
	"coalesce(n.bios_profile_id, (SELECT id FROM bios_profiles WHERE node_class = "            \
	"n.node_class))"

static const char *
col_text(struct stmt *s, int i)
{
	return sql_type(s, i) == SQL_NULL ? NULL : sql_text(s, i);
}

static json_t *
time_or_null(int64_t ms)
{
	char ts[RP_TIME_BUF];

	return ms > 0 ? json_string(rp_time_format(ms, ts)) : json_null();
}

/* What reads "component BMC is 1.0, the baseline wants 2.0" (internal.h). */
enum rp_err
store_rollout_drift(struct conn *c, int64_t node_id, const char *kind, int *target, char *what,
                    size_t len)
{
	struct stmt *s;
	enum rp_err e;
	int fw = !strcmp(kind, "firmware");

	what[0] = '\0';
	/* A credential rotation is what every node with a BMC user takes part in. */
	if (!strcmp(kind, "bmc_credentials")) {
		s = STMT_ARGS(c, "SELECT coalesce(username, '') <> '' FROM bmcs WHERE node_id = ?",
		              node_id);
		if ((e = store_one(c, s, "rollout target")) == RP_ERR_NOT_FOUND) {
			*target = 0;
			return RP_ERR_OK;
		}
		if (e != RP_ERR_OK)
			return e;
		*target = sql_int(s, 0) != 0;
		sql_reset(s);
		if (*target)
			snprintf(what, len, "its BMC password is rotated");
		return RP_ERR_OK;
	}
	s = fw ? STMT(c, "SELECT EXISTS (SELECT 1 FROM nodes n JOIN firmware_baselines b ON "
	                 "b.node_class = n.node_class WHERE n.id = ?)")
	       : STMT(c, "SELECT " TARGET_PROFILE " IS NOT NULL FROM nodes n WHERE n.id = ?");
	sql_bind_int(s, 1, node_id);
	if ((e = store_one(c, s, "rollout target")) != RP_ERR_OK)
		return e;
	*target = sql_int(s, 0) != 0;
	sql_reset(s);
	if (!*target)
		return RP_ERR_OK;
	s = fw ? STMT(c, "SELECT bc.component, fc.version, bc.version FROM nodes n JOIN "
	                 "firmware_baselines b ON b.node_class = n.node_class JOIN "
	                 "baseline_components bc ON bc.baseline_id = b.id LEFT JOIN "
	                 "firmware_components fc ON fc.node_id = n.id AND fc.component = "
	                 "bc.component WHERE n.id = ? AND fc.version IS DISTINCT FROM bc.version "
	                 "ORDER BY "
	                 "bc.component LIMIT 1")
	       : STMT(c,
	              "SELECT pa.name, a.value, pa.value FROM nodes n JOIN bios_profile_attrs pa "
	              "ON pa.profile_id = " TARGET_PROFILE " LEFT JOIN bios_actual a ON "
	              "a.node_id = n.id AND a.name = pa.name WHERE n.id = ? AND a.value IS "
	              "DISTINCT FROM "
	              "pa.value ORDER BY pa.name LIMIT 1");
	sql_bind_int(s, 1, node_id);
	if ((e = store_one(c, s, "rollout drift")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e;
	snprintf(what, len, "%s %s is %s, %s wants %s", fw ? "component" : "attribute",
	         col_text(s, 0), col_text(s, 1) ? col_text(s, 1) : "unknown",
	         fw ? "the baseline" : "the profile", col_text(s, 2));
	sql_reset(s);
	return RP_ERR_OK;
}

/* ---- Views ----------------------------------------------------------------------------- */

#define RO_COLS                                                                                    \
	"SELECT id AS _id, uuid AS id, kind, state, state_reason AS reason, selector AS "          \
	"\"selector:json\", waves_spec AS \"waves_spec:json\", gate AS \"gate:json\", "            \
	"max_failures, failures_seen, start_at AS \"start_at:time\", created_by, created_at AS "   \
	"\"created_at:time\", started_at AS \"started_at:time\", finished_at AS "                  \
	"\"finished_at:time\", updated_at AS \"updated_at:time\" FROM rollouts "

/* Counts by node state, the failure total, and (full) waves, nodes and the estimate. */
enum rp_err
store_rollout_view(struct conn *c, int64_t id, int full, json_t **out)
{
	json_t *obj = NULL, *counts = NULL, *wl = NULL, *nl = NULL, *failed = NULL, *skipped = NULL;
	json_t *gate;
	struct stmt *s;
	int64_t now = rp_time_now_ms(), dur_sum = 0, dur_n = 0, wave_sum = 0, wave_n = 0;
	int64_t waves_left = 0, current = -1, wait_s;
	enum rp_err e = RP_ERR_INTERNAL;
	const char *state;

	s = STMT_ARGS(c, RO_COLS "WHERE id = ?", id);
	if ((e = store_one(c, s, "rollout")) != RP_ERR_OK)
		goto out;
	obj = store_row(c, s);
	sql_reset(s);
	/* The expanded recipe plan is the engine's business; the recipe's name says enough. */
	gate = json_object_get(obj, "gate");
	json_object_del(gate, "plan");
	wait_s = json_integer_value(json_object_get(gate, "wait_s"));
	counts = json_pack("{s:i, s:i, s:i, s:i, s:i}", "pending", 0, "running", 0, "succeeded", 0,
	                   "failed", 0, "skipped", 0);
	s = STMT_ARGS(
	        c, "SELECT state, count(*) FROM rollout_nodes WHERE rollout_id = ? GROUP BY state",
	        id);
	{
		int64_t total = 0;

		while (store_next(c, s, "rollout counts", &e)) {
			json_object_set_new(counts, col_text(s, 0), json_integer(sql_int(s, 1)));
			total += sql_int(s, 1);
		}
		if (e != RP_ERR_OK)
			goto out;
		json_object_set_new(counts, "total", json_integer(total));
	}
	json_object_set(obj, "counts", counts);
	json_object_set_new(obj, "failures",
	                    json_pack("{s:O, s:O, s:O}", "current",
	                              json_object_get(counts, "failed"), "seen",
	                              json_object_get(obj, "failures_seen"), "max",
	                              json_object_get(obj, "max_failures")));
	json_object_del(obj, "failures_seen");
	/* Waves: per-state node counts and timings. */
	wl = json_array();
	s = STMT_ARGS(
	        c,
	        "SELECT w.idx, w.canary, w.state, w.started_at, w.finished_at, w.done_at, "
	        "count(rn.node_id), count(CASE WHEN rn.state = 'pending' THEN 1 END), "
	        "count(CASE WHEN rn.state = 'running' THEN 1 END), count(CASE WHEN rn.state = "
	        "'succeeded' THEN 1 END), count(CASE WHEN rn.state = 'failed' THEN 1 END), "
	        "count(CASE WHEN rn.state = 'skipped' THEN 1 END) FROM rollout_waves w LEFT JOIN "
	        "rollout_nodes rn ON rn.rollout_id = w.rollout_id AND rn.wave = w.idx WHERE "
	        "w.rollout_id = ? GROUP BY w.rollout_id, w.idx ORDER BY w.idx",
	        id);
	while (store_next(c, s, "rollout waves", &e)) {
		int64_t st_at = sql_int(s, 3), done_at = sql_int(s, 5);
		const char *ws = col_text(s, 2);

		if (strcmp(ws, "done") != 0) {
			waves_left++;
			if (current < 0)
				current = sql_int(s, 0);
		} else if (st_at > 0 && done_at >= st_at) {
			wave_sum += done_at - st_at;
			wave_n++;
		}
		json_array_append_new(
		        wl,
		        json_pack(
		                "{s:I, s:b, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:o, s:o}",
		                "index", (json_int_t)sql_int(s, 0), "canary", sql_int(s, 1),
		                "state", ws, "nodes", (json_int_t)sql_int(s, 6), "counts",
		                "pending", (json_int_t)sql_int(s, 7), "running",
		                (json_int_t)sql_int(s, 8), "succeeded", (json_int_t)sql_int(s, 9),
		                "failed", (json_int_t)sql_int(s, 10), "skipped",
		                (json_int_t)sql_int(s, 11), "started_at", time_or_null(st_at),
		                "finished_at", time_or_null(sql_int(s, 4)), "gate_done_at",
		                time_or_null(done_at)));
	}
	if (e != RP_ERR_OK)
		goto out;
	json_object_set_new(obj, "wave_count", json_integer((json_int_t)json_array_size(wl)));
	json_object_set_new(obj, "current_wave",
	                    current >= 0 ? json_integer(current) : json_null());
	/* Nodes. */
	nl = json_array();
	failed = json_array();
	skipped = json_array();
	s = STMT_ARGS(c,
	              "SELECT rn.node_name, rn.rack_name, rn.wave, rn.state, rn.phase, rn.reason, "
	              "rn.attempt, j.uuid, g.uuid, rn.result, rn.started_at, rn.job_done_at, "
	              "rn.finished_at FROM rollout_nodes rn LEFT JOIN jobs j ON j.id = rn.job_id "
	              "LEFT JOIN jobs g ON g.id = rn.gate_job_id WHERE rn.rollout_id = ? ORDER BY "
	              "rn.wave IS NULL, rn.wave, rn.node_name",
	              id);
	while (store_next(c, s, "rollout nodes", &e)) {
		const char *ns = col_text(s, 3);
		int64_t t0 = sql_int(s, 10), t1 = sql_int(s, 11);
		json_t *node;

		if (t0 > 0 && t1 >= t0) {
			dur_sum += t1 - t0;
			dur_n++;
		}
		if (!strcmp(ns, "failed"))
			json_array_append_new(
			        failed,
			        json_pack("{s:s, s:o, s:s?}", "node", col_text(s, 0), "wave",
			                  sql_type(s, 2) == SQL_NULL ? json_null()
			                                             : json_integer(sql_int(s, 2)),
			                  "reason", col_text(s, 5)));
		if (!strcmp(ns, "skipped"))
			json_array_append_new(skipped,
			                      json_pack("{s:s, s:s?}", "node", col_text(s, 0),
			                                "reason", col_text(s, 5)));
		if (!full)
			continue;
		node = json_pack(
		        "{s:s, s:s?, s:o, s:s, s:s?, s:s?, s:i, s:s?, s:s?, s:o, s:o, s:o, "
		        "s:o, s:o}",
		        "node", col_text(s, 0), "rack", col_text(s, 1), "wave",
		        sql_type(s, 2) == SQL_NULL ? json_null() : json_integer(sql_int(s, 2)),
		        "state", ns, "phase", col_text(s, 4), "reason", col_text(s, 5), "attempt",
		        sql_int(s, 6), "job", col_text(s, 7), "gate_job", col_text(s, 8), "result",
		        col_text(s, 9) ? json_loads(col_text(s, 9), 0, NULL) ?: json_null()
		                       : json_null(),
		        "started_at", time_or_null(t0), "job_finished_at", time_or_null(t1),
		        "finished_at", time_or_null(sql_int(s, 12)), "duration_ms",
		        t0 > 0 && t1 >= t0 ? json_integer(t1 - t0) : json_null());
		json_array_append_new(nl, node);
	}
	if (e != RP_ERR_OK)
		goto out;
	json_object_set_new(obj, "failed", failed);
	failed = NULL;
	json_object_set_new(obj, "skipped", skipped);
	skipped = NULL;
	if (full) {
		json_object_set_new(obj, "waves", wl);
		wl = NULL;
		json_object_set_new(obj, "nodes", nl);
		nl = NULL;
	}
	/* Estimated finish: the mean wave (start to gate passed) so far times the waves left;
	 * before any wave passed, the mean node update plus the gate wait per wave left. */
	state = json_string_value(json_object_get(obj, "state"));
	json_object_set_new(obj, "mean_node_ms",
	                    dur_n ? json_integer(dur_sum / dur_n) : json_null());
	if ((!strcmp(state, "running") || !strcmp(state, "scheduled")) && waves_left > 0 &&
	    (wave_n > 0 || dur_n > 0)) {
		int64_t per = wave_n ? wave_sum / wave_n : dur_sum / dur_n + wait_s * 1000;

		json_object_set_new(obj, "estimated_finish_at",
		                    time_or_null(now + per * waves_left));
	} else {
		json_object_set_new(obj, "estimated_finish_at", json_null());
	}
	*out = obj;
	obj = NULL;
	e = RP_ERR_OK;
out:
	json_decref(obj);
	json_decref(counts);
	json_decref(wl);
	json_decref(nl);
	json_decref(failed);
	json_decref(skipped);
	return e;
}

enum rp_err
rp_store_rollout_get(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	int64_t id = 0;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_ROLLOUT, key, &id)) == RP_ERR_OK)
		e = store_rollout_view(c, id, 1, out);
	store_read_end(c);
	return e;
}

enum rp_err
rp_store_rollout_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *items = NULL, *it;
	struct stmt *s;
	enum rp_err e;
	size_t i;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT id AS _id, uuid AS id FROM rollouts WHERE id < ?1 AND (?2 IS NULL OR "
	              "state = ?2) AND (?3 IS NULL OR kind = ?3) ORDER BY id DESC LIMIT ?4",
	              rq->after_id > 0 ? rq->after_id : INT64_MAX);
	store_bind_str(s, 2, rq->filter, "state");
	store_bind_str(s, 3, rq->filter, "kind");
	sql_bind_int(s, 4, rq->limit + 1);
	/* The items are reshaped below: this list answers with a tree. */
	{
		struct rp_page_req tree = *rq;

		tree.want_text = 0;
		if ((e = store_page(c, s, &tree, "id", out)) != RP_ERR_OK)
			goto out;
	}
	/* Each item: the summary view (counts, failures, estimate; no per-node list). */
	items = json_array();
	json_array_foreach(out->items, i, it)
	{
		json_t *v = NULL;
		int64_t id = 0;

		if ((e = store_id_of(c, T_ROLLOUT, json_string_value(json_object_get(it, "id")),
		                     &id)) != RP_ERR_OK ||
		    (e = store_rollout_view(c, id, 0, &v)) != RP_ERR_OK) {
			json_decref(out->items);
			out->items = NULL;
			goto out;
		}
		json_array_append_new(items, v);
	}
	json_decref(out->items);
	out->items = items;
	items = NULL;
out:
	json_decref(items);
	store_read_end(c);
	return e;
}

/* ---- Pre-flight: what the operation will need ------------------------------------------ */

/* The BMC of node_id as {driver, address, username, password} (booleans but the driver; all
 * null/false without a BMC) into node. */
static enum rp_err
pf_bmc(struct conn *c, int64_t node_id, json_t *node)
{
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT b.driver, b.address IS NOT NULL AND b.address != '', "
	                           "b.username IS NOT NULL AND b.username != '', b.password_sealed "
	                           "IS NOT NULL FROM nodes n LEFT JOIN bmcs b ON b.node_id = n.id "
	                           "WHERE n.id = ?",
	                           node_id);
	enum rp_err e;

	if ((e = store_one(c, s, "preflight bmc")) != RP_ERR_OK)
		return e;
	json_object_set_new(node, "driver",
	                    col_text(s, 0) ? json_string(col_text(s, 0)) : json_null());
	json_object_set_new(node, "address", json_boolean(sql_int(s, 1)));
	json_object_set_new(node, "username", json_boolean(sql_int(s, 2)));
	json_object_set_new(node, "password", json_boolean(sql_int(s, 3)));
	sql_reset(s);
	return RP_ERR_OK;
}

/* The params of recipe `name` (an object), or JSON null when there is no such recipe. */
static enum rp_err
pf_recipe(struct conn *c, const char *name, json_t **out)
{
	struct stmt *s = STMT(c, "SELECT params FROM recipes WHERE name = ?");
	enum rp_err e;

	*out = NULL;
	sql_bind_text(s, 1, name);
	if ((e = store_one(c, s, "preflight recipe")) == RP_ERR_NOT_FOUND) {
		*out = json_null();
		return RP_ERR_OK;
	}
	if (e != RP_ERR_OK)
		return e;
	*out = col_text(s, 0) ? json_loads(col_text(s, 0), 0, NULL) : NULL;
	sql_reset(s);
	if (*out == NULL)
		*out = json_object();
	return RP_ERR_OK;
}

/* Firmware: the node's baseline components (only those named in `only`, when given; a name
 * not in the baseline is RP_ERR_INVALID_FIELD), without those the store already shows at
 * their target. RP_ERR_CONFLICT (detail) without a baseline. */
static enum rp_err
pf_firmware(struct conn *c, const struct node_ref *n, json_t *only, json_t *node, json_t **detail)
{
	json_t *targets = NULL, *t, *v, *keep = NULL;
	char bname[128] = "", cls[128] = "";
	struct stmt *s;
	enum rp_err e;
	size_t i, j;

	s = STMT_ARGS(c,
	              "SELECT coalesce(n.node_class, ''), b.name FROM nodes n LEFT JOIN "
	              "firmware_baselines b ON b.node_class = n.node_class WHERE n.id = ?",
	              n->id);
	if ((e = store_one(c, s, "preflight baseline")) != RP_ERR_OK)
		return e;
	snprintf(cls, sizeof cls, "%s", col_text(s, 0) ?: "");
	if (col_text(s, 1))
		snprintf(bname, sizeof bname, "%s", col_text(s, 1) ?: "");
	sql_reset(s);
	if (bname[0] == '\0') {
		*detail = store_why(NULL,
		                    cls[0] ? "node class '%s' has no firmware baseline"
		                           : "node %s has no node_class, so no firmware baseline",
		                    cls[0] ? cls : n->name);
		return RP_ERR_CONFLICT;
	}
	s = STMT_ARGS(
	        c,
	        "SELECT bc.component, bc.version, coalesce(bc.method, 'redfish') AS method, "
	        "bc.recipe, i.name AS image, i.file, i.size, i.sha256, fc.version AS current "
	        "FROM nodes n JOIN firmware_baselines b ON b.node_class = n.node_class JOIN "
	        "baseline_components bc ON bc.baseline_id = b.id LEFT JOIN images i ON i.id = "
	        "bc.image_id LEFT JOIN firmware_components fc ON fc.node_id = n.id AND "
	        "fc.component = bc.component WHERE n.id = ? ORDER BY bc.component",
	        n->id);
	if ((targets = store_rows(c, s)) == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_components_known(targets, only, detail)) != RP_ERR_OK)
		goto out;
	keep = json_array();
	json_array_foreach(targets, i, t)
	{
		int wanted = json_array_size(only) == 0;
		const char *recipe = json_string_value(json_object_get(t, "recipe"));

		json_array_foreach(only, j, v) wanted |=
		        json_equal(json_object_get(t, "component"), v);
		/* The job skips what is already at target; it needs nothing for it. */
		if (!wanted ||
		    json_equal(json_object_get(t, "current"), json_object_get(t, "version")))
			continue;
		json_object_del(t, "current");
		if (recipe && !strcmp(json_string_value(json_object_get(t, "method")), "agent")) {
			if ((e = pf_recipe(c, recipe, &v)) != RP_ERR_OK)
				goto out;
			json_object_set_new(t, "recipe_params", v);
		}
		json_array_append(keep, t);
	}
	json_object_set_new(node, "baseline", json_string(bname));
	json_object_set(node, "targets", keep);
	e = RP_ERR_OK;
out:
	json_decref(targets);
	json_decref(keep);
	return e;
}

/* BIOS: the profile named (RP_ERR_INVALID_FIELD when unknown), else the node's own or its
 * class's (none: RP_ERR_CONFLICT). */
static enum rp_err
pf_bios(struct conn *c, const struct node_ref *n, const char *profile, json_t *node,
        json_t **detail)
{
	struct stmt *s;
	json_t *p = NULL, *params = NULL;
	int64_t pid = 0;
	enum rp_err e;

	if (profile) {
		if ((e = store_ref(c, T_PROFILE, profile, "profile", &pid, detail)) != RP_ERR_OK)
			return e;
		s = STMT(c, "SELECT p.name, p.method, p.recipe, (SELECT count(*) FROM "
		            "bios_profile_attrs a WHERE a.profile_id = p.id) FROM bios_profiles p "
		            "WHERE p.id = ?");
		sql_bind_int(s, 1, pid);
	} else
		s = STMT_ARGS(c,
		              "SELECT p.name, p.method, p.recipe, (SELECT count(*) FROM "
		              "bios_profile_attrs a WHERE a.profile_id = p.id) FROM nodes n JOIN "
		              "bios_profiles p ON p.id = " TARGET_PROFILE " WHERE n.id = ?",
		              n->id);
	if ((e = store_one(c, s, "preflight profile")) == RP_ERR_NOT_FOUND) {
		*detail = store_why(NULL,
		                    "node %s has no BIOS profile (neither its own nor its class's)",
		                    n->name);
		return RP_ERR_CONFLICT;
	}
	if (e != RP_ERR_OK)
		return e;
	p = json_pack("{s:s, s:s, s:s?, s:I}", "name", col_text(s, 0), "method",
	              col_text(s, 1) ? col_text(s, 1) : "redfish", "recipe", col_text(s, 2),
	              "attributes", (json_int_t)sql_int(s, 3));
	sql_reset(s);
	if (p == NULL)
		return RP_ERR_INTERNAL;
	if (json_object_get(p, "recipe") &&
	    !strcmp(json_string_value(json_object_get(p, "method")), "agent")) {
		if ((e = pf_recipe(c, json_string_value(json_object_get(p, "recipe")), &params)) !=
		    RP_ERR_OK) {
			json_decref(p);
			return e;
		}
		json_object_set_new(p, "recipe_params", params);
	}
	json_object_set_new(node, "profile", p);
	return RP_ERR_OK;
}

enum rp_err
rp_store_preflight(struct rp_store *st, json_t *what, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	const char *kind = json_string_value(json_object_get(what, "kind"));
	const char *key = json_string_value(json_object_get(what, "node"));
	json_t *ids = NULL, *nodes = json_array(), *node = NULL, *v;
	int fw = kind && !strcmp(kind, "firmware");
	struct node_ref n;
	enum rp_err e;
	size_t i;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		goto done;
	if (key) {
		if ((e = store_node_ref(c, key, &n)) != RP_ERR_OK)
			goto out;
		ids = json_pack("[I]", (json_int_t)n.id);
	} else if ((e = store_select_nodes(c, json_object_get(what, "selector"), &ids, detail)) !=
	           RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	json_array_foreach(ids, i, v)
	{
		if ((e = store_node_by_id(c, json_integer_value(v), &n)) != RP_ERR_OK)
			goto out;
		if (key == NULL) {
			/* A rollout: only the nodes its plan will give a job (as in the planning).
			 */
			char why[256] = "", what_[300];
			int target = 0;

			/* In maintenance: skipped. A BMC that cannot take the job (CONFLICT) is
			 * what the check reports. */
			e = store_bmc_ready(c, n.id, why, sizeof why);
			if (e == RP_ERR_INVALID_STATE)
				continue;
			if (e != RP_ERR_OK && e != RP_ERR_CONFLICT)
				goto out;
			if ((e = store_rollout_drift(c, n.id, kind, &target, what_,
			                             sizeof what_)) != RP_ERR_OK)
				goto out;
			if (!target || what_[0] == '\0')
				continue;
		}
		node = json_pack("{s:s}", "node", n.name);
		if ((e = pf_bmc(c, n.id, node)) != RP_ERR_OK)
			goto out;
		e = fw ? pf_firmware(c, &n, json_object_get(what, "components"), node, detail)
		       : pf_bios(c, &n, json_string_value(json_object_get(what, "profile")), node,
		                 detail);
		if (e != RP_ERR_OK)
			goto out;
		json_array_append_new(nodes, node);
		node = NULL;
	}
	*out = json_pack("{s:s, s:O}", "kind", fw ? "firmware" : "bios", "nodes", nodes);
	e = *out ? RP_ERR_OK : RP_ERR_INTERNAL;
out:
	store_read_end(c);
done:
	json_decref(ids);
	json_decref(nodes);
	json_decref(node);
	return e;
}
