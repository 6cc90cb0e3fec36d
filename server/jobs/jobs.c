/* The scheduler, the workers, and the power-sync sweeper. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
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
	o->sweep_interval_s = 60;
	o->sweep_concurrency = 64;
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

int
jobs_stopping(struct work *w)
{
	return __atomic_load_n(&w->j->stop, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&w->cancel, __ATOMIC_RELAXED);
}

void
jobs_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- Outcomes ---------------------------------------------------------------------- */

json_t *
jobs_outcome(struct work *w, const char *state)
{
	return json_pack("{s:I, s:s}", "id", (json_int_t)w->id, "state", state);
}

json_t *
jobs_later(struct work *w, unsigned ms)
{
	json_t *o = jobs_outcome(w, "retry");

	json_object_set_new(o, "wait", json_true());
	json_object_set_new(o, "not_before", json_integer(rp_time_now_ms() + ms));
	return o;
}

void
jobs_set_error(json_t *o, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_object_set_new(o, "error_code", json_string(code));
	json_object_set_new(o, "error", json_string(msg));
}

/* Persist the IPMI workarounds b found at open, so the next session opens directly. Its own
 * transaction, after the BMC answered and before any other BMC call; a failure is logged and
 * the job goes on (it has a working session either way). */
void
jobs_bmc_learned(struct rp_jobs *j, json_t *node, json_t *bmc, struct rp_bmc *b)
{
	const char *name = json_string_value(json_object_get(node, "name")) ?: "?";
	const char *uuid = json_string_value(json_object_get(node, "uuid"));
	const char *address = json_string_value(json_object_get(bmc, "address"));
	unsigned port = (unsigned)json_integer_value(json_object_get(bmc, "port"));
	json_t *names = NULL;
	enum rp_err e;

	if (rp_bmc_detected_workarounds(b, &names) != 1)
		return;
	e = rp_store_bmc_workarounds_detected(j->st, uuid ? uuid : name, address, port, names);
	if (e == RP_ERR_OK)
		rp_log_info("jobs: %s: IPMI workarounds detected and saved in bmc.options", name);
	else if (e != RP_ERR_CONFLICT)
		rp_log_warn("jobs: %s: detected IPMI workarounds not saved: %s", name,
		            rp_err_code(e));
	json_decref(names);
}

/* A BMC error: retried later when that can help and attempts remain, else final. */
json_t *
jobs_bmc_failure(struct work *w, const struct rp_bmc_err *err, int may_retry)
{
	char code[40];
	json_t *o;

	snprintf(code, sizeof code, "bmc_%s", rp_bmc_err_name(err->kind));
	if (may_retry && rp_bmc_err_transient(err->kind) && w->attempts < w->max_attempts) {
		int64_t delay = (int64_t)w->j->o.retry_base_ms << (w->attempts - 1);

		if (delay > 60000)
			delay = 60000;
		o = jobs_outcome(w, "retry");
		json_object_set_new(o, "not_before", json_integer(rp_time_now_ms() + delay));
		jobs_set_error(o, code, "%s (attempt %d of %d; retrying in %lld ms)", err->msg,
		               w->attempts, w->max_attempts, (long long)delay);
	} else {
		o = jobs_outcome(w, "failed");
		if (rp_bmc_err_transient(err->kind) && may_retry)
			jobs_set_error(o, code, "%s (gave up after %d attempts)", err->msg,
			               w->attempts);
		else
			jobs_set_error(o, code, "%s", err->msg);
	}
	/* Only contact failures count against the BMC's health, not refusals of a request. */
	if (err->kind == RP_BMC_UNREACHABLE || err->kind == RP_BMC_TIMEOUT ||
	    err->kind == RP_BMC_AUTH || err->kind == RP_BMC_TLS)
		json_object_set_new(o, "bmc_ok", json_false());
	return o;
}

static json_t *
interrupted(struct work *w)
{
	json_t *o;

	/* Shutting down: leave the job running in the store; the next start recovers it. */
	if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED))
		return NULL;
	o = jobs_outcome(w, "cancelled");
	jobs_set_error(o, "cancelled", "cancelled while in progress");
	return o;
}

/* ---- Power ------------------------------------------------------------------------- */

