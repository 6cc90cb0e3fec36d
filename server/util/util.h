/*
 * util.h — small helpers every server module may use: logging, time, randomness,
 * identifiers, hashing and string checks. No I/O beyond the log and getrandom().
 */
#ifndef RP_UTIL_H
#define RP_UTIL_H

#include <stddef.h>
#include <stdint.h>

enum rp_log_level { RP_LOG_ERROR, RP_LOG_WARN, RP_LOG_INFO, RP_LOG_DEBUG };

/* Set the most verbose level that is written (default INFO). */
void rp_log_set_level(enum rp_log_level lvl);

/* One log line to stderr: "TIMESTAMP LEVEL message". Thread-safe; written at once (after
 * any buffered access lines, to keep order). */
void rp_log(enum rp_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An access-log line ("TIMESTAMP access MSG"; msg is len bytes, no newline): buffered in
 * memory and written in batches, because a write(2) per request would halve the request
 * rate. Call rp_log_flush() at least every few hundred milliseconds and before exit. */
void rp_log_access(const char *msg, size_t len);

/* Write out buffered access lines. */
void rp_log_flush(void);

#define rp_log_error(...) rp_log(RP_LOG_ERROR, __VA_ARGS__)
#define rp_log_warn(...) rp_log(RP_LOG_WARN, __VA_ARGS__)
#define rp_log_info(...) rp_log(RP_LOG_INFO, __VA_ARGS__)
#define rp_log_debug(...) rp_log(RP_LOG_DEBUG, __VA_ARGS__)

/* Wall clock in milliseconds since the Unix epoch. */
int64_t rp_time_now_ms(void);

/* Monotonic clock in nanoseconds (for durations only). */
int64_t rp_time_mono_ns(void);

/* Format ms-since-epoch as RFC 3339 UTC with milliseconds ("2026-11-30T04:29:39.123Z").
 * buf must hold RP_TIME_BUF bytes. Returns buf. */
#define RP_TIME_BUF 64
char *rp_time_format(int64_t ms, char buf[RP_TIME_BUF]);

/* Parse RFC 3339 ("2026-11-30T04:29:39Z", optional fraction and offset) or plain Unix
 * seconds. Returns 0 and sets *ms, or -1 on malformed input (*ms untouched). */
int rp_time_parse(const char *s, int64_t *ms);

/* Fill buf with n cryptographically random bytes. Returns 0, or -1 when the kernel fails. */
int rp_random(void *buf, size_t n);

/* New random (version 4) UUID in canonical lowercase form. buf: RP_UUID_BUF bytes. Returns 0/-1. */
#define RP_UUID_BUF 37
int rp_uuid_new(char buf[RP_UUID_BUF]);

/* 1 when s is a canonical UUID (8-4-4-4-12 hex, any case), else 0. */
int rp_uuid_valid(const char *s);

/* New secret: prefix (4 characters, e.g. "rpt_", see rackpilot/agent.h) + 43 base64url
 * characters (256 bits). buf: RP_TOKEN_BUF bytes. Returns 0/-1. */
#define RP_TOKEN_BUF 48
int rp_token_new(const char *prefix, char buf[RP_TOKEN_BUF]);

/* SHA-256 of data as 64 lowercase hex characters. hex: RP_SHA256_HEX bytes. */
#define RP_SHA256_HEX 65
void rp_sha256_hex(const void *data, size_t len, char hex[RP_SHA256_HEX]);

/* Streaming SHA-256, for files. rp_sha256_new: NULL on allocation failure. final may be
 * called once. free accepts NULL. */
struct rp_sha256;
struct rp_sha256 *rp_sha256_new(void);
void rp_sha256_update(struct rp_sha256 *h, const void *data, size_t len);
void rp_sha256_final(struct rp_sha256 *h, char hex[RP_SHA256_HEX]);
void rp_sha256_free(struct rp_sha256 *h);

/* SHA-256 (hex) and size of a file, read in 1 MiB blocks. 0, or -1 with errno. */
int rp_file_sha256(const char *path, char hex[RP_SHA256_HEX], uint64_t *size);

/* Unpadded base64url of n bytes into out (needs 4*ceil(n/3)+1 bytes). Returns length. */
size_t rp_b64url_encode(const void *in, size_t n, char *out);

/* Decode unpadded base64url; returns decoded length, or -1 on bad input or overflow of cap. */
long rp_b64url_decode(const char *in, void *out, size_t cap);

/* An OpenSSH public key ("TYPE BASE64 [comment]", as in authorized_keys and *.pub). */
struct rp_sshkey {
	char type[32];         /* ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa, ... */
	char b64[2048];        /* the key blob, standard base64 */
	char fingerprint[64];  /* "SHA256:..." as ssh-keygen -l prints it */
};

/* Parse one public key line; the blob must decode and name the same type it is declared
 * as. Returns 0 (out filled), or -1 when line is not such a key (out untouched). */
int rp_sshkey_parse(const char *line, struct rp_sshkey *out);

/* Normalise a MAC address ("AA-BB-CC-DD-EE-FF", "aabb.ccdd.eeff", "aa:bb:...") to
 * "aa:bb:cc:dd:ee:ff" in out (RP_MAC_BUF bytes). Returns 0, or -1 when s is not a MAC. */
#define RP_MAC_BUF 18
int rp_mac_normalize(const char *s, char out[RP_MAC_BUF]);

/* 1 when s is a valid resource name: 1-63 of [A-Za-z0-9._-], starting alphanumeric,
 * and not shaped like a UUID (paths accept either). */
int rp_name_valid(const char *s);

/* 1 when s is a plausible host: DNS name, IPv4 or IPv6 literal, at most 253 bytes. */
int rp_host_valid(const char *s);

/* Read a whole file (at most cap bytes) into a new NUL-terminated buffer. Caller frees *out.
 * Returns 0, or -1 with errno set (EFBIG when larger than cap). */
int rp_file_read(const char *path, size_t cap, char **out, size_t *len);

/* Create or replace path atomically with content, mode applied before any byte is written.
 * Returns 0 or -1 with errno set. */
int rp_file_write_private(const char *path, const void *data, size_t len, unsigned mode);

/* ---- Growable buffer ------------------------------------------------------------------ */

/* A byte buffer; zero-initialise it. On allocation failure `oom` is set and further
 * appends are ignored. data is NUL-terminated whenever len > 0. */
struct rp_buf {
	char *data;
	size_t len, cap;
	int oom;
};

void rp_buf_append(struct rp_buf *b, const void *p, size_t n);
void rp_buf_printf(struct rp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Release the buffer's memory and zero it. */
void rp_buf_free(struct rp_buf *b);

/* ---- Memo table ----------------------------------------------------------------------- */

/*
 * A bounded, direct-mapped cache of byte strings. Each entry carries the generation it was
 * computed at; a lookup hits only when the caller's current generation matches, so bumping
 * the generation after every database commit invalidates everything at once. Thread-safe
 * (striped locks). Values are reference-counted: a hit hands out the stored bytes
 * themselves, which stay valid until released, even if the entry is replaced meanwhile.
 */
struct rp_memo;

/* slots is rounded up to a power of two. NULL on allocation failure. */
struct rp_memo *rp_memo_new(size_t slots);
void rp_memo_free(struct rp_memo *m);

/* On a hit (same key, same gen) returns the value (NUL-terminated, length *len), to be
 * handed back with rp_memo_release(); on a miss NULL. */
char *rp_memo_get(struct rp_memo *m, const char *key, uint64_t gen, size_t *len);

/* Release a value rp_memo_get() returned. Accepts NULL. */
void rp_memo_release(void *value);

/* Remember val (len bytes, at most 64 KiB) under key for generation gen. */
void rp_memo_put(struct rp_memo *m, const char *key, uint64_t gen, const void *val, size_t len);

/* Hits and misses since creation. */
void rp_memo_stats(struct rp_memo *m, uint64_t *hits, uint64_t *misses);

/* ---- Request metrics ----------------------------------------------------------------- */

/* Lock-free request counters and latency histograms per route (index nroutes counts
 * requests that matched no route). */
struct rp_metrics;

struct rp_metrics *rp_metrics_new(size_t nroutes);
void rp_metrics_free(struct rp_metrics *m);

/* Count one finished request. */
void rp_metrics_observe(struct rp_metrics *m, size_t route, int status, int64_t ns);

/* Append Prometheus text for all counters to b; label(i) names route i. */
void rp_metrics_render(struct rp_metrics *m, const char *(*label)(size_t route, void *arg),
                       void *arg, struct rp_buf *b);

#endif
