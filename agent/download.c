/* Streaming downloads that hash what they pass on, so an image is never read twice. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent.h"

#define CONNECT_TIMEOUT_S 10
/* libcurl's receive buffer: large pieces keep the per-piece work (hash, decode, write) rare. */
#define RECV_BUFFER (512 * 1024)

/* Pieces this large are hashed by a thread of their own while the sink decodes and writes
 * them (SHA-256 costs as much as writing); smaller ones are not worth the handover. */
#define HASH_APART_MIN (64 * 1024)

struct hasher {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rp_sha256 *md;
	const void *p; /* the piece being hashed */
	size_t n;
	int busy, stop;
};

static void *
hasher_main(void *arg)
{
	struct hasher *h = arg;

	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->busy && !h->stop)
			pthread_cond_wait(&h->cv, &h->mu);
		if (!h->busy)
			break;
		pthread_mutex_unlock(&h->mu);
		rp_sha256_update(h->md, h->p, h->n);
		pthread_mutex_lock(&h->mu);
		h->busy = 0;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

struct transfer {
	struct rp_agent_sink *sink;
	struct rp_sha256 *md;
	CURL *curl;
	int stopped; /* the sink said stop */
	int apart;   /* the hasher thread runs */
	struct hasher h;
};

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	struct transfer *t = arg;
	struct rp_agent_sink *s = t->sink;
	int rc;

	n *= size;
	if (s->bytes == 0 && s->total < 0) {
		curl_off_t len = -1;

		if (curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len) ==
		            CURLE_OK &&
		    len >= 0)
			s->total = (int64_t)len;
	}
	s->bytes += n;
	if (t->apart && n >= HASH_APART_MIN) {
		/* The piece is libcurl's until we return: both are done with it by then. */
		pthread_mutex_lock(&t->h.mu);
		t->h.p = p;
		t->h.n = n;
		t->h.busy = 1;
		pthread_cond_broadcast(&t->h.cv);
		pthread_mutex_unlock(&t->h.mu);
		rc = s->write(s, p, n);
		pthread_mutex_lock(&t->h.mu);
		while (t->h.busy)
			pthread_cond_wait(&t->h.cv, &t->h.mu);
		pthread_mutex_unlock(&t->h.mu);
	} else {
		rp_sha256_update(t->md, p, n);
		rc = s->write(s, p, n);
	}
	if (rc < 0) {
		t->stopped = 1;
		return 0;
	}
	return n;
}

/* Length of url's "scheme://authority", or 0 when it has no "://". */
static size_t
origin_len(const char *url)
{
	const char *p = strstr(url, "://");

	return p ? (size_t)(p + 3 - url) + strcspn(p + 3, "/?#") : 0;
}

/* The pin is the server's: it holds for https downloads from the server's own origin, and
 * other hosts (a vendor mirror) are verified as before. A relative url is the server's. */
static int
pinned(const struct rp_agent_config *cfg, const char *url, const char *full)
{
	size_t n = origin_len(cfg->url);

	if (cfg->server_fingerprint[0] == '\0' || strncasecmp(full, "https://", 8))
		return 0;
	return url[0] == '/' || (n > 0 && origin_len(full) == n && !strncasecmp(full, cfg->url, n));
}

static int
on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)arg, (void)dt, (void)dn, (void)ut, (void)un;
	return rp_agent_stopping || rp_agent_cancelled ? 1 : 0;
}

