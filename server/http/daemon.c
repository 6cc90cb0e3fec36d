/* The libmicrohttpd daemon and the single dispatcher behind every route. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stddef.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pthread.h>

#include <microhttpd.h>

#include "http.h"
#include "rackpilot/ws.h"

/* An event stream: a response whose body comes from the api's stream_read. When that has
 * nothing to say the connection is suspended ("parked") until rp_http_streams_wake sees the
 * store move on or a keep-alive fall due. */
struct stream {
	struct rp_http *h;
	struct MHD_Connection *c;
	long (*read)(void *ctx, char *buf, size_t max, uint64_t *idle_gen);
	void (*free)(void *ctx);
	void *ctx;
	uint64_t idle_gen;
	int64_t parked_at;
	int gone; /* the peer hung up while the stream was parked */
};

#define MAX_STREAMS         256
#define STREAM_KEEPALIVE_MS 15000
#define STREAM_POLL_MS      20
#define BIG_REQUEST         (1u << 20) /* a body this large: memory goes back after it */
/* WebSockets accepted or open at once, per daemon: each holds a descriptor (three with TLS,
 * where libmicrohttpd relays through a socketpair) until its owner closes it. */
#define MAX_WEBSOCKETS  64
#define WS_STOP_WAIT_S  10  /* rp_http_stop waits this long for owners to close */
#define WS_TOKEN_MAX    128 /* as rp_api_authenticate takes them */
#define WS_HANGUP_POLLS 25  /* TLS: look for clients that left every 25 STREAM_POLL_MS */

/* A WebSocket from the handler's acceptance to its owner's close(). Until the upgrade the
 * request owns it (r->ws: completed() drops it if the upgrade never comes), then the owner of
 * ws. */
struct wsconn {
	struct rp_api_ws ws; /* first: close() finds the wsconn from it */
	struct rp_http *h;   /* NULL once rp_http_stop gave up waiting for close() */
	void (*open)(void *ctx, struct rp_api_ws *ws);
	void (*free)(void *ctx);
	void *ctx;
	struct wsconn *prev, *next; /* h->ws_list while open */
	int closing;                /* close() is in MHD_upgrade_action */
	int tcp;    /* TLS: the client's socket (ws.fd is a socketpair's); else -1 */
	int hungup; /* ws_hangups saw the client leave */
	char peer[INET6_ADDRSTRLEN];
};

/* Guards every daemon's WebSocket fields and wsconn.h/closing/prev/next. A leaf lock: never
 * held across a libmicrohttpd call, which may call back into completed(). Static, not in
 * struct rp_http, because a wsconn whose owner outlived the daemon still takes it. */
static pthread_mutex_t ws_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ws_cv = PTHREAD_COND_INITIALIZER;

struct rp_http {
	struct MHD_Daemon *d;
	struct rp_api *api;
	struct rp_http_opts o;
	char address[80];
	pthread_mutex_t lock; /* guards the fields below */
	struct stream *parked[MAX_STREAMS];
	size_t nparked;
	unsigned nstreams; /* open streams, parked or not */
	int closing;
	pthread_t waker; /* polls o.generation for parked streams */
	int has_waker;
	/* Under ws_mu: */
	unsigned nws;           /* WebSockets reserved (handler running, 101 queued) or open */
	struct wsconn *ws_list; /* open ones (upgraded, not yet closed) */
	int ws_stopping;        /* rp_http_stop: no more upgrades */
};

#define MAX_SEGMENTS 8
#define PATH_MAX_LEN 512

/* Per-request state, across the access handler's calls. */
struct request {
	int64_t t0;
	size_t route;       /* index into rp_api_routes, or count when unmatched */
	struct rp_buf body; /* capped by the route's body limit (rp_buf_init in begin) */
	int too_big;        /* an upload passed max_upload */
	int done;           /* a response was queued */
	int status;
	struct rp_api_resp *early; /* an error decided before the body, not yet sent */
	/* Request headers this server reads, found in one pass (MHD keeps them alive for the
	 * request's lifetime). */
	const char *h_rid, *h_clen, *h_te, *h_auth, *h_ctype, *h_if_match, *h_if_none_match;
	const char *h_host, *h_range, *h_lei;
	struct upload *up; /* RP_ROUTE_UPLOAD: the body on its way to disk */
	/* RP_ROUTE_WEBSOCKET: the handshake's key, whether the client offered RP_WS_PROTOCOL, the
	 * accepted WebSocket until it is upgraded, and whether the upgrade logged the request. */
	const char *h_wskey;
	int ws_proto, logged;
	struct wsconn *ws;
	/* Fields from here on are not cleared at allocation. */
	char rid[40];
	char line[128]; /* "METHOD /path" for the access log */
	char allow[64];
	char params[RP_API_MAX_PARAMS][72]; /* names are at most 63 bytes, UUIDs 36 */
	struct rp_principal who;
};
/* Small enough for glibc's per-thread cache (1032 bytes): a larger struct sends every
 * request through malloc's slow path. */
_Static_assert(sizeof(struct request) <= 1024, "struct request outgrew the malloc fast path");

/* An upload streaming to a temporary file, hashed as it comes. */
struct upload {
	int fd;
	int failed; /* errno of a failed write, or 0 */
	uint64_t len;
	struct rp_sha256 *hash;
	char path[4200];
};

static void
upload_free(struct upload *u)
{
	if (u == NULL)
		return;
	if (u->fd >= 0)
		close(u->fd);
	if (u->path[0])
		unlink(u->path); /* an upload that never reached its handler */
	rp_sha256_free(u->hash);
	free(u);
}

static size_t
put(char *b, size_t n, size_t cap, const char *s)
{
	while (*s && n + 1 < cap)
		b[n++] = *s++;
	return n;
}

/* Like put, for what a client sent: control bytes, non-ASCII, quotes and backslashes become
 * \xHH, so a decoded "%0a" in a URL cannot start a log line of its own. */
static size_t
put_escaped(char *b, size_t n, size_t cap, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
			if (n + 1 >= cap)
				break;
			b[n++] = (char)ch;
		} else {
			if (n + 4 >= cap)
				break;
			b[n++] = '\\';
			b[n++] = 'x';
			b[n++] = "0123456789abcdef"[ch >> 4];
			b[n++] = "0123456789abcdef"[ch & 15];
		}
	}
	return n;
}

static size_t
putnum(char *b, size_t n, size_t cap, long long v)
{
	char d[24];
	int i = 0;

	if (v < 0)
		v = 0;
	do
		d[i++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	while (i > 0 && n + 1 < cap)
		b[n++] = d[--i];
	return n;
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	(void)cls;
	vsnprintf(buf, sizeof buf, fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	rp_log_warn("http: %s", buf);
}

int
rp_http_parse_listen(const char *s, char *host, size_t hostlen, unsigned *port)
{
	const char *colon;
	char *end;
	unsigned long p;
	size_t n;

	if (s == NULL)
		return -1;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':')
			return -1;
		n = (size_t)(close - s - 1);
		s++;
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		n = (size_t)(colon - s);
	}
	if (n == 0 || n >= hostlen)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	p = strtoul(colon + 1, &end, 10);
	if (end == colon + 1 || *end != '\0' || p > 65535)
		return -1;
	*port = (unsigned)p;
	return 0;
}

