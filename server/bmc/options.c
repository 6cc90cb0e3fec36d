/* The options table and its check (options.h). */
#include <stdio.h>
#include <string.h>

#include "bmc.h"
#include "options.h"
#include "rackpilot/common.h"

const char *const rp_bmc_drivers[] = {"ipmi", "redfish", "fake", NULL};

static const char *const privileges[] = {"user", "operator", "admin", NULL};
/* IPMI 2.0 privilege levels (table 6-1), what the session asks for. */
static const long privilege_levels[] = {2, 3, 4};
static const char *const schemes[] = {"https", "http", NULL};
static const char *const consoles[] = {"auto", "ipmi", "none", NULL};

/* The names of workarounds and their codes (libfreeipmi's flags) are the IPMI driver's. */
const struct rp_bmc_option rp_bmc_options[] = {
        {"cipher_suite", RP_BMC_DRV_IPMI, RP_BMC_OPT_INT, 0, 17, .def = 3,
         .help = "IPMI 2.0 cipher suite ID"},
        {"privilege", RP_BMC_DRV_IPMI, RP_BMC_OPT_ENUM, .names = privileges,
         .codes = privilege_levels, .def = 2, .help = "session privilege level"},
        {"workarounds", RP_BMC_DRV_IPMI, RP_BMC_OPT_NAMES, .names = rp_bmc_ipmi_workaround_names,
         .codes = rp_bmc_ipmi_workaround_flags,
         .help = "FreeIPMI out-of-band IPMI 2.0 workarounds (-W names); absent or null: found "
                 "by probing, [] none"},
        {"session_timeout_ms", RP_BMC_DRV_IPMI, RP_BMC_OPT_INT, 100, 60000, .def = 5000,
         .help = "session timeout"},
        {"retransmission_timeout_ms", RP_BMC_DRV_IPMI, RP_BMC_OPT_INT, 50, 10000, .def = 500,
         .help = "retransmission timeout"},
        {"console", RP_BMC_DRV_IPMI | RP_BMC_DRV_REDFISH, RP_BMC_OPT_ENUM, .names = consoles,
         .def = 0,
         .help = "the serial console: ipmi (IPMI Serial over LAN, for a Redfish BMC through its "
                 "IPMI with the same user), none, or auto (ipmi for the ipmi driver, none for "
                 "redfish)"},
        {"console_port", RP_BMC_DRV_REDFISH, RP_BMC_OPT_INT, 1, 65535, .def = 623,
         .help = "the UDP port of a Redfish BMC's IPMI, for its serial console"},
        {"scheme", RP_BMC_DRV_REDFISH, RP_BMC_OPT_ENUM, .names = schemes, .def = 0,
         .help = "URL scheme of the BMC"},
        {"system_id", RP_BMC_DRV_REDFISH, RP_BMC_OPT_ID, 0, 63,
         .help = "the Id of the ComputerSystem to use when the BMC manages several"},
        {"timeout_ms", RP_BMC_DRV_REDFISH, RP_BMC_OPT_INT, 100, 300000, .def = 15000,
         .help = "per-request timeout"},
        {"retry_tries", RP_BMC_DRV_REDFISH, RP_BMC_OPT_INT, 1, 20, .def = 5,
         .help = "tries of one request on 503/429 answers and lost answers"},
        {"retry_wait_ms", RP_BMC_DRV_REDFISH, RP_BMC_OPT_INT, 0, 600000, .def = 30000,
         .help = "one request's retries end within this of its first try"},
        {"delay_ms", RP_BMC_DRV_FAKE, RP_BMC_OPT_INT, 0, 60000, .def = 0,
         .help = "how long each fake BMC call takes"},
        {"power_w", RP_BMC_DRV_FAKE, RP_BMC_OPT_INT, 0, 100000, .def = 600,
         .help = "the fake node's draw while on (15 W while off), capped by its power limit"},
        {"inlet_c", RP_BMC_DRV_FAKE, RP_BMC_OPT_INT, 0, 100, .def = 24,
         .help = "the fake node's inlet temperature (warning at 40, critical at 45)"},
        {NULL},
};

