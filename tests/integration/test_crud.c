/* The whole CRUD surface of racks, nodes, BIOS, firmware, events and tokens. */
#include <string.h>

#include "harness.h"

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void
test_racks(void **state)
{
	struct reply r;
	char path[200], etag[64], id[64];
	const char *hdr[2] = {NULL, NULL};
	char ifm[100];
	const char *body;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:s, s:s, s:f}", "name",
	                      "r01", "site", "dc1", "row", "A", "power_budget_kw", 40.5),
	                 201);
	assert_string_equal(str(r.json, "name"), "r01");
	assert_int_equal(json_integer_value(json_object_get(r.json, "height_u")), 42);
	assert_string_equal(r.etag, "\"1\"");
	snprintf(id, sizeof id, "%s", str(r.json, "id"));
	snprintf(path, sizeof path, "/v1/racks/%s", id);
	assert_string_equal(r.location, path);
	reply_free(&r);

	/* By UUID and by name, same object. */
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	assert_string_equal(str(r.json, "site"), "dc1");
	snprintf(etag, sizeof etag, "%s", r.etag);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/r01", &r, NULL), 200);
	assert_string_equal(str(r.json, "id"), id);
	reply_free(&r);

	/* Conditional GET. */
	snprintf(ifm, sizeof ifm, "If-None-Match: %s", etag);
	hdr[0] = ifm;
	assert_int_equal(req(&S, S.admin, "GET", "/v1/racks/r01", NULL, NULL, 0, hdr, NULL), 304);

	/* PATCH with the right If-Match, then with the stale one. */
	snprintf(ifm, sizeof ifm, "If-Match: %s", etag);
	body = "{\"row\":\"B\",\"notes\":\"cold aisle\"}";
	assert_int_equal(req(&S, S.admin, "PATCH", "/v1/racks/r01", "application/json", body,
	                     strlen(body), hdr, &r),
	                 200);
	assert_string_equal(str(r.json, "row"), "B");
	assert_string_equal(r.etag, "\"2\"");
	reply_free(&r);
	body = "{\"row\":\"C\"}";
	assert_int_equal(req(&S, S.admin, "PATCH", "/v1/racks/r01", "application/json", body,
	                     strlen(body), hdr, &r),
	                 412);
	assert_error(&r, 412, "PRECONDITION_FAILED");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/r01", &r, NULL), 200);
	assert_string_equal(str(r.json, "row"), "B");
	reply_free(&r);

	/* A second rack, listed, then deleted. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:i}", "name", "r02",
	                      "height_u", 48),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks?site=dc1", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/racks"), 2);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/racks/r02", &r, NULL), 204);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/r02", &r, NULL), 404);
	assert_error(&r, 404, "NOT_FOUND");
	reply_free(&r);
}

static void
test_nodes(void **state)
{
	struct reply r;
	json_t *bmc, *items;
	size_t i;
	json_t *ev;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r,
	                      "{s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:[s,s], s:[s,s], s:{s:s, "
	                      "s:s, s:i, s:s, "
	                      "s:s, s:b}, s:{s:i}}",
	                      "name", "gpu-r01-u07", "rack", "r01", "u_position", 7, "u_height", 4,
	                      "serial", "SN0007", "vendor", "Supermicro", "model", "SYS-821GE",
	                      "node_class", "gpu-h100-8x", "tags", "gpu", "bringup", "macs",
	                      "AA-BB-CC-00-00-07", "aabb.cc00.0017", "bmc", "driver", "ipmi",
	                      "address", "10.1.0.7", "port", 623, "username", "admin", "password",
	                      "s3cret-bmc-pw", "tls_verify", 0, "expected", "gpu_count", 8),
	                 201);
	assert_string_equal(str(r.json, "provision_state"), "enrolled");
	assert_string_equal(str(r.json, "power_state"), "unknown");
	bmc = json_object_get(r.json, "bmc");
	assert_null(json_object_get(bmc, "password"));
	assert_true(json_is_true(json_object_get(bmc, "password_set")));
	assert_true(json_is_false(json_object_get(bmc, "tls_verify")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(r.json, "macs"), 0)),
	                    "aa:bb:cc:00:00:07");
	assert_string_equal(json_string_value(json_array_get(json_object_get(r.json, "macs"), 1)),
	                    "aa:bb:cc:00:00:17");
	assert_null(strstr(r.body, "s3cret-bmc-pw"));
	reply_free(&r);

	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s, s:s, s:i, s:s, s:[s]}",
	                      "name", "cpu-r01-u01", "rack", "r01", "u_position", 1, "node_class",
	                      "cpu-2s", "tags", "cpu"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s}", "name", "spare-1"),
	                 201);
	reply_free(&r);

	/* Filters. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?rack=r01", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?tag=gpu", &r, NULL), 200);
	items = json_object_get(r.json, "items");
	assert_int_equal(json_array_size(items), 1);
	assert_string_equal(str(json_array_get(items, 0), "name"), "gpu-r01-u07");
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "GET", "/v1/nodes?class=cpu-2s&state=enrolled", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?q=SN000", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?state=deployed", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 0);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?fields=name,rack&sort=name", &r, NULL),
	                 200);
	items = json_object_get(r.json, "items");
	assert_int_equal(json_array_size(items), 3);
	assert_string_equal(str(json_array_get(items, 0), "name"), "cpu-r01-u01");
	assert_int_equal(json_object_size(json_array_get(items, 0)), 2);
	assert_true(json_is_null(json_object_get(json_array_get(items, 2), "rack")));
	reply_free(&r);

	/* Merge patch: change the password only; other BMC fields stay. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/gpu-r01-u07", &r,
	                      "{s:{s:s}, s:b, s:s}", "bmc", "password", "n3w-bmc-pw", "maintenance",
	                      1, "maintenance_reason", "reseating GPU 3"),
	                 200);
	bmc = json_object_get(r.json, "bmc");
	assert_string_equal(str(bmc, "address"), "10.1.0.7");
	assert_string_equal(str(bmc, "username"), "admin");
	assert_true(json_is_true(json_object_get(r.json, "maintenance")));
	assert_null(strstr(r.body, "n3w-bmc-pw"));
	reply_free(&r);
	/* Leaving maintenance clears the reason. */
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/gpu-r01-u07", &r, "{s:b}", "maintenance", 0),
	        200);
	assert_true(json_is_null(json_object_get(r.json, "maintenance_reason")));
	reply_free(&r);
	/* Move it and replace its tags. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/gpu-r01-u07", &r, "{s:i, s:[s]}",
	                      "u_position", 20, "tags", "h100"),
	                 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "u_position")), 20);
	assert_int_equal(json_array_size(json_object_get(r.json, "tags")), 1);
	assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 4);
	reply_free(&r);
	/* RFC 7396's own media type is accepted too. */
	assert_int_equal(req(&S, S.admin, "PATCH", "/v1/nodes/spare-1",
	                     "application/merge-patch+json", "{\"vendor\":\"Dell\"}", 17, NULL, &r),
	                 200);
	assert_string_equal(str(r.json, "vendor"), "Dell");
	reply_free(&r);
	/* Removing the BMC. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/spare-1", &r, "{s:{s:s}}", "bmc",
	                      "driver", "fake"),
	                 200);
	assert_string_equal(str(json_object_get(r.json, "bmc"), "driver"), "fake");
	assert_true(json_is_false(json_object_get(json_object_get(r.json, "bmc"), "password_set")));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/spare-1", &r, "{s:n}", "bmc"), 200);
	assert_true(json_is_null(json_object_get(r.json, "bmc")));
	reply_free(&r);

	/* Elevation: the 4U node fills U20-U23. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/r01/elevation", &r, NULL), 200);
	items = json_object_get(r.json, "slots");
	assert_int_equal(json_array_size(items), 42);
	for (i = 0; i < 42; i++) {
		json_t *slot = json_array_get(items, i);
		long u = (long)json_integer_value(json_object_get(slot, "u"));
		const char *n = str(slot, "node");

		assert_int_equal(u, 42 - (long)i);
		if (u >= 20 && u <= 23)
			assert_string_equal(n, "gpu-r01-u07");
		else if (u == 1)
			assert_string_equal(n, "cpu-r01-u01");
		else
			assert_null(n);
	}
	reply_free(&r);

	/* Inventory is empty until an agent reports. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/gpu-r01-u07/inventory", &r, NULL),
	                 200);
	assert_true(json_is_null(json_object_get(r.json, "data")));
	reply_free(&r);

	/* Events for the node, newest first; secrets never appear anywhere. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?node=gpu-r01-u07", &r, NULL), 200);
	items = json_object_get(r.json, "items");
	assert_int_equal(json_array_size(items), 4);
	assert_string_equal(str(json_array_get(items, 3), "action"), "node.created");
	assert_string_equal(str(json_array_get(items, 0), "actor"), "token:admin");
	json_array_foreach(items, i, ev)
	{
		assert_string_equal(str(json_object_get(ev, "object"), "name"), "gpu-r01-u07");
	}
	assert_non_null(strstr(r.body, "\"bmc.password\":\"changed\""));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?limit=1000", &r, NULL), 200);
	assert_null(strstr(r.body, "s3cret-bmc-pw"));
	assert_null(strstr(r.body, "n3w-bmc-pw"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET",
	                      "/v1/events?action=rack.&since=2000-01-01T00:00:00Z", &r, NULL),
	                 200);
	items = json_object_get(r.json, "items");
	json_array_foreach(items, i, ev)
	{
		assert_int_equal(strncmp(str(ev, "action"), "rack.", 5), 0);
	}
	assert_true(json_array_size(items) >= 3);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "GET", "/v1/events?until=2000-01-01T00:00:00Z", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 0);
	reply_free(&r);

	/* Delete. */
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/nodes/spare-1", &r, NULL), 204);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/spare-1", &r, NULL), 404);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/events?action=node.deleted", &r, NULL), 200);
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
	reply_free(&r);
}

