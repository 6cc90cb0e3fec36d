/*
 * The BMC's own upkeep through the real rackpilotd: the identify light, a BMC reset that waits
 * for the BMC to come back, and credential rotation, against the fake driver (the API's
 * checks), the Redfish mock (tests/redfish/mock_bmc.py: accounts, PasswordChangeRequired,
 * password policies, Manager.Reset, LocationIndicatorActive/IndicatorLED) and ipmi_sim
 * (tests/ipmi/bmcsim.sh: Set User Password, Chassis Identify, Cold Reset). Every outcome is
 * checked at the peer: the mock's state and counters, ipmitool with the new password. A
 * rotation interrupted by kill -9 between the BMC taking the new password and Rackpilot
 * storing it ends with the one password that works stored.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct mock M;
static char run[128];
static int port;

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Queue through method+path with body (json_pack format and args), expect 202, wait for the
 * job; the job object (caller frees). */
static json_t *
run_job(const char *method, const char *path, int timeout_s, const char *fmt, ...)
{
	struct reply r;
	json_t *body = NULL, *job;
	char *text = NULL, id[64];
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		body = json_vpack_ex(NULL, 0, fmt, ap);
		va_end(ap);
		assert_non_null(body);
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
	}
	if (req(&S, S.admin, method, path, text ? "application/json" : NULL, text,
	        text ? strlen(text) : 0, NULL, &r) != 202)
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body ? r.body : "");
	free(text);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	job = wait_job(&S, id, timeout_s);
	return job;
}

static const char *
job_state(json_t *job)
{
	return str(job, "state");
}

static const char *
job_error(json_t *job)
{
	return str(json_object_get(job, "error"), "code") ?: "";
}

static json_t *
result(json_t *job)
{
	return json_object_get(job, "result");
}

static void
mock_node(const char *name, int i)
{
	json_t *st = mock_get(&M, i, "/__mock/state");

	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name", name,
	          "serial", str(st, "serial"), "system_uuid", str(st, "uuid"), "bmc", "driver",
	          "redfish", "address", "127.0.0.1", "port", M.base + i, "username", "admin",
	          "password", "secret", "options", "scheme", "http", "timeout_ms", 3000);
	json_decref(st);
}

/* The mock's knob (a string), or "". */
static void
mock_knob(int i, const char *knob, char *out, size_t len)
{
	json_t *c = mock_get(&M, i, "/__mock/config");

	snprintf(out, len, "%s", str(c, knob) ?: "");
	json_decref(c);
}

static json_int_t
mock_count(int i, const char *key)
{
	json_t *st = mock_get(&M, i, "/__mock/state");
	json_int_t n = json_integer_value(json_object_get(st, key));

	json_decref(st);
	return n;
}

static int
mock_led(int i)
{
	json_t *st = mock_get(&M, i, "/__mock/state");
	int on = json_is_true(json_object_get(json_object_get(st, "indicator"), "active"));

	json_decref(st);
	return on;
}

static int
setup(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	int i;

	(void)state;
	server_start(&S, NULL, args);
	mock_start(&M, 8, NULL);
	make_node(&S, "{s:s, s:{s:s, s:s, s:s}}", "name", "fk", "bmc", "driver", "fake", "username",
	          "admin", "password", "factory");
	for (i = 0; i < 8; i++) {
		char name[8];

		snprintf(name, sizeof name, "rf%d", i);
		mock_node(name, i);
	}
	return 0;
}

static int
teardown(void **state)
{
	mock_stop(&M);
	if (run[0]) {
		sh_rc("sh %s/tests/ipmi/bmcsim.sh stop %s >/dev/null 2>&1", rp_test_src, run);
		sh("rm -rf '%s'", run);
	}
	return group_teardown(state);
}

/* A file of ipmi_sim BMC i (tests/ipmi/README.md), its first line. */
static const char *
bmc_file(int i, const char *name, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof path, "%s/bmc%d/%s", run, i, name);
	slurp(path, buf, len);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* ipmi_sim BMCs with the mc plug-in (passwords as real BMCs keep them, Cold Reset, Identify);
 * BMC 2 takes 16-byte passwords only. Nodes i1, i2. */
