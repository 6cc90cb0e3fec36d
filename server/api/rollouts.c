/* Firmware and BIOS rollouts: create (validated and planned in one store call), list, get,
 * pause, resume, abort. The engine (server/rollout) moves them along. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

static const char *const kinds[] = {"firmware", "bios", "bmc_credentials", NULL};
static const char *const requirements[] = {"power_on", "agent_heartbeat", "version_match", NULL};
static const char *const states[] = {"scheduled", "running", "paused",
                                     "completed", "aborted", NULL};

static const struct rp_field gate_fields[] = {
        {"wait_s", RP_F_INT, 0, 0, 86400},
        {"timeout_s", RP_F_INT, 0, 1, 86400},
        {"require", RP_F_ENUM_LIST, 0, 0, 3, requirements},
        {"recipe", RP_F_STR, 0, 1, 128},
        {"args", RP_F_ANY_OBJECT},
        {NULL},
};

static const struct rp_field rollout_fields[] = {
        {"kind", RP_F_ENUM, RP_F_REQUIRED, 0, 0, kinds},
        {"selector", RP_F_OBJECT, RP_F_REQUIRED, 0, 0, NULL, rp_api_selector_fields},
        {"waves", RP_F_ANY_OBJECT},
        {"max_failures", RP_F_INT, 0, 0, 100000},
        {"gate", RP_F_OBJECT, 0, 0, 0, NULL, gate_fields},
        {"start_at", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {NULL},
};

static const struct rp_field resume_fields[] = {
        {"retry_failed", RP_F_BOOL},
        {"max_failures", RP_F_INT, 0, 0, 100000},
        {NULL},
};

/* For `fields=` on the list. */
static const struct rp_field view_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"kind", RP_F_READ_ONLY},
        {"state", RP_F_READ_ONLY},
        {"reason", RP_F_READ_ONLY},
        {"selector", RP_F_READ_ONLY},
        {"waves_spec", RP_F_READ_ONLY},
        {"gate", RP_F_READ_ONLY},
        {"max_failures", RP_F_READ_ONLY},
        {"start_at", RP_F_READ_ONLY},
        {"created_by", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"started_at", RP_F_READ_ONLY},
        {"finished_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {"counts", RP_F_READ_ONLY},
        {"failures", RP_F_READ_ONLY},
        {"wave_count", RP_F_READ_ONLY},
        {"current_wave", RP_F_READ_ONLY},
        {"failed", RP_F_READ_ONLY},
        {"skipped", RP_F_READ_ONLY},
        {"mean_node_ms", RP_F_READ_ONLY},
        {"estimated_finish_at", RP_F_READ_ONLY},
        {NULL},
};

static enum rp_err
bad(json_t **detail, const char *field, const char *reason)
{
	*detail = json_pack("{s:s, s:s}", "field", field, "reason", reason);
	return RP_ERR_INVALID_FIELD;
}

/* waves {canary 0..1000, batch 1..100000 or "1%".."100%", max_per_rack 0..1000}. */
static enum rp_err
waves_check(json_t *w, json_t **detail)
{
	const char *k;
	json_t *v;

	json_object_foreach(w, k, v)
	{
		if (!strcmp(k, "canary")) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > 1000)
				return bad(detail, "waves.canary", "an integer from 0 to 1000");
		} else if (!strcmp(k, "max_per_rack")) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > 1000)
				return bad(detail, "waves.max_per_rack",
				           "an integer from 0 (no cap) to 1000");
		} else if (!strcmp(k, "batch")) {
			if (json_is_integer(v)) {
				if (json_integer_value(v) < 1 || json_integer_value(v) > 100000)
					return bad(detail, "waves.batch",
					           "an integer from 1 to 100000, or a "
					           "percentage such as \"10%\"");
			} else if (json_is_string(v)) {
				const char *p = json_string_value(v);
				size_t n = strlen(p), i;
				long pct;

				for (i = 0; i + 1 < n && isdigit((unsigned char)p[i]); i++)
					;
				pct = atol(p);
				if (n < 2 || n > 4 || i != n - 1 || p[n - 1] != '%' || pct < 1 ||
				    pct > 100)
					return bad(detail, "waves.batch",
					           "a percentage from \"1%\" to \"100%\", "
					           "or a node count");
			} else {
				return bad(detail, "waves.batch",
				           "a node count, or a percentage such as "
				           "\"10%\"");
			}
		} else {
			*detail = json_pack("{s:s, s:s}", "field", "waves", "reason",
			                    "unknown member (canary, batch, max_per_rack)");
			json_object_set_new(*detail, "member", json_string(k));
			return RP_ERR_UNKNOWN_FIELD;
		}
	}
	return RP_ERR_OK;
}

