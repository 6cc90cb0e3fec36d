/* Connections, migrations, the statement cache and the row/JSON helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../util/util.h"
#include "internal.h"

/* The highest statement slot handed out so far (slot 0 means "not assigned yet"). */
static int next_slot;

/* Finalize every cached statement of c (before its db closes or is replaced). */
static void
conn_forget(struct conn *c)
{
	int i;

	for (i = 0; i < c->nslots; i++) {
		c->drv->finalize(c->stmt[i]);
		free(c->meta[i]);
		c->stmt[i] = NULL;
		c->meta[i] = NULL;
	}
}

/* Close c's database and its statements; the struct stays, empty (as calloc made it, but
 * for drv and st), so that it may be opened again (conn_get) or freed. */
static void
conn_shut(struct conn *c)
{
	conn_forget(c);
	free(c->stmt);
	free(c->meta);
	c->stmt = NULL;
	c->meta = NULL;
	c->nslots = 0;
	c->drv->close(c->db);
	c->db = NULL;
}

static void
conn_close(struct conn *c)
{
	conn_shut(c);
	free(c);
}

/* Thread exit (or rp_store_free, for the thread that frees): a hold still open would be a
 * scope that never ended, which C does not allow; its connection goes back all the same. */
static void
hold_release(void *p)
{
	struct hold *h = p;

	if (h->depth > 0) {
		h->depth = 1;
		store_unhold(&h);
	}
	free(h);
}

/* SQLite opens a file it may not write read-only, and that connection stays read-only
 * after the file becomes writable (chmod, chattr -i, a remount): reopen it once the file
 * is writable again, so writes resume without a restart. Only between calls: nothing of
 * this connection may be in use (no transaction, no statement running). */
static void
conn_reopen(struct conn *c)
{
	struct sql_db *db;
	char why[256];

	if (!c->drv->file || access(c->st->path, W_OK) != 0 || !c->drv->idle(c->db))
		return;
	db = c->drv->open(c->st->path, why, sizeof why);
	if (db == NULL || c->drv->readonly(db)) {
		c->drv->close(db);
		return;
	}
	conn_forget(c);
	c->drv->close(c->db);
	c->db = db;
	c->readonly = 0;
	rp_log_info("store: %s is writable again; connection reopened", c->st->name);
}

/* A connection for a thread that holds none: the one it had last when it is free (its
 * statements are prepared there already), else any free one, else a new one while fewer
 * than st->max are open, else the first one given back (waiting up to POOL_WAIT_MS). NULL
 * (logged) when none can be had. */
#define POOL_WAIT_MS 10000
/* A new connection in a zeroed struct c, or -1 (logged). */
static int
conn_open(struct rp_store *st, struct conn *c)
{
	char why[256];

	if ((c->db = st->drv->open(st->path, why, sizeof why)) == NULL) {
		rp_log_error("store: %s", why);
		return -1;
	}
	c->drv = st->drv;
	c->readonly = c->drv->readonly(c->db);
	c->st = st;
	return 0;
}

/* The write turn's own connection (st->mu held), opened on first use: taken, or NULL while
 * the previous holder of the turn still commits on it (or it cannot be opened). */
static struct conn *
spare(struct rp_store *st)
{
	struct conn *c = st->spare;
	int zero = 0;

	if (c == NULL) {
		if ((c = calloc(1, sizeof *c)) == NULL || conn_open(st, c) < 0) {
			free(c);
			return NULL;
		}
		c->spare = 1;
		c->busy = 1;
		st->spare = c;
		return c;
	}
	return __atomic_compare_exchange_n(&c->busy, &zero, 1, 0, __ATOMIC_SEQ_CST,
	                                   __ATOMIC_RELAXED)
	               ? c
	               : NULL;
}

static struct conn *
conn_get(struct rp_store *st, struct conn *hint, int writer)
{
	struct conn *c = NULL, *closed = NULL;
	struct timespec until;
	int zero, two, late = 0;

	/* Its last connection, unless others wait: they would starve behind a thread that
	 * gives one back and takes it again. */
	zero = 0;
	if (hint && __atomic_load_n(&st->waiters, __ATOMIC_SEQ_CST) == 0 &&
	    __atomic_compare_exchange_n(&hint->busy, &zero, 1, 0, __ATOMIC_SEQ_CST,
	                                __ATOMIC_RELAXED))
		return hint;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += POOL_WAIT_MS / 1000;
	pthread_mutex_lock(&st->mu);
	/* Counted as a waiter before looking, so that conn_put (which frees, then looks at
	 * the waiters) either lets this scan find its connection or wakes the wait below. */
	__atomic_add_fetch(&st->waiters, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		for (c = st->all; c; c = c->next) {
			zero = 0;
			if (__atomic_compare_exchange_n(&c->busy, &zero, 1, 0, __ATOMIC_SEQ_CST,
			                                __ATOMIC_RELAXED))
				goto out;
		}
		if (st->max == 0 || st->open < st->max)
			break;
		/* The thread that holds the write turn takes the turn's own connection when
		 * none is free: it must never wait for connections that threads waiting for the
		 * turn may hold. (Only the previous holder, still committing on it, may have it.)
		 */
		if (writer && (c = spare(st)) != NULL)
			goto out;
		if (late) {
			rp_log_warn("store: all %d connections to %s stayed busy for %d s "
			            "(db_connections)",
			            st->max, st->name, POOL_WAIT_MS / 1000);
			goto out;
		}
		/* Timed out: one more look above before giving up. */
		late = pthread_cond_timedwait(&st->freed, &st->mu, &until) != 0;
	}
	/* Open one more, in the struct of one closed earlier where there is one (other
	 * threads may keep it as their hint, so it is never freed before rp_store_free). The
	 * count is taken first, so the lock need not be held while a PostgreSQL connection is
	 * made (milliseconds). */
	__atomic_add_fetch(&st->open, 1, __ATOMIC_RELAXED);
	for (c = st->all; c; c = c->next) {
		two = 2;
		if (__atomic_compare_exchange_n(&c->busy, &two, 1, 0, __ATOMIC_SEQ_CST,
		                                __ATOMIC_RELAXED)) {
			closed = c;
			break;
		}
	}
	pthread_mutex_unlock(&st->mu);
	c = closed ? closed : calloc(1, sizeof *c);
	if (c && conn_open(st, c) == 0)
		c->busy = 1;
	pthread_mutex_lock(&st->mu);
	if (c && c->db && !closed) {
		c->next = st->all;
		st->all = c;
	} else if (c == NULL || c->db == NULL) {
		if (closed)
			__atomic_store_n(&closed->busy, 2, __ATOMIC_SEQ_CST);
		else
			free(c);
		c = NULL;
		__atomic_sub_fetch(&st->open, 1, __ATOMIC_RELAXED);
		/* The slot is free again for whoever waits. */
		pthread_cond_signal(&st->freed);
	}
out:
	__atomic_sub_fetch(&st->waiters, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&st->mu);
	return c;
}

static void
conn_put(struct conn *c)
{
	struct rp_store *st = c->st;

	/* A scope that ended with a transaction open (a bug: logged) must not hand it on. */
	if (c->drv->in_txn(c->db)) {
		rp_log_error(
		        "store: a connection was given back inside a transaction; rolled back");
		store_rollback(c);
	}
	/* Past the cap (lowered): close it, waiters or not. The struct stays, marked closed
	 * (busy 2), because other threads may keep it as their hint: the next connection
	 * opened reuses it, rp_store_free frees it. (A look without the lock first: every
	 * store call comes through here.) */
	if (st->max > 0 && !c->spare && __atomic_load_n(&st->open, __ATOMIC_RELAXED) > st->max) {
		pthread_mutex_lock(&st->mu);
		if (st->open > st->max) {
			__atomic_sub_fetch(&st->open, 1, __ATOMIC_RELAXED);
			conn_shut(c);
			__atomic_store_n(&c->busy, 2, __ATOMIC_SEQ_CST);
			pthread_mutex_unlock(&st->mu);
			return;
		}
		pthread_mutex_unlock(&st->mu);
	}
	__atomic_store_n(&c->busy, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&st->waiters, __ATOMIC_SEQ_CST) > 0) {
		pthread_mutex_lock(&st->mu);
		pthread_cond_signal(&st->freed);
		pthread_mutex_unlock(&st->mu);
	}
}

