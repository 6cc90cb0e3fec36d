/* Talking to rackpilotd: one curl handle, capped answers, error bodies, paging, streams. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include <rackpilot/version.h>

#include "cli.h"
#include "rackpilot/common.h"

#define PAGES_MAX 10000

struct sink {
	struct rp_buf body; /* capped at RP_CLI_BODY_MAX */
	/* Streams: chunks of a 200 answer of the right type go to fn. */
	CURL *curl;
	const char *ctype;
	int (*fn)(const char *, size_t, void *);
	void *arg;
	int checked, ok, stopped;
};

int
rp_cli_http_init(struct rp_cli *c)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (c->curl = curl_easy_init()) == NULL) {
		fprintf(stderr, "rackpilot: cannot initialise libcurl\n");
		return -1;
	}
	return 0;
}

void
rp_cli_http_free(struct rp_cli *c)
{
	if (c->curl) {
		curl_easy_cleanup(c->curl);
		curl_global_cleanup();
	}
	c->curl = NULL;
	free(c->raw);
	c->raw = NULL;
}

void
rp_cli_resp_free(struct rp_cli_resp *r)
{
	free(r->body);
	memset(r, 0, sizeof *r);
}

void
rp_cli_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* A refused chunk (over the cap, out of memory) ends the transfer. */
static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;

	return rp_buf_append(&s->body, data, size * n) < 0 ? 0 : size * n;
}

/*
 * libcurl's informational text while a pin is set, for one line only: the hash of the key the
 * server presented (" public key hash: sha256//..."), so that a mismatch can name it. That
 * line is not an API; without it the message names only the expected key. Headers reach this
 * callback too (the token among them) and are ignored.
 */
static int
on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *arg)
{
	struct rp_cli *c = arg;

	(void)h;
	if (type == CURLINFO_TEXT)
		rp_tls_pin_seen(data, size, c->seen_fp);
	return 0;
}

/*
 * Server verification: with --cacert, the chain against that file alone (not the system's
 * CAs too) and the host name; with --fingerprint, the server's public key before anything is
 * sent, and without --cacert in place of the CA and host checks (a self-signed certificate
 * is then authenticated by the pin). Neither: libcurl's defaults, the system's CAs.
 */
static void
set_tls(struct rp_cli *c)
{
	if (c->cacert[0]) {
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->cacert);
		curl_easy_setopt(c->curl, CURLOPT_CAPATH, NULL);
	} else if (c->pin[0]) {
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (c->pin[0]) {
		curl_easy_setopt(c->curl, CURLOPT_PINNEDPUBLICKEY, c->pin);
		curl_easy_setopt(c->curl, CURLOPT_DEBUGFUNCTION, on_debug);
		curl_easy_setopt(c->curl, CURLOPT_DEBUGDATA, c);
		curl_easy_setopt(c->curl, CURLOPT_VERBOSE, 1L);
	}
	c->seen_fp[0] = '\0';
}

static size_t
on_stream(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	const char *ct = NULL;
	long status = 0;

	if (!s->checked) {
		s->checked = 1;
		curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(s->curl, CURLINFO_CONTENT_TYPE, &ct);
		s->ok = status == 200 && ct && !strncmp(ct, s->ctype, strlen(s->ctype));
	}
	if (s->ok && s->fn(data, size * n, s->arg) < 0) {
		s->stopped = 1;
		return 0;
	}
	return size * n; /* not ok: an error body, the status says enough */
}

/* Why no answer came: the server's key did not match the pin (at the TLS handshake: nothing
 * was sent), or the connection or transfer failed. */
static void
print_failure(const struct rp_cli *c, CURLcode cc, const char *err)
{
	if (cc == CURLE_SSL_PINNEDPUBKEYNOTMATCH)
		fprintf(stderr,
		        "rackpilot: %s: the server's TLS public key does not match the pinned "
		        "fingerprint %s%s%s%s; nothing was sent\n",
		        c->url, c->fingerprint, c->seen_fp[0] ? " (the server's is " : "",
		        c->seen_fp, c->seen_fp[0] ? ")" : "");
	else
		fprintf(stderr, "rackpilot: %s %s: %s\n",
		        cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
		                        cc == CURLE_OPERATION_TIMEDOUT
		                ? "cannot connect to"
		                : "transfer failed with",
		        c->url, err[0] ? err : curl_easy_strerror(cc));
}

/*
 * One transfer to c->url + path. The Authorization header is the only place the token goes;
 * redirects are not followed (they would carry it along). Returns 0 with *status, or -1 with
 * the reason printed.
 */
