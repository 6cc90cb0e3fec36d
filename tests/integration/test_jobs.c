/*
 * Jobs through the API, with the fake BMC driver (in-memory power state; it stands for no
 * protocol): bad input changes nothing, per-node order and exclusion, batches, cancel,
 * the power sweep. The IPMI and Redfish drivers have their own tests against real peers.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static long
count_jobs(void)
{
	return count_all(&S, "/v1/jobs");
}

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int
setup(void **state)
{
	struct reply r;
	int i;
	char name[32];

	static const char *const args[] = {"--power-sync-interval", "0", NULL};

	(void)state;
	/* Sweeps only when asked, so the test's own sweep never meets a scheduled one. */
	server_start(&S, NULL, args);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r1"), 201);
	reply_free(&r);
	for (i = 1; i <= 20; i++) {
		snprintf(name, sizeof name, "f%02d", i);
		make_node(&S, "{s:s, s:s, s:i, s:[s], s:{s:s}}", "name", name, "rack", "r1",
		          "u_position", i, "tags", i % 2 ? "odd" : "even", "bmc", "driver", "fake");
	}
	make_node(&S, "{s:s, s:s, s:i, s:b, s:s, s:{s:s}}", "name", "maint", "rack", "r1",
	          "u_position", 30, "maintenance", 1, "maintenance_reason", "bad DIMM", "bmc",
	          "driver", "fake");
	make_node(&S, "{s:s, s:{s:s, s:s, s:s}}", "name", "nocreds", "bmc", "driver", "ipmi",
	          "address", "127.0.0.1", "username", "admin");
	make_node(&S, "{s:s}", "name", "nobmc");
	make_node(&S, "{s:s, s:{s:s, s:{s:i}}}", "name", "slow", "bmc", "driver", "fake", "options",
	          "delay_ms", 300);
	return 0;
}

