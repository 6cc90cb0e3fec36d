/*
 * bios_apply (docs/firmware.md): stage only the attributes that differ from the node's
 * profile, power cycle, read back after the boot, and name every attribute that did not
 * take. Method agent: the profile's recipe runs as a child steps job instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc/bmc.h"
#include "internal.h"

/* Attributes of want whose value in have differs: a new object. */
static json_t *
bios_diff(json_t *want, json_t *have)
{
	json_t *d = json_object(), *v;
	const char *k;

	json_object_foreach(want, k, v)
	{
		json_t *h = json_object_get(have, k);

		/* Integers may come back as reals and vice versa. */
		if (h && (json_equal(h, v) || (json_is_number(h) && json_is_number(v) &&
		                               json_number_value(h) == json_number_value(v))))
			continue;
		json_object_set(d, k, v);
	}
	return d;
}

/* Does the BMC still hold any of `left` staged with a value other than the current one? Only
 * a BMC with a settings object can say; without one the answer is "maybe" (1). */
static int
still_staged(json_t *left, json_t *bios)
{
	json_t *pending = json_object_get(bios, "pending"),
	       *cur = json_object_get(bios, "attributes");
	const char *k;
	json_t *v;

	if (!json_is_string(json_object_get(bios, "settings")))
		return 1;
	json_object_foreach(left, k, v)
	{
		json_t *p = json_object_get(pending, k), *a = json_object_get(cur, k);

		if (p &&
		    !(a && (json_equal(p, a) || (json_is_number(p) && json_is_number(a) &&
		                                 json_number_value(p) == json_number_value(a)))))
			return 1;
	}
	return 0;
}

/* The end of a BIOS apply: attributes `left` did not take (read: what the node has now) →
 * failed with bios_not_applied naming each, wanted vs. read; else succeeded with the names in
 * `set` as changed. */
static struct rp_job_outcome *
bios_outcome(struct work *w, json_t *left, json_t *read, json_t *set, json_t *profile)
{
	const char *k;
	json_t *v;
	struct rp_job_outcome *o;

	if (json_object_size(left) > 0) {
		char msg[400] = "";
		size_t n = 0;
		json_t *list = json_array();

		json_object_foreach(left, k, v)
		{
			char *wv = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			char *hv = json_dumps(json_object_get(read, k) ?: json_null(),
			                      JSON_ENCODE_ANY | JSON_COMPACT);

			if (n < sizeof msg)
				n += (size_t)snprintf(msg + n, sizeof msg - n,
				                      "%s%s: wanted %s, reads %s", n ? "; " : "", k,
				                      wv ? wv : "?", hv ? hv : "?");
			json_array_append_new(list, json_string(k));
			free(wv);
			free(hv);
		}
		o = jobs_failed(w, "bios_not_applied",
		                "after the reboot %zu attribute(s) did not take: %s",
		                json_object_size(left), msg);
		jobs_set_result(o, json_pack("{s:b, s:O, s:o}", "skipped", 0, "profile", profile,
		                             "not_applied", list));
	} else {
		json_t *changed = json_array();

		json_object_foreach(set, k, v)
		{
			json_array_append_new(changed, json_string(k));
		}
		o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
		jobs_set_result(o, json_pack("{s:b, s:O, s:o}", "skipped", 0, "profile", profile,
		                             "changed", changed));
	}
	return o;
}

/* What the store holds of the node's BIOS values now, flat ({name: value}), and the newest
 * time (ms) any of `names` was read from source "agent" (0: never). NULL on store trouble. */
static json_t *
stored_bios(struct work *w, json_t *names, int64_t *agent_read)
{
	json_t *view = NULL, *flat, *a;
	const char *k;
	int64_t t;

	if (rp_store_node_bios(w->j->st, jobs_node_uuid(w), &view) != RP_ERR_OK)
		return NULL;
	flat = json_object();
	*agent_read = 0;
	json_object_foreach(json_object_get(view, "actual"), k, a)
	{
		json_object_set(flat, k, json_object_get(a, "value"));
		if (json_object_get(names, k) &&
		    !strcmp(json_string_value(json_object_get(a, "source")) ?: "", "agent") &&
		    rp_time_parse(json_string_value(json_object_get(a, "read_at")) ?: "", &t) ==
		            0 &&
		    t > *agent_read)
			*agent_read = t;
	}
	json_decref(view);
	return flat;
}

/*
 * Method agent: the profile's recipe (the vendor's BIOS tool on the node) runs as a child
 * steps job, queued once with its bios_applies row; this job waits for it off the worker.
 * Afterwards the values the recipe's `bios` step reported (source agent, read after the
 * child was queued) must equal the profile.
 */