static int
perform(struct rp_cli *c, const char *method, const char *path, const char *ctype, const char *body,
        size_t blen, const char *last_id, struct sink *s, long *status)
{
	char url[4096], hdr[3][1200], err[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL, *t;
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	int i, n = 0;

	if (snprintf(url, sizeof url, "%s%s", c->url, path) >= (int)sizeof url) {
		fprintf(stderr, "rackpilot: request path too long\n");
		return -1;
	}
	if (c->token[0])
		snprintf(hdr[n++], sizeof hdr[0], "Authorization: Bearer %s", c->token);
	if (ctype)
		snprintf(hdr[n++], sizeof hdr[0], "Content-Type: %s", ctype);
	if (last_id)
		snprintf(hdr[n++], sizeof hdr[0], "Last-Event-ID: %s", last_id);
	for (i = 0; i < n; i++, h = t)
		if ((t = curl_slist_append(h, hdr[i])) == NULL)
			goto out;
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "rackpilot/" RP_VERSION);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, s->fn ? on_stream : on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, s);
	set_tls(c);
	if (body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	}
	if (s->fn) { /* keep-alives come every 15 s: a minute of silence is a dead peer */
		curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, 60L);
	} else {
		curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 300L);
	}
	if (c->verbose)
		fprintf(stderr, "> %s %s%s%s\n", method, c->url, path, s->fn ? " (stream)" : "");
	cc = curl_easy_perform(c->curl);
	*status = 0;
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, status);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
	if (c->verbose)
		fprintf(stderr, "< %ld\n", *status);
out:
	explicit_bzero(hdr, sizeof hdr);
	curl_slist_free_all(h);
	if (s->body.toobig)
		fprintf(stderr, "rackpilot: %s %s: answer over %u bytes\n", method, path,
		        RP_CLI_BODY_MAX);
	else if (cc == CURLE_SSL_PINNEDPUBKEYNOTMATCH ||
	         (cc != CURLE_OK && !s->stopped && *status == 0))
		print_failure(c, cc, err);
	return s->body.toobig || (cc != CURLE_OK && !s->fn) ? -1 : 0;
}

int
rp_cli_http(struct rp_cli *c, const char *method, const char *path, const char *ctype,
            const char *body, size_t blen, struct rp_cli_resp *r)
{
	struct sink s = {0};
	int rc = -1;

	memset(r, 0, sizeof *r);
	rp_buf_init(&s.body, RP_CLI_BODY_MAX);
	if (perform(c, method, path, body ? ctype : NULL, body, blen, NULL, &s, &r->status) < 0 ||
	    (s.body.data == NULL && (s.body.data = calloc(1, 1)) == NULL))
		goto out;
	r->body = s.body.data;
	r->len = s.body.len;
	s.body.data = NULL;
	rc = 0;
out:
	rp_buf_free(&s.body);
	if (rc < 0)
		memset(r, 0, sizeof *r);
	return rc;
}

