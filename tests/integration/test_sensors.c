/* Sensors and rack power through the real rackpilotd, on fake-driver nodes whose draw and
 * inlet temperature the test sets through their BMC options: the sensor sweep records the
 * latest values, a history that samples only what moved, each rack's draw against its
 * budget, and an event per crossing of a threshold or a rack's limit, each way; /metrics
 * carries every reading and promtool accepts it; every bad request is a 4xx that changes
 * nothing. (The drivers' reads against real BMC peers: test_sensors_ipmi, test_sensors_redfish.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char tmp[128];

static int
have(const char *tool)
{
	char cmd[200];

	snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static int
setup(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	struct reply r;

	(void)state;
	snprintf(tmp, sizeof tmp, "/tmp/rp-sensors-%d", (int)getpid());
	sh("rm -rf '%s' && mkdir -m 700 '%s'", tmp, tmp);
	server_start(&S, NULL, args);
	/* 1 kW at 80 %: an 800 W limit. Nodes of class gx draw at most 700 W. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:f, s:i}", "name", "r1",
	                      "power_budget_kw", 1.0, "power_limit_pct", 80),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gx", &r, "{s:i, s:i}",
	                      "max_power_w", 700, "idle_power_w", 100),
	                 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:i, s:s, s:{s:s, s:{s:i}}}", "name", "n1", "rack", "r1",
	          "u_position", 1, "node_class", "gx", "bmc", "driver", "fake", "options",
	          "power_w", 600);
	make_node(&S, "{s:s, s:s, s:i, s:s, s:{s:s, s:{s:i}}}", "name", "n2", "rack", "r1",
	          "u_position", 3, "node_class", "gx", "bmc", "driver", "fake", "options",
	          "power_w", 600);
	return 0;
}

static int
teardown(void **state)
{
	sh("rm -rf '%s'", tmp);
	return group_teardown(state);
}

/* Run a sensor sweep now and wait for its end. */
static void
sync_sensors(void)
{
	json_t *st = sensor_sync(&S);

	assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "last"), "failed")),
	                 0);
	json_decref(st);
}

/* Power node; force: past its rack's power-on admission (docs/power.md), as the test wants
 * the rack over its limit. */
static void
power(const char *node, const char *action, int force)
{
	struct reply r;
	char path[128];
	json_t *job;

	snprintf(path, sizeof path, "/v1/nodes/%s/power", node);
	assert_int_equal(
	        call(&S, S.admin, "PUT", path, &r, "{s:s, s:b}", "target", action, "force", force),
	        202);
	job = wait_job(&S, jstr(r.json, "id"), 30);
	assert_string_equal(jstr(job, "state"), "succeeded");
	json_decref(job);
	reply_free(&r);
}

static void
bmc_option(const char *node, const char *opt, int v)
{
	struct reply r;
	char path[128];

	snprintf(path, sizeof path, "/v1/nodes/%s", node);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", path, &r, "{s:{s:{s:i}}}", "bmc", "options", opt, v),
	        200);
	reply_free(&r);
}

static long
events(const char *action)
{
	char path[160];

	snprintf(path, sizeof path, "/v1/events?action=%s", action);
	return count_all(&S, path);
}

/* The sensor named name in a GET /v1/nodes/{node}/sensors answer. */
static json_t *
sensor(json_t *o, const char *name)
{
	json_t *s;
	size_t i;

	json_array_foreach(json_object_get(o, "sensors"), i, s)
	{
		if (!strcmp(jstr(s, "name"), name))
			return s;
	}
	fail_msg("no sensor %s", name);
	return NULL;
}

static double
num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_number(v))
		fail_msg("%s is not a number", key);
	return json_number_value(v);
}

