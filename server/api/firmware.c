/* /v1/firmware/baselines, /v1/nodes/{node}/firmware, /v1/firmware/drift */
#include "api.h"

static const struct rp_field baseline_fields[] = {
    {"id", RP_F_READ_ONLY},
    {"name", RP_F_NAME, RP_F_REQUIRED},
    {"node_class", RP_F_NAME, RP_F_REQUIRED},
    {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
    {"components", RP_F_ANY_OBJECT},
    {"node_count", RP_F_READ_ONLY},
    {"version", RP_F_READ_ONLY},
    {"created_at", RP_F_READ_ONLY},
    {"updated_at", RP_F_READ_ONLY},
    {NULL},
};

static const char *const baseline_filters[] = {"class", NULL};

static const char *const fw_methods[] = {"redfish", "redfish-push", "agent", NULL};

static const struct rp_field component_spec[] = {
    {"version", RP_F_STR, 0, 0, 128},
    {"image", RP_F_NAME, 0},
    {"method", RP_F_ENUM, 0, 0, 0, fw_methods},
    {"recipe", RP_F_NAME, RP_F_NULLABLE},
    {NULL},
};

/* components: {name: {version, image, method?, recipe?}}; a bare string is shorthand for
 * {"version": ...} (in a patch: a new version, same image). Whether the image exists and a
 * component has one is the store's check, after a patch is merged. */
static enum rp_err
baseline_check(json_t *body, json_t **detail)
{
	json_t *comps = json_object_get(body, "components"), *v;
	const char *k;
	char prefix[160];
	void *tmp;
	enum rp_err e;

	if (json_object_size(comps) > 256) {
		*detail = json_pack("{s:s, s:s}", "field", "components", "reason", "at most 256 entries");
		return RP_ERR_INVALID_FIELD;
	}
	json_object_foreach_safe(comps, tmp, k, v)
	{
		snprintf(prefix, sizeof prefix, "components.%.128s", k);
		if (json_is_string(v) && json_string_length(v) <= 128) {
			json_object_set_new(comps, k, json_pack("{s:O}", "version", v));
			continue;
		}
		if (json_is_null(v))
			continue; /* a patch removing the component; a creation fails in the store */
		if (!json_is_object(v)) {
			*detail = json_pack("{s:s, s:s}", "field", prefix, "reason",
			                    "must be an object {version, image, method, recipe}");
			return RP_ERR_INVALID_FIELD;
		}
		if ((e = rp_api_validate(v, component_spec, 0, detail)) != RP_ERR_OK) {
			const char *f = json_string_value(json_object_get(*detail, "field"));

			if (f) {
				char full[320];

				snprintf(full, sizeof full, "%s.%s", prefix, f);
				json_object_set_new(*detail, "field", json_string(full));
			}
			return e;
		}
	}
	return RP_ERR_OK;
}

static const struct rp_crud baselines = {
    .what = "firmware baseline",
    .collection = "/v1/firmware/baselines",
    .spec = baseline_fields,
    .filters = baseline_filters,
    .sortable = 1,
    .create = rp_store_baseline_create,
    .get = rp_store_baseline_get,
    .list = rp_store_baseline_list,
    .update = rp_store_baseline_update,
    .destroy = rp_store_baseline_delete,
    .check = baseline_check,
};

static const struct rp_field component_fields[] = {
    {"component", RP_F_KEY, RP_F_REQUIRED},
    {"version", RP_F_STR, RP_F_REQUIRED, 0, 128},
    {"updateable", RP_F_BOOL},
    {NULL},
};

static const struct rp_field reading_fields[] = {
    {"source", RP_F_NAME, RP_F_REQUIRED},
    {"components", RP_F_LIST, RP_F_REQUIRED, 0, 1024, NULL, component_fields},
    {NULL},
};

void
rp_api_baselines_create(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_create(&baselines, rq, rs);
}

void
rp_api_baselines_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_list(&baselines, rq, rs);
}

void
rp_api_baselines_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_get(&baselines, rq, rs);
}

void
rp_api_baselines_update(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_update(&baselines, rq, rs);
}

void
rp_api_baselines_delete(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_delete(&baselines, rq, rs);
}

void
rp_api_firmware_node(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_node_firmware, "node");
}

void
rp_api_firmware_node_readings(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_reading(rq, rs, reading_fields, "components", rp_store_node_firmware_set);
}

void
rp_api_firmware_drift(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_drift(rq, rs, rp_store_firmware_drift);
}

/* 202 with the job, like every node action. Takes params. */
static void
firmware_job(struct rp_api_req *rq, struct rp_api_resp *rs, const char *type, int mutating,
             json_t *params)
{
	json_t *detail = NULL, *job, *out = NULL;
	enum rp_err e;
	char actor[96];

	job = json_pack("{s:s, s:o, s:b}", "type", type, "params", params, "mutating", mutating);
	e = rp_jobs_submit(rq->api->jobs, rq->params[0], job, rp_api_actor(rq, actor), &out, &detail);
	json_decref(job);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		return;
	}
	snprintf(rs->location, sizeof rs->location, "/v1/jobs/%s",
	         json_string_value(json_object_get(out, "id")));
	rs->status = 202;
	rs->body = out;
}

static int
empty_body(struct rp_api_req *rq, struct rp_api_resp *rs, const char *what)
{
	if (rq->body && !(json_is_object(rq->body) && json_object_size(rq->body) == 0)) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "%s takes no parameters (send no body or {})",
		              what);
		return -1;
	}
	return 0;
}

void
rp_api_firmware_refresh(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	if (empty_body(rq, rs, "a firmware refresh") < 0)
		return;
	firmware_job(rq, rs, "firmware_refresh", 0, json_object());
}

static const struct rp_field update_fields[] = {
    {"components", RP_F_TAGS, 0, 0, 256},
    {NULL},
};

void
rp_api_firmware_update(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *plan = NULL, *comps, *params;
	enum rp_err e;

	if (rq->body && rp_api_need_object(rq, rs) < 0)
		return;
	if (rq->body && (e = rp_api_validate(rq->body, update_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	comps = json_object_get(rq->body, "components");
	/* Refuse now what the job would refuse: no baseline, a component not in it. */
	e = rp_store_firmware_targets(rq->api->store, rq->params[0], comps, &plan, &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		return;
	}
	json_decref(plan);
	params = json_object();
	if (json_array_size(comps) > 0)
		json_object_set(params, "components", comps);
	firmware_job(rq, rs, "firmware_update", 1, params);
}
