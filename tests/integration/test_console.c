/*
 * Serial consoles through the real rackpilotd against real BMCs: ipmi_sim with SOL on a pty
 * (tests/ipmi/bmcsim.sh SOL=1). What the "host" prints on its serial port (the test writes it to
 * the pty) reaches the node's console log, its event stream and the WebSocket viewers; what the
 * writer types reaches the serial port, what a read-only viewer types does not. A BMC that goes
 * away and comes back is reconnected to by itself; the session cap and hostile frames are
 * refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "harness.h"
#include "rackpilot/common.h"
#include "rackpilot/ws.h"

static char run[128], conf[192];
static int port;
static char op1[128], op2[128], op3[128], viewer[128];

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int
sim(const char *cmd, int count)
{
	return sh_rc("SOL=1 BMC_INITIAL_POWER=1 BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s %.0d "
	             ">/dev/null 2>&1",
	             port, rp_test_src, cmd, run, count);
}

/* Write what the host "prints" on BMC i's serial port. */
static void
host_prints(int i, const char *text)
{
	char path[256];
	int fd;

	snprintf(path, sizeof path, "%s/bmc%d/serial", run, i);
	fd = open(path, O_WRONLY | O_NOCTTY);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Read what was typed into BMC i's SOL console within ms (into out, NUL-terminated). */
static size_t
host_reads(int i, int ms, char *out, size_t max)
{
	char path[256];
	size_t n = 0;
	int fd;
	int64_t end = rp_time_now_ms() + ms;

	snprintf(path, sizeof path, "%s/bmc%d/serial", run, i);
	fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	assert_true(fd >= 0);
	while (rp_time_now_ms() < end && n + 1 < max) {
		ssize_t k = read(fd, out + n, max - 1 - n);

		if (k > 0)
			n += (size_t)k;
		else
			usleep(20000);
	}
	close(fd);
	out[n] = '\0';
	return n;
}

/* Wait until the node's console log holds needle. */
static int
log_has(const char *node, const char *needle, int seconds)
{
	char path[128];
	struct reply r;
	int i, found = 0;

	snprintf(path, sizeof path, "/v1/nodes/%s/console/log?tail=1000", node);
	for (i = 0; i < seconds * 10 && !found; i++) {
		assert_int_equal(req(&S, op3, "GET", path, NULL, NULL, 0, NULL, &r), 200);
		found = r.body && strstr(r.body, needle) != NULL;
		reply_free(&r);
		if (!found)
			usleep(100000);
	}
	return found;
}

/* ---- A WebSocket client ------------------------------------------------------------------ */

struct wsc {
	int fd;
	uint8_t buf[1 << 17];
	size_t len;
};

/* The handshake; the HTTP status (101 when upgraded). body gets the answer's body otherwise. */
static int
ws_open(struct wsc *w, const char *token, const char *path, const char *proto, char *body,
        size_t bodylen)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	const char *p = strrchr(S.base, ':');
	char key[RP_WS_KEY_BUF], accept[RP_WS_ACCEPT_BUF], req_[2048];
	int status = 0, k;
	char *end;

	a.sin_port = htons((uint16_t)atoi(p + 1));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->len = 0;
	w->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(w->fd >= 0);
	assert_int_equal(connect(w->fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(rp_ws_key(key), 0);
	k = snprintf(req_, sizeof req_,
	             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: "
	             "Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n",
	             path, key);
	if (proto)
		k += snprintf(req_ + k, sizeof req_ - (size_t)k, "Sec-WebSocket-Protocol: %s\r\n",
		              proto);
	else if (token)
		k += snprintf(req_ + k, sizeof req_ - (size_t)k, "Authorization: Bearer %s\r\n",
		              token);
	k += snprintf(req_ + k, sizeof req_ - (size_t)k, "\r\n");
	assert_int_equal(write(w->fd, req_, (size_t)k), k);
	/* The head, up to its blank line; what follows it is frames (or a body). */
	for (;;) {
		ssize_t n;
		char *head_end;

		w->buf[w->len] = 0;
		if ((head_end = strstr((char *)w->buf, "\r\n\r\n")) != NULL) {
			size_t hl = (size_t)(head_end + 4 - (char *)w->buf);

			status = (int)strtol((char *)w->buf + 9, &end, 10);
			if (status == 101) {
				const char *acc =
				        strcasestr((char *)w->buf, "Sec-WebSocket-Accept: ");

				assert_non_null(acc);
				assert_int_equal(rp_ws_accept(key, accept), 0);
				assert_int_equal(strncmp(acc + 22, accept, 28), 0);
				memmove(w->buf, w->buf + hl, w->len - hl);
				w->len -= hl;
				return status;
			}
			/* An error: its JSON body, as long as Content-Length says (the connection
			 * may stay open). */
			{
				const char *cl = strcasestr((char *)w->buf, "Content-Length: ");
				size_t want = hl + (cl ? (size_t)atol(cl + 16) : 0);
				int64_t until = rp_time_now_ms() + 3000;

				while (w->len < want && rp_time_now_ms() < until) {
					struct pollfd pf = {.fd = w->fd, .events = POLLIN};

					if (poll(&pf, 1, 100) <= 0)
						continue;
					n = read(w->fd, w->buf + w->len,
					         sizeof w->buf - 1 - w->len);
					if (n <= 0)
						break;
					w->len += (size_t)n;
				}
			}
			w->buf[w->len] = 0;
			snprintf(body, bodylen, "%s", (char *)w->buf + hl);
			close(w->fd);
			w->fd = -1;
			return status;
		}
		n = read(w->fd, w->buf + w->len, sizeof w->buf - 1 - w->len);
		if (n <= 0)
			fail_msg("no answer to the WebSocket handshake (%zd)", n);
		w->len += (size_t)n;
	}
}

static void
ws_send_raw(struct wsc *w, enum rp_ws_op op, const void *p, size_t n, int mask)
{
	uint8_t frame[4096], m[4] = {0x11, 0x22, 0x33, 0x44};
	size_t h = rp_ws_header(frame, op, 1, n, mask ? m : NULL);

	assert_true(h + n <= sizeof frame);
	memcpy(frame + h, p, n);
	if (mask)
		rp_ws_unmask(frame + h, n, m);
	assert_int_equal(write(w->fd, frame, h + n), (ssize_t)(h + n));
}

static void
ws_send(struct wsc *w, enum rp_ws_op op, const char *text)
{
	ws_send_raw(w, op, text, strlen(text), 1);
}

/* The next frame within ms: 1 (op, payload in out), 0 none, -1 the connection closed. */
static int
ws_recv(struct wsc *w, int ms, enum rp_ws_op *op, char *out, size_t max)
{
	int64_t end = rp_time_now_ms() + ms;
	struct rp_ws_frame f;

	for (;;) {
		int r = rp_ws_parse(w->buf, w->len, sizeof w->buf, 0, &f);
		struct pollfd p = {.fd = w->fd, .events = POLLIN};
		ssize_t n;

		if (r < 0)
			fail_msg("the server sent a malformed frame");
		if (r == 1) {
			size_t k = f.len < max - 1 ? (size_t)f.len : max - 1;

			memcpy(out, w->buf + f.header, k);
			out[k] = 0;
			*op = f.op;
			memmove(w->buf, w->buf + f.header + f.len,
			        w->len - f.header - (size_t)f.len);
			w->len -= f.header + (size_t)f.len;
			return 1;
		}
		if (rp_time_now_ms() >= end)
			return 0;
		if (poll(&p, 1, (int)(end - rp_time_now_ms())) <= 0)
			continue;
		n = read(w->fd, w->buf + w->len, sizeof w->buf - w->len);
		if (n <= 0)
			return -1;
		w->len += (size_t)n;
	}
}

/* Frames until one of type op that contains needle (a text frame's or the output's); what
 * binary frames said is gathered in seen. 1 found, 0 not within ms. */
static int
ws_wait(struct wsc *w, enum rp_ws_op want, const char *needle, int ms, char *seen, size_t max)
{
	int64_t end = rp_time_now_ms() + ms;
	char frame[70000];
	enum rp_ws_op op;

	if (seen)
		seen[0] = 0;
	while (rp_time_now_ms() < end) {
		int r = ws_recv(w, (int)(end - rp_time_now_ms()), &op, frame, sizeof frame);

		if (r < 0)
			return 0;
		if (r == 0)
			continue;
		if (op == RP_WS_BINARY && seen && strlen(seen) + strlen(frame) < max)
			strcat(seen, frame);
		if (op == want && strstr(op == RP_WS_BINARY && seen ? seen : frame, needle))
			return 1;
	}
	return 0;
}

static void
ws_close(struct wsc *w)
{
	if (w->fd >= 0) {
		ws_send_raw(w, RP_WS_CLOSE, "\x03\xe8", 2, 1);
		close(w->fd);
	}
	w->fd = -1;
}

/* ---- Set-up ----------------------------------------------------------------------------- */

static void
token(const char *name, const char *role, char *out)
{
	struct reply r;

	assert_int_equal(call(&S, S.admin, "POST", "/v1/tokens", &r, "{s:s, s:s}", "name", name,
	                      "role", role),
	                 201);
	snprintf(out, 128, "%s", str(r.json, "token"));
	reply_free(&r);
}

static int
setup(void **state)
{
	static const char *args[] = {"--power-sync-interval", "0", "-c", conf, NULL};
	int i;

	(void)state;
	for (i = 0; i < 8; i++) {
		snprintf(run, sizeof run, "/tmp/rp-console-%d-%d", (int)getpid(), i);
		/* libipmiconsole takes no IPMI port above 32767 ("hostname invalid"); bmcsim.sh
		 * refuses ports something else holds, and the loop tries others. */
		port = 20000 + (int)((getpid() * 13 + i * 1021) % 12000);
		sh("rm -rf '%s' && mkdir -p '%s'", run, run);
		if (sim("start", 3) == 0)
			break;
	}
	if (i == 8) {
		if (getenv("CI") && !strcmp(getenv("CI"), "true"))
			fail_msg(
			        "cannot start ipmi_sim BMCs with SOL (tests/ipmi/bmcsim.sh SOL=1)");
		print_message("skipped: no ipmi_sim with SOL here (socat, libopenipmi-dev?)\n");
		exit(77);
	}
	snprintf(conf, sizeof conf, "%s/rackpilotd.conf", run);
	sh("printf '[server]\\nconsole_max_sessions = 2\\nconsole_idle_timeout = 4\\n' > '%s'",
	   conf);
	/* A BMC that went away is noticed within 4 s, not the library's minute. */
	setenv("RP_BMC_SOL_SESSION_MS", "4000", 1);
	server_start(&S, NULL, args);
	token("op-one", "operator", op1);
	token("op-two", "operator", op2);
	token("op-three", "operator", op3);
	token("watcher", "viewer", viewer);
	for (i = 1; i <= 3; i++) {
		char name[8];

		snprintf(name, sizeof name, "c%d", i);
		make_node(&S, "{s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i}}}", "name", name,
		          "bmc", "driver", "ipmi", "address", "127.0.0.1", "port", port + i - 1,
		          "username", "admin", "password", "password", "options", "workarounds",
		          "opensesspriv", "session_timeout_ms", 2000);
	}
	make_node(&S, "{s:s, s:{s:s, s:s, s:s, s:s}}", "name", "rf", "bmc", "driver", "redfish",
	          "address", "127.0.0.1", "username", "admin", "password", "x");
	return 0;
}

static int
teardown(void **state)
{
	sim("stop", 0);
	sh("rm -rf '%s'", run);
	return group_teardown(state);
}

/* ---- Tests ------------------------------------------------------------------------------ */

/* console_log "always" on a node: its SOL session opens by itself and what the host prints is
 * logged, a line at a time with its time, without terminal control sequences. */
static void
test_log(void **state)
{
	struct reply r;

	(void)state;
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/c1", &r, "{s:s}", "console_log", "bogus"),
	        400);
	reply_free(&r);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/c1", &r, "{s:s}", "console_log", "always"),
	        200);
	reply_free(&r);
	assert_true(log_has("c1", "[rackpilot] SOL connected", 20));
	host_prints(1, "iPXE 1.21.1 -- Open Source Network Boot Firmware\r\n");
	host_prints(1, "\x1b[1;32mLinux version 6.1.0\x1b[0m booting\r\n");
	assert_true(log_has("c1", "Z iPXE 1.21.1 -- Open Source Network Boot Firmware\n", 10));
	assert_true(log_has("c1", "Z Linux version 6.1.0 booting\n", 10));
	/* tail bounds the answer; bad values are refused. */
	assert_int_equal(
	        req(&S, op3, "GET", "/v1/nodes/c1/console/log?tail=1", NULL, NULL, 0, NULL, &r),
	        200);
	assert_non_null(strstr(r.body, "Linux version"));
	assert_null(strstr(r.body, "iPXE"));
	assert_string_equal(r.ctype, "text/plain; charset=utf-8");
	reply_free(&r);
	assert_int_equal(
	        req(&S, op3, "GET", "/v1/nodes/c1/console/log?tail=0", NULL, NULL, 0, NULL, &r),
	        400);
	reply_free(&r);
	assert_int_equal(
	        req(&S, op3, "GET", "/v1/nodes/c1/console/log?lines=5", NULL, NULL, 0, NULL, &r),
	        400);
	reply_free(&r);
	assert_int_equal(
	        req(&S, op3, "GET", "/v1/nodes/nosuch/console/log", NULL, NULL, 0, NULL, &r), 404);
	reply_free(&r);
	/* /metrics counts it. */
	assert_int_equal(req(&S, op3, "GET", "/metrics", NULL, NULL, 0, NULL, &r), 200);
	assert_null(strstr(r.body, "rackpilot_console_sessions{state=\"up\"} 0\n"));
	assert_non_null(strstr(r.body, "rackpilot_console_sessions{state=\"up\"} "));
	assert_non_null(strstr(r.body, "rackpilot_console_lines_total "));
	reply_free(&r);
	/* The kernel prints its command line: the boot token in it never reaches the log. */
	host_prints(1,
	            "Kernel command line: console=ttyS0 rackpilot.token=rpb_S3cretS3cretS3cret12 "
	            "rackpilot.url=http://x\r\n");
	assert_true(log_has("c1", "rackpilot.token=************************ rackpilot.url", 10));
	assert_false(log_has("c1", "S3cret", 1));
	/* A node never logged has an empty log. */
	assert_int_equal(req(&S, op3, "GET", "/v1/nodes/c3/console/log", NULL, NULL, 0, NULL, &r),
	                 200);
	assert_int_equal(r.len, 0);
	reply_free(&r);
}

