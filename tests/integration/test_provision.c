/*
 * The lifecycle and network boot, against real peers short of a VM: each node is a real sshd +
 * rackpilot-agent (tests/ssh/sshnode.sh) whose BMC is the fake driver. The test plays the
 * machine's firmware: it fetches /boot/ipxe like iPXE would, takes the bootstrap token from
 * the script's kernel line and hands it to the agent, which registers like the ramdisk does.
 * The QEMU end-to-end test (tests/e2e) does the same with a real firmware and kernel.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#ifndef RP_TEST_AGENT
#error "RP_TEST_AGENT (path of rackpilot-agent) must be defined"
#endif

static char workdir[256], hosts[300];
static int port;

struct node {
	char name[32], dir[300], addr[32], mac[20];
	int started;
};

/* GET /boot/ipxe?mac= as iPXE would; the script into buf. */
static void
ipxe(const char *mac, char *buf, size_t len)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/boot/ipxe?mac=%s", mac);
	assert_int_equal(req(&S, NULL, "GET", path, NULL, NULL, 0, NULL, &r), 200);
	assert_non_null(strstr(r.ctype, "text/plain"));
	snprintf(buf, len, "%s", r.body);
	reply_free(&r);
}

/* The bootstrap token in a ramdisk script, or "" when it boots locally. */
static void
token_of(const char *script, char *tok, size_t len)
{
	const char *p = strstr(script, "rackpilot.token=");

	tok[0] = '\0';
	if (p) {
		p += strlen("rackpilot.token=");
		snprintf(tok, len, "%.*s", (int)strcspn(p, " \n"), p);
	}
}

static void
make(struct node *n, int i)
{
	snprintf(n->name, sizeof n->name, "pv%02d", i);
	snprintf(n->dir, sizeof n->dir, "%s/%s", workdir, n->name);
	snprintf(n->addr, sizeof n->addr, "127.0.3.%d", 10 + i);
	snprintf(n->mac, sizeof n->mac, "02:70:00:00:%02x:01", i);
	make_node(&S, "{s:s, s:[s], s:{s:s, s:{s:i}}}", "name", n->name, "macs", n->mac, "bmc",
	          "driver", "fake", "options", "delay_ms", 0);
}

static json_t *node_get(const char *name);

/* A real machine boots only once the job has power-cycled it: wait for the job to wait for
 * the agent (an earlier registration is rightly ignored as stale). */
static void
wait_agent_phase(const char *name)
{
	int i;

	for (i = 0; i < 600; i++) {
		json_t *n = node_get(name);
		const char *job = json_string_value(json_object_get(n, "provision_job"));
		char path[200];
		struct reply r;
		int ok = 0;

		if (job != NULL) {
			snprintf(path, sizeof path, "/v1/jobs/%s", job);
			assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
			ok = json_is_string(json_object_get(r.json, "phase")) &&
			     !strcmp(json_string_value(json_object_get(r.json, "phase")),
			             "wait_agent");
			reply_free(&r);
		}
		json_decref(n);
		if (ok)
			return;
		usleep(100000);
	}
	fail_msg("%s: the job never waited for its agent", name);
}

/* The machine boots the script it gets: when it is the ramdisk, its agent registers with
 * the script's token. Returns the agent's exit status. */
static int
boot(struct node *n)
{
	char script[2048], tok[128];

	wait_agent_phase(n->name);
	ipxe(n->mac, script, sizeof script);
	token_of(script, tok, sizeof tok);
	if (tok[0] == '\0')
		fail_msg("%s got no ramdisk: %s", n->name, script);
	if (!n->started) {
		sh("%s/tests/ssh/sshnode.sh start %s %s %d %s %s %s %s", rp_test_src, n->dir,
		   n->addr, port, S.base, tok, n->mac, RP_TEST_AGENT);
		n->started = 1;
	} else {
		sh("sed -i 's/^bootstrap_token = .*/bootstrap_token = %s/' %s/agent.conf", tok,
		   n->dir);
	}
	return sh_rc("%s -c %s/agent.conf register >> %s/agent.log 2>&1", RP_TEST_AGENT, n->dir,
	             n->dir);
}

