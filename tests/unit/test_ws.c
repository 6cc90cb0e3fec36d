/* rackpilot/ws.h: the handshake's keys, frame headers in every length form, partial buffers,
 * and every frame a peer may not send. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rackpilot/common.h"
#include "rackpilot/ws.h"

static void
test_accept(void **state)
{
	char out[RP_WS_ACCEPT_BUF];
	static const char *const bad[] = {
	        "",
	        "dGhlIHNhbXBsZSBub25jZQ=",   /* 23 characters */
	        "dGhlIHNhbXBsZSBub25jZQ===", /* 25 */
	        "dGhlIHNhbXBsZSBub25jZQ",    /* no padding */
	        "dGhlIHNhbXBsZSBub25jZQAA",  /* 18 bytes, not 16 */
	        "dGhlIHNhbXBsZSBub25jZR==",  /* stray low bits: not canonical */
	        "dGhlIHNhbXBsZSBub25j*Q==",  /* not base64 */
	        "dGhlIHNhbXBsZSBub25j ZQ==", /* white space inside */
	        " GhlIHNhbXBsZSBub25jZQ==",  /* white space in front */
	        "dGhlIHNhbXBsZSBub25jZ===",  /* padding too early */
	        "dGhlIHNhbXBsZSBub25jZQ=\n", /* a line end */
	        "dGhlIHNhbXBsZSBub-_jZQ==",  /* base64url is another alphabet */
	};
	size_t i;

	(void)state;
	/* RFC 6455 1.3's example: SHA-1 b37a4f2c...b2bec4ea in base64. */
	assert_int_equal(rp_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(out, 'x', sizeof out);
		assert_int_equal(rp_ws_accept(bad[i], out), -1);
		assert_int_equal(out[0], 'x'); /* untouched on failure */
	}
	assert_int_equal(rp_ws_accept(NULL, out), -1);
}

static void
test_key(void **state)
{
	char a[RP_WS_KEY_BUF], b[RP_WS_KEY_BUF], acc[RP_WS_ACCEPT_BUF];

	(void)state;
	assert_int_equal(rp_ws_key(a), 0);
	assert_int_equal(rp_ws_key(b), 0);
	assert_int_equal(strlen(a), 24);
	assert_string_not_equal(a, b);
	/* A key we make is one the server takes. */
	assert_int_equal(rp_ws_accept(a, acc), 0);
	assert_int_equal(strlen(acc), 28);
}

/* A whole frame (header, then payload masked when mask is not NULL) into buf; its length. */
static size_t
frame(uint8_t *buf, enum rp_ws_op op, int fin, const uint8_t *payload, uint64_t len,
      const uint8_t *mask)
{
	size_t h = rp_ws_header(buf, op, fin, len, mask);

	memcpy(buf + h, payload, len);
	if (mask)
		rp_ws_unmask(buf + h, len, mask);
	return h + len;
}

static void
round_trip(uint64_t len, size_t want_header, const uint8_t *mask)
{
	uint8_t *payload = malloc(len ? len : 1), *buf = malloc(len + RP_WS_HEADER_MAX + 2);
	struct rp_ws_frame f;
	size_t n, cut, i;

	assert_non_null(payload);
	assert_non_null(buf);
	for (i = 0; i < len; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	n = frame(buf, RP_WS_BINARY, 1, payload, len, mask);
	assert_int_equal(n, want_header + len);
	assert_int_equal(rp_ws_parse(buf, n, len, mask != NULL, &f), 1);
	assert_int_equal(f.fin, 1);
	assert_int_equal(f.op, RP_WS_BINARY);
	assert_int_equal(f.masked, mask != NULL);
	assert_true(f.len == len);
	assert_int_equal(f.header, want_header);
	if (mask) {
		assert_memory_equal(f.mask, mask, 4);
		if (len)
			assert_memory_not_equal(buf + f.header, payload, len < 4 ? len : 4);
		rp_ws_unmask(buf + f.header, f.len, f.mask);
	}
	assert_memory_equal(buf + f.header, payload, len);
	/* Bytes after the frame (the next one) do not change what is read. */
	memcpy(buf + n, "\x81\x00", 2);
	assert_int_equal(rp_ws_parse(buf, n, len, 0, &f), 1);
	/* One byte short of the cap is a protocol error; the frame's length fits the cap. */
	if (len > 0)
		assert_int_equal(rp_ws_parse(buf, n, len - 1, 0, &f), -1);
	/* Every cut: more is needed, and the frame is left as it was. */
	for (cut = 0; cut < n; cut++) {
		memset(&f, 0x5a, sizeof f);
		assert_int_equal(rp_ws_parse(buf, cut, len, mask != NULL, &f), 0);
		assert_int_equal(f.fin, 0x5a5a5a5a);
	}
	free(payload);
	free(buf);
}

static void
test_lengths(void **state)
{
	static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
	static const uint64_t lens[] = {0, 1, 5, 125, 126, 127, 1000, 65535, 65536, 70000};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		size_t h = lens[i] < 126 ? 2 : lens[i] <= 0xffff ? 4 : 10;

		round_trip(lens[i], h, NULL);
		round_trip(lens[i], h + 4, mask);
	}
}

