/* Power, boot and verify actions on nodes; jobs and batches; bulk power; power sync. */
#include <string.h>

#include "api.h"
#include "rackpilot/jobtypes.h"

static const char *const power_targets[] = {"on", "off", "soft_off", "cycle", "reset", NULL};
static const char *const boot_devices[] = {"pxe", "disk", NULL};
static const char *const boot_modes[] = {"uefi", "legacy", NULL};
static const char *const job_states[] = {"queued", "running",   "succeeded",
                                         "failed", "cancelled", NULL};

static const struct rp_field power_fields[] = {
        {"target", RP_F_ENUM, RP_F_REQUIRED, 0, 0, power_targets},
        {"timeout_s", RP_F_INT, 0, 1, 3600},
        {"force", RP_F_BOOL},
        {NULL},
};

static const struct rp_field boot_fields[] = {
        {"device", RP_F_ENUM, RP_F_REQUIRED, 0, 0, boot_devices},
        {"persistent", RP_F_BOOL},
        {"mode", RP_F_ENUM, 0, 0, 0, boot_modes},
        {NULL},
};

static const struct rp_field bulk_power_fields[] = {
        {"selector", RP_F_OBJECT, RP_F_REQUIRED, 0, 0, NULL, rp_api_selector_fields},
        {"target", RP_F_ENUM, RP_F_REQUIRED, 0, 0, power_targets},
        {"timeout_s", RP_F_INT, 0, 1, 3600},
        {"force", RP_F_BOOL},
        {NULL},
};

/* A power request's params: force (past the rack's power-on admission) is an admin's alone,
 * and names who forced it for the event that records it. NULL with 403 replied. */
static json_t *
power_params(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *params = json_deep_copy(rq->body);
	char actor[96];

	json_object_del(params, "selector");
	if (!json_is_true(json_object_get(params, "force"))) {
		json_object_del(params, "force");
		return params;
	}
	if (rq->who == NULL || rq->who->role != RP_ROLE_ADMIN) {
		json_decref(params);
		rp_api_errorf(rs, RP_ERR_FORBIDDEN,
		              "force (power on past the rack's budget and stagger) needs an admin "
		              "token");
		return NULL;
	}
	json_object_set_new(params, "forced_by", json_string(rp_api_actor(rq, actor)));
	return params;
}

static const struct rp_field job_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"type", RP_F_READ_ONLY},
        {"node", RP_F_READ_ONLY},
        {"batch", RP_F_READ_ONLY},
        {"params", RP_F_READ_ONLY},
        {"state", RP_F_READ_ONLY},
        {"attempts", RP_F_READ_ONLY},
        {"max_attempts", RP_F_READ_ONLY},
        {"cancel_requested", RP_F_READ_ONLY},
        {"result", RP_F_READ_ONLY},
        {"error", RP_F_READ_ONLY},
        {"created_by", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"started_at", RP_F_READ_ONLY},
        {"finished_at", RP_F_READ_ONLY},
        {"not_before", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

/* Queue a job of type (mutating as its row in rackpilot/jobtypes.h says) with these
 * (validated) params for the node in params[0]. */
static void
node_job(struct rp_api_req *rq, struct rp_api_resp *rs, enum rp_job_type type, json_t *params)
{
	const struct rp_job_type_entry *t = rp_job_type_get(type);

	rp_api_node_job(rq, rs,
	                json_pack("{s:s, s:O, s:b}", "type", t->name, "params", params, "mutating",
	                          t->mutating));
}

void
rp_api_nodes_power(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *params;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, power_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if ((params = power_params(rq, rs)) == NULL)
		return;
	node_job(rq, rs, RP_JOB_POWER, params);
	json_decref(params);
}

void
rp_api_nodes_boot(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *params;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, boot_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	/* Spell out the defaults in the job, so it says what was asked. */
	params = json_pack("{s:O, s:b, s:s}", "device", json_object_get(rq->body, "device"),
	                   "persistent", json_is_true(json_object_get(rq->body, "persistent")),
	                   "mode", json_string_value(json_object_get(rq->body, "mode")) ?: "uefi");
	node_job(rq, rs, RP_JOB_BOOT, params);
	json_decref(params);
}

void
rp_api_nodes_verify(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *params;

	if (rq->body && !(json_is_object(rq->body) && json_object_size(rq->body) == 0)) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST,
		              "verify takes no parameters (send no body or {})");
		return;
	}
	params = json_object();
	node_job(rq, rs, RP_JOB_VERIFY, params);
	json_decref(params);
}

static const struct rp_field identify_fields[] = {
        {"on", RP_F_BOOL, RP_F_REQUIRED},
        {"seconds", RP_F_INT, 0, 1, 86400},
        {NULL},
};

void
rp_api_nodes_identify(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *params;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, identify_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if (!json_is_true(json_object_get(rq->body, "on")) &&
	    json_object_get(rq->body, "seconds")) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "seconds", "reason",
		                       "only with on: true (how long the light stays on)"));
		return;
	}
	params = json_deep_copy(rq->body);
	node_job(rq, rs, RP_JOB_IDENTIFY, params);
	json_decref(params);
}

static const struct rp_field bmc_reset_fields[] = {
        {"timeout_s", RP_F_INT, 0, 10, 3600},
        {NULL},
};

