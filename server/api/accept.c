/*
 * /v1/racks/{rack}/acceptance: start a run, read its report (JSON, CSV or a printable HTML
 * page), sign off a passed rack (docs/acceptance.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept/accept.h"
#include "api.h"

static int
known_check(const char *c)
{
	size_t i;

	for (i = 0; rp_accept_checks[i]; i++)
		if (!strcmp(rp_accept_checks[i], c))
			return 1;
	return 0;
}

static int
bad(struct rp_api_resp *rs, enum rp_err e, const char *field, const char *reason)
{
	rp_api_error(rs, e, json_pack("{s:s, s:s}", "field", field, "reason", reason));
	return -1;
}

/* The checks asked for, in the canonical order; all of them when none is named. */
static int
parse_checks(json_t *body, json_t **out, struct rp_api_resp *rs)
{
	json_t *want = json_object_get(body, "checks"), *v, *res;
	size_t i, k;

	if (want && (!json_is_array(want) || json_array_size(want) == 0))
		return bad(rs, RP_ERR_INVALID_FIELD, "checks", "a non-empty array of check names");
	json_array_foreach(want, i, v)
	{
		if (!json_is_string(v) || !known_check(json_string_value(v)))
			return bad(rs, RP_ERR_INVALID_FIELD, "checks",
			           "checks are bmc, power, pxe, inventory, firmware, bios, links, "
			           "burn_in, fabric, nccl, power_thermal, sel");
		for (k = 0; k < i; k++)
			if (json_equal(json_array_get(want, k), v))
				return bad(rs, RP_ERR_INVALID_FIELD, "checks",
				           "a check is named twice");
	}
	res = json_array();
	for (i = 0; rp_accept_checks[i]; i++) {
		int in = want == NULL;

		json_array_foreach(want, k, v) in |=
		        !strcmp(json_string_value(v), rp_accept_checks[i]);
		if (in)
			json_array_append_new(res, json_string(rp_accept_checks[i]));
	}
	*out = res;
	return 0;
}

/* burn_in {recipes: [names], args: {name: value}}: their steps, ids made "burn_in.R.S" and
 * continuing on error (a failed burn-in step is a finding, not the end of the boot). */
static int
burn_in_steps(struct rp_api_req *rq, json_t *bi, json_t **out, struct rp_api_resp *rs)
{
	json_t *recipes = json_object_get(bi, "recipes"), *args = json_object_get(bi, "args"), *r;
	json_t *steps = json_array(), *mine, *st;
	const char *k;
	json_t *v;
	size_t i, j;

	json_object_foreach(bi, k, v)
	{
		if (strcmp(k, "recipes") != 0 && strcmp(k, "args") != 0) {
			json_decref(steps);
			return bad(rs, RP_ERR_UNKNOWN_FIELD, "burn_in",
			           "burn_in has recipes and args");
		}
	}
	if (!json_is_array(recipes) || json_array_size(recipes) == 0 ||
	    json_array_size(recipes) > 16 || (args && !json_is_object(args))) {
		json_decref(steps);
		return bad(rs, RP_ERR_INVALID_FIELD, "burn_in",
		           "recipes: 1-16 recipe names; args: an object");
	}
	json_array_foreach(recipes, i, r)
	{
		if (!json_is_string(r)) {
			json_decref(steps);
			return bad(rs, RP_ERR_INVALID_FIELD, "burn_in.recipes", "recipe names");
		}
		mine = json_array();
		if (rp_api_recipe_steps(rq, rs, json_string_value(r), args, mine) < 0) {
			json_decref(mine);
			json_decref(steps);
			return -1;
		}
		json_array_foreach(mine, j, st)
		{
			char id[160];

			snprintf(id, sizeof id, "burn_in.%s.%s", json_string_value(r),
			         json_string_value(json_object_get(st, "id")) ?: "step");
			if (strlen(id) > 64) {
				json_decref(mine);
				json_decref(steps);
				return bad(rs, RP_ERR_INVALID_FIELD, "burn_in.recipes",
				           "recipe and step names too long for burn_in.RECIPE.STEP "
				           "(64)");
			}
			json_object_set_new(st, "id", json_string(id));
			json_object_set_new(st, "continue_on_error", json_true());
			json_array_append(steps, st);
		}
		json_decref(mine);
	}
	*out = steps;
	return 0;
}

