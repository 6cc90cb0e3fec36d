/* What the workload stack's exports (api/exports.c) are made of: the nodes a selector picks,
 * each with what Prometheus, Ansible and /etc/hosts need, in one read. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_export_nodes(struct rp_store *st, json_t *sel, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *ids = NULL, *list = NULL;
	struct stmt *s;
	char *text = NULL;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	if (sel && (e = store_select_nodes(c, sel, &ids, detail)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	if (ids && (text = json_dumps(ids, JSON_COMPACT)) == NULL)
		goto out;
		/* The address rackpilotd itself would use for SSH (ssh.address, else where the
		 * agent registered from); the model the node's class expects. */
#define EXPORT_SQL(where)                                                                          \
	"SELECT n.name, r.name AS rack, n.node_class AS node_class, n.provision_state, n.tags "    \
	"AS \"tags:json\", coalesce(n.ssh_address, a.address) AS address, a.hostname, "            \
	"json_extract(k.bom, '$.gpus.model') AS gpu_model, CAST(json_extract(k.bom, "              \
	"'$.gpus.count') AS INTEGER) AS gpu_count FROM nodes n LEFT JOIN racks r ON r.id = "       \
	"n.rack_id LEFT JOIN agents a ON a.node_id = n.id LEFT JOIN node_classes k ON k.name = "   \
	"n.node_class " where " ORDER BY n.name"
	if (text)
		s = STMT_ARGS(c,
		              EXPORT_SQL("WHERE n.id IN (SELECT CAST(value AS BIGINT) FROM "
		                         "json_each(?))"),
		              text);
	else
		s = STMT(c, EXPORT_SQL(""));
#undef EXPORT_SQL
	if ((list = store_rows(c, s)) == NULL)
		goto out;
	*out = list;
	list = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	free(text);
	json_decref(ids);
	json_decref(list);
	return e;
}
