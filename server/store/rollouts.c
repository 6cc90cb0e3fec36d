/* Rollouts: the durable plan (waves, per-node states) and every step of the engine, each one
 * transaction, so a restart continues from exactly what was recorded (docs/rollouts.md). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define ACTIVE "('scheduled', 'running', 'paused')"
#define TARGET_PROFILE                                                                             \
	"coalesce(n.bios_profile_id, (SELECT id FROM bios_profiles WHERE node_class = "            \
	"n.node_class))"

/* ---- Small helpers --------------------------------------------------------------------- */

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

/* Run a statement that returns no rows. */
static enum rp_err
exec_stmt(struct conn *c, struct stmt *s, const char *what)
{
	int rc = sql_step(s);

	sql_reset(s);
	return rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, what);
}

static enum rp_err
rollout_id(struct conn *c, const char *key, int64_t *id)
{
	enum rp_err e;
	struct stmt *s;

	if (!rp_uuid_valid(key))
		return RP_ERR_NOT_FOUND;
	s = STMT(c, "SELECT id FROM rollouts WHERE uuid = lower(?)");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_text(s, 1, key);
	if ((e = store_one(c, s, "rollout id")) != RP_ERR_OK)
		return e;
	*id = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
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
	struct stmt *s = STMT(c, "SELECT uuid, kind, state, gate, max_failures, start_at, "
	                         "created_at FROM rollouts WHERE id = ?");
	int rc;

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, id);
	rc = sql_step(s);
	if (rc == SQL_ROW) {
		r->id = id;
		snprintf(r->uuid, sizeof r->uuid, "%s", col_text(s, 0));
		snprintf(r->kind, sizeof r->kind, "%s", col_text(s, 1));
		snprintf(r->state, sizeof r->state, "%s", col_text(s, 2));
		r->gate = json_loads(col_text(s, 3), 0, NULL);
		r->max_failures = sql_int(s, 4);
		r->start_at = sql_int(s, 5);
		r->created_at = sql_int(s, 6);
	}
	sql_reset(s);
	if (rc != SQL_ROW)
		return rc == SQL_DONE ? RP_ERR_NOT_FOUND : store_sqlerr(c, rc, "rollout load");
	if (r->gate == NULL)
		r->gate = json_object();
	return RP_ERR_OK;
}

static enum rp_err
ro_set_state(struct conn *c, struct ro *r, const char *state, const char *reason, int64_t now)
{
	struct stmt *s =
	        STMT(c, "UPDATE rollouts SET state = ?2, state_reason = ?3, updated_at = ?4, "
	                "started_at = CASE WHEN ?2 = 'running' THEN coalesce(started_at, ?4) "
	                "ELSE started_at END, finished_at = CASE WHEN ?2 IN ('completed', "
	                "'aborted') THEN ?4 ELSE finished_at END WHERE id = ?1");

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, r->id);
	sql_bind_text(s, 2, state);
	sql_bind_text(s, 3, reason);
	sql_bind_int(s, 4, now);
	snprintf(r->state, sizeof r->state, "%s", state);
	return exec_stmt(c, s, "rollout state");
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

/* The first member of node_id's drift for kind ("component BMC is 1.0, baseline wants 2.0"),
 * or "" when none. *target 0 when the node has no baseline/profile at all. */
static enum rp_err
node_drift(struct conn *c, int64_t node_id, const char *kind, int *target, char *what, size_t len)
{
	struct stmt *s;
	int rc, fw = !strcmp(kind, "firmware");

	what[0] = '\0';
	s = fw ? STMT(c, "SELECT EXISTS (SELECT 1 FROM nodes n JOIN firmware_baselines b ON "
	                 "b.node_class = n.node_class WHERE n.id = ?)")
	       : STMT(c, "SELECT " TARGET_PROFILE " IS NOT NULL FROM nodes n WHERE n.id = ?");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, node_id);
	rc = sql_step(s);
	*target = rc == SQL_ROW && sql_int(s, 0);
	sql_reset(s);
	if (rc != SQL_ROW)
		return store_sqlerr(c, rc, "rollout target");
	if (!*target)
		return RP_ERR_OK;
	s = fw ? STMT(c, "SELECT bc.component, fc.version, bc.version FROM nodes n JOIN "
	                 "firmware_baselines b ON b.node_class = n.node_class JOIN "
	                 "baseline_components bc ON bc.baseline_id = b.id LEFT JOIN "
	                 "firmware_components fc ON fc.node_id = n.id AND fc.component = "
	                 "bc.component WHERE n.id = ? AND fc.version IS NOT bc.version ORDER BY "
	                 "bc.component LIMIT 1")
	       : STMT(c,
	              "SELECT pa.name, a.value, pa.value FROM nodes n JOIN bios_profile_attrs pa "
	              "ON pa.profile_id = " TARGET_PROFILE " LEFT JOIN bios_actual a ON "
	              "a.node_id = n.id AND a.name = pa.name WHERE n.id = ? AND a.value IS NOT "
	              "pa.value ORDER BY pa.name LIMIT 1");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, node_id);
	rc = sql_step(s);
	if (rc == SQL_ROW)
		snprintf(what, len, "%s %s is %s, %s wants %s", fw ? "component" : "attribute",
		         col_text(s, 0), col_text(s, 1) ? col_text(s, 1) : "unknown",
		         fw ? "the baseline" : "the profile", col_text(s, 2));
	sql_reset(s);
	return rc == SQL_ROW || rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, "rollout drift");
}

/* ---- Planning -------------------------------------------------------------------------- */

struct cand {
	int64_t id, rack_id;
	char name[64], rack[64];
	int wave;
};

/* Assign candidates (in selector order) to waves: a canary wave of `canary` nodes, then
 * waves of `batch`, each taking at most max_per_rack nodes of one rack (0: no cap). Racks
 * take turns, so every wave spreads over as many racks as it can. Nodes without a rack count
 * as racks of their own. Returns the number of waves. */
