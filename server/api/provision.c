/*
 * PUT /v1/nodes/{node}/provision: the lifecycle actions (docs/provisioning.md). The handler
 * turns an action into its job: the plan a commission, deploy or release runs on the node's
 * agent, built from recipes, the image store and the node's inventory; the store checks the
 * state machine and writes job and state together.
 */
#include <stdio.h>
#include <string.h>

#include "api.h"

static const char *const actions[] = {"manage",  "adopt", "commission", "deploy",
                                      "release", "abort", NULL};
static const char *const boot_modes[] = {"uefi", "legacy", NULL};
static const char *const wipes[] = {"metadata", "full", NULL};

static const struct rp_field bare_fields[] = {
        {"action", RP_F_ENUM, RP_F_REQUIRED, 0, 0, actions},
        {NULL},
};

static const struct rp_field commission_fields[] = {
        {"action", RP_F_ENUM, RP_F_REQUIRED, 0, 0, actions},
        {"timeout_s", RP_F_INT, 0, 30, 86400},
        {"power_off", RP_F_BOOL},
        {"boot_mode", RP_F_ENUM, 0, 0, 0, boot_modes},
        {NULL},
};

static const struct rp_field deploy_fields[] = {
        {"action", RP_F_ENUM, RP_F_REQUIRED, 0, 0, actions},
        {"image", RP_F_NAME, RP_F_REQUIRED},
        {"disk", RP_F_STR, 0, 0, 256},
        {"recipe", RP_F_NAME, 0},
        {"args", RP_F_ANY_OBJECT},
        {"timeout_s", RP_F_INT, 0, 30, 86400},
        {"boot_mode", RP_F_ENUM, 0, 0, 0, boot_modes},
        {NULL},
};

static const struct rp_field release_fields[] = {
        {"action", RP_F_ENUM, RP_F_REQUIRED, 0, 0, actions},
        {"wipe", RP_F_ENUM, 0, 0, 0, wipes},
        {"timeout_s", RP_F_INT, 0, 30, 86400},
        {"boot_mode", RP_F_ENUM, 0, 0, 0, boot_modes},
        {NULL},
};

/* Append a recipe's expanded steps to plan. 0; 1 when there is no such recipe; -1 with rs
 * filled on error. */
static int
add_recipe(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name, json_t *args,
           json_t *plan)
{
	json_t *recipe = NULL, *steps = NULL, *detail = NULL;
	enum rp_err e = rp_store_recipe_get(rq->api->store, name, &recipe);

	if (e == RP_ERR_NOT_FOUND)
		return 1;
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return -1;
	}
	if ((e = rp_api_recipe_expand(recipe, args, &steps, &detail)) != RP_ERR_OK) {
		json_object_set_new(detail, "recipe", json_string(name));
		rp_api_error(rs, e, detail);
		json_decref(recipe);
		return -1;
	}
	json_array_extend(plan, steps);
	json_decref(steps);
	json_decref(recipe);
	return 0;
}

/* The node's disks as the agent last reported them: [{name, removable}] or NULL. */
static json_t *
disks(struct rp_api_req *rq)
{
	json_t *inv = NULL, *items;
	enum rp_err e = rp_store_node_inventory(rq->api->store, rq->params[0], &inv);

	if (e != RP_ERR_OK)
		return NULL;
	items = json_object_get(json_object_get(json_object_get(inv, "data"), "disks"), "items");
	items = json_is_array(items) ? json_incref(items) : NULL;
	json_decref(inv);
	return items;
}

int
rp_api_commission_plan(struct rp_api_req *rq, struct rp_api_resp *rs, const char *cls, json_t **out)
{
	json_t *plan = json_array();
	char name[96];
	int r;

	if ((r = add_recipe(rq, rs, "commission", NULL, plan)) < 0)
		goto fail;
	if (r == 1)
		json_array_append_new(
		        plan, json_pack("{s:s, s:s}", "id", "inventory", "type", "inventory"));
	if (cls) {
		snprintf(name, sizeof name, "commission-%s", cls);
		if (add_recipe(rq, rs, name, NULL, plan) < 0)
			goto fail;
	}
	*out = plan;
	return 0;
fail:
	json_decref(plan);
	return -1;
}

int
rp_api_recipe_steps(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name, json_t *args,
                    json_t *plan)
{
	int r = add_recipe(rq, rs, name, args, plan);

	if (r == 1)
		rp_api_reply_ref_error(rs, RP_ERR_NOT_FOUND, "recipe", "no such recipe");
	return r == 0 ? 0 : -1;
}

