/*
 * rackpilotd on PostgreSQL, where it differs from SQLite (ctest -L pg only: it needs the
 * suite's cluster, RP_TEST_PG): one server per database, and the claim taken again after the
 * database dropped it; connections the server dropped are made again, with no request lost;
 * migrations applied once when servers start together; and a password in the connection
 * string appears in no log, no `rackpilotd -n` and no answer.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *pg;

/* Run rackpilotd with args (a shell word list), wait at most 20 s: its exit status, and what
 * it printed in out. */
static int
run(const char *args, char *out, size_t len)
{
	char cmd[2048];
	size_t got = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof cmd, "timeout 20 '%s' %s 2>&1", rp_test_bin, args);
	assert_non_null(p = popen(cmd, "r"));
	out[0] = '\0';
	while (got + 1 < len && fgets(out + got, (int)(len - got), p))
		got = strlen(out);
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The database name in a test_database() URL. */
static void
db_name(const char *url, char *name, size_t len)
{
	snprintf(name, len, "%.*s", (int)strcspn(url + 14, "?"), url + 14);
}

/* A second server on a database another one holds is refused at start, whatever its data
 * directory; a connection PostgreSQL ends (here: every one of the server's, its claim's
 * included) is made again, and no request sees the loss; the claim is taken again. */
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
	snprintf(args, sizeof args, "--data-dir '%s' --database '%s' --listen 127.0.0.1:0", other,
	         url);
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, "another rackpilotd is already using this database"));

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
	/* Within a few seconds the server claims the database again: a second one is still
	 * refused. */
	for (i = 0; i < 100; i++) {
		slurp(s.log, log, sizeof log);
		if (strstr(log, "claiming it again"))
			break;
		usleep(100000);
	}
	assert_non_null(strstr(log, "claiming it again"));
	usleep(500000);
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, "another rackpilotd is already using this database"));
	sh("rm -rf '%s'", other);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

/* Two servers starting together on an empty database: the migrations run once (one of the
 * two applies them, under the schema lock), one server serves, the other is refused. */
static void
test_migrations_once(void **state)
{
	char name[64], url[400], cmd[1600], a[300], b[300], out[4096], ver[64] = "";
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
	         "127.0.0.1:0 --power-sync-interval 0 > $d.log 2>&1 & done; wait",
	         a, b, rp_test_bin, url);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "cat %s.log %s.log", a, b);
	assert_non_null(p = popen(cmd, "r"));
	out[fread(out, 1, sizeof out - 1, p)] = '\0';
	pclose(p);
	/* Each of the 14 migrations applied once, by one of the two. */
	{
		const char *x = out;
		int n = 0;

		while ((x = strstr(x, "applied migration 0001-init.sql")) != NULL) {
			n++;
			x++;
		}
		assert_int_equal(n, 1);
	}
	assert_null(strstr(out, "failed"));
	assert_non_null(strstr(out, "another rackpilotd is already using this database"));
	assert_non_null(strstr(out, "listening on"));
	snprintf(cmd, sizeof cmd,
	         "psql -qXtA '%s' -c 'SELECT count(*), max(version) FROM "
	         "rp_schema_version'",
	         url);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(ver, sizeof ver, p));
	pclose(p);
	snprintf(cmd, sizeof cmd, "1|%d\n", 14);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_one_server_reconnects),
	        cmocka_unit_test(test_migrations_once),
	        cmocka_unit_test(test_password_never_shown),
	};

	pg = getenv("RP_TEST_PG");
	if (pg == NULL || !*pg) {
		fprintf(stderr, "test_postgres: RP_TEST_PG is not set: run it as ctest -L pg "
		                "(tests/pg/cluster.sh starts the cluster)\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
