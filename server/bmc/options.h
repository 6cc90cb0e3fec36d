/*
 * options.h — what a node's `bmc.options` may hold: one declarative table (each option's
 * name, the drivers it belongs to, its type, range or names, default and help) and the one
 * check that the API (node bodies, manifest rows) and the drivers (rp_bmc_target_from_json)
 * both apply.
 *
 * Options are data, not BMC actions: this header includes nothing of bmc/ but jansson, and it
 * is the only part of bmc/ that api/ may include (tests/layering.sh).
 */
#ifndef RP_BMC_OPTIONS_H
#define RP_BMC_OPTIONS_H

#include <jansson.h>

/* The drivers, by name: bit i of an option's `drivers` is rp_bmc_drivers[i]. NULL-terminated. */
extern const char *const rp_bmc_drivers[];
#define RP_BMC_DRV_IPMI    0x1u
#define RP_BMC_DRV_REDFISH 0x2u
#define RP_BMC_DRV_FAKE    0x4u

enum rp_bmc_opt_type {
	RP_BMC_OPT_INT,   /* an integer from min to max */
	RP_BMC_OPT_ENUM,  /* one of `names` */
	RP_BMC_OPT_NAMES, /* an array of distinct `names` (at most as many as there are) */
	RP_BMC_OPT_ID,    /* a Redfish resource Id: 1 to max bytes, no '/', no NUL */
};

struct rp_bmc_option {
	const char *name;
	unsigned drivers; /* RP_BMC_DRV_* bits: the drivers it belongs to */
	enum rp_bmc_opt_type type;
	long min, max;            /* INT: the range; ID: max is the longest Id */
	const char *const *names; /* ENUM, NAMES: the accepted strings, NULL-terminated */
	const long *codes; /* ENUM, NAMES: what each name stands for (rp_bmc_option_int), or NULL */
	long def;          /* INT: the default; ENUM: the default's index in names */
	const char *help;
};

/* Every option, terminated by a NULL name. */
extern const struct rp_bmc_option rp_bmc_options[];

/* The row of the option called name, or NULL when there is none. */
const struct rp_bmc_option *rp_bmc_option_find(const char *name);

enum rp_bmc_opt_fault {
	RP_BMC_OPT_OK = 0,
	RP_BMC_OPT_UNKNOWN, /* a name that is no driver's option (checked without a driver) */
	RP_BMC_OPT_FOREIGN, /* not an option of the driver named */
	RP_BMC_OPT_INVALID, /* a value of the wrong type, out of range; options not an object */
};

/* What was wrong: field is the option's name, or "" for the options object as a whole;
 * reason is the API's wording ("must be an integer from 0 to 17"). */
struct rp_bmc_opt_error {
	char field[128];
	char reason[192];
};

/* Check an options object (NULL or JSON null: none, which is valid). Members are checked in
 * the object's order; a null member stands for the option's default and is always valid.
 * driver NULL: every name must be some driver's option, and values must fit its row.
 * driver given: also each non-null member must be an option of that driver (a name that is no
 * option at all is reported as RP_BMC_OPT_FOREIGN then, field ""). RP_BMC_OPT_OK, or the first
 * fault with *why filled. */
enum rp_bmc_opt_fault rp_bmc_options_validate(const char *driver, json_t *options,
                                              struct rp_bmc_opt_error *why);

/* Read an option from options that passed rp_bmc_options_validate (NULL: none given).
 * rp_bmc_option_int: an INT's value or default; an ENUM's code (its index when the row has no
 * codes) for the name given or the default; a NAMES option's codes (1 << index without codes)
 * ORed together, 0 when none are given. 0 for IDs and unknown names.
 * rp_bmc_option_str: an ENUM's name given or default, an ID's value; NULL when an ID is not
 * given, for other types and for unknown names. The string belongs to options or the table. */
long rp_bmc_option_int(json_t *options, const char *name);
const char *rp_bmc_option_str(json_t *options, const char *name);

#endif