static int
commission_plan(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *params)
{
	json_t *plan = NULL, *node = NULL;
	int rc = -1;

	/* An unknown node gets its 404 from the lifecycle call; the plan is the classless one. */
	if (rp_store_node_get(rq->api->store, rq->params[0], &node) != RP_ERR_OK)
		node = NULL;
	if (rp_api_commission_plan(rq, rs, json_string_value(json_object_get(node, "node_class")),
	                           &plan) == 0) {
		json_object_set_new(params, "plan", plan);
		rc = 0;
	}
	json_decref(node);
	return rc;
}

static int
deploy_plan(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *params)
{
	const char *image = json_string_value(json_object_get(rq->body, "image"));
	const char *disk = json_string_value(json_object_get(rq->body, "disk"));
	const char *recipe = json_string_value(json_object_get(rq->body, "recipe"));
	json_t *img = NULL, *plan = NULL, *d = NULL, *item;
	char dev[300], url[128];
	size_t i;
	enum rp_err e;

	if ((e = rp_store_image_get(rq->api->store, image, &img)) != RP_ERR_OK) {
		rp_api_reply_ref_error(rs, e, "image", "no such image");
		return -1;
	}
	if (disk == NULL) {
		/* The first fixed disk the agent saw when the node was commissioned. */
		d = disks(rq);
		json_array_foreach(d, i, item)
		{
			if (json_is_true(json_object_get(item, "removable")) ||
			    !json_is_string(json_object_get(item, "name")))
				continue;
			snprintf(dev, sizeof dev, "/dev/%s",
			         json_string_value(json_object_get(item, "name")));
			disk = dev;
			break;
		}
		if (disk == NULL) {
			rp_api_error(rs, RP_ERR_CONFLICT,
			             json_pack("{s:s, s:s}", "field", "disk", "reason",
			                       "the node's inventory shows no fixed disk: "
			                       "commission it, or "
			                       "give disk"));
			goto fail;
		}
	} else if (disk[0] != '/') {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "disk", "reason",
		                       "an absolute device path, e.g. /dev/nvme0n1"));
		goto fail;
	}
	snprintf(url, sizeof url, "/boot/images/%s",
	         json_string_value(json_object_get(img, "name")));
	plan = json_pack("[{s:s, s:s, s:s, s:O, s:s, s:i}]", "id", "image", "type", "image", "url",
	                 url, "sha256", json_object_get(img, "sha256"), "device", disk, "timeout_s",
	                 7200);
	if (recipe) {
		int r = add_recipe(rq, rs, recipe, json_object_get(rq->body, "args"), plan);

		if (r < 0)
			goto fail;
		if (r == 1) {
			rp_api_reply_ref_error(rs, RP_ERR_NOT_FOUND, "recipe", "no such recipe");
			goto fail;
		}
	}
	json_object_set_new(params, "plan", plan);
	json_object_set_new(params, "image",
	                    json_pack("{s:O, s:O, s:O, s:O}", "name", json_object_get(img, "name"),
	                              "sha256", json_object_get(img, "sha256"), "size",
	                              json_object_get(img, "size"), "file",
	                              json_object_get(img, "file")));
	json_object_set_new(params, "disk", json_string(disk));
	json_decref(img);
	json_decref(d);
	return 0;
fail:
	json_decref(img);
	json_decref(plan);
	json_decref(d);
	return -1;
}

static int
release_plan(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *params)
{
	const char *wipe = json_string_value(json_object_get(rq->body, "wipe")) ?: "metadata";
	json_t *d = disks(rq), *plan = json_array(), *item;
	char cmd[600], id[80];
	size_t i;

	json_array_foreach(d, i, item)
	{
		const char *name = json_string_value(json_object_get(item, "name"));

		if (name == NULL || json_is_true(json_object_get(item, "removable")) ||
		    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(name))
			continue;
		if (!strcmp(wipe, "full"))
			/* dd ends with "no space left" at the end of the device: check the result.
			 */
			snprintf(cmd, sizeof cmd,
			         "dd if=/dev/zero of=/dev/%s bs=4M conv=fsync 2>&1 | tail -n 2; "
			         "cmp -n 1048576 /dev/%s /dev/zero && echo wiped /dev/%s",
			         name, name, name);
		else
			/* Partition tables (MBR, GPT and its backup), filesystem and RAID
			 * signatures live in the first and last MiB. */
			snprintf(cmd, sizeof cmd,
			         "d=/dev/%s; s=$(blockdev --getsize64 $d) && "
			         "dd if=/dev/zero of=$d bs=1M count=1 conv=fsync 2>/dev/null && "
			         "dd if=/dev/zero of=$d bs=1M seek=$(( s / 1048576 - 1 )) count=1 "
			         "conv=fsync "
			         "2>/dev/null && cmp -n 1048576 $d /dev/zero && echo wiped the "
			         "ends of $d",
			         name);
		snprintf(id, sizeof id, "wipe-%s", name);
		json_array_append_new(plan, json_pack("{s:s, s:s, s:s, s:i}", "id", id, "type",
		                                      "shell", "command", cmd, "timeout_s", 86400));
	}
	json_decref(d);
	if (json_array_size(plan) == 0)
		json_array_append_new(plan, json_pack("{s:s, s:s, s:s}", "id", "nothing-to-wipe",
		                                      "type", "shell", "command",
		                                      "echo the inventory lists no fixed disk"));
	(void)rs;
	json_object_set_new(params, "plan", plan);
	json_object_set_new(params, "wipe", json_string(wipe));
	return 0;
}

