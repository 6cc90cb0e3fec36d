/* The BMC's own upkeep: the identify light, a BMC reset that waits for the BMC to answer again,
 * and a credential rotation that can never lock Rackpilot out. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- Identify ------------------------------------------------------------------------ */

#define PHASE_LIT "lit"

/* Turn the light on or off and read it back. A light the BMC cannot time out itself stays
 * on; the job then waits (queued, phase "lit") until its time is up and turns it off, unless
 * a newer identify request for the node took the light over meanwhile. */
struct rp_job_outcome *
jobs_run_identify(struct work *w, struct rp_bmc *b)
{
	json_t *p = jobs_params(w);
	int on = json_is_true(json_object_get(p, "on"));
	unsigned seconds = (unsigned)json_integer_value(json_object_get(p, "seconds"));
	struct rp_bmc_err err = {0};
	struct rp_job_outcome *o;
	int timed = 0, lit = -1, newer = 0, expired = 0;

	if (w->claim->phase && !strcmp(w->claim->phase, PHASE_LIT)) {
		if (rp_store_job_superseded(w->j->st, w->id, &newer) != RP_ERR_OK)
			return jobs_fw_store_trouble(w, "newer identify requests");
		if (newer) {
			o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
			jobs_set_result(o, json_pack("{s:b, s:I, s:b}", "on", 1, "seconds",
			                             (json_int_t)seconds, "superseded", 1));
			return o;
		}
		on = 0; /* its time is up */
		expired = 1;
	}
	if (rp_bmc_identify_set(b, on, seconds, &timed, &err) < 0 ||
	    rp_bmc_identify_get(b, &lit, &err) < 0) {
		if (err.kind == RP_BMC_UNSUPPORTED)
			return jobs_failed(w, "unsupported", "the BMC has no identify light: %s",
			                   err.msg);
		return jobs_bmc_failure(w, &err, 1);
	}
	if (lit >= 0 && lit != on) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "identify_mismatch",
		               "turned the identify light %s, but the BMC "
		               "reads it back %s",
		               on ? "on" : "off", lit ? "on" : "off");
		o->bmc_ok = 1;
		return o;
	}
	if (on && seconds > 0 && !timed) {
		if (rp_store_job_phase(w->j->st, w->id, PHASE_LIT) != RP_ERR_OK)
			return jobs_fw_store_trouble(w, "the identify job's phase");
		o = jobs_later(w, seconds * 1000u);
		jobs_set_error(o, "lit", "identify light on; off again in %u s", seconds);
		o->bmc_ok = 1;
		return o;
	}
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:b, s:o, s:b, s:o, s:b}", "on", on, "seconds",
	                             seconds ? json_integer(seconds) : json_null(), "timed_by_bmc",
	                             timed, "lit", lit < 0 ? json_null() : json_boolean(lit),
	                             "expired", expired));
	o->bmc_ok = 1;
	return o;
}

/* ---- BMC reset ----------------------------------------------------------------------- */

#define PHASE_RESTARTING "restarting"
#define RESET_POLL_MS    1000
#define RESET_GRACE_MS   3000 /* before the first look: a BMC may answer, then go down */
#define RESET_TIMEOUT_S  300

/* Send the reset once (sent_at first, phase "restarting" at the time of the reset), then, after
 * a grace for the BMC to go down, look every second until it answers with its identity again
 * (a Redfish look rides out a short outage in its own retries) or timeout_s after the reset
 * passes. A job recovered after a crash only looks. */
