/* The scheduler, the workers, the heartbeat and the pruner (the sweeps: sweep.c). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bmc/bmc.h"
#include "internal.h"
#include "util/util.h"

void
rp_jobs_defaults(struct rp_jobs_opts *o)
{
	o->workers = 32;
	o->server_name = "rackpilotd";
	o->lease_s = 30;
	o->sweep_interval_s = 60;
	o->sweep_concurrency = 64;
	o->sensor_interval_s = 60;
	o->drive_warning_c = 70;
	o->sensor_history_hours = 24;
	o->sensor_history_max_rows = 15000000;
	o->rack_history_days = 30;
	o->power_on_stagger = 8;
	o->power_on_stagger_ms = 250;
	o->power_on_settle_s = 20;
	o->retention_days = 90;
	o->fault_threshold = 3;
	o->retry_base_ms = 1000;
	o->power_wait_s = 60;
	o->ssh_workers = 64;
	o->ssh_key = NULL;
	o->agent_command = "rackpilot-agent";
	o->ssh_connect_timeout_s = 10;
	o->log_cap = 8u << 20;
	o->image_dir = NULL;
	o->image_url = NULL;
	o->webhook_timeout_s = 10;
	o->webhook_max_age_s = 86400;
	o->webhook_ca_file = NULL;
	o->webhook_proxy = NULL;
	o->console_dir = NULL;
	o->console_mode = "active";
	o->console_max_sessions = 64;
	o->console_log_bytes = 8u << 20;
	o->console_idle_s = 3600;
}

static void
kick_locked(struct rp_jobs *j)
{
	j->kicked = 1;
	pthread_cond_signal(&j->kick_cv);
}

static void
kick(struct rp_jobs *j)
{
	pthread_mutex_lock(&j->mu);
	kick_locked(j);
	pthread_mutex_unlock(&j->mu);
}

/* ---- Power ------------------------------------------------------------------------- */

struct rp_job_outcome *
jobs_run_power(struct work *w, struct rp_bmc *b)
{
	json_t *params = jobs_params(w);
	const char *target = json_string_value(json_object_get(params, "target"));
	json_t *to = json_object_get(params, "timeout_s");
	unsigned soft_wait = json_is_integer(to) ? (unsigned)json_integer_value(to) : 60;
	enum rp_power now = RP_POWER_UNKNOWN, seen = RP_POWER_UNKNOWN, want;
	enum rp_power_action act;
	struct rp_bmc_err err = {0};
	const char *note = NULL;
	struct rp_job_outcome *o;
	int rc;

	if (rp_bmc_power_get(b, &now, &err) < 0)
		return jobs_bmc_failure(w, &err, 1);
	want = !strcmp(target, "off") || !strcmp(target, "soft_off") ? RP_POWER_OFF : RP_POWER_ON;
	if (w->recover) {
		/* The command may or may not have reached the BMC before the crash; never send it
		 * again. Succeed only where the end state proves it happened. Its admission (if it
		 * was a power-on) is no longer in flight either way. */
		jobs_power_started(w);
		int provable = !strcmp(target, "on") || !strcmp(target, "off") ||
		               !strcmp(target, "soft_off");

		if (provable && now == want) {
			o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
			jobs_set_result(o,
			                json_pack("{s:s, s:s}", "power", rp_power_name(now), "note",
			                          "interrupted by a stop of the server that ran "
			                          "it; the BMC reports "
			                          "the requested state, so it was carried out"));
		} else {
			o = jobs_outcome(w, RP_JOB_END_FAILED);
			jobs_set_error(
			        o, "interrupted",
			        provable ? "interrupted by a stop of the server that ran it before "
			                   "its outcome "
			                   "was "
			                   "recorded; the BMC reports power %s, not %s; not sent "
			                   "again in "
			                   "case it was delivered: submit it again if still wanted"
			                 : "interrupted by a stop of the server that ran it; a %s "
			                   "cannot be "
			                   "verified "
			                   "after the fact and is not repeated (the node is %s "
			                   "now); check "
			                   "the node and submit it again if needed",
			        provable ? rp_power_name(now) : target,
			        provable ? rp_power_name(want) : rp_power_name(now));
		}
		jobs_set_power(o, rp_power_name(now));
		o->bmc_ok = 1;
		return o;
	}
	if (now == want &&
	    (!strcmp(target, "on") || !strcmp(target, "off") || !strcmp(target, "soft_off"))) {
		o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
		jobs_set_result(o,
		                json_pack("{s:s, s:b}", "power", rp_power_name(now), "changed", 0));
		jobs_set_power(o, rp_power_name(now));
		o->bmc_ok = 1;
		return o;
	}
	if (!strcmp(target, "on"))
		act = RP_POWER_ACT_ON;
	else if (!strcmp(target, "off"))
		act = RP_POWER_ACT_OFF;
	else if (!strcmp(target, "soft_off"))
		act = RP_POWER_ACT_SOFT_OFF;
	else if (now == RP_POWER_OFF) {
		/* Cycling or resetting a machine that is off means: turn it on. */
		act = RP_POWER_ACT_ON;
		note = "node was off: powered on";
	} else
		act = !strcmp(target, "cycle") ? RP_POWER_ACT_CYCLE : RP_POWER_ACT_RESET;
	/* A power-on waits for room in its rack's budget and stagger. */
	if (act == RP_POWER_ACT_ON && (o = jobs_power_admit(w)) != NULL)
		return o;
	/* Durably "about to send" first: after a crash this job must verify, not send again. */
	if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK) {
		struct rp_bmc_err busy = {RP_BMC_BUSY, "could not record the job's progress in the "
		                                       "database before acting"};

		if (act == RP_POWER_ACT_ON)
			jobs_power_release(w);

		/* Nothing was sent: safe to retry like any transient failure, within its limit. */
		return jobs_bmc_failure(w, &busy, 1);
	}
	rc = rp_bmc_power_set(b, act, &err);
	if (act == RP_POWER_ACT_ON)
		jobs_power_started(w);
	if (rc < 0) {
		/* A cycle or reset that timed out may have happened: a second one could hit a
		 * booting machine, so only commands that reach a checkable state are retried. */
		int may_retry = err.kind != RP_BMC_TIMEOUT || act == RP_POWER_ACT_ON ||
		                act == RP_POWER_ACT_OFF || act == RP_POWER_ACT_SOFT_OFF;

		return jobs_bmc_failure(w, &err, may_retry);
	}
	rc = jobs_wait_power(w, b, want,
	                     act == RP_POWER_ACT_SOFT_OFF ? soft_wait : w->j->o.power_wait_s, &seen,
	                     &err);
	if (rc == 1 && act == RP_POWER_ACT_SOFT_OFF) {
		/* The OS ignored the graceful request: fall back to a hard power off. */
		if (rp_bmc_power_set(b, RP_POWER_ACT_OFF, &err) < 0)
			return jobs_bmc_failure(w, &err, 0);
		note = "no graceful shutdown: powered off hard";
		rc = jobs_wait_power(w, b, RP_POWER_OFF, w->j->o.power_wait_s, &seen, &err);
	}
	if (rc < 0 && err.kind == RP_BMC_OK)
		return jobs_interrupted(w);
	if (rc < 0)
		return jobs_bmc_failure(w, &err, 0);
	if (rc == 1) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "power_timeout",
		               "sent %s, but the node did not reach %s within %u s (BMC "
		               "reports %s)",
		               target, rp_power_name(want), w->j->o.power_wait_s,
		               rp_power_name(seen));
		jobs_set_power(o, rp_power_name(seen));
		o->bmc_ok = 1;
		return o;
	}
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:s, s:b, s:s?}", "power", rp_power_name(seen), "changed", 1,
	                             "note", note));
	jobs_set_power(o, rp_power_name(seen));
	o->bmc_ok = 1;
	return o;
}

