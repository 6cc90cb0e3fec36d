/*
 * fuzz_api — the request router and every JSON body validator, through the real dispatcher
 * (http/daemon.c on loopback) against a real store, as admin.
 *
 * Input: up to 4 requests separated by "\n%%\n". Each request is lines:
 *   METHOD            (GET, POST, ...; anything else is sent as it is, cleaned)
 *   TARGET            path?query; "~K/a/b" takes route K of the table (K a byte, modulo the
 *                     table) and fills its {captures} with a, b, ...
 *   If-Match value    (empty: no header)
 *   Range value       (empty: none)
 *   Content-Type      (empty: application/json when there is a body)
 *   BODY...           (the rest, may be empty: then none is sent)
 * Every reply is checked by fz_check_reply (fuzz_server.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
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

/* The next line of [*p, end): its length; *p moves past it and its newline. */
static size_t
next_line(const char **p, const char *end, const char **line)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);

	*line = *p;
	*p = nl ? nl + 1 : end;
	return n;
}

/* "~K/a/b?q": route K's pattern with its captures filled from a, b (missing ones "x"). */
static void
route_target(const char *s, size_t n, char *out, size_t cap, const char **method)
{
	const struct rp_route *rt;
	char raw[1024];
	const char *p, *arg, *q;
	size_t o = 0, an;

	if (n < 2) {
		snprintf(out, cap, "/");
		return;
	}
	rt = &rp_api_routes[(unsigned char)s[1] % rp_api_route_count];
	if (*method == NULL)
		*method = rt->method;
	arg = s + 2;
	q = memchr(arg, '?', n - 2);
	an = q ? (size_t)(q - arg) : n - 2;
	for (p = rt->pattern; *p && o + 1 < sizeof raw; p++) {
		if (*p != '{') {
			raw[o++] = *p;
			continue;
		}
		p = strchr(p, '}');
		/* The next "/seg" of the argument list fills this capture. */
		while (an > 0 && *arg == '/')
			arg++, an--;
		{
			size_t sn = 0;

			while (sn < an && arg[sn] != '/')
				sn++;
			if (sn == 0) {
				raw[o++] = 'x';
			} else {
				if (sn > sizeof raw - o - 1)
					sn = sizeof raw - o - 1;
				memcpy(raw + o, arg, sn);
				o += sn;
			}
			arg += sn;
			an -= sn;
		}
	}
	if (q && o + 1 < sizeof raw) {
		size_t qn = n - (size_t)(q - s);

		if (qn > sizeof raw - o - 1)
			qn = sizeof raw - o - 1;
		memcpy(raw + o, q, qn);
		o += qn;
	}
	fz_target_encode(raw, o, out, cap);
}

static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", NULL};

static void
one(const char *p, const char *end)
{
	const char *l, *method = NULL;
	char m[32], target[3200], im[256], rg[256], ct[256];
	char h_im[300], h_rg[300], h_ct[300], h_auth[128];
	const char *hdr[6];
	size_t n, nh = 0;
	struct fz_reply r;
	int i;

	n = next_line(&p, end, &l);
	fz_header_clean(l, n < 16 ? n : 16, m, sizeof m);
	for (i = 0; methods[i]; i++)
		if (!strcmp(m, methods[i]))
			method = methods[i];
	if (method == NULL && m[0]) {
		/* Any token is a method to HTTP; keep it one. */
		for (i = 0; m[i]; i++)
			if (m[i] <= ' ' || m[i] >= 0x7f || strchr("()<>@,;:\\\"/[]?={}", m[i]))
				m[i] = 'X';
		method = m;
	}
	n = next_line(&p, end, &l);
	if (n > 0 && l[0] == '~')
		route_target(l, n, target, sizeof target, &method);
	else if (n > 0 && l[0] == '/')
		fz_target_encode(l, n > 1024 ? 1024 : n, target, sizeof target);
	else {
		target[0] = '/';
		fz_target_encode(l, n > 1024 ? 1024 : n, target + 1, sizeof target - 1);
	}
	if (method == NULL)
		method = "GET";
	n = next_line(&p, end, &l);
	fz_header_clean(l, n, im, sizeof im);
	n = next_line(&p, end, &l);
	fz_header_clean(l, n, rg, sizeof rg);
	n = next_line(&p, end, &l);
	fz_header_clean(l, n, ct, sizeof ct);
	snprintf(h_auth, sizeof h_auth, "Authorization: %s", fz_admin_auth());
	hdr[nh++] = h_auth;
	if (im[0]) {
		snprintf(h_im, sizeof h_im, "If-Match: %s", im);
		hdr[nh++] = h_im;
	}
	if (rg[0]) {
		snprintf(h_rg, sizeof h_rg, "Range: %s", rg);
		hdr[nh++] = h_rg;
	}
	if (ct[0] || p < end) {
		snprintf(h_ct, sizeof h_ct, "Content-Type: %s", ct[0] ? ct : "application/json");
		hdr[nh++] = h_ct;
	}
	hdr[nh] = NULL;
	if (fz_request(method, target, hdr, p < end ? p : NULL, (size_t)(end - p), &r) < 0) {
		fprintf(stderr, "fuzz_api: no HTTP reply to %s %s\n", method, target);
		abort();
	}
	/* A HEAD reply has headers only; libmicrohttpd itself answers an unknown method. */
	if (strcmp(method, "HEAD") != 0 && (method == m ? r.status != 501 && r.status != 400 : 1))
		fz_check_reply(method, target, &r);
	fz_reply_clear(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	int k;

	fz_server_tick(4000);
	for (k = 0; k < 4 && p < end; k++) {
		const char *sep = memmem(p, (size_t)(end - p), "\n%%\n", 4);
		const char *stop = sep ? sep : end;

		one(p, stop);
		p = sep ? sep + 4 : end;
	}
	return 0;
}
