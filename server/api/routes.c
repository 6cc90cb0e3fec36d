/*
 * The route table: every endpoint of rackpilotd, its handler and the least role that may
 * call it. docs/openapi.yaml must describe each row (a test checks).
 */
#include "api.h"

#define V RP_ROLE_VIEWER
#define O RP_ROLE_OPERATOR
#define A RP_ROLE_ADMIN

const struct rp_route rp_api_routes[] = {
        {"GET", "/healthz", rp_api_healthz, RP_ROLE_NONE, 0},

        /* Network boot: no token (they reveal nothing secret; docs/provisioning.md). */
        {"GET", "/boot/ipxe", rp_api_boot_ipxe, RP_ROLE_NONE,
         RP_ROUTE_BOOT | RP_ROUTE_LIMIT | RP_ROUTE_PEER},
        {"GET", "/boot/images/{image}", rp_api_boot_image, RP_ROLE_NONE,
         RP_ROUTE_BOOT | RP_ROUTE_LIMIT},
        /* The web view: static files, no secrets; the page brings its own token (ui.c). */
        {"GET", "/ui", rp_api_ui_index, RP_ROLE_NONE, 0},
        {"GET", "/ui/{file}", rp_api_ui_file, RP_ROLE_NONE, 0},
        {"GET", "/metrics", rp_api_metrics, V, 0},
        {"GET", "/v1", rp_api_root, V, 0},

        {"GET", "/v1/tokens", rp_api_tokens_list, A, 0},
        {"POST", "/v1/tokens", rp_api_tokens_create, A, 0},
        {"DELETE", "/v1/tokens/{id}", rp_api_tokens_revoke, A, 0},

        {"GET", "/v1/racks", rp_api_racks_list, V, 0},
        {"POST", "/v1/racks", rp_api_racks_create, O, 0},
        {"GET", "/v1/racks/{rack}", rp_api_racks_get, V, 0},
        {"PATCH", "/v1/racks/{rack}", rp_api_racks_update, O, 0},
        {"DELETE", "/v1/racks/{rack}", rp_api_racks_delete, O, 0},
        {"GET", "/v1/racks/{rack}/elevation", rp_api_racks_elevation, V, 0},
        {"GET", "/v1/racks/{rack}/power", rp_api_racks_power, V, 0},
        {"GET", "/v1/racks/{rack}/power/history", rp_api_racks_power_history, V, 0},
        {"POST", "/v1/racks/{rack}/power-cap", rp_api_racks_power_cap, O, 0},
        {"GET", "/v1/racks/{rack}/cabling", rp_api_cabling_get, V, 0},
        {"PUT", "/v1/racks/{rack}/cabling", rp_api_cabling_put, O, 0},
        {"POST", "/v1/racks/{rack}/acceptance", rp_api_acceptance_start, O, 0},
        {"GET", "/v1/racks/{rack}/acceptance", rp_api_acceptance_get, V, 0},
        {"POST", "/v1/racks/{rack}/acceptance/signoff", rp_api_acceptance_signoff, A, 0},
        {"GET", "/v1/node-classes", rp_api_classes_list, V, 0},
        {"GET", "/v1/node-classes/{class}", rp_api_classes_get, V, 0},
        {"PUT", "/v1/node-classes/{class}", rp_api_classes_put, O, 0},
        {"DELETE", "/v1/node-classes/{class}", rp_api_classes_delete, O, 0},

        {"GET", "/v1/nodes", rp_api_nodes_list, V, 0},
        {"POST", "/v1/nodes", rp_api_nodes_create, O, 0},
        {"GET", "/v1/nodes/{node}", rp_api_nodes_get, V, 0},
        {"PATCH", "/v1/nodes/{node}", rp_api_nodes_update, O, 0},
        {"DELETE", "/v1/nodes/{node}", rp_api_nodes_delete, O, 0},
        {"GET", "/v1/nodes/{node}/inventory", rp_api_nodes_inventory, V, 0},
        {"GET", "/v1/nodes/{node}/bios", rp_api_bios_node, V, 0},
        {"POST", "/v1/nodes/{node}/bios/readings", rp_api_bios_node_readings, O, 0},
        {"GET", "/v1/nodes/{node}/firmware", rp_api_firmware_node, V, 0},
        {"POST", "/v1/nodes/{node}/firmware/readings", rp_api_firmware_node_readings, O, 0},
        {"POST", "/v1/nodes/{node}/firmware/refresh", rp_api_firmware_refresh, O, 0},
        {"POST", "/v1/nodes/{node}/firmware/update", rp_api_firmware_update, O, 0},
        {"POST", "/v1/nodes/{node}/bios/apply", rp_api_bios_apply, O, 0},
        {"POST", "/v1/nodes/{node}/steps", rp_api_nodes_steps, O, 0},
        {"PUT", "/v1/nodes/{node}/ssh-host-key", rp_api_nodes_host_key_set, O, 0},
        {"DELETE", "/v1/nodes/{node}/ssh-host-key", rp_api_nodes_host_key_clear, O, 0},
        {"PUT", "/v1/nodes/{node}/provision", rp_api_nodes_provision, O, 0},
        {"PUT", "/v1/nodes/{node}/power", rp_api_nodes_power, O, 0},
        {"PUT", "/v1/nodes/{node}/boot", rp_api_nodes_boot, O, 0},
        {"POST", "/v1/nodes/{node}/verify", rp_api_nodes_verify, O, 0},
        /* Operators only: what a node prints may hold secrets (its boot token). */
        {"GET", "/v1/nodes/{node}/console", rp_api_nodes_console, O, RP_ROUTE_WEBSOCKET},
        {"GET", "/v1/nodes/{node}/console/log", rp_api_nodes_console_log, O, 0},
        {"GET", "/v1/nodes/{node}/console/stream", rp_api_nodes_console_stream, O, 0},
        {"PUT", "/v1/nodes/{node}/identify", rp_api_nodes_identify, O, 0},
        {"POST", "/v1/nodes/{node}/bmc/reset", rp_api_nodes_bmc_reset, O, 0},
        {"POST", "/v1/nodes/{node}/bmc/credentials/rotate", rp_api_nodes_bmc_rotate, O, 0},
        {"GET", "/v1/nodes/{node}/sensors", rp_api_nodes_sensors, V, 0},
        {"GET", "/v1/nodes/{node}/sensors/history", rp_api_nodes_sensor_history, V, 0},

        {"GET", "/v1/bios/profiles", rp_api_bios_profiles_list, V, 0},
        {"POST", "/v1/bios/profiles", rp_api_bios_profiles_create, O, 0},
        {"GET", "/v1/bios/profiles/{profile}", rp_api_bios_profiles_get, V, 0},
        {"PATCH", "/v1/bios/profiles/{profile}", rp_api_bios_profiles_update, O, 0},
        {"DELETE", "/v1/bios/profiles/{profile}", rp_api_bios_profiles_delete, O, 0},
        {"GET", "/v1/bios/drift", rp_api_bios_drift, V, 0},

        {"GET", "/v1/firmware/baselines", rp_api_baselines_list, V, 0},
        {"POST", "/v1/firmware/baselines", rp_api_baselines_create, O, 0},
        {"GET", "/v1/firmware/baselines/{baseline}", rp_api_baselines_get, V, 0},
        {"PATCH", "/v1/firmware/baselines/{baseline}", rp_api_baselines_update, O, 0},
        {"DELETE", "/v1/firmware/baselines/{baseline}", rp_api_baselines_delete, O, 0},
        {"GET", "/v1/firmware/drift", rp_api_firmware_drift, V, 0},

        {"GET", "/v1/exports/prometheus", rp_api_export_prometheus, V, 0},
        {"GET", "/v1/exports/ansible", rp_api_export_ansible, V, 0},
        {"GET", "/v1/exports/hosts", rp_api_export_hosts, V, 0},
        {"GET", "/v1/exports/slurm", rp_api_export_slurm, V, 0},
        {"GET", "/v1/exports/slurm/gres.conf", rp_api_export_gres, V, 0},

        {"GET", "/v1/jobs", rp_api_jobs_list, V, 0},
        {"GET", "/v1/jobs/{id}", rp_api_jobs_get, V, 0},
        {"GET", "/v1/jobs/{id}/log", rp_api_jobs_log, V, 0},
        {"DELETE", "/v1/jobs/{id}", rp_api_jobs_cancel, O, 0},
        {"GET", "/v1/batches/{id}", rp_api_batches_get, V, 0},
        {"POST", "/v1/actions/power", rp_api_actions_power, O, 0},
        {"POST", "/v1/actions/steps", rp_api_actions_steps, O, 0},
        {"GET", "/v1/power/sync", rp_api_power_sync_get, V, 0},
        {"POST", "/v1/power/sync", rp_api_power_sync_start, O, 0},
        {"GET", "/v1/power", rp_api_power_overview, V, 0},
        {"GET", "/v1/power/caps", rp_api_power_caps, V, 0},
        {"GET", "/v1/sensors/sync", rp_api_sensor_sync_get, V, 0},
        {"POST", "/v1/sensors/sync", rp_api_sensor_sync_start, O, 0},

        {"GET", "/v1/rollouts", rp_api_rollouts_list, V, 0},
        {"POST", "/v1/rollouts", rp_api_rollouts_create, O, 0},
        {"GET", "/v1/rollouts/{id}", rp_api_rollouts_get, V, 0},
        {"POST", "/v1/rollouts/{id}/pause", rp_api_rollouts_pause, O, 0},
        {"POST", "/v1/rollouts/{id}/resume", rp_api_rollouts_resume, O, 0},
        {"POST", "/v1/rollouts/{id}/abort", rp_api_rollouts_abort, O, 0},

        {"GET", "/v1/webhooks", rp_api_webhooks_list, A, 0},
        {"POST", "/v1/webhooks", rp_api_webhooks_create, A, 0},
        {"GET", "/v1/webhooks/{webhook}", rp_api_webhooks_get, A, 0},
        {"PATCH", "/v1/webhooks/{webhook}", rp_api_webhooks_update, A, 0},
        {"DELETE", "/v1/webhooks/{webhook}", rp_api_webhooks_delete, A, 0},
        {"GET", "/v1/webhooks/{webhook}/deliveries", rp_api_webhooks_deliveries, A, 0},
        {"GET", "/v1/recipes", rp_api_recipes_list, V, 0},
        {"POST", "/v1/recipes", rp_api_recipes_create, O, 0},
        {"GET", "/v1/recipes/{recipe}", rp_api_recipes_get, V, 0},
        {"PATCH", "/v1/recipes/{recipe}", rp_api_recipes_update, O, 0},
        {"DELETE", "/v1/recipes/{recipe}", rp_api_recipes_delete, O, 0},

        {"GET", "/v1/images", rp_api_images_list, V, 0},
        {"POST", "/v1/images", rp_api_images_register, O, 0},
        {"GET", "/v1/images/{image}", rp_api_images_get, V, 0},
        {"PUT", "/v1/images/{image}", rp_api_images_upload, O, RP_ROUTE_UPLOAD},
        {"DELETE", "/v1/images/{image}", rp_api_images_delete, O, 0},
        {"GET", "/v1/boot-profiles", rp_api_boot_profiles_list, V, 0},
        {"POST", "/v1/boot-profiles", rp_api_boot_profiles_create, O, 0},
        {"GET", "/v1/boot-profiles/{profile}", rp_api_boot_profiles_get, V, 0},
        {"PATCH", "/v1/boot-profiles/{profile}", rp_api_boot_profiles_update, O, 0},
        {"DELETE", "/v1/boot-profiles/{profile}", rp_api_boot_profiles_delete, O, 0},

        {"GET", "/v1/ssh-key", rp_api_ssh_key, V, 0},
        {"GET", "/v1/bootstrap-tokens", rp_api_bootstrap_list, O, 0},
        {"POST", "/v1/bootstrap-tokens", rp_api_bootstrap_create, O, 0},
        {"DELETE", "/v1/bootstrap-tokens/{id}", rp_api_bootstrap_revoke, O, 0},

        /* The agent protocol (docs/agent-protocol.md). Registration brings its own secret, a
         * bootstrap token, so the dispatcher lets it through; the rest take agent tokens only. */
        {"POST", "/v1/agent/register", rp_api_agent_register, RP_ROLE_NONE,
         RP_ROUTE_PEER | RP_ROUTE_LIMIT | RP_ROUTE_INVENTORY},
        /* A deployed OS's first boot: the single-use token its seed carried. */
        {"POST", "/v1/agent/first-boot", rp_api_agent_first_boot, RP_ROLE_NONE,
         RP_ROUTE_PEER | RP_ROUTE_LIMIT},
        {"POST", "/v1/agent/heartbeat", rp_api_agent_heartbeat, RP_ROLE_AGENT, 0},
        {"POST", "/v1/agent/inventory", rp_api_agent_inventory, RP_ROLE_AGENT, RP_ROUTE_INVENTORY},
        {"POST", "/v1/agent/bios", rp_api_agent_bios, RP_ROLE_AGENT, 0},
        {"GET", "/v1/agent/config", rp_api_agent_config, RP_ROLE_AGENT, 0},
        {"GET", "/v1/agent/jobs/{job}", rp_api_agent_job, RP_ROLE_AGENT, 0},
        {"POST", "/v1/agent/jobs/{job}/steps/{step}", rp_api_agent_step, RP_ROLE_AGENT, 0},

        {"GET", "/v1/events", rp_api_events_list, V, 0},
        {"GET", "/v1/events/stream", rp_api_events_stream, V, 0},
        {"POST", "/v1/import", rp_api_import, O, RP_ROUTE_CSV | RP_ROUTE_BIG_BODY},
};

const size_t rp_api_route_count = sizeof rp_api_routes / sizeof rp_api_routes[0];
