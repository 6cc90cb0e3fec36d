/*
 * sol_session_plugin.c - ipmi_sim (OpenIPMI lanserv 2.0.33) plug-in for the e2e rack: a SOL
 * packet counts as activity on its session, as the IPMI spec has it.
 *
 * ipmi_sim closes a session when nothing came on it for 30 s, but only an IPMI message resets
 * that clock (lanserv.c, handle_normal_session), not a SOL packet. libipmiconsole sends its
 * keepalive (an IPMI message) only after 20 s without any traffic, SOL acks included. So a
 * console that prints something at least every 20 s (a booting VM) has its session dropped by
 * ipmi_sim 30 s after SOL came up: the output stops, libipmiconsole notices nothing until its
 * own session timeout (60 s), and closing it then (rackpilotd's shutdown) waits ~30 s for
 * answers that never come. Measured: a line a second on the serial port, SOL output ends 29 s
 * after SOL came up.
 *
 * Here every SOL packet that arrives on an active session sets that session's time left back
 * to the channel's session timeout, then goes on to the SOL handler that was there before
 * (ipmi_sim's, or tests/ipmi/mc_plugin.c's; either plug-in may load first).
 *
 * Build (Debian: libopenipmi-dev), done by rack.sh:
 *   cc -O2 -Wall -fPIC -shared -o sol_session_plugin.so sol_session_plugin.c
 * lan.conf (top level):
 *   loadlib "/abs/sol_session_plugin.so" "e2e"
 */
#include <errno.h>
#include <stdio.h>

#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

/* libIPMIlanserv's RMCP+ payload table (exported, in no header); [1] is SOL */
extern ipmi_payload_handler_cb payload_handlers[] __attribute__((weak));
#define PAYLOAD_SOL 1

static ipmi_payload_handler_cb next_sol;

static void
sol_payload(lanserv_data_t *lan, msg_t *msg)
{
	/* lanserv.c makes a session id as (seq << (SESSION_BITS_REQ + 1)) | (index << 1) */
	unsigned int i = (msg->sid >> 1) & ((1u << SESSION_BITS_REQ) - 1);

	if (msg->sid != 0 && i >= 1 && i <= MAX_SESSIONS && lan->sessions[i].active &&
	    lan->sessions[i].sid == msg->sid)
		lan->sessions[i].time_left = lan->default_session_timeout;
	next_sol(lan, msg);
}

/* Looked up with dlsym() by ipmi_sim (lanserv config.c). */
int ipmi_sim_module_print_version(sys_data_t *sys, char *options);
int ipmi_sim_module_init(sys_data_t *sys, const char *options);
int ipmi_sim_module_post_init(sys_data_t *sys);

int
ipmi_sim_module_print_version(sys_data_t *sys, char *options)
{
	(void)sys;
	(void)options;
	printf("Rackpilot e2e sol_session_plugin 1.0\n");
	return 0;
}

int
ipmi_sim_module_init(sys_data_t *sys, const char *options)
{
	(void)sys;
	(void)options;
	return 0;
}

int
ipmi_sim_module_post_init(sys_data_t *sys)
{
	if (!payload_handlers || !payload_handlers[PAYLOAD_SOL]) {
		sys->log(sys, SETUP_ERROR, NULL,
		         "sol_session_plugin: ipmi_sim exports no SOL payload handler");
		return ENOSYS;
	}
	next_sol = payload_handlers[PAYLOAD_SOL];
	payload_handlers[PAYLOAD_SOL] = sol_payload;
	return 0;
}
