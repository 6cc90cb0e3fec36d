/*
 * rollout.h — the rollout engine: moves firmware and BIOS rollouts (docs/rollouts.md) from
 * wave to wave.
 *
 * All state lives in the store. Each tick asks the store for the rollouts that need looking
 * at and advances each in one transaction (rp_store_rollout_advance): settle nodes whose jobs
 * ended, pause past max_failures, start the next wave with all its jobs, evaluate gates. A
 * crash between ticks loses nothing and a restart simply ticks again; the engine keeps no
 * state of its own but when it last asked for a power sweep.
 */
#ifndef RP_ROLLOUT_H
#define RP_ROLLOUT_H

#include <stdint.h>

#include "jobs/jobs.h"
#include "store/store.h"

struct rp_rollout;

/* A new engine over st; jobs (may be NULL) is asked for a power sweep when a gate needs
 * fresh power readings. NULL when out of memory. */
struct rp_rollout *rp_rollout_new(struct rp_store *st, struct rp_jobs *jobs);

/* Advance every rollout that needs it. Call it often (main's quarter-second tick); it
 * returns the number of rollouts that changed, or -1 when the store failed (logged; the next
 * tick tries again). */
int rp_rollout_tick(struct rp_rollout *r);

/* Accepts NULL. */
void rp_rollout_free(struct rp_rollout *r);

#endif
