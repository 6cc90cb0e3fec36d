/* rackpilotd --migrate-to: every table of one database copied into another, empty one (a
 * SQLite site moving to PostgreSQL), in one transaction, and verified by its row counts and a
 * checksum of its rows on both sides before it commits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
store_tables(struct conn *c, struct table **out, int *n, char *why, size_t whylen)
{
	struct stmt *s = c->drv->prepare(c->db, c->drv->sql_tables);
	struct table *t = NULL, *ordered = NULL;
	int count = 0, cap = 0, done = 0, i, j, k, rc;
	enum rp_err e = RP_ERR_INTERNAL;

	if (s == NULL) {
		snprintf(why, whylen, "cannot list the tables: %s", c->drv->errmsg(c->db));
		goto out;
	}
	while ((rc = sql_step(s)) == SQL_ROW) {
		const char *name = sql_text(s, 0), *ref = sql_text(s, 1);

		if (count == 0 || strcmp(t[count - 1].name, name) != 0) {
			if (count == cap) {
				struct table *m = realloc(t, (size_t)(cap += 32) * sizeof *t);

				if (m == NULL)
					goto out;
				t = m;
			}
			memset(&t[count], 0, sizeof *t);
			snprintf(t[count].name, sizeof t[count].name, "%s", name);
			count++;
		}
		if (ref && strcmp(ref, name) != 0 && t[count - 1].nrefs < 16)
			snprintf(t[count - 1].refs[t[count - 1].nrefs++], sizeof t->refs[0], "%s",
			         ref);
	}
	if (rc != SQL_DONE) {
		snprintf(why, whylen, "cannot list the tables: %s", c->drv->errmsg(c->db));
		goto out;
	}
	if ((ordered = calloc((size_t)(count ? count : 1), sizeof *ordered)) == NULL)
		goto out;
	/* Kahn's order: place what references only placed tables, until all are placed. */
	while (done < count) {
		int progress = 0;

		for (i = 0; i < count; i++) {
			int ready = !t[i].placed;

			for (j = 0; ready && j < t[i].nrefs; j++)
				for (k = 0; k < count; k++)
					if (!strcmp(t[k].name, t[i].refs[j]) && !t[k].placed)
						ready = 0;
			if (ready) {
				t[i].placed = 1;
				ordered[done++] = t[i];
				progress = 1;
			}
		}
		if (!progress) {
			snprintf(why, whylen, "the tables' foreign keys make a circle");
			goto out;
		}
	}
	*out = ordered;
	*n = count;
	ordered = NULL;
	e = RP_ERR_OK;
out:
	c->drv->finalize(s);
	free(t);
	free(ordered);
	return e;
}

/* The columns of the current row of s, as a value's type and bytes, into b: what both
 * databases must hold alike, whatever text each writes a number as. */
static void
row_text(struct stmt *s, int ncols, struct rp_buf *b)
{
	int i;

	b->len = 0;
	for (i = 0; i < ncols; i++) {
		switch (sql_type(s, i)) {
		case SQL_NULL:
			rp_buf_append(b, "n;", 2);
			break;
		case SQL_INT:
			rp_buf_printf(b, "i%lld;", (long long)sql_int(s, i));
			break;
		case SQL_REAL:
			rp_buf_printf(b, "r%.17g;", sql_real(s, i));
			break;
		default:
			rp_buf_printf(b, "%c%zu:", sql_type(s, i) == SQL_BLOB ? 'b' : 't',
			              sql_bytes(s, i));
			rp_buf_append(b,
			              sql_type(s, i) == SQL_BLOB ? sql_blob(s, i) : sql_text(s, i),
			              sql_bytes(s, i));
			rp_buf_append(b, ";", 1);
			break;
		}
	}
}

