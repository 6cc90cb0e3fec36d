/*
 * sql.h — private to server/store/: the database driver seam and the statement API the
 * per-resource files use. A driver (sqlite.c today) fills a struct sql_driver; everything
 * else in store/ speaks to the database only through the calls below, so a second
 * database is a new driver file, not a rewrite. Only a driver includes its database's
 * header.
 *
 * SQL text is written once for every driver: `?` parameters (a driver that numbers its
 * parameters rewrites them), RETURNING and ON CONFLICT where needed, IS NOT DISTINCT FROM
 * rather than IS with a value. What PostgreSQL needs besides is named in one place, at the
 * top of pg.c.
 */
#ifndef RP_STORE_SQL_H
#define RP_STORE_SQL_H

#include <stddef.h>
#include <stdint.h>

/* What a step or a driver call ended with; a driver maps its own codes to these and keeps
 * its own for sql_errmsg. */
enum sql_rc {
	SQL_OK = 0,
	SQL_ROW,        /* a row is ready to read */
	SQL_DONE,       /* the statement ran to its end */
	SQL_BUSY,       /* another writer holds the database (or a serialization failure) */
	SQL_CONSTRAINT, /* a unique, foreign-key or check constraint refused the change */
	SQL_FULL,       /* the filesystem or quota is full */
	SQL_READONLY,   /* the database may not be written */
	SQL_IOERR,      /* reading or writing the database failed (see sys_errno) */
	SQL_NOMEM,
	SQL_ERROR /* anything else: a bug in the SQL, a schema mismatch */
};

/* A result column's storage type. */
enum sql_type { SQL_NULL, SQL_INT, SQL_REAL, SQL_TEXT, SQL_BLOB };

/* Transaction kinds: a snapshot for reads; a write transaction that holds the write lock
 * from its start (so it cannot fail half-way for a lock); the schema lock migrations take
 * so that two servers starting together apply each migration once; a claim, a write that
 * excludes every other kind of writer but runs beside other servers' claims, where the rows
 * its statement locks (skip_locked) decide which claim gets a row (a write transaction where
 * the database has no row locks). */
enum sql_txn { TXN_READ, TXN_WRITE, TXN_SCHEMA, TXN_CLAIM };

struct sql_db; /* a driver's connection */

/* A driver's prepared statement begins with this header. */
struct stmt {
	const struct sql_driver *drv;
};