static int
plan_waves(struct cand *cs, size_t n, int canary, int batch, int max_per_rack)
{
	size_t *order = calloc(n ? n : 1, sizeof *order), *start = calloc(n + 1, sizeof *start);
	size_t *next = calloc(n + 1, sizeof *next), *end = calloc(n + 1, sizeof *end);
	int64_t *key = calloc(n ? n : 1, sizeof *key);
	int *taken = calloc(n + 1, sizeof *taken);
	size_t ngroups = 0, i, g, left = n, cursor = 0;
	int wave = 0;

	if (!order || !start || !next || !end || !key || !taken) {
		wave = -1;
		goto out;
	}
	/* Group by rack (an open-addressing hash of the keys, so thousands of racks cost no
	 * more than a few), keeping the selector's order inside a rack and ordering racks by
	 * their first node. order[] then lists the nodes rack by rack. */
	for (i = 0; i < n; i++)
		key[i] = cs[i].rack_id ? cs[i].rack_id : -cs[i].id;
	{
		size_t cap = 1;
		int64_t *hk;
		size_t *hg;

		while (cap < 2 * n + 2)
			cap <<= 1;
		hk = calloc(cap, sizeof *hk);
		hg = calloc(cap, sizeof *hg);
		if (!hk || !hg) {
			free(hk);
			free(hg);
			wave = -1;
			goto out;
		}
		/* First pass: group sizes. group ids are in order of first appearance. */
		size_t *gid = calloc(n ? n : 1, sizeof *gid), *count = calloc(n + 1, sizeof *count);

		if (!gid || !count) {
			free(hk), free(hg), free(gid), free(count);
			wave = -1;
			goto out;
		}
		for (i = 0; i < n; i++) {
			uint64_t h = (uint64_t)key[i] * 0x9E3779B97F4A7C15ull;
			size_t p = (size_t)(h >> 20) & (cap - 1);

			while (hg[p] && hk[p] != key[i])
				p = (p + 1) & (cap - 1);
			if (hg[p] == 0) {
				hk[p] = key[i];
				hg[p] = ++ngroups;
			}
			gid[i] = hg[p] - 1;
			count[gid[i]]++;
		}
		for (g = 0; g < ngroups; g++)
			start[g + 1] = start[g] + count[g];
		for (g = 0; g < ngroups; g++)
			next[g] = end[g] = start[g];
		for (i = 0; i < n; i++)
			order[end[gid[i]]++] = i;
		free(hk);
		free(hg);
		free(gid);
		free(count);
	}
	while (left > 0) {
		int want = (wave == 0 && canary > 0) ? canary : batch, got = 0, progress = 1;

		memset(taken, 0, (ngroups + 1) * sizeof *taken);
		while (got < want && progress) {
			progress = 0;
			for (g = 0; g < ngroups && got < want; g++) {
				size_t k = (cursor + g) % ngroups;

				if (next[k] == end[k] ||
				    (max_per_rack > 0 && taken[k] >= max_per_rack))
					continue;
				cs[order[next[k]++]].wave = wave;
				taken[k]++;
				got++;
				left--;
				progress = 1;
			}
		}
		/* The next wave starts at the rack after the last one served. */
		cursor = ngroups ? (cursor + 1) % ngroups : 0;
		wave++;
	}
out:
	free(order);
	free(start);
	free(next);
	free(end);
	free(key);
	free(taken);
	return wave;
}

/* A node already in an active rollout (not skipped there): that rollout's id into buf. */
static enum rp_err
node_busy(struct conn *c, int64_t node_id, char *buf, size_t len)
{
	struct stmt *s = STMT(c, "SELECT ro.uuid FROM rollout_nodes rn JOIN rollouts ro ON ro.id = "
	                         "rn.rollout_id WHERE rn.node_id = ? AND rn.state != 'skipped' AND "
	                         "ro.state IN " ACTIVE " LIMIT 1");
	int rc;

	buf[0] = '\0';
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, node_id);
	rc = sql_step(s);
	if (rc == SQL_ROW)
		snprintf(buf, len, "%s", col_text(s, 0));
	sql_reset(s);
	return rc == SQL_ROW || rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, "rollout busy");
}

static enum rp_err
node_insert(struct conn *c, int64_t rollout, const struct cand *cd, int wave, const char *state,
            const char *reason)
{
	struct stmt *s =
	        STMT(c, "INSERT INTO rollout_nodes(rollout_id, node_id, node_name, rack_name, "
	                "wave, state, reason) VALUES (?,?,?,?,?,?,?)");

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, rollout);
	sql_bind_int(s, 2, cd->id);
	sql_bind_text(s, 3, cd->name);
	sql_bind_text(s, 4, cd->rack[0] ? cd->rack : NULL);
	if (wave >= 0)
		sql_bind_int(s, 5, wave);
	sql_bind_text(s, 6, state);
	sql_bind_text(s, 7, reason);
	return exec_stmt(c, s, "rollout node");
}

static enum rp_err rollout_view(struct conn *c, int64_t id, int full, json_t **out);

