/* The SQLite driver behind sql.h: the only file of Rackpilot that includes sqlite3.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../util/util.h"
#include "sql.h"

/*
 * Group commit. Every connection runs with synchronous=NORMAL, so a COMMIT writes its WAL
 * frames without waiting for the disk; before the commit is acknowledged, the committer
 * waits until the WAL file has been flushed (fdatasync) past its frames. One flush serves
 * every commit written before it started: under many writers one disk flush acknowledges
 * many transactions, as PostgreSQL's group commit does, while an acknowledged change still
 * survives power loss. The WAL is one append-only file, so flushing it also makes durable
 * every commit that any later durable one could have read. Checkpoints under NORMAL flush
 * the WAL before copying it and the database after, as under FULL.
 * One group per database file, shared by its connections.
 */
struct group {
	char *wal; /* path of the -wal file */
	int refs;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t written; /* commits written to the WAL so far (a sequence) */
	uint64_t synced;  /* commits known to be on disk */
	int syncing;      /* a flush is under way */
	int fd;           /* the WAL file, or -1 */
	dev_t dev;
	ino_t ino;
	struct group *next;
};

static pthread_mutex_t groups_mu = PTHREAD_MUTEX_INITIALIZER;
static struct group *groups;

struct sql_db {
	sqlite3 *h;
	struct group *g;
	int64_t changes;   /* total changes at the latest begin */
	int schema;        /* the open transaction is TXN_SCHEMA */
	int secure_delete; /* begin_scrub: the setting to restore, or -1 */
};

struct lite_stmt {
	struct stmt base;
	sqlite3_stmt *h;
	struct sql_db *db;
};

#define H(s) (((struct lite_stmt *)(s))->h)

static struct group *
group_get(const char *path)
{
	struct group *g;

	pthread_mutex_lock(&groups_mu);
	for (g = groups; g; g = g->next)
		if (strncmp(g->wal, path, strlen(path)) == 0 &&
		    strcmp(g->wal + strlen(path), "-wal") == 0)
			break;
	if (g == NULL && (g = calloc(1, sizeof *g)) != NULL) {
		size_t n = strlen(path) + 5;

		if ((g->wal = malloc(n)) == NULL) {
			free(g);
			g = NULL;
			goto out;
		}
		snprintf(g->wal, n, "%s-wal", path);
		pthread_mutex_init(&g->mu, NULL);
		pthread_cond_init(&g->cv, NULL);
		g->fd = -1;
		g->next = groups;
		groups = g;
	}
	if (g)
		g->refs++;
out:
	pthread_mutex_unlock(&groups_mu);
	return g;
}

static void
group_put(struct group *g)
{
	struct group **pp;

	if (g == NULL)
		return;
	pthread_mutex_lock(&groups_mu);
	if (--g->refs > 0) {
		pthread_mutex_unlock(&groups_mu);
		return;
	}
	for (pp = &groups; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	pthread_mutex_unlock(&groups_mu);
	if (g->fd >= 0)
		close(g->fd);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g->wal);
	free(g);
}

/* Flush the WAL file; 0 or -1 (logged). SQLite deletes the WAL when its last connection
 * closes and creates a new one later: follow it by inode, and flush its directory when the
 * file is new to us, so that the file itself survives power loss too. Called by the one
 * flusher of g, without g->mu. */
static int
group_flush(struct group *g)
{
	struct stat st;

	if (stat(g->wal, &st) != 0) {
		/* No WAL file: nothing written since the last connection closed it. */
		return errno == ENOENT ? 0 : -1;
	}
	if (g->fd < 0 || st.st_ino != g->ino || st.st_dev != g->dev) {
		int fd;

		if (g->fd >= 0)
			close(g->fd);
		g->fd = -1;
		if ((fd = open(g->wal, O_RDONLY | O_CLOEXEC)) < 0) {
			rp_log_error("store: cannot open %s to flush it: %s", g->wal,
			             strerror(errno));
			return -1;
		}
		rp_fsync_dir_of(g->wal);
		g->fd = fd;
		g->ino = st.st_ino;
		g->dev = st.st_dev;
	}
	if (fdatasync(g->fd) != 0) {
		rp_log_error("store: flushing %s failed: %s", g->wal, strerror(errno));
		return -1;
	}
	return 0;
}