static struct rp_job_outcome *
reset_look(struct work *w)
{
	json_t *p = jobs_params(w), *identity;
	unsigned timeout_s = json_is_integer(json_object_get(p, "timeout_s"))
	                             ? (unsigned)json_integer_value(json_object_get(p, "timeout_s"))
	                             : RESET_TIMEOUT_S;
	int64_t since = w->claim->phase_at, now = rp_time_now_ms();

	/* Its phase was not recorded with the sent mark (a stop between the two): the wait
	 * starts now, so that its timeout still ends it. */
	if (since <= 0) {
		if (rp_store_job_phase(w->j->st, w->id, PHASE_RESTARTING) != RP_ERR_OK)
			return jobs_fw_store_trouble(w, "the reset job's phase");
		since = now;
	}
	struct rp_bmc_identity id;
	struct rp_bmc_err err = {0};
	struct rp_job_outcome *o;
	struct rp_bmc *b;
	char ts[RP_TIME_BUF];

	if ((b = jobs_bmc_open(w, &err)) == NULL || rp_bmc_identity(b, &id, &err) < 0) {
		rp_bmc_close(b);
		if (err.kind == RP_BMC_AUTH || err.kind == RP_BMC_TLS ||
		    err.kind == RP_BMC_REJECTED) {
			o = jobs_failed(w, "bmc_after_reset",
			                "the BMC answers again but refuses the job: %s", err.msg);
			o->bmc_ok = 0;
			return o;
		}
		if (since > 0 && now - since > (int64_t)timeout_s * 1000) {
			o = jobs_failed(w, "bmc_unresponsive",
			                "the BMC did not answer within %u s of its reset: %s",
			                timeout_s, err.msg);
			o->bmc_ok = 0;
			return o;
		}
		o = jobs_later(w, RESET_POLL_MS);
		jobs_set_error(o, "restarting", "waiting for the BMC to answer again: %s", err.msg);
		return o;
	}
	rp_bmc_close(b);
	now = rp_time_now_ms(); /* a look may ride out the end of the outage in its retries */
	identity = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "serial", id.serial, "uuid", id.uuid,
	                     "manufacturer", id.manufacturer, "model", id.model, "bmc_firmware",
	                     id.bmc_firmware, "read_at", rp_time_format(now, ts));
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:O, s:I}", "identity", identity, "back_after_ms",
	                             (json_int_t)(since > 0 ? now - since : 0)));
	o->identity = identity;
	o->bmc_ok = 1;
	return o;
}

struct rp_job_outcome *
jobs_run_bmc_reset(struct work *w, struct rp_bmc *unused)
{
	struct rp_bmc_err err = {0};
	struct rp_job_outcome *o;
	struct rp_bmc *b;

	(void)unused;
	if (w->claim->sent)
		return reset_look(w);
	if ((b = jobs_bmc_open(w, &err)) == NULL)
		return jobs_bmc_failure(w, &err, err.kind != RP_BMC_REJECTED);
	if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK ||
	    rp_store_job_phase(w->j->st, w->id, PHASE_RESTARTING) != RP_ERR_OK) {
		rp_bmc_close(b);
		return jobs_fw_store_trouble(w, "the reset's sent mark");
	}
	if (rp_bmc_reset(b, &err) < 0 && err.kind != RP_BMC_TIMEOUT &&
	    err.kind != RP_BMC_UNREACHABLE) {
		/* It answered, and not with a reset: nothing happened. */
		rp_bmc_close(b);
		if (err.kind == RP_BMC_UNSUPPORTED)
			return jobs_failed(w, "unsupported", "the BMC cannot be reset this way: %s",
			                   err.msg);
		o = jobs_failed(w, "bmc_reset_refused", "the BMC refused the reset: %s", err.msg);
		o->bmc_ok = 1;
		return o;
	}
	rp_bmc_close(b);
	o = jobs_later(w, RESET_GRACE_MS);
	jobs_set_error(o, "restarting", "reset sent; waiting for the BMC to answer again");
	return o;
}

/* ---- Credential rotation ------------------------------------------------------------- */

/* Open the node's BMC with password instead of the stored one, and prove it with a read
 * (IPMI opens its session at open; Redfish logs in at the first request). */
static int
try_password(struct work *w, const char *password, struct rp_bmc_err *err)
{
	struct rp_store_bmc sb = w->claim->bmc;
	struct rp_bmc_target t;
	struct rp_bmc *b = NULL;
	enum rp_power p;
	int rc = -1;

	sb.password = (char *)password;
	if (jobs_bmc_target(&sb, w->claim->node.uuid, &t, err) == 0 &&
	    (b = rp_bmc_open(&t, err)) != NULL && rp_bmc_power_get(b, &p, err) == 0)
		rc = 0;
	rp_bmc_close(b);
	explicit_bzero(t.password, sizeof t.password);
	return rc;
}

/* A BMC's words may quote either password (a hostile one echoes what it was sent): both become
 * "***" in the message a job keeps. */
static void
scrub2(char *msg, const char *a, const char *b)
{
	const char *pw[2] = {a, b};
	int k;

	for (k = 0; k < 2; k++) {
		size_t n = pw[k] ? strlen(pw[k]) : 0;
		char *p;

		if (n < 3)
			continue;
		while ((p = strstr(msg, pw[k])) != NULL) {
			memcpy(p, "***", 3);
			memmove(p + 3, p + n, strlen(p + n) + 1);
		}
	}
}

