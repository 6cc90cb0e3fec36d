/* bmc: the options table (bmc/options.h) and its one check, as the API and the drivers use it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bmc/bmc.h"
#include "bmc/options.h"

/* Validate options (JSON text) for driver; returns the fault and fills field/reason. */
static enum rp_bmc_opt_fault
check(const char *driver, const char *text, struct rp_bmc_opt_error *why)
{
	json_t *o = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	enum rp_bmc_opt_fault f;

	assert_non_null(o);
	memset(why, 0, sizeof *why);
	f = rp_bmc_options_validate(driver, o, why);
	json_decref(o);
	return f;
}

static void
expect(const char *driver, const char *text, enum rp_bmc_opt_fault fault, const char *field,
       const char *reason)
{
	struct rp_bmc_opt_error why;
	enum rp_bmc_opt_fault f = check(driver, text, &why);

	if (f != fault)
		fail_msg("%s %s: fault %d, want %d (%s: %s)", driver ? driver : "-", text, f, fault,
		         why.field, why.reason);
	if (fault == RP_BMC_OPT_OK)
		return;
	assert_string_equal(why.field, field);
	assert_string_equal(why.reason, reason);
}

/* Every row is well-formed: a unique name, known drivers, a default inside its range. */
static void
test_table(void **state)
{
	const struct rp_bmc_option *o, *p;
	unsigned all = 0;
	size_t n, i;

	(void)state;
	for (n = 0; rp_bmc_drivers[n]; n++)
		all |= 1u << n;
	assert_int_equal(all, RP_BMC_DRV_IPMI | RP_BMC_DRV_REDFISH | RP_BMC_DRV_FAKE);
	assert_string_equal(rp_bmc_drivers[0], "ipmi");
	assert_string_equal(rp_bmc_drivers[1], "redfish");
	assert_string_equal(rp_bmc_drivers[2], "fake");
	for (o = rp_bmc_options; o->name; o++) {
		assert_ptr_equal(rp_bmc_option_find(o->name), o);
		for (p = rp_bmc_options; p < o; p++)
			assert_string_not_equal(p->name, o->name);
		assert_true(o->drivers != 0 && (o->drivers & ~all) == 0);
		assert_non_null(o->help);
		switch (o->type) {
		case RP_BMC_OPT_INT:
			assert_true(o->min <= o->def && o->def <= o->max);
			break;
		case RP_BMC_OPT_ENUM:
			for (i = 0; o->names[i]; i++)
				;
			assert_true(o->def >= 0 && (size_t)o->def < i);
			break;
		case RP_BMC_OPT_NAMES:
			assert_non_null(o->names[0]);
			break;
		case RP_BMC_OPT_ID:
			assert_true(o->max > 0);
			break;
		}
	}
	assert_null(rp_bmc_option_find("nope"));
	/* The table's workaround names are the IPMI driver's: every one maps to a flag and back. */
	o = rp_bmc_option_find("workarounds");
	assert_non_null(o);
	assert_ptr_equal(o->names, rp_bmc_ipmi_workaround_names);
	assert_ptr_equal(o->codes, rp_bmc_ipmi_workaround_flags);
	for (i = 0; o->names[i]; i++) {
		json_t *one = json_pack("[s]", o->names[i]), *back;
		json_t *opts = json_pack("{s:O}", "workarounds", one);
		unsigned flag = (unsigned)rp_bmc_option_int(opts, "workarounds");

		assert_int_not_equal(flag, 0);
		back = rp_bmc_workaround_names(flag);
		assert_true(json_equal(back, one));
		json_decref(back);
		json_decref(opts);
		json_decref(one);
	}
}

