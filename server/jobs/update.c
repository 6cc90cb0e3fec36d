/*
 * firmware_update (docs/firmware.md): flash every baseline component whose version differs
 * (decided after a fresh inventory read, so a repeated or resumed job skips what is done),
 * one at a time: SimpleUpdate (or a multipart push), follow the task, reboot when the
 * component needs it, wait for a BMC that resets itself, re-read and require the target
 * version. Method agent: the component's recipe runs as a child steps job over SSH
 * (flash_agent), and the version the agent reports afterwards must be the target.
 *
 * Crash safety: each component's update is recorded (firmware_updates, with the job's sent
 * mark) before the request leaves, then its task URI and each later step. A restarted job
 * follows what is recorded and never sends a second update for the same component.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bmc/bmc.h"
#include "internal.h"

#define TASK_TIMEOUT_S     3600 /* a flash that runs longer than this has failed */
#define BMC_BACK_TIMEOUT_S 900  /* a BMC that resets itself answers again within this */
/* Transient BMC errors in a row tolerated while following a task or a reset: the tolerance
 * of every power wait (jobs_wait_power). */
#define ERRORS_TOLERATED JOBS_POWER_ERRORS

/* The most telling message of a failed task: the first Critical one, else the first
 * Warning, else the last message. */
static void
task_message(json_t *status, char *out, size_t len)
{
	json_t *msgs = json_object_get(status, "Messages"), *m, *pick = NULL;
	size_t i;

	int rank = 0;

	/* The first Critical message says why (later ones say the task aborted). */
	json_array_foreach(msgs, i, m)
	{
		const char *sev = json_string_value(json_object_get(m, "MessageSeverity"))
		                      ?: json_string_value(json_object_get(m, "Severity")) ?: "";
		int r = !strcmp(sev, "Critical") ? 3 : !strcmp(sev, "Warning") ? 2 : 1;

		if (r > rank || (r == 1 && rank == 1)) {
			pick = m;
			rank = r;
		}
	}
	snprintf(out, len, "%s%s%s",
	         json_string_value(json_object_get(pick, "MessageId")) ?: "",
	         pick ? ": " : "",
	         json_string_value(json_object_get(pick, "Message"))
	             ?: json_string_value(json_object_get(status, "TaskState")) ?: "no details");
	if (pick == NULL && status == NULL)
		snprintf(out, len, "the BMC gave no details");
}

/* 1 when a finished task says the new image waits for a reset to activate. */
static int
needs_reset(json_t *status)
{
	json_t *m;
	size_t i;

	json_array_foreach(json_object_get(status, "Messages"), i, m)
	{
		const char *id = json_string_value(json_object_get(m, "MessageId")) ?: "";
		const char *dot = strrchr(id, '.');

		if (dot && (!strcmp(dot, ".ResetRequired") || !strcmp(dot, ".AwaitToActivate")))
			return 1;
	}
	return 0;
}

struct fw_ctx {
	struct work *w;
	struct rp_bmc *b;
	json_t *rows; /* latest inventory_rows */
	json_t *updated, *skipped;
	struct rp_job_outcome *out; /* the outcome when a component ends the job */
	int no_redfish; /* the BMC has no firmware inventory (IPMI, fake): agent methods only */
};

static int
stop(struct fw_ctx *x, struct rp_job_outcome *o)
{
	x->out = o;
	return -1;
}

/* Re-read the inventory, tolerating a BMC that is resetting, until component has version
 * to (0), the deadline passes (1, x->rows holds the last reading), or an error (-1 with
 * x->out; NULL when stopping). */
