/*
 * POST /v1/import: a manifest of racks and nodes, as JSON {racks, nodes} or CSV (one node
 * per row, header row first). All or nothing: every bad row is reported, none is written.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accept/accept.h"
#include "api.h"

#define MAX_ROWS 100000

/* CSV columns and where each lands in the node object. */
enum ctype { C_STR, C_INT, C_BOOL, C_LIST };
static const struct column {
	const char *name;
	const char *parent; /* NULL (node), "bmc" or "_rack" */
	const char *member;
	enum ctype type;
} columns[] = {
        {"name", NULL, "name", C_STR},
        {"rack", NULL, "rack", C_STR},
        {"u_position", NULL, "u_position", C_INT},
        {"u_height", NULL, "u_height", C_INT},
        {"serial", NULL, "serial", C_STR},
        {"vendor", NULL, "vendor", C_STR},
        {"model", NULL, "model", C_STR},
        {"node_class", NULL, "node_class", C_STR},
        {"tags", NULL, "tags", C_LIST},
        {"macs", NULL, "macs", C_LIST},
        {"bios_profile", NULL, "bios_profile", C_STR},
        {"maintenance", NULL, "maintenance", C_BOOL},
        {"maintenance_reason", NULL, "maintenance_reason", C_STR},
        {"bmc_driver", "bmc", "driver", C_STR},
        {"bmc_address", "bmc", "address", C_STR},
        {"bmc_port", "bmc", "port", C_INT},
        {"bmc_username", "bmc", "username", C_STR},
        {"bmc_password", "bmc", "password", C_STR},
        {"bmc_tls_verify", "bmc", "tls_verify", C_BOOL},
        {"rack_site", "_rack", "site", C_STR},
        {"rack_row", "_rack", "row", C_STR},
        {"rack_height_u", "_rack", "height_u", C_INT},
        {NULL},
};

static void
add_error(json_t *errors, const char *kind, size_t index, json_t *item, enum rp_err e, json_t *why)
{
	json_t *err = json_pack("{s:s, s:I, s:s}", "kind", kind, "index", (json_int_t)index, "code",
	                        rp_err_code(e));
	json_t *line = json_object_get(item, "_line");

	if (line)
		json_object_set(err, "line", line);
	json_object_set(err, "name",
	                json_is_string(json_object_get(item, "name"))
	                        ? json_object_get(item, "name")
	                        : json_null());
	if (json_is_object(why))
		json_object_update(err, why);
	json_array_append_new(errors, err);
}

static json_t *
cell_value(const char *text, enum ctype t)
{
	char *end;
	long long v;
	json_t *a;
	char *copy, *tok, *save = NULL;

	switch (t) {
	case C_INT:
		errno = 0;
		v = strtoll(text, &end, 10);
		if (end == text || *end || errno)
			return NULL;
		return json_integer(v);
	case C_BOOL:
		if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcmp(text, "1"))
			return json_true();
		if (!strcasecmp(text, "false") || !strcasecmp(text, "no") || !strcmp(text, "0"))
			return json_false();
		return NULL;
	case C_LIST:
		a = json_array();
		copy = strdup(text);
		for (tok = strtok_r(copy, "; ", &save); tok; tok = strtok_r(NULL, "; ", &save))
			json_array_append_new(a, json_string(tok));
		free(copy);
		return a;
	default:
		return json_string(text);
	}
}

/* One CSV row (header -> cell) to a node object; 0, or -1 with *why set. */
static int
csv_node(json_t *row, json_t **node, json_t **why)
{
	json_t *n = json_object(), *v;
	const struct column *c;
	const char *k;

	json_object_foreach(row, k, v)
	{
		json_t *val, *parent = n;

		if (strcmp(k, "_line") == 0) {
			json_object_set(n, "_line", v);
			continue;
		}
		for (c = columns; c->name && strcmp(c->name, k) != 0; c++)
			;
		val = cell_value(json_string_value(v), c->type);
		if (val == NULL) {
			*why = json_pack("{s:s, s:s}", "field", k, "reason",
			                 c->type == C_INT ? "must be an integer"
			                                  : "must be true or false");
			json_decref(n);
			return -1;
		}
		if (c->parent) {
			parent = json_object_get(n, c->parent);
			if (parent == NULL) {
				parent = json_object();
				json_object_set_new(n, c->parent, parent);
			}
		}
		json_object_set_new(parent, c->member, val);
	}
	*node = n;
	return 0;
}

