/*
 * Network boot (docs/provisioning.md): the iPXE script a MAC gets, the image files, and the
 * image and boot profile resources behind them. The /boot/ endpoints need no token and say
 * nothing secret; a bootstrap token in a script opens one registration of that machine, once.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "boot/boot.h"
#include "rackpilot/agent.h"

static const char *const image_kinds[] = {"kernel", "initrd", "os", "firmware", "other", NULL};

/* The base URL scripts point back to: configured, else the Host the machine asked. */
static int
base_url(struct rp_api_req *rq, char *buf, size_t len)
{
	const char *h = rq->host;
	size_t i;

	if (rq->api->boot_url && rq->api->boot_url[0]) {
		snprintf(buf, len, "%s", rq->api->boot_url);
		return 0;
	}
	if (h == NULL || h[0] == '\0' || strlen(h) > 200)
		return -1;
	for (i = 0; h[i]; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		      (h[i] >= '0' && h[i] <= '9') || strchr(".-:[]", h[i])))
			return -1;
	snprintf(buf, len, "http://%s", h);
	return 0;
}

static void
script(struct rp_api_resp *rs, struct rp_buf *b)
{
	rs->status = 200;
	rs->text = b->data;
	rs->text_len = b->len;
	rs->content_type = "text/plain; charset=utf-8";
	b->data = NULL;
}

/* Where the agent reaches the API, for rackpilot.url=: configured, else the host the machine
 * asked (a boot listener's port swapped for the API's, with the API's scheme). */
static int
agent_url(struct rp_api_req *rq, const char *base, char *buf, size_t len)
{
	const char *h = base, *end;
	unsigned port;
	size_t n;

	if (rq->api->agent_url && rq->api->agent_url[0]) {
		snprintf(buf, len, "%s", rq->api->agent_url);
		return 0;
	}
	port = __atomic_load_n(&rq->api->api_port, __ATOMIC_ACQUIRE);
	if (port == 0) {
		snprintf(buf, len, "%s", base);
		return 0;
	}
	h = strstr(base, "://");
	h = h ? h + 3 : base;
	/* The host part: up to the port, or the whole authority for a bare host. */
	end = h[0] == '[' ? strchr(h, ']') : NULL;
	end = end ? end + 1 : h + strcspn(h, ":/");
	n = (size_t)(end - h);
	if (n == 0 || snprintf(buf, len, "%s://%.*s:%u", rq->api->tls ? "https" : "http", (int)n, h,
	                       port) >= (int)len)
		return -1;
	return 0;
}

