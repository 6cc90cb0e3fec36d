/* api pieces that need no server: the error registry, validation, cursors and CSV. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"

static void
test_error_registry(void **state)
{
	enum rp_err back;
	int i, j;

	(void)state;
	for (i = 0; i < RP_ERR__COUNT; i++) {
		const char *c = rp_err_code((enum rp_err)i);
		int st = rp_err_status((enum rp_err)i);

		assert_true(i == RP_ERR_OK || (st >= 400 && st <= 599));
		assert_true(strlen(rp_err_message((enum rp_err)i)) > 0);
		assert_int_equal(rp_err_from_code(c, &back), 0);
		assert_int_equal(back, i);
		for (j = 0; j < i; j++)
			assert_string_not_equal(c, rp_err_code((enum rp_err)j));
	}
	assert_int_equal(rp_err_status(RP_ERR_NOT_FOUND), 404);
	assert_int_equal(rp_err_status(RP_ERR_SLOT_OCCUPIED), 409);
	assert_int_equal(rp_err_status((enum rp_err)999), 500);
	assert_string_equal(rp_err_code((enum rp_err) - 1), "INTERNAL");
	assert_int_equal(rp_err_from_code("NO_SUCH_CODE", &back), -1);
	assert_int_equal(rp_err_from_code(NULL, &back), -1);
}

static void
test_error_body(void **state)
{
	struct rp_api_resp rs = {0};
	json_t *e;

	(void)state;
	rp_api_errorf(&rs, RP_ERR_SLOT_OCCUPIED, "U%d taken", 7);
	assert_int_equal(rs.status, 409);
	e = json_object_get(rs.body, "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")), "SLOT_OCCUPIED");
	assert_string_equal(
	        json_string_value(json_object_get(json_object_get(e, "detail"), "reason")),
	        "U7 taken");
	rp_api_resp_clear(&rs);
}

static enum rp_err
check(const char *text, int create, const char **field)
{
	json_t *o = json_loads(text, JSON_ALLOW_NUL, NULL), *detail = NULL;
	enum rp_err e;
	static char f[64];

	assert_non_null(o);
	e = rp_api_validate(o, rp_api_node_fields, create, &detail);
	f[0] = '\0';
	if (detail && json_is_string(json_object_get(detail, "field")))
		snprintf(f, sizeof f, "%s", json_string_value(json_object_get(detail, "field")));
	if (field)
		*field = f;
	json_decref(detail);
	json_decref(o);
	return e;
}

static void
test_validate(void **state)
{
	const char *f;
	json_t *o, *detail = NULL;

	(void)state;
	assert_int_equal(check("{\"name\":\"n1\"}", 1, NULL), RP_ERR_OK);
	assert_int_equal(check("{}", 1, &f), RP_ERR_MISSING_FIELD);
	assert_string_equal(f, "name");
	assert_int_equal(check("{}", 0, NULL), RP_ERR_OK);
	assert_int_equal(check("{\"name\":null}", 0, &f), RP_ERR_INVALID_FIELD);
	assert_int_equal(check("{\"serial\":null}", 0, NULL), RP_ERR_OK);
	assert_int_equal(check("{\"u_height\":null}", 1, &f), RP_ERR_INVALID_FIELD);
	assert_int_equal(check("{\"name\":\"n\",\"id\":\"x\"}", 1, &f), RP_ERR_READ_ONLY_FIELD);
	assert_string_equal(f, "id");
	assert_int_equal(check("{\"name\":\"n\",\"bmc\":{\"driver\":\"ipmi\",\"port\":0}}", 1, &f),
	                 RP_ERR_INVALID_FIELD);
	assert_string_equal(f, "bmc.port");
	assert_int_equal(check("{\"name\":\"n\",\"bmc\":{\"port\":623}}", 1, &f),
	                 RP_ERR_MISSING_FIELD);
	assert_string_equal(f, "bmc.driver");
	assert_int_equal(check("{\"bmc\":{\"port\":623}}", 0, NULL), RP_ERR_OK);
	assert_int_equal(
	        check("{\"name\":\"n\",\"bmc\":{\"driver\":\"ipmi\",\"password_set\":true}}", 1,
	              &f),
	        RP_ERR_READ_ONLY_FIELD);
	assert_int_equal(check("{\"name\":\"n\",\"u_position\":1.5}", 1, &f), RP_ERR_INVALID_FIELD);
	assert_int_equal(check("{\"name\":\"n\",\"serial\":\"a\\u0000b\"}", 1, &f),
	                 RP_ERR_INVALID_FIELD);
	assert_int_equal(check("{\"name\":\"n\",\"expected\":{\"gpus\":8}}", 1, NULL), RP_ERR_OK);
	assert_int_equal(check("{\"name\":\"n\",\"expected\":[8]}", 1, &f), RP_ERR_INVALID_FIELD);
	/* MACs come back normalised. */
	o = json_loads("{\"name\":\"n\",\"macs\":[\"AA-BB-CC-DD-EE-FF\"]}", 0, NULL);
	assert_int_equal(rp_api_validate(o, rp_api_node_fields, 1, &detail), RP_ERR_OK);
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "macs"), 0)),
	                    "aa:bb:cc:dd:ee:ff");
	json_decref(o);
	assert_int_equal(rp_api_field_known(rp_api_node_fields, "power_state"), 1);
	assert_int_equal(rp_api_field_known(rp_api_node_fields, "password"), 0);
}