int
rp_cli_connect(struct rp_cli *c, int *fd)
{
	char err[CURL_ERROR_SIZE] = "";
	curl_socket_t sock = CURL_SOCKET_BAD;
	CURLcode cc;

	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, err);
	/* Only http/1.1 in ALPN: the caller speaks HTTP/1.1 over the connection itself. */
	curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c->curl, CURLOPT_CONNECT_ONLY, 1L);
	set_tls(c);
	cc = curl_easy_perform(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
	if (cc != CURLE_OK) {
		print_failure(c, cc, err);
		return -1;
	}
	if (curl_easy_getinfo(c->curl, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK ||
	    sock == CURL_SOCKET_BAD) {
		fprintf(stderr, "rackpilot: %s: libcurl gave no socket\n", c->url);
		return -1;
	}
	*fd = (int)sock;
	return 0;
}

long
rp_cli_stream(struct rp_cli *c, const char *path, const char *ctype, const char *last_id,
              int (*sink)(const char *data, size_t len, void *arg), void *arg)
{
	struct sink s = {.curl = c->curl, .ctype = ctype, .fn = sink, .arg = arg};
	long status = 0;

	perform(c, "GET", path, NULL, NULL, 0, last_id, &s, &status);
	return status;
}

void
rp_cli_print_error(const struct rp_cli *c, const struct rp_cli_resp *r)
{
	json_t *j = json_loadb(r->body, r->len, 0, NULL), *e = json_object_get(j, "error");
	json_t *detail = json_object_get(e, "detail");
	char *d = NULL;
	size_t n = strcspn(r->body, "\r\n");

	if (json_is_string(json_object_get(e, "code"))) {
		if (detail && !json_is_null(detail))
			d = json_dumps(detail, JSON_COMPACT | JSON_ENCODE_ANY);
		fprintf(stderr, "rackpilot: %s: %s%s%s%s\n", rp_cli_str(e, "code", "?"),
		        rp_cli_str(e, "message", ""), d ? " (" : "", d ? d : "", d ? ")" : "");
	} else {
		fprintf(stderr, "rackpilot: HTTP %ld from %s%s%.*s\n", r->status, c->url,
		        n ? ": " : "", (int)(n > 200 ? 200 : n), r->body);
	}
	if (r->status == 401 && c->token[0] == '\0')
		fprintf(stderr, "rackpilot: no token configured (--token, RACKPILOT_TOKEN or the "
		                "config file)\n");
	free(d);
	json_decref(j);
}

int
rp_cli_call(struct rp_cli *c, const char *method, const char *path, json_t *body, json_t **out)
{
	struct rp_cli_resp r;
	json_error_t je;
	json_t *j = NULL;
	char *text = NULL;
	int rc = RP_CLI_EAPI;

	if (body && (text = json_dumps(body, JSON_COMPACT)) == NULL)
		return rc;
	if (rp_cli_http(c, method, path, "application/json", text, text ? strlen(text) : 0, &r) < 0)
		goto out;
	if (r.status < 200 || r.status > 299)
		rp_cli_print_error(c, &r);
	else if (r.len > 0 && (j = json_loadb(r.body, r.len, 0, &je)) == NULL)
		fprintf(stderr, "rackpilot: %s %s: answer is not JSON: %s\n", method, path,
		        je.text);
	else
		rc = RP_CLI_OK;
	if (rc == RP_CLI_OK) {
		free(c->raw);
		c->raw = r.body;
		c->rawlen = r.len;
		r.body = NULL;
		if (out)
			*out = j;
		else
			json_decref(j);
	}
	rp_cli_resp_free(&r);
out:
	free(text);
	return rc;
}

int
rp_cli_list(struct rp_cli *c, const char *path, int all, json_t **page)
{
	json_t *first = NULL, *next = NULL;
	const char *cursor = NULL;
	char p[4096], *merged;
	int rc = RP_CLI_EAPI, pages;

	for (pages = 0; pages < PAGES_MAX; pages++) {
		if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p ||
		    (all && rp_cli_query(p, sizeof p, "limit", "1000") < 0) ||
		    rp_cli_query(p, sizeof p, "cursor", cursor) < 0) {
			fprintf(stderr, "rackpilot: request path too long\n");
			goto out;
		}
		json_decref(next);
		next = NULL;
		if (rp_cli_call(c, "GET", p, NULL, first ? &next : &first) != RP_CLI_OK ||
		    (next && json_array_extend(json_object_get(first, "items"),
		                               json_object_get(next, "items")) < 0))
			goto out;
		cursor = json_string_value(json_object_get(next ? next : first, "next_cursor"));
		if (!all || cursor == NULL)
			break;
	}
	if (pages == PAGES_MAX) {
		fprintf(stderr, "rackpilot: GET %s: more than %d pages\n", path, PAGES_MAX);
		goto out;
	}
	/* More than one page: --json prints one document of the same shape. */
	if (pages > 0) {
		json_object_set_new(first, "next_cursor", json_null());
		if ((merged = json_dumps(first, JSON_COMPACT)) == NULL)
			goto out;
		free(c->raw);
		c->raw = merged;
		c->rawlen = strlen(merged);
	}
	*page = first;
	first = NULL;
	rc = RP_CLI_OK;
out:
	json_decref(next);
	json_decref(first);
	return rc;
}

void
rp_cli_print_raw(const struct rp_cli *c)
{
	if (c->raw == NULL)
		return;
	fwrite(c->raw, 1, c->rawlen, stdout);
	if (c->rawlen == 0 || c->raw[c->rawlen - 1] != '\n')
		putchar('\n');
}

/* Appends s to out (at *n, size len), percent-encoded unless plain. 0 or -1. */
static int
append(char *out, size_t len, size_t *n, const char *s, int plain)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		int keep = plain || isalnum(ch) || strchr("-._~", ch); /* the C locale: ASCII */

		if (*n + (keep ? 1 : 3) >= len)
			return -1;
		*n += (size_t)(keep ? snprintf(out + *n, len - *n, "%c", ch)
		                    : snprintf(out + *n, len - *n, "%%%02X", ch));
	}
	return 0;
}

int
rp_cli_pathf(char *out, size_t len, const char *fmt, ...)
{
	size_t n = strlen(out), k;
	char lit[256];
	va_list ap;
	int rc = 0;

	va_start(ap, fmt);
	while (*fmt && rc == 0) {
		if (fmt[0] == '%' && fmt[1] == 's') {
			rc = append(out, len, &n, va_arg(ap, const char *), 0);
			fmt += 2;
			continue;
		}
		k = strcspn(fmt + 1, "%") + 1;
		snprintf(lit, sizeof lit, "%.*s", (int)k, fmt);
		rc = append(out, len, &n, lit, 1);
		fmt += k;
	}
	va_end(ap);
	return rc;
}

int
rp_cli_query(char *out, size_t len, const char *name, const char *value)
{
	size_t n = strlen(out);

	if (value == NULL)
		return 0;
	return append(out, len, &n, strchr(out, '?') ? "&" : "?", 1) < 0 ||
	                       append(out, len, &n, name, 0) < 0 ||
	                       append(out, len, &n, "=", 1) < 0 ||
	                       append(out, len, &n, value, 0) < 0
	               ? -1
	               : 0;
}
