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
	/* Random bytes are no partitioned disk: no seed (test_deploy deploys configured). */
	snprintf(buf, sizeof buf,
	         "{\"action\":\"deploy\",\"image\":\"os1\",\"disk\":\"%s\",\"seed\":false}", disk);
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
	snprintf(body, sizeof body,
	         "{\"action\":\"deploy\",\"image\":\"os1\",\"disk\":\"%s\",\"seed\":false}", disk);
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

/* ---- Configured deploys (docs/deploy.md) --------------------------------------------------- */

static struct node d, e, g, h, k;
static char raw_img[400];

/* Commission n (managed first) so that a deploy may start. */
static void
ready(struct node *n)
{
	act_ok(n->name, "{\"action\":\"manage\"}", 202);
	json_decref(wait_state(n->name, "manageable", 60));
	act_ok(n->name, "{\"action\":\"commission\",\"timeout_s\":120}", 202);
	assert_int_equal(boot(n), 0);
	json_decref(wait_state(n->name, "ready", 120));
}

/* A cloud image's shape, made by the real sfdisk: GPT, an ESP and a Linux root; random bytes
 * from 1 to 5 MiB, zeros to the end (holes for qcow2). Then its gzip, zstd, xz and qcow2
 * (compressed clusters) forms, all uploaded. */
static void
make_images(void)
{
	snprintf(raw_img, sizeof raw_img, "%s/cloud.img", workdir);
	sh("truncate -s 8M %s && printf 'label: gpt\\nsize=2MiB, type=U\\ntype=L\\n' | "
	   "sfdisk -q %s && dd if=/dev/urandom of=%s bs=1M seek=1 count=4 conv=notrunc "
	   "2>/dev/null",
	   raw_img, raw_img, raw_img);
	sh("cd %s && gzip -nkf cloud.img && zstd -qf cloud.img && qemu-img "
	   "convert -c -O qcow2 cloud.img cloud.qcow2",
	   workdir);
	upload("cloud", "os", raw_img);
	{
		char p[460];

		snprintf(p, sizeof p, "%s.gz", raw_img);
		upload("cloud-gz", "os", p);
		snprintf(p, sizeof p, "%s.zst", raw_img);
		upload("cloud-zst", "os", p);
		snprintf(p, sizeof p, "%s/cloud.qcow2", workdir);
		upload("cloud-qcow2", "os", p);
	}
}

/* A "disk" of 32 MiB of 0xff: whatever an image does not write shows. */
static void
make_disk(struct node *n, char *disk, size_t len)
{
	snprintf(disk, len, "%s/disk0", n->dir);
	sh("head -c 33554432 /dev/zero | tr '\\000' '\\377' > %s", disk);
}

/* The seed partition's file name (meta-data, user-data, network-config) from disk, through
 * sfdisk's view of the table and mtools' of the FAT, into out. */
static void
seed_file(const char *disk, const char *name, char *out, size_t len)
{
	char cmd[1200];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof cmd,
	         "off=$(sfdisk --json %s | python3 -c 'import json,sys; t = "
	         "json.load(sys.stdin)[\"partitiontable\"]; p = [x for x in t[\"partitions\"] if "
	         "x.get(\"name\") == \"cidata\"]; assert len(p) == 1; "
	         "print(p[0][\"start\"] * t.get(\"sectorsize\", 512))') && mtype -i %s@@$off ::%s",
	         disk, disk, name);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
}

/* The job's JSON. */
static json_t *
job_get(const char *id)
{
	char path[200];

	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	return get_json(&S, path);
}

/* Wait for the deploy of n to reach phase want (the job's own). */
static json_t *
wait_phase(const char *job, const char *want, int timeout_s)
{
	int i;

	for (i = 0; i < timeout_s * 10; i++) {
		json_t *j = job_get(job);

		if (!strcmp(jstr(j, "phase") ?: "", want))
			return j;
		if (strcmp(jstr(j, "state"), "queued") && strcmp(jstr(j, "state"), "running"))
			fail_msg("job %s ended %s (%s) before phase %s", job, jstr(j, "state"),
			         json_string_value(
			                 json_object_get(json_object_get(j, "error"), "message"))
			                 ?: "",
			         want);
		json_decref(j);
		usleep(100000);
	}
	fail_msg("job %s never reached phase %s", job, want);
	return NULL;
}

