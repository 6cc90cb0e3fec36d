/*
 * The IPMI driver: IPMI 2.0 / RMCP+ ("lanplus") through libfreeipmi. One session per
 * handle; a read that finds its session gone (the BMC restarted) reopens it once.
 *
 * Workarounds are found, not configured: when a node's options name none and the plain
 * session fails with an error that a known libfreeipmi workaround cures, ipmi_open tries the
 * sets rp_bmc_ipmi_candidates gives, in order, and keeps the first that opens a session and
 * answers Get Device ID (rp_bmc_detected_workarounds tells the caller, which persists it).
 *
 * Sensors are DCMI's power reading and the SDR's full and compact sensor records. A BMC's SDR is
 * walked once and kept, decoded, in a process-wide cache for as long as Get SDR Repository Info
 * gives the same record count and timestamps: a read then costs that, the power reading and one
 * Get Sensor Reading per sensor (freeipmi's tools keep their SDR cache on disk for the same
 * reason). Power limits are DCMI's.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <freeipmi/freeipmi.h>

#include "bmc.h"
#include "util/util.h"

struct ipmi {
	struct rp_bmc base;
	ipmi_ctx_t ctx;
	struct rp_bmc_target t;
	char host[300];
	unsigned detected; /* workaround flags probing found at open; 0: none */
	/* A sensor read under way (ipmi_sensors; 0 otherwise): when it must end (rp_time_mono_ns)
	 * and the requests it may still send (SDR reads, sensor readings), and those limits. */
	int64_t deadline;
	unsigned requests_left, limit_ms, limit_requests;
};

/* libfreeipmi's out-of-band IPMI 2.0 workarounds, by the names ipmitool/freeipmi users know
 * (freeipmi's -W values), and their flags: options.c's table lists them as the names and codes
 * of options.workarounds, so that rp_bmc_option_int gives the session its flags. */
const char *const rp_bmc_ipmi_workaround_names[] = {
        "authcap",         "intel20",      "supermicro20",
        "sun20",           "opensesspriv", "integritycheckvalue",
        "nochecksumcheck", NULL,
};
const long rp_bmc_ipmi_workaround_flags[] = {
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_AUTHENTICATION_CAPABILITIES,
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_INTEL_2_0_SESSION,
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUPERMICRO_2_0_SESSION,
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUN_2_0_SESSION,
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE,
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NON_EMPTY_INTEGRITY_CHECK_VALUE,
        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NO_CHECKSUM_CHECK,
};
#define NWORKAROUNDS (sizeof rp_bmc_ipmi_workaround_flags / sizeof rp_bmc_ipmi_workaround_flags[0])
_Static_assert(NWORKAROUNDS + 1 ==
                       sizeof rp_bmc_ipmi_workaround_names / sizeof rp_bmc_ipmi_workaround_names[0],
               "one flag per workaround name");

json_t *
rp_bmc_workaround_names(unsigned flags)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < NWORKAROUNDS; i++)
		if ((flags & (unsigned)rp_bmc_ipmi_workaround_flags[i]) &&
		    json_array_append_new(a, json_string(rp_bmc_ipmi_workaround_names[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/*
 * Which workarounds cure which error, from freeipmi's WORKAROUNDS documentation
 * (ipmipower(8)) and libfreeipmi's api/ipmi-lan-session-common.c, for IPMI 2.0 sessions:
 * - "privilege level cannot be obtained": the BMC hashes with (or checks) the privilege of
 *   Open Session, where freeipmi asks for "highest". opensesspriv sends the real privilege
 *   (ipmi_sim, Dell, Supermicro X8, Intel S2600/S5500, Quanta); intel20 also accepts the
 *   "highest" answer Intel BMCs give back; sun20 includes opensesspriv and fixes Sun ILOM's
 *   key hashing.
 * - "bad rmcpplus status code": opensesspriv, then sun20 ("bmc error").
 * Never probed:
 * - "username invalid", "password invalid", "k_g invalid": authcap, intel20, supermicro20,
 *   sun20, opensesspriv and integritycheckvalue cure them on a few old BMCs, but far more
 *   often they mean wrong credentials, which must fail at once. Such BMCs need
 *   options.workarounds.
 * - Timeouts (connection, session, password verification): nochecksumcheck cures some, but
 *   they cannot be told from a BMC that is down or flaky, probing would cost a session
 *   timeout each, and a false find (a retry that happened to work) would persist a
 *   workaround that turns off checksum checks.
 * - "ipmi 2.0 unavailable": libfreeipmi checks it before any 2.0 workaround applies.
 * - idzero, unexpectedauth, forcepermsg, endianseq, noauthcodecheck are IPMI 1.5 workarounds:
 *   this driver speaks only 2.0 and ipmi_ctx_open_outofband_2_0 refuses them.
 * At most RP_BMC_IPMI_PROBES sets, each one more session attempt.
 */
size_t
rp_bmc_ipmi_candidates(int errnum, unsigned *sets, size_t max)
{
	static const unsigned privilege[] = {
	        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE,
	        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_INTEL_2_0_SESSION,
	        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUN_2_0_SESSION,
	};
	static const unsigned status[] = {
	        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE,
	        IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUN_2_0_SESSION,
	};
	const unsigned *c = NULL;
	size_t n = 0, i;

	switch (errnum) {
	case IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED:
		c = privilege;
		n = sizeof privilege / sizeof privilege[0];
		break;
	case IPMI_ERR_BAD_RMCPPLUS_STATUS_CODE:
		c = status;
		n = sizeof status / sizeof status[0];
		break;
	default:
		return 0;
	}
	for (i = 0; i < n && i < max; i++)
		sets[i] = c[i];
	return n;
}

/* Map libfreeipmi's error on an open session attempt. */
static int
open_error(struct ipmi *h, struct rp_bmc_err *err)
{
	int e = ipmi_ctx_errnum(h->ctx);
	const char *m = ipmi_ctx_errormsg(h->ctx);

	switch (e) {
	case IPMI_ERR_USERNAME_INVALID:
	case IPMI_ERR_PASSWORD_INVALID:
	case IPMI_ERR_K_G_INVALID:
	case IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT:
	case IPMI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE:
		return rp_bmc_fail(err, RP_BMC_AUTH, "IPMI session to %s refused: %s", h->host, m);
	case IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED:
		return rp_bmc_fail(err, RP_BMC_AUTH, "IPMI session to %s refused: %s", h->host, m);
	case IPMI_ERR_CIPHER_SUITE_ID_UNAVAILABLE:
	case IPMI_ERR_IPMI_2_0_UNAVAILABLE:
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		                   "IPMI 2.0 session to %s: %s (cipher suite %d)", h->host, m,
		                   h->t.cipher_suite);
	case IPMI_ERR_CONNECTION_TIMEOUT:
	case IPMI_ERR_SESSION_TIMEOUT:
	case IPMI_ERR_PASSWORD_VERIFICATION_TIMEOUT:
		return rp_bmc_fail(err, RP_BMC_UNREACHABLE,
		                   "no IPMI answer from %s within %u ms: %s", h->host,
		                   h->t.session_timeout_ms, m);
	case IPMI_ERR_BMC_BUSY:
		return rp_bmc_fail(err, RP_BMC_BUSY, "BMC %s busy: %s", h->host, m);
	case IPMI_ERR_HOSTNAME_INVALID:
		return rp_bmc_fail(err, RP_BMC_REJECTED, "invalid BMC address %s", h->host);
	default:
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "IPMI session to %s failed: %s", h->host,
		                   m);
	}
}

/* Map the error of a command on an open session. */
static int
cmd_error(struct ipmi *h, fiid_obj_t rs, uint8_t netfn, const char *what, struct rp_bmc_err *err)
{
	int e = ipmi_ctx_errnum(h->ctx);
	const char *m = ipmi_ctx_errormsg(h->ctx);
	char cc[128];

	switch (e) {
	case IPMI_ERR_SESSION_TIMEOUT:
	case IPMI_ERR_MESSAGE_TIMEOUT:
	case IPMI_ERR_CONNECTION_TIMEOUT:
		return rp_bmc_fail(err, RP_BMC_TIMEOUT, "%s: no answer from %s: %s", what, h->host,
		                   m);
	case IPMI_ERR_BMC_BUSY:
	case IPMI_ERR_DRIVER_BUSY:
		return rp_bmc_fail(err, RP_BMC_BUSY, "%s: BMC %s busy", what, h->host);
	case IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "%s: not supported by BMC %s", what,
		                   h->host);
	case IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT:
		return rp_bmc_fail(err, RP_BMC_AUTH, "%s: privilege too low on %s", what, h->host);
	case IPMI_ERR_BAD_COMPLETION_CODE:
		if (ipmi_completion_code_strerror_cmd_r(rs, netfn, cc, sizeof cc) < 0)
			snprintf(cc, sizeof cc, "%s", m);
		return rp_bmc_fail(err, RP_BMC_REJECTED, "%s: BMC %s answered: %s", what, h->host,
		                   cc);
	default:
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "%s on %s: %s", what, h->host, m);
	}
}

/* 0 when the sensor read under way (h->deadline) may send one more request, which it then counts;
 * -1 with RP_BMC_TIMEOUT once it is out of time or requests. 0 outside such a read. */
static int
within_limits(struct ipmi *h, const char *what, struct rp_bmc_err *err)
{
	if (h->deadline == 0)
		return 0;
	if (h->requests_left == 0 || rp_time_mono_ns() >= h->deadline)
		return rp_bmc_fail(
		        err, RP_BMC_TIMEOUT,
		        "%s not sent: the sensor read of %s is over its limit of %u s and "
		        "%u requests",
		        what, h->host, h->limit_ms / 1000, h->limit_requests);
	h->requests_left--;
	return 0;
}

