/* WebSocket frames (RFC 6455): header parsing and writing, masking, the handshake's keys. Pure
 * functions over buffers; the lengths come from the peer, so each is checked before use. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "rackpilot/common.h"
#include "rackpilot/ws.h"

/* RFC 6455 1.3: appended to the client's key before hashing. */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static int
op_known(unsigned op)
{
	return op == RP_WS_CONT || op == RP_WS_TEXT || op == RP_WS_BINARY || op == RP_WS_CLOSE ||
	       op == RP_WS_PING || op == RP_WS_PONG;
}

int
rp_ws_parse(const uint8_t *buf, size_t n, uint64_t max, int need_mask, struct rp_ws_frame *f)
{
	unsigned op, fin, masked;
	uint64_t len;
	size_t hlen;
	int i;

	if (n < 2)
		return 0;
	fin = buf[0] >> 7;
	op = buf[0] & 0x0f;
	masked = buf[1] >> 7;
	len = buf[1] & 0x7f;
	/* What the first two bytes already tell is refused at once, not after the rest. */
	if ((buf[0] & 0x70) != 0 || !op_known(op))
		return -1;
	if ((op & 0x8) && (!fin || len > 125))
		return -1;
	if (need_mask && !masked)
		return -1;
	hlen = 2;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		if (len < 126)
			return -1; /* fits the 7-bit form */
		hlen = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		if (buf[2] & 0x80)
			return -1; /* the most significant bit must be 0 */
		len = 0;
		for (i = 2; i < 10; i++)
			len = len << 8 | buf[i];
		if (len <= 0xffff)
			return -1; /* fits the 16-bit form */
		hlen = 10;
	}
	if (len > max)
		return -1;
	if (masked)
		hlen += 4;
	if (n < hlen || (uint64_t)(n - hlen) < len)
		return 0;
	f->fin = (int)fin;
	f->op = (enum rp_ws_op)op;
	f->masked = (int)masked;
	if (masked)
		memcpy(f->mask, buf + hlen - 4, 4);
	else
		memset(f->mask, 0, 4);
	f->len = len;
	f->header = hlen;
	return 1;
}

void
rp_ws_unmask(uint8_t *payload, uint64_t len, const uint8_t mask[4])
{
	uint64_t i;

	for (i = 0; i < len; i++)
		payload[i] ^= mask[i & 3];
}

size_t
rp_ws_header(uint8_t *out, enum rp_ws_op op, int fin, uint64_t len, const uint8_t *mask)
{
	size_t n = 2;
	int i;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | ((unsigned)op & 0x0f));
	out[1] = mask ? 0x80 : 0;
	if (len < 126) {
		out[1] |= (uint8_t)len;
	} else if (len <= 0xffff) {
		out[1] |= 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		n = 4;
	} else {
		out[1] |= 127;
		len &= UINT64_MAX >> 1; /* the 64-bit form has 63 bits */
		for (i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
		n = 10;
	}
	if (mask) {
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

int
rp_ws_accept(const char *key, char out[RP_WS_ACCEPT_BUF])
{
	unsigned char raw[18], again[25], md[SHA_DIGEST_LENGTH];
	char in[24 + sizeof WS_GUID];
	unsigned char acc[RP_WS_ACCEPT_BUF];

	if (key == NULL || strnlen(key, 25) != 24)
		return -1;
	/* 16 bytes in base64 are 22 characters and "==". Decoded and encoded again it must be
	 * the same text: no stray bits, white space or '=' inside (EVP_DecodeBlock forgives
	 * some of that). */
	if (key[22] != '=' || key[23] != '=' ||
	    EVP_DecodeBlock(raw, (const unsigned char *)key, 24) != 18 ||
	    EVP_EncodeBlock(again, raw, 16) != 24 || memcmp(again, key, 24) != 0)
		return -1;
	memcpy(in, key, 24);
	memcpy(in + 24, WS_GUID, sizeof WS_GUID - 1);
	if (SHA1((const unsigned char *)in, 24 + sizeof WS_GUID - 1, md) == NULL ||
	    EVP_EncodeBlock(acc, md, sizeof md) != RP_WS_ACCEPT_BUF - 1)
		return -1;
	memcpy(out, acc, RP_WS_ACCEPT_BUF);
	return 0;
}

int
rp_ws_key(char out[RP_WS_KEY_BUF])
{
	unsigned char raw[16], key[RP_WS_KEY_BUF];

	if (rp_random(raw, sizeof raw) < 0 || EVP_EncodeBlock(key, raw, sizeof raw) != 24)
		return -1;
	memcpy(out, key, RP_WS_KEY_BUF);
	return 0;
}
