/*
 * plan.h — the rollout engine's decisions as pure functions (docs/rollouts.md): how nodes are
 * cut into waves, what a rollout's next step is, and whether a node passes its wave's gate.
 *
 * Pure data in, pure data out: nothing here reads the database, the clock or a BMC, so the
 * store (store/rollouts.c, which gathers the facts and records the outcome in one transaction
 * per engine step) may call it and the unit tests can drive every edge. This header includes
 * only the C library and jansson; tests/layering.sh checks that store/ includes nothing else of
 * rollout/.
 */
#ifndef RP_ROLLOUT_PLAN_H
#define RP_ROLLOUT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* ---- Wave planning ------------------------------------------------------------------- */

/* A node that takes part: its row id (distinct per node), its rack's row id (0: no rack; such
 * a node counts as a rack of its own) and, out, its wave. */
struct rp_rollout_cand {
	int64_t id;
	int64_t rack_id;
	int wave;
};

/* How waves are cut (the API's validated "waves" object). */
struct rp_rollout_spec {
	int canary;       /* nodes in wave 0, the canary wave; <= 0: no canary wave */
	int batch;        /* nodes per later wave (pct: a percentage); <= 0 and !pct: all */
	int pct;          /* batch is a percentage of the nodes taking part, rounded up */
	int max_per_rack; /* most nodes of one rack in one wave; 0: no cap */
};

/* Assign each of the n candidates (in selector order) its wave: a canary wave of
 * min(canary, n) nodes, then waves of the batch size (at least 1), each taking at most
 * max_per_rack nodes of one rack. Racks take turns, each wave starting at the rack after the
 * one the previous wave started at, so every wave spreads over as many racks as it can; inside
 * a rack the selector's order holds. Returns the number of waves (0 when n is 0), or -1 when
 * out of memory (the waves are then unspecified). Wave 0 is a canary wave exactly when n > 0
 * and spec->canary > 0. */
int rp_rollout_plan_waves(struct rp_rollout_cand *cs, size_t n, const struct rp_rollout_spec *spec);

/* ---- The engine's next step ---------------------------------------------------------- */

/* What store/rollouts.c knows about a rollout after settling the nodes whose jobs ended. */
struct rp_rollout_status {
	const char *state;      /* scheduled, running, paused, completed or aborted */
	int64_t now;            /* ms */
	int64_t start_at;       /* ms */
	int64_t failed;         /* nodes failed now (over all waves) */
	int64_t max_failures;   /* the most failed nodes the rollout tolerates */
	int64_t wave;           /* the current wave (the first not done), -1 when all are */
	const char *wave_state; /* pending, running or gating; NULL when wave is -1 */
	int64_t wave_running;   /* nodes of the current wave whose update job has not ended */
};

enum rp_rollout_step {
	RP_ROLLOUT_HOLD,       /* waits for its start time or an operator: nothing to record */
	RP_ROLLOUT_WAIT,       /* waits for jobs (or has ended): record what settled, if anything */
	RP_ROLLOUT_START,      /* a scheduled rollout is due: it runs */
	RP_ROLLOUT_PAUSE,      /* more nodes failed than max_failures: pause */
	RP_ROLLOUT_COMPLETE,   /* every wave passed its gate */
	RP_ROLLOUT_WAVE_START, /* the current wave is pending: queue its jobs */
	RP_ROLLOUT_WAVE_GATING, /* every job of the current (running) wave ended: gate it next */
	RP_ROLLOUT_WAVE_GATE,   /* the current wave is gating: evaluate its gate */
};

/* The next step for a rollout in status s (never NULL). An ended rollout only waits (its last
 * jobs settle); a paused one starts no wave and does not complete, but its running wave goes
 * on to its gate. */
enum rp_rollout_step rp_rollout_next(const struct rp_rollout_status *s);

/* ---- Gates --------------------------------------------------------------------------- */

/* A rollout's gate policy, from its "gate" object. */
struct rp_rollout_gate {
	int64_t wait_ms;    /* wait_s: nothing is evaluated before the wave's end plus this */
	int64_t timeout_ms; /* timeout_s (default 600): how long after that a node may not pass */
};

/* The policy of gate (a JSON object; NULL or members missing: the defaults) into *g. */
void rp_rollout_gate_policy(json_t *gate, struct rp_rollout_gate *g);

/* Has the gate of a wave whose last job ended at wave_end opened at now (ms)? */
int rp_rollout_gate_open(const struct rp_rollout_gate *g, int64_t wave_end, int64_t now);

/* What the store read about one node waiting on its wave's gate; only the members of the
 * checks the gate requires need be filled. */
struct rp_rollout_facts {
	const char *kind;   /* "firmware" or "bios" */
	int64_t job_done;   /* when the node's update job ended, ms */
	int64_t wave_end;   /* when the wave's last job ended, ms */
	char power[16];     /* power_on: the node's power_state */
	int64_t power_at;   /* power_on: when it was read, ms (0: never) */
	int agent;          /* agent_heartbeat: an agent registered for the node */
	int64_t agent_seen; /* agent_heartbeat: its last heartbeat, ms */
	int target;         /* version_match: the node still has a baseline (profile) */
	char drift[300];    /* version_match: its first member off target, "" when none */
};

/* Check the gate's required checks (require: an array of "power_on", "agent_heartbeat",
 * "version_match"; other members and a NULL array pass) in order against f. why (len > 0)
 * gets the first reason the node does not pass, "" when it passes them all. Returns 1 when the
 * reason is only a missing fresh power reading (a power sweep would settle it), else 0. */
int rp_rollout_gate_require(json_t *require, const struct rp_rollout_facts *f, char *why,
                            size_t len);

/* The gate's health-check recipe job, by its state (NULL: none queued yet) and error (may be
 * NULL): why = "" when it succeeded, a waiting reason while it is queued or running, a reason
 * starting with '!' (fail now) when it ended otherwise. Returns 1 when no job exists yet (the
 * store queues one), else 0. */
int rp_rollout_gate_recipe(const char *job_state, const char *error, char *why, size_t len);

enum rp_rollout_verdict {
	RP_ROLLOUT_PASS,      /* the node succeeded */
	RP_ROLLOUT_FAIL,      /* the node failed: a '!' reason, or the gate timed out */
	RP_ROLLOUT_UNDECIDED, /* keep waiting */
};

/* The verdict on a node of a wave whose last job ended at wave_end, at now, given why it does
 * not pass yet ("" when it does; a leading '!' fails at once). Before the gate opens
 * (rp_rollout_gate_open) every node is undecided. */
enum rp_rollout_verdict rp_rollout_gate_verdict(const struct rp_rollout_gate *g, int64_t wave_end,
                                                int64_t now, const char *why);

#endif
