/*
 * jobs.h — durable jobs and the power-sync sweeper.
 *
 * A scheduler thread claims runnable jobs from the store in one transaction, hands them to
 * a pool of workers that talk to BMCs outside any transaction, and records their outcomes
 * in batches (one transaction per batch). Per-node ordering and "one mutating job per node"
 * are enforced by the store, so they survive restarts. Each claim is leased to this server by
 * name and renewed while it runs. Jobs found running under this server's name at start, or
 * under a lease that ran out (the scheduler looks every second), were interrupted: they verify
 * what happened instead of acting again.
 *
 * Steps jobs run in their own pool of workers: each pushes a plan to a node's agent over SSH
 * (server/ssh) and follows it to the end, across SSH drops, reboots and restarts.
 *
 * The sweeper periodically reads the power state of its share of the eligible nodes (by node
 * hash over the live servers of the database, learned by a heartbeat every third of a lease)
 * with bounded concurrency and records the readings, faults and changes. The leader of those
 * servers prunes what retention_days no longer keeps.
 */
#ifndef RP_JOBS_H
#define RP_JOBS_H

#include <jansson.h>

#include "rackpilot/error.h"
#include "store/store.h"

struct rp_jobs;
struct rp_ssh_key; /* ssh/ssh.h */

struct rp_jobs_opts {
	unsigned workers;              /* concurrent jobs; default 32 */
	const char *server_name;       /* owner of this server's job leases; default "rackpilotd" */
	unsigned lease_s;              /* a job lease, renewed every third of it; default 30 */
	unsigned sweep_interval_s;     /* power sync period; 0 disables the periodic sweep */
	unsigned sensor_interval_s;    /* sensor sync period; 0 disables the periodic sweep */
	double drive_warning_c;        /* a drive without a BMC upper warning warns here; 0: none */
	unsigned sensor_history_hours; /* sensor samples kept; 0 keeps them; default 24 */
	unsigned sensor_history_max_rows; /* ...and at most about this many; 0: no cap */
	unsigned rack_history_days;       /* rack power steps kept; 0 keeps them; default 30 */
	unsigned power_on_stagger;        /* power-ons in flight per rack; 0: no cap; default 8 */
	unsigned power_on_stagger_ms;     /* between power-ons in a rack; default 250 */
	unsigned power_on_settle_s;       /* a sensor read this long after a power-on measures the
	                                     node (its admission ends); default 20 */
	unsigned sweep_concurrency;       /* BMCs read at once by a sweep; default 64 */
	unsigned retention_days;  /* the leader prunes older events etc.; 0 keeps; default 90 */
	unsigned fault_threshold; /* failures in a row before a BMC fault; default 3 */
	unsigned retry_base_ms;   /* first retry delay, doubling up to 60 s; default 1000 */
	unsigned power_wait_s;    /* wait for a power state after a command; default 60 */
	unsigned ssh_workers;     /* step plans running at once; default 64 */
	const struct rp_ssh_key *ssh_key; /* the server's SSH key; NULL: steps jobs fail */
	const char *agent_command;        /* the agent on nodes; default "rackpilot-agent" */
	unsigned ssh_connect_timeout_s;   /* default 10 */
	size_t log_cap;                   /* bytes of SSH output kept per job; default 8 MiB */
	const char *image_dir;         /* the image store, for checking an image before a deploy */
	const char *image_url;         /* base URL BMCs fetch images from (BASE/boot/images/NAME);
	                                  NULL: firmware updates by SimpleUpdate fail with a reason */
	unsigned webhook_timeout_s;    /* one POST to a webhook; default 10 */
	unsigned webhook_max_age_s;    /* a delivery is given up this long after its event */
	const char *webhook_ca_file;   /* CAs webhook receivers are verified with; NULL: system's */
	const char *webhook_proxy;     /* proxy for webhook POSTs; NULL: none (never the env's) */
	const char *console_dir;       /* the console logs; NULL: no console thread */
	const char *console_mode;      /* which consoles are logged: active, always, off */
	unsigned console_max_sessions; /* SOL sessions open at once; default 64 */
	uint64_t console_log_bytes;    /* a node's log, both files; default 8 MiB */
	unsigned console_idle_s;       /* the writer is let go after this without input; 0: never */
};

/* Fill o with the defaults. */
void rp_jobs_defaults(struct rp_jobs_opts *o);

/* Record this server among the live servers of its database, recover interrupted jobs, then
 * start the scheduler, workers, sweeper and pruner. 0, or -1 with why (among others: a live
 * server already runs under o->server_name; the row of a killed server of this name on this
 * host is taken over). */
int rp_jobs_start(struct rp_store *st, const struct rp_jobs_opts *o, struct rp_jobs **out,
                  char *why, size_t whylen);

/* Stop: workers finish their current BMC call and stop; jobs still running stay so in the
 * store and are recovered at the next start (or once their leases run out). Accepts NULL. */
void rp_jobs_stop(struct rp_jobs *j);

/* Whether this server leads those that share its database (rp_store_hold): only the leader
 * prunes (retention_days), within seconds of taking the lead. Its heartbeat tells the other
 * servers. Started as leader. */
void rp_jobs_lead(struct rp_jobs *j, int leader);

/* This server as GET /v1 and /metrics show it: {name (its server_name), leader, servers: the
 * live servers of its database at its latest heartbeat, [{name, host, pid, started_at,
 * leader}]}. New. */
json_t *rp_jobs_server(struct rp_jobs *j);