int
rp_agent_download_to(const struct rp_agent_config *cfg, const char *url, unsigned timeout_s,
                     struct rp_agent_sink *sink, char hex[RP_SHA256_HEX], char *err, size_t errlen)
{
	struct transfer t = {
	        .sink = sink,
	        .h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER}};
	struct rp_agent_tls tls;
	char full[4096], cerr[CURL_ERROR_SIZE] = "";
	CURLcode cc;
	int rc = -1;

	sink->total = -1;
	sink->bytes = 0;
	t.md = rp_sha256_new();
	t.curl = curl_easy_init();
	if (t.md == NULL || t.curl == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (url[0] == '/') {
		/* Relative to the server: the image store of the rackpilotd this agent knows. */
		size_t n = strlen(cfg->url);

		while (n > 0 && cfg->url[n - 1] == '/')
			n--;
		if ((size_t)snprintf(full, sizeof full, "%.*s%s", (int)n, cfg->url, url) >=
		            sizeof full ||
		    n == 0) {
			snprintf(err, errlen, "%s: no server URL to resolve it against", url);
			goto out;
		}
	} else if ((size_t)snprintf(full, sizeof full, "%s", url) >= sizeof full) {
		snprintf(err, errlen, "download url too long");
		goto out;
	}
	curl_easy_setopt(t.curl, CURLOPT_URL, full);
	curl_easy_setopt(t.curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(t.curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(t.curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(t.curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(t.curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(t.curl, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(t.curl, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(t.curl, CURLOPT_TIMEOUT, (long)timeout_s);
	curl_easy_setopt(t.curl, CURLOPT_BUFFERSIZE, (long)RECV_BUFFER);
	rp_agent_tls_setup(t.curl, cfg, pinned(cfg, url, full), &tls);
	curl_easy_setopt(t.curl, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(t.curl, CURLOPT_USERAGENT, "rackpilot-agent");
	curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
	curl_easy_setopt(t.curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(t.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	t.h.md = t.md;
	/* Without the thread, everything is hashed in line. */
	t.apart = pthread_create(&t.h.thread, NULL, hasher_main, &t.h) == 0;
	cc = curl_easy_perform(t.curl);
	if (t.apart) {
		pthread_mutex_lock(&t.h.mu);
		t.h.stop = 1;
		pthread_cond_broadcast(&t.h.cv);
		pthread_mutex_unlock(&t.h.mu);
		pthread_join(t.h.thread, NULL);
	}
	if (cc != CURLE_OK) {
		long code = 0;

		curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &code);
		if (t.stopped)
			snprintf(err, errlen, "download %s: stopped by the writer", url);
		else if (cc == CURLE_HTTP_RETURNED_ERROR)
			snprintf(err, errlen, "download %s: HTTP %ld", url, code);
		else if (cc == CURLE_SSL_PINNEDPUBKEYNOTMATCH) {
			char what[4200];

			snprintf(what, sizeof what, "download %s", url);
			rp_agent_tls_mismatch(cfg, &tls, what, err, errlen);
		} else
			snprintf(err, errlen, "download %s: %s", url,
			         cerr[0] ? cerr : curl_easy_strerror(cc));
		goto out;
	}
	rp_sha256_final(t.md, hex);
	rc = 0;
out:
	curl_easy_cleanup(t.curl);
	rp_sha256_free(t.md);
	return rc;
}

/* The plain sink: every piece written to an fd. */
struct fd_sink {
	struct rp_agent_sink s; /* first: the download sees only this */
	int fd;
	int write_errno;
	uint64_t written;
};

static int
fd_write(struct rp_agent_sink *s, const void *p, size_t n)
{
	struct fd_sink *f = (struct fd_sink *)s;

	if (rp_write_all(f->fd, p, n) < 0) {
		f->write_errno = errno;
		return -1;
	}
	f->written += n;
	return 0;
}

int
rp_agent_download(const struct rp_agent_config *cfg, const char *url, int fd, unsigned timeout_s,
                  char hex[RP_SHA256_HEX], uint64_t *bytes, char *err, size_t errlen)
{
	struct fd_sink f = {.s = {.write = fd_write}, .fd = fd};
	int rc = rp_agent_download_to(cfg, url, timeout_s, &f.s, hex, err, errlen);

	if (rc < 0 && f.write_errno)
		snprintf(err, errlen, "download %s: write failed: %s", url,
		         strerror(f.write_errno));
	*bytes = f.written;
	return rc;
}

int
rp_agent_sha256_valid(const char *s)
{
	int i;

	for (i = 0; i < 64; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return s[64] == '\0';
}