/* Match path against pattern; captures go to r->params. 1 on match. */
static int
match(const char *pattern, const char *path, struct request *r)
{
	const char *p = pattern, *u = path;
	int np = 0;

	while (*p && *u) {
		if (*p != '/' || *u != '/')
			return 0;
		p++;
		u++;
		if (*p == '{') {
			size_t n = strcspn(u, "/");

			if (n == 0 || n >= sizeof r->params[0] || np >= RP_API_MAX_PARAMS)
				return 0;
			memcpy(r->params[np], u, n);
			r->params[np++][n] = '\0';
			u += n;
			p = strchr(p, '}');
			if (p == NULL)
				return 0;
			p++;
		} else {
			size_t n = strcspn(p, "/"), m = strcspn(u, "/");

			if (n != m || strncmp(p, u, n) != 0)
				return 0;
			p += n;
			u += m;
		}
	}
	return *p == '\0' && *u == '\0';
}

static size_t
segments(const char *p)
{
	size_t n = 0;

	for (; *p; p++)
		n += *p == '/';
	return n;
}

/* Segment counts of the route patterns, so most routes are skipped without a compare. */
#define MAX_ROUTES 512
static size_t route_segments[MAX_ROUTES];
static pthread_once_t route_once = PTHREAD_ONCE_INIT;

static void
route_init(void)
{
	size_t i;

	if (rp_api_route_count > MAX_ROUTES)
		abort(); /* raise MAX_ROUTES */
	for (i = 0; i < rp_api_route_count; i++)
		route_segments[i] = segments(rp_api_routes[i].pattern);
}

/* Find the route; *allow collects the methods of routes whose path matched. */
static size_t
route_find(const char *method, const char *url, struct request *r, char *allow, size_t allowlen)
{
	char path[PATH_MAX_LEN];
	size_t i, n = strlen(url), nseg;

	allow[0] = '\0';
	if (n >= sizeof path)
		return rp_api_route_count;
	memcpy(path, url, n + 1);
	/* One trailing slash is forgiven: "/v1/nodes/" is "/v1/nodes". */
	if (n > 1 && path[n - 1] == '/')
		path[n - 1] = '\0';
	if (strcmp(method, "HEAD") == 0)
		method = "GET";
	pthread_once(&route_once, route_init);
	nseg = segments(path);
	for (i = 0; i < rp_api_route_count; i++) {
		if (route_segments[i] != nseg || !match(rp_api_routes[i].pattern, path, r))
			continue;
		if (strcmp(rp_api_routes[i].method, method) == 0)
			return i;
		if (strstr(allow, rp_api_routes[i].method) == NULL) {
			size_t l = strlen(allow);

			snprintf(allow + l, allowlen - l, "%s%s", l ? ", " : "",
			         rp_api_routes[i].method);
		}
	}
	return rp_api_route_count;
}

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	struct rp_http *h = st->h;
	uint64_t gen = 0;
	long n;

	(void)pos;
	if (__atomic_load_n(&h->closing, __ATOMIC_ACQUIRE))
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (st->gone)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	n = st->read(st->ctx, buf, max, &gen);
	if (n > 0)
		return n;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	pthread_mutex_lock(&h->lock);
	if (h->closing || h->nparked == MAX_STREAMS) {
		pthread_mutex_unlock(&h->lock);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	st->idle_gen = gen;
	st->parked_at = rp_time_now_ms();
	h->parked[h->nparked++] = st;
	/* Allowed from a content reader; MHD calls us again once resumed. */
	MHD_suspend_connection(st->c);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static void
stream_free(void *cls)
{
	struct stream *st = cls;
	struct rp_http *h = st->h;

	st->free(st->ctx);
	pthread_mutex_lock(&h->lock);
	h->nstreams--;
	pthread_mutex_unlock(&h->lock);
	free(st);
}

/* A response for rs's stream, or NULL (the caller answers 503) when too many are open. */
static struct MHD_Response *
stream_response(struct rp_http *h, struct MHD_Connection *c, struct rp_api_resp *rs)
{
	struct MHD_Response *resp = NULL;
	struct stream *st;

	pthread_mutex_lock(&h->lock);
	if (h->closing || h->nstreams >= MAX_STREAMS) {
		pthread_mutex_unlock(&h->lock);
		return NULL;
	}
	h->nstreams++;
	pthread_mutex_unlock(&h->lock);
	if ((st = calloc(1, sizeof *st)) == NULL)
		goto fail;
	st->h = h;
	st->c = c;
	st->read = rs->stream_read;
	st->free = rs->stream_free;
	st->ctx = rs->stream_ctx;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st,
	                                         stream_free);
	if (resp == NULL) {
		free(st);
		goto fail;
	}
	/* The response owns the context now; idle timeouts do not apply to a quiet stream,
	 * whose keep-alives find a peer that has gone. */
	rs->stream_read = NULL;
	rs->stream_free = NULL;
	rs->stream_ctx = NULL;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0U);
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return resp;
fail:
	pthread_mutex_lock(&h->lock);
	h->nstreams--;
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* Mark parked streams whose peer has hung up: a suspended connection is not polled, and a
 * keep-alive only finds the peer gone at its second write, so without this a client that
 * left would hold its stream (and its token's share of them) for half a minute. */
static void
streams_hangups(struct rp_http *h)
{
	struct pollfd p[MAX_STREAMS];
	size_t i, n = 0;

	for (i = 0; i < h->nparked; i++) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(h->parked[i]->c, MHD_CONNECTION_INFO_CONNECTION_FD);

		p[n].fd = ci ? ci->connect_fd : -1;
		p[n].events = POLLRDHUP;
		p[n++].revents = 0;
	}
	if (n == 0 || poll(p, n, 0) <= 0)
		return;
	for (i = 0; i < n; i++)
		if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR))
			h->parked[i]->gone = 1;
}

void
rp_http_streams_wake(struct rp_http *h, uint64_t gen, int64_t now_ms)
{
	size_t i, kept = 0;

	pthread_mutex_lock(&h->lock);
	streams_hangups(h);
	for (i = 0; i < h->nparked; i++) {
		struct stream *st = h->parked[i];

		if (h->closing || st->gone || st->idle_gen != gen ||
		    now_ms - st->parked_at >= STREAM_KEEPALIVE_MS)
			MHD_resume_connection(st->c);
		else
			h->parked[kept++] = st;
	}
	h->nparked = kept;
	pthread_mutex_unlock(&h->lock);
}

