/* What every program of Rackpilot needs: time, randomness, identifiers, base64url, the
 * checks of names, hosts and MACs, configuration words, and whole-file reads and writes. Only
 * libc (getrandom for randomness). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rackpilot/common.h"

int64_t
rp_time_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
rp_time_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Civil date from days since 1970-01-01 (H. Hinnant's algorithm). gmtime_r would do, but
 * glibc takes a process-wide lock in it, and every request formats a time. */
static void
civil(int64_t days, int *y, int *m, int *d)
{
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = (int)(yoe + era * 400 + (*m <= 2));
}

static void
put2(char *p, int v)
{
	p[0] = (char)('0' + v / 10);
	p[1] = (char)('0' + v % 10);
}

char *
rp_time_format(int64_t ms, char buf[RP_TIME_BUF])
{
	int64_t s = ms / 1000, days = s / 86400, rem = s % 86400;
	int y, mo, d, msec = (int)(ms % 1000);

	if (ms < 0) {
		snprintf(buf, RP_TIME_BUF, "1970-01-01T00:00:00.000Z");
		return buf;
	}
	civil(days, &y, &mo, &d);
	if (y > 9999) {
		snprintf(buf, RP_TIME_BUF, "9999-12-31T23:59:59.999Z");
		return buf;
	}
	/* "YYYY-MM-DDTHH:MM:SS.mmmZ" without printf: this is on every request's path. */
	put2(buf, y / 100);
	put2(buf + 2, y % 100);
	buf[4] = '-';
	put2(buf + 5, mo);
	buf[7] = '-';
	put2(buf + 8, d);
	buf[10] = 'T';
	put2(buf + 11, (int)(rem / 3600));
	buf[13] = ':';
	put2(buf + 14, (int)(rem / 60 % 60));
	buf[16] = ':';
	put2(buf + 17, (int)(rem % 60));
	buf[19] = '.';
	buf[20] = (char)('0' + msec / 100);
	put2(buf + 21, msec % 100);
	buf[23] = 'Z';
	buf[24] = '\0';
	return buf;
}

static int
digits(const char **p, int n, int *out)
{
	int v = 0;

	while (n-- > 0) {
		if (!isdigit((unsigned char)**p))
			return -1;
		v = v * 10 + (*(*p)++ - '0');
	}
	*out = v;
	return 0;
}

int
rp_time_parse(const char *s, int64_t *ms)
{
	const char *p = s;
	struct tm tm = {0};
	int y, mo, d, h, mi, sec, frac = 0, fd = 0, off = 0;
	time_t t;

	if (s == NULL || *s == '\0')
		return -1;
	if (strspn(s, "0123456789") == strlen(s)) {
		if (strlen(s) > 12)
			return -1;
		*ms = strtoll(s, NULL, 10) * 1000;
		return 0;
	}
	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
		return -1;
	p++;
	if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
	    digits(&p, 2, &sec))
		return -1;
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			if (fd < 3)
				frac = frac * 10 + (*p - '0'), fd++;
			p++;
		}
		if (fd == 0)
			return -1;
		while (fd++ < 3)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om, sign = *p == '-' ? -1 : 1;

		p++;
		if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om))
			return -1;
		off = sign * (oh * 60 + om);
	} else {
		return -1;
	}
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	*ms = ((int64_t)t - (int64_t)off * 60) * 1000 + frac;
	return 0;
}

int
rp_random(void *buf, size_t n)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int
rp_uuid_new(char buf[RP_UUID_BUF])
{
	unsigned char b[16];
	static const char hex[] = "0123456789abcdef";
	char *p = buf;
	int i;

	if (rp_random(b, sizeof b) < 0)
		return -1;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	/* By hand: snprintf's 16 conversions were 2% of an import's instructions. */
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[b[i] >> 4];
		*p++ = hex[b[i] & 15];
	}
	*p = '\0';
	return 0;
}

int
rp_uuid_valid(const char *s)
{
	size_t i;

	if (s == NULL || strlen(s) != 36)
		return 0;
	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!isxdigit((unsigned char)s[i])) {
			return 0;
		}
	}
	return 1;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t
rp_b64url_encode(const void *in, size_t n, char *out)
{
	const unsigned char *p = in;
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];

		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
		out[o++] = b64url[v & 63];
	}
	if (n - i == 1) {
		unsigned v = (unsigned)p[i] << 16;

		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
	} else if (n - i == 2) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8;

		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
	}
	out[o] = '\0';
	return o;
}

