/*
 * Rack acceptance against real peers short of a VM: three nodes, each a real sshd +
 * rackpilot-agent (tests/ssh/sshnode.sh) whose /proc and /sys are the GPU server fixtures and
 * whose BMC is the fake driver. The test plays the machines' firmware: when a node's
 * commission waits for its agent it fetches /boot/ipxe and registers with the script's token
 * (as test_provision does). One node is missing a GPU and two DIMMs, one node's cable is on the
 * wrong switch port: the report fails exactly those two checks with their evidence, and a
 * re-run after fixing them runs only what did not pass, passes, and can be signed off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef RP_TEST_AGENT
#error "RP_TEST_AGENT (path of rackpilot-agent) must be defined"
#endif

static char workdir[256], conf[400], listen_at[64];
/* A fixed port: the agents' configuration names the server, across a restart too. */
static const char *args[] = {"-c", conf, "--listen", listen_at, NULL};
static int port;

static struct simnode nodes[3];

static json_t *
get(const char *path)
{
	return get_json(&S, path);
}

/* Follow the rack's run to its end, booting each node when its commission asks for it (which
 * set says). kill_after: SIGKILL the server once after that many boots (-1: never). */
static json_t *
run_to_end(int want_boots[3], int kill_after)
{
	int booted[3] = {0}, boots = 0, i, k;
	char dir[256];

	for (i = 0; i < 1800; i++) {
		json_t *run = get("/v1/racks/acc/acceptance");

		if (strcmp(json_string_value(json_object_get(run, "state")), "running") != 0)
			return run;
		json_decref(run);
		for (k = 0; k < 3; k++) {
			if (want_boots[k] && !booted[k] && simnode_waits(&S, &nodes[k])) {
				if (boots == kill_after) {
					/* The commission is waiting: the restarted server follows
					 * the same one. */
					snprintf(dir, sizeof dir, "%s", S.dir);
					server_stop(&S, SIGKILL);
					server_start(&S, dir, args);
					kill_after = -1;
				}
				simnode_boot(&S, &nodes[k], port, RP_TEST_AGENT);
				booted[k] = 1;
				boots++;
			}
		}
		usleep(100000);
	}
	fail_msg("the acceptance run did not end");
	return NULL;
}

static long
commissions(const char *node)
{
	char path[200];

	snprintf(path, sizeof path, "/v1/jobs?node=%.63s&type=commission", node);
	return count_all(&S, path);
}

static void
start(const char *body, long want)
{
	struct reply r;

	if (req(&S, S.admin, "POST", "/v1/racks/acc/acceptance", "application/json", body,
	        strlen(body), NULL, &r) != want)
		fail_msg("%s: %ld %s", body, r.status, r.body);
	reply_free(&r);
}

/* Every check on one node (the checks across nodes: test_fabric.c). */
static const char *const RUN =
        "{\"checks\": [\"bmc\", \"power\", \"pxe\", \"inventory\", \"firmware\", \"bios\", "
        "\"links\", \"burn_in\", \"power_thermal\", \"sel\"], \"burn_in\": {\"recipes\": "
        "[\"burn\"]}}";

static void
test_bad_input(void **state)
{
	struct reply r;

	(void)state;
	start("{\"checks\": [\"bmc\", \"smoke\"]}", 400);
	start("{\"checks\": []}", 400);
	start("{\"checks\": [\"bmc\", \"bmc\"]}", 400);
	start("{\"burn_in\": {\"recipes\": [\"no-such-recipe\"]}}", 400);
	start("{\"burn_in\": {\"recipes\": [\"burn\"], \"minutes\": 3}}", 400);
	start("{\"colour\": 1}", 400);
	start("{\"fabric\": {\"duration_s\": 0}}", 400);
	start("{\"fabric\": {\"ib_tool\": \"ib_send_bw\"}}", 400);
	start("{\"fabric\": {\"colour\": 1}}", 400);
	start("{\"nccl\": {\"launcher\": \"srun\"}}", 400);
	start("{\"nccl\": []}", 400);
	start("{\"fabric\": {\"duration_s\": 30, \"timeout_s\": 30}}", 400);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "empty"), 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/empty/acceptance", &r, "{}"), 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/nope/acceptance", &r, "{}"), 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/acc/acceptance", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/acc/acceptance?format=pdf", &r, NULL),
	                 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/acc/acceptance?attempt=0", &r, NULL),
	                 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/acc/acceptance/signoff", &r, "{}"),
	                 400);
	assert_error(&r, 400, "MISSING_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/acc/acceptance/signoff", &r, "{s:s}",
	                      "report_sha256", "abc"),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/acc/acceptance/signoff", &r,
	                      "{s:s, s:i}", "report_sha256",
	                      "0000000000000000000000000000000000000000000000000000000000000000",
	                      "stamp", 1),
	                 400);
	assert_error(&r, 400, "UNKNOWN_FIELD");
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/jobs?type=acceptance"), 0);
}