/* Give the write turn back, when h holds it. */
static void
turn_done(struct hold *h)
{
	if (h == NULL || !h->writer)
		return;
	h->writer = 0;
	pthread_mutex_lock(&h->st->mu);
	h->st->writing = 0;
	pthread_cond_signal(&h->st->turn);
	pthread_mutex_unlock(&h->st->mu);
}

struct hold *
store_hold(struct rp_store *st)
{
	struct hold *h = pthread_getspecific(st->key);

	if (h == NULL) {
		if ((h = calloc(1, sizeof *h)) == NULL || pthread_setspecific(st->key, h) != 0) {
			free(h);
			return NULL;
		}
		h->st = st;
	}
	h->depth++;
	return h;
}

void
store_unhold(struct hold **hp)
{
	struct hold *h = *hp;

	if (h == NULL || --h->depth > 0)
		return;
	if (h->held) {
		/* h->c stays as a hint: this thread takes it again next time if nobody else has. */
		h->held = 0;
		conn_put(h->c);
		if (h->c->spare)
			h->c = NULL; /* the turn's alone */
	}
	turn_done(h);
}

void
store_write_turn(struct rp_store *st)
{
	struct hold *h = pthread_getspecific(st->key);

	if (h == NULL || h->depth == 0 || h->writer)
		return;
	pthread_mutex_lock(&st->mu);
	while (st->writing)
		pthread_cond_wait(&st->turn, &st->mu);
	st->writing = 1;
	pthread_mutex_unlock(&st->mu);
	h->writer = 1;
}

struct conn *
store_writer(struct rp_store *st)
{
	store_write_turn(st);
	return store_conn(st);
}

struct conn *
store_conn(struct rp_store *st)
{
	struct hold *h = pthread_getspecific(st->key);
	struct conn *c;

	if (h == NULL || h->depth == 0) {
		/* Only inside a STORE_HOLD scope is it known when the connection is free again. */
		rp_log_error("store: a connection was asked for outside STORE_HOLD (a bug)");
		return NULL;
	}
	if (h->held) {
		c = h->c;
	} else {
		if ((c = conn_get(st, h->c, h->writer)) == NULL)
			return NULL;
		h->c = c;
		h->held = 1;
	}
	if (__builtin_expect(c->readonly, 0))
		conn_reopen(c);
	return c;
}

void
rp_store_set_connections(struct rp_store *st, int max)
{
	st->max = max > 0 ? max : 0;
}

void
rp_store_connections(struct rp_store *st, int *open, int *busy)
{
	struct conn *c;
	int n = 0;

	pthread_mutex_lock(&st->mu);
	for (c = st->all; c; c = c->next)
		n += __atomic_load_n(&c->busy, __ATOMIC_RELAXED) == 1;
	if (st->spare)
		n += __atomic_load_n(&st->spare->busy, __ATOMIC_RELAXED) == 1;
	*open = st->open + (st->spare != NULL);
	*busy = n;
	pthread_mutex_unlock(&st->mu);
}

int
rp_store_schema_latest(void)
{
	return rp_schema_migrations[rp_schema_count - 1].version;
}

enum rp_err
rp_store_hold(struct rp_store *st, char *why, size_t whylen)
{
	struct sql_db *db;

	if (st->drv->hold == NULL)
		return RP_ERR_OK;
	/* Held already: is the connection that holds it still there? (A database restart
	 * ends it, and the claim with it: claim again.) */
	if (st->holder != NULL) {
		if (st->drv->exec(st->holder, "SELECT 1", NULL, 0) == SQL_OK)
			return RP_ERR_OK;
		st->drv->close(st->holder);
		st->holder = NULL;
		rp_log_warn("store: the connection that claims %s was lost; claiming it again",
		            st->name);
	}
	if ((db = st->drv->open(st->path, why, whylen)) == NULL)
		return RP_ERR_INTERNAL;
	if (st->drv->hold(db, why, whylen) < 0) {
		st->drv->close(db);
		return RP_ERR_CONFLICT;
	}
	st->holder = db;
	return RP_ERR_OK;
}

static void
bump(struct rp_store *st)
{
	__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
}

/* Hears of every write transaction any server sharing the database commits, and moves the
 * generation, so that cached answers and parked event streams see other servers' writes. */
static void *
watch_main(void *arg)
{
	struct rp_store *st = arg;
	struct sql_db *db = NULL;
	char why[256];
	int lost = 0, i;

	while (!__atomic_load_n(&st->unwatch, __ATOMIC_ACQUIRE)) {
		if (db == NULL) {
			if ((db = st->drv->open(st->path, why, sizeof why)) == NULL ||
			    st->drv->listen(db) < 0) {
				st->drv->close(db);
				db = NULL;
				for (i = 0;
				     i < 10 && !__atomic_load_n(&st->unwatch, __ATOMIC_ACQUIRE);
				     i++)
					usleep(100000);
				continue;
			}
			if (lost)
				rp_log_info("store: hearing of other servers' writes again");
			lost = 0;
			/* Writes committed while nobody listened went unheard: assume there were.
			 */
			bump(st);
		}
		switch (st->drv->wait(db, 200)) {
		case 1:
			bump(st);
			break;
		case -1:
			if (!lost)
				rp_log_warn(
				        "store: lost the connection that hears of other servers' "
				        "writes; making it again");
			lost = 1;
			st->drv->close(db);
			db = NULL;
			break;
		default:
			break;
		}
	}
	st->drv->close(db);
	return NULL;
}

int
rp_store_watch(struct rp_store *st)
{
	if (st->drv->listen == NULL || st->watching)
		return 0;
	if (pthread_create(&st->watcher, NULL, watch_main, st) != 0)
		return -1;
	st->watching = 1;
	return 0;
}

const char *
rp_store_name(struct rp_store *st)
{
	return st->name;
}

int
rp_store_schema_version(struct rp_store *st)
{
	return st->version;
}

static enum rp_err
migrate(const struct sql_driver *drv, struct sql_db *db, int *version, char *why, size_t whylen)
{
	return store_migrate(drv, db, rp_store_schema_latest(), version, why, whylen);
}

/* Apply pending migrations in one exclusive transaction, so two servers starting on one
 * file cannot both migrate and a failed migration leaves the old schema intact. */
enum rp_err
store_migrate(const struct sql_driver *drv, struct sql_db *db, int latest, int *version, char *why,
              size_t whylen)
{
	enum rp_err rc = RP_ERR_INTERNAL;
	int v, i;

	/* Up to date: nothing to write, which a read-only database could not. */
	if ((v = drv->schema_version(db)) == latest) {
		*version = v;
		return RP_ERR_OK;
	}
	if (drv->begin(db, TXN_SCHEMA) != SQL_OK) {
		snprintf(why, whylen, "cannot lock the schema: %s", drv->errmsg(db));
		return RP_ERR_INTERNAL;
	}
	v = drv->schema_version(db);
	if (v < 0) {
		snprintf(why, whylen, "cannot read schema version: %s", drv->errmsg(db));
		goto out;
	}
	if (v > latest) {
		snprintf(why, whylen,
		         "database schema version %d is newer than this rackpilotd knows (%d); "
		         "run a newer rackpilotd or restore a backup",
		         v, latest);
		rc = RP_ERR_CONFLICT;
		goto out;
	}
	for (i = 0; i < rp_schema_count; i++) {
		const struct migration *m = &rp_schema_migrations[i];
		const char *sql = m->sql;
		char msg[192], *text = NULL;
		int rc_exec;

		if (m->version <= v || m->version > latest)
			continue;
		if (drv == &rp_sql_pg && m->pg)
			sql = m->pg;
		if (drv->ddl && (sql = text = drv->ddl(sql)) == NULL) {
			snprintf(why, whylen, "out of memory");
			goto out;
		}
		rc_exec = drv->exec(db, sql, msg, sizeof msg);
		free(text);
		if (rc_exec != SQL_OK) {
			snprintf(why, whylen, "migration %s failed: %s", m->name, msg);
			goto out;
		}
		if (drv->set_schema_version(db, m->version, why, whylen) != SQL_OK)
			goto out;
		rp_log_info("store: applied migration %s", m->name);
		v = m->version;
	}
	if (drv->commit(db) != SQL_OK) {
		snprintf(why, whylen, "cannot commit the migrations: %s", drv->errmsg(db));
		goto out;
	}
	*version = v;
	return RP_ERR_OK;
out:
	drv->rollback(db);
	return rc;
}

