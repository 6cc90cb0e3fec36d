/*
 * The Redfish driver through the API, against the project's stateful mock BMC
 * (tests/redfish/mock_bmc.py). Every action is checked from the BMC's side through the
 * mock's own state, not only through Rackpilot's answers.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static struct mock M;
static struct mock TLS;
static char tmpdir[64];

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void
add_node(const char *name, struct mock *m, int i, int tls_verify, const char *password)
{
	json_t *st = mock_get(m, i, "/__mock/state");

	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:b, s:{s:s, s:i}}}", "name",
	          name, "serial", str(st, "serial"), "system_uuid", str(st, "uuid"), "bmc",
	          "driver", "redfish", "address", "127.0.0.1", "port", m->base + i, "username",
	          "admin", "password", password, "tls_verify", tls_verify, "options", "scheme",
	          m->tls ? "https" : "http", "timeout_ms", 3000);
	json_decref(st);
}

static int
setup(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	const char *tls_args[] = {"--tls", NULL, NULL, NULL};
	char cert[128], key[128], cmd[512];

	(void)state;
	server_start(&S, NULL, args);
	mock_start(&M, 7, NULL);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rp-tls-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(cert, sizeof cert, "%s/cert.pem", tmpdir);
	snprintf(key, sizeof key, "%s/key.pem", tmpdir);
	snprintf(cmd, sizeof cmd,
	         "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout %s "
	         "-out %s >/dev/null 2>&1",
	         key, cert);
	assert_int_equal(system(cmd), 0);
	tls_args[1] = cert;
	tls_args[2] = key;
	mock_start(&TLS, 1, tls_args);
	add_node("rf0", &M, 0, 1, "secret");
	add_node("rf1", &M, 1, 1, "secret");
	add_node("rf2", &M, 2, 1, "secret");
	add_node("rf3", &M, 3, 1, "secret");
	add_node("rf4", &M, 4, 1, "wrong-password");
	add_node("rf6", &M, 6, 1, "secret");
	add_node("rftls", &TLS, 0, 1, "secret");
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	mock_stop(&M);
	mock_stop(&TLS);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		return -1;
	return group_teardown(state);
}

/* Submit an action and wait for its job to end. */
static json_t *
act(const char *method, const char *path, const char *body)
{
	struct reply r;
	json_t *job;

	req(&S, S.admin, method, path, body ? "application/json" : NULL, body,
	    body ? strlen(body) : 0, NULL, &r);
	if (r.status != 202)
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body ? r.body : "");
	job = wait_job(&S, str(r.json, "id"), 30);
	reply_free(&r);
	return job;
}

static void
expect(json_t *job, const char *state)
{
	if (strcmp(str(job, "state"), state) != 0)
		fail_msg("job %s: expected %s, got %s: %s", str(job, "type"), state,
		         str(job, "state"), json_dumps(json_object_get(job, "error"), 0));
}

/* Reset actions the BMC accepted, in order, as "On,ForceOff,...". */
static void
resets(struct mock *m, int i, char *out, size_t n)
{
	json_t *st = mock_get(m, i, "/__mock/state"), *a;
	size_t k;

	out[0] = '\0';
	json_array_foreach(json_object_get(st, "actions"), k, a)
	{
		const char *t = str(a, "reset_type");
		size_t l = strlen(out);

		if (t && json_integer_value(json_object_get(a, "status")) < 300)
			snprintf(out + l, n - l, "%s%s", l ? "," : "", t);
	}
	json_decref(st);
}

