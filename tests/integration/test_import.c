/* Bulk import: 500-node manifests, all or nothing, JSON and CSV, dry run. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* 500 nodes of 2U in 12 racks of 42U (21 per rack), each with a BMC and two MACs. */
static json_t *
manifest(void)
{
	json_t *racks = json_array(), *nodes = json_array();
	char name[64], mac1[32], mac2[32], addr[32];
	int i;

	for (i = 0; i < 24; i++) {
		snprintf(name, sizeof name, "r%02d", i + 1);
		json_array_append_new(racks, json_pack("{s:s, s:s, s:s}", "name", name, "site",
		                                       "dc1", "row", i < 12 ? "A" : "B"));
	}
	for (i = 0; i < 500; i++) {
		snprintf(name, sizeof name, "gpu-r%02d-u%02d", i / 21 + 1, (i % 21) * 2 + 1);
		snprintf(mac1, sizeof mac1, "02:00:00:00:%02x:%02x", i >> 8, i & 0xff);
		snprintf(mac2, sizeof mac2, "02:00:00:01:%02x:%02x", i >> 8, i & 0xff);
		snprintf(addr, sizeof addr, "10.10.%d.%d", i / 200, i % 200 + 1);
		json_array_append_new(
		        nodes,
		        json_pack(
		                "{s:s, s:s, s:i, s:i, s:s, s:s, s:[s,s], s:[s], s:{s:s, s:s, s:s, "
		                "s:s}}",
		                "name", name, "rack",
		                json_string_value(json_object_get(
		                        json_array_get(racks, (size_t)(i / 21)), "name")),
		                "u_position", (i % 21) * 2 + 1, "u_height", 2, "serial", name,
		                "node_class", "gpu-h100-8x", "macs", mac1, mac2, "tags", "bringup",
		                "bmc", "driver", "ipmi", "address", addr, "username", "admin",
		                "password", "bmc-secret-xyz"));
	}
	return json_pack("{s:o, s:o}", "racks", racks, "nodes", nodes);
}

static long
post(json_t *m, const char *query, struct reply *r)
{
	char *text = json_dumps(m, JSON_COMPACT), path[100];
	long st;

	snprintf(path, sizeof path, "/v1/import%s", query);
	st = req(&S, S.admin, "POST", path, "application/json", text, strlen(text), NULL, r);
	free(text);
	return st;
}

static void
test_one_bad_row(void **state)
{
	json_t *m = manifest(), *errs;
	struct reply r;
	long events;

	(void)state;
	events = count_all(&S, "/v1/events");
	/* Row 321 claims the MAC of row 7: the whole import is refused. */
	json_array_set_new(
	        json_object_get(json_array_get(json_object_get(m, "nodes"), 321), "macs"), 0,
	        json_string("02:00:00:00:00:07"));
	assert_int_equal(post(m, "", &r), 400);
	assert_error(&r, 400, "IMPORT_INVALID");
	errs = json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                       "errors");
	assert_int_equal(json_array_size(errs), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(errs, 0), "index")),
	                 321);
	assert_string_equal(json_string_value(json_object_get(json_array_get(errs, 0), "field")),
	                    "macs");
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/nodes"), 0);
	assert_int_equal(count_all(&S, "/v1/racks"), 0);
	assert_int_equal(count_all(&S, "/v1/events"), events);
	json_decref(m);
}

static void
test_every_bad_row_reported(void **state)
{
	json_t *m = manifest(), *nodes = json_object_get(m, "nodes"), *errs, *e;
	struct reply r;
	size_t i;
	int idx[4] = {0};

	(void)state;
	json_object_set_new(json_array_get(nodes, 3), "u_position", json_string("top"));
	json_object_set_new(json_array_get(nodes, 40), "name", json_string("gpu-r01-u01"));
	json_object_set_new(json_array_get(nodes, 77), "rack", json_string("r99"));
	json_object_set_new(json_array_get(nodes, 400), "u_position", json_integer(1));
	assert_int_equal(post(m, "", &r), 400);
	errs = json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                       "errors");
	assert_int_equal(json_array_size(errs), 4);
	json_array_foreach(errs, i, e)
	{
		long at = (long)json_integer_value(json_object_get(e, "index"));

		assert_non_null(json_object_get(e, "reason"));
		idx[0] += at == 3;
		idx[1] += at == 40;
		idx[2] += at == 77;
		idx[3] += at == 400;
	}
	assert_true(idx[0] == 1 && idx[1] == 1 && idx[2] == 1 && idx[3] == 1);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/nodes"), 0);
	json_decref(m);
}

