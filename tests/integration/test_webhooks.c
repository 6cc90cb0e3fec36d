/* Webhooks through the real rackpilotd and a loopback receiver (tests/webhooks/receiver.py)
 * that checks every signature with Python's own hmac and misbehaves on demand: it fails, it
 * is busy (503 + Retry-After), it hangs past the deliverer's timeout, it redirects, it answers
 * without end, it speaks TLS with a certificate nobody trusts. Checked: what matches is
 * delivered, signed and in event order per webhook; a failure holds the webhook's later
 * deliveries until it recovers; kill -9 loses nothing; a delivery past webhook_max_age is
 * given up with an event; the secret is never returned, logged or stored in clear; every bad
 * request is a 400 that creates nothing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SECRET "s3cret-for-the-webhook-test"

static char work[256], conf[300];
static int port, tls_port;
static const char *args[] = {"-c", conf, NULL};

/* The server's settings: [server] lines of its configuration file. */
static void
configure(const char *settings)
{
	FILE *f = fopen(conf, "w");

	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\nwebhook_timeout = 2\n%s", settings);
	fclose(f);
}

/* Start the server (in dir, or a new one) with a proxy in its environment that nothing
 * answers: deliveries must not go through it. (The test's own requests must not either:
 * the variables are set for the server alone.) */
static void
start(const char *dir)
{
	static const char *const vars[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", NULL};
	const char *const *v;

	for (v = vars; *v; v++)
		setenv(*v, "http://127.0.0.1:1", 1);
	server_start(&S, dir, args);
	for (v = vars; *v; v++)
		unsetenv(*v);
}

static void
receiver_start(int p, const char *name, const char *tls)
{
	char out[400], buf[64] = "";
	int i;

	snprintf(out, sizeof out, "%s/%s.out", work, name);
	sh("python3 '%s/tests/webhooks/receiver.py' %d '%s/%s.log' '%s' %s > '%s' 2>&1 & echo $! > "
	   "'%s/%s.pid'",
	   rp_test_src, p, work, name, SECRET, tls, out, work, name);
	for (i = 0; i < 100 && strncmp(buf, "ready", 5) != 0; i++) {
		usleep(100000);
		FILE *f = fopen(out, "r");

		if (f) {
			if (fgets(buf, sizeof buf, f) == NULL)
				buf[0] = '\0';
			fclose(f);
		}
	}
	if (strncmp(buf, "ready", 5) != 0)
		fail_msg("the receiver %s did not start", name);
}

static void
receiver_mode(int p, const char *mode)
{
	sh("curl -sf --noproxy '*' -o /dev/null --data '%s' http://127.0.0.1:%d/control", mode, p);
}

/* What the receiver logged: one object per request, in order. */
static json_t *
received(const char *name)
{
	char path[400], line[65536];
	json_t *all = json_array();
	FILE *f;

	snprintf(path, sizeof path, "%s/%s.log", work, name);
	if ((f = fopen(path, "r")) == NULL)
		return all;
	while (fgets(line, sizeof line, f)) {
		json_error_t je;
		json_t *o = json_loads(line, 0, &je);

		if (o == NULL)
			fail_msg("receiver log line is not JSON: %.200s", line);
		json_array_append_new(all, o);
	}
	fclose(f);
	return all;
}

/* The requests the receiver saw for one event action (in order), as a new array. */
static json_t *
received_for(const char *name, const char *action)
{
	json_t *all = received(name), *some = json_array(), *r;
	size_t i;

	json_array_foreach(all, i, r)
	{
		if (!strcmp(jstr(r, "event") ?: "", action))
			json_array_append(some, r);
	}
	json_decref(all);
	return some;
}

/* Wait until the webhook has no pending delivery (or timeout_s passes): its object then. */
static json_t *
settled(const char *hook, int timeout_s)
{
	char path[200];
	json_t *w = NULL;
	int i;

	snprintf(path, sizeof path, "/v1/webhooks/%s", hook);
	for (i = 0; i < timeout_s * 10; i++) {
		json_decref(w);
		w = get_json(&S, path);
		if (json_integer_value(json_object_get(w, "pending")) == 0)
			return w;
		usleep(100000);
	}
	fail_msg("webhook %s still has %lld pending after %d s", hook,
	         (long long)json_integer_value(json_object_get(w, "pending")), timeout_s);
	return NULL;
}

/* The delivery log of a webhook, newest first. */
static json_t *
deliveries(const char *hook, const char *query)
{
	char path[300];
	json_t *page, *items;

	snprintf(path, sizeof path, "/v1/webhooks/%s/deliveries%s", hook, query ? query : "");
	page = get_json(&S, path);
	items = json_incref(json_object_get(page, "items"));
	json_decref(page);
	return items;
}

static void
make_rack(const char *name)
{
	struct reply r;

	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", name), 201);
	reply_free(&r);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(work, sizeof work, "/tmp/rp-webhooks-%d", (int)getpid());
	sh("rm -rf '%s' && mkdir -m 700 '%s'", work, work);
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", work);
	port = free_ports(2);
	tls_port = port + 1;
	receiver_start(port, "recv", "");
	/* A certificate for 127.0.0.1 that no system store trusts. */
	sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "
	   "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '%s/tls.key' -out "
	   "'%s/tls.crt' 2>/dev/null",
	   work, work);
	{
		char tls[600];

		snprintf(tls, sizeof tls, "--tls '%s/tls.crt' '%s/tls.key'", work, work);
		receiver_start(tls_port, "tls", tls);
	}
	configure("webhook_max_age = 3600\n");
	start(NULL);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	server_stop(&S, SIGTERM);
	server_cleanup(&S);
	sh("for p in '%s'/*.pid; do [ -f \"$p\" ] && kill $(cat \"$p\") 2>/dev/null; done; rm -rf "
	   "'%s'",
	   work, work);
	return 0;
}