static void
test_cursor(void **state)
{
	char buf[RP_CURSOR_BUF], key[128];
	int64_t id;

	(void)state;
	rp_api_cursor_encode(0, 12345, NULL, buf);
	assert_int_equal(rp_api_cursor_decode(buf, 0, &id, key, sizeof key), 0);
	assert_int_equal(id, 12345);
	assert_int_equal(rp_api_cursor_decode(buf, 1, &id, key, sizeof key), -1);
	rp_api_cursor_encode(1, 7, "gpu-r01-u07", buf);
	assert_int_equal(rp_api_cursor_decode(buf, 1, &id, key, sizeof key), 0);
	assert_string_equal(key, "gpu-r01-u07");
	assert_int_equal(rp_api_cursor_decode(buf, 1, &id, key, 5), -1);
	assert_int_equal(rp_api_cursor_decode("", 0, &id, key, sizeof key), -1);
	assert_int_equal(rp_api_cursor_decode("!!!", 0, &id, key, sizeof key), -1);
	assert_int_equal(rp_api_cursor_decode("djE6aTotNTo", 0, &id, key, sizeof key),
	                 -1); /* id -5 */
	assert_int_equal(rp_api_cursor_decode("djI6aToxOg", 0, &id, key, sizeof key), -1); /* v2 */
}

static void
test_csv(void **state)
{
	const char *ok = "name, rack ,tags\r\n"
	                 "a,r1,\"x;y\"\r\n"
	                 "\r\n"
	                 "\"b \"\"q\"\"\",r2,\"multi\nline\"\n"
	                 "c,,\n";
	json_t *rows = NULL;
	char why[128];

	(void)state;
	assert_int_equal(rp_api_csv_parse(ok, strlen(ok), &rows, why, sizeof why), 0);
	assert_int_equal(json_array_size(rows), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "rack")),
	                    "r1");
	assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "tags")),
	                    "x;y");
	assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 1), "name")),
	                    "b \"q\"");
	assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 1), "tags")),
	                    "multi\nline");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 1), "_line")), 4);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 2), "_line")), 6);
	assert_null(json_object_get(json_array_get(rows, 2), "rack"));
	json_decref(rows);
	assert_int_equal(rp_api_csv_parse("", 0, &rows, why, sizeof why), -1);
	assert_int_equal(rp_api_csv_parse("a,b\n\"x,y\n", 9, &rows, why, sizeof why), -1);
	assert_non_null(strstr(why, "unterminated"));
	assert_int_equal(rp_api_csv_parse("a\nx\"y\n", 6, &rows, why, sizeof why), -1);
	assert_int_equal(rp_api_csv_parse("a\n1,2\n", 6, &rows, why, sizeof why), -1);
	assert_non_null(strstr(why, "line 2"));
	assert_int_equal(rp_api_csv_parse("a,a\n1,2\n", 8, &rows, why, sizeof why), -1);
	assert_int_equal(rp_api_csv_parse("a,,b\n", 5, &rows, why, sizeof why), -1);
	assert_int_equal(rp_api_csv_parse("a\n\"x\"y\n", 7, &rows, why, sizeof why), -1);
}

/* Check a plan given as JSON text; on failure the error and its field. */
static enum rp_err
plan(const char *text, int templated, char *field, size_t flen)
{
	json_t *steps = json_loads(text, 0, NULL), *detail = NULL;
	enum rp_err e;

	assert_non_null(steps);
	e = rp_api_plan_check(steps, templated, &detail);
	snprintf(field, flen, "%s", json_string_value(json_object_get(detail, "field")) ?: "");
	json_decref(detail);
	json_decref(steps);
	return e;
}

