/*
 * The agent and step plans against real peers: each simulated node is a real OpenSSH sshd on
 * its own loopback address whose only command is the real rackpilot-agent
 * (tests/ssh/sshnode.sh). The agent registers with a bootstrap token, rackpilotd pins its host
 * key and pushes plans over SSH; results come back over REST.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef RP_TEST_AGENT
#error "RP_TEST_AGENT (path of rackpilot-agent) must be defined"
#endif

struct node {
	char name[32];
	char dir[300];
	char addr[32];
	char mac[20];
	int port;
};

static char workdir[256];
static int port_base;

/* A bootstrap token (for node, or any machine when NULL) into buf. */
static void
bootstrap(const char *node, char *buf, size_t len)
{
	struct reply r;

	if (node)
		assert_int_equal(call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}",
		                      "node", node),
		                 201);
	else
		assert_int_equal(call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{}"), 201);
	snprintf(buf, len, "%s", jstr(r.json, "token"));
	assert_int_equal(strncmp(buf, "rpb_", 4), 0);
	reply_free(&r);
}

/* Enroll node i, start its sshd and register its agent. */
static void
node_up(struct node *n, int i, int enroll)
{
	char tok[128];

	snprintf(n->name, sizeof n->name, "sn%02d", i);
	snprintf(n->dir, sizeof n->dir, "%s/%s", workdir, n->name);
	snprintf(n->addr, sizeof n->addr, "127.0.1.%d", 10 + i);
	snprintf(n->mac, sizeof n->mac, "02:52:50:00:%02x:01", i);
	n->port = port_base;
	if (enroll) {
		make_node(&S, "{s:s, s:[s]}", "name", n->name, "macs", n->mac);
		bootstrap(n->name, tok, sizeof tok);
	} else {
		bootstrap(NULL, tok, sizeof tok);
	}
	sh("%s/tests/ssh/sshnode.sh start %s %s %d %s %s %s %s", rp_test_src, n->dir, n->addr,
	   n->port, S.base, tok, n->mac, RP_TEST_AGENT);
	sh("%s -c %s/agent.conf register >> %s/agent.log 2>&1", RP_TEST_AGENT, n->dir, n->dir);
}

static void
node_down(struct node *n)
{
	sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, n->dir);
}

/* The node's agent token (from its token file). */
static void
agent_token(struct node *n, char *buf, size_t len)
{
	char path[400];

	snprintf(path, sizeof path, "%s/state/token", n->dir);
	slurp(path, buf, len);
	buf[strcspn(buf, "\r\n")] = '\0';
	assert_int_equal(strncmp(buf, "rpa_", 4), 0);
}

/* Submit a plan (JSON text of the body) to a node; returns the job id in id. */
static void
submit(const char *node, const char *body, char *id, size_t len)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/v1/nodes/%s/steps", node);
	if (req(&S, S.admin, "POST", path, "application/json", body, strlen(body), NULL, &r) != 202)
		fail_msg("POST %s: %ld %s", path, r.status, r.body ? r.body : "");
	snprintf(id, len, "%s", jstr(r.json, "id"));
	reply_free(&r);
}

static json_t *
step(json_t *job, const char *id)
{
	json_t *s;
	size_t i;

	json_array_foreach(json_object_get(job, "steps"), i,
	                   s) if (!strcmp(jstr(s, "id"), id)) return s;
	fail_msg("no step %s", id);
	return NULL;
}

static json_t *
get_job(const char *id)
{
	char path[200];
	struct reply r;
	json_t *j;

	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	j = json_incref(r.json);
	reply_free(&r);
	return j;
}

/* Poll until step sid of job id is in state want. */
static void
wait_step(const char *id, const char *sid, const char *want)
{
	int i;

	for (i = 0; i < 300; i++) {
		json_t *j = get_job(id);
		int ok = !strcmp(jstr(step(j, sid), "state"), want);

		json_decref(j);
		if (ok)
			return;
		usleep(100000);
	}
	fail_msg("step %s of job %s never became %s", sid, id, want);
}

static long
count_lines(const char *path)
{
	char buf[4096];
	long n = 0;
	const char *p;

	for (p = slurp(path, buf, sizeof buf); *p; p++)
		n += *p == '\n';
	return n;
}

/* ---- Tests ------------------------------------------------------------------------------ */

static struct node n0, n1;

static void
test_register_pins_host_key(void **state)
{
	struct reply r;
	char cmd[600], fp[200], path[400], boot[80], buf[4096], tok[128];
	FILE *p;
	json_t *node, *inv;

	(void)state;
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/sn00", &r, NULL), 200);
	node = json_incref(r.json);
	reply_free(&r);
	/* The pin is the key sshd presents, as ssh-keygen sees it. */
	snprintf(cmd, sizeof cmd, "ssh-keygen -lf %s/hostkey.pub | cut -d' ' -f2", n0.dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(fp, sizeof fp, p));
	pclose(p);
	fp[strcspn(fp, "\n")] = '\0';
	assert_string_equal(
	        jstr(json_object_get(json_object_get(node, "ssh"), "host_key"), "fingerprint"), fp);
	snprintf(path, sizeof path, "%s/root/proc/sys/kernel/random/boot_id", n0.dir);
	slurp(path, boot, sizeof boot);
	boot[strcspn(boot, "\n")] = '\0';
	assert_string_equal(jstr(json_object_get(node, "agent"), "boot_id"), boot);
	assert_string_equal(jstr(json_object_get(node, "agent"), "address"), n0.addr);
	json_decref(node);
	/* The server's key went into the node's authorized_keys. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/ssh-key", &r, NULL), 200);
	snprintf(path, sizeof path, "%s/authorized_keys", n0.dir);
	assert_non_null(strstr(slurp(path, buf, sizeof buf), strchr(jstr(r.json, "key"), ' ') + 1));
	reply_free(&r);
	/* The inventory came with the registration. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/sn00/inventory", &r, NULL), 200);
	inv = json_object_get(r.json, "data");
	assert_int_equal(json_integer_value(json_object_get(inv, "format")), 1);
	assert_string_equal(jstr(r.json, "source"), "agent");
	reply_free(&r);
	/* The bootstrap token was single-use. */
	assert_int_not_equal(sh_rc("%s -c %s/agent.conf register > %s/again.log 2>&1",
	                           RP_TEST_AGENT, n0.dir, n0.dir),
	                     0);
	/* The token file is the node's own and private. */
	{
		struct stat sb;

		snprintf(path, sizeof path, "%s/state/token", n0.dir);
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 077, 0);
	}
	agent_token(&n0, tok, sizeof tok);
	assert_int_equal(
	        call(&S, tok, "POST", "/v1/agent/heartbeat", &r, "{s:s}", "status", "idle"), 200);
	assert_string_equal(jstr(r.json, "node"), "sn00");
	reply_free(&r);
}

