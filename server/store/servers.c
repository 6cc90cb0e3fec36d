/* The servers that share a database: a row each, kept live by a heartbeat. */
#include "../util/util.h"
#include "internal.h"

#define SERVER_COLS                                                                                \
	"SELECT name, instance, host, pid, started_at, seen_until, leader AS \"leader:bool\" "     \
	"FROM servers "

enum rp_err
rp_store_server_beat(struct rp_store *st, const struct rp_server_self *me, int leader, int take,
                     json_t **live, json_t **holder)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	int64_t now = rp_time_now_ms();
	json_t *all = NULL, *row = NULL;
	enum rp_err e;

	/* The usual case, one round trip: the row is ours. Single statements in autocommit,
	 * so a heartbeat is no write transaction and wakes no other server's watcher. */
	e = EXEC(
	        c, "server beat",
	        "UPDATE servers SET seen_until = ?3, leader = ?4 WHERE name = ?1 AND instance = ?2",
	        me->name, me->instance, now + me->lease_ms, (int64_t)(leader != 0));
	if (e != RP_ERR_OK)
		return e;
	if (sql_changes(c) == 0) {
		/* Absent, gone quiet (a crash: its lease ran out), or taken when asked to. */
		e = EXEC(c, "server join",
		         "INSERT INTO servers(name, instance, host, pid, started_at, seen_until, "
		         "leader) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (name) DO UPDATE "
		         "SET "
		         "instance = excluded.instance, host = excluded.host, pid = excluded.pid, "
		         "started_at = excluded.started_at, seen_until = excluded.seen_until, "
		         "leader = excluded.leader WHERE servers.seen_until < ?5 OR ?8 <> 0",
		         me->name, me->instance, me->host, (int64_t)me->pid, now,
		         now + me->lease_ms, (int64_t)(leader != 0), (int64_t)(take != 0));
		if (e != RP_ERR_OK)
			return e;
		if (sql_changes(c) == 0) {
			e = store_one_row(c, STMT_ARGS(c, SERVER_COLS "WHERE name = ?", me->name),
			                  "server read", &row);
			if (e != RP_ERR_OK)
				return e == RP_ERR_NOT_FOUND ? RP_ERR_UNAVAILABLE
				                             : e; /* just left */
			if (holder)
				*holder = row;
			else
				json_decref(row);
			return RP_ERR_CONFLICT;
		}
	}
	if (live == NULL)
		return RP_ERR_OK;
	e = store_all(c,
	              STMT_ARGS(c,
	                        "SELECT name, host, pid, started_at, seen_until, leader AS "
	                        "\"leader:bool\" FROM servers WHERE seen_until >= ? ORDER BY name",
	                        now),
	              &all);
	if (e == RP_ERR_OK)
		*live = all;
	return e;
}

enum rp_err
rp_store_server_leave(struct rp_store *st, const struct rp_server_self *me)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return EXEC(c, "server leave", "DELETE FROM servers WHERE name = ? AND instance = ?",
	            me->name, me->instance);
}
