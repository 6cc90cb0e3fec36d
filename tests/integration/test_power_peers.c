/* Sensors, rack power, capping and power-on admission through the real rackpilotd against
 * real BMC peers: OpenIPMI ipmi_sim BMCs with SDR sensors and the DCMI plug-in
 * (tests/ipmi/bmcsim.sh DCMI=1). The sweep reads what the BMCs' files say; a crossing is one
 * event; the "budget" policy's limits are set at the BMCs (their power_limit files say so),
 * and a limit changed behind Rackpilot's back shows as drift at the next read. Admission
 * survives kill -9: the nodes that waited still wait, and each BMC's ops.log (the peer's own
 * count) shows one power-on per node, never two. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NA 8 /* the admission rack's BMCs */

static char run[128], run2[128], conf[160];
static int port, port2;
static const char *args[] = {"--power-sync-interval", "0", "-c", conf, NULL};

/* bmcsim.sh cmd on run (2 BMCs, on) or run2 (NA BMCs, off). */
static int
simx(const char *cmd, const char *dir, int base, int count, int on)
{
	return sh_rc("DCMI=1 CHASSIS_PLUGIN=1 BMC_INITIAL_POWER=%d BMC_SENSOR_POLL_MS=200 "
	             "BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s %.0d %s >/dev/null 2>&1",
	             on, base, rp_test_src, cmd, dir, strcmp(cmd, "start") ? 0 : count,
	             strcmp(cmd, "start") ? "" : "shared");
}

static int
sim(const char *cmd)
{
	return simx(cmd, run, port, 2, 1);
}

static int
setup(void **state)
{
	struct reply r;
	int i;

	(void)state;
	for (i = 0; i < 8; i++) {
		snprintf(run, sizeof run, "/tmp/rp-power-peers-%d-%d", (int)getpid(), i);
		port = free_ports(2);
		sh("rm -rf '%s' && mkdir -p '%s'", run, run);
		if (sim("start") == 0)
			break;
	}
	assert_true(i < 8);
	for (i = 0; i < 8; i++) {
		snprintf(run2, sizeof run2, "/tmp/rp-power-peers-%d-a%d", (int)getpid(), i);
		port2 = free_ports(NA);
		sh("rm -rf '%s' && mkdir -p '%s'", run2, run2);
		if (simx("start", run2, port2, NA, 0) == 0)
			break;
	}
	assert_true(i < 8);
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", run);
	sh("printf '[server]\\npower_on_stagger = 0\\npower_on_stagger_ms = 0\\npower_on_settle "
	   "= 0\\n' > '%s'",
	   conf);
	server_start(&S, NULL, args);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:f}", "name", "ri",
	                      "power_budget_kw", 1.0),
	                 201);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/node-classes/sim", &r, "{s:i}", "max_power_w", 700),
	        201);
	reply_free(&r);
	for (i = 1; i <= 2; i++) {
		char name[8];

		snprintf(name, sizeof name, "i%d", i);
		make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i, s:i}}}",
		          "name", name, "rack", "ri", "node_class", "sim", "bmc", "driver", "ipmi",
		          "address", "127.0.0.1", "port", port + i - 1, "username", "admin",
		          "password", "password", "options", "workarounds", "opensesspriv",
		          "session_timeout_ms", 2000, "retransmission_timeout_ms", 500);
	}
	return 0;
}

static int
teardown(void **state)
{
	sim("stop");
	simx("stop", run2, port2, NA, 0);
	sh("rm -rf '%s' '%s'", run, run2);
	return group_teardown(state);
}

static void
putx(const char *dir, const char *file, const char *text)
{
	sh("printf '%%s\\n' '%s' > '%s/%s.tmp' && mv '%s/%s.tmp' '%s/%s'", text, dir, file, dir,
	   file, dir, file);
}

static void
put(const char *file, const char *text)
{
	putx(run, file, text);
}

static void sync_sensors_n(int nodes);

static void
sync_sensors(void)
{
	sync_sensors_n(2);
}

/* A sensor sweep; nodes: how many answer (the others' BMCs are on a rack not read). */
static void
sync_sensors_n(int nodes)
{
	json_t *st = sensor_sync(&S);

	assert_true(json_integer_value(json_object_get(json_object_get(st, "last"), "ok")) >=
	            nodes);
	json_decref(st);
}

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

