/*
 * Steps jobs: push a plan to the node's agent over SSH and follow it to the end.
 *
 * The agent reports each step over REST; the SSH channel carries the plan in and the log
 * out, and its exit status says what to do next. The store's step states are the truth a
 * resumed job starts from: after an SSH drop, a reboot or a restart of rackpilotd, the agent
 * skips what already succeeded (docs/agent-protocol.md).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "rackpilot/agent.h"

#define FLUSH_BYTES    (64 * 1024)
#define FLUSH_NS       (1000LL * 1000 * 1000)
#define REBOOT_POLL_MS 2000

struct run {
	struct work *w;
	struct rp_buf pending; /* output not yet in the store */
	int64_t flushed_ns;
	struct jobs_tail tail; /* the last bytes seen, for error messages */
};

void
jobs_tail_add(struct jobs_tail *t, const char *data, size_t len)
{
	size_t keep = len < JOBS_TAIL ? len : JOBS_TAIL;

	if (t->len + keep > JOBS_TAIL) {
		size_t drop = t->len + keep - JOBS_TAIL;

		memmove(t->data, t->data + drop, t->len - drop);
		t->len -= drop;
	}
	memcpy(t->data + t->len, data + len - keep, keep);
	t->len += keep;
}

const char *
jobs_tail_last_line(const struct jobs_tail *t, char *buf, size_t len)
{
	size_t end = t->len, start;

	while (end > 0 && (t->data[end - 1] == '\n' || t->data[end - 1] == '\r'))
		end--;
	for (start = end; start > 0 && t->data[start - 1] != '\n'; start--)
		;
	snprintf(buf, len, "%.*s", (int)(end - start), t->data + start);
	return buf;
}

static void
flush(struct run *r)
{
	int tries;

	if (r->pending.len == 0)
		return;
	for (tries = 0; tries < 20; tries++) {
		if (rp_store_job_log_append(r->w->j->st, r->w->id, r->pending.data, r->pending.len,
		                            r->w->j->o.log_cap) == RP_ERR_OK)
			break;
		jobs_sleep_ms(50);
	}
	r->pending.len = 0;
	r->flushed_ns = rp_time_mono_ns();
}

static void
on_output(void *arg, const char *data, size_t len)
{
	struct run *r = arg;

	rp_buf_append(&r->pending, data, len);
	jobs_tail_add(&r->tail, data, len);
	if (r->pending.len >= FLUSH_BYTES)
		flush(r);
}

static int
on_poll(void *arg)
{
	struct run *r = arg;

	if (r->pending.len && rp_time_mono_ns() - r->flushed_ns >= FLUSH_NS)
		flush(r);
	if (__atomic_load_n(&r->w->j->stop, __ATOMIC_RELAXED))
		return 2;
	return __atomic_load_n(&r->w->cancel, __ATOMIC_RELAXED) ? 1 : 0;
}

