/* The server's own helpers: secrets of the wire (tokens) and OpenSSH public keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "util.h"

int
rp_sshkey_parse(const char *line, struct rp_sshkey *out)
{
	struct rp_sshkey k;
	unsigned char blob[1600], md[32];
	const char *p = line, *t, *b;
	size_t tl, bl, dl;
	int n;

	if (line == NULL)
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	t = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	tl = (size_t)(p - t);
	while (*p == ' ' || *p == '\t')
		p++;
	b = p;
	while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
		p++;
	bl = (size_t)(p - b);
	if (tl == 0 || tl >= sizeof k.type || bl < 16 || bl >= sizeof k.b64 || bl % 4 != 0)
		return -1;
	memcpy(k.type, t, tl);
	k.type[tl] = '\0';
	memcpy(k.b64, b, bl);
	k.b64[bl] = '\0';
	if (strspn(k.b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
	            bl ||
	    bl / 4 * 3 > sizeof blob)
		return -1;
	/* EVP_DecodeBlock counts padding as zero bytes; take them off. */
	if ((n = EVP_DecodeBlock(blob, (const unsigned char *)k.b64, (int)bl)) < 0)
		return -1;
	dl = (size_t)n - (k.b64[bl - 1] == '=') - (k.b64[bl - 2] == '=');
	/* The blob starts with its own type as an SSH string: a mislabelled key is no key. */
	if (dl < 4 + tl ||
	    ((size_t)blob[0] << 24 | (size_t)blob[1] << 16 | (size_t)blob[2] << 8 | blob[3]) !=
	            tl ||
	    memcmp(blob + 4, k.type, tl) != 0)
		return -1;
	/* The rest is more SSH strings (key material) that fill the blob exactly: a truncated
	 * or padded key is refused rather than pinned. */
	{
		size_t off = 4 + tl, last = 0;
		int count = 1;

		while (off < dl) {
			size_t len;

			if (dl - off < 4)
				return -1;
			len = (size_t)blob[off] << 24 | (size_t)blob[off + 1] << 16 |
			      (size_t)blob[off + 2] << 8 | blob[off + 3];
			if (len > dl - off - 4)
				return -1;
			off += 4 + len;
			last = len;
			count++;
		}
		if (count < 2 || last < 16)
			return -1;
	}
	if (EVP_Digest(blob, dl, md, NULL, EVP_sha256(), NULL) != 1)
		return -1;
	memcpy(k.fingerprint, "SHA256:", 7);
	n = EVP_EncodeBlock((unsigned char *)k.fingerprint + 7, md, sizeof md);
	while (n > 0 && k.fingerprint[7 + n - 1] == '=')
		n--;
	k.fingerprint[7 + n] = '\0';
	*out = k;
	return 0;
}

int
rp_token_new(const char *prefix, char buf[RP_TOKEN_BUF])
{
	unsigned char b[32];

	if (strlen(prefix) != 4 || rp_random(b, sizeof b) < 0)
		return -1;
	memcpy(buf, prefix, 4);
	rp_b64url_encode(b, sizeof b, buf + 4);
	return 0;
}
