/* /healthz, /v1, /metrics */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rackpilot/version.h"
#include "api.h"

void
rp_api_healthz(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	char why[600];
	enum rp_err e;

	if (rp_store_ping(rq->api->store) != RP_ERR_OK) {
		rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "database not answering");
		return;
	}
	rs->status = 200;
	/* Reads work but writes do not (full disk, read-only database): still up, degraded. */
	if ((e = rp_store_health(rq->api->store, why, sizeof why)) != RP_ERR_OK) {
		rs->body = json_pack("{s:s, s:s, s:s}", "status", "degraded", "code",
		                     rp_err_code(e), "reason", why);
		return;
	}
	rs->body = json_pack("{s:s}", "status", "ok");
}

void
rp_api_root(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	char ts[RP_TIME_BUF];
	json_t *db = NULL;
	enum rp_err e;

	if ((e = rp_store_about(rq->api->store, &db)) != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 200;
	rs->body = json_pack(
	        "{s:s, s:s, s:s, s:i, s:s, s:[s,s,s,s,s,s,s,s,s,s,s], s:[s,s,s], s:{s:I, s:i}, "
	        "s:{s:s, s:s}, s:b, s:o?, s:o}",
	        "name", "rackpilot", "version", RP_VERSION, "api", RP_API_VERSION, "schema_version",
	        rp_store_schema_version(rq->api->store), "started_at",
	        rp_time_format(rq->api->started_at, ts), "capabilities", "racks", "nodes", "bios",
	        "firmware", "events", "import", "tokens", "metrics", "jobs", "power", "boot",
	        "bmc_drivers", "ipmi", "redfish", "fake", "limits", "max_body",
	        (json_int_t)rq->api->max_body, "page_limit_max", 1000, "you", "name", rq->who->name,
	        "role", rp_api_role_name(rq->who->role), "demo", rq->api->demo, "server",
	        rq->api->jobs ? rp_jobs_server(rq->api->jobs) : NULL, "database", db);
}

/* The label is used at once by the caller's printf, so a per-thread buffer suffices. */
static const char *
route_label(size_t i, void *arg)
{
	static __thread char label[128];

	(void)arg;
	if (i >= rp_api_route_count)
		return "unmatched";
	snprintf(label, sizeof label, "%s %s", rp_api_routes[i].method, rp_api_routes[i].pattern);
	return label;
}

/* A Prometheus label value: backslash, double quote and line feed escaped (sensor names
 * come from BMCs). */
static void
label(struct rp_buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			rp_buf_printf(b, "\\%c", *s);
		else if (*s == '\n')
			rp_buf_append(b, "\\n", 2);
		else
			rp_buf_append(b, s, 1);
	}
}

/* The sensor families: each is read in a pass of its own (a family's samples must be
 * together) and written straight into the answer, so a large fleet's scrape is built once,
 * not gathered and then copied. */
static const struct family {
	const char *type; /* the sensors' type (NULL: every sensor) */
	const char *metric, *help;
	int with_sensor, with_kind;
} families[] = {
        {"power", "rackpilot_node_power_watts", "A node's power draw as its BMC reads it.", 0, 0},
        {"temperature", "rackpilot_node_temperature_celsius", "A node's temperature sensors.", 1,
         1},
        {"fan", "rackpilot_node_fan_rpm", "A node's fans.", 1, 0},
        {"psu", "rackpilot_node_psu_input_watts", "A node's power supplies' input.", 1, 0},
        {NULL, "rackpilot_node_sensor_state", "A sensor's state: 0 ok, 1 warning, 2 critical.", 1,
         0},
};

struct family_pass {
	const struct family *f;
	struct rp_buf *b;
	int head; /* the HELP and TYPE lines are written */
};

static int
sensor_metric(void *arg, const struct rp_sensor_row *r)
{
	struct family_pass *p = arg;
	const struct family *f = p->f;
	struct rp_buf *b = p->b;
	double v = r->value;

	if (f->type == NULL) /* states: every sensor, with a value or not (a failed PSU) */
		v = !strcmp(r->state, "critical") ? 2 : !strcmp(r->state, "warning") ? 1 : 0;
	else if (isnan(v) || (!strcmp(f->type, "power") && strcmp(r->kind, "system") != 0) ||
	         (!strcmp(f->type, "fan") && strcmp(r->unit, "RPM") != 0))
		return 0;
	if (!p->head++)
		rp_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", f->metric, f->help, f->metric);
	rp_buf_printf(b, "%s{node=\"", f->metric);
	label(b, r->node);
	rp_buf_printf(b, "\",rack=\"");
	label(b, r->rack);
	if (f->with_sensor) {
		rp_buf_printf(b, "\",sensor=\"");
		label(b, r->name);
	}
	if (f->with_kind) {
		rp_buf_printf(b, "\",kind=\"");
		label(b, r->kind);
	}
	rp_buf_printf(b, "\"} %.17g\n", v);
	return 0;
}

