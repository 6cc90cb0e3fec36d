/*
 * Rollouts against 50 Redfish mock BMCs (tests/redfish/mock_bmc.py), through the API only:
 *
 * - bad input: every error is a 4xx and nothing is stored;
 * - a firmware rollout (canary 1, batches of 10, at most 2 nodes of a rack per wave) where one
 *   node's baseline names a bad image (the mock fails the update task): the rollout pauses at
 *   max_failures 0, the rest of that wave finishes, later waves never start; the baseline is
 *   fixed and the rollout resumed; rackpilotd is killed with -9 during a later wave and
 *   restarted; it completes and every BMC's own update counter shows exactly one update per
 *   node (none for the node already at target and the one in maintenance);
 * - a BIOS rollout where the mock applies pending settings only when the node boots, gated on
 *   power_on and version_match; drift before and after;
 * - pause, resume and abort of a scheduled rollout; events for every change;
 * - pre-flight: a SimpleUpdate rollout with boot_url unset, an image file that no longer matches
 *   its digest, a BMC without credentials: 409 PREFLIGHT_FAILED listing every missing thing for
 *   every node, nothing stored, nothing sent; boot_url's default (a concrete listen address):
 *   accepted, and the BMCs get ImageURIs on that address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define N         50
#define BAD       5  /* fw05: its class's baseline names a bad image */
#define AT_TARGET 48 /* fw48: reports the target version already */
#define MAINT     49 /* fw49: in maintenance */

static struct mock M;
static struct server S2;
static char Dir[256];
static const char *const Args[] = {"--power-sync-interval", "0", NULL};

static json_t *
rollout(struct server *s, const char *id)
{
	char path[200];

	snprintf(path, sizeof path, "/v1/rollouts/%s", id);
	return get_json(s, path);
}

/* Poll the rollout until pred says so (at most timeout_s); returns it (caller decrefs). */
static json_t *
wait_until(struct server *s, const char *id, int (*pred)(json_t *), int timeout_s)
{
	int i;

	for (i = 0; i < timeout_s * 5; i++) {
		json_t *ro = rollout(s, id);

		if (pred(ro))
			return ro;
		json_decref(ro);
		usleep(200000);
	}
	{
		json_t *ro = rollout(s, id);
		char *dump = json_dumps(ro, JSON_COMPACT);

		fail_msg("rollout did not get there in %d s: %.3000s", timeout_s, dump);
	}
	return NULL;
}

static const char *
state(json_t *ro)
{
	return jstr(ro, "state");
}

static int
is_paused(json_t *ro)
{
	return !strcmp(state(ro), "paused");
}

static int
is_completed(json_t *ro)
{
	return !strcmp(state(ro), "completed");
}

static json_t *
wave(json_t *ro, int i)
{
	return json_array_get(json_object_get(ro, "waves"), (size_t)i);
}

static int
node_wave(json_t *ro, const char *name)
{
	json_t *n;
	size_t i;

	json_array_foreach(json_object_get(ro, "nodes"), i,
	                   n) if (!strcmp(jstr(n, "node"),
	                                  name)) return json_is_integer(json_object_get(n, "wave"))
	        ? (int)json_integer_value(json_object_get(n, "wave"))
	        : -1;
	return -2;
}

/* The paused rollout has settled its running wave: nothing runs any more. */
static int
paused_and_settled(json_t *ro)
{
	return is_paused(ro) &&
	       json_integer_value(json_object_get(json_object_get(ro, "counts"), "running")) == 0;
}

static int Wave2;
static int
wave2_running(json_t *ro)
{
	const char *ws = jstr(wave(ro, Wave2), "state");

	return ws && strcmp(ws, "pending") != 0;
}

static int
update_count(int bmc, const char *component)
{
	json_t *st = mock_get(&M, bmc, "/__mock/state");
	int n = (int)json_integer_value(
	        json_object_get(json_object_get(st, "update_count"), component));

	json_decref(st);
	return n;
}

static void
upload_image(struct server *s, const char *name)
{
	char path[200], body[64];
	struct reply r;

	snprintf(path, sizeof path, "/v1/images/%s?kind=firmware", name);
	snprintf(body, sizeof body, "firmware image %s\n", name);
	assert_int_equal(req(s, s->admin, "PUT", path, "application/octet-stream", body,
	                     strlen(body), NULL, &r),
	                 201);
	reply_free(&r);
}

