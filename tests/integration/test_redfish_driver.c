/*
 * The Redfish driver's calls that later issues build on (BIOS settings, firmware inventory
 * and updates with task polling), straight against the mock BMC; and discovery on the
 * DMTF mockup trees served as they are, when ../shared/redfish-mockups is present. Also
 * the links a BMC names: only its own origin is ever reached (rp_bmc_url_resolve).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bmc/bmc.h"
#include "harness.h"

static struct mock M;

static int
setup(void **state)
{
	(void)state;
	assert_int_equal(rp_bmc_global_init(), 0);
	mock_start(&M, 5, NULL);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	mock_stop(&M);
	rp_bmc_global_cleanup();
	return 0;
}

/* A handle on BMC i of m; timeout_ms 0: the driver's default. */
static struct rp_bmc *
open_with(struct mock *m, int i, const char *node, int timeout_ms)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}}", "driver", "redfish", "address",
	                      "127.0.0.1", "port", m->base + i, "username", "admin", "password",
	                      "secret", "options", "scheme", "http");
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	struct rp_bmc *b;

	if (timeout_ms)
		json_object_set_new(json_object_get(j, "options"), "timeout_ms",
		                    json_integer(timeout_ms));
	assert_int_equal(rp_bmc_target_from_json(j, node, &t, &err), 0);
	json_decref(j);
	b = rp_bmc_open(&t, &err);
	if (b == NULL)
		fail_msg("open: %s", err.msg);
	return b;
}

static struct rp_bmc *
open_bmc(struct mock *m, int i, const char *node)
{
	return open_with(m, i, node, 0);
}

/* Cycle the system (a boot event applies pending settings). */
static void
boot(struct rp_bmc *b)
{
	struct rp_bmc_err err;
	enum rp_power p = RP_POWER_UNKNOWN;
	int i;

	if (rp_bmc_power_set(b, RP_POWER_ACT_CYCLE, &err) < 0 &&
	    rp_bmc_power_set(b, RP_POWER_ACT_ON, &err) < 0)
		fail_msg("cycle: %s", err.msg);
	for (i = 0; i < 100 && p != RP_POWER_ON; i++) {
		usleep(50000);
		if (rp_bmc_power_get(b, &p, &err) < 0)
			fail_msg("power: %s", err.msg);
	}
	assert_int_equal(p, RP_POWER_ON);
}

static void
test_bios(void **state)
{
	struct rp_bmc *b = open_bmc(&M, 0, "n0");
	struct rp_bmc_err err;
	json_t *bios = NULL, *attrs;

	(void)state;
	assert_int_equal(rp_bmc_bios_get(b, &bios, &err), 0);
	assert_non_null(json_string_value(json_object_get(bios, "registry")));
	assert_non_null(json_object_get(json_object_get(bios, "attributes"), "NumaNodesPerSocket"));
	assert_string_not_equal(json_string_value(json_object_get(
	                                json_object_get(bios, "attributes"), "NumaNodesPerSocket")),
	                        "NPS4");
	json_decref(bios);
	/* Staged, not applied, until the next boot. */
	attrs = json_pack("{s:s, s:s}", "NumaNodesPerSocket", "NPS4", "Above4GDecoding", "Enabled");
	assert_int_equal(rp_bmc_bios_set(b, attrs, &err), 0);
	json_decref(attrs);
	assert_int_equal(rp_bmc_bios_get(b, &bios, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(bios, "pending"),
	                                                      "NumaNodesPerSocket")),
	                    "NPS4");
	assert_string_not_equal(json_string_value(json_object_get(
	                                json_object_get(bios, "attributes"), "NumaNodesPerSocket")),
	                        "NPS4");
	json_decref(bios);
	boot(b);
	assert_int_equal(rp_bmc_bios_get(b, &bios, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(bios, "attributes"),
	                                                      "NumaNodesPerSocket")),
	                    "NPS4");
	json_decref(bios);
	/* The BMC's validation errors come back as a refusal with its message. */
	attrs = json_pack("{s:s}", "NoSuchAttribute", "x");
	assert_int_equal(rp_bmc_bios_set(b, attrs, &err), -1);
	assert_int_equal(err.kind, RP_BMC_REJECTED);
	assert_non_null(strstr(err.msg, "400"));
	json_decref(attrs);
	rp_bmc_close(b);
}

/* Poll a task to its end, tolerating the 503s of a rebooting BMC. */
static int
finish(struct rp_bmc *b, const char *task)
{
	struct rp_bmc_err err;
	json_t *st = NULL;
	int done = 0, ok = 0, i;

	for (i = 0; i < 200 && !done; i++) {
		if (rp_bmc_task_poll(b, task, &done, &ok, &st, &err) < 0 && err.kind != RP_BMC_BUSY)
			fail_msg("poll: %s", err.msg);
		json_decref(st);
		st = NULL;
		usleep(20000);
	}
	assert_true(done);
	return ok;
}

