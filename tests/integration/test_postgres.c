/*
 * rackpilotd on PostgreSQL, where it differs from SQLite (ctest -L pg only: it needs the
 * suite's cluster, RP_TEST_PG): two servers on one database, each answering for what the
 * other wrote, one leading, the other taking the lead when the leader dies; the lead taken
 * again after the database dropped it; connections the server dropped are made again, with no
 * request lost; migrations applied once when servers start together; a password in the connection
 * string appears in no log, no `rackpilotd -n` and no answer; and a site built on SQLite
 * moves to PostgreSQL with --migrate-to, every API read answering the same after.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "harness.h"

static const char *pg;

/* Run rackpilotd with args (a shell word list), wait at most 20 s: its exit status, and what
 * it printed in out. */
static int
run_for(int secs, const char *args, char *out, size_t len)
{
	char cmd[2048];
	size_t got = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof cmd, "timeout %d '%s' %s 2>&1", secs, rp_test_bin, args);
	assert_non_null(p = popen(cmd, "r"));
	out[0] = '\0';
	while (got + 1 < len && fgets(out + got, (int)(len - got), p))
		got = strlen(out);
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
run(const char *args, char *out, size_t len)
{
	return run_for(20, args, out, len);
}

/* The database name in a test_database() URL. */
static void
db_name(const char *url, char *name, size_t len)
{
	snprintf(name, len, "%.*s", (int)strcspn(url + 14, "?"), url + 14);
}

/* A second server on a database another one leads follows it; a connection PostgreSQL ends
 * (here: every one of the server's, its claim's included) is made again, and no request sees
 * the loss; the lead is taken again. */
static void
test_one_server_reconnects(void **state)
{
	struct server s;
	struct reply r;
	char url[600], name[64], args[1200], out[4096], other[300], log[65536];
	int i;

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(url, sizeof url, "%s", test_database(s.dir));
	db_name(url, name, sizeof name);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r1"), 201);
	reply_free(&r);
	snprintf(other, sizeof other, "%s-other", s.dir);
	/* Under the first one's name (both default to the host name): refused, saying whose. */
	snprintf(args, sizeof args, "--data-dir '%s' --database '%s' --listen 127.0.0.1:0", other,
	         url);
	assert_int_equal(run_for(10, args, out, sizeof out), 1);
	assert_non_null(strstr(out, "another live server runs under the name"));
	assert_non_null(strstr(out, "give each server its own server_name"));
	snprintf(args, sizeof args,
	         "--data-dir '%s' --database '%s' --listen 127.0.0.1:0 --server-name other", other,
	         url);
	assert_int_equal(run_for(3, args, out, sizeof out), 124);
	assert_non_null(strstr(out, "another rackpilotd leads the servers of this database; this "
	                            "server follows"));

	/* PostgreSQL ends every connection of this server (a restart or a failover would). */
	sh("psql -qX 'host=%s user=rp dbname=postgres' -c \"SELECT pg_terminate_backend(pid) "
	   "FROM pg_stat_activity WHERE datname = '%s'\" >/dev/null",
	   pg, name);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/racks/r1", &r, NULL), 200);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r2"), 201);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/racks", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	reply_free(&r);
	/* Within a few seconds the server claims the lead again: a second one still follows. */
	for (i = 0; i < 100; i++) {
		slurp(s.log, log, sizeof log);
		if (strstr(log, "claiming it again"))
			break;
		usleep(100000);
	}
	assert_non_null(strstr(log, "claiming it again"));
	usleep(500000);
	assert_int_equal(run_for(3, args, out, sizeof out), 124);
	assert_non_null(strstr(out, "this server follows"));
	sh("rm -rf '%s'", other);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An event stream on one server, watching for a text and noting when it arrived. */
struct watch {
	struct server *s;
	const char *want;
	char buf[16384];
	size_t len;
	int64_t seen_ms; /* 0 until want arrived */
};

static size_t
watch_write(char *p, size_t sz, size_t n, void *arg)
{
	struct watch *w = arg;
	size_t k = sz * n;

	if (k > sizeof w->buf - 1 - w->len)
		k = sizeof w->buf - 1 - w->len;
	memcpy(w->buf + w->len, p, k);
	w->len += k;
	w->buf[w->len] = '\0';
	if (w->seen_ms == 0 && strstr(w->buf, w->want))
		w->seen_ms = now_ms();
	return sz * n;
}

static void *
watch_run(void *arg)
{
	struct watch *w = arg;
	struct curl_slist *hl = NULL;
	char url[300], auth[200];
	CURL *c = curl_easy_init();

	snprintf(url, sizeof url, "%s/v1/events/stream", w->s->base);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", w->s->admin);
	hl = curl_slist_append(hl, auth);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_perform(c);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	return NULL;
}

