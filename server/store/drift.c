/* Fleet drift: the nodes whose actual values differ from what applies to them (a BIOS
 * profile, a firmware baseline). One implementation; each view brings its two statements.
 * The actual values come in as readings, recorded by one function here too. */
#include <string.h>

#include "internal.h"

/* The rack and node filters as row ids (0 = none); a named one that does not exist is a bad
 * query, not a missing resource. */
static enum rp_err
filter_ids(struct conn *c, json_t *filter, int64_t *rack_id, int64_t *node_id)
{
	const char *rack = json_string_value(json_object_get(filter, "rack"));
	const char *node = json_string_value(json_object_get(filter, "node"));
	enum rp_err e;

	*rack_id = *node_id = 0;
	if (rack && (e = store_id_of(c, T_RACK, rack, rack_id)) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_BAD_QUERY : e;
	if (node && (e = store_id_of(c, T_NODE, node, node_id)) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_BAD_QUERY : e;
	return RP_ERR_OK;
}

static enum rp_err
count(struct conn *c, struct stmt *s, int64_t *n)
{
	enum rp_err e;

	/* A count: always a row. */
	if ((e = store_one(c, s, "drift count")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
	*n = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

/* Rows are ordered by node, so a node's members are consecutive. */
static enum rp_err
collect(struct conn *c, struct stmt *s, struct store_drift_kind *k, json_t **items)
{
	json_t *out = json_array(), *cur = NULL;
	char last[128] = "";
	enum rp_err e;

	while (store_next(c, s, "drift", &e)) {
		const char *node = sql_text(s, 0);
		const char *member = sql_text(s, 4);
		json_t *a, *d;

		if (cur == NULL || strcmp(node, last) != 0) {
			cur = json_pack("{s:s, s:s?, s:s?, s:s, s:[]}", "node", node, "rack",
			                sql_text(s, 1), "node_class", sql_text(s, 2), k->target_key,
			                sql_text(s, 3), k->list_key);
			json_array_append_new(out, cur);
			snprintf(last, sizeof last, "%s", node);
		}
		if (k->json_values) {
			a = sql_type(s, 5) == SQL_NULL
			            ? NULL
			            : json_loads(sql_text(s, 5), JSON_DECODE_ANY, NULL);
			d = json_loads(sql_text(s, 6), JSON_DECODE_ANY, NULL);
		} else {
			a = sql_type(s, 5) == SQL_NULL ? NULL : json_string(sql_text(s, 5));
			d = json_string(sql_text(s, 6));
		}
		json_array_append_new(json_object_get(cur, k->list_key),
		                      json_pack("{s:s, s:o, s:o}", k->member_key, member, "actual",
		                                a ? a : json_null(), "desired",
		                                d ? d : json_null()));
	}
	if (e != RP_ERR_OK) {
		json_decref(out);
		return e;
	}
	*items = out;
	return RP_ERR_OK;
}

enum rp_err
store_drift(struct rp_store *st, json_t *filter, struct store_drift_kind *k, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *items = NULL;
	int64_t rack_id, node_id, checked = 0;
	enum rp_err e;
	int i;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = filter_ids(c, filter, &rack_id, &node_id)) != RP_ERR_OK)
		goto out;
	for (i = 0; i < 2; i++) {
		if ((s = i == 0 ? store_prep(c, &k->s_count, k->sql_count)
		                : store_prep(c, &k->s_rows, k->sql_rows)) == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sql_bind_int(s, 1, rack_id);
		sql_bind_int(s, 2, node_id);
		store_bind_str(s, 3, filter, "class");
		e = i == 0 ? count(c, s, &checked) : collect(c, s, k, &items);
		if (e != RP_ERR_OK)
			goto out;
	}
	*out = json_pack("{s:I, s:I, s:o}", "nodes_checked", (json_int_t)checked, "nodes_drifted",
	                 (json_int_t)json_array_size(items), "items", items);
	items = NULL;
out:
	store_read_end(c);
	json_decref(items);
	return e;
}

enum rp_err
store_node_reading(struct rp_store *st, const char *key, const char *source, json_t *v,
                   const char *actor, const char *type, const char *what,
                   enum rp_err (*write)(struct conn *c, const struct node_ref *n, json_t *v,
                                        const char *source, int64_t now))
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;
	char summary[192];

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	if ((e = write(c, &n, v, source, rp_time_now_ms())) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "%zu %s of %s read from %s",
	         json_is_array(v) ? json_array_size(v) : json_object_size(v), what, n.name, source);
	e = store_event(c, actor, type, "node", n.uuid, n.name, n.id, n.rack_id, summary, v);
out:
	return store_end(c, e, NULL, NULL);
}