static void
test_header_bytes(void **state)
{
	static const uint8_t mask[4] = {1, 2, 3, 4};
	uint8_t b[RP_WS_HEADER_MAX];
	struct rp_ws_frame f;

	(void)state;
	/* RFC 6455 5.7's examples: an unmasked "Hello", a masked one, a 256-byte and a
	 * 64 KiB binary frame's headers. */
	assert_int_equal(rp_ws_header(b, RP_WS_TEXT, 1, 5, NULL), 2);
	assert_memory_equal(b, "\x81\x05", 2);
	assert_int_equal(rp_ws_parse((const uint8_t *)"\x81\x05Hello", 7, 5, 0, &f), 1);
	assert_int_equal(
	        rp_ws_parse((const uint8_t *)"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11, 5,
	                    1, &f),
	        1);
	{
		uint8_t p[5] = {0x7f, 0x9f, 0x4d, 0x51, 0x58};

		rp_ws_unmask(p, 5, f.mask);
		assert_memory_equal(p, "Hello", 5);
	}
	assert_int_equal(rp_ws_header(b, RP_WS_BINARY, 1, 256, NULL), 4);
	assert_memory_equal(b, "\x82\x7e\x01\x00", 4);
	assert_int_equal(rp_ws_header(b, RP_WS_BINARY, 1, 65536, NULL), 10);
	assert_memory_equal(b, "\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10);
	assert_int_equal(rp_ws_header(b, RP_WS_BINARY, 1, 65536, mask), 14);
	assert_memory_equal(b, "\x82\xff\x00\x00\x00\x00\x00\x01\x00\x00\x01\x02\x03\x04", 14);
	/* Not final, a continuation; ops as given. */
	assert_int_equal(rp_ws_header(b, RP_WS_TEXT, 0, 3, NULL), 2);
	assert_memory_equal(b, "\x01\x03", 2);
	assert_int_equal(rp_ws_header(b, RP_WS_CONT, 1, 0, NULL), 2);
	assert_memory_equal(b, "\x80\x00", 2);
	assert_int_equal(rp_ws_parse((const uint8_t *)"\x01\x03"
	                                              "abc",
	                             5, 3, 0, &f),
	                 1);
	assert_int_equal(f.fin, 0);
	assert_int_equal(f.op, RP_WS_TEXT);
	/* Control frames: up to 125 bytes. */
	{
		uint8_t c[2 + 125] = {0x89, 125};

		assert_int_equal(rp_ws_parse(c, sizeof c, 1000, 0, &f), 1);
		assert_int_equal(f.op, RP_WS_PING);
		assert_true(f.len == 125);
	}
	assert_int_equal(rp_ws_parse((const uint8_t *)"\x88\x02\x03\xe8", 4, 125, 0, &f), 1);
	assert_int_equal(f.op, RP_WS_CLOSE);
	assert_int_equal(rp_ws_parse((const uint8_t *)"\x8a\x00", 2, 0, 0, &f), 1);
	assert_int_equal(f.op, RP_WS_PONG);
}

/* -1, and *f untouched. */
static void
refused(const char *what, const uint8_t *b, size_t n, uint64_t max, int need_mask)
{
	struct rp_ws_frame f;

	memset(&f, 0x5a, sizeof f);
	if (rp_ws_parse(b, n, max, need_mask, &f) != -1)
		fail_msg("%s: not refused", what);
	assert_int_equal(f.fin, 0x5a5a5a5a);
}

static void
test_refused(void **state)
{
	const uint64_t big = UINT64_MAX;
	static const uint8_t reserved[3] = {0x40, 0x20, 0x10};
	static const uint8_t ops[] = {3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf};
	uint8_t b[32];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof reserved; i++) {
		b[0] = (uint8_t)(0x81 | reserved[i]);
		b[1] = 0;
		refused("reserved bit", b, 2, big, 0);
	}
	for (i = 0; i < sizeof ops; i++) {
		b[0] = (uint8_t)(0x80 | ops[i]);
		b[1] = 0;
		refused("unknown opcode", b, 2, big, 0);
	}
	/* Control frames: fragmented, or longer than 125 (in any length form). */
	refused("fragmented ping", (const uint8_t *)"\x09\x00", 2, big, 0);
	refused("fragmented close", (const uint8_t *)"\x08\x00", 2, big, 0);
	refused("fragmented pong", (const uint8_t *)"\x0a\x00", 2, big, 0);
	refused("ping of 126", (const uint8_t *)"\x89\x7e\x00\x7e", 4, big, 0);
	refused("ping, 16-bit form, header cut", (const uint8_t *)"\x89\x7e", 2, big, 0);
	refused("close, 64-bit form", (const uint8_t *)"\x88\x7f", 2, big, 0);
	/* Non-minimal lengths: refused however they are cut after the length. */
	refused("125 in the 16-bit form", (const uint8_t *)"\x82\x7e\x00\x7d", 4, big, 0);
	refused("0 in the 16-bit form", (const uint8_t *)"\x82\x7e\x00\x00", 4, big, 0);
	refused("65535 in the 64-bit form",
	        (const uint8_t *)"\x82\x7f\x00\x00\x00\x00\x00\x00\xff\xff", 10, big, 0);
	refused("5 in the 64-bit form", (const uint8_t *)"\x82\x7f\x00\x00\x00\x00\x00\x00\x00\x05",
	        10, big, 0);
	/* The 64-bit form's top bit. */
	refused("63-bit overflow", (const uint8_t *)"\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00", 10,
	        big, 0);
	refused("all ones", (const uint8_t *)"\x82\xff\xff\xff\xff\xff\xff\xff\xff\xff", 10, big,
	        0);
	/* Over the cap, seen as soon as the length is, before any mask or payload. */
	refused("over max, 7-bit", (const uint8_t *)"\x82\x0b", 2, 10, 0);
	refused("over max, 16-bit", (const uint8_t *)"\x82\x7e\x01\x00", 4, 255, 0);
	refused("over max, 64-bit", (const uint8_t *)"\x82\x7f\x7f\xff\xff\xff\xff\xff\xff\xff", 10,
	        UINT64_MAX >> 1 >> 1, 0);
	refused("cap 0", (const uint8_t *)"\x81\x81\x00\x00\x00\x00x", 7, 0, 1);
	/* A server requires masked frames of its clients. */
	refused("unmasked", (const uint8_t *)"\x81\x05Hello", 7, big, 1);
	refused("unmasked, cut", (const uint8_t *)"\x81\x05", 2, big, 1);
	refused("unmasked, empty", (const uint8_t *)"\x88\x00", 2, big, 1);
}

