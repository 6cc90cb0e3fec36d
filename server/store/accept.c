/* Rack acceptance runs: results per node and check, each settled in its own transaction. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

/* The rack's latest run (attempt 0) or the given attempt: row id, or 0 when none. */
static enum rp_err
run_of(struct conn *c, int64_t rack_id, int attempt, int64_t *id, char state[16], int *att)
{
	struct stmt *s =
	        STMT_ARGS(c,
	                  "SELECT id, state, attempt FROM acceptance_runs WHERE rack_id = ?1 "
	                  "AND (?2 = 0 OR attempt = ?2) ORDER BY attempt DESC LIMIT 1",
	                  rack_id, attempt);
	enum rp_err e;

	if ((e = store_one(c, s, "run")) == RP_ERR_NOT_FOUND) {
		*id = 0;
		return RP_ERR_OK;
	}
	if (e != RP_ERR_OK)
		return e;
	*id = sql_int(s, 0);
	snprintf(state, 16, "%s", sql_text(s, 1));
	*att = sql_int(s, 2);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
rp_store_accept_start(struct rp_store *st, const char *rack, json_t *in, json_t *plans,
                      const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *checks = json_object_get(in, "checks"), *nodes = NULL, *nd;
	struct stmt *s;
	char uuid[RP_UUID_BUF], state[16] = "", summary[200], *cj = NULL, *bj = NULL, *oj = NULL;
	int64_t rack_id, prev = 0, run_id, now = rp_time_now_ms();
	int attempt = 0, jobs = 0;
	size_t i;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, rack, &rack_id)) != RP_ERR_OK)
		goto out;
	if ((e = run_of(c, rack_id, 0, &prev, state, &attempt)) != RP_ERR_OK)
		goto out;
	if (prev && !strcmp(state, "running")) {
		int live = 1;

		/* A run whose jobs all ended (cancelled by hand) would block the rack for good: its
		 * open checks fail, and this one runs them again. */
		s = STMT_ARGS(
		        c,
		        "SELECT EXISTS (SELECT 1 FROM jobs WHERE type = 'acceptance' AND state IN "
		        "('queued', 'running') AND json_extract(params, '$.run') = (SELECT uuid "
		        "FROM "
		        "acceptance_runs WHERE id = ?))",
		        prev);
		if ((e = store_one(c, s, "run live")) == RP_ERR_OK) {
			live = sql_int(s, 0);
			sql_reset(s);
		} else if (e != RP_ERR_NOT_FOUND)
			goto out;
		if (live) {
			*detail = store_why(NULL,
			                    "an acceptance run of rack %s is already running "
			                    "(attempt %d)",
			                    rack, attempt);
			e = RP_ERR_CONFLICT;
			goto out;
		}
		if ((e = EXEC(c, "stale run",
		              "UPDATE acceptance_results SET state = 'failed', message = 'the "
		              "node''s "
		              "acceptance job ended before this check (cancelled?)', finished_at = "
		              "?2 "
		              "WHERE run_id = ?1 AND state IN ('pending', 'running')",
		              prev, now)) != RP_ERR_OK)
			goto out;
		/* Its tests across nodes end too; their child jobs are cancelled like any job
		 * whose pair is gone (the driver that would have settled them is gone). */
		if ((e = EXEC(c, "stale pairs",
		              "UPDATE acceptance_pairs SET state = 'failed', message = 'the run "
		              "ended before this test (its acceptance jobs were cancelled)', "
		              "finished_at = ?2, rev = rev + 1 WHERE run_id = ?1 AND state IN "
		              "('pending', 'running')",
		              prev, now)) != RP_ERR_OK ||
		    (e = EXEC(c, "stale children",
		              "UPDATE jobs SET cancel_requested = 1, updated_at = ?2 WHERE type = "
		              "'steps' AND state IN ('queued', 'running') AND json_extract(params, "
		              "'$.acceptance.run') = (SELECT uuid FROM acceptance_runs WHERE id = "
		              "?1)",
		              prev, now)) != RP_ERR_OK)
			goto out;
		if ((e = store_accept_settle(c, prev)) != RP_ERR_OK)
			goto out;
	}
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c, "SELECT id FROM nodes WHERE rack_id = ?", rack_id);
	if ((nodes = store_rows(c, s)) == NULL)
		goto out;
	if (json_array_size(nodes) == 0) {
		*detail = store_why(NULL, "rack %s has no nodes to accept", rack);
		e = RP_ERR_BAD_REQUEST;
		goto out;
	}
	if (rp_uuid_new(uuid) < 0)
		goto out;
	cj = json_dumps(checks, JSON_COMPACT);
	bj = json_is_object(json_object_get(in, "burn_in"))
	             ? json_dumps(json_object_get(in, "burn_in"), JSON_COMPACT)
	             : NULL;
	{
		json_t *o = json_object();

		if (json_is_object(json_object_get(in, "fabric")))
			json_object_set(o, "fabric", json_object_get(in, "fabric"));
		if (json_is_object(json_object_get(in, "nccl")))
			json_object_set(o, "nccl", json_object_get(in, "nccl"));

		oj = o && json_object_size(o) ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(o);
	}
	s = STMT(c, "INSERT INTO acceptance_runs(uuid, rack_id, attempt, state, checks, burn_in, "
	            "created_by, created_at, options) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)");
	if (cj == NULL)
		goto out;
	sql_bind_text(s, 8, oj);
	sql_bind_text(s, 1, uuid);
	sql_bind_int(s, 2, rack_id);
	sql_bind_int(s, 3, attempt + 1);
	sql_bind_text(s, 4, cj);
	sql_bind_text(s, 5, bj);
	sql_bind_text(s, 6, actor);
	sql_bind_int(s, 7, now);
	if ((e = store_exec(c, s, "run insert")) != RP_ERR_OK)
		goto out;
	run_id = sql_last_id(c);
	/* Every node x check, at once: a re-run copies what passed before; the rest is pending. */
	if ((e = EXEC(c, "results insert",
	              "INSERT INTO acceptance_results(run_id, node_id, check_name, state, message, "
	              "fix, evidence, findings, attempt, started_at, finished_at) SELECT ?1, n.id, "
	              "j.value, coalesce(p.state, 'pending'), p.message, p.fix, p.evidence, "
	              "p.findings, coalesce(p.attempt, ?3), p.started_at, p.finished_at FROM nodes "
	              "n "
	              "CROSS JOIN json_each(?2) j LEFT JOIN acceptance_results p ON p.run_id = ?4 "
	              "AND "
	              "p.node_id = n.id AND p.check_name = j.value AND p.state = 'passed' WHERE "
	              "n.rack_id = ?5",
	              run_id, cj, attempt + 1, prev, rack_id)) != RP_ERR_OK)
		goto out;
	/* The checks across nodes test pairs, so they run again on every node or on none. */
	if ((e = EXEC(c, "results across",
	              "UPDATE acceptance_results AS x SET state = 'pending', message = NULL, fix = "
	              "NULL, evidence = NULL, findings = NULL, attempt = ?2, started_at = NULL, "
	              "finished_at = NULL WHERE x.run_id = ?1 AND x.check_name IN ('fabric', "
	              "'nccl') AND EXISTS (SELECT 1 FROM acceptance_results d WHERE d.run_id = ?1 "
	              "AND d.check_name = x.check_name AND d.state = 'pending')",
	              run_id, attempt + 1)) != RP_ERR_OK)
		goto out;
	/* What is read from a fresh boot needs the boot again: pxe runs with them. */
	if ((e = EXEC(c, "results reset",
	              "UPDATE acceptance_results AS x SET state = 'pending', message = NULL, fix = "
	              "NULL, evidence = NULL, findings = NULL, attempt = ?2, started_at = NULL, "
	              "finished_at = NULL WHERE x.run_id = ?1 AND x.check_name = 'pxe' AND x.state "
	              "= "
	              "'passed' AND EXISTS (SELECT 1 FROM acceptance_results d WHERE d.run_id = ?1 "
	              "AND "
	              "d.node_id = x.node_id AND d.state = 'pending' AND d.check_name IN "
	              "('inventory', 'links', 'burn_in', 'fabric', 'nccl'))",
	              run_id, attempt + 1)) != RP_ERR_OK)
		goto out;
	json_array_foreach(nodes, i, nd)
	{
		int64_t nid = json_integer_value(json_object_get(nd, "id"));
		struct node_ref n;
		json_t *job;
		int64_t jid;
		int pending = 0;

		s = STMT_ARGS(
		        c,
		        "SELECT EXISTS (SELECT 1 FROM acceptance_results WHERE run_id = ? AND "
		        "node_id = ? AND state = 'pending')",
		        run_id, nid);
		if ((e = store_one(c, s, "run pending")) == RP_ERR_OK) {
			pending = sql_int(s, 0);
			sql_reset(s);
		} else if (e != RP_ERR_NOT_FOUND)
			goto out;
		if (!pending)
			continue;
		if ((e = store_node_by_id(c, nid, &n)) != RP_ERR_OK)
			goto out;
		/* Not mutating: it orchestrates; the power, verify and commission jobs it queues
		 * take the node's slot one at a time. */
		job = json_pack("{s:s, s:{s:s, s:O?}, s:b, s:i}", "type", "acceptance", "params",
		                "run", uuid, "commission_plan", json_object_get(plans, n.name),
		                "mutating", 0, "max_attempts", 1000);
		e = store_job_add(c, &n, 0, job, actor, &jid);
		json_decref(job);
		if (e != RP_ERR_OK)
			goto out;
		jobs++;
	}
	snprintf(summary, sizeof summary, "acceptance of rack %s started (attempt %d, %zu nodes)",
	         rack, attempt + 1, json_array_size(nodes));
	if ((e = store_event(c, actor, "rack.acceptance_started", "rack", NULL, rack, 0, rack_id,
	                     summary, in)) != RP_ERR_OK)
		goto out;
	if (jobs == 0 && (e = store_accept_settle(c, run_id)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	e = rp_store_accept_get(st, rack, 0, out);
out:
	store_rollback(c);
	free(cj);
	free(bj);
	free(oj);
	json_decref(nodes);
	return e;
}

enum rp_err
store_accept_settle(struct conn *c, int64_t run_id)
{
	enum rp_err e;
	struct stmt *s =
	        STMT(c, "SELECT (SELECT count(*) FROM acceptance_results x WHERE x.run_id = "
	                "r.id AND x.state IN ('pending', 'running')), (SELECT count(*) FROM "
	                "acceptance_results x WHERE x.run_id = r.id AND x.state = "
	                "'failed'), r.uuid, r.rack_id, (SELECT name FROM racks WHERE id = "
	                "r.rack_id), r.attempt FROM acceptance_runs r WHERE r.id = ?");
	char summary[200], uuid[RP_UUID_BUF] = "", rack[64] = "";
	int open, failed, attempt;
	int64_t rack_id;

	sql_bind_int(s, 1, run_id);
	/* The run exists: the caller found it in this transaction. */
	if ((e = store_one(c, s, "run settle")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
	open = sql_int(s, 0);
	failed = sql_int(s, 1);
	snprintf(uuid, sizeof uuid, "%s", sql_text(s, 2) ?: "");
	rack_id = sql_int(s, 3);
	snprintf(rack, sizeof rack, "%s", sql_text(s, 4) ?: "");
	attempt = sql_int(s, 5);
	sql_reset(s);
	if (open > 0)
		return RP_ERR_OK;
	s = STMT_ARGS(c,
	              "UPDATE acceptance_runs SET state = ?2, finished_at = ?3 WHERE id = ?1 AND "
	              "state = 'running'",
	              run_id, failed ? "failed" : "passed", rp_time_now_ms());
	if ((e = store_exec(c, s, "run settle")) != RP_ERR_OK)
		return e;
	snprintf(summary, sizeof summary, "acceptance of rack %s %s (attempt %d%s)", rack,
	         failed ? "failed" : "passed", attempt, failed ? ", see the report" : "");
	{
		json_t *d = json_pack("{s:s, s:i}", "run", uuid, "failed_checks", failed);
		e = store_event(c, "rackpilotd",
		                failed ? "rack.acceptance_failed" : "rack.acceptance_passed",
		                "rack", NULL, rack, 0, rack_id, summary, d);

		json_decref(d);
		return e;
	}
}

#define RESULT_COLS                                                                                \
	"SELECT n.name AS node, n.uuid AS node_id, n.u_position, x.check_name AS \"check\", "      \
	"x.state, x.message, x.fix, x.evidence AS \"evidence:json\", x.findings AS "               \
	"\"findings:json\", x.child_job AS job, x.attempt, x.started_at AS \"started_at:time\", "  \
	"x.finished_at AS \"finished_at:time\" FROM acceptance_results x JOIN nodes n ON n.id = "  \
	"x.node_id "

enum rp_err
rp_store_accept_get(struct rp_store *st, const char *rack, int attempt, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *run = NULL, *rows = NULL, *signoffs = NULL, *pairs = NULL;
	struct stmt *s;
	char state[16];
	int64_t rack_id, run_id;
	int att = 0;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, rack, &rack_id)) != RP_ERR_OK)
		goto out;
	if ((e = run_of(c, rack_id, attempt, &run_id, state, &att)) != RP_ERR_OK)
		goto out;
	if (run_id == 0) {
		e = RP_ERR_NOT_FOUND;
		goto out;
	}
	s = STMT_ARGS(
	        c,
	        "SELECT r.uuid AS id, k.name AS rack, r.attempt, r.state, r.checks AS "
	        "\"checks:json\", r.burn_in AS \"burn_in:json\", r.created_by, r.created_at AS "
	        "\"created_at:time\", r.finished_at AS \"finished_at:time\", r.options AS "
	        "\"options:json\" FROM acceptance_runs r JOIN racks k ON k.id = r.rack_id WHERE "
	        "r.id = ?",
	        run_id);
	if ((e = store_one_row(c, s, "run get", &run)) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			e = RP_ERR_INTERNAL; /* run_of found it in this snapshot */
		goto out;
	}
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              RESULT_COLS
	              "WHERE x.run_id = ?1 ORDER BY n.u_position DESC, n.name, (SELECT "
	              "j.key FROM acceptance_runs r, json_each(r.checks) j WHERE r.id = ?1 AND "
	              "j.value = x.check_name)",
	              run_id);
	if ((rows = store_rows(c, s)) == NULL)
		goto out;
	s = STMT_ARGS(c,
	              "SELECT signed_by, signed_at AS \"signed_at:time\", report_sha256, note FROM "
	              "acceptance_signoffs WHERE run_id = ? ORDER BY id",
	              run_id);
	if ((signoffs = store_rows(c, s)) == NULL)
		goto out;
	s = STMT_ARGS(c,
	              "SELECT a.kind, a.round, v.name AS server, w.name AS client, a.state, "
	              "a.message, a.tests AS \"tests:json\", a.started_at AS \"started_at:time\", "
	              "a.finished_at AS \"finished_at:time\" FROM acceptance_pairs a JOIN nodes v "
	              "ON v.id = a.server_id LEFT JOIN nodes w ON w.id = a.client_id WHERE "
	              "a.run_id = ? ORDER BY a.kind, a.round, v.u_position DESC, v.name",
	              run_id);
	if ((pairs = store_rows(c, s)) == NULL)
		goto out;
	/* Only when there are: the report of a run without them hashes as it always did. */
	if (json_object_size(json_object_get(run, "options")) == 0)
		json_object_del(run, "options");
	json_object_set_new(run, "results", rows);
	json_object_set_new(run, "signoffs", signoffs);
	if (json_array_size(pairs) > 0)
		json_object_set_new(run, "pairs", pairs);
	else
		json_decref(pairs);
	rows = signoffs = pairs = NULL;
	*out = run;
	run = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(run);
	json_decref(rows);
	json_decref(signoffs);
	json_decref(pairs);
	return e;
}

