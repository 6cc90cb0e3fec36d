/* What the workload stack's exports (api/exports.c) are made of: the nodes a selector picks,
 * each with what Prometheus, Ansible and /etc/hosts need, in one read. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_export_nodes(struct rp_store *st, const char *by, const char *value, json_t **out,
                      json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *list = NULL;
	struct stmt *s;
	int64_t rack = 0;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
		/* The address rackpilotd itself would use for SSH (ssh.address, else where the
		 * agent registered from); the model the node's class expects. Machines that booted
		 * and were discovered are nobody's yet: left out. */
#define EXPORT_SQL(where)                                                                          \
	"SELECT n.name, r.name AS rack, n.node_class AS node_class, n.provision_state, n.tags "    \
	"AS \"tags:json\", coalesce(n.ssh_address, a.address) AS address, "                        \
	"json_extract(k.bom, '$.gpus.model') AS gpu_model, CAST(json_extract(k.bom, "              \
	"'$.gpus.count') AS INTEGER) AS gpu_count FROM nodes n LEFT JOIN racks r ON r.id = "       \
	"n.rack_id LEFT JOIN agents a ON a.node_id = n.id LEFT JOIN node_classes k ON k.name = "   \
	"n.node_class WHERE n.provision_state <> 'discovered' " where " ORDER BY n.name"
	if (by == NULL) {
		s = STMT(c, EXPORT_SQL(""));
	} else if (!strcmp(by, "rack")) {
		if ((e = store_id_of(c, T_RACK, value, &rack)) != RP_ERR_OK) {
			if (e == RP_ERR_NOT_FOUND)
				*detail = store_why("rack", "no rack named '%s'", value);
			goto out;
		}
		s = STMT_ARGS(c, EXPORT_SQL("AND n.rack_id = ?"), rack);
	} else if (!strcmp(by, "tag")) {
		s = STMT_ARGS(
		        c, EXPORT_SQL("AND n.id IN (SELECT node_id FROM node_tags WHERE tag = ?)"),
		        value);
	} else {
		s = STMT_ARGS(c, EXPORT_SQL("AND n.node_class = ?"), value);
	}
#undef EXPORT_SQL
	e = RP_ERR_INTERNAL;
	if ((list = store_rows(c, s)) == NULL)
		goto out;
	*out = list;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	return e;
}