static json_t *
node_get(const char *name)
{
	char path[200];
	struct reply r;
	json_t *j;

	snprintf(path, sizeof path, "/v1/nodes/%s", name);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	j = json_incref(r.json);
	reply_free(&r);
	return j;
}

/* Wait until the node's provision_state is want (fails the test on another end state). */
static json_t *
wait_state(const char *name, const char *want, int timeout_s)
{
	int i;

	for (i = 0; i < timeout_s * 10; i++) {
		json_t *n = node_get(name);
		const char *st = jstr(n, "provision_state");

		if (!strcmp(st, want))
			return n;
		if (strstr(st, "failed") && !strstr(want, "failed"))
			fail_msg("%s: %s (%s)", name, st, jstr(n, "provision_error") ?: "");
		json_decref(n);
		usleep(100000);
	}
	fail_msg("%s never became %s", name, want);
	return NULL;
}

static long
act(const char *name, const char *body, struct reply *r)
{
	char path[200];

	snprintf(path, sizeof path, "/v1/nodes/%s/provision", name);
	return req(&S, S.admin, "PUT", path, "application/json", body, strlen(body), NULL, r);
}

static void
act_ok(const char *name, const char *body, long want)
{
	struct reply r;
	long st = act(name, body, &r);

	if (st != want)
		fail_msg("%s %s: %ld %s", name, body, st, r.body ? r.body : "");
	reply_free(&r);
}

static void
upload(const char *name, const char *kind, const char *file)
{
	char cmd[1200];

	snprintf(cmd, sizeof cmd,
	         "curl -sf -o /dev/null -X PUT -H 'Authorization: Bearer %s' --data-binary @%s "
	         "'%s/v1/images/%s?kind=%s'",
	         S.admin, file, S.base, name, kind);
	sh("%s", cmd);
}

/* ---- Tests ------------------------------------------------------------------------------- */

static struct node a, b, c;
static struct mock M; /* pv02's BMC: a Redfish mock */
static char conf[400];
static const char *args[] = {"-c", conf, NULL};