/* Poll until the node reaches want, up to timeout_s. 0 reached; 1 timed out (*seen is the
 * last reading); -1 error or interruption (err set; kind OK for interruption). */
static int
wait_power(struct work *w, struct rp_bmc *b, enum rp_power want, unsigned timeout_s,
           enum rp_power *seen, struct rp_bmc_err *err)
{
	int64_t until = rp_time_mono_ns() + (int64_t)timeout_s * 1000000000;
	int errors = 0;

	for (;;) {
		enum rp_power p;

		if (rp_bmc_power_get(b, &p, err) == 0) {
			*seen = p;
			errors = 0;
			if (p == want)
				return 0;
		} else if (!rp_bmc_err_transient(err->kind) || ++errors > 5) {
			return -1;
		}
		if (rp_time_mono_ns() > until)
			return 1;
		if (jobs_stopping(w)) {
			err->kind = RP_BMC_OK;
			return -1;
		}
		jobs_sleep_ms(POLL_MS);
	}
}

static json_t *
run_power(struct work *w, struct rp_bmc *b)
{
	json_t *params = json_object_get(w->claim, "params");
	const char *target = json_string_value(json_object_get(params, "target"));
	json_t *to = json_object_get(params, "timeout_s");
	unsigned soft_wait = json_is_integer(to) ? (unsigned)json_integer_value(to) : 60;
	enum rp_power now = RP_POWER_UNKNOWN, seen = RP_POWER_UNKNOWN, want;
	enum rp_power_action act;
	struct rp_bmc_err err = {0};
	const char *note = NULL;
	json_t *o;
	int rc;

	if (rp_bmc_power_get(b, &now, &err) < 0)
		return jobs_bmc_failure(w, &err, 1);
	want = !strcmp(target, "off") || !strcmp(target, "soft_off") ? RP_POWER_OFF : RP_POWER_ON;
	if (w->recover) {
		/* The command may or may not have reached the BMC before the crash; never send it
		 * again. Succeed only where the end state proves it happened. */
		int provable = !strcmp(target, "on") || !strcmp(target, "off") ||
		               !strcmp(target, "soft_off");

		if (provable && now == want) {
			o = jobs_outcome(w, "succeeded");
			json_object_set_new(
			        o, "result",
			        json_pack("{s:s, s:s}", "power", rp_power_name(now), "note",
			                  "interrupted by a rackpilotd restart; the BMC reports "
			                  "the requested state, so it was carried out"));
		} else {
			o = jobs_outcome(w, "failed");
			jobs_set_error(
			        o, "interrupted",
			        provable ? "interrupted by a rackpilotd restart before its outcome "
			                   "was "
			                   "recorded; the BMC reports power %s, not %s; not sent "
			                   "again in "
			                   "case it was delivered: submit it again if still wanted"
			                 : "interrupted by a rackpilotd restart; a %s cannot be "
			                   "verified "
			                   "after the fact and is not repeated (the node is %s "
			                   "now); check "
			                   "the node and submit it again if needed",
			        provable ? rp_power_name(now) : target,
			        provable ? rp_power_name(want) : rp_power_name(now));
		}
		json_object_set_new(o, "power", json_string(rp_power_name(now)));
		json_object_set_new(o, "bmc_ok", json_true());
		return o;
	}
	if (now == want &&
	    (!strcmp(target, "on") || !strcmp(target, "off") || !strcmp(target, "soft_off"))) {
		o = jobs_outcome(w, "succeeded");
		json_object_set_new(
		        o, "result",
		        json_pack("{s:s, s:b}", "power", rp_power_name(now), "changed", 0));
		json_object_set_new(o, "power", json_string(rp_power_name(now)));
		json_object_set_new(o, "bmc_ok", json_true());
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
	/* Durably "about to send" first: after a crash this job must verify, not send again. */
	if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK) {
		struct rp_bmc_err busy = {RP_BMC_BUSY, "could not record the job's progress in the "
		                                       "database before acting"};

		/* Nothing was sent: safe to retry like any transient failure, within its limit. */
		return jobs_bmc_failure(w, &busy, 1);
	}
	if (rp_bmc_power_set(b, act, &err) < 0) {
		/* A cycle or reset that timed out may have happened: a second one could hit a
		 * booting machine, so only commands that reach a checkable state are retried. */
		int may_retry = err.kind != RP_BMC_TIMEOUT || act == RP_POWER_ACT_ON ||
		                act == RP_POWER_ACT_OFF || act == RP_POWER_ACT_SOFT_OFF;

		return jobs_bmc_failure(w, &err, may_retry);
	}
	rc = wait_power(w, b, want, act == RP_POWER_ACT_SOFT_OFF ? soft_wait : w->j->o.power_wait_s,
	                &seen, &err);
	if (rc == 1 && act == RP_POWER_ACT_SOFT_OFF) {
		/* The OS ignored the graceful request: fall back to a hard power off. */
		if (rp_bmc_power_set(b, RP_POWER_ACT_OFF, &err) < 0)
			return jobs_bmc_failure(w, &err, 0);
		note = "no graceful shutdown: powered off hard";
		rc = wait_power(w, b, RP_POWER_OFF, w->j->o.power_wait_s, &seen, &err);
	}
	if (rc < 0 && err.kind == RP_BMC_OK)
		return interrupted(w);
	if (rc < 0)
		return jobs_bmc_failure(w, &err, 0);
	if (rc == 1) {
		o = jobs_outcome(w, "failed");
		jobs_set_error(o, "power_timeout",
		               "sent %s, but the node did not reach %s within %u s (BMC "
		               "reports %s)",
		               target, rp_power_name(want), w->j->o.power_wait_s,
		               rp_power_name(seen));
		json_object_set_new(o, "power", json_string(rp_power_name(seen)));
		json_object_set_new(o, "bmc_ok", json_true());
		return o;
	}
	o = jobs_outcome(w, "succeeded");
	json_object_set_new(o, "result",
	                    json_pack("{s:s, s:b, s:s?}", "power", rp_power_name(seen), "changed",
	                              1, "note", note));
	json_object_set_new(o, "power", json_string(rp_power_name(seen)));
	json_object_set_new(o, "bmc_ok", json_true());
	return o;
}

