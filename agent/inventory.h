/*
 * inventory.h — the agent's hardware inventory collector: the object docs/inventory.md
 * describes, read from /proc, /sys and three optional tools (nvidia-smi, dmidecode, lldpctl).
 * Depends on libc (getifaddrs for the NICs' addresses), jansson, run.c (its tools run through
 * rp_agent_proc_run) and util/ (rp_buf).
 */
#ifndef RP_AGENT_INVENTORY_H
#define RP_AGENT_INVENTORY_H

#include <jansson.h>

/* Collect the node's inventory under root ("" or "/" (or NULL) for the live system; a
 * directory holding a captured tree in tests). Never fails on a missing, unreadable or
 * malformed source: that section becomes {"source": ..., "skipped": "why"}. Symlinks are
 * followed inside root only (absolute targets are re-rooted, ".." stops at root).
 * Commands (nvidia-smi, dmidecode, lldpctl) are run from the PATH (then /usr/sbin, /sbin,
 * /usr/bin, /bin) on a live system; with a non-empty root they are taken ONLY from
 * ROOT/usr/bin/<tool> (a fixture script), so tests never touch the host's tools. Each command
 * runs with a timeout, stdin and stderr on /dev/null, and a cap on its output.
 * Returns a new reference the caller owns, or NULL only when memory runs out. */
json_t *rp_agent_inventory(const char *root);

struct ifaddrs;

/* rp_agent_inventory() with the NICs' addresses (nics.items[].addresses) taken from ifa, a
 * list shaped as getifaddrs(3) makes it (NULL: none; it stays the caller's), instead of from
 * the host. rp_agent_inventory() passes getifaddrs()'s list for the live system and NULL for
 * any other root (a captured tree's NICs are not the host's); tests pass their own. */
json_t *rp_agent_inventory_from(const char *root, const struct ifaddrs *ifa);

#endif
