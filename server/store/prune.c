/* Retention: what has outlived its use goes, a chunk per transaction. */
#include "../util/util.h"
#include "internal.h"

/* Rows per transaction: a large backlog (the first prune of an old database) never holds the
 * write lock for more than a moment at a time. */
#define PRUNE_CHUNK 2000
#define LOG_CHUNK   100 /* jobs, each with up to 8 MiB of log */

#define OWNER_CHUNK 64 /* nodes or racks whose old samples one transaction removes */

struct chunk {
	int64_t before, done;
	int which;
	int64_t from;   /* P_SAMPLES, P_RACK_STEPS: start after this owner id */
	int64_t cursor; /* ...out: the highest owner id done */
	int end;        /* ...out: no owner after cursor */
};

enum { P_EVENTS, P_LOGS, P_TOKENS, P_BOOTSTRAP, P_SERVERS, P_DELIVERIES, P_SAMPLES, P_RACK_STEPS };

/* Old samples of the next OWNER_CHUNK nodes (racks) after k->from, owner by owner: each
 * DELETE is a range of the primary key's (owner, at) prefix, so a pass over a large history
 * reads only what it removes. */
static enum rp_err
samples_chunk(struct conn *c, struct chunk *k)
{
	struct stmt *s;
	enum rp_err e;
	int64_t ids[OWNER_CHUNK];
	int n = 0, i;

	s = k->which == P_SAMPLES
	            ? STMT_ARGS(c, "SELECT id FROM nodes WHERE id > ? ORDER BY id LIMIT ?", k->from,
	                        (int64_t)OWNER_CHUNK)
	            : STMT_ARGS(c, "SELECT id FROM racks WHERE id > ? ORDER BY id LIMIT ?", k->from,
	                        (int64_t)OWNER_CHUNK);
	while (store_next(c, s, "prune samples", &e))
		if (n < OWNER_CHUNK)
			ids[n++] = sql_int(s, 0);
	if (e != RP_ERR_OK)
		return e;
	k->done = 0;
	for (i = 0; i < n; i++) {
		e = k->which == P_SAMPLES
		            ? EXEC(c, "prune sensor history",
		                   "DELETE FROM sensor_history WHERE node_id = ? AND at < ?",
		                   ids[i], k->before)
		            : EXEC(c, "prune rack power history",
		                   "DELETE FROM rack_power_history WHERE rack_id = ? AND at < ?",
		                   ids[i], k->before);
		if (e != RP_ERR_OK)
			return e;
		k->done += sql_changes(c);
	}
	k->cursor = n ? ids[n - 1] : k->from;
	k->end = n < OWNER_CHUNK;
	return RP_ERR_OK;
}

