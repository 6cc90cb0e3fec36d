/*
 * The soak's load driver (bench/soak.sh): one thread, libcurl's multi interface.
 *
 *   rp_soak_load BASE ADMIN_TOKEN DURATION_S AGENTS CLIENTS OUT_FILE
 *
 * Setup (blocking, before the clock starts): one operator token per API client and one
 * bootstrap token per agent node "ag%04d" (POST /v1/bootstrap-tokens, bound to the node).
 * Then for DURATION_S:
 *  - AGENTS agents do what rackpilot-agent does: POST /v1/agent/register with their
 *    bootstrap token (staggered over the first 10 s), then POST /v1/agent/heartbeat with
 *    the agent token every heartbeat_s the server answers;
 *  - CLIENTS API clients, each every THINK_MS (env, default 200) ms: reads (node, job,
 *    event and rollout lists, one node, /metrics), a PATCH of its own node "pa%02d" with
 *    the If-Match of its last answer, now and then a bulk power action on a tag of 10 mock
 *    BMC nodes ("pw%02d", POWER_TAGS env, default 40), or an SSE stream of /v1/events/stream
 *    held for 5 to 15 s.
 * Output: requests, errors (every non-2xx and transport error by status and route) and
 * p50/p99 latency per route class. A stream's latency is the time to its response headers.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum cls { C_REG, C_HB, C_READ, C_PATCH, C_POWER, C_STREAM, NCLS };
static const char *const cls_name[NCLS] = {"agent register", "agent heartbeat", "read",
                                           "PATCH",          "bulk power",      "stream connect"};

struct lat {
	double *v;
	size_t n, cap;
	long total, errors;
};

struct actor {
	int agent; /* 1: agent, 0: API client */
	int idx;
	int busy;
	int registered;
	int hb_s;
	double next;
	char token[160];
	char etag[96];
	CURL *h;
};

struct xfer {
	struct actor *a;
	enum cls c;
	char route[96];
	char *body;
	size_t len, cap;
	struct curl_slist *hdrs;
	char etag[96];
	char *post;
	int own; /* a GET or PATCH of the client's own node: its ETag is kept */
};

#define MAX_ERR_KINDS 64
static struct {
	char key[160];
	long n;
} errs[MAX_ERR_KINDS];
static int nerrs;
static struct lat lats[NCLS];
static const char *base;
static uint64_t rng = 88172645463325252ULL;

static unsigned
rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
lat_add(struct lat *l, double ms)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = realloc(l->v, l->cap * sizeof *l->v);
		if (l->v == NULL)
			abort();
	}
	l->v[l->n++] = ms;
}

static void
err_add(const char *what, long status, const char *route)
{
	char key[160];
	int i;

	snprintf(key, sizeof key, "%s %ld: %s", what, status, route);
	for (i = 0; i < nerrs; i++)
		if (!strcmp(errs[i].key, key)) {
			errs[i].n++;
			return;
		}
	if (nerrs < MAX_ERR_KINDS) {
		snprintf(errs[nerrs].key, sizeof errs[nerrs].key, "%s", key);
		errs[nerrs++].n = 1;
	}
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(struct lat *l, double p)
{
	size_t i;

	if (l->n == 0)
		return 0;
	i = (size_t)ceil(p * (double)l->n) - 1;
	return l->v[i < l->n ? i : l->n - 1];
}

static size_t
on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t k = sz * n;

	/* Streams and big lists: keep at most 256 KiB (the driver reads only small answers). */
	if (x->len + k + 1 > x->cap && x->cap < (256u << 10)) {
		size_t cap = x->cap ? x->cap : 4096;

		while (cap < x->len + k + 1 && cap < (256u << 10))
			cap *= 2;
		x->body = realloc(x->body, cap);
		if (x->body == NULL)
			abort();
		x->cap = cap;
	}
	if (x->len + k + 1 <= x->cap) {
		memcpy(x->body + x->len, p, k);
		x->len += k;
		x->body[x->len] = '\0';
	}
	return k;
}