static int
await_version(struct fw_ctx *x, const char *component, const char *to, unsigned timeout_s)
{
	int64_t until = rp_time_mono_ns() + (int64_t)timeout_s * 1000000000;
	struct rp_bmc_err err = {0};
	int errors = 0;

	for (;;) {
		json_t *rows = NULL;

		if (jobs_fw_read_firmware(x->w, x->b, &rows, 0, &err) == 0) {
			json_t *r;

			errors = 0;
			json_decref(x->rows);
			x->rows = rows;
			r = jobs_fw_row(rows, component);
			if (r && !strcmp(json_string_value(json_object_get(r, "version")), to)) {
				rp_store_node_firmware_set(x->w->j->st, jobs_node_uuid(x->w),
				                           "redfish", rows, "rackpilotd");
				return 0;
			}
		} else if (!rp_bmc_err_transient(err.kind) || ++errors > 10 * ERRORS_TOLERATED) {
			return stop(x, jobs_bmc_failure(x->w, &err, 0));
		}
		if (rp_time_mono_ns() > until && errors > 0)
			return stop(
			        x, jobs_failed(
			                   x->w, "bmc_timeout",
			                   "component %s: the BMC did not answer again within %u s "
			                   "after the update (last error: %s)",
			                   component, timeout_s, err.msg));
		if (rp_time_mono_ns() > until)
			return 1;
		if (__atomic_load_n(&x->w->j->stop, __ATOMIC_RELAXED))
			return stop(x, NULL);
		jobs_sleep_ms(errors ? 1000 : POLL_MS);
	}
}

/* The version of component the store holds now (an agent's inventory, a reading): into
 * buf ("" when none). -1 when the store could not say. */
static int
stored_version(struct work *w, const char *component, char *buf, size_t len)
{
	json_t *fw = NULL, *r;
	size_t i;

	buf[0] = '\0';
	if (rp_store_node_firmware(w->j->st, jobs_node_uuid(w), &fw) != RP_ERR_OK)
		return -1;
	json_array_foreach(json_object_get(fw, "components"), i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "component")) ?: "", component))
			snprintf(buf, len, "%s",
			         json_string_value(json_object_get(r, "version")) ?: "");
	}
	json_decref(fw);
	return 0;
}

/*
 * Method agent: the recipe runs as a child steps job over SSH (queued once, with the row
 * that records the update, in one transaction), and this job waits for it off the worker:
 * it goes back to the queue and looks again. The child succeeded → the version the agent
 * reported since (the recipe's final inventory step) must equal the target.
 */
