/* The rollout engine's tick (rollout.h). */
#include <stdlib.h>

#include "rollout.h"
#include "util/util.h"

/* A power sweep reads every BMC: ask for one at most this often. */
#define SWEEP_EVERY_MS 10000

struct rp_rollout {
	struct rp_store *st;
	struct rp_jobs *jobs;
	int64_t last_sweep_ms;
	int failing; /* the store failed on the previous tick: log once, not every tick */
};

struct rp_rollout *
rp_rollout_new(struct rp_store *st, struct rp_jobs *jobs)
{
	struct rp_rollout *r = calloc(1, sizeof *r);

	if (r == NULL)
		return NULL;
	r->st = st;
	r->jobs = jobs;
	return r;
}

int
rp_rollout_tick(struct rp_rollout *r)
{
	json_t *ids = NULL, *v;
	int changed = 0, power = 0, rc = -1;
	size_t i;
	enum rp_err e;

	if ((e = rp_store_rollouts_active(r->st, &ids)) != RP_ERR_OK)
		goto out;
	json_array_foreach(ids, i, v)
	{
		int need_power = 0, moved = 0;

		e = rp_store_rollout_advance(r->st, json_integer_value(v), &need_power, &moved);
		if (e != RP_ERR_OK)
			goto out;
		changed += moved;
		power |= need_power;
	}
	if (power && r->jobs && rp_time_now_ms() - r->last_sweep_ms >= SWEEP_EVERY_MS) {
		r->last_sweep_ms = rp_time_now_ms();
		/* RP_ERR_CONFLICT: one runs already, which serves as well. */
		(void)rp_jobs_sweep_now(r->jobs, RP_SWEEP_POWER);
	}
	r->failing = 0;
	rc = changed;
out:
	if (rc < 0 && !r->failing) {
		rp_log_warn("rollouts: the store failed (%s); retrying every tick",
		            rp_err_message(e));
		r->failing = 1;
	}
	json_decref(ids);
	return rc;
}

void
rp_rollout_free(struct rp_rollout *r)
{
	free(r);
}
