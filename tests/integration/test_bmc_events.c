/*
 * rp_bmc_events: the BMC's event log, straight through the drivers against real peers.
 * - IPMI: OpenIPMI's ipmi_sim with a SEL (tests/ipmi/bmcsim.sh, BMC_SEL). Records go in with
 *   ipmitool's Add SEL Entry, stamped by the BMC's own SEL clock, which ipmitool sets (Set SEL
 *   Time) to fixed dates first; severity is libfreeipmi's interpretation of the record.
 * - Redfish: the mock BMC's SEL and EventLog services (entries added with POST /__mock/log),
 *   paged and unpaged, inline and link-only; and the DMTF mockup tree served as published.
 * - fake: no event log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bmc/bmc.h"
#include "harness.h"

#define T_OLD 1577836800LL /* 2020-01-01T00:00:00Z */
#define T_NEW 1717243200LL /* 2024-06-01T12:00:00Z */

static struct mock M, tree; /* tree: the DMTF tree, stopped in teardown after a failure */
static char sel_run[64], nosel_run[64];
static int sel_port, nosel_port;

/* ---- helpers ------------------------------------------------------------------------ */

static struct rp_bmc *
open_target(json_t *j)
{
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	struct rp_bmc *b;

	if (rp_bmc_target_from_json(j, "events-node", &t, &err) < 0)
		fail_msg("target: %s", err.msg);
	json_decref(j);
	b = rp_bmc_open(&t, &err);
	if (b == NULL)
		fail_msg("open: %s", err.msg);
	return b;
}

static struct rp_bmc *
open_redfish(int port)
{
	return open_target(json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}}", "driver", "redfish",
	                             "address", "127.0.0.1", "port", port, "username", "admin",
	                             "password", "secret", "options", "scheme", "http"));
}

static struct rp_bmc *
open_ipmi(int port)
{
	return open_target(json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i, s:i}}", "driver",
	                             "ipmi", "address", "127.0.0.1", "port", port, "username",
	                             "admin", "password", "password", "options", "workarounds",
	                             "opensesspriv", "session_timeout_ms", 2000,
	                             "retransmission_timeout_ms", 500));
}

/* The events, which must be read without an error. */
static json_t *
events(struct rp_bmc *b, int64_t since_ms, size_t max)
{
	struct rp_bmc_err err;
	json_t *ev = NULL;

	if (rp_bmc_events(b, since_ms, max, &ev, &err) < 0)
		fail_msg("events: %s (%s)", err.msg, rp_bmc_err_name(err.kind));
	assert_true(json_is_array(ev));
	return ev;
}

static const char *
field(json_t *ev, size_t i, const char *key)
{
	json_t *e = json_array_get(ev, i);

	if (e == NULL)
		fail_msg("no event %zu in %s", i, json_dumps(ev, 0));
	return json_string_value(json_object_get(e, key));
}

/* Event i is severity sev from source src, its message contains text, and its at starts with
 * at (NULL: at is null). */
static void
expect_event(json_t *ev, size_t i, const char *sev, const char *src, const char *text,
             const char *at)
{
	const char *msg = field(ev, i, "message"), *when = field(ev, i, "at");

	assert_string_equal(field(ev, i, "severity"), sev);
	assert_string_equal(field(ev, i, "source"), src);
	assert_non_null(field(ev, i, "id"));
	if (msg == NULL || strstr(msg, text) == NULL)
		fail_msg("event %zu: message '%s' lacks '%s'", i, msg ? msg : "(none)", text);
	if (at == NULL)
		assert_true(json_is_null(json_object_get(json_array_get(ev, i), "at")));
	else if (when == NULL || strncmp(when, at, strlen(at)) != 0)
		fail_msg("event %zu: at '%s', expected '%s...'", i, when ? when : "(null)", at);
}

