/*
 * Running one step: its output (echo and tail), the shell (through the process runner,
 * run.c), files, images, firmware and BIOS tools, the inventory. Nothing here talks to the
 * server about the job: lock, watch, reports and the run-steps loop are runsteps.c's, so that
 * steps run in tests without a server.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#include "agent.h"

extern char **environ;

#define ECHO_STALL_MS 5000 /* longest a stuck stdout may hold up a step, once */
#define KILL_GRACE_S  5    /* SIGTERM to SIGKILL */

/* ---- Output -------------------------------------------------------------------------- */

static int echo_stalled;

/* Write to the job log. stdout is the SSH channel: when the session is gone writes fail
 * (SIGPIPE is ignored) and are dropped; when it is stuck, run-steps makes the fd
 * non-blocking and a step waits at most ECHO_STALL_MS, then output goes only to the tail
 * until the channel drains again. */
void
rp_agent_echo(int fd, const void *data, size_t n)
{
	const char *p = data;
	int64_t deadline = 0;

	if (fd < 0)
		return;
	if (echo_stalled) {
		ssize_t w = write(fd, p, n);

		if (w == (ssize_t)n)
			echo_stalled = 0;
		return;
	}
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int64_t now;

		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0 || errno != EAGAIN)
			return;
		now = rp_time_mono_ns();
		if (deadline == 0)
			deadline = now + ECHO_STALL_MS * 1000000LL;
		if (now >= deadline) {
			echo_stalled = 1;
			return;
		}
		poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1);
	}
}

struct rp_agent_outcome *
rp_agent_outcome_new(int echo_fd)
{
	struct rp_agent_outcome *o = calloc(1, sizeof *o);

	if (o == NULL)
		return NULL;
	o->exit_code = -1;
	o->echo_fd = echo_fd;
	o->at_line_start = 1;
	return o;
}

void
rp_agent_outcome_free(struct rp_agent_outcome *o)
{
	if (o == NULL)
		return;
	json_decref(o->result);
	free(o);
}

void
rp_agent_output(struct rp_agent_outcome *o, const void *p, size_t n)
{
	if (n == 0)
		return;
	rp_agent_echo(o->echo_fd, p, n);
	rp_agent_tail_add(&o->tail, p, n);
	o->at_line_start = ((const char *)p)[n - 1] == '\n';
}

/* A line of the agent's own into the step output (it belongs to the step's story). */
static void note(struct rp_agent_outcome *o, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void
note(struct rp_agent_outcome *o, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = rp_vline(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n == 0)
		return;
	if (!o->at_line_start)
		rp_agent_output(o, "\n", 1);
	rp_agent_output(o, line, n);
}

void
rp_agent_failed(struct rp_agent_outcome *o, const char *fmt, ...)
{
	va_list ap;

	o->succeeded = 0;
	va_start(ap, fmt);
	vsnprintf(o->error, sizeof o->error, fmt, ap);
	va_end(ap);
}
/* ---- shell --------------------------------------------------------------------------- */

/* environ with env's members put over it. The "NAME=value" strings of env come first in the
 * array and are owned by it (*owned of them); the rest point into environ. */
static char **
make_env(json_t *env, size_t *owned)
{
	size_t n = 0, m = 0, i;
	const char *key;
	json_t *v;
	char **e;

	while (environ && environ[n])
		n++;
	e = calloc(n + json_object_size(env) + 1, sizeof *e);
	if (e == NULL)
		return NULL;
	json_object_foreach(env, key, v)
	{
		if (asprintf(&e[m], "%s=%s", key, json_string_value(v)) < 0) {
			e[m] = NULL;
			goto fail;
		}
		m++;
	}
	*owned = m;
	for (i = 0; i < n; i++) {
		size_t kl = strcspn(environ[i], "=");
		char name[256];

		if (kl < sizeof name) {
			memcpy(name, environ[i], kl);
			name[kl] = '\0';
			if (json_object_get(env, name))
				continue;
		}
		e[m++] = environ[i];
	}
	return e;
fail:
	for (i = 0; i < m; i++)
		free(e[i]);
	free(e);
	return NULL;
}

static void
free_env(char **e, size_t owned)
{
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < owned; i++)
		free(e[i]);
	free(e);
}

/* A row of /proc/net/tcp{,6} from p to end (no newline): "sl: local remote st ...", the
 * local address "0100007F:1F90" or 32 hex digits, a colon and the port, all hex. */
