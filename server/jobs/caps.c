/* Power cap jobs: set a node's planned power limit at its BMC and read it back. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct rp_job_outcome *
jobs_run_power_cap(struct work *w, struct rp_bmc *b)
{
	struct rp_power_limit want = {0}, got = {0};
	struct rp_bmc_err err = {0};
	struct rp_job_outcome *o;
	const char *node = jobs_node_uuid(w);
	int has = 0;
	enum rp_err e;

	e = rp_store_power_cap_target(w->j->st, node, &has, &want.watts);
	if (e == RP_ERR_NOT_FOUND)
		return jobs_failed(w, "no_plan",
		                   "the node has no power cap planned: POST "
		                   "/v1/racks/{rack}/power-cap plans its rack's first");
	if (e != RP_ERR_OK)
		return jobs_fw_store_trouble(w, "the node's planned power cap");
	want.active = has;
	/* Setting a limit twice is harmless: a recovered job simply does it again. */
	if (rp_bmc_power_limit_set(b, &want, &err) < 0 ||
	    rp_bmc_power_limit_get(b, &got, &err) < 0) {
		(void)rp_store_power_cap_seen(w->j->st, node, 0, 0, err.msg);
		if (err.kind == RP_BMC_UNSUPPORTED)
			return jobs_failed(w, "unsupported",
			                   "the BMC offers no power limit (IPMI: DCMI power "
			                   "management; Redfish: PowerLimitWatts or "
			                   "PowerControl.PowerLimit): %s",
			                   err.msg);
		if (err.kind == RP_BMC_REJECTED)
			return jobs_failed(w, "power_cap_rejected",
			                   "the BMC refused a limit of %u W: %s", want.watts,
			                   err.msg);
		return jobs_bmc_failure(w, &err, 1);
	}
	if (rp_store_power_cap_seen(w->j->st, node, got.watts, got.active, NULL) != RP_ERR_OK)
		rp_log_warn("job %s: could not record the BMC's power limit", w->uuid);
	if (got.active != want.active || (want.active && got.watts != want.watts)) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "power_cap_mismatch", "set %s, but the BMC reads back %s %u W",
		               want.active ? "a limit" : "no limit",
		               got.active ? "an active limit of" : "an inactive limit of",
		               got.watts);
		o->bmc_ok = 1;
		return o;
	}
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(o, json_pack("{s:o, s:b}", "limit_w",
	                             got.active ? json_integer(got.watts) : json_null(), "active",
	                             got.active));
	o->bmc_ok = 1;
	return o;
}