static long
deploy(struct node *n, const char *extra, char *job, size_t len, struct reply *out)
{
	size_t cap = strlen(extra) + 600;
	char *body = malloc(cap), disk[400];
	struct reply r;
	long st;

	assert_non_null(body);
	snprintf(disk, sizeof disk, "%s/disk0", n->dir);
	snprintf(body, cap, "{\"action\":\"deploy\",\"disk\":\"%s\",%s}", disk, extra);
	st = act(n->name, body, &r);
	free(body);
	if (job && st == 202)
		snprintf(job, len, "%s", jstr(json_object_get(r.json, "job"), "id"));
	if (out)
		*out = r;
	else
		reply_free(&r);
	return st;
}

/* The report URL and token a seed's user data carries (its script's url='...' and
 * token='...'). */
static void
seed_report(const char *user_data, char *url, size_t ulen, char *token, size_t tlen)
{
	const char *p = strstr(user_data, "url='"), *q = strstr(user_data, "token='");

	assert_non_null(p);
	assert_non_null(q);
	snprintf(url, ulen, "%.*s", (int)strcspn(p + 5, "'"), p + 5);
	snprintf(token, tlen, "%.*s", (int)strcspn(q + 7, "'"), q + 7);
}

/* POST a first-boot report body with token (NULL: none) to url, as a deployed OS would;
 * the status. */
static long
report(const char *url, const char *token, const char *body)
{
	struct reply r;
	long st = req_url(&S, token, "POST", url, "application/json", body, strlen(body), NULL, &r);

	reply_free(&r);
	return st;
}

#define SECRET_CLASS "class-secret-7f3a9"
#define SECRET_REQ   "request-secret-c41d2"
#define KEY_CLASS                                                                                  \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIClassKeyClassKeyClassKeyClassKey00 ops@class"
#define KEY_REQ "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIReqKeyReqKeyReqKeyReqKeyReqKey0000 me@req"

/* Three nodes ready for deploys. */
static void
test_deploy_ready(void **state)
{
	(void)state;
	ready(&d);
	ready(&e);
	ready(&g);
	ready(&h);
	ready(&k);
}