static enum MHD_Result
send_reply(struct rp_http *h, struct MHD_Connection *c, struct request *r, struct rp_api_resp *rs,
           const char *allow)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *text = NULL;
	size_t len = 0;
	const char *ctype = NULL, *cache = "no-store",
	           *csp = "default-src 'none'; frame-ancestors 'none'";
	const char *nosniff = "nosniff";
	char retry[16];
	const char *const *extra;
	void (*text_free)(void *) = free;

	if (rs->body) {
		text = json_dumps(rs->body, JSON_COMPACT);
		if (text == NULL) {
			rp_api_error(rs, RP_ERR_INTERNAL, NULL);
			text = json_dumps(rs->body, JSON_COMPACT);
		}
		len = text ? strlen(text) : 0;
		/* A trailing newline keeps curl output readable in a terminal. */
		if (text) {
			char *t = realloc(text, len + 2);

			if (t) {
				text = t;
				text[len++] = '\n';
				text[len] = '\0';
			}
		}
		ctype = "application/json";
	} else if (rs->text) {
		text = rs->text;
		len = rs->text_len;
		text_free = rs->text_free ? rs->text_free : free;
		rs->text = NULL;
		ctype = rs->content_type;
	}
	if (rs->stream_read && h && !text) {
		if ((resp = stream_response(h, c, rs)) == NULL) {
			rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "too many open event streams (%d)",
			              MAX_STREAMS);
			return send_reply(h, c, r, rs, allow);
		}
		ctype = rs->content_type;
	} else if (rs->has_file && !text) {
		/* libmicrohttpd sends it with sendfile(2) and closes the descriptor. */
		resp = MHD_create_response_from_fd_at_offset64(rs->file_len, rs->file_fd,
		                                               rs->file_off);
		if (resp == NULL)
			return MHD_NO;
		rs->has_file = 0;
		ctype = rs->content_type ? rs->content_type : "application/octet-stream";
	} else if (text)
		resp = MHD_create_response_from_buffer_with_free_callback(len, text, text_free);
	else
		resp = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
	if (resp == NULL) {
		if (text)
			text_free(text);
		return MHD_NO;
	}
	if (rs->content_range[0])
		MHD_add_response_header(resp, "Content-Range", rs->content_range);
	if (rs->accept_ranges)
		MHD_add_response_header(resp, "Accept-Ranges", "bytes");
	if (ctype)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, "X-Request-Id", r->rid);
	/* Every answer, JSON included, is inert in a browser unless its handler says otherwise. */
	for (extra = rs->headers; extra && extra[0]; extra += 2)
		if (!strcasecmp(extra[0], MHD_HTTP_HEADER_CACHE_CONTROL))
			cache = extra[1];
		else if (!strcasecmp(extra[0], "Content-Security-Policy"))
			csp = extra[1];
		else if (!strcasecmp(extra[0], "X-Content-Type-Options"))
			nosniff = extra[1];
		else
			MHD_add_response_header(resp, extra[0], extra[1]);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
	MHD_add_response_header(resp, "Content-Security-Policy", csp);
	MHD_add_response_header(resp, "X-Content-Type-Options", nosniff);
	if (rs->retry_after) {
		snprintf(retry, sizeof retry, "%u", rs->retry_after);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry);
	}
	if (rs->etag[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, rs->etag);
	if (rs->location[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, rs->location);
	if (allow && allow[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	r->status = rs->status;
	r->done = 1;
	ret = MHD_queue_response(c, (unsigned)rs->status, resp);
	MHD_destroy_response(resp);
	rp_api_resp_clear(rs);
	return ret;
}

static enum MHD_Result
send_error(struct MHD_Connection *c, struct request *r, enum rp_err e, json_t *detail,
           const char *allow)
{
	struct rp_api_resp rs = {0};

	rp_api_error(&rs, e, detail);
	return send_reply(NULL, c, r, &rs, allow);
}

/* 16 hex digits from a per-thread xorshift generator seeded by the kernel: ids only need
 * to be unique enough to grep for, and a getrandom(2) per request is measurable. */
static void
request_id(char out[17])
{
	static __thread uint64_t x;
	int i;

	if (x == 0 && (rp_random(&x, sizeof x) < 0 || x == 0))
		x = (uint64_t)rp_time_mono_ns() | 1;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	for (i = 0; i < 16; i++)
		out[i] = "0123456789abcdef"[(x >> (4 * i)) & 15];
	out[16] = '\0';
}

static int
rid_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (i >= 64 ||
		    !(s[i] == '-' || s[i] == '_' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return 0;
	return i > 0;
}

static void
media_type(const char *h, char *out, size_t n)
{
	size_t i = 0;

	out[0] = '\0';
	if (h == NULL)
		return;
	while (*h == ' ')
		h++;
	for (; *h && *h != ';' && *h != ' ' && i + 1 < n; h++)
		out[i++] = (char)((*h >= 'A' && *h <= 'Z') ? *h + 32 : *h);
	out[i] = '\0';
}

#define MAX_QUERY_ARGS 64

/* Query arguments, collected into an object created on the first one (most requests have
 * none). What cannot be an argument is remembered, not dropped: a filter that vanished
 * would widen a list, a digest that vanished would skip its check. */
struct args {
	json_t *q;
	const char *bad; /* why the query is refused, or NULL */
};

static enum MHD_Result
collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct args *a = cls;
	json_t *v;

	(void)kind;
	if (key == NULL || a->bad)
		return MHD_YES;
	if (a->q == NULL && (a->q = json_object()) == NULL)
		return MHD_NO;
	if (json_object_size(a->q) >= MAX_QUERY_ARGS) {
		a->bad = "too many query arguments";
		return MHD_YES;
	}
	/* jansson takes only valid UTF-8, for names and values alike. */
	if ((v = json_string(value ? value : "")) == NULL || json_object_set_new(a->q, key, v) < 0)
		a->bad = "query arguments must be valid UTF-8";
	return MHD_YES;
}

/* Refuse the request before reading its body. Without a body the reply waits for the
 * final call: libmicrohttpd closes the connection after a reply queued this early, and a
 * body-less request need not lose its keep-alive. With a body, reply at once and close
 * rather than read what is refused. */
static enum MHD_Result
refuse(struct MHD_Connection *c, struct request *r, int has_body, enum rp_err e, json_t *detail)
{
	r->early = calloc(1, sizeof *r->early);
	if (r->early == NULL) {
		json_decref(detail);
		return MHD_NO;
	}
	rp_api_error(r->early, e, detail);
	if (!has_body)
		return MHD_YES;
	return send_reply(NULL, c, r, r->early, r->allow);
}

static enum MHD_Result
collect_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct request *r = cls;

	(void)kind;
	if (key == NULL || value == NULL)
		return MHD_YES;
	switch (key[0] | 0x20) {
	case 'a':
		if (!strcasecmp(key, "Authorization"))
			r->h_auth = value;
		break;
	case 'h':
		if (!strcasecmp(key, "Host"))
			r->h_host = value;
		break;
	case 'l':
		if (!strcasecmp(key, "Last-Event-ID"))
			r->h_lei = value;
		break;
	case 'r':
		if (!strcasecmp(key, "Range"))
			r->h_range = value;
		break;
	case 'c':
		if (!strcasecmp(key, "Content-Length"))
			r->h_clen = value;
		else if (!strcasecmp(key, "Content-Type"))
			r->h_ctype = value;
		break;
	case 'i':
		if (!strcasecmp(key, "If-Match"))
			r->h_if_match = value;
		else if (!strcasecmp(key, "If-None-Match"))
			r->h_if_none_match = value;
		break;
	case 't':
		if (!strcasecmp(key, "Transfer-Encoding"))
			r->h_te = value;
		break;
	case 'x':
		if (!strcasecmp(key, "X-Request-Id"))
			r->h_rid = value;
		break;
	}
	return MHD_YES;
}

/* ---- WebSocket handshakes (RFC 6455 4.2.1) --------------------------------------------- */

/* The next element of a comma-separated header list at *p, without the white space around
 * it; empty elements are skipped (RFC 9110 5.6.1). 0 at the end of the list. */
static int
list_next(const char **p, const char **el, size_t *len)
{
	const char *s = *p, *e;

	while (*s == ' ' || *s == '\t' || *s == ',')
		s++;
	if (*s == '\0') {
		*p = s;
		return 0;
	}
	e = s + strcspn(s, ",");
	*p = e;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*el = s;
	*len = (size_t)(e - s);
	return 1;
}

/* 1 when the list v holds tok (case-insensitive). */
static int
list_has(const char *v, const char *tok)
{
	const char *el;
	size_t n, tn = strlen(tok);

	while (list_next(&v, &el, &n))
		if (n == tn && strncasecmp(el, tok, n) == 0)
			return 1;
	return 0;
}

/* 1 when the n bytes at s are all token characters (RFC 9110 5.6.2), as a subprotocol's. */
static int
tchars(const char *s, size_t n)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') ||
		      memchr(extra, ch, sizeof extra - 1)))
			return 0;
	}
	return 1;
}

