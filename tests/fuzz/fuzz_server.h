/*
 * fuzz_server.h — the real rackpilotd stack (store, jobs, api, http dispatcher) in the fuzzer's
 * process, on 127.0.0.1 with a temporary data directory, and a small HTTP/1.1 client that
 * checks every reply against the API's invariants. Shared by the API-level harnesses.
 */
#ifndef RP_FUZZ_SERVER_H
#define RP_FUZZ_SERVER_H

#include <stddef.h>

/* A reply as read off the socket. body points into buf (NUL-terminated); owned by the
 * reply, released by fz_reply_clear. */
struct fz_reply {
	int status;
	char content_type[128];
	char *buf;
	size_t len;
	const char *body;
	size_t body_len;
};

/* Start the server once (idempotent) with an admin token and an agent token for a
 * registered node. Aborts when it cannot: a harness without its server finds nothing. */
void fz_server_init(void);

/* Count one fuzz run; every `every` runs the server is stopped and its data directory
 * recreated, so the store cannot grow without bound. */
void fz_server_tick(unsigned every);

/* The tokens: "Bearer rpt_..." (admin) and "Bearer rpa_..." (agent of node fz_agent_node). */
const char *fz_admin_auth(void);
const char *fz_agent_auth(void);
const char *fz_agent_node(void);

/* The id of a steps job (shell a, reboot b, inventory c) of that node, created at start. */
const char *fz_agent_job(void);

/* A registration that re-registered the node replaced its agent token: use this one. */
void fz_agent_auth_set(const char *token);

/* A new discovery bootstrap token, "Bearer rpb_..." (static storage, until the next call). */
const char *fz_bootstrap_auth(void);

/* Send one request (headers: NULL-terminated "Name: value" strings, no CR/LF inside) and read
 * the reply. 0, or -1 when the server did not answer with a parseable HTTP reply (a bug:
 * callers abort). */
int fz_request(const char *method, const char *target, const char *const *headers, const void *body,
               size_t len, struct fz_reply *out);

/* Abort (a finding) unless the reply keeps the API's promises: a 4xx has a JSON error body
 * {"error": {"code", "message"}} whose code is in the registry with that status; no 5xx but
 * 503 (the store busy or full). */
void fz_check_reply(const char *method, const char *target, const struct fz_reply *r);

void fz_reply_clear(struct fz_reply *r);

/* Copy at most n bytes of s into out (cap bytes), percent-encoding what cannot stand in a
 * request target (controls, space, DEL, bytes >= 0x80 are kept only as %XX). */
void fz_target_encode(const char *s, size_t n, char *out, size_t cap);

/* Copy a header value, dropping CR, LF and NUL. */
void fz_header_clean(const char *s, size_t n, char *out, size_t cap);

#endif