/* ---- Boot -------------------------------------------------------------------------- */

static json_t *
run_boot(struct work *w, struct rp_bmc *b)
{
	json_t *params = json_object_get(w->claim, "params"), *warnings = json_array(), *o;
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
		o = jobs_outcome(w, "failed");
		jobs_set_error(o, "bmc_mismatch",
		               "the BMC accepted boot device %s but reads back %s", device,
		               got.device == RP_BOOT_PXE    ? "pxe"
		               : got.device == RP_BOOT_DISK ? "disk"
		               : got.device == RP_BOOT_NONE ? "no override"
		                                            : "another device");
		json_object_set_new(o, "bmc_ok", json_true());
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
	o = jobs_outcome(w, "succeeded");
	json_object_set_new(o, "result",
	                    json_pack("{s:s, s:b, s:s, s:o}", "device", device, "persistent",
	                              got.persistent, "mode",
	                              got.uefi < 0 ? "unknown"
	                              : got.uefi   ? "uefi"
	                                           : "legacy",
	                              "warnings", warnings));
	json_object_set_new(o, "bmc_ok", json_true());
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

static json_t *
run_verify(struct work *w, struct rp_bmc *b)
{
	json_t *node = json_object_get(w->claim, "node"), *checks = json_array(), *identity, *o;
	json_t *o_bmc;
	const char *serial = json_string_value(json_object_get(node, "serial"));
	const char *uuid = json_string_value(json_object_get(node, "system_uuid"));
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
	if (serial == NULL)
		json_array_append_new(checks, json_pack("{s:s, s:s, s:s}", "check", "serial",
		                                        "status", "skipped", "reason",
		                                        "node has no enrolled serial"));
	else if (id.serial[0] == '\0')
		json_array_append_new(checks,
		                      json_pack("{s:s, s:s, s:s}", "check", "serial", "status",
		                                "skipped", "reason", "the BMC reports no serial"));
	else if (text_same(serial, id.serial))
		json_array_append_new(checks,
		                      json_pack("{s:s, s:s}", "check", "serial", "status", "ok"));
	else {
		json_array_append_new(checks, json_pack("{s:s, s:s, s:s, s:s}", "check", "serial",
		                                        "status", "mismatch", "enrolled", serial,
		                                        "reported", id.serial));
		snprintf(mismatch, sizeof mismatch, "serial: enrolled %s, BMC reports %s", serial,
		         id.serial);
	}
	if (uuid == NULL)
		json_array_append_new(checks, json_pack("{s:s, s:s, s:s}", "check", "uuid",
		                                        "status", "skipped", "reason",
		                                        "node has no enrolled system_uuid"));
	else if (id.uuid[0] == '\0')
		json_array_append_new(checks,
		                      json_pack("{s:s, s:s, s:s}", "check", "uuid", "status",
		                                "skipped", "reason", "the BMC reports no UUID"));
	else if (uuid_same(uuid, id.uuid))
		json_array_append_new(checks,
		                      json_pack("{s:s, s:s}", "check", "uuid", "status", "ok"));
	else {
		size_t n = strlen(mismatch);

		json_array_append_new(checks,
		                      json_pack("{s:s, s:s, s:s, s:s}", "check", "uuid", "status",
		                                "mismatch", "enrolled", uuid, "reported", id.uuid));
		snprintf(mismatch + n, sizeof mismatch - n, "%suuid: enrolled %s, BMC reports %s",
		         n ? "; " : "", uuid, id.uuid);
	}
	if (mismatch[0]) {
		o = jobs_outcome(w, "failed");
		jobs_set_error(o, "identity_mismatch",
		               "the BMC at this address is not the enrolled machine (%s): a "
		               "swapped cable or "
		               "a wrong BMC address?",
		               mismatch);
	} else {
		o = jobs_outcome(w, "succeeded");
	}
	json_object_set_new(o, "result",
	                    json_pack("{s:O, s:s, s:o}", "identity", identity, "power",
	                              rp_power_name(p), "checks", checks));
	/* The IPMI quirks this session needed: found now, or as the options name them. */
	o_bmc = json_object_get(w->claim, "bmc");
	if (!strcmp(json_string_value(json_object_get(o_bmc, "driver")) ?: "", "ipmi")) {
		json_t *res = json_object_get(o, "result"), *quirks = NULL;
		json_t *conf = json_object_get(json_object_get(o_bmc, "options"), "workarounds");

		if (rp_bmc_detected_workarounds(b, &quirks) == 1)
			json_object_set_new(res, "workarounds_detected", json_true());
		else
			quirks = json_is_array(conf) ? json_deep_copy(conf) : json_array();
		json_object_set_new(res, "workarounds", quirks);
	}
	json_object_set_new(o, "identity", identity);
	json_object_set_new(o, "power", json_string(rp_power_name(p)));
	json_object_set_new(o, "bmc_ok", json_true());
	return o;
}

/* ---- Workers ----------------------------------------------------------------------- */

static json_t *
run(struct work *w)
{
	struct rp_bmc_target t;
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	json_t *o;

	if (!strcmp(w->type, "steps"))
		return jobs_run_steps(w);
	if (w->lane == LANE_SSH)
		return jobs_run_provision(w);
	if (rp_bmc_target_from_json(
	            json_object_get(w->claim, "bmc"),
	            json_string_value(json_object_get(json_object_get(w->claim, "node"), "uuid")),
	            &t, &err) < 0)
		return jobs_bmc_failure(w, &err, 0);
	b = rp_bmc_open(&t, &err);
	explicit_bzero(t.password, sizeof t.password);
	if (b == NULL)
		return jobs_bmc_failure(w, &err, 1);
	jobs_bmc_learned(w->j, json_object_get(w->claim, "node"), json_object_get(w->claim, "bmc"),
	                 b);
	if (!strcmp(w->type, "power"))
		o = run_power(w, b);
	else if (!strcmp(w->type, "boot"))
		o = run_boot(w, b);
	else if (!strcmp(w->type, "verify"))
		o = run_verify(w, b);
	else if (!strcmp(w->type, "firmware_refresh") || !strcmp(w->type, "bios_apply") ||
	         !strcmp(w->type, "firmware_update"))
		o = jobs_run_firmware(w, b);
	else if (!strcmp(w->type, "acceptance"))
		o = jobs_run_acceptance(w, b);
	else {
		o = jobs_outcome(w, "failed");
		jobs_set_error(o, "unknown_type", "no runner for job type '%s'", w->type);
	}
	rp_bmc_close(b);
	return o;
}

static void
work_free(struct work *w)
{
	json_decref(w->claim);
	free(w);
}

static void *
worker(void *arg)
{
	struct lane *l = arg;
	struct rp_jobs *j = l->j;

	for (;;) {
		struct work *w, **pp;
		json_t *o;

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
		if (o)
			json_array_append_new(j->done, o);
		l->inflight--;
		kick_locked(j);
		pthread_mutex_unlock(&j->mu);
		work_free(w);
	}
}

/* ---- Scheduler --------------------------------------------------------------------- */

/* Record outcomes; the database may be busy for a moment, never lose them. */
static void
record(struct rp_jobs *j, json_t *done)
{
	enum rp_err last = RP_ERR_OK;
	int tries, storage;

	for (tries = 0; tries < 50; tries++) {
		enum rp_err e = rp_store_jobs_finish(j->st, done, (int)j->o.fault_threshold);

		if (e == RP_ERR_OK)
			return;
		/* Once per kind of failure, not per try. */
		if (e != last)
			rp_log_warn("jobs: recording %zu jobs_outcome(s) failed (%s); retrying",
			            json_array_size(done), rp_err_message(e));
		last = e;
		/* A full or read-only disk takes an operator: back off longer (50 tries: ~50 s). */
		storage = e == RP_ERR_STORAGE_FULL || e == RP_ERR_STORAGE_READONLY ||
		          e == RP_ERR_STORAGE_IO;
		jobs_sleep_ms(storage ? 1000 : 100);
	}
	rp_log_error("jobs: could not record %zu jobs_outcome(s); they stay running and will be "
	             "recovered at the next start",
	             json_array_size(done));
}

static void
claim(struct rp_jobs *j, int lane, int free_slots)
{
	struct lane *l = &j->lanes[lane];
	json_t *claimed = NULL, *c;
	size_t i;

	if (rp_store_jobs_claim(j->st, j->owner, lane == LANE_SSH, free_slots, LEASE_MS,
	                        &claimed) != RP_ERR_OK)
		return;
	json_array_foreach(claimed, i, c)
	{
		struct work *w = calloc(1, sizeof *w);

		if (w == NULL)
			break; /* stays running; recovered at the next start */
		w->j = j;
		w->lane = lane;
		w->id = json_integer_value(json_object_get(c, "id"));
		w->node_id = json_integer_value(json_object_get(json_object_get(c, "node"), "id"));
		snprintf(w->uuid, sizeof w->uuid, "%s",
		         json_string_value(json_object_get(c, "uuid")));
		snprintf(w->type, sizeof w->type, "%s",
		         json_string_value(json_object_get(c, "type")));
		snprintf(w->node_name, sizeof w->node_name, "%s",
		         json_string_value(json_object_get(json_object_get(c, "node"), "name")));
		/* Interrupted before it sent anything: it simply runs. After sending: it verifies.
		 */
		w->recover = json_is_true(json_object_get(c, "recover")) &&
		             json_is_true(json_object_get(c, "sent"));
		w->attempts = (int)json_integer_value(json_object_get(c, "attempts"));
		w->max_attempts = (int)json_integer_value(json_object_get(c, "max_attempts"));
		w->claim = json_incref(c);
		pthread_mutex_lock(&j->mu);
		w->next = l->queue;
		l->queue = w;
		l->inflight++;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&j->mu);
	}
	json_decref(claimed);
}