static const char *
version_of(struct rp_bmc *b, const char *component)
{
	static char v[64];
	struct rp_bmc_err err;
	json_t *inv = NULL, *c;
	size_t i;
	int tries;

	v[0] = '\0';
	for (tries = 0; tries < 20; tries++) {
		if (rp_bmc_firmware_inventory(b, &inv, &err) == 0)
			break;
		if (err.kind != RP_BMC_BUSY)
			fail_msg("inventory: %s", err.msg);
		usleep(50000);
	}
	json_array_foreach(inv, i, c)
	{
		if (!strcmp(json_string_value(json_object_get(c, "component")), component))
			snprintf(v, sizeof v, "%s",
			         json_string_value(json_object_get(c, "version")));
	}
	json_decref(inv);
	return v;
}

static void
test_firmware(void **state)
{
	struct rp_bmc *b = open_bmc(&M, 1, "n1");
	struct rp_bmc_err err;
	json_t *inv = NULL, *targets, *st, *c;
	char task[512], path[128], dir[64];
	size_t i;
	int gpus = 0, cpld_fixed = 0;
	FILE *f;

	(void)state;
	assert_int_equal(rp_bmc_firmware_inventory(b, &inv, &err), 0);
	json_array_foreach(inv, i, c)
	{
		const char *id = json_string_value(json_object_get(c, "component"));

		gpus += !strncmp(id, "GPU", 3);
		if (!strcmp(id, "CPLD"))
			cpld_fixed = json_is_false(json_object_get(c, "updateable"));
	}
	assert_int_equal(gpus, 8);
	assert_true(cpld_fixed);
	json_decref(inv);
	/* SimpleUpdate from a URL: the task runs to the end and the version changes. */
	targets = json_pack("[s]", "/redfish/v1/UpdateService/FirmwareInventory/BMC");
	assert_int_equal(rp_bmc_firmware_update(b, "http://127.0.0.1:9/fw/bmc_2.1.0.bin", NULL,
	                                        targets, task, sizeof task, &err),
	                 0);
	assert_true(finish(b, task));
	assert_string_equal(version_of(b, "BMC"), "2.1.0");
	/* A bad image fails its task and changes nothing. */
	assert_int_equal(rp_bmc_firmware_update(b, "http://127.0.0.1:9/fw/bmc_bad_9.9.bin", NULL,
	                                        targets, task, sizeof task, &err),
	                 0);
	assert_false(finish(b, task));
	assert_string_equal(version_of(b, "BMC"), "2.1.0");
	json_decref(targets);
	/* A multipart push of a local file. */
	snprintf(dir, sizeof dir, "/tmp/rp-fw-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/nic0_3.2.1.bin", dir);
	f = fopen(path, "w");
	fputs("not really firmware\n", f);
	fclose(f);
	targets = json_pack("[s]", "/redfish/v1/UpdateService/FirmwareInventory/NIC0");
	assert_int_equal(rp_bmc_firmware_update(b, NULL, path, targets, task, sizeof task, &err),
	                 0);
	assert_true(finish(b, task));
	assert_string_equal(version_of(b, "NIC0"), "3.2.1");
	unlink(path);
	/* Gone: said before anything is sent (the BMC's count below stays at one update). */
	assert_int_equal(rp_bmc_firmware_update(b, NULL, path, targets, task, sizeof task, &err),
	                 -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "cannot read the image"));
	json_decref(targets);
	rmdir(dir);
	st = mock_get(&M, 1, "/__mock/state");
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(st, "update_count"), "NIC0")),
	        1);
	assert_int_equal(
	        json_integer_value(json_object_get(json_object_get(st, "update_count"), "BMC")), 1);
	json_decref(st);
	rp_bmc_close(b);
}