static struct rp_job_outcome *
bios_agent(struct work *w, json_t *desired)
{
	json_t *want = json_object_get(desired, "attributes"),
	       *profile = json_object_get(desired, "profile");
	const char *recipe = json_string_value(json_object_get(desired, "recipe"));
	json_t *row = NULL, *job = NULL, *have = NULL, *diff = NULL, *left = NULL, *detail = NULL;
	struct rp_job_outcome *o = NULL;
	char child[RP_UUID_BUF + 8] = "", why[1024], said[200];
	int64_t sent = 0, agent_read = 0;
	const char *js;
	enum rp_err e;

	e = rp_store_bios_apply_get(w->j->st, w->id, &row);
	if (e == RP_ERR_NOT_FOUND) {
		if ((have = stored_bios(w, want, &agent_read)) == NULL) {
			o = jobs_fw_store_trouble(w, "the node's BIOS values");
			goto out;
		}
		diff = bios_diff(want, have);
		if (json_object_size(diff) == 0) {
			o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
			jobs_set_result(o, json_pack("{s:b, s:O, s:[]}", "skipped", 1, "profile",
			                             profile, "changed"));
			goto out;
		}
		e = rp_store_bios_agent_apply(w->j->st, w->id, json_string_value(profile), recipe,
		                              diff, child, sizeof child, &detail);
		if (e == RP_ERR_CONFLICT || e == RP_ERR_INVALID_STATE || e == RP_ERR_NOT_FOUND ||
		    e == RP_ERR_MISSING_FIELD) {
			o = jobs_failed(w,
			                e == RP_ERR_NOT_FOUND || e == RP_ERR_MISSING_FIELD
			                        ? "no_recipe"
			                        : "agent_unreachable",
			                "the BIOS recipe %s cannot run: %s", recipe ?: "?",
			                json_string_value(json_object_get(detail, "reason"))
			                        ?: rp_err_message(e));
			goto out;
		}
		if (e != RP_ERR_OK) {
			o = jobs_fw_store_trouble(w, "the BIOS recipe job");
			goto out;
		}
		rp_log_info("jobs: %s: BIOS profile %s: recipe %s queued as job %s", w->node_name,
		            json_string_value(profile), recipe, child);
		if (rp_store_bios_apply_get(w->j->st, w->id, &row) != RP_ERR_OK) {
			o = jobs_fw_store_trouble(w, "the BIOS recipe job");
			goto out;
		}
	} else if (e != RP_ERR_OK) {
		o = jobs_fw_store_trouble(w, "the BIOS recipe job");
		goto out;
	}
	snprintf(child, sizeof child, "%s", json_string_value(json_object_get(row, "child")) ?: "");
	sent = json_integer_value(json_object_get(row, "sent_at"));
	if ((e = rp_store_job_get(w->j->st, child, &job)) != RP_ERR_OK) {
		o = e == RP_ERR_NOT_FOUND ? jobs_failed(w, "bios_recipe_failed",
		                                        "the BIOS recipe job %s is "
		                                        "gone",
		                                        child)
		                          : jobs_fw_store_trouble(w, "the BIOS recipe job's state");
		goto out;
	}
	js = json_string_value(json_object_get(job, "state")) ?: "";
	if (!strcmp(js, "queued") || !strcmp(js, "running")) {
		o = jobs_later(w, 2000);
		jobs_set_error(o, "applying", "waiting for BIOS recipe job %s (%s)", child, js);
		goto out;
	}
	if (strcmp(js, "succeeded") != 0) {
		jobs_failed_output(job, said, sizeof said);
		snprintf(
		        why, sizeof why, "BIOS recipe %s (job %s) %s: %s%s%s%s", recipe ?: "?",
		        child, js,
		        json_string_value(json_object_get(json_object_get(job, "error"), "message"))
		                ?: "no reason given",
		        said[0] ? " (\"" : "", said, said[0] ? "\")" : "");
		o = jobs_failed(w, "bios_recipe_failed", "%s", why);
		goto out;
	}
	if ((have = stored_bios(w, want, &agent_read)) == NULL) {
		o = jobs_fw_store_trouble(w, "the node's BIOS values");
		goto out;
	}
	if (agent_read < sent) {
		o = jobs_failed(
		        w, "no_bios_report",
		        "BIOS recipe %s succeeded but the node reported no BIOS values since (end "
		        "the recipe with a bios step with \"report\": true)",
		        recipe ?: "?");
		goto out;
	}
	left = bios_diff(want, have);
	o = bios_outcome(w, left, have, json_object_get(row, "attributes"), profile);
out:
	json_decref(row);
	json_decref(job);
	json_decref(have);
	json_decref(diff);
	json_decref(left);
	json_decref(detail);
	return o;
}

