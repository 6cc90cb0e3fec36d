/*
 * The webhook deliverer (docs/webhooks.md): on the leader, each webhook's oldest pending
 * delivery is POSTed as JSON, signed with HMAC-SHA256 of the body under the webhook's secret
 * (X-Rackpilot-Signature: sha256=HEX). The attempt is recorded before the POST and its outcome
 * after: a crash in between sends it again (at least once; receivers deduplicate on
 * X-Rackpilot-Delivery). Only http and https, no redirects, TLS verified, the answer read up
 * to a cap. A failure is retried with a doubling delay (or the receiver's Retry-After), the
 * later deliveries of that webhook waiting behind it, until the event is webhook_max_age old:
 * then it is given up, with an event.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "internal.h"
#include "rackpilot/version.h"

#define HOOKS_AT_ONCE          16         /* webhooks served in one pass, each in its own thread */
#define HOOK_ANSWER_CAP        (64 << 10) /* bytes of an answer read before the transfer is cut */
#define HOOK_EXCERPT           200        /* bytes of a failed answer kept in the delivery log */
#define HOOK_BACKOFF_MAX_MS    300000     /* the doubling delay stops at 5 minutes */
#define HOOK_RETRY_AFTER_MAX_S 3600       /* a receiver's Retry-After is taken up to an hour */

struct hook {
	struct rp_jobs *j;
	json_t *d; /* one due delivery (rp_store_webhook_due) */
	pthread_t thread;
	int started;
	int progress; /* the store recorded something of this delivery */
};

struct answer {
	char excerpt[HOOK_EXCERPT + 1];
	size_t len, total;
	long retry_after; /* seconds; 0: none */
};

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;
	size_t len = size * n;

	if (a->len < HOOK_EXCERPT) {
		size_t take = len < HOOK_EXCERPT - a->len ? len : HOOK_EXCERPT - a->len;

		memcpy(a->excerpt + a->len, p, take);
		a->len += take;
		a->excerpt[a->len] = '\0';
	}
	a->total += len;
	/* A receiver that answers without end is cut off; its status line has been read. */
	return a->total > HOOK_ANSWER_CAP ? 0 : len;
}

/* A stop does not wait for a receiver that hangs: the transfer is cut, and the delivery,
 * recorded as attempted, goes again after the restart. */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	const struct rp_jobs *j = arg;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return __atomic_load_n(&j->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;
	size_t len = size * n;

	if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
		char buf[32];
		size_t k = len - 12 < sizeof buf - 1 ? len - 12 : sizeof buf - 1;
		char *end;
		long v;

		memcpy(buf, p + 12, k);
		buf[k] = '\0';
		v = strtol(buf, &end, 10);
		/* Seconds only; an HTTP date is rare from a webhook receiver and read as none. */
		if (end != buf && v > 0)
			a->retry_after = v > HOOK_RETRY_AFTER_MAX_S ? HOOK_RETRY_AFTER_MAX_S : v;
	}
	return len;
}

/* POST body to url: the HTTP status (0: none came back) with an error text in why when it
 * is not 2xx. */
