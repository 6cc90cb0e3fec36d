/* Sensors, rack power and power caps (docs/power.md): the views the generic output cannot
 * give (values with their units, thresholds as ranges, watts as kW, admissions in words, a
 * cap plan), the sensor sync followed to its end, and a rack's caps planned and queued. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define POLL_MS  500
#define POLL_MAX 7200 /* an hour of polls: a sweep that long is stuck, not slow */
#define NUM_BUF  32
#define CELL_BUF 128

/* v as a short number: whole numbers without decimals, others with up to two; "" when v is
 * not a number. */
static const char *
num(json_t *v, char *buf, size_t len)
{
	double d = json_number_value(v);
	size_t n;

	buf[0] = '\0';
	if (!json_is_number(v))
		return buf;
	if (d > -1e15 && d < 1e15 && d == (double)(long long)d)
		snprintf(buf, len, "%lld", (long long)d);
	else {
		snprintf(buf, len, "%.2f", d);
		for (n = strlen(buf); n > 0 && buf[n - 1] == '0'; n--)
			buf[n - 1] = '\0';
		if (n > 0 && buf[n - 1] == '.')
			buf[n - 1] = '\0';
	}
	return buf;
}

/* Watts v as kW with two decimals, or "-". */
static const char *
kw(json_t *v, char *buf, size_t len)
{
	if (json_is_number(v))
		snprintf(buf, len, "%.2f", json_number_value(v) / 1000.0);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* A threshold pair as LOWER..UPPER (a side the BMC does not give left empty), or "-". */
static const char *
range(json_t *t, const char *lower, const char *upper, char *buf, size_t len)
{
	char lo[NUM_BUF], hi[NUM_BUF];

	num(json_object_get(t, lower), lo, sizeof lo);
	num(json_object_get(t, upper), hi, sizeof hi);
	if (!lo[0] && !hi[0])
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s..%s", lo, hi);
	return buf;
}

/* The cells of one sensor: strings, as the table prints them. NULL when out of memory. */
static json_t *
sensor_row(json_t *s)
{
	const char *unit = rp_cli_str(s, "unit", "");
	json_t *t = json_object_get(s, "thresholds");
	char v[NUM_BUF], value[CELL_BUF], warn[CELL_BUF], crit[CELL_BUF];

	if (num(json_object_get(s, "value"), v, sizeof v)[0])
		snprintf(value, sizeof value, "%s %s", v, !strcmp(unit, "Cel") ? "C" : unit);
	else
		snprintf(value, sizeof value, "-");
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "name", rp_cli_str(s, "name", "?"),
	                 "type", rp_cli_str(s, "type", "-"), "kind", rp_cli_str(s, "kind", "-"),
	                 "value", value, "health", rp_cli_str(s, "health", "-"), "warn",
	                 range(t, "lower_warning", "upper_warning", warn, sizeof warn), "crit",
	                 range(t, "lower_critical", "upper_critical", crit, sizeof crit));
}

int
rp_cli_sensors(struct rp_cli *c)
{
	char path[1024] = "", line[1024], w[NUM_BUF];
	json_t *o = NULL, *view = NULL, *rows, *s, *row;
	const char *node;
	size_t i;
	int rc = RP_CLI_EAPI;

	if (rp_cli_pathf(path, sizeof path, "/v1/nodes/%s/sensors", c->argv[0]) < 0)
		return rp_cli_usage(c, "argument too long");
	if ((rc = rp_cli_call(c, "GET", path, NULL, &o)) != RP_CLI_OK)
		goto out;
	if (c->json) {
		rp_cli_print_raw(c);
		goto out;
	}
	rc = RP_CLI_EAPI;
	node = rp_cli_str(o, "node", c->argv[0]);
	num(json_object_get(o, "power_w"), w, sizeof w);
	if (json_is_string(json_object_get(o, "read_at")))
		snprintf(line, sizeof line, "node %s: read %s, power %s%s", node,
		         rp_cli_str(o, "read_at", "?"), w[0] ? w : "-", w[0] ? " W" : "");
	else
		snprintf(line, sizeof line, "node %s: never read", node);
	rp_cli_puts_clean(line);
	putchar('\n');
	if (json_is_string(json_object_get(o, "error"))) {
		snprintf(line, sizeof line, "error: %s (tried %s)", rp_cli_str(o, "error", ""),
		         rp_cli_str(o, "tried_at", "?"));
		rp_cli_puts_clean(line);
		putchar('\n');
	}
	if (json_array_size(json_object_get(o, "sensors")) > 0) {
		if ((view = json_object()) == NULL || (rows = json_array()) == NULL ||
		    json_object_set_new(view, "items", rows) < 0)
			goto out;
		json_array_foreach(json_object_get(o, "sensors"), i, s)
		{
			if ((row = sensor_row(s)) == NULL || json_array_append_new(rows, row) < 0)
				goto out;
		}
		putchar('\n');
		if (rp_cli_print(view, ":NAME=name,TYPE=type,KIND=kind,VALUE=value,HEALTH=health,"
		                       "WARN=warn,CRIT=crit") < 0)
			goto out;
	}
	rc = RP_CLI_OK;
out:
	json_decref(view);
	json_decref(o);
	return rc;
}

