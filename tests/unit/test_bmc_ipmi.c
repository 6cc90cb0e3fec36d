/* bmc: which IPMI workaround sets the driver tries for which libfreeipmi error, and the
 * option names they round-trip through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <freeipmi/freeipmi.h>

#include "bmc/bmc.h"

static const char *
name_of(unsigned flags)
{
	static char buf[64];
	json_t *a = rp_bmc_workaround_names(flags);

	assert_non_null(a);
	assert_int_equal(json_array_size(a), 1);
	snprintf(buf, sizeof buf, "%s", json_string_value(json_array_get(a, 0)));
	json_decref(a);
	return buf;
}

static void
test_privilege(void **state)
{
	unsigned sets[RP_BMC_IPMI_PROBES];

	(void)state;
	/* ipmi_sim's refusal: opensesspriv first, then Intel's and Sun's variants. */
	assert_int_equal(rp_bmc_ipmi_candidates(IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED, sets,
	                                        RP_BMC_IPMI_PROBES),
	                 3);
	assert_string_equal(name_of(sets[0]), "opensesspriv");
	assert_string_equal(name_of(sets[1]), "intel20");
	assert_string_equal(name_of(sets[2]), "sun20");
	/* Fewer slots: the count is still the whole list, only max are written. */
	sets[1] = 0;
	assert_int_equal(
	        rp_bmc_ipmi_candidates(IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED, sets, 1), 3);
	assert_int_equal(sets[1], 0);
	assert_int_equal(
	        rp_bmc_ipmi_candidates(IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED, NULL, 0), 3);
}

static void
test_rmcpplus_status(void **state)
{
	unsigned sets[RP_BMC_IPMI_PROBES];

	(void)state;
	assert_int_equal(
	        rp_bmc_ipmi_candidates(IPMI_ERR_BAD_RMCPPLUS_STATUS_CODE, sets, RP_BMC_IPMI_PROBES),
	        2);
	assert_string_equal(name_of(sets[0]), "opensesspriv");
	assert_string_equal(name_of(sets[1]), "sun20");
}

/* Wrong credentials fail at once; a BMC that does not answer is not probed (each try would
 * cost a session timeout); errors no 2.0 workaround cures are not either. */
static void
test_never_probed(void **state)
{
	static const int none[] = {
	        IPMI_ERR_USERNAME_INVALID,
	        IPMI_ERR_PASSWORD_INVALID,
	        IPMI_ERR_K_G_INVALID,
	        IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT,
	        IPMI_ERR_CONNECTION_TIMEOUT,
	        IPMI_ERR_SESSION_TIMEOUT,
	        IPMI_ERR_PASSWORD_VERIFICATION_TIMEOUT,
	        IPMI_ERR_IPMI_2_0_UNAVAILABLE,
	        IPMI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE,
	        IPMI_ERR_CIPHER_SUITE_ID_UNAVAILABLE,
	        IPMI_ERR_BMC_BUSY,
	        IPMI_ERR_HOSTNAME_INVALID,
	        IPMI_ERR_SUCCESS,
	        IPMI_ERR_INTERNAL_ERROR,
	};
	unsigned sets[RP_BMC_IPMI_PROBES] = {0};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof none / sizeof none[0]; i++) {
		assert_int_equal(rp_bmc_ipmi_candidates(none[i], sets, RP_BMC_IPMI_PROBES), 0);
		assert_int_equal(sets[0], 0);
	}
}

/* Every candidate is a flag ipmi_ctx_open_outofband_2_0 accepts and options.workarounds
 * names, so what is detected can be saved and read back. */
static void
test_names_round_trip(void **state)
{
	static const int errs[] = {IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED,
	                           IPMI_ERR_BAD_RMCPPLUS_STATUS_CODE};
	size_t i, j, n;

	(void)state;
	for (i = 0; i < 2; i++) {
		unsigned sets[RP_BMC_IPMI_PROBES];

		n = rp_bmc_ipmi_candidates(errs[i], sets, RP_BMC_IPMI_PROBES);
		assert_true(n >= 1 && n <= RP_BMC_IPMI_PROBES);
		for (j = 0; j < n; j++) {
			struct rp_bmc_target t;
			struct rp_bmc_err err;
			json_t *bmc = json_pack("{s:s, s:s, s:{s:o}}", "driver", "ipmi", "address",
			                        "127.0.0.1", "options", "workarounds",
			                        rp_bmc_workaround_names(sets[j]));

			assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), 0);
			assert_int_equal(t.workarounds, sets[j]);
			assert_int_equal(t.workarounds_set, 1);
			json_decref(bmc);
		}
	}
}

/* Absent or null: not set, so the driver may probe; [] is an operator's "none". */
static void
test_workarounds_set(void **state)
{
	struct rp_bmc_target t;
	struct rp_bmc_err err;
	json_t *bmc;

	(void)state;
	bmc = json_pack("{s:s, s:s}", "driver", "ipmi", "address", "h");
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), 0);
	assert_int_equal(t.workarounds_set, 0);
	json_decref(bmc);
	bmc = json_pack("{s:s, s:s, s:{s:n}}", "driver", "ipmi", "address", "h", "options",
	                "workarounds");
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), 0);
	assert_int_equal(t.workarounds_set, 0);
	json_decref(bmc);
	bmc = json_pack("{s:s, s:s, s:{s:[]}}", "driver", "ipmi", "address", "h", "options",
	                "workarounds");
	assert_int_equal(rp_bmc_target_from_json(bmc, "n", &t, &err), 0);
	assert_int_equal(t.workarounds_set, 1);
	assert_int_equal(t.workarounds, 0);
	json_decref(bmc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_privilege),       cmocka_unit_test(test_rmcpplus_status),
	        cmocka_unit_test(test_never_probed),    cmocka_unit_test(test_names_round_trip),
	        cmocka_unit_test(test_workarounds_set),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
