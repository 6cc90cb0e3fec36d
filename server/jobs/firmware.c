/*
 * Firmware and BIOS on one node (docs/firmware.md), all on the BMC lane:
 *
 * - firmware_refresh: read the Redfish firmware inventory, the BIOS attributes and the BIOS
 *   attribute registry into the store.
 * - bios_apply: stage only the attributes that differ from the node's profile, power cycle,
 *   read back after the boot, and name every attribute that did not take.
 * - firmware_update: flash every baseline component whose version differs (decided after a
 *   fresh inventory read, so a repeated or resumed job skips what is done), one at a time:
 *   SimpleUpdate (or a multipart push), follow the task, reboot when the component needs it,
 *   wait for a BMC that resets itself, re-read and require the target version. Method agent:
 *   the component's recipe runs as a child steps job over SSH (flash_agent), and the version
 *   the agent reports afterwards must be the target.
 *
 * Crash safety of firmware_update: each component's update is recorded (firmware_updates,
 * with the job's sent mark) before the request leaves, then its task URI and each later
 * step. A restarted job follows what is recorded and never sends a second update for the
 * same component.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc/bmc.h"
#include "internal.h"

#define TASK_TIMEOUT_S     3600 /* a flash that runs longer than this has failed */
#define BMC_BACK_TIMEOUT_S 900  /* a BMC that resets itself answers again within this */
#define ERRORS_TOLERATED   20   /* transient BMC errors in a row while waiting */

static json_t *
params(struct work *w)
{
	return json_object_get(w->claim, "params");
}

static const char *
node_uuid(struct work *w)
{
	return json_string_value(json_object_get(json_object_get(w->claim, "node"), "uuid"));
}

static json_t *failed(struct work *w, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static json_t *
failed(struct work *w, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *o = jobs_outcome(w, "failed");

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	jobs_set_error(o, code, "%s", msg);
	return o;
}

/* The store could not record progress: nothing was sent after it, so a retry is safe. */
static json_t *
store_trouble(struct work *w, const char *what)
{
	struct rp_bmc_err busy = {RP_BMC_BUSY, ""};

	snprintf(busy.msg, sizeof busy.msg, "could not record %s in the database", what);
	return jobs_bmc_failure(w, &busy, 1);
}

/* ---- Inventory ----------------------------------------------------------------------- */

/*
 * Redfish inventory in the store's names: each SoftwareInventory Id lowercased ("BMC" ->
 * "bmc", "GPU3" -> "gpu3"), plus one row per family of numbered components ("gpu": the
 * members' common version, or "mixed") so a baseline can say "gpu" once. Each row keeps the
 * inventory URIs it stands for in "ids" (a family: its members).
 */
static json_t *
inventory_rows(json_t *inv)
{
	json_t *rows = json_array(), *fams = json_object(), *item, *f;
	const char *fname;
	size_t i;

	json_array_foreach(inv, i, item)
	{
		const char *id = json_string_value(json_object_get(item, "component"));
		const char *version = json_string_value(json_object_get(item, "version"));
		const char *uri = json_string_value(json_object_get(item, "id"));
		int upd = json_is_true(json_object_get(item, "updateable"));
		char name[128], fam[128];
		size_t n, k;

		if (id == NULL || version == NULL || version[0] == '\0')
			continue;
		for (n = 0; id[n] && n < sizeof name - 1; n++)
			name[n] = (char)tolower((unsigned char)id[n]);
		name[n] = '\0';
		json_array_append_new(rows,
		                      json_pack("{s:s, s:s, s:b, s:[s?]}", "component", name,
		                                "version", version, "updateable", upd, "ids", uri));
		for (k = n; k > 0 && isdigit((unsigned char)name[k - 1]); k--)
			;
		if (k == n || k == 0)
			continue;
		memcpy(fam, name, k);
		fam[k] = '\0';
		if ((f = json_object_get(fams, fam)) == NULL) {
			json_object_set_new(fams, fam,
			                    json_pack("{s:s, s:s, s:b, s:[]}", "component", fam,
			                              "version", version, "updateable", upd,
			                              "ids"));
			f = json_object_get(fams, fam);
		} else {
			if (strcmp(json_string_value(json_object_get(f, "version")), version) != 0)
				json_object_set_new(f, "version", json_string("mixed"));
			if (upd)
				json_object_set_new(f, "updateable", json_true());
		}
		if (uri)
			json_array_append_new(json_object_get(f, "ids"), json_string(uri));
	}
	json_object_foreach(fams, fname, f)
	{
		int taken = 0;

		json_array_foreach(rows, i, item)
		{
			taken |= !strcmp(json_string_value(json_object_get(item, "component")),
			                 fname);
		}
		if (!taken)
			json_array_append(rows, f);
	}
	json_decref(fams);
	return rows;
}

static json_t *
row_of(json_t *rows, const char *component)
{
	json_t *r;
	size_t i;

	json_array_foreach(rows, i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "component")), component))
			return r;
	}
	return NULL;
}

