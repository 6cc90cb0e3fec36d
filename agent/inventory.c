/*
 * The inventory collector: the object docs/inventory.md describes.
 * - Everything is read under a root, so a captured tree (tests/fixtures/inventory/) reads
 *   exactly like a live system. Symlinks are resolved here, one component at a time, not by
 *   the kernel: an absolute target (/sys/devices/...) must land inside the root, ".." must
 *   stop at it, and a loop must end.
 * - Nothing is fatal. A source that is missing, unreadable or garbage becomes
 *   {"source", "skipped"} (or null values); only out-of-memory makes the collector return NULL.
 * - Every input has a cap: file and attribute sizes, directory entries, command output and run
 *   time, item counts. Values are copied out of lines into fixed buffers, so a long line is
 *   cut, never overflowed.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "rackpilot/version.h"
#include "rackpilot/common.h"
#include "inventory.h"
#include "run.h"

extern char **environ;

#define INVENTORY_FORMAT 1
#define MAX_LINKS        40          /* symlinks followed for one path: the kernel's own limit */
#define MAX_FILE         (16u << 20) /* /proc/cpuinfo of a machine with thousands of CPUs */
#define MAX_ATTR         4096        /* one sysfs attribute is at most a page */
#define MAX_ENTRIES      16384       /* entries read from one directory (SR-IOV makes PCI long) */
#define MAX_OUTPUT       (4u << 20)  /* stdout of one command */
#define MAX_ITEMS        4096        /* items in one list: disks, nics, PCI devices, IB ports */
#define MAX_DIMMS        1024
#define MAX_GPUS         256
#define MAX_PORTS        64
#define MAX_ADDRS        256 /* addresses of one NIC */
#define MAX_NEIGHBORS    1024
#define MAX_SOCKETS      1024
#define MAX_CPUS         65536
#define FIELD            256 /* one value copied out of a line or an attribute */

struct ctx {
	char root[PATH_MAX]; /* "" for the live system; never ends in '/' */
	int bad_root;        /* root did not fit: every read fails */
	int oom;
	const struct ifaddrs *ifa; /* the NICs' addresses; NULL: none */
};

/* What the PCI walk hands to the GPU section, which falls back to it without nvidia-smi. */
struct pci_info {
	int ok;
	char why[64];
	size_t ngpu;
	char gpu[MAX_GPUS][24];
};

/* --- strings ------------------------------------------------------------------------- */

static void
copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void
lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

/* Garbage input may hold NUL bytes; lines are C strings, so make them plain spaces. */
static void
denul(char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] == '\0')
			s[i] = ' ';
}

/* Next line of the NUL-terminated buffer at *cur (cut in place), or NULL at its end. */
static char *
next_line(char **cur)
{
	char *s = *cur, *nl;

	if (*s == '\0')
		return NULL;
	nl = strchr(s, '\n');
	if (nl != NULL) {
		*nl = '\0';
		*cur = nl + 1;
	} else {
		*cur = s + strlen(s);
	}
	return s;
}

/* Split "key : value" at its first colon, both trimmed. Returns 0, or -1 without a colon. */
static int
kv(char *line, char **key, char **val)
{
	char *colon = strchr(line, ':');

	if (colon == NULL)
		return -1;
	*colon = '\0';
	*key = rp_str_trim(line);
	*val = rp_str_trim(colon + 1);
	return 0;
}

/* A whole decimal (or, with base 16, hex with or without 0x) integer. Returns 0 or -1. */
static int
parse_ll(const char *s, int base, long long *v)
{
	char *end;
	long long x;

	while (isspace((unsigned char)*s))
		s++;
	if (*s == '\0')
		return -1;
	errno = 0;
	x = strtoll(s, &end, base);
	if (errno != 0 || end == s)
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	if (*end != '\0')
		return -1;
	*v = x;
	return 0;
}

/* 1 when s is a PCI address as sysfs names it: "dddd:bb:dd.f", the domain 4 to 8 hex digits
 * (Intel VMD domains have 5). */
static int
is_bdf(const char *s, size_t n)
{
	size_t d, i;

	if (n < 12 || n > 16)
		return 0;
	d = n - 8;
	for (i = 0; i < n; i++) {
		char ch = s[i];

		if (i == d || i == d + 3) {
			if (ch != ':')
				return 0;
		} else if (i == d + 6) {
			if (ch != '.')
				return 0;
		} else if (!isxdigit((unsigned char)ch)) {
			return 0;
		}
	}
	return s[n - 1] >= '0' && s[n - 1] <= '7';
}

/* --- json ----------------------------------------------------------------------------- */

static void
put(struct ctx *c, json_t *obj, const char *key, json_t *v)
{
	/* Fails only for a NULL object or value, i.e. after an allocation failed. */
	if (json_object_set_new(obj, key, v) != 0)
		c->oom = 1;
}

static void
push(struct ctx *c, json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, v) != 0)
		c->oom = 1;
}

/* v, noting when it could not be made. */
static json_t *
made(struct ctx *c, json_t *v)
{
	if (v == NULL)
		c->oom = 1;
	return v;
}

static json_t *
obj(struct ctx *c)
{
	return made(c, json_object());
}

static json_t *
arr(struct ctx *c)
{
	return made(c, json_array());
}

/* A JSON string for s, trimmed, or null when s is NULL or blank. Control bytes become '?', and
 * so does every non-ASCII byte when s is not valid UTF-8: jansson refuses such strings, and
 * garbage must never read as out-of-memory. */
