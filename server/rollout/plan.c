/* The rollout engine's pure decisions (plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* ---- Wave planning ------------------------------------------------------------------- */

/* Group candidates by rack in order[] (rack by rack, racks in order of their first node, the
 * selector's order inside a rack): group g is order[start[g]] .. order[start[g + 1] - 1].
 * An open-addressing hash of the keys makes thousands of racks cost no more than a few.
 * Returns the number of groups, or -1 when out of memory. */
static long
group_racks(const struct rp_rollout_cand *cs, size_t n, size_t *order, size_t *start)
{
	size_t cap = 1, ngroups = 0, i, g;
	int64_t *hk = NULL, *key = calloc(n ? n : 1, sizeof *key);
	size_t *hg = NULL, *gid = calloc(n ? n : 1, sizeof *gid);
	size_t *count = calloc(n + 1, sizeof *count), *end = calloc(n + 1, sizeof *end);
	long rc = -1;

	while (cap < 2 * n + 2)
		cap <<= 1;
	hk = calloc(cap, sizeof *hk);
	hg = calloc(cap, sizeof *hg);
	if (!key || !gid || !count || !end || !hk || !hg)
		goto out;
	for (i = 0; i < n; i++)
		key[i] = cs[i].rack_id ? cs[i].rack_id : -cs[i].id;
	/* Group ids are in order of first appearance. */
	for (i = 0; i < n; i++) {
		uint64_t h = (uint64_t)key[i] * 0x9E3779B97F4A7C15ull;
		size_t p = (size_t)(h >> 20) & (cap - 1);

		while (hg[p] && hk[p] != key[i])
			p = (p + 1) & (cap - 1);
		if (hg[p] == 0) {
			hk[p] = key[i];
			hg[p] = ++ngroups;
		}
		gid[i] = hg[p] - 1;
		count[gid[i]]++;
	}
	for (g = 0; g < ngroups; g++)
		start[g + 1] = start[g] + count[g];
	for (g = 0; g < ngroups; g++)
		end[g] = start[g];
	for (i = 0; i < n; i++)
		order[end[gid[i]]++] = i;
	rc = (long)ngroups;
out:
	free(key);
	free(gid);
	free(count);
	free(end);
	free(hk);
	free(hg);
	return rc;
}

int
rp_rollout_plan_waves(struct rp_rollout_cand *cs, size_t n, const struct rp_rollout_spec *spec)
{
	size_t *order = calloc(n ? n : 1, sizeof *order), *start = calloc(n + 1, sizeof *start);
	size_t *next = calloc(n + 1, sizeof *next);
	int *taken = calloc(n + 1, sizeof *taken);
	size_t ngroups = 0, g, left = n, cursor = 0;
	int canary = spec->canary, batch, max_per_rack = spec->max_per_rack, wave = -1;
	long ng;

	if (!order || !start || !next || !taken || (ng = group_racks(cs, n, order, start)) < 0)
		goto out;
	ngroups = (size_t)ng;
	if (spec->pct)
		batch = (int)(((size_t)(spec->batch > 0 ? spec->batch : 0) * n + 99) / 100);
	else
		batch = spec->batch > 0 ? spec->batch : (int)n;
	if (batch < 1)
		batch = 1;
	if (canary > (int)n)
		canary = (int)n;
	for (g = 0; g < ngroups; g++)
		next[g] = start[g];
	wave = 0;
	while (left > 0) {
		int want = (wave == 0 && canary > 0) ? canary : batch, got = 0, progress = 1;

		memset(taken, 0, (ngroups + 1) * sizeof *taken);
		while (got < want && progress) {
			progress = 0;
			for (g = 0; g < ngroups && got < want; g++) {
				size_t k = (cursor + g) % ngroups;

				if (next[k] == start[k + 1] ||
				    (max_per_rack > 0 && taken[k] >= max_per_rack))
					continue;
				cs[order[next[k]++]].wave = wave;
				taken[k]++;
				got++;
				left--;
				progress = 1;
			}
		}
		/* The next wave starts at the rack after the last one served. */
		cursor = ngroups ? (cursor + 1) % ngroups : 0;
		wave++;
	}
out:
	free(order);
	free(start);
	free(next);
	free(taken);
	return wave;
}

