/*
 * The IPMI driver through the API, against OpenIPMI's ipmi_sim (tests/ipmi/bmcsim.sh).
 * Every action is checked from the BMC's side: ipmitool (an independent client) and the
 * simulator's own log of what it was told to do.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char run[64], run2[64];
static int base, base2;

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int
sim(const char *cmd, const char *dir, int port, int count)
{
	char line[700];

	if (count > 0)
		snprintf(line, sizeof line,
		         "BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s %d >/dev/null 2>&1", port,
		         rp_test_src, cmd, dir, count);
	else
		snprintf(line, sizeof line, "BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s >/dev/null 2>&1",
		         port, rp_test_src, cmd, dir);
	return system(line);
}

static void
sim_start(char *dir, size_t len, int *port, int count)
{
	int attempt;

	for (attempt = 0; attempt < 8; attempt++) {
		snprintf(dir, len, "/tmp/rp-ipmi-XXXXXX");
		assert_non_null(mkdtemp(dir));
		*port = 30000 + (int)((getpid() * 13 + attempt * 101 + count) % 1500) * 16;
		if (sim("start", dir, *port, count) == 0)
			return;
		rmdir(dir);
	}
	fail_msg("ipmi_sim did not start");
}

/* The BMC's own view, through ipmitool: "on" or "off". */
static void
ipmitool(int port, const char *args, char *out, size_t len)
{
	char cmd[400];
	FILE *p;

	snprintf(cmd, sizeof cmd,
	         "ipmitool -I lanplus -C 3 -H 127.0.0.1 -p %d -U admin -P password %s 2>&1", port, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	out[0] = '\0';
	while (fgets(out + strlen(out), (int)(len - strlen(out)), p))
		;
	pclose(p);
}

static int
power_at(int port)
{
	char out[256];

	ipmitool(port, "chassis power status", out, sizeof out);
	if (strstr(out, "is on"))
		return 1;
	if (strstr(out, "is off"))
		return 0;
	fail_msg("ipmitool: %s", out);
	return -1;
}

static void
read_file(const char *dir, int bmc, const char *name, char *out, size_t len)
{
	char path[300];
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "%s/bmc%d/%s", dir, bmc, name);
	out[0] = '\0';
	f = fopen(path, "r");
	if (f == NULL)
		return;
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	fclose(f);
}

static void
clear_log(const char *dir, int bmc)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof path, "%s/bmc%d/ops.log", dir, bmc);
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void
add_node(const char *name, int port, int n, const char *password)
{
	char serial[32], guid[64];

	snprintf(serial, sizeof serial, "SIMSN%04d", n);
	snprintf(guid, sizeof guid, "5253494d-0000-4000-8000-%012d", n);
	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i, s:i}}}", "name",
	          name, "serial", serial, "system_uuid", guid, "bmc", "driver", "ipmi", "address",
	          "127.0.0.1", "port", port, "username", "admin", "password", password, "options",
	          "workarounds", "opensesspriv", "session_timeout_ms", 2000,
	          "retransmission_timeout_ms", 500);
}

static int
setup(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};

	(void)state;
	sim_start(run, sizeof run, &base, 3);
	sim_start(run2, sizeof run2, &base2, 1);
	server_start(&S, NULL, args);
	add_node("ip1", base, 1, "password");
	add_node("ip2", base + 1, 2, "password");
	add_node("ip3", base + 2, 3, "wrong");
	add_node("ip4", base2, 1, "password");
	return 0;
}

static int
teardown(void **state)
{
	char cmd[200];

	sim("stop", run, base, 0);
	sim("stop", run2, base2, 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s %s", run, run2);
	if (system(cmd) != 0)
		return -1;
	return group_teardown(state);
}

static json_t *
act(const char *method, const char *path, const char *body)
{
	struct reply r;
	json_t *job;

	req(&S, S.admin, method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0,
	    NULL, &r);
	if (r.status != 202)
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body ? r.body : "");
	job = wait_job(&S, str(r.json, "id"), 60);
	reply_free(&r);
	return job;
}

static void
expect(json_t *job, const char *state)
{
	if (strcmp(str(job, "state"), state) != 0)
		fail_msg("%s job: expected %s, got %s: %s", str(job, "type"), state, str(job, "state"),
		         json_dumps(json_object_get(job, "error"), 0));
	json_decref(job);
}

static void
test_power(void **state)
{
	char log[512];

	(void)state;
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"on\"}"), "succeeded");
	assert_int_equal(power_at(base), 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"off\"}"), "succeeded");
	assert_int_equal(power_at(base), 0);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"on\"}"), "succeeded");
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set power 1\nset power 0\nset power 1\n");
	clear_log(run, 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"cycle\"}"), "succeeded");
	assert_int_equal(power_at(base), 1);
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set power 0\nset power 1\n");
	clear_log(run, 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"reset\"}"), "succeeded");
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set reset 1\n");
	clear_log(run, 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"soft_off\"}"), "succeeded");
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set shutdown 1\n");
	assert_int_equal(power_at(base), 0);
}

static void
test_boot(void **state)
{
	char out[1024], log[256];
	json_t *job, *w;

	(void)state;
	clear_log(run, 2);
	job = act("PUT", "/v1/nodes/ip2/boot", "{\"device\":\"pxe\"}");
	assert_string_equal(str(job, "state"), "succeeded");
	/* ipmi_sim keeps only the device: the UEFI request is reported as not taken. */
	w = json_object_get(json_object_get(job, "result"), "warnings");
	assert_true(json_array_size(w) >= 1);
	assert_string_equal(str(json_array_get(w, json_array_size(w) - 1), "field"), "mode");
	json_decref(job);
	read_file(run, 2, "ops.log", log, sizeof log);
	assert_non_null(strstr(log, "set boot pxe"));
	ipmitool(base + 1, "chassis bootparam get 5", out, sizeof out);
	assert_non_null(strstr(out, "Force PXE"));
	expect(act("PUT", "/v1/nodes/ip2/boot", "{\"device\":\"disk\",\"mode\":\"legacy\"}"),
	       "succeeded");
	ipmitool(base + 1, "chassis bootparam get 5", out, sizeof out);
	assert_non_null(strstr(out, "Force Boot from default Hard-Drive"));
}

