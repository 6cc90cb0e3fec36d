/* /v1/node-classes (bills of materials) and /v1/racks/{rack}/cabling: acceptance's plan. */
#include <string.h>

#include "accept/accept.h"
#include "api.h"
#include "deploy/deploy.h"

static const struct rp_field credentials_fields[] = {
        {"rotate_on_enroll", RP_F_BOOL},
        {"length", RP_F_INT, 0, 8, 64},
        {"symbols", RP_F_BOOL},
        {NULL},
};

const struct rp_field rp_api_class_fields[] = {
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {"bom", RP_F_ANY_OBJECT},
        {"node_count", RP_F_READ_ONLY},
        {"max_power_w", RP_F_INT, RP_F_NULLABLE, 0, 1000000},
        {"idle_power_w", RP_F_INT, RP_F_NULLABLE, 0, 1000000},
        {"bmc_credentials", RP_F_OBJECT, RP_F_NULLABLE, 0, 0, NULL, credentials_fields},
        /* What deploys of the class's nodes carry (docs/deploy.md); its user_data is
         * write-only (sealed; deploy_user_data says whether there is one). */
        {"deploy_defaults", RP_F_CHECK, RP_F_NULLABLE, 0, 0, NULL, NULL, rp_deploy_config_check},
        {"deploy_user_data", RP_F_READ_ONLY},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

void
rp_api_classes_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL;
	enum rp_err e = rp_store_class_list(rq->api->store, &out);

	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_classes_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL;
	enum rp_err e = rp_store_class_get(rq->api->store, rq->params[0], &out);

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node class");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

/* PUT: the whole class (its bill of materials replaced), created when new. */
void
rp_api_classes_put(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *in = NULL, *detail = NULL, *out = NULL;
	char actor[96];
	enum rp_err e;
	int created = 0;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	in = json_deep_copy(rq->body);
	if (json_object_get(in, "name") &&
	    strcmp(json_string_value(json_object_get(in, "name")) ?: "", rq->params[0]) != 0) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "name", "reason",
		                       "must equal the class named in the path"));
		goto out;
	}
	json_object_set_new(in, "name", json_string(rq->params[0]));
	/* No bill of materials: an empty one (what the store keeps). */
	if (json_object_get(in, "bom") == NULL)
		json_object_set_new(in, "bom", json_object());
	if ((e = rp_api_validate(in, rp_api_class_fields, 1, &detail)) != RP_ERR_OK ||
	    (e = rp_accept_bom_check(json_object_get(in, "bom"), &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		goto out;
	}
	if (json_is_integer(json_object_get(in, "max_power_w")) &&
	    json_is_integer(json_object_get(in, "idle_power_w")) &&
	    json_integer_value(json_object_get(in, "idle_power_w")) >
	            json_integer_value(json_object_get(in, "max_power_w"))) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "idle_power_w", "reason",
		                       "must not be above max_power_w"));
		goto out;
	}
	e = rp_store_class_put(rq->api->store, in, rp_api_actor(rq, actor), &out, &created);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		goto out;
	}
	rs->status = created ? 201 : 200;
	rs->body = out;
out:
	json_decref(in);
}

void
rp_api_classes_delete(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	char actor[96];
	enum rp_err e =
	        rp_store_class_delete(rq->api->store, rq->params[0], rp_api_actor(rq, actor));

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node class");
		return;
	}
	rs->status = 204;
}

void
rp_api_cabling_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL;
	enum rp_err e = rp_store_cabling_get(rq->api->store, rq->params[0], &out);

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such rack");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

/* PUT {entries: [...]}: the rack's whole plan, replaced in one transaction. */
void
rp_api_cabling_put(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *entries, *en, *detail = NULL, *out = NULL;
	const char *k;
	json_t *v;
	char actor[96];
	enum rp_err e;
	size_t i;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	json_object_foreach(rq->body, k, v)
	{
		if (strcmp(k, "entries") != 0) {
			rp_api_error(rs, RP_ERR_UNKNOWN_FIELD,
			             json_pack("{s:s, s:s}", "field", k, "reason",
			                       "the body is {entries}"));
			return;
		}
	}
	entries = json_object_get(rq->body, "entries");
	if (!json_is_array(entries) || json_array_size(entries) > 10000) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "entries", "reason",
		                       "must be an array of at most 10000 cabling entries"));
		return;
	}
	json_array_foreach(entries, i, en)
	{
		if ((e = rp_accept_cable_check(en, &detail)) != RP_ERR_OK) {
			char field[64];

			snprintf(field, sizeof field, "entries[%zu].%s", i,
			         json_string_value(json_object_get(detail, "field")) ?: "");
			json_object_set_new(detail, "field", json_string(field));
			rp_api_error(rs, e, detail);
			return;
		}
	}
	e = rp_store_cabling_put(rq->api->store, rq->params[0], entries, rp_api_actor(rq, actor),
	                         &detail);
	if (e == RP_ERR_OK)
		e = rp_store_cabling_get(rq->api->store, rq->params[0], &out);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such rack");
		return;
	}
	rs->status = 200;
	rs->body = out;
}