/* GET path on s until its member key reads want (another server's write is heard of within
 * milliseconds; allow 100). */
static void
read_back(struct server *s, const char *path, const char *key, const char *want)
{
	struct reply r;
	int64_t t0 = now_ms();
	const char *v;

	for (;;) {
		assert_int_equal(call(s, s->admin, "GET", path, &r, NULL), 200);
		v = json_string_value(json_object_get(r.json, key));
		if (v && !strcmp(v, want)) {
			reply_free(&r);
			return;
		}
		reply_free(&r);
		if (now_ms() - t0 > 100)
			fail_msg("GET %s: %s is %s, not %s, 100 ms after the other server wrote it",
			         path, key, v ? v : "(none)", want);
		usleep(5000);
	}
}

/* s says (GET /v1, /metrics) that it is name and whether it leads. */
static void
leads(struct server *s, const char *name, int leader)
{
	struct reply r;
	char line[128];

	assert_int_equal(call(s, s->admin, "GET", "/v1", &r, NULL), 200);
	assert_string_equal(
	        json_string_value(json_object_get(json_object_get(r.json, "server"), "name")),
	        name);
	assert_int_equal(json_is_true(json_object_get(json_object_get(r.json, "server"), "leader")),
	                 leader);
	reply_free(&r);
	assert_int_equal(req(s, s->admin, "GET", "/metrics", NULL, NULL, 0, NULL, &r), 200);
	snprintf(line, sizeof line, "\nrackpilot_leader{server=\"%s\"} %d\n", name, leader);
	assert_non_null(strstr(r.body, line));
	reply_free(&r);
}

/* Two servers, one database: what one writes the other answers (a node created on a is
 * read, patched under a's ETag and powered on through b, and a sees all of it); an event
 * made on a reaches a stream on b within 100 ms; a leads, b follows, and b takes the lead
 * within seconds of a's kill -9. */
static void
test_two_servers(void **state)
{
	static const char *const name_a[] = {"--server-name", "srv-a", NULL};
	static const char *const name_b[] = {"--server-name", "srv-b", NULL};
	struct server a, b;
	struct reply r;
	struct watch w = {.s = &b, .want = "\"name\":\"seen-on-b\""};
	pthread_t t;
	char bdir[300], log[65536], etag[96], job[200];
	int64_t t0;
	int i;

	(void)state;
	server_start(&a, NULL, name_a);
	/* b: a data directory of its own with a's secret key and admin token, on a's database
	 * (the harness finds it in .test-database). */
	snprintf(bdir, sizeof bdir, "%s-b", a.dir);
	sh("mkdir -m 700 '%s' && cp -p '%s/secret.key' '%s/admin.token' '%s/.test-database' '%s/'",
	   bdir, a.dir, a.dir, a.dir, bdir);
	server_start(&b, bdir, name_b);
	slurp(b.log, log, sizeof log);
	assert_non_null(strstr(log, "this server follows"));
	leads(&a, "srv-a", 1);
	leads(&b, "srv-b", 0);

	make_node(&a, "{s:s, s:{s:s, s:s, s:s, s:s}}", "name", "shared1", "bmc", "driver", "fake",
	          "address", "fake", "username", "u", "password", "p");
	assert_int_equal(call(&a, a.admin, "GET", "/v1/nodes/shared1", &r, NULL), 200);
	snprintf(etag, sizeof etag, "If-Match: %s", r.etag);
	reply_free(&r);
	assert_int_equal(call(&b, b.admin, "GET", "/v1/nodes/shared1", &r, NULL), 200);
	assert_string_equal(json_string_value(json_object_get(r.json, "name")), "shared1");
	reply_free(&r);
	{
		const char *const hdr[] = {etag, NULL};
		const char *body = "{\"serial\":\"SN-FROM-B\"}";

		assert_int_equal(req(&b, b.admin, "PATCH", "/v1/nodes/shared1",
		                     "application/merge-patch+json", body, strlen(body), hdr, &r),
		                 200);
		reply_free(&r);
		/* a's ETag is stale now, on either server. */
		assert_int_equal(req(&a, a.admin, "PATCH", "/v1/nodes/shared1",
		                     "application/merge-patch+json", body, strlen(body), hdr, &r),
		                 412);
		reply_free(&r);
	}
	read_back(&a, "/v1/nodes/shared1", "serial", "SN-FROM-B");
	assert_int_equal(
	        call(&b, b.admin, "PUT", "/v1/nodes/shared1/power", &r, "{s:s}", "target", "on"),
	        202);
	snprintf(job, sizeof job, "/v1/jobs/%s", json_string_value(json_object_get(r.json, "id")));
	reply_free(&r);
	for (i = 0; i < 100; i++) {
		assert_int_equal(call(&a, a.admin, "GET", job, &r, NULL), 200);
		if (!strcmp(json_string_value(json_object_get(r.json, "state")), "succeeded"))
			break;
		reply_free(&r);
		usleep(100000);
	}
	assert_true(i < 100);
	reply_free(&r);
	read_back(&a, "/v1/nodes/shared1", "power_state", "on");

	/* An event made on a, streamed by b. */
	pthread_create(&t, NULL, watch_run, &w);
	usleep(500000);
	t0 = now_ms();
	assert_int_equal(call(&a, a.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "seen-on-b"),
	                 201);
	reply_free(&r);
	pthread_join(t, NULL);
	assert_true(w.seen_ms != 0);
	fprintf(stderr, "two servers: a's event on b's stream after %lld ms\n",
	        (long long)(w.seen_ms - t0));
	assert_true(w.seen_ms - t0 <= 100);

	/* a dies: b leads within seconds (it asks every 5 s). */
	server_stop(&a, SIGKILL);
	for (i = 0; i < 100; i++) {
		slurp(b.log, log, sizeof log);
		if (strstr(log, "this server leads now"))
			break;
		usleep(100000);
	}
	assert_non_null(strstr(log, "this server leads now"));
	leads(&b, "srv-b", 1);
	assert_int_equal(call(&b, b.admin, "GET", "/v1/nodes/shared1", &r, NULL), 200);
	reply_free(&r);
	server_stop(&b, SIGTERM);
	sh("rm -rf '%s'", bdir);
	server_cleanup(&a);
}