static int
session(struct ipmi *h, struct rp_bmc_err *err)
{
	if (h->ctx) {
		ipmi_ctx_close(h->ctx);
		ipmi_ctx_destroy(h->ctx);
	}
	h->ctx = ipmi_ctx_create();
	if (h->ctx == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (ipmi_ctx_open_outofband_2_0(h->ctx, h->host, h->t.username, h->t.password, NULL, 0,
	                                (uint8_t)h->t.privilege, (uint8_t)h->t.cipher_suite,
	                                h->t.session_timeout_ms, h->t.retransmission_timeout_ms,
	                                h->t.workarounds, IPMI_FLAGS_DEFAULT) < 0)
		return open_error(h, err);
	return 0;
}

/* The plain session failed with err (libfreeipmi's error still in h->ctx): try the workaround
 * sets that cure it. 0 with a session open on the first set that answers Get Device ID (kept in
 * h->t.workarounds and h->detected); -1 with err set: the original error when no set helped,
 * or the error a set got past the quirk to (a wrong password, no answer), which is the real
 * one. */
static int
probe(struct ipmi *h, struct rp_bmc_err *err)
{
	unsigned sets[RP_BMC_IPMI_PROBES];
	size_t n = rp_bmc_ipmi_candidates(ipmi_ctx_errnum(h->ctx), sets, RP_BMC_IPMI_PROBES), i;
	struct rp_bmc_err first = *err, e = {0};
	fiid_obj_t rs = NULL;
	char tried[64] = "";
	int rc = -1;

	if (n == 0)
		return -1;
	if (h->t.workarounds_set) {
		/* An operator's choice is kept, even when it does not work. */
		snprintf(err->msg, sizeof err->msg,
		         "%.180s (options.workarounds is set, so no other workarounds were tried)",
		         first.msg);
		return -1;
	}
	if ((rs = fiid_obj_create(tmpl_cmd_get_device_id_rs)) == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	for (i = 0; i < n; i++) {
		json_t *names = rp_bmc_workaround_names(sets[i]);
		char name[24];
		size_t len = strlen(tried);

		snprintf(name, sizeof name, "%s",
		         json_string_value(json_array_get(names, 0)) ?: "?");
		json_decref(names);
		snprintf(tried + len, sizeof tried - len, "%s%s", len ? ", " : "", name);
		h->t.workarounds = sets[i];
		if (session(h, &e) == 0) {
			if (ipmi_cmd_get_device_id(h->ctx, rs) == 0) {
				h->detected = sets[i];
				rp_log_info("ipmi: %s; opened with workaround %s", first.msg, name);
				rc = 0;
				goto out;
			}
			cmd_error(h, rs, IPMI_NET_FN_APP_RQ, "get device id", &e);
			if (e.kind == RP_BMC_TIMEOUT || e.kind == RP_BMC_UNREACHABLE) {
				*err = e;
				goto fail;
			}
			continue;
		}
		if (rp_bmc_ipmi_candidates(ipmi_ctx_errnum(h->ctx), NULL, 0) == 0) {
			/* Past the quirk to a refusal no workaround is tried for: that is the
			 * answer. */
			*err = e;
			goto fail;
		}
	}
	snprintf(err->msg, sizeof err->msg, "%.150s (no workaround helped; tried %s)", first.msg,
	         tried);
fail:
	h->t.workarounds = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_detected_workarounds(struct rp_bmc *b, json_t **names)
{
	struct ipmi *h = (struct ipmi *)b;
	json_t *a;

	if (h->detected == 0)
		return 0;
	if ((a = rp_bmc_workaround_names(h->detected)) == NULL)
		return -1;
	*names = a;
	return 1;
}

static struct rp_bmc *
ipmi_open(const struct rp_bmc_target *t, struct rp_bmc_err *err)
{
	struct ipmi *h = calloc(1, sizeof *h);

	if (h == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		return NULL;
	}
	h->base.ops = &rp_bmc_ipmi_ops;
	h->t = *t;
	/* libfreeipmi takes "host:port" for ports other than 623. */
	if (t->port && t->port != 623)
		snprintf(h->host, sizeof h->host, strchr(t->host, ':') ? "[%s]:%u" : "%s:%u",
		         t->host, t->port);
	else
		snprintf(h->host, sizeof h->host, "%s", t->host);
	if (session(h, err) < 0 && probe(h, err) < 0) {
		rp_bmc_ipmi_ops.close(&h->base);
		return NULL;
	}
	return &h->base;
}

static void
ipmi_close(struct rp_bmc *b)
{
	struct ipmi *h = (struct ipmi *)b;

	if (h == NULL)
		return;
	if (h->ctx) {
		ipmi_ctx_close(h->ctx);
		ipmi_ctx_destroy(h->ctx);
	}
	/* The password lived in this struct; do not leave it in freed memory. */
	explicit_bzero(h->t.password, sizeof h->t.password);
	free(h);
}

/* Run a read-only command; if the session died under it (BMC restart), open a new one
 * and try once more: a read is safe to repeat. */
#define READ_CMD(h, rs, call, netfn, what, err)                                                    \
	__extension__({                                                                            \
		int rc_ = (call);                                                                  \
		if (rc_ < 0 && ipmi_ctx_errnum((h)->ctx) == IPMI_ERR_SESSION_TIMEOUT &&            \
		    session((h), (err)) == 0)                                                      \
			rc_ = (call);                                                              \
		rc_ < 0 ? cmd_error((h), (rs), (netfn), (what), (err)) : 0;                        \
	})

static int
ipmi_power_get(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_chassis_status_rs);
	uint64_t on = 0;
	int rc = -1;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (READ_CMD(h, rs, ipmi_cmd_get_chassis_status(h->ctx, rs), IPMI_NET_FN_CHASSIS_RQ,
	             "get chassis status", err) < 0)
		goto out;
	if (fiid_obj_get(rs, "current_power_state.power_is_on", &on) < 0) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "chassis status from %s lacks the power state",
		            h->host);
		goto out;
	}
	*out = on ? RP_POWER_ON : RP_POWER_OFF;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_power_set(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err)
{
	static const uint8_t codes[] = {
	        [RP_POWER_ACT_ON] = IPMI_CHASSIS_CONTROL_POWER_UP,
	        [RP_POWER_ACT_OFF] = IPMI_CHASSIS_CONTROL_POWER_DOWN,
	        [RP_POWER_ACT_SOFT_OFF] = IPMI_CHASSIS_CONTROL_INITIATE_SOFT_SHUTDOWN,
	        [RP_POWER_ACT_CYCLE] = IPMI_CHASSIS_CONTROL_POWER_CYCLE,
	        [RP_POWER_ACT_RESET] = IPMI_CHASSIS_CONTROL_HARD_RESET,
	};
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_chassis_control_rs);
	int rc = 0;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	/* Never repeated here: after a timeout nobody knows whether the BMC acted. */
	if (ipmi_cmd_chassis_control(h->ctx, codes[a], rs) < 0)
		rc = cmd_error(h, rs, IPMI_NET_FN_CHASSIS_RQ, "chassis control", err);
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_boot_get(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_system_boot_options_boot_flags_rs);
	uint64_t dev = 0, persistent = 0, efi = 0;
	int rc = -1;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (READ_CMD(h, rs,
	             ipmi_cmd_get_system_boot_options_boot_flags(
	                     h->ctx, IPMI_SYSTEM_BOOT_OPTIONS_NO_SET_SELECTOR,
	                     IPMI_SYSTEM_BOOT_OPTIONS_NO_BLOCK_SELECTOR, rs),
	             IPMI_NET_FN_CHASSIS_RQ, "get boot flags", err) < 0)
		goto out;
	if (fiid_obj_get(rs, "boot_device", &dev) < 0 ||
	    fiid_obj_get(rs, "boot_flags_persistent", &persistent) < 0 ||
	    fiid_obj_get(rs, "bios_boot_type", &efi) < 0) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "boot flags from %s are incomplete", h->host);
		goto out;
	}
	out->device = dev == IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_FORCE_PXE ? RP_BOOT_PXE
	              : dev == IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_FORCE_HARD_DRIVE
	                      ? RP_BOOT_DISK
	              : dev == IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_NO_OVERRIDE
	                      ? RP_BOOT_NONE
	                      : RP_BOOT_OTHER;
	out->persistent = persistent != 0;
	out->uefi = efi == IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_TYPE_EFI;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_boot_set(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_set_system_boot_options_rs);
	uint8_t dev = want->device == RP_BOOT_PXE
	                      ? IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_FORCE_PXE
	                      : IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_FORCE_HARD_DRIVE;
	int rc = 0;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (ipmi_cmd_set_system_boot_options_boot_flags(
	            h->ctx, IPMI_SYSTEM_BOOT_OPTIONS_PARAMETER_VALID_UNLOCKED,
	            want->uefi ? IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_TYPE_EFI
	                       : IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_TYPE_PC_COMPATIBLE,
	            want->persistent ? IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_VALID_PERSISTENTLY
	                             : IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_VALID_FOR_NEXT_BOOT,
	            IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_VALID, IPMI_SYSTEM_BOOT_OPTION_DISABLE,
	            IPMI_SYSTEM_BOOT_OPTION_DISABLE, dev, IPMI_SYSTEM_BOOT_OPTION_DISABLE,
	            IPMI_SYSTEM_BOOT_OPTION_DISABLE,
	            IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_CONSOLE_REDIRECTION_DEFAULT,
	            IPMI_SYSTEM_BOOT_OPTION_DISABLE, IPMI_SYSTEM_BOOT_OPTION_DISABLE,
	            IPMI_SYSTEM_BOOT_OPTION_DISABLE,
	            IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_FIRMWARE_BIOS_VERBOSITY_DEFAULT,
	            IPMI_SYSTEM_BOOT_OPTION_DISABLE,
	            IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAGS_SET_MUX_TO_RECOMENDED_AT_END_OF_POST,
	            IPMI_SYSTEM_BOOT_OPTION_DISABLE, 0, rs) < 0)
		rc = cmd_error(h, rs, IPMI_NET_FN_CHASSIS_RQ, "set boot flags", err);
	fiid_obj_destroy(rs);
	return rc;
}

/* A FRU text field as a C string ("" when absent or undecodable). libfreeipmi wants room
 * for the longest possible field, whatever this one's length. */
static void
fru_text(ipmi_fru_ctx_t fru, ipmi_fru_field_t *f, uint8_t lang, char *out, size_t len)
{
	char buf[IPMI_FRU_AREA_STRING_MAX + 1];
	unsigned int n = IPMI_FRU_AREA_STRING_MAX;

	out[0] = '\0';
	if (f->type_length_field_length == 0)
		return;
	memset(buf, 0, sizeof buf);
	if (ipmi_fru_type_length_field_to_string(fru, f->type_length_field,
	                                         f->type_length_field_length, lang, buf, &n) < 0)
		return;
	buf[n < sizeof buf ? n : sizeof buf - 1] = '\0';
	snprintf(out, len, "%s", buf);
}

/* Keep what is already known when FRU data has nothing better. */
static void
fru_text_keep(ipmi_fru_ctx_t fru, ipmi_fru_field_t *f, uint8_t lang, char *out, size_t len)
{
	char buf[IPMI_FRU_AREA_STRING_MAX + 1];

	fru_text(fru, f, lang, buf, sizeof buf);
	if (buf[0])
		snprintf(out, len, "%s", buf);
}

/* Product (and board) serial, manufacturer and model from FRU device 0. Best effort: a
 * BMC without FRU data still has an identity from Get Device ID and the GUID. */
static void
fru_identity(struct ipmi *h, struct rp_bmc_identity *id)
{
	ipmi_fru_ctx_t fru = ipmi_fru_ctx_create(h->ctx);
	uint8_t buf[IPMI_FRU_AREA_SIZE_MAX + 1];
	unsigned int type, len;
	int more;

	if (fru == NULL)
		return;
	if (ipmi_fru_open_device_id(fru, 0) < 0)
		goto out;
	if (ipmi_fru_first(fru) < 0)
		goto close;
	do {
		memset(buf, 0, sizeof buf);
		if (ipmi_fru_read_data_area(fru, &type, &len, buf, IPMI_FRU_AREA_SIZE_MAX) < 0)
			break;
		if (len == 0) /* libfreeipmi reports an empty trailing area */
			goto next;
		if (type == IPMI_FRU_AREA_TYPE_PRODUCT_INFO_AREA) {
			ipmi_fru_field_t mfr, name, model, version, serial, asset, fileid;
			uint8_t lang = 0;

			if (ipmi_fru_product_info_area(fru, buf, len, &lang, &mfr, &name, &model,
			                               &version, &serial, &asset, &fileid, NULL,
			                               0) == 0) {
				fru_text_keep(fru, &serial, lang, id->serial, sizeof id->serial);
				fru_text_keep(fru, &mfr, lang, id->manufacturer,
				              sizeof id->manufacturer);
				fru_text_keep(fru, &model, lang, id->model, sizeof id->model);
				fru_text_keep(fru, &name, lang, id->model, sizeof id->model);
			}
		} else if (type == IPMI_FRU_AREA_TYPE_BOARD_INFO_AREA && id->serial[0] == '\0') {
			ipmi_fru_field_t mfr, name, serial, part, fileid;
			uint8_t lang = 0;
			uint32_t date = 0;

			if (ipmi_fru_board_info_area(fru, buf, len, &lang, &date, &mfr, &name,
			                             &serial, &part, &fileid, NULL, 0) == 0)
				fru_text_keep(fru, &serial, lang, id->serial, sizeof id->serial);
		}
	next:
		more = ipmi_fru_next(fru);
	} while (more == 1);
close:
	ipmi_fru_close_device_id(fru);
out:
	ipmi_fru_ctx_destroy(fru);
}

