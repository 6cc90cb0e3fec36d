/* BMC credential rotation's state: the pending password (sealed, stored before it is sent to the
 * BMC), the class's rotation policy, and the rotation's settlement, each one transaction. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"
#include "rackpilot/jobtypes.h"

enum rp_err
rp_store_bmc_pending_get(struct rp_store *st, const char *node, char **out, size_t *len)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	char why[256], *plain = NULL;
	size_t plen = 0;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT password_pending_sealed FROM bmcs WHERE node_id = ? AND "
	              "password_pending_sealed IS NOT NULL",
	              n.id);
	if ((e = store_one(c, s, "pending BMC password")) != RP_ERR_OK)
		goto out;
	if (c->st->secrets == NULL ||
	    rp_secrets_open(c->st->secrets, sql_text(s, 0), &plain, &plen, why, sizeof why) < 0) {
		rp_log_error("node %s: cannot open its pending BMC password: %s", n.name,
		             c->st->secrets ? why : "no secret key loaded");
		e = RP_ERR_INTERNAL;
	}
	sql_reset(s);
	if (e == RP_ERR_OK) {
		*out = plain;
		*len = plen;
	}
out:
	store_read_end(c);
	return e;
}

/* The node's BMC row, locked for this transaction: RP_ERR_CONFLICT when it has no BMC a
 * rotation can work on. */
static enum rp_err
rotatable(struct conn *c, const struct node_ref *n, json_t **detail)
{
	struct stmt *s = STMT_ARGS(c, "SELECT driver, username FROM bmcs WHERE node_id = ?", n->id);
	enum rp_err e = store_one(c, s, "node BMC");

	if (e == RP_ERR_NOT_FOUND) {
		if (detail)
			*detail = store_why("bmc", "node %s has no BMC", n->name);
		return RP_ERR_CONFLICT;
	}
	if (e != RP_ERR_OK)
		return e;
	if (sql_type(s, 1) == SQL_NULL || sql_text(s, 1)[0] == '\0') {
		sql_reset(s);
		if (detail)
			*detail = store_why(
			        "bmc.username",
			        "node %s's BMC has no username to rotate the password of", n->name);
		return RP_ERR_CONFLICT;
	}
	sql_reset(s);
	return RP_ERR_OK;
}

static enum rp_err
pending_write(struct conn *c, const struct node_ref *n, const char *password, const char *actor,
              const char *how)
{
	char *sealed = NULL, summary[200];
	struct stmt *s;
	enum rp_err e;

	if ((e = store_seal(c, password, &sealed)) != RP_ERR_OK)
		return e;
	s = STMT(c, "UPDATE bmcs SET password_pending_sealed = ?2, password_pending_at = ?3 WHERE "
	            "node_id = ?1");
	sql_bind_int(s, 1, n->id);
	sql_bind_text_own(s, 2, sealed);
	sql_bind_int(s, 3, rp_time_now_ms());
	if ((e = store_exec(c, s, "pending BMC password")) != RP_ERR_OK)
		return e;
	snprintf(summary, sizeof summary, "new BMC password for %s stored as pending (%s)", n->name,
	         how);
	return store_event(c, actor, "bmc.password_pending", "node", n->uuid, n->name, n->id,
	                   n->rack_id, summary, NULL);
}

