/* One write transaction around a callback (store_txn in internal.h), in the manner of GNU
 * Taler's TEH_DB_run_transaction: begin, run, commit, and on a busy database run it all again. */
#include "internal.h"

/* SQLite's busy handler (db.c) already waits up to 10 s for the lock inside each statement;
 * a rerun covers what it cannot (a lock lost between statements, a busy commit). */
#define TXN_TRIES 3

enum rp_err
store_txn(struct rp_store *st, enum rp_err (*cb)(struct conn *c, void *ctx), void *ctx)
{
	STORE_HOLD(st);
	struct conn *c;
	enum rp_err e = RP_ERR_INTERNAL;
	int try;

	store_write_turn(st);
	if ((c = store_conn(st)) == NULL)
		return RP_ERR_UNAVAILABLE;
	for (try = 1;; try++) {
		if ((e = store_begin(c)) == RP_ERR_OK && (e = cb(c, ctx)) == RP_ERR_OK &&
		    c->drv->in_txn(c->db))
			e = store_commit(c);
		store_rollback(c);
		if (e != RP_ERR_UNAVAILABLE || try == TXN_TRIES)
			break;
		rp_log_warn("store: the database was busy; running the transaction again (%d/%d)",
		            try + 1, TXN_TRIES);
	}
	return e;
}