static long
events(struct server *s, const char *action)
{
	char path[200];

	snprintf(path, sizeof path, "/v1/events?action=%s&limit=1000", action);
	return count_all(s, path);
}

static int
setup(void **state_)
{
	char name[32], rack[16];
	struct reply r;
	int i;

	(void)state_;
	mock_start(&M, N, NULL);
	for (i = 0; i < N; i++)
		mock_post(&M, i, "/__mock/config",
		          "{\"power_delay_s\": 0, \"bmc_reboot_requests\": 0}");
	server_start(&S2, NULL, Args);
	snprintf(Dir, sizeof Dir, "%s", S2.dir);
	for (i = 0; i < 5; i++) {
		snprintf(rack, sizeof rack, "r%d", i);
		assert_int_equal(
		        call(&S2, S2.admin, "POST", "/v1/racks", &r, "{s:s}", "name", rack), 201);
		reply_free(&r);
	}
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof name, "fw%02d", i);
		snprintf(rack, sizeof rack, "r%d", i % 5);
		make_node(&S2,
		          "{s:s, s:s, s:s, s:[s], s:b, s:s?, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}",
		          "name", name, "rack", rack, "node_class", i == BAD ? "gpu-b" : "gpu-a",
		          "tags", "fleet", "maintenance", i == MAINT, "maintenance_reason",
		          i == MAINT ? "reseat GPU 3" : NULL, "bmc", "driver", "redfish", "address",
		          "127.0.0.1", "port", M.base + i, "username", "admin", "password",
		          "secret", "options", "scheme", "http");
	}
	upload_image(&S2, "nic_3.0.0.bin");
	upload_image(&S2, "nic_bad_3.0.0.bin");
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}}}", "name", "a-2026", "node_class",
	                      "gpu-a", "components", "nic0", "version", "3.0.0", "image",
	                      "nic_3.0.0.bin", "method", "redfish-push"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}}}", "name", "b-2026", "node_class",
	                      "gpu-b", "components", "nic0", "version", "3.0.0", "image",
	                      "nic_bad_3.0.0.bin", "method", "redfish-push"),
	                 201);
	reply_free(&r);
	/* fw48 already runs the target. */
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/nodes/fw48/firmware/readings", &r,
	                      "{s:s, s:[{s:s, s:s}]}", "source", "manual", "components",
	                      "component", "nic0", "version", "3.0.0"),
	                 204);
	reply_free(&r);
	return 0;
}

static int
teardown(void **state_)
{
	(void)state_;
	server_stop(&S2, SIGTERM);
	server_cleanup(&S2);
	mock_stop(&M);
	return 0;
}

static void
bad(const char *body, long status, const char *code)
{
	struct reply r;

	req(&S2, S2.admin, "POST", "/v1/rollouts", "application/json", body, strlen(body), NULL,
	    &r);
	if (r.status != status ||
	    strcmp(jstr(json_object_get(r.json, "error"), "code") ?: "", code))
		fail_msg("%s -> %ld %s (want %ld %s)", body, r.status, r.body, status, code);
	reply_free(&r);
}