/* Discovery must work on every DMTF tree, served exactly as DMTF published it. */
static void
test_dmtf_trees(void **state)
{
	static const char *const trees[] = {"public-rackmount1", "public-tower"};
	char dir[512];
	size_t t;

	(void)state;
	for (t = 0; t < 2; t++) {
		const char *args[] = {"--static", dir, NULL};
		struct mock tree;
		struct rp_bmc *b;
		struct rp_bmc_err err;
		struct rp_bmc_identity id;
		enum rp_power p;
		json_t *inv = NULL, *bios = NULL;

		snprintf(dir, sizeof dir, "%s/../shared/redfish-mockups/%s", rp_test_src, trees[t]);
		if (access(dir, R_OK) != 0) {
			fprintf(stderr, "skipping %s: %s not present\n", trees[t], dir);
			continue;
		}
		mock_start(&tree, 1, args);
		b = open_bmc(&tree, 0, trees[t]);
		if (rp_bmc_power_get(b, &p, &err) < 0)
			fail_msg("%s: power: %s", trees[t], err.msg);
		assert_int_not_equal(p, RP_POWER_UNKNOWN);
		if (rp_bmc_identity(b, &id, &err) < 0)
			fail_msg("%s: identity: %s", trees[t], err.msg);
		assert_true(strlen(id.serial) > 0);
		assert_true(strlen(id.bmc_firmware) > 0);
		if (rp_bmc_firmware_inventory(b, &inv, &err) < 0)
			fail_msg("%s: inventory: %s", trees[t], err.msg);
		/* rackmount1 says Members@odata.count 2 but lists 3: the members count. */
		if (t == 0)
			assert_int_equal(json_array_size(inv), 3);
		else
			assert_true(json_array_size(inv) >= 2);
		if (rp_bmc_bios_get(b, &bios, &err) < 0)
			fail_msg("%s: bios: %s", trees[t], err.msg);
		assert_true(json_object_size(json_object_get(bios, "attributes")) > 0);
		json_decref(inv);
		json_decref(bios);
		rp_bmc_close(b);
		mock_stop(&tree);
	}
}

/* An HTTP server that is no BMC (a plain python http.server): the driver says so, with the
 * status it got, and calls it unsupported (404), not a protocol error with "HTTP 0". */
/* A plain web server (python3's http.server) serving dir on 127.0.0.1:port, up when this
 * returns. */
static pid_t
static_server(const char *dir, int port)
{
	pid_t pid;
	int i;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char ps[16];

		snprintf(ps, sizeof ps, "%d", port);
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(127);
		execlp("python3", "python3", "-m", "http.server", "--bind", "127.0.0.1",
		       "--directory", dir, ps, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 100 && sh_rc("curl -s -o /dev/null http://127.0.0.1:%d/", port); i++)
		usleep(100000);
	return pid;
}

/* A power read from the Redfish driver against whatever static_server serves from dir. */
static int
power_from(const char *dir, int port, struct rp_bmc_err *err)
{
	struct rp_bmc_target t;
	struct rp_bmc *b;
	enum rp_power p;
	json_t *j;
	pid_t pid;
	int rc = -1;

	pid = static_server(dir, port);
	j = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}}", "driver", "redfish", "address",
	              "127.0.0.1", "port", port, "username", "admin", "password", "secret",
	              "options", "scheme", "http");
	assert_int_equal(rp_bmc_target_from_json(j, "n", &t, err), 0);
	json_decref(j);
	b = rp_bmc_open(&t, err);
	if (b != NULL)
		rc = rp_bmc_power_get(b, &p, err);
	rp_bmc_close(b);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return rc;
}