static void
test_bad_input(void **state)
{
	static const struct {
		const char *method, *path, *body;
		long status;
		const char *code;
	} cases[] = {
	        {"PUT", "/v1/nodes/f01/power", "{\"target\":\"explode\"}", 400, "INVALID_FIELD"},
	        {"PUT", "/v1/nodes/f01/power", "{}", 400, "MISSING_FIELD"},
	        {"PUT", "/v1/nodes/f01/power", "{\"target\":\"on\",\"speed\":1}", 400,
	         "UNKNOWN_FIELD"},
	        {"PUT", "/v1/nodes/f01/power", "{\"target\":\"soft_off\",\"timeout_s\":0}", 400,
	         "INVALID_FIELD"},
	        {"PUT", "/v1/nodes/nope/power", "{\"target\":\"on\"}", 404, "NOT_FOUND"},
	        {"PUT", "/v1/nodes/maint/power", "{\"target\":\"on\"}", 409, "INVALID_STATE"},
	        {"PUT", "/v1/nodes/nocreds/power", "{\"target\":\"on\"}", 409, "CONFLICT"},
	        {"PUT", "/v1/nodes/nobmc/power", "{\"target\":\"on\"}", 409, "CONFLICT"},
	        {"PUT", "/v1/nodes/f01/boot", "{\"device\":\"floppy\"}", 400, "INVALID_FIELD"},
	        {"PUT", "/v1/nodes/f01/boot", "{\"device\":\"pxe\",\"mode\":\"efi\"}", 400,
	         "INVALID_FIELD"},
	        {"PUT", "/v1/nodes/maint/boot", "{\"device\":\"pxe\"}", 409, "INVALID_STATE"},
	        {"POST", "/v1/nodes/f01/verify", "{\"deep\":true}", 400, "BAD_REQUEST"},
	        {"POST", "/v1/nodes/nope/verify", NULL, 404, "NOT_FOUND"},
	        {"POST", "/v1/actions/power", "{\"target\":\"on\"}", 400, "MISSING_FIELD"},
	        {"POST", "/v1/actions/power", "{\"selector\":{},\"target\":\"on\"}", 400,
	         "BAD_REQUEST"},
	        {"POST", "/v1/actions/power",
	         "{\"selector\":{\"rack\":\"r1\",\"tag\":\"odd\"},\"target\":\"on\"}", 400,
	         "BAD_REQUEST"},
	        {"POST", "/v1/actions/power", "{\"selector\":{\"rack\":\"r9\"},\"target\":\"on\"}",
	         400, "BAD_REQUEST"},
	        {"POST", "/v1/actions/power", "{\"selector\":{\"tag\":\"none\"},\"target\":\"on\"}",
	         400, "BAD_REQUEST"},
	        {"POST", "/v1/actions/power",
	         "{\"selector\":{\"nodes\":[\"f01\",\"ghost\"]},\"target\":\"on\"}", 400,
	         "BAD_REQUEST"},
	        {"POST", "/v1/actions/power",
	         "{\"selector\":{\"nodes\":[\"maint\",\"nobmc\"]},\"target\":\"on\"}", 409,
	         "CONFLICT"},
	        {"POST", "/v1/actions/power", "{\"selector\":{\"site\":\"x\"},\"target\":\"on\"}",
	         400, "UNKNOWN_FIELD"},
	        {"GET", "/v1/jobs?state=exploded", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/jobs?node=ghost", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/jobs?batch=nope", NULL, 400, "BAD_QUERY"},
	        {"GET", "/v1/jobs/0b5e5c1e-0000-4000-8000-000000000000", NULL, 404, "NOT_FOUND"},
	        {"GET", "/v1/batches/not-a-batch", NULL, 404, "NOT_FOUND"},
	        {"DELETE", "/v1/jobs/0b5e5c1e-0000-4000-8000-000000000000", NULL, 404, "NOT_FOUND"},
	};
	long jobs = count_jobs(), events = count_all(&S, "/v1/events");
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct reply r;

		req(&S, S.admin, cases[i].method, cases[i].path,
		    cases[i].body ? "application/json" : NULL, cases[i].body,
		    cases[i].body ? strlen(cases[i].body) : 0, NULL, &r);
		if (r.status != cases[i].status)
			fail_msg("case %zu %s %s: %ld %s", i, cases[i].method, cases[i].path,
			         r.status, r.body ? r.body : "");
		assert_error(&r, cases[i].status, cases[i].code);
		reply_free(&r);
	}
	assert_int_equal(count_jobs(), jobs);
	assert_int_equal(count_all(&S, "/v1/events"), events);
}

static void
test_power_and_events(void **state)
{
	struct reply r;
	json_t *job;
	char id[64];

	(void)state;
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/f01/power", &r, "{s:s}", "target", "on"), 202);
	assert_string_equal(str(r.json, "state"), "queued");
	assert_non_null(strstr(r.location, "/v1/jobs/"));
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	job = wait_job(&S, id, 10);
	assert_string_equal(str(job, "state"), "succeeded");
	assert_string_equal(str(json_object_get(job, "result"), "power"), "on");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	json_decref(job);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/f01", &r, NULL), 200);
	assert_string_equal(str(r.json, "power_state"), "on");
	assert_non_null(str(r.json, "power_state_at"));
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/events?node=f01&action=node.power"), 1);
	assert_int_equal(count_all(&S, "/v1/events?node=f01&action=job.succeeded"), 1);
	/* Already on: done without touching the BMC again. */
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/f01/power", &r, "{s:s}", "target", "on"), 202);
	job = wait_job(&S, str(r.json, "id"), 10);
	reply_free(&r);
	assert_true(json_is_false(json_object_get(json_object_get(job, "result"), "changed")));
	json_decref(job);
	/* Cycle of a node that is off turns it on, and says so. */
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/f02/power", &r, "{s:s}", "target", "cycle"),
	        202);
	job = wait_job(&S, str(r.json, "id"), 10);
	reply_free(&r);
	assert_string_equal(str(job, "state"), "succeeded");
	assert_non_null(strstr(str(json_object_get(job, "result"), "note"), "was off"));
	json_decref(job);
	/* A viewer can read jobs but not start them. */
	{
		char viewer[128];

		make_token(&S, "viewer", viewer);
		assert_int_equal(call(&S, viewer, "PUT", "/v1/nodes/f01/power", &r, "{s:s}",
		                      "target", "off"),
		                 403);
		reply_free(&r);
		assert_int_equal(call(&S, viewer, "GET", "/v1/jobs?node=f01", &r, NULL), 200);
		assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
		reply_free(&r);
	}
}

