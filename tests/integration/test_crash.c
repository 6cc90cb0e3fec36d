/*
 * kill -9 rackpilotd while 50 power jobs run, restart it: every job ends in a terminal
 * state, and each BMC saw each action at most once (counted by the mock BMCs themselves).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define N 50

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void
test_kill_during_jobs(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	struct server s;
	struct mock m;
	struct reply r;
	char dir[256], name[32], batch[200], path[300];
	json_t *counts = NULL, *jobs, *j;
	int i, done = 0, running_at_kill = 0, interrupted = 0, recovered, verified = 0;
	size_t k;

	(void)state;
	mock_start(&m, N, NULL);
	/* Slow BMCs: every request takes 250 ms, so jobs are mid-flight when the server dies. */
	for (i = 0; i < N; i++)
		mock_post(&m, i, "/__mock/config", "{\"delay_ms\":250}");
	server_start(&s, NULL, args);
	snprintf(dir, sizeof dir, "%s", s.dir);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof name, "c%02d", i);
		make_node(&s, "{s:s, s:[s], s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name", name,
		          "tags", "crash", "bmc", "driver", "redfish", "address", "127.0.0.1", "port",
		          m.base + i, "username", "admin", "password", "secret", "options", "scheme",
		          "http", "timeout_ms", 5000);
	}
	assert_int_equal(call(&s, s.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "tag", "crash", "target", "on"),
	                 202);
	snprintf(batch, sizeof batch, "/v1/batches/%s", str(r.json, "id"));
	reply_free(&r);
	/* kill -9 the moment the first BMC has logged a power-on: the first wave of jobs is
	 * then mid-send, some commands delivered and some not. */
	for (i = 0; i < 400 && !running_at_kill; i++) {
		int b;

		for (b = 0; b < N && !running_at_kill; b++) {
			json_t *st = mock_get(&m, b, "/__mock/state");

			running_at_kill = json_array_size(json_object_get(st, "actions")) > 0;
			json_decref(st);
		}
		if (!running_at_kill)
			usleep(20000);
	}
	assert_true(running_at_kill);
	server_stop(&s, SIGKILL);

	server_start(&s, dir, args);
	for (i = 0; i < 600 && !done; i++) {
		assert_int_equal(call(&s, s.admin, "GET", batch, &r, NULL), 200);
		done = json_is_true(json_object_get(r.json, "done"));
		if (done)
			counts = json_incref(json_object_get(r.json, "counts"));
		reply_free(&r);
		usleep(100000);
	}
	assert_true(done);
	assert_int_equal(json_integer_value(json_object_get(counts, "queued")), 0);
	assert_int_equal(json_integer_value(json_object_get(counts, "running")), 0);
	assert_int_equal(json_integer_value(json_object_get(counts, "succeeded")) +
	                     json_integer_value(json_object_get(counts, "failed")),
	                 N);
	json_decref(counts);
	/* Every job that failed says why: it was interrupted and not repeated. */
	snprintf(path, sizeof path, "/v1/jobs?batch=%s&limit=100", batch + strlen("/v1/batches/"));
	assert_int_equal(call(&s, s.admin, "GET", path, &r, NULL), 200);
	jobs = json_object_get(r.json, "items");
	assert_int_equal(json_array_size(jobs), N);
	json_array_foreach(jobs, k, j)
	{
		const char *note = str(json_object_get(j, "result"), "note");

		if (!strcmp(str(j, "state"), "failed")) {
			assert_string_equal(str(json_object_get(j, "error"), "code"), "interrupted");
			interrupted++;
		}
		/* Sent before the kill: checked at the BMC, not sent again. */
		verified += note && strstr(note, "interrupted by a rackpilotd restart") != NULL;
	}
	reply_free(&r);
	/* Jobs running at the kill were recovered (an event each); only those may fail so. */
	recovered = (int)count_all(&s, "/v1/events?action=job.interrupted");
	assert_true(recovered >= 1);
	assert_true(interrupted + verified >= 1);
	assert_true(interrupted + verified <= recovered);
	/* The BMCs' own books: at most one power-on each. */
	for (i = 0; i < N; i++) {
		json_t *st = mock_get(&m, i, "/__mock/state"), *a;
		int ons = 0;

		json_array_foreach(json_object_get(st, "actions"), k, a)
		{
			const char *t = str(a, "reset_type");

			if (t && !strcmp(t, "On") && json_integer_value(json_object_get(a, "status")) < 300)
				ons++;
		}
		if (ons > 1)
			fail_msg("BMC %d received %d power-on actions", i, ons);
		json_decref(st);
	}
	fprintf(stderr, "crash test: %d recovered after kill -9: %d verified at the BMC, %d failed "
	                "as interrupted, the rest had not sent anything and ran\n",
	        recovered, verified, interrupted);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	mock_stop(&m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kill_during_jobs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