enum rp_err
rp_store_bmc_pending_set(struct rp_store *st, const char *node, const char *password,
                         const char *actor)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if (password == NULL || password[0] == '\0')
		return RP_ERR_BAD_REQUEST;
	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	if ((e = rotatable(c, &n, NULL)) != RP_ERR_OK)
		goto out;
	e = pending_write(c, &n, password, actor, "generated");
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_bmc_pending_settle(struct rp_store *st, const char *node, int promote, const char *actor,
                            const char *why)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	char summary[400];
	int64_t now = rp_time_now_ms();
	enum rp_err e;

	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT 1 FROM bmcs WHERE node_id = ? AND password_pending_sealed IS NOT "
	              "NULL",
	              n.id);
	if ((e = store_one(c, s, "pending BMC password")) != RP_ERR_OK)
		goto out;
	sql_reset(s);
	/* The sealed text moves as it is: the password is never opened here. */
	if (promote)
		s = STMT_ARGS(c,
		              "UPDATE bmcs SET password_sealed = password_pending_sealed, password "
		              "= NULL, password_pending_sealed = NULL, password_pending_at = NULL, "
		              "password_rotated_at = ?2, failures = 0, fault = NULL, fault_since = "
		              "NULL, last_error = NULL WHERE node_id = ?1",
		              n.id, now);
	else
		s = STMT_ARGS(
		        c,
		        "UPDATE bmcs SET password_pending_sealed = NULL, password_pending_at = "
		        "NULL WHERE node_id = ?1",
		        n.id);
	if ((e = store_exec(c, s, "settle BMC password")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "%s%s%s",
	         promote ? "BMC password rotated for " : "pending BMC password dropped for ",
	         n.name, "");
	if (why && why[0]) {
		size_t len = strlen(summary);

		snprintf(summary + len, sizeof summary - len, ": %s", why);
	}
	e = store_event(c, actor, promote ? "bmc.credentials_rotated" : "bmc.password_dropped",
	                "node", n.uuid, n.name, n.id, n.rack_id, summary, NULL);
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_bmc_password_policy(struct rp_store *st, const char *node, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	json_t *policy = NULL, *got;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	policy = json_pack("{s:i, s:b, s:b}", "length", RP_BMC_PASSWORD_LENGTH, "symbols", 1,
	                   "rotate_on_enroll", 0);
	s = STMT_ARGS(c,
	              "SELECT k.bmc_credentials FROM nodes n JOIN node_classes k ON k.name = "
	              "n.node_class WHERE n.id = ? AND k.bmc_credentials IS NOT NULL",
	              n.id);
	if ((e = store_one(c, s, "class credentials policy")) == RP_ERR_OK) {
		got = json_loads(sql_text(s, 0), 0, NULL);
		sql_reset(s);
		if (json_is_object(got))
			json_object_update(policy, got);
		json_decref(got);
	} else if (e == RP_ERR_NOT_FOUND) {
		e = RP_ERR_OK;
	}
	store_read_end(c);
	if (e == RP_ERR_OK && policy == NULL)
		e = RP_ERR_INTERNAL;
	if (e != RP_ERR_OK) {
		json_decref(policy);
		return e;
	}
	*out = policy;
	return RP_ERR_OK;
}

enum rp_err
rp_store_bmc_rotate(struct rp_store *st, const char *node, const char *password, json_t *job,
                    const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	json_t *obj = NULL;
	char why[256];
	enum rp_err e;

	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	if ((e = rotatable(c, &n, detail)) != RP_ERR_OK)
		goto out;
	/* One rotation at a time: a second would replace the pending password of the first
	 * before that one knows which works. */
	s = STMT_ARGS(c,
	              "SELECT 1 FROM jobs WHERE node_id = ? AND type = ? AND state IN ('queued', "
	              "'running')",
	              n.id, rp_job_type_table[RP_JOB_BMC_ROTATE].name);
	if ((e = store_one(c, s, "rotation in flight")) == RP_ERR_OK) {
		sql_reset(s);
		*detail = store_why("node", "a credential rotation of %s is queued or running",
		                    n.name);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	if (e != RP_ERR_NOT_FOUND)
		goto out;
	if ((e = store_job_ready(c, n.id, job, why, sizeof why)) != RP_ERR_OK) {
		if (e != RP_ERR_INTERNAL)
			*detail = store_why(NULL, "%s", why);
		goto out;
	}
	/* An interrupted rotation's pending password is the job's to settle first: it may be
	 * the one the BMC has now. An explicit one replaces it only when none is pending. */
	if (password) {
		s = STMT_ARGS(c,
		              "SELECT 1 FROM bmcs WHERE node_id = ? AND password_pending_sealed IS "
		              "NOT NULL",
		              n.id);
		if ((e = store_one(c, s, "pending BMC password")) == RP_ERR_OK) {
			sql_reset(s);
			*detail =
			        store_why("password",
			                  "an interrupted rotation of %s left a pending password: "
			                  "rotate without one first, so that it is settled",
			                  n.name);
			e = RP_ERR_CONFLICT;
			goto out;
		}
		if (e != RP_ERR_NOT_FOUND ||
		    (e = pending_write(c, &n, password, actor, "set by an admin")) != RP_ERR_OK)
			goto out;
	}
	e = store_job_queue(c, &n, job, actor, &obj);
out:
	return store_end(c, e, obj, out);
}

enum rp_err
store_rotate_on_enroll(struct conn *c, int64_t node_id, int force, const char *actor, int *queued)
{
	struct node_ref n;
	struct stmt *s;
	json_t *job = NULL, *policy, *obj = NULL;
	char why[256];
	int want = force;
	enum rp_err e;

	s = STMT_ARGS(c,
	              "SELECT k.bmc_credentials FROM nodes n JOIN bmcs b ON b.node_id = n.id LEFT "
	              "JOIN node_classes k ON k.name = n.node_class WHERE n.id = ? AND b.username "
	              "IS NOT NULL AND b.username <> '' AND b.driver IN ('ipmi', 'redfish', "
	              "'fake') AND n.maintenance = 0",
	              node_id);
	if ((e = store_one(c, s, "rotate on enroll")) == RP_ERR_NOT_FOUND)
		return RP_ERR_OK; /* no BMC to rotate */
	if (e != RP_ERR_OK)
		return e;
	if (!want && sql_type(s, 0) != SQL_NULL) {
		policy = json_loads(sql_text(s, 0), 0, NULL);
		want = json_is_true(json_object_get(policy, "rotate_on_enroll"));
		json_decref(policy);
	}
	sql_reset(s);
	if (!want)
		return RP_ERR_OK;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		return e;
	job = json_pack("{s:s, s:{s:b, s:b}, s:b}", "type",
	                rp_job_type_table[RP_JOB_BMC_ROTATE].name, "params", "explicit", 0,
	                "on_enroll", 1, "mutating", rp_job_type_table[RP_JOB_BMC_ROTATE].mutating);
	if (job == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_job_ready(c, n.id, job, why, sizeof why)) != RP_ERR_OK) {
		/* A node that cannot take BMC jobs yet is not refused for it: no rotation. */
		json_decref(job);
		return e == RP_ERR_INTERNAL ? e : RP_ERR_OK;
	}
	e = store_job_queue(c, &n, job, actor, &obj);
	json_decref(obj);
	json_decref(job);
	if (e == RP_ERR_OK && queued)
		(*queued)++;
	return e;
}