static void
test_bad_input(void **state_)
{
	(void)state_;
	bad("{\"kind\":\"bmc\",\"selector\":{\"tag\":\"fleet\"}}", 400, "INVALID_FIELD");
	bad("{\"selector\":{\"tag\":\"fleet\"}}", 400, "MISSING_FIELD");
	bad("{\"kind\":\"firmware\"}", 400, "MISSING_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"colour\":1}", 400,
	    "UNKNOWN_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"nobody\"}}", 400, "BAD_REQUEST");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\",\"rack\":\"r0\"}}", 400,
	    "BAD_REQUEST");
	bad("{\"kind\":\"firmware\",\"selector\":{\"nodes\":[\"fw01\",\"ghost\"]}}", 400,
	    "BAD_REQUEST");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"gate\":{\"require\":"
	    "[\"power_on\",\"vibes\"]}}",
	    400, "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"gate\":{\"recipe\":\"nope\"}"
	    "}",
	    400, "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"gate\":{\"wait_s\":-1}}",
	    400, "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"waves\":{\"batch\":0}}", 400,
	    "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"waves\":{\"batch\":\"0%\"}}",
	    400, "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"waves\":{\"batch\":\"ten\"}"
	    "}",
	    400, "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"waves\":{\"batch\":\"150%\"}"
	    "}",
	    400, "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"waves\":{\"size\":3}}", 400,
	    "UNKNOWN_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"max_failures\":-2}", 400,
	    "INVALID_FIELD");
	bad("{\"kind\":\"firmware\",\"selector\":{\"tag\":\"fleet\"},\"start_at\":\"tomorrow\"}",
	    400, "INVALID_FIELD");
	/* Every selected node already at target, skipped, or without a target: 409. */
	bad("{\"kind\":\"firmware\",\"selector\":{\"nodes\":[\"fw48\",\"fw49\"]}}", 409,
	    "CONFLICT");
	bad("{\"kind\":\"bios\",\"selector\":{\"tag\":\"fleet\"}}", 409, "CONFLICT");
	bad("[1]", 400, "BAD_REQUEST");
	assert_int_equal(count_all(&S2, "/v1/rollouts"), 0);
	assert_int_equal(events(&S2, "rollout."), 0);
	assert_int_equal(count_all(&S2, "/v1/jobs"), 0);
}

