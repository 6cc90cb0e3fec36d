/*
 * PUT /v1/nodes/{node}/provision: the lifecycle actions (docs/provisioning.md). The handler
 * turns an action into its job: the plan a commission, deploy or release runs on the node's
 * agent, built from recipes, the image store and the node's inventory; the store checks the
 * state machine and writes job and state together.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api.h"
#include "deploy/deploy.h"
#include "rackpilot/agent.h"

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

static const char *const image_formats[] = {"raw", "gzip", "zstd", "xz", "qcow2", NULL};

static const struct rp_field deploy_fields[] = {
        {"action", RP_F_ENUM, RP_F_REQUIRED, 0, 0, actions},
        {"image", RP_F_NAME, RP_F_REQUIRED},
        {"disk", RP_F_STR, 0, 0, 256},
        {"recipe", RP_F_NAME, 0},
        {"args", RP_F_ANY_OBJECT},
        {"timeout_s", RP_F_INT, 0, 30, 86400},
        {"boot_mode", RP_F_ENUM, 0, 0, 0, boot_modes},
        /* docs/deploy.md: what the OS is given, and how it proves it came up. */
        {"config", RP_F_CHECK, 0, 0, 0, NULL, NULL, rp_deploy_config_check},
        {"seed", RP_F_BOOL},
        {"grow", RP_F_BOOL},
        {"first_boot", RP_F_BOOL},
        {"first_boot_timeout_s", RP_F_INT, 0, 10, 7 * 86400},
        {"format", RP_F_ENUM, 0, 0, 0, image_formats},
        {"efi_loader", RP_F_STR, 0, 1, 255},
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

/* The image file's encoding, from its first bytes: "gzip", "zstd", "xz", "qcow2" or "raw",
 * or the name of one the agent cannot write (bzip2, lz4, vmdk, vhdx: *unsupported set);
 * NULL when it cannot be read. The agent checks the same bytes again. */
static const char *
sniff_format(struct rp_api_req *rq, json_t *img, int *unsupported)
{
	static const struct {
		const char *name;
		const char *magic;
		size_t len;
		int ok;
	} magics[] = {
	        {"gzip", "\x1f\x8b", 2, 1},
	        {"zstd", "\x28\xb5\x2f\xfd", 4, 1},
	        {"xz",
	         "\xfd"
	         "7zXZ\x00",
	         6, 1},
	        {"qcow2", "QFI\xfb", 4, 1},
	        {"bzip2", "BZh", 3, 0},
	        {"lz4", "\x04\x22\x4d\x18", 4, 0},
	        {"vmdk", "KDMV", 4, 0},
	        {"vhdx", "vhdxfile", 8, 0},
	};
	unsigned char head[8] = {0};
	char path[4200];
	ssize_t n;
	size_t i;
	int fd;

	*unsupported = 0;
	snprintf(path, sizeof path, "%s/%s", rq->api->image_dir ? rq->api->image_dir : ".",
	         json_string_value(json_object_get(img, "file")) ?: "");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	n = read(fd, head, sizeof head);
	close(fd);
	if (n < 0)
		return NULL;
	/* A zstd skippable frame (pzstd writes one first) starts a zstd file too. */
	if (n >= 4 && (head[0] & 0xf0) == 0x50 && head[1] == 0x2a && head[2] == 0x4d &&
	    head[3] == 0x18)
		return "zstd";
	for (i = 0; i < sizeof magics / sizeof magics[0]; i++)
		if ((size_t)n >= magics[i].len && !memcmp(head, magics[i].magic, magics[i].len)) {
			*unsupported = !magics[i].ok;
			return magics[i].name;
		}
	return "raw";
}

/* An ESP path as efibootmgr takes it: printable ASCII, \EFI\..., no empty component. */
static int
loader_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	return s[0] == '\\' && strstr(s, "\\\\") == NULL;
}

/* The seed resolved would render files the agent takes (each at most RP_SEED_FILE_MAX, the
 * plan at most RP_PLAN_MAX_BYTES): rendered now with a stand-in token of the real one's
 * length, so that a deploy the agent would refuse after the PXE boot is refused here. 0, or
 * -1 with rs filled. */
static int
seed_fits(json_t *resolved, struct rp_api_resp *rs)
{
	char token[RP_UUID_BUF + 72];
	struct rp_deploy_report rep = {"https://host.example:65535/v1/agent/first-boot", token,
	                               NULL};
	const char *k;
	json_t *seed, *v;
	size_t total = 0;
	int rc = -1;

	memset(token, 'x', sizeof token - 1);
	token[sizeof token - 1] = '\0';
	if ((seed = rp_deploy_seed(resolved, "rp-00000000-0000-0000-0000-000000000000", &rep)) ==
	    NULL) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return -1;
	}
	json_object_foreach(seed, k, v)
	{
		char *enc = json_dumps(v, JSON_ENCODE_ANY);

		total += enc ? strlen(enc) : 0;
		free(enc);
		if (json_string_length(v) > RP_SEED_FILE_MAX) {
			rp_api_error(
			        rs, RP_ERR_INVALID_FIELD,
			        json_pack("{s:s, s:s, s:I}", "field", "config", "reason",
			                  "the seed's files hold at most 256 KiB each (fewer keys, "
			                  "shorter user data)",
			                  "file_bytes", (json_int_t)json_string_length(v)));
			goto out;
		}
	}
	/* The rest of the plan is small; leave it 64 KiB. */
	if (total > RP_PLAN_MAX_BYTES - 65536) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "config", "reason",
		                       "the seed would not fit in the agent's plan (1 MiB)"));
		goto out;
	}
	rc = 0;
