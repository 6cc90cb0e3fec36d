/* What every job runner shares: outcomes, the claim's parts, the BMC session, the one
 * power wait and the one power-to-boot rule. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bmc/bmc.h"
#include "internal.h"
#include "util/util.h"

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

struct rp_job_outcome *
jobs_outcome(struct work *w, enum rp_job_end state)
{
	struct rp_job_outcome *o = rp_store_outcome_new(w->id, state);

	/* Without it the job would stay running until the next start: better to stop now. */
	if (o == NULL) {
		rp_log_error("jobs: out of memory recording job %lld", (long long)w->id);
		abort();
	}
	return o;
}

struct rp_job_outcome *
jobs_later(struct work *w, unsigned ms)
{
	struct rp_job_outcome *o = jobs_outcome(w, RP_JOB_END_RETRY);

	o->wait = 1;
	o->not_before = rp_time_now_ms() + ms;
	return o;
}

void
jobs_set_error(struct rp_job_outcome *o, const char *code, const char *fmt, ...)
{
	char msg[4096]; /* room for a console's last lines (a deploy's first boot) */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	free(o->error_code);
	free(o->error);
	o->error_code = strdup(code);
	o->error = strdup(msg);
}

struct rp_job_outcome *
jobs_failed(struct work *w, const char *code, const char *fmt, ...)
{
	struct rp_job_outcome *o = jobs_outcome(w, RP_JOB_END_FAILED);
	char msg[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	jobs_set_error(o, code, "%s", msg);
	return o;
}

void
jobs_set_result(struct rp_job_outcome *o, json_t *r)
{
	json_decref(o->result);
	o->result = r;
}

void
jobs_set_power(struct rp_job_outcome *o, const char *power)
{
	snprintf(o->power, sizeof o->power, "%s", power ? power : "");
}

struct rp_job_outcome *
jobs_interrupted(struct work *w)
{
	struct rp_job_outcome *o;

	/* Shutting down: leave the job running in the store; the next start recovers it. */
	if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED))
		return NULL;
	o = jobs_outcome(w, RP_JOB_END_CANCELLED);
	jobs_set_error(o, "cancelled", "cancelled while in progress");
	return o;
}

/* ---- The claim ----------------------------------------------------------------------- */

json_t *
jobs_params(struct work *w)
{
	return w->claim->params;
}

const char *
jobs_node_uuid(struct work *w)
{
	return w->claim->node.uuid;
}

/* ---- BMC sessions -------------------------------------------------------------------- */

int
jobs_bmc_target(const struct rp_store_bmc *b, const char *node_uuid, struct rp_bmc_target *t,
                struct rp_bmc_err *err)
{
	json_t *bmc;
	int rc;

	/* Everything but the password goes through the driver's own parsing; the password
	 * never enters jansson. */
	bmc = json_pack("{s:s?, s:s?, s:I, s:s?, s:b}", "driver", b->driver, "address", b->address,
	                "port", (json_int_t)b->port, "username", b->username, "tls_verify",
	                b->tls_verify);
	if (bmc && b->options)
		json_object_set(bmc, "options", b->options);
	rc = rp_bmc_target_from_json(bmc, node_uuid, t, err);
	json_decref(bmc);
	if (rc == 0)
		snprintf(t->password, sizeof t->password, "%s", b->password ? b->password : "");
	return rc;
}

struct rp_bmc *
jobs_bmc_open(struct work *w, struct rp_bmc_err *err)
{
	struct rp_bmc_target t;
	struct rp_bmc *b;

	if (jobs_bmc_target(&w->claim->bmc, w->claim->node.uuid, &t, err) < 0) {
		explicit_bzero(t.password, sizeof t.password);
		return NULL;
	}
	b = rp_bmc_open(&t, err);
	explicit_bzero(t.password, sizeof t.password);
	if (b != NULL)
		jobs_bmc_learned(w->j, w->claim->node.name, w->claim->node.uuid,
		                 w->claim->bmc.address, w->claim->bmc.port, b);
	return b;
}

/* Persist the IPMI workarounds b found at open, so the next session opens directly. Its own
 * transaction, after the BMC answered and before any other BMC call; a failure is logged and
 * the job goes on (it has a working session either way). */