int
rp_store_is_url(const char *target)
{
	const char *p = target;

	if (!strncmp(target, "postgresql://", 13) || !strncmp(target, "postgres://", 11))
		return 1;
	/* libpq's key = value form: a keyword, then '=' (no file path starts so). */
	while (*p == ' ')
		p++;
	if (!(*p >= 'a' && *p <= 'z'))
		return 0;
	while ((*p >= 'a' && *p <= 'z') || *p == '_')
		p++;
	while (*p == ' ')
		p++;
	return *p == '=';
}

enum rp_err
rp_store_open(const char *path, struct rp_store **out, char *why, size_t whylen)
{
	const struct sql_driver *drv = rp_store_is_url(path) ? &rp_sql_pg : &rp_sql_sqlite;
	struct rp_store *st = NULL;
	enum rp_err rc = RP_ERR_INTERNAL;
	struct sql_db *db = NULL;
	char msg[192], name[300];

	drv->describe(path, name, sizeof name);
	db = drv->open(path, why, whylen);
	if (db == NULL)
		goto out;
	if (drv->setup(db, msg, sizeof msg) != 0) {
		snprintf(why, whylen, "%s: %s", name, msg);
		goto out;
	}
	st = calloc(1, sizeof *st);
	if (st != NULL)
		st->generation = 1;
	if (st == NULL || (st->path = strdup(path)) == NULL || (st->name = strdup(name)) == NULL) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	st->drv = drv;
	rc = migrate(drv, db, &st->version, why, whylen);
	if (rc != RP_ERR_OK)
		goto out;
	rc = RP_ERR_INTERNAL;
	if (pthread_key_create(&st->key, hold_release) != 0) {
		snprintf(why, whylen, "pthread_key_create failed");
		goto out;
	}
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->freed, NULL);
	pthread_cond_init(&st->turn, NULL);
	if (drv->readonly(db)) {
		st->cond = RP_ERR_STORAGE_READONLY;
		rp_log_warn(
		        "store: %s is read-only: serving reads, refusing writes (503) until it is "
		        "writable",
		        name);
	}
	*out = st;
	st = NULL;
	rc = RP_ERR_OK;
out:
	if (db)
		drv->close(db);
	if (st) {
		free(st->path);
		free(st->name);
		free(st);
	}
	return rc;
}

enum rp_err
rp_store_health(struct rp_store *st, char *why, size_t whylen)
{
	enum rp_err e = (enum rp_err)__atomic_load_n(&st->cond, __ATOMIC_ACQUIRE);
	const char *slash = strrchr(st->path, '/');
	int dl = slash ? (int)(slash - st->path) : 1;
	const char *dir = slash ? st->path : ".";

	if (e == RP_ERR_STORAGE_FULL && !st->drv->file)
		snprintf(why, whylen, "the database server %s reports its disk full", st->name);
	else if (e == RP_ERR_STORAGE_FULL)
		snprintf(why, whylen, "the database's filesystem is full: free space in %.*s", dl,
		         dir);
	else if (e == RP_ERR_STORAGE_READONLY)
		snprintf(why, whylen, "the database %s is read-only: make it writable", st->name);
	else if (e == RP_ERR_STORAGE_IO && !st->drv->file)
		snprintf(why, whylen, "the database server %s cannot be reached or failed",
		         st->name);
	else if (e == RP_ERR_STORAGE_IO)
		snprintf(why, whylen, "writing the database %s failed with an I/O error", st->name);
	else
		snprintf(why, whylen, "ok");
	return e;
}

void
rp_store_set_secrets(struct rp_store *st, struct rp_secrets *sec)
{
	st->secrets = sec;
}

void
rp_store_free(struct rp_store *st)
{
	struct conn *c, *n;

	if (st == NULL)
		return;
	/* The calling thread's hold, the others' went with their threads. */
	free(pthread_getspecific(st->key));
	pthread_setspecific(st->key, NULL);
	for (c = st->all; c; c = n) {
		n = c->next;
		conn_close(c);
	}
	if (st->spare)
		conn_close(st->spare);
	if (st->watching) {
		__atomic_store_n(&st->unwatch, 1, __ATOMIC_RELEASE);
		pthread_join(st->watcher, NULL);
	}
	if (st->holder)
		st->drv->close(st->holder);
	pthread_key_delete(st->key);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->freed);
	pthread_cond_destroy(&st->turn);
	if (st->path)
		explicit_bzero(st->path, strlen(st->path));
	free(st->path);
	free(st->name);
	free(st);
}

/* The first use of a call site on this connection: assign the site a slot (once, for all
 * threads), grow this connection's arrays to hold it, prepare. */
static struct stmt *
prep_slow(struct conn *c, int *slot, int n, const char *sql)
{
	if (n == 0) {
		int want = __atomic_add_fetch(&next_slot, 1, __ATOMIC_ACQ_REL), expect = 0;

		n = __atomic_compare_exchange_n(slot, &expect, want, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE)
		            ? want
		            : expect;
	}
	if (n >= c->nslots) {
		/* Room for every slot assigned so far and some more, so growth is rare. */
		int cap = __atomic_load_n(&next_slot, __ATOMIC_ACQUIRE), i;
		struct stmt **stmt;
		struct colmeta **meta;

		cap = (cap > n ? cap : n) + 64;
		if ((stmt = realloc(c->stmt, (size_t)cap * sizeof *stmt)) == NULL) {
			rp_log_error("store: out of memory growing the statement cache");
			return NULL;
		}
		c->stmt = stmt;
		if ((meta = realloc(c->meta, (size_t)cap * sizeof *meta)) == NULL) {
			rp_log_error("store: out of memory growing the statement cache");
			return NULL;
		}
		c->meta = meta;
		for (i = c->nslots; i < cap; i++) {
			c->stmt[i] = NULL;
			c->meta[i] = NULL;
		}
		c->nslots = cap;
	}
	if (c->stmt[n] == NULL) {
		if ((c->stmt[n] = c->drv->prepare(c->db, sql)) == NULL) {
			rp_log_error("store: prepare failed: %s: %.600s", c->drv->errmsg(c->db),
			             sql);
			return NULL;
		}
		c->last = n;
		return c->stmt[n];
	}
	c->last = n;
	c->drv->reset(c->stmt[n]);
	c->drv->clear(c->stmt[n]);
	return c->stmt[n];
}

struct stmt *
store_prep(struct conn *c, int *slot, const char *sql)
{
	int n = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	struct stmt *s;

	/* No connection (store_conn logged why): the statement API reports RP_ERR_INTERNAL. */
	if (c == NULL)
		return NULL;
	if (__builtin_expect(n > 0 && n < c->nslots && (s = c->stmt[n]) != NULL, 1)) {
		c->last = n;
		c->drv->reset(s);
		c->drv->clear(s);
		return s;
	}
	return prep_slow(c, slot, n, sql);
}

static enum rp_err
begin_kind(struct conn *c, enum sql_txn kind)
{
	int rc;

	/* store_write and store_txn took the turn before the connection; the others here. */
	store_write_turn(c->st);
	rc = c->drv->begin(c->db, kind);
	c->changes = c->drv->total_changes(c->db);
	return rc == SQL_OK ? RP_ERR_OK : store_sqlerr(c, rc, "begin");
}

enum rp_err
store_begin(struct conn *c)
{
	return begin_kind(c, TXN_WRITE);
}

static enum rp_err
claim_begin(struct conn *c)
{
	return begin_kind(c, TXN_CLAIM);
}

uint64_t
rp_store_generation(struct rp_store *st)
{
	return __atomic_load_n(&st->generation, __ATOMIC_ACQUIRE);
}

void
store_macs_changed(struct conn *c)
{
	c->macs_changed = 1;
}