/* The run row id of uuid, and whether it still runs. */
static enum rp_err
run_by_uuid(struct conn *c, const char *uuid, int64_t *id, int *running, int64_t *created)
{
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT id, state = 'running', created_at FROM acceptance_runs "
	                           "WHERE uuid = ?",
	                           uuid);
	enum rp_err e;

	if ((e = store_one(c, s, "run")) != RP_ERR_OK)
		return e;
	*id = sql_int(s, 0);
	*running = sql_int(s, 1);
	*created = sql_int(s, 2);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
rp_store_accept_node(struct rp_store *st, const char *run, int64_t node_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	json_t *rows, *cab = NULL;
	int64_t run_id = 0, created = 0;
	int running = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = run_by_uuid(c, run, &run_id, &running, &created)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT check_name AS \"check\", state, child_job AS job, started_at FROM "
	              "acceptance_results WHERE run_id = ? AND node_id = ?",
	              run_id, node_id);
	if ((rows = store_rows(c, s)) == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_cabling_of_node(c, node_id, &cab)) != RP_ERR_OK) {
		json_decref(rows);
		return e;
	}
	*out = json_pack("{s:o, s:b, s:I, s:o}", "results", rows, "running", running, "created_at",
	                 (json_int_t)created, "cabling", cab);
	return *out ? RP_ERR_OK : RP_ERR_INTERNAL;
}

