/* Retention: what has outlived its use goes, a chunk per transaction. */
#include "../util/util.h"
#include "internal.h"

/* Rows per transaction: a large backlog (the first prune of an old database) never holds the
 * write lock for more than a moment at a time. */
#define PRUNE_CHUNK 2000
#define LOG_CHUNK   100 /* jobs, each with up to 8 MiB of log */

struct chunk {
	int64_t before, done;
	int which;
};

enum { P_EVENTS, P_LOGS, P_TOKENS, P_BOOTSTRAP, P_SERVERS, P_DELIVERIES };

static enum rp_err
chunk(struct conn *c, void *ctx)
{
	struct chunk *k = ctx;
	enum rp_err e = RP_ERR_INTERNAL;

	switch (k->which) {
	case P_EVENTS:
		e = EXEC(c, "prune events",
		         "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE at < ?1 "
		         "ORDER BY at LIMIT ?2)",
		         k->before, (int64_t)PRUNE_CHUNK);
		break;
	case P_LOGS:
		/* The job stays, and says how many bytes of its log are no longer kept. Both
		 * statements pick the same jobs: the first changes nothing the second selects by.
		 */
		if ((e = EXEC(c, "prune job logs",
		              "DELETE FROM job_logs WHERE job_id IN (SELECT id FROM jobs WHERE "
		              "log_bytes > 0 AND finished_at < ?1 ORDER BY id LIMIT ?2)",
		              k->before, (int64_t)LOG_CHUNK)) != RP_ERR_OK)
			return e;
		e = EXEC(c, "prune job logs",
		         "UPDATE jobs SET log_dropped = log_dropped + log_bytes, log_bytes = 0 "
		         "WHERE id IN (SELECT id FROM jobs WHERE log_bytes > 0 AND finished_at < "
		         "?1 ORDER BY id LIMIT ?2)",
		         k->before, (int64_t)LOG_CHUNK);
		break;
	case P_TOKENS:
		e = EXEC(c, "prune tokens",
		         "DELETE FROM tokens WHERE id IN (SELECT id FROM tokens WHERE "
		         "expires_at < ?1 OR revoked_at < ?1 LIMIT ?2)",
		         k->before, (int64_t)PRUNE_CHUNK);
		break;
	case P_BOOTSTRAP: /* before is now here: the tokens keep a day past their expiry */
		e = store_boot_prune(c, k->before, PRUNE_CHUNK);
		break;
	case P_DELIVERIES: /* the log of what was delivered or given up; pending ones stay */
		e = EXEC(c, "prune webhook deliveries",
		         "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM "
		         "webhook_deliveries WHERE state <> 'pending' AND finished_at < ?1 LIMIT "
		         "?2)",
		         k->before, (int64_t)PRUNE_CHUNK);
		break;
	case P_SERVERS:
		e = EXEC(c, "prune servers", "DELETE FROM servers WHERE seen_until < ?1",
		         k->before);
		break;
	}
	if (e == RP_ERR_OK)
		k->done = sql_changes(c);
	return e;
}

/* Run one kind of pruning, a chunk per transaction, to its end or until the monotonic clock
 * passes deadline (*more set); the rows removed added to *n. */
static enum rp_err
prune(struct rp_store *st, int which, int64_t before, int64_t deadline, int64_t *n, int *more)
{
	STORE_HOLD(st);
	struct chunk k = {.before = before, .which = which};
	enum rp_err e;

	if (*more)
		return RP_ERR_OK;
	do {
		if ((e = store_txn(st, chunk, &k)) != RP_ERR_OK)
			return e;
		*n += k.done;
		if (k.done < (which == P_LOGS ? LOG_CHUNK : PRUNE_CHUNK))
			return RP_ERR_OK;
	} while (rp_time_mono_ns() < deadline);
	*more = 1;
	return RP_ERR_OK;
}

enum rp_err
rp_store_prune(struct rp_store *st, int64_t now, int64_t keep_ms, int64_t budget_ms,
               struct rp_prune_counts *counts)
{
	struct rp_prune_counts n = {0};
	int64_t end = rp_time_mono_ns() + budget_ms * 1000000;
	enum rp_err e;

	if (keep_ms > 0 &&
	    ((e = prune(st, P_EVENTS, now - keep_ms, end, &n.events, &n.more)) != RP_ERR_OK ||
	     (e = prune(st, P_LOGS, now - keep_ms, end, &n.job_logs, &n.more)) != RP_ERR_OK ||
	     (e = prune(st, P_TOKENS, now - keep_ms, end, &n.tokens, &n.more)) != RP_ERR_OK ||
	     (e = prune(st, P_DELIVERIES, now - keep_ms, end, &n.deliveries, &n.more)) !=
	             RP_ERR_OK))
		return e;
	if ((e = prune(st, P_BOOTSTRAP, now, end, &n.bootstrap_tokens, &n.more)) != RP_ERR_OK ||
	    (e = prune(st, P_SERVERS, now - 24LL * 3600 * 1000, end, &n.servers, &n.more)) !=
	            RP_ERR_OK)
		return e;
	if (counts)
		*counts = n;
	return RP_ERR_OK;
}