static int
ipmi_identity(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	struct rp_bmc_identity id = {0};
	fiid_obj_t dev = fiid_obj_create(tmpl_cmd_get_device_id_rs);
	fiid_obj_t guid = fiid_obj_create(tmpl_cmd_get_system_guid_rs);
	uint64_t major = 0, minor = 0, mfr = 0, product = 0;
	uint8_t g[16];
	int rc = -1;

	if (dev == NULL || guid == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	if (READ_CMD(h, dev, ipmi_cmd_get_device_id(h->ctx, dev), IPMI_NET_FN_APP_RQ,
	             "get device id", err) < 0)
		goto out;
	fiid_obj_get(dev, "firmware_revision1.major_revision", &major);
	fiid_obj_get(dev, "firmware_revision2.minor_revision", &minor);
	fiid_obj_get(dev, "manufacturer_id.id", &mfr);
	fiid_obj_get(dev, "product_id", &product);
	/* The minor revision is BCD: 0x08 reads "08", 0x45 reads "45". */
	snprintf(id.bmc_firmware, sizeof id.bmc_firmware, "%u.%02x", (unsigned)major,
	         (unsigned)minor);
	snprintf(id.manufacturer, sizeof id.manufacturer, "IANA %u", (unsigned)mfr);
	snprintf(id.model, sizeof id.model, "product 0x%04x", (unsigned)product);
	/* The GUID is optional in IPMI; an error here only leaves it empty. */
	if (ipmi_cmd_get_system_guid(h->ctx, guid) == 0 &&
	    fiid_obj_get_data(guid, "guid", g, sizeof g) == 16) {
		/* IPMI sends the whole GUID least significant byte first; reversed, it reads as
		 * ipmitool and freeipmi print it. */
		snprintf(id.uuid, sizeof id.uuid,
		         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		         g[15], g[14], g[13], g[12], g[11], g[10], g[9], g[8], g[7], g[6], g[5],
		         g[4], g[3], g[2], g[1], g[0]);
	}
	fru_identity(h, &id);
	*out = id;
	rc = 0;
out:
	fiid_obj_destroy(dev);
	fiid_obj_destroy(guid);
	return rc;
}

/* Records read per call at most. A SEL holds at most 64 KiB (Get SEL Info counts its free
 * space in 16 bits), some 4000 records; more means a BMC whose "next record" links loop. */
#define SEL_WALK_MAX 8192

/* IPMI timestamps up to this are seconds since the BMC started, not dates ("pre-init"). */
#define SEL_PRE_INIT 0x20000000u

struct sel_walk {
	ipmi_interpret_ctx_t interp;
	int64_t since_ms;
	size_t max;
	json_t *list;
	unsigned read;
	int full; /* stopped: max entries collected */
	int over; /* stopped: SEL_WALK_MAX records read */
	int oom;
};

/* The severity libfreeipmi's interpretation gives a record (what ipmi-sel shows in its State
 * column); records it does not know are "warning": seen, but not called critical. */
static const char *
sel_severity(ipmi_interpret_ctx_t interp, const uint8_t *rec, unsigned len)
{
	unsigned int state = IPMI_INTERPRET_STATE_UNKNOWN;

	if (ipmi_interpret_sel(interp, rec, len, &state) < 0)
		return "warning";
	switch (state) {
	case IPMI_INTERPRET_STATE_NOMINAL:
		return "ok";
	case IPMI_INTERPRET_STATE_CRITICAL:
		return "critical";
	default:
		return "warning";
	}
}

/* One SEL record (ipmi_sel_parse callback): kept when at or after since or undated. A
 * negative return stops the walk; struct sel_walk says why. */
static int
sel_record(ipmi_sel_ctx_t sel, void *arg)
{
	struct sel_walk *w = arg;
	uint8_t rec[IPMI_SEL_RECORD_MAX_RECORD_LENGTH], type = 0, dir = 0;
	uint16_t id = 0;
	uint32_t ts = 0;
	char msg[512], idtext[8], at[RP_TIME_BUF];
	int len, cls, n, dated = 0;
	json_t *e;

	if (++w->read > SEL_WALK_MAX) {
		w->over = 1;
		return -1;
	}
	len = ipmi_sel_parse_read_record(sel, rec, sizeof rec);
	if (len <= 0 || ipmi_sel_parse_read_record_id(sel, rec, (unsigned)len, &id) < 0 ||
	    ipmi_sel_parse_read_record_type(sel, rec, (unsigned)len, &type) < 0)
		return 0; /* a record too short to read is no event */
	cls = ipmi_sel_record_type_class(type);
	if ((cls == IPMI_SEL_RECORD_TYPE_CLASS_SYSTEM_EVENT_RECORD ||
	     cls == IPMI_SEL_RECORD_TYPE_CLASS_TIMESTAMPED_OEM_RECORD) &&
	    ipmi_sel_parse_read_timestamp(sel, rec, (unsigned)len, &ts) == 0 && ts > SEL_PRE_INIT &&
	    ts != 0xffffffffu)
		dated = 1;
	if (dated && (int64_t)ts * 1000 < w->since_ms)
		return 0;
	if (json_array_size(w->list) >= w->max) {
		w->full = 1;
		return -1;
	}
	/* Sensor type, sensor (a number: no SDR is read) and the event as ipmi-sel words it. */
	n = ipmi_sel_parse_read_record_string(sel,
	                                      cls == IPMI_SEL_RECORD_TYPE_CLASS_SYSTEM_EVENT_RECORD
	                                              ? "%T %s: %E"
	                                              : "OEM record %o",
	                                      rec, (unsigned)len, msg, sizeof msg - 1,
	                                      IPMI_SEL_STRING_FLAGS_IGNORE_UNAVAILABLE_FIELD |
	                                              IPMI_SEL_STRING_FLAGS_OUTPUT_NOT_AVAILABLE);
	if (n < 0)
		snprintf(msg, sizeof msg, "SEL record type 0x%02x", type);
	msg[sizeof msg - 1] = '\0';
	if (cls == IPMI_SEL_RECORD_TYPE_CLASS_SYSTEM_EVENT_RECORD &&
	    ipmi_sel_parse_read_event_direction(sel, rec, (unsigned)len, &dir) == 0 &&
	    dir == IPMI_SEL_RECORD_DEASSERTION_EVENT && strlen(msg) + 14 < sizeof msg)
		strcat(msg, " (deasserted)");
	snprintf(idtext, sizeof idtext, "%u", id);
	e = json_pack("{s:s, s:s?, s:s, s:s, s:s}", "id", idtext, "at",
	              dated ? rp_time_format((int64_t)ts * 1000, at) : NULL, "severity",
	              sel_severity(w->interp, rec, (unsigned)len), "message", msg, "source", "sel");
	/* A message libfreeipmi made from OEM bytes may not be UTF-8: jansson refuses it. */
	if (e == NULL)
		e = json_pack("{s:s, s:s?, s:s, s:s, s:s}", "id", idtext, "at",
		              dated ? rp_time_format((int64_t)ts * 1000, at) : NULL, "severity",
		              sel_severity(w->interp, rec, (unsigned)len), "message",
		              "(not printable)", "source", "sel");
	if (e == NULL || json_array_append_new(w->list, e) < 0) {
		w->oom = 1;
		return -1;
	}
	return 0;
}

static int
ipmi_events(struct rp_bmc *b, int64_t since_ms, size_t max, json_t **out, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t info = fiid_obj_create(tmpl_cmd_get_sel_info_rs);
	struct sel_walk w = {.since_ms = since_ms, .max = max};
	ipmi_sel_ctx_t sel = NULL;
	int tries, rc = -1;

	w.interp = ipmi_interpret_ctx_create();
	if (info == NULL || w.interp == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	/* A BMC without a SEL device answers "invalid command" (-> RP_BMC_UNSUPPORTED). */
	if (READ_CMD(h, info, ipmi_cmd_get_sel_info(h->ctx, info), IPMI_NET_FN_STORAGE_RQ,
	             "get SEL info", err) < 0)
		goto out;
	for (tries = 0; tries < 2; tries++) {
		int e;

		json_decref(w.list);
		ipmi_sel_ctx_destroy(sel);
		w.list = json_array();
		w.read = 0;
		w.full = w.over = w.oom = 0;
		sel = ipmi_sel_ctx_create(h->ctx, NULL);
		if (w.list == NULL || sel == NULL) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
			goto out;
		}
		ipmi_sel_ctx_set_separator(sel, " ; ");
		if (ipmi_sel_parse(sel, IPMI_SEL_RECORD_ID_FIRST, IPMI_SEL_RECORD_ID_LAST,
		                   sel_record, &w) >= 0 ||
		    w.full)
			break;
		if (w.over) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL,
			            "SEL of %s: more than %d records (a loop?)", h->host,
			            SEL_WALK_MAX);
			goto out;
		}
		if (w.oom) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
			goto out;
		}
		e = ipmi_sel_ctx_errnum(sel);
		/* The session died under the walk (BMC restart): reading again is safe, once. */
		if (e == IPMI_SEL_ERR_IPMI_ERROR && tries == 0 &&
		    ipmi_ctx_errnum(h->ctx) == IPMI_ERR_SESSION_TIMEOUT) {
			ipmi_sel_ctx_destroy(sel);
			sel = NULL;
			if (session(h, err) < 0)
				goto out;
			continue;
		}
		if (e == IPMI_SEL_ERR_IPMI_ERROR)
			cmd_error(h, NULL, IPMI_NET_FN_STORAGE_RQ, "read SEL", err);
		else
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "read SEL of %s: %s", h->host,
			            ipmi_sel_ctx_errormsg(sel));
		goto out;
	}
	*out = w.list;
	w.list = NULL;
	rc = 0;
out:
	json_decref(w.list);
	ipmi_sel_ctx_destroy(sel);
	ipmi_interpret_ctx_destroy(w.interp);
	fiid_obj_destroy(info);
	return rc;
}

/* ---- Sensors and power limits ------------------------------------------------------- */

/* SDR records read per walk at most: more means a BMC whose "next record" links loop. */
#define SDR_WALK_MAX 1024
/* The process-wide SDR cache: BMCs, and their sensors together, at most (some 140 bytes a
 * sensor: 36 MB at worst, a few MB for a fleet of thousands of usual BMCs); hash buckets. */
#define SDR_CACHE_MAX         8192
#define SDR_CACHE_SENSORS_MAX 262144
#define SDR_BUCKETS           4096
/* Partial Get SDR reads ask for this many bytes first (IPMB's limit), then for 4 fewer at a
 * time while the BMC cannot return that many. */
#define SDR_CHUNK         32
#define SDR_CHUNK_MIN     4
#define SDR_HEADER        5
#define SDR_RESERVE_TRIES 4

/* One sensor read ends within SENSOR_DEADLINE_MS and SENSOR_REQUESTS requests (an SDR walk of
 * a usual BMC is one request a record, a few where the BMC returns records in pieces; one
 * that answers in 4-byte pieces and cancels reservations could take 300,000). A walk that failed
 * is not tried again for SDR_FAILED_HOLD_NS while the repository says the same (at most
 * SDR_FAILED_MAX BMCs remembered). The environment's RP_BMC_SENSOR_DEADLINE_MS and
 * RP_BMC_SENSOR_TRIES set lower limits (tests). */
#define SENSOR_DEADLINE_MS 90000
#define SENSOR_REQUESTS    8192
#define SDR_FAILED_HOLD_NS (5LL * 60 * 1000000000)
#define SDR_FAILED_MAX     256

/* A cached SDR is walked again after SDR_MAX_AGE_MS even when the repository says the same:
 * thresholds changed with Set Sensor Thresholds (which leave the repository info as it was),
 * and a board replaced behind the same address with the same count, are seen within it. The
 * environment's RP_BMC_SDR_MAX_AGE_MS sets a lower age (tests). */
