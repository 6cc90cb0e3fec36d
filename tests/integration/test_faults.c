/*
 * Redfish BMCs on a bad day, through the API, against the mock BMC's fault injection
 * (tests/redfish/mock_bmc.py): 503s at a rate, a 503 on the service root, a session dropped
 * mid-job, an answer lost after the BMC acted, a reboot mid-update, an outage short and long,
 * and a BMC clock hours off. Every count (requests, faults, logins, resets, flashes) is read
 * from the mock, never from Rackpilot.
 *
 * The mock's Retry-After is 0 here (the driver still waits its floor of 50 ms plus jitter),
 * so that the retries cost little wall time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "harness.h"

static struct mock M;
static char workdir[64], conf[200];
static const char *const args[] = {"-c", conf, NULL};

enum {
	B_POWER = 0, /* 0..4: ten power jobs at 20 % */
	B_MIXED = 5, /* boot, BIOS and firmware at 20 % */
	B_HALF = 6,  /* 50 % */
	B_ROOT = 7,  /* one 503 on the service root */
	B_SESSION = 8,
	B_REBOOT = 9,
	B_DOWN_LONG = 10,
	B_DOWN_SHORT = 11,
	B_SKEW_AHEAD = 12,
	B_SKEW_BEHIND = 13,
	B_LOST = 14,
	B_COUNT = 15,
};

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static json_int_t
num(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* A node on mock BMC i; options_extra is a JSON object text merged into bmc.options. */
static void
add_node(const char *name, const char *cls, int i, const char *options_extra)
{
	json_t *st = mock_get(&M, i, "/__mock/state"), *node, *opts;
	char *text;
	struct reply r;

	node = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name",
	                 name, "node_class", cls, "serial", str(st, "serial"), "system_uuid",
	                 str(st, "uuid"), "bmc", "driver", "redfish", "address", "127.0.0.1",
	                 "port", M.base + i, "username", "admin", "password", "secret", "options",
	                 "scheme", "http", "timeout_ms", 3000);
	json_decref(st);
	if (options_extra) {
		opts = json_loads(options_extra, 0, NULL);
		assert_non_null(opts);
		json_object_update(json_object_get(json_object_get(node, "bmc"), "options"), opts);
		json_decref(opts);
	}
	text = json_dumps(node, JSON_COMPACT);
	json_decref(node);
	req(&S, S.admin, "POST", "/v1/nodes", "application/json", text, strlen(text), NULL, &r);
	if (r.status != 201)
		fail_msg("POST /v1/nodes %s: %ld %s", name, r.status, r.body ? r.body : "");
	reply_free(&r);
	free(text);
}

static void
upload(const char *name)
{
	char file[200];
	FILE *f;

	snprintf(file, sizeof file, "%s/%s", workdir, name);
	f = fopen(file, "w");
	assert_non_null(f);
	fprintf(f, "firmware image %s\n", name);
	fclose(f);
	sh("curl -sf -o /dev/null -X PUT -H 'Authorization: Bearer %s' --data-binary @%s "
	   "'%s/v1/images/%s?kind=firmware'",
	   S.admin, file, S.base, name);
}

/* A baseline that takes class cls's BMC to 2.1.0. */
static void
baseline(const char *cls)
{
	struct reply r;
	char name[64];

	snprintf(name, sizeof name, "%s-bmc", cls);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s}}}", "name", name, "node_class", cls,
	                      "components", "bmc", "version", "2.1.0", "image", "bmc_2.1.0.bin"),
	                 201);
	reply_free(&r);
}

static int
setup(void **state)
{
	FILE *f;

	(void)state;
	snprintf(workdir, sizeof workdir, "/tmp/rp-faults-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", workdir);
	f = fopen(conf, "w");
	assert_non_null(f);
	/* The mock reads the image name from the URL and never downloads it. */
	fprintf(f, "[server]\npower_sync_interval = 0\nboot_url = http://127.0.0.1:9\n");
	fclose(f);
	server_start(&S, NULL, args);
	mock_start(&M, B_COUNT, NULL);
	upload("bmc_2.1.0.bin");
	return 0;
}