static int
csv_manifest(struct rp_api_req *rq, json_t **manifest, struct rp_api_resp *rs)
{
	json_t *rows = NULL, *nodes, *row, *hdr;
	char why[256];
	const char *k;
	size_t i;
	const struct column *c;

	if (rp_api_csv_parse(rq->raw ? rq->raw : "", rq->raw_len, &rows, why, sizeof why) < 0) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "%s", why);
		return -1;
	}
	/* Unknown columns are refused up front: a typo would otherwise drop data silently. */
	json_array_foreach(rows, i, row)
	{
		json_object_foreach(row, k, hdr)
		{
			if (strcmp(k, "_line") == 0)
				continue;
			for (c = columns; c->name && strcmp(c->name, k) != 0; c++)
				;
			if (c->name == NULL) {
				rp_api_errorf(rs, RP_ERR_UNKNOWN_FIELD,
				              "unknown CSV column '%.64s'", k);
				json_decref(rows);
				return -1;
			}
		}
	}
	nodes = json_array();
	json_array_foreach(rows, i, row)
	{
		json_t *n = NULL, *w = NULL;

		if (csv_node(row, &n, &w) < 0) {
			/* Keep the row so validation reports it with the conversion error. */
			n = json_pack("{s:O, s:O, s:o}", "_line", json_object_get(row, "_line"),
			              "name",
			              json_object_get(row, "name") ? json_object_get(row, "name")
			                                           : json_null(),
			              "_invalid", w);
		}
		json_array_append_new(nodes, n);
	}
	json_decref(rows);
	*manifest = json_pack("{s:[], s:o}", "racks", "nodes", nodes);
	return 0;
}

static int
json_manifest(struct rp_api_req *rq, json_t **manifest, struct rp_api_resp *rs)
{
	const char *k;
	json_t *v, *racks, *nodes;

	if (rp_api_need_object(rq, rs) < 0)
		return -1;
	json_object_foreach(rq->body, k, v)
	{
		if (strcmp(k, "racks") != 0 && strcmp(k, "nodes") != 0 &&
		    strcmp(k, "classes") != 0 && strcmp(k, "cabling") != 0) {
			rp_api_error(rs, RP_ERR_UNKNOWN_FIELD,
			             json_pack("{s:s, s:s}", "field", k, "reason",
			                       "a manifest has racks, nodes, classes and cabling"));
			return -1;
		}
		if (!json_is_array(v)) {
			rp_api_error(
			        rs, RP_ERR_INVALID_FIELD,
			        json_pack("{s:s, s:s}", "field", k, "reason", "must be an array"));
			return -1;
		}
	}
	racks = json_object_get(rq->body, "racks");
	nodes = json_object_get(rq->body, "nodes");
	*manifest = json_pack("{s:o, s:o, s:O?, s:O?}", "racks",
	                      racks ? json_incref(racks) : json_array(), "nodes",
	                      nodes ? json_incref(nodes) : json_array(), "classes",
	                      json_object_get(rq->body, "classes"), "cabling",
	                      json_object_get(rq->body, "cabling"));
	return 0;
}

/* Validate one row; valid rows are copied into `into` with their original index kept. */
static void
check_rows(json_t *rows, const char *kind, const struct rp_field *spec, int csv, json_t *into,
           json_t *map, json_t *errors)
{
	json_t *item, *detail;
	size_t i;

	json_array_foreach(rows, i, item)
	{
		json_t *copy, *extra, *line;
		enum rp_err e;

		detail = NULL;
		if (!json_is_object(item)) {
			add_error(errors, kind, i, item, RP_ERR_BAD_REQUEST,
			          json_pack("{s:s}", "reason", "must be an object"));
			continue;
		}
		/* The "_" members are the CSV reader's notes (line, conversion error, rack
		 * columns); in a JSON manifest they are unknown fields like any other. */
		if (csv && (extra = json_object_get(item, "_invalid")) != NULL) {
			add_error(errors, kind, i, item, RP_ERR_INVALID_FIELD, extra);
			continue;
		}
		/* A JSON manifest's rows are this request's own: validate them in place. A CSV
		 * row loses its reader's notes, which the error mapping reads afterwards. */
		copy = csv ? json_deep_copy(item) : json_incref(item);
		line = csv ? json_object_get(item, "_line") : NULL;
		extra = csv ? json_object_get(item, "_rack") : NULL;
		if (csv) {
			json_object_del(copy, "_line");
			json_object_del(copy, "_rack");
		}
		if (!strcmp(kind, "cable"))
			e = rp_accept_cable_check(copy, &detail);
		else
			e = rp_api_validate(copy, spec, 1, &detail);
		if (e == RP_ERR_OK && spec == rp_api_node_fields)
			e = rp_api_node_check(copy, &detail);
		if (e == RP_ERR_OK && !strcmp(kind, "class") && json_object_get(copy, "bom"))
			e = rp_accept_bom_check(json_object_get(copy, "bom"), &detail);
		if (e == RP_ERR_OK && extra)
			e = rp_api_validate(extra, rp_api_rack_fields, 0, &detail);
		if (e != RP_ERR_OK) {
			add_error(errors, kind, i, item, e, detail);
			json_decref(detail);
			json_decref(copy);
			continue;
		}
		if (extra)
			json_object_set(copy, "_rack", extra);
		if (line)
			json_object_set(copy, "_line", line);
		json_array_append_new(into, copy);
		json_array_append_new(map, json_integer((json_int_t)i));
	}
}