static void *sweep_main(void *arg);

static void *
scheduler(void *arg)
{
	struct rp_jobs *j = arg;

	for (;;) {
		json_t *done;
		int free_slots[LANES], stop, start_sweep = 0, lane;

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
		j->done = json_array();
		for (lane = 0; lane < LANES; lane++)
			free_slots[lane] = (int)j->lanes[lane].nworkers - j->lanes[lane].inflight;
		if (!j->sweeping && !stop &&
		    (j->sweep_wanted ||
		     (j->o.sweep_interval_s && rp_time_now_ms() >= j->next_sweep_ms))) {
			j->sweeping = 1;
			j->sweep_wanted = 0;
			start_sweep = 1;
		}
		pthread_mutex_unlock(&j->mu);
		if (json_array_size(done) > 0)
			record(j, done);
		json_decref(done);
		if (stop)
			return NULL;
		if (start_sweep) {
			if (j->sweep_started)
				pthread_join(j->sweeper, NULL);
			j->sweep_started = pthread_create(&j->sweeper, NULL, sweep_main, j) == 0;
			if (!j->sweep_started) {
				pthread_mutex_lock(&j->mu);
				j->sweeping = 0;
				pthread_mutex_unlock(&j->mu);
			}
		}
		for (lane = 0; lane < LANES; lane++)
			if (free_slots[lane] > 0)
				claim(j, lane, free_slots[lane]);
	}
}

