/* Rollouts in the store, without BMCs: the wave plan (canary, batch sizes, the per-rack cap,
 * skipped nodes and why), conflicts, and the engine's steps driven by hand-made job outcomes
 * (a wave's jobs exactly once, gates, pause past max_failures, resume with a retry, abort). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dbfx.h"
#include "store/store.h"

struct fx {
	char dir[64];
	char path[128];
	struct rp_store *st;
};

static json_t *
J(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);

	assert_non_null(j);
	return j;
}

static void
ok(enum rp_err e)
{
	assert_int_equal(e, RP_ERR_OK);
}

/* Racks r0 (10 nodes), r1 (2), r2 (1), 2 nodes without a rack; all class c, tag t, fake BMC;
 * plus x-maint (r0, maintenance), x-other (class d), and n00 at target already. */
static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	char why[256], body[400];
	json_t *in, *out = NULL, *d = NULL;
	int i;

	snprintf(f->dir, sizeof f->dir, "/tmp/rp-rollout-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	dbfx_target(f->dir, f->path, sizeof f->path);
	assert_int_equal(rp_store_open(f->path, &f->st, why, sizeof why), RP_ERR_OK);
	for (i = 0; i < 3; i++) {
		snprintf(body, sizeof body, "{\"name\":\"r%d\"}", i);
		in = J(body);
		ok(rp_store_rack_create(f->st, in, "test", &out, &d));
		json_decref(in);
		json_decref(out);
	}
	for (i = 0; i < 15; i++) {
		const char *rack = i < 10 ? "r0" : i < 12 ? "r1" : i < 13 ? "r2" : NULL;

		snprintf(body, sizeof body,
		         "{\"name\":\"n%02d\",%s%s%s\"node_class\":\"c\",\"tags\":[\"t\"],"
		         "\"bmc\":{\"driver\":\"fake\"}}",
		         i, rack ? "\"rack\":\"" : "", rack ? rack : "", rack ? "\"," : "");
		in = J(body);
		ok(rp_store_node_create(f->st, in, "test", &out, &d));
		json_decref(in);
		json_decref(out);
	}
	in = J("{\"name\":\"x-maint\",\"rack\":\"r0\",\"node_class\":\"c\",\"tags\":[\"t\"],"
	       "\"maintenance\":true,\"bmc\":{\"driver\":\"fake\"}}");
	ok(rp_store_node_create(f->st, in, "test", &out, &d));
	json_decref(in);
	json_decref(out);
	in = J("{\"name\":\"x-other\",\"node_class\":\"d\",\"tags\":[\"t\"],\"bmc\":{\"driver\":"
	       "\"fake\"}}");
	ok(rp_store_node_create(f->st, in, "test", &out, &d));
	json_decref(in);
	json_decref(out);
	in = J("{\"name\":\"p\",\"node_class\":\"c\",\"attributes\":{\"A\":\"1\"}}");
	ok(rp_store_bios_profile_create(f->st, in, "test", &out, &d));
	json_decref(in);
	json_decref(out);
	in = J("{\"A\":\"1\"}");
	ok(rp_store_node_bios_set(f->st, "n00", "test", in, "test"));
	json_decref(in);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	rp_store_free(f->st);
	dbfx_drop(f->path);
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static json_t *
create(struct fx *f, const char *text, enum rp_err want)
{
	json_t *in = J(text), *out = NULL, *d = NULL;
	enum rp_err e = rp_store_rollout_create(f->st, in, "test", &out, &d);

	json_decref(in);
	if (e != want) {
		char *s = d ? json_dumps(d, 0) : NULL;

		fail_msg("create %s: %d (want %d) %s", text, e, want, s ? s : "");
	}
	if (e != RP_ERR_OK)
		return d;
	json_decref(d);
	return out;
}

/* Every taking-part node in one wave; wave 0 = canary; sizes and the per-rack cap hold. */
static void
check_plan(json_t *ro, int canary, int batch, int cap)
{
	json_t *n, *w, *per = json_object();
	size_t i, nw = json_array_size(json_object_get(ro, "waves"));
	int *size = calloc(nw, sizeof *size);

	json_array_foreach(json_object_get(ro, "nodes"), i, n)
	{
		json_t *wv = json_object_get(n, "wave");
		char key[64];

		if (!strcmp(json_string_value(json_object_get(n, "state")), "skipped")) {
			assert_true(json_is_null(wv));
			continue;
		}
		assert_true(json_is_integer(wv));
		size[json_integer_value(wv)]++;
		if (json_is_string(json_object_get(n, "rack"))) {
			snprintf(key, sizeof key, "%lld/%s", (long long)json_integer_value(wv),
			         json_string_value(json_object_get(n, "rack")));
			json_object_set_new(
			        per, key,
			        json_integer(json_integer_value(json_object_get(per, key)) + 1));
			if (cap)
				assert_true(json_integer_value(json_object_get(per, key)) <= cap);
		}
	}
	json_array_foreach(json_object_get(ro, "waves"), i, w)
	{
		assert_int_equal(json_integer_value(json_object_get(w, "nodes")), size[i]);
		assert_true(size[i] >= 1);
		assert_true(size[i] <= (i == 0 && canary ? canary : batch));
	}
	free(size);
	json_decref(per);
}

static void
test_plan(void **state)
{
	struct fx *f = *state;
	json_t *ro, *n, *d;
	size_t i;
	int skipped = 0;

	ro = create(f,
	            "{\"kind\":\"bios\",\"selector\":{\"tag\":\"t\"},\"waves\":{\"canary\":1,"
	            "\"batch\":4,\"max_per_rack\":2},\"max_failures\":0,\"gate\":{}}",
	            RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(ro, "state")), "running");
	check_plan(ro, 1, 4, 2);
	/* r0 holds 9 of the 14 that take part at 2 a wave: at least 5 waves after the canary. */
	assert_true(json_array_size(json_object_get(ro, "waves")) >= 5);
	json_array_foreach(json_object_get(ro, "skipped"), i, n)
	{
		const char *node = json_string_value(json_object_get(n, "node"));
		const char *why = json_string_value(json_object_get(n, "reason"));

		skipped++;
		if (!strcmp(node, "n00"))
			assert_string_equal(why, "already at target");
		else if (!strcmp(node, "x-maint"))
			assert_non_null(strstr(why, "maintenance"));
		else if (!strcmp(node, "x-other"))
			assert_non_null(strstr(why, "no BIOS profile"));
		else
			fail_msg("%s skipped: %s", node, why);
	}
	assert_int_equal(skipped, 3);
	/* The same nodes again: 409 naming them and the rollout that holds them. */
	d = create(f, "{\"kind\":\"bios\",\"selector\":{\"nodes\":[\"n01\",\"n02\"]}}",
	           RP_ERR_CONFLICT);
	assert_int_equal(json_array_size(json_object_get(d, "nodes")), 2);
	assert_string_equal(json_string_value(json_object_get(
	                            json_array_get(json_object_get(d, "nodes"), 0), "rollout")),
	                    json_string_value(json_object_get(ro, "id")));
	json_decref(d);
	json_decref(ro);
}

