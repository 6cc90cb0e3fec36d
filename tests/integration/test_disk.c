/*
 * A full disk and a read-only database (issue 14): writes answer 503 with STORAGE_FULL /
 * STORAGE_READONLY and change nothing, reads and /healthz keep answering, the condition is
 * logged once, the database stays intact (PRAGMA integrity_check), and the next write after
 * the operator frees space (or makes the file writable) succeeds without a restart.
 *
 * The data directory is a small tmpfs mounted in a private mount namespace of this test
 * (gone with the process, unmounted in cleanup). Without mount permission (not root, a
 * chroot or container without CAP_SYS_ADMIN) the test skips with 77: a machine limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char mnt[64];

/* Lines of the server log that contain needle. */
static int
log_count(struct server *s, const char *needle)
{
	char line[2048];
	int n = 0;
	FILE *f = fopen(s->log, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

/* Fill the tmpfs until the kernel says ENOSPC, down to the last byte it takes. */
static void
fill(void)
{
	static char buf[65536];
	char path[128];
	size_t chunk;
	int fd;

	snprintf(path, sizeof path, "%s/filler", mnt);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (chunk = sizeof buf; chunk > 0; chunk /= 2) {
		ssize_t w;

		while ((w = write(fd, buf, chunk)) == (ssize_t)chunk)
			;
		assert_true(w >= 0 || errno == ENOSPC);
	}
	close(fd);
}

static void
unfill(void)
{
	char path[128];

	snprintf(path, sizeof path, "%s/filler", mnt);
	assert_int_equal(unlink(path), 0);
}

static void
integrity_ok(void)
{
	char cmd[256], out[256];
	FILE *p;

	snprintf(cmd, sizeof cmd, "sqlite3 '%s/rackpilot.db' 'PRAGMA integrity_check' 2>&1", mnt);
	p = popen(cmd, "r");
	assert_non_null(p);
	out[0] = '\0';
	if (fgets(out, sizeof out, p) == NULL)
		out[0] = '\0';
	assert_int_equal(pclose(p), 0);
	out[strcspn(out, "\n")] = '\0';
	assert_string_equal(out, "ok");
}

static void
expect_degraded(struct server *s, const char *code)
{
	struct reply r;

	assert_int_equal(call(s, NULL, "GET", "/healthz", &r, NULL), 200);
	assert_string_equal(jstr(r.json, "status"), code ? "degraded" : "ok");
	if (code) {
		assert_string_equal(jstr(r.json, "code"), code);
		assert_non_null(jstr(r.json, "reason"));
	}
	reply_free(&r);
}

/* Every kind of write the test tries refuses with 503 and code, with Retry-After. */
static void
writes_refused(struct server *s, const char *code)
{
	struct reply r;

	assert_int_equal(call(s, s->admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r02"), 503);
	assert_error(&r, 503, code);
	assert_string_not_equal(r.retry_after, "");
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "POST", "/v1/nodes", &r, "{s:s, s:s}", "name", "n02",
	                      "rack", "r01"),
	                 503);
	assert_error(&r, 503, code);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "PATCH", "/v1/racks/r01", &r, "{s:s}", "notes", "new"),
	                 503);
	assert_error(&r, 503, code);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "POST", "/v1/tokens", &r, "{s:s, s:s}", "name", "t02",
	                      "role", "viewer"),
	                 503);
	assert_error(&r, 503, code);
	reply_free(&r);
}

/* Reads still answer, with the data from before and nothing of the refused writes. */
static void
reads_work(struct server *s)
{
	struct reply r;

	assert_int_equal(call(s, s->admin, "GET", "/v1/racks", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "GET", "/v1/racks/r01", &r, NULL), 200);
	assert_string_equal(jstr(r.json, "notes"), "old");
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "GET", "/v1/racks/r02", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "GET", "/v1/nodes/n01", &r, NULL), 200);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "GET", "/v1/nodes/n02", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(count_all(s, "/v1/nodes"), 1);
}

/* The same writes succeed now, with no restart in between. */
static void
writes_work(struct server *s)
{
	struct reply r;

	assert_int_equal(call(s, s->admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r02"), 201);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "POST", "/v1/nodes", &r, "{s:s, s:s}", "name", "n02",
	                      "rack", "r01"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "PATCH", "/v1/racks/r01", &r, "{s:s}", "notes", "new"),
	                 200);
	assert_string_equal(jstr(r.json, "notes"), "new");
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "POST", "/v1/tokens", &r, "{s:s, s:s}", "name", "t02",
	                      "role", "viewer"),
	                 201);
	reply_free(&r);
	assert_int_equal(count_all(s, "/v1/racks"), 2);
	assert_int_equal(count_all(s, "/v1/nodes"), 2);
}

