/* Webhooks (docs/webhooks.md): the subscriptions, their outbox and its delivery log. A
 * delivery row is written by store_event_text (db.c) in the transaction of the event it
 * carries, for each enabled webhook whose patterns match; the
 * leader's deliverer (jobs/webhooks.c) takes each webhook's oldest pending one, records the
 * attempt before it POSTs, and its outcome after. The HMAC secret is sealed as BMC passwords
 * are (secrets.c) and never leaves the store except towards the deliverer. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define WEBHOOK_COLS                                                                               \
	"SELECT w.id AS _id, w.uuid AS id, w.name, w.url, w.events AS \"events:json\", w.enabled " \
	"AS \"enabled:bool\", w.secret_sealed IS NOT NULL AS \"secret_set:bool\", "                \
	"w.secret_updated_at AS \"secret_updated_at:time\", (SELECT count(*) FROM "                \
	"webhook_deliveries d WHERE d.webhook_id = w.id AND d.state = 'pending') AS pending, "     \
	"w.version, w.created_at AS \"created_at:time\", w.updated_at AS \"updated_at:time\" "     \
	"FROM webhooks w "

/* The queue moves without the webhook changing. The URL stays out of the events, which
 * viewers read: a receiver's URL can be a credential (a chat service's incoming webhook). */
static const char *const diff_skip[] = {"version", "updated_at", "pending", "url", NULL};

/* Insert (*id == 0) or rewrite a webhook from a whole object; "secret", when present, is
 * sealed and replaces the old one. */
static enum rp_err
save(struct conn *c, struct store_res *r, int64_t *id, json_t *obj, json_t **detail)
{
	const char *name = json_string_value(json_object_get(obj, "name"));
	const char *secret = json_string_value(json_object_get(obj, "secret"));
	char uuid[RP_UUID_BUF], *events, *sealed = NULL, named[32];
	int64_t other, now = rp_time_now_ms();
	struct stmt *s;
	enum rp_err e;

	(void)r;
	if (rp_uuid_new(uuid) < 0)
		return RP_ERR_INTERNAL;
	/* Created without a name: webhook- and the first 8 digits of its UUID. */
	if (name == NULL) {
		snprintf(named, sizeof named, "webhook-%.8s", uuid);
		json_object_set_new(obj, "name", json_string(named));
		name = json_string_value(json_object_get(obj, "name"));
	}
	e = store_id_of(c, T_WEBHOOK, name, &other);
	if (e == RP_ERR_OK && other != *id) {
		*detail = store_why("name", "a webhook named '%s' already exists", name);
		return RP_ERR_DUPLICATE;
	}
	if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		return e;
	if ((e = store_seal(c, secret, &sealed)) != RP_ERR_OK)
		return e;
	if ((events = store_canon(json_object_get(obj, "events"))) == NULL) {
		free(sealed);
		return RP_ERR_INTERNAL;
	}
	if (*id == 0) {
		s = STMT(c,
		         "INSERT INTO webhooks(uuid, name, url, events, enabled, secret_sealed, "
		         "secret_updated_at, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, "
		         "?6, ?7, ?7, ?7)");
		sql_bind_text(s, 1, uuid);
	} else {
		/* No secret in the object: the sealed one stays. */
		s = STMT(c, "UPDATE webhooks SET name = ?2, url = ?3, events = ?4, enabled = ?5, "
		            "secret_sealed = coalesce(?6, secret_sealed), secret_updated_at = CASE "
		            "WHEN ?6 IS NULL THEN secret_updated_at ELSE CAST(?7 AS BIGINT) END, "
		            "version "
		            "= version + 1, updated_at = ?7 WHERE id = ?1");
		sql_bind_int(s, 1, *id);
	}
	store_bind_str(s, 2, obj, "name");
	store_bind_str(s, 3, obj, "url");
	sql_bind_text_own(s, 4, events);
	sql_bind_int(s, 5, !json_is_false(json_object_get(obj, "enabled")));
	sql_bind_text_own(s, 6, sealed);
	sql_bind_int(s, 7, now);
	if ((e = store_exec(c, s, "webhook save")) != RP_ERR_OK)
		return e;
	if (*id == 0)
		*id = sql_last_id(c);
	return RP_ERR_OK;
}