struct rp_job_outcome *
jobs_run_bios_apply(struct work *w, struct rp_bmc *b)
{
	const char *profile = json_string_value(json_object_get(jobs_params(w), "profile"));
	json_t *desired = NULL, *detail = NULL, *bios = NULL, *diff = NULL, *left = NULL;
	struct rp_job_outcome *o = NULL;
	json_t *want;
	struct rp_bmc_err err = {0};
	enum rp_err e;
	int64_t until;
	int rc;

	e = rp_store_bios_desired(w->j->st, jobs_node_uuid(w), profile, &desired, &detail);
	if (e != RP_ERR_OK) {
		o = jobs_failed(w, e == RP_ERR_INTERNAL ? "internal" : "no_profile", "%s",
		                json_string_value(json_object_get(detail, "reason"))
		                        ?: rp_err_message(e));
		json_decref(detail);
		return o;
	}
	want = json_object_get(desired, "attributes");
	if (!strcmp(json_string_value(json_object_get(desired, "method")) ?: "", "agent")) {
		o = bios_agent(w, desired);
		goto out;
	}
	if (jobs_fw_read_bios(w, b, &bios, 1, &err) < 0) {
		o = jobs_bmc_failure(w, &err, 1);
		goto out;
	}
	if (bios == NULL) {
		o = jobs_failed(w, "bmc_unsupported",
		                "the BMC has no BIOS settings to apply a profile to");
		goto out;
	}
	diff = bios_diff(want, json_object_get(bios, "attributes"));
	if (json_object_size(diff) == 0) {
		o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
		jobs_set_result(o, json_pack("{s:b, s:O, s:[]}", "skipped", 1, "profile",
		                             json_object_get(desired, "profile"), "changed"));
		o->bmc_ok = 1;
		goto out;
	}
	/* After a restart that interrupted it the values may be staged and the node rebooting:
	 * stage nothing and cycle nothing again, only read back what happened. */
	if (!w->recover) {
		enum rp_power now = RP_POWER_UNKNOWN;

		/* The reset below powers an off node on: that waits for room in its rack,
		 * before anything is staged. */
		if (rp_bmc_power_get(b, &now, &err) < 0) {
			o = jobs_bmc_failure(w, &err, 1);
			goto out;
		}
		if (now != RP_POWER_ON && (o = jobs_power_admit(w)) != NULL)
			goto out;
		if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK) {
			o = jobs_fw_store_trouble(w, "the job's progress");
			if (now != RP_POWER_ON)
				jobs_power_release(w);
			goto out;
		}
		if (rp_bmc_bios_set(b, diff, &err) < 0) {
			o = err.kind == RP_BMC_REJECTED
			            ? jobs_failed(w, "bios_rejected",
			                          "the BMC refused the BIOS settings: %s", err.msg)
			            : jobs_bmc_failure(w, &err, 1);
			if (now != RP_POWER_ON)
				jobs_power_release(w);
			goto out;
		}
		rc = jobs_boot_now(b, &err);
		if (now != RP_POWER_ON)
			jobs_power_started(w);
		if (rc < 0) {
			o = jobs_bmc_failure(w, &err, err.kind != RP_BMC_TIMEOUT);
			goto out;
		}
	}
	rc = jobs_wait_power(w, b, RP_POWER_ON, w->j->o.power_wait_s, NULL, &err);
	if (rc < 0 && err.kind == RP_BMC_OK) {
		o = NULL; /* stopping: recovered at the next start */
		goto out;
	}
	if (rc != 0) {
		o = rc < 0 ? jobs_bmc_failure(w, &err, 0)
		           : jobs_failed(w, "boot_timeout",
		                         "the node did not power on within %u s after the "
		                         "power cycle",
		                         w->j->o.power_wait_s);
		goto out;
	}
	/* Settings apply during the boot: read back until they show or the wait ends. */
	until = rp_time_mono_ns() + (int64_t)w->j->o.power_wait_s * 1000000000;
	for (;;) {
		json_decref(bios);
		bios = NULL;
		if (jobs_fw_read_bios(w, b, &bios, 0, &err) < 0) {
			if (rp_bmc_err_transient(err.kind) && rp_time_mono_ns() < until) {
				jobs_sleep_ms(POLL_MS);
				continue;
			}
			o = jobs_bmc_failure(w, &err, 0);
			goto out;
		}
		json_decref(left);
		left = bios_diff(want, json_object_get(bios, "attributes"));
		/* Once the BMC shows nothing of ours staged any more, the boot has consumed the
		 * settings: what did not take now never will, so say so without waiting. */
		if (json_object_size(left) == 0 || !still_staged(left, bios) ||
		    rp_time_mono_ns() > until || jobs_stopping(w))
			break;
		jobs_sleep_ms(POLL_MS);
	}
	/* What the node has now is what the store keeps. */
	if (bios &&
	    rp_store_node_bios_set(w->j->st, jobs_node_uuid(w), "redfish",
	                           json_object_get(bios, "attributes"), "rackpilotd") != RP_ERR_OK)
		rp_log_warn("jobs: %s: could not store the BIOS values read back", w->node_name);
	o = bios_outcome(w, left, json_object_get(bios, "attributes"), diff,
	                 json_object_get(desired, "profile"));
	jobs_set_power(o, "on");
	o->bmc_ok = 1;
out:
	json_decref(desired);
	json_decref(bios);
	json_decref(diff);
	json_decref(left);
	return o;
}