/* The rack families: metric, member of rp_store_power_overview's racks, help. */
static const char *const rack_family[][3] = {
        {"rackpilot_rack_power_watts", "measured_w",
         "A rack's measured draw: the sum of its nodes' latest readings."},
        {"rackpilot_rack_power_budget_watts", "budget_w", "A rack's power budget."},
        {"rackpilot_rack_power_limit_watts", "limit_w",
         "A rack's limit: its budget times its power_limit_pct."},
        {"rackpilot_rack_power_nameplate_watts", "nameplate_w",
         "The sum of a rack's nodes' classes' max_power_w."},
};

/* Sensor readings and rack power, appended to b. */
static void
power_metrics(struct rp_api_req *rq, struct rp_buf *b)
{
	json_t *all = NULL, *r;
	size_t i, k;

	for (k = 0; k < sizeof families / sizeof *families; k++) {
		struct family_pass p = {.f = &families[k], .b = b};

		(void)rp_store_sensor_rows(rq->api->store, families[k].type, sensor_metric, &p);
	}
	if (rp_store_power_overview(rq->api->store, &all) != RP_ERR_OK)
		return;
	for (k = 0; k < sizeof rack_family / sizeof *rack_family; k++) {
		int head = 0;

		json_array_foreach(json_object_get(all, "racks"), i, r)
		{
			json_t *v = json_object_get(r, rack_family[k][1]);

			if (!json_is_number(v))
				continue;
			if (!head++)
				rp_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n",
				              rack_family[k][0], rack_family[k][2],
				              rack_family[k][0]);
			rp_buf_printf(b, "%s{rack=\"", rack_family[k][0]);
			label(b, json_string_value(json_object_get(r, "rack")));
			rp_buf_printf(b, "\"} %.17g\n", json_number_value(v));
		}
	}
	json_decref(all);
}