/* A rack's numbers in kW, as strings (the rack as the API gives it is not changed). */
static json_t *
rack_row(json_t *r)
{
	char m[NUM_BUF], p[NUM_BUF], l[NUM_BUF], b[NUM_BUF], h[NUM_BUF], n[NUM_BUF], pct[NUM_BUF];
	json_t *hp = json_object_get(r, "headroom_pct");

	if (json_is_number(hp))
		snprintf(pct, sizeof pct, "%.1f", json_number_value(hp));
	else
		snprintf(pct, sizeof pct, "-");
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?}", "rack",
	                 rp_cli_str(r, "rack", "?"), "measured",
	                 kw(json_object_get(r, "measured_w"), m, sizeof m), "projected",
	                 kw(json_object_get(r, "projected_w"), p, sizeof p), "limit",
	                 kw(json_object_get(r, "limit_w"), l, sizeof l), "budget",
	                 kw(json_object_get(r, "budget_w"), b, sizeof b), "headroom",
	                 kw(json_object_get(r, "headroom_w"), h, sizeof h), "headroom_pct", pct,
	                 "nameplate", kw(json_object_get(r, "nameplate_w"), n, sizeof n),
	                 "limit_pct", json_object_get(r, "limit_pct"), "over_limit",
	                 json_object_get(r, "over_limit"), "read_at",
	                 json_object_get(r, "read_at"));
}

/* Every rack: a table, then the sums. */
static int
print_overview(json_t *o)
{
	char m[NUM_BUF], b[NUM_BUF], line[256];
	json_t *view = json_object(), *rows = json_array(), *r, *row;
	size_t i;
	int rc = -1;

	if (view == NULL || rows == NULL || json_object_set(view, "items", rows) < 0)
		goto out;
	json_array_foreach(json_object_get(o, "racks"), i, r)
	{
		if ((row = rack_row(r)) == NULL || json_array_append_new(rows, row) < 0)
			goto out;
	}
	if (json_array_size(rows) > 0 &&
	    rp_cli_print(view, ":RACK=rack,MEASURED kW=measured,PROJECTED kW=projected,"
	                       "LIMIT kW=limit,BUDGET kW=budget,HEADROOM kW=headroom,"
	                       "HEADROOM %=headroom_pct,OVER=over_limit,READ=read_at") < 0)
		goto out;
	snprintf(line, sizeof line, "%stotal: %s kW measured, %s kW budget",
	         json_array_size(rows) > 0 ? "\n" : "",
	         kw(json_object_get(o, "measured_w"), m, sizeof m),
	         kw(json_object_get(o, "budget_w"), b, sizeof b));
	puts(line);
	rc = 0;
out:
	json_decref(rows);
	json_decref(view);
	return rc;
}

/* Watts v as "N.NN kW", or "-". */
static const char *
kw_unit(json_t *v, char *buf, size_t len)
{
	if (json_is_number(v))
		snprintf(buf, len, "%.2f kW", json_number_value(v) / 1000.0);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* A node's power-on admission in a word or two: "-" (none), "in flight" (its power-on
 * command has not come back), "unmeasured" (it has: its peak counts until a read measures
 * it), and ", forced" when an admin forced it. */
static const char *
admission(json_t *a)
{
	int forced = json_is_true(json_object_get(a, "forced"));

	if (!json_is_object(a))
		return "-";
	if (json_is_string(json_object_get(a, "started_at")))
		return forced ? "unmeasured, forced" : "unmeasured";
	return forced ? "in flight, forced" : "in flight";
}

