/* What rack acceptance compares with: node classes' bills of materials, a rack's cabling plan,
 * and both in the manifest import — every bad input a 4xx that changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *
field_of(struct reply *r)
{
	return jstr(json_object_get(json_object_get(r->json, "error"), "detail"), "field");
}

static void
test_classes(void **state)
{
	struct reply r;

	(void)state;
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gpu-h100-8x", &r,
	                      "{s:{s:{s:i}}}", "bom", "gpus", "count", -1),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	assert_string_equal(field_of(&r), "bom.gpus.count");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gpu-h100-8x", &r,
	                      "{s:{s:{s:i}}}", "bom", "gpus", "colour", 1),
	                 400);
	assert_error(&r, 400, "UNKNOWN_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gpu-h100-8x", &r, "{s:s, s:{}}",
	                      "name", "other", "bom"),
	                 400);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/node-classes/gpu-h100-8x", &r, "{s:i}", "bom", 3),
	        400);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/node-classes/bad%20name", &r, "{s:{}}", "bom"), 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/node-classes/gpu-h100-8x", &r, NULL), 404);
	reply_free(&r);

	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gpu-h100-8x", &r,
	                      "{s:s, s:{s:{s:i, s:s}, s:{s:i}}}", "description", "HGX H100", "bom",
	                      "gpus", "count", 8, "model", "H100", "memory", "total_gib", 2048),
	                 201);
	assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gpu-h100-8x", &r,
	                      "{s:{s:{s:i}}}", "bom", "gpus", "count", 8),
	                 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 2);
	assert_null(json_object_get(json_object_get(r.json, "bom"), "memory"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/node-classes", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?action=node_class.", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/node-classes/gpu-h100-8x", &r, NULL),
	                 204);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/node-classes/gpu-h100-8x", &r, NULL),
	                 404);
	reply_free(&r);
}

static void
test_cabling(void **state)
{
	struct reply r;
	const char *body;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "c01"), 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "c02"), 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s, s:s}", "name", "c01-n1",
	                      "rack", "c01"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s, s:s}", "name", "c02-n1",
	                      "rack", "c02"),
	                 201);
	reply_free(&r);
	/* Unknown node, a node of another rack, both interface and guid, a port twice. */
	body = "{\"entries\":[{\"node\":\"nope\",\"interface\":\"eno1\",\"switch\":\"s\","
	       "\"port\":\"p\"}]}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 400);
	assert_string_equal(field_of(&r), "entries[0].node");
	reply_free(&r);
	body = "{\"entries\":[{\"node\":\"c02-n1\",\"interface\":\"eno1\",\"switch\":\"s\","
	       "\"port\":\"p\"}]}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 400);
	reply_free(&r);
	body = "{\"entries\":[{\"node\":\"c01-n1\",\"interface\":\"eno1\",\"port_guid\":\"a:b\","
	       "\"switch\":\"s\",\"port\":\"p\"}]}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 400);
	assert_string_equal(field_of(&r), "entries[0].interface");
	reply_free(&r);
	body = "{\"entries\":[{\"node\":\"c01-n1\",\"interface\":\"eno1\",\"switch\":\"s\","
	       "\"port\":\"p1\"},{\"node\":\"c01-n1\",\"interface\":\"eno1\",\"switch\":\"s\","
	       "\"port\":\"p2\"}]}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 409);
	assert_string_equal(field_of(&r), "entries[1].interface");
	reply_free(&r);
	body = "{\"entries\":[], \"extra\": 1}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 400);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/c01/cabling", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "entries")), 0);
	reply_free(&r);

	body = "{\"entries\":[{\"node\":\"c01-n1\",\"interface\":\"eno1\",\"switch\":\"leaf-a\","
	       "\"port\":\"Ethernet1/"
	       "7\"},{\"node\":\"c01-n1\",\"port_guid\":\"a088:c203:0063:1a40\","
	       "\"switch\":\"ib-leaf-1\",\"port\":\"17\"}]}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "entries")), 2);
	reply_free(&r);
	/* Replacing is whole: one entry left. */
	body = "{\"entries\":[{\"node\":\"c01-n1\",\"interface\":\"eno2\",\"switch\":\"leaf-b\","
	       "\"port\":\"Ethernet1/7\"}]}";
	assert_int_equal(req(&S, S.admin, "PUT", "/v1/racks/c01/cabling", "application/json", body,
	                     strlen(body), NULL, &r),
	                 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "entries")), 1);
	assert_string_equal(
	        jstr(json_array_get(json_object_get(r.json, "entries"), 0), "interface"), "eno2");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/nope/cabling", &r, NULL), 404);
	reply_free(&r);
}

/* The manifest carries classes and cabling too; one bad cable and nothing is written. */
static void
test_import(void **state)
{
	struct reply r;
	json_t *err;
	const char *bad =
	        "{\"racks\":[{\"name\":\"m01\"}],\"nodes\":[{\"name\":\"m01-n1\",\"rack\":\"m01\","
	        "\"node_class\":\"m-class\"}],\"classes\":[{\"name\":\"m-class\",\"bom\":{\"gpus\":"
	        "{\"count\":8}}}],\"cabling\":[{\"node\":\"m01-n1\",\"interface\":\"eno1\","
	        "\"switch\":\"s\",\"port\":\"1\"},{\"node\":\"m01-n9\",\"interface\":\"eno1\","
	        "\"switch\":\"s\",\"port\":\"2\"}]}";
	const char *badbom =
	        "{\"classes\":[{\"name\":\"m-class\",\"bom\":{\"gpus\":{\"count\":-8}}},"
	        "{\"name\":\"x\",\"colour\":1}]}";
	char good[1024];

	(void)state;
	assert_int_equal(req(&S, S.admin, "POST", "/v1/import", "application/json", bad,
	                     strlen(bad), NULL, &r),
	                 400);
	assert_error(&r, 400, "IMPORT_INVALID");
	err = json_array_get(
	        json_object_get(json_object_get(json_object_get(r.json, "error"), "detail"),
	                        "errors"),
	        0);
	assert_string_equal(jstr(err, "kind"), "cable");
	assert_int_equal(json_integer_value(json_object_get(err, "index")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/m01", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/node-classes/m-class", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(req(&S, S.admin, "POST", "/v1/import", "application/json", badbom,
	                     strlen(badbom), NULL, &r),
	                 400);
	assert_int_equal(json_integer_value(json_object_get(
	                         json_object_get(json_object_get(r.json, "error"), "detail"),
	                         "error_count")),
	                 2);
	reply_free(&r);

	snprintf(good, sizeof good, "%.*s]}", (int)(strstr(bad, ",{\"node\":\"m01-n9\"") - bad),
	         bad);
	assert_int_equal(req(&S, S.admin, "POST", "/v1/import", "application/json", good,
	                     strlen(good), NULL, &r),
	                 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "classes_set")), 1);
	assert_int_equal(json_integer_value(json_object_get(r.json, "cables_planned")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/node-classes/m-class", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "node_count")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/m01/cabling", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "entries")), 1);
	reply_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_classes),
	        cmocka_unit_test(test_cabling),
	        cmocka_unit_test(test_import),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