static const char *const ib_tools[] = {"ib_write_bw", "ib_read_bw", NULL};
static const char *const launchers[] = {"env", "mpirun", NULL};

/* The options of the checks across nodes (docs/acceptance.md): all optional. */
static const struct rp_field fabric_fields[] = {
        {"all_pairs", RP_F_BOOL, 0},
        {"duration_s", RP_F_INT, 0, 1, 3600},
        {"timeout_s", RP_F_INT, 0, 10, 86400},
        {"ready_timeout_s", RP_F_INT, 0, 1, 600},
        {"ib_tool", RP_F_ENUM, 0, 0, 0, ib_tools},
        {NULL},
};

static const struct rp_field nccl_fields[] = {
        {"launcher", RP_F_ENUM, 0, 0, 0, launchers},
        {"timeout_s", RP_F_INT, 0, 10, 86400},
        {"port", RP_F_INT, 0, 1024, 65535},
        {NULL},
};

/* The body's members beside checks and burn_in (checked by hand below). */
static const struct rp_field start_fields[] = {
        {"fabric", RP_F_OBJECT, 0, 0, 0, NULL, fabric_fields},
        {"nccl", RP_F_OBJECT, 0, 0, 0, NULL, nccl_fields},
        {NULL},
};

void
rp_api_acceptance_start(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *checks = NULL, *in = NULL, *plans = json_object(), *bsteps = NULL, *detail = NULL;
	json_t *out = NULL, *nd, *by_class = json_object();
	struct rp_page_req pr = {.limit = 1000};
	struct rp_page pg = {0};
	char actor[96];
	size_t i;
	enum rp_err e;

	if (rq->body && rp_api_need_object(rq, rs) < 0)
		goto out;
	if (rq->body) {
		json_t *rest = json_copy(rq->body);

		json_object_del(rest, "checks");
		json_object_del(rest, "burn_in");
		e = rest ? rp_api_validate(rest, start_fields, 1, &detail) : RP_ERR_INTERNAL;
		json_decref(rest);
		/* A client stopped before the tool's own time could end would always fail. */
		if (e == RP_ERR_OK) {
			json_t *f = json_object_get(rq->body, "fabric");
			json_int_t to = json_integer_value(json_object_get(f, "timeout_s"));

			if (json_is_integer(json_object_get(f, "timeout_s")) &&
			    to <= (json_is_integer(json_object_get(f, "duration_s"))
			                   ? json_integer_value(json_object_get(f, "duration_s"))
			                   : 10)) {
				e = RP_ERR_INVALID_FIELD;
				detail = json_pack("{s:s, s:s}", "field", "fabric.timeout_s",
				                   "reason",
				                   "must be longer than duration_s (default 10)");
			}
		}
		if (e != RP_ERR_OK) {
			rp_api_error(rs, e, detail);
			detail = NULL;
			goto out;
		}
	}
	if (parse_checks(rq->body, &checks, rs) < 0)
		goto out;
	if (json_object_get(rq->body, "burn_in") &&
	    burn_in_steps(rq, json_object_get(rq->body, "burn_in"), &bsteps, rs) < 0)
		goto out;
	/* Each node's boot for the pxe check runs its class's commission plan, then the burn-in:
	 * one plan per class. */
	pr.filter = json_pack("{s:s}", "rack", rq->params[0]);
	e = rp_store_node_list(rq->api->store, &pr, &pg);
	json_decref(pr.filter);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e == RP_ERR_BAD_QUERY ? RP_ERR_NOT_FOUND : e, NULL,
		                         "no such rack");
		goto out;
	}
	json_array_foreach(pg.items, i, nd)
	{
		const char *cls = json_string_value(json_object_get(nd, "node_class"));
		json_t *plan = json_object_get(by_class, cls ? cls : "");

		if (plan == NULL) {
			if (rp_api_commission_plan(rq, rs, cls, &plan) < 0)
				goto out;
			if (bsteps)
				json_array_extend(plan, bsteps);
			json_object_set_new(by_class, cls ? cls : "", plan);
		}
		json_object_set(plans, json_string_value(json_object_get(nd, "name")), plan);
	}
	in = json_pack("{s:O, s:O?, s:O?, s:O?}", "checks", checks, "burn_in",
	               json_object_get(rq->body, "burn_in"), "fabric",
	               json_object_get(rq->body, "fabric"), "nccl",
	               json_object_get(rq->body, "nccl"));
	e = rp_store_accept_start(rq->api->store, rq->params[0], in, plans, rp_api_actor(rq, actor),
	                          &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such rack");
		goto out;
	}
	rs->status = 202;
	rs->body = out;
	snprintf(rs->location, sizeof rs->location, "/v1/racks/%s/acceptance", rq->params[0]);
