/* SHA-256 (OpenSSL's libcrypto), one-shot and streaming, of memory, a file or an fd; and
 * HMAC-SHA256. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>

#include "rackpilot/common.h"

/* OpenSSL 3 looks the digest up in a locked provider table on every one-shot call; fetch it
 * once and keep a context per thread (freed when the thread exits), since every API
 * request hashes its token. */
static EVP_MD *sha256_md;
static pthread_key_t sha256_key;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void
sha256_ctx_free(void *ctx)
{
	EVP_MD_CTX_free(ctx);
}

static void
sha256_init(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (pthread_key_create(&sha256_key, sha256_ctx_free) != 0)
		abort();
}

void
rp_sha256_hex(const void *data, size_t len, char hex[RP_SHA256_HEX])
{
	EVP_MD_CTX *ctx;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t i;

	pthread_once(&sha256_once, sha256_init);
	ctx = pthread_getspecific(sha256_key);
	if (ctx == NULL) {
		ctx = EVP_MD_CTX_new();
		pthread_setspecific(sha256_key, ctx);
	}
	if (ctx == NULL || sha256_md == NULL || !EVP_DigestInit_ex2(ctx, sha256_md, NULL) ||
	    !EVP_DigestUpdate(ctx, data, len) || !EVP_DigestFinal_ex(ctx, md, &mdlen) ||
	    mdlen != 32)
		abort(); /* A host without SHA-256 cannot check a single token. */
	for (i = 0; i < 32; i++) {
		hex[2 * i] = "0123456789abcdef"[md[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
	}
	hex[64] = '\0';
}

struct rp_sha256 {
	EVP_MD_CTX *ctx;
};

struct rp_sha256 *
rp_sha256_new(void)
{
	struct rp_sha256 *h = calloc(1, sizeof *h);

	pthread_once(&sha256_once, sha256_init);
	if (h == NULL || sha256_md == NULL || (h->ctx = EVP_MD_CTX_new()) == NULL ||
	    !EVP_DigestInit_ex2(h->ctx, sha256_md, NULL)) {
		rp_sha256_free(h);
		return NULL;
	}
	return h;
}

void
rp_sha256_update(struct rp_sha256 *h, const void *data, size_t len)
{
	EVP_DigestUpdate(h->ctx, data, len);
}

void
rp_sha256_final(struct rp_sha256 *h, char hex[RP_SHA256_HEX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	if (!EVP_DigestFinal_ex(h->ctx, md, &mdlen) || mdlen != 32)
		abort();
	for (i = 0; i < 32; i++) {
		hex[2 * i] = "0123456789abcdef"[md[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[md[i] & 15];
	}
	hex[64] = '\0';
}

void
rp_sha256_free(struct rp_sha256 *h)
{
	if (h == NULL)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int
rp_fd_sha256(int fd, char hex[RP_SHA256_HEX], uint64_t *size)
{
	struct rp_sha256 *h = NULL;
	char *buf = NULL;
	uint64_t total = 0;
	ssize_t n;
	int rc = -1, err = 0;

	if ((h = rp_sha256_new()) == NULL || (buf = malloc(1 << 20)) == NULL) {
		err = ENOMEM;
		goto out;
	}
	while ((n = read(fd, buf, 1 << 20)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			goto out;
		}
		rp_sha256_update(h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	rp_sha256_final(h, hex);
	if (size)
		*size = total;
	rc = 0;
out:
	free(buf);
	rp_sha256_free(h);
	if (rc < 0 && err)
		errno = err;
	return rc;
}

int
rp_file_sha256(const char *path, char hex[RP_SHA256_HEX], uint64_t *size)
{
	int fd, rc, err;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	rc = rp_fd_sha256(fd, hex, size);
	err = errno;
	close(fd);
	errno = err;
	return rc;
}

int
rp_hmac_sha256_hex(const void *key, size_t keylen, const void *data, size_t len,
                   char hex[RP_SHA256_HEX])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	hex[0] = '\0';
	if (keylen > INT_MAX ||
	    HMAC(EVP_sha256(), key, (int)keylen, data, len, md, &mdlen) == NULL || mdlen != 32)
		return -1;
	for (i = 0; i < mdlen; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
	OPENSSL_cleanse(md, sizeof md);
	return 0;
}
