/* Step plans: a steps job's rows, what its agent reports, where to reach the node over SSH,
 * and the job's log. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define STEP_COLS                                                                                  \
	"SELECT step_id AS id, idx AS \"index\", type, state, continue_on_error AS "               \
	"\"continue_on_error:bool\", runs, exit_code, started_at AS \"started_at:time\", "         \
	"finished_at AS \"finished_at:time\", duration_ms, output, output_bytes, "                 \
	"output_truncated AS \"output_truncated:bool\", error, result AS \"result:json\", "        \
	"progress AS \"progress:json\" FROM job_steps WHERE job_id = ? ORDER BY idx"

enum rp_err
store_ssh_ready(struct conn *c, int64_t node_id, char *why, size_t len)
{
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT n.maintenance, coalesce(n.ssh_address, a.address), "
	                           "k.node_id IS NOT NULL FROM nodes n LEFT JOIN agents a ON "
	                           "a.node_id = n.id LEFT JOIN ssh_host_keys k ON k.node_id = n.id "
	                           "WHERE n.id = ?",
	                           node_id);
	enum rp_err e;

	if ((e = store_one(c, s, "ssh ready")) != RP_ERR_OK)
		return e;
	if (sql_int(s, 0)) {
		snprintf(why, len, "node is in maintenance");
		e = RP_ERR_INVALID_STATE;
	} else if (sql_type(s, 1) == SQL_NULL) {
		snprintf(why, len,
		         "node has no SSH address: register its agent or set ssh.address");
		e = RP_ERR_CONFLICT;
	} else if (!sql_int(s, 2)) {
		snprintf(why, len,
		         "node has no pinned SSH host key: register its agent or pin one "
		         "with PUT /v1/nodes/{node}/ssh-host-key");
		e = RP_ERR_CONFLICT;
	}
	sql_reset(s);
	return e;
}

enum rp_err
store_steps_insert(struct conn *c, int64_t job_id, json_t *plan)
{
	enum rp_err e;
	json_t *step;
	size_t i;

	json_array_foreach(plan, i, step)
	{
		struct stmt *s = STMT(c, "INSERT INTO job_steps(job_id, idx, step_id, type, "
		                         "continue_on_error) VALUES (?,?,?,?,?)");

		sql_bind_int(s, 1, job_id);
		sql_bind_int(s, 2, (int64_t)i);
		store_bind_str(s, 3, step, "id");
		store_bind_str(s, 4, step, "type");
		sql_bind_int(s, 5, json_is_true(json_object_get(step, "continue_on_error")));
		if ((e = store_exec(c, s, "step insert")) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

json_t *
store_steps_view(struct conn *c, int64_t job_id)
{
	struct stmt *s = STMT_ARGS(c, STEP_COLS, job_id);

	return store_rows(c, s);
}

enum rp_err
store_steps_close(struct conn *c, int64_t job_id, const char *job_state)
{
	struct stmt *s;

	/* A job that ended leaves no step pretending to wait or run. */
	s = STMT_ARGS(c,
	              "UPDATE job_steps SET state = CASE state WHEN 'pending' THEN 'skipped' ELSE "
	              "'failed' END, error = CASE state WHEN 'pending' THEN error ELSE "
	              "'interrupted: the job ended (' || ?2 || ') while this step ran' END, "
	              "finished_at = CASE state WHEN 'running' THEN ?3 ELSE finished_at END "
	              "WHERE job_id = ?1 AND state IN ('pending', 'running')",
	              job_id, job_state, rp_time_now_ms());
	return store_exec(c, s, "steps close");
}

/* The job an agent names, checked to belong to its node. */
static enum rp_err
agent_job(struct conn *c, int64_t node_id, const char *uuid, int64_t *job_id, char *state,
          size_t slen, int *cancel)
{
	struct stmt *s;
	int64_t owner;
	enum rp_err e;

	if (!rp_uuid_valid(uuid))
		return RP_ERR_NOT_FOUND;
	s = STMT_ARGS(c,
	              "SELECT id, coalesce(node_id, 0), state, cancel_requested FROM jobs WHERE "
	              "uuid = lower(?) AND type IN " STORE_SSH_TYPES_SQL,
	              uuid);
	if ((e = store_one(c, s, "agent job")) != RP_ERR_OK)
		return e;
	*job_id = sql_int(s, 0);
	owner = sql_int(s, 1);
	snprintf(state, slen, "%s", sql_text(s, 2));
	*cancel = sql_int(s, 3);
	sql_reset(s);
	/* Another node's job: say so, it is no secret that it exists, only what it holds. */
	return owner == node_id ? RP_ERR_OK : RP_ERR_FORBIDDEN;
}

