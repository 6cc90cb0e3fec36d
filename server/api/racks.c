/* /v1/racks */
#include "api.h"

static const char *const power_cap_policies[] = {"off", "budget", NULL};

const struct rp_field rp_api_rack_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"site", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"row", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"height_u", RP_F_INT, 0, 1, 64},
        {"power_budget_kw", RP_F_NUM, RP_F_NULLABLE, 0, 10000},
        {"power_limit_pct", RP_F_INT, 0, 1, 100},
        {"power_cap", RP_F_ENUM, 0, 0, 0, power_cap_policies},
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
        RP_CRUD_STORE(rack),
};

RP_CRUD_HANDLERS(racks, &racks)

void
rp_api_racks_elevation(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_rack_elevation, "rack");
}