static void
test_plan_percent(void **state)
{
	struct fx *f = *state;
	json_t *ro;

	/* 14 nodes, no canary, 50% (7 a wave), no rack cap: 2 waves of 7. */
	ro = create(f,
	            "{\"kind\":\"bios\",\"selector\":{\"tag\":\"t\"},\"waves\":{\"canary\":0,"
	            "\"batch\":\"50%\"},\"max_failures\":0,\"gate\":{}}",
	            RP_ERR_OK);
	check_plan(ro, 0, 7, 0);
	assert_int_equal(json_array_size(json_object_get(ro, "waves")), 2);
	assert_false(json_is_true(
	        json_object_get(json_array_get(json_object_get(ro, "waves"), 0), "canary")));
	json_decref(ro);
	/* Nothing to do: only nodes at target or skipped. */
	json_decref(create(f, "{\"kind\":\"bios\",\"selector\":{\"nodes\":[\"n00\",\"x-maint\"]}}",
	                   RP_ERR_CONFLICT));
	json_decref(create(f, "{\"kind\":\"bios\",\"selector\":{\"tag\":\"none\"}}",
	                   RP_ERR_BAD_REQUEST));
}

/* Jobs of the rollout by state, from the job list. */
static int
jobs_in(struct fx *f, const char *state)
{
	struct rp_page_req rq = {.limit = 1000};
	struct rp_page pg = {0};
	json_t *filter = json_pack("{s:s, s:s}", "type", "bios_apply", "state", state);
	int n;

	rq.filter = filter;
	ok(rp_store_job_list(f->st, &rq, &pg));
	n = (int)json_array_size(pg.items);
	json_decref(pg.items);
	json_decref(filter);
	return n;
}