static void
test_firmware_rollout(void **state_)
{
	struct reply r;
	json_t *ro, *w, *n, *racks;
	char id[64], path[200], name[200];
	size_t i, k;
	int bad_wave, waves, b, mid_task = 0;

	(void)state_;
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:s}, s:{s:i, s:i, s:i}, s:i, s:{s:i, s:[s]}}", "kind",
	                      "firmware", "selector", "tag", "fleet", "waves", "canary", 1, "batch",
	                      10, "max_per_rack", 2, "max_failures", 0, "gate", "wait_s", 0,
	                      "require", "version_match"),
	                 201);
	snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
	assert_non_null(strstr(r.location, id));
	ro = json_incref(r.json);
	reply_free(&r);
	/* The plan: 48 nodes in 1 + 5 waves; the one at target and the one in maintenance
	 * skipped, with their reasons. */
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "counts"), "total")), N);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "counts"), "skipped")), 2);
	waves = (int)json_integer_value(json_object_get(ro, "wave_count"));
	assert_int_equal(waves, 6);
	assert_true(json_is_true(json_object_get(wave(ro, 0), "canary")));
	assert_int_equal(json_integer_value(json_object_get(wave(ro, 0), "nodes")), 1);
	json_array_foreach(json_object_get(ro, "skipped"), i, n)
	{
		if (!strcmp(jstr(n, "node"), "fw48"))
			assert_string_equal(jstr(n, "reason"), "already at target");
		else
			assert_non_null(strstr(jstr(n, "reason"), "maintenance"));
	}
	/* At most 2 nodes of a rack in any wave. */
	racks = json_object();
	json_array_foreach(json_object_get(ro, "nodes"), i, n)
	{
		char key[64];
		json_t *c;

		if (!json_is_integer(json_object_get(n, "wave")))
			continue;
		snprintf(key, sizeof key, "%lld/%s",
		         (long long)json_integer_value(json_object_get(n, "wave")),
		         jstr(n, "rack"));
		c = json_object_get(racks, key);
		json_object_set_new(racks, key, json_integer(json_integer_value(c) + 1));
		assert_true(json_integer_value(json_object_get(racks, key)) <= 2);
	}
	json_decref(racks);
	bad_wave = node_wave(ro, "fw05");
	assert_true(bad_wave >= 1 && bad_wave < waves - 1);
	json_decref(ro);

	/* A second rollout over the same nodes: 409, naming them. */
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/rollouts", &r, "{s:s, s:{s:[s, s]}}",
	                      "kind", "firmware", "selector", "nodes", "fw01", "fw48"),
	                 409);
	{
		json_t *d = json_object_get(json_object_get(r.json, "error"), "detail");

		assert_string_equal(jstr(json_array_get(json_object_get(d, "nodes"), 0), "node"),
		                    "fw01");
	}
	reply_free(&r);
	assert_int_equal(count_all(&S2, "/v1/rollouts"), 1);

	/* The bad image fails fw05: the rollout pauses; the rest of its wave finishes. */
	ro = wait_until(&S2, id, paused_and_settled, 180);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "failures"), "current")), 1);
	n = json_array_get(json_object_get(ro, "failed"), 0);
	if (strcmp(jstr(n, "node"), "fw05") != 0)
		fail_msg("failed: %s", json_dumps(json_object_get(ro, "failed"), JSON_COMPACT));
	assert_non_null(strstr(jstr(n, "reason"), "firmware_update job failed"));
	assert_non_null(strstr(jstr(ro, "reason"), "max_failures"));
	/* Later waves did not start, even a moment later. */
	json_decref(ro);
	usleep(1500000);
	ro = rollout(&S2, id);
	assert_string_equal(state(ro), "paused");
	for (b = bad_wave + 1; b < waves; b++)
		assert_string_equal(jstr(wave(ro, b), "state"), "pending");
	json_array_foreach(json_object_get(ro, "nodes"), i, n)
	{
		int nw = json_is_integer(json_object_get(n, "wave"))
		                 ? (int)json_integer_value(json_object_get(n, "wave"))
		                 : -1;

		b = atoi(jstr(n, "node") + 2);
		if (nw < 0 || nw > bad_wave) {
			assert_int_equal(update_count(b, "NIC0"), 0);
		} else if (b == BAD) {
			assert_string_equal(jstr(n, "state"), "failed");
			assert_int_equal(update_count(b, "NIC0"), 0);
		} else {
			if (strcmp(jstr(n, "state"), "succeeded") != 0)
				fail_msg("%s in wave %d is %s", jstr(n, "node"), nw,
				         jstr(n, "state"));
			assert_int_equal(update_count(b, "NIC0"), 1);
		}
	}
	json_decref(ro);
	assert_true(events(&S2, "rollout.paused") >= 1);
	assert_int_equal(events(&S2, "rollout.node_failed"), 1);
	/* Resume before fixing: fw05 fails again, and it pauses again. Not tested here: it
	 * would flash nothing (the bad image fails before it is applied). */

	/* Fix the baseline and resume: fw05 is retried in its wave, then the later waves run. */
	assert_int_equal(call(&S2, S2.admin, "PATCH", "/v1/firmware/baselines/b-2026", &r,
	                      "{s:{s:{s:s}}}", "components", "nic0", "image", "nic_3.0.0.bin"),
	                 200);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s/resume", id);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, "{}"), 200);
	assert_string_equal(state(r.json), "running");
	reply_free(&r);

	/* kill -9 once the wave after the bad one has started, and restart. */
	Wave2 = bad_wave + 1;
	ro = wait_until(&S2, id, wave2_running, 120);
	/* Better still: once every BMC of that wave has answered its update request (so each
	 * job has its task to follow; a kill between recording "about to send" and the BMC's
	 * answer makes the job fail as interrupted, by design, which would pause this rollout),
	 * while some update tasks still run. */
	for (k = 0; k < 500 && !mid_task; k++) {
		int all = 1, running = 0;

		json_array_foreach(json_object_get(ro, "nodes"), i, n)
		{
			json_t *st, *t;
			const char *tid;
			int any = 0;

			if (node_wave(ro, jstr(n, "node")) != Wave2)
				continue;
			st = mock_get(&M, atoi(jstr(n, "node") + 2), "/__mock/state");
			json_object_foreach(json_object_get(st, "tasks"), tid, t)
			{
				any = 1;
				running |= !strcmp(json_string_value(t) ?: "", "Running");
			}
			all &= any;
			json_decref(st);
		}
		mid_task = all && running;
		if (!mid_task)
			usleep(10000);
	}
	usleep(300000); /* the jobs commit the task they follow right after the BMC's answer */
	json_decref(ro);
	server_stop(&S2, SIGKILL);
	server_start(&S2, Dir, Args);

	ro = wait_until(&S2, id, is_completed, 300);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "counts"), "succeeded")),
	        48);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "counts"), "failed")), 0);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "failures"), "seen")), 1);
	json_array_foreach(json_object_get(ro, "waves"), i, w)
	        assert_string_equal(jstr(w, "state"), "done");
	json_array_foreach(json_object_get(ro, "nodes"), i, n)
	{
		if (!strcmp(jstr(n, "state"), "skipped"))
			continue;
		assert_int_equal(json_integer_value(json_object_get(n, "attempt")),
		                 strcmp(jstr(n, "node"), "fw05") ? 1 : 2);
	}
	json_decref(ro);
	/* The BMCs' own books: one NIC0 update per node that took part, nothing else. */
	for (b = 0; b < N; b++) {
		json_t *st = mock_get(&M, b, "/__mock/state"), *v;
		const char *comp;

		json_object_foreach(json_object_get(st, "update_count"), comp, v)
		{
			int want = !strcmp(comp, "NIC0") && b != AT_TARGET && b != MAINT;

			if (json_integer_value(v) != want)
				fail_msg("BMC %d: %s updated %lld times, want %d", b, comp,
				         (long long)json_integer_value(v), want);
		}
		json_decref(st);
	}
	/* Jobs running at the kill were recovered (and, having sent, followed their task). */
	if (mid_task)
		assert_true(events(&S2, "job.interrupted") >= 1);
	fprintf(stderr, "rollout test: killed -9 %s an update task ran; %ld job(s) recovered\n",
	        mid_task ? "while" : "(no task seen running) when", events(&S2, "job.interrupted"));
	/* No node got two jobs for one attempt: 48 nodes, plus fw05's retry. */
	assert_int_equal(count_all(&S2, "/v1/jobs?type=firmware_update"), 49);
	/* Drift after: only the node in maintenance is left behind. */
	ro = get_json(&S2, "/v1/firmware/drift?class=gpu-a");
	assert_int_equal(json_integer_value(json_object_get(ro, "nodes_drifted")), 1);
	assert_string_equal(jstr(json_array_get(json_object_get(ro, "items"), 0), "node"), "fw49");
	json_decref(ro);
	/* Every change is an event. */
	assert_int_equal(events(&S2, "rollout.created"), 1);
	assert_int_equal(events(&S2, "rollout.resumed"), 1);
	assert_int_equal(events(&S2, "rollout.completed"), 1);
	assert_true(events(&S2, "rollout.wave_started") >= waves + 1);
	assert_true(events(&S2, "rollout.wave_done") >= waves);
	/* The list shows it, summarised. */
	ro = get_json(&S2, "/v1/rollouts?state=completed");
	assert_int_equal(json_array_size(json_object_get(ro, "items")), 1);
	assert_null(json_object_get(json_array_get(json_object_get(ro, "items"), 0), "nodes"));
	json_decref(ro);
	for (k = 0; k < 3; k++) {
		snprintf(name, sizeof name, "/v1/rollouts/%s/%s", id,
		         k == 0   ? "pause"
		         : k == 1 ? "resume"
		                  : "abort");
		assert_int_equal(call(&S2, S2.admin, "POST", name, &r, NULL), 409);
		assert_error(&r, 409, "INVALID_STATE");
		reply_free(&r);
	}
}