static void
test_first_run_finds_both_defects(void **state)
{
	int all[3] = {1, 1, 1};
	json_t *run, *f;
	struct reply r;
	const char *msg;
	char *text;
	int k;

	(void)state;
	start(RUN, 202);
	start(RUN, 409); /* one run per rack at a time */
	run = run_to_end(all, 1);
	assert_string_equal(jstr(run, "state"), "failed");
	/* acc-u10: everything but the checks with nothing to compare passed. */
	accept_expect(run, "acc-u10", "power", "passed");
	accept_expect(run, "acc-u10", "pxe", "passed");
	accept_expect(run, "acc-u10", "inventory", "passed");
	accept_expect(run, "acc-u10", "links", "passed");
	accept_expect(run, "acc-u10", "burn_in", "passed");
	accept_expect(run, "acc-u10", "firmware", "skipped");
	/* Sampled during burn-in: acc-u10 under every warning. (Its fake BMC reads 600 W on or
	 * 15 W off; the kill -9 during the run makes it forget that the node is on.) */
	accept_expect(run, "acc-u10", "power_thermal", "passed");
	assert_true(
	        json_number_value(json_object_get(
	                json_object_get(accept_result(run, "acc-u10", "power_thermal"), "evidence"),
	                "node_peak_w")) >= 15);
	/* acc-u20: its cable is on another port, and its inlet ran into its warning. */
	accept_expect(run, "acc-u20", "power_thermal", "failed");
	msg = jstr(accept_result(run, "acc-u20", "power_thermal"), "message");
	if (strstr(msg, "Inlet Temp: reached its upper warning during burn-in") == NULL)
		fail_msg("%s", msg);
	accept_expect(run, "acc-u20", "inventory", "passed");
	accept_expect(run, "acc-u20", "links", "failed");
	msg = jstr(accept_result(run, "acc-u20", "links"), "message");
	if (strstr(msg,
	           "eno1: cabled to leaf-r01-a Ethernet1/7, plan says leaf-r01-a Ethernet1/9") ==
	    NULL)
		fail_msg("%s", msg);
	/* acc-u30: a GPU and two DIMMs short; the evidence says which slots. */
	accept_expect(run, "acc-u30", "inventory", "failed");
	accept_expect(run, "acc-u30", "links", "passed");
	f = json_object_get(accept_result(run, "acc-u30", "inventory"), "findings");
	assert_string_equal(jstr(json_array_get(f, 0), "message"), "GPU count 7, expected 8");
	text = json_dumps(f, 0);
	assert_non_null(strstr(text, "DIMM count 30, expected 32"));
	assert_non_null(strstr(text, "P1-DIMMF2, P2-DIMMB2"));
	free(text);
	/* Burn-in: the step whose tool is absent is skipped with its reason, not passed. */
	text = json_dumps(accept_result(run, "acc-u10", "burn_in"), 0);
	assert_non_null(strstr(text, "rp-burn-absent is not installed"));
	free(text);
	/* Exactly the three defects failed, in all 3 x 10 results. */
	{
		json_t *x;
		size_t i;
		int failed = 0;

		json_array_foreach(json_object_get(run, "results"), i, x) failed +=
		        !strcmp(jstr(x, "state"), "failed");
		assert_int_equal(failed, 3);
	}
	json_decref(run);
	/* One commission per node despite the kill -9 during the run. */
	for (k = 0; k < 3; k++)
		assert_int_equal(commissions(nodes[k].name), 1);
	/* The CSV and the printable page carry the same verdicts. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/acc/acceptance?format=csv", &r, NULL),
	                 200);
	assert_non_null(strstr(r.ctype, "text/csv"));
	assert_non_null(strstr(r.body, "\"acc-u30\",\"30\",\"inventory\",\"failed\",\"GPU count 7, "
	                               "expected 8 (and more)\""));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/acc/acceptance?format=html", &r, NULL),
	                 200);
	assert_non_null(strstr(r.body, "<td class=\"failed\">failed</td>"));
	assert_non_null(strstr(r.body, "Ethernet1/9"));
	/* A document of its own: its stylesheet and nothing else runs or loads. */
	assert_string_equal(r.nosniff, "nosniff");
	assert_non_null(strstr(r.csp, "default-src 'none'"));
	assert_non_null(strstr(r.csp, "style-src 'unsafe-inline'"));
	assert_null(strstr(r.csp, "script-src"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/acc/acceptance?format=csv", &r, NULL),
	                 200);
	assert_string_equal(r.nosniff, "nosniff");
	assert_non_null(strstr(r.csp, "default-src 'none'"));
	reply_free(&r);
	/* A failed rack cannot be signed off. */
	run = get("/v1/racks/acc/acceptance");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/acc/acceptance/signoff", &r, "{s:s}",
	                      "report_sha256", jstr(run, "report_sha256")),
	                 409);
	assert_error(&r, 409, "INVALID_STATE");
	reply_free(&r);
	json_decref(run);
}