/* A string member of o, "" when absent. */
static const char *
jstr_of(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key)) ?: "";
}

/* The power sweep's last run on s, as GET /v1/power/sync's `last` (new; NULL before one). */
static json_t *
last_sweep(struct server *s)
{
	json_t *ps = get_json(s, "/v1/power/sync"),
	       *last = json_incref(json_object_get(ps, "last"));

	json_decref(ps);
	return json_is_object(last) ? last : (json_decref(last), NULL);
}

#define FO_N 100

/* Failover at scale: two servers share 200 power jobs (an on and an off per node) and a
 * 100-node firmware rollout on 100 mock BMCs; the leader (it runs the rollout engine) is
 * killed -9 mid-run. The survivor takes the lead, every job ends, the rollout completes, no
 * BMC saw any action twice (counted by the BMCs: method, path, reset type, image), and its
 * power sweep covers every node again within one interval. Leases are 3 s, sweeps every 8 s. */
/* Connections to s's database now, as PostgreSQL counts them (pg_stat_activity), this
 * query's own left out. */
static int
pg_connections(struct server *s)
{
	char cmd[900], name[64], line[32];
	FILE *p;
	int n = -1;

	/* The harness's name of the database (harness.c, test_database). */
	snprintf(cmd, sizeof cmd, "%s/.test-database", s->dir);
	assert_non_null(p = fopen(cmd, "r"));
	assert_non_null(fgets(name, sizeof name, p));
	fclose(p);
	name[strcspn(name, "\n")] = 0;
	snprintf(cmd, sizeof cmd,
	         "psql -qXtA 'host=%s user=rp dbname=%s' -c 'SELECT count(*) FROM "
	         "pg_stat_activity WHERE datname = current_database() AND pid <> "
	         "pg_backend_pid()'",
	         getenv("RP_TEST_PG"), name);
	assert_non_null(p = popen(cmd, "r"));
	if (fgets(line, sizeof line, p))
		n = atoi(line);
	pclose(p);
	assert_true(n >= 0);
	return n;
}

/* db_connections of each server in test_failover: small, to show the pool holds under load. */
#define FO_POOL "6"