static int
flash_agent(struct fw_ctx *x, json_t *t, json_t *row)
{
	struct work *w = x->w;
	const char *comp = json_string_value(json_object_get(t, "component"));
	const char *to = json_string_value(json_object_get(t, "version"));
	const char *image = json_string_value(json_object_get(t, "image"));
	const char *recipe = json_string_value(json_object_get(t, "recipe"));
	const char *state = json_string_value(json_object_get(row, "state"));
	const char *from = json_string_value(json_object_get(row, "from"));
	char child[RP_UUID_BUF + 64] = "", now[160], fromv[160], why[1024];
	json_t *job = NULL, *detail = NULL;
	struct rp_job_outcome *o;
	const char *js;
	enum rp_err e;

	if (state == NULL) {
		char url[1200];
		json_t *args;

		if (stored_version(w, comp, now, sizeof now) < 0)
			return stop(x, jobs_fw_store_trouble(w, "the update plan"));
		if (!strcmp(now, to)) {
			json_array_append_new(x->skipped, json_string(comp));
			return 0;
		}
		if (image == NULL)
			return stop(x,
			            jobs_failed(w, "no_image",
			                        "component %s has no image in the baseline", comp));
		if (recipe == NULL)
			return stop(x,
			            jobs_failed(w, "no_recipe",
			                        "component %s: method agent needs a recipe in the "
			                        "baseline",
			                        comp));
		if (w->j->o.image_url == NULL || !w->j->o.image_url[0])
			return stop(x,
			            jobs_failed(w, "no_image_url",
			                        "the agent downloads the image from Rackpilot: set "
			                        "boot_url in rackpilotd.conf"));
		snprintf(url, sizeof url, "%s/boot/images/%s", w->j->o.image_url, image);
		/* No "image": ${image} in a firmware step is the agent's path of the verified
		 * copy. */
		args = json_pack("{s:s, s:s, s:s, s:s}", "component", comp, "version", to,
		                 "image_url", url, "sha256",
		                 json_string_value(json_object_get(t, "sha256")) ?: "");
		e = rp_store_firmware_agent_flash(w->j->st, w->id, comp, now[0] ? now : NULL, to,
		                                  image, recipe, args, child, sizeof child,
		                                  &detail);
		json_decref(args);
		if (e == RP_ERR_CONFLICT || e == RP_ERR_INVALID_STATE || e == RP_ERR_NOT_FOUND ||
		    e == RP_ERR_MISSING_FIELD) {
			o = jobs_failed(w,
			                e == RP_ERR_NOT_FOUND || e == RP_ERR_MISSING_FIELD
			                        ? "no_recipe"
			                        : "agent_unreachable",
			                "component %s: the flasher recipe cannot run: %s", comp,
			                json_string_value(json_object_get(detail, "reason"))
			                        ?: rp_err_message(e));
			json_decref(detail);
			return stop(x, o);
		}
		json_decref(detail);
		if (e != RP_ERR_OK)
			return stop(x, jobs_fw_store_trouble(w, "the flasher job"));
		rp_log_info("jobs: %s: component %s: flasher recipe %s queued as job %s",
		            w->node_name, comp, recipe, child);
		state = "polling";
		snprintf(fromv, sizeof fromv, "%s", now);
		from = fromv[0] ? fromv : NULL;
	} else {
		snprintf(child, sizeof child, "%s",
		         json_string_value(json_object_get(row, "task")) ?: "");
	}
	if (!strcmp(state, "done")) {
		json_array_append_new(x->updated, json_pack("{s:s, s:s?, s:s}", "component", comp,
		                                            "from", from, "to", to));
		return 0;
	}
	if (!strcmp(state, "failed"))
		return stop(x, jobs_failed(w, "update_failed", "component %s: %s", comp,
		                           json_string_value(json_object_get(row, "error"))
		                                   ?: "failed"));
	e = rp_store_job_get(w->j->st, child, &job);
	if (e != RP_ERR_OK) {
		if (e != RP_ERR_NOT_FOUND)
			return stop(x, jobs_fw_store_trouble(w, "the flasher job's state"));
		snprintf(why, sizeof why, "the flasher job %s is gone", child);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, jobs_failed(w, "update_failed", "component %s: %s", comp, why));
	}
	js = json_string_value(json_object_get(job, "state")) ?: "";
	if (!strcmp(js, "queued") || !strcmp(js, "running")) {
		o = jobs_later(w, 2000);
		jobs_set_error(o, "flashing", "component %s: waiting for flasher job %s (%s)", comp,
		               child, js);
		json_decref(job);
		return stop(x, o);
	}
	if (strcmp(js, "succeeded") != 0) {
		json_t *err = json_object_get(job, "error");
		char said[200];

		jobs_failed_output(job, said, sizeof said);
		snprintf(why, sizeof why, "flasher recipe %s (job %s) %s: %s%s%s%s", recipe ?: "?",
		         child, js,
		         json_string_value(json_object_get(err, "message")) ?: "no reason given",
		         said[0] ? " (\"" : "", said, said[0] ? "\")" : "");
		json_decref(job);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, jobs_failed(w, "update_failed", "component %s: %s; version stays %s",
		                           comp, why, from ?: "unknown"));
	}
	json_decref(job);
	if (stored_version(w, comp, now, sizeof now) < 0)
		return stop(x, jobs_fw_store_trouble(w, "the version check"));
	if (strcmp(now, to) != 0) {
		snprintf(why, sizeof why,
		         "version mismatch: the flasher recipe succeeded but the agent reports "
		         "%s, not %s (does the recipe end with an inventory step?)",
		         now[0] ? now : "nothing", to);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, jobs_failed(w, "version_mismatch", "component %s: %s", comp, why));
	}
	rp_store_firmware_update_set(w->j->st, w->id, comp, "done", NULL, NULL);
	json_array_append_new(x->updated, json_pack("{s:s, s:s?, s:s}", "component", comp, "from",
	                                            from, "to", to));
	return 0;
}

/* One component's flash on its way through the states the store records for it (none, sent,
 * polling, rebooting, verifying, done, failed): each state is one function below, which
 * returns -1 with x->out the job's outcome (NULL when stopping), 0 with f->state the next
 * state, or 1 when the component is settled (updated or skipped). */
struct flash {
	struct fw_ctx *x;
	json_t *t, *row;
	json_t *have; /* its inventory row before the update */
	const char *comp, *to, *image, *method;
	const char *from; /* the version before the update (fromv), NULL when unknown */
	const char *state;
	char task[512], fromv[160];
};

