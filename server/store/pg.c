/* The PostgreSQL driver behind sql.h (libpq): the only file of Rackpilot that includes
 * libpq-fe.h.
 *
 * The store's SQL is written once for both databases (sql.h). What PostgreSQL needs
 * besides is done here, in one place:
 *   - `?` and `?N` parameters become `$N` (translate);
 *   - the one SQLite function with no fixed-signature stand-in, json_object(k, v, ...),
 *     becomes json_build_object (translate); the others the store uses (json_extract,
 *     json_each over arrays, json, json_group_array, json_group_object, json_set,
 *     strftime) are SQL functions of the same names, created by the PostgreSQL variant
 *     of migration 0014;
 *   - migrations: column types (INTEGER -> BIGINT, REAL -> DOUBLE PRECISION, BLOB -> BYTEA,
 *     an `id INTEGER PRIMARY KEY` -> an identity column, TEXT columns in byte order as
 *     SQLite compares them, COLLATE "C"), WITHOUT ROWID and the triggers SQLite once had
 *     left out (pg_ddl); a migration whose SQL must differ beyond that has its own
 *     NNNN-what.pg.sql;
 *   - transactions: a write transaction takes one advisory lock, so writers run one at a
 *     time as on SQLite (BEGIN IMMEDIATE) and a transaction never fails half-way for
 *     another writer; a read is one REPEATABLE READ snapshot; the schema lock excludes
 *     writers too, so a migration never runs beside another server's write; a job claim
 *     (TXN_CLAIM) takes the write lock shared, so claims of several servers run together
 *     and their row locks (FOR UPDATE SKIP LOCKED) share the queue out between them;
 *   - values travel as text (binary for blobs); results come back as text and are typed by
 *     their column's type.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>

#include <libpq-fe.h>

#include "../util/util.h"
#include "sql.h"

/* Advisory lock keys (any two constants; "rackpilot" in ASCII, and one more). */
#define LOCK_WRITE  0x7261636b70696cLL
#define LOCK_SCHEMA 0x7261636b70696dLL
#define LOCK_SERVER 0x7261636b70696eLL
/* The channel every write transaction notifies (pg_begin) and every server listens on. */
#define CHANNEL "rackpilot_changes"

/* Type OIDs of pg_type that results are typed by (they are fixed in PostgreSQL). */
#define OID_BOOL    16
#define OID_BYTEA   17
#define OID_INT8    20
#define OID_INT2    21
#define OID_INT4    23
#define OID_FLOAT4  700
#define OID_FLOAT8  701
#define OID_NUMERIC 1700
#define OID_TEXT    25

struct sql_db {
	PGconn *h;
	char *target;    /* the connection string, for a reconnect (it may hold a password) */
	unsigned epoch;  /* bumped by a reconnect: statements prepared before it re-prepare */
	unsigned names;  /* statement names handed out */
	int64_t changes; /* rows the latest statement changed */
	int64_t last_id; /* the identity value the latest INSERT took */
	int64_t total;   /* rows changed over the connection's life */
	char state[6];   /* the latest error's SQLSTATE, "" when none */
	char err[512];   /* the latest error's text */
};

struct pg_stmt {
	struct stmt base;
	struct sql_db *db;
	char *sql;  /* with $N parameters */
	Oid *types; /* per parameter as prepared: 0 (PostgreSQL typed it) or ours */
	char *kind; /* per parameter, what is bound: 'n' NULL, 'i', 'r', 't', 'b' */
	char *ours; /* per parameter: 1 when types[] is ours (PostgreSQL could not tell) */
	char name[24];
	unsigned epoch; /* the connection epoch it was prepared in (0: not prepared) */
	int nparams;    /* the highest $N */
	char **val;     /* bound values (NULL: SQL NULL), owned */
	int *len, *fmt;
	PGresult *desc; /* column names and types, from the prepare */
	PGresult *res;  /* the rows of the current execution */
	int row, nrows;
	int returns_id;      /* an INSERT into a table with an identity column: "RETURNING id"
	                      * added, the id kept as last_id, no rows shown */
	int id_checked;      /* returning_id has looked */
	int reads;           /* a SELECT: safe to run again */
	unsigned char *blob; /* a bytea value decoded for column_blob */
	size_t blob_len;
	int blob_row, blob_col;
};

#define P(s) ((struct pg_stmt *)(s))

static const struct sql_driver *self(void);

/* ---- Errors ----------------------------------------------------------------------------- */

/* Keep the error of res (or of the connection, when res is NULL) and map it. */
static int
fail(struct sql_db *db, const PGresult *res)
{
	const char *code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(db->h);
	size_t n;

	snprintf(db->state, sizeof db->state, "%s", code ? code : "");
	snprintf(db->err, sizeof db->err, "%s", msg && *msg ? msg : "no answer from PostgreSQL");
	n = strlen(db->err);
	while (n > 0 && (db->err[n - 1] == '\n' || db->err[n - 1] == ' '))
		db->err[--n] = '\0';
	if (code == NULL || PQstatus(db->h) == CONNECTION_BAD)
		return SQL_IOERR;
	if (!strncmp(code, "23", 2))
		return SQL_CONSTRAINT;
	if (!strcmp(code, "40001") || !strcmp(code, "40P01") || !strcmp(code, "55P03"))
		return SQL_BUSY; /* serialization failure, deadlock, lock not available */
	if (!strcmp(code, "53100"))
		return SQL_FULL;
	if (!strcmp(code, "53200"))
		return SQL_NOMEM;
	if (!strcmp(code, "25006"))
		return SQL_READONLY;
	if (!strncmp(code, "08", 2) || !strncmp(code, "57P", 3) || !strncmp(code, "58", 2))
		return SQL_IOERR; /* connection, shutdown, system errors */
	return SQL_ERROR;
}