static void
test_plan_runs_end_to_end(void **state)
{
	char id[64], body[2048], path[400], buf[4096];
	json_t *j, *s;
	struct reply r;

	(void)state;
	snprintf(body, sizeof body,
	         "{\"steps\":["
	         "{\"id\":\"hello\",\"type\":\"shell\",\"command\":\"echo hello $GREETING; echo "
	         "oops >&2\","
	         "\"env\":{\"GREETING\":\"world\"}},"
	         "{\"id\":\"motd\",\"type\":\"file\",\"path\":\"%s/"
	         "motd\",\"content\":\"managed\\n\","
	         "\"mode\":\"0640\"},"
	         "{\"id\":\"inv\",\"type\":\"inventory\"},"
	         "{\"id\":\"count\",\"type\":\"shell\",\"command\":\"echo x >> %s/count\"}]}",
	         n0.dir, n0.dir);
	submit("sn00", body, id, sizeof id);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	j = get_job(id);
	s = step(j, "hello");
	assert_string_equal(jstr(s, "state"), "succeeded");
	assert_int_equal(json_integer_value(json_object_get(s, "exit_code")), 0);
	assert_non_null(strstr(jstr(s, "output"), "hello world"));
	assert_non_null(strstr(jstr(s, "output"), "oops"));
	assert_true(json_is_integer(json_object_get(s, "duration_ms")));
	assert_non_null(jstr(s, "started_at"));
	assert_non_null(jstr(s, "finished_at"));
	assert_string_equal(jstr(step(j, "motd"), "state"), "succeeded");
	assert_string_equal(jstr(step(j, "inv"), "state"), "succeeded");
	assert_string_equal(jstr(step(j, "count"), "state"), "succeeded");
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(j, "result"), "succeeded")), 4);
	json_decref(j);
	/* What the steps did on the node. */
	snprintf(path, sizeof path, "%s/motd", n0.dir);
	assert_string_equal(slurp(path, buf, sizeof buf), "managed\n");
	{
		struct stat sb;

		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 0777, 0640);
	}
	snprintf(path, sizeof path, "%s/count", n0.dir);
	assert_int_equal(count_lines(path), 1);
	/* The SSH channel's output is the log, in order. */
	snprintf(path, sizeof path, "/v1/jobs/%s/log", id);
	assert_int_equal(req(&S, S.admin, "GET", path, NULL, NULL, 0, NULL, &r), 200);
	assert_non_null(strstr(r.body, "== step hello (shell) started"));
	assert_true(strstr(r.body, "hello world") < strstr(r.body, "== step count"));
	assert_non_null(strstr(r.ctype, "text/plain"));
	reply_free(&r);
	/* And the log can be followed from an offset. */
	snprintf(path, sizeof path, "/v1/jobs/%s/log?offset=5", id);
	assert_int_equal(req(&S, S.admin, "GET", path, NULL, NULL, 0, NULL, &r), 200);
	assert_int_equal(strncmp(r.body, "ckpilotd", 8), 0);
	reply_free(&r);
}

static void
test_failing_step_stops_plan(void **state)
{
	char id[64], body[2048], path[400];
	json_t *j;

	(void)state;
	snprintf(body, sizeof body,
	         "{\"steps\":["
	         "{\"id\":\"ok\",\"type\":\"shell\",\"command\":\"true\"},"
	         "{\"id\":\"soft\",\"type\":\"shell\",\"command\":\"exit "
	         "5\",\"continue_on_error\":true},"
	         "{\"id\":\"bad\",\"type\":\"shell\",\"command\":\"echo broken; exit 3\"},"
	         "{\"id\":\"never\",\"type\":\"shell\",\"command\":\"touch %s/never\"}]}",
	         n0.dir);
	submit("sn00", body, id, sizeof id);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "failed");
	assert_string_equal(jstr(json_object_get(j, "error"), "code"), "step_failed");
	assert_non_null(strstr(jstr(json_object_get(j, "error"), "message"), "bad"));
	json_decref(j);
	j = get_job(id);
	assert_string_equal(jstr(step(j, "ok"), "state"), "succeeded");
	assert_string_equal(jstr(step(j, "soft"), "state"), "failed");
	assert_int_equal(json_integer_value(json_object_get(step(j, "soft"), "exit_code")), 5);
	assert_string_equal(jstr(step(j, "bad"), "state"), "failed");
	assert_int_equal(json_integer_value(json_object_get(step(j, "bad"), "exit_code")), 3);
	assert_non_null(strstr(jstr(step(j, "bad"), "output"), "broken"));
	assert_string_equal(jstr(step(j, "never"), "state"), "skipped");
	json_decref(j);
	snprintf(path, sizeof path, "%s/never", n0.dir);
	assert_int_not_equal(access(path, F_OK), 0);
}

/* Processes running a plan for node n. */
static int
agents_running(struct node *n)
{
	char cmd[600], buf[32];
	FILE *p;
	int k = 0;

	snprintf(cmd, sizeof cmd, "pgrep -fc '%s/agent.conf [r]un-steps' || true", n->dir);
	if ((p = popen(cmd, "r")) != NULL) {
		if (fgets(buf, sizeof buf, p))
			k = atoi(buf);
		pclose(p);
	}
	return k;
}

static void
wait_agents(struct node *n, int want)
{
	int i;

	for (i = 0; i < 600 && agents_running(n) != want; i++)
		usleep(100000);
	if (agents_running(n) != want)
		fail_msg("expected %d agent(s) running a plan on %s, found %d", want, n->name,
		         agents_running(n));
}

/* A plan whose step "two" waits for flag; every step appends its name to ran. */
static void
resumable_plan(struct node *n, const char *flag, char *id, size_t len)
{
	char body[2048], path[400];

	snprintf(path, sizeof path, "%s/ran", n->dir);
	unlink(path);
	snprintf(body, sizeof body,
	         "{\"steps\":["
	         "{\"id\":\"one\",\"type\":\"shell\",\"command\":\"echo one >> %s/ran\"},"
	         "{\"id\":\"two\",\"type\":\"shell\",\"command\":\"while [ ! -f %s ]; do sleep "
	         "0.1; done; "
	         "echo two >> %s/ran\"},"
	         "{\"id\":\"three\",\"type\":\"shell\",\"command\":\"echo three >> %s/ran\"}]}",
	         n->dir, flag, n->dir, n->dir);
	submit(n->name, body, id, len);
}

static void
assert_runs(const char *id, int one, int two, int three)
{
	json_t *j = get_job(id);

	assert_int_equal(json_integer_value(json_object_get(step(j, "one"), "runs")), one);
	assert_int_equal(json_integer_value(json_object_get(step(j, "two"), "runs")), two);
	assert_int_equal(json_integer_value(json_object_get(step(j, "three"), "runs")), three);
	assert_true(json_integer_value(json_object_get(j, "attempts")) >= 2);
	json_decref(j);
}