/* What a handshake's headers say, over every occurrence of each. */
struct handshake {
	int upgrade, connection; /* "websocket" in Upgrade, "upgrade" in Connection */
	int nkey, nversion, nbearer;
	const char *key, *version;
	const char *bearer; /* the token after RP_WS_PROTOCOL_BEARER, inside MHD's header copy */
	size_t bearer_len;
	int proto; /* RP_WS_PROTOCOL offered */
};

static enum MHD_Result
handshake_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct handshake *hs = cls;
	const char *el;
	size_t n, bl = strlen(RP_WS_PROTOCOL_BEARER);

	(void)kind;
	if (key == NULL || value == NULL)
		return MHD_YES;
	if (!strcasecmp(key, "Upgrade")) {
		hs->upgrade |= list_has(value, "websocket");
	} else if (!strcasecmp(key, "Connection")) {
		hs->connection |= list_has(value, "upgrade");
	} else if (!strcasecmp(key, "Sec-WebSocket-Key")) {
		hs->nkey++;
		hs->key = value;
	} else if (!strcasecmp(key, "Sec-WebSocket-Version")) {
		hs->nversion++;
		hs->version = value;
	} else if (!strcasecmp(key, "Sec-WebSocket-Protocol")) {
		/* Subprotocol names compare case-sensitively (RFC 6455 4.1). */
		while (list_next(&value, &el, &n)) {
			if (n == strlen(RP_WS_PROTOCOL) && !strncmp(el, RP_WS_PROTOCOL, n)) {
				hs->proto = 1;
			} else if (n >= bl && !strncmp(el, RP_WS_PROTOCOL_BEARER, bl)) {
				hs->nbearer++;
				hs->bearer = el + bl;
				hs->bearer_len = n - bl;
			}
		}
	}
	return MHD_YES;
}

static const char *const ws_version_header[] = {"Sec-WebSocket-Version", "13", NULL};

/* Before authentication, for a RP_ROUTE_WEBSOCKET request: read the handshake's headers into
 * *hs and find the token. 0 with *auth set to what to authenticate (the Authorization header;
 * without one, "Bearer <token>" from the bearer subprotocol, written into buf, buflen > 7 +
 * WS_TOKEN_MAX; or NULL), or 1 when refused (*ret to return): another method than GET, or a
 * bearer subprotocol offered wrongly. Nothing here copies the token anywhere but into buf. */
static int
ws_token(struct MHD_Connection *c, struct request *r, const char *method, int has_body,
         struct handshake *hs, char *buf, size_t buflen, const char **auth, enum MHD_Result *ret)
{
	const char *why = NULL;

	if (strcmp(method, "GET") != 0) {
		snprintf(r->allow, sizeof r->allow, "GET");
		*ret = refuse(c, r, has_body, RP_ERR_METHOD_NOT_ALLOWED,
		              json_pack("{s:s}", "allow", "GET"));
		return 1;
	}
	memset(hs, 0, sizeof *hs);
	MHD_get_connection_values(c, MHD_HEADER_KIND, handshake_header, hs);
	if (hs->nbearer > 1)
		why = "more than one " RP_WS_PROTOCOL_BEARER " subprotocol";
	else if (hs->nbearer && !hs->proto)
		why = "offer the subprotocol " RP_WS_PROTOCOL " with " RP_WS_PROTOCOL_BEARER
		      "<token>";
	if (why) {
		*ret = refuse(c, r, has_body, RP_ERR_BAD_REQUEST,
		              json_pack("{s:s}", "reason", why));
		return 1;
	}
	*auth = r->h_auth;
	/* A token that cannot be one is no token: 401, like an unknown one. */
	if (*auth == NULL && hs->nbearer && hs->bearer_len > 0 && hs->bearer_len <= WS_TOKEN_MAX &&
	    buflen > 7 + hs->bearer_len && tchars(hs->bearer, hs->bearer_len)) {
		memcpy(buf, "Bearer ", 7);
		memcpy(buf + 7, hs->bearer, hs->bearer_len);
		buf[7 + hs->bearer_len] = '\0';
		*auth = buf;
	}
	return 0;
}

/* After authentication: the rest of the handshake (RFC 6455 4.2.1). 0, or 1 when refused
 * (*ret to return): 400, or 426 for a version other than 13. */
static int
ws_handshake(struct MHD_Connection *c, struct request *r, const char *version, int has_body,
             const struct handshake *hs, enum MHD_Result *ret)
{
	char acc[RP_WS_ACCEPT_BUF];
	const char *why = NULL;

	if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0)
		why = "a WebSocket handshake is an HTTP/1.1 request";
	else if (has_body)
		why = "a WebSocket handshake has no body";
	else if (!hs->upgrade)
		why = "not a WebSocket handshake (Upgrade: websocket)";
	else if (!hs->connection)
		why = "not a WebSocket handshake (Connection: Upgrade)";
	else if (hs->nversion != 1)
		why = "Sec-WebSocket-Version must be given once";
	else if (hs->nkey != 1 || rp_ws_accept(hs->key, acc) < 0)
		why = "Sec-WebSocket-Key must be given once, 16 bytes in base64";
	if (why) {
		*ret = refuse(c, r, has_body, RP_ERR_BAD_REQUEST,
		              json_pack("{s:s}", "reason", why));
		return 1;
	}
	if (strcmp(hs->version, "13") != 0) {
		*ret = refuse(
		        c, r, 0, RP_ERR_UPGRADE_REQUIRED,
		        json_pack("{s:s}", "reason", "this server speaks WebSocket version 13"));
		if (r->early)
			r->early->headers = ws_version_header;
		return 1;
	}
	r->h_wskey = hs->key;
	r->ws_proto = hs->proto;
	return 0;
}