/* A result's state, and the job it waits on ("" when none; child may be NULL). */
static enum rp_err
result_state(struct conn *c, int64_t run_id, int64_t node_id, const char *check, char state[16],
             char *child)
{
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT state, coalesce(child_job, '') FROM acceptance_results "
	                           "WHERE run_id = ? AND node_id = ? AND check_name = ?",
	                           run_id, node_id, check);
	enum rp_err e;

	if ((e = store_one(c, s, "result")) != RP_ERR_OK)
		return e;
	snprintf(state, 16, "%s", sql_text(s, 0));
	if (child)
		snprintf(child, RP_UUID_BUF, "%s", sql_text(s, 1));
	sql_reset(s);
	return RP_ERR_OK;
}

/* Begin the write transaction that moves one result of run: the run's row id, the result's
 * state and the job it waits on (result_state). Rolled back again on failure. */
static enum rp_err
result_begin(struct conn *c, const char *run, int64_t node_id, const char *check, int64_t *run_id,
             char state[16], char *child)
{
	int64_t created;
	int running;
	enum rp_err e;

	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = run_by_uuid(c, run, run_id, &running, &created)) != RP_ERR_OK ||
	    (e = result_state(c, *run_id, node_id, check, state, child)) != RP_ERR_OK)
		store_rollback(c);
	return e;
}