#define SDR_MAX_AGE_MS 3600000

#define DCMI_NO_SET_POWER_LIMIT 0x80
#define DCMI_POWER_LIMIT_RANGE  0x84
#define DCMI_CORRECTION_RANGE   0x85
#define DCMI_SAMPLING_RANGE     0x89

enum sensor_type { ST_POWER, ST_TEMPERATURE, ST_FAN, ST_PSU };
static const char *const sensor_type_names[] = {"power", "temperature", "fan", "psu"};

/* One sensor as its SDR describes it: what a reading needs, decoded once. */
struct sensor {
	char name[64]; /* printable, cut to 63 bytes */
	const char *kind;
	const char *unit;
	uint8_t type; /* enum sensor_type */
	uint8_t number;
	uint8_t reading_type; /* event/reading type code */
	uint8_t readable;     /* 0: owned by another controller or LUN: never read */
	uint8_t analog;       /* 1: a threshold sensor whose raw reading decodes to a number */
	uint8_t base_unit;    /* IPMI_SENSOR_UNIT_*: temperatures are converted to Cel */
	int8_t r_exponent, b_exponent;
	int16_t m, b;
	uint8_t linearization, format;
	uint8_t have; /* bit i: th[i] set */
	double th[4]; /* lower_critical, lower_warning, upper_warning, upper_critical */
};
static const char *const threshold_names[] = {"lower_critical", "lower_warning", "upper_warning",
                                              "upper_critical"};

/* What Get SDR Repository Info says; a cached SDR is good while these stay the same. */
struct sdr_version {
	uint32_t added, erased;
	unsigned count;
};

/* The sensors of one BMC's SDR. Immutable once built; shared by reference between the cache
 * and the calls that read them. */
struct sdr_set {
	char key[344]; /* node UUID | host:port */
	uint64_t hash;
	struct sdr_version v;
	int64_t cached_ns; /* monotonic: when the cache took it (sdr_cache_put) */
	/* under sdr_lock: */
	int refs;
	struct sdr_set *chain;         /* next in its hash bucket */
	struct sdr_set *newer, *older; /* the cache's use order */
	size_t n;
	struct sensor s[];
};

static pthread_mutex_t sdr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sdr_set *sdr_buckets[SDR_BUCKETS];
static struct sdr_set *sdr_newest, *sdr_oldest;
static size_t sdr_cached, sdr_cached_sensors;

static uint64_t
fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int
sdr_same(const struct sdr_version *a, const struct sdr_version *b)
{
	return a->added == b->added && a->erased == b->erased && a->count == b->count;
}

/* Drop a reference; the last frees. Under sdr_lock. */
static void
sdr_unref_locked(struct sdr_set *set)
{
	if (set && --set->refs == 0)
		free(set);
}

static void
sdr_release(struct sdr_set *set)
{
	if (set == NULL)
		return;
	pthread_mutex_lock(&sdr_lock);
	sdr_unref_locked(set);
	pthread_mutex_unlock(&sdr_lock);
}

/* Take set out of the cache (its reference with it). Under sdr_lock. */
static void
sdr_cache_drop_locked(struct sdr_set *set)
{
	struct sdr_set **p = &sdr_buckets[set->hash % SDR_BUCKETS];

	while (*p != set)
		p = &(*p)->chain;
	*p = set->chain;
	if (set->newer)
		set->newer->older = set->older;
	else
		sdr_newest = set->older;
	if (set->older)
		set->older->newer = set->newer;
	else
		sdr_oldest = set->newer;
	sdr_cached--;
	sdr_cached_sensors -= set->n;
	sdr_unref_locked(set);
}

/* The most recently used first. Under sdr_lock. */
static void
sdr_cache_front_locked(struct sdr_set *set)
{
	if (sdr_newest == set)
		return;
	if (set->newer)
		set->newer->older = set->older;
	if (set->older)
		set->older->newer = set->newer;
	else if (set->newer)
		sdr_oldest = set->newer;
	set->newer = NULL;
	set->older = sdr_newest;
	if (sdr_newest)
		sdr_newest->newer = set;
	sdr_newest = set;
	if (sdr_oldest == NULL)
		sdr_oldest = set;
}

static struct sdr_set *
sdr_cache_find_locked(const char *key, uint64_t hash)
{
	struct sdr_set *c;

	for (c = sdr_buckets[hash % SDR_BUCKETS]; c; c = c->chain)
		if (c->hash == hash && strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

/* The cached sensors of key when its SDR is still version v and younger than SDR_MAX_AGE_MS (a
 * new reference), else NULL; an entry of another version, or older, is dropped. */
static struct sdr_set *
sdr_cache_get(const char *key, const struct sdr_version *v)
{
	struct sdr_set *set;

	int64_t max_age =
	        (int64_t)rp_bmc_env_limit("RP_BMC_SDR_MAX_AGE_MS", SDR_MAX_AGE_MS) * 1000000;

	pthread_mutex_lock(&sdr_lock);
	if ((set = sdr_cache_find_locked(key, fnv1a(key))) != NULL) {
		if (sdr_same(&set->v, v) && rp_time_mono_ns() - set->cached_ns < max_age) {
			sdr_cache_front_locked(set);
			set->refs++;
		} else {
			sdr_cache_drop_locked(set);
			set = NULL;
		}
	}
	pthread_mutex_unlock(&sdr_lock);
	return set;
}

/* Keep set (the cache takes its own reference), in place of any entry of the same key, dropping
 * the least recently used entries while the cache is over its bounds. */
static void
sdr_cache_put(struct sdr_set *set)
{
	struct sdr_set *old;

	pthread_mutex_lock(&sdr_lock);
	if ((old = sdr_cache_find_locked(set->key, set->hash)) != NULL)
		sdr_cache_drop_locked(old);
	while (sdr_oldest && (sdr_cached + 1 > SDR_CACHE_MAX ||
	                      sdr_cached_sensors + set->n > SDR_CACHE_SENSORS_MAX))
		sdr_cache_drop_locked(sdr_oldest);
	set->refs++;
	set->cached_ns = rp_time_mono_ns();
	set->chain = sdr_buckets[set->hash % SDR_BUCKETS];
	sdr_buckets[set->hash % SDR_BUCKETS] = set;
	set->newer = set->older = NULL;
	sdr_cache_front_locked(set);
	sdr_cached++;
	sdr_cached_sensors += set->n;
	pthread_mutex_unlock(&sdr_lock);
}

/* Get SDR Repository Info: 0 with *v, and *present 0 when the BMC has no SDR repository (v
 * untouched then); -1 with err. */
static int
sdr_version(struct ipmi *h, struct sdr_version *v, int *present, struct rp_bmc_err *err)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_sdr_repository_info_rs);
	uint64_t count = 0, added = 0, erased = 0;
	int rc = -1;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (READ_CMD(h, rs, ipmi_cmd_get_sdr_repository_info(h->ctx, rs), IPMI_NET_FN_STORAGE_RQ,
	             "get SDR repository info", err) < 0) {
		/* "invalid command": no SDR repository device */
		if (err->kind == RP_BMC_UNSUPPORTED) {
			*present = 0;
			rc = 0;
		}
		goto out;
	}
	if (fiid_obj_get(rs, "record_count", &count) != 1 ||
	    fiid_obj_get(rs, "most_recent_addition_timestamp", &added) != 1 ||
	    fiid_obj_get(rs, "most_recent_erase_timestamp", &erased) != 1) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "SDR repository info from %s is incomplete",
		            h->host);
		goto out;
	}
	v->count = (unsigned)count;
	v->added = (uint32_t)added;
	v->erased = (uint32_t)erased;
	*present = 1;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

/* The completion code in rs, 0 when there is none. */
static unsigned
completion_code(fiid_obj_t rs)
{
	uint64_t cc = 0;

	if (rs == NULL || fiid_obj_get(rs, "comp_code", &cc) != 1)
		return 0;
	return (unsigned)cc;
}

/* Reserve SDR Repository: 0 with *id (0 when the BMC has no reservations), -1 with err. */
static int
sdr_reserve(struct ipmi *h, uint16_t *id, struct rp_bmc_err *err)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_reserve_sdr_repository_rs);
	uint64_t val = 0;
	int rc = -1;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (within_limits(h, "reserve SDR repository", err) < 0)
		goto out;
	if (ipmi_cmd_reserve_sdr_repository(h->ctx, rs) < 0) {
		int e = ipmi_ctx_errnum(h->ctx);

		/* Reservations are optional: Get SDR takes 0 then. */
		if (e != IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED &&
		    e != IPMI_ERR_BAD_COMPLETION_CODE) {
			cmd_error(h, rs, IPMI_NET_FN_STORAGE_RQ, "reserve SDR repository", err);
			goto out;
		}
	} else if (fiid_obj_get(rs, "reservation_id", &val) != 1) {
		val = 0;
	}
	*id = (uint16_t)val;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

/* One Get SDR request into buf + offset. The bytes read (at most want), or 0 when the BMC
 * answered with a completion code (in *cc), or -1 with err when it did not answer. */
static int
sdr_get(struct ipmi *h, fiid_obj_t rs, uint16_t resv, uint16_t id, unsigned offset, unsigned count,
        uint8_t *buf, unsigned want, uint16_t *next, unsigned *cc, struct rp_bmc_err *err)
{
	uint8_t data[IPMI_SDR_MAX_RECORD_LENGTH];
	uint64_t val = 0;
	int n;

	*cc = 0;
	if (within_limits(h, "get SDR", err) < 0)
		return -1;
	if (ipmi_cmd_get_sdr(h->ctx, resv, id, (uint8_t)offset, (uint8_t)count, rs) < 0) {
		int e = ipmi_ctx_errnum(h->ctx);

		/* Busy is the BMC's "not now": RP_BMC_BUSY, not a completion code to work around.
		 */
		if (e == IPMI_ERR_BAD_COMPLETION_CODE ||
		    e == IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED || e == IPMI_ERR_MESSAGE_TIMEOUT) {
			*cc = completion_code(rs) ?: 0xff;
			return 0;
		}
		return cmd_error(h, rs, IPMI_NET_FN_STORAGE_RQ, "get SDR", err);
	}
	if ((n = fiid_obj_get_data(rs, "record_data", data, sizeof data)) < 0 ||
	    fiid_obj_get(rs, "next_record_id", &val) != 1)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "SDR record %u from %s is malformed", id,
		                   h->host);
	if ((unsigned)n > want)
		n = (int)want;
	memcpy(buf, data, (size_t)n);
	*next = (uint16_t)val;
	return n;
}

/* How one walk reads records: learnt from the first ones, kept for the rest. */
struct sdr_reader {
	fiid_obj_t rs;
	uint16_t resv;  /* reservation id (0: none) */
	int whole;      /* 1 while whole-record reads work */
	unsigned chunk; /* bytes a partial read asks for */
};

/* Read SDR record id into rec (IPMI_SDR_MAX_RECORD_LENGTH bytes): its length, with *next, or -1
 * with err. The whole record in one request while the BMC answers that (most do); else in
 * pieces of r->chunk bytes, fewer when the BMC cannot return that many (ipmi_sim returns 32,
 * IPMB-bridged repositories less). A cancelled reservation is renewed a few times. */