/* ---- Boot -------------------------------------------------------------------------- */

struct rp_job_outcome *
jobs_run_boot(struct work *w, struct rp_bmc *b)
{
	json_t *params = jobs_params(w), *warnings = json_array();
	struct rp_job_outcome *o;
	const char *device = json_string_value(json_object_get(params, "device"));
	const char *mode = json_string_value(json_object_get(params, "mode"));
	struct rp_boot want = {0}, got = {0};
	struct rp_bmc_err err = {0};

	want.device = !strcmp(device, "pxe") ? RP_BOOT_PXE : RP_BOOT_DISK;
	want.persistent = json_is_true(json_object_get(params, "persistent"));
	want.uefi = mode == NULL || strcmp(mode, "legacy") != 0;
	/* Setting a boot device twice is harmless, so a recovered job simply does it again. */
	if (rp_bmc_boot_set(b, &want, &err) < 0 || rp_bmc_boot_get(b, &got, &err) < 0) {
		json_decref(warnings);
		return jobs_bmc_failure(w, &err, 1);
	}
	if (got.device != want.device) {
		json_decref(warnings);
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "bmc_mismatch",
		               "the BMC accepted boot device %s but reads back %s", device,
		               got.device == RP_BOOT_PXE    ? "pxe"
		               : got.device == RP_BOOT_DISK ? "disk"
		               : got.device == RP_BOOT_NONE ? "no override"
		                                            : "another device");
		o->bmc_ok = 1;
		return o;
	}
	if (got.persistent != want.persistent)
		json_array_append_new(warnings,
		                      json_pack("{s:s, s:s}", "field", "persistent", "reason",
		                                want.persistent ? "asked persistent, the BMC "
		                                                  "reads back next boot only"
		                                                : "asked next boot only, the BMC "
		                                                  "reads back persistent"));
	if (got.uefi >= 0 && got.uefi != want.uefi)
		json_array_append_new(warnings,
		                      json_pack("{s:s, s:s}", "field", "mode", "reason",
		                                want.uefi ? "asked UEFI, the BMC reads back "
		                                            "legacy BIOS boot"
		                                          : "asked legacy BIOS boot, the BMC "
		                                            "reads back UEFI"));
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:s, s:b, s:s, s:o}", "device", device, "persistent",
	                             got.persistent, "mode",
	                             got.uefi < 0 ? "unknown"
	                             : got.uefi   ? "uefi"
	                                          : "legacy",
	                             "warnings", warnings));
	o->bmc_ok = 1;
	return o;
}

/* ---- Verify ------------------------------------------------------------------------ */

