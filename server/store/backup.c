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
	*out = json_pack("{s:O, s:I}", "tables", list, "rows", (json_int_t)total);
	e = *out ? RP_ERR_OK : RP_ERR_INTERNAL;
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

/* Make what was written to path durable, and its name in dir. -1 (why) when it cannot. */
static int
sync_file(const char *path, char *why, size_t whylen)
{
	char dir[1100];
	const char *slash = strrchr(path, '/');
	int fd = open(path, O_RDONLY), rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;

	if (fd >= 0)
		close(fd);
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	if (rc == 0 && (fd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0) {
		rc = fsync(fd);
		close(fd);
	}
	if (rc < 0)
		snprintf(why, whylen, "cannot flush %s to disk: %s", path, strerror(errno));
	return rc;
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
	snprintf(tmp, sizeof tmp, "%s.partial", dest);
	unlink(tmp); /* what an interrupted backup left */
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
	/* Published whole or not at all: link fails where dest appeared meanwhile. */
	if (link(tmp, dest) != 0) {
		snprintf(why, whylen, "cannot create %s: %s", dest, strerror(errno));
		e = errno == EEXIST ? RP_ERR_CONFLICT : RP_ERR_INTERNAL;
		goto out;
	}
	unlink(tmp);
	if (sync_file(dest, why, whylen) < 0)
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
	if (e != RP_ERR_OK)
		unlink(tmp);
	wipe_key(m);
	json_decref(m);
	json_decref(t);
	return e;
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
		if (write(out, buf, (size_t)n) != n) {
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
rp_store_restore(const char *file, const char *db_path, json_t **manifest, char *why, size_t whylen)
{
	struct conn c = {0};
	char tmp[1100], *text = NULL, *ok = NULL, msg[256] = "";
	json_t *m = NULL, *now = NULL, *want, *have;
	enum rp_err e = RP_ERR_CONFLICT;
	json_error_t jerr;
	size_t i;
	int v;

	if (access(file, R_OK) != 0) {
		snprintf(why, whylen, "cannot read %s: %s", file, strerror(errno));
		return RP_ERR_NOT_FOUND;
	}
	if (access(db_path, F_OK) == 0) {
		snprintf(why, whylen,
		         "%s exists: restore into a new data directory (a restore never replaces a "
		         "database)",
		         db_path);
		return RP_ERR_CONFLICT;
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
	/* Code that would run inside the restored database later (a trigger, a view) is not
	 * data: only the triggers schema 0004 made (dropped by 0012) may be there. */
	free(ok);
	ok = NULL;
	if (run1(&c,
	         "SELECT count(*) FROM sqlite_master WHERE type IN ('trigger', 'view') AND name "
	         "NOT IN ('macs_ins', 'macs_del', 'macs_name')",
	         NULL, &ok, why, whylen) != SQL_OK ||
	    ok == NULL || strcmp(ok, "0") != 0) {
		snprintf(why, whylen,
		         "%s holds a trigger or a view that rackpilot never makes: not restored",
		         file);
		goto out;
	}
	if (run1(&c, "SELECT manifest FROM rp_backup", NULL, &text, why, whylen) != SQL_OK ||
	    text == NULL || (m = json_loads(text, 0, &jerr)) == NULL ||
	    !json_is_string(json_object_get(m, "format")) ||
	    strcmp(json_string_value(json_object_get(m, "format")), FORMAT) != 0) {
		snprintf(why, whylen, "%s is not a rackpilot backup (no manifest)", file);
		goto out;
	}
	v = (int)json_integer_value(json_object_get(m, "schema_version"));
	if (v > rp_store_schema_latest() || v != c.drv->schema_version(c.db)) {
		snprintf(
		        why, whylen,
		        "%s holds schema version %d (its database: %d), newer than this rackpilotd "
		        "knows (%d) or inconsistent: restore it with a newer rackpilotd",
		        file, v, c.drv->schema_version(c.db), rp_store_schema_latest());
		goto out;
	}
	if ((e = sums(&c, &now, why, whylen)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_CONFLICT;
	want = json_object_get(m, "tables");
	have = json_object_get(now, "tables");
	if (json_array_size(want) != json_array_size(have)) {
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

			snprintf(why, whylen, "%s is damaged: its manifest says %s, it holds %s",
			         file, w ? w : "?", h ? h : "?");
			free(w);
			free(h);
			goto out;
		}
	e = RP_ERR_INTERNAL;
	/* The heartbeats of the servers of the database backed up are not this one's: left,
	 * a server of the same name on this host would take itself for one of them, still
	 * alive while the source server runs. (Schema 0015 made the table.) */
	if (run1(&c, "DROP TABLE rp_backup", NULL, NULL, why, whylen) != SQL_OK ||
	    (v >= 15 && run1(&c, "DELETE FROM servers", NULL, NULL, why, whylen) != SQL_OK))
		goto out;
	c.drv->close(c.db);
	c.db = NULL;
	if (sync_file(tmp, why, whylen) < 0)
		goto out;
	if (link(tmp, db_path) != 0) {
		snprintf(why, whylen, "cannot create %s: %s", db_path, strerror(errno));
		e = errno == EEXIST ? RP_ERR_CONFLICT : RP_ERR_INTERNAL;
		goto out;
	}
	unlink(tmp);
	if (sync_file(db_path, why, whylen) < 0)
		goto out;
	*manifest = m;
	m = NULL;
	e = RP_ERR_OK;
out:
	c.drv = &rp_sql_sqlite;
	c.drv->close(c.db);
	if (e != RP_ERR_OK)
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