static void
test_not_a_bmc(void **state)
{
	char dir[] = "/tmp/rp-notbmc-XXXXXX";
	struct rp_bmc_err err = {0};
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	rc = power_from(dir, 24000 + getpid() % 1000, &err);
	rmdir(dir);
	assert_int_equal(rc, -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	if (strstr(err.msg, "no Redfish service root (HTTP 404)") == NULL)
		fail_msg("%s", err.msg);
}

/* A peer that answers without end (or with 9 MiB for a service root) is cut off at the cap,
 * said as such, not read into memory. */
static void
test_huge_answer(void **state)
{
	char dir[] = "/tmp/rp-hugebmc-XXXXXX";
	struct rp_bmc_err err = {0};
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(sh_rc("mkdir -p %s/redfish/v1 && head -c 9437184 /dev/zero | tr '\\0' ' ' "
	                       "> %s/redfish/v1/index.html",
	                       dir, dir),
	                 0);
	rc = power_from(dir, 25000 + getpid() % 1000, &err);
	assert_int_equal(sh_rc("rm -rf %s", dir), 0);
	assert_int_equal(rc, -1);
	assert_int_equal(err.kind, RP_BMC_PROTOCOL);
	if (strstr(err.msg, "answer over 8388608 bytes") == NULL)
		fail_msg("%s", err.msg);
}

/* ---- Links off the BMC's origin ---------------------------------------------------------- */

struct resolve_case {
	const char *origin, *link;
	const char *want;   /* the URL, or NULL: refused */
	const char *reason; /* refused: a part of why */
};

/* The resolver on hostile input: only the origin itself is ever an answer. */
static void
test_url_resolve(void **state)
{
	static const char o[] = "http://127.0.0.1:8000";
	static const struct resolve_case cases[] = {
	        {o, "/redfish/v1/", "http://127.0.0.1:8000/redfish/v1/", NULL},
	        {o, "/redfish/v1/Entries?$skip=50",
	         "http://127.0.0.1:8000/redfish/v1/Entries?$skip=50", NULL},
	        {o, "/a/...b/x?y=../z", "http://127.0.0.1:8000/a/...b/x?y=../z", NULL},
	        /* Absolute on the origin: the path only, sent to the origin as we spell it. */
	        {o, "http://127.0.0.1:8000/redfish/v1/SessionService/Sessions",
	         "http://127.0.0.1:8000/redfish/v1/SessionService/Sessions", NULL},
	        {o, "HTTP://127.0.0.1:8000/x", "http://127.0.0.1:8000/x", NULL},
	        {o, "http://127.0.0.1:08000/x", "http://127.0.0.1:8000/x", NULL},
	        {o, "http://127.0.0.1:8000", "http://127.0.0.1:8000/", NULL},
	        {o, "http://127.0.0.1:8000?a=1", "http://127.0.0.1:8000/?a=1", NULL},
	        /* Another host, port or scheme. */
	        {o, "http://127.0.0.1:9999/redfish/v1/SessionService/Sessions", NULL, "port 9999"},
	        {o, "http://127.0.0.2:8000/x", NULL, "host 127.0.0.2"},
	        {o, "http://127.0.0.1/x", NULL, "port 80 "},
	        {o, "https://127.0.0.1:8000/x", NULL, "scheme https"},
	        {o, "http://evil.example#@127.0.0.1:8000/", NULL, "host evil.example"},
	        {o, "http://localhost:8000/x", NULL, "host localhost"},
	        {o, "ftp://127.0.0.1:8000/x", NULL, "scheme ftp"},
	        {o, "file:///etc/passwd", NULL, "scheme file"},
	        {o, "gopher://127.0.0.1:8000/_x", NULL, "scheme gopher"},
	        {o, "javascript:alert(1)", NULL, "scheme javascript"},
	        {o, "http:/x", NULL, "no //host"},
	        {o, "http://:8000/x", NULL, "no host"},
	        {o, "http://127.0.0.1:/x", NULL, "port is malformed"},
	        {o, "http://127.0.0.1:65536/x", NULL, "port is malformed"},
	        {o, "http://127.0.0.1:8000x/", NULL, "port is malformed"},
	        {o, "http://127.0.0.1:0000008000/", NULL, "port is malformed"},
	        /* Protocol-relative, user information, relative references. */
	        {o, "//evil.example/x", NULL, "protocol-relative"},
	        {o, "///x", NULL, "protocol-relative"},
	        {o, "http://user@127.0.0.1:8000/", NULL, "user information"},
	        {o, "http://admin:secret@127.0.0.1:8000/x", NULL, "user information"},
	        {o, "http://127.0.0.1:8000@evil.example/", NULL, "user information"},
	        {o, "redfish/v1/Systems", NULL, "neither a path"},
	        {o, "?x", NULL, "neither a path"},
	        {o, "", NULL, "empty"},
	        {o, NULL, NULL, "empty"},
	        /* Bytes that would change the request, and dot segments curl would resolve. */
	        {o, "/redfish/v1\r\nX-Evil: 1", NULL, "line break"},
	        {o, "/redfish/v1\nHost: evil", NULL, "line break"},
	        {o, "/a b", NULL, "a space"},
	        {o, "/a\tb", NULL, "control character"},
	        {o, "/a\\b", NULL, "backslash"},
	        {o, "http://127.0.0.1:8000\\@evil.example/", NULL, "backslash"},
	        {o, "/caf\xc3\xa9", NULL, "non-ASCII"},
	        {o, "/redfish/v1/../../x", NULL, "dot segment"},
	        {o, "/redfish/./v1", NULL, "dot segment"},
	        {o, "/redfish/..?x", NULL, "dot segment"},
	        {o, "http://127.0.0.1:8000/..", NULL, "dot segment"},
	        /* Default ports and host case, with and without a port in the origin. */
	        {"https://bmc.example.com", "https://bmc.example.com:443/redfish/v1",
	         "https://bmc.example.com/redfish/v1", NULL},
	        {"https://bmc.example.com:443", "https://bmc.example.com/x",
	         "https://bmc.example.com:443/x", NULL},
	        {"https://bmc.example.com", "https://BMC.Example.COM/x",
	         "https://bmc.example.com/x", NULL},
	        {"http://h", "http://h:80/x", "http://h/x", NULL},
	        {"https://bmc.example.com", "http://bmc.example.com/x", NULL, "scheme http"},
	        {"https://bmc.example.com", "http://bmc.example.com:443/x", NULL, "scheme http"},
	        {"https://bmc.example.com", "https://bmc.example.com:8443/x", NULL, "port 8443"},
	        {"https://bmc.example.com", "https://bmc.example.com.evil.net/x", NULL, "host"},
	        {"https://bmc.example.com", "https://bmc.example.co/x", NULL, "host"},
	        /* IPv6 in brackets. */
	        {"https://[fd00::1]:8443", "https://[FD00::1]:8443/x", "https://[fd00::1]:8443/x",
	         NULL},
	        {"https://[fd00::1]:8443", "/x", "https://[fd00::1]:8443/x", NULL},
	        {"http://[::1]", "http://[::1]:80/x", "http://[::1]/x", NULL},
	        {"https://[fd00::1]:8443", "https://[fd00::2]:8443/x", NULL, "host [fd00::2]"},
	        {"https://[fd00::1]:8443", "https://[fd00::1]/x", NULL, "port 443"},
	        {"https://[fd00::1]:8443", "https://[fd00::1:8443/x", NULL, "IPv6"},
	        {"https://[fd00::1]:8443", "https://fd00::1:8443/x", NULL, "port is malformed"},
	        /* Not an origin at all: nothing is resolved against it. */
	        {"127.0.0.1:8000", "/x", NULL, "not http[s]://host[:port]"},
	        {"http://127.0.0.1:8000/redfish", "/x", NULL, "not http[s]://host[:port]"},
	        {NULL, "/x", NULL, "not http[s]://host[:port]"},
	};
	char out[1024], why[256], *big;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct resolve_case *c = &cases[i];
		int rc;

		snprintf(out, sizeof out, "untouched");
		why[0] = '\0';
		rc = rp_bmc_url_resolve(c->origin, c->link, out, sizeof out, why, sizeof why);
		if (c->want && (rc != 0 || strcmp(out, c->want) != 0))
			fail_msg("%s + %s: rc %d, %s (%s), wanted %s", c->origin, c->link, rc, out,
			         why, c->want);
		if (c->want)
			continue;
		if (rc != -1 || strcmp(out, "untouched") != 0 || strstr(why, c->reason) == NULL)
			fail_msg("%s + %s: rc %d, out %s, why '%s', wanted a refusal with '%s'",
			         c->origin, c->link ? c->link : "(null)", rc, out, why, c->reason);
		/* The message is one clean line, never quoting user information. */
		if (strpbrk(why, "\r\n\t") || strstr(why, "secret") || strstr(why, "user@"))
			fail_msg("%s: why '%s'", c->link, why);
		if (c->link && c->link[0] && !strstr(c->reason, "not http[s]") &&
		    !strstr(c->link, "@") && !strpbrk(c->link, "\r\n\t") &&
		    !strstr(c->link, "\xc3") && !strstr(why, c->link))
			fail_msg("%s: why '%s' does not name the link", c->link, why);
	}
	/* Over-long links: refused, and quoted only in part. */
	big = malloc(RP_BMC_LINK_MAX + 2);
	assert_non_null(big);
	big[0] = '/';
	memset(big + 1, 'a', RP_BMC_LINK_MAX);
	big[RP_BMC_LINK_MAX + 1] = '\0';
	assert_int_equal(rp_bmc_url_resolve(o, big, out, sizeof out, why, sizeof why), -1);
	assert_non_null(strstr(why, "longer than"));
	assert_non_null(strstr(why, "aaa...\""));
	assert_true(strlen(why) < 200);
	/* Short enough for a link, too long for the URL buffer. */
	big[1000] = '\0';
	assert_int_equal(rp_bmc_url_resolve(o, big, out, 1000, why, sizeof why), -1);
	assert_non_null(strstr(why, "does not fit"));
	assert_int_equal(rp_bmc_url_resolve(o, big, out, sizeof out, why, sizeof why), 0);
	assert_int_equal(strlen(out), strlen(o) + 1000);
	free(big);
	/* A small why is cut, not overrun. */
	memset(why, 'x', sizeof why);
	assert_int_equal(rp_bmc_url_resolve(o, "//evil/x", out, sizeof out, why, 8), -1);
	assert_int_equal(strlen(why), 7);
}