int
rp_api_first_boot_url(struct rp_api_req *rq, char *buf, size_t len)
{
	char base[256];
	int n;

	/* The deployed OS is on the boot network, as the agent was: the agent's URL when there
	 * is one to derive, else the API as this request reached it. */
	if ((rq->api->agent_url && rq->api->agent_url[0]) ||
	    (rq->api->boot_url && rq->api->boot_url[0])) {
		if (base_url(rq, base, sizeof base) < 0 || agent_url(rq, base, buf, len) < 0)
			return -1;
	} else if (rq->host == NULL || rq->host[0] == '\0' || strlen(rq->host) > 200 ||
	           strspn(rq->host,
	                  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") !=
	                   strlen(rq->host) ||
	           snprintf(buf, len, "%s://%s", rq->api->tls ? "https" : "http", rq->host) >=
	                   (int)len) {
		return -1;
	}
	n = (int)strlen(buf);
	return snprintf(buf + n, len - (size_t)n, "/v1/agent/first-boot") >= (int)(len - (size_t)n)
	               ? -1
	               : 0;
}

void
rp_api_boot_ipxe(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *q = json_string_value(json_object_get(rq->query, "mac"));
	struct rp_boot_script sc = {.kind = RP_BOOT_LOCAL};
	struct rp_boot_req br = {0};
	struct rp_buf b = {0};
	char mac[RP_MAC_BUF], base[256], aurl[300], secret[RP_TOKEN_BUF] = "", why[160], pin[65];
	json_t *look = NULL, *node, *profile;
	const char *state = NULL, *phase;
	int64_t node_id = 0;
	enum rp_err e;

	if (q == NULL || rp_mac_normalize(q, mac) < 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY,
		              "mac must be the booting NIC's MAC (iPXE: "
		              "?mac=${net0/mac})");
		return;
	}
	if (base_url(rq, base, sizeof base) < 0 || agent_url(rq, base, aurl, sizeof aurl) < 0) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "no usable Host header; set boot_url");
		return;
	}
	if ((e = rp_store_boot_lookup(rq->api->store, mac, &look)) != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	node = json_object_get(look, "node");
	profile = json_object_get(look, "profile");
	if (!json_is_object(node))
		node = NULL;
	if (!json_is_object(profile))
		profile = NULL;
	sc.base = base;
	sc.who = node ? json_string_value(json_object_get(node, "name")) : "unknown machine";
	if (node) {
		state = json_string_value(json_object_get(node, "state"));
		phase = json_string_value(json_object_get(node, "phase"));
		node_id = json_integer_value(json_object_get(node, "row_id"));
		sc.why = state;
		/* The ramdisk only while an action needs it: after a deploy wrote the disk, a BMC
		 * that forgot "boot from disk" must not loop back into the installer. */
		if (json_is_true(json_object_get(node, "maintenance"))) {
			sc.why = "maintenance";
		} else if ((!strcmp(state, "commissioning") || !strcmp(state, "deploying") ||
		            !strcmp(state, "releasing")) &&
		           !(phase && (!strcmp(phase, "finish") || !strcmp(phase, "wait_boot")))) {
			sc.kind = RP_BOOT_RAMDISK;
		}
	} else {
		sc.why = "not enrolled";
		if (rq->api->discovery)
			sc.kind = RP_BOOT_RAMDISK;
	}
	if (sc.kind == RP_BOOT_RAMDISK && profile == NULL) {
		sc.kind = RP_BOOT_WAIT;
		sc.why = "no boot profile: create a boot profile named default";
	}
	if (sc.kind == RP_BOOT_RAMDISK) {
		br.node_id = node_id;
		br.mac = mac;
		br.source = rq->peer;
		br.bind_source = rq->api->boot_source_check;
		br.ttl_ms = (int64_t)rq->api->bootstrap_ttl_s * 1000;
		br.max_discovery = rq->api->discovery_max;
		br.max_per_source = rq->api->discovery_per_source;
		br.max_discovered = rq->api->discovery_max_nodes;
		e = rp_store_boot_token(rq->api->store, &br, secret, why, sizeof why);
		if (e == RP_ERR_UNAVAILABLE) {
			sc.kind = RP_BOOT_WAIT;
			sc.why = why;
		} else if (e != RP_ERR_OK) {
			rp_api_error(rs, e, NULL);
			goto out;
		} else {
			sc.kernel = json_string_value(json_object_get(profile, "kernel"));
			sc.initrd = json_string_value(json_object_get(profile, "initrd"));
			sc.cmdline = json_string_value(json_object_get(profile, "cmdline"));
			sc.token = secret;
			sc.agent_url = aurl;
			rp_api_tls_pin(rq->api, pin);
			sc.tls_sha256 = pin[0] ? pin : NULL;
		}
	}
	if (rp_boot_ipxe(&sc, &b) < 0) {
		rp_buf_free(&b);
		rp_api_errorf(rs, RP_ERR_INTERNAL,
		              "the boot profile cannot be written as an iPXE "
		              "script (quotes or newlines in its command line?)");
		goto out;
	}
	script(rs, &b);
out:
	explicit_bzero(secret, sizeof secret);
	json_decref(look);
}

void
rp_api_boot_image(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *img = NULL;
	char path[4200];
	const char *file;
	struct stat sb;
	uint64_t off = 0, len;
	int fd, r;
	enum rp_err e;

	if ((e = rp_store_image_get(rq->api->store, rq->params[0], &img)) != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such image");
		return;
	}
	file = json_string_value(json_object_get(img, "file"));
	snprintf(path, sizeof path, "%s/%s", rq->api->image_dir, file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) < 0) {
		rp_log_error("image %s: %s: %s", rq->params[0], path, strerror(errno));
		if (fd >= 0)
			close(fd);
		rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "the image file is missing");
		goto out;
	}
	if ((uint64_t)sb.st_size != (uint64_t)json_integer_value(json_object_get(img, "size"))) {
		close(fd);
		rp_log_error("image %s: %s changed size since it was registered", rq->params[0],
		             path);
		rp_api_errorf(rs, RP_ERR_CONFLICT,
		              "the image file changed since it was registered");
		goto out;
	}
	len = (uint64_t)sb.st_size;
	r = rp_boot_range(rq->range, (uint64_t)sb.st_size, &off, &len);
	if (r < 0) {
		close(fd);
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "range not satisfiable");
		rs->status = 416;
		snprintf(rs->content_range, sizeof rs->content_range, "bytes */%" PRIu64,
		         (uint64_t)sb.st_size);
		goto out;
	}
	rs->status = r ? 206 : 200;
	if (r)
		snprintf(rs->content_range, sizeof rs->content_range,
		         "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
		         (uint64_t)sb.st_size);
	rs->has_file = 1;
	rs->file_fd = fd;
	rs->file_off = off;
	rs->file_len = len;
	rs->accept_ranges = 1;
	rs->content_type = "application/octet-stream";
	snprintf(rs->etag, sizeof rs->etag, "\"%.32s\"",
	         json_string_value(json_object_get(img, "sha256")));
