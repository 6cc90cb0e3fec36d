/*
 * solprobe.c - Serial-over-LAN client on freeipmi's libipmiconsole, the way ConMan uses it: the
 * library's engine threads own the RMCP+ session and the SOL payload, the program only sees a
 * pollable fd (console output to read, keystrokes to write). selftest.sh uses it against
 * `SOL=1` BMCs; it is also the reference for Rackpilot's console code. Not installed anywhere.
 *
 *   cc -O2 -Wall -o solprobe solprobe.c -lipmiconsole -lfreeipmi -lpthread   (libipmiconsole-dev)
 *   solprobe [options] HOST[:PORT] USER PASSWORD
 *
 * options
 *   -d SECONDS   stay in the poll loop that long once SOL is up (default 5; 0: until EOF)
 *   -s TEXT      type TEXT into the console once SOL is up (escapes \r \n \xHH), -S MS later
 *                (default 300 ms)
 *   -u STRING    stop (exit 0) as soon as the console output contains STRING
 *   -B           ipmiconsole_engine_submit_block() instead of ipmiconsole_engine_submit() with a
 *                callback and a wait for the status to leave SUBMITTED
 *   -b FLAGS     behavior: error_on_inuse,deactivate_only,deactivate_all (default none)
 *   -e FLAGS     engine: close_fd,output_on_established,serial_keepalive,serial_keepalive_empty
 *   -t MS -r MS  session timeout / retransmission timeout (library defaults 60000 / 500)
 *   -k MS -K MS  keepalive / keepalive retransmission timeout (defaults 20000 / 5000);
 *                ctx_create fails (EINVAL) unless retransmission keepalive <= keepalive <= session
 *   -m N         maximum retransmission count (default 16)
 *   -w HEX       extra workaround flags; -W: no OPEN_SESSION_PRIVILEGE workaround (ipmi_sim needs
 * it) -D           library debug output (with IPMI packets) on stderr -x           close the fd and
 * exit right after SOL is up (and -s is typed)
 *
 * Output: one line per event, "t=<ms since submit> <event>", bytes C-escaped:
 *   "SOL established", "typed N bytes: ...", "console output N bytes: ...",
 *   "read() EOF: status=.. errnum=N (text) ...", "SOL not established: ... errnum=N (text)".
 * Exit: 0 ok, 1 usage / set-up error, 2 SOL never came up, 3 the fd reported EOF/error later.
 *
 * libipmiconsole 1.6.10 facts (measured against ipmi_sim + mc_plugin.c, see README "SOL"):
 *   - ipmiconsole_engine_init(threads, debug) once per process; every context is then run by
 *     those threads. ipmiconsole_engine_submit() returns at once; the callback runs once, on an
 *     engine thread, when SOL is up or set-up failed. ipmiconsole_ctx_status() says which.
 *   - The status stays SOL_ESTABLISHED after a later failure: the fd says it (read() returns 0,
 *     write() EPIPE; with CLOSE_FD poll() gives POLLNVAL), then ipmiconsole_ctx_errnum() tells why:
 *     25 session timeout (BMC gone or rebooted: after the session timeout), 26 excess
 *     retransmissions sent (SOL taken over or deactivated by someone else: noticed only when
 *     characters are typed, or by SERIAL_KEEPALIVE, which types NULs on the serial port).
 *   - Set-up errors: 11 username invalid, 12 password invalid, 15 privilege level cannot be
 *     obtained (no OPEN_SESSION_PRIVILEGE workaround), 17 SOL in use (ERROR_ON_SOL_INUSE; by
 *     default the library deactivates the other session and takes SOL over), 22 BMC error (a BMC
 *     without SOL), 24 connection timeout (nothing answers).
 *   - "host:port" works as the hostname. The fd is the caller's to close; closing it ends the
 *     SOL session. ipmiconsole_ctx_destroy() then ipmiconsole_engine_teardown(1) (blocking: it
 *     deactivates SOL and closes the session cleanly).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ipmiconsole.h>

static double t0;
static pthread_t main_thread;
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static int cb_calls;

static double
now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void ev(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
ev(const char *fmt, ...)
{
	va_list ap;
	printf("t=%.0f ", now_ms() - t0);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void
print_bytes(const char *what, const unsigned char *b, size_t n)
{
	size_t i;

	printf("t=%.0f %s %zu bytes: \"", now_ms() - t0, what, n);
	for (i = 0; i < n; i++) {
		if (b[i] == '\r')
			printf("\\r");
		else if (b[i] == '\n')
			printf("\\n");
		else if (b[i] == '"' || b[i] == '\\')
			printf("\\%c", b[i]);
		else if (b[i] >= 32 && b[i] < 127)
			putchar(b[i]);
		else
			printf("\\x%02x", b[i]);
	}
	printf("\"\n");
	fflush(stdout);
}

static size_t
unescape(const char *s, char *out, size_t max)
{
	size_t n = 0;

	while (*s && n < max) {
		if (s[0] == '\\' && s[1] == 'r') {
			out[n++] = '\r';
			s += 2;
		} else if (s[0] == '\\' && s[1] == 'n') {
			out[n++] = '\n';
			s += 2;
		} else if (s[0] == '\\' && s[1] == 'x' && s[2] && s[3]) {
			char h[3] = {s[2], s[3], 0};
			out[n++] = (char)strtoul(h, NULL, 16);
			s += 4;
		} else
			out[n++] = *s++;
	}
	return n;
}

static unsigned int
parse_flags(const char *s, const char *const *names, const unsigned int *vals)
{
	char *copy = strdup(s), *tok, *save = NULL;
	unsigned int f = 0;
	int i;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; names[i] && strcmp(tok, names[i]); i++)
			;
		if (!names[i]) {
			fprintf(stderr, "unknown flag %s\n", tok);
			exit(1);
		}
		f |= vals[i];
	}
	free(copy);
	return f;
}

static const char *
status_name(ipmiconsole_ctx_status_t s)
{
	switch (s) {
	case IPMICONSOLE_CTX_STATUS_ERROR:
		return "ERROR";
	case IPMICONSOLE_CTX_STATUS_NOT_SUBMITTED:
		return "NOT_SUBMITTED";
	case IPMICONSOLE_CTX_STATUS_SUBMITTED:
		return "SUBMITTED";
	case IPMICONSOLE_CTX_STATUS_SOL_ERROR:
		return "SOL_ERROR";
	case IPMICONSOLE_CTX_STATUS_SOL_ESTABLISHED:
		return "SOL_ESTABLISHED";
	}
	return "?";
}

static void
report(ipmiconsole_ctx_t c, const char *why)
{
	int e = ipmiconsole_ctx_errnum(c);
	ev("%s: status=%s errnum=%d (%s) errormsg=\"%s\"", why,
	   status_name(ipmiconsole_ctx_status(c)), e, ipmiconsole_ctx_strerror(e),
	   ipmiconsole_ctx_errormsg(c));
}

/* Runs once, on an engine thread, when SOL is up or its set-up failed. */
static void
on_submit_done(void *arg)
{
	ipmiconsole_ctx_t c = arg;

	pthread_mutex_lock(&cb_lock);
	cb_calls++;
	pthread_mutex_unlock(&cb_lock);
	ev("callback on %s thread: status=%s",
	   pthread_equal(pthread_self(), main_thread) ? "the main" : "an engine",
	   status_name(ipmiconsole_ctx_status(c)));
}

