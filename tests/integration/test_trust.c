/*
 * The trust boundaries, tried as an attacker on the management network would (docs/security.md):
 * the boot network cannot take over an enrolled node, a boot script's token is bound to the MAC
 * (and optionally the address) that fetched it and is not revoked by a second fetch, the data
 * directory is private, a brand-new server answers PXE with a script, unauthenticated
 * endpoints are rate-limited and cannot fill the database or the event log, and hostile bytes
 * in URLs, queries and CSV cells are refused rather than dropped.
 *
 * Every test here fails on the code before these protections (eab6802). The nodes' BMCs are
 * the fake driver; registrations are made as the ramdisk's agent makes them, over HTTP.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char workdir[256];

/* A fresh ed25519 host key line ("ssh-ed25519 AAAA... comment") into buf. */
static void
hostkey(const char *name, char *buf, size_t len)
{
	char path[400];

	snprintf(path, sizeof path, "%s/%s", workdir, name);
	sh("rm -f %s %s.pub && ssh-keygen -q -t ed25519 -N '' -C %s -f %s", path, path, name, path);
	snprintf(path + strlen(path), sizeof path - strlen(path), ".pub");
	slurp(path, buf, len);
	buf[strcspn(buf, "\n")] = '\0';
	assert_int_equal(strncmp(buf, "ssh-ed25519 ", 12), 0);
}

/* GET /boot/ipxe?mac= on s (its boot listener when it has one); the script into buf. */
static long
ipxe_on(struct server *s, const char *mac, char *buf, size_t len)
{
	char url[300];
	struct reply r;
	long st;

	snprintf(url, sizeof url, "%s/boot/ipxe?mac=%s", s->boot[0] ? s->boot : s->base, mac);
	st = req_url(s, NULL, "GET", url, NULL, NULL, 0, NULL, &r);
	snprintf(buf, len, "%s", r.body ? r.body : "");
	reply_free(&r);
	return st;
}

/* The value of a rackpilot.KEY= argument in a script, or "". */
static void
arg_of(const char *script, const char *key, char *out, size_t len)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof k, "rackpilot.%s=", key);
	p = strstr(script, k);
	out[0] = '\0';
	if (p) {
		p += strlen(k);
		snprintf(out, len, "%.*s", (int)strcspn(p, " \n"), p);
	}
}

static long
reg(struct server *s, const char *tok, const char *macs_json, const char *key, struct reply *r)
{
	char body[2048];

	snprintf(body, sizeof body,
	         "{\"format\":1,\"hostname\":\"h\",\"boot_id\":\"b\",\"macs\":%s,\"ssh_host_key\":"
	         "\"%s\","
	         "\"ssh\":{\"address\":\"127.0.0.66\",\"port\":22}}",
	         macs_json, key);
	return req(s, tok, "POST", "/v1/agent/register", "application/json", body, strlen(body),
	           NULL, r);
}

static json_t *
get(struct server *s, const char *path)
{
	struct reply r;
	json_t *j;

	if (call(s, s->admin, "GET", path, &r, NULL) != 200)
		fail_msg("GET %s: %ld %s", path, r.status, r.body ? r.body : "");
	j = json_incref(r.json);
	reply_free(&r);
	return j;
}

/* Events of one action (optionally for one node). */
static json_t *
events(struct server *s, const char *action, const char *node)
{
	char path[300];
	json_t *page, *items;

	snprintf(path, sizeof path, "/v1/events?action=%s%s%s&limit=100", action,
	         node ? "&node=" : "", node ? node : "");
	page = get(s, path);
	items = json_incref(json_object_get(page, "items"));
	json_decref(page);
	return items;
}

/* Start s with these settings (lines of the [server] section) in workdir/name.conf, and the
 * power sweep off. */
static void
start_with(struct server *s, const char *name, const char *settings)
{
	static char conf[400];
	const char *args[] = {"-c", conf, NULL};
	FILE *f;

	snprintf(conf, sizeof conf, "%s/%s.conf", workdir, name);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\n%s", settings);
	fclose(f);
	server_start(s, NULL, args);
}