/* 32 lowercase hex digits of a UUID string, or "" */
static void
hex32(const char *u, char out[33])
{
	size_t n = 0;

	for (; u && *u && n < 32; u++)
		if ((*u >= '0' && *u <= '9') || ((*u | 32) >= 'a' && (*u | 32) <= 'f'))
			out[n++] = (char)((*u >= 'A' && *u <= 'F') ? *u + 32 : *u);
	out[n == 32 ? 32 : 0] = '\0';
}

/* Same UUID, allowing for the byte orders BMCs use (RFC 4122, SMBIOS mixed-endian, all
 * bytes reversed as IPMI's GUID command may send them). */
static int
uuid_same(const char *a, const char *b)
{
	char x[33], y[33], z[33];
	static const int smbios[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
	int i;

	hex32(a, x);
	hex32(b, y);
	if (x[0] == '\0' || y[0] == '\0')
		return 0;
	if (!strcmp(x, y))
		return 1;
	for (i = 0; i < 16; i++) {
		z[2 * i] = y[2 * smbios[i]];
		z[2 * i + 1] = y[2 * smbios[i] + 1];
	}
	z[32] = '\0';
	if (!strcmp(x, z))
		return 1;
	for (i = 0; i < 16; i++) {
		z[2 * i] = y[2 * (15 - i)];
		z[2 * i + 1] = y[2 * (15 - i) + 1];
	}
	return !strcmp(x, z);
}

static int
text_same(const char *a, const char *b)
{
	size_t la, lb;

	while (*a == ' ')
		a++;
	while (*b == ' ')
		b++;
	la = strlen(a);
	lb = strlen(b);
	while (la && a[la - 1] == ' ')
		la--;
	while (lb && b[lb - 1] == ' ')
		lb--;
	return la == lb && strncasecmp(a, b, la) == 0;
}

/* One identity check into checks: skipped when a side is missing (the reasons given), ok
 * when same() says the enrolled and the reported value match, else a mismatch, also said in
 * mismatch ("; " between checks). */
static void
identity_check(json_t *checks, const char *check, const char *enrolled, const char *reported,
               int (*same)(const char *, const char *), const char *no_enrolled,
               const char *no_reported, char *mismatch, size_t len)
{
	size_t n = strlen(mismatch);

	if (enrolled == NULL || reported[0] == '\0')
		json_array_append_new(checks, json_pack("{s:s, s:s, s:s}", "check", check, "status",
		                                        "skipped", "reason",
		                                        enrolled ? no_reported : no_enrolled));
	else if (same(enrolled, reported))
		json_array_append_new(checks,
		                      json_pack("{s:s, s:s}", "check", check, "status", "ok"));
	else {
		json_array_append_new(checks, json_pack("{s:s, s:s, s:s, s:s}", "check", check,
		                                        "status", "mismatch", "enrolled", enrolled,
		                                        "reported", reported));
		snprintf(mismatch + n, len - n, "%s%s: enrolled %s, BMC reports %s", n ? "; " : "",
		         check, enrolled, reported);
	}
}

struct rp_job_outcome *
jobs_run_verify(struct work *w, struct rp_bmc *b)
{
	json_t *checks = json_array(), *identity;
	struct rp_job_outcome *o;
	const char *serial = w->claim->node.serial;
	const char *uuid = w->claim->node.system_uuid;
	struct rp_bmc_identity id;
	struct rp_bmc_err err = {0};
	enum rp_power p;
	char ts[RP_TIME_BUF], mismatch[512] = "";

	if (rp_bmc_identity(b, &id, &err) < 0 || rp_bmc_power_get(b, &p, &err) < 0) {
		json_decref(checks);
		return jobs_bmc_failure(w, &err, 1);
	}
	identity = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "serial", id.serial, "uuid", id.uuid,
	                     "manufacturer", id.manufacturer, "model", id.model, "bmc_firmware",
	                     id.bmc_firmware, "read_at", rp_time_format(rp_time_now_ms(), ts));
	identity_check(checks, "serial", serial, id.serial, text_same,
	               "node has no enrolled serial", "the BMC reports no serial", mismatch,
	               sizeof mismatch);
	identity_check(checks, "uuid", uuid, id.uuid, uuid_same, "node has no enrolled system_uuid",
	               "the BMC reports no UUID", mismatch, sizeof mismatch);
	if (mismatch[0]) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "identity_mismatch",
		               "the BMC at this address is not the enrolled machine (%s): a "
		               "swapped cable or "
		               "a wrong BMC address?",
		               mismatch);
	} else {
		o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	}
	jobs_set_result(o, json_pack("{s:O, s:s, s:o}", "identity", identity, "power",
	                             rp_power_name(p), "checks", checks));
	/* The IPMI quirks this session needed: found now, or as the options name them. */
	if (!strcmp(w->claim->bmc.driver ?: "", "ipmi")) {
		json_t *res = o->result, *quirks = NULL;
		json_t *conf = json_object_get(w->claim->bmc.options, "workarounds");

		if (rp_bmc_detected_workarounds(b, &quirks) == 1)
			json_object_set_new(res, "workarounds_detected", json_true());
		else
			quirks = json_is_array(conf) ? json_deep_copy(conf) : json_array();
		json_object_set_new(res, "workarounds", quirks);
	}
	o->identity = identity;
	jobs_set_power(o, rp_power_name(p));
	o->bmc_ok = 1;
	return o;
}

/* ---- Workers ----------------------------------------------------------------------- */