void
rp_api_metrics(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_buf b = {0};
	json_t *stats = NULL, *v;
	const char *state;
	enum rp_err e;

	if ((e = rp_store_stats(rq->api->store, &stats)) != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rp_metrics_render(rq->api->metrics, route_label, NULL, &b);
	rp_buf_printf(&b, "# HELP rackpilot_nodes Nodes by provision state.\n"
	                  "# TYPE rackpilot_nodes gauge\n");
	json_object_foreach(json_object_get(stats, "nodes_by_state"), state, v)
	        rp_buf_printf(&b, "rackpilot_nodes{state=\"%s\"} %lld\n", state,
	                      (long long)json_integer_value(v));
	rp_buf_printf(&b,
	              "# HELP rackpilot_racks Racks.\n# TYPE rackpilot_racks gauge\n"
	              "rackpilot_racks %lld\n",
	              (long long)json_integer_value(json_object_get(stats, "racks")));
	rp_buf_printf(&b,
	              "# HELP rackpilot_db_size_bytes Size of the database (the SQLite file, or "
	              "PostgreSQL's).\n"
	              "# TYPE rackpilot_db_size_bytes gauge\nrackpilot_db_size_bytes %lld\n",
	              (long long)json_integer_value(json_object_get(stats, "db_bytes")));
	rp_buf_printf(&b,
	              "# HELP rackpilot_jobs Unfinished jobs by state.\n"
	              "# TYPE rackpilot_jobs gauge\nrackpilot_jobs{state=\"queued\"} %lld\n"
	              "rackpilot_jobs{state=\"running\"} %lld\n",
	              (long long)json_integer_value(
	                      json_object_get(json_object_get(stats, "jobs"), "queued")),
	              (long long)json_integer_value(
	                      json_object_get(json_object_get(stats, "jobs"), "running")));
	rp_buf_printf(&b,
	              "# HELP rackpilot_bmc_faults Nodes whose BMC is marked faulty.\n"
	              "# TYPE rackpilot_bmc_faults gauge\nrackpilot_bmc_faults %lld\n",
	              (long long)json_integer_value(json_object_get(stats, "bmc_faults")));
	rp_buf_printf(&b,
	              "# HELP rackpilot_webhook_deliveries_pending Webhook deliveries waiting (a "
	              "receiver that fails holds its webhook's later ones).\n"
	              "# TYPE rackpilot_webhook_deliveries_pending gauge\n"
	              "rackpilot_webhook_deliveries_pending %lld\n",
	              (long long)json_integer_value(json_object_get(stats, "webhooks_pending")));
	if (rq->api->jobs) {
		json_t *sw = rp_jobs_sweep_status(rq->api->jobs, RP_SWEEP_POWER),
		       *last = json_object_get(sw, "last");

		if (json_is_object(last))
			rp_buf_printf(
			        &b,
			        "# HELP rackpilot_power_sync_last_seconds Duration of the last "
			        "power sweep.\n# TYPE rackpilot_power_sync_last_seconds gauge\n"
			        "rackpilot_power_sync_last_seconds %.3f\n"
			        "# HELP rackpilot_power_sync_last_failed BMCs that did not answer "
			        "the last sweep.\n# TYPE rackpilot_power_sync_last_failed gauge\n"
			        "rackpilot_power_sync_last_failed %lld\n",
			        (double)json_integer_value(json_object_get(last, "duration_ms")) /
			                1000,
			        (long long)json_integer_value(json_object_get(last, "failed")));
		json_decref(sw);
	}
	if (rq->api->jobs) {
		json_t *sv = rp_jobs_server(rq->api->jobs);
		uint64_t ended[RP_JOB_END_RETRY + 1];
		int k;

		rp_jobs_outcomes(rq->api->jobs, ended);
		rp_buf_printf(&b, "# HELP rackpilot_job_outcomes_total Job runs this server ended, "
		                  "by result (retry: back to the queue).\n"
		                  "# TYPE rackpilot_job_outcomes_total counter\n");
		for (k = 0; k <= RP_JOB_END_RETRY; k++)
			rp_buf_printf(&b, "rackpilot_job_outcomes_total{result=\"%s\"} %llu\n",
			              rp_store_job_end_name((enum rp_job_end)k),
			              (unsigned long long)ended[k]);
		rp_buf_printf(
		        &b,
		        "# HELP rackpilot_leader 1 when this server leads those that share its "
		        "database (rollouts, pruning).\n# TYPE rackpilot_leader gauge\n"
		        "rackpilot_leader{server=\"%s\"} %d\n"
		        "# HELP rackpilot_servers_live Servers of this database that this one "
		        "heard from at its latest heartbeat, itself included.\n"
		        "# TYPE rackpilot_servers_live gauge\nrackpilot_servers_live %zu\n",
		        json_string_value(json_object_get(sv, "name")),
		        json_is_true(json_object_get(sv, "leader")),
		        json_array_size(json_object_get(sv, "servers")));
		json_decref(sv);
		{
			struct rp_console_stats cs = {0};

			rp_jobs_console_stats(rq->api->jobs, &cs);
			rp_buf_printf(
			        &b,
			        "# HELP rackpilot_console_sessions Serial console (SOL) sessions "
			        "open, and of them up.\n# TYPE rackpilot_console_sessions gauge\n"
			        "rackpilot_console_sessions{state=\"open\"} %u\n"
			        "rackpilot_console_sessions{state=\"up\"} %u\n"
			        "# HELP rackpilot_console_viewers WebSocket viewers of consoles.\n"
			        "# TYPE rackpilot_console_viewers gauge\nrackpilot_console_viewers "
			        "%u\n# HELP rackpilot_console_lines_total Console lines logged.\n"
			        "# TYPE rackpilot_console_lines_total counter\n"
			        "rackpilot_console_lines_total %llu\n",
			        cs.open, cs.up, cs.viewers, (unsigned long long)cs.lines);
		}
	}
	{
		int open, busy;

		rp_store_connections(rq->api->store, &open, &busy);
		rp_buf_printf(&b,
		              "# HELP rackpilot_db_connections Connections to the database in "
		              "this server's pool (db_connections caps them).\n"
		              "# TYPE rackpilot_db_connections gauge\n"
		              "rackpilot_db_connections{state=\"open\"} %d\n"
		              "rackpilot_db_connections{state=\"busy\"} %d\n",
		              open, busy);
	}
	rp_buf_printf(&b,
	              "# HELP rackpilot_uptime_seconds Seconds since start.\n"
	              "# TYPE rackpilot_uptime_seconds gauge\nrackpilot_uptime_seconds %.3f\n",
	              (double)(rp_time_now_ms() - rq->api->started_at) / 1000.0);
	json_decref(stats);
	if (rq->api->get_cache && rq->api->auth_cache) {
		uint64_t gh, gm, ah, am;

		rp_memo_stats(rq->api->get_cache, &gh, &gm);
		rp_memo_stats(rq->api->auth_cache, &ah, &am);
		rp_buf_printf(
		        &b,
		        "# HELP rackpilot_cache_lookups_total Cache lookups by cache and result.\n"
		        "# TYPE rackpilot_cache_lookups_total counter\n"
		        "rackpilot_cache_lookups_total{cache=\"get\",result=\"hit\"} %llu\n"
		        "rackpilot_cache_lookups_total{cache=\"get\",result=\"miss\"} %llu\n"
		        "rackpilot_cache_lookups_total{cache=\"auth\",result=\"hit\"} %llu\n"
		        "rackpilot_cache_lookups_total{cache=\"auth\",result=\"miss\"} %llu\n",
		        (unsigned long long)gh, (unsigned long long)gm, (unsigned long long)ah,
		        (unsigned long long)am);
	}
	power_metrics(rq, &b);
	rp_api_reply_buf(rs, &b, "text/plain; version=0.0.4; charset=utf-8");
}
