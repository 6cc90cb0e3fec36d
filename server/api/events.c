/* /v1/events */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

static const struct rp_field event_fields[] = {
        {"id", RP_F_READ_ONLY},     {"at", RP_F_READ_ONLY},
        {"actor", RP_F_READ_ONLY},  {"action", RP_F_READ_ONLY},
        {"object", RP_F_READ_ONLY}, {"summary", RP_F_READ_ONLY},
        {"detail", RP_F_READ_ONLY}, {NULL},
};

static const char *const event_filters[] = {"node", "rack", "action", NULL};

/* A time argument into filter (ms), when given. */
static int
time_arg(struct rp_api_req *rq, const char *name, json_t *filter, struct rp_api_resp *rs)
{
	int64_t ms;
	int r = rp_api_query_time(rq, rs, name, &ms);

	if (r > 0)
		json_object_set_new(filter, name, json_integer(ms));
	return r < 0 ? -1 : 0;
}

void
rp_api_events_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_page_req pr;
	struct rp_page pg = {0};
	json_t *filter = NULL;
	char key[128];
	enum rp_err e;

	if (rp_api_page_parse(rq, &pr, key, sizeof key, 0, rs) < 0)
		return;
	if (rp_api_filter(rq, event_filters, &filter, rs) < 0)
		return;
	if (json_object_get(filter, "node") && json_object_get(filter, "rack")) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "filter by node or by rack, not both");
		goto out;
	}
	if (time_arg(rq, "since", filter, rs) < 0 || time_arg(rq, "until", filter, rs) < 0)
		goto out;
	pr.filter = filter;
	e = rp_store_event_list(rq->api->store, &pr, &pg);
	if (e == RP_ERR_BAD_QUERY)
		rp_api_errorf(rs, e, "node or rack in the filter does not exist");
	else if (e != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else
		rp_api_page_reply(rq, rs, &pg, 0, event_fields);
out:
	json_decref(filter);
}

/* ---- GET /v1/events/stream: Server-Sent Events ---------------------------------------- */

#define STREAM_BATCH        100
#define STREAM_KEEPALIVE_MS 15000

struct evstream {
	struct rp_api *api;
	int slot; /* in api->streams, or -1 */
	json_t *filter;
	int64_t last_id;    /* newest event sent (or the head when the stream began) */
	int64_t last_write; /* ms; a keep-alive goes out after STREAM_KEEPALIVE_MS of silence */
	struct rp_buf pend; /* formatted, not yet handed to the server */
	uint64_t store_gen; /* the store's generation it last caught up with (0: none yet) */
	size_t off;
};

int
rp_api_stream_take(struct rp_api *api, const char *token)
{
	int i, free_slot = -1, slot = -1;

	pthread_mutex_lock(&api->streams_mu);
	for (i = 0; i < RP_API_MAX_STREAM_TOKENS && slot < 0; i++) {
		if (api->streams[i].open && !strcmp(api->streams[i].token, token))
			slot = i;
		else if (!api->streams[i].open && free_slot < 0)
			free_slot = i;
	}
	if (slot < 0 && free_slot >= 0) {
		slot = free_slot;
		snprintf(api->streams[slot].token, sizeof api->streams[slot].token, "%s", token);
	}
	if (slot >= 0 && api->streams[slot].open >= api->max_streams_per_token)
		slot = -1;
	if (slot >= 0)
		api->streams[slot].open++;
	pthread_mutex_unlock(&api->streams_mu);
	return slot;
}

static void
evstream_free(void *ctx)
{
	struct evstream *es = ctx;

	if (es == NULL)
		return;
	rp_api_stream_give(es->api, es->slot);
	json_decref(es->filter);
	rp_buf_free(&es->pend);
	free(es);
}

void
rp_api_stream_give(struct rp_api *api, int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&api->streams_mu);
	api->streams[slot].open--;
	pthread_mutex_unlock(&api->streams_mu);
}