/* The event stream of new lines (what the web view follows). */
static void
test_stream(void **state)
{
	char cmd[1024], out[256], got[8192] = "";
	int i;

	(void)state;
	snprintf(out, sizeof out, "%s/stream.out", run);
	snprintf(cmd, sizeof cmd,
	         "curl -sN --max-time 8 -H 'Authorization: Bearer %s' "
	         "'%s/v1/nodes/c1/console/stream' "
	         "> '%s' 2>/dev/null &",
	         op3, S.base, out);
	assert_int_equal(system(cmd), 0);
	usleep(700000);
	host_prints(1, "stream line one\r\nstream line two\r\n");
	for (i = 0; i < 50 && !strstr(got, "stream line two"); i++) {
		usleep(100000);
		slurp(out, got, sizeof got);
	}
	assert_non_null(strstr(got, "retry: 2000"));
	assert_non_null(strstr(got, "Z stream line one\n\n"));
	assert_non_null(strstr(got, "id: "));
	assert_non_null(strstr(got, "data: "));
}

/* Two operators and a viewer on one console: the first operator writes, the second and the
 * viewer watch; output reaches all three; only the writer's input reaches the serial port. */
static void
test_interactive(void **state)
{
	struct wsc a, b, v;
	char body[2048], seen[65536], typed[256];

	(void)state;
	assert_int_equal(ws_open(&a, op1, "/v1/nodes/c2/console", NULL, body, sizeof body), 101);
	assert_true(ws_wait(&a, RP_WS_TEXT, "you hold the console", 5000, NULL, 0));
	assert_int_equal(ws_open(&b, op2, "/v1/nodes/c2/console", NULL, body, sizeof body), 101);
	assert_true(ws_wait(&b, RP_WS_TEXT, "read-only", 5000, NULL, 0));
	assert_true(ws_wait(&b, RP_WS_TEXT, "op-two", 1, NULL, 0) == 0);
	/* The browser's way: the token in the subprotocol. */
	snprintf(body, sizeof body, "%s, %s%s", RP_WS_PROTOCOL, RP_WS_PROTOCOL_BEARER, op3);
	assert_int_equal(
	        ws_open(&v, NULL, "/v1/nodes/c2/console?mode=read", body, body, sizeof body), 101);
	assert_true(ws_wait(&v, RP_WS_TEXT, "read-only", 5000, NULL, 0));
	/* Wait for SOL, then the host prints: everybody sees it. */
	assert_true(ws_wait(&a, RP_WS_TEXT, "SOL connected", 15000, NULL, 0) ||
	            log_has("c2", "SOL connected", 5));
	usleep(300000);
	host_reads(2, 200, typed, sizeof typed); /* drain */
	host_prints(2, "login: ");
	assert_true(ws_wait(&a, RP_WS_BINARY, "login: ", 5000, seen, sizeof seen));
	assert_true(ws_wait(&b, RP_WS_BINARY, "login: ", 5000, seen, sizeof seen));
	assert_true(ws_wait(&v, RP_WS_BINARY, "login: ", 5000, seen, sizeof seen));
	/* The writer types: it reaches the host. The others' input does not. */
	ws_send(&b, RP_WS_BINARY, "intruder\r");
	ws_send(&v, RP_WS_BINARY, "viewer\r");
	assert_true(ws_wait(&b, RP_WS_TEXT, "read-only: input ignored", 3000, NULL, 0));
	ws_send(&a, RP_WS_BINARY, "root\r");
	host_reads(2, 1500, typed, sizeof typed);
	assert_non_null(strstr(typed, "root\r"));
	assert_null(strstr(typed, "intruder"));
	assert_null(strstr(typed, "viewer"));
	/* The writer leaves: the other operator holds the console now. */
	ws_close(&a);
	assert_true(ws_wait(&b, RP_WS_TEXT, "you hold the console now", 5000, NULL, 0));
	ws_send(&b, RP_WS_BINARY, "second\r");
	host_reads(2, 1500, typed, sizeof typed);
	assert_non_null(strstr(typed, "second\r"));
	/* Idle past console_idle_timeout (4 s): the writer is let go. */
	assert_true(ws_wait(&b, RP_WS_TEXT, "no input for 4 s", 10000, NULL, 0));
	ws_close(&b);
	ws_close(&v);
	/* Every attach and detach is an event. */
	usleep(500000);
	assert_true(count_all(&S, "/v1/events?node=c2&action=console.attached") >= 3);
	assert_true(count_all(&S, "/v1/events?node=c2&action=console.detached") >= 2);
}