void
rp_api_nodes_bmc_reset(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *params;
	enum rp_err e;

	if (rq->body &&
	    (e = rp_api_validate(rq->body, bmc_reset_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	params = rq->body ? json_deep_copy(rq->body) : json_object();
	node_job(rq, rs, RP_JOB_BMC_RESET, params);
	json_decref(params);
}

static const struct rp_field rotate_fields[] = {
        {"password", RP_F_STR, RP_F_SECRET, 1, 64},
        {NULL},
};

void
rp_api_nodes_bmc_rotate(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL, *job;
	const char *password = NULL;
	enum rp_err e;
	char actor[96];

	if (rq->body && (e = rp_api_validate(rq->body, rotate_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if ((password = json_string_value(json_object_get(rq->body, "password"))) != NULL &&
	    (rq->who == NULL || rq->who->role != RP_ROLE_ADMIN)) {
		rp_api_errorf(rs, RP_ERR_FORBIDDEN,
		              "setting an explicit BMC password needs an admin token (without one, "
		              "the rotation generates a password)");
		return;
	}
	if (password && password[0] == '\0') {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "password", "reason",
		                       "1 to 64 characters"));
		return;
	}
	/* The job's params never hold the password: it goes to the store, sealed, as pending. */
	job = json_pack("{s:s, s:{s:b}, s:b}", "type", rp_job_type_table[RP_JOB_BMC_ROTATE].name,
	                "params", "explicit", password != NULL, "mutating",
	                rp_job_type_table[RP_JOB_BMC_ROTATE].mutating);
	e = rp_jobs_bmc_rotate(rq->api->jobs, rq->params[0], password, job, rp_api_actor(rq, actor),
	                       &out, &detail);
	json_decref(job);
	/* The request body's copy: sealed in the store now, not left in freed memory. */
	if (password)
		explicit_bzero((char *)password, strlen(password));
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		return;
	}
	rp_api_reply_at(rs, 202, "/v1/jobs", out);
}

void
rp_api_actions_power(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *job, *params, *out = NULL;
	enum rp_err e;
	char actor[96];

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, bulk_power_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if ((params = power_params(rq, rs)) == NULL)
		return;
	job = json_pack("{s:s, s:o, s:b}", "type", rp_job_type_table[RP_JOB_POWER].name, "params",
	                params, "mutating", rp_job_type_table[RP_JOB_POWER].mutating);
	e = rp_jobs_submit_batch(rq->api->jobs, json_object_get(rq->body, "selector"), job,
	                         rp_api_actor(rq, actor), &out, &detail);
	json_decref(job);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	rp_api_reply_at(rs, 202, "/v1/batches", out);
}

static const char *const job_filters[] = {"node", "state", "type", "batch", NULL};

void
rp_api_jobs_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *batch = json_string_value(json_object_get(rq->query, "batch"));
	const char *type = json_string_value(json_object_get(rq->query, "type"));
	struct rp_page_req pr;
	struct rp_page pg = {0};
	json_t *filter = NULL;
	char key[128];
	size_t i;
	enum rp_err e;

	if (rp_api_query_one_of(rq, rs, "state", job_states) < 0)
		return;
	if (type && rp_job_type_find(type) == RP_JOB_UNKNOWN) {
		char names[400];
		size_t n = 0;

		for (i = 0; i < RP_JOB__COUNT && n < sizeof names; i++)
			n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "",
			                      rp_job_type_table[i].name);
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "type must be one of %s", names);
		return;
	}
	if (batch && !rp_uuid_valid(batch)) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "batch must be a batch id");
		return;
	}
	if (rp_api_page_parse(rq, &pr, key, sizeof key, 0, rs) < 0)
		return;
	if (rp_api_filter(rq, job_filters, &filter, rs) < 0)
		return;
	pr.filter = filter;
	e = rp_store_job_list(rq->api->store, &pr, &pg);
	if (e == RP_ERR_BAD_QUERY)
		rp_api_errorf(rs, e, "node or batch in the filter does not exist");
	else if (e != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else
		rp_api_page_reply(rq, rs, &pg, 0, job_fields);
	json_decref(filter);
}

void
rp_api_jobs_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_job_get, "job");
}

void
rp_api_jobs_cancel(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL, *detail = NULL;
	enum rp_err e;
	char actor[96];

	e = rp_jobs_cancel(rq->api->jobs, rq->params[0], rp_api_actor(rq, actor), &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such job");
		return;
	}
	/* A running job stops at its next safe point: accepted, not yet done. */
	rs->status =
	        json_is_true(json_object_get(out, "cancel_requested")) &&
	                        !strcmp(json_string_value(json_object_get(out, "state")), "running")
	                ? 202
	                : 200;
	rs->body = out;
}

void
rp_api_batches_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_batch_get, "batch");
}

void
rp_api_power_sync_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rs->status = 200;
	rs->body = rp_jobs_sweep_status(rq->api->jobs, RP_SWEEP_POWER);
}

void
rp_api_power_sync_start(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	enum rp_err e = rp_jobs_sweep_now(rq->api->jobs, RP_SWEEP_POWER);

	if (e != RP_ERR_OK) {
		rp_api_errorf(rs, e, "a power sync is already running");
		return;
	}
	rs->status = 202;
	rs->body = rp_jobs_sweep_status(rq->api->jobs, RP_SWEEP_POWER);
	snprintf(rs->location, sizeof rs->location, "/v1/power/sync");
}