static void
test_rerun_after_fixes_and_signoff(void **state)
{
	int two_three[3] = {0, 1, 1};
	const char *cab =
	        "{\"entries\":[{\"node\":\"acc-u10\",\"interface\":\"eno1\",\"switch\":"
	        "\"leaf-r01-a\",\"port\":\"Ethernet1/7\"},{\"node\":\"acc-u20\","
	        "\"interface\":\"eno1\",\"switch\":\"leaf-r01-a\",\"port\":\"Ethernet1/7\"},"
	        "{\"node\":\"acc-u30\",\"interface\":\"eno1\",\"switch\":\"leaf-r01-a\","
	        "\"port\":\"Ethernet1/7\"}]}";
	char sha[80];
	json_t *run;
	struct reply r;

	(void)state;
	/* The cable is moved (in the plan) and the smaller node was ordered that way after all. */
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/acc/cabling", "application/json", cab,
	                     strlen(cab), NULL, &r),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/hgx-b", &r,
	                      "{s:{s:{s:i}, s:{s:i, s:i}}}", "bom", "gpus", "count", 7, "memory",
	                      "total_gib", 1920, "dimms", 30),
	                 200);
	reply_free(&r);
	/* acc-u20's cooling is fixed: its inlet reads 24 again. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/acc-u20", &r, "{s:{s:{s:i}}}", "bmc",
	                      "options", "inlet_c", 24),
	                 200);
	reply_free(&r);
	start(RUN, 202);
	run = run_to_end(two_three, -1);
	if (strcmp(jstr(run, "state"), "passed") != 0)
		fail_msg("%s", json_dumps(run, JSON_INDENT(1)));
	assert_int_equal(json_integer_value(json_object_get(run, "attempt")), 2);
	/* What passed before was kept; the failed ones (and their boot) ran again. */
	assert_int_equal(json_integer_value(json_object_get(accept_result(run, "acc-u10", "links"),
	                                                    "attempt")),
	                 1);
	assert_int_equal(json_integer_value(json_object_get(accept_result(run, "acc-u20", "links"),
	                                                    "attempt")),
	                 2);
	assert_int_equal(json_integer_value(
	                         json_object_get(accept_result(run, "acc-u20", "pxe"), "attempt")),
	                 2);
	assert_int_equal(commissions("acc-u10"), 1);
	assert_int_equal(commissions("acc-u20"), 2);
	snprintf(sha, sizeof sha, "%s", jstr(run, "report_sha256"));
	json_decref(run);
	/* Sign-off names the report it read. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/acc/acceptance/signoff", &r, "{s:s}",
	                      "report_sha256",
	                      "0000000000000000000000000000000000000000000000000000000000000000"),
	                 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/acc/acceptance/signoff", &r,
	                      "{s:s, s:s}", "report_sha256", sha, "note",
	                      "rack accepted for production"),
	                 201);
	assert_string_equal(
	        jstr(json_array_get(json_object_get(r.json, "signoffs"), 0), "report_sha256"), sha);
	reply_free(&r);
	run = get("/v1/events?action=rack.signed_off");
	assert_int_equal(json_array_size(json_object_get(run, "items")), 1);
	json_decref(run);
	/* The first attempt's report is still there, as it was. */
	run = get("/v1/racks/acc/acceptance?attempt=1");
	assert_string_equal(jstr(run, "state"), "failed");
	json_decref(run);
}

