/* The BMC dispatcher: targets from the store's JSON, option checks, errors, driver choice. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <freeipmi/freeipmi.h>

#include "bmc.h"

static const char *const kinds[] = {
        [RP_BMC_OK] = "ok",
        [RP_BMC_UNREACHABLE] = "unreachable",
        [RP_BMC_TIMEOUT] = "timeout",
        [RP_BMC_BUSY] = "busy",
        [RP_BMC_AUTH] = "auth",
        [RP_BMC_TLS] = "tls",
        [RP_BMC_UNSUPPORTED] = "unsupported",
        [RP_BMC_REJECTED] = "rejected",
        [RP_BMC_MISMATCH] = "mismatch",
        [RP_BMC_PROTOCOL] = "protocol",
};

int
rp_bmc_err_transient(enum rp_bmc_errkind kind)
{
	return kind == RP_BMC_UNREACHABLE || kind == RP_BMC_TIMEOUT || kind == RP_BMC_BUSY;
}

const char *
rp_bmc_err_name(enum rp_bmc_errkind kind)
{
	return (unsigned)kind < sizeof kinds / sizeof kinds[0] ? kinds[kind] : "protocol";
}

int
rp_bmc_fail(struct rp_bmc_err *err, enum rp_bmc_errkind kind, const char *fmt, ...)
{
	va_list ap;

	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return -1;
}

const char *
rp_power_name(enum rp_power p)
{
	return p == RP_POWER_ON ? "on" : p == RP_POWER_OFF ? "off" : "unknown";
}

/* libfreeipmi's out-of-band IPMI 2.0 workarounds, by the names ipmitool/freeipmi users know
 * (freeipmi's -W values). */
static const struct {
	const char *name;
	unsigned flag;
} workarounds[] = {
        {"authcap", IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_AUTHENTICATION_CAPABILITIES},
        {"intel20", IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_INTEL_2_0_SESSION},
        {"supermicro20", IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUPERMICRO_2_0_SESSION},
        {"sun20", IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUN_2_0_SESSION},
        {"opensesspriv", IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE},
        {"integritycheckvalue",
         IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NON_EMPTY_INTEGRITY_CHECK_VALUE},
        {"nochecksumcheck", IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NO_CHECKSUM_CHECK},
};

json_t *
rp_bmc_workaround_names(unsigned flags)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < sizeof workarounds / sizeof workarounds[0]; i++)
		if ((flags & workarounds[i].flag) &&
		    json_array_append_new(a, json_string(workarounds[i].name)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static const struct {
	const char *name;
	int level;
} privileges[] = {{"user", 2}, {"operator", 3}, {"admin", 4}};

/* Range-checked integer option. 1 when present and valid, 0 when absent, -1 when bad. */
static int
int_opt(json_t *o, const char *key, long min, long max, long *out, char *why, size_t whylen)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		snprintf(why, whylen, "options.%s must be an integer from %ld to %ld", key, min,
		         max);
		return -1;
	}
	*out = (long)json_integer_value(v);
	return 1;
}