/* Types and ranges, with the API's wording (bmc.options.<field>: reason). */
static void
test_values(void **state)
{
	(void)state;
	expect(NULL, "null", RP_BMC_OPT_OK, NULL, NULL);
	expect("ipmi", "{}", RP_BMC_OPT_OK, NULL, NULL);
	expect(NULL, "[]", RP_BMC_OPT_INVALID, "", "must be an object");
	expect(NULL, "{\"nope\":1}", RP_BMC_OPT_UNKNOWN, "nope", "unknown field");
	expect(NULL, "{\"nope\":null}", RP_BMC_OPT_UNKNOWN, "nope", "unknown field");
	expect(NULL, "{\"cipher_suite\":99}", RP_BMC_OPT_INVALID, "cipher_suite",
	       "must be an integer from 0 to 17");
	expect(NULL, "{\"cipher_suite\":\"3\"}", RP_BMC_OPT_INVALID, "cipher_suite",
	       "must be an integer");
	expect(NULL, "{\"retry_wait_ms\":1.5}", RP_BMC_OPT_INVALID, "retry_wait_ms",
	       "must be an integer");
	expect(NULL, "{\"retry_tries\":0}", RP_BMC_OPT_INVALID, "retry_tries",
	       "must be an integer from 1 to 20");
	expect(NULL, "{\"privilege\":\"root\"}", RP_BMC_OPT_INVALID, "privilege",
	       "must be one of: user, operator, admin");
	expect(NULL, "{\"privilege\":4}", RP_BMC_OPT_INVALID, "privilege",
	       "must be one of: user, operator, admin");
	expect(NULL, "{\"scheme\":\"ftp\"}", RP_BMC_OPT_INVALID, "scheme",
	       "must be one of: https, http");
	expect(NULL, "{\"workarounds\":\"sun20\"}", RP_BMC_OPT_INVALID, "workarounds",
	       "must be an array of strings");
	expect(NULL, "{\"workarounds\":[\"opensesspriv\",\"opensesspriv\"]}", RP_BMC_OPT_INVALID,
	       "workarounds", "opensesspriv listed twice");
	expect(NULL, "{\"workarounds\":[\"sun20\",\"x\"]}", RP_BMC_OPT_INVALID, "workarounds",
	       "entry 1: must be one of: authcap, intel20, supermicro20, sun20, opensesspriv, "
	       "integritycheckvalue, nochecksumcheck");
	expect(NULL, "{\"workarounds\":[1,2,3,4,5,6,7,8]}", RP_BMC_OPT_INVALID, "workarounds",
	       "at most 7 entries");
	expect(NULL, "{\"system_id\":\"a/b\"}", RP_BMC_OPT_INVALID, "system_id",
	       "a ComputerSystem Id (the last segment of its URI)");
	expect(NULL, "{\"system_id\":\"\"}", RP_BMC_OPT_INVALID, "system_id",
	       "a ComputerSystem Id (the last segment of its URI)");
	expect(NULL, "{\"system_id\":5}", RP_BMC_OPT_INVALID, "system_id", "must be a string");
	expect(NULL,
	       "{\"system_id\":\"0123456789012345678901234567890123456789012345678901234567890123"
	       "\"}",
	       RP_BMC_OPT_INVALID, "system_id", "at most 63 characters");
	expect(NULL, "{\"system_id\":\"a\\u0000b\"}", RP_BMC_OPT_INVALID, "system_id",
	       "must not contain NUL characters");
	/* Without a driver any driver's options are fine together; nulls are defaults. */
	expect(NULL, "{\"scheme\":\"http\",\"cipher_suite\":3,\"delay_ms\":null}", RP_BMC_OPT_OK,
	       NULL, NULL);
	/* The first bad member in the object's order is the one reported. */
	expect(NULL, "{\"retry_tries\":0,\"cipher_suite\":99}", RP_BMC_OPT_INVALID, "retry_tries",
	       "must be an integer from 1 to 20");
}

/* Which options belong to which driver. */
static void
test_drivers(void **state)
{
	(void)state;
	expect("ipmi", "{\"scheme\":\"http\"}", RP_BMC_OPT_FOREIGN, "",
	       "scheme is not an option of the ipmi driver");
	expect("fake", "{\"cipher_suite\":3}", RP_BMC_OPT_FOREIGN, "",
	       "cipher_suite is not an option of the fake driver");
	expect("redfish", "{\"delay_ms\":0}", RP_BMC_OPT_FOREIGN, "",
	       "delay_ms is not an option of the redfish driver");
	expect("ipmi", "{\"nope\":1}", RP_BMC_OPT_FOREIGN, "",
	       "nope is not an option of the ipmi driver");
	expect("ipmi", "{\"scheme\":null,\"cipher_suite\":3}", RP_BMC_OPT_OK, NULL, NULL);
	expect("redfish",
	       "{\"scheme\":\"http\",\"system_id\":\"1\",\"timeout_ms\":100,\"retry_tries\":1,"
	       "\"retry_wait_ms\":0}",
	       RP_BMC_OPT_OK, NULL, NULL);
	expect("ipmi",
	       "{\"cipher_suite\":17,\"privilege\":\"user\",\"workarounds\":[],"
	       "\"session_timeout_ms\":100,\"retransmission_timeout_ms\":50}",
	       RP_BMC_OPT_OK, NULL, NULL);
	expect("fake", "{\"delay_ms\":60000}", RP_BMC_OPT_OK, NULL, NULL);
	expect("ipmi", "{\"cipher_suite\":-1}", RP_BMC_OPT_INVALID, "cipher_suite",
	       "must be an integer from 0 to 17");
}

