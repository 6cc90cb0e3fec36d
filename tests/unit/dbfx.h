/* The database a store unit test opens: a SQLite file in the test's directory, or, in the
 * suite's PostgreSQL run (RP_TEST_PG, tests/pg/cluster.sh), a new database of the cluster;
 * and SQL run on it with the database's own client, for what a test sets up behind the
 * store's back. */
#ifndef RP_TEST_DBFX_H
#define RP_TEST_DBFX_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* RP_TEST_PG's cluster directory, or NULL in the SQLite run. */
static inline const char *
dbfx_pg(void)
{
	const char *pg = getenv("RP_TEST_PG");

	return pg && *pg ? pg : NULL;
}

/* Where the test's database is, for rp_store_open: dir/t.db, or a new PostgreSQL database. */
static inline void
dbfx_target(const char *dir, char *path, size_t len)
{
	char cmd[600], name[40];
	unsigned char r[8];
	int fd;

	if (!dbfx_pg()) {
		snprintf(path, len, "%s/t.db", dir);
		return;
	}
	fd = open("/dev/urandom", O_RDONLY);
	if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r)
		abort();
	close(fd);
	snprintf(name, sizeof name, "rp_unit_%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
	         r[3], r[4], r[5], r[6], r[7]);
	snprintf(cmd, sizeof cmd,
	         "psql -qX 'host=%s user=rp dbname=postgres' -c 'CREATE DATABASE %s' >/dev/null",
	         dbfx_pg(), name);
	if (system(cmd) != 0)
		abort();
	snprintf(path, len, "postgresql:///%s?host=%s&user=rp", name, dbfx_pg());
}

/* Drop what dbfx_target made (a SQLite file goes with its directory). */
static inline void
dbfx_drop(const char *path)
{
	char cmd[600];

	if (!dbfx_pg())
		return;
	snprintf(cmd, sizeof cmd,
	         "psql -qX 'host=%s user=rp dbname=postgres' -c 'DROP DATABASE IF EXISTS %.*s "
	         "WITH (FORCE)' >/dev/null",
	         dbfx_pg(), (int)strcspn(path + 14, "?"), path + 14);
	if (system(cmd) != 0)
		fprintf(stderr, "dbfx: dropping %s failed\n", path);
}

/* Run sql (no double quotes in it) on the database at path; the first line it printed (the
 * first column of the first row) into out when out is not NULL. system()'s status. */
static inline int
dbfx_sql(const char *path, const char *sql, char *out, size_t len)
{
	char cmd[2400];
	FILE *p;
	int st;

	if (dbfx_pg())
		snprintf(cmd, sizeof cmd, "psql -qXtA -v ON_ERROR_STOP=1 '%s' -c \"%s\"", path,
		         sql);
	else
		snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"%s\"", path, sql);
	if ((p = popen(cmd, "r")) == NULL)
		return -1;
	if (out) {
		out[0] = '\0';
		if (fgets(out, (int)len, p) == NULL)
			out[0] = '\0';
		out[strcspn(out, "\n")] = '\0';
	}
	while (fgetc(p) != EOF)
		;
	st = pclose(p);
	return st;
}

#endif