static void
test_bad_requests(void **state)
{
	static const char *const bad[] = {
	        "{\"name\":\"b\",\"url\":\"ftp://127.0.0.1/x\",\"events\":[\"*\"],\"secret\":"
	        "\"" SECRET "\"}",
	        "{\"name\":\"b\",\"url\":\"http://user:pw@127.0.0.1/x\",\"events\":[\"*\"],"
	        "\"secret\":\"" SECRET "\"}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/a b\",\"events\":[\"*\"],\"secret\":"
	        "\"" SECRET "\"}",
	        "{\"name\":\"b\",\"url\":\"http:///x\",\"events\":[\"*\"],\"secret\":\"" SECRET
	        "\"}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/x\",\"events\":[],\"secret\":\"" SECRET
	        "\"}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/x\",\"events\":[\"Rack.*\"],"
	        "\"secret\":\"" SECRET "\"}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/x\",\"events\":[\"rack..x\"],"
	        "\"secret\":\"" SECRET "\"}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/x\",\"events\":[\"*\"],\"secret\":"
	        "\"short\"}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/x\",\"events\":[\"*\"]}",
	        "{\"name\":\"b\",\"url\":\"http://127.0.0.1/"
	        "x\",\"events\":[\"*\"],\"secret\":\"" SECRET "\",\"pending\":3}",
	};
	char viewer[128], op[128];
	struct reply r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		long st = req(&S, S.admin, "POST", "/v1/webhooks", "application/json", bad[i],
		              strlen(bad[i]), NULL, &r);

		if (st != 400 || json_object_get(r.json, "error") == NULL)
			fail_msg("%s: %ld %s", bad[i], st, r.body ? r.body : "");
		reply_free(&r);
	}
	assert_int_equal(count_all(&S, "/v1/webhooks"), 0);
	/* Admins only: a receiver's URL can be a credential. */
	make_token(&S, "viewer", viewer);
	make_token(&S, "operator", op);
	assert_int_equal(call(&S, viewer, "GET", "/v1/webhooks", &r, NULL), 403);
	reply_free(&r);
	assert_int_equal(call(&S, op, "POST", "/v1/webhooks", &r, "{s:s, s:s, s:[s], s:s}", "name",
	                      "b", "url", "http://127.0.0.1/", "events", "*", "secret", SECRET),
	                 403);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/webhooks"), 0);
	/* No name: one is made of its id. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/webhooks", &r, "{s:s, s:[s], s:s, s:b}",
	                      "url", "http://127.0.0.1:9/x", "events", "node.created", "secret",
	                      SECRET, "enabled", 0),
	                 201);
	assert_int_equal(strncmp(jstr(r.json, "name"), "webhook-", 8), 0);
	assert_int_equal(strncmp(jstr(r.json, "name") + 8, jstr(r.json, "id"), 8), 0);
	{
		char path[100];
		struct reply g;

		snprintf(path, sizeof path, "/v1/webhooks/%s", jstr(r.json, "id"));
		assert_int_equal(call(&S, S.admin, "DELETE", path, &g, NULL), 204);
		reply_free(&g);
	}
	reply_free(&r);
}

static void
test_delivery(void **state)
{
	char url[200], secret_file[400];
	json_t *w, *got, *d;
	struct reply r;

	(void)state;
	snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", port);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/webhooks", &r, "{s:s, s:s, s:[s,s,s], s:s}",
	                      "name", "ops", "url", url, "events", "rack.*", "node.created",
	                      "webhook.gave_up", "secret", SECRET),
	                 201);
	/* The secret is taken, never shown. */
	assert_true(json_is_true(json_object_get(r.json, "secret_set")));
	assert_null(json_object_get(r.json, "secret"));
	assert_null(strstr(r.body, SECRET));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/webhooks/ops", &r, NULL), 200);
	assert_null(strstr(r.body, SECRET));
	reply_free(&r);

	make_rack("wh-r1");
	make_node(&S, "{s:s}", "name", "wh-n1");
	/* Not subscribed: node.updated. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/wh-n1", &r, "{s:s}", "vendor", "x"),
	                 200);
	reply_free(&r);
	json_decref(settled("ops", 20));
	got = received("recv");
	assert_int_equal(json_array_size(got), 2);
	d = json_array_get(got, 0);
	assert_string_equal(jstr(d, "event"), "rack.created");
	assert_true(json_is_true(json_object_get(d, "sig_ok")));
	assert_string_equal(jstr(json_object_get(json_object_get(d, "body"), "event"), "action"),
	                    "rack.created");
	assert_string_equal(
	        jstr(json_object_get(json_object_get(json_object_get(d, "body"), "event"),
	                             "object"),
	             "name"),
	        "wh-r1");
	assert_string_equal(jstr(json_object_get(json_object_get(d, "body"), "webhook"), "name"),
	                    "ops");
	assert_string_equal(jstr(json_array_get(got, 1), "event"), "node.created");
	assert_true(json_is_true(json_object_get(json_array_get(got, 1), "sig_ok")));
	json_decref(got);
	/* The log: both delivered at the first attempt, status 200. */
	w = deliveries("ops", NULL);
	assert_int_equal(json_array_size(w), 2);
	assert_string_equal(jstr(json_array_get(w, 0), "action"), "node.created");
	assert_string_equal(jstr(json_array_get(w, 0), "state"), "delivered");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(w, 0), "attempts")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(w, 0), "last_status")),
	                 200);
	json_decref(w);
	/* Nowhere in clear: not in the events, the server's log or the database's files. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?limit=1000", &r, NULL), 200);
	assert_null(strstr(r.body, SECRET));
	/* Nor the URL, which viewers would read there (it can be a credential). */
	assert_null(strstr(r.body, "/hook"));
	reply_free(&r);
	snprintf(secret_file, sizeof secret_file, "%s", S.dir);
	assert_int_equal(sh_rc("grep -r -q -a '%s' '%s' '%s'", SECRET, secret_file, S.log), 1);
	if (test_database(S.dir))
		assert_int_equal(sh_rc("pg_dump -d '%s' 2>/dev/null | grep -q '%s'",
		                       test_database(S.dir), SECRET),
		                 1);
}