enum rp_err
store_commit(struct conn *c)
{
	int rc;

	/* Once per transaction, where a trigger per row made every MAC insert of an import
	 * open a statement journal (a tenth of its time). */
	if (c->macs_changed) {
		struct stmt *s = STMT(c, "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + 1 "
		                         "AS TEXT) WHERE key = "
		                         "'macs_version'");
		enum rp_err e;

		c->macs_changed = 0;
		if ((e = store_exec(c, s, "macs version")) != RP_ERR_OK) {
			store_rollback(c);
			return e;
		}
	}
	/* The turn passes before the commit: the next writer begins as soon as this one's
	 * COMMIT lets go of the database, while this one waits for its flush (sqlite.c's group
	 * commit shares one flush between them). */
	turn_done(pthread_getspecific(c->st->key));
	rc = c->drv->commit(c->db);
	if (rc == SQL_OK) {
		/* After the commit, never before: a reader that sees the new generation must also
		 * see the new data. */
		__atomic_add_fetch(&c->st->generation, 1, __ATOMIC_RELEASE);
		/* Only a commit that wrote proves writes work again. */
		if (__builtin_expect(__atomic_load_n(&c->st->cond, __ATOMIC_RELAXED) != RP_ERR_OK,
		                     0) &&
		    c->drv->total_changes(c->db) != c->changes &&
		    __atomic_exchange_n(&c->st->cond, RP_ERR_OK, __ATOMIC_ACQ_REL) != RP_ERR_OK)
			rp_log_info("store: writes succeed again");
		return RP_ERR_OK;
	}
	store_rollback(c);
	return store_sqlerr(c, rc, "commit");
}

void
store_rollback(struct conn *c)
{
	c->macs_changed = 0;
	c->drv->rollback(c->db);
	turn_done(pthread_getspecific(c->st->key));
}

static enum rp_err
open_txn(struct rp_store *st, struct conn **c, enum rp_err (*begin)(struct conn *c))
{
	struct conn *x;
	enum rp_err e;

	if (begin != store_read_begin)
		store_write_turn(st);
	x = store_conn(st);
	if (x == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = begin(x)) != RP_ERR_OK)
		return e;
	*c = x;
	return RP_ERR_OK;
}

enum rp_err
store_write(struct rp_store *st, struct conn **c)
{
	return open_txn(st, c, store_begin);
}

enum rp_err
store_claim(struct rp_store *st, struct conn **c)
{
	return open_txn(st, c, claim_begin);
}

enum rp_err
store_read(struct rp_store *st, struct conn **c)
{
	return open_txn(st, c, store_read_begin);
}

static enum rp_err
open_node(struct rp_store *st, const char *key, struct conn **c, struct node_ref *n,
          enum rp_err (*begin)(struct conn *c), void (*end)(struct conn *c))
{
	struct conn *x = NULL;
	enum rp_err e;

	if ((e = open_txn(st, &x, begin)) != RP_ERR_OK)
		return e;
	if ((e = store_node_ref(x, key, n)) != RP_ERR_OK) {
		end(x);
		return e;
	}
	*c = x;
	return RP_ERR_OK;
}

enum rp_err
store_write_node(struct rp_store *st, const char *key, struct conn **c, struct node_ref *n)
{
	return open_node(st, key, c, n, store_begin, store_rollback);
}

enum rp_err
store_read_node(struct rp_store *st, const char *key, struct conn **c, struct node_ref *n)
{
	return open_node(st, key, c, n, store_read_begin, store_read_end);
}

enum rp_err
store_end(struct conn *c, enum rp_err e, json_t *obj, json_t **out)
{
	if (e == RP_ERR_OK && (e = store_commit(c)) == RP_ERR_OK && out) {
		*out = obj;
		return e;
	}
	store_rollback(c);
	json_decref(obj);
	return e;
}

enum rp_err
store_read_begin(struct conn *c)
{
	int rc = c->drv->begin(c->db, TXN_READ);

	return rc == SQL_OK ? RP_ERR_OK : store_sqlerr(c, rc, "begin read");
}

void
store_read_end(struct conn *c)
{
	if (c->drv->in_txn(c->db))
		c->drv->commit(c->db);
}

/* A storage condition: remember it (rp_store_health) and log it when it changes, so a
 * full disk under load logs one line, not one per request or job. */
static enum rp_err
storage_cond(struct conn *c, enum rp_err e, int rc, const char *what)
{
	if (__atomic_exchange_n(&c->st->cond, (int)e, __ATOMIC_ACQ_REL) != (int)e)
		rp_log_error("store: %s: %s (%s, %d); refusing writes until it clears", what,
		             rp_err_message(e), c->drv->errmsg(c->db), rc);
	return e;
}

enum rp_err
store_sqlerr(struct conn *c, int rc, const char *what)
{
	int err = c->drv->sys_errno(c->db);

	switch (rc) {
	case SQL_BUSY:
		rp_log_warn("store: %s: database busy", what);
		return RP_ERR_UNAVAILABLE;
	case SQL_CONSTRAINT:
		return RP_ERR_CONFLICT;
	case SQL_FULL:
		return storage_cond(c, RP_ERR_STORAGE_FULL, rc, what);
	case SQL_READONLY:
		c->readonly = 1; /* may have been opened read-only: reopen when writable */
		return storage_cond(c, RP_ERR_STORAGE_READONLY, rc, what);
	case SQL_IOERR:
		/* The WAL index or journal could not grow, or a file may not be written. */
		if (err == ENOSPC || err == EDQUOT)
			return storage_cond(c, RP_ERR_STORAGE_FULL, rc, what);
		if (err == EROFS || err == EACCES || err == EPERM)
			return storage_cond(c, RP_ERR_STORAGE_READONLY, rc, what);
		return storage_cond(c, RP_ERR_STORAGE_IO, rc, what);
	default:
		rp_log_error("store: %s: %s (%d)", what, c->drv->errmsg(c->db), rc);
		return RP_ERR_INTERNAL;
	}
}

enum hint { H_NONE, H_BOOL, H_JSON, H_TIME };

/* A statement's result columns, parsed from their aliases once. */
struct colmeta {
	int n;
	int nsorted;
	int *sorted; /* the unskipped columns in canonical order: see meta_parse */
	int *runend; /* per sorted position: where its top-level member's columns end */
	/* per sorted position: its member is in the skip list skipped_by (store_created_text) */
	unsigned char *skipmask;
	const char *const *skipped_by;
	struct col {
		char key[48];
		char sub[48]; /* non-empty: member sub of object key */
		unsigned char hint;
		unsigned char skip;
		/* `"key":` and `"sub":` as store_row_text writes them (column names are this
		 * store's own identifiers: nothing in them needs escaping) */
		unsigned char klen, slen;
		char klead[52], slead[52];
		int gend; /* a nested member's group: the index after its object's last member */
	} col[];
};

/* `"name":` into out (52 bytes; name is under 48); returns its length. */
static unsigned char
lead(char out[52], const char *name)
{
	size_t n = strlen(name);

	out[0] = '"';
	memcpy(out + 1, name, n);
	memcpy(out + 1 + n, "\":", 3);
	return (unsigned char)(n + 3);
}