static struct store_res webhook_res = {
        .table = T_WEBHOOK,
        .otype = "webhook",
        .diff_skip = diff_skip,
        .created_diff = 1,
        .sql_load = WEBHOOK_COLS "WHERE w.id = ?",
        .sql_delete = "DELETE FROM webhooks WHERE id = ?",
        .sql_list_id = WEBHOOK_COLS "WHERE w.id > ?1 ORDER BY w.id LIMIT ?2",
        .sql_list_name = WEBHOOK_COLS "WHERE (?1 IS NULL OR w.name > ?1) ORDER BY w.name "
                                      "LIMIT ?2",
        .save = save,
};

STORE_RES_CALLS(webhook, &webhook_res)

enum rp_err
rp_store_webhook_due(struct rp_store *st, int64_t now, int max, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *list = json_array(), *ev;
	struct stmt *s;
	enum rp_err e;
	size_t i;

	if ((e = store_read(st, &c)) != RP_ERR_OK) {
		json_decref(list);
		return e;
	}
	/* Each webhook's head: its oldest pending delivery, when due. Later ones wait for it. */
	s = STMT_ARGS(c,
	              "SELECT d.id AS delivery, w.uuid AS webhook, w.name, w.url, w.secret_sealed "
	              "AS _sealed, d.attempts, d.event_id, d.action, d.created_at, d.last_error, "
	              "w.version FROM "
	              "webhooks "
	              "w JOIN webhook_deliveries d ON d.id = (SELECT h.id FROM "
	              "webhook_deliveries h WHERE h.webhook_id = w.id AND h.state = 'pending' "
	              "ORDER BY h.event_id LIMIT 1) WHERE w.enabled = 1 AND w.secret_sealed IS "
	              "NOT NULL AND d.next_at <= ?1 ORDER BY d.next_at, d.id LIMIT ?2",
	              now, (int64_t)max);
	while (store_next(c, s, "webhooks due", &e)) {
		json_t *row = store_row(c, s), *secret = store_unseal(c, sql_text(s, 4), "webhook");

		if (secret == NULL) { /* logged; the deliverer leaves it for the next pass */
			json_decref(row);
			continue;
		}
		json_object_set_new(row, "secret", secret);
		json_array_append_new(list, row);
	}
	if (e != RP_ERR_OK)
		goto out;
	/* The events themselves, as GET /v1/events shows them (null: retention removed it). */
	json_array_foreach(list, i, ev)
	{
		json_t *event = NULL;

		e = store_event_load(c, json_integer_value(json_object_get(ev, "event_id")),
		                     &event);
		if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
			goto out;
		json_object_set_new(ev, "event", event ? event : json_null());
	}
	*out = list;
	list = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	rp_store_webhook_wipe(list);
	return e;
}

void
rp_store_webhook_wipe(json_t *due)
{
	json_t *d;
	size_t i;

	json_array_foreach(due, i, d)
	{
		const char *secret = json_string_value(json_object_get(d, "secret"));

		if (secret)
			explicit_bzero((char *)secret, strlen(secret));
	}
	json_decref(due);
}