static void
test_power(void **state)
{
	json_t *job, *st;
	char log[256];

	(void)state;
	job = act("PUT", "/v1/nodes/rf0/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	json_decref(job);
	st = mock_get(&M, 0, "/__mock/state");
	assert_string_equal(str(st, "power"), "On");
	assert_int_equal(json_array_size(json_object_get(st, "boots")), 1);
	json_decref(st);
	job = act("PUT", "/v1/nodes/rf0/power", "{\"target\":\"off\"}");
	expect(job, "succeeded");
	json_decref(job);
	job = act("PUT", "/v1/nodes/rf0/power", "{\"target\":\"cycle\"}");
	expect(job, "succeeded"); /* off, so: on */
	json_decref(job);
	job = act("PUT", "/v1/nodes/rf0/power", "{\"target\":\"cycle\"}");
	expect(job, "succeeded");
	json_decref(job);
	job = act("PUT", "/v1/nodes/rf0/power", "{\"target\":\"reset\"}");
	expect(job, "succeeded");
	json_decref(job);
	/* The OS ignores ACPI: graceful first, then hard after the wait. */
	mock_post(&M, 0, "/__mock/config", "{\"ignore_acpi\":true}");
	job = act("PUT", "/v1/nodes/rf0/power", "{\"target\":\"soft_off\",\"timeout_s\":1}");
	expect(job, "succeeded");
	assert_non_null(strstr(str(json_object_get(job, "result"), "note"), "hard"));
	json_decref(job);
	mock_post(&M, 0, "/__mock/config", "{\"ignore_acpi\":false}");
	resets(&M, 0, log, sizeof log);
	assert_string_equal(log,
	                    "On,ForceOff,On,PowerCycle,ForceRestart,GracefulShutdown,ForceOff");
	st = mock_get(&M, 0, "/__mock/state");
	assert_string_equal(str(st, "power"), "Off");
	json_decref(st);
}

static void
test_boot_once(void **state)
{
	json_t *job, *st, *boots;

	(void)state;
	job = act("PUT", "/v1/nodes/rf1/boot", "{\"device\":\"pxe\"}");
	expect(job, "succeeded");
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(job, "result"), "warnings")), 0);
	json_decref(job);
	st = mock_get(&M, 1, "/__mock/state");
	assert_string_equal(str(json_object_get(st, "boot"), "target"), "Pxe");
	assert_string_equal(str(json_object_get(st, "boot"), "enabled"), "Once");
	assert_string_equal(str(json_object_get(st, "boot"), "mode"), "UEFI");
	json_decref(st);
	/* The next boot is from PXE; the override is then spent. */
	job = act("PUT", "/v1/nodes/rf1/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	json_decref(job);
	job = act("PUT", "/v1/nodes/rf1/power", "{\"target\":\"cycle\"}");
	expect(job, "succeeded");
	json_decref(job);
	st = mock_get(&M, 1, "/__mock/state");
	boots = json_object_get(st, "boots");
	assert_int_equal(json_array_size(boots), 2);
	assert_string_equal(str(json_array_get(boots, 0), "booted_from"), "Pxe");
	assert_string_equal(str(json_array_get(boots, 1), "booted_from"), "Hdd");
	assert_string_equal(str(json_object_get(st, "boot"), "enabled"), "Disabled");
	json_decref(st);
	/* Persistent disk boot, legacy mode. */
	job = act("PUT", "/v1/nodes/rf1/boot",
	          "{\"device\":\"disk\",\"persistent\":true,\"mode\":\"legacy\"}");
	expect(job, "succeeded");
	json_decref(job);
	st = mock_get(&M, 1, "/__mock/state");
	assert_string_equal(str(json_object_get(st, "boot"), "target"), "Hdd");
	assert_string_equal(str(json_object_get(st, "boot"), "enabled"), "Continuous");
	assert_string_equal(str(json_object_get(st, "boot"), "mode"), "Legacy");
	json_decref(st);
}

/* A BMC that answers 200 and keeps something else is reported, not trusted. */
static void
test_boot_quirk(void **state)
{
	json_t *job, *w;

	(void)state;
	mock_post(&M, 2, "/__mock/config", "{\"quirk_legacy\":true}");
	job = act("PUT", "/v1/nodes/rf2/boot", "{\"device\":\"pxe\",\"mode\":\"uefi\"}");
	expect(job, "succeeded");
	w = json_object_get(json_object_get(job, "result"), "warnings");
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(str(json_array_get(w, 0), "field"), "mode");
	assert_non_null(strstr(str(json_array_get(w, 0), "reason"), "legacy"));
	json_decref(job);
	mock_post(&M, 2, "/__mock/config", "{\"quirk_legacy\":false}");
}

static void
test_verify(void **state)
{
	struct reply r;
	json_t *job, *checks;

	(void)state;
	job = act("POST", "/v1/nodes/rf0/verify", NULL);
	expect(job, "succeeded");
	checks = json_object_get(json_object_get(job, "result"), "checks");
	assert_string_equal(str(json_array_get(checks, 0), "status"), "ok");
	assert_string_equal(str(json_array_get(checks, 1), "status"), "ok");
	json_decref(job);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/rf0", &r, NULL), 200);
	assert_non_null(
	        strstr(str(json_object_get(json_object_get(r.json, "bmc"), "identity"), "serial"),
	               "MOCK"));
	reply_free(&r);
	/* The node enrolled at rf3's address is really another machine. */
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/rf3", &r, "{s:s}", "serial", "EXPECTED-123"),
	        200);
	reply_free(&r);
	job = act("POST", "/v1/nodes/rf3/verify", NULL);
	expect(job, "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "identity_mismatch");
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"), "EXPECTED-123"));
	json_decref(job);
	assert_int_equal(count_all(&S, "/v1/events?node=rf3&action=job.failed"), 1);
}