/* A line of rackpilotd's own in the job log, so it reads as one story. */
static void note(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
note(struct run *r, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = rp_vline(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n == 0)
		return;
	rp_buf_append(&r->pending, "== rackpilotd: ", 15);
	rp_buf_append(&r->pending, line, n);
	flush(r);
}

/* The last line the agent printed, for an error message. */
static const char *
last_line(struct run *r, char *buf, size_t len)
{
	return jobs_tail_last_line(&r->tail, buf, len);
}

static struct rp_job_outcome *
retry_or_fail(struct run *r, const char *code, const char *why)
{
	struct work *w = r->w;
	struct rp_job_outcome *o;

	if (w->attempts < w->max_attempts) {
		int64_t delay = (int64_t)w->j->o.retry_base_ms << (w->attempts - 1);

		if (delay > 60000)
			delay = 60000;
		note(r, "%s; retrying in %lld ms (attempt %d of %d)", why, (long long)delay,
		     w->attempts, w->max_attempts);
		o = jobs_outcome(w, RP_JOB_END_RETRY);
		o->not_before = rp_time_now_ms() + delay;
		jobs_set_error(o, code, "%s (attempt %d of %d; retrying in %lld ms)", why,
		               w->attempts, w->max_attempts, (long long)delay);
		return o;
	}
	note(r, "%s; giving up after %d attempts", why, w->attempts);
	o = jobs_outcome(w, RP_JOB_END_FAILED);
	jobs_set_error(o, code, "%s (gave up after %d attempts)", why, w->attempts);
	return o;
}

/* Counts by state, for the job's result. */
static json_t *
summary(json_t *steps, int exit_status)
{
	int n[5] = {0};
	static const char *names[] = {"pending", "running", "succeeded", "failed", "skipped"};
	json_t *s;
	size_t i;
	int k;

	json_array_foreach(steps, i, s)
	{
		const char *st = json_string_value(json_object_get(s, "state"));

		for (k = 0; k < 5; k++)
			if (!strcmp(st, names[k]))
				n[k]++;
	}
	/* Called as the job ends: what is still pending will be skipped. */
	return json_pack("{s:I, s:i, s:i, s:i, s:i}", "steps", (json_int_t)json_array_size(steps),
	                 "succeeded", n[2], "failed", n[3] + n[1], "skipped", n[4] + n[0],
	                 "exit_status", exit_status);
}

static int
settled(json_t *step)
{
	const char *st = json_string_value(json_object_get(step, "state"));

	return !strcmp(st, "succeeded") ||
	       ((!strcmp(st, "failed") || !strcmp(st, "skipped")) &&
	        json_is_true(json_object_get(step, "continue_on_error")));
}

static json_t *
plan_step(struct work *w, int64_t index)
{
	return json_array_get(json_object_get(jobs_params(w), "plan"), (size_t)index);
}

/* What the store says to do next: an outcome when the job is settled or must wait for a
 * reboot, NULL when the agent has steps to run. *again is set when a reboot was just seen
 * to complete (look again). */
static struct rp_job_outcome *
next(struct run *r, int exit_status, int *again, char *pending, size_t plen)
{
	struct work *w = r->w;
	json_t *steps = NULL, *s, *tgt = NULL;
	struct rp_job_outcome *o = NULL;
	size_t i;

	*again = 0;
	if (rp_store_job_steps(w->j->st, w->id, &steps) != RP_ERR_OK)
		return retry_or_fail(r, "store", "cannot read the job's steps");
	json_array_foreach(steps, i, s)
	{
		const char *st = json_string_value(json_object_get(s, "state"));
		const char *id = json_string_value(json_object_get(s, "id"));
		int64_t idx = json_integer_value(json_object_get(s, "index"));

		if (settled(s))
			continue;
		if (!strcmp(st, "failed") || !strcmp(st, "skipped")) {
			o = jobs_outcome(w, RP_JOB_END_FAILED);
			jobs_set_error(o, "step_failed", "step %s failed: %s", id,
			               json_string_value(json_object_get(s, "error"))
			                       ?: "no reason given");
			jobs_set_result(o, summary(steps, exit_status));
			goto out;
		}
		if (!strcmp(st, "running") &&
		    !strcmp(json_string_value(json_object_get(s, "type")), "reboot")) {
			const char *before = json_string_value(json_object_get(s, "boot_id"));
			json_t *to = json_object_get(plan_step(w, idx), "timeout_s");
			int64_t timeout_ms =
			        (json_is_integer(to) ? json_integer_value(to) : 900) * 1000;
			int64_t started = json_integer_value(json_object_get(s, "started_at"));
			const char *now_boot;

			if (rp_store_ssh_target(w->j->st, w->node_id, &tgt) != RP_ERR_OK) {
				o = retry_or_fail(r, "store", "cannot read the node's agent state");
				goto out;
			}
			now_boot = json_string_value(json_object_get(tgt, "boot_id"));
			if (now_boot && (before == NULL || strcmp(now_boot, before) != 0)) {
				note(r, "step %s: the node is back (boot %s)", id, now_boot);
				rp_store_step_finish(w->j->st, w->id, (int)idx, "succeeded", NULL);
				*again = 1;
				goto out;
			}
			if (rp_time_now_ms() - started > timeout_ms) {
				char why[200];

				snprintf(why, sizeof why,
				         "the node did not come back within %lld s",
				         (long long)(timeout_ms / 1000));
				note(r, "step %s: %s", id, why);
				rp_store_step_finish(w->j->st, w->id, (int)idx, "failed", why);
				*again = 1;
				goto out;
			}
			if (__atomic_load_n(&w->cancel, __ATOMIC_RELAXED)) {
				o = jobs_outcome(w, RP_JOB_END_CANCELLED);
				jobs_set_error(o, "cancelled",
				               "cancelled while waiting for a reboot");
				goto out;
			}
			o = jobs_later(w, REBOOT_POLL_MS);
			jobs_set_error(o, "rebooting", "waiting for %s to come back from step %s",
			               w->node_name, id);
			goto out;
		}
		snprintf(pending, plen, "%s is %s", id, st);
		goto out; /* pending, or running on the agent: connect */
	}
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, summary(steps, exit_status));
out:
	json_decref(steps);
	json_decref(tgt);
	return o;
}