/* Read the firmware inventory and, with keep, store it (source redfish; one event per
 * stored reading, so polls in a wait loop do not keep). *rows as inventory_rows. */
static int
read_firmware(struct work *w, struct rp_bmc *b, json_t **rows, int keep, struct rp_bmc_err *err)
{
	json_t *inv = NULL, *r;

	if (rp_bmc_firmware_inventory(b, &inv, err) < 0)
		return -1;
	r = inventory_rows(inv);
	json_decref(inv);
	if (keep && rp_store_node_firmware_set(w->j->st, node_uuid(w), "redfish", r,
	                                       "rackpilotd") != RP_ERR_OK) {
		json_decref(r);
		return rp_bmc_fail(err, RP_BMC_BUSY, "could not store the firmware inventory");
	}
	*rows = r;
	return 0;
}

/* Read BIOS attributes (and the registry they follow) and store them. *bios (may be NULL)
 * gets what rp_bmc_bios_get returned. A BMC without BIOS resources is not an error. */
static int
read_bios(struct work *w, struct rp_bmc *b, json_t **bios, int keep, struct rp_bmc_err *err)
{
	json_t *info = NULL, *defs = NULL;
	const char *reg;

	if (rp_bmc_bios_get(b, &info, err) < 0)
		return err->kind == RP_BMC_UNSUPPORTED ? 0 : -1;
	if (!keep) {
		*bios = info;
		return 0;
	}
	if (rp_store_node_bios_set(w->j->st, node_uuid(w), "redfish",
	                           json_object_get(info, "attributes"),
	                           "rackpilotd") != RP_ERR_OK) {
		json_decref(info);
		return rp_bmc_fail(err, RP_BMC_BUSY, "could not store the BIOS attributes");
	}
	reg = json_string_value(json_object_get(info, "registry"));
	if (reg && rp_bmc_bios_registry(b, reg, &defs, err) == 0) {
		rp_store_bios_registry_set(w->j->st, node_uuid(w), reg, defs);
		json_decref(defs);
	} else if (reg && err->kind != RP_BMC_UNSUPPORTED) {
		json_decref(info);
		return -1;
	}
	err->kind = RP_BMC_OK;
	if (bios)
		*bios = info;
	else
		json_decref(info);
	return 0;
}

int
jobs_firmware_read(struct work *w, struct rp_bmc *b, struct rp_bmc_err *err)
{
	json_t *rows = NULL;

	if (read_firmware(w, b, &rows, 1, err) < 0 || read_bios(w, b, NULL, 1, err) < 0)
		return -1;
	json_decref(rows);
	return 0;
}

static json_t *
run_refresh(struct work *w, struct rp_bmc *b)
{
	struct rp_bmc_err err = {0};
	json_t *rows = NULL, *bios = NULL, *o;

	if (read_firmware(w, b, &rows, 1, &err) < 0 || read_bios(w, b, &bios, 1, &err) < 0) {
		json_decref(rows);
		return jobs_bmc_failure(w, &err, 1);
	}
	o = jobs_outcome(w, "succeeded");
	json_object_set_new(
	        o, "result",
	        json_pack("{s:I, s:I, s:s?}", "components", (json_int_t)json_array_size(rows),
	                  "bios_attributes",
	                  (json_int_t)json_object_size(json_object_get(bios, "attributes")),
	                  "registry", json_string_value(json_object_get(bios, "registry"))));
	json_object_set_new(o, "bmc_ok", json_true());
	json_decref(rows);
	json_decref(bios);
	return o;
}

/* ---- Power ---------------------------------------------------------------------------- */

/* Power cycle (or power on when off): the node boots, applying staged settings. */
static int
reboot(struct rp_bmc *b, struct rp_bmc_err *err)
{
	enum rp_power now = RP_POWER_UNKNOWN;

	if (rp_bmc_power_get(b, &now, err) < 0)
		return -1;
	return rp_bmc_power_set(b, now == RP_POWER_OFF ? RP_POWER_ACT_ON : RP_POWER_ACT_CYCLE, err);
}

/* Wait until the node reports power on. 0 on; 1 timed out; -1 error (err) or stopping
 * (err->kind OK). */
