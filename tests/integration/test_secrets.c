/*
 * Secrets at rest (docs/security.md), through the real rackpilotd: a BMC password enrolled
 * over the API is in no database file, yet the Redfish mock (which checks it) accepts it;
 * rackpilotd --rotate-secret-key re-seals under a new key, and a kill -9 at any point of a
 * rotation leaves a server that starts and whose BMC still accepts the password; the old key
 * file then opens nothing, and --forget-secrets is the way out of a lost key.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define PASSWORD "Rf-Sekret-9931-Quebec"

static struct mock M;
static char workdir[200], dir[256];

/* 1 when needle is in the database's files (SQLite: main, WAL, shm; PostgreSQL: every file of
 * the test cluster, its WAL included) or the server's log. */
static int
leaked(const char *needle)
{
	char cmd[1200], path[400];
	const char *pg = getenv("RP_TEST_PG");
	struct stat sb;

	if (test_database(dir)) {
		snprintf(path, sizeof path, "%s/data/base", pg);
		assert_int_equal(stat(path, &sb), 0);
		sh("psql -qX '%s' -c CHECKPOINT >/dev/null", test_database(dir));
		snprintf(cmd, sizeof cmd,
		         "{ find %s/data -type f -exec cat {} + ; cat %s.log; } "
		         "2>/dev/null | grep -aqF '%s'",
		         pg, dir, needle);
		return sh_rc("%s", cmd) == 0;
	}
	/* Nothing to find in files that are not there would prove nothing. */
	snprintf(path, sizeof path, "%s/rackpilot.db", dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_true(sb.st_size > 0);
	snprintf(cmd, sizeof cmd,
	         "cat %s/rackpilot.db %s/rackpilot.db-wal %s/rackpilot.db-shm %s.log 2>/dev/null | "
	         "grep -aqF '%s'",
	         dir, dir, dir, dir, needle);
	return sh_rc("%s", cmd) == 0;
}

/* A power status job against the mock: succeeds only with the right password. */
static void
power_ok(struct server *s)
{
	struct reply r;
	json_t *job;

	assert_int_equal(
	        call(s, s->admin, "PUT", "/v1/nodes/rf/power", &r, "{s:s}", "target", "on"), 202);
	job = wait_job(s, jstr(r.json, "id"), 60);
	reply_free(&r);
	if (strcmp(jstr(job, "state"), "succeeded") != 0)
		fail_msg("power job: %s", json_dumps(job, 0));
	json_decref(job);
}

/* The key id a key file names (its third word). */
static void
key_id(const char *path, char *out, size_t len)
{
	char line[256], *p;

	slurp(path, line, sizeof line);
	p = strrchr(line, ' ');
	assert_non_null(p);
	snprintf(out, len, "%.16s", p + 1);
}

/* rackpilotd --rotate-secret-key on the data dir; with pause_at, killed -9 at that point (or
 * after delay_us when pause_at is NULL and delay_us > 0). Returns the exit status, or -9. */
static int
rotate(const char *pause_at, long delay_us)
{
	char log[300], err[8192];
	pid_t pid;
	int status, i;

	snprintf(log, sizeof log, "%s/rotate.log", workdir);
	/* Emptied before the child starts, so the wait below never reads the last run's words. */
	sh("rm -f %s", log);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (pause_at)
			setenv("RACKPILOTD_PAUSE_AT", pause_at, 1);
		dup2(fd, 1);
		dup2(fd, 2);
		const char *db = test_database(dir);

		execl(rp_test_bin, rp_test_bin, "--data-dir", dir, "--rotate-secret-key",
		      db ? "--database" : (char *)NULL, db, (char *)NULL);
		_exit(127);
	}
	if (pause_at) {
		for (i = 0; i < 600; i++) {
			slurp(log, err, sizeof err);
			if (strstr(err, "paused at"))
				break;
			usleep(50000);
		}
		assert_non_null(strstr(err, "paused at"));
		kill(pid, SIGKILL);
	} else if (delay_us > 0) {
		usleep((useconds_t)delay_us);
		kill(pid, SIGKILL);
	}
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		return -WTERMSIG(status);
	return WEXITSTATUS(status);
}