/* One rack: its numbers as KEY VALUE lines, then its nodes. */
static int
print_rack(json_t *o)
{
	char b[CELL_BUF], l[CELL_BUF], m[CELL_BUF], h[CELL_BUF], p[CELL_BUF], n[CELL_BUF],
	        w[NUM_BUF], mx[NUM_BUF];
	json_t *view = NULL, *rows = NULL, *x, *row, *hp = json_object_get(o, "headroom_pct");
	size_t i;
	int rc = -1;

	kw_unit(json_object_get(o, "headroom_w"), h, sizeof h);
	if (json_is_number(hp))
		snprintf(h + strlen(h), sizeof h - strlen(h), " (%.1f %% of the budget)",
		         json_number_value(hp));
	if ((view = json_pack("{s:O, s:s, s:O, s:s, s:s, s:s, s:O, s:s, s:s, s:O, s:O}", "rack",
	                      json_object_get(o, "rack"), "budget",
	                      kw_unit(json_object_get(o, "budget_w"), b, sizeof b), "limit_pct",
	                      json_object_get(o, "limit_pct"), "limit",
	                      kw_unit(json_object_get(o, "limit_w"), l, sizeof l), "measured",
	                      kw_unit(json_object_get(o, "measured_w"), m, sizeof m), "projected",
	                      kw_unit(json_object_get(o, "projected_w"), p, sizeof p), "admitted",
	                      json_object_get(o, "admitted"), "headroom", h, "nameplate",
	                      kw_unit(json_object_get(o, "nameplate_w"), n, sizeof n), "over_limit",
	                      json_object_get(o, "over_limit"), "read_at",
	                      json_object_get(o, "read_at"))) == NULL)
		goto out;
	if (rp_cli_print(view, ".") < 0)
		goto out;
	if (json_array_size(json_object_get(o, "nodes")) == 0) {
		rc = 0;
		goto out;
	}
	if ((rows = json_array()) == NULL || json_object_set(view, "nodes", rows) < 0)
		goto out;
	json_array_foreach(json_object_get(o, "nodes"), i, x)
	{
		num(json_object_get(x, "watts"), w, sizeof w);
		num(json_object_get(x, "max_power_w"), mx, sizeof mx);
		row = json_pack("{s:O, s:O, s:s, s:s, s:s, s:O, s:O}", "node",
		                json_object_get(x, "node"), "class", json_object_get(x, "class"),
		                "watts", w[0] ? w : "-", "max", mx[0] ? mx : "-", "admission",
		                admission(json_object_get(x, "admission")), "read_at",
		                json_object_get(x, "read_at"), "error",
		                json_object_get(x, "error"));
		if (row == NULL || json_array_append_new(rows, row) < 0)
			goto out;
	}
	putchar('\n');
	if (rp_cli_print(view, "nodes:NODE=node,CLASS=class,WATTS=watts,MAX W=max,"
	                       "ADMISSION=admission,READ=read_at,ERROR=error") < 0)
		goto out;
	rc = 0;
out:
	json_decref(rows);
	json_decref(view);
	return rc;
}

int
rp_cli_power_show(struct rp_cli *c)
{
	char path[1024] = "";
	json_t *o = NULL;
	int rc;

	if ((c->argc ? rp_cli_pathf(path, sizeof path, "/v1/racks/%s/power", c->argv[0])
	             : rp_cli_pathf(path, sizeof path, "/v1/power")) < 0)
		return rp_cli_usage(c, "argument too long");
	if ((rc = rp_cli_call(c, "GET", path, NULL, &o)) != RP_CLI_OK)
		goto out;
	if (c->json)
		rp_cli_print_raw(c);
	else if ((c->argc ? print_rack(o) : print_overview(o)) < 0) {
		fprintf(stderr, "rackpilot: out of memory\n");
		rc = RP_CLI_EAPI;
	}
out:
	json_decref(o);
	return rc;
}

int
rp_cli_sensors_sync(struct rp_cli *c)
{
	json_t *o = NULL;
	int rc, polls = 0;

	if ((rc = rp_cli_call(c, "POST", "/v1/sensors/sync", NULL, &o)) != RP_CLI_OK)
		goto out;
	if (!rp_cli_opt(c, "wait")) {
		if (c->json)
			rp_cli_print_raw(c);
		else
			puts("sensor sync started");
		goto out;
	}
	while (json_is_true(json_object_get(o, "running"))) {
		if (++polls > POLL_MAX) {
			fprintf(stderr, "rackpilot: the sensor sync did not end within an hour\n");
			rc = RP_CLI_EAPI;
			goto out;
		}
		rp_cli_sleep_ms(POLL_MS);
		json_decref(o);
		o = NULL;
		if ((rc = rp_cli_call(c, "GET", "/v1/sensors/sync", NULL, &o)) != RP_CLI_OK)
			goto out;
	}
	if (c->json)
		rp_cli_print_raw(c);
	else
		rp_cli_print_line(
		        "sensor sync: {last.nodes} nodes, {last.ok} answered, {last.failed} "
		        "failed, {last.events} events ({last.duration_ms} ms)",
		        o, NULL);
	/* A BMC that did not answer is a node that failed, as in a bulk action. */
	rc = json_integer_value(rp_cli_get(o, "last.failed")) > 0 ? RP_CLI_EPARTIAL : RP_CLI_OK;
out:
	json_decref(o);
	return rc;
}

