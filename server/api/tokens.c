/* /v1/tokens: admin-only token management. The secret is shown once, at creation. */
#include <string.h>

#include "api.h"
#include "rackpilot/agent.h"

static const char *const role_names[] = {"admin", "operator", "viewer", NULL};

static const struct rp_field token_fields[] = {
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"role", RP_F_ENUM, RP_F_REQUIRED, 0, 0, role_names},
        {"expires_in_s", RP_F_INT, RP_F_NULLABLE, 60, 10.0 * 365 * 86400},
        {NULL},
};

void
rp_api_tokens_create(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL, *exp;
	char secret[RP_TOKEN_BUF], hash[RP_SHA256_HEX], actor[96];
	int64_t expires_at = 0;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, token_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	exp = json_object_get(rq->body, "expires_in_s");
	if (json_is_integer(exp))
		expires_at = rp_time_now_ms() + json_integer_value(exp) * 1000;
	if (rp_api_token_mint(rs, RP_TOKEN_PREFIX_API, secret, hash) < 0)
		return;
	e = rp_store_token_create(rq->api->store,
	                          json_string_value(json_object_get(rq->body, "name")),
	                          json_string_value(json_object_get(rq->body, "role")), hash,
	                          expires_at, rp_api_actor(rq, actor), &out);
	rp_api_reply_token(rs, e, out, secret, "/v1/tokens");
}

void
rp_api_tokens_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *items = NULL;
	enum rp_err e = rp_store_token_list(rq->api->store, &items);

	rp_api_reply_items(rs, e, items);
}

void
rp_api_tokens_revoke(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL;
	enum rp_err e;
	char actor[96];

	if (!rp_uuid_valid(rq->params[0])) {
		rp_api_errorf(rs, RP_ERR_NOT_FOUND, "token ids are UUIDs");
		return;
	}
	e = rp_store_token_revoke(rq->api->store, rq->params[0], rp_api_actor(rq, actor), &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no live token with that id");
		return;
	}
	rs->status = 204;
}
