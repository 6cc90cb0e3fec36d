/* JSON over HTTP(S) to rackpilotd: one libcurl easy handle, capped answers, retries. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "agent.h"
#include "rackpilot/version.h"

#define ANSWER_MAX        (1024 * 1024)
#define CONNECT_TIMEOUT_S 10
#define TOTAL_TIMEOUT_S   60

volatile sig_atomic_t rp_agent_stopping;

struct rp_agent_client {
	const struct rp_agent_config *cfg;
	CURL *curl;
	unsigned attempts;
};

struct rp_agent_client *
rp_agent_client_new(const struct rp_agent_config *cfg)
{
	struct rp_agent_client *cl;
	static int global_done;

	/* Process-wide and not thread-safe, but the agent has one thread. */
	if (!global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return NULL;
		global_done = 1;
	}
	cl = calloc(1, sizeof *cl);
	if (cl == NULL)
		return NULL;
	cl->cfg = cfg;
	cl->attempts = 6;
	cl->curl = curl_easy_init();
	if (cl->curl == NULL) {
		free(cl);
		return NULL;
	}
	return cl;
}

void
rp_agent_client_free(struct rp_agent_client *cl)
{
	if (cl == NULL)
		return;
	curl_easy_cleanup(cl->curl);
	free(cl);
}

void
rp_agent_client_set_attempts(struct rp_agent_client *cl, unsigned attempts)
{
	cl->attempts = attempts ? attempts : 1;
}

/* Into an rp_buf capped at ANSWER_MAX: a refused chunk (toobig, oom) ends the transfer. */
static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	return rp_buf_append(arg, p, size * n) < 0 ? 0 : size * n;
}

static int
on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)arg, (void)dt, (void)dn, (void)ut, (void)un;
	return rp_agent_stopping ? 1 : 0;
}

/*
 * libcurl's informational text while a pin is set, for one line only: the hash of the key the
 * server presented (" public key hash: sha256//..."), so that a mismatch can name it. That
 * line is not an API; without it the message names only the pinned key. Headers reach this
 * callback too (tokens among them) and are ignored.
 */
static int
on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *arg)
{
	struct rp_agent_tls *t = arg;

	(void)h;
	if (type == CURLINFO_TEXT)
		rp_tls_pin_seen(data, size, t->seen);
	return 0;
}

void
rp_agent_tls_setup(void *curl, const struct rp_agent_config *cfg, int pinned,
                   struct rp_agent_tls *t)
{
	char pin[RP_TLS_PIN_MAX];
	/* A pin without a CA file stands in for CA and host name verification, so that the
	 * server's own self-signed certificate works and is still authenticated. */
	int verify = cfg->tls_verify && !(pinned && cfg->ca_file[0] == '\0');

	t->seen[0] = '\0';
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, verify ? 1L : 0L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L);
	if (cfg->ca_file[0])
		curl_easy_setopt(curl, CURLOPT_CAINFO, cfg->ca_file);
	if (!pinned)
		return;
	/* The configuration holds only well-formed fingerprints. */
	if (rp_tls_pin_from_hex(cfg->server_fingerprint, pin, sizeof pin) == 0)
		curl_easy_setopt(curl, CURLOPT_PINNEDPUBLICKEY, pin); /* libcurl copies it */
	curl_easy_setopt(curl, CURLOPT_DEBUGFUNCTION, on_debug);
	curl_easy_setopt(curl, CURLOPT_DEBUGDATA, t);
	curl_easy_setopt(curl, CURLOPT_VERBOSE, 1L);
}

void
rp_agent_tls_mismatch(const struct rp_agent_config *cfg, const struct rp_agent_tls *t,
                      const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen,
	         "%s: the server's TLS public key does not match the pinned fingerprint %s "
	         "(server_fingerprint or rackpilot.tls_sha256=)%s%s; nothing was sent",
	         what, cfg->server_fingerprint, t->seen[0] ? "; the server's is " : "", t->seen);
}