static void
test_failover(void **state)
{
	static char conf_a[300], conf_b[300];
	static const char *const args_a[] = {"-c", conf_a, NULL};
	static const char *const args_b[] = {"-c", conf_b, NULL};
	struct server a, b;
	struct mock m;
	struct reply r;
	char bdir[300], name[64], batch[2][200], ro_id[64], body[64];
	json_t *ro = NULL, *last, *sa, *sb;
	int64_t killed;
	int i, k, seen = 0, done, most = 0;
	FILE *f;

	(void)state;
	for (i = 0; i < 2; i++) {
		snprintf(i ? conf_b : conf_a, sizeof conf_a, "/tmp/rp-failover-%c-%d.conf", "ab"[i],
		         (int)getpid());
		assert_non_null(f = fopen(i ? conf_b : conf_a, "w"));
		/* One image store for both (as NFS would share it). */
		fprintf(f,
		        "[server]\nserver_name = fo-%c\njob_lease = 3\npower_sync_interval = 8\n"
		        "db_connections = " FO_POOL "\nimage_dir = /tmp/rp-failover-images-%d\n",
		        "ab"[i], (int)getpid());
		fclose(f);
	}
	mock_start(&m, FO_N, NULL);
	/* Slow enough that jobs are in flight at the kill, quick enough for the suite. */
	for (i = 0; i < FO_N; i++)
		mock_post(&m, i, "/__mock/config",
		          "{\"delay_ms\": 40, \"power_delay_s\": 0, \"bmc_reboot_requests\": 0}");
	server_start(&a, NULL, args_a);
	snprintf(bdir, sizeof bdir, "%s-b", a.dir);
	sh("mkdir -m 700 '%s' && cp -p '%s/secret.key' '%s/admin.token' '%s/.test-database' '%s/'",
	   bdir, a.dir, a.dir, a.dir, bdir);
	server_start(&b, bdir, args_b);
	leads(&a, "fo-a", 1);
	for (i = 0; i < FO_N; i++) {
		snprintf(name, sizeof name, "fo%02d", i);
		make_node(&a, "{s:s, s:s, s:[s], s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}",
		          "name", name, "node_class", "gpu-a", "tags", "fleet", "bmc", "driver",
		          "redfish", "address", "127.0.0.1", "port", m.base + i, "username",
		          "admin", "password", "secret", "options", "scheme", "http", "timeout_ms",
		          10000);
	}
	snprintf(body, sizeof body, "firmware image nic_3.0.0.bin\n");
	assert_int_equal(req(&a, a.admin, "PUT", "/v1/images/nic_3.0.0.bin?kind=firmware",
	                     "application/octet-stream", body, strlen(body), NULL, &r),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&a, a.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}}}", "name", "fo-2026", "node_class",
	                      "gpu-a", "components", "nic0", "version", "3.0.0", "image",
	                      "nic_3.0.0.bin", "method", "redfish-push"),
	                 201);
	reply_free(&r);
	/* Both servers sweep, each its own share: together every node. */
	for (i = 0; i < 150; i++) {
		sa = last_sweep(&a);
		sb = last_sweep(&b);
		done = sa && sb &&
		       json_integer_value(json_object_get(json_object_get(sa, "share"), "of")) ==
		               2 &&
		       json_integer_value(json_object_get(json_object_get(sb, "share"), "of")) == 2;
		if (done)
			assert_int_equal(json_integer_value(json_object_get(sa, "nodes")) +
			                         json_integer_value(json_object_get(sb, "nodes")),
			                 FO_N);
		json_decref(sa);
		json_decref(sb);
		if (done)
			break;
		usleep(100000);
	}
	assert_true(i < 150);
	sa = get_json(&b, "/v1");
	sb = json_object_get(json_object_get(sa, "server"), "servers");
	assert_int_equal(json_array_size(sb), 2);
	assert_string_equal(jstr_of(json_array_get(sb, 0), "name"), "fo-a");
	assert_true(json_is_true(json_object_get(json_array_get(sb, 0), "leader")));
	assert_string_equal(jstr_of(json_array_get(sb, 1), "name"), "fo-b");
	json_decref(sa);

	/* 200 power jobs through b, the rollout through a. */
	for (i = 0; i < 2; i++) {
		assert_int_equal(call(&b, b.admin, "POST", "/v1/actions/power", &r,
		                      "{s:{s:s}, s:s}", "selector", "tag", "fleet", "target",
		                      i ? "off" : "on"),
		                 202);
		snprintf(batch[i], sizeof batch[i], "/v1/batches/%s", jstr_of(r.json, "id"));
		reply_free(&r);
	}
	assert_int_equal(call(&a, a.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:s}, s:{s:i, s:i}, s:i, s:{s:i, s:[s]}}", "kind",
	                      "firmware", "selector", "tag", "fleet", "waves", "canary", 1, "batch",
	                      25, "max_failures", FO_N, "gate", "wait_s", 0, "require",
	                      "version_match"),
	                 201);
	snprintf(ro_id, sizeof ro_id, "/v1/rollouts/%s", jstr_of(r.json, "id"));
	reply_free(&r);
	/* kill -9 the leader once the BMCs have seen a good part of the work; meanwhile the
	 * database counts the connections of both servers, 64 sweep readers, 32 workers and
	 * HTTP threads each: their pools and, apiece, the write turn's spare, the change
	 * listener's and the lead's (held by the leader, asked for every 5 s by the other). */
	for (i = 0; i < 600 && seen < 60; i++) {
		int conns = pg_connections(&a);

		if (conns > most)
			most = conns;
		for (k = 0, seen = 0; k < FO_N; k += 5) {
			json_t *st = mock_get(&m, k, "/__mock/state");

			seen += (int)json_array_size(json_object_get(st, "actions")) > 0;
			json_decref(st);
		}
		seen *= 5;
		if (seen < 60)
			usleep(50000);
	}
	fprintf(stderr, "failover: at most %d connections to the database (db_connections %s)\n",
	        most, FO_POOL);
	assert_true(most > 2);
	assert_true(most <= 2 * (atoi(FO_POOL) + 3));
	server_stop(&a, SIGKILL);
	killed = now_ms();

	/* b leads within seconds (it asks every 5 s). */
	for (i = 0; i < 100; i++) {
		json_t *root = get_json(&b, "/v1");

		done = json_is_true(json_object_get(json_object_get(root, "server"), "leader"));
		json_decref(root);
		if (done)
			break;
		usleep(100000);
	}
	leads(&b, "fo-b", 1);
	fprintf(stderr, "failover: b leads %lld ms after the kill\n",
	        (long long)(now_ms() - killed));
	/* The sweep: b took a's share within a lease and a second, so within one interval of
	 * the kill its sweep read every node. */
	for (i = 0; i < 200; i++) {
		last = last_sweep(&b);
		done = last && json_integer_value(
		                       json_object_get(json_object_get(last, "share"), "of")) == 1;
		if (done) {
			assert_int_equal(json_integer_value(json_object_get(last, "nodes")), FO_N);
		}
		json_decref(last);
		if (done)
			break;
		usleep(100000);
	}
	assert_true(done);
	fprintf(stderr, "failover: b's sweep read all %d nodes %lld ms after the kill\n", FO_N,
	        (long long)(now_ms() - killed));
	assert_true(now_ms() - killed <= 8000 + 3000);
	/* The power jobs end and the rollout completes. */
	for (i = 0; i < 3000; i++) {
		json_t *b0 = get_json(&b, batch[0]), *b1 = get_json(&b, batch[1]);

		json_decref(ro);
		ro = get_json(&b, ro_id);
		done = json_is_true(json_object_get(b0, "done")) &&
		       json_is_true(json_object_get(b1, "done")) &&
		       strcmp(jstr_of(ro, "state"), "running") != 0;
		json_decref(b0);
		json_decref(b1);
		if (done)
			break;
		usleep(100000);
	}
	fprintf(stderr, "failover: jobs and rollout ended %lld ms after the kill\n",
	        (long long)(now_ms() - killed));
	assert_true(done);
	if (strcmp(jstr_of(ro, "state"), "completed") != 0)
		fail_msg("rollout %s: %s", jstr_of(ro, "state"), json_dumps(ro, JSON_COMPACT));
	/* A node fails only where the kill left its update unprovable: not sent again. */
	{
		json_t *n;
		size_t x;

		json_array_foreach(json_object_get(ro, "failed"), x, n)
		{
			fprintf(stderr, "failover: %s failed: %s\n", jstr_of(n, "node"),
			        jstr_of(n, "reason"));
			assert_non_null(strstr(jstr_of(n, "reason"), "not sent again"));
		}
	}
	json_decref(ro);
	for (i = 0; i < 2; i++) {
		json_t *bt = get_json(&b, batch[i]), *c = json_object_get(bt, "counts");

		assert_int_equal(json_integer_value(json_object_get(c, "queued")) +
		                         json_integer_value(json_object_get(c, "running")),
		                 0);
		assert_int_equal(json_integer_value(json_object_get(c, "succeeded")) +
		                         json_integer_value(json_object_get(c, "failed")) +
		                         json_integer_value(json_object_get(c, "cancelled")),
		                 FO_N);
		json_decref(bt);
	}
	/* The kill met jobs mid-run: b took them over (an event each). */
	i = (int)count_all(&b, "/v1/events?action=job.interrupted");
	fprintf(stderr, "failover: b took over %d job(s) of a\n", i);
	assert_true(i >= 1);
	/* The BMCs' own books: no action twice. */
	for (i = 0; i < FO_N; i++) {
		json_t *st = mock_get(&m, i, "/__mock/state"),
		       *acts = json_object_get(st, "actions");
		json_t *seen_keys = json_object(), *act;
		size_t x;

		json_array_foreach(acts, x, act)
		{
			char key[600];

			snprintf(key, sizeof key, "%s %s %s %s", jstr_of(act, "method"),
			         jstr_of(act, "path"), jstr_of(act, "reset_type"),
			         jstr_of(act, "image_uri"));
			if (json_object_get(seen_keys, key))
				fail_msg("BMC %d saw '%s' twice: %s", i, key,
				         json_dumps(acts, JSON_COMPACT));
			json_object_set_new(seen_keys, key, json_true());
		}
		json_decref(seen_keys);
		json_decref(st);
	}
	server_stop(&b, SIGTERM);
	sh("rm -rf '%s' '%s' '%s' /tmp/rp-failover-images-%d", bdir, conf_a, conf_b, (int)getpid());
	server_cleanup(&a);
	mock_stop(&m);
}