static long
post(const struct rp_jobs *j, json_t *d, const char *body, struct answer *a, char *why,
     size_t whylen)
{
	char hdr[5][200], sig[RP_SHA256_HEX], err[CURL_ERROR_SIZE] = "";
	const char *secret = json_string_value(json_object_get(d, "secret"));
	struct curl_slist *h = NULL;
	long status = 0;
	CURLcode rc;
	CURL *c;
	int i;

	if (rp_hmac_sha256_hex(secret, strlen(secret), body, strlen(body), sig) < 0 ||
	    (c = curl_easy_init()) == NULL) {
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	snprintf(hdr[0], sizeof hdr[0], "Content-Type: application/json");
	snprintf(hdr[1], sizeof hdr[1], "User-Agent: rackpilotd/%s", RP_VERSION);
	snprintf(hdr[2], sizeof hdr[2], "X-Rackpilot-Event: %s",
	         json_string_value(json_object_get(d, "action")));
	snprintf(hdr[3], sizeof hdr[3], "X-Rackpilot-Delivery: %lld",
	         (long long)json_integer_value(json_object_get(d, "delivery")));
	snprintf(hdr[4], sizeof hdr[4], "X-Rackpilot-Signature: sha256=%s", sig);
	for (i = 0; i < 5; i++)
		h = curl_slist_append(h, hdr[i]);
	curl_easy_setopt(c, CURLOPT_URL, json_string_value(json_object_get(d, "url")));
	/* The API let only http(s) URLs in; curl is told too, and follows no redirect (a
	 * 3xx is a failure the log shows). */
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (j->o.webhook_ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, j->o.webhook_ca_file);
	/* The environment's http_proxy is not asked: a signed body goes where the
	 * configuration says (webhook_proxy), and nowhere else. */
	curl_easy_setopt(c, CURLOPT_PROXY, j->o.webhook_proxy ? j->o.webhook_proxy : "");
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)j);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)j->o.webhook_timeout_s * 1000);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)j->o.webhook_timeout_s * 1000);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && status >= 200 && status < 300)) {
		if (rc == CURLE_WRITE_ERROR)
			snprintf(why, whylen, "HTTP %ld with an answer over %d bytes", status,
			         HOOK_ANSWER_CAP);
		else
			snprintf(why, whylen, "%s", err[0] ? err : curl_easy_strerror(rc));
		if (rc != CURLE_WRITE_ERROR)
			status = 0;
	} else if (status < 200 || status >= 300) {
		char *p;

		/* The answer is the receiver's: one line of printable text in the log. */
		for (p = a->excerpt; *p; p++)
			if (!isprint((unsigned char)*p))
				*p = ' ';
		snprintf(why, whylen, "HTTP %ld%s%s", status, a->len ? ": " : "", a->excerpt);
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return status;
}

static void *
deliver(void *arg)
{
	struct hook *k = arg;
	struct rp_jobs *j = k->j;
	json_t *d = k->d, *body_obj;
	int64_t now = rp_time_now_ms(), id = json_integer_value(json_object_get(d, "delivery"));
	int64_t age = now - json_integer_value(json_object_get(d, "created_at"));
	int attempts = (int)json_integer_value(json_object_get(d, "attempts"));
	int64_t backoff = 1000LL << (attempts < 9 ? attempts : 9), next;
	struct answer a = {0};
	char why[400] = "", *body;
	long status;
	enum rp_err e;

	if (backoff > HOOK_BACKOFF_MAX_MS)
		backoff = HOOK_BACKOFF_MAX_MS;
	if (age > (int64_t)j->o.webhook_max_age_s * 1000 ||
	    json_is_null(json_object_get(d, "event"))) {
		const char *last = json_string_value(json_object_get(d, "last_error"));

		if (json_is_null(json_object_get(d, "event")))
			snprintf(why, sizeof why, "the event is no longer kept (retention_days)");
		else
			snprintf(why, sizeof why, "not delivered within webhook_max_age (%u s)%s%s",
			         j->o.webhook_max_age_s, last ? "; last: " : "", last ? last : "");
		e = rp_store_webhook_result(j->st, id, RP_WEBHOOK_GAVE_UP, 0, why, now, now);
		if (e == RP_ERR_OK)
			rp_log_warn("webhook %s: gave up delivery %lld: %s",
			            json_string_value(json_object_get(d, "name")), (long long)id,
			            why);
		else
			rp_log_warn("webhook %s: cannot record delivery %lld as given up (%s)",
			            json_string_value(json_object_get(d, "name")), (long long)id,
			            rp_err_message(e));
		k->progress = e == RP_ERR_OK;
		return NULL;
	}
	/* Recorded first: a crash during the POST leaves a delivery that is due again later,
	 * not one that is sent in a loop. */
	e = rp_store_webhook_attempt(j->st, id, attempts,
	                             json_integer_value(json_object_get(d, "version")), now,
	                             now + backoff + (int64_t)j->o.webhook_timeout_s * 1000);
	if (e == RP_ERR_NOT_FOUND) { /* changed since it was read: the next pass reads it again */
		k->progress = 1;
		return NULL;
	}
	if (e != RP_ERR_OK) {
		rp_log_warn("webhook %s: cannot record an attempt of delivery %lld (%s); not sent",
		            json_string_value(json_object_get(d, "name")), (long long)id,
		            rp_err_message(e));
		return NULL;
	}
	k->progress = 1;
	body_obj = json_pack("{s:I, s:{s:O, s:O}, s:O}", "delivery", (json_int_t)id, "webhook",
	                     "id", json_object_get(d, "webhook"), "name",
	                     json_object_get(d, "name"), "event", json_object_get(d, "event"));
	body = body_obj ? json_dumps(body_obj, JSON_COMPACT) : NULL;
	json_decref(body_obj);
	if (body == NULL) {
		rp_log_error("webhook: out of memory for delivery %lld", (long long)id);
		return NULL;
	}
	status = post(j, d, body, &a, why, sizeof why);
	free(body);
	now = rp_time_now_ms();
	if (status >= 200 && status < 300) {
		if ((e = rp_store_webhook_result(j->st, id, RP_WEBHOOK_DELIVERED, (int)status, NULL,
		                                 now, now)) != RP_ERR_OK)
			rp_log_warn(
			        "webhook %s: delivery %lld was delivered but cannot be recorded "
			        "(%s); it goes again",
			        json_string_value(json_object_get(d, "name")), (long long)id,
			        rp_err_message(e));
		return NULL;
	}
	next = now + (a.retry_after * 1000 > backoff ? a.retry_after * 1000 : backoff);
	rp_log_info("webhook %s: delivery %lld failed (%s); again in %lld s",
	            json_string_value(json_object_get(d, "name")), (long long)id, why,
	            (long long)((next - now) / 1000));
	rp_store_webhook_result(j->st, id, RP_WEBHOOK_RETRY, (int)status, why, now, next);
	return NULL;
}

