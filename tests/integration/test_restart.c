/* Restarts keep everything: graceful stop, kill -9, and the admin token is not reissued. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static void
seed(struct server *s, const char *prefix, int n)
{
	struct reply r;
	char name[64];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s-%d", prefix, i);
		assert_int_equal(call(s, s->admin, "POST", "/v1/nodes", &r, "{s:s, s:{s:s, s:s}}",
		                      "name", name, "bmc", "driver", "fake", "password", "pw"),
		                 201);
		reply_free(&r);
	}
}

static void
test_restart_keeps_data(void **state)
{
	struct server s;
	char admin[128], dir[256], viewer[128], path[300];
	struct reply r;
	struct stat sb;
	long events;

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(dir, sizeof dir, "%s", s.dir);
	snprintf(admin, sizeof admin, "%s", s.admin);
	/* The token file is private to its owner. */
	snprintf(path, sizeof path, "%s/admin.token", dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	make_token(&s, "viewer", viewer);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r01"), 201);
	reply_free(&r);
	seed(&s, "a", 20);
	events = count_all(&s, "/v1/events");

	/* Graceful stop and start. */
	server_stop(&s, SIGTERM);
	server_start(&s, dir, NULL);
	assert_string_equal(s.admin, admin);
	assert_int_equal(count_all(&s, "/v1/nodes"), 20);
	assert_int_equal(count_all(&s, "/v1/events"), events);
	assert_int_equal(call(&s, viewer, "GET", "/v1/racks/r01", &r, NULL), 200);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/nodes/a-3", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(json_object_get(r.json, "bmc"), "password_set")));
	reply_free(&r);

	/* kill -9 right after acknowledged writes: every acknowledged write is there. */
	seed(&s, "b", 20);
	server_stop(&s, SIGKILL);
	server_start(&s, dir, NULL);
	assert_int_equal(count_all(&s, "/v1/nodes"), 40);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/nodes/b-19", &r, NULL), 200);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

/* Retention at work in the server: events older than retention_days are gone within seconds
 * of a start (the leader prunes soon after it starts), younger ones stay. */
static void
test_retention(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	struct server s;
	char dir[256], log[65536];
	long before;
	int i;

	(void)state;
	server_start(&s, NULL, args);
	snprintf(dir, sizeof dir, "%s", s.dir);
	seed(&s, "ret", 6);
	before = count_all(&s, "/v1/events");
	assert_true(before >= 6);
	server_stop(&s, SIGTERM);
	/* Four of them 100 days old (the default keeps 90). */
	assert_int_equal(test_sql(dir, "UPDATE events SET at = 1000 WHERE id IN (SELECT id FROM "
	                               "events ORDER BY id LIMIT 4)"),
	                 0);
	server_start(&s, dir, args);
	for (i = 0; i < 100 && count_all(&s, "/v1/events") != before - 4; i++)
		usleep(100000);
	assert_int_equal(count_all(&s, "/v1/events"), before - 4);
	slurp(s.log, log, sizeof log);
	assert_non_null(strstr(log, "retention: removed 4 event(s)"));
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

static void
test_new_admin_token(void **state)
{
	struct server s;
	char cmd[700], old[128], dir[256];
	struct reply r;

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(old, sizeof old, "%s", s.admin);
	snprintf(dir, sizeof dir, "%s", s.dir);
	server_stop(&s, SIGTERM);
	/* An operator who lost the token file issues a new one offline. */
	snprintf(cmd, sizeof cmd, "'%s' --data-dir '%s'%s --new-admin-token 2>/dev/null",
	         rp_test_bin, dir, test_database_flag(dir));
	assert_int_equal(system(cmd), 0);
	server_start(&s, dir, NULL);
	assert_string_not_equal(s.admin, old);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/tokens", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	reply_free(&r);
	/* The old one still works until revoked. */
	assert_int_equal(call(&s, old, "GET", "/v1", &r, NULL), 200);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

static void
test_one_server_per_data_dir(void **state)
{
	struct server s;
	char cmd[700], out[512] = "";
	FILE *p;

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(cmd, sizeof cmd, "'%s' --listen 127.0.0.1:0 --data-dir '%s'%s 2>&1", rp_test_bin,
	         s.dir, test_database_flag(s.dir));
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(out + strlen(out), (int)(sizeof out - strlen(out)), p))
		;
	assert_int_not_equal(pclose(p), 0);
	assert_non_null(strstr(out, "another rackpilotd is already using"));
	/* The first one is unaffected. */
	assert_int_equal(req(&s, NULL, "GET", "/healthz", NULL, NULL, 0, NULL, NULL), 200);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

static void
test_newer_schema_refused(void **state)
{
	struct server s;
	char cmd[800], dir[256], out[512] = "";
	FILE *p;
	int status;

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(dir, sizeof dir, "%s", s.dir);
	server_stop(&s, SIGTERM);
	assert_int_equal(test_sql(dir, test_database(dir)
	                                       ? "UPDATE rp_schema_version SET version = 999"
	                                       : "PRAGMA user_version=999"),
	                 0);
	snprintf(cmd, sizeof cmd, "'%s' --listen 127.0.0.1:0 --data-dir '%s'%s 2>&1", rp_test_bin,
	         dir, test_database_flag(dir));
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(out + strlen(out), (int)(sizeof out - strlen(out)), p))
		;
	status = pclose(p);
	assert_int_not_equal(status, 0);
	assert_non_null(strstr(out, "newer than this rackpilotd knows"));
	server_cleanup(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_restart_keeps_data),
	        cmocka_unit_test(test_retention),
	        cmocka_unit_test(test_new_admin_token),
	        cmocka_unit_test(test_one_server_per_data_dir),
	        cmocka_unit_test(test_newer_schema_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
