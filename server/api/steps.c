/* Step plans pushed to nodes: POST /v1/nodes/{node}/steps and a job's log. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* Steps jobs retry SSH trouble longer than BMC jobs: a node rebooting or an sshd restarting
 * takes a minute, and the plan resumes where it stopped. */
#define STEPS_MAX_ATTEMPTS 8

/* The job params {plan, recipe?, args?} a request body asks for (other members: `extra`,
 * NULL-terminated, are allowed and left to the caller). 0, or -1 with rs filled. */
static int
plan_params(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *extra, json_t **out)
{
	json_t *body = rq->body, *detail = NULL, *plan = NULL, *recipe = NULL, *v;
	const char *k, *name;
	const char *const *x;
	enum rp_err e;
	int rc = -1;

	json_object_foreach(body, k, v)
	{
		for (x = extra; x && *x && strcmp(*x, k); x++)
			;
		if (strcmp(k, "steps") && strcmp(k, "recipe") && strcmp(k, "args") && !(x && *x)) {
			rp_api_error(
			        rs, RP_ERR_UNKNOWN_FIELD,
			        json_pack("{s:s, s:s}", "field", k, "reason", "unknown field"));
			return -1;
		}
	}
	name = json_string_value(json_object_get(body, "recipe"));
	if ((json_object_get(body, "steps") != NULL) == (json_object_get(body, "recipe") != NULL)) {
		rp_api_error(rs,
		             json_object_get(body, "steps") ? RP_ERR_BAD_REQUEST
		                                            : RP_ERR_MISSING_FIELD,
		             json_pack("{s:s, s:s}", "field", "steps", "reason",
		                       "give either steps or recipe (with args)"));
		return -1;
	}
	if (json_object_get(body, "recipe")) {
		if (name == NULL) {
			rp_api_error(rs, RP_ERR_INVALID_FIELD,
			             json_pack("{s:s, s:s}", "field", "recipe", "reason",
			                       "a recipe name or id"));
			return -1;
		}
		if ((e = rp_store_recipe_get(rq->api->store, name, &recipe)) != RP_ERR_OK) {
			rp_api_reply_ref_error(rs, e, "recipe", "no such recipe");
			return -1;
		}
		if ((e = rp_api_recipe_expand(recipe, json_object_get(body, "args"), &plan,
		                              &detail)) != RP_ERR_OK) {
			rp_api_error(rs, e, detail);
			goto out;
		}
	} else {
		if (json_object_get(body, "args")) {
			rp_api_error(rs, RP_ERR_BAD_REQUEST,
			             json_pack("{s:s, s:s}", "field", "args", "reason",
			                       "args go with a recipe"));
			goto out;
		}
		plan = json_deep_copy(json_object_get(body, "steps"));
	}
	/* A recipe's plan is checked again once its arguments are in: paths, digests, URLs. */
	if ((e = rp_api_plan_check(plan, 0, &detail)) != RP_ERR_OK) {
		if (recipe)
			json_object_set_new(detail, "recipe", json_string(name));
		rp_api_error(rs, e, detail);
		goto out;
	}
	*out = json_pack("{s:O}", "plan", plan);
	if (recipe) {
		json_object_set(*out, "recipe", json_object_get(recipe, "name"));
		json_object_set_new(*out, "args",
		                    json_deep_copy(json_object_get(body, "args")) ?: json_object());
	}
	rc = 0;
out:
	json_decref(recipe);
	json_decref(plan);
	return rc;
}

void
rp_api_nodes_steps(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *params = NULL, *job = NULL, *out = NULL;
	char actor[96], id[RP_UUID_BUF];
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0 || plan_params(rq, rs, NULL, &params) < 0)
		return;
	job = json_pack("{s:s, s:O, s:b, s:i}", "type", "steps", "params", params, "mutating", 1,
	                "max_attempts", STEPS_MAX_ATTEMPTS);
	e = rp_jobs_submit(rq->api->jobs, rq->params[0], job, rp_api_actor(rq, actor), &out,
	                   &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		goto out;
	}
	/* The caller sees the steps as the job will show them. */
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(out, "id")));
	json_decref(out);
	out = NULL;
	if ((e = rp_store_job_get(rq->api->store, id, &out)) != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		goto out;
	}
	snprintf(rs->location, sizeof rs->location, "/v1/jobs/%s", id);
	rs->status = 202;
	rs->body = out;
out:
	json_decref(params);
	json_decref(job);
}

void
rp_api_actions_steps(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const extra[] = {"selector", NULL};
	json_t *detail = NULL, *params = NULL, *job = NULL, *out = NULL;
	json_t *sel = json_object_get(rq->body, "selector");
	char actor[96];
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if (!json_is_object(sel)) {
		rp_api_error(rs, sel ? RP_ERR_INVALID_FIELD : RP_ERR_MISSING_FIELD,
		             json_pack("{s:s, s:s}", "field", "selector", "reason",
		                       "an object with one of rack, tag, class or nodes"));
		return;
	}
	if (plan_params(rq, rs, extra, &params) < 0)
		return;
	job = json_pack("{s:s, s:O, s:b, s:i}", "type", "steps", "params", params, "mutating", 1,
	                "max_attempts", STEPS_MAX_ATTEMPTS);
	e = rp_jobs_submit_batch(rq->api->jobs, sel, job, rp_api_actor(rq, actor), &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		goto out;
	}
	rp_api_reply_at(rs, 202, "/v1/batches", out);
out:
	json_decref(params);
	json_decref(job);
}

void
rp_api_jobs_log(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *off = json_string_value(json_object_get(rq->query, "offset"));
	struct rp_buf b = {0};
	json_t *meta = NULL;
	long long offset = 0;
	char *end;
	enum rp_err e;

	if (off) {
		offset = strtoll(off, &end, 10);
		if (*off == '\0' || *end != '\0' || offset < 0) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "offset must be a byte offset (an integer >= 0)");
			return;
		}
	}
	e = rp_store_job_log(rq->api->store, rq->params[0], offset, &b, &meta);
	if (e != RP_ERR_OK) {
		rp_buf_free(&b);
		rp_api_reply_store_error(rs, e, NULL, "no such job");
		return;
	}
	rs->status = 200;
	rs->text = b.data ? b.data : strdup("");
	rs->text_len = b.len;
	rs->content_type = "text/plain; charset=utf-8";
	json_decref(meta);
}