static void
test_bios_rollout(void **state_)
{
	struct reply r;
	json_t *ro, *n;
	char id[64];
	size_t i;
	int b;

	(void)state_;
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/bios/profiles", &r,
	                      "{s:s, s:s, s:{s:s, s:s}}", "name", "golden", "node_class", "gpu-a",
	                      "attributes", "SriovSupport", "Enabled", "NumaNodesPerSocket",
	                      "NPS4"),
	                 201);
	reply_free(&r);
	ro = get_json(&S2, "/v1/bios/drift?class=gpu-a");
	assert_true(json_integer_value(json_object_get(ro, "nodes_drifted")) >= 5);
	json_decref(ro);
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:[s, s, s, s, s]}, s:{s:i, s:s}, s:{s:[s, s]}}", "kind",
	                      "bios", "selector", "nodes", "fw00", "fw01", "fw02", "fw03", "fw04",
	                      "waves", "canary", 1, "batch", "50%", "gate", "require", "power_on",
	                      "version_match"),
	                 201);
	snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
	assert_int_equal(json_integer_value(json_object_get(r.json, "wave_count")), 3);
	reply_free(&r);
	ro = wait_until(&S2, id, is_completed, 180);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "counts"), "succeeded")), 5);
	json_array_foreach(json_object_get(ro, "nodes"), i, n)
	        assert_string_equal(jstr(n, "state"), "succeeded");
	json_decref(ro);
	for (b = 0; b < 5; b++) {
		json_t *st = mock_get(&M, b, "/__mock/state"), *bios = json_object_get(st, "bios");

		/* Applied at the boot the job caused, nothing left pending. */
		assert_string_equal(jstr(json_object_get(bios, "current"), "SriovSupport"),
		                    "Enabled");
		assert_string_equal(jstr(json_object_get(bios, "current"), "NumaNodesPerSocket"),
		                    "NPS4");
		assert_int_equal(json_object_size(json_object_get(bios, "pending")), 0);
		assert_true(json_array_size(json_object_get(st, "boots")) >= 1);
		assert_string_equal(jstr(st, "power"), "On");
		json_decref(st);
	}
	ro = get_json(&S2, "/v1/bios/drift?node=fw03");
	assert_int_equal(json_integer_value(json_object_get(ro, "nodes_drifted")), 0);
	json_decref(ro);
}