/* Parse options into t (t may be NULL to only check). 0 or -1 with why. */
static int
parse_options(const char *driver, json_t *o, struct rp_bmc_target *t, char *why, size_t whylen)
{
	const char *k;
	json_t *v;
	long n;
	size_t i, j;

	if (o == NULL || json_is_null(o))
		return 0;
	if (!json_is_object(o)) {
		snprintf(why, whylen, "options must be an object");
		return -1;
	}
	json_object_foreach(o, k, v)
	{
		int known = 0;

		if (!strcmp(driver, "ipmi"))
			known = !strcmp(k, "cipher_suite") || !strcmp(k, "privilege") ||
			        !strcmp(k, "workarounds") || !strcmp(k, "session_timeout_ms") ||
			        !strcmp(k, "retransmission_timeout_ms");
		else if (!strcmp(driver, "redfish"))
			known = !strcmp(k, "scheme") || !strcmp(k, "system_id") ||
			        !strcmp(k, "timeout_ms") || !strcmp(k, "retry_tries") ||
			        !strcmp(k, "retry_wait_ms");
		else if (!strcmp(driver, "fake"))
			known = !strcmp(k, "delay_ms");
		if (!known) {
			snprintf(why, whylen, "options.%s is not an option of the %s driver", k,
			         driver);
			return -1;
		}
	}
	if (!strcmp(driver, "ipmi")) {
		json_t *w = json_object_get(o, "workarounds"), *p = json_object_get(o, "privilege");

		switch (int_opt(o, "cipher_suite", 0, 17, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->cipher_suite = (int)n;
			break;
		}
		switch (int_opt(o, "session_timeout_ms", 100, 60000, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->session_timeout_ms = (unsigned)n;
			break;
		}
		switch (int_opt(o, "retransmission_timeout_ms", 50, 10000, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->retransmission_timeout_ms = (unsigned)n;
			break;
		}
		if (p && !json_is_null(p)) {
			for (i = 0; i < 3; i++)
				if (json_is_string(p) &&
				    !strcmp(json_string_value(p), privileges[i].name))
					break;
			if (i == 3) {
				snprintf(why, whylen,
				         "options.privilege must be user, operator or admin");
				return -1;
			}
			if (t)
				t->privilege = privileges[i].level;
		}
		if (w && !json_is_null(w)) {
			if (!json_is_array(w)) {
				snprintf(why, whylen,
				         "options.workarounds must be an array of names");
				return -1;
			}
			json_array_foreach(w, i, v)
			{
				for (j = 0; j < sizeof workarounds / sizeof workarounds[0]; j++)
					if (json_is_string(v) &&
					    !strcmp(json_string_value(v), workarounds[j].name))
						break;
				if (j == sizeof workarounds / sizeof workarounds[0]) {
					snprintf(why, whylen,
					         "options.workarounds[%zu]: unknown workaround "
					         "(authcap, "
					         "intel20, supermicro20, sun20, opensesspriv, "
					         "integritycheckvalue, nochecksumcheck)",
					         i);
					return -1;
				}
				if (t)
					t->workarounds |= workarounds[j].flag;
			}
			if (t)
				t->workarounds_set = 1;
		}
	} else if (!strcmp(driver, "redfish")) {
		json_t *sc = json_object_get(o, "scheme"), *sid = json_object_get(o, "system_id");

		if (sc && !json_is_null(sc)) {
			if (!json_is_string(sc) || (strcmp(json_string_value(sc), "https") &&
			                            strcmp(json_string_value(sc), "http"))) {
				snprintf(why, whylen, "options.scheme must be https or http");
				return -1;
			}
			if (t)
				snprintf(t->scheme, sizeof t->scheme, "%s", json_string_value(sc));
		}
		if (sid && !json_is_null(sid)) {
			if (!json_is_string(sid) || json_string_length(sid) == 0 ||
			    json_string_length(sid) >= sizeof t->system_id ||
			    strchr(json_string_value(sid), '/')) {
				snprintf(why, whylen,
				         "options.system_id must be a ComputerSystem Id");
				return -1;
			}
			if (t)
				snprintf(t->system_id, sizeof t->system_id, "%s",
				         json_string_value(sid));
		}
		switch (int_opt(o, "timeout_ms", 100, 300000, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->http_timeout_ms = (unsigned)n;
			break;
		}
		switch (int_opt(o, "retry_tries", 1, 20, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->retry_tries = (unsigned)n;
			break;
		}
		switch (int_opt(o, "retry_wait_ms", 0, 600000, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->retry_wait_ms = (unsigned)n;
			break;
		}
	} else if (!strcmp(driver, "fake")) {
		switch (int_opt(o, "delay_ms", 0, 60000, &n, why, whylen)) {
		case -1:
			return -1;
		case 1:
			if (t)
				t->fake_delay_ms = (unsigned)n;
			break;
		}
	}
	return 0;
}

int
rp_bmc_options_check(const char *driver, json_t *options, char *why, size_t whylen)
{
	return parse_options(driver, options, NULL, why, whylen);
}

int
rp_bmc_target_from_json(json_t *bmc, const char *node_uuid, struct rp_bmc_target *t,
                        struct rp_bmc_err *err)
{
	const char *driver = json_string_value(json_object_get(bmc, "driver"));
	const char *host = json_string_value(json_object_get(bmc, "address"));
	json_t *tls = json_object_get(bmc, "tls_verify");
	char why[200];

	memset(t, 0, sizeof *t);
	if (driver == NULL || strlen(driver) >= sizeof t->driver)
		return rp_bmc_fail(err, RP_BMC_REJECTED, "node has no BMC driver");
	snprintf(t->driver, sizeof t->driver, "%s", driver);
	snprintf(t->node, sizeof t->node, "%s", node_uuid ? node_uuid : "");
	if (host)
		snprintf(t->host, sizeof t->host, "%s", host);
	t->port = (unsigned)json_integer_value(json_object_get(bmc, "port"));
	snprintf(t->username, sizeof t->username, "%s",
	         json_string_value(json_object_get(bmc, "username")) ?: "");
	snprintf(t->password, sizeof t->password, "%s",
	         json_string_value(json_object_get(bmc, "password")) ?: "");
	t->tls_verify = tls ? json_is_true(tls) : 1;
	t->cipher_suite = 3;
	t->privilege = 4;
	t->session_timeout_ms = 5000;
	t->retransmission_timeout_ms = 500;
	t->http_timeout_ms = 15000;
	t->retry_tries = 5;
	t->retry_wait_ms = 30000;
	snprintf(t->scheme, sizeof t->scheme, "https");
	if (parse_options(driver, json_object_get(bmc, "options"), t, why, sizeof why) < 0)
		return rp_bmc_fail(err, RP_BMC_REJECTED, "%s", why);
	if (strcmp(driver, "fake") != 0 && t->host[0] == '\0')
		return rp_bmc_fail(err, RP_BMC_REJECTED, "node's BMC has no address");
	return 0;
}

static const struct rp_bmc_ops *
driver(const char *name)
{
	if (!strcmp(name, "ipmi"))
		return &rp_bmc_ipmi_ops;
	if (!strcmp(name, "redfish"))
		return &rp_bmc_redfish_ops;
	if (!strcmp(name, "fake"))
		return &rp_bmc_fake_ops;
	return NULL;
}

struct rp_bmc *
rp_bmc_open(const struct rp_bmc_target *t, struct rp_bmc_err *err)
{
	const struct rp_bmc_ops *ops = driver(t->driver);

	if (ops == NULL) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "no BMC driver named '%s'", t->driver);
		return NULL;
	}
	return ops->open(t, err);
}

void
rp_bmc_close(struct rp_bmc *b)
{
	if (b)
		b->ops->close(b);
}

int
rp_bmc_power_get(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err)
{
	return b->ops->power_get(b, out, err);
}

int
rp_bmc_power_set(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err)
{
	return b->ops->power_set(b, a, err);
}

int
rp_bmc_boot_set(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err)
{
	return b->ops->boot_set(b, want, err);
}

int
rp_bmc_boot_get(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err)
{
	return b->ops->boot_get(b, out, err);
}

int
rp_bmc_identity(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err)
{
	return b->ops->identity(b, out, err);
}

int
rp_bmc_detected_workarounds(struct rp_bmc *b, json_t **names)
{
	return b->ops->detected_workarounds ? b->ops->detected_workarounds(b, names) : 0;
}

#define OPTIONAL(call, ...)                                                                        \
	(b->ops->call ? b->ops->call(b, __VA_ARGS__)                                               \
	              : rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "the %s driver cannot do this",       \
	                            b->ops->name))

int
rp_bmc_bios_get(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	return OPTIONAL(bios_get, out, err);
}

int
rp_bmc_bios_set(struct rp_bmc *b, json_t *attributes, struct rp_bmc_err *err)
{
	return OPTIONAL(bios_set, attributes, err);
}

int
rp_bmc_bios_registry(struct rp_bmc *b, const char *registry, json_t **out, struct rp_bmc_err *err)
{
	return OPTIONAL(bios_registry, registry, out, err);
}

int
rp_bmc_task_find(struct rp_bmc *b, const char *needle, char *task, size_t tasklen,
                 struct rp_bmc_err *err)
{
	return OPTIONAL(task_find, needle, task, tasklen, err);
}

int
rp_bmc_firmware_inventory(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	return OPTIONAL(firmware_inventory, out, err);
}

int
rp_bmc_firmware_update(struct rp_bmc *b, const char *image_uri, const char *local_file,
                       json_t *targets, char *task, size_t tasklen, struct rp_bmc_err *err)
{
	return OPTIONAL(firmware_update, image_uri, local_file, targets, task, tasklen, err);
}

int
rp_bmc_task_poll(struct rp_bmc *b, const char *task, int *done, int *ok, json_t **status,
                 struct rp_bmc_err *err)
{
	return OPTIONAL(task_poll, task, done, ok, status, err);
}

int
rp_bmc_events(struct rp_bmc *b, int64_t since_ms, size_t max, json_t **out, struct rp_bmc_err *err)
{
	return OPTIONAL(events, since_ms, max, out, err);
}