out:
	json_decref(checks);
	json_decref(in);
	json_decref(plans);
	json_decref(by_class);
	json_decref(bsteps);
	json_decref(pg.items);
}

/* The report's digest: what a sign-off vouches for (the run and its results, not who signed). */
static void
report_hash(json_t *run, char hex[RP_SHA256_HEX])
{
	json_t *copy = json_copy(run);
	char *text;

	json_object_del(copy, "signoffs");
	json_object_del(copy, "report_sha256");
	text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
	rp_sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
	free(text);
	json_decref(copy);
}

/* The verdict per node and check, as a grid: {nodes: [...], checks: [...], cells {node:
 * {check: state}}} plus counts. */
static void
add_grid(json_t *run)
{
	json_t *grid = json_object(), *nodes = json_array(), *counts = json_object(), *r;
	size_t i;

	json_array_foreach(json_object_get(run, "results"), i, r)
	{
		const char *n = json_string_value(json_object_get(r, "node"));
		const char *st = json_string_value(json_object_get(r, "state"));
		json_t *row = json_object_get(grid, n);

		if (row == NULL) {
			json_object_set_new(grid, n, row = json_object());
			json_array_append_new(nodes, json_string(n));
		}
		json_object_set(row, json_string_value(json_object_get(r, "check")),
		                json_object_get(r, "state"));
		json_object_set_new(
		        counts, st,
		        json_integer(json_integer_value(json_object_get(counts, st)) + 1));
	}
	json_object_set_new(run, "grid",
	                    json_pack("{s:o, s:O, s:o}", "nodes", nodes, "checks",
	                              json_object_get(run, "checks"), "cells", grid));
	json_object_set_new(run, "counts", counts);
}

static void
csv_field(struct rp_buf *b, const char *s, int last)
{
	const char *p;

	rp_buf_printf(b, "\"");
	for (p = s ? s : ""; *p; p++)
		rp_buf_printf(b, *p == '"' ? "\"\"" : "%c", *p);
	rp_buf_printf(b, last ? "\"\r\n" : "\",");
}

static void
html_text(struct rp_buf *b, const char *s)
{
	const char *p;

	for (p = s ? s : ""; *p; p++) {
		switch (*p) {
		case '<':
			rp_buf_printf(b, "&lt;");
			break;
		case '>':
			rp_buf_printf(b, "&gt;");
			break;
		case '&':
			rp_buf_printf(b, "&amp;");
			break;
		case '"':
			rp_buf_printf(b, "&quot;");
			break;
		default:
			rp_buf_printf(b, "%c", *p);
		}
	}
}

/* A figure of a test, "" when it has none. */
static const char *
gbps(json_t *t, const char *key, char *buf, size_t len)
{
	json_t *v = json_object_get(t, key);

	if (!json_is_number(v))
		return "";
	snprintf(buf, len, "%.2f", json_number_value(v));
	return buf;
}