long
rp_b64url_decode(const char *in, void *out, size_t cap)
{
	unsigned char *o = out;
	unsigned acc = 0;
	int bits = 0;
	size_t n = 0;

	for (; *in; in++) {
		const char *c = strchr(b64url, *in);

		if (c == NULL || *in == '\0')
			return -1;
		acc = acc << 6 | (unsigned)(c - b64url);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n >= cap)
				return -1;
			o[n++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* Leftover bits must be zero padding, else the input was not canonical. */
	if (bits >= 6 || acc != 0)
		return -1;
	return (long)n;
}

int
rp_mac_normalize(const char *s, char out[RP_MAC_BUF])
{
	char hex[12];
	size_t n = 0, i, seps = 0;

	if (s == NULL)
		return -1;
	for (i = 0; s[i]; i++) {
		if (isxdigit((unsigned char)s[i])) {
			if (n == 12)
				return -1;
			hex[n++] = (char)tolower((unsigned char)s[i]);
		} else if (s[i] == ':' || s[i] == '-' || s[i] == '.') {
			seps++;
		} else {
			return -1;
		}
	}
	/* Accept the three common spellings only: 6 groups, 3 dotted groups, or bare hex. */
	if (n != 12 || !(seps == 0 || seps == 5 || seps == 2))
		return -1;
	for (i = 0; i < 6; i++) {
		out[3 * i] = hex[2 * i];
		out[3 * i + 1] = hex[2 * i + 1];
		out[3 * i + 2] = i < 5 ? ':' : '\0';
	}
	return 0;
}

int
rp_name_valid(const char *s)
{
	size_t i;

	if (s == NULL || !isalnum((unsigned char)s[0]) || rp_uuid_valid(s))
		return 0;
	for (i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= 63 || !(isalnum(c) || c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int
rp_host_valid(const char *s)
{
	size_t i, n;
	int colons = 0;

	if (s == NULL || (n = strlen(s)) == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == ':')
			colons++;
		else if (!(isalnum(c) || c == '.' || c == '-' || c == '%' || c == '_'))
			return 0;
	}
	/* An IPv6 literal needs at least two colons; a single one would be host:port. */
	return colons == 0 || colons >= 2;
}

int
rp_str_index(const char *const *names, const char *s)
{
	int i;

	for (i = 0; s && names[i]; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

void
rp_str_one_of(char *buf, size_t len, const char *lead, const char *const *names)
{
	size_t i, n;

	snprintf(buf, len, "%sone of:", lead);
	for (i = 0; names[i]; i++) {
		n = strlen(buf);
		snprintf(buf + n, len - n, "%s %s", i ? "," : "", names[i]);
	}
}

char *
rp_str_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	*e = '\0';
	return s;
}

int
rp_bool_parse(const char *v, int *out)
{
	if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
		*out = 1;
	else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "0"))
		*out = 0;
	else
		return -1;
	return 0;
}

int
rp_file_read(const char *path, size_t cap, char **out, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	ssize_t r;
	int fd, rc = -1, saved;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	buf = malloc(cap + 1);
	if (buf == NULL)
		goto out;
	while ((r = read(fd, buf + n, cap + 1 - n)) > 0) {
		n += (size_t)r;
		if (n > cap) {
			errno = EFBIG;
			goto out;
		}
	}
	if (r < 0)
		goto out;
	buf[n] = '\0';
	*out = buf;
	buf = NULL;
	if (len)
		*len = n;
	rc = 0;
out:
	saved = errno;
	free(buf);
	close(fd);
	errno = saved;
	return rc;
}

int
rp_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int
rp_fsync_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd, rc = -1, saved;

	if (slash == NULL)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (dir == NULL)
		return -1;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		goto out;
	if (fsync(fd) < 0)
		goto out;
	rc = 0;
out:
	saved = errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	errno = saved;
	return rc;
}

int
rp_file_write_private(const char *path, const void *data, size_t len, unsigned mode)
{
	char tmp[4096];
	int fd, rc = -1, saved;

	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -1;
	/* The umask may have widened nothing but could have narrowed; force the exact mode. */
	if (fchmod(fd, mode) < 0)
		goto out;
	if (rp_write_all(fd, data, len) < 0 || fsync(fd) < 0)
		goto out;
	if (rename(tmp, path) < 0)
		goto out;
	rc = 0;
out:
	saved = errno;
	close(fd);
	if (rc < 0)
		unlink(tmp);
	errno = saved;
	return rc;
}

size_t
rp_vline(char *buf, size_t cap, const char *fmt, va_list ap)
{
	int n = vsnprintf(buf, cap - 1, fmt, ap);

	if (n < 0)
		return 0;
	if ((size_t)n > cap - 2)
		n = (int)cap - 2;
	buf[n++] = '\n';
	buf[n] = '\0';
	return (size_t)n;
}
