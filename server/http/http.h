/*
 * http.h — the HTTP front: a libmicrohttpd daemon (internal epoll thread pool) whose one
 * dispatcher matches the api route table, caps and parses bodies, authenticates, calls
 * the handler and sends its reply with a request id; one access-log line per request. It
 * also upgrades RP_ROUTE_WEBSOCKET requests (the handshake, then the connection handed to the
 * handler's ws_open: api.h).
 */
#ifndef RP_HTTP_H
#define RP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "api/api.h"

struct rp_http;
struct rp_limit;
struct rp_tls;
struct sockaddr;

struct rp_http_opts {
	const char *listen;      /* "ADDR:PORT", "[v6]:PORT"; port 0 picks a free one */
	unsigned threads;        /* worker threads, >= 1 */
	size_t max_body;         /* bytes; larger bodies get 413 */
	size_t max_import_body;  /* bytes, for routes flagged RP_ROUTE_BIG_BODY */
	size_t max_inventory;    /* bytes, for routes flagged RP_ROUTE_INVENTORY */
	unsigned conn_timeout_s; /* idle connection timeout */
	unsigned conn_limit;     /* simultaneous connections */
	int access_log;          /* log one line per request */
	uint64_t max_upload;     /* bytes, for RP_ROUTE_UPLOAD routes */
	const char *upload_dir;  /* where uploads are written (same filesystem as their home) */
	/* Event streams: a counter that moves with every change (the store's generation); parked
	 * streams are woken within STREAM_POLL_MS of it moving. NULL: only rp_http_streams_wake. */
	uint64_t (*generation)(void *arg);
	void *generation_arg;
	struct rp_tls *tls;     /* serve HTTPS with this certificate (borrowed); NULL: HTTP */
	int boot_only;          /* the boot listener: RP_ROUTE_BOOT routes only, others 404 */
	struct rp_limit *limit; /* buckets for RP_ROUTE_LIMIT routes (borrowed); NULL: none */
};

/* Bind and start serving api. On failure writes why and returns -1. */
int rp_http_start(const struct rp_http_opts *o, struct rp_api *api, struct rp_http **out, char *why,
                  size_t whylen);

/* The bound address, "127.0.0.1:8475" (port resolved when 0 was asked). Static storage of h. */
const char *rp_http_address(const struct rp_http *h);

/* Resume parked event streams whose store generation is no longer gen, or that have been
 * quiet long enough to owe a keep-alive. The daemon's own thread calls it every few
 * milliseconds while streams are parked. */
void rp_http_streams_wake(struct rp_http *h, uint64_t gen, int64_t now_ms);

/* Stop accepting, finish in-flight requests, end event streams, shut open WebSockets down and
 * wait up to 10 s for their owners to close them, join the threads. Accepts NULL. */
void rp_http_stop(struct rp_http *h);

/* Split "ADDR:PORT" / "[ADDR]:PORT" into host (hostlen bytes) and port. 0, or -1 when
 * malformed. Exposed for config checking. */
int rp_http_parse_listen(const char *s, char *host, size_t hostlen, unsigned *port);

/* 1 when the host part of a listen address is a loopback address (127.0.0.0/8, ::1). */
int rp_http_loopback(const char *host);

/* ---- Rate limits (limit.c) ----------------------------------------------------------- */

/* Token buckets per client address (the whole address): rate tokens per second, at most
 * burst. A fixed table: memory does not grow with the number of addresses. NULL when rate
 * is not positive or burst < 1, or on allocation failure. Thread-safe. */
struct rp_limit *rp_limit_new(double rate, double burst);
void rp_limit_free(struct rp_limit *l);

/* Take one token for sa at now_ms (a monotonic clock: rp_time_mono_ns() / 1000000): 0 when
 * allowed, else the seconds (>= 1) until a request would be. NULL l or an address of another
 * family: always allowed. */
unsigned rp_limit_take(struct rp_limit *l, const struct sockaddr *sa, int64_t now_ms);

/* ---- TLS (tls.c, GnuTLS) ------------------------------------------------------------- */

/* A certificate and key the HTTPS listener serves, replaceable while it runs. */

/* Load a PEM certificate (chain) and its private key. 0, or -1 with why (names the file). */
int rp_tls_load(const char *cert_file, const char *key_file, struct rp_tls **out, char *why,
                size_t whylen);

/* Read the same files again and serve them to new handshakes; connections that are open keep
 * theirs. On failure the old certificate stays and -1 is returned with why. Thread-safe. */
int rp_tls_reload(struct rp_tls *t, char *why, size_t whylen);

/* The public-key pin of the served certificate: SHA-256 of its SubjectPublicKeyInfo, 64
 * lowercase hex digits (what clients give as --fingerprint / rackpilot.tls_sha256=). Valid
 * until the next reload. */
const char *rp_tls_fingerprint(const struct rp_tls *t);

/* Free; accepts NULL. Only after every daemon that used it has stopped. */
void rp_tls_free(struct rp_tls *t);

/* For daemon.c: the gnutls_certificate_retrieve_function2 to give libmicrohttpd, serving t
 * from now on (one TLS listener per process). */
void *rp_tls_callback(struct rp_tls *t);

/* Make a self-signed ECDSA P-256 certificate for host (an IP address; also named, with the
 * machine's host name, in subjectAltName) as cert_file and key_file (0600), unless both
 * exist already. 0 (*made says whether it made them), or -1 with why. */
int rp_tls_selfsigned(const char *cert_file, const char *key_file, const char *host, int *made,
                      char *why, size_t whylen);

#endif
