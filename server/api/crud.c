/* The common handler shape of named collections: create, list, get, update, delete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

int
rp_api_need_object(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	if (json_is_object(rq->body))
		return 0;
	rp_api_errorf(rs, RP_ERR_BAD_REQUEST, "request body must be a JSON object");
	return -1;
}

void
rp_api_crud_create(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL;
	enum rp_err e;
	char actor[96];

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, c->spec, 1, &detail)) != RP_ERR_OK ||
	    (c->check && (e = c->check(rq->body, &detail)) != RP_ERR_OK)) {
		rp_api_error(rs, e, detail);
		return;
	}
	e = c->create(rq->api->store, rq->body, rp_api_actor(rq, actor), &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, NULL);
		return;
	}
	snprintf(rs->location, sizeof rs->location, "%s/%s", c->collection,
	         json_string_value(json_object_get(out, "id")));
	rp_api_reply_object(rq, rs, 201, out);
}

void
rp_api_crud_list(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_page_req pr;
	struct rp_page pg = {0};
	char key[128];
	json_t *filter = NULL;
	enum rp_err e;

	if (rp_api_page_parse(rq, &pr, key, sizeof key, c->sortable, rs) < 0)
		return;
	if (rp_api_filter(rq, c->filters, &filter, rs) < 0)
		return;
	pr.filter = filter;
	/* Items that are sent as they are come as text; fields= selects from a tree. */
	pr.want_text = json_object_get(rq->query, "fields") == NULL;
	e = c->list(rq->api->store, &pr, &pg);
	if (e == RP_ERR_BAD_QUERY)
		rp_api_errorf(rs, e, "a filter names a %s that does not exist", "rack or node");
	else if (e != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else
		rp_api_page_reply(rq, rs, &pg, pr.sort_by_name, c->spec);
	json_decref(filter);
}

/*
 * Cached GET replies are "JSON\n" + NUL + "ETAG": the body comes first so the cached bytes
 * themselves can be sent, and the ETag after the body's end. Takes the entry (released with
 * free_fn).
 */
static void
reply_cached(struct rp_api_req *rq, struct rp_api_resp *rs, char *entry, size_t len,
             void (*free_fn)(void *))
{
	size_t body = strlen(entry);
	const char *etag = entry + body + 1;

	if (body + 1 >= len || len - body - 1 >= sizeof rs->etag) {
		free_fn(entry);
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return;
	}
	memcpy(rs->etag, etag, len - body - 1);
	rs->etag[len - body - 1] = '\0';
	if (rq->if_none_match &&
	    (strcmp(rq->if_none_match, rs->etag) == 0 || strcmp(rq->if_none_match, "*") == 0)) {
		free_fn(entry);
		rs->status = 304;
		return;
	}
	rs->status = 200;
	rs->text = entry;
	rs->text_len = body;
	rs->text_free = free_fn;
	rs->content_type = "application/json";
}

void
rp_api_crud_get(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_memo *memo = rq->api->get_cache;
	json_t *out = NULL;
	char key[256], why[160], *buf, *text;
	size_t len;
	uint64_t gen;
	char etag[40];
	enum rp_err e;
	struct rp_buf b = {0};

	/* Generation first: a result read afterwards is at least this fresh. */
	gen = rp_store_generation(rq->api->store);
	{
		size_t a = strlen(c->collection), p = strlen(rq->params[0]);

		if (a + p + 2 > sizeof key)
			p = sizeof key - a - 2;
		memcpy(key, c->collection, a);
		key[a] = '/';
		memcpy(key + a + 1, rq->params[0], p);
		key[a + 1 + p] = '\0';
	}
	if (memo && (buf = rp_memo_get(memo, key, gen, &len)) != NULL) {
		reply_cached(rq, rs, buf, len, rp_memo_release);
		return;
	}
	e = c->get(rq->api->store, rq->params[0], &out);
	if (e != RP_ERR_OK) {
		snprintf(why, sizeof why, "no %s '%.64s'", c->what, rq->params[0]);
		rp_api_reply_store_error(rs, e, NULL, why);
		return;
	}
	rp_api_etag(out, etag);
	text = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	if (text == NULL) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return;
	}
	rp_buf_printf(&b, "%s\n%c%s", text, '\0', etag);
	free(text);
	if (b.oom) {
		rp_buf_free(&b);
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return;
	}
	if (memo)
		rp_memo_put(memo, key, gen, b.data, b.len);
	reply_cached(rq, rs, b.data, b.len, free);
}