static int
teardown(void **state)
{
	mock_stop(&M);
	sh("rm -rf %s", workdir);
	return group_teardown(state);
}

/* Submit a job; its id into id (64 bytes). */
static void
submit(const char *method, const char *path, const char *body, char *id)
{
	struct reply r;

	req(&S, S.admin, method, path, body ? "application/json" : NULL, body,
	    body ? strlen(body) : 0, NULL, &r);
	if (r.status != 202)
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body ? r.body : "");
	snprintf(id, 64, "%s", str(r.json, "id"));
	reply_free(&r);
}

static json_t *
act(const char *method, const char *path, const char *body)
{
	char id[64];

	submit(method, path, body, id);
	return wait_job(&S, id, 120);
}

static const char *
code_of(json_t *job)
{
	const char *c = str(json_object_get(job, "error"), "code");

	return c ? c : "";
}

static void
expect(json_t *job, const char *state)
{
	if (strcmp(str(job, "state"), state) != 0) {
		char *e = json_dumps(json_object_get(job, "error"), 0);

		fail_msg("job %s: expected %s, got %s: %s", str(job, "type"), state,
		         str(job, "state"), e ? e : "(no error)");
	}
}

static void
config(int i, const char *json)
{
	mock_post(&M, i, "/__mock/config", json);
}

/* Resets the BMC carried out (status < 300). */
static int
resets(int i)
{
	json_t *st = mock_get(&M, i, "/__mock/state"), *a;
	size_t k;
	int n = 0;

	json_array_foreach(json_object_get(st, "actions"), k, a)
	{
		n += str(a, "reset_type") != NULL && num(a, "status") < 300;
	}
	json_decref(st);
	return n;
}

static json_int_t
fault_count(int i, const char *kind)
{
	json_t *st = mock_get(&M, i, "/__mock/state");
	json_int_t n = num(json_object_get(st, "faults"), kind);

	json_decref(st);
	return n;
}

static json_int_t
state_num(int i, const char *key)
{
	json_t *st = mock_get(&M, i, "/__mock/state");
	json_int_t n = num(st, key);

	json_decref(st);
	return n;
}

static json_int_t
flashes(int i, const char *id)
{
	json_t *st = mock_get(&M, i, "/__mock/state");
	json_int_t n = num(json_object_get(st, "update_count"), id);

	json_decref(st);
	return n;
}

static char *
mock_fw(int i, const char *id, char *buf, size_t len)
{
	json_t *st = mock_get(&M, i, "/__mock/state");

	snprintf(buf, len, "%s", str(json_object_get(st, "firmware"), id) ?: "");
	json_decref(st);
	return buf;
}