static void
test_boot_scripts(void **state)
{
	char script[2048], tok[128];
	struct reply r;

	(void)state;
	/* Enrolled: the local disk. */
	ipxe(a.mac, script, sizeof script);
	assert_non_null(strstr(script, "#!ipxe"));
	assert_non_null(strstr(script, "booting from the local disk"));
	token_of(script, tok, sizeof tok);
	assert_string_equal(tok, "");
	/* The MAC may come in any spelling. */
	ipxe("02-70-00-00-00-01", script, sizeof script);
	assert_non_null(strstr(script, "pv00"));
	/* Unknown: the discovery ramdisk with a token for that MAC only. */
	ipxe("02:70:00:00:ee:01", script, sizeof script);
	assert_non_null(strstr(script, "unknown machine"));
	assert_non_null(strstr(script, "kernel "));
	assert_non_null(
	        strstr(script, "/boot/images/agent-kernel initrd=agent-initrd console=ttyS0"));
	token_of(script, tok, sizeof tok);
	assert_int_equal(strncmp(tok, "rpb_", 4), 0);
	/* Bad requests. */
	assert_int_equal(req(&S, NULL, "GET", "/boot/ipxe", NULL, NULL, 0, NULL, &r), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(req(&S, NULL, "GET", "/boot/ipxe?mac=zz:zz", NULL, NULL, 0, NULL, &r),
	                 400);
	reply_free(&r);
}

static void
test_discovery_flood_capped(void **state)
{
	char script[2048], tok[128], mac[32];
	int i, ramdisks = 0;

	(void)state;
	/* discovery_max_tokens = 3 (one is live from the previous test). */
	for (i = 0; i < 6; i++) {
		snprintf(mac, sizeof mac, "02:71:00:00:00:%02x", i);
		ipxe(mac, script, sizeof script);
		token_of(script, tok, sizeof tok);
		ramdisks += tok[0] != '\0';
	}
	assert_int_equal(ramdisks, 2);
	assert_non_null(strstr(script, "being discovered already"));
	/* The same MAC asking again replaces its own token: no new slot taken. */
	ipxe("02:70:00:00:ee:01", script, sizeof script);
	token_of(script, tok, sizeof tok);
	assert_true(tok[0] != '\0');
}

static void
test_images(void **state)
{
	struct reply r;
	char path[400], buf[64];
	const char *h[2] = {NULL, NULL};

	(void)state;
	/* Range requests on the kernel (100000 random bytes, see setup). */
	h[0] = "Range: bytes=10-19";
	assert_int_equal(req(&S, NULL, "GET", "/boot/images/agent-kernel", NULL, NULL, 0, h, &r),
	                 206);
	assert_int_equal(r.len, 10);
	snprintf(path, sizeof path, "%s/kernel.bin", workdir);
	{
		FILE *f = fopen(path, "rb");

		assert_non_null(f);
		assert_int_equal(fseek(f, 10, SEEK_SET), 0);
		assert_int_equal(fread(buf, 1, 10, f), 10);
		fclose(f);
	}
	assert_memory_equal(r.body, buf, 10);
	reply_free(&r);
	h[0] = "Range: bytes=-5";
	assert_int_equal(req(&S, NULL, "GET", "/boot/images/agent-kernel", NULL, NULL, 0, h, &r),
	                 206);
	assert_int_equal(r.len, 5);
	reply_free(&r);
	h[0] = "Range: bytes=100000-";
	assert_int_equal(req(&S, NULL, "GET", "/boot/images/agent-kernel", NULL, NULL, 0, h, &r),
	                 416);
	reply_free(&r);
	assert_int_equal(req(&S, NULL, "GET", "/boot/images/agent-kernel", NULL, NULL, 0, NULL, &r),
	                 200);
	assert_int_equal(r.len, 100000);
	reply_free(&r);
	/* Only registered images, by name: no path reaches the file system. */
	assert_int_equal(
	        req(&S, NULL, "GET", "/boot/images/..%2fadmin.token", NULL, NULL, 0, NULL, &r),
	        404);
	reply_free(&r);
	assert_int_equal(req(&S, NULL, "GET", "/boot/images/admin.token", NULL, NULL, 0, NULL, &r),
	                 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/images", &r, "{s:s, s:s, s:s}", "name", "x",
	                      "kind", "other", "file", "../admin.token"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	/* A mismatching digest keeps nothing. */
	snprintf(path, sizeof path,
	         "/v1/images/"
	         "bad?kind=os&sha256="
	         "0000000000000000000000000000000000000000000000000000000000000000");
	assert_int_equal(
	        req(&S, S.admin, "PUT", path, "application/octet-stream", "hello", 5, NULL, &r),
	        400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/images/bad", &r, NULL), 404);
	reply_free(&r);
	snprintf(path, sizeof path, "%s/images/bad", S.dir);
	assert_int_not_equal(access(path, F_OK), 0);
	/* A name taken; a kind unknown; an image in use. */
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/images/agent-kernel?kind=kernel",
	                     "application/octet-stream", "hello", 5, NULL, &r),
	                 409);
	reply_free(&r);
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/images/y?kind=floppy",
	                     "application/octet-stream", "hello", 5, NULL, &r),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/images/agent-kernel", &r, NULL), 409);
	assert_error(&r, 409, "IN_USE");
	reply_free(&r);
	/* Register a file put in the image directory by hand. */
	sh("printf abc > %s/images/by-hand.bin", S.dir);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/images", &r, "{s:s, s:s, s:s, s:s}", "name",
	                      "by-hand", "kind", "firmware", "file", "by-hand.bin", "sha256",
	                      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	                 201);
	assert_int_equal(json_integer_value(json_object_get(r.json, "size")), 3);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/images/by-hand", &r, NULL), 204);
	reply_free(&r);
	snprintf(path, sizeof path, "%s/images/by-hand.bin", S.dir);
	assert_int_not_equal(access(path, F_OK), 0);
}