static void
ok(struct sql_db *db)
{
	db->state[0] = '\0';
	db->err[0] = '\0';
}

/* Run text (no parameters) and keep the error, if any: SQL_OK or an error. */
static int
run(struct sql_db *db, const char *text)
{
	PGresult *r = PQexec(db->h, text);
	ExecStatusType st = PQresultStatus(r);
	int rc = SQL_OK;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = fail(db, r);
	else
		ok(db);
	PQclear(r);
	return rc;
}

/* ---- SQL text --------------------------------------------------------------------------- */

/* The SQLite spellings that PostgreSQL knows by another name (no fixed-signature stand-in
 * can take their place: json_object takes any number of values of any type). */
static const struct {
	const char *from, *to;
} renames[] = {
        {"json_object(", "json_build_object("},
};

/* Where the quoted text (a literal or an identifier) that starts at p ends: past its closing
 * quote; a doubled quote is one quote inside it. */
static const char *
quoted_end(const char *p)
{
	const char *q = p + 1;

	while (*q && !(*q == *p && q[1] != *p))
		q += *q == *p ? 2 : 1;
	return *q ? q + 1 : q;
}

/* b's text as a new string, or NULL (b freed) when b ran out of memory. */
static char *
text_of(struct rp_buf *b)
{
	if (b->oom || rp_buf_append(b, "", 1) < 0) {
		rp_buf_free(b);
		return NULL;
	}
	return b->data;
}

/* sql with `?`/`?N` parameters as `$N` and the renames applied, outside quotes; the highest
 * parameter number into *n and which numbers appear into used (bit k-1 for $k; numbers
 * past 64 count as used). New string; NULL when out of memory. */