/* A receiver that fails holds its webhook's later deliveries: they go, in order, when it
 * recovers. Then: busy with Retry-After, a hang past the timeout, a redirect, an endless
 * answer. */
static void
test_failures_and_order(void **state)
{
	json_t *w, *got, *r2, *r3, *d;
	size_t i;
	int last2 = -1, first3 = -1;

	(void)state;
	receiver_mode(port, "fail");
	make_rack("wh-r2");
	make_rack("wh-r3");
	sleep(4);
	/* r2 was tried (more than once: 1 s, then 2 s later), r3 not yet: it waits behind. */
	r2 = received_for("recv", "rack.created");
	assert_true(json_array_size(r2) >= 3); /* r1 once, r2 at least twice */
	json_decref(r2);
	w = deliveries("ops", "?state=pending");
	assert_int_equal(json_array_size(w), 2);
	d = json_array_get(w, 1); /* the older: r2 */
	assert_true(json_integer_value(json_object_get(d, "attempts")) >= 2);
	assert_int_equal(json_integer_value(json_object_get(d, "last_status")), 500);
	/* The receiver's answer, one printable line, cut short. */
	assert_non_null(strstr(jstr(d, "last_error"), "HTTP 500: receiver broke"));
	assert_true(strlen(jstr(d, "last_error")) < 300);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(w, 0), "attempts")), 0);
	json_decref(w);
	/* Prometheus sees the queue. */
	{
		struct reply m;

		assert_int_equal(call(&S, S.admin, "GET", "/metrics", &m, NULL), 200);
		assert_non_null(strstr(m.body, "\nrackpilot_webhook_deliveries_pending 2\n"));
		reply_free(&m);
	}
	receiver_mode(port, "ok");
	json_decref(settled("ops", 30));
	/* In order: every r2 request before the first r3 one. */
	got = received("recv");
	json_array_foreach(got, i, d)
	{
		const char *rack =
		        jstr(json_object_get(json_object_get(json_object_get(d, "body"), "event"),
		                             "object"),
		             "name");

		if (rack && !strcmp(rack, "wh-r2"))
			last2 = (int)i;
		if (rack && !strcmp(rack, "wh-r3") && first3 < 0)
			first3 = (int)i;
	}
	assert_true(last2 >= 0 && first3 > last2);
	json_decref(got);

	/* Busy: the receiver's Retry-After (2 s) is kept. */
	receiver_mode(port, "busy");
	make_rack("wh-r4");
	usleep(1500000);
	receiver_mode(port, "ok");
	json_decref(settled("ops", 20));
	r3 = received_for("recv", "rack.created");
	d = json_array_get(r3, json_array_size(r3) - 1);
	assert_string_equal(jstr(d, "mode"), "ok");
	json_decref(r3);
	w = deliveries("ops", NULL);
	assert_string_equal(jstr(json_array_get(w, 0), "action"), "rack.created");
	assert_string_equal(jstr(json_array_get(w, 0), "state"), "delivered");
	assert_true(json_integer_value(json_object_get(json_array_get(w, 0), "attempts")) >= 2);
	json_decref(w);

	/* Hangs past webhook_timeout (2 s): a timeout, then delivered. */
	receiver_mode(port, "hang");
	make_rack("wh-r5");
	sleep(3);
	receiver_mode(port, "ok");
	json_decref(settled("ops", 30));
	w = deliveries("ops", NULL);
	d = json_array_get(w, 0);
	assert_string_equal(jstr(d, "state"), "delivered");
	assert_true(json_integer_value(json_object_get(d, "attempts")) >= 2);
	json_decref(w);

	/* A redirect is not followed: a failure, and nothing asked for elsewhere. */
	receiver_mode(port, "redirect");
	make_rack("wh-r6");
	sleep(2);
	w = deliveries("ops", "?state=pending");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(w, 0), "last_status")),
	                 302);
	json_decref(w);
	receiver_mode(port, "big");
	json_decref(settled("ops", 30));
	got = received("recv");
	json_array_foreach(got, i, d)
	{
		assert_string_not_equal(jstr(d, "path"), "/elsewhere");
		assert_null(json_object_get(d, "method"));
	}
	json_decref(got);
	/* An endless answer is cut off; the 200 it began with counts. */
	w = deliveries("ops", NULL);
	assert_string_equal(jstr(json_array_get(w, 0), "state"), "delivered");
	json_decref(w);
	receiver_mode(port, "ok");
}

