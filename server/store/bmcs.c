/* BMC settings that jobs learn from the BMC itself: IPMI workarounds found by probing. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
rp_store_bmc_workarounds_detected(struct rp_store *st, const char *node, const char *address,
                                  unsigned port, json_t *names)
{
	struct conn *c = store_conn(st);
	struct node_ref n;
	struct stmt *s;
	json_t *opts = NULL, *w, *detail = NULL;
	const char *driver, *addr, *text;
	char summary[300], list[160] = "", *canon = NULL;
	size_t i, len;
	unsigned had_port;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_INTERNAL;
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
