/* GET /v1/events/stream: Server-Sent Events from the real server, read by libcurl. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "harness.h"

struct sse {
	char path[256];
	char last_event_id[32]; /* sent as Last-Event-ID when non-empty */
	long timeout_ms;
	char buf[65536];
	size_t len;
	long status;
	char ctype[64];
	int curl_rc;
};

static size_t
sse_write(char *p, size_t sz, size_t n, void *arg)
{
	struct sse *s = arg;
	size_t k = sz * n;

	if (k > sizeof s->buf - 1 - s->len)
		k = sizeof s->buf - 1 - s->len;
	memcpy(s->buf + s->len, p, k);
	s->len += k;
	s->buf[s->len] = '\0';
	return sz * n;
}

/* Read the stream for timeout_ms (curl's timeout ends it; that is the expected outcome). */
static void *
sse_run(void *arg)
{
	struct sse *s = arg;
	struct curl_slist *hl = NULL;
	char url[512], auth[200], lei[64];
	char *ct = NULL;
	CURL *c = curl_easy_init();

	snprintf(url, sizeof url, "%s%s", S.base, s->path);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", S.admin);
	hl = curl_slist_append(hl, auth);
	if (s->last_event_id[0]) {
		snprintf(lei, sizeof lei, "Last-Event-ID: %s", s->last_event_id);
		hl = curl_slist_append(hl, lei);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, s->timeout_ms);
	s->curl_rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s->status);
	if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
		snprintf(s->ctype, sizeof s->ctype, "%s", ct);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	return NULL;
}

static void
msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void
make_rack(const char *name)
{
	struct reply r;

	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", name), 201);
	reply_free(&r);
}

/* The event ids in a stream's text, in order ("id: N" lines). */
static int
ids(const char *text, long *out, int max)
{
	const char *p = text;
	int n = 0;

	while ((p = strstr(p, "\nid: ")) != NULL && n < max) {
		out[n++] = strtol(p + 5, NULL, 10);
		p += 5;
	}
	return n;
}

static void
test_live_events_in_order(void **state)
{
	struct sse *s = calloc(1, sizeof *s);
	pthread_t t;
	long got[16];
	int n, i;

	(void)state;
	snprintf(s->path, sizeof s->path, "/v1/events/stream");
	s->timeout_ms = 2500;
	pthread_create(&t, NULL, sse_run, s);
	msleep(500);
	make_rack("live-a");
	make_rack("live-b");
	msleep(300);
	make_rack("live-c");
	pthread_join(t, NULL);
	assert_int_equal(s->status, 200);
	assert_string_equal(s->ctype, "text/event-stream");
	assert_int_equal(s->curl_rc, CURLE_OPERATION_TIMEDOUT);
	/* Starts at the head: nothing from before the stream opened. */
	assert_true(strncmp(s->buf, "retry: 2000\n\n", 13) == 0);
	n = ids(s->buf, got, 16);
	assert_int_equal(n, 3);
	for (i = 1; i < n; i++)
		assert_true(got[i] == got[i - 1] + 1);
	assert_non_null(strstr(s->buf, "event: rack.created\ndata: {"));
	assert_non_null(strstr(s->buf, "\"name\":\"live-a\""));
	assert_non_null(strstr(s->buf, "\"name\":\"live-c\""));
	free(s);
}

static void
test_resume_and_filters(void **state)
{
	struct sse *s = calloc(1, sizeof *s), *f = calloc(1, sizeof *f);
	struct reply r;
	pthread_t t, tf;
	long first, got[64];
	int n, i;

	(void)state;
	make_rack("resume-r");
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?limit=1", &r, NULL), 200);
	first = (long)json_integer_value(
	        json_object_get(json_array_get(json_object_get(r.json, "items"), 0), "id"));
	reply_free(&r);
	assert_true(first > 0);
	/* Resuming after first - 1 replays exactly the event with id first, then goes live. */
	snprintf(s->path, sizeof s->path, "/v1/events/stream");
	snprintf(s->last_event_id, sizeof s->last_event_id, "%ld", first - 1);
	s->timeout_ms = 1500;
	/* A filtered stream sees only its node's events. */
	snprintf(f->path, sizeof f->path, "/v1/events/stream?node=stream-n1&action=node.");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s}", "name", "stream-n1"),
	                 201);
	reply_free(&r);
	f->timeout_ms = 2000;
	pthread_create(&t, NULL, sse_run, s);
	pthread_create(&tf, NULL, sse_run, f);
	msleep(400);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s}", "name", "stream-n2"),
	                 201);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/stream-n1", &r, "{s:b}", "maintenance", 1),
	        200);
	reply_free(&r);
	make_rack("resume-s");
	pthread_join(t, NULL);
	pthread_join(tf, NULL);
	n = ids(s->buf, got, 64);
	assert_true(n >= 4); /* resume-r, stream-n1 created, then the three live ones */
	assert_int_equal(got[0], first);
	for (i = 1; i < n; i++)
		assert_true(got[i] > got[i - 1]);
	assert_non_null(strstr(s->buf, "\"name\":\"resume-s\""));
	n = ids(f->buf, got, 64);
	assert_int_equal(n, 1);
	assert_non_null(strstr(f->buf, "event: node.updated"));
	assert_null(strstr(f->buf, "stream-n2"));
	assert_null(strstr(f->buf, "resume-s"));
	free(s);
	free(f);
}

static void
test_bad_requests(void **state)
{
	struct reply r;
	const char *lei[] = {"Last-Event-ID: seven", NULL};

	(void)state;
	assert_int_equal(req(&S, NULL, "GET", "/v1/events/stream", NULL, NULL, 0, NULL, &r), 401);
	assert_error(&r, 401, "UNAUTHORIZED");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events/stream?node=nope", &r, NULL), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events/stream?after=-3", &r, NULL), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events/stream?node=a&rack=b", &r, NULL),
	                 400);
	reply_free(&r);
	assert_int_equal(req(&S, S.admin, "GET", "/v1/events/stream", NULL, NULL, 0, lei, &r), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/events/stream", &r, NULL), 405);
	reply_free(&r);
}

/* A quiet stream gets keep-alive comments, and the server still stops at once (SIGTERM) with
 * streams open: parked connections are resumed and ended. */
static void
test_keepalive_and_shutdown(void **state)
{
	struct sse *s = calloc(1, sizeof *s);
	pthread_t t;
	struct timespec a, b;
	char dir[256];

	(void)state;
	snprintf(s->path, sizeof s->path, "/v1/events/stream?action=nothing.");
	s->timeout_ms = 17000;
	pthread_create(&t, NULL, sse_run, s);
	msleep(16000);
	assert_non_null(strstr(s->buf, ": keep-alive\n\n"));
	clock_gettime(CLOCK_MONOTONIC, &a);
	server_stop(&S, SIGTERM);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 3000);
	pthread_join(t, NULL);
	assert_int_not_equal(s->curl_rc, CURLE_OPERATION_TIMEDOUT);
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_start(&S, dir, NULL);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_live_events_in_order),
	        cmocka_unit_test(test_resume_and_filters),
	        cmocka_unit_test(test_bad_requests),
	        cmocka_unit_test(test_keepalive_and_shutdown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