static void
test_pause_resume_abort(void **state_)
{
	struct reply r;
	json_t *ro, *n;
	char id[64], path[200];
	size_t i;

	(void)state_;
	/* Scheduled an hour from now: pause, resume (back to scheduled), abort. */
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/rollouts", &r, "{s:s, s:{s:s}, s:s}",
	                      "kind", "bios", "selector", "tag", "fleet", "start_at",
	                      "2099-01-01T00:00:00Z"),
	                 201);
	snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
	assert_string_equal(state(r.json), "scheduled");
	/* fw00..04 at target, fw05 without a profile, fw49 in maintenance: skipped. */
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(r.json, "counts"), "pending")),
	        N - 7);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s/resume", id);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, NULL), 409);
	assert_error(&r, 409, "INVALID_STATE");
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s/pause", id);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, "{s:i}", "x", 1), 400);
	reply_free(&r);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, NULL), 200);
	assert_string_equal(state(r.json), "paused");
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s/resume", id);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, "{s:s}", "retry_failed", "yes"),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, "{s:b}", "retry_failed", 1), 200);
	assert_string_equal(state(r.json), "scheduled");
	reply_free(&r);
	/* Its nodes are taken: another rollout over them is refused. */
	assert_int_equal(call(&S2, S2.admin, "POST", "/v1/rollouts", &r, "{s:s, s:{s:[s]}}", "kind",
	                      "bios", "selector", "nodes", "fw20"),
	                 409);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s/abort", id);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, NULL), 200);
	assert_string_equal(state(r.json), "aborted");
	json_array_foreach(json_object_get(r.json, "nodes"), i, n)
	        assert_string_equal(jstr(n, "state"), "skipped");
	reply_free(&r);
	assert_int_equal(call(&S2, S2.admin, "POST", path, &r, NULL), 409);
	reply_free(&r);
	assert_int_equal(call(&S2, S2.admin, "GET", "/v1/rollouts/not-a-uuid", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(&S2, S2.admin, "POST",
	                      "/v1/rollouts/00000000-0000-4000-8000-000000000000/pause", &r, NULL),
	                 404);
	reply_free(&r);
	/* A viewer reads, but cannot act. */
	{
		char viewer[128];

		make_token(&S2, "viewer", viewer);
		snprintf(path, sizeof path, "/v1/rollouts/%s", id);
		assert_int_equal(call(&S2, viewer, "GET", path, &r, NULL), 200);
		reply_free(&r);
		snprintf(path, sizeof path, "/v1/rollouts/%s/abort", id);
		assert_int_equal(call(&S2, viewer, "POST", path, &r, NULL), 403);
		reply_free(&r);
	}
	ro = rollout(&S2, id);
	assert_string_equal(state(ro), "aborted");
	json_decref(ro);
	assert_int_equal(events(&S2, "rollout.aborted"), 1);
	assert_int_equal(events(&S2, "rollout.paused"), 2);
}

/* ---- Pre-flight ------------------------------------------------------------------------ */

#define PF 3 /* pf0..pf2 on BMCs of their own (PM); pf3 has no BMC credentials */

