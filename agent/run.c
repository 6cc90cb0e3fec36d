/* The one process runner (run.h): fork, exec, read with poll(), time out, reap. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

#define READ_ROUND (1024 * 1024) /* output read between two looks at the clock */

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void __attribute__((noreturn))
child(const struct rp_agent_proc *p, int in, int out, int err, int report)
{
	sigset_t none;
	int s, e;

	setpgid(0, 0);
	/* Ignored signals (SIGPIPE, SIGHUP) stay ignored across exec; the child gets defaults. */
	for (s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(127);
	if (p->cwd && chdir(p->cwd) < 0) {
		dprintf(2, "rackpilot-agent: cannot enter %s: %s\n", p->cwd, strerror(errno));
		_exit(127);
	}
	execve(p->path, p->argv, p->envp);
	e = errno;
	if (write(report, &e, sizeof e) < 0)
		_exit(127);
	dprintf(2, "rackpilot-agent: cannot run %s: %s\n", p->path, strerror(e));
	_exit(127);
}

/* Read what is there (at most max bytes) into output(). Returns 0 at end of file or when
 * output() refused (*refused set), else 1. */
static int
pump(const struct rp_agent_proc *p, int fd, size_t max, int *refused)
{
	char buf[64 * 1024];
	size_t got = 0;

	while (got < max) {
		ssize_t r = read(fd, buf, sizeof buf);

		if (r == 0)
			return 0;
		if (r < 0)
			return errno == EAGAIN || errno == EINTR ? 1 : 0;
		if (p->output(p->arg, buf, (size_t)r) < 0) {
			*refused = 1;
			return 0;
		}
		got += (size_t)r;
	}
	return 1;
}

/* The group, and the process itself should it have left it (only while it is not reaped:
 * its pid may be reused after). */
static void
signal_all(pid_t pid, int sig, int reaped)
{
	kill(-pid, sig);
	if (!reaped)
		kill(pid, sig);
}

int
rp_agent_proc_run(const struct rp_agent_proc *p, struct rp_agent_proc_end *end)
{
	int out[2] = {-1, -1}, rep[2] = {-1, -1}, in = -1, err = -1, rc = -1, saved = 0;
	int open_pipe = 1, reaped = 0, term_sent = 0, kill_sent = 0, status = 0, e;
	int64_t deadline, kill_at = 0, nap_ms = 1, next_tick;
	ssize_t n;
	pid_t pid, w;

	memset(end, 0, sizeof *end);
	if ((in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 ||
	    (!p->stderr_output && (err = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) ||
	    pipe2(out, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0) {
		saved = errno;
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		saved = errno;
		goto out;
	}
	if (pid == 0)
		child(p, in, out[1], p->stderr_output ? out[1] : err, rep[1]);
	/* Both sides set the group, so a signal sent right after fork still reaches it. */
	setpgid(pid, pid);
	close(out[1]);
	out[1] = -1;
	close(rep[1]);
	rep[1] = -1;
	/* End of file once execve succeeded (close-on-exec), an errno when it failed. */
	while ((n = read(rep[0], &e, sizeof e)) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof e)
		end->exec_errno = e;
	fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
	deadline = mono_ms() + p->timeout_ms;
	next_tick = mono_ms() + p->tick_ms;

	for (;;) {
		int64_t now = mono_ms();

		if (!term_sent && (now >= deadline || (p->cancel && *p->cancel))) {
			if (now >= deadline)
				end->timed_out = 1;
			else
				end->cancelled = 1;
			signal_all(pid, p->grace_ms > 0 ? SIGTERM : SIGKILL, reaped);
			term_sent = 1;
			kill_sent = p->grace_ms <= 0;
			kill_at = now + p->grace_ms;
		}
		if (term_sent && !kill_sent && now >= kill_at) {
			signal_all(pid, SIGKILL, reaped);
			kill_sent = 1;
		}
		if (!reaped) {
			w = waitpid(pid, &status, WNOHANG);
			if (w == pid) {
				reaped = 1;
			} else if (w < 0 && errno != EINTR) {
				status = 0; /* SIGCHLD ignored by our caller: nothing to learn */
				reaped = 1;
			}
		}
		/* Only while it runs: once it is reaped or being stopped there is nothing to watch.
		 */
		if (p->tick && !reaped && !term_sent && now >= next_tick) {
			p->tick(p->arg);
			next_tick = now + p->tick_ms;
		}
		if (reaped) {
			/* Whatever it wrote before exiting is in the pipe now; background children
			 * that keep it open are not waited for. */
			if (open_pipe)
				open_pipe = pump(p, out[0], 16 * READ_ROUND, &end->refused);
			/* After a timeout the rest of the group gets the grace period too. */
			if (!term_sent || kill_sent || kill(-pid, 0) < 0)
				break;
		}
		if (open_pipe && !reaped) {
			struct pollfd pfd = {.fd = out[0], .events = POLLIN};

			if (poll(&pfd, 1, 100) > 0)
				open_pipe = pump(p, out[0], READ_ROUND, &end->refused);
			nap_ms = 1;
		} else {
			/* The pipe is closed but the process lives on (or its group does): check
			 * back soon, then less often. */
			poll(NULL, 0, (int)nap_ms);
			nap_ms = nap_ms < 100 ? nap_ms * 2 : 100;
		}
		if (end->refused && !kill_sent) {
			signal_all(pid, SIGKILL, reaped);
			term_sent = kill_sent = 1;
		}
	}
	end->status = status;
	rc = 0;
out:
	if (out[0] >= 0)
		close(out[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (rep[0] >= 0)
		close(rep[0]);
	if (rep[1] >= 0)
		close(rep[1]);
	if (in >= 0)
		close(in);
	if (err >= 0)
		close(err);
	if (rc < 0)
		errno = saved;
	return rc;
}
