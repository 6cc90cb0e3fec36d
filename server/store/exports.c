/* What the workload stack's exports (api/exports.c) are made of: the nodes a selector picks,
 * each with what Prometheus, Ansible, /etc/hosts and Slurm need, in one read, one at a time. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_export_nodes(struct rp_store *st, const char *by, const char *value, int inventory,
                      enum rp_err (*fn)(json_t *node, void *arg), void *arg, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	int64_t rack = 0;
	enum rp_err e;
	int rc;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
		/* The address rackpilotd itself would use for SSH (ssh.address, else where the
		 * agent registered from); the model the node's class expects. Machines that booted
		 * and were discovered are nobody's yet: left out. With inventory, also the class's
		 * BOM (NULL when the class is not defined) and the agent's latest report: `rest`
		 * is FROM, or INV (those columns, FROM and the inventory's join). */
#define EXPORT_SQL(rest, where)                                                                    \
	"SELECT n.name, r.name AS rack, n.node_class AS node_class, n.provision_state, n.tags "    \
	"AS \"tags:json\", coalesce(n.ssh_address, a.address) AS address, "                        \
	"json_extract(k.bom, '$.gpus.model') AS gpu_model, CAST(json_extract(k.bom, "              \
	"'$.gpus.count') AS INTEGER) AS gpu_count" rest                                            \
	" WHERE n.provision_state <> 'discovered' " where " ORDER BY n.name"
#define FROM                                                                                       \
	" FROM nodes n LEFT JOIN racks r ON r.id = n.rack_id LEFT JOIN agents a ON a.node_id = "   \
	"n.id LEFT JOIN node_classes k ON k.name = n.node_class"
#define INV                                                                                        \
	", k.bom AS \"bom:json\", i.data AS \"inventory:json\", i.collected_at AS "                \
	"inventory_at" FROM " LEFT JOIN inventory i ON i.node_id = n.id"
		/* Two call sites per selector: STMT caches one statement per site. */
#define BY(where, ...)                                                                             \
	(inventory ? STMT_ARGS(c, EXPORT_SQL(INV, where), __VA_ARGS__)                             \
	           : STMT_ARGS(c, EXPORT_SQL(FROM, where), __VA_ARGS__))
	if (by == NULL) {
		s = inventory ? STMT(c, EXPORT_SQL(INV, "")) : STMT(c, EXPORT_SQL(FROM, ""));
	} else if (!strcmp(by, "rack")) {
		if ((e = store_id_of(c, T_RACK, value, &rack)) != RP_ERR_OK) {
			if (e == RP_ERR_NOT_FOUND)
				*detail = store_why("rack", "no rack named '%s'", value);
			goto out;
		}
		s = BY("AND n.rack_id = ?", rack);
	} else if (!strcmp(by, "tag")) {
		s = BY("AND n.id IN (SELECT node_id FROM node_tags WHERE tag = ?)", value);
	} else {
		s = BY("AND n.node_class = ?", value);
	}
#undef BY
#undef INV
#undef FROM
#undef EXPORT_SQL
	e = RP_ERR_INTERNAL;
	if (s == NULL)
		goto out;
	/* Row by row: one node's inventory in memory at a time. */
	while ((rc = sql_step(s)) == SQL_ROW) {
		json_t *row = store_row(c, s);

		e = fn(row, arg);
		json_decref(row);
		if (e != RP_ERR_OK) {
			sql_reset(s);
			goto out;
		}
	}
	e = RP_ERR_INTERNAL;
	if (rc != SQL_DONE) {
		rp_log_error("store: export: %s", c->drv->errmsg(c->db));
		sql_reset(s);
		goto out;
	}
	sql_reset(s);
	e = RP_ERR_OK;
out:
	store_read_end(c);
	return e;
}
