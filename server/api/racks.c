/* /v1/racks */
#include "api.h"

const struct rp_field rp_api_rack_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"site", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"row", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"height_u", RP_F_INT, 0, 1, 64},
        {"power_budget_kw", RP_F_NUM, RP_F_NULLABLE, 0, 10000},
        {"notes", RP_F_STR, RP_F_NULLABLE, 0, 4096},
        {"node_count", RP_F_READ_ONLY},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

static const char *const rack_filters[] = {"site", "row", NULL};

static const struct rp_crud racks = {
        .what = "rack",
        .collection = "/v1/racks",
        .spec = rp_api_rack_fields,
        .filters = rack_filters,
        .sortable = 1,
        .create = rp_store_rack_create,
        .get = rp_store_rack_get,
        .list = rp_store_rack_list,
        .update = rp_store_rack_update,
        .destroy = rp_store_rack_delete,
};

void
rp_api_racks_create(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_create(&racks, rq, rs);
}

void
rp_api_racks_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_list(&racks, rq, rs);
}

void
rp_api_racks_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_get(&racks, rq, rs);
}

void
rp_api_racks_update(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_update(&racks, rq, rs);
}

void
rp_api_racks_delete(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_delete(&racks, rq, rs);
}

void
rp_api_racks_elevation(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_rack_elevation, "rack");
}