static void
ipmi_start(void)
{
	int i;

	for (i = 0; i < 8; i++) {
		snprintf(run, sizeof run, "/tmp/rp-bmcops-%d-%d", (int)getpid(), i);
		port = free_ports(2);
		sh("rm -rf '%s' && mkdir -p '%s'", run, run);
		if (sh_rc("MC_PLUGIN=1 BMC_RESET_OUTAGE=4 BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh "
		          "start %s 2 >/dev/null 2>&1",
		          port, rp_test_src, run) == 0)
			break;
	}
	if (i == 8) {
		run[0] = '\0';
		if (getenv("CI") && !strcmp(getenv("CI"), "true"))
			fail_msg("cannot start ipmi_sim BMCs with the mc plug-in (tests/ipmi)");
		print_message("skipped: no ipmi_sim with its plug-in here\n");
		exit(77);
	}
	/* The second BMC takes at most 16 characters (written before its first change). */
	sh("printf '16\\n' > '%s/bmc2/password_max'", run);
	for (i = 1; i <= 2; i++) {
		char name[8];

		snprintf(name, sizeof name, "i%d", i);
		make_node(&S, "{s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i}}}", "name", name,
		          "bmc", "driver", "ipmi", "address", "127.0.0.1", "port", port + i - 1,
		          "username", "admin", "password", "password", "options", "workarounds",
		          "opensesspriv", "session_timeout_ms", 2000);
	}
}

/* ipmitool with the BMC's password as the BMC itself says it: 0 when it logs in. */
static int
ipmitool_ok(int i, const char *password)
{
	return sh_rc("ipmitool -I lanplus -C 3 -H 127.0.0.1 -p %d -U admin -P '%s' mc info "
	             ">/dev/null 2>&1",
	             port + i - 1, password);
}

/* Every input error is a 400 (403 for a role) that queues nothing. */
static void
test_refusals(void **state)
{
	static const char *const bad_identify[] = {
	        "{}",
	        "{\"on\":\"yes\"}",
	        "{\"on\":true,\"seconds\":0}",
	        "{\"on\":true,\"seconds\":86401}",
	        "{\"on\":false,\"seconds\":5}",
	        "{\"on\":true,\"colour\":\"blue\"}",
	        "[]",
	};
	char op[128];
	struct reply r;
	long before = count_all(&S, "/v1/jobs");
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad_identify / sizeof bad_identify[0]; i++) {
		req(&S, S.admin, "PUT", "/v1/nodes/fk/identify", "application/json",
		    bad_identify[i], strlen(bad_identify[i]), NULL, &r);
		if (r.status != 400)
			fail_msg("identify %s: %ld %s", bad_identify[i], r.status, r.body);
		reply_free(&r);
	}
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/nodes/fk/bmc/reset", &r, "{s:i}", "timeout_s", 5),
	        400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/fk/bmc/credentials/rotate", &r,
	                      "{s:s}", "password", ""),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/fk/bmc/credentials/rotate", &r,
	                      "{s:i}", "password", 12345678),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/fk/bmc/credentials/rotate", &r,
	                      "{s:s}", "length", "20"),
	                 400);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/nodes/nosuch/bmc/credentials/rotate", &r, NULL),
	        404);
	reply_free(&r);
	/* An explicit password is an admin's alone. */
	make_token(&S, "operator", op);
	assert_int_equal(call(&S, op, "POST", "/v1/nodes/fk/bmc/credentials/rotate", &r, "{s:s}",
	                      "password", "Op3rator-Pass"),
	                 403);
	assert_error(&r, 403, "FORBIDDEN");
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/jobs"), before);
	/* A node without a BMC has nothing to rotate. */
	make_node(&S, "{s:s}", "name", "nobmc");
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/nodes/nobmc/bmc/credentials/rotate", &r, NULL), 409);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/jobs"), before);
}