static int
tcp_row_listening(const char *p, const char *end, unsigned port)
{
	const char *tok[4], *c;
	size_t len[4], k;
	unsigned long v = 0;

	for (k = 0; k < 4; k++) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		tok[k] = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		len[k] = (size_t)(p - tok[k]);
		if (len[k] == 0)
			return 0;
	}
	/* The header's first word is "sl", a row's "0:". */
	if (tok[0][len[0] - 1] != ':' || len[3] != 2 || strncasecmp(tok[3], "0A", 2) != 0)
		return 0;
	for (c = tok[1] + len[1]; c > tok[1] && c[-1] != ':'; c--)
		;
	if (c == tok[1] || c == tok[1] + len[1] || tok[1] + len[1] - c > 4)
		return 0;
	for (; c < tok[1] + len[1]; c++) {
		if (!isxdigit((unsigned char)*c))
			return 0;
		v = v * 16 + (unsigned long)(isdigit((unsigned char)*c)
		                                     ? *c - '0'
		                                     : tolower((unsigned char)*c) - 'a' + 10);
	}
	return v == port;
}

int
rp_agent_tcp_listening(const char *text, size_t len, unsigned port)
{
	const char *p = text, *end = text + len, *nl;

	while (p < end) {
		for (nl = p; nl < end && *nl != '\n'; nl++)
			;
		if (tcp_row_listening(p, nl, port))
			return 1;
		p = nl + 1;
	}
	return 0;
}

/* What a shell command's output and ticks go to: the outcome, and for a step with ready_port
 * the watch on that port. */
struct shell_run {
	struct rp_agent_outcome *o;
	const struct rp_agent_runner *r; /* NULL: no ready_port */
	unsigned port;
	int ready; /* said once: the first time it listens */
	char *buf; /* RP_AGENT_READY_READ_MAX bytes */
};

/* Shell output goes to the outcome (echo and tail), all of it. */
static int
shell_output(void *arg, const void *p, size_t n)
{
	struct shell_run *sr = arg;

	rp_agent_output(sr->o, p, n);
	return 0;
}

/* 1 when ROOT/rel (a /proc/net/tcp file) shows sr->port listening. A file that is missing or
 * unreadable shows nothing: a kernel without IPv6 has no tcp6. */
