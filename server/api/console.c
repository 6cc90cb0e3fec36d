/* A node's serial console: its log (text), its new lines (Server-Sent Events) and the interactive
 * console (a WebSocket handed to the console thread, jobs/console.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define TAIL_DEFAULT 100
#define TAIL_MAX     100000
#define BATCH        65536
#define KEEPALIVE_MS 15000

/* The console errors a lookup gives: 404, or 409 with why. */
static void
console_error(struct rp_api_resp *rs, enum rp_err e, const char *why)
{
	if (why[0] && (e == RP_ERR_CONFLICT || e == RP_ERR_UNSUPPORTED))
		rp_api_error(rs, e, json_pack("{s:s, s:s}", "field", "bmc", "reason", why));
	else
		rp_api_reply_store_error(rs, e, NULL, "no such node");
}

void
rp_api_nodes_console_log(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {"tail", NULL};
	const char *t = json_string_value(json_object_get(rq->query, "tail"));
	long tail = TAIL_DEFAULT;
	char *text = NULL, *end;
	size_t len = 0;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0)
		return;
	if (t) {
		errno = 0;
		tail = strtol(t, &end, 10);
		if (errno || end == t || *end || tail < 1 || tail > TAIL_MAX) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "tail must be a number of lines from 1 to %d", TAIL_MAX);
			return;
		}
	}
	if ((e = rp_jobs_console_log(rq->api->jobs, rq->params[0], (unsigned)tail, &text, &len)) !=
	    RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node");
		return;
	}
	rs->status = 200;
	rs->text = text;
	rs->text_len = len;
	rs->content_type = "text/plain; charset=utf-8";
}

/* ---- GET /v1/nodes/{node}/console/stream: Server-Sent Events ---------------------------- */

struct cstream {
	struct rp_api *api;
	int slot;
	char uuid[RP_UUID_BUF];
	uint64_t next;
	int64_t last_write;
	char head[32]; /* "retry: 2000\n\n" until it is sent */
};

static long
cstream_read(void *ctx, char *buf, size_t max, uint64_t *idle_gen)
{
	struct cstream *cs = ctx;
	uint64_t gen = rp_api_generation(cs->api);
	long n;

	if (cs->head[0]) {
		n = (long)strlen(cs->head);
		if ((size_t)n > max)
			return -1;
		memcpy(buf, cs->head, (size_t)n);
		cs->head[0] = '\0';
		cs->last_write = rp_time_now_ms();
		return n;
	}
	if ((n = rp_jobs_console_read(cs->api->jobs, cs->uuid, &cs->next, buf, max)) < 0)
		return -1;
	if (n == 0 && rp_time_now_ms() - cs->last_write >= KEEPALIVE_MS && max > 16) {
		memcpy(buf, ": keep-alive\n\n", 14);
		n = 14;
	}
	if (n > 0) {
		cs->last_write = rp_time_now_ms();
		return n;
	}
	*idle_gen = gen;
	return 0;
}

static void
cstream_free(void *ctx)
{
	struct cstream *cs = ctx;

	if (cs == NULL)
		return;
	rp_api_stream_give(cs->api, cs->slot);
	free(cs);
}

void
rp_api_nodes_console_stream(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {"after", NULL};
	const char *after = rq->last_event_id
	                            ? rq->last_event_id
	                            : json_string_value(json_object_get(rq->query, "after"));
	struct cstream *cs = NULL;
	char name[64], why[256] = "", *end;
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0)
		return;
	if ((cs = calloc(1, sizeof *cs)) == NULL) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return;
	}
	cs->api = rq->api;
	cs->slot = -1;
	if (after) {
		unsigned long long v;

		errno = 0;
		v = strtoull(after, &end, 10);
		if (errno || end == after || *end || after[0] == '-') {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "after (or Last-Event-ID) must be a console line id");
			goto out;
		}
		cs->next = v + 1;
	}
	if ((e = rp_jobs_console_check(rq->api->jobs, rq->params[0], 0, cs->uuid, name, sizeof name,
	                               why, sizeof why)) != RP_ERR_OK) {
		console_error(rs, e, why);
		goto out;
	}
	if ((cs->slot = rp_api_stream_take(rq->api, rq->who->id)) < 0) {
		rp_api_errorf(rs, RP_ERR_RATE_LIMITED,
		              "this token holds %u open streams already (max_streams_per_token)",
		              rq->api->max_streams_per_token);
		rs->retry_after = 5;
		goto out;
	}
	snprintf(cs->head, sizeof cs->head, "retry: 2000\n\n");
	rs->status = 200;
	rs->content_type = "text/event-stream";
	rs->stream_read = cstream_read;
	rs->stream_free = cstream_free;
	rs->stream_ctx = cs;
	cs = NULL;
