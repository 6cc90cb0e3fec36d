/*
 * chassis_plugin.c - optional ipmi_sim (OpenIPMI lanserv) plug-in for the Rackpilot BMC simulator.
 *
 * It replaces the `chassis_control` program (chassis_ctl.sh, one fork+exec of /bin/sh per chassis
 * request) with in-process file I/O, so that fleets of hundreds of simulated BMCs answer status
 * polls in well under a millisecond. State files are the same as chassis_ctl.sh's:
 *
 *   <statedir>/power      "0" / "1"
 *   <statedir>/boot       none|pxe|default|cdrom|bios, or devN for other boot device selectors
 *   <statedir>/ops.log    "set power 1", "set reset 1", "set shutdown 1", "set boot pxe", ...
 *   <statedir>/identify   the last Chassis Identify, "<interval> <force>" (also in ops.log)
 *   <statedir>/fail       exists -> every chassis request answers completion code 0xFF
 *   <statedir>/delay      "<seconds>" -> sleep before answering (blocks the whole process)
 *
 * In addition it implements Set/Get System Boot Options (chassis netfn, cmds 0x08/0x09) itself,
 * because ipmi_sim's built-in version keeps only the boot device. Here the five data bytes of
 * parameter 5 (boot flags: valid, persistent, EFI, device, ...) are stored verbatim in
 *   <statedir>/bootflags  "e0 04 00 00 00" (hex, as sent by the client)
 * and returned unchanged by Get System Boot Options; `boot` and ops.log are updated as above.
 * Parameters 0-4, 6 and 7 are accepted and remembered in memory only.
 *
 * It also fixes ipmi_sim 2.0.33's Chassis Identify reply (cmd 0x04): the handler never sets the
 * response length, so completion code 0x00 goes out with ~35 bytes of stack garbage; ipmitool
 * ignores them, libfreeipmi rejects the reply, retransmits and fails ("session timeout"). Here the
 * reply is the completion code alone (mc_plugin.c does the same for the chassis_ctl.sh mode).
 *
 * Build (Debian: libopenipmi-dev), done by bmcsim.sh when CHASSIS_PLUGIN=1:
 *   cc -O2 -Wall -fPIC -shared -o chassis_plugin.so chassis_plugin.c
 * lan.conf (top level, after the set_working_mc blocks):
 *   loadlib "/abs/chassis_plugin.so" "/abs/statedir"      every MC uses this state directory
 *   loadlib "/abs/chassis_plugin.so" "/abs/chassis.map"   file of "<ipmb> <statedir>" lines
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

#define CHASSIS_NETFN     0x00
#define CMD_IDENTIFY      0x04
#define CMD_SET_BOOT_OPTS 0x08
#define CMD_GET_BOOT_OPTS 0x09
#define CC_OK             0x00
#define CC_PARAM_UNSUPP   0x80
#define CC_INVALID_CMD    0xc1
#define CC_BAD_LENGTH     0xc7
#define CC_UNSPECIFIED    0xff
#define NPARAMS           8
#define PARAM_MAX         16

struct bmc {
	lmc_data_t *mc;
	char dir[PATH_MAX];
	unsigned char param[NPARAMS][PARAM_MAX];
	unsigned char param_len[NPARAMS];
};

static sys_data_t *g_sys;
static char *g_options;
static struct bmc *g_bmcs[IPMI_MAX_MCS];

/* ipmi_sim's chassis handler table: exported by the binary (nm -D ipmi_sim), in no header. */
extern cmd_handler_f chassis_netfn_handlers[] __attribute__((weak));
static cmd_handler_f orig_identify;

static const char *const dev_names[16] = {
        [0] = "none", [1] = "pxe", [2] = "default", [5] = "cdrom", [6] = "bios",
};
/* Default length of each boot option parameter (IPMI 2.0 table 28-14). */
static const unsigned char param_default_len[NPARAMS] = {1, 1, 1, 1, 2, 5, 9, 0};