/* The BMC version the store holds for a node ("" when none). */
static char *
stored_bmc(const char *node, char *buf, size_t len)
{
	struct reply r;
	char path[100];
	json_t *c;
	size_t i;

	buf[0] = '\0';
	snprintf(path, sizeof path, "/v1/nodes/%s/firmware", node);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	json_array_foreach(json_object_get(r.json, "components"), i, c)
	{
		if (!strcmp(str(c, "component"), "bmc"))
			snprintf(buf, len, "%s", str(c, "version") ?: "");
	}
	reply_free(&r);
	return buf;
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* Wait until mock BMC i answers on its port again (an outage in "refuse" mode). */
static void
await_mock(int i, int timeout_s)
{
	char url[128];
	int k;

	snprintf(url, sizeof url, "http://127.0.0.1:%d/__mock/state", M.base + i);
	for (k = 0; k < timeout_s * 10; k++) {
		CURL *c = curl_easy_init();
		long status = 0;

		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
		if (curl_easy_perform(c) == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(c);
		if (status == 200)
			return;
		usleep(100000);
	}
	fail_msg("mock BMC %d did not come back within %d s", i, timeout_s);
}

static void
refresh(const char *node)
{
	char path[100];
	json_t *job;

	snprintf(path, sizeof path, "/v1/nodes/%s/firmware/refresh", node);
	job = act("POST", path, NULL);
	expect(job, "succeeded");
	json_decref(job);
}

/* 20 % of requests answer 503: ten power jobs over five BMCs, a boot override, a BIOS apply
 * and a firmware update all succeed, and no reset is sent twice. */
static void
test_rate_20(void **state)
{
	char ids[10][64], path[64], v[64], cfg[160];
	json_int_t faulted = 0;
	struct reply r;
	json_t *job;
	int i;

	(void)state;
	for (i = 0; i < 5; i++) {
		snprintf(path, sizeof path, "p%d", i);
		add_node(path, "f20", B_POWER + i, NULL);
		snprintf(cfg, sizeof cfg,
		         "{\"fail_rate_503\":0.2,\"fault_seed\":%d,\"retry_after\":0}", 100 + i);
		config(B_POWER + i, cfg);
	}
	add_node("mixed", "f20", B_MIXED, NULL);
	config(B_MIXED, "{\"fail_rate_503\":0.2,\"fault_seed\":7,\"retry_after\":0}");
	/* Two per node, queued at once: on, then off. */
	for (i = 0; i < 10; i++) {
		snprintf(path, sizeof path, "/v1/nodes/p%d/power", i % 5);
		submit("PUT", path, i < 5 ? "{\"target\":\"on\"}" : "{\"target\":\"off\"}", ids[i]);
	}
	for (i = 0; i < 10; i++) {
		job = wait_job(&S, ids[i], 120);
		expect(job, "succeeded");
		json_decref(job);
	}
	for (i = 0; i < 5; i++) {
		json_t *st = mock_get(&M, B_POWER + i, "/__mock/state");

		assert_string_equal(str(st, "power"), "Off");
		json_decref(st);
		/* Exactly one reset per job: a 503 never acts, and nothing acted twice. */
		assert_int_equal(resets(B_POWER + i), 2);
		faulted += fault_count(B_POWER + i, "503");
	}
	if (faulted < 3)
		fail_msg("only %lld 503s were injected: the case proves nothing",
		         (long long)faulted);

	job = act("PUT", "/v1/nodes/mixed/boot", "{\"device\":\"pxe\"}");
	expect(job, "succeeded");
	json_decref(job);
	{
		json_t *st = mock_get(&M, B_MIXED, "/__mock/state");

		assert_string_equal(str(json_object_get(st, "boot"), "target"), "Pxe");
		json_decref(st);
	}
	refresh("mixed");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:{s:s}}",
	                      "name", "f20-sriov", "node_class", "f20", "attributes",
	                      "SriovSupport", "Enabled"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/mixed", &r, "{s:s}", "bios_profile",
	                      "f20-sriov"),
	                 200);
	reply_free(&r);
	job = act("POST", "/v1/nodes/mixed/bios/apply", NULL);
	expect(job, "succeeded");
	json_decref(job);
	{
		json_t *st = mock_get(&M, B_MIXED, "/__mock/state");

		assert_string_equal(str(json_object_get(json_object_get(st, "bios"), "current"),
		                        "SriovSupport"),
		                    "Enabled");
		json_decref(st);
	}
	baseline("f20");
	job = act("POST", "/v1/nodes/mixed/firmware/update", "{\"components\":[\"bmc\"]}");
	expect(job, "succeeded");
	json_decref(job);
	assert_string_equal(mock_fw(B_MIXED, "BMC", v, sizeof v), "2.1.0");
	assert_string_equal(stored_bmc("mixed", v, sizeof v), "2.1.0");
	assert_int_equal(flashes(B_MIXED, "BMC"), 1);
	assert_true(fault_count(B_MIXED, "503") > 0);
}