/* ---- Power sweep ------------------------------------------------------------------- */

struct sweep {
	struct rp_jobs *j;
	json_t *targets, *readings;
	size_t next;
	pthread_mutex_t mu;
};

static void *
sweep_worker(void *arg)
{
	struct sweep *s = arg;

	for (;;) {
		struct rp_bmc_target t;
		struct rp_bmc_err err = {0};
		struct rp_bmc *b;
		enum rp_power p;
		json_t *node, *r;
		size_t i;

		pthread_mutex_lock(&s->mu);
		i = s->next++;
		pthread_mutex_unlock(&s->mu);
		if (i >= json_array_size(s->targets) ||
		    __atomic_load_n(&s->j->stop, __ATOMIC_RELAXED))
			return NULL;
		node = json_array_get(s->targets, i);
		r = json_pack("{s:O}", "id", json_object_get(node, "id"));
		if (rp_bmc_target_from_json(json_object_get(node, "bmc"),
		                            json_string_value(json_object_get(node, "uuid")), &t,
		                            &err) == 0 &&
		    (b = rp_bmc_open(&t, &err)) != NULL) {
			jobs_bmc_learned(s->j, node, json_object_get(node, "bmc"), b);
			if (rp_bmc_power_get(b, &p, &err) == 0) {
				json_object_set_new(r, "ok", json_true());
				json_object_set_new(r, "power", json_string(rp_power_name(p)));
			}
			rp_bmc_close(b);
		}
		explicit_bzero(t.password, sizeof t.password);
		if (json_object_get(r, "ok") == NULL) {
			json_object_set_new(r, "ok", json_false());
			json_object_set_new(r, "error", json_string(err.msg));
		}
		pthread_mutex_lock(&s->mu);
		json_array_set_new(s->readings, i, r);
		pthread_mutex_unlock(&s->mu);
	}
}