static json_t *
jstr(const char *s)
{
	json_t *v;
	char *t;
	size_t i, n;

	if (s == NULL)
		return json_null();
	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	if (n == 0)
		return json_null();
	if ((t = strndup(s, n)) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
			t[i] = '?';
	v = json_stringn(t, n);
	if (v == NULL) {
		for (i = 0; i < n; i++)
			if ((unsigned char)t[i] >= 0x80)
				t[i] = '?';
		v = json_stringn(t, n);
	}
	free(t);
	return v;
}

static json_t *
jint_or_null(int ok, long long v)
{
	return ok ? json_integer(v) : json_null();
}

static json_t *
section(struct ctx *c, const char *source)
{
	json_t *o = obj(c);

	put(c, o, "source", jstr(source));
	return o;
}

static json_t *
skipped(struct ctx *c, const char *source, const char *why)
{
	json_t *o = section(c, source);

	put(c, o, "skipped", jstr(why));
	return o;
}

static const char *
reason(int err, int dir)
{
	switch (err) {
	case ENOENT:
		return dir ? "no such directory" : "no such file";
	case ENOTDIR:
		return "not a directory";
	case EISDIR:
		return "is a directory";
	case ENXIO:
		return "not a regular file";
	case EACCES:
	case EPERM:
		return "permission denied";
	case ELOOP:
		return "symlink loop";
	case ENAMETOOLONG:
		return "path too long";
	case ENOMEM:
		return "out of memory";
	default:
		return "unreadable";
	}
}

/* --- files under the root ------------------------------------------------------------- */

/* Resolve absolute path p inside the root as the kernel would, following every symlink, into
 * its canonical form (relative to the root, "" for the root itself). Returns 0 or -errno. */
static int
resolve(const struct ctx *c, const char *p, char canon[PATH_MAX])
{
	char todo[PATH_MAX], tmp[PATH_MAX], host[PATH_MAX], target[PATH_MAX];
	const char *rest, *end;
	struct stat st;
	size_t len = 0, n;
	ssize_t t;
	int links = 0;

	if (c->bad_root || strlen(p) >= sizeof todo)
		return -ENAMETOOLONG;
	memcpy(todo, p, strlen(p) + 1);
	canon[0] = '\0';
	rest = todo;
	for (;;) {
		while (*rest == '/')
			rest++;
		if (*rest == '\0')
			return 0;
		end = strchr(rest, '/');
		if (end == NULL)
			end = rest + strlen(rest);
		n = (size_t)(end - rest);
		if (n == 1 && rest[0] == '.') {
			rest = end;
			continue;
		}
		if (n == 2 && rest[0] == '.' && rest[1] == '.') {
			char *slash = strrchr(canon, '/');

			/* ".." at the root stays there, as it does in a chroot. */
			if (slash != NULL) {
				*slash = '\0';
				len = (size_t)(slash - canon);
			}
			rest = end;
			continue;
		}
		if (len + 1 + n >= PATH_MAX)
			return -ENAMETOOLONG;
		canon[len] = '/';
		memcpy(canon + len + 1, rest, n);
		canon[len + 1 + n] = '\0';
		if ((size_t)snprintf(host, sizeof host, "%s%s", c->root, canon) >= sizeof host)
			return -ENAMETOOLONG;
		if (lstat(host, &st) != 0)
			return -errno;
		if (!S_ISLNK(st.st_mode)) {
			len += 1 + n;
			rest = end;
			continue;
		}
		if (++links > MAX_LINKS)
			return -ELOOP;
		t = readlink(host, target, sizeof target - 1);
		if (t < 0)
			return -errno;
		target[t] = '\0';
		/* Continue from the link's directory, or from the root for an absolute target. */
		canon[len] = '\0';
		if (target[0] == '/') {
			canon[0] = '\0';
			len = 0;
		}
		if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s", target, end) >= sizeof tmp)
			return -ENAMETOOLONG;
		memcpy(todo, tmp, strlen(tmp) + 1);
		rest = todo;
	}
}

/* out = a + "/" + b. Returns 0, or -1 when that does not fit (the entry is then skipped). */
static int
join(char out[PATH_MAX], const char *a, const char *b)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", a, b);

	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

static int
host_path(const struct ctx *c, const char *canon, char host[PATH_MAX])
{
	int n = snprintf(host, PATH_MAX, "%s%s", c->root, *canon ? canon : "/");

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Open the file at p for reading. Regular files only, so a FIFO or a device node in a
 * garbage tree can never block the collector. Returns an fd or -errno. */
static int
open_file(const struct ctx *c, const char *p)
{
	char canon[PATH_MAX], host[PATH_MAX];
	struct stat st;
	int fd, rc;

	if ((rc = resolve(c, p, canon)) != 0 || (rc = host_path(c, canon, host)) != 0)
		return rc;
	fd = open(host, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -ENXIO;
	}
	return fd;
}

/* Read the file at p, at most cap bytes (the rest is ignored: a truncated file is parsed as
 * far as it goes), into a new NUL-terminated buffer without NUL bytes inside. Returns its
 * length, or -errno (-ENOMEM also sets c->oom). */
static ssize_t
slurp(struct ctx *c, const char *p, size_t cap, char **out)
{
	size_t len = 0, size = 0;
	char *buf = NULL, *nb;
	ssize_t rc, n;
	int fd;

	if ((fd = open_file(c, p)) < 0)
		return fd;
	for (;;) {
		if (len + 1 >= size) {
			if (size >= cap)
				break;
			size = size == 0 ? 65536 : size * 2;
			if (size > cap)
				size = cap;
			if ((nb = realloc(buf, size)) == NULL) {
				c->oom = 1;
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	denul(buf, len);
	*out = buf;
	buf = NULL;
	rc = (ssize_t)len;
out:
	free(buf);
	close(fd);
	return rc;
}

/* Read one small attribute (a sysfs or procfs file) into buf, trimmed. Returns 0 or -errno;
 * buf is "" on failure. */
static int
read_attr(const struct ctx *c, const char *p, char *buf, size_t cap)
{
	char *t;
	size_t len = 0;
	ssize_t n;
	int fd, rc = 0;

	buf[0] = '\0';
	if ((fd = open_file(c, p)) < 0)
		return fd;
	while (len + 1 < cap) {
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[rc != 0 ? 0 : len] = '\0';
	if (rc != 0)
		return rc;
	denul(buf, len);
	t = rp_str_trim(buf);
	memmove(buf, t, strlen(t) + 1);
	return 0;
}

/* Attribute name under directory dir. Returns 0 or -errno; buf is "" on failure. */
static int
attr(const struct ctx *c, const char *dir, const char *name, char *buf, size_t cap)
{
	char p[PATH_MAX];
	int rc;

	buf[0] = '\0';
	if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p)
		return -ENAMETOOLONG;
	rc = read_attr(c, p, buf, cap);
	if (rc != 0)
		buf[0] = '\0';
	return rc;
}

static json_t *
attr_str(const struct ctx *c, const char *dir, const char *name)
{
	char v[MAX_ATTR];

	attr(c, dir, name, v, sizeof v);
	return jstr(v);
}

/* Attribute as an integer (base 10 or 16). Returns 0 or -1. */
static int
attr_ll(const struct ctx *c, const char *dir, const char *name, int base, long long *out)
{
	char v[FIELD];

	if (attr(c, dir, name, v, sizeof v) != 0)
		return -1;
	return parse_ll(v, base, out);
}

/* Attribute as an integer in [min, max], times mult, as JSON; null otherwise. */
static json_t *
attr_int(const struct ctx *c, const char *dir, const char *name, int base, long long min,
         long long max, long long mult)
{
	long long v;

	if (attr_ll(c, dir, name, base, &v) != 0 || v < min || v > max)
		return json_null();
	return json_integer(v * mult);
}

/* Attribute "0"/"1" as false/true, anything else null. */
static json_t *
attr_bool(const struct ctx *c, const char *dir, const char *name)
{
	long long v;

	if (attr_ll(c, dir, name, 10, &v) != 0 || (v != 0 && v != 1))
		return json_null();
	return json_boolean(v);
}

/* The last component of symlink p's target ("nvidia" from ".../driver"), into buf. The link
 * is read, not followed, so a dangling one still names its driver. Returns 0 or -errno. */
static int
link_name(const struct ctx *c, const char *p, char *buf, size_t cap)
{
	char dir[PATH_MAX], canon[PATH_MAX], host[PATH_MAX], t[PATH_MAX];
	const char *slash = strrchr(p, '/'), *base;
	ssize_t n;
	int rc;

	buf[0] = '\0';
	if (slash == NULL || (size_t)(slash - p) >= sizeof dir)
		return -EINVAL;
	memcpy(dir, p, (size_t)(slash - p));
	dir[slash - p] = '\0';
	if ((rc = resolve(c, dir, canon)) != 0)
		return rc;
	if ((size_t)snprintf(host, sizeof host, "%s%s/%s", c->root, canon, slash + 1) >=
	    sizeof host)
		return -ENAMETOOLONG;
	n = readlink(host, t, sizeof t - 1);
	if (n < 0)
		return -errno;
	t[n] = '\0';
	while (n > 0 && t[n - 1] == '/')
		t[--n] = '\0';
	base = strrchr(t, '/');
	base = base != NULL ? base + 1 : t;
	if (*base == '\0')
		return -ENOENT;
	copy(buf, cap, base);
	return 0;
}

/* The PCI address nearest the leaf of canonical path canon, "" when none: the function a
 * netdev, an NVMe controller or an RDMA device hangs off, however deep (virtio adds a level). */
static void
pci_of(const char *canon, char out[24])
{
	const char *end = canon + strlen(canon), *start;

	out[0] = '\0';
	while (end > canon) {
		start = end;
		while (start > canon && start[-1] != '/')
			start--;
		if (is_bdf(start, (size_t)(end - start))) {
			memcpy(out, start, (size_t)(end - start));
			out[end - start] = '\0';
			return;
		}
		end = start > canon ? start - 1 : canon;
	}
}

struct names {
	char **v;
	size_t n;
};

static void
names_free(struct names *nm)
{
	size_t i;

	for (i = 0; i < nm->n; i++)
		free(nm->v[i]);
	free(nm->v);
	nm->v = NULL;
	nm->n = 0;
}

static int
cmp_names(const void *a, const void *b)
{
	/* Natural order, so eth10 follows eth9 and mlx5_10 follows mlx5_9. */
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of directory p (without "." and ".."), in natural order, at most MAX_ENTRIES.
 * Returns 0 or -errno; call names_free() either way. */
static int
list_dir(struct ctx *c, const char *p, struct names *nm)
{
	char canon[PATH_MAX], host[PATH_MAX], **nv;
	size_t size = 0;
	struct dirent *e;
	DIR *d;
	int rc;

	nm->v = NULL;
	nm->n = 0;
	if ((rc = resolve(c, p, canon)) != 0 || (rc = host_path(c, canon, host)) != 0)
		return rc;
	if ((d = opendir(host)) == NULL)
		return -errno;
	rc = 0;
	while (nm->n < MAX_ENTRIES && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (nm->n == size) {
			size = size == 0 ? 64 : size * 2;
			if ((nv = realloc(nm->v, size * sizeof *nv)) == NULL) {
				rc = -ENOMEM;
				break;
			}
			nm->v = nv;
		}
		if ((nm->v[nm->n] = strdup(e->d_name)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		nm->n++;
	}
	closedir(d);
	if (rc == -ENOMEM)
		c->oom = 1;
	if (nm->n > 1)
		qsort(nm->v, nm->n, sizeof *nm->v, cmp_names);
	return rc;
}

/* 0 when p is a directory, else -errno. */
static int
is_dir(const struct ctx *c, const char *p)
{
	char canon[PATH_MAX], host[PATH_MAX];
	struct stat st;
	int rc;

	if ((rc = resolve(c, p, canon)) != 0 || (rc = host_path(c, canon, host)) != 0)
		return rc;
	if (stat(host, &st) != 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* --- commands ------------------------------------------------------------------------- */

static int
executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Find tool. Under a root only ROOT/usr/bin/<tool> (resolved inside the root) counts; live,
 * the PATH, then the sbin directories a service's PATH often lacks (dmidecode lives there).
 * Returns 0 with the host path, or -1. */
static int
find_tool(const struct ctx *c, const char *tool, char path[PATH_MAX])
{
	char p[PATH_MAX], canon[PATH_MAX], dirs[8192], *dir, *save = NULL;
	const char *env = getenv("PATH");

	if (c->root[0] != '\0' || c->bad_root) {
		if ((size_t)snprintf(p, sizeof p, "/usr/bin/%s", tool) >= sizeof p ||
		    resolve(c, p, canon) != 0 || host_path(c, canon, path) != 0)
			return -1;
		return executable(path) ? 0 : -1;
	}
	snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin:/usr/bin:/bin", env != NULL ? env : "");
	for (dir = strtok_r(dirs, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
		/* Relative PATH entries would make the result depend on the cwd. */
		if (dir[0] != '/')
			continue;
		if ((size_t)snprintf(path, PATH_MAX, "%s/%s", dir, tool) >= PATH_MAX)
			continue;
		if (executable(path))
			return 0;
	}
	return -1;
}

/* A tool's stdout, into an rp_buf capped at MAX_OUTPUT: a refused chunk stops the tool. */
static int
collect(void *arg, const void *p, size_t n)
{
	return rp_buf_append(arg, p, n);
}

/* Run path with argv (rp_agent_proc_run): stdin and stderr on /dev/null, LC_ALL=C, killed at
 * once after timeout_ms or MAX_OUTPUT bytes of stdout. Returns 0 with the output (*out
 * NUL-terminated, NULs inside made spaces; the caller frees it) when it exits 0; otherwise -1
 * with the reason in why. */
static int
run(struct ctx *c, const char *path, char *const argv[], int timeout_ms, char **out, size_t *outlen,
    char *why, size_t whycap)
{
	struct rp_agent_proc p = {.path = path, .argv = argv, .timeout_ms = timeout_ms};
	struct rp_agent_proc_end end;
	struct rp_buf b;
	char **env = NULL;
	size_t ne = 0, i, k = 0;
	int rc = -1;

	rp_buf_init(&b, MAX_OUTPUT);
	snprintf(why, whycap, "cannot run");
	while (environ != NULL && environ[ne] != NULL)
		ne++;
	if ((env = calloc(ne + 2, sizeof *env)) == NULL) {
		c->oom = 1;
		goto out;
	}
	/* Tools' output is parsed: keep it in the C locale. */
	for (i = 0; i < ne; i++)
		if (strncmp(environ[i], "LC_ALL=", 7) != 0)
			env[k++] = environ[i];
	env[k] = (char *)"LC_ALL=C";
	p.envp = env;
	p.output = collect;
	p.arg = &b;
	if (rp_agent_proc_run(&p, &end) < 0)
		goto out;
	if (b.oom) {
		c->oom = 1;
		goto out;
	}
	if (end.exec_errno) {
		snprintf(why, whycap, "cannot run: %s", strerror(end.exec_errno));
		goto out;
	}
	if (end.timed_out) {
		snprintf(why, whycap, "timed out after %d s", timeout_ms / 1000);
		goto out;
	}
	if (b.toobig) {
		snprintf(why, whycap, "output over %u bytes", MAX_OUTPUT);
		goto out;
	}
	if (WIFSIGNALED(end.status)) {
		snprintf(why, whycap, "killed by signal %d", WTERMSIG(end.status));
		goto out;
	}
	if (WIFEXITED(end.status) && WEXITSTATUS(end.status) != 0) {
		snprintf(why, whycap, "exit status %d", WEXITSTATUS(end.status));
		goto out;
	}
	if (b.data == NULL && (b.data = calloc(1, 1)) == NULL) {
		c->oom = 1;
		goto out;
	}
	denul(b.data, b.len);
	*out = b.data;
	*outlen = b.len;
	b.data = NULL;
	rc = 0;
out:
	free(env);
	rp_buf_free(&b);
	return rc;
}

/* Run tool with up to six arguments. Returns 0 with its output, or -1 with why ("not
 * installed", "exit status 6", "timed out after 60 s", ...). */
static int
tool(struct ctx *c, const char *name, const char *const args[], int timeout_ms, char **out,
     size_t *len, char *why, size_t whycap)
{
	char path[PATH_MAX], *argv[8];
	size_t i;

	if (find_tool(c, name, path) != 0) {
		snprintf(why, whycap, "not installed");
		return -1;
	}
	argv[0] = (char *)name;
	for (i = 0; i < 6 && args[i] != NULL; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	return run(c, path, argv, timeout_ms, out, len, why, whycap);
}

/* --- sections ------------------------------------------------------------------------- */

/* DMI placeholders firmware leaves in unset fields: unknown, so null. */
static int
dmi_placeholder(const char *s)
{
	static const char *const ph[] = {
	        "To Be Filled By O.E.M.",
	        "To be filled by O.E.M.",
	        "Default string",
	        "Not Specified",
	        "Not Applicable",
	        "System Serial Number",
	        "System Product Name",
	        "System manufacturer",
	        "None",
	        "N/A",
	        "0123456789",
	        "Unknown",
	        "Not Available",
	        "OEM",
	        "O.E.M.",
	};
	size_t i;

	for (i = 0; i < sizeof ph / sizeof *ph; i++)
		if (strcasecmp(s, ph[i]) == 0)
			return 1;
	return 0;
}

static json_t *
dmi_field(const struct ctx *c, const char *name, int lowercase)
{
	char v[MAX_ATTR];

	if (attr(c, "/sys/class/dmi/id", name, v, sizeof v) != 0 || dmi_placeholder(v))
		return json_null();
	if (lowercase)
		lower(v);
	return jstr(v);
}

static json_t *
system_section(struct ctx *c)
{
	const char *src = "/sys/class/dmi/id";
	json_t *o, *bios;
	int rc;

	if ((rc = is_dir(c, src)) != 0)
		return skipped(c, src, reason(-rc, 1));
	o = section(c, src);
	put(c, o, "vendor", dmi_field(c, "sys_vendor", 0));
	put(c, o, "product", dmi_field(c, "product_name", 0));
	/* product_serial and product_uuid are root-only: null for an unprivileged agent. */
	put(c, o, "serial", dmi_field(c, "product_serial", 0));
	put(c, o, "uuid", dmi_field(c, "product_uuid", 1));
	put(c, o, "board", dmi_field(c, "board_name", 0));
	bios = obj(c);
	put(c, bios, "vendor", dmi_field(c, "bios_vendor", 0));
	put(c, bios, "version", dmi_field(c, "bios_version", 0));
	put(c, bios, "date", dmi_field(c, "bios_date", 0));
	put(c, o, "bios", bios);
	return o;
}

struct cpu_pair {
	long long phys, core;
};

static int
cmp_pair(const void *a, const void *b)
{
	const struct cpu_pair *x = a, *y = b;

	if (x->phys != y->phys)
		return x->phys < y->phys ? -1 : 1;
	return x->core < y->core ? -1 : x->core > y->core;
}

/* 1 when word w is in the space-separated list s. */
static int
has_word(const char *s, const char *w)
{
	size_t n = strlen(w), k;

	while (*s) {
		s += strspn(s, " \t");
		k = strcspn(s, " \t");
		if (k == n && strncmp(s, w, n) == 0)
			return 1;
		s += k;
	}
	return 0;
}

/* One processor record of /proc/cpuinfo, folded into the socket and core sets. */
struct cpu_acc {
	long long sockets[MAX_SOCKETS];
	long long socket_cores[MAX_SOCKETS];
	size_t nsockets;
	struct cpu_pair *pairs;
	size_t npairs;
};

static void
cpu_record(struct cpu_acc *a, long long phys, long long core, long long cores)
{
	size_t i;

	if (phys < 0)
		return;
	for (i = 0; i < a->nsockets && a->sockets[i] != phys; i++)
		;
	if (i == a->nsockets) {
		if (i == MAX_SOCKETS)
			return;
		a->sockets[a->nsockets] = phys;
		a->socket_cores[a->nsockets++] = 0;
	}
	if (cores > a->socket_cores[i])
		a->socket_cores[i] = cores;
	if (core >= 0 && a->npairs < MAX_CPUS)
		a->pairs[a->npairs++] = (struct cpu_pair){phys, core};
}

/* Count node<N> directories. Returns the count, or -errno. */
static long long
numa_count(struct ctx *c, const char *src)
{
	struct names nm;
	size_t i;
	long long n = 0;
	int rc;

	rc = list_dir(c, src, &nm);
	for (i = 0; rc == 0 && i < nm.n; i++) {
		const char *s = nm.v[i];

		if (strncmp(s, "node", 4) == 0 && s[4] != '\0' &&
		    strspn(s + 4, "0123456789") == strlen(s + 4))
			n++;
	}
	names_free(&nm);
	return rc != 0 ? rc : n;
}

static json_t *
cpu_section(struct ctx *c)
{
	static const char *const flag_names[] = {"avx512f", "avx512_bf16", "amx_tile", "vmx",
	                                         "svm",     "sse4_2",      "avx2",     "aes"};
	const char *src = "/proc/cpuinfo", *numa_src = "/sys/devices/system/node";
	char *buf = NULL, *cur, *line, *k, *v, *flags = NULL, model[FIELD] = "";
	long long phys = -1, core = -1, cores = -1, threads = 0, x, total = 0, ncores = 0, numa;
	struct cpu_acc *a = NULL;
	json_t *o = NULL, *fl;
	ssize_t n;
	size_t i;

	if ((n = slurp(c, src, MAX_FILE, &buf)) < 0)
		return skipped(c, src, reason((int)-n, 0));
	if ((a = calloc(1, sizeof *a)) == NULL ||
	    (a->pairs = calloc(MAX_CPUS, sizeof *a->pairs)) == NULL) {
		c->oom = 1;
		goto out;
	}
	cur = buf;
	while ((line = next_line(&cur)) != NULL) {
		if (kv(line, &k, &v) != 0)
			continue;
		if (strcmp(k, "processor") == 0) {
			/* A new record: fold the previous one. */
			if (threads > 0)
				cpu_record(a, phys, core, cores);
			threads++;
			phys = core = cores = -1;
		} else if (strcmp(k, "model name") == 0 && model[0] == '\0') {
			copy(model, sizeof model, v);
		} else if (strcmp(k, "physical id") == 0) {
			phys = parse_ll(v, 10, &x) == 0 && x >= 0 ? x : -1;
		} else if (strcmp(k, "core id") == 0) {
			core = parse_ll(v, 10, &x) == 0 && x >= 0 ? x : -1;
		} else if (strcmp(k, "cpu cores") == 0) {
			cores = parse_ll(v, 10, &x) == 0 && x > 0 && x < MAX_CPUS ? x : -1;
		} else if ((strcmp(k, "flags") == 0 || strcmp(k, "Features") == 0) &&
		           flags == NULL) {
			flags = v;
		}
	}
	if (threads > 0)
		cpu_record(a, phys, core, cores);
	if (a->npairs > 0) {
		/* Distinct (socket, core) pairs: right even with CPUs offline or SMT off. */
		qsort(a->pairs, a->npairs, sizeof *a->pairs, cmp_pair);
		for (i = 0; i < a->npairs; i++)
			if (i == 0 || cmp_pair(&a->pairs[i], &a->pairs[i - 1]) != 0)
				ncores++;
	} else {
		for (i = 0; i < a->nsockets; i++)
			total += a->socket_cores[i] > 0 ? a->socket_cores[i] : 0;
		ncores = total;
	}
	o = section(c, src);
	put(c, o, "model", jstr(model));
	put(c, o, "sockets", jint_or_null(a->nsockets > 0, (long long)a->nsockets));
	put(c, o, "cores", jint_or_null(ncores > 0, ncores));
	put(c, o, "threads", jint_or_null(threads > 0, threads));
	if (flags != NULL) {
		fl = obj(c);
		for (i = 0; i < sizeof flag_names / sizeof *flag_names; i++)
			put(c, fl, flag_names[i], json_boolean(has_word(flags, flag_names[i])));
	} else {
		fl = json_null();
	}
	put(c, o, "flags", fl);
	numa = numa_count(c, numa_src);
	put(c, o, "numa_nodes", jint_or_null(numa >= 0, numa));
	put(c, o, "numa_source", jstr(numa_src));
	if (numa < 0)
		put(c, o, "numa_skipped", jstr(reason((int)-numa, 1)));
out:
	if (a != NULL)
		free(a->pairs);
	free(a);
	free(buf);
	return o;
}

/* Bytes in a dmidecode size ("64 GB", "65536 MB", "32 GiB"; SMBIOS sizes are binary whatever
 * the prefix says). Returns the size, -2 for an empty slot, -1 when unknown. */
static long long
dmi_size(const char *s)
{
	static const struct {
		const char *unit;
		long long mult;
	} units[] = {
	        {"bytes", 1},      {"kB", 1LL << 10},  {"KB", 1LL << 10}, {"KiB", 1LL << 10},
	        {"MB", 1LL << 20}, {"MiB", 1LL << 20}, {"GB", 1LL << 30}, {"GiB", 1LL << 30},
	        {"TB", 1LL << 40}, {"TiB", 1LL << 40},
	};
	char num[64], *end;
	long long v;
	size_t i;

	if (*s == '\0' || strcasecmp(s, "No Module Installed") == 0 ||
	    strcasecmp(s, "Not Installed") == 0)
		return -2;
	if (!isdigit((unsigned char)*s))
		return -1;
	copy(num, sizeof num, s);
	errno = 0;
	v = strtoll(num, &end, 10);
	if (errno != 0 || v < 0)
		return -1;
	while (*end == ' ')
		end++;
	for (i = 0; i < sizeof units / sizeof *units; i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		if (v > LLONG_MAX / units[i].mult)
			return -1;
		return v == 0 ? -2 : v * units[i].mult;
	}
	return -1;
}

struct dimm {
	char size[64], locator[FIELD], bank[FIELD], type[64], speed[64], manufacturer[FIELD],
	        part[FIELD], serial[FIELD];
};

static int
dimm_unknown(const char *s)
{
	static const char *const ph[] = {"",        "Unknown",   "Not Specified", "Not Provided",
	                                 "NO DIMM", "None",      "Empty",         "[Empty]",
	                                 "N/A",     "Undefined", "Other"};
	size_t i;

	for (i = 0; i < sizeof ph / sizeof *ph; i++)
		if (strcasecmp(s, ph[i]) == 0)
			return 1;
	return 0;
}

static json_t *
dimm_str(const char *s)
{
	return dimm_unknown(s) ? json_null() : jstr(s);
}

static void
dimm_emit(struct ctx *c, json_t *items, const struct dimm *d, size_t *populated)
{
	long long size = dmi_size(d->size), speed;
	json_t *it = obj(c);
	char *end;

	if (size != -2)
		(*populated)++;
	put(c, it, "locator", dimm_str(d->locator));
	put(c, it, "bank_locator", dimm_str(d->bank));
	put(c, it, "populated", json_boolean(size != -2));
	put(c, it, "size_bytes", size == -2 ? json_integer(0) : jint_or_null(size >= 0, size));
	put(c, it, "type", dimm_str(d->type));
	/* "4800 MT/s" from dmidecode 3.3 on, "4800 MHz" before. */
	errno = 0;
	speed = strtoll(d->speed, &end, 10);
	put(c, it, "speed_mts",
	    jint_or_null(errno == 0 && end != d->speed && speed > 0 &&
	                         (strcmp(end, " MT/s") == 0 || strcmp(end, " MHz") == 0),
	                 speed));
	put(c, it, "manufacturer", dimm_str(d->manufacturer));
	put(c, it, "part_number", dimm_str(d->part));
	put(c, it, "serial", dimm_str(d->serial));
	push(c, items, it);
}

static json_t *
dimms_section(struct ctx *c)
{
	static const char *const args[] = {"-t", "memory", NULL};
	const char *src = "dmidecode -t memory";
	char why[128], *out = NULL, *cur, *line, *k, *v;
	size_t len = 0, count = 0, populated = 0;
	struct dimm d;
	json_t *o, *items;
	int in_dev = 0;

	if (tool(c, "dmidecode", args, 20000, &out, &len, why, sizeof why) != 0)
		return skipped(c, src, why);
	items = arr(c);
	cur = out;
	while ((line = next_line(&cur)) != NULL) {
		if (!isspace((unsigned char)line[0])) {
			/* A record starts at column 0: "Handle ...", then its name. */
			if (in_dev)
				dimm_emit(c, items, &d, &populated);
			in_dev = 0;
			if (strcmp(rp_str_trim(line), "Memory Device") == 0 && count < MAX_DIMMS) {
				memset(&d, 0, sizeof d);
				in_dev = 1;
				count++;
			}
			continue;
		}
		if (!in_dev || kv(line, &k, &v) != 0)
			continue;
		if (strcmp(k, "Size") == 0)
			copy(d.size, sizeof d.size, v);
		else if (strcmp(k, "Locator") == 0)
			copy(d.locator, sizeof d.locator, v);
		else if (strcmp(k, "Bank Locator") == 0)
			copy(d.bank, sizeof d.bank, v);
		else if (strcmp(k, "Type") == 0)
			copy(d.type, sizeof d.type, v);
		else if (strcmp(k, "Speed") == 0)
			copy(d.speed, sizeof d.speed, v);
		else if (strcmp(k, "Manufacturer") == 0)
			copy(d.manufacturer, sizeof d.manufacturer, v);
		else if (strcmp(k, "Part Number") == 0)
			copy(d.part, sizeof d.part, v);
		else if (strcmp(k, "Serial Number") == 0)
			copy(d.serial, sizeof d.serial, v);
	}
	if (in_dev)
		dimm_emit(c, items, &d, &populated);
	free(out);
	if (count == 0) {
		/* A VM's "No SMBIOS nor DMI entry point found" is no answer, not zero DIMMs. */
		json_decref(items);
		return skipped(c, src, "no memory devices in output");
	}
	o = section(c, src);
	put(c, o, "count", json_integer((json_int_t)count));
	put(c, o, "populated", json_integer((json_int_t)populated));
	put(c, o, "items", items);
	return o;
}

static json_t *
memory_section(struct ctx *c)
{
	const char *src = "/proc/meminfo";
	char *buf = NULL, *cur, *line, *k, *v, *end;
	long long kb = -1, x;
	json_t *o;
	ssize_t n;

	if ((n = slurp(c, src, 1u << 20, &buf)) < 0) {
		/* The DIMMs come from elsewhere: still worth reporting. */
		o = skipped(c, src, reason((int)-n, 0));
		put(c, o, "dimms", dimms_section(c));
		return o;
	}
	cur = buf;
	while ((line = next_line(&cur)) != NULL) {
		if (kv(line, &k, &v) != 0 || strcmp(k, "MemTotal") != 0)
			continue;
		errno = 0;
		x = strtoll(v, &end, 10);
		if (errno == 0 && end != v && x >= 0 && strcmp(end, " kB") == 0 &&
		    x <= LLONG_MAX / 1024)
			kb = x;
		break;
	}
	free(buf);
	o = section(c, src);
	put(c, o, "total_bytes", jint_or_null(kb >= 0, kb * 1024));
	put(c, o, "dimms", dimms_section(c));
	return o;
}

/* Block devices that are no hardware. Those under /sys/devices/virtual are skipped anyway;
 * the names also catch trees where /sys/block holds plain directories. */
static int
virtual_block(const char *name)
{
	static const char *const pre[] = {"loop", "ram", "zram", "dm-", "md", "nbd"};
	size_t i;

	for (i = 0; i < sizeof pre / sizeof *pre; i++)
		if (strncmp(name, pre[i], strlen(pre[i])) == 0)
			return 1;
	return 0;
}

/* The first readable attribute of dir among names, as a JSON string (or null). */
static json_t *
first_attr(const struct ctx *c, const char *dir, const char *const names[])
{
	char v[MAX_ATTR];
	size_t i;

	for (i = 0; names[i] != NULL; i++)
		if (attr(c, dir, names[i], v, sizeof v) == 0 && v[0] != '\0')
			return jstr(v);
	return json_null();
}

static json_t *
disks_section(struct ctx *c)
{
	static const char *const serials[] = {"device/serial", "serial", NULL};
	static const char *const wwids[] = {"wwid", "device/wwid", NULL};
	const char *src = "/sys/block";
	char dir[PATH_MAX], canon[PATH_MAX];
	struct names nm;
	json_t *o = NULL, *items, *it;
	size_t i, n = 0;
	int rc;

	if ((rc = list_dir(c, src, &nm)) != 0) {
		o = skipped(c, src, reason(-rc, 1));
		goto out;
	}
	o = section(c, src);
	items = arr(c);
	for (i = 0; i < nm.n && n < MAX_ITEMS; i++) {
		if (virtual_block(nm.v[i]))
			continue;
		if (join(dir, src, nm.v[i]) != 0 || resolve(c, dir, canon) != 0 ||
		    strstr(canon, "/devices/virtual/") != NULL)
			continue;
		it = obj(c);
		put(c, it, "name", jstr(nm.v[i]));
		/* size counts 512-byte sectors whatever the logical block size. */
		put(c, it, "size_bytes", attr_int(c, dir, "size", 10, 0, LLONG_MAX / 512, 512));
		put(c, it, "model", attr_str(c, dir, "device/model"));
		put(c, it, "serial", first_attr(c, dir, serials));
		put(c, it, "wwid", first_attr(c, dir, wwids));
		put(c, it, "rotational", attr_bool(c, dir, "queue/rotational"));
		put(c, it, "nvme", json_boolean(strncmp(nm.v[i], "nvme", 4) == 0));
		put(c, it, "removable", attr_bool(c, dir, "removable"));
		push(c, items, it);
		n++;
	}
	put(c, o, "items", items);
out:
	names_free(&nm);
	return o;
}

/* The prefix length of netmask (len bytes): its leading one bits; a NULL netmask is a host
 * route (all of them). */
static unsigned
prefix_len(const unsigned char *mask, size_t len)
{
	unsigned n = 0;
	size_t i;
	int b;

	if (mask == NULL)
		return (unsigned)len * 8;
	for (i = 0; i < len; i++)
		for (b = 7; b >= 0; b--) {
			if (!(mask[i] >> b & 1))
				return n;
			n++;
		}
	return n;
}

/* ifname's IPv4 and IPv6 addresses in c->ifa as CIDR strings ("10.0.0.7/24", "fe80::1/64"),
 * in the list's order; an IPv4 address labelled "ifname:N" is ifname's too. */
static json_t *
nic_addresses(struct ctx *c, const char *ifname)
{
	const struct ifaddrs *a;
	size_t nl = strlen(ifname);
	json_t *list = arr(c);

	for (a = c->ifa; a != NULL && json_array_size(list) < MAX_ADDRS; a = a->ifa_next) {
		const void *addr, *mask = NULL;
		char text[INET6_ADDRSTRLEN], cidr[INET6_ADDRSTRLEN + 8];
		size_t alen;
		int fam;

		if (a->ifa_addr == NULL || a->ifa_name == NULL ||
		    strncmp(a->ifa_name, ifname, nl) != 0 ||
		    (a->ifa_name[nl] != '\0' && a->ifa_name[nl] != ':'))
			continue;
		fam = a->ifa_addr->sa_family;
		if (fam == AF_INET) {
			addr = &((const struct sockaddr_in *)(const void *)a->ifa_addr)->sin_addr;
			if (a->ifa_netmask != NULL)
				mask = &((const struct sockaddr_in *)(const void *)a->ifa_netmask)
				                ->sin_addr;
			alen = 4;
		} else if (fam == AF_INET6) {
			addr = &((const struct sockaddr_in6 *)(const void *)a->ifa_addr)->sin6_addr;
			if (a->ifa_netmask != NULL)
				mask = &((const struct sockaddr_in6 *)(const void *)a->ifa_netmask)
				                ->sin6_addr;
			alen = 16;
		} else {
			continue; /* AF_PACKET: the MAC, already there */
		}
		if (inet_ntop(fam, addr, text, sizeof text) == NULL)
			continue;
		snprintf(cidr, sizeof cidr, "%s/%u", text, prefix_len(mask, alen));
		push(c, list, jstr(cidr));
	}
	return list;
}

static json_t *
nics_section(struct ctx *c)
{
	const char *src = "/sys/class/net";
	char dir[PATH_MAX], dev[PATH_MAX], canon[PATH_MAX], v[FIELD], pci[24];
	struct names nm;
	json_t *o = NULL, *items, *it;
	long long x;
	size_t i, n = 0;
	int rc;

	if ((rc = list_dir(c, src, &nm)) != 0) {
		o = skipped(c, src, reason(-rc, 1));
		goto out;
	}
	o = section(c, src);
	items = arr(c);
	for (i = 0; i < nm.n && n < MAX_ITEMS; i++) {
		/* Hardware only: bridges, bonds, VLANs, veths, tunnels (and lo) have no device. */
		if (strcmp(nm.v[i], "lo") == 0 || join(dir, src, nm.v[i]) != 0 ||
		    join(dev, dir, "device") != 0 || resolve(c, dev, canon) != 0)
			continue;
		it = obj(c);
		put(c, it, "name", jstr(nm.v[i]));
		attr(c, dir, "address", v, sizeof v);
		lower(v);
		put(c, it, "mac", jstr(v));
		if (join(dev, dir, "device/driver") != 0 || link_name(c, dev, v, sizeof v) != 0)
			v[0] = '\0';
		put(c, it, "driver", jstr(v));
		/* carrier is unreadable (EINVAL) while the interface is down. */
		put(c, it, "link", json_boolean(attr_ll(c, dir, "carrier", 10, &x) == 0 && x == 1));
		/* speed is -1, 4294967295 (older kernels) or unreadable when unknown. */
		put(c, it, "speed_mbps", attr_int(c, dir, "speed", 10, 1, 99999999, 1));
		put(c, it, "mtu", attr_int(c, dir, "mtu", 10, 1, INT_MAX, 1));
		pci_of(canon, pci);
		put(c, it, "pci", jstr(pci));
		put(c, it, "operstate", attr_str(c, dir, "operstate"));
		put(c, it, "addresses", nic_addresses(c, nm.v[i]));
		push(c, items, it);
		n++;
	}
	put(c, o, "items", items);
out:
	names_free(&nm);
	return o;
}

/* A sysfs hex id ("0x10de"), normalised to lowercase; -1 when not one. */
static long long
pci_id(const struct ctx *c, const char *dir, const char *name, char *buf, size_t cap)
{
	long long v;

	if (attr(c, dir, name, buf, cap) != 0 || strncmp(buf, "0x", 2) != 0 ||
	    parse_ll(buf, 16, &v) != 0 || v < 0) {
		buf[0] = '\0';
		return -1;
	}
	lower(buf);
	return v;
}

static json_t *
pci_section(struct ctx *c, struct pci_info *pi)
{
	const char *src = "/sys/bus/pci/devices";
	char dir[PATH_MAX], p[PATH_MAX], cls[FIELD], ven[FIELD], devid[FIELD], drv[FIELD];
	size_t i, n = 0, ngpu = 0, nhca = 0;
	long long klass, vendor;
	struct names nm;
	json_t *o = NULL, *devs, *it;
	int rc;

	pi->ok = 0;
	pi->ngpu = 0;
	if ((rc = list_dir(c, src, &nm)) != 0) {
		copy(pi->why, sizeof pi->why, reason(-rc, 1));
		o = skipped(c, src, pi->why);
		goto out;
	}
	pi->ok = 1;
	o = section(c, src);
	devs = arr(c);
	for (i = 0; i < nm.n && n < MAX_ITEMS; i++) {
		if (join(dir, src, nm.v[i]) != 0)
			continue;
		klass = pci_id(c, dir, "class", cls, sizeof cls);
		vendor = pci_id(c, dir, "vendor", ven, sizeof ven);
		pci_id(c, dir, "device", devid, sizeof devid);
		if (join(p, dir, "driver") != 0 || link_name(c, p, drv, sizeof drv) != 0)
			drv[0] = '\0';
		it = obj(c);
		put(c, it, "address", jstr(nm.v[i]));
		put(c, it, "class", jstr(cls));
		put(c, it, "vendor", jstr(ven));
		put(c, it, "device", jstr(devid));
		put(c, it, "driver", jstr(drv));
		/* -1: the platform did not say. */
		put(c, it, "numa_node", attr_int(c, dir, "numa_node", 10, 0, INT_MAX, 1));
		push(c, devs, it);
		n++;
		/* The counting rules are docs/inventory.md's. */
		if (vendor == 0x10de && klass >= 0 &&
		    ((klass >> 8) == 0x0300 || (klass >> 8) == 0x0302)) {
			if (ngpu < MAX_GPUS)
				copy(pi->gpu[ngpu], sizeof pi->gpu[ngpu], nm.v[i]);
			ngpu++;
		}
		if (klass >= 0 &&
		    ((klass >> 8) == 0x0207 || (vendor == 0x15b3 && (klass >> 8) == 0x0200)))
			nhca++;
	}
	pi->ngpu = ngpu < MAX_GPUS ? ngpu : MAX_GPUS;
	put(c, o, "devices", devs);
	put(c, o, "gpu_count", json_integer((json_int_t)ngpu));
	put(c, o, "hca_count", json_integer((json_int_t)nhca));
out:
	names_free(&nm);
	return o;
}

/* "00000000:18:00.0" (nvidia-smi's 8-digit domain, uppercase) as sysfs writes it,
 * "0000:18:00.0". Returns 0, or -1 when s is no PCI address. */
static int
smi_bdf(const char *s, char out[24])
{
	unsigned long part[4];
	const char seps[4] = {':', ':', '.', '\0'};
	const int digits[4] = {8, 2, 2, 1};
	char *end;
	int i;

	for (i = 0; i < 4; i++) {
		if (!isxdigit((unsigned char)*s))
			return -1;
		part[i] = strtoul(s, &end, 16);
		if (end - s > digits[i] || (i > 0 && end - s != digits[i]) || *end != seps[i])
			return -1;
		s = end + 1;
	}
	if (part[3] > 7)
		return -1;
	snprintf(out, 24, "%04lx:%02lx:%02lx.%lx", part[0], part[1], part[2], part[3]);
	return 0;
}

/* nvidia-smi's "[N/A]", "[Not Supported]", "[Unknown Error]"...: unknown, so null. */
static json_t *
smi_str(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || strcmp(s, "N/A") == 0 || (s[0] == '[' && s[n - 1] == ']'))
		return json_null();
	return jstr(s);
}

/* The rows of nvidia-smi's CSV into items; lines that are not 8 fields with an index and a
 * PCI address are ignored. Returns the number of rows taken. */
static size_t
smi_parse(struct ctx *c, char *out, json_t *items)
{
	char *cur = out, *line, *f[9], *s, bdf[24];
	long long idx, mib;
	size_t rows = 0, nf;
	json_t *it;

	while (rows < MAX_GPUS && (line = next_line(&cur)) != NULL) {
		for (nf = 0, s = line; nf < 9; nf++) {
			f[nf] = s;
			if ((s = strchr(s, ',')) == NULL) {
				nf++;
				break;
			}
			*s++ = '\0';
		}
		if (nf != 8 || s != NULL)
			continue;
		for (nf = 0; nf < 8; nf++)
			f[nf] = rp_str_trim(f[nf]);
		if (parse_ll(f[0], 10, &idx) != 0 || idx < 0 || idx > 65535 ||
		    smi_bdf(f[7], bdf) != 0)
			continue;
		it = obj(c);
		put(c, it, "index", json_integer(idx));
		put(c, it, "name", smi_str(f[1]));
		put(c, it, "serial", smi_str(f[2]));
		put(c, it, "uuid", smi_str(f[3]));
		put(c, it, "vbios", smi_str(f[4]));
		if (parse_ll(f[5], 10, &mib) != 0 || mib < 0)
			mib = -1;
		put(c, it, "memory_mib", jint_or_null(mib >= 0, mib));
		put(c, it, "driver", smi_str(f[6]));
		put(c, it, "pci", jstr(bdf));
		push(c, items, it);
		rows++;
	}
	return rows;
}

static json_t *
gpus_section(struct ctx *c, const struct pci_info *pi)
{
	static const char *const args[] = {
	        "--query-gpu=index,name,serial,uuid,vbios_version,memory.total,driver_version,"
	        "pci.bus_id",
	        "--format=csv,noheader,nounits", NULL};
	char why[160], both[256], *out = NULL;
	json_t *o, *items, *it;
	size_t len, rows, i;

	if (tool(c, "nvidia-smi", args, 60000, &out, &len, why, sizeof why) == 0) {
		items = arr(c);
		rows = smi_parse(c, out, items);
		free(out);
		if (rows > 0) {
			o = section(c, "nvidia-smi");
			put(c, o, "count", json_integer((json_int_t)rows));
			put(c, o, "items", items);
			return o;
		}
		json_decref(items);
		snprintf(why, sizeof why, "no GPU rows in output");
	}
	/* Without the driver's view, PCI still tells how many GPUs are on the bus. */
	if (!pi->ok) {
		snprintf(both, sizeof both, "%s; /sys/bus/pci/devices: %s", why, pi->why);
		return skipped(c, "nvidia-smi", both);
	}
	o = section(c, "/sys/bus/pci/devices");
	put(c, o, "count", json_integer((json_int_t)pi->ngpu));
	items = arr(c);
	for (i = 0; i < pi->ngpu; i++) {
		it = obj(c);
		put(c, it, "index", json_integer((json_int_t)i));
		put(c, it, "name", json_null());
		put(c, it, "serial", json_null());
		put(c, it, "uuid", json_null());
		put(c, it, "vbios", json_null());
		put(c, it, "memory_mib", json_null());
		put(c, it, "driver", json_null());
		put(c, it, "pci", jstr(pi->gpu[i]));
		push(c, items, it);
	}
	put(c, o, "items", items);
	put(c, o, "nvidia_smi", jstr(why));
	return o;
}

/* "4: ACTIVE" -> "ACTIVE" (sysfs prefixes IB states with their number). */
static const char *
after_number(const char *s)
{
	const char *p = s;

	while (isdigit((unsigned char)*p))
		p++;
	if (p > s && p[0] == ':' && p[1] == ' ')
		return p + 2;
	return s;
}

/* What an RDMA device's ports share. */
struct ib_dev {
	const char *name;
	json_t *fw, *node_guid;
	json_t *board_id; /* the PSID on Mellanox/NVIDIA ConnectX ("MT_0000000838") */
	char pci[24];
};

static json_t *
ib_port(struct ctx *c, const struct ib_dev *d, const char *dir, long long num)
{
	char v[MAX_ATTR], *end;
	double rate;
	json_t *it;

	it = obj(c);
	put(c, it, "device", jstr(d->name));
	put(c, it, "port", json_integer(num));
	attr(c, dir, "state", v, sizeof v);
	put(c, it, "state", jstr(after_number(v)));
	attr(c, dir, "phys_state", v, sizeof v);
	put(c, it, "phys_state", jstr(after_number(v)));
	attr(c, dir, "rate", v, sizeof v);
	put(c, it, "rate", jstr(v));
	/* "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)". */
	errno = 0;
	rate = strtod(v, &end);
	if (errno != 0 || end == v || strncmp(end, " Gb/sec", 7) != 0 || !(rate >= 0 && rate < 1e6))
		put(c, it, "rate_gbps", json_null());
	else if (rate == (double)(long long)rate)
		put(c, it, "rate_gbps", json_integer((json_int_t)rate));
	else
		put(c, it, "rate_gbps", json_real(rate));
	put(c, it, "link_layer", attr_str(c, dir, "link_layer"));
	put(c, it, "fw_version", json_incref(d->fw));
	put(c, it, "board_id", json_incref(d->board_id));
	put(c, it, "node_guid", json_incref(d->node_guid));
	/* The port GUID is the interface half of GID 0 ("fe80:0000:0000:0000:" + GUID). */
	attr(c, dir, "gids/0", v, sizeof v);
	if (strlen(v) == 39 && strncmp(v, "fe80:", 5) == 0 &&
	    strcmp(v + 20, "0000:0000:0000:0000") != 0)
		put(c, it, "port_guid", jstr(v + 20));
	else
		put(c, it, "port_guid", json_null());
	put(c, it, "lid", attr_int(c, dir, "lid", 16, 0, 0xffff, 1));
	put(c, it, "pci", jstr(d->pci));
	return it;
}

static json_t *
ib_section(struct ctx *c)
{
	const char *src = "/sys/class/infiniband";
	char dir[PATH_MAX], p[PATH_MAX], pdir[PATH_MAX], canon[PATH_MAX];
	struct names nm, ports;
	struct ib_dev d;
	json_t *o = NULL, *items, *it;
	long long num;
	size_t i, j, n = 0;
	int rc;

	ports.v = NULL;
	ports.n = 0;
	if ((rc = list_dir(c, src, &nm)) != 0) {
		o = skipped(c, src, reason(-rc, 1));
		goto out;
	}
	o = section(c, src);
	items = arr(c);
	for (i = 0; i < nm.n && n < MAX_ITEMS; i++) {
		if (join(dir, src, nm.v[i]) != 0)
			continue;
		d.name = nm.v[i];
		d.pci[0] = '\0';
		if (join(p, dir, "device") == 0 && resolve(c, p, canon) == 0)
			pci_of(canon, d.pci);
		d.fw = attr_str(c, dir, "fw_ver");
		d.node_guid = attr_str(c, dir, "node_guid");
		d.board_id = attr_str(c, dir, "board_id");
		if (join(p, dir, "ports") == 0)
			list_dir(c, p, &ports);
		for (j = 0; j < ports.n && j < MAX_PORTS && n < MAX_ITEMS; j++) {
			if (parse_ll(ports.v[j], 10, &num) != 0 || num < 0 ||
			    join(pdir, p, ports.v[j]) != 0)
				continue;
			it = ib_port(c, &d, pdir, num);
			push(c, items, it);
			n++;
		}
		names_free(&ports);
		json_decref(d.fw);
		json_decref(d.node_guid);
		json_decref(d.board_id);
	}
	put(c, o, "items", items);
out:
	names_free(&nm);
	return o;
}

/* The text of an lldpd value in either of its JSON shapes: "x", {"value": "x"}, [...]. */
static const char *
lldp_text(json_t *v)
{
	int depth;

	for (depth = 0; depth < 8 && v != NULL; depth++) {
		if (json_is_string(v))
			return json_string_value(v);
		if (json_is_array(v))
			v = json_array_get(v, 0);
		else if (json_is_object(v))
			v = json_object_get(v, "value");
		else
			return NULL;
	}
	return NULL;
}

static json_t *
first(json_t *v)
{
	return json_is_array(v) ? json_array_get(v, 0) : v;
}

/* One neighbour seen on ifname. lldpd's "-f json" keys the chassis by its name
 * ({"leaf-r01-a": {"id": ...}}) when it has one; "-f json0" and nameless chassis do not. */
static void
lldp_neighbor(struct ctx *c, json_t *list, const char *ifname, json_t *e)
{
	json_t *ch = first(json_object_get(e, "chassis")), *inner = ch,
	       *port = first(json_object_get(e, "port")), *it;
	const char *name = NULL, *id;

	if (!json_is_object(e) || json_array_size(list) >= MAX_NEIGHBORS)
		return;
	if (json_is_object(ch) && json_object_size(ch) == 1 && json_object_get(ch, "id") == NULL &&
	    json_object_get(ch, "name") == NULL) {
		void *iter = json_object_iter(ch);

		name = json_object_iter_key(iter);
		inner = first(json_object_iter_value(iter));
	} else {
		name = lldp_text(json_object_get(ch, "name"));
	}
	id = lldp_text(json_object_get(inner, "id"));
	it = obj(c);
	put(c, it, "interface", jstr(ifname));
	put(c, it, "chassis", jstr(name != NULL ? name : id));
	put(c, it, "chassis_id", jstr(id));
	put(c, it, "port", jstr(lldp_text(json_object_get(port, "id"))));
	put(c, it, "port_description", jstr(lldp_text(json_object_get(port, "descr"))));
	put(c, it, "mgmt_ip", jstr(lldp_text(json_object_get(inner, "mgmt-ip"))));
	push(c, list, it);
}

/* An "interface" value: {"eno1": entry}, [{"eno1": entry}, ...] or json0's
 * [{"name": "eno1", ...}]. */
static void
lldp_interfaces(struct ctx *c, json_t *list, json_t *ifs)
{
	const char *key;
	json_t *v, *e;
	size_t i, j;

	if (json_is_array(ifs)) {
		json_array_foreach(ifs, i, v)
		{
			if (json_object_get(v, "name") != NULL &&
			    json_object_get(v, "chassis") != NULL)
				lldp_neighbor(c, list, lldp_text(json_object_get(v, "name")), v);
			else if (json_is_object(v))
				lldp_interfaces(c, list, v);
		}
		return;
	}
	json_object_foreach(ifs, key, v)
	{
		if (json_is_array(v)) {
			json_array_foreach(v, j, e) lldp_neighbor(c, list, key, e);
		} else {
			lldp_neighbor(c, list, key, v);
		}
	}
}

static json_t *
lldp_section(struct ctx *c)
{
	static const char *const args[] = {"-f", "json", NULL};
	const char *src = "lldpctl -f json";
	char why[160], *out = NULL;
	json_t *doc, *root, *list, *o, *v;
	json_error_t err;
	size_t len, i;

	if (tool(c, "lldpctl", args, 10000, &out, &len, why, sizeof why) != 0)
		return skipped(c, src, why);
	doc = json_loadb(out, len, 0, &err);
	free(out);
	root = json_object_get(doc, "lldp");
	if (root == NULL) {
		json_decref(doc);
		return skipped(c, src, "unparseable output");
	}
	list = arr(c);
	if (json_is_array(root)) {
		json_array_foreach(root, i, v)
		        lldp_interfaces(c, list, json_object_get(v, "interface"));
	} else {
		lldp_interfaces(c, list, json_object_get(root, "interface"));
	}
	json_decref(doc);
	o = section(c, src);
	put(c, o, "neighbors", list);
	return o;
}

static json_t *
collected_at(void)
{
	struct timespec ts;
	struct tm tm;
	char buf[64], date[48];

	clock_gettime(CLOCK_REALTIME, &ts);
	if (gmtime_r(&ts.tv_sec, &tm) == NULL)
		return json_null();
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, sizeof buf, "%s.%03ldZ", date, ts.tv_nsec / 1000000);
	return json_string(buf);
}

json_t *
rp_agent_inventory(const char *root)
{
	struct ifaddrs *ifa = NULL;
	size_t n = root != NULL ? strlen(root) : 0;
	json_t *inv;

	/* Only the live system's ("", "/", "//"...): a captured tree's NICs are not this host's. */
	while (n > 0 && root[n - 1] == '/')
		n--;
	if (n == 0 && getifaddrs(&ifa) != 0)
		ifa = NULL;
	inv = rp_agent_inventory_from(root, ifa);
	if (ifa != NULL)
		freeifaddrs(ifa);
	return inv;
}

json_t *
rp_agent_inventory_from(const char *root, const struct ifaddrs *ifa)
{
	struct pci_info *pi = NULL;
	struct ctx *c = NULL;
	json_t *inv = NULL;
	char v[FIELD];
	size_t n;

	if ((c = calloc(1, sizeof *c)) == NULL || (pi = calloc(1, sizeof *pi)) == NULL)
		goto out;
	c->ifa = ifa;
	if (root != NULL && strcmp(root, "/") != 0) {
		n = strlen(root);
		while (n > 1 && root[n - 1] == '/')
			n--;
		if (n >= sizeof c->root)
			c->bad_root = 1;
		else
			memcpy(c->root, root, n);
	}
	if ((inv = obj(c)) == NULL)
		goto out;
	put(c, inv, "format", json_integer(INVENTORY_FORMAT));
	put(c, inv, "agent_version", json_string(RP_VERSION));
	put(c, inv, "collected_at", collected_at());
	/* read_attr() leaves "" on failure, and jstr("") is null. */
	read_attr(c, "/proc/sys/kernel/hostname", v, sizeof v);
	put(c, inv, "hostname", jstr(v));
	read_attr(c, "/proc/sys/kernel/random/boot_id", v, sizeof v);
	put(c, inv, "boot_id", jstr(v));
	put(c, inv, "system", system_section(c));
	put(c, inv, "cpu", cpu_section(c));
	put(c, inv, "memory", memory_section(c));
	put(c, inv, "disks", disks_section(c));
	put(c, inv, "nics", nics_section(c));
	put(c, inv, "pci", pci_section(c, pi));
	put(c, inv, "gpus", gpus_section(c, pi));
	put(c, inv, "infiniband", ib_section(c));
	put(c, inv, "lldp", lldp_section(c));
	if (c->oom) {
		json_decref(inv);
		inv = NULL;
	}
out:
	free(pi);
	free(c);
	return inv;
}