static void
boot_profile(struct server *s)
{
	char path[400], cmd[1200];
	struct reply r;
	const char *names[2] = {"agent-kernel", "agent-initrd"};
	int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "%s/%s.bin", workdir, names[i]);
		sh("head -c 4096 /dev/urandom > %s", path);
		snprintf(cmd, sizeof cmd,
		         "curl -sfk -o /dev/null -X PUT -H 'Authorization: Bearer %s' "
		         "--data-binary @%s "
		         "'%s/v1/images/%s?kind=%s'",
		         s->admin, path, s->base, names[i], i ? "initrd" : "kernel");
		sh("%s", cmd);
	}
	assert_int_equal(call(s, s->admin, "POST", "/v1/boot-profiles", &r, "{s:s, s:s, s:s}",
	                      "name", "default", "kernel", "agent-kernel", "initrd",
	                      "agent-initrd"),
	                 201);
	reply_free(&r);
}

/* The node's agent token, registered by an operator-made token bound to it (how an enrolled
 * node's agent gets one outside a provisioning action). */
static void
enroll_with_agent(struct server *s, const char *name, const char *mac, const char *key, char *atok,
                  size_t len)
{
	struct reply r;
	char tok[128], macs[64];

	make_node(s, "{s:s, s:[s], s:{s:s, s:{s:i}}}", "name", name, "macs", mac, "bmc", "driver",
	          "fake", "options", "delay_ms", 0);
	assert_int_equal(
	        call(s, s->admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", name), 201);
	snprintf(tok, sizeof tok, "%s", jstr(r.json, "token"));
	reply_free(&r);
	snprintf(macs, sizeof macs, "[\"%s\"]", mac);
	assert_int_equal(reg(s, tok, macs, key, &r), 200);
	snprintf(atok, len, "%s", jstr(r.json, "token"));
	reply_free(&r);
}

static const char *
pinned_fp(struct server *s, const char *node)
{
	static char fp[128];
	char path[200];
	json_t *n;

	snprintf(path, sizeof path, "/v1/nodes/%s", node);
	n = get(s, path);
	snprintf(fp, sizeof fp, "%s",
	         jstr(json_object_get(json_object_get(n, "ssh"), "host_key"), "fingerprint") ?: "");
	json_decref(n);
	return fp;
}

/* ---- 1. Node takeover through discovery ---------------------------------------------- */

static void
test_discovery_cannot_take_over(void **state)
{
	char key1[600], key2[600], atok[128], script[4096], tok[128], fp[128], macs[200];
	struct reply r;
	json_t *ev, *n;

	(void)state;
	hostkey("victim", key1, sizeof key1);
	hostkey("attacker", key2, sizeof key2);
	enroll_with_agent(&S, "victim", "02:aa:00:00:00:01", key1, atok, sizeof atok);
	snprintf(fp, sizeof fp, "%s", pinned_fp(&S, "victim"));
	/* An unknown MAC gets a discovery token... */
	assert_int_equal(ipxe_on(&S, "02:bb:00:00:00:99", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_int_equal(strncmp(tok, "rpb_", 4), 0);
	/* ...which cannot register the enrolled node by also naming its MAC. */
	snprintf(macs, sizeof macs, "[\"02:bb:00:00:00:99\",\"02:aa:00:00:00:01\"]");
	assert_int_equal(reg(&S, tok, macs, key2, &r), 409);
	assert_error(&r, 409, "CONFLICT");
	assert_string_equal(
	        json_string_value(json_array_get(
	                json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                                "macs"),
	                0)),
	        "02:aa:00:00:00:01");
	reply_free(&r);
	/* Nothing changed: the real agent's token works, the pin and address are the node's. */
	assert_int_equal(
	        call(&S, atok, "POST", "/v1/agent/heartbeat", &r, "{s:s}", "status", "idle"), 200);
	reply_free(&r);
	assert_string_equal(pinned_fp(&S, "victim"), fp);
	n = get(&S, "/v1/nodes/victim");
	assert_int_equal(json_array_size(json_object_get(n, "macs")), 1);
	json_decref(n);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/discovered-02bb00000099", &r, NULL),
	                 404);
	reply_free(&r);
	/* Asking again fares no better. */
	assert_int_equal(reg(&S, tok, "[\"02:bb:00:00:00:99\",\"02:aa:00:00:00:01\"]", key1, &r),
	                 409);
	reply_free(&r);
	/* The operator sees it, with the MACs it claimed. */
	ev = events(&S, "agent.register_refused", "victim");
	assert_int_equal(json_array_size(ev), 1);
	/* Both attempts in one event. */
	assert_int_equal(json_integer_value(json_object_get(
	                         json_object_get(json_array_get(ev, 0), "detail"), "count")),
	                 2);
	assert_string_equal(
	        json_string_value(json_array_get(
	                json_object_get(
	                        json_object_get(json_object_get(json_array_get(ev, 0), "detail"),
	                                        "refused"),
	                        "macs"),
	                0)),
	        "02:aa:00:00:00:01");
	json_decref(ev);
	/* The token was not used up: the machine it was issued to registers as a new one. */
	assert_int_equal(reg(&S, tok, "[\"02:bb:00:00:00:99\"]", key2, &r), 200);
	assert_true(json_is_true(json_object_get(r.json, "created")));
	reply_free(&r);
	/* Discovered, it boots locally; a token bound to no node (an operator's) may re-register
	 * it with the same host key, not with another one (a stranger who knows the MAC)... */
	assert_int_equal(ipxe_on(&S, "02:bb:00:00:00:99", script, sizeof script), 200);
	assert_non_null(strstr(script, "discovered): booting from the local disk"));
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{}"), 201);
	snprintf(tok, sizeof tok, "%s", jstr(r.json, "token"));
	reply_free(&r);
	assert_int_equal(reg(&S, tok, "[\"02:bb:00:00:00:99\"]", key1, &r), 409);
	assert_non_null(strstr(r.body, "another SSH host key pinned"));
	reply_free(&r);
	/* ...nor the victim: such a token is a discovery token too. */
	assert_int_equal(reg(&S, tok, "[\"02:aa:00:00:00:01\"]", key1, &r), 409);
	reply_free(&r);
	assert_int_equal(reg(&S, tok, "[\"02:bb:00:00:00:99\"]", key2, &r), 200);
	assert_false(json_is_true(json_object_get(r.json, "created")));
	reply_free(&r);
}

/* A node-bound token replaces a pin only while the node is being provisioned. */
static void
test_pin_replaced_only_while_provisioning(void **state)
{
	char key1[600], key2[600], atok[128], tok[128], script[4096];
	struct reply r;
	json_t *ev, *n;
	int i, ok = 0;

	(void)state;
	hostkey("pinned1", key1, sizeof key1);
	hostkey("pinned2", key2, sizeof key2);
	enroll_with_agent(&S, "pinned", "02:aa:00:00:00:02", key1, atok, sizeof atok);
	/* Enrolled, not provisioning: an operator token for it cannot swap the key. */
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", "pinned"),
	        201);
	snprintf(tok, sizeof tok, "%s", jstr(r.json, "token"));
	reply_free(&r);
	assert_int_equal(reg(&S, tok, "[\"02:aa:00:00:00:02\"]", key2, &r), 409);
	assert_non_null(strstr(r.body, "another SSH host key pinned"));
	reply_free(&r);
	/* Commissioning: the boot script's token may (the ramdisk makes a new key each boot). */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/pinned/provision", &r, "{s:s}",
	                      "action", "manage"),
	                 202);
	reply_free(&r);
	for (i = 0; i < 300 && !ok; i++) {
		n = get(&S, "/v1/nodes/pinned");
		ok = !strcmp(jstr(n, "provision_state"), "manageable");
		json_decref(n);
		if (!ok)
			usleep(50000);
	}
	assert_true(ok);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/pinned/provision", &r, "{s:s, s:i}",
	                      "action", "commission", "timeout_s", 600),
	                 202);
	reply_free(&r);
	for (ok = 0, i = 0; i < 300 && !ok; i++) {
		assert_int_equal(ipxe_on(&S, "02:aa:00:00:00:02", script, sizeof script), 200);
		arg_of(script, "token", tok, sizeof tok);
		ok = tok[0] != '\0';
		if (!ok)
			usleep(50000);
	}
	assert_true(ok);
	assert_int_equal(reg(&S, tok, "[\"02:aa:00:00:00:02\"]", key2, &r), 200);
	reply_free(&r);
	ev = events(&S, "node.host_key_changed", "pinned");
	assert_int_equal(json_array_size(ev), 1);
	assert_non_null(strstr(jstr(json_array_get(ev, 0), "summary"),
	                       "node-bound bootstrap token, commissioning"));
	json_decref(ev);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/nodes/pinned/provision", &r, "{s:s}",
	                      "action", "abort"),
	                 202);
	reply_free(&r);
}

