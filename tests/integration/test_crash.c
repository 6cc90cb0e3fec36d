/*
 * kill -9 rackpilotd while 50 power jobs run, restart it: every job ends in a terminal
 * state, and each BMC saw each action at most once (counted by the mock BMCs themselves).
 *
 * kill -9 rackpilotd at 20 random moments (seeded: RP_CRASH_SEED, printed) of a firmware
 * rollout over 200 Redfish mock BMCs (two components: nic0 pushed, gpu by SimpleUpdate),
 * restarting it on the same data dir each time: the rollout ends; each node is at target
 * (at the BMC and in the store) or its job failed with a reason; each BMC flashed each
 * component at most once; no job is left running.
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define N 50

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void
test_kill_during_jobs(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	struct server s;
	struct mock m;
	struct reply r;
	char dir[256], name[32], batch[200], path[300];
	json_t *counts = NULL, *jobs, *j;
	int i, done = 0, running_at_kill = 0, interrupted = 0, recovered, verified = 0;
	size_t k;

	(void)state;
	mock_start(&m, N, NULL);
	/* Slow BMCs: every request takes 250 ms, so jobs are mid-flight when the server dies. */
	for (i = 0; i < N; i++)
		mock_post(&m, i, "/__mock/config", "{\"delay_ms\":250}");
	server_start(&s, NULL, args);
	snprintf(dir, sizeof dir, "%s", s.dir);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof name, "c%02d", i);
		make_node(&s, "{s:s, s:[s], s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name",
		          name, "tags", "crash", "bmc", "driver", "redfish", "address", "127.0.0.1",
		          "port", m.base + i, "username", "admin", "password", "secret", "options",
		          "scheme", "http", "timeout_ms", 5000);
	}
	assert_int_equal(call(&s, s.admin, "POST", "/v1/actions/power", &r, "{s:{s:s}, s:s}",
	                      "selector", "tag", "crash", "target", "on"),
	                 202);
	snprintf(batch, sizeof batch, "/v1/batches/%s", str(r.json, "id"));
	reply_free(&r);
	/* kill -9 the moment the first BMC has logged a power-on: the first wave of jobs is
	 * then mid-send, some commands delivered and some not. */
	for (i = 0; i < 400 && !running_at_kill; i++) {
		int b;

		for (b = 0; b < N && !running_at_kill; b++) {
			json_t *st = mock_get(&m, b, "/__mock/state");

			running_at_kill = json_array_size(json_object_get(st, "actions")) > 0;
			json_decref(st);
		}
		if (!running_at_kill)
			usleep(20000);
	}
	assert_true(running_at_kill);
	server_stop(&s, SIGKILL);

	server_start(&s, dir, args);
	for (i = 0; i < 600 && !done; i++) {
		assert_int_equal(call(&s, s.admin, "GET", batch, &r, NULL), 200);
		done = json_is_true(json_object_get(r.json, "done"));
		if (done)
			counts = json_incref(json_object_get(r.json, "counts"));
		reply_free(&r);
		usleep(100000);
	}
	assert_true(done);
	assert_int_equal(json_integer_value(json_object_get(counts, "queued")), 0);
	assert_int_equal(json_integer_value(json_object_get(counts, "running")), 0);
	assert_int_equal(json_integer_value(json_object_get(counts, "succeeded")) +
	                         json_integer_value(json_object_get(counts, "failed")),
	                 N);
	json_decref(counts);
	/* Every job that failed says why: it was interrupted and not repeated. */
	snprintf(path, sizeof path, "/v1/jobs?batch=%s&limit=100", batch + strlen("/v1/batches/"));
	assert_int_equal(call(&s, s.admin, "GET", path, &r, NULL), 200);
	jobs = json_object_get(r.json, "items");
	assert_int_equal(json_array_size(jobs), N);
	json_array_foreach(jobs, k, j)
	{
		const char *note = str(json_object_get(j, "result"), "note");

		if (!strcmp(str(j, "state"), "failed")) {
			assert_string_equal(str(json_object_get(j, "error"), "code"),
			                    "interrupted");
			interrupted++;
		}
		/* Sent before the kill: checked at the BMC, not sent again. */
		verified += note &&
		            strstr(note, "interrupted by a stop of the server that ran it") != NULL;
	}
	reply_free(&r);
	/* Jobs running at the kill were recovered (an event each); only those may fail so. */
	recovered = (int)count_all(&s, "/v1/events?action=job.interrupted");
	assert_true(recovered >= 1);
	assert_true(interrupted + verified >= 1);
	assert_true(interrupted + verified <= recovered);
	/* The BMCs' own books: at most one power-on each. */
	for (i = 0; i < N; i++) {
		json_t *st = mock_get(&m, i, "/__mock/state"), *a;
		int ons = 0;

		json_array_foreach(json_object_get(st, "actions"), k, a)
		{
			const char *t = str(a, "reset_type");

			if (t && !strcmp(t, "On") &&
			    json_integer_value(json_object_get(a, "status")) < 300)
				ons++;
		}
		if (ons > 1)
			fail_msg("BMC %d received %d power-on actions", i, ons);
		json_decref(st);
	}
	fprintf(stderr,
	        "crash test: %d recovered after kill -9: %d verified at the BMC, %d failed "
	        "as interrupted, the rest had not sent anything and ran\n",
	        recovered, verified, interrupted);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	mock_stop(&m);
}

