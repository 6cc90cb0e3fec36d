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
#include <math.h>
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
	char accounts[256]; /* AccountService */
	char system[256];   /* the ComputerSystem this node is */
	char chassis[256];  /* the Chassis collection */
	/* $expand as ProtocolFeaturesSupported.ExpandQuery offers it: '.' (NoLinks) or '*'
	 * (ExpandAll), 0 for none; expand_levels: the most $levels it takes, 0 when it takes no
	 * $levels. */
	char expand;
	unsigned expand_levels;
	/* What sensor reads found out (SENSORS_*), and when (rp_time_mono_ns): forgotten after
	 * SENSOR_PROBE_NS, so a firmware update that changes them is noticed. */
	unsigned sensor_flags;
	int64_t sensor_probed;
};

struct cached {
	char node[40];
	char base[320];
	char user[64];
	uint64_t pass; /* pass_tag of the password its session was opened with */
	struct learned l;
	struct cached *next;
};

static struct cached *cache;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

/* Which password a cached session was opened with (FNV-1a): a handle with another password
 * never reuses it, so that a credential rotation proves the new password by logging in with
 * it, not with a session the old one opened. */
static uint64_t
pass_tag(const char *p)
{
	uint64_t h = 1469598103934665603ull;

	while (*p)
		h = (h ^ (unsigned char)*p++) * 1099511628211ull;
	return h;
}

struct rf {
	struct rp_bmc base;
	struct rp_bmc_target t;
	CURL *curl;    /* a new one for every request (renew); NULL when that failed */
	CURLSH *share; /* the connections, kept across those easy handles; may be NULL */
	char base_url[320];
	struct learned l;
	int refused; /* a link was refused: the paths learned are not cached */
	int toobig;  /* the last exchange failed on an answer over its cap */
	/* A sensor read under way (rf_sensors; all 0 otherwise): when it must end (rp_time_mono_ns)
	 * and the tries it may still send, its limits as a message says them, and the cap and JSON
	 * flags of its answers. */
	int64_t deadline;
	unsigned tries_left, limit_ms, limit_tries;
	size_t body_max, json_flags;
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

/* How many bytes of text, from its start, spell password, each byte as itself or
 * percent-encoded ("%41", "%4a"; "+" for a space, as a form would): the whole of it, or, where
 * the text was cut there (its end, or the "..." of a cut link), 3 bytes of it and more; else 0. */
static size_t
password_at(const char *text, const char *password)
{
	static const char hex[] = "0123456789abcdef";
	const char *p = text, *a, *b;
	size_t k;

	for (k = 0; password[k]; k++) {
		unsigned char want = (unsigned char)password[k];

		if ((unsigned char)*p == want && *p) {
			p++;
		} else if (*p == '+' && want == ' ') {
			p++;
		} else if (p[0] == '%' && p[1] && p[2] &&
		           (a = strchr(hex, tolower((unsigned char)p[1]))) != NULL &&
		           (b = strchr(hex, tolower((unsigned char)p[2]))) != NULL &&
		           (unsigned)((a - hex) * 16 + (b - hex)) == want) {
			p += 3;
		} else {
			break;
		}
	}
	if (password[k] == '\0' || (k >= 3 && (*p == '\0' || !strncmp(p, "...", 3))))
		return (size_t)(p - text);
	return 0;
}

/* The one place every error of this driver passes on its way out (rp_bmc_redfish_ops): the
 * password, as it is or percent-encoded, becomes "***" wherever it shows. Messages quote what a
 * BMC says and the links it gives (a refused link, a path that did not answer JSON), and a
 * hostile BMC can put the password it was sent into any of them. */
static void
scrub(const char *password, struct rp_bmc_err *err)
{
	char out[sizeof err->msg];
	size_t i = 0, n = 0, m;

	if (password == NULL || password[0] == '\0')
		return;
	while (err->msg[i] && n + 1 < sizeof out) {
		if ((m = password_at(err->msg + i, password)) > 0) {
			size_t k = n + 3 < sizeof out ? 3 : sizeof out - 1 - n;

			memcpy(out + n, "***", k);
			n += k;
			i += m;
		} else {
			out[n++] = err->msg[i++];
		}
	}
	out[n] = '\0';
	memcpy(err->msg, out, n + 1);
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

static int over_limits(struct rf *h, const char *method, const char *path, struct rp_bmc_err *err);

/* Numbers that no double holds (1e400; an integer of 400 digits) become null, in place and
 * keeping the text's length: jansson refuses a whole document for one such number, and a BMC may
 * say "no reading" with one. s is NUL-terminated (rp_buf). */
static void
numbers_tame(char *s, size_t n)
{
	size_t i = 0, k;

	while (i < n) {
		if (s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			i++;
		} else if (s[i] == '-' || isdigit((unsigned char)s[i])) {
			char *end;
			double d;

			for (k = i + 1;
			     k < n && (isdigit((unsigned char)s[k]) || strchr("+-.eE", s[k])); k++)
				;
			errno = 0;
			d = strtod(s + i, &end);
			/* "1e309" is the shortest: "null" always fits. */
			if (errno == ERANGE && isinf(d) && end == s + k && k - i >= 4) {
				memcpy(s + i, "null", 4);
				memset(s + i + 4, ' ', k - i - 4);
			}
			i = k;
		} else {
			i++;
		}
	}
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
	long status = 0, timeout = (long)h->t.http_timeout_ms;
	size_t cap = h->body_max ? h->body_max : MAX_BODY;

	memset(r, 0, sizeof *r);
	rp_buf_init(&r->body, cap);
	h->toobig = 0;
	/* A read with a deadline waits for no answer past it. */
	if (h->deadline) {
		int64_t left = (h->deadline - rp_time_mono_ns()) / 1000000;

		if (left < timeout)
			timeout = left > 1 ? (long)left : 1;
	}
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
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout < 5000 ? timeout : 5000L);
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
			/* Cut short by the read's deadline: the read is over. */
			if (h->deadline && rp_time_mono_ns() >= h->deadline)
				return over_limits(h, method, path, err);
			*again = connect > 0 ? AGAIN_SAFE : AGAIN_ANY;
			return rp_bmc_fail(err, connect > 0 ? RP_BMC_TIMEOUT : RP_BMC_UNREACHABLE,
			                   "%s %s: no answer within %ld ms", method, url, timeout);
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
			if (toobig) {
				h->toobig = 1;
				return rp_bmc_fail(err, RP_BMC_PROTOCOL,
				                   "%s %s: answer over %zu bytes", method, url,
				                   cap);
			}
			/* fall through */
		default:
			return rp_bmc_fail(err, connect > 0 ? RP_BMC_TIMEOUT : RP_BMC_UNREACHABLE,
			                   "%s %s: %s", method, url, curl_easy_strerror(cc));
		}
	}
	r->status = status;
	if (r->body.len > 0) {
		if (h->json_flags & JSON_DECODE_INT_AS_REAL)
			numbers_tame(r->body.data, r->body.len);
		r->json = json_loadb(r->body.data, r->body.len, h->json_flags, NULL);
	}
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

/* The error of a request that the read under way (h->deadline) has no time or tries left for:
 * RP_BMC_TIMEOUT. Returns -1. */
static int
over_limits(struct rf *h, const char *method, const char *path, struct rp_bmc_err *err)
{
	return rp_bmc_fail(err, RP_BMC_TIMEOUT,
	                   "%s %s: the sensor read of %s is over its limit of %u s and %u requests",
	                   method, path, h->base_url, h->limit_ms / 1000, h->limit_tries);
}

/* 0 when the read under way (h->deadline) may send one more try, which it then counts; -1 with
 * over_limits once it is out of time or tries. 0 outside such a read. */
static int
within_limits(struct rf *h, const char *method, const char *path, struct rp_bmc_err *err)
{
	if (h->deadline == 0)
		return 0;
	if (h->tries_left == 0 || rp_time_mono_ns() >= h->deadline)
		return over_limits(h, method, path, err);
	h->tries_left--;
	return 0;
}

/* One request, retried on its own (see the top of the file) until it gets an answer, for at
 * most retry_tries tries and while the next wait still ends within retry_wait_ms of its first
 * try (and, in a read with a deadline, before it and within its tries: within_limits). A 503/429 on
 * every try is RP_BMC_BUSY; otherwise the last transport error, both saying how many tries over how
 * long. Like exchange_once otherwise. */
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

		if (within_limits(h, method, path, err) < 0)
			return -1;
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
		if (tries < max && elapsed + wait <= (long)h->t.retry_wait_ms && h->deadline &&
		    rp_time_mono_ns() + wait * 1000000 >= h->deadline) {
			/* A retry the request could make, but the read has no time for. */
			if (status)
				reply_free(r);
			return over_limits(h, method, path, err);
		}
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
	copy(h->l.accounts, sizeof h->l.accounts, link(json_object_get(r.json, "AccountService")));
	copy(h->l.chassis, sizeof h->l.chassis, link(json_object_get(r.json, "Chassis")));
	{
		json_t *q = json_object_get(json_object_get(r.json, "ProtocolFeaturesSupported"),
		                            "ExpandQuery");
		json_t *max = json_object_get(q, "MaxLevels");

		/* "." leaves Links alone (smaller answers, no links off the resource expanded). */
		h->l.expand = json_is_true(json_object_get(q, "NoLinks"))     ? '.'
		              : json_is_true(json_object_get(q, "ExpandAll")) ? '*'
		                                                              : 0;
		h->l.expand_levels = 0;
		/* A number, not only an integer: a sensor read parses integers as reals. */
		if (h->l.expand && json_is_true(json_object_get(q, "Levels")))
			h->l.expand_levels = json_is_number(max) && json_number_value(max) >= 2
			                             ? (json_number_value(max) >= 6
			                                        ? 6
			                                        : (unsigned)json_number_value(max))
			                             : 1;
	}
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
	/* A body may carry a password (a credential rotation's PATCH). */
	if (text)
		explicit_bzero(text, strlen(text));
	free(text);
	return rc;
}

