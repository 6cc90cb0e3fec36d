/*
 * dcmi_plugin.c - ipmi_sim (OpenIPMI lanserv) plug-in for the Rackpilot BMC simulator: DCMI power
 * reading and power limiting, and two hooks on the SDR that tests need.
 *
 * DCMI (DCMI 1.5: netfn 0x2C, group extension 0xDC), each BMC from files in its state directory:
 *   power_watts        "W" or "W MIN MAX AVG": Get Power Reading (cmd 0x02, mode 1). While the
 *                      chassis is off (`power` is "0") every figure reads 0 W. Without the file
 *                      the BMC says "no power measurement available" (state bit 6 clear).
 *   power_limit        "WATTS ACTIVE [ACTION [CORRECTION_MS [SAMPLING_S]]]", written by Set Power
 *                      Limit (cmd 0x04, ACTIVE kept) and Activate/Deactivate (cmd 0x05, ACTIVE
 *                      0/1); a test may write it too (defaults: 0x11 1000 1). Get Power Limit
 *                      (cmd 0x03) answers completion code 0x00 with the limit when ACTIVE is 1,
 *                      0x80 ("no active set power limit", DCMI 1.5) with the limit when it is 0,
 *                      and 0x80 with no data when the file does not exist: no limit was ever set.
 *   power_limit_range  "MIN MAX": the watts Set Power Limit accepts (default "50 4000"); outside,
 *                      completion code 0x84 (power limit out of range) and nothing changes.
 *                      Correction times over 600000 ms answer 0x85, sampling periods over 86400 s
 *                      0x89; an unknown exception action 0xCC.
 *   no_dcmi            exists: every DCMI command answers 0xC1 (invalid command), as a BMC without
 *                      DCMI does
 *   fail, delay        the chassis fault files (chassis_plugin.c): DCMI requests fail with 0xFF /
 *                      wait too
 *   ops.log            "set power_limit 450 0x11 1000 1", "set power_limit_active 1"
 * Get DCMI Capabilities Info (cmd 0x01) answers parameters 1-5 (DCMI 1.5, parameter revision 2):
 * power management supported, no rolling average periods.
 *
 * SDR hooks (ipmi_sim itself serves the SDR repository and the sensors):
 *   sdr_reads          exists: rewritten with the number of Get SDR requests this BMC answered
 *                      since it started, after each one. A test sees whether a client read the
 *                      SDR (an SDR cache in use reads none).
 *   emu.cmds           ipmi_sim emulator commands (man 5 ipmi_sim_cmd), one a line, run within
 *                      200 ms of the file appearing; then emu.cmds.err gets the errors (empty:
 *                      none) and emu.cmds becomes emu.cmds.done. bmcsim.sh sensor-add adds a
 *                      sensor to a running BMC this way (its SDR changes, as on a hot plug).
 *
 * Build (Debian: libopenipmi-dev), done by bmcsim.sh when DCMI=1:
 *   cc -O2 -Wall -fPIC -shared -o dcmi_plugin.so dcmi_plugin.c
 * lan.conf (top level, after the set_working_mc blocks):
 *   loadlib "/abs/dcmi_plugin.so" "/abs/statedir"      every MC uses this state directory
 *   loadlib "/abs/dcmi_plugin.so" "/abs/chassis.map"   file of "<ipmb> <statedir>" lines
 * and, as the last line of the emulator command file, `rp_emu_ready` (hands the plug-in the
 * emulator that emu.cmds run in).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

#define GROUP_EXT_DCMI      0xdc
#define CMD_GET_CAPABILITY  0x01
#define CMD_GET_POWER_READ  0x02
#define CMD_GET_POWER_LIMIT 0x03
#define CMD_SET_POWER_LIMIT 0x04
#define CMD_ACTIVATE_LIMIT  0x05
#define STORAGE_NETFN       0x0a
#define CMD_GET_SDR         0x23
#define CC_OK               0x00
#define CC_NO_LIMIT         0x80 /* DCMI: no (active) set power limit */
#define CC_LIMIT_RANGE      0x84 /* DCMI: power limit out of range */
#define CC_CORRECTION_RANGE 0x85 /* DCMI: correction time out of range */
#define CC_SAMPLING_RANGE   0x89 /* DCMI: statistics reporting period out of range */
#define CC_INVALID_CMD      0xc1
#define CC_BAD_LENGTH       0xc7
#define CC_INVALID_DATA     0xcc
#define CC_NOT_NOW          0xd5
#define CC_UNSPECIFIED      0xff
#define LIMIT_MIN_DEFAULT   50
#define LIMIT_MAX_DEFAULT   4000
#define CORRECTION_MAX      600000
#define SAMPLING_MAX        86400
#define TICK_MS             200

