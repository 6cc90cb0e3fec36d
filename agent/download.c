/* Streaming downloads that hash what they write, so an image is never read twice. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent.h"

#define CONNECT_TIMEOUT_S 10

struct sink {
	int fd;
	struct rp_sha256 *md;
	uint64_t bytes;
	int write_errno;
};

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;

	n *= size;
	if (rp_write_all(s->fd, p, n) < 0) {
		s->write_errno = errno;
		return 0;
	}
	rp_sha256_update(s->md, p, n);
	s->bytes += n;
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
rp_agent_download(const struct rp_agent_config *cfg, const char *url, int fd, unsigned timeout_s,
                  char hex[RP_SHA256_HEX], uint64_t *bytes, char *err, size_t errlen)
{
	struct sink s = {.fd = fd};
	struct rp_agent_tls tls;
	char full[4096], cerr[CURL_ERROR_SIZE] = "";
	CURL *curl = NULL;
	CURLcode cc;
	int rc = -1;

	s.md = rp_sha256_new();
	curl = curl_easy_init();
	if (s.md == NULL || curl == NULL) {
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
	curl_easy_setopt(curl, CURLOPT_URL, full);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)timeout_s);
	rp_agent_tls_setup(curl, cfg, pinned(cfg, url, full), &tls);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "rackpilot-agent");
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	cc = curl_easy_perform(curl);
	if (cc != CURLE_OK) {
		long code = 0;

		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
		if (s.write_errno)
			snprintf(err, errlen, "download %s: write failed: %s", url,
			         strerror(s.write_errno));
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
	rp_sha256_final(s.md, hex);
	rc = 0;
out:
	*bytes = s.bytes;
	curl_easy_cleanup(curl);
	rp_sha256_free(s.md);
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