static int
sdr_record(struct ipmi *h, struct sdr_reader *r, uint16_t id, uint8_t *rec, uint16_t *next,
           struct rp_bmc_err *err)
{
	unsigned len, got, cc;
	int tries = 0, n;

again:
	if (r->whole) {
		n = sdr_get(h, r->rs, r->resv, id, 0, 0xff, rec, IPMI_SDR_MAX_RECORD_LENGTH, next,
		            &cc, err);
		if (n < 0)
			return -1;
		if (n >= SDR_HEADER && (unsigned)rec[4] + SDR_HEADER <= (unsigned)n)
			return rec[4] + SDR_HEADER;
		if (n == 0 && cc == IPMI_COMP_CODE_RESERVATION_CANCELLED &&
		    tries++ < SDR_RESERVE_TRIES) {
			if (sdr_reserve(h, &r->resv, err) < 0)
				return -1;
			goto again;
		}
		/* Refused, or fewer bytes than the record says it has: in pieces from now on. */
		r->whole = 0;
	}
	for (len = 0, got = 0; len == 0 || got < len;) {
		/* Within the record once its header says how long it is: never past rec. */
		unsigned want = len && len - got < r->chunk ? len - got : r->chunk;
		uint16_t link = 0;

		n = sdr_get(h, r->rs, r->resv, id, got, want, rec + got, want, &link, &cc, err);
		if (n < 0)
			return -1;
		if (n > 0) {
			if (got == 0)
				*next = link;
			got += (unsigned)n;
			if (len == 0 && got >= SDR_HEADER)
				len = rec[4] + SDR_HEADER;
			if (len && got > len)
				got = len;
			continue;
		}
		if (cc == IPMI_COMP_CODE_RESERVATION_CANCELLED && tries++ < SDR_RESERVE_TRIES) {
			if (sdr_reserve(h, &r->resv, err) < 0)
				return -1;
			goto again;
		}
		/* "cannot return that many bytes" (some say "unspecified"): ask for fewer */
		if ((cc == IPMI_COMP_CODE_CANNOT_RETURN_REQUESTED_NUMBER_OF_BYTES ||
		     cc == IPMI_COMP_CODE_UNSPECIFIED_ERROR) &&
		    r->chunk > SDR_CHUNK_MIN) {
			r->chunk = r->chunk > SDR_CHUNK_MIN + 4 ? r->chunk - 4 : SDR_CHUNK_MIN;
			continue;
		}
		return rp_bmc_fail(err, RP_BMC_PROTOCOL,
		                   "SDR record %u from %s: completion code 0x%02x at byte %u", id,
		                   h->host, cc, got);
	}
	return (int)len;
}

static int
name_has(const char *name, const char *word)
{
	return strcasestr(name, word) != NULL;
}

/* Where a sensor is, from its entity (IPMI 2.0 table 43-13, DCMI 1.5 table 6-3) and, where the
 * entity says little, its name. Never "system": that is DCMI's whole-node reading. */
static const char *
sensor_kind(enum sensor_type type, uint8_t entity, const char *name)
{
	if (type == ST_PSU || entity == IPMI_ENTITY_ID_POWER_SUPPLY ||
	    entity == IPMI_ENTITY_ID_POWER_UNIT_POWER_DOMAIN ||
	    entity == IPMI_ENTITY_ID_POWER_MODULE_DC_TO_DC_CONVERTER)
		return "psu";
	if (type == ST_FAN || entity == IPMI_ENTITY_ID_FAN_COOLING_DEVICE ||
	    entity == IPMI_ENTITY_ID_COOLING_UNIT_COOLING_DOMAIN)
		return "fan";
	/* Add-in cards, processors and boards carry GPUs; only the name tells. */
	if (name_has(name, "gpu"))
		return "gpu";
	if (name_has(name, "inlet") || name_has(name, "ambient"))
		return "inlet";
	if (name_has(name, "exhaust") || name_has(name, "outlet"))
		return "exhaust";
	switch (entity) {
	case IPMI_ENTITY_ID_AIR_INLET:
	case IPMI_ENTITY_ID_AIR_INLET_B:
	case IPMI_ENTITY_ID_EXTERNAL_ENVIRONMENT:
		return "inlet";
	case IPMI_ENTITY_ID_PROCESSOR:
	case IPMI_ENTITY_ID_PROCESSOR_MODULE:
	case IPMI_ENTITY_ID_PROCESSOR_BOARD:
	case IPMI_ENTITY_ID_PROCESSOR_FRONT_SIDE_BUS:
	case IPMI_ENTITY_ID_PROCESSOR_CPU:
		return "cpu";
	case IPMI_ENTITY_ID_MEMORY_MODULE:
	case IPMI_ENTITY_ID_MEMORY_DEVICE:
		return "memory";
	case IPMI_ENTITY_ID_DISK_OR_DISK_BAY:
	case IPMI_ENTITY_ID_DISK_DRIVE_BAY:
	case IPMI_ENTITY_ID_DRIVE_BACKPLANE:
		return "drive";
	case IPMI_ENTITY_ID_SYSTEM_BOARD:
	case IPMI_ENTITY_ID_BASEBOARD_MAIN_SYSTEM_BOARD:
	case IPMI_ENTITY_ID_FRONT_PANEL_BOARD:
	case IPMI_ENTITY_ID_BACK_PANEL_BOARD:
	case IPMI_ENTITY_ID_POWER_SYSTEM_BOARD:
	case IPMI_ENTITY_ID_SYSTEM_INTERNAL_EXPANSION_BOARD:
	case IPMI_ENTITY_ID_OTHER_SYSTEM_BOARD:
	case IPMI_ENTITY_ID_POWER_MANAGEMENT_POWER_DISTRIBUTION_BOARD:
	case IPMI_ENTITY_ID_CHASSI_BACK_PANEL_BOARD:
	case IPMI_ENTITY_ID_SYSTEM_CHASSIS:
	case IPMI_ENTITY_ID_OTHER_CHASSIS_BOARD:
		return "board";
	}
	if (name_has(name, "cpu") || name_has(name, "proc"))
		return "cpu";
	if (name_has(name, "dimm") || name_has(name, "mem"))
		return "memory";
	if (name_has(name, "nvme") || name_has(name, "ssd") || name_has(name, "hdd") ||
	    name_has(name, "drive") || name_has(name, "disk"))
		return "drive";
	return "other";
}

/* A value in the contract's unit, or NAN when no sensor can read it. */
static double
sensor_value(const struct sensor *s, double v)
{
	if (s->base_unit == IPMI_SENSOR_UNIT_DEGREES_F)
		v = (v - 32) * 5 / 9;
	else if (s->base_unit == IPMI_SENSOR_UNIT_DEGREES_K)
		v -= 273.15;
	if (!isfinite(v))
		return NAN;
	if (s->type == ST_TEMPERATURE)
		return v < -273.15 || v > 1000 ? NAN : v;
	return v < 0 || v > 1e7 ? NAN : v;
}

/* Decode a raw reading or threshold byte; NAN when it does not decode. */
static double
sensor_decode(const struct sensor *s, uint8_t raw)
{
	double v;

	if (ipmi_sensor_decode_value(s->r_exponent, s->b_exponent, s->m, s->b, s->linearization,
	                             s->format, raw, &v) < 0)
		return NAN;
	return sensor_value(s, v);
}

/* Keep threshold i when it reads as a number. */
static void
sensor_threshold(struct sensor *s, int i, double v)
{
	if (isnan(v))
		return;
	s->th[i] = v;
	s->have |= (uint8_t)(1u << i);
}

/* The four thresholds the contract names, as Get Sensor Thresholds gives them, or from the SDR
 * when the BMC cannot answer that (freeipmi's ipmi-sensors does the same). 0, or -1 with err
 * when the BMC did not answer at all. */
static int
sensor_thresholds(struct ipmi *h, ipmi_sdr_ctx_t sdr, const uint8_t *rec, unsigned len,
                  struct sensor *s, struct rp_bmc_err *err)
{
	static const char *const fields[] = {
	        "lower_critical_threshold", "lower_non_critical_threshold",
	        "upper_non_critical_threshold", "upper_critical_threshold"};
	uint8_t access = 0, r[6] = {0};
	fiid_obj_t rs = NULL;
	double *d[6] = {NULL};
	int rc = -1, i;

	if (ipmi_sdr_parse_sensor_capabilities(sdr, rec, len, NULL, &access, NULL, NULL, NULL) <
	            0 ||
	    access == IPMI_SDR_NO_THRESHOLDS_SUPPORT)
		return 0;
	if (access != IPMI_SDR_FIXED_UNREADABLE_THRESHOLDS_SUPPORT) {
		if ((rs = fiid_obj_create(tmpl_cmd_get_sensor_thresholds_rs)) == NULL)
			return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		if (within_limits(h, "get sensor thresholds", err) < 0)
			goto out;
		if (ipmi_cmd_get_sensor_thresholds(h->ctx, s->number, rs) == 0) {
			for (i = 0; i < 4; i++) {
				char mask[80];
				uint64_t readable = 0, raw = 0;

				snprintf(mask, sizeof mask, "readable_thresholds.%s", fields[i]);
				if (fiid_obj_get(rs, mask, &readable) == 1 && readable &&
				    fiid_obj_get(rs, fields[i], &raw) == 1)
					sensor_threshold(s, i, sensor_decode(s, (uint8_t)raw));
			}
			rc = 0;
			goto out;
		}
		switch (ipmi_ctx_errnum(h->ctx)) {
		case IPMI_ERR_BAD_COMPLETION_CODE:
		case IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
			switch (completion_code(rs)) {
			case IPMI_COMP_CODE_COMMAND_ILLEGAL_FOR_SENSOR_OR_RECORD_TYPE:
			case IPMI_COMP_CODE_REQUESTED_SENSOR_DATA_OR_RECORD_NOT_PRESENT:
				rc = 0; /* none to read */
				goto out;
			}
			break; /* from the SDR then */
		default:
			cmd_error(h, rs, IPMI_NET_FN_SENSOR_EVENT_RQ, "get sensor thresholds", err);
			goto out;
		}
	}
	if (ipmi_sdr_parse_threshold_readable(sdr, rec, len, &r[1], &r[0], NULL, &r[2], &r[3],
	                                      NULL) == 0 &&
	    ipmi_sdr_parse_thresholds(sdr, rec, len, &d[1], &d[0], NULL, &d[2], &d[3], NULL) == 0)
		for (i = 0; i < 4; i++)
			if (r[i] && d[i])
				sensor_threshold(s, i, sensor_value(s, *d[i]));
	rc = 0;
out:
	for (i = 0; i < 6; i++)
		free(d[i]);
	fiid_obj_destroy(rs);
	return rc;
}

/* The name of a sensor: printable ASCII (others '?'), cut to fit. */
static void
sensor_name(ipmi_sdr_ctx_t sdr, const uint8_t *rec, unsigned len, char *out, size_t outlen)
{
	char id[IPMI_SDR_MAX_ID_STRING_LENGTH * 2] = "";
	int n = ipmi_sdr_parse_id_string(sdr, rec, len, id, sizeof id);
	size_t i;

	for (i = 0; n > 0 && i < (size_t)n && i + 1 < outlen; i++)
		out[i] = id[i] >= 0x20 && id[i] < 0x7f ? id[i] : '?';
	out[i] = '\0';
	if (i == 0)
		snprintf(out, outlen, "Sensor");
}

/* A full or compact sensor record as a sensor the contract has a type for: 0 with *found 1 and
 * *out, or *found 0 when it is none of those; -1 with err when its thresholds could not be
 * read. */
