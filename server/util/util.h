/*
 * util.h — helpers every server module may use: what all three programs share
 * (rackpilot/common.h), and the server's own: tokens, OpenSSH public keys, the memo
 * table, request metrics and secrets at rest.
 */
#ifndef RP_UTIL_H
#define RP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "rackpilot/common.h"

/* New secret: prefix (4 characters, e.g. "rpt_", see rackpilot/agent.h) + 43 base64url
 * characters (256 bits). buf: RP_TOKEN_BUF bytes. Returns 0/-1. */
#define RP_TOKEN_BUF 48
int rp_token_new(const char *prefix, char buf[RP_TOKEN_BUF]);

/* An OpenSSH public key ("TYPE BASE64 [comment]", as in authorized_keys and *.pub). */
struct rp_sshkey {
	char type[32];        /* ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa, ... */
	char b64[2048];       /* the key blob, standard base64 */
	char fingerprint[64]; /* "SHA256:..." as ssh-keygen -l prints it */
};

/* Parse one public key line; the blob must decode and name the same type it is declared
 * as. Returns 0 (out filled), or -1 when line is not such a key (out untouched). */
int rp_sshkey_parse(const char *line, struct rp_sshkey *out);

/* ---- Service manager notifications (notify.c) ------------------------------------------ */

/* Send state ("READY=1", "RELOADING=1\nMONOTONIC_USEC=…", "STOPPING=1", "WATCHDOG=1", …) to
 * the socket $NOTIFY_SOCKET names: 1 sent, 0 when there is none (not run by a service manager
 * that asked), -1 with errno. */
int rp_notify(const char *state);

/* The watchdog interval systemd asked this process for (WATCHDOG_USEC, when WATCHDOG_PID is
 * unset or this process), in ms; 0: none. Send WATCHDOG=1 at least twice per interval. */
int64_t rp_notify_watchdog_ms(void);

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

/* ---- Secrets at rest ----------------------------------------------------------------- */

/*
 * Secrets (BMC passwords) sealed with XChaCha20-Poly1305 (libsodium's
 * crypto_secretbox_xchacha20poly1305, a random 24-byte nonce per value) under a key kept in
 * a key file, by default DATA_DIR/secret.key.
 *
 * Key file: one line, "rackpilot-secret-key-v1 <key: 43 base64url characters> <key id>\n",
 * mode 0600, owned by the server's user (or root). The key id (16 hex characters, derived
 * from the key, reveals nothing about it) is repeated there so that an operator can tell
 * which backup holds which key, and it is checked on load, so a damaged file is refused at
 * start rather than failing every open. No message ever contains a key.
 *
 * Sealed form (fits a TEXT column): "rpsec1:<key id>:<base64url(nonce || ciphertext)>".
 *
 * Rotation (rackpilotd --rotate-secret-key), safe against kill -9 at any point:
 *   1. rp_secrets_rotate_begin(): a new key is written to PATH.new (fsynced file and
 *      directory); seal now uses it, open accepts both keys.
 *   2. The caller re-seals every sealed value in the database in ONE transaction and
 *      commits, so the database holds values under one key id only, old or new.
 *   3. rp_secrets_rotate_finish(): PATH.new is renamed over PATH.
 * At every start, after rp_secrets_load(), when rp_secrets_next_key_id() is not NULL an
 * earlier rotation was interrupted: the caller looks at the key ids its sealed values carry;
 * if they all name the next key (or there are none) it calls rp_secrets_rotate_finish(),
 * otherwise rp_secrets_rotate_abort(). Until it does, rp_secrets_seal() refuses (EBUSY):
 * a value sealed under either key then could be lost by whichever of the two is chosen.
 * That rule relies on step 2 being one transaction and on nothing else sealing between
 * begin and finish (run the rotation with the server's writers stopped). Should a database
 * ever hold values under both keys, never abort: rp_secrets_rotate_begin() (it reuses
 * PATH.new), re-seal the rest, commit, finish; with both keys loaded nothing is lost.
 *
 * Threads: seal, open, derive and the id getters only read the struct and may run
 * concurrently; load's result must not be shared until load returns, and rotate_* must not
 * run concurrently with any other call on the same struct.
 */
struct rp_secrets;

/* A key id: 16 lowercase hex characters and the NUL. */
#define RP_SECRET_KEY_ID_BUF 17
/* The largest plaintext seal accepts, in bytes. */
#define RP_SECRET_MAX 65536
/* Bytes rp_secrets_derive() writes. */
#define RP_SECRET_DERIVE_BYTES 32

/* Load the key file at path (and PATH.new, when it exists, as the next key of an interrupted
 * rotation; see above). When path does not exist and create is set, make a new key there:
 * written to PATH.tmp (mode 0600, fsynced), published with link(2) so that no other file is
 * ever replaced and no half-written key file can exist, then the directory is fsynced.
 * Refuses a symbolic link, anything but a regular file, a file group or others may read or
 * write, one owned by another user than the effective one or root, and one that is not
 * exactly a key line as above; refuses to create a key when PATH.new exists but path does
 * not. Returns 0 and sets *out (free with rp_secrets_free), or -1 with why (a sentence
 * naming the file and the fix) set and *out untouched. why may be NULL. */