/* A loopback listener that never answers: it only counts who connects (and keeps what the
 * first one sent). Connections queue in the kernel, so nothing needs to accept meanwhile. */
struct sink {
	int fd, port, hits;
	char seen[2048];
};

static void
sink_open(struct sink *k)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;

	memset(k, 0, sizeof *k);
	k->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(k->fd >= 0);
	assert_int_equal(bind(k->fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(k->fd, 64), 0);
	assert_int_equal(getsockname(k->fd, (struct sockaddr *)&a, &len), 0);
	k->port = ntohs(a.sin_port);
}

/* Connections made to the sink so far. */
static int
sink_hits(struct sink *k)
{
	struct pollfd p = {.fd = k->fd, .events = POLLIN};

	while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
		int c = accept(k->fd, NULL, NULL);

		if (c < 0)
			break;
		if (k->hits++ == 0) {
			ssize_t n = recv(c, k->seen, sizeof k->seen - 1, MSG_DONTWAIT);

			k->seen[n > 0 ? n : 0] = '\0';
		}
		close(c);
	}
	return k->hits;
}

static void
sink_close(struct sink *k)
{
	close(k->fd);
}

/* A handle on BMC i of M with a short timeout: without the check a request to the sink would
 * wait that long for an answer that never comes. */
static struct rp_bmc *
open_quick(int i, const char *node)
{
	return open_with(&M, i, node, 1500);
}