enum rp_err
rp_store_agent_job(struct rp_store *st, int64_t node_id, const char *job, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *steps;
	char state[16];
	int64_t id = 0;
	enum rp_err e;
	int cancel = 0;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = agent_job(c, node_id, job, &id, state, sizeof state, &cancel)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT step_id AS id, idx AS \"index\", type, state FROM job_steps WHERE "
	              "job_id = ? ORDER BY idx",
	              id);
	if ((steps = store_rows(c, s)) == NULL)
		goto out;
	*out = json_pack("{s:s, s:s, s:b, s:o}", "id", job, "state", state, "cancel_requested",
	                 cancel, "steps", steps);
	e = RP_ERR_OK;
out:
	store_read_end(c);
	return e;
}

#define PROGRESS_EVENT_MS 10000 /* at most one job.progress event per step this often */

/* A running step's progress (an image written: bytes, rate), kept on its row; an event now
 * and then, not at every report. */
static enum rp_err
step_progress(struct conn *c, int64_t job_id, int64_t idx, int64_t node_id, const char *job,
              const char *step, json_t *rep)
{
	json_t *p = json_object_get(rep, "progress");
	char *text = store_canon(p), summary[300];
	int64_t now = rp_time_now_ms(), last = 0, started = 0;
	struct node_ref n;
	struct stmt *s;
	enum rp_err e;

	if (text == NULL)
		return RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT coalesce(progress_at, 0), coalesce(started_at, 0) FROM job_steps "
	              "WHERE job_id = ? AND idx = ?",
	              job_id, idx);
	if ((e = store_one(c, s, "step progress read")) != RP_ERR_OK) {
		free(text);
		return e;
	}
	last = sql_int(s, 0);
	started = sql_int(s, 1);
	sql_reset(s);
	s = STMT_ARGS(c,
	              "UPDATE job_steps SET progress = ?3, progress_at = ?4 WHERE job_id = ?1 "
	              "AND idx = ?2",
	              job_id, idx);
	sql_bind_text_own(s, 3, text);
	sql_bind_int(s, 4, now);
	if ((e = store_exec(c, s, "step progress")) != RP_ERR_OK)
		return e;
	/* progress_at moves at every report: an event when a 10 s mark since the step started
	 * is crossed. */
	if (last != 0 &&
	    (now - started) / PROGRESS_EVENT_MS == (last - started) / PROGRESS_EVENT_MS)
		return RP_ERR_OK;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		return e;
	snprintf(summary, sizeof summary, "step %s on %s: %.1f MiB written, %.1f MB/s", step,
	         n.name,
	         (double)json_integer_value(json_object_get(p, "bytes_written")) / 1048576.0,
	         (double)json_integer_value(json_object_get(p, "rate_bps")) / 1e6);
	return store_event(c, "agent", "job.progress", "job", job, n.name, n.id, n.rack_id, summary,
	                   p);
}

