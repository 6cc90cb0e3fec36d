/*
 * inventory.h — the agent's hardware inventory collector: the object docs/inventory.md
 * describes, read from /proc, /sys and three optional tools (nvidia-smi, dmidecode, lldpctl).
 * Depends on libc, jansson, run.c (its tools run through rp_agent_proc_run) and util/ (rp_buf).
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

#endif
