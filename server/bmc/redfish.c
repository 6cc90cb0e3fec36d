/*
 * The Redfish driver: libcurl + jansson, DSP0266 as BMCs actually behave.
 * - Session login (X-Auth-Token) with Basic as the fallback when a BMC has no sessions;
 *   one re-login and retry on a 401.
 * - The ComputerSystem, Manager and UpdateService are found from the service root, never
 *   assumed (/Systems/1 is only one vendor's habit).
 * - PATCH carries If-Match with the ETag just read; a 412 re-reads and retries once.
 * - Values are picked from @Redfish.AllowableValues when the BMC lists them.
 * - Sessions and discovered paths are cached per node between handles, so a sweep costs one
 *   GET per node once warm; they are logged out at shutdown.
 * - Each request is retried on its own, within a budget of its own (options retry_tries and
 *   retry_wait_ms), before a job ever sees a failure: a 503 or 429 (the BMC did not act;
 *   Retry-After honoured, capped), a refused connection (nothing was sent), and, for requests
 *   that are safe to repeat only, a reset, an empty answer or a timeout after sending. A POST
 *   that may have acted (a reset, a SimpleUpdate) is never sent again on a lost answer.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "bmc.h"
#include "util/util.h"

#define MAX_BODY (8u << 20)

#define RETRY_WAIT_CAP_MS 10000 /* longest single wait, whatever Retry-After asks */
#define RETRY_FIRST_MS    200   /* first backoff without a Retry-After, doubling */
#define RETRY_FLOOR_MS    50    /* shortest wait, even for Retry-After: 0 */

/* What a handle learns about a BMC; cached per node across handles. */
struct learned {
	char token[512];
	char session[256];  /* session resource, for logout */
	int basic;          /* the BMC has no usable sessions: Basic on every request */
	char sessions[256]; /* collection to log in at */
	char systems[256];
	char managers[256];
	char update[256];
	char system[256]; /* the ComputerSystem this node is */
};

struct cached {
	char node[40];
	char base[320];
	char user[64];
	struct learned l;
	struct cached *next;
};

static struct cached *cache;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

struct rf {
	struct rp_bmc base;
	struct rp_bmc_target t;
	CURL *curl;    /* a new one for every request (renew); NULL when that failed */
	CURLSH *share; /* the connections, kept across those easy handles; may be NULL */
	char base_url[320];
	struct learned l;
	int refused; /* a link was refused: the paths learned are not cached */
};

struct reply {
	long status;
	struct rp_buf body; /* capped at MAX_BODY */
	char etag[160];
	char location[512];
	char token[512];
	char retry_after[64];
	char date[64];
	json_t *json;
};

static void
reply_free(struct reply *r)
{
	rp_buf_free(&r->body);
	json_decref(r->json);
	memset(r, 0, sizeof *r);
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;

	/* Anything but the full count makes libcurl stop with CURLE_WRITE_ERROR. */
	return rp_buf_append(&r->body, p, size * n) < 0 ? 0 : size * n;
}