enum rp_err
rp_store_step_report(struct rp_store *st, int64_t node_id, const char *job, const char *step,
                     json_t *rep, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	const char *state = json_string_value(json_object_get(rep, "state"));
	const char *run = json_string_value(json_object_get(rep, "run"));
	char jstate[16], cur[16] = "", summary[400], *rtext = NULL;
	struct node_ref n;
	struct stmt *s;
	int64_t id = 0, idx = -1, now = rp_time_now_ms();
	enum rp_err e;
	int cancel = 0, same_run = 0;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = agent_job(c, node_id, job, &id, jstate, sizeof jstate, &cancel)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT idx, state, run_id IS NOT NULL AND run_id = ?3 FROM job_steps "
	              "WHERE job_id = ?1 AND step_id = ?2",
	              id, step, run);
	if ((e = store_one(c, s, "step read")) != RP_ERR_OK)
		goto out;
	idx = sql_int(s, 0);
	snprintf(cur, sizeof cur, "%s", sql_text(s, 1));
	same_run = sql_int(s, 2) != 0;
	sql_reset(s);
	/* A job waiting to retry (its SSH session dropped) is still the agent's to finish. */
	if (strcmp(jstate, "running") != 0 && strcmp(jstate, "queued") != 0) {
		*detail = store_why(NULL, "job is %s", jstate);
		e = RP_ERR_INVALID_STATE;
		goto out;
	}
	if (!strcmp(state, "running")) {
		if (cancel) {
			*detail = store_why(NULL, "job is cancelled: do not start more steps");
			e = RP_ERR_INVALID_STATE;
			goto out;
		}
		/* A progress report is never a start: late (its answer timed out at the agent
		 * while the step went on and ended) or of another run, it changes nothing. */
		if (json_is_object(json_object_get(rep, "progress")) &&
		    !(!strcmp(cur, "running") && same_run)) {
			e = RP_ERR_OK;
			goto out;
		}
		if (!strcmp(cur, "succeeded")) {
			*detail = store_why("state", "step %s already succeeded", step);
			e = RP_ERR_CONFLICT;
			goto out;
		}
		/* The same run's report again: its answer was lost (the server stopped after
		 * committing it), so the agent retried. It is one start, not a second. */
		if (!strcmp(cur, "running") && same_run) {
			e = json_is_object(json_object_get(rep, "progress"))
			            ? step_progress(c, id, idx, node_id, job, step, rep)
			            : RP_ERR_OK;
			goto out;
		}
		s = STMT_ARGS(
		        c,
		        "UPDATE job_steps SET state = 'running', runs = runs + 1, boot_id = ?3, "
		        "started_at = ?4, run_id = ?5, finished_at = NULL, exit_code = NULL, "
		        "duration_ms = NULL, output = NULL, output_bytes = NULL, "
		        "output_truncated = 0, error = NULL, result = NULL, progress = NULL, "
		        "progress_at = NULL "
		        "WHERE job_id = ?1 AND idx = ?2",
		        id, idx);
		store_bind_str(s, 3, rep, "boot_id");
		sql_bind_int(s, 4, now);
		sql_bind_text(s, 5, run);
	} else {
		/* Posting the same end again is a retry after a lost answer: accept it. */
		if (!strcmp(cur, state)) {
			e = RP_ERR_OK;
			goto out;
		}
		if (strcmp(cur, "running") != 0 && strcmp(cur, "pending") != 0) {
			*detail = store_why("state", "step %s already ended as %s", step, cur);
			e = RP_ERR_CONFLICT;
			goto out;
		}
		s = STMT_ARGS(
		        c,
		        "UPDATE job_steps SET state = ?3, exit_code = ?4, duration_ms = ?5, "
		        "output = ?6, output_bytes = ?7, output_truncated = ?8, error = ?9, "
		        "result = ?10, finished_at = ?11, started_at = coalesce(started_at, ?11), "
		        "boot_id = coalesce(?12, boot_id) WHERE job_id = ?1 AND idx = ?2",
		        id, idx, state);
		store_bind_int(s, 4, rep, "exit_code");
		store_bind_int(s, 5, rep, "duration_ms");
		store_bind_str(s, 6, rep, "output");
		store_bind_int(s, 7, rep, "output_bytes");
		sql_bind_int(s, 8, json_is_true(json_object_get(rep, "output_truncated")));
		store_bind_str(s, 9, rep, "error");
		if (json_is_object(json_object_get(rep, "result")) &&
		    (rtext = store_canon(json_object_get(rep, "result"))) != NULL)
			sql_bind_text_own(s, 10, rtext);
		sql_bind_int(s, 11, now);
		store_bind_str(s, 12, rep, "boot_id");
	}
	if ((e = store_exec(c, s, "step report")) != RP_ERR_OK)
		goto out;
	if (!strcmp(state, "failed")) {
		if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
			goto out;
		snprintf(summary, sizeof summary, "step %s on %s failed: %s", step, n.name,
		         json_string_value(json_object_get(rep, "error")) ?: "no reason given");
		if ((e = store_event(c, "agent", "job.step_failed", "job", job, n.name, n.id,
		                     n.rack_id, summary, NULL)) != RP_ERR_OK)
			goto out;
	}
out:
	return store_end(c, e, NULL, NULL);
}

/* ---- Worker side ----------------------------------------------------------------------- */

enum rp_err
rp_store_job_steps(struct rp_store *st, int64_t job_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return store_all(c,
	                 STMT_ARGS(c,
	                           "SELECT step_id AS id, idx AS \"index\", type, state, "
	                           "continue_on_error AS \"continue_on_error:bool\", boot_id, "
	                           "started_at, error FROM job_steps WHERE job_id = ? ORDER BY idx",
	                           job_id),
	                 out);
}