static char *
translate(const char *sql, int *n, uint64_t *used)
{
	struct rp_buf b;
	const char *p = sql;
	int max = 0;
	size_t i;

	*used = 0;

	rp_buf_init(&b, 0);
	while (*p) {
		if (*p == '\'' || *p == '"') {
			const char *q = quoted_end(p);

			rp_buf_append(&b, p, (size_t)(q - p));
			p = q;
			continue;
		}
		if (*p == '?') {
			int k;

			p++;
			if (isdigit((unsigned char)*p)) {
				k = (int)strtol(p, (char **)&p, 10);
			} else {
				k = max + 1;
			}
			if (k > max)
				max = k;
			if (k >= 1 && k <= 64)
				*used |= 1ULL << (k - 1);
			rp_buf_printf(&b, "$%d", k);
			continue;
		}
		for (i = 0; i < sizeof renames / sizeof *renames; i++) {
			size_t len = strlen(renames[i].from);

			if (!strncasecmp(p, renames[i].from, len) &&
			    (p == sql || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')))
				break;
		}
		if (i < sizeof renames / sizeof *renames) {
			rp_buf_append(&b, renames[i].to, strlen(renames[i].to));
			p += strlen(renames[i].from);
			continue;
		}
		rp_buf_append(&b, p, 1);
		p++;
	}
	*n = max;
	return text_of(&b);
}

/* Is the word at p (of len bytes) the whole token there? */
static int
word_at(const char *start, const char *p, const char *w)
{
	size_t len = strlen(w);

	return !strncmp(p, w, len) &&
	       (p == start || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
	       !(isalnum((unsigned char)p[len]) || p[len] == '_');
}

#define IDENTITY "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"

/* Is the column whose type starts at p named id? (SQLite's rowid alias; other INTEGER
 * PRIMARY KEY columns, such as bmcs.node_id, hold another table's id.) */
static int
column_is_id(const char *start, const char *p)
{
	while (p > start && (p[-1] == ' ' || p[-1] == '\t'))
		p--;
	return p - start >= 2 && p[-2] == 'i' && p[-1] == 'd' &&
	       (p - start == 2 || p[-3] == ' ' || p[-3] == '\t' || p[-3] == '\n' || p[-3] == '(');
}

/* A shared migration's SQLite column types as PostgreSQL's (see the top of this file). Only
 * words in upper case are types in the schema files; comments and quoted text are copied. */
static char *
pg_ddl(const char *sql)
{
	static const struct {
		const char *from, *to;
		int of_id; /* only for a column named id */
	} types[] = {
	        {"INTEGER PRIMARY KEY AUTOINCREMENT", IDENTITY, 1},
	        {"INTEGER PRIMARY KEY", IDENTITY, 1},
	        {"INTEGER", "BIGINT"},
	        {"REAL", "DOUBLE PRECISION"},
	        {"BLOB", "BYTEA"},
	        {"TEXT", "TEXT COLLATE \"C\""},
	        {"WITHOUT ROWID", ""},
	};
	struct rp_buf b;
	const char *p = sql;
	size_t i;

	rp_buf_init(&b, 0);
	while (*p) {
		if (p[0] == '-' && p[1] == '-') {
			size_t n = strcspn(p, "\n");

			rp_buf_append(&b, p, n);
			p += n;
			continue;
		}
		if (*p == '\'') {
			const char *q = quoted_end(p);

			rp_buf_append(&b, p, (size_t)(q - p));
			p = q;
			continue;
		}
		/* Triggers are SQLite's (0004 made three, 0012 dropped them: store_commit counts
		 * what they counted); PostgreSQL never has them. */
		if (word_at(sql, p, "CREATE TRIGGER") || word_at(sql, p, "DROP TRIGGER")) {
			const char *end = strstr(p, p[0] == 'C' ? "END;" : ";");

			p = end ? end + (p[0] == 'C' ? 4 : 1) : p + strlen(p);
			continue;
		}
		for (i = 0; i < sizeof types / sizeof *types; i++)
			if (word_at(sql, p, types[i].from) &&
			    (!types[i].of_id || column_is_id(sql, p)))
				break;
		if (i < sizeof types / sizeof *types) {
			rp_buf_append(&b, types[i].to, strlen(types[i].to));
			p += strlen(types[i].from);
			continue;
		}
		rp_buf_append(&b, p, 1);
		p++;
	}
	return text_of(&b);
}

/* ---- Connections ------------------------------------------------------------------------- */

static void
notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* "relation already exists, skipping" and the like: not for the log */
}

static PGconn *
connect_to(const char *target, char *why, size_t whylen)
{
	PGconn *h = PQconnectdb(target);

	if (h == NULL) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	if (PQstatus(h) != CONNECTION_OK) {
		/* libpq's message names the host and the user, never the password. */
		snprintf(why, whylen, "cannot connect to PostgreSQL: %s", PQerrorMessage(h));
		why[strcspn(why, "\n")] = '\0';
		PQfinish(h);
		return NULL;
	}
	PQsetNoticeProcessor(h, notice, NULL);
	return h;
}

/* Settings every connection runs with: UTC, and a statement that waits for a lock longer
 * than SQLite's busy handler would is an error, not a hang. */
static int
session(struct sql_db *db, char *why, size_t whylen)
{
	if (run(db, "SET TIME ZONE 'UTC'; SET lock_timeout = '10s'") != SQL_OK) {
		snprintf(why, whylen, "%.*s", (int)(whylen > 0 ? whylen - 1 : 0), db->err);
		return -1;
	}
	return 0;
}

static void
pg_close(struct sql_db *db)
{
	if (db == NULL)
		return;
	PQfinish(db->h);
	if (db->target) {
		explicit_bzero(db->target, strlen(db->target));
		free(db->target);
	}
	free(db);
}

static struct sql_db *
pg_open(const char *target, char *why, size_t whylen)
{
	struct sql_db *db = calloc(1, sizeof *db);

	if (db == NULL || (db->target = strdup(target)) == NULL) {
		snprintf(why, whylen, "out of memory");
		pg_close(db);
		return NULL;
	}
	db->epoch = 1;
	if ((db->h = connect_to(target, why, whylen)) == NULL || session(db, why, whylen) < 0) {
		pg_close(db);
		return NULL;
	}
	return db;
}

/* A connection the server dropped (a restart, a failover) is made again between
 * transactions; statements prepared on the old one prepare again when next used. */
static int
alive(struct sql_db *db)
{
	char why[256];

	if (PQstatus(db->h) == CONNECTION_OK)
		return 0;
	if (PQtransactionStatus(db->h) != PQTRANS_IDLE &&
	    PQtransactionStatus(db->h) != PQTRANS_UNKNOWN)
		return -1;
	PQreset(db->h);
	if (PQstatus(db->h) != CONNECTION_OK || session(db, why, sizeof why) < 0) {
		fail(db, NULL);
		return -1;
	}
	db->epoch++;
	rp_log_warn("store: reconnected to PostgreSQL");
	return 0;
}

static int
pg_setup(struct sql_db *db, char *why, size_t whylen)
{
	PGresult *r = PQexec(db->h, "SHOW server_version_num");
	long v = 0;

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (v < 130000) {
		snprintf(why, whylen, "PostgreSQL 13 or later is needed (the server is %ld)", v);
		return -1;
	}
	return 0;
}

static int
pg_exec(struct sql_db *db, const char *sql, char *why, size_t whylen)
{
	int rc = alive(db) < 0 ? SQL_IOERR : run(db, sql);

	if (rc != SQL_OK && why)
		snprintf(why, whylen, "%.*s", (int)(whylen > 0 ? whylen - 1 : 0), db->err);
	return rc;
}

/* ---- Statements ------------------------------------------------------------------------- */

/* SQLite's last_insert_rowid has no PostgreSQL twin that is safe in a transaction (lastval
 * fails, and so aborts the transaction, before any sequence was used): an INSERT into a
 * table with an identity column returns it, and the step keeps it as last_id. */
static int
returning_id(struct sql_db *db, struct pg_stmt *s)
{
	const char *p = s->sql, *values;
	char table[64], *text;
	const char *params[1];
	PGresult *r;
	int has, n;

	while (isspace((unsigned char)*p))
		p++;
	if (strncasecmp(p, "INSERT INTO ", 12) != 0 || strcasestr(p, "RETURNING") != NULL)
		return 0;
	p += 12;
	n = (int)strcspn(p, " (");
	if (n <= 0 || n >= (int)sizeof table)
		return 0;
	snprintf(table, sizeof table, "%.*s", n, p);
	params[0] = table;
	r = PQexecParams(db->h,
	                 "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
	                 "to_regclass($1) AND attname = 'id' AND attidentity <> '')",
	                 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		fail(db, r);
		PQclear(r);
		return -1;
	}
	has = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!has)
		return 0;
	values = s->sql;
	n = (int)strlen(values);
	while (n > 0 && (isspace((unsigned char)values[n - 1]) || values[n - 1] == ';'))
		n--;
	if (asprintf(&text, "%.*s RETURNING id", n, values) < 0) {
		snprintf(db->err, sizeof db->err, "out of memory");
		return -1;
	}
	free(s->sql);
	s->sql = text;
	s->returns_id = 1;
	return 0;
}

/* The type a parameter bound as kind k is sent as, when PostgreSQL cannot type it. */
static Oid
oid_of(char k)
{
	return k == 'i' ? OID_INT8 : k == 'r' ? OID_FLOAT8 : k == 'b' ? OID_BYTEA : OID_TEXT;
}

/* PostgreSQL types each parameter from where it stands. One it cannot type (it is only
 * compared with IS NULL, say, or not used at all) is given the type of the value bound to
 * it, as SQLite would compare that value; a NULL is tried as text, then as an integer, then
 * as a real, until the statement prepares. Prepared at the first step, when the values are
 * known, and again when a value of another type comes for a parameter typed that way. A
 * prepare that fails inside a transaction would abort it, so there it runs under a
 * savepoint. */
static int
prepare_on_server(struct pg_stmt *s)
{
	struct sql_db *db = s->db;
	int txn = PQtransactionStatus(db->h) == PQTRANS_INTRANS, tries, i, last = 0;
	PGresult *r = NULL;

	if (s->epoch == db->epoch) {
		char sql[48];

		snprintf(sql, sizeof sql, "DEALLOCATE %s", s->name);
		PQclear(PQexec(db->h, sql));
	}
	s->epoch = 0;
	for (i = 0; i < s->nparams; i++)
		if (s->ours[i])
			s->types[i] = 0;
	if (!s->id_checked) {
		if (returning_id(db, s) < 0)
			return -1;
		s->id_checked = 1;
	}
	snprintf(s->name, sizeof s->name, "rp%u", ++db->names);
	if (txn && run(db, "SAVEPOINT rp_prepare") != SQL_OK)
		return -1;
	for (tries = 0; tries <= 3 * s->nparams + 1; tries++) {
		const char *code, *at;
		long k;

		PQclear(r);
		r = PQprepare(db->h, s->name, s->sql, s->nparams, s->types);
		if (PQresultStatus(r) == PGRES_COMMAND_OK)
			break;
		if (txn && run(db, "ROLLBACK TO SAVEPOINT rp_prepare") != SQL_OK)
			break;
		code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		at = strstr(PQresultErrorMessage(r), "parameter $");
		if (code == NULL)
			break;
		/* indeterminate_datatype, or ambiguous_parameter as a protocol-level prepare
		 * reports it: type the parameter by its value. */
		if ((!strcmp(code, "42P18") || !strcmp(code, "42P08")) && at &&
		    (k = strtol(at + 11, NULL, 10)) >= 1 && k <= s->nparams && !s->ours[k - 1]) {
			s->types[k - 1] = oid_of(s->kind[k - 1]);
			s->ours[k - 1] = 1;
			last = (int)k;
			continue;
		}
		/* undefined_function or datatype_mismatch after typing a NULL as text: the next
		 * guess. */
		if ((!strcmp(code, "42883") || !strcmp(code, "42804")) && last &&
		    s->kind[last - 1] == 'n' && s->types[last - 1] != OID_FLOAT8) {
			s->types[last - 1] = s->types[last - 1] == OID_TEXT ? OID_INT8 : OID_FLOAT8;
			continue;
		}
		break;
	}
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fail(db, r);
		PQclear(r);
		if (txn)
			PQclear(PQexec(db->h, "RELEASE SAVEPOINT rp_prepare"));
		return -1;
	}
	PQclear(r);
	if (txn && run(db, "RELEASE SAVEPOINT rp_prepare") != SQL_OK)
		return -1;
	PQclear(s->desc);
	s->desc = PQdescribePrepared(db->h, s->name);
	if (PQresultStatus(s->desc) != PGRES_COMMAND_OK) {
		fail(db, s->desc);
		PQclear(s->desc);
		s->desc = NULL;
		return -1;
	}
	s->epoch = db->epoch;
	return 0;
}