static void
header(const char *line, size_t n, const char *name, char *out, size_t cap)
{
	size_t k = strlen(name), m;
	const char *v;

	if (n <= k + 1 || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return;
	v = line + k + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	m = n - (size_t)(v - line);
	while (m > 0 && (v[m - 1] == '\r' || v[m - 1] == '\n' || v[m - 1] == ' '))
		m--;
	if (m >= cap)
		m = cap - 1;
	memcpy(out, v, m);
	out[m] = '\0';
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;

	header(p, size * n, "ETag", r->etag, sizeof r->etag);
	header(p, size * n, "Location", r->location, sizeof r->location);
	header(p, size * n, "X-Auth-Token", r->token, sizeof r->token);
	header(p, size * n, "Retry-After", r->retry_after, sizeof r->retry_after);
	header(p, size * n, "Date", r->date, sizeof r->date);
	return size * n;
}

/* The most useful human text of a Redfish error body, with every occurrence of password (a
 * BMC's own words reach job errors and logs: a hostile one must not be able to echo it into
 * them) shown as "***" before it is cut to len. */
static void
error_text(json_t *body, const char *password, char *out, size_t len)
{
	json_t *e = json_object_get(body, "error"), *info;
	const char *m = NULL, *p;
	size_t n = 0, pw = password ? strlen(password) : 0;

	info = json_array_get(json_object_get(e, "@Message.ExtendedInfo"), 0);
	if (info)
		m = json_string_value(json_object_get(info, "Message"));
	if (m == NULL)
		m = json_string_value(json_object_get(e, "message"));
	if (m == NULL)
		m = "no error details";
	for (p = m; *p && n + 1 < len;) {
		if (pw >= 3 && strncmp(p, password, pw) == 0) {
			size_t k = n + 3 < len ? 3 : len - 1 - n;

			memcpy(out + n, "***", k);
			n += k;
			p += pw;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
}

/* ---- Links the BMC gives --------------------------------------------------------------- */

#define LINK_SHOWN 96 /* bytes of a refused link that a message quotes */

/* Scheme, host and port of an http(s) URL; host is not NUL-terminated (brackets kept). */
struct url_origin {
	int https;
	const char *host;
	size_t hostlen;
	unsigned long port;
};

/* The length of the scheme s starts with ("http" of "http://", "javascript" of
 * "javascript:..."), or 0 when it starts with none. */
static size_t
scheme_len(const char *s)
{
	size_t n = 0;

	if (!isalpha((unsigned char)s[0]))
		return 0;
	while (isalnum((unsigned char)s[n]) || s[n] == '+' || s[n] == '-' || s[n] == '.')
		n++;
	return s[n] == ':' ? n : 0;
}

/* Split s, whose scheme is n bytes long, as http[s]://host[:port]: 0 and *rest the first byte
 * after the authority, or -1 with a reason. */
static int
split_origin(const char *s, size_t n, struct url_origin *o, const char **rest, char *reason,
             size_t rlen)
{
	const char *a, *end, *colon, *p;

	if (n == 4 && !strncasecmp(s, "http", 4)) {
		o->https = 0;
	} else if (n == 5 && !strncasecmp(s, "https", 5)) {
		o->https = 1;
	} else {
		snprintf(reason, rlen, "scheme %.*s is not http or https", (int)(n > 16 ? 16 : n),
		         s);
		return -1;
	}
	if (strncmp(s + n, "://", 3) != 0) {
		snprintf(reason, rlen, "no //host after %.*s:", (int)n, s);
		return -1;
	}
	a = s + n + 3;
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(end - a))) {
		snprintf(reason, rlen, "it carries user information");
		return -1;
	}
	if (*a == '[') {
		colon = memchr(a, ']', (size_t)(end - a));
		if (colon == NULL || (colon + 1 != end && colon[1] != ':')) {
			snprintf(reason, rlen, "its IPv6 host is malformed");
			return -1;
		}
		colon++;
	} else {
		colon = memchr(a, ':', (size_t)(end - a));
		if (colon == NULL)
			colon = end;
	}
	o->host = a;
	o->hostlen = (size_t)(colon - a);
	if (o->hostlen == 0) {
		snprintf(reason, rlen, "it has no host");
		return -1;
	}
	o->port = o->https ? 443 : 80;
	if (colon != end) {
		o->port = 0;
		for (p = colon + 1; p < end && isdigit((unsigned char)*p) && p - colon <= 5; p++)
			o->port = o->port * 10 + (unsigned long)(*p - '0');
		if (p != end || p == colon + 1 || o->port == 0 || o->port > 65535) {
			snprintf(reason, rlen, "its port is malformed");
			return -1;
		}
	}
	*rest = end;
	return 0;
}

/* A link as a message may quote it: cut, unprintable bytes as '?', user information hidden. */
static void
link_shown(const char *link, char *out, size_t len)
{
	const char *auth = strstr(link, "://"), *at = NULL, *p;
	size_t n = 0;

	if (auth) {
		const char *a = auth + 3, *end = a + strcspn(a, "/?#");

		for (p = a; p < end; p++)
			if (*p == '@')
				at = p;
		auth = at ? a : NULL;
	}
	for (p = link; *p && n + 4 < len && n < LINK_SHOWN; p++) {
		if (p == auth) {
			memcpy(out + n, "***", 3);
			n += 3;
			p = at - 1;
			continue;
		}
		out[n++] = (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ? '?' : *p;
	}
	if (*p && n + 4 <= len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/* The path (and query) of link on origin o (spelled origin), or NULL with a reason. */
static const char *
link_path(const struct url_origin *o, const char *origin, const char *link, char *reason,
          size_t rlen)
{
	struct url_origin l;
	const char *p, *path = link, *seg;
	size_t n;

	if (strnlen(link, RP_BMC_LINK_MAX + 1) > RP_BMC_LINK_MAX) {
		snprintf(reason, rlen, "it is longer than %d bytes", RP_BMC_LINK_MAX);
		return NULL;
	}
	for (p = link; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == ' ' || c < 0x20 || c == 0x7f || c >= 0x80 || c == '\\') {
			snprintf(reason, rlen, "it contains %s",
			         c == ' '                 ? "a space"
			         : c == '\\'              ? "a backslash"
			         : c >= 0x80              ? "a non-ASCII byte"
			         : c == '\r' || c == '\n' ? "a line break"
			                                  : "a control character");
			return NULL;
		}
	}
	if ((n = scheme_len(link)) > 0) {
		if (split_origin(link, n, &l, &path, reason, rlen) < 0)
			return NULL;
		if (l.https != o->https) {
			snprintf(reason, rlen, "scheme %s is not the BMC's (%s)",
			         l.https ? "https" : "http", origin);
			return NULL;
		}
		if (l.hostlen != o->hostlen || strncasecmp(l.host, o->host, l.hostlen) != 0) {
			snprintf(reason, rlen, "host %.*s is not the BMC's (%s)",
			         (int)(l.hostlen > 64 ? 64 : l.hostlen), l.host, origin);
			return NULL;
		}
		if (l.port != o->port) {
			snprintf(reason, rlen, "port %lu is not the BMC's (%s)", l.port, origin);
			return NULL;
		}
	} else if (link[0] == '/' && link[1] == '/') {
		snprintf(reason, rlen, "a protocol-relative link names another host");
		return NULL;
	} else if (link[0] != '/') {
		snprintf(reason, rlen, "it is neither a path nor a URL on the BMC");
		return NULL;
	}
	/* curl would resolve dot segments: the path sent would not be the one named. */
	for (seg = path; *seg && *seg != '?' && *seg != '#'; seg = p) {
		seg += *seg == '/';
		n = strcspn(seg, "/?#");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			snprintf(reason, rlen, "it has a dot segment");
			return NULL;
		}
		p = seg + n;
	}
	return path;
}

int
rp_bmc_url_resolve(const char *origin, const char *link, char *out, size_t outlen, char *why,
                   size_t whylen)
{
	struct url_origin o;
	const char *rest = NULL, *path;
	char shown[LINK_SHOWN + 8], reason[200];
	size_t n;

	if (origin == NULL || (n = scheme_len(origin)) == 0 ||
	    split_origin(origin, n, &o, &rest, reason, sizeof reason) < 0 || *rest != '\0') {
		snprintf(why, whylen, "the BMC's address %.80s is not http[s]://host[:port]",
		         origin ? origin : "(none)");
		return -1;
	}
	if (link == NULL || link[0] == '\0') {
		snprintf(why, whylen, "the BMC gave an empty link");
		return -1;
	}
	link_shown(link, shown, sizeof shown);
	path = link_path(&o, origin, link, reason, sizeof reason);
	if (path && strlen(origin) + (path[0] != '/') + strlen(path) >= outlen) {
		snprintf(reason, sizeof reason,
		         "it does not fit in %zu bytes with the BMC's address", outlen);
		path = NULL;
	}
	if (path == NULL) {
		snprintf(why, whylen, "BMC link \"%s\" is refused: %s", shown, reason);
		return -1;
	}
	snprintf(out, outlen, "%s%s%s", origin, path[0] == '/' ? "" : "/", path);
	return 0;
}

/* Where a link the BMC gave leads: 0 and the URL on this BMC in url, or -1 with RP_BMC_PROTOCOL
 * for a link anywhere else, before anything is sent. */
static int
resolve(struct rf *h, const char *what, const char *link, char *url, size_t urllen,
        struct rp_bmc_err *err)
{
	char why[240];

	if (rp_bmc_url_resolve(h->base_url, link, url, urllen, why, sizeof why) == 0)
		return 0;
	h->refused = 1;
	return rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s: %s", what, why);
}

/* What a failed exchange allows (see exchange). */
enum again {
	AGAIN_NEVER, /* a permanent failure */
	AGAIN_ANY,   /* nothing was sent: any request may go again */
	AGAIN_SAFE,  /* sent, no answer: only a request that is safe to repeat may go again */
};

/* A new easy handle for the next request, never curl_easy_reset: libcurl 7.88.1 (Debian 12)
 * reads freed memory when a reset handle that has served a request gets certain malformed
 * answers, which any BMC can send (tests/fuzz/README.md, "Findings"). Connections stay open
 * across handles in h->share. 0, or -1 (h->curl NULL) when out of memory. */
static int
renew(struct rf *h)
{
	curl_easy_cleanup(h->curl);
	if ((h->curl = curl_easy_init()) == NULL)
		return -1;
	if (h->share)
		curl_easy_setopt(h->curl, CURLOPT_SHARE, h->share);
	return 0;
}

/* One HTTP exchange, no auth logic, no retries. Transport failures become errors, with what
 * they allow in *again; every HTTP status comes back to the caller in r->status. once: the
 * request must not be repeated, not even by libcurl itself. */
static int
exchange_once(struct rf *h, const char *method, const char *path, const char *ctype,
              const char *body, size_t bodylen, curl_mime *mime, const char *if_match, int auth,
              int once, struct reply *r, enum again *again, struct rp_bmc_err *err)
{
	struct curl_slist *hdrs = NULL;
	char url[1024], line[700];
	CURLcode cc;
	double connect = 0;
	long status = 0;

	memset(r, 0, sizeof *r);
	rp_buf_init(&r->body, MAX_BODY);
	/* Every request of the driver comes through here: nothing reaches another host. */
	if (resolve(h, method, path, url, sizeof url, err) < 0)
		return -1;
	if (h->curl == NULL && renew(h) < 0)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	/* A redirect is an answer like any other, never followed (libcurl's default). */
	curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 0L);
	/* On a kept-alive connection that dies without an answer libcurl sends the request
	 * again by itself, POSTs too: an action that may act once goes on a connection of its
	 * own, where it does not. */
	curl_easy_setopt(h->curl, CURLOPT_FRESH_CONNECT, once ? 1L : 0L);
	curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, (long)h->t.http_timeout_ms);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)(h->t.http_timeout_ms < 5000 ? h->t.http_timeout_ms : 5000));
	curl_easy_setopt(h->curl, CURLOPT_SSL_VERIFYPEER, h->t.tls_verify ? 1L : 0L);
	curl_easy_setopt(h->curl, CURLOPT_SSL_VERIFYHOST, h->t.tls_verify ? 2L : 0L);
	curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	/* Credentials go to the BMC itself, never through a proxy the environment names. */
	curl_easy_setopt(h->curl, CURLOPT_PROXY, "");
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, r);
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	hdrs = curl_slist_append(hdrs, "OData-Version: 4.0");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (auth && h->l.basic) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h->curl, CURLOPT_USERNAME, h->t.username);
		curl_easy_setopt(h->curl, CURLOPT_PASSWORD, h->t.password);
	} else if (auth && h->l.token[0]) {
		snprintf(line, sizeof line, "X-Auth-Token: %s", h->l.token);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (if_match && if_match[0]) {
		snprintf(line, sizeof line, "If-Match: %s", if_match);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (mime) {
		curl_easy_setopt(h->curl, CURLOPT_MIMEPOST, mime);
	} else if (body) {
		snprintf(line, sizeof line, "Content-Type: %s", ctype);
		hdrs = curl_slist_append(hdrs, line);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)bodylen);
	}
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(h->curl);
	curl_slist_free_all(hdrs);
	curl_easy_getinfo(h->curl, CURLINFO_CONNECT_TIME, &connect);
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	/* The request was built with the password: the handle that holds it goes now. A push's
	 * form was made for this handle (curl_mime_init): its caller renews it, then frees the
	 * form. */
	if (mime == NULL)
		renew(h);
	else
		curl_easy_setopt(h->curl, CURLOPT_PASSWORD, "");
	*again = AGAIN_NEVER;
	if (cc != CURLE_OK) {
		/* No answer to hand back: what part of one came goes now (callers free a reply
		 * only when the request succeeded). */
		int toobig = r->body.toobig;

		rp_buf_free(&r->body);
		switch (cc) {
		case CURLE_COULDNT_CONNECT:
			*again = AGAIN_ANY;
			/* fall through */
		case CURLE_COULDNT_RESOLVE_HOST:
			return rp_bmc_fail(err, RP_BMC_UNREACHABLE, "%s %s: %s", method,
			                   h->base_url, curl_easy_strerror(cc));
		case CURLE_OPERATION_TIMEDOUT:
			*again = connect > 0 ? AGAIN_SAFE : AGAIN_ANY;
			return rp_bmc_fail(err, connect > 0 ? RP_BMC_TIMEOUT : RP_BMC_UNREACHABLE,
			                   "%s %s: no answer within %u ms", method, url,
			                   h->t.http_timeout_ms);
		case CURLE_SSL_CONNECT_ERROR:
			/* The handshake failed (a BMC restarting its web server): nothing was sent.
			 */
			*again = AGAIN_ANY;
			return rp_bmc_fail(err, RP_BMC_UNREACHABLE, "%s %s: %s", method,
			                   h->base_url, curl_easy_strerror(cc));
		case CURLE_GOT_NOTHING:
		case CURLE_RECV_ERROR:
		case CURLE_SEND_ERROR:
		case CURLE_PARTIAL_FILE:
			/* The connection closed or reset after the request went out: it may have
			 * acted. */
			*again = AGAIN_SAFE;
			return rp_bmc_fail(err, RP_BMC_TIMEOUT, "%s %s: %s", method, url,
			                   curl_easy_strerror(cc));
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
			return rp_bmc_fail(
			        err, RP_BMC_TLS,
			        "%s: TLS certificate not trusted (%s); set bmc.tls_verify false "
			        "only for a BMC with a self-signed certificate",
			        h->base_url, curl_easy_strerror(cc));
		case CURLE_WRITE_ERROR:
			if (toobig)
				return rp_bmc_fail(err, RP_BMC_PROTOCOL,
				                   "%s %s: answer over %u bytes", method, url,
				                   MAX_BODY);
			/* fall through */
		default:
			return rp_bmc_fail(err, connect > 0 ? RP_BMC_TIMEOUT : RP_BMC_UNREACHABLE,
			                   "%s %s: %s", method, url, curl_easy_strerror(cc));
		}
	}
	r->status = status;
	if (r->body.len > 0)
		r->json = json_loadb(r->body.data, r->body.len, 0, NULL);
	return 0;
}