static void
advance(struct fx *f, const char *id, int *moved)
{
	json_t *ids = NULL, *v;
	size_t i;
	int need_power = 0, m;

	*moved = 0;
	(void)id;
	ok(rp_store_rollouts_active(f->st, &ids));
	json_array_foreach(ids, i, v)
	{
		ok(rp_store_rollout_advance(f->st, json_integer_value(v), &need_power, &m));
		*moved |= m;
	}
	json_decref(ids);
}

/* Claim every runnable BMC job and end it: failed for node `bad`, succeeded otherwise. */
static int
finish_all(struct fx *f, const char *bad)
{
	json_t *claimed = NULL, *c, *outcomes = json_array();
	size_t i;
	int n;

	ok(rp_store_jobs_claim(f->st, "test", 0, 100, 60000, &claimed));
	json_array_foreach(claimed, i, c)
	{
		const char *node =
		        json_string_value(json_object_get(json_object_get(c, "node"), "name"));
		int fail = bad && !strcmp(node, bad);

		json_array_append_new(outcomes,
		                      json_pack("{s:O, s:s, s:s?, s:s?}", "id",
		                                json_object_get(c, "id"), "state",
		                                fail ? "failed" : "succeeded", "error_code",
		                                fail ? "update_failed" : NULL, "error",
		                                fail ? "bad image" : NULL));
	}
	ok(rp_store_jobs_finish(f->st, "test", outcomes, 3));
	n = (int)json_array_size(claimed);
	json_decref(claimed);
	json_decref(outcomes);
	return n;
}

static json_t *
get(struct fx *f, const char *id)
{
	json_t *ro = NULL;

	ok(rp_store_rollout_get(f->st, id, &ro));
	return ro;
}

static const char *
node_state(json_t *ro, const char *name)
{
	json_t *n;
	size_t i;

	json_array_foreach(
	        json_object_get(ro, "nodes"), i,
	        n) if (!strcmp(json_string_value(json_object_get(n, "node")),
	                       name)) return json_string_value(json_object_get(n, "state"));
	return NULL;
}

