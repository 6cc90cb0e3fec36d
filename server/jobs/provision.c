/*
 * Commission, deploy and release jobs: a node PXE-boots into the agent ramdisk, registers,
 * runs a plan, and ends powered off (commission, release) or booted from its disk (deploy).
 *
 * Each phase is recorded before the next starts, so a restart resumes where the job was; a
 * BMC command sent before a crash is not sent again (the job's sent mark), and waiting for a
 * machine holds no worker (the job goes back to the queue and looks again).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc/bmc.h"
#include "internal.h"

#define WAIT_POLL_MS 2000

static const char *
phase(struct work *w)
{
	return w->claim->phase;
}

/* Move to phase p, durably; the claim follows so this run sees it. */
static int
enter(struct work *w, const char *p)
{
	char *copy = strdup(p);

	if (copy == NULL || rp_store_job_phase(w->j->st, w->id, p) != RP_ERR_OK) {
		free(copy);
		return -1;
	}
	free(w->claim->phase);
	w->claim->phase = copy;
	w->claim->phase_at = rp_time_now_ms();
	return 0;
}

/* Come back in a while, without counting an attempt. */
static struct rp_job_outcome *
later(struct work *w, const char *why)
{
	struct rp_job_outcome *o = jobs_later(w, WAIT_POLL_MS);

	jobs_set_error(o, "waiting", "%s", why);
	return o;
}

#define CONSOLE_WAIT_MS 5000 /* for the node's console to be up before it boots */

/* Boot device, then power (jobs_boot_action: the node must boot again now). */
static struct rp_job_outcome *
boot_into(struct work *w, enum rp_boot_device dev, int persistent)
{
	struct rp_bmc_err err = {0};
	struct rp_boot want = {.device = dev, .persistent = persistent};
	struct rp_bmc *b;
	enum rp_power now = RP_POWER_UNKNOWN;
	struct rp_job_outcome *o = NULL;

	want.uefi = !strcmp(json_string_value(json_object_get(jobs_params(w), "boot_mode")) ?: "",
	                    "uefi");
	if ((b = jobs_bmc_open(w, &err)) == NULL)
		return jobs_bmc_failure(w, &err, 1);
	if (rp_bmc_boot_set(b, &want, &err) < 0 || rp_bmc_power_get(b, &now, &err) < 0) {
		o = jobs_bmc_failure(w, &err, 1);
		goto out;
	}
	/* Off (or on its way): powering it on waits for room in its rack. */
	if (now != RP_POWER_ON && (o = jobs_power_admit(w)) != NULL)
		goto out;
	/* Its console logs this boot from its first line. */
	jobs_console_wait(w->j, jobs_node_uuid(w), CONSOLE_WAIT_MS);
	if (rp_store_job_mark_sent(w->j->st, w->id) != RP_ERR_OK) {
		struct rp_bmc_err busy = {RP_BMC_BUSY, "could not record progress before acting"};

		o = jobs_bmc_failure(w, &busy, 1);
		if (now != RP_POWER_ON)
			jobs_power_release(w);
		goto out;
	}
	if (rp_bmc_power_set(b, jobs_boot_action(now), &err) < 0)
		o = jobs_bmc_failure(w, &err, err.kind != RP_BMC_TIMEOUT);
	if (now != RP_POWER_ON)
		jobs_power_started(w);
out:
	rp_bmc_close(b);
	return o;
}

static struct rp_job_outcome *
power_off(struct work *w)
{
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	struct rp_job_outcome *o = NULL;

	if ((b = jobs_bmc_open(w, &err)) == NULL)
		return jobs_bmc_failure(w, &err, 1);
	if (rp_bmc_power_set(b, RP_POWER_ACT_OFF, &err) < 0)
		o = jobs_bmc_failure(w, &err, 1);
	rp_bmc_close(b);
	return o;
}

/* A commissioned node's firmware and BIOS as its BMC reports them, for drift from the start.
 * Not a reason to fail the commission: a BMC without Redfish inventory has nothing to say,
 * and a failed read is logged and left to the next refresh. */
static void
firmware_snapshot(struct work *w)
{
	struct rp_bmc_err err = {0};
	struct rp_bmc *b = jobs_bmc_open(w, &err);

	if (b != NULL && jobs_firmware_read(w, b, &err) == 0) {
		rp_bmc_close(b);
		return;
	}
	rp_bmc_close(b);
	if (err.kind != RP_BMC_UNSUPPORTED)
		rp_log_warn("jobs: %s: firmware inventory not read at commissioning: %s",
		            w->node_name, err.msg);
}

/* The image on the server still is the one its sha256 says: checked before the node is
 * touched, so a corrupt image is never written to a disk. */