static struct mock PM;
static const char PfImage[] = "pfnic_3.1.0.bin";
static const char PfRollout[] = "{\"kind\":\"firmware\",\"selector\":{\"class\":\"gpu-pf\"}}";

/* Nodes, image and a SimpleUpdate baseline for class gpu-pf on s; pf3 (no credentials) too
 * when with_bad. */
static void
pf_seed(struct server *s, int with_bad)
{
	char name[16];
	struct reply r;
	int i;

	for (i = 0; i < PF; i++) {
		snprintf(name, sizeof name, "pf%d", i);
		make_node(s, "{s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name", name,
		          "node_class", "gpu-pf", "bmc", "driver", "redfish", "address",
		          "127.0.0.1", "port", PM.base + i, "username", "admin", "password",
		          "secret", "options", "scheme", "http");
	}
	if (with_bad)
		make_node(s, "{s:s, s:s, s:{s:s, s:s, s:i}}", "name", "pf3", "node_class", "gpu-pf",
		          "bmc", "driver", "redfish", "address", "127.0.0.1", "port", 9);
	upload_image(s, PfImage);
	assert_int_equal(call(s, s->admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}}}", "name", "pf-2026", "node_class",
	                      "gpu-pf", "components", "nic0", "version", "3.1.0", "image", PfImage,
	                      "method", "redfish"),
	                 201);
	reply_free(&r);
}

/* POST the pre-flight rollout to s: 409 PREFLIGHT_FAILED; detail.missing (caller decrefs). */
static json_t *
pf_refused(struct server *s)
{
	struct reply r;
	json_t *m;

	req(s, s->admin, "POST", "/v1/rollouts", "application/json", PfRollout, strlen(PfRollout),
	    NULL, &r);
	if (r.status != 409)
		fail_msg("%s -> %ld %s (want 409 PREFLIGHT_FAILED)", PfRollout, r.status, r.body);
	assert_error(&r, 409, "PREFLIGHT_FAILED");
	m = json_incref(json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                                "missing"));
	reply_free(&r);
	return m;
}

/* Entries of missing with this need (and node, when given). */
static int
needs(json_t *missing, const char *need, const char *node)
{
	json_t *m;
	size_t i;
	int n = 0;

	json_array_foreach(missing, i, m)
	{
		n += !strcmp(jstr(m, "need"), need) &&
		     (node == NULL || !strcmp(jstr(m, "node"), node));
		assert_non_null(jstr(m, "fix"));
	}
	return n;
}

static void
pf_untouched(void)
{
	int i;

	for (i = 0; i < PF; i++) {
		json_t *st = mock_get(&PM, i, "/__mock/state");

		assert_int_equal(json_array_size(json_object_get(st, "actions")), 0);
		json_decref(st);
	}
}

static void
image_file(struct server *s, const char *name, char *buf, size_t len)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/v1/images/%s", name);
	assert_int_equal(call(s, s->admin, "GET", path, &r, NULL), 200);
	snprintf(buf, len, "%s/images/%s", s->dir, jstr(r.json, "file"));
	reply_free(&r);
}

static void
put_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

/* A loopback port nobody listens on now. */
static int
free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static struct server S3;
static char Port[16], Listen[64], PfFile[600], PfGood[100];
static long PfEvents;

/* S2 listens on port 0 and has no boot_url: SimpleUpdate has no URL to give the BMC. Every
 * node is named, and pf3's missing credentials too (several things at once). */
static void
test_preflight_boot_url(void **state_)
{
	json_t *miss;
	size_t k;
	int b;

	(void)state_;
	mock_start(&PM, PF, NULL);
	for (b = 0; b < PF; b++)
		mock_post(&PM, b, "/__mock/config",
		          "{\"power_delay_s\": 0, \"bmc_reboot_requests\": 0}");
	pf_seed(&S2, 1);
	PfEvents = count_all(&S2, "/v1/events?limit=1000");
	miss = pf_refused(&S2);
	for (k = 0; k <= PF; k++) {
		char node[16];

		snprintf(node, sizeof node, "pf%zu", k);
		if (needs(miss, "boot_url", node) != 1)
			fail_msg("boot_url not listed once for %s: %s", node,
			         json_dumps(miss, JSON_COMPACT));
	}
	assert_int_equal(needs(miss, "bmc_credentials", "pf3"), 1);
	assert_int_equal(json_array_size(miss), PF + 2);
	json_decref(miss);
}