/* No state yet: check the target, record "sent", send the update and record its task. */
static int
flash_send(struct flash *f)
{
	struct fw_ctx *x = f->x;
	struct work *w = x->w;
	struct rp_bmc_err err = {0};
	char uri[1200], local[4200];
	json_t *targets;
	int rc;

	if (f->have && !strcmp(json_string_value(json_object_get(f->have, "version")), f->to)) {
		json_array_append_new(x->skipped, json_string(f->comp));
		return 1;
	}
	if (x->no_redfish)
		return stop(x, jobs_failed(w, "bmc_unsupported",
		                           "component %s: method %s needs a Redfish BMC, and "
		                           "the node's BMC has no firmware inventory",
		                           f->comp, f->method));
	if (f->have == NULL)
		return stop(x, jobs_failed(w, "unknown_component",
		                           "the BMC reports no firmware "
		                           "component '%s'",
		                           f->comp));
	if (!json_is_true(json_object_get(f->have, "updateable")))
		return stop(x, jobs_failed(w, "not_updateable",
		                           "the BMC says component %s cannot be "
		                           "updated",
		                           f->comp));
	if (f->image == NULL)
		return stop(x, jobs_failed(w, "no_image",
		                           "component %s has no image in the baseline", f->comp));
	if (!strcmp(f->method, "redfish") && (w->j->o.image_url == NULL || !w->j->o.image_url[0]))
		return stop(x, jobs_failed(w, "no_image_url",
		                           "SimpleUpdate needs the URL the BMC "
		                           "downloads images from: set boot_url in "
		                           "rackpilotd.conf"));
	snprintf(uri, sizeof uri, "%s/boot/images/%s", w->j->o.image_url ?: "", f->image);
	snprintf(local, sizeof local, "%s/%s", w->j->o.image_dir ?: ".",
	         json_string_value(json_object_get(f->t, "file")) ?: f->image);
	/* The BMC gets the image from this server (pushed, or fetched from its boot endpoint):
	 * one missing from this server's image store is said before anything is recorded or
	 * sent (servers that share a database need the same images: a shared image_dir). */
	if (access(local, R_OK) != 0)
		return stop(x, jobs_failed(w, "image_missing",
		                           "component %s: image %s is not in this server's image "
		                           "store (%s): nothing was sent; servers that share a "
		                           "database need the same image_dir",
		                           f->comp, f->image, local));
	/* Durably "about to send" first: a restart must never send this one again. */
	if (rp_store_firmware_update_sent(w->j->st, w->id, f->comp, f->from, f->to, f->image) !=
	    RP_ERR_OK)
		return stop(x, jobs_fw_store_trouble(w, "the update"));
	targets = json_object_get(f->have, "ids");
	rc = rp_bmc_firmware_update(x->b, !strcmp(f->method, "redfish") ? uri : NULL,
	                            !strcmp(f->method, "redfish-push") ? local : NULL,
	                            json_array_size(targets) ? targets : NULL, f->task,
	                            sizeof f->task, &err);
	if (rc < 0) {
		/* Refused before anything started (unreachable, busy): it may be sent again. */
		if (err.kind == RP_BMC_UNREACHABLE || err.kind == RP_BMC_BUSY) {
			rp_store_firmware_update_set(w->j->st, w->id, f->comp, NULL, NULL, NULL);
			return stop(x, jobs_bmc_failure(w, &err, 1));
		}
		if (err.kind == RP_BMC_TIMEOUT)
			return stop(x, jobs_bmc_failure(w, &err, 1));
		rp_store_firmware_update_set(w->j->st, w->id, f->comp, "failed", NULL, err.msg);
		return stop(x, jobs_failed(w, "update_rejected",
		                           "component %s: the BMC refused the "
		                           "update with %s: %s",
		                           f->comp, f->image, err.msg));
	}
	if (rp_store_firmware_update_set(w->j->st, w->id, f->comp, "polling", f->task, NULL) !=
	    RP_ERR_OK)
		rp_log_warn("jobs: %s: could not record task %s of %s", w->node_name, f->task,
		            f->comp);
	f->state = "polling";
	return 0;
}