static void
test_read_and_rack_power(void **state)
{
	json_t *o, *p;

	(void)state;
	/* Never read: no values, not an error. */
	o = get_json(&S, "/v1/nodes/n1/sensors");
	assert_true(json_is_null(json_object_get(o, "read_at")));
	assert_int_equal(json_array_size(json_object_get(o, "sensors")), 0);
	json_decref(o);
	p = get_json(&S, "/v1/racks/r1/power");
	assert_true(json_is_null(json_object_get(p, "measured_w")));
	assert_int_equal((int)num(p, "nameplate_w"), 1400);
	json_decref(p);

	power("n1", "on", 0);
	sync_sensors();
	o = get_json(&S, "/v1/nodes/n1/sensors");
	assert_int_equal((int)num(o, "power_w"), 600);
	assert_int_equal((int)num(sensor(o, "System Power"), "value"), 600);
	assert_string_equal(jstr(sensor(o, "System Power"), "type"), "power");
	assert_string_equal(jstr(sensor(o, "System Power"), "kind"), "system");
	assert_string_equal(jstr(sensor(o, "Inlet Temp"), "unit"), "Cel");
	assert_string_equal(jstr(sensor(o, "Inlet Temp"), "health"), "ok");
	assert_int_equal(
	        (int)num(json_object_get(sensor(o, "Inlet Temp"), "thresholds"), "upper_warning"),
	        40);
	assert_string_equal(jstr(sensor(o, "Inlet Temp"), "source"), "fake");
	assert_non_null(jstr(sensor(o, "Inlet Temp"), "read_at"));
	json_decref(o);

	/* n1 on (600 W) and n2 off (15 W): 615 of an 800 W limit. */
	p = get_json(&S, "/v1/racks/r1/power");
	assert_int_equal((int)num(p, "budget_w"), 1000);
	assert_int_equal((int)num(p, "limit_pct"), 80);
	assert_int_equal((int)num(p, "limit_w"), 800);
	assert_int_equal((int)num(p, "measured_w"), 615);
	assert_int_equal((int)num(p, "headroom_w"), 185);
	assert_int_equal((int)(num(p, "headroom_pct") * 10), 185);
	assert_false(json_is_true(json_object_get(p, "over_limit")));
	assert_int_equal(json_array_size(json_object_get(p, "nodes")), 2);
	json_decref(p);
	assert_int_equal(events("rack.power_over_limit"), 0);

	/* Both on (n2 by force: its peak does not fit): 1200 W, over the limit: one event,
	 * however many sweeps see it. */
	power("n2", "on", 1);
	sync_sensors();
	sync_sensors();
	p = get_json(&S, "/v1/racks/r1/power");
	assert_int_equal((int)num(p, "measured_w"), 1200);
	assert_int_equal((int)num(p, "headroom_w"), -400);
	assert_true(json_is_true(json_object_get(p, "over_limit")));
	json_decref(p);
	assert_int_equal(events("rack.power_over_limit"), 1);
	p = get_json(&S, "/v1/power");
	assert_int_equal(json_array_size(json_object_get(p, "racks")), 1);
	assert_int_equal((int)num(p, "measured_w"), 1200);
	json_decref(p);

	/* A draw that falls back under the limit clears it, once. */
	bmc_option("n2", "power_w", 100);
	sync_sensors();
	sync_sensors();
	p = get_json(&S, "/v1/racks/r1/power");
	assert_int_equal((int)num(p, "measured_w"), 700);
	assert_false(json_is_true(json_object_get(p, "over_limit")));
	json_decref(p);
	assert_int_equal(events("rack.power_over_limit"), 1);
	assert_int_equal(events("rack.power_ok"), 1);
	p = get_json(&S, "/v1/racks/r1/power/history");
	assert_true(json_array_size(json_object_get(p, "samples")) >= 1);
	assert_int_equal((int)num(json_array_get(json_object_get(p, "samples"), 0), "peak_w"),
	                 1200);
	json_decref(p);
}

static void
test_thresholds_once_per_crossing(void **state)
{
	json_t *o;

	(void)state;
	sync_sensors();
	assert_int_equal(events("sensor.warning"), 0);
	bmc_option("n1", "inlet_c", 41);
	sync_sensors();
	sync_sensors();
	o = get_json(&S, "/v1/nodes/n1/sensors");
	assert_string_equal(jstr(sensor(o, "Inlet Temp"), "health"), "warning");
	json_decref(o);
	assert_int_equal(events("sensor.warning"), 1);
	bmc_option("n1", "inlet_c", 46);
	sync_sensors();
	assert_int_equal(events("sensor.critical"), 1);
	bmc_option("n1", "inlet_c", 24);
	sync_sensors();
	sync_sensors();
	assert_int_equal(events("sensor.warning"), 1);
	assert_int_equal(events("sensor.critical"), 1);
	assert_int_equal(events("sensor.cleared"), 1);
	o = get_json(&S, "/v1/nodes/n1/sensors");
	assert_string_equal(jstr(sensor(o, "Inlet Temp"), "health"), "ok");
	json_decref(o);
}