struct sql_driver {
	const char *name;
	/* The database is a file the store may watch (permissions, free space): 1/0. */
	int file;
	/* SELECT … FOR UPDATE SKIP LOCKED exists: a TXN_CLAIM passes over the rows another
	 * claim has locked instead of waiting for them: 1/0. */
	int skip_locked;
	/* target as it may be logged: no password. Writes at most len bytes. */
	void (*describe)(const char *target, char *buf, size_t len);
	/* Open a connection to target (a path, a URL: the driver's business), NULL with why. */
	struct sql_db *(*open)(const char *target, char *why, size_t whylen);
	/* Once per store, on the first connection: journal mode and the like. 0 or -1 (why). */
	int (*setup)(struct sql_db *db, char *why, size_t whylen);
	void (*close)(struct sql_db *db); /* accepts NULL */
	/* Run SQL text (any number of statements, no parameters): SQL_OK or an error, why. */
	int (*exec)(struct sql_db *db, const char *sql, char *why, size_t whylen);
	/* A migration in this database's column types (schema/ writes SQLite's, in upper case;
	 * a variant NNNN-what.pg.sql too): a new string, NULL when out of memory. NULL hook:
	 * run as written. */
	char *(*ddl)(const char *sql);
	/* Prepare one statement for repeated use; NULL (sql_errmsg says why). */
	struct stmt *(*prepare)(struct sql_db *db, const char *sql);
	void (*finalize)(struct stmt *s); /* accepts NULL */
	/* Back to the start (bindings kept) / bindings cleared to NULL. */
	void (*reset)(struct stmt *s);
	void (*clear)(struct stmt *s);
	void (*bind_int)(struct stmt *s, int i, int64_t v);
	void (*bind_real)(struct stmt *s, int i, double v);
	void (*bind_text)(struct stmt *s, int i, const char *v, size_t len); /* copied */
	void (*bind_blob)(struct stmt *s, int i, const void *v, size_t len); /* copied */
	void (*bind_null)(struct stmt *s, int i);
	int (*step)(struct stmt *s); /* SQL_ROW, SQL_DONE or an error */
	int (*column_count)(struct stmt *s);
	const char *(*column_name)(struct stmt *s, int i);
	enum sql_type (*column_type)(struct stmt *s, int i);
	int64_t (*column_int)(struct stmt *s, int i);
	double (*column_real)(struct stmt *s, int i);
	const char *(*column_text)(struct stmt *s, int i); /* NULL for NULL; valid to next step */
	const void *(*column_blob)(struct stmt *s, int i);
	size_t (*column_bytes)(struct stmt *s, int i);
	int (*begin)(struct sql_db *db, enum sql_txn kind);
	int (*commit)(struct sql_db *db);
	void (*rollback)(struct sql_db *db); /* no-op outside a transaction */
	int (*in_txn)(struct sql_db *db);
	/* Rows the latest statement changed; total changes of the connection; the row id the
	 * latest INSERT gave. */
	int64_t (*changes)(struct sql_db *db);
	int64_t (*total_changes)(struct sql_db *db);
	int64_t (*last_id)(struct sql_db *db);
	/* The latest error's text, and the errno behind an SQL_IOERR (0 when none). */
	const char *(*errmsg)(struct sql_db *db);
	int (*sys_errno)(struct sql_db *db);
	/* Claim the database's leadership for one server through db, for as long as db stays
	 * open: 0, or -1 with why when another server holds it. NULL hook: nothing to claim (a
	 * SQLite file has one server, by the lock on its data directory). */
	int (*hold)(struct sql_db *db, char *why, size_t whylen);
	/* For a database several servers share (NULL hooks: none): make db hear of every write
	 * transaction any server commits (listen: 0 or -1), and wait up to timeout_ms on it
	 * (wait: 1 when one or more committed since the last wait, 0 when none did, -1 when
	 * db's connection is lost). */
	int (*listen)(struct sql_db *db);
	int (*wait)(struct sql_db *db, int timeout_ms);
	/* SQL listing the tables (rows: a table, a table it references or NULL; a table's rows
	 * together), and, for a copy into this database (copy.c), SQL ({t}: the table) that
	 * makes a table's generated ids follow the rows copied into it (NULL: none). */
	const char *sql_tables;
	const char *sql_after_copy;
	/* Copy the whole database of db, as one consistent snapshot while others write, into a
	 * new file dest (rackpilotd backup): SQL_OK, or an error with why. NULL hook: the
	 * database is not a file (PostgreSQL: pg_dump). */
	int (*backup)(struct sql_db *db, const char *dest, char *why, size_t whylen);
	/* Bytes the database takes (-1 when it cannot tell). */
	int64_t (*size)(struct sql_db *db);
	/* The connection may not write (opened read-only); 1/0. */
	int (*readonly)(struct sql_db *db);
	/* No transaction open and no statement mid-way: the connection may be replaced. */
	int (*idle)(struct sql_db *db);
	/* The schema version recorded in the database (-1 when unreadable), and recording one
	 * inside the caller's TXN_SCHEMA transaction. */
	int (*schema_version)(struct sql_db *db);
	int (*set_schema_version)(struct sql_db *db, int v, char *why, size_t whylen);
	/* Bracket a transaction that rewrites secrets: when it committed, make the replaced
	 * values unrecoverable from the database files (old cells zeroed, logs truncated;
	 * with_vacuum: the whole file rewritten too); either way restore the connection's
	 * settings. Logs what it could not do, never fails. */
	void (*begin_scrub)(struct sql_db *db);
	void (*end_scrub)(struct sql_db *db, int committed, int with_vacuum);
};

/* The SQLite driver (sqlite.c) and the PostgreSQL driver (pg.c). */
extern const struct sql_driver rp_sql_sqlite;
extern const struct sql_driver rp_sql_pg;

/* Statement calls, in the order a caller makes them. Binds never fail on their own: an
 * out-of-memory bind fails the step. Binds and resets on a NULL statement (one that failed
 * to prepare, already logged) do nothing and its step returns SQL_ERROR, so a caller binds
 * and runs without checking and store_exec/store_one/store_next report RP_ERR_INTERNAL. */
static inline void
sql_bind_int(struct stmt *s, int i, int64_t v)
{
	if (s)
		s->drv->bind_int(s, i, v);
}

static inline void
sql_bind_real(struct stmt *s, int i, double v)
{
	if (s)
		s->drv->bind_real(s, i, v);
}

/* Bind v (copied), or NULL when v is NULL. */
void sql_bind_text(struct stmt *s, int i, const char *v);

/* Bind the first len bytes of v (copied). */
static inline void
sql_bind_textn(struct stmt *s, int i, const char *v, size_t len)
{
	if (s)
		s->drv->bind_text(s, i, v, len);
}