static void
test_max(void **state)
{
	struct rp_ws_frame f;
	/* The largest length there is (2^63 - 1): it parses as "more needed" under a cap that
	 * allows it, never as a size that wraps. */
	static const uint8_t top[10] = {0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t topm[14] = {0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff,
	                                 0xff, 0xff, 0xff, 1,    2,    3,    4};

	(void)state;
	assert_int_equal(rp_ws_parse(top, sizeof top, UINT64_MAX, 0, &f), 0);
	assert_int_equal(rp_ws_parse(topm, sizeof topm, UINT64_MAX, 1, &f), 0);
	assert_int_equal(rp_ws_parse(top, sizeof top, UINT64_MAX >> 1, 0, &f), 0);
	assert_int_equal(rp_ws_parse(top, sizeof top, (UINT64_MAX >> 1) - 1, 0, &f), -1);
	/* The cap is inclusive in every form. */
	assert_int_equal(rp_ws_parse((const uint8_t *)"\x82\x03"
	                                              "abc",
	                             5, 3, 0, &f),
	                 1);
	assert_int_equal(rp_ws_parse((const uint8_t *)"\x82\x03"
	                                              "abc",
	                             5, 2, 0, &f),
	                 -1);
	{
		uint8_t h[RP_WS_HEADER_MAX];

		assert_int_equal(rp_ws_header(h, RP_WS_BINARY, 1, UINT64_MAX >> 1, NULL), 10);
		assert_memory_equal(h, top, 10);
		/* A length past 63 bits cannot be written; its top bit is dropped. */
		assert_int_equal(rp_ws_header(h, RP_WS_BINARY, 1, UINT64_MAX, NULL), 10);
		assert_memory_equal(h, top, 10);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_accept),  cmocka_unit_test(test_key),
	        cmocka_unit_test(test_lengths), cmocka_unit_test(test_header_bytes),
	        cmocka_unit_test(test_refused), cmocka_unit_test(test_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