/* The runners of rackpilot/jobtypes.h's table, by type. */
static struct rp_job_outcome *(*const runners[RP_JOB__COUNT])(struct work *, struct rp_bmc *) = {
#define RUNNER(id, name, lane, rerun, mutating, run) [RP_JOB_##id] = run,
        RP_JOB_TYPES(RUNNER)
#undef RUNNER
};

static struct rp_job_outcome *
run(struct work *w)
{
	const struct rp_job_type_entry *t = rp_job_type_get(w->type);
	struct rp_bmc_err err = {0};
	struct rp_job_outcome *o;
	struct rp_bmc *b;

	if (t == NULL)
		return jobs_failed(w, "unknown_type", "no runner for job type '%s'",
		                   w->claim->type_name);
	/* SSH-lane runners open what they need themselves (a plan may never touch the BMC). */
	if (t->lane == RP_JOB_LANE_SSH)
		return runners[w->type](w, NULL);
	/* A BMC reset waits for its BMC to come back, a rotation opens it with other
	 * passwords: they open their own handles. */
	if (w->type == RP_JOB_BMC_RESET || w->type == RP_JOB_BMC_ROTATE)
		return runners[w->type](w, NULL);
	if ((b = jobs_bmc_open(w, &err)) == NULL)
		return jobs_bmc_failure(w, &err, err.kind != RP_BMC_REJECTED);
	o = runners[w->type](w, b);
	rp_bmc_close(b);
	return o;
}

static void
work_free(struct work *w)
{
	rp_store_claim_free(w->claim);
	free(w);
}

static void *
worker(void *arg)
{
	struct lane *l = arg;
	struct rp_jobs *j = l->j;

	for (;;) {
		struct work *w, **pp;
		struct rp_job_outcome *o;

		pthread_mutex_lock(&j->mu);
		while (l->queue == NULL && !j->stop)
			pthread_cond_wait(&l->cv, &j->mu);
		if (j->stop) {
			pthread_mutex_unlock(&j->mu);
			return NULL;
		}
		w = l->queue;
		l->queue = w->next;
		w->next = j->running;
		j->running = w;
		pthread_mutex_unlock(&j->mu);

		o = run(w);

		pthread_mutex_lock(&j->mu);
		for (pp = &j->running; *pp; pp = &(*pp)->next) {
			if (*pp == w) {
				*pp = w->next;
				break;
			}
		}
		if (o) {
			*j->done_tail = o;
			j->done_tail = &o->next;
		}
		l->inflight--;
		kick_locked(j);
		pthread_mutex_unlock(&j->mu);
		work_free(w);
	}
}

/* ---- Scheduler --------------------------------------------------------------------- */

/* Record outcomes; the database may be busy for a moment, never lose them. */
static void
record(struct rp_jobs *j, const struct rp_job_outcome *done)
{
	enum rp_err last = RP_ERR_OK;
	size_t n = 0;
	const struct rp_job_outcome *o;
	int tries, storage;

	for (o = done; o; o = o->next)
		n++;
	for (tries = 0; tries < 50; tries++) {
		enum rp_err e =
		        rp_store_jobs_record(j->st, j->owner, done, (int)j->o.fault_threshold);

		if (e == RP_ERR_OK) {
			for (o = done; o; o = o->next)
				__atomic_add_fetch(&j->outcomes[o->state], 1, __ATOMIC_RELAXED);
			return;
		}
		/* Once per kind of failure, not per try. */
		if (e != last)
			rp_log_warn("jobs: recording %zu jobs_outcome(s) failed (%s); retrying", n,
			            rp_err_message(e));
		last = e;
		/* A full or read-only disk takes an operator: back off longer (50 tries: ~50 s). */
		storage = e == RP_ERR_STORAGE_FULL || e == RP_ERR_STORAGE_READONLY ||
		          e == RP_ERR_STORAGE_IO;
		jobs_sleep_ms(storage ? 1000 : 100);
	}
	rp_log_error("jobs: could not record %zu jobs_outcome(s); they stay running until their "
	             "leases run out, then are recovered",
	             n);
}

static void
claim(struct rp_jobs *j, enum rp_job_lane lane, int free_slots)
{
	struct lane *l = &j->lanes[lane];
	struct rp_job_claim *claimed = NULL, *c;

	if (rp_store_jobs_take(j->st, j->owner, lane, free_slots, j->lease_ms, &claimed) !=
	    RP_ERR_OK)
		return;
	while ((c = claimed) != NULL) {
		const struct rp_job_type_entry *t = rp_job_type_get(c->type);
		struct work *w = calloc(1, sizeof *w);

		if (w == NULL)
			break; /* stays running; recovered when its lease runs out */
		claimed = c->next;
		c->next = NULL;
		w->j = j;
		w->lane = lane;
		w->id = c->id;
		w->node_id = c->node.id;
		snprintf(w->uuid, sizeof w->uuid, "%s", c->uuid);
		w->type = c->type;
		snprintf(w->node_name, sizeof w->node_name, "%s", c->node.name ?: "");
		/* Interrupted before it sent anything: it simply runs. After sending: it
		 * verifies (a rerun-safe type never marks sent). */
		w->recover = c->recover && c->sent && !(t && t->rerun_safe);
		w->attempts = c->attempts;
		w->max_attempts = c->max_attempts;
		w->claim = c;
		pthread_mutex_lock(&j->mu);
		w->next = l->queue;
		l->queue = w;
		l->inflight++;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&j->mu);
	}
	rp_store_claim_free(claimed);
}