/* Bind v (NULL binds NULL) and free it, whatever happens. */
void sql_bind_text_own(struct stmt *s, int i, char *v);

static inline void
sql_bind_blob(struct stmt *s, int i, const void *v, size_t len)
{
	if (s)
		s->drv->bind_blob(s, i, v, len);
}

static inline void
sql_bind_null(struct stmt *s, int i)
{
	if (s)
		s->drv->bind_null(s, i);
}

/* Values bound by their C type, for STMT_ARGS (internal.h): SQL_ARG(v) makes a string
 * (char * or const char *; NULL binds NULL) text, a double real, and any integer type an
 * integer; any other type does not compile. */
struct sql_arg {
	char type; /* 'i', 'r', 't' */
	int64_t i;
	double r;
	const char *t;
};

static inline struct sql_arg
sql_arg_int(int64_t v)
{
	return (struct sql_arg){.type = 'i', .i = v};
}

static inline struct sql_arg
sql_arg_real(double v)
{
	return (struct sql_arg){.type = 'r', .r = v};
}

static inline struct sql_arg
sql_arg_text(const char *v)
{
	return (struct sql_arg){.type = 't', .t = v};
}

#define SQL_ARG(v)                                                                                 \
	_Generic((v), char *: sql_arg_text, const char *: sql_arg_text, double: sql_arg_real,    \
	         default: sql_arg_int)(v)

/* Bind args[0..n) to ?1..?n of s, in order; s (NULL stays NULL, binding nothing). */
struct stmt *sql_bind_args(struct stmt *s, const struct sql_arg *args, size_t n);

/* SQL_ARGS(a, b, …): an array of SQL_ARG and its length, for sql_bind_args; 1 to 12
 * values. */
#define SQL_ARGS(...)                                                                              \
	(const struct sql_arg[]){SQL_MAP_(SQL_COUNT_(__VA_ARGS__), __VA_ARGS__)},                  \
	        SQL_COUNT_(__VA_ARGS__)
#define SQL_COUNT_(...)                                                      SQL_PICK_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define SQL_PICK_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
#define SQL_MAP_(n, ...)                                                     SQL_CAT_(SQL_MAP_, n)(__VA_ARGS__)
#define SQL_CAT_(a, b)                                                       a##b
#define SQL_MAP_1(a)                                                         SQL_ARG(a)
#define SQL_MAP_2(a, ...)                                                    SQL_ARG(a), SQL_MAP_1(__VA_ARGS__)
#define SQL_MAP_3(a, ...)                                                    SQL_ARG(a), SQL_MAP_2(__VA_ARGS__)
#define SQL_MAP_4(a, ...)                                                    SQL_ARG(a), SQL_MAP_3(__VA_ARGS__)
#define SQL_MAP_5(a, ...)                                                    SQL_ARG(a), SQL_MAP_4(__VA_ARGS__)
#define SQL_MAP_6(a, ...)                                                    SQL_ARG(a), SQL_MAP_5(__VA_ARGS__)
#define SQL_MAP_7(a, ...)                                                    SQL_ARG(a), SQL_MAP_6(__VA_ARGS__)
#define SQL_MAP_8(a, ...)                                                    SQL_ARG(a), SQL_MAP_7(__VA_ARGS__)
#define SQL_MAP_9(a, ...)                                                    SQL_ARG(a), SQL_MAP_8(__VA_ARGS__)
#define SQL_MAP_10(a, ...)                                                   SQL_ARG(a), SQL_MAP_9(__VA_ARGS__)
#define SQL_MAP_11(a, ...)                                                   SQL_ARG(a), SQL_MAP_10(__VA_ARGS__)
#define SQL_MAP_12(a, ...)                                                   SQL_ARG(a), SQL_MAP_11(__VA_ARGS__)

static inline int
sql_step(struct stmt *s)
{
	return s ? s->drv->step(s) : SQL_ERROR;
}

static inline void
sql_reset(struct stmt *s)
{
	if (s)
		s->drv->reset(s);
}

static inline int64_t
sql_int(struct stmt *s, int i)
{
	return s->drv->column_int(s, i);
}

static inline double
sql_real(struct stmt *s, int i)
{
	return s->drv->column_real(s, i);
}

static inline const char *
sql_text(struct stmt *s, int i)
{
	return s->drv->column_text(s, i);
}

static inline const void *
sql_blob(struct stmt *s, int i)
{
	return s->drv->column_blob(s, i);
}

static inline size_t
sql_bytes(struct stmt *s, int i)
{
	return s->drv->column_bytes(s, i);
}

static inline enum sql_type
sql_type(struct stmt *s, int i)
{
	return s->drv->column_type(s, i);
}

#endif