/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") in seconds since the epoch, or -1. */
static int64_t
http_date(const char *s)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	struct tm tm = {0};
	char mon[4], zone[4];
	const char *m;
	int n = 0;

	if (sscanf(s, "%*3s, %d %3s %d %d:%d:%d %3s%n", &tm.tm_mday, mon, &tm.tm_year, &tm.tm_hour,
	           &tm.tm_min, &tm.tm_sec, zone, &n) != 7 ||
	    s[n] != '\0' || strcmp(zone, "GMT") != 0 || strlen(mon) != 3 ||
	    (m = strstr(months, mon)) == NULL || (m - months) % 3 != 0)
		return -1;
	tm.tm_mon = (int)((m - months) / 3);
	tm.tm_year -= 1900;
	return (int64_t)timegm(&tm);
}

/* The wait a reply's Retry-After asks for in ms (capped), or -1 when it gives none that can be
 * read. An HTTP-date counts from the reply's own Date when it has one: a BMC whose clock is off
 * still means "in N seconds". */
static long
retry_after_ms(const struct reply *r)
{
	const char *v = r->retry_after;
	int64_t at, base;
	char *end;
	unsigned long sec;

	if (v[0] == '\0')
		return -1;
	if (isdigit((unsigned char)v[0])) {
		errno = 0;
		sec = strtoul(v, &end, 10);
		if (*end != '\0' || errno)
			return -1;
		return sec >= RETRY_WAIT_CAP_MS / 1000 ? RETRY_WAIT_CAP_MS : (long)sec * 1000;
	}
	if ((at = http_date(v)) < 0)
		return -1;
	base = r->date[0] ? http_date(r->date) : -1;
	if (base < 0)
		base = rp_time_now_ms() / 1000;
	if (at <= base)
		return 0;
	return at - base >= RETRY_WAIT_CAP_MS / 1000 ? RETRY_WAIT_CAP_MS : (long)(at - base) * 1000;
}

/* 0..span, for jitter: a thread's own xorshift, so that BMCs' retries do not fall in step. */
static unsigned
jitter(unsigned span)
{
	static __thread uint64_t s;

	if (s == 0)
		s = (uint64_t)rp_time_mono_ns() ^ (uint64_t)(uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return (unsigned)(s % ((uint64_t)span + 1));
}

static void
pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One request, retried on its own (see the top of the file) until it gets an answer, for at
 * most retry_tries tries and while the next wait still ends within retry_wait_ms of its first
 * try. A 503/429 on every try is RP_BMC_BUSY; otherwise the last transport error, both saying
 * how many tries over how long. Like exchange_once otherwise. */
static int
exchange(struct rf *h, const char *method, const char *path, const char *ctype, const char *body,
         size_t bodylen, curl_mime *mime, const char *if_match, int auth, struct reply *r,
         struct rp_bmc_err *err)
{
	/* Safe to repeat: reads, a PATCH that If-Match guards (a second one is refused, never
	 * applied twice), a logout, and a login (at worst one more session). */
	int safe = !strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "DELETE") ||
	           (!strcmp(method, "PATCH") && if_match && if_match[0]) ||
	           (!strcmp(method, "POST") && h->l.sessions[0] && !strcmp(path, h->l.sessions));
	unsigned max = h->t.retry_tries ? h->t.retry_tries : 1, tries;
	int64_t t0 = rp_time_mono_ns();

	for (tries = 1;; tries++) {
		enum again again = AGAIN_NEVER;
		long wait = -1, status = 0, elapsed;

		if (exchange_once(h, method, path, ctype, body, bodylen, mime, if_match, auth,
		                  !safe, r, &again, err) == 0) {
			if (r->status != 503 && r->status != 429)
				return 0;
			status = r->status;
			wait = retry_after_ms(r);
		} else if (again == AGAIN_NEVER || (again == AGAIN_SAFE && !safe)) {
			return -1;
		}
		if (wait < 0)
			wait = tries >= 7 ? RETRY_WAIT_CAP_MS : (long)RETRY_FIRST_MS << (tries - 1);
		if (wait < RETRY_FLOOR_MS)
			wait = RETRY_FLOOR_MS;
		wait += jitter((unsigned)(wait / 4));
		if (wait > RETRY_WAIT_CAP_MS)
			wait = RETRY_WAIT_CAP_MS;
		elapsed = (long)((rp_time_mono_ns() - t0) / 1000000);
		if (tries >= max || elapsed + wait > (long)h->t.retry_wait_ms) {
			if (status) {
				char msg[120];

				error_text(r->json, h->t.password, msg, sizeof msg);
				reply_free(r);
				return rp_bmc_fail(
				        err, RP_BMC_BUSY,
				        "%s %s: HTTP %ld (%s) on each of %u tries over %ld ms",
				        method, path, status, msg, tries, elapsed);
			}
			{
				char last[sizeof err->msg];

				snprintf(last, sizeof last, "%s", err->msg);
				return rp_bmc_fail(err, err->kind, "%s (%u tries over %ld ms)",
				                   last, tries, elapsed);
			}
		}
		if (status)
			reply_free(r);
		pause_ms(wait);
	}
}

/* A path out of an {"@odata.id": ...} link, or "" */
static const char *
link(json_t *o)
{
	const char *s = json_string_value(json_object_get(o, "@odata.id"));

	return s ? s : "";
}

/* Bounded copy; a value too long for its field is cut (paths and tokens have hard caps). */
static void
copy(char *dst, size_t n, const char *src)
{
	size_t l = src ? strnlen(src, n - 1) : 0;

	memmove(dst, src ? src : "", l);
	dst[l] = '\0';
}

/* Service root (readable without credentials): where sessions, systems and the update
 * service live. */
