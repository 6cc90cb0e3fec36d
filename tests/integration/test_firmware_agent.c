/*
 * Firmware method `agent` end to end: a firmware_update job runs the baseline's flasher recipe
 * as a child steps job through a simulated node's real sshd and rackpilot-agent
 * (tests/ssh/sshnode.sh). The agent downloads the image from a real HTTP server standing in
 * for boot_url, checks its sha256, runs a fake flasher that rewrites the node's DMI BIOS
 * version, and the recipe's inventory step reports the new version back. kill -9 while the
 * flasher runs: the restarted job follows the same child job; one flash, one child.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef RP_TEST_AGENT
#error "RP_TEST_AGENT (path of rackpilot-agent) must be defined"
#endif

#define NODE  "fa00"
#define IMAGE "bios_2.0.0.bin"

static char workdir[256], conf[400], nodedir[400], www[400], sum[80], listen_at[64];
/* A fixed port: the agent's configuration names the server, across a restart too. */
static const char *const args[] = {"-c", conf, "--listen", listen_at, NULL};
static int port_base;
static pid_t http = -1;

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static json_t *
get(const char *path)
{
	struct reply r;
	json_t *j;

	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	j = json_incref(r.json);
	reply_free(&r);
	return j;
}

/* The stored version of a component of the node ("" when none). */
static void
stored_version(const char *component, char *buf, size_t len)
{
	json_t *fw = get("/v1/nodes/" NODE "/firmware"), *c;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(json_object_get(fw, "components"), i, c)
	{
		if (!strcmp(str(c, "component"), component))
			snprintf(buf, len, "%s", str(c, "version"));
	}
	json_decref(fw);
}

/* The DMI BIOS version the simulated node's firmware reports. */
static void
dmi_version(char *buf, size_t len)
{
	char path[500];

	snprintf(path, sizeof path, "%s/root/sys/class/dmi/id/bios_version", nodedir);
	slurp(path, buf, len);
	buf[strcspn(buf, "\r\n")] = '\0';
}

static long
flashes(void)
{
	char path[500], buf[4096];
	const char *p;
	long n = 0;

	snprintf(path, sizeof path, "%s/flashes", nodedir);
	if (access(path, F_OK) != 0)
		return 0;
	for (p = slurp(path, buf, sizeof buf); *p; p++)
		n += *p == '\n';
	return n;
}

/* Jobs of type steps for the node. */
static size_t
steps_jobs(void)
{
	json_t *l = get("/v1/jobs?node=" NODE "&type=steps&limit=100");
	size_t n = json_array_size(json_object_get(l, "items"));

	json_decref(l);
	return n;
}

static json_t *
update(void)
{
	struct reply r;
	char id[64];

	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/" NODE "/firmware/update", &r, NULL),
	                 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	return wait_job(&S, id, 180);
}

/* The flasher fails and the version stays: the job fails with the flasher's reason. */
static void
test_failing_flasher(void **state)
{
	char v[64], flag[500];
	json_t *j;

	(void)state;
	snprintf(flag, sizeof flag, "%s/fail", nodedir);
	sh("touch %s", flag);
	j = update();
	if (strcmp(str(j, "state"), "failed") != 0)
		fail_msg("expected failed: %s", json_dumps(j, 0));
	assert_string_equal(str(json_object_get(j, "error"), "code"), "update_failed");
	if (strstr(str(json_object_get(j, "error"), "message"), "flasher recipe") == NULL ||
	    strstr(str(json_object_get(j, "error"), "message"), "dmi.bios") == NULL ||
	    strstr(str(json_object_get(j, "error"), "message"), "SPI write failed") == NULL)
		fail_msg("the error does not say why: %s", json_dumps(j, 0));
	json_decref(j);
	assert_int_equal(flashes(), 0);
	dmi_version(v, sizeof v);
	assert_string_equal(v, "1.0.0");
	stored_version("dmi.bios", v, sizeof v);
	assert_string_equal(v, "1.0.0");
	assert_int_equal(steps_jobs(), 1);
	sh("rm -f %s", flag);
}