void
rp_api_crud_update(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL;
	int64_t want;
	enum rp_err e;
	char actor[96], why[160];

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((want = rp_api_if_match(rq, rs)) < 0)
		return;
	if ((e = rp_api_validate(rq->body, c->spec, 0, &detail)) != RP_ERR_OK ||
	    (c->check && (e = c->check(rq->body, &detail)) != RP_ERR_OK)) {
		rp_api_error(rs, e, detail);
		return;
	}
	e = c->update(rq->api->store, rq->params[0], rq->body, want, rp_api_actor(rq, actor), &out,
	              &detail);
	if (e != RP_ERR_OK) {
		snprintf(why, sizeof why, "no %s '%.64s'", c->what, rq->params[0]);
		rp_api_reply_store_error(rs, e, detail, why);
		return;
	}
	rp_api_reply_object(rq, rs, 200, out);
}

void
rp_api_crud_delete(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL;
	int64_t want;
	enum rp_err e;
	char actor[96], why[160];

	if ((want = rp_api_if_match(rq, rs)) < 0)
		return;
	e = c->destroy(rq->api->store, rq->params[0], want, rp_api_actor(rq, actor), &detail);
	if (e != RP_ERR_OK) {
		snprintf(why, sizeof why, "no %s '%.64s'", c->what, rq->params[0]);
		rp_api_reply_store_error(rs, e, detail, why);
		return;
	}
	rs->status = 204;
}

void
rp_api_view(struct rp_api_req *rq, struct rp_api_resp *rs,
            enum rp_err (*fn)(struct rp_store *, const char *, json_t **), const char *what)
{
	json_t *out = NULL;
	enum rp_err e = fn(rq->api->store, rq->params[0], &out);
	char why[160];

	if (e != RP_ERR_OK) {
		snprintf(why, sizeof why, "no %s '%.64s'", what, rq->params[0]);
		rp_api_reply_store_error(rs, e, NULL, why);
		return;
	}
	rs->status = 200;
	rs->body = out;
}

static const char *const drift_filters[] = {"rack", "class", "node", NULL};

void
rp_api_drift(struct rp_api_req *rq, struct rp_api_resp *rs,
             enum rp_err (*fn)(struct rp_store *, json_t *, json_t **))
{
	json_t *filter = NULL, *out = NULL;
	enum rp_err e;

	if (rp_api_filter(rq, drift_filters, &filter, rs) < 0)
		return;
	e = fn(rq->api->store, filter, &out);
	json_decref(filter);
	if (e == RP_ERR_BAD_QUERY)
		rp_api_errorf(rs, e, "rack or node in the filter does not exist");
	else if (e != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else {
		rs->status = 200;
		rs->body = out;
	}
}

void
rp_api_reading(struct rp_api_req *rq, struct rp_api_resp *rs, const struct rp_field *spec,
               const char *member,
               enum rp_err (*fn)(struct rp_store *, const char *, const char *, json_t *,
                                 const char *))
{
	json_t *detail = NULL;
	enum rp_err e;
	char actor[96];

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, spec, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	e = fn(rq->api->store, rq->params[0],
	       json_string_value(json_object_get(rq->body, "source")),
	       json_object_get(rq->body, member), rp_api_actor(rq, actor));
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node");
		return;
	}
	rs->status = 204;
}
