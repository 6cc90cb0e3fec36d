/* Growable byte buffer, with a hard cap for bytes a peer sends (curl's dynbuf `toobig`). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rackpilot/common.h"

void
rp_buf_init(struct rp_buf *b, size_t max)
{
	memset(b, 0, sizeof *b);
	b->max = max;
}

/* Room for extra more bytes and the NUL, or -1 with the buffer marked. */
static int
reserve(struct rp_buf *b, size_t extra)
{
	size_t want, limit = b->max ? b->max : SIZE_MAX - 1;
	char *p;

	if (b->oom || b->toobig)
		return -1;
	if (extra > limit - b->len) {
		b->toobig = 1;
		return -1;
	}
	if (b->len + extra + 1 <= b->cap)
		return 0;
	want = b->cap ? b->cap : 256;
	while (want < b->len + extra + 1 && want <= limit / 2)
		want *= 2;
	/* Never more than the cap allows, so a capped buffer costs at most max + 1 bytes. */
	if (want < b->len + extra + 1 || want > limit + 1)
		want = limit + 1;
	p = realloc(b->data, want);
	if (p == NULL) {
		b->oom = 1;
		return -1;
	}
	b->data = p;
	b->cap = want;
	return 0;
}

int
rp_buf_append_grow(struct rp_buf *b, const void *p, size_t n)
{
	if (reserve(b, n) < 0)
		return -1;
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
rp_buf_printf(struct rp_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || reserve(b, (size_t)n) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void
rp_buf_free(struct rp_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}