static void *
sweep_main(void *arg)
{
	struct rp_jobs *j = arg;
	struct sweep s = {.j = j};
	pthread_t *threads = NULL;
	int64_t t0 = rp_time_now_ms(), m0 = rp_time_mono_ns(), read_ms = 0;
	size_t n, k, i, ok = 0;
	int changed = 0, total_changed = 0;
	char ts0[RP_TIME_BUF], ts1[RP_TIME_BUF];

	pthread_mutex_init(&s.mu, NULL);
	if (rp_store_power_targets(j->st, &s.targets) != RP_ERR_OK)
		goto out;
	n = json_array_size(s.targets);
	s.readings = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(s.readings, json_null());
	k = n < j->o.sweep_concurrency ? n : j->o.sweep_concurrency;
	threads = calloc(k ? k : 1, sizeof *threads);
	for (i = 0; threads && i < k; i++)
		if (pthread_create(&threads[i], NULL, sweep_worker, &s) != 0)
			break;
	k = i;
	if (k == 0 && n > 0)
		sweep_worker(&s); /* no threads to spare: read them one by one */
	for (i = 0; i < k; i++)
		pthread_join(threads[i], NULL);
	read_ms = (rp_time_mono_ns() - m0) / 1000000;
	/* Record in chunks so one sweep of a large fleet never holds the write lock for long. */
	for (i = 0; i < n; i += 1000) {
		json_t *chunk = json_array();
		size_t m;

		for (m = i; m < n && m < i + 1000; m++) {
			json_t *r = json_array_get(s.readings, m);

			if (json_is_object(r)) {
				json_array_append(chunk, r);
				ok += json_is_true(json_object_get(r, "ok"));
			}
		}
		if (rp_store_power_record(j->st, chunk, (int)j->o.fault_threshold, &changed) ==
		    RP_ERR_OK)
			total_changed += changed;
		json_decref(chunk);
	}
	pthread_mutex_lock(&j->mu);
	json_decref(j->last_sweep);
	j->last_sweep = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:i}", "started_at",
	                          rp_time_format(t0, ts0), "finished_at",
	                          rp_time_format(rp_time_now_ms(), ts1), "duration_ms",
	                          (json_int_t)((rp_time_mono_ns() - m0) / 1000000), "read_ms",
	                          (json_int_t)read_ms, "nodes", (json_int_t)n, "ok", (json_int_t)ok,
	                          "failed", (json_int_t)(n - ok), "changed", total_changed);
	pthread_mutex_unlock(&j->mu);
	rp_log_info("power sync: %zu node(s), %zu answered, %d change(s), %lld ms", n, ok,
	            total_changed, (long long)((rp_time_mono_ns() - m0) / 1000000));