/* Checks bmc and sel against two Redfish mock BMCs: one logs a critical event after the run
 * started (failed, with the BMC's message), the other only a warning (passed). */
static void
test_bmc_event_log(void **state)
{
	struct mock m = {0};
	json_t *run;
	struct reply r;
	char name[32], created[64];
	int k, i;
	time_t soon = time(NULL) + 3600;

	(void)state;
	mock_start(&m, 2, NULL);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "logs"), 201);
	reply_free(&r);
	strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&soon));
	for (k = 0; k < 2; k++) {
		snprintf(name, sizeof name, "logs-%d", k);
		make_node(&S, "{s:s, s:s, s:i, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name", name,
		          "rack", "logs", "u_position", 1 + 2 * k, "bmc", "driver", "redfish",
		          "address", "127.0.0.1", "port", m.base + k, "username", "admin",
		          "password", "secret", "options", "scheme", "http");
	}
	/* From before the run: not counted. */
	mock_post(&m, 0, "/__mock/log",
	          "{\"severity\":\"Critical\",\"message\":\"old PSU fault\","
	          "\"created\":\"2020-01-01T00:00:00Z\"}");
	{
		char body[300];

		snprintf(body, sizeof body,
		         "{\"severity\":\"Critical\",\"message\":\"Uncorrectable "
		         "ECC error on DIMM P1-DIMMA1\",\"created\":\"%s\"}",
		         created);
		mock_post(&m, 0, "/__mock/log", body);
		snprintf(body, sizeof body,
		         "{\"severity\":\"Warning\",\"message\":\"Fan 3 slow\","
		         "\"created\":\"%s\"}",
		         created);
		mock_post(&m, 1, "/__mock/log", body);
	}
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/logs/acceptance", &r, "{s:[s,s]}",
	                      "checks", "bmc", "sel"),
	                 202);
	reply_free(&r);
	for (i = 0; i < 600; i++) {
		run = get("/v1/racks/logs/acceptance");
		if (strcmp(jstr(run, "state"), "running") != 0)
			break;
		json_decref(run);
		run = NULL;
		usleep(100000);
	}
	assert_non_null(run);
	assert_string_equal(jstr(run, "state"), "failed");
	accept_expect(run, "logs-0", "sel", "failed");
	if (!strstr(jstr(accept_result(run, "logs-0", "sel"), "message"),
	            "1 critical event(s) since the run started: Uncorrectable ECC error on DIMM "
	            "P1-DIMMA1"))
		fail_msg("%s", jstr(accept_result(run, "logs-0", "sel"), "message"));
	accept_expect(run, "logs-1", "sel", "passed");
	/* The mock's serial and UUID were never enrolled: the BMC answers, nothing to compare. */
	accept_expect(run, "logs-0", "bmc", "skipped");
	json_decref(run);
	mock_stop(&m);
}

/* A run whose job was cancelled by hand does not block its rack: the next start fails what it
 * left open and runs again. */
