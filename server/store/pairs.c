/* Rack acceptance across nodes: the pairs of the fabric check and the NCCL run, each moved in
 * its own transaction by the one acceptance job that drives it (jobs/accept.c). */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

/* The run's row id and whether it still runs. */
static enum rp_err
run_id_of(struct conn *c, const char *run, int64_t *id, int *running)
{
	struct stmt *s = STMT_ARGS(
	        c, "SELECT id, state = 'running' FROM acceptance_runs WHERE uuid = ?", run);
	enum rp_err e;

	if ((e = store_one(c, s, "cross run")) != RP_ERR_OK)
		return e;
	*id = sql_int(s, 0);
	*running = sql_int(s, 1);
	sql_reset(s);
	return RP_ERR_OK;
}

/* A write transaction on this thread's connection for run, which must still run: RP_ERR_OK with
 * it open and the run's row id; otherwise nothing is left open (RP_ERR_INVALID_STATE: the run
 * ended, settled or replaced by a re-run). */
static enum rp_err
run_write(struct rp_store *st, const char *run, struct conn **c, int64_t *run_id)
{
	int running = 0;
	enum rp_err e;

	if ((e = store_write(st, c)) != RP_ERR_OK)
		return e;
	if ((e = run_id_of(*c, run, run_id, &running)) == RP_ERR_OK && !running)
		e = RP_ERR_INVALID_STATE;
	if (e != RP_ERR_OK)
		store_rollback(*c);
	return e;
}

enum rp_err
rp_store_accept_cross(struct rp_store *st, const char *run, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *nodes = NULL, *pairs = NULL, *opts = NULL, *o;
	struct stmt *s;
	int64_t run_id = 0;
	int running = 0;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = run_id_of(c, run, &run_id, &running)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c, "SELECT options AS \"options:json\" FROM acceptance_runs WHERE id = ?",
	              run_id);
	if (store_one_row(c, s, "cross options", &opts) != RP_ERR_OK)
		goto out;
	/* One row per node of the run: the results it has, and its pxe check's commission. */
	s = STMT_ARGS(
	        c,
	        "SELECT n.id, n.uuid, n.name, n.node_class AS class, (SELECT state FROM "
	        "acceptance_results x WHERE x.run_id = ?1 AND x.node_id = n.id AND x.check_name = "
	        "'fabric') AS fabric, (SELECT state FROM acceptance_results x WHERE x.run_id = ?1 "
	        "AND x.node_id = n.id AND x.check_name = 'nccl') AS nccl, p.state AS pxe, "
	        "CASE WHEN j.state IN ('queued', 'running') AND j.phase = 'hold' THEN 1 ELSE 0 END "
	        "AS "
	        "\"held:bool\", CASE WHEN j.state NOT IN ('queued', 'running') THEN 1 ELSE 0 END "
	        "AS \"pxe_ended:bool\", CASE WHEN EXISTS (SELECT 1 FROM jobs a WHERE a.type = "
	        "'acceptance' AND a.state IN ('queued', 'running') AND a.node_id = n.id AND "
	        "json_extract(a.params, '$.run') = ?2) THEN 1 ELSE 0 END AS \"alive:bool\" FROM "
	        "nodes n JOIN (SELECT DISTINCT node_id FROM acceptance_results WHERE run_id = ?1) "
	        "r ON r.node_id = n.id LEFT JOIN acceptance_results p ON p.run_id = ?1 AND "
	        "p.node_id = n.id AND p.check_name = 'pxe' LEFT JOIN jobs j ON j.uuid = "
	        "p.child_job ORDER BY n.u_position IS NULL, n.u_position DESC, n.name",
	        run_id, run);
	if ((nodes = store_rows(c, s)) == NULL)
		goto out;
	{
		size_t i;
		json_t *nd;

		json_array_foreach(nodes, i, nd)
		        json_object_set_new(nd, "index", json_integer((json_int_t)i));
	}
	s = STMT_ARGS(c,
	              "SELECT a.kind, a.round, a.server_id AS server, a.client_id AS client, "
	              "a.state, a.message, a.tests AS \"tests:json\", a.rev, a.started_at, "
	              "a.finished_at FROM acceptance_pairs a JOIN nodes n ON n.id = a.server_id "
	              "WHERE a.run_id = ? ORDER BY a.kind, a.round, n.u_position IS NULL, "
	              "n.u_position DESC, "
	              "n.name",
	              run_id);
	if ((pairs = store_rows(c, s)) == NULL)
		goto out;
	o = json_pack("{s:b, s:o, s:o, s:o}", "running", running, "options",
	              json_is_object(json_object_get(opts, "options"))
	                      ? json_incref(json_object_get(opts, "options"))
	                      : json_object(),
	              "nodes", nodes, "pairs", pairs);
	nodes = pairs = NULL;
	if (o == NULL)
		goto out;
	*out = o;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(nodes);
	json_decref(pairs);
	json_decref(opts);
	return e;
}