static void
test_engine(void **state)
{
	struct fx *f = *state;
	json_t *ro, *out = NULL, *d = NULL, *opts;
	char id[64], bad[16] = "";
	int moved, i, rounds = 0;
	size_t k;

	ro = create(f,
	            "{\"kind\":\"bios\",\"selector\":{\"tag\":\"t\"},\"waves\":{\"canary\":1,"
	            "\"batch\":5},\"max_failures\":0,\"gate\":{\"require\":[\"version_match\"],"
	            "\"timeout_s\":1}}",
	            RP_ERR_OK);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(ro, "id")));
	/* The second wave's first node will fail. */
	{
		json_t *n;

		json_array_foreach(json_object_get(ro, "nodes"), k,
		                   n) if (json_integer_value(json_object_get(n, "wave")) == 1 &&
		                          !bad[0])
		        snprintf(bad, sizeof bad, "%s",
		                 json_string_value(json_object_get(n, "node")));
	}
	json_decref(ro);
	/* Start the canary; advancing again queues nothing more. */
	advance(f, id, &moved);
	assert_true(moved);
	assert_int_equal(jobs_in(f, "queued"), 1);
	advance(f, id, &moved);
	assert_false(moved);
	assert_int_equal(jobs_in(f, "queued"), 1);
	/* The canary's job succeeds but the BIOS did not change: version_match fails it after
	 * timeout_s, and the rollout pauses (max_failures 0). */
	assert_int_equal(finish_all(f, NULL), 1);
	advance(f, id, &moved);
	ro = get(f, id);
	assert_string_equal(json_string_value(json_object_get(
	                            json_array_get(json_object_get(ro, "waves"), 0), "state")),
	                    "gating");
	json_decref(ro);
	sleep(1);
	usleep(100000);
	advance(f, id, &moved);
	ro = get(f, id);
	assert_string_equal(json_string_value(json_object_get(ro, "state")), "paused");
	assert_non_null(strstr(json_string_value(json_object_get(
	                               json_array_get(json_object_get(ro, "failed"), 0), "reason")),
	                       "gate: still off target"));
	json_decref(ro);
	/* Paused: nothing starts. */
	advance(f, id, &moved);
	assert_int_equal(jobs_in(f, "queued"), 0);
	/* The BIOS now matches everywhere except on `bad`; resume retries the canary. */
	for (i = 0; i < 15; i++) {
		char name[8];
		json_t *a = J("{\"A\":\"1\"}");

		snprintf(name, sizeof name, "n%02d", i);
		if (strcmp(name, bad) != 0)
			ok(rp_store_node_bios_set(f->st, name, "test", a, "test"));
		json_decref(a);
	}
	opts = J("{}");
	ok(rp_store_rollout_control(f->st, id, "resume", opts, "test", &out, &d));
	json_decref(opts);
	json_decref(out);
	/* Run waves to the end: `bad` fails its job; the rest of its wave finishes. */
	for (;;) {
		advance(f, id, &moved);
		if (finish_all(f, bad) == 0 && !moved)
			break;
		assert_true(++rounds < 50);
	}
	ro = get(f, id);
	assert_string_equal(json_string_value(json_object_get(ro, "state")), "paused");
	assert_string_equal(node_state(ro, bad), "failed");
	assert_string_equal(json_string_value(json_object_get(
	                            json_array_get(json_object_get(ro, "waves"), 1), "state")),
	                    "done");
	assert_string_equal(json_string_value(json_object_get(
	                            json_array_get(json_object_get(ro, "waves"), 2), "state")),
	                    "pending");
	json_array_foreach(json_object_get(ro, "nodes"), k, out)
	{
		json_int_t w = json_integer_value(json_object_get(out, "wave"));

		if (w == 1 && strcmp(json_string_value(json_object_get(out, "node")), bad))
			assert_string_equal(json_string_value(json_object_get(out, "state")),
			                    "succeeded");
		if (w >= 2)
			assert_string_equal(json_string_value(json_object_get(out, "state")),
			                    "pending");
	}
	json_decref(ro);
	/* A resume that keeps the failure needs a higher max_failures. */
	opts = J("{\"retry_failed\": false}");
	assert_int_equal(rp_store_rollout_control(f->st, id, "resume", opts, "test", &out, &d),
	                 RP_ERR_CONFLICT);
	json_decref(opts);
	json_decref(d);
	d = NULL;
	/* Abort: the queued jobs of the next wave are cancelled, its nodes skipped. */
	opts = J("{\"retry_failed\": false, \"max_failures\": 1}");
	ok(rp_store_rollout_control(f->st, id, "resume", opts, "test", &out, &d));
	json_decref(opts);
	json_decref(out);
	advance(f, id, &moved);
	assert_true(jobs_in(f, "queued") >= 1);
	ok(rp_store_rollout_control(f->st, id, "abort", NULL, "test", &out, &d));
	assert_string_equal(json_string_value(json_object_get(out, "state")), "aborted");
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(out, "counts"), "running")), 0);
	json_decref(out);
	assert_int_equal(jobs_in(f, "queued"), 0);
	assert_true(jobs_in(f, "cancelled") >= 1);
	/* Nothing is active any more: the nodes can take a new rollout. */
	ro = create(f, "{\"kind\":\"bios\",\"selector\":{\"nodes\":[\"n14\"]}}", RP_ERR_CONFLICT);
	json_decref(ro); /* n14 is at target now */
	{
		char body[200];

		snprintf(body, sizeof body, "{\"kind\":\"bios\",\"selector\":{\"nodes\":[\"%s\"]}}",
		         bad);
		ro = create(f, body, RP_ERR_OK);
		json_decref(ro);
	}
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
test_schedule(void **state)
{
	struct fx *f = *state;
	json_t *ro, *in;
	char id[64];
	int moved;

	in = json_pack("{s:s, s:{s:[s]}, s:I}", "kind", "bios", "selector", "nodes", "n05",
	               "start_at", (json_int_t)(now_ms() + 2000));
	{
		json_t *d = NULL;

		ok(rp_store_rollout_create(f->st, in, "test", &ro, &d));
	}
	json_decref(in);
	assert_string_equal(json_string_value(json_object_get(ro, "state")), "scheduled");
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(ro, "id")));
	json_decref(ro);
	advance(f, id, &moved);
	assert_false(moved);
	assert_int_equal(jobs_in(f, "queued"), 0);
	usleep(2500000);
	advance(f, id, &moved);
	assert_true(moved);
	ro = get(f, id);
	assert_string_equal(json_string_value(json_object_get(ro, "state")), "running");
	assert_non_null(json_string_value(json_object_get(ro, "started_at")));
	json_decref(ro);
	assert_int_equal(jobs_in(f, "queued"), 1);
}

