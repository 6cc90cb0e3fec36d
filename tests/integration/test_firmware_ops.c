/*
 * Firmware and BIOS on one node through the API, against the Redfish mock BMC
 * (tests/redfish/mock_bmc.py): refresh, BIOS profiles validated against the registry, BIOS
 * apply with settings that take at the next boot, firmware updates to a baseline (BIOS, BMC,
 * the GPU family), a bad image, kill -9 during an update, and bad input. Every effect is
 * checked from the BMC's side through the mock's own state.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util/util.h"

static struct mock M;
static char workdir[64], conf[200];
static const char *const args[] = {"-c", conf, NULL};

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void
add_node(const char *name, const char *cls, int i)
{
	make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name", name,
	          "node_class", cls, "bmc", "driver", "redfish", "address", "127.0.0.1", "port",
	          M.base + i, "username", "admin", "password", "secret", "options", "scheme",
	          "http", "timeout_ms", 5000);
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

static int
setup(void **state)
{
	FILE *f;

	(void)state;
	snprintf(workdir, sizeof workdir, "/tmp/rp-fwops-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", workdir);
	f = fopen(conf, "w");
	assert_non_null(f);
	/* The mock reads the image name from the URL and never downloads it. */
	fprintf(f, "[server]\npower_sync_interval = 0\nboot_url = http://127.0.0.1:9\n");
	fclose(f);
	server_start(&S, NULL, args);
	mock_start(&M, 4, NULL);
	add_node("fw0", "gx8", 0);
	add_node("fw1", "gx8", 1);
	add_node("fw2", "gx8", 2);
	add_node("fw3", "gx8bad", 3);
	upload("bios_2.4.1.bin");
	upload("bmc_2.1.0.bin");
	upload("gpu_96.00.99.00.01.bin");
	upload("bmc_bad_2.2.0.bin");
	upload("nic_23.0.1.bin");
	return 0;
}

static int
teardown(void **state)
{
	mock_stop(&M);
	sh("rm -rf %s", workdir);
	return group_teardown(state);
}

