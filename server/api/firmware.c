/* /v1/firmware/baselines, /v1/nodes/{node}/firmware, /v1/firmware/drift */
#include "api.h"

static const struct rp_field baseline_fields[] = {
    {"id", RP_F_READ_ONLY},
    {"name", RP_F_NAME, RP_F_REQUIRED},
    {"node_class", RP_F_NAME, RP_F_REQUIRED},
    {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
    {"components", RP_F_STRING_MAP, 0, 0, 256},
    {"node_count", RP_F_READ_ONLY},
    {"version", RP_F_READ_ONLY},
    {"created_at", RP_F_READ_ONLY},
    {"updated_at", RP_F_READ_ONLY},
    {NULL},
};

static const char *const baseline_filters[] = {"class", NULL};

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
