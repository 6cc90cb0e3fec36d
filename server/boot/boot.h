/*
 * boot.h — network boot: iPXE scripts, image files, byte ranges, and the dnsmasq host list.
 *
 * Pure functions and file work; no database and no HTTP. The API decides what a machine gets
 * (docs/provisioning.md) and asks this module to say it in iPXE, to hash and place image
 * files, and to parse Range headers; main keeps dnsmasq's host file current with it.
 */
#ifndef RP_BOOT_H
#define RP_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* What a script boots. */
enum rp_boot_kind {
	RP_BOOT_LOCAL,   /* the machine's own disk */
	RP_BOOT_RAMDISK, /* the agent ramdisk */
	RP_BOOT_WAIT     /* nothing to do yet: print why and boot locally */
};

struct rp_boot_script {
	enum rp_boot_kind kind;
	const char *base;   /* "http://10.99.1.1:8080", no trailing slash */
	const char *who;    /* node name or "unknown machine" */
	const char *why;    /* state, or the reason for RP_BOOT_WAIT */
	const char *kernel; /* image names (RAMDISK) */
	const char *initrd;
	const char *cmdline;    /* the profile's extra kernel arguments; may be NULL */
	const char *token;      /* bootstrap token (RAMDISK) */
	const char *agent_url;  /* where the agent reaches the API (rackpilot.url=); NULL: base */
	const char *tls_sha256; /* the API's TLS public-key pin (rackpilot.tls_sha256=), or NULL */
};

/* Render an iPXE script into out. -1 when a string bound for the kernel line holds what must
 * not reach it (newlines, quotes) or a name is not a plain image name. who and why are only
 * echoed: unsafe bytes in them become '_', they never fail the script. */
int rp_boot_ipxe(const struct rp_boot_script *s, struct rp_buf *out);

/* Parse a Range header against a file of `size` bytes. Returns 0 for the whole file (no
 * header, a header this server does not honour, such as several ranges), 1 with
 * [*off, *off + *len) for one satisfiable range, -1 when unsatisfiable (answer 416). */
int rp_boot_range(const char *header, uint64_t size, uint64_t *off, uint64_t *len);

/* Replace path with content atomically, then SIGHUP the process named in pidfile (may be
 * NULL or missing: then only the file is written). 0, or -1 with why. */
int rp_boot_dnsmasq_update(const char *path, const char *pidfile, const char *content, size_t len,
                           char *why, size_t whylen);

#endif
