/* Rack acceptance's comparisons on the agent's own inventories of the GPU server fixtures
 * (tests/fixtures/inventory): exact findings, and none for a server that matches its order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accept/accept.h"
#include "inventory.h"

#ifndef RP_FIXTURES
#error "RP_FIXTURES must be defined"
#endif

/* What an HGX H100 order says (docs/acceptance.md). */
static const char *const BOM =
        "{\"gpus\": {\"count\": 8, \"model\": \"H100\"}, \"memory\": {\"total_gib\": 2048, "
        "\"dimms\": 32}, \"cpu\": {\"model\": \"Xeon(R) Platinum 8480\", \"sockets\": 2}, "
        "\"disks\": {\"count\": 8, \"min_size_gb\": 3800}, \"nics\": {\"count\": 3, "
        "\"min_speed_mbps\": 1000}, \"hcas\": {\"count\": 8, \"link_layer\": \"InfiniBand\", "
        "\"rate_gbps\": 400}}";

static json_t *
fixture(const char *name)
{
	char root[512];
	json_t *j;

	snprintf(root, sizeof root, "%s/%s", RP_FIXTURES, name);
	j = rp_agent_inventory(root);
	assert_non_null(j);
	return j;
}

static json_t *
bom(void)
{
	json_t *b = json_loads(BOM, 0, NULL), *detail = NULL;

	assert_non_null(b);
	assert_int_equal(rp_accept_bom_check(b, &detail), RP_ERR_OK);
	return b;
}

/* The finding about item, or NULL. */
static json_t *
about(json_t *findings, const char *item)
{
	json_t *f;
	size_t i;

	json_array_foreach(findings, i, f)
	{
		if (!strcmp(json_string_value(json_object_get(f, "item")), item))
			return f;
	}
	return NULL;
}

static const char *
msg(json_t *f)
{
	return json_string_value(json_object_get(f, "message"));
}

static void
test_matching_server(void **state)
{
	json_t *inv = fixture("gpu-h100-8x"), *b = bom(), *fs = json_array(), *cab;
	int unv = -1;

	(void)state;
	if (rp_accept_bom(b, inv, fs) != 0)
		fail_msg("%s", json_dumps(fs, JSON_INDENT(1)));
	cab = json_loads("[{\"node\": \"n\", \"interface\": \"eno1\", \"switch\": \"leaf-r01-a\", "
	                 "\"port\": \"Ethernet1/7\"}, {\"node\": \"n\", \"interface\": "
	                 "\"eno2\", \"switch\": \"leaf-r01-b\", \"port\": \"Ethernet1/7\"}]",
	                 0, NULL);
	if (rp_accept_links(b, cab, inv, fs, &unv) != 0)
		fail_msg("%s", json_dumps(fs, JSON_INDENT(1)));
	assert_int_equal(unv, 0);
	json_decref(cab);
	json_decref(fs);
	json_decref(b);
	json_decref(inv);
}

static void
test_missing_gpu_and_dimms(void **state)
{
	json_t *inv = fixture("gpu-h100-7x-missing"), *b = bom(), *fs = json_array(), *f;

	(void)state;
	assert_int_equal(rp_accept_bom(b, inv, fs), 3);
	f = about(fs, "gpus.count");
	assert_non_null(f);
	assert_string_equal(msg(f), "GPU count 7, expected 8");
	assert_int_equal(json_integer_value(json_object_get(f, "actual")), 7);
	f = about(fs, "memory.dimms");
	assert_non_null(f);
	assert_string_equal(msg(f), "DIMM count 30, expected 32");
	assert_non_null(
	        strstr(json_string_value(json_object_get(f, "fix")), "P1-DIMMF2, P2-DIMMB2"));
	f = about(fs, "memory.total_gib");
	assert_non_null(f);
	assert_string_equal(msg(f), "memory 1,920 GiB, expected 2,048 GiB");
	json_decref(fs);
	json_decref(b);
	json_decref(inv);
}

