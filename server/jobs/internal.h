/*
 * internal.h — private to server/jobs/: the scheduler's state, a claimed job, and helpers
 * that the BMC runners (jobs.c) and the step-plan runner (steps.c) share.
 */
#ifndef RP_JOBS_INTERNAL_H
#define RP_JOBS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include "jobs.h"
#include "ssh/ssh.h"
#include "util/util.h"

#define LEASE_MS (30 * 60 * 1000)
#define TICK_MS  250
#define POLL_MS  500

/* Jobs run in two pools: BMC actions are short, step plans may take hours. */
enum { LANE_BMC, LANE_SSH, LANES };

/* A claimed job on its way through a worker. */
struct work {
	struct rp_jobs *j;
	int lane;
	int64_t id;
	int64_t node_id;
	char uuid[RP_UUID_BUF];
	char type[24];
	char node_name[64];
	json_t *claim; /* the store's claim record (holds the BMC password) */
	int recover;   /* interrupted by a stop after sending its command: verify only */
	int attempts, max_attempts;
	int cancel; /* set by rp_jobs_cancel; read by the worker between steps */
	struct work *next;
};

struct lane {
	struct rp_jobs *j;
	unsigned nworkers;
	pthread_t *workers;
	pthread_cond_t cv; /* its workers: work available, stop */
	struct work *queue;
	int inflight;
};

struct rp_jobs {
	struct rp_store *st;
	struct rp_jobs_opts o;
	char owner[64];
	pthread_mutex_t mu;
	pthread_cond_t kick_cv; /* scheduler: work done, job queued, stop */
	int stop, kicked;
	struct lane lanes[LANES];
	struct work *running;
	json_t *done; /* outcomes waiting to be recorded */
	pthread_t scheduler, sweeper;
	/* sweeps */
	int sweep_wanted, sweeping, sweep_started;
	json_t *last_sweep;
	int64_t next_sweep_ms;
};

/* A new outcome {id, state} for w. */
json_t *jobs_outcome(struct work *w, const char *state);

/* Back to the queue in ms, holding no worker and counting no attempt (a job waiting on
 * something else: a child job, an agent, a reboot). New outcome. */
json_t *jobs_later(struct work *w, unsigned ms);

/* Set error_code and a formatted error message on an outcome. */
void jobs_set_error(json_t *o, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* 1 when w should stop: rackpilotd is stopping or the job was cancelled. */
int jobs_stopping(struct work *w);

/* Sleep, resuming after signals. */
void jobs_sleep_ms(unsigned ms);

/* After a BMC handle opened: persist the IPMI workarounds it found that the BMC needs
 * (rp_bmc_detected_workarounds) in the node's bmc.options, with an event, so the next
 * session opens directly. node {uuid, name} and bmc {address, port} as claimed (borrowed).
 * Failures are logged only. */
struct rp_bmc;
void jobs_bmc_learned(struct rp_jobs *j, json_t *node, json_t *bmc, struct rp_bmc *b);

/* A BMC error as an outcome: a retry when that can help and attempts remain, else final. */
struct rp_bmc_err;
json_t *jobs_bmc_failure(struct work *w, const struct rp_bmc_err *err, int may_retry);

/* Run a commission, deploy or release job (provision.c): its phases in order, each recorded
 * as it is reached, so a restart resumes in the right one. Outcome as jobs_run_steps. */
json_t *jobs_run_provision(struct work *w);

/* Run a firmware_refresh, bios_apply or firmware_update job (firmware.c) on an open BMC
 * handle. The outcome to record, or NULL when rackpilotd is stopping (the job stays running
 * and resumes from its recorded progress at the next start). */
struct rp_bmc;
json_t *jobs_run_firmware(struct work *w, struct rp_bmc *b);

/* An acceptance job (accept.c): runs the node's pending acceptance checks, queueing and
 * following the jobs they act through. */
json_t *jobs_run_acceptance(struct work *w, struct rp_bmc *b);

/* Read the node's firmware inventory, BIOS attributes and registry from its BMC and store
 * them (source redfish), as a firmware_refresh does. 0, or -1 with err set (kind
 * RP_BMC_UNSUPPORTED for a BMC without Redfish inventory). */
int jobs_firmware_read(struct work *w, struct rp_bmc *b, struct rp_bmc_err *err);

/* The last JOBS_TAIL bytes a steps job's SSH channel carried (steps.c), for error messages.
 * Zero-initialise. jobs_tail_add keeps the last JOBS_TAIL bytes of everything added in
 * order, whatever the chunking; jobs_tail_last_line writes the last non-empty line of the
 * tail (without its line end, cut to len - 1 bytes, NUL-terminated; "" when there is none)
 * to buf (len >= 1) and returns buf. Pure functions, exposed for tests/fuzz/fuzz_steps.c. */
#define JOBS_TAIL 512
struct jobs_tail {
	char data[JOBS_TAIL];
	size_t len;
};
void jobs_tail_add(struct jobs_tail *t, const char *data, size_t len);
const char *jobs_tail_last_line(const struct jobs_tail *t, char *buf, size_t len);

/* Run a steps job (steps.c): push its plan over SSH and settle it. The outcome to record,
 * or NULL when rackpilotd is stopping (the job stays running and is recovered). */
json_t *jobs_run_steps(struct work *w);

#endif
