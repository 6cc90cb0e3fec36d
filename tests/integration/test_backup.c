/*
 * rackpilotd backup / restore, on SQLite (PostgreSQL has pg_dump: test_postgres checks that
 * backup says so). A backup taken while 200 power jobs run is one consistent snapshot that
 * restores into a server that starts, takes the interrupted jobs back and ends every one; a
 * backup of the settled server restores into one whose reads answer byte for byte the same;
 * a truncated, altered, newer or foreign file, or one with a trigger of its own, is refused
 * and leaves nothing behind, as is a restore over a database or into a directory a server
 * holds, and a backup over a file. And a database an older release wrote upgrades in place
 * and answers every read as that release did.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "store/store.h"

#define NODES   20
#define BATCHES 10

static char tmp[256];

/* rackpilotd ARGS, its stderr into tmp/NAME.log: the exit status. */
static int
tool(const char *name, const char *args)
{
	return sh_rc("'%s' %s 2>'%s/%s.log'", rp_test_bin, args, tmp, name);
}

/* tmp/NAME.log contains text. */
static int
logged(const char *name, const char *text)
{
	char path[400], buf[16384];

	snprintf(path, sizeof path, "%s/%s.log", tmp, name);
	return strstr(slurp(path, buf, sizeof buf), text) != NULL;
}

/* One number from a SQLite file (the sqlite3 client, as an operator would look). */
static long
sqlite_count(const char *file, const char *sql)
{
	char cmd[700], line[64] = "";
	FILE *p;

	snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"%s\"", file, sql);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(line, sizeof line, p));
	assert_int_equal(pclose(p), 0);
	return atol(line);
}

/* A data directory made for a restore, with the admin token the operator keeps (the token
 * file is not in the backup: its hash is). */
static void
new_dir(char *out, size_t len, const char *name, const struct server *from)
{
	snprintf(out, len, "%s/%s", tmp, name);
	sh("mkdir -m 700 '%s' && cp -p '%s/admin.token' '%s/'", out, from->dir, out);
}

/* GET path on both servers: the same status and the same bytes. */
static void
same(struct server *a, struct server *b, const char *path)
{
	struct reply ra, rb;

	assert_int_equal(call(a, a->admin, "GET", path, &ra, NULL), 200);
	assert_int_equal(call(b, b->admin, "GET", path, &rb, NULL), 200);
	if (ra.len != rb.len || memcmp(ra.body, rb.body, ra.len) != 0)
		fail_msg("GET %s differs after the restore:\n%.600s\n%.600s", path, ra.body,
		         rb.body);
	reply_free(&ra);
	reply_free(&rb);
}

/* Every batch of ids[] done on s. */
static void
wait_batches(struct server *s, char ids[][200])
{
	struct reply r;
	int i, k, done = 0;

	for (k = 0; k < 600 && !done; k++) {
		for (i = 0, done = 1; i < BATCHES && done; i++) {
			assert_int_equal(call(s, s->admin, "GET", ids[i], &r, NULL), 200);
			done = json_is_true(json_object_get(r.json, "done"));
			reply_free(&r);
		}
		if (!done)
			usleep(100000);
	}
	assert_true(done);
}