/* Values and defaults as the drivers read them. */
static void
test_read(void **state)
{
	json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:n}", "cipher_suite", 17, "privilege",
	                      "operator", "scheme", "http", "system_id", "Blade2", "timeout_ms");

	(void)state;
	assert_int_equal(rp_bmc_option_int(o, "cipher_suite"), 17);
	assert_int_equal(rp_bmc_option_int(o, "privilege"), 3);
	assert_string_equal(rp_bmc_option_str(o, "privilege"), "operator");
	assert_string_equal(rp_bmc_option_str(o, "scheme"), "http");
	assert_string_equal(rp_bmc_option_str(o, "system_id"), "Blade2");
	assert_int_equal(rp_bmc_option_int(o, "timeout_ms"), 15000);
	assert_int_equal(rp_bmc_option_int(NULL, "cipher_suite"), 3);
	assert_int_equal(rp_bmc_option_int(NULL, "privilege"), 4);
	assert_int_equal(rp_bmc_option_int(NULL, "session_timeout_ms"), 5000);
	assert_int_equal(rp_bmc_option_int(NULL, "retransmission_timeout_ms"), 500);
	assert_int_equal(rp_bmc_option_int(NULL, "retry_tries"), 5);
	assert_int_equal(rp_bmc_option_int(NULL, "retry_wait_ms"), 30000);
	assert_int_equal(rp_bmc_option_int(NULL, "delay_ms"), 0);
	assert_string_equal(rp_bmc_option_str(NULL, "scheme"), "https");
	assert_null(rp_bmc_option_str(NULL, "system_id"));
	assert_int_equal(rp_bmc_option_int(o, "nope"), 0);
	assert_null(rp_bmc_option_str(o, "nope"));
	json_decref(o);
}

/* rp_bmc_target_from_json reads through the table and refuses what it refuses. */
static void
test_target(void **state)
{
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	json_t *bmc;

	(void)state;
	bmc = json_pack("{s:s, s:s, s:{s:s, s:[s, s], s:i}}", "driver", "ipmi", "address", "h",
	                "options", "privilege", "user", "workarounds", "sun20", "opensesspriv",
	                "session_timeout_ms", 2000);
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), 0);
	assert_int_equal(t.privilege, 2);
	assert_int_equal(t.cipher_suite, 3);
	assert_int_equal(t.session_timeout_ms, 2000);
	assert_int_equal(t.retransmission_timeout_ms, 500);
	assert_int_equal(t.workarounds_set, 1);
	{
		json_t *names = rp_bmc_workaround_names(t.workarounds);
		json_t *want = json_pack("[s, s]", "sun20", "opensesspriv");

		assert_true(json_equal(names, want));
		json_decref(names);
		json_decref(want);
	}
	json_decref(bmc);
	bmc = json_pack("{s:s, s:s, s:{s:s, s:i}}", "driver", "redfish", "address", "h", "options",
	                "system_id", "S1", "retry_tries", 2);
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), 0);
	assert_string_equal(t.scheme, "https");
	assert_string_equal(t.system_id, "S1");
	assert_int_equal(t.retry_tries, 2);
	assert_int_equal(t.retry_wait_ms, 30000);
	assert_int_equal(t.http_timeout_ms, 15000);
	json_decref(bmc);
	bmc = json_pack("{s:s, s:s, s:{s:s}}", "driver", "ipmi", "address", "h", "options",
	                "scheme", "http");
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), -1);
	assert_int_equal(err.kind, RP_BMC_REJECTED);
	assert_string_equal(err.msg, "bmc.options: scheme is not an option of the ipmi driver");
	json_decref(bmc);
	bmc = json_pack("{s:s, s:{s:i}}", "driver", "fake", "options", "delay_ms", 70000);
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), -1);
	assert_string_equal(err.msg, "bmc.options.delay_ms: must be an integer from 0 to 60000");
	json_decref(bmc);
}