/* Bad operator input is 400 naming the field, and nothing is queued or changed. */
static void
test_deploy_refusals(void **state)
{
	static const struct {
		const char *extra;
		long status;
		const char *field;
	} cases[] = {
	        {"\"image\":\"cloud\",\"config\":{\"user_data\":\"#cloud-config\\nruncmd: [a, "
	         "b\\n\"}",
	         400, "config.user_data"},
	        {"\"image\":\"cloud\",\"config\":{\"user_data\":\"packages: [htop]\"}", 400,
	         "config.user_data"},
	        {"\"image\":\"cloud\",\"config\":{\"network\":{\"bonds\":[{\"name\":\"bond0\","
	         "\"interfaces\":[\"eth0\",\"eno9\"]}]}}",
	         400, "config.network.bonds[0].interfaces[1]"},
	        {"\"image\":\"cloud\",\"config\":{\"network\":{\"address\":\"10.77.0.9/24\","
	         "\"interfaces\":[{\"name\":\"eth0\",\"address\":\"10.77.0.9/16\"}]}}",
	         400, "config.network.interfaces[0].address"},
	        {"\"image\":\"cloud\",\"config\":{\"hostname\":\"bad_name\"}", 400,
	         "config.hostname"},
	        {"\"image\":\"cloud\",\"config\":{\"ssh_authorized_keys\":[\"ssh-ed25519 "
	         "AAAA\\nx\"]}",
	         400, "config.ssh_authorized_keys[0]"},
	        {"\"image\":\"cloud\",\"config\":{\"secrets\":1}", 400, "config.secrets"},
	        {"\"image\":\"cloud-gz\",\"format\":\"qcow2\"", 400, "format"},
	        {"\"image\":\"cloud\",\"first_boot_timeout_s\":1", 400, "first_boot_timeout_s"},
	        {"\"image\":\"cloud\",\"seed\":false,\"config\":{}", 400, "config"},
	        {"\"image\":\"cloud\",\"efi_loader\":\"\\\\EFI\\\\x.efi\"", 400, "efi_loader"},
	};
	struct reply r;
	long jobs_before = count_all(&S, "/v1/jobs");
	size_t i;
	json_t *n;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long st = deploy(&d, cases[i].extra, NULL, 0, &r);

		if (st != cases[i].status ||
		    strcmp(json_string_value(json_object_get(
		                   json_object_get(json_object_get(r.json, "error"), "detail"),
		                   "field"))
		                   ?: "",
		           cases[i].field))
			fail_msg("%s: %ld %s", cases[i].extra, st, r.body ? r.body : "");
		reply_free(&r);
	}
	/* A seed larger than the agent takes is refused now, not after a PXE boot: 40 keys
	 * of 7000 bytes. */
	{
		static char big[300000];
		size_t len = 0, i2, j2;

		len += (size_t)snprintf(
		        big + len, sizeof big - len,
		        "\"image\":\"cloud\",\"config\":{\"ssh_authorized_keys\":[");
		for (i2 = 0; i2 < 40; i2++) {
			len += (size_t)snprintf(big + len, sizeof big - len, "%s\"ssh-rsa AAAA",
			                        i2 ? "," : "");
			for (j2 = 0; j2 < 7000; j2++)
				big[len++] = (char)('A' + (i2 + j2) % 26);
			len += (size_t)snprintf(big + len, sizeof big - len, " k%zu\"", i2);
		}
		snprintf(big + len, sizeof big - len, "]}");
		if (deploy(&d, big, NULL, 0, &r) != 400 || !strstr(r.body ? r.body : "", "256 KiB"))
			fail_msg("a 280 KB seed: %s", r.body ? r.body : "");
		reply_free(&r);
	}
	assert_int_equal(count_all(&S, "/v1/jobs"), jobs_before);
	n = node_get(d.name);
	assert_string_equal(jstr(n, "provision_state"), "ready");
	json_decref(n);
}

/* The whole configured deploy: class defaults and request merged, the seed on the disk as
 * cloud-init reads it, deployed only through the first-boot report (the seed's own script,
 * run here as the deployed OS would), the token good once, secrets nowhere but the disk. */
