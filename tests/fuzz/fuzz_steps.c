/*
 * fuzz_steps — how the server keeps a steps job's SSH output (jobs/steps.c): the agent's
 * stream arrives in chunks of any size (on_output), the server keeps its last JOBS_TAIL bytes
 * (jobs_tail_add) and quotes the last line in a failed job's error (jobs_tail_last_line).
 *
 * Input: byte 0 seeds the chunk sizes; the rest is the stream. Invariants: the tail is
 * exactly the stream's last JOBS_TAIL bytes, whatever the chunking; the last line has no
 * CR/LF, fits its buffer, and is what a straightforward scan of the whole stream finds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The reference: the last non-empty line of the last JOBS_TAIL bytes of s. */
static void
reference(const char *s, size_t n, char *buf, size_t len)
{
	const char *t = n > JOBS_TAIL ? s + n - JOBS_TAIL : s;
	size_t tn = n > JOBS_TAIL ? JOBS_TAIL : n, end = tn, start;

	while (end > 0 && (t[end - 1] == '\n' || t[end - 1] == '\r'))
		end--;
	start = end;
	while (start > 0 && t[start - 1] != '\n')
		start--;
	snprintf(buf, len, "%.*s", (int)(end - start), t + start);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobs_tail t = {0};
	const char *s = (const char *)data + 1;
	size_t n, off = 0, buflen;
	unsigned seed;
	char got[JOBS_TAIL + 8], want[JOBS_TAIL + 8];

	if (size < 1)
		return 0;
	seed = data[0] | 1u;
	n = size - 1;
	while (off < n) {
		size_t c;

		seed = seed * 1103515245u + 12345u;
		c = (seed >> 16) % 700; /* chunks above and below JOBS_TAIL, empty ones too */
		if (c > n - off)
			c = n - off;
		jobs_tail_add(&t, s + off, c);
		off += c;
		if (t.len > JOBS_TAIL)
			abort();
	}
	if (t.len != (n < JOBS_TAIL ? n : JOBS_TAIL) || memcmp(t.data, s + n - t.len, t.len) != 0) {
		fprintf(stderr, "steps: the tail is not the stream's last bytes\n");
		abort();
	}
	buflen = 1 + data[0] % (JOBS_TAIL + 4);
	jobs_tail_last_line(&t, got, buflen);
	reference(s, n, want, buflen);
	if (strlen(got) >= buflen || strchr(got, '\n') || strcmp(got, want) != 0) {
		fprintf(stderr, "steps: last line \"%s\", want \"%s\"\n", got, want);
		abort();
	}
	return 0;
}