/* One row of the CSV report: node, u_position, check, state, message, fix, attempt,
 * finished_at (NULL: empty). */
static void
csv_row(struct rp_buf *b, const char *const f[8])
{
	int k;

	for (k = 0; k < 8; k++)
		csv_field(b, f[k], k == 7);
}

/* The tests across nodes as rows of the same columns: one per fabric pair and port (node: the
 * pair's server, check "fabric PORT to CLIENT", or "fabric to CLIENT" for a pair without
 * tests), one for the NCCL run ("nccl (rack)"). */
static void
render_csv_pairs(json_t *run, struct rp_buf *b)
{
	json_t *p, *t, *r, *u = json_object();
	size_t i, k;
	char att[32], check[300], us[32];

	snprintf(att, sizeof att, "%lld",
	         (long long)json_integer_value(json_object_get(run, "attempt")));
	json_array_foreach(json_object_get(run, "results"), i, r)
	        json_object_set(u, json_string_value(json_object_get(r, "node")) ?: "",
	                        json_object_get(r, "u_position"));
	json_array_foreach(json_object_get(run, "pairs"), i, p)
	{
		const char *server = json_string_value(json_object_get(p, "server")) ?: "";
		const char *client = json_string_value(json_object_get(p, "client")) ?: "?";
		json_t *up = json_object_get(u, server), *tests = json_object_get(p, "tests");
		const char *row[8] = {
		        server, us, check, NULL,
		        NULL,   "", att,   json_string_value(json_object_get(p, "finished_at"))};
		int fabric = !strcmp(json_string_value(json_object_get(p, "kind")) ?: "", "fabric");

		us[0] = '\0';
		if (json_is_integer(up))
			snprintf(us, sizeof us, "%lld", (long long)json_integer_value(up));
		/* The pair itself: NCCL, or a fabric pair that never got to its tests. */
		if (!fabric || json_array_size(tests) == 0) {
			if (fabric)
				snprintf(check, sizeof check, "fabric to %s", client);
			else
				snprintf(check, sizeof check, "nccl (rack)");
			row[3] = json_string_value(json_object_get(p, "state"));
			row[4] = json_string_value(json_object_get(p, "message"));
			csv_row(b, row);
			continue;
		}
		json_array_foreach(tests, k, t)
		{
			snprintf(check, sizeof check, "fabric %s to %s",
			         json_string_value(json_object_get(t, "port")) ?: "?", client);
			row[3] = json_string_value(json_object_get(t, "state"));
			row[4] = json_string_value(json_object_get(t, "message"))
			                 ?: json_string_value(json_object_get(p, "message"));
			csv_row(b, row);
		}
	}
	json_decref(u);
}