/* POST an action (body may be NULL) and wait for its job. */
static json_t *
act(const char *path, const char *body)
{
	struct reply r;
	json_t *job;

	req(&S, S.admin, "POST", path, body ? "application/json" : NULL, body,
	    body ? strlen(body) : 0, NULL, &r);
	if (r.status != 202)
		fail_msg("POST %s: %ld %s", path, r.status, r.body ? r.body : "");
	job = wait_job(&S, str(r.json, "id"), 120);
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

static json_t *
component(json_t *fw, const char *name)
{
	json_t *c;
	size_t i;

	json_array_foreach(json_object_get(fw, "components"), i, c)
	{
		if (!strcmp(str(c, "component"), name))
			return c;
	}
	return NULL;
}

/* The mock's count of PATCH requests (BIOS settings) so far. */
static int
patches(int i)
{
	json_t *st = mock_get(&M, i, "/__mock/state"), *a;
	size_t k;
	int n = 0;

	json_array_foreach(json_object_get(st, "actions"), k, a)
	{
		n += !strcmp(str(a, "method"), "PATCH");
	}
	json_decref(st);
	return n;
}

static const char *
mock_version(json_t *st, const char *id)
{
	return str(json_object_get(st, "firmware"), id);
}

static json_int_t
mock_count(json_t *st, const char *id)
{
	return json_integer_value(json_object_get(json_object_get(st, "update_count"), id));
}

static void
test_refresh(void **state)
{
	struct reply r;
	json_t *job, *c;
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {
		char path[100];

		snprintf(path, sizeof path, "/v1/nodes/fw%d/firmware/refresh", i);
		job = act(path, NULL);
		expect(job, "succeeded");
		assert_int_equal(json_integer_value(json_object_get(json_object_get(job, "result"),
		                                                    "components")),
		                 14 /* 12 in the inventory + the gpu and nic families */);
		assert_string_equal(str(json_object_get(job, "result"), "registry"),
		                    "BiosAttributeRegistryGX8.v1_0_0");
		json_decref(job);
	}
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw0/firmware", &r, NULL), 200);
	c = component(r.json, "bmc");
	assert_non_null(c);
	assert_string_equal(str(c, "version"), "2.0.0");
	assert_string_equal(str(c, "source"), "redfish");
	assert_non_null(str(c, "read_at"));
	assert_string_equal(str(component(r.json, "bios"), "version"), "1.0.0");
	assert_string_equal(str(component(r.json, "gpu"), "version"), "96.00.89.00.01");
	assert_string_equal(str(component(r.json, "gpu7"), "version"), "96.00.89.00.01");
	assert_false(json_is_true(json_object_get(component(r.json, "cpld"), "updateable")));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw0/bios", &r, NULL), 200);
	assert_string_equal(
	        str(json_object_get(json_object_get(r.json, "actual"), "Above4GDecoding"), "value"),
	        "Enabled");
	reply_free(&r);
}

static void
test_bios_profiles(void **state)
{
	static const char *const bad[] = {
	        "{\"name\":\"p\",\"node_class\":\"gx8\",\"attributes\":{\"NoSuchKnob\":\"On\"}}",
	        "{\"name\":\"p\",\"node_class\":\"gx8\",\"attributes\":{\"SriovSupport\":\"Maybe\"}"
	        "}",
	        "{\"name\":\"p\",\"node_class\":\"gx8\",\"attributes\":{\"SysMemSize\":\"4096 "
	        "GB\"}}",
	        "{\"name\":\"p\",\"node_class\":\"gx8\",\"attributes\":{\"ProcCoreDisable\":99}}",
	        "{\"name\":\"p\",\"node_class\":\"gx8\",\"attributes\":{\"ProcCoreDisable\":"
	        "\"two\"}}",
	        "{\"name\":\"p\",\"node_class\":\"gx8\",\"attributes\":{\"AdminPhone\":"
	        "\"+1 555 0100 0100 0100 0100 0100 0100 0100\"}}",
	        NULL,
	};
	struct reply r;
	int i;

	(void)state;
	for (i = 0; bad[i]; i++) {
		req(&S, S.admin, "POST", "/v1/bios/profiles", "application/json", bad[i],
		    strlen(bad[i]), NULL, &r);
		if (r.status != 400)
			fail_msg("%s: %ld %s", bad[i], r.status, r.body);
		assert_error(&r, 400, "INVALID_FIELD");
		assert_non_null(strstr(
		        str(json_object_get(json_object_get(r.json, "error"), "detail"), "field"),
		        "attributes."));
		reply_free(&r);
	}
	assert_int_equal(count_all(&S, "/v1/bios/profiles"), 0);
	/* A class without stored registries is not checked. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:{s:s}}",
	                      "name", "other", "node_class", "nodes-unseen", "attributes",
	                      "Anything", "Goes"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r,
	                      "{s:s, s:s, s:{s:s, s:s, s:i}}", "name", "gx8-golden", "node_class",
	                      "gx8", "attributes", "SriovSupport", "Enabled", "NumaNodesPerSocket",
	                      "NPS4", "ProcCoreDisable", 2),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/bios/profiles/gx8-golden", &r, "{s:{s:s}}",
	                      "attributes", "PowerProfile", "Turbo"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/bios/profiles/gx8-golden", &r, NULL), 200);
	assert_int_equal(json_object_size(json_object_get(r.json, "attributes")), 3);
	assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 1);
	reply_free(&r);
	/* Assigning a profile to a node by PATCH checks it against that node's registry. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw0", &r, NULL), 200);
	i = (int)json_integer_value(json_object_get(r.json, "version"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/fw0", &r, "{s:s, s:b}",
	                      "bios_profile", "other", "maintenance", 1),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	{
		json_t *d = json_object_get(json_object_get(r.json, "error"), "detail");

		assert_string_equal(str(d, "field"), "bios_profile");
		assert_string_equal(str(d, "attribute"), "Anything");
		assert_non_null(strstr(str(d, "reason"), "not in the registry"));
	}
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw0", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "version")), i);
	assert_true(json_is_false(json_object_get(r.json, "maintenance")));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/fw0", &r, "{s:s}", "bios_profile",
	                      "gx8-golden"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/fw0", &r, "{s:n}", "bios_profile"),
	                 200);
	assert_true(json_is_null(json_object_get(r.json, "bios_profile")));
	reply_free(&r);
}

static void
test_bios_apply(void **state)
{
	struct reply r;
	json_t *job, *st, *cur;
	int before;

	(void)state;
	job = act("/v1/nodes/fw0/bios/apply", NULL);
	expect(job, "succeeded");
	assert_false(json_is_true(json_object_get(json_object_get(job, "result"), "skipped")));
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(job, "result"), "changed")), 3);
	json_decref(job);
	st = mock_get(&M, 0, "/__mock/state");
	cur = json_object_get(json_object_get(st, "bios"), "current");
	assert_string_equal(str(cur, "SriovSupport"), "Enabled");
	assert_string_equal(str(cur, "NumaNodesPerSocket"), "NPS4");
	assert_int_equal(json_integer_value(json_object_get(cur, "ProcCoreDisable")), 2);
	assert_true(json_array_size(json_object_get(st, "boots")) >= 1);
	json_decref(st);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw0/bios", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(r.json, "in_sync")));
	reply_free(&r);

	/* Already matching: no PATCH, no reboot. */
	before = patches(0);
	job = act("/v1/nodes/fw0/bios/apply", "{}");
	expect(job, "succeeded");
	assert_true(json_is_true(json_object_get(json_object_get(job, "result"), "skipped")));
	json_decref(job);
	assert_int_equal(patches(0), before);
}

/* A setting the BMC accepts but that does not take at the boot (the mock's bios_ignore): the
 * job fails naming exactly that attribute, the others took, and the store keeps what the BMC
 * reads. fw1 is still at the BMC's defaults here. */
static void
test_bios_not_applied(void **state)
{
	struct reply r;
	json_t *job, *err, *na, *st, *cur, *actual, *v;
	const char *msg, *k;

	(void)state;
	mock_post(&M, 1, "/__mock/config", "{\"bios_ignore\":[\"NumaNodesPerSocket\"]}");
	job = act("/v1/nodes/fw1/bios/apply", NULL);
	expect(job, "failed");
	/* Reported once the BMC showed nothing staged, not after the whole 60 s wait. */
	{
		int64_t t0, t1;

		assert_int_equal(rp_time_parse(str(job, "started_at"), &t0), 0);
		assert_int_equal(rp_time_parse(str(job, "finished_at"), &t1), 0);
		if (t1 - t0 >= 30000)
			fail_msg("the job waited %lld ms for an attribute that was never staged",
			         (long long)(t1 - t0));
	}
	err = json_object_get(job, "error");
	assert_string_equal(str(err, "code"), "bios_not_applied");
	msg = str(err, "message");
	assert_non_null(msg);
	if (!strstr(msg, "1 attribute(s)") || !strstr(msg, "NumaNodesPerSocket") ||
	    strstr(msg, "SriovSupport") || strstr(msg, "ProcCoreDisable"))
		fail_msg("%s", msg);
	na = json_object_get(json_object_get(job, "result"), "not_applied");
	if (json_array_size(na) != 1)
		fail_msg("%s", json_dumps(job, 0));
	assert_string_equal(json_string_value(json_array_get(na, 0)), "NumaNodesPerSocket");
	json_decref(job);

	/* The BMC: the other two took, the ignored one kept its value and is not pending. */
	st = mock_get(&M, 1, "/__mock/state");
	cur = json_object_get(json_object_get(st, "bios"), "current");
	assert_string_equal(str(cur, "SriovSupport"), "Enabled");
	assert_int_equal(json_integer_value(json_object_get(cur, "ProcCoreDisable")), 2);
	assert_string_not_equal(str(cur, "NumaNodesPerSocket"), "NPS4");
	assert_int_equal(json_object_size(json_object_get(json_object_get(st, "bios"), "pending")),
	                 0);
	assert_true(json_array_size(json_object_get(st, "boots")) >= 1);

	/* The store: every value as the BMC reads it, and the node is out of sync. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw1/bios", &r, NULL), 200);
	assert_false(json_is_true(json_object_get(r.json, "in_sync")));
	actual = json_object_get(r.json, "actual");
	json_object_foreach(cur, k, v)
	{
		json_t *a = json_object_get(json_object_get(actual, k), "value");

		if (a == NULL ||
		    !(json_equal(a, v) || (json_is_number(a) && json_is_number(v) &&
		                           json_number_value(a) == json_number_value(v))))
			fail_msg("%s: the BMC reads %s, the store has %s", k,
			         json_dumps(v, JSON_ENCODE_ANY),
			         a ? json_dumps(a, JSON_ENCODE_ANY) : "-");
	}
	reply_free(&r);
	json_decref(st);
	mock_post(&M, 1, "/__mock/config", "{\"bios_ignore\":[]}");
}

static void
test_firmware_update(void **state)
{
	struct reply r;
	json_t *job, *res, *st, *u;
	size_t i;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s}, s:{s:s, s:s, s:s}, s:{s:s, s:s}}}",
	                      "name", "gx8-2026q4", "node_class", "gx8", "components", "bios",
	                      "version", "2.4.1", "image", "bios_2.4.1.bin", "bmc", "version",
	                      "2.1.0", "image", "bmc_2.1.0.bin", "method", "redfish", "gpu",
	                      "version", "96.00.99.00.01", "image", "gpu_96.00.99.00.01.bin"),
	                 201);
	assert_string_equal(
	        str(json_object_get(json_object_get(r.json, "components"), "bmc"), "image"),
	        "bmc_2.1.0.bin");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/drift?node=fw1", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 1);
	reply_free(&r);

	job = act("/v1/nodes/fw1/firmware/update", NULL);
	expect(job, "succeeded");
	res = json_object_get(job, "result");
	if (json_array_size(json_object_get(res, "updated")) != 3)
		fail_msg("%s", json_dumps(job, 0));
	assert_int_equal(json_array_size(json_object_get(res, "updated")), 3);
	json_array_foreach(json_object_get(res, "updated"), i, u)
	{
		if (!strcmp(str(u, "component"), "bios")) {
			assert_string_equal(str(u, "from"), "1.0.0");
			assert_string_equal(str(u, "to"), "2.4.1");
		}
	}
	assert_string_equal(str(job, "phase"), "gpu: done"); /* the last component, done */
	assert_string_equal(str(json_object_get(res, "versions"), "bios"), "2.4.1");
	assert_string_equal(str(json_object_get(res, "versions"), "bmc"), "2.1.0");
	assert_string_equal(str(json_object_get(res, "versions"), "gpu"), "96.00.99.00.01");
	json_decref(job);
	st = mock_get(&M, 1, "/__mock/state");
	assert_string_equal(mock_version(st, "BIOS"), "2.4.1");
	assert_string_equal(mock_version(st, "BMC"), "2.1.0");
	assert_string_equal(mock_version(st, "GPU0"), "96.00.99.00.01");
	assert_string_equal(mock_version(st, "GPU7"), "96.00.99.00.01");
	assert_int_equal(mock_count(st, "BIOS"), 1);
	assert_int_equal(mock_count(st, "BMC"), 1);
	assert_int_equal(mock_count(st, "GPU3"), 1);
	assert_int_equal(mock_count(st, "NIC0"), 0);
	json_decref(st);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/drift?node=fw1", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 0);
	reply_free(&r);

	/* Again: everything is at target, nothing is flashed. */
	job = act("/v1/nodes/fw1/firmware/update", "{\"components\":[\"bmc\",\"bios\"]}");
	expect(job, "succeeded");
	res = json_object_get(job, "result");
	assert_int_equal(json_array_size(json_object_get(res, "updated")), 0);
	assert_int_equal(json_array_size(json_object_get(res, "skipped")), 2);
	json_decref(job);
	st = mock_get(&M, 1, "/__mock/state");
	assert_int_equal(mock_count(st, "BIOS"), 1);
	assert_int_equal(mock_count(st, "BMC"), 1);
	json_decref(st);
}

static void
test_bad_image(void **state)
{
	struct reply r;
	json_t *job, *st;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s}}}", "name", "gx8-bad", "node_class",
	                      "gx8bad", "components", "bmc", "version", "2.2.0", "image",
	                      "bmc_bad_2.2.0.bin"),
	                 201);
	reply_free(&r);
	job = act("/v1/nodes/fw3/firmware/update", NULL);
	expect(job, "failed");
	if (strstr(str(json_object_get(job, "error"), "message"), "VerificationFailed") == NULL)
		fail_msg("%s", json_dumps(job, 0));
	assert_string_equal(str(json_object_get(job, "error"), "code"), "update_failed");
	assert_non_null(
	        strstr(str(json_object_get(job, "error"), "message"), "VerificationFailed"));
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"), "bmc"));
	json_decref(job);
	st = mock_get(&M, 3, "/__mock/state");
	assert_string_equal(mock_version(st, "BMC"), "2.0.0");
	assert_int_equal(mock_count(st, "BMC"), 0);
	json_decref(st);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/fw3/firmware", &r, NULL), 200);
	assert_string_equal(str(component(r.json, "bmc"), "version"), "2.0.0");
	reply_free(&r);
}