/* One flash through the agent; the version the agent reports afterwards is the target. */
static void
test_flash_succeeds(void **state)
{
	char v[64];
	json_t *j, *res;

	(void)state;
	j = update();
	if (strcmp(str(j, "state"), "succeeded") != 0)
		fail_msg("expected succeeded: %s", json_dumps(j, 0));
	res = json_object_get(j, "result");
	assert_int_equal(json_array_size(json_object_get(res, "updated")), 1);
	assert_string_equal(str(json_array_get(json_object_get(res, "updated"), 0), "component"),
	                    "dmi.bios");
	assert_string_equal(str(json_array_get(json_object_get(res, "updated"), 0), "from"),
	                    "1.0.0");
	assert_string_equal(str(json_object_get(res, "versions"), "dmi.bios"), "2.0.0");
	json_decref(j);
	assert_int_equal(flashes(), 1);
	dmi_version(v, sizeof v);
	assert_string_equal(v, "2.0.0");
	stored_version("dmi.bios", v, sizeof v);
	assert_string_equal(v, "2.0.0");
	assert_int_equal(steps_jobs(), 2);
}

/* At target: a repeated update skips it, queues no flasher job and flashes nothing. */
static void
test_repeat_skips(void **state)
{
	json_t *j, *res;

	(void)state;
	j = update();
	if (strcmp(str(j, "state"), "succeeded") != 0)
		fail_msg("expected succeeded: %s", json_dumps(j, 0));
	res = json_object_get(j, "result");
	assert_int_equal(json_array_size(json_object_get(res, "updated")), 0);
	assert_string_equal(json_string_value(json_array_get(json_object_get(res, "skipped"), 0)),
	                    "dmi.bios");
	json_decref(j);
	assert_int_equal(flashes(), 1);
	assert_int_equal(steps_jobs(), 2);
}

/* rackpilotd dies while the flasher runs; after the restart the job follows the child it
 * recorded: no second steps job, one flash, and the new version is verified. */
static void
test_killed_mid_flash(void **state)
{
	char hold[500], v[64], id[64], dir[256];
	struct reply r;
	json_t *j, *l;
	int i, running = 0;

	(void)state;
	snprintf(hold, sizeof hold, "%s/hold", nodedir);
	sh("touch %s", hold);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/fa-base", &r,
	                      "{s:{s:s}}", "components", "dmi.bios", "3.0.0"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/" NODE "/firmware/update", &r, NULL),
	                 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	/* Wait for the flasher to be running on the node (its child job is the newest). */
	for (i = 0; i < 600 && !running; i++) {
		l = get("/v1/jobs?node=" NODE "&type=steps&limit=1");
		j = json_array_get(json_object_get(l, "items"), 0);
		running = steps_jobs() == 3 && !strcmp(str(j, "state"), "running");
		json_decref(l);
		if (!running)
			usleep(100000);
	}
	assert_true(running);
	usleep(500000);
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGKILL);
	sh("rm -f %s", hold);
	server_start(&S, dir, args);
	j = wait_job(&S, id, 180);
	if (strcmp(str(j, "state"), "succeeded") != 0)
		fail_msg("expected succeeded after the restart: %s", json_dumps(j, 0));
	assert_string_equal(
	        str(json_object_get(json_object_get(j, "result"), "versions"), "dmi.bios"),
	        "3.0.0");
	json_decref(j);
	assert_int_equal(flashes(), 2);
	assert_int_equal(steps_jobs(), 3);
	dmi_version(v, sizeof v);
	assert_string_equal(v, "3.0.0");
}

/* A firmware rollout of the agent-method component, gated on version_match: the gate reads the
 * version the agent reported after the flash, the node passes, the rollout completes; a
 * second rollout finds the node at target and skips it. */