static void
start(struct server *s)
{
	server_start(s, dir, (const char *[]){"--power-sync-interval", "0", NULL});
}

static void
test_sealed_at_rest(void **state)
{
	struct server s;
	struct reply r;

	(void)state;
	start(&s);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/nodes", &r,
	                      "{s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "name", "rf", "bmc",
	                      "driver", "redfish", "address", "127.0.0.1", "port", M.base,
	                      "username", "admin", "password", PASSWORD, "options", "scheme",
	                      "http"),
	                 201);
	assert_null(strstr(r.body, PASSWORD));
	reply_free(&r);
	power_ok(&s);
	server_stop(&s, SIGTERM);
	/* Checkpointed or not, no file of the database holds it, nor the log. */
	assert_false(leaked(PASSWORD));
	start(&s);
	power_ok(&s);
	server_stop(&s, SIGKILL);
	assert_false(leaked(PASSWORD));
}

/* A database an older version wrote (the password in clear) is sealed at the next start, the
 * plaintext leaves every file, and the BMC still gets the password. */
static void
test_legacy_plaintext(void **state)
{
	struct server s;
	char cmd[600], log[65536];

	(void)state;
	snprintf(cmd, sizeof cmd,
	         "sqlite3 %s/rackpilot.db \"UPDATE bmcs SET password = '%s', password_sealed = "
	         "NULL\"",
	         dir, PASSWORD);
	sh("%s", cmd);
	assert_true(leaked(PASSWORD));
	start(&s);
	slurp(s.log, log, sizeof log);
	assert_non_null(
	        strstr(log, "sealed 1 BMC password(s) stored in clear by an older version"));
	power_ok(&s);
	server_stop(&s, SIGTERM);
	assert_false(leaked(PASSWORD));
}

static void
test_rotation_survives_kill9(void **state)
{
	static const char *const points[] = {"rotate-begun", "rotate-resealed", NULL};
	char key[300], before[32], after[32], log[65536];
	struct server s;
	int i;

	(void)state;
	snprintf(key, sizeof key, "%s/secret.key", dir);
	/* Enough secrets that a rotation takes a while to kill it in the middle of. */
	{
		char csv[300];
		FILE *f;
		int n;

		snprintf(csv, sizeof csv, "%s/many.csv", workdir);
		f = fopen(csv, "w");
		assert_non_null(f);
		fprintf(f, "name,bmc_driver,bmc_username,bmc_password\n");
		for (n = 0; n < 3000; n++)
			fprintf(f, "many-%04d,fake,admin,pw-%04d-filler\n", n, n);
		fclose(f);
		start(&s);
		sh("curl -sf -o /dev/null -H 'Authorization: Bearer %s' -H 'Content-Type: "
		   "text/csv' "
		   "--data-binary @%s %s/v1/import",
		   s.admin, csv, s.base);
		server_stop(&s, SIGTERM);
	}
	for (i = 0; points[i]; i++) {
		key_id(key, before, sizeof before);
		assert_int_equal(rotate(points[i], 0), -SIGKILL);
		start(&s);
		power_ok(&s);
		key_id(key, after, sizeof after);
		slurp(s.log, log, sizeof log);
		if (i == 0) {
			/* The database was still all under the old key: it stays. */
			assert_string_equal(before, after);
			assert_non_null(strstr(log, "abandoned an interrupted key rotation"));
		} else {
			/* Re-sealed and committed: the new key is installed. */
			assert_string_not_equal(before, after);
			assert_non_null(strstr(log, "finished an interrupted key rotation"));
		}
		server_stop(&s, SIGTERM);
	}
	/* Killed at whatever moment, many times: every start works and the BMC agrees. The
	 * moments spread over the rotation's run (the log says how many kills landed in it). */
	{
		int killed = 0, whole = 0;

		for (i = 0; i < 8; i++) {
			struct timespec ts;
			int rc;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			rc = rotate(NULL, 5000 + (ts.tv_nsec / 1000) % 150000);
			killed += rc == -SIGKILL;
			whole += rc == 0;
			start(&s);
			power_ok(&s);
			server_stop(&s, SIGTERM);
		}
		print_message("rotation killed %d times of 8 (%d ran to the end)\n", killed, whole);
		assert_int_equal(killed + whole, 8);
	}
	/* A whole rotation: the key changes, and the old key file opens nothing any more. */
	key_id(key, before, sizeof before);
	sh("cp %s %s/old.key", key, workdir);
	assert_int_equal(rotate(NULL, 0), 0);
	key_id(key, after, sizeof after);
	assert_string_not_equal(before, after);
	start(&s);
	power_ok(&s);
	server_stop(&s, SIGTERM);
	assert_false(leaked(PASSWORD));
}