static void
test_plan_check(void **state)
{
	static const struct {
		const char *plan;
		int templated;
		enum rp_err want;
		const char *field;
	} cases[] = {
	        {"[{\"type\":\"shell\",\"command\":\"true\"}]", 0, RP_ERR_OK, ""},
	        {"[{\"type\":\"reboot\"},{\"type\":\"inventory\"}]", 0, RP_ERR_OK, ""},
	        {"[]", 0, RP_ERR_INVALID_FIELD, "steps"},
	        {"{}", 0, RP_ERR_INVALID_FIELD, "steps"},
	        {"[1]", 0, RP_ERR_INVALID_FIELD, "steps[0]"},
	        {"[{\"command\":\"x\"}]", 0, RP_ERR_MISSING_FIELD, "steps[0].type"},
	        {"[{\"type\":\"telnet\"}]", 0, RP_ERR_INVALID_FIELD, "steps[0].type"},
	        {"[{\"type\":\"shell\"}]", 0, RP_ERR_MISSING_FIELD, "steps[0].command"},
	        {"[{\"type\":\"shell\",\"command\":\"x\",\"colour\":1}]", 0, RP_ERR_UNKNOWN_FIELD,
	         "steps[0].colour"},
	        {"[{\"type\":\"shell\",\"command\":\"x\",\"timeout_s\":0}]", 0,
	         RP_ERR_INVALID_FIELD, "steps[0].timeout_s"},
	        {"[{\"type\":\"shell\",\"command\":\"x\",\"id\":\"a b\"}]", 0, RP_ERR_INVALID_FIELD,
	         "steps[0].id"},
	        {"[{\"type\":\"shell\",\"command\":\"x\",\"id\":\"a\"},{\"type\":\"reboot\",\"id\":"
	         "\"a\"}]",
	         0, RP_ERR_INVALID_FIELD, "steps[1].id"},
	        {"[{\"type\":\"shell\",\"command\":\"x\",\"env\":{\"1A\":\"v\"}}]", 0,
	         RP_ERR_INVALID_FIELD, "steps[0].env"},
	        {"[{\"type\":\"shell\",\"command\":\"x\",\"env\":{\"A\":1}}]", 0,
	         RP_ERR_INVALID_FIELD, "steps[0].env"},
	        {"[{\"type\":\"file\",\"path\":\"/etc/x\",\"content\":\"y\"}]", 0, RP_ERR_OK, ""},
	        {"[{\"type\":\"file\",\"path\":\"etc/x\",\"content\":\"y\"}]", 0,
	         RP_ERR_INVALID_FIELD, "steps[0].path"},
	        {"[{\"type\":\"file\",\"path\":\"/etc/x\"}]", 0, RP_ERR_MISSING_FIELD,
	         "steps[0].content"},
	        {"[{\"type\":\"file\",\"path\":\"/x\",\"content\":\"y\",\"url\":\"http://h/"
	         "x\",\"sha256\":"
	         "\"0000000000000000000000000000000000000000000000000000000000000000\"}]",
	         0, RP_ERR_INVALID_FIELD, "steps[0].content"},
	        {"[{\"type\":\"file\",\"path\":\"/x\",\"url\":\"http://h/x\"}]", 0,
	         RP_ERR_MISSING_FIELD, "steps[0].sha256"},
	        {"[{\"type\":\"file\",\"path\":\"/x\",\"content\":\"y\",\"mode\":\"rw\"}]", 0,
	         RP_ERR_INVALID_FIELD, "steps[0].mode"},
	        {"[{\"type\":\"image\",\"url\":\"ftp://h/i\",\"device\":\"/dev/sda\",\"sha256\":"
	         "\"0000000000000000000000000000000000000000000000000000000000000000\"}]",
	         0, RP_ERR_INVALID_FIELD, "steps[0].url"},
	        {"[{\"type\":\"image\",\"url\":\"http://h/i\",\"device\":\"/dev/"
	         "sda\",\"sha256\":\"abc\"}]",
	         0, RP_ERR_INVALID_FIELD, "steps[0].sha256"},
	        {"[{\"type\":\"firmware\",\"command\":\"flash "
	         "${image}\",\"image_url\":\"http://h/f\"}]",
	         0, RP_ERR_MISSING_FIELD, "steps[0].sha256"},
	        /* A recipe may leave formats to its arguments; a job may not. */
	        {"[{\"type\":\"file\",\"path\":\"${dir}/x\",\"content\":\"y\"}]", 1, RP_ERR_OK, ""},
	        {"[{\"type\":\"file\",\"path\":\"${dir}/x\",\"content\":\"y\"}]", 0,
	         RP_ERR_INVALID_FIELD, "steps[0].path"},
	};
	char field[128];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum rp_err e = plan(cases[i].plan, cases[i].templated, field, sizeof field);

		if (e != cases[i].want || strcmp(field, cases[i].field) != 0)
			fail_msg("case %zu %s: got %s on '%s', want %s on '%s'", i, cases[i].plan,
			         rp_err_code(e), field, rp_err_code(cases[i].want), cases[i].field);
	}
}