static struct colmeta *
meta_parse(struct stmt *s)
{
	int i, n = s->drv->column_count(s);
	struct colmeta *m =
	        calloc(1, sizeof *m + (size_t)n * (sizeof m->col[0] + 2 * sizeof(int) + 1));

	if (m == NULL)
		return NULL;
	m->n = n;
	m->sorted = (int *)(void *)&m->col[n];
	m->runend = m->sorted + n;
	m->skipmask = (unsigned char *)(m->runend + n);
	for (i = 0; i < n; i++) {
		struct col *c = &m->col[i];
		const char *name = s->drv->column_name(s, i), *colon, *dot;
		size_t kl;

		if (name == NULL || name[0] == '_') {
			c->skip = 1;
			continue;
		}
		colon = strchr(name, ':');
		kl = colon ? (size_t)(colon - name) : strlen(name);
		if (kl >= sizeof c->key) {
			c->skip = 1;
			continue;
		}
		memcpy(c->key, name, kl);
		c->key[kl] = '\0';
		if (colon)
			c->hint = !strcmp(colon + 1, "bool")   ? H_BOOL
			          : !strcmp(colon + 1, "json") ? H_JSON
			          : !strcmp(colon + 1, "time") ? H_TIME
			                                       : H_NONE;
		dot = strchr(c->key, '.');
		if (dot) {
			snprintf(c->sub, sizeof c->sub, "%s", dot + 1);
			c->key[dot - c->key] = '\0';
		}
		c->klen = lead(c->klead, c->key);
		c->slen = lead(c->slead, c->sub);
	}
	/* Members of one nested object are adjacent in every SELECT here. */
	for (i = n - 1; i >= 0; i--) {
		struct col *c = &m->col[i];

		if (c->skip || c->sub[0] == '\0')
			continue;
		c->gend = i + 1 < n && !m->col[i + 1].skip && m->col[i + 1].sub[0] &&
		                          strcmp(m->col[i + 1].key, c->key) == 0
		                  ? m->col[i + 1].gend
		                  : i + 1;
	}
	/* The order json_dumps(JSON_SORT_KEYS) prints: keys by strcmp, a nested object's
	 * members together under their key, by strcmp of their names. Insertion sort: a
	 * statement has tens of columns and this runs once per statement. */
	for (i = 0; i < n; i++) {
		int j;

		if (m->col[i].skip)
			continue;
		for (j = m->nsorted; j > 0; j--) {
			const struct col *a = &m->col[m->sorted[j - 1]], *b = &m->col[i];
			int d = strcmp(a->key, b->key);

			if (d < 0 || (d == 0 && strcmp(a->sub, b->sub) <= 0))
				break;
			m->sorted[j] = m->sorted[j - 1];
		}
		m->sorted[j] = i;
		m->nsorted++;
	}
	for (i = m->nsorted - 1; i >= 0; i--)
		m->runend[i] = i + 1 < m->nsorted && !strcmp(m->col[m->sorted[i + 1]].key,
		                                             m->col[m->sorted[i]].key)
		                       ? m->runend[i + 1]
		                       : i + 1;
	return m;
}

/* The parsed columns of s, cached in the slot store_prep gave it: almost always the latest
 * one prepared. */
static struct colmeta *
meta_of(struct conn *c, struct stmt *s)
{
	int i = c->last;

	if (i > 0 && i < c->nslots && c->stmt[i] == s) {
		if (c->meta[i] == NULL)
			c->meta[i] = meta_parse(s);
		return c->meta[i];
	}
	for (i = 1; i < c->nslots; i++) {
		if (c->stmt[i] == s) {
			if (c->meta[i] == NULL)
				c->meta[i] = meta_parse(s);
			return c->meta[i];
		}
	}
	return NULL;
}

static json_t *
column_value(struct stmt *s, int i, int hint)
{
	enum sql_type type = sql_type(s, i);
	char ts[RP_TIME_BUF];
	json_t *v;

	if (type == SQL_NULL)
		return json_null();
	switch (hint) {
	case H_BOOL:
		return json_boolean(sql_int(s, i) != 0);
	case H_TIME:
		return json_string_nocheck(rp_time_format(sql_int(s, i), ts));
	case H_JSON:
		v = json_loadb(sql_text(s, i), (size_t)sql_bytes(s, i), JSON_DECODE_ANY, NULL);
		return v ? v : json_null();
	}
	switch (type) {
	case SQL_INT:
		return json_integer(sql_int(s, i));
	case SQL_REAL:
		return json_real(sql_real(s, i));
	default:
		return json_stringn(sql_text(s, i), (size_t)sql_bytes(s, i));
	}
}

static int
all_null(json_t *o)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
	{
		if (!json_is_null(v))
			return 0;
	}
	return 1;
}

json_t *
store_row(struct conn *c, struct stmt *s)
{
	struct colmeta *m = meta_of(c, s);
	json_t *o = json_object(), *parent = NULL;
	int i, nested = 0;

	if (m == NULL) {
		rp_log_error("store: row of a statement the cache does not know");
		return o;
	}
	for (i = 0; i < m->n; i++) {
		const struct col *col = &m->col[i];

		if (col->skip)
			continue;
		if (col->sub[0] == '\0') {
			json_object_set_new_nocheck(o, col->key, column_value(s, i, col->hint));
			continue;
		}
		/* Members of one nested object are adjacent in every SELECT here. */
		if (parent == NULL || i == 0 || strcmp(m->col[i - 1].key, col->key) != 0) {
			parent = json_object_get(o, col->key);
			if (parent == NULL) {
				parent = json_object();
				json_object_set_new_nocheck(o, col->key, parent);
				nested = 1;
			}
		}
		json_object_set_new_nocheck(parent, col->sub, column_value(s, i, col->hint));
	}
	/* Nested objects from a LEFT JOIN that found nothing read as null, not {all: null}. */
	if (nested) {
		const char *k;
		json_t *v;
		void *tmp;

		json_object_foreach_safe(o, tmp, k, v)
		{
			if (json_is_object(v) && json_object_size(v) > 0 && all_null(v))
				json_object_set_new_nocheck(o, k, json_null());
		}
	}
	return o;
}

/* ---- Rows as JSON text ------------------------------------------------------------------
 * The same object store_row builds, written straight into a buffer: a 1,000-node page is
 * ~30,000 JSON values, and building them as a tree only to print it and free it was most of
 * a list's time. JSON columns (":json") hold text this store wrote (store_canon) or SQLite's
 * json functions made, so they are copied as they are. The bytes match what json_dumps
 * (JSON_COMPACT) prints for store_row's object (test_row_text checks it). */

/* 1 when p[0..n) is UTF-8 as jansson accepts it (no overlongs, no surrogates, <= U+10FFFF). */
static int
utf8_valid(const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i], need, cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			need = 1, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			need = 2, cp = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			need = 3, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (n - i <= need)
			return 0;
		for (unsigned k = 1; k <= need; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += need + 1;
	}
	return 1;
}

/* A JSON string as jansson writes it: ", \ and control characters escaped, the rest as is. */
static void
text_string(struct rp_buf *b, const char *p, size_t n)
{
	static const char hex[] = "0123456789ABCDEF"; /* jansson's case */
	size_t i, run = 0;

	rp_buf_append(b, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		char esc[6];
		size_t el = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		rp_buf_append(b, p + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (c) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			el = 6;
		}
		rp_buf_append(b, esc, el);
	}
	rp_buf_append(b, p + run, n - run);
	rp_buf_append(b, "\"", 1);
}

static void
text_value(struct rp_buf *b, struct stmt *s, int i, int hint)
{
	enum sql_type type = sql_type(s, i);
	char num[RP_TIME_BUF];
	const char *t;
	size_t n;

	if (type == SQL_NULL) {
		rp_buf_append(b, "null", 4);
		return;
	}
	switch (hint) {
	case H_BOOL:
		if (sql_int(s, i) != 0)
			rp_buf_append(b, "true", 4);
		else
			rp_buf_append(b, "false", 5);
		return;
	case H_TIME:
		rp_time_format(sql_int(s, i), num);
		rp_buf_append(b, "\"", 1);
		rp_buf_append(b, num, strlen(num));
		rp_buf_append(b, "\"", 1);
		return;
	case H_JSON:
		t = sql_text(s, i);
		n = (size_t)sql_bytes(s, i);
		if (n == 0)
			rp_buf_append(b, "null", 4);
		else
			rp_buf_append(b, t, n);
		return;
	}
	switch (type) {
	case SQL_INT: {
		/* By hand: printf's format parsing was a visible share of a list. */
		int64_t v = sql_int(s, i);
		uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
		char *e = num + sizeof num, *p = e;

		do
			*--p = (char)('0' + u % 10);
		while ((u /= 10) != 0);
		if (v < 0)
			*--p = '-';
		rp_buf_append(b, p, (size_t)(e - p));
		return;
	}
	case SQL_REAL: {
		/* jansson's form: 17 significant digits, and a ".0" when that reads as an integer.
		 */
		int len = snprintf(num, sizeof num, "%.17g", sql_real(s, i));

		if (len > 0 && strpbrk(num, ".eE") == NULL &&
		    strspn(num, "-0123456789") == (size_t)len)
			memcpy(num + len, ".0", 3);
		rp_buf_append(b, num, strlen(num));
		return;
	}
	default:
		t = sql_text(s, i);
		n = (size_t)sql_bytes(s, i);
		/* Text jansson would refuse reads as null there too. */
		if (!utf8_valid((const unsigned char *)t, n))
			rp_buf_append(b, "null", 4);
		else
			text_string(b, t, n);
	}
}