/* Jobs for one node run one at a time, in the order they were asked for. */
static void
test_order_and_exclusion(void **state)
{
	struct reply r;
	char ids[4][64];
	json_t *job[4];
	int i;

	(void)state;
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/slow/boot", &r, "{s:s}", "device", "pxe"), 202);
	snprintf(ids[0], sizeof ids[0], "%s", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/slow/power", &r, "{s:s}", "target", "cycle"),
	        202);
	snprintf(ids[1], sizeof ids[1], "%s", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/slow/power", &r, "{s:s}", "target", "off"),
	        202);
	snprintf(ids[2], sizeof ids[2], "%s", str(r.json, "id"));
	reply_free(&r);
	/* Reads do not wait for the node. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/slow/verify", &r, NULL), 202);
	snprintf(ids[3], sizeof ids[3], "%s", str(r.json, "id"));
	reply_free(&r);
	/* While they run, never two running mutating jobs on the node. */
	for (i = 0; i < 40; i++) {
		assert_int_equal(call(&S, S.admin, "GET",
		                      "/v1/jobs?node=slow&state=running&type=power", &r, NULL),
		                 200);
		assert_true(json_array_size(json_object_get(r.json, "items")) <= 1);
		reply_free(&r);
		usleep(50000);
	}
	for (i = 0; i < 4; i++) {
		job[i] = wait_job(&S, ids[i], 20);
		assert_string_equal(str(job[i], "state"), "succeeded");
	}
	/* Each mutating job started after the previous one finished. */
	assert_true(strcmp(str(job[1], "started_at"), str(job[0], "finished_at")) >= 0);
	assert_true(strcmp(str(job[2], "started_at"), str(job[1], "finished_at")) >= 0);
	/* The verify did not wait for the power jobs. */
	assert_true(strcmp(str(job[3], "started_at"), str(job[2], "finished_at")) < 0);
	for (i = 0; i < 4; i++)
		json_decref(job[i]);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/slow", &r, NULL), 200);
	assert_string_equal(str(r.json, "power_state"), "off");
	reply_free(&r);
}