static int
credential_error(enum rp_bmc_errkind k)
{
	return k == RP_BMC_AUTH;
}

/* The length a refusal names as the most the BMC takes ("8 to 16 characters", "at most 16",
 * "maximum 16"), else 16 (IPMI 1.5's length, which every BMC takes); never more than was
 * tried minus one, never under 8. */
static unsigned
learned_length(const char *msg, unsigned tried)
{
	static const char *const cues[] = {" to ", "at most ", "maximum ", "max ", "up to ", NULL};
	unsigned best = 0;
	size_t i;

	for (i = 0; cues[i]; i++) {
		const char *p = msg;

		while ((p = strstr(p, cues[i])) != NULL) {
			char *end;
			long v = strtol(p + strlen(cues[i]), &end, 10);

			p += strlen(cues[i]);
			if (end != p && v >= 8 && v < (long)tried && (unsigned)v > best)
				best = (unsigned)v;
		}
	}
	if (best == 0)
		best = tried > 16 ? 16 : tried - 1;
	return best < 8 ? 8 : best;
}

static struct rp_job_outcome *
rotated(struct work *w, const char *how, int retried)
{
	struct rp_job_outcome *o;

	if (rp_store_bmc_pending_settle(w->j->st, w->claim->node.uuid, 1, "rackpilotd", how) !=
	    RP_ERR_OK)
		return jobs_fw_store_trouble(w, "the new BMC password");
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:b, s:s, s:b}", "rotated", 1, "verified", how,
	                             "policy_retry", retried));
	o->bmc_ok = 1;
	return o;
}

/* Set a new password and keep exactly one that works:
 * 1. A pending password (an interrupted rotation's, or an admin's) is tried first: the BMC may
 *    have it already. It works: it becomes the stored one.
 * 2. The stored one opens the BMC (else: neither works, nothing is changed, the job fails and
 *    both stay stored for the next try).
 * 3. Without a pending one, a new one is generated by the class's policy and stored as pending
 *    before it is sent.
 * 4. Sent; refused for its length or characters: once more with a compatible one (the length
 *    the refusal names, letters and digits only).
 * 5. A new session with it proves it: it becomes the stored one. Else the stored one is tried
 *    again: it still works, the pending one is dropped and the job fails (the BMC did not take
 *    the change); neither works: a transient failure, both kept, retried. */
