/*
 * The IPMI driver: IPMI 2.0 / RMCP+ ("lanplus") through libfreeipmi. One session per
 * handle; a read that finds its session gone (the BMC restarted) reopens it once.
 *
 * Workarounds are found, not configured: when a node's options name none and the plain
 * session fails with an error that a known libfreeipmi workaround cures, ipmi_open tries the
 * sets rp_bmc_ipmi_candidates gives, in order, and keeps the first that opens a session and
 * answers Get Device ID (rp_bmc_detected_workarounds tells the caller, which persists it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <freeipmi/freeipmi.h>

#include "bmc.h"
#include "util/util.h"

struct ipmi {
	struct rp_bmc base;
	ipmi_ctx_t ctx;
	struct rp_bmc_target t;
	char host[300];
	unsigned detected; /* workaround flags probing found at open; 0: none */
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
};