/* docs/openapi.yaml's BmcOptions shows the table: the same properties, each with its driver,
 * range or names and default. */
static void
test_openapi(void **state)
{
	const struct rp_bmc_option *o;
	char path[512], *doc, *block, *end, *p, want[160];
	FILE *f;
	long len;
	size_t i, props = 0, rows = 0;

	(void)state;
	snprintf(path, sizeof path, "%s/docs/openapi.yaml", RP_TEST_SRC);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	doc = malloc((size_t)len + 1);
	assert_non_null(doc);
	assert_int_equal(fread(doc, 1, (size_t)len, f), (size_t)len);
	doc[len] = '\0';
	fclose(f);
	block = strstr(doc, "\n    BmcOptions:\n");
	assert_non_null(block);
	block++;
	/* The block ends at the next schema (a line indented by exactly four spaces). */
	for (end = strchr(block, '\n'); end && !(!strncmp(end, "\n    ", 5) && end[5] != ' ');
	     end = strchr(end + 1, '\n'))
		;
	if (end)
		*end = '\0';
	block = strstr(block, "\n      properties:\n");
	assert_non_null(block);
	/* Properties are the lines indented by exactly eight spaces. */
	for (p = strstr(block, "\n        "); p; p = strstr(p + 1, "\n        ")) {
		char name[64];
		int n = 0;

		if (p[9] == ' ' || sscanf(p + 9, "%63[a-z_]:%n", name, &n) != 1 || n == 0)
			continue;
		props++;
		if (rp_bmc_option_find(name) == NULL)
			fail_msg("openapi.yaml BmcOptions has %s, which the table lacks", name);
	}
	for (o = rp_bmc_options; o->name; o++) {
		char *sec, *next, driver[16] = "";

		rows++;
		snprintf(want, sizeof want, "\n        %s:\n", o->name);
		if ((sec = strstr(block, want)) == NULL)
			fail_msg("openapi.yaml BmcOptions lacks %s", o->name);
		sec += strlen(want) - 1;
		for (next = strstr(sec, "\n        "); next && next[9] == ' ';
		     next = strstr(next + 1, "\n        "))
			;
		if (next)
			*next = '\0';
		for (i = 0; rp_bmc_drivers[i]; i++)
			if (o->drivers & (1u << i))
				snprintf(driver, sizeof driver, "%s;", rp_bmc_drivers[i]);
		assert_non_null(strstr(sec, driver));
		switch (o->type) {
		case RP_BMC_OPT_INT:
			snprintf(want, sizeof want, "minimum: %ld\n", o->min);
			assert_non_null(strstr(sec, want));
			snprintf(want, sizeof want, "maximum: %ld\n", o->max);
			assert_non_null(strstr(sec, want));
			snprintf(want, sizeof want, "default %ld", o->def);
			assert_non_null(strstr(sec, want));
			break;
		case RP_BMC_OPT_ENUM:
			snprintf(want, sizeof want, "enum: [");
			for (i = 0; o->names[i]; i++) {
				size_t n = strlen(want);

				snprintf(want + n, sizeof want - n, "%s%s", i ? ", " : "",
				         o->names[i]);
			}
			strncat(want, "]", sizeof want - strlen(want) - 1);
			assert_non_null(strstr(sec, want));
			snprintf(want, sizeof want, "default %s", o->names[o->def]);
			assert_non_null(strstr(sec, want));
			break;
		case RP_BMC_OPT_NAMES:
			for (i = 0; o->names[i]; i++)
				assert_non_null(strstr(sec, o->names[i]));
			snprintf(want, sizeof want, "maxItems: %zu\n", i);
			assert_non_null(strstr(sec, want));
			break;
		case RP_BMC_OPT_ID:
			snprintf(want, sizeof want, "maxLength: %ld\n", o->max);
			assert_non_null(strstr(sec, want));
			break;
		}
		if (next)
			*next = '\n';
	}
	assert_int_equal(props, rows);
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_table),   cmocka_unit_test(test_values),
	        cmocka_unit_test(test_drivers), cmocka_unit_test(test_read),
	        cmocka_unit_test(test_target),  cmocka_unit_test(test_openapi),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
