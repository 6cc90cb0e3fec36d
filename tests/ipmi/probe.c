/*
 * probe.c - tiny libfreeipmi client used by selftest.sh to check, against the simulated BMCs,
 * the exact libfreeipmi calls Rackpilot's IPMI driver uses. Not installed anywhere.
 *
 *   cc -O2 -Wall -o probe probe.c -lfreeipmi
 *   probe HOST:PORT USER PASSWORD ACTION [ARG...]
 *
 * ACTION
 *   status                      power=on|off
 *   on | off | cycle | reset | soft
 *   boot pxe|disk [persistent] [efi]   Set System Boot Options param 5 (boot flags)
 *   getboot                     boot_device=0xNN valid=V persistent=P efi=E
 *   devid                       Get Device ID fields
 *   guid                        Get System GUID: guid=<RFC 4122 text> raw=<wire bytes>
 *   fru                         product/board fields of FRU device 0
 *   loop N                      N x Get Chassis Status on one session; prints median/max ms
 *   raw NETFN CMD [BYTE...]     one request (hex or decimal bytes) on the session; prints
 *                               "cc=0xNN data=.." (exit 0 whatever the completion code)
 *   watch N MS                  N x Get Device ID on ONE session, MS ms apart; one line each:
 *                               "t=<ms since open> ok" or "t=.. errnum=E (<message>)". Once the
 *                               session is dead every later query fails too. Exit 3 if any failed.
 *
 * env PROBE_TIMEOUTS="session_ms retrans_ms" (default "5000 500"), PROBE_NO_WORKAROUND=1.
 * Exit: 0 ok, 1 usage, 2 session open failed, 3 command failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <freeipmi/freeipmi.h>

static ipmi_ctx_t ctx;

static double
now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int
fail(const char *what)
{
	fprintf(stderr, "%s: %s (errnum %d)\n", what, ipmi_ctx_errormsg(ctx), ipmi_ctx_errnum(ctx));
	return 3;
}

static uint64_t
field(fiid_obj_t obj, const char *name)
{
	uint64_t v = 0;
	if (fiid_obj_get(obj, name, &v) < 0)
		fprintf(stderr, "fiid_obj_get(%s): %s\n", name, fiid_obj_errormsg(obj));
	return v;
}

static int
get_power(int *on)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_chassis_status_rs);
	int rv = ipmi_cmd_get_chassis_status(ctx, rs);
	if (rv == 0)
		*on = (int)field(rs, "current_power_state.power_is_on");
	fiid_obj_destroy(rs);
	return rv;
}

static int
chassis_control(uint8_t op)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_chassis_control_rs);
	int rv = ipmi_cmd_chassis_control(ctx, op, rs);
	fiid_obj_destroy(rs);
	return rv < 0 ? fail("ipmi_cmd_chassis_control") : 0;
}

static int
set_boot(uint8_t device, int persistent, int efi)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_set_system_boot_options_rs);
	int rv = ipmi_cmd_set_system_boot_options_boot_flags(
	        ctx, IPMI_SYSTEM_BOOT_OPTIONS_PARAMETER_VALID_UNLOCKED,
	        efi ? IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_TYPE_EFI
	            : IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_TYPE_PC_COMPATIBLE,
	        persistent ? IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_VALID_PERSISTENTLY
	                   : IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_VALID_FOR_NEXT_BOOT,
	        IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_VALID,
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE,         /* lock_out_reset_button */
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE,         /* screen_blank */
	        device, IPMI_SYSTEM_BOOT_OPTION_DISABLE, /* lock_keyboard */
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE,         /* cmos_clear */
	        IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_CONSOLE_REDIRECTION_DEFAULT,
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE, /* lock_out_sleep_button */
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE, /* user_password_bypass */
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE, /* force_progress_event_traps */
	        IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_FIRMWARE_BIOS_VERBOSITY_DEFAULT,
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE, /* lock_out_via_power_button */
	        IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAGS_SET_MUX_TO_RECOMENDED_AT_END_OF_POST,
	        IPMI_SYSTEM_BOOT_OPTION_DISABLE, /* bios_shared_mode_override */
	        0,                               /* device_instance_selector */
	        rs);
	fiid_obj_destroy(rs);
	return rv < 0 ? fail("ipmi_cmd_set_system_boot_options_boot_flags") : 0;
}