static int
wait_on(struct work *w, struct rp_bmc *b, unsigned timeout_s, struct rp_bmc_err *err)
{
	int64_t until = rp_time_mono_ns() + (int64_t)timeout_s * 1000000000;
	int errors = 0;

	for (;;) {
		enum rp_power p = RP_POWER_UNKNOWN;

		if (rp_bmc_power_get(b, &p, err) == 0) {
			errors = 0;
			if (p == RP_POWER_ON)
				return 0;
		} else if (!rp_bmc_err_transient(err->kind) || ++errors > ERRORS_TOLERATED) {
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

/* ---- BIOS apply ----------------------------------------------------------------------- */

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

static void failed_output(json_t *job, char *buf, size_t len);

/* The end of a BIOS apply: attributes `left` did not take (read: what the node has now) →
 * failed with bios_not_applied naming each, wanted vs. read; else succeeded with the names in
 * `set` as changed. */
static json_t *
bios_outcome(struct work *w, json_t *left, json_t *read, json_t *set, json_t *profile)
{
	const char *k;
	json_t *v, *o;

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
		o = failed(w, "bios_not_applied",
		           "after the reboot %zu attribute(s) did not take: %s",
		           json_object_size(left), msg);
		json_object_set_new(o, "result",
		                    json_pack("{s:b, s:O, s:o}", "skipped", 0, "profile", profile,
		                              "not_applied", list));
	} else {
		json_t *changed = json_array();

		json_object_foreach(set, k, v)
		{
			json_array_append_new(changed, json_string(k));
		}
		o = jobs_outcome(w, "succeeded");
		json_object_set_new(o, "result",
		                    json_pack("{s:b, s:O, s:o}", "skipped", 0, "profile", profile,
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

	if (rp_store_node_bios(w->j->st, node_uuid(w), &view) != RP_ERR_OK)
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
static json_t *
bios_agent(struct work *w, json_t *desired)
{
	json_t *want = json_object_get(desired, "attributes"),
	       *profile = json_object_get(desired, "profile");
	const char *recipe = json_string_value(json_object_get(desired, "recipe"));
	json_t *row = NULL, *job = NULL, *have = NULL, *diff = NULL, *left = NULL, *detail = NULL,
	       *o = NULL;
	char child[RP_UUID_BUF + 8] = "", why[1024], said[200];
	int64_t sent = 0, agent_read = 0;
	const char *js;
	enum rp_err e;

	e = rp_store_bios_apply_get(w->j->st, w->id, &row);
	if (e == RP_ERR_NOT_FOUND) {
		if ((have = stored_bios(w, want, &agent_read)) == NULL) {
			o = store_trouble(w, "the node's BIOS values");
			goto out;
		}
		diff = bios_diff(want, have);
		if (json_object_size(diff) == 0) {
			o = jobs_outcome(w, "succeeded");
			json_object_set_new(o, "result",
			                    json_pack("{s:b, s:O, s:[]}", "skipped", 1, "profile",
			                              profile, "changed"));
			goto out;
		}
		e = rp_store_bios_agent_apply(w->j->st, w->id, json_string_value(profile), recipe,
		                              diff, child, sizeof child, &detail);
		if (e == RP_ERR_CONFLICT || e == RP_ERR_INVALID_STATE || e == RP_ERR_NOT_FOUND ||
		    e == RP_ERR_MISSING_FIELD) {
			o = failed(w,
			           e == RP_ERR_NOT_FOUND || e == RP_ERR_MISSING_FIELD
			                   ? "no_recipe"
			                   : "agent_unreachable",
			           "the BIOS recipe %s cannot run: %s", recipe ?: "?",
			           json_string_value(json_object_get(detail, "reason"))
			                   ?: rp_err_message(e));
			goto out;
		}
		if (e != RP_ERR_OK) {
			o = store_trouble(w, "the BIOS recipe job");
			goto out;
		}
		rp_log_info("jobs: %s: BIOS profile %s: recipe %s queued as job %s", w->node_name,
		            json_string_value(profile), recipe, child);
		if (rp_store_bios_apply_get(w->j->st, w->id, &row) != RP_ERR_OK) {
			o = store_trouble(w, "the BIOS recipe job");
			goto out;
		}
	} else if (e != RP_ERR_OK) {
		o = store_trouble(w, "the BIOS recipe job");
		goto out;
	}
	snprintf(child, sizeof child, "%s", json_string_value(json_object_get(row, "child")) ?: "");
	sent = json_integer_value(json_object_get(row, "sent_at"));
	if ((e = rp_store_job_get(w->j->st, child, &job)) != RP_ERR_OK) {
		o = e == RP_ERR_NOT_FOUND ? failed(w, "bios_recipe_failed",
		                                   "the BIOS recipe job %s is "
		                                   "gone",
		                                   child)
		                          : store_trouble(w, "the BIOS recipe job's state");
		goto out;
	}
	js = json_string_value(json_object_get(job, "state")) ?: "";
	if (!strcmp(js, "queued") || !strcmp(js, "running")) {
		o = jobs_later(w, 2000);
		jobs_set_error(o, "applying", "waiting for BIOS recipe job %s (%s)", child, js);
		goto out;
	}
	if (strcmp(js, "succeeded") != 0) {
		failed_output(job, said, sizeof said);
		snprintf(
		        why, sizeof why, "BIOS recipe %s (job %s) %s: %s%s%s%s", recipe ?: "?",
		        child, js,
		        json_string_value(json_object_get(json_object_get(job, "error"), "message"))
		                ?: "no reason given",
		        said[0] ? " (\"" : "", said, said[0] ? "\")" : "");
		o = failed(w, "bios_recipe_failed", "%s", why);
		goto out;
	}
	if ((have = stored_bios(w, want, &agent_read)) == NULL) {
		o = store_trouble(w, "the node's BIOS values");
		goto out;
	}
	if (agent_read < sent) {
		o = failed(
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

static json_t *
run_bios_apply(struct work *w, struct rp_bmc *b)
{
	const char *profile = json_string_value(json_object_get(params(w), "profile"));
	json_t *desired = NULL, *detail = NULL, *bios = NULL, *diff = NULL, *left = NULL, *o = NULL;
	json_t *want;
	struct rp_bmc_err err = {0};
	enum rp_err e;
	int64_t until;
	int rc;

	e = rp_store_bios_desired(w->j->st, node_uuid(w), profile, &desired, &detail);
	if (e != RP_ERR_OK) {
		o = failed(w, e == RP_ERR_INTERNAL ? "internal" : "no_profile", "%s",
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
	if (read_bios(w, b, &bios, 1, &err) < 0) {
		o = jobs_bmc_failure(w, &err, 1);
		goto out;
	}
	if (bios == NULL) {
		o = failed(w, "bmc_unsupported",
		           "the BMC has no BIOS settings to apply a profile to");
		goto out;
	}
	diff = bios_diff(want, json_object_get(bios, "attributes"));
	if (json_object_size(diff) == 0) {
		o = jobs_outcome(w, "succeeded");
		json_object_set_new(o, "result",
		                    json_pack("{s:b, s:O, s:[]}", "skipped", 1, "profile",
		                              json_object_get(desired, "profile"), "changed"));
		json_object_set_new(o, "bmc_ok", json_true());
		goto out;
	}
	/* After a restart that interrupted it the values may be staged and the node rebooting:
	 * stage nothing and cycle nothing again, only read back what happened. */
	if (!w->recover) {
		if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK) {
			o = store_trouble(w, "the job's progress");
			goto out;
		}
		if (rp_bmc_bios_set(b, diff, &err) < 0) {
			o = err.kind == RP_BMC_REJECTED
			            ? failed(w, "bios_rejected",
			                     "the BMC refused the BIOS settings: %s", err.msg)
			            : jobs_bmc_failure(w, &err, 1);
			goto out;
		}
		if (reboot(b, &err) < 0) {
			o = jobs_bmc_failure(w, &err, err.kind != RP_BMC_TIMEOUT);
			goto out;
		}
	}
	rc = wait_on(w, b, w->j->o.power_wait_s, &err);
	if (rc < 0 && err.kind == RP_BMC_OK) {
		o = NULL; /* stopping: recovered at the next start */
		goto out;
	}
	if (rc != 0) {
		o = rc < 0 ? jobs_bmc_failure(w, &err, 0)
		           : failed(w, "boot_timeout",
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
		if (read_bios(w, b, &bios, 0, &err) < 0) {
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
	    rp_store_node_bios_set(w->j->st, node_uuid(w), "redfish",
	                           json_object_get(bios, "attributes"), "rackpilotd") != RP_ERR_OK)
		rp_log_warn("jobs: %s: could not store the BIOS values read back", w->node_name);
	o = bios_outcome(w, left, json_object_get(bios, "attributes"), diff,
	                 json_object_get(desired, "profile"));
	json_object_set_new(o, "power", json_string("on"));
	json_object_set_new(o, "bmc_ok", json_true());
out:
	json_decref(desired);
	json_decref(bios);
	json_decref(diff);
	json_decref(left);
	return o;
}

/* ---- Firmware update ------------------------------------------------------------------ */

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
	json_t *out;    /* the outcome when a component ends the job */
	int no_redfish; /* the BMC has no firmware inventory (IPMI, fake): agent methods only */
};

static int
stop(struct fw_ctx *x, json_t *o)
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

		if (read_firmware(x->w, x->b, &rows, 0, &err) == 0) {
			json_t *r;

			errors = 0;
			json_decref(x->rows);
			x->rows = rows;
			r = row_of(rows, component);
			if (r && !strcmp(json_string_value(json_object_get(r, "version")), to)) {
				rp_store_node_firmware_set(x->w->j->st, node_uuid(x->w), "redfish",
				                           rows, "rackpilotd");
				return 0;
			}
		} else if (!rp_bmc_err_transient(err.kind) || ++errors > 10 * ERRORS_TOLERATED) {
			return stop(x, jobs_bmc_failure(x->w, &err, 0));
		}
		if (rp_time_mono_ns() > until && errors > 0)
			return stop(x,
			            failed(x->w, "bmc_timeout",
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
	if (rp_store_node_firmware(w->j->st, node_uuid(w), &fw) != RP_ERR_OK)
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

/* The last non-empty line a failed step of a steps job printed (the flasher's own words),
 * into buf ("" when none). */
static void
failed_output(json_t *job, char *buf, size_t len)
{
	json_t *st;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(json_object_get(job, "steps"), i, st)
	{
		const char *out = json_string_value(json_object_get(st, "output"));
		const char *end, *start;

		if (strcmp(json_string_value(json_object_get(st, "state")) ?: "", "failed") != 0 ||
		    out == NULL)
			continue;
		end = out + strlen(out);
		while (end > out && isspace((unsigned char)end[-1]))
			end--;
		for (start = end; start > out && start[-1] != '\n'; start--)
			;
		snprintf(buf, len, "%.*s", (int)(end - start), start);
		return;
	}
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
	json_t *job = NULL, *detail = NULL, *o;
	const char *js;
	enum rp_err e;

	if (state == NULL) {
		char url[1200];
		json_t *args;

		if (stored_version(w, comp, now, sizeof now) < 0)
			return stop(x, store_trouble(w, "the update plan"));
		if (!strcmp(now, to)) {
			json_array_append_new(x->skipped, json_string(comp));
			return 0;
		}
		if (image == NULL)
			return stop(x, failed(w, "no_image",
			                      "component %s has no image in the baseline", comp));
		if (recipe == NULL)
			return stop(x, failed(w, "no_recipe",
			                      "component %s: method agent needs a recipe in the "
			                      "baseline",
			                      comp));
		if (w->j->o.image_url == NULL || !w->j->o.image_url[0])
			return stop(x, failed(w, "no_image_url",
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
			o = failed(w,
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
			return stop(x, store_trouble(w, "the flasher job"));
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
		return stop(x,
		            failed(w, "update_failed", "component %s: %s", comp,
		                   json_string_value(json_object_get(row, "error")) ?: "failed"));
	e = rp_store_job_get(w->j->st, child, &job);
	if (e != RP_ERR_OK) {
		if (e != RP_ERR_NOT_FOUND)
			return stop(x, store_trouble(w, "the flasher job's state"));
		snprintf(why, sizeof why, "the flasher job %s is gone", child);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, failed(w, "update_failed", "component %s: %s", comp, why));
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

		failed_output(job, said, sizeof said);
		snprintf(why, sizeof why, "flasher recipe %s (job %s) %s: %s%s%s%s", recipe ?: "?",
		         child, js,
		         json_string_value(json_object_get(err, "message")) ?: "no reason given",
		         said[0] ? " (\"" : "", said, said[0] ? "\")" : "");
		json_decref(job);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, failed(w, "update_failed", "component %s: %s; version stays %s",
		                      comp, why, from ?: "unknown"));
	}
	json_decref(job);
	if (stored_version(w, comp, now, sizeof now) < 0)
		return stop(x, store_trouble(w, "the version check"));
	if (strcmp(now, to) != 0) {
		snprintf(why, sizeof why,
		         "version mismatch: the flasher recipe succeeded but the agent reports "
		         "%s, not %s (does the recipe end with an inventory step?)",
		         now[0] ? now : "nothing", to);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, failed(w, "version_mismatch", "component %s: %s", comp, why));
	}
	rp_store_firmware_update_set(w->j->st, w->id, comp, "done", NULL, NULL);
	json_array_append_new(x->updated, json_pack("{s:s, s:s?, s:s}", "component", comp, "from",
	                                            from, "to", to));
	return 0;
}

/* Flash one target, starting from what the store recorded for it (row, may be NULL). 0 done
 * or skipped; -1 with x->out the job's outcome (NULL when stopping). */
static int
flash(struct fw_ctx *x, json_t *t, json_t *row)
{
	struct work *w = x->w;
	const char *comp = json_string_value(json_object_get(t, "component"));
	const char *to = json_string_value(json_object_get(t, "version"));
	const char *image = json_string_value(json_object_get(t, "image"));
	const char *method = json_string_value(json_object_get(t, "method")) ?: "redfish";
	const char *state = json_string_value(json_object_get(row, "state"));
	json_t *have = row_of(x->rows, comp), *status = NULL;
	const char *was = row ? json_string_value(json_object_get(row, "from"))
	                      : json_string_value(json_object_get(have, "version"));
	struct rp_bmc_err err = {0};
	char task[512] = "", why[1024], fromv[160];
	const char *from = was ? fromv : NULL;
	int rc, reset = 0;

	if (!strcmp(method, "agent"))
		return flash_agent(x, t, row);
	/* x->rows is replaced by every inventory read below: keep the old version. */
	snprintf(fromv, sizeof fromv, "%s", was ? was : "");

	if (state == NULL) {
		char uri[1200], local[4200];
		json_t *targets;

		if (have && !strcmp(json_string_value(json_object_get(have, "version")), to)) {
			json_array_append_new(x->skipped, json_string(comp));
			return 0;
		}
		if (x->no_redfish)
			return stop(x, failed(w, "bmc_unsupported",
			                      "component %s: method %s needs a Redfish BMC, and "
			                      "the node's BMC has no firmware inventory",
			                      comp, method));
		if (have == NULL)
			return stop(x, failed(w, "unknown_component",
			                      "the BMC reports no firmware "
			                      "component '%s'",
			                      comp));
		if (!json_is_true(json_object_get(have, "updateable")))
			return stop(x, failed(w, "not_updateable",
			                      "the BMC says component %s cannot be "
			                      "updated",
			                      comp));
		if (image == NULL)
			return stop(x, failed(w, "no_image",
			                      "component %s has no image in the baseline", comp));
		if (!strcmp(method, "redfish") &&
		    (w->j->o.image_url == NULL || !w->j->o.image_url[0]))
			return stop(x, failed(w, "no_image_url",
			                      "SimpleUpdate needs the URL the BMC "
			                      "downloads images from: set boot_url in "
			                      "rackpilotd.conf"));
		snprintf(uri, sizeof uri, "%s/boot/images/%s", w->j->o.image_url ?: "", image);
		snprintf(local, sizeof local, "%s/%s", w->j->o.image_dir ?: ".",
		         json_string_value(json_object_get(t, "file")) ?: image);
		/* Durably "about to send" first: a restart must never send this one again. */
		if (rp_store_firmware_update_sent(w->j->st, w->id, comp, from, to, image) !=
		    RP_ERR_OK)
			return stop(x, store_trouble(w, "the update"));
		targets = json_object_get(have, "ids");
		rc = rp_bmc_firmware_update(x->b, !strcmp(method, "redfish") ? uri : NULL,
		                            !strcmp(method, "redfish-push") ? local : NULL,
		                            json_array_size(targets) ? targets : NULL, task,
		                            sizeof task, &err);
		if (rc < 0) {
			/* Refused before anything started (unreachable, busy): it may be sent
			 * again. */
			if (err.kind == RP_BMC_UNREACHABLE || err.kind == RP_BMC_BUSY) {
				rp_store_firmware_update_set(w->j->st, w->id, comp, NULL, NULL,
				                             NULL);
				return stop(x, jobs_bmc_failure(w, &err, 1));
			}
			if (err.kind == RP_BMC_TIMEOUT)
				return stop(x, jobs_bmc_failure(w, &err, 1));
			rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL,
			                             err.msg);
			return stop(x, failed(w, "update_rejected",
			                      "component %s: the BMC refused the "
			                      "update with %s: %s",
			                      comp, image, err.msg));
		}
		if (rp_store_firmware_update_set(w->j->st, w->id, comp, "polling", task, NULL) !=
		    RP_ERR_OK)
			rp_log_warn("jobs: %s: could not record task %s of %s", w->node_name, task,
			            comp);
		state = "polling";
	} else {
		snprintf(task, sizeof task, "%s",
		         json_string_value(json_object_get(row, "task")) ?: "");
	}

	if (!strcmp(state, "done")) {
		json_array_append_new(x->updated, json_pack("{s:s, s:s?, s:s}", "component", comp,
		                                            "from", from, "to", to));
		return 0;
	}
	if (!strcmp(state, "failed"))
		return stop(x,
		            failed(w, "update_failed", "component %s: %s", comp,
		                   json_string_value(json_object_get(row, "error")) ?: "failed"));
	if (!strcmp(state, "sent") && image &&
	    rp_bmc_task_find(x->b, image, task, sizeof task, &err) == 0) {
		/* Interrupted between recording and the BMC's answer, which started the update:
		 * follow the task it started. */
		rp_log_info(
		        "jobs: %s: the update of %s was sent before a restart; following its task "
		        "%s",
		        w->node_name, comp, task);
		if (rp_store_firmware_update_set(w->j->st, w->id, comp, "polling", task, NULL) !=
		    RP_ERR_OK)
			return stop(x, store_trouble(w, "the update's task"));
		state = "polling";
	}
	if (!strcmp(state, "sent")) {
		/* Interrupted between recording and the BMC's answer, and the BMC lists no task for
		 * it: it may still have it. Never send it again; it counts only if the version
		 * shows. */
		rc = await_version(x, comp, to, 60);
		if (rc < 0)
			return -1;
		if (rc == 1) {
			rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL,
			                             "interrupted while the update was being sent");
			return stop(
			        x,
			        failed(w, "interrupted",
			               "component %s: rackpilotd stopped while sending the update "
			               "and the BMC reports %s, not %s; not sent again (it may be "
			               "running on the BMC): check the BMC's tasks, then start a "
			               "new "
			               "update",
			               comp,
			               json_string_value(
			                       json_object_get(row_of(x->rows, comp), "version"))
			                       ?: "nothing",
			               to));
		}
		state = "verifying";
	}
	if (!strcmp(state, "polling")) {
		int64_t until = rp_time_mono_ns() + (int64_t)TASK_TIMEOUT_S * 1000000000;
		int done = 0, ok = 0, errors = 0;

		for (;;) {
			json_decref(status);
			status = NULL;
			if (rp_bmc_task_poll(x->b, task, &done, &ok, &status, &err) < 0) {
				if (!rp_bmc_err_transient(err.kind) ||
				    ++errors > ERRORS_TOLERATED) {
					snprintf(why, sizeof why, "lost the update task %s: %s",
					         task, err.msg);
					rp_store_firmware_update_set(w->j->st, w->id, comp,
					                             "failed", NULL, why);
					return stop(x, failed(w, "update_failed",
					                      "component %s: %s", comp, why));
				}
			} else {
				errors = 0;
				if (done)
					break;
			}
			if (rp_time_mono_ns() > until) {
				json_decref(status);
				snprintf(why, sizeof why,
				         "the update task did not finish within %d s",
				         TASK_TIMEOUT_S);
				rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL,
				                             why);
				return stop(x, failed(w, "update_timeout", "component %s: %s", comp,
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
			snprintf(why, sizeof why, "the update task with %s failed: %s",
			         image ?: "?", msg);
			rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
			return stop(x,
			            failed(w, "update_failed", "component %s: %s; version stays %s",
			                   comp, why, from ?: "unknown"));
		}
		reset = needs_reset(status) || !strcmp(comp, "bios");
		json_decref(status);
		state = reset ? "rebooting" : "verifying";
		/* Recorded before the reset is sent: a restart waits for the boot, never resets
		 * again. */
		if (rp_store_firmware_update_set(w->j->st, w->id, comp, state, NULL, NULL) !=
		    RP_ERR_OK)
			return stop(x, store_trouble(w, "the update's progress"));
		if (reset && reboot(x->b, &err) < 0)
			return stop(x, jobs_bmc_failure(w, &err, 0));
	}
	if (!strcmp(state, "rebooting")) {
		rc = wait_on(w, x->b, w->j->o.power_wait_s, &err);
		if (rc < 0)
			return stop(x, err.kind == RP_BMC_OK ? NULL : jobs_bmc_failure(w, &err, 0));
		if (rc == 1)
			return stop(x, failed(w, "boot_timeout",
			                      "component %s: the node did not power on "
			                      "within %u s after the reset that "
			                      "activates the update",
			                      comp, w->j->o.power_wait_s));
		if (rp_store_firmware_update_set(w->j->st, w->id, comp, "verifying", NULL, NULL) !=
		    RP_ERR_OK)
			return stop(x, store_trouble(w, "the update's progress"));
	}
	/* verifying: a BMC that flashed itself resets, a BIOS shows its version after the boot. */
	rc = await_version(x, comp, to, BMC_BACK_TIMEOUT_S);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		const char *now =
		        json_string_value(json_object_get(row_of(x->rows, comp), "version"));

		snprintf(why, sizeof why,
		         "version mismatch: the update finished but the BMC reports %s, "
		         "not %s",
		         now ?: "nothing", to);
		rp_store_firmware_update_set(w->j->st, w->id, comp, "failed", NULL, why);
		return stop(x, failed(w, "version_mismatch", "component %s: %s", comp, why));
	}
	rp_store_firmware_update_set(w->j->st, w->id, comp, "done", NULL, NULL);
	json_array_append_new(x->updated, json_pack("{s:s, s:s?, s:s}", "component", comp, "from",
	                                            from, "to", to));
	return 0;
}

static json_t *
run_update(struct work *w, struct rp_bmc *b)
{
	struct fw_ctx x = {.w = w, .b = b};
	struct rp_bmc_err err = {0};
	json_t *plan = NULL, *done = NULL, *detail = NULL, *t, *versions, *o = NULL;
	enum rp_err e;
	size_t i;

	/* Versions as they are now, not as last stored: decides what still needs flashing. A
	 * BMC without Redfish inventory can still have agent-method components flashed. */
	if (read_firmware(w, b, &x.rows, 1, &err) < 0) {
		if (err.kind != RP_BMC_UNSUPPORTED)
			return jobs_bmc_failure(w, &err, 1);
		x.rows = json_array();
		x.no_redfish = 1;
	}
	e = rp_store_firmware_targets(w->j->st, node_uuid(w),
	                              json_object_get(params(w), "components"), &plan, &detail);
	if (e != RP_ERR_OK) {
		o = e == RP_ERR_INTERNAL
		            ? store_trouble(w, "the update plan")
		            : failed(w, "no_baseline", "%s",
		                     json_string_value(json_object_get(detail, "reason"))
		                             ?: rp_err_message(e));
		goto out;
	}
	if (rp_store_firmware_updates(w->j->st, w->id, &done) != RP_ERR_OK) {
		o = store_trouble(w, "the update plan");
		goto out;
	}
	x.updated = json_array();
	x.skipped = json_array();
	json_array_foreach(json_object_get(plan, "targets"), i, t)
	{
		const char *comp = json_string_value(json_object_get(t, "component"));

		if (flash(&x, t, json_object_get(done, comp)) < 0) {
			o = x.out;
			if (o && !strcmp(json_string_value(json_object_get(o, "state")), "failed"))
				json_object_set_new(o, "result",
				                    json_pack("{s:O, s:O}", "updated", x.updated,
				                              "skipped", x.skipped));
			goto out;
		}
		if (jobs_stopping(w) && i + 1 < json_array_size(json_object_get(plan, "targets"))) {
			if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED))
				goto out; /* o NULL: resumed after the restart */
			o = jobs_outcome(w, "cancelled");
			jobs_set_error(o, "cancelled", "cancelled after %zu of %zu component(s)",
			               i + 1, json_array_size(json_object_get(plan, "targets")));
			goto out;
		}
	}
	versions = json_object();
	json_array_foreach(json_object_get(plan, "targets"), i, t)
	{
		const char *comp = json_string_value(json_object_get(t, "component"));
		json_t *r = row_of(x.rows, comp);
		char v[160];

		if (r == NULL && stored_version(w, comp, v, sizeof v) == 0 && v[0])
			json_object_set_new(versions, comp, json_string(v));
		else
			json_object_set_new(versions, comp,
			                    r ? json_incref(json_object_get(r, "version"))
			                      : json_null());
	}
	o = jobs_outcome(w, "succeeded");
	json_object_set_new(o, "result",
	                    json_pack("{s:O, s:O, s:o}", "updated", x.updated, "skipped", x.skipped,
	                              "versions", versions));
	json_object_set_new(o, "bmc_ok", json_true());
out:
	json_decref(x.rows);
	json_decref(x.updated);
	json_decref(x.skipped);
	json_decref(plan);
	json_decref(done);
	json_decref(detail);
	return o;
}

json_t *
jobs_run_firmware(struct work *w, struct rp_bmc *b)
{
	json_t *o;

	if (!strcmp(w->type, "firmware_refresh"))
		return run_refresh(w, b);
	if (!strcmp(w->type, "bios_apply"))
		return run_bios_apply(w, b);
	o = run_update(w, b);
	/* Whatever happened, the store ends with what the BMC reports now. */
	if (o && strcmp(json_string_value(json_object_get(o, "state")), "retry") != 0) {
		struct rp_bmc_err err = {0};
		json_t *rows = NULL;

		if (read_firmware(w, b, &rows, 1, &err) == 0)
			json_decref(rows);
	}
	return o;
}