/* Two servers starting together on an empty database: the migrations run once (one of the
 * two applies them, under the schema lock), both serve, one leads and the other follows. */
static void
test_migrations_once(void **state)
{
	char name[64], url[400], cmd[1600], a[300], b[300], out[16384], ver[64] = "",
	                                                                last[128] = "";
	const char *x;
	FILE *p;

	(void)state;
	snprintf(name, sizeof name, "rp_migrate_%d", (int)getpid());
	sh("psql -qX 'host=%s user=rp dbname=postgres' -c 'DROP DATABASE IF EXISTS %s' 2>/dev/null "
	   "-c 'CREATE DATABASE %s' >/dev/null",
	   pg, name, name);
	snprintf(url, sizeof url, "postgresql:///%s?host=%s&user=rp", name, pg);
	snprintf(a, sizeof a, "/tmp/rp-migrate-a-%d", (int)getpid());
	snprintf(b, sizeof b, "/tmp/rp-migrate-b-%d", (int)getpid());
	snprintf(cmd, sizeof cmd,
	         "for d in %s %s; do timeout 5 '%s' --data-dir $d --database '%s' --listen "
	         "127.0.0.1:0 --power-sync-interval 0 --server-name ${d#/tmp/rp-migrate-} > $d.log "
	         "2>&1 & "
	         "done; wait",
	         a, b, rp_test_bin, url);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "cat %s.log %s.log", a, b);
	assert_non_null(p = popen(cmd, "r"));
	out[fread(out, 1, sizeof out - 1, p)] = '\0';
	pclose(p);
	/* Each migration applied once, by one of the two. */
	{
		int n = 0;

		x = out;
		while ((x = strstr(x, "applied migration 0001-init.sql")) != NULL) {
			n++;
			x++;
		}
		assert_int_equal(n, 1);
	}
	if ((x = strstr(out, "failed")) != NULL) {
		while (x > out && x[-1] != '\n')
			x--;
		fail_msg("a server logged a failure: %.*s", (int)strcspn(x, "\n"), x);
	}
	assert_non_null(strstr(out, "this server follows"));
	assert_non_null(strstr(strstr(out, "listening on") + 1, "listening on"));
	snprintf(cmd, sizeof cmd,
	         "psql -qXtA '%s' -c 'SELECT count(*), max(version) FROM "
	         "rp_schema_version'",
	         url);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(ver, sizeof ver, p));
	pclose(p);
	/* The newest version: the number of the last migration in schema/. */
	snprintf(cmd, sizeof cmd, "ls '%s/schema' | sort | tail -n 1", rp_test_src);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(last, sizeof last, p));
	pclose(p);
	snprintf(cmd, sizeof cmd, "1|%d\n", atoi(last));
	assert_string_equal(ver, cmd);
	sh("rm -rf %s %s %s.log %s.log", a, b, a, b);
	sh("psql -qX 'host=%s user=rp dbname=postgres' -c 'DROP DATABASE %s WITH (FORCE)' "
	   ">/dev/null",
	   pg, name);
}