/* The fabric matrix (pair x port: measured against the least expected) and the NCCL run. */
static void
render_html_pairs(json_t *run, struct rp_buf *b)
{
	json_t *ports = json_array(), *p, *t, *v;
	size_t i, k, j;
	char f1[32], f2[32];

	if (json_array_size(json_object_get(run, "pairs")) == 0) {
		json_decref(ports);
		return;
	}
	json_array_foreach(json_object_get(run, "pairs"), i, p)
	        json_array_foreach(json_object_get(p, "tests"), k, t)
	{
		int seen = 0;

		json_array_foreach(ports, j, v) seen |= json_equal(v, json_object_get(t, "port"));
		if (!seen && json_is_string(json_object_get(t, "port")))
			json_array_append(ports, json_object_get(t, "port"));
	}
	rp_buf_printf(b, "<h2>Fabric</h2><p>Each cell: measured / least expected, Gb/s.</p>"
	                 "<table><tr><th>round</th><th>server</th><th>client</th>");
	json_array_foreach(ports, j, v)
	{
		rp_buf_printf(b, "<th>");
		html_text(b, json_string_value(v));
		rp_buf_printf(b, "</th>");
	}
	rp_buf_printf(b, "<th>pair</th></tr>");
	json_array_foreach(json_object_get(run, "pairs"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "kind")) ?: "", "fabric") != 0)
			continue;
		rp_buf_printf(b, "<tr><td>%lld</td><td>",
		              (long long)json_integer_value(json_object_get(p, "round")));
		html_text(b, json_string_value(json_object_get(p, "server")));
		rp_buf_printf(b, "</td><td>");
		html_text(b, json_string_value(json_object_get(p, "client")));
		rp_buf_printf(b, "</td>");
		json_array_foreach(ports, j, v)
		{
			json_t *hit = NULL;

			json_array_foreach(json_object_get(p, "tests"), k, t)
			{
				if (json_equal(v, json_object_get(t, "port")))
					hit = t;
			}
			if (hit == NULL) {
				rp_buf_printf(b, "<td></td>");
				continue;
			}
			rp_buf_printf(b, "<td class=\"%s\" title=\"",
			              json_string_value(json_object_get(hit, "state")) ?: "");
			html_text(b, json_string_value(json_object_get(hit, "message")));
			rp_buf_printf(b, "\">");
			html_text(b, gbps(hit, "measured_gbps", f1, sizeof f1));
			rp_buf_printf(b, " / ");
			html_text(b, gbps(hit, "min_gbps", f2, sizeof f2));
			rp_buf_printf(b, " ");
			html_text(b, json_string_value(json_object_get(hit, "state")));
			rp_buf_printf(b, "</td>");
		}
		rp_buf_printf(b, "<td class=\"%s\">",
		              json_string_value(json_object_get(p, "state")) ?: "");
		html_text(b, json_string_value(json_object_get(p, "message")));
		rp_buf_printf(b, "</td></tr>");
	}
	rp_buf_printf(b, "</table>");
	json_array_foreach(json_object_get(run, "pairs"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "kind")) ?: "", "nccl") != 0)
			continue;
		rp_buf_printf(b, "<h2>NCCL</h2><p class=\"%s\">",
		              json_string_value(json_object_get(p, "state")) ?: "");
		html_text(b, json_string_value(json_object_get(p, "state")));
		rp_buf_printf(b, ": ");
		html_text(b, json_string_value(json_object_get(p, "message")));
		rp_buf_printf(b, "</p>");
	}
	json_decref(ports);
}

static void
render_csv(json_t *run, struct rp_buf *b)
{
	json_t *r;
	size_t i;

	rp_buf_printf(b, "node,u_position,check,state,message,fix,attempt,finished_at\r\n");
	json_array_foreach(json_object_get(run, "results"), i, r)
	{
		char u[32], att[32];

		snprintf(u, sizeof u, "%lld",
		         (long long)json_integer_value(json_object_get(r, "u_position")));
		snprintf(att, sizeof att, "%lld",
		         (long long)json_integer_value(json_object_get(r, "attempt")));
		{
			const char *row[8] = {
			        json_string_value(json_object_get(r, "node")),
			        json_is_integer(json_object_get(r, "u_position")) ? u : "",
			        json_string_value(json_object_get(r, "check")),
			        json_string_value(json_object_get(r, "state")),
			        json_string_value(json_object_get(r, "message")),
			        json_string_value(json_object_get(r, "fix")),
			        att,
			        json_string_value(json_object_get(r, "finished_at"))};

			csv_row(b, row);
		}
	}
	render_csv_pairs(run, b);
}

/* The printable report is a document of its own, opened from a download or a link: its one
 * inline stylesheet and nothing else (no script, no image, no form, no framing); every value
 * in it is escaped text. */
static const char *const report_headers[] = {
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'",
        "Referrer-Policy",
        "no-referrer",
        NULL,
};