/* "sent": interrupted between recording and the BMC's answer. Follow the task the update
 * started, or, when the BMC lists none, count it only if the version shows: never send it
 * again. */
static int
flash_sent(struct flash *f)
{
	struct fw_ctx *x = f->x;
	struct work *w = x->w;
	struct rp_bmc_err err = {0};
	int rc;

	if (f->image && rp_bmc_task_find(x->b, f->image, f->task, sizeof f->task, &err) == 0) {
		rp_log_info(
		        "jobs: %s: the update of %s was sent before a restart; following its task "
		        "%s",
		        w->node_name, f->comp, f->task);
		if (rp_store_firmware_update_set(w->j->st, w->id, f->comp, "polling", f->task,
		                                 NULL) != RP_ERR_OK)
			return stop(x, jobs_fw_store_trouble(w, "the update's task"));
		f->state = "polling";
		return 0;
	}
	rc = await_version(x, f->comp, f->to, 60);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		rp_store_firmware_update_set(w->j->st, w->id, f->comp, "failed", NULL,
		                             "interrupted while the update was being sent");
		return stop(x,
		            jobs_failed(w, "interrupted",
		                        "component %s: rackpilotd stopped while sending the update "
		                        "and the BMC reports %s, not %s; not sent again (it may be "
		                        "running on the BMC): check the BMC's tasks, then start a "
		                        "new "
		                        "update",
		                        f->comp,
		                        json_string_value(json_object_get(
		                                jobs_fw_row(x->rows, f->comp), "version"))
		                                ?: "nothing",
		                        f->to));
	}
	f->state = "verifying";
	return 0;
}

/* "polling": follow the BMC's update task to its end; then reset the node when the update
 * needs it (recorded first: a restart waits for the boot, never resets again). */
static int
flash_poll(struct flash *f)
{
	struct fw_ctx *x = f->x;
	struct work *w = x->w;
	struct rp_bmc_err err = {0};
	int64_t until = rp_time_mono_ns() + (int64_t)TASK_TIMEOUT_S * 1000000000;
	int done = 0, ok = 0, errors = 0, reset;
	json_t *status = NULL;
	char why[1024];

	for (;;) {
		json_decref(status);
		status = NULL;
		if (rp_bmc_task_poll(x->b, f->task, &done, &ok, &status, &err) < 0) {
			if (!rp_bmc_err_transient(err.kind) || ++errors > ERRORS_TOLERATED) {
				snprintf(why, sizeof why, "lost the update task %s: %s", f->task,
				         err.msg);
				rp_store_firmware_update_set(w->j->st, w->id, f->comp, "failed",
				                             NULL, why);
				return stop(x, jobs_failed(w, "update_failed", "component %s: %s",
				                           f->comp, why));
			}
		} else {
			errors = 0;
			if (done)
				break;
		}
		if (rp_time_mono_ns() > until) {
			json_decref(status);
			snprintf(why, sizeof why, "the update task did not finish within %d s",
			         TASK_TIMEOUT_S);
			rp_store_firmware_update_set(w->j->st, w->id, f->comp, "failed", NULL, why);
			return stop(x, jobs_failed(w, "update_timeout", "component %s: %s", f->comp,
			                           why));
		}
		if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED)) {
			json_decref(status);
			return stop(x, NULL); /* resumed after the restart, from the task */
		}
		jobs_sleep_ms(POLL_MS);
	}
	if (!ok) {
		char msg[300];

		task_message(status, msg, sizeof msg);
		json_decref(status);
		snprintf(why, sizeof why, "the update task with %s failed: %s", f->image ?: "?",
		         msg);
		rp_store_firmware_update_set(w->j->st, w->id, f->comp, "failed", NULL, why);
		return stop(x, jobs_failed(w, "update_failed", "component %s: %s; version stays %s",
		                           f->comp, why, f->from ?: "unknown"));
	}
	reset = needs_reset(status) || !strcmp(f->comp, "bios");
	json_decref(status);
	f->state = reset ? "rebooting" : "verifying";
	if (rp_store_firmware_update_set(w->j->st, w->id, f->comp, f->state, NULL, NULL) !=
	    RP_ERR_OK)
		return stop(x, jobs_fw_store_trouble(w, "the update's progress"));
	if (reset && jobs_boot_now(x->b, &err) < 0)
		return stop(x, jobs_bmc_failure(w, &err, 0));
	return 0;
}