/* Renew the leases of the jobs this server holds (claimed, in a worker or waiting for one);
 * a job another server took over meanwhile (this one lost the database for longer than a
 * lease) is told to stop at its next safe point, and its outcome will not be recorded. */
static void
renew(struct rp_jobs *j)
{
	json_t *held = json_array(), *renewed = NULL, *v;
	struct work *w;
	size_t i;
	int lane, found;

	pthread_mutex_lock(&j->mu);
	for (w = j->running; w; w = w->next)
		json_array_append_new(held, json_integer(w->id));
	for (lane = 0; lane < LANES; lane++)
		for (w = j->lanes[lane].queue; w; w = w->next)
			json_array_append_new(held, json_integer(w->id));
	pthread_mutex_unlock(&j->mu);
	if (json_array_size(held) == 0 ||
	    rp_store_jobs_renew(j->st, j->owner, held, j->lease_ms, &renewed) != RP_ERR_OK)
		goto out; /* tried again at the next renewal, well before the lease runs out */
	pthread_mutex_lock(&j->mu);
	for (w = j->running; w; w = w->next) {
		found = 0;
		json_array_foreach(renewed, i, v) found |= json_integer_value(v) == w->id;
		if (!found && !__atomic_load_n(&w->cancel, __ATOMIC_RELAXED)) {
			rp_log_warn(
			        "jobs: job %s is no longer leased to %s (another server took it "
			        "over); stopping it here",
			        w->uuid, j->owner);
			__atomic_store_n(&w->cancel, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&j->mu);
out:
	json_decref(held);
	json_decref(renewed);
}

/* Take over the running jobs whose leases ran out: their server died or lost the database. */
static void
look(struct rp_jobs *j)
{
	int n = 0;

	if (rp_store_jobs_recover(j->st, NULL, &n) == RP_ERR_OK && n > 0) {
		rp_log_warn("jobs: took over %d job(s) whose lease ran out; BMC jobs check the BMC "
		            "and do not repeat their action, step plans resume",
		            n);
		kick(j);
	}
}

/* ---- Servers sharing the database ----------------------------------------------------- */

/* Whether holder, the live row under this server's name, is a stop of this very server that
 * left no row behind (kill -9, a crash, a power cut; restarted before the row ran out): the
 * same host, and its process gone or now something else (pids are reused). */
static int
stale(const struct rp_jobs *j, json_t *holder)
{
	long pid = (long)json_integer_value(json_object_get(holder, "pid"));
	char path[64], mine[64] = "", theirs[64] = "";
	FILE *f;

	if (strcmp(json_string_value(json_object_get(holder, "host")) ?: "", j->host) != 0)
		return 0;
	if (pid == (long)getpid() || pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
		return 1;
	if ((f = fopen("/proc/self/comm", "r")) != NULL) {
		if (fgets(mine, sizeof mine, f) == NULL)
			mine[0] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	if ((f = fopen(path, "r")) != NULL) {
		if (fgets(theirs, sizeof theirs, f) == NULL)
			theirs[0] = '\0';
		fclose(f);
	}
	return mine[0] && strcmp(mine, theirs) != 0;
}

/* The position of the server named name in set (a live set), or -1. */
static int
live_index(json_t *set, const char *name)
{
	size_t i;

	for (i = 0; i < json_array_size(set); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(set, i), "name"))
		                    ?: "",
		            name))
			return (int)i;
	return -1;
}

/* Take in the live set of a heartbeat (taken): this server's share of the sweep, and a sweep
 * soon when a server left, so its share of the nodes is read within about a lease of its
 * death rather than a whole interval later. */
static void
set_live(struct rp_jobs *j, json_t *live)
{
	const char *name;
	size_t i;
	int gone = 0;

	pthread_mutex_lock(&j->mu);
	for (i = 0; i < json_array_size(j->live); i++) {
		name = json_string_value(json_object_get(json_array_get(j->live, i), "name"));
		if (name && live_index(live, name) < 0) {
			rp_log_warn(
			        "servers: %s is no longer live (stopped, or lost the database); "
			        "the others share its part of the power sweep",
			        name);
			gone = 1;
		}
	}
	for (i = 0; j->live && i < json_array_size(live); i++) {
		name = json_string_value(json_object_get(json_array_get(live, i), "name"));
		if (name && live_index(j->live, name) < 0)
			rp_log_info("servers: %s joined", name);
	}
	j->share_i = live_index(live, j->owner);
	j->share_n = (int)json_array_size(live);
	if (gone)
		jobs_sweeps_soon(j);
	json_decref(j->live);
	j->live = live;
	pthread_mutex_unlock(&j->mu);
}

/* A heartbeat: this server's row kept live, the live set read. Another live server holding
 * this one's name (it started under the same server_name while this one was cut off from the
 * database) is said loudly: their jobs and sweep shares are mixed up until one is renamed. */
static void
beat(struct rp_jobs *j)
{
	json_t *live = NULL, *holder = NULL;
	int leader;
	enum rp_err e;

	pthread_mutex_lock(&j->mu);
	leader = j->leader;
	pthread_mutex_unlock(&j->mu);
	e = rp_store_server_beat(j->st, &j->self, leader, 0, &live, &holder);
	if (e == RP_ERR_OK) {
		j->name_lost = 0;
		set_live(j, live);
	} else if (e == RP_ERR_CONFLICT && !j->name_lost) {
		j->name_lost = 1;
		rp_log_error("servers: another server (host %s, pid %lld) now runs under this "
		             "server's name '%s': give each server its own server_name",
		             json_string_value(json_object_get(holder, "host")),
		             (long long)json_integer_value(json_object_get(holder, "pid")),
		             j->owner);
	}
	json_decref(holder);
}

/* The first heartbeat, before any job is recovered: -1 with why when a live server already
 * runs under this name (two servers under one name would take each other's jobs back). */
static int
join(struct rp_jobs *j, char *why, size_t whylen)
{
	json_t *live = NULL, *holder = NULL;
	enum rp_err e = rp_store_server_beat(j->st, &j->self, j->leader, 0, &live, &holder);
	int rc = -1;

	if (e == RP_ERR_CONFLICT && stale(j, holder))
		e = rp_store_server_beat(j->st, &j->self, j->leader, 1, &live, NULL);
	if (e == RP_ERR_CONFLICT) {
		snprintf(why, whylen,
		         "another live server runs under the name '%s' on this database (host %s, "
		         "pid %lld, heard from %lld ms ago): give each server its own server_name "
		         "(--server-name)",
		         j->owner, json_string_value(json_object_get(holder, "host")),
		         (long long)json_integer_value(json_object_get(holder, "pid")),
		         (long long)(rp_time_now_ms() + j->lease_ms -
		                     json_integer_value(json_object_get(holder, "seen_until"))));
		goto out;
	}
	if (e == RP_ERR_OK)
		set_live(j, live);
	else /* a database that cannot be written now: the heartbeat tries again */
		rp_log_warn("servers: cannot record this server in the database now (%s)",
		            rp_err_message(e));
	rc = 0;
out:
	json_decref(holder);
	return rc;
}

static void *
scheduler(void *arg)
{
	struct rp_jobs *j = arg;

	for (;;) {
		struct rp_job_outcome *done;
		int free_slots[LANES], stop, start_sweep[RP_SWEEPS], lane;
		int64_t now;

		pthread_mutex_lock(&j->mu);
		if (!j->kicked && !j->stop) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += TICK_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&j->kick_cv, &j->mu, &ts);
		}
		j->kicked = 0;
		stop = j->stop;
		done = j->done;
		j->done = NULL;
		j->done_tail = &j->done;
		for (lane = 0; lane < LANES; lane++)
			free_slots[lane] = (int)j->lanes[lane].nworkers - j->lanes[lane].inflight;
		jobs_sweeps_due(j, start_sweep);
		pthread_mutex_unlock(&j->mu);
		if (done)
			record(j, done);
		rp_store_outcome_free(done);
		if (stop)
			return NULL;
		jobs_sweeps_start(j, start_sweep);
		for (lane = 0; lane < LANES; lane++)
			if (free_slots[lane] > 0)
				claim(j, lane, free_slots[lane]);
		now = rp_time_now_ms();
		if (now >= j->next_renew_ms) {
			j->next_renew_ms = now + j->lease_ms / 3;
			renew(j);
			beat(j);
		}
		if (now >= j->next_look_ms) {
			j->next_look_ms = now + LOOK_MS;
			look(j);
		}
	}
}