int rp_secrets_load(const char *path, int create, struct rp_secrets **out, char *why,
                    size_t whylen);

/* Wipe the keys and free s. Accepts NULL. */
void rp_secrets_free(struct rp_secrets *s);

/* The current key's id (RP_SECRET_KEY_ID_BUF bytes with the NUL). Owned by s; valid until
 * rp_secrets_free or rp_secrets_rotate_finish. */
const char *rp_secrets_key_id(const struct rp_secrets *s);

/* The next key's id while one is loaded (after rp_secrets_rotate_begin, or found by
 * rp_secrets_load), else NULL. Owned by s; valid until free, finish or abort. */
const char *rp_secrets_next_key_id(const struct rp_secrets *s);

/* Seal len bytes of plain (at most RP_SECRET_MAX; plain may be NULL when len is 0) into a new
 * NUL-terminated sealed string, under the next key after rp_secrets_rotate_begin, else the
 * current one. Returns 0 and sets *out (caller frees; it is not secret), or -1 with errno:
 * EINVAL (too long), EBUSY (an interrupted rotation found by load is not yet finished or
 * aborted), ENOMEM. */
int rp_secrets_seal(const struct rp_secrets *s, const void *plain, size_t len, char **out);

/* Open a sealed string with the loaded key (current or next) its id names. Returns 0 and
 * sets *plain (a new buffer of *len bytes plus a NUL, so a password reads as a C string;
 * release it with rp_secrets_plain_free) and *len; or -1 with why set and the out-params
 * untouched: malformed input, a key id this server does not hold ("sealed under key X; this
 * server has key Y: restore the key file"), or a failed authentication (tampered or
 * corrupted). why may be NULL. */
int rp_secrets_open(const struct rp_secrets *s, const char *sealed, char **plain, size_t *len,
                    char *why, size_t whylen);

/* Wipe len bytes (and the NUL after them) of a buffer rp_secrets_open returned, then free it.
 * Accepts NULL. */
void rp_secrets_plain_free(char *plain, size_t len);

/* A new random password of len characters (8 to 64) into out (len + 1 bytes): letters and
 * digits, and with symbols one of "_.@%+=:,-" too (characters no BMC, shell or ipmitool
 * quoting trips over); it always holds an upper case letter, a lower case letter, a digit
 * and (with symbols) a symbol, as BMCs with complexity rules ask. 0, or -1 for a len out of
 * range (out untouched). */
int rp_password_generate(char *out, size_t len, int symbols);

/* 1 when s starts with the sealed prefix "rpsec1:" (tells sealed values from legacy
 * plaintext rows; says nothing about whether it opens), else 0. Accepts NULL. */
int rp_secrets_is_sealed(const char *s);

/* Copy the key id a sealed string names into out (outlen >= RP_SECRET_KEY_ID_BUF). Returns
 * 0, or -1 when sealed is not "rpsec1:<16 hex>:..." or out is too small (out untouched).
 * Needs no key. */
int rp_secrets_sealed_key_id(const char *sealed, char *out, size_t outlen);

/* A secret derived from the current key, a context (a non-empty string naming the use, e.g.
 * "bootstrap-token") and len bytes of msg (e.g. a row id; msg may be NULL when len is 0):
 * keyed BLAKE2b under a subkey of the key, so it can be recomputed later from the same
 * inputs and reveals nothing about the key or other contexts. Deterministic per key,
 * context and msg; it changes when a rotation finishes. Returns 0 and fills out, or -1
 * (EINVAL: no context). */
int rp_secrets_derive(const struct rp_secrets *s, const char *context, const void *msg, size_t len,
                      unsigned char out[RP_SECRET_DERIVE_BYTES]);

/* Begin a rotation: load PATH.new when it exists (an earlier rotation died; it is reused, as
 * it is when begin is called twice), else make a new key there as load makes a key file.
 * From then on seal uses the next key; open accepts both. Returns 0, or -1 with why set
 * (nothing changed). */
int rp_secrets_rotate_begin(struct rp_secrets *s, char *why, size_t whylen);

/* Finish a rotation: check that PATH.new still holds the next key, rename it over PATH,
 * fsync the directory; the old key is wiped and the next becomes current. Call only once
 * every sealed value has been re-sealed under the next key and committed: values under the
 * old key no longer open. Returns 0, or -1 with why set: nothing changed, except when the
 * rename succeeded but the directory sync failed (the keys are swapped then, since PATH now
 * names the new key; after a crash PATH.new may be back and a new start finishes again). */
int rp_secrets_rotate_finish(struct rp_secrets *s, char *why, size_t whylen);

/* Abandon a rotation: check that PATH.new holds the next key, remove it, fsync the
 * directory, wipe the next key. Call only while no committed value is sealed under it.
 * Returns 0, or -1 with why set: nothing changed, except when the removal succeeded but the
 * directory sync failed (the next key is dropped then; after a crash PATH.new may be back,
 * and a new start aborts again). */
int rp_secrets_rotate_abort(struct rp_secrets *s, char *why, size_t whylen);

#endif