enum rp_err
store_sum_table(struct conn *c, const char *table, int64_t *rows, uint64_t *sum, char *why,
                size_t whylen)
{
	char sql[128], hex[RP_SHA256_HEX];
	struct stmt *s;
	struct rp_buf b;
	uint64_t total = 0;
	int64_t n = 0;
	int rc;

	snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", table);
	if ((s = c->drv->prepare(c->db, sql)) == NULL) {
		snprintf(why, whylen, "%s: %s", table, c->drv->errmsg(c->db));
		return RP_ERR_INTERNAL;
	}
	rp_buf_init(&b, 0);
	while ((rc = sql_step(s)) == SQL_ROW) {
		row_text(s, c->drv->column_count(s), &b);
		rp_sha256_hex(b.data ? b.data : "", b.len, hex);
		hex[16] = '\0';
		total += strtoull(hex, NULL, 16);
		n++;
	}
	rp_buf_free(&b);
	if (rc != SQL_DONE)
		snprintf(why, whylen, "reading %s: %s", table, c->drv->errmsg(c->db));
	c->drv->finalize(s);
	if (rc != SQL_DONE)
		return RP_ERR_INTERNAL;
	*rows = n;
	*sum = total;
	return RP_ERR_OK;
}

/* Copy the rows of table from src into dst (in dst's open transaction). */
static enum rp_err
copy_table(struct conn *src, struct conn *dst, const char *table, int *has_id, char *why,
           size_t whylen)
{
	char sql[128];
	struct stmt *from, *to = NULL;
	struct rp_buf ins;
	enum rp_err e = RP_ERR_INTERNAL;
	int ncols, i, rc;

	snprintf(sql, sizeof sql, "SELECT * FROM %s", table);
	if ((from = src->drv->prepare(src->db, sql)) == NULL) {
		snprintf(why, whylen, "%s: %s", table, src->drv->errmsg(src->db));
		return RP_ERR_INTERNAL;
	}
	/* The columns are known once the statement ran (a driver may prepare it then). */
	rc = sql_step(from);
	ncols = src->drv->column_count(from);
	*has_id = 0;
	rp_buf_init(&ins, 0);
	rp_buf_printf(&ins, "INSERT INTO %s (", table);
	for (i = 0; i < ncols; i++) {
		rp_buf_printf(&ins, "%s\"%s\"", i ? ", " : "", src->drv->column_name(from, i));
		*has_id |= !strcmp(src->drv->column_name(from, i), "id");
	}
	rp_buf_printf(&ins, ") VALUES (");
	for (i = 0; i < ncols; i++)
		rp_buf_printf(&ins, "%s?%d", i ? ", " : "", i + 1);
	rp_buf_printf(&ins, ")");
	if (ins.oom || rp_buf_append(&ins, "", 1) < 0 ||
	    (to = dst->drv->prepare(dst->db, ins.data)) == NULL) {
		snprintf(why, whylen, "%s: %s", table,
		         ins.oom ? "out of memory" : dst->drv->errmsg(dst->db));
		goto out;
	}
	for (; rc == SQL_ROW; rc = sql_step(from)) {
		dst->drv->reset(to);
		for (i = 0; i < ncols; i++) {
			switch (sql_type(from, i)) {
			case SQL_NULL:
				sql_bind_null(to, i + 1);
				break;
			case SQL_INT:
				sql_bind_int(to, i + 1, sql_int(from, i));
				break;
			case SQL_REAL:
				sql_bind_real(to, i + 1, sql_real(from, i));
				break;
			case SQL_BLOB:
				sql_bind_blob(to, i + 1, sql_blob(from, i), sql_bytes(from, i));
				break;
			default:
				sql_bind_textn(to, i + 1, sql_text(from, i), sql_bytes(from, i));
				break;
			}
		}
		if (sql_step(to) != SQL_DONE) {
			snprintf(why, whylen, "copying a row of %s: %s", table,
			         dst->drv->errmsg(dst->db));
			goto out;
		}
	}
	if (rc != SQL_DONE) {
		snprintf(why, whylen, "reading %s: %s", table, src->drv->errmsg(src->db));
		goto out;
	}
	e = RP_ERR_OK;
out:
	src->drv->finalize(from);
	dst->drv->finalize(to);
	rp_buf_free(&ins);
	return e;
}