void
rp_api_nodes_provision(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *action = json_string_value(json_object_get(rq->body, "action"));
	const struct rp_field *spec = bare_fields;
	json_t *detail = NULL, *params = NULL, *job = NULL, *out = NULL, *t;
	char actor[96], jid[RP_UUID_BUF];
	const char *type = NULL;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if (action && !strcmp(action, "commission"))
		spec = commission_fields;
	else if (action && !strcmp(action, "deploy"))
		spec = deploy_fields;
	else if (action && !strcmp(action, "release"))
		spec = release_fields;
	if ((e = rp_api_validate(rq->body, spec, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	rp_api_actor(rq, actor);
	if (!strcmp(action, "abort")) {
		e = rp_store_provision_abort(rq->api->store, rq->params[0], actor, jid, sizeof jid,
		                             &detail);
		if (e == RP_ERR_OK && jid[0])
			e = rp_jobs_cancel(rq->api->jobs, jid, actor, &out, &detail);
		if (e != RP_ERR_OK) {
			rp_api_reply_store_error(rs, e, detail, "no such node");
			return;
		}
		json_decref(out);
		out = NULL;
		if ((e = rp_store_node_get(rq->api->store, rq->params[0], &out)) != RP_ERR_OK) {
			rp_api_error(rs, e, NULL);
			return;
		}
		rs->status = jid[0] ? 202 : 200;
		rs->body = out;
		return;
	}
	params = json_object();
	t = json_object_get(rq->body, "timeout_s");
	json_object_set_new(params, "timeout_s",
	                    json_integer(json_is_integer(t)
	                                         ? json_integer_value(t)
	                                         : (json_int_t)rq->api->provision_timeout_s));
	json_object_set_new(
	        params, "boot_mode",
	        json_string(json_string_value(json_object_get(rq->body, "boot_mode")) ?: "legacy"));
	if (!strcmp(action, "manage")) {
		type = "verify";
	} else if (!strcmp(action, "commission")) {
		type = "commission";
		json_object_set_new(
		        params, "power_off",
		        json_boolean(!json_is_false(json_object_get(rq->body, "power_off"))));
		if (commission_plan(rq, rs, params) < 0)
			goto out;
	} else if (!strcmp(action, "deploy")) {
		type = "deploy";
		if (deploy_plan(rq, rs, params) < 0)
			goto out;
	} else if (!strcmp(action, "release")) {
		type = "release";
		if (release_plan(rq, rs, params) < 0)
			goto out;
	}
	if (json_object_get(params, "plan") &&
	    (e = rp_api_plan_check(json_object_get(params, "plan"), 0, &detail)) != RP_ERR_OK) {
		json_object_set_new(
		        detail, "reason_context",
		        json_string("the plan this action built from recipes is invalid"));
		rp_api_error(rs, RP_ERR_CONFLICT, detail);
		goto out;
	}
	if (type)
		job = json_pack("{s:s, s:O, s:b, s:i}", "type", type, "params", params, "mutating",
		                strcmp(type, "verify") != 0, "max_attempts", 8);
	e = rp_jobs_provision(rq->api->jobs, rq->params[0], action, job, actor, &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		goto out;
	}
	rs->status = json_is_object(json_object_get(out, "job")) ? 202 : 200;
	if (json_is_object(json_object_get(out, "job")))
		snprintf(rs->location, sizeof rs->location, "/v1/jobs/%s",
		         json_string_value(json_object_get(json_object_get(out, "job"), "id")));
	rs->body = out;
out:
	json_decref(params);
	json_decref(job);
}