static void
test_deploy_configured(void **state)
{
	char job[64], disk[400], buf[65536], cmd[2048], url[300], token[200], body[600];
	struct reply r;
	json_t *j, *fb, *step;

	(void)state;
	/* A class's defaults are checked like a request's: 400 naming the field, no class. */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/cloudy", &r, "{s:s, s:{s:s}}",
	                      "name", "cloudy", "deploy_defaults", "user_data",
	                      "#cloud-config\nruncmd: [a\n"),
	                 400);
	assert_string_equal(
	        json_string_value(json_object_get(
	                json_object_get(json_object_get(r.json, "error"), "detail"), "field")),
	        "deploy_defaults.user_data");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/node-classes/cloudy", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/cloudy", &r,
	                      "{s:s, s:{s:[s], s:s, s:{s:s}}}", "name", "cloudy", "deploy_defaults",
	                      "ssh_authorized_keys", KEY_CLASS, "user_data",
	                      "#cloud-config\nbootcmd:\n  - echo " SECRET_CLASS "\n", "meta",
	                      "site", "fra1"),
	                 201);
	/* user_data is write-only. */
	assert_null(strstr(r.body, SECRET_CLASS));
	assert_true(json_is_true(json_object_get(r.json, "deploy_user_data")));
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/pv03", &r, "{s:s}", "node_class", "cloudy"),
	        200);
	reply_free(&r);
	make_disk(&d, disk, sizeof disk);
	snprintf(body, sizeof body,
	         "\"image\":\"cloud\",\"config\":{\"hostname\":\"gpu-r01-u03\","
	         "\"ssh_authorized_keys\":[\"%s\"],\"user_data\":\"#cloud-config\\nruncmd:\\n  - "
	         "[echo, "
	         "%s]\\n\",\"network\":{\"address\":\"10.77.0.3/24\",\"gateway\":\"10.77.0.1\","
	         "\"nameservers\":[\"10.77.0.1\"]}}",
	         KEY_REQ, SECRET_REQ);
	assert_int_equal(deploy(&d, body, job, sizeof job, &r), 202);
	assert_null(strstr(r.body, SECRET_REQ));
	reply_free(&r);
	/* Another node may not take its address. */
	snprintf(body, sizeof body,
	         "\"image\":\"cloud\",\"config\":{\"network\":{\"address\":\"10.77.0.3/24\"}}");
	assert_int_equal(deploy(&e, body, NULL, 0, &r), 400);
	assert_string_equal(
	        json_string_value(json_object_get(
	                json_object_get(json_object_get(r.json, "error"), "detail"), "field")),
	        "config.network");
	assert_non_null(strstr(r.body, "pv03"));
	reply_free(&r);
	assert_int_equal(boot(&d), 0);
	j = wait_phase(job, "first_boot", 120);
	/* Up is not deployed: the job waits for the OS. */
	assert_string_equal(jstr(j, "state"), "queued");
	step = json_array_get(json_object_get(j, "steps"), 0);
	assert_string_equal(jstr(step, "state"), "succeeded");
	assert_true(json_integer_value(json_object_get(json_object_get(step, "progress"),
	                                               "bytes_written")) >= 8 * 1048576);
	json_decref(j);
	{
		json_t *n = node_get(d.name);

		assert_string_equal(jstr(n, "provision_state"), "deploying");
		json_decref(n);
	}
	/* The image is on the disk, unchanged where it holds data. */
	assert_int_equal(sh_rc("cmp -i 1048576 -n 6291456 %s %s", raw_img, disk), 0);
	/* The table: valid, root grown to just before the seed at the disk's end. */
	assert_int_equal(sh_rc("sfdisk --verify %s >/dev/null 2>&1", disk), 0);
	assert_int_equal(sh_rc("sfdisk --json %s | python3 -c 'import json,sys; p = "
	                       "json.load(sys.stdin)[\"partitiontable\"][\"partitions\"]; "
	                       "assert len(p) == 3, p; assert p[1][\"start\"] + p[1][\"size\"] == "
	                       "p[2][\"start\"], p; assert p[1][\"size\"] > 8 * 2048, p; assert "
	                       "p[2][\"start\"] + p[2][\"size\"] > 31 * 2048, p'",
	                       disk),
	                 0);
	/* The seed, as cloud-init reads it. */
	seed_file(disk, "meta-data", buf, sizeof buf);
	snprintf(cmd, sizeof cmd, "instance-id: \"rp-%s\"", job);
	assert_non_null(strstr(buf, cmd));
	assert_non_null(strstr(buf, "local-hostname: \"gpu-r01-u03\""));
	assert_non_null(strstr(buf, "site: \"fra1\""));
	seed_file(disk, "network-config", buf, sizeof buf);
	assert_non_null(strstr(buf, "\"10.77.0.3/24\""));
	assert_non_null(strstr(buf, d.mac));
	sh("mkdir -p %s/seed", d.dir);
	snprintf(cmd, sizeof cmd, "%s/seed/network-config", d.dir);
	{
		FILE *fp = fopen(cmd, "w");

		assert_non_null(fp);
		fputs(buf, fp);
		fclose(fp);
	}
	assert_int_equal(
	        sh_rc("cd %s/seed && cloud-init devel net-convert -p network-config -k yaml "
	              "-D debian -d out -O netplan >/dev/null 2>&1 && grep -rq 10.77.0.3/24 "
	              "out",
	              d.dir),
	        0);
	seed_file(disk, "user-data", buf, sizeof buf);
	assert_non_null(strstr(buf, SECRET_CLASS));
	assert_non_null(strstr(buf, SECRET_REQ));
	assert_non_null(strstr(buf, KEY_CLASS));
	assert_non_null(strstr(buf, KEY_REQ));
	snprintf(cmd, sizeof cmd, "%s/seed/user-data", d.dir);
	{
		FILE *fp = fopen(cmd, "w");

		assert_non_null(fp);
		fputs(buf, fp);
		fclose(fp);
	}
	/* Every cloud-config part passes cloud-init's schema; then the OS boots: it runs the
	 * script part, which reports. */
	assert_int_equal(sh_rc("cd %s/seed && python3 -c '\n"
	                       "import email\n"
	                       "m = email.message_from_file(open(\"user-data\"))\n"
	                       "for i, p in enumerate(m.walk()):\n"
	                       "    t = p.get_content_type()\n"
	                       "    if t in (\"text/cloud-config\", \"text/x-shellscript\"):\n"
	                       "        open(\"part%%d.%%s\" %% (i, \"cfg\" if t == "
	                       "\"text/cloud-config\" else \"sh\"), \"w\").write(p.get_payload())\n"
	                       "' && ls part*.cfg | wc -l | grep -qx 3 && for c in part*.cfg; do "
	                       "cloud-init schema --config-file $c >/dev/null || exit 1; done",
	                       d.dir),
	                 0);
	seed_report(buf, url, sizeof url, token, sizeof token);
	assert_int_equal(strncmp(token, "rpfb1.", 6), 0);
	/* Hostile reports first: each is refused and changes nothing. */
	snprintf(body, sizeof body, "{\"instance_id\":\"rp-%s\"}", job);
	assert_int_equal(report(url, "rpfb1.00000000-0000-4000-8000-000000000000.00", body), 401);
	{
		char forged[200];

		snprintf(forged, sizeof forged, "%s", token);
		forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
		assert_int_equal(report(url, forged, body), 401);
	}
	assert_int_equal(report(url, NULL, body), 401);
	snprintf(cmd, sizeof cmd, "{\"instance_id\":\"rp-%s\",\"hostname\":\"a b\"}", job);
	assert_int_equal(report(url, token, cmd), 400);
	assert_int_equal(report(url, token, "{\"instance_id\":\"rp-someone-else\"}"), 400);
	assert_int_equal(report(url, token, "not json"), 400);
	j = job_get(job);
	assert_string_equal(jstr(j, "phase"), "first_boot");
	json_decref(j);
	/* The OS comes up: the seed's own script reports. */
	assert_int_equal(sh_rc("cd %s/seed && timeout 60 sh part*.sh", d.dir), 0);
	{
		json_t *n = wait_state(d.name, "deployed", 30);

		json_decref(n);
	}
	j = job_get(job);
	assert_string_equal(jstr(j, "state"), "succeeded");
	fb = json_object_get(json_object_get(j, "result"), "first_boot");
	snprintf(cmd, sizeof cmd, "rp-%s", job);
	assert_string_equal(jstr(fb, "instance_id"), cmd);
	assert_non_null(jstr(fb, "kernel"));
	assert_true(json_is_array(json_object_get(fb, "addresses")));
	json_decref(j);
	/* Once only. */
	snprintf(body, sizeof body, "{\"instance_id\":\"rp-%s\"}", job);
	assert_int_equal(report(url, token, body), 409);
	/* The event says who came up. */
	assert_int_equal(
	        call(&S, S.admin, "GET", "/v1/events?node=pv03&action=node.first_boot", &r, NULL),
	        200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	/* The secrets are on the disk only: not in the job, its events, the class, or the log. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?limit=1000", &r, NULL), 200);
	assert_null(strstr(r.body, SECRET_REQ));
	assert_null(strstr(r.body, SECRET_CLASS));
	assert_null(strstr(r.body, token));
	reply_free(&r);
	snprintf(cmd, sizeof cmd, "/v1/jobs/%s", job);
	assert_int_equal(call(&S, S.admin, "GET", cmd, &r, NULL), 200);
	assert_null(strstr(r.body, SECRET_REQ));
	assert_null(strstr(r.body, SECRET_CLASS));
	assert_null(strstr(r.body, token + 44));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/node-classes/cloudy", &r, NULL), 200);
	assert_null(strstr(r.body, SECRET_CLASS));
	reply_free(&r);
	/* The log, and on SQLite the database file itself (on PostgreSQL, no file to read). */
	assert_int_equal(sh_rc("cat %s %s/rackpilot.db 2>/dev/null | grep -qaE '%s|%s|%s'", S.log,
	                       S.dir, SECRET_REQ, SECRET_CLASS, token + 44),
	                 1);
}