static void
test_bios(void **state)
{
	struct reply r;
	json_t *diff, *item;
	char path[200];

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r,
	                      "{s:s, s:s, s:{s:s, s:s, s:i, s:b}}", "name", "h100-golden",
	                      "node_class", "gpu-h100-8x", "attributes", "Above4GDecoding",
	                      "Enabled", "NumaPerSocket", "NPS1", "PcieSlots", 8, "SriovSupport",
	                      1),
	                 201);
	assert_int_equal(json_integer_value(json_object_get(r.json, "node_count")), 1);
	reply_free(&r);
	/* Actual values read from somewhere: one differs, one is missing. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/gpu-r01-u07/bios/readings", &r,
	                      "{s:s, s:{s:s, s:s, s:i, s:s}}", "source", "manual", "attributes",
	                      "Above4GDecoding", "Enabled", "NumaPerSocket", "NPS4", "PcieSlots", 8,
	                      "BootMode", "UEFI"),
	                 204);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/gpu-r01-u07", &r, NULL), 200);
	snprintf(path, sizeof path, "/v1/nodes/%s/bios", str(r.json, "id"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	assert_string_equal(str(r.json, "node"), "gpu-r01-u07");
	assert_string_equal(str(json_object_get(r.json, "desired"), "profile"), "h100-golden");
	assert_string_equal(str(json_object_get(r.json, "desired"), "via"), "node_class");
	diff = json_object_get(r.json, "diff");
	assert_int_equal(json_array_size(diff), 2);
	item = json_array_get(diff, 0);
	assert_string_equal(str(item, "name"), "NumaPerSocket");
	assert_string_equal(str(item, "actual"), "NPS4");
	assert_string_equal(str(item, "desired"), "NPS1");
	item = json_array_get(diff, 1);
	assert_string_equal(str(item, "name"), "SriovSupport");
	assert_true(json_is_null(json_object_get(item, "actual")));
	assert_true(json_is_false(json_object_get(r.json, "in_sync")));
	assert_string_equal(
	        str(json_object_get(json_object_get(r.json, "actual"), "BootMode"), "source"),
	        "manual");
	reply_free(&r);

	assert_int_equal(call(&S, S.admin, "GET", "/v1/bios/drift?rack=r01", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_checked")), 1);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 1);
	assert_int_equal(
	        json_array_size(json_object_get(json_array_get(json_object_get(r.json, "items"), 0),
	                                        "attributes")),
	        2);
	reply_free(&r);

	/* Fix the node: drift clears. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/gpu-r01-u07/bios/readings", &r,
	                      "{s:s, s:{s:s, s:b}}", "source", "manual", "attributes",
	                      "NumaPerSocket", "NPS1", "SriovSupport", 1),
	                 204);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/gpu-r01-u07/bios", &r, NULL), 200);
	assert_true(json_is_true(json_object_get(r.json, "in_sync")));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/bios/drift", &r, NULL), 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 0);
	reply_free(&r);

	/* A profile assigned to the node itself wins over its class's. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:{s:s}}",
	                      "name", "debug", "attributes", "NumaPerSocket", "NPS2"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/gpu-r01-u07", &r, "{s:s}",
	                      "bios_profile", "debug"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/gpu-r01-u07/bios", &r, NULL), 200);
	assert_string_equal(str(json_object_get(r.json, "desired"), "via"), "node");
	assert_int_equal(json_array_size(json_object_get(r.json, "diff")), 1);
	reply_free(&r);
	/* In use: cannot delete. Profile attribute patch: merge, null removes. */
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/bios/profiles/debug", &r, NULL), 409);
	assert_error(&r, 409, "IN_USE");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/bios/profiles/h100-golden", &r,
	                      "{s:{s:n, s:s}}", "attributes", "PcieSlots", "PowerProfile", "Max"),
	                 200);
	assert_null(json_object_get(json_object_get(r.json, "attributes"), "PcieSlots"));
	assert_string_equal(str(json_object_get(r.json, "attributes"), "PowerProfile"), "Max");
	assert_string_equal(str(json_object_get(r.json, "attributes"), "NumaPerSocket"), "NPS1");
	reply_free(&r);
	assert_int_equal(count_all(&S, "/v1/bios/profiles"), 2);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/gpu-r01-u07", &r, "{s:n}", "bios_profile"),
	        200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", "/v1/bios/profiles/debug", &r, NULL), 204);
	reply_free(&r);
}