/* A password in the connection string works and is shown nowhere: not in the log, not by
 * `rackpilotd -n`, not in GET /v1 or /metrics. */
static void
test_password_never_shown(void **state)
{
	static const char secret[] = "Pg-Sekret-7731-Tango";
	struct server s;
	struct reply r;
	char dir[300], url[700], args[1200], out[4096], log[65536];

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(dir, sizeof dir, "%s", s.dir);
	server_stop(&s, SIGTERM);
	{
		char name[64];

		db_name(test_database(dir), name, sizeof name);
		snprintf(url, sizeof url, "postgresql://rp:%s@/%s?host=%s", secret, name, pg);
	}
	snprintf(args, sizeof args, "-n --data-dir '%s' --database '%s'", dir, url);
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_null(strstr(out, secret));
	assert_non_null(strstr(out, "database = postgresql://rp@/"));
	snprintf(args, sizeof args, "-n --database 'host=%s user=rp password=%s dbname=x'", pg,
	         secret);
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_null(strstr(out, secret));
	assert_non_null(strstr(out, "password=***"));
	/* rackpilotd backup copies a SQLite file: on PostgreSQL it names pg_dump instead, and
	 * writes nothing. */
	{
		char conf[400], bk[400];
		FILE *f;

		snprintf(conf, sizeof conf, "%s.conf", dir);
		snprintf(bk, sizeof bk, "%s.backup", dir);
		assert_non_null(f = fopen(conf, "w"));
		fprintf(f, "[server]\ndatabase = %s\n", url);
		fclose(f);
		snprintf(args, sizeof args, "backup '%s' -c '%s' --data-dir '%s'", bk, conf, dir);
		assert_int_equal(run(args, out, sizeof out), 1);
		assert_non_null(strstr(out, "back it up with pg_dump"));
		assert_null(strstr(out, secret));
		assert_int_not_equal(access(bk, F_OK), 0);
		unlink(conf);
	}
	server_start(&s, dir, (const char *[]){"--database", url, NULL});
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	assert_null(strstr(r.body, secret));
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET", "/metrics", &r, NULL), 200);
	assert_null(strstr(r.body, secret));
	reply_free(&r);
	server_stop(&s, SIGTERM);
	slurp(s.log, log, sizeof log);
	assert_non_null(strstr(log, "database postgresql://rp@/"));
	assert_null(strstr(log, secret));
	server_cleanup(&s);
}