/* The fake driver: the light, a reset, and a rotation the fake BMC then insists on. */
static void
test_fake(void **state)
{
	char op[128];
	struct reply r;
	json_t *j;

	(void)state;
	j = run_job("PUT", "/v1/nodes/fk/identify", 20, "{s:b}", "on", 1);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_true(json_object_get(result(j), "lit")));
	json_decref(j);
	j = run_job("PUT", "/v1/nodes/fk/identify", 20, "{s:b}", "on", 0);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_false(json_object_get(result(j), "lit")));
	json_decref(j);
	j = run_job("POST", "/v1/nodes/fk/bmc/reset", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	/* An operator's rotation generates the password; nothing shows it. */
	make_token(&S, "operator", op);
	assert_int_equal(call(&S, op, "POST", "/v1/nodes/fk/bmc/credentials/rotate", &r, NULL),
	                 202);
	j = wait_job(&S, str(r.json, "id"), 20);
	reply_free(&r);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_false(json_object_get(json_object_get(j, "params"), "explicit")));
	json_decref(j);
	/* The stored password is the one the fake BMC now takes: a verify opens it. */
	j = run_job("POST", "/v1/nodes/fk/verify", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	/* An admin's explicit password: set, proved and stored, never echoed. */
	j = run_job("POST", "/v1/nodes/fk/bmc/credentials/rotate", 20, "{s:s}", "password",
	            "Explicit-Fake-Pass-9");
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	j = run_job("POST", "/v1/nodes/fk/verify", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	/* The old factory password is refused now. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/fk", &r, "{s:{s:s}}", "bmc",
	                      "password", "factory"),
	                 200);
	reply_free(&r);
	j = run_job("POST", "/v1/nodes/fk/verify", 20, NULL);
	assert_string_equal(job_state(j), "failed");
	assert_string_equal(job_error(j), "bmc_auth");
	json_decref(j);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/fk", &r, "{s:{s:s}}", "bmc",
	                      "password", "Explicit-Fake-Pass-9"),
	                 200);
	reply_free(&r);
	/* Nothing the API gives shows a password. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?node=fk&limit=1000", &r, NULL), 200);
	assert_null(strstr(r.body, "Explicit-Fake-Pass-9"));
	assert_true(strstr(r.body, "bmc.credentials_rotated") != NULL);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/jobs?node=fk&limit=1000", &r, NULL), 200);
	assert_null(strstr(r.body, "Explicit-Fake-Pass-9"));
	reply_free(&r);
	assert_null(strstr(slurp(S.log, (char[65536]){0}, 65536), "Explicit-Fake-Pass-9"));
}

/* Redfish: LocationIndicatorActive, IndicatorLED, none; a timed light goes off by itself, and
 * a newer request takes it over. */
static void
test_redfish_identify(void **state)
{
	json_t *j, *first;
	struct reply r;
	char id[64];

	(void)state;
	j = run_job("PUT", "/v1/nodes/rf0/identify", 20, "{s:b}", "on", 1);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_true(json_object_get(result(j), "lit")));
	json_decref(j);
	assert_true(mock_led(0));
	j = run_job("PUT", "/v1/nodes/rf0/identify", 20, "{s:b}", "on", 0);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	assert_false(mock_led(0));
	/* A pre-2020 BMC: IndicatorLED only. */
	mock_post(&M, 1, "/__mock/config", "{\"indicator\":\"legacy\"}");
	j = run_job("PUT", "/v1/nodes/rf1/identify", 20, "{s:b}", "on", 1);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	{
		json_t *st = mock_get(&M, 1, "/__mock/state");

		assert_string_equal(str(json_object_get(st, "indicator"), "led"), "Blinking");
		json_decref(st);
	}
	/* None at all: said clearly. */
	mock_post(&M, 2, "/__mock/config", "{\"indicator\":\"none\"}");
	j = run_job("PUT", "/v1/nodes/rf2/identify", 20, "{s:b}", "on", 1);
	assert_string_equal(job_state(j), "failed");
	assert_string_equal(job_error(j), "unsupported");
	json_decref(j);
	/* Timed: on for 2 s, then the job turns it off. */
	j = run_job("PUT", "/v1/nodes/rf0/identify", 30, "{s:b, s:i}", "on", 1, "seconds", 2);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_true(json_object_get(result(j), "expired")));
	json_decref(j);
	assert_false(mock_led(0));
	/* A newer request takes the light over: the older one's timer does not turn it off. */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/rf0/identify", &r, "{s:b, s:i}", "on",
	                      1, "seconds", 2),
	                 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	j = run_job("PUT", "/v1/nodes/rf0/identify", 20, "{s:b}", "on", 1);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	first = wait_job(&S, id, 30);
	assert_string_equal(job_state(first), "succeeded");
	assert_true(json_is_true(json_object_get(result(first), "superseded")));
	json_decref(first);
	assert_true(mock_led(0));
}