void
rp_api_rollouts_create(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *in = NULL, *gate, *recipe = NULL, *plan = NULL, *out = NULL;
	const char *start = NULL;
	char actor[96];
	int64_t start_ms = 0;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, rollout_fields, 1, &detail)) != RP_ERR_OK ||
	    (e = waves_check(json_object_get(rq->body, "waves"), &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	in = json_deep_copy(rq->body);
	if (json_object_get(in, "waves") == NULL)
		json_object_set_new(in, "waves", json_object());
	if (json_object_get(json_object_get(in, "waves"), "batch") == NULL)
		json_object_set_new(json_object_get(in, "waves"), "batch", json_string("10%"));
	if (json_object_get(in, "max_failures") == NULL)
		json_object_set_new(in, "max_failures", json_integer(0));
	if ((gate = json_object_get(in, "gate")) == NULL)
		json_object_set_new(in, "gate", gate = json_object());
	if (json_object_get(gate, "wait_s") == NULL)
		json_object_set_new(gate, "wait_s", json_integer(0));
	if (json_object_get(gate, "timeout_s") == NULL)
		json_object_set_new(gate, "timeout_s", json_integer(600));
	if (json_object_get(gate, "require") == NULL)
		json_object_set_new(gate, "require", json_array());
	if (json_object_get(gate, "args") && json_object_get(gate, "recipe") == NULL) {
		rp_api_error(rs, RP_ERR_BAD_REQUEST,
		             json_pack("{s:s, s:s}", "field", "gate.args", "reason",
		                       "args go with a recipe"));
		goto out;
	}
	/* The health-check recipe is expanded now: a bad one fails the request, not a wave. */
	if (json_object_get(gate, "recipe")) {
		e = rp_store_recipe_get(rq->api->store,
		                        json_string_value(json_object_get(gate, "recipe")),
		                        &recipe);
		if (e != RP_ERR_OK) {
			rp_api_reply_ref_error(rs, e, "gate.recipe", "no such recipe");
			goto out;
		}
		if ((e = rp_api_recipe_expand(recipe, json_object_get(gate, "args"), &plan,
		                              &detail)) != RP_ERR_OK ||
		    (e = rp_api_plan_check(plan, 0, &detail)) != RP_ERR_OK) {
			json_object_set_new(detail, "recipe",
			                    json_incref(json_object_get(gate, "recipe")));
			rp_api_error(rs, e, detail);
			goto out;
		}
		json_object_set(gate, "recipe", json_object_get(recipe, "name"));
		json_object_set(gate, "plan", plan);
	}
	start = json_string_value(json_object_get(in, "start_at"));
	if (start && rp_time_parse(start, &start_ms) < 0) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "start_at", "reason",
		                       "an RFC 3339 time such as 2026-12-01T02:00:00Z"));
		goto out;
	}
	if (start)
		json_object_set_new(in, "start_at", json_integer(start_ms));
	else
		json_object_del(in, "start_at");
	/* A credential rotation has no version to match; nothing to check before it either
	 * (each job finds out what the BMC takes). */
	if (!strcmp(json_string_value(json_object_get(in, "kind")), "bmc_credentials")) {
		json_t *req = json_object_get(gate, "require"), *v;
		size_t i;

		json_array_foreach(req, i, v)
		{
			if (!strcmp(json_string_value(v), "version_match")) {
				rp_api_error(rs, RP_ERR_INVALID_FIELD,
				             json_pack("{s:s, s:s}", "field", "gate.require",
				                       "reason",
				                       "version_match is for firmware and bios "
				                       "rollouts"));
				goto out;
			}
		}
	} else if ((e = rp_api_preflight(rq->api, in, &detail)) != RP_ERR_OK) {
		/* Whatever a wave's jobs would miss fails the request now, not every node of a
		 * wave. */
		rp_api_error(rs, e, detail);
		goto out;
	}
	e = rp_store_rollout_create(rq->api->store, in, rp_api_actor(rq, actor), &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		goto out;
	}
	rp_api_reply_at(rs, 201, "/v1/rollouts", out);
out:
	json_decref(in);
	json_decref(recipe);
	json_decref(plan);
}

static const char *const list_filters[] = {"state", "kind", NULL};

void
rp_api_rollouts_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_page_req pr;
	struct rp_page pg = {0};
	json_t *filter = NULL;
	char key[128];
	enum rp_err e;

	if (rp_api_query_one_of(rq, rs, "state", states) < 0 ||
	    rp_api_query_one_of(rq, rs, "kind", kinds) < 0)
		return;
	if (rp_api_page_parse(rq, &pr, key, sizeof key, 0, rs) < 0)
		return;
	if (rp_api_filter(rq, list_filters, &filter, rs) < 0)
		return;
	pr.filter = filter;
	if ((e = rp_store_rollout_list(rq->api->store, &pr, &pg)) != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else
		rp_api_page_reply(rq, rs, &pg, 0, view_fields);
	json_decref(filter);
}

void
rp_api_rollouts_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL;
	enum rp_err e = rp_store_rollout_get(rq->api->store, rq->params[0], &out);

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such rollout");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

static void
control(struct rp_api_req *rq, struct rp_api_resp *rs, const char *action)
{
	json_t *detail = NULL, *out = NULL, *opts = rq->body;
	char actor[96];
	enum rp_err e;

	if (opts && !json_is_object(opts)) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "send a JSON object or no body");
		return;
	}
	if (strcmp(action, "resume") == 0 && opts &&
	    (e = rp_api_validate(opts, resume_fields, 0, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if (strcmp(action, "resume") != 0 && opts && json_object_size(opts) > 0) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "%s takes no parameters (send no body or {})",
		              action);
		return;
	}
	e = rp_store_rollout_control(rq->api->store, rq->params[0], action, opts,
	                             rp_api_actor(rq, actor), &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such rollout");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_rollouts_pause(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	control(rq, rs, "pause");
}

void
rp_api_rollouts_resume(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	control(rq, rs, "resume");
}

void
rp_api_rollouts_abort(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	control(rq, rs, "abort");
}