enum rp_err
rp_store_step_finish(struct rp_store *st, int64_t job_id, int index, const char *state,
                     const char *error)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;
	int64_t now = rp_time_now_ms();

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(
	        c,
	        "UPDATE job_steps SET state = ?3, error = ?4, finished_at = ?5, duration_ms = "
	        "?5 - coalesce(started_at, ?5) WHERE job_id = ?1 AND idx = ?2",
	        job_id, index, state, error, now);
	return store_end(c, store_exec(c, s, "step finish"), NULL, NULL);
}

enum rp_err
rp_store_ssh_target(struct rp_store *st, int64_t node_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;

	s = STMT_ARGS(
	        c,
	        "SELECT coalesce(n.ssh_address, a.address) AS address, coalesce(n.ssh_port, "
	        "a.port, 22) AS port, coalesce(n.ssh_user, 'root') AS user, k.key_type, "
	        "k.key_b64, k.fingerprint, a.boot_id, a.seen_at, a.registered_at, "
	        "n.maintenance AS \"maintenance:bool\", n.maintenance_reason FROM nodes n "
	        "LEFT JOIN agents a "
	        "ON a.node_id = n.id LEFT JOIN ssh_host_keys k ON k.node_id = n.id WHERE n.id = ?",
	        node_id);
	return store_one_row(c, s, "ssh target", out);
}

enum rp_err
rp_store_host_key_mismatch(struct rp_store *st, int64_t node_id, const char *job,
                           const char *pinned, const char *seen)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	char summary[300];
	json_t *d = NULL;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary,
	         "SSH host key of %s does not match the pinned key "
	         "(pinned %s, presented %s): refused to connect",
	         n.name, pinned, seen);
	d = json_pack("{s:s, s:s, s:s}", "pinned", pinned, "presented", seen, "job", job);
	e = store_event(c, "rackpilotd", "node.host_key_mismatch", "node", n.uuid, n.name, n.id,
	                n.rack_id, summary, d);
out:
	json_decref(d);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_job_log_append(struct rp_store *st, int64_t job_id, const void *data, size_t len,
                        size_t cap)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	int64_t have, seq;
	size_t keep;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(
	        c,
	        "SELECT log_bytes, (SELECT coalesce(max(seq), 0) FROM job_logs WHERE job_id = ?1) "
	        "FROM jobs WHERE id = ?1",
	        job_id);
	if ((e = store_one(c, s, "log read")) != RP_ERR_OK)
		goto out;
	have = sql_int(s, 0);
	seq = sql_int(s, 1);
	sql_reset(s);
	keep = (size_t)have >= cap ? 0 : len < cap - (size_t)have ? len : cap - (size_t)have;
	if (keep > 0) {
		s = STMT_ARGS(c, "INSERT INTO job_logs(job_id, seq, at, data) VALUES (?,?,?,?)",
		              job_id, seq + 1, rp_time_now_ms());
		sql_bind_blob(s, 4, data, keep);
		if ((e = store_exec(c, s, "log append")) != RP_ERR_OK)
			goto out;
	}
	e = EXEC(c, "log count",
	         "UPDATE jobs SET log_bytes = log_bytes + ?2, log_dropped = log_dropped + ?3 "
	         "WHERE id = ?1",
	         job_id, (int64_t)keep, (int64_t)(len - keep));
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_job_log(struct rp_store *st, const char *job, int64_t offset, struct rp_buf *out,
                 json_t **meta)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	int64_t id = 0, pos = 0;
	json_t *m = NULL;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (!rp_uuid_valid(job))
		return RP_ERR_NOT_FOUND;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(
	        c, "SELECT id, state, log_bytes, log_dropped, type FROM jobs WHERE uuid = lower(?)",
	        job);
	if ((e = store_one(c, s, "log job")) != RP_ERR_OK)
		goto out;
	id = sql_int(s, 0);
	m = json_pack("{s:s, s:I, s:I, s:s}", "state", sql_text(s, 1), "bytes",
	              (json_int_t)sql_int(s, 2), "dropped", (json_int_t)sql_int(s, 3), "type",
	              sql_text(s, 4));
	sql_reset(s);
	s = STMT_ARGS(c, "SELECT data FROM job_logs WHERE job_id = ? ORDER BY seq", id);
	while (store_next(c, s, "log read", &e)) {
		const char *d = sql_blob(s, 0);
		int64_t n = sql_bytes(s, 0);

		if (pos + n > offset) {
			int64_t skip = offset > pos ? offset - pos : 0;

			rp_buf_append(out, d + skip, (size_t)(n - skip));
		}
		pos += n;
	}
	if (e != RP_ERR_OK)
		goto out;
	if (out->oom) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	*meta = m;
	m = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(m);
	return e;
}