/* 50 % of requests answer 503: every job succeeds or fails as bmc_busy with the budget spent
 * ("tries" in its message), never as a protocol or unsupported error. */
static void
test_rate_50(void **state)
{
	static const char *const targets[] = {"on", "off", "on", "off", "on", "off"};
	int i, ok = 0;
	json_t *job;

	(void)state;
	add_node("half", "f50", B_HALF, NULL);
	config(B_HALF, "{\"fail_rate_503\":0.5,\"fault_seed\":50,\"retry_after\":0}");
	for (i = 0; i < 7; i++) {
		char body[64];

		snprintf(body, sizeof body, "{\"target\":\"%s\"}", i < 6 ? targets[i] : "on");
		job = i < 6 ? act("PUT", "/v1/nodes/half/power", body)
		            : act("POST", "/v1/nodes/half/firmware/refresh", NULL);
		if (!strcmp(str(job, "state"), "succeeded")) {
			ok++;
		} else {
			const char *msg = str(json_object_get(job, "error"), "message");

			if (strcmp(str(job, "state"), "failed") != 0 ||
			    strcmp(code_of(job), "bmc_busy") != 0 || msg == NULL ||
			    strstr(msg, "tries") == NULL)
				fail_msg("job %d: %s %s: %s", i, str(job, "state"), code_of(job),
				         msg ? msg : "");
		}
		json_decref(job);
	}
	print_message("50 %% 503s: %d of 7 jobs succeeded, %lld 503s in %lld requests\n", ok,
	              (long long)fault_count(B_HALF, "503"),
	              (long long)state_num(B_HALF, "requests"));
	assert_true(fault_count(B_HALF, "503") > 0);
}

/* One 503 on the service root before a fresh node's first job: not a protocol error, and no
 * job attempt spent on it. */