/* kill -9 during a POST (the receiver holds it), with another delivery waiting behind: the
 * restarted server sends both, in order; the interrupted one again (at least once). */
static void
test_restart(void **state)
{
	char dir[256];
	json_t *got, *w, *d;
	size_t i, n0;
	int seen = 0, k;

	(void)state;
	got = received_for("recv", "rack.created");
	n0 = json_array_size(got);
	json_decref(got);
	receiver_mode(port, "hang");
	make_rack("wh-r7");
	make_rack("wh-r8");
	for (k = 0; k < 50 && !seen; k++) {
		usleep(100000);
		got = received_for("recv", "rack.created");
		seen = json_array_size(got) > n0;
		json_decref(got);
	}
	assert_true(seen); /* r7's POST is in the receiver's hands */
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGKILL);
	receiver_mode(port, "ok");
	start(dir);
	json_decref(settled("ops", 30));
	w = deliveries("ops", NULL);
	for (i = 0; i < 2; i++) {
		d = json_array_get(w, i);
		assert_string_equal(jstr(d, "state"), "delivered");
	}
	/* r7: the interrupted attempt and the one after the restart. */
	assert_true(json_integer_value(json_object_get(json_array_get(w, 1), "attempts")) >= 2);
	json_decref(w);
	got = received_for("recv", "rack.created");
	assert_string_equal(
	        jstr(json_object_get(
	                     json_object_get(
	                             json_object_get(json_array_get(got, json_array_size(got) - 1),
	                                             "body"),
	                             "event"),
	                     "object"),
	             "name"),
	        "wh-r8");
	json_decref(got);
}

