/*
 * Logging. Ordinary lines go out with one write(2) each so lines from worker threads never
 * interleave; access lines are batched in a buffer that rp_log_flush() or a full buffer
 * writes out.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rackpilot/common.h"

static enum rp_log_level max_level = RP_LOG_INFO;
static const char *names[] = {"error", "warn", "info", "debug"};

#define ACCESS_BUF (64 * 1024)
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char pending[ACCESS_BUF];
static size_t npending;

void
rp_log_set_level(enum rp_log_level lvl)
{
	__atomic_store_n(&max_level, lvl, __ATOMIC_RELAXED);
}

static void
out(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, p, n);

		if (w <= 0)
			return; /* Nowhere left to report a failing log. */
		p += w;
		n -= (size_t)w;
	}
}

/* Caller holds mu. */
static void
flush_locked(void)
{
	out(pending, npending);
	npending = 0;
}

void
rp_log_flush(void)
{
	pthread_mutex_lock(&mu);
	flush_locked();
	pthread_mutex_unlock(&mu);
}

static size_t
format(char *line, size_t cap, const char *level, const char *fmt, va_list ap)
{
	char ts[RP_TIME_BUF];
	int n, m;

	n = snprintf(line, cap, "%s %s ", rp_time_format(rp_time_now_ms(), ts), level);
	m = vsnprintf(line + n, cap - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > cap - 2)
		n = (int)cap - 2;
	line[n++] = '\n';
	return (size_t)n;
}

void
rp_log(enum rp_log_level lvl, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t n;

	if (lvl > __atomic_load_n(&max_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	n = format(line, sizeof line, names[lvl], fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&mu);
	flush_locked();
	out(line, n);
	pthread_mutex_unlock(&mu);
}

void
rp_log_access(const char *msg, size_t len)
{
	char ts[RP_TIME_BUF];
	size_t tl, n;

	rp_time_format(rp_time_now_ms(), ts);
	tl = strlen(ts);
	if (len > 1024)
		len = 1024;
	n = tl + 8 + len + 1;
	pthread_mutex_lock(&mu);
	if (npending + n > sizeof pending)
		flush_locked();
	memcpy(pending + npending, ts, tl);
	memcpy(pending + npending + tl, " access ", 8);
	memcpy(pending + npending + tl + 8, msg, len);
	pending[npending + n - 1] = '\n';
	npending += n;
	pthread_mutex_unlock(&mu);
}
