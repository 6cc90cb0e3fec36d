/*
 * mc_plugin.c - ipmi_sim (OpenIPMI lanserv 2.0.33) plug-in for the Rackpilot BMC simulator: user
 * passwords as a real BMC keeps them, BMC Cold Reset, and fixes for three ipmi_sim bugs that
 * break freeipmi clients. Loaded by bmcsim.sh with MC_PLUGIN=1 (and always with SOL=1).
 *
 * Set User Password (App netfn 0x06, cmd 0x47), replacing ipmi_sim's handler, which ignores the
 * 20-byte flag (it stores 16 bytes of a 20-byte password), answers "test password" with success
 * whatever was sent, and persists users only from its 1-second tick (a stop right after a change
 * forgets the change). Here:
 *   - a 16-byte password is stored zero-padded to 20 bytes, a 20-byte one (bit 7 of the user id
 *     byte set, 22 request bytes) whole; both count for new RMCP+ sessions at once, open sessions
 *     stay up (as on ipmi_sim's own handler and on most BMCs)
 *   - password_max "16": the BMC takes 16-byte passwords only; a 20-byte request answers 0xC7
 *     (request data length invalid, what an IPMI 1.5 BMC answers). "20" (default): both sizes.
 *     Default for BMCs without the file: env BMC_PASSWORD_MAX (16 or 20, else 20).
 *   - test password (operation 3): 0x00 match, 0x80 wrong password, 0x81 wrong size (a 16-byte
 *     test of a password that needs 20 bytes, or a 20-byte test on a 16-only BMC: 0xC7 as above)
 *   - requests shorter than 18 (22 with the 20-byte flag) bytes: 0xC7; user 0: 0xCC
 *   - the user table is written to ipmi_sim's persistence (sim/.../users.mcNN) at once
 *   - password            user 2's password as text (bytes up to the first NUL, then "\n"),
 *                         rewritten on every change. At start: if it exists, it becomes user 2's
 *                         password (a test may seed or edit it while the BMC is stopped); if not,
 *                         it is created with the password the BMC starts with.
 *   - ops.log             "set password <user> 16|20", "set user_enable <user> 0|1"
 *
 * BMC Cold Reset (App netfn 0x06, cmd 0x02; ipmi_sim itself answers 0xC1 "invalid command"):
 * the BMC answers completion code 0x00, then "reboots": every session on its LAN channel is
 * closed (SOL deactivated), and its UDP port drops every packet, silently (a socket filter; the
 * port stays bound, nothing is processed or answered) for the outage, then answers again. Power
 * and boot state, identity, users and the SEL are untouched; other BMCs of the same ipmi_sim
 * process (shared mode) are not affected.
 *   reset_outage          seconds (decimal, e.g. "0.5" or "3") the BMC stays silent; read at
 *                         each reset. Default: env BMC_RESET_OUTAGE, else 3.
 *   resets                number of cold resets answered, rewritten at each (the count goes on
 *                         from the file's value, so it counts across restarts; remove to zero)
 *   ops.log               "set cold_reset 1" when the outage starts
 *   fail                  exists: Cold Reset answers 0xFF and nothing happens
 * Warm Reset (cmd 0x03) stays ipmi_sim's: 0xC1.
 *
 * Fixes of ipmi_sim 2.0.33 bugs (no state files):
 *   - Chassis Identify (chassis netfn 0x00, cmd 0x04) answers CC 0x00 followed by ~35 bytes of
 *     stack garbage (the handler never sets the response length). ipmitool ignores them,
 *     libfreeipmi rejects the response, retransmits (each retransmission identifies again) and
 *     fails with "session timeout". The plug-in answers the completion code alone.
 *   - Get Channel Payload Support (App 0x4E) for channel 0x0E ("this channel", what libfreeipmi
 *     and libipmiconsole send) dereferences a NULL channel and crashes ipmi_sim (SIGSEGV) once a
 *     `sol` line is configured. The plug-in maps 0x0E to the channel the request came in on, and
 *     answers 0xCC for a channel that doesn't exist.
 *   - Activate Payload (App 0x48) reports an outbound payload size of 16384 (sizeof its buffer);
 *     libipmiconsole rejects anything over 259 ("BMC Implementation", errnum 23). ipmi_sim sends
 *     at most 255 characters + 4 header bytes per SOL packet, so the plug-in reports 259.
 *   - SOL packet sequence numbers: ipmi_sim keeps the number of the last packet it accepted
 *     across SOL activations, so when a new SOL session's first packet with characters carries
 *     the same number (clients start at 1 each time), ipmi_sim takes it for a retransmission:
 *     it acks it and throws the characters away. Here each SOL session's sequence numbers are
 *     rotated (by 0 or 1, both ways, acks included) so that its first packet is new to ipmi_sim.
 *
 * Build (Debian: libopenipmi-dev), done by bmcsim.sh:
 *   cc -O2 -Wall -fPIC -shared -o mc_plugin.so mc_plugin.c
 * lan.conf (top level, after the set_working_mc blocks):
 *   loadlib "/abs/mc_plugin.so" "/abs/statedir"      every MC uses this state directory
 *   loadlib "/abs/mc_plugin.so" "/abs/chassis.map"   file of "<ipmb> <statedir>" lines
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

#define APP_NETFN            0x06
#define CHASSIS_NETFN        0x00
#define CMD_COLD_RESET       0x02
#define CMD_CHASSIS_IDENTIFY 0x04
#define CMD_SET_USER_PW      0x47
#define CMD_ACTIVATE_PAYLOAD 0x48
#define CMD_PAYLOAD_SUPPORT  0x4e
#define CC_OK                0x00
#define CC_PW_WRONG          0x80
#define CC_PW_WRONG_SIZE     0x81
#define CC_INVALID_CMD       0xc1
#define CC_BAD_LENGTH        0xc7
#define CC_INVALID_DATA      0xcc
#define CC_UNSPECIFIED       0xff
#define MEDIUM_8023_LAN      4
#define SOL_PAYLOAD_MAX      259 /* 255 characters + 4 header bytes (IPMI 2.0 table 15-2) */