/* Redfish Manager.Reset: the BMC goes away for 6 s; the job waits and reads it again. */
static void
test_redfish_reset(void **state)
{
	json_t *j, *st;

	(void)state;
	mock_post(&M, 3, "/__mock/config", "{\"bmc_reset_s\":6}");
	st = mock_get(&M, 3, "/__mock/state");
	j = run_job("POST", "/v1/nodes/rf3/bmc/reset", 60, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("reset: %s", json_dumps(j, 0));
	/* It waited for the BMC: its answer came after the outage. */
	assert_true(json_integer_value(json_object_get(result(j), "back_after_ms")) >= 5000);
	assert_string_equal(str(json_object_get(result(j), "identity"), "serial"),
	                    str(st, "serial"));
	json_decref(j);
	assert_int_equal(mock_count(3, "manager_resets"), 1);
	json_decref(st);
}

/* Redfish rotation: the default policy; a BMC that takes 16 letters and digits at most; an
 * account that must change its password first (OpenBMC's factory state); a refused explicit
 * password. */
static void
test_redfish_rotate(void **state)
{
	char pw[128];
	json_t *j;
	size_t i;

	(void)state;
	j = run_job("POST", "/v1/nodes/rf4/bmc/credentials/rotate", 30, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("rotate: %s", json_dumps(j, 0));
	json_decref(j);
	assert_int_equal(mock_count(4, "password_changes"), 1);
	mock_knob(4, "password", pw, sizeof pw);
	assert_string_not_equal(pw, "secret");
	assert_int_equal(strlen(pw), 20);
	j = run_job("POST", "/v1/nodes/rf4/verify", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);

	/* At most 16, letters and digits only: learned from the refusal, one more try. */
	mock_post(&M, 5, "/__mock/config", "{\"password_max\":16,\"password_charset\":\"alnum\"}");
	j = run_job("POST", "/v1/nodes/rf5/bmc/credentials/rotate", 30, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("rotate: %s", json_dumps(j, 0));
	assert_true(json_is_true(json_object_get(result(j), "policy_retry")));
	json_decref(j);
	mock_knob(5, "password", pw, sizeof pw);
	assert_int_equal(strlen(pw), 16);
	for (i = 0; pw[i]; i++)
		assert_true((pw[i] >= 'a' && pw[i] <= 'z') || (pw[i] >= 'A' && pw[i] <= 'Z') ||
		            (pw[i] >= '0' && pw[i] <= '9'));
	assert_int_equal(mock_count(5, "password_changes"), 1);

	/* PasswordChangeRequired: every job fails saying so, until a rotation. */
	mock_post(&M, 6, "/__mock/config", "{\"password_change_required\":true}");
	j = run_job("POST", "/v1/nodes/rf6/verify", 20, NULL);
	assert_string_equal(job_state(j), "failed");
	assert_non_null(
	        strstr(str(json_object_get(j, "error"), "message"), "PasswordChangeRequired"));
	json_decref(j);
	j = run_job("POST", "/v1/nodes/rf6/bmc/credentials/rotate", 30, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("rotate: %s", json_dumps(j, 0));
	json_decref(j);
	mock_knob(6, "password_change_required", pw, sizeof pw);
	j = run_job("POST", "/v1/nodes/rf6/verify", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);

	/* An explicit password the BMC refuses: the old one stays, stored and working. */
	j = run_job("POST", "/v1/nodes/rf7/bmc/credentials/rotate", 30, "{s:s}", "password",
	            "Sh0rt-7");
	assert_string_equal(job_state(j), "failed");
	assert_string_equal(job_error(j), "password_rejected");
	{
		char *text = json_dumps(j, 0);

		assert_null(strstr(text, "Sh0rt-7"));
		free(text);
	}
	json_decref(j);
	mock_knob(7, "password", pw, sizeof pw);
	assert_string_equal(pw, "secret");
	j = run_job("POST", "/v1/nodes/rf7/verify", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	/* Nothing is left pending: the next rotation generates a new one and works. */
	j = run_job("POST", "/v1/nodes/rf7/bmc/credentials/rotate", 30, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	assert_int_equal(mock_count(7, "password_changes"), 1);
}

/* A class's policy: rotate at enrolment (node creation, import), length and symbols. */
static void
test_enroll(void **state)
{
	struct reply r;
	json_t *jobs, *j;
	char pw[128];
	const char *manifest = "{\"nodes\":[{\"name\":\"im1\",\"bmc\":{\"driver\":\"fake\","
	                       "\"username\":\"admin\",\"password\":\"factory\"}},{\"name\":"
	                       "\"im2\",\"bmc\":{\"driver\":\"fake\",\"username\":\"admin\","
	                       "\"password\":\"factory\"}},{\"name\":\"im3\"}]}";
	size_t i;

	(void)state;
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/rot", &r, "{s:{s:i}}",
	                      "bmc_credentials", "length", 7),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/rot", &r, "{s:{s:b}}",
	                      "bmc_credentials", "rotate_now", 1),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/rot", &r, "{s:{s:b, s:i, s:b}}",
	                      "bmc_credentials", "rotate_on_enroll", 1, "length", 12, "symbols", 0),
	                 201);
	assert_int_equal(json_integer_value(json_object_get(
	                         json_object_get(r.json, "bmc_credentials"), "length")),
	                 12);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:s}}", "name", "en1", "node_class", "rot", "bmc",
	          "driver", "fake", "username", "admin", "password", "factory");
	assert_int_equal(call(&S, S.admin, "GET", "/v1/jobs?node=en1&type=bmc_rotate", &r, NULL),
	                 200);
	jobs = json_object_get(r.json, "items");
	assert_int_equal(json_array_size(jobs), 1);
	j = wait_job(&S, str(json_array_get(jobs, 0), "id"), 20);
	reply_free(&r);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_true(json_object_get(json_object_get(j, "params"), "on_enroll")));
	json_decref(j);
	/* Import: asked for per request, for the nodes that have a BMC. */
	req(&S, S.admin, "POST", "/v1/import?rotate_on_enroll=maybe", "application/json", manifest,
	    strlen(manifest), NULL, &r);
	assert_int_equal(r.status, 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/im1", &r, NULL), 404);
	reply_free(&r);
	req(&S, S.admin, "POST", "/v1/import?rotate_on_enroll=true", "application/json", manifest,
	    strlen(manifest), NULL, &r);
	if (r.status != 200 && r.status != 201)
		fail_msg("import: %ld %s", r.status, r.body);
	assert_int_equal(json_integer_value(json_object_get(r.json, "rotations_queued")), 2);
	reply_free(&r);
	for (i = 1; i <= 2; i++) {
		char path[96];

		snprintf(path, sizeof path, "/v1/jobs?node=im%zu&type=bmc_rotate", i);
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		j = wait_job(&S, str(json_array_get(json_object_get(r.json, "items"), 0), "id"),
		             20);
		reply_free(&r);
		assert_string_equal(job_state(j), "succeeded");
		json_decref(j);
	}
	/* The policy shapes the password at a real BMC: 12 letters and digits. */
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/rf3", &r, "{s:s}", "node_class", "rot"), 200);
	reply_free(&r);
	j = run_job("POST", "/v1/nodes/rf3/bmc/credentials/rotate", 30, NULL);
	assert_string_equal(job_state(j), "succeeded");
	assert_true(json_is_false(json_object_get(result(j), "policy_retry")));
	json_decref(j);
	mock_knob(3, "password", pw, sizeof pw);
	assert_int_equal(strlen(pw), 12);
	for (i = 0; pw[i]; i++)
		assert_true((pw[i] >= 'a' && pw[i] <= 'z') || (pw[i] >= 'A' && pw[i] <= 'Z') ||
		            (pw[i] >= '0' && pw[i] <= '9'));
}