static void
test_root_503(void **state)
{
	json_t *job, *cfg;

	(void)state;
	add_node("root", "froot", B_ROOT, NULL);
	config(B_ROOT, "{\"fail_next_503\":1,\"retry_after\":0}");
	job = act("PUT", "/v1/nodes/root/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	assert_int_equal(num(job, "attempts"), 1);
	json_decref(job);
	cfg = mock_get(&M, B_ROOT, "/__mock/config");
	assert_int_equal(num(cfg, "fail_next_503"), 0); /* it was met */
	json_decref(cfg);
	assert_int_equal(resets(B_ROOT), 1);
}

/* The BMC drops every session in the middle of a job: one login more, the job succeeds, the
 * reset is carried out once. */
static void
test_session_dropped(void **state)
{
	json_int_t logins;
	json_t *job;

	(void)state;
	add_node("sess", "fsess", B_SESSION, NULL);
	job = act("PUT", "/v1/nodes/sess/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	json_decref(job);
	logins = state_num(B_SESSION, "logins");
	assert_int_equal(logins, 1);
	/* The job's first request (GET the system) still works; the sessions go before its
	 * second (the reset), and under 20 % 503s (seed 14: the third request, the new login,
	 * is the one answered 503) the new session is established within the request's own
	 * retries. */
	config(B_SESSION, "{\"drop_sessions_after\":2,\"fail_rate_503\":0.2,\"fault_seed\":14,"
	                  "\"retry_after\":0}");
	job = act("PUT", "/v1/nodes/sess/power", "{\"target\":\"off\"}");
	expect(job, "succeeded");
	assert_int_equal(num(job, "attempts"), 1);
	json_decref(job);
	assert_int_equal(fault_count(B_SESSION, "sessions_dropped"), 1);
	assert_true(fault_count(B_SESSION, "503") >= 1);
	assert_int_equal(state_num(B_SESSION, "logins"), logins + 1);
	assert_int_equal(resets(B_SESSION), 2);
}

/* The BMC carries out a reset and the answer is lost: the driver never sends the POST again
 * (it may have acted); the job finds the power state reached. */
static void
test_lost_answer(void **state)
{
	json_t *job, *st;

	(void)state;
	add_node("lost", "flost", B_LOST, NULL);
	config(B_LOST, "{\"lose_next_answers\":1}");
	job = act("PUT", "/v1/nodes/lost/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	json_decref(job);
	assert_int_equal(fault_count(B_LOST, "lost_answers"), 1);
	assert_int_equal(resets(B_LOST), 1);
	st = mock_get(&M, B_LOST, "/__mock/state");
	assert_string_equal(str(st, "power"), "On");
	json_decref(st);
}

/* The BMC reboots while its update task runs (refusing connections for 12 s, longer than the
 * old 20-errors-of-500-ms tolerance) and comes back with the task completed and no sessions:
 * the job succeeds, the store has the BMC's version, and it was flashed once. */
static void
test_reboot_mid_update(void **state)
{
	char v[64], w[64];
	json_t *job;

	(void)state;
	add_node("reboot", "freboot", B_REBOOT, NULL);
	baseline("freboot");
	refresh("reboot");
	config(B_REBOOT, "{\"reboot_during_update_s\":12,\"retry_after\":0}");
	job = act("POST", "/v1/nodes/reboot/firmware/update", "{\"components\":[\"bmc\"]}");
	expect(job, "succeeded");
	json_decref(job);
	assert_true(fault_count(B_REBOOT, "unreachable_drops") >= 1);
	assert_string_equal(mock_fw(B_REBOOT, "BMC", v, sizeof v), "2.1.0");
	assert_string_equal(stored_bmc("reboot", w, sizeof w), v);
	assert_int_equal(flashes(B_REBOOT, "BMC"), 1);
}

/* Unreachable for 2 s: the job succeeds within its first attempt. Unreachable for longer than
 * the job can wait (a small per-request budget): a terminal failed job, bmc_unreachable,
 * nothing flashed, the stored version as it was. */
static void
test_unreachable(void **state)
{
	char before[64], after[64];
	json_t *job;

	(void)state;
	add_node("blip", "fblip", B_DOWN_SHORT, NULL);
	config(B_DOWN_SHORT, "{\"unreachable_s\":2}");
	job = act("PUT", "/v1/nodes/blip/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	assert_int_equal(num(job, "attempts"), 1);
	json_decref(job);
	assert_int_equal(resets(B_DOWN_SHORT), 1);

	add_node("down", "fdown", B_DOWN_LONG, "{\"retry_tries\":3,\"retry_wait_ms\":1000}");
	baseline("fdown");
	refresh("down");
	stored_bmc("down", before, sizeof before);
	assert_string_equal(before, "2.0.0");
	config(B_DOWN_LONG, "{\"unreachable_s\":14}");
	job = act("POST", "/v1/nodes/down/firmware/update", "{\"components\":[\"bmc\"]}");
	expect(job, "failed");
	if (strcmp(code_of(job), "bmc_unreachable") != 0 ||
	    strstr(str(json_object_get(job, "error"), "message"), "tries") == NULL)
		fail_msg("%s: %s", code_of(job), str(json_object_get(job, "error"), "message"));
	print_message("unreachable: failed after %lld attempts, %s .. %s: %s\n",
	              (long long)num(job, "attempts"), str(job, "started_at"),
	              str(job, "finished_at"), str(json_object_get(job, "error"), "message"));
	json_decref(job);
	assert_string_equal(stored_bmc("down", after, sizeof after), before);
	await_mock(B_DOWN_LONG, 30);
	assert_int_equal(flashes(B_DOWN_LONG, "BMC"), 0);
}

/* A BMC clock two hours ahead or behind (task StartTime/EndTime, Date): the update neither
 * times out nor ends early; the version is the BMC's and it was flashed once. */
static void
test_clock_skew(void **state)
{
	static const struct {
		const char *node;
		int bmc;
		const char *cfg;
	} cases[] = {
	        {"ahead", B_SKEW_AHEAD, "{\"clock_skew_s\":7200,\"retry_after_date\":true}"},
	        {"behind", B_SKEW_BEHIND, "{\"clock_skew_s\":-7200,\"retry_after_date\":true}"},
	};
	char v[64], w[64];
	json_t *job, *st;
	size_t i;

	(void)state;
	baseline("fskew");
	for (i = 0; i < 2; i++) {
		add_node(cases[i].node, "fskew", cases[i].bmc, NULL);
		refresh(cases[i].node);
		config(cases[i].bmc, cases[i].cfg);
		/* The update's 503s (the BMC's reboot into its new image) carry an HTTP-date
		 * Retry-After on the BMC's skewed clock. */
		job = act("POST",
		          i == 0 ? "/v1/nodes/ahead/firmware/update"
		                 : "/v1/nodes/behind/firmware/update",
		          "{\"components\":[\"bmc\"]}");
		expect(job, "succeeded");
		json_decref(job);
		st = mock_get(&M, cases[i].bmc, "/__mock/state");
		{
			const char *k;
			json_t *t;

			assert_int_equal(json_object_size(json_object_get(st, "tasks")), 1);
			json_object_foreach(json_object_get(st, "tasks"), k, t)
			{
				assert_string_equal(json_string_value(t), "Completed");
			}
		}
		json_decref(st);
		assert_string_equal(mock_fw(cases[i].bmc, "BMC", v, sizeof v), "2.1.0");
		assert_string_equal(stored_bmc(cases[i].node, w, sizeof w), v);
		assert_int_equal(flashes(cases[i].bmc, "BMC"), 1);
	}
}

/* The retry options are checked like every option: a bad value gets 400 and creates nothing. */
static void
test_options_bad(void **state)
{
	static const char *const bad[] = {
	        "{\"retry_tries\":0}",
	        "{\"retry_tries\":21}",
	        "{\"retry_tries\":\"5\"}",
	        "{\"retry_wait_ms\":-1}",
	        "{\"retry_wait_ms\":600001}",
	        "{\"retry_wait_ms\":1.5}",
	        NULL,
	};
	long before = count_all(&S, "/v1/nodes");
	struct reply r;
	int i;

	(void)state;
	for (i = 0; bad[i]; i++) {
		char body[400];

		snprintf(body, sizeof body,
		         "{\"name\":\"badopt\",\"bmc\":{\"driver\":\"redfish\",\"address\":"
		         "\"127.0.0.1\",\"options\":%s}}",
		         bad[i]);
		req(&S, S.admin, "POST", "/v1/nodes", "application/json", body, strlen(body), NULL,
		    &r);
		if (r.status != 400)
			fail_msg("%s: %ld %s", bad[i], r.status, r.body ? r.body : "");
		assert_non_null(json_object_get(r.json, "error"));
		reply_free(&r);
	}
	/* An ipmi node cannot have them. */
	req(&S, S.admin, "POST", "/v1/nodes", "application/json",
	    "{\"name\":\"badopt\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"127.0.0.1\","
	    "\"options\":{\"retry_tries\":3}}}",
	    strlen("{\"name\":\"badopt\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"127.0.0.1\","
	           "\"options\":{\"retry_tries\":3}}}"),
	    NULL, &r);
	assert_int_equal(r.status, 400);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/nodes"), before);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_options_bad),       cmocka_unit_test(test_rate_20),
	        cmocka_unit_test(test_rate_50),           cmocka_unit_test(test_root_503),
	        cmocka_unit_test(test_session_dropped),   cmocka_unit_test(test_lost_answer),
	        cmocka_unit_test(test_reboot_mid_update), cmocka_unit_test(test_unreachable),
	        cmocka_unit_test(test_clock_skew),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