static void
test_cancelled_run_does_not_block(void **state)
{
	struct reply r;
	json_t *jobs, *run;
	char path[200];

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "stale"), 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:i, s:{s:s, s:{s:i}}}", "name", "stale-1", "rack", "stale",
	          "u_position", 1, "bmc", "driver", "fake", "options", "delay_ms", 3000);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/stale/acceptance", &r, "{s:[s]}",
	                      "checks", "power"),
	                 202);
	reply_free(&r);
	jobs = get("/v1/jobs?node=stale-1&type=acceptance");
	snprintf(path, sizeof path, "/v1/jobs/%s",
	         jstr(json_array_get(json_object_get(jobs, "items"), 0), "id"));
	json_decref(jobs);
	/* 200 when it ended at once, 202 when it was running and stops at its next look. */
	assert_in_range(call(&S, S.admin, "DELETE", path, &r, NULL), 200, 202);
	reply_free(&r);
	for (int i = 0; i < 100; i++) {
		json_t *j = get(path);
		int done =
		        strcmp(jstr(j, "state"), "queued") && strcmp(jstr(j, "state"), "running");

		json_decref(j);
		if (done)
			break;
		usleep(100000);
	}
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/stale/acceptance", &r, "{s:[s]}",
	                      "checks", "power"),
	                 202);
	assert_int_equal(json_integer_value(json_object_get(r.json, "attempt")), 2);
	reply_free(&r);
	run = get("/v1/racks/stale/acceptance?attempt=1");
	assert_string_equal(jstr(run, "state"), "failed");
	assert_non_null(
	        strstr(jstr(accept_result(run, "stale-1", "power"), "message"), "ended before"));
	json_decref(run);
}

/* A node whose image runs no lldpd: its cabling cannot be verified, so links is skipped with
 * that reason, not passed and not failed. */
static void
test_cabling_without_lldp(void **state)
{
	struct simnode n = {.fixture = "vm"};
	struct reply r;
	char tok[128];
	const char *cab = "{\"entries\":[{\"node\":\"nolldp-1\",\"interface\":\"eth0\","
	                  "\"switch\":\"leaf-x\",\"port\":\"Ethernet1/1\"}]}";
	json_t *run = NULL;
	int i;

	(void)state;
	snprintf(n.name, sizeof n.name, "nolldp-1");
	snprintf(n.dir, sizeof n.dir, "%s/nolldp-1", workdir);
	snprintf(n.addr, sizeof n.addr, "127.0.4.20");
	snprintf(n.mac, sizeof n.mac, "02:ac:00:00:01:01");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "nolldp"),
	                 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:i, s:[s], s:{s:s}}", "name", n.name, "rack", "nolldp",
	          "u_position", 1, "macs", n.mac, "bmc", "driver", "fake");
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", n.name),
	        201);
	snprintf(tok, sizeof tok, "%s", jstr(r.json, "token"));
	reply_free(&r);
	sh("%s/tests/ssh/sshnode.sh start %s %s %d %s %s %s %s %s/tests/fixtures/inventory/vm",
	   rp_test_src, n.dir, n.addr, port, S.base, tok, n.mac, RP_TEST_AGENT, rp_test_src);
	assert_int_equal(sh_rc("%s -c %s/agent.conf register >> %s/agent.log 2>&1", RP_TEST_AGENT,
	                       n.dir, n.dir),
	                 0);
	sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, n.dir);
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/nolldp/cabling", "application/json",
	                     cab, strlen(cab), NULL, &r),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks/nolldp/acceptance", &r, "{s:[s]}",
	                      "checks", "links"),
	                 202);
	reply_free(&r);
	for (i = 0; i < 300; i++) {
		run = get("/v1/racks/nolldp/acceptance");
		if (strcmp(jstr(run, "state"), "running") != 0)
			break;
		json_decref(run);
		run = NULL;
		usleep(100000);
	}
	assert_non_null(run);
	accept_expect(run, "nolldp-1", "links", "skipped");
	if (!strstr(jstr(accept_result(run, "nolldp-1", "links"), "message"),
	            "1 cabling entry not verifiable"))
		fail_msg("%s", jstr(accept_result(run, "nolldp-1", "links"), "message"));
	assert_string_equal(jstr(run, "state"), "passed");
	json_decref(run);
}

