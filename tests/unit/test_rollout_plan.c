/* The rollout engine's pure decisions (server/rollout/plan.h), without a store: wave planning
 * (empty, one node, canary clamping, percent batches, the per-rack cap, rack turns), the next
 * step (max_failures, paused, scheduled) and gate verdicts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rollout/plan.h"

static void
plan_empty(void **state)
{
	struct rp_rollout_spec spec = {.canary = 1, .batch = 10, .pct = 1};

	(void)state;
	assert_int_equal(rp_rollout_plan_waves(NULL, 0, &spec), 0);
}

static void
plan_one_node(void **state)
{
	struct rp_rollout_cand c[1] = {{.id = 1, .rack_id = 7, .wave = -1}};
	struct rp_rollout_spec spec = {.canary = 5, .batch = 10, .pct = 1};

	(void)state;
	/* The canary is clamped to the one node: one wave. */
	assert_int_equal(rp_rollout_plan_waves(c, 1, &spec), 1);
	assert_int_equal(c[0].wave, 0);
}

static void
plan_batches(void **state)
{
	struct rp_rollout_cand c[10];
	struct rp_rollout_spec spec = {.canary = 1, .batch = 30, .pct = 1};
	int i;

	(void)state;
	for (i = 0; i < 10; i++)
		c[i] = (struct rp_rollout_cand){.id = i + 1, .wave = -1};
	/* Canary 1, then 30% of 10 = 3 a wave: 1 + 3 + 3 + 3. */
	assert_int_equal(rp_rollout_plan_waves(c, 10, &spec), 4);
	/* No canary, no batch: every node in one wave. */
	spec = (struct rp_rollout_spec){0};
	assert_int_equal(rp_rollout_plan_waves(c, 10, &spec), 1);
	for (i = 0; i < 10; i++)
		assert_int_equal(c[i].wave, 0);
	/* 1% of 10 rounds up to 1. */
	spec = (struct rp_rollout_spec){.batch = 1, .pct = 1};
	assert_int_equal(rp_rollout_plan_waves(c, 10, &spec), 10);
}

static void
plan_racks(void **state)
{
	/* Rack 1 has 4 nodes, rack 2 has 2; at most 1 per rack a wave, batches of 2. */
	struct rp_rollout_cand c[6] = {{1, 1, -1}, {2, 1, -1}, {3, 1, -1},
	                               {4, 1, -1}, {5, 2, -1}, {6, 2, -1}};
	struct rp_rollout_spec spec = {.canary = 0, .batch = 2, .max_per_rack = 1};
	int per[8][3] = {{0}}, i, n;

	(void)state;
	n = rp_rollout_plan_waves(c, 6, &spec);
	assert_int_equal(n, 4);
	for (i = 0; i < 6; i++) {
		assert_true(c[i].wave >= 0 && c[i].wave < n);
		per[c[i].wave][c[i].rack_id]++;
	}
	for (i = 0; i < n; i++)
		assert_true(per[i][1] <= 1 && per[i][2] <= 1);
	/* Inside a rack the selector's order holds. */
	assert_true(c[0].wave < c[1].wave && c[1].wave < c[2].wave && c[2].wave < c[3].wave);
	/* Nodes without a rack count as racks of their own: no cap between them. */
	for (i = 0; i < 6; i++)
		c[i].rack_id = 0;
	assert_int_equal(rp_rollout_plan_waves(c, 6, &spec), 3);
}

static void
next_step(void **state)
{
	struct rp_rollout_status s = {.state = "running",
	                              .now = 10,
	                              .max_failures = 1,
	                              .wave = 0,
	                              .wave_state = "running",
	                              .wave_running = 2};

	(void)state;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_WAIT);
	s.failed = 1; /* at max_failures: goes on */
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_WAIT);
	s.failed = 2;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_PAUSE);
	s.state = "paused"; /* the running wave still finishes */
	s.wave_running = 0;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_WAVE_GATING);
	s.wave_state = "pending";
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_HOLD);
	s.state = "running";
	s.failed = 0;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_WAVE_START);
	s.wave_state = "gating";
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_WAVE_GATE);
	s.wave = -1;
	s.wave_state = NULL;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_COMPLETE);
	s.state = "scheduled";
	s.start_at = 20;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_HOLD);
	s.now = 20;
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_START);
	s.state = "aborted";
	assert_int_equal(rp_rollout_next(&s), RP_ROLLOUT_WAIT);
}

static void
gates(void **state)
{
	json_t *gate = json_pack("{s:i, s:i}", "wait_s", 5, "timeout_s", 10);
	json_t *req = json_pack("[s, s, s]", "agent_heartbeat", "power_on", "version_match");
	struct rp_rollout_facts f = {.kind = "firmware", .job_done = 100, .wave_end = 200};
	struct rp_rollout_gate g;
	char why[400];

	(void)state;
	rp_rollout_gate_policy(gate, &g);
	assert_int_equal(g.wait_ms, 5000);
	assert_int_equal(g.timeout_ms, 10000);
	rp_rollout_gate_policy(NULL, &g);
	assert_int_equal(g.timeout_ms, 600000);
	rp_rollout_gate_policy(gate, &g);
	/* In the order required: the heartbeat first, so no power sweep is asked for. */
	assert_int_equal(rp_rollout_gate_require(req, &f, why, sizeof why), 0);
	assert_string_equal(why, "no agent has registered for the node");
	f.agent = 1;
	f.agent_seen = 300;
	strcpy(f.power, "off");
	f.power_at = 50;
	assert_int_equal(rp_rollout_gate_require(req, &f, why, sizeof why), 1);
	f.power_at = 150;
	assert_int_equal(rp_rollout_gate_require(req, &f, why, sizeof why), 0);
	assert_string_equal(why, "power is off, not on");
	strcpy(f.power, "on");
	f.target = 1;
	assert_int_equal(rp_rollout_gate_require(req, &f, why, sizeof why), 0);
	assert_string_equal(why, "");
	assert_int_equal(rp_rollout_gate_recipe(NULL, NULL, why, sizeof why), 1);
	rp_rollout_gate_recipe("failed", "boom", why, sizeof why);
	assert_string_equal(why, "!health check recipe failed: boom");
	/* Verdicts: undecided before the gate opens, then pass, wait, fail at the timeout. */
	assert_int_equal(rp_rollout_gate_verdict(&g, 200, 5199, ""), RP_ROLLOUT_UNDECIDED);
	assert_int_equal(rp_rollout_gate_verdict(&g, 200, 5200, ""), RP_ROLLOUT_PASS);
	assert_int_equal(rp_rollout_gate_verdict(&g, 200, 5200, "x"), RP_ROLLOUT_UNDECIDED);
	assert_int_equal(rp_rollout_gate_verdict(&g, 200, 5200, "!x"), RP_ROLLOUT_FAIL);
	assert_int_equal(rp_rollout_gate_verdict(&g, 200, 15200, "x"), RP_ROLLOUT_FAIL);
	json_decref(gate);
	json_decref(req);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(plan_empty),   cmocka_unit_test(plan_one_node),
	        cmocka_unit_test(plan_batches), cmocka_unit_test(plan_racks),
	        cmocka_unit_test(next_step),    cmocka_unit_test(gates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
