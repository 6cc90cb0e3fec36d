/*
 * fuzz_ws — WebSocket frames from a peer (rackpilot/ws.h, common/ws.c): rp_ws_parse over a
 * stream of frames, rp_ws_unmask on each payload, and rp_ws_accept on a key.
 *
 * Input: byte 0 picks the side (bit 0: a server, which requires masked frames) and the cap
 * (bits 1-3); the rest is the stream, read frame after frame as a server or client would, from
 * a copy of exactly its bytes. While rp_ws_parse looks at n bytes, those after them are
 * poisoned, so a read past n is an ASan report. The first 24 bytes of the stream are also
 * tried as a Sec-WebSocket-Key.
 *
 * Invariants: 1, 0 or -1, and *f untouched unless 1; a frame read lies inside the buffer,
 * is within the cap, has a known opcode, a final control frame of at most 125 bytes, a mask
 * when one is required, and a header that rp_ws_header writes again byte for byte (so every
 * length was in its minimal form); any cut of a frame read is "more needed", never an error;
 * unmasking twice gives the bytes back; an accepted key gives 28 characters of base64.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sanitizer/asan_interface.h>

#include "rackpilot/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint64_t caps[8] = {0, 1, 125, 126, 65535, 65536, 1 << 20, UINT64_MAX};

static void
check_key(const uint8_t *data, size_t size)
{
	char key[25], out[RP_WS_ACCEPT_BUF];
	size_t n = size < 24 ? size : 24, i;

	memcpy(key, data, n);
	key[n] = '\0';
	memset(out, 0x5a, sizeof out);
	if (rp_ws_accept(key, out) != 0) {
		if (out[0] != 0x5a)
			abort(); /* written on failure */
		return;
	}
	if (strlen(key) != 24 || strlen(out) != 28 || out[27] != '=')
		abort();
	for (i = 0; i < 27; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
		            out[i]))
			abort();
}

/* rp_ws_parse over the first n of the avail bytes at b, the others out of its reach. */
static int
parse(uint8_t *b, size_t n, size_t avail, uint64_t max, int need_mask, struct rp_ws_frame *f)
{
	int rc;

	ASAN_POISON_MEMORY_REGION(b + n, avail - n);
	rc = rp_ws_parse(b, n, max, need_mask, f);
	ASAN_UNPOISON_MEMORY_REGION(b + n, avail - n);
	return rc;
}

/* Read one frame from the n bytes at b: the bytes it took, or 0 when no frame was read. */
static size_t
one(uint8_t *b, size_t n, uint64_t max, int need_mask)
{
	uint8_t h[RP_WS_HEADER_MAX], *copy;
	struct rp_ws_frame f, sentinel;
	size_t cut, took = 0;
	int rc;

	memset(&sentinel, 0x5a, sizeof sentinel);
	f = sentinel;
	rc = parse(b, n, n, max, need_mask, &f);
	if (rc < -1 || rc > 1)
		abort();
	if (rc != 1) {
		if (memcmp(&f, &sentinel, sizeof f) != 0)
			abort();
		return 0;
	}
	if (f.header < 2 || f.header > RP_WS_HEADER_MAX || f.header > n || f.len > n - f.header ||
	    f.len > max)
		abort();
	if (!(f.op == RP_WS_CONT || f.op == RP_WS_TEXT || f.op == RP_WS_BINARY ||
	      f.op == RP_WS_CLOSE || f.op == RP_WS_PING || f.op == RP_WS_PONG))
		abort();
	if ((f.op & 0x8) && (!f.fin || f.len > 125))
		abort();
	if ((need_mask && !f.masked) || (f.fin != 0 && f.fin != 1) ||
	    (f.masked != 0 && f.masked != 1))
		abort();
	if (rp_ws_header(h, f.op, f.fin, f.len, f.masked ? f.mask : NULL) != f.header ||
	    memcmp(h, b, f.header) != 0)
		abort();
	/* Every cut of the first bytes and of the last ones (all of them would be quadratic). */
	for (cut = 0; cut < f.header + f.len; cut++) {
		struct rp_ws_frame g = sentinel;

		if (cut == 64 && f.header + f.len > 128)
			cut = f.header + f.len - 64;
		if (parse(b, cut, n, max, need_mask, &g) != 0 ||
		    memcmp(&g, &sentinel, sizeof g) != 0)
			abort();
	}
	copy = malloc(f.len ? f.len : 1);
	if (copy == NULL)
		abort();
	memcpy(copy, b + f.header, f.len);
	rp_ws_unmask(b + f.header, f.len, f.mask);
	rp_ws_unmask(b + f.header, f.len, f.mask);
	if (memcmp(copy, b + f.header, f.len) != 0)
		abort();
	free(copy);
	took = f.header + f.len;
	return took;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0, took, n;
	uint64_t max;
	uint8_t *b;
	int need_mask;

	if (size < 1)
		return 0;
	need_mask = data[0] & 1;
	max = caps[(data[0] >> 1) & 7];
	check_key(data + 1, size - 1);
	n = size - 1;
	if ((b = malloc(n ? n : 1)) == NULL)
		abort();
	memcpy(b, data + 1, n);
	while ((took = one(b + off, n - off, max, need_mask)) > 0)
		off += took;
	free(b);
	return 0;
}