/* The state of job id, waiting up to ms for it to leave "running"/"queued" when ms > 0. */
static const char *
job_state(struct server *s, const char *id, int ms, json_t **job)
{
	char path[200];
	struct reply r;
	const char *st = NULL;
	int waited = 0;

	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	for (;;) {
		assert_int_equal(call(s, s->admin, "GET", path, &r, NULL), 200);
		json_decref(*job);
		*job = json_incref(r.json);
		reply_free(&r);
		st = str(*job, "state");
		if (ms <= 0 || (strcmp(st, "running") && strcmp(st, "queued")) || waited >= ms)
			return st;
		usleep(100000);
		waited += 100;
	}
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Job leases between servers that share a database: a job another server holds under a
 * live lease is left to it; once its lease runs out it is taken over within seconds,
 * verified at the BMC and not sent again; one whose lease had already run out is taken over
 * at once. Counted at the mock BMCs. (The other server is played by the test: it rewrites
 * the finished jobs as running under its leases, as if it had died mid-job.) */
static void
test_lease_takeover(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	struct server s;
	struct mock m;
	struct reply r;
	char dir[256], name[32], ids[2][64], sql[600];
	json_t *job = NULL, *ev;
	int64_t planted, lease_end;
	size_t k;
	int i, other = 0;

	(void)state;
	mock_start(&m, 2, NULL);
	server_start(&s, NULL, args);
	snprintf(dir, sizeof dir, "%s", s.dir);
	for (i = 0; i < 2; i++) {
		snprintf(name, sizeof name, "lease%d", i);
		make_node(&s, "{s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name", name, "bmc",
		          "driver", "redfish", "address", "127.0.0.1", "port", m.base + i,
		          "username", "admin", "password", "secret", "options", "scheme", "http");
		snprintf(sql, sizeof sql, "/v1/nodes/%s/power", name);
		assert_int_equal(call(&s, s.admin, "PUT", sql, &r, "{s:s}", "target", "on"), 202);
		snprintf(ids[i], sizeof ids[i], "%s", str(r.json, "id"));
		reply_free(&r);
		assert_string_equal(job_state(&s, ids[i], 20000, &job), "succeeded");
	}
	server_stop(&s, SIGTERM);

	/* Server rp-elsewhere "dies" holding both jobs after sending their commands: lease0
	 * with 15 s of lease left, lease1's lease already run out. */
	planted = now_ms();
	lease_end = planted + 15000;
	for (i = 0; i < 2; i++) {
		snprintf(sql, sizeof sql,
		         "UPDATE jobs SET state = 'running', finished_at = NULL, result = NULL, "
		         "lease_owner = 'rp-elsewhere', lease_until = %lld, sent_at = %lld WHERE "
		         "uuid = '%s'",
		         (long long)(i == 0 ? lease_end : planted - 1000), (long long)planted,
		         ids[i]);
		assert_int_equal(test_sql(dir, sql), 0);
	}
	server_start(&s, dir, args);

	/* The run-out lease is taken over at once and verified, not sent again. */
	assert_string_equal(job_state(&s, ids[1], 10000, &job), "succeeded");
	assert_non_null(strstr(str(json_object_get(job, "result"), "note"),
	                       "interrupted by a stop of the server that ran it"));
	/* The live lease is rp-elsewhere's: untouched while it lasts. */
	assert_string_equal(job_state(&s, ids[0], 0, &job), "running");
	if (now_ms() >= lease_end - 1000)
		fail_msg("the server took %lld ms to start: the test's lease ran out before it "
		         "could check it was left alone",
		         (long long)(now_ms() - planted));
	/* Then taken over within seconds of its end. */
	assert_string_equal(job_state(&s, ids[0], 25000, &job), "succeeded");
	assert_true(now_ms() >= lease_end);
	assert_true(now_ms() < lease_end + 5000);
	assert_non_null(strstr(str(json_object_get(job, "result"), "note"),
	                       "interrupted by a stop of the server that ran it"));
	/* One job.interrupted event each, naming the server whose lease ran out. */
	assert_int_equal(call(&s, s.admin, "GET", "/v1/events?action=job.interrupted", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	json_array_foreach(json_object_get(r.json, "items"), k, ev) other +=
	        strstr(str(ev, "summary"), "on rp-elsewhere, whose lease on it ran out") != NULL;
	assert_int_equal(other, 2);
	reply_free(&r);
	/* The BMCs' own books: one power-on each, the first run's. */
	for (i = 0; i < 2; i++) {
		json_t *st = mock_get(&m, i, "/__mock/state"), *a;
		int ons = 0;

		json_array_foreach(json_object_get(st, "actions"), k, a)
		{
			const char *t = str(a, "reset_type");

			ons += t && !strcmp(t, "On");
		}
		assert_int_equal(ons, 1);
		json_decref(st);
	}
	json_decref(job);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	mock_stop(&m);
}

/* A job that runs longer than its lease keeps it: the server renews its leases every third
 * of job_lease, so its own periodic look never takes over a job it is running. */
static void
test_lease_renewed(void **state)
{
	static char conf[300];
	static const char *const args[] = {"-c", conf, NULL};
	struct server s;
	struct mock m;
	struct reply r;
	char id[64];
	json_t *job = NULL, *st, *a;
	int64_t t0;
	size_t k;
	int ons = 0;
	FILE *f;

	(void)state;
	snprintf(conf, sizeof conf, "/tmp/rp-lease-%d.conf", (int)getpid());
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\njob_lease = 3\n");
	fclose(f);
	mock_start(&m, 1, NULL);
	/* Every BMC request takes 1.5 s: a power-on (read, reset, read back) outlasts 3 s. */
	mock_post(&m, 0, "/__mock/config", "{\"delay_ms\":1500}");
	server_start(&s, NULL, args);
	make_node(&s, "{s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s, s:i}}}", "name", "renew0", "bmc",
	          "driver", "redfish", "address", "127.0.0.1", "port", m.base, "username", "admin",
	          "password", "secret", "options", "scheme", "http", "timeout_ms", 10000);
	t0 = now_ms();
	assert_int_equal(
	        call(&s, s.admin, "PUT", "/v1/nodes/renew0/power", &r, "{s:s}", "target", "on"),
	        202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	assert_string_equal(job_state(&s, id, 60000, &job), "succeeded");
	/* The test means something only when the job outlived its lease. */
	assert_true(now_ms() - t0 > 4000);
	assert_int_equal(count_all(&s, "/v1/events?action=job.interrupted"), 0);
	st = mock_get(&m, 0, "/__mock/state");
	json_array_foreach(json_object_get(st, "actions"), k, a)
	{
		const char *t = str(a, "reset_type");

		ons += t && !strcmp(t, "On");
	}
	assert_int_equal(ons, 1);
	json_decref(st);
	json_decref(job);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	mock_stop(&m);
	unlink(conf);
}

#define RN        200 /* nodes of the rollout */
#define KILLS     20
#define NIC_TO    "3.0.0"
#define GPU_TO    "97.0"
#define GPU_COUNT 8

static uint64_t Rng;

/* xorshift64*: the same sequence from the same seed on every libc. */
static unsigned
rnd(unsigned n)
{
	Rng ^= Rng >> 12;
	Rng ^= Rng << 25;
	Rng ^= Rng >> 27;
	return (unsigned)((Rng * 2685821657736338717ULL) >> 33) % n;
}

static json_t *
get_ok(struct server *s, const char *path)
{
	struct reply r;
	json_t *j;

	if (call(s, s->admin, "GET", path, &r, NULL) != 200)
		fail_msg("GET %s: %ld %s", path, r.status, r.body);
	j = json_incref(r.json);
	reply_free(&r);
	return j;
}

static int
rollout_ended(json_t *ro)
{
	const char *st = str(ro, "state");

	return st && (!strcmp(st, "completed") || !strcmp(st, "aborted"));
}

static void
put_image(struct server *s, const char *name)
{
	char path[200], body[64];
	struct reply r;

	snprintf(path, sizeof path, "/v1/images/%s?kind=firmware", name);
	snprintf(body, sizeof body, "firmware image %s\n", name);
	assert_int_equal(req(s, s->admin, "PUT", path, "application/octet-stream", body,
	                     strlen(body), NULL, &r),
	                 201);
	reply_free(&r);
}

/* The stored status ("ok", "drift", ...) of component comp of node name. */
static const char *
stored_status(json_t *fw, const char *comp)
{
	json_t *c;
	size_t i;

	json_array_foreach(json_object_get(fw, "components"), i,
	                   c) if (!strcmp(str(c, "component"), comp)) return str(c, "status");
	return NULL;
}

/* A base port below the kernel's ephemeral range (32768-) where count ports are free now:
 * 200 consecutive ports inside that range (where the harness's bases mostly fall) are
 * rarely all free on a machine where other tests hold connections and mocks. */
static int
free_base(int count)
{
	int attempt;

	for (attempt = 0; attempt < 64; attempt++) {
		int base = 21000 + (int)((getpid() * 13 + attempt * 337) % 45) * 250, i, ok = 1;

		for (i = 0; i < count && ok; i++) {
			struct sockaddr_in a = {.sin_family = AF_INET,
			                        .sin_port = htons((uint16_t)(base + i)),
			                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

			assert_true(fd >= 0);
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
			ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
			close(fd);
		}
		if (ok)
			return base;
	}
	fail_msg("no %d free consecutive ports below 32768", count);
	return -1;
}

static void
test_kill_during_rollout(void **state)
{
	const char *seed_env = getenv("RP_CRASH_SEED");
	char conf[] = "/tmp/rp-crash-conf-XXXXXX", dir[256], id[64], path[300], name[32];
	const char *args[] = {"--power-sync-interval", "0", "--config", conf, NULL};
	unsigned long long seed;
	struct server s;
	struct mock m;
	struct reply r;
	json_t *ro = NULL, *doc, *nodes, *n;
	char *body;
	FILE *f;
	int fd, i, kills = 0, ok = 0, failed = 0, interrupted = 0;
	time_t t0, t_kills;
	size_t k;

	(void)state;
	seed = seed_env && *seed_env
	               ? strtoull(seed_env, NULL, 0)
	               : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 16);
	Rng = seed ? seed : 1;
	fprintf(stderr, "rollout crash test: seed %llu (rerun with RP_CRASH_SEED=%llu)\n", seed,
	        seed);
	/* Every Redfish request of the 200 BMCs (one mock process) takes 40 ms: updates are in
	 * flight at every moment of the rollout. */
	{
		char pb[16];
		const char *extra[] = {"--port-base", pb, NULL};
		int b = free_base(RN);

		/* The last --port-base wins (argparse): the mock listens where we probed. */
		snprintf(pb, sizeof pb, "%d", b);
		mock_start(&m, RN, extra);
		m.base = b;
	}
	for (i = 0; i < RN; i++)
		mock_post(&m, i, "/__mock/config",
		          "{\"delay_ms\": 40, \"power_delay_s\": 0, \"bmc_reboot_requests\": 0}");
	fd = mkstemp(conf);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	/* boot_url: the mock takes SimpleUpdate's ImageURI by name and downloads nothing. */
	fprintf(f, "[server]\njob_workers = 40\nboot_url = http://127.0.0.1:9\n");
	fclose(f);
	server_start(&s, NULL, args);
	snprintf(dir, sizeof dir, "%s", s.dir);
	doc = json_pack("{s:[], s:[]}", "racks", "nodes");
	for (i = 0; i < 10; i++) {
		snprintf(name, sizeof name, "rr%d", i);
		json_array_append_new(json_object_get(doc, "racks"),
		                      json_pack("{s:s}", "name", name));
	}
	for (i = 0; i < RN; i++) {
		char rack[8];

		snprintf(name, sizeof name, "ro%03d", i);
		snprintf(rack, sizeof rack, "rr%d", i % 10);
		json_array_append_new(
		        json_object_get(doc, "nodes"),
		        json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name",
		                  name, "rack", rack, "node_class", "gpu-r", "bmc", "driver",
		                  "redfish", "address", "127.0.0.1", "port", m.base + i, "username",
		                  "admin", "password", "secret", "options", "scheme", "http"));
	}
	body = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (req(&s, s.admin, "POST", "/v1/import", "application/json", body, strlen(body), NULL,
	        &r) != 200)
		fail_msg("import: %ld %s", r.status, r.body);
	reply_free(&r);
	free(body);
	put_image(&s, "nic_" NIC_TO ".bin");
	put_image(&s, "gpu_" GPU_TO ".bin");
	assert_int_equal(call(&s, s.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}}}", "name",
	                      "r-2026", "node_class", "gpu-r", "components", "nic0", "version",
	                      NIC_TO, "image", "nic_" NIC_TO ".bin", "method", "redfish-push",
	                      "gpu", "version", GPU_TO, "image", "gpu_" GPU_TO ".bin", "method",
	                      "redfish"),
	                 201);
	reply_free(&r);
	/* Interrupted updates fail their node (by design); allow them all, so the rollout runs to
	 * its end through every kill. */
	assert_int_equal(call(&s, s.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:s}, s:{s:i, s:i}, s:i, s:{s:i, s:i, s:[s]}}", "kind",
	                      "firmware", "selector", "class", "gpu-r", "waves", "canary", 1,
	                      "batch", 40, "max_failures", RN, "gate", "wait_s", 0, "timeout_s", 60,
	                      "require", "version_match"),
	                 201);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(r.json, "counts"), "pending")),
	        RN);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s", id);
	t0 = time(NULL);

	/* 20 kills at random moments, each 0.2 to 3 s after the last start; fewer when the
	 * rollout ends first. */
	while (kills < KILLS) {
		unsigned wait_ms = 200 + rnd(2800), t;
		int ended = 0;

		for (t = 0; t < wait_ms && !ended; t += 100) {
			usleep(100000);
			if (t % 500 == 0) {
				ro = get_ok(&s, path);
				ended = rollout_ended(ro);
				json_decref(ro);
			}
		}
		if (ended)
			break;
		server_stop(&s, SIGKILL);
		kills++;
		fprintf(stderr, "  kill %d at +%u ms\n", kills, wait_ms);
		server_start(&s, dir, args);
	}
	t_kills = time(NULL);
	for (i = 0; i < 1800; i++) {
		ro = get_ok(&s, path);
		if (rollout_ended(ro))
			break;
		json_decref(ro);
		ro = NULL;
		usleep(100000);
	}
	if (ro == NULL) {
		ro = get_ok(&s, path);
		fail_msg("seed %llu: rollout stuck in %s: %.2000s", seed, str(ro, "state"),
		         json_dumps(json_object_get(ro, "counts"), JSON_COMPACT));
	}
	fprintf(stderr,
	        "rollout crash test: %d kills in %lld s; rollout %s (%s) %lld s after the last\n",
	        kills, (long long)(t_kills - t0), str(ro, "state"), str(ro, "reason") ?: "-",
	        (long long)(time(NULL) - t_kills));
	/* The kills must have landed while updates ran. */
	assert_int_equal(kills, KILLS);
	/* Nothing left running or queued, anywhere. */
	if (count_all(&s, "/v1/jobs?state=running") || count_all(&s, "/v1/jobs?state=queued"))
		fail_msg("seed %llu: jobs left running/queued after the rollout ended", seed);
	nodes = json_object_get(ro, "nodes");
	assert_int_equal(json_array_size(nodes), RN);
	json_array_foreach(nodes, k, n)
	{
		const char *ns = str(n, "state"), *node = str(n, "node");
		int b = atoi(node + 2), g;
		json_t *st = mock_get(&m, b, "/__mock/state"),
		       *fw = json_object_get(st, "firmware"),
		       *uc = json_object_get(st, "update_count"), *v;
		const char *comp;

		/* The BMC's own books: at most one flash per component. */
		json_object_foreach(uc, comp, v) if (json_integer_value(v) > 1)
		        fail_msg("seed %llu: BMC of %s flashed %s %lld times", seed, node, comp,
		                 (long long)json_integer_value(v));
		if (!strcmp(ns, "succeeded")) {
			json_t *stored;

			if (strcmp(str(fw, "NIC0") ?: "", NIC_TO))
				fail_msg("seed %llu: %s succeeded, BMC has NIC0 %s", seed, node,
				         str(fw, "NIC0"));
			for (g = 0; g < GPU_COUNT; g++) {
				char gid[8];

				snprintf(gid, sizeof gid, "GPU%d", g);
				if (strcmp(str(fw, gid) ?: "", GPU_TO))
					fail_msg("seed %llu: %s succeeded, BMC has %s %s", seed,
					         node, gid, str(fw, gid));
			}
			snprintf(name, sizeof name, "/v1/nodes/%s/firmware", node);
			stored = get_ok(&s, name);
			if (strcmp(stored_status(stored, "nic0") ?: "", "ok") ||
			    strcmp(stored_status(stored, "gpu") ?: "", "ok"))
				fail_msg("seed %llu: %s succeeded, stored versions disagree: %s",
				         seed, node, json_dumps(stored, JSON_COMPACT));
			json_decref(stored);
			ok++;
		} else if (!strcmp(ns, "failed")) {
			char jp[100];
			json_t *job, *err;

			/* Failed with its job's reason, which the job itself records. */
			if (str(n, "job") == NULL)
				fail_msg("seed %llu: %s failed without a job: %s", seed, node,
				         str(n, "reason"));
			snprintf(jp, sizeof jp, "/v1/jobs/%s", str(n, "job"));
			job = get_ok(&s, jp);
			err = json_object_get(job, "error");
			if (strcmp(str(job, "state"), "failed") || !*(str(err, "code") ?: "") ||
			    !*(str(err, "message") ?: ""))
				fail_msg("seed %llu: %s failed (%s) but its job is %s", seed, node,
				         str(n, "reason"), json_dumps(job, JSON_COMPACT));
			fprintf(stderr, "  %s failed: %s: %s\n", node, str(err, "code"),
			        str(err, "message"));
			interrupted += !strcmp(str(err, "code"), "interrupted");
			json_decref(job);
			failed++;
		} else {
			fail_msg("seed %llu: %s ended %s (%s)", seed, node, ns, str(n, "reason"));
		}
		json_decref(st);
	}
	/* One job per node: none vanished, none doubled. */
	assert_int_equal(count_all(&s, "/v1/jobs?type=firmware_update"), RN);
	fprintf(stderr, "rollout crash test: %d nodes at target, %d failed (%d interrupted)\n", ok,
	        failed, interrupted);
	json_decref(ro);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	mock_stop(&m);
	unlink(conf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kill_during_jobs),
	        cmocka_unit_test(test_lease_takeover),
	        cmocka_unit_test(test_lease_renewed),
	        cmocka_unit_test(test_kill_during_rollout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
