/*
 * `run-steps`: the orchestration around the steps steps.c runs. One run at a time (a lock in
 * state_dir), the server's step states (resume and skip), a thread that watches the job for
 * cancellation, a report per step, and a reboot step's detached command.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

/* A framing line ("== step ..."), newline added, into the job log. */
static void frame(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
frame(int fd, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = rp_vline(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n == 0)
		return;
	rp_agent_echo(fd, line, n);
}

/* ---- Reporting ----------------------------------------------------------------------- */

json_t *
rp_agent_result_body(enum rp_step_state state, const char *run, const char *boot_id,
                     const struct rp_agent_outcome *o)
{
	json_t *b = json_object(), *out = NULL, *error = NULL;
	char *text = NULL;
	size_t len = 0;

	if (b == NULL)
		return NULL;
	json_object_set_new(b, "state", json_string(rp_step_state_name(state)));
	if (run)
		json_object_set_new(b, "run", json_string(run));
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

json_t *
rp_agent_progress_body(const char *run, const char *boot_id, const struct rp_agent_progress *p)
{
	json_t *b = rp_agent_result_body(RP_STATE_RUNNING, run, boot_id, NULL);
	json_t *pr =
	        p->kind == RP_PROGRESS_READY
	                ? json_pack("{s:b}", "ready", 1)
	                : json_pack("{s:I, s:I, s:o, s:I}", "bytes_read", (json_int_t)p->bytes_read,
	                            "bytes_written", (json_int_t)p->bytes_written, "total",
	                            p->total >= 0 ? json_integer(p->total) : json_null(),
	                            "rate_bps", (json_int_t)p->rate_bps);

	if (b == NULL || pr == NULL || json_object_set_new(b, "progress", pr) < 0) {
		json_decref(b);
		return NULL;
	}
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

/* ---- Progress -------------------------------------------------------------------------- */

/* A long step's progress (an image's counts, a shell step's ready) goes to the server from a
 * thread of its own: a slow or absent server must not hold up the write or the command. Only
 * the latest progress waits; a post that fails is skipped (the final report says what
 * happened). */
struct poster {
	const struct rp_agent_config *cfg;
	const char *job, *step, *run, *boot, *token;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rp_agent_progress p;
	int have, stop;
};

static void
poster_hand(void *arg, const struct rp_agent_progress *p)
{
	struct poster *ps = arg;

	pthread_mutex_lock(&ps->mu);
	ps->p = *p;
	ps->have = 1;
	pthread_cond_signal(&ps->cv);
	pthread_mutex_unlock(&ps->mu);
}

static void *
poster_main(void *arg)
{
	struct poster *ps = arg;
	struct rp_agent_client *cl = rp_agent_client_new(ps->cfg);
	char path[256], err[512];

	snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/%s", ps->job, ps->step);
	for (;;) {
		struct rp_agent_progress p;
		json_t *body, *ans = NULL;
		long st = RP_AGENT_ELOCAL;

		pthread_mutex_lock(&ps->mu);
		while (!ps->have && !ps->stop)
			pthread_cond_wait(&ps->cv, &ps->mu);
		if (!ps->have) {
			pthread_mutex_unlock(&ps->mu);
			break;
		}
		p = ps->p;
		ps->have = 0;
		pthread_mutex_unlock(&ps->mu);
		body = rp_agent_progress_body(ps->run, ps->boot, &p);
		snprintf(err, sizeof err, "out of memory");
		if (cl && body)
			st = rp_agent_call(cl, "POST", path, ps->token, body, &ans, err,
			                   sizeof err);
		if (st < 200 || st > 299)
			rp_log_debug("run-steps: step %s: progress not posted: %s", ps->step, err);
		json_decref(body);
		json_decref(ans);
	}
	rp_agent_client_free(cl);
	return NULL;
}

/* Run step s, which started as run: an image step's progress, or a shell step's ready, is
 * posted as it comes, and the last of it before this returns (so it never lands after the
 * final report). */
static void
run_step(const struct rp_agent_runner *r, const char *job, const struct rp_agent_step *s,
         const char *run, const char *boot, struct rp_agent_outcome *o)
{
	struct poster ps = {.cfg = r->cfg,
	                    .job = job,
	                    .step = s->id,
	                    .run = run,
	                    .boot = boot,
	                    .token = r->token,
	                    .mu = PTHREAD_MUTEX_INITIALIZER,
	                    .cv = PTHREAD_COND_INITIALIZER};
	struct rp_agent_runner pr = *r;
	pthread_t t;
	int posting = (s->type == RP_STEP_IMAGE ||
	               (s->type == RP_STEP_SHELL && json_object_get(s->obj, "ready_port"))) &&
	              pthread_create(&t, NULL, poster_main, &ps) == 0;

	if (posting) {
		pr.progress = poster_hand;
		pr.progress_arg = &ps;
	}
	rp_agent_step_run(&pr, s, o);
	if (posting) {
		pthread_mutex_lock(&ps.mu);
		ps.stop = 1;
		pthread_cond_signal(&ps.cv);
		pthread_mutex_unlock(&ps.mu);
		pthread_join(t, NULL);
	}
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

	/* A stuck SSH channel must not stall steps (see rp_agent_echo()); only pipes and sockets,
	 * as a terminal's flags are shared with the shell that owns it. */
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

			rp_agent_failed(o, "interrupted");
			frame(r.echo_fd, "== step %s failed: %s", s->id, o->error);
			body = rp_agent_result_body(RP_STATE_FAILED, NULL, boot, o);
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
			rp_agent_failed(o, "cannot read boot_id");
		} else {
			char run[RP_UUID_BUF];
			json_t *body =
			        rp_uuid_new(run) == 0
			                ? rp_agent_result_body(RP_STATE_RUNNING, run, boot, NULL)
			                : NULL;
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
				rp_agent_failed(o, "cannot start %s: %s", cfg->reboot_command,
				                strerror(errno));
			} else {
				run_step(&r, job, s, run, boot, o);
			}
		}
		if (!o->at_line_start)
			rp_agent_echo(r.echo_fd, "\n", 1);
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
			        o->succeeded ? RP_STATE_SUCCEEDED : RP_STATE_FAILED, NULL, boot, o);
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
