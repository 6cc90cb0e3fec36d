/*
 * The API listener's certificate (GnuTLS, which Debian's libmicrohttpd is built on).
 *
 * libmicrohttpd asks for the certificate at every handshake through a GnuTLS retrieve
 * callback, so a reload only swaps the pointer the callback reads: open connections keep
 * the certificate they were made with. GnuTLS keeps using what the callback returned for the
 * session's lifetime without owning it, so a replaced certificate is retired, not freed,
 * until rp_tls_free.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "http.h"

#define MAX_CHAIN 8
#define MAX_PEM   (1 << 20)

struct cert {
	gnutls_pcert_st chain[MAX_CHAIN];
	unsigned n;
	gnutls_privkey_t key;
	char fingerprint[65];
	struct cert *retired; /* older certificates, newest first */
};

struct rp_tls {
	char cert_file[512], key_file[512];
	pthread_mutex_t mu;
	struct cert *cur;
};

/* The callback has no argument of its own: one certificate per process, the one the HTTPS
 * listener was started with. */
static struct rp_tls *serving;

static void
cert_free(struct cert *c)
{
	unsigned i;

	while (c) {
		struct cert *next = c->retired;

		for (i = 0; i < c->n; i++)
			gnutls_pcert_deinit(&c->chain[i]);
		gnutls_privkey_deinit(c->key);
		free(c);
		c = next;
	}
}

static int
read_pem(const char *path, gnutls_datum_t *d, char *why, size_t whylen)
{
	char *text = NULL;
	size_t len = 0;

	if (rp_file_read(path, MAX_PEM, &text, &len) < 0) {
		snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	d->data = (unsigned char *)text;
	d->size = (unsigned)len;
	return 0;
}

static void
wipe_pem(gnutls_datum_t *d)
{
	if (d->data)
		explicit_bzero(d->data, d->size);
	free(d->data);
	d->data = NULL;
}

/* SHA-256 of the DER SubjectPublicKeyInfo, as lowercase hex. */
static int
pin_of(gnutls_pubkey_t pub, char out[65])
{
	gnutls_datum_t der = {0};
	unsigned char d[32];
	int i;

	if (gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &der) < 0)
		return -1;
	i = gnutls_hash_fast(GNUTLS_DIG_SHA256, der.data, der.size, d);
	gnutls_free(der.data);
	if (i < 0)
		return -1;
	for (i = 0; i < 32; i++) {
		out[2 * i] = "0123456789abcdef"[d[i] >> 4];
		out[2 * i + 1] = "0123456789abcdef"[d[i] & 15];
	}
	out[64] = '\0';
	return 0;
}

static struct cert *
cert_load(const char *cert_file, const char *key_file, char *why, size_t whylen)
{
	gnutls_datum_t cd = {0}, kd = {0};
	gnutls_pubkey_t mine = NULL;
	struct cert *c = NULL, *res = NULL;
	char a[65], b[65];
	int r;

	if (read_pem(cert_file, &cd, why, whylen) < 0 || read_pem(key_file, &kd, why, whylen) < 0)
		goto out;
	if ((c = calloc(1, sizeof *c)) == NULL) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	c->n = MAX_CHAIN;
	if ((r = gnutls_pcert_list_import_x509_raw(c->chain, &c->n, &cd, GNUTLS_X509_FMT_PEM, 0)) <
	            0 ||
	    c->n == 0) {
		c->n = 0;
		snprintf(why, whylen, "%s: not a PEM certificate (chain of at most %d): %s",
		         cert_file, MAX_CHAIN, r < 0 ? gnutls_strerror(r) : "empty");
		goto out;
	}
	if ((r = gnutls_privkey_init(&c->key)) < 0 ||
	    (r = gnutls_privkey_import_x509_raw(c->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		snprintf(why, whylen, "%s: not an unencrypted PEM private key: %s", key_file,
		         gnutls_strerror(r));
		goto out;
	}
	/* A key that does not fit the certificate fails every handshake: refuse it here. */
	if (gnutls_pubkey_init(&mine) < 0 || gnutls_pubkey_import_privkey(mine, c->key, 0, 0) < 0 ||
	    pin_of(mine, a) < 0 || pin_of(c->chain[0].pubkey, b) < 0 || strcmp(a, b) != 0) {
		snprintf(why, whylen, "%s is not the private key of the certificate in %s",
		         key_file, cert_file);
		goto out;
	}
	memcpy(c->fingerprint, b, sizeof b);
	res = c;
	c = NULL;
out:
	if (mine)
		gnutls_pubkey_deinit(mine);
	wipe_pem(&cd);
	wipe_pem(&kd);
	cert_free(c);
	return res;
}

/* gnutls_certificate_retrieve_function2 */
static int
retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
         unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
	struct rp_tls *t = __atomic_load_n(&serving, __ATOMIC_ACQUIRE);
	struct cert *c;

	(void)session, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
	if (t == NULL)
		return -1;
	pthread_mutex_lock(&t->mu);
	c = t->cur;
	pthread_mutex_unlock(&t->mu);
	*pcert = c->chain;
	*pcert_length = c->n;
	*pkey = c->key;
	return 0;
}

void *
rp_tls_callback(struct rp_tls *t)
{
	__atomic_store_n(&serving, t, __ATOMIC_RELEASE);
	return (void *)retrieve;
}

int
rp_tls_load(const char *cert_file, const char *key_file, struct rp_tls **out, char *why,
            size_t whylen)
{
	struct rp_tls *t = calloc(1, sizeof *t);

	if (t == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	snprintf(t->cert_file, sizeof t->cert_file, "%s", cert_file);
	snprintf(t->key_file, sizeof t->key_file, "%s", key_file);
	if ((t->cur = cert_load(cert_file, key_file, why, whylen)) == NULL) {
		free(t);
		return -1;
	}
	pthread_mutex_init(&t->mu, NULL);
	*out = t;
	return 0;
}

/* Retired certificates kept: a handshake takes what the callback returned at its start, so one
 * that began before a reload holds the old certificate for a moment; sixteen reloads later
 * none does. */
#define RETIRED_KEPT 16

int
rp_tls_reload(struct rp_tls *t, char *why, size_t whylen)
{
	struct cert *c = cert_load(t->cert_file, t->key_file, why, whylen), *old = NULL, *p;
	int n;

	if (c == NULL)
		return -1;
	pthread_mutex_lock(&t->mu);
	c->retired = t->cur;
	t->cur = c;
	for (p = c, n = 0; p && n < RETIRED_KEPT; p = p->retired, n++)
		;
	if (p) {
		old = p->retired;
		p->retired = NULL;
	}
	pthread_mutex_unlock(&t->mu);
	cert_free(old);
	return 0;
}

const char *
rp_tls_fingerprint(const struct rp_tls *t)
{
	return t->cur->fingerprint;
}

void
rp_tls_free(struct rp_tls *t)
{
	if (t == NULL)
		return;
	if (__atomic_load_n(&serving, __ATOMIC_ACQUIRE) == t)
		__atomic_store_n(&serving, NULL, __ATOMIC_RELEASE);
	cert_free(t->cur);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* ---- A self-signed certificate ------------------------------------------------------- */

static int
add_ip(gnutls_x509_crt_t crt, const char *host)
{
	unsigned char raw[16];

	if (inet_pton(AF_INET, host, raw) == 1)
		return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, raw, 4,
		                                            GNUTLS_FSAN_APPEND);
	if (inet_pton(AF_INET6, host, raw) == 1)
		return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, raw, 16,
		                                            GNUTLS_FSAN_APPEND);
	return 0;
}

/* A wildcard listener answers on every address the machine has: name them all. */
static int
add_local_ips(gnutls_x509_crt_t crt)
{
	struct ifaddrs *ifa = NULL, *i;
	char buf[INET6_ADDRSTRLEN];
	int r = 0;

	if (getifaddrs(&ifa) < 0)
		return 0;
	for (i = ifa; i && r >= 0; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
			          sizeof buf);
		else if (i->ifa_addr->sa_family == AF_INET6 &&
		         !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, buf,
			          sizeof buf);
		else
			continue;
		r = add_ip(crt, buf);
	}
	freeifaddrs(ifa);
	return r;
}