/* A commit has been written: return once it is on disk, flushing for it and every other
 * commit written so far unless a flush that covers it is already under way. -1 when the
 * flush failed (the commit may not survive power loss). */
static int
group_commit(struct group *g)
{
	uint64_t mine, target;
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	mine = ++g->written;
	while (g->synced < mine) {
		if (g->syncing) {
			pthread_cond_wait(&g->cv, &g->mu);
			continue;
		}
		g->syncing = 1;
		target = g->written;
		pthread_mutex_unlock(&g->mu);
		rc = group_flush(g);
		pthread_mutex_lock(&g->mu);
		g->syncing = 0;
		if (rc == 0 && target > g->synced)
			g->synced = target;
		pthread_cond_broadcast(&g->cv);
		if (rc != 0)
			break;
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static int
rc_of(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
		return SQL_OK;
	case SQLITE_ROW:
		return SQL_ROW;
	case SQLITE_DONE:
		return SQL_DONE;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return SQL_BUSY;
	case SQLITE_CONSTRAINT:
		return SQL_CONSTRAINT;
	case SQLITE_FULL:
		return SQL_FULL;
	case SQLITE_READONLY:
		return SQL_READONLY;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		return SQL_IOERR;
	case SQLITE_NOMEM:
		return SQL_NOMEM;
	default:
		return SQL_ERROR;
	}
}

static int
lite_exec(struct sql_db *db, const char *sql, char *why, size_t whylen)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db->h, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK && why)
		snprintf(why, whylen, "%s", msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return rc_of(rc);
}

/* Wait for the write lock in short steps. SQLite's own busy timeout sleeps up to 100 ms at
 * a time, which leaves writers idle long after a ~0.3 ms transaction has released the
 * lock; with many job workers that became a long tail. Gives up after 10 s. */
static int
busy_wait(void *arg, int n)
{
	struct timespec ts = {0, n < 20 ? 50000 : n < 200 ? 250000 : 1000000};

	(void)arg;
	if (n >= 20 + 180 + 9700) /* 1 ms + 45 ms + 9.7 s */
		return 0;
	nanosleep(&ts, NULL);
	return 1;
}

static void
lite_close(struct sql_db *db)
{
	if (db == NULL)
		return;
	sqlite3_close(db->h);
	group_put(db->g);
	free(db);
}

/* SQLite's memory statistics take a global mutex on every allocation, which every worker
 * thread would contend on; nothing here reads those statistics. */