void
store_row_text(struct conn *c, struct stmt *s, struct rp_buf *b)
{
	struct colmeta *m = meta_of(c, s);
	int i, first = 1;

	rp_buf_append(b, "{", 1);
	for (i = 0; m && i < m->n; i++) {
		const struct col *col = &m->col[i];
		int j, end, any = 0, inner = 1;

		if (col->skip)
			continue;
		if (!first)
			rp_buf_append(b, ",", 1);
		first = 0;
		rp_buf_append(b, col->klead, col->klen);
		if (col->sub[0] == '\0') {
			text_value(b, s, i, col->hint);
			continue;
		}
		/* One nested object: the adjacent columns of the same key, null when all are. */
		end = col->gend;
		for (j = i; j < end; j++)
			any |= sql_type(s, j) != SQL_NULL;
		if (!any) {
			rp_buf_append(b, "null", 4);
			i = end - 1;
			continue;
		}
		rp_buf_append(b, "{", 1);
		for (j = i; j < end; j++) {
			if (!inner)
				rp_buf_append(b, ",", 1);
			inner = 0;
			rp_buf_append(b, m->col[j].slead, m->col[j].slen);
			text_value(b, s, j, m->col[j].hint);
		}
		rp_buf_append(b, "}", 1);
		i = end - 1;
	}
	rp_buf_append(b, "}", 1);
}

static int
skipped(const char *k, const char *const *skip)
{
	for (; skip && *skip; skip++)
		if (strcmp(*skip, k) == 0)
			return 1;
	return 0;
}

/* Column i read as store_row reads it, for canonical text: JSON columns parsed (NULL when
 * the cell is null, does not parse or holds null), *isnull set for what reads as null. */
static json_t *
canon_json(struct stmt *s, int i, int *isnull)
{
	json_t *v = NULL;

	if (sql_type(s, i) != SQL_NULL)
		v = json_loadb(sql_text(s, i), (size_t)sql_bytes(s, i), JSON_DECODE_ANY, NULL);
	if (json_is_null(v)) {
		json_decref(v);
		v = NULL;
	}
	*isnull = v == NULL;
	return v;
}

/* 1 when JSON text t[0..n) is an array of strings with no \u escape: jansson prints it back
 * byte for byte (SQLite's json_group_array and store_canon both write it compactly, and the
 * two differ only in the case of \u escapes' hex digits), so it needs no parse. */
static int
canon_strings(const char *t, size_t n)
{
	size_t i = 1;

	if (n < 2 || t[0] != '[' || t[n - 1] != ']')
		return 0;
	while (i < n - 1) {
		if (t[i] != '"')
			return 0;
		for (i++; i < n - 1 && t[i] != '"'; i++)
			if (t[i] == '\\' && (++i >= n - 1 || t[i] == 'u'))
				return 0;
		if (++i < n - 1 && t[i++] != ',')
			return 0;
	}
	return 1;
}

static int
col_isnull(struct stmt *s, const struct col *col, int i)
{
	int isnull;
	json_t *v;

	if (sql_type(s, i) == SQL_NULL)
		return 1;
	if (col->hint == H_JSON) {
		if (canon_strings(sql_text(s, i), (size_t)sql_bytes(s, i)))
			return 0;
		v = canon_json(s, i, &isnull);
		json_decref(v);
		return isnull;
	}
	if (col->hint == H_NONE && sql_type(s, i) == SQL_TEXT)
		return !utf8_valid((const unsigned char *)sql_text(s, i), (size_t)sql_bytes(s, i));
	return 0;
}

/* Column i's value as canonical text: JSON columns re-printed with sorted keys (what they
 * hold is small and may come from SQLite's json_object, which keeps its own order). */
static void
canon_value(struct rp_buf *b, struct stmt *s, int i, int hint)
{
	char *t;
	json_t *v;
	int isnull;

	if (hint != H_JSON || (sql_type(s, i) != SQL_NULL &&
	                       canon_strings(sql_text(s, i), (size_t)sql_bytes(s, i)))) {
		text_value(b, s, i, hint);
		return;
	}
	v = canon_json(s, i, &isnull);
	t = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
	if (t) {
		rp_buf_append(b, t, strlen(t));
		free(t);
	} else {
		rp_buf_append(b, "null", 4);
	}
	json_decref(v);
}

int
store_created_text(struct conn *c, struct stmt *s, const char *const *skip, struct rp_buf *b)
{
	static const char from_to[] = "{\"from\":null,\"to\":";
	struct colmeta *m = meta_of(c, s);
	int k, j, n = 0;

	if (m && m->skipped_by != skip) {
		/* Once per statement and skip list: a node has ~20 members and 14 skipped keys. */
		for (k = 0; k < m->nsorted; k++)
			m->skipmask[k] = (unsigned char)skipped(m->col[m->sorted[k]].key, skip);
		m->skipped_by = skip;
	}
	rp_buf_append(b, "{", 1);
	for (k = 0; m && k < m->nsorted; k = j) {
		const struct col *col = &m->col[m->sorted[k]];
		int any = 0;

		/* [k, j): one top-level member, a column or a nested object's columns. */
		j = m->runend[k];
		if (m->skipmask[k])
			continue;
		for (int x = k; x < j && !any; x++)
			any = !col_isnull(s, &m->col[m->sorted[x]], m->sorted[x]);
		if (!any)
			continue;
		if (n++ > 0)
			rp_buf_append(b, ",", 1);
		rp_buf_append(b, col->klead, col->klen);
		rp_buf_append(b, from_to, sizeof from_to - 1);
		if (col->sub[0] == '\0') {
			canon_value(b, s, m->sorted[k], col->hint);
		} else {
			rp_buf_append(b, "{", 1);
			for (int x = k; x < j; x++) {
				const struct col *mc = &m->col[m->sorted[x]];

				if (x > k)
					rp_buf_append(b, ",", 1);
				rp_buf_append(b, mc->slead, mc->slen);
				canon_value(b, s, m->sorted[x], mc->hint);
			}
			rp_buf_append(b, "}", 1);
		}
		rp_buf_append(b, "}", 1);
	}
	rp_buf_append(b, "}", 1);
	return n;
}

int
store_col(struct conn *c, struct stmt *s, const char *key)
{
	struct colmeta *m = meta_of(c, s);

	for (int i = 0; m && i < m->n; i++)
		if (!m->col[i].skip && m->col[i].sub[0] == '\0' && !strcmp(m->col[i].key, key))
			return i;
	return -1;
}

/* No statement to run: no connection could be had (unreachable, or the pool stayed busy:
 * try again, 503), or it failed to prepare (a bug: 500). */
#define NOSTMT(c) ((c) == NULL ? RP_ERR_UNAVAILABLE : RP_ERR_INTERNAL)

enum rp_err
store_exec(struct conn *c, struct stmt *s, const char *what)
{
	int rc;

	if (s == NULL)
		return NOSTMT(c);
	rc = sql_step(s);

	sql_reset(s);
	return rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, what);
}

enum rp_err
store_one(struct conn *c, struct stmt *s, const char *what)
{
	int rc;

	if (s == NULL)
		return NOSTMT(c);
	rc = sql_step(s);

	if (rc == SQL_ROW)
		return RP_ERR_OK;
	sql_reset(s);
	return rc == SQL_DONE ? RP_ERR_NOT_FOUND : store_sqlerr(c, rc, what);
}

enum rp_err
store_one_row(struct conn *c, struct stmt *s, const char *what, json_t **out)
{
	enum rp_err e = store_one(c, s, what);
	json_t *row;

	if (e != RP_ERR_OK)
		return e;
	row = store_row(c, s);
	sql_reset(s);
	if (row == NULL)
		return RP_ERR_INTERNAL;
	*out = row;
	return RP_ERR_OK;
}

int
store_next(struct conn *c, struct stmt *s, const char *what, enum rp_err *e)
{
	int rc;

	if (s == NULL) {
		*e = NOSTMT(c);
		return 0;
	}
	rc = sql_step(s);

	if (rc == SQL_ROW)
		return 1;
	sql_reset(s);
	*e = rc == SQL_DONE ? RP_ERR_OK : store_sqlerr(c, rc, what);
	return 0;
}