static void
test_history(void **state)
{
	json_t *h, *s;
	size_t i, before;
	struct reply r;

	(void)state;
	h = get_json(&S, "/v1/nodes/n1/sensors/history?sensor=Inlet%20Temp");
	assert_string_equal(jstr(h, "unit"), "Cel");
	/* 24, 41, 46, 24: a sample each time it moved, none for the sweeps that saw the same. */
	assert_int_equal(json_array_size(json_object_get(h, "samples")), 4);
	{
		static const int want[] = {24, 41, 46, 24};

		json_array_foreach(json_object_get(h, "samples"), i, s)
		        assert_int_equal((int)num(s, "value"), want[i]);
	}
	before = json_array_size(json_object_get(h, "samples"));
	json_decref(h);
	sync_sensors();
	h = get_json(&S, "/v1/nodes/n1/sensors/history?sensor=Inlet%20Temp");
	assert_int_equal(json_array_size(json_object_get(h, "samples")), before);
	json_decref(h);
	h = get_json(&S, "/v1/nodes/n1/sensors/history?sensor=Inlet%20Temp&limit=2");
	assert_int_equal(json_array_size(json_object_get(h, "samples")), 2);
	assert_true(json_is_true(json_object_get(h, "truncated")));
	json_decref(h);
	/* A window in the past: nothing, but the sensor exists, so not an error. */
	h = get_json(&S, "/v1/nodes/n1/sensors/history?sensor=Inlet%20Temp&since=1000000000&"
	                 "until=1000003600");
	assert_int_equal(json_array_size(json_object_get(h, "samples")), 0);
	json_decref(h);
	assert_int_equal(
	        call(&S, S.admin, "GET", "/v1/nodes/n1/sensors/history?sensor=Nope", &r, NULL),
	        404);
	assert_error(&r, 404, "NOT_FOUND");
	reply_free(&r);
}

static void
test_metrics(void **state)
{
	struct reply r;
	char path[200];
	FILE *f;

	(void)state;
	assert_int_equal(req(&S, S.admin, "GET", "/metrics", NULL, NULL, 0, NULL, &r), 200);
	assert_non_null(
	        strstr(r.body, "rackpilot_node_power_watts{node=\"n1\",rack=\"r1\"} 600\n"));
	assert_non_null(strstr(r.body, "rackpilot_node_temperature_celsius{node=\"n1\",rack=\"r1\","
	                               "sensor=\"Inlet Temp\",kind=\"inlet\"} 24\n"));
	assert_non_null(strstr(r.body, "rackpilot_rack_power_watts{rack=\"r1\"} 700\n"));
	assert_non_null(strstr(r.body, "rackpilot_rack_power_budget_watts{rack=\"r1\"} 1000\n"));
	assert_non_null(strstr(r.body, "rackpilot_rack_power_limit_watts{rack=\"r1\"} 800\n"));
	assert_non_null(strstr(r.body, "rackpilot_node_sensor_state{node=\"n1\",rack=\"r1\","
	                               "sensor=\"Inlet Temp\"} 0\n"));
	snprintf(path, sizeof path, "%s/metrics.txt", tmp);
	assert_non_null(f = fopen(path, "w"));
	fwrite(r.body, 1, r.len, f);
	fclose(f);
	reply_free(&r);
	if (have("promtool"))
		sh("promtool check metrics < '%s' > '%s/promtool.log' 2>&1 || { cat "
		   "'%s/promtool.log'; exit 1; }",
		   path, tmp, tmp);
	else if (getenv("CI") && !strcmp(getenv("CI"), "true"))
		fail_msg("promtool (package prometheus) is required");
}