out:
	free(threads);
	json_decref(s.targets);
	json_decref(s.readings);
	pthread_mutex_destroy(&s.mu);
	pthread_mutex_lock(&j->mu);
	j->sweeping = 0;
	j->next_sweep_ms = rp_time_now_ms() + (int64_t)j->o.sweep_interval_s * 1000;
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
	snprintf(j->owner, sizeof j->owner, "rackpilotd/%d", (int)getpid());
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->kick_cv, NULL);
	for (lane = 0; lane < LANES; lane++) {
		j->lanes[lane].j = j;
		pthread_cond_init(&j->lanes[lane].cv, NULL);
	}
	j->done = json_array();
	/* The first sweep waits a little, so a fresh start is not a burst of BMC traffic. */
	j->next_sweep_ms = rp_time_now_ms() + 5000;
	e = rp_store_jobs_recover(st, &recovered);
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
	*out = j;
	return 0;
fail:
	json_decref(j->done);
	for (lane = 0; lane < LANES; lane++)
		pthread_cond_destroy(&j->lanes[lane].cv);
	pthread_cond_destroy(&j->kick_cv);
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
	pthread_mutex_unlock(&j->mu);
	for (lane = 0; lane < LANES; lane++)
		for (i = 0; i < j->lanes[lane].nworkers; i++)
			pthread_join(j->lanes[lane].workers[i], NULL);
	if (j->scheduler)
		pthread_join(j->scheduler, NULL);
	if (j->sweep_started)
		pthread_join(j->sweeper, NULL);
	/* Outcomes of jobs that finished while stopping are still worth recording. */
	if (json_array_size(j->done) > 0)
		record(j, j->done);
	for (lane = 0; lane < LANES; lane++) {
		for (w = j->lanes[lane].queue; w; w = n) {
			n = w->next;
			work_free(w);
		}
		free(j->lanes[lane].workers);
		pthread_cond_destroy(&j->lanes[lane].cv);
	}
	json_decref(j->done);
	json_decref(j->last_sweep);
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->kick_cv);
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
rp_jobs_provision(struct rp_jobs *j, const char *node, const char *action, json_t *job,
                  const char *actor, json_t **out, json_t **detail)
{
	enum rp_err e = rp_store_provision(j->st, node, action, job, actor, out, detail);

	if (e == RP_ERR_OK)
		kick(j);
	return e;
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

enum rp_err
rp_jobs_sweep_now(struct rp_jobs *j)
{
	enum rp_err e = RP_ERR_OK;

	pthread_mutex_lock(&j->mu);
	if (j->sweeping || j->sweep_wanted)
		e = RP_ERR_CONFLICT;
	else
		j->sweep_wanted = 1;
	kick_locked(j);
	pthread_mutex_unlock(&j->mu);
	return e;
}

json_t *
rp_jobs_sweep_status(struct rp_jobs *j)
{
	json_t *s;

	pthread_mutex_lock(&j->mu);
	s = json_pack("{s:i, s:b, s:O?}", "interval_s", (int)j->o.sweep_interval_s, "running",
	              j->sweeping || j->sweep_wanted, "last", j->last_sweep);
	pthread_mutex_unlock(&j->mu);
	return s;
}