/* ---- Retention ------------------------------------------------------------------------ */

#define PRUNE_EVERY_MS  (3600 * 1000)
#define PRUNE_CAPPED_MS (300 * 1000)

/* The leader prunes what retention_days no longer keeps: a little after it starts or takes
 * the lead, then hourly; a second at a time, so a stop never waits on a large backlog. */
static void *
pruner(void *arg)
{
	struct rp_jobs *j = arg;
	int64_t next = rp_time_now_ms() + 2000;
	struct rp_prune_keep keep = {
	        .events_ms = (int64_t)j->o.retention_days * 86400000,
	        .samples_ms = (int64_t)j->o.sensor_history_hours * 3600000,
	        .samples_max = j->o.sensor_history_max_rows,
	        .rack_steps_ms = (int64_t)j->o.rack_history_days * 86400000,
	};
	int was_leader = 0;

	pthread_mutex_lock(&j->mu);
	while (!j->stop) {
		int64_t now = rp_time_now_ms();
		struct rp_prune_counts n = {0};
		struct timespec ts;
		enum rp_err e;

		if (j->leader && !was_leader && next > now + 2000)
			next = now + 2000;
		was_leader = j->leader;
		if (!j->leader || now < next) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&j->prune_cv, &j->mu, &ts);
			continue;
		}
		pthread_mutex_unlock(&j->mu);
		e = rp_store_prune(j->st, now, &keep, 1000, &n);
		if (e != RP_ERR_OK)
			rp_log_warn("retention: pruning failed (%s); trying again in a minute",
			            rp_err_message(e));
		else if (n.events || n.job_logs || n.tokens || n.bootstrap_tokens || n.servers ||
		         n.deliveries || n.samples || n.rack_steps)
			rp_log_info(
			        "retention: removed %lld event(s), the logs of %lld job(s), %lld "
			        "token(s), %lld bootstrap token(s), %lld server row(s), %lld "
			        "webhook deliveries, %lld sensor sample(s), %lld rack power "
			        "step(s)%s",
			        (long long)n.events, (long long)n.job_logs, (long long)n.tokens,
			        (long long)n.bootstrap_tokens, (long long)n.servers,
			        (long long)n.deliveries, (long long)n.samples,
			        (long long)n.rack_steps, n.more ? "; more to come" : "");
		/* Over the sensor history cap: soon again, so a busy fleet's samples stay near it.
		 */
		next = e != RP_ERR_OK ? now + 60000
		       : n.more       ? 0
		       : n.capped     ? now + PRUNE_CAPPED_MS
		                      : now + PRUNE_EVERY_MS;
		pthread_mutex_lock(&j->mu);
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

