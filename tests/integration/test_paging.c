/* Cursor pagination: every item exactly once, in order, while new items are inserted. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void
create_nodes(const char *prefix, int from, int to)
{
	char name[64];
	struct reply r;
	int i;

	for (i = from; i < to; i++) {
		snprintf(name, sizeof name, "%s-%04d", prefix, i);
		assert_int_equal(call(&S, S.admin, "POST", "/v1/nodes", &r, "{s:s}", "name", name),
		                 201);
		reply_free(&r);
	}
}

/* Walk all pages of path, inserting `insert` new nodes after the first page. Returns the
 * names seen, in order. */
static json_t *
walk(const char *path, const char *prefix, int insert_from, int insert_to)
{
	json_t *seen = json_array(), *it;
	char url[512], cur[300] = "";
	struct reply r;
	int page = 0;
	size_t i;

	for (;;) {
		snprintf(url, sizeof url, "%s%s%s", path, cur[0] ? "&cursor=" : "", cur);
		assert_int_equal(req(&S, S.admin, "GET", url, NULL, NULL, 0, NULL, &r), 200);
		json_array_foreach(json_object_get(r.json, "items"), i, it)
		        json_array_append(seen, json_object_get(it, "name"));
		if (page++ == 0 && insert_to > insert_from)
			create_nodes(prefix, insert_from, insert_to);
		if (!json_is_string(json_object_get(r.json, "next_cursor"))) {
			reply_free(&r);
			break;
		}
		snprintf(cur, sizeof cur, "%s",
		         json_string_value(json_object_get(r.json, "next_cursor")));
		reply_free(&r);
	}
	return seen;
}

static void
test_creation_order(void **state)
{
	json_t *seen;
	char want[64];
	int i;

	(void)state;
	create_nodes("node", 0, 250);
	/* 50 more arrive while the client pages through: the 250 come once each, in order, and
	 * the newcomers after them (creation order), none twice. */
	seen = walk("/v1/nodes?limit=100", "late", 0, 50);
	assert_int_equal(json_array_size(seen), 300);
	for (i = 0; i < 250; i++) {
		snprintf(want, sizeof want, "node-%04d", i);
		assert_string_equal(json_string_value(json_array_get(seen, (size_t)i)), want);
	}
	for (i = 0; i < 50; i++) {
		snprintf(want, sizeof want, "late-%04d", i);
		assert_string_equal(json_string_value(json_array_get(seen, (size_t)(250 + i))),
		                    want);
	}
	json_decref(seen);
}

static void
test_name_order(void **state)
{
	json_t *seen;
	size_t i;
	int aa = 0;

	(void)state;
	/* Inserting names that sort before the cursor must not shift later pages. */
	seen = walk("/v1/nodes?limit=70&sort=name", "aaa", 0, 20);
	for (i = 1; i < json_array_size(seen); i++)
		assert_true(strcmp(json_string_value(json_array_get(seen, i - 1)),
		                   json_string_value(json_array_get(seen, i))) < 0);
	for (i = 0; i < json_array_size(seen); i++)
		aa += strncmp(json_string_value(json_array_get(seen, i)), "aaa-", 4) == 0;
	/* 300 existing ones all seen; the aaa- ones sorted before page 2 are not. */
	assert_int_equal(json_array_size(seen) - (size_t)aa, 300);
	assert_int_equal(aa, 0);
	json_decref(seen);
}

static void
test_cursor_misuse(void **state)
{
	struct reply r;
	char url[512];

	(void)state;
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?limit=5", &r, NULL), 200);
	/* A creation-order cursor used with sort=name is refused, not misread. */
	snprintf(url, sizeof url, "/v1/nodes?sort=name&cursor=%s",
	         json_string_value(json_object_get(r.json, "next_cursor")));
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", url, &r, NULL), 400);
	assert_error(&r, 400, "BAD_CURSOR");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes?cursor=dGFtcGVyZWQ", &r, NULL), 400);
	assert_error(&r, 400, "BAD_CURSOR");
	reply_free(&r);
}

/* Distinct names seen walking path's pages (its own limit) to the end. */
static int
pages(const char *path)
{
	char url[600], cur[300] = "";
	json_t *names = json_object(), *it;
	struct reply r;
	size_t i;
	int n;

	for (;;) {
		snprintf(url, sizeof url, "%s%s%s", path, cur[0] ? "&cursor=" : "", cur);
		assert_int_equal(req(&S, S.admin, "GET", url, NULL, NULL, 0, NULL, &r), 200);
		json_array_foreach(json_object_get(r.json, "items"), i, it)
		        json_object_set(names, jstr(it, "name"), json_true());
		if (!json_is_string(json_object_get(r.json, "next_cursor"))) {
			reply_free(&r);
			break;
		}
		snprintf(cur, sizeof cur, "%s", jstr(r.json, "next_cursor"));
		reply_free(&r);
	}
	n = (int)json_object_size(names);
	json_decref(names);
	return n;
}

/* Every resource pages in creation order whatever its ids look like: recipes and images once
 * sorted by their UUID string, so a cursor skipped some. */
static void
test_creation_order_by_row(void **state)
{
	char name[64], path[300], body[256];
	struct reply r;
	int i;

	(void)state;
	for (i = 0; i < 12; i++) {
		snprintf(name, sizeof name, "rec-%02d", i);
		snprintf(body, sizeof body,
		         "{\"name\":\"%s\",\"steps\":[{\"id\":\"a\","
		         "\"type\":\"inventory\"}]}",
		         name);
		assert_int_equal(req(&S, S.admin, "POST", "/v1/recipes", "application/json", body,
		                     strlen(body), NULL, &r),
		                 201);
		reply_free(&r);
		snprintf(path, sizeof path, "/v1/images/img-%02d?kind=other", i);
		assert_int_equal(req(&S, S.admin, "PUT", path, "application/octet-stream", name,
		                     strlen(name), NULL, &r),
		                 201);
		reply_free(&r);
	}
	/* Twelve of the test's and the shipped ones (recipes/). */
	assert_int_equal(pages("/v1/recipes?limit=1"), 12 + 7);
	assert_int_equal(pages("/v1/images?limit=1"), 12);
	assert_int_equal(pages("/v1/images?limit=5&kind=other"), 12);
	assert_int_equal(pages("/v1/boot-profiles?limit=1"), 0);
}

static void
test_events_paging(void **state)
{
	(void)state;
	/* 1 token... and 320 node.created events; all of them page out. */
	assert_true(count_all(&S, "/v1/events?action=node.created") == 320);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_creation_order),        cmocka_unit_test(test_name_order),
	        cmocka_unit_test(test_cursor_misuse),         cmocka_unit_test(test_events_paging),
	        cmocka_unit_test(test_creation_order_by_row),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