static void
test_kill_during_update(void **state)
{
	struct reply r;
	char dir[256], id[64];
	json_t *job, *st;
	int i, started = 0;

	(void)state;
	/* A slow BMC: the update is mid-task when rackpilotd dies. */
	mock_post(&M, 2, "/__mock/config", "{\"delay_ms\":150}");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/fw2/firmware/update", &r, NULL), 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	for (i = 0; i < 600 && !started; i++) {
		st = mock_get(&M, 2, "/__mock/state");
		/* The first task exists: rackpilotd may or may not have recorded its URI yet (if
		 * not, it finds the task by its image after the restart). */
		started = json_object_size(json_object_get(st, "tasks")) > 0;
		json_decref(st);
		if (!started)
			usleep(50000);
	}
	assert_true(started);
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGKILL);
	server_start(&S, dir, args);
	job = wait_job(&S, id, 180);
	expect(job, "succeeded");
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(job, "result"), "updated")), 3);
	json_decref(job);
	st = mock_get(&M, 2, "/__mock/state");
	assert_int_equal(mock_count(st, "BIOS"), 1);
	assert_int_equal(mock_count(st, "BMC"), 1);
	assert_int_equal(mock_count(st, "GPU0"), 1);
	assert_int_equal(json_object_size(json_object_get(st, "tasks")), 3);
	assert_string_equal(mock_version(st, "BIOS"), "2.4.1");
	json_decref(st);
	mock_post(&M, 2, "/__mock/config", "{\"delay_ms\":0}");
}