static int
proc_listening(struct shell_run *sr, const char *rel)
{
	char path[RP_AGENT_PATH_MAX];
	size_t len = 0;
	ssize_t n;
	int fd;

	if (rp_agent_path(sr->r->cfg->root, rel, path, sizeof path) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	while (len < RP_AGENT_READY_READ_MAX &&
	       ((n = read(fd, sr->buf + len, RP_AGENT_READY_READ_MAX - len)) > 0 ||
	        (n < 0 && errno == EINTR)))
		if (n > 0)
			len += (size_t)n;
	close(fd);
	/* Cut at the cap: the last row may be half there. */
	if (len == RP_AGENT_READY_READ_MAX)
		while (len > 0 && sr->buf[len - 1] != '\n')
			len--;
	return rp_agent_tcp_listening(sr->buf, len, sr->port);
}

/* Every RP_AGENT_READY_POLL_MS while the command runs: has the port started listening? */
static void
shell_tick(void *arg)
{
	struct shell_run *sr = arg;
	struct rp_agent_progress p = {.kind = RP_PROGRESS_READY};

	if (sr->ready ||
	    (!proc_listening(sr, "/proc/net/tcp") && !proc_listening(sr, "/proc/net/tcp6")))
		return;
	sr->ready = 1;
	note(sr->o, "port %u is listening: ready", sr->port);
	if (sr->r->progress)
		sr->r->progress(sr->r->progress_arg, &p);
}

/* rp_agent_shell(), and with r and port (1-65535) the ready watch of a shell step. */
static int
shell(const char *command, json_t *env, const char *cwd, unsigned timeout_s,
      const struct rp_agent_runner *r, unsigned port, struct rp_agent_outcome *o)
{
	char *argv[] = {"sh", "-c", (char *)command, NULL};
	struct shell_run sr = {.o = o};
	struct rp_agent_proc p = {
	        .path = "/bin/sh",
	        .argv = argv,
	        .cwd = cwd,
	        .stderr_output = 1,
	        .timeout_ms = (int64_t)timeout_s * 1000,
	        .grace_ms = KILL_GRACE_S * 1000,
	        .cancel = &rp_agent_cancelled,
	        .output = shell_output,
	        .arg = &sr,
	};
	struct rp_agent_proc_end end;
	size_t owned = 0;
	char **envp = NULL;
	struct stat st;
	int rc = -1;

	o->succeeded = 0;
	o->exit_code = -1;
	if (cwd && (stat(cwd, &st) < 0 || !S_ISDIR(st.st_mode))) {
		rp_agent_failed(o, "cwd %s: %s", cwd, errno ? strerror(errno) : "not a directory");
		return -1;
	}
	if ((envp = make_env(env, &owned)) == NULL) {
		rp_agent_failed(o, "cannot start the command: %s", strerror(errno));
		goto out;
	}
	if (r && port) {
		if ((sr.buf = malloc(RP_AGENT_READY_READ_MAX)) == NULL) {
			rp_agent_failed(o, "out of memory");
			goto out;
		}
		sr.r = r;
		sr.port = port;
		p.tick = shell_tick;
		p.tick_ms = RP_AGENT_READY_POLL_MS;
	}
	p.envp = envp;
	if (rp_agent_proc_run(&p, &end) < 0) {
		rp_agent_failed(o, "cannot start the command: %s", strerror(errno));
		goto out;
	}
	/* The flag, not how the runner stopped it: a cancel during the grace period wins. */
	if ((end.timed_out || end.cancelled) && rp_agent_cancelled) {
		rp_agent_failed(o, "cancelled");
	} else if (end.timed_out || end.cancelled) {
		rp_agent_failed(o, "timed out after %u s", timeout_s);
	} else if (WIFEXITED(end.status)) {
		o->exit_code = WEXITSTATUS(end.status);
		o->succeeded = o->exit_code == 0;
		if (!o->succeeded)
			rp_agent_failed(o, "exit status %d", o->exit_code);
	} else if (WIFSIGNALED(end.status)) {
		rp_agent_failed(o, "killed by signal %d", WTERMSIG(end.status));
	}
	rc = 0;
out:
	free(sr.buf);
	free_env(envp, owned);
	return rc;
}

int
rp_agent_shell(const char *command, json_t *env, const char *cwd, unsigned timeout_s,
               struct rp_agent_outcome *o)
{
	return shell(command, env, cwd, timeout_s, NULL, 0, o);
}

/* ---- Files --------------------------------------------------------------------------- */

static int
fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* "user" or "user:group" (names or numbers) to ids; a lone user brings its primary group. */
static int
resolve_owner(const char *owner, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
	char user[257], *group, *end;
	struct passwd *pw;
	struct group *gr;
	uid_t u;
	gid_t g = (gid_t)-1;

	snprintf(user, sizeof user, "%s", owner);
	group = strchr(user, ':');
	if (group)
		*group++ = '\0';
	pw = getpwnam(user);
	if (pw) {
		u = pw->pw_uid;
		g = pw->pw_gid;
	} else {
		errno = 0;
		u = (uid_t)strtoul(user, &end, 10);
		if (!isdigit((unsigned char)user[0]) || *end || errno) {
			snprintf(err, errlen, "no such user '%s'", user);
			return -1;
		}
	}
	if (group) {
		gr = getgrnam(group);
		if (gr) {
			g = gr->gr_gid;
		} else {
			errno = 0;
			g = (gid_t)strtoul(group, &end, 10);
			if (!isdigit((unsigned char)group[0]) || *end || errno) {
				snprintf(err, errlen, "no such group '%s'", group);
				return -1;
			}
		}
	}
	*uid = u;
	*gid = g;
	return 0;
}

static void
step_file(const struct rp_agent_runner *r, const struct rp_agent_step *s,
          struct rp_agent_outcome *o)
{
	const char *path = json_string_value(json_object_get(s->obj, "path"));
	const char *owner = json_string_value(json_object_get(s->obj, "owner"));
	const char *mode_s = json_string_value(json_object_get(s->obj, "mode"));
	const char *url = json_string_value(json_object_get(s->obj, "url"));
	json_t *content = json_object_get(s->obj, "content");
	char dir[RP_AGENT_PATH_MAX], tmp[RP_AGENT_PATH_MAX], why[1024], hex[RP_SHA256_HEX];
	const char *base;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	mode_t mode = (mode_t)strtoul(mode_s ? mode_s : "0644", NULL, 8);
	uint64_t bytes = 0;
	struct stat st;
	int fd = -1;

	tmp[0] = '\0';
	base = strrchr(path, '/') + 1;
	if (snprintf(dir, sizeof dir, "%.*s", (int)(base - path - 1), path) >= (int)sizeof dir ||
	    snprintf(tmp, sizeof tmp, "%s/.%s.rackpilot-XXXXXX", dir, base) >= (int)sizeof tmp) {
		tmp[0] = '\0';
		rp_agent_failed(o, "path too long");
		goto out;
	}
	if (dir[0] == '\0')
		snprintf(dir, sizeof dir, "/");
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		tmp[0] = '\0';
		rp_agent_failed(o, "parent directory %s %s", dir,
		                errno == ENOENT ? "does not exist" : "is not a directory");
		goto out;
	}
	if (owner && resolve_owner(owner, &uid, &gid, why, sizeof why) < 0) {
		tmp[0] = '\0';
		rp_agent_failed(o, "owner %s: %s", owner, why);
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rp_agent_failed(o, "cannot create a file in %s: %s", dir, strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	if (content) {
		if (rp_write_all(fd, json_string_value(content), json_string_length(content)) < 0) {
			rp_agent_failed(o, "writing %s: %s", tmp, strerror(errno));
			goto out;
		}
		bytes = json_string_length(content);
	} else {
		const char *want = json_string_value(json_object_get(s->obj, "sha256"));

		note(o, "downloading %s", url);
		if (rp_agent_download(r->cfg, url, fd, s->timeout_s, hex, &bytes, why, sizeof why) <
		    0) {
			rp_agent_failed(o, "%s", why);
			goto out;
		}
		if (strcasecmp(hex, want) != 0) {
			rp_agent_failed(o, "sha256 mismatch for %s: expected %s, got %s", url, want,
			                hex);
			goto out;
		}
	}
	if (fsync(fd) < 0) {
		rp_agent_failed(o, "fsync %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* chown first: it may clear set-id bits that the mode asks for. */
	if (owner && fchown(fd, uid, gid) < 0) {
		rp_agent_failed(o, "chown %s %s: %s", owner, tmp, strerror(errno));
		goto out;
	}
	if (fchmod(fd, mode) < 0) {
		rp_agent_failed(o, "chmod %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, path) < 0) {
		rp_agent_failed(o, "rename to %s: %s", path, strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	if (fsync_dir(dir) < 0) {
		rp_agent_failed(o, "fsync %s: %s", dir, strerror(errno));
		goto out;
	}
	note(o, "wrote %llu bytes to %s (mode %04o)", (unsigned long long)bytes, path,
	     (unsigned)mode);
	o->succeeded = 1;
out:
	if (fd >= 0)
		close(fd);
	if (tmp[0])
		unlink(tmp);
}

/* ---- Images -------------------------------------------------------------------------- */

/* The verified image for sha256 under state_dir/images, downloaded unless a verified copy is
 * there already. 0 with path set, or -1 with o failed. */
static int
fetch_image(const struct rp_agent_runner *r, const char *url, const char *sha256,
            unsigned timeout_s, char *path, size_t pathlen, struct rp_agent_outcome *o)
{
	char dir[RP_AGENT_PATH_MAX], part[RP_AGENT_PATH_MAX], final[RP_AGENT_PATH_MAX];
	char want[RP_SHA256_HEX], hex[RP_SHA256_HEX], why[1024];
	uint64_t bytes = 0;
	int fd = -1, rc = -1, i;

	for (i = 0; i < 64; i++)
		want[i] = (char)tolower((unsigned char)sha256[i]);
	want[64] = '\0';
	if (snprintf(dir, sizeof dir, "%s/images", r->cfg->state_dir) >= (int)sizeof dir ||
	    snprintf(final, sizeof final, "%s/%s", dir, want) >= (int)sizeof final ||
	    snprintf(part, sizeof part, "%s.part", final) >= (int)sizeof part) {
		rp_agent_failed(o, "state_dir too long");
		return -1;
	}
	if (rp_agent_mkdir(r->cfg->state_dir) < 0 || rp_agent_mkdir(dir) < 0) {
		rp_agent_failed(o, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	/* Verified when stored, but a disk can rot; hashing is cheap next to flashing. */
	fd = open(final, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		int ok = rp_fd_sha256(fd, hex, NULL) == 0 && strcmp(hex, want) == 0;

		close(fd);
		fd = -1;
		if (ok) {
			note(o, "using verified image %s", final);
			goto done;
		}
		note(o, "cached image %s does not match its sha256; downloading again", final);
		unlink(final);
	}
	fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rp_agent_failed(o, "cannot create %s: %s", part, strerror(errno));
		goto out;
	}
	note(o, "downloading %s", url);
	if (rp_agent_download(r->cfg, url, fd, timeout_s, hex, &bytes, why, sizeof why) < 0) {
		rp_agent_failed(o, "%s", why);
		goto out;
	}
	if (strcmp(hex, want) != 0) {
		rp_agent_failed(o, "sha256 mismatch for %s: expected %s, got %s", url, want, hex);
		goto out;
	}
	if (fsync(fd) < 0 || rename(part, final) < 0) {
		rp_agent_failed(o, "storing %s: %s", final, strerror(errno));
		goto out;
	}
	fsync_dir(dir);
	note(o, "downloaded %llu bytes, sha256 verified", (unsigned long long)bytes);
done:
	if (snprintf(path, pathlen, "%s", final) >= (int)pathlen) {
		rp_agent_failed(o, "path too long");
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		unlink(part);
	return rc;
}

char *
rp_agent_shell_quote(const char *s)
{
	struct rp_buf b = {0};

	rp_buf_append(&b, "'", 1);
	for (; *s; s++) {
		if (*s == '\'')
			rp_buf_append(&b, "'\\''", 4);
		else
			rp_buf_append(&b, s, 1);
	}
	rp_buf_append(&b, "'", 1);
	if (b.oom) {
		rp_buf_free(&b);
		return NULL;
	}
	return b.data;
}

char *
rp_agent_subst_image(const char *tmpl, const char *path)
{
	struct rp_buf b = {0};
	char *q = rp_agent_shell_quote(path);
	const char *p = tmpl, *hit;

	if (q == NULL)
		return NULL;
	while ((hit = strstr(p, "${image}")) != NULL) {
		rp_buf_append(&b, p, (size_t)(hit - p));
		rp_buf_append(&b, q, strlen(q));
		p = hit + 8;
	}
	rp_buf_append(&b, p, strlen(p) + 1);
	free(q);
	if (b.oom) {
		rp_buf_free(&b);
		return NULL;
	}
	return b.data;
}

#define BIOS_REPORT_MAX (1024 * 1024)

/* A BIOS tool's dump: a JSON object of scalars, or Name=Value lines (blank lines and # comments
 * skipped; a value of digits only is a number). New object, or NULL with why. */
static json_t *
bios_parse(const char *text, size_t len, char *why, size_t whylen)
{
	json_t *a = json_loadb(text, len, 0, NULL), *v;
	const char *k, *p = text, *end = text + len;

	if (a) {
		if (!json_is_object(a)) {
			snprintf(why, whylen, "the BIOS dump is JSON but not an object");
			goto bad;
		}
		json_object_foreach(a, k, v)
		{
			if (json_is_object(v) || json_is_array(v) || json_is_null(v)) {
				snprintf(why, whylen, "BIOS attribute %.100s is not a scalar", k);
				goto bad;
			}
		}
		return a;
	}
	a = json_object();
	while (a && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eq;
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p), i;
		char name[256], val[1024];
		int digits;

		while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		while (n > 0 && (*p == ' ' || *p == '\t'))
			p++, n--;
		if (n == 0 || *p == '#')
			goto next;
		eq = memchr(p, '=', n);
		if (eq == NULL || eq == p || (size_t)(eq - p) >= sizeof name ||
		    n - (size_t)(eq - p) - 1 >= sizeof val) {
			snprintf(why, whylen, "BIOS dump line is not Name=Value: %.80s", p);
			goto bad;
		}
		snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
		for (i = strlen(name); i > 0 && (name[i - 1] == ' ' || name[i - 1] == '\t'); i--)
			name[i - 1] = '\0';
		snprintf(val, sizeof val, "%.*s", (int)(n - (size_t)(eq - p) - 1), eq + 1);
		k = val + strspn(val, " \t");
		digits = k[0] != '\0' && strlen(k) < 16;
		for (i = k[0] == '-'; digits && k[i]; i++)
			digits = k[i] >= '0' && k[i] <= '9';
		json_object_set_new(a, name,
		                    digits && k[k[0] == '-'] ? json_integer(strtoll(k, NULL, 10))
		                                             : json_string(k));
	next:
		p += (nl ? (size_t)(nl - p) + 1 : (size_t)(end - p));
	}
	if (a == NULL)
		snprintf(why, whylen, "out of memory");
	return a;
bad:
	json_decref(a);
	return NULL;
}

/* After a bios step with report: its stdout (in path) is the node's current BIOS values;
 * post them to the server. */
static void
bios_report(const struct rp_agent_runner *r, const char *path, struct rp_agent_outcome *o)
{
	char *text = NULL, why[1024] = "", err[1024];
	json_t *attrs = NULL, *body = NULL, *ans = NULL;
	ssize_t got = 0, k;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long st;

	o->succeeded = 0;
	if (fd < 0 || (text = malloc(BIOS_REPORT_MAX + 1)) == NULL) {
		rp_agent_failed(o, "reading the BIOS dump: %s", strerror(errno));
		goto out;
	}
	while (got < BIOS_REPORT_MAX &&
	       (k = read(fd, text + got, (size_t)(BIOS_REPORT_MAX - got))) > 0)
		got += k;
	if (got == BIOS_REPORT_MAX) {
		rp_agent_failed(o, "the BIOS dump is larger than %d bytes", BIOS_REPORT_MAX);
		goto out;
	}
	if ((attrs = bios_parse(text, (size_t)got, why, sizeof why)) == NULL) {
		rp_agent_failed(o, "%s", why);
		goto out;
	}
	if (json_object_size(attrs) == 0) {
		rp_agent_failed(o, "the BIOS tool printed no attributes");
		goto out;
	}
	if (r->client == NULL) {
		rp_agent_failed(o, "no server to post the BIOS values to");
		goto out;
	}
	body = json_pack("{s:O}", "attributes", attrs);
	st = rp_agent_call_retry(r->client, "POST", "/v1/agent/bios", r->token, body, &ans, err,
	                         sizeof err);
	if (st < 200 || st > 299) {
		rp_agent_failed(o, "posting the BIOS values: %s", err);
		goto out;
	}
	json_decref(o->result);
	o->result = json_pack("{s:I}", "attributes", (json_int_t)json_object_size(attrs));
	note(o, "%zu BIOS attributes posted", json_object_size(attrs));
	o->succeeded = 1;
out:
	if (fd >= 0)
		close(fd);
	free(text);
	json_decref(attrs);
	json_decref(body);
	json_decref(ans);
}

static void
step_firmware(const struct rp_agent_runner *r, const struct rp_agent_step *s,
              struct rp_agent_outcome *o)
{
	const char *tmpl = json_string_value(json_object_get(s->obj, "command"));
	const char *url = json_string_value(json_object_get(s->obj, "image_url"));
	const char *sha256 = json_string_value(json_object_get(s->obj, "sha256"));
	char path[RP_AGENT_PATH_MAX], *cmd = NULL;
	int64_t t0 = rp_time_mono_ns(), left;

	if (url) {
		if (fetch_image(r, url, sha256, s->timeout_s, path, sizeof path, o) < 0)
			goto out;
		cmd = rp_agent_subst_image(tmpl, path);
	} else {
		cmd = strdup(tmpl);
	}
	if (cmd == NULL) {
		rp_agent_failed(o, "out of memory");
		goto out;
	}
	/* timeout_s covers the whole step, download included. */
	left = (int64_t)s->timeout_s - (rp_time_mono_ns() - t0) / 1000000000LL;
	if (left < 1) {
		rp_agent_failed(o, "timed out after %u s", s->timeout_s);
		goto out;
	}
	if (json_is_true(json_object_get(s->obj, "report"))) {
		/* Only stdout is the dump; stderr still goes to the step's output. */
		char tmp[] = "/tmp/rackpilot-bios-XXXXXX", *q = NULL, *wrapped = NULL;
		int fd = mkstemp(tmp);

		if (fd < 0) {
			rp_agent_failed(o, "temporary file: %s", strerror(errno));
			goto out;
		}
		close(fd);
		if ((q = rp_agent_shell_quote(tmp)) == NULL ||
		    asprintf(&wrapped, "( %s ) > %s", cmd, q) < 0)
			wrapped = NULL;
		free(q);
		if (wrapped == NULL)
			rp_agent_failed(o, "out of memory");
		else if (rp_agent_shell(wrapped, NULL, NULL, (unsigned)left, o) == 0 &&
		         o->succeeded)
			bios_report(r, tmp, o);
		free(wrapped);
		unlink(tmp);
		goto out;
	}
	rp_agent_shell(cmd, NULL, NULL, (unsigned)left, o);
out:
	free(cmd);
}

/* An image step's download: each piece decoded and written as it comes, progress now and
 * then. */
struct image_sink {
	struct rp_agent_sink s; /* first: the download sees only this */
	const struct rp_agent_runner *r;
	struct rp_agent_image *im;
	enum rp_agent_image_format fmt;
	uint64_t limit;
	int64_t t0, last_ns;
	uint64_t last_written;
	char why[256]; /* a refusal of the sink's own (the writer keeps its own) */
};

static void
image_progress(struct image_sink *is, int64_t now)
{
	struct rp_agent_image_stats st;
	struct rp_agent_progress p;
	int64_t dt = now - is->last_ns;
	uint64_t done;

	rp_agent_image_stats(is->im, &st);
	done = st.bytes_written - is->last_written;
	/* The last report may come right after the one before: a rate over a blink is noise. */
	if (dt < 1000000000LL) {
		dt = now - is->t0;
		done = st.bytes_written;
	}
	p.bytes_read = is->s.bytes;
	p.bytes_written = st.bytes_written;
	p.total = is->s.total;
	p.rate_bps = dt > 0 ? (uint64_t)((double)done * 1e9 / (double)dt) : 0;
	is->last_ns = now;
	is->last_written = st.bytes_written;
	if (is->r->progress)
		is->r->progress(is->r->progress_arg, &p);
}

static int
image_write(struct rp_agent_sink *s, const void *p, size_t n)
{
	struct image_sink *is = (struct image_sink *)s;
	int64_t now;

	/* A raw image says its size up front: no need to fill the device before refusing. */
	if (s->bytes == n && is->fmt == RP_IMAGE_RAW && is->limit && s->total > 0 &&
	    (uint64_t)s->total > is->limit) {
		snprintf(is->why, sizeof is->why,
		         "the image is larger than the target: the target holds %llu bytes, the "
		         "image has %lld",
		         (unsigned long long)is->limit, (long long)s->total);
		return -1;
	}
	if (rp_agent_image_feed(is->im, p, n) < 0)
		return -1;
	if (is->r->progress &&
	    (now = rp_time_mono_ns()) - is->last_ns >= RP_AGENT_PROGRESS_S * 1000000000LL)
		image_progress(is, now);
	return 0;
}

/* The step's result: what was written, how fast. New reference; NULL on allocation failure. */
static json_t *
image_result(const struct image_sink *is, const char *hex, double seconds)
{
	struct rp_agent_image_stats st;
	json_t *res;

	rp_agent_image_stats(is->im, &st);
	res = json_pack("{s:s, s:I, s:I, s:s, s:f, s:I}", "format",
	                rp_agent_image_format_name(is->fmt), "bytes_read", (json_int_t)is->s.bytes,
	                "bytes_written", (json_int_t)st.bytes_written, "sha256", hex, "seconds",
	                seconds, "rate_bps",
	                (json_int_t)(seconds > 0 ? (double)st.bytes_written / seconds : 0));
	if (res && is->fmt == RP_IMAGE_QCOW2) {
		json_object_set_new(res, "virtual_size", json_integer((json_int_t)st.size));
		json_object_set_new(res, "bytes_zeroed", json_integer((json_int_t)st.bytes_zeroed));
	}
	return res;
}

static void
step_image(const struct rp_agent_runner *r, const struct rp_agent_step *s,
           struct rp_agent_outcome *o)
{
	const char *url = json_string_value(json_object_get(s->obj, "url"));
	const char *want = json_string_value(json_object_get(s->obj, "sha256"));
	const char *dev = json_string_value(json_object_get(s->obj, "device"));
	const char *format = json_string_value(json_object_get(s->obj, "format"));
	struct image_sink is = {.s = {.write = image_write}, .r = r, .fmt = RP_IMAGE_RAW};
	struct rp_agent_image_stats st;
	char hex[RP_SHA256_HEX], why[1024];
	int64_t t0 = rp_time_mono_ns();
	double seconds;
	struct stat sb;
	int fd = -1, flags = O_WRONLY | O_CLOEXEC | O_NOCTTY, blk, done;

	if (format && rp_agent_image_format_parse(format, &is.fmt) < 0) {
		rp_agent_failed(o, "unknown image format '%s'", format);
		goto out;
	}
	/* Never O_CREAT: a typo must not become a file in /dev. A block device is opened
	 * exclusively, which Linux refuses while it is mounted. */
	if (stat(dev, &sb) < 0) {
		rp_agent_failed(o, "device %s: %s", dev, strerror(errno));
		goto out;
	}
	if (!S_ISBLK(sb.st_mode) && !S_ISREG(sb.st_mode)) {
		rp_agent_failed(o, "device %s is neither a block device nor a file", dev);
		goto out;
	}
	blk = S_ISBLK(sb.st_mode);
	if (blk)
		flags |= O_EXCL;
	fd = open(dev, flags);
	if (fd < 0) {
		rp_agent_failed(o, "device %s: %s", dev,
		                errno == EBUSY ? "in use (mounted?)" : strerror(errno));
		goto out;
	}
	if (blk && ioctl(fd, BLKGETSIZE64, &is.limit) < 0) {
		rp_agent_failed(o, "device %s: cannot read its size: %s", dev, strerror(errno));
		goto out;
	}
	if ((is.im = rp_agent_image_new(fd, blk, is.fmt, is.limit)) == NULL) {
		rp_agent_failed(o, "out of memory");
		goto out;
	}
	is.t0 = is.last_ns = t0;
	note(o, "writing %s (%s) to %s", url, rp_agent_image_format_name(is.fmt), dev);
	if (rp_agent_download_to(r->cfg, url, s->timeout_s, &is.s, hex, why, sizeof why) < 0) {
		/* The writer's reason, or the sink's, is the one that matters. */
		const char *ierr = rp_agent_image_error(is.im);

		if (ierr[0] || is.why[0])
			snprintf(why, sizeof why, "image %s: %s", url, ierr[0] ? ierr : is.why);
		rp_agent_image_stats(is.im, &st);
		if (st.bytes_written > 0 || st.bytes_zeroed > 0)
			rp_agent_failed(
			        o, "%s; %s now holds a partial, corrupt image (%llu bytes written)",
			        why, dev, (unsigned long long)st.bytes_written);
		else
			rp_agent_failed(o, "%s", why);
		goto out;
	}
	done = rp_agent_image_finish(is.im) == 0;
	rp_agent_image_stats(is.im, &st);
	if (strcasecmp(hex, want) != 0) {
		why[0] = '\0';
		if (!done)
			snprintf(why, sizeof why, " (%s)", rp_agent_image_error(is.im));
		rp_agent_failed(o,
		                "sha256 mismatch for %s: expected %s, got %s; %s now holds a "
		                "corrupt image%s",
		                url, want, hex, dev, why);
		goto out;
	}
	if (!done) {
		rp_agent_failed(o, "image %s: %s; %s now holds a partial, corrupt image", url,
		                rp_agent_image_error(is.im), dev);
		goto out;
	}
	if (fsync(fd) < 0) {
		rp_agent_failed(o, "fsync %s: %s; the image may not be on disk", dev,
		                strerror(errno));
		goto out;
	}
	image_progress(&is, rp_time_mono_ns());
	seconds = (double)((rp_time_mono_ns() - t0) / 1000000) / 1e3;
	json_decref(o->result);
	if ((o->result = image_result(&is, hex, seconds)) == NULL) {
		rp_agent_failed(o, "out of memory");
		goto out;
	}
	note(o,
	     "wrote %llu bytes to %s (%s, %llu bytes downloaded, sha256 verified) in %.1f s, "
	     "%.0f MiB/s",
	     (unsigned long long)st.bytes_written, dev, rp_agent_image_format_name(is.fmt),
	     (unsigned long long)is.s.bytes, seconds,
	     seconds > 0 ? (double)st.bytes_written / seconds / 1048576 : 0.0);
	if (is.fmt == RP_IMAGE_QCOW2)
		note(o, "virtual size %llu bytes, %llu bytes zeroed", (unsigned long long)st.size,
		     (unsigned long long)st.bytes_zeroed);
	if (json_object_get(s->obj, "grow") || json_object_get(s->obj, "seed") ||
	    json_object_get(s->obj, "uefi")) {
		/* Closed first: the partition table is read again, and a block device opened
		 * exclusively would be in the way. Seed contents are secrets: never printed. */
		close(fd);
		fd = -1;
		note(o, "finishing %s:%s%s%s", dev, json_object_get(s->obj, "grow") ? " grow" : "",
		     json_object_get(s->obj, "seed") ? " seed" : "",
		     json_object_get(s->obj, "uefi") ? " uefi" : "");
		if (rp_agent_disk_finish(dev, s->obj, o->result, why, sizeof why) < 0) {
			rp_agent_failed(o, "%s", why);
			goto out;
		}
	}
	o->succeeded = 1;
out:
	if (fd >= 0)
		close(fd);
	rp_agent_image_free(is.im);
}

/* ---- inventory ----------------------------------------------------------------------- */

static json_t *
int_or_null(json_t *v)
{
	return json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null();
}

static void
step_inventory(const struct rp_agent_runner *r, struct rp_agent_outcome *o)
{
	json_t *inv = rp_agent_inventory(r->cfg->root), *ans = NULL, *pci, *gpus;
	json_int_t n = -1;
	char err[1024];
	long st;

	if (inv == NULL) {
		rp_agent_failed(o, "out of memory collecting the inventory");
		goto out;
	}
	if (r->client == NULL) {
		rp_agent_failed(o, "no server to post the inventory to");
		goto out;
	}
	st = rp_agent_call_retry(r->client, "POST", "/v1/agent/inventory", r->token, inv, &ans, err,
	                         sizeof err);
	if (st < 200 || st > 299) {
		rp_agent_failed(o, "posting the inventory: %s", err);
		goto out;
	}
	/* The same summary the server extracts: the larger of the two GPU counts. */
	pci = json_object_get(inv, "pci");
	gpus = json_object_get(inv, "gpus");
	if (json_is_integer(json_object_get(pci, "gpu_count")))
		n = json_integer_value(json_object_get(pci, "gpu_count"));
	if (json_is_integer(json_object_get(gpus, "count")) &&
	    json_integer_value(json_object_get(gpus, "count")) > n)
		n = json_integer_value(json_object_get(gpus, "count"));
	json_decref(o->result);
	o->result = json_pack(
	        "{s:o, s:o, s:o}", "gpu_count", n >= 0 ? json_integer(n) : json_null(), "hca_count",
	        int_or_null(json_object_get(pci, "hca_count")), "mem_bytes",
	        int_or_null(json_object_get(json_object_get(inv, "memory"), "total_bytes")));
	note(o, "inventory posted");
	o->succeeded = 1;
out:
	json_decref(ans);
	json_decref(inv);
}

/* ---- One step ------------------------------------------------------------------------ */

void
rp_agent_step_run(const struct rp_agent_runner *r, const struct rp_agent_step *s,
                  struct rp_agent_outcome *o)
{
	int64_t t0 = rp_time_mono_ns();

	o->succeeded = 0;
	o->error[0] = '\0';
	switch (s->type) {
	case RP_STEP_SHELL:
		/* The plan check made ready_port 1-65535 when it is there; 0: none. */
		shell(json_string_value(json_object_get(s->obj, "command")),
		      json_object_get(s->obj, "env"),
		      json_string_value(json_object_get(s->obj, "cwd")), s->timeout_s, r,
		      (unsigned)json_integer_value(json_object_get(s->obj, "ready_port")), o);
		break;
	case RP_STEP_FILE:
		step_file(r, s, o);
		break;
	case RP_STEP_FIRMWARE:
	case RP_STEP_BIOS:
		step_firmware(r, s, o);
		break;
	case RP_STEP_IMAGE:
		step_image(r, s, o);
		break;
	case RP_STEP_INVENTORY:
		step_inventory(r, o);
		break;
	case RP_STEP_REBOOT:
	case RP_STEP__COUNT:
		rp_agent_failed(o, "%s steps are not run here", rp_step_type_name(s->type));
		break;
	}
	if (o->succeeded)
		o->error[0] = '\0';
	else if (o->error[0] == '\0')
		rp_agent_failed(o, "failed");
	o->duration_ms = (rp_time_mono_ns() - t0) / 1000000;
}