static void
test_firmware(void **state)
{
	struct reply r;
	json_t *comps, *c;
	size_t i;
	int seen = 0;

	(void)state;
	/* Every component names the image it is flashed from (a bare version is not enough). */
	sh("echo firmware > %s/images/fw.bin", S.dir);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/images", &r, "{s:s, s:s, s:s}", "name",
	                      "fw.bin", "kind", "firmware", "file", "fw.bin"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:s, s:s, s:s}}", "name", "h100-2026q4", "node_class",
	                      "gpu-h100-8x", "components", "bmc", "1.8.2", "bios", "2.4", "gpu:0",
	                      "96.00.99.00.01"),
	                 400);
	assert_error(&r, 400, "INVALID_FIELD");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/firmware/baselines", &r,
	                      "{s:s, s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s}}}", "name",
	                      "h100-2026q4", "node_class", "gpu-h100-8x", "components", "bmc",
	                      "version", "1.8.2", "image", "fw.bin", "bios", "version", "2.4",
	                      "image", "fw.bin", "gpu:0", "version", "96.00.99.00.01", "image",
	                      "fw.bin"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes/gpu-r01-u07/firmware/readings", &r,
	                      "{s:s, s:[{s:s, s:s, s:b}, {s:s, s:s}, {s:s, s:s}]}", "source",
	                      "manual", "components", "component", "bmc", "version", "1.8.2",
	                      "updateable", 1, "component", "bios", "version", "2.1", "component",
	                      "nic:0", "version", "22.31"),
	                 204);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/gpu-r01-u07/firmware", &r, NULL), 200);
	assert_string_equal(str(r.json, "baseline"), "h100-2026q4");
	comps = json_object_get(r.json, "components");
	assert_int_equal(json_array_size(comps), 4);
	json_array_foreach(comps, i, c)
	{
		const char *name = str(c, "component"), *st = str(c, "status");

		if (!strcmp(name, "bmc"))
			assert_string_equal(st, "ok"), seen++;
		else if (!strcmp(name, "bios"))
			assert_string_equal(st, "drift"), seen++;
		else if (!strcmp(name, "nic:0"))
			assert_string_equal(st, "unmanaged"), seen++;
		else if (!strcmp(name, "gpu:0"))
			assert_string_equal(st, "missing"), seen++;
	}
	assert_int_equal(seen, 4);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/drift?class=gpu-h100-8x", &r, NULL),
	                 200);
	assert_int_equal(json_integer_value(json_object_get(r.json, "nodes_drifted")), 1);
	c = json_array_get(json_object_get(r.json, "items"), 0);
	assert_string_equal(str(c, "node"), "gpu-r01-u07");
	assert_int_equal(json_array_size(json_object_get(c, "components")), 2);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/drift?rack=nope", &r, NULL), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/firmware/baselines/h100-2026q4", &r,
	                      "{s:{s:s}}", "components", "bios", "2.1"),
	                 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/firmware/drift", &r, NULL), 200);
	c = json_array_get(json_object_get(r.json, "items"), 0);
	assert_int_equal(json_array_size(json_object_get(c, "components")), 1);
	reply_free(&r);
}

