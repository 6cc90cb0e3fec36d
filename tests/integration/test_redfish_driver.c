/*
 * The Redfish driver's calls that later issues build on (BIOS settings, firmware inventory
 * and updates with task polling), straight against the mock BMC; and discovery on the
 * DMTF mockup trees served as they are, when ../shared/redfish-mockups is present.
 */
#include <stdlib.h>
#include <string.h>
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
	mock_start(&M, 2, NULL);
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

static struct rp_bmc *
open_bmc(struct mock *m, int i, const char *node)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}}", "driver", "redfish", "address",
	                      "127.0.0.1", "port", m->base + i, "username", "admin", "password",
	                      "secret", "options", "scheme", "http");
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	struct rp_bmc *b;

	assert_int_equal(rp_bmc_target_from_json(j, node, &t, &err), 0);
	json_decref(j);
	b = rp_bmc_open(&t, &err);
	if (b == NULL)
		fail_msg("open: %s", err.msg);
	return b;
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
	assert_string_not_equal(json_string_value(json_object_get(json_object_get(bios, "attributes"),
	                                                          "NumaNodesPerSocket")),
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
	assert_string_not_equal(json_string_value(json_object_get(json_object_get(bios, "attributes"),
	                                                          "NumaNodesPerSocket")),
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
			snprintf(v, sizeof v, "%s", json_string_value(json_object_get(c, "version")));
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
	assert_int_equal(rp_bmc_firmware_update(b, NULL, path, targets, task, sizeof task, &err), 0);
	assert_true(finish(b, task));
	assert_string_equal(version_of(b, "NIC0"), "3.2.1");
	json_decref(targets);
	unlink(path);
	rmdir(dir);
	st = mock_get(&M, 1, "/__mock/state");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "update_count"), "BMC")),
	                 1);
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
static void
test_not_a_bmc(void **state)
{
	char dir[] = "/tmp/rp-notbmc-XXXXXX";
	struct rp_bmc_target t;
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	enum rp_power p;
	json_t *j;
	pid_t pid;
	int port = 24000 + getpid() % 1000, i, rc = -1;

	(void)state;
	assert_non_null(mkdtemp(dir));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char ps[16];

		snprintf(ps, sizeof ps, "%d", port);
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(127);
		execlp("python3", "python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
		       dir, ps, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 100 && sh_rc("curl -s -o /dev/null http://127.0.0.1:%d/", port); i++)
		usleep(100000);
	j = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}}", "driver", "redfish", "address",
	              "127.0.0.1", "port", port, "username", "admin", "password", "secret", "options",
	              "scheme", "http");
	assert_int_equal(rp_bmc_target_from_json(j, "n", &t, &err), 0);
	json_decref(j);
	b = rp_bmc_open(&t, &err);
	if (b != NULL)
		rc = rp_bmc_power_get(b, &p, &err);
	rp_bmc_close(b);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	rmdir(dir);
	assert_int_equal(rc, -1);
	assert_int_equal(err.kind, RP_BMC_UNSUPPORTED);
	if (strstr(err.msg, "no Redfish service root (HTTP 404)") == NULL)
		fail_msg("%s", err.msg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bios),
	    cmocka_unit_test(test_firmware),
	    cmocka_unit_test(test_dmtf_trees),
	    cmocka_unit_test(test_not_a_bmc),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
