/* The BMC dispatcher: targets from the store's JSON (options through options.h), errors,
 * driver choice. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc.h"
#include "options.h"

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

int
rp_bmc_target_from_json(json_t *bmc, const char *node_uuid, struct rp_bmc_target *t,
                        struct rp_bmc_err *err)
{
	const char *driver = json_string_value(json_object_get(bmc, "driver"));
	const char *host = json_string_value(json_object_get(bmc, "address"));
	json_t *tls = json_object_get(bmc, "tls_verify"), *o = json_object_get(bmc, "options");
	json_t *w = json_object_get(o, "workarounds");
	struct rp_bmc_opt_error why;

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
	if (rp_bmc_options_validate(driver, o, &why) != RP_BMC_OPT_OK)
		return rp_bmc_fail(err, RP_BMC_REJECTED, "bmc.options%s%s: %s",
		                   why.field[0] ? "." : "", why.field, why.reason);
	t->cipher_suite = (int)rp_bmc_option_int(o, "cipher_suite");
	t->privilege = (int)rp_bmc_option_int(o, "privilege");
	t->workarounds = (unsigned)rp_bmc_option_int(o, "workarounds");
	t->workarounds_set = w != NULL && !json_is_null(w);
	t->session_timeout_ms = (unsigned)rp_bmc_option_int(o, "session_timeout_ms");
	t->retransmission_timeout_ms = (unsigned)rp_bmc_option_int(o, "retransmission_timeout_ms");
	t->http_timeout_ms = (unsigned)rp_bmc_option_int(o, "timeout_ms");
	t->retry_tries = (unsigned)rp_bmc_option_int(o, "retry_tries");
	t->retry_wait_ms = (unsigned)rp_bmc_option_int(o, "retry_wait_ms");
	snprintf(t->scheme, sizeof t->scheme, "%s", rp_bmc_option_str(o, "scheme"));
	snprintf(t->system_id, sizeof t->system_id, "%s", rp_bmc_option_str(o, "system_id") ?: "");
	{
		const char *console = rp_bmc_option_str(o, "console");

		t->console = !strcmp(console ?: "auto", "ipmi") ||
		             (!strcmp(console ?: "auto", "auto") && !strcmp(t->driver, "ipmi"));
	}
	t->console_port = (unsigned)rp_bmc_option_int(o, "console_port");
	t->fake_delay_ms = (unsigned)rp_bmc_option_int(o, "delay_ms");
	t->fake_power_w = (unsigned)rp_bmc_option_int(o, "power_w");
	t->fake_inlet_c = (unsigned)rp_bmc_option_int(o, "inlet_c");
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

int
rp_bmc_sensors(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	return OPTIONAL(sensors, out, err);
}

int
rp_bmc_power_limit_get(struct rp_bmc *b, struct rp_power_limit *out, struct rp_bmc_err *err)
{
	return OPTIONAL(power_limit_get, out, err);
}

int
rp_bmc_power_limit_set(struct rp_bmc *b, const struct rp_power_limit *want, struct rp_bmc_err *err)
{
	return OPTIONAL(power_limit_set, want, err);
}

int
rp_bmc_identify_set(struct rp_bmc *b, int on, unsigned seconds, int *timed, struct rp_bmc_err *err)
{
	int t = 0;

	if (OPTIONAL(identify_set, on, seconds, &t, err) < 0)
		return -1;
	if (timed)
		*timed = t;
	return 0;
}

int
rp_bmc_identify_get(struct rp_bmc *b, int *on, struct rp_bmc_err *err)
{
	return OPTIONAL(identify_get, on, err);
}

int
rp_bmc_reset(struct rp_bmc *b, struct rp_bmc_err *err)
{
	return OPTIONAL(reset, err);
}

int
rp_bmc_password_set(struct rp_bmc *b, const char *password, struct rp_bmc_err *err)
{
	size_t n = password ? strlen(password) : 0;

	if (n == 0 || n > RP_BMC_PASSWORD_MAX)
		return rp_bmc_fail(err, RP_BMC_REJECTED, "a BMC password is 1 to %d bytes",
		                   RP_BMC_PASSWORD_MAX);
	return OPTIONAL(password_set, password, err);
}

unsigned
rp_bmc_env_limit(const char *name, unsigned max)
{
	const char *v = getenv(name);
	unsigned long n;
	char *end;

	if (v == NULL || v[0] == '\0')
		return max;
	n = strtoul(v, &end, 10);
	return *end == '\0' && n > 0 && n < max ? (unsigned)n : max;
}