static void
test_dnsmasq_hosts(void **state)
{
	char buf[4096];
	int i;

	(void)state;
	/* rackpilotd rewrites the file within a tick of a MAC change. */
	for (i = 0; i < 50 && !strstr(slurp(hosts, buf, sizeof buf), "02:70:00:00:01:01"); i++)
		usleep(100000);
	assert_non_null(strstr(buf, "02:70:00:00:00:01,pv00\n"));
	assert_non_null(strstr(buf, "02:70:00:00:01:01,pv01\n"));
	{
		struct reply r;

		assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/pv01", &r, "{s:[s, s]}",
		                      "macs", b.mac, "02:70:00:00:01:02"),
		                 200);
		reply_free(&r);
	}
	for (i = 0; i < 50 && !strstr(slurp(hosts, buf, sizeof buf), "02:70:00:00:01:02"); i++)
		usleep(100000);
	assert_non_null(strstr(buf, "02:70:00:00:01:02,pv01\n"));
}

/* enrolled -> manageable -> commissioning -> ready -> deploying -> deployed, with the agent. */
static void
test_lifecycle(void **state)
{
	struct reply r;
	char disk[400], img[400], buf[700], path[200], script[2048], tok[128];
	json_t *n;

	(void)state;
	/* Out of order: 409 with what is allowed. */
	assert_int_equal(act("pv00", "{\"action\":\"release\"}", &r), 409);
	assert_error(&r, 409, "INVALID_STATE");
	assert_string_equal(
	        json_string_value(json_array_get(
	                json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                                "allowed"),
	                0)),
	        "manage");
	reply_free(&r);
	act_ok("pv00", "{\"action\":\"manage\"}", 202);
	json_decref(wait_state("pv00", "manageable", 60));
	act_ok("pv00", "{\"action\":\"commission\",\"timeout_s\":120}", 202);
	assert_int_equal(boot(&a), 0);
	n = wait_state("pv00", "ready", 120);
	assert_true(json_is_null(json_object_get(n, "provision_error")));
	/* The job powered it off, and the node says so without waiting for a sweep. */
	assert_string_equal(jstr(n, "power_state"), "off");
	assert_non_null(json_object_get(json_object_get(n, "ssh"), "host_key"));
	json_decref(n);
	/* The inventory came from the agent. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/pv00/inventory", &r, NULL), 200);
	assert_string_equal(jstr(r.json, "source"), "agent");
	reply_free(&r);
	/* The node boots locally again, and its used token opens nothing. */
	ipxe(a.mac, script, sizeof script);
	assert_non_null(strstr(script, "local disk"));
	assert_int_not_equal(sh_rc("%s -c %s/agent.conf register >> %s/agent.log 2>&1",
	                           RP_TEST_AGENT, a.dir, a.dir),
	                     0);
	/* ... and the operator sees the attempt. */
	assert_int_equal(call(&S, S.admin, "GET",
	                      "/v1/events?node=pv00&action=bootstrap_token.refused", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	assert_non_null(strstr(jstr(json_array_get(json_object_get(r.json, "items"), 0), "summary"),
	                       "already used"));
	reply_free(&r);

	/* Deploy an OS image to a "disk" (a file: nothing of this machine is touched). */
	snprintf(img, sizeof img, "%s/os1.img", workdir);
	sh("head -c 2000000 /dev/urandom > %s", img);
	upload("os1", "os", img);
	snprintf(disk, sizeof disk, "%s/disk0", a.dir);
	sh("head -c 3000000 /dev/zero > %s", disk);
	snprintf(buf, sizeof buf, "{\"action\":\"deploy\",\"image\":\"os1\",\"disk\":\"%s\"}",
	         disk);
	act_ok("pv00", buf, 202);
	assert_int_equal(boot(&a), 0);
	n = wait_state("pv00", "deployed", 120);
	assert_string_equal(jstr(n, "deployed_image"), "os1");
	assert_string_equal(jstr(n, "power_state"), "on");
	json_decref(n);
	assert_int_equal(sh_rc("cmp -n 2000000 %s %s", img, disk), 0);
	/* The job went through its phases and left its steps. */
	{
		json_t *jobs;

		assert_int_equal(
		        call(&S, S.admin, "GET", "/v1/jobs?node=pv00&type=deploy", &r, NULL), 200);
		jobs = json_object_get(r.json, "items");
		assert_int_equal(json_array_size(jobs), 1);
		assert_string_equal(jstr(json_array_get(jobs, 0), "state"), "succeeded");
		snprintf(path, sizeof path, "/v1/jobs/%s", jstr(json_array_get(jobs, 0), "id"));
		reply_free(&r);
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		assert_string_equal(jstr(r.json, "phase"), "wait_boot");
		assert_string_equal(
		        jstr(json_array_get(json_object_get(r.json, "steps"), 0), "state"),
		        "succeeded");
		reply_free(&r);
	}
	/* Deployed: it boots from its disk. */
	ipxe(a.mac, script, sizeof script);
	token_of(script, tok, sizeof tok);
	assert_string_equal(tok, "");
	/* Every transition is an event. */
	assert_int_equal(call(&S, S.admin, "GET",
	                      "/v1/events?node=pv00&action=node.provision&limit=100", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 6);
	reply_free(&r);
}

/* An image whose file no longer matches its sha256 is refused before the node is touched. */
static void
test_corrupt_image(void **state)
{
	char disk[400], body[600], path[400];
	struct reply r;
	json_t *n;

	(void)state;
	act_ok("pv01", "{\"action\":\"manage\"}", 202);
	json_decref(wait_state("pv01", "manageable", 60));
	act_ok("pv01", "{\"action\":\"commission\",\"timeout_s\":120}", 202);
	assert_int_equal(boot(&b), 0);
	json_decref(wait_state("pv01", "ready", 120));
	/* os1's file changes behind rackpilotd's back (same size, other bytes). */
	snprintf(path, sizeof path, "%s/images/os1", S.dir);
	sh("printf X | dd of=%s bs=1 seek=1000 conv=notrunc 2>/dev/null", path);
	snprintf(disk, sizeof disk, "%s/disk0", b.dir);
	sh("head -c 3000000 /dev/zero > %s", disk);
	snprintf(body, sizeof body, "{\"action\":\"deploy\",\"image\":\"os1\",\"disk\":\"%s\"}",
	         disk);
	act_ok("pv01", body, 202);
	n = wait_state("pv01", "deploy_failed", 60);
	assert_non_null(strstr(jstr(n, "provision_error"), "does not match its sha256"));
	assert_non_null(strstr(jstr(n, "provision_error"), "nothing was written"));
	json_decref(n);
	assert_int_equal(sh_rc("cmp -n 3000000 %s /dev/zero", disk), 0);
	/* No boot script asked the agent in: the node never left the state before PXE. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/jobs?node=pv01&type=deploy", &r, NULL), 200);
	assert_string_equal(jstr(json_array_get(json_object_get(r.json, "items"), 0), "phase"),
	                    "verify_image");
	reply_free(&r);
}

/* A node that never calls back fails its commission, with the reason. */
static void
test_timeout_and_abort(void **state)
{
	struct reply r;
	json_t *n;

	(void)state;
	make_node(&S, "{s:s, s:[s], s:{s:s}}", "name", "silent", "macs", "02:70:00:00:99:01", "bmc",
	          "driver", "fake");
	act_ok("silent", "{\"action\":\"manage\"}", 202);
	json_decref(wait_state("silent", "manageable", 60));
	act_ok("silent", "{\"action\":\"commission\",\"timeout_s\":30}", 202);
	n = wait_state("silent", "commission_failed", 90);
	assert_non_null(strstr(jstr(n, "provision_error"), "did not register within 30 s"));
	json_decref(n);
	/* Abort: the running job stops, the node says why. */
	act_ok("silent", "{\"action\":\"commission\",\"timeout_s\":600}", 202);
	assert_int_equal(act("silent", "{\"action\":\"abort\"}", &r), 202);
	reply_free(&r);
	n = wait_state("silent", "commission_failed", 30);
	assert_string_equal(jstr(n, "provision_error"), "aborted");
	json_decref(n);
	/* Nothing left to abort. */
	assert_int_equal(act("silent", "{\"action\":\"abort\"}", &r), 409);
	assert_error(&r, 409, "INVALID_STATE");
	reply_free(&r);
	/* Maintenance stops automation: a running job ends at its next look, with the reason... */
	act_ok("silent", "{\"action\":\"commission\",\"timeout_s\":600}", 202);
	wait_agent_phase("silent");
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/silent", &r, "{s:b, s:s}",
	                      "maintenance", 1, "maintenance_reason", "reseating GPU 3"),
	                 200);
	reply_free(&r);
	n = wait_state("silent", "commission_failed", 30);
	assert_non_null(strstr(jstr(n, "provision_error"), "maintenance: reseating GPU 3"));
	json_decref(n);
	/* ... and no new one starts. */
	assert_int_equal(act("silent", "{\"action\":\"commission\"}", &r), 409);
	assert_error(&r, 409, "INVALID_STATE");
	reply_free(&r);
}

/* kill -9 while a commission waits for its agent: after the restart the same job goes on
 * from its recorded phase (wait_agent: the BMC is not asked again) and the node gets ready,
 * with the firmware inventory its Redfish BMC reports. */
static void
test_kill9_mid_commission(void **state)
{
	char dir[256], job[64], path[200];
	struct reply r;
	json_t *n;

	(void)state;
	act_ok("pv02", "{\"action\":\"manage\"}", 202);
	json_decref(wait_state("pv02", "manageable", 60));
	act_ok("pv02", "{\"action\":\"commission\",\"timeout_s\":120}", 202);
	wait_agent_phase("pv02");
	n = node_get("pv02");
	snprintf(job, sizeof job, "%s", jstr(n, "provision_job"));
	json_decref(n);
	snprintf(dir, sizeof dir, "%s", S.dir);
	server_stop(&S, SIGKILL);
	server_start(&S, dir, args);
	/* The machine, power-cycled before the crash, boots now and registers. */
	assert_int_equal(boot(&c), 0);
	json_decref(wait_state("pv02", "ready", 120));
	snprintf(path, sizeof path, "/v1/jobs/%s", job);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	assert_string_equal(jstr(r.json, "state"), "succeeded");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/jobs?node=pv02&type=commission", &r, NULL),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	assert_string_equal(jstr(json_array_get(json_object_get(r.json, "items"), 0), "id"), job);
	reply_free(&r);
	/* The BMC was told PXE once and powered on, and off at the end, with no second cycle:
	 * one boot event. */
	{
		json_t *st = mock_get(&M, 0, "/__mock/state");

		assert_int_equal(json_array_size(json_object_get(st, "boots")), 1);
		assert_string_equal(
		        jstr(json_array_get(json_object_get(st, "boots"), 0), "booted_from"),
		        "Pxe");
		assert_string_equal(jstr(st, "power"), "Off");
		json_decref(st);
	}
	/* Commissioning read the firmware and BIOS the BMC reports. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/pv02/firmware", &r, NULL), 200);
	{
		json_t *comp;
		size_t i;
		int bios = 0;

		json_array_foreach(json_object_get(r.json, "components"), i, comp) bios |=
		        !strcmp(jstr(comp, "component"), "bios") &&
		        !strcmp(jstr(comp, "source"), "redfish");
		assert_true(bios);
	}
	reply_free(&r);
}

static void
test_bad_actions(void **state)
{
	static const struct {
		const char *body;
		long status;
		const char *code;
	} cases[] = {
	        {"{}", 400, "MISSING_FIELD"},
	        {"{\"action\":\"explode\"}", 400, "INVALID_FIELD"},
	        {"{\"action\":\"manage\",\"force\":true}", 400, "UNKNOWN_FIELD"},
	        {"{\"action\":\"commission\",\"timeout_s\":5}", 400, "INVALID_FIELD"},
	        {"{\"action\":\"deploy\"}", 400, "MISSING_FIELD"},
	        {"{\"action\":\"deploy\",\"image\":\"nope\"}", 400, "INVALID_FIELD"},
	        {"{\"action\":\"release\",\"wipe\":\"shred\"}", 400, "INVALID_FIELD"},
	};
	struct reply r;
	size_t i;
	long before = count_all(&S, "/v1/jobs");

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long st = act("pv00", cases[i].body, &r);

		if (st != cases[i].status)
			fail_msg("%s: %ld %s", cases[i].body, st, r.body ? r.body : "");
		assert_error(&r, cases[i].status, cases[i].code);
		reply_free(&r);
	}
	assert_int_equal(act("ghost", "{\"action\":\"manage\"}", &r), 404);
	reply_free(&r);
	/* A node without a BMC cannot be managed. */
	make_node(&S, "{s:s}", "name", "nobmc");
	assert_int_equal(act("nobmc", "{\"action\":\"manage\"}", &r), 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/jobs"), before);
	json_t *n = node_get("nobmc");

	assert_string_equal(jstr(n, "provision_state"), "enrolled");
	json_decref(n);
}

static int
setup(void **state)
{
	static char ps[16];
	char path[400];
	FILE *f;

	(void)state;
	snprintf(workdir, sizeof workdir, "/tmp/rp-prov-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	port = free_ports(1);
	snprintf(ps, sizeof ps, "%d", port);
	snprintf(hosts, sizeof hosts, "%s/dhcp-hosts", workdir);
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", workdir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f,
	        "[server]\ndiscovery_max_tokens = 3\ndnsmasq_hosts = %s\npower_sync_interval = 0\n",
	        hosts);
	fclose(f);
	server_start(&S, NULL, args);
	snprintf(path, sizeof path, "%s/kernel.bin", workdir);
	sh("head -c 100000 /dev/urandom > %s", path);
	upload("agent-kernel", "kernel", path);
	snprintf(path, sizeof path, "%s/initrd.bin", workdir);
	sh("head -c 50000 /dev/urandom > %s", path);
	upload("agent-initrd", "initrd", path);
	{
		struct reply r;

		assert_int_equal(call(&S, S.admin, "POST", "/v1/boot-profiles", &r,
		                      "{s:s, s:s, s:s, s:s}", "name", "default", "kernel",
		                      "agent-kernel", "initrd", "agent-initrd", "cmdline",
		                      "console=ttyS0"),
		                 201);
		reply_free(&r);
	}
	make(&a, 0);
	make(&b, 1);
	make(&c, 2);
	/* pv02 has a Redfish BMC: commissioning also reads its firmware and BIOS. */
	mock_start(&M, 1, NULL);
	mock_post(&M, 0, "/__mock/config", "{\"power_delay_s\":0}");
	{
		struct reply r;

		assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/pv02", &r,
		                      "{s:{s:s, s:s, s:i, s:s, s:s, s:{s:s}}}", "bmc", "driver",
		                      "redfish", "address", "127.0.0.1", "port", M.base, "username",
		                      "admin", "password", "secret", "options", "scheme", "http"),
		                 200);
		reply_free(&r);
	}
	return 0;
}

static int
teardown(void **state)
{
	if (a.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, a.dir);
	if (b.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, b.dir);
	if (c.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, c.dir);
	mock_stop(&M);
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s", workdir);
	return group_teardown(state);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_boot_scripts),
	        cmocka_unit_test(test_discovery_flood_capped),
	        cmocka_unit_test(test_images),
	        cmocka_unit_test(test_dnsmasq_hosts),
	        cmocka_unit_test(test_bad_actions),
	        cmocka_unit_test(test_lifecycle),
	        cmocka_unit_test(test_corrupt_image),
	        cmocka_unit_test(test_timeout_and_abort),
	        cmocka_unit_test(test_kill9_mid_commission),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