static int
discover_root(struct rf *h, struct rp_bmc_err *err)
{
	struct reply r;
	json_t *links;

	if (h->l.systems[0])
		return 0;
	if (exchange(h, "GET", "/redfish/v1/", NULL, NULL, 0, NULL, NULL, 0, &r, err) < 0)
		return -1;
	if (r.status != 200 || !json_is_object(r.json)) {
		long status = r.status; /* reply_free clears it */

		reply_free(&r);
		/* A BMC that is starting or overloaded answers 5xx here too: that passes. */
		if (status >= 500)
			return rp_bmc_fail(err, RP_BMC_BUSY,
			                   "%s: the Redfish service root answered HTTP %ld",
			                   h->base_url, status);
		return rp_bmc_fail(err, status == 404 ? RP_BMC_UNSUPPORTED : RP_BMC_PROTOCOL,
		                   "%s has no Redfish service root (HTTP %ld%s)", h->base_url,
		                   status, status == 200 ? ", not JSON" : "");
	}
	links = json_object_get(r.json, "Links");
	copy(h->l.sessions, sizeof h->l.sessions, link(json_object_get(links, "Sessions")));
	if (h->l.sessions[0] == '\0')
		copy(h->l.sessions, sizeof h->l.sessions, "/redfish/v1/SessionService/Sessions");
	copy(h->l.systems, sizeof h->l.systems, link(json_object_get(r.json, "Systems")));
	copy(h->l.managers, sizeof h->l.managers, link(json_object_get(r.json, "Managers")));
	copy(h->l.update, sizeof h->l.update, link(json_object_get(r.json, "UpdateService")));
	reply_free(&r);
	if (h->l.systems[0] == '\0')
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: service root lists no Systems",
		                   h->base_url);
	return 0;
}

static int
login(struct rf *h, struct rp_bmc_err *err)
{
	struct reply r;
	json_t *cred;
	char *body, url[1024];
	int rc;

	h->l.token[0] = h->l.session[0] = '\0';
	h->l.basic = 0;
	cred = json_pack("{s:s, s:s}", "UserName", h->t.username, "Password", h->t.password);
	body = json_dumps(cred, JSON_COMPACT);
	json_decref(cred);
	if (body == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	rc = exchange(h, "POST", h->l.sessions, "application/json", body, strlen(body), NULL, NULL,
	              0, &r, err);
	explicit_bzero(body, strlen(body));
	free(body);
	if (rc < 0)
		return -1;
	if ((r.status == 200 || r.status == 201) && r.token[0]) {
		/* The logout sends the token to the session's Location: it must be on this BMC. */
		if (r.location[0] &&
		    resolve(h, "session login", r.location, url, sizeof url, err) < 0) {
			reply_free(&r);
			return -1;
		}
		copy(h->l.token, sizeof h->l.token, r.token);
		copy(h->l.session, sizeof h->l.session, r.location);
		reply_free(&r);
		return 0;
	}
	if (r.status == 401 || r.status == 403) {
		reply_free(&r);
		return rp_bmc_fail(err, RP_BMC_AUTH, "%s refused the credentials for user '%s'",
		                   h->base_url, h->t.username);
	}
	if (r.status == 503) {
		reply_free(&r);
		return rp_bmc_fail(err, RP_BMC_BUSY, "%s: session service unavailable (503)",
		                   h->base_url);
	}
	/* No session service (404/405/501, or no token): Basic on every request. */
	reply_free(&r);
	h->l.basic = 1;
	return 0;
}

/* An authenticated request: log in when needed, and once more on a 401. */
static int
call(struct rf *h, const char *method, const char *path, json_t *body, const char *if_match,
     struct reply *r, struct rp_bmc_err *err)
{
	char *text = NULL;
	int tries, rc = -1;

	if (discover_root(h, err) < 0)
		return -1;
	if (body && (text = json_dumps(body, JSON_COMPACT)) == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	for (tries = 0; tries < 2; tries++) {
		if (!h->l.basic && h->l.token[0] == '\0' && login(h, err) < 0)
			goto out;
		if (exchange(h, method, path, "application/json", text, text ? strlen(text) : 0,
		             NULL, if_match, 1, r, err) < 0)
			goto out;
		if (r->status != 401)
			break;
		reply_free(r);
		if (tries == 1 || h->l.basic) {
			rp_bmc_fail(err, RP_BMC_AUTH, "%s refused the credentials for user '%s'",
			            h->base_url, h->t.username);
			goto out;
		}
		/* The session expired or the BMC restarted: log in again, once. */
		h->l.token[0] = '\0';
	}
	rc = 0;
out:
	free(text);
	return rc;
}

/* Map a non-success HTTP status to an error. */
static int
http_error(struct rf *h, const char *what, struct reply *r, struct rp_bmc_err *err)
{
	char msg[200];
	enum rp_bmc_errkind k;

	error_text(r->json, h->t.password, msg, sizeof msg);
	switch (r->status) {
	case 503:
	case 409:
	case 429:
		k = RP_BMC_BUSY;
		break;
	case 404:
	case 405:
	case 501:
		k = RP_BMC_UNSUPPORTED;
		break;
	case 401:
	case 403:
		k = RP_BMC_AUTH;
		break;
	case 400:
	case 412:
	case 428:
		k = RP_BMC_REJECTED;
		break;
	default:
		k = r->status >= 500 ? RP_BMC_BUSY : RP_BMC_PROTOCOL;
	}
	return rp_bmc_fail(err, k, "%s on %s: HTTP %ld: %s", what, h->base_url, r->status, msg);
}

/* GET that must answer 200 with a JSON object; *out owned by the caller. */
static int
get(struct rf *h, const char *path, json_t **out, char *etag, size_t etaglen,
    struct rp_bmc_err *err)
{
	struct reply r;

	if (call(h, "GET", path, NULL, NULL, &r, err) < 0)
		return -1;
	if (r.status != 200 || !json_is_object(r.json)) {
		int rc = r.status == 200 ? rp_bmc_fail(err, RP_BMC_PROTOCOL,
		                                       "GET %s: not a JSON object", path)
		                         : http_error(h, "GET", &r, err);

		reply_free(&r);
		return rc;
	}
	if (etag)
		copy(etag, etaglen,
		     r.etag[0] ? r.etag
		               : json_string_value(json_object_get(r.json, "@odata.etag")));
	*out = json_incref(r.json);
	reply_free(&r);
	return 0;
}

/* The first member of a collection, or the one whose path ends in /id. */
static int
member(struct rf *h, const char *collection, const char *id, char *out, size_t len,
       struct rp_bmc_err *err)
{
	json_t *c = NULL, *m;
	size_t i;
	int rc = -1;

	if (get(h, collection, &c, NULL, 0, err) < 0)
		return -1;
	/* Iterate Members; a Members@odata.count that disagrees is a known vendor bug. */
	json_array_foreach(json_object_get(c, "Members"), i, m)
	{
		const char *p = link(m), *slash = strrchr(p, '/');

		if (id == NULL || id[0] == '\0' || (slash && !strcmp(slash + 1, id))) {
			copy(out, len, p);
			rc = 0;
			break;
		}
	}
	json_decref(c);
	if (rc < 0)
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: no member%s%s in %s", h->base_url,
		            id && id[0] ? " " : "", id && id[0] ? id : "", collection);
	return rc;
}

static int
system_path(struct rf *h, struct rp_bmc_err *err)
{
	if (h->l.system[0])
		return 0;
	if (discover_root(h, err) < 0)
		return -1;
	return member(h, h->l.systems, h->t.system_id, h->l.system, sizeof h->l.system, err);
}

static struct rp_bmc *
rf_open(const struct rp_bmc_target *t, struct rp_bmc_err *err)
{
	struct rf *h = calloc(1, sizeof *h);
	struct cached *c;

	if (h == NULL || (h->share = curl_share_init()) == NULL ||
	    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
	    renew(h) < 0) {
		if (h)
			curl_share_cleanup(h->share);
		free(h);
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		return NULL;
	}
	h->base.ops = &rp_bmc_redfish_ops;
	h->t = *t;
	snprintf(h->base_url, sizeof h->base_url, strchr(t->host, ':') ? "%s://[%s]" : "%s://%s",
	         t->scheme, t->host);
	if (t->port) {
		size_t n = strlen(h->base_url);

		snprintf(h->base_url + n, sizeof h->base_url - n, ":%u", t->port);
	}
	pthread_mutex_lock(&cache_mu);
	for (c = cache; c; c = c->next) {
		if (!strcmp(c->node, t->node) && !strcmp(c->base, h->base_url) &&
		    !strcmp(c->user, t->username)) {
			h->l = c->l;
			break;
		}
	}
	pthread_mutex_unlock(&cache_mu);
	return &h->base;
}

static void
rf_close(struct rp_bmc *b)
{
	struct rf *h = (struct rf *)b;
	struct cached *c;

	if (h == NULL)
		return;
	if (h->t.node[0]) {
		pthread_mutex_lock(&cache_mu);
		for (c = cache; c; c = c->next)
			if (!strcmp(c->node, h->t.node))
				break;
		if (c == NULL && (c = calloc(1, sizeof *c)) != NULL) {
			copy(c->node, sizeof c->node, h->t.node);
			c->next = cache;
			cache = c;
		}
		if (c) {
			copy(c->base, sizeof c->base, h->base_url);
			copy(c->user, sizeof c->user, h->t.username);
			c->l = h->l;
			/* The BMC named a link elsewhere: find everything again next time. */
			if (h->refused) {
				c->l.sessions[0] = c->l.systems[0] = c->l.managers[0] = '\0';
				c->l.update[0] = c->l.system[0] = '\0';
			}
		}
		pthread_mutex_unlock(&cache_mu);
	}
	curl_easy_cleanup(h->curl);
	curl_share_cleanup(h->share);
	explicit_bzero(h->t.password, sizeof h->t.password);
	free(h);
}

static enum rp_power
power_of(json_t *sys)
{
	const char *p = json_string_value(json_object_get(sys, "PowerState"));

	if (p && !strcmp(p, "On"))
		return RP_POWER_ON;
	if (p && !strcmp(p, "Off"))
		return RP_POWER_OFF;
	return RP_POWER_UNKNOWN;
}

static int
rf_power_get(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	*out = power_of(sys);
	json_decref(sys);
	return 0;
}

/* 1 when value is allowed by the list (or there is no list to go by). */
static int
allowed(json_t *list, const char *value)
{
	json_t *v;
	size_t i;

	if (!json_is_array(list))
		return 1;
	json_array_foreach(list, i, v)
	{
		if (json_is_string(v) && !strcmp(json_string_value(v), value))
			return 1;
	}
	return 0;
}

static int
rf_power_set(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL, *act, *values, *body;
	const char *target, *type = NULL;
	char path[512];
	struct reply r;
	enum rp_power now, want = RP_POWER_UNKNOWN;
	int rc = -1;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	act = json_object_get(json_object_get(sys, "Actions"), "#ComputerSystem.Reset");
	target = json_string_value(json_object_get(act, "target"));
	values = json_object_get(act, "ResetType@Redfish.AllowableValues");
	now = power_of(sys);
	if (target == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		            "%s: system has no ComputerSystem.Reset action", h->base_url);
		goto out;
	}
	copy(path, sizeof path, target);
	switch (a) {
	case RP_POWER_ACT_ON:
		type = allowed(values, "On") ? "On" : allowed(values, "ForceOn") ? "ForceOn" : NULL;
		want = RP_POWER_ON;
		break;
	case RP_POWER_ACT_OFF:
		type = allowed(values, "ForceOff") ? "ForceOff" : NULL;
		want = RP_POWER_OFF;
		break;
	case RP_POWER_ACT_SOFT_OFF:
		type = allowed(values, "GracefulShutdown") ? "GracefulShutdown" : NULL;
		break;
	case RP_POWER_ACT_CYCLE:
		type = allowed(values, "PowerCycle")     ? "PowerCycle"
		       : allowed(values, "ForceRestart") ? "ForceRestart"
		                                         : NULL;
		break;
	case RP_POWER_ACT_RESET:
		type = allowed(values, "ForceRestart") ? "ForceRestart" : NULL;
		break;
	}
	if (type == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		            "%s does not offer a reset type for this action", h->base_url);
		goto out;
	}
	body = json_pack("{s:s}", "ResetType", type);
	rc = call(h, "POST", path, body, NULL, &r, err);
	json_decref(body);
	if (rc < 0)
		goto out;
	rc = -1;
	if (r.status == 200 || r.status == 202 || r.status == 204) {
		rc = 0;
	} else if (r.status == 409 && want != RP_POWER_UNKNOWN && now == want) {
		/* Some BMCs answer 409 for "already in that state": that is success. */
		rc = 0;
	} else {
		http_error(h, type, &r, err);
	}
	reply_free(&r);