static void
unbind(struct pg_stmt *s, int i)
{
	free(s->val[i]);
	s->val[i] = NULL;
	s->len[i] = 0;
	s->fmt[i] = 0;
	s->kind[i] = 'n';
}

static void
pg_finalize(struct stmt *st)
{
	struct pg_stmt *s = P(st);
	int i;

	if (s == NULL)
		return;
	if (s->epoch == s->db->epoch && PQstatus(s->db->h) == CONNECTION_OK) {
		char sql[48];

		snprintf(sql, sizeof sql, "DEALLOCATE %s", s->name);
		PQclear(PQexec(s->db->h, sql));
	}
	for (i = 0; i < s->nparams; i++)
		free(s->val[i]);
	free(s->val);
	free(s->len);
	free(s->fmt);
	free(s->types);
	free(s->kind);
	free(s->ours);
	PQclear(s->desc);
	PQclear(s->res);
	free(s->blob);
	free(s->sql);
	free(s);
}

static struct stmt *
pg_prepare(struct sql_db *db, const char *sql)
{
	struct pg_stmt *s = calloc(1, sizeof *s);
	uint64_t used = 0;
	int n = 0, i;

	if (s == NULL || (s->sql = translate(sql, &n, &used)) == NULL) {
		free(s);
		snprintf(db->err, sizeof db->err, "out of memory");
		return NULL;
	}
	s->base.drv = self();
	s->db = db;
	s->nparams = n;
	s->reads = strncasecmp(sql + strspn(sql, " \t\n"), "SELECT", 6) == 0;
	s->blob_row = -1;
	if (n > 0 &&
	    ((s->val = calloc((size_t)n, sizeof *s->val)) == NULL ||
	     (s->len = calloc((size_t)n, sizeof *s->len)) == NULL ||
	     (s->fmt = calloc((size_t)n, sizeof *s->fmt)) == NULL ||
	     (s->types = calloc((size_t)n, sizeof *s->types)) == NULL ||
	     (s->kind = malloc((size_t)n)) == NULL || (s->ours = calloc((size_t)n, 1)) == NULL)) {
		snprintf(db->err, sizeof db->err, "out of memory");
		pg_finalize(&s->base);
		return NULL;
	}
	if (n > 0)
		memset(s->kind, 'n', (size_t)n);
	/* A number the text skips is bound all the same; nothing types it. */
	for (i = 0; i < n && i < 64; i++)
		if (!(used & (1ULL << i))) {
			s->types[i] = OID_TEXT;
			s->kind[i] = 't';
		}
	/* Prepared on the server at its first step (prepare_on_server): the values bound
	 * then type what PostgreSQL cannot, and a server that is away then is an I/O error
	 * of that step, which the store reports as such (503), not a broken statement. */
	return &s->base;
}