/* kill -9 between the BMC taking the new password and Rackpilot storing it: the BMC holds the
 * answer to the PATCH (slow_next_answers), rackpilotd dies meanwhile. After the restart the
 * job tries the pending password first, finds that it works and stores it: exactly one working
 * password, never a lock-out, and the BMC changed its password once. */
static void
test_redfish_crash(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	char id[64], dir[256], pw[128];
	struct reply r;
	json_t *j;
	int i;

	(void)state;
	mock_post(&M, 1, "/__mock/config", "{\"slow_next_answers\":1,\"slow_answer_s\":20}");
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/nodes/rf1/bmc/credentials/rotate", &r, NULL), 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	for (i = 0; i < 200 && mock_count(1, "password_changes") == 0; i++)
		usleep(50000);
	assert_int_equal(mock_count(1, "password_changes"), 1);
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGKILL);
	mock_knob(1, "password", pw, sizeof pw);
	assert_string_not_equal(pw, "secret");
	server_start(&S, dir, args);
	j = wait_job(&S, id, 90);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("rotation after kill -9: %s", json_dumps(j, 0));
	assert_string_equal(str(result(j), "verified"), "pending");
	json_decref(j);
	assert_int_equal(mock_count(1, "password_changes"), 1);
	j = run_job("POST", "/v1/nodes/rf1/verify", 20, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	assert_int_equal(count_all(&S, "/v1/events?node=rf1&action=bmc.credentials_rotated"), 1);
}