static void
bad(const char *method, const char *path, const char *body, long status, const char *code)
{
	struct reply r;

	req(&S, S.admin, method, path, body ? "application/json" : NULL, body,
	    body ? strlen(body) : 0, NULL, &r);
	if (r.status != status)
		fail_msg("%s %s %s: %ld %s", method, path, body ? body : "", r.status, r.body);
	assert_error(&r, status, code);
	reply_free(&r);
}

static void
test_bad_input(void **state)
{
	long jobs = count_all(&S, "/v1/jobs"), baselines = count_all(&S, "/v1/firmware/baselines");
	json_t *before;
	struct reply r;

	(void)state;
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/baselines/gx8-2026q4", &r, NULL),
	                 200);
	before = json_incref(r.json);
	reply_free(&r);
	bad("POST", "/v1/nodes/nope/firmware/update", NULL, 404, "NOT_FOUND");
	bad("POST", "/v1/nodes/nope/firmware/refresh", NULL, 404, "NOT_FOUND");
	bad("POST", "/v1/nodes/nope/bios/apply", NULL, 404, "NOT_FOUND");
	bad("POST", "/v1/nodes/fw0/firmware/update", "{\"components\":[\"flux-capacitor\"]}", 400,
	    "INVALID_FIELD");
	bad("POST", "/v1/nodes/fw0/firmware/update", "{\"components\":\"bmc\"}", 400,
	    "INVALID_FIELD");
	bad("POST", "/v1/nodes/fw0/firmware/update", "{\"force\":true}", 400, "UNKNOWN_FIELD");
	bad("POST", "/v1/nodes/fw0/firmware/refresh", "{\"x\":1}", 400, "BAD_REQUEST");
	bad("POST", "/v1/nodes/fw0/bios/apply", "{\"profile\":\"nope\"}", 400, "INVALID_FIELD");
	make_node(&S, "{s:s, s:s, s:{s:s}}", "name", "classless", "node_class", "unknown-class",
	          "bmc", "driver", "fake");
	bad("POST", "/v1/nodes/classless/firmware/update", NULL, 409, "CONFLICT");
	bad("POST", "/v1/nodes/classless/bios/apply", NULL, 409, "CONFLICT");
	/* Baselines: every component names an existing image, by a known method. */
	bad("POST", "/v1/firmware/baselines",
	    "{\"name\":\"b2\",\"node_class\":\"c2\",\"components\":{\"bmc\":\"2.1.0\"}}", 400,
	    "INVALID_FIELD");
	bad("POST", "/v1/firmware/baselines",
	    "{\"name\":\"b2\",\"node_class\":\"c2\",\"components\":{\"bmc\":{\"version\":\"2.1.0\"}"
	    "}}",
	    400, "INVALID_FIELD");
	bad("POST", "/v1/firmware/baselines",
	    "{\"name\":\"b2\",\"node_class\":\"c2\",\"components\":{\"bmc\":{\"version\":\"2.1.0\","
	    "\"image\":\"no-such-image\"}}}",
	    400, "INVALID_FIELD");
	bad("POST", "/v1/firmware/baselines",
	    "{\"name\":\"b2\",\"node_class\":\"c2\",\"components\":{\"bmc\":{\"version\":\"2.1.0\","
	    "\"image\":\"bmc_2.1.0.bin\",\"method\":\"ftp\"}}}",
	    400, "INVALID_FIELD");
	bad("POST", "/v1/firmware/baselines",
	    "{\"name\":\"b2\",\"node_class\":\"c2\",\"components\":{\"bmc\":{\"version\":\"2.1.0\","
	    "\"image\":\"bmc_2.1.0.bin\",\"method\":\"agent\"}}}",
	    400, "INVALID_FIELD");
	bad("PATCH", "/v1/firmware/baselines/gx8-2026q4",
	    "{\"components\":{\"nic\":{\"version\":\"23.0\"}}}", 400, "INVALID_FIELD");
	bad("PATCH", "/v1/firmware/baselines/gx8-2026q4",
	    "{\"components\":{\"bmc\":{\"image\":\"nope\"}}}", 400, "INVALID_FIELD");
	assert_int_equal(count_all(&S, "/v1/jobs"), jobs);
	assert_int_equal(count_all(&S, "/v1/firmware/baselines"), baselines);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/baselines/gx8-2026q4", &r, NULL),
	                 200);
	assert_true(json_equal(r.json, before));
	reply_free(&r);
	json_decref(before);
	/* The shorthand in a patch: a new version, the same image and method. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/gx8-2026q4", &r,
	                      "{s:{s:s}}", "components", "bmc", "2.1.1"),
	                 200);
	assert_string_equal(
	        str(json_object_get(json_object_get(r.json, "components"), "bmc"), "image"),
	        "bmc_2.1.0.bin");
	reply_free(&r);
}

/* redfish-push: the file itself goes to the BMC's MultipartHttpPushUri. */
static void
test_push(void **state)
{
	struct reply r;
	json_t *job, *st;

	(void)state;
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/gx8-2026q4", &r,
	                      "{s:{s:{s:s, s:s, s:s}}}", "components", "nic", "version", "23.0.1",
	                      "image", "nic_23.0.1.bin", "method", "redfish-push"),
	                 200);
	reply_free(&r);
	job = act("/v1/nodes/fw0/firmware/update", "{\"components\":[\"nic\"]}");
	expect(job, "succeeded");
	assert_string_equal(str(json_object_get(json_object_get(job, "result"), "versions"), "nic"),
	                    "23.0.1");
	json_decref(job);
	st = mock_get(&M, 0, "/__mock/state");
	assert_string_equal(mock_version(st, "NIC0"), "23.0.1");
	assert_int_equal(mock_count(st, "NIC0"), 1);
	assert_int_equal(mock_count(st, "BIOS"), 0);
	json_decref(st);
}