static void
test_rollout_version_match(void **state)
{
	char v[64], id[64], path[200];
	struct reply r;
	json_t *ro = NULL, *n;
	int i;

	(void)state;
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/fa-base", &r,
	                      "{s:{s:s}}", "components", "dmi.bios", "4.0.0"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:[s]}, s:{s:i}, s:{s:i, s:i, s:[s]}}", "kind", "firmware",
	                      "selector", "nodes", NODE, "waves", "canary", 1, "gate", "wait_s", 0,
	                      "timeout_s", 60, "require", "version_match"),
	                 201);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/rollouts/%s", id);
	for (i = 0; i < 900; i++) {
		ro = get(path);
		if (!strcmp(str(ro, "state"), "completed") || !strcmp(str(ro, "state"), "paused"))
			break;
		json_decref(ro);
		ro = NULL;
		usleep(200000);
	}
	assert_non_null(ro);
	n = json_array_get(json_object_get(ro, "nodes"), 0);
	if (strcmp(str(ro, "state"), "completed") || strcmp(str(n, "state"), "succeeded"))
		fail_msg("%s", json_dumps(ro, 0));
	json_decref(ro);
	assert_int_equal(flashes(), 3);
	dmi_version(v, sizeof v);
	assert_string_equal(v, "4.0.0");
	stored_version("dmi.bios", v, sizeof v);
	assert_string_equal(v, "4.0.0");
	/* At target now: no node needs a rollout (409, the node listed as skipped at target). */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/rollouts", &r,
	                      "{s:s, s:{s:[s]}, s:{s:[s]}}", "kind", "firmware", "selector",
	                      "nodes", NODE, "gate", "require", "version_match"),
	                 409);
	if (!strstr(r.body, "at target") || !strstr(r.body, NODE))
		fail_msg("%s", r.body);
	reply_free(&r);
	assert_int_equal(flashes(), 3);
}

/* The node's "BIOS": Name=Value lines in DIR/bios.txt, changed by a vendor-like tool. */
static json_t *
bios_job(const char *body)
{
	struct reply r;
	char id[64];

	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/" NODE "/bios/apply", &r,
	                      body ? "{s:s}" : NULL, "profile", body),
	                 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	return wait_job(&S, id, 180);
}

static void
node_bios(char *buf, size_t len)
{
	char path[500];

	snprintf(path, sizeof path, "%s/bios.txt", nodedir);
	slurp(path, buf, len);
}

/* BIOS profile method agent: the vendor tool recipe runs through the agent, its bios step
 * reports what the BIOS holds afterwards, and that is what the job checks and the store keeps. */