/* Seconds a whole plan may take over one session: every step's own limit, plus slack. */
static unsigned
plan_timeout(json_t *plan)
{
	json_t *s;
	size_t i;
	int64_t total = 600;

	json_array_foreach(plan, i, s)
	{
		json_t *t = json_object_get(s, "timeout_s");

		if (strcmp(json_string_value(json_object_get(s, "type")) ?: "", "reboot") != 0)
			total += json_is_integer(t) ? json_integer_value(t) : 3600;
	}
	return total > 7 * 86400 ? 7 * 86400 : (unsigned)total;
}

static struct rp_job_outcome *
push(struct run *r, int *exit_status)
{
	struct work *w = r->w;
	struct rp_jobs *j = w->j;
	json_t *plan = json_object_get(jobs_params(w), "plan");
	json_t *tgt = NULL, *input = NULL, *sent = NULL;
	struct rp_job_outcome *o = NULL;
	struct rp_ssh_target t = {0};
	struct rp_ssh_result res;
	char cmd[512], *text = NULL, line[300], why[256];

	if (j->o.ssh_key == NULL) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "ssh_unavailable", "rackpilotd has no SSH key");
		goto out;
	}
	if (rp_store_ssh_target(j->st, w->node_id, &tgt) != RP_ERR_OK) {
		o = retry_or_fail(r, "store", "cannot read the node's SSH target");
		goto out;
	}
	t.host = json_string_value(json_object_get(tgt, "address"));
	t.port = (int)json_integer_value(json_object_get(tgt, "port"));
	t.user = json_string_value(json_object_get(tgt, "user"));
	t.key_type = json_string_value(json_object_get(tgt, "key_type"));
	t.key_b64 = json_string_value(json_object_get(tgt, "key_b64"));
	t.connect_timeout_s = j->o.ssh_connect_timeout_s;
	t.run_timeout_s = plan_timeout(plan);
	if (t.host == NULL || t.key_type == NULL || t.key_b64 == NULL) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "ssh_unavailable", "%s has no %s any more", w->node_name,
		               t.host ? "pinned SSH host key" : "SSH address");
		goto out;
	}
	/* A deploy's seed is rendered now: it is never stored in clear. */
	if ((sent = jobs_plan_expand(w, plan, why, sizeof why)) == NULL) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "seed", "%s", why);
		goto out;
	}
	input = json_pack("{s:i, s:s, s:O}", "format", RP_AGENT_FORMAT, "job", w->uuid, "steps",
	                  sent);
	if (input == NULL || (text = json_dumps(input, JSON_COMPACT)) == NULL) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "internal", "cannot encode the plan");
		goto out;
	}
	snprintf(cmd, sizeof cmd, "%s run-steps --job %s", j->o.agent_command, w->uuid);
	note(r, "connecting to %s@%s:%d (attempt %d of %d)", t.user, t.host, t.port, w->attempts,
	     w->max_attempts);
	rp_ssh_exec(j->o.ssh_key, &t, cmd, text, strlen(text), on_output, on_poll, r, &res);
	flush(r);
	switch (res.status) {
	case RP_SSH_OK:
		break;
	case RP_SSH_ABANDONED:
		goto out; /* stopping: the job stays running and resumes at the next start */
	case RP_SSH_HOSTKEY:
		note(r, "%s", res.error);
		rp_store_host_key_mismatch(j->st, w->node_id, w->uuid,
		                           json_string_value(json_object_get(tgt, "fingerprint")),
		                           res.presented[0] ? res.presented : "unknown");
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "ssh_host_key", "%s (pinned %s)", res.error,
		               json_string_value(json_object_get(tgt, "fingerprint")));
		goto out;
	case RP_SSH_AUTH:
		note(r, "%s", res.error);
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "ssh_auth", "%s", res.error);
		goto out;
	case RP_SSH_CONNECT:
	case RP_SSH_DROPPED:
		o = retry_or_fail(r, res.status == RP_SSH_CONNECT ? "ssh_connect" : "ssh_dropped",
		                  res.error);
		goto out;
	case RP_SSH_CANCELLED:
		note(r, "cancelled: the agent was told to stop");
		o = jobs_outcome(w, RP_JOB_END_CANCELLED);
		jobs_set_error(o, "cancelled", "cancelled while in progress");
		goto out;
	case RP_SSH_TIMEOUT:
	case RP_SSH_INTERNAL:
		note(r, "%s", res.error);
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, res.status == RP_SSH_TIMEOUT ? "timeout" : "internal", "%s",
		               res.error);
		goto out;
	}
	note(r, "agent exited with status %d", res.exit_status);
	*exit_status = res.exit_status;
	switch (res.exit_status) {
	case RP_RUN_EXIT_OK:
	case RP_RUN_EXIT_FAILED:
	case RP_RUN_EXIT_REBOOTING:
		break; /* the step states say the rest */
	case RP_RUN_EXIT_SERVER:
		o = retry_or_fail(r, "agent_unreachable", "the agent could not reach rackpilotd");
		break;
	case RP_RUN_EXIT_USAGE:
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "agent_rejected", "the agent rejected the plan: %s",
		               last_line(r, line, sizeof line));
		break;
	case 126:
	case 127:
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "agent_missing",
		               "'%s' cannot run on %s (exit %d): is "
		               "rackpilot-agent installed? %s",
		               j->o.agent_command, w->node_name, res.exit_status,
		               last_line(r, line, sizeof line));
		break;
	default:
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "agent_failed", "the agent exited with status %d: %s",
		               res.exit_status, last_line(r, line, sizeof line));
		break;
	}