static void change_required(json_t *body, char *out, size_t len);

/* Map a non-success HTTP status to an error. */
static int
http_error(struct rf *h, const char *what, struct reply *r, struct rp_bmc_err *err)
{
	char msg[200];
	enum rp_bmc_errkind k;

	error_text(r->json, h->t.password, msg, sizeof msg);
	if (r->status == 403) {
		char acct[512];

		change_required(r->json, acct, sizeof acct);
		if (acct[0])
			return rp_bmc_fail(
			        err, RP_BMC_AUTH,
			        "%s on %s: the BMC requires a new password for user '%s' "
			        "before anything else (PasswordChangeRequired): rotate "
			        "the node's BMC credentials",
			        what, h->base_url, h->t.username);
	}
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
		    !strcmp(c->user, t->username) && c->pass == pass_tag(t->password)) {
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
			c->pass = pass_tag(h->t.password);
			c->l = h->l;
			/* The BMC named a link elsewhere: find everything again next time. */
			if (h->refused) {
				c->l.sessions[0] = c->l.systems[0] = c->l.managers[0] = '\0';
				c->l.update[0] = c->l.system[0] = c->l.chassis[0] = '\0';
				c->l.accounts[0] = '\0';
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

/* PATCH with the ETag the caller just read (etag0; NULL: read it now); on 412 read again and
 * retry once. */
static int
patch_from(struct rf *h, const char *path, json_t *body, const char *etag0, const char *what,
           struct rp_bmc_err *err)
{
	char etag[160] = "";
	json_t *cur = NULL;
	struct reply r;
	int tries, rc = -1;

	for (tries = 0; tries < 2; tries++) {
		if (tries == 0 && etag0) {
			copy(etag, sizeof etag, etag0);
		} else if (get(h, path, &cur, etag, sizeof etag, err) < 0) {
			return -1;
		}
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
patch(struct rf *h, const char *path, json_t *body, const char *what, struct rp_bmc_err *err)
{
	return patch_from(h, path, body, NULL, what, err);
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

/* ---- Sensors and power limits ---------------------------------------------------------- */

/* What one sensor read looks at at most (see rp_bmc_sensors). */
#define SENSOR_CHASSIS_MAX 16   /* chassis of the system */
#define SENSOR_SCAN_MAX    4096 /* members of one collection, entries of one array */
#define SENSOR_FETCH_MAX   128  /* parts fetched one by one: sensors, fans, PSUs, drives */
#define SENSOR_DRIVES_MAX  16   /* drives asked for their temperature */
#define SENSOR_NAME_MAX    63
#define SENSOR_PROBE_NS    (15LL * 60 * 1000000000) /* how long learned.sensor_flags hold */
/* One read ends within SENSOR_DEADLINE_MS and SENSOR_TRIES requests (tries of one, retries
 * included; a read of a usual BMC makes 5 to 40, the most a legitimate one can is some 280), its
 * answers within SENSOR_BODY_MAX bytes each (an expanded Sensors collection of a few hundred
 * sensors is some 300 KB; jansson takes up to ~80 times a body's size to hold it). The
 * environment's RP_BMC_SENSOR_DEADLINE_MS and RP_BMC_SENSOR_TRIES set lower limits (tests). */
#define SENSOR_DEADLINE_MS 90000
#define SENSOR_TRIES       400
#define SENSOR_BODY_MAX    (1u << 20)

/* learned.sensor_flags */
#define SENSORS_NO_EXPAND 1u /* $expand is offered, but a Sensors collection came back as links */
#define SENSORS_NO_DRIVES 2u /* none of the drives the chassis name has EnvironmentMetrics */

/* One rp_bmc_sensors call. */
struct sread {
	struct rf *h;
	json_t *list;   /* the entries in the order read, all but the system's draw */
	json_t *system; /* the system's draw, once read */
	json_t *seen;   /* {DataSourceUri: true}: a sensor that two resources show is read once */
	json_t *drives; /* the drive links of the chassis */
	unsigned fetched;
	int primary;       /* the chassis being read may give the system's draw */
	int drive_temps;   /* a drive temperature was read */
	char refused[240]; /* why the first link not followed was refused */
	char skipped[240]; /* why the first resource passed by did not answer */
};

/* One reading as a resource gives it (pointers borrowed from that resource). */
struct sensor {
	const char *name, *type, *kind, *unit, *source;
	json_t *value;
	json_t *limit[4]; /* upper_warning, upper_critical, lower_warning, lower_critical */
	json_t *status;   /* Status: Health, State */
	const char *uri;  /* DataSourceUri (or the Sensor's own URI), NULL when not given */
};

static const char *
str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static int
eq(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

/* The last path segment of a link ("CPU1Temp" of ".../Sensors/CPU1Temp"), NULL for none. */
static const char *
segment(const char *uri)
{
	const char *s = uri ? strrchr(uri, '/') : NULL;

	return s && s[1] ? s + 1 : NULL;
}

/* A value the contract allows in unit (a new number), or NULL: none given, not finite, or one
 * no sensor can read (outside -273..1000 Cel, 0..100 %, 0..10^7 W or RPM). */
static json_t *
sensor_number(json_t *v, const char *unit)
{
	double d;

	if (!json_is_number(v))
		return NULL;
	d = json_number_value(v);
	if (!isfinite(d) || (!strcmp(unit, "Cel") ? d < -273 || d > 1000
	                     : !strcmp(unit, "%") ? d < 0 || d > 100
	                                          : d < 0 || d > 1e7))
		return NULL;
	/* A read parses integers as reals (JSON_DECODE_INT_AS_REAL): a whole number stays one. */
	if (json_is_integer(v))
		return json_integer(json_integer_value(v));
	return d > -1e15 && d < 1e15 && d == (double)(json_int_t)d ? json_integer((json_int_t)d)
	                                                           : json_real(d);
}

/* Where a sensor is: its PhysicalContext, else words of its name, else "other". */
static const char *
kind_of(const char *context, const char *name)
{
	static const char *const contexts[][2] = {
	        {"Intake", "inlet"},
	        {"Room", "inlet"},
	        {"Exhaust", "exhaust"},
	        {"CPU", "cpu"},
	        {"CPUSubsystem", "cpu"},
	        {"GPU", "gpu"},
	        {"GPUSubsystem", "gpu"},
	        {"Accelerator", "gpu"},
	        {"Memory", "memory"},
	        {"MemorySubsystem", "memory"},
	        {"StorageDevice", "drive"},
	        {"SystemBoard", "board"},
	        {"Backplane", "board"},
	        {"Chassis", "board"},
	        {"PowerSupply", "psu"},
	        {"PowerSubsystem", "psu"},
	        {"Fan", "fan"},
	        {"CoolingSubsystem", "fan"},
	};
	/* In this order: "GPU Inlet" is an inlet, "CPU VRM" a CPU's. */
	static const char *const words[][2] = {
	        {"inlet", "inlet"},     {"intake", "inlet"},   {"ambient", "inlet"},
	        {"exhaust", "exhaust"}, {"outlet", "exhaust"}, {"gpu", "gpu"},
	        {"cpu", "cpu"},         {"proc", "cpu"},       {"dimm", "memory"},
	        {"mem", "memory"},      {"nvme", "drive"},     {"drive", "drive"},
	        {"disk", "drive"},      {"ssd", "drive"},      {"psu", "psu"},
	        {"supply", "psu"},      {"fan", "fan"},        {"board", "board"},
	};
	size_t i;

	for (i = 0; context && i < sizeof contexts / sizeof contexts[0]; i++)
		if (!strcmp(context, contexts[i][0]))
			return contexts[i][1];
	for (i = 0; name && i < sizeof words / sizeof words[0]; i++)
		if (strcasestr(name, words[i][0]))
			return words[i][1];
	return "other";
}

static const char *
health_of(json_t *status)
{
	const char *h = str(status, "Health");

	return eq(h, "OK")         ? "ok"
	       : eq(h, "Warning")  ? "warning"
	       : eq(h, "Critical") ? "critical"
	                           : NULL;
}

/* Add one reading to the read, as the contract shows it; nothing for a part the BMC says is
 * absent, or for a sensor already read through another resource. 0, or -1 with err. */
static int
sensor_put(struct sread *sr, const struct sensor *s, struct rp_bmc_err *err)
{
	static const char *const keys[] = {"upper_warning", "upper_critical", "lower_warning",
	                                   "lower_critical"};
	const char *kind = s->kind, *health = health_of(s->status);
	char name[SENSOR_NAME_MAX + 1];
	json_t *e, *v;
	size_t i;
	int bad = 0;

	if (eq(str(s->status, "State"), "Absent"))
		return 0;
	if (s->uri && s->uri[0]) {
		if (json_object_get(sr->seen, s->uri))
			return 0;
		json_object_set_new(sr->seen, s->uri, json_true());
	}
	/* One draw is the node's; another chassis' own (a GPU baseboard's) is that board's. */
	if (!strcmp(kind, "system") && (!sr->primary || sr->system))
		kind = "board";
	if (strcmp(kind, "system") != 0 && json_array_size(sr->list) >= RP_BMC_SENSORS_MAX)
		return 0;
	for (i = 0; s->name && s->name[i] && i < SENSOR_NAME_MAX; i++)
		name[i] = (unsigned char)s->name[i] < 0x20 || (unsigned char)s->name[i] >= 0x7f
		                  ? '?'
		                  : s->name[i];
	name[i] = '\0';
	if ((e = json_object()) == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	bad |= json_object_set_new(e, "name", json_string(name[0] ? name : "Sensor"));
	bad |= json_object_set_new(e, "type", json_string(s->type));
	bad |= json_object_set_new(e, "kind", json_string(kind));
	v = sensor_number(s->value, s->unit);
	bad |= json_object_set_new(e, "value", v ? v : json_null());
	bad |= json_object_set_new(e, "unit", json_string(s->unit));
	for (i = 0; i < 4; i++)
		if ((v = sensor_number(s->limit[i], s->unit)) != NULL)
			bad |= json_object_set_new(e, keys[i], v);
	bad |= json_object_set_new(e, "health", health ? json_string(health) : json_null());
	bad |= json_object_set_new(e, "source", json_string(s->source));
	if (!strcmp(kind, "system"))
		sr->system = e;
	else
		bad |= json_array_append_new(sr->list, e);
	if (bad)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	sr->drive_temps |= !strcmp(s->type, "temperature") && !strcmp(kind, "drive");
	return 0;
}

/* path with an $expand of levels levels of what it links, as deep as the BMC takes it, or
 * path alone where the BMC offers none. */
static void
expand_path(struct rf *h, const char *path, unsigned levels, char *out, size_t len)
{
	char sep = strchr(path, '?') ? '&' : '?';

	if (levels == 0 || h->l.expand == 0 || (h->l.sensor_flags & SENSORS_NO_EXPAND))
		snprintf(out, len, "%s", path);
	else if (h->l.expand_levels == 0)
		snprintf(out, len, "%s%c$expand=%c", path, sep, h->l.expand);
	else
		snprintf(out, len, "%s%c$expand=%c($levels=%u)", path, sep, h->l.expand,
		         levels < h->l.expand_levels ? levels : h->l.expand_levels);
}

static void
sensor_learn(struct rf *h, unsigned flag)
{
	h->l.sensor_flags |= flag;
	h->l.sensor_probed = rp_time_mono_ns();
}

/* A resource of a read that is passed by: the first why is kept for a read that finds nothing. */
static void
sensor_skip(struct sread *sr, const char *why)
{
	if (sr->skipped[0] == '\0')
		copy(sr->skipped, sizeof sr->skipped, why);
}

/* GET path, with levels levels expanded where the BMC offers $expand, for a read: 0 and *out (a
 * new object), or 0 and *out NULL for a resource the read passes by: one the BMC does not have
 * (404, 405, 501), one that answers another error, no JSON object or more than the read's cap
 * (why in sr->skipped): one broken part does not hide all the others. -1 with err when the read
 * cannot go on: no answer (after the request's retries), busy (503, 429), credentials refused,
 * its limits reached. An expanded GET refused (400, 501) or answered over the cap is asked
 * again without $expand, which the node then does without (SENSORS_NO_EXPAND). */
static int
sensor_get(struct sread *sr, const char *path, unsigned levels, json_t **out,
           struct rp_bmc_err *err)
{
	struct rf *h = sr->h;
	char query[RP_BMC_LINK_MAX + 32];
	struct rp_bmc_err why;
	struct reply r;
	long status;
	int expanded;

	*out = NULL;
	for (;;) {
		expand_path(h, path, levels, query, sizeof query);
		expanded = strcmp(query, path) != 0;
		if (call(h, "GET", query, NULL, NULL, &r, err) < 0) {
			if (!h->toobig)
				return -1;
			if (expanded) {
				sensor_learn(h, SENSORS_NO_EXPAND);
				continue;
			}
			sensor_skip(sr, err->msg);
			return 0;
		}
		if (r.status == 200 && json_is_object(r.json)) {
			*out = json_incref(r.json);
			reply_free(&r);
			return 0;
		}
		if (expanded && (r.status == 400 || r.status == 501)) {
			reply_free(&r);
			sensor_learn(h, SENSORS_NO_EXPAND);
			continue;
		}
		break;
	}
	status = r.status;
	if (status == 200)
		rp_bmc_fail(&why, RP_BMC_PROTOCOL, "GET %s: not a JSON object", path);
	else
		http_error(h, "GET", &r, &why);
	reply_free(&r);
	/* Busy is the BMC's own "not now" (its retries are spent): a read from part of it would
	 * pass for the whole. */
	if (why.kind == RP_BMC_AUTH || status == 503 || status == 429) {
		*err = why;
		return -1;
	}
	if (why.kind != RP_BMC_UNSUPPORTED)
		sensor_skip(sr, why.msg);
	return 0;
}

/* The resource a link object names: the object itself where the BMC expanded it in place, else
 * fetched with levels levels expanded (one_by_one: one of the read's SENSOR_FETCH_MAX). 0 with
 * *out NULL when there is nothing to read there: no link; a link off the BMC's origin, never
 * followed (why in sr->refused); a resource passed by (sensor_get); the cap reached. -1 with err
 * when the read cannot go on (sensor_get). */
static int
follow(struct sread *sr, json_t *ref, unsigned levels, int one_by_one, json_t **out,
       struct rp_bmc_err *err)
{
	const char *path = link(ref);
	char url[1024];
	struct rp_bmc_err why;

	if (!json_is_object(ref) || path[0] == '\0') {
		*out = NULL;
		return 0;
	}
	if (json_object_size(ref) > 1) {
		*out = json_incref(ref);
		return 0;
	}
	if (resolve(sr->h, "sensor link", path, url, sizeof url, &why) < 0) {
		if (sr->refused[0] == '\0')
			copy(sr->refused, sizeof sr->refused, why.msg);
		*out = NULL;
		return 0;
	}
	if (one_by_one && sr->fetched++ >= SENSOR_FETCH_MAX) {
		*out = NULL;
		return 0;
	}
	return sensor_get(sr, path, levels, out, err);
}

/* One Sensor resource: 0 (also for a sensor the contract has no type for: voltage, current,
 * energy...), or -1 with err. */
static int
sensor_member(struct sread *sr, json_t *m, struct rp_bmc_err *err)
{
	json_t *th = json_object_get(m, "Thresholds"), *rpm = json_object_get(m, "SpeedRPM");
	const char *rt = str(m, "ReadingType"), *units = str(m, "ReadingUnits");
	const char *ctx = str(m, "PhysicalContext"), *id = str(m, "Id");
	struct sensor s = {
	        .source = "redfish:Sensors",
	        .value = json_object_get(m, "Reading"),
	        .status = json_object_get(m, "Status"),
	        .uri = link(m),
	        .limit = {json_object_get(json_object_get(th, "UpperCaution"), "Reading"),
	                  json_object_get(json_object_get(th, "UpperCritical"), "Reading"),
	                  json_object_get(json_object_get(th, "LowerCaution"), "Reading"),
	                  json_object_get(json_object_get(th, "LowerCritical"), "Reading")},
	};

	s.name = str(m, "Name") ? str(m, "Name") : id ? id : segment(s.uri);
	if (eq(rt, "Temperature") || (rt == NULL && eq(units, "Cel"))) {
		s.type = "temperature";
		s.unit = "Cel";
		s.kind = kind_of(ctx, s.name);
	} else if (eq(rt, "Power") || (rt == NULL && eq(units, "W"))) {
		s.type = "power";
		s.unit = "W";
		s.kind = kind_of(ctx, s.name);
		if (eq(ctx, "PowerSupply") || eq(ctx, "PowerSubsystem")) {
			/* A supply's input is what it draws; its output is already counted there.
			 */
			if (eq(str(m, "PhysicalSubContext"), "Output"))
				return 0;
			s.type = s.kind = "psu";
		} else if (eq(ctx, "Chassis") || eq(ctx, "System")) {
			s.kind = "system";
		}
	} else if (eq(rt, "Rotational") || eq(units, "RPM") || eq(units, "{rev}/min")) {
		s.type = s.kind = "fan";
		s.unit = "RPM";
	} else if (eq(rt, "Percent") &&
	           (eq(ctx, "Fan") || json_is_number(rpm) ||
	            (s.name && strcasestr(s.name, "fan")) || (id && strcasestr(id, "fan")))) {
		/* A fan's duty; other percentages (a battery's health) are no sensor of ours. */
		s.type = s.kind = "fan";
		s.unit = "%";
		if (json_is_number(rpm)) {
			/* Its thresholds are percentages: they do not go with the RPM. */
			memset(s.limit, 0, sizeof s.limit);
			s.value = rpm;
			s.unit = "RPM";
		}
	} else {
		return 0;
	}
	return sensor_put(sr, &s, err);
}

/* A chassis' Sensors collection: expanded in one request (expand 1), or member by member. 1 when
 * there is nothing to read in it: no member on the BMC's origin, or (expand) only links, as a BMC
 * answers that offers $expand but does not do it (*coll then keeps the collection, for a read
 * member by member); else 0, or -1 with err. */
static int
sensors_read(struct sread *sr, json_t *ch, int expand, json_t **coll, struct rp_bmc_err *err)
{
	json_t *c = *coll, *m, *env = NULL, *members;
	size_t i, whole = 0, links = 0;
	int rc = -1;

	if (c == NULL && follow(sr, json_object_get(ch, "Sensors"), expand, 0, &c, err) < 0)
		return -1;
	members = json_object_get(c, "Members");
	json_array_foreach(members, i, m)
	{
		struct rp_bmc_err why;
		char url[1024];

		if (i == SENSOR_SCAN_MAX)
			break;
		if (json_object_size(m) > 1)
			whole++;
		else if (link(m)[0] &&
		         resolve(sr->h, "sensor link", link(m), url, sizeof url, &why) == 0)
			links++;
		else if (link(m)[0] && sr->refused[0] == '\0')
			copy(sr->refused, sizeof sr->refused, why.msg);
	}
	/* Links of another origin are no sign of an $expand not done: the BMC could not expand
	 * them either. */
	if (whole == 0 && (links == 0 || expand)) {
		if (links > 0)
			sensor_learn(sr->h, SENSORS_NO_EXPAND);
		*coll = c;
		return 1;
	}
	json_array_foreach(members, i, m)
	{
		json_t *s = NULL;

		if (i == SENSOR_SCAN_MAX)
			break;
		if (follow(sr, m, 0, json_object_size(m) == 1, &s, err) < 0)
			goto out;
		if (s && sensor_member(sr, s, err) < 0) {
			json_decref(s);
			goto out;
		}
		json_decref(s);
	}
	/* No sensor of the chassis' draw: EnvironmentMetrics may have it. */
	if (sr->primary && sr->system == NULL) {
		json_t *pw;

		if (follow(sr, json_object_get(ch, "EnvironmentMetrics"), 0, 0, &env, err) < 0)
			goto out;
		pw = json_object_get(env, "PowerWatts");
		if (pw) {
			struct sensor s = {.name = str(ch, "Id"),
			                   .type = "power",
			                   .kind = "system",
			                   .unit = "W",
			                   .source = "redfish:EnvironmentMetrics",
			                   .value = json_object_get(pw, "Reading"),
			                   .uri = str(pw, "DataSourceUri")};
			char name[96];

			snprintf(name, sizeof name, "%.64s Power", s.name ? s.name : "Chassis");
			s.name = name;
			if (sensor_put(sr, &s, err) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	json_decref(env);
	if (*coll == NULL)
		json_decref(c);
	return rc;
}

/* A deprecated Thermal: Temperatures and Fans. */
static int
thermal_read(struct sread *sr, json_t *t, struct rp_bmc_err *err)
{
	static const char *const arrays[] = {"Temperatures", "Fans"};
	json_t *x;
	size_t a, i;

	for (a = 0; a < 2; a++) {
		json_array_foreach(json_object_get(t, arrays[a]), i, x)
		{
			const char *units = str(x, "ReadingUnits");
			struct sensor s = {
			        .name = str(x, "Name") ? str(x, "Name") : str(x, "FanName"),
			        .source = "redfish:Thermal",
			        .status = json_object_get(x, "Status"),
			        .limit = {json_object_get(x, "UpperThresholdNonCritical"),
			                  json_object_get(x, "UpperThresholdCritical"),
			                  json_object_get(x, "LowerThresholdNonCritical"),
			                  json_object_get(x, "LowerThresholdCritical")},
			};

			if (i == SENSOR_SCAN_MAX)
				break;
			if (a == 0) {
				s.type = "temperature";
				s.kind = kind_of(str(x, "PhysicalContext"), s.name);
				s.unit = "Cel";
				s.value = json_object_get(x, "ReadingCelsius");
			} else {
				/* Thermal v1_0 named fans FanName, their speed ReadingRPM. */
				s.type = s.kind = "fan";
				s.unit = eq(units, "Percent") ? "%" : "RPM";
				s.value = json_object_get(x, "Reading")
				                  ? json_object_get(x, "Reading")
				                  : json_object_get(x, "ReadingRPM");
			}
			if (sensor_put(sr, &s, err) < 0)
				return -1;
		}
	}
	return 0;
}

/* A deprecated Power: the draw of PowerControl[0], and the supplies' input. */
static int
power_read(struct sread *sr, json_t *p, const char *chassis, struct rp_bmc_err *err)
{
	json_t *pc = json_array_get(json_object_get(p, "PowerControl"), 0), *x;
	char name[96];
	size_t i;

	if (json_is_object(pc)) {
		struct sensor s = {.name = str(pc, "Name"),
		                   .type = "power",
		                   .kind = "system",
		                   .unit = "W",
		                   .source = "redfish:Power",
		                   .value = json_object_get(pc, "PowerConsumedWatts"),
		                   .status = json_object_get(pc, "Status")};

		snprintf(name, sizeof name, "%.64s Power", chassis);
		if (s.name == NULL)
			s.name = name;
		if (sensor_put(sr, &s, err) < 0)
			return -1;
	}
	json_array_foreach(json_object_get(p, "PowerSupplies"), i, x)
	{
		struct sensor s = {.name = str(x, "Name"),
		                   .type = "psu",
		                   .kind = "psu",
		                   .unit = "W",
		                   .source = "redfish:Power",
		                   .value = json_object_get(x, "PowerInputWatts"),
		                   .status = json_object_get(x, "Status")};

		if (i == SENSOR_SCAN_MAX)
			break;
		snprintf(name, sizeof name, "PSU %.32s",
		         str(x, "MemberId") ? str(x, "MemberId") : "");
		if (s.name == NULL)
			s.name = name;
		if (sensor_put(sr, &s, err) < 0)
			return -1;
	}
	return 0;
}

/* Temperatures of excerpts ({Reading, DeviceName, PhysicalContext, DataSourceUri}): the array of
 * ThermalMetrics, or (summary) its TemperatureSummaryCelsius. */
static int
excerpts_read(struct sread *sr, json_t *tm, struct rp_bmc_err *err)
{
	static const char *const summary[][2] = {{"Intake", "inlet"},
	                                         {"Ambient", "inlet"},
	                                         {"Exhaust", "exhaust"},
	                                         {"Internal", NULL}};
	json_t *x, *sum = json_object_get(tm, "TemperatureSummaryCelsius");
	size_t i;

	json_array_foreach(json_object_get(tm, "TemperatureReadingsCelsius"), i, x)
	{
		struct sensor s = {.type = "temperature",
		                   .unit = "Cel",
		                   .source = "redfish:ThermalSubsystem",
		                   .value = json_object_get(x, "Reading"),
		                   .uri = str(x, "DataSourceUri")};

		if (i == SENSOR_SCAN_MAX)
			break;
		s.name = str(x, "DeviceName") ? str(x, "DeviceName") : segment(s.uri);
		s.kind = kind_of(str(x, "PhysicalContext"), s.name);
		if (sensor_put(sr, &s, err) < 0)
			return -1;
	}
	/* What the readings leave out (the same sensor twice is read once, by its URI). */
	for (i = 0; i < sizeof summary / sizeof summary[0]; i++) {
		json_t *e = json_object_get(sum, summary[i][0]);
		struct sensor s = {.name = summary[i][0],
		                   .type = "temperature",
		                   .unit = "Cel",
		                   .source = "redfish:ThermalSubsystem",
		                   .value = json_object_get(e, "Reading"),
		                   .uri = str(e, "DataSourceUri")};

		if (e == NULL)
			continue;
		s.kind = summary[i][1] ? summary[i][1] : kind_of(NULL, segment(s.uri));
		if (sensor_put(sr, &s, err) < 0)
			return -1;
	}
	return 0;
}

/* A fan: a Fan resource (SpeedPercent {Reading, SpeedRPM}) or an excerpt of
 * EnvironmentMetrics.FanSpeedsPercent ({DeviceName, Reading, SpeedRPM}). */
static int
fan_read(struct sread *sr, json_t *f, const char *source, struct rp_bmc_err *err)
{
	json_t *speed = json_object_get(f, "SpeedPercent") ? json_object_get(f, "SpeedPercent") : f;
	json_t *rpm = json_object_get(speed, "SpeedRPM");
	struct sensor s = {.type = "fan",
	                   .kind = "fan",
	                   .source = source,
	                   .status = json_object_get(f, "Status"),
	                   .uri = str(speed, "DataSourceUri")};

	s.name = str(f, "Name") ? str(f, "Name") : str(f, "DeviceName");
	if (s.name == NULL)
		s.name = str(f, "Id") ? str(f, "Id") : segment(s.uri);
	s.value = json_is_number(rpm) ? rpm : json_object_get(speed, "Reading");
	s.unit = json_is_number(rpm) ? "RPM" : "%";
	return sensor_put(sr, &s, err);
}

/* EnvironmentMetrics + ThermalSubsystem (ThermalMetrics, Fans) + PowerSubsystem (PowerSupplies
 * and their Metrics); each in one request where the BMC expands them, else part by part. */
static int
modern_read(struct sread *sr, json_t *ch, struct rp_bmc_err *err)
{
	json_t *ts = NULL, *tm = NULL, *fans = NULL, *env = NULL, *ps = NULL, *psus = NULL, *x;
	const char *id = str(ch, "Id") ? str(ch, "Id") : "Chassis";
	char name[96];
	size_t i;
	int nfans = 0, rc = -1;

	if (follow(sr, json_object_get(ch, "ThermalSubsystem"), 2, 0, &ts, err) < 0 ||
	    follow(sr, json_object_get(ts, "ThermalMetrics"), 0, 0, &tm, err) < 0 ||
	    follow(sr, json_object_get(ts, "Fans"), 1, 0, &fans, err) < 0 ||
	    excerpts_read(sr, tm, err) < 0)
		goto out;
	json_array_foreach(json_object_get(fans, "Members"), i, x)
	{
		json_t *f = NULL;

		if (i == SENSOR_SCAN_MAX)
			break;
		if (follow(sr, x, 0, 1, &f, err) < 0)
			goto out;
		if (f && fan_read(sr, f, "redfish:ThermalSubsystem", err) < 0) {
			json_decref(f);
			goto out;
		}
		nfans += f != NULL;
		json_decref(f);
	}
	if (follow(sr, json_object_get(ch, "EnvironmentMetrics"), 0, 0, &env, err) < 0)
		goto out;
	if (env) {
		json_t *pw = json_object_get(env, "PowerWatts"),
		       *t = json_object_get(env, "TemperatureCelsius");
		struct sensor p = {.name = name,
		                   .type = "power",
		                   .kind = "system",
		                   .unit = "W",
		                   .source = "redfish:EnvironmentMetrics",
		                   .value = json_object_get(pw, "Reading"),
		                   .uri = str(pw, "DataSourceUri")};

		snprintf(name, sizeof name, "%.64s Power", id);
		if (pw && sensor_put(sr, &p, err) < 0)
			goto out;
		if (t) {
			struct sensor s = {.name = name,
			                   .type = "temperature",
			                   .unit = "Cel",
			                   .source = "redfish:EnvironmentMetrics",
			                   .value = json_object_get(t, "Reading"),
			                   .uri = str(t, "DataSourceUri")};

			snprintf(name, sizeof name, "%.64s Temp", id);
			s.kind = kind_of(NULL, segment(s.uri));
			if (sensor_put(sr, &s, err) < 0)
				goto out;
		}
		/* The fans' speeds, where there is no Fans collection to give them with health. */
		json_array_foreach(json_object_get(env, "FanSpeedsPercent"), i, x)
		{
			if (nfans > 0 || i == SENSOR_SCAN_MAX)
				break;
			if (fan_read(sr, x, "redfish:EnvironmentMetrics", err) < 0)
				goto out;
		}
	}
	if (follow(sr, json_object_get(ch, "PowerSubsystem"), 3, 0, &ps, err) < 0 ||
	    follow(sr, json_object_get(ps, "PowerSupplies"), 2, 0, &psus, err) < 0)
		goto out;
	json_array_foreach(json_object_get(psus, "Members"), i, x)
	{
		json_t *p = NULL, *met = NULL, *in;
		struct sensor s = {.type = "psu",
		                   .kind = "psu",
		                   .unit = "W",
		                   .source = "redfish:PowerSubsystem"};

		if (i == SENSOR_SCAN_MAX)
			break;
		if (follow(sr, x, 1, 1, &p, err) < 0)
			goto out;
		/* An empty bay has no metrics to fetch. */
		if (p && !eq(str(json_object_get(p, "Status"), "State"), "Absent") &&
		    follow(sr, json_object_get(p, "Metrics"), 0, 1, &met, err) < 0) {
			json_decref(p);
			goto out;
		}
		in = json_object_get(met, "InputPowerWatts");
		s.name = str(p, "Name") ? str(p, "Name") : str(p, "Id");
		s.status = json_object_get(p, "Status");
		s.value = json_object_get(in, "Reading");
		s.uri = str(in, "DataSourceUri");
		rc = p ? sensor_put(sr, &s, err) : 0;
		json_decref(p);
		json_decref(met);
		if (rc < 0)
			goto out;
		rc = -1;
	}
	rc = 0;
out:
	json_decref(ts);
	json_decref(tm);
	json_decref(fans);
	json_decref(env);
	json_decref(ps);
	json_decref(psus);
	return rc;
}

/* One chassis, from the cheapest source it offers that gives all it has: the Sensors collection
 * in one expanded request; the modern resources, expanded (3 requests); the deprecated Power and
 * Thermal (2); the modern resources part by part; the Sensors one by one (capped). */
static int
chassis_read(struct sread *sr, json_t *ch, struct rp_bmc_err *err)
{
	struct rf *h = sr->h;
	json_t *coll = NULL, *pw = json_object_get(ch, "Power"),
	       *th = json_object_get(ch, "Thermal"), *p = NULL, *t = NULL;
	int modern = json_object_get(ch, "EnvironmentMetrics") ||
	             json_object_get(ch, "ThermalSubsystem") ||
	             json_object_get(ch, "PowerSubsystem");
	int expand = h->l.expand && !(h->l.sensor_flags & SENSORS_NO_EXPAND), rc;

	if (expand && json_object_get(ch, "Sensors")) {
		if ((rc = sensors_read(sr, ch, 1, &coll, err)) <= 0)
			goto out;
		expand = !(h->l.sensor_flags & SENSORS_NO_EXPAND);
	}
	if (expand && modern) {
		rc = modern_read(sr, ch, err);
	} else if ((pw || th) && ((pw && th) || !modern)) {
		char name[96];

		snprintf(name, sizeof name, "%s", str(ch, "Id") ? str(ch, "Id") : "Chassis");
		rc = -1;
		if (follow(sr, th, 0, 0, &t, err) < 0 || follow(sr, pw, 0, 0, &p, err) < 0 ||
		    thermal_read(sr, t, err) < 0 || power_read(sr, p, name, err) < 0)
			goto out;
		rc = 0;
	} else if (modern) {
		rc = modern_read(sr, ch, err);
	} else if (json_object_get(ch, "Sensors")) {
		rc = sensors_read(sr, ch, 0, &coll, err) < 0 ? -1 : 0;
	} else {
		rc = 0;
	}
out:
	json_decref(coll);
	json_decref(p);
	json_decref(t);
	return rc < 0 ? -1 : 0;
}

/* The temperatures of the drives the chassis name, from each drive's EnvironmentMetrics. */
static int
drives_read(struct sread *sr, struct rp_bmc_err *err)
{
	json_t *x;
	size_t i;
	int offered = 0, fetched = 0;

	json_array_foreach(sr->drives, i, x)
	{
		json_t *d = NULL, *env = NULL, *t;
		struct sensor s = {.type = "temperature",
		                   .kind = "drive",
		                   .unit = "Cel",
		                   .source = "redfish:Drive"};
		char name[96];
		int rc;

		if (follow(sr, x, 1, 1, &d, err) < 0)
			return -1;
		fetched += d != NULL;
		offered |= json_object_get(d, "EnvironmentMetrics") != NULL;
		/* An empty bay has no temperature to fetch. */
		if (!eq(str(json_object_get(d, "Status"), "State"), "Absent") &&
		    follow(sr, json_object_get(d, "EnvironmentMetrics"), 0, 1, &env, err) < 0) {
			json_decref(d);
			return -1;
		}
		t = json_object_get(env, "TemperatureCelsius");
		snprintf(name, sizeof name, "%.56s Temp",
		         str(d, "Name") ? str(d, "Name")
		         : str(d, "Id") ? str(d, "Id")
		                        : (segment(link(x)) ? segment(link(x)) : "Drive"));
		s.name = name;
		s.value = json_object_get(t, "Reading");
		s.uri = str(t, "DataSourceUri");
		rc = t ? sensor_put(sr, &s, err) : 0;
		json_decref(d);
		json_decref(env);
		if (rc < 0)
			return -1;
	}
	/* Asked again only after SENSOR_PROBE_NS: drives without metrics cost a request each. Only
	 * drives that were read say so (none may have been: the cap, a refused link, an error). */
	if (fetched > 0 && !offered)
		sensor_learn(sr->h, SENSORS_NO_DRIVES);
	return 0;
}

/* Chassis types that are part of another (a GPU baseboard, a card): the node's draw is not
 * theirs when a whole chassis is there too. */
static int
sub_unit(json_t *ch)
{
	static const char *const types[] = {"Module", "Component", "Card", "Expansion",
	                                    "StorageEnclosure"};
	const char *t = str(ch, "ChassisType");
	size_t i;

	for (i = 0; t && i < sizeof types / sizeof types[0]; i++)
		if (!strcmp(t, types[i]))
			return 1;
	return 0;
}

/* The links to the system's chassis (Links.Chassis, else the members of the Chassis
 * collection), at most SENSOR_CHASSIS_MAX: *out a new array of strings. A link off the BMC is
 * left out, why in refused (when it is still empty). 0, or -1 with err. */
static int
chassis_links(struct rf *h, json_t *sys, json_t **out, char *refused, size_t rlen,
              struct rp_bmc_err *err)
{
	json_t *list = json_object_get(json_object_get(sys, "Links"), "Chassis"), *coll = NULL, *x;
	json_t *links = json_array();
	char url[1024];
	size_t i;
	int rc = -1;

	if (links == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (json_array_size(list) == 0 && h->l.chassis[0]) {
		if (get(h, h->l.chassis, &coll, NULL, 0, err) < 0 &&
		    err->kind != RP_BMC_UNSUPPORTED)
			goto out;
		list = json_object_get(coll, "Members");
	}
	json_array_foreach(list, i, x)
	{
		struct rp_bmc_err why;

		if (json_array_size(links) == SENSOR_CHASSIS_MAX)
			break;
		if (link(x)[0] == '\0')
			continue;
		if (resolve(h, "chassis link", link(x), url, sizeof url, &why) < 0) {
			if (refused[0] == '\0')
				copy(refused, rlen, why.msg);
			continue;
		}
		json_array_append_new(links, json_string(link(x)));
	}
	*out = links;
	links = NULL;
	rc = 0;
out:
	json_decref(coll);
	json_decref(links);
	return rc;
}

/* The entries as the contract gives them: the system's draw first, at most RP_BMC_SENSORS_MAX,
 * names unique (" #2", " #3"... within SENSOR_NAME_MAX). NULL when out of memory. */
static json_t *
sensor_list(struct sread *sr)
{
	json_t *out = json_array(), *names = json_object(), *e;
	size_t i, n = json_array_size(sr->list);

	if (out == NULL || names == NULL)
		goto fail;
	for (i = 0; i <= n && json_array_size(out) < RP_BMC_SENSORS_MAX; i++) {
		const char *name;
		char unique[SENSOR_NAME_MAX + 1];
		unsigned k;

		e = i == 0 ? sr->system : json_array_get(sr->list, i - 1);
		if (e == NULL)
			continue;
		name = str(e, "name");
		copy(unique, sizeof unique, name);
		for (k = 2; json_object_get(names, unique); k++) {
			char suffix[16];
			int cut;

			cut = SENSOR_NAME_MAX - snprintf(suffix, sizeof suffix, " #%u", k);
			snprintf(unique, sizeof unique, "%.*s%s", cut, name, suffix);
		}
		if (json_object_set_new(names, unique, json_true()) < 0 ||
		    json_object_set_new(e, "name", json_string(unique)) < 0 ||
		    json_array_append(out, e) < 0)
			goto fail;
	}
	json_decref(names);
	return out;
fail:
	json_decref(out);
	json_decref(names);
	return NULL;
}

/* What a read keeps of a chassis: Id, ChassisType, the links to its sensor resources and (the
 * first SENSOR_DRIVES_MAX) to its drives, as a new object (NULL: out of memory). The rest of
 * it, which a BMC may make as big as an answer can be, goes as soon as it is read. */
static json_t *
chassis_brief(json_t *ch)
{
	static const char *const names[] = {"Id", "ChassisType"};
	static const char *const links[] = {
	        "Sensors", "EnvironmentMetrics", "ThermalSubsystem", "PowerSubsystem", "Power",
	        "Thermal"};
	json_t *b = json_object(), *drives = json_array(), *x;
	size_t i;
	int bad = b == NULL || drives == NULL;

	/* Longer strings are no Id and no link (rp_bmc_url_resolve refuses them): not kept. */
	for (i = 0; !bad && i < sizeof names / sizeof names[0]; i++) {
		const char *v = str(ch, names[i]);

		if (v && strlen(v) <= RP_BMC_LINK_MAX)
			bad |= json_object_set_new(b, names[i], json_string(v));
	}
	for (i = 0; !bad && i < sizeof links / sizeof links[0]; i++) {
		const char *v = link(json_object_get(ch, links[i]));

		if (v[0] && strlen(v) <= RP_BMC_LINK_MAX)
			bad |= json_object_set_new(b, links[i], json_pack("{s:s}", "@odata.id", v));
	}
	json_array_foreach(json_object_get(json_object_get(ch, "Links"), "Drives"), i, x)
	{
		const char *v = link(x);

		if (bad || json_array_size(drives) == SENSOR_DRIVES_MAX)
			break;
		if (v[0] && strlen(v) <= RP_BMC_LINK_MAX)
			bad |= json_array_append_new(drives, json_pack("{s:s}", "@odata.id", v));
	}
	if (!bad && json_object_set(b, "Drives", drives) == 0) {
		json_decref(drives);
		return b;
	}
	json_decref(drives);
	json_decref(b);
	return NULL;
}

static int
rf_sensors(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	struct sread sr = {.h = h};
	json_t *sys = NULL, *links = NULL, *docs = NULL, *list, *x;
	size_t i;
	int pass, mains = 0, rc = -1;

	if (h->l.sensor_flags && rp_time_mono_ns() - h->l.sensor_probed > SENSOR_PROBE_NS)
		h->l.sensor_flags = 0;
	/* One deadline and one count of requests for the whole read, however many chassis,
	 * members and retries it meets; small answers, and numbers no double holds as null. */
	h->limit_ms = rp_bmc_env_limit("RP_BMC_SENSOR_DEADLINE_MS", SENSOR_DEADLINE_MS);
	h->limit_tries = rp_bmc_env_limit("RP_BMC_SENSOR_TRIES", SENSOR_TRIES);
	h->deadline = rp_time_mono_ns() + (int64_t)h->limit_ms * 1000000;
	h->tries_left = h->limit_tries;
	h->body_max = SENSOR_BODY_MAX;
	h->json_flags = JSON_DECODE_INT_AS_REAL;
	sr.list = json_array();
	sr.seen = json_object();
	sr.drives = json_array();
	if ((docs = json_array()) == NULL || sr.list == NULL || sr.seen == NULL ||
	    sr.drives == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0 ||
	    chassis_links(h, sys, &links, sr.refused, sizeof sr.refused, err) < 0)
		goto out;
	json_array_foreach(links, i, x)
	{
		json_t *ch = NULL, *brief;

		/* Listed but gone, or broken: the other chassis are read. */
		if (sensor_get(&sr, json_string_value(x), 0, &ch, err) < 0)
			goto out;
		if (ch == NULL)
			continue;
		brief = chassis_brief(ch);
		json_decref(ch);
		if (brief == NULL || json_array_append_new(docs, brief) < 0) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
			goto out;
		}
		mains += !sub_unit(brief);
	}
	/* Whole chassis first: the node's draw is the first of theirs. */
	for (pass = 0; pass < 2; pass++) {
		json_array_foreach(docs, i, x)
		{
			json_t *d;
			size_t k;

			if (sub_unit(x) != pass)
				continue;
			sr.primary = pass == 0 || mains == 0;
			if (chassis_read(&sr, x, err) < 0)
				goto out;
			json_array_foreach(json_object_get(x, "Drives"), k, d)
			{
				if (json_array_size(sr.drives) < SENSOR_DRIVES_MAX)
					json_array_append(sr.drives, d);
			}
		}
	}
	if (!sr.drive_temps && !(h->l.sensor_flags & SENSORS_NO_DRIVES) &&
	    json_array_size(sr.drives) > 0 && drives_read(&sr, err) < 0)
		goto out;
	if (sr.system == NULL && json_array_size(sr.list) == 0) {
		if (sr.refused[0])
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s", sr.refused);
		else if (sr.skipped[0])
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s", sr.skipped);
		else
			rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s offers no sensors", h->base_url);
		goto out;
	}
	if ((list = sensor_list(&sr)) == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	*out = list;
	rc = 0;
out:
	h->deadline = 0;
	h->tries_left = 0;
	h->body_max = 0;
	h->json_flags = 0;
	json_decref(sys);
	json_decref(links);
	json_decref(docs);
	json_decref(sr.list);
	json_decref(sr.system);
	json_decref(sr.seen);
	json_decref(sr.drives);
	return rc;
}

/* The node's power limit: the EnvironmentMetrics with PowerLimitWatts (*env 1) or the deprecated
 * Power whose PowerControl[0] has a PowerLimit (*env 0) of the first of the system's chassis that
 * offers one (whole chassis before parts of one): its path, body (*doc, new) and ETag. 0, or -1
 * with err (RP_BMC_UNSUPPORTED when no chassis offers one). */
static int
limit_find(struct rf *h, char *path, size_t len, json_t **doc, int *env, char *etag, size_t etaglen,
           struct rp_bmc_err *err)
{
	static const char *const keys[] = {"EnvironmentMetrics", "Power"};
	json_t *sys = NULL, *links = NULL, *later = json_array(), *ch = NULL, *res = NULL;
	char refused[240] = "", tag[160];
	size_t n;
	int rc = -1;

	if (later == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	/* The resources that hold the limit hold readings too, where a BMC's "no reading" may be
	 * an integer over LLONG_MAX (as rf_sensors reads them). */
	h->json_flags = JSON_DECODE_INT_AS_REAL;
	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0 ||
	    chassis_links(h, sys, &links, refused, sizeof refused, err) < 0)
		goto out;
	/* In the system's order, but the parts of a chassis (a GPU baseboard) after the others. */
	for (n = 0; n < json_array_size(links) + json_array_size(later); n++) {
		size_t k;

		json_decref(ch);
		ch = NULL;
		if (n < json_array_size(links)) {
			if (get(h, json_string_value(json_array_get(links, n)), &ch, NULL, 0, err) <
			    0) {
				if (err->kind == RP_BMC_UNSUPPORTED)
					continue;
				goto out;
			}
			if (sub_unit(ch)) {
				json_array_append(later, ch);
				continue;
			}
		} else {
			ch = json_incref(json_array_get(later, n - json_array_size(links)));
		}
		for (k = 0; k < 2; k++) {
			const char *p = link(json_object_get(ch, keys[k]));
			struct rp_bmc_err why;
			char url[1024];
			json_t *limit;

			if (p[0] == '\0')
				continue;
			/* Never a cut path: the PATCH would go elsewhere. */
			if (strlen(p) >= len) {
				if (refused[0] == '\0')
					snprintf(refused, sizeof refused,
					         "power limit link: longer than %zu bytes",
					         len - 1);
				continue;
			}
			if (resolve(h, "power limit link", p, url, sizeof url, &why) < 0) {
				if (refused[0] == '\0')
					copy(refused, sizeof refused, why.msg);
				continue;
			}
			if (get(h, p, &res, tag, sizeof tag, err) < 0) {
				if (err->kind == RP_BMC_UNSUPPORTED)
					continue;
				goto out;
			}
			limit = k == 0 ? json_object_get(res, "PowerLimitWatts")
			               : json_object_get(
			                         json_array_get(
			                                 json_object_get(res, "PowerControl"), 0),
			                         "PowerLimit");
			if (json_is_object(limit)) {
				copy(path, len, p);
				copy(etag, etaglen, tag);
				*env = k == 0;
				*doc = res;
				res = NULL;
				rc = 0;
				goto out;
			}
			json_decref(res);
			res = NULL;
		}
	}
	if (refused[0])
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s", refused);
	else
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s offers no power limit", h->base_url);
out:
	h->json_flags = 0;
	json_decref(sys);
	json_decref(links);
	json_decref(later);
	json_decref(ch);
	json_decref(res);
	return rc;
}

/* PowerControl[0].PowerLimit of a deprecated Power. */
static json_t *
power_limit_of(json_t *power)
{
	return json_object_get(json_array_get(json_object_get(power, "PowerControl"), 0),
	                       "PowerLimit");
}

/* The LimitException that a deprecated limit is set with: LogEventOnly, or NoAction where the
 * BMC's AllowableValues do not list that; NULL where they list neither (any other action acts
 * on the node: HardPowerOff powers it off). */
static const char *
limit_exception(json_t *pl)
{
	json_t *values = json_object_get(pl, "LimitException@Redfish.AllowableValues");

	return allowed(values, "LogEventOnly") ? "LogEventOnly"
	       : allowed(values, "NoAction")   ? "NoAction"
	                                       : NULL;
}

static int
rf_power_limit_get(struct rp_bmc *b, struct rp_power_limit *out, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	struct rp_power_limit pl = {0};
	json_t *doc = NULL, *w, *n = NULL;
	const char *mode = NULL, *ex = NULL;
	char path[RP_BMC_LINK_MAX + 1], etag[160];
	int env, rc = -1;

	if (limit_find(h, path, sizeof path, &doc, &env, etag, sizeof etag, err) < 0)
		return -1;
	if (env) {
		json_t *l = json_object_get(doc, "PowerLimitWatts");

		w = json_object_get(l, "SetPoint");
		mode = str(l, "ControlMode");
	} else {
		w = json_object_get(power_limit_of(doc), "LimitInWatts");
		ex = str(power_limit_of(doc), "LimitException");
	}
	if (w && !json_is_null(w) && (n = sensor_number(w, "W")) == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s: %s gives no usable power limit", h->base_url,
		            path);
		goto out;
	}
	pl.watts = n ? (unsigned)(json_number_value(n) + 0.5) : 0;
	/* Deprecated: a limit is on while there is one. */
	pl.active = env && mode ? strcmp(mode, "Disabled") != 0 : pl.watts > 0;
	/* A limit must never power a node off: one the BMC would enforce so is not the limit set.
	 */
	if (pl.active && ex && strcmp(ex, "LogEventOnly") != 0 && strcmp(ex, "NoAction") != 0) {
		rp_bmc_fail(err, RP_BMC_MISMATCH,
		            "%s: the power limit of %u W at %s has LimitException %.32s: over it "
		            "the BMC "
		            "would act on the node (LogEventOnly or NoAction wanted)",
		            h->base_url, pl.watts, path, ex);
		goto out;
	}
	*out = pl;
	rc = 0;
out:
	json_decref(n);
	json_decref(doc);
	return rc;
}

/* The PATCH body that sets want on the limit resource doc (*env as limit_find says): 0 and *body
 * (new), or -1 with err (RP_BMC_REJECTED: a value the BMC's AllowableMin/AllowableMax rule out;
 * RP_BMC_UNSUPPORTED: a limit the BMC cannot turn off, or only with an action on the node). */
static int
limit_body(struct rf *h, json_t *doc, int env, const char *path, const struct rp_power_limit *want,
           json_t **body, struct rp_bmc_err *err)
{
	json_t *b = NULL;

	if (env) {
		json_t *l = json_object_get(doc, "PowerLimitWatts");
		json_t *modes = json_object_get(l, "ControlMode@Redfish.AllowableValues");
		json_t *lo = json_object_get(l, "AllowableMin"),
		       *hi = json_object_get(l, "AllowableMax");
		const char *now = str(l, "ControlMode"), *mode = "Disabled";

		if (want->active) {
			if ((json_is_number(lo) && want->watts < json_number_value(lo)) ||
			    (json_is_number(hi) && want->watts > json_number_value(hi)))
				return rp_bmc_fail(err, RP_BMC_REJECTED,
				                   "%s: %u W is out of the allowed range of %s "
				                   "(AllowableMin %g, AllowableMax %g)",
				                   h->base_url, want->watts, path,
				                   json_is_number(lo) ? json_number_value(lo) : 0.0,
				                   json_is_number(hi) ? json_number_value(hi)
				                                      : 65535.0);
			/* A limit that is on keeps its mode; one that is off gets one the BMC
			 * takes. */
			mode = now && strcmp(now, "Disabled") != 0 ? now
			       : allowed(modes, "Automatic")       ? "Automatic"
			       : allowed(modes, "Override")        ? "Override"
			                                           : "Manual";
			b = json_pack("{s:{s:I, s:s}}", "PowerLimitWatts", "SetPoint",
			              (json_int_t)want->watts, "ControlMode", mode);
		} else if (!allowed(modes, mode)) {
			return rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
			                   "%s: the power limit cannot be turned off", h->base_url);
		} else {
			b = json_pack("{s:{s:s}}", "PowerLimitWatts", "ControlMode", mode);
		}
	} else {
		json_t *controls = json_array(), *pl;
		const char *ex = limit_exception(power_limit_of(doc));
		size_t i, n = json_array_size(json_object_get(doc, "PowerControl"));

		if (want->active && ex == NULL) {
			json_decref(controls);
			return rp_bmc_fail(
			        err, RP_BMC_UNSUPPORTED,
			        "%s: a power limit at %s can only be set with an action on "
			        "the node (LimitException allows neither LogEventOnly nor "
			        "NoAction)",
			        h->base_url, path);
		}
		/* The exception action goes with the watts, never left as it was: a limit must
		 * not power the node off (HardPowerOff) where it only should be logged. */
		pl = want->active ? json_pack("{s:I, s:s}", "LimitInWatts", (json_int_t)want->watts,
		                              "LimitException", ex)
		                  : json_pack("{s:n}", "LimitInWatts");
		/* {} leaves the other elements of the array as they are (DSP0266), where a shorter
		 * array might remove them. */
		if (n > SENSOR_SCAN_MAX)
			n = SENSOR_SCAN_MAX;
		if (controls && pl)
			json_array_append_new(controls, json_pack("{s:o}", "PowerLimit", pl));
		else
			json_decref(pl);
		for (i = 1; controls && i < n; i++)
			json_array_append_new(controls, json_object());
		if (json_array_size(controls) == n)
			b = json_pack("{s:o}", "PowerControl", controls);
		else
			json_decref(controls);
	}
	if (b == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	*body = b;
	return 0;
}

static int
rf_power_limit_set(struct rp_bmc *b, const struct rp_power_limit *want, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *doc = NULL, *body = NULL;
	char path[RP_BMC_LINK_MAX + 1], etag[160];
	struct reply r;
	int env, tries, rc = -1;

	/* As DCMI takes it (a 16-bit count of watts), and never 0 W for a limit that is on. */
	if (want->active && (want->watts == 0 || want->watts > 65535))
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "a power limit of %u W cannot be set (1-65535 W)", want->watts);
	/* A 412 (the resource changed since it was read) reads it again and builds the body from
	 * what it is now, once. */
	for (tries = 0; tries < 2; tries++) {
		json_decref(doc);
		json_decref(body);
		doc = body = NULL;
		if (limit_find(h, path, sizeof path, &doc, &env, etag, sizeof etag, err) < 0 ||
		    limit_body(h, doc, env, path, want, &body, err) < 0 ||
		    call(h, "PATCH", path, body, etag, &r, err) < 0)
			goto out;
		if (r.status == 412 && tries == 0) {
			reply_free(&r);
			continue;
		}
		if (r.status == 200 || r.status == 202 || r.status == 204)
			rc = 0;
		else
			http_error(h, "set power limit", &r, err);
		reply_free(&r);
		break;
	}
out:
	json_decref(doc);
	json_decref(body);
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

	rp_bmc_sol_engine_stop();
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

/* ---- The driver's calls: every error scrubbed on its way out ------------------------------ */

static int
scrubbed(struct rp_bmc *b, int rc, struct rp_bmc_err *err)
{
	if (rc < 0)
		scrub(((struct rf *)b)->t.password, err);
	return rc;
}

/* ---- Identify, BMC reset, password ------------------------------------------------- */

static int
rf_identify_set(struct rp_bmc *b, int on, unsigned seconds, int *timed, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL, *body = NULL;
	char etag[160] = "";
	int rc = -1;

	(void)seconds; /* Redfish lights have no timer: the caller turns it off */
	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, etag, sizeof etag, err) < 0)
		return -1;
	/* LocationIndicatorActive (2020.3) replaced IndicatorLED; older BMCs have only that. */
	if (json_object_get(sys, "LocationIndicatorActive"))
		body = json_pack("{s:b}", "LocationIndicatorActive", on);
	else if (json_object_get(sys, "IndicatorLED"))
		body = json_pack("{s:s}", "IndicatorLED", on ? "Blinking" : "Off");
	if (body == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		            "%s: the system has neither LocationIndicatorActive nor IndicatorLED",
		            h->base_url);
		goto out;
	}
	if (patch_from(h, h->l.system, body, etag[0] ? etag : NULL, "set the identify light", err) <
	    0)
		goto out;
	*timed = 0;
	rc = 0;
out:
	json_decref(body);
	json_decref(sys);
	return rc;
}

static int
rf_identify_get(struct rp_bmc *b, int *on, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *sys = NULL, *lia;
	const char *led;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	lia = json_object_get(sys, "LocationIndicatorActive");
	led = json_string_value(json_object_get(sys, "IndicatorLED"));
	if (json_is_boolean(lia))
		*on = json_is_true(lia);
	else if (led)
		*on = strcmp(led, "Off") != 0 && strcmp(led, "Unknown") != 0;
	else
		*on = -1;
	json_decref(sys);
	return 0;
}

/* The manager of the node's system (Links.ManagedBy), else the first manager. */
static int
manager_path(struct rf *h, char *out, size_t len, struct rp_bmc_err *err)
{
	json_t *sys = NULL, *by;

	if (system_path(h, err) < 0 || get(h, h->l.system, &sys, NULL, 0, err) < 0)
		return -1;
	by = json_array_get(json_object_get(json_object_get(sys, "Links"), "ManagedBy"), 0);
	copy(out, len, link(by));
	json_decref(sys);
	if (out[0])
		return 0;
	if (h->l.managers[0] == '\0')
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s lists no Managers", h->base_url);
	return member(h, h->l.managers, NULL, out, len, err);
}

static int
rf_reset(struct rp_bmc *b, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	json_t *mgr = NULL, *act, *values, *body = NULL;
	const char *target, *type;
	char mpath[256] = "", path[512];
	struct reply r;
	int rc = -1;

	if (manager_path(h, mpath, sizeof mpath, err) < 0 || get(h, mpath, &mgr, NULL, 0, err) < 0)
		return -1;
	act = json_object_get(json_object_get(mgr, "Actions"), "#Manager.Reset");
	target = json_string_value(json_object_get(act, "target"));
	values = json_object_get(act, "ResetType@Redfish.AllowableValues");
	if (target == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: the manager has no Manager.Reset action",
		            h->base_url);
		goto out;
	}
	type = allowed(values, "ForceRestart")      ? "ForceRestart"
	       : allowed(values, "GracefulRestart") ? "GracefulRestart"
	                                            : NULL;
	if (type == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		            "%s: Manager.Reset allows neither ForceRestart nor GracefulRestart",
		            h->base_url);
		goto out;
	}
	copy(path, sizeof path, target);
	body = json_pack("{s:s}", "ResetType", type);
	if (call(h, "POST", path, body, NULL, &r, err) < 0)
		goto out;
	if (r.status == 200 || r.status == 202 || r.status == 204)
		rc = 0;
	else
		http_error(h, "Manager.Reset", &r, err);
	reply_free(&r);
	/* The session dies with the BMC: the next handle logs in again. */
	h->l.token[0] = h->l.session[0] = '\0';
out:
	json_decref(body);
	json_decref(mgr);
	return rc;
}

/* The account a PasswordChangeRequired answer names (its first MessageArg), "" when the
 * answer is none. */
static void
change_required(json_t *body, char *out, size_t len)
{
	json_t *infos = json_object_get(json_object_get(body, "error"), "@Message.ExtendedInfo"),
	       *m;
	size_t i;

	out[0] = '\0';
	if (!json_is_array(infos))
		infos = json_object_get(body, "@Message.ExtendedInfo");
	json_array_foreach(infos, i, m)
	{
		const char *id = json_string_value(json_object_get(m, "MessageId"));
		const char *dot = id ? strrchr(id, '.') : NULL;

		if (id && !strcmp(dot ? dot + 1 : id, "PasswordChangeRequired")) {
			copy(out, len,
			     json_string_value(
			             json_array_get(json_object_get(m, "MessageArgs"), 0)));
			return;
		}
	}
}

#define ACCOUNTS_MAX 64 /* accounts looked at for the session's user */

/* The account of the handle's user: the AccountService's Accounts member whose UserName it
 * is, or the one a PasswordChangeRequired answer names. etag: that account's, "" when not
 * read. */
static int
account_path(struct rf *h, char *out, size_t len, char *etag, size_t etaglen,
             struct rp_bmc_err *err)
{
	json_t *svc = NULL, *coll = NULL, *acc = NULL, *m;
	char accounts[256] = "", named[512] = "", url[1024];
	struct reply r;
	size_t i;
	int rc = -1;

	if (discover_root(h, err) < 0)
		return -1;
	copy(accounts, sizeof accounts,
	     h->l.accounts[0] ? h->l.accounts : "/redfish/v1/AccountService");
	if (call(h, "GET", accounts, NULL, NULL, &r, err) < 0)
		return -1;
	if (r.status == 403)
		change_required(r.json, named, sizeof named);
	if (named[0]) {
		reply_free(&r);
		/* Only this BMC's own links: the password goes where the link leads. */
		if (resolve(h, "PasswordChangeRequired account", named, url, sizeof url, err) < 0)
			return -1;
		copy(out, len, named);
		etag[0] = '\0';
		return 0;
	}
	if (r.status != 200 || !json_is_object(r.json)) {
		rc = r.status == 200 ? rp_bmc_fail(err, RP_BMC_PROTOCOL,
		                                   "GET %s: not a JSON object", accounts)
		                     : http_error(h, "GET AccountService", &r, err);
		reply_free(&r);
		return rc;
	}
	svc = json_incref(r.json);
	reply_free(&r);
	if (get(h, link(json_object_get(svc, "Accounts")), &coll, NULL, 0, err) < 0)
		goto out;
	json_array_foreach(json_object_get(coll, "Members"), i, m)
	{
		char tag[160] = "";

		if (i >= ACCOUNTS_MAX)
			break;
		json_decref(acc);
		acc = NULL;
		if (get(h, link(m), &acc, tag, sizeof tag, err) < 0)
			goto out;
		if (!strcmp(json_string_value(json_object_get(acc, "UserName")) ?: "",
		            h->t.username)) {
			copy(out, len, link(m));
			copy(etag, etaglen, tag);
			rc = 0;
			goto out;
		}
	}
	rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: no account with UserName '%s' among %zu",
	            h->base_url, h->t.username, json_array_size(json_object_get(coll, "Members")));
out:
	json_decref(acc);
	json_decref(coll);
	json_decref(svc);
	return rc;
}

static int
rf_password_set(struct rp_bmc *b, const char *password, struct rp_bmc_err *err)
{
	struct rf *h = (struct rf *)b;
	char path[512] = "", etag[160] = "";
	json_t *body;
	int rc = -1;

	if (account_path(h, path, sizeof path, etag, sizeof etag, err) < 0)
		goto out;
	body = json_pack("{s:s}", "Password", password);
	rc = patch_from(h, path, body, etag[0] ? etag : NULL, "set the account's password", err);
	/* Wipe the request body's copy of the new password. */
	if (body) {
		json_t *pw = json_object_get(body, "Password");

		if (pw)
			explicit_bzero((char *)json_string_value(pw), strlen(password));
	}
	json_decref(body);
out:
	/* The BMC's words may quote the new password too. */
	if (rc < 0)
		scrub(password, err);
	return rc;
}

static int
op_identify_set(struct rp_bmc *b, int on, unsigned seconds, int *timed, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_identify_set(b, on, seconds, timed, err), err);
}

static int
op_identify_get(struct rp_bmc *b, int *on, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_identify_get(b, on, err), err);
}

static int
op_reset(struct rp_bmc *b, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_reset(b, err), err);
}

static int
op_password_set(struct rp_bmc *b, const char *password, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_password_set(b, password, err), err);
}