static void
test_backup_restore(void **state)
{
	static const char *const nosweep[] = {"--power-sync-interval", "0", NULL};
	struct server s, r1, r2;
	struct reply r;
	char ids[BATCHES][200], d1[300], d2[300], d3[300], args[1200], file[400], name[32];
	long queued;
	int i;

	(void)state;
	snprintf(tmp, sizeof tmp, "/tmp/rp-backup-%d", (int)getpid());
	sh("rm -rf '%s' && mkdir -m 700 '%s'", tmp, tmp);
	/* No periodic sweep: it would change what the servers answer between the backup and
	 * the comparison (a slow, sanitizer, build meets one). */
	server_start(&s, NULL, nosweep);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r1"), 201);
	reply_free(&r);
	for (i = 0; i < NODES; i++) {
		snprintf(name, sizeof name, "b%02d", i);
		make_node(&s, "{s:s, s:s, s:i, s:{s:s, s:s, s:{s:i}}}", "name", name, "rack", "r1",
		          "u_position", i + 1, "bmc", "driver", "fake", "password", "pw", "options",
		          "delay_ms", 100);
	}
	/* 200 power jobs: ten batches over the rack, on and off in turn. */
	for (i = 0; i < BATCHES; i++) {
		assert_int_equal(call(&s, s.admin, "POST", "/v1/actions/power", &r,
		                      "{s:{s:s}, s:s}", "selector", "rack", "r1", "target",
		                      i % 2 ? "off" : "on"),
		                 202);
		snprintf(ids[i], sizeof ids[i], "/v1/batches/%s", jstr(r.json, "id"));
		reply_free(&r);
	}

	/* While they run (some have ended): a backup with the key. */
	for (i = 0; i < 300 && count_all(&s, "/v1/jobs?state=succeeded") < 20; i++)
		usleep(20000);
	snprintf(file, sizeof file, "%s/run.db", tmp);
	snprintf(args, sizeof args, "backup '%s' --data-dir '%s' --with-key", file, s.dir);
	assert_int_equal(tool("run", args), 0);
	assert_true(logged("run", "holds the secret key"));
	assert_int_equal(access(file, F_OK), 0);
	/* Mid-run indeed: the snapshot holds all 200 jobs, some not ended yet. */
	assert_int_equal(sqlite_count(file, "SELECT count(*) FROM jobs"), NODES * BATCHES);
	queued = sqlite_count(file,
	                      "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')");
	fprintf(stderr, "backup: %ld of %d jobs had not ended at the backup\n", queued,
	        NODES * BATCHES);
	assert_true(queued > 0 && queued < NODES * BATCHES);
	/* A backup never replaces a file. */
	assert_int_not_equal(tool("again", args), 0);
	assert_true(logged("again", "exists: name a new file"));

	/* Restored, it starts (the key came with it), takes the unfinished jobs back and ends
	 * every one. */
	new_dir(d1, sizeof d1, "r1", &s);
	snprintf(args, sizeof args, "restore '%s' --data-dir '%s'", file, d1);
	assert_int_equal(tool("restore1", args), 0);
	assert_true(logged("restore1", "checked against its manifest"));
	/* The key came with it, and out of the manifest: none of it is left in the database. */
	snprintf(args, sizeof args, "%s/secret.key", s.dir);
	assert_int_equal(sh_rc("cmp -s '%s' '%s/secret.key'", args, d1), 0);
	assert_int_not_equal(sh_rc("grep -qa 'rackpilot-secret-key-v1' '%s/rackpilot.db'", d1), 0);
	/* The same backup into a directory with another key: refused before anything appears;
	 * and beside the WAL a killed server left: refused too. */
	new_dir(d3, sizeof d3, "otherkey", &s);
	sh("(umask 077; echo 'rackpilot-secret-key-v1 another' > '%s/secret.key')", d3);
	snprintf(args, sizeof args, "restore '%s' --data-dir '%s'", file, d3);
	assert_int_not_equal(tool("otherkey", args), 0);
	assert_true(logged("otherkey", "holds another key than the backup"));
	snprintf(args, sizeof args, "%s/rackpilot.db", d3);
	assert_int_not_equal(access(args, F_OK), 0);
	sh("rm -f '%s/secret.key' && echo stale > '%s/rackpilot.db-wal'", d3, d3);
	snprintf(args, sizeof args, "restore '%s' --data-dir '%s'", file, d3);
	assert_int_not_equal(tool("stalewal", args), 0);
	assert_true(logged("stalewal", "rackpilot.db-wal exists"));
	snprintf(args, sizeof args, "%s/rackpilot.db", d3);
	assert_int_not_equal(access(args, F_OK), 0);

	server_start(&r1, d1, nosweep);
	wait_batches(&r1, ids);
	assert_int_equal(count_all(&r1, "/v1/jobs"), NODES * BATCHES);
	assert_int_equal(count_all(&r1, "/v1/jobs?state=queued") +
	                         count_all(&r1, "/v1/jobs?state=running"),
	                 0);
	assert_int_equal(call(&r1, r1.admin, "GET", "/v1/nodes/b07", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(json_object_get(r.json, "bmc"), "password_set")));
	reply_free(&r);
	server_stop(&r1, SIGTERM);

	/* Settled: a backup without the key restores into a server whose reads are the
	 * source's, once the key is where the warning says. */
	wait_batches(&s, ids);
	snprintf(file, sizeof file, "%s/settled.db", tmp);
	snprintf(args, sizeof args, "backup '%s' --data-dir '%s'", file, s.dir);
	assert_int_equal(tool("settled", args), 0);
	assert_false(logged("settled", "secret key"));
	assert_int_equal(sqlite_count(file, "SELECT count(*) FROM rp_backup WHERE manifest LIKE "
	                                    "'%secret_key%'"),
	                 0);
	new_dir(d2, sizeof d2, "r2", &s);
	snprintf(args, sizeof args, "restore '%s' --data-dir '%s'", file, d2);
	assert_int_equal(tool("restore2", args), 0);
	assert_true(logged("restore2", "holds no secret key"));
	sh("cp -p '%s/secret.key' '%s/'", s.dir, d2);
	server_start(&r2, d2, nosweep);
	same(&s, &r2, "/v1/racks");
	same(&s, &r2, "/v1/nodes?limit=1000");
	same(&s, &r2, "/v1/jobs?limit=1000");
	same(&s, &r2, "/v1/racks/r1/elevation");
	for (i = 0; i < BATCHES; i++)
		same(&s, &r2, ids[i]);
	same(&s, &r2, "/v1/events?limit=1000");

	/* Refused, nothing written: a restore over a database, and into a directory a server
	 * holds. */
	snprintf(args, sizeof args, "restore '%s' --data-dir '%s'", file, d2);
	assert_int_not_equal(tool("over", args), 0);
	assert_true(logged("over", "another rackpilotd is already using"));
	server_stop(&r2, SIGTERM);
	assert_int_not_equal(tool("over2", args), 0);
	assert_true(logged("over2", "exists: restore into a new data directory"));

	/* Refused, nothing written: truncated, altered, newer, and no backup at all. */
	sh("head -c $(( $(stat -c %%s '%s') / 2 )) '%s' > '%s/half.db'", file, file, tmp);
	sh("cp '%s' '%s/altered.db' && sqlite3 '%s/altered.db' \"UPDATE nodes SET name = "
	   "'b99' WHERE name = 'b07'\"",
	   file, tmp, tmp);
	sh("cp '%s' '%s/trigger.db' && sqlite3 '%s/trigger.db' \"CREATE TRIGGER t AFTER INSERT ON "
	   "racks BEGIN DELETE FROM tokens; END\"",
	   file, tmp, tmp);
	sh("cp '%s' '%s/macs.db' && sqlite3 '%s/macs.db' \"CREATE TRIGGER macs_ins AFTER INSERT ON "
	   "jobs BEGIN DELETE FROM nodes; END\"",
	   file, tmp, tmp);
	sh("cp '%s' '%s/noindex.db' && sqlite3 '%s/noindex.db' \"DROP INDEX jobs_one_mutating\"",
	   file, tmp, tmp);
	sh("cp '%s' '%s/oddtable.db' && sqlite3 '%s/oddtable.db' 'CREATE TABLE \"t,t a,t b\" (x)'",
	   file, tmp, tmp);
	sh("cp '%s' '%s/textver.db' && sqlite3 '%s/textver.db' \"UPDATE rp_backup SET manifest = "
	   "json_set(manifest, '$.schema_version', '15')\"",
	   file, tmp, tmp);
	sh("cp '%s' '%s/newer.db' && sqlite3 '%s/newer.db' \"PRAGMA user_version = 999; UPDATE "
	   "rp_backup SET manifest = json_set(manifest, '$.schema_version', 999)\"",
	   file, tmp, tmp);
	{
		static const struct {
			const char *file, *why;
		} bad[] = {
		        {"half.db", "is damaged or not a rackpilot backup"},
		        {"altered.db", "is damaged: its manifest says"},
		        {"newer.db", "newer than this rackpilotd knows"},
		        {"trigger.db", "holds a schema rackpilot never makes"},
		        {"macs.db", "holds a schema rackpilot never makes"},
		        {"noindex.db", "holds a schema rackpilot never makes"},
		        {"oddtable.db", "holds a schema rackpilot never makes"},
		        {"textver.db", "manifest names schema version no"},
		        {"/dev/zero", "is not a regular file"},
		        {"none.db", "is not a rackpilot backup (no manifest)"},
		        {"missing.db", "cannot read"},
		};

		sh("cp '%s/rackpilot.db' '%s/none.db'", d2, tmp);
		for (i = 0; i < (int)(sizeof bad / sizeof *bad); i++) {
			snprintf(d3, sizeof d3, "%s/bad%d", tmp, i);
			if (bad[i].file[0] == '/')
				snprintf(args, sizeof args, "restore '%s' --data-dir '%s'",
				         bad[i].file, d3);
			else
				snprintf(args, sizeof args, "restore '%s/%s' --data-dir '%s'", tmp,
				         bad[i].file, d3);
			assert_int_not_equal(tool("bad", args), 0);
			if (!logged("bad", bad[i].why))
				fail_msg("restore of %s: no '%s' in the log", bad[i].file,
				         bad[i].why);
			assert_true(logged("bad", "nothing restored"));
			snprintf(file, sizeof file, "%s/rackpilot.db", d3);
			assert_int_not_equal(access(file, F_OK), 0);
			snprintf(file, sizeof file, "%s/rackpilot.db.restoring", d3);
			assert_int_not_equal(access(file, F_OK), 0);
		}
	}
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
	sh("rm -rf '%s'", tmp);
}

