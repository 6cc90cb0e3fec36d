/*
 * rackpilot/tls.h — the server's TLS fingerprint, shared by the CLI and the agent (which share
 * nothing but headers, hence static inline).
 *
 * The fingerprint is the SHA-256 of the server certificate's DER-encoded SubjectPublicKeyInfo:
 * what curl's --pinnedpubkey sha256// and HPKP pin, so it survives a renewal with the same key.
 * `openssl x509 -in cert.pem -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum`
 * computes it. It is written as 64 lowercase hex digits and read in either case, as 64 digits
 * or as 32 colon-separated pairs (AB:CD:...), nothing else.
 */
#ifndef RACKPILOT_TLS_H
#define RACKPILOT_TLS_H

#include <stddef.h>
#include <string.h>

#define RP_TLS_FP_HEX  65 /* 64 hex digits + NUL */
#define RP_TLS_PIN_MAX 53 /* "sha256//" + 44 base64 characters + NUL */

/* What a fingerprint looks like, for messages. */
#define RP_TLS_FP_WANT                                                                             \
	"64 hex digits (the SHA-256 of the server's public key), optionally as colon-separated "   \
	"pairs AB:CD:..."

/* The value of hex digit ch, or -1. */
static inline int
rp_tls_hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/*
 * s as a fingerprint: 64 hex digits, or 32 pairs with a colon between each two, either case.
 * 0 with hex set to the 64 lowercase digits + NUL, or -1 for anything else (blanks included;
 * hex untouched). s and hex may be the same buffer.
 */
static inline int
rp_tls_fingerprint_parse(const char *s, char hex[RP_TLS_FP_HEX])
{
	static const char digits[] = "0123456789abcdef";
	char out[RP_TLS_FP_HEX];
	size_t len = strlen(s), i, k = 0;
	int colons = len == 95; /* 32 pairs + 31 colons */

	if (len != 64 && !colons)
		return -1;
	for (i = 0; i < len; i++) {
		if (colons && i % 3 == 2) {
			if (s[i] != ':')
				return -1;
			continue;
		}
		if (rp_tls_hexval((unsigned char)s[i]) < 0)
			return -1;
		out[k++] = digits[rp_tls_hexval((unsigned char)s[i])];
	}
	out[k] = '\0';
	memcpy(hex, out, sizeof out);
	return 0;
}

/*
 * The CURLOPT_PINNEDPUBLICKEY value for fingerprint hex (any form rp_tls_fingerprint_parse
 * accepts): "sha256//" and the standard base64 of the 32 bytes, NUL-terminated, into out
 * (outlen at least RP_TLS_PIN_MAX). 0, or -1 on bad input or a short out (out untouched).
 */
static inline int
rp_tls_pin_from_hex(const char *hex, char *out, size_t outlen)
{
	static const char b64[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char d[33] = {0}; /* one spare zero byte for the last group */
	char norm[RP_TLS_FP_HEX];
	size_t i, k = 8;

	if (outlen < RP_TLS_PIN_MAX || rp_tls_fingerprint_parse(hex, norm) < 0)
		return -1;
	for (i = 0; i < 32; i++)
		d[i] = (unsigned char)(rp_tls_hexval(norm[2 * i]) << 4 |
		                       rp_tls_hexval(norm[2 * i + 1]));
	memcpy(out, "sha256//", 8);
	for (i = 0; i < 33; i += 3) {
		unsigned v = (unsigned)d[i] << 16 | (unsigned)d[i + 1] << 8 | d[i + 2];

		out[k++] = b64[v >> 18 & 63];
		out[k++] = b64[v >> 12 & 63];
		out[k++] = b64[v >> 6 & 63];
		out[k++] = b64[v & 63];
	}
	out[k - 1] = '='; /* 32 bytes: 10 whole groups and 2 bytes, one pad character */
	out[k] = '\0';
	return 0;
}

/* The value of base64 character ch (the standard alphabet), or -1. */
static inline int
rp_tls_b64val(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/*
 * The reverse, for a pin as libcurl writes the server's: "sha256//" and 44 base64 characters
 * (the last one '='). Only the first 52 of the len bytes at pin are read. 0 with hex set to
 * the 64 lowercase digits + NUL, or -1 when pin is not one (hex untouched).
 */
static inline int
rp_tls_hex_from_pin(const char *pin, size_t len, char hex[RP_TLS_FP_HEX])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char d[32];
	char out[RP_TLS_FP_HEX];
	unsigned v = 0;
	size_t i, k = 0;
	int bits = 0;

	if (len < 52 || memcmp(pin, "sha256//", 8) || pin[51] != '=')
		return -1;
	for (i = 8; i < 51; i++) {
		int x = rp_tls_b64val((unsigned char)pin[i]);

		if (x < 0)
			return -1;
		v = (v << 6 | (unsigned)x) & 0xfff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[k++] = (unsigned char)(v >> bits);
		}
	}
	/* 43 characters are 258 bits: 32 bytes and 2 spare bits, zero in canonical base64. */
	if (v & ((1u << bits) - 1))
		return -1;
	for (i = 0; i < 32; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[64] = '\0';
	memcpy(hex, out, sizeof out);
	return 0;
}

/*
 * For a libcurl debug callback (CURLINFO_TEXT, while a pin is set): when the size bytes at
 * data hold the line " public key hash: sha256//...", the server's key as 64 lowercase hex
 * digits into hex; otherwise hex is left alone. That line is libcurl's wording, not an API:
 * without it a mismatch names only the pinned key. Returns 1 when hex was set.
 */
static inline int
rp_tls_pin_seen(const char *data, size_t size, char hex[RP_TLS_FP_HEX])
{
	static const char tag[] = "public key hash: ";
	size_t i, n = sizeof tag - 1;

	for (i = 0; i + n < size; i++)
		if (!memcmp(data + i, tag, n))
			return rp_tls_hex_from_pin(data + i + n, size - i - n, hex) == 0;
	return 0;
}

#endif