static void image_path(const char *name, char *buf, size_t len);

/* An image gone from this server's image store between the request (its pre-flight saw it)
 * and the job (here: queued behind a slow power job on the same node; in a site with several
 * servers, a server without the image): the job fails as image_missing and nothing reaches
 * the BMC. */
static void
test_push_image_gone(void **state)
{
	struct reply r;
	char img[600], id[64];
	json_t *job, *st;

	(void)state;
	upload("nic_23.0.2.bin");
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/gx8-2026q4", &r,
	                      "{s:{s:{s:s, s:s, s:s}}}", "components", "nic", "version", "23.0.2",
	                      "image", "nic_23.0.2.bin", "method", "redfish-push"),
	                 200);
	reply_free(&r);
	image_path("nic_23.0.2.bin", img, sizeof img);
	mock_post(&M, 0, "/__mock/config", "{\"delay_ms\": 700}");
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/fw0/power", &r, "{s:s}", "target", "on"), 202);
	reply_free(&r);
	req(&S, S.admin, "POST", "/v1/nodes/fw0/firmware/update", "application/json",
	    "{\"components\":[\"nic\"]}", strlen("{\"components\":[\"nic\"]}"), NULL, &r);
	assert_int_equal(r.status, 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(unlink(img), 0);
	job = wait_job(&S, id, 120);
	mock_post(&M, 0, "/__mock/config", "{\"delay_ms\": 0}");
	expect(job, "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "image_missing");
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"), "nothing was sent"));
	json_decref(job);
	st = mock_get(&M, 0, "/__mock/state");
	assert_string_equal(mock_version(st, "NIC0"), "23.0.1");
	assert_int_equal(mock_count(st, "NIC0"), 1);
	json_decref(st);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/gx8-2026q4", &r,
	                      "{s:{s:{s:s, s:s, s:s}}}", "components", "nic", "version", "23.0.1",
	                      "image", "nic_23.0.1.bin", "method", "redfish-push"),
	                 200);
	reply_free(&r);
}