enum rp_err
rp_store_webhook_attempt(struct rp_store *st, int64_t delivery, int64_t attempts, int64_t version,
                         int64_t now, int64_t next_at)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	/* Only as it was read: not tried meanwhile (by a server that also thought it led), the
	 * webhook neither disabled nor changed (a new URL or secret is not sent the old way). */
	e = EXEC(c, "webhook attempt",
	         "UPDATE webhook_deliveries SET attempts = attempts + 1, last_at = ?2, next_at = "
	         "?3 WHERE id = ?1 AND state = 'pending' AND attempts = ?4 AND EXISTS (SELECT 1 "
	         "FROM webhooks w WHERE w.id = webhook_deliveries.webhook_id AND w.enabled = 1 AND "
	         "w.version = ?5)",
	         delivery, now, next_at, attempts, version);
	if (e == RP_ERR_OK && sql_changes(c) == 0)
		e = RP_ERR_NOT_FOUND;
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_webhook_result(struct rp_store *st, int64_t delivery, enum rp_webhook_outcome outcome,
                        int status, const char *error, int64_t now, int64_t next_at)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(
	        c,
	        "UPDATE webhook_deliveries SET state = ?2, last_status = ?3, last_error = ?4, "
	        "next_at = ?5, finished_at = CASE WHEN ?2 = 'pending' THEN NULL ELSE CAST(?6 "
	        "AS BIGINT) END "
	        "WHERE id = ?1 AND state = 'pending'",
	        delivery,
	        outcome == RP_WEBHOOK_DELIVERED ? "delivered"
	        : outcome == RP_WEBHOOK_RETRY   ? "pending"
	                                        : "failed");
	if (status > 0)
		sql_bind_int(s, 3, status);
	sql_bind_text(s, 4, error);
	sql_bind_int(s, 5, next_at);
	sql_bind_int(s, 6, now);
	if ((e = store_exec(c, s, "webhook result")) != RP_ERR_OK)
		goto out;
	if (sql_changes(c) == 0) {
		e = RP_ERR_NOT_FOUND;
		goto out;
	}
	if (outcome == RP_WEBHOOK_GAVE_UP) {
		char summary[600], uuid[RP_UUID_BUF], name[128];
		json_t *detail;

		s = STMT_ARGS(c,
		              "SELECT w.uuid, w.name, d.event_id, d.action, d.attempts FROM "
		              "webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE "
		              "d.id = ?",
		              delivery);
		if ((e = store_one(c, s, "webhook gave up")) != RP_ERR_OK)
			goto out;
		/* A give-up of a delivery that is itself about a give-up writes no event: two
		 * dead webhooks would otherwise feed each other without end. */
		if (!strcmp(sql_text(s, 3), "webhook.gave_up")) {
			sql_reset(s);
			goto out;
		}
		snprintf(summary, sizeof summary,
		         "webhook %s gave up on event %lld (%s) after %lld attempt(s): %s",
		         sql_text(s, 1), (long long)sql_int(s, 2), sql_text(s, 3),
		         (long long)sql_int(s, 4), error ? error : "?");
		detail = json_pack("{s:I, s:I, s:s, s:I, s:s?}", "delivery", (json_int_t)delivery,
		                   "event_id", (json_int_t)sql_int(s, 2), "action", sql_text(s, 3),
		                   "attempts", (json_int_t)sql_int(s, 4), "error", error);
		snprintf(uuid, sizeof uuid, "%s", sql_text(s, 0));
		snprintf(name, sizeof name, "%s", sql_text(s, 1));
		sql_reset(s);
		e = store_event(c, "rackpilotd", "webhook.gave_up", "webhook", uuid, name, 0, 0,
		                summary, detail);
		json_decref(detail);
	}
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_webhook_deliveries(struct rp_store *st, const char *key, const struct rp_page_req *rq,
                            struct rp_page *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	int64_t id;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_id_of(c, T_WEBHOOK, key, &id)) != RP_ERR_OK)
		return e;
	/* Newest first. */
	s = STMT(c, "SELECT d.id AS _id, d.id, d.event_id, d.action, d.state, d.attempts, "
	            "d.created_at AS \"created_at:time\", d.last_at AS \"last_at:time\", "
	            "d.last_status, d.last_error, CASE WHEN d.state = 'pending' THEN d.next_at END "
	            "AS \"next_at:time\", d.finished_at AS \"finished_at:time\" FROM "
	            "webhook_deliveries d WHERE d.webhook_id = ?2 AND d.id < ?1 AND (CAST(?3 AS "
	            "TEXT) IS NULL OR d.state = CAST(?3 AS TEXT)) ORDER BY d.id DESC LIMIT ?4");
	sql_bind_int(s, 1, rq->after_id > 0 ? rq->after_id : INT64_MAX);
	sql_bind_int(s, 2, id);
	store_bind_str(s, 3, rq->filter, "state");
	sql_bind_int(s, 4, rq->limit + 1);
	return store_page(c, s, rq, "id", out);
}