enum rp_err
rp_store_accept_child(struct rp_store *st, const char *run, int64_t node_id, const char *check,
                      const char *prev, const char *action, json_t *job, char *child, size_t len,
                      json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *res = NULL;
	struct node_ref n;
	struct stmt *s;
	char state[16] = "", uuid[RP_UUID_BUF] = "", was[RP_UUID_BUF] = "";
	int64_t run_id = 0, jid = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = result_begin(c, run, node_id, check, &run_id, state, was)) != RP_ERR_OK)
		return e;
	/* Queued before (a restart): follow that child, never queue a second. */
	if (prev == NULL ? strcmp(state, "pending") != 0
	                 : strcmp(state, "running") != 0 || strcmp(was, prev) != 0) {
		e = RP_ERR_DUPLICATE;
		goto out;
	}
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	if (action) {
		if ((e = store_provision(c, n.uuid, action, job, "rackpilotd", &res, detail)) !=
		    RP_ERR_OK)
			goto out;
		snprintf(uuid, sizeof uuid, "%s",
		         json_string_value(json_object_get(json_object_get(res, "job"), "id"))
		                 ?: "");
	} else {
		char why[256];

		if ((e = store_bmc_ready(c, node_id, why, sizeof why)) != RP_ERR_OK) {
			if (e != RP_ERR_INTERNAL)
				*detail = store_why(NULL, "%s", why);
			goto out;
		}
		if ((e = store_job_add(c, &n, 0, job, "rackpilotd", &jid)) != RP_ERR_OK)
			goto out;
		s = STMT_ARGS(c, "SELECT uuid FROM jobs WHERE id = ?", jid);
		if ((e = store_one(c, s, "child job")) == RP_ERR_OK) {
			snprintf(uuid, sizeof uuid, "%s", sql_text(s, 0));
			sql_reset(s);
		} else if (e != RP_ERR_NOT_FOUND)
			goto out;
	}
	e = RP_ERR_INTERNAL;
	if (uuid[0] == '\0')
		goto out;
	s = STMT_ARGS(
	        c,
	        "UPDATE acceptance_results SET state = 'running', child_job = ?4, started_at = "
	        "coalesce(started_at, ?5) WHERE run_id = ?1 AND node_id = ?2 AND check_name = "
	        "?3",
	        run_id, node_id, check, uuid, rp_time_now_ms());
	e = store_exec(c, s, "result running");
