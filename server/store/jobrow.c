/* One job row: its wire object, queueing it (with its step rows) once the node is ready for
 * its lane, and the marks a running job's own work leaves on it. The lifecycle around the
 * row (claims, outcomes, cancel, recovery, what else ends with a job) is jobs.c's; what
 * queues jobs (provision.c, rollouts.c, batches) needs only this file. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
store_job_sent(struct conn *c, int64_t job_id, const char *what, const char *state, int64_t now)
{
	return EXEC(c, "job sent mark",
	            "UPDATE jobs SET sent_at = coalesce(sent_at, ?2), updated_at = ?2, "
	            "phase = ?3 || ': ' || ?4, phase_at = ?2 WHERE id = ?1",
	            job_id, now, what, state);
}

enum rp_err
store_job_phase(struct conn *c, int64_t job_id, const char *what, const char *state, int64_t now)
{
	return EXEC(c, "job phase",
	            "UPDATE jobs SET phase = ?2 || ': ' || ?3, phase_at = ?4 WHERE "
	            "id = ?1",
	            job_id, what, state, now);
}

enum rp_err
store_job_load(struct conn *c, int64_t id, json_t **out)
{
	struct stmt *s = STMT_ARGS(c, STORE_JOB_COLS "WHERE j.id = ?", id);

	return store_one_row(c, s, "job load", out);
}

/* Why a node cannot take a BMC job now, or RP_ERR_OK. */
enum rp_err
store_bmc_ready(struct conn *c, int64_t node_id, char *why, size_t len)
{
	struct stmt *s =
	        STMT_ARGS(c,
	                  "SELECT n.maintenance, n.maintenance_reason, b.driver, b.address, "
	                  "b.username, b.password_sealed IS NOT NULL FROM nodes n LEFT JOIN bmcs b "
	                  "ON b.node_id = n.id WHERE n.id = ?",
	                  node_id);
	enum rp_err e;

	if ((e = store_one(c, s, "node ready")) != RP_ERR_OK)
		return e;
	if (sql_int(s, 0)) {
		snprintf(why, len, "node is in maintenance%s%s",
		         sql_type(s, 1) == SQL_NULL ? "" : ": ",
		         sql_type(s, 1) == SQL_NULL ? "" : sql_text(s, 1));
		e = RP_ERR_INVALID_STATE;
	} else if (sql_type(s, 2) == SQL_NULL) {
		snprintf(why, len, "node has no BMC");
		e = RP_ERR_CONFLICT;
	} else if (strcmp(sql_text(s, 2), "fake") != 0) {
		if (sql_type(s, 3) == SQL_NULL) {
			snprintf(why, len, "node's BMC has no address");
			e = RP_ERR_CONFLICT;
		} else if (sql_type(s, 4) == SQL_NULL || !sql_int(s, 5)) {
			snprintf(why, len,
			         "node's BMC has no credentials (set bmc.username and "
			         "bmc.password)");
			e = RP_ERR_CONFLICT;
		}
	}
	sql_reset(s);
	return e;
}

