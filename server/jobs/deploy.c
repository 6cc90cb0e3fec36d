/*
 * A configured deploy's part in jobs (docs/deploy.md): the seed its image step carries,
 * rendered when the plan is pushed (it holds the first-boot token, which is derived, not
 * stored, and the operator's user data, kept sealed until the job ends), and the failure a
 * deploy ends with when the deployed OS never reports: what its console printed last and
 * what its BMC says of its power.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc/bmc.h"
#include "deploy/deploy.h"
#include "internal.h"

#define CONSOLE_LINES 15

/* Overwrite every string of v (in place), whatever the nesting: seeds and user data. */
static void
wipe_strings(json_t *v)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v), json_string_length(v));
	else if (json_is_object(v))
		json_object_foreach(v, k, x) wipe_strings(x);
	else if (json_is_array(v))
		json_array_foreach(v, i, x) wipe_strings(x);
}

void
jobs_plan_wipe(json_t *plan)
{
	json_t *step;
	size_t i;

	json_array_foreach(plan, i, step) wipe_strings(json_object_get(step, "seed"));
}

json_t *
jobs_plan_expand(struct work *w, json_t *plan, char *why, size_t len)
{
	json_t *params = jobs_params(w), *cfg = json_object_get(params, "seed");
	json_t *fb = json_object_get(params, "first_boot"), *out = NULL, *secret = NULL;
	json_t *resolved = NULL, *seed = NULL, *step;
	struct rp_deploy_report rep = {0};
	char token[160] = "", instance[64];
	size_t i;

	if ((out = json_deep_copy(plan)) == NULL) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	json_array_foreach(out, i, step)
	{
		if (!json_is_object(json_object_get(step, "seed")) || cfg == NULL)
			continue;
		if (rp_store_job_secret(w->j->st, w->id, &secret) != RP_ERR_OK) {
			snprintf(why, len,
			         "cannot open the deploy's sealed user data (the server's "
			         "key file?)");
			goto fail;
		}
		if ((resolved = json_deep_copy(cfg)) == NULL)
			goto oom;
		if (json_object_get(secret, "user_data"))
			json_object_set(resolved, "user_data",
			                json_object_get(secret, "user_data"));
		else
			json_object_set_new(resolved, "user_data", json_array());
		if (fb) {
			if (rp_store_first_boot_token(w->j->st, w->uuid, token, sizeof token) !=
			    RP_ERR_OK) {
				snprintf(why, len, "cannot derive the first-boot token (no key)");
				goto fail;
			}
			rep.url = json_string_value(json_object_get(fb, "url"));
			rep.pin = json_string_value(json_object_get(fb, "pin"));
			rep.token = token;
		}
		snprintf(instance, sizeof instance, "rp-%s", w->uuid);
		if ((seed = rp_deploy_seed(resolved, instance, fb ? &rep : NULL)) == NULL)
			goto oom;
		json_object_set_new(step, "seed", seed);
		seed = NULL;
		wipe_strings(secret);
		json_decref(secret);
		json_decref(resolved);
		secret = resolved = NULL;
	}
	explicit_bzero(token, sizeof token);
	return out;
oom:
	snprintf(why, len, "out of memory rendering the seed");
fail:
	explicit_bzero(token, sizeof token);
	wipe_strings(secret);
	json_decref(secret);
	json_decref(resolved);
	jobs_plan_wipe(out);
	json_decref(out);
	return NULL;
}

struct rp_job_outcome *
jobs_first_boot_timeout(struct work *w, int64_t waited_ms)
{
	struct rp_bmc_err err = {0};
	struct rp_bmc *b = jobs_bmc_open(w, &err);
	enum rp_power now = RP_POWER_UNKNOWN;
	char power[400], *log = NULL, *p;
	size_t n = 0;
	struct rp_job_outcome *o;

	if (b == NULL || rp_bmc_power_get(b, &now, &err) < 0)
		snprintf(power, sizeof power, "its BMC did not say (%s)", err.msg);
	else
		snprintf(power, sizeof power, "its BMC reports power %s",
		         now == RP_POWER_ON    ? "on"
		         : now == RP_POWER_OFF ? "off"
		                               : "unknown");
	rp_bmc_close(b);
	/* What the machine printed last says why, more often than not (a kernel panic, an
	 * emergency shell, a network that never came up). */
	if (rp_jobs_console_log(w->j, jobs_node_uuid(w), CONSOLE_LINES, &log, &n) != RP_ERR_OK)
		log = NULL;
	for (p = log; p && *p; p++)
		if (*p == '"')
			*p = '\'';
	o = jobs_failed(w, "first_boot_timeout",
	                "the deployed OS did not report its first boot within %lld s of the node "
	                "booting its disk; %s; %s%.*s",
	                (long long)(waited_ms / 1000), power,
	                log && n ? "its console's last lines:\n"
	                         : "no console log (console_log off, "
	                           "or no SOL)",
	                (int)(n > 3000 ? 3000 : n),
	                log && n ? log + (n > 3000 ? n - 3000 : 0) : "");
	free(log);
	return o;
}
