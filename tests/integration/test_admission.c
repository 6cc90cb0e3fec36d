/* Power-on admission through the real rackpilotd, on fake-driver nodes: a bulk power-on of 40
 * nodes into a rack whose budget fits 30 at peak leaves 10 waiting, each job saying why, and
 * admits them once the measured draw falls; the stagger spaces power-ons in a rack; force is
 * an admin's alone and is evented. (kill -9 while nodes wait, counted at the BMCs:
 * test_admission_crash, on the Redfish mock.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util/util.h"

static char conf[256], dir[300];

static void
start(const char *settings)
{
	static const char *const args[] = {"--power-sync-interval", "0", "-c", conf, NULL};
	FILE *f = fopen(conf, "w");

	assert_non_null(f);
	fprintf(f, "[server]\n%s", settings);
	fclose(f);
	server_start(&S, dir[0] ? dir : NULL, args);
	snprintf(dir, sizeof dir, "%s", S.dir);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(conf, sizeof conf, "/tmp/rp-admission-%d.conf", (int)getpid());
	start("power_on_stagger = 0\npower_on_stagger_ms = 0\npower_on_settle = 0\n");
	return 0;
}

static int
teardown(void **state)
{
	unlink(conf);
	return group_teardown(state);
}

static void
sync_sensors(void)
{
	json_decref(sensor_sync(&S));
}

/* The jobs of a batch by state: counts into succeeded, waiting (told to wait, error_code
 * "waiting": queued, or running again to look for room, which a loaded machine catches). */
static void
batch_states(const char *batch, int *succeeded, int *waiting, char *why, size_t whylen)
{
	char path[160];
	json_t *jobs, *j;
	size_t i;

	*succeeded = *waiting = 0;
	snprintf(path, sizeof path, "/v1/jobs?batch=%s&limit=100", batch);
	jobs = get_json(&S, path);
	json_array_foreach(json_object_get(jobs, "items"), i, j)
	{
		const char *st = jstr(j, "state");
		json_t *err = json_object_get(j, "error");

		if (!strcmp(st, "succeeded"))
			(*succeeded)++;
		else if ((!strcmp(st, "queued") || !strcmp(st, "running")) && err &&
		         !strcmp(jstr(err, "code") ?: "", "waiting")) {
			(*waiting)++;
			snprintf(why, whylen, "%s", jstr(err, "message"));
		}
	}
	json_decref(jobs);
}

/* Poll until the batch has want_ok succeeded and want_wait waiting (timeout_s). */
static void
wait_batch(const char *batch, int want_ok, int want_wait, int timeout_s, char *why, size_t len)
{
	int ok = -1, wt = -1, i;

	for (i = 0; i < timeout_s * 10; i++) {
		batch_states(batch, &ok, &wt, why, len);
		if (ok == want_ok && wt == want_wait)
			return;
		usleep(100 * 1000);
	}
	fail_msg("batch %s: %d succeeded and %d waiting, wanted %d and %d", batch, ok, wt, want_ok,
	         want_wait);
}