/* Every bad request: a 4xx with a JSON error, and nothing changed. */
static void
test_bad_requests(void **state)
{
	static const struct {
		const char *method, *path, *body;
		long status;
		const char *code;
	} bad[] = {
	        {"GET", "/v1/nodes/n1/sensors/history", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/nodes/n1/sensors/history?sensor=", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/nodes/n1/sensors/history?sensor=x&since=yesterday", NULL, 400,
	         "BAD_QUERY"},
	        {"GET", "/v1/nodes/n1/sensors/history?sensor=x&since=2000&until=1000", NULL, 400,
	         "BAD_QUERY"},
	        {"GET", "/v1/nodes/n1/sensors/history?sensor=x&limit=0", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/nodes/n1/sensors/history?sensor=x&limit=1x", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/nodes/n1/sensors?x=1", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/nodes/none/sensors", NULL, 404, "NOT_FOUND"},
	        {"GET", "/v1/nodes/none/sensors/history?sensor=x", NULL, 404, "NOT_FOUND"},
	        {"GET", "/v1/racks/none/power", NULL, 404, "NOT_FOUND"},
	        {"GET", "/v1/racks/none/power/history", NULL, 404, "NOT_FOUND"},
	        {"GET", "/v1/power?rack=r1", NULL, 400, "BAD_QUERY"},
	        {"PATCH", "/v1/racks/r1", "{\"power_limit_pct\":0}", 400, "INVALID_FIELD"},
	        {"PATCH", "/v1/racks/r1", "{\"power_limit_pct\":101}", 400, "INVALID_FIELD"},
	        {"PATCH", "/v1/racks/r1", "{\"power_limit_pct\":\"80\"}", 400, "INVALID_FIELD"},
	        {"PUT", "/v1/node-classes/gx", "{\"max_power_w\":100,\"idle_power_w\":200}", 400,
	         "INVALID_FIELD"},
	        {"PUT", "/v1/node-classes/gx", "{\"max_power_w\":-1}", 400, "INVALID_FIELD"},
	        {"PATCH", "/v1/nodes/n1", "{\"bmc\":{\"options\":{\"power_w\":-5}}}", 400,
	         "INVALID_FIELD"},
	};
	char viewer[128];
	struct reply r;
	json_t *before, *after;
	size_t i;

	(void)state;
	before = json_pack("[o, o, o]", get_json(&S, "/v1/racks/r1"),
	                   get_json(&S, "/v1/node-classes/gx"), get_json(&S, "/v1/nodes/n1"));
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		long st = req(&S, S.admin, bad[i].method, bad[i].path,
		              bad[i].body ? "application/json" : NULL, bad[i].body,
		              bad[i].body ? strlen(bad[i].body) : 0, NULL, &r);

		if (st != bad[i].status)
			fail_msg("%s %s: %ld, wanted %ld", bad[i].method, bad[i].path, st,
			         bad[i].status);
		assert_error(&r, bad[i].status, bad[i].code);
		reply_free(&r);
	}
	after = json_pack("[o, o, o]", get_json(&S, "/v1/racks/r1"),
	                  get_json(&S, "/v1/node-classes/gx"), get_json(&S, "/v1/nodes/n1"));
	assert_true(json_equal(before, after));
	json_decref(before);
	json_decref(after);
	/* A viewer reads, but does not start sweeps. */
	make_token(&S, "viewer", viewer);
	assert_int_equal(call(&S, viewer, "GET", "/v1/racks/r1/power", &r, NULL), 200);
	reply_free(&r);
	assert_int_equal(call(&S, viewer, "POST", "/v1/sensors/sync", &r, NULL), 403);
	reply_free(&r);
}

/* The power of the batch's jobs: all succeeded. */
static void
wait_batch_ok(const char *batch, int n)
{
	char path[160];
	json_t *jobs, *j;
	size_t i;
	int k, done = 0;

	snprintf(path, sizeof path, "/v1/jobs?batch=%s", batch);
	for (k = 0; k < 100 && done < n; k++) {
		usleep(100 * 1000);
		jobs = get_json(&S, path);
		done = 0;
		json_array_foreach(json_object_get(jobs, "items"), i, j)
		{
			if (!strcmp(jstr(j, "state"), "succeeded"))
				done++;
			else if (strcmp(jstr(j, "state"), "queued") &&
			         strcmp(jstr(j, "state"), "running"))
				fail_msg("job %s: %s", jstr(j, "id"), jstr(j, "state"));
		}
		json_decref(jobs);
	}
	assert_int_equal(done, n);
}

/* Capping: the "budget" policy shares the rack's 800 W limit between its two nodes in
 * proportion to their classes' 700 W nameplates, sets it at their BMCs and reads it back;
 * the capped draw shows in the next read; "off" removes the limits. */
