/* The event log: newest first, keyset-paged by event id. */
#include <stdint.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define EVENT_COLS                                                                                 \
	"SELECT e.id AS _id, e.id, e.at AS \"at:time\", e.actor, e.action, e.object_type AS "      \
	"\"object.type\", e.object_id AS \"object.id\", e.object_name AS \"object.name\", "        \
	"e.summary, e.detail AS \"detail:json\" FROM events e "

#define EVENT_FILTER                                                                               \
	"AND (CAST(?3 AS BIGINT) IS NULL OR e.at >= ?3) AND (CAST(?4 AS BIGINT) IS NULL OR "       \
	"e.at < ?4) AND (?5 IS NULL OR "                                                           \
	"substr(e.action, 1, length(?5)) = ?5) ORDER BY e.id DESC LIMIT ?6"

enum rp_err
rp_store_event_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *f = rq->filter, *since = json_object_get(f, "since"),
	       *until = json_object_get(f, "until");
	const char *node = json_string_value(json_object_get(f, "node"));
	const char *rack = json_string_value(json_object_get(f, "rack"));
	struct stmt *s;
	int64_t id = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	/* Separate statements per scope so each uses its own index. */
	if (node) {
		e = store_id_of(c, T_NODE, node, &id);
		s = STMT(c, EVENT_COLS "WHERE e.node_id = ?2 AND e.id < ?1 " EVENT_FILTER);
	} else if (rack) {
		e = store_id_of(c, T_RACK, rack, &id);
		s = STMT(c, EVENT_COLS "WHERE e.rack_id = ?2 AND e.id < ?1 " EVENT_FILTER);
	} else {
		e = RP_ERR_OK;
		s = STMT(c,
		         EVENT_COLS "WHERE e.id < ?1 AND CAST(?2 AS BIGINT) IS NULL " EVENT_FILTER);
	}
	if (e != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_BAD_QUERY : e;
	sql_bind_int(s, 1, rq->after_id > 0 ? rq->after_id : INT64_MAX);
	if (id)
		sql_bind_int(s, 2, id);
	if (json_is_integer(since))
		sql_bind_int(s, 3, json_integer_value(since));
	if (json_is_integer(until))
		sql_bind_int(s, 4, json_integer_value(until));
	store_bind_str(s, 5, f, "action");
	sql_bind_int(s, 6, rq->limit + 1);
	return store_page(c, s, rq, "action", out);
}

/* Newest first above; the stream wants oldest first after a known id. */
#define EVENT_AFTER                                                                                \
	"AND (?3 IS NULL OR substr(e.action, 1, length(?3)) = ?3) ORDER BY e.id LIMIT ?4"

enum rp_err
rp_store_event_after(struct rp_store *st, int64_t after_id, json_t *filter, int limit, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	const char *node = json_string_value(json_object_get(filter, "node"));
	const char *rack = json_string_value(json_object_get(filter, "rack"));
	struct stmt *s;
	json_t *items;
	int64_t id = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (node) {
		if ((e = store_id_of(c, T_NODE, node, &id)) != RP_ERR_OK)
			return e;
		s = STMT(c, EVENT_COLS "WHERE e.node_id = ?2 AND e.id > ?1 " EVENT_AFTER);
	} else if (rack) {
		if ((e = store_id_of(c, T_RACK, rack, &id)) != RP_ERR_OK)
			return e;
		s = STMT(c, EVENT_COLS "WHERE e.rack_id = ?2 AND e.id > ?1 " EVENT_AFTER);
	} else
		s = STMT(c,
		         EVENT_COLS "WHERE e.id > ?1 AND CAST(?2 AS BIGINT) IS NULL " EVENT_AFTER);
	sql_bind_int(s, 1, after_id);
	if (id)
		sql_bind_int(s, 2, id);
	store_bind_str(s, 3, filter, "action");
	sql_bind_int(s, 4, limit);
	if ((items = store_rows(c, s)) == NULL)
		return RP_ERR_INTERNAL;
	*out = items;
	return RP_ERR_OK;
}

enum rp_err
rp_store_event_head(struct rp_store *st, int64_t *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s = STMT(c, "SELECT coalesce(max(id), 0) FROM events");
	enum rp_err e;

	/* An aggregate: always a row. */
	if ((e = store_one(c, s, "event head")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
	*out = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
store_event_load(struct conn *c, int64_t id, json_t **out)
{
	struct stmt *s = STMT_ARGS(c, EVENT_COLS "WHERE e.id = ?", id);
	enum rp_err e;

	if ((e = store_one(c, s, "event")) != RP_ERR_OK)
		return e;
	*out = store_row(c, s);
	sql_reset(s);
	return RP_ERR_OK;
}