enum rp_err
rp_store_accept_pairs_init(struct rp_store *st, const char *run, const char *kind, json_t *pairs)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *p;
	int64_t run_id = 0;
	int have = 0;
	size_t i;
	enum rp_err e;

	if ((e = run_write(st, run, &c, &run_id)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c,
	              "SELECT EXISTS (SELECT 1 FROM acceptance_pairs WHERE run_id = ? AND kind = "
	              "?)",
	              run_id, kind);
	if ((e = store_one(c, s, "pairs exist")) != RP_ERR_OK)
		goto out;
	have = sql_int(s, 0);
	sql_reset(s);
	json_array_foreach(pairs, i, p)
	{
		if (have)
			break; /* laid out by another node's job first */
		s = STMT_ARGS(c,
		              "INSERT INTO acceptance_pairs(run_id, kind, round, server_id, "
		              "client_id) VALUES (?1, ?2, ?3, ?4, ?5)",
		              run_id, kind,
		              (int64_t)json_integer_value(json_object_get(p, "round")),
		              (int64_t)json_integer_value(json_object_get(p, "server")));
		if (json_is_integer(json_object_get(p, "client")))
			sql_bind_int(s, 5, json_integer_value(json_object_get(p, "client")));
		if ((e = store_exec(c, s, "pair insert")) != RP_ERR_OK)
			goto out;
	}
	e = RP_ERR_OK;
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_accept_pair_update(struct rp_store *st, const char *run, const char *kind, int round,
                            int64_t server, int64_t rev, json_t *upd, json_t *jobs)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *jb;
	const char *state = json_string_value(json_object_get(upd, "state")) ?: "running";
	char *tests = NULL;
	int64_t run_id = 0, now = rp_time_now_ms(), jid;
	int settled = strcmp(state, "pending") != 0 && strcmp(state, "running") != 0;
	size_t i;
	enum rp_err e;

	if ((e = run_write(st, run, &c, &run_id)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	if ((tests = store_canon(json_object_get(upd, "tests") ?: json_array())) == NULL)
		goto out;
	s = STMT_ARGS(
	        c,
	        "UPDATE acceptance_pairs SET state = ?6, message = ?7, tests = ?8, rev = rev + 1, "
	        "started_at = CASE WHEN ?6 = 'pending' THEN started_at ELSE coalesce(started_at, "
	        "?9) END, finished_at = CASE WHEN ?10 = 1 THEN ?9 ELSE NULL END WHERE run_id = ?1 "
	        "AND kind = ?2 AND round = ?3 AND server_id = ?4 AND rev = ?5",
	        run_id, kind, (int64_t)round, server, rev, state);
	store_bind_str(s, 7, upd, "message");
	sql_bind_text(s, 8, tests);
	sql_bind_int(s, 9, now);
	sql_bind_int(s, 10, settled);
	if ((e = store_exec(c, s, "pair update")) != RP_ERR_OK)
		goto out;
	if (sql_changes(c) != 1) {
		e = RP_ERR_DUPLICATE; /* moved by someone else since it was read */
		goto out;
	}
	json_array_foreach(jobs, i, jb)
	{
		struct node_ref n;

		if ((e = store_node_by_id(c, json_integer_value(json_object_get(jb, "node")),
		                          &n)) != RP_ERR_OK ||
		    (e = store_job_add(c, &n, 0, json_object_get(jb, "job"), "rackpilotd", &jid)) !=
		            RP_ERR_OK)
			goto out;
	}
	e = RP_ERR_OK;
out:
	free(tests);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_accept_holds(struct rp_store *st, const char *run, int64_t node_id, int *hold)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	int64_t run_id = 0;
	int running = 0, h = 0;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = run_id_of(c, run, &run_id, &running)) != RP_ERR_OK)
		goto out;
	if (running) {
		s = STMT_ARGS(
		        c,
		        "SELECT EXISTS (SELECT 1 FROM acceptance_results WHERE run_id = ?1 AND "
		        "node_id = ?2 AND check_name IN ('fabric', 'nccl') AND state IN "
		        "('pending', 'running')) AND EXISTS (SELECT 1 FROM jobs WHERE type = "
		        "'acceptance' AND state IN ('queued', 'running') AND node_id = ?2 AND "
		        "json_extract(params, '$.run') = ?3)",
		        run_id, node_id, run);
		if ((e = store_one(c, s, "holds")) != RP_ERR_OK)
			goto out;
		h = sql_int(s, 0);
		sql_reset(s);
	}
	*hold = h;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	return e;
}