static void
test_sweep_reads_ipmi(void **state)
{
	json_t *o, *p;

	(void)state;
	put("bmc1/power_watts", "420");
	put("bmc2/power_watts", "300");
	sync_sensors();
	o = get_json(&S, "/v1/nodes/i1/sensors");
	assert_int_equal((int)json_number_value(json_object_get(o, "power_w")), 420);
	assert_string_equal(jstr(sensor(o, "CPU1 Temp"), "kind"), "cpu");
	assert_int_equal((int)json_number_value(json_object_get(sensor(o, "CPU1 Temp"), "value")),
	                 45);
	assert_int_equal(
	        (int)json_number_value(json_object_get(
	                json_object_get(sensor(o, "CPU1 Temp"), "thresholds"), "upper_warning")),
	        85);
	assert_string_equal(jstr(sensor(o, "NVMe0 Temp"), "kind"), "drive");
	assert_string_equal(jstr(sensor(o, "CPU1 Temp"), "source"), "sdr");
	json_decref(o);
	p = get_json(&S, "/v1/racks/ri/power");
	assert_int_equal((int)json_number_value(json_object_get(p, "measured_w")), 720);
	json_decref(p);

	/* CPU1 of i1 runs into its warning (85): one event, however many reads see it. */
	put("bmc1/sensors/cpu1", "88");
	usleep(600 * 1000); /* ipmi_sim re-reads its files every 200 ms */
	sync_sensors();
	sync_sensors();
	o = get_json(&S, "/v1/nodes/i1/sensors");
	assert_string_equal(jstr(sensor(o, "CPU1 Temp"), "health"), "warning");
	json_decref(o);
	assert_int_equal(count_all(&S, "/v1/events?action=sensor.warning&node=i1"), 1);
	put("bmc1/sensors/cpu1", "45");
	usleep(600 * 1000);
	sync_sensors();
	assert_int_equal(count_all(&S, "/v1/events?action=sensor.cleared&node=i1"), 1);
}

static void
test_caps_at_the_bmc(void **state)
{
	struct reply r;
	json_t *caps, *c;
	char buf[256], batch[64];
	size_t i;
	int k, done = 0;

	(void)state;
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/racks/ri", &r, "{s:s}", "power_cap", "budget"),
	        200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/ri/power-cap", &r, NULL), 202);
	snprintf(batch, sizeof batch, "%s", jstr(json_object_get(r.json, "batch"), "id"));
	reply_free(&r);
	for (k = 0; k < 200 && done < 2; k++) {
		json_t *jobs, *j;
		char path[128];

		usleep(100 * 1000);
		snprintf(path, sizeof path, "/v1/jobs?batch=%s", batch);
		jobs = get_json(&S, path);
		done = 0;
		json_array_foreach(json_object_get(jobs, "items"), i, j) done +=
		        !strcmp(jstr(j, "state"), "succeeded");
		json_decref(jobs);
	}
	assert_int_equal(done, 2);
	/* At the BMC: 800 W shared by two 700 W nameplates, active, logging only. */
	snprintf(buf, sizeof buf, "%s/bmc1/power_limit", run);
	assert_non_null(strstr(slurp(buf, buf, sizeof buf), "400 1 0x11"));
	caps = get_json(&S, "/v1/power/caps?rack=ri");
	json_array_foreach(json_object_get(caps, "items"), i, c)
	{
		assert_int_equal(json_integer_value(json_object_get(c, "bmc_w")), 400);
		assert_false(json_is_true(json_object_get(c, "drift")));
	}
	json_decref(caps);

	/* Someone lowers i2's limit at its BMC: the next read shows the drift. */
	put("bmc2/power_limit", "300 1 0x11 1000 1");
	sync_sensors();
	caps = get_json(&S, "/v1/power/caps?drift=true");
	assert_int_equal(json_array_size(json_object_get(caps, "items")), 1);
	c = json_array_get(json_object_get(caps, "items"), 0);
	assert_string_equal(jstr(c, "node"), "i2");
	assert_int_equal(json_integer_value(json_object_get(c, "bmc_w")), 300);
	assert_int_equal(json_integer_value(json_object_get(c, "target_w")), 400);
	json_decref(caps);

	/* A limit the BMC refuses (its range is 50..4000 W here: make it 500..600). */
	put("bmc1/power_limit_range", "500 600");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/ri/power-cap", &r, NULL), 202);
	snprintf(batch, sizeof batch, "%s", jstr(json_object_get(r.json, "batch"), "id"));
	reply_free(&r);
	{
		char path[128];
		json_t *jobs, *j, *failed = NULL;

		snprintf(path, sizeof path, "/v1/jobs?batch=%s&node=i1", batch);
		for (k = 0; k < 200 && failed == NULL; k++) {
			usleep(100 * 1000);
			jobs = get_json(&S, path);
			j = json_array_get(json_object_get(jobs, "items"), 0);
			if (j && !strcmp(jstr(j, "state"), "failed"))
				failed = json_incref(j);
			json_decref(jobs);
		}
		assert_non_null(failed);
		assert_string_equal(jstr(json_object_get(failed, "error"), "code"),
		                    "power_cap_rejected");
		json_decref(failed);
	}
}