/* The wrong key file: the server refuses to start, saying what to do; --forget-secrets clears
 * the password (an event says so) and the server starts; a rotation with a server running is
 * refused. */
static void
test_wrong_key(void **state)
{
	char key[300], cmd[1200], out[8192];
	struct server s;
	struct reply r;

	(void)state;
	snprintf(key, sizeof key, "%s/secret.key", dir);
	sh("cp %s %s/good.key && cp %s/old.key %s", key, workdir, workdir, key);
	snprintf(cmd, sizeof cmd, "%s --data-dir %s%s --listen 127.0.0.1:0 > %s/wrong.log 2>&1",
	         rp_test_bin, dir, test_database_flag(dir), workdir);
	assert_int_not_equal(sh_rc("%s", cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/wrong.log", workdir);
	slurp(cmd, out, sizeof out);
	assert_non_null(strstr(out, "3001 of 3001 BMC passwords cannot be opened"));
	assert_non_null(strstr(out, "--forget-secrets"));
	/* Back to the right key: all is well again; a rotation while it runs is refused. */
	sh("cp %s/good.key %s", workdir, key);
	start(&s);
	power_ok(&s);
	assert_int_not_equal(rotate(NULL, 0), 0);
	snprintf(cmd, sizeof cmd, "%s/rotate.log", workdir);
	slurp(cmd, out, sizeof out);
	assert_non_null(strstr(out, "another rackpilotd is already using"));
	server_stop(&s, SIGTERM);
	/* Lost key: forget the password, start, see why. */
	sh("cp %s/old.key %s", workdir, key);
	server_start(&s, dir,
	             (const char *[]){"--power-sync-interval", "0", "--forget-secrets", NULL});
	assert_int_equal(call(&s, s.admin, "GET", "/v1/nodes/rf", &r, NULL), 200);
	assert_false(json_is_true(json_object_get(json_object_get(r.json, "bmc"), "password_set")));
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET",
	                      "/v1/events?node=rf&action=node.bmc_password_cleared", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	server_stop(&s, SIGTERM);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(workdir, sizeof workdir, "/tmp/rp-secrets-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	snprintf(dir, sizeof dir, "%s/data", workdir);
	mock_start(&M, 1, (const char *[]){"--password", PASSWORD, NULL});
	mock_post(&M, 0, "/__mock/config", "{\"power_delay_s\":0}");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	mock_stop(&M);
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s %s.log", workdir, dir);
	return 0;
}

int
main(void)
{
	/* In order: each starts from the database the one before left. */
	const struct CMUnitTest sqlite[] = {
	        cmocka_unit_test(test_sealed_at_rest),
	        cmocka_unit_test(test_legacy_plaintext),
	        cmocka_unit_test(test_rotation_survives_kill9),
	        cmocka_unit_test(test_wrong_key),
	};
	/* Clear-text passwords exist only in SQLite files an older rackpilotd wrote: a
	 * PostgreSQL database is only ever written by one that seals them. */
	const struct CMUnitTest pg[] = {
	        cmocka_unit_test(test_sealed_at_rest),
	        cmocka_unit_test(test_rotation_survives_kill9),
	        cmocka_unit_test(test_wrong_key),
	};

	if (getenv("RP_TEST_PG") && *getenv("RP_TEST_PG"))
		return cmocka_run_group_tests(pg, setup, teardown);
	return cmocka_run_group_tests(sqlite, setup, teardown);
}