/* A patch: a new secret (its time moves, never its value shown, not even in the event), and a
 * disabled webhook queues nothing. */
static void
test_update(void **state)
{
	json_t *before, *after, *got, *ev;
	struct reply r;
	size_t n;

	(void)state;
	before = get_json(&S, "/v1/webhooks/ops");
	/* A bad patch is a 400 that changes nothing; an unknown webhook's log is a 404. */
	{
		static const char *const bad[] = {"{\"url\":\"ftp://127.0.0.1/x\"}",
		                                  "{\"events\":[]}", "{\"secret\":\"short\"}",
		                                  "{\"enabled\":\"yes\"}", "{\"pending\":0}"};
		json_t *same;
		size_t i;

		for (i = 0; i < sizeof bad / sizeof *bad; i++) {
			assert_int_equal(req(&S, S.admin, "PATCH", "/v1/webhooks/ops",
			                     "application/json", bad[i], strlen(bad[i]), NULL, &r),
			                 400);
			assert_non_null(json_object_get(r.json, "error"));
			reply_free(&r);
		}
		same = get_json(&S, "/v1/webhooks/ops");
		assert_true(json_equal(same, before));
		json_decref(same);
		assert_int_equal(call(&S, S.admin, "GET", "/v1/webhooks/nope/deliveries", &r, NULL),
		                 404);
		assert_error(&r, 404, "NOT_FOUND");
		reply_free(&r);
	}
	usleep(5000);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/webhooks/ops", &r, "{s:s, s:b}", "secret",
	                      SECRET, "enabled", 0),
	                 200);
	assert_null(strstr(r.body, SECRET));
	reply_free(&r);
	after = get_json(&S, "/v1/webhooks/ops");
	assert_string_not_equal(jstr(before, "secret_updated_at"),
	                        jstr(after, "secret_updated_at"));
	assert_true(json_is_false(json_object_get(after, "enabled")));
	json_decref(before);
	json_decref(after);
	ev = get_json(&S, "/v1/events?action=webhook.updated&limit=10");
	assert_true(json_array_size(json_object_get(ev, "items")) >= 1);
	{
		char *text = json_dumps(ev, 0);

		assert_null(strstr(text, SECRET));
		free(text);
	}
	json_decref(ev);
	got = received("recv");
	n = json_array_size(got);
	json_decref(got);
	make_rack("wh-off");
	sleep(2);
	got = received("recv");
	assert_int_equal(json_array_size(got), n);
	json_decref(got);
	after = get_json(&S, "/v1/webhooks/ops");
	assert_int_equal(json_integer_value(json_object_get(after, "pending")), 0);
	json_decref(after);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/webhooks/ops", &r, "{s:b}", "enabled", 1),
	                 200);
	reply_free(&r);
}

/* TLS is verified: a receiver whose certificate no CA vouches for fails; trusted through
 * webhook_ca_file, it gets it. A delivery past webhook_max_age is given up with an event,
 * which another webhook hears of; the dead one never hears of itself. */