static void
pg_reset(struct stmt *st)
{
	struct pg_stmt *s = P(st);

	PQclear(s->res);
	s->res = NULL;
	s->row = s->nrows = 0;
	s->blob_row = -1;
}

static void
pg_clear(struct stmt *st)
{
	struct pg_stmt *s = P(st);
	int i;

	for (i = 0; i < s->nparams; i++)
		unbind(s, i);
}

/* Keep a copy of len bytes of v as parameter i (1-based), a value of kind k (sent in binary
 * for a blob). */
static void
bind(struct stmt *st, int i, const void *v, size_t len, char k)
{
	struct pg_stmt *s = P(st);

	if (i < 1 || i > s->nparams)
		return;
	unbind(s, i - 1);
	s->kind[i - 1] = v ? k : 'n';
	if (v == NULL)
		return;
	if ((s->val[i - 1] = malloc(len + 1)) == NULL) {
		/* Sent as NULL; the step that follows would store the wrong thing, so it fails. */
		s->len[i - 1] = -1;
		return;
	}
	memcpy(s->val[i - 1], v, len);
	s->val[i - 1][len] = '\0';
	s->len[i - 1] = (int)len;
	s->fmt[i - 1] = k == 'b';
}

static void
pg_bind_int(struct stmt *s, int i, int64_t v)
{
	char text[24];

	bind(s, i, text, (size_t)snprintf(text, sizeof text, "%" PRId64, v), 'i');
}

static void
pg_bind_real(struct stmt *s, int i, double v)
{
	char text[32];

	bind(s, i, text, (size_t)snprintf(text, sizeof text, "%.17g", v), 'r');
}

static void
pg_bind_text(struct stmt *s, int i, const char *v, size_t len)
{
	bind(s, i, v ? v : "", len, 't');
}

static void
pg_bind_blob(struct stmt *s, int i, const void *v, size_t len)
{
	bind(s, i, v ? v : "", len, 'b');
}

static void
pg_bind_null(struct stmt *s, int i)
{
	bind(s, i, NULL, 0, 'n');
}

/* Must s be prepared (again) before it runs with the values bound now? */
static int
retype(struct pg_stmt *s)
{
	int i;

	if (s->epoch != s->db->epoch)
		return 1;
	for (i = 0; i < s->nparams; i++)
		if (s->ours[i] && s->kind[i] != 'n' && oid_of(s->kind[i]) != s->types[i])
			return 1;
	return 0;
}