json_t *
store_rows(struct conn *c, struct stmt *s)
{
	json_t *a;
	int rc;

	if (s == NULL)
		return NULL;
	a = json_array();

	while ((rc = sql_step(s)) == SQL_ROW)
		json_array_append_new(a, store_row(c, s));
	if (rc != SQL_DONE) {
		rp_log_error("store: step: %s", c->drv->errmsg(c->db));
		json_decref(a);
		a = NULL;
	}
	sql_reset(s);
	return a;
}

enum rp_err
store_all(struct conn *c, struct stmt *s, json_t **out)
{
	json_t *a = store_rows(c, s);

	if (a == NULL)
		return RP_ERR_INTERNAL;
	*out = a;
	return RP_ERR_OK;
}

struct stmt *
sql_bind_args(struct stmt *s, const struct sql_arg *args, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++) {
		if (args[i].type == 't')
			sql_bind_text(s, (int)i + 1, args[i].t);
		else if (args[i].type == 'r')
			sql_bind_real(s, (int)i + 1, args[i].r);
		else
			sql_bind_int(s, (int)i + 1, args[i].i);
	}
	return s;
}

void
sql_bind_text(struct stmt *s, int i, const char *v)
{
	if (s == NULL)
		return;
	if (v)
		s->drv->bind_text(s, i, v, strlen(v));
	else
		s->drv->bind_null(s, i);
}

void
sql_bind_text_own(struct stmt *s, int i, char *v)
{
	sql_bind_text(s, i, v);
	free(v);
}

void
store_bind_str(struct stmt *s, int i, json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_string(v))
		sql_bind_textn(s, i, json_string_value(v), json_string_length(v));
	else
		sql_bind_null(s, i);
}

void
store_bind_int(struct stmt *s, int i, json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_integer(v))
		sql_bind_int(s, i, json_integer_value(v));
	else if (json_is_boolean(v))
		sql_bind_int(s, i, json_is_true(v));
	else
		sql_bind_null(s, i);
}

void
store_bind_real(struct stmt *s, int i, json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_number(v))
		sql_bind_real(s, i, json_number_value(v));
	else
		sql_bind_null(s, i);
}

/* The tables store_id_of and store_ref look in: by UUID, by name, and what one is called. */
static const struct {
	const char *by_uuid, *by_name, *noun;
} tables[] = {
        [T_RACK] = {"SELECT id FROM racks WHERE uuid = ?", "SELECT id FROM racks WHERE name = ?",
                    "rack"},
        [T_NODE] = {"SELECT id FROM nodes WHERE uuid = ?", "SELECT id FROM nodes WHERE name = ?",
                    "node"},
        [T_PROFILE] = {"SELECT id FROM bios_profiles WHERE uuid = ?",
                       "SELECT id FROM bios_profiles WHERE name = ?", "BIOS profile"},
        [T_BASELINE] = {"SELECT id FROM firmware_baselines WHERE uuid = ?",
                        "SELECT id FROM firmware_baselines WHERE name = ?", "firmware baseline"},
        [T_RECIPE] = {"SELECT id FROM recipes WHERE uuid = ?",
                      "SELECT id FROM recipes WHERE name = ?", "recipe"},
        [T_IMAGE] = {"SELECT id FROM images WHERE uuid = ?", "SELECT id FROM images WHERE name = ?",
                     "image"},
        [T_BOOT_PROFILE] = {"SELECT id FROM boot_profiles WHERE uuid = ?",
                            "SELECT id FROM boot_profiles WHERE name = ?", "boot profile"},
        /* Known by UUID only. */
        [T_JOB] = {"SELECT id FROM jobs WHERE uuid = ?", NULL, "job"},
        [T_ROLLOUT] = {"SELECT id FROM rollouts WHERE uuid = ?", NULL, "rollout"},
        [T_WEBHOOK] = {"SELECT id FROM webhooks WHERE uuid = ?",
                       "SELECT id FROM webhooks WHERE name = ?", "webhook"},
};

enum rp_err
store_ref(struct conn *c, enum store_table t, const char *key, const char *field, int64_t *id,
          json_t **detail)
{
	int64_t found = 0;
	enum rp_err e;

	if (key && (e = store_id_of(c, t, key, &found)) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND) {
			*detail = store_why(field, "no %s named '%s'", tables[t].noun, key);
			e = RP_ERR_INVALID_FIELD;
		}
		return e;
	}
	*id = found;
	return RP_ERR_OK;
}

