/* The sweeps: every so often, read something of every eligible node's BMC (its power state,
 * its sensors) with bounded concurrency, and record what was read in chunks as it comes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bmc/bmc.h"
#include "internal.h"
#include "util/util.h"

/* Readings recorded per transaction: a sweep of a large fleet never holds the write lock for
 * long (on PostgreSQL every server's writes wait for it), and never keeps more than a few
 * chunks of readings in memory. A node's sensors are ~80 rows to compare and write, its
 * power state one. */
static const size_t sweep_chunk[RP_SWEEPS] = {256, 32};

static const char *const sweep_names[RP_SWEEPS] = {"power sync", "sensor sync"};

struct sweep {
	struct rp_jobs *j;
	enum rp_sweep kind;
	struct rp_power_target *targets;
	size_t ntargets;
	size_t *pick, npick; /* the targets this sweep reads: its share of them */
	size_t next;         /* the next pick to read (mu) */
	json_t *pending;     /* readings not recorded yet (mu) */
	size_t ok, failed;   /* readings that answered, and not (mu) */
	int changed;         /* power changes or sensor events recorded (mu) */
	pthread_mutex_t mu;
};

uint64_t
jobs_node_hash(const char *uuid)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *uuid; uuid++)
		h = (h ^ (unsigned char)*uuid) * 1099511628211ULL;
	return h;
}

/* Read what this kind of sweep reads into r: 0, or -1 with err. The sensor sweep reads a
 * capped node's power limit too (its drift), a failure of that said in r.limit.error. */
static int
read_one(enum rp_sweep kind, const struct rp_power_target *node, struct rp_bmc *b, json_t *r,
         struct rp_bmc_err *err)
{
	enum rp_power p;
	json_t *sensors = NULL;
	struct rp_power_limit lim;
	struct rp_bmc_err lerr = {0};

	if (kind == RP_SWEEP_POWER) {
		if (rp_bmc_power_get(b, &p, err) != 0)
			return -1;
		json_object_set_new(r, "power", json_string(rp_power_name(p)));
		return 0;
	}
	if (rp_bmc_sensors(b, &sensors, err) != 0)
		return -1;
	json_object_set_new(r, "sensors", sensors);
	if (node->capped)
		json_object_set_new(r, "limit",
		                    rp_bmc_power_limit_get(b, &lim, &lerr) == 0
		                            ? json_pack("{s:i, s:b}", "watts", (int)lim.watts,
		                                        "active", lim.active)
		                            : json_pack("{s:s}", "error", lerr.msg));
	return 0;
}

struct rp_sensor_opts
jobs_sensor_opts(struct rp_jobs *j)
{
	return (struct rp_sensor_opts){.drive_warning_c = j->o.drive_warning_c,
	                               .settle_ms = (int64_t)j->o.power_on_settle_s * 1000};
}

/* Record a chunk of readings (taken). */
static void
record_chunk(struct sweep *s, json_t *chunk)
{
	struct rp_jobs *j = s->j;
	struct rp_sensor_opts so = jobs_sensor_opts(j);
	int changed = 0;
	enum rp_err e;

	if (json_array_size(chunk) == 0) {
		json_decref(chunk);
		return;
	}
	e = s->kind == RP_SWEEP_POWER
	            ? rp_store_power_record(j->st, chunk, (int)j->o.fault_threshold, &changed)
	            : rp_store_sensors_record(j->st, chunk, &so, &changed);
	if (e != RP_ERR_OK)
		rp_log_warn("%s: cannot record %zu reading(s): %s", sweep_names[s->kind],
		            json_array_size(chunk), rp_err_message(e));
	json_decref(chunk);
	pthread_mutex_lock(&s->mu);
	s->changed += changed;
	pthread_mutex_unlock(&s->mu);
}

