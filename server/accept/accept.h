/*
 * accept.h — rack acceptance: the comparisons behind the checks (docs/acceptance.md). Pure
 * functions over JSON — a node's agent inventory (docs/inventory.md), its class's bill of
 * materials, its cabling plan entries — with no I/O, so they are unit-tested on fixture
 * inventories. Every mismatch becomes a finding an ops lead can act on:
 * {item, expected, actual, message, fix}.
 */
#ifndef RP_ACCEPT_H
#define RP_ACCEPT_H

#include <jansson.h>

#include "rackpilot/error.h"

/* The checks of a run, in the order they run (NULL-terminated): bmc, power, pxe, inventory,
 * firmware, bios, links, burn_in, power_thermal, sel. */
extern const char *const rp_accept_checks[];

/* Check a class bill of materials: only known members, counts >= 0, sizes and speeds > 0,
 * models non-empty strings of at most 128 bytes. RP_ERR_OK, or RP_ERR_UNKNOWN_FIELD /
 * RP_ERR_INVALID_FIELD with *detail {field ("bom.gpus.count"), reason} (new reference). */
enum rp_err rp_accept_bom_check(json_t *bom, json_t **detail);

/* Compare inventory with bom (both borrowed; bom already checked). Appends one finding per
 * mismatch to findings (an array) and returns how many it appended; -1 when inventory is
 * not an object. What the bom names but the inventory does not report is a finding too
 * ("not reported"), never a silent pass. */
int rp_accept_bom(json_t *bom, json_t *inventory, json_t *findings);

/* Check one cabling plan entry: {node, interface (name or MAC) | port_guid, switch, port}.
 * RP_ERR_OK, or RP_ERR_INVALID_FIELD / RP_ERR_UNKNOWN_FIELD / RP_ERR_MISSING_FIELD with
 * *detail {field, reason}. */
enum rp_err rp_accept_cable_check(json_t *entry, json_t **detail);

/* Links (check 6): every physical NIC and InfiniBand port the bom counts is up at its rated
 * speed (bom nics.min_speed_mbps, hcas.rate_gbps), and each cabling entry (borrowed array of
 * the node's entries) matches the node's LLDP neighbour on that interface or, for a
 * port_guid, its InfiniBand neighbour. Appends findings, returns how many; *unverified (may
 * be NULL) counts entries the node gave no neighbour data for (no lldpd, no IB neighbours):
 * those are findings too, with actual "not reported". */
int rp_accept_links(json_t *bom, json_t *cabling, json_t *inventory, json_t *findings,
                    int *unverified);

#endif
