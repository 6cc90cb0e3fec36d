/*
 * Every error class the API has, each checked for its status, its JSON error body, and
 * that the failed request changed nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char viewer[128], operator[128];

/* Everything a failed request could have touched, as one comparable string. */
static char *
snapshot(void)
{
	struct reply r;
	char *out;
	const char *paths[] = {"/v1/racks?limit=1000",
	                       "/v1/nodes?limit=1000",
	                       "/v1/bios/profiles?limit=1000",
	                       "/v1/firmware/baselines?limit=1000",
	                       "/v1/tokens",
	                       "/v1/events?limit=1000",
	                       NULL};
	json_t *all = json_array();
	int i;

	for (i = 0; paths[i]; i++) {
		assert_int_equal(req(&S, S.admin, "GET", paths[i], NULL, NULL, 0, NULL, &r), 200);
		json_array_append(all, r.json);
		reply_free(&r);
	}
	out = json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(all);
	return out;
}

static int
setup(void **state)
{
	struct reply r;

	group_setup(state);
	make_token(&S, "viewer", viewer);
	make_token(&S, "operator", operator);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s, s:i}", "name", "r01",
	                      "height_u", 10),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s, s:s, s:i, s:i, s:[s]}",
	                      "name", "n1", "rack", "r01", "u_position", 3, "u_height", 2, "macs",
	                      "02:00:00:00:00:01"),
	                 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/bios/profiles", &r, "{s:s, s:s}", "name",
	                      "p1", "node_class", "c1"),
	                 201);
	reply_free(&r);
	return 0;
}

struct bad {
	const char *token; /* "admin", "viewer", "operator", "none", "bogus" */
	const char *method;
	const char *path;
	const char *ctype;
	const char *body;
	long status;
	const char *code;
	const char *headers[3];
};