static void
expect_unsupported(struct rp_bmc *b)
{
	struct rp_bmc_err err;
	json_t *ev = NULL;

	assert_int_equal(rp_bmc_events(b, 0, 100, &ev, &err), -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_null(ev);
}

/* ---- IPMI: ipmi_sim ------------------------------------------------------------------ */

static int
sim(const char *cmd, const char *dir, int port, int count, const char *sel)
{
	return sh_rc(
	        "BMC_SEL=%s BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s %.0d >/dev/null 2>&1",
	        sel, port, rp_test_src, cmd, dir, count);
}

static void
sim_start(char *dir, size_t len, int *port, int count, const char *sel)
{
	int attempt;

	for (attempt = 0; attempt < 8; attempt++) {
		snprintf(dir, len, "/tmp/rp-sel-XXXXXX");
		assert_non_null(mkdtemp(dir));
		*port = 40000 + (int)((getpid() * 17 + attempt * 131 + count) % 1000) * 16;
		if (sim("start", dir, *port, count, sel) == 0)
			return;
		rmdir(dir);
	}
	fail_msg("ipmi_sim did not start");
}

/* Set the BMC's SEL clock (Set SEL Time, seconds little-endian). */
static void
sel_time(int port, long long t)
{
	sh("ipmitool -I lanplus -C 3 -H 127.0.0.1 -p %d -U admin -P password raw 0x0a 0x49 "
	   "0x%02llx 0x%02llx 0x%02llx 0x%02llx >/dev/null",
	   port, t & 255, t >> 8 & 255, t >> 16 & 255, t >> 24 & 255);
}

/* Add SEL records, one event message a line (ipmitool sel add). */
static void
sel_add(int port, const char *lines)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof path, "%s/records.txt", sel_run);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(lines, f);
	fclose(f);
	sh("ipmitool -I lanplus -C 3 -H 127.0.0.1 -p %d -U admin -P password sel add %s >/dev/null",
	   port, path);
}

static void
test_ipmi_sel(void **state)
{
	struct rp_bmc *b = open_ipmi(sel_port);
	json_t *ev;

	(void)state;
	/* Before anyone sets the SEL clock a record has a pre-init time: undated, so kept. */
	sel_add(sel_port, "0x04 0x0c 0x11 0x6f 0x00 0x00 0x00 # Memory: correctable ECC\n");
	sel_time(sel_port, T_OLD);
	sel_add(sel_port, "0x04 0x07 0x20 0x6f 0x00 0x00 0x00 # Processor: IERR\n");
	sel_time(sel_port, T_NEW);
	sel_add(sel_port, "0x04 0x0c 0x10 0x6f 0x01 0x00 0x00 # Memory: uncorrectable ECC\n"
	                  "0x04 0x01 0x31 0x01 0x57 0x00 0x00 # Temperature: upper non-critical\n"
	                  "0x04 0x08 0x40 0x6f 0x00 0x00 0x00 # Power supply: presence\n");

	/* Since the run started (T_NEW): the 2020 IERR is left out. */
	ev = events(b, T_NEW * 1000, 100);
	assert_int_equal(json_array_size(ev), 4);
	expect_event(ev, 0, "warning", "sel", "Correctable memory error", NULL);
	expect_event(ev, 1, "critical", "sel", "Uncorrectable memory error", "2024-06-01T12:00:0");
	expect_event(ev, 2, "warning", "sel", "Upper Non-critical - going high",
	             "2024-06-01T12:00:0");
	expect_event(ev, 3, "ok", "sel", "Presence detected", "2024-06-01T12:00:0");
	json_decref(ev);

	/* Everything, oldest first: the IERR of 2020 is critical. */
	ev = events(b, 0, 100);
	assert_int_equal(json_array_size(ev), 5);
	expect_event(ev, 1, "critical", "sel", "IERR", "2020-01-01T00:00:0");
	json_decref(ev);

	/* At most max, from the oldest. */
	ev = events(b, T_NEW * 1000, 2);
	assert_int_equal(json_array_size(ev), 2);
	expect_event(ev, 1, "critical", "sel", "Uncorrectable memory error", "2024-06-01T12:00:0");
	json_decref(ev);

	/* Nothing dated after the last record: only the undated one. */
	ev = events(b, (T_NEW + 86400) * 1000, 100);
	assert_int_equal(json_array_size(ev), 1);
	expect_event(ev, 0, "warning", "sel", "Correctable memory error", NULL);
	json_decref(ev);
	rp_bmc_close(b);

	/* A SEL without records: an empty array. */
	b = open_ipmi(sel_port + 1);
	ev = events(b, 0, 100);
	assert_int_equal(json_array_size(ev), 0);
	json_decref(ev);
	rp_bmc_close(b);

	/* A BMC without a SEL device. */
	b = open_ipmi(nosel_port);
	expect_unsupported(b);
	rp_bmc_close(b);
}