static int
get_boot(void)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_system_boot_options_boot_flags_rs);
	int rv = ipmi_cmd_get_system_boot_options_boot_flags(
	        ctx, IPMI_SYSTEM_BOOT_OPTIONS_NO_SET_SELECTOR,
	        IPMI_SYSTEM_BOOT_OPTIONS_NO_BLOCK_SELECTOR, rs);
	if (rv < 0) {
		fiid_obj_destroy(rs);
		return fail("ipmi_cmd_get_system_boot_options_boot_flags");
	}
	printf("boot_device=0x%02x valid=%u persistent=%u efi=%u\n",
	       (unsigned)field(rs, "boot_device"), (unsigned)field(rs, "boot_flags_valid"),
	       (unsigned)field(rs, "boot_flags_persistent"), (unsigned)field(rs, "bios_boot_type"));
	fiid_obj_destroy(rs);
	return 0;
}

static int
device_id(void)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_device_id_rs);
	if (ipmi_cmd_get_device_id(ctx, rs) < 0) {
		fiid_obj_destroy(rs);
		return fail("ipmi_cmd_get_device_id");
	}
	/* minor firmware revision is BCD: 0x23 -> "1.23" */
	printf("device_id=%u device_revision=%u firmware=%u.%02x ipmi=%u.%u manufacturer_id=%u "
	       "product_id=0x%04x\n",
	       (unsigned)field(rs, "device_id"), (unsigned)field(rs, "device_revision.revision"),
	       (unsigned)field(rs, "firmware_revision1.major_revision"),
	       (unsigned)field(rs, "firmware_revision2.minor_revision"),
	       (unsigned)field(rs, "ipmi_version_major"), (unsigned)field(rs, "ipmi_version_minor"),
	       (unsigned)field(rs, "manufacturer_id.id"), (unsigned)field(rs, "product_id"));
	fiid_obj_destroy(rs);
	return 0;
}

static int
system_guid(void)
{
	fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_system_guid_rs);
	uint8_t g[16];
	int i;

	if (ipmi_cmd_get_system_guid(ctx, rs) < 0) {
		fiid_obj_destroy(rs);
		return fail("ipmi_cmd_get_system_guid");
	}
	if (fiid_obj_get_data(rs, "guid", g, sizeof(g)) != 16) {
		fprintf(stderr, "guid: %s\n", fiid_obj_errormsg(rs));
		fiid_obj_destroy(rs);
		return 3;
	}
	fiid_obj_destroy(rs);
	/* IPMI sends the GUID least significant byte first: the RFC 4122 text is the bytes
	 * reversed. */
	printf("guid=");
	for (i = 15; i >= 0; i--)
		printf("%02x%s", g[i], (i == 12 || i == 10 || i == 8 || i == 6) ? "-" : "");
	printf(" raw=");
	for (i = 0; i < 16; i++)
		printf("%02x", g[i]);
	printf("\n");
	return 0;
}

static void
print_field(ipmi_fru_ctx_t fru, const char *name, ipmi_fru_field_t *f, uint8_t lang)
{
	char s[IPMI_FRU_AREA_STRING_MAX + 1];
	unsigned int len = IPMI_FRU_AREA_STRING_MAX;

	memset(s, 0, sizeof(s));
	if (!f->type_length_field_length)
		return;
	if (ipmi_fru_type_length_field_to_string(fru, f->type_length_field,
	                                         f->type_length_field_length, lang, s, &len) < 0) {
		fprintf(stderr, "%s: %s\n", name, ipmi_fru_ctx_errormsg(fru));
		return;
	}
	printf("%s=%s\n", name, s);
}

