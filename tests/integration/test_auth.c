/*
 * Auth for each role, over every route in the table: no route escapes the check because
 * the test walks the server's own route table.
 */
#include <string.h>

#include "api/api.h"
#include "harness.h"

/* The route's pattern with every {param} replaced by a name nothing has. */
static void
concrete(const char *pattern, char *out, size_t n)
{
	size_t o = 0;

	for (; *pattern && o + 40 < n; pattern++) {
		if (*pattern == '{') {
			o += (size_t)snprintf(out + o, n - o, "%s", "does-not-exist");
			pattern = strchr(pattern, '}');
		} else {
			out[o++] = *pattern;
		}
	}
	out[o] = '\0';
}

static void
test_role_matrix(void **state)
{
	char tokens[4][128], path[256];
	const char *names[] = {"none", "viewer", "operator", "admin"};
	size_t i;
	int role;

	(void)state;
	tokens[0][0] = '\0';
	make_token(&S, "viewer", tokens[1]);
	make_token(&S, "operator", tokens[2]);
	snprintf(tokens[3], sizeof tokens[3], "%s", S.admin);
	for (i = 0; i < rp_api_route_count; i++) {
		const struct rp_route *rt = &rp_api_routes[i];

		concrete(rt->pattern, path, sizeof path);
		/* An admitted stream would never end: a bad argument ends it after the role check.
		 */
		if (strcmp(rt->pattern, "/v1/events/stream") == 0)
			strcat(path, "?after=x");
		for (role = 0; role < 4; role++) {
			struct reply r;
			int has_body = strcmp(rt->method, "GET") && strcmp(rt->method, "DELETE");
			long st = req(&S, role ? tokens[role] : NULL, rt->method, path,
			              has_body ? "application/json" : NULL, has_body ? "{}" : NULL,
			              has_body ? 2 : 0, NULL, &r);

			if (rt->role == RP_ROLE_NONE &&
			    strncmp(rt->pattern, "/v1/agent/", 10) == 0) {
				/* Registration checks its own secret: an API token is no bootstrap
				 * token. */
				if (st != 401)
					fail_msg("%s %s as %s: expected 401, got %ld", rt->method,
					         path, names[role], st);
				assert_error(&r, 401, "UNAUTHORIZED");
			} else if (rt->role == RP_ROLE_NONE) {
				if (st == 401 || st == 403)
					fail_msg("%s %s needs no token but %s got %ld", rt->method,
					         path, names[role], st);
			} else if (role == 0) {
				if (st != 401)
					fail_msg("%s %s without a token: %ld", rt->method, path,
					         st);
				assert_error(&r, 401, "UNAUTHORIZED");
			} else if (rt->role == RP_ROLE_AGENT) {
				/* Agent routes take agent tokens only, whatever an API token's
				 * role. */
				if (st != 403)
					fail_msg("%s %s as %s: expected 403, got %ld", rt->method,
					         path, names[role], st);
				assert_error(&r, 403, "FORBIDDEN");
			} else if (role < (int)rt->role) {
				if (st != 403)
					fail_msg("%s %s as %s: expected 403, got %ld", rt->method,
					         path, names[role], st);
				assert_error(&r, 403, "FORBIDDEN");
			} else if (st == 401 || st == 403) {
				fail_msg("%s %s as %s: refused with %ld", rt->method, path,
				         names[role], st);
			}
			reply_free(&r);
		}
	}
}

static void
test_bearer_forms(void **state)
{
	const char *h[2] = {NULL, NULL};
	char line[200];

	(void)state;
	snprintf(line, sizeof line, "Authorization: bearer   %s  ", S.admin);
	h[0] = line;
	assert_int_equal(req(&S, NULL, "GET", "/v1", NULL, NULL, 0, h, NULL), 200);
	snprintf(line, sizeof line, "Authorization: Basic %s", S.admin);
	assert_int_equal(req(&S, NULL, "GET", "/v1", NULL, NULL, 0, h, NULL), 401);
	snprintf(line, sizeof line, "Authorization: Bearer %.20s", S.admin);
	assert_int_equal(req(&S, NULL, "GET", "/v1", NULL, NULL, 0, h, NULL), 401);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_role_matrix),
	        cmocka_unit_test(test_bearer_forms),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