static void
test_bios_agent(void **state)
{
	char tool[500], body[4096], bios[1024], hold[500], id[64], dir[256];
	size_t jobs0 = steps_jobs();
	struct reply r;
	json_t *j, *l, *d;
	int i, running = 0;
	FILE *f;

	(void)state;
	snprintf(tool, sizeof tool, "%s/biostool.sh", workdir);
	f = fopen(tool, "w");
	assert_non_null(f);
	/* apply FILE: merge Name=Value lines (ignoring names listed in DIR/drop); dump: print. */
	fprintf(f,
	        "#!/bin/sh\n"
	        "set -e\n"
	        "B=%s/bios.txt\n"
	        "case \"$1\" in\n"
	        "apply)\n"
	        "  while [ -f %s/hold ]; do sleep 0.1; done\n"
	        "  echo applied >> %s/bios-applies\n"
	        "  while IFS== read -r k v; do\n"
	        "    [ -n \"$k\" ] || continue\n"
	        "    grep -qx \"$k\" %s/drop 2>/dev/null && continue\n"
	        "    grep -v \"^$k=\" $B > $B.new || true; echo \"$k=$v\" >> $B.new; mv $B.new $B\n"
	        "  done < \"$2\";;\n"
	        "dump) echo '# vendor tool 1.2' ; cat $B; echo 'dumped' >&2;;\n"
	        "*) echo \"usage: biostool apply FILE | dump\" >&2; exit 2;;\n"
	        "esac\n",
	        nodedir, nodedir, nodedir, nodedir);
	fclose(f);
	sh("chmod +x %s && printf 'SriovSupport=Disabled\\nNumaNodesPerSocket=NPS1\\n"
	   "ProcCoreDisable=0\\n' > %s/bios.txt",
	   tool, nodedir);
	snprintf(body, sizeof body,
	         "{\"name\":\"bios-tool\",\"params\":{\"settings\":{\"required\":true},"
	         "\"profile\":{}},\"steps\":["
	         "{\"id\":\"write\",\"type\":\"file\",\"path\":\"%s/pending.txt\","
	         "\"content\":\"${settings}\"},"
	         "{\"id\":\"set\",\"type\":\"bios\",\"command\":\"%s apply %s/pending.txt\"},"
	         "{\"id\":\"read\",\"type\":\"bios\",\"command\":\"%s dump\","
	         "\"report\":true}]}",
	         nodedir, tool, nodedir, tool);
	if (req(&S, S.admin, "POST", "/v1/recipes", "application/json", body, strlen(body), NULL,
	        &r) != 201)
		fail_msg("recipe: %ld %s", r.status, r.body ? r.body : "");
	reply_free(&r);

	/* Bad profiles: 400, nothing stored. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:s}",
	                      "name", "p1", "node_class", "fa", "method", "agent"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:s, s:s}",
	                      "name", "p1", "node_class", "fa", "method", "agent", "recipe",
	                      "no-such-recipe"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:s}",
	                      "name", "p1", "node_class", "fa", "recipe", "bios-tool"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s, s:s}",
	                      "name", "p1", "node_class", "fa", "method", "ipmitool"),
	                 400);
	reply_free(&r);

	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r,
	                      "{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:i}}", "name", "fa-bios",
	                      "node_class", "fa", "method", "agent", "recipe", "bios-tool",
	                      "attributes", "SriovSupport", "Enabled", "NumaNodesPerSocket", "NPS4",
	                      "ProcCoreDisable", 2),
	                 201);
	assert_string_equal(str(r.json, "method"), "agent");
	assert_string_equal(str(r.json, "recipe"), "bios-tool");
	reply_free(&r);

	j = bios_job(NULL);
	if (strcmp(str(j, "state"), "succeeded") != 0)
		fail_msg("expected succeeded: %s", json_dumps(j, 0));
	assert_int_equal(json_array_size(json_object_get(json_object_get(j, "result"), "changed")),
	                 3);
	json_decref(j);
	node_bios(bios, sizeof bios);
	if (!strstr(bios, "SriovSupport=Enabled") || !strstr(bios, "NumaNodesPerSocket=NPS4") ||
	    !strstr(bios, "ProcCoreDisable=2"))
		fail_msg("the node's BIOS: %s", bios);
	assert_int_equal(steps_jobs(), jobs0 + 1);
	/* The store holds what the agent read, a number where the tool printed digits. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/" NODE "/bios", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(r.json, "in_sync")));
	d = json_object_get(json_object_get(r.json, "actual"), "ProcCoreDisable");
	assert_string_equal(str(d, "source"), "agent");
	assert_int_equal(json_integer_value(json_object_get(d, "value")), 2);
	reply_free(&r);

	/* In sync: skipped, no recipe run. */
	j = bios_job(NULL);
	assert_string_equal(str(j, "state"), "succeeded");
	assert_true(json_is_true(json_object_get(json_object_get(j, "result"), "skipped")));
	json_decref(j);
	assert_int_equal(steps_jobs(), jobs0 + 1);

	/* The BIOS ignores one setting: the job names exactly it. */
	sh("echo NumaNodesPerSocket > %s/drop", nodedir);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/bios/profiles/fa-bios", &r,
	                      "{s:{s:s, s:s}}", "attributes", "NumaNodesPerSocket", "NPS2",
	                      "SriovSupport", "Disabled"),
	                 200);
	reply_free(&r);
	j = bios_job(NULL);
	if (strcmp(str(j, "state"), "failed") != 0 ||
	    strcmp(str(json_object_get(j, "error"), "code"), "bios_not_applied") != 0 ||
	    !strstr(str(json_object_get(j, "error"), "message"), "NumaNodesPerSocket") ||
	    strstr(str(json_object_get(j, "error"), "message"), "SriovSupport"))
		fail_msg("%s", json_dumps(j, 0));
	json_decref(j);
	node_bios(bios, sizeof bios);
	assert_non_null(strstr(bios, "SriovSupport=Disabled"));
	assert_non_null(strstr(bios, "NumaNodesPerSocket=NPS4"));
	sh("rm -f %s/drop", nodedir);

	/* kill -9 while the tool runs: the restarted job follows the same child; one apply. */
	snprintf(hold, sizeof hold, "%s/hold", nodedir);
	sh("touch %s && rm -f %s/bios-applies", hold, nodedir);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/" NODE "/bios/apply", &r, NULL), 202);
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	reply_free(&r);
	for (i = 0; i < 600 && !running; i++) {
		l = get("/v1/jobs?node=" NODE "&type=steps&limit=1");
		running = steps_jobs() == jobs0 + 3 &&
		          !strcmp(str(json_array_get(json_object_get(l, "items"), 0), "state"),
		                  "running");
		json_decref(l);
		if (!running)
			usleep(100000);
	}
	assert_true(running);
	usleep(300000);
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGKILL);
	sh("rm -f %s", hold);
	server_start(&S, dir, args);
	j = wait_job(&S, id, 180);
	if (strcmp(str(j, "state"), "succeeded") != 0)
		fail_msg("expected succeeded after the restart: %s", json_dumps(j, 0));
	json_decref(j);
	assert_int_equal(steps_jobs(), jobs0 + 3);
	node_bios(bios, sizeof bios);
	assert_non_null(strstr(bios, "NumaNodesPerSocket=NPS2"));
	{
		char path[500], buf[256];
		const char *p;
		int n = 0;

		snprintf(path, sizeof path, "%s/bios-applies", nodedir);
		for (p = slurp(path, buf, sizeof buf); *p; p++)
			n += *p == '\n';
		assert_int_equal(n, 1);
	}
}