/* The jobs of a batch: how many succeeded, and how many wait (queued, error "waiting"). */
static void
batch_count(const char *batch, int *ok, int *waiting)
{
	char path[160];
	json_t *jobs, *j;
	size_t i;

	*ok = *waiting = 0;
	snprintf(path, sizeof path, "/v1/jobs?batch=%s&limit=100", batch);
	jobs = get_json(&S, path);
	json_array_foreach(json_object_get(jobs, "items"), i, j)
	{
		json_t *err = json_object_get(j, "error");

		*ok += !strcmp(jstr(j, "state"), "succeeded");
		*waiting += !strcmp(jstr(j, "state"), "queued") && err &&
		            !strcmp(jstr(err, "code") ?: "", "waiting");
	}
	json_decref(jobs);
}

static void
wait_batch(const char *batch, int want_ok, int want_wait)
{
	int ok = -1, wt = -1, k;

	for (k = 0; k < 300; k++) {
		batch_count(batch, &ok, &wt);
		if (ok == want_ok && wt == want_wait)
			return;
		usleep(100 * 1000);
	}
	fail_msg("batch: %d succeeded, %d waiting; wanted %d and %d", ok, wt, want_ok, want_wait);
}

/* Power-ons counted at BMC n of run2: the lines "set power 1" of its ops.log. */
static int
power_ons(int n)
{
	char path[256], buf[8192];
	const char *p;
	int count = 0;

	snprintf(path, sizeof path, "%s/bmc%d/ops.log", run2, n);
	for (p = slurp(path, buf, sizeof buf); (p = strstr(p, "set power 1")) != NULL; p++)
		count++;
	return count;
}

/* NA nodes at 1000 W peak in a rack that fits 5 (5 kW at 100 %): a bulk power-on leaves 3
 * waiting; kill -9; after the restart the same 3 still wait and nobody was powered on twice;
 * the draw falls and they come on, once each. */
static void
test_admission_survives_kill9(void **state)
{
	struct reply r;
	char batch[64], path[256];
	int i, on = 0, ok, wt;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:f, s:i}", "name", "ra",
	                      "power_budget_kw", 5.0, "power_limit_pct", 100),
	                 201);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/node-classes/kw", &r, "{s:i}", "max_power_w", 1000),
	        201);
	reply_free(&r);
	for (i = 1; i <= NA; i++) {
		char name[8];

		snprintf(name, sizeof name, "a%d", i);
		snprintf(path, sizeof path, "bmc%d/power_watts", i);
		putx(run2, path, "1000");
		make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i, s:i}}}",
		          "name", name, "rack", "ra", "node_class", "kw", "bmc", "driver", "ipmi",
		          "address", "127.0.0.1", "port", port2 + i - 1, "username", "admin",
		          "password", "password", "options", "workarounds", "opensesspriv",
		          "session_timeout_ms", 2000, "retransmission_timeout_ms", 500);
	}
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "rack", "ra", "target", "on"),
	                 202);
	snprintf(batch, sizeof batch, "%s", jstr(r.json, "id"));
	reply_free(&r);
	wait_batch(batch, 5, 3);

	snprintf(path, sizeof path, "%s", S.dir); /* server_start copies it into S */
	server_stop(&S, SIGKILL);
	server_start(&S, path, args);
	sleep(3); /* the waiting jobs look again, and wait again */
	batch_count(batch, &ok, &wt);
	assert_int_equal(ok, 5);
	assert_int_equal(wt, 3);
	for (i = 1; i <= NA; i++) {
		int n = power_ons(i);

		assert_true(n <= 1);
		on += n;
	}
	assert_int_equal(on, 5);

	/* They settle at 400 W: 2 kW measured, room for the 3 at their peaks. */
	for (i = 1; i <= NA; i++) {
		snprintf(path, sizeof path, "bmc%d/power_watts", i);
		putx(run2, path, "400");
	}
	sync_sensors_n(NA);
	wait_batch(batch, NA, 0);
	for (i = 1; i <= NA; i++)
		assert_int_equal(power_ons(i), 1);
}