/* qcow2 (compressed clusters, holes over a disk of 0xff) and gzip stream onto the disk as
 * the raw image's bytes (zstd: the timeout test below; xz: the agent's unit test). */
static void
test_deploy_formats(void **state)
{
	static const char *const images[] = {"cloud-qcow2", "cloud-gz"};
	static const char *const fmt[] = {"qcow2", "gzip"};
	struct node *nodes[] = {&e, &h};
	char job[64], disk[400], body[300];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof images / sizeof images[0]; i++) {
		json_t *j, *step;

		make_disk(nodes[i], disk, sizeof disk);
		snprintf(body, sizeof body, "\"image\":\"%s\",\"first_boot\":false", images[i]);
		assert_int_equal(deploy(nodes[i], body, job, sizeof job, NULL), 202);
		assert_int_equal(boot(nodes[i]), 0);
		json_decref(wait_state(nodes[i]->name, "deployed", 120));
		if (sh_rc("cmp -i 1048576 -n 6291456 %s %s", raw_img, disk) != 0)
			fail_msg("%s: the disk does not hold the image's bytes", images[i]);
		assert_int_equal(sh_rc("sfdisk --verify %s >/dev/null 2>&1", disk), 0);
		j = job_get(job);
		step = json_array_get(json_object_get(j, "steps"), 0);
		assert_string_equal(jstr(json_object_get(step, "result"), "format"), fmt[i]);
		/* Without a first-boot check, up is deployed. */
		assert_true(
		        json_is_null(json_object_get(json_object_get(j, "result"), "first_boot")) ||
		        json_object_get(json_object_get(j, "result"), "first_boot") == NULL);
		json_decref(j);
	}
}