static void
test_other_orders(void **state)
{
	json_t *inv = fixture("gpu-h100-8x"), *fs = json_array(), *f, *detail = NULL;
	json_t *b = json_loads("{\"gpus\": {\"model\": \"B200\"}, \"cpu\": {\"sockets\": 4}, "
	                       "\"disks\": {\"count\": 9, \"min_size_gb\": 3800}, \"hcas\": "
	                       "{\"count\": 1, \"link_layer\": \"Ethernet\", \"rate_gbps\": 400}}",
	                       0, NULL);

	(void)state;
	assert_int_equal(rp_accept_bom_check(b, &detail), RP_ERR_OK);
	assert_int_equal(rp_accept_bom(b, inv, fs), 3);
	assert_string_equal(msg(about(fs, "gpus.model")),
	                    "GPU 0 is NVIDIA H100 80GB HBM3, expected B200");
	assert_string_equal(msg(about(fs, "cpu.sockets")), "CPU sockets 2, expected 4");
	assert_string_equal(msg(about(fs, "disks.count")),
	                    "disks (of the ordered size) 8, expected 9");
	assert_null(about(fs, "hcas.count"));
	/* The RoCE port runs at 200 Gb/s: rated 400. */
	json_array_clear(fs);
	assert_int_equal(rp_accept_links(b, NULL, inv, fs, NULL), 1);
	f = about(fs, "link.mlx5_8");
	assert_non_null(f);
	assert_string_equal(msg(f), "mlx5_8: 200 Gb/s, rated 400 Gb/s");
	json_decref(fs);
	json_decref(b);
	json_decref(inv);
}

/* Cabling against LLDP: a swapped port, an interface by MAC, an unknown interface; a node
 * without lldpd is "not reported", never passed. */
static void
test_cabling(void **state)
{
	json_t *inv = fixture("gpu-h100-8x"), *vm = fixture("minimal"), *fs = json_array(), *f;
	json_t *b = bom();
	json_t *cab = json_loads(
	        "[{\"node\": \"n\", \"interface\": \"eno1\", \"switch\": \"leaf-r01-a\", \"port\": "
	        "\"Ethernet1/8\"}, {\"node\": \"n\", \"interface\": \"3C:EC:EF:6A:1B:21\", "
	        "\"switch\": "
	        "\"leaf-r01-b\", \"port\": \"Ethernet1/7\"}, {\"node\": \"n\", \"interface\": "
	        "\"eth9\", \"switch\": \"x\", \"port\": \"y\"}]",
	        0, NULL);
	int unv = -1;

	(void)state;
	assert_int_equal(rp_accept_links(b, cab, inv, fs, &unv), 2);
	assert_int_equal(unv, 0);
	f = about(fs, "cabling.eno1");
	assert_non_null(f);
	assert_string_equal(msg(f), "eno1: cabled to leaf-r01-a Ethernet1/7, plan says leaf-r01-a "
	                            "Ethernet1/8");
	assert_null(about(fs, "cabling.3C:EC:EF:6A:1B:21"));
	assert_non_null(about(fs, "cabling.eth9"));
	json_array_clear(fs);
	json_array_remove(cab, 2);
	{
		json_t *none = json_object();

		assert_int_equal(rp_accept_links(none, cab, vm, fs, &unv), 2);
		json_decref(none);
	}
	assert_int_equal(unv, 0); /* no such NICs on that machine at all */
	json_decref(cab);
	json_decref(fs);
	json_decref(vm);
	json_decref(b);
	json_decref(inv);
}

/* A small VM without dmidecode: the kernel's total against the order, within tolerance_pct
 * (5 by default); below 4 GiB the message speaks MiB. */