static void
test_tls_and_giving_up(void **state)
{
	char url[200], dir[256], settings[600];
	json_t *w, *ev, *got;
	struct reply r;
	size_t n;

	(void)state;
	snprintf(url, sizeof url, "https://127.0.0.1:%d/hook", tls_port);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/webhooks", &r, "{s:s, s:s, s:[s], s:s}",
	                      "name", "tls", "url", url, "events", "*", "secret", SECRET),
	                 201);
	reply_free(&r);
	make_rack("wh-r9");
	sleep(2);
	w = deliveries("tls", "?state=pending");
	assert_true(json_array_size(w) >= 1);
	if (strstr(jstr(json_array_get(w, json_array_size(w) - 1), "last_error") ?: "",
	           "certificate") == NULL)
		fail_msg("not a certificate error: %s",
		         jstr(json_array_get(w, json_array_size(w) - 1), "last_error") ?: "(none)");
	json_decref(w);
	got = received("tls");
	assert_int_equal(json_array_size(got), 0);
	json_decref(got);

	/* Trusted now. */
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGTERM);
	snprintf(settings, sizeof settings,
	         "webhook_max_age = 3600\nwebhook_ca_file = %s/tls.crt\n", work);
	configure(settings);
	start(dir);
	json_decref(settled("tls", 30));
	got = received_for("tls", "rack.created");
	assert_true(json_array_size(got) >= 1);
	assert_true(json_is_true(json_object_get(json_array_get(got, 0), "sig_ok")));
	json_decref(got);

	/* A receiver gone for good, and a max age of 3 s. */
	server_stop(&S, SIGTERM);
	configure("webhook_max_age = 3\n");
	start(dir);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/webhooks/tls", &r, NULL), 204);
	reply_free(&r);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/nobody", free_ports(1));
	assert_int_equal(call(&S, S.admin, "POST", "/v1/webhooks", &r, "{s:s, s:s, s:[s], s:s}",
	                      "name", "dead", "url", url, "events", "*", "secret", SECRET),
	                 201);
	reply_free(&r);
	/* A second dead webhook for everything: their give-ups must not feed each other. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/webhooks", &r, "{s:s, s:s, s:[s], s:s}",
	                      "name", "dead2", "url", url, "events", "*", "secret", SECRET),
	                 201);
	reply_free(&r);
	make_rack("wh-r10");
	make_rack("wh-r11");
	json_decref(settled("dead", 30));
	json_decref(settled("dead2", 30));
	w = deliveries("dead", "?state=failed");
	assert_true(json_array_size(w) >= 2);
	assert_non_null(strstr(jstr(json_array_get(w, 0), "last_error"), "webhook_max_age"));
	json_decref(w);
	ev = get_json(&S, "/v1/events?action=webhook.gave_up&limit=1000");
	/* dead: r10, r11 and dead2's creation; dead2: r10, r11; their give-ups about each
	 * other are given up without a word. */
	n = json_array_size(json_object_get(ev, "items"));
	if (n < 5 || n > 5)
		fail_msg("%zu webhook.gave_up events, not 5", n);
	json_decref(ev);
	sleep(3);
	ev = get_json(&S, "/v1/events?action=webhook.gave_up&limit=1000");
	assert_int_equal(json_array_size(json_object_get(ev, "items")), n);
	json_decref(ev);
	/* "ops" heard of them all; "dead" only of dead2's two, never of its own three. */
	json_decref(settled("ops", 20));
	got = received_for("recv", "webhook.gave_up");
	assert_int_equal(json_array_size(got), 5);
	json_decref(got);
	w = deliveries("dead", NULL);
	{
		json_t *d;
		size_t i, k = 0;

		json_array_foreach(w, i, d) k += !strcmp(jstr(d, "action"), "webhook.gave_up");
		assert_int_equal(k, 2);
	}
	json_decref(w);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_bad_requests),
	        cmocka_unit_test(test_delivery),
	        cmocka_unit_test(test_failures_and_order),
	        cmocka_unit_test(test_restart),
	        cmocka_unit_test(test_update),
	        cmocka_unit_test(test_tls_and_giving_up),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