void
rp_api_import(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *dry = json_string_value(json_object_get(rq->query, "dry_run"));
	const char *rot = json_string_value(json_object_get(rq->query, "rotate_on_enroll"));
	int rotate = rot && (strcmp(rot, "1") == 0 || strcmp(rot, "true") == 0);
	int csv = rq->content_type && strcmp(rq->content_type, "text/csv") == 0;
	int dry_run = dry && (strcmp(dry, "1") == 0 || strcmp(dry, "true") == 0);
	static const struct {
		const char *kind, *key;
		const struct rp_field *spec;
	} parts[] = {
	        {"rack", "racks", rp_api_rack_fields},
	        {"node", "nodes", rp_api_node_fields},
	        {"class", "classes", rp_api_class_fields},
	        {"cable", "cabling", NULL},
	};
	json_t *maps[4] = {NULL};
	json_t *manifest = NULL, *valid = NULL, *errors = NULL;
	json_t *out = NULL, *detail = NULL, *err;
	enum rp_err e;
	char actor[96];
	size_t i;

	if (dry && !dry_run && strcmp(dry, "0") != 0 && strcmp(dry, "false") != 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "dry_run must be 1, 0, true or false");
		return;
	}
	if (rot && !rotate && strcmp(rot, "0") != 0 && strcmp(rot, "false") != 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "rotate_on_enroll must be 1, 0, true or false");
		return;
	}
	if ((csv ? csv_manifest(rq, &manifest, rs) : json_manifest(rq, &manifest, rs)) < 0)
		return;
	if (json_array_size(json_object_get(manifest, "racks")) +
	            json_array_size(json_object_get(manifest, "nodes")) +
	            json_array_size(json_object_get(manifest, "classes")) +
	            json_array_size(json_object_get(manifest, "cabling")) >
	    MAX_ROWS) {
		rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "a manifest holds at most %d rows", MAX_ROWS);
		goto out;
	}
	errors = json_array();
	valid = json_pack("{s:[], s:[], s:[], s:[]}", "racks", "nodes", "classes", "cabling");
	for (i = 0; i < 4; i++) {
		maps[i] = json_array();
		check_rows(json_object_get(manifest, parts[i].key), parts[i].kind, parts[i].spec,
		           csv, json_object_get(valid, parts[i].key), maps[i], errors);
	}
	if (rotate)
		json_object_set_new(valid, "_rotate_on_enroll", json_true());
	/* Even with shape errors, let the store check the rest so one reply lists everything. */
	e = rp_store_import(rq->api->store, valid, csv, dry_run || json_array_size(errors) > 0,
	                    rp_api_actor(rq, actor), &out, &detail);
	if (e == RP_ERR_IMPORT_INVALID) {
		json_array_foreach(json_object_get(detail, "errors"), i, err)
		{
			const char *kind = json_string_value(json_object_get(err, "kind"));
			size_t p = 0,
			       at = (size_t)json_integer_value(json_object_get(err, "index"));
			json_t *map, *rows;

			while (p < 3 && strcmp(parts[p].kind, kind) != 0)
				p++;
			map = maps[p];
			rows = json_object_get(valid, parts[p].key);
			json_t *line = json_object_get(json_array_get(rows, at), "_line");

			json_object_set(err, "index", json_array_get(map, at));
			if (line)
				json_object_set(err, "line", line);
			json_array_append(errors, err);
		}
	} else if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		detail = NULL;
		goto out;
	}
	if (json_array_size(errors) > 0) {
		rp_api_error(rs, RP_ERR_IMPORT_INVALID,
		             json_pack("{s:I, s:O}", "error_count",
		                       (json_int_t)json_array_size(errors), "errors", errors));
		goto out;
	}
	rs->status = 200;
	rs->body = out;
	out = NULL;
out:
	json_decref(manifest);
	json_decref(valid);
	json_decref(errors);
	for (i = 0; i < 4; i++)
		json_decref(maps[i]);
	json_decref(out);
	json_decref(detail);
}