/* ---- 2. Bootstrap tokens bound to the fetching MAC, reused, never revoked by a fetch -- */

static void
test_script_token_bound_and_reused(void **state)
{
	char key[600], s1[4096], s2[4096], t1[128], t2[128];
	struct reply r;
	int i;

	(void)state;
	hostkey("reuse", key, sizeof key);
	/* Unknown machine: a second fetch (the attacker's, or a retry) hands out the same token. */
	assert_int_equal(ipxe_on(&S, "02:cc:00:00:00:01", s1, sizeof s1), 200);
	arg_of(s1, "token", t1, sizeof t1);
	for (i = 0; i < 3; i++) {
		assert_int_equal(ipxe_on(&S, "02:cc:00:00:00:01", s2, sizeof s2), 200);
		arg_of(s2, "token", t2, sizeof t2);
		assert_string_equal(t1, t2);
	}
	/* Bound to that MAC: another machine cannot use it, and the operator sees the attempt. */
	assert_int_equal(reg(&S, t1, "[\"02:cc:00:00:00:02\"]", key, &r), 401);
	assert_non_null(strstr(r.body, "issued to 02:cc:00:00:00:01"));
	reply_free(&r);
	{
		json_t *ev = events(&S, "bootstrap_token.refused", NULL);

		assert_non_null(strstr(jstr(json_array_get(ev, 0), "summary"),
		                       "presented without the MAC it was issued to"));
		json_decref(ev);
	}
	/* The machine that fetched it first still registers; the token is spent then. */
	assert_int_equal(reg(&S, t1, "[\"02:cc:00:00:00:01\"]", key, &r), 200);
	reply_free(&r);
	assert_int_equal(reg(&S, t1, "[\"02:cc:00:00:00:01\"]", key, &r), 401);
	reply_free(&r);
}