struct bmc {
	lmc_data_t *mc;
	char dir[PATH_MAX];
	unsigned long sdr_reads;
};

struct limit {
	unsigned watts;
	int active;
	unsigned action;
	unsigned correction_ms;
	unsigned sampling_s;
};

/* ipmi_sim's own tables and emulator entry point: the binary exports them (nm -D ipmi_sim), but
 * no installed header declares them. Weak, so that the plug-in still loads where they are
 * missing; the hooks that need them are then off. */
extern cmd_handler_f storage_netfn_handlers[] __attribute__((weak));
int ipmi_emu_cmd(emu_out_t *out, emu_data_t *emu, char *cmd_str) __attribute__((weak));

static sys_data_t *g_sys;
static char *g_options;
static emu_data_t *g_emu;
static cmd_handler_f g_get_sdr;
static ipmi_timer_t *g_timer;
static struct bmc *g_bmcs[IPMI_MAX_MCS];

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
		g_sys->log(g_sys, OS_ERROR, NULL, "dcmi_plugin: short write to %s", p);
	close(fd);
}

static int
exists(const struct bmc *b, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	return path_of(b, name, p, sizeof(p)) == 0 && stat(p, &st) == 0;
}

/* The `delay` and `fail` fault files; non-zero when the request must fail. */
static int
injected_fault(const struct bmc *b)
{
	char buf[64];

	if (read_line(b, "delay", buf, sizeof(buf)) == 0) {
		double secs = atof(buf);
		if (secs > 0) {
			struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
	return exists(b, "fail");
}

static int
powered_on(const struct bmc *b)
{
	char buf[16];
	return read_line(b, "power", buf, sizeof(buf)) == 0 && strcmp(buf, "1") == 0;
}

/* 1 with the limit when one was ever set, 0 when not. */
static int
load_limit(const struct bmc *b, struct limit *l)
{
	char buf[128];
	int n, action = 0x11;

	l->watts = 0;
	l->active = 0;
	l->action = 0x11;
	l->correction_ms = 1000;
	l->sampling_s = 1;
	if (read_line(b, "power_limit", buf, sizeof(buf)) < 0)
		return 0;
	n = sscanf(buf, "%u %d %i %u %u", &l->watts, &l->active, &action, &l->correction_ms,
	           &l->sampling_s);
	if (n < 2)
		return 0;
	l->active = l->active != 0;
	l->action = (unsigned)action & 0xff;
	return 1;
}

static void
save_limit(const struct bmc *b, const struct limit *l)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "%u %d 0x%02x %u %u", l->watts, l->active, l->action,
	         l->correction_ms, l->sampling_s);
	write_file(b, "power_limit", buf, 0);
}

static void
oplog(const struct bmc *b, const char *what, const char *value)
{
	char line[160];
	snprintf(line, sizeof(line), "set %s %s", what, value);
	write_file(b, "ops.log", line, 1);
}

/* ---- DCMI ------------------------------------------------------------------------------- */

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
put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)(v & 0xff);
	p[1] = (unsigned char)(v >> 8 & 0xff);
}

static void
put32(unsigned char *p, unsigned long v)
{
	put16(p, (unsigned)(v & 0xffff));
	put16(p + 2, (unsigned)(v >> 16 & 0xffff));
}