/* Everything the API shows of a server, for comparison: each read's JSON, keys sorted. */
static json_t *
snapshot(struct server *s)
{
	static const char *const reads[] = {
	        "/v1/racks",
	        "/v1/nodes?limit=1000",
	        "/v1/jobs?limit=1000",
	        "/v1/events?limit=1000",
	        "/v1/tokens",
	        "/v1/bootstrap-tokens",
	        "/v1/recipes",
	        "/v1/images",
	        "/v1/firmware/baselines",
	        "/v1/firmware/drift",
	        "/v1/rollouts",
	        "/v1/racks/r1/elevation",
	        "/v1/nodes/m00",
	        "/v1/nodes/m03/firmware",
	        "/v1/node-classes",
	        NULL,
	};
	json_t *all = json_object();
	struct reply r;
	int i;

	for (i = 0; reads[i]; i++) {
		if (call(s, s->admin, "GET", reads[i], &r, NULL) != 200)
			fail_msg("GET %s: %ld %s", reads[i], r.status, r.body);
		json_object_set(all, reads[i], r.json);
		reply_free(&r);
	}
	return all;
}

/* A site built on SQLite through the API (racks, nodes with sealed BMC passwords, jobs,
 * readings, a baseline and its rollout, tokens, events), moved with --migrate-to: the copy
 * reports every table checked, and the same server on PostgreSQL answers every read the same
 * and goes on working (new ids do not collide). A second copy into the same database, and a
 * copy to something that is not PostgreSQL, are refused and change nothing. */