/* First call for a request: route, authenticate, check the declared body. */
static enum MHD_Result
begin(struct rp_http *h, struct MHD_Connection *c, const char *url, const char *method,
      const char *version, struct request *r)
{
	const struct rp_route *rt;
	char mt[64], wsauth[8 + WS_TOKEN_MAX];
	const char *v, *te, *auth;
	struct handshake hs;
	enum MHD_Result ret;
	unsigned long long clen = 0;
	int has_body;
	enum rp_err e = RP_ERR_OK;

	MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, r);
	v = r->h_rid;
	if (v && rid_ok(v)) {
		snprintf(r->rid, sizeof r->rid, "%s", v);
	} else {
		request_id(r->rid);
	}
	v = r->h_clen;
	te = r->h_te;
	if (v)
		clen = strtoull(v, NULL, 10);
	has_body = clen > 0 || te != NULL;
	r->route = route_find(method, url, r, r->allow, sizeof r->allow);
	if (r->route == rp_api_route_count) {
		if (r->allow[0])
			return refuse(c, r, has_body, RP_ERR_METHOD_NOT_ALLOWED,
			              json_pack("{s:s}", "allow", r->allow));
		return refuse(c, r, has_body, RP_ERR_NOT_FOUND, json_pack("{s:s}", "path", url));
	}
	rt = &rp_api_routes[r->route];
	/* The boot listener is plain HTTP for firmware that cannot check a certificate: it
	 * serves the boot endpoints and nothing that takes a token. */
	if (h->o.boot_only && !(rt->flags & RP_ROUTE_BOOT)) {
		r->route = rp_api_route_count;
		return refuse(c, r, has_body, RP_ERR_NOT_FOUND,
		              json_pack("{s:s, s:s}", "path", url, "reason",
		                        "this is the boot listener: only /boot/ is served here"));
	}
	if ((rt->flags & RP_ROUTE_LIMIT) && h->o.limit) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		unsigned wait = rp_limit_take(h->o.limit, ci ? ci->client_addr : NULL,
		                              rp_time_mono_ns() / 1000000);

		if (wait) {
			if (refuse(c, r, 0, RP_ERR_RATE_LIMITED,
			           json_pack("{s:s, s:i}", "reason",
			                     "too many unauthenticated requests from this address",
			                     "retry_after_s", (int)wait)) != MHD_YES)
				return MHD_NO;
			r->early->retry_after = wait;
			return has_body ? send_reply(NULL, c, r, r->early, r->allow) : MHD_YES;
		}
	}
	auth = r->h_auth;
	if ((rt->flags & RP_ROUTE_WEBSOCKET) &&
	    ws_token(c, r, method, has_body, &hs, wsauth, sizeof wsauth, &auth, &ret))
		return ret;
	if (rt->role != RP_ROLE_NONE)
		e = rp_api_authenticate(h->api, auth, &r->who);
	/* A token from the subprotocol lives only in wsauth, and only this long. */
	if (auth == wsauth)
		explicit_bzero(wsauth, sizeof wsauth);
	if (rt->role != RP_ROLE_NONE) {
		if (e != RP_ERR_OK)
			return refuse(c, r, has_body, e, NULL);
		/* Agent tokens open agent routes only; operator tokens never open those. */
		if ((rt->role == RP_ROLE_AGENT) != (r->who.role == RP_ROLE_AGENT) ||
		    r->who.role < rt->role)
			return refuse(c, r, has_body, RP_ERR_FORBIDDEN,
			              json_pack("{s:s, s:s}", "required",
			                        rp_api_role_name(rt->role), "role",
			                        rp_api_role_name(r->who.role)));
	}
	/* Who may not use the route learns nothing more about it. */
	if ((rt->flags & RP_ROUTE_WEBSOCKET) && ws_handshake(c, r, version, has_body, &hs, &ret))
		return ret;
	if (rt->flags & RP_ROUTE_UPLOAD) {
		if (clen > h->o.max_upload)
			return refuse(c, r, has_body, RP_ERR_TOO_LARGE,
			              json_pack("{s:I}", "limit", (json_int_t)h->o.max_upload));
		if ((r->up = calloc(1, sizeof *r->up)) == NULL)
			return MHD_NO;
		r->up->fd = -1;
		snprintf(r->up->path, sizeof r->up->path, "%s/upload.XXXXXX",
		         h->o.upload_dir ? h->o.upload_dir : "/tmp");
		if ((r->up->hash = rp_sha256_new()) == NULL ||
		    (r->up->fd = mkostemp(r->up->path, O_CLOEXEC)) < 0) {
			rp_log_error("upload: cannot create %s: %s", r->up->path, strerror(errno));
			r->up->path[0] = '\0';
			return refuse(c, r, has_body, RP_ERR_UNAVAILABLE,
			              json_pack("{s:s}", "reason", "cannot store the upload"));
		}
		return MHD_YES;
	}
	rp_buf_init(&r->body, (rt->flags & RP_ROUTE_INVENTORY)  ? h->o.max_inventory
	                      : (rt->flags & RP_ROUTE_BIG_BODY) ? h->o.max_import_body
	                                                        : h->o.max_body);
	if (clen > r->body.max)
		return refuse(c, r, has_body, RP_ERR_TOO_LARGE,
		              json_pack("{s:I}", "limit", (json_int_t)r->body.max));
	if (has_body && (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	                 strcmp(method, "PATCH") == 0)) {
		media_type(r->h_ctype, mt, sizeof mt);
		if (strcmp(mt, "application/json") != 0 &&
		    !(strcmp(method, "PATCH") == 0 &&
		      strcmp(mt, "application/merge-patch+json") == 0) &&
		    !((rt->flags & RP_ROUTE_CSV) && strcmp(mt, "text/csv") == 0))
			return refuse(
			        c, r, has_body, RP_ERR_UNSUPPORTED_MEDIA_TYPE,
			        json_pack("{s:s, s:s}", "content_type", mt[0] ? mt : "(none)",
			                  "accepted",
			                  (rt->flags & RP_ROUTE_CSV) ? "application/json, text/csv"
			                  : strcmp(method, "PATCH") == 0
			                          ? "application/json, application/merge-patch+json"
			                          : "application/json"));
	}
	return MHD_YES;
}

/* ---- WebSocket connections --------------------------------------------------------------- */

static void request_log(struct rp_http *h, struct MHD_Connection *c, struct request *r,
                        int aborted);

/* Take one of the daemon's MAX_WEBSOCKETS: 0, or -1 when none is left or it is stopping. */
static int
ws_reserve(struct rp_http *h)
{
	int rc = -1;

	pthread_mutex_lock(&ws_mu);
	if (!h->ws_stopping && h->nws < MAX_WEBSOCKETS) {
		h->nws++;
		rc = 0;
	}
	pthread_mutex_unlock(&ws_mu);
	return rc;
}

static void
ws_release(struct rp_http *h)
{
	pthread_mutex_lock(&ws_mu);
	h->nws--;
	pthread_cond_broadcast(&ws_cv);
	pthread_mutex_unlock(&ws_mu);
}

/* A WebSocket that will not be opened: its context goes to the handler's ws_free. */
static void
ws_drop(struct wsconn *wc)
{
	if (wc->free)
		wc->free(wc->ctx);
	ws_release(wc->h);
	free(wc);
}