void
jobs_bmc_learned(struct rp_jobs *j, const char *name, const char *uuid, const char *address,
                 unsigned port, struct rp_bmc *b)
{
	json_t *names = NULL;
	enum rp_err e;

	if (name == NULL)
		name = "?";
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
struct rp_job_outcome *
jobs_bmc_failure(struct work *w, const struct rp_bmc_err *err, int may_retry)
{
	char code[40];
	struct rp_job_outcome *o;

	snprintf(code, sizeof code, "bmc_%s", rp_bmc_err_name(err->kind));
	if (may_retry && rp_bmc_err_transient(err->kind) && w->attempts < w->max_attempts) {
		int64_t delay = (int64_t)w->j->o.retry_base_ms << (w->attempts - 1);

		if (delay > 60000)
			delay = 60000;
		o = jobs_outcome(w, RP_JOB_END_RETRY);
		o->not_before = rp_time_now_ms() + delay;
		jobs_set_error(o, code, "%s (attempt %d of %d; retrying in %lld ms)", err->msg,
		               w->attempts, w->max_attempts, (long long)delay);
	} else {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		if (rp_bmc_err_transient(err->kind) && may_retry)
			jobs_set_error(o, code, "%s (gave up after %d attempts)", err->msg,
			               w->attempts);
		else
			jobs_set_error(o, code, "%s", err->msg);
	}
	/* Only contact failures count against the BMC's health, not refusals of a request. */
	if (err->kind == RP_BMC_UNREACHABLE || err->kind == RP_BMC_TIMEOUT ||
	    err->kind == RP_BMC_AUTH || err->kind == RP_BMC_TLS)
		o->bmc_ok = 0;
	return o;
}

/* ---- Power --------------------------------------------------------------------------- */

int
jobs_wait_power(struct work *w, struct rp_bmc *b, enum rp_power want, unsigned timeout_s,
                enum rp_power *seen, struct rp_bmc_err *err)
{
	int64_t until = rp_time_mono_ns() + (int64_t)timeout_s * 1000000000;
	int errors = 0;

	for (;;) {
		enum rp_power p = RP_POWER_UNKNOWN;

		if (rp_bmc_power_get(b, &p, err) == 0) {
			if (seen)
				*seen = p;
			errors = 0;
			if (p == want)
				return 0;
		} else if (!rp_bmc_err_transient(err->kind) || ++errors > JOBS_POWER_ERRORS) {
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

enum rp_power_action
jobs_boot_action(enum rp_power now)
{
	/* A cycle of a machine that is off fails on many BMCs; one in a transition (Redfish
	 * PoweringOn/Off) is cycled so that it surely boots again from what is set now. */
	return now == RP_POWER_OFF ? RP_POWER_ACT_ON : RP_POWER_ACT_CYCLE;
}

int
jobs_boot_now(struct rp_bmc *b, struct rp_bmc_err *err)
{
	enum rp_power now = RP_POWER_UNKNOWN;

	if (rp_bmc_power_get(b, &now, err) < 0)
		return -1;
	return rp_bmc_power_set(b, jobs_boot_action(now), err);
}

struct rp_job_outcome *
jobs_power_admit(struct work *w)
{
	json_t *params = jobs_params(w);
	struct rp_admit_opts ao = {.stagger = w->j->o.power_on_stagger,
	                           .stagger_ms = w->j->o.power_on_stagger_ms};
	struct rp_admit a;
	struct rp_job_outcome *o;
	enum rp_err e;

	e = rp_store_power_admit(
	        w->j->st, w->id, jobs_node_uuid(w), json_is_true(json_object_get(params, "force")),
	        json_string_value(json_object_get(params, "forced_by")) ?: "rackpilotd", &ao, &a);
	if (e != RP_ERR_OK) {
		struct rp_bmc_err busy = {RP_BMC_BUSY,
		                          "could not take the node's power-on admission "
		                          "in the database"};

		/* Nothing was sent: safe to retry like any transient failure, within its limit. */
		return jobs_bmc_failure(w, &busy, 1);
	}
	if (a.admitted) {
		if (a.note[0])
			rp_log_warn("job %s: %s", w->uuid, a.note);
		return NULL;
	}
	if (a.never)
		return jobs_failed(w, "over_budget",
		                   "%s: raise the rack's budget or power_limit_pct, "
		                   "or power it on with force (admin)",
		                   a.why);
	o = jobs_later(w, a.retry_ms > 0 && a.retry_ms < 60000 ? (unsigned)a.retry_ms : 1000);
	jobs_set_error(o, "waiting", "%s", a.why);
	return o;
}

void
jobs_power_release(struct work *w)
{
	if (rp_store_power_release(w->j->st, jobs_node_uuid(w)) != RP_ERR_OK)
		rp_log_warn("job %s: could not release the node's power-on admission; it counts "
		            "in its rack until it expires",
		            w->uuid);
}

void
jobs_power_started(struct work *w)
{
	if (rp_store_power_started(w->j->st, jobs_node_uuid(w)) != RP_ERR_OK)
		rp_log_warn("job %s: could not record that the node's power-on came back; its "
		            "admission counts as in flight until it expires",
		            w->uuid);
}