enum rp_err
rp_store_rollout_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                        json_t **detail)
{
	struct conn *c = store_conn(st);
	const char *kind = json_string_value(json_object_get(in, "kind"));
	json_t *waves = json_object_get(in, "waves"), *ids = NULL, *busy = json_array();
	json_t *skipped = json_array(), *v, *obj = NULL;
	json_t *bv = json_object_get(waves, "batch");
	struct cand *cs = NULL;
	size_t i, n = 0, nc = 0;
	int64_t now = rp_time_now_ms(), id = 0, start_at;
	int canary = 1, batch, max_per_rack, nwaves = 0, w;
	char uuid[RP_UUID_BUF], why[256], *sel = NULL, *wspec = NULL, *gate = NULL;
	struct ro r = {0};
	struct stmt *s;
	enum rp_err e = RP_ERR_INTERNAL;

	if (c == NULL)
		goto done;
	if ((e = store_begin(c)) != RP_ERR_OK)
		goto done;
	if ((e = store_select_nodes(c, json_object_get(in, "selector"), &ids, detail)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	n = json_array_size(ids);
	if ((cs = calloc(n ? n : 1, sizeof *cs)) == NULL)
		goto out;
	/* Who takes part: not in maintenance, with a usable BMC, with a target, and off it. */
	json_array_foreach(ids, i, v)
	{
		struct cand cd = {.id = json_integer_value(v), .wave = -1};
		int maint = 0, target = 0, busy_now = 0, rc;
		char other[RP_UUID_BUF], what[300];

		why[0] = '\0';

		s = STMT(c,
		         "SELECT n.name, coalesce(n.rack_id, 0), r.name, n.maintenance, "
		         "n.maintenance_reason FROM nodes n LEFT JOIN racks r ON r.id = n.rack_id "
		         "WHERE n.id = ?");
		if (s == NULL)
			goto out;
		sql_bind_int(s, 1, cd.id);
		if ((rc = sql_step(s)) == SQL_ROW) {
			snprintf(cd.name, sizeof cd.name, "%s", col_text(s, 0));
			cd.rack_id = sql_int(s, 1);
			snprintf(cd.rack, sizeof cd.rack, "%s",
			         col_text(s, 2) ? col_text(s, 2) : "");
			maint = sql_int(s, 3);
			if (maint)
				snprintf(why, sizeof why, "node is in maintenance%s%s",
				         col_text(s, 4) ? ": " : "",
				         col_text(s, 4) ? col_text(s, 4) : "");
		}
		sql_reset(s);
		if (rc != SQL_ROW) {
			e = store_sqlerr(c, rc, "rollout candidate");
			goto out;
		}
		if (!maint) {
			if ((e = store_bmc_ready(c, cd.id, why, sizeof why)) == RP_ERR_INTERNAL)
				goto out;
			if (e == RP_ERR_OK) {
				if ((e = node_drift(c, cd.id, kind, &target, what, sizeof what)) !=
				    RP_ERR_OK)
					goto out;
				if (!target)
					snprintf(why, sizeof why, "%s",
					         !strcmp(kind, "firmware")
					                 ? "no firmware baseline for its class"
					                 : "no BIOS profile for it or its class");
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
		canary = (int)json_integer_value(json_object_get(waves, "canary"));
	max_per_rack = (int)json_integer_value(json_object_get(waves, "max_per_rack"));
	if (json_is_string(bv)) /* "P%" (checked by the API): of the nodes that take part */
		batch = (int)(((size_t)atoi(json_string_value(bv)) * nc + 99) / 100);
	else
		batch = json_is_integer(bv) ? (int)json_integer_value(bv) : (int)nc;
	if (batch < 1)
		batch = 1;
	if (canary > (int)nc)
		canary = (int)nc;
	if ((nwaves = plan_waves(cs, nc, canary, batch, max_per_rack)) < 0)
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
	s = STMT(
	        c,
	        "INSERT INTO rollouts(uuid, kind, state, selector, waves_spec, gate, max_failures, "
	        "start_at, created_by, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
	if (s == NULL)
		goto out;
	sql_bind_text(s, 1, uuid);
	sql_bind_text(s, 2, kind);
	sql_bind_text(s, 3, start_at > now ? "scheduled" : "running");
	sql_bind_text(s, 4, sel);
	sql_bind_text(s, 5, wspec);
	sql_bind_text(s, 6, gate);
	sql_bind_int(s, 7, json_integer_value(json_object_get(in, "max_failures")));
	sql_bind_int(s, 8, start_at);
	sql_bind_text(s, 9, actor);
	sql_bind_int(s, 10, now);
	sql_bind_int(s, 11, now);
	if ((e = exec_stmt(c, s, "rollout insert")) != RP_ERR_OK)
		goto out;
	id = sql_last_id(c);
	if (start_at <= now) {
		s = STMT(c, "UPDATE rollouts SET started_at = ?2 WHERE id = ?1");
		if (s == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_int(s, 1, id);
		sql_bind_int(s, 2, now);
		if ((e = exec_stmt(c, s, "rollout started")) != RP_ERR_OK)
			goto out;
	}
	for (w = 0; w < nwaves; w++) {
		s = STMT(c, "INSERT INTO rollout_waves(rollout_id, idx, canary) VALUES (?,?,?)");
		if (s == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_int(s, 1, id);
		sql_bind_int(s, 2, w);
		sql_bind_int(s, 3, w == 0 && canary > 0);
		if ((e = exec_stmt(c, s, "rollout wave")) != RP_ERR_OK)
			goto out;
	}
	for (i = 0; i < nc; i++)
		if ((e = node_insert(c, id, &cs[i], cs[i].wave, "pending", NULL)) != RP_ERR_OK)
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
	if ((e = rollout_view(c, id, 1, &obj)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = obj;
	obj = NULL;
out:
	store_rollback(c);
done:
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

/* ---- Views ----------------------------------------------------------------------------- */

#define RO_COLS                                                                                    \
	"SELECT id AS _id, uuid AS id, kind, state, state_reason AS reason, selector AS "          \
	"\"selector:json\", waves_spec AS \"waves_spec:json\", gate AS \"gate:json\", "            \
	"max_failures, failures_seen, start_at AS \"start_at:time\", created_by, created_at AS "   \
	"\"created_at:time\", started_at AS \"started_at:time\", finished_at AS "                  \
	"\"finished_at:time\", updated_at AS \"updated_at:time\" FROM rollouts "

/* Counts by node state, the failure total, and (full) waves, nodes and the estimate. */
static enum rp_err
rollout_view(struct conn *c, int64_t id, int full, json_t **out)
{
	json_t *obj = NULL, *counts = NULL, *wl = NULL, *nl = NULL, *failed = NULL, *skipped = NULL;
	json_t *gate;
	struct stmt *s;
	int64_t now = rp_time_now_ms(), dur_sum = 0, dur_n = 0, wave_sum = 0, wave_n = 0;
	int64_t waves_left = 0, current = -1, wait_s;
	enum rp_err e = RP_ERR_INTERNAL;
	const char *state;
	int rc;

	s = STMT(c, RO_COLS "WHERE id = ?");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, id);
	rc = sql_step(s);
	if (rc == SQL_ROW)
		obj = store_row(c, s);
	sql_reset(s);
	if (rc != SQL_ROW) {
		e = rc == SQL_DONE ? RP_ERR_NOT_FOUND : store_sqlerr(c, rc, "rollout");
		goto out;
	}
	/* The expanded recipe plan is the engine's business; the recipe's name says enough. */
	gate = json_object_get(obj, "gate");
	json_object_del(gate, "plan");
	wait_s = json_integer_value(json_object_get(gate, "wait_s"));
	counts = json_pack("{s:i, s:i, s:i, s:i, s:i}", "pending", 0, "running", 0, "succeeded", 0,
	                   "failed", 0, "skipped", 0);
	s = STMT(c,
	         "SELECT state, count(*) FROM rollout_nodes WHERE rollout_id = ? GROUP BY state");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, id);
	{
		int64_t total = 0;

		while ((rc = sql_step(s)) == SQL_ROW) {
			json_object_set_new(counts, col_text(s, 0), json_integer(sql_int(s, 1)));
			total += sql_int(s, 1);
		}
		sql_reset(s);
		if (rc != SQL_DONE) {
			e = store_sqlerr(c, rc, "rollout counts");
			goto out;
		}
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
	s = STMT(c,
	         "SELECT w.idx, w.canary, w.state, w.started_at, w.finished_at, w.done_at, "
	         "count(rn.node_id), sum(rn.state = 'pending'), sum(rn.state = 'running'), "
	         "sum(rn.state = 'succeeded'), sum(rn.state = 'failed'), sum(rn.state = "
	         "'skipped') FROM rollout_waves w LEFT JOIN rollout_nodes rn ON rn.rollout_id = "
	         "w.rollout_id AND rn.wave = w.idx WHERE w.rollout_id = ? GROUP BY w.idx ORDER BY "
	         "w.idx");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, id);
	while ((rc = sql_step(s)) == SQL_ROW) {
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
	sql_reset(s);
	if (rc != SQL_DONE) {
		e = store_sqlerr(c, rc, "rollout waves");
		goto out;
	}
	json_object_set_new(obj, "wave_count", json_integer((json_int_t)json_array_size(wl)));
	json_object_set_new(obj, "current_wave",
	                    current >= 0 ? json_integer(current) : json_null());
	/* Nodes. */
	nl = json_array();
	failed = json_array();
	skipped = json_array();
	s = STMT(c, "SELECT rn.node_name, rn.rack_name, rn.wave, rn.state, rn.phase, rn.reason, "
	            "rn.attempt, j.uuid, g.uuid, rn.result, rn.started_at, rn.job_done_at, "
	            "rn.finished_at FROM rollout_nodes rn LEFT JOIN jobs j ON j.id = rn.job_id "
	            "LEFT JOIN jobs g ON g.id = rn.gate_job_id WHERE rn.rollout_id = ? ORDER BY "
	            "rn.wave IS NULL, rn.wave, rn.node_name");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, id);
	while ((rc = sql_step(s)) == SQL_ROW) {
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
	sql_reset(s);
	if (rc != SQL_DONE) {
		e = store_sqlerr(c, rc, "rollout nodes");
		goto out;
	}
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
	struct conn *c = store_conn(st);
	int64_t id = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = rollout_id(c, key, &id)) == RP_ERR_OK)
		e = rollout_view(c, id, 1, out);
	store_read_end(c);
	return e;
}

enum rp_err
rp_store_rollout_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	struct conn *c = store_conn(st);
	json_t *items = NULL, *it;
	struct stmt *s;
	enum rp_err e;
	size_t i;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	s = STMT(c, "SELECT id AS _id, uuid AS id FROM rollouts WHERE id < ?1 AND (?2 IS NULL OR "
	            "state = ?2) AND (?3 IS NULL OR kind = ?3) ORDER BY id DESC LIMIT ?4");
	if (s == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	sql_bind_int(s, 1, rq->after_id > 0 ? rq->after_id : INT64_MAX);
	store_bind_str(s, 2, rq->filter, "state");
	store_bind_str(s, 3, rq->filter, "kind");
	sql_bind_int(s, 4, rq->limit + 1);
	if ((e = store_page(c, s, rq, "id", out)) != RP_ERR_OK)
		goto out;
	/* Each item: the summary view (counts, failures, estimate; no per-node list). */
	items = json_array();
	json_array_foreach(out->items, i, it)
	{
		json_t *v = NULL;
		int64_t id = 0;

		if ((e = rollout_id(c, json_string_value(json_object_get(it, "id")), &id)) !=
		            RP_ERR_OK ||
		    (e = rollout_view(c, id, 0, &v)) != RP_ERR_OK) {
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

/* ---- Operator actions ------------------------------------------------------------------ */

static enum rp_err
count_failed(struct conn *c, int64_t id, int64_t *n)
{
	struct stmt *s =
	        STMT(c, "SELECT count(*) FROM rollout_nodes WHERE rollout_id = ? AND state = "
	                "'failed'");
	int rc;

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, id);
	rc = sql_step(s);
	if (rc == SQL_ROW)
		*n = sql_int(s, 0);
	sql_reset(s);
	return rc == SQL_ROW ? RP_ERR_OK : store_sqlerr(c, rc, "rollout failures");
}

/* Abort: queued jobs of the rollout end cancelled (their nodes skipped), nodes not started are
 * skipped, nodes waiting on their gate keep the update they got; running jobs finish. */
static enum rp_err
do_abort(struct conn *c, struct ro *r, const char *actor, const char *reason, int64_t now)
{
	struct stmt *s;
	json_t *jobs = json_array(), *v;
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i;
	int rc;

	s = STMT(c,
	         "SELECT j.id FROM rollout_nodes rn JOIN jobs j ON j.id IN (rn.job_id, "
	         "rn.gate_job_id) WHERE rn.rollout_id = ? AND rn.state = 'running' AND j.state = "
	         "'queued'");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, r->id);
	while ((rc = sql_step(s)) == SQL_ROW)
		json_array_append_new(jobs, json_integer(sql_int(s, 0)));
	sql_reset(s);
	if (rc != SQL_DONE) {
		e = store_sqlerr(c, rc, "rollout abort jobs");
		goto out;
	}
	json_array_foreach(jobs, i, v)
	{
		s = STMT(
		        c,
		        "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, error_code = "
		        "'cancelled', error = 'rollout aborted', finished_at = ?2, updated_at = ?2 "
		        "WHERE id = ?1 AND state = 'queued'");
		if (s == NULL)
			goto out;
		sql_bind_int(s, 1, json_integer_value(v));
		sql_bind_int(s, 2, now);
		if ((e = exec_stmt(c, s, "rollout cancel job")) != RP_ERR_OK ||
		    (e = store_steps_close(c, json_integer_value(v), "cancelled")) != RP_ERR_OK)
			goto out;
	}
	s = STMT(c, "UPDATE rollout_nodes SET state = 'skipped', phase = NULL, reason = 'rollout "
	            "aborted', finished_at = ?2 WHERE rollout_id = ?1 AND (state = 'pending' OR "
	            "(state = 'running' AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_id AND "
	            "j.state = 'cancelled')))");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, now);
	if ((e = exec_stmt(c, s, "rollout abort nodes")) != RP_ERR_OK)
		goto out;
	s = STMT(c,
	         "UPDATE rollout_nodes SET state = 'succeeded', phase = NULL, reason = 'updated; "
	         "gate not evaluated (rollout aborted)', finished_at = ?2 WHERE rollout_id = ?1 "
	         "AND state = 'running' AND phase = 'gate'");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, now);
	if ((e = exec_stmt(c, s, "rollout abort gate")) != RP_ERR_OK)
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
		s = STMT(c, "UPDATE rollouts SET max_failures = ?2 WHERE id = ?1");
		if (s == NULL)
			return RP_ERR_INTERNAL;
		sql_bind_int(s, 1, r->id);
		sql_bind_int(s, 2, r->max_failures);
		if ((e = exec_stmt(c, s, "rollout max_failures")) != RP_ERR_OK)
			return e;
	}
	if (retry) {
		s = STMT(c, "UPDATE rollout_waves SET state = 'pending' WHERE rollout_id = ?1 AND "
		            "idx IN "
		            "(SELECT wave FROM rollout_nodes WHERE rollout_id = ?1 AND state = "
		            "'failed')");
		if (s == NULL)
			return RP_ERR_INTERNAL;
		sql_bind_int(s, 1, r->id);
		if ((e = exec_stmt(c, s, "rollout reopen waves")) != RP_ERR_OK)
			return e;
		s = STMT(c,
		         "UPDATE rollout_nodes SET state = 'pending', phase = NULL, reason = NULL, "
		         "job_id = NULL, gate_job_id = NULL, finished_at = NULL WHERE rollout_id = "
		         "?1 "
		         "AND state = 'failed'");
		if (s == NULL)
			return RP_ERR_INTERNAL;
		sql_bind_int(s, 1, r->id);
		if ((e = exec_stmt(c, s, "rollout retry nodes")) != RP_ERR_OK)
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

enum rp_err
rp_store_rollout_control(struct rp_store *st, const char *key, const char *action, json_t *opts,
                         const char *actor, json_t **out, json_t **detail)
{
	struct conn *c = store_conn(st);
	struct ro r = {0};
	int64_t id = 0, now = rp_time_now_ms();
	json_t *obj = NULL;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = rollout_id(c, key, &id)) != RP_ERR_OK || (e = ro_load(c, id, &r)) != RP_ERR_OK)
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
	if ((e = rollout_view(c, id, 1, &obj)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = obj;
	obj = NULL;
out:
	store_rollback(c);
	json_decref(obj);
	json_decref(r.gate);
	return e;
}

/* ---- The engine's steps ---------------------------------------------------------------- */

enum rp_err
rp_store_rollouts_active(struct rp_store *st, json_t **out)
{
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *ids;
	int rc;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	/* Active ones, and ended ones whose last jobs still run (their nodes settle). */
	s = STMT(c, "SELECT id FROM rollouts WHERE state IN " ACTIVE " UNION SELECT DISTINCT "
	            "rollout_id FROM rollout_nodes WHERE state = 'running' ORDER BY 1");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	ids = json_array();
	while ((rc = sql_step(s)) == SQL_ROW)
		json_array_append_new(ids, json_integer(sql_int(s, 0)));
	sql_reset(s);
	if (rc != SQL_DONE) {
		json_decref(ids);
		return store_sqlerr(c, rc, "rollouts active");
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

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, node_id);
	sql_bind_text(s, 3, state);
	sql_bind_text(s, 4, reason);
	sql_bind_int(s, 5, now);
	if ((e = exec_stmt(c, s, "rollout node settle")) != RP_ERR_OK)
		return e;
	if (strcmp(state, "failed") != 0)
		return RP_ERR_OK;
	s = STMT(c, "UPDATE rollouts SET failures_seen = failures_seen + 1, updated_at = ?2 WHERE "
	            "id = ?1");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, now);
	if ((e = exec_stmt(c, s, "rollout failures")) != RP_ERR_OK)
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
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i;
	int rc;

	s = STMT(c,
	         "SELECT rn.node_id, j.state, j.error, j.result, coalesce(j.finished_at, ?2) "
	         "FROM rollout_nodes rn JOIN jobs j ON j.id = rn.job_id WHERE rn.rollout_id = ?1 "
	         "AND rn.state = 'running' AND rn.phase = 'job' AND j.state IN ('succeeded', "
	         "'failed', 'cancelled')");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, now);
	while ((rc = sql_step(s)) == SQL_ROW)
		json_array_append_new(ended,
		                      json_pack("{s:I, s:s, s:s?, s:s?, s:I}", "node",
		                                (json_int_t)sql_int(s, 0), "state", col_text(s, 1),
		                                "error", col_text(s, 2), "result", col_text(s, 3),
		                                "at", (json_int_t)sql_int(s, 4)));
	sql_reset(s);
	if (rc != SQL_DONE) {
		e = store_sqlerr(c, rc, "rollout sync");
		goto out;
	}
	json_array_foreach(ended, i, v)
	{
		int64_t node = json_integer_value(json_object_get(v, "node"));
		const char *js = json_string_value(json_object_get(v, "state"));
		char reason[600];

		s = STMT(c,
		         "UPDATE rollout_nodes SET result = ?3, job_done_at = ?4, phase = 'gate' "
		         "WHERE rollout_id = ?1 AND node_id = ?2");
		if (s == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_int(s, 1, r->id);
		sql_bind_int(s, 2, node);
		store_bind_str(s, 3, v, "result");
		sql_bind_int(s, 4, json_integer_value(json_object_get(v, "at")));
		if ((e = exec_stmt(c, s, "rollout job done")) != RP_ERR_OK)
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
		snprintf(reason, sizeof reason, "%s job %s: %s",
		         !strcmp(r->kind, "firmware") ? "firmware_update" : "bios_apply", js,
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
	enum rp_err e = RP_ERR_INTERNAL;
	int64_t started = 0, skipped = 0;
	size_t i;
	int rc;

	s = STMT(c,
	         "SELECT node_id FROM rollout_nodes WHERE rollout_id = ? AND wave = ? AND state = "
	         "'pending' ORDER BY node_id");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, w);
	while ((rc = sql_step(s)) == SQL_ROW)
		json_array_append_new(nodes, json_integer(sql_int(s, 0)));
	sql_reset(s);
	if (rc != SQL_DONE) {
		e = store_sqlerr(c, rc, "rollout wave nodes");
		goto out;
	}
	job = json_pack("{s:s, s:{s:s}, s:b}", "type",
	                !strcmp(r->kind, "firmware") ? "firmware_update" : "bios_apply", "params",
	                "rollout", r->uuid, "mutating", 1);
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
			s = STMT(c, "UPDATE rollout_nodes SET state = 'skipped', reason = ?3, "
			            "finished_at = "
			            "?4 WHERE rollout_id = ?1 AND node_id = ?2");
			if (s == NULL) {
				e = RP_ERR_INTERNAL;
				goto out;
			}
			sql_bind_int(s, 1, r->id);
			sql_bind_int(s, 2, n.id);
			sql_bind_text(s, 3, why);
			sql_bind_int(s, 4, now);
			if ((e = exec_stmt(c, s, "rollout skip")) != RP_ERR_OK)
				goto out;
			skipped++;
			continue;
		}
		if (e != RP_ERR_OK)
			goto out;
		if ((e = store_job_add(c, &n, 0, job, "rollout", &job_id)) != RP_ERR_OK)
			goto out;
		s = STMT(
		        c,
		        "UPDATE rollout_nodes SET state = 'running', phase = 'job', job_id = ?3, "
		        "attempt = attempt + 1, started_at = ?4, job_done_at = NULL, reason = NULL "
		        "WHERE rollout_id = ?1 AND node_id = ?2 AND state = 'pending'");
		if (s == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_int(s, 1, r->id);
		sql_bind_int(s, 2, n.id);
		sql_bind_int(s, 3, job_id);
		sql_bind_int(s, 4, now);
		if ((e = exec_stmt(c, s, "rollout node start")) != RP_ERR_OK)
			goto out;
		started++;
	}
	s = STMT(c, "UPDATE rollout_waves SET state = 'running', started_at = coalesce(started_at, "
	            "?3), "
	            "finished_at = NULL, done_at = NULL WHERE rollout_id = ?1 AND idx = ?2");
	if (s == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, w);
	sql_bind_int(s, 3, now);
	if ((e = exec_stmt(c, s, "rollout wave start")) != RP_ERR_OK)
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

/* Why node n does not pass the gate yet ("" when it does). *need_power: only a fresh power
 * reading is missing. A gate recipe job is queued here once the rest passes. */
static enum rp_err
gate_check(struct conn *c, struct ro *r, int64_t node_id, int64_t wave_end, int64_t job_done,
           char *why, size_t len, int *need_power, int *changed)
{
	json_t *req = json_object_get(r->gate, "require"), *v,
	       *plan = json_object_get(r->gate, "plan");
	struct stmt *s;
	enum rp_err e;
	size_t i;
	int rc;

	why[0] = '\0';
	json_array_foreach(req, i, v)
	{
		const char *q = json_string_value(v);

		if (!strcmp(q, "power_on")) {
			s = STMT(c, "SELECT power_state, coalesce(power_state_at, 0) FROM nodes "
			            "WHERE id = ?");
			if (s == NULL)
				return RP_ERR_INTERNAL;
			sql_bind_int(s, 1, node_id);
			if ((rc = sql_step(s)) == SQL_ROW) {
				if (sql_int(s, 1) < job_done) {
					snprintf(why, len,
					         "no power reading since its update (last: %s)",
					         col_text(s, 0));
					*need_power = 1;
				} else if (strcmp(col_text(s, 0), "on") != 0) {
					snprintf(why, len, "power is %s, not on", col_text(s, 0));
				}
			}
			sql_reset(s);
			if (rc != SQL_ROW)
				return store_sqlerr(c, rc, "gate power");
		} else if (!strcmp(q, "agent_heartbeat")) {
			s = STMT(c, "SELECT seen_at FROM agents WHERE node_id = ?");
			if (s == NULL)
				return RP_ERR_INTERNAL;
			sql_bind_int(s, 1, node_id);
			rc = sql_step(s);
			if (rc == SQL_DONE)
				snprintf(why, len, "no agent has registered for the node");
			else if (rc == SQL_ROW && sql_int(s, 0) <= wave_end)
				snprintf(why, len, "no agent heartbeat since the wave ended");
			sql_reset(s);
			if (rc != SQL_ROW && rc != SQL_DONE)
				return store_sqlerr(c, rc, "gate heartbeat");
		} else if (!strcmp(q, "version_match")) {
			char what[300];
			int target = 0;

			if ((e = node_drift(c, node_id, r->kind, &target, what, sizeof what)) !=
			    RP_ERR_OK)
				return e;
			if (!target)
				snprintf(why, len, "the node no longer has a %s",
				         !strcmp(r->kind, "firmware") ? "firmware baseline"
				                                      : "BIOS profile");
			else if (what[0])
				snprintf(why, len, "still off target: %s", what);
		}
		if (why[0])
			return RP_ERR_OK;
	}
	if (!json_is_array(plan))
		return RP_ERR_OK;
	/* The health-check recipe, as a steps job, once per node and attempt. */
	{
		int64_t gate_job = 0;

		s = STMT(c, "SELECT coalesce(rn.gate_job_id, 0), j.state, j.error FROM "
		            "rollout_nodes rn "
		            "LEFT JOIN jobs j ON j.id = rn.gate_job_id WHERE rn.rollout_id = ? AND "
		            "rn.node_id = ?");
		if (s == NULL)
			return RP_ERR_INTERNAL;
		sql_bind_int(s, 1, r->id);
		sql_bind_int(s, 2, node_id);
		if ((rc = sql_step(s)) == SQL_ROW) {
			gate_job = sql_int(s, 0);
			if (gate_job && !strcmp(col_text(s, 1), "succeeded"))
				why[0] = '\0';
			else if (gate_job && (!strcmp(col_text(s, 1), "queued") ||
			                      !strcmp(col_text(s, 1), "running")))
				snprintf(why, len, "health check recipe still running");
			else if (gate_job)
				snprintf(why, len, "!health check recipe %s: %s", col_text(s, 1),
				         col_text(s, 2) ? col_text(s, 2) : "");
		}
		sql_reset(s);
		if (rc != SQL_ROW)
			return store_sqlerr(c, rc, "gate recipe");
		if (gate_job == 0) {
			struct node_ref n;
			json_t *job;
			char nwhy[256];

			if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
				return e;
			if ((e = store_ssh_ready(c, node_id, nwhy, sizeof nwhy)) != RP_ERR_OK) {
				if (e == RP_ERR_INTERNAL)
					return e;
				snprintf(why, len, "!health check recipe cannot run: %s", nwhy);
				return RP_ERR_OK;
			}
			job = json_pack("{s:s, s:{s:O, s:O, s:s}, s:b, s:i}", "type", "steps",
			                "params", "plan", plan, "recipe",
			                json_object_get(r->gate, "recipe"), "rollout", r->uuid,
			                "mutating", 1, "max_attempts", 8);
			e = store_job_add(c, &n, 0, job, "rollout", &gate_job);
			json_decref(job);
			if (e != RP_ERR_OK)
				return e;
			s = STMT(c, "UPDATE rollout_nodes SET gate_job_id = ?3 WHERE rollout_id = "
			            "?1 AND "
			            "node_id = ?2");
			if (s == NULL)
				return RP_ERR_INTERNAL;
			sql_bind_int(s, 1, r->id);
			sql_bind_int(s, 2, node_id);
			sql_bind_int(s, 3, gate_job);
			if ((e = exec_stmt(c, s, "gate job")) != RP_ERR_OK)
				return e;
			*changed = 1;
			snprintf(why, len, "health check recipe queued");
		}
	}
	return RP_ERR_OK;
}

/* The gate of wave w (every job ended at wave_end): after wait_s, each node waiting on it
 * passes, or fails once timeout_s has gone by too (a "!" reason fails at once). */
static enum rp_err
wave_gate(struct conn *c, struct ro *r, int64_t w, int64_t wave_end, int64_t now, int *done,
          int *need_power, int *changed)
{
	int64_t wait_ms = json_integer_value(json_object_get(r->gate, "wait_s")) * 1000;
	json_t *to = json_object_get(r->gate, "timeout_s");
	int64_t timeout_ms = (json_is_integer(to) ? json_integer_value(to) : 600) * 1000;
	json_t *nodes = json_array(), *v;
	struct stmt *s;
	enum rp_err e = RP_ERR_INTERNAL;
	int64_t waiting = 0;
	size_t i;
	int rc;

	*done = 0;
	if (now < wave_end + wait_ms) {
		e = RP_ERR_OK;
		goto out;
	}
	s = STMT(c,
	         "SELECT node_id, coalesce(job_done_at, 0) FROM rollout_nodes WHERE rollout_id = ? "
	         "AND wave = ? AND state = 'running' AND phase = 'gate'");
	if (s == NULL)
		goto out;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, w);
	while ((rc = sql_step(s)) == SQL_ROW)
		json_array_append_new(nodes, json_pack("[I, I]", (json_int_t)sql_int(s, 0),
		                                       (json_int_t)sql_int(s, 1)));
	sql_reset(s);
	if (rc != SQL_DONE) {
		e = store_sqlerr(c, rc, "gate nodes");
		goto out;
	}
	json_array_foreach(nodes, i, v)
	{
		int64_t node = json_integer_value(json_array_get(v, 0));
		char why[400], reason[450];

		if ((e = gate_check(c, r, node, wave_end, json_integer_value(json_array_get(v, 1)),
		                    why, sizeof why, need_power, changed)) != RP_ERR_OK)
			goto out;
		if (why[0] == '\0') {
			if ((e = node_settle(c, r, node, "succeeded", NULL, now)) != RP_ERR_OK)
				goto out;
			*changed = 1;
		} else if (why[0] == '!' || now >= wave_end + wait_ms + timeout_ms) {
			snprintf(reason, sizeof reason, "gate: %s", why[0] == '!' ? why + 1 : why);
			if ((e = node_settle(c, r, node, "failed", reason, now)) != RP_ERR_OK)
				goto out;
			*changed = 1;
		} else {
			waiting++;
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
	struct stmt *s =
	        STMT(c, "UPDATE rollout_waves SET state = ?3, finished_at = CASE WHEN ?3 = "
	                "'gating' THEN ?4 ELSE finished_at END, done_at = CASE WHEN ?3 = "
	                "'done' THEN ?4 ELSE done_at END WHERE rollout_id = ?1 AND idx = ?2");

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, r->id);
	sql_bind_int(s, 2, w);
	sql_bind_text(s, 3, state);
	sql_bind_int(s, 4, now);
	return exec_stmt(c, s, "rollout wave state");
}

/* One step of the state machine; *progress when it moved (call again). */
static enum rp_err
advance_once(struct conn *c, struct ro *r, int64_t now, int *progress, int *need_power)
{
	struct stmt *s;
	int64_t w = -1, failed = 0, running = 0, wave_end = 0;
	char wstate[16] = "";
	enum rp_err e;
	int rc, changed = 0, done = 0;

	*progress = 0;
	if ((e = sync_jobs(c, r, now, &changed)) != RP_ERR_OK)
		return e;
	if (!strcmp(r->state, "completed") || !strcmp(r->state, "aborted")) {
		*progress = changed;
		return RP_ERR_OK;
	}
	if (!strcmp(r->state, "scheduled")) {
		if (now < r->start_at)
			return RP_ERR_OK;
		if ((e = ro_set_state(c, r, "running", NULL, now)) != RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.started", NULL, NULL,
		                  "scheduled rollout started")) != RP_ERR_OK)
			return e;
		*progress = 1;
		return RP_ERR_OK;
	}
	if ((e = count_failed(c, r->id, &failed)) != RP_ERR_OK)
		return e;
	if (!strcmp(r->state, "running") && failed > r->max_failures) {
		char reason[160];

		snprintf(reason, sizeof reason, "%lld node(s) failed, more than max_failures %lld",
		         (long long)failed, (long long)r->max_failures);
		if ((e = ro_set_state(c, r, "paused", reason, now)) != RP_ERR_OK ||
		    (e = ro_event(
		             c, "rackpilotd", r, "rollout.paused", NULL, NULL,
		             "rollout paused: %s; the running wave finishes, no later wave starts",
		             reason)) != RP_ERR_OK)
			return e;
		*progress = 1;
		return RP_ERR_OK;
	}
	/* The current wave: the first one not done. */
	s = STMT(c,
	         "SELECT idx, state, coalesce(finished_at, 0) FROM rollout_waves WHERE rollout_id "
	         "= ? AND state != 'done' ORDER BY idx LIMIT 1");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, r->id);
	if ((rc = sql_step(s)) == SQL_ROW) {
		w = sql_int(s, 0);
		snprintf(wstate, sizeof wstate, "%s", col_text(s, 1));
		wave_end = sql_int(s, 2);
	}
	sql_reset(s);
	if (rc != SQL_ROW && rc != SQL_DONE)
		return store_sqlerr(c, rc, "rollout current wave");
	if (w < 0) {
		/* Every wave passed its gate. */
		if (strcmp(r->state, "running") != 0)
			return RP_ERR_OK;
		if ((e = ro_set_state(c, r, "completed",
		                      failed ? "completed with failed nodes" : NULL, now)) !=
		            RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.completed", NULL, NULL,
		                  "rollout completed: %lld node(s) failed", (long long)failed)) !=
		            RP_ERR_OK)
			return e;
		*progress = 1;
		return RP_ERR_OK;
	}
	if (!strcmp(wstate, "pending")) {
		if (strcmp(r->state, "running") != 0)
			return RP_ERR_OK; /* paused: no wave starts */
		if ((e = wave_start(c, r, w, now)) != RP_ERR_OK)
			return e;
		*progress = 1;
		return RP_ERR_OK;
	}
	if (!strcmp(wstate, "running")) {
		s = STMT(c,
		         "SELECT count(*) FROM rollout_nodes WHERE rollout_id = ? AND wave = ? AND "
		         "state = 'running' AND phase = 'job'");
		if (s == NULL)
			return RP_ERR_INTERNAL;
		sql_bind_int(s, 1, r->id);
		sql_bind_int(s, 2, w);
		if ((rc = sql_step(s)) == SQL_ROW)
			running = sql_int(s, 0);
		sql_reset(s);
		if (rc != SQL_ROW)
			return store_sqlerr(c, rc, "rollout wave running");
		*progress = changed;
		if (running > 0)
			return RP_ERR_OK;
		if ((e = wave_set(c, r, w, "gating", now)) != RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.wave_finished", NULL, NULL,
		                  "wave %lld: every job ended; gate next", (long long)w)) !=
		            RP_ERR_OK)
			return e;
		*progress = 1;
		return RP_ERR_OK;
	}
	/* gating */
	if ((e = wave_gate(c, r, w, wave_end, now, &done, need_power, &changed)) != RP_ERR_OK)
		return e;
	*progress = changed;
	if (!done)
		return RP_ERR_OK;
	{
		int64_t bad = 0;

		s = STMT(c,
		         "SELECT count(*) FROM rollout_nodes WHERE rollout_id = ? AND wave = ? AND "
		         "state = 'failed'");
		if (s == NULL)
			return RP_ERR_INTERNAL;
		sql_bind_int(s, 1, r->id);
		sql_bind_int(s, 2, w);
		if ((rc = sql_step(s)) == SQL_ROW)
			bad = sql_int(s, 0);
		sql_reset(s);
		if (rc != SQL_ROW)
			return store_sqlerr(c, rc, "rollout wave failures");
		if ((e = wave_set(c, r, w, "done", now)) != RP_ERR_OK ||
		    (e = ro_event(c, "rackpilotd", r, "rollout.wave_done", NULL, NULL,
		                  "wave %lld gate evaluated: %lld node(s) failed in it",
		                  (long long)w, (long long)bad)) != RP_ERR_OK)
			return e;
	}
	*progress = 1;
	return RP_ERR_OK;
}

enum rp_err
rp_store_rollout_advance(struct rp_store *st, int64_t id, int *need_power, int *moved)
{
	struct conn *c = store_conn(st);
	struct ro r = {0};
	int64_t now = rp_time_now_ms();
	int progress = 0, any = 0, i;
	enum rp_err e;

	*need_power = 0;
	*moved = 0;
	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = ro_load(c, id, &r)) != RP_ERR_OK)
		goto out;
	/* A few steps at a time (a wave ends, its gate passes, the next starts) keep each
	 * transaction short. */
	for (i = 0; i < 8; i++) {
		if ((e = advance_once(c, &r, now, &progress, need_power)) != RP_ERR_OK)
			goto out;
		if (!progress)
			break;
		any = 1;
	}
	/* Nothing moved: leave the database (and its generation) untouched. */
	if (!any)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*moved = 1;