/* What is refused, before and after the upgrade. */
static void
test_refusals(void **state)
{
	struct wsc w;
	char body[2048], frame[256];
	enum rp_ws_op op;
	struct reply r;
	uint8_t big[16];

	(void)state;
	/* No token; a viewer (a console shows what the node prints, its boot token among it:
	 * operators only); no such node; a BMC without a console. */
	assert_int_equal(ws_open(&w, NULL, "/v1/nodes/c3/console", NULL, body, sizeof body), 401);
	assert_int_equal(
	        ws_open(&w, viewer, "/v1/nodes/c3/console?mode=read", NULL, body, sizeof body),
	        403);
	assert_int_equal(
	        req(&S, viewer, "GET", "/v1/nodes/c1/console/log", NULL, NULL, 0, NULL, &r), 403);
	reply_free(&r);
	assert_int_equal(
	        req(&S, viewer, "GET", "/v1/nodes/c1/console/stream", NULL, NULL, 0, NULL, &r),
	        403);
	reply_free(&r);
	assert_int_equal(ws_open(&w, op1, "/v1/nodes/nosuch/console", NULL, body, sizeof body),
	                 404);
	assert_int_equal(ws_open(&w, op1, "/v1/nodes/rf/console", NULL, body, sizeof body), 409);
	assert_non_null(strstr(body, "UNSUPPORTED"));
	assert_int_equal(ws_open(&w, op1, "/v1/nodes/c3/console?mode=all", NULL, body, sizeof body),
	                 400);
	/* Not a WebSocket handshake at all. */
	assert_int_equal(req(&S, op1, "GET", "/v1/nodes/c3/console", NULL, NULL, 0, NULL, &r), 400);
	reply_free(&r);
	/* An unmasked client frame is a protocol error: the server says so and closes. */
	assert_int_equal(ws_open(&w, op1, "/v1/nodes/c2/console", NULL, body, sizeof body), 101);
	ws_send_raw(&w, RP_WS_BINARY, "x", 1, 0);
	assert_true(ws_wait(&w, RP_WS_TEXT, "protocol error", 5000, NULL, 0));
	while (ws_recv(&w, 2000, &op, frame, sizeof frame) == 1)
		;
	close(w.fd);
	/* A frame that claims 2^62 bytes: refused, not waited for. */
	assert_int_equal(ws_open(&w, op1, "/v1/nodes/c2/console", NULL, body, sizeof body), 101);
	memcpy(big, "\x82\xff\x40\x00\x00\x00\x00\x00\x00\x00\x11\x22\x33\x44", 14);
	assert_int_equal(write(w.fd, big, 14), 14);
	assert_true(ws_wait(&w, RP_WS_TEXT, "protocol error", 5000, NULL, 0));
	close(w.fd);
}