/* ---- state files ------------------------------------------------------------------------ */

static int
path_of(const struct bmc *b, const char *name, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s", b->dir, name);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

static int
read_line(const struct bmc *b, const char *name, char *buf, size_t len)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	if (path_of(b, name, p, sizeof(p)) < 0 || (fd = open(p, O_RDONLY)) < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
}

static void
write_file(const struct bmc *b, const char *name, const char *text, int append)
{
	char p[PATH_MAX], line[256];
	int fd, n;

	if (path_of(b, name, p, sizeof(p)) < 0)
		return;
	fd = open(p, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%s\n", text);
	if (n > 0 && write(fd, line, (size_t)n) != n)
		g_sys->log(g_sys, OS_ERROR, NULL, "chassis_plugin: short write to %s", p);
	close(fd);
}

static void
oplog(const struct bmc *b, const char *what, const char *value)
{
	char line[128];
	snprintf(line, sizeof(line), "set %s %s", what, value);
	write_file(b, "ops.log", line, 1);
}

/* Apply the `delay` and `fail` fault files; returns non-zero when the request must fail. */
static int
injected_fault(const struct bmc *b)
{
	char buf[64], p[PATH_MAX];
	struct stat st;

	if (read_line(b, "delay", buf, sizeof(buf)) == 0) {
		double secs = atof(buf);
		if (secs > 0) {
			struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
	return path_of(b, "fail", p, sizeof(p)) == 0 && stat(p, &st) == 0;
}

static int
powered_on(const struct bmc *b)
{
	char buf[16];
	return read_line(b, "power", buf, sizeof(buf)) == 0 && strcmp(buf, "1") == 0;
}

static unsigned int
boot_device(const struct bmc *b)
{
	char buf[32];
	unsigned int i;

	if (read_line(b, "boot", buf, sizeof(buf)) < 0)
		return 0;
	if (strncmp(buf, "dev", 3) == 0)
		return (unsigned int)atoi(buf + 3) & 0xf;
	for (i = 0; i < 16; i++)
		if (dev_names[i] && strcmp(buf, dev_names[i]) == 0)
			return i;
	return 0;
}

static void
device_name(unsigned int dev, char *buf, size_t len)
{
	if (dev_names[dev & 0xf])
		snprintf(buf, len, "%s", dev_names[dev & 0xf]);
	else
		snprintf(buf, len, "dev%u", dev & 0xf);
}

/* ---- chassis control hooks (Get Chassis Status, Chassis Control) ------------------------ */

static int
chassis_set(lmc_data_t *mc, int op, unsigned char *val, void *cb_data)
{
	struct bmc *b = cb_data;
	char buf[32];

	(void)mc;
	if (injected_fault(b))
		return EIO;
	switch (op) {
	case CHASSIS_CONTROL_POWER:
		write_file(b, "power", val[0] ? "1" : "0", 0);
		oplog(b, "power", val[0] ? "1" : "0");
		return 0;
	case CHASSIS_CONTROL_RESET:
		if (!powered_on(b))
			return EINVAL; /* like chassis_ctl.sh: no reset while off */
		oplog(b, "reset", "1");
		return 0;
	case CHASSIS_CONTROL_GRACEFUL_SHUTDOWN:
		write_file(b, "power", "0", 0);
		oplog(b, "shutdown", "1");
		return 0;
	case CHASSIS_CONTROL_BOOT:
		device_name(val[0], buf, sizeof(buf));
		write_file(b, "boot", buf, 0);
		oplog(b, "boot", buf);
		return 0;
	case CHASSIS_CONTROL_IDENTIFY:
		snprintf(buf, sizeof(buf), "%u %u", val[0], val[1]);
		write_file(b, "identify", buf, 0);
		oplog(b, "identify", buf);
		return 0;
	case CHASSIS_CONTROL_BOOT_INFO_ACK:
		return 0;
	default:
		return EINVAL;
	}
}

static int
chassis_get(lmc_data_t *mc, int op, unsigned char *val, void *cb_data)
{
	struct bmc *b = cb_data;

	(void)mc;
	if (injected_fault(b))
		return EIO;
	switch (op) {
	case CHASSIS_CONTROL_POWER:
		val[0] = (unsigned char)powered_on(b);
		return 0;
	case CHASSIS_CONTROL_BOOT:
		val[0] = (unsigned char)boot_device(b);
		return 0;
	default:
		return EINVAL;
	}
}

/* ---- Set/Get System Boot Options -------------------------------------------------------- */

static struct bmc *
bmc_of(lmc_data_t *mc)
{
	unsigned int i;
	for (i = 0; i < IPMI_MAX_MCS; i++)
		if (g_bmcs[i] && g_bmcs[i]->mc == mc)
			return g_bmcs[i];
	return NULL;
}

static void
reply_cc(unsigned char *rdata, unsigned int *rdata_len, unsigned char cc)
{
	rdata[0] = cc;
	*rdata_len = 1;
}

static void
load_bootflags(struct bmc *b)
{
	char buf[64];
	unsigned int v[5];

	if (read_line(b, "bootflags", buf, sizeof(buf)) == 0 &&
	    sscanf(buf, "%x %x %x %x %x", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
		for (int i = 0; i < 5; i++)
			b->param[5][i] = (unsigned char)v[i];
	} else { /* no bootflags file yet: derive from `boot` */
		memset(b->param[5], 0, 5);
		b->param[5][1] = (unsigned char)(boot_device(b) << 2);
	}
	b->param_len[5] = 5;
}

static void
set_boot_options(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                 void *cb_data)
{
	struct bmc *b = bmc_of(mc);
	unsigned int param, n;
	char text[64], dev[16];

	(void)cb_data;
	if (!b) {
		reply_cc(rdata, rdata_len, CC_INVALID_CMD);
		return;
	}
	if (msg->len < 1) {
		reply_cc(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	if (injected_fault(b)) {
		reply_cc(rdata, rdata_len, CC_UNSPECIFIED);
		return;
	}
	param = msg->data[0] & 0x7f;
	n = msg->len - 1;
	if (param >= NPARAMS) {
		reply_cc(rdata, rdata_len, CC_PARAM_UNSUPP);
		return;
	}
	if (param == 5 && n != 5) {
		reply_cc(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	if (n > PARAM_MAX)
		n = PARAM_MAX;
	memcpy(b->param[param], msg->data + 1, n);
	b->param_len[param] = (unsigned char)n;
	if (param == 5) {
		const unsigned char *f = msg->data + 1;
		snprintf(text, sizeof(text), "%02x %02x %02x %02x %02x", f[0], f[1], f[2], f[3],
		         f[4]);
		write_file(b, "bootflags", text, 0);
		device_name((f[1] >> 2) & 0xf, dev, sizeof(dev));
		write_file(b, "boot", dev, 0);
		oplog(b, "boot", dev);
	}
	reply_cc(rdata, rdata_len, CC_OK);
}

static void
get_boot_options(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                 void *cb_data)
{
	struct bmc *b = bmc_of(mc);
	unsigned int param, len;

	(void)cb_data;
	if (!b) {
		reply_cc(rdata, rdata_len, CC_INVALID_CMD);
		return;
	}
	if (msg->len < 3) {
		reply_cc(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	if (injected_fault(b)) {
		reply_cc(rdata, rdata_len, CC_UNSPECIFIED);
		return;
	}
	param = msg->data[0] & 0x7f;
	if (param >= NPARAMS) {
		reply_cc(rdata, rdata_len, CC_PARAM_UNSUPP);
		return;
	}
	if (param == 5)
		load_bootflags(b);
	len = b->param_len[param] ? b->param_len[param] : param_default_len[param];
	rdata[0] = CC_OK;
	rdata[1] = 0x01;                 /* parameter version */
	rdata[2] = (unsigned char)param; /* bit 7 clear: parameter valid / unlocked */
	memcpy(rdata + 3, b->param[param], len);
	*rdata_len = 3 + len;
}

static void
chassis_identify(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                 void *cb_data)
{
	orig_identify(mc, msg, rdata, rdata_len, cb_data);
	*rdata_len = 1; /* ipmi_sim leaves it at the buffer size on success */
}

/* ---- module entry points ---------------------------------------------------------------- */

/* Looked up with dlsym() by ipmi_sim (lanserv config.c); declared here for -Wmissing-prototypes. */
int ipmi_sim_module_print_version(sys_data_t *sys, char *options);
int ipmi_sim_module_init(sys_data_t *sys, const char *options);
int ipmi_sim_module_post_init(sys_data_t *sys);

static int
attach(lmc_data_t *mc, unsigned int ipmb, const char *dir)
{
	struct bmc *b = calloc(1, sizeof(*b));
	if (!b)
		return ENOMEM;
	if (snprintf(b->dir, sizeof(b->dir), "%s", dir) >= (int)sizeof(b->dir)) {
		free(b);
		return ENAMETOOLONG;
	}
	b->mc = mc;
	g_bmcs[ipmb] = b;
	ipmi_mc_set_chassis_control_func(mc, chassis_set, chassis_get, b);
	return 0;
}

int
ipmi_sim_module_print_version(sys_data_t *sys, char *options)
{
	(void)sys;
	(void)options;
	printf("Rackpilot chassis_plugin 1.0\n");
	return 0;
}

int
ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
	if (!options || !*options) {
		sys->log(sys, SETUP_ERROR, NULL,
		         "chassis_plugin: option (statedir or map file) missing");
		return EINVAL;
	}
	g_sys = sys;
	g_options = strdup(options);
	return g_options ? 0 : ENOMEM;
}

/* Runs after the emulator command file, when every MC exists. */
int
ipmi_sim_module_post_init(sys_data_t *sys)
{
	struct stat st;
	unsigned int i, n = 0;
	int rv;

	if (stat(g_options, &st) < 0) {
		sys->log(sys, SETUP_ERROR, NULL, "chassis_plugin: %s: %s", g_options,
		         strerror(errno));
		return errno;
	}
	if (S_ISDIR(st.st_mode)) {
		for (i = 0; i < IPMI_MAX_MCS; i++) {
			if (!sys->ipmb_addrs[i])
				continue;
			if ((rv = attach(sys->ipmb_addrs[i], i, g_options)))
				return rv;
			n++;
		}
	} else {
		FILE *f = fopen(g_options, "r");
		char line[PATH_MAX + 32], dir[PATH_MAX];
		unsigned int ipmb;

		if (!f)
			return errno;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "%x %4095s", &ipmb, dir) != 2 || ipmb >= IPMI_MAX_MCS)
				continue;
			if (!sys->ipmb_addrs[ipmb]) {
				sys->log(sys, SETUP_ERROR, NULL, "chassis_plugin: no MC at 0x%02x",
				         ipmb);
				continue;
			}
			if ((rv = attach(sys->ipmb_addrs[ipmb], ipmb, dir))) {
				fclose(f);
				return rv;
			}
			n++;
		}
		fclose(f);
	}
	if (n == 0) {
		sys->log(sys, SETUP_ERROR, NULL, "chassis_plugin: no MC attached");
		return ENOENT;
	}
	ipmi_emu_register_cmd_handler(CHASSIS_NETFN, CMD_SET_BOOT_OPTS, set_boot_options, NULL);
	ipmi_emu_register_cmd_handler(CHASSIS_NETFN, CMD_GET_BOOT_OPTS, get_boot_options, NULL);
	if (chassis_netfn_handlers && (orig_identify = chassis_netfn_handlers[CMD_IDENTIFY]))
		ipmi_emu_register_cmd_handler(CHASSIS_NETFN, CMD_IDENTIFY, chassis_identify, NULL);
	return 0;
}
