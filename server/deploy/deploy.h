/*
 * deploy.h — what a deploy gives the operating system it writes (docs/deploy.md): a
 * cloud-init NoCloud seed (meta-data, user-data, network-config) built from the deploy
 * request's `config`, its node class's `deploy_defaults` and the node's inventory, and the
 * first-boot report that proves the OS came up. Pure functions over JSON and strings, no
 * I/O: the API checks and resolves a config when the deploy is asked for, the job renders
 * the seed when it sends the plan.
 *
 * A config (request `config`, class `deploy_defaults`; every member optional):
 *   {hostname, ssh_authorized_keys: [..], user_data, network, meta: {name: string}}
 * network is either Rackpilot's short form, resolved against the inventory:
 *   {address "10.0.0.5/24", gateway, nameservers: [..], search: [..], mtu,
 *    bonds: [{name, interfaces: [NIC name or MAC], mode, mtu, address, gateway}],
 *    interfaces: [{name (NIC name or MAC), address | dhcp, mtu}]}
 * (the boot NIC, found by the node's MAC, takes address or DHCP; a NIC nobody names is
 * left out, InfiniBand and RoCE ports included), or a cloud-init network-config version 2
 * object ({"version": 2, ...}) used as it is.
 */
#ifndef RP_DEPLOY_H
#define RP_DEPLOY_H

#include <jansson.h>

#include "rackpilot/error.h"

/* The largest user_data one config may carry, in bytes. */
#define RP_DEPLOY_USER_DATA_MAX 65536

/* Check a config (borrowed) found at path ("config", "deploy_defaults"): only the members
 * above, a valid host name, public keys one per string in OpenSSH's form, user_data that
 * starts with "#cloud-config" (and then is YAML whose root is a mapping), "#!" (a script) or
 * "## template: jinja", addresses in CIDR form, no address twice, bond members named once.
 * NICs are not looked up here (rp_deploy_resolve does). RP_ERR_OK, or RP_ERR_INVALID_FIELD /
 * RP_ERR_UNKNOWN_FIELD with *detail {field ("config.network.bonds[0].mode"), reason}
 * (new reference). Fits rp_field's check. */
enum rp_err rp_deploy_config_check(json_t *cfg, const char *path, json_t **detail);

/* What the node is, for resolving: its name, rack and class (NULL: none), the MACs it was
 * enrolled with (an array of strings; the first one the inventory shows is the boot NIC),
 * and the inventory the agent reported (its "data" object; NULL: none). All borrowed. */
struct rp_deploy_node {
	const char *name;
	const char *rack;
	const char *cls;
	json_t *macs;
	json_t *inventory;
};

/* Merge a class's defaults and a request's config (both checked; either may be NULL) and
 * resolve them for node: hostname (the request's, the class's, else the node's name),
 * ssh_authorized_keys (the class's then the request's, each once), user_data (an array: the
 * class's then the request's; cloud-init merges them), meta (the class's overlaid by the
 * request's), network (a network-config v2 object), addresses (the static IP addresses, no
 * prefix, for the uniqueness check). *out is a new object; RP_ERR_OK, or
 * RP_ERR_INVALID_FIELD with *detail {field, reason} (a NIC the inventory does not show, a
 * node name that is no host name, a NIC in two roles) or RP_ERR_CONFLICT (nothing is known
 * of the node's NICs: commission it). */
enum rp_err rp_deploy_resolve(json_t *defaults, json_t *cfg, const struct rp_deploy_node *node,
                              json_t **out, json_t **detail);

/* Where and how the deployed OS reports its first boot: url (https?://.../v1/agent/first-boot),
 * the single-use token, and pin: the server's public-key SHA-256 in hex ("" or NULL: none;
 * with https, curl is told to check it). */
struct rp_deploy_report {
	const char *url;
	const char *token;
	const char *pin;
};

/* The seed files for a resolved config (borrowed) and this deploy's instance_id: a new
 * object {"meta-data", "user-data", "network-config"} of strings. user-data is a MIME
 * multipart: the user_data parts as given, a cloud-config part with the public keys (merged
 * into the others' lists, never replacing them), and a shell script part that reports the
 * first boot to rep (NULL: left out). The result holds secrets (the token, the operator's
 * user data): wipe its strings before freeing (rp_deploy_seed_free). NULL on allocation
 * failure. */
json_t *rp_deploy_seed(json_t *resolved, const char *instance_id,
                       const struct rp_deploy_report *rep);

/* Wipe the strings of a seed (or any object of strings) and release it. Accepts NULL. */
void rp_deploy_seed_free(json_t *seed);

/* v as YAML (block style, strings double-quoted, keys plain where YAML allows): a new string,
 * NULL on allocation failure or for a value nested deeper than 32. */
char *rp_deploy_yaml(json_t *v);

/* Check a first-boot report body (borrowed): {hostname, kernel, addresses: [..],
 * instance_id} — hostname and kernel printable strings (at most 253 and 128 bytes),
 * addresses at most 64 IP addresses with an optional /prefix. RP_ERR_OK, or
 * RP_ERR_INVALID_FIELD / RP_ERR_UNKNOWN_FIELD / RP_ERR_MISSING_FIELD with *detail. */
enum rp_err rp_deploy_report_check(json_t *body, json_t **detail);

#endif