static void
test_batch(void **state)
{
	struct reply r;
	char path[200];
	json_t *counts;
	int i, done = 0;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "rack", "r1", "target", "on"),
	                 202);
	/* 20 fake nodes and one in maintenance, which is skipped and named. */
	assert_int_equal(json_integer_value(json_object_get(r.json, "jobs")), 20);
	assert_int_equal(json_array_size(json_object_get(r.json, "skipped")), 1);
	assert_string_equal(str(json_array_get(json_object_get(r.json, "skipped"), 0), "node"),
	                    "maint");
	assert_non_null(strstr(str(json_array_get(json_object_get(r.json, "skipped"), 0), "reason"),
	                       "bad DIMM"));
	snprintf(path, sizeof path, "/v1/batches/%s", str(r.json, "id"));
	assert_string_equal(r.location, path);
	reply_free(&r);
	for (i = 0; i < 200 && !done; i++) {
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		done = json_is_true(json_object_get(r.json, "done"));
		if (done) {
			/* Whoever follows the batch later sees what it skipped, too. */
			assert_int_equal(json_array_size(json_object_get(r.json, "skipped")), 1);
			assert_string_equal(
			        str(json_array_get(json_object_get(r.json, "skipped"), 0), "node"),
			        "maint");
			counts = json_object_get(r.json, "counts");
			assert_int_equal(json_integer_value(json_object_get(counts, "succeeded")),
			                 20);
			assert_int_equal(json_integer_value(json_object_get(r.json, "total")), 20);
		}
		reply_free(&r);
		usleep(50000);
	}
	assert_true(done);
	snprintf(path, sizeof path, "/v1/nodes?rack=r1&power=on&limit=100");
	assert_int_equal(count_all(&S, path), 20);
	/* /metrics counts what this server ended: these 20 at least (counted once recorded,
	 * which the batch's view may show a moment before). */
	{
		const char *p = NULL;
		int k;

		for (k = 0; k < 100; k++) {
			assert_int_equal(call(&S, S.admin, "GET", "/metrics", &r, NULL), 200);
			p = strstr(r.body, "rackpilot_job_outcomes_total{result=\"succeeded\"} ");
			assert_non_null(p);
			assert_non_null(
			        strstr(r.body, "rackpilot_job_outcomes_total{result=\"failed\"} "));
			if (atol(strchr(p, '}') + 2) >= 20)
				break;
			reply_free(&r);
			usleep(50000);
		}
		assert_true(k < 100);
		reply_free(&r);
	}
	/* By tag: the odd half goes off. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "tag", "odd", "target", "off"),
	                 202);
	assert_int_equal(json_integer_value(json_object_get(r.json, "jobs")), 10);
	snprintf(path, sizeof path, "/v1/jobs?batch=%s&limit=100", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(count_all(&S, path), 10);
}

static void
test_cancel(void **state)
{
	struct reply r;
	char first[64], second[64], path[200];
	json_t *job;

	(void)state;
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/slow/power", &r, "{s:s}", "target", "on"), 202);
	snprintf(first, sizeof first, "%s", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/slow/power", &r, "{s:s}", "target", "off"),
	        202);
	snprintf(second, sizeof second, "%s", str(r.json, "id"));
	reply_free(&r);
	/* The second waits behind the first: cancelling it ends it at once. */
	snprintf(path, sizeof path, "/v1/jobs/%s", second);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 200);
	assert_string_equal(str(r.json, "state"), "cancelled");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
	job = wait_job(&S, first, 20);
	assert_string_equal(str(job, "state"), "succeeded");
	json_decref(job);
	/* A node with unfinished jobs cannot be deleted. */
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/slow/power", &r, "{s:s}", "target", "off"),
	        202);
	snprintf(first, sizeof first, "%s", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/nodes/slow", &r, NULL), 409);
	assert_error(&r, 409, "IN_USE");
	reply_free(&r);
	job = wait_job(&S, first, 20);
	json_decref(job);
}

static void
test_sweep(void **state)
{
	struct reply r;
	json_t *last = NULL;
	int i;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/power/sync", &r, NULL), 202);
	reply_free(&r);
	for (i = 0; i < 100 && last == NULL; i++) {
		assert_int_equal(call(&S, S.admin, "GET", "/v1/power/sync", &r, NULL), 200);
		if (!json_is_true(json_object_get(r.json, "running")) &&
		    json_is_object(json_object_get(r.json, "last")))
			last = json_incref(json_object_get(r.json, "last"));
		reply_free(&r);
		usleep(50000);
	}
	assert_non_null(last);
	/* 20 in the rack + "slow"; not the one in maintenance, not those without a BMC. */
	assert_int_equal(json_integer_value(json_object_get(last, "nodes")), 21);
	assert_int_equal(json_integer_value(json_object_get(last, "ok")), 21);
	json_decref(last);
	assert_int_equal(req(&S, S.admin, "GET", "/metrics", NULL, NULL, 0, NULL, &r), 200);
	assert_non_null(strstr(r.body, "rackpilot_jobs{state=\"queued\"} "));
	assert_non_null(strstr(r.body, "rackpilot_power_sync_last_seconds "));
	assert_non_null(strstr(r.body, "rackpilot_bmc_faults 0"));
	reply_free(&r);
}