static void
assert_log_has(const char *id, const char *text)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/v1/jobs/%s/log", id);
	assert_int_equal(req(&S, S.admin, "GET", path, NULL, NULL, 0, NULL, &r), 200);
	if (strstr(r.body, text) == NULL)
		fail_msg("the log lacks \"%s\":\n%s", text, r.body);
	reply_free(&r);
}

/* sshd dies mid-plan, sessions and all, as when the network drops; the agent keeps going
 * and reports over REST. Once sshd is back the server connects again; the new session waits
 * for the old run, then finds every step done. Each step ran exactly once. */
static void
test_resume_after_sshd_dies(void **state)
{
	char id[64], path[400], flag[400], buf[256];
	json_t *j;

	(void)state;
	snprintf(flag, sizeof flag, "%s/go", n0.dir);
	unlink(flag);
	resumable_plan(&n0, flag, id, sizeof id);
	wait_step(id, "two", "running");
	sh("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, n0.dir);
	usleep(1500000); /* meanwhile the server retries against a refusing node */
	sh("%s/tests/ssh/sshnode.sh restart %s", rp_test_src, n0.dir);
	wait_agents(&n0, 2);
	sh("touch %s", flag);
	j = wait_job(&S, id, 90);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	assert_runs(id, 1, 1, 1);
	snprintf(path, sizeof path, "%s/ran", n0.dir);
	assert_string_equal(slurp(path, buf, sizeof buf), "one\ntwo\nthree\n");
	assert_log_has(id, "== step one skipped (already succeeded)");
	assert_log_has(id, "== step three skipped (already succeeded)");
}

/* The node loses sshd and the agent in the middle of step two: the plan resumes at step
 * two (interrupted, so it runs again) and step one is not repeated. */
static void
test_resume_after_agent_dies(void **state)
{
	char id[64], path[400], flag[400], buf[256];
	json_t *j;

	(void)state;
	snprintf(flag, sizeof flag, "%s/go2", n0.dir);
	unlink(flag);
	resumable_plan(&n0, flag, id, sizeof id);
	wait_step(id, "two", "running");
	sh("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, n0.dir);
	/* The whole node side dies: the agent and the step it ran (its own process group). */
	sh("pkill -9 -f '%s/agent.conf [r]un-steps'; pkill -9 -f '%s/g[o]2'; true", n0.dir, n0.dir);
	wait_agents(&n0, 0);
	sh("touch %s", flag);
	sh("%s/tests/ssh/sshnode.sh restart %s", rp_test_src, n0.dir);
	j = wait_job(&S, id, 90);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	assert_runs(id, 1, 2, 1);
	snprintf(path, sizeof path, "%s/ran", n0.dir);
	assert_string_equal(slurp(path, buf, sizeof buf), "one\ntwo\nthree\n");
	assert_log_has(id, "== step one skipped (already succeeded)");
}

/* kill -9 rackpilotd in the middle of a plan and start it again: the job is recovered and
 * resumes; the agent, which kept running, finishes its step and reports it once the server
 * is back. No step ran twice. This server listens on a fixed port, since the agent's
 * configuration names it. */
static void
test_server_killed_mid_plan(void **state)
{
	struct server s2;
	struct node n;
	char listen[64], dir[256], flag[400], body[2048], id[64], path[400], tok[128], buf[256];
	const char *args[] = {"--listen", listen, "--power-sync-interval", "0", NULL};
	struct reply r;
	json_t *j;
	int i, done = 0;

	(void)state;
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port_base + 1);
	server_start(&s2, NULL, args);
	snprintf(dir, sizeof dir, "%s", s2.dir);
	snprintf(n.name, sizeof n.name, "kn");
	snprintf(n.dir, sizeof n.dir, "%s/kn", workdir);
	snprintf(n.addr, sizeof n.addr, "127.0.1.40");
	snprintf(n.mac, sizeof n.mac, "02:52:50:00:40:01");
	n.port = port_base;
	assert_int_equal(call(&s2, s2.admin, "POST", "/v1/nodes", &r, "{s:s, s:[s]}", "name", "kn",
	                      "macs", n.mac),
	                 201);
	reply_free(&r);
	assert_int_equal(
	        call(&s2, s2.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", "kn"),
	        201);
	snprintf(tok, sizeof tok, "%s", jstr(r.json, "token"));
	reply_free(&r);
	sh("%s/tests/ssh/sshnode.sh start %s %s %d %s %s %s %s", rp_test_src, n.dir, n.addr, n.port,
	   s2.base, tok, n.mac, RP_TEST_AGENT);
	sh("%s -c %s/agent.conf register >> %s/agent.log 2>&1", RP_TEST_AGENT, n.dir, n.dir);
	snprintf(flag, sizeof flag, "%s/go", n.dir);
	snprintf(body, sizeof body,
	         "{\"steps\":["
	         "{\"id\":\"one\",\"type\":\"shell\",\"command\":\"echo one >> %s/ran\"},"
	         "{\"id\":\"two\",\"type\":\"shell\",\"command\":\"while [ ! -f %s ]; do sleep "
	         "0.1; done; "
	         "echo two >> %s/ran\"},"
	         "{\"id\":\"three\",\"type\":\"shell\",\"command\":\"echo three >> %s/ran\"}]}",
	         n.dir, flag, n.dir, n.dir);
	assert_int_equal(req(&s2, s2.admin, "POST", "/v1/nodes/kn/steps", "application/json", body,
	                     strlen(body), NULL, &r),
	                 202);
	snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	for (i = 0; i < 300 && !done; i++) {
		assert_int_equal(call(&s2, s2.admin, "GET", path, &r, NULL), 200);
		done = !strcmp(jstr(step(r.json, "two"), "state"), "running");
		reply_free(&r);
		if (!done)
			usleep(100000);
	}
	assert_true(done);
	server_stop(&s2, SIGKILL);
	/* The step ends while no server is up; the agent keeps its report until one is. */
	sh("touch %s", flag);
	usleep(500000);
	server_start(&s2, dir, args);
	j = wait_job(&s2, id, 120);
	if (strcmp(jstr(j, "state"), "succeeded") != 0)
		fail_msg("job %s: %s", jstr(j, "state"), json_dumps(j, 0));
	json_decref(j);
	assert_int_equal(call(&s2, s2.admin, "GET", path, &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(step(r.json, "one"), "runs")), 1);
	assert_int_equal(json_integer_value(json_object_get(step(r.json, "two"), "runs")), 1);
	assert_int_equal(json_integer_value(json_object_get(step(r.json, "three"), "runs")), 1);
	reply_free(&r);
	snprintf(path, sizeof path, "%s/ran", n.dir);
	assert_string_equal(slurp(path, buf, sizeof buf), "one\ntwo\nthree\n");
	/* The restart is on record. */
	assert_int_equal(call(&s2, s2.admin, "GET", "/v1/events?action=job.interrupted", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	node_down(&n);
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
}

/* The server's SSH key is refused, and rackpilotd does not start, when others can read it. */
static void
test_server_key_permissions(void **state)
{
	struct server s3;
	char key[400], log[400], buf[4096];
	pid_t pid;
	int status;

	(void)state;
	server_start(&s3, NULL, NULL);
	server_stop(&s3, SIGTERM);
	snprintf(key, sizeof key, "%s/ssh/id_ed25519", s3.dir);
	{
		struct stat sb;

		assert_int_equal(stat(key, &sb), 0);
		assert_int_equal(sb.st_mode & 077, 0);
	}
	assert_int_equal(chmod(key, 0644), 0);
	snprintf(log, sizeof log, "%s.refused", s3.dir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 2);
		dup2(fd, 1);
		execl(rp_test_bin, rp_test_bin, "--listen", "127.0.0.1:0", "--data-dir", s3.dir,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	assert_non_null(strstr(slurp(log, buf, sizeof buf), "readable by others"));
	unlink(log);
	server_cleanup(&s3);
}

/* One plan for every node with a tag, as one batch; nodes that cannot take it are listed. */
static void
test_bulk_steps(void **state)
{
	char body[1024], path[400], batch[200];
	struct reply r;
	int i, done = 0;
	json_t *skipped;

	(void)state;
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/sn00", &r, "{s:[s]}", "tags", "blk"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/sn01", &r, "{s:[s]}", "tags", "blk"),
	                 200);
	reply_free(&r);
	make_node(&S, "{s:s, s:[s]}", "name", "nossh", "tags", "blk");
	snprintf(body, sizeof body,
	         "{\"selector\":{\"tag\":\"blk\"},\"steps\":[{\"id\":\"mark\",\"type\":\"shell\","
	         "\"command\":\"echo marked >> %s/marks\"}]}",
	         workdir);
	assert_int_equal(req(&S, S.admin, "POST", "/v1/actions/steps", "application/json", body,
	                     strlen(body), NULL, &r),
	                 202);
	assert_int_equal(json_integer_value(json_object_get(r.json, "jobs")), 2);
	skipped = json_object_get(r.json, "skipped");
	assert_int_equal(json_array_size(skipped), 1);
	assert_string_equal(jstr(json_array_get(skipped, 0), "node"), "nossh");
	snprintf(batch, sizeof batch, "/v1/batches/%s", jstr(r.json, "id"));
	reply_free(&r);
	for (i = 0; i < 600 && !done; i++) {
		assert_int_equal(call(&S, S.admin, "GET", batch, &r, NULL), 200);
		done = json_is_true(json_object_get(r.json, "done"));
		if (done)
			assert_int_equal(json_integer_value(json_object_get(
			                         json_object_get(r.json, "counts"), "succeeded")),
			                 2);
		reply_free(&r);
		usleep(100000);
	}
	assert_true(done);
	/* One job per node, each ran its step once. */
	snprintf(path, sizeof path, "/v1/jobs?batch=%s", strrchr(batch, '/') + 1);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	assert_string_not_equal(jstr(json_array_get(json_object_get(r.json, "items"), 0), "node"),
	                        jstr(json_array_get(json_object_get(r.json, "items"), 1), "node"));
	reply_free(&r);
	{
		char buf[256];

		snprintf(path, sizeof path, "%s/marks", workdir);
		assert_string_equal(slurp(path, buf, sizeof buf), "marked\nmarked\n");
	}
	/* Bad bulk requests queue nothing. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/steps", &r, "{s:[{s:s}]}", "steps",
	                      "type", "inventory"),
	                 400);
	assert_error(&r, 400, "MISSING_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/steps", &r, "{s:{s:s}, s:[{s:s}]}",
	                      "selector", "tag", "nosuchtag", "steps", "type", "inventory"),
	                 400);
	assert_error(&r, 400, "BAD_REQUEST");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/actions/steps", &r,
	                      "{s:{s:[s]}, s:[{s:s}]}", "selector", "nodes", "nossh", "steps",
	                      "type", "inventory"),
	                 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
}

/* An impostor at the node's address (another host key) gets no plan. */
static void
test_host_key_change_refused(void **state)
{
	char id[64], body[1024], path[400];
	json_t *j;
	struct reply r;

	(void)state;
	sh("%s/tests/ssh/sshnode.sh rekey %s", rp_test_src, n1.dir);
	snprintf(body, sizeof body,
	         "{\"steps\":[{\"id\":\"m\",\"type\":\"shell\",\"command\":\"touch %s/leaked\"}]}",
	         n1.dir);
	submit("sn01", body, id, sizeof id);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "failed");
	assert_string_equal(jstr(json_object_get(j, "error"), "code"), "ssh_host_key");
	assert_non_null(strstr(jstr(json_object_get(j, "error"), "message"), "host key mismatch"));
	/* Failed at once: no retries against an impostor. */
	assert_int_equal(json_integer_value(json_object_get(j, "attempts")), 1);
	json_decref(j);
	snprintf(path, sizeof path, "%s/leaked", n1.dir);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(call(&S, S.admin, "GET",
	                      "/v1/events?node=sn01&action=node.host_key_mismatch", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
}

static void
test_agent_token_scoped_to_node(void **state)
{
	char tok0[128], id[64], path[300], body[512];
	struct reply r;
	json_t *j;

	(void)state;
	agent_token(&n0, tok0, sizeof tok0);
	/* A job of node sn01 (already ended; the point is whose it is). */
	j = NULL;
	snprintf(body, sizeof body,
	         "{\"steps\":[{\"id\":\"x\",\"type\":\"shell\",\"command\":\"true\"}]}");
	submit("sn01", body, id, sizeof id);
	snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/x", id);
	assert_int_equal(call(&S, tok0, "POST", path, &r, "{s:s, s:i}", "state", "succeeded",
	                      "exit_code", 0),
	                 403);
	assert_error(&r, 403, "FORBIDDEN");
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/agent/jobs/%s", id);
	assert_int_equal(call(&S, tok0, "GET", path, &r, NULL), 403);
	reply_free(&r);
	/* Nothing changed in sn01's job because of it. */
	j = wait_job(&S, id, 60);
	json_decref(j);
	j = get_job(id);
	assert_int_equal(json_integer_value(json_object_get(step(j, "x"), "runs")) <= 1, 1);
	json_decref(j);
	/* Agent tokens open nothing outside /v1/agent. */
	assert_int_equal(call(&S, tok0, "GET", "/v1/nodes/sn01", &r, NULL), 403);
	reply_free(&r);
	assert_int_equal(call(&S, tok0, "GET", "/v1/nodes", &r, NULL), 403);
	reply_free(&r);
	/* And an API token is no agent token. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/agent/heartbeat", &r, "{}"), 403);
	reply_free(&r);
}

static void
test_output_capped(void **state)
{
	char id[64];
	json_t *j, *s;

	(void)state;
	/* 10 MB of output: the step keeps its last 64 KiB, the job log its first 8 MiB. */
	submit("sn00",
	       "{\"steps\":[{\"id\":\"big\",\"type\":\"shell\",\"command\":\"head -c 10000000 "
	       "/dev/zero | "
	       "tr '\\\\0' 'x'; echo; echo the-end\"}]}",
	       id, sizeof id);
	j = wait_job(&S, id, 120);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	j = get_job(id);
	s = step(j, "big");
	assert_true(json_string_length(json_object_get(s, "output")) <= 65536);
	assert_true(json_string_length(json_object_get(s, "output")) > 60000);
	assert_true(json_is_true(json_object_get(s, "output_truncated")));
	assert_int_equal(json_integer_value(json_object_get(s, "output_bytes")), 10000000 + 1 + 8);
	assert_non_null(strstr(jstr(s, "output"), "the-end"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "log"), "bytes")),
	                 8 << 20);
	assert_true(json_integer_value(json_object_get(json_object_get(j, "log"), "dropped")) >
	            1000000);
	json_decref(j);
}

static void
test_reboot_step(void **state)
{
	char id[64], body[1024], path[400], before[80], after[80];
	json_t *j;

	(void)state;
	snprintf(path, sizeof path, "%s/root/proc/sys/kernel/random/boot_id", n0.dir);
	slurp(path, before, sizeof before);
	snprintf(body, sizeof body,
	         "{\"steps\":[{\"id\":\"pre\",\"type\":\"shell\",\"command\":\"echo pre >> "
	         "%s/boots\"},"
	         "{\"id\":\"reboot\",\"type\":\"reboot\",\"timeout_s\":60},"
	         "{\"id\":\"post\",\"type\":\"shell\",\"command\":\"echo post >> %s/boots\"}]}",
	         n0.dir, n0.dir);
	submit("sn00", body, id, sizeof id);
	j = wait_job(&S, id, 90);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	slurp(path, after, sizeof after);
	assert_string_not_equal(before, after);
	j = get_job(id);
	assert_string_equal(jstr(step(j, "reboot"), "state"), "succeeded");
	assert_int_equal(json_integer_value(json_object_get(step(j, "pre"), "runs")), 1);
	assert_int_equal(json_integer_value(json_object_get(step(j, "post"), "runs")), 1);
	/* Waiting for the node to come back counts as no attempt. */
	assert_int_equal(json_integer_value(json_object_get(j, "attempts")), 1);
	json_decref(j);
	{
		char buf[128];

		snprintf(path, sizeof path, "%s/boots", n0.dir);
		assert_string_equal(slurp(path, buf, sizeof buf), "pre\npost\n");
	}
}

/* Steps that download: a firmware tool run on a verified image, an OS image streamed to a
 * "device" (a file here), and the same with a wrong digest, served by a real HTTP server. */
static void
test_downloads(void **state)
{
	char srv[300], img[400], dev[400], body[4096], id[64], sum[80], cmd[700], buf[128];
	int port = port_base + 2, i;
	pid_t http;
	json_t *j;
	FILE *p;

	(void)state;
	snprintf(srv, sizeof srv, "%s/www", workdir);
	snprintf(img, sizeof img, "%s/disk.img", srv);
	sh("mkdir -p %s && head -c 3000000 /dev/urandom > %s", srv, img);
	snprintf(cmd, sizeof cmd, "sha256sum %s | cut -c1-64", img);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(sum, sizeof sum, p));
	pclose(p);
	sum[strcspn(sum, "\n")] = '\0';
	http = fork();
	assert_true(http >= 0);
	if (http == 0) {
		char ps[16];

		snprintf(ps, sizeof ps, "%d", port);
		freopen("/dev/null", "w", stderr);
		execlp("python3", "python3", "-m", "http.server", "--bind", "127.0.0.1",
		       "--directory", srv, ps, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 100 && sh_rc("curl -sf -o /dev/null http://127.0.0.1:%d/disk.img", port);
	     i++)
		usleep(100000);
	snprintf(dev, sizeof dev, "%s/fake-disk", n0.dir);
	sh("head -c 4000000 /dev/zero > %s", dev);
	snprintf(body, sizeof body,
	         "{\"steps\":["
	         "{\"id\":\"fw\",\"type\":\"firmware\",\"image_url\":\"http://127.0.0.1:%d/"
	         "disk.img\","
	         "\"sha256\":\"%s\",\"command\":\"cmp ${image} %s && echo flashed\"},"
	         "{\"id\":\"os\",\"type\":\"image\",\"url\":\"http://127.0.0.1:%d/disk.img\","
	         "\"sha256\":\"%s\",\"device\":\"%s\"}]}",
	         port, sum, img, port, sum, dev);
	submit("sn00", body, id, sizeof id);
	j = wait_job(&S, id, 120);
	if (strcmp(jstr(j, "state"), "succeeded") != 0)
		fail_msg("download job: %s", json_dumps(j, 0));
	json_decref(j);
	j = get_job(id);
	assert_non_null(strstr(jstr(step(j, "fw"), "output"), "flashed"));
	json_decref(j);
	assert_int_equal(sh_rc("cmp -n 3000000 %s %s", img, dev), 0);
	/* A wrong digest: the firmware tool never runs on the image, and the job says why. */
	snprintf(body, sizeof body,
	         "{\"steps\":["
	         "{\"id\":\"fw\",\"type\":\"bios\",\"image_url\":\"http://127.0.0.1:%d/disk.img\","
	         "\"sha256\":\"%064d\",\"command\":\"touch %s/ran-bios\"}]}",
	         port, 0, n0.dir);
	submit("sn00", body, id, sizeof id);
	j = wait_job(&S, id, 120);
	assert_string_equal(jstr(j, "state"), "failed");
	json_decref(j);
	j = get_job(id);
	snprintf(buf, sizeof buf, "%s", jstr(step(j, "fw"), "error"));
	json_decref(j);
	if (strstr(buf, "sha256") == NULL && strstr(buf, "digest") == NULL)
		fail_msg("error does not name the digest: %s", buf);
	snprintf(cmd, sizeof cmd, "%s/ran-bios", n0.dir);
	assert_int_not_equal(access(cmd, F_OK), 0);
	kill(http, SIGTERM);
	waitpid(http, NULL, 0);
}

static void
test_recipe(void **state)
{
	char id[64], body[1024], path[400], buf[256];
	struct reply r;
	json_t *j;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/recipes", &r,
	                      "{s:s, s:{s:{s:b}, s:{s:s}}, s:[{s:s, s:s, s:s}, {s:s, s:s}]}",
	                      "name", "stamp", "params", "dir", "required", 1, "word", "default",
	                      "hello", "steps", "type", "file", "path", "${dir}/stamp", "content",
	                      "${word} from ${dir}", "type", "shell", "command",
	                      "cat ${dir}/stamp > ${dir}/stamp.copy; echo $HOME > /dev/null"),
	                 201);
	reply_free(&r);
	/* Arguments must fit the recipe. */
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/nodes/sn00/steps", &r, "{s:s}", "recipe", "stamp"),
	        400);
	assert_error(&r, 400, "MISSING_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/sn00/steps", &r, "{s:s, s:{s:s}}",
	                      "recipe", "stamp", "args", "dir", "relative"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	snprintf(body, sizeof body, "{\"recipe\":\"stamp\",\"args\":{\"dir\":\"%s\"}}", n0.dir);
	submit("sn00", body, id, sizeof id);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	assert_string_equal(jstr(json_object_get(j, "params"), "recipe"), "stamp");
	json_decref(j);
	snprintf(path, sizeof path, "%s/stamp.copy", n0.dir);
	snprintf(body, sizeof body, "hello from %s", n0.dir);
	assert_string_equal(slurp(path, buf, sizeof buf), body);
}

static void
test_cancel_running_plan(void **state)
{
	char id[64], path[400], body[800];
	struct reply r;
	json_t *j;

	(void)state;
	snprintf(body, sizeof body,
	         "{\"steps\":[{\"id\":\"long\",\"type\":\"shell\",\"command\":\"sleep 120\"},"
	         "{\"id\":\"after\",\"type\":\"shell\",\"command\":\"touch %s/after\"}]}",
	         n0.dir);
	submit("sn00", body, id, sizeof id);
	wait_step(id, "long", "running");
	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 202);
	reply_free(&r);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "cancelled");
	json_decref(j);
	j = get_job(id);
	assert_string_equal(jstr(step(j, "long"), "state"), "failed");
	assert_string_equal(jstr(step(j, "after"), "state"), "skipped");
	json_decref(j);
	snprintf(path, sizeof path, "%s/after", n0.dir);
	assert_int_not_equal(access(path, F_OK), 0);
}