static void
test_sessions(void **state)
{
	json_t *job, *st;
	int i;

	(void)state;
	/* Sessions that die after 3 requests: the driver logs in again, once per 401. */
	mock_post(&M, 1, "/__mock/config", "{\"session_expire_after\":3}");
	for (i = 0; i < 3; i++) {
		job = act("PUT", "/v1/nodes/rf1/power",
		          i % 2 ? "{\"target\":\"on\"}" : "{\"target\":\"off\"}");
		expect(job, "succeeded");
		json_decref(job);
	}
	mock_post(&M, 1, "/__mock/config", "{\"session_expire_after\":0}");
	/* No session service at all: Basic on every request. */
	mock_post(&M, 2, "/__mock/config", "{\"sessions\":false}");
	job = act("PUT", "/v1/nodes/rf2/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	json_decref(job);
	st = mock_get(&M, 2, "/__mock/state");
	assert_string_equal(str(st, "power"), "On");
	json_decref(st);
	mock_post(&M, 2, "/__mock/config", "{\"sessions\":true}");
}

static void
test_transient(void **state)
{
	json_t *job, *st, *a;
	size_t i;
	int patches = 0;

	(void)state;
	/* A 503 that outlasts the request's own retries (5 tries by default) is retried by the
	 * job after a backoff. */
	mock_post(&M, 3, "/__mock/config", "{\"fail_next_503\":5}");
	job = act("PUT", "/v1/nodes/rf3/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 2);
	json_decref(job);
	/* The resource changed between our GET and our PATCH: read again, retry once. */
	mock_post(&M, 3, "/__mock/config", "{\"fail_next_412\":1}");
	job = act("PUT", "/v1/nodes/rf3/boot", "{\"device\":\"pxe\"}");
	expect(job, "succeeded");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	json_decref(job);
	st = mock_get(&M, 3, "/__mock/state");
	json_array_foreach(json_object_get(st, "actions"), i, a) patches +=
	        !strcmp(str(a, "method"), "PATCH");
	assert_int_equal(patches, 2);
	json_decref(st);
}

static void
test_failures(void **state)
{
	struct reply r;
	json_t *job;
	char path[160];

	(void)state;
	/* Wrong password: permanent, no retries, a clear message. */
	job = act("PUT", "/v1/nodes/rf4/power", "{\"target\":\"on\"}");
	expect(job, "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_auth");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	json_decref(job);
	/* A self-signed certificate is refused until the node says to accept it. */
	job = act("POST", "/v1/nodes/rftls/verify", NULL);
	expect(job, "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_tls");
	json_decref(job);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/rftls", &r, "{s:{s:b}}", "bmc",
	                      "tls_verify", 0),
	                 200);
	reply_free(&r);
	job = act("POST", "/v1/nodes/rftls/verify", NULL);
	expect(job, "succeeded");
	json_decref(job);
	/* Nothing listens at the address: retried with backoff; cancel it while it waits. */
	make_node(&S, "{s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name", "rfdown", "bmc",
	          "driver", "redfish", "address", "127.0.0.1", "port", 9, "username", "admin",
	          "password", "x", "options", "scheme", "http");
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/rfdown/power", &r, "{s:s}", "target", "on"),
	        202);
	snprintf(path, sizeof path, "/v1/jobs/%s", str(r.json, "id"));
	reply_free(&r);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		if (json_integer_value(json_object_get(r.json, "attempts")) >= 1 &&
		    !strcmp(str(r.json, "state"), "queued"))
			break;
		reply_free(&r);
		usleep(50000);
	}
	assert_string_equal(str(json_object_get(r.json, "error"), "code"), "bmc_unreachable");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 200);
	assert_string_equal(str(r.json, "state"), "cancelled");
	reply_free(&r);
}

/* A loopback port that counts connections and never answers (they queue in the kernel). */
static int
sink_open(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int
sink_hits(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int hits = 0, c;

	while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN) && (c = accept(fd, NULL, NULL)) >= 0) {
		hits++;
		close(c);
	}
	return hits;
}

