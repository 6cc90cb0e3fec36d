/* Serial consoles as the store sees them: which nodes' consoles are logged now, one node's BMC
 * for an interactive console, and the events of console sessions. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define CONSOLE_COLS                                                                               \
	"SELECT n.id, n.uuid, n.name, b.driver, b.address, b.port, b.username, "                   \
	"b.password_sealed, "                                                                      \
	"b.tls_verify, b.options FROM nodes n JOIN bmcs b ON b.node_id = n.id "

/* A node is logged while an action that boots it runs (verifying, commissioning, deploying,
 * releasing) or its acceptance runs, or always (the server's mode "always", or the node's
 * console_log); never with console_log "off" or in maintenance. */
#define CONSOLE_WANTED                                                                             \
	"WHERE n.maintenance = 0 AND b.driver IN ('ipmi', 'redfish') AND b.address IS NOT NULL "   \
	"AND "                                                                                     \
	"coalesce(n.console_log, '') <> 'off' AND (?1 = 'always' OR n.console_log = 'always' OR "  \
	"(?1 = 'active' AND (n.provision_state IN ('verifying', 'commissioning', 'deploying', "    \
	"'releasing') OR EXISTS (SELECT 1 FROM jobs j WHERE j.node_id = n.id AND j.type = "        \
	"'acceptance' AND j.state IN ('queued', 'running'))))) ORDER BY n.id"

enum rp_err
rp_store_console_wanted(struct rp_store *st, const char *mode, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *list = json_array();
	enum rp_err e;

	if (list == NULL)
		return RP_ERR_INTERNAL;
	if ((e = store_read(st, &c)) != RP_ERR_OK) {
		json_decref(list);
		return e;
	}
	s = STMT_ARGS(c,
	              "SELECT n.uuid, n.name FROM nodes n JOIN bmcs b ON b.node_id = "
	              "n.id " CONSOLE_WANTED,
	              mode);
	while (store_next(c, s, "consoles wanted", &e))
		if (json_array_append_new(list, json_pack("{s:s, s:s}", "uuid", sql_text(s, 0),
		                                          "name", sql_text(s, 1))) < 0)
			e = RP_ERR_INTERNAL;
	store_read_end(c);
	if (e != RP_ERR_OK) {
		json_decref(list);
		return e;
	}
	*out = list;
	return RP_ERR_OK;
}

enum rp_err
rp_store_console_target(struct rp_store *st, const char *node, struct rp_power_target *out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref ref;
	struct rp_power_target t = {0};
	struct stmt *s;
	enum rp_err e;
	int oom = 0;

	if ((e = store_read_node(st, node, &c, &ref)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c, CONSOLE_COLS "WHERE n.id = ?", ref.id);
	if ((e = store_one(c, s, "console target")) == RP_ERR_OK) {
		t.id = sql_int(s, 0);
		snprintf(t.uuid, sizeof t.uuid, "%s", sql_text(s, 1));
		t.name = store_col_dup(s, 2, &oom);
		store_bmc_cols(c, s, 3, t.name, &t.bmc, &oom);
		sql_reset(s);
	} else if (e == RP_ERR_NOT_FOUND) {
		e = RP_ERR_CONFLICT; /* no BMC */
	}
	store_read_end(c);
	if (e == RP_ERR_OK && oom)
		e = RP_ERR_INTERNAL;
	if (e != RP_ERR_OK) {
		rp_store_power_target_clear(&t);
		return e;
	}
	*out = t;
	return RP_ERR_OK;
}

enum rp_err
rp_store_node_event(struct rp_store *st, const char *node, const char *actor, const char *action,
                    const char *summary, json_t *detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_write_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	e = store_event(c, actor, action, "node", n.uuid, n.name, n.id, n.rack_id, summary, detail);
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_node_names(struct rp_store *st, const char *node, char uuid[RP_UUID_BUF], char *name,
                    size_t namelen)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	enum rp_err e;

	if ((e = store_read_node(st, node, &c, &n)) != RP_ERR_OK)
		return e;
	store_read_end(c);
	snprintf(uuid, RP_UUID_BUF, "%s", n.uuid);
	snprintf(name, namelen, "%s", n.name);
	return RP_ERR_OK;
}