out:
	json_decref(res);
	if ((e = store_end(c, e, NULL, NULL)) == RP_ERR_OK)
		snprintf(child, len, "%s", uuid);
	return e;
}

enum rp_err
rp_store_accept_record(struct rp_store *st, const char *run, int64_t node_id, const char *check,
                       json_t *result)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	char state[16] = "", *ev = NULL, *fi = NULL;
	int64_t run_id = 0, now = rp_time_now_ms();
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = result_begin(c, run, node_id, check, &run_id, state, NULL)) != RP_ERR_OK)
		return e;
	if (strcmp(state, "pending") != 0 && strcmp(state, "running") != 0) {
		e = RP_ERR_OK; /* settled before a restart: keep it */
		goto out;
	}
	ev = json_object_get(result, "evidence") ? json_dumps(json_object_get(result, "evidence"),
	                                                      JSON_COMPACT | JSON_ENCODE_ANY)
	                                         : NULL;
	fi = json_object_get(result, "findings")
	             ? json_dumps(json_object_get(result, "findings"), JSON_COMPACT)
	             : NULL;
	s = STMT_ARGS(
	        c,
	        "UPDATE acceptance_results SET state = ?4, message = ?5, fix = ?6, evidence = "
	        "?7, findings = ?8, started_at = coalesce(started_at, ?9), finished_at = ?9 "
	        "WHERE run_id = ?1 AND node_id = ?2 AND check_name = ?3",
	        run_id, node_id, check);
	store_bind_str(s, 4, result, "state");
	store_bind_str(s, 5, result, "message");
	store_bind_str(s, 6, result, "fix");
	sql_bind_text(s, 7, ev);
	sql_bind_text(s, 8, fi);
	sql_bind_int(s, 9, now);
	if ((e = store_exec(c, s, "result record")) != RP_ERR_OK)
		goto out;
	e = store_accept_settle(c, run_id);
