/* The demo mark: a database seeded by `rackpilotd --demo` says so forever (meta 'demo'). */
#include "internal.h"

enum rp_err
rp_store_demo_get(struct rp_store *st, int *demo, int *empty)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	s = STMT(c, "SELECT (SELECT count(*) FROM meta WHERE key = 'demo'), "
	            "NOT EXISTS (SELECT 1 FROM racks) AND NOT EXISTS (SELECT 1 FROM nodes)");
	/* Scalar subqueries: always a row. */
	if ((e = store_one(c, s, "demo get")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
	*demo = sql_int(s, 0) > 0;
	*empty = sql_int(s, 1);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
rp_store_demo_mark(struct rp_store *st)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT(c, "INSERT INTO meta (key, value) VALUES ('demo', '1') ON CONFLICT (key) DO "
	            "UPDATE SET value = "
	            "excluded.value");
	if ((e = store_exec(c, s, "demo mark")) != RP_ERR_OK ||
	    (e = store_event(c, "rackpilotd --demo", "demo.marked", "site", NULL, "demo", 0, 0,
	                     "database marked as demo data", NULL)) != RP_ERR_OK) {
		store_rollback(c);
		return e;
	}
	return store_commit(c);
}
