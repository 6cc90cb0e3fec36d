/* Firmware: component versions per node, comparison with the class baseline, fleet drift. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_node_firmware(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *list = NULL, *desired = NULL, *item, *v;
	const char *comp, *baseline = NULL;
	char bname[128];
	struct stmt *s;
	struct node_ref n;
	int64_t id;
	enum rp_err e;
	size_t i;

	if ((e = store_read_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	id = n.id;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT component, version, updateable AS \"updateable:bool\", source, "
	              "read_at AS \"read_at:time\", board_id FROM firmware_components WHERE "
	              "node_id = ? ORDER BY component",
	              id);
	if ((list = store_rows(c, s)) == NULL)
		goto out;
	s = STMT_ARGS(
	        c,
	        "SELECT b.name, bc.component, bc.version FROM nodes n JOIN firmware_baselines "
	        "b ON b.node_class = n.node_class JOIN baseline_components bc ON "
	        "bc.baseline_id = b.id WHERE n.id = ?",
	        id);
	desired = json_object();
	while (store_next(c, s, "firmware desired", &e)) {
		snprintf(bname, sizeof bname, "%s", sql_text(s, 0));
		baseline = bname;
		json_object_set_new(desired, sql_text(s, 1), json_string(sql_text(s, 2)));
	}
	if (e != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	json_array_foreach(list, i, item)
	{
		const char *have = json_string_value(json_object_get(item, "version"));

		comp = json_string_value(json_object_get(item, "component"));
		v = json_object_get(desired, comp);
		json_object_set(item, "desired", v ? v : json_null());
		json_object_set_new(item, "status",
		                    json_string(v == NULL ? "unmanaged"
		                                : strcmp(json_string_value(v), have) == 0
		                                        ? "ok"
		                                        : "drift"));
	}
	json_object_foreach(desired, comp, v)
	{
		int seen = 0;

		json_array_foreach(list, i, item)
		{
			if (strcmp(json_string_value(json_object_get(item, "component")), comp) ==
			    0)
				seen = 1;
		}
		if (!seen)
			json_array_append_new(list, json_pack("{s:s, s:n, s:n, s:n, s:n, s:O, s:s}",
			                                      "component", comp, "version",
			                                      "updateable", "source", "read_at",
			                                      "desired", v, "status", "missing"));
	}
	*out = json_pack("{s:s, s:s?, s:O}", "node", n.name, "baseline", baseline, "components",
	                 list);
	e = *out ? RP_ERR_OK : RP_ERR_INTERNAL;
out:
	store_read_end(c);
	json_decref(list);
	json_decref(desired);
	return e;
}

/* store_node_reading's write: components into firmware_components. */
static enum rp_err
firmware_write(struct conn *c, const struct node_ref *n, json_t *components, const char *source,
               int64_t now)
{
	json_t *v;
	enum rp_err e;
	size_t i;

	json_array_foreach(components, i, v)
	{
		struct stmt *s = STMT_ARGS(
		        c,
		        "INSERT INTO firmware_components(node_id, component, version, updateable, "
		        "source, read_at) VALUES (?,?,?,coalesce(?,0),?,?) ON CONFLICT(node_id, "
		        "component) DO UPDATE SET version = excluded.version, updateable = "
		        "excluded.updateable, source = excluded.source, read_at = "
		        "excluded.read_at",
		        n->id);

		store_bind_str(s, 2, v, "component");
		store_bind_str(s, 3, v, "version");
		store_bind_int(s, 4, v, "updateable");
		sql_bind_text(s, 5, source);
		sql_bind_int(s, 6, now);
		if ((e = store_exec(c, s, "firmware set")) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

enum rp_err
rp_store_node_firmware_set(struct rp_store *st, const char *key, const char *source,
                           json_t *components, const char *actor)
{
	return store_node_reading(st, key, source, components, actor, "node.firmware_read",
	                          "firmware component(s)", firmware_write);
}

static struct store_drift_kind firmware_drift = {
        .sql_count = "SELECT count(*) FROM nodes n JOIN firmware_baselines b ON b.node_class = "
                     "n.node_class WHERE " STORE_DRIFT_WHERE,
        .sql_rows =
                "SELECT n.name, r.name, n.node_class, b.name, bc.component, fc.version, "
                "bc.version FROM nodes n JOIN firmware_baselines b ON b.node_class = "
                "n.node_class JOIN baseline_components bc ON bc.baseline_id = b.id LEFT "
                "JOIN firmware_components fc ON fc.node_id = n.id AND fc.component = "
                "bc.component LEFT JOIN racks r ON r.id = n.rack_id WHERE fc.version IS "
                "DISTINCT FROM bc.version AND " STORE_DRIFT_WHERE "ORDER BY n.name, bc.component",
        .target_key = "baseline",
        .list_key = "components",
        .member_key = "component",
        .json_values = 0,
};

enum rp_err
rp_store_firmware_drift(struct rp_store *st, json_t *filter, json_t **out)
{
	return store_drift(st, filter, &firmware_drift, out);
}

/* ---- Baselines: images and methods ---------------------------------------------------- */

static const char *const fw_methods[] = {"redfish", "redfish-push", "agent", NULL};

enum rp_err
store_baseline_check(struct conn *c, int64_t self, json_t *obj, json_t **detail)
{
	const char *comp;
	json_t *v;
	struct stmt *s;
	char field[200];
	enum rp_err e;

	(void)self;
	json_object_foreach(json_object_get(obj, "components"), comp, v)
	{
		const char *version = json_string_value(json_object_get(v, "version"));
		const char *image = json_string_value(json_object_get(v, "image"));
		const char *method = json_string_value(json_object_get(v, "method"));
		const char *recipe = json_string_value(json_object_get(v, "recipe"));
		const char *kind = NULL;
		int i, known = method == NULL;

		snprintf(field, sizeof field, "components.%.128s", comp);
		if (!json_is_object(v) || version == NULL) {
			*detail = store_why(field, "component '%s' needs a version", comp);
			return RP_ERR_INVALID_FIELD;
		}
		if (image == NULL) {
			snprintf(field, sizeof field, "components.%.128s.image", comp);
			*detail =
			        store_why(field,
			                  "component '%s' names no image: a baseline says what to "
			                  "flash (register the image under /v1/images first)",
			                  comp);
			return RP_ERR_INVALID_FIELD;
		}
		for (i = 0; method && fw_methods[i]; i++)
			known |= !strcmp(method, fw_methods[i]);
		if (!known) {
			snprintf(field, sizeof field, "components.%.128s.method", comp);
			*detail = store_why(field, "method must be redfish, redfish-push or agent");
			return RP_ERR_INVALID_FIELD;
		}
		s = STMT_ARGS(c, "SELECT kind FROM images WHERE name = ?", image);
		if ((e = store_one(c, s, "baseline image")) == RP_ERR_OK) {
			kind = strcmp(sql_text(s, 0), "kernel") && strcmp(sql_text(s, 0), "initrd")
			               ? "ok"
			               : "boot";
			sql_reset(s);
		} else if (e != RP_ERR_NOT_FOUND)
			return e;
		snprintf(field, sizeof field, "components.%.128s.image", comp);
		if (kind == NULL) {
			*detail = store_why(field, "no image named '%s' in the image store", image);
			return RP_ERR_INVALID_FIELD;
		}
		if (strcmp(kind, "ok") != 0) {
			*detail = store_why(field, "image '%s' is a kernel or initrd, not firmware",
			                    image);
			return RP_ERR_INVALID_FIELD;
		}
		if (method && !strcmp(method, "agent")) {
			snprintf(field, sizeof field, "components.%.128s.recipe", comp);
			if (recipe == NULL) {
				*detail = store_why(field,
				                    "method agent runs a flasher recipe: name it");
				return RP_ERR_INVALID_FIELD;
			}
			s = STMT_ARGS(c, "SELECT 1 FROM recipes WHERE name = ?", recipe);
			if ((e = store_one(c, s, "baseline recipe")) == RP_ERR_NOT_FOUND) {
				*detail = store_why(field, "no recipe named '%s'", recipe);
				return RP_ERR_INVALID_FIELD;
			}
			if (e != RP_ERR_OK)
				return e;
			sql_reset(s);
		}
	}
	return RP_ERR_OK;
}

/* ---- Versions the agent reports ------------------------------------------------------- */

/* board_id: the device's board id (a ConnectX PSID) or NULL. */
static enum rp_err
fw_put(struct conn *c, int64_t node_id, const char *component, const char *version,
       const char *source, int64_t now, const char *board_id)
{
	struct stmt *s;

	if (component == NULL || version == NULL || version[0] == '\0')
		return RP_ERR_OK;
	s = STMT_ARGS(c,
	              "INSERT INTO firmware_components(node_id, component, version, updateable, "
	              "source, read_at, board_id) VALUES (?,?,?,0,?,?,?) ON CONFLICT(node_id, "
	              "component) DO UPDATE SET version = excluded.version, source = "
	              "excluded.source, read_at = excluded.read_at, board_id = excluded.board_id",
	              node_id, component, version, source, now, board_id);
	return store_exec(c, s, "firmware put");
}

/* One version for a family of components when they agree, else "mixed". */
static void
family(char *out, size_t len, const char *version, int *first)
{
	if (version == NULL || version[0] == '\0')
		return;
	if (*first) {
		snprintf(out, len, "%s", version);
		*first = 0;
	} else if (strcmp(out, version) != 0)
		snprintf(out, len, "mixed");
}

enum rp_err
store_firmware_from_inventory(struct conn *c, const struct node_ref *n, json_t *data)
{
	int64_t now = rp_time_now_ms();
	char name[160], fam[128] = "";
	json_t *item;
	enum rp_err e;
	size_t i;
	int first = 1;

	if ((e = fw_put(
	             c, n->id, "dmi.bios",
	             json_string_value(json_object_get(
	                     json_object_get(json_object_get(data, "system"), "bios"), "version")),
	             "agent", now, NULL)) != RP_ERR_OK)
		return e;
	json_array_foreach(json_object_get(json_object_get(data, "gpus"), "items"), i, item)
	{
		const char *vb = json_string_value(json_object_get(item, "vbios"));
		json_t *idx = json_object_get(item, "index");

		snprintf(name, sizeof name, "gpu%lld.vbios",
		         (long long)(json_is_integer(idx) ? json_integer_value(idx)
		                                          : (json_int_t)i));
		if ((e = fw_put(c, n->id, name, vb, "agent", now, NULL)) != RP_ERR_OK)
			return e;
		family(fam, sizeof fam, vb, &first);
	}
	if (!first && (e = fw_put(c, n->id, "gpu.vbios", fam, "agent", now, NULL)) != RP_ERR_OK)
		return e;
	first = 1;
	json_array_foreach(json_object_get(json_object_get(data, "infiniband"), "items"), i, item)
	{
		const char *dev = json_string_value(json_object_get(item, "device"));
		const char *fw = json_string_value(json_object_get(item, "fw_version"));

		if (dev == NULL)
			continue;
		snprintf(name, sizeof name, "hca.%.100s", dev);
		if ((e = fw_put(c, n->id, name, fw, "agent", now,
		                json_string_value(json_object_get(item, "board_id")))) != RP_ERR_OK)
			return e;
		family(fam, sizeof fam, fw, &first);
	}
	if (!first && (e = fw_put(c, n->id, "hca", fam, "agent", now, NULL)) != RP_ERR_OK)
		return e;
	json_array_foreach(json_object_get(json_object_get(data, "nics"), "items"), i, item)
	{
		const char *nic = json_string_value(json_object_get(item, "name"));

		if (nic == NULL)
			continue;
		snprintf(name, sizeof name, "nic.%.100s", nic);
		if ((e = fw_put(c, n->id, name,
		                json_string_value(json_object_get(item, "firmware")), "agent", now,
		                NULL)) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

/* ---- Firmware update jobs ------------------------------------------------------------- */

enum rp_err
store_components_known(json_t *targets, json_t *only, json_t **detail)
{
	json_t *v, *t;
	size_t i, j;

	json_array_foreach(only, i, v)
	{
		int found = 0;

		json_array_foreach(targets, j, t) found |=
		        json_equal(json_object_get(t, "component"), v);
		if (!found) {
			*detail = json_pack("{s:s, s:s, s:O}", "field", "components", "reason",
			                    "not a component of the node's firmware baseline",
			                    "component", v);
			return RP_ERR_INVALID_FIELD;
		}
	}
	return RP_ERR_OK;
}

enum rp_err
rp_store_firmware_targets(struct rp_store *st, const char *key, json_t *only, json_t **out,
                          json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *targets = NULL, *v;
	char bname[128] = "", cls[128] = "";
	struct stmt *s;
	struct node_ref n;
	enum rp_err e;
	size_t i, j;

	if ((e = store_read_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT coalesce(n.node_class, ''), b.name FROM nodes n LEFT JOIN "
	              "firmware_baselines b ON b.node_class = n.node_class WHERE n.id = ?",
	              n.id);
	/* store_node_ref found the node in this snapshot: no row is a broken read. */
	if ((e = store_one(c, s, "firmware targets")) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			e = RP_ERR_INTERNAL;
		goto out;
	}
	snprintf(cls, sizeof cls, "%s", sql_text(s, 0));
	if (sql_type(s, 1) != SQL_NULL)
		snprintf(bname, sizeof bname, "%s", sql_text(s, 1));
	sql_reset(s);
	e = RP_ERR_INTERNAL;
	if (bname[0] == '\0') {
		*detail = store_why(NULL,
		                    cls[0] ? "node class '%s' has no firmware baseline"
		                           : "node %s has no node_class, so no firmware baseline",
		                    cls[0] ? cls : n.name);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	s = STMT_ARGS(
	        c,
	        "SELECT bc.component, bc.version, i.name AS image, i.file AS file, i.sha256, "
	        "bc.method, bc.recipe, fc.version AS current, fc.source AS source FROM nodes n "
	        "JOIN firmware_baselines b ON b.node_class = n.node_class JOIN "
	        "baseline_components bc ON bc.baseline_id = b.id LEFT JOIN images i ON i.id = "
	        "bc.image_id LEFT JOIN firmware_components fc ON fc.node_id = n.id AND "
	        "fc.component = bc.component WHERE n.id = ? ORDER BY bc.component",
	        n.id);
	if ((targets = store_rows(c, s)) == NULL)
		goto out;
	if ((e = store_components_known(targets, only, detail)) != RP_ERR_OK)
		goto out;
	if (json_array_size(only) > 0) {
		for (i = json_array_size(targets); i-- > 0;) {
			int keep = 0;

			json_array_foreach(only, j, v) keep |= json_equal(
			        json_object_get(json_array_get(targets, i), "component"), v);
			if (!keep)
				json_array_remove(targets, i);
		}
	}
	*out = json_pack("{s:s, s:s, s:o}", "node", n.name, "baseline", bname, "targets", targets);
	targets = NULL;
	e = *out ? RP_ERR_OK : RP_ERR_INTERNAL;
out:
	store_read_end(c);
	json_decref(targets);
	return e;
}

enum rp_err
rp_store_firmware_updates(struct rp_store *st, int64_t job_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	json_t *rows, *r, *map;
	size_t i;

	rows = store_rows(c, STMT_ARGS(c,
	                               "SELECT component, from_version AS \"from\", to_version AS "
	                               "\"to\", image, state, task, error FROM firmware_updates "
	                               "WHERE job_id = ? ORDER BY id",
	                               job_id));
	if (rows == NULL)
		return RP_ERR_INTERNAL;
	map = json_object();
	json_array_foreach(rows, i, r)
	        json_object_set(map, json_string_value(json_object_get(r, "component")), r);
	json_decref(rows);
	*out = map;
	return RP_ERR_OK;
}

enum rp_err
rp_store_firmware_update_sent(struct rp_store *st, int64_t job_id, const char *component,
                              const char *from, const char *to, const char *image)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	int64_t now = rp_time_now_ms();
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(
	        c,
	        "INSERT INTO firmware_updates(job_id, node_id, component, from_version, "
	        "to_version, image, state, sent_at, updated_at) SELECT id, node_id, ?2, ?3, ?4, "
	        "?5, 'sent', ?6, ?6 FROM jobs WHERE id = ?1 AND state = 'running' AND node_id IS "
	        "NOT NULL",
	        job_id, component, from, to, image, now);
	if ((e = store_exec(c, s, "update sent")) != RP_ERR_OK) {
		if (e == RP_ERR_CONFLICT)
			e = RP_ERR_DUPLICATE;
		goto out;
	}
	if (sql_changes(c) == 0) {
		e = RP_ERR_NOT_FOUND;
		goto out;
	}
	/* The job's own sent mark too: whatever else it does after a restart, it verifies. Its
	 * phase says which component it is at, for GET /v1/jobs/{id}. */
	e = store_job_sent(c, job_id, component, "sent", now);
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_firmware_update_set(struct rp_store *st, int64_t job_id, const char *component,
                             const char *state, const char *task, const char *error)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	if (state == NULL)
		s = STMT(c, "DELETE FROM firmware_updates WHERE job_id = ?1 AND component = ?2");
	else
		s = STMT(c, "UPDATE firmware_updates SET state = ?3, task = coalesce(?4, task), "
		            "error = "
		            "coalesce(?5, error), updated_at = ?6 WHERE job_id = ?1 AND component "
		            "= ?2");
	sql_bind_int(s, 1, job_id);
	sql_bind_text(s, 2, component);
	if (state) {
		sql_bind_text(s, 3, state);
		sql_bind_text(s, 4, task);
		sql_bind_text(s, 5, error);
		sql_bind_int(s, 6, rp_time_now_ms());
	}
	if ((e = store_exec(c, s, "update state")) != RP_ERR_OK)
		goto out;
	if (state &&
	    (e = store_job_phase(c, job_id, component, state, rp_time_now_ms())) != RP_ERR_OK)
		goto out;
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_firmware_agent_flash(struct rp_store *st, int64_t job_id, const char *component,
                              const char *from, const char *to, const char *image,
                              const char *recipe, json_t *args, char *child, size_t len,
                              json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *params = NULL, *extra;
	struct node_ref n;
	struct stmt *s;
	int64_t now = rp_time_now_ms();
	char summary[200], uuid[RP_UUID_BUF] = "";
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	extra = json_pack("{s:s}", "component", component);
	e = store_recipe_child(c, job_id, recipe, args, "a firmware update", extra, &n, uuid,
	                       &params, detail);
	json_decref(extra);
	if (e != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	/* The child's id is the row's task: a restart follows it and never queues another. */
	s = STMT_ARGS(
	        c,
	        "INSERT INTO firmware_updates(job_id, node_id, component, from_version, "
	        "to_version, image, state, task, sent_at, updated_at) VALUES (?1, ?2, ?3, ?4, "
	        "?5, ?6, 'polling', ?7, ?8, ?8)",
	        job_id, n.id, component, from, to, image, uuid, now);
	if ((e = store_exec(c, s, "agent flash")) != RP_ERR_OK) {
		if (e == RP_ERR_CONFLICT)
			e = RP_ERR_DUPLICATE;
		goto out;
	}
	if ((e = store_job_sent(c, job_id, component, "polling", now)) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "steps job queued for %s: recipe %s flashes %s to %s",
	         n.name, recipe, component, to);
	if ((e = store_event(c, "rackpilotd", "job.queued", "job", uuid, n.name, n.id, n.rack_id,
	                     summary, params)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	snprintf(child, len, "%s", uuid);
out:
	store_rollback(c);
	json_decref(params);
	return e;
}