static int
setup(void **state)
{
	static const char *const fixtures[] = {"gpu-h100-8x", "gpu-h100-8x", "gpu-h100-7x-missing"};
	const char *cab =
	        "{\"entries\":[{\"node\":\"acc-u10\",\"interface\":\"eno1\",\"switch\":"
	        "\"leaf-r01-a\",\"port\":\"Ethernet1/7\"},{\"node\":\"acc-u20\","
	        "\"interface\":\"eno1\",\"switch\":\"leaf-r01-a\",\"port\":\"Ethernet1/9\"},"
	        "{\"node\":\"acc-u30\",\"interface\":\"eno1\",\"switch\":\"leaf-r01-a\","
	        "\"port\":\"Ethernet1/7\"}]}";
	const char *burn =
	        "{\"name\":\"burn\",\"steps\":[{\"id\":\"cpu\",\"type\":\"shell\","
	        /* A tool no machine has (stress-ng may be installed where the test runs: the
	         * product ramdisk's tools are). */
	        "\"command\":\"command -v rp-burn-absent >/dev/null || { echo 'rp-burn-absent is "
	        "not installed'; exit 77; }; rp-burn-absent --cpu 1\"},{\"id\":\"mem\","
	        "\"type\":\"shell\",\"command\":\"grep -q MemTotal /proc/meminfo\"},"
	        /* Long enough for power_thermal's reads (every 4 s) to fall inside. */
	        "{\"id\":\"soak\",\"type\":\"shell\",\"command\":\"sleep 10\"}]}";
	char path[400], body[512];
	struct reply r;
	int k;

	(void)state;
	simrack_start("/tmp/rp-accept-XXXXXX", workdir, sizeof workdir, conf, sizeof conf,
	              listen_at, sizeof listen_at, &port, args);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "acc"), 201);
	reply_free(&r);
	for (k = 0; k < 3; k++) {
		struct simnode *n = &nodes[k];

		snprintf(n->name, sizeof n->name, "acc-u%d", 10 * (k + 1));
		snprintf(n->dir, sizeof n->dir, "%s/acc-u%d", workdir, 10 * (k + 1));
		snprintf(n->addr, sizeof n->addr, "127.0.4.%d", 10 + k);
		snprintf(n->mac, sizeof n->mac, "02:ac:00:00:00:%02x", k + 1);
		n->fixture = fixtures[k];
		/* acc-u20 runs hot: its fake BMC's inlet (warning at 40) reads 41. */
		make_node(&S, "{s:s, s:s, s:i, s:i, s:s, s:[s], s:{s:s, s:{s:i, s:i}}}", "name",
		          n->name, "rack", "acc", "u_position", 10 * (k + 1), "u_height", 4,
		          "node_class", k == 2 ? "hgx-b" : "hgx-a", "macs", n->mac, "bmc", "driver",
		          "fake", "options", "delay_ms", 0, "inlet_c", k == 1 ? 41 : 24);
		snprintf(path, sizeof path, "/v1/nodes/%.31s/provision", n->name);
		assert_int_equal(call(&S, S.admin, "PUT", path, &r, "{s:s}", "action", "manage"),
		                 202);
		reply_free(&r);
	}
	/* What was ordered: the HGX H100 both classes were bought as. */
	for (k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "/v1/node-classes/%s", k ? "hgx-b" : "hgx-a");
		snprintf(body, sizeof body,
		         "{\"bom\":{\"gpus\":{\"count\":8,\"model\":\"H100\"},"
		         "\"memory\":{\"total_gib\":2048,\"dimms\":32},\"cpu\":"
		         "{\"sockets\":2},\"hcas\":{\"count\":8,\"link_layer\":"
		         "\"InfiniBand\",\"rate_gbps\":400}}}");
		assert_int_equal(req(&S, S.admin, "PUT", path, "application/json", body,
		                     strlen(body), NULL, &r),
		                 201);
		reply_free(&r);
	}
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/acc/cabling", "application/json", cab,
	                     strlen(cab), NULL, &r),
	                 200);
	reply_free(&r);
	assert_int_equal(req(&S, S.admin, "POST", "/v1/recipes", "application/json", burn,
	                     strlen(burn), NULL, &r),
	                 201);
	reply_free(&r);
	/* Managed (verify with the fake BMC) before anything else. */
	for (k = 0; k < 3; k++)
		node_wait_state(&S, nodes[k].name, "manageable", 300);
	return 0;
}

static int
teardown(void **state)
{
	return simrack_stop(nodes, 3, workdir, state);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_bad_input),
	        cmocka_unit_test(test_first_run_finds_both_defects),
	        cmocka_unit_test(test_rerun_after_fixes_and_signoff),
	        cmocka_unit_test(test_bmc_event_log),
	        cmocka_unit_test(test_cancelled_run_does_not_block),
	        cmocka_unit_test(test_cabling_without_lldp),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