static void
ws_unlink(struct rp_http *h, struct wsconn *wc)
{
	if (wc->prev)
		wc->prev->next = wc->next;
	else
		h->ws_list = wc->next;
	if (wc->next)
		wc->next->prev = wc->prev;
	wc->prev = wc->next = NULL;
}

/* rp_api_ws.close: any thread, once. */
static void
ws_close(struct rp_api_ws *ws)
{
	struct wsconn *wc = (struct wsconn *)ws;
	struct rp_http *h;

	pthread_mutex_lock(&ws_mu);
	h = wc->h;
	wc->closing = 1;
	pthread_mutex_unlock(&ws_mu);
	/* Without h, rp_http_stop has given up on us and the daemon closed the connection. */
	if (h)
		MHD_upgrade_action(ws->priv, MHD_UPGRADE_ACTION_CLOSE);
	pthread_mutex_lock(&ws_mu);
	if (h) {
		ws_unlink(h, wc);
		h->nws--;
		pthread_cond_broadcast(&ws_cv);
	}
	pthread_mutex_unlock(&ws_mu);
	free(wc);
}

/* libmicrohttpd has sent the 101 (on a daemon thread, which must not block): the connection
 * is the handler's now. */
static void
ws_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
            size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct wsconn *wc = cls;
	struct request *r = con_cls;
	struct rp_http *h = wc->h;
	const char *why = NULL;
	int fl;

	(void)extra_in;
	if (r) {
		/* The request is done: logged now, not when the connection ends. */
		r->ws = NULL;
		request_log(h, c, r, 0);
		r->logged = 1;
	}
	wc->ws.fd = sock;
	wc->ws.priv = urh;
	if (h->o.tls) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		wc->tcp = ci ? ci->connect_fd : -1;
	}
	wc->ws.close = ws_close;
	wc->ws.peer = wc->peer;
	/* Bytes before the 101 are not a WebSocket client's: RFC 6455 4.1 has it wait. */
	if (extra_in_size > 0)
		why = "it sent data before the 101";
	else if ((fl = fcntl(sock, F_GETFL)) < 0 || fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0)
		why = strerror(errno);
	pthread_mutex_lock(&ws_mu);
	if (why == NULL && h->ws_stopping)
		why = "the server is stopping";
	if (why == NULL) {
		wc->next = h->ws_list;
		if (wc->next)
			wc->next->prev = wc;
		h->ws_list = wc;
	}
	pthread_mutex_unlock(&ws_mu);
	if (why) {
		rp_log_info("http: WebSocket from %s closed at once: %s", wc->peer, why);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		ws_drop(wc);
		return;
	}
	wc->open(wc->ctx, &wc->ws);
}

/* Answer a RP_ROUTE_WEBSOCKET request (reserved: it holds a ws_reserve) or one whose handler
 * set ws_open or ws_ctx: the 101 when the handler accepted, else its reply. Every ws_ctx goes
 * to exactly one of ws_open (via ws_upgraded) and ws_free; the reservation goes with it. */
static enum MHD_Result
ws_reply(struct rp_http *h, struct MHD_Connection *c, struct request *r, int reserved,
         struct rp_api_resp *rs, const char *peer)
{
	struct MHD_Response *resp = NULL;
	struct wsconn *wc = NULL;
	char acc[RP_WS_ACCEPT_BUF];
	void (*open)(void *, struct rp_api_ws *) = rs->ws_open;
	void (*wfree)(void *) = rs->ws_free;
	void *ctx = rs->ws_ctx;
	enum MHD_Result ret;

	rs->ws_open = NULL;
	rs->ws_free = NULL;
	rs->ws_ctx = NULL;
	if (open == NULL || !reserved) {
		if (reserved)
			ws_release(h);
		if (wfree)
			wfree(ctx);
		if (open) {
			rp_log_error("%s: a WebSocket on a route without RP_ROUTE_WEBSOCKET",
			             r->line);
			rp_api_resp_clear(rs);
			rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		}
		return send_reply(h, c, r, rs, NULL);
	}
	rp_api_resp_clear(rs);
	if ((wc = calloc(1, sizeof *wc)) == NULL || rp_ws_accept(r->h_wskey, acc) < 0 ||
	    (resp = MHD_create_response_for_upgrade(ws_upgraded, wc)) == NULL ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket") != MHD_YES ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "Upgrade") != MHD_YES ||
	    MHD_add_response_header(resp, "Sec-WebSocket-Accept", acc) != MHD_YES ||
	    (r->ws_proto &&
	     MHD_add_response_header(resp, "Sec-WebSocket-Protocol", RP_WS_PROTOCOL) != MHD_YES) ||
	    MHD_add_response_header(resp, "X-Request-Id", r->rid) != MHD_YES) {
		if (resp)
			MHD_destroy_response(resp);
		free(wc);
		ws_release(h);
		if (wfree)
			wfree(ctx);
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return send_reply(h, c, r, rs, NULL);
	}
	wc->h = h;
	wc->open = open;
	wc->free = wfree;
	wc->ctx = ctx;
	wc->ws.fd = -1;
	wc->tcp = -1;
	snprintf(wc->peer, sizeof wc->peer, "%s", peer && peer[0] ? peer : "-");
	/* The request owns wc from here: the upgrade opens it, or completed() drops it (the
	 * client left before the 101 was out, the daemon stopped, queueing failed). */
	r->ws = wc;
	r->status = MHD_HTTP_SWITCHING_PROTOCOLS;
	r->done = 1;
	ret = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Last call: the whole body is here. Parse it and run the handler. */
static enum MHD_Result
finish(struct rp_http *h, struct MHD_Connection *c, const char *method, struct request *r)
{
	const struct rp_route *rt = &rp_api_routes[r->route];
	struct rp_api_req rq = {0};
	struct rp_api_resp rs = {0};
	json_t *query = NULL, *body = NULL;
	char mt[64], peer[INET6_ADDRSTRLEN], uphex[RP_SHA256_HEX];
	enum MHD_Result ret;
	int i, ws = (rt->flags & RP_ROUTE_WEBSOCKET) != 0;

	if (r->too_big || r->body.toobig) {
		json_decref(query);
		return send_error(c, r, RP_ERR_TOO_LARGE,
		                  json_pack("{s:I}", "limit",
		                            (json_int_t)(r->up ? h->o.max_upload : r->body.max)),
		                  NULL);
	}
	if (r->up) {
		if (r->up->failed || fsync(r->up->fd) < 0) {
			rp_log_error("upload to %s failed: %s", r->up->path,
			             strerror(r->up->failed ? r->up->failed : errno));
			return send_error(c, r, RP_ERR_UNAVAILABLE,
			                  json_pack("{s:s}", "reason",
			                            "could not store the upload (disk full?)"),
			                  NULL);
		}
		close(r->up->fd);
		r->up->fd = -1;
		rp_sha256_final(r->up->hash, uphex);
		rq.upload_path = r->up->path;
		rq.upload_size = r->up->len;
		rq.upload_sha256 = uphex;
	}
	media_type(r->h_ctype, mt, sizeof mt);
	if (r->body.len > 0 && !r->up &&
	    (strcmp(mt, "application/json") == 0 ||
	     strcmp(mt, "application/merge-patch+json") == 0)) {
		json_error_t err;

		body = json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &err);
		if (body == NULL) {
			json_decref(query);
			return send_error(c, r, RP_ERR_BAD_JSON,
			                  json_pack("{s:s, s:i, s:i}", "reason", err.text, "line",
			                            err.line, "column", err.column),
			                  NULL);
		}
	}
	{
		struct args a = {0};

		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &a);
		query = a.q;
		if (a.bad) {
			json_decref(query);
			json_decref(body);
			return send_error(c, r, RP_ERR_BAD_QUERY,
			                  json_pack("{s:s}", "reason", a.bad), NULL);
		}
	}
	rq.api = h->api;
	rq.method = method;
	rq.path = rt->pattern;
	for (i = 0; i < RP_API_MAX_PARAMS; i++)
		rq.params[i] = r->params[i];
	rq.query = query;
	rq.body = body;
	rq.raw = r->body.data;
	rq.raw_len = r->body.len;
	rq.content_type = mt[0] ? mt : NULL;
	rq.if_match = r->h_if_match;
	rq.if_none_match = r->h_if_none_match;
	rq.who = &r->who;
	rq.request_id = r->rid;
	rq.authorization = r->h_auth;
	rq.host = r->h_host;
	rq.range = r->h_range;
	rq.last_event_id = r->h_lei;
	peer[0] = '\0';
	if (rt->flags & (RP_ROUTE_PEER | RP_ROUTE_WEBSOCKET)) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		const struct sockaddr *sa = ci ? ci->client_addr : NULL;
		const char *p = NULL;

		if (sa && sa->sa_family == AF_INET)
			p = inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, peer,
			              sizeof peer);
		else if (sa && sa->sa_family == AF_INET6)
			p = inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, peer,
			              sizeof peer);
		if (rt->flags & RP_ROUTE_PEER)
			rq.peer = p;
	}
	/* Held from before the handler, which may do work for a WebSocket, to its close. */
	if (ws && ws_reserve(h) < 0) {
		json_decref(query);
		json_decref(body);
		return send_error(c, r, RP_ERR_UNAVAILABLE,
		                  json_pack("{s:s, s:i}", "reason", "too many open WebSockets",
		                            "limit", MAX_WEBSOCKETS),
		                  NULL);
	}
	rt->handler(&rq, &rs);
	if (r->up) {
		/* Kept files were renamed away; the name may not be reused while it is ours. */
		unlink(r->up->path);
		r->up->path[0] = '\0';
	}
	if (rs.status == 0 && !rs.ws_open)
		rp_api_error(&rs, RP_ERR_INTERNAL, NULL);
	if (ws || rs.ws_open || rs.ws_free)
		ret = ws_reply(h, c, r, ws, &rs, peer);
	else
		ret = send_reply(h, c, r, &rs, NULL);
	json_decref(query);
	json_decref(body);
	return ret;
}