/* boot_source_check: a script's token registers only from the address that fetched it. */
static void
test_boot_source_check(void **state)
{
	struct server s2;
	char key[600], script[4096], tok[128];
	struct reply r;

	(void)state;
	hostkey("src", key, sizeof key);
	start_with(&s2, "source", "boot_source_check = true\n");
	boot_profile(&s2);
	req_source = "127.0.0.2";
	assert_int_equal(ipxe_on(&s2, "02:dd:00:00:00:01", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_int_equal(strncmp(tok, "rpb_", 4), 0);
	req_source = "127.0.0.3";
	assert_int_equal(reg(&s2, tok, "[\"02:dd:00:00:00:01\"]", key, &r), 401);
	assert_non_null(strstr(r.body, "register from that address"));
	reply_free(&r);
	/* Someone else on the network asked for that MAC's script too: its own token... */
	{
		char other[128];

		req_source = "127.0.0.4";
		assert_int_equal(ipxe_on(&s2, "02:dd:00:00:00:01", script, sizeof script), 200);
		arg_of(script, "token", other, sizeof other);
		assert_string_not_equal(other, tok);
		req_source = "127.0.0.2";
		assert_int_equal(reg(&s2, tok, "[\"02:dd:00:00:00:01\"]", key, &r), 200);
		reply_free(&r);
		/* ...opens nothing once the machine has registered. */
		req_source = "127.0.0.4";
		assert_int_equal(reg(&s2, other, "[\"02:dd:00:00:00:01\"]", key, &r), 401);
		assert_non_null(strstr(r.body, "revoked"));
		reply_free(&r);
	}
	req_source = NULL;
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
}

/* ---- 4. The data directory is private ------------------------------------------------- */

static void
test_data_dir_private(void **state)
{
	static const char *const files[] = {"rackpilot.db",
	                                    "rackpilot.db-wal",
	                                    "rackpilot.db-shm",
	                                    "admin.token",
	                                    "secret.key",
	                                    "ssh/id_ed25519",
	                                    NULL};
	char dir[300], path[400], cmd[800], log[4096];
	struct stat sb;
	int i;

	(void)state;
	/* Under a umask that would make them world-readable, every file is 0600 anyway (the
	 * database files only where SQLite keeps it there). */
	for (i = test_database(S.dir) ? 3 : 0; files[i]; i++) {
		snprintf(path, sizeof path, "%s/%s", S.dir, files[i]);
		assert_int_equal(stat(path, &sb), 0);
		if ((sb.st_mode & 077) != 0)
			fail_msg("%s is mode %o", path, sb.st_mode & 0777);
	}
	/* A database file an older version left readable is narrowed at the next start (a
	 * SQLite file: a PostgreSQL database is no file of the data directory). */
	if (!test_database(S.dir)) {
		struct server s2;
		char d2[256], log2[8192];

		server_start(&s2, NULL, NULL);
		snprintf(d2, sizeof d2, "%s", s2.dir);
		server_stop(&s2, SIGTERM);
		snprintf(path, sizeof path, "%s/rackpilot.db", d2);
		assert_int_equal(chmod(path, 0644), 0);
		server_start(&s2, d2, NULL);
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 077, 0);
		slurp(s2.log, log2, sizeof log2);
		assert_non_null(strstr(log2, "was mode 0644; now 0600"));
		server_stop(&s2, SIGTERM);
		server_cleanup(&s2);
	}
	/* A directory others can read: refused, naming it and the fix. */
	snprintf(dir, sizeof dir, "%s/open", workdir);
	sh("mkdir -p %s && chmod 755 %s", dir, dir);
	snprintf(cmd, sizeof cmd,
	         "timeout 20 %s --data-dir %s --listen 127.0.0.1:0 > %s/open.log 2>&1", rp_test_bin,
	         dir, workdir);
	assert_int_not_equal(sh_rc("%s", cmd), 0);
	snprintf(path, sizeof path, "%s/open.log", workdir);
	slurp(path, log, sizeof log);
	assert_non_null(strstr(log, dir));
	assert_non_null(strstr(log, "chmod 700"));
	snprintf(path, sizeof path, "%s/rackpilot.db", dir);
	assert_int_not_equal(stat(path, &sb), 0);
}

/* ---- 5. A brand-new server answers PXE with a script ---------------------------------- */

static void
test_fresh_install_pxe(void **state)
{
	struct server s2;
	struct reply r;

	(void)state;
	server_start(&s2, NULL, NULL);
	assert_int_equal(
	        req(&s2, NULL, "GET", "/boot/ipxe?mac=02:ee:00:00:00:01", NULL, NULL, 0, NULL, &r),
	        200);
	assert_int_equal(strncmp(r.body, "#!ipxe\n", 7), 0);
	assert_non_null(strstr(r.body, "create a boot profile named default"));
	assert_non_null(strstr(r.body, "sanboot"));
	assert_null(strchr(r.body, '"'));
	reply_free(&r);
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
}

/* ---- 6. Unauthenticated endpoints are bounded ------------------------------------------ */

static void
test_rate_limits(void **state)
{
	struct server s2;
	struct reply r;
	int i;

	(void)state;
	start_with(&s2, "rate", "boot_rate = 1\nboot_burst = 3\n");
	req_source = "127.0.0.5";
	for (i = 0; i < 3; i++) {
		assert_int_equal(req(&s2, NULL, "GET", "/boot/ipxe?mac=02:ee:00:00:00:05", NULL,
		                     NULL, 0, NULL, &r),
		                 200);
		reply_free(&r);
	}
	assert_int_equal(
	        req(&s2, NULL, "GET", "/boot/ipxe?mac=02:ee:00:00:00:05", NULL, NULL, 0, NULL, &r),
	        429);
	assert_error(&r, 429, "RATE_LIMITED");
	assert_true(atoi(r.retry_after) >= 1);
	reply_free(&r);
	/* Registration shares the address's bucket. */
	assert_int_equal(reg(&s2, "rpb_x", "[\"02:ee:00:00:00:05\"]", "x", &r), 429);
	reply_free(&r);
	/* Another address has its own bucket; token-bearing routes are not limited. */
	req_source = "127.0.0.6";
	assert_int_equal(
	        req(&s2, NULL, "GET", "/boot/ipxe?mac=02:ee:00:00:00:06", NULL, NULL, 0, NULL, &r),
	        200);
	reply_free(&r);
	req_source = "127.0.0.5";
	for (i = 0; i < 10; i++) {
		assert_int_equal(call(&s2, s2.admin, "GET", "/v1", &r, NULL), 200);
		reply_free(&r);
	}
	req_source = NULL;
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
	/* And on the defaults (20/s, bursts of 100): a host hammering is held back. */
	{
		int limited = 0;

		req_source = "127.0.0.9";
		for (i = 0; i < 160; i++) {
			long st = req(&S, NULL, "GET", "/boot/ipxe?mac=02:ee:00:00:00:09", NULL,
			              NULL, 0, NULL, &r);

			limited += st == 429;
			reply_free(&r);
		}
		req_source = NULL;
		assert_true(limited > 0);
	}
}

/* Discovery slots are per MAC (asking again reuses one) and a few per address, so made-up
 * MACs from one host cannot lock a real new machine out. */
static void
test_discovery_slots(void **state)
{
	struct server s2;
	char script[4096], tok[128], again[128], mac[32];
	int i;

	(void)state;
	start_with(&s2, "slots", "discovery_max_tokens = 5\ndiscovery_max_per_source = 2\n");
	boot_profile(&s2);
	req_source = "127.0.0.7";
	assert_int_equal(ipxe_on(&s2, "02:f0:00:00:00:01", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_true(tok[0] != '\0');
	/* The same MAC again and again: one slot. */
	for (i = 0; i < 5; i++) {
		assert_int_equal(ipxe_on(&s2, "02:f0:00:00:00:01", script, sizeof script), 200);
		arg_of(script, "token", again, sizeof again);
		assert_string_equal(tok, again);
	}
	assert_int_equal(ipxe_on(&s2, "02:f0:00:00:00:02", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_true(tok[0] != '\0');
	/* A third made-up MAC from the same host waits... */
	assert_int_equal(ipxe_on(&s2, "02:f0:00:00:00:03", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_string_equal(tok, "");
	assert_non_null(strstr(script, "being discovered from 127.0.0.7"));
	/* ...while a real new machine elsewhere still gets its ramdisk. */
	for (i = 0; i < 3; i++) {
		char src[32];

		snprintf(src, sizeof src, "127.0.1.%d", 20 + i);
		req_source = src;
		snprintf(mac, sizeof mac, "02:f1:00:00:00:%02x", i);
		assert_int_equal(ipxe_on(&s2, mac, script, sizeof script), 200);
		arg_of(script, "token", tok, sizeof tok);
		assert_true(tok[0] != '\0');
	}
	/* The global cap still holds. */
	req_source = "127.0.1.30";
	assert_int_equal(ipxe_on(&s2, "02:f1:00:00:00:99", script, sizeof script), 200);
	assert_non_null(strstr(script, "5 machines are being discovered already"));
	req_source = NULL;
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
}

/* Discovered nodes wait for an operator; a host inventing MACs cannot add them without end. */
static void
test_discovered_nodes_capped(void **state)
{
	struct server s2;
	char key[600], script[4096], tok[128];
	struct reply r;

	(void)state;
	hostkey("capped", key, sizeof key);
	start_with(&s2, "capped", "discovery_max_nodes = 1\n");
	boot_profile(&s2);
	assert_int_equal(ipxe_on(&s2, "02:c0:00:00:00:01", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_int_equal(reg(&s2, tok, "[\"02:c0:00:00:00:01\"]", key, &r), 200);
	reply_free(&r);
	assert_int_equal(ipxe_on(&s2, "02:c0:00:00:00:02", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_string_equal(tok, "");
	assert_non_null(strstr(script, "1 discovered nodes wait for an operator"));
	/* Deleting it makes room again. */
	assert_int_equal(
	        call(&s2, s2.admin, "DELETE", "/v1/nodes/discovered-02c000000001", &r, NULL), 204);
	reply_free(&r);
	assert_int_equal(ipxe_on(&s2, "02:c0:00:00:00:02", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_int_equal(strncmp(tok, "rpb_", 4), 0);
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
}

/* Replays of a dead token leave one event with a count, not one each. */
static void
test_refusals_coalesced(void **state)
{
	char key[600], script[4096], tok[128];
	struct reply r;
	json_t *ev;
	int i;

	(void)state;
	hostkey("replay", key, sizeof key);
	assert_int_equal(ipxe_on(&S, "02:ab:00:00:00:01", script, sizeof script), 200);
	arg_of(script, "token", tok, sizeof tok);
	assert_int_equal(reg(&S, tok, "[\"02:ab:00:00:00:01\"]", key, &r), 200);
	reply_free(&r);
	for (i = 0; i < 25; i++) {
		assert_int_equal(reg(&S, tok, "[\"02:ab:00:00:00:01\"]", key, &r), 401);
		reply_free(&r);
	}
	/* The newest of its kind, and the only one for this token and address. */
	ev = events(&S, "bootstrap_token.refused", NULL);
	assert_true(json_array_size(ev) >= 1);
	assert_int_equal(json_integer_value(json_object_get(
	                         json_object_get(json_array_get(ev, 0), "detail"), "count")),
	                 25);
	assert_non_null(strstr(jstr(json_array_get(ev, 0), "summary"), "(25 times)"));
	json_decref(ev);
}

/* ---- 7. Hostile bytes ------------------------------------------------------------------ */

static void
test_hostile_bytes(void **state)
{
	char path[300], log[65536];
	struct reply r;
	const char *line;

	(void)state;
	/* A %0a in a URL cannot forge an access-log line. */
	assert_int_equal(req(&S, S.admin, "GET",
	                     "/v1/x%0a2026-12-01T00:00:00.000Z%20error%20forged", NULL, NULL, 0,
	                     NULL, &r),
	                 404);
	reply_free(&r);
	usleep(600000); /* access lines are flushed every 250 ms */
	slurp(S.log, log, sizeof log);
	for (line = log; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		assert_int_not_equal(strncmp(line, "2026-12-01T00:00:00.000Z error forged", 37), 0);
	assert_non_null(strstr(log, "/v1/x\\x0a2026"));
	/* Invalid UTF-8 in a query is refused, never dropped (it widened a list, skipped a
	 * digest check). */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?rack=%ff", &r, NULL), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/images/u8?kind=other&sha256=%ff",
	                     "application/octet-stream", "abc", 3, NULL, &r),
	                 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/images/u8", &r, NULL), 404);
	reply_free(&r);
	/* Arguments beyond the 64 a request may carry are refused, not dropped. */
	{
		char q[2048] = "/v1/nodes?rack=nope";
		int i;

		for (i = 0; i < 64; i++)
			snprintf(q + strlen(q), sizeof q - strlen(q), "&a%d=1", i);
		assert_int_equal(call(&S, S.admin, "GET", q, &r, NULL), 400);
		assert_error(&r, 400, "BAD_QUERY");
		assert_non_null(strstr(r.body, "too many query arguments"));
		reply_free(&r);
	}
	/* ... and in a CSV cell. */
	{
		const char *csv = "name,rack\nbad\xff\xfe,\n";

		assert_int_equal(req(&S, S.admin, "POST", "/v1/import", "text/csv", csv,
		                     strlen(csv), NULL, &r),
		                 400);
		assert_non_null(strstr(r.body, "UTF-8"));
		reply_free(&r);
	}
	/* Token names follow the name rule. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/tokens", &r, "{s:s, s:s}", "name",
	                      "evil\nname", "role", "viewer"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	/* nosniff and a CSP on every answer, JSON and errors included. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1", &r, NULL), 200);
	assert_string_equal(r.nosniff, "nosniff");
	assert_non_null(strstr(r.csp, "default-src 'none'"));
	reply_free(&r);
	assert_int_equal(call(&S, NULL, "GET", "/v1/nodes", &r, NULL), 401);
	assert_string_equal(r.nosniff, "nosniff");
	assert_non_null(strstr(r.csp, "default-src 'none'"));
	reply_free(&r);
	snprintf(path, sizeof path, "/boot/ipxe?mac=02:ee:00:00:00:77");
	assert_int_equal(req(&S, NULL, "GET", path, NULL, NULL, 0, NULL, &r), 200);
	assert_string_equal(r.nosniff, "nosniff");
	reply_free(&r);
}

/* One token cannot hold every event stream the server has. */
static void
test_stream_cap_per_token(void **state)
{
	struct server s2;
	char viewer[128], other[128], cmd[1200], pids[16][16];
	struct reply r;
	int i;

	(void)state;
	start_with(&s2, "streams", "max_streams_per_token = 3\n");
	make_token(&s2, "viewer", viewer);
	make_token(&s2, "viewer", other);
	for (i = 0; i < 3; i++) {
		snprintf(cmd, sizeof cmd,
		         "curl -sN -H 'Authorization: Bearer %s' %s/v1/events/stream > /dev/null "
		         "2>&1 & "
		         "echo $! > %s/stream%d.pid",
		         viewer, s2.base, workdir, i);
		sh("%s", cmd);
	}
	usleep(800000);
	assert_int_equal(call(&s2, viewer, "GET", "/v1/events/stream", &r, NULL), 429);
	assert_error(&r, 429, "RATE_LIMITED");
	reply_free(&r);
	/* Another token still gets one (a HEAD-less probe: the stream starts, curl times out). */
	snprintf(cmd, sizeof cmd,
	         "curl -s -m 1 -o /dev/null -w '%%{http_code}' -H 'Authorization: Bearer %s' "
	         "%s/v1/events/stream | grep -qx 200",
	         other, s2.base);
	sh("%s", cmd);
	/* Closed streams give their slots back. */
	for (i = 0; i < 3; i++) {
		char p[300];

		snprintf(p, sizeof p, "%s/stream%d.pid", workdir, i);
		slurp(p, pids[i], sizeof pids[i]);
		sh("kill %d", atoi(pids[i]));
	}
	/* At once: a parked stream whose peer hung up ends without waiting for a keep-alive (the
	 * first of which, 15 s on, would not even notice). */
	usleep(300000);
	snprintf(cmd, sizeof cmd,
	         "curl -s -m 1 -o /dev/null -w '%%{http_code}' -H 'Authorization: Bearer %s' "
	         "%s/v1/events/stream | grep -qx 200",
	         viewer, s2.base);
	sh("%s", cmd);
	server_stop(&s2, SIGTERM);
	server_cleanup(&s2);
}

/* An agent inventory has its own cap (registration included). */
static void
test_inventory_cap(void **state)
{
	static const char *const expect[] = {"Expect: 100-continue", NULL};
	char key[600], atok[128], *big;
	size_t n = 5u << 20, i;
	struct reply r;

	(void)state;
	hostkey("inv", key, sizeof key);
	enroll_with_agent(&S, "invnode", "02:aa:00:00:00:09", key, atok, sizeof atok);
	big = malloc(n + 64);
	assert_non_null(big);
	memcpy(big, "{\"format\":1,\"pad\":\"", 19);
	for (i = 19; i < n; i++)
		big[i] = 'x';
	memcpy(big + n, "\"}", 3);
	/* Sent as curl and libcurl send big bodies, waiting for "100 Continue": the refusal
	 * comes instead, and no body bytes race the server's close (without it, the kernel's
	 * reset of a closed socket with unread bytes can beat the 413 to the client). */
	assert_int_equal(req(&S, atok, "POST", "/v1/agent/inventory", "application/json", big,
	                     strlen(big), expect, &r),
	                 413);
	assert_error(&r, 413, "TOO_LARGE");
	reply_free(&r);
	/* A registration carries one too: the same cap, before anything is read into memory. */
	assert_int_equal(req(&S, "rpb_whatever", "POST", "/v1/agent/register", "application/json",
	                     big, strlen(big), expect, &r),
	                 413);
	reply_free(&r);
	free(big);
	assert_int_equal(req(&S, atok, "POST", "/v1/agent/inventory", "application/json",
	                     "{\"format\":1}", 12, NULL, &r),
	                 204);
	reply_free(&r);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(workdir, sizeof workdir, "/tmp/rp-trust-XXXXXX");
	assert_non_null(mkdtemp(workdir));
	/* The server must keep its files private whatever umask it is started under. */
	umask(022);
	group_setup(state);
	boot_profile(&S);
	return 0;
}

static int
teardown(void **state)
{
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s", workdir);
	return group_teardown(state);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_discovery_cannot_take_over),
	        cmocka_unit_test(test_pin_replaced_only_while_provisioning),
	        cmocka_unit_test(test_script_token_bound_and_reused),
	        cmocka_unit_test(test_boot_source_check),
	        cmocka_unit_test(test_data_dir_private),
	        cmocka_unit_test(test_fresh_install_pxe),
	        cmocka_unit_test(test_rate_limits),
	        cmocka_unit_test(test_discovery_slots),
	        cmocka_unit_test(test_discovered_nodes_capped),
	        cmocka_unit_test(test_refusals_coalesced),
	        cmocka_unit_test(test_hostile_bytes),
	        cmocka_unit_test(test_stream_cap_per_token),
	        cmocka_unit_test(test_inventory_cap),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