/* ---- Redfish: the mock BMC and the DMTF tree ---------------------------------------- */

static void
log_entry(int bmc, const char *service, const char *severity, const char *message,
          const char *created)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s?}", "service", service, "severity", severity,
	                      "message", message, "created", created);
	char *text;

	if (created == NULL)
		json_object_set_new(j, "created", json_null());
	text = json_dumps(j, JSON_COMPACT);
	mock_post(&M, bmc, "/__mock/log", text);
	free(text);
	json_decref(j);
}

/* The events since T_NEW on BMC 0, as the test below sets them up. */
static void
expect_redfish_log(struct rp_bmc *b)
{
	json_t *ev = events(b, T_NEW * 1000, 100);
	size_t i;

	assert_int_equal(json_array_size(ev), 9);
	/* Undated first, then by time across both logs; 14:00:05+02:00 is 12:00:05Z. */
	expect_event(ev, 0, "warning", "redfish:EventLog", "Clock not set", NULL);
	expect_event(ev, 1, "critical", "redfish:SEL", "DIMM A1 uncorrectable ECC",
	             "2024-06-01T12:00:00.000Z");
	expect_event(ev, 2, "ok", "redfish:EventLog", "BMC firmware updated",
	             "2024-06-01T12:00:03.000Z");
	expect_event(ev, 3, "warning", "redfish:SEL", "Fan 3 below threshold",
	             "2024-06-01T12:00:05.000Z");
	/* The last entries only a reader of every page sees. */
	for (i = 4; i < 9; i++)
		expect_event(ev, i, "ok", "redfish:SEL", "Boot", "2024-06-01T12:01:0");
	assert_non_null(strstr(field(ev, 8, "message"), "Boot 5"));
	json_decref(ev);
}

static void
test_redfish_log(void **state)
{
	struct rp_bmc *b = open_redfish(M.base);
	char msg[32];
	json_t *ev, *st;
	int i;

	(void)state;
	log_entry(0, "SEL", "Critical", "CPU0 thermal trip", "2020-01-01T00:00:00Z");
	log_entry(0, "SEL", "Critical", "DIMM A1 uncorrectable ECC", "2024-06-01T12:00:00Z");
	log_entry(0, "SEL", "Warning", "Fan 3 below threshold", "2024-06-01T14:00:05+02:00");
	log_entry(0, "EventLog", "OK", "BMC firmware updated", "2024-06-01T12:00:03Z");
	log_entry(0, "EventLog", "Warning", "Clock not set", NULL);
	for (i = 1; i <= 5; i++) {
		snprintf(msg, sizeof msg, "Boot %d", i);
		log_entry(0, "SEL", "OK", msg, "2024-06-01T12:01:00Z");
	}
	/* One page each. */
	expect_redfish_log(b);
	/* Pages of 2: the SEL's 8 entries take 4 pages, read through Members@odata.nextLink. */
	mock_post(&M, 0, "/__mock/config", "{\"log_page_size\": 2}");
	st = mock_get(&M, 0, "/__mock/state");
	i = (int)json_integer_value(json_object_get(st, "requests"));
	json_decref(st);
	expect_redfish_log(b);
	st = mock_get(&M, 0, "/__mock/state");
	/* system, manager, 2 collections, 2 services, 4 + 1 pages (unpaged: 8 requests) */
	assert_true(json_integer_value(json_object_get(st, "requests")) - i >= 11);
	json_decref(st);
	/* Pages that list links only: each entry is read on its own. */
	mock_post(&M, 0, "/__mock/config", "{\"log_expand\": false}");
	expect_redfish_log(b);
	/* The critical entry before the run started shows when asked for. */
	ev = events(b, 0, 1);
	assert_int_equal(json_array_size(ev), 1);
	expect_event(ev, 0, "warning", "redfish:EventLog", "Clock not set", NULL);
	json_decref(ev);
	ev = events(b, T_OLD * 1000, 2);
	assert_int_equal(json_array_size(ev), 2);
	expect_event(ev, 1, "critical", "redfish:SEL", "CPU0 thermal trip",
	             "2020-01-01T00:00:00.000Z");
	json_decref(ev);
	rp_bmc_close(b);

	/* Log services without entries: an empty array. */
	b = open_redfish(M.base + 1);
	ev = events(b, 0, 100);
	assert_int_equal(json_array_size(ev), 0);
	json_decref(ev);
	rp_bmc_close(b);

	/* No log services at all. */
	mock_post(&M, 2, "/__mock/config", "{\"log_services\": false}");
	b = open_redfish(M.base + 2);
	expect_unsupported(b);
	rp_bmc_close(b);
}