static void
test_tokens(void **state)
{
	struct reply r;
	char viewer[128], path[200];
	const char *id;

	(void)state;
	make_token(&S, "viewer", viewer);
	assert_int_equal(strncmp(viewer, "rpt_", 4), 0);
	assert_int_equal(call(&S, viewer, "GET", "/v1/nodes", &r, NULL), 200);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/tokens", &r, NULL), 200);
	assert_null(strstr(r.body, viewer));
	assert_null(strstr(r.body, "hash"));
	assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
	id = str(json_array_get(json_object_get(r.json, "items"), 0), "id");
	snprintf(path, sizeof path, "/v1/tokens/%s", id);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 204);
	reply_free(&r);
	assert_int_equal(call(&S, viewer, "GET", "/v1/nodes", &r, NULL), 401);
	assert_error(&r, 401, "UNAUTHORIZED");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 404);
	reply_free(&r);
	/* The last admin token cannot be revoked. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/tokens", &r, NULL), 200);
	snprintf(path, sizeof path, "/v1/tokens/%s",
	         str(json_array_get(json_object_get(r.json, "items"), 0), "id"));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 409);
	assert_error(&r, 409, "CONFLICT");
	reply_free(&r);
	/* A token that expires. */
	assert_int_equal(call(&S, S.admin, "POST", "/v1/tokens", &r, "{s:s, s:s, s:i}", "name",
	                      "ci", "role", "operator", "expires_in_s", 3600),
	                 201);
	assert_true(json_is_string(json_object_get(r.json, "expires_at")));
	reply_free(&r);
}