static int
read_fru(void)
{
	ipmi_fru_ctx_t fru = ipmi_fru_ctx_create(ctx);
	static uint8_t buf[IPMI_FRU_AREA_SIZE_MAX + 1];
	int rv = 3, more;

	if (!fru)
		return fail("ipmi_fru_ctx_create");
	if (ipmi_fru_open_device_id(fru, 0) < 0) {
		fprintf(stderr, "ipmi_fru_open_device_id: %s\n", ipmi_fru_ctx_errormsg(fru));
		goto out;
	}
	if (ipmi_fru_first(fru) < 0) {
		fprintf(stderr, "ipmi_fru_first: %s\n", ipmi_fru_ctx_errormsg(fru));
		goto out;
	}
	do {
		unsigned int type = 0, len = 0;
		uint8_t lang = 0;
		uint32_t mfg_time = 0;
		ipmi_fru_field_t a, b, c, d, e, f, g;

		memset(buf, 0, sizeof(buf));
		if (ipmi_fru_read_data_area(fru, &type, &len, buf, IPMI_FRU_AREA_SIZE_MAX) < 0) {
			fprintf(stderr, "ipmi_fru_read_data_area: %s\n",
			        ipmi_fru_ctx_errormsg(fru));
			goto out;
		}
		if (!len) /* the iterator also visits empty header slots */
			continue;
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		memset(&c, 0, sizeof(c));
		memset(&d, 0, sizeof(d));
		memset(&e, 0, sizeof(e));
		memset(&f, 0, sizeof(f));
		memset(&g, 0, sizeof(g));
		if (type == IPMI_FRU_AREA_TYPE_PRODUCT_INFO_AREA) {
			if (ipmi_fru_product_info_area(fru, buf, len, &lang, &a, &b, &c, &d, &e, &f,
			                               &g, NULL, 0) < 0) {
				fprintf(stderr, "ipmi_fru_product_info_area: %s\n",
				        ipmi_fru_ctx_errormsg(fru));
				goto out;
			}
			print_field(fru, "product_manufacturer", &a, lang);
			print_field(fru, "product_name", &b, lang);
			print_field(fru, "product_model", &c, lang);
			print_field(fru, "product_version", &d, lang);
			print_field(fru, "product_serial", &e, lang);
			print_field(fru, "product_asset_tag", &f, lang);
		} else if (type == IPMI_FRU_AREA_TYPE_BOARD_INFO_AREA) {
			if (ipmi_fru_board_info_area(fru, buf, len, &lang, &mfg_time, &a, &b, &c,
			                             &d, &e, NULL, 0) < 0) {
				fprintf(stderr, "ipmi_fru_board_info_area: %s\n",
				        ipmi_fru_ctx_errormsg(fru));
				goto out;
			}
			print_field(fru, "board_manufacturer", &a, lang);
			print_field(fru, "board_product", &b, lang);
			print_field(fru, "board_serial", &c, lang);
			print_field(fru, "board_part_number", &d, lang);
			printf("board_mfg_time=%u\n", (unsigned)mfg_time);
		} else if (type == IPMI_FRU_AREA_TYPE_CHASSIS_INFO_AREA) {
			uint8_t chassis_type = 0;
			if (ipmi_fru_chassis_info_area(fru, buf, len, &chassis_type, &a, &b, NULL,
			                               0) < 0) {
				fprintf(stderr, "ipmi_fru_chassis_info_area: %s\n",
				        ipmi_fru_ctx_errormsg(fru));
				goto out;
			}
			printf("chassis_type=0x%02x\n", chassis_type);
			print_field(fru, "chassis_part_number", &a, 0);
			print_field(fru, "chassis_serial", &b, 0);
		}
	} while ((more = ipmi_fru_next(fru)) == 1);
	if (more < 0)
		fprintf(stderr, "ipmi_fru_next: %s\n", ipmi_fru_ctx_errormsg(fru));
	else
		rv = 0;
out:
	ipmi_fru_close_device_id(fru);
	ipmi_fru_ctx_destroy(fru);
	return rv;
}

static int
raw(int argc, char **argv)
{
	uint8_t rq[256], rs[256];
	unsigned int n = 0;
	int i, len;
	unsigned long netfn = strtoul(argv[0], NULL, 0);

	for (i = 1; i < argc && n < sizeof(rq); i++)
		rq[n++] = (uint8_t)strtoul(argv[i], NULL, 0);
	if (n < 1)
		return 1;
	len = ipmi_cmd_raw(ctx, 0, (uint8_t)netfn, rq, n, rs, sizeof(rs));
	if (len < 0)
		return fail("ipmi_cmd_raw");
	if (len < 2) {
		fprintf(stderr, "ipmi_cmd_raw: short response (%d bytes)\n", len);
		return 3;
	}
	/* rs[0] is the command, rs[1] the completion code */
	printf("cc=0x%02x data=", rs[1]);
	for (i = 2; i < len; i++)
		printf("%s%02x", i > 2 ? " " : "", rs[i]);
	printf("\n");
	return 0;
}