/* An OS that never reports: the deploy fails with the reason, the BMC's power state. */
static void
test_deploy_first_boot_timeout(void **state)
{
	char job[64], disk[400];
	json_t *n, *j;

	(void)state;
	make_disk(&g, disk, sizeof disk);
	assert_int_equal(deploy(&g, "\"image\":\"cloud-zst\",\"first_boot_timeout_s\":10", job,
	                        sizeof job, NULL),
	                 202);
	assert_int_equal(boot(&g), 0);
	n = wait_state(g.name, "deploy_failed", 120);
	assert_non_null(strstr(jstr(n, "provision_error"), "did not report its first boot"));
	json_decref(n);
	j = job_get(job);
	assert_string_equal(jstr(json_object_get(j, "error"), "code"), "first_boot_timeout");
	assert_non_null(strstr(jstr(json_object_get(j, "error"), "message"), "power on"));
	json_decref(j);
	assert_int_equal(sh_rc("cmp -i 1048576 -n 6291456 %s %s", raw_img, disk), 0);
}

/* kill -9 while the agent writes the image: after the restart the deploy either fails with a
 * reason or goes on, and it reaches deployed only with the whole image on the disk (the test
 * plays the OS and reports only then). */
static void
test_deploy_kill9_mid_write(void **state)
{
	char job[64], disk[400], big[400], dir[256], body[200], buf[65536], url[300], token[200];
	json_t *j = NULL, *n;
	int i, killed = 0;

	(void)state;
	/* 48 MiB of random bytes: long enough to write that the kill lands inside it. */
	snprintf(big, sizeof big, "%s/big.img", workdir);
	sh("cp %s %s && truncate -s 64M %s && dd if=/dev/urandom of=%s bs=1M seek=8 count=48 "
	   "conv=notrunc 2>/dev/null && printf 'label: gpt\\nsize=2MiB, type=U\\ntype=L\\n' | "
	   "sfdisk -q %s",
	   raw_img, big, big, big, big);
	upload("big", "os", big);
	snprintf(disk, sizeof disk, "%s/disk0", k.dir);
	sh("head -c 100663296 /dev/zero | tr '\\000' '\\377' > %s", disk);
	snprintf(body, sizeof body, "\"image\":\"big\",\"first_boot_timeout_s\":30");
	assert_int_equal(deploy(&k, body, job, sizeof job, NULL), 202);
	assert_int_equal(boot(&k), 0);
	for (i = 0; i < 3000 && !killed; i++) {
		json_t *st;

		j = job_get(job);
		st = json_array_get(json_object_get(j, "steps"), 0);
		if (!strcmp(jstr(st, "state") ?: "", "running")) {
			snprintf(dir, sizeof dir, "%s", S.dir);
			server_stop(&S, SIGKILL);
			killed = 1;
		} else if (strcmp(jstr(st, "state") ?: "", "pending") != 0) {
			fail_msg("the image step went %s before the test saw it run",
			         jstr(st, "state"));
		}
		json_decref(j);
		usleep(5000);
	}
	assert_true(killed);
	/* The write goes on or dies while the server is down; then it comes back. */
	usleep(500000);
	server_start(&S, dir, args);
	/* The same server again, at the address it now has (the harness picks a new port). */
	sh("sed -i 's|^url = .*|url = %s|' %s/agent.conf", S.base, k.dir);
	for (i = 0; i < 1200; i++) {
		j = job_get(job);
		if (strcmp(jstr(j, "state"), "queued") && strcmp(jstr(j, "state"), "running"))
			break;
		if (!strcmp(jstr(j, "phase") ?: "", "first_boot"))
			break;
		json_decref(j);
		j = NULL;
		usleep(100000);
	}
	assert_non_null(j);
	if (!strcmp(jstr(j, "state"), "failed")) {
		/* Failed cleanly: with a reason, and the node says deploy_failed. */
		print_message("kill -9 mid-write: the deploy failed: %s\n",
		              jstr(json_object_get(j, "error"), "message"));
		assert_non_null(jstr(json_object_get(j, "error"), "message"));
		json_decref(j);
		n = wait_state(k.name, "deploy_failed", 30);
		json_decref(n);
		return;
	}
	/* It went on: the OS would boot only a whole image; only then does it report. */
	assert_string_equal(jstr(j, "phase"), "first_boot");
	json_decref(j);
	print_message("kill -9 mid-write: the deploy went on to its first boot\n");
	assert_int_equal(sh_rc("cmp -i 1048576 -n 65011712 %s %s", big, disk), 0);
	seed_file(disk, "user-data", buf, sizeof buf);
	seed_report(buf, url, sizeof url, token, sizeof token);
	snprintf(body, sizeof body, "{\"instance_id\":\"rp-%s\"}", job);
	assert_int_equal(report(url, token, body), 200);
	json_decref(wait_state(k.name, "deployed", 30));
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
	make(&d, 3);
	make(&e, 4);
	make(&g, 5);
	make(&h, 6);
	make(&k, 7);
	make_images();
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
	if (d.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, d.dir);
	if (e.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, e.dir);
	if (g.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, g.dir);
	if (h.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, h.dir);
	if (k.started)
		sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, k.dir);
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
	        cmocka_unit_test(test_deploy_ready),
	        cmocka_unit_test(test_deploy_refusals),
	        cmocka_unit_test(test_deploy_configured),
	        cmocka_unit_test(test_deploy_formats),
	        cmocka_unit_test(test_deploy_first_boot_timeout),
	        cmocka_unit_test(test_deploy_kill9_mid_write),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