void *
rp_jobs_webhooks(void *arg)
{
	struct rp_jobs *j = arg;

	pthread_mutex_lock(&j->mu);
	while (!j->stop) {
		struct hook hooks[HOOKS_AT_ONCE];
		json_t *due = NULL, *d;
		struct timespec ts;
		size_t i, n = 0;
		enum rp_err e = RP_ERR_OK;
		int progress = 0, slice, stalled = j->stalled;
		/* Read before the outbox: a commit after it (an event, most likely) ends the wait.
		 */
		uint64_t gen = rp_store_generation(j->st);

		if (j->leader && !stalled) {
			pthread_mutex_unlock(&j->mu);
			e = rp_store_webhook_due(j->st, rp_time_now_ms(), HOOKS_AT_ONCE, &due);
			pthread_mutex_lock(&j->mu);
		}
		if (e != RP_ERR_OK)
			rp_log_warn("webhooks: cannot read the outbox (%s)", rp_err_message(e));
		if (due == NULL || json_array_size(due) == 0 || j->stalled) {
			j->stalled = 0;
			rp_store_webhook_wipe(due);
			/* Up to POLL_MS (the retries falling due, other servers' events where no
			 * notification carries them), in slices that end at the next commit: an
			 * event is on its way within ~50 ms, not half a second. */
			for (slice = 0; slice < POLL_MS / 50 && !j->stop; slice++) {
				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += 50 * 1000000L;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&j->prune_cv, &j->mu, &ts);
				if (!stalled && rp_store_generation(j->st) != gen)
					break;
			}
			continue;
		}
		pthread_mutex_unlock(&j->mu);
		/* One thread per webhook: a slow receiver holds up its own queue, and this pass. */
		json_array_foreach(due, i, d)
		{
			hooks[n] = (struct hook){.j = j, .d = d};
			hooks[n].started =
			        pthread_create(&hooks[n].thread, NULL, deliver, &hooks[n]) == 0;
			if (!hooks[n].started)
				deliver(&hooks[n]);
			n++;
		}
		for (i = 0; i < n; i++) {
			if (hooks[i].started)
				pthread_join(hooks[i].thread, NULL);
			progress |= hooks[i].progress;
		}
		rp_store_webhook_wipe(due);
		pthread_mutex_lock(&j->mu);
		/* Nothing recorded (a full disk, a read-only database): wait before the next
		 * look rather than read the same list again at once. */
		j->stalled = !progress;
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}