/* ---- Public ------------------------------------------------------------------------ */

int
rp_jobs_start(struct rp_store *st, const struct rp_jobs_opts *o, struct rp_jobs **out, char *why,
              size_t whylen)
{
	struct rp_jobs *j = calloc(1, sizeof *j);
	unsigned i;
	int recovered = 0, lane;
	enum rp_err e;

	if (j == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	j->st = st;
	j->o = *o;
	if (j->o.workers == 0)
		j->o.workers = 1;
	if (j->o.ssh_workers == 0)
		j->o.ssh_workers = 1;
	j->lanes[LANE_BMC].nworkers = j->o.workers;
	j->lanes[LANE_SSH].nworkers = j->o.ssh_workers;
	if (j->o.sweep_concurrency == 0)
		j->o.sweep_concurrency = 1;
	snprintf(j->owner, sizeof j->owner, "%s", j->o.server_name ?: "rackpilotd");
	if (rp_uuid_new(j->instance) < 0 || gethostname(j->host, sizeof j->host) != 0)
		snprintf(j->host, sizeof j->host, "unknown");
	j->host[sizeof j->host - 1] = '\0';
	j->share_i = -1;
	j->leader = 1;
	j->lease_ms = (int64_t)(j->o.lease_s ? j->o.lease_s : 30) * 1000;
	j->next_renew_ms = rp_time_now_ms() + j->lease_ms / 3;
	j->self = (struct rp_server_self){.name = j->owner,
	                                  .instance = j->instance,
	                                  .host = j->host,
	                                  .pid = (long)getpid(),
	                                  .lease_ms = j->lease_ms};
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->kick_cv, NULL);
	pthread_cond_init(&j->prune_cv, NULL);
	for (lane = 0; lane < LANES; lane++) {
		j->lanes[lane].j = j;
		pthread_cond_init(&j->lanes[lane].cv, NULL);
	}
	j->done = NULL;
	j->done_tail = &j->done;
	jobs_sweeps_init(j);
	if (join(j, why, whylen) < 0)
		goto fail;
	e = rp_store_jobs_recover(st, j->owner, &recovered);
	if (e == RP_ERR_STORAGE_FULL || e == RP_ERR_STORAGE_READONLY || e == RP_ERR_STORAGE_IO) {
		/* Serve reads meanwhile; jobs wait for a writable database, and interrupted ones
		 * are recovered at the next start. */
		rp_log_warn("jobs: cannot recover interrupted jobs now (%s); jobs wait until the "
		            "database is writable",
		            rp_err_message(e));
	} else if (e != RP_ERR_OK) {
		snprintf(why, whylen, "cannot recover interrupted jobs");
		goto fail;
	}
	if (recovered)
		rp_log_warn("jobs: %d job(s) were running when rackpilotd stopped; BMC jobs will "
		            "check the BMC and not repeat their action, step plans resume",
		            recovered);
	for (lane = 0; lane < LANES; lane++) {
		struct lane *l = &j->lanes[lane];
		unsigned want = l->nworkers;

		if ((l->workers = calloc(want, sizeof *l->workers)) == NULL) {
			snprintf(why, whylen, "out of memory");
			l->nworkers = 0;
			rp_jobs_stop(j);
			return -1;
		}
		for (i = 0; i < want; i++) {
			if (pthread_create(&l->workers[i], NULL, worker, l) != 0) {
				snprintf(why, whylen, "cannot start job workers");
				l->nworkers = i;
				rp_jobs_stop(j);
				return -1;
			}
		}
	}
	if (pthread_create(&j->scheduler, NULL, scheduler, j) != 0) {
		snprintf(why, whylen, "cannot start the job scheduler");
		j->scheduler = 0;
		rp_jobs_stop(j);
		return -1;
	}
	j->pruner_started = pthread_create(&j->pruner, NULL, pruner, j) == 0;
	if (!j->pruner_started)
		rp_log_warn("jobs: cannot start the pruning thread; nothing is pruned");
	j->webhooks_started = pthread_create(&j->webhooks, NULL, rp_jobs_webhooks, j) == 0;
	if (!j->webhooks_started)
		rp_log_warn("jobs: cannot start the webhook thread; nothing is delivered");
	if (j->o.console_dir && jobs_console_start(j) < 0)
		rp_log_warn(
		        "jobs: cannot start the console thread; no console is logged or served");
	*out = j;
	return 0;
fail:
	json_decref(j->live);
	for (lane = 0; lane < LANES; lane++)
		pthread_cond_destroy(&j->lanes[lane].cv);
	pthread_cond_destroy(&j->kick_cv);
	pthread_cond_destroy(&j->prune_cv);
	pthread_mutex_destroy(&j->mu);
	free(j);
	return -1;
}