struct rp_job_outcome *
jobs_run_bmc_rotate(struct work *w, struct rp_bmc *unused)
{
	const char *node = w->claim->node.uuid, *stored = w->claim->bmc.password;
	struct rp_bmc_err err = {0}, perr = {0};
	struct rp_job_outcome *o = NULL;
	struct rp_bmc *b = NULL;
	json_t *policy = NULL;
	char *pending = NULL, fresh[RP_BMC_PASSWORD_MAX + 1] = "";
	size_t plen = 0;
	unsigned length;
	int symbols, retried = 0;
	enum rp_err e;

	(void)unused;
	e = rp_store_bmc_pending_get(w->j->st, node, &pending, &plen);
	if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		return jobs_fw_store_trouble(w, "the pending BMC password");
	if (pending) {
		if (try_password(w, pending, &perr) == 0) {
			o = rotated(w, "pending", 0);
			goto out;
		}
		if (!credential_error(perr.kind)) {
			scrub2(perr.msg, stored, pending);
			scrub2(err.msg, stored, pending);
			o = jobs_bmc_failure(w, &perr, 1);
			goto out;
		}
	}
	if ((b = jobs_bmc_open(w, &err)) == NULL) {
		if (credential_error(err.kind) && pending) {
			scrub2(perr.msg, stored, pending);
			scrub2(err.msg, stored, pending);
			o = jobs_failed(
			        w, "bmc_locked_out",
			        "neither the stored nor the pending BMC password works "
			        "(pending: %s; stored: %s); both are kept: set the right one "
			        "with PATCH /v1/nodes/{node} bmc.password",
			        perr.msg, err.msg);
			o->bmc_ok = 0;
			goto out;
		}
		scrub2(perr.msg, stored, pending);
		scrub2(err.msg, stored, pending);
		o = jobs_bmc_failure(w, &err, err.kind != RP_BMC_REJECTED);
		goto out;
	}
	if (pending == NULL) {
		if (rp_store_bmc_password_policy(w->j->st, node, &policy) != RP_ERR_OK) {
			o = jobs_fw_store_trouble(w, "the class's password policy");
			goto out;
		}
		length = (unsigned)json_integer_value(json_object_get(policy, "length"));
		symbols = json_is_true(json_object_get(policy, "symbols"));
		if (rp_password_generate(fresh, length, symbols) < 0 ||
		    rp_store_bmc_pending_set(w->j->st, node, fresh, "rackpilotd") != RP_ERR_OK) {
			o = jobs_fw_store_trouble(w, "the new BMC password");
			goto out;
		}
		pending = fresh;
		plen = strlen(fresh);
	}
	if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK) {
		o = jobs_fw_store_trouble(w, "the rotation's sent mark");
		goto out;
	}
	if (rp_bmc_password_set(b, pending, &err) < 0 && err.kind == RP_BMC_REJECTED &&
	    pending == fresh) {
		/* The BMC's policy: learn from its words, and try once with what every BMC takes.
		 */
		length = learned_length(err.msg, (unsigned)plen);
		rp_log_info("job %s: the BMC refused a %zu-character password (%s); trying %u "
		            "letters and digits",
		            w->uuid, plen, err.msg, length);
		if (rp_password_generate(fresh, length, 0) < 0 ||
		    rp_store_bmc_pending_set(w->j->st, node, fresh, "rackpilotd") != RP_ERR_OK) {
			o = jobs_fw_store_trouble(w, "the new BMC password");
			goto out;
		}
		plen = strlen(fresh);
		retried = 1;
		err = (struct rp_bmc_err){0};
		rp_bmc_password_set(b, pending, &err);
	}
	rp_bmc_close(b);
	b = NULL;
	if (err.kind == RP_BMC_REJECTED || err.kind == RP_BMC_UNSUPPORTED ||
	    err.kind == RP_BMC_AUTH) {
		/* Refused (its policy, no such command, the user may not change it): the stored
		 * password is still the BMC's. */
		scrub2(err.msg, stored, pending);
		(void)rp_store_bmc_pending_settle(w->j->st, node, 0, "rackpilotd", err.msg);
		scrub2(perr.msg, stored, pending);
		scrub2(err.msg, stored, pending);
		o = jobs_failed(w,
		                err.kind == RP_BMC_REJECTED      ? "password_rejected"
		                : err.kind == RP_BMC_UNSUPPORTED ? "unsupported"
		                                                 : "bmc_auth",
		                "the BMC refused the new password%s: %s",
		                retried ? " (also one of letters and digits only)" : "", err.msg);
		o->bmc_ok = 1;
		goto out;
	}
	/* Sent (or lost on the way): the BMC decides which one works now. */
	if (try_password(w, pending, &perr) == 0) {
		o = rotated(w, retried ? "new (policy retry)" : "new", retried);
		goto out;
	}
	if (credential_error(perr.kind) && try_password(w, stored ?: "", &err) == 0) {
		(void)rp_store_bmc_pending_settle(w->j->st, node, 0, "rackpilotd",
		                                  "the BMC kept its old password");
		scrub2(perr.msg, stored, pending);
		scrub2(err.msg, stored, pending);
		o = jobs_failed(w, "password_not_applied",
		                "the BMC accepted the new password but still takes only the old "
		                "one (%s)",
		                perr.msg);
		o->bmc_ok = 1;
		goto out;
	}
	if (credential_error(perr.kind) && credential_error(err.kind)) {
		scrub2(perr.msg, stored, pending);
		scrub2(err.msg, stored, pending);
		o = jobs_failed(w, "bmc_locked_out",
		                "after the change neither the new nor the old BMC password works "
		                "(new: %s; old: %s); both are kept, and the next rotation tries "
		                "them again",
		                perr.msg, err.msg);
		o->bmc_ok = 0;
		goto out;
	}
	/* Unknown for now (no answer): both kept; the retry starts with the pending one. */
	scrub2(perr.msg, stored, pending);
	scrub2(err.msg, stored, pending);
	o = jobs_bmc_failure(w, credential_error(perr.kind) ? &err : &perr, 1);
out:
	rp_bmc_close(b);
	json_decref(policy);
	if (pending && pending != fresh)
		rp_secrets_plain_free(pending, plen);
	explicit_bzero(fresh, sizeof fresh);
	return o;
}