/* "id: N\nevent: ACTION\ndata: JSON\n\n" per event; the JSON is compact, so one data line. */
static int
evstream_fill(struct evstream *es, uint64_t *idle_gen)
{
	json_t *items = NULL, *ev;
	uint64_t gen = rp_api_generation(es->api), sgen = rp_store_generation(es->api->store);
	size_t i;
	int rc = -1;

	/* Woken by a console line, not a commit: no new event, no query. */
	if (sgen == es->store_gen && es->store_gen != 0) {
		items = json_array();
	} else if (rp_store_event_after(es->api->store, es->last_id, es->filter, STREAM_BATCH,
	                                &items) != RP_ERR_OK) {
		goto out;
	} else if (json_array_size(items) < STREAM_BATCH) {
		es->store_gen = sgen; /* caught up with this generation */
	}
	json_array_foreach(items, i, ev)
	{
		char *data = json_dumps(ev, JSON_COMPACT);
		json_int_t id = json_integer_value(json_object_get(ev, "id"));

		if (data == NULL)
			goto out;
		rp_buf_printf(&es->pend, "id: %" PRId64 "\nevent: %s\ndata: %s\n\n", (int64_t)id,
		              json_string_value(json_object_get(ev, "action")), data);
		free(data);
		if (es->pend.oom)
			goto out;
		es->last_id = id;
	}
	if (es->pend.len == 0 && rp_time_now_ms() - es->last_write >= STREAM_KEEPALIVE_MS)
		rp_buf_printf(&es->pend, ": keep-alive\n\n");
	if (es->pend.oom)
		goto out;
	*idle_gen = gen;
	rc = 0;
out:
	json_decref(items);
	return rc;
}

static long
evstream_read(void *ctx, char *buf, size_t max, uint64_t *idle_gen)
{
	struct evstream *es = ctx;
	size_t n;

	if (es->off >= es->pend.len) {
		es->pend.len = 0;
		es->off = 0;
		if (evstream_fill(es, idle_gen) < 0)
			return -1;
		if (es->pend.len == 0)
			return 0;
	}
	n = es->pend.len - es->off;
	if (n > max)
		n = max;
	memcpy(buf, es->pend.data + es->off, n);
	es->off += n;
	es->last_write = rp_time_now_ms();
	return (long)n;
}

void
rp_api_events_stream(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const stream_filters[] = {"node", "rack", "action", "after", NULL};
	struct evstream *es = NULL;
	json_t *filter = NULL;
	const char *after;
	char *end;
	enum rp_err e;

	if (rp_api_filter(rq, stream_filters, &filter, rs) < 0)
		return;
	if (json_object_get(filter, "node") && json_object_get(filter, "rack")) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "filter by node or by rack, not both");
		goto out;
	}
	if ((es = calloc(1, sizeof *es)) == NULL) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		goto out;
	}
	es->api = rq->api;
	if ((es->slot = rp_api_stream_take(rq->api, rq->who->id)) < 0) {
		rp_api_errorf(rs, RP_ERR_RATE_LIMITED,
		              "this token has %u event streams open already; "
		              "close one (or use another token)",
		              rq->api->max_streams_per_token);
		rs->retry_after = 5;
		goto out;
	}
	/* A reconnecting EventSource sends Last-Event-ID; scripts may say ?after=. */
	after = rq->last_event_id ? rq->last_event_id
	                          : json_string_value(json_object_get(filter, "after"));
	if (after) {
		long long v;

		errno = 0;
		v = strtoll(after, &end, 10);
		if (errno || end == after || *end || v < 0) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "after (or Last-Event-ID) must be an event id");
			goto out;
		}
		es->last_id = v;
	} else if ((e = rp_store_event_head(rq->api->store, &es->last_id)) != RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		goto out;
	}
	json_object_del(filter, "after");
	/* An unknown node or rack is a 400 now, not a silent stream that never says anything. */
	{
		json_t *probe = NULL;

		e = rp_store_event_after(rq->api->store, INT64_MAX - 1, filter, 1, &probe);
		json_decref(probe);
		if (e == RP_ERR_NOT_FOUND) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "node or rack in the filter does not exist");
			goto out;
		} else if (e != RP_ERR_OK) {
			rp_api_error(rs, e, NULL);
			goto out;
		}
	}
	es->filter = filter;
	filter = NULL;
	/* The first bytes tell the client how soon to reconnect, and get the headers out. */
	rp_buf_printf(&es->pend, "retry: 2000\n\n");
	if (es->pend.oom) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		goto out;
	}
	es->last_write = rp_time_now_ms();
	rs->status = 200;
	rs->content_type = "text/event-stream";
	rs->stream_read = evstream_read;
	rs->stream_free = evstream_free;
	rs->stream_ctx = es;
	es = NULL;
out:
	evstream_free(es);
	json_decref(filter);
}