static void
test_dry_run_then_import(void **state)
{
	json_t *m = manifest();
	struct reply r;

	(void)state;
	assert_int_equal(post(m, "?dry_run=1", &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_created")), 500);
	assert_true(json_is_true(json_object_get(r.json, "dry_run")));
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/nodes"), 0);

	assert_int_equal(post(m, "", &r), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_created")), 500);
	assert_int_equal(json_integer_value(json_object_get(r.json, "racks_created")), 24);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/nodes"), 500);
	assert_int_equal(count_all(&S, "/v1/nodes?rack=r03"), 21);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/gpu-r24-u01", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(json_object_get(r.json, "bmc"), "password_set")));
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/events?action=import."), 1);
	/* Importing it again collides on every row and changes nothing. */
	assert_int_equal(post(m, "", &r), 400);
	assert_int_equal(json_integer_value(json_object_get(
	                         json_object_get(json_object_get(r.json, "error"), "detail"),
	                         "error_count")),
	                 524);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/nodes"), 500);
	json_decref(m);
}

static void
test_csv(void **state)
{
	const char *csv =
	        "name,rack,u_position,u_height,serial,node_class,tags,macs,bmc_driver,bmc_address,"
	        "bmc_username,bmc_password,rack_site\r\n"
	        "cpu-x01-u01,x01,1,1,SNX1,cpu-2s,cpu;edge,02:aa:00:00:00:01,redfish,10.20.0.1,root,"
	        "\"pa,ss\",dc2\r\n"
	        "cpu-x01-u02,x01,2,1,SNX2,cpu-2s,cpu,02:aa:00:00:00:02,redfish,10.20.0.2,root,pw,"
	        "dc2\r\n"
	        "\r\n"
	        "cpu-x02-u01,x02,1,1,\"SN \"\"X3\"\"\",cpu-2s,,02:aa:00:00:00:03,fake,,,,\n";
	const char *bad = "name,rack,u_position\ncpu-y01-u01,y01,1\ncpu-y01-u02,y01,one\n"
	                  "cpu-y01-u03,y01,1\n";
	struct reply r;
	json_t *errs;

	(void)state;
	assert_int_equal(
	        req(&S, S.admin, "POST", "/v1/import", "text/csv", csv, strlen(csv), NULL, &r),
	        200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_created")), 3);
	assert_int_equal(json_array_size(json_object_get(r.json, "racks_auto_created")), 2);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/x01", &r, NULL), 200);
	assert_string_equal(json_string_value(json_object_get(r.json, "site")), "dc2");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/cpu-x02-u01", &r, NULL), 200);
	assert_string_equal(json_string_value(json_object_get(r.json, "serial")), "SN \"X3\"");
	assert_string_equal(
	        json_string_value(json_object_get(json_object_get(r.json, "bmc"), "driver")),
	        "fake");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/cpu-x01-u01", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "tags")), 2);
	reply_free(&r);

	/* Bad rows are reported with their line numbers; nothing is imported. */
	assert_int_equal(
	        req(&S, S.admin, "POST", "/v1/import", "text/csv", bad, strlen(bad), NULL, &r),
	        400);
	errs = json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                       "errors");
	assert_int_equal(json_array_size(errs), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(errs, 0), "line")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(errs, 1), "line")), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(errs, 1), "code")),
	                    "SLOT_OCCUPIED");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/y01", &r, NULL), 404);
	reply_free(&r);
	/* Unknown columns and broken CSV are refused outright. */
	assert_int_equal(req(&S, S.admin, "POST", "/v1/import", "text/csv", "name,colour\nx,red\n",
	                     18, NULL, &r),
	                 400);
	assert_error(&r, 400, "UNKNOWN_FIELD");
	reply_free(&r);
	assert_int_equal(
	        req(&S, S.admin, "POST", "/v1/import", "text/csv", "name\n\"x\n", 8, NULL, &r),
	        400);
	assert_error(&r, 400, "BAD_REQUEST");
	reply_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_one_bad_row),
	        cmocka_unit_test(test_every_bad_row_reported),
	        cmocka_unit_test(test_dry_run_then_import),
	        cmocka_unit_test(test_csv),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
