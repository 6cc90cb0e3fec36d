/* /v1/bios/profiles, /v1/nodes/{node}/bios, /v1/bios/drift */
#include "api.h"

static const char *const bios_methods[] = {"redfish", "agent", NULL};

static const struct rp_field profile_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"node_class", RP_F_NAME, RP_F_NULLABLE},
        {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {"attributes", RP_F_SCALAR_MAP, 0, 0, 2048},
        {"method", RP_F_ENUM, 0, 0, 0, bios_methods},
        {"recipe", RP_F_NAME, RP_F_NULLABLE},
        {"node_count", RP_F_READ_ONLY},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

static const char *const profile_filters[] = {"class", NULL};

static const struct rp_crud profiles = {
        .what = "BIOS profile",
        .collection = "/v1/bios/profiles",
        .spec = profile_fields,
        .filters = profile_filters,
        .sortable = 1,
        RP_CRUD_STORE(bios_profile),
};

/* A reading of actual values, from an operator or a tool (agents and BMCs write directly). */
static const struct rp_field reading_fields[] = {
        {"source", RP_F_NAME, RP_F_REQUIRED},
        {"attributes", RP_F_SCALAR_MAP, RP_F_REQUIRED, 0, 4096},
        {NULL},
};

RP_CRUD_HANDLERS(bios_profiles, &profiles)

void
rp_api_bios_node(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_node_bios, "node");
}

void
rp_api_bios_node_readings(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_reading(rq, rs, reading_fields, "attributes", rp_store_node_bios_set);
}

static const struct rp_field agent_bios_fields[] = {
        {"attributes", RP_F_SCALAR_MAP, RP_F_REQUIRED, 0, 4096},
        {NULL},
};

/* POST /v1/agent/bios: what the node's BIOS tool read (a recipe's bios step with report). */
void
rp_api_agent_bios(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL;
	char actor[96];
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, agent_bios_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	e = rp_store_node_bios_set(rq->api->store, rq->who->id, "agent",
	                           json_object_get(rq->body, "attributes"),
	                           rp_api_actor(rq, actor));
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 204;
}

void
rp_api_bios_drift(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_drift(rq, rs, rp_store_bios_drift);
}

static const struct rp_field apply_fields[] = {
        {"profile", RP_F_NAME, 0},
        {NULL},
};

void
rp_api_bios_apply(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *what, *params;
	const char *profile;
	enum rp_err e;

	if (rq->body && rp_api_need_object(rq, rs) < 0)
		return;
	if (rq->body && (e = rp_api_validate(rq->body, apply_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	profile = json_string_value(json_object_get(rq->body, "profile"));
	/* Refuse now what the job would refuse: no profile applies, an unknown one, and every
	 * thing the apply needs that is missing (BMC, a Redfish driver, attributes, recipe). */
	what = json_pack("{s:s, s:s, s:s?}", "kind", "bios", "node", rq->params[0], "profile",
	                 profile);
	e = rp_api_preflight(rq->api, what, &detail);
	json_decref(what);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		return;
	}
	params = profile ? json_pack("{s:s}", "profile", profile) : json_object();
	rp_api_node_job(rq, rs,
	                json_pack("{s:s, s:o, s:b}", "type", "bios_apply", "params", params,
	                          "mutating", 1));
}
