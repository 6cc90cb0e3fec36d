/* The last 64 KiB of a step's output, and turning them into a string JSON accepts. */
#include <stdlib.h>
#include <string.h>

#include "agent.h"

void
rp_agent_tail_add(struct rp_agent_tail *t, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t cap = sizeof t->buf, first;

	t->total += n;
	if (n >= cap) {
		memcpy(t->buf, s + n - cap, cap);
		t->head = 0;
		t->len = cap;
		return;
	}
	first = cap - t->head < n ? cap - t->head : n;
	memcpy(t->buf + t->head, s, first);
	memcpy(t->buf, s + first, n - first);
	t->head = (t->head + n) % cap;
	t->len = t->len + n > cap ? cap : t->len + n;
}

int
rp_agent_tail_truncated(const struct rp_agent_tail *t)
{
	return t->total > t->len;
}

char *
rp_agent_tail_text(const struct rp_agent_tail *t, size_t *len)
{
	unsigned char *flat;
	size_t cap = sizeof t->buf, start;
	char *s;

	flat = malloc(t->len + 1);
	if (flat == NULL)
		return NULL;
	/* Until the ring wraps, head == len and the bytes start at 0. */
	start = t->len < cap ? 0 : t->head;
	memcpy(flat, t->buf + start, t->len - (t->len < cap ? 0 : start));
	if (t->len == cap)
		memcpy(flat + (cap - start), t->buf, start);
	s = rp_agent_utf8_clean(flat, t->len, rp_agent_tail_truncated(t), RP_STEP_OUTPUT_TAIL, len);
	free(flat);
	return s;
}

/* Length of the valid sequence at s[0..n), or 0 when s starts an invalid one; *bad is then
 * set to the length of its maximal invalid subpart (Unicode's "substitution of maximal
 * subparts", so a cut-off character costs one U+FFFD, not one per byte). */
static size_t
utf8_seq(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t need, k;

	*bad = 1;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c >= 0xe0 && c <= 0xef)
		need = 2;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 3;
	else
		return 0;
	/* Overlong forms, surrogates and code points above U+10FFFF hide in the second byte. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (k = 1; k <= need; k++) {
		if (k >= n || s[k] < lo || s[k] > hi) {
			*bad = k;
			return 0;
		}
		lo = 0x80, hi = 0xbf;
	}
	return need + 1;
}

char *
rp_agent_utf8_clean(const void *p, size_t n, int skip_partial, size_t cap, size_t *len)
{
	const unsigned char *s = p;
	unsigned char *out, *o;
	size_t i = 0, ol, drop;

	if (skip_partial)
		while (i < n && i < 3 && (s[i] & 0xc0) == 0x80)
			i++;
	out = malloc(3 * (n - i) + 1);
	if (out == NULL)
		return NULL;
	o = out;
	while (i < n) {
		size_t ok, bad;

		if (s[i] >= 0x01 && s[i] < 0x80) {
			*o++ = s[i++];
			continue;
		}
		ok = s[i] ? utf8_seq(s + i, n - i, &bad) : 0;
		if (ok) {
			memcpy(o, s + i, ok);
			o += ok;
			i += ok;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i += s[i] ? bad : 1;
		}
	}
	ol = (size_t)(o - out);
	/* Replacements can make the text longer than the raw bytes; the oldest part goes. */
	if (ol > cap) {
		drop = ol - cap;
		while (drop < ol && (out[drop] & 0xc0) == 0x80)
			drop++;
		memmove(out, out + drop, ol - drop);
		ol -= drop;
	}
	out[ol] = '\0';
	*len = ol;
	return (char *)out;
}