static void
test_budget(void **state)
{
	struct reply r;
	char batch[64], why[256] = "";
	json_t *p;
	int i, ok, wt;

	(void)state;
	/* 30 nodes at 1000 W peak plus 10 idle at 15 W fill 30.15 kW exactly. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:f, s:i}", "name",
	                      "r40", "power_budget_kw", 30.15, "power_limit_pct", 100),
	                 201);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/node-classes/g1k", &r, "{s:i}", "max_power_w", 1000),
	        201);
	reply_free(&r);
	for (i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof name, "a%02d", i);
		make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:{s:i}}}", "name", name, "rack", "r40",
		          "node_class", "g1k", "bmc", "driver", "fake", "options", "power_w", 1000);
	}
	sync_sensors(); /* all off: 40 x 15 W measured */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "rack", "r40", "target", "on"),
	                 202);
	snprintf(batch, sizeof batch, "%s", jstr(r.json, "id"));
	reply_free(&r);
	wait_batch(batch, 30, 10, 60, why, sizeof why);
	if (strstr(why, "waiting: rack r40 projected 31.1 kW of 30.1 kW") == NULL)
		fail_msg("why: %s", why);
	/* They keep waiting: nothing changed. */
	sleep(3);
	batch_states(batch, &ok, &wt, why, sizeof why);
	assert_int_equal(ok, 30);
	assert_int_equal(wt, 10);
	p = get_json(&S, "/v1/racks/r40/power");
	assert_int_equal((int)json_number_value(json_object_get(p, "projected_w")), 30150);
	assert_int_equal((int)json_integer_value(json_object_get(p, "admitted")), 30);
	json_decref(p);

	/* A read measures the 30 at 1000 W: the projection stays, nobody else fits. */
	sync_sensors();
	sleep(3);
	batch_states(batch, &ok, &wt, why, sizeof why);
	assert_int_equal(wt, 10);
	p = get_json(&S, "/v1/racks/r40/power");
	assert_int_equal((int)json_number_value(json_object_get(p, "measured_w")), 30150);
	assert_int_equal((int)json_integer_value(json_object_get(p, "admitted")), 0);
	json_decref(p);

	/* The 30 that are on settle at 600 W: 18,150 W measured, room for all 10 at peak. */
	{
		char path[160];
		json_t *jobs, *j;
		size_t k;
		int on = 0;

		snprintf(path, sizeof path, "/v1/jobs?batch=%s&state=succeeded&limit=100", batch);
		jobs = get_json(&S, path);
		json_array_foreach(json_object_get(jobs, "items"), k, j)
		{
			snprintf(path, sizeof path, "/v1/nodes/%s", jstr(j, "node"));
			assert_int_equal(call(&S, S.admin, "PATCH", path, &r, "{s:{s:{s:i}}}",
			                      "bmc", "options", "power_w", 600),
			                 200);
			reply_free(&r);
			on++;
		}
		json_decref(jobs);
		assert_int_equal(on, 30);
	}
	sync_sensors();
	wait_batch(batch, 40, 0, 60, why, sizeof why);
	assert_int_equal(count_all(&S, "/v1/events?action=power.admission_forced"), 0);
}

/* Force: the rack is full (all 40 at peak would be 40 kW); a 41st node waits, an operator may
 * not force it, an admin may, and the event says so. */
static void
test_force(void **state)
{
	char op[128], why[256];
	struct reply r;
	json_t *job;

	(void)state;
	sync_sensors(); /* 30 x 600 + 10 x 1000 = 28 kW measured */
	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:{s:i}}}", "name", "extra", "rack", "r40",
	          "node_class", "g1k", "bmc", "driver", "fake", "options", "power_w", 1000);
	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:{s:i}}}", "name", "extra2", "rack", "r40",
	          "node_class", "g1k", "bmc", "driver", "fake", "options", "power_w", 1000);
	/* Measured: 30 x 600 + 10 x 1000 + 3 x 15 = 28,045 W. extra and extra2 fit at their
	 * peaks (30,015 W); extra3 would make it 31,000 W. */
	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:{s:i}}}", "name", "extra3", "rack", "r40",
	          "node_class", "g1k", "bmc", "driver", "fake", "options", "power_w", 1000);
	sync_sensors();
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/extra/power", &r, "{s:s}", "target", "on"),
	        202);
	job = wait_job(&S, jstr(r.json, "id"), 30);
	assert_string_equal(jstr(job, "state"), "succeeded");
	json_decref(job);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/extra2/power", &r, "{s:s}", "target", "on"),
	        202);
	job = wait_job(&S, jstr(r.json, "id"), 30);
	assert_string_equal(jstr(job, "state"), "succeeded");
	json_decref(job);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/extra3/power", &r, "{s:s}", "target", "on"),
	        202);
	{
		char path[128];
		int i;

		snprintf(path, sizeof path, "/v1/jobs/%s", jstr(r.json, "id"));
		for (i = 0; i < 100; i++) {
			job = get_json(&S, path);
			if (json_object_get(job, "error") &&
			    !strcmp(jstr(json_object_get(job, "error"), "code") ?: "", "waiting"))
				break;
			json_decref(job);
			job = NULL;
			usleep(100 * 1000);
		}
		assert_non_null(job);
		snprintf(why, sizeof why, "%s", jstr(json_object_get(job, "error"), "message"));
		assert_non_null(strstr(why, "waiting: rack r40 projected 31.0 kW of 30.1 kW"));
		json_decref(job);
		assert_true(call(&S, S.admin, "DELETE", path, NULL, NULL) / 100 == 2);
	}
	reply_free(&r);
	make_token(&S, "operator", op);
	assert_int_equal(call(&S, op, "PUT", "/v1/nodes/extra3/power", &r, "{s:s, s:b}", "target",
	                      "on", "force", 1),
	                 403);
	assert_error(&r, 403, "FORBIDDEN");
	reply_free(&r);
	assert_int_equal(call(&S, op, "POST", "/v1/actions/power", &r, "{s:{s:[s]}, s:s, s:b}",
	                      "selector", "nodes", "extra3", "target", "on", "force", 1),
	                 403);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/events?action=power.admission_forced"), 0);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/extra3/power", &r, "{s:s, s:b}",
	                      "target", "on", "force", 1),
	                 202);
	job = wait_job(&S, jstr(r.json, "id"), 30);
	assert_string_equal(jstr(job, "state"), "succeeded");
	json_decref(job);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/events?action=power.admission_forced&node=extra3"), 1);
	/* A node whose nameplate alone passes the rack's limit never fits: it fails at once,
	 * saying why, rather than wait for ever. */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/huge", &r, "{s:i}",
	                      "max_power_w", 40000),
	                 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:s, s:{s:s}}", "name", "huge1", "rack", "r40", "node_class",
	          "huge", "bmc", "driver", "fake");
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/huge1/power", &r, "{s:s}", "target", "on"),
	        202);
	job = wait_job(&S, jstr(r.json, "id"), 30);
	assert_string_equal(jstr(job, "state"), "failed");
	assert_string_equal(jstr(json_object_get(job, "error"), "code"), "over_budget");
	assert_non_null(strstr(jstr(json_object_get(job, "error"), "message"),
	                       "peaks at 40.0 kW, over rack r40's whole limit of 30.1 kW"));
	json_decref(job);
	reply_free(&r);
	{
		json_t *ev = get_json(&S, "/v1/events?action=power.admission_forced");
		json_t *e = json_array_get(json_object_get(ev, "items"), 0);

		assert_non_null(strstr(jstr(e, "actor"), "admin"));
		assert_non_null(strstr(jstr(json_object_get(e, "detail"), "held_by"), "projected"));
		json_decref(ev);
	}
}