static int
sdr_sensor(struct ipmi *h, ipmi_sdr_ctx_t sdr, const uint8_t *rec, unsigned len, struct sensor *out,
           int *found, struct rp_bmc_err *err)
{
	uint8_t owner_type = 0, owner = 0, lun = 0, channel = 0, entity = 0, instance = 0,
	        itype = 0;
	uint8_t percent = 0, modifier = 0, rate = 0, base = 0, mod_unit = 0, stype = 0;
	struct sensor x = {{0}}, *s = &x;
	int threshold, rc = -1;

	*found = 0;
	if (ipmi_sdr_parse_sensor_owner_id(sdr, rec, len, &owner_type, &owner) < 0 ||
	    ipmi_sdr_parse_sensor_owner_lun(sdr, rec, len, &lun, &channel) < 0 ||
	    ipmi_sdr_parse_sensor_number(sdr, rec, len, &s->number) < 0 ||
	    ipmi_sdr_parse_entity_id_instance_type(sdr, rec, len, &entity, &instance, &itype) < 0 ||
	    ipmi_sdr_parse_sensor_type(sdr, rec, len, &stype) < 0 ||
	    ipmi_sdr_parse_event_reading_type_code(sdr, rec, len, &s->reading_type) < 0 ||
	    ipmi_sdr_parse_sensor_units(sdr, rec, len, &percent, &modifier, &rate, &base,
	                                &mod_unit) < 0)
		return 0; /* too short or mangled: nothing to read */
	threshold = s->reading_type == IPMI_EVENT_READING_TYPE_CODE_THRESHOLD;
	/* Plain units only: no rate (per second...) and no modifier unit (W/h...). */
	if (threshold &&
	    (rate != IPMI_SENSOR_RATE_UNIT_NONE || modifier != IPMI_SDR_MODIFIER_UNIT_NONE))
		return 0;
	if (threshold && stype == IPMI_SENSOR_TYPE_TEMPERATURE &&
	    (base == IPMI_SENSOR_UNIT_DEGREES_C || base == IPMI_SENSOR_UNIT_DEGREES_F ||
	     base == IPMI_SENSOR_UNIT_DEGREES_K)) {
		s->type = ST_TEMPERATURE;
		s->unit = "Cel";
	} else if (threshold && stype == IPMI_SENSOR_TYPE_FAN &&
	           (base == IPMI_SENSOR_UNIT_RPM || percent)) {
		s->type = ST_FAN;
		s->unit = base == IPMI_SENSOR_UNIT_RPM ? "RPM" : "%";
	} else if (threshold && base == IPMI_SENSOR_UNIT_WATTS) {
		s->type = stype == IPMI_SENSOR_TYPE_POWER_SUPPLY ? ST_PSU : ST_POWER;
		s->unit = "W";
	} else if (!threshold && stype == IPMI_SENSOR_TYPE_POWER_SUPPLY) {
		s->type = ST_PSU;
		s->unit = "W";
	} else {
		return 0; /* voltages, currents, other discrete sensors: not in the contract */
	}
	s->base_unit = base;
	sensor_name(sdr, rec, len, s->name, sizeof s->name);
	s->kind = sensor_kind((enum sensor_type)s->type, entity, s->name);
	/* Sensors of other controllers would need bridging, which freeipmi's ipmi-sensors does not
	 * do by default either: listed, never read. */
	s->readable = owner_type == IPMI_SDR_SENSOR_OWNER_ID_TYPE_IPMB_SLAVE_ADDRESS &&
	              (owner << 1) == IPMI_SLAVE_ADDRESS_BMC && lun == IPMI_BMC_IPMB_LUN_BMC;
	if (threshold && rec[3] == IPMI_SDR_FORMAT_FULL_SENSOR_RECORD &&
	    ipmi_sdr_parse_sensor_decoding_data(sdr, rec, len, &s->r_exponent, &s->b_exponent,
	                                        &s->m, &s->b, &s->linearization, &s->format) == 0 &&
	    IPMI_SDR_ANALOG_DATA_FORMAT_VALID(s->format) &&
	    IPMI_SDR_LINEARIZATION_IS_LINEAR(s->linearization)) {
		s->analog = 1;
		if (s->readable && sensor_thresholds(h, sdr, rec, len, s, err) < 0)
			goto out;
	}
	*out = x;
	*found = 1;
	rc = 0;
out:
	return rc;
}

/* Walk the SDR: a new set of its sensors (refs 1), or NULL with err. */
static struct sdr_set *
sdr_walk(struct ipmi *h, const char *key, const struct sdr_version *v, struct rp_bmc_err *err)
{
	struct sdr_set *set = calloc(1, sizeof *set + RP_BMC_SENSORS_MAX * sizeof set->s[0]), *fit,
	               *done = NULL;
	ipmi_sdr_ctx_t sdr = ipmi_sdr_ctx_create();
	struct sdr_reader r = {
	        .rs = fiid_obj_create(tmpl_cmd_get_sdr_rs), .whole = 1, .chunk = SDR_CHUNK};
	uint8_t rec[IPMI_SDR_MAX_RECORD_LENGTH];
	uint16_t id = IPMI_SDR_RECORD_ID_FIRST, next = 0;
	unsigned read;
	int len, found;

	if (set == NULL || sdr == NULL || r.rs == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	snprintf(set->key, sizeof set->key, "%s", key);
	set->hash = fnv1a(set->key);
	set->v = *v;
	set->refs = 1;
	if (sdr_reserve(h, &r.resv, err) < 0)
		goto out;
	for (read = 0; id != IPMI_SDR_RECORD_ID_LAST; read++) {
		if (read >= SDR_WALK_MAX) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL,
			            "SDR of %s: more than %d records (a loop?)", h->host,
			            SDR_WALK_MAX);
			goto out;
		}
		if ((len = sdr_record(h, &r, id, rec, &next, err)) < 0)
			goto out;
		/* Past RP_BMC_SENSORS_MAX sensors the rest is not read: the array holds no more. */
		if (set->n < RP_BMC_SENSORS_MAX &&
		    (rec[3] == IPMI_SDR_FORMAT_FULL_SENSOR_RECORD ||
		     rec[3] == IPMI_SDR_FORMAT_COMPACT_SENSOR_RECORD)) {
			if (sdr_sensor(h, sdr, rec, (unsigned)len, &set->s[set->n], &found, err) <
			    0)
				goto out;
			set->n += (size_t)found;
		}
		/* Record 0 asks for the first record, whatever its id: only then may next
		 * repeat it. */
		if (next == id && id != IPMI_SDR_RECORD_ID_FIRST) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "SDR of %s: record %u links to itself",
			            h->host, id);
			goto out;
		}
		id = next;
	}
	if ((fit = realloc(set, sizeof *set + set->n * sizeof set->s[0])) != NULL)
		set = fit;
	done = set;
	set = NULL;
out:
	free(set);
	fiid_obj_destroy(r.rs);
	ipmi_sdr_ctx_destroy(sdr);
	return done;
}

/* At most this many walks of different BMCs are known at once; a caller waits at most this long
 * for another's walk of the same BMC. */
#define SDR_WALKS_MAX    64
#define SDR_WALK_WAIT_MS 30000

/* The keys (hashes) of the SDRs being walked now, under sdr_lock: a second caller for the same BMC
 * waits for that walk instead of starting its own, which would cancel the first's reservation
 * (and its own) and read the same records twice. */
static uint64_t sdr_walking[SDR_WALKS_MAX];
static pthread_cond_t sdr_walked = PTHREAD_COND_INITIALIZER;

/* 1: the caller walks the SDR of hash, and calls sdr_walk_end after; 2: the caller walks it
 * unannounced (no room, or it waited long enough); 0: another walk of it just ended: look in the
 * cache again. */
static int
sdr_walk_begin(uint64_t hash)
{
	struct timespec until;
	int rc = 2, waited = 0;
	size_t i, room;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += SDR_WALK_WAIT_MS / 1000;
	pthread_mutex_lock(&sdr_lock);
	for (;;) {
		for (i = 0, room = SDR_WALKS_MAX; i < SDR_WALKS_MAX && sdr_walking[i] != hash; i++)
			if (sdr_walking[i] == 0 && room == SDR_WALKS_MAX)
				room = i;
		if (i == SDR_WALKS_MAX) {
			if (waited)
				rc = 0;
			else if (room < SDR_WALKS_MAX) {
				sdr_walking[room] = hash;
				rc = 1;
			}
			break;
		}
		if (pthread_cond_timedwait(&sdr_walked, &sdr_lock, &until) != 0)
			break; /* rc 2 */
		waited = 1;
	}
	pthread_mutex_unlock(&sdr_lock);
	return rc;
}

static void
sdr_walk_end(uint64_t hash)
{
	size_t i;

	pthread_mutex_lock(&sdr_lock);
	for (i = 0; i < SDR_WALKS_MAX; i++)
		if (sdr_walking[i] == hash) {
			sdr_walking[i] = 0;
			break;
		}
	pthread_cond_broadcast(&sdr_walked);
	pthread_mutex_unlock(&sdr_lock);
}

/* Walks that failed, under sdr_lock: the next read of the same BMC fails at once with the same
 * error while its repository says the same, for SDR_FAILED_HOLD_NS, instead of walking again
 * (a walk that ran into its read's limits took 90 s). */
struct sdr_failed {
	uint64_t hash; /* 0: a free slot */
	char key[344];
	struct sdr_version v;
	int64_t at; /* rp_time_mono_ns */
	struct rp_bmc_err err;
};
static struct sdr_failed sdr_failures[SDR_FAILED_MAX];

/* Remember that the walk of key (SDR version v) failed with err: in its own slot, a free or
 * expired one, else the oldest. */
static void
sdr_failed_put(const char *key, uint64_t hash, const struct sdr_version *v,
               const struct rp_bmc_err *err)
{
	struct sdr_failed *f = &sdr_failures[0];
	size_t i;

	pthread_mutex_lock(&sdr_lock);
	for (i = 0; i < SDR_FAILED_MAX; i++) {
		struct sdr_failed *c = &sdr_failures[i];

		if (c->hash == hash && !strcmp(c->key, key)) {
			f = c;
			break;
		}
		if (c->at < f->at)
			f = c;
	}
	f->hash = hash;
	snprintf(f->key, sizeof f->key, "%s", key);
	f->v = *v;
	f->at = rp_time_mono_ns();
	f->err = *err;
	pthread_mutex_unlock(&sdr_lock);
}

/* 1 with err set when the walk of key failed within SDR_FAILED_HOLD_NS on the SDR of version v;
 * else 0 (an entry for another version, or older, is forgotten). */
static int
sdr_failed_get(const char *key, uint64_t hash, const struct sdr_version *v, struct rp_bmc_err *err)
{
	int64_t now = rp_time_mono_ns();
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&sdr_lock);
	for (i = 0; i < SDR_FAILED_MAX; i++) {
		struct sdr_failed *f = &sdr_failures[i];

		if (f->hash != hash || strcmp(f->key, key) != 0)
			continue;
		if (sdr_same(&f->v, v) && now - f->at < SDR_FAILED_HOLD_NS) {
			rp_bmc_fail(err, f->err.kind, "%.160s (%lld s ago; walked again in %lld s)",
			            f->err.msg, (long long)((now - f->at) / 1000000000),
			            (long long)((SDR_FAILED_HOLD_NS - (now - f->at)) / 1000000000));
			rc = 1;
		} else {
			memset(f, 0, sizeof *f);
		}
		break;
	}
	pthread_mutex_unlock(&sdr_lock);
	return rc;
}

/* The sensors of h's SDR: cached while Get SDR Repository Info says the same, else read (a new
 * reference, or NULL: no SDR repository; err kind RP_BMC_OK then). NULL with err on failure. */
static struct sdr_set *
sdr_sensors(struct ipmi *h, struct rp_bmc_err *err)
{
	struct sdr_version v, after;
	struct sdr_set *set = NULL, *walked = NULL;
	char key[344];
	uint64_t hash;
	int tries, present = 0, walk = 0;

	snprintf(key, sizeof key, "%s|%s", h->t.node, h->host);
	hash = fnv1a(key);
	if (sdr_version(h, &v, &present, err) < 0)
		goto out;
	err->kind = RP_BMC_OK;
	if (!present)
		goto out;
	while ((set = sdr_cache_get(key, &v)) == NULL && (walk = sdr_walk_begin(hash)) == 0)
		;
	if (set || sdr_failed_get(key, hash, &v, err))
		goto out;
	/* The SDR may change while it is read: keep a walk only when the repository says the same
	 * after it as before. One that changed under two walks is the last one, uncached. */
	for (tries = 0; tries < 2; tries++) {
		sdr_release(walked);
		if ((walked = sdr_walk(h, key, &v, err)) == NULL) {
			sdr_failed_put(key, hash, &v, err);
			goto out;
		}
		if (sdr_version(h, &after, &present, err) < 0)
			goto out;
		if (!present) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "SDR repository of %s went away",
			            h->host);
			goto out;
		}
		if (sdr_same(&after, &v)) {
			sdr_cache_put(walked);
			break;
		}
		v = after;
	}
	set = walked;
	walked = NULL;