out:
	json_decref(sys);
	return rc;
}

static int
rf_boot_get(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL, *boot;
	const char *tgt, *en, *mode;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	boot = json_object_get(sys, "Boot");
	tgt = json_string_value(json_object_get(boot, "BootSourceOverrideTarget"));
	en = json_string_value(json_object_get(boot, "BootSourceOverrideEnabled"));
	mode = json_string_value(json_object_get(boot, "BootSourceOverrideMode"));
	memset(out, 0, sizeof *out);
	if (en == NULL || !strcmp(en, "Disabled") || tgt == NULL || !strcmp(tgt, "None"))
		out->device = RP_BOOT_NONE;
	else if (!strcmp(tgt, "Pxe"))
		out->device = RP_BOOT_PXE;
	else if (!strcmp(tgt, "Hdd"))
		out->device = RP_BOOT_DISK;
	else
		out->device = RP_BOOT_OTHER;
	out->persistent = en && !strcmp(en, "Continuous");
	out->uefi = mode == NULL ? -1 : !strcmp(mode, "UEFI");
	json_decref(sys);
	return 0;
}

/* PATCH with the ETag just read; on 412 read again and retry once. */
static int
patch(struct rf *h, const char *path, json_t *body, const char *what, struct rp_bmc_err *err)
{
	char etag[160] = "";
	json_t *cur = NULL;
	struct reply r;
	int tries, rc = -1;

	for (tries = 0; tries < 2; tries++) {
		if (get(h, path, &cur, etag, sizeof etag, err) < 0)
			return -1;
		json_decref(cur);
		cur = NULL;
		if (call(h, "PATCH", path, body, etag, &r, err) < 0)
			return -1;
		if (r.status == 412 && tries == 0) {
			reply_free(&r);
			continue;
		}
		if (r.status == 200 || r.status == 202 || r.status == 204)
			rc = 0;
		else
			http_error(h, what, &r, err);
		reply_free(&r);
		break;
	}
	return rc;
}

static int
rf_boot_set(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL, *boot, *body;
	const char *target = want->device == RP_BOOT_PXE ? "Pxe" : "Hdd";
	int rc;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	boot = json_object_get(sys, "Boot");
	if (!allowed(json_object_get(boot, "BootSourceOverrideTarget@Redfish.AllowableValues"),
	             target)) {
		json_decref(sys);
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s does not allow boot target %s",
		                   h->base_url, target);
	}
	json_decref(sys);
	body = json_pack("{s:{s:s, s:s, s:s}}", "Boot", "BootSourceOverrideTarget", target,
	                 "BootSourceOverrideEnabled", want->persistent ? "Continuous" : "Once",
	                 "BootSourceOverrideMode", want->uefi ? "UEFI" : "Legacy");
	rc = patch(h, h->l.system, body, "set boot override", err);
	if (rc < 0 && err->kind == RP_BMC_REJECTED) {
		/* Some BMCs refuse Mode together with Target: set them one at a time. */
		json_t *mode = json_pack("{s:{s:s}}", "Boot", "BootSourceOverrideMode",
		                         want->uefi ? "UEFI" : "Legacy");

		json_object_del(json_object_get(body, "Boot"), "BootSourceOverrideMode");
		rc = patch(h, h->l.system, body, "set boot override", err);
		if (rc == 0)
			rc = patch(h, h->l.system, mode, "set boot mode", err);
		json_decref(mode);
	}
	json_decref(body);
	return rc;
}

static int
rf_identity(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	struct rp_bmc_identity id = {0};
	json_t *sys = NULL, *mgr = NULL, *by;
	char mpath[256] = "";

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	copy(id.serial, sizeof id.serial, json_string_value(json_object_get(sys, "SerialNumber")));
	copy(id.uuid, sizeof id.uuid, json_string_value(json_object_get(sys, "UUID")));
	copy(id.manufacturer, sizeof id.manufacturer,
	     json_string_value(json_object_get(sys, "Manufacturer")));
	copy(id.model, sizeof id.model, json_string_value(json_object_get(sys, "Model")));
	/* The manager of this system, else the first manager. */
	by = json_array_get(json_object_get(json_object_get(sys, "Links"), "ManagedBy"), 0);
	copy(mpath, sizeof mpath, link(by));
	json_decref(sys);
	if (mpath[0] == '\0' && h->l.managers[0])
		member(h, h->l.managers, NULL, mpath, sizeof mpath, err);
	if (mpath[0] && get(h, mpath, &mgr, NULL, 0, err) == 0) {
		copy(id.bmc_firmware, sizeof id.bmc_firmware,
		     json_string_value(json_object_get(mgr, "FirmwareVersion")));
		json_decref(mgr);
	}
	*out = id;
	return 0;
}