/* BMC i names its `kind` links on origin (NULL: its own links again). */
static void
links_on(int i, const char *kind, const char *origin)
{
	char cfg[256];

	if (origin)
		snprintf(cfg, sizeof cfg, "{\"link_origins\":{\"%s\":\"%s\"}}", kind, origin);
	else
		snprintf(cfg, sizeof cfg, "{\"link_origins\":{}}");
	mock_post(&M, i, "/__mock/config", cfg);
}

/* The call failed as a protocol error that names the link (on the sink's port, with the path
 * part `path`), and the sink heard nothing: no connection, no credentials. */
static void
refused(struct sink *k, int rc, const struct rp_bmc_err *err, const char *what, const char *path)
{
	char at[64];

	snprintf(at, sizeof at, "127.0.0.1:%d%s", k->port, path);
	if (rc != -1 || err->kind != RP_BMC_PROTOCOL || strstr(err->msg, at) == NULL ||
	    strstr(err->msg, "refused") == NULL)
		fail_msg("%s: rc %d, %s: %s (wanted a protocol error naming %s)", what, rc,
		         rp_bmc_err_name(err->kind), rc ? err->msg : "", at);
	assert_null(strstr(err->msg, "secret"));
	if (sink_hits(k) != 0)
		fail_msg("%s: the other port was reached: %.300s", what, k->seen);
}

static int
resets_seen(int i)
{
	json_t *st = mock_get(&M, i, "/__mock/state"), *a;
	size_t n;
	int resets = 0;

	json_array_foreach(json_object_get(st, "actions"), n, a) resets +=
	        json_object_get(a, "reset_type") != NULL;
	json_decref(st);
	return resets;
}

/* Each kind of link a BMC names, pointed at another loopback port: the operation that follows
 * it fails before anything is sent there. BMC 2. */
static void
test_foreign_links(void **state)
{
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	struct sink k;
	char origin[64];
	enum rp_power p;
	json_t *reg = NULL;
	int rc;

	(void)state;
	sink_open(&k);
	snprintf(origin, sizeof origin, "http://127.0.0.1:%d", k.port);

	/* The service root's Links.Sessions: the login would POST the password there. */
	links_on(2, "sessions", origin);
	b = open_quick(2, "evil-sessions");
	rc = rp_bmc_power_get(b, &p, &err);
	refused(&k, rc, &err, "Sessions link", "/redfish/v1/SessionService/Sessions");
	rp_bmc_close(b);
	links_on(2, NULL, NULL);
	/* Once the BMC's links are its own again, nothing refused before is remembered. */
	b = open_quick(2, "evil-sessions");
	if (rp_bmc_power_get(b, &p, &err) < 0)
		fail_msg("after the Sessions link is fixed: %s", err.msg);
	rp_bmc_close(b);

	/* The session's Location: the logout would DELETE there with the token. */
	links_on(2, "session_location", origin);
	b = open_quick(2, "evil-location");
	rc = rp_bmc_power_get(b, &p, &err);
	refused(&k, rc, &err, "session Location", "/redfish/v1/SessionService/Sessions/");
	rp_bmc_close(b);
	links_on(2, NULL, NULL);
	/* Nor does the shutdown's logout of cached sessions reach it. */
	rp_bmc_global_cleanup();
	assert_int_equal(rp_bmc_global_init(), 0);
	assert_int_equal(sink_hits(&k), 0);

	/* The ComputerSystem.Reset target: the action would go there with the token. */
	links_on(2, "reset_target", origin);
	b = open_quick(2, "evil-reset");
	rc = rp_bmc_power_set(b, RP_POWER_ACT_ON, &err);
	refused(&k, rc, &err, "Reset target", "/redfish/v1/Systems/System.Embedded.1/Actions/");
	assert_int_equal(resets_seen(2), 0);
	rp_bmc_close(b);
	links_on(2, NULL, NULL);

	/* A registry's Location Uri. */
	links_on(2, "registry", origin);
	b = open_quick(2, "evil-registry");
	rc = rp_bmc_bios_registry(b, "BiosAttributeRegistryGX8.v1_0_0", &reg, &err);
	refused(&k, rc, &err, "registry Location", "/redfish/v1/Registries/");
	assert_null(reg);
	rp_bmc_close(b);
	links_on(2, NULL, NULL);
	sink_close(&k);
}