static void *
sweep_worker(void *arg)
{
	struct sweep *s = arg;

	for (;;) {
		struct rp_bmc_target t;
		struct rp_bmc_err err = {0};
		struct rp_bmc *b;
		const struct rp_power_target *node;
		json_t *r, *full = NULL;
		size_t i;
		int ok = 0;

		pthread_mutex_lock(&s->mu);
		i = s->next++;
		pthread_mutex_unlock(&s->mu);
		if (i >= s->npick || __atomic_load_n(&s->j->stop, __ATOMIC_RELAXED))
			return NULL;
		node = &s->targets[s->pick[i]];
		r = json_pack("{s:I, s:I}", "id", (json_int_t)node->id, "at",
		              (json_int_t)rp_time_now_ms());
		if (jobs_bmc_target(&node->bmc, node->uuid, &t, &err) == 0 &&
		    (b = rp_bmc_open(&t, &err)) != NULL) {
			jobs_bmc_learned(s->j, node->name, node->uuid, node->bmc.address,
			                 node->bmc.port, b);
			ok = read_one(s->kind, node, b, r, &err) == 0;
			rp_bmc_close(b);
		}
		explicit_bzero(t.password, sizeof t.password);
		json_object_set_new(r, "ok", json_boolean(ok));
		if (!ok)
			json_object_set_new(r, "error", json_string(err.msg));
		pthread_mutex_lock(&s->mu);
		json_array_append_new(s->pending, r);
		s->ok += ok;
		s->failed += !ok;
		if (json_array_size(s->pending) >= sweep_chunk[s->kind]) {
			full = s->pending;
			s->pending = json_array();
		}
		pthread_mutex_unlock(&s->mu);
		if (full)
			record_chunk(s, full);
	}
}

static void *
sweep_main(void *arg)
{
	struct sweep *s = arg;
	struct rp_jobs *j = s->j;
	struct sweeper *w = &j->sweeps[s->kind];
	pthread_t *threads = NULL;
	int64_t t0 = rp_time_now_ms(), m0 = rp_time_mono_ns();
	size_t n = 0, k, i;
	int share_i, share_n;
	char ts0[RP_TIME_BUF], ts1[RP_TIME_BUF];

	if (rp_store_power_targets(j->st, &s->targets, &s->ntargets) != RP_ERR_OK)
		goto out;
	/* A periodic sweep reads this server's share of the nodes, by node hash over the live
	 * servers; one asked for reads them all. Not in the live set (no heartbeat recorded
	 * yet): all of them too, as reading twice is harmless and not reading is not. */
	pthread_mutex_lock(&j->mu);
	share_i = w->manual || j->share_i < 0 ? 0 : j->share_i;
	share_n = w->manual || j->share_i < 0 || j->share_n < 1 ? 1 : j->share_n;
	pthread_mutex_unlock(&j->mu);
	if ((s->pick = calloc(s->ntargets ? s->ntargets : 1, sizeof *s->pick)) == NULL)
		goto out;
	for (i = 0; i < s->ntargets; i++)
		if (jobs_node_hash(s->targets[i].uuid) % (uint64_t)share_n == (uint64_t)share_i)
			s->pick[s->npick++] = i;
	n = s->npick;
	k = n < j->o.sweep_concurrency ? n : j->o.sweep_concurrency;
	threads = calloc(k ? k : 1, sizeof *threads);
	for (i = 0; threads && i < k; i++)
		if (pthread_create(&threads[i], NULL, sweep_worker, s) != 0)
			break;
	k = i;
	if (k == 0 && n > 0)
		sweep_worker(s); /* no threads to spare: read them one by one */
	for (i = 0; i < k; i++)
		pthread_join(threads[i], NULL);
	record_chunk(s, s->pending);
	s->pending = NULL;
	pthread_mutex_lock(&j->mu);
	json_decref(w->last);
	w->last = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:i, s:{s:i, s:i}}", "started_at",
	                    rp_time_format(t0, ts0), "finished_at",
	                    rp_time_format(rp_time_now_ms(), ts1), "duration_ms",
	                    (json_int_t)((rp_time_mono_ns() - m0) / 1000000), "nodes",
	                    (json_int_t)n, "ok", (json_int_t)s->ok, "failed", (json_int_t)s->failed,
	                    s->kind == RP_SWEEP_POWER ? "changed" : "events", s->changed, "share",
	                    "index", share_i, "of", share_n);
	pthread_mutex_unlock(&j->mu);
	rp_log_info("%s: %zu node(s) (share %d of %d), %zu answered, %d %s, %lld ms",
	            sweep_names[s->kind], n, share_i + 1, share_n, s->ok, s->changed,
	            s->kind == RP_SWEEP_POWER ? "change(s)" : "event(s)",
	            (long long)((rp_time_mono_ns() - m0) / 1000000));