/* IPMI through real ipmi_sim BMCs: Chassis Identify (interval, force), Cold Reset (the BMC is
 * silent 4 s, its resets file counts it), and Set User Password, proved by ipmitool with the
 * password the BMC now has; a BMC that takes 16 characters at most gets a second, compatible
 * password. */
static void
test_ipmi(void **state)
{
	char buf[256], pw[256];
	json_t *j;

	(void)state;
	ipmi_start();
	j = run_job("PUT", "/v1/nodes/i1/identify", 30, "{s:b, s:i}", "on", 1, "seconds", 30);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("identify: %s", json_dumps(j, 0));
	assert_true(json_is_true(json_object_get(result(j), "timed_by_bmc")));
	json_decref(j);
	assert_string_equal(bmc_file(1, "identify", buf, sizeof buf), "30 0");
	j = run_job("PUT", "/v1/nodes/i1/identify", 30, "{s:b}", "on", 1);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	assert_string_equal(bmc_file(1, "identify", buf, sizeof buf), "0 1");
	j = run_job("PUT", "/v1/nodes/i1/identify", 30, "{s:b}", "on", 0);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
	assert_string_equal(bmc_file(1, "identify", buf, sizeof buf), "0 0");

	j = run_job("POST", "/v1/nodes/i1/bmc/reset", 90, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("reset: %s", json_dumps(j, 0));
	assert_true(json_integer_value(json_object_get(result(j), "back_after_ms")) >= 3000);
	assert_string_equal(str(json_object_get(result(j), "identity"), "serial"), "SIMSN0001");
	json_decref(j);
	assert_string_equal(bmc_file(1, "resets", buf, sizeof buf), "1");

	j = run_job("POST", "/v1/nodes/i1/bmc/credentials/rotate", 60, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("rotate: %s", json_dumps(j, 0));
	assert_true(json_is_false(json_object_get(result(j), "policy_retry")));
	json_decref(j);
	bmc_file(1, "password", pw, sizeof pw);
	assert_int_equal(strlen(pw), 20);
	assert_int_equal(ipmitool_ok(1, pw), 0);
	assert_int_not_equal(ipmitool_ok(1, "password"), 0);
	j = run_job("POST", "/v1/nodes/i1/verify", 30, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);

	j = run_job("POST", "/v1/nodes/i2/bmc/credentials/rotate", 60, NULL);
	if (strcmp(job_state(j), "succeeded"))
		fail_msg("rotate (16 at most): %s", json_dumps(j, 0));
	assert_true(json_is_true(json_object_get(result(j), "policy_retry")));
	json_decref(j);
	bmc_file(2, "password", pw, sizeof pw);
	assert_int_equal(strlen(pw), 16);
	assert_int_equal(ipmitool_ok(2, pw), 0);
	j = run_job("POST", "/v1/nodes/i2/verify", 30, NULL);
	assert_string_equal(job_state(j), "succeeded");
	json_decref(j);
}

/* A rack's credentials rotated as a rollout: waves (a canary, then two at a time), each node's
 * bmc_rotate job; a node without a BMC user is skipped with the reason; version_match is no
 * gate for it. */
static void
test_rollout(void **state)
{
	struct reply r;
	json_t *ro = NULL, *skipped;
	char id[64], path[96];
	int i, done = 0;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "rr"), 201);
	reply_free(&r);
	for (i = 1; i <= 5; i++) {
		char name[8];

		snprintf(name, sizeof name, "rr%d", i);
		make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:s}}", "name", name, "rack", "rr", "bmc",
		          "driver", "fake", "username", "admin", "password", "factory");
	}
	make_node(&S, "{s:s, s:s, s:{s:s}}", "name", "rr6", "rack", "rr", "bmc", "driver", "fake");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/rollouts", &r, "{s:s, s:{s:s}, s:{s:[s]}}",
	                      "kind", "bmc_credentials", "selector", "rack", "rr", "gate",
	                      "require", "version_match"),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:s}, s:{s:i, s:i}, s:i}", "kind", "bmc_credentials",
	                      "selector", "rack", "rr", "waves", "canary", 1, "batch", 2,
	                      "max_failures", 0),
	                 201);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	assert_int_equal(json_integer_value(json_object_get(r.json, "wave_count")), 3);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s", id);
	for (i = 0; i < 600 && !done; i++) {
		json_decref(ro);
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		ro = json_incref(r.json);
		reply_free(&r);
		done = !strcmp(str(ro, "state"), "completed") ||
		       !strcmp(str(ro, "state"), "paused");
		if (!done)
			usleep(100000);
	}
	if (strcmp(str(ro, "state"), "completed"))
		fail_msg("rollout: %s", json_dumps(ro, 0));
	skipped = json_object_get(ro, "skipped");
	assert_int_equal(json_array_size(skipped), 1);
	assert_string_equal(str(json_array_get(skipped, 0), "node"), "rr6");
	assert_non_null(strstr(str(json_array_get(skipped, 0), "reason"), "no username"));
	json_decref(ro);
	for (i = 1; i <= 5; i++) {
		char q[96], v[96];
		json_t *j;

		snprintf(q, sizeof q, "/v1/jobs?node=rr%d&type=bmc_rotate", i);
		assert_int_equal(call(&S, S.admin, "GET", q, &r, NULL), 200);
		assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
		assert_string_equal(
		        str(json_array_get(json_object_get(r.json, "items"), 0), "state"),
		        "succeeded");
		reply_free(&r);
		snprintf(v, sizeof v, "/v1/nodes/rr%d/verify", i);
		j = run_job("POST", v, 20, NULL);
		assert_string_equal(job_state(j), "succeeded");
		json_decref(j);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_refusals),         cmocka_unit_test(test_fake),
	        cmocka_unit_test(test_redfish_identify), cmocka_unit_test(test_redfish_reset),
	        cmocka_unit_test(test_redfish_rotate),   cmocka_unit_test(test_enroll),
	        cmocka_unit_test(test_redfish_crash),    cmocka_unit_test(test_ipmi),
	        cmocka_unit_test(test_rollout),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
