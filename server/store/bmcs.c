/* BMCs as the store keeps them: their columns as jobs and the power sweep read them (the
 * password opened), what jobs and the sweep learn from them (power state, health), and the
 * IPMI workarounds found by probing. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_bmc_workarounds_detected(struct rp_store *st, const char *node, const char *address,
                                  unsigned port, json_t *names)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	struct node_ref n;
	struct stmt *s;
	json_t *opts = NULL, *w, *detail = NULL;
	const char *driver, *addr, *text;
	char summary[300], list[160] = "", *canon = NULL;
	size_t i, len;
	unsigned had_port;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (!json_is_array(names) || json_array_size(names) == 0)
		return RP_ERR_BAD_REQUEST;
	json_array_foreach(names, i, w)
	{
		if (!json_is_string(w))
			return RP_ERR_BAD_REQUEST;
		len = strlen(list);
		snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
		         json_string_value(w));
	}
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_ref(c, node, &n)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c, "SELECT driver, address, port, options FROM bmcs WHERE node_id = ?", n.id);
	if ((e = store_one(c, s, "bmc workarounds")) != RP_ERR_OK)
		goto out;
	driver = sql_text(s, 0);
	addr = sql_text(s, 1);
	had_port = (unsigned)sql_int(s, 2);
	text = sql_text(s, 3);
	/* The BMC the job talked to must still be the node's: an edit during the job wins. */
	e = RP_ERR_CONFLICT;
	if (driver == NULL || strcmp(driver, "ipmi") != 0 || addr == NULL || address == NULL ||
	    strcmp(addr, address) != 0 || had_port != port) {
		sql_reset(s);
		goto out;
	}
	opts = text ? json_loads(text, 0, NULL) : json_object();
	sql_reset(s);
	if (!json_is_object(opts)) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	/* Workarounds an operator chose (even none) are never overwritten. */
	if ((w = json_object_get(opts, "workarounds")) != NULL && !json_is_null(w))
		goto out;
	e = RP_ERR_INTERNAL;
	if (json_object_set(opts, "workarounds", names) < 0 || (canon = store_canon(opts)) == NULL)
		goto out;
	s = STMT(c, "UPDATE bmcs SET options = ? WHERE node_id = ?");
	sql_bind_text_own(s, 1, canon);
	canon = NULL;
	sql_bind_int(s, 2, n.id);
	if ((e = store_exec(c, s, "bmc workarounds")) != RP_ERR_OK)
		goto out;
	/* The node changed: a PATCH made from an older read gets 412 rather than undo this. */
	s = STMT_ARGS(c, "UPDATE nodes SET version = version + 1, updated_at = ? WHERE id = ?",
	              rp_time_now_ms(), n.id);
	if ((e = store_exec(c, s, "bmc workarounds")) != RP_ERR_OK)
		goto out;
	detail = json_pack("{s:O, s:s, s:I}", "workarounds", names, "address", address, "port",
	                   (json_int_t)port);
	snprintf(summary, sizeof summary, "BMC of %s needs IPMI workarounds %s (detected)", n.name,
	         list);
	e = store_event(c, "rackpilotd", "bmc.workarounds_detected", "node", n.uuid, n.name, n.id,
	                n.rack_id, summary, detail);
out:
	free(canon);
	json_decref(opts);
	json_decref(detail);
	return store_end(c, e, NULL, NULL);
}

void
store_bmc_free(struct rp_store_bmc *b)
{
	free(b->driver);
	free(b->address);
	free(b->username);
	rp_secrets_plain_free(b->password, b->password_len);
	json_decref(b->options);
}

char *
store_col_dup(struct stmt *s, int i, int *oom)
{
	char *v;

	if (sql_type(s, i) == SQL_NULL)
		return NULL;
	if ((v = strdup(sql_text(s, i))) == NULL)
		*oom = 1;
	return v;
}

void
store_bmc_cols(struct conn *c, struct stmt *s, int i, const char *name, struct rp_store_bmc *b,
               int *oom)
{
	const char *sealed = sql_text(s, i + 4);
	char why[256];

	b->driver = store_col_dup(s, i, oom);
	b->address = store_col_dup(s, i + 1, oom);
	b->port = (unsigned)sql_int(s, i + 2);
	b->username = store_col_dup(s, i + 3, oom);
	if (sealed &&
	    (c->st->secrets == NULL || rp_secrets_open(c->st->secrets, sealed, &b->password,
	                                               &b->password_len, why, sizeof why) < 0))
		rp_log_error("node %s: cannot open its BMC password: %s", name,
		             c->st->secrets ? why : "no secret key loaded");
	b->tls_verify = sql_type(s, i + 5) == SQL_NULL || sql_int(s, i + 5);
	if (sql_type(s, i + 6) != SQL_NULL)
		b->options = json_loads(sql_text(s, i + 6), 0, NULL);
}

enum rp_err
store_power_seen(struct conn *c, const struct node_ref *n, const char *power, int64_t now,
                 int *changed)
{
	enum rp_err e;
	struct stmt *s = STMT(c, "SELECT power_state FROM nodes WHERE id = ?");
	char before[16] = "", summary[200];

	sql_bind_int(s, 1, n->id);
	if ((e = store_one(c, s, "power read")) != RP_ERR_OK)
		return e;
	snprintf(before, sizeof before, "%s", sql_text(s, 0));
	sql_reset(s);
	s = STMT_ARGS(c, "UPDATE nodes SET power_state = ?2, power_state_at = ?3 WHERE id = ?1",
	              n->id, power, now);
	if ((e = store_exec(c, s, "power write")) != RP_ERR_OK)
		return e;
	if (strcmp(before, power) == 0)
		return RP_ERR_OK;
	if (changed)
		(*changed)++;
	snprintf(summary, sizeof summary, "%s power %s -> %s", n->name, before, power);
	{
		json_t *d = json_pack("{s:s, s:s}", "from", before, "to", power);
		e = store_event(c, "rackpilotd", "node.power", "node", n->uuid, n->name, n->id,
		                n->rack_id, summary, d);

		json_decref(d);
		return e;
	}
}