static void
test_meta(void **state)
{
	struct reply r;

	(void)state;
	assert_int_equal(req(&S, NULL, "GET", "/healthz", NULL, NULL, 0, NULL, &r), 200);
	assert_string_equal(str(r.json, "status"), "ok");
	assert_true(strlen(r.request_id) > 0);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1", &r, NULL), 200);
	assert_string_equal(str(r.json, "api"), "v1");
	assert_string_equal(str(json_object_get(r.json, "you"), "role"), "admin");
	/* The database: which, where (no password), its size. */
	{
		json_t *db = json_object_get(r.json, "database");

		assert_string_equal(str(db, "kind"),
		                    test_database(S.dir) ? "postgresql" : "sqlite");
		assert_non_null(strstr(str(db, "name"),
		                       test_database(S.dir) ? "postgresql://" : "rackpilot.db"));
		assert_true(json_integer_value(json_object_get(db, "size_bytes")) > 4096);
		assert_int_equal(json_integer_value(json_object_get(db, "schema_version")),
		                 json_integer_value(json_object_get(r.json, "schema_version")));
	}
	reply_free(&r);
	assert_int_equal(req(&S, NULL, "GET", "/metrics", NULL, NULL, 0, NULL, &r), 401);
	reply_free(&r);
	assert_int_equal(req(&S, S.admin, "GET", "/metrics", NULL, NULL, 0, NULL, &r), 200);
	assert_non_null(strstr(r.ctype, "text/plain"));
	assert_non_null(strstr(
	        r.body, "rackpilot_http_requests_total{route=\"GET /v1/nodes\",code=\"200\"}"));
	assert_non_null(strstr(r.body, "rackpilot_http_request_duration_seconds_bucket{route="));
	assert_non_null(strstr(r.body, "rackpilot_nodes{state=\"enrolled\"} 2"));
	assert_non_null(strstr(r.body, "rackpilot_db_size_bytes "));
	reply_free(&r);
	/* A client's request id is echoed (for correlating logs); junk ones are replaced. */
	{
		const char *h1[] = {"X-Request-Id: ops-42.abc", NULL};
		const char *h2[] = {"X-Request-Id: bad id\"", NULL};

		req(&S, NULL, "GET", "/healthz", NULL, NULL, 0, h1, &r);
		assert_string_equal(r.request_id, "ops-42.abc");
		reply_free(&r);
		req(&S, NULL, "GET", "/healthz", NULL, NULL, 0, h2, &r);
		assert_int_equal(strlen(r.request_id), 16);
		reply_free(&r);
	}
}