out:
	rp_deploy_seed_free(seed);
	return rc;
}

/* 1 when host (an authority or address) is a loopback one. */
static int
loopback(const char *host)
{
	return !strncmp(host, "127.", 4) || !strncasecmp(host, "localhost", 9) ||
	       !strncmp(host, "[::1]", 5) || !strcmp(host, "::1");
}

/* The seed a deploy writes (docs/deploy.md): the request's config over the class's
 * defaults, resolved against the node's inventory. The plain part goes to params.seed, the
 * user data (secret) to *secret, the static addresses to params.addresses, and where the
 * first boot reports to params.first_boot. 0, or -1 with rs filled. */
static int
deploy_seed(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *params, json_t **secret)
{
	json_t *node = NULL, *inv = NULL, *defaults = NULL, *resolved = NULL, *detail = NULL;
	const char *cls;
	struct rp_deploy_node dn = {0};
	char url[512], pin[65];
	enum rp_err e;
	int rc = -1;

	if ((e = rp_store_node_get(rq->api->store, rq->params[0], &node)) != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node");
		goto out;
	}
	cls = json_string_value(json_object_get(node, "node_class"));
	if (cls &&
	    (e = rp_store_class_deploy_defaults(rq->api->store, cls, &defaults)) != RP_ERR_OK &&
	    e != RP_ERR_NOT_FOUND) {
		rp_api_error(rs, e, NULL);
		goto out;
	}
	if (rp_store_node_inventory(rq->api->store, rq->params[0], &inv) != RP_ERR_OK)
		inv = NULL;
	dn.name = json_string_value(json_object_get(node, "name"));
	dn.rack = json_string_value(json_object_get(node, "rack"));
	dn.cls = cls;
	dn.macs = json_object_get(node, "macs");
	dn.inventory = json_object_get(inv, "data");
	if ((e = rp_deploy_resolve(defaults, json_object_get(rq->body, "config"), &dn, &resolved,
	                           &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		goto out;
	}
	if (json_array_size(json_object_get(resolved, "user_data")) > 0)
		*secret = json_pack("{s:O}", "user_data", json_object_get(resolved, "user_data"));
	if (seed_fits(resolved, rs) < 0)
		goto out;
	json_object_set(params, "addresses", json_object_get(resolved, "addresses"));
	json_object_del(resolved, "user_data");
	json_object_del(resolved, "addresses");
	json_object_set(params, "seed", resolved);
	if (!json_is_false(json_object_get(rq->body, "first_boot"))) {
		json_t *t = json_object_get(rq->body, "first_boot_timeout_s");

		if (rp_api_first_boot_url(rq, url, sizeof url) < 0) {
			rp_api_errorf(rs, RP_ERR_CONFLICT,
			              "cannot tell where the deployed OS reaches this server: set "
			              "agent_url or boot_url, or give first_boot: false");
			goto out;
		}
		/* A loopback URL (an operator on the server's own machine) reaches no node that
		 * registered from elsewhere. */
		if (loopback(strstr(url, "://") + 3) &&
		    !loopback(json_string_value(
		                      json_object_get(json_object_get(node, "agent"), "address"))
		                      ?: "127.")) {
			rp_api_errorf(
			        rs, RP_ERR_CONFLICT,
			        "the deployed OS would report to %s, which the node cannot reach: "
			        "set agent_url or boot_url, or ask through an address nodes reach",
			        url);
			goto out;
		}
		rp_api_tls_pin(rq->api, pin);
		json_object_set_new(
		        params, "first_boot",
		        json_pack("{s:s, s:s, s:I}", "url", url, "pin",
		                  strncmp(url, "https:", 6) ? "" : pin, "timeout_s",
		                  json_is_integer(t) ? json_integer_value(t)
		                                     : (json_int_t)rq->api->deploy_boot_timeout_s));
	}
	rc = 0;
out:
	if (defaults && json_string_value(json_object_get(defaults, "user_data")))
		explicit_bzero((char *)json_string_value(json_object_get(defaults, "user_data")),
		               json_string_length(json_object_get(defaults, "user_data")));
	json_decref(defaults);
	json_decref(node);
	json_decref(inv);
	json_decref(resolved);
	return rc;
}

static int
deploy_plan(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *params, json_t **secret)
{
	const char *image = json_string_value(json_object_get(rq->body, "image"));
	const char *disk = json_string_value(json_object_get(rq->body, "disk"));
	const char *recipe = json_string_value(json_object_get(rq->body, "recipe"));
	json_t *img = NULL, *plan = NULL, *d = NULL, *item;
	const char *format, *want;
	char dev[300], url[128];
	int unsupported = 0;
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
	format = sniff_format(rq, img, &unsupported);
	want = json_string_value(json_object_get(rq->body, "format"));
	if (format == NULL) {
		rp_api_errorf(rs, RP_ERR_CONFLICT, "cannot read image %s's file",
		              json_string_value(json_object_get(img, "name")));
		goto fail;
	}
	if (unsupported) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s, s:s}", "field", "image", "reason",
		                       "the image file is a format the agent does not write (raw, "
		                       "gzip, zstd, xz, qcow2): convert it",
		                       "format", format));
		goto fail;
	}
	if (want && strcmp(want, format) != 0) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "format", "reason",
		                       !strcmp(format, "raw")
		                               ? "the image file is raw (no gzip, zstd, xz or "
		                                 "qcow2 header)"
		                               : "the image file's header says otherwise"));
		goto fail;
	}
	plan = json_pack("[{s:s, s:s, s:s, s:O, s:s, s:i, s:s}]", "id", "image", "type", "image",
	                 "url", url, "sha256", json_object_get(img, "sha256"), "device", disk,
	                 "timeout_s", 7200, "format", format);
	/* What would be ignored is refused instead. */
	if (json_is_false(json_object_get(rq->body, "seed"))) {
		static const char *const needs_seed[] = {"config", "first_boot",
		                                         "first_boot_timeout_s", NULL};

		for (i = 0; needs_seed[i]; i++)
			if (json_object_get(rq->body, needs_seed[i])) {
				rp_api_error(rs, RP_ERR_INVALID_FIELD,
				             json_pack("{s:s, s:s}", "field", needs_seed[i],
				                       "reason",
				                       "goes with the seed: not with seed false"));
				goto fail;
			}
	}
	if (json_object_get(rq->body, "efi_loader") &&
	    !loader_valid(json_string_value(json_object_get(rq->body, "efi_loader")))) {
		rp_api_error(
		        rs, RP_ERR_INVALID_FIELD,
		        json_pack(
		                "{s:s, s:s}", "field", "efi_loader", "reason",
		                "an ESP path of printable ASCII, e.g. \\EFI\\debian\\shimx64.efi"));
		goto fail;
	}
	if (json_object_get(rq->body, "efi_loader") &&
	    strcmp(json_string_value(json_object_get(params, "boot_mode")) ?: "", "uefi") != 0) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "efi_loader", "reason",
		                       "only with boot_mode uefi"));
		goto fail;
	}
	if (!json_is_false(json_object_get(rq->body, "seed"))) {
		if (deploy_seed(rq, rs, params, secret) < 0)
			goto fail;
		/* Filled in when the job sends the plan (it holds the first-boot token). */
		json_object_set_new(json_array_get(plan, 0), "seed", json_object());
	}
	if (json_is_true(json_object_get(rq->body, "grow")) ||
	    (!json_is_false(json_object_get(rq->body, "grow")) &&
	     !json_is_false(json_object_get(rq->body, "seed"))))
		json_object_set_new(json_array_get(plan, 0), "grow", json_true());
	if (!strcmp(json_string_value(json_object_get(params, "boot_mode")) ?: "", "uefi"))
		json_object_set_new(
		        json_array_get(plan, 0), "uefi",
		        json_pack("{s:s?}", "loader",
		                  json_string_value(json_object_get(rq->body, "efi_loader"))));
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

static void
wipe_user_data(json_t *o)
{
	json_t *ud = json_object_get(o, "user_data"), *v;
	size_t i;

	if (json_is_string(ud))
		explicit_bzero((char *)json_string_value(ud), json_string_length(ud));
	json_array_foreach(ud, i, v)
	        explicit_bzero((char *)json_string_value(v), json_string_length(v));
}

void
rp_api_nodes_provision(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *action = json_string_value(json_object_get(rq->body, "action"));
	const struct rp_field *spec = bare_fields;
	json_t *detail = NULL, *params = NULL, *job = NULL, *out = NULL, *t, *secret = NULL;
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
		if (deploy_plan(rq, rs, params, &secret) < 0)
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
		job = json_pack("{s:s, s:O, s:b, s:i, s:O*}", "type", type, "params", params,
		                "mutating", strcmp(type, "verify") != 0, "max_attempts", 8,
		                "secret", secret);
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
	/* The user data: wiped from the request and the payload before they are freed. */
	wipe_user_data(json_object_get(rq->body, "config"));
	wipe_user_data(secret);
	json_decref(secret);
	json_decref(params);
	json_decref(job);
}
