/*
 * The node lifecycle: which action each state allows, the state a node is in while the
 * action's job runs, and where it lands when the job ends. One table, checked in the same
 * transaction that writes the job, so two operators cannot start two actions at once.
 */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

struct transition {
	const char *action;
	const char *from[6];
	const char *during; /* NULL: immediate */
	const char *ok, *fail;
};

static const struct transition table[] = {
        {"manage",
         {"enrolled", "verify_failed", "manageable"},
         "verifying",
         "manageable",
         "verify_failed"},
        {"adopt", {"discovered"}, NULL, "manageable", NULL},
        {"commission",
         {"manageable", "ready", "commission_failed"},
         "commissioning",
         "ready",
         "commission_failed"},
        {"deploy", {"ready", "deploy_failed"}, "deploying", "deployed", "deploy_failed"},
        {"release",
         {"deployed", "deploy_failed", "release_failed"},
         "releasing",
         "ready",
         "release_failed"},
        {"abort", {"verifying", "commissioning", "deploying", "releasing"}, NULL, NULL, NULL},
};

static const struct transition *
find(const char *action)
{
	size_t i;

	for (i = 0; i < sizeof table / sizeof table[0]; i++)
		if (!strcmp(table[i].action, action))
			return &table[i];
	return NULL;
}

static int
allowed(const struct transition *t, const char *state)
{
	size_t i;

	for (i = 0; i < 6 && t->from[i]; i++)
		if (!strcmp(t->from[i], state))
			return 1;
	return 0;
}

/* The actions a state allows, for the 409. */
static json_t *
allowed_actions(const char *state)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < sizeof table / sizeof table[0]; i++)
		if (allowed(&table[i], state))
			json_array_append_new(a, json_string(table[i].action));
	return a;
}

static enum rp_err
set_state(struct conn *c, const struct node_ref *n, const char *from, const char *to,
          int64_t job_id, const char *error, const char *actor, const char *why)
{
	struct stmt *s = STMT(c, "UPDATE nodes SET provision_state = ?2, provision_job_id = ?3, "
	                         "provision_error = ?4, provision_at = ?5 WHERE id = ?1");
	char summary[400];
	json_t *d;
	enum rp_err e;

	sql_bind_int(s, 1, n->id);
	sql_bind_text(s, 2, to);
	if (job_id)
		sql_bind_int(s, 3, job_id);
	sql_bind_text(s, 4, error);
	sql_bind_int(s, 5, rp_time_now_ms());
	if ((e = store_exec(c, s, "provision state")) != RP_ERR_OK)
		return e;
	snprintf(summary, sizeof summary, "%s: %s -> %s%s%s", n->name, from, to, error ? ": " : "",
	         error ? error : "");
	d = json_pack("{s:s, s:s, s:s?, s:s?}", "from", from, "to", to, "why", why, "error", error);
	e = store_event(c, actor, "node.provision", "node", n->uuid, n->name, n->id, n->rack_id,
	                summary, d);
	json_decref(d);
	return e;
}

enum rp_err
store_provision(struct conn *c, const char *key, const char *action, json_t *job, const char *actor,
                json_t **out, json_t **detail)
{
	const struct transition *t = find(action);
	struct node_ref n;
	struct stmt *s;
	char state[32] = "", why[256];
	json_t *jobj = NULL, *params;
	int64_t job_id = 0;
	enum rp_err e;
	int maint;

	if (t == NULL || !strcmp(action, "abort"))
		return RP_ERR_BAD_REQUEST;
	if ((e = store_node_ref(c, key, &n)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c, "SELECT provision_state, maintenance FROM nodes WHERE id = ?", n.id);
	if ((e = store_one(c, s, "provision read")) != RP_ERR_OK)
		goto out;
	snprintf(state, sizeof state, "%s", sql_text(s, 0));
	maint = sql_int(s, 1);
	sql_reset(s);
	if (maint) {
		*detail =
		        json_pack("{s:s, s:s, s:s}", "state", state, "action", action, "reason",
		                  "node is in maintenance: clear it first (only abort is allowed)");
		e = RP_ERR_INVALID_STATE;
		goto out;
	}
	if (!allowed(t, state)) {
		*detail = json_pack("{s:s, s:s, s:o}", "state", state, "action", action, "allowed",
		                    allowed_actions(state));
		e = RP_ERR_INVALID_STATE;
		goto out;
	}
	if (t->during) {
		if ((e = store_bmc_ready(c, n.id, why, sizeof why)) != RP_ERR_OK) {
			if (e != RP_ERR_INTERNAL)
				*detail = store_why(NULL, "%s", why);
			goto out;
		}
		params = json_object_get(job, "params");
		json_object_set_new(params, "provision",
		                    json_pack("{s:s, s:s, s:s}", "action", action, "ok", t->ok,
		                              "fail", t->fail));
		if ((e = store_job_add(c, &n, 0, job, actor, &job_id)) != RP_ERR_OK ||
		    (e = store_job_load(c, job_id, &jobj)) != RP_ERR_OK)
			goto out;
		/* A deploy's static addresses are its node's alone, from now on. */
		if (!strcmp(action, "deploy") &&
		    (e = store_addresses_claim(c, &n, job_id, json_object_get(params, "addresses"),
		                               detail)) != RP_ERR_OK)
			goto out;
	}
	if ((e = set_state(c, &n, state, t->during ? t->during : t->ok, job_id, NULL, actor,
	                   action)) != RP_ERR_OK)
		goto out;
	*out = json_pack("{s:s, s:s, s:s, s:o?}", "node", n.name, "action", action, "state",
	                 t->during ? t->during : t->ok, "job", jobj);
	jobj = NULL;
out:
	json_decref(jobj);
	return e;
}

enum rp_err
rp_store_provision(struct rp_store *st, const char *key, const char *action, json_t *job,
                   const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *res = NULL;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_provision(c, key, action, job, actor, &res, detail)) == RP_ERR_OK &&
	    (e = store_commit(c)) == RP_ERR_OK) {
		*out = res;
		res = NULL;
	}
	store_rollback(c);
	json_decref(res);
	return e;
}