static enum MHD_Result
dispatch(void *cls, struct MHD_Connection *c, const char *url, const char *method,
         const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct rp_http *h = cls;
	struct request *r = *con_cls;

	if (r == NULL) {
		/* malloc, not calloc: the struct is mostly buffers that are written before read,
		 * and clearing a kilobyte per request shows in profiles. */
		r = malloc(sizeof *r);
		if (r == NULL)
			return MHD_NO;
		memset(r, 0, offsetof(struct request, rid));
		memset(&r->who, 0, sizeof r->who);
		r->allow[0] = '\0';
		for (int i = 0; i < RP_API_MAX_PARAMS; i++)
			r->params[i][0] = '\0';
		r->t0 = rp_time_mono_ns();
		r->route = rp_api_route_count;
		{
			size_t n = put_escaped(r->line, 0, sizeof r->line, method);

			n = put(r->line, n, sizeof r->line, " ");
			r->line[put_escaped(r->line, n, sizeof r->line, url)] = '\0';
		}
		*con_cls = r;
		return begin(h, c, url, method, version, r);
	}
	if (r->done) {
		/* Answered early (413, 415, 401...): drop whatever body still arrives. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->early) {
		/* Refused before the body; a body-less request gets its reply now. */
		*upload_size = 0;
		return send_reply(NULL, c, r, r->early, r->allow);
	}
	if (*upload_size > 0 && r->up) {
		struct upload *u = r->up;
		size_t off = 0;

		if (u->len + *upload_size > h->o.max_upload)
			r->too_big = 1;
		while (!r->too_big && !u->failed && off < *upload_size) {
			ssize_t n = write(u->fd, upload + off, *upload_size - off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				u->failed = n < 0 ? errno : EIO;
				break;
			}
			off += (size_t)n;
		}
		if (!r->too_big && !u->failed) {
			rp_sha256_update(u->hash, upload, *upload_size);
			u->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		/* Past the cap the buffer marks itself and drops the rest; finish says 413. */
		rp_buf_append(&r->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->body.oom) {
		return send_error(c, r, RP_ERR_UNAVAILABLE,
		                  json_pack("{s:s}", "reason", "out of memory"), NULL);
	}
	return finish(h, c, method, r);
}

/* `IP "METHOD /path" STATUS DURATIONus rid=ID token=NAME`, assembled by hand: this runs for
 * every request and printf's format parsing was a visible share of the time. */
static void
access_line(const char *ip, struct request *r, int64_t ns, int aborted)
{
	char b[512];
	size_t n = 0;

	n = put(b, n, sizeof b, ip);
	n = put(b, n, sizeof b, " \"");
	n = put(b, n, sizeof b, r->line);
	n = put(b, n, sizeof b, "\" ");
	n = putnum(b, n, sizeof b, r->status);
	n = put(b, n, sizeof b, " ");
	n = putnum(b, n, sizeof b, ns / 1000);
	n = put(b, n, sizeof b, "us rid=");
	n = put(b, n, sizeof b, r->rid);
	n = put(b, n, sizeof b, " token=");
	n = put_escaped(b, n, sizeof b, r->who.name[0] ? r->who.name : "-");
	if (aborted)
		n = put(b, n, sizeof b, " (aborted)");
	rp_log_access(b, n);
}

/* The request's metrics and access line. */
static void
request_log(struct rp_http *h, struct MHD_Connection *c, struct request *r, int aborted)
{
	int64_t ns = rp_time_mono_ns() - r->t0;

	rp_metrics_observe(h->api->metrics, r->route, r->status, ns);
	if (h->o.access_log) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		char ip[INET6_ADDRSTRLEN] = "-";

		if (ci && ci->client_addr) {
			if (ci->client_addr->sa_family == AF_INET)
				inet_ntop(AF_INET,
				          &((struct sockaddr_in *)ci->client_addr)->sin_addr, ip,
				          sizeof ip);
			else if (ci->client_addr->sa_family == AF_INET6)
				inet_ntop(AF_INET6,
				          &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr, ip,
				          sizeof ip);
		}
		access_line(ip, r, ns, aborted);
	}
}

static void
completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct rp_http *h = cls;
	struct request *r = *con_cls;
	int big;

	if (r == NULL)
		return;
	/* Accepted, never upgraded. */
	if (r->ws) {
		ws_drop(r->ws);
		r->ws = NULL;
	}
	if (!r->logged)
		request_log(h, c, r, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
	if (r->early) {
		rp_api_resp_clear(r->early);
		free(r->early);
	}
	upload_free(r->up);
	/* A request that brought megabytes (an import, an inventory) was parsed into a tree of
	 * many times its size; freed, glibc keeps that memory in the process (85 MB RSS after a
	 * 10,000-node import, 35 MB of it in use). Hand it back now. */
	big = r->body.len >= BIG_REQUEST;
	rp_buf_free(&r->body);
	free(r);
	*con_cls = NULL;
	if (big)
		malloc_trim(0);
}

/* Over TLS a WebSocket's fd is one end of libmicrohttpd's socketpair, and libmicrohttpd
 * (0.9.75 and later) tells it nothing when the client leaves until a write to the client
 * fails: an owner that only reads would wait forever. So watch the clients' sockets, and shut
 * the owner's end for reading when one has gone: it reads end of file, as without TLS. A
 * closing wsconn is skipped: its socket may be closed as soon as MHD_upgrade_action ran. */
static void
ws_hangups(struct rp_http *h)
{
	struct pollfd p[MAX_WEBSOCKETS];
	struct wsconn *w[MAX_WEBSOCKETS], *wc;
	size_t i, n = 0;

	pthread_mutex_lock(&ws_mu);
	for (wc = h->ws_list; wc && n < MAX_WEBSOCKETS; wc = wc->next) {
		if (wc->closing || wc->hungup || wc->tcp < 0)
			continue;
		p[n].fd = wc->tcp;
		p[n].events = POLLRDHUP;
		p[n].revents = 0;
		w[n++] = wc;
	}
	if (n > 0 && poll(p, n, 0) > 0)
		for (i = 0; i < n; i++)
			if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
				shutdown(w[i]->ws.fd, SHUT_RD);
				w[i]->hungup = 1;
			}
	pthread_mutex_unlock(&ws_mu);
}