static int
rf_bios_get(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL, *bios = NULL, *pending = NULL, *settings, *res;
	const char *bpath, *spath;
	int rc = -1;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	bpath = link(json_object_get(sys, "Bios"));
	if (bpath[0] == '\0') {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: system has no Bios resource",
		            h->base_url);
		goto out;
	}
	if (get(h, bpath, &bios, NULL, 0, err) < 0)
		goto out;
	settings = json_object_get(bios, "@Redfish.Settings");
	spath = link(json_object_get(settings, "SettingsObject"));
	if (spath[0] && get(h, spath, &pending, NULL, 0, err) < 0)
		goto out;
	{
		json_t *a = json_object_get(bios, "Attributes");
		json_t *p = json_object_get(pending, "Attributes");
		json_t *t = json_object_get(settings, "SupportedApplyTimes");

		res = json_pack("{s:o, s:o, s:s?, s:o, s:s?}", "attributes",
		                a ? json_incref(a) : json_object(), "pending",
		                p ? json_incref(p) : json_object(), "registry",
		                json_string_value(json_object_get(bios, "AttributeRegistry")),
		                "apply_times", t ? json_incref(t) : json_array(), "settings",
		                spath[0] ? spath : NULL);
	}
	*out = res;
	rc = 0;
out:
	json_decref(sys);
	json_decref(bios);
	json_decref(pending);
	return rc;
}

static int
rf_bios_set(struct rp_bmc *b, json_t *attributes, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *info = NULL, *body;
	const char *spath;
	int rc;

	if (rf_bios_get(b, &info, err) < 0)
		return -1;
	spath = json_string_value(json_object_get(info, "settings"));
	if (spath == NULL) {
		json_decref(info);
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: Bios has no settings object",
		                   h->base_url);
	}
	body = json_pack("{s:O}", "Attributes", attributes);
	/* Only send an apply time the BMC lists; some reject the annotation outright. */
	if (allowed(json_object_get(info, "apply_times"), "OnReset") &&
	    json_array_size(json_object_get(info, "apply_times")) > 0)
		json_object_set_new(body, "@Redfish.SettingsApplyTime",
		                    json_pack("{s:s}", "ApplyTime", "OnReset"));
	rc = patch(h, spath, body, "stage BIOS settings", err);
	json_decref(body);
	json_decref(info);
	return rc;
}

/* One registry entry in our shape; NULL for entries without a name. */
static json_t *
registry_entry(json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "AttributeName"));
	const char *type = json_string_value(json_object_get(e, "Type"));
	json_t *out, *v, *values;
	size_t i;

	if (name == NULL)
		return NULL;
	out = json_pack("{s:s, s:s, s:b}", "name", name, "type", type ? type : "String",
	                "read_only",
	                json_is_true(json_object_get(e, "ReadOnly")) ||
	                        json_is_true(json_object_get(e, "GrayOut")));
	if ((v = json_object_get(e, "Value")) != NULL && json_is_array(v)) {
		values = json_array();
		json_array_foreach(v, i, e)
		{
			const char *vn = json_string_value(json_object_get(e, "ValueName"));

			if (vn)
				json_array_append_new(values, json_string(vn));
		}
		json_object_set_new(out, "values", values);
	}
	if (json_is_number(v = json_object_get(e, "LowerBound")))
		json_object_set(out, "lower", v);
	if (json_is_number(v = json_object_get(e, "UpperBound")))
		json_object_set(out, "upper", v);
	if (json_is_integer(v = json_object_get(e, "MaxLength")))
		json_object_set(out, "max_length", v);
	return out;
}

static int
rf_bios_registry(struct rp_bmc *b, const char *registry, json_t **out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *root = NULL, *coll = NULL, *file = NULL, *body = NULL, *m, *loc, *list = NULL;
	const char *rpath, *uri = NULL;
	char fpath[512] = "";
	size_t i;
	int rc = -1;

	if (get(h, "/redfish/v1", &root, NULL, 0, err) < 0)
		return -1;
	rpath = link(json_object_get(root, "Registries"));
	if (rpath[0] == '\0') {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no Registries", h->base_url);
		goto out;
	}
	if (get(h, rpath, &coll, NULL, 0, err) < 0)
		goto out;
	/* The registry file is the member named after the registry (its Id, or the Registry
	 * it holds); vendors differ in which they match. */
	json_array_foreach(json_object_get(coll, "Members"), i, m)
	{
		const char *p = link(m), *slash = strrchr(p, '/');

		if (slash && !strcmp(slash + 1, registry)) {
			copy(fpath, sizeof fpath, p);
			break;
		}
	}
	if (fpath[0] == '\0') {
		json_array_foreach(json_object_get(coll, "Members"), i, m)
		{
			json_t *f = NULL;

			if (get(h, link(m), &f, NULL, 0, err) < 0)
				goto out;
			if (!strcmp(json_string_value(json_object_get(f, "Registry")) ?: "",
			            registry) ||
			    !strcmp(json_string_value(json_object_get(f, "Id")) ?: "", registry)) {
				file = f;
				break;
			}
			json_decref(f);
		}
	} else if (get(h, fpath, &file, NULL, 0, err) < 0)
		goto out;
	if (file == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s serves no registry %s", h->base_url,
		            registry);
		goto out;
	}
	/* Prefer the English copy; any Uri will do otherwise. */
	json_array_foreach(json_object_get(file, "Location"), i, loc)
	{
		const char *u = json_string_value(json_object_get(loc, "Uri"));
		const char *lang = json_string_value(json_object_get(loc, "Language"));

		if (u && (uri == NULL || (lang && !strncmp(lang, "en", 2))))
			uri = u;
	}
	if (uri == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: registry %s has no Location Uri",
		            h->base_url, registry);
		goto out;
	}
	if (get(h, uri, &body, NULL, 0, err) < 0)
		goto out;
	list = json_array();
	json_array_foreach(json_object_get(json_object_get(body, "RegistryEntries"), "Attributes"),
	                   i, m)
	{
		json_t *e = registry_entry(m);

		if (e)
			json_array_append_new(list, e);
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	json_decref(root);
	json_decref(coll);
	json_decref(file);
	json_decref(body);
	json_decref(list);
	return rc;
}

static int
rf_firmware_inventory(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *us = NULL, *inv = NULL, *m, *list = json_array();
	const char *ipath;
	size_t i;
	int rc = -1;

	if (discover_root(h, err) < 0)
		goto out;
	if (h->l.update[0] == '\0') {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no UpdateService", h->base_url);
		goto out;
	}
	if (get(h, h->l.update, &us, NULL, 0, err) < 0)
		goto out;
	ipath = link(json_object_get(us, "FirmwareInventory"));
	if (ipath[0] == '\0' || get(h, ipath, &inv, NULL, 0, err) < 0) {
		if (ipath[0] == '\0')
			rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no FirmwareInventory",
			            h->base_url);
		goto out;
	}
	json_array_foreach(json_object_get(inv, "Members"), i, m)
	{
		json_t *sw = NULL;

		if (get(h, link(m), &sw, NULL, 0, err) < 0)
			goto out;
		json_array_append_new(
		        list,
		        json_pack("{s:s?, s:s, s:s?, s:s?, s:b}", "component",
		                  json_string_value(json_object_get(sw, "Id")), "id", link(m),
		                  "name", json_string_value(json_object_get(sw, "Name")), "version",
		                  json_string_value(json_object_get(sw, "Version")), "updateable",
		                  json_is_true(json_object_get(sw, "Updateable"))));
		json_decref(sw);
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	json_decref(us);
	json_decref(inv);
	json_decref(list);
	return rc;
}