/* Firmware: the push URI, the task monitor of an update and a task handed back to poll. BMC 3. */
static void
test_foreign_tasks(void **state)
{
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	struct sink k;
	char origin[64], task[512] = "", url[160], dir[] = "/tmp/rp-fwlink-XXXXXX", path[160];
	json_t *targets = json_pack("[s]", "/redfish/v1/UpdateService/FirmwareInventory/BMC"), *st;
	int rc, done = 0, ok = 0;
	FILE *f;

	(void)state;
	sink_open(&k);
	snprintf(origin, sizeof origin, "http://127.0.0.1:%d", k.port);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/bmc_2.5.0.bin", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not really firmware\n", f);
	fclose(f);

	/* MultipartHttpPushUri: the image and the token would go there. */
	links_on(3, "push_uri", origin);
	b = open_quick(3, "evil-push");
	rc = rp_bmc_firmware_update(b, NULL, path, targets, task, sizeof task, &err);
	refused(&k, rc, &err, "MultipartHttpPushUri", "/redfish/v1/UpdateService/upload");
	assert_string_equal(task, "");
	st = mock_get(&M, 3, "/__mock/state");
	assert_int_equal(json_object_size(json_object_get(st, "tasks")), 0);
	json_decref(st);
	rp_bmc_close(b);
	links_on(3, NULL, NULL);

	/* The update's task monitor (202 Location): the update started, but its task is not one
	 * to poll with the token. */
	links_on(3, "task_monitor", origin);
	b = open_quick(3, "evil-task");
	rc = rp_bmc_firmware_update(b, "http://127.0.0.1:9/fw/bmc_2.6.0.bin", NULL, targets, task,
	                            sizeof task, &err);
	refused(&k, rc, &err, "task monitor", "/redfish/v1/TaskService/TaskMonitors/");
	assert_string_equal(task, "");
	/* Looked up by image name, its TaskMonitor is just as foreign. */
	rc = rp_bmc_task_find(b, "bmc_2.6.0", task, sizeof task, &err);
	refused(&k, rc, &err, "found task", "/redfish/v1/TaskService/TaskMonitors/");
	assert_string_equal(task, "");
	rp_bmc_close(b);
	links_on(3, NULL, NULL);

	/* A task URI handed back to poll (as a job stored it) is resolved the same way. */
	b = open_quick(3, "evil-poll");
	snprintf(url, sizeof url, "%s/redfish/v1/TaskService/TaskMonitors/1", origin);
	st = NULL;
	rc = rp_bmc_task_poll(b, url, &done, &ok, &st, &err);
	refused(&k, rc, &err, "task poll", "/redfish/v1/TaskService/TaskMonitors/1");
	assert_null(st);
	snprintf(url, sizeof url, "//127.0.0.1:%d/redfish/v1/TaskService/TaskMonitors/1", k.port);
	rc = rp_bmc_task_poll(b, url, &done, &ok, &st, &err);
	refused(&k, rc, &err, "protocol-relative task", "/redfish/v1/TaskService/TaskMonitors/1");
	/* The task on the BMC itself still runs to its end. */
	assert_true(finish(b, "/redfish/v1/TaskService/TaskMonitors/1"));
	rp_bmc_close(b);
	json_decref(targets);
	unlink(path);
	rmdir(dir);
	sink_close(&k);
}

/* Absolute links on the BMC's own origin (as many BMCs write them) work for every kind: login,
 * logout, power, registry, push, task. BMC 4. */
