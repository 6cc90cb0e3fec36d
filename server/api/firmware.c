/* /v1/firmware/baselines, /v1/nodes/{node}/firmware, /v1/firmware/drift; the pre-flight
 * check of firmware updates, BIOS applies and rollouts. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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
		*detail = json_pack("{s:s, s:s}", "field", "components", "reason",
		                    "at most 256 entries");
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
			continue; /* a patch removing the component; a creation fails in the store
			           */
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
        RP_CRUD_STORE(baseline),
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

RP_CRUD_HANDLERS(baselines, &baselines)

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
	rp_api_node_job(
	        rq, rs,
	        json_pack("{s:s, s:o, s:b}", "type", type, "params", params, "mutating", mutating));
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
	json_t *detail = NULL, *what, *comps, *params;
	enum rp_err e;

	if (rq->body && rp_api_need_object(rq, rs) < 0)
		return;
	if (rq->body && (e = rp_api_validate(rq->body, update_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	comps = json_object_get(rq->body, "components");
	/* Refuse now what the job would refuse: no baseline, a component not in it, and every
	 * thing the update needs that is missing (boot_url, image files, BMC, recipe). */
	what = json_pack("{s:s, s:s, s:O?}", "kind", "firmware", "node", rq->params[0],
	                 "components", comps);
	e = rp_api_preflight(rq->api, what, &detail);
	json_decref(what);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		return;
	}
	params = json_object();
	if (json_array_size(comps) > 0)
		json_object_set(params, "components", comps);
	firmware_job(rq, rs, "firmware_update", 1, params);
}

/* ---- Pre-flight ------------------------------------------------------------------------- */

/* A missing-list entry is {node, need, fix} plus members; at most this many are listed. */
#define PREFLIGHT_MAX 1000

static void need(json_t *missing, const char *node, const char *what, json_t *extra,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
need(json_t *missing, const char *node, const char *what, json_t *extra, const char *fmt, ...)
{
	char fix[512];
	const char *k;
	json_t *o, *v;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fix, sizeof fix, fmt, ap);
	va_end(ap);
	o = json_pack("{s:s, s:s, s:s}", "node", node, "need", what, "fix", fix);
	json_object_foreach(extra, k, v)
	{
		if (!json_is_null(v)) /* optional members (component) only when there is one */
			json_object_set(o, k, v);
	}
	json_decref(extra);
	json_array_append_new(missing, o);
}

/* Required arguments of a recipe that the operation does not supply (given: NULL-terminated). */
static void
recipe_needs(json_t *missing, const char *node, const char *recipe, json_t *params,
             const char *const *given, const char *component)
{
	const char *k;
	json_t *p;
	size_t i;

	if (json_is_null(params)) {
		need(missing, node, "recipe",
		     json_pack("{s:s, s:s?}", "recipe", recipe, "component", component),
		     "create recipe '%s' (/v1/recipes), or name an existing one", recipe);
		return;
	}
	json_object_foreach(params, k, p)
	{
		int ok = 0;

		for (i = 0; given[i]; i++)
			ok |= !strcmp(given[i], k);
		if (!ok && json_is_true(json_object_get(p, "required")))
			need(missing, node, "recipe_argument",
			     json_pack("{s:s, s:s, s:s?}", "recipe", recipe, "argument", k,
			               "component", component),
			     "recipe '%s' requires argument '%s', which this operation does not "
			     "supply "
			     "(it gives %s): make it optional or give it a default",
			     recipe, k,
			     given[0] && !strcmp(given[0], "component")
			             ? "component, version, image_url, sha256"
			             : "settings, attributes, profile");
	}
}

/* BMC address and credentials, as a BMC job needs them (the fake driver needs neither). */
static void
bmc_needs(json_t *missing, json_t *n)
{
	const char *node = json_string_value(json_object_get(n, "node"));
	const char *driver = json_string_value(json_object_get(n, "driver"));

	if (driver == NULL) {
		need(missing, node, "bmc", NULL,
		     "give the node a BMC (PATCH /v1/nodes/%s with bmc {driver, address, username, "
		     "password})",
		     node);
		return;
	}
	if (!strcmp(driver, "fake"))
		return;
	if (!json_is_true(json_object_get(n, "address")))
		need(missing, node, "bmc_address", json_pack("{s:s}", "driver", driver),
		     "set bmc.address of node %s", node);
	if (!json_is_true(json_object_get(n, "username")) ||
	    !json_is_true(json_object_get(n, "password")))
		need(missing, node, "bmc_credentials", json_pack("{s:s}", "driver", driver),
		     "set bmc.username and bmc.password of node %s", node);
}

/* The driver cannot do `what` (Redfish only). */
static void
redfish_needs(json_t *missing, json_t *n, const char *what, const char *component)
{
	const char *node = json_string_value(json_object_get(n, "node"));
	const char *driver = json_string_value(json_object_get(n, "driver"));

	if (driver == NULL || !strcmp(driver, "redfish"))
		return;
	need(missing, node, "unsupported",
	     json_pack("{s:s, s:s, s:s?}", "driver", driver, "operation", what, "component",
	               component),
	     "%s needs a Redfish BMC; driver %s cannot do it (use method agent, or a Redfish BMC)",
	     what, driver);
}

json_t *
rp_api_preflight_check(json_t *facts, json_t *images, const char *image_url)
{
	static const char *const fw_given[] = {"component", "version", "image_url", "sha256", NULL};
	static const char *const bios_given[] = {"settings", "attributes", "profile", NULL};
	int fw = !strcmp(json_string_value(json_object_get(facts, "kind")) ?: "", "firmware");
	int have_url = image_url && image_url[0];
	json_t *missing = json_array(), *n, *t;
	size_t i, j;

	json_array_foreach(json_object_get(facts, "nodes"), i, n)
	{
		const char *node = json_string_value(json_object_get(n, "node"));
		json_t *fetched = json_array();

		bmc_needs(missing, n);
		if (!fw) {
			json_t *p = json_object_get(n, "profile");
			const char *pname = json_string_value(json_object_get(p, "name"));
			const char *method =
			        json_string_value(json_object_get(p, "method")) ?: "redfish";

			if (json_integer_value(json_object_get(p, "attributes")) == 0)
				need(missing, node, "attributes",
				     json_pack("{s:s}", "profile", pname),
				     "BIOS profile '%s' sets no attributes: add some", pname);
			if (!strcmp(method, "agent"))
				recipe_needs(missing, node,
				             json_string_value(json_object_get(p, "recipe")) ?: "",
				             json_object_get(p, "recipe_params"), bios_given, NULL);
			else
				redfish_needs(missing, n, "a BIOS apply by method redfish", NULL);
			json_decref(fetched);
			continue;
		}
		json_array_foreach(json_object_get(n, "targets"), j, t)
		{
			const char *comp = json_string_value(json_object_get(t, "component"));
			const char *method =
			        json_string_value(json_object_get(t, "method")) ?: "redfish";
			const char *image = json_string_value(json_object_get(t, "image"));
			json_t *img = image ? json_object_get(images, image) : NULL;
			const char *st = json_string_value(json_object_get(img, "state")) ?: "ok";

			if (image == NULL)
				need(missing, node, "image", json_pack("{s:s}", "component", comp),
				     "component %s names no image in the image store: register or "
				     "upload "
				     "it (/v1/images) and name it in the baseline",
				     comp);
			else if (!strcmp(st, "missing") || !strcmp(st, "size"))
				need(missing, node, "image_file",
				     json_pack("{s:s, s:s, s:s}", "component", comp, "image", image,
				               "reason",
				               !strcmp(st, "missing")
				                       ? "the file is missing"
				                       : "the file changed size since it "
				                         "was registered"),
				     "upload image %s again (PUT /v1/images/%s)", image, image);
			else if (!strcmp(st, "digest"))
				need(missing, node, "image_digest",
				     json_pack("{s:s, s:s, s:O?, s:O?}", "component", comp, "image",
				               image, "expected", json_object_get(t, "sha256"),
				               "found", json_object_get(img, "sha256")),
				     "the file of image %s does not match its recorded sha256: "
				     "upload it "
				     "again (PUT /v1/images/%s)",
				     image, image);
			if (!strcmp(method, "agent")) {
				recipe_needs(missing, node,
				             json_string_value(json_object_get(t, "recipe")) ?: "",
				             json_object_get(t, "recipe_params"), fw_given, comp);
				json_array_append_new(fetched, json_string(comp));
			} else {
				redfish_needs(missing, n,
				              !strcmp(method, "redfish")
				                      ? "a firmware update by SimpleUpdate"
				                      : "a firmware update by "
				                        "multipart push",
				              comp);
				if (!strcmp(method, "redfish"))
					json_array_append_new(fetched, json_string(comp));
			}
		}
		/* The BMC (SimpleUpdate) or the agent downloads the image from Rackpilot. */
		if (!have_url && json_array_size(fetched) > 0)
			need(missing, node, "boot_url", json_pack("{s:O}", "components", fetched),
			     "set boot_url in rackpilotd.conf (the base URL BMCs and agents fetch "
			     "/boot/images/ from), or listen on a concrete address");
		json_decref(fetched);
	}
	return missing;
}

enum rp_err
rp_api_preflight(struct rp_api *api, json_t *what, json_t **detail)
{
	json_t *facts = NULL, *images = json_object(), *missing = NULL, *n, *t;
	enum rp_err e;
	size_t i, j, total;

	if ((e = rp_store_preflight(api->store, what, &facts, detail)) != RP_ERR_OK)
		goto out;
	/* Each image once, whatever the number of nodes. */
	json_array_foreach(json_object_get(facts, "nodes"), i, n)
	{
		json_array_foreach(json_object_get(n, "targets"), j, t)
		{
			const char *image = json_string_value(json_object_get(t, "image"));
			const char *file = json_string_value(json_object_get(t, "file"));
			const char *want = json_string_value(json_object_get(t, "sha256"));
			char path[4200], hex[RP_SHA256_HEX];
			uint64_t size = 0;
			struct stat sb;

			if (image == NULL || file == NULL || json_object_get(images, image))
				continue;
			snprintf(path, sizeof path, "%s/%s", api->image_dir ?: ".", file);
			if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode) ||
			    rp_file_sha256(path, hex, &size) < 0)
				json_object_set_new(images, image,
				                    json_pack("{s:s}", "state", "missing"));
			else if ((json_int_t)size != json_integer_value(json_object_get(t, "size")))
				json_object_set_new(images, image,
				                    json_pack("{s:s}", "state", "size"));
			else if (want == NULL || strcasecmp(want, hex) != 0)
				json_object_set_new(
				        images, image,
				        json_pack("{s:s, s:s}", "state", "digest", "sha256", hex));
			else
				json_object_set_new(images, image,
				                    json_pack("{s:s}", "state", "ok"));
		}
	}
	missing = rp_api_preflight_check(facts, images, api->image_url);
	if ((total = json_array_size(missing)) == 0) {
		e = RP_ERR_OK;
		goto out;
	}
	while (json_array_size(missing) > PREFLIGHT_MAX)
		json_array_remove(missing, json_array_size(missing) - 1);
	*detail =
	        json_pack("{s:s, s:O, s:I}", "reason",
	                  "the operation cannot start: what each node needs is listed in missing; "
	                  "nothing was started or stored",
	                  "missing", missing, "count", (json_int_t)total);
	e = RP_ERR_PREFLIGHT_FAILED;
out:
	json_decref(facts);
	json_decref(images);
	json_decref(missing);
	return e;
}