/* The job runs this server has ended since it started, by how (out[RP_JOB_END_SUCCEEDED],
 * ..._FAILED, ..._CANCELLED, ..._RETRY: sent back to the queue), for /metrics. An outcome
 * counts once recorded (one whose lease another server had taken is left to that one, and
 * counted here all the same: rare, after a stall longer than job_lease). */
void rp_jobs_outcomes(struct rp_jobs *j, uint64_t out[RP_JOB_END_RETRY + 1]);

/* Queue a job for a node (see rp_store_job_create) and wake the scheduler. job:
 * {type: power|boot|verify, params}. *out is the job object. */
enum rp_err rp_jobs_submit(struct rp_jobs *j, const char *node, json_t *job, const char *actor,
                           json_t **out, json_t **detail);

/* Queue one job per selected node as a batch (see rp_store_batch_create) and wake the
 * scheduler. */
enum rp_err rp_jobs_submit_batch(struct rp_jobs *j, json_t *selector, json_t *job,
                                 const char *actor, json_t **out, json_t **detail);

/* Queue a BMC credential rotation (see rp_store_bmc_rotate: password, an admin's explicit
 * one or NULL, is stored sealed as pending, never in the job) and wake the scheduler. */
enum rp_err rp_jobs_bmc_rotate(struct rp_jobs *j, const char *node, const char *password,
                               json_t *job, const char *actor, json_t **out, json_t **detail);

/* ---- Serial consoles (console.c; docs/bmc.md) ---------------------------------------- */

/* A viewer's connection (an upgraded WebSocket): frames both ways on fd (non-blocking); the
 * console calls close(arg) exactly once when it is done with it. */
struct rp_console_conn {
	int fd;
	const char *peer; /* static for the connection's life, or NULL */
	void (*close)(void *arg);
	void *arg;
};

/* node's (UUID or name) UUID and name, and with need_console whether it has a console
 * Rackpilot can open: RP_ERR_OK; RP_ERR_NOT_FOUND; RP_ERR_CONFLICT (no BMC with an address) or
 * RP_ERR_UNSUPPORTED (an IPMI or Redfish BMC whose options.console says none, as a Redfish
 * BMC's "auto" does) with why. */
enum rp_err rp_jobs_console_check(struct rp_jobs *j, const char *node, int need_console,
                                  char uuid[RP_UUID_BUF], char *name, size_t namelen, char *why,
                                  size_t whylen);

/* Hand a viewer's connection to the console thread (it owns conn from now on, also on
 * failure): it opens the node's SOL session if it is not open, sends the viewer the console's
 * raw output as binary frames and status messages as text frames ({type, writer, message}),
 * and takes the viewer's binary frames as input while it holds the console (write: it asked
 * to; the first such operator holds it). actor names the viewer in events
 * (console.attached, console.detached). RP_ERR_INTERNAL when the console thread is not
 * running (conn closed). */
enum rp_err rp_jobs_console_attach(struct rp_jobs *j, const char *uuid, const char *name,
                                   const struct rp_console_conn *conn, int write,
                                   const char *actor);

/* What the consoles are doing, for /metrics: SOL sessions open (connecting or up), up,
 * WebSocket viewers attached, lines logged since start. */
struct rp_console_stats {
	unsigned open, up, viewers;
	uint64_t lines;
};
void rp_jobs_console_stats(struct rp_jobs *j, struct rp_console_stats *out);

/* Moves whenever a console logs a line: for the HTTP server's parked streams. */
uint64_t rp_jobs_console_generation(struct rp_jobs *j);

/* The node's (UUID) console lines from *next on as Server-Sent Events ("id: SEQ\ndata:
 * LINE\n\n"), at most max bytes into buf; *next 0 means from now on. Returns the bytes
 * written (0: none now) and moves *next past them; -1 when there is no console thread. Lines
 * the ring (the latest 1024 of each console) no longer holds are skipped. */
long rp_jobs_console_read(struct rp_jobs *j, const char *uuid, uint64_t *next, char *buf,
                          size_t max);

/* The last tail lines of node's (UUID or name) console log as text ("TIMESTAMP LINE\n"
 * each): *out a new NUL-terminated buffer of *len bytes (empty when the node was never
 * logged). RP_ERR_NOT_FOUND: no such node. */
enum rp_err rp_jobs_console_log(struct rp_jobs *j, const char *node, unsigned tail, char **out,
                                size_t *len);

/* Start a lifecycle action (see rp_store_provision) and wake the scheduler. */
enum rp_err rp_jobs_provision(struct rp_jobs *j, const char *node, const char *action, json_t *job,
                              const char *actor, json_t **out, json_t **detail);

/* Cancel a job (see rp_store_job_cancel); a running one is told to stop at its next safe
 * point. *out is the job object after the request. */
enum rp_err rp_jobs_cancel(struct rp_jobs *j, const char *id, const char *actor, json_t **out,
                           json_t **detail);

/* The sweeps: a node's power state (rp_store_power_record), its sensors
 * (rp_store_sensors_record). */
enum rp_sweep { RP_SWEEP_POWER, RP_SWEEP_SENSORS, RP_SWEEPS };

/* Start a sweep now, over every node (not this server's share). RP_ERR_CONFLICT when one of
 * that kind is already running or asked for. */
enum rp_err rp_jobs_sweep_now(struct rp_jobs *j, enum rp_sweep kind);

/* A sweep's state: {interval_s, running, last: {started_at, finished_at, duration_ms, nodes,
 * ok, failed, changed (power: changes seen) or events (sensors: events written), share
 * {index, of}} or null}. New object. */
json_t *rp_jobs_sweep_status(struct rp_jobs *j, enum rp_sweep kind);

#endif