static void
test_memory_tolerance(void **state)
{
	static const struct {
		const char *bom;
		long long mib;
		const char *message; /* NULL: no finding */
	} cases[] = {
	        {"{\"memory\": {\"total_gib\": 0.5, \"tolerance_pct\": 20}}", 480, NULL},
	        {"{\"memory\": {\"total_gib\": 0.5, \"tolerance_pct\": 20}}", 720,
	         "memory 720 MiB, expected 512 MiB (kernel total, 20 % tolerance; dmidecode "
	         "absent)"},
	        {"{\"memory\": {\"total_gib\": 0.5}}", 480,
	         "memory 480 MiB, expected 512 MiB (kernel total, 5 % tolerance; dmidecode "
	         "absent)"},
	        {"{\"memory\": {\"total_gib\": 0.5}}", 500, NULL},
	        {"{\"memory\": {\"total_gib\": 16, \"tolerance_pct\": 0}}", 15 * 1024,
	         "memory 15 GiB, expected 16 GiB (kernel total, 0 % tolerance; dmidecode absent)"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *b = json_loads(cases[i].bom, 0, NULL), *detail = NULL, *fs = json_array();
		json_t *inv = json_pack("{s:{s:I}}", "memory", "total_bytes",
		                        (json_int_t)(cases[i].mib * 1024 * 1024));

		assert_int_equal(rp_accept_bom_check(b, &detail), RP_ERR_OK);
		if (cases[i].message == NULL) {
			if (rp_accept_bom(b, inv, fs) != 0)
				fail_msg("%s, %lld MiB: %s", cases[i].bom, cases[i].mib,
				         json_dumps(fs, 0));
		} else {
			assert_int_equal(rp_accept_bom(b, inv, fs), 1);
			assert_string_equal(msg(about(fs, "memory.total_gib")), cases[i].message);
		}
		json_decref(fs);
		json_decref(inv);
		json_decref(b);
	}
}

static void
test_bad_boms(void **state)
{
	static const char *const bad[][2] = {
	        {"{\"gpus\": {\"count\": -1}}", "bom.gpus.count"},
	        {"{\"gpus\": {\"count\": 8.5}}", "bom.gpus.count"},
	        {"{\"gpus\": {\"colour\": \"green\"}}", "bom.gpus.colour"},
	        {"{\"psus\": {\"count\": 2}}", "bom.psus"},
	        {"{\"memory\": {\"total_gib\": 0}}", "bom.memory.total_gib"},
	        {"{\"memory\": {\"tolerance_pct\": 51}}", "bom.memory.tolerance_pct"},
	        {"{\"memory\": {\"tolerance_pct\": -1}}", "bom.memory.tolerance_pct"},
	        {"{\"memory\": {\"tolerance_pct\": \"5\"}}", "bom.memory.tolerance_pct"},
	        {"{\"cpu\": {\"model\": \"\"}}", "bom.cpu.model"},
	        {"{\"hcas\": {\"link_layer\": \"Token Ring\"}}", "bom.hcas.link_layer"},
	        {"{\"disks\": 4}", "bom.disks"},
	        {"[]", "bom"},
	};
	json_t *detail, *b, *e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		b = json_loads(bad[i][0], 0, NULL);
		detail = NULL;
		assert_int_not_equal(rp_accept_bom_check(b, &detail), RP_ERR_OK);
		if (strcmp(json_string_value(json_object_get(detail, "field")), bad[i][1]))
			fail_msg("%s: %s", bad[i][0], json_dumps(detail, 0));
		json_decref(detail);
		json_decref(b);
	}
	e = json_loads("{\"node\": \"n\", \"switch\": \"s\", \"port\": \"p\"}", 0, NULL);
	detail = NULL;
	assert_int_equal(rp_accept_cable_check(e, &detail), RP_ERR_INVALID_FIELD);
	json_decref(detail);
	json_object_set_new(e, "vlan", json_string("7"));
	detail = NULL;
	assert_int_equal(rp_accept_cable_check(e, &detail), RP_ERR_UNKNOWN_FIELD);
	json_decref(detail);
	json_object_del(e, "vlan");
	json_object_set_new(e, "interface", json_string("eno1"));
	assert_int_equal(rp_accept_cable_check(e, &detail), RP_ERR_OK);
	json_decref(e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_matching_server),
	        cmocka_unit_test(test_missing_gpu_and_dimms),
	        cmocka_unit_test(test_other_orders),
	        cmocka_unit_test(test_cabling),
	        cmocka_unit_test(test_memory_tolerance),
	        cmocka_unit_test(test_bad_boms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
