/* The demo mark: a database seeded by `rackpilotd --demo` says so forever (meta 'demo'). */
#include "internal.h"

enum rp_err
rp_store_demo_get(struct rp_store *st, int *demo, int *empty)
{
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e = RP_ERR_INTERNAL;

	if (c == NULL)
		return e;
	s = STMT(c, "SELECT (SELECT count(*) FROM meta WHERE key = 'demo'), "
	            "NOT EXISTS (SELECT 1 FROM racks) AND NOT EXISTS (SELECT 1 FROM nodes)");
	if (s && sql_step(s) == SQL_ROW) {
		*demo = sql_int(s, 0) > 0;
		*empty = sql_int(s, 1);
		e = RP_ERR_OK;
	}
	store_done(s);
	return e;
}

enum rp_err
rp_store_demo_mark(struct rp_store *st)
{
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	s = STMT(c, "INSERT OR REPLACE INTO meta (key, value) VALUES ('demo', '1')");
	if (s == NULL || sql_step(s) != SQL_DONE) {
		store_done(s);
		store_rollback(c);
		return RP_ERR_INTERNAL;
	}
	store_done(s);
	if ((e = store_event(c, "rackpilotd --demo", "demo.marked", "site", NULL, "demo", 0, 0,
	                     "database marked as demo data", NULL)) != RP_ERR_OK) {
		store_rollback(c);
		return e;
	}
	return store_commit(c);
}
