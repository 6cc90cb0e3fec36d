/* Sensors and rack power: /v1/nodes/{node}/sensors[/history], /v1/racks/{rack}/power[/history],
 * /v1/power and /v1/sensors/sync (docs/power.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define DAY_MS        (24LL * 3600 * 1000)
#define HISTORY_LIMIT 10000  /* samples per answer by default */
#define HISTORY_MAX   100000 /* and at most */

/* since (default: a day before until) and until (default: now) from the query: 0, or -1 with
 * 400 replied (malformed, or since not before until). */
static int
time_range(struct rp_api_req *rq, struct rp_api_resp *rs, int64_t *since, int64_t *until)
{
	int64_t u = rp_time_now_ms() + 1, s;
	int r;

	if (rp_api_query_time(rq, rs, "until", &u) < 0)
		return -1;
	s = u - DAY_MS;
	if ((r = rp_api_query_time(rq, rs, "since", &s)) < 0)
		return -1;
	if (s >= u) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "since must be before until");
		return -1;
	}
	*since = s;
	*until = u;
	return 0;
}

void
rp_api_nodes_sensors(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {NULL};
	json_t *out = NULL;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0)
		return;
	e = rp_store_node_sensors(rq->api->store, rq->params[0], &out);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_nodes_sensor_history(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {"sensor", "since", "until", "limit", NULL};
	const char *sensor = json_string_value(json_object_get(rq->query, "sensor"));
	const char *lim = json_string_value(json_object_get(rq->query, "limit"));
	int64_t since, until;
	long limit = HISTORY_LIMIT;
	json_t *out = NULL;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0 || time_range(rq, rs, &since, &until) < 0)
		return;
	if (sensor == NULL || !*sensor || strlen(sensor) > 63) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY,
		              "sensor must name one of the node's sensors (as GET "
		              "/v1/nodes/{node}/sensors lists them)");
		return;
	}
	if (lim) {
		char *end;

		errno = 0;
		limit = strtol(lim, &end, 10);
		if (errno || end == lim || *end || limit < 1 || limit > HISTORY_MAX) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY, "limit must be an integer from 1 to %d",
			              HISTORY_MAX);
			return;
		}
	}
	e = rp_store_sensor_history(rq->api->store, rq->params[0], sensor, since, until,
	                            (size_t)limit, &out);
	if (e == RP_ERR_NOT_FOUND) {
		/* Which one is missing: the node, or its sensor. */
		json_t *node = NULL;

		if (rp_store_node_sensors(rq->api->store, rq->params[0], &node) == RP_ERR_OK)
			rp_api_errorf(rs, RP_ERR_NOT_FOUND,
			              "node %s has no sensor '%s' and no samples of it in that "
			              "time",
			              rq->params[0], sensor);
		else
			rp_api_errorf(rs, RP_ERR_NOT_FOUND, "no such node");
		json_decref(node);
		return;
	}
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_racks_power(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {NULL};
	json_t *out = NULL;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0)
		return;
	e = rp_store_rack_power(rq->api->store, rq->params[0], &out);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such rack");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_racks_power_history(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {"since", "until", NULL};
	int64_t since, until;
	json_t *out = NULL;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0 || time_range(rq, rs, &since, &until) < 0)
		return;
	e = rp_store_rack_power_history(rq->api->store, rq->params[0], since, until, &out);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such rack");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_power_overview(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {NULL};
	json_t *out = NULL;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0)
		return;
	e = rp_store_power_overview(rq->api->store, &out);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_sensor_sync_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rs->status = 200;
	rs->body = rp_jobs_sweep_status(rq->api->jobs, RP_SWEEP_SENSORS);
}

void
rp_api_sensor_sync_start(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	enum rp_err e = rp_jobs_sweep_now(rq->api->jobs, RP_SWEEP_SENSORS);

	if (e != RP_ERR_OK) {
		rp_api_errorf(rs, e, "a sensor sync is already running");
		return;
	}
	rs->status = 202;
	rs->body = rp_jobs_sweep_status(rq->api->jobs, RP_SWEEP_SENSORS);
	snprintf(rs->location, sizeof rs->location, "/v1/sensors/sync");
}

/* POST: plan the rack's power caps from its policy and queue a power_cap job per node (the
 * nodes of the rack with a usable BMC, as a batch): 202 {plan, batch}. */
void
rp_api_racks_power_cap(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *plan = NULL, *batch = NULL, *detail = NULL, *job = NULL, *sel = NULL;
	char actor[96];
	enum rp_err e;

	if (rq->body && !(json_is_object(rq->body) && json_object_size(rq->body) == 0)) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST,
		              "power-cap takes no parameters (the rack's power_cap policy says "
		              "what to do; send no body or {})");
		return;
	}
	e = rp_store_power_cap_plan(rq->api->store, rq->params[0], rp_api_actor(rq, actor), &plan,
	                            &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such rack");
		return;
	}
	job = json_pack("{s:s, s:{}, s:b}", "type", rp_job_type_table[RP_JOB_POWER_CAP].name,
	                "params", "mutating", rp_job_type_table[RP_JOB_POWER_CAP].mutating);
	sel = json_pack("{s:s}", "rack", rq->params[0]);
	e = rp_jobs_submit_batch(rq->api->jobs, sel, job, actor, &batch, &detail);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		goto out;
	}
	rs->status = 202;
	snprintf(rs->location, sizeof rs->location, "/v1/batches/%s",
	         json_string_value(json_object_get(batch, "id")));
	rs->body = json_pack("{s:O, s:O}", "plan", plan, "batch", batch);
out:
	json_decref(plan);
	json_decref(batch);
	json_decref(job);
	json_decref(sel);
}

void
rp_api_power_caps(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {"rack", "drift", NULL};
	static const char *const bools[] = {"true", "false", NULL};
	const char *rack = json_string_value(json_object_get(rq->query, "rack"));
	json_t *items = NULL;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0 ||
	    rp_api_query_one_of(rq, rs, "drift", bools) < 0)
		return;
	e = rp_store_power_caps(
	        rq->api->store, rack,
	        !strcmp(json_string_value(json_object_get(rq->query, "drift")) ?: "", "true"),
	        &items);
	if (e == RP_ERR_NOT_FOUND) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "no such rack '%s'", rack);
		return;
	}
	rp_api_reply_items(rs, e, items);
}