/* ---- Pre-flight: what an update or apply needs, checked before anything starts ---------- */

static struct mock P; /* BMCs of the pre-flight nodes: nothing may reach them on a 409 */

/* POST path (body may be NULL): 409 PREFLIGHT_FAILED; returns detail.missing (caller decrefs). */
static json_t *
refused(const char *path, const char *body)
{
	struct reply r;
	json_t *d, *m;

	req(&S, S.admin, "POST", path, body ? "application/json" : NULL, body,
	    body ? strlen(body) : 0, NULL, &r);
	if (r.status != 409)
		fail_msg("POST %s: %ld %s (want 409 PREFLIGHT_FAILED)", path, r.status,
		         r.body ? r.body : "");
	assert_error(&r, 409, "PREFLIGHT_FAILED");
	d = json_object_get(json_object_get(r.json, "error"), "detail");
	m = json_incref(json_object_get(d, "missing"));
	assert_true(json_array_size(m) > 0);
	assert_int_equal(json_integer_value(json_object_get(d, "count")), json_array_size(m));
	reply_free(&r);
	return m;
}

/* The entry of missing for node and need (and member key = val when key is given), or NULL. */
static json_t *
missing_of(json_t *missing, const char *node, const char *what, const char *key, const char *val)
{
	json_t *m;
	size_t i;

	json_array_foreach(missing, i, m)
	{
		if (!strcmp(str(m, "node"), node) && !strcmp(str(m, "need"), what) &&
		    (key == NULL || (str(m, key) && !strcmp(str(m, key), val))))
			return m;
	}
	return NULL;
}