/* The plan as a table of strings (a removed limit: "none"). NULL when out of memory. */
static json_t *
plan_view(json_t *plan)
{
	json_t *view = json_object(), *rows = json_array(), *t, *row;
	char w[NUM_BUF];
	size_t i;

	if (view == NULL || rows == NULL || json_object_set(view, "items", rows) < 0)
		goto fail;
	json_array_foreach(json_object_get(plan, "targets"), i, t)
	{
		num(json_object_get(t, "target_w"), w, sizeof w);
		row = json_pack("{s:s, s:s}", "node", rp_cli_str(t, "node", "?"), "target",
		                w[0] ? w : "none");
		if (row == NULL || json_array_append_new(rows, row) < 0)
			goto fail;
	}
	json_decref(rows);
	return view;
fail:
	json_decref(rows);
	json_decref(view);
	return NULL;
}

int
rp_cli_power_cap(struct rp_cli *c)
{
	char path[1024] = "", line[512];
	json_t *o = NULL, *plan, *batch, *view = NULL, *v;
	size_t i;
	int rc;

	if (rp_cli_pathf(path, sizeof path, "/v1/racks/%s/power-cap", c->argv[0]) < 0)
		return rp_cli_usage(c, "argument too long");
	if ((rc = rp_cli_call(c, "POST", path, NULL, &o)) != RP_CLI_OK)
		goto out;
	plan = json_object_get(o, "plan");
	batch = json_object_get(o, "batch");
	if (c->json) {
		/* With --wait, the finished batch (as a bulk power action prints it). */
		if (rp_cli_opt(c, "wait"))
			rc = rp_cli_batch_follow(c, batch);
		else
			rp_cli_print_raw(c);
		goto out;
	}
	snprintf(line, sizeof line, "power caps of rack %s planned (policy %s): %zu node(s)",
	         rp_cli_str(plan, "rack", c->argv[0]), rp_cli_str(plan, "policy", "?"),
	         json_array_size(json_object_get(plan, "targets")));
	rp_cli_puts_clean(line);
	putchar('\n');
	if (json_array_size(json_object_get(plan, "targets")) > 0) {
		if ((view = plan_view(plan)) == NULL) {
			fprintf(stderr, "rackpilot: out of memory\n");
			rc = RP_CLI_EAPI;
			goto out;
		}
		putchar('\n');
		if (rp_cli_print(view, ":NODE=node,TARGET W=target") < 0) {
			rc = RP_CLI_EAPI;
			goto out;
		}
		putchar('\n');
	}
	if (rp_cli_opt(c, "wait")) {
		rc = rp_cli_batch_follow(c, batch);
		goto out;
	}
	rp_cli_print_line("batch {id} queued: {jobs} power_cap jobs", batch, NULL);
	json_array_foreach(json_object_get(batch, "skipped"), i, v)
	{
		fprintf(stderr, "rackpilot: skipped %s: %s\n", rp_cli_str(v, "node", "?"),
		        rp_cli_str(v, "reason", "?"));
	}
out:
	json_decref(view);
	json_decref(o);
	return rc;
}

int
rp_cli_power_caps(struct rp_cli *c)
{
	const char *rack = rp_cli_opt(c, "rack");
	int drift = rp_cli_opt(c, "drift") != NULL;
	char path[1024] = "/v1/power/caps", line[256];
	json_t *o = NULL;
	int rc;

	if (rp_cli_query(path, sizeof path, "rack", rack) < 0 ||
	    rp_cli_query(path, sizeof path, "drift", drift ? "true" : NULL) < 0)
		return rp_cli_usage(c, "argument too long");
	if ((rc = rp_cli_call(c, "GET", path, NULL, &o)) != RP_CLI_OK)
		goto out;
	if (c->json) {
		rp_cli_print_raw(c);
		goto out;
	}
	if (json_array_size(json_object_get(o, "items")) == 0) {
		snprintf(line, sizeof line, "%s%s%s",
		         drift ? "no node drifts from its planned power cap"
		               : "no power cap planned",
		         rack ? " in rack " : "", rack ? rack : "");
		rp_cli_puts_clean(line);
		putchar('\n');
		goto out;
	}
	if (rp_cli_print(o, ":NODE=node,RACK=rack,TARGET W=target_w,BMC W=bmc_w,ACTIVE=bmc_active,"
	                    "DRIFT=drift,READ=read_at,ERROR=error") < 0)
		rc = RP_CLI_EAPI;
out:
	json_decref(o);
	return rc;
}
