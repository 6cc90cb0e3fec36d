/* Secrets at rest: the key file, sealing with XChaCha20-Poly1305, derived secrets, rotation. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "util.h"

#define KEY_MAGIC   "rackpilot-secret-key-v1 "
#define KEY_B64LEN  43 /* 32 bytes, unpadded base64url */
#define KEY_LINELEN (sizeof KEY_MAGIC - 1 + KEY_B64LEN + 1 + RP_SECRET_KEY_ID_BUF - 1)
#define SEAL_PREFIX "rpsec1:"
#define SEAL_HDRLEN (sizeof SEAL_PREFIX - 1 + RP_SECRET_KEY_ID_BUF - 1 + 1)
#define NONCE_LEN   crypto_secretbox_xchacha20poly1305_NONCEBYTES
#define MAC_LEN     crypto_secretbox_xchacha20poly1305_MACBYTES
#define B64         sodium_base64_VARIANT_URLSAFE_NO_PADDING

/* What is kept of a key: never the key itself, only subkeys derived from it, so that sealing,
 * deriving and naming never share key material. Lives in sodium_malloc'd memory (guard
 * pages, mlock, left out of core dumps), which sodium_free wipes. */
struct key {
	unsigned char box[crypto_secretbox_xchacha20poly1305_KEYBYTES];
	unsigned char derive[crypto_generichash_KEYBYTES];
	char id[RP_SECRET_KEY_ID_BUF];
};

struct rp_secrets {
	struct key *cur, *next; /* next: loaded from PATH.new (rotation in progress) */
	int rotating;           /* set by rotate_begin: seal uses next */
	char *path, *path_new;
};

/* crypto_kdf contexts are exactly 8 characters; the subkey ids keep the three uses apart. */
static const char kdf[crypto_kdf_CONTEXTBYTES + 1] = "rpsecret";
enum { SUB_BOX = 1, SUB_DERIVE = 2, SUB_ID = 3 };