static int
pg_step(struct stmt *st)
{
	struct pg_stmt *s = P(st);
	struct sql_db *db = s->db;
	ExecStatusType status;
	int i, attempt;

	if (s->res == NULL) {
		for (i = 0; i < s->nparams; i++)
			if (s->len[i] < 0) {
				snprintf(db->err, sizeof db->err, "out of memory binding a value");
				return SQL_NOMEM;
			}
		for (attempt = 0;; attempt++) {
			/* A read outside a transaction that found the connection gone (ended by
			 * the server since its last use) runs once more on a new one; a write
			 * may have run before its answer was lost, so it reports the error. */
			int again = attempt == 0 && s->reads &&
			            PQtransactionStatus(db->h) == PQTRANS_IDLE;
			int rc;

			if (alive(db) < 0)
				return SQL_IOERR;
			if (retype(s) && prepare_on_server(s) < 0) {
				if (PQstatus(db->h) == CONNECTION_BAD && again)
					continue;
				if (PQstatus(db->h) == CONNECTION_BAD)
					return SQL_IOERR;
				rp_log_error("store: PostgreSQL refused a statement: %s: %.3000s",
				             db->err, s->sql);
				return SQL_ERROR;
			}
			s->res = PQexecPrepared(db->h, s->name, s->nparams,
			                        (const char *const *)s->val, s->len, s->fmt, 0);
			status = PQresultStatus(s->res);
			if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)
				break;
			rc = fail(db, s->res);
			PQclear(s->res);
			s->res = NULL;
			if (rc == SQL_IOERR && again && PQstatus(db->h) == CONNECTION_BAD)
				continue;
			return rc;
		}
		ok(db);
		s->nrows = status == PGRES_TUPLES_OK ? PQntuples(s->res) : 0;
		s->row = -1;
		if (s->returns_id) {
			if (s->nrows > 0)
				db->last_id =
				        strtoll(PQgetvalue(s->res, s->nrows - 1, 0), NULL, 10);
			s->nrows = 0;
		}
		db->changes = strtoll(PQcmdTuples(s->res), NULL, 10);
		/* A SELECT's count is of rows read, not changed. */
		if (!strncmp(PQcmdStatus(s->res), "SELECT", 6))
			db->changes = 0;
		db->total += db->changes;
	}
	if (s->row + 1 < s->nrows) {
		s->row++;
		return SQL_ROW;
	}
	s->row = s->nrows;
	return SQL_DONE;
}

static int
pg_column_count(struct stmt *s)
{
	return P(s)->desc ? PQnfields(P(s)->desc) : 0;
}

static const char *
pg_column_name(struct stmt *s, int i)
{
	return PQfname(P(s)->desc, i);
}

static int
has_value(struct pg_stmt *s, int i)
{
	return s->res && s->row >= 0 && s->row < s->nrows && !PQgetisnull(s->res, s->row, i);
}

static enum sql_type
pg_column_type(struct stmt *st, int i)
{
	struct pg_stmt *s = P(st);
	const char *v;

	if (!has_value(s, i))
		return SQL_NULL;
	switch (PQftype(s->res, i)) {
	case OID_BOOL:
	case OID_INT2:
	case OID_INT4:
	case OID_INT8:
		return SQL_INT;
	case OID_FLOAT4:
	case OID_FLOAT8:
		return SQL_REAL;
	case OID_NUMERIC:
		/* sum() of integers is numeric: an integer, as SQLite gives it. */
		v = PQgetvalue(s->res, s->row, i);
		return strpbrk(v, ".eEN") ? SQL_REAL : SQL_INT;
	case OID_BYTEA:
		return SQL_BLOB;
	default:
		return SQL_TEXT;
	}
}

static int64_t
pg_column_int(struct stmt *st, int i)
{
	struct pg_stmt *s = P(st);
	const char *v;

	if (!has_value(s, i))
		return 0;
	v = PQgetvalue(s->res, s->row, i);
	if (PQftype(s->res, i) == OID_BOOL)
		return v[0] == 't';
	if (PQftype(s->res, i) == OID_NUMERIC || PQftype(s->res, i) == OID_FLOAT8 ||
	    PQftype(s->res, i) == OID_FLOAT4)
		return (int64_t)strtod(v, NULL);
	return strtoll(v, NULL, 10);
}

static double
pg_column_real(struct stmt *st, int i)
{
	struct pg_stmt *s = P(st);

	if (!has_value(s, i))
		return 0;
	if (PQftype(s->res, i) == OID_BOOL)
		return PQgetvalue(s->res, s->row, i)[0] == 't';
	return strtod(PQgetvalue(s->res, s->row, i), NULL);
}

static const char *
pg_column_text(struct stmt *st, int i)
{
	struct pg_stmt *s = P(st);

	if (!has_value(s, i))
		return NULL;
	if (PQftype(s->res, i) == OID_BOOL)
		return PQgetvalue(s->res, s->row, i)[0] == 't' ? "1" : "0";
	return PQgetvalue(s->res, s->row, i);
}

/* A bytea value, decoded from its text form once per row and column asked. */
static const unsigned char *
blob(struct pg_stmt *s, int i)
{
	if (s->blob_row == s->row && s->blob_col == i)
		return s->blob;
	free(s->blob);
	s->blob =
	        PQunescapeBytea((const unsigned char *)PQgetvalue(s->res, s->row, i), &s->blob_len);
	if (s->blob == NULL)
		s->blob_len = 0;
	s->blob_row = s->row;
	s->blob_col = i;
	return s->blob;
}

static const void *
pg_column_blob(struct stmt *st, int i)
{
	struct pg_stmt *s = P(st);

	if (!has_value(s, i))
		return NULL;
	if (PQftype(s->res, i) == OID_BYTEA)
		return blob(s, i);
	return PQgetvalue(s->res, s->row, i);
}

static size_t
pg_column_bytes(struct stmt *st, int i)
{
	struct pg_stmt *s = P(st);

	if (!has_value(s, i))
		return 0;
	if (PQftype(s->res, i) == OID_BYTEA)
		return blob(s, i) ? s->blob_len : 0;
	if (PQftype(s->res, i) == OID_BOOL)
		return 1;
	return (size_t)PQgetlength(s->res, s->row, i);
}