out:
	free(ev);
	free(fi);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_accept_signoff(struct rp_store *st, const char *rack, const char *sha256, const char *note,
                        const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	char state[16] = "", summary[256];
	int64_t rack_id, run_id;
	int att = 0;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_RACK, rack, &rack_id)) != RP_ERR_OK ||
	    (e = run_of(c, rack_id, 0, &run_id, state, &att)) != RP_ERR_OK)
		goto out;
	if (run_id == 0 || strcmp(state, "passed") != 0) {
		*detail = json_pack("{s:s, s:s}", "state", run_id ? state : "none", "reason",
		                    "only a passed acceptance run can be signed off");
		e = RP_ERR_INVALID_STATE;
		goto out;
	}
	s = STMT_ARGS(
	        c,
	        "INSERT INTO acceptance_signoffs(run_id, signed_by, signed_at, report_sha256, "
	        "note) VALUES (?, ?, ?, ?, ?)",
	        run_id, actor, rp_time_now_ms(), sha256, note);
	if ((e = store_exec(c, s, "signoff")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "rack %s acceptance (attempt %d) signed off by %s", rack,
	         att, actor);
	{
		json_t *d = json_pack("{s:s, s:s?}", "report_sha256", sha256, "note", note);

		e = store_event(c, actor, "rack.signed_off", "rack", NULL, rack, 0, rack_id,
		                summary, d);
		json_decref(d);
	}
	if (e != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	e = rp_store_accept_get(st, rack, att, out);
out:
	store_rollback(c);
	return e;
}
