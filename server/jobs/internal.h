/*
 * internal.h — private to server/jobs/: the scheduler's state, a claimed job, the runners of
 * rackpilot/jobtypes.h's table, and the helpers they share (common.c).
 */
#ifndef RP_JOBS_INTERNAL_H
#define RP_JOBS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include "bmc/bmc.h"
#include "jobs.h"
#include "rackpilot/jobtypes.h"
#include "ssh/ssh.h"
#include "util/util.h"

/* The webhook deliverer's thread (webhooks.c): the leader POSTs the outbox. */
void *rp_jobs_webhooks(void *arg);

#define TICK_MS 250
#define LOOK_MS 1000 /* between looks for job leases that ran out */
#define POLL_MS 500

/* Jobs run in two pools (rackpilot/jobtypes.h): BMC actions are short, step plans may take
 * hours. */
#define LANE_BMC RP_JOB_LANE_BMC
#define LANE_SSH RP_JOB_LANE_SSH
#define LANES    RP_JOB_LANES

/* A claimed job on its way through a worker. */
struct work {
	struct rp_jobs *j;
	enum rp_job_lane lane;
	int64_t id;
	int64_t node_id;
	char uuid[RP_UUID_BUF];
	enum rp_job_type type;
	char node_name[64];
	struct rp_job_claim *claim; /* the store's claim (holds the BMC password); owned */
	int recover; /* interrupted by a stop after sending its command: verify only */
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

/* A periodic sweep over the nodes' BMCs (sweep.c), its fields under rp_jobs.mu. */
struct sweeper {
	unsigned interval_s; /* 0: only when asked for */
	int wanted;          /* asked for (rp_jobs_sweep_now) */
	int running;
	int manual;  /* the running one was asked for: it reads every node, not a share */
	int started; /* thread is to be joined */
	pthread_t thread;
	json_t *last; /* the latest one's summary */
	int64_t next_ms;
};

struct rp_jobs {
	struct rp_store *st;
	struct rp_jobs_opts o;
	char owner[64];        /* the server's name: its job leases carry it */
	int64_t lease_ms;      /* a lease's length; renewed every third of it */
	int64_t next_renew_ms; /* when the scheduler next renews and looks for expired leases */
	int64_t next_look_ms;
	pthread_mutex_t mu;
	pthread_cond_t kick_cv; /* scheduler: work done, job queued, stop */
	int stop, kicked;
	struct lane lanes[LANES];
	struct work *running;
	struct rp_job_outcome *done, **done_tail; /* outcomes waiting to be recorded, in order */
	pthread_t scheduler, pruner;
	pthread_cond_t prune_cv; /* pruner and webhook deliverer: stop */
	int pruner_started;
	pthread_t webhooks; /* the deliverer (webhooks.c) */
	int webhooks_started;
	int stalled; /* the deliverer's last pass recorded nothing: it waits before the next */
	struct sweeper sweeps[RP_SWEEPS]; /* (mu) */
	struct rp_console *console;       /* console.c; NULL without console_dir */
	int leader;                       /* leads the servers of its database (rp_jobs_lead) */
	/* this server among those that share its database */
	struct rp_server_self self;
	char instance[RP_UUID_BUF], host[256];
	json_t *live;         /* the live servers at the latest heartbeat, sorted by name */
	int share_i, share_n; /* this server's share of the periodic sweep: index in live, of */
	int name_lost;        /* another server took this one's name (logged once) */
	/* Outcomes this server recorded, by enum rp_job_end (atomic; rp_jobs_outcomes). */
	uint64_t outcomes[RP_JOB_END_RETRY + 1];
};

/* ---- Power-on admission (common.c) -------------------------------------------------- */

/* Before a command that may power the claim's node on (it is off, or in a transition): its
 * admission against its rack's budget and stagger (rp_store_power_admit; params.force and
 * params.forced_by let an admin's request past it). NULL: admitted, go on. Otherwise the
 * outcome to return: back to the queue, error_code "waiting" and the reason ("waiting: rack
 * r01 projected 37.2 kW of 36.0 kW ..."), no attempt counted; failed ("over_budget") when the
 * node alone passes the rack's limit; or a retry when the store failed. Nothing was sent. */
struct rp_job_outcome *jobs_power_admit(struct work *w);

/* After that command came back, sent or failed: the admission is no longer in flight. */
void jobs_power_started(struct work *w);

/* The job ends or retries before sending it: the admission goes (jobs_power_admit). */
void jobs_power_release(struct work *w);

/* ---- Sweeps (sweep.c) ------------------------------------------------------------- */

/* FNV-1a of a node's UUID: the same on every server, so the live set shares the nodes out
 * without talking. */
uint64_t jobs_node_hash(const char *uuid);

/* The sensor settings rp_store_sensors_record takes, from the server's. */
struct rp_sensor_opts jobs_sensor_opts(struct rp_jobs *j);

/* Set the sweeps' intervals and first times, at start. */
void jobs_sweeps_init(struct rp_jobs *j);

/* With mu held: which sweeps are due or asked for (start[k] 1), marked running. */
void jobs_sweeps_due(struct rp_jobs *j, int start[RP_SWEEPS]);

/* Without mu: start the threads of the sweeps jobs_sweeps_due marked (a failed start clears
 * running). */
void jobs_sweeps_start(struct rp_jobs *j, const int start[RP_SWEEPS]);

/* With mu held: periodic sweeps due within a second (a server left: its share is unread). */
void jobs_sweeps_soon(struct rp_jobs *j);

/* At stop (j->stop set): wait for running sweeps, free their state. */
void jobs_sweeps_join(struct rp_jobs *j);

/* ---- Shared helpers (common.c) ---------------------------------------------------- */

/* A new outcome of w ending as state (bmc_ok -1: no BMC contact to count). Never NULL: out
 * of memory aborts, as a lost outcome would leave the job running for good. */
struct rp_job_outcome *jobs_outcome(struct work *w, enum rp_job_end state);

/* Back to the queue in ms, holding no worker and counting no attempt (a job waiting on
 * something else: a child job, an agent, a reboot). New outcome. */
struct rp_job_outcome *jobs_later(struct work *w, unsigned ms);

/* Set error_code and a formatted error message on an outcome (replacing earlier ones). */
void jobs_set_error(struct rp_job_outcome *o, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* ---- Rack acceptance across nodes (cross.c) ------------------------------------------- */

/* The fabric or nccl check (check) of w's node in acceptance run: one step of whatever pair
 * this node's job drives (docs/acceptance.md), then this node's verdict once every pair it is
 * in has settled. cabling: the node's cabling entries (borrowed). 0: *result {state, message,
 * fix?, evidence?, findings?} (new) settles the check; 1: not yet, look again in *look_ms;
 * -1: store trouble, why says what. */
int jobs_accept_cross(struct work *w, const char *run, const char *check, json_t *cabling,
                      json_t **result, unsigned *look_ms, char *why, size_t len);

/* ---- Configured deploys (deploy.c) ------------------------------------------------------ */

/* The plan as pushed to the agent: a copy of plan whose image steps that ask for a seed
 * ("seed": {}) carry the deploy's rendered seed files (they hold secrets: the first-boot
 * token, the operator's user data; jobs_plan_wipe them before freeing). NULL with why set
 * when the seed cannot be made. */
json_t *jobs_plan_expand(struct work *w, json_t *plan, char *why, size_t len);

/* Overwrite the seed strings of a plan jobs_plan_expand made, in place. */
void jobs_plan_wipe(json_t *plan);

/* The failure of a deploy whose OS did not report its first boot within waited_ms: the
 * BMC's power state and the console log's last lines in the message. */
struct rp_job_outcome *jobs_first_boot_timeout(struct work *w, int64_t waited_ms);

/* A new failed outcome of w with error_code code and a formatted message. */
struct rp_job_outcome *jobs_failed(struct work *w, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Set the outcome's result to r (taken; replaces an earlier one). */
void jobs_set_result(struct rp_job_outcome *o, json_t *r);

/* Set the power state observed (a name of rp_power_name, copied). */
void jobs_set_power(struct rp_job_outcome *o, const char *power);

/* The job's params (borrowed from the claim, never NULL). */
json_t *jobs_params(struct work *w);

/* The job's node UUID (borrowed from the claim). */
const char *jobs_node_uuid(struct work *w);

/* 1 when w should stop: rackpilotd is stopping or the job was cancelled. */
int jobs_stopping(struct work *w);

/* Sleep, resuming after signals. */
void jobs_sleep_ms(unsigned ms);

/* Fill t for BMC b of node node_uuid (a claim's, a sweep target's): 0, or -1 with err set
 * (see rp_bmc_target_from_json). The password goes from b straight into t; wipe t.password
 * after rp_bmc_open. */
int jobs_bmc_target(const struct rp_store_bmc *b, const char *node_uuid, struct rp_bmc_target *t,
                    struct rp_bmc_err *err);

/* Open the claim's BMC and persist the workarounds it found (jobs_bmc_learned). The handle,
 * or NULL with err set. */
struct rp_bmc *jobs_bmc_open(struct work *w, struct rp_bmc_err *err);

/* After a BMC handle opened: persist the IPMI workarounds it found that the BMC needs
 * (rp_bmc_detected_workarounds) in the node's bmc.options, with an event, so the next
 * session opens directly. name and uuid of the node, address and port of the BMC as
 * claimed. Failures are logged only. */
void jobs_bmc_learned(struct rp_jobs *j, const char *name, const char *uuid, const char *address,
                      unsigned port, struct rp_bmc *b);

/* A BMC error as an outcome: a retry when that can help and attempts remain, else final. */
struct rp_job_outcome *jobs_bmc_failure(struct work *w, const struct rp_bmc_err *err,
                                        int may_retry);

/* The outcome of an interruption: NULL when rackpilotd is stopping (the job stays running
 * and is recovered at the next start or once its lease runs out), else cancelled. */
struct rp_job_outcome *jobs_interrupted(struct work *w);

/* Poll until the node's power reads want, up to timeout_s. 0 reached; 1 timed out (*seen,
 * when not NULL, is the last reading); -1 error or interruption (err set; kind RP_BMC_OK for
 * an interruption). One tolerance for every wait: up to JOBS_POWER_ERRORS transient BMC
 * errors in a row (a BMC that resets itself or drops a session while the host changes
 * power), the more forgiving of the two waits it replaces; any other error ends it. */
#define JOBS_POWER_ERRORS 20
int jobs_wait_power(struct work *w, struct rp_bmc *b, enum rp_power want, unsigned timeout_s,
                    enum rp_power *seen, struct rp_bmc_err *err);

/* The one power-to-boot rule, for a node that must boot now (into a boot override, or to
 * apply staged settings) and whose power reads now: power on when it is off, else (on, or
 * in a transition) power cycle. Pure. */
enum rp_power_action jobs_boot_action(enum rp_power now);

/* Apply jobs_boot_action to the node's power as it reads now: it boots, into a boot
 * override or applying staged settings. 0, or -1 with err set. */
int jobs_boot_now(struct rp_bmc *b, struct rp_bmc_err *err);

/* ---- Runners (the `run` column of rackpilot/jobtypes.h) ------------------------------ */

/* Each runs one job; b is the open BMC handle for BMC-lane types, NULL for SSH-lane ones.
 * The outcome to record, or NULL when rackpilotd is stopping (the job stays running and
 * resumes from its recorded progress, or verifies, at the next start). */
struct rp_job_outcome *jobs_run_power(struct work *w, struct rp_bmc *b);
struct rp_job_outcome *jobs_run_boot(struct work *w, struct rp_bmc *b);
struct rp_job_outcome *jobs_run_verify(struct work *w, struct rp_bmc *b);

/* power_cap (caps.c): the node's planned limit (rp_store_power_cap_plan) set at its BMC and
 * read back (rp_store_power_cap_seen). */
struct rp_job_outcome *jobs_run_power_cap(struct work *w, struct rp_bmc *b);

/* The console thread (console.c): started by rp_jobs_start when console_dir is set (0, or -1
 * logged by the caller), stopped (viewers told, sessions closed) by rp_jobs_stop. */
struct rp_console;
int jobs_console_start(struct rp_jobs *j);
void jobs_console_stop(struct rp_jobs *j);

/* Before a job boots a node: wait up to ms for its console session to be up, when the node is
 * to be logged now (its first lines are the firmware's and iPXE's, printed within a second of
 * power-on). Returns at once without a console thread or with console_log off, and as soon as
 * the console thread's next look shows the node is not to be logged or its console cannot be
 * opened. */
void jobs_console_wait(struct rp_jobs *j, const char *uuid, unsigned ms);

/* identify, bmc_reset and bmc_rotate (bmcops.c). bmc_reset and bmc_rotate open their own
 * handles (a BMC that restarts; other passwords than the stored one): b is NULL for them. */
struct rp_job_outcome *jobs_run_identify(struct work *w, struct rp_bmc *b);
struct rp_job_outcome *jobs_run_bmc_reset(struct work *w, struct rp_bmc *b);
struct rp_job_outcome *jobs_run_bmc_rotate(struct work *w, struct rp_bmc *b);

/* A commission, deploy or release job (provision.c; SSH lane, b NULL): its phases in order,
 * each recorded as it is reached, so a restart resumes in the right one. */
struct rp_job_outcome *jobs_run_provision(struct work *w, struct rp_bmc *b);

/* firmware_refresh (firmware.c), bios_apply (bios.c) and firmware_update (update.c). */
struct rp_job_outcome *jobs_run_firmware_refresh(struct work *w, struct rp_bmc *b);
struct rp_job_outcome *jobs_run_bios_apply(struct work *w, struct rp_bmc *b);
struct rp_job_outcome *jobs_run_firmware_update(struct work *w, struct rp_bmc *b);

/* An acceptance job (accept.c): runs the node's pending acceptance checks, queueing and
 * following the jobs they act through. */
struct rp_job_outcome *jobs_run_acceptance(struct work *w, struct rp_bmc *b);

/* What the firmware job types share (firmware.c). The store could not record progress:
 * nothing was sent after it, so a retry is safe (a new outcome). */
struct rp_job_outcome *jobs_fw_store_trouble(struct work *w, const char *what);

/* The row of rows (inventory rows, see jobs_fw_read_firmware) for component (borrowed), or
 * NULL. */
json_t *jobs_fw_row(json_t *rows, const char *component);

/* Read the firmware inventory as rows ({component, version, updateable, ids}: each Redfish
 * SoftwareInventory Id lowercased, plus one row per family of numbered components) into
 * *rows (new) and, with keep, store it (source redfish). 0, or -1 with err set. */
int jobs_fw_read_firmware(struct work *w, struct rp_bmc *b, json_t **rows, int keep,
                          struct rp_bmc_err *err);

/* Read BIOS attributes (and, with keep, store them and the registry they follow). *bios
 * (may be NULL) gets what rp_bmc_bios_get returned. A BMC without BIOS resources is not an
 * error. 0, or -1 with err set. */
int jobs_fw_read_bios(struct work *w, struct rp_bmc *b, json_t **bios, int keep,
                      struct rp_bmc_err *err);

/* The last non-empty line a failed step of a steps job (a job object) printed, into buf (""
 * when none). */
void jobs_failed_output(json_t *job, char *buf, size_t len);

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

/* A steps job (steps.c; SSH lane, b NULL): push its plan over SSH and settle it. */
struct rp_job_outcome *jobs_run_steps(struct work *w, struct rp_bmc *b);

#endif
