/*
 * http.h — the HTTP front: a libmicrohttpd daemon (internal epoll thread pool) whose one
 * dispatcher matches the api route table, caps and parses bodies, authenticates, calls
 * the handler and sends its reply with a request id; one access-log line per request.
 */
#ifndef RP_HTTP_H
#define RP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "api/api.h"

struct rp_http;

struct rp_http_opts {
	const char *listen;        /* "ADDR:PORT", "[v6]:PORT"; port 0 picks a free one */
	unsigned threads;          /* worker threads, >= 1 */
	size_t max_body;           /* bytes; larger bodies get 413 */
	size_t max_import_body;    /* bytes, for routes flagged RP_ROUTE_BIG_BODY */
	unsigned conn_timeout_s;   /* idle connection timeout */
	unsigned conn_limit;       /* simultaneous connections */
	int access_log;            /* log one line per request */
	uint64_t max_upload;       /* bytes, for RP_ROUTE_UPLOAD routes */
	const char *upload_dir;    /* where uploads are written (same filesystem as their home) */
	/* Event streams: a counter that moves with every change (the store's generation); parked
	 * streams are woken within STREAM_POLL_MS of it moving. NULL: only rp_http_streams_wake. */
	uint64_t (*generation)(void *arg);
	void *generation_arg;
};

/* Bind and start serving api. On failure writes why and returns -1. */
int rp_http_start(const struct rp_http_opts *o, struct rp_api *api, struct rp_http **out,
                  char *why, size_t whylen);

/* The bound address, "127.0.0.1:8475" (port resolved when 0 was asked). Static storage of h. */
const char *rp_http_address(const struct rp_http *h);

/* Resume parked event streams whose store generation is no longer gen, or that have been
 * quiet long enough to owe a keep-alive. Called from the main loop's tick. */
void rp_http_streams_wake(struct rp_http *h, uint64_t gen, int64_t now_ms);

/* Stop accepting, finish in-flight requests, end event streams, join the threads. Accepts
 * NULL. */
void rp_http_stop(struct rp_http *h);

/* Split "ADDR:PORT" / "[ADDR]:PORT" into host (hostlen bytes) and port. 0, or -1 when
 * malformed. Exposed for config checking. */
int rp_http_parse_listen(const char *s, char *host, size_t hostlen, unsigned *port);

#endif