static void
has_need(json_t *missing, const char *node, const char *what, const char *key, const char *val)
{
	json_t *m = missing_of(missing, node, what, key, val);

	if (m == NULL)
		fail_msg("no %s for %s (%s=%s) in %s", what, node, key ? key : "-", val ? val : "-",
		         json_dumps(missing, JSON_COMPACT));
	assert_non_null(str(m, "fix"));
}

/* The image file in the server's image directory. */
static void
image_path(const char *name, char *buf, size_t len)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/v1/images/%s", name);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	snprintf(buf, len, "%s/images/%s", S.dir, str(r.json, "file"));
	reply_free(&r);
}

static void
write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static size_t
mock_actions(struct mock *m, int i)
{
	json_t *st = mock_get(m, i, "/__mock/state");
	size_t n = json_array_size(json_object_get(st, "actions"));

	json_decref(st);
	return n;
}

static long PfJobs;
static char PfImg[600], PfGood[100];

/* pf0 (all in place but the image file, in the cases below), pf1 (no BMC credentials), pfipmi
 * (IPMI), the baseline gx8pf-1 (SimpleUpdate of bmc), profiles pf-golden and pf-empty. */
static void
test_preflight_seed(void **state)
{
	struct reply r;

	(void)state;
	mock_start(&P, 2, NULL);
	make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name", "pf0",
	          "node_class", "gx8pf", "bmc", "driver", "redfish", "address", "127.0.0.1", "port",
	          P.base, "username", "admin", "password", "secret", "options", "scheme", "http",
	          "timeout_ms", 5000);
	/* A BMC without credentials. */
	make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:i, s:{s:s, s:i}}}", "name", "pf1", "node_class",
	          "gx8pf", "bmc", "driver", "redfish", "address", "127.0.0.1", "port", P.base + 1,
	          "options", "scheme", "http", "timeout_ms", 5000);
	/* IPMI cannot do SimpleUpdate or a Redfish BIOS apply. */
	make_node(&S, "{s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s}}", "name", "pfipmi", "node_class",
	          "gx8pf", "bmc", "driver", "ipmi", "address", "127.0.0.1", "port", 9, "username",
	          "admin", "password", "secret");
	upload("pfbmc_2.1.0.bin");
	snprintf(PfGood, sizeof PfGood, "firmware image %s\n", "pfbmc_2.1.0.bin");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}}}", "name", "gx8pf-1", "node_class",
	                      "gx8pf", "components", "bmc", "version", "2.1.0", "image",
	                      "pfbmc_2.1.0.bin", "method", "redfish"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:{s:s}}",
	                      "name", "pf-golden", "node_class", "gx8pf", "attributes",
	                      "SriovSupport", "Enabled"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:{}}", "name",
	                      "pf-empty", "attributes"),
	                 201);
	reply_free(&r);
	PfJobs = count_all(&S, "/v1/jobs");
	image_path("pfbmc_2.1.0.bin", PfImg, sizeof PfImg);
}

/* The image file no longer matches its digest (same size, other bytes), then is gone. */
static void
test_preflight_image(void **state)
{
	json_t *miss;

	(void)state;
	write_file(PfImg, "firmware image pfbmc_6.6.6.bin\n");
	miss = refused("/v1/nodes/pf0/firmware/update", NULL);
	has_need(miss, "pf0", "image_digest", "image", "pfbmc_2.1.0.bin");
	assert_int_equal(json_array_size(miss), 1);
	json_decref(miss);
	/* Gone altogether. */
	assert_int_equal(unlink(PfImg), 0);
	miss = refused("/v1/nodes/pf0/firmware/update", "{\"components\":[\"bmc\"]}");
	has_need(miss, "pf0", "image_file", "image", "pfbmc_2.1.0.bin");
	json_decref(miss);
}