/* A 'running' report sent again after its answer was lost (rackpilotd stopped between its
 * commit and its reply, and the agent retried) is the same start: it counts one run, not two.
 * A report of another run, or one without a run (an older agent), counts a new start. */
static void
test_running_report_retried(void **state)
{
	static const char r1[] = "0b9f2c1e-5a4d-4e21-9c3b-000000000001";
	char atok[128], id[64], path[400], body[1200], flag[400];
	struct reply r;
	json_t *j;

	(void)state;
	agent_token(&n0, atok, sizeof atok);
	snprintf(flag, sizeof flag, "%s/retried-go", n0.dir);
	snprintf(body, sizeof body,
	         "{\"steps\":[{\"id\":\"w\",\"type\":\"shell\",\"command\":\"while [ ! -f "
	         "%s ]; do sleep 0.1; done\"}]}",
	         flag);
	submit("sn00", body, id, sizeof id);
	wait_step(id, "w", "running");
	j = get_job(id);
	assert_int_equal(json_integer_value(json_object_get(step(j, "w"), "runs")), 1);
	json_decref(j);
	snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/w", id);
	assert_int_equal(
	        call(&S, atok, "POST", path, &r, "{s:s, s:s}", "state", "running", "run", r1), 204);
	reply_free(&r);
	assert_int_equal(
	        call(&S, atok, "POST", path, &r, "{s:s, s:s}", "state", "running", "run", r1), 204);
	reply_free(&r);
	j = get_job(id);
	assert_int_equal(json_integer_value(json_object_get(step(j, "w"), "runs")), 2);
	json_decref(j);
	assert_int_equal(call(&S, atok, "POST", path, &r, "{s:s}", "state", "running"), 204);
	reply_free(&r);
	/* A run that is no UUID is refused and counts nothing. */
	assert_int_equal(
	        call(&S, atok, "POST", path, &r, "{s:s, s:s}", "state", "running", "run", "again"),
	        400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	j = get_job(id);
	assert_int_equal(json_integer_value(json_object_get(step(j, "w"), "runs")), 3);
	json_decref(j);
	sh("touch %s", flag);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	j = get_job(id);
	assert_string_equal(jstr(step(j, "w"), "state"), "succeeded");
	assert_int_equal(json_integer_value(json_object_get(step(j, "w"), "runs")), 3);
	json_decref(j);
}

/* Every bad request is a 4xx with an error body, and no job appears. */
static void
test_bad_input(void **state)
{
	static const struct {
		const char *body;
		long status;
		const char *code;
	} cases[] = {
	        {"{}", 400, "MISSING_FIELD"},
	        {"{\"steps\":[]}", 400, "INVALID_FIELD"},
	        {"{\"steps\":[{\"type\":\"telnet\"}]}", 400, "INVALID_FIELD"},
	        {"{\"steps\":[{\"type\":\"shell\"}]}", 400, "MISSING_FIELD"},
	        {"{\"steps\":[{\"type\":\"shell\",\"command\":\"x\",\"bogus\":1}]}", 400,
	         "UNKNOWN_FIELD"},
	        {"{\"steps\":[{\"type\":\"file\",\"path\":\"/x\"}]}", 400, "MISSING_FIELD"},
	        {"{\"steps\":[{\"type\":\"image\",\"url\":\"http://h/"
	         "i\",\"device\":\"sda\",\"sha256\":"
	         "\"0000000000000000000000000000000000000000000000000000000000000000\"}]}",
	         400, "INVALID_FIELD"},
	        {"{\"steps\":[{\"type\":\"shell\",\"command\":\"x\"}],\"recipe\":\"stamp\"}", 400,
	         "BAD_REQUEST"},
	        {"{\"recipe\":\"nope\"}", 400, "INVALID_FIELD"},
	        {"{\"steps\":[{\"type\":\"shell\",\"command\":\"x\"}],\"args\":{}}", 400,
	         "BAD_REQUEST"},
	        {"{\"steps\":[{\"type\":\"shell\",\"command\":\"x\"}],\"when\":\"now\"}", 400,
	         "UNKNOWN_FIELD"},
	        {"[1]", 400, "BAD_REQUEST"},
	};
	struct reply r;
	long before = count_all(&S, "/v1/jobs?type=steps");
	size_t i;
	char tok[128];

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long st = req(&S, S.admin, "POST", "/v1/nodes/sn00/steps", "application/json",
		              cases[i].body, strlen(cases[i].body), NULL, &r);

		if (st != cases[i].status)
			fail_msg("%s: %ld %s", cases[i].body, st, r.body ? r.body : "");
		assert_error(&r, cases[i].status, cases[i].code);
		reply_free(&r);
	}
	/* Unknown node; a node without a pinned key or address; a node in maintenance. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/ghost/steps", &r, "{s:[{s:s, s:s}]}",
	                      "steps", "type", "shell", "command", "true"),
	                 404);
	assert_error(&r, 404, "NOT_FOUND");
	reply_free(&r);
	make_node(&S, "{s:s}", "name", "bare");
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/bare/steps", &r, "{s:[{s:s, s:s}]}",
	                      "steps", "type", "shell", "command", "true"),
	                 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/sn01", &r, "{s:b, s:s}",
	                      "maintenance", 1, "maintenance_reason", "rma"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/sn01/steps", &r, "{s:[{s:s, s:s}]}",
	                      "steps", "type", "shell", "command", "true"),
	                 409);
	assert_error(&r, 409, "INVALID_STATE");
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/sn01", &r, "{s:b}", "maintenance", 0), 200);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/jobs?type=steps"), before);

	/* Bootstrap tokens, registration, host keys. */
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", "ghost"),
	        400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:i}", "expires_in_s", 5),
	        400);
	reply_free(&r);
	bootstrap("bare", tok, sizeof tok);
	assert_int_equal(call(&S, tok, "POST", "/v1/agent/register", &r, "{s:i, s:[s], s:s}",
	                      "format", 1, "macs", "02:00:00:00:99:01", "ssh_host_key",
	                      "ssh-ed25519 AAAAnotakey"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, tok, "POST", "/v1/agent/register", &r, "{s:i, s:[], s:s}",
	                      "format", 1, "macs", "ssh_host_key", "x"),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, tok, "POST", "/v1/agent/register", &r, "{s:i, s:[s], s:s}",
	                      "format", 2, "macs", "02:00:00:00:99:01", "ssh_host_key", "x"),
	                 400);
	reply_free(&r);
	/* A MAC that belongs to another node than the token's. */
	{
		char line[400], hk[300];

		snprintf(line, sizeof line, "%s/hostkey.pub", n0.dir);
		slurp(line, hk, sizeof hk);
		hk[strcspn(hk, "\n")] = '\0';
		assert_int_equal(call(&S, tok, "POST", "/v1/agent/register", &r,
		                      "{s:i, s:[s], s:s}", "format", 1, "macs", n0.mac,
		                      "ssh_host_key", hk),
		                 409);
		assert_error(&r, 409, "CONFLICT");
		reply_free(&r);
	}
	/* None of that used the token up or changed the node. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/bare", &r, NULL), 200);
	assert_true(json_is_null(json_object_get(r.json, "agent")));
	reply_free(&r);
	assert_int_equal(call(&S, "rpb_not-a-real-token-at-all", "POST", "/v1/agent/register", &r,
	                      "{s:i, s:[s], s:s}", "format", 1, "macs", "02:00:00:00:99:01",
	                      "ssh_host_key", "x"),
	                 401);
	assert_error(&r, 401, "UNAUTHORIZED");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/bare/ssh-host-key", &r, "{s:s}", "key",
	                      "ssh-rsa notbase64!"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/nodes/bare/ssh-host-key", &r, NULL), 404);
	reply_free(&r);
	/* Step reports from an agent: bad bodies and unknown steps. */
	{
		char atok[128], id[64], path[300];

		agent_token(&n0, atok, sizeof atok);
		submit("sn00",
		       "{\"steps\":[{\"id\":\"r\",\"type\":\"shell\",\"command\":\"true\"}]}", id,
		       sizeof id);
		json_decref(wait_job(&S, id, 60));
		snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/r", id);
		assert_int_equal(call(&S, atok, "POST", path, &r, "{s:s}", "state", "done"), 400);
		assert_error(&r, 400, "INVALID_FIELD");
		reply_free(&r);
		/* The job ended: a late report changes nothing. */
		assert_int_equal(call(&S, atok, "POST", path, &r, "{s:s}", "state", "failed"), 409);
		assert_error(&r, 409, "INVALID_STATE");
		reply_free(&r);
		snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/nope", id);
		assert_int_equal(call(&S, atok, "POST", path, &r, "{s:s}", "state", "failed"), 404);
		reply_free(&r);
		json_t *j = get_job(id);

		assert_string_equal(jstr(step(j, "r"), "state"), "succeeded");
		json_decref(j);
	}
}