static void
render_html(json_t *run, struct rp_buf *b)
{
	json_t *grid = json_object_get(run, "grid"), *n, *c, *r, *s;
	const char *rack = json_string_value(json_object_get(run, "rack"));
	size_t i, j;

	rp_buf_printf(b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>Acceptance of "
	                 "rack ");
	html_text(b, rack);
	rp_buf_printf(b,
	              "</title><style>body{font:13px sans-serif;margin:2em}table{border-collapse:"
	              "collapse}td,th{border:1px solid #999;padding:3px 6px;text-align:left}"
	              ".passed{background:#cfc}.failed{background:#fcc}.skipped{background:#eee}"
	              ".pending,.running{background:#ffc}@media print{a{color:#000}}</style>"
	              "</head><body><h1>Acceptance of rack ");
	html_text(b, rack);
	rp_buf_printf(b, ": <span class=\"%s\">", json_string_value(json_object_get(run, "state")));
	html_text(b, json_string_value(json_object_get(run, "state")));
	rp_buf_printf(b, "</span></h1><p>Attempt %lld, started ",
	              (long long)json_integer_value(json_object_get(run, "attempt")));
	html_text(b, json_string_value(json_object_get(run, "created_at")));
	rp_buf_printf(b, " by ");
	html_text(b, json_string_value(json_object_get(run, "created_by")));
	rp_buf_printf(b, ", finished ");
	html_text(b, json_string_value(json_object_get(run, "finished_at")) ?: "(still running)");
	rp_buf_printf(b, ". Report sha256 <code>");
	html_text(b, json_string_value(json_object_get(run, "report_sha256")));
	rp_buf_printf(b, "</code>.</p><table><tr><th>node</th>");
	json_array_foreach(json_object_get(grid, "checks"), j, c)
	{
		rp_buf_printf(b, "<th>");
		html_text(b, json_string_value(c));
		rp_buf_printf(b, "</th>");
	}
	rp_buf_printf(b, "</tr>");
	json_array_foreach(json_object_get(grid, "nodes"), i, n)
	{
		json_t *row = json_object_get(json_object_get(grid, "cells"), json_string_value(n));

		rp_buf_printf(b, "<tr><td>");
		html_text(b, json_string_value(n));
		rp_buf_printf(b, "</td>");
		json_array_foreach(json_object_get(grid, "checks"), j, c)
		{
			const char *st =
			        json_string_value(json_object_get(row, json_string_value(c))) ?: "";

			rp_buf_printf(b, "<td class=\"%s\">", st);
			html_text(b, st);
			rp_buf_printf(b, "</td>");
		}
		rp_buf_printf(b, "</tr>");
	}
	rp_buf_printf(b, "</table><h2>Failures and skips</h2><table><tr><th>node</th><th>check</th>"
	                 "<th>state</th><th>evidence</th><th>suggested fix</th></tr>");
	json_array_foreach(json_object_get(run, "results"), i, r)
	{
		const char *st = json_string_value(json_object_get(r, "state")) ?: "";

		if (strcmp(st, "failed") != 0 && strcmp(st, "skipped") != 0)
			continue;
		rp_buf_printf(b, "<tr class=\"%s\"><td>", st);
		html_text(b, json_string_value(json_object_get(r, "node")));
		rp_buf_printf(b, "</td><td>");
		html_text(b, json_string_value(json_object_get(r, "check")));
		rp_buf_printf(b, "</td><td>");
		html_text(b, st);
		rp_buf_printf(b, "</td><td>");
		html_text(b, json_string_value(json_object_get(r, "message")));
		/* One finding is the message already; more are listed each. */
		if (json_array_size(json_object_get(r, "findings")) > 1)
			json_array_foreach(json_object_get(r, "findings"), j, s)
			{
				rp_buf_printf(b, "<br>&middot; ");
				html_text(b, json_string_value(json_object_get(s, "message")));
			}
		rp_buf_printf(b, "</td><td>");
		html_text(b, json_string_value(json_object_get(r, "fix")));
		rp_buf_printf(b, "</td></tr>");
	}
	rp_buf_printf(b, "</table>");
	render_html_pairs(run, b);
	rp_buf_printf(b, "<h2>Sign-off</h2>");
	if (json_array_size(json_object_get(run, "signoffs")) == 0)
		rp_buf_printf(b, "<p>Not signed off.</p>");
	json_array_foreach(json_object_get(run, "signoffs"), i, s)
	{
		rp_buf_printf(b, "<p>Signed off by ");
		html_text(b, json_string_value(json_object_get(s, "signed_by")));
		rp_buf_printf(b, " at ");
		html_text(b, json_string_value(json_object_get(s, "signed_at")));
		rp_buf_printf(b, " (report ");
		html_text(b, json_string_value(json_object_get(s, "report_sha256")));
		rp_buf_printf(b, ")</p>");
	}
	rp_buf_printf(b, "</body></html>\n");
}