static void
seed(struct server *s)
{
	struct reply r;

	assert_int_equal(call(s, s->admin, "POST", "/v1/racks", &r, "{s:s, s:s}", "name", "r01",
	                      "notes", "old"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(s, s->admin, "POST", "/v1/nodes", &r, "{s:s, s:s}", "name", "n01",
	                      "rack", "r01"),
	                 201);
	reply_free(&r);
}

static void
wipe(struct server *s)
{
	sh("chattr -i '%s/rackpilot.db' 2>/dev/null; rm -rf '%s'/* '%s'/.[!.]* '%s'", mnt, mnt, mnt,
	   s->log);
}

/* The server of the running test; teardown stops it even after a failed assertion. */
static struct server srv;

static int
teardown(void **state)
{
	(void)state;
	if (srv.pid > 0) {
		kill(srv.pid, SIGKILL);
		server_stop(&srv, SIGKILL);
	}
	wipe(&srv);
	return 0;
}

static void
test_full(void **state)
{
	int before;

	(void)state;
	server_start(&srv, mnt, NULL);
	seed(&srv);
	expect_degraded(&srv, NULL);
	fill();
	before = log_count(&srv, "refusing writes");
	writes_refused(&srv, "STORAGE_FULL");
	writes_refused(&srv, "STORAGE_FULL");
	reads_work(&srv);
	expect_degraded(&srv, "STORAGE_FULL");
	/* One line for the condition, not one per refused write (eight of them). */
	assert_int_equal(log_count(&srv, "refusing writes") - before, 1);
	unfill();
	writes_work(&srv);
	expect_degraded(&srv, NULL);
	assert_int_equal(log_count(&srv, "writes succeed again"), 1);
	integrity_ok();
	server_stop(&srv, SIGTERM);
	integrity_ok();
}

static void
test_readonly(void **state)
{
	char db[128];

	(void)state;
	snprintf(db, sizeof db, "%s/rackpilot.db", mnt);
	server_start(&srv, mnt, NULL);
	seed(&srv);
	server_stop(&srv, SIGTERM);
	/* Immutable: not even root may write it, so SQLite opens it read-only. */
	sh("chattr +i '%s'", db);
	server_start(&srv, mnt, NULL);
	expect_degraded(&srv, "STORAGE_READONLY");
	writes_refused(&srv, "STORAGE_READONLY");
	reads_work(&srv);
	expect_degraded(&srv, "STORAGE_READONLY");
	sh("chattr -i '%s'", db);
	writes_work(&srv);
	expect_degraded(&srv, NULL);
	integrity_ok();
	server_stop(&srv, SIGTERM);
	integrity_ok();
}

static int
skip_test(const char *why)
{
	printf("test_disk: skipped: %s\n", why);
	return 77;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_teardown(test_full, teardown),
	        cmocka_unit_test_teardown(test_readonly, teardown),
	};
	const char *ci = getenv("CI");
	char why[200];
	int rc;

	if (system("command -v sqlite3 >/dev/null && command -v chattr >/dev/null") != 0) {
		if (ci && strcmp(ci, "true") == 0) {
			fprintf(stderr, "test_disk: sqlite3 and chattr (e2fsprogs) are required\n");
			return 1;
		}
		return skip_test("sqlite3 or chattr missing");
	}
	/* A private mount namespace: the tmpfs is invisible outside and vanishes with us. */
	/* In a chroot "/" is no mount point (EINVAL): then /tmp, where the tmpfs goes, must be. */
	if (unshare(CLONE_NEWNS) != 0 ||
	    (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 &&
	     mount(NULL, "/tmp", NULL, MS_REC | MS_PRIVATE, NULL) != 0)) {
		snprintf(why, sizeof why,
		         "cannot make a private mount namespace (%s): needs root / "
		         "CAP_SYS_ADMIN and / or /tmp a mount point, which this machine does not "
		         "give",
		         strerror(errno));
		return skip_test(why);
	}
	snprintf(mnt, sizeof mnt, "/tmp/rp-disk-XXXXXX");
	if (mkdtemp(mnt) == NULL)
		return 1;
	if (mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=0700") != 0) {
		snprintf(why, sizeof why, "cannot mount a tmpfs (%s)", strerror(errno));
		rmdir(mnt);
		return skip_test(why);
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	sh_rc("chattr -i '%s/rackpilot.db' 2>/dev/null", mnt);
	if (umount2(mnt, MNT_DETACH) != 0)
		fprintf(stderr, "test_disk: umount %s: %s\n", mnt, strerror(errno));
	rmdir(mnt);
	return rc;
}
