/* Growable byte buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int
reserve(struct rp_buf *b, size_t extra)
{
	size_t want;
	char *p;

	if (b->oom)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	want = b->cap ? b->cap : 256;
	while (want < b->len + extra + 1)
		want *= 2;
	p = realloc(b->data, want);
	if (p == NULL) {
		b->oom = 1;
		return -1;
	}
	b->data = p;
	b->cap = want;
	return 0;
}

void
rp_buf_append(struct rp_buf *b, const void *p, size_t n)
{
	if (reserve(b, n) < 0)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
rp_buf_printf(struct rp_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || reserve(b, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void
rp_buf_free(struct rp_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}