/* Cached GETs never outlive a write: read, read again, change, read. */
static void
test_cache_coherence(void **state)
{
	struct reply a, b, c;
	char etag[64], line[100];
	const char *h[2] = {line, NULL};
	int i;

	(void)state;
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/cpu-r01-u01", &a, NULL), 200);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/cpu-r01-u01", &b, NULL), 200);
	assert_string_equal(a.body, b.body);
	assert_string_equal(a.etag, b.etag);
	snprintf(etag, sizeof etag, "%s", a.etag);
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/cpu-r01-u01", &c, "{s:s}", "serial",
	                      "CHANGED-1"),
	                 200);
	reply_free(&c);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/cpu-r01-u01", &c, NULL), 200);
	assert_string_equal(str(c.json, "serial"), "CHANGED-1");
	assert_string_not_equal(c.etag, etag);
	/* The old ETag no longer matches; the new one does. */
	snprintf(line, sizeof line, "If-None-Match: %s", etag);
	assert_int_equal(req(&S, S.admin, "GET", "/v1/nodes/cpu-r01-u01", NULL, NULL, 0, h, NULL),
	                 200);
	snprintf(line, sizeof line, "If-None-Match: %s", c.etag);
	reply_free(&c);
	assert_int_equal(req(&S, S.admin, "GET", "/v1/nodes/cpu-r01-u01", NULL, NULL, 0, h, NULL),
	                 304);
	/* A rack rename shows in the node (a write elsewhere also invalidates). */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/racks/r01", &c, "{s:s}", "notes", "x"),
	                 200);
	reply_free(&c);
	for (i = 0; i < 3; i++) {
		assert_int_equal(call(&S, S.admin, "GET", "/v1/racks/r01", &c, NULL), 200);
		assert_string_equal(str(c.json, "notes"), "x");
		reply_free(&c);
	}
	/* PATCH never answers 304, whatever If-None-Match says. */
	snprintf(line, sizeof line, "If-None-Match: *");
	assert_int_equal(req(&S, S.admin, "PATCH", "/v1/nodes/cpu-r01-u01", "application/json",
	                     "{\"serial\":\"C2\"}", 15, h, &c),
	                 200);
	assert_string_equal(str(c.json, "serial"), "C2");
	reply_free(&c);
	reply_free(&a);
	reply_free(&b);
	assert_int_equal(req(&S, S.admin, "GET", "/metrics", NULL, NULL, 0, NULL, &c), 200);
	assert_non_null(
	        strstr(c.body, "rackpilot_cache_lookups_total{cache=\"get\",result=\"hit\"}"));
	assert_null(
	        strstr(c.body, "rackpilot_cache_lookups_total{cache=\"get\",result=\"hit\"} 0\n"));
	reply_free(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_racks),
	        cmocka_unit_test(test_nodes),
	        cmocka_unit_test(test_bios),
	        cmocka_unit_test(test_firmware),
	        cmocka_unit_test(test_tokens),
	        cmocka_unit_test(test_meta),
	        cmocka_unit_test(test_cache_coherence),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