/* Insert one queued job for node n inside the caller's transaction. */
static enum rp_err
job_insert(struct conn *c, const struct node_ref *n, int64_t batch_id, json_t *job,
           const char *actor, int64_t *id)
{
	enum rp_err e;
	struct stmt *s;
	char uuid[RP_UUID_BUF], *params = store_canon(json_object_get(job, "params"));
	int64_t now = rp_time_now_ms();
	json_t *ma = json_object_get(job, "max_attempts"), *mut = json_object_get(job, "mutating");
	const struct rp_job_type_entry *t =
	        rp_job_type_get(rp_job_type_find(json_string_value(json_object_get(job, "type"))));

	/* A caller that names the job before it exists (acceptance pairs) gives its id. */
	if (json_is_string(json_object_get(job, "uuid")) &&
	    json_string_length(json_object_get(job, "uuid")) == RP_UUID_BUF - 1)
		snprintf(uuid, sizeof uuid, "%s", json_string_value(json_object_get(job, "uuid")));
	else if (rp_uuid_new(uuid) < 0)
		uuid[0] = '\0';
	if (params == NULL || uuid[0] == '\0') {
		free(params);
		return RP_ERR_INTERNAL;
	}
	s = STMT_ARGS(
	        c,
	        "INSERT INTO jobs(uuid, type, node_id, node_name, batch_id, params, mutating, "
	        "max_attempts, not_before, created_by, created_at, updated_at) "
	        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
	        uuid);
	store_bind_str(s, 2, job, "type");
	sql_bind_int(s, 3, n->id);
	sql_bind_text(s, 4, n->name);
	if (batch_id)
		sql_bind_int(s, 5, batch_id);
	sql_bind_text_own(s, 6, params);
	/* Unsaid, a job is as mutating as its type (jobtypes.h). */
	sql_bind_int(s, 7, json_is_boolean(mut) ? json_is_true(mut) : t && t->mutating);
	sql_bind_int(s, 8, json_is_integer(ma) ? json_integer_value(ma) : 4);
	sql_bind_int(s, 9, now);
	sql_bind_text(s, 10, actor);
	sql_bind_int(s, 11, now);
	sql_bind_int(s, 12, now);
	if ((e = store_exec(c, s, "job insert")) != RP_ERR_OK)
		return e;
	*id = sql_last_id(c);
	/* A secret payload (job.secret, never in params) is sealed; it goes when the job ends. */
	if (json_is_object(json_object_get(job, "secret"))) {
		char *text = json_dumps(json_object_get(job, "secret"), JSON_COMPACT),
		     *sealed = NULL;

		e = text ? store_seal(c, text, &sealed) : RP_ERR_INTERNAL;
		if (text)
			explicit_bzero(text, strlen(text));
		free(text);
		if (e != RP_ERR_OK)
			return e;
		s = STMT_ARGS(c, "UPDATE jobs SET secret_sealed = ?2 WHERE id = ?1", *id);
		sql_bind_text_own(s, 2, sealed);
		if ((e = store_exec(c, s, "job secret")) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

/* Whether node_id can take job now: an SSH-lane job (jobtypes.h) needs SSH, everything else
 * a BMC. */
enum rp_err
store_job_ready(struct conn *c, int64_t node_id, json_t *job, char *why, size_t len)
{
	const struct rp_job_type_entry *t =
	        rp_job_type_get(rp_job_type_find(json_string_value(json_object_get(job, "type"))));

	if (t && t->lane == RP_JOB_LANE_SSH)
		return store_ssh_ready(c, node_id, why, len);
	return store_bmc_ready(c, node_id, why, len);
}

/* Insert the job and, for a plan, its step rows. */
enum rp_err
store_job_add(struct conn *c, const struct node_ref *n, int64_t batch_id, json_t *job,
              const char *actor, int64_t *id)
{
	json_t *plan = json_object_get(json_object_get(job, "params"), "plan");
	enum rp_err e;

	if ((e = job_insert(c, n, batch_id, job, actor, id)) != RP_ERR_OK)
		return e;
	return plan ? store_steps_insert(c, *id, plan) : RP_ERR_OK;
}

enum rp_err
rp_store_job_mark_sent(struct rp_store *st, int64_t id)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	/* One statement is its own transaction, flushed before it returns (sqlite.c). */
	return EXEC(c, "mark sent",
	            "UPDATE jobs SET sent_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = "
	            "'running'",
	            id, rp_time_now_ms());
}

enum rp_err
rp_store_job_phase(struct rp_store *st, int64_t job_id, const char *phase)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return EXEC(c, "job phase",
	            "UPDATE jobs SET phase = ?2, phase_at = ?3, updated_at = ?3 WHERE id = ?1",
	            job_id, phase, rp_time_now_ms());
}

enum rp_err
rp_store_job_superseded(struct rp_store *st, int64_t job_id, int *newer)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT count(*) FROM jobs j JOIN jobs k ON k.node_id = j.node_id AND k.type "
	              "= j.type AND k.id > j.id WHERE j.id = ?",
	              job_id);
	if ((e = store_one(c, s, "newer job")) == RP_ERR_OK) {
		*newer = sql_int(s, 0) > 0;
		sql_reset(s);
	}
	store_read_end(c);
	return e;
}