out:
	json_decref(img);
}

/* ---- /v1/images ------------------------------------------------------------------------- */

static const struct rp_field register_fields[] = {
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"kind", RP_F_ENUM, RP_F_REQUIRED, 0, 0, image_kinds},
        {"file", RP_F_STR, RP_F_REQUIRED, 0, 255},
        {"sha256", RP_F_STR, 0, 64, 64},
        {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {NULL},
};

static const struct rp_field image_fields[] = {
        {"id", RP_F_READ_ONLY},          {"name", RP_F_READ_ONLY},
        {"kind", RP_F_READ_ONLY},        {"file", RP_F_READ_ONLY},
        {"size", RP_F_READ_ONLY},        {"sha256", RP_F_READ_ONLY},
        {"description", RP_F_READ_ONLY}, {"version", RP_F_READ_ONLY},
        {"created_by", RP_F_READ_ONLY},  {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},  {NULL},
};

static int
same_hex(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

/* Record a file that is in place under the image directory; on failure the caller removes it. */
static enum rp_err
record(struct rp_api_req *rq, const char *name, const char *kind, const char *file, uint64_t size,
       const char *sha, const char *description, json_t **out, json_t **detail)
{
	json_t *in = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s?}", "name", name, "kind", kind,
	                       "file", file, "size", (json_int_t)size, "sha256", sha, "description",
	                       description);
	char actor[96];
	enum rp_err e =
	        rp_store_image_create(rq->api->store, in, rp_api_actor(rq, actor), out, detail);

	json_decref(in);
	return e;
}

void
rp_api_images_upload(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *kind = json_string_value(json_object_get(rq->query, "kind"));
	const char *want = json_string_value(json_object_get(rq->query, "sha256"));
	const char *desc = json_string_value(json_object_get(rq->query, "description"));
	json_t *out = NULL, *detail = NULL;
	char dest[4200];
	enum rp_err e;

	if (!rp_name_valid(rq->params[0])) {
		rp_api_errorf(rs, RP_ERR_INVALID_FIELD,
		              "image names are 1-63 of A-Z a-z 0-9 . _ -");
		return;
	}
	if (rp_str_index(image_kinds, kind) < 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY,
		              "kind must be kernel, initrd, os, firmware or other");
		return;
	}
	if (want && !rp_api_sha256_valid(want)) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "sha256 must be 64 hexadecimal digits");
		return;
	}
	if (desc && strlen(desc) > 1024) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "description: at most 1024 characters");
		return;
	}
	if (rq->upload_path == NULL || rq->upload_size == 0) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "send the image as the request body");
		return;
	}
	if (want && !same_hex(want, rq->upload_sha256)) {
		rp_api_error(
		        rs, RP_ERR_INVALID_FIELD,
		        json_pack("{s:s, s:s, s:s, s:s}", "field", "sha256", "reason",
		                  "the upload does not match the sha256 given; nothing was kept",
		                  "expected", want, "received", rq->upload_sha256));
		return;
	}
	/* link(2) claims the name or fails: two uploads of one name never cross. A file left by
	 * a crash between here and the record is not anybody's: it is replaced. */
	snprintf(dest, sizeof dest, "%s/%s", rq->api->image_dir, rq->params[0]);
	if (link(rq->upload_path, dest) < 0) {
		json_t *known = NULL;

		if (errno != EEXIST) {
			rp_log_error("image upload: link %s: %s", dest, strerror(errno));
			rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "cannot store the image");
			return;
		}
		if (rp_store_image_get(rq->api->store, rq->params[0], &known) == RP_ERR_OK) {
			json_decref(known);
			rp_api_error(rs, RP_ERR_DUPLICATE,
			             json_pack("{s:s, s:s}", "field", "name", "reason",
			                       "an image with that name exists; delete it first"));
			return;
		}
		if (rename(rq->upload_path, dest) < 0) {
			rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "cannot store the image");
			return;
		}
	}
	e = record(rq, rq->params[0], kind, rq->params[0], rq->upload_size, rq->upload_sha256, desc,
	           &out, &detail);
	if (e != RP_ERR_OK) {
		unlink(dest);
		rp_api_error(rs, e, detail);
		return;
	}
	snprintf(rs->location, sizeof rs->location, "/v1/images/%s", rq->params[0]);
	rp_api_reply_object(rq, rs, 201, out);
}