static void
test_same_origin_links(void **state)
{
	static const char *const kinds[] = {"sessions",     "session_location", "push_uri",
	                                    "task_monitor", "reset_target",     "registry"};
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	char cfg[768], task[512], dir[] = "/tmp/rp-fwlink-XXXXXX", path[160];
	json_t *reg = NULL, *targets, *st;
	size_t i, n;
	FILE *f;

	(void)state;
	n = (size_t)snprintf(cfg, sizeof cfg, "{\"link_origins\":{");
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		n += (size_t)snprintf(cfg + n, sizeof cfg - n, "%s\"%s\":\"http://127.0.0.1:%d\"",
		                      i ? "," : "", kinds[i], M.base + 4);
	snprintf(cfg + n, sizeof cfg - n, "}}");
	mock_post(&M, 4, "/__mock/config", cfg);
	b = open_quick(4, "own-links");
	if (rp_bmc_power_set(b, RP_POWER_ACT_ON, &err) < 0)
		fail_msg("power on: %s", err.msg);
	assert_int_equal(resets_seen(4), 1);
	if (rp_bmc_bios_registry(b, "BiosAttributeRegistryGX8.v1_0_0", &reg, &err) < 0)
		fail_msg("registry: %s", err.msg);
	assert_true(json_array_size(reg) > 0);
	json_decref(reg);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/nic0_3.3.0.bin", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not really firmware\n", f);
	fclose(f);
	targets = json_pack("[s]", "/redfish/v1/UpdateService/FirmwareInventory/NIC0");
	if (rp_bmc_firmware_update(b, NULL, path, targets, task, sizeof task, &err) < 0)
		fail_msg("push: %s", err.msg);
	json_decref(targets);
	unlink(path);
	rmdir(dir);
	assert_true(strncmp(task, "http://127.0.0.1:", 17) == 0);
	assert_true(finish(b, task));
	assert_string_equal(version_of(b, "NIC0"), "3.3.0");
	assert_int_equal(rp_bmc_task_find(b, "nic0_3.3.0", task, sizeof task, &err), 0);
	rp_bmc_close(b);
	/* The logout at shutdown follows the absolute session Location on the BMC. */
	st = mock_get(&M, 4, "/__mock/state");
	assert_int_equal(json_integer_value(json_object_get(st, "sessions")), 1);
	json_decref(st);
	rp_bmc_global_cleanup();
	assert_int_equal(rp_bmc_global_init(), 0);
	st = mock_get(&M, 4, "/__mock/state");
	assert_int_equal(json_integer_value(json_object_get(st, "sessions")), 0);
	json_decref(st);
	mock_post(&M, 4, "/__mock/config", "{\"link_origins\":{}}");
}

/* A BMC's error text reaches job errors and logs: one that echoes the password gets "***".
 * (fail_next_503 5: the driver's own 5 tries of the request all meet a 503.) */
static void
test_error_text_scrubbed(void **state)
{
	struct rp_bmc *b;
	struct rp_bmc_err err;
	enum rp_power p;

	(void)state;
	b = open_bmc(&M, 3, "00000000-0000-4000-8000-00000000e77e");
	if (rp_bmc_power_get(b, &p, &err) < 0)
		fail_msg("power: %s", err.msg);
	mock_post(&M, 3, "/__mock/config",
	          "{\"fail_next_503\":5,\"error_text\":\"login as admin/secret refused; "
	          "secret secret\"}");
	assert_int_equal(rp_bmc_power_get(b, &p, &err), -1);
	assert_null(strstr(err.msg, "secret"));
	assert_non_null(strstr(err.msg, "login as admin/*** refused; *** ***"));
	/* Where the message is cut, no first letters of it are left either. */
	{
		char body[600];

		snprintf(body, sizeof body,
		         "{\"fail_next_503\":5,\"error_text\":\"%0195dsecret and more\"}", 0);
		mock_post(&M, 3, "/__mock/config", body);
		assert_int_equal(rp_bmc_power_get(b, &p, &err), -1);
		assert_null(strstr(err.msg, "sec"));
	}
	mock_post(&M, 3, "/__mock/config", "{\"error_text\":\"\"}");
	rp_bmc_close(b);
}

/* A proxy the environment names never sees BMC traffic (the credentials go to the BMC only). */
static void
test_no_proxy(void **state)
{
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	struct sink k;
	char proxy[64];
	enum rp_power p;

	(void)state;
	sink_open(&k);
	snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", k.port);
	setenv("http_proxy", proxy, 1);
	setenv("HTTPS_PROXY", proxy, 1);
	setenv("ALL_PROXY", proxy, 1);
	b = open_quick(1, "proxied");
	if (rp_bmc_power_get(b, &p, &err) < 0)
		fail_msg("power through a would-be proxy: %s", err.msg);
	rp_bmc_close(b);
	unsetenv("http_proxy");
	unsetenv("HTTPS_PROXY");
	unsetenv("ALL_PROXY");
	if (sink_hits(&k) != 0)
		fail_msg("the proxy was used: %.300s", k.seen);
	sink_close(&k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_bios),
	        cmocka_unit_test(test_firmware),
	        cmocka_unit_test(test_dmtf_trees),
	        cmocka_unit_test(test_not_a_bmc),
	        cmocka_unit_test(test_huge_answer),
	        cmocka_unit_test(test_url_resolve),
	        cmocka_unit_test(test_foreign_links),
	        cmocka_unit_test(test_foreign_tasks),
	        cmocka_unit_test(test_same_origin_links),
	        cmocka_unit_test(test_error_text_scrubbed),
	        cmocka_unit_test(test_no_proxy),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