static size_t
on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t k = sz * n;

	if (k > 6 && !strncasecmp(p, "ETag:", 5)) {
		const char *v = p + 5;
		size_t l;

		while (*v == ' ')
			v++;
		l = k - (size_t)(v - p);
		while (l && (v[l - 1] == '\r' || v[l - 1] == '\n'))
			l--;
		if (l < sizeof x->etag) {
			memcpy(x->etag, v, l);
			x->etag[l] = '\0';
		}
	}
	return k;
}

static struct xfer *
xfer_new(struct actor *a, enum cls c, const char *method, const char *path, const char *route,
         const char *token, json_t *body, const char *if_match, long timeout_ms)
{
	struct xfer *x = calloc(1, sizeof *x);
	char url[512], h[300];

	if (x == NULL)
		abort();
	x->a = a;
	x->c = c;
	snprintf(x->route, sizeof x->route, "%s %s", method, route);
	snprintf(url, sizeof url, "%s%s", base, path);
	curl_easy_reset(a->h);
	curl_easy_setopt(a->h, CURLOPT_URL, url);
	curl_easy_setopt(a->h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(a->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(a->h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(a->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(a->h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(a->h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(a->h, CURLOPT_USERAGENT, a->agent ? "rackpilot-agent/soak" : "soak");
	curl_easy_setopt(a->h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(a->h, CURLOPT_TIMEOUT_MS, timeout_ms);
	snprintf(h, sizeof h, "Authorization: Bearer %s", token);
	x->hdrs = curl_slist_append(x->hdrs, h);
	if (if_match) {
		snprintf(h, sizeof h, "If-Match: %s", if_match);
		x->hdrs = curl_slist_append(x->hdrs, h);
	}
	if (body) {
		x->post = json_dumps(body, JSON_COMPACT);
		x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
		curl_easy_setopt(a->h, CURLOPT_POSTFIELDS, x->post);
		curl_easy_setopt(a->h, CURLOPT_POSTFIELDSIZE, (long)strlen(x->post));
		json_decref(body);
	} else {
		curl_easy_setopt(a->h, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(a->h, CURLOPT_CUSTOMREQUEST, method);
	}
	curl_easy_setopt(a->h, CURLOPT_HTTPHEADER, x->hdrs);
	a->busy = 1;
	return x;
}

static void
xfer_free(struct xfer *x)
{
	curl_slist_free_all(x->hdrs);
	free(x->post);
	free(x->body);
	free(x);
}

/* One blocking request for the setup; returns the parsed answer (NULL unless 2xx). */
static json_t *
setup_call(CURL *h, const char *admin, const char *path, json_t *body)
{
	struct actor a = {.h = h};
	struct xfer *x = xfer_new(&a, C_READ, "POST", path, path, admin, body, NULL, 30000);
	long st = 0;
	json_t *j = NULL;

	if (curl_easy_perform(h) == CURLE_OK &&
	    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st) == CURLE_OK && st / 100 == 2)
		j = json_loads(x->body ? x->body : "", 0, NULL);
	else
		fprintf(stderr, "soak: setup POST %s: %ld %s\n", path, st, x->body ? x->body : "");
	xfer_free(x);
	return j;
}

/* A well-formed ssh-ed25519 public key line (random key material). */
static void
host_key(char *out, size_t n)
{
	static const char b64[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char blob[51] = {0,   0,   0,   11,  's', 's', 'h', '-', 'e', 'd',
	                          '2', '5', '5', '1', '9', 0,   0,   0,   32};
	char enc[80];
	size_t i, o = 0;

	for (i = 19; i < sizeof blob; i++)
		blob[i] = (unsigned char)rnd(256);
	for (i = 0; i < sizeof blob; i += 3) {
		unsigned v = (unsigned)blob[i] << 16 | (unsigned)blob[i + 1] << 8 | blob[i + 2];

		enc[o++] = b64[v >> 18 & 63];
		enc[o++] = b64[v >> 12 & 63];
		enc[o++] = b64[v >> 6 & 63];
		enc[o++] = b64[v & 63];
	}
	enc[o] = '\0';
	snprintf(out, n, "ssh-ed25519 %s soak", enc);
}

struct agent_id {
	char boot[160]; /* the bootstrap token until registered */
	char key[128];
	char boot_id[40];
	char mac[20];
};

static struct agent_id *ids;
static int power_tags = 40;
static long stream_open;

static struct xfer *
next_request(struct actor *a, double t0)
{
	char path[200];
	unsigned op;

	if (a->agent) {
		struct agent_id *id = &ids[a->idx];
		char host[32];

		snprintf(host, sizeof host, "ag%04d", a->idx);
		if (!a->registered)
			return xfer_new(a, C_REG, "POST", "/v1/agent/register",
			                "/v1/agent/register", id->boot,
			                json_pack("{s:i, s:s, s:s, s:s, s:[s], s:s}", "format", 1,
			                          "agent_version", "0.1.0", "hostname", host,
			                          "boot_id", id->boot_id, "macs", id->mac,
			                          "ssh_host_key", id->key),
			                NULL, 30000);
		return xfer_new(
		        a, C_HB, "POST", "/v1/agent/heartbeat", "/v1/agent/heartbeat", a->token,
		        json_pack("{s:s, s:s, s:s, s:I}", "boot_id", id->boot_id, "agent_version",
		                  "0.1.0", "status", "idle", "uptime_s", (json_int_t)(t0 + 1000)),
		        NULL, 30000);
	}
	op = rnd(1000);
	if (op < 5) {
		snprintf(path, sizeof path, "pw%02u", rnd((unsigned)power_tags));
		return xfer_new(a, C_POWER, "POST", "/v1/actions/power", "/v1/actions/power",
		                a->token,
		                json_pack("{s:{s:s}, s:s}", "selector", "tag", path, "target",
		                          rnd(2) ? "on" : "off"),
		                NULL, 30000);
	}
	if (op < 35 && stream_open < 16) {
		stream_open++;
		return xfer_new(a, C_STREAM, "GET", "/v1/events/stream", "/v1/events/stream",
		                a->token, NULL, NULL, 5000 + rnd(10000));
	}
	if (op < 235 || (op < 300 && !a->etag[0])) {
		struct xfer *x;

		snprintf(path, sizeof path, "/v1/nodes/pa%02d", a->idx);
		if (!a->etag[0])
			x = xfer_new(a, C_READ, "GET", path, "/v1/nodes/{node}", a->token, NULL,
			             NULL, 30000);
		else
			x = xfer_new(a, C_PATCH, "PATCH", path, "/v1/nodes/{node}", a->token,
			             json_pack("{s:s}", "model", rnd(2) ? "soak-a" : "soak-b"),
			             a->etag, 30000);
		x->own = 1;
		return x;
	}
	switch (op % 6) {
	case 0:
		return xfer_new(a, C_READ, "GET", "/v1/nodes?limit=100", "/v1/nodes", a->token,
		                NULL, NULL, 30000);
	case 1:
		snprintf(path, sizeof path, "/v1/nodes/bm%03u", rnd((unsigned)power_tags * 10));
		return xfer_new(a, C_READ, "GET", path, "/v1/nodes/{node}", a->token, NULL, NULL,
		                30000);
	case 2:
		return xfer_new(a, C_READ, "GET", "/v1/jobs?limit=50", "/v1/jobs", a->token, NULL,
		                NULL, 30000);
	case 3:
		return xfer_new(a, C_READ, "GET", "/metrics", "/metrics", a->token, NULL, NULL,
		                30000);
	case 4:
		return xfer_new(a, C_READ, "GET", "/v1/events?limit=50", "/v1/events", a->token,
		                NULL, NULL, 30000);
	default:
		return xfer_new(a, C_READ, "GET", "/v1/rollouts", "/v1/rollouts", a->token, NULL,
		                NULL, 30000);
	}
}

static void
done(struct xfer *x, CURLcode rc, double now, double think)
{
	struct actor *a = x->a;
	long st = 0;
	curl_off_t us = 0;
	int ok;

	curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &st);
	if (x->c == C_STREAM) {
		stream_open--;
		curl_easy_getinfo(a->h, CURLINFO_STARTTRANSFER_TIME_T, &us);
		/* A stream ends by our own timeout; what counts is that it was answered 200. */
		ok = st == 200 && (rc == CURLE_OK || rc == CURLE_OPERATION_TIMEDOUT);
	} else {
		curl_easy_getinfo(a->h, CURLINFO_TOTAL_TIME_T, &us);
		ok = rc == CURLE_OK && st / 100 == 2;
	}
	lats[x->c].total++;
	if (ok) {
		lat_add(&lats[x->c], (double)us / 1000.0);
	} else {
		lats[x->c].errors++;
		if (rc != CURLE_OK && !(x->c == C_STREAM && rc == CURLE_OPERATION_TIMEDOUT))
			err_add("transport error", (long)rc, x->route);
		else
			err_add("HTTP", st, x->route);
		if (nerrs <= 8 && x->body)
			fprintf(stderr, "soak: %s -> %ld %.300s\n", x->route, st, x->body);
	}
	a->busy = 0;
	if (a->agent) {
		json_t *j = ok ? json_loads(x->body ? x->body : "", 0, NULL) : NULL;
		json_int_t hb = json_integer_value(json_object_get(j, "heartbeat_s"));

		if (ok && x->c == C_REG) {
			const char *t = json_string_value(json_object_get(j, "token"));

			snprintf(a->token, sizeof a->token, "%s", t ? t : "");
			a->registered = t != NULL;
		}
		if (hb > 0)
			a->hb_s = (int)hb;
		/* The agent's own rule: the next heartbeat one period later, also after a failure.
		 */
		a->next = now + (a->hb_s > 0 ? a->hb_s : 30);
		json_decref(j);
	} else {
		/* Lost track (an error): read the node again before the next PATCH. */
		if (x->own)
			snprintf(a->etag, sizeof a->etag, "%s", ok ? x->etag : "");
		a->next = now + think;
	}
}

int
main(int argc, char **argv)
{
	const char *admin, *out;
	double dur, think, t0, t, end;
	int nagents, nclients, n, i, running = 0;
	struct actor *actors;
	CURLM *m;
	CURL *h;
	FILE *f;

	if (argc != 7) {
		fprintf(stderr,
		        "usage: rp_soak_load BASE ADMIN_TOKEN DURATION_S AGENTS CLIENTS OUT\n");
		return 2;
	}
	base = argv[1];
	admin = argv[2];
	dur = atof(argv[3]);
	nagents = atoi(argv[4]);
	nclients = atoi(argv[5]);
	out = argv[6];
	think = (getenv("THINK_MS") ? atof(getenv("THINK_MS")) : 200.0) / 1000.0;
	if (getenv("POWER_TAGS"))
		power_tags = atoi(getenv("POWER_TAGS"));
	rng ^= (uint64_t)time(NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	n = nagents + nclients;
	actors = calloc((size_t)n, sizeof *actors);
	ids = calloc((size_t)nagents + 1, sizeof *ids);
	h = curl_easy_init();
	if (actors == NULL || ids == NULL || h == NULL)
		return 1;
	/* Setup: tokens through the API, as an operator would mint them. */
	for (i = 0; i < nclients; i++) {
		char name[32];
		json_t *j;

		snprintf(name, sizeof name, "soak-c%02d", i);
		j = setup_call(h, admin, "/v1/tokens",
		               json_pack("{s:s, s:s}", "name", name, "role", "operator"));
		if (j == NULL)
			return 1;
		snprintf(actors[nagents + i].token, sizeof actors[0].token, "%s",
		         json_string_value(json_object_get(j, "token")));
		json_decref(j);
	}
	for (i = 0; i < nagents; i++) {
		char node[32];
		json_t *j;

		snprintf(node, sizeof node, "ag%04d", i);
		j = setup_call(h, admin, "/v1/bootstrap-tokens",
		               json_pack("{s:s, s:i}", "node", node, "expires_in_s", 7200));
		if (j == NULL)
			return 1;
		snprintf(ids[i].boot, sizeof ids[i].boot, "%s",
		         json_string_value(json_object_get(j, "token")));
		json_decref(j);
		host_key(ids[i].key, sizeof ids[i].key);
		snprintf(ids[i].boot_id, sizeof ids[i].boot_id, "%08x-0000-4000-8000-%012x",
		         rnd(1u << 31), (unsigned)i);
		snprintf(ids[i].mac, sizeof ids[i].mac, "02:50:00:00:%02x:%02x", i >> 8 & 255,
		         i & 255);
	}
	curl_easy_cleanup(h);
	fprintf(stderr, "soak: %d client tokens and %d bootstrap tokens minted; load for %.0f s\n",
	        nclients, nagents, dur);

	m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)n + 16);
	t0 = now_s();
	end = t0 + dur;
	for (i = 0; i < n; i++) {
		actors[i].agent = i < nagents;
		actors[i].idx = i < nagents ? i : i - nagents;
		actors[i].h = curl_easy_init();
		actors[i].next = t0 + (i < nagents ? 10.0 * i / (nagents ? nagents : 1)
		                                   : think * rnd(1000) / 1000.0);
	}
	for (;;) {
		CURLMsg *msg;
		int left, wait_ms = 50;

		t = now_s();
		if (t >= end && running == 0)
			break;
		for (i = 0; i < n && t < end; i++) {
			if (!actors[i].busy && actors[i].next <= t) {
				struct xfer *x = next_request(&actors[i], t);

				curl_multi_add_handle(m, actors[i].h);
				(void)x;
				running++;
			}
		}
		curl_multi_perform(m, &left);
		while ((msg = curl_multi_info_read(m, &left))) {
			struct xfer *x;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			curl_multi_remove_handle(m, msg->easy_handle);
			running--;
			done(x, msg->data.result, now_s(), think);
			xfer_free(x);
		}
		if (t >= end)
			wait_ms = 100;
		curl_multi_poll(m, NULL, 0, wait_ms, NULL);
	}
	f = fopen(out, "w");
	if (f == NULL)
		return 1;
	fprintf(f, "load: %d agents, %d API clients (think %.0f ms), %.0f s\n", nagents, nclients,
	        think * 1000, dur);
	fprintf(f, "%-16s %9s %7s %9s %9s %9s\n", "route class", "requests", "errors", "p50 ms",
	        "p99 ms", "max ms");
	for (i = 0; i < NCLS; i++) {
		struct lat *l = &lats[i];

		qsort(l->v, l->n, sizeof *l->v, cmp_d);
		fprintf(f, "%-16s %9ld %7ld %9.1f %9.1f %9.1f\n", cls_name[i], l->total, l->errors,
		        pct(l, 0.5), pct(l, 0.99), l->n ? l->v[l->n - 1] : 0.0);
	}
	{
		long tot = 0, te = 0;

		for (i = 0; i < NCLS; i++)
			tot += lats[i].total, te += lats[i].errors;
		fprintf(f, "total %ld requests (%.0f/s), %ld errors\n", tot, tot / dur, te);
	}
	for (i = 0; i < nerrs; i++)
		fprintf(f, "  error: %s  x%ld\n", errs[i].key, errs[i].n);
	fclose(f);
	for (i = 0; i < n; i++)
		curl_easy_cleanup(actors[i].h);
	curl_multi_cleanup(m);
	curl_global_cleanup();
	return 0;
}
