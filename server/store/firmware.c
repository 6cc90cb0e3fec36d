/* Firmware: component versions per node, comparison with the class baseline, fleet drift. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_node_firmware(struct rp_store *st, const char *key, json_t **out)
{
	struct conn *c = store_conn(st);
	json_t *list = NULL, *desired = NULL, *item, *v;
	const char *comp, *baseline = NULL;
	char bname[128];
	sqlite3_stmt *s;
	struct node_ref n;
	int64_t id;
	enum rp_err e;
	size_t i;
	int rc;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_ref(c, key, &n)) != RP_ERR_OK)
		goto out;
	id = n.id;
	e = RP_ERR_INTERNAL;
	s = STMT(c, "SELECT component, version, updateable AS \"updateable:bool\", source, "
	            "read_at AS \"read_at:time\" FROM firmware_components WHERE node_id = ? "
	            "ORDER BY component");
	if (s == NULL)
		goto out;
	sqlite3_bind_int64(s, 1, id);
	if ((list = store_rows(c, s)) == NULL)
		goto out;
	s = STMT(c, "SELECT b.name, bc.component, bc.version FROM nodes n JOIN firmware_baselines "
	            "b ON b.node_class = n.node_class JOIN baseline_components bc ON "
	            "bc.baseline_id = b.id WHERE n.id = ?");
	if (s == NULL)
		goto out;
	sqlite3_bind_int64(s, 1, id);
	desired = json_object();
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		snprintf(bname, sizeof bname, "%s", (const char *)sqlite3_column_text(s, 0));
		baseline = bname;
		json_object_set_new(desired, (const char *)sqlite3_column_text(s, 1),
		                    json_string((const char *)sqlite3_column_text(s, 2)));
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		goto out;
	json_array_foreach(list, i, item)
	{
		const char *have = json_string_value(json_object_get(item, "version"));

		comp = json_string_value(json_object_get(item, "component"));
		v = json_object_get(desired, comp);
		json_object_set(item, "desired", v ? v : json_null());
		json_object_set_new(item, "status",
		                    json_string(v == NULL                                ? "unmanaged"
		                                : strcmp(json_string_value(v), have) == 0 ? "ok"
		                                                                          : "drift"));
	}
	json_object_foreach(desired, comp, v)
	{
		int seen = 0;

		json_array_foreach(list, i, item)
		{
			if (strcmp(json_string_value(json_object_get(item, "component")), comp) == 0)
				seen = 1;
		}
		if (!seen)
			json_array_append_new(list, json_pack("{s:s, s:n, s:n, s:n, s:n, s:O, s:s}",
			                                      "component", comp, "version", "updateable",
			                                      "source", "read_at", "desired", v, "status",
			                                      "missing"));
	}
	*out = json_pack("{s:s, s:s?, s:O}", "node", n.name, "baseline", baseline, "components", list);
	e = *out ? RP_ERR_OK : RP_ERR_INTERNAL;
out:
	store_read_end(c);
	json_decref(list);
	json_decref(desired);
	return e;
}

enum rp_err
rp_store_node_firmware_set(struct rp_store *st, const char *key, const char *source,
                           json_t *components, const char *actor)
{
	struct conn *c = store_conn(st);
	sqlite3_stmt *s;
	int64_t now = rp_time_now_ms();
	struct node_ref n;
	json_t *v;
	enum rp_err e;
	char summary[192];
	size_t i;
	int rc;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_ref(c, key, &n)) != RP_ERR_OK)
		goto out;
	json_array_foreach(components, i, v)
	{
		s = STMT(c, "INSERT INTO firmware_components(node_id, component, version, updateable, "
		            "source, read_at) VALUES (?,?,?,coalesce(?,0),?,?) ON CONFLICT(node_id, "
		            "component) DO UPDATE SET version = excluded.version, updateable = "
		            "excluded.updateable, source = excluded.source, read_at = excluded.read_at");
		if (s == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sqlite3_bind_int64(s, 1, n.id);
		store_bind_str(s, 2, v, "component");
		store_bind_str(s, 3, v, "version");
		store_bind_int(s, 4, v, "updateable");
		store_bind_text(s, 5, source);
		sqlite3_bind_int64(s, 6, now);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
		if (rc != SQLITE_DONE) {
			e = store_sqlerr(c, rc, "firmware set");
			goto out;
		}
	}
	snprintf(summary, sizeof summary, "%zu firmware component(s) of %s read from %s",
	         json_array_size(components), n.name, source);
	if ((e = store_event(c, actor, "node.firmware_read", "node", n.uuid, n.name, n.id, n.rack_id,
	                     summary, components)) != RP_ERR_OK)
		goto out;
	e = store_commit(c);
out:
	store_rollback(c);
	return e;
}

#define FW_DRIFT_WHERE                                                                     \
	"(?1 = 0 OR n.rack_id = ?1) AND (?2 = 0 OR n.id = ?2) AND (?3 IS NULL OR "            \
	"n.node_class = ?3) "

enum rp_err
rp_store_firmware_drift(struct rp_store *st, json_t *filter, json_t **out)
{
	struct conn *c = store_conn(st);
	sqlite3_stmt *s;
	json_t *items = NULL;
	int64_t rack_id, node_id, checked = 0;
	enum rp_err e;
	int i;

	if (c == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_read_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = store_drift_filter(c, filter, &rack_id, &node_id)) != RP_ERR_OK)
		goto out;
	for (i = 0; i < 2; i++) {
		s = i == 0 ? STMT(c, "SELECT count(*) FROM nodes n JOIN firmware_baselines b ON "
		                     "b.node_class = n.node_class WHERE " FW_DRIFT_WHERE)
		           : STMT(c, "SELECT n.name, r.name, n.node_class, b.name, bc.component, "
		                     "fc.version, bc.version FROM nodes n JOIN firmware_baselines b ON "
		                     "b.node_class = n.node_class JOIN baseline_components bc ON "
		                     "bc.baseline_id = b.id LEFT JOIN firmware_components fc ON "
		                     "fc.node_id = n.id AND fc.component = bc.component LEFT JOIN "
		                     "racks r ON r.id = n.rack_id WHERE fc.version IS NOT bc.version "
		                     "AND " FW_DRIFT_WHERE "ORDER BY n.name, bc.component");
		if (s == NULL) {
			e = RP_ERR_INTERNAL;
			goto out;
		}
		sqlite3_bind_int64(s, 1, rack_id);
		sqlite3_bind_int64(s, 2, node_id);
		store_bind_str(s, 3, filter, "class");
		e = i == 0 ? store_drift_count(c, s, &checked)
		           : store_drift_collect(c, s, "baseline", "components", 0, &items);
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
