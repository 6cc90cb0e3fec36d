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
 * models non-empty strings of at most 128 bytes, fabric.envelope_pct 1-100, fabric.interfaces
 * 1-64 distinct interface names, nccl.max_bytes a whole number > 0. RP_ERR_OK, or
 * RP_ERR_UNKNOWN_FIELD / RP_ERR_INVALID_FIELD with *detail {field ("bom.gpus.count"), reason}
 * (new reference). */
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

/* ---- Across nodes: the fabric and NCCL checks (fabric.c) ---------------------------------- */

/* The pairing schedule over n nodes (indices 0..n-1, in the rack's order): an array of rounds,
 * each an array of pairs [server, client] (JSON integers), no index twice in one round, so a
 * round's pairs run at once. ring (all_pairs 0): the cycle 0-1-...-(n-1)-0 as pairs
 * [i, i+1 mod n] (every node is the server of one pair and the client of another: for
 * n == 2, [0, 1] then [1, 0]), in 2 rounds for an even n and 3 for an odd one;
 * all_pairs: every unordered pair once as [lower, higher], by the circle method (n-1 rounds
 * for an even n, n for an odd one). n < 2: no rounds. New reference; NULL only when out of
 * memory, n > 4096, or all_pairs and n > 512 (130,816 pairs: past that an all-pairs run
 * would take days, and its schedule alone gigabytes). */
json_t *rp_accept_fabric_schedule(size_t n, int all_pairs);

/* The tests of one pair: which ports, which tool, what rate. bom: the class's bill of
 * materials (borrowed, may be NULL: members below); inv_s and inv_c: the server's and the
 * client's inventories (docs/inventory.md); cabling: the server's cabling plan entries
 * (borrowed array, may be NULL); ssh_addr: the server's SSH address (may be NULL); opts:
 * the run's fabric options ({ib_tool: "ib_write_bw" | "ib_read_bw"}, may be NULL; any other
 * ib_tool is ib_write_bw).
 * Returns a new array of tests, in a stable order (InfiniBand/RoCE ports by device and port,
 * then Ethernet interfaces by name):
 *   {"port": "mlx5_0/1" | "eth0", "tool": "ib_write_bw" | "ib_read_bw" | "iperf3",
 *    "device": "mlx5_0", "ib_port": 1,            (perftest only)
 *    "interface": "eth0",                        (iperf3 only)
 *    "address": server address the client connects to (string, or null when none is known),
 *    "line_gbps": the expected line rate, "min_gbps": line_gbps x envelope_pct / 100}
 * - InfiniBand/RoCE: every port of the server's infiniband.items of the bom's
 *   hcas.link_layer (any when unset) that the client has too (same device and port: rails
 *   pair up); line rate: bom hcas.rate_gbps, else the lower of the two reported rate_gbps;
 *   address: ssh_addr (perftest's out-of-band exchange). Ports whose device (1-64 bytes) or
 *   port number (1-255) the inventory does not report are left out.
 * - Ethernet: bom fabric.interfaces when given, else the server's cabling entries with an
 *   "interface" (a name or a MAC, resolved to the inventory's name) that are not IB ports
 *   (not on the PCI function of a port tested above: IPoIB, a RoCE netdev), else, when
 *   there are none, the interface whose addresses hold ssh_addr; line rate: bom
 *   fabric.ethernet_gbps, else the interface's speed_mbps / 1000, else bom
 *   nics.min_speed_mbps / 1000; address: the interface's first IPv4 in
 *   nics.items[].addresses ("10.0.0.7/24" -> "10.0.0.7"), else ssh_addr when that interface
 *   carries it or the inventory reports no addresses.
 * - envelope_pct: bom fabric.envelope_pct (default 90).
 * A port that cannot be tested (missing on the client, or an interface on the server; no line
 * rate; no address) is still listed, with "skip": the reason (line_gbps and min_gbps null
 * when there is no rate), so that the report says so instead of dropping it.
 * Returns an empty array when there is nothing to test; NULL only when out of memory. */
json_t *rp_accept_fabric_tests(json_t *bom, json_t *inv_s, json_t *inv_c, json_t *cabling,
                               const char *ssh_addr, json_t *opts);

/* The shell commands of one test (a test object from rp_accept_fabric_tests): the server side
 * (which listens on tcp_port and runs until one client is done) and the client side. Each
 * exits 77 with a message naming the tool when it is not installed (never passes), runs for
 * about duration_s, and is safe to pass to /bin/sh -c (every value shell-quoted). Fills
 * server and client (NUL-terminated; both untouched on failure); 0, or -1 when a buffer is
 * too small or the test is malformed: "skip" set, no address, an address or device that is
 * empty, starts with '-' (it would read as an option) or is over 255 / 64 bytes, tcp_port
 * outside 1-65535, duration_s outside 1-86400. */
int rp_accept_fabric_commands(json_t *test, int tcp_port, int duration_s, char *server, size_t slen,
                              char *client, size_t clen);

/* A tool's output, as the client step printed it (other lines around it are ignored):
 * 0 with *gbps (10^9 bit/s), or -1 with why ("no result line", the tool's own error);
 * an output over 8 MiB is refused unread. why may be NULL; it is written only on failure.
 * - perftest (ib_write_bw, ib_read_bw): the "BW average" column of the largest message
 *   size's row, in Gb/sec (--report_gbits) or MB/sec (MiB/s, converted).
 * - iperf3 -J: end.sum_received.bits_per_second (else end.sum.bits_per_second); a top-level
 *   "error" member fails with its text. */
int rp_accept_parse_perftest(const char *out, double *gbps, char *why, size_t len);
int rp_accept_parse_iperf3(const char *out, double *gbps, char *why, size_t len);

/* all_reduce_perf (nccl-tests) output: 0 with the out-of-place busbw (GB/s, 10^9 bytes/s) of
 * the largest message size's row in *busbw, that size in *bytes, and the "# Avg bus
 * bandwidth" figure in *avg (-1 when absent); -1 with why when there is no result row, a
 * row reports wrong values (#wrong > 0 out-of-place or in-place, "2 wrong values at 1048576
 * bytes (out-of-place)"; N/A, checking off with -c 0, is not wrong), or "# Out of bounds
 * values" is above 0 (nccl-tests before 2.13, whose "error" column is not a count). */
int rp_accept_parse_nccl(const char *out, double *busbw, double *avg, long long *bytes, char *why,
                         size_t len);

#endif
