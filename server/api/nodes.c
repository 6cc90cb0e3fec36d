/* /v1/nodes */
#include <string.h>

#include "api.h"
#include "bmc/options.h"

/* bmc.options: their names, types and ranges are bmc/options.h's table; whether they are the
 * named driver's is checked by rp_api_node_check, once the whole body is well-formed. */
static enum rp_err
options_fault(enum rp_bmc_opt_fault f, const char *path, const struct rp_bmc_opt_error *why,
              json_t **detail)
{
	char field[256];

	if (f == RP_BMC_OPT_OK)
		return RP_ERR_OK;
	if (why->field[0])
		snprintf(field, sizeof field, "%s.%s", path, why->field);
	else
		snprintf(field, sizeof field, "%s", path);
	field[127] = '\0'; /* as long as validate.c's field paths get */
	*detail = json_pack("{s:s, s:s}", "field", field, "reason", why->reason);
	return f == RP_BMC_OPT_UNKNOWN ? RP_ERR_UNKNOWN_FIELD : RP_ERR_INVALID_FIELD;
}

static enum rp_err
options_check(json_t *v, const char *path, json_t **detail)
{
	struct rp_bmc_opt_error why;

	return options_fault(rp_bmc_options_validate(NULL, v, &why), path, &why, detail);
}

static const struct rp_field bmc_fields[] = {
        {"driver", RP_F_ENUM, RP_F_REQUIRED, 0, 0, rp_bmc_drivers},
        {"address", RP_F_HOST, RP_F_NULLABLE},
        {"port", RP_F_INT, RP_F_NULLABLE, 1, 65535},
        {"username", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"password", RP_F_STR, RP_F_NULLABLE | RP_F_SECRET, 0, 256},
        {"tls_verify", RP_F_BOOL},
        {"options", RP_F_CHECK, RP_F_NULLABLE, .check = options_check},
        {"password_set", RP_F_READ_ONLY},
        {"fault", RP_F_READ_ONLY},
        {"identity", RP_F_READ_ONLY},
        {"checked_at", RP_F_READ_ONLY},
        {"last_error", RP_F_READ_ONLY},
        {NULL},
};

static const struct rp_field ssh_fields[] = {
        {"address", RP_F_HOST, RP_F_NULLABLE},
        {"port", RP_F_INT, RP_F_NULLABLE, 1, 65535},
        {"user", RP_F_NAME, RP_F_NULLABLE},
        {"host_key", RP_F_READ_ONLY},
        {NULL},
};

/* Shared with import, which validates manifest rows as node creations. */
const struct rp_field rp_api_selector_fields[] = {
        {"rack", RP_F_STR, 0, 0, 64},
        {"tag", RP_F_STR, 0, 0, 64},
        {"class", RP_F_STR, 0, 0, 64},
        {"nodes", RP_F_TAGS, 0, 0, 100000},
        {NULL},
};

static const char *const console_log_modes[] = {"always", "off", NULL};

const struct rp_field rp_api_node_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME, RP_F_REQUIRED},
        {"rack", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"u_position", RP_F_INT, RP_F_NULLABLE, 1, 64},
        {"u_height", RP_F_INT, 0, 1, 16},
        {"serial", RP_F_STR, RP_F_NULLABLE, 0, 128},
        {"system_uuid", RP_F_UUID, RP_F_NULLABLE},
        {"vendor", RP_F_STR, RP_F_NULLABLE, 0, 128},
        {"model", RP_F_STR, RP_F_NULLABLE, 0, 128},
        {"node_class", RP_F_NAME, RP_F_NULLABLE},
        {"tags", RP_F_TAGS, 0, 0, 64},
        {"macs", RP_F_MACS, 0, 0, 32},
        {"bmc", RP_F_OBJECT, RP_F_NULLABLE, 0, 0, NULL, bmc_fields},
        {"bios_profile", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"provision_state", RP_F_READ_ONLY},
        {"power_state", RP_F_READ_ONLY},
        {"power_state_at", RP_F_READ_ONLY},
        {"maintenance", RP_F_BOOL},
        {"maintenance_reason", RP_F_STR, RP_F_NULLABLE, 0, 256},
        {"console_log", RP_F_ENUM, RP_F_NULLABLE, 0, 0, console_log_modes},
        {"expected", RP_F_ANY_OBJECT, RP_F_NULLABLE},
        {"ssh", RP_F_OBJECT, RP_F_NULLABLE, 0, 0, NULL, ssh_fields},
        {"agent", RP_F_READ_ONLY},
        {"boot_profile", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"provision_error", RP_F_READ_ONLY},
        {"provision_job", RP_F_READ_ONLY},
        {"provision_at", RP_F_READ_ONLY},
        {"deployed_image", RP_F_READ_ONLY},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

static const char *const node_filters[] = {"rack",  "state",       "tag", "class",
                                           "power", "maintenance", "q",   NULL};

/* Options belong to one driver; when the request names the driver, check them against it. */
enum rp_err
rp_api_node_check(json_t *body, json_t **detail)
{
	json_t *bmc = json_object_get(body, "bmc");
	const char *driver = json_string_value(json_object_get(bmc, "driver"));
	struct rp_bmc_opt_error why;

	if (driver == NULL)
		return RP_ERR_OK;
	return options_fault(rp_bmc_options_validate(driver, json_object_get(bmc, "options"), &why),
	                     "bmc.options", &why, detail);
}

static const struct rp_crud nodes = {
        .what = "node",
        .collection = "/v1/nodes",
        .spec = rp_api_node_fields,
        .filters = node_filters,
        .sortable = 1,
        RP_CRUD_STORE(node),
        .check = rp_api_node_check,
};

void
rp_api_nodes_create(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_create(&nodes, rq, rs);
}

void
rp_api_nodes_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const booleans[] = {"true", "false", NULL};

	if (rp_api_query_one_of(rq, rs, "maintenance", booleans) == 0)
		rp_api_crud_list(&nodes, rq, rs);
}

void
rp_api_nodes_get(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_get(&nodes, rq, rs);
}

void
rp_api_nodes_update(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_update(&nodes, rq, rs);
}

void
rp_api_nodes_delete(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_crud_delete(&nodes, rq, rs);
}

void
rp_api_nodes_inventory(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rp_api_view(rq, rs, rp_store_node_inventory, "node");
}