/* The stagger: at most 2 in flight per rack, 400 ms apart: the jobs of a bulk power-on end
 * at least that far apart. A rack without a budget is staggered all the same. */
static void
test_stagger(void **state)
{
	struct reply r;
	char batch[64], why[256];
	json_t *jobs, *j;
	int64_t t[8];
	size_t i, n = 0;

	(void)state;
	server_stop(&S, SIGTERM);
	start("power_on_stagger = 2\npower_on_stagger_ms = 400\n");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "rs"), 201);
	reply_free(&r);
	for (i = 0; i < 8; i++) {
		char name[16];

		snprintf(name, sizeof name, "s%zu", i);
		make_node(&S, "{s:s, s:s, s:{s:s}}", "name", name, "rack", "rs", "bmc", "driver",
		          "fake");
	}
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "rack", "rs", "target", "on"),
	                 202);
	snprintf(batch, sizeof batch, "%s", jstr(r.json, "id"));
	reply_free(&r);
	wait_batch(batch, 8, 0, 60, why, sizeof why);
	snprintf(why, sizeof why, "/v1/jobs?batch=%s&limit=100", batch);
	jobs = get_json(&S, why);
	json_array_foreach(json_object_get(jobs, "items"), i, j)
	{
		int64_t ms;

		assert_int_equal(rp_time_parse(jstr(j, "finished_at"), &ms), 0);
		t[n++] = ms;
	}
	json_decref(jobs);
	assert_int_equal(n, 8);
	/* sort, then every gap at least the stagger (less a little for clock rounding) */
	for (i = 1; i < n; i++)
		for (size_t k = i; k > 0 && t[k - 1] > t[k]; k--) {
			int64_t x = t[k];

			t[k] = t[k - 1];
			t[k - 1] = x;
		}
	for (i = 1; i < n; i++)
		if (t[i] - t[i - 1] < 380)
			fail_msg("power-ons %zu and %zu ended %lld ms apart", i - 1, i,
			         (long long)(t[i] - t[i - 1]));
	assert_true(t[n - 1] - t[0] >= 7 * 380);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_budget),
	        cmocka_unit_test(test_force),
	        cmocka_unit_test(test_stagger),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