/* ---- The engine's next step ---------------------------------------------------------- */

enum rp_rollout_step
rp_rollout_next(const struct rp_rollout_status *s)
{
	int running = !strcmp(s->state, "running");

	if (!strcmp(s->state, "completed") || !strcmp(s->state, "aborted"))
		return RP_ROLLOUT_WAIT;
	if (!strcmp(s->state, "scheduled"))
		return s->now < s->start_at ? RP_ROLLOUT_HOLD : RP_ROLLOUT_START;
	if (running && s->failed > s->max_failures)
		return RP_ROLLOUT_PAUSE;
	if (s->wave < 0)
		return running ? RP_ROLLOUT_COMPLETE : RP_ROLLOUT_HOLD;
	if (!strcmp(s->wave_state, "pending"))
		return running ? RP_ROLLOUT_WAVE_START
		               : RP_ROLLOUT_HOLD; /* paused: no wave starts */
	if (!strcmp(s->wave_state, "running"))
		return s->wave_running > 0 ? RP_ROLLOUT_WAIT : RP_ROLLOUT_WAVE_GATING;
	return RP_ROLLOUT_WAVE_GATE;
}

/* ---- Gates --------------------------------------------------------------------------- */

void
rp_rollout_gate_policy(json_t *gate, struct rp_rollout_gate *g)
{
	json_t *to = json_object_get(gate, "timeout_s");

	g->wait_ms = json_integer_value(json_object_get(gate, "wait_s")) * 1000;
	g->timeout_ms = (json_is_integer(to) ? json_integer_value(to) : 600) * 1000;
}

int
rp_rollout_gate_open(const struct rp_rollout_gate *g, int64_t wave_end, int64_t now)
{
	return now >= wave_end + g->wait_ms;
}

int
rp_rollout_gate_require(json_t *require, const struct rp_rollout_facts *f, char *why, size_t len)
{
	json_t *v;
	size_t i;

	why[0] = '\0';
	json_array_foreach(require, i, v)
	{
		const char *q = json_string_value(v);

		if (q == NULL)
			continue;
		if (!strcmp(q, "power_on")) {
			if (f->power_at < f->job_done) {
				snprintf(why, len, "no power reading since its update (last: %s)",
				         f->power);
				return 1;
			}
			if (strcmp(f->power, "on") != 0)
				snprintf(why, len, "power is %s, not on", f->power);
		} else if (!strcmp(q, "agent_heartbeat")) {
			if (!f->agent)
				snprintf(why, len, "no agent has registered for the node");
			else if (f->agent_seen <= f->wave_end)
				snprintf(why, len, "no agent heartbeat since the wave ended");
		} else if (!strcmp(q, "version_match")) {
			if (!f->target)
				snprintf(why, len, "the node no longer has a %s",
				         !strcmp(f->kind, "firmware") ? "firmware baseline"
				         : !strcmp(f->kind, "bios")   ? "BIOS profile"
				                                      : "BMC user");
			else if (f->drift[0])
				snprintf(why, len, "still off target: %s", f->drift);
		}
		if (why[0])
			return 0;
	}
	return 0;
}

int
rp_rollout_gate_recipe(const char *job_state, const char *error, char *why, size_t len)
{
	why[0] = '\0';
	if (job_state == NULL)
		return 1;
	if (!strcmp(job_state, "succeeded"))
		return 0;
	if (!strcmp(job_state, "queued") || !strcmp(job_state, "running"))
		snprintf(why, len, "health check recipe still running");
	else
		snprintf(why, len, "!health check recipe %s: %s", job_state, error ? error : "");
	return 0;
}

enum rp_rollout_verdict
rp_rollout_gate_verdict(const struct rp_rollout_gate *g, int64_t wave_end, int64_t now,
                        const char *why)
{
	if (!rp_rollout_gate_open(g, wave_end, now))
		return RP_ROLLOUT_UNDECIDED;
	if (why[0] == '\0')
		return RP_ROLLOUT_PASS;
	if (why[0] == '!' || now >= wave_end + g->wait_ms + g->timeout_ms)
		return RP_ROLLOUT_FAIL;
	return RP_ROLLOUT_UNDECIDED;
}