static int
setup(void **state)
{
	char tok[128], img[500], cmd[700], flasher[500], body[2048];
	struct reply r;
	FILE *f;
	int http_port, i;

	(void)state;
	snprintf(workdir, sizeof workdir, "/tmp/rp-fwagent-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	port_base = 25000 + getpid() % 2000;
	http_port = port_base + 1;
	snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", port_base + 2);

	/* boot_url: a real HTTP server with the image at /boot/images/NAME. */
	snprintf(www, sizeof www, "%s/www", workdir);
	snprintf(img, sizeof img, "%s/boot/images/%s", www, IMAGE);
	sh("mkdir -p %s/boot/images && head -c 100000 /dev/urandom > %s", www, img);
	snprintf(cmd, sizeof cmd, "sha256sum %s | cut -c1-64", img);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(sum, sizeof sum, f));
	pclose(f);
	sum[strcspn(sum, "\n")] = '\0';
	http = fork();
	assert_true(http >= 0);
	if (http == 0) {
		char ps[16];

		snprintf(ps, sizeof ps, "%d", http_port);
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(127);
		execlp("python3", "python3", "-m", "http.server", "--bind", "127.0.0.1",
		       "--directory", www, ps, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 100 && sh_rc("curl -sf -o /dev/null http://127.0.0.1:%d/boot/images/%s",
	                             http_port, IMAGE);
	     i++)
		usleep(100000);

	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", workdir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\nboot_url = http://127.0.0.1:%d\n",
	        http_port);
	fclose(f);
	server_start(&S, NULL, args);
	sh("curl -sf -o /dev/null -X PUT -H 'Authorization: Bearer %s' --data-binary @%s "
	   "'%s/v1/images/%s?kind=firmware'",
	   S.admin, img, S.base, IMAGE);

	/* The node: a fake BMC (no Redfish inventory) and an agent behind a real sshd, with a
	 * DMI BIOS version of 1.0.0. */
	make_node(&S, "{s:s, s:s, s:[s], s:{s:s}}", "name", NODE, "node_class", "fa", "macs",
	          "02:52:50:00:a0:01", "bmc", "driver", "fake");
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", NODE), 201);
	snprintf(tok, sizeof tok, "%s", str(r.json, "token"));
	reply_free(&r);
	snprintf(nodedir, sizeof nodedir, "%s/%s", workdir, NODE);
	sh("%s/tests/ssh/sshnode.sh start %s 127.0.1.60 %d %s %s 02:52:50:00:a0:01 %s", rp_test_src,
	   nodedir, port_base, S.base, tok, RP_TEST_AGENT);
	sh("mkdir -p %s/root/sys/class/dmi/id && echo 1.0.0 > "
	   "%s/root/sys/class/dmi/id/bios_version",
	   nodedir, nodedir);
	sh("%s -c %s/agent.conf register >> %s/agent.log 2>&1", RP_TEST_AGENT, nodedir, nodedir);

	/* The flasher: fails while DIR/fail exists, else counts and "flashes" the version. */
	snprintf(flasher, sizeof flasher, "%s/flash.sh", workdir);
	f = fopen(flasher, "w");
	assert_non_null(f);
	fprintf(f,
	        "#!/bin/sh\n"
	        "set -e\n"
	        "[ -s \"$1\" ] || { echo \"flash tool: no image\" >&2; exit 2; }\n"
	        "if [ -f %s/fail ]; then echo 'flash tool: SPI write failed at 0x1000' >&2; exit "
	        "5; fi\n"
	        "while [ -f %s/hold ]; do sleep 0.1; done\n"
	        "echo \"$2\" >> %s/flashes\n"
	        "echo \"$2\" > %s/root/sys/class/dmi/id/bios_version\n",
	        nodedir, nodedir, nodedir, nodedir);
	fclose(f);
	sh("chmod +x %s", flasher);
	snprintf(body, sizeof body,
	         "{\"name\":\"bios-flash\",\"params\":{"
	         "\"component\":{},\"version\":{\"required\":true},"
	         "\"image_url\":{\"required\":true},\"sha256\":{\"required\":true}},"
	         "\"steps\":["
	         "{\"id\":\"flash\",\"type\":\"firmware\",\"image_url\":\"${image_url}\","
	         "\"sha256\":\"${sha256}\",\"command\":\"%s ${image} ${version}\"},"
	         "{\"id\":\"inv\",\"type\":\"inventory\"}]}",
	         flasher);
	if (req(&S, S.admin, "POST", "/v1/recipes", "application/json", body, strlen(body), NULL,
	        &r) != 201)
		fail_msg("recipe: %ld %s", r.status, r.body ? r.body : "");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s, s:s, s:s}}}", "name", "fa-base",
	                      "node_class", "fa", "components", "dmi.bios", "version", "2.0.0",
	                      "image", IMAGE, "method", "agent", "recipe", "bios-flash"),
	                 201);
	reply_free(&r);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, nodedir);
	if (http > 0) {
		kill(http, SIGTERM);
		waitpid(http, NULL, 0);
	}
	server_stop(&S, SIGTERM);
	server_cleanup(&S);
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s", workdir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_failing_flasher),
	        cmocka_unit_test(test_flash_succeeds),
	        cmocka_unit_test(test_repeat_skips),
	        cmocka_unit_test(test_killed_mid_flash),
	        cmocka_unit_test(test_rollout_version_match),
	        cmocka_unit_test(test_bios_agent),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