static int
rf_firmware_update(struct rp_bmc *b, const char *image_uri, const char *local_file, json_t *targets,
                   char *task, size_t tasklen, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *us = NULL, *body = NULL;
	struct reply r = {0};
	const char *mon;
	char url[1024];
	int rc = -1;

	if (discover_root(h, err) < 0)
		return -1;
	if (h->l.update[0] == '\0')
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no UpdateService", h->base_url);
	if (get(h, h->l.update, &us, NULL, 0, err) < 0)
		return -1;
	if (local_file) {
		const char *push = json_string_value(json_object_get(us, "MultipartHttpPushUri"));
		curl_mime *mime;
		curl_mimepart *part;
		char *params;
		FILE *fw;
		int tries;

		if (push == NULL) {
			rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no MultipartHttpPushUri",
			            h->base_url);
			goto out;
		}
		/* curl would fail reading the form's file part mid-request, which reads as "no
		 * answer after sending" (it may have acted): an image that cannot be read is said
		 * before anything is sent. */
		if ((fw = fopen(local_file, "rb")) == NULL) {
			rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
			            "cannot read the image %s: %s (nothing was sent)", local_file,
			            strerror(errno));
			goto out;
		}
		fclose(fw);
		body = json_object();
		if (targets)
			json_object_set(body, "Targets", targets);
		params = json_dumps(body, JSON_COMPACT);
		for (tries = 0; tries < 2; tries++) {
			if (!h->l.basic && h->l.token[0] == '\0' && login(h, err) < 0)
				break;
			mime = curl_mime_init(h->curl);
			part = curl_mime_addpart(mime);
			curl_mime_name(part, "UpdateParameters");
			curl_mime_type(part, "application/json");
			curl_mime_data(part, params, CURL_ZERO_TERMINATED);
			part = curl_mime_addpart(mime);
			curl_mime_name(part, "UpdateFile");
			curl_mime_type(part, "application/octet-stream");
			curl_mime_filedata(part, local_file);
			rc = exchange(h, "POST", push, NULL, NULL, 0, mime, NULL, 1, &r, err);
			/* The handle the form was made for first, then the form. */
			renew(h);
			curl_mime_free(mime);
			if (rc < 0 || r.status != 401 || h->l.basic)
				break;
			reply_free(&r);
			h->l.token[0] = '\0';
			rc = -1;
		}
		free(params);
		if (rc < 0)
			goto out;
	} else {
		const char *target = json_string_value(
		        json_object_get(json_object_get(json_object_get(us, "Actions"),
		                                        "#UpdateService.SimpleUpdate"),
		                        "target"));

		if (target == NULL) {
			rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no SimpleUpdate action",
			            h->base_url);
			goto out;
		}
		body = json_pack("{s:s}", "ImageURI", image_uri);
		if (targets)
			json_object_set(body, "Targets", targets);
		if (call(h, "POST", target, body, NULL, &r, err) < 0)
			goto out;
	}
	rc = -1;
	if (r.status != 202 && r.status != 200 && r.status != 201) {
		http_error(h, "firmware update", &r, err);
		goto out;
	}
	/* A task monitor in Location, or at least the Task in the body. */
	mon = r.location[0] ? r.location : link(r.json);
	if (mon[0] == '\0') {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s started an update without a task to follow",
		            h->base_url);
		goto out;
	}
	/* Polled with the token later on: only a task on this BMC is one to follow. */
	if (resolve(h, "update started; its task", mon, url, sizeof url, err) < 0)
		goto out;
	copy(task, tasklen, mon);
	rc = 0;
out:
	reply_free(&r);
	json_decref(us);
	json_decref(body);
	return rc;
}

static int
rf_task_poll(struct rp_bmc *b, const char *task, int *done, int *ok, json_t **status,
             struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	struct reply r;
	const char *state, *health;

	if (call(h, "GET", task, NULL, NULL, &r, err) < 0)
		return -1;
	*done = *ok = 0;
	*status = r.json ? json_incref(r.json) : NULL;
	state = json_string_value(json_object_get(r.json, "TaskState"));
	health = json_string_value(json_object_get(r.json, "TaskStatus"));
	if (r.status == 202) {
		/* Still running (the monitor answers 202 until the end). */
	} else if (r.status == 204 || (r.status == 200 && state == NULL)) {
		*done = *ok = 1;
	} else if (r.status == 200) {
		if (!strcmp(state, "Completed")) {
			*done = 1;
			*ok = health == NULL || strcmp(health, "Critical") != 0;
		} else if (!strcmp(state, "Exception") || !strcmp(state, "Killed") ||
		           !strcmp(state, "Cancelled")) {
			*done = 1;
		}
	} else {
		int rc = http_error(h, "task poll", &r, err);

		json_decref(*status);
		*status = NULL;
		reply_free(&r);
		return rc;
	}
	reply_free(&r);
	return 0;
}

/* Does task t mention needle (its Name, or the request it runs)? */
static int
task_mentions(json_t *t, const char *needle)
{
	const char *name = json_string_value(json_object_get(t, "Name"));
	json_t *payload = json_object_get(t, "Payload");
	char *text;
	int hit;

	if (name && strstr(name, needle))
		return 1;
	if (payload == NULL)
		return 0;
	text = json_dumps(payload, JSON_COMPACT);
	hit = text && strstr(text, needle) != NULL;
	free(text);
	return hit;
}

static int
rf_task_find(struct rp_bmc *b, const char *needle, char *task, size_t tasklen,
             struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *root = NULL, *svc = NULL, *coll = NULL, *members;
	const char *tpath;
	size_t i;
	int rc = -1;

	if (get(h, "/redfish/v1", &root, NULL, 0, err) < 0)
		return -1;
	tpath = link(json_object_get(root, "Tasks"));
	if (tpath[0] == '\0') {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no TaskService", h->base_url);
		goto out;
	}
	if (get(h, tpath, &svc, NULL, 0, err) < 0)
		goto out;
	tpath = link(json_object_get(svc, "Tasks"));
	if (tpath[0] == '\0' || get(h, tpath, &coll, NULL, 0, err) < 0) {
		if (tpath[0] == '\0')
			rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s lists no tasks", h->base_url);
		goto out;
	}
	members = json_object_get(coll, "Members");
	rc = 1;
	/* Newest first: BMCs append tasks and drop the oldest. At most 64 looked at. */
	for (i = json_array_size(members); i-- > 0 && json_array_size(members) - i <= 64;) {
		json_t *t = NULL;
		const char *mon;

		if (get(h, link(json_array_get(members, i)), &t, NULL, 0, err) < 0) {
			rc = -1;
			break;
		}
		if (task_mentions(t, needle)) {
			char url[1024];

			mon = json_string_value(json_object_get(t, "TaskMonitor"));
			if (mon == NULL)
				mon = link(t);
			rc = resolve(h, "task found", mon, url, sizeof url, err);
			if (rc == 0)
				copy(task, tasklen, mon);
			json_decref(t);
			break;
		}
		json_decref(t);
	}
out:
	json_decref(root);
	json_decref(svc);
	json_decref(coll);
	return rc;
}

/* Event logs: what one call reads at most (see rp_bmc_events). */
#define LOG_SERVICES_MAX 16    /* log services per LogServices collection */
#define LOG_PAGES_MAX    128   /* pages of one log's Entries */
#define LOG_SCAN_MAX     20000 /* entries looked at */
#define LOG_FETCH_MAX    1024  /* entries fetched one by one (pages that list links only) */
#define LOG_TEXT_MAX     1024  /* bytes of a message kept */

struct log_item {
	int64_t ms; /* INT64_MIN: no usable time */
	size_t seq; /* order read, to keep the sort stable */
	json_t *entry;
};

struct log_scan {
	int64_t since_ms;
	struct log_item *items;
	size_t n, cap;
	unsigned scanned, fetched;
};

/* At most max bytes of a UTF-8 string (jansson's strings are valid UTF-8), cut before a
 * character, not inside one. */
static json_t *
text_cut(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	return json_stringn(s ? s : "", n);
}

/* One LogEntry in our shape, kept when at or after since or undated. */
static int
log_keep(struct log_scan *sc, json_t *le, const char *source, struct rp_bmc_err *err)
{
	const char *created = json_string_value(json_object_get(le, "Created"));
	const char *sev = json_string_value(json_object_get(le, "Severity"));
	const char *id = json_string_value(json_object_get(le, "Id"));
	const char *msg = json_string_value(json_object_get(le, "Message"));
	char at[RP_TIME_BUF];
	int64_t ms = INT64_MIN;
	json_t *e;

	if (created && rp_time_parse(created, &ms) < 0)
		ms = INT64_MIN;
	if (ms != INT64_MIN && ms < sc->since_ms)
		return 0;
	if (sev == NULL)
		sev = json_string_value(json_object_get(le, "MessageSeverity"));
	if (id == NULL) {
		id = strrchr(link(le), '/');
		id = id ? id + 1 : "";
	}
	if (msg == NULL)
		msg = json_string_value(json_object_get(le, "MessageId"));
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 64;
		struct log_item *it = realloc(sc->items, cap * sizeof *it);

		if (it == NULL)
			return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		sc->items = it;
		sc->cap = cap;
	}
	e = json_pack("{s:o, s:s?, s:s, s:o, s:s}", "id", text_cut(id, 128), "at",
	              ms == INT64_MIN ? NULL : rp_time_format(ms, at), "severity",
	              sev && !strcmp(sev, "Critical") ? "critical"
	              : sev && !strcmp(sev, "OK")     ? "ok"
	                                              : "warning",
	              "message", text_cut(msg, LOG_TEXT_MAX), "source", source);
	if (e == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	sc->items[sc->n] = (struct log_item){ms, sc->n, e};
	sc->n++;
	return 0;
}

/* Every entry of one log, page by page: 0, 1 when the log has no Entries resource after all,
 * -1 with err. A nextLink back to a page already read ends the paging (a BMC bug), and an
 * entry listed twice counts once. */
