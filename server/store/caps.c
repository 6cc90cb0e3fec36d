/* Power capping: a rack's policy turned into per-node limits, what the BMCs were read to
 * enforce, and the drift between the two (docs/power.md). */
#include <math.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

struct plan {
	const char *rack;
	const char *actor;
	json_t *out; /* written on success */
	json_t *detail;
};

/* The limit of each node of a "budget" rack: the rack's limit (budget x power_limit_pct)
 * shared in proportion to the nodes' classes' max_power_w (a node whose class has none
 * counts as their average, or all alike when none has one), never above its own
 * max_power_w. */
static enum rp_err
plan_txn(struct conn *c, void *ctx)
{
	struct plan *p = ctx;
	struct stmt *s;
	json_t *nodes = NULL, *n, *targets = json_array();
	double budget_kw = NAN, limit_w, rated_sum = 0, share_sum = 0;
	int64_t id, now = rp_time_now_ms(), rated = 0;
	char policy[16] = "", uuid[RP_UUID_BUF];
	int pct;
	size_t i;
	enum rp_err e;

	json_decref(p->detail);
	p->detail = NULL;
	if ((e = store_id_of(c, T_RACK, p->rack, &id)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(
	        c,
	        "SELECT power_cap, power_budget_kw, power_limit_pct, uuid FROM racks WHERE id = "
	        "?",
	        id);
	if ((e = store_one(c, s, "rack")) != RP_ERR_OK)
		goto out;
	snprintf(policy, sizeof policy, "%s", sql_text(s, 0));
	if (sql_type(s, 1) != SQL_NULL)
		budget_kw = sql_real(s, 1);
	pct = (int)sql_int(s, 2);
	snprintf(uuid, sizeof uuid, "%s", sql_text(s, 3));
	sql_reset(s);
	if (!strcmp(policy, "budget") && isnan(budget_kw)) {
		p->detail = store_why("power_cap", "rack %s has no power_budget_kw to share out",
		                      p->rack);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	limit_w = budget_kw * 1000.0 * pct / 100.0;
	s = STMT_ARGS(
	        c,
	        "SELECT n.id AS node_id, n.name AS node, CASE WHEN k.max_power_w > 0 THEN "
	        "k.max_power_w END AS max_power_w FROM nodes n JOIN bmcs b ON b.node_id = n.id "
	        "LEFT JOIN node_classes k ON k.name = n.node_class WHERE n.rack_id = ? ORDER BY "
	        "n.name",
	        id);
	if ((e = store_all(c, s, &nodes)) != RP_ERR_OK)
		goto out;
	/* Nothing to cap: say so before planning anything (no event, no rows). */
	if (json_array_size(nodes) == 0) {
		p->detail = store_why(NULL, "rack %s has no node with a BMC", p->rack);
		e = RP_ERR_BAD_REQUEST;
		goto out;
	}
	/* A class rated 0 W counts as unrated (a share of nothing would cap the node at 0). */
	json_array_foreach(nodes, i, n)
	{
		json_t *m = json_object_get(n, "max_power_w");

		if (json_is_number(m)) {
			rated_sum += json_number_value(m);
			rated++;
		}
	}
	json_array_foreach(nodes, i, n)
	{
		json_t *m = json_object_get(n, "max_power_w");

		share_sum += json_is_number(m) ? json_number_value(m)
		             : rated           ? rated_sum / (double)rated
		                               : 1.0;
	}
	json_array_foreach(nodes, i, n)
	{
		json_t *m = json_object_get(n, "max_power_w");
		struct stmt *u;
		double weight = json_is_number(m) ? json_number_value(m)
		                : rated           ? rated_sum / (double)rated
		                                  : 1.0;
		int64_t node_id = json_integer_value(json_object_get(n, "node_id"));
		json_t *target = json_null();

		if (!strcmp(policy, "budget")) {
			double w = share_sum > 0 ? floor(limit_w * weight / share_sum) : 0;

			if (json_is_number(m) && w > json_number_value(m))
				w = json_number_value(m);
			if (!(w >= 0)) /* NaN, or a negative budget the schema forbids */
				w = 0;
			if (w > 1000000)
				w = 1000000;
			target = json_integer((json_int_t)w);
		}
		u = STMT(c, "INSERT INTO power_caps(node_id, target_w, planned_at) "
		            "VALUES (?1, ?2, ?3) ON CONFLICT (node_id) DO UPDATE SET "
		            "target_w = excluded.target_w, planned_at = "
		            "excluded.planned_at");

		sql_bind_int(u, 1, node_id);
		if (json_is_integer(target))
			sql_bind_int(u, 2, json_integer_value(target));
		else
			sql_bind_null(u, 2);
		sql_bind_int(u, 3, now);
		if ((e = store_exec(c, u, "power cap plan")) != RP_ERR_OK) {
			json_decref(target);
			goto out;
		}
		json_array_append_new(targets,
		                      json_pack("{s:O, s:o}", "node", json_object_get(n, "node"),
		                                "target_w", target));
	}
	{
		char summary[200];
		json_t *detail = json_pack("{s:s, s:O}", "policy", policy, "targets", targets);

		snprintf(summary, sizeof summary,
		         "power caps of rack %s planned (policy %s): %zu node(s)", p->rack, policy,
		         json_array_size(targets));
		e = store_event(c, p->actor, "rack.power_cap_planned", "rack", uuid, p->rack, 0, id,
		                summary, detail);
		json_decref(detail);
		if (e != RP_ERR_OK)
			goto out;
	}
	json_decref(p->out);
	p->out =
	        json_pack("{s:s, s:s, s:O}", "rack", p->rack, "policy", policy, "targets", targets);
out:
	json_decref(nodes);
	json_decref(targets);
	return e;
}

enum rp_err
rp_store_power_cap_plan(struct rp_store *st, const char *rack, const char *actor, json_t **out,
                        json_t **detail)
{
	struct plan p = {.rack = rack, .actor = actor};
	enum rp_err e = store_txn(st, plan_txn, &p);

	if (e == RP_ERR_OK) {
		*out = p.out;
		p.out = NULL;
	} else if (p.detail && detail) {
		*detail = p.detail;
		p.detail = NULL;
	}
	json_decref(p.out);
	json_decref(p.detail);
	return e;
}

enum rp_err
rp_store_power_cap_target(struct rp_store *st, const char *node, int *has, unsigned *watts)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c, "SELECT target_w FROM power_caps WHERE node_id = ?", n.id);
	if ((e = store_one(c, s, "power cap")) == RP_ERR_OK) {
		*has = sql_type(s, 0) != SQL_NULL;
		*watts = *has ? (unsigned)sql_int(s, 0) : 0;
		sql_reset(s);
	}
	store_read_end(c);
	return e;
}

/* The read (or failure) of node_id's limit, in the caller's transaction. */
static enum rp_err
cap_seen(struct conn *c, int64_t node_id, unsigned watts, int active, const char *error,
         int64_t now)
{
	if (error)
		return EXEC(c, "power cap read",
		            "UPDATE power_caps SET error = ? WHERE node_id = ?", error, node_id);
	return EXEC(c, "power cap read",
	            "UPDATE power_caps SET bmc_w = ?, bmc_active = ?, read_at = ?, error = NULL "
	            "WHERE node_id = ?",
	            (int64_t)watts, (int64_t)(active != 0), now, node_id);
}

enum rp_err
rp_store_power_cap_seen(struct rp_store *st, const char *node, unsigned watts, int active,
                        const char *error)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	e = cap_seen(c, n.id, watts, active, error, rp_time_now_ms());
	return store_end(c, e, NULL, NULL);
}