struct bmc {
	lmc_data_t *mc;
	unsigned int ipmb;
	char dir[PATH_MAX];
	lanserv_data_t *lan; /* its LAN channel */
	int lan_fd;          /* the UDP socket of that channel */
	int down;            /* in a cold-reset outage */
	ipmi_timer_t *start_timer, *end_timer;
	/* SOL sequence number rotation (see the top) */
	void (*orig_return_rsp)(channel_t *chan, msg_t *msg, rsp_msg_t *rsp);
	uint32_t sol_sid;      /* session that activated SOL last */
	int sol_fresh;         /* no packet with a sequence number seen from it yet */
	unsigned int sol_off;  /* rotation for that session: 0 or 1 */
	unsigned int sol_last; /* what ipmi_sim took as the last accepted packet number */
};

/* ipmi_sim's handler tables: the binary exports them (nm -D ipmi_sim), no header declares them.
 * Weak, so that the plug-in still loads without them; the wrappers are then off. */
extern cmd_handler_f app_netfn_handlers[] __attribute__((weak));
extern cmd_handler_f chassis_netfn_handlers[] __attribute__((weak));
/* libIPMIlanserv's RMCP+ payload table (exported, in no header); [1] is SOL */
extern ipmi_payload_handler_cb payload_handlers[] __attribute__((weak));
#define PAYLOAD_SOL 1

static sys_data_t *g_sys;
static char *g_options;
static struct bmc *g_bmcs[IPMI_MAX_MCS];
static cmd_handler_f orig_set_user_pw, orig_identify, orig_activate, orig_payload_support;
static ipmi_payload_handler_cb orig_sol_payload;
static unsigned int g_pw_max = 20;
static double g_outage = 3.0;

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
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Replace NAME with TEXT + "\n" (atomically: a reader never sees a half-written file). */
static void
write_file(const struct bmc *b, const char *name, const char *text, size_t len)
{
	char p[PATH_MAX], tmp[PATH_MAX + 8];
	int fd;

	if (path_of(b, name, p, sizeof(p)) < 0 ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp", p) >= (int)sizeof(tmp))
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	if (write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1) {
		g_sys->log(g_sys, OS_ERROR, NULL, "mc_plugin: short write to %s", tmp);
		close(fd);
		unlink(tmp);
		return;
	}
	close(fd);
	rename(tmp, p);
}

static void
oplog(const struct bmc *b, const char *line)
{
	char p[PATH_MAX];
	int fd;

	if (path_of(b, "ops.log", p, sizeof(p)) < 0)
		return;
	fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, strlen(line)) < 0 || write(fd, "\n", 1) < 0)
		g_sys->log(g_sys, OS_ERROR, NULL, "mc_plugin: cannot append to %s", p);
	close(fd);
}