/* console_max_sessions: with c1 logged and c2 viewed, c3's console is refused with why. */
static void
test_limit(void **state)
{
	struct wsc a, c;
	char body[2048];

	(void)state;
	assert_int_equal(
	        ws_open(&a, op1, "/v1/nodes/c2/console?mode=read", NULL, body, sizeof body), 101);
	assert_true(ws_wait(&a, RP_WS_TEXT, "connected to c2", 5000, NULL, 0));
	usleep(500000);
	assert_int_equal(ws_open(&c, op1, "/v1/nodes/c3/console", NULL, body, sizeof body), 101);
	assert_true(ws_wait(&c, RP_WS_TEXT, "console limit is reached", 5000, NULL, 0));
	close(c.fd);
	ws_close(&a);
}

/* The BMC goes away (its ipmi_sim stops) and comes back: the session is noticed gone, logged,
 * and opened again by itself; what the host prints afterwards is logged. */
static void
test_reconnect(void **state)
{
	(void)state;
	assert_int_equal(sim("stop", 0), 0);
	assert_true(log_has("c1", "[rackpilot] SOL closed: ", 30));
	assert_int_equal(sim("start", 3), 0);
	{
		struct reply r;
		int i, again = 0;

		/* Until the newest line says it is back. */
		for (i = 0; i < 400 && !again; i++) {
			assert_int_equal(req(&S, op3, "GET", "/v1/nodes/c1/console/log?tail=1",
			                     NULL, NULL, 0, NULL, &r),
			                 200);
			again = r.body && strstr(r.body, "[rackpilot] SOL connected") != NULL;
			reply_free(&r);
			if (!again)
				usleep(100000);
		}
		assert_true(again);
	}
	host_prints(1, "after the BMC came back\r\n");
	assert_true(log_has("c1", "Z after the BMC came back\n", 10));
}