out:
	store_rollback(c);
	json_decref(r.gate);
	return e;
}

/* ---- Pre-flight: what the operation will need ------------------------------------------ */

/* The BMC of node_id as {driver, address, username, password} (booleans but the driver; all
 * null/false without a BMC) into node. */
static enum rp_err
pf_bmc(struct conn *c, int64_t node_id, json_t *node)
{
	struct stmt *s = STMT(c, "SELECT b.driver, b.address IS NOT NULL AND b.address != '', "
	                         "b.username IS NOT NULL AND b.username != '', b.password_sealed "
	                         "IS NOT NULL FROM nodes n LEFT JOIN bmcs b ON b.node_id = n.id "
	                         "WHERE n.id = ?");
	int rc;

	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, node_id);
	if ((rc = sql_step(s)) == SQL_ROW) {
		json_object_set_new(node, "driver",
		                    col_text(s, 0) ? json_string(col_text(s, 0)) : json_null());
		json_object_set_new(node, "address", json_boolean(sql_int(s, 1)));
		json_object_set_new(node, "username", json_boolean(sql_int(s, 2)));
		json_object_set_new(node, "password", json_boolean(sql_int(s, 3)));
	}
	sql_reset(s);
	return rc == SQL_ROW ? RP_ERR_OK : store_sqlerr(c, rc, "preflight bmc");
}