/* A BMC without credentials; several things at once: the missing file too, both listed. */
static void
test_preflight_credentials(void **state)
{
	json_t *miss;

	(void)state;
	miss = refused("/v1/nodes/pf1/firmware/update", NULL);
	has_need(miss, "pf1", "bmc_credentials", NULL, NULL);
	has_need(miss, "pf1", "image_file", "component", "bmc");
	json_decref(miss);
}

/* IPMI: unsupported, for a BIOS apply and for SimpleUpdate (with the missing file, too). */
static void
test_preflight_ipmi(void **state)
{
	json_t *miss;

	(void)state;
	miss = refused("/v1/nodes/pfipmi/bios/apply", NULL);
	has_need(miss, "pfipmi", "unsupported", "driver", "ipmi");
	assert_int_equal(json_array_size(miss), 1);
	json_decref(miss);
	miss = refused("/v1/nodes/pfipmi/firmware/update", NULL);
	has_need(miss, "pfipmi", "unsupported", "component", "bmc");
	has_need(miss, "pfipmi", "image_file", NULL, NULL);
	json_decref(miss);
}

/* A profile that sets nothing; and no credentials for a BIOS apply either. */
static void
test_preflight_profile(void **state)
{
	json_t *miss;

	(void)state;
	miss = refused("/v1/nodes/pf1/bios/apply", "{\"profile\":\"pf-empty\"}");
	has_need(miss, "pf1", "attributes", "profile", "pf-empty");
	has_need(miss, "pf1", "bmc_credentials", NULL, NULL);
	json_decref(miss);
}

/* What was validated before stays as it was; the refusals stored nothing and sent nothing. */
static void
test_preflight_nothing_stored(void **state)
{
	(void)state;
	bad("POST", "/v1/nodes/pf0/bios/apply", "{\"profile\":\"nope\"}", 400, "INVALID_FIELD");
	bad("POST", "/v1/nodes/pf0/firmware/update", "{\"components\":[\"gpu\"]}", 400,
	    "INVALID_FIELD");
	/* Nothing was stored, nothing reached a BMC. */
	assert_int_equal(count_all(&S, "/v1/jobs"), PfJobs);
	assert_int_equal(mock_actions(&P, 0), 0);
	assert_int_equal(mock_actions(&P, 1), 0);
}

/* Everything in place: accepted, and it works. */
static void
test_preflight_in_place(void **state)
{
	struct reply r;
	json_t *job, *st, *a;
	size_t i;
	int seen;

	(void)state;
	write_file(PfImg, PfGood);
	job = act("/v1/nodes/pf0/firmware/update", NULL);
	expect(job, "succeeded");
	json_decref(job);
	st = mock_get(&P, 0, "/__mock/state");
	assert_string_equal(mock_version(st, "BMC"), "2.1.0");
	assert_int_equal(mock_count(st, "BMC"), 1);
	seen = 0;
	json_array_foreach(json_object_get(st, "actions"), i, a)
	{
		if (str(a, "image_uri"))
			seen |= !strcmp(str(a, "image_uri"),
			                "http://127.0.0.1:9/boot/images/pfbmc_2.1.0.bin");
	}
	assert_true(seen);
	json_decref(st);
	job = act("/v1/nodes/pf0/bios/apply", NULL);
	expect(job, "succeeded");
	json_decref(job);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/pf1", &r, "{s:{s:s, s:s}}", "bmc",
	                      "username", "admin", "password", "secret"),
	                 200);
	reply_free(&r);
	job = act("/v1/nodes/pf1/firmware/update", NULL);
	expect(job, "succeeded");
	json_decref(job);
	mock_stop(&P);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_refresh),
	        cmocka_unit_test(test_bios_profiles),
	        cmocka_unit_test(test_bios_apply),
	        cmocka_unit_test(test_bios_not_applied),
	        cmocka_unit_test(test_firmware_update),
	        cmocka_unit_test(test_bad_image),
	        cmocka_unit_test(test_kill_during_update),
	        cmocka_unit_test(test_bad_input),
	        cmocka_unit_test(test_push),
	        cmocka_unit_test(test_push_image_gone),
	        cmocka_unit_test(test_preflight_seed),
	        cmocka_unit_test(test_preflight_image),
	        cmocka_unit_test(test_preflight_credentials),
	        cmocka_unit_test(test_preflight_ipmi),
	        cmocka_unit_test(test_preflight_profile),
	        cmocka_unit_test(test_preflight_nothing_stored),
	        cmocka_unit_test(test_preflight_in_place),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
