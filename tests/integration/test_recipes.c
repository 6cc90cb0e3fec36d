/* The recipes rackpilotd ships (the scripts in recipes/): a fresh server lists them, each is a
 * recipe the API itself accepts, an operator's recipe of a shipped name is kept, and a restart
 * loads nothing twice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *const shipped[] = {
        "connectx-firmware", "connectx-firmware-flash",
        "dcgm-diag",         "gpu-health",
        "gpu-topology",      "ib-fabric",
        "ib-ports",          NULL,
};

static int
log_count(struct server *s, const char *needle)
{
	char *text = NULL, *p;
	size_t len = 0;
	int n = 0;
	FILE *f = fopen(s->log, "r");

	if (f == NULL)
		return -1;
	if (getdelim(&text, &len, '\0', f) < 0) {
		fclose(f);
		free(text);
		return 0;
	}
	fclose(f);
	for (p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	free(text);
	return n;
}

/* Every shipped recipe is listed, and POSTed again under another name the API takes it: the
 * build made what an operator could have made. */
static void
test_listed_and_valid(void **state)
{
	struct server s;
	struct reply r;
	char path[200], name[100];
	json_t *copy, *steps;
	char *body;
	int i;

	(void)state;
	server_start(&s, NULL, NULL);
	assert_int_equal(count_all(&s, "/v1/recipes"), 7);
	/* One creation event each. */
	assert_int_equal(count_all(&s, "/v1/events?action=recipe.created"), 7);
	for (i = 0; shipped[i]; i++) {
		snprintf(path, sizeof path, "/v1/recipes/%s", shipped[i]);
		assert_int_equal(call(&s, s.admin, "GET", path, &r, NULL), 200);
		copy = json_deep_copy(r.json);
		reply_free(&r);
		json_object_del(copy, "id");
		json_object_del(copy, "version");
		json_object_del(copy, "created_at");
		json_object_del(copy, "updated_at");
		snprintf(name, sizeof name, "copy-%s", shipped[i]);
		json_object_set_new(copy, "name", json_string(name));
		body = json_dumps(copy, JSON_COMPACT);
		assert_int_equal(req(&s, s.admin, "POST", "/v1/recipes", "application/json", body,
		                     strlen(body), NULL, &r),
		                 201);
		reply_free(&r);
		free(body);
		json_decref(copy);
	}
	/* The flasher: target (shell, arguments in env), flash (firmware, the agent's ${image}),
	 * inventory; its params are what firmware_update method agent supplies. */
	assert_int_equal(call(&s, s.admin, "GET", "/v1/recipes/connectx-firmware-flash", &r, NULL),
	                 200);
	steps = json_object_get(r.json, "steps");
	assert_int_equal(json_array_size(steps), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 0), "type")),
	                    "shell");
	assert_string_equal(
	        json_string_value(json_object_get(json_object_get(json_array_get(steps, 0), "env"),
	                                          "RP_COMPONENT")),
	        "${component}");
	assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 1), "type")),
	                    "firmware");
	assert_string_equal(
	        json_string_value(json_object_get(json_array_get(steps, 1), "image_url")),
	        "${image_url}");
	assert_non_null(
	        strstr(json_string_value(json_object_get(json_array_get(steps, 1), "command")),
	               "RP_IMAGE=${image}\n#!/bin/sh\n"));
	assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 2), "type")),
	                    "inventory");
	assert_true(json_is_true(json_object_get(
	        json_object_get(json_object_get(r.json, "params"), "sha256"), "required")));
	reply_free(&r);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

/* An operator's recipe of a shipped name is never replaced, a restart adds nothing, and a
 * shipped recipe deleted comes back at the next start. */
static void
test_operator_kept_and_restart(void **state)
{
	struct server s;
	struct reply r;
	char dir[256];
	long events;

	(void)state;
	server_start(&s, NULL, NULL);
	snprintf(dir, sizeof dir, "%s", s.dir);
	assert_int_equal(call(&s, s.admin, "DELETE", "/v1/recipes/ib-ports", &r, NULL), 204);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "DELETE", "/v1/recipes/dcgm-diag", &r, NULL), 204);
	reply_free(&r);
	assert_int_equal(call(&s, s.admin, "POST", "/v1/recipes", &r,
	                      "{s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", "ib-ports", "description",
	                      "ours", "steps", "id", "a", "type", "shell", "command", "ibstat"),
	                 201);
	reply_free(&r);
	events = count_all(&s, "/v1/events");
	server_stop(&s, SIGTERM);

	server_start(&s, dir, NULL);
	assert_int_equal(count_all(&s, "/v1/recipes"), 7);
	assert_int_equal(call(&s, s.admin, "GET", "/v1/recipes/ib-ports", &r, NULL), 200);
	assert_string_equal(json_string_value(json_object_get(r.json, "description")), "ours");
	assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 1);
	reply_free(&r);
	assert_int_equal(log_count(&s, "recipe ib-ports is the operator's; the shipped one is "
	                               "not loaded"),
	                 1);
	/* dcgm-diag was deleted: it is back, with its one event. */
	assert_int_equal(call(&s, s.admin, "GET", "/v1/recipes/dcgm-diag", &r, NULL), 200);
	reply_free(&r);
	assert_int_equal(count_all(&s, "/v1/events"), events + 1);
	events = count_all(&s, "/v1/events");
	server_stop(&s, SIGKILL);

	/* Nothing to load: no event, no duplicate. */
	server_start(&s, dir, NULL);
	assert_int_equal(count_all(&s, "/v1/recipes"), 7);
	assert_int_equal(count_all(&s, "/v1/events"), events);
	server_stop(&s, SIGTERM);
	server_cleanup(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_listed_and_valid),
	        cmocka_unit_test(test_operator_kept_and_restart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