enum rp_err
store_bmc_health(struct conn *c, const struct node_ref *n, int ok, const char *error, int threshold,
                 int64_t now)
{
	struct stmt *s;
	char summary[400];
	int failures, had_fault;
	enum rp_err e;

	s = STMT_ARGS(c, "SELECT failures, fault IS NOT NULL FROM bmcs WHERE node_id = ?", n->id);
	if ((e = store_one(c, s, "bmc health")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_OK : e;
	failures = sql_int(s, 0);
	had_fault = sql_int(s, 1);
	sql_reset(s);
	failures = ok ? 0 : failures + 1;
	s = STMT_ARGS(c,
	              "UPDATE bmcs SET failures = ?2, checked_at = ?3, last_error = ?4, "
	              "fault = CASE WHEN ?2 = 0 THEN NULL WHEN ?2 >= ?5 THEN ?4 ELSE fault END, "
	              "fault_since = CASE WHEN ?2 = 0 THEN NULL WHEN ?2 >= ?5 THEN "
	              "coalesce(fault_since, ?3) ELSE fault_since END WHERE node_id = ?1",
	              n->id, failures, now, ok ? NULL : error, threshold);
	if ((e = store_exec(c, s, "bmc health write")) != RP_ERR_OK)
		return e;
	if (!ok && !had_fault && failures >= threshold) {
		snprintf(summary, sizeof summary, "BMC of %s failed %d times in a row: %s", n->name,
		         failures, error ? error : "");
		e = store_event(c, "rackpilotd", "node.bmc_fault", "node", n->uuid, n->name, n->id,
		                n->rack_id, summary, NULL);
	} else if (ok && had_fault) {
		snprintf(summary, sizeof summary, "BMC of %s answers again", n->name);
		e = store_event(c, "rackpilotd", "node.bmc_recovered", "node", n->uuid, n->name,
		                n->id, n->rack_id, summary, NULL);
	}
	return e;
}

enum rp_err
rp_store_power_targets(struct rp_store *st, struct rp_power_target **out, size_t *n)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct rp_power_target *list = NULL, *t;
	size_t len = 0, cap = 0;
	struct stmt *s;
	enum rp_err e = RP_ERR_OK;
	int oom = 0;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	s = STMT(c,
	         "SELECT n.id, n.uuid, n.name, b.driver, b.address, b.port, b.username, "
	         "b.password_sealed, b.tls_verify, b.options, EXISTS (SELECT 1 FROM power_caps p "
	         "WHERE p.node_id = n.id) FROM nodes n JOIN bmcs b ON "
	         "b.node_id = n.id WHERE n.maintenance = 0 AND (b.driver = 'fake' OR (b.address IS "
	         "NOT NULL AND b.username IS NOT NULL AND b.password_sealed IS NOT NULL)) ORDER BY "
	         "n.id");
	while (!oom && store_next(c, s, "power targets", &e)) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 256;

			if ((t = realloc(list, ncap * sizeof *t)) == NULL) {
				oom = 1;
				break;
			}
			list = t;
			cap = ncap;
		}
		t = &list[len++];
		memset(t, 0, sizeof *t);
		t->id = sql_int(s, 0);
		snprintf(t->uuid, sizeof t->uuid, "%s", sql_text(s, 1));
		t->name = store_col_dup(s, 2, &oom);
		store_bmc_cols(c, s, 3, t->name, &t->bmc, &oom);
		t->capped = sql_int(s, 10) != 0;
	}
	if (oom)
		sql_reset(s); /* left before its end */
	if (oom || e != RP_ERR_OK) {
		rp_store_power_targets_free(list, len);
		return oom ? RP_ERR_INTERNAL : e;
	}
	*out = list;
	*n = len;
	return RP_ERR_OK;
}

void
rp_store_power_target_clear(struct rp_power_target *t)
{
	if (t == NULL)
		return;
	free(t->name);
	t->name = NULL;
	store_bmc_free(&t->bmc);
	memset(&t->bmc, 0, sizeof t->bmc);
}

void
rp_store_power_targets_free(struct rp_power_target *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++)
		rp_store_power_target_clear(&t[i]);
	free(t);
}

enum rp_err
rp_store_power_record(struct rp_store *st, json_t *readings, int fault_threshold, int *changed)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *r;
	size_t i;
	int64_t now = rp_time_now_ms();
	enum rp_err e;
	int n_changed = 0;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	json_array_foreach(readings, i, r)
	{
		struct node_ref n;
		const char *power = json_string_value(json_object_get(r, "power"));
		int ok = json_is_true(json_object_get(r, "ok"));

		e = store_node_by_id(c, json_integer_value(json_object_get(r, "id")), &n);
		if (e == RP_ERR_NOT_FOUND)
			continue; /* deleted during the sweep */
		if (e != RP_ERR_OK)
			goto out;
		if (ok && power &&
		    (e = store_power_seen(c, &n, power, now, &n_changed)) != RP_ERR_OK)
			goto out;
		if ((e = store_bmc_health(c, &n, ok, json_string_value(json_object_get(r, "error")),
		                          fault_threshold, now)) != RP_ERR_OK)
			goto out;
	}
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*changed = n_changed;
out:
	store_rollback(c);
	return e;
}