static void
test_verify(void **state)
{
	struct reply r;
	json_t *job, *checks, *id;

	(void)state;
	job = act("POST", "/v1/nodes/ip1/verify", NULL);
	assert_string_equal(str(job, "state"), "succeeded");
	checks = json_object_get(json_object_get(job, "result"), "checks");
	assert_string_equal(str(json_array_get(checks, 0), "status"), "ok");
	assert_string_equal(str(json_array_get(checks, 1), "status"), "ok");
	id = json_object_get(json_object_get(job, "result"), "identity");
	assert_string_equal(str(id, "serial"), "SIMSN0001");
	assert_string_equal(str(id, "uuid"), "5253494d-0000-4000-8000-000000000001");
	assert_string_equal(str(id, "bmc_firmware"), "1.23");
	json_decref(job);
	/* The cables of ip1 and ip2 are swapped: ip1's address answers as machine 2. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/ip1", &r, "{s:{s:i}}", "bmc", "port",
	                      base + 1),
	                 200);
	reply_free(&r);
	job = act("POST", "/v1/nodes/ip1/verify", NULL);
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "identity_mismatch");
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"), "SIMSN0002"));
	json_decref(job);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/ip1", &r, "{s:{s:i}}", "bmc", "port",
	                      base),
	                 200);
	reply_free(&r);
}

static int64_t
ms_between(json_t *job, const char *a, const char *b)
{
	int64_t x = 0, y = 0;
	struct tm tm = {0};
	int ms1 = 0, ms2 = 0;

	sscanf(str(job, a), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms1);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	x = (int64_t)timegm(&tm) * 1000 + ms1;
	sscanf(str(job, b), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms2);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	y = (int64_t)timegm(&tm) * 1000 + ms2;
	return y - x;
}

static void
test_failures(void **state)
{
	struct reply r;
	json_t *job;
	char path[160], out[256];
	int i;

	(void)state;
	/* Wrong password: refused at once, not retried. */
	job = act("PUT", "/v1/nodes/ip3/power", "{\"target\":\"on\"}");
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_auth");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	assert_true(ms_between(job, "started_at", "finished_at") < 1000);
	json_decref(job);
	/* The BMC answers with an error completion code: a permanent refusal. */
	snprintf(path, sizeof path, "%s/bmc2/fail", run);
	fclose(fopen(path, "w"));
	job = act("PUT", "/v1/nodes/ip2/power", "{\"target\":\"on\"}");
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_rejected");
	json_decref(job);
	unlink(path);
	/* The BMC is down: an attempt fails within the configured 2 s session timeout; when it
	 * comes back, the retry succeeds. */
	sim("stop", run2, base2, 0);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/ip4/power", &r, "{s:s}", "target", "on"),
	                 202);
	snprintf(path, sizeof path, "/v1/jobs/%s", str(r.json, "id"));
	reply_free(&r);
	for (i = 0;; i++) {
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		if (json_integer_value(json_object_get(r.json, "attempts")) >= 1 &&
		    json_is_object(json_object_get(r.json, "error")))
			break;
		if (i == 80)
			fail_msg("no failed attempt recorded: %s", r.body);
		reply_free(&r);
		usleep(100000);
	}
	assert_string_equal(str(json_object_get(r.json, "error"), "code"), "bmc_unreachable");
	assert_true(ms_between(r.json, "started_at", "updated_at") < 4000);
	reply_free(&r);
	assert_int_equal(sim("start", run2, base2, 1), 0);
	job = wait_job(&S, path + strlen("/v1/jobs/"), 60);
	assert_string_equal(str(job, "state"), "succeeded");
	assert_true(json_integer_value(json_object_get(job, "attempts")) >= 2);
	json_decref(job);
	ipmitool(base2, "chassis power status", out, sizeof out);
	assert_non_null(strstr(out, "is on"));
}

/* A sweep records what the BMCs say, including changes made behind Rackpilot's back. */
static void
test_sweep(void **state)
{
	struct reply r;
	char out[256];
	int i, done = 0;

	(void)state;
	ipmitool(base + 1, "chassis power on", out, sizeof out);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/power/sync", &r, NULL), 202);
	reply_free(&r);
	for (i = 0; i < 200 && !done; i++) {
		usleep(50000);
		assert_int_equal(call(&S, S.admin, "GET", "/v1/power/sync", &r, NULL), 200);
		done = !json_is_true(json_object_get(r.json, "running")) &&
		       json_is_object(json_object_get(r.json, "last"));
		reply_free(&r);
	}
	assert_true(done);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/ip2", &r, NULL), 200);
	assert_string_equal(str(r.json, "power_state"), "on");
	reply_free(&r);
	assert_true(count_all(&S, "/v1/events?node=ip2&action=node.power") >= 1);
	/* ip3's wrong password counts against its BMC, like any failed contact. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/ip3", &r, NULL), 200);
	assert_non_null(strstr(str(json_object_get(r.json, "bmc"), "last_error"), "password"));
	reply_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_power),    cmocka_unit_test(test_boot),
	    cmocka_unit_test(test_verify),   cmocka_unit_test(test_failures),
	    cmocka_unit_test(test_sweep),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