/* Gates a fleet without agents cannot pass: each failure says what was missing. */
static void
test_gates(void **state)
{
	struct fx *f = *state;
	static const char *const gates[] = {
	        "{\"require\":[\"agent_heartbeat\"],\"timeout_s\":1}",
	        "{\"require\":[\"power_on\"],\"timeout_s\":1}",
	        "{\"plan\":[{\"type\":\"shell\",\"command\":\"true\"}],\"recipe\":\"check\","
	        "\"timeout_s\":60}",
	};
	static const char *const want[] = {"gate: no agent has registered for the node",
	                                   "gate: no power reading since its update",
	                                   "gate: health check recipe cannot run"};
	char body[400], id[64], node[8];
	json_t *ro, *ids = NULL, *v;
	int i, moved, need_power, saw_power = 0;
	size_t k;

	for (i = 0; i < 3; i++) {
		snprintf(node, sizeof node, "n%02d", 5 + i);
		snprintf(body, sizeof body,
		         "{\"kind\":\"bios\",\"selector\":{\"nodes\":[\"%s\"]},\"gate\":%s}", node,
		         gates[i]);
		ro = create(f, body, RP_ERR_OK);
		snprintf(id, sizeof id, "%s", json_string_value(json_object_get(ro, "id")));
		json_decref(ro);
		advance(f, id, &moved);
		assert_int_equal(finish_all(f, NULL), 1);
		/* The gate waits timeout_s for what is missing (the recipe fails at once). */
		advance(f, id, &moved);
		ok(rp_store_rollouts_active(f->st, &ids));
		json_array_foreach(ids, k, v)
		{
			ok(rp_store_rollout_advance(f->st, json_integer_value(v), &need_power,
			                            &moved));
			saw_power |= need_power;
		}
		json_decref(ids);
		if (i < 2)
			usleep(1200000);
		advance(f, id, &moved);
		ro = get(f, id);
		assert_string_equal(json_string_value(json_object_get(ro, "state")), "paused");
		assert_non_null(
		        strstr(json_string_value(json_object_get(
		                       json_array_get(json_object_get(ro, "failed"), 0), "reason")),
		               want[i]));
		json_decref(ro);
	}
	/* power_on asked the engine for a power sweep. */
	assert_true(saw_power);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_plan, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_plan_percent, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_engine, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_schedule, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_gates, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