static void
test_caps(void **state)
{
	struct reply r;
	json_t *caps, *c, *o;
	size_t i;

	(void)state;
	/* No policy yet: a plan of "off" for both. */
	caps = get_json(&S, "/v1/power/caps");
	assert_int_equal(json_array_size(json_object_get(caps, "items")), 0);
	json_decref(caps);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/racks/r1", &r, "{s:s}", "power_cap", "budget"),
	        200);
	reply_free(&r);
	if (call(&S, S.admin, "POST", "/v1/racks/r1/power-cap", &r, NULL) != 202)
		fail_msg("power-cap: %ld %s", r.status, r.body);
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(r.json, "plan"), "targets")), 2);
	{
		char batch[64];

		snprintf(batch, sizeof batch, "%s", jstr(json_object_get(r.json, "batch"), "id"));
		reply_free(&r);
		wait_batch_ok(batch, 2);
	}
	caps = get_json(&S, "/v1/power/caps?rack=r1");
	assert_int_equal(json_array_size(json_object_get(caps, "items")), 2);
	json_array_foreach(json_object_get(caps, "items"), i, c)
	{
		assert_int_equal(json_integer_value(json_object_get(c, "target_w")), 400);
		assert_int_equal(json_integer_value(json_object_get(c, "bmc_w")), 400);
		assert_true(json_is_true(json_object_get(c, "bmc_active")));
		assert_false(json_is_true(json_object_get(c, "drift")));
	}
	json_decref(caps);
	caps = get_json(&S, "/v1/power/caps?drift=true");
	assert_int_equal(json_array_size(json_object_get(caps, "items")), 0);
	json_decref(caps);
	/* n1 draws 600 W uncapped; capped at 400 W now. */
	sync_sensors();
	o = get_json(&S, "/v1/nodes/n1/sensors");
	assert_int_equal((int)num(o, "power_w"), 400);
	json_decref(o);

	/* A capped node's peak is its cap: n2 (off now) powers on again without force, as
	 * 415 W measured + (400 - 15) fits the 800 W limit where its 700 W nameplate would not. */
	power("n2", "off", 0);
	sync_sensors();
	power("n2", "on", 0);
	assert_int_equal(count_all(&S, "/v1/events?action=power.admission_forced&node=n2"), 1);

	/* Off: the limits go. */
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/racks/r1", &r, "{s:s}", "power_cap", "off"), 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/r1/power-cap", &r, NULL), 202);
	{
		char batch[64];

		snprintf(batch, sizeof batch, "%s", jstr(json_object_get(r.json, "batch"), "id"));
		reply_free(&r);
		wait_batch_ok(batch, 2);
	}
	caps = get_json(&S, "/v1/power/caps?rack=r1");
	json_array_foreach(json_object_get(caps, "items"), i, c)
	{
		assert_true(json_is_null(json_object_get(c, "target_w")));
		assert_false(json_is_true(json_object_get(c, "bmc_active")));
		assert_false(json_is_true(json_object_get(c, "drift")));
	}
	json_decref(caps);
	sync_sensors();
	o = get_json(&S, "/v1/nodes/n1/sensors");
	assert_int_equal((int)num(o, "power_w"), 600);
	json_decref(o);

	/* A "budget" policy needs a budget; a body is refused; no such rack. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:s}", "name", "nob",
	                      "power_cap", "budget"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/nob/power-cap", &r, NULL), 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
	/* A budget but no node: refused before anything is planned (no event). */
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/racks/nob", &r, "{s:i}", "power_budget_kw", 5),
	        200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/nob/power-cap", &r, NULL), 400);
	assert_error(&r, 400, "BAD_REQUEST");
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/racks/r1/power-cap", &r, "{s:i}", "watts", 5), 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/none/power-cap", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/power/caps?drift=maybe", &r, NULL), 400);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/racks/r1", &r, "{s:s}", "power_cap", "half"), 400);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/events?action=rack.power_cap_planned"), 2);
}

/* A node that leaves the rack takes its draw with it at the next sweep; a deleted node's
 * readings go with it. */
static void
test_node_leaves(void **state)
{
	struct reply r;
	json_t *p;

	(void)state;
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/nodes/n2", &r, NULL), 204);
	reply_free(&r);
	sync_sensors();
	p = get_json(&S, "/v1/racks/r1/power");
	assert_int_equal((int)num(p, "measured_w"), 600);
	assert_int_equal(json_array_size(json_object_get(p, "nodes")), 1);
	json_decref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_read_and_rack_power),
	        cmocka_unit_test(test_thresholds_once_per_crossing),
	        cmocka_unit_test(test_history),
	        cmocka_unit_test(test_metrics),
	        cmocka_unit_test(test_bad_requests),
	        cmocka_unit_test(test_caps),
	        cmocka_unit_test(test_node_leaves),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