/* Is every member of old in new with the same value (new may have more members)? Arrays:
 * the same length, element by element. NULL, or where they first differ (a new string). */
static char *
differs(json_t *old, json_t *new, const char *at)
{
	char sub[400], *d = NULL;
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_object(old) && json_is_object(new)) {
		json_object_foreach(old, k, v)
		{
			snprintf(sub, sizeof sub, "%s.%s", at, k);
			if ((d = differs(v, json_object_get(new, k), sub)) != NULL)
				return d;
		}
		return NULL;
	}
	if (json_is_array(old) && json_is_array(new) &&
	    json_array_size(old) == json_array_size(new)) {
		json_array_foreach(old, i, v)
		{
			snprintf(sub, sizeof sub, "%s[%zu]", at, i);
			if ((d = differs(v, json_array_get(new, i), sub)) != NULL)
				return d;
		}
		return NULL;
	}
	if (json_equal(old, new))
		return NULL;
	{
		char *o = json_dumps(old, JSON_COMPACT | JSON_ENCODE_ANY),
		     *n = new ? json_dumps(new, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

		if (asprintf(&d, "%s: was %.300s, is %.300s", at, o ? o : "?", n ? n : "absent") <
		    0)
			d = NULL;
		free(o);
		free(n);
	}
	return d ? d : strdup(at);
}