const struct rp_bmc_option *
rp_bmc_option_find(const char *name)
{
	const struct rp_bmc_option *o;

	for (o = rp_bmc_options; o->name; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

static unsigned
driver_bit(const char *driver)
{
	int i = rp_str_index(rp_bmc_drivers, driver);

	return i < 0 ? 0 : 1u << i;
}

/* v's index in names, or -1 (v not a string, or not among them). */
static int
name_index(const char *const *names, json_t *v)
{
	return rp_str_index(names, json_string_value(v));
}

static enum rp_bmc_opt_fault
check_value(const struct rp_bmc_option *o, json_t *v, char *reason, size_t len)
{
	size_t i, j, count;
	json_t *e;
	const char *s;

	switch (o->type) {
	case RP_BMC_OPT_INT:
		if (!json_is_integer(v)) {
			snprintf(reason, len, "must be an integer");
			return RP_BMC_OPT_INVALID;
		}
		if (json_integer_value(v) < o->min || json_integer_value(v) > o->max) {
			snprintf(reason, len, "must be an integer from %ld to %ld", o->min, o->max);
			return RP_BMC_OPT_INVALID;
		}
		return RP_BMC_OPT_OK;
	case RP_BMC_OPT_ENUM:
		if (name_index(o->names, v) >= 0)
			return RP_BMC_OPT_OK;
		rp_str_one_of(reason, len, "must be ", o->names);
		return RP_BMC_OPT_INVALID;
	case RP_BMC_OPT_NAMES:
		if (!json_is_array(v)) {
			snprintf(reason, len, "must be an array of strings");
			return RP_BMC_OPT_INVALID;
		}
		for (count = 0; o->names[count]; count++)
			;
		if (json_array_size(v) > count) {
			snprintf(reason, len, "at most %zu entries", count);
			return RP_BMC_OPT_INVALID;
		}
		json_array_foreach(v, i, e)
		{
			for (j = 0; j < i && json_is_string(e); j++)
				if (json_equal(json_array_get(v, j), e)) {
					snprintf(reason, len, "%s listed twice",
					         json_string_value(e));
					return RP_BMC_OPT_INVALID;
				}
			if (name_index(o->names, e) < 0) {
				char prefix[48];

				snprintf(prefix, sizeof prefix, "entry %zu: must be ", i);
				rp_str_one_of(reason, len, prefix, o->names);
				return RP_BMC_OPT_INVALID;
			}
		}
		return RP_BMC_OPT_OK;
	case RP_BMC_OPT_ID:
		if (!json_is_string(v)) {
			snprintf(reason, len, "must be a string");
			return RP_BMC_OPT_INVALID;
		}
		s = json_string_value(v);
		if (json_string_length(v) > (size_t)o->max) {
			snprintf(reason, len, "at most %ld characters", o->max);
			return RP_BMC_OPT_INVALID;
		}
		if (strlen(s) != json_string_length(v)) {
			snprintf(reason, len, "must not contain NUL characters");
			return RP_BMC_OPT_INVALID;
		}
		if (s[0] == '\0' || strchr(s, '/')) {
			snprintf(reason, len, "a ComputerSystem Id (the last segment of its URI)");
			return RP_BMC_OPT_INVALID;
		}
		return RP_BMC_OPT_OK;
	}
	return RP_BMC_OPT_INVALID;
}

enum rp_bmc_opt_fault
rp_bmc_options_validate(const char *driver, json_t *options, struct rp_bmc_opt_error *why)
{
	const struct rp_bmc_option *o;
	unsigned bit = driver ? driver_bit(driver) : 0;
	enum rp_bmc_opt_fault f;
	const char *k;
	json_t *v;

	if (options == NULL || json_is_null(options))
		return RP_BMC_OPT_OK;
	if (!json_is_object(options)) {
		why->field[0] = '\0';
		snprintf(why->reason, sizeof why->reason, "must be an object");
		return RP_BMC_OPT_INVALID;
	}
	json_object_foreach(options, k, v)
	{
		o = rp_bmc_option_find(k);
		if (o == NULL && driver == NULL) {
			snprintf(why->field, sizeof why->field, "%s", k);
			snprintf(why->reason, sizeof why->reason, "unknown field");
			return RP_BMC_OPT_UNKNOWN;
		}
		if (o != NULL && json_is_null(v))
			continue;
		if (driver && (o == NULL || !(o->drivers & bit))) {
			why->field[0] = '\0';
			snprintf(why->reason, sizeof why->reason,
			         "%s is not an option of the %s driver", k, driver);
			return RP_BMC_OPT_FOREIGN;
		}
		if ((f = check_value(o, v, why->reason, sizeof why->reason)) != RP_BMC_OPT_OK) {
			snprintf(why->field, sizeof why->field, "%s", k);
			return f;
		}
	}
	return RP_BMC_OPT_OK;
}

long
rp_bmc_option_int(json_t *options, const char *name)
{
	const struct rp_bmc_option *o = rp_bmc_option_find(name);
	json_t *v = json_object_get(options, name), *e;
	long bits = 0;
	size_t i;

	if (o == NULL)
		return 0;
	switch (o->type) {
	case RP_BMC_OPT_INT:
		return json_is_integer(v) ? (long)json_integer_value(v) : o->def;
	case RP_BMC_OPT_ENUM: {
		int k = name_index(o->names, v);

		if (k < 0)
			k = (int)o->def;
		return o->codes ? o->codes[k] : (long)k;
	}
	case RP_BMC_OPT_NAMES:
		json_array_foreach(v, i, e)
		{
			int x = name_index(o->names, e);

			if (x >= 0)
				bits |= o->codes ? o->codes[x] : 1L << x;
		}
		return bits;
	default:
		return 0;
	}
}

const char *
rp_bmc_option_str(json_t *options, const char *name)
{
	const struct rp_bmc_option *o = rp_bmc_option_find(name);
	json_t *v = json_object_get(options, name);
	int i;

	if (o == NULL)
		return NULL;
	switch (o->type) {
	case RP_BMC_OPT_ENUM:
		if ((i = name_index(o->names, v)) < 0)
			i = (int)o->def;
		return o->names[i];
	case RP_BMC_OPT_ID:
		return json_string_value(v);
	default:
		return NULL;
	}
}