out:
	sdr_release(walked);
	if (walk == 1)
		sdr_walk_end(hash);
	return set;
}

/* Health from a reading's state bits, as IPMI defines them for threshold sensors and for power
 * supplies (sensor-specific offsets, or generic redundancy states); NULL when not known. */
static const char *
sensor_health(const struct sensor *s, uint16_t bits)
{
	if (s->reading_type == IPMI_EVENT_READING_TYPE_CODE_THRESHOLD) {
		/* lower critical / non-recoverable, upper critical / non-recoverable */
		if (bits & 0x36)
			return "critical";
		return bits & 0x09 ? "warning" : "ok";
	}
	if (s->type != ST_PSU)
		return NULL;
	if (s->reading_type == IPMI_EVENT_READING_TYPE_CODE_SENSOR_SPECIFIC) {
		/* failure, predictive failure, input lost (AC/DC, or out of range), input out of
		 * range, configuration error: what freeipmi calls critical; inactive (standby) */
		if (bits & 0x7e)
			return "critical";
		return bits & 0x80 ? "warning" : "ok";
	}
	if (s->reading_type == IPMI_EVENT_READING_TYPE_CODE_REDUNDANCY) {
		/* lost, or non-redundant: critical; degraded: warning (as freeipmi says) */
		if (bits & 0x3a)
			return "critical";
		return bits & 0xc4 ? "warning" : "ok";
	}
	return NULL;
}

/* Get Sensor Reading of s: 0 with *value (NAN: none) and *health (NULL: none), or -1 with err
 * when the BMC does not answer. A sensor the BMC refuses to read, or says it cannot read now, has
 * neither, as freeipmi shows N/A. */
static int
sensor_read(struct ipmi *h, fiid_obj_t rs, const struct sensor *s, double *value,
            const char **health, struct rp_bmc_err *err)
{
	uint64_t raw = 0, unavailable = 0, scanning = 1, b1 = 0, b2 = 0;
	const char *judged = NULL;
	double v = NAN;
	int r, rc = -1, f1, f2;

	if (!s->readable)
		goto done;
	if (within_limits(h, "get sensor reading", err) < 0)
		goto out;
	/* BMCs send short answers (one state byte) that a strict check refuses. */
	ipmi_ctx_set_flags(h->ctx, IPMI_FLAGS_NO_VALID_CHECK);
	r = ipmi_cmd_get_sensor_reading(h->ctx, s->number, rs);
	if (r < 0 && ipmi_ctx_errnum(h->ctx) == IPMI_ERR_SESSION_TIMEOUT && session(h, err) == 0) {
		ipmi_ctx_set_flags(h->ctx, IPMI_FLAGS_NO_VALID_CHECK);
		r = ipmi_cmd_get_sensor_reading(h->ctx, s->number, rs);
	}
	ipmi_ctx_set_flags(h->ctx, IPMI_FLAGS_DEFAULT);
	if (r < 0) {
		switch (ipmi_ctx_errnum(h->ctx)) {
		case IPMI_ERR_BAD_COMPLETION_CODE:
		case IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
		case IPMI_ERR_BMC_BUSY:
			goto done;
		default:
			cmd_error(h, rs, IPMI_NET_FN_SENSOR_EVENT_RQ, "get sensor reading", err);
			goto out;
		}
	}
	fiid_obj_get(rs, "reading_state", &unavailable);
	fiid_obj_get(rs, "sensor_scanning", &scanning);
	if (unavailable == IPMI_SENSOR_READING_STATE_UNAVAILABLE ||
	    scanning == IPMI_SENSOR_SCANNING_ON_THIS_SENSOR_DISABLE)
		goto done;
	/* A BMC may send one state byte, or none (freeipmi takes no bits as none set). */
	f1 = fiid_obj_get(rs, "sensor_event_bitmask1", &b1) == 1;
	f2 = fiid_obj_get(rs, "sensor_event_bitmask2", &b2) == 1;
	judged = sensor_health(s, (uint16_t)((f1 ? b1 : 0) | (f2 ? b2 << 8 : 0)));
	if (s->analog && fiid_obj_get(rs, "sensor_reading", &raw) == 1)
		v = sensor_decode(s, (uint8_t)raw);
done:
	*value = v;
	*health = judged;
	rc = 0;
out:
	return rc;
}

/* name, made unique within the array so far by " #2", " #3"... (names is an object used as a
 * set). */
static void
unique_name(json_t *names, const char *name, char *out, size_t outlen)
{
	int i;

	snprintf(out, outlen, "%s", name);
	for (i = 2; json_object_get(names, out) != NULL && i < 1000; i++) {
		char suffix[16];
		int n = snprintf(suffix, sizeof suffix, " #%d", i);

		snprintf(out, outlen, "%.*s%s", (int)(outlen - 1 - (size_t)n), name, suffix);
	}
	json_object_set_new(names, out, json_true());
}

static json_t *
sensor_json(json_t *names, const char *name, const char *type, const char *kind, double value,
            const char *unit, const struct sensor *s, const char *health, const char *source)
{
	char unique[64];
	json_t *o;
	int i;

	unique_name(names, name, unique, sizeof unique);
	o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:s}", "name", unique, "type", type, "kind",
	              kind, "value", isnan(value) ? json_null() : json_real(value), "unit", unit,
	              "health", health ? json_string(health) : json_null(), "source", source);
	for (i = 0; o && s && i < 4; i++)
		if (s->have & (1u << i))
			json_object_set_new(o, threshold_names[i], json_real(s->th[i]));
	return o;
}

/* DCMI Get Power Reading: 0 with *present 1 and the current watts (NAN when the BMC measures
 * nothing now), or *present 0 when the BMC has no DCMI power reading; -1 with err when it does not
 * answer. */
static int
dcmi_power(struct ipmi *h, int *present, double *watts, struct rp_bmc_err *err)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_dcmi_get_power_reading_rs);
	uint64_t current = 0, active = 0;
	int rc = -1, r;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	r = ipmi_cmd_dcmi_get_power_reading(
	        h->ctx, IPMI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS, 0, rs);
	if (r < 0 && ipmi_ctx_errnum(h->ctx) == IPMI_ERR_SESSION_TIMEOUT && session(h, err) == 0)
		r = ipmi_cmd_dcmi_get_power_reading(
		        h->ctx, IPMI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS, 0, rs);
	if (r < 0) {
		switch (ipmi_ctx_errnum(h->ctx)) {
		case IPMI_ERR_BAD_COMPLETION_CODE:
		case IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
			*present = 0; /* no DCMI, or no power meter */
			rc = 0;
			break;
		default:
			cmd_error(h, rs, IPMI_NET_FN_GROUP_EXTENSION_RQ, "DCMI get power reading",
			          err);
		}
		goto out;
	}
	*watts = NAN;
	if (fiid_obj_get(rs, "power_reading_state.power_measurement", &active) == 1 && active &&
	    fiid_obj_get(rs, "current_power", &current) == 1)
		*watts = (double)current;
	*present = 1;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_sensors(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	json_t *list = json_array(), *names = json_object(), *o;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_sensor_reading_rs);
	struct sdr_set *set = NULL;
	double watts = NAN;
	int rc = -1, dcmi = 0;
	size_t i;

	if (list == NULL || names == NULL || rs == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	/* One deadline and one count of requests for the whole read, however the BMC answers. */
	h->limit_ms = rp_bmc_env_limit("RP_BMC_SENSOR_DEADLINE_MS", SENSOR_DEADLINE_MS);
	h->limit_requests = rp_bmc_env_limit("RP_BMC_SENSOR_TRIES", SENSOR_REQUESTS);
	h->deadline = rp_time_mono_ns() + (int64_t)h->limit_ms * 1000000;
	h->requests_left = h->limit_requests;
	if (dcmi_power(h, &dcmi, &watts, err) < 0)
		goto out;
	if (dcmi && ((o = sensor_json(names, "System Power", "power", "system", watts, "W", NULL,
	                              NULL, "dcmi")) == NULL ||
	             json_array_append_new(list, o) < 0)) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	if ((set = sdr_sensors(h, err)) == NULL && err->kind != RP_BMC_OK)
		goto out;
	for (i = 0; set && i < set->n && json_array_size(list) < RP_BMC_SENSORS_MAX; i++) {
		const struct sensor *s = &set->s[i];
		const char *health;
		double value;

		if (sensor_read(h, rs, s, &value, &health, err) < 0)
			goto out;
		if ((o = sensor_json(names, s->name, sensor_type_names[s->type], s->kind, value,
		                     s->unit, s, health, "sdr")) == NULL ||
		    json_array_append_new(list, o) < 0) {
			rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
			goto out;
		}
	}
	if (json_array_size(list) == 0) {
		rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "BMC %s reports no sensors", h->host);
		goto out;
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	h->deadline = 0;
	h->requests_left = 0;
	sdr_release(set);
	json_decref(list);
	json_decref(names);
	fiid_obj_destroy(rs);
	return rc;
}

/* A DCMI power limit command that failed: no DCMI is RP_BMC_UNSUPPORTED, a value out of the BMC's
 * range RP_BMC_REJECTED in plain words, the rest as any command. Returns -1. */
static int
dcmi_error(struct ipmi *h, fiid_obj_t rs, const char *what, unsigned watts, struct rp_bmc_err *err)
{
	int e = ipmi_ctx_errnum(h->ctx);
	unsigned cc = completion_code(rs);

	if (e != IPMI_ERR_BAD_COMPLETION_CODE && e != IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED)
		return cmd_error(h, rs, IPMI_NET_FN_GROUP_EXTENSION_RQ, what, err);
	switch (cc) {
	case IPMI_COMP_CODE_INVALID_COMMAND:
	case IPMI_COMP_CODE_COMMAND_INVALID_FOR_LUN:
	case IPMI_COMP_CODE_REQUEST_PARAMETER_ILLEGAL:
		return rp_bmc_fail(err, RP_BMC_UNSUPPORTED,
		                   "%s: BMC %s has no DCMI power limiting (completion code 0x%02x)",
		                   what, h->host, cc);
	case DCMI_POWER_LIMIT_RANGE:
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "%s: BMC %s refused %u W: power limit out of range", what,
		                   h->host, watts);
	case DCMI_CORRECTION_RANGE:
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "%s: BMC %s refused the correction time: out of range", what,
		                   h->host);
	case DCMI_SAMPLING_RANGE:
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "%s: BMC %s refused the sampling period: out of range", what,
		                   h->host);
	default:
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "%s: BMC %s answered completion code 0x%02x", what, h->host, cc);
	}
}

/* DCMI Get Power Limit into out, with the correction time and sampling period it keeps (for a
 * Set that changes only the watts). 0, or -1 with err. */