/* err gets "HTTP 409 CONFLICT: message (detail)" from an error body, or just the status. */
static void
describe_error(long status, const struct rp_buf *body, char *err, size_t errlen)
{
	json_t *j = NULL, *e;
	const char *code, *msg;
	char *detail = NULL;

	if (body->len > 0)
		j = json_loadb(body->data, body->len, 0, NULL);
	e = json_object_get(j, "error");
	if (!json_is_object(e)) {
		snprintf(err, errlen, "HTTP %ld", status);
		goto out;
	}
	code = json_string_value(json_object_get(e, "code"));
	msg = json_string_value(json_object_get(e, "message"));
	if (json_is_string(json_object_get(e, "detail")))
		detail = strdup(json_string_value(json_object_get(e, "detail")));
	else if (json_object_get(e, "detail") && !json_is_null(json_object_get(e, "detail")))
		detail = json_dumps(json_object_get(e, "detail"), JSON_COMPACT);
	snprintf(err, errlen, "HTTP %ld %s: %s%s%s%s", status, code ? code : "?", msg ? msg : "",
	         detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
out:
	free(detail);
	json_decref(j);
}

long
rp_agent_call(struct rp_agent_client *cl, const char *method, const char *path, const char *bearer,
              json_t *body, json_t **answer, char *err, size_t errlen)
{
	struct rp_buf a;
	struct rp_agent_tls tls;
	struct curl_slist *hdrs = NULL;
	char url[4096], auth[512], cerr[CURL_ERROR_SIZE] = "", *text = NULL;
	long status = RP_AGENT_ELOCAL;
	json_t *j = NULL;
	CURLcode cc;
	size_t bl = strlen(cl->cfg->url);

	rp_buf_init(&a, ANSWER_MAX);
	if (cl->cfg->url[0] == '\0') {
		snprintf(err, errlen, "no server url configured (url, --url or rackpilot.url=)");
		return RP_AGENT_ELOCAL;
	}
	/* The base may carry a trailing slash; paths always start with one. */
	while (bl > 0 && cl->cfg->url[bl - 1] == '/')
		bl--;
	if (snprintf(url, sizeof url, "%.*s%s", (int)bl, cl->cfg->url, path) >= (int)sizeof url) {
		snprintf(err, errlen, "url too long");
		return RP_AGENT_ELOCAL;
	}
	/* Ignoring the pin would send the tokens in the clear to whoever answers. */
	if (cl->cfg->server_fingerprint[0] && strncmp(url, "https://", 8)) {
		snprintf(err, errlen,
		         "server_fingerprint is set but the server url %s is not https://",
		         cl->cfg->url);
		return RP_AGENT_ELOCAL;
	}
	if (body && (text = json_dumps(body, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (text)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (bearer) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
		hdrs = curl_slist_append(hdrs, auth);
		explicit_bzero(auth, sizeof auth);
	}
	if (hdrs == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}

	curl_easy_reset(cl->curl);
	curl_easy_setopt(cl->curl, CURLOPT_URL, url);
	curl_easy_setopt(cl->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(cl->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cl->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	/* A redirect would carry the token to wherever it points. */
	curl_easy_setopt(cl->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(cl->curl, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(cl->curl, CURLOPT_TIMEOUT, (long)TOTAL_TIMEOUT_S);
	rp_agent_tls_setup(cl->curl, cl->cfg, cl->cfg->server_fingerprint[0] != '\0', &tls);
	curl_easy_setopt(cl->curl, CURLOPT_USERAGENT, "rackpilot-agent/" RP_VERSION);
	curl_easy_setopt(cl->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(cl->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cl->curl, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(cl->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(cl->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(cl->curl, CURLOPT_ERRORBUFFER, cerr);
	if (text) {
		curl_easy_setopt(cl->curl, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(cl->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
	} else if (!strcmp(method, "GET")) {
		curl_easy_setopt(cl->curl, CURLOPT_HTTPGET, 1L);
	}

	cc = curl_easy_perform(cl->curl);
	curl_easy_setopt(cl->curl, CURLOPT_ERRORBUFFER, NULL);
	if (a.toobig) {
		snprintf(err, errlen, "%s %s: answer larger than %d bytes", method, path,
		         ANSWER_MAX);
		status = RP_AGENT_EPROTO;
		goto out;
	}
	if (cc == CURLE_SSL_PINNEDPUBKEYNOTMATCH) {
		char what[600];

		snprintf(what, sizeof what, "%s %s", method, path);
		rp_agent_tls_mismatch(cl->cfg, &tls, what, err, errlen);
		status = RP_AGENT_EPROTO;
		goto out;
	}
	if (cc != CURLE_OK) {
		/* The buffer says which check failed ("SSL certificate problem: ..."). */
		snprintf(err, errlen, "%s %s: %s", method, path,
		         rp_agent_stopping ? "stopped"
		         : cerr[0]         ? cerr
		                           : curl_easy_strerror(cc));
		status = a.oom ? RP_AGENT_ELOCAL : RP_AGENT_ENET;
		goto out;
	}
	curl_easy_getinfo(cl->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		char why[768];

		describe_error(status, &a, why, sizeof why);
		snprintf(err, errlen, "%s %s: %s", method, path, why);
		goto out;
	}
	if (a.len > 0) {
		json_error_t je;

		j = json_loadb(a.data, a.len, JSON_REJECT_DUPLICATES, &je);
		if (j == NULL) {
			snprintf(err, errlen, "%s %s: answer is not JSON: %s", method, path,
			         je.text);
			status = RP_AGENT_EPROTO;
			goto out;
		}
	}
	*answer = j;
	j = NULL;
out:
	json_decref(j);
	curl_slist_free_all(hdrs);
	free(text);
	rp_buf_free(&a);
	return status;
}

int
rp_agent_transient(long status)
{
	return status == RP_AGENT_ENET || status == 408 || status == 429 || status >= 500;
}

int
rp_agent_sleep_ms(int64_t ms)
{
	struct timespec ts;
	int64_t end = rp_time_mono_ns() + ms * 1000000;

	/* Slices, so that a signal arriving between the check and the sleep costs at most one. */
	while (!rp_agent_stopping) {
		int64_t left = end - rp_time_mono_ns();

		if (left <= 0)
			return 0;
		if (left > 200 * 1000000LL)
			left = 200 * 1000000LL;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)left;
		nanosleep(&ts, NULL);
	}
	return -1;
}

long
rp_agent_call_retry(struct rp_agent_client *cl, const char *method, const char *path,
                    const char *bearer, json_t *body, json_t **answer, char *err, size_t errlen)
{
	int64_t delay_ms = 1000;
	unsigned i;
	long st = RP_AGENT_ELOCAL;

	for (i = 0; i < cl->attempts; i++) {
		if (i > 0) {
			rp_log_warn("%s; retrying in %lld s", err, (long long)(delay_ms / 1000));
			if (rp_agent_sleep_ms(delay_ms) < 0)
				break;
			delay_ms *= 2;
		}
		st = rp_agent_call(cl, method, path, bearer, body, answer, err, errlen);
		if (!rp_agent_transient(st))
			break;
	}
	return st;
}