/* Parked streams wake within STREAM_POLL_MS of a change: a cheap counter read, and nothing at
 * all while no stream is parked. With TLS it also looks for WebSocket clients that left. */
static void *
waker(void *arg)
{
	struct rp_http *h = arg;
	struct timespec ts = {0, STREAM_POLL_MS * 1000000L};
	unsigned polls = 0;

	while (!__atomic_load_n(&h->closing, __ATOMIC_ACQUIRE)) {
		size_t n;

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&h->lock);
		n = h->nparked;
		pthread_mutex_unlock(&h->lock);
		if (n > 0 && h->o.generation)
			rp_http_streams_wake(h, h->o.generation(h->o.generation_arg),
			                     rp_time_now_ms());
		if (h->o.tls && ++polls % WS_HANGUP_POLLS == 0)
			ws_hangups(h);
	}
	return NULL;
}

int
rp_http_start(const struct rp_http_opts *o, struct rp_api *api, struct rp_http **out, char *why,
              size_t whylen)
{
	struct rp_http *h = NULL;
	struct sockaddr_storage ss = {0};
	char host[64];
	unsigned port, flags;
	const union MHD_DaemonInfo *info;
	int v6;

	if (rp_http_parse_listen(o->listen, host, sizeof host, &port) < 0) {
		snprintf(why, whylen, "listen address '%s' is not ADDR:PORT", o->listen);
		return -1;
	}
	v6 = strchr(host, ':') != NULL;
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			goto badhost;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			goto badhost;
	}
	h = calloc(1, sizeof *h);
	if (h == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	h->api = api;
	h->o = *o;
	pthread_mutex_init(&h->lock, NULL);
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
	        MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | (v6 ? MHD_USE_IPv6 : 0) |
	        (o->tls ? MHD_USE_TLS : 0);
	{
		struct MHD_OptionItem opts[] = {
		        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL},
		        {MHD_OPTION_SOCK_ADDR, 0, &ss},
		        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)(o->threads ? o->threads : 1),
		         NULL},
		        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)o->conn_timeout_s, NULL},
		        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)o->conn_limit, NULL},
		        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
		        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, h},
		        /* TLS 1.2 and 1.3 only; the certificate comes from tls.c at every
		         * handshake, so SIGHUP can replace it without a restart. */
		        {o->tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END, 0,
		         (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
		        {o->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, 0,
		         o->tls ? rp_tls_callback(o->tls) : NULL},
		        {MHD_OPTION_END, 0, NULL},
		};

		h->d = MHD_start_daemon(flags, 0, NULL, NULL, dispatch, h, MHD_OPTION_ARRAY, opts,
		                        MHD_OPTION_END);
	}
	if (h->d == NULL) {
		snprintf(why, whylen, "cannot listen on %s (address in use or not local?)",
		         o->listen);
		free(h);
		return -1;
	}
	if ((o->generation || o->tls) && pthread_create(&h->waker, NULL, waker, h) == 0)
		h->has_waker = 1;
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	if (info)
		port = info->port;
	snprintf(h->address, sizeof h->address, v6 ? "[%s]:%u" : "%s:%u", host, port);
	*out = h;
	return 0;
badhost:
	snprintf(why, whylen, "listen address '%s' is not a numeric IP address", host);
	return -1;
}

int
rp_http_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

const char *
rp_http_address(const struct rp_http *h)
{
	return h->address;
}

/* End the open WebSockets before the daemon stops under them: shut each down (its owner reads
 * end of file) and wait WS_STOP_WAIT_S for their close(). Any still open then are left to the
 * daemon, which closes them; their owners' close() only frees. Accepted ones that were not yet
 * upgraded are dropped by completed() as the daemon stops. */
static void
ws_stop(struct rp_http *h)
{
	struct timespec until;
	struct wsconn *wc, *next;
	unsigned left = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WS_STOP_WAIT_S;
	pthread_mutex_lock(&ws_mu);
	h->ws_stopping = 1;
	for (wc = h->ws_list; wc; wc = wc->next)
		if (!wc->closing)
			shutdown(wc->ws.fd, SHUT_RDWR);
	while (h->ws_list && pthread_cond_timedwait(&ws_cv, &ws_mu, &until) == 0)
		;
	for (wc = h->ws_list; wc; wc = next) {
		next = wc->next;
		if (wc->closing)
			continue;
		ws_unlink(h, wc);
		wc->h = NULL;
		h->nws--;
		left++;
	}
	/* Those in close() are inside MHD_upgrade_action: a moment. */
	while (h->ws_list)
		pthread_cond_wait(&ws_cv, &ws_mu);
	pthread_mutex_unlock(&ws_mu);
	if (left)
		rp_log_error("http: %u WebSocket(s) not closed %d s after shutdown; closed under "
		             "their owners",
		             left, WS_STOP_WAIT_S);
}

void
rp_http_stop(struct rp_http *h)
{
	if (h == NULL)
		return;
	/* Suspended connections must be resumed before the daemon stops; the streams then end. */
	__atomic_store_n(&h->closing, 1, __ATOMIC_RELEASE);
	if (h->has_waker)
		pthread_join(h->waker, NULL);
	rp_http_streams_wake(h, 0, 0);
	ws_stop(h);
	MHD_stop_daemon(h->d);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