static struct rp_job_outcome *
verify_image(struct work *w)
{
	json_t *img = json_object_get(jobs_params(w), "image");
	const char *want = json_string_value(json_object_get(img, "sha256"));
	char path[4200], hex[RP_SHA256_HEX];
	uint64_t size = 0;

	snprintf(path, sizeof path, "%s/%s", w->j->o.image_dir ? w->j->o.image_dir : ".",
	         json_string_value(json_object_get(img, "file")));
	if (rp_file_sha256(path, hex, &size) < 0)
		return jobs_failed(w, "image_missing",
		                   "cannot read image %s (%s): nothing was written",
		                   json_string_value(json_object_get(img, "name")), path);
	if (want == NULL || strcmp(hex, want) != 0)
		return jobs_failed(
		        w, "image_corrupt",
		        "image %s does not match its sha256 (recorded %s, the file has %s): "
		        "nothing was written to the node",
		        json_string_value(json_object_get(img, "name")), want ? want : "none", hex);
	return NULL;
}

struct rp_job_outcome *
jobs_run_provision(struct work *w, struct rp_bmc *unused)
{
	int64_t timeout_ms =
	        json_integer_value(json_object_get(jobs_params(w), "timeout_s")) * 1000;
	struct rp_job_outcome *o = NULL;
	json_t *tgt = NULL;
	int rounds;

	(void)unused;

	if (timeout_ms <= 0)
		timeout_ms = 1800 * 1000;
	if (phase(w) == NULL && enter(w, w->type == RP_JOB_DEPLOY ? "verify_image" : "boot") < 0)
		return later(w, "could not record the job's phase");
	for (rounds = 0; rounds < 16; rounds++) {
		const char *p = phase(w);
		int64_t since = w->claim->phase_at;

		if (__atomic_load_n(&w->j->stop, __ATOMIC_RELAXED)) {
			o = NULL;
			goto out;
		}
		if (__atomic_load_n(&w->cancel, __ATOMIC_RELAXED)) {
			o = jobs_outcome(w, RP_JOB_END_CANCELLED);
			jobs_set_error(o, "cancelled", "aborted during %s", p);
			goto out;
		}
		json_decref(tgt);
		tgt = NULL;
		if (rp_store_ssh_target(w->j->st, w->node_id, &tgt) != RP_ERR_OK) {
			o = later(w, "cannot read the node");
			goto out;
		}
		/* Maintenance stops all automation: someone may have hands in the machine, so the
		 * job ends here rather than waiting to power-cycle it once the flag is cleared. */
		if (json_is_true(json_object_get(tgt, "maintenance"))) {
			const char *why =
			        json_string_value(json_object_get(tgt, "maintenance_reason"));

			o = jobs_failed(w, "maintenance",
			                "the node was put in maintenance%s%s during %s; "
			                "clear it and start again",
			                why ? ": " : "", why ? why : "", p);
			break;
		}
		if (!strcmp(p, "verify_image")) {
			if ((o = verify_image(w)) != NULL)
				goto out;
			if (enter(w, "boot") < 0) {
				o = later(w, "could not record the job's phase");
				goto out;
			}
		} else if (!strcmp(p, "boot")) {
			/* After a restart that interrupted it, the power cycle may have happened:
			 * do not cycle a booting machine again, wait for it instead. */
			if (!w->recover && (o = boot_into(w, RP_BOOT_PXE, 0)) != NULL)
				goto out;
			if (enter(w, "wait_agent") < 0) {
				o = later(w, "could not record the job's phase");
				goto out;
			}
		} else if (!strcmp(p, "wait_agent")) {
			json_t *reg = json_object_get(tgt, "registered_at");

			if (json_is_integer(reg) && json_integer_value(reg) >= since) {
				if (enter(w, "steps") < 0) {
					o = later(w, "could not record the job's phase");
					break;
				}
				continue;
			}
			if (rp_time_now_ms() - since > timeout_ms) {
				o = jobs_failed(
				        w, "agent_timeout",
				        "the agent did not register within %lld s after the node "
				        "was "
				        "PXE-booted (check its console, DHCP and the boot profile)",
				        (long long)(timeout_ms / 1000));
				break;
			}
			o = later(w, "waiting for the node's agent to register");
			break;
		} else if (!strcmp(p, "steps")) {
			o = jobs_run_steps(w, NULL);
			if (o == NULL || o->state != RP_JOB_END_SUCCEEDED)
				break; /* failed, cancelled, a retry, a reboot wait, or stopping */
			rp_store_outcome_free(o);
			o = NULL;
			/* Rack acceptance's tests across nodes run in this boot: hold it. */
			if (enter(w, json_is_object(json_object_get(jobs_params(w), "hold"))
			                     ? "hold"
			                     : "finish") < 0) {
				o = later(w, "could not record the job's phase");
				goto out;
			}
		} else if (!strcmp(p, "hold")) {
			json_t *h = json_object_get(jobs_params(w), "hold");
			int64_t limit = json_integer_value(json_object_get(h, "timeout_s")) * 1000;
			int hold = 0;
			enum rp_err he = RP_ERR_OK;

			/* The cap first: nothing may keep a node in the ramdisk past it. A run that
			 * is gone (its rack deleted) holds nothing. */
			if (rp_time_now_ms() - since < (limit > 0 ? limit : 43200 * 1000))
				he = rp_store_accept_holds(
				        w->j->st,
				        json_string_value(json_object_get(h, "run")) ?: "",
				        w->node_id, &hold);
			if (he != RP_ERR_OK && he != RP_ERR_NOT_FOUND) {
				o = later(w, "cannot read the acceptance run holding the node");
				break;
			}
			if (he == RP_ERR_OK && hold) {
				o = later(w,
				          "held in the agent ramdisk for the rack's tests across "
				          "nodes (acceptance)");
				break;
			}
			if (enter(w, "finish") < 0) {
				o = later(w, "could not record the job's phase");
				goto out;
			}
		} else if (!strcmp(p, "finish")) {
			if (w->type == RP_JOB_DEPLOY) {
				/* From now on the machine is meant to boot its new disk,
				 * persistently. */
				if ((o = boot_into(w, RP_BOOT_DISK, 1)) != NULL)
					break;
				if (enter(w, "wait_boot") < 0) {
					o = later(w, "could not record the job's phase");
					goto out;
				}
				continue;
			}
			int off = w->type == RP_JOB_RELEASE ||
			          !json_is_false(json_object_get(jobs_params(w), "power_off"));

			if (w->type == RP_JOB_COMMISSION)
				firmware_snapshot(w);
			if (off && (o = power_off(w)) != NULL)
				break;
			o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
			jobs_set_result(o, json_pack("{s:s}", "phase", "done"));
			/* The node's recorded power follows what the job did, not the next sweep.
			 */
			if (off)
				jobs_set_power(o, "off");
			break;
		} else if (!strcmp(p, "wait_boot")) {
			struct rp_bmc_err err = {0};
			struct rp_bmc *b = jobs_bmc_open(w, &err);
			enum rp_power now = RP_POWER_UNKNOWN;

			if (b == NULL || rp_bmc_power_get(b, &now, &err) < 0) {
				rp_bmc_close(b);
				o = jobs_bmc_failure(w, &err, 1);
				break;
			}
			rp_bmc_close(b);
			if (now == RP_POWER_ON && json_object_get(jobs_params(w), "first_boot")) {
				/* Up is not enough: the OS must say it came up. */
				if (enter(w, "first_boot") < 0) {
					o = later(w, "could not record the job's phase");
					break;
				}
				continue;
			}
			if (now == RP_POWER_ON) {
				o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
				jobs_set_result(
				        o,
				        json_pack("{s:O, s:O, s:s}", "image",
				                  json_object_get(
				                          json_object_get(jobs_params(w), "image"),
				                          "name"),
				                  "disk", json_object_get(jobs_params(w), "disk"),
				                  "power", "on"));
				jobs_set_power(o, "on");
				break;
			}
			if (rp_time_now_ms() - since > timeout_ms) {
				o = jobs_failed(w, "boot_timeout",
				                "the node did not power on from its disk within "
				                "%lld s",
				                (long long)(timeout_ms / 1000));
				break;
			}
			o = later(w, "waiting for the node to come up from its disk");
			break;
		} else if (!strcmp(p, "first_boot")) {
			json_t *fb = json_object_get(jobs_params(w), "first_boot"), *rep = NULL;
			int64_t limit = json_integer_value(json_object_get(fb, "timeout_s")) * 1000;
			enum rp_err e = rp_store_first_boot_get(w->j->st, w->id, &rep);

			if (e == RP_ERR_OK) {
				o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
				jobs_set_result(
				        o,
				        json_pack("{s:O, s:O, s:s, s:o}", "image",
				                  json_object_get(
				                          json_object_get(jobs_params(w), "image"),
				                          "name"),
				                  "disk", json_object_get(jobs_params(w), "disk"),
				                  "power", "on", "first_boot", rep));
				jobs_set_power(o, "on");
				break;
			}
			if (e != RP_ERR_NOT_FOUND) {
				o = later(w, "cannot read the first-boot report");
				break;
			}
			if (rp_time_now_ms() - since > (limit > 0 ? limit : 1800 * 1000)) {
				o = jobs_first_boot_timeout(w, rp_time_now_ms() - since);
				break;
			}
			o = later(w, "waiting for the deployed OS to report its first boot");
			break;
		} else {
			o = jobs_failed(w, "internal", "unknown phase %s", p);
			break;
		}
	}
	if (o == NULL && rounds >= 16)
		o = jobs_failed(w, "internal", "no progress after %d phases", rounds);
out:
	json_decref(tgt);
	return o;
}