enum rp_err
rp_store_provision_abort(struct rp_store *st, const char *key, const char *actor, char *job,
                         size_t joblen, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	const struct transition *t;
	struct node_ref n;
	struct stmt *s;
	char state[32] = "", uuid[RP_UUID_BUF] = "";
	enum rp_err e;
	size_t i;

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT n.provision_state, j.uuid FROM nodes n LEFT JOIN jobs j ON j.id = "
	              "n.provision_job_id AND j.state IN ('queued', 'running') WHERE n.id = ?",
	              n.id);
	if ((e = store_one(c, s, "abort read")) != RP_ERR_OK)
		goto out;
	snprintf(state, sizeof state, "%s", sql_text(s, 0));
	if (sql_type(s, 1) != SQL_NULL)
		snprintf(uuid, sizeof uuid, "%s", sql_text(s, 1));
	sql_reset(s);
	if (!allowed(find("abort"), state)) {
		*detail = json_pack("{s:s, s:s, s:o}", "state", state, "action", "abort", "allowed",
		                    allowed_actions(state));
		e = RP_ERR_INVALID_STATE;
		goto out;
	}
	if (uuid[0]) {
		/* Its job settles the node when it ends (cancelled: the *_failed state). */
		e = store_commit(c);
		if (e == RP_ERR_OK)
			snprintf(job, joblen, "%s", uuid);
		goto out;
	}
	/* No job left to stop (it was lost): settle the node here. */
	for (i = 0; i < sizeof table / sizeof table[0]; i++) {
		t = &table[i];
		if (t->during && !strcmp(t->during, state))
			break;
	}
	if (i == sizeof table / sizeof table[0]) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	if ((e = set_state(c, &n, state, t->fail, 0, "aborted", actor, "abort")) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) == RP_ERR_OK)
		job[0] = '\0';
out:
	store_rollback(c);
	return e;
}

enum rp_err
store_provision_settle(struct conn *c, int64_t job_id, const char *job_state, const char *error)
{
	struct stmt *s;
	json_t *params = NULL, *prov;
	struct node_ref n;
	char state[32] = "";
	const char *to, *action;
	int64_t node_id;
	enum rp_err e;
	int ok = !strcmp(job_state, "succeeded");

	s = STMT_ARGS(c,
	              "SELECT j.params, coalesce(j.node_id, 0), n.provision_state FROM jobs j JOIN "
	              "nodes n ON n.id = j.node_id WHERE j.id = ? AND n.provision_job_id = j.id",
	              job_id);
	if ((e = store_one(c, s, "settle read")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e;
	params = json_loads(sql_text(s, 0), 0, NULL);
	node_id = sql_int(s, 1);
	snprintf(state, sizeof state, "%s", sql_text(s, 2));
	sql_reset(s);
	prov = json_object_get(params, "provision");
	action = json_string_value(json_object_get(prov, "action"));
	to = json_string_value(json_object_get(prov, ok ? "ok" : "fail"));
	if (to == NULL || action == NULL)
		goto out;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	if ((e = set_state(c, &n, state, to, 0,
	                   ok ? NULL
	                      : (!strcmp(job_state, "cancelled") ? "aborted"
	                         : error                         ? error
	                                                         : "failed"),
	                   "rackpilotd", action)) != RP_ERR_OK)
		goto out;
	/* A released node gives its deployed addresses back. */
	if (ok && !strcmp(action, "release") &&
	    (e = store_addresses_release(c, node_id)) != RP_ERR_OK)
		goto out;
	/* What is on the disk now. */
	if (ok && (!strcmp(action, "deploy") || !strcmp(action, "release"))) {
		s = STMT_ARGS(c, "UPDATE nodes SET deployed_image = ?2 WHERE id = ?1", node_id);
		if (!strcmp(action, "deploy"))
			sql_bind_text(s, 2,
			              json_string_value(json_object_get(
			                      json_object_get(params, "image"), "name")));
		e = store_exec(c, s, "deployed image");
	}
out:
	json_decref(params);
	return e;
}