static void
test_migrate_to(void **state)
{
	struct server s;
	struct reply r;
	char dir[300], name[64], url[400], args[1200], out[16384], body[512];
	json_t *before, *after, *j;
	int i;

	(void)state;
	/* The SQLite site ("--database" with nothing: SQLite in the data directory). */
	server_start(&s, NULL,
	             (const char *[]){"--database", "", "--power-sync-interval", "0", NULL});
	snprintf(dir, sizeof dir, "%s", s.dir);
	for (i = 1; i <= 2; i++) {
		snprintf(body, sizeof body, "r%d", i);
		assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", body),
		                 201);
		reply_free(&r);
	}
	for (i = 0; i < 6; i++) {
		snprintf(body, sizeof body, "m%02d", i);
		assert_int_equal(call(&s, s.admin, "POST", "/v1/nodes", &r,
		                      "{s:s, s:s, s:i, s:s, s:[s], s:{s:s, s:s, s:s}}", "name",
		                      body, "rack", i < 4 ? "r1" : "r2", "u_position", 1 + 4 * i,
		                      "node_class", "gpu-m", "tags", "move", "bmc", "driver",
		                      "fake", "username", "admin", "password",
		                      "Move-Me-Sealed-991"),
		                 201);
		reply_free(&r);
	}
	/* Two Redfish nodes for the rollout (never contacted: it starts in 2099). */
	for (i = 0; i < 2; i++) {
		snprintf(body, sizeof body, "rf%d", i);
		assert_int_equal(call(&s, s.admin, "POST", "/v1/nodes", &r,
		                      "{s:s, s:s, s:[s], s:{s:s, s:s, s:i, s:s, s:s}}", "name",
		                      body, "node_class", "gpu-m", "tags", "rf", "bmc", "driver",
		                      "redfish", "address", "127.0.0.1", "port", 9, "username",
		                      "root", "password", "Move-Me-Sealed-992"),
		                 201);
		reply_free(&r);
	}
	assert_int_equal(call(&s, s.admin, "PATCH", "/v1/nodes/m01", &r, "{s:b, s:s}",
	                      "maintenance", 1, "maintenance_reason", "fan"),
	                 200);
	reply_free(&r);
	assert_int_equal(
	        call(&s, s.admin, "PUT", "/v1/nodes/m02/power", &r, "{s:s}", "target", "on"), 202);
	j = wait_job(&s, jstr(r.json, "id"), 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/nodes/m03/firmware/readings", &r,
	                      "{s:s, s:[{s:s, s:s}]}", "source", "manual", "components",
	                      "component", "nic0", "version", "2.0.0"),
	                 204);
	reply_free(&r);
	assert_int_equal(req(&s, s.admin, "PUT", "/v1/images/nic_3.bin?kind=firmware",
	                     "application/octet-stream", "nic firmware\n", 13, NULL, &r),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}}}", "name", "m-2026", "node_class",
	                      "gpu-m", "components", "nic0", "version", "3.0.0", "image",
	                      "nic_3.bin", "method", "redfish-push"),
	                 201);
	reply_free(&r);
	/* A rollout that starts tomorrow: planned, stored, not run. */
	if (call(&s, s.admin, "POST", "/v1/rollouts", &r, "{s:s, s:{s:s}, s:s}", "kind", "firmware",
	         "selector", "tag", "rf", "start_at", "2099-01-01T00:00:00Z") != 201)
		fail_msg("POST /v1/rollouts: %ld %s", r.status, r.body);
	reply_free(&r);
	assert_int_equal(
	        call(&s, s.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", "m04"), 201);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/recipes", &r,
	                      "{s:s, s:{}, s:[{s:s, s:s, s:s}]}", "name", "hello", "params",
	                      "steps", "id", "a", "type", "shell", "command", "true"),
	                 201);
	reply_free(&r);
	before = snapshot(&s);
	server_stop(&s, SIGTERM);

	snprintf(name, sizeof name, "rp_moved_%d", (int)getpid());
	sh("psql -qX 'host=%s user=rp dbname=postgres' -c 'DROP DATABASE IF EXISTS %s' "
	   "-c 'CREATE DATABASE %s' >/dev/null 2>&1",
	   pg, name, name);
	snprintf(url, sizeof url, "postgresql:///%s?host=%s&user=rp", name, pg);
	/* Not PostgreSQL: refused. */
	snprintf(args, sizeof args, "--data-dir '%s' --database '' --migrate-to '%s/elsewhere.db'",
	         dir, dir);
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, "needs a PostgreSQL connection string"));
	snprintf(args, sizeof args, "--data-dir '%s' --database '' --migrate-to '%s'", dir, url);
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_non_null(strstr(out, "every table checked on both sides"));
	assert_non_null(strstr(out, "nodes "));
	assert_null(strstr(out, "Move-Me-Sealed-99"));
	/* Again into the same database: refused, nothing changed. */
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, "is not empty"));
	server_start(&s, dir,
	             (const char *[]){"--database", url, "--power-sync-interval", "0", NULL});
	slurp(s.log, out, sizeof out);
	assert_non_null(strstr(out, name)); /* it runs on the copy */
	after = snapshot(&s);
	{
		const char *key;
		json_t *v;

		json_object_foreach(before, key, v)
		{
			if (!json_equal(v, json_object_get(after, key))) {
				char *a = json_dumps(v, JSON_SORT_KEYS),
				     *b = json_dumps(json_object_get(after, key), JSON_SORT_KEYS);

				fail_msg("GET %s differs after the move:\n%.2000s\n%.2000s", key, a,
				         b);
			}
		}
	}
	json_decref(before);
	json_decref(after);
	/* It goes on: new rows get new ids, the BMC password still opens (a power job). */
	assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r3"), 201);
	reply_free(&r);
	assert_int_equal(
	        call(&s, s.admin, "PUT", "/v1/nodes/m05/power", &r, "{s:s}", "target", "on"), 202);
	j = wait_job(&s, jstr(r.json, "id"), 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	sh("psql -qX 'host=%s user=rp dbname=postgres' -c 'DROP DATABASE %s WITH (FORCE)' "
	   ">/dev/null",
	   pg, name);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_one_server_reconnects),
	        cmocka_unit_test(test_two_servers),
	        cmocka_unit_test(test_failover),
	        cmocka_unit_test(test_migrations_once),
	        cmocka_unit_test(test_password_never_shown),
	        cmocka_unit_test(test_migrate_to),
	};

	pg = getenv("RP_TEST_PG");
	if (pg == NULL || !*pg) {
		fprintf(stderr, "test_postgres: RP_TEST_PG is not set: run it as ctest -L pg "
		                "(tests/pg/cluster.sh starts the cluster)\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