/* A BMC whose service root sends the login elsewhere: the job fails at once as a protocol
 * error naming the link, the password goes nowhere, and fixing the BMC is enough. */
static void
test_foreign_link(void **state)
{
	json_t *job, *st;
	char cfg[160], at[96];
	int port, fd = sink_open(&port);

	(void)state;
	snprintf(cfg, sizeof cfg, "{\"link_origins\":{\"sessions\":\"http://127.0.0.1:%d\"}}",
	         port);
	mock_post(&M, 6, "/__mock/config", cfg);
	job = act("PUT", "/v1/nodes/rf6/power", "{\"target\":\"on\"}");
	expect(job, "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_protocol");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	snprintf(at, sizeof at, "127.0.0.1:%d/redfish/v1/SessionService/Sessions", port);
	if (strstr(str(json_object_get(job, "error"), "message"), at) == NULL)
		fail_msg("%s", str(json_object_get(job, "error"), "message"));
	json_decref(job);
	assert_int_equal(sink_hits(fd), 0);
	st = mock_get(&M, 6, "/__mock/state");
	assert_string_equal(str(st, "power"), "Off");
	assert_int_equal(json_integer_value(json_object_get(st, "sessions")), 0);
	json_decref(st);
	mock_post(&M, 6, "/__mock/config", "{\"link_origins\":{}}");
	job = act("PUT", "/v1/nodes/rf6/power", "{\"target\":\"on\"}");
	expect(job, "succeeded");
	json_decref(job);
	assert_int_equal(sink_hits(fd), 0);
	close(fd);
}

static void
sweep(void)
{
	struct reply r;
	int i;

	assert_int_equal(call(&S, S.admin, "POST", "/v1/power/sync", &r, NULL), 202);
	reply_free(&r);
	for (i = 0; i < 400; i++) {
		assert_int_equal(call(&S, S.admin, "GET", "/v1/power/sync", &r, NULL), 200);
		if (!json_is_true(json_object_get(r.json, "running"))) {
			reply_free(&r);
			return;
		}
		reply_free(&r);
		usleep(25000);
	}
	fail_msg("sweep did not finish");
}

/* Three failed sweeps in a row mark the BMC faulty; the next answer clears it. */
static void
test_sweep_fault(void **state)
{
	struct reply r;
	int i;

	(void)state;
	/* New credentials make the BMC's past failures meaningless: the count starts again. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/rfdown", &r, "{s:{s:s}}", "bmc",
	                      "password", "y"),
	                 200);
	reply_free(&r);
	for (i = 0; i < 3; i++) {
		sweep();
		assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/rfdown", &r, NULL), 200);
		if (i < 2)
			assert_true(json_is_null(
			        json_object_get(json_object_get(r.json, "bmc"), "fault")));
		reply_free(&r);
	}
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/rfdown", &r, NULL), 200);
	assert_int_equal(
	        json_integer_value(json_object_get(
	                json_object_get(json_object_get(r.json, "bmc"), "fault"), "failures")),
	        3);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/events?node=rfdown&action=node.bmc_fault"), 1);
	/* The power the sweep saw is stored, with a change event. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/rf2", &r, NULL), 200);
	assert_string_equal(str(r.json, "power_state"), "on");
	reply_free(&r);
	mock_post(&M, 2, "/__mock/power", "{\"state\":\"Off\"}");
	/* The cable is fixed: the node now points at a live BMC. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/rfdown", &r, "{s:{s:i, s:s}}", "bmc",
	                      "port", M.base + 5, "password", "secret"),
	                 200);
	reply_free(&r);
	sweep();
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/rfdown", &r, NULL), 200);
	assert_true(json_is_null(json_object_get(json_object_get(r.json, "bmc"), "fault")));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/rf2", &r, NULL), 200);
	assert_string_equal(str(r.json, "power_state"), "off");
	reply_free(&r);
	assert_true(count_all(&S, "/v1/events?node=rf2&action=node.power") >= 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_power),       cmocka_unit_test(test_boot_once),
	        cmocka_unit_test(test_boot_quirk),  cmocka_unit_test(test_verify),
	        cmocka_unit_test(test_sessions),    cmocka_unit_test(test_transient),
	        cmocka_unit_test(test_failures),    cmocka_unit_test(test_foreign_link),
	        cmocka_unit_test(test_sweep_fault),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