out:
	json_decref(tgt);
	json_decref(input);
	jobs_plan_wipe(sent);
	json_decref(sent);
	if (text)
		explicit_bzero(text, strlen(text));
	free(text);
	return o;
}

struct rp_job_outcome *
jobs_run_steps(struct work *w, struct rp_bmc *unused)
{
	struct run r = {.w = w, .flushed_ns = rp_time_mono_ns()};
	struct rp_job_outcome *o = NULL;
	char pending[200] = "";
	int again, rounds, pushed = 0, exit_status = -1;

	(void)unused; /* an SSH-lane runner: no BMC */

	for (rounds = 0; rounds < 64; rounds++) {
		if ((o = next(&r, exit_status, &again, pending, sizeof pending)) != NULL)
			goto out;
		if (again) {
			pushed = 0;
			continue;
		}
		/* The agent ran the plan to its end, yet a step is unsettled: it will not do
		 * better by being asked again. */
		if (pushed) {
			o = jobs_outcome(w, RP_JOB_END_FAILED);
			jobs_set_error(o, "agent_incomplete",
			               "the agent ended (exit %d) but step %s", exit_status,
			               pending);
			goto out;
		}
		if (jobs_stopping(w)) {
			if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED))
				goto out;
			o = jobs_outcome(w, RP_JOB_END_CANCELLED);
			jobs_set_error(o, "cancelled", "cancelled before the plan was pushed");
			goto out;
		}
		if ((o = push(&r, &exit_status)) != NULL ||
		    __atomic_load_n(&w->j->stop, __ATOMIC_RELAXED))
			goto out;
		pushed = 1;
	}
	o = jobs_outcome(w, RP_JOB_END_FAILED);
	jobs_set_error(o, "internal", "the plan made no progress after %d rounds", rounds);
out:
	flush(&r);
	rp_buf_free(&r.pending);
	return o;
}