static void say(char *why, size_t whylen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
say(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || whylen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

/* The subkeys and id of a 32-byte key, into new locked memory. NULL on allocation failure. */
static struct key *
key_from(const unsigned char master[crypto_kdf_KEYBYTES])
{
	struct key *k = sodium_malloc(sizeof *k);
	/* BLAKE2b's shortest output is 16 bytes; the id is its first 8. */
	unsigned char id[crypto_kdf_BYTES_MIN];

	if (k == NULL)
		return NULL;
	if (crypto_kdf_derive_from_key(k->box, sizeof k->box, SUB_BOX, kdf, master) < 0 ||
	    crypto_kdf_derive_from_key(k->derive, sizeof k->derive, SUB_DERIVE, kdf, master) < 0 ||
	    crypto_kdf_derive_from_key(id, sizeof id, SUB_ID, kdf, master) < 0) {
		sodium_free(k);
		return NULL;
	}
	sodium_bin2hex(k->id, sizeof k->id, id, (RP_SECRET_KEY_ID_BUF - 1) / 2);
	return k;
}

/* Read and check the key file at path. 0 (*out set), 1 when it does not exist, -1 when it is
 * refused (why set). */
static int
key_read(const char *path, struct key **out, char *why, size_t whylen)
{
	char line[KEY_LINELEN + 2];
	unsigned char master[crypto_kdf_KEYBYTES];
	struct key *k = NULL;
	struct stat st;
	size_t n = 0, binlen = 0;
	ssize_t r;
	int fd, rc = -1;

	/* O_NOFOLLOW: a link could point anywhere; O_NONBLOCK: a FIFO must not hang the start. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		if (errno == ELOOP)
			say(why, whylen,
			    "key file %s is a symbolic link: configure the path of the file itself",
			    path);
		else
			say(why, whylen, "cannot open key file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		say(why, whylen, "cannot stat key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		say(why, whylen,
		    "key file %s is not a regular file: move it away and restore the key "
		    "file from a backup",
		    path);
		goto out;
	}
	if (st.st_mode & 077) {
		say(why, whylen,
		    "key file %s may be read or written by group or others (mode %04o): "
		    "chmod 600 %s (and consider the key exposed)",
		    path, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		say(why, whylen,
		    "key file %s is owned by uid %u, not by this user (uid %u) or root: "
		    "chown it",
		    path, (unsigned)st.st_uid, (unsigned)geteuid());
		goto out;
	}
	while (n < sizeof line && (r = read(fd, line + n, sizeof line - n)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			say(why, whylen, "cannot read key file %s: %s", path, strerror(errno));
			goto out;
		}
		n += (size_t)r;
	}
	if (n == KEY_LINELEN + 1 && line[KEY_LINELEN] == '\n')
		n--;
	if (n != KEY_LINELEN || memcmp(line, KEY_MAGIC, sizeof KEY_MAGIC - 1) != 0 ||
	    line[sizeof KEY_MAGIC - 1 + KEY_B64LEN] != ' ' ||
	    sodium_base642bin(master, sizeof master, line + sizeof KEY_MAGIC - 1, KEY_B64LEN, NULL,
	                      &binlen, NULL, B64) != 0 ||
	    binlen != sizeof master) {
		say(why, whylen,
		    "key file %s is not a rackpilot key file (one line: \"%s<43 base64url "
		    "characters> <key id>\"): restore it from a backup",
		    path, KEY_MAGIC);
		goto out;
	}
	if ((k = key_from(master)) == NULL) {
		say(why, whylen, "cannot load key file %s: out of memory", path);
		goto out;
	}
	if (memcmp(line + KEY_LINELEN - (RP_SECRET_KEY_ID_BUF - 1), k->id,
	           RP_SECRET_KEY_ID_BUF - 1) != 0) {
		say(why, whylen,
		    "key file %s is damaged (its key does not match its key id "
		    "%.16s): restore it from a backup",
		    path, line + KEY_LINELEN - 16);
		goto out;
	}
	*out = k;
	k = NULL;
	rc = 0;
out:
	sodium_memzero(line, sizeof line);
	sodium_memzero(master, sizeof master);
	sodium_free(k);
	close(fd);
	return rc;
}

/* Make a new key file at path: PATH.tmp is written and fsynced, then linked to path, which
 * fails rather than replace anything, so path is either absent or a complete key file.
 * 0 (an existing path counts: the caller reads whatever is there), or -1 with why set. */
static int
key_create(const char *path, char *why, size_t whylen)
{
	unsigned char master[crypto_kdf_KEYBYTES];
	char line[KEY_LINELEN + 2], *tmp = NULL;
	struct key *k = NULL;
	size_t n;
	int fd = -1, rc = -1;

	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		say(why, whylen, "cannot create key file %s: out of memory", path);
		goto out;
	}
	randombytes_buf(master, sizeof master);
	if ((k = key_from(master)) == NULL) {
		say(why, whylen, "cannot create key file %s: out of memory", path);
		goto out;
	}
	memcpy(line, KEY_MAGIC, sizeof KEY_MAGIC - 1);
	sodium_bin2base64(line + sizeof KEY_MAGIC - 1, KEY_B64LEN + 1, master, sizeof master, B64);
	line[sizeof KEY_MAGIC - 1 + KEY_B64LEN] = ' ';
	memcpy(line + sizeof KEY_MAGIC + KEY_B64LEN, k->id, RP_SECRET_KEY_ID_BUF - 1);
	line[KEY_LINELEN] = '\n';
	n = KEY_LINELEN + 1;

	/* A PATH.tmp left by a crash never became the key file; start it afresh. */
	if (unlink(tmp) < 0 && errno != ENOENT) {
		say(why, whylen, "cannot remove %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0) {
		say(why, whylen, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rp_write_all(fd, line, n) < 0) {
		say(why, whylen, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fsync(fd) < 0) {
		say(why, whylen, "cannot sync %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (link(tmp, path) < 0 && errno != EEXIST) {
		say(why, whylen, "cannot create key file %s: %s", path, strerror(errno));
		goto out;
	}
	unlink(tmp);
	if (rp_fsync_dir_of(path) < 0) {
		say(why, whylen, "cannot sync the directory of key file %s: %s", path,
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	sodium_memzero(master, sizeof master);
	sodium_memzero(line, sizeof line);
	sodium_free(k);
	if (fd >= 0)
		close(fd);
	if (rc < 0 && tmp != NULL)
		unlink(tmp);
	free(tmp);
	return rc;
}

int
rp_secrets_load(const char *path, int create, struct rp_secrets **out, char *why, size_t whylen)
{
	struct rp_secrets *s = NULL;
	struct stat st;
	int r, rc = -1;

	if (sodium_init() < 0) {
		say(why, whylen, "cannot initialise libsodium");
		return -1;
	}
	if (path == NULL || *path == '\0') {
		say(why, whylen, "no key file path");
		return -1;
	}
	s = calloc(1, sizeof *s);
	if (s == NULL || (s->path = strdup(path)) == NULL ||
	    asprintf(&s->path_new, "%s.new", path) < 0) {
		if (s != NULL)
			s->path_new = NULL;
		say(why, whylen, "cannot load key file %s: out of memory", path);
		goto out;
	}
	r = key_read(path, &s->cur, why, whylen);
	if (r == 1 && create) {
		/* A lone PATH.new means PATH was lost: a fresh key would orphan every value. */
		if (lstat(s->path_new, &st) == 0) {
			say(why, whylen,
			    "key file %s does not exist but %s does (a rotation's next "
			    "key): restore %s from a backup",
			    path, s->path_new, path);
			goto out;
		}
		if (key_create(path, why, whylen) < 0)
			goto out;
		r = key_read(path, &s->cur, why, whylen);
	}
	if (r == 1) {
		say(why, whylen,
		    "key file %s does not exist: restore it from a backup (without it "
		    "the sealed passwords cannot be read)",
		    path);
		goto out;
	}
	if (r < 0)
		goto out;
	r = key_read(s->path_new, &s->next, why, whylen);
	if (r < 0)
		goto out;
	if (r == 0 && strcmp(s->next->id, s->cur->id) == 0) {
		say(why, whylen, "%s holds the same key as %s: remove %s", s->path_new, path,
		    s->path_new);
		goto out;
	}
	*out = s;
	s = NULL;
	rc = 0;
out:
	rp_secrets_free(s);
	return rc;
}

void
rp_secrets_free(struct rp_secrets *s)
{
	if (s == NULL)
		return;
	sodium_free(s->cur);
	sodium_free(s->next);
	free(s->path);
	free(s->path_new);
	free(s);
}

const char *
rp_secrets_key_id(const struct rp_secrets *s)
{
	return s->cur->id;
}

const char *
rp_secrets_next_key_id(const struct rp_secrets *s)
{
	return s->next != NULL ? s->next->id : NULL;
}

int
rp_secrets_is_sealed(const char *s)
{
	return s != NULL && strncmp(s, SEAL_PREFIX, sizeof SEAL_PREFIX - 1) == 0;
}

/* The id of a sealed string (16 lowercase hex characters between the prefix and a ':'). */
static const char *
sealed_id(const char *sealed)
{
	const char *id;

	if (!rp_secrets_is_sealed(sealed))
		return NULL;
	id = sealed + sizeof SEAL_PREFIX - 1;
	if (strspn(id, "0123456789abcdef") != RP_SECRET_KEY_ID_BUF - 1 ||
	    id[RP_SECRET_KEY_ID_BUF - 1] != ':')
		return NULL;
	return id;
}

int
rp_secrets_sealed_key_id(const char *sealed, char *out, size_t outlen)
{
	const char *id = sealed_id(sealed);

	if (id == NULL || outlen < RP_SECRET_KEY_ID_BUF)
		return -1;
	memcpy(out, id, RP_SECRET_KEY_ID_BUF - 1);
	out[RP_SECRET_KEY_ID_BUF - 1] = '\0';
	return 0;
}

int
rp_secrets_seal(const struct rp_secrets *s, const void *plain, size_t len, char **out)
{
	static const unsigned char none[1];
	const struct key *k = s->rotating ? s->next : s->cur;
	unsigned char *box = NULL;
	size_t boxlen = NONCE_LEN + len + MAC_LEN, b64len;
	char *str = NULL;
	int rc = -1;

	if (len > RP_SECRET_MAX || (plain == NULL && len > 0)) {
		errno = EINVAL;
		return -1;
	}
	if (s->next != NULL && !s->rotating) {
		errno = EBUSY;
		return -1;
	}
	b64len = sodium_base64_ENCODED_LEN(boxlen, B64);
	box = malloc(boxlen);
	str = malloc(SEAL_HDRLEN + b64len);
	if (box == NULL || str == NULL) {
		errno = ENOMEM;
		goto out;
	}
	/* 192-bit random nonces: no counter to keep, and a repeat is out of reach. */
	randombytes_buf(box, NONCE_LEN);
	crypto_secretbox_xchacha20poly1305_easy(box + NONCE_LEN, len > 0 ? plain : none, len, box,
	                                        k->box);
	memcpy(str, SEAL_PREFIX, sizeof SEAL_PREFIX - 1);
	memcpy(str + sizeof SEAL_PREFIX - 1, k->id, RP_SECRET_KEY_ID_BUF - 1);
	str[SEAL_HDRLEN - 1] = ':';
	sodium_bin2base64(str + SEAL_HDRLEN, b64len, box, boxlen, B64);
	*out = str;
	str = NULL;
	rc = 0;
out:
	free(box);
	free(str);
	return rc;
}

int
rp_secrets_open(const struct rp_secrets *s, const char *sealed, char **plain, size_t *len,
                char *why, size_t whylen)
{
	const char *id = sealed_id(sealed), *b64;
	const struct key *k = NULL;
	unsigned char *box = NULL;
	char *m = NULL;
	size_t b64len, boxlen = 0, mlen = 0;
	int rc = -1;

	if (id == NULL) {
		say(why, whylen, "not a sealed secret (expected \"%s<key id>:<data>\")",
		    SEAL_PREFIX);
		goto out;
	}
	if (strncmp(id, s->cur->id, RP_SECRET_KEY_ID_BUF - 1) == 0)
		k = s->cur;
	else if (s->next != NULL && strncmp(id, s->next->id, RP_SECRET_KEY_ID_BUF - 1) == 0)
		k = s->next;
	if (k == NULL) {
		if (s->next != NULL)
			say(why, whylen,
			    "sealed under key %.16s; this server has keys %s and %s: "
			    "restore the key file",
			    id, s->cur->id, s->next->id);
		else
			say(why, whylen,
			    "sealed under key %.16s; this server has key %s: restore the "
			    "key file",
			    id, s->cur->id);
		goto out;
	}
	b64 = id + RP_SECRET_KEY_ID_BUF;
	b64len = strlen(b64);
	if (b64len < sodium_base64_ENCODED_LEN(NONCE_LEN + MAC_LEN, B64) - 1 ||
	    b64len > sodium_base64_ENCODED_LEN(NONCE_LEN + RP_SECRET_MAX + MAC_LEN, B64) - 1) {
		say(why, whylen, "sealed secret of a wrong length");
		goto out;
	}
	box = malloc(b64len / 4 * 3 + 3);
	if (box == NULL) {
		say(why, whylen, "out of memory");
		goto out;
	}
	if (sodium_base642bin(box, b64len / 4 * 3 + 3, b64, b64len, NULL, &boxlen, NULL, B64) !=
	            0 ||
	    boxlen < NONCE_LEN + MAC_LEN) {
		say(why, whylen, "sealed secret is not valid base64url");
		goto out;
	}
	mlen = boxlen - NONCE_LEN - MAC_LEN;
	m = malloc(mlen + 1);
	if (m == NULL) {
		say(why, whylen, "out of memory");
		goto out;
	}
	if (crypto_secretbox_xchacha20poly1305_open_easy((unsigned char *)m, box + NONCE_LEN,
	                                                 boxlen - NONCE_LEN, box, k->box) != 0) {
		say(why, whylen,
		    "sealed secret under key %s failed authentication: it was altered "
		    "or damaged",
		    k->id);
		goto out;
	}
	m[mlen] = '\0';
	*plain = m;
	*len = mlen;
	m = NULL;
	rc = 0;
out:
	if (m != NULL) {
		sodium_memzero(m, mlen + 1);
		free(m);
	}
	free(box);
	return rc;
}

void
rp_secrets_plain_free(char *plain, size_t len)
{
	if (plain == NULL)
		return;
	sodium_memzero(plain, len + 1);
	free(plain);
}

int
rp_secrets_derive(const struct rp_secrets *s, const char *context, const void *msg, size_t len,
                  unsigned char out[RP_SECRET_DERIVE_BYTES])
{
	crypto_generichash_state st;

	if (context == NULL || *context == '\0' || (msg == NULL && len > 0)) {
		errno = EINVAL;
		return -1;
	}
	/* The context's NUL ends it (a context holds none), so no two (context, msg) pairs hash
	 * the same bytes. */
	crypto_generichash_init(&st, s->cur->derive, sizeof s->cur->derive, RP_SECRET_DERIVE_BYTES);
	crypto_generichash_update(&st, (const unsigned char *)context, strlen(context) + 1);
	if (len > 0)
		crypto_generichash_update(&st, msg, len);
	crypto_generichash_final(&st, out, RP_SECRET_DERIVE_BYTES);
	sodium_memzero(&st, sizeof st);
	return 0;
}

/* 0 when PATH.new still holds s->next; otherwise -1 with why set (someone else rotated, or
 * the file was removed or damaged, and renaming or removing it would lose a key). */
static int
next_on_disk(const struct rp_secrets *s, char *why, size_t whylen)
{
	struct key *k = NULL;
	int r;

	r = key_read(s->path_new, &k, why, whylen);
	if (r == 1) {
		say(why, whylen,
		    "%s has gone (the next key %s is only in memory): stop, and rotate "
		    "again once the database is checked",
		    s->path_new, s->next->id);
		return -1;
	}
	if (r < 0)
		return -1;
	r = strcmp(k->id, s->next->id) == 0 ? 0 : -1;
	if (r < 0)
		say(why, whylen,
		    "%s now holds key %s, not the next key %s: another rotation is "
		    "running?",
		    s->path_new, k->id, s->next->id);
	sodium_free(k);
	return r;
}

int
rp_secrets_rotate_begin(struct rp_secrets *s, char *why, size_t whylen)
{
	struct key *k = NULL;
	int r;

	if (s->next != NULL) {
		s->rotating = 1;
		return 0;
	}
	r = key_read(s->path_new, &k, why, whylen);
	if (r == 1) {
		if (key_create(s->path_new, why, whylen) < 0)
			return -1;
		r = key_read(s->path_new, &k, why, whylen);
	}
	if (r != 0)
		return -1;
	if (strcmp(k->id, s->cur->id) == 0) {
		say(why, whylen, "%s holds the same key as %s: remove %s", s->path_new, s->path,
		    s->path_new);
		sodium_free(k);
		return -1;
	}
	s->next = k;
	s->rotating = 1;
	return 0;
}

/* A rotation to finish or abort: one was begun and its next key is still on disk. */
static int
rotation_open(struct rp_secrets *s, char *why, size_t whylen)
{
	if (s->next == NULL) {
		say(why, whylen, "no key rotation in progress");
		return -1;
	}
	return next_on_disk(s, why, whylen);
}

int
rp_secrets_rotate_finish(struct rp_secrets *s, char *why, size_t whylen)
{
	int rc = -1;

	if (rotation_open(s, why, whylen) < 0)
		return -1;
	if (rename(s->path_new, s->path) < 0) {
		say(why, whylen, "cannot rename %s to %s: %s", s->path_new, s->path,
		    strerror(errno));
		return -1;
	}
	/* PATH names the new key now, whatever the sync says: memory follows the namespace. */
	if (rp_fsync_dir_of(s->path) < 0)
		say(why, whylen, "renamed %s to %s but cannot sync the directory: %s", s->path_new,
		    s->path, strerror(errno));
	else
		rc = 0;
	sodium_free(s->cur);
	s->cur = s->next;
	s->next = NULL;
	s->rotating = 0;
	return rc;
}

int
rp_secrets_rotate_abort(struct rp_secrets *s, char *why, size_t whylen)
{
	int rc = -1;

	if (rotation_open(s, why, whylen) < 0)
		return -1;
	if (unlink(s->path_new) < 0) {
		say(why, whylen, "cannot remove %s: %s", s->path_new, strerror(errno));
		return -1;
	}
	/* The name is gone whatever the sync says; after a crash it may be back, and a start
	 * aborts again. */
	if (rp_fsync_dir_of(s->path_new) < 0)
		say(why, whylen, "removed %s but cannot sync the directory: %s", s->path_new,
		    strerror(errno));
	else
		rc = 0;
	sodium_free(s->next);
	s->next = NULL;
	s->rotating = 0;
	return rc;
}

int
rp_password_generate(char *out, size_t len, int symbols)
{
	static const char *const sets[] = {"ABCDEFGHJKLMNPQRSTUVWXYZ", "abcdefghijkmnopqrstuvwxyz",
	                                   "23456789", "_.@%+=:,-"};
	size_t nsets = symbols ? 4 : 3, i, j;
	char all[96] = "";

	if (len < 8 || len > 64)
		return -1;
	for (i = 0; i < nsets; i++)
		strcat(all, sets[i]);
	/* One of each set first, the rest from all of them, then shuffled (Fisher-Yates with
	 * libsodium's unbiased randombytes_uniform). */
	for (i = 0; i < len; i++) {
		const char *from = i < nsets ? sets[i] : all;

		out[i] = from[randombytes_uniform((uint32_t)strlen(from))];
	}
	for (i = len - 1; i > 0; i--) {
		char t = out[i];

		j = randombytes_uniform((uint32_t)i + 1);
		out[i] = out[j];
		out[j] = t;
	}
	out[len] = '\0';
	return 0;
}