/* ---- Transactions ----------------------------------------------------------------------- */

static int
pg_in_txn(struct sql_db *db)
{
	PGTransactionStatusType t = PQtransactionStatus(db->h);

	return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

static void
pg_rollback(struct sql_db *db)
{
	if (pg_in_txn(db))
		PQclear(PQexec(db->h, "ROLLBACK"));
}

static int
pg_begin(struct sql_db *db, enum sql_txn kind)
{
	char sql[200];
	int rc;

	if (alive(db) < 0)
		return SQL_IOERR;
	if (kind == TXN_READ)
		snprintf(sql, sizeof sql, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	/* NOTIFY is part of the transaction: the other servers hear of it when, and only if, it
	 * commits (pg_listen), in the same round trip as the BEGIN. */
	else if (kind == TXN_WRITE)
		snprintf(sql, sizeof sql,
		         "BEGIN; SELECT pg_advisory_xact_lock(%lld); NOTIFY " CHANNEL,
		         (long long)LOCK_WRITE);
	/* Claims share the write lock: they exclude every other writer (whose reads then
	 * writes assume nobody writes beside them) but not each other; between them, the rows
	 * each one's SELECT … FOR UPDATE SKIP LOCKED locks decide, and jobs_one_mutating
	 * (schema 0002) stands behind that. */
	else if (kind == TXN_CLAIM)
		snprintf(sql, sizeof sql,
		         "BEGIN; SELECT pg_advisory_xact_lock_shared(%lld); NOTIFY " CHANNEL,
		         (long long)LOCK_WRITE);
	else
		snprintf(sql, sizeof sql,
		         "BEGIN; SELECT pg_advisory_xact_lock(%lld); SELECT "
		         "pg_advisory_xact_lock(%lld); NOTIFY " CHANNEL,
		         (long long)LOCK_SCHEMA, (long long)LOCK_WRITE);
	rc = run(db, sql);
	/* The server dropped the connection since its last use (a restart, a failover, an idle
	 * timeout): nothing of this transaction has run yet, so make the connection again and
	 * begin once more. */
	if (rc == SQL_IOERR && PQstatus(db->h) == CONNECTION_BAD && alive(db) == 0)
		rc = run(db, sql);
	if (rc != SQL_OK)
		pg_rollback(db);
	return rc;
}

static int
pg_commit(struct sql_db *db)
{
	PGresult *r = PQexec(db->h, "COMMIT");
	int rc = SQL_OK;

	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = fail(db, r);
	else if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
		/* COMMIT of a transaction an error aborted answers ROLLBACK. */
		snprintf(db->err, sizeof db->err,
		         "the transaction was rolled back: an earlier "
		         "statement in it failed");
		rc = SQL_ERROR;
	}
	PQclear(r);
	return rc;
}

static int64_t
pg_changes(struct sql_db *db)
{
	return db->changes;
}

static int64_t
pg_total_changes(struct sql_db *db)
{
	return db->total;
}

static int64_t
pg_last_id(struct sql_db *db)
{
	return db->last_id;
}

static const char *
pg_errmsg(struct sql_db *db)
{
	return db->err[0] ? db->err : PQerrorMessage(db->h);
}

static int
pg_sys_errno(struct sql_db *db)
{
	(void)db;
	return 0;
}

/* The leader of the servers that share the database: a session lock on a connection kept
 * open for as long as it leads; it dies with the server's connection, so a crash never
 * leaves it held. */
static int
pg_hold(struct sql_db *db, char *why, size_t whylen)
{
	char sql[80];
	PGresult *r;
	int held;

	snprintf(sql, sizeof sql, "SELECT pg_try_advisory_lock(%lld)", (long long)LOCK_SERVER);
	r = PQexec(db->h, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		fail(db, r);
		snprintf(why, whylen, "cannot lock the database: %s", db->err);
		PQclear(r);
		return -1;
	}
	held = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!held) {
		snprintf(why, whylen, "another rackpilotd leads the servers of this database");
		return -1;
	}
	return 0;
}

static int
pg_listen(struct sql_db *db)
{
	return run(db, "LISTEN " CHANNEL) == SQL_OK ? 0 : -1;
}

static int
pg_wait(struct sql_db *db, int timeout_ms)
{
	struct pollfd p = {.fd = PQsocket(db->h), .events = POLLIN};
	PGnotify *n;
	int heard = 0;

	if (p.fd < 0 || PQstatus(db->h) != CONNECTION_OK)
		return -1;
	if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
		return -1;
	if (PQconsumeInput(db->h) == 0)
		return -1;
	while ((n = PQnotifies(db->h)) != NULL) {
		heard = 1;
		PQfreemem(n);
	}
	return heard;
}

static int64_t
pg_size(struct sql_db *db)
{
	PGresult *r = PQexec(db->h, "SELECT pg_database_size(current_database())");
	int64_t n = -1;

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return n;
}

static int
pg_readonly(struct sql_db *db)
{
	(void)db;
	return 0;
}

static int
pg_idle(struct sql_db *db)
{
	return PQtransactionStatus(db->h) == PQTRANS_IDLE;
}

/* The version lives in a table of its own (SQLite's is PRAGMA user_version). Whether the
 * table exists is read from pg_class itself, not with to_regclass: that answers from the
 * session's catalog cache, which inside a transaction begun before another server's
 * migrations committed (one waiting on the schema lock) still says "no such table", and the
 * waiting server would then apply every migration again. */