enum rp_err
store_id_of(struct conn *c, enum store_table t, const char *key, int64_t *id)
{
	static int slots[2][sizeof tables / sizeof *tables];
	struct stmt *s;
	char lower[RP_UUID_BUF];
	int uuid = rp_uuid_valid(key), i;
	enum rp_err e;

	if (key == NULL || (!uuid && tables[t].by_name == NULL))
		return RP_ERR_NOT_FOUND;
	s = store_prep(c, &slots[uuid][t], uuid ? tables[t].by_uuid : tables[t].by_name);
	if (uuid) {
		for (i = 0; i < 36; i++)
			lower[i] = (char)((key[i] >= 'A' && key[i] <= 'F') ? key[i] + 32 : key[i]);
		lower[36] = '\0';
		key = lower;
	}
	sql_bind_text(s, 1, key);
	if ((e = store_one(c, s, "lookup")) != RP_ERR_OK)
		return e;
	*id = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
store_node_ref(struct conn *c, const char *key, struct node_ref *out)
{
	enum rp_err e;
	int64_t id;

	if ((e = store_id_of(c, T_NODE, key, &id)) != RP_ERR_OK)
		return e;
	return store_node_by_id(c, id, out);
}

enum rp_err
store_event_text(struct conn *c, const char *actor, const char *action, const char *otype,
                 const char *oid, const char *oname, int64_t node_id, int64_t rack_id,
                 const char *summary, const char *detail)
{
	int64_t at = rp_time_now_ms();
	struct stmt *s = STMT_ARGS(c,
	                           "INSERT INTO events(at, actor, action, object_type, object_id, "
	                           "object_name, node_id, rack_id, summary, detail) "
	                           "VALUES (?,?,?,?,?,?,?,?,?,?)",
	                           at, actor ? actor : "system", action, otype, oid, oname);
	enum rp_err e;

	if (node_id > 0)
		sql_bind_int(s, 7, node_id);
	if (rack_id > 0)
		sql_bind_int(s, 8, rack_id);
	sql_bind_text(s, 9, summary);
	sql_bind_text(s, 10, detail);
	if ((e = store_exec(c, s, "event")) != RP_ERR_OK)
		return e;
	/* The webhooks' outbox (webhooks.c), in the event's own transaction: nothing sent that
	 * did not happen, nothing that happened left unsent. Patterns: an action, or a prefix
	 * and '*' (every action that starts with the prefix; "*" alone: all). A webhook's own
	 * events never go to it: one that gives up would feed itself. */
	return EXEC(c, "webhook enqueue",
	            "INSERT INTO webhook_deliveries(webhook_id, event_id, action, created_at, "
	            "next_at) SELECT w.id, ?1, ?2, ?3, ?3 FROM webhooks w WHERE w.enabled = 1 AND "
	            "w.secret_sealed IS NOT NULL AND NOT (?4 = 'webhook' AND w.uuid = ?5) AND "
	            "EXISTS (SELECT 1 FROM json_each(w.events) p WHERE p.value = ?2 OR "
	            "(substr(p.value, length(p.value)) = '*' AND substr(?2, 1, length(p.value) - "
	            "1) = substr(p.value, 1, length(p.value) - 1)))",
	            sql_last_id(c), action, at, otype ? otype : "", oid ? oid : "");
}

enum rp_err
store_event(struct conn *c, const char *actor, const char *action, const char *otype,
            const char *oid, const char *oname, int64_t node_id, int64_t rack_id,
            const char *summary, json_t *detail)
{
	char *d = NULL;
	enum rp_err e;

	if (detail && (d = json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return RP_ERR_INTERNAL;
	e = store_event_text(c, actor, action, otype, oid, oname, node_id, rack_id, summary, d);
	free(d);
	return e;
}

void
store_refusal(struct conn *c, const char *action, const char *otype, const char *oid,
              const char *oname, int64_t node_id, const char *source, const char *summary,
              json_t *detail)
{
	struct stmt *s;
	json_t *d = NULL;
	int64_t now = rp_time_now_ms(), id = 0, count = 0;
	char text[400];
	enum rp_err e;

	if (store_begin(c) != RP_ERR_OK)
		return;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(
	        c,
	        "SELECT id, coalesce(CAST(json_extract(detail, '$.count') AS BIGINT), 1) FROM "
	        "events "
	        "WHERE at "
	        ">= ?1 "
	        "AND action = ?2 AND object_id IS NOT DISTINCT FROM ?3 AND node_id IS NOT DISTINCT "
	        "FROM ?4 AND "
	        "json_extract(detail, '$.source') IS NOT DISTINCT FROM ?5 ORDER BY id DESC LIMIT 1",
	        now - RP_REFUSAL_WINDOW_MS, action, oid);
	if (node_id > 0)
		sql_bind_int(s, 4, node_id);
	sql_bind_text(s, 5, source);
	if ((e = store_one(c, s, "refusal lookup")) == RP_ERR_OK) {
		id = sql_int(s, 0);
		count = sql_int(s, 1);
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		goto out;
	e = RP_ERR_INTERNAL;
	if (id) {
		snprintf(text, sizeof text, "%.300s (%lld times)", summary, (long long)count + 1);
		s = STMT_ARGS(
		        c,
		        "UPDATE events SET summary = ?2, detail = json_set(coalesce(detail, '{}'), "
		        "'$.count', ?3, '$.last_at', ?4) WHERE id = ?1",
		        id, text, count + 1, now);
		e = store_exec(c, s, "refusal count");
	} else {
		d = detail ? json_deep_copy(detail) : json_object();
		if (d == NULL)
			goto out;
		json_object_set_new(d, "source", source ? json_string(source) : json_null());
		json_object_set_new(d, "count", json_integer(1));
		e = store_event(c, "rackpilotd", action, otype, oid, oname, node_id, 0, summary, d);
	}
	if (e == RP_ERR_OK)
		e = store_commit(c);
out:
	if (e != RP_ERR_OK) {
		store_rollback(c);
		rp_log_warn("could not record %s: %s", action, rp_err_message(e));
	}
	json_decref(d);
}

json_t *
store_why(const char *field, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (field)
		return json_pack("{s:s, s:s}", "field", field, "reason", buf);
	return json_pack("{s:s}", "reason", buf);
}

static void
diff_into(json_t *d, const char *prefix, json_t *a, json_t *b, const char *const *skip)
{
	const char *k;
	json_t *v;
	char path[128];

	/* Keys present in either side; b's keys first, then those only in a. */
	json_object_foreach(b, k, v)
	{
		json_t *old = json_object_get(a, k);

		snprintf(path, sizeof path, "%s%s", prefix, k);
		if (skipped(path, skip))
			continue;
		if (json_is_object(v) && json_is_object(old) && prefix[0] == '\0') {
			char pre[80];

			snprintf(pre, sizeof pre, "%s.", k);
			diff_into(d, pre, old, v, skip);
			continue;
		}
		if (old == NULL)
			old = json_null();
		if (!json_equal(old, v))
			json_object_set_new(d, path, json_pack("{s:O, s:O}", "from", old, "to", v));
	}
	json_object_foreach(a, k, v)
	{
		snprintf(path, sizeof path, "%s%s", prefix, k);
		if (json_object_get(b, k) != NULL || skipped(path, skip) || json_is_null(v))
			continue;
		json_object_set_new(d, path, json_pack("{s:O, s:n}", "from", v, "to"));
	}
}

json_t *
store_diff(json_t *before, json_t *after, const char *const *skip)
{
	json_t *d = json_object();

	diff_into(d, "", before, after, skip);
	if (json_object_size(d) == 0) {
		json_decref(d);
		return NULL;
	}
	return d;
}

char *
store_canon(json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

static int
by_bytes(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *
store_set_text(json_t *v)
{
	size_t i, k, n = json_array_size(v);
	const char **str = calloc(n ? n : 1, sizeof *str);
	struct rp_buf b;

	if (str == NULL)
		return NULL;
	for (i = k = 0; i < n; i++)
		if (json_is_string(json_array_get(v, i)))
			str[k++] = json_string_value(json_array_get(v, i));
	qsort(str, k, sizeof *str, by_bytes);
	rp_buf_init(&b, 0);
	rp_buf_append(&b, "[", 1);
	for (i = 0; i < k; i++) {
		if (i > 0 && strcmp(str[i], str[i - 1]) == 0)
			continue;
		if (b.len > 1)
			rp_buf_append(&b, ",", 1);
		text_string(&b, str[i], strlen(str[i]));
	}
	rp_buf_append(&b, "]", 1);
	free(str);
	if (b.oom) {
		rp_buf_free(&b);
		return NULL;
	}
	return b.data;
}

void
store_merge(json_t *target, json_t *patch)
{
	const char *k;
	json_t *v;

	json_object_foreach(patch, k, v)
	{
		json_t *cur = json_object_get(target, k);

		if (json_is_null(v))
			json_object_del(target, k);
		else if (json_is_object(v) && json_is_object(cur))
			store_merge(cur, v);
		else if (json_is_object(v)) {
			json_t *fresh = json_object();

			store_merge(fresh, v);
			json_object_set_new(target, k, fresh);
		} else
			json_object_set(target, k, v);
	}
}

enum rp_err
store_page(struct conn *c, struct stmt *s, const struct rp_page_req *rq, const char *keyname,
           struct rp_page *out)
{
	json_t *items;
	struct rp_buf text;
	int64_t last_id = 0;
	int rc, n = 0, more = 0, kc = -1;
	char last_key[128] = "";

	if (s == NULL)
		return RP_ERR_INTERNAL; /* store_prep logged it */
	items = rq->want_text ? NULL : json_array();
	rp_buf_init(&text, 0);
	if (rq->want_text)
		rp_buf_append(&text, "[", 1);
	while ((rc = sql_step(s)) == SQL_ROW) {
		if (n == rq->limit) {
			more = 1;
			break;
		}
		last_id = sql_int(s, 0);
		if (rq->want_text) {
			if (n > 0)
				rp_buf_append(&text, ",", 1);
			store_row_text(c, s, &text);
			if (n == 0)
				kc = store_col(c, s, keyname);
			snprintf(last_key, sizeof last_key, "%s",
			         kc >= 0 && sql_type(s, kc) == SQL_TEXT ? sql_text(s, kc) : "");
		} else {
			json_t *row = store_row(c, s), *k = json_object_get(row, keyname);

			snprintf(last_key, sizeof last_key, "%s",
			         json_is_string(k) ? json_string_value(k) : "");
			json_array_append_new(items, row);
		}
		n++;
	}
	sql_reset(s);
	if (rq->want_text)
		rp_buf_append(&text, "]", 1);
	if (rc != SQL_ROW && rc != SQL_DONE) {
		json_decref(items);
		rp_buf_free(&text);
		return store_sqlerr(c, rc, "page");
	}
	if (text.oom) {
		rp_buf_free(&text);
		return RP_ERR_INTERNAL;
	}
	out->items = items;
	out->text = text.data;
	out->text_len = text.len;
	out->more = more;
	out->last_id = last_id;
	memcpy(out->last_key, last_key, sizeof out->last_key);
	return RP_ERR_OK;
}

enum rp_err
store_node_by_id(struct conn *c, int64_t id, struct node_ref *out)
{
	struct stmt *s =
	        STMT_ARGS(c, "SELECT uuid, name, coalesce(rack_id, 0) FROM nodes WHERE id = ?", id);
	enum rp_err e;

	if ((e = store_one(c, s, "node by id")) != RP_ERR_OK)
		return e;
	out->id = id;
	snprintf(out->uuid, sizeof out->uuid, "%s", sql_text(s, 0));
	snprintf(out->name, sizeof out->name, "%s", sql_text(s, 1));
	out->rack_id = sql_int(s, 2);
	sql_reset(s);
	return RP_ERR_OK;
}