/* The run with its grid and digest, or an error already in rs. */
static json_t *
report(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *a = json_string_value(json_object_get(rq->query, "attempt"));
	char hex[RP_SHA256_HEX], *end;
	long attempt = 0;
	json_t *run = NULL;
	enum rp_err e;

	if (a && ((attempt = strtol(a, &end, 10)) < 1 || *end || attempt > 1000000)) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "attempt must be a run number (1, 2, ...)");
		return NULL;
	}
	e = rp_store_accept_get(rq->api->store, rq->params[0], (int)attempt, &run);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such rack, or no acceptance run of it");
		return NULL;
	}
	add_grid(run);
	report_hash(run, hex);
	json_object_set_new(run, "report_sha256", json_string(hex));
	return run;
}

void
rp_api_acceptance_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *fmt = json_string_value(json_object_get(rq->query, "format"));
	struct rp_buf b = {0};
	json_t *run;

	if (fmt && strcmp(fmt, "json") && strcmp(fmt, "csv") && strcmp(fmt, "html")) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "format is json, csv or html");
		return;
	}
	if ((run = report(rq, rs)) == NULL)
		return;
	if (fmt == NULL || !strcmp(fmt, "json")) {
		rs->status = 200;
		rs->body = run;
		return;
	}
	if (!strcmp(fmt, "csv"))
		render_csv(run, &b);
	else
		render_html(run, &b);
	json_decref(run);
	rp_api_reply_buf(rs, &b,
	                 !strcmp(fmt, "csv") ? "text/csv; charset=utf-8"
	                                     : "text/html; charset=utf-8");
	if (rs->status == 200 && strcmp(fmt, "csv") != 0)
		rs->headers = report_headers;
}

static const struct rp_field signoff_fields[] = {
        {"report_sha256", RP_F_STR, RP_F_REQUIRED, 64, 64},
        {"note", RP_F_STR, RP_F_NULLABLE, 0, 1024},
        {NULL},
};

/* Admin only (route table): the signer names the report they read by its digest, so a report
 * that changed since (a re-run) cannot be signed by mistake. */
void
rp_api_acceptance_signoff(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *run, *out = NULL;
	const char *want;
	char actor[96];
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, signoff_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	want = json_string_value(json_object_get(rq->body, "report_sha256"));
	if (!rp_api_sha256_valid(want)) {
		bad(rs, RP_ERR_INVALID_FIELD, "report_sha256",
		    "64 hex digits: the report's digest");
		return;
	}
	if ((run = report(rq, rs)) == NULL)
		return;
	if (strcasecmp(want, json_string_value(json_object_get(run, "report_sha256"))) != 0) {
		rp_api_error(rs, RP_ERR_CONFLICT,
		             json_pack("{s:s, s:O}", "reason",
		                       "the report changed since you read it: read it again",
		                       "report_sha256", json_object_get(run, "report_sha256")));
		json_decref(run);
		return;
	}
	e = rp_store_accept_signoff(rq->api->store, rq->params[0],
	                            json_string_value(json_object_get(run, "report_sha256")),
	                            json_string_value(json_object_get(rq->body, "note")),
	                            rp_api_actor(rq, actor), &out, &detail);
	json_decref(run);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such rack");
		return;
	}
	rs->status = 201;
	rs->body = out;
}