static void
test_plan_defaults_and_cap(void **state)
{
	json_t *steps = json_loads(
	               "[{\"type\":\"reboot\"},{\"type\":\"inventory\",\"id\":\"inv\"}]", 0, NULL),
	       *detail = NULL;
	size_t i;

	(void)state;
	assert_int_equal(rp_api_plan_check(steps, 0, &detail), RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 0), "id")),
	                    "step-1");
	assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 1), "id")),
	                    "inv");
	json_decref(steps);
	steps = json_array();
	for (i = 0; i < 101; i++)
		json_array_append_new(steps, json_pack("{s:s}", "type", "inventory"));
	assert_int_equal(rp_api_plan_check(steps, 0, &detail), RP_ERR_INVALID_FIELD);
	json_decref(detail);
	json_decref(steps);
}

static void
test_recipe_expand(void **state)
{
	json_t *recipe = json_loads(
	        "{\"params\":{\"dir\":{\"required\":true},\"mode\":{\"default\":\"0600\"},\"who\":{"
	        "}},"
	        "\"steps\":[{\"type\":\"file\",\"path\":\"${dir}/motd\",\"content\":\"hi ${who} "
	        "${HOME}\","
	        "\"mode\":\"${mode}\"},{\"type\":\"shell\",\"command\":\"echo ${dir}${dir}\","
	        "\"timeout_s\":5}]}",
	        0, NULL);
	json_t *args, *out = NULL, *detail = NULL, *s0, *s1;

	(void)state;
	assert_non_null(recipe);
	assert_int_equal(rp_api_recipe_params_check(json_object_get(recipe, "params"), &detail),
	                 RP_ERR_OK);
	args = json_pack("{s:s}", "dir", "/etc");
	assert_int_equal(rp_api_recipe_expand(recipe, args, &out, &detail), RP_ERR_OK);
	s0 = json_array_get(out, 0);
	s1 = json_array_get(out, 1);
	assert_string_equal(json_string_value(json_object_get(s0, "path")), "/etc/motd");
	/* Undeclared names are the shell's: ${HOME} stays. A declared one without a value is "". */
	assert_string_equal(json_string_value(json_object_get(s0, "content")), "hi  ${HOME}");
	assert_string_equal(json_string_value(json_object_get(s0, "mode")), "0600");
	assert_string_equal(json_string_value(json_object_get(s1, "command")), "echo /etc/etc");
	assert_int_equal(json_integer_value(json_object_get(s1, "timeout_s")), 5);
	assert_int_equal(rp_api_plan_check(out, 0, &detail), RP_ERR_OK);
	json_decref(out);
	json_decref(args);
	/* Missing required, unknown, and a value of the wrong type. */
	args = json_object();
	assert_int_equal(rp_api_recipe_expand(recipe, args, &out, &detail), RP_ERR_MISSING_FIELD);
	assert_string_equal(json_string_value(json_object_get(detail, "field")), "args.dir");
	json_decref(detail);
	json_decref(args);
	args = json_pack("{s:s, s:s}", "dir", "/x", "colour", "red");
	assert_int_equal(rp_api_recipe_expand(recipe, args, &out, &detail), RP_ERR_UNKNOWN_FIELD);
	json_decref(detail);
	json_decref(args);
	args = json_pack("{s:s, s:[]}", "dir", "/x", "who");
	assert_int_equal(rp_api_recipe_expand(recipe, args, &out, &detail), RP_ERR_INVALID_FIELD);
	json_decref(detail);
	json_decref(args);
	json_decref(recipe);
	/* Param names and specs. */
	recipe = json_loads("{\"1x\":{}}", 0, NULL);
	assert_int_equal(rp_api_recipe_params_check(recipe, &detail), RP_ERR_INVALID_FIELD);
	json_decref(detail);
	json_decref(recipe);
	recipe = json_loads("{\"x\":{\"required\":\"yes\"}}", 0, NULL);
	assert_int_equal(rp_api_recipe_params_check(recipe, &detail), RP_ERR_INVALID_FIELD);
	assert_string_equal(json_string_value(json_object_get(detail, "field")),
	                    "params.x.required");
	json_decref(detail);
	json_decref(recipe);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_error_registry),
	        cmocka_unit_test(test_error_body),
	        cmocka_unit_test(test_validate),
	        cmocka_unit_test(test_cursor),
	        cmocka_unit_test(test_csv),
	        cmocka_unit_test(test_plan_check),
	        cmocka_unit_test(test_plan_defaults_and_cap),
	        cmocka_unit_test(test_recipe_expand),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