/* A database the rackpilotd of eab6802 wrote (schema 10: BMC passwords in clear, no secret key;
 * tests/fixtures/upgrade/, with make.sh that made it) upgraded in place by this one: it
 * starts, migrations 11 on applied and the passwords sealed, and each read the old server
 * answered is answered alike: every member it showed, with the same value. */
static void
test_upgrade(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};
	struct server s;
	json_t *reads, *rd, *now;
	json_error_t jerr;
	char dir[300], path[400], *d;
	size_t i;

	(void)state;
	snprintf(dir, sizeof dir, "/tmp/rp-upgrade-%d", (int)getpid());
	sh("rm -rf '%s' && mkdir -m 700 '%s' && sqlite3 '%s/rackpilot.db' < "
	   "'%s/tests/fixtures/upgrade/schema-10.sql' && install -m 600 "
	   "'%s/tests/fixtures/upgrade/admin.token' '%s/'",
	   dir, dir, dir, rp_test_src, rp_test_src, dir);
	snprintf(path, sizeof path, "%s/rackpilot.db", dir);
	assert_int_equal(sqlite_count(path, "PRAGMA user_version"), 10);
	assert_int_equal(sqlite_count(path, "SELECT count(*) FROM bmcs WHERE password IS NOT NULL"),
	                 12);
	server_start(&s, dir, args);
	snprintf(path, sizeof path, "%s/tests/fixtures/upgrade/reads.json", rp_test_src);
	assert_non_null(reads = json_load_file(path, 0, &jerr));
	assert_int_equal(json_array_size(reads), 10);
	json_array_foreach(reads, i, rd)
	{
		now = get_json(&s, jstr(rd, "path"));
		/* The first start also loads the shipped recipes (docs/recipes.md): new events. */
		if (!strncmp(jstr(rd, "path"), "/v1/events", 10)) {
			json_t *items = json_object_get(now, "items"), *ev;
			size_t k = 0, shipped = 0;

			while ((ev = json_array_get(items, k)) != NULL) {
				if (!strcmp(jstr(ev, "action"), "recipe.created") &&
				    !strcmp(jstr(ev, "actor"), "rackpilotd")) {
					json_array_remove(items, k);
					shipped++;
				} else
					k++;
			}
			assert_true(shipped > 0);
		}
		if ((d = differs(json_object_get(rd, "body"), now, jstr(rd, "path"))) != NULL)
			fail_msg("after the upgrade, GET %s", d);
		json_decref(now);
	}
	json_decref(reads);
	server_stop(&s, SIGTERM);
	/* Sealed at the first start, none left in clear. */
	snprintf(path, sizeof path, "%s/rackpilot.db", dir);
	assert_int_equal(sqlite_count(path, "PRAGMA user_version"), rp_store_schema_latest());
	assert_int_equal(sqlite_count(path, "SELECT count(*) FROM bmcs WHERE password_sealed LIKE "
	                                    "'rpsec1:%'"),
	                 12);
	sh("rm -rf '%s'", dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_upgrade),
	        cmocka_unit_test(test_backup_restore),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