static int
log_read(struct rf *h, const char *entries, const char *source, struct log_scan *sc,
         struct rp_bmc_err *err)
{
	json_t *pages = json_object(), *seen = json_object(), *page = NULL, *m;
	char next[512];
	size_t i;
	int n, rc = -1;

	if (pages == NULL || seen == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	copy(next, sizeof next, entries);
	for (n = 0; next[0] && !json_object_get(pages, next); n++) {
		const char *nl;

		if (n == LOG_PAGES_MAX) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL,
			            "%s: %s has more than %d pages of entries", h->base_url, source,
			            LOG_PAGES_MAX);
			goto out;
		}
		json_object_set_new(pages, next, json_true());
		json_decref(page);
		page = NULL;
		if (get(h, next, &page, NULL, 0, err) < 0) {
			if (n == 0 && err->kind == RP_BMC_UNSUPPORTED)
				rc = 1;
			goto out;
		}
		json_array_foreach(json_object_get(page, "Members"), i, m)
		{
			const char *mid = link(m);
			json_t *le = NULL;

			if (mid[0]) {
				if (json_object_get(seen, mid))
					continue;
				json_object_set_new(seen, mid, json_true());
			}
			if (++sc->scanned > LOG_SCAN_MAX) {
				rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s: more than %d log entries",
				            h->base_url, LOG_SCAN_MAX);
				goto out;
			}
			/* A member that is only a link: the entry is its own resource. */
			if (mid[0] && !json_object_get(m, "Severity") &&
			    !json_object_get(m, "Created") && !json_object_get(m, "Message")) {
				if (++sc->fetched > LOG_FETCH_MAX) {
					rp_bmc_fail(
					        err, RP_BMC_PROTOCOL,
					        "%s: more than %d log entries to fetch one by one",
					        h->base_url, LOG_FETCH_MAX);
					goto out;
				}
				if (mid[0] != '/') {
					rp_bmc_fail(err, RP_BMC_PROTOCOL,
					            "%s: %s: entry link %.100s is not a path",
					            h->base_url, source, mid);
					goto out;
				}
				if (get(h, mid, &le, NULL, 0, err) < 0)
					goto out;
			}
			if (log_keep(sc, le ? le : m, source, err) < 0) {
				json_decref(le);
				goto out;
			}
			json_decref(le);
		}
		nl = json_string_value(json_object_get(page, "Members@odata.nextLink"));
		if (nl == NULL) /* the OData spelling, as in DMTF's mockups */
			nl = json_string_value(json_object_get(page, "@odata.nextLink"));
		/* Only a path on this BMC: credentials never follow a link to another host. */
		if (nl && (nl[0] != '/' || strlen(nl) >= sizeof next)) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL,
			            "%s: %s: nextLink is not a path of at most %zu bytes",
			            h->base_url, source, sizeof next - 1);
			goto out;
		}
		copy(next, sizeof next, nl);
	}
	rc = 0;
out:
	json_decref(pages);
	json_decref(seen);
	json_decref(page);
	return rc;
}

/* Every log service of one LogServices collection; *found counts those with entries. Log
 * services already read (shared between system and manager) are skipped. */
static int
log_services(struct rf *h, const char *coll, json_t *done, int *found, struct log_scan *sc,
             struct rp_bmc_err *err)
{
	json_t *c = NULL, *m;
	size_t i;
	int rc = -1;

	if (coll[0] == '\0' || json_object_get(done, coll))
		return 0;
	json_object_set_new(done, coll, json_true());
	if (get(h, coll, &c, NULL, 0, err) < 0)
		return err->kind == RP_BMC_UNSUPPORTED ? 0 : -1; /* linked but absent: no log */
	json_array_foreach(json_object_get(c, "Members"), i, m)
	{
		json_t *svc = NULL;
		const char *id, *entries;
		char source[80];

		if (i == LOG_SERVICES_MAX)
			break;
		if (link(m)[0] == '\0' || json_object_get(done, link(m)))
			continue;
		json_object_set_new(done, link(m), json_true());
		if (get(h, link(m), &svc, NULL, 0, err) < 0) {
			if (err->kind == RP_BMC_UNSUPPORTED) /* listed but absent */
				continue;
			goto out;
		}
		entries = link(json_object_get(svc, "Entries"));
		id = json_string_value(json_object_get(svc, "Id"));
		if (id == NULL) {
			id = strrchr(link(m), '/');
			id = id ? id + 1 : "";
		}
		snprintf(source, sizeof source, "redfish:%.64s", id);
		if (entries[0]) {
			int r = log_read(h, entries, source, sc, err);

			if (r < 0) {
				json_decref(svc);
				goto out;
			}
			*found += r == 0;
		}
		json_decref(svc);
	}
	rc = 0;
out:
	json_decref(c);
	return rc;
}

static int
log_order(const void *a, const void *b)
{
	const struct log_item *x = a, *y = b;

	if (x->ms != y->ms)
		return x->ms < y->ms ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int
rf_events(struct rp_bmc *b, int64_t since_ms, size_t max, json_t **out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	struct log_scan sc = {.since_ms = since_ms};
	json_t *sys = NULL, *mgr = NULL, *done = json_object(), *list = NULL;
	char syslogs[256], mpath[256];
	size_t i;
	int found = 0, rc = -1;

	if (done == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		goto out;
	copy(syslogs, sizeof syslogs, link(json_object_get(sys, "LogServices")));
	/* The manager of this system, else the first manager: the BMC's own log lives there. */
	copy(mpath, sizeof mpath,
	     link(json_array_get(json_object_get(json_object_get(sys, "Links"), "ManagedBy"), 0)));
	if (mpath[0] == '\0' && h->l.managers[0] &&
	    member(h, h->l.managers, NULL, mpath, sizeof mpath, err) < 0 &&
	    err->kind != RP_BMC_UNSUPPORTED)
		goto out;
	if (mpath[0] && get(h, mpath, &mgr, NULL, 0, err) < 0)
		goto out;
	if (log_services(h, syslogs, done, &found, &sc, err) < 0 ||
	    log_services(h, link(json_object_get(mgr, "LogServices")), done, &found, &sc, err) < 0)
		goto out;
	if (found == 0) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s has no log service with entries",
		            h->base_url);
		goto out;
	}
	/* Logs differ in order (some list newest first): oldest first by Created, undated first. */
	if (sc.n > 1)
		qsort(sc.items, sc.n, sizeof *sc.items, log_order);
	if ((list = json_array()) == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	for (i = 0; i < sc.n && i < max; i++) {
		json_array_append_new(list, sc.items[i].entry);
		sc.items[i].entry = NULL;
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	for (i = 0; i < sc.n; i++)
		json_decref(sc.items[i].entry);
	free(sc.items);
	json_decref(sys);
	json_decref(mgr);
	json_decref(done);
	json_decref(list);
	return rc;
}

int
rp_bmc_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void
rp_bmc_global_cleanup(void)
{
	struct cached *c, *n;

	pthread_mutex_lock(&cache_mu);
	for (c = cache; c; c = n) {
		n = c->next;
		/* Leave no sessions behind on BMCs that allow only a handful. */
		if (c->l.session[0] && c->l.token[0]) {
			struct rf h = {0};
			struct reply r;
			struct rp_bmc_err err;

			h.curl = curl_easy_init();
			h.l = c->l;
			h.t.http_timeout_ms = 2000;
			h.t.retry_tries = 1; /* a logout is not worth waiting for at shutdown */
			h.t.tls_verify =
			        0; /* only a logout; the token was sent to this host before */
			copy(h.base_url, sizeof h.base_url, c->base);
			if (h.curl && exchange(&h, "DELETE", c->l.session, NULL, NULL, 0, NULL,
			                       NULL, 1, &r, &err) == 0)
				reply_free(&r);
			curl_easy_cleanup(h.curl);
		}
		free(c);
	}
	cache = NULL;
	pthread_mutex_unlock(&cache_mu);
	curl_global_cleanup();
}

const struct rp_bmc_ops rp_bmc_redfish_ops = {
        .name = "redfish",
        .open = rf_open,
        .close = rf_close,
        .power_get = rf_power_get,
        .power_set = rf_power_set,
        .boot_set = rf_boot_set,
        .boot_get = rf_boot_get,
        .identity = rf_identity,
        .bios_get = rf_bios_get,
        .bios_set = rf_bios_set,
        .bios_registry = rf_bios_registry,
        .firmware_inventory = rf_firmware_inventory,
        .firmware_update = rf_firmware_update,
        .task_poll = rf_task_poll,
        .task_find = rf_task_find,
        .events = rf_events,
};
