/*
 * Running a plan's steps. Running a step (rp_agent_step_run) and reporting it
 * (rp_agent_step_report) are apart so that the runner can be exercised without a server.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

extern char **environ;

#define ECHO_STALL_MS 5000 /* longest a stuck stdout may hold up a step, once */
#define KILL_GRACE_S  5    /* SIGTERM to SIGKILL */
#define READ_ROUND    (1024 * 1024)

/* ---- Output -------------------------------------------------------------------------- */

static int echo_stalled;

/* Write to the job log. stdout is the SSH channel: when the session is gone writes fail
 * (SIGPIPE is ignored) and are dropped; when it is stuck, run-steps makes the fd
 * non-blocking and a step waits at most ECHO_STALL_MS, then output goes only to the tail
 * until the channel drains again. */
static void
echo(int fd, const void *data, size_t n)
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

static void frame(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
frame(int fd, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	echo(fd, line, (size_t)n);
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
	echo(o->echo_fd, p, n);
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
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	if (!o->at_line_start)
		rp_agent_output(o, "\n", 1);
	rp_agent_output(o, line, (size_t)n);
}

static void failed(struct rp_agent_outcome *o, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void
failed(struct rp_agent_outcome *o, const char *fmt, ...)
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

static void __attribute__((noreturn))
child(const char *command, char **envp, const char *cwd, int in, int out)
{
	char *argv[] = {"sh", "-c", (char *)command, NULL};
	sigset_t none;
	int s;

	setpgid(0, 0);
	/* Ignored signals (SIGPIPE, SIGHUP) stay ignored across exec; the step gets defaults. */
	for (s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(127);
	if (cwd && chdir(cwd) < 0) {
		dprintf(2, "rackpilot-agent: cannot enter %s: %s\n", cwd, strerror(errno));
		_exit(127);
	}
	execve("/bin/sh", argv, envp);
	dprintf(2, "rackpilot-agent: cannot run /bin/sh: %s\n", strerror(errno));
	_exit(127);
}

/* Read what is there (at most max bytes). Returns 0 at end of file, else 1. */
static int
pump(struct rp_agent_outcome *o, int fd, size_t max)
{
	char buf[64 * 1024];
	size_t got = 0;

	while (got < max) {
		ssize_t r = read(fd, buf, sizeof buf);

		if (r == 0)
			return 0;
		if (r < 0)
			return errno == EAGAIN || errno == EINTR ? 1 : 0;
		rp_agent_output(o, buf, (size_t)r);
		got += (size_t)r;
	}
	return 1;
}

int
rp_agent_shell(const char *command, json_t *env, const char *cwd, unsigned timeout_s,
               struct rp_agent_outcome *o)
{
	int p[2] = {-1, -1}, in = -1, rc = -1, status = 0, open_pipe = 1, reaped = 0;
	int term_sent = 0, kill_sent = 0;
	int64_t deadline, kill_at = 0, nap_ms = 1;
	size_t owned = 0;
	char **envp = NULL;
	struct stat st;
	pid_t pid;

	o->succeeded = 0;
	o->exit_code = -1;
	if (cwd && (stat(cwd, &st) < 0 || !S_ISDIR(st.st_mode))) {
		failed(o, "cwd %s: %s", cwd, errno ? strerror(errno) : "not a directory");
		return -1;
	}
	envp = make_env(env, &owned);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (envp == NULL || in < 0 || pipe2(p, O_CLOEXEC) < 0) {
		failed(o, "cannot start the command: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		failed(o, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		child(command, envp, cwd, in, p[1]);
	/* Both sides set the group, so a signal sent right after fork still reaches it. */
	setpgid(pid, pid);
	close(p[1]);
	p[1] = -1;
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	deadline = rp_time_mono_ns() + (int64_t)timeout_s * 1000000000LL;

	for (;;) {
		int64_t now = rp_time_mono_ns();

		if (!term_sent && (now >= deadline || rp_agent_cancelled)) {
			kill(-pid, SIGTERM);
			term_sent = 1;
			kill_at = now + KILL_GRACE_S * 1000000000LL;
		}
		if (term_sent && !kill_sent && now >= kill_at) {
			kill(-pid, SIGKILL);
			kill_sent = 1;
		}
		if (!reaped && waitpid(pid, &status, WNOHANG) == pid)
			reaped = 1;
		if (reaped) {
			/* Whatever the shell wrote before exiting is in the pipe now; background
			 * children that keep it open are not waited for. */
			if (open_pipe)
				pump(o, p[0], 16 * READ_ROUND);
			/* After a timeout the rest of the group gets the grace period too. */
			if (!term_sent || kill_sent || kill(-pid, 0) < 0)
				break;
		}
		if (open_pipe && !reaped) {
			struct pollfd pfd = {.fd = p[0], .events = POLLIN};

			if (poll(&pfd, 1, 100) > 0)
				open_pipe = pump(o, p[0], READ_ROUND);
			nap_ms = 1;
		} else {
			/* The pipe is closed but the shell lives on (or the group does): check
			 * back soon, then less often. */
			poll(NULL, 0, (int)nap_ms);
			nap_ms = nap_ms < 100 ? nap_ms * 2 : 100;
		}
	}
	if (term_sent && rp_agent_cancelled) {
		failed(o, "cancelled");
	} else if (term_sent) {
		failed(o, "timed out after %u s", timeout_s);
	} else if (WIFEXITED(status)) {
		o->exit_code = WEXITSTATUS(status);
		o->succeeded = o->exit_code == 0;
		if (!o->succeeded)
			failed(o, "exit status %d", o->exit_code);
	} else if (WIFSIGNALED(status)) {
		failed(o, "killed by signal %d", WTERMSIG(status));
	}
	rc = 0;
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (in >= 0)
		close(in);
	free_env(envp, owned);
	return rc;
}

/* ---- Files --------------------------------------------------------------------------- */

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

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
		failed(o, "path too long");
		goto out;
	}
	if (dir[0] == '\0')
		snprintf(dir, sizeof dir, "/");
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		tmp[0] = '\0';
		failed(o, "parent directory %s %s", dir,
		       errno == ENOENT ? "does not exist" : "is not a directory");
		goto out;
	}
	if (owner && resolve_owner(owner, &uid, &gid, why, sizeof why) < 0) {
		tmp[0] = '\0';
		failed(o, "owner %s: %s", owner, why);
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		failed(o, "cannot create a file in %s: %s", dir, strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	if (content) {
		if (write_all(fd, json_string_value(content), json_string_length(content)) < 0) {
			failed(o, "writing %s: %s", tmp, strerror(errno));
			goto out;
		}
		bytes = json_string_length(content);
	} else {
		const char *want = json_string_value(json_object_get(s->obj, "sha256"));

		note(o, "downloading %s", url);
		if (rp_agent_download(r->cfg, url, fd, s->timeout_s, hex, &bytes, why, sizeof why) <
		    0) {
			failed(o, "%s", why);
			goto out;
		}
		if (strcasecmp(hex, want) != 0) {
			failed(o, "sha256 mismatch for %s: expected %s, got %s", url, want, hex);
			goto out;
		}
	}
	if (fsync(fd) < 0) {
		failed(o, "fsync %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* chown first: it may clear set-id bits that the mode asks for. */
	if (owner && fchown(fd, uid, gid) < 0) {
		failed(o, "chown %s %s: %s", owner, tmp, strerror(errno));
		goto out;
	}
	if (fchmod(fd, mode) < 0) {
		failed(o, "chmod %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, path) < 0) {
		failed(o, "rename to %s: %s", path, strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	if (fsync_dir(dir) < 0) {
		failed(o, "fsync %s: %s", dir, strerror(errno));
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
		failed(o, "state_dir too long");
		return -1;
	}
	if (rp_agent_mkdir(r->cfg->state_dir) < 0 || rp_agent_mkdir(dir) < 0) {
		failed(o, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	/* Verified when stored, but a disk can rot; hashing is cheap next to flashing. */
	fd = open(final, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		int ok = rp_agent_sha256_fd(fd, hex) == 0 && strcmp(hex, want) == 0;

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
		failed(o, "cannot create %s: %s", part, strerror(errno));
		goto out;
	}
	note(o, "downloading %s", url);
	if (rp_agent_download(r->cfg, url, fd, timeout_s, hex, &bytes, why, sizeof why) < 0) {
		failed(o, "%s", why);
		goto out;
	}
	if (strcmp(hex, want) != 0) {
		failed(o, "sha256 mismatch for %s: expected %s, got %s", url, want, hex);
		goto out;
	}
	if (fsync(fd) < 0 || rename(part, final) < 0) {
		failed(o, "storing %s: %s", final, strerror(errno));
		goto out;
	}
	fsync_dir(dir);
	note(o, "downloaded %llu bytes, sha256 verified", (unsigned long long)bytes);
done:
	if (snprintf(path, pathlen, "%s", final) >= (int)pathlen) {
		failed(o, "path too long");
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
		failed(o, "reading the BIOS dump: %s", strerror(errno));
		goto out;
	}
	while (got < BIOS_REPORT_MAX &&
	       (k = read(fd, text + got, (size_t)(BIOS_REPORT_MAX - got))) > 0)
		got += k;
	if (got == BIOS_REPORT_MAX) {
		failed(o, "the BIOS dump is larger than %d bytes", BIOS_REPORT_MAX);
		goto out;
	}
	if ((attrs = bios_parse(text, (size_t)got, why, sizeof why)) == NULL) {
		failed(o, "%s", why);
		goto out;
	}
	if (json_object_size(attrs) == 0) {
		failed(o, "the BIOS tool printed no attributes");
		goto out;
	}
	if (r->client == NULL) {
		failed(o, "no server to post the BIOS values to");
		goto out;
	}
	body = json_pack("{s:O}", "attributes", attrs);
	st = rp_agent_call_retry(r->client, "POST", "/v1/agent/bios", r->token, body, &ans, err,
	                         sizeof err);
	if (st < 200 || st > 299) {
		failed(o, "posting the BIOS values: %s", err);
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
		failed(o, "out of memory");
		goto out;
	}
	/* timeout_s covers the whole step, download included. */
	left = (int64_t)s->timeout_s - (rp_time_mono_ns() - t0) / 1000000000LL;
	if (left < 1) {
		failed(o, "timed out after %u s", s->timeout_s);
		goto out;
	}
	if (json_is_true(json_object_get(s->obj, "report"))) {
		/* Only stdout is the dump; stderr still goes to the step's output. */
		char tmp[] = "/tmp/rackpilot-bios-XXXXXX", *q = NULL, *wrapped = NULL;
		int fd = mkstemp(tmp);

		if (fd < 0) {
			failed(o, "temporary file: %s", strerror(errno));
			goto out;
		}
		close(fd);
		if ((q = rp_agent_shell_quote(tmp)) == NULL ||
		    asprintf(&wrapped, "( %s ) > %s", cmd, q) < 0)
			wrapped = NULL;
		free(q);
		if (wrapped == NULL)
			failed(o, "out of memory");
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

static void
step_image(const struct rp_agent_runner *r, const struct rp_agent_step *s,
           struct rp_agent_outcome *o)
{
	const char *url = json_string_value(json_object_get(s->obj, "url"));
	const char *want = json_string_value(json_object_get(s->obj, "sha256"));
	const char *dev = json_string_value(json_object_get(s->obj, "device"));
	char hex[RP_SHA256_HEX], why[1024];
	uint64_t bytes = 0;
	struct stat st;
	int fd = -1, flags = O_WRONLY | O_CLOEXEC | O_NOCTTY;

	/* Never O_CREAT: a typo must not become a file in /dev. A block device is opened
	 * exclusively, which Linux refuses while it is mounted. */
	if (stat(dev, &st) < 0) {
		failed(o, "device %s: %s", dev, strerror(errno));
		goto out;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		failed(o, "device %s is neither a block device nor a file", dev);
		goto out;
	}
	if (S_ISBLK(st.st_mode))
		flags |= O_EXCL;
	fd = open(dev, flags);
	if (fd < 0) {
		failed(o, "device %s: %s", dev,
		       errno == EBUSY ? "in use (mounted?)" : strerror(errno));
		goto out;
	}
	note(o, "writing %s to %s", url, dev);
	if (rp_agent_download(r->cfg, url, fd, s->timeout_s, hex, &bytes, why, sizeof why) < 0) {
		if (bytes > 0)
			failed(o, "%s; %s now holds a partial, corrupt image (%llu bytes written)",
			       why, dev, (unsigned long long)bytes);
		else
			failed(o, "%s", why);
		goto out;
	}
	/* A file that was longer before would keep a stale tail. */
	if (S_ISREG(st.st_mode) && ftruncate(fd, (off_t)bytes) < 0) {
		failed(o, "truncate %s: %s", dev, strerror(errno));
		goto out;
	}
	if (fsync(fd) < 0) {
		failed(o, "fsync %s: %s; the image may not be on disk", dev, strerror(errno));
		goto out;
	}
	if (strcasecmp(hex, want) != 0) {
		failed(o,
		       "sha256 mismatch for %s: expected %s, got %s; %s now holds a corrupt image",
		       url, want, hex, dev);
		goto out;
	}
	note(o, "wrote %llu bytes to %s, sha256 verified", (unsigned long long)bytes, dev);
	o->succeeded = 1;
out:
	if (fd >= 0)
		close(fd);
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
		failed(o, "out of memory collecting the inventory");
		goto out;
	}
	if (r->client == NULL) {
		failed(o, "no server to post the inventory to");
		goto out;
	}
	st = rp_agent_call_retry(r->client, "POST", "/v1/agent/inventory", r->token, inv, &ans, err,
	                         sizeof err);
	if (st < 200 || st > 299) {
		failed(o, "posting the inventory: %s", err);
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
		rp_agent_shell(json_string_value(json_object_get(s->obj, "command")),
		               json_object_get(s->obj, "env"),
		               json_string_value(json_object_get(s->obj, "cwd")), s->timeout_s, o);
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
		failed(o, "%s steps are not run here", rp_step_type_name(s->type));
		break;
	}
	if (o->succeeded)
		o->error[0] = '\0';
	else if (o->error[0] == '\0')
		failed(o, "failed");
	o->duration_ms = (rp_time_mono_ns() - t0) / 1000000;
}

/* ---- Reporting ----------------------------------------------------------------------- */

json_t *
rp_agent_result_body(enum rp_step_state state, const char *boot_id,
                     const struct rp_agent_outcome *o)
{
	json_t *b = json_object(), *out = NULL, *error = NULL;
	char *text = NULL;
	size_t len = 0;

	if (b == NULL)
		return NULL;
	json_object_set_new(b, "state", json_string(rp_step_state_name(state)));
	if (boot_id)
		json_object_set_new(b, "boot_id", json_string(boot_id));
	if (state == RP_STATE_RUNNING || o == NULL)
		return b;
	text = rp_agent_tail_text(&o->tail, &len);
	out = text ? json_stringn(text, len) : NULL;
	free(text);
	/* snprintf may have cut a multi-byte character of a path in two. */
	text = rp_agent_utf8_clean(o->error, strlen(o->error), 0, sizeof o->error, &len);
	error = text && len ? json_stringn(text, len) : json_null();
	free(text);
	if (out == NULL || error == NULL) {
		json_decref(out);
		json_decref(error);
		json_decref(b);
		return NULL;
	}
	json_object_set_new(b, "exit_code",
	                    o->exit_code >= 0 ? json_integer(o->exit_code) : json_null());
	json_object_set_new(b, "duration_ms", json_integer(o->duration_ms));
	json_object_set_new(b, "output", out);
	json_object_set_new(b, "output_bytes", json_integer((json_int_t)o->tail.total));
	json_object_set_new(b, "output_truncated", json_boolean(rp_agent_tail_truncated(&o->tail)));
	json_object_set_new(b, "error", error);
	json_object_set(b, "result", o->result ? o->result : json_null());
	return b;
}

int
rp_agent_step_report(const struct rp_agent_runner *r, const char *job, const char *step,
                     json_t *body, char *err, size_t errlen)
{
	char path[256];
	json_t *ans = NULL;
	long st;

	if (body == NULL || r->client == NULL) {
		snprintf(err, errlen, body ? "no server to report to" : "out of memory");
		return -1;
	}
	snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/%s", job, step);
	st = rp_agent_call_retry(r->client, "POST", path, r->token, body, &ans, err, errlen);
	json_decref(ans);
	if (st >= 200 && st <= 299)
		return 0;
	/* 409: the job was cancelled or has ended; the server wants no more of it. */
	return st == 409 ? -2 : -1;
}

/* ---- Cancellation ---------------------------------------------------------------------- */

volatile sig_atomic_t rp_agent_cancelled;

#define WATCH_INTERVAL_MS 3000

/* Watches the job while steps run: sshd does not pass signals to forced commands, and a
 * session may be gone altogether, so the agent asks the server itself. */
struct watch {
	const struct rp_agent_config *cfg;
	const char *job, *token;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
};

static void *
watch_main(void *arg)
{
	struct watch *w = arg;
	struct rp_agent_client *cl = rp_agent_client_new(w->cfg);
	char path[256], err[512];

	snprintf(path, sizeof path, "/v1/agent/jobs/%s", w->job);
	while (cl) {
		struct timespec ts;
		json_t *ans = NULL;
		const char *state;
		long st;
		int stop;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WATCH_INTERVAL_MS / 1000;
		pthread_mutex_lock(&w->mu);
		while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
			;
		stop = w->stop;
		pthread_mutex_unlock(&w->mu);
		if (stop)
			break;
		st = rp_agent_call(cl, "GET", path, w->token, NULL, &ans, err, sizeof err);
		state = json_string_value(json_object_get(ans, "state"));
		/* Gone (403/404), cancelled, or ended: stop. A server we cannot reach says nothing.
		 */
		if (st == 403 || st == 404 ||
		    (st == 200 &&
		     (json_is_true(json_object_get(ans, "cancel_requested")) ||
		      (state && strcmp(state, "running") && strcmp(state, "queued"))))) {
			rp_log_warn(
			        "run-steps: job %s is %s; stopping", w->job,
			        st == 200 ? (json_is_true(json_object_get(ans, "cancel_requested"))
			                             ? "cancelled"
			                             : state)
			                  : "gone");
			rp_agent_cancelled = 1;
			json_decref(ans);
			break;
		}
		json_decref(ans);
	}
	rp_agent_client_free(cl);
	return NULL;
}

static void
on_term(int sig)
{
	(void)sig;
	rp_agent_cancelled = 1;
}

/* ---- run-steps ----------------------------------------------------------------------- */

static int
lock_path(const struct rp_agent_config *cfg, char *buf, size_t n)
{
	return snprintf(buf, n, "%s/run-steps.lock", cfg->state_dir) >= (int)n ? -1 : 0;
}

int
rp_agent_busy(const struct rp_agent_config *cfg)
{
	char path[RP_AGENT_PATH_MAX];
	int fd, busy = 0;

	if (lock_path(cfg, path, sizeof path) < 0)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		busy = 1;
	close(fd);
	return busy;
}

/* Start reboot_command detached (double fork + setsid): it must outlive us and our SSH
 * session. 0, or -1 with errno. */
static int
start_detached(const char *command)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd, s;

		setsid();
		if (fork() != 0)
			_exit(0);
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		for (s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

static int
read_plan(int fd, char **out, size_t *len)
{
	struct rp_buf b = {0};
	char buf[64 * 1024];
	ssize_t r;

	while ((r = read(fd, buf, sizeof buf)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rp_buf_free(&b);
			return -1;
		}
		rp_buf_append(&b, buf, (size_t)r);
		/* One byte over is enough to know it is too large. */
		if (b.len > RP_PLAN_MAX_BYTES)
			break;
	}
	if (b.oom) {
		rp_buf_free(&b);
		errno = ENOMEM;
		return -1;
	}
	*out = b.data;
	*len = b.len;
	return 0;
}

/* The server's state of each plan step, by the plan's order. 0, or -1 with err set. */
static int
job_states(json_t *job, const struct rp_agent_plan *p, enum rp_step_state *states, char *err,
           size_t errlen)
{
	json_t *steps = json_object_get(job, "steps"), *v;
	size_t i, k;

	if (!json_is_array(steps)) {
		snprintf(err, errlen, "the server's job has no steps array");
		return -1;
	}
	for (i = 0; i < p->nsteps; i++) {
		json_t *found = NULL;

		json_array_foreach(steps, k, v)
		{
			const char *id = json_string_value(json_object_get(v, "id"));

			if (id && !strcmp(id, p->steps[i].id)) {
				found = v;
				break;
			}
		}
		if (found == NULL) {
			snprintf(err, errlen, "step %s is not part of job %s on the server",
			         p->steps[i].id, p->job);
			return -1;
		}
		if (rp_step_state_parse(json_string_value(json_object_get(found, "state")),
		                        &states[i]) < 0) {
			snprintf(err, errlen, "step %s has an unknown state on the server",
			         p->steps[i].id);
			return -1;
		}
	}
	return 0;
}

int
rp_agent_run_steps(const struct rp_agent_config *cfg, const char *job, int in_fd)
{
	struct rp_agent_runner r = {.cfg = cfg, .echo_fd = STDOUT_FILENO};
	struct rp_agent_plan *plan = NULL;
	struct rp_agent_outcome *o = NULL;
	enum rp_step_state states[RP_PLAN_MAX_STEPS];
	char err[2048], token[256], boot_id[64], lock[RP_AGENT_PATH_MAX], path[256], *text = NULL;
	const char *boot = NULL;
	json_t *answer = NULL;
	int rc = RP_RUN_EXIT_USAGE, lfd = -1, out_flags = -1, watching = 0;
	struct watch watch = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	pthread_t watcher;
	struct stat st;
	size_t len = 0, i;
	long hs;

	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_term;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	if (!rp_uuid_valid(job)) {
		rp_log_error("run-steps: --job must be a job id (UUID), not '%s'", job);
		goto out;
	}
	if (read_plan(in_fd, &text, &len) < 0) {
		rp_log_error("run-steps: reading the plan: %s", strerror(errno));
		goto out;
	}
	plan = rp_agent_plan_parse(text ? text : "", len, job, err, sizeof err);
	if (plan == NULL) {
		rp_log_error("run-steps: bad plan: %s", err);
		goto out;
	}
	if (rp_agent_token_read(cfg, token, sizeof token, err, sizeof err) < 0) {
		rp_log_error("run-steps: %s", err);
		goto out;
	}
	r.token = token;
	if (rp_agent_read_line(cfg->root, "/proc/sys/kernel/random/boot_id", boot_id,
	                       sizeof boot_id) == 0)
		boot = boot_id;

	if (rp_agent_mkdir(cfg->state_dir) < 0 || lock_path(cfg, lock, sizeof lock) < 0 ||
	    (lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		rp_log_error("run-steps: cannot open the lock in %s: %s", cfg->state_dir,
		             strerror(errno));
		goto out;
	}
	if (flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		rp_log_info("run-steps: waiting for an earlier run-steps to finish");
		while (flock(lfd, LOCK_EX) < 0) {
			if (errno != EINTR) {
				rp_log_error("run-steps: lock %s: %s", lock, strerror(errno));
				goto out;
			}
		}
	}

	rc = RP_RUN_EXIT_SERVER;
	r.client = rp_agent_client_new(cfg);
	if (r.client == NULL) {
		rp_log_error("run-steps: out of memory");
		goto out;
	}
	snprintf(path, sizeof path, "/v1/agent/jobs/%s", job);
	hs = rp_agent_call_retry(r.client, "GET", path, token, NULL, &answer, err, sizeof err);
	if (hs < 200 || hs > 299) {
		rp_log_error("run-steps: %s", err);
		goto out;
	}
	if (job_states(answer, plan, states, err, sizeof err) < 0) {
		rp_log_error("run-steps: %s", err);
		rc = RP_RUN_EXIT_USAGE;
		goto out;
	}

	/* A stuck SSH channel must not stall steps (see echo()); only pipes and sockets, as a
	 * terminal's flags are shared with the shell that owns it. */
	if (fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
		out_flags = fcntl(STDOUT_FILENO, F_GETFL);
		if (out_flags >= 0)
			fcntl(STDOUT_FILENO, F_SETFL, out_flags | O_NONBLOCK);
	}

	watch.cfg = cfg;
	watch.job = job;
	watch.token = token;
	watching = pthread_create(&watcher, NULL, watch_main, &watch) == 0;
	rc = RP_RUN_EXIT_OK;
	for (i = 0; i < plan->nsteps; i++) {
		const struct rp_agent_step *s = &plan->steps[i];
		const char *tn = rp_step_type_name(s->type);
		enum rp_agent_decision d = rp_agent_decide(states[i], s);

		if (rp_agent_cancelled) {
			frame(r.echo_fd, "== cancelled: step %s and later ones not started", s->id);
			rc = RP_RUN_EXIT_FAILED;
			break;
		}
		rp_agent_outcome_free(o);
		o = rp_agent_outcome_new(r.echo_fd);
		if (o == NULL) {
			rp_log_error("run-steps: out of memory");
			rc = RP_RUN_EXIT_SERVER;
			break;
		}
		if (d == RP_DECIDE_SKIP) {
			frame(r.echo_fd, "== step %s skipped (already %s)", s->id,
			      rp_step_state_name(states[i]));
			continue;
		}
		if (d == RP_DECIDE_INTERRUPTED) {
			json_t *body;

			failed(o, "interrupted");
			frame(r.echo_fd, "== step %s failed: %s", s->id, o->error);
			body = rp_agent_result_body(RP_STATE_FAILED, boot, o);
			rc = RP_RUN_EXIT_FAILED;
			if (rp_agent_step_report(&r, job, s->id, body, err, sizeof err) < 0) {
				rp_log_error("run-steps: step %s: %s", s->id, err);
				rc = RP_RUN_EXIT_SERVER;
			}
			json_decref(body);
			break;
		}

		frame(r.echo_fd, "== step %s (%s) started", s->id, tn);
		if (s->type == RP_STEP_REBOOT && boot == NULL) {
			/* Without it the server cannot tell the reboot happened. */
			failed(o, "cannot read boot_id");
		} else {
			json_t *body = rp_agent_result_body(RP_STATE_RUNNING, boot, NULL);
			int bad = rp_agent_step_report(&r, job, s->id, body, err, sizeof err);

			json_decref(body);
			if (bad == -2) {
				frame(r.echo_fd, "== step %s not started: %s", s->id, err);
				rc = RP_RUN_EXIT_FAILED;
				break;
			}
			if (bad) {
				rp_log_error("run-steps: step %s: %s", s->id, err);
				rc = RP_RUN_EXIT_SERVER;
				break;
			}
			if (s->type == RP_STEP_REBOOT) {
				if (start_detached(cfg->reboot_command) == 0) {
					frame(r.echo_fd, "== step %s rebooting (boot_id %s)", s->id,
					      boot);
					rc = RP_RUN_EXIT_REBOOTING;
					break;
				}
				failed(o, "cannot start %s: %s", cfg->reboot_command,
				       strerror(errno));
			} else {
				rp_agent_step_run(&r, s, o);
			}
		}
		if (!o->at_line_start)
			echo(r.echo_fd, "\n", 1);
		if (o->succeeded && o->exit_code >= 0)
			frame(r.echo_fd, "== step %s succeeded (exit %d, %lld ms)", s->id,
			      o->exit_code, (long long)o->duration_ms);
		else if (o->succeeded)
			frame(r.echo_fd, "== step %s succeeded (%lld ms)", s->id,
			      (long long)o->duration_ms);
		else
			frame(r.echo_fd, "== step %s failed: %s", s->id, o->error);
		{
			json_t *body = rp_agent_result_body(
			        o->succeeded ? RP_STATE_SUCCEEDED : RP_STATE_FAILED, boot, o);
			int bad = rp_agent_step_report(&r, job, s->id, body, err, sizeof err);

			json_decref(body);
			if (bad == -2) {
				rc = RP_RUN_EXIT_FAILED;
				break;
			}
			if (bad) {
				rp_log_error("run-steps: step %s: %s", s->id, err);
				rc = RP_RUN_EXIT_SERVER;
				break;
			}
		}
		if (!o->succeeded && !s->continue_on_error) {
			rc = RP_RUN_EXIT_FAILED;
			break;
		}
	}
out:
	if (watching) {
		pthread_mutex_lock(&watch.mu);
		watch.stop = 1;
		pthread_cond_signal(&watch.cv);
		pthread_mutex_unlock(&watch.mu);
		pthread_join(watcher, NULL);
	}
	if (out_flags >= 0)
		fcntl(STDOUT_FILENO, F_SETFL, out_flags);
	rp_agent_outcome_free(o);
	rp_agent_client_free(r.client);
	json_decref(answer);
	rp_agent_plan_free(plan);
	free(text);
	explicit_bzero(token, sizeof token);
	if (lfd >= 0)
		close(lfd);
	return rc;
}
