/* rackpilotd's command line: --version, -n with a config file, config errors, flags win. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int
run(const char *args, char *out, size_t n)
{
	char cmd[1024];
	size_t got = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", rp_test_bin, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	out[0] = '\0';
	while (got + 1 < n && fgets(out + got, (int)(n - got), p))
		got = strlen(out);
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
test_version(void **state)
{
	char out[256];

	(void)state;
	assert_int_equal(run("--version", out, sizeof out), 0);
	assert_non_null(strstr(out, "rackpilotd 0."));
}

static void
test_check_config(void **state)
{
	char out[2048], args[512], path[] = "/tmp/rp-conf-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	(void)state;
	fprintf(f, "# test\n[server]\nlisten = 127.0.0.1:9999\nthreads = 3\nmax_body = 2M\n"
	           "access_log = off\n");
	fclose(f);
	snprintf(args, sizeof args, "-n -c %s", path);
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_non_null(strstr(out, "listen = 127.0.0.1:9999"));
	assert_non_null(strstr(out, "threads = 3"));
	assert_non_null(strstr(out, "max_body = 2097152"));
	assert_non_null(strstr(out, "access_log = false"));
	assert_non_null(strstr(out, "data_dir = ./var"));
	/* Flags beat the file. */
	snprintf(args, sizeof args, "-n -c %s --listen 127.0.0.1:1234 --data-dir /srv/rp", path);
	assert_int_equal(run(args, out, sizeof out), 0);
	assert_non_null(strstr(out, "listen = 127.0.0.1:1234"));
	assert_non_null(strstr(out, "data_dir = /srv/rp"));
	assert_non_null(strstr(out, "threads = 3"));
	/* Mistakes are named with their line. */
	f = fopen(path, "w");
	fprintf(f, "[server]\nlisten = 127.0.0.1:1\nthreds = 3\n");
	fclose(f);
	snprintf(args, sizeof args, "-n -c %s", path);
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, ":3: unknown setting 'threds'"));
	f = fopen(path, "w");
	fprintf(f, "[server]\nlisten = localhost\n");
	fclose(f);
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, "expected ADDR:PORT"));
	unlink(path);
	/* The shipped example config is valid, equals the defaults setting by setting, and shows
	 * every setting there is (the commented-out ones too). */
	{
		char shipped[8192], defaults[8192], doc[16384], file[400], *line, *save = NULL;

		snprintf(args, sizeof args, "-n -c %s/docs/rackpilotd.conf", rp_test_src);
		assert_int_equal(run(args, shipped, sizeof shipped), 0);
		assert_non_null(strstr(shipped, "listen = 127.0.0.1:8475"));
		assert_int_equal(run("-n", defaults, sizeof defaults), 0);
		assert_string_equal(strchr(shipped, '\n'), strchr(defaults, '\n'));
		snprintf(file, sizeof file, "%s/docs/rackpilotd.conf", rp_test_src);
		slurp(file, doc, sizeof doc);
		for (line = strtok_r(strchr(defaults, '\n') + 1, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			char key[80], want[100], commented[100];

			if (line[0] == '[')
				continue;
			snprintf(key, sizeof key, "%.*s", (int)strcspn(line, " "), line);
			snprintf(want, sizeof want, "\n%s = ", key);
			snprintf(commented, sizeof commented, "\n#%s = ", key);
			if (!strstr(doc, want) && !strstr(doc, commented))
				fail_msg("docs/rackpilotd.conf does not show %s", key);
		}
	}
	assert_int_equal(run("--bogus", out, sizeof out), 2);
}

/* --demo seeds an empty database once, marks it, and refuses a database with real data. */
static void
test_demo(void **state)
{
	const char *const demo[] = {"--demo", NULL};
	struct server s = {0};
	struct reply r;
	char dir[256], args[512], out[2048];
	json_t *it;
	size_t i;
	int slots = 0;

	(void)state;
	server_start(&s, NULL, demo);
	snprintf(dir, sizeof dir, "%s", s.dir);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(r.json, "demo")));
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/nodes?limit=100", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 16);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/racks/demo-r02/elevation", &r, NULL), 200);
	json_array_foreach(json_object_get(r.json, "slots"), i, it) slots +=
	        json_is_string(json_object_get(it, "node"));
	assert_int_equal(slots, 8 * 4);
	reply_free(&r);
	/* Drift to look at: one firmware component, one BIOS attribute. */
	assert_int_equal(call(&s, s.admin, "GET", "/v1/firmware/drift", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 1);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/bios/drift", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 1);
	reply_free(&r);
	/* The fake BMCs answer power actions. */
	assert_int_equal(call(&s, s.admin, "PUT", "/v1/nodes/gpu-r01-u02/power", &r, "{s:s}",
	                      "target", "on"),
	                 202);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	/* Started again (with or without --demo) it is still demo data, seeded once. */
	server_start(&s, dir, demo);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/nodes?limit=100", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 16);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_start(&s, dir, NULL);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(r.json, "demo")));
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);

	/* A real database is never seeded. */
	memset(&s, 0, sizeof s);
	server_start(&s, NULL, NULL);
	snprintf(dir, sizeof dir, "%s", s.dir);
	assert_int_equal(call(&s, s.admin, "GET", "/v1", &r, NULL), 200);
	assert_true(json_is_false(json_object_get(r.json, "demo")));
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "real"), 201);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	snprintf(args, sizeof args, "--demo --data-dir %s%s --listen 127.0.0.1:0", dir,
	         test_database_flag(dir));
	assert_int_equal(run(args, out, sizeof out), 1);
	assert_non_null(strstr(out, "holds real data"));
	server_start(&s, dir, NULL);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/nodes", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 0);
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	/* Without --data-dir, --demo keeps to its own directory. */
	assert_int_equal(run("--demo -n", out, sizeof out), 0);
	assert_non_null(strstr(out, "data_dir = ./var-demo"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_version),
	        cmocka_unit_test(test_check_config),
	        cmocka_unit_test(test_demo),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