/* The params of recipe `name` (an object), or JSON null when there is no such recipe. */
static enum rp_err
pf_recipe(struct conn *c, const char *name, json_t **out)
{
	struct stmt *s = STMT(c, "SELECT params FROM recipes WHERE name = ?");
	int rc;

	*out = NULL;
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_text(s, 1, name);
	if ((rc = sql_step(s)) == SQL_ROW)
		*out = col_text(s, 0) ? json_loads(col_text(s, 0), 0, NULL) : NULL;
	sql_reset(s);
	if (rc != SQL_ROW && rc != SQL_DONE)
		return store_sqlerr(c, rc, "preflight recipe");
	if (*out == NULL)
		*out = rc == SQL_ROW ? json_object() : json_null();
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
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i, j;
	int rc;

	s = STMT(c, "SELECT coalesce(n.node_class, ''), b.name FROM nodes n LEFT JOIN "
	            "firmware_baselines b ON b.node_class = n.node_class WHERE n.id = ?");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, n->id);
	if ((rc = sql_step(s)) == SQL_ROW) {
		snprintf(cls, sizeof cls, "%s", col_text(s, 0));
		if (col_text(s, 1))
			snprintf(bname, sizeof bname, "%s", col_text(s, 1));
	}
	sql_reset(s);
	if (rc != SQL_ROW)
		return store_sqlerr(c, rc, "preflight baseline");
	if (bname[0] == '\0') {
		*detail = store_why(NULL,
		                    cls[0] ? "node class '%s' has no firmware baseline"
		                           : "node %s has no node_class, so no firmware baseline",
		                    cls[0] ? cls : n->name);
		return RP_ERR_CONFLICT;
	}
	s = STMT(c, "SELECT bc.component, bc.version, coalesce(bc.method, 'redfish') AS method, "
	            "bc.recipe, i.name AS image, i.file, i.size, i.sha256, fc.version AS current "
	            "FROM nodes n JOIN firmware_baselines b ON b.node_class = n.node_class JOIN "
	            "baseline_components bc ON bc.baseline_id = b.id LEFT JOIN images i ON i.id = "
	            "bc.image_id LEFT JOIN firmware_components fc ON fc.node_id = n.id AND "
	            "fc.component = bc.component WHERE n.id = ? ORDER BY bc.component");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, n->id);
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
	int rc;

	if (profile) {
		if ((e = store_id_of(c, T_PROFILE, profile, &pid)) != RP_ERR_OK) {
			if (e == RP_ERR_NOT_FOUND) {
				*detail =
				        store_why("profile", "no BIOS profile named '%s'", profile);
				e = RP_ERR_INVALID_FIELD;
			}
			return e;
		}
		s = STMT(c, "SELECT p.name, p.method, p.recipe, (SELECT count(*) FROM "
		            "bios_profile_attrs a WHERE a.profile_id = p.id) FROM bios_profiles p "
		            "WHERE p.id = ?");
	} else
		s = STMT(c, "SELECT p.name, p.method, p.recipe, (SELECT count(*) FROM "
		            "bios_profile_attrs a WHERE a.profile_id = p.id) FROM nodes n JOIN "
		            "bios_profiles p ON p.id = " TARGET_PROFILE " WHERE n.id = ?");
	if (s == NULL)
		return RP_ERR_INTERNAL;
	sql_bind_int(s, 1, profile ? pid : n->id);
	if ((rc = sql_step(s)) == SQL_ROW)
		p = json_pack("{s:s, s:s, s:s?, s:I}", "name", col_text(s, 0), "method",
		              col_text(s, 1) ? col_text(s, 1) : "redfish", "recipe", col_text(s, 2),
		              "attributes", (json_int_t)sql_int(s, 3));
	sql_reset(s);
	if (rc == SQL_DONE) {
		*detail = store_why(NULL,
		                    "node %s has no BIOS profile (neither its own nor its class's)",
		                    n->name);
		return RP_ERR_CONFLICT;
	}
	if (rc != SQL_ROW)
		return store_sqlerr(c, rc, "preflight profile");
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
	struct conn *c = store_conn(st);
	const char *kind = json_string_value(json_object_get(what, "kind"));
	const char *key = json_string_value(json_object_get(what, "node"));
	json_t *ids = NULL, *nodes = json_array(), *node = NULL, *v;
	int fw = kind && !strcmp(kind, "firmware");
	struct node_ref n;
	enum rp_err e;
	size_t i;

	if (c == NULL)
		return RP_ERR_INTERNAL;
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
			if ((e = node_drift(c, n.id, kind, &target, what_, sizeof what_)) !=
			    RP_ERR_OK)
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