static int
dcmi_limit(struct ipmi *h, struct rp_power_limit *out, uint32_t *correction_ms,
           uint16_t *sampling_s, struct rp_bmc_err *err)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_dcmi_get_power_limit_rs);
	uint64_t watts = 0, correction = 0, sampling = 0;
	struct rp_power_limit l = {0, 0};
	int rc = -1, r;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	r = ipmi_cmd_dcmi_get_power_limit(h->ctx, rs);
	if (r < 0 && ipmi_ctx_errnum(h->ctx) == IPMI_ERR_SESSION_TIMEOUT && session(h, err) == 0)
		r = ipmi_cmd_dcmi_get_power_limit(h->ctx, rs);
	/* 0x80 "no (active) set power limit": DCMI 1.5 BMCs still send the limit that is set but
	 * not active; older ones send nothing, as when none was ever set. */
	if (r < 0 && !(ipmi_ctx_errnum(h->ctx) == IPMI_ERR_BAD_COMPLETION_CODE &&
	               completion_code(rs) == DCMI_NO_SET_POWER_LIMIT)) {
		dcmi_error(h, rs, "DCMI get power limit", 0, err);
		goto out;
	}
	if (fiid_obj_get(rs, "power_limit_requested", &watts) == 1) {
		l.watts = (unsigned)watts;
		l.active = r == 0;
		/* 0 is none kept (a 0x80 answer with its data zeroed, as no limit was ever set):
		 * the caller's defaults stay, never 0 ms and 0 s sent back. */
		if (fiid_obj_get(rs, "correction_time_limit", &correction) == 1 &&
		    fiid_obj_get(rs, "management_application_statistics_sampling_period",
		                 &sampling) == 1 &&
		    correction > 0 && sampling > 0) {
			*correction_ms = (uint32_t)correction;
			*sampling_s = (uint16_t)sampling;
		}
	} else if (r == 0) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "DCMI power limit from %s is incomplete",
		            h->host);
		goto out;
	}
	*out = l;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_power_limit_get(struct rp_bmc *b, struct rp_power_limit *out, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	uint32_t correction = 0;
	uint16_t sampling = 0;

	return dcmi_limit(h, out, &correction, &sampling, err);
}

/* Correction time and sampling period when the BMC keeps none yet: a second to get under the
 * limit, statistics over a second. */
#define DCMI_CORRECTION_DEFAULT_MS 1000
#define DCMI_SAMPLING_DEFAULT_S    1

static int
ipmi_power_limit_set(struct rp_bmc *b, const struct rp_power_limit *want, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t set = fiid_obj_create(tmpl_cmd_dcmi_set_power_limit_rs);
	fiid_obj_t act = fiid_obj_create(tmpl_cmd_dcmi_activate_deactivate_power_limit_rs);
	uint32_t correction = DCMI_CORRECTION_DEFAULT_MS;
	uint16_t sampling = DCMI_SAMPLING_DEFAULT_S;
	struct rp_power_limit now = {0};
	int rc = -1;

	if (set == NULL || act == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	if (want->active &&
	    (want->watts == 0 || want->watts > IPMI_DCMI_POWER_LIMIT_REQUESTED_MAX)) {
		rp_bmc_fail(err, RP_BMC_REJECTED, "a power limit of %u W cannot be set (1-%u W)",
		            want->watts, IPMI_DCMI_POWER_LIMIT_REQUESTED_MAX);
		goto out;
	}
	/* Also tells a BMC without DCMI power limiting (RP_BMC_UNSUPPORTED) before any change. */
	if (dcmi_limit(h, &now, &correction, &sampling, err) < 0)
		goto out;
	if (!want->active && !now.active) {
		rc = 0; /* nothing enforced: nothing to remove (some BMCs refuse to deactivate none)
		         */
		goto out;
	}
	/* Never "hard power off": a node over its limit only gets a SEL entry. Not repeated after
	 * a timeout: nobody knows then what the BMC keeps. */
	if (want->active &&
	    ipmi_cmd_dcmi_set_power_limit(h->ctx, IPMI_DCMI_EXCEPTION_ACTION_LOG_EVENT_TO_SEL_ONLY,
	                                  (uint16_t)want->watts, correction, sampling, set) < 0) {
		dcmi_error(h, set, "DCMI set power limit", want->watts, err);
		goto out;
	}
	if (ipmi_cmd_dcmi_activate_deactivate_power_limit(
	            h->ctx,
	            want->active ? IPMI_DCMI_POWER_LIMIT_ACTIVATION_ACTIVATE_POWER_LIMIT
	                         : IPMI_DCMI_POWER_LIMIT_ACTIVATION_DEACTIVATE_POWER_LIMIT,
	            act) < 0) {
		dcmi_error(h, act,
		           want->active ? "DCMI activate power limit"
		                        : "DCMI deactivate power limit",
		           want->watts, err);
		goto out;
	}
	rc = 0;
out:
	fiid_obj_destroy(set);
	fiid_obj_destroy(act);
	return rc;
}

/* ---- Identify, reset, password ---------------------------------------------------- */

static int
ipmi_identify_set(struct rp_bmc *b, int on, unsigned seconds, int *timed, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_chassis_identify_rs);
	uint8_t interval = 0, force = IPMI_CHASSIS_FORCE_IDENTIFY_OFF;
	int rc = -1;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	/* Interval 0 turns it off; force on outlasts any interval (the caller turns it off). */
	if (on && seconds >= 1 && seconds <= RP_BMC_IDENTIFY_TIMED_MAX)
		interval = (uint8_t)seconds;
	else if (on)
		force = IPMI_CHASSIS_FORCE_IDENTIFY_ON;
	if (ipmi_cmd_chassis_identify(h->ctx, &interval, &force, rs) < 0) {
		cmd_error(h, rs, IPMI_NET_FN_CHASSIS_RQ, "chassis identify", err);
		goto out;
	}
	*timed = interval != 0;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_identify_get(struct rp_bmc *b, int *on, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_chassis_status_rs);
	uint64_t supported = 0, state = 0;
	int rc = -1;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	if (READ_CMD(h, rs, ipmi_cmd_get_chassis_status(h->ctx, rs), IPMI_NET_FN_CHASSIS_RQ,
	             "get chassis status", err) < 0)
		goto out;
	/* The misc byte is optional in the answer, and its state bits mean something only
	 * when the BMC says it reports them. */
	if (fiid_obj_get(rs, "misc_chassis_state.chassis_identify_command_and_state_info_supported",
	                 &supported) <= 0 ||
	    !supported ||
	    fiid_obj_get(rs, "misc_chassis_state.chassis_identify_state", &state) <= 0)
		*on = -1;
	else
		*on = state != IPMI_CHASSIS_IDENTIFY_STATE_OFF;
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

static int
ipmi_reset(struct rp_bmc *b, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_cold_reset_rs);
	int rc = 0;

	if (rs == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	/* Never repeated: a BMC that restarts before answering times out here. */
	if (ipmi_cmd_cold_reset(h->ctx, rs) < 0)
		rc = cmd_error(h, rs, IPMI_NET_FN_APP_RQ, "BMC cold reset", err);
	fiid_obj_destroy(rs);
	return rc;
}

/* The user ID of the session's user on this channel: Get User Access gives how many IDs the
 * channel has, Get User Name each one's name. */
static int
user_id(struct ipmi *h, uint8_t *out, struct rp_bmc_err *err)
{
	fiid_obj_t acc = fiid_obj_create(tmpl_cmd_get_user_access_rs);
	fiid_obj_t nm = fiid_obj_create(tmpl_cmd_get_user_name_rs);
	uint64_t max = 0;
	unsigned id;
	int rc = -1;

	if (acc == NULL || nm == NULL) {
		rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
		goto out;
	}
	if (READ_CMD(h, acc,
	             ipmi_cmd_get_user_access(h->ctx, IPMI_CHANNEL_NUMBER_CURRENT_CHANNEL, 1, acc),
	             IPMI_NET_FN_APP_RQ, "get user access", err) < 0)
		goto out;
	if (fiid_obj_get(acc, "max_channel_user_ids", &max) <= 0 || max == 0 || max > 63)
		max = 63;
	for (id = 1; id <= max; id++) {
		char name[IPMI_MAX_USER_NAME_LENGTH + 1] = "";

		fiid_obj_clear(nm);
		/* A missing ID (some BMCs answer 0xCC past their last user) ends nothing. */
		if (ipmi_cmd_get_user_name(h->ctx, (uint8_t)id, nm) < 0) {
			int e = ipmi_ctx_errnum(h->ctx);

			if (e == IPMI_ERR_BAD_COMPLETION_CODE ||
			    e == IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED)
				continue;
			cmd_error(h, nm, IPMI_NET_FN_APP_RQ, "get user name", err);
			goto out;
		}
		if (fiid_obj_get_data(nm, "user_name", name, IPMI_MAX_USER_NAME_LENGTH) < 0)
			continue;
		if (name[0] && !strcmp(name, h->t.username)) {
			*out = (uint8_t)id;
			rc = 0;
			goto out;
		}
	}
	rp_bmc_fail(err, RP_BMC_UNSUPPORTED, "no user '%s' among the %u user IDs of %s",
	            h->t.username, (unsigned)max, h->host);
out:
	fiid_obj_destroy(acc);
	fiid_obj_destroy(nm);
	return rc;
}

static int
ipmi_password_set(struct rp_bmc *b, const char *password, struct rp_bmc_err *err)
{
	struct ipmi *h = (struct ipmi *)b;
	fiid_obj_t rs = NULL;
	size_t n = strlen(password);
	uint8_t id = 0;
	int rc = -1;

	if (n > IPMI_2_0_MAX_PASSWORD_LENGTH)
		return rp_bmc_fail(err, RP_BMC_REJECTED,
		                   "an IPMI password is at most %d characters (this one has %zu)",
		                   IPMI_2_0_MAX_PASSWORD_LENGTH, n);
	if (user_id(h, &id, err) < 0)
		return -1;
	if ((rs = fiid_obj_create(tmpl_cmd_set_user_password_rs)) == NULL)
		return rp_bmc_fail(err, RP_BMC_PROTOCOL, "out of memory");
	/* Never repeated: after a timeout the caller tries both passwords. */
	if (ipmi_cmd_set_user_password(
	            h->ctx, id,
	            n > IPMI_1_5_MAX_PASSWORD_LENGTH ? IPMI_PASSWORD_SIZE_20_BYTES
	                                             : IPMI_PASSWORD_SIZE_16_BYTES,
	            IPMI_PASSWORD_OPERATION_SET_PASSWORD, password, (unsigned)n, rs) < 0) {
		cmd_error(h, rs, IPMI_NET_FN_APP_RQ, "set user password", err);
		/* A BMC that takes only 16-byte passwords refuses the 20-byte form, as an invalid
		 * request or an invalid data length (which libfreeipmi calls unsupported). */
		if ((err->kind == RP_BMC_REJECTED || err->kind == RP_BMC_UNSUPPORTED) &&
		    n > IPMI_1_5_MAX_PASSWORD_LENGTH) {
			size_t len = strlen(err->msg);

			err->kind = RP_BMC_REJECTED;
			snprintf(err->msg + len, sizeof err->msg - len,
			         " (a %zu-character password: the BMC may take at most %d)", n,
			         IPMI_1_5_MAX_PASSWORD_LENGTH);
		}
		goto out;
	}
	rc = 0;
out:
	fiid_obj_destroy(rs);
	return rc;
}

const struct rp_bmc_ops rp_bmc_ipmi_ops = {
        .name = "ipmi",
        .open = ipmi_open,
        .close = ipmi_close,
        .power_get = ipmi_power_get,
        .power_set = ipmi_power_set,
        .boot_set = ipmi_boot_set,
        .boot_get = ipmi_boot_get,
        .identity = ipmi_identity,
        .events = ipmi_events,
        .detected_workarounds = ipmi_detected_workarounds,
        .sensors = ipmi_sensors,
        .power_limit_get = ipmi_power_limit_get,
        .power_limit_set = ipmi_power_limit_set,
        .identify_set = ipmi_identify_set,
        .identify_get = ipmi_identify_get,
        .reset = ipmi_reset,
        .password_set = ipmi_password_set,
};