static int
pg_schema_version(struct sql_db *db)
{
	PGresult *r = PQexec(db->h, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN "
	                            "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
	                            "c.relname = 'rp_schema_version' AND n.nspname = "
	                            "current_schema())");
	int v = -1;

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
		v = 0;
		if (PQgetvalue(r, 0, 0)[0] == 't') {
			PQclear(r);
			r = PQexec(db->h,
			           "SELECT coalesce(max(version), 0) FROM rp_schema_version");
			v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
			            ? (int)strtol(PQgetvalue(r, 0, 0), NULL, 10)
			            : -1;
		}
	}
	if (v < 0)
		fail(db, r);
	PQclear(r);
	return v;
}

static int
pg_set_schema_version(struct sql_db *db, int v, char *why, size_t whylen)
{
	char sql[200];
	int rc;

	snprintf(sql, sizeof sql,
	         "CREATE TABLE IF NOT EXISTS rp_schema_version (version BIGINT NOT NULL); "
	         "DELETE FROM rp_schema_version; INSERT INTO rp_schema_version VALUES (%d)",
	         v);
	if ((rc = run(db, sql)) != SQL_OK)
		snprintf(why, whylen, "cannot record schema version %d: %s", v, db->err);
	return rc;
}

/* Old row versions of a rewritten secret stay in the table's pages until VACUUM reclaims
 * them, which SQL inside a transaction cannot force; they hold sealed values only (the
 * clear-text column is emptied, not kept), so there is nothing to zero here. */
static void
pg_begin_scrub(struct sql_db *db)
{
	(void)db;
}

static void
pg_end_scrub(struct sql_db *db, int committed, int with_vacuum)
{
	(void)with_vacuum;
	if (committed)
		rp_log_info("secrets: replaced values leave PostgreSQL's pages at its next VACUUM");
	(void)db;
}

/* "postgresql://user@host:port/dbname" from any connection string libpq takes, without
 * its password (and without anything else but those four). */
static void
pg_describe(const char *target, char *buf, size_t len)
{
	PQconninfoOption *o = PQconninfoParse(target, NULL), *x;
	const char *user = "", *host = "", *port = "", *db = "";

	for (x = o; x && x->keyword; x++) {
		if (x->val == NULL)
			continue;
		if (!strcmp(x->keyword, "user"))
			user = x->val;
		else if (!strcmp(x->keyword, "host"))
			host = x->val;
		else if (!strcmp(x->keyword, "port"))
			port = x->val;
		else if (!strcmp(x->keyword, "dbname"))
			db = x->val;
	}
	snprintf(buf, len, "postgresql://%s%s%s%s%s/%s", user, *user ? "@" : "", host,
	         *port ? ":" : "", port, db);
	if (o == NULL)
		snprintf(buf, len, "postgresql (a connection string libpq cannot parse)");
	PQconninfoFree(o);
}

const struct sql_driver rp_sql_pg = {
        .name = "postgresql",
        .skip_locked = 1,
        .describe = pg_describe,
        .open = pg_open,
        .setup = pg_setup,
        .close = pg_close,
        .exec = pg_exec,
        .ddl = pg_ddl,
        .prepare = pg_prepare,
        .finalize = pg_finalize,
        .reset = pg_reset,
        .clear = pg_clear,
        .bind_int = pg_bind_int,
        .bind_real = pg_bind_real,
        .bind_text = pg_bind_text,
        .bind_blob = pg_bind_blob,
        .bind_null = pg_bind_null,
        .step = pg_step,
        .column_count = pg_column_count,
        .column_name = pg_column_name,
        .column_type = pg_column_type,
        .column_int = pg_column_int,
        .column_real = pg_column_real,
        .column_text = pg_column_text,
        .column_blob = pg_column_blob,
        .column_bytes = pg_column_bytes,
        .begin = pg_begin,
        .commit = pg_commit,
        .rollback = pg_rollback,
        .in_txn = pg_in_txn,
        .changes = pg_changes,
        .total_changes = pg_total_changes,
        .last_id = pg_last_id,
        .errmsg = pg_errmsg,
        .sys_errno = pg_sys_errno,
        .hold = pg_hold,
        .listen = pg_listen,
        .wait = pg_wait,
        .sql_tables = "SELECT c.relname, p.relname FROM pg_class c JOIN pg_namespace s ON s.oid "
                      "= c.relnamespace LEFT JOIN pg_constraint k ON k.conrelid = c.oid AND "
                      "k.contype = 'f' LEFT JOIN pg_class p ON p.oid = k.confrelid WHERE "
                      "s.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> "
                      "'rp_schema_version' ORDER BY c.oid",
        .sql_after_copy = "SELECT setval(pg_get_serial_sequence('{t}', 'id'), max(id)) FROM {t} "
                          "HAVING max(id) IS NOT NULL",
        .size = pg_size,
        .readonly = pg_readonly,
        .idle = pg_idle,
        .schema_version = pg_schema_version,
        .set_schema_version = pg_set_schema_version,
        .begin_scrub = pg_begin_scrub,
        .end_scrub = pg_end_scrub,
};

static const struct sql_driver *
self(void)
{
	return &rp_sql_pg;
}