/* "rebooting": wait for the node to power on after the reset that activates the update. */
static int
flash_reboot(struct flash *f)
{
	struct fw_ctx *x = f->x;
	struct work *w = x->w;
	struct rp_bmc_err err = {0};
	int rc;

	rc = jobs_wait_power(w, x->b, RP_POWER_ON, w->j->o.power_wait_s, NULL, &err);
	if (rc < 0)
		return stop(x, err.kind == RP_BMC_OK ? NULL : jobs_bmc_failure(w, &err, 0));
	if (rc == 1)
		return stop(x, jobs_failed(w, "boot_timeout",
		                           "component %s: the node did not power on "
		                           "within %u s after the reset that "
		                           "activates the update",
		                           f->comp, w->j->o.power_wait_s));
	if (rp_store_firmware_update_set(w->j->st, w->id, f->comp, "verifying", NULL, NULL) !=
	    RP_ERR_OK)
		return stop(x, jobs_fw_store_trouble(w, "the update's progress"));
	f->state = "verifying";
	return 0;
}

/* "verifying": a BMC that flashed itself resets, a BIOS shows its version after the boot;
 * the target version must show. */
static int
flash_verify(struct flash *f)
{
	struct fw_ctx *x = f->x;
	struct work *w = x->w;
	char why[1024];
	int rc;

	rc = await_version(x, f->comp, f->to, BMC_BACK_TIMEOUT_S);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		const char *now = json_string_value(
		        json_object_get(jobs_fw_row(x->rows, f->comp), "version"));

		snprintf(why, sizeof why,
		         "version mismatch: the update finished but the BMC reports %s, "
		         "not %s",
		         now ?: "nothing", f->to);
		rp_store_firmware_update_set(w->j->st, w->id, f->comp, "failed", NULL, why);
		return stop(x,
		            jobs_failed(w, "version_mismatch", "component %s: %s", f->comp, why));
	}
	rp_store_firmware_update_set(w->j->st, w->id, f->comp, "done", NULL, NULL);
	f->state = "done";
	return 0;
}

/* Flash one target, starting from what the store recorded for it (row, may be NULL). 0 done
 * or skipped; -1 with x->out the job's outcome (NULL when stopping). */
static int
flash(struct fw_ctx *x, json_t *t, json_t *row)
{
	struct flash f = {.x = x, .t = t, .row = row};
	const char *was;
	int rc = 0;

	f.comp = json_string_value(json_object_get(t, "component"));
	f.to = json_string_value(json_object_get(t, "version"));
	f.image = json_string_value(json_object_get(t, "image"));
	f.method = json_string_value(json_object_get(t, "method")) ?: "redfish";
	f.state = json_string_value(json_object_get(row, "state"));
	f.have = jobs_fw_row(x->rows, f.comp);
	if (!strcmp(f.method, "agent"))
		return flash_agent(x, t, row);
	/* x->rows is replaced by every inventory read: keep the old version. */
	was = row ? json_string_value(json_object_get(row, "from"))
	          : json_string_value(json_object_get(f.have, "version"));
	snprintf(f.fromv, sizeof f.fromv, "%s", was ? was : "");
	f.from = was ? f.fromv : NULL;
	if (f.state == NULL)
		rc = flash_send(&f);
	else
		snprintf(f.task, sizeof f.task, "%s",
		         json_string_value(json_object_get(row, "task")) ?: "");
	/* Each state moves to a later one, so this ends within one pass. */
	while (rc == 0 && strcmp(f.state, "done") != 0) {
		if (!strcmp(f.state, "failed"))
			return stop(x,
			            jobs_failed(x->w, "update_failed", "component %s: %s", f.comp,
			                        json_string_value(json_object_get(row, "error"))
			                                ?: "failed"));
		if (!strcmp(f.state, "sent"))
			rc = flash_sent(&f);
		else if (!strcmp(f.state, "polling"))
			rc = flash_poll(&f);
		else if (!strcmp(f.state, "rebooting"))
			rc = flash_reboot(&f);
		else
			rc = flash_verify(&f);
	}
	if (rc < 0)
		return -1;
	if (rc == 0)
		json_array_append_new(x->updated, json_pack("{s:s, s:s?, s:s}", "component", f.comp,
		                                            "from", f.from, "to", f.to));
	return 0;
}

