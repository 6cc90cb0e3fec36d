/*
 * docs/openapi.yaml describes every route in the table: each (method, path) pair of
 * rp_api_routes must appear under `paths:`, and the document must not list routes that
 * do not exist.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "harness.h"

struct op {
	char method[8];
	char path[128];
};

/* Read `paths:` entries: "  /path:" at indent 2, "    get:" at indent 4. */
static size_t
load(struct op *ops, size_t cap)
{
	char file[512], line[512], cur[128] = "";
	size_t n = 0;
	int in_paths = 0;
	FILE *f;

	snprintf(file, sizeof file, "%s/docs/openapi.yaml", rp_test_src);
	f = fopen(file, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] != ' ' && line[0] != '\0' && line[0] != '#') {
			in_paths = strcmp(line, "paths:") == 0;
			continue;
		}
		if (!in_paths)
			continue;
		if (strncmp(line, "  /", 3) == 0 && line[strlen(line) - 1] == ':') {
			snprintf(cur, sizeof cur, "%.*s", (int)strlen(line) - 3, line + 2);
		} else if (strncmp(line, "    ", 4) == 0 && line[4] != ' ' && cur[0]) {
			static const char *methods[] = {"get",   "post",   "put",
			                                "patch", "delete", NULL};
			int i;

			for (i = 0; methods[i]; i++) {
				size_t l = strlen(methods[i]);

				if (strncmp(line + 4, methods[i], l) == 0 && line[4 + l] == ':') {
					assert_true(n < cap);
					for (size_t k = 0; k <= l; k++)
						ops[n].method[k] =
						        (char)(line[4 + k] >= 'a' ? line[4 + k] - 32
						                                  : 0);
					ops[n].method[l] = '\0';
					snprintf(ops[n].path, sizeof ops[n].path, "%s", cur);
					n++;
				}
			}
		}
	}
	fclose(f);
	return n;
}

static void
test_every_route_documented(void **state)
{
	struct op ops[256];
	size_t n = load(ops, 256), i, j;
	int missing = 0;

	(void)state;
	assert_true(n > 0);
	for (i = 0; i < rp_api_route_count; i++) {
		for (j = 0; j < n; j++)
			if (!strcmp(ops[j].method, rp_api_routes[i].method) &&
			    !strcmp(ops[j].path, rp_api_routes[i].pattern))
				break;
		if (j == n) {
			fprintf(stderr, "openapi.yaml lacks %s %s\n", rp_api_routes[i].method,
			        rp_api_routes[i].pattern);
			missing++;
		}
	}
	for (j = 0; j < n; j++) {
		for (i = 0; i < rp_api_route_count; i++)
			if (!strcmp(ops[j].method, rp_api_routes[i].method) &&
			    !strcmp(ops[j].path, rp_api_routes[i].pattern))
				break;
		if (i == rp_api_route_count) {
			fprintf(stderr, "openapi.yaml documents %s %s, which the server lacks\n",
			        ops[j].method, ops[j].path);
			missing++;
		}
	}
	assert_int_equal(missing, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_every_route_documented),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