/* DMTF's rackmount1 as published: system Log1 (2 critical SEL entries of 2012, and a nextLink
 * the static server answers with the same page again) and the manager's Log (1 entry). */
static void
test_dmtf_tree(void **state)
{
	char dir[512];
	const char *args[] = {"--static", dir, NULL};
	struct rp_bmc *b;
	json_t *ev;

	(void)state;
	snprintf(dir, sizeof dir, "%s/../shared/redfish-mockups/public-rackmount1", rp_test_src);
	if (access(dir, R_OK) != 0) {
		fprintf(stderr, "skipping the DMTF tree: %s not present\n", dir);
		return;
	}
	mock_start(&tree, 1, args);
	b = open_redfish(tree.base);
	ev = events(b, 0, 100);
	assert_int_equal(json_array_size(ev), 3);
	expect_event(ev, 0, "critical", "redfish:Log1", "Temperature threshold exceeded",
	             "2012-03-07T14:44:00.000Z");
	expect_event(ev, 1, "critical", "redfish:Log", "System May be Melting",
	             "2012-03-07T14:44:00.000Z");
	expect_event(ev, 2, "critical", "redfish:Log1", "Temperature threshold exceeded",
	             "2012-03-07T14:45:00.000Z");
	assert_string_equal(field(ev, 2, "id"), "2");
	json_decref(ev);
	ev = events(b, 1331131500000LL /* 2012-03-07T14:45:00Z */, 100);
	assert_int_equal(json_array_size(ev), 1);
	json_decref(ev);
	rp_bmc_close(b);
	mock_stop(&tree);
}

static void
test_fake(void **state)
{
	struct rp_bmc *b = open_target(json_pack("{s:s}", "driver", "fake"));

	(void)state;
	expect_unsupported(b);
	rp_bmc_close(b);
}

static int
setup(void **state)
{
	(void)state;
	assert_int_equal(rp_bmc_global_init(), 0);
	mock_start(&M, 3, NULL);
	sim_start(sel_run, sizeof sel_run, &sel_port, 2, "100");
	sim_start(nosel_run, sizeof nosel_run, &nosel_port, 1, "none");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	mock_stop(&M);
	mock_stop(&tree);
	sim("stop", sel_run, sel_port, 0, "");
	sim("stop", nosel_run, nosel_port, 0, "");
	sh_rc("rm -rf %s %s", sel_run, nosel_run);
	rp_bmc_global_cleanup();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_ipmi_sel),
	        cmocka_unit_test(test_redfish_log),
	        cmocka_unit_test(test_dmtf_tree),
	        cmocka_unit_test(test_fake),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
