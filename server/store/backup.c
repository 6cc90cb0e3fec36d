/* rackpilotd backup / restore: a SQLite database copied while its server serves (the driver's
 * online backup: one consistent snapshot), into one self-contained SQLite file that carries its
 * own manifest (table rp_backup: the format, the schema version, each table's rows and
 * checksum); and a restore that checks that file whole before it becomes a data directory's
 * database. PostgreSQL has pg_dump for this (docs/deployment.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/util.h"
#include "internal.h"

#define FORMAT "rackpilot-backup-1"

/* A raw connection of the SQLite driver, as the statement helpers take one (no pool: the
 * files here belong to no store). */
static struct sql_db *
raw_open(const char *path, struct conn *c, char *why, size_t whylen)
{
	memset(c, 0, sizeof *c);
	c->drv = &rp_sql_sqlite;
	c->db = c->drv->open(path, why, whylen);
	return c->db;
}

/* Wipe the key file's text a manifest may carry (--with-key), before it is freed. */
static void
wipe_key(json_t *m)
{
	const char *k = json_string_value(json_object_get(m, "secret_key_file"));

	if (k)
		explicit_bzero((char *)k, strlen(k));
}

/* Every table of c but the manifest's: {tables: [{table, rows, checksum}], rows}. */
static enum rp_err
sums(struct conn *c, json_t **out, char *why, size_t whylen)
{
	struct table *t = NULL;
	json_t *list = json_array();
	int64_t total = 0, rows;
	uint64_t sum;
	enum rp_err e;
	char hex[17];
	int n = 0, i;

	if ((e = store_tables(c, &t, &n, why, whylen)) != RP_ERR_OK)
		goto out;
	for (i = 0; i < n; i++) {
		if (!strcmp(t[i].name, "rp_backup"))
			continue;
		if ((e = store_sum_table(c, t[i].name, &rows, &sum, why, whylen)) != RP_ERR_OK)
			goto out;
		snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
		json_array_append_new(list, json_pack("{s:s, s:I, s:s}", "table", t[i].name, "rows",
		                                      (json_int_t)rows, "checksum", hex));
		total += rows;
	}
	{
		json_t *o = json_pack("{s:O, s:I}", "tables", list, "rows", (json_int_t)total);

		e = o ? RP_ERR_OK : RP_ERR_INTERNAL;
		if (o)
			*out = o;
	}
out:
	json_decref(list);
	free(t);
	return e;
}

/* One statement with one text parameter (or none), run to its end; its first column's text
 * of the first row into *text (a new string) when text is not NULL. SQL_OK or the error. */
static int
run1(struct conn *c, const char *sql, const char *arg, char **text, char *why, size_t whylen)
{
	struct stmt *s = c->drv->prepare(c->db, sql);
	int rc;

	if (s == NULL) {
		snprintf(why, whylen, "%s", c->drv->errmsg(c->db));
		return SQL_ERROR;
	}
	if (arg)
		sql_bind_text(s, 1, arg);
	rc = sql_step(s);
	if (text && rc == SQL_ROW && sql_text(s, 0) && (*text = strdup(sql_text(s, 0))) == NULL)
		rc = SQL_NOMEM;
	while (rc == SQL_ROW)
		rc = sql_step(s);
	if (rc != SQL_DONE)
		snprintf(why, whylen, "%s", c->drv->errmsg(c->db));
	c->drv->finalize(s);
	return rc == SQL_DONE ? SQL_OK : rc;
}

/* Make what was written to path durable, and its name in its directory. -1 (why) when it
 * cannot. */
static int
sync_file(const char *path, char *why, size_t whylen)
{
	int fd = open(path, O_RDONLY), rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;

	if (fd >= 0)
		close(fd);
	if (rc == 0)
		rc = rp_fsync_dir_of(path);
	if (rc < 0)
		snprintf(why, whylen, "cannot flush %s to disk: %s", path, strerror(errno));
	return rc;
}

/* The synced file tmp published as path, which must not exist: link(2), or where the
 * filesystem has no hard links (vfat, SMB) a rename that refuses to replace. Then flushed.
 * RP_ERR_OK, RP_ERR_CONFLICT (path appeared meanwhile) or RP_ERR_INTERNAL, with why. */
static enum rp_err
publish(const char *tmp, const char *path, char *why, size_t whylen)
{
	int err = 0;

	if (link(tmp, path) == 0)
		unlink(tmp);
	else if ((err = errno) == EPERM || err == ENOTSUP || err == ENOSYS)
		err = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0 ? 0 : errno;
	if (err) {
		snprintf(why, whylen, "cannot create %s: %s", path, strerror(err));
		return err == EEXIST ? RP_ERR_CONFLICT : RP_ERR_INTERNAL;
	}
	return sync_file(path, why, whylen) < 0 ? RP_ERR_INTERNAL : RP_ERR_OK;
}