static int
exists(const struct bmc *b, const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	return path_of(b, name, p, sizeof(p)) == 0 && stat(p, &st) == 0;
}

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

/* ---- Set User Password ------------------------------------------------------------------ */

static unsigned int
pw_max(const struct bmc *b)
{
	char buf[16];
	if (read_line(b, "password_max", buf, sizeof(buf)) == 0)
		return atoi(buf) == 16 ? 16 : 20;
	return g_pw_max;
}

static void
save_password_file(const struct bmc *b, const unsigned char *pw)
{
	write_file(b, "password", (const char *)pw, strnlen((const char *)pw, 20));
}

static void
set_user_password(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                  void *cb_data)
{
	struct bmc *b = bmc_of(mc);
	unsigned int user, op, is20, size, need, i;
	user_t *users;
	char line[64];

	if (!b || !orig_set_user_pw) {
		if (orig_set_user_pw)
			orig_set_user_pw(mc, msg, rdata, rdata_len, cb_data);
		else
			reply_cc(rdata, rdata_len, CC_INVALID_CMD);
		return;
	}
	if (msg->len < 2) {
		reply_cc(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	user = msg->data[0] & 0x3f;
	is20 = msg->data[0] & 0x80;
	op = msg->data[1] & 0x03;
	if (user == 0 || user > MAX_USERS) {
		reply_cc(rdata, rdata_len, CC_INVALID_DATA);
		return;
	}
	users = g_sys->mc_get_users(mc);

	if (op == 0 || op == 1) { /* disable / enable user: ipmi_sim's own */
		orig_set_user_pw(mc, msg, rdata, rdata_len, cb_data);
		if (rdata[0] == CC_OK) {
			write_persist_users(g_sys);
			snprintf(line, sizeof(line), "set user_enable %u %u", user, op);
			oplog(b, line);
		}
		return;
	}

	size = is20 ? 20 : 16;
	need = 2 + size;
	if (is20 && pw_max(b) < 20) {
		reply_cc(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}
	if (msg->len < need) {
		reply_cc(rdata, rdata_len, CC_BAD_LENGTH);
		return;
	}

	if (op == 3) { /* test password */
		const unsigned char *pw = users[user].pw, *t = msg->data + 2;
		if (!is20) {
			for (i = 16; i < 20; i++)
				if (pw[i]) {
					reply_cc(rdata, rdata_len, CC_PW_WRONG_SIZE);
					return;
				}
		}
		reply_cc(rdata, rdata_len, memcmp(pw, t, size) ? CC_PW_WRONG : CC_OK);
		return;
	}

	/* op 2: let ipmi_sim store it (and flag the user table changed), then complete the 20
	 * bytes ourselves: zero-padded (16) or all of them (20) */
	orig_set_user_pw(mc, msg, rdata, rdata_len, cb_data);
	if (rdata[0] != CC_OK)
		return;
	memset(users[user].pw, 0, sizeof(users[user].pw));
	memcpy(users[user].pw, msg->data + 2, size);
	write_persist_users(g_sys);
	if (user == 2)
		save_password_file(b, users[user].pw);
	snprintf(line, sizeof(line), "set password %u %u", user, size);
	oplog(b, line);
}

/* At start: `password` (if it exists) becomes user 2's password; else it is created. */
static void
load_password(struct bmc *b)
{
	char p[PATH_MAX];
	unsigned char pw[32];
	user_t *users = g_sys->mc_get_users(b->mc);
	ssize_t n;
	int fd;

	if (path_of(b, "password", p, sizeof(p)) < 0)
		return;
	fd = open(p, O_RDONLY);
	if (fd < 0) {
		save_password_file(b, users[2].pw);
		return;
	}
	memset(pw, 0, sizeof(pw));
	n = read(fd, pw, sizeof(pw) - 1);
	close(fd);
	if (n < 0)
		return;
	if (n > 0 && pw[n - 1] == '\n')
		pw[--n] = '\0';
	if (n > 20) {
		g_sys->log(g_sys, SETUP_ERROR, NULL, "mc_plugin: %s: longer than 20 bytes, ignored",
		           p);
		return;
	}
	if (memcmp(users[2].pw, pw, 20) == 0)
		return;
	if (orig_set_user_pw) { /* through ipmi_sim's handler: it flags the table for persistence */
		unsigned char data[22], rdata[8];
		unsigned int rlen = sizeof(rdata);
		msg_t m;

		memset(&m, 0, sizeof(m));
		data[0] = 2 | 0x80;
		data[1] = 2;
		memcpy(data + 2, pw, 20);
		m.data = data;
		m.len = 22;
		orig_set_user_pw(b->mc, &m, rdata, &rlen, NULL);
	}
	memcpy(users[2].pw, pw, 20);
	write_persist_users(g_sys);
}

/* ---- Cold Reset -------------------------------------------------------------------------- */

static double
outage_seconds(const struct bmc *b)
{
	char buf[32];
	if (read_line(b, "reset_outage", buf, sizeof(buf)) == 0 && buf[0])
		return atof(buf);
	return g_outage;
}

static void
drain(int fd)
{
	unsigned char buf[512];
	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
}

static void
outage_start(void *cb_data)
{
	struct bmc *b = cb_data;
	struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
	struct sock_fprog prog = {1, &drop};
	struct timeval tv;
	char buf[32];
	double secs = outage_seconds(b);
	unsigned long n = 0;
	int i;

	if (b->lan_fd >= 0) {
		if (setsockopt(b->lan_fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
			g_sys->log(g_sys, OS_ERROR, NULL, "mc_plugin: SO_ATTACH_FILTER: %s",
			           strerror(errno));
		drain(b->lan_fd); /* what arrived before the "reboot" is lost too */
	}
	b->down = 1;
	/* close every session of this LAN channel, through ipmi_sim's own timeout path: it runs
	 * the closers (SOL deactivation) and fixes the session counts */
	if (b->lan) {
		for (i = 1; i <= MAX_SESSIONS; i++)
			if (b->lan->sessions[i].active)
				b->lan->sessions[i].time_left = 0;
		if (b->lan->tick_handler.handler)
			b->lan->tick_handler.handler(b->lan->tick_handler.info, 0);
	}
	if (read_line(b, "resets", buf, sizeof(buf)) == 0)
		n = strtoul(buf, NULL, 10);
	snprintf(buf, sizeof(buf), "%lu", n + 1);
	write_file(b, "resets", buf, strlen(buf));
	oplog(b, "set cold_reset 1");

	if (secs < 0)
		secs = 0;
	tv.tv_sec = (time_t)secs;
	tv.tv_usec = (long)((secs - (double)tv.tv_sec) * 1e6);
	g_sys->start_timer(b->end_timer, &tv);
}

static void
outage_end(void *cb_data)
{
	struct bmc *b = cb_data;
	int dummy = 0;

	if (b->lan_fd >= 0) {
		drain(b->lan_fd);
		if (setsockopt(b->lan_fd, SOL_SOCKET, SO_DETACH_FILTER, &dummy, sizeof(dummy)) < 0)
			g_sys->log(g_sys, OS_ERROR, NULL, "mc_plugin: SO_DETACH_FILTER: %s",
			           strerror(errno));
	}
	b->down = 0;
}

static void
cold_reset(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len, void *cb_data)
{
	struct bmc *b = bmc_of(mc);
	struct timeval now = {0, 0};

	(void)msg;
	(void)cb_data;
	if (!b || !b->lan || b->lan_fd < 0) {
		reply_cc(rdata, rdata_len, CC_INVALID_CMD);
		return;
	}
	if (exists(b, "fail")) {
		reply_cc(rdata, rdata_len, CC_UNSPECIFIED);
		return;
	}
	reply_cc(rdata, rdata_len, CC_OK);
	/* the reply goes out when this handler returns; the "reboot" starts right after */
	if (!b->down)
		g_sys->start_timer(b->start_timer, &now);
}

/* ---- bug fixes ---------------------------------------------------------------------------- */

static void
chassis_identify(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                 void *cb_data)
{
	orig_identify(mc, msg, rdata, rdata_len, cb_data);
	*rdata_len = 1; /* ipmi_sim leaves it at the buffer size on success */
}

static void
payload_support(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                void *cb_data)
{
	channel_t **chans = g_sys->mc_get_channelset(mc);
	unsigned int ch;

	if (msg->len >= 1) {
		ch = msg->data[0] & 0x0f;
		if (ch == 0x0e)
			ch = msg->orig_channel ? msg->orig_channel->channel_num : msg->channel;
		if (ch > 0x0f || !chans || !chans[ch]) {
			reply_cc(rdata, rdata_len, CC_INVALID_DATA);
			return;
		}
		msg->data[0] = (unsigned char)((msg->data[0] & 0xf0) | ch);
	}
	orig_payload_support(mc, msg, rdata, rdata_len, cb_data);
}

static struct bmc *
bmc_of_lan(const void *lan)
{
	unsigned int i;
	for (i = 0; i < IPMI_MAX_MCS; i++)
		if (g_bmcs[i] && g_bmcs[i]->lan == lan)
			return g_bmcs[i];
	return NULL;
}

static unsigned int
rot(unsigned int seq, unsigned int off)
{
	return (seq - 1 + off) % 15 + 1;
}

/* SOL packets from the client: rotate the packet sequence number of the active session */
static void
sol_payload(lanserv_data_t *lan, msg_t *msg)
{
	struct bmc *b = bmc_of_lan(lan);
	unsigned int seq;

	if (b && b->orig_return_rsp && msg->sid == b->sol_sid && msg->len >= 4 &&
	    (seq = msg->data[0] & 0x0f) != 0) {
		if (b->sol_fresh) {
			b->sol_off = seq == b->sol_last ? 1 : 0;
			b->sol_fresh = 0;
		}
		seq = rot(seq, b->sol_off);
		msg->data[0] = (unsigned char)((msg->data[0] & 0xf0) | seq);
		b->sol_last = seq;
	}
	orig_sol_payload(lan, msg);
}

/* ... and the acks ipmi_sim sends back: the client's own numbers */
static void
return_rsp(channel_t *chan, msg_t *msg, rsp_msg_t *rsp)
{
	struct bmc *b = bmc_of_lan(chan->chan_info);

	if (b && msg && msg->rmcpp.payload == PAYLOAD_SOL && msg->sid == b->sol_sid && b->sol_off &&
	    rsp->data_len >= 2 && (rsp->data[1] & 0x0f) != 0)
		rsp->data[1] = (unsigned char)((rsp->data[1] & 0xf0) |
		                               rot(rsp->data[1] & 0x0f, 15 - b->sol_off));
	b->orig_return_rsp(chan, msg, rsp);
}

static void
activate_payload(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                 void *cb_data)
{
	struct bmc *b = bmc_of(mc);

	orig_activate(mc, msg, rdata, rdata_len, cb_data);
	if (b && rdata[0] == CC_OK && msg->len >= 2 && (msg->data[0] & 0x3f) == PAYLOAD_SOL &&
	    (msg->data[1] & 0x0f) == 1) {
		b->sol_sid = msg->sid;
		b->sol_fresh = 1;
		b->sol_off = 0;
	}
	if (rdata[0] == CC_OK && *rdata_len >= 9) {
		unsigned int in = rdata[5] | rdata[6] << 8, out = rdata[7] | rdata[8] << 8;
		if (in > SOL_PAYLOAD_MAX)
			in = SOL_PAYLOAD_MAX;
		if (out > SOL_PAYLOAD_MAX)
			out = SOL_PAYLOAD_MAX;
		rdata[5] = in & 0xff;
		rdata[6] = in >> 8;
		rdata[7] = out & 0xff;
		rdata[8] = out >> 8;
	}
}

/* ---- set-up --------------------------------------------------------------------------------- */

/* The UDP socket bound to the LAN channel's address: found among our own fds. */
static int
find_lan_fd(const lanserv_data_t *lan)
{
	const struct sockaddr_in *want = &lan->lan_addr.addr.s_ipsock.s_addr4;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL && found < 0) {
		struct sockaddr_in a;
		socklen_t alen = sizeof(a);
		int fd, type = 0;
		socklen_t tlen = sizeof(type);

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		fd = atoi(e->d_name);
		if (fd == dirfd(d))
			continue;
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_DGRAM)
			continue;
		if (getsockname(fd, (struct sockaddr *)&a, &alen) < 0 || a.sin_family != AF_INET)
			continue;
		if (a.sin_port == want->sin_port && a.sin_addr.s_addr == want->sin_addr.s_addr)
			found = fd;
	}
	closedir(d);
	return found;
}

static int
attach(lmc_data_t *mc, unsigned int ipmb, const char *dir)
{
	struct bmc *b = calloc(1, sizeof(*b));
	channel_t **chans = g_sys->mc_get_channelset(mc);
	unsigned int i;
	int rv;

	if (!b)
		return ENOMEM;
	if (snprintf(b->dir, sizeof(b->dir), "%s", dir) >= (int)sizeof(b->dir)) {
		free(b);
		return ENAMETOOLONG;
	}
	b->mc = mc;
	b->ipmb = ipmb;
	b->lan_fd = -1;
	for (i = 0; chans && i < IPMI_MAX_CHANNELS; i++) {
		if (chans[i] && chans[i]->medium_type == MEDIUM_8023_LAN && chans[i]->chan_info) {
			b->lan = chans[i]->chan_info;
			break;
		}
	}
	if (b->lan && b->lan->lan_addr_set)
		b->lan_fd = find_lan_fd(b->lan);
	if (!b->lan || b->lan_fd < 0)
		g_sys->log(g_sys, SETUP_ERROR, NULL,
		           "mc_plugin: MC 0x%02x: no LAN socket found, cold reset disabled", ipmb);
	if ((rv = g_sys->alloc_timer(g_sys, outage_start, b, &b->start_timer)) ||
	    (rv = g_sys->alloc_timer(g_sys, outage_end, b, &b->end_timer))) {
		free(b);
		return rv;
	}
	g_bmcs[ipmb] = b;
	return 0;
}

/* Looked up with dlsym() by ipmi_sim (lanserv config.c); declared here for -Wmissing-prototypes. */
int ipmi_sim_module_print_version(sys_data_t *sys, char *options);
int ipmi_sim_module_init(sys_data_t *sys, const char *options);
int ipmi_sim_module_post_init(sys_data_t *sys);

int
ipmi_sim_module_print_version(sys_data_t *sys, char *options)
{
	(void)sys;
	(void)options;
	printf("Rackpilot mc_plugin 1.0\n");
	return 0;
}

int
ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
	const char *e;

	if (!options || !*options) {
		sys->log(sys, SETUP_ERROR, NULL,
		         "mc_plugin: option (statedir or map file) missing");
		return EINVAL;
	}
	g_sys = sys;
	if ((e = getenv("BMC_PASSWORD_MAX")) && atoi(e) == 16)
		g_pw_max = 16;
	if ((e = getenv("BMC_RESET_OUTAGE")) && *e)
		g_outage = atof(e);
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

	if (!app_netfn_handlers || !chassis_netfn_handlers) {
		sys->log(sys, SETUP_ERROR, NULL, "mc_plugin: ipmi_sim exports no handler tables");
		return ENOSYS;
	}
	orig_set_user_pw = app_netfn_handlers[CMD_SET_USER_PW];
	orig_activate = app_netfn_handlers[CMD_ACTIVATE_PAYLOAD];
	orig_payload_support = app_netfn_handlers[CMD_PAYLOAD_SUPPORT];
	orig_identify = chassis_netfn_handlers[CMD_CHASSIS_IDENTIFY];

	if (stat(g_options, &st) < 0) {
		sys->log(sys, SETUP_ERROR, NULL, "mc_plugin: %s: %s", g_options, strerror(errno));
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
				sys->log(sys, SETUP_ERROR, NULL, "mc_plugin: no MC at 0x%02x",
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
		sys->log(sys, SETUP_ERROR, NULL, "mc_plugin: no MC attached");
		return ENOENT;
	}
	for (i = 0; i < IPMI_MAX_MCS; i++)
		if (g_bmcs[i])
			load_password(g_bmcs[i]);

	ipmi_emu_register_cmd_handler(APP_NETFN, CMD_SET_USER_PW, set_user_password, NULL);
	ipmi_emu_register_cmd_handler(APP_NETFN, CMD_COLD_RESET, cold_reset, NULL);
	if (orig_activate)
		ipmi_emu_register_cmd_handler(APP_NETFN, CMD_ACTIVATE_PAYLOAD, activate_payload,
		                              NULL);
	if (orig_payload_support)
		ipmi_emu_register_cmd_handler(APP_NETFN, CMD_PAYLOAD_SUPPORT, payload_support,
		                              NULL);
	if (orig_identify)
		ipmi_emu_register_cmd_handler(CHASSIS_NETFN, CMD_CHASSIS_IDENTIFY, chassis_identify,
		                              NULL);
	if (payload_handlers && (orig_sol_payload = payload_handlers[PAYLOAD_SOL])) {
		for (i = 0; i < IPMI_MAX_MCS; i++) {
			struct bmc *b = g_bmcs[i];
			if (b && b->lan && b->lan->channel.return_rsp) {
				b->orig_return_rsp = b->lan->channel.return_rsp;
				b->lan->channel.return_rsp = return_rsp;
			}
		}
		payload_handlers[PAYLOAD_SOL] = sol_payload;
	}
	return 0;
}