void
rp_jobs_stop(struct rp_jobs *j)
{
	unsigned i;
	struct work *w, *n;
	int lane;

	if (j == NULL)
		return;
	pthread_mutex_lock(&j->mu);
	j->stop = 1;
	for (lane = 0; lane < LANES; lane++)
		pthread_cond_broadcast(&j->lanes[lane].cv);
	pthread_cond_broadcast(&j->kick_cv);
	pthread_cond_broadcast(&j->prune_cv);
	pthread_mutex_unlock(&j->mu);
	for (lane = 0; lane < LANES; lane++)
		for (i = 0; i < j->lanes[lane].nworkers; i++)
			pthread_join(j->lanes[lane].workers[i], NULL);
	if (j->scheduler)
		pthread_join(j->scheduler, NULL);
	if (j->pruner_started)
		pthread_join(j->pruner, NULL);
	if (j->webhooks_started)
		pthread_join(j->webhooks, NULL);
	jobs_console_stop(j);
	jobs_sweeps_join(j);
	/* Outcomes of jobs that finished while stopping are still worth recording. */
	if (j->done)
		record(j, j->done);
	/* The others take this server's share of the sweep at once, not a lease later; its
	 * running jobs stay leased to its name, for its restart or the lease's end. */
	if (!j->name_lost)
		rp_store_server_leave(j->st, &j->self);
	for (lane = 0; lane < LANES; lane++) {
		for (w = j->lanes[lane].queue; w; w = n) {
			n = w->next;
			work_free(w);
		}
		free(j->lanes[lane].workers);
		pthread_cond_destroy(&j->lanes[lane].cv);
	}
	rp_store_outcome_free(j->done);
	json_decref(j->live);
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->kick_cv);
	pthread_cond_destroy(&j->prune_cv);
	free(j);
}

enum rp_err
rp_jobs_submit(struct rp_jobs *j, const char *node, json_t *job, const char *actor, json_t **out,
               json_t **detail)
{
	enum rp_err e = rp_store_job_create(j->st, node, job, actor, out, detail);

	if (e == RP_ERR_OK)
		kick(j);
	return e;
}

enum rp_err
rp_jobs_submit_batch(struct rp_jobs *j, json_t *selector, json_t *job, const char *actor,
                     json_t **out, json_t **detail)
{
	enum rp_err e =
	        rp_store_batch_create(j->st, json_string_value(json_object_get(job, "type")),
	                              selector, job, actor, out, detail);

	if (e == RP_ERR_OK)
		kick(j);
	return e;
}

enum rp_err
rp_jobs_bmc_rotate(struct rp_jobs *j, const char *node, const char *password, json_t *job,
                   const char *actor, json_t **out, json_t **detail)
{
	enum rp_err e = rp_store_bmc_rotate(j->st, node, password, job, actor, out, detail);

	if (e == RP_ERR_OK)
		kick(j);
	return e;
}

enum rp_err
rp_jobs_provision(struct rp_jobs *j, const char *node, const char *action, json_t *job,
                  const char *actor, json_t **out, json_t **detail)
{
	enum rp_err e = rp_store_provision(j->st, node, action, job, actor, out, detail);

	if (e == RP_ERR_OK)
		kick(j);
	return e;
}

void
rp_jobs_lead(struct rp_jobs *j, int leader)
{
	pthread_mutex_lock(&j->mu);
	/* The next heartbeat (soon) tells the other servers. */
	if (leader != j->leader) {
		j->next_renew_ms = 0;
		kick_locked(j);
	}
	j->leader = leader;
	pthread_mutex_unlock(&j->mu);
}

enum rp_err
rp_jobs_cancel(struct rp_jobs *j, const char *id, const char *actor, json_t **out, json_t **detail)
{
	struct work *w;
	int running = 0;
	enum rp_err e = rp_store_job_cancel(j->st, id, actor, out, &running, detail);

	if (e != RP_ERR_OK || !running)
		return e;
	pthread_mutex_lock(&j->mu);
	for (w = j->running; w; w = w->next)
		if (!strcasecmp(w->uuid, id))
			__atomic_store_n(&w->cancel, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&j->mu);
	return RP_ERR_OK;
}

void
rp_jobs_outcomes(struct rp_jobs *j, uint64_t out[RP_JOB_END_RETRY + 1])
{
	int i;

	for (i = 0; i <= RP_JOB_END_RETRY; i++)
		out[i] = __atomic_load_n(&j->outcomes[i], __ATOMIC_RELAXED);
}

json_t *
rp_jobs_server(struct rp_jobs *j)
{
	json_t *s, *servers = json_array(), *v;
	char ts[RP_TIME_BUF];
	size_t i;

	pthread_mutex_lock(&j->mu);
	json_array_foreach(j->live, i, v) json_array_append_new(
	        servers,
	        json_pack("{s:O?, s:O?, s:O?, s:s, s:O?}", "name", json_object_get(v, "name"),
	                  "host", json_object_get(v, "host"), "pid", json_object_get(v, "pid"),
	                  "started_at",
	                  rp_time_format(json_integer_value(json_object_get(v, "started_at")), ts),
	                  "leader", json_object_get(v, "leader")));
	s = json_pack("{s:s, s:b, s:o}", "name", j->owner, "leader", j->leader, "servers", servers);
	pthread_mutex_unlock(&j->mu);
	return s;
}