static void
lite_global(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static struct sql_db *
lite_open(const char *path, char *why, size_t whylen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct sql_db *db;
	int rc;

	pthread_once(&once, lite_global);
	if ((db = calloc(1, sizeof *db)) == NULL) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	db->secure_delete = -1;
	rc = sqlite3_open_v2(path, &db->h,
	                     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	                     NULL);
	if (rc != SQLITE_OK) {
		snprintf(why, whylen, "cannot open %s: %s", path,
		         db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
		lite_close(db);
		return NULL;
	}
	if ((db->g = group_get(path)) == NULL) {
		snprintf(why, whylen, "out of memory");
		lite_close(db);
		return NULL;
	}
	sqlite3_extended_result_codes(db->h, 1);
	sqlite3_busy_handler(db->h, busy_wait, NULL);
	/* synchronous=NORMAL with group commit (above): an acknowledged change survives power
	 * loss, not only a crash, and concurrent commits share their disk flushes. The WAL is
	 * checkpointed every 1,000 pages (SQLite's default) and cut back to 64 MiB after one:
	 * a burst (an import of a site) does not leave a WAL of its size behind for good. */
	if (lite_exec(db,
	              "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;"
	              "PRAGMA cache_size=-16384; PRAGMA journal_size_limit=67108864;",
	              why, whylen) != SQL_OK) {
		lite_close(db);
		return NULL;
	}
	return db;
}

static int
lite_setup(struct sql_db *db, char *why, size_t whylen)
{
	sqlite3_stmt *s = NULL;
	char mode[16] = "";

	if (sqlite3_prepare_v2(db->h, "PRAGMA journal_mode=WAL", -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	if (strcmp(mode, "wal") != 0) {
		snprintf(why, whylen, "cannot switch to WAL mode (got '%s'): %s", mode,
		         sqlite3_errmsg(db->h));
		return -1;
	}
	return 0;
}

static const struct sql_driver *self(void);

static struct stmt *
lite_prepare(struct sql_db *db, const char *sql)
{
	struct lite_stmt *s = calloc(1, sizeof *s);

	if (s == NULL)
		return NULL;
	if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->h, NULL) !=
	    SQLITE_OK) {
		free(s);
		return NULL;
	}
	s->base.drv = self();
	s->db = db;
	return &s->base;
}

static void
lite_finalize(struct stmt *s)
{
	if (s == NULL)
		return;
	sqlite3_finalize(H(s));
	free(s);
}

static void
lite_reset(struct stmt *s)
{
	sqlite3_reset(H(s));
}

static void
lite_clear(struct stmt *s)
{
	sqlite3_clear_bindings(H(s));
}

static void
lite_bind_int(struct stmt *s, int i, int64_t v)
{
	sqlite3_bind_int64(H(s), i, v);
}

static void
lite_bind_real(struct stmt *s, int i, double v)
{
	sqlite3_bind_double(H(s), i, v);
}

static void
lite_bind_text(struct stmt *s, int i, const char *v, size_t len)
{
	sqlite3_bind_text64(H(s), i, v, len, SQLITE_TRANSIENT, SQLITE_UTF8);
}

static void
lite_bind_blob(struct stmt *s, int i, const void *v, size_t len)
{
	sqlite3_bind_blob64(H(s), i, v, len, SQLITE_TRANSIENT);
}

static void
lite_bind_null(struct stmt *s, int i)
{
	sqlite3_bind_null(H(s), i);
}

static int
lite_step(struct stmt *s)
{
	int rc = sqlite3_step(H(s));

	/* The two answers of nearly every step, without the general mapping. */
	if (rc == SQLITE_ROW)
		return SQL_ROW;
	if (rc == SQLITE_DONE) {
		sqlite3 *h;

		/* A write outside a transaction committed by itself: durable before it returns,
		 * like one inside. */
		if (__builtin_expect(!sqlite3_stmt_readonly(H(s)), 0) &&
		    sqlite3_get_autocommit(h = sqlite3_db_handle(H(s))) &&
		    sqlite3_changes64(h) > 0) {
			struct lite_stmt *ls = (struct lite_stmt *)s;

			if (group_commit(ls->db->g) != 0)
				return SQL_IOERR;
		}
		return SQL_DONE;
	}
	return rc_of(rc);
}

static int
lite_column_count(struct stmt *s)
{
	return sqlite3_column_count(H(s));
}

static const char *
lite_column_name(struct stmt *s, int i)
{
	return sqlite3_column_name(H(s), i);
}

static enum sql_type
lite_column_type(struct stmt *s, int i)
{
	switch (sqlite3_column_type(H(s), i)) {
	case SQLITE_NULL:
		return SQL_NULL;
	case SQLITE_INTEGER:
		return SQL_INT;
	case SQLITE_FLOAT:
		return SQL_REAL;
	case SQLITE_BLOB:
		return SQL_BLOB;
	default:
		return SQL_TEXT;
	}
}

static int64_t
lite_column_int(struct stmt *s, int i)
{
	return sqlite3_column_int64(H(s), i);
}

static double
lite_column_real(struct stmt *s, int i)
{
	return sqlite3_column_double(H(s), i);
}

static const char *
lite_column_text(struct stmt *s, int i)
{
	return (const char *)sqlite3_column_text(H(s), i);
}

static const void *
lite_column_blob(struct stmt *s, int i)
{
	return sqlite3_column_blob(H(s), i);
}

static size_t
lite_column_bytes(struct stmt *s, int i)
{
	return (size_t)sqlite3_column_bytes(H(s), i);
}

static int
lite_begin(struct sql_db *db, enum sql_txn kind)
{
	static const char *const sql[] = {[TXN_READ] = "BEGIN",
	                                  [TXN_WRITE] = "BEGIN IMMEDIATE",
	                                  [TXN_SCHEMA] = "BEGIN EXCLUSIVE",
	                                  [TXN_CLAIM] = "BEGIN IMMEDIATE"};

	db->changes = sqlite3_total_changes64(db->h);
	db->schema = kind == TXN_SCHEMA;
	return rc_of(sqlite3_exec(db->h, sql[kind], NULL, NULL, NULL));
}

/* A commit that wrote is acknowledged once it is on disk (group commit, above); one that
 * only read or changed nothing wrote no WAL frames and returns at once. */
static int
lite_commit(struct sql_db *db)
{
	int rc = sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL);

	if (rc == SQLITE_OK && (db->schema || sqlite3_total_changes64(db->h) != db->changes) &&
	    group_commit(db->g) != 0)
		return SQL_IOERR;
	db->schema = 0;
	return rc_of(rc);
}

static void
lite_rollback(struct sql_db *db)
{
	if (!sqlite3_get_autocommit(db->h))
		sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

static int
lite_in_txn(struct sql_db *db)
{
	return !sqlite3_get_autocommit(db->h);
}

static int64_t
lite_changes(struct sql_db *db)
{
	return sqlite3_changes64(db->h);
}

static int64_t
lite_total_changes(struct sql_db *db)
{
	return sqlite3_total_changes64(db->h);
}

static int64_t
lite_last_id(struct sql_db *db)
{
	return sqlite3_last_insert_rowid(db->h);
}

static const char *
lite_errmsg(struct sql_db *db)
{
	return sqlite3_errmsg(db->h);
}

static int
lite_sys_errno(struct sql_db *db)
{
	return sqlite3_system_errno(db->h);
}

static int
lite_readonly(struct sql_db *db)
{
	return sqlite3_db_readonly(db->h, "main") == 1;
}

static int
lite_idle(struct sql_db *db)
{
	sqlite3_stmt *s = NULL;

	if (!sqlite3_get_autocommit(db->h))
		return 0;
	while ((s = sqlite3_next_stmt(db->h, s)) != NULL)
		if (sqlite3_stmt_busy(s))
			return 0;
	return 1;
}

static int
pragma_int(struct sql_db *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int v = -1;

	if (sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* SQLite's online backup: every page in one step, under one read transaction of db (a
 * snapshot; writers go on beside it in WAL mode), into a new file. */
static int
lite_backup(struct sql_db *db, const char *dest, char *why, size_t whylen)
{
	sqlite3 *to = NULL;
	sqlite3_backup *b;
	int rc;

	rc = sqlite3_open_v2(
	        dest, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK && (b = sqlite3_backup_init(to, "main", db->h, "main")) != NULL) {
		while ((rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED)
			sqlite3_sleep(10);
		sqlite3_backup_finish(b);
		rc = rc == SQLITE_DONE ? sqlite3_errcode(to) : rc;
	} else if (rc == SQLITE_OK) {
		rc = sqlite3_errcode(to);
	}
	if (rc != SQLITE_OK)
		snprintf(why, whylen, "copying into %s: %s", dest,
		         to ? sqlite3_errmsg(to) : sqlite3_errstr(rc));
	sqlite3_close(to);
	return rc_of(rc);
}

static int64_t
lite_size(struct sql_db *db)
{
	int pages = pragma_int(db, "PRAGMA page_count"), size = pragma_int(db, "PRAGMA page_size");

	return pages < 0 || size < 0 ? -1 : (int64_t)pages * size;
}

static int
lite_schema_version(struct sql_db *db)
{
	return pragma_int(db, "PRAGMA user_version");
}

static int
lite_set_schema_version(struct sql_db *db, int v, char *why, size_t whylen)
{
	char sql[64];

	snprintf(sql, sizeof sql, "PRAGMA user_version=%d", v);
	return lite_exec(db, sql, why, whylen);
}

/* Old cell contents are zeroed as they are rewritten (Debian builds SQLite with
 * secure_delete on by default; this makes sure). */
static void
lite_begin_scrub(struct sql_db *db)
{
	db->secure_delete = pragma_int(db, "PRAGMA secure_delete");
	sqlite3_exec(db->h, "PRAGMA secure_delete = ON", NULL, NULL, NULL);
}

/* The WAL is checkpointed and truncated after, so no copy of what was replaced stays in
 * the database files; a vacuum rewrites the file, free pages included. */
static void
lite_end_scrub(struct sql_db *db, int committed, int with_vacuum)
{
	int log = 0, done = 0;

	if (committed && with_vacuum &&
	    sqlite3_exec(db->h, "VACUUM", NULL, NULL, NULL) != SQLITE_OK)
		rp_log_warn("secrets: VACUUM after sealing failed: %s", sqlite3_errmsg(db->h));
	/* A checkpoint other readers hold up leaves the old pages in the WAL: say so. */
	if (committed && (sqlite3_wal_checkpoint_v2(db->h, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log,
	                                            &done) != SQLITE_OK ||
	                  log != done))
		rp_log_warn(
		        "secrets: the WAL could not be checkpointed at once (%d of %d frames); the "
		        "replaced values leave it at the next checkpoint",
		        done, log);
	if (db->secure_delete >= 0) {
		char pragma[40];

		snprintf(pragma, sizeof pragma, "PRAGMA secure_delete = %d", db->secure_delete);
		sqlite3_exec(db->h, pragma, NULL, NULL, NULL);
		db->secure_delete = -1;
	}
}

static void
lite_describe(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s", path);
}

const struct sql_driver rp_sql_sqlite = {
        .name = "sqlite",
        .file = 1,
        .describe = lite_describe,
        .open = lite_open,
        .setup = lite_setup,
        .close = lite_close,
        .exec = lite_exec,
        .prepare = lite_prepare,
        .finalize = lite_finalize,
        .reset = lite_reset,
        .clear = lite_clear,
        .bind_int = lite_bind_int,
        .bind_real = lite_bind_real,
        .bind_text = lite_bind_text,
        .bind_blob = lite_bind_blob,
        .bind_null = lite_bind_null,
        .step = lite_step,
        .column_count = lite_column_count,
        .column_name = lite_column_name,
        .column_type = lite_column_type,
        .column_int = lite_column_int,
        .column_real = lite_column_real,
        .column_text = lite_column_text,
        .column_blob = lite_column_blob,
        .column_bytes = lite_column_bytes,
        .begin = lite_begin,
        .commit = lite_commit,
        .rollback = lite_rollback,
        .in_txn = lite_in_txn,
        .changes = lite_changes,
        .total_changes = lite_total_changes,
        .last_id = lite_last_id,
        .errmsg = lite_errmsg,
        .sys_errno = lite_sys_errno,
        .sql_tables = "SELECT m.name, f.\"table\" FROM sqlite_master m LEFT JOIN "
                      "pragma_foreign_key_list(m.name) f WHERE m.type = 'table' AND m.name NOT "
                      "LIKE 'sqlite%' ORDER BY m.rowid",
        .backup = lite_backup,
        .size = lite_size,
        .readonly = lite_readonly,
        .idle = lite_idle,
        .schema_version = lite_schema_version,
        .set_schema_version = lite_set_schema_version,
        .begin_scrub = lite_begin_scrub,
        .end_scrub = lite_end_scrub,
};

static const struct sql_driver *
self(void)
{
	return &rp_sql_sqlite;
}