out:
	cstream_free(cs);
}

/* ---- GET /v1/nodes/{node}/console: the WebSocket -------------------------------------- */

struct cws {
	struct rp_api *api;
	int slot; /* the token's stream slot: a console counts as a stream */
	struct rp_api_ws *ws;
	char uuid[RP_UUID_BUF];
	char name[64];
	char actor[96];
	int write;
};

static void
cws_free(void *ctx)
{
	struct cws *c = ctx;

	if (c == NULL)
		return;
	rp_api_stream_give(c->api, c->slot);
	free(c);
}

static void
ws_close(void *arg)
{
	struct cws *c = arg;

	c->ws->close(c->ws);
	cws_free(c);
}

static void
ws_open(void *ctx, struct rp_api_ws *ws)
{
	struct cws *c = ctx;
	struct rp_console_conn conn = {.fd = ws->fd, .peer = ws->peer, .close = ws_close, .arg = c};

	c->ws = ws;
	/* The console owns the connection (and c) now, also when this fails. */
	if (rp_jobs_console_attach(c->api->jobs, c->uuid, c->name, &conn, c->write, c->actor) !=
	    RP_ERR_OK)
		rp_log_warn("console of %s: cannot attach a viewer", c->name);
}

void
rp_api_nodes_console(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const known[] = {"mode", NULL};
	static const char *const modes[] = {"write", "read", NULL};
	const char *mode = json_string_value(json_object_get(rq->query, "mode"));
	struct cws *c;
	char why[256] = "";
	enum rp_err e;

	if (rp_api_query_known(rq, rs, known) < 0 || rp_api_query_one_of(rq, rs, "mode", modes) < 0)
		return;
	if ((c = calloc(1, sizeof *c)) == NULL) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return;
	}
	c->api = rq->api;
	c->slot = -1;
	rp_api_actor(rq, c->actor);
	/* Viewers watch; an operator writes unless it asks to watch. */
	c->write = rq->who && rq->who->role >= RP_ROLE_OPERATOR && rq->who->role != RP_ROLE_AGENT &&
	           !(mode && !strcmp(mode, "read"));
	if (mode && !strcmp(mode, "write") && !c->write) {
		cws_free(c);
		rp_api_errorf(rs, RP_ERR_FORBIDDEN,
		              "typing into a console needs an operator token (mode=read watches)");
		return;
	}
	if ((e = rp_jobs_console_check(rq->api->jobs, rq->params[0], 1, c->uuid, c->name,
	                               sizeof c->name, why, sizeof why)) != RP_ERR_OK) {
		cws_free(c);
		console_error(rs, e, why);
		return;
	}
	/* One token cannot hold every WebSocket the server has. */
	if ((c->slot = rp_api_stream_take(rq->api, rq->who->id)) < 0) {
		cws_free(c);
		rp_api_errorf(rs, RP_ERR_RATE_LIMITED,
		              "this token holds %u open streams and consoles already "
		              "(max_streams_per_token)",
		              rq->api->max_streams_per_token);
		rs->retry_after = 5;
		return;
	}
	rs->ws_open = ws_open;
	rs->ws_free = cws_free;
	rs->ws_ctx = c;
}
