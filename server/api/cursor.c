/*
 * Keyset pagination. A cursor is opaque to clients: base64url of "v1:<sort>:<id>:<key>",
 * the position of the last item returned. Pages stay stable under inserts because the next
 * page starts strictly after that position instead of at an offset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

void
rp_api_cursor_encode(int sort_by_name, int64_t last_id, const char *last_key,
                     char buf[RP_CURSOR_BUF])
{
	char raw[180];
	int n;

	n = snprintf(raw, sizeof raw, "v1:%c:%lld:%s", sort_by_name ? 'n' : 'i', (long long)last_id,
	             sort_by_name && last_key ? last_key : "");
	if (n < 0 || (size_t)n >= sizeof raw)
		n = (int)sizeof raw - 1;
	rp_b64url_encode(raw, (size_t)n, buf);
}

int
rp_api_cursor_decode(const char *cursor, int sort_by_name, int64_t *after_id, char *keybuf,
                     size_t keylen)
{
	char raw[192], *p, *end;
	long n;
	long long id;

	if (cursor == NULL || strlen(cursor) > 240)
		return -1;
	n = rp_b64url_decode(cursor, raw, sizeof raw - 1);
	if (n < 5)
		return -1;
	raw[n] = '\0';
	if (strlen(raw) != (size_t)n || strncmp(raw, "v1:", 3) != 0)
		return -1;
	if (raw[3] != (sort_by_name ? 'n' : 'i') || raw[4] != ':')
		return -1;
	p = raw + 5;
	id = strtoll(p, &end, 10);
	if (end == p || *end != ':' || id < 0)
		return -1;
	if (strlen(end + 1) >= keylen)
		return -1;
	*after_id = id;
	snprintf(keybuf, keylen, "%s", end + 1);
	return 0;
}

int
rp_api_page_parse(struct rp_api_req *req, struct rp_page_req *rq, char *keybuf, size_t keylen,
                  int sortable, struct rp_api_resp *rs)
{
	const char *limit = json_string_value(json_object_get(req->query, "limit"));
	const char *cursor = json_string_value(json_object_get(req->query, "cursor"));
	const char *sort = json_string_value(json_object_get(req->query, "sort"));
	char *end;
	long v;

	memset(rq, 0, sizeof *rq);
	rq->limit = 100;
	if (limit) {
		v = strtol(limit, &end, 10);
		if (end == limit || *end != '\0' || v < 1 || v > 1000) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "limit must be an integer from 1 to 1000");
			return -1;
		}
		rq->limit = (int)v;
	}
	if (sort) {
		if (sortable && strcmp(sort, "name") == 0) {
			rq->sort_by_name = 1;
		} else if (strcmp(sort, "created") != 0) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              sortable ? "sort must be name or created"
			                       : "sort must be created");
			return -1;
		}
	}
	if (cursor) {
		if (rp_api_cursor_decode(cursor, rq->sort_by_name, &rq->after_id, keybuf, keylen) <
		    0) {
			rp_api_error(rs, RP_ERR_BAD_CURSOR, NULL);
			return -1;
		}
		if (rq->sort_by_name)
			rq->after_key = keybuf;
	}
	return 0;
}

/* Keep only the members named in `fields` (comma-separated) of each item. */
static int
select_fields(json_t *items, const char *fields, const struct rp_field *spec,
              struct rp_api_resp *rs)
{
	char buf[512], *save = NULL, *tok;
	const char *names[64];
	size_t n = 0, i, j;
	json_t *item;

	if (strlen(fields) >= sizeof buf) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "fields is too long");
		return -1;
	}
	snprintf(buf, sizeof buf, "%s", fields);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!rp_api_field_known(spec, tok) || n == 64) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY, "unknown field '%.64s' in fields", tok);
			return -1;
		}
		names[n++] = tok;
	}
	if (n == 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "fields names no field");
		return -1;
	}
	json_array_foreach(items, i, item)
	{
		json_t *kept = json_object();

		for (j = 0; j < n; j++) {
			json_t *v = json_object_get(item, names[j]);

			if (v)
				json_object_set(kept, names[j], v);
		}
		json_array_set_new(items, i, kept);
	}
	return 0;
}

void
rp_api_page_reply(struct rp_api_req *req, struct rp_api_resp *rs, struct rp_page *pg,
                  int sort_by_name, const struct rp_field *spec)
{
	const char *fields = json_string_value(json_object_get(req->query, "fields"));
	char cursor[RP_CURSOR_BUF];

	if (pg->more)
		rp_api_cursor_encode(sort_by_name, pg->last_id, pg->last_key, cursor);
	if (pg->text) {
		/* The same bytes the tree below would be printed as. */
		struct rp_buf b;

		rp_buf_init(&b, 0);
		rp_buf_append(&b, "{\"items\":", 9);
		rp_buf_append(&b, pg->text, pg->text_len);
		if (pg->more)
			rp_buf_printf(&b, ",\"next_cursor\":\"%s\"}\n", cursor);
		else
			rp_buf_append(&b, ",\"next_cursor\":null}\n", 21);
		free(pg->text);
		pg->text = NULL;
		rp_api_reply_buf(rs, &b, "application/json");
		return;
	}
	if (fields && select_fields(pg->items, fields, spec, rs) < 0) {
		json_decref(pg->items);
		pg->items = NULL;
		return;
	}
	rs->status = 200;
	rs->body = json_pack("{s:o, s:s?}", "items", pg->items, "next_cursor",
	                     pg->more ? cursor : NULL);
	pg->items = NULL;
}