int
rp_tls_selfsigned(const char *cert_file, const char *key_file, const char *host, int *made,
                  char *why, size_t whylen)
{
	gnutls_x509_privkey_t pk = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_datum_t kpem = {0}, cpem = {0};
	unsigned char serial[16];
	char name[256] = "", cn[300];
	time_t now = time(NULL);
	struct stat sb;
	int r = 0, rc = -1;

	if (stat(cert_file, &sb) == 0 && stat(key_file, &sb) == 0) {
		*made = 0;
		return 0;
	}
	if (gethostname(name, sizeof name - 1) < 0)
		name[0] = '\0';
	if (rp_random(serial, sizeof serial) < 0) {
		snprintf(why, whylen, "no random bytes for a certificate serial");
		return -1;
	}
	serial[0] &= 0x7f; /* a positive INTEGER */
	snprintf(cn, sizeof cn, "rackpilotd %s", name[0] ? name : host);
	if ((r = gnutls_x509_privkey_init(&pk)) < 0 ||
	    (r = gnutls_x509_privkey_generate(pk, GNUTLS_PK_ECDSA,
	                                      GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
	                                      0)) < 0 ||
	    (r = gnutls_x509_crt_init(&crt)) < 0 || (r = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
	    (r = gnutls_x509_crt_set_serial(crt, serial, sizeof serial)) < 0 ||
	    (r = gnutls_x509_crt_set_activation_time(crt, now - 3600)) < 0 ||
	    (r = gnutls_x509_crt_set_expiration_time(crt, now + 5L * 365 * 86400)) < 0 ||
	    (r = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
	                                       (unsigned)strlen(cn))) < 0 ||
	    (r = gnutls_x509_crt_set_key(crt, pk)) < 0 ||
	    (r = gnutls_x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
	    (r = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
	    (r = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0 ||
	    (r = (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")) ? add_local_ips(crt)
	                                                           : add_ip(crt, host)) < 0 ||
	    (name[0] && (r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, name,
	                                                          (unsigned)strlen(name),
	                                                          GNUTLS_FSAN_APPEND)) < 0) ||
	    (r = gnutls_x509_crt_sign2(crt, crt, pk, GNUTLS_DIG_SHA256, 0)) < 0 ||
	    (r = gnutls_x509_privkey_export2(pk, GNUTLS_X509_FMT_PEM, &kpem)) < 0 ||
	    (r = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cpem)) < 0) {
		snprintf(why, whylen, "cannot make a self-signed certificate: %s",
		         gnutls_strerror(r));
		goto out;
	}
	/* The key first: a certificate on disk always has its key beside it. */
	if (rp_file_write_private(key_file, kpem.data, kpem.size, 0600) < 0 ||
	    rp_file_write_private(cert_file, cpem.data, cpem.size, 0600) < 0) {
		snprintf(why, whylen, "cannot write %s or %s: %s", key_file, cert_file,
		         strerror(errno));
		goto out;
	}
	*made = 1;
	rc = 0;
out:
	if (kpem.data) {
		explicit_bzero(kpem.data, kpem.size);
		gnutls_free(kpem.data);
	}
	gnutls_free(cpem.data);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(pk);
	return rc;
}