/* The CLI: `rackpilot console NODE` with piped input types it into the console and prints the
 * console's output; --read-only sends nothing. */
static void
test_cli(void **state)
{
	char cmd[1024], out[256], got[8192] = "", typed[256];
	int i;

	(void)state;
	snprintf(out, sizeof out, "%s/cli.out", run);
	host_reads(2, 200, typed, sizeof typed); /* drain */
	snprintf(cmd, sizeof cmd,
	         "(sleep 2; printf 'whoami\\r'; sleep 6) | RACKPILOT_URL='%s' RACKPILOT_TOKEN='%s' "
	         "timeout 20 %s console c2 > '%s' 2>&1 &",
	         S.base, op1, RP_TEST_CLI, out);
	assert_int_equal(system(cmd), 0);
	host_reads(2, 4000, typed, sizeof typed);
	assert_non_null(strstr(typed, "whoami\r"));
	host_prints(2, "root\r\n");
	for (i = 0; i < 50 && !strstr(got, "root"); i++) {
		usleep(100000);
		slurp(out, got, sizeof got);
	}
	assert_non_null(strstr(got, "root"));
	/* Read-only: what it is given is not typed. */
	snprintf(cmd, sizeof cmd,
	         "(sleep 2; printf 'rm -rf /\\r') | RACKPILOT_URL='%s' RACKPILOT_TOKEN='%s' "
	         "timeout 20 %s console --read-only c2 > '%s' 2>&1",
	         S.base, op1, RP_TEST_CLI, out);
	assert_int_equal(system(cmd), 0);
	host_reads(2, 500, typed, sizeof typed);
	assert_null(strstr(typed, "rm -rf"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_log),         cmocka_unit_test(test_stream),
	        cmocka_unit_test(test_interactive), cmocka_unit_test(test_refusals),
	        cmocka_unit_test(test_cli),         cmocka_unit_test(test_limit),
	        cmocka_unit_test(test_reconnect),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