out:
	free(s->pick);
	free(threads);
	rp_store_power_targets_free(s->targets, s->ntargets);
	json_decref(s->pending);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_lock(&j->mu);
	w->running = 0;
	w->next_ms = rp_time_now_ms() + (int64_t)w->interval_s * 1000;
	pthread_mutex_unlock(&j->mu);
	free(s);
	return NULL;
}

void
jobs_sweeps_init(struct rp_jobs *j)
{
	j->sweeps[RP_SWEEP_POWER].interval_s = j->o.sweep_interval_s;
	j->sweeps[RP_SWEEP_SENSORS].interval_s = j->o.sensor_interval_s;
	/* The first sweeps wait a little, so a fresh start is not a burst of BMC traffic; the
	 * sensors a little more, so the two do not start together. */
	j->sweeps[RP_SWEEP_POWER].next_ms = rp_time_now_ms() + 5000;
	j->sweeps[RP_SWEEP_SENSORS].next_ms = rp_time_now_ms() + 8000;
}

void
jobs_sweeps_due(struct rp_jobs *j, int start[RP_SWEEPS])
{
	int64_t now = rp_time_now_ms();
	int k;

	for (k = 0; k < RP_SWEEPS; k++) {
		struct sweeper *w = &j->sweeps[k];

		start[k] = 0;
		if (w->running || j->stop || !(w->wanted || (w->interval_s && now >= w->next_ms)))
			continue;
		w->running = 1;
		w->manual = w->wanted;
		w->wanted = 0;
		start[k] = 1;
	}
}

void
jobs_sweeps_start(struct rp_jobs *j, const int start[RP_SWEEPS])
{
	int k;

	for (k = 0; k < RP_SWEEPS; k++) {
		struct sweeper *w = &j->sweeps[k];
		struct sweep *s;

		if (!start[k])
			continue;
		if (w->started)
			pthread_join(w->thread, NULL);
		w->started = 0;
		if ((s = calloc(1, sizeof *s)) != NULL) {
			s->j = j;
			s->kind = k;
			s->pending = json_array();
			pthread_mutex_init(&s->mu, NULL);
			w->started = pthread_create(&w->thread, NULL, sweep_main, s) == 0;
			if (!w->started) {
				json_decref(s->pending);
				pthread_mutex_destroy(&s->mu);
				free(s);
			}
		}
		if (!w->started) {
			pthread_mutex_lock(&j->mu);
			w->running = 0;
			pthread_mutex_unlock(&j->mu);
		}
	}
}

void
jobs_sweeps_soon(struct rp_jobs *j)
{
	int64_t soon = rp_time_now_ms() + 1000;
	int k;

	for (k = 0; k < RP_SWEEPS; k++)
		if (j->sweeps[k].interval_s && j->sweeps[k].next_ms > soon)
			j->sweeps[k].next_ms = soon;
}

void
jobs_sweeps_join(struct rp_jobs *j)
{
	int k;

	for (k = 0; k < RP_SWEEPS; k++) {
		if (j->sweeps[k].started)
			pthread_join(j->sweeps[k].thread, NULL);
		j->sweeps[k].started = 0;
		json_decref(j->sweeps[k].last);
		j->sweeps[k].last = NULL;
	}
}

enum rp_err
rp_jobs_sweep_now(struct rp_jobs *j, enum rp_sweep kind)
{
	enum rp_err e = RP_ERR_OK;

	pthread_mutex_lock(&j->mu);
	if (j->sweeps[kind].running || j->sweeps[kind].wanted)
		e = RP_ERR_CONFLICT;
	else
		j->sweeps[kind].wanted = 1;
	pthread_cond_broadcast(&j->kick_cv);
	j->kicked = 1;
	pthread_mutex_unlock(&j->mu);
	return e;
}

json_t *
rp_jobs_sweep_status(struct rp_jobs *j, enum rp_sweep kind)
{
	json_t *s;

	pthread_mutex_lock(&j->mu);
	s = json_pack("{s:i, s:b, s:O?}", "interval_s", (int)j->sweeps[kind].interval_s, "running",
	              j->sweeps[kind].running || j->sweeps[kind].wanted, "last",
	              j->sweeps[kind].last);
	pthread_mutex_unlock(&j->mu);
	return s;
}