static void
test_bmc_options(void **state)
{
	static const struct {
		const char *method, *path, *ctype, *body;
		const char *code;
	} bad[] = {
	        {"POST", "/v1/nodes", "application/json",
	         "{\"name\":\"o1\",\"bmc\":{\"driver\":\"ipmi\",\"options\":{\"scheme\":\"http\"}}"
	         "}",
	         "INVALID_FIELD"},
	        {"POST", "/v1/nodes", "application/json",
	         "{\"name\":\"o1\",\"bmc\":{\"driver\":\"redfish\",\"options\":{\"system_id\":\"a/"
	         "b\"}}}",
	         "INVALID_FIELD"},
	        {"POST", "/v1/nodes", "application/json",
	         "{\"name\":\"o1\",\"bmc\":{\"driver\":\"ipmi\",\"options\":{\"workarounds\":"
	         "[\"opensesspriv\",\"opensesspriv\"]}}}",
	         "INVALID_FIELD"},
	        {"POST", "/v1/nodes", "application/json",
	         "{\"name\":\"o1\",\"bmc\":{\"driver\":\"ipmi\",\"options\":{\"cipher_suite\":99}}"
	         "}",
	         "INVALID_FIELD"},
	        {"POST", "/v1/import", "application/json",
	         "{\"nodes\":[{\"name\":\"o1\",\"bmc\":{\"driver\":\"fake\",\"options\":"
	         "{\"cipher_suite\":3}}}]}",
	         "IMPORT_INVALID"},
	};
	struct reply r;
	size_t i;
	long nodes = count_all(&S, "/v1/nodes");

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		req(&S, S.admin, bad[i].method, bad[i].path, bad[i].ctype, bad[i].body,
		    strlen(bad[i].body), NULL, &r);
		if (r.status != 400)
			fail_msg("case %zu: %ld %s", i, r.status, r.body ? r.body : "");
		assert_error(&r, 400, bad[i].code);
		reply_free(&r);
	}
	assert_int_equal(count_all(&S, "/v1/nodes"), nodes);
	/* A new driver without new options starts with none (the old ones were its own). */
	make_node(&S, "{s:s, s:{s:s, s:{s:i}}}", "name", "o2", "bmc", "driver", "fake", "options",
	          "delay_ms", 10);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/o2", &r, "{s:{s:s, s:s, s:s, s:s}}",
	                      "bmc", "driver", "redfish", "address", "10.0.0.9", "username", "u",
	                      "password", "p"),
	                 200);
	assert_true(json_is_null(json_object_get(json_object_get(r.json, "bmc"), "options")));
	reply_free(&r);
	/* ... and with new options, exactly those: nothing of the old driver's is left over. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/o2", &r, "{s:{s:s, s:{s:i}}}", "bmc",
	                      "driver", "fake", "options", "delay_ms", 5),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/o2", &r, "{s:{s:s, s:{s:s}}}", "bmc",
	                      "driver", "redfish", "options", "scheme", "http"),
	                 200);
	{
		json_t *want = json_pack("{s:s}", "scheme", "http");

		assert_true(json_equal(json_object_get(json_object_get(r.json, "bmc"), "options"),
		                       want));
		json_decref(want);
	}
	reply_free(&r);
	/* A node named twice in a selector gets one job. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/f03", &r, NULL), 200);
	{
		char body[200];
		struct reply b;

		snprintf(body, sizeof body,
		         "{\"selector\":{\"nodes\":[\"f03\",\"%s\"]},\"target\":\"on\"}",
		         str(r.json, "id"));
		req(&S, S.admin, "POST", "/v1/actions/power", "application/json", body,
		    strlen(body), NULL, &b);
		assert_int_equal(b.status, 202);
		assert_int_equal(json_integer_value(json_object_get(b.json, "jobs")), 1);
		reply_free(&b);
	}
	reply_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_bad_input),
	        cmocka_unit_test(test_power_and_events),
	        cmocka_unit_test(test_order_and_exclusion),
	        cmocka_unit_test(test_batch),
	        cmocka_unit_test(test_cancel),
	        cmocka_unit_test(test_sweep),
	        cmocka_unit_test(test_bmc_options),
	};

	return cmocka_run_group_tests(tests, setup, group_teardown);
}