static int
watch(int n, int gap_ms, double t_open)
{
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		fiid_obj_t rs = fiid_obj_create(tmpl_cmd_get_device_id_rs);
		double a = now_ms();
		if (ipmi_cmd_get_device_id(ctx, rs) < 0) {
			printf("t=%.0f errnum=%d (%s) after %.0f ms\n", a - t_open,
			       ipmi_ctx_errnum(ctx), ipmi_ctx_errormsg(ctx), now_ms() - a);
			bad = 1;
		} else
			printf("t=%.0f ok %.1f ms\n", a - t_open, now_ms() - a);
		fflush(stdout);
		fiid_obj_destroy(rs);
		if (i + 1 < n) {
			struct timespec ts = {gap_ms / 1000, (long)(gap_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	return bad ? 3 : 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int
loop(int n)
{
	double *t = calloc((size_t)n, sizeof(double));
	int i, on = 0;

	if (!t || n < 1)
		return 1;
	for (i = 0; i < n; i++) {
		double a = now_ms();
		if (get_power(&on) < 0)
			return fail("ipmi_cmd_get_chassis_status");
		t[i] = now_ms() - a;
	}
	qsort(t, (size_t)n, sizeof(double), cmp_double);
	printf("queries=%d median_ms=%.3f min_ms=%.3f max_ms=%.3f\n", n, t[n / 2], t[0], t[n - 1]);
	free(t);
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned int session_ms = 5000, retrans_ms = 500;
	unsigned int workarounds = IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE;
	const char *act;
	int rv = 1, on = 0;
	double t0;

	if (argc < 5) {
		fprintf(stderr, "usage: %s HOST:PORT USER PASSWORD ACTION [ARG...]\n", argv[0]);
		return 1;
	}
	act = argv[4];
	if (getenv("PROBE_TIMEOUTS"))
		sscanf(getenv("PROBE_TIMEOUTS"), "%u %u", &session_ms, &retrans_ms);
	if (getenv("PROBE_NO_WORKAROUND"))
		workarounds = 0;

	if (!(ctx = ipmi_ctx_create())) {
		perror("ipmi_ctx_create");
		return 2;
	}
	t0 = now_ms();
	if (ipmi_ctx_open_outofband_2_0(ctx, argv[1], argv[2], argv[3], NULL, 0, /* no K_g */
	                                IPMI_PRIVILEGE_LEVEL_ADMIN, 3, /* cipher suite 3 */
	                                session_ms, retrans_ms, workarounds,
	                                IPMI_FLAGS_DEFAULT) < 0) {
		fprintf(stderr, "open %s: %s (errnum %d) after %.0f ms\n", argv[1],
		        ipmi_ctx_errormsg(ctx), ipmi_ctx_errnum(ctx), now_ms() - t0);
		ipmi_ctx_destroy(ctx);
		return 2;
	}

	if (!strcmp(act, "status")) {
		rv = get_power(&on) < 0 ? fail("ipmi_cmd_get_chassis_status") : 0;
		if (rv == 0)
			printf("power=%s\n", on ? "on" : "off");
	} else if (!strcmp(act, "on"))
		rv = chassis_control(IPMI_CHASSIS_CONTROL_POWER_UP);
	else if (!strcmp(act, "off"))
		rv = chassis_control(IPMI_CHASSIS_CONTROL_POWER_DOWN);
	else if (!strcmp(act, "cycle"))
		rv = chassis_control(IPMI_CHASSIS_CONTROL_POWER_CYCLE);
	else if (!strcmp(act, "reset"))
		rv = chassis_control(IPMI_CHASSIS_CONTROL_HARD_RESET);
	else if (!strcmp(act, "soft"))
		rv = chassis_control(IPMI_CHASSIS_CONTROL_INITIATE_SOFT_SHUTDOWN);
	else if (!strcmp(act, "boot") && argc >= 6) {
		int persistent = 0, efi = 0, i;
		uint8_t dev =
		        !strcmp(argv[5], "pxe")
		                ? IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_FORCE_PXE
		                : IPMI_SYSTEM_BOOT_OPTION_BOOT_FLAG_BOOT_DEVICE_FORCE_HARD_DRIVE;
		for (i = 6; i < argc; i++) {
			persistent |= !strcmp(argv[i], "persistent");
			efi |= !strcmp(argv[i], "efi");
		}
		rv = set_boot(dev, persistent, efi);
	} else if (!strcmp(act, "getboot"))
		rv = get_boot();
	else if (!strcmp(act, "devid"))
		rv = device_id();
	else if (!strcmp(act, "guid"))
		rv = system_guid();
	else if (!strcmp(act, "fru"))
		rv = read_fru();
	else if (!strcmp(act, "loop") && argc >= 6)
		rv = loop(atoi(argv[5]));
	else if (!strcmp(act, "raw") && argc >= 7)
		rv = raw(argc - 5, argv + 5);
	else if (!strcmp(act, "watch") && argc >= 7)
		rv = watch(atoi(argv[5]), atoi(argv[6]), t0);
	else
		fprintf(stderr, "unknown action %s\n", act);

	ipmi_ctx_close(ctx);
	ipmi_ctx_destroy(ctx);
	return rv;
}