/* The node's view of its sockets: the agent reads /proc/net/tcp{,6} under its root, like every
 * /proc file, and a fixture root has no /proc/net, so the live one goes there (unless
 * sshnode.sh put it there already); off takes away only a link this made. */
static void
live_proc_net(struct node *n, int on)
{
	static int made;
	char path[400];

	snprintf(path, sizeof path, "%s/root/proc/net", n->dir);
	if (on && access(path, F_OK) != 0) {
		sh("ln -s /proc/net %s", path);
		made = 1;
	} else if (!on && made) {
		sh("rm -f %s", path);
		made = 0;
	}
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A shell step with ready_port: the server listens after a second, for `hold` seconds, and
 * writes marker (then "listening") only once it listens. */
static void
ready_plan(struct node *n, const char *sid, int port, const char *marker, double hold, int listens,
           char *id, size_t len)
{
	char body[2048], py[400];

	snprintf(py, sizeof py, "%s/listen.py", n->dir);
	sh("printf '%%s\\n' 'import socket, sys, time' 's = socket.socket()' "
	   "'s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)' "
	   "'s.bind((\"127.0.0.1\", int(sys.argv[1])))' 's.listen()' "
	   "'open(sys.argv[2], \"w\").write(\"up\")' 'print(\"listening\", flush=True)' "
	   "'time.sleep(float(sys.argv[3]))' > %s",
	   py);
	if (listens)
		snprintf(body, sizeof body,
		         "{\"steps\":[{\"id\":\"%s\",\"type\":\"shell\",\"ready_port\":%d,"
		         "\"command\":\"sleep 1; exec python3 %s %d %s %.1f\"}]}",
		         sid, port, py, port, marker, hold);
	else
		snprintf(body, sizeof body,
		         "{\"steps\":[{\"id\":\"%s\",\"type\":\"shell\",\"ready_port\":%d,"
		         "\"command\":\"sleep %.1f; echo done\"}]}",
		         sid, port, hold);
	submit(n->name, body, id, len);
}

/* A network test's server side as a step: the step's progress becomes {"ready": true} while it
 * still runs, never before its port listens, and stays after it ends. A report that says
 * "ready": "yes" is refused and changes nothing. */
static void
test_ready_port(void **state)
{
	char id[64], marker[400], path[300], atok[128], want[64];
	int port = free_ports(1), i, seen = 0;
	long long t_run = 0;
	json_t *j, *s, *p, *ready = json_pack("{s:b}", "ready", 1);
	struct reply r;

	(void)state;
	live_proc_net(&n0, 1);
	snprintf(marker, sizeof marker, "%s/listening", n0.dir);
	unlink(marker);
	ready_plan(&n0, "srv", port, marker, 3, 1, id, sizeof id);
	for (i = 0; i < 400 && !seen; i++) {
		j = get_job(id);
		s = step(j, "srv");
		p = json_object_get(s, "progress");
		if (t_run == 0 && !strcmp(jstr(s, "state"), "running"))
			t_run = now_ms();
		if (json_is_object(p)) {
			int w;

			/* Only once the listener is up (the command sleeps 1 s before it listens;
			 * the marker follows listen() at once, though a loaded machine may run this
			 * look first), and while the step still runs. */
			if (t_run == 0 || now_ms() - t_run < 800)
				fail_msg("ready before the port listens: %s", json_dumps(p, 0));
			for (w = 0; w < 200 && access(marker, F_OK) != 0; w++)
				usleep(10000);
			if (access(marker, F_OK) != 0)
				fail_msg("ready, but nothing listens: %s", json_dumps(p, 0));
			assert_true(json_equal(p, ready));
			assert_string_equal(jstr(s, "state"), "running");
			seen = 1;
		} else {
			assert_true(json_is_null(p));
		}
		json_decref(j);
		if (!seen)
			usleep(25000);
	}
	if (!seen)
		fail_msg("step srv of job %s never became ready", id);

	/* Hostile: ready must be a boolean, and progress has no other members. */
	agent_token(&n0, atok, sizeof atok);
	snprintf(path, sizeof path, "/v1/agent/jobs/%s/steps/srv", id);
	assert_int_equal(call(&S, atok, "POST", path, &r, "{s:s, s:{s:s}}", "state", "running",
	                      "progress", "ready", "yes"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, atok, "POST", path, &r, "{s:s, s:{s:b, s:i}}", "state", "running",
	                      "progress", "ready", 1, "port", port),
	                 400);
	reply_free(&r);

	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	j = get_job(id);
	s = step(j, "srv");
	assert_string_equal(jstr(s, "state"), "succeeded");
	assert_int_equal(json_integer_value(json_object_get(s, "runs")), 1);
	assert_true(json_equal(json_object_get(s, "progress"), ready));
	snprintf(want, sizeof want, "port %d is listening: ready", port);
	assert_non_null(strstr(jstr(s, "output"), want));
	assert_true(strstr(jstr(s, "output"), "listening\n") < strstr(jstr(s, "output"), want));
	json_decref(j);

	/* A command that never listens ends without ready. */
	ready_plan(&n0, "quiet", port, marker, 1.5, 0, id, sizeof id);
	j = wait_job(&S, id, 60);
	assert_string_equal(jstr(j, "state"), "succeeded");
	json_decref(j);
	j = get_job(id);
	s = step(j, "quiet");
	assert_string_equal(jstr(s, "state"), "succeeded");
	assert_true(json_is_null(json_object_get(s, "progress")));
	assert_null(strstr(jstr(s, "output"), "ready"));
	json_decref(j);

	/* The API's plan check: ready_port is a shell step's, 1-65535. */
	{
		static const char *const bad[] = {
		        "{\"steps\":[{\"type\":\"shell\",\"command\":\"x\",\"ready_port\":0}]}",
		        "{\"steps\":[{\"type\":\"shell\",\"command\":\"x\",\"ready_port\":65536}]}",
		        "{\"steps\":[{\"type\":\"shell\",\"command\":\"x\",\"ready_port\":\"5201\"}"
		        "]}",
		        "{\"steps\":[{\"type\":\"file\",\"path\":\"/x\",\"content\":\"\","
		        "\"ready_port\":5201}]}",
		        "{\"steps\":[{\"type\":\"reboot\",\"ready_port\":5201}]}",
		};
		size_t k;

		for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
			long st = req(&S, S.admin, "POST", "/v1/nodes/sn00/steps",
			              "application/json", bad[k], strlen(bad[k]), NULL, &r);

			if (st != 400)
				fail_msg("%s: %ld %s", bad[k], st, r.body ? r.body : "");
			assert_error(&r, 400, "INVALID_FIELD");
			assert_string_equal(
			        jstr(json_object_get(json_object_get(r.json, "error"), "detail"),
			             "field"),
			        "steps[0].ready_port");
			reply_free(&r);
		}
	}
	live_proc_net(&n0, 0);
	json_decref(ready);
}