static enum rp_err
chunk(struct conn *c, void *ctx)
{
	struct chunk *k = ctx;
	enum rp_err e = RP_ERR_INTERNAL;

	switch (k->which) {
	case P_SAMPLES:
	case P_RACK_STEPS:
		return samples_chunk(c, k);
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
	int64_t *pass = which == P_SAMPLES      ? &st->prune_pass[0]
	                : which == P_RACK_STEPS ? &st->prune_pass[1]
	                                        : NULL;
	enum rp_err e;

	if (*more)
		return RP_ERR_OK;
	do {
		/* A pass over the histories goes on where the last call stopped. */
		k.from = pass ? *pass : 0;
		if ((e = store_txn(st, chunk, &k)) != RP_ERR_OK)
			return e;
		*n += k.done;
		if (pass)
			*pass = k.end ? 0 : k.cursor;
		if (pass ? k.end : k.done < (which == P_LOGS ? LOG_CHUNK : PRUNE_CHUNK))
			return RP_ERR_OK;
	} while (rp_time_mono_ns() < deadline);
	*more = 1;
	return RP_ERR_OK;
}

/* Where sensor samples end: keep->samples_ms ago, or later when more than keep->samples_max
 * rows are kept: then the newest stay, as many as leave room for an hour's more (the rows'
 * span scaled down, as they come at a steady rate), so that they are about samples_max when
 * the hourly prune comes round again; at least a tenth of samples_max stay. 0: keep them
 * all. *capped set to 1 when over samples_max. */
static enum rp_err
samples_cutoff(struct rp_store *st, int64_t now, const struct rp_prune_keep *keep, int64_t *cutoff,
               int *capped)
{
	STORE_HOLD(st);
	struct conn *c;
	struct stmt *s;
	int64_t rows, oldest, at = keep->samples_ms > 0 ? now - keep->samples_ms : 0;
	enum rp_err e;

	if (keep->samples_max > 0) {
		if ((c = store_conn(st)) == NULL)
			return RP_ERR_UNAVAILABLE;
		s = STMT(c, "SELECT count(*), coalesce(min(at), 0) FROM sensor_history");
		if ((e = store_one(c, s, "sensor history size")) != RP_ERR_OK)
			return e;
		rows = sql_int(s, 0);
		oldest = sql_int(s, 1);
		sql_reset(s);
		if (rows > keep->samples_max && oldest > 0 && oldest < now) {
			int64_t span = now - oldest, over;
			double per_hour = (double)rows * 3600000.0 / (double)span;
			double target = (double)keep->samples_max - per_hour;

			if (target < 0.1 * (double)keep->samples_max)
				target = 0.1 * (double)keep->samples_max;
			over = now - (int64_t)((double)span * target / (double)rows);

			if (over > at)
				at = over;
			*capped = 1;
			rp_log_warn("retention: %lld sensor samples, over sensor_history_max_rows "
			            "(%lld): keeping the last %.1f hours",
			            (long long)rows, (long long)keep->samples_max,
			            (double)(now - at) / 3600000.0);
		}
	}
	*cutoff = at;
	return RP_ERR_OK;
}

enum rp_err
rp_store_prune(struct rp_store *st, int64_t now, const struct rp_prune_keep *keep,
               int64_t budget_ms, struct rp_prune_counts *counts)
{
	struct rp_prune_counts n = {0};
	int64_t end = rp_time_mono_ns() + budget_ms * 1000000, keep_ms = keep->events_ms, cutoff;
	enum rp_err e;

	if (keep_ms > 0 &&
	    ((e = prune(st, P_EVENTS, now - keep_ms, end, &n.events, &n.more)) != RP_ERR_OK ||
	     (e = prune(st, P_LOGS, now - keep_ms, end, &n.job_logs, &n.more)) != RP_ERR_OK ||
	     (e = prune(st, P_TOKENS, now - keep_ms, end, &n.tokens, &n.more)) != RP_ERR_OK ||
	     (e = prune(st, P_DELIVERIES, now - keep_ms, end, &n.deliveries, &n.more)) !=
	             RP_ERR_OK))
		return e;
	/* The samples' cutoff is the pass's: set where it starts (its count is a table scan). */
	if (st->prune_pass[0] == 0) {
		st->prune_capped = 0;
		if ((e = samples_cutoff(st, now, keep, &st->prune_cutoff, &st->prune_capped)) !=
		    RP_ERR_OK)
			return e;
	}
	cutoff = st->prune_cutoff;
	n.capped = st->prune_capped;
	if ((cutoff > 0 &&
	     (e = prune(st, P_SAMPLES, cutoff, end, &n.samples, &n.more)) != RP_ERR_OK) ||
	    (keep->rack_steps_ms > 0 && (e = prune(st, P_RACK_STEPS, now - keep->rack_steps_ms, end,
	                                           &n.rack_steps, &n.more)) != RP_ERR_OK))
		return e;
	if ((e = prune(st, P_BOOTSTRAP, now, end, &n.bootstrap_tokens, &n.more)) != RP_ERR_OK ||
	    (e = prune(st, P_SERVERS, now - 24LL * 3600 * 1000, end, &n.servers, &n.more)) !=
	            RP_ERR_OK)
		return e;
	if (counts)
		*counts = n;
	return RP_ERR_OK;
}
