/*
 * fuzz_boot — what parses a booting machine's request: the Range parser (rp_boot_range), the
 * iPXE script writer (rp_boot_ipxe) with hostile strings, and GET /boot/ipxe?mac=...&... and
 * GET /boot/images/{image} with fuzzed query arguments, Host and Range headers through the
 * real dispatcher (api/boot.c).
 *
 * Input lines: RANGE, SIZE (decimal), QUERY (after "?"), HOST, then "|"-separated strings for
 * the script (base, who, why, kernel, initrd, cmdline, token, agent_url, tls pin).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/boot.h"
#include "fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_server_init();
	return 0;
}

static char *
line_dup(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
	char *s = malloc(n + 1);

	memcpy(s, *p, n);
	s[n] = '\0';
	*p = nl ? nl + 1 : end;
	return s;
}

static void
range(const char *h, uint64_t size)
{
	uint64_t off = 12345, len = 6789;
	int rc = rp_boot_range(h, size, &off, &len);

	if (rc == 1 && (len == 0 || off >= size || len > size - off)) {
		fprintf(stderr, "range %s of %" PRIu64 ": [%" PRIu64 ", +%" PRIu64 ")\n", h, size,
		        off, len);
		abort();
	}
	if (rc != 1 && (off != 12345 || len != 6789))
		abort(); /* out-params written on failure */
	if (rc < -1 || rc > 1)
		abort();
}

static void
script(char *spec)
{
	const char *f[9] = {0};
	struct rp_boot_script s = {0};
	struct rp_buf b = {0};
	char *p = spec;
	int i;

	for (i = 0; i < 9 && p; i++) {
		f[i] = p;
		if ((p = strchr(p, '|')) != NULL)
			*p++ = '\0';
	}
	s.kind = (enum rp_boot_kind)(spec[0] % 3);
	s.base = f[0] ? f[0] : "";
	s.who = f[1] ? f[1] : "";
	s.why = f[2] ? f[2] : "";
	s.kernel = f[3];
	s.initrd = f[4];
	s.cmdline = f[5];
	s.token = f[6];
	s.agent_url = f[7];
	s.tls_sha256 = f[8];
	if (rp_boot_ipxe(&s, &b) == 0) {
		/* The writer's promise: what it was given cannot start a line of its own, so every
		 * line of the script is one it wrote; a quote never comes from an argument. */
		if (b.len < 6 || memcmp(b.data, "#!ipxe", 6) != 0 || memchr(b.data, '\0', b.len)) {
			fprintf(stderr, "ipxe: not a script\n");
			abort();
		}
		for (i = 5; i < 8; i++)
			if (f[i] && (strchr(f[i], '\n') || strchr(f[i], '\r')) &&
			    (s.kind == RP_BOOT_RAMDISK)) {
				fprintf(stderr, "ipxe: a newline in field %d reached the script\n",
				        i);
				abort();
			}
	}
	rp_buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	char *rg = line_dup(&p, end), *sz = line_dup(&p, end), *q = line_dup(&p, end);
	char *host = line_dup(&p, end), *rest = line_dup(&p, end);
	char target[4200], h_host[600], h_rg[600], enc[4096];
	const char *hdr[3];
	struct fz_reply r;
	uint64_t size_v = strtoull(sz, NULL, 10);

	range(rg, size_v);
	script(rest);
	fz_server_tick(5000);
	fz_target_encode(q, strlen(q) > 1000 ? 1000 : strlen(q), enc, sizeof enc);
	snprintf(target, sizeof target, "/boot/ipxe?%s", enc);
	fz_header_clean(host, strlen(host), h_host + 6, sizeof h_host - 6);
	memcpy(h_host, "Host: ", 6);
	hdr[0] = h_host[6] ? h_host : NULL;
	hdr[1] = NULL;
	/* fz_request sends its own Host: a second one is what a hostile client would send. */
	if (fz_request("GET", target, hdr, NULL, 0, &r) < 0)
		abort();
	fz_check_reply("GET", target, &r);
	fz_reply_clear(&r);
	fz_target_encode(q, strlen(q) > 200 ? 200 : strlen(q), enc, sizeof enc);
	snprintf(target, sizeof target, "/boot/images/%s", enc[0] && !strchr(enc, '/') ? enc : "x");
	fz_header_clean(rg, strlen(rg), h_rg + 7, sizeof h_rg - 7);
	memcpy(h_rg, "Range: ", 7);
	hdr[0] = h_rg;
	if (fz_request("GET", target, hdr, NULL, 0, &r) < 0)
		abort();
	fz_check_reply("GET", target, &r);
	fz_reply_clear(&r);
	free(rg);
	free(sz);
	free(q);
	free(host);
	free(rest);
	return 0;
}