void
rp_api_images_register(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL, *b = rq->body;
	const char *file, *want;
	char path[4200], hex[RP_SHA256_HEX];
	uint64_t size = 0;
	struct stat sb;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(b, register_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	file = json_string_value(json_object_get(b, "file"));
	want = json_string_value(json_object_get(b, "sha256"));
	/* A plain name inside the image directory: no paths, no dot files. */
	if (file[0] == '\0' || file[0] == '.' || strchr(file, '/') != NULL) {
		rp_api_error(
		        rs, RP_ERR_INVALID_FIELD,
		        json_pack("{s:s, s:s}", "field", "file", "reason",
		                  "a file name inside the image directory (no '/', not hidden)"));
		return;
	}
	if (want && !rp_api_sha256_valid(want)) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "sha256", "reason",
		                       "64 hexadecimal digits"));
		return;
	}
	snprintf(path, sizeof path, "%s/%s", rq->api->image_dir, file);
	if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s, s:s}", "field", "file", "reason",
		                       "no such regular file in the image directory", "directory",
		                       rq->api->image_dir));
		return;
	}
	if (rp_file_sha256(path, hex, &size) < 0) {
		rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "cannot read %s: %s", file, strerror(errno));
		return;
	}
	if (want && !same_hex(want, hex)) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s, s:s, s:s}", "field", "sha256", "reason",
		                       "the file does not match the sha256 given", "expected", want,
		                       "found", hex));
		return;
	}
	e = record(rq, json_string_value(json_object_get(b, "name")),
	           json_string_value(json_object_get(b, "kind")), file, size, hex,
	           json_string_value(json_object_get(b, "description")), &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	snprintf(rs->location, sizeof rs->location, "/v1/images/%s",
	         json_string_value(json_object_get(b, "name")));
	rp_api_reply_object(rq, rs, 201, out);
}

static const char *const image_filters[] = {"kind", NULL};

static const struct rp_crud images = {
        .what = "image",
        .collection = "/v1/images",
        .spec = image_fields,
        .filters = image_filters,
        .sortable = 1,
        .get = rp_store_image_get,
        .list = rp_store_image_list,
};

void
rp_api_images_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_list(&images, rq, rs);
}

void
rp_api_images_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_get(&images, rq, rs);
}

void
rp_api_images_delete(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL, *detail = NULL;
	char actor[96], path[4200];
	enum rp_err e = rp_store_image_delete(rq->api->store, rq->params[0],
	                                      rp_api_actor(rq, actor), &out, &detail);

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such image");
		return;
	}
	snprintf(path, sizeof path, "%s/%s", rq->api->image_dir,
	         json_string_value(json_object_get(out, "file")));
	if (unlink(path) < 0 && errno != ENOENT)
		rp_log_warn("image %s deleted, but its file %s stays: %s", rq->params[0], path,
		            strerror(errno));
	json_decref(out);
	rs->status = 204;
}

/* ---- /v1/boot-profiles ------------------------------------------------------------------ */

static const struct rp_field profile_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"node_class", RP_F_NAME, RP_F_NULLABLE},
        {"kernel", RP_F_NAME, RP_F_REQUIRED},
        {"initrd", RP_F_NAME, RP_F_REQUIRED},
        {"cmdline", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {"description", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {"node_count", RP_F_READ_ONLY},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

/* A command line goes into an iPXE script: one line, no quotes, and it may not set what the
 * server sets. */
static enum rp_err
profile_check(json_t *body, json_t **detail)
{
	const char *c = json_string_value(json_object_get(body, "cmdline"));

	if (c == NULL)
		return RP_ERR_OK;
	for (; *c; c++) {
		if ((unsigned char)*c < 0x20 || strchr("\"'\\", *c)) {
			*detail = json_pack(
			        "{s:s, s:s}", "field", "cmdline", "reason",
			        "one line of kernel arguments without quotes or backslashes");
			return RP_ERR_INVALID_FIELD;
		}
	}
	if (strstr(json_string_value(json_object_get(body, "cmdline")), "rackpilot.") != NULL) {
		*detail = json_pack("{s:s, s:s}", "field", "cmdline", "reason",
		                    "rackpilot.* arguments are added by the server");
		return RP_ERR_INVALID_FIELD;
	}
	return RP_ERR_OK;
}

static const char *const profile_filters[] = {NULL};

static const struct rp_crud profiles = {
        .what = "boot profile",
        .collection = "/v1/boot-profiles",
        .spec = profile_fields,
        .filters = profile_filters,
        .sortable = 1,
        RP_CRUD_STORE(boot_profile),
        .check = profile_check,
};

RP_CRUD_HANDLERS(boot_profiles, &profiles)