/* A machine nobody enrolled registers with a discovery token and becomes a node. */
static void
test_discovery(void **state)
{
	struct node d;
	struct reply r;
	char path[200];

	(void)state;
	node_up(&d, 7, 0);
	snprintf(path, sizeof path, "/v1/nodes/discovered-0252500007%s", "01");
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	assert_string_equal(jstr(r.json, "provision_state"), "discovered");
	assert_string_equal(json_string_value(json_array_get(json_object_get(r.json, "macs"), 0)),
	                    d.mac);
	assert_non_null(json_object_get(json_object_get(r.json, "ssh"), "host_key"));
	reply_free(&r);
	node_down(&d);
}

static int
setup(void **state)
{
	char *p;

	group_setup(state);
	snprintf(workdir, sizeof workdir, "/tmp/rp-steps-XXXXXX");
	p = mkdtemp(workdir);
	assert_non_null(p);
	port_base = free_ports(3);
	node_up(&n0, 0, 1);
	node_up(&n1, 1, 1);
	return 0;
}

static int
teardown(void **state)
{
	node_down(&n0);
	node_down(&n1);
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s", workdir);
	return group_teardown(state);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_register_pins_host_key),
	        cmocka_unit_test(test_plan_runs_end_to_end),
	        cmocka_unit_test(test_failing_step_stops_plan),
	        cmocka_unit_test(test_resume_after_sshd_dies),
	        cmocka_unit_test(test_resume_after_agent_dies),
	        cmocka_unit_test(test_server_killed_mid_plan),
	        cmocka_unit_test(test_server_key_permissions),
	        cmocka_unit_test(test_agent_token_scoped_to_node),
	        cmocka_unit_test(test_bulk_steps),
	        cmocka_unit_test(test_host_key_change_refused),
	        cmocka_unit_test(test_output_capped),
	        cmocka_unit_test(test_reboot_step),
	        cmocka_unit_test(test_downloads),
	        cmocka_unit_test(test_recipe),
	        cmocka_unit_test(test_cancel_running_plan),
	        cmocka_unit_test(test_running_report_retried),
	        cmocka_unit_test(test_bad_input),
	        cmocka_unit_test(test_ready_port),
	        cmocka_unit_test(test_discovery),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