/* The Redfish mock (its built-in 8-GPU server, modern and deprecated shapes both served):
 * the sweep reads its draw and GPU temperatures, a GPU running hot is one event, and the
 * "budget" policy's limit lands in EnvironmentMetrics.PowerLimitWatts; one set behind
 * Rackpilot's back shows as drift. */
static void
test_redfish(void **state)
{
	struct mock m;
	struct reply r;
	json_t *o, *st, *caps, *c;
	char batch[64], path[160];
	int k, done = 0;

	(void)state;
	mock_start(&m, 1, NULL);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:f}", "name", "rr",
	                      "power_budget_kw", 10.0),
	                 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name", "rf1", "rack",
	          "rr", "bmc", "driver", "redfish", "address", "127.0.0.1", "port", m.base,
	          "username", "admin", "password", "secret", "options", "scheme", "http");
	sync_sensors_n(1);
	o = get_json(&S, "/v1/nodes/rf1/sensors");
	assert_int_equal((int)json_number_value(json_object_get(o, "power_w")), 6200);
	assert_string_equal(jstr(sensor(o, "GPU3 Temp"), "kind"), "gpu");
	assert_int_equal((int)json_number_value(json_object_get(sensor(o, "GPU3 Temp"), "value")),
	                 63);
	json_decref(o);
	mock_post(&m, 0, "/__mock/sensor",
	          "{\"id\":\"GPU3_Temp\",\"reading\":90,\"thresholds\":{\"UpperCaution\":85,"
	          "\"UpperCritical\":95}}");
	sync_sensors_n(1);
	sync_sensors_n(1);
	o = get_json(&S, "/v1/nodes/rf1/sensors");
	assert_string_equal(jstr(sensor(o, "GPU3 Temp"), "health"), "warning");
	json_decref(o);
	assert_int_equal(count_all(&S, "/v1/events?action=sensor.warning&node=rf1"), 1);

	/* Capping: 10 kW at 80 % for the rack's one node (no nameplate: it takes it all). */
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/racks/rr", &r, "{s:s}", "power_cap", "budget"),
	        200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/rr/power-cap", &r, NULL), 202);
	snprintf(batch, sizeof batch, "%s", jstr(json_object_get(r.json, "batch"), "id"));
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/jobs?batch=%s", batch);
	for (k = 0; k < 200 && !done; k++) {
		json_t *jobs = get_json(&S, path);

		usleep(100 * 1000);
		done = !strcmp(jstr(json_array_get(json_object_get(jobs, "items"), 0), "state"),
		               "succeeded");
		json_decref(jobs);
	}
	assert_true(done);
	st = mock_get(&m, 0, "/__mock/state");
	assert_int_equal(json_integer_value(
	                         json_object_get(json_object_get(st, "power_limit"), "set_point")),
	                 8000);
	assert_string_not_equal(jstr(json_object_get(st, "power_limit"), "control_mode"),
	                        "Disabled");
	json_decref(st);
	mock_post(&m, 0, "/__mock/power_limit", "{\"set_point\":7000}");
	sync_sensors_n(1);
	caps = get_json(&S, "/v1/power/caps?rack=rr");
	c = json_array_get(json_object_get(caps, "items"), 0);
	assert_int_equal(json_integer_value(json_object_get(c, "target_w")), 8000);
	assert_int_equal(json_integer_value(json_object_get(c, "bmc_w")), 7000);
	assert_true(json_is_true(json_object_get(c, "drift")));
	json_decref(caps);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/nodes/rf1", &r, NULL), 204);
	reply_free(&r);
	mock_stop(&m);
}

int
main(void)
{
	if (system("command -v ipmi_sim >/dev/null && command -v cc >/dev/null && test -f "
	           "/usr/include/OpenIPMI/mcserv.h") != 0) {
		fprintf(stderr, "ipmi_sim, cc and libopenipmi-dev are required (sh .ci/deps)\n");
		return getenv("CI") && !strcmp(getenv("CI"), "true") ? 1 : 77;
	}
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_sweep_reads_ipmi),
	        cmocka_unit_test(test_caps_at_the_bmc),
	        cmocka_unit_test(test_admission_survives_kill9),
	        cmocka_unit_test(test_redfish),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
