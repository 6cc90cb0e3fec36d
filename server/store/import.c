/* Bulk import: one transaction, every bad row reported, nothing written on any error. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

static void
row_error(json_t *errors, const char *kind, size_t index, json_t *item, enum rp_err e, json_t *why)
{
	json_t *row = json_pack(
	        "{s:s, s:I, s:O, s:s}", "kind", kind, "index", (json_int_t)index, "name",
	        json_object_get(item, "name") ? json_object_get(item, "name") : json_null(), "code",
	        rp_err_code(e));

	if (json_is_object(why))
		json_object_update(row, why);
	else
		json_object_set_new(row, "reason", json_string(rp_err_message(e)));
	json_array_append_new(errors, row);
}

/* Client-side faults a row can have; anything else aborts the import. */
static int
row_fault(enum rp_err e)
{
	return rp_err_status(e) >= 400 && rp_err_status(e) < 500;
}

enum rp_err
rp_store_import(struct rp_store *st, json_t *manifest, int create_racks, int dry_run,
                const char *actor, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	json_t *errors = json_array(), *created_racks = json_array(), *item, *made = json_array();
	int64_t id, racks = 0, nodes = 0, classes = 0, cables = 0;
	int rotations = 0;
	enum rp_err e;
	size_t i;
	char summary[160];

	if (c == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	if ((e = store_begin(c)) != RP_ERR_OK)
		goto out;
	json_array_foreach(json_object_get(manifest, "racks"), i, item)
	{
		json_t *why = NULL;

		e = store_rack_insert(c, item, actor, &id, &why);
		if (e == RP_ERR_OK)
			racks++;
		else if (row_fault(e))
			row_error(errors, "rack", i, item, e, why);
		json_decref(why);
		if (e != RP_ERR_OK && !row_fault(e))
			goto out;
	}
	json_array_foreach(json_object_get(manifest, "nodes"), i, item)
	{
		const char *rack = json_string_value(json_object_get(item, "rack"));
		json_t *why = NULL;

		if (create_racks && rack && store_id_of(c, T_RACK, rack, &id) == RP_ERR_NOT_FOUND) {
			json_t *r = json_pack("{s:s}", "name", rack);

			json_object_update_missing(r, json_object_get(item, "_rack"));
			e = store_rack_insert(c, r, actor, &id, &why);
			json_decref(r);
			if (e == RP_ERR_OK) {
				racks++;
				json_array_append_new(created_racks, json_string(rack));
			} else if (!row_fault(e)) {
				goto out;
			}
			json_decref(why);
			why = NULL;
		}
		e = store_node_insert(c, item, actor, &id, &why);
		if (e == RP_ERR_OK) {
			nodes++;
			json_array_append_new(made, json_integer(id));
		} else if (row_fault(e))
			row_error(errors, "node", i, item, e, why);
		json_decref(why);
		if (e != RP_ERR_OK && !row_fault(e))
			goto out;
	}
	/* Classes and cabling after the nodes: a cable names a node the same manifest creates. */
	json_array_foreach(json_object_get(manifest, "classes"), i, item)
	{
		int created = 0;

		e = store_class_put(c, item, actor, &created);
		if (e == RP_ERR_OK)
			classes++;
		else if (row_fault(e))
			row_error(errors, "class", i, item, e, NULL);
		if (e != RP_ERR_OK && !row_fault(e))
			goto out;
	}
	json_array_foreach(json_object_get(manifest, "cabling"), i, item)
	{
		json_t *why = NULL;

		e = store_cable_insert(c, item, 0, &why);
		if (e == RP_ERR_OK)
			cables++;
		else if (row_fault(e))
			row_error(errors, "cable", i, item, e, why);
		json_decref(why);
		if (e != RP_ERR_OK && !row_fault(e))
			goto out;
	}
	if (json_array_size(errors) > 0) {
		*detail = json_pack("{s:O}", "errors", errors);
		e = RP_ERR_IMPORT_INVALID;
		goto out;
	}
	/* After the classes: a class of the same manifest may ask for it. */
	json_array_foreach(made, i, item)
	{
		if ((e = store_rotate_on_enroll(
		             c, json_integer_value(item),
		             json_is_true(json_object_get(manifest, "_rotate_on_enroll")), actor,
		             &rotations)) != RP_ERR_OK)
			goto out;
	}
	*out = json_pack("{s:I, s:I, s:O, s:I, s:I, s:i, s:b}", "racks_created", (json_int_t)racks,
	                 "nodes_created", (json_int_t)nodes, "racks_auto_created", created_racks,
	                 "classes_set", (json_int_t)classes, "cables_planned", (json_int_t)cables,
	                 "rotations_queued", rotations, "dry_run", dry_run);
	if (dry_run) {
		e = RP_ERR_OK;
		goto out;
	}
	snprintf(summary, sizeof summary, "import: %lld rack(s), %lld node(s)", (long long)racks,
	         (long long)nodes);
	if ((e = store_event(c, actor, "import.applied", "import", NULL, NULL, 0, 0, summary,
	                     *out)) != RP_ERR_OK)
		goto fail;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto fail;
	goto out;
fail:
	json_decref(*out);
	*out = NULL;
out:
	if (c)
		store_rollback(c);
	json_decref(errors);
	json_decref(created_racks);
	json_decref(made);
	return e;
}

enum rp_err
rp_store_stats(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *by_state = NULL, *jobs = NULL;
	int64_t nodes = 0, racks = 0, bytes = 0, faults = 0, pending = 0;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT(c, "SELECT provision_state, count(*) FROM nodes GROUP BY provision_state");
	by_state = json_object();
	while (store_next(c, s, "stats nodes", &e)) {
		json_object_set_new(by_state, sql_text(s, 0), json_integer(sql_int(s, 1)));
		nodes += sql_int(s, 1);
	}
	if (e != RP_ERR_OK)
		goto out;
	s = STMT(c, "SELECT state, count(*) FROM jobs WHERE state IN ('queued', 'running') "
	            "GROUP BY state");
	jobs = json_pack("{s:i, s:i}", "queued", 0, "running", 0);
	while (store_next(c, s, "stats jobs", &e))
		json_object_set_new(jobs, sql_text(s, 0), json_integer(sql_int(s, 1)));
	if (e != RP_ERR_OK)
		goto out;
	s = STMT(c, "SELECT (SELECT count(*) FROM bmcs WHERE fault IS NOT NULL), (SELECT count(*) "
	            "FROM webhook_deliveries WHERE state = 'pending')");
	if ((e = store_one(c, s, "stats faults")) != RP_ERR_OK)
		goto out;
	faults = sql_int(s, 0);
	pending = sql_int(s, 1);
	sql_reset(s);
	s = STMT(c, "SELECT count(*) FROM racks");
	if ((e = store_one(c, s, "stats racks")) != RP_ERR_OK)
		goto out;
	racks = sql_int(s, 0);
	sql_reset(s);
	bytes = c->drv->size(c->db);
	*out = json_pack("{s:O, s:I, s:I, s:I, s:O, s:I, s:I}", "nodes_by_state", by_state, "nodes",
	                 (json_int_t)nodes, "racks", (json_int_t)racks, "db_bytes",
	                 (json_int_t)bytes, "jobs", jobs, "bmc_faults", (json_int_t)faults,
	                 "webhooks_pending", (json_int_t)pending);
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(by_state);
	json_decref(jobs);
	return e;
}

enum rp_err
rp_store_about(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	int64_t bytes;
	json_t *o;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	bytes = c->drv->size(c->db);
	o = json_pack("{s:s, s:s, s:i, s:o}", "kind", st->drv->file ? "sqlite" : "postgresql",
	              "name", st->name, "schema_version", st->version, "size_bytes",
	              bytes >= 0 ? json_integer(bytes) : json_null());
	if (o == NULL)
		return RP_ERR_INTERNAL;
	*out = o;
	return RP_ERR_OK;
}

enum rp_err
rp_store_ping(struct rp_store *st)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	s = STMT(c, "SELECT 1");
	if ((e = store_one(c, s, "ping")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
	sql_reset(s);
	return RP_ERR_OK;
}