int
main(int argc, char **argv)
{
	static const char *const bnames[] = {"error_on_inuse", "deactivate_only", "deactivate_all",
	                                     NULL};
	static const unsigned int bvals[] = {IPMICONSOLE_BEHAVIOR_ERROR_ON_SOL_INUSE,
	                                     IPMICONSOLE_BEHAVIOR_DEACTIVATE_ONLY,
	                                     IPMICONSOLE_BEHAVIOR_DEACTIVATE_ALL_INSTANCES};
	static const char *const enames[] = {"close_fd", "output_on_established",
	                                     "serial_keepalive", "serial_keepalive_empty", NULL};
	static const unsigned int evals[] = {
	        IPMICONSOLE_ENGINE_CLOSE_FD, IPMICONSOLE_ENGINE_OUTPUT_ON_SOL_ESTABLISHED,
	        IPMICONSOLE_ENGINE_SERIAL_KEEPALIVE, IPMICONSOLE_ENGINE_SERIAL_KEEPALIVE_EMPTY};
	struct ipmiconsole_ipmi_config ipmi;
	struct ipmiconsole_protocol_config proto;
	struct ipmiconsole_engine_config eng;
	ipmiconsole_ctx_t c;
	double duration = 5, send_after = 300, up_at;
	const char *send = NULL, *until = NULL;
	char seen[4096] = "";
	size_t seen_len = 0;
	unsigned int wa = IPMICONSOLE_WORKAROUND_OPEN_SESSION_PRIVILEGE, wa_extra = 0;
	int opt, block = 0, debug = 0, exit_when_up = 0, fd, rc = 0, sent = 0;

	memset(&ipmi, 0, sizeof(ipmi));
	memset(&eng, 0, sizeof(eng));
	/* <= 0: the library default (or libipmiconsole.conf) */
	proto.session_timeout_len = -1;
	proto.retransmission_timeout_len = -1;
	proto.retransmission_backoff_count = -1;
	proto.keepalive_timeout_len = -1;
	proto.retransmission_keepalive_timeout_len = -1;
	proto.acceptable_packet_errors_count = -1;
	proto.maximum_retransmission_count = -1;

	while ((opt = getopt(argc, argv, "d:s:S:u:Bb:e:t:r:k:K:m:w:WDx")) != -1) {
		switch (opt) {
		case 'd':
			duration = atof(optarg);
			break;
		case 's':
			send = optarg;
			break;
		case 'S':
			send_after = atof(optarg);
			break;
		case 'u':
			until = optarg;
			break;
		case 'B':
			block = 1;
			break;
		case 'b':
			eng.behavior_flags = parse_flags(optarg, bnames, bvals);
			break;
		case 'e':
			eng.engine_flags = parse_flags(optarg, enames, evals);
			break;
		case 't':
			proto.session_timeout_len = atoi(optarg);
			break;
		case 'r':
			proto.retransmission_timeout_len = atoi(optarg);
			break;
		case 'k':
			proto.keepalive_timeout_len = atoi(optarg);
			break;
		case 'K':
			proto.retransmission_keepalive_timeout_len = atoi(optarg);
			break;
		case 'm':
			proto.maximum_retransmission_count = atoi(optarg);
			break;
		case 'w':
			wa_extra = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'W':
			wa = 0;
			break;
		case 'D':
			debug = 1;
			break;
		case 'x':
			exit_when_up = 1;
			break;
		default:
			return 1;
		}
	}
	if (argc - optind != 3) {
		fprintf(stderr, "usage: %s [options] HOST[:PORT] USER PASSWORD\n", argv[0]);
		return 1;
	}

	if (ipmiconsole_engine_init(1, debug ? IPMICONSOLE_DEBUG_STDERR : 0) < 0) {
		perror("ipmiconsole_engine_init");
		return 1;
	}
	ipmi.username = argv[optind + 1];
	ipmi.password = argv[optind + 2];
	ipmi.k_g = NULL;
	ipmi.k_g_len = 0;
	ipmi.privilege_level = IPMICONSOLE_PRIVILEGE_ADMIN;
	ipmi.cipher_suite_id = 3;
	ipmi.workaround_flags = wa | wa_extra;
	eng.debug_flags = debug ? IPMICONSOLE_DEBUG_STDERR | IPMICONSOLE_DEBUG_IPMI_PACKETS : 0;

	if (!(c = ipmiconsole_ctx_create(argv[optind], &ipmi, &proto, &eng))) {
		perror("ipmiconsole_ctx_create");
		ipmiconsole_engine_teardown(0);
		return 1;
	}

	main_thread = pthread_self();
	t0 = now_ms();
	if (block) {
		if (ipmiconsole_engine_submit_block(c) < 0) {
			report(c, "SOL not established");
			ipmiconsole_ctx_destroy(c);
			ipmiconsole_engine_teardown(1);
			return 2;
		}
	} else {
		if (ipmiconsole_engine_submit(c, on_submit_done, c) < 0) {
			report(c, "submit failed");
			ipmiconsole_ctx_destroy(c);
			ipmiconsole_engine_teardown(1);
			return 2;
		}
		while (ipmiconsole_ctx_status(c) == IPMICONSOLE_CTX_STATUS_SUBMITTED)
			usleep(2000);
		if (ipmiconsole_ctx_status(c) != IPMICONSOLE_CTX_STATUS_SOL_ESTABLISHED) {
			report(c, "SOL not established");
			ipmiconsole_ctx_destroy(c);
			ipmiconsole_engine_teardown(1);
			return 2;
		}
	}
	up_at = now_ms();
	ev("SOL established");
	if ((fd = ipmiconsole_ctx_fd(c)) < 0) {
		report(c, "ipmiconsole_ctx_fd");
		ipmiconsole_ctx_destroy(c);
		ipmiconsole_engine_teardown(1);
		return 1;
	}

	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		double now = now_ms();
		int n;

		if (send && !sent && (exit_when_up || now - up_at >= send_after)) {
			char buf[512];
			size_t len = unescape(send, buf, sizeof(buf));
			ssize_t w = write(fd, buf, len);
			if (w < 0)
				ev("write: %s", strerror(errno));
			else
				print_bytes("typed", (unsigned char *)buf, (size_t)w);
			sent = 1;
		}
		if (exit_when_up) {
			if (send)
				usleep(300000); /* give the engine time to send it */
			break;
		}
		if (duration > 0 && now - up_at >= duration * 1000) {
			ev("duration over");
			break;
		}
		n = poll(&p, 1, 50);
		if (n < 0 && errno != EINTR) {
			ev("poll: %s", strerror(errno));
			rc = 3;
			break;
		}
		if (n <= 0)
			continue;
		if (p.revents & POLLNVAL) {
			report(c, "POLLNVAL (CLOSE_FD: the engine closed the fd)");
			rc = 3;
			break;
		} else {
			unsigned char buf[1024];
			ssize_t r = read(fd, buf, sizeof(buf));
			if (r > 0) {
				print_bytes("console output", buf, (size_t)r);
				if (until) {
					size_t k = (size_t)r;
					if (seen_len + k >= sizeof(seen))
						seen_len = 0;
					memcpy(seen + seen_len, buf, k);
					seen_len += k;
					seen[seen_len] = '\0';
					if (strstr(seen, until)) {
						ev("saw \"%s\"", until);
						break;
					}
				}
			} else {
				report(c, r == 0 ? "read() EOF" : strerror(errno));
				rc = 3;
				break;
			}
		}
	}
	if (!(eng.engine_flags & IPMICONSOLE_ENGINE_CLOSE_FD))
		close(fd); /* the caller's to close (unless CLOSE_FD); closing it ends the SOL
		              session */
	ipmiconsole_ctx_destroy(c);
	ipmiconsole_engine_teardown(1);
	pthread_mutex_lock(&cb_lock);
	ev("teardown done (callback calls: %d)", cb_calls);
	pthread_mutex_unlock(&cb_lock);
	return rc;
}
