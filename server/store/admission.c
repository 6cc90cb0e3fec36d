/* Admission of power-ons against each rack's budget and stagger (docs/power.md). */
#include <math.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define INFLIGHT_TTL_MS   (10 * 60 * 1000) /* a power-on in flight this long was interrupted */
#define UNMEASURED_TTL_MS (30 * 60 * 1000) /* an admission no read measured: given up */

struct admit {
	int64_t job_id;
	const char *node;
	int force;
	const char *actor;
	const struct rp_admit_opts *o;
	struct rp_admit out; /* written on success */
};

static enum rp_err
admit_txn(struct conn *c, void *ctx)
{
	struct admit *a = ctx;
	struct rp_admit *out = &a->out;
	struct node_ref n;
	struct stmt *s;
	char rack[64] = "";
	double budget_kw = NAN, peak = NAN, base = NAN, measured = 0, pending = 0, limit_w;
	int64_t now = rp_time_now_ms(), inflight = 0, last = 0, unrated = 0;
	int pct = 80, wait = 0;
	enum rp_err e;

	memset(out, 0, sizeof *out);
	if ((e = store_node_ref(c, a->node, &n)) != RP_ERR_OK)
		return e;
	/* Taken already (a retried job, a second job for the node): one admission per node;
	 * one taken in another rack (the node moved since) is taken again in its own. */
	s = STMT_ARGS(c, "SELECT rack_id FROM power_admissions WHERE node_id = ?", n.id);
	if ((e = store_one(c, s, "admission")) == RP_ERR_OK) {
		int64_t was = sql_int(s, 0);

		sql_reset(s);
		if (was == n.rack_id) {
			out->admitted = 1;
			return EXEC(c, "admission",
			            "UPDATE power_admissions SET job_id = ? WHERE node_id = ?",
			            a->job_id, n.id);
		}
		if ((e = EXEC(c, "admission moved",
		              "DELETE FROM power_admissions WHERE node_id = ?", n.id)) != RP_ERR_OK)
			return e;
	} else if (e != RP_ERR_NOT_FOUND)
		return e;
	if (n.rack_id <= 0) {
		out->admitted = 1; /* no rack: no budget to keep, no neighbours to stagger from */
		return RP_ERR_OK;
	}
	if ((e = store_admission_expire(c, now)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(
	        c,
	        /* Its peak: its class's nameplate, or the power limit its BMC was last read to
	         * enforce when that is lower (a capped node draws no more). */
	        "SELECT r.name, r.power_budget_kw, r.power_limit_pct, CASE WHEN pc.bmc_active = 1 "
	        "AND pc.bmc_w > 0 AND (k.max_power_w IS NULL OR pc.bmc_w < k.max_power_w) THEN "
	        "pc.bmc_w ELSE k.max_power_w END, x.power_w FROM nodes n JOIN racks r ON r.id = "
	        "n.rack_id LEFT JOIN node_classes k ON k.name = n.node_class LEFT JOIN "
	        "sensor_reads "
	        "x ON x.node_id = n.id LEFT JOIN power_caps pc ON pc.node_id = n.id WHERE n.id = ?",
	        n.id);
	if ((e = store_one(c, s, "admission rack")) != RP_ERR_OK)
		return e;
	snprintf(rack, sizeof rack, "%s", sql_text(s, 0));
	if (sql_type(s, 1) != SQL_NULL)
		budget_kw = sql_real(s, 1);
	pct = (int)sql_int(s, 2);
	if (sql_type(s, 3) != SQL_NULL)
		peak = sql_real(s, 3);
	if (sql_type(s, 4) != SQL_NULL)
		base = sql_real(s, 4);
	sql_reset(s);
	/* The rack's measured draw, and what the admissions not measured yet add to it: each
	 * one's peak in place of what it drew when admitted. */
	s = STMT_ARGS(
	        c,
	        "SELECT (SELECT coalesce(sum(x.power_w), 0) FROM sensor_reads x JOIN nodes n ON "
	        "n.id = x.node_id WHERE n.rack_id = ?1), (SELECT coalesce(sum(coalesce(peak_w, "
	        "0) - coalesce(base_w, 0)), 0) FROM power_admissions WHERE rack_id = ?1), "
	        "(SELECT count(*) FROM power_admissions WHERE rack_id = ?1 AND started_at IS "
	        "NULL), (SELECT coalesce(max(admitted_at), 0) FROM power_admissions WHERE "
	        "rack_id = ?1), (SELECT count(*) FROM power_admissions WHERE rack_id = ?1 AND "
	        "peak_w IS NULL)",
	        n.rack_id);
	if ((e = store_one(c, s, "admission load")) != RP_ERR_OK)
		return e;
	measured = sql_real(s, 0);
	pending = sql_real(s, 1);
	inflight = sql_int(s, 2);
	last = sql_int(s, 3);
	unrated = sql_int(s, 4);
	sql_reset(s);
	out->projected_w = measured + pending + (isnan(peak) ? 0 : peak) - (isnan(base) ? 0 : base);
	limit_w = budget_kw * 1000.0 * pct / 100.0;
	out->limit_w = isnan(budget_kw) ? -1 : limit_w;
	if (!isnan(budget_kw) && !isnan(peak) && peak > limit_w && !a->force) {
		/* Room never frees for it: waiting would be for ever. */
		snprintf(
		        out->why, sizeof out->why,
		        "node %s peaks at %.1f kW, over rack %s's whole limit of %.1f kW (%d %% of "
		        "its %.1f kW budget)",
		        n.name, peak / 1000, rack, limit_w / 1000, pct, budget_kw);
		out->never = 1;
		return RP_ERR_OK;
	}
	if (a->o->stagger && inflight >= a->o->stagger) {
		snprintf(out->why, sizeof out->why,
		         "waiting: rack %s has %lld node(s) powering on (power_on_stagger %u)",
		         rack, (long long)inflight, a->o->stagger);
		out->retry_ms = 1000;
		wait = 1;
	} else if (a->o->stagger_ms && last && now - last < (int64_t)a->o->stagger_ms) {
		snprintf(out->why, sizeof out->why,
		         "waiting: rack %s powered a node on %lld ms ago (power_on_stagger_ms %u)",
		         rack, (long long)(now - last), a->o->stagger_ms);
		out->retry_ms = a->o->stagger_ms - (now - last);
		wait = 1;
	} else if (!isnan(budget_kw) && out->projected_w > limit_w) {
		snprintf(out->why, sizeof out->why,
		         "waiting: rack %s projected %.1f kW of %.1f kW (%d %% of its %.1f kW "
		         "budget)",
		         rack, out->projected_w / 1000, limit_w / 1000, pct, budget_kw);
		out->retry_ms = 2000;
		wait = 1;
	}
	if (wait && !a->force)
		return RP_ERR_OK;
	if (!isnan(budget_kw) && (isnan(peak) || unrated))
		snprintf(
		        out->note, sizeof out->note,
		        "rack %s has a budget but %s no max_power_w: its projection counts %s at 0 "
		        "W",
		        rack,
		        isnan(peak) ? "this node's class has" : "some admitted nodes' classes have",
		        isnan(peak) ? "this node" : "them");
	s = STMT_ARGS(c,
	              "INSERT INTO power_admissions(node_id, rack_id, job_id, admitted_at, forced) "
	              "VALUES (?, ?, ?, ?, ?)",
	              n.id, n.rack_id, a->job_id, now, wait);
	if ((e = store_exec(c, s, "admission")) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c, "UPDATE power_admissions SET peak_w = ?2, base_w = ?3 WHERE node_id = ?1",
	              n.id);
	if (isnan(peak))
		sql_bind_null(s, 2);
	else
		sql_bind_real(s, 2, peak);
	if (isnan(base))
		sql_bind_null(s, 3);
	else
		sql_bind_real(s, 3, base);
	if ((e = store_exec(c, s, "admission")) != RP_ERR_OK)
		return e;
	if (wait) {
		char summary[400];
		json_t *detail = json_pack("{s:s, s:s, s:f, s:o}", "rack", rack, "held_by",
		                           out->why, "projected_w", out->projected_w, "limit_w",
		                           isnan(budget_kw) ? json_null() : json_real(limit_w));

		snprintf(summary, sizeof summary,
		         "%s powered on by force, past the rack's admission (%s)", n.name,
		         out->why + (strncmp(out->why, "waiting: ", 9) ? 0 : 9));
		e = store_event(c, a->actor, "power.admission_forced", "node", n.uuid, n.name, n.id,
		                n.rack_id, summary, detail);
		json_decref(detail);
		if (e != RP_ERR_OK)
			return e;
		out->forced = 1;
		out->why[0] = '\0';
	}
	out->admitted = 1;
	return RP_ERR_OK;
}

enum rp_err
rp_store_power_admit(struct rp_store *st, int64_t job_id, const char *node, int force,
                     const char *actor, const struct rp_admit_opts *o, struct rp_admit *out)
{
	struct admit a = {.job_id = job_id, .node = node, .force = force, .actor = actor, .o = o};
	enum rp_err e = store_txn(st, admit_txn, &a);

	if (e == RP_ERR_OK)
		*out = a.out;
	return e;
}

enum rp_err
rp_store_power_started(struct rp_store *st, const char *node)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	e = EXEC(c, "admission started",
	         "UPDATE power_admissions SET started_at = ? WHERE node_id = ? AND started_at IS "
	         "NULL",
	         rp_time_now_ms(), n.id);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
store_admission_expire(struct conn *c, int64_t now)
{
	return EXEC(
	        c, "admission expiry",
	        "DELETE FROM power_admissions WHERE (started_at IS NULL AND admitted_at < ?) OR "
	        "admitted_at < ?",
	        now - INFLIGHT_TTL_MS, now - UNMEASURED_TTL_MS);
}

enum rp_err
rp_store_power_release(struct rp_store *st, const char *node)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	e = EXEC(c, "admission released",
	         "DELETE FROM power_admissions WHERE node_id = ? AND started_at IS NULL", n.id);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
store_admission_measured(struct conn *c, int64_t node_id, int64_t now, int64_t settle_ms)
{
	return EXEC(c, "admission measured",
	            "DELETE FROM power_admissions WHERE node_id = ? AND started_at IS NOT NULL AND "
	            "started_at <= ?",
	            node_id, now - settle_ms);
}