enum rp_err
rp_store_backup(const char *db_path, const char *dest, json_t *extra, json_t **manifest, char *why,
                size_t whylen)
{
	struct conn src = {0}, to = {0};
	char tmp[1100], ts[RP_TIME_BUF], *text = NULL;
	json_t *m = NULL, *t = NULL;
	enum rp_err e = RP_ERR_INTERNAL;
	int v;

	if (access(db_path, R_OK) != 0) {
		snprintf(why, whylen, "no database at %s: %s", db_path, strerror(errno));
		return RP_ERR_NOT_FOUND;
	}
	if (access(dest, F_OK) == 0) {
		snprintf(why, whylen, "%s exists: name a new file (a backup never replaces one)",
		         dest);
		return RP_ERR_CONFLICT;
	}
	/* This process's own: another backup to the same name works on its own copy. */
	snprintf(tmp, sizeof tmp, "%s.partial.%d", dest, (int)getpid());
	unlink(tmp); /* what an interrupted backup of this pid left */
	if (raw_open(db_path, &src, why, whylen) == NULL)
		goto out;
	if ((v = src.drv->schema_version(src.db)) > rp_store_schema_latest() || v < 1) {
		snprintf(why, whylen,
		         "%s is at schema version %d, which this rackpilotd (%d) does not know: "
		         "back "
		         "it up with the rackpilotd that serves it",
		         db_path, v, rp_store_schema_latest());
		e = RP_ERR_CONFLICT;
		goto out;
	}
	if (src.drv->backup(src.db, tmp, why, whylen) != SQL_OK)
		goto out;
	/* One file, no WAL beside it: what the copy holds is what the manifest counts. */
	if (raw_open(tmp, &to, why, whylen) == NULL ||
	    to.drv->exec(to.db, "PRAGMA journal_mode=DELETE", why, whylen) != SQL_OK)
		goto out;
	if ((e = sums(&to, &t, why, whylen)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	m = json_pack("{s:s, s:i, s:s, s:O, s:O}", "format", FORMAT, "schema_version", v,
	              "created_at", rp_time_format(rp_time_now_ms(), ts), "tables",
	              json_object_get(t, "tables"), "rows", json_object_get(t, "rows"));
	if (m == NULL || (extra && json_object_update(m, extra) != 0) ||
	    (text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		goto out;
	if (run1(&to, "CREATE TABLE rp_backup (manifest TEXT NOT NULL)", NULL, NULL, why, whylen) !=
	            SQL_OK ||
	    run1(&to, "INSERT INTO rp_backup (manifest) VALUES (?1)", text, NULL, why, whylen) !=
	            SQL_OK)
		goto out;
	to.drv->close(to.db);
	to.db = NULL;
	if (chmod(tmp, 0600) != 0 || sync_file(tmp, why, whylen) < 0)
		goto out;
	if ((e = publish(tmp, dest, why, whylen)) != RP_ERR_OK)
		goto out;
	/* What the caller may print: no key. */
	wipe_key(m);
	json_object_del(m, "secret_key_file");
	*manifest = m;
	m = NULL;
	e = RP_ERR_OK;
out:
	if (text) {
		explicit_bzero(text, strlen(text));
		free(text);
	}
	src.drv = &rp_sql_sqlite;
	src.drv->close(src.db);
	src.drv->close(to.db);
	unlink(tmp);
	wipe_key(m);
	json_decref(m);
	json_decref(t);
	return e;
}

/* The schema of c, rp_backup and SQLite's own objects left out, as one text: each object's
 * type, name, table and SQL. NULL (why) when it cannot be read. */
static char *
schema_text(struct conn *c, char *why, size_t whylen)
{
	struct stmt *s = c->drv->prepare(
	        c->db, "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master WHERE "
	               "name <> 'rp_backup' AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY "
	               "type, name");
	struct rp_buf b;
	int rc, i;

	if (s == NULL) {
		snprintf(why, whylen, "%s", c->drv->errmsg(c->db));
		return NULL;
	}
	rp_buf_init(&b, 0);
	while ((rc = sql_step(s)) == SQL_ROW)
		for (i = 0; i < 4; i++) {
			rp_buf_append(&b, sql_text(s, i), sql_bytes(s, i));
			rp_buf_append(&b, i < 3 ? "\x1f" : "\x1e", 1);
		}
	c->drv->finalize(s);
	if (rc != SQL_DONE || b.oom) {
		snprintf(why, whylen, "cannot read the schema");
		rp_buf_free(&b);
		return NULL;
	}
	rp_buf_append(&b, "", 1);
	return b.data;
}

/* Does c hold exactly the schema rackpilot's migrations up to version v make (the triggers
 * and views they make, no other; its tables, columns, indexes, constraints)? 1, 0 with why,
 * or -1 with why when it cannot tell. */
static int
schema_is(struct conn *c, int v, char *why, size_t whylen)
{
	struct conn ref = {0};
	char *want = NULL, *have = NULL;
	int got, rc = -1;

	if (raw_open(":memory:", &ref, why, whylen) == NULL ||
	    store_migrate(ref.drv, ref.db, v, &got, why, whylen) != RP_ERR_OK || got != v ||
	    (want = schema_text(&ref, why, whylen)) == NULL ||
	    (have = schema_text(c, why, whylen)) == NULL)
		goto out;
	rc = strcmp(want, have) == 0;
	if (!rc) {
		size_t k = 0;

		while (want[k] && want[k] == have[k])
			k++;
		while (k > 0 && have[k - 1] != '\x1e')
			k--;
		snprintf(why, whylen, "%.*s", (int)strcspn(have + k, "\x1e"), have + k);
		for (k = 0; why[k]; k++)
			if (why[k] == '\x1f')
				why[k] = ' ';
	}
out:
	free(want);
	free(have);
	rp_sql_sqlite.close(ref.db);
	return rc;
}

/* Copy file's bytes into a new file path (mode 0600): 0, or -1 with why. */
static int
copy_file(const char *file, const char *path, char *why, size_t whylen)
{
	int in = open(file, O_RDONLY), out = -1, rc = -1;
	char buf[65536];
	ssize_t n = 0;

	if (in < 0) {
		snprintf(why, whylen, "cannot read %s: %s", file, strerror(errno));
		return -1;
	}
	if ((out = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0) {
		snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (rp_write_all(out, buf, (size_t)n) != 0) {
			n = -1;
			break;
		}
	if (n < 0) {
		snprintf(why, whylen, "copying %s: %s", file, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(in);
	if (out >= 0)
		close(out);
	return rc;
}

enum rp_err
rp_store_restore(const char *file, const char *db_path,
                 int (*ready)(json_t *manifest, void *arg, char *why, size_t whylen), void *arg,
                 json_t **manifest, char *why, size_t whylen)
{
	static const char *const beside[] = {"", "-wal", "-shm", "-journal"};
	struct conn c = {0};
	char tmp[1100], path[1100], *text = NULL, *ok = NULL, msg[256] = "";
	json_t *m = NULL, *now = NULL, *want, *have, *jv;
	enum rp_err e = RP_ERR_CONFLICT;
	json_error_t jerr;
	struct stat sb;
	size_t i;
	int v, is;

	if (stat(file, &sb) != 0 || access(file, R_OK) != 0) {
		snprintf(why, whylen, "cannot read %s: %s", file, strerror(errno));
		return RP_ERR_NOT_FOUND;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(why, whylen, "%s is not a regular file", file);
		return RP_ERR_CONFLICT;
	}
	/* Not over a database, nor beside what one left (its WAL would be read into the new
	 * one). */
	for (i = 0; i < sizeof beside / sizeof *beside; i++) {
		snprintf(path, sizeof path, "%s%s", db_path, beside[i]);
		if (access(path, F_OK) == 0) {
			snprintf(why, whylen,
			         "%s exists: restore into a new data directory (a restore never "
			         "replaces a database)",
			         path);
			return RP_ERR_CONFLICT;
		}
	}
	/* Checked and changed in a copy: the backup file stays as it was. */
	snprintf(tmp, sizeof tmp, "%s.restoring", db_path);
	unlink(tmp);
	if (copy_file(file, tmp, why, whylen) < 0) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	/* A file from elsewhere: nothing in its schema runs functions while it is read. */
	if (raw_open(tmp, &c, msg, sizeof msg) == NULL ||
	    run1(&c, "PRAGMA trusted_schema=OFF", NULL, NULL, msg, sizeof msg) != SQL_OK ||
	    run1(&c, "PRAGMA integrity_check", NULL, &ok, msg, sizeof msg) != SQL_OK ||
	    ok == NULL || strcmp(ok, "ok") != 0) {
		snprintf(why, whylen, "%s is damaged or not a rackpilot backup (%s)", file,
		         ok ? ok : msg);
		goto out;
	}
	if (run1(&c, "SELECT manifest FROM rp_backup", NULL, &text, msg, sizeof msg) != SQL_OK ||
	    text == NULL || (m = json_loads(text, 0, &jerr)) == NULL ||
	    !json_is_string(json_object_get(m, "format")) ||
	    strcmp(json_string_value(json_object_get(m, "format")), FORMAT) != 0) {
		snprintf(why, whylen, "%s is not a rackpilot backup (no manifest)", file);
		goto out;
	}
	jv = json_object_get(m, "schema_version");
	v = json_is_integer(jv) && json_integer_value(jv) >= 1 && json_integer_value(jv) <= 1000000
	            ? (int)json_integer_value(jv)
	            : -1;
	if (v > rp_store_schema_latest()) {
		snprintf(why, whylen,
		         "%s holds schema version %d, newer than this rackpilotd knows (%d): "
		         "restore "
		         "it with a newer rackpilotd",
		         file, v, rp_store_schema_latest());
		goto out;
	}
	if (v < 1 || v != c.drv->schema_version(c.db)) {
		snprintf(why, whylen,
		         "%s is damaged: its manifest names schema version %s, its database is at "
		         "%d",
		         file, json_is_integer(jv) ? "another" : "no", c.drv->schema_version(c.db));
		goto out;
	}
	/* Exactly rackpilot's schema at that version: no table, column, index or trigger of
	 * its own (a trigger would run inside the server later). */
	if ((is = schema_is(&c, v, msg, sizeof msg)) != 1) {
		snprintf(why, whylen,
		         is < 0 ? "%s: cannot compare its schema (%s)"
		                : "%s holds a schema rackpilot never makes (first difference: %s)",
		         file, msg);
		e = is < 0 ? RP_ERR_INTERNAL : RP_ERR_CONFLICT;
		goto out;
	}
	if ((e = sums(&c, &now, why, whylen)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_CONFLICT;
	want = json_object_get(m, "tables");
	have = json_object_get(now, "tables");
	if (!json_is_array(want) || json_array_size(want) != json_array_size(have)) {
		snprintf(why, whylen, "%s is damaged: %zu tables, its manifest lists %zu", file,
		         json_array_size(have), json_array_size(want));
		goto out;
	}
	for (i = 0; i < json_array_size(want); i++)
		if (!json_equal(json_array_get(want, i), json_array_get(have, i))) {
			char *w = json_dumps(json_array_get(want, i),
			                     JSON_COMPACT | JSON_SORT_KEYS),
			     *h = json_dumps(json_array_get(have, i),
			                     JSON_COMPACT | JSON_SORT_KEYS);

			snprintf(why, whylen,
			         "%s is damaged: its manifest says %.200s, it holds %.200s", file,
			         w ? w : "?", h ? h : "?");
			free(w);
			free(h);
			goto out;
		}
	/* The caller's part (the key file) before the database appears: a restore cut short
	 * leaves no database without what it needs. */
	if (ready && ready(m, arg, why, whylen) < 0)
		goto out;
	e = RP_ERR_INTERNAL;
	/* The manifest goes (with the key it may carry: secure_delete zeroes its pages, VACUUM
	 * rewrites the file), and so do the heartbeats of the servers of the database backed
	 * up: left, a server of the same name on this host would take itself for one of them,
	 * still alive while the source server runs (schema 0015 made the table). */
	if (run1(&c, "PRAGMA secure_delete=ON", NULL, NULL, why, whylen) != SQL_OK ||
	    run1(&c, "DROP TABLE rp_backup", NULL, NULL, why, whylen) != SQL_OK ||
	    (v >= 15 && run1(&c, "DELETE FROM servers", NULL, NULL, why, whylen) != SQL_OK) ||
	    run1(&c, "VACUUM", NULL, NULL, why, whylen) != SQL_OK)
		goto out;
	c.drv->close(c.db);
	c.db = NULL;
	if (sync_file(tmp, why, whylen) < 0)
		goto out;
	if ((e = publish(tmp, db_path, why, whylen)) != RP_ERR_OK)
		goto out;
	*manifest = m;
	m = NULL;
	e = RP_ERR_OK;
out:
	c.drv = &rp_sql_sqlite;
	c.drv->close(c.db);
	unlink(tmp);
	if (text) {
		explicit_bzero(text, strlen(text));
		free(text);
	}
	free(ok);
	wipe_key(m);
	json_decref(m);
	json_decref(now);
	return e;
}