static int
op_power_get(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_power_get(b, out, err), err);
}

static int
op_power_set(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_power_set(b, a, err), err);
}

static int
op_boot_set(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_boot_set(b, want, err), err);
}

static int
op_boot_get(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_boot_get(b, out, err), err);
}

static int
op_identity(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_identity(b, out, err), err);
}

static int
op_bios_get(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_bios_get(b, out, err), err);
}

static int
op_bios_set(struct rp_bmc *b, json_t *attributes, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_bios_set(b, attributes, err), err);
}

static int
op_bios_registry(struct rp_bmc *b, const char *registry, json_t **out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_bios_registry(b, registry, out, err), err);
}

static int
op_firmware_inventory(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_firmware_inventory(b, out, err), err);
}

static int
op_firmware_update(struct rp_bmc *b, const char *image_uri, const char *local_file, json_t *targets,
                   char *task, size_t tasklen, struct rp_bmc_err *err)
{
	return scrubbed(
	        b, rf_firmware_update(b, image_uri, local_file, targets, task, tasklen, err), err);
}

static int
op_task_poll(struct rp_bmc *b, const char *task, int *done, int *ok, json_t **status,
             struct rp_bmc_err *err)
{
	return scrubbed(b, rf_task_poll(b, task, done, ok, status, err), err);
}