enum rp_err
store_power_cap_reading(struct conn *c, int64_t node_id, json_t *limit, int64_t now)
{
	if (limit == NULL)
		return RP_ERR_OK;
	return cap_seen(c, node_id, (unsigned)json_integer_value(json_object_get(limit, "watts")),
	                json_is_true(json_object_get(limit, "active")),
	                json_string_value(json_object_get(limit, "error")), now);
}

/* A node drifts when its BMC was read to enforce something else than its target: another
 * limit, none where one is due, or one where none is. */
#define DRIFT_SQL                                                                                  \
	"(p.read_at IS NOT NULL AND ((p.target_w IS NULL AND p.bmc_active = 1) OR (p.target_w IS " \
	"NOT NULL AND (p.bmc_active = 0 OR p.bmc_w <> p.target_w))))"

enum rp_err
rp_store_power_caps(struct rp_store *st, const char *rack, int drift_only, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	int64_t id = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (rack && (e = store_id_of(c, T_RACK, rack, &id)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(
	        c,
	        "SELECT n.name AS node, r.name AS rack, r.power_cap AS policy, p.target_w, "
	        "p.planned_at AS \"planned_at:time\", p.bmc_w, p.bmc_active AS "
	        "\"bmc_active:bool\", p.read_at AS \"read_at:time\", p.error, " DRIFT_SQL
	        " AS \"drift:bool\" FROM power_caps p JOIN nodes n ON n.id = p.node_id LEFT "
	        "JOIN racks r ON r.id = n.rack_id WHERE (?1 = 0 OR n.rack_id = ?1) AND (?2 = 0 "
	        "OR " DRIFT_SQL ") ORDER BY r.name, n.name",
	        id, drift_only);
	return store_all(c, s, out);
}