static unsigned
get16(const unsigned char *p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static unsigned long
get32(const unsigned char *p)
{
	return (unsigned long)get16(p) | (unsigned long)get16(p + 2) << 16;
}

/* The reply so far: completion code and the group extension id. */
static void
reply(unsigned char *rdata, unsigned int *rdata_len, unsigned char cc)
{
	rdata[0] = cc;
	rdata[1] = GROUP_EXT_DCMI;
	*rdata_len = 2;
}

static void
capability(const unsigned char *req, unsigned int len, unsigned char *rdata,
           unsigned int *rdata_len)
{
	static const unsigned char params[6][6] = {
	        {0},
	        /* mandatory platform capabilities (revision 1 meanings), power management,
	         * in-band KCS + primary LAN + SOL */
	        {3, 0x0f, 0x01, 0x19},
	        /* SEL entries, flags, identification (GUID), temperature monitoring (inlet,
	         * processors, baseboard), sampling period 1 s */
	        {5, 0x00, 0x00, 0x01, 0x07, 0x01},
	        /* power management device at 0x20 (IPMB channel 0, device revision 1) */
	        {2, 0x20, 0x01},
	        /* primary LAN channel 1, no secondary LAN, no serial */
	        {3, 0x01, 0xff, 0xff},
	        /* no rolling average time periods */
	        {1, 0x00},
	};
	unsigned int p;

	if (len < 2) {
		reply(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	p = req[1];
	if (p < 1 || p > 5) {
		reply(rdata, rdata_len, CC_INVALID_DATA);
		return;
	}
	reply(rdata, rdata_len, CC_OK);
	rdata[2] = 0x01; /* DCMI 1.5 */
	rdata[3] = 0x05;
	rdata[4] = 0x02; /* parameter revision */
	memcpy(rdata + 5, params[p] + 1, params[p][0]);
	*rdata_len = 5 + params[p][0];
}

static void
power_reading(const struct bmc *b, const unsigned char *req, unsigned int len, unsigned char *rdata,
              unsigned int *rdata_len)
{
	char buf[128];
	unsigned w[4] = {0, 0, 0, 0};
	int n = 0, measured;

	if (len < 2) {
		reply(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	if (req[1] != 0x01) { /* enhanced statistics: no rolling average periods here */
		reply(rdata, rdata_len, CC_INVALID_DATA);
		return;
	}
	measured = read_line(b, "power_watts", buf, sizeof(buf)) == 0 &&
	           (n = sscanf(buf, "%u %u %u %u", &w[0], &w[1], &w[2], &w[3])) >= 1;
	if (n < 4)
		w[1] = w[2] = w[3] = w[0];
	if (!measured || !powered_on(b))
		w[0] = w[1] = w[2] = w[3] = 0;
	reply(rdata, rdata_len, CC_OK);
	put16(rdata + 2, w[0]);
	put16(rdata + 4, w[1]);
	put16(rdata + 6, w[2]);
	put16(rdata + 8, w[3]);
	put32(rdata + 10, (unsigned long)time(NULL));
	put32(rdata + 14, 60000); /* statistics over the last minute */
	rdata[18] = measured ? 0x40 : 0x00;
	*rdata_len = 19;
}

static void
limit_reply(const struct limit *l, unsigned char *rdata, unsigned int *rdata_len)
{
	reply(rdata, rdata_len, l->active ? CC_OK : CC_NO_LIMIT);
	put16(rdata + 2, 0);
	rdata[4] = (unsigned char)l->action;
	put16(rdata + 5, l->watts);
	put32(rdata + 7, l->correction_ms);
	put16(rdata + 11, 0);
	put16(rdata + 13, l->sampling_s);
	*rdata_len = 15;
}

static void
get_power_limit(const struct bmc *b, unsigned char *rdata, unsigned int *rdata_len)
{
	struct limit l;

	if (!load_limit(b, &l)) {
		reply(rdata, rdata_len, CC_NO_LIMIT);
		return;
	}
	limit_reply(&l, rdata, rdata_len);
}

static void
set_power_limit(const struct bmc *b, const unsigned char *req, unsigned int len,
                unsigned char *rdata, unsigned int *rdata_len)
{
	struct limit l;
	unsigned min = LIMIT_MIN_DEFAULT, max = LIMIT_MAX_DEFAULT, action, watts;
	unsigned long correction, sampling;
	char buf[128];

	if (len != 15) {
		reply(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	action = req[4];
	watts = get16(req + 5);
	correction = get32(req + 7);
	sampling = get16(req + 13);
	if (read_line(b, "power_limit_range", buf, sizeof(buf)) == 0 &&
	    sscanf(buf, "%u %u", &min, &max) != 2) {
		min = LIMIT_MIN_DEFAULT;
		max = LIMIT_MAX_DEFAULT;
	}
	if (action > 0x11) {
		reply(rdata, rdata_len, CC_INVALID_DATA);
		return;
	}
	if (watts < min || watts > max) {
		reply(rdata, rdata_len, CC_LIMIT_RANGE);
		return;
	}
	if (correction > CORRECTION_MAX) {
		reply(rdata, rdata_len, CC_CORRECTION_RANGE);
		return;
	}
	if (sampling > SAMPLING_MAX) {
		reply(rdata, rdata_len, CC_SAMPLING_RANGE);
		return;
	}
	load_limit(b, &l); /* keeps ACTIVE: Set does not activate */
	l.watts = watts;
	l.action = action;
	l.correction_ms = (unsigned)correction;
	l.sampling_s = (unsigned)sampling;
	save_limit(b, &l);
	snprintf(buf, sizeof(buf), "%u 0x%02x %u %u", l.watts, l.action, l.correction_ms,
	         l.sampling_s);
	oplog(b, "power_limit", buf);
	reply(rdata, rdata_len, CC_OK);
}

static void
activate_limit(const struct bmc *b, const unsigned char *req, unsigned int len,
               unsigned char *rdata, unsigned int *rdata_len)
{
	struct limit l;
	int set;

	if (len < 2) {
		reply(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	if (req[1] > 1) {
		reply(rdata, rdata_len, CC_INVALID_DATA);
		return;
	}
	set = load_limit(b, &l);
	if (!set && req[1] == 1) {
		reply(rdata, rdata_len, CC_NOT_NOW); /* nothing to activate */
		return;
	}
	if (set) {
		l.active = req[1];
		save_limit(b, &l);
	}
	oplog(b, "power_limit_active", req[1] ? "1" : "0");
	reply(rdata, rdata_len, CC_OK);
}

static void
dcmi(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len, void *cb_data)
{
	struct bmc *b = bmc_of(mc);

	(void)cb_data;
	if (!b || exists(b, "no_dcmi")) {
		rdata[0] = CC_INVALID_CMD;
		*rdata_len = 1;
		return;
	}
	if (injected_fault(b)) {
		reply(rdata, rdata_len, CC_UNSPECIFIED);
		return;
	}
	switch (msg->cmd) {
	case CMD_GET_CAPABILITY:
		capability(msg->data, msg->len, rdata, rdata_len);
		break;
	case CMD_GET_POWER_READ:
		power_reading(b, msg->data, msg->len, rdata, rdata_len);
		break;
	case CMD_GET_POWER_LIMIT:
		get_power_limit(b, rdata, rdata_len);
		break;
	case CMD_SET_POWER_LIMIT:
		set_power_limit(b, msg->data, msg->len, rdata, rdata_len);
		break;
	case CMD_ACTIVATE_LIMIT:
		activate_limit(b, msg->data, msg->len, rdata, rdata_len);
		break;
	default:
		rdata[0] = CC_INVALID_CMD;
		*rdata_len = 1;
	}
}

/* ---- SDR hooks -------------------------------------------------------------------------- */

static void
get_sdr(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len, void *cb_data)
{
	struct bmc *b = bmc_of(mc);
	char p[PATH_MAX], line[32];
	int fd, n;

	g_get_sdr(mc, msg, rdata, rdata_len, cb_data);
	if (!b)
		return;
	b->sdr_reads++;
	/* Without O_CREAT: one failed open() for BMCs that nobody counts. */
	if (path_of(b, "sdr_reads", p, sizeof(p)) < 0 || (fd = open(p, O_WRONLY | O_TRUNC)) < 0)
		return;
	n = snprintf(line, sizeof(line), "%lu\n", b->sdr_reads);
	if (write(fd, line, (size_t)n) != n)
		g_sys->log(g_sys, OS_ERROR, NULL, "dcmi_plugin: short write to %s", p);
	close(fd);
}

struct errbuf {
	emu_out_t out;
	char text[2048];
	size_t len;
};

static void
collect(emu_out_t *out, char *format, ...)
{
	struct errbuf *e = out->data;
	va_list ap;
	int n;

	if (e->len >= sizeof(e->text) - 1)
		return;
	va_start(ap, format);
	n = vsnprintf(e->text + e->len, sizeof(e->text) - e->len, format, ap);
	va_end(ap);
	if (n > 0)
		e->len += (size_t)n < sizeof(e->text) - e->len ? (size_t)n
		                                               : sizeof(e->text) - e->len - 1;
}

/* Run <dir>/emu.cmds (see the top of the file). */
static void
run_cmds(const struct bmc *b)
{
	char p[PATH_MAX], done[PATH_MAX], err[PATH_MAX], line[8192];
	struct errbuf e = {.out = {.eprintf = collect}};
	FILE *f;
	int rv, fd;

	e.out.data = &e;
	if (path_of(b, "emu.cmds", p, sizeof(p)) < 0 ||
	    path_of(b, "emu.cmds.done", done, sizeof(done)) < 0 || (f = fopen(p, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		if (!g_emu || !ipmi_emu_cmd) {
			collect(&e.out,
			        "no emulator handle (rp_emu_ready missing from the emu file)\n");
			break;
		}
		if ((rv = ipmi_emu_cmd(&e.out, g_emu, line)) != 0)
			collect(&e.out, "error %d\n", rv);
	}
	fclose(f);
	/* The emulator prints nothing but errors for these commands. */
	if (path_of(b, "emu.cmds.err", err, sizeof(err)) == 0 &&
	    (fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0) {
		if (e.len && write(fd, e.text, e.len) != (ssize_t)e.len)
			g_sys->log(g_sys, OS_ERROR, NULL, "dcmi_plugin: short write to %s", err);
		close(fd);
	}
	rename(p, done);
}

static void
tick(void *cb_data)
{
	struct timeval tv = {0, TICK_MS * 1000};
	unsigned int i;

	(void)cb_data;
	for (i = 0; i < IPMI_MAX_MCS; i++)
		if (g_bmcs[i] && exists(g_bmcs[i], "emu.cmds"))
			run_cmds(g_bmcs[i]);
	g_sys->start_timer(g_timer, &tv);
}

static int
emu_ready(emu_out_t *out, emu_data_t *emu, lmc_data_t *mc, char **toks)
{
	(void)out;
	(void)mc;
	(void)toks;
	g_emu = emu;
	return 0;
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
	return 0;
}

int
ipmi_sim_module_print_version(sys_data_t *sys, char *options)
{
	(void)sys;
	(void)options;
	printf("Rackpilot dcmi_plugin 1.0\n");
	return 0;
}

int
ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
	if (!options || !*options) {
		sys->log(sys, SETUP_ERROR, NULL,
		         "dcmi_plugin: option (statedir or map file) missing");
		return EINVAL;
	}
	g_sys = sys;
	g_options = strdup(options);
	if (!g_options)
		return ENOMEM;
	/* Before the emulator command file is read, which ends with this command. */
	return ipmi_emu_add_cmd("rp_emu_ready", NOMC, emu_ready);
}

/* Runs after the emulator command file, when every MC exists. */
int
ipmi_sim_module_post_init(sys_data_t *sys)
{
	struct timeval tv = {0, TICK_MS * 1000};
	struct stat st;
	unsigned int i, n = 0;
	int rv;

	if (stat(g_options, &st) < 0) {
		sys->log(sys, SETUP_ERROR, NULL, "dcmi_plugin: %s: %s", g_options, strerror(errno));
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
				sys->log(sys, SETUP_ERROR, NULL, "dcmi_plugin: no MC at 0x%02x",
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
		sys->log(sys, SETUP_ERROR, NULL, "dcmi_plugin: no MC attached");
		return ENOENT;
	}
	ipmi_emu_register_group_extension_handler(GROUP_EXT_DCMI, dcmi, NULL);
	if (storage_netfn_handlers && storage_netfn_handlers[CMD_GET_SDR]) {
		g_get_sdr = storage_netfn_handlers[CMD_GET_SDR];
		ipmi_emu_register_cmd_handler(STORAGE_NETFN, CMD_GET_SDR, get_sdr, NULL);
	}
	if ((rv = sys->alloc_timer(sys, tick, NULL, &g_timer)))
		return rv;
	sys->start_timer(g_timer, &tv);
	return 0;
}