/* The refusal stored nothing (no rollout, no job, no event) and sent nothing. */
static void
test_preflight_nothing_stored(void **state_)
{
	(void)state_;
	assert_int_equal(count_all(&S2, "/v1/rollouts"), 0);
	assert_int_equal(count_all(&S2, "/v1/jobs"), 0);
	assert_int_equal(events(&S2, "rollout."), 0);
	assert_int_equal(count_all(&S2, "/v1/events?limit=1000"), PfEvents);
	pf_untouched();
}

/* A server on a concrete loopback address (boot_url's default applies) whose image file no
 * longer matches its digest: named, for every node; nothing stored or sent. */
static void
test_preflight_digest(void **state_)
{
	const char *args3[] = {"--power-sync-interval", "0", "--listen", Listen, NULL};
	json_t *miss;

	(void)state_;
	snprintf(Port, sizeof Port, "%d", free_port());
	snprintf(Listen, sizeof Listen, "127.0.0.1:%s", Port);
	server_start(&S3, NULL, args3);
	assert_non_null(strstr(S3.base, Listen));
	pf_seed(&S3, 0);
	image_file(&S3, PfImage, PfFile, sizeof PfFile);
	snprintf(PfGood, sizeof PfGood, "firmware image %s\n", PfImage);
	put_file(PfFile, "firmware image pfnic_9.9.9.bin\n");
	miss = pf_refused(&S3);
	assert_int_equal(needs(miss, "image_digest", NULL), PF);
	assert_int_equal(needs(miss, "boot_url", NULL), 0);
	assert_string_equal(jstr(json_array_get(miss, 0), "image"), PfImage);
	json_decref(miss);
	assert_int_equal(count_all(&S3, "/v1/rollouts"), 0);
	assert_int_equal(count_all(&S3, "/v1/jobs"), 0);
	pf_untouched();
}

/* Everything in place, boot_url unset: the same request is accepted and works, and each BMC
 * got an ImageURI on the listen address. */
static void
test_preflight_default_boot_url(void **state_)
{
	struct reply r;
	char want[200], id[64];
	json_t *ro, *st, *a;
	size_t i;
	int b, seen;

	(void)state_;
	put_file(PfFile, PfGood);
	req(&S3, S3.admin, "POST", "/v1/rollouts", "application/json", PfRollout, strlen(PfRollout),
	    NULL, &r);
	if (r.status != 201)
		fail_msg("%s -> %ld %s", PfRollout, r.status, r.body);
	snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
	reply_free(&r);
	ro = wait_until(&S3, id, is_completed, 120);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(ro, "counts"), "succeeded")),
	        PF);
	json_decref(ro);
	snprintf(want, sizeof want, "http://127.0.0.1:%s/boot/images/%s", Port, PfImage);
	for (b = 0; b < PF; b++) {
		st = mock_get(&PM, b, "/__mock/state");
		assert_int_equal(json_integer_value(json_object_get(
		                         json_object_get(st, "update_count"), "NIC0")),
		                 1);
		seen = 0;
		json_array_foreach(json_object_get(st, "actions"), i, a)
		{
			if (jstr(a, "image_uri"))
				seen |= !strcmp(jstr(a, "image_uri"), want);
		}
		if (!seen)
			fail_msg("BMC %d got no ImageURI %s: %s", b, want,
			         json_dumps(json_object_get(st, "actions"), JSON_COMPACT));
		json_decref(st);
	}
	server_stop(&S3, SIGTERM);
	server_cleanup(&S3);
	mock_stop(&PM);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_bad_input),
	        cmocka_unit_test(test_preflight_boot_url),
	        cmocka_unit_test(test_preflight_nothing_stored),
	        cmocka_unit_test(test_preflight_digest),
	        cmocka_unit_test(test_preflight_default_boot_url),
	        cmocka_unit_test(test_firmware_rollout),
	        cmocka_unit_test(test_bios_rollout),
	        cmocka_unit_test(test_pause_resume_abort),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