static struct rp_job_outcome *
run_update(struct work *w, struct rp_bmc *b)
{
	struct fw_ctx x = {.w = w, .b = b};
	struct rp_bmc_err err = {0};
	json_t *plan = NULL, *done = NULL, *detail = NULL, *t, *versions;
	struct rp_job_outcome *o = NULL;
	enum rp_err e;
	size_t i;

	/* Versions as they are now, not as last stored: decides what still needs flashing. A
	 * BMC without Redfish inventory can still have agent-method components flashed. */
	if (jobs_fw_read_firmware(w, b, &x.rows, 1, &err) < 0) {
		if (err.kind != RP_BMC_UNSUPPORTED)
			return jobs_bmc_failure(w, &err, 1);
		x.rows = json_array();
		x.no_redfish = 1;
	}
	e = rp_store_firmware_targets(w->j->st, jobs_node_uuid(w),
	                              json_object_get(jobs_params(w), "components"), &plan,
	                              &detail);
	if (e != RP_ERR_OK) {
		o = e == RP_ERR_INTERNAL
		            ? jobs_fw_store_trouble(w, "the update plan")
		            : jobs_failed(w, "no_baseline", "%s",
		                          json_string_value(json_object_get(detail, "reason"))
		                                  ?: rp_err_message(e));
		goto out;
	}
	if (rp_store_firmware_updates(w->j->st, w->id, &done) != RP_ERR_OK) {
		o = jobs_fw_store_trouble(w, "the update plan");
		goto out;
	}
	x.updated = json_array();
	x.skipped = json_array();
	json_array_foreach(json_object_get(plan, "targets"), i, t)
	{
		const char *comp = json_string_value(json_object_get(t, "component"));

		if (flash(&x, t, json_object_get(done, comp)) < 0) {
			o = x.out;
			if (o && o->state == RP_JOB_END_FAILED)
				jobs_set_result(o, json_pack("{s:O, s:O}", "updated", x.updated,
				                             "skipped", x.skipped));
			goto out;
		}
		if (jobs_stopping(w) && i + 1 < json_array_size(json_object_get(plan, "targets"))) {
			if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED))
				goto out; /* o NULL: resumed after the restart */
			o = jobs_outcome(w, RP_JOB_END_CANCELLED);
			jobs_set_error(o, "cancelled", "cancelled after %zu of %zu component(s)",
			               i + 1, json_array_size(json_object_get(plan, "targets")));
			goto out;
		}
	}
	versions = json_object();
	json_array_foreach(json_object_get(plan, "targets"), i, t)
	{
		const char *comp = json_string_value(json_object_get(t, "component"));
		json_t *r = jobs_fw_row(x.rows, comp);
		char v[160];

		if (r == NULL && stored_version(w, comp, v, sizeof v) == 0 && v[0])
			json_object_set_new(versions, comp, json_string(v));
		else
			json_object_set_new(versions, comp,
			                    r ? json_incref(json_object_get(r, "version"))
			                      : json_null());
	}
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:O, s:O, s:o}", "updated", x.updated, "skipped", x.skipped,
	                             "versions", versions));
	o->bmc_ok = 1;
out:
	json_decref(x.rows);
	json_decref(x.updated);
	json_decref(x.skipped);
	json_decref(plan);
	json_decref(done);
	json_decref(detail);
	return o;
}

struct rp_job_outcome *
jobs_run_firmware_update(struct work *w, struct rp_bmc *b)
{
	struct rp_job_outcome *o = run_update(w, b);

	/* Whatever happened, the store ends with what the BMC reports now. */
	if (o && o->state != RP_JOB_END_RETRY) {
		struct rp_bmc_err err = {0};
		json_t *rows = NULL;

		if (jobs_fw_read_firmware(w, b, &rows, 1, &err) == 0)
			json_decref(rows);
	}
	return o;
}