static const struct bad cases[] = {
        /* 400: malformed JSON, wrong types, missing and unknown fields, bad values. */
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\": ", 400, "BAD_JSON"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"a\",\"name\":\"b\"}", 400,
         "BAD_JSON"},
        {"admin", "POST", "/v1/nodes", "application/json", "[1,2]", 400, "BAD_REQUEST"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\": 7}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"rack\": \"r01\"}", 400,
         "MISSING_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\",\"colour\":\"red\"}",
         400, "UNKNOWN_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"power_state\":\"on\"}", 400, "READ_ONLY_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"bad name!\"}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"0b5e5c1e-0000-4000-8000-000000000000\"}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\",\"macs\":[\"zz:00\"]}",
         400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"macs\":[\"02:00:00:00:00:09\",\"02-00-00-00-00-09\"]}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"bmc\":{\"driver\":\"snmp\"}}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"bmc\":{\"address\":\"10.0.0.1\"}}", 400, "MISSING_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"bmc\":{\"driver\":\"ipmi\",\"address\":\"10.0.0.1:623\"}}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"bmc\":{\"driver\":\"ipmi\",\"port\":70000}}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\",\"u_position\":0}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\",\"u_position\":5}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"rack\":\"r01\",\"u_position\":10,\"u_height\":2}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\",\"rack\":\"nope\"}",
         400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"bios_profile\":\"nope\"}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\",\"tags\":[\"a b\"]}",
         400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"maintenance\":\"yes\"}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/json", NULL, 400, "BAD_REQUEST"},
        {"admin", "POST", "/v1/racks", "application/json", "{\"name\":\"r9\",\"height_u\":100}",
         400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/racks", "application/json",
         "{\"name\":\"r9\",\"power_budget_kw\":-1}", 400, "INVALID_FIELD"},
        {"admin", "PATCH", "/v1/nodes/n1", "application/json", "{\"name\":null}", 400,
         "INVALID_FIELD"},
        {"admin", "PATCH", "/v1/nodes/n1", "application/json", "{\"version\":9}", 400,
         "READ_ONLY_FIELD"},
        {"admin", "POST", "/v1/bios/profiles", "application/json",
         "{\"name\":\"p2\",\"attributes\":{\"A\":[1]}}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/bios/profiles", "application/json",
         "{\"name\":\"p2\",\"attributes\":{\"A\":null}}", 400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/firmware/baselines", "application/json", "{\"name\":\"b1\"}", 400,
         "MISSING_FIELD"},
        {"admin", "POST", "/v1/firmware/baselines", "application/json",
         "{\"name\":\"b1\",\"node_class\":\"c1\",\"components\":{\"bmc\":2}}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes/n1/firmware/readings", "application/json",
         "{\"source\":\"manual\",\"components\":[{\"component\":\"bmc\"}]}", 400, "MISSING_FIELD"},
        {"admin", "POST", "/v1/nodes/n1/bios/readings", "application/json", "{\"attributes\":{}}",
         400, "MISSING_FIELD"},
        {"admin", "POST", "/v1/tokens", "application/json", "{\"name\":\"t\",\"role\":\"root\"}",
         400, "INVALID_FIELD"},
        {"admin", "POST", "/v1/tokens", "application/json",
         "{\"name\":\"t\",\"role\":\"viewer\",\"expires_in_s\":1}", 400, "INVALID_FIELD"},
        {"admin", "GET", "/v1/nodes?limit=0", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/nodes?limit=abc", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/nodes?sort=serial", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/nodes?fields=name,nope", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/nodes?rack=nope", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/nodes?maintenance=maybe", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/jobs?state=done", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/rollouts?state=done", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/rollouts?kind=os", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/nodes?cursor=garbage", NULL, NULL, 400, "BAD_CURSOR"},
        {"admin", "GET", "/v1/events?since=yesterday", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "GET", "/v1/events?node=nope", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "POST", "/v1/import?dry_run=maybe", "application/json", "{}", 400, "BAD_QUERY"},
        {"admin", "POST", "/v1/import", "application/json",
         "{\"nodes\":[{\"name\":\"x\",\"_line\":3}]}", 400, "IMPORT_INVALID"},
        {"admin", "POST", "/v1/import", "application/json", "{\"hosts\":[]}", 400, "UNKNOWN_FIELD"},
        {"admin", "POST", "/v1/import", "application/json", "{\"nodes\":{}}", 400, "INVALID_FIELD"},
        {"admin", "GET", "/v1/events?node=n1&rack=r01", NULL, NULL, 400, "BAD_QUERY"},
        {"admin", "POST", "/v1/nodes/n1/firmware/readings", "application/json",
         "{\"source\":\"manual\",\"components\":[{\"component\":\"\",\"version\":\"1\"}]}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes/n1/firmware/readings", "application/json",
         "{\"source\":\"manual\",\"components\":[7]}", 400, "INVALID_FIELD"},
        {"admin", "PATCH", "/v1/nodes/n1", "application/merge-patch+json", "{\"name\":5}", 400,
         "INVALID_FIELD"},
        {"admin", "POST", "/v1/nodes", "application/merge-patch+json", "{\"name\":\"x\"}", 415,
         "UNSUPPORTED_MEDIA_TYPE"},
        /* 401 and 403. */
        {"none", "GET", "/v1/nodes", NULL, NULL, 401, "UNAUTHORIZED"},
        {"bogus", "GET", "/v1/nodes", NULL, NULL, 401, "UNAUTHORIZED"},
        {"none", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\"}", 401, "UNAUTHORIZED"},
        {"viewer", "POST", "/v1/nodes", "application/json", "{\"name\":\"x\"}", 403, "FORBIDDEN"},
        {"viewer", "DELETE", "/v1/nodes/n1", NULL, NULL, 403, "FORBIDDEN"},
        {"operator", "POST", "/v1/tokens", "application/json",
         "{\"name\":\"x\",\"role\":\"admin\"}", 403, "FORBIDDEN"},
        {"operator", "GET", "/v1/tokens", NULL, NULL, 403, "FORBIDDEN"},
        /* 404, 405. */
        {"admin", "GET", "/v1/nodes/nope", NULL, NULL, 404, "NOT_FOUND"},
        {"admin", "PATCH", "/v1/nodes/nope", "application/json", "{\"serial\":\"x\"}", 404,
         "NOT_FOUND"},
        {"admin", "DELETE", "/v1/racks/nope", NULL, NULL, 404, "NOT_FOUND"},
        {"admin", "GET", "/v1/nodes/nope/bios", NULL, NULL, 404, "NOT_FOUND"},
        {"admin", "POST", "/v1/nodes/nope/bios/readings", "application/json",
         "{\"source\":\"m\",\"attributes\":{\"A\":1}}", 404, "NOT_FOUND"},
        {"admin", "GET", "/v1/nowhere", NULL, NULL, 404, "NOT_FOUND"},
        {"none", "GET", "/v1/nowhere", NULL, NULL, 404, "NOT_FOUND"},
        {"admin", "DELETE", "/v1/tokens/not-a-uuid", NULL, NULL, 404, "NOT_FOUND"},
        {"admin", "PUT", "/v1/nodes/n1", "application/json", "{}", 405, "METHOD_NOT_ALLOWED"},
        {"admin", "DELETE", "/v1/nodes", NULL, NULL, 405, "METHOD_NOT_ALLOWED"},
        /* 409. */
        {"admin", "POST", "/v1/nodes", "application/json", "{\"name\":\"n1\"}", 409, "DUPLICATE"},
        {"admin", "POST", "/v1/racks", "application/json", "{\"name\":\"r01\"}", 409, "DUPLICATE"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"macs\":[\"02:00:00:00:00:01\"]}", 409, "DUPLICATE"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"rack\":\"r01\",\"u_position\":4}", 409, "SLOT_OCCUPIED"},
        {"admin", "POST", "/v1/nodes", "application/json",
         "{\"name\":\"x\",\"rack\":\"r01\",\"u_position\":2,\"u_height\":2}", 409, "SLOT_OCCUPIED"},
        {"admin", "DELETE", "/v1/racks/r01", NULL, NULL, 409, "IN_USE"},
        {"admin", "PATCH", "/v1/racks/r01", "application/json", "{\"height_u\":3}", 409,
         "CONFLICT"},
        {"admin", "POST", "/v1/bios/profiles", "application/json",
         "{\"name\":\"p2\",\"node_class\":\"c1\"}", 409, "DUPLICATE"},
        /* 412. */
        {"admin",
         "PATCH",
         "/v1/nodes/n1",
         "application/json",
         "{\"serial\":\"x\"}",
         412,
         "PRECONDITION_FAILED",
         {"If-Match: \"99\"", NULL}},
        {"admin",
         "PATCH",
         "/v1/nodes/n1",
         "application/json",
         "{\"serial\":\"x\"}",
         412,
         "PRECONDITION_FAILED",
         {"If-Match: garbage", NULL}},
        {"admin",
         "DELETE",
         "/v1/nodes/n1",
         NULL,
         NULL,
         412,
         "PRECONDITION_FAILED",
         {"If-Match: \"99\"", NULL}},
        /* 415. */
        {"admin", "POST", "/v1/nodes", "text/plain", "name=x", 415, "UNSUPPORTED_MEDIA_TYPE"},
        {"admin", "POST", "/v1/nodes", "text/csv", "name\nx\n", 415, "UNSUPPORTED_MEDIA_TYPE"},
        {"admin", "PATCH", "/v1/nodes/n1", "application/x-www-form-urlencoded", "serial=x", 415,
         "UNSUPPORTED_MEDIA_TYPE"},
};

static void
test_error_classes(void **state)
{
	char *before, *after;
	size_t i;

	(void)state;
	before = snapshot();
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct bad *c = &cases[i];
		const char *tok = !strcmp(c->token, "admin")    ? S.admin
		                  : !strcmp(c->token, "viewer") ? viewer
		                                                : !strcmp(c->token, "operator")
		                          ?
		                          operator: !strcmp(c->token, "bogus")
		                                    ? "rpt_not-a-real-token"
		                                    : NULL;
		struct reply r;

		req(&S, tok, c->method, c->path, c->ctype, c->body, c->body ? strlen(c->body) : 0,
		    c->headers[0] ? c->headers : NULL, &r);
		if (r.status != c->status)
			fail_msg("case %zu: %s %s: expected %ld, got %ld: %s", i, c->method,
			         c->path, c->status, r.status, r.body ? r.body : "");
		assert_error(&r, c->status, c->code);
		if (c->status == 405)
			assert_true(strlen(r.allow) > 0);
		reply_free(&r);
	}
	after = snapshot();
	/* Nothing any of these requests did is visible: not a row, not an event. */
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* Enumerated query arguments name every value they take, in one sentence. */
static void
test_query_one_of(void **state)
{
	static const struct {
		const char *path, *reason;
	} queries[] = {
	        {"/v1/jobs?state=done",
	         "state must be queued, running, succeeded, failed or cancelled"},
	        {"/v1/rollouts?state=done",
	         "state must be scheduled, running, paused, completed or aborted"},
	        {"/v1/rollouts?kind=os", "kind must be firmware, bios or bmc_credentials"},
	        {"/v1/nodes?maintenance=maybe", "maintenance must be true or false"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof queries / sizeof queries[0]; i++) {
		struct reply r;

		req(&S, S.admin, "GET", queries[i].path, NULL, NULL, 0, NULL, &r);
		assert_error(&r, 400, "BAD_QUERY");
		assert_string_equal(
		        json_string_value(json_object_get(
		                json_object_get(json_object_get(r.json, "error"), "detail"),
		                "reason")),
		        queries[i].reason);
		reply_free(&r);
	}
}

static void
test_allow_header(void **state)
{
	struct reply r;

	(void)state;
	req(&S, S.admin, "PUT", "/v1/nodes/n1", "application/json", "{}", 2, NULL, &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "GET, PATCH, DELETE");
	reply_free(&r);
	req(&S, S.admin, "DELETE", "/v1/racks", NULL, NULL, 0, NULL, &r);
	assert_string_equal(r.allow, "GET, POST");
	reply_free(&r);
}

static void
test_too_large(void **state)
{
	static const char *const expect[] = {"Expect: 100-continue", NULL};
	size_t n = (1 << 20) + 100, i;
	char *big = malloc(n + 1);
	struct reply r;
	char *before, *after;

	(void)state;
	before = snapshot();
	/* A syntactically valid JSON object just over the 1 MiB default cap. */
	memcpy(big, "{\"name\":\"x\",\"notes\":\"", 21);
	for (i = 21; i < n - 2; i++)
		big[i] = 'a';
	big[n - 2] = '"';
	big[n - 1] = '}';
	big[n] = '\0';
	/* Waiting for "100 Continue" as curl does for big bodies (see test_trust's cap test). */
	req(&S, S.admin, "POST", "/v1/racks", "application/json", big, n, expect, &r);
	assert_error(&r, 413, "TOO_LARGE");
	reply_free(&r);
	/* Sent chunked, without a length to refuse up front: cut off at the cap all the same. */
	{
		char path[] = "/tmp/rp-big-XXXXXX", out[300];
		int fd = mkstemp(path);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, big, n), (ssize_t)n);
		close(fd);
		snprintf(out, sizeof out, "%s.out", path);
		assert_int_equal(sh_rc("curl -s -o %s -w '%%{http_code}' -H 'Authorization: Bearer "
		                       "%s' -H 'Content-Type: application/json' -H "
		                       "'Transfer-Encoding: chunked' --data-binary @%s %s/v1/racks "
		                       "| grep -qx 413 && grep -q '\"TOO_LARGE\"' %s",
		                       out, S.admin, path, S.base, out),
		                 0);
		unlink(path);
		unlink(out);
	}
	/* The server is still fine afterwards. */
	assert_int_equal(req(&S, S.admin, "GET", "/v1/nodes/n1", NULL, NULL, 0, NULL, NULL), 200);
	after = snapshot();
	assert_string_equal(before, after);
	free(before);
	free(after);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_error_classes),
	        cmocka_unit_test(test_query_one_of),
	        cmocka_unit_test(test_allow_header),
	        cmocka_unit_test(test_too_large),
	};

	return cmocka_run_group_tests(tests, setup, group_teardown);
}
