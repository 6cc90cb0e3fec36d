/* Logging: one write(2) per line so lines from worker threads never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static enum rp_log_level max_level = RP_LOG_INFO;
static const char *names[] = {"error", "warn", "info", "debug"};

void
rp_log_set_level(enum rp_log_level lvl)
{
	max_level = lvl;
}

void
rp_log(enum rp_log_level lvl, const char *fmt, ...)
{
	char line[2048], ts[RP_TIME_BUF];
	va_list ap;
	int n, m;

	if (lvl > max_level)
		return;
	n = snprintf(line, sizeof line, "%s %s ", rp_time_format(rp_time_now_ms(), ts), names[lvl]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to report a failing log. */
	}
}