enum rp_err
rp_store_copy(struct rp_store *src, struct rp_store *dst, json_t **report, char *why, size_t whylen)
{
	STORE_HOLD(src);
	STORE_HOLD(dst);
	struct conn *from = store_conn(src), *to = store_conn(dst);
	struct table *t = NULL;
	json_t *list = NULL;
	enum rp_err e;
	int n = 0, i;
	int64_t total = 0;

	if (from == NULL || to == NULL) {
		snprintf(why, whylen, "cannot connect to both databases");
		return RP_ERR_INTERNAL;
	}
	if (src->version != dst->version) {
		snprintf(why, whylen, "schema versions differ (%d and %d)", src->version,
		         dst->version);
		return RP_ERR_CONFLICT;
	}
	if ((e = store_tables(from, &t, &n, why, whylen)) != RP_ERR_OK)
		return e;
	if ((e = store_begin(to)) != RP_ERR_OK) {
		snprintf(why, whylen, "cannot begin on %s", dst->name);
		goto out;
	}
	e = RP_ERR_INTERNAL;
	list = json_array();
	/* Empty but for what its migrations wrote (meta's rows, which the copy replaces). */
	for (i = 0; i < n; i++) {
		int64_t rows;
		uint64_t sum;

		if (!strcmp(t[i].name, "meta"))
			continue;
		if ((e = store_sum_table(to, t[i].name, &rows, &sum, why, whylen)) != RP_ERR_OK)
			goto out;
		if (rows > 0) {
			snprintf(why, whylen,
			         "%s is not empty (%s holds %lld rows): copy into a new database",
			         dst->name, t[i].name, (long long)rows);
			e = RP_ERR_CONFLICT;
			goto out;
		}
	}
	if ((e = store_exec(to, STMT(to, "DELETE FROM meta"), "copy meta")) != RP_ERR_OK)
		goto out;
	for (i = 0; i < n; i++) {
		int64_t rows, rows2;
		uint64_t sum, sum2;
		int has_id;

		if ((e = copy_table(from, to, t[i].name, &has_id, why, whylen)) != RP_ERR_OK)
			goto out;
		/* Ids the copy took are not handed out again. */
		if (has_id && to->drv->sql_after_copy) {
			const char *p = to->drv->sql_after_copy, *mark;
			struct rp_buf sql;
			int rc;

			rp_buf_init(&sql, 0);
			while ((mark = strstr(p, "{t}")) != NULL) {
				rp_buf_append(&sql, p, (size_t)(mark - p));
				rp_buf_append(&sql, t[i].name, strlen(t[i].name));
				p = mark + 3;
			}
			rp_buf_append(&sql, p, strlen(p) + 1);
			rc = sql.oom ? SQL_NOMEM : to->drv->exec(to->db, sql.data, why, whylen);
			rp_buf_free(&sql);
			if (rc != SQL_OK) {
				e = RP_ERR_INTERNAL;
				goto out;
			}
		}
		if ((e = store_sum_table(from, t[i].name, &rows, &sum, why, whylen)) != RP_ERR_OK ||
		    (e = store_sum_table(to, t[i].name, &rows2, &sum2, why, whylen)) != RP_ERR_OK)
			goto out;
		if (rows != rows2 || sum != sum2) {
			snprintf(why, whylen,
			         "%s differs after the copy: %lld rows (checksum %016llx) became "
			         "%lld "
			         "(%016llx)",
			         t[i].name, (long long)rows, (unsigned long long)sum,
			         (long long)rows2, (unsigned long long)sum2);
			e = RP_ERR_INTERNAL;
			goto out;
		}
		total += rows;
		{
			char hex[17];

			snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
			json_array_append_new(list,
			                      json_pack("{s:s, s:I, s:s}", "table", t[i].name,
			                                "rows", (json_int_t)rows, "checksum", hex));
		}
	}
	if ((e = store_commit(to)) != RP_ERR_OK) {
		snprintf(why, whylen, "the copy did not commit");
		goto out;
	}
	*report = json_pack("{s:o, s:I}", "tables", list, "rows", (json_int_t)total);
	list = NULL;
	e = *report ? RP_ERR_OK : RP_ERR_INTERNAL;
out:
	store_rollback(to);
	json_decref(list);
	free(t);
	return e;
}