static int
op_task_find(struct rp_bmc *b, const char *needle, char *task, size_t tasklen,
             struct rp_bmc_err *err)
{
	return scrubbed(b, rf_task_find(b, needle, task, tasklen, err), err);
}

static int
op_events(struct rp_bmc *b, int64_t since_ms, size_t max, json_t **out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_events(b, since_ms, max, out, err), err);
}

static int
op_sensors(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_sensors(b, out, err), err);
}

static int
op_power_limit_get(struct rp_bmc *b, struct rp_power_limit *out, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_power_limit_get(b, out, err), err);
}

static int
op_power_limit_set(struct rp_bmc *b, const struct rp_power_limit *want, struct rp_bmc_err *err)
{
	return scrubbed(b, rf_power_limit_set(b, want, err), err);
}

const struct rp_bmc_ops rp_bmc_redfish_ops = {
        .name = "redfish",
        .open = rf_open,
        .close = rf_close,
        .power_get = op_power_get,
        .power_set = op_power_set,
        .boot_set = op_boot_set,
        .boot_get = op_boot_get,
        .identity = op_identity,
        .bios_get = op_bios_get,
        .bios_set = op_bios_set,
        .bios_registry = op_bios_registry,
        .firmware_inventory = op_firmware_inventory,
        .firmware_update = op_firmware_update,
        .task_poll = op_task_poll,
        .task_find = op_task_find,
        .events = op_events,
        .sensors = op_sensors,
        .power_limit_get = op_power_limit_get,
        .power_limit_set = op_power_limit_set,
        .identify_set = op_identify_set,
        .identify_get = op_identify_get,
        .reset = op_reset,
        .password_set = op_password_set,
};
