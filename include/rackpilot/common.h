/*
 * rackpilot/common.h — what the server, the agent and the CLI all use (common/: libc, and
 * libcrypto for SHA-256): the log, time, randomness and UUIDs, SHA-256, base64url, the checks of
 * names, hosts and MACs, configuration words, whole-file reads and writes, and the capped growable
 * buffer. Code only the server needs lives in server/util/ (util.h), which includes this.
 */
#ifndef RP_COMMON_H
#define RP_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
#define rp_log_warn(...)  rp_log(RP_LOG_WARN, __VA_ARGS__)
#define rp_log_info(...)  rp_log(RP_LOG_INFO, __VA_ARGS__)
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

/* SHA-256 of data as 64 lowercase hex characters. hex: RP_SHA256_HEX bytes. */
#define RP_SHA256_HEX 65
void rp_sha256_hex(const void *data, size_t len, char hex[RP_SHA256_HEX]);

/* HMAC-SHA256 of data under key (any length) as 64 lowercase hex characters: 0, or -1 (hex
 * "") when libcrypto fails. */
int rp_hmac_sha256_hex(const void *key, size_t keylen, const void *data, size_t len,
                       char hex[RP_SHA256_HEX]);

/* Streaming SHA-256, for files. rp_sha256_new: NULL on allocation failure. final may be
 * called once. free accepts NULL. */
struct rp_sha256;
struct rp_sha256 *rp_sha256_new(void);
void rp_sha256_update(struct rp_sha256 *h, const void *data, size_t len);
void rp_sha256_final(struct rp_sha256 *h, char hex[RP_SHA256_HEX]);
void rp_sha256_free(struct rp_sha256 *h);

/* SHA-256 (hex) and size (when size is not NULL) of a file, or of everything readable from
 * fd from its current offset, read in 1 MiB blocks. 0, or -1 with errno. */
int rp_file_sha256(const char *path, char hex[RP_SHA256_HEX], uint64_t *size);
int rp_fd_sha256(int fd, char hex[RP_SHA256_HEX], uint64_t *size);

/* Unpadded base64url of n bytes into out (needs 4*ceil(n/3)+1 bytes). Returns length. */
size_t rp_b64url_encode(const void *in, size_t n, char *out);

/* Decode unpadded base64url; returns decoded length, or -1 on bad input or overflow of cap. */
long rp_b64url_decode(const char *in, void *out, size_t cap);

/* Normalise a MAC address ("AA-BB-CC-DD-EE-FF", "aabb.ccdd.eeff", "aa:bb:...") to
 * "aa:bb:cc:dd:ee:ff" in out (RP_MAC_BUF bytes). Returns 0, or -1 when s is not a MAC. */
#define RP_MAC_BUF 18
int rp_mac_normalize(const char *s, char out[RP_MAC_BUF]);

/* 1 when s is a valid resource name: 1-63 of [A-Za-z0-9._-], starting alphanumeric,
 * and not shaped like a UUID (paths accept either). */
int rp_name_valid(const char *s);

/* 1 when s is a plausible host: DNS name, IPv4 or IPv6 literal, at most 253 bytes. */
int rp_host_valid(const char *s);

/* The index of s in names (NULL-terminated), or -1 when s is NULL or not among them. */
int rp_str_index(const char *const *names, const char *s);

/* "<lead>one of: a, b, c" (names NULL-terminated) into buf, cut to fit len: what a value
 * outside a fixed set is told ("must be one of: ..."). */
void rp_str_one_of(char *buf, size_t len, const char *lead, const char *const *names);

/* Strip leading and trailing white space (isspace) in place: the end is cut with a NUL, and
 * the return value points into s at the first byte kept. */
char *rp_str_trim(char *s);

/* A configuration boolean: true/yes/on/1 set *out to 1, false/no/off/0 to 0 (lowercase
 * only). Returns 0, or -1 for anything else (*out untouched). */
int rp_bool_parse(const char *v, int *out);

/* Format one line into buf (cap >= 2 bytes): the text cut to fit, then '\n' and a NUL.
 * Returns its length with the newline, or 0 for a format error. */
size_t rp_vline(char *buf, size_t cap, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

/* Write all len bytes of data to fd, retrying short writes and EINTR. 0, or -1 with errno
 * set (write's own; EIO when it wrote nothing and said nothing). */
int rp_write_all(int fd, const void *data, size_t len);

/* Read a whole file (at most cap bytes) into a new NUL-terminated buffer. Caller frees *out.
 * Returns 0, or -1 with errno set (EFBIG when larger than cap). */
int rp_file_read(const char *path, size_t cap, char **out, size_t *len);

/* Create or replace path atomically with content, mode applied before any byte is written.
 * Returns 0 or -1 with errno set. */
int rp_file_write_private(const char *path, const void *data, size_t len, unsigned mode);

/* Flush the directory that holds path, so that a name just made there (created, linked,
 * renamed) survives power loss. 0, or -1 with errno set. */
int rp_fsync_dir_of(const char *path);

/* ---- Growable buffer ------------------------------------------------------------------ */

/* A byte buffer. Zero-initialised it has no cap (text the program makes itself); bytes a
 * peer sends go into one from rp_buf_init with a hard cap. data is NUL-terminated whenever
 * len > 0. An append that fails changes nothing and marks the buffer, `oom` when memory ran
 * out, `toobig` when len would pass max; a marked buffer refuses every later append but keeps
 * what it held, readable until rp_buf_free. */
struct rp_buf {
	char *data;
	size_t len, cap; /* cap: bytes allocated */
	size_t max;      /* the most len may reach (the NUL not counted); 0: no cap */
	int oom, toobig;
};

/* Start b empty, holding at most max bytes (0: no cap). Allocates nothing; b needs
 * rp_buf_free only once something was appended, but accepts it at any time. */
void rp_buf_init(struct rp_buf *b, size_t max);
/* The part of rp_buf_append that grows the buffer or refuses (buf.c). */
int rp_buf_append_grow(struct rp_buf *b, const void *p, size_t n);
/* Append n bytes of p. Returns 0, or -1 when the buffer is or becomes marked (oom, toobig);
 * exactly max bytes in all still fit. Inline when the bytes fit what is allocated: a list
 * page makes ~100,000 small appends. (cap never passes max + 1, so fitting in cap is within
 * max.) */
static inline int
rp_buf_append(struct rp_buf *b, const void *p, size_t n)
{
	if (n > 0 && n < b->cap - b->len && !(b->oom | b->toobig)) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
		b->data[b->len] = '\0';
		return 0;
	}
	return rp_buf_append_grow(b, p, n);
}
/* Append formatted text, on the same terms as rp_buf_append (also -1 for a format error,
 * which does not mark the buffer). */
int rp_buf_printf(struct rp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Release the buffer's memory and zero it (the cap too). */
void rp_buf_free(struct rp_buf *b);

#endif
