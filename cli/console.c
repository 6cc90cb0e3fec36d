/*
 * rackpilot console NODE [--read-only]: a node's serial console over the server's WebSocket,
 * GET /v1/nodes/{node}/console (RFC 6455). libcurl makes the connection, so that the URL,
 * --cacert, --fingerprint and the token work as for every other command, and stops there
 * (rp_cli_connect); the handshake and the frames are ours (libcurl 7.88 has no usable WebSocket
 * API), over curl_easy_send and curl_easy_recv, framed by rackpilot/ws.h.
 *
 * From the server: binary frames are the console's bytes (to stdout as they are), text frames
 * JSON control messages ({"type":"status","writer":B,"message":S}, {"type":"closed",...}).
 * To the server: binary frames of typed bytes and {"type":"break"} (the ~B escape), only while
 * this session holds the writer; pongs; a close frame at the end.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <unistd.h>

#include <curl/curl.h>

#include <rackpilot/common.h>
#include <rackpilot/version.h>
#include <rackpilot/ws.h>

#include "cli.h"

#define FRAME_MAX  (1u << 20) /* the largest frame (or text message) taken from the server */
#define IN_CHUNK   16384      /* one receive: a whole TLS record */
#define IN_CAP     (FRAME_MAX + RP_WS_HEADER_MAX + IN_CHUNK)
#define OUT_CAP    (256u << 10) /* frames queued for the server */
#define TYPED_MAX  4096         /* one read of stdin */
#define BREAKS_MAX 4            /* ~B escapes taken from one read */
#define BREAK_MSG  "{\"type\":\"break\"}"
#define CTRL_ROOM  256 /* kept free in the queue for a pong and the close frame */
/* The queue's room one read of stdin may take: its bytes in frames split by breaks. */
#define READ_ROOM                                                                                  \
	(TYPED_MAX + 1 + (BREAKS_MAX + 1) * RP_WS_HEADER_MAX +                                     \
	 BREAKS_MAX * (RP_WS_HEADER_MAX + sizeof BREAK_MSG) + CTRL_ROOM)
#define HEAD_MAX     16384 /* the handshake answer's status line and headers */
#define ERR_BODY_MAX (64u << 10)
#define REQ_MAX      6144
#define HANDSHAKE_MS 30000
#define BODY_MS      5000
#define DRAIN_MS     1000 /* after stdin's end, output is still read this long */
#define CLOSE_MS     2000 /* after our close frame, the server's is waited for this long */
#define RECV_ROUNDS  64   /* receives per wakeup before stdin gets its turn */

/* A WebSocket close frame's status codes (RFC 6455 7.4.1). */
enum { CLOSE_NORMAL = 1000, CLOSE_AWAY = 1001, CLOSE_PROTOCOL = 1002, CLOSE_NONE = 1005 };

struct console {
	struct rp_cli *c;
	const char *node;
	int fd;     /* the connection's socket, for poll */
	int raw;    /* stdin is a terminal in raw mode: "\r\n" line ends, the ~ escape */
	int ro;     /* --read-only: never the writer, whatever the server says */
	int writer; /* typed bytes go to the server */
	int told;   /* the read-only notice was given since the writer was lost */
	int bol;    /* the next typed byte starts a line (the escape is recognised there) */
	int tilde;  /* a '~' at a line start is held back: the escape may follow */
	int col0;   /* stdout's last byte ended a line (or nothing was written) */
	int screen; /* stdout and stderr are both terminals: notices start on a line of their own */
	int frag;   /* the opcode of a fragmented message under way, 0 none */
	struct rp_buf text; /* a text message being put together */
	uint8_t *in;        /* bytes from the server not yet framed (IN_CAP) */
	size_t inlen;
	uint8_t *out; /* frames for the server (OUT_CAP): sent from head, appended at tail */
	size_t head, tail;
	int again;      /* the last send was refused: out + head must not move until it passes */
	int more;       /* receiving stopped with bytes maybe still waiting in libcurl's TLS */
	int stdin_open; /* stdin is still read */
	int close_sent; /* our close frame is queued */
	int dead;       /* the connection failed: nothing more can be sent */
	int done;       /* the session is over: the queue is flushed, then the connection dropped */
	int ending;     /* done, and flushing: a failure now changes nothing */
	int64_t drain;  /* monotonic ms: when the output read after stdin's end stops, 0 none */
	int64_t closing; /* monotonic ms: when waiting for the server's close frame stops, 0 none */
	int rc;          /* the exit code, once the session's end is known */
};

/* ---- the terminal -------------------------------------------------------------------------- */

static struct termios saved_tio;
static volatile sig_atomic_t tio_saved;

/* Async-signal-safe: the signal handlers call it too. */
static void
term_restore(void)
{
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
		tio_saved = 0;
	}
}

/* The terminal back as it was, then the signal's default action (the exit status says it). */
static void
on_signal(int sig)
{
	term_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Raw mode on stdin (a terminal), restored on every way out: returns, exit(), SIGINT, SIGTERM
 * and SIGHUP. 0, or -1 (printed). */
static int
term_raw(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	static int registered;
	struct sigaction sa;
	struct termios t;
	size_t i;

	if (tcgetattr(STDIN_FILENO, &saved_tio) < 0) {
		fprintf(stderr, "rackpilot: console: the terminal: %s\n", strerror(errno));
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof sigs / sizeof *sigs; i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (i = 0; i < sizeof sigs / sizeof *sigs; i++)
		sigaction(sigs[i], &sa, NULL);
	if (!registered && atexit(term_restore) == 0)
		registered = 1;
	t = saved_tio;
	cfmakeraw(&t);
	tio_saved = 1;
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) < 0) {
		tio_saved = 0;
		fprintf(stderr, "rackpilot: console: the terminal: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int64_t
now_ms(void)
{
	return rp_time_mono_ns() / 1000000;
}

/* The milliseconds left until deadline, for poll (0 when it has passed). */
static int
ms_left(int64_t deadline)
{
	int64_t left = deadline - now_ms();

	return left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/*
 * "[console: TEXT]" to stderr on a line of its own: the server's words with control
 * characters as '?' (they never steer the terminal), "\r\n" in raw mode.
 */
static void note(struct console *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
note(struct console *k, const char *fmt, ...)
{
	const char *nl = k->raw ? "\r\n" : "\n";
	char msg[1024];
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	for (i = 0; msg[i]; i++)
		if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
			msg[i] = '?';
	fprintf(stderr, "%s[console: %s]%s", k->screen && !k->col0 ? nl : "", msg, nl);
	k->col0 = 1;
}

/* All of p to stdout (EINTR, EAGAIN and short writes handled). 0, or -1 (printed). */
static int
put_out(struct console *k, const uint8_t *p, size_t len)
{
	struct pollfd pf = {.fd = STDOUT_FILENO, .events = POLLOUT};
	ssize_t n;

	while (len > 0) {
		if ((n = write(STDOUT_FILENO, p, len)) >= 0) {
			p += n;
			len -= (size_t)n;
			k->col0 = p[-1] == '\n';
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			poll(&pf, 1, -1);
		} else if (errno != EINTR) {
			fprintf(stderr, "rackpilot: console: stdout: %s%s", strerror(errno),
			        k->raw ? "\r\n" : "\n");
			return -1;
		}
	}
	return 0;
}

/* ---- the connection ---------------------------------------------------------------------- */

/* Sends all of p before deadline (the handshake's request). 0, or -1 (printed). */
static int
send_all(struct console *k, const char *p, size_t len, int64_t deadline)
{
	struct pollfd pf = {.fd = k->fd, .events = POLLOUT};
	CURLcode cc;
	size_t n;

	while (len > 0) {
		cc = curl_easy_send(k->c->curl, p, len, &n);
		if (cc == CURLE_AGAIN) {
			if (ms_left(deadline) == 0) {
				fprintf(stderr, "rackpilot: %s: timed out sending\n", k->c->url);
				return -1;
			}
			poll(&pf, 1, ms_left(deadline));
			continue;
		}
		if (cc != CURLE_OK) {
			fprintf(stderr, "rackpilot: %s: %s\n", k->c->url, curl_easy_strerror(cc));
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Receives what is there (at most len) before deadline. 0 with *got (0: the server closed the
 * connection), or -1 (printed: an error, or the deadline passed). */
static int
recv_wait(struct console *k, void *buf, size_t len, int64_t deadline, size_t *got)
{
	struct pollfd pf = {.fd = k->fd, .events = POLLIN};
	CURLcode cc;

	for (;;) {
		cc = curl_easy_recv(k->c->curl, buf, len, got);
		if (cc == CURLE_OK)
			return 0;
		if (cc != CURLE_AGAIN) {
			fprintf(stderr, "rackpilot: %s: %s\n", k->c->url, curl_easy_strerror(cc));
			return -1;
		}
		if (ms_left(deadline) == 0) {
			fprintf(stderr, "rackpilot: %s: no answer to the console request\n",
			        k->c->url);
			return -1;
		}
		poll(&pf, 1, ms_left(deadline));
	}
}

/* Queues a frame for the server, masked afresh (as a client's must be). 0, or -1 when the
 * queue has no room (nothing queued) or no random bytes came (printed). */
static int
queue(struct console *k, enum rp_ws_op op, const void *payload, size_t len)
{
	uint8_t mask[4];
	size_t h;

	if (OUT_CAP - k->tail < RP_WS_HEADER_MAX + len && !k->again && k->head > 0) {
		memmove(k->out, k->out + k->head, k->tail - k->head);
		k->tail -= k->head;
		k->head = 0;
	}
	if (OUT_CAP - k->tail < RP_WS_HEADER_MAX + len)
		return -1;
	if (rp_random(mask, sizeof mask) < 0) {
		fprintf(stderr, "rackpilot: console: no random bytes for a frame mask\n");
		return -1;
	}
	h = rp_ws_header(k->out + k->tail, op, 1, len, mask);
	if (len > 0)
		memcpy(k->out + k->tail + h, payload, len);
	rp_ws_unmask(k->out + k->tail + h, len, mask);
	k->tail += h + len;
	return 0;
}

/* The room queue() can count on for a frame's header and payload. */
static size_t
room(const struct console *k)
{
	return OUT_CAP - k->tail + (k->again ? 0 : k->head);
}

/*
 * Sends what is queued until the socket takes no more. TLS wants a refused write retried with
 * the same bytes at the same place: the queue's head does not move while k->again.
 * 0, or -1 when the connection failed (unless k->ending: printed, and the session is over
 * with exit 1).
 */
static int
flush(struct console *k)
{
	CURLcode cc;
	size_t n;

	while (k->head < k->tail) {
		cc = curl_easy_send(k->c->curl, k->out + k->head, k->tail - k->head, &n);
		if (cc == CURLE_AGAIN) {
			k->again = 1;
			return 0;
		}
		if (cc != CURLE_OK) {
			if (!k->ending) {
				fprintf(stderr, "rackpilot: console: %s: %s%s", k->c->url,
				        curl_easy_strerror(cc), k->raw ? "\r\n" : "\n");
				k->rc = RP_CLI_EAPI;
			}
			k->done = k->dead = 1;
			return -1;
		}
		k->again = 0;
		k->head += n;
	}
	k->head = k->tail = 0;
	return 0;
}

/* Our close frame (code), once; then stdin is no longer read and the server's answer is
 * waited for CLOSE_MS. rc: the exit code. */
static void
start_close(struct console *k, unsigned code, int rc)
{
	uint8_t p[2] = {(uint8_t)(code >> 8), (uint8_t)code};

	k->rc = rc;
	if (k->close_sent)
		return;
	k->close_sent = 1;
	k->stdin_open = 0;
	k->closing = now_ms() + CLOSE_MS;
	queue(k, RP_WS_CLOSE, p, sizeof p); /* CTRL_ROOM keeps room for it */
}

/* A broken session: why, a close frame with code, and the end (exit 1). */
static void
fail(struct console *k, unsigned code, const char *why)
{
	note(k, "%s", why);
	start_close(k, code, RP_CLI_EAPI);
	k->done = 1;
}

/* ---- from the server --------------------------------------------------------------------- */

/* A text message: a JSON control message. Unknown types are for later versions. */
static void
control(struct console *k)
{
	json_t *j = json_loadb(k->text.data ? k->text.data : "", k->text.len, 0, NULL);
	json_t *w = json_object_get(j, "writer"), *e = json_object_get(j, "error");
	const char *type = rp_cli_str(j, "type", ""), *msg = rp_cli_str(j, "message", "");

	if (!strcmp(type, "status")) {
		if (json_is_boolean(w)) {
			if (json_is_true(w) && !k->writer)
				k->told = 0;
			k->writer = json_is_true(w) && !k->ro;
		}
		if (msg[0])
			note(k, "%s", msg);
	} else if (!strcmp(type, "closed")) {
		note(k, "%s", msg[0] ? msg : "the server closed the console");
		start_close(k, CLOSE_NORMAL,
		            e && !json_is_false(e) && !json_is_null(e) ? RP_CLI_EAPI : RP_CLI_OK);
	} else if (j == NULL && k->c->verbose) {
		note(k, "a text message that is not JSON, ignored");
	}
	json_decref(j);
}

/* The server's close frame: answered (when we did not close first), and the session ends. */
static void
closed(struct console *k, const uint8_t *p, size_t len)
{
	unsigned code = len >= 2 ? (unsigned)p[0] << 8 | p[1] : CLOSE_NONE;

	if (len == 1) {
		fail(k, CLOSE_PROTOCOL, "protocol error: a close frame of one byte");
		return;
	}
	if (!k->close_sent) {
		if (code == CLOSE_NORMAL || code == CLOSE_AWAY || code == CLOSE_NONE) {
			note(k, "the server closed the console");
			start_close(k, CLOSE_NORMAL, RP_CLI_OK);
		} else {
			note(k, "closed by the server: %u %.*s", code, (int)(len - 2), p + 2);
			start_close(k, CLOSE_NORMAL, RP_CLI_EAPI);
		}
	}
	k->done = 1; /* when we closed first, this was the answer: its code says nothing new */
}

/* One frame from the server, payload at p. */
static void
frame(struct console *k, const struct rp_ws_frame *f, uint8_t *p)
{
	size_t len = (size_t)f->len;

	if (f->masked) { /* RFC 6455 5.1: a server never masks */
		fail(k, CLOSE_PROTOCOL, "protocol error: a masked frame from the server");
		return;
	}
	if ((f->op == RP_WS_BINARY || f->op == RP_WS_TEXT) && k->frag) {
		fail(k, CLOSE_PROTOCOL, "protocol error: a new message inside a fragmented one");
		return;
	}
	if (f->op == RP_WS_CONT && !k->frag) {
		fail(k, CLOSE_PROTOCOL, "protocol error: a continuation with nothing to continue");
		return;
	}
	switch (f->op) {
	case RP_WS_TEXT:
		rp_buf_free(&k->text);
		rp_buf_init(&k->text, FRAME_MAX);
		/* fall through */
	case RP_WS_BINARY:
	case RP_WS_CONT:
		if (f->op != RP_WS_CONT)
			k->frag = f->op;
		if (k->frag == RP_WS_BINARY && put_out(k, p, len) < 0) {
			start_close(k, CLOSE_AWAY, RP_CLI_EAPI);
			k->done = 1;
			return;
		} else if (k->frag == RP_WS_TEXT && rp_buf_append(&k->text, p, len) < 0) {
			fail(k, 1009, "protocol error: a text message over 1 MiB");
			return;
		}
		if (f->fin) {
			if (k->frag == RP_WS_TEXT)
				control(k);
			k->frag = 0;
		}
		break;
	case RP_WS_PING:
		/* Without room, this pong is skipped: a later ping's will do (RFC 6455 5.5.3). */
		if (!k->close_sent)
			queue(k, RP_WS_PONG, p, len);
		break;
	case RP_WS_PONG:
		break;
	case RP_WS_CLOSE:
		closed(k, p, len);
		break;
	}
}

/* The whole frames in k->in, in order; what is left of a frame moves to the front. */
static void
frames(struct console *k)
{
	struct rp_ws_frame f;
	size_t off = 0;
	int r;

	while (!k->done && (r = rp_ws_parse(k->in + off, k->inlen - off, FRAME_MAX, 0, &f)) != 0) {
		if (r < 0) {
			fail(k, CLOSE_PROTOCOL,
			     "protocol error: a malformed frame from the server, or one over 1 "
			     "MiB");
			break;
		}
		frame(k, &f, k->in + off + f.header);
		off += f.header + (size_t)f.len;
	}
	if (k->done)
		k->inlen = 0;
	else if (off > 0)
		memmove(k->in, k->in + off, k->inlen -= off);
}

/* What the server sent, until libcurl has no more (or RECV_ROUNDS: k->more is then set). */
static void
receive(struct console *k)
{
	CURLcode cc;
	size_t n;
	int i;

	k->more = 0;
	for (i = 0; i < RECV_ROUNDS && !k->done; i++) {
		/* A whole frame was handled before this: IN_CHUNK bytes are free. */
		cc = curl_easy_recv(k->c->curl, k->in + k->inlen, IN_CAP - k->inlen, &n);
		if (cc == CURLE_AGAIN)
			return;
		if (cc != CURLE_OK || n == 0) {
			if (!k->close_sent) {
				note(k, "the connection to the server was lost%s%s",
				     cc != CURLE_OK ? ": " : "",
				     cc != CURLE_OK ? curl_easy_strerror(cc) : "");
				k->rc = RP_CLI_EAPI;
			}
			k->dead = 1;
			k->done = 1;
			return;
		}
		k->inlen += n;
		frames(k);
	}
	k->more = !k->done;
}

/* ---- from the keyboard ------------------------------------------------------------------- */

/* Typed bytes (or a break) to the node while we hold the writer, else the read-only notice
 * (once until the writer comes back). */
static void
to_node(struct console *k, enum rp_ws_op op, const void *p, size_t len)
{
	if (len == 0)
		return;
	if (!k->writer) {
		if (!k->told)
			note(k, "read-only: typed input is not sent%s",
			     k->raw ? " (~. leaves)" : "");
		k->told = 1;
	} else if (queue(k, op, p, len) < 0) { /* READ_ROOM was there: only randomness fails */
		k->rc = RP_CLI_EAPI;
		k->done = 1;
	}
}

/*
 * A read of stdin. In raw mode, escapes after '~' at a line's start, as ssh's: "." leaves, "B"
 * sends a serial break ({"type":"break"}), "?" lists them, "~" sends one '~'; any other byte
 * goes with the '~' before it.
 */
static void
typed(struct console *k)
{
	uint8_t in[TYPED_MAX], send[TYPED_MAX + 1];
	size_t len = 0;
	ssize_t n, i;
	int leave = 0, breaks = 0;

	if ((n = read(STDIN_FILENO, in, sizeof in)) < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) { /* the end, or an error that is as good as one */
		k->stdin_open = 0;
		k->drain = now_ms() + DRAIN_MS;
		return;
	}
	for (i = 0; i < n && !leave && !k->done; i++) {
		uint8_t b = in[i];

		if (!k->raw) {
			send[len++] = b;
			continue;
		}
		if (k->tilde) {
			k->tilde = 0;
			if (b == '.') {
				leave = 1;
				continue;
			}
			if (b == 'B' || b == '?') { /* the line start stays: ~? then ~. works */
				to_node(k, RP_WS_BINARY, send, len);
				len = 0;
				if (b == '?')
					note(k, "escapes at a line's start: ~. leave, ~B send a "
					        "break, "
					        "~~ send ~, ~? this list");
				else if (breaks++ < BREAKS_MAX)
					to_node(k, RP_WS_TEXT, BREAK_MSG, sizeof BREAK_MSG - 1);
				continue;
			}
			if (b != '~')
				send[len++] = '~';
		} else if (k->bol && b == '~') {
			k->tilde = 1;
			continue;
		}
		send[len++] = b;
		k->bol = b == '\r' || b == '\n';
	}
	if (!k->done)
		to_node(k, RP_WS_BINARY, send, len);
	if (leave)
		start_close(k, CLOSE_NORMAL, RP_CLI_OK);
}

/* ---- the handshake ----------------------------------------------------------------------- */

/* Value of header name in the header block head (lines after the status line), trimmed,
 * into out (size len). 1 when present, else 0. */
static int
header(const char *head, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name), vl;
	const char *p, *v;

	for (p = strstr(head, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, name, nl) || p[2 + nl] != ':')
			continue;
		for (v = p + 3 + nl; *v == ' ' || *v == '\t'; v++)
			;
		for (vl = strcspn(v, "\r\n"); vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t');)
			vl--;
		snprintf(out, len, "%.*s", (int)vl, v);
		return 1;
	}
	return 0;
}

/* 1 when the comma-separated list s holds token (any case). */
static int
has_token(const char *s, const char *token)
{
	size_t n = strlen(token), w;

	while (*s) {
		s += strspn(s, " \t,");
		w = strcspn(s, " \t,");
		if (w == n && !strncasecmp(s, token, n))
			return 1;
		s += w;
	}
	return 0;
}

/* A chunked body (b, NUL-terminated): 1 when it is whole (apply: then decoded in place, *len
 * its length), 0 when more is needed, -1 when it is malformed. Trailers are not expected. */
static int
dechunk(char *b, size_t *len, int apply)
{
	size_t in = 0, out = 0, n;
	char *end;

	for (;;) {
		if (memchr(b + in, '\n', *len - in) == NULL)
			return 0;
		n = strtoul(b + in, &end, 16);
		if (end == b + in)
			return -1;
		in = (size_t)((char *)memchr(b + in, '\n', *len - in) - b) + 1;
		if (n == 0) {
			if (apply) {
				*len = out;
				b[out] = '\0';
			}
			return 1;
		}
		if (n > *len - in || *len - in - n < 2)
			return 0;
		if (apply)
			memmove(b + out, b + in, n);
		out += n;
		in += n + 2;
	}
}

/*
 * The body of an error answer (rest: the bytes after its header) by its Content-Length, its
 * chunks or the connection's end, then printed as the CLI prints API errors.
 */
static void
print_refusal(struct console *k, long status, const char *head, const uint8_t *rest, size_t nrest)
{
	static char empty[1];
	struct rp_cli_resp r = {.status = status, .body = empty};
	char v[64], chunk[IN_CHUNK];
	int64_t deadline = now_ms() + BODY_MS;
	int chunked = header(head, "Transfer-Encoding", v, sizeof v) && has_token(v, "chunked");
	long want = header(head, "Content-Length", v, sizeof v) ? strtol(v, NULL, 10) : -1;
	struct rp_buf b;
	size_t n, len;

	rp_buf_init(&b, ERR_BODY_MAX);
	rp_buf_append(&b, rest, nrest);
	for (;;) {
		len = b.len;
		if (want >= 0 ? b.len >= (size_t)want
		              : chunked && b.data && dechunk(b.data, &len, 0) != 0)
			break;
		if (b.toobig || b.oom || recv_wait(k, chunk, sizeof chunk, deadline, &n) < 0 ||
		    n == 0 || rp_buf_append(&b, chunk, n) < 0)
			break;
	}
	if (b.data && want >= 0 && b.len > (size_t)want)
		b.data[b.len = (size_t)want] = '\0';
	len = b.len;
	if (b.data && want < 0 && chunked && dechunk(b.data, &len, 1) == 1)
		b.len = len;
	if (b.data) {
		r.body = b.data;
		r.len = b.len;
	}
	rp_cli_print_error(k->c, &r);
	rp_buf_free(&b);
}

/*
 * The opening handshake for target (the request path, escaped) at host. On 101 with the right
 * Sec-WebSocket-Accept, RP_CLI_OK, and the bytes after the answer's header are in k->in.
 * Otherwise RP_CLI_EAPI with the reason printed (an error answer as the CLI prints them).
 */
static int
handshake(struct console *k, const char *host, const char *target)
{
	char key[RP_WS_KEY_BUF], want[RP_WS_ACCEPT_BUF], req[REQ_MAX], v[256];
	char *head = (char *)k->in, *end = NULL;
	int64_t deadline = now_ms() + HANDSHAKE_MS;
	int rc = RP_CLI_EAPI, len;
	size_t got = 0, n;
	long status = 0;

	if (rp_ws_key(key) < 0 || rp_ws_accept(key, want) < 0) {
		fprintf(stderr, "rackpilot: console: no random bytes for the key\n");
		return rc;
	}
	len = snprintf(req, sizeof req,
	               "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rackpilot/" RP_VERSION
	               "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s%s%s\r\n",
	               target, host, key, k->c->token[0] ? "Authorization: Bearer " : "",
	               k->c->token, k->c->token[0] ? "\r\n" : "");
	if (len < 0 || len >= (int)sizeof req) {
		fprintf(stderr, "rackpilot: console: request too long\n");
		goto out;
	}
	if (send_all(k, req, (size_t)len, deadline) < 0)
		goto out;
	while (end == NULL) {
		if (got == HEAD_MAX) {
			fprintf(stderr, "rackpilot: %s: answer header over %u bytes\n", k->c->url,
			        HEAD_MAX);
			goto out;
		}
		if (recv_wait(k, head + got, HEAD_MAX - got, deadline, &n) < 0)
			goto out;
		if (n == 0) {
			fprintf(stderr,
			        "rackpilot: %s: the server closed the connection without "
			        "an answer\n",
			        k->c->url);
			goto out;
		}
		got += n;
		head[got] = '\0';
		end = strstr(head, "\r\n\r\n");
	}
	end += 4;
	if (strncmp(head, "HTTP/1.", 7) || sscanf(head + 7, "%*c %ld", &status) != 1) {
		fprintf(stderr, "rackpilot: %s: not an HTTP answer\n", k->c->url);
		goto out;
	}
	if (k->c->verbose)
		fprintf(stderr, "< %ld\n", status);
	end[-2] = '\0'; /* the header block ends with one "\r\n" for header() */
	if (status != 101) {
		print_refusal(k, status, head, (uint8_t *)end, got - (size_t)(end - head));
		goto out;
	}
	if (!header(head, "Upgrade", v, sizeof v) || strcasecmp(v, "websocket") ||
	    !header(head, "Connection", v, sizeof v) || !has_token(v, "upgrade")) {
		fprintf(stderr, "rackpilot: %s: 101 without an upgrade to websocket\n", k->c->url);
		goto out;
	}
	if (!header(head, "Sec-WebSocket-Accept", v, sizeof v) || strcmp(v, want)) {
		fprintf(stderr, "rackpilot: %s: wrong Sec-WebSocket-Accept in the handshake\n",
		        k->c->url);
		goto out;
	}
	/* RFC 6455 4.1: neither was offered, so neither may be answered. */
	if (header(head, "Sec-WebSocket-Extensions", v, sizeof v) ||
	    header(head, "Sec-WebSocket-Protocol", v, sizeof v)) {
		fprintf(stderr,
		        "rackpilot: %s: an extension or subprotocol in the handshake that "
		        "was not offered\n",
		        k->c->url);
		goto out;
	}
	k->inlen = got - (size_t)(end - head);
	memmove(k->in, end, k->inlen);
	rc = RP_CLI_OK;
out:
	explicit_bzero(req, sizeof req);
	return rc;
}

/* The Host header's value and the path prefix from c->url ("http://host:port/prefix"). */
static int
split_url(const char *url, char *host, size_t hlen, char *prefix, size_t plen)
{
	const char *a = strstr(url, "://") + 3, *p = a + strcspn(a, "/?#"), *at;

	for (at = a; (at = memchr(at, '@', (size_t)(p - at))) != NULL; a = ++at)
		; /* user information goes to no header */
	return snprintf(host, hlen, "%.*s", (int)(p - a), a) >= (int)hlen ||
	                       snprintf(prefix, plen, "%.*s", (int)strcspn(p, "?#"), p) >= (int)plen
	               ? -1
	               : 0;
}

/* ---- the command ------------------------------------------------------------------------- */

int
rp_cli_console(struct rp_cli *c)
{
	struct console k = {.c = c, .node = c->argv[0], .rc = RP_CLI_OK, .bol = 1, .col0 = 1};
	char host[1024], path[4096] = "";
	int rc = RP_CLI_EAPI, path_ok = 0;
	size_t prefix = 0;

	k.ro = rp_cli_opt(c, "read-only") != NULL;
	rp_buf_init(&k.text, FRAME_MAX);
	k.in = malloc(IN_CAP + 1);
	k.out = malloc(OUT_CAP);
	if (k.in == NULL || k.out == NULL) {
		fprintf(stderr, "rackpilot: out of memory\n");
		goto out;
	}
	/* The request path: the URL's own path (a proxy's prefix), then the route. */
	if (split_url(c->url, host, sizeof host, path, sizeof path) == 0) {
		prefix = strlen(path);
		if (rp_cli_pathf(path, sizeof path, "/v1/nodes/%s/console", k.node) == 0 &&
		    rp_cli_query(path, sizeof path, "mode", k.ro ? "read" : NULL) == 0)
			path_ok = 1;
	}
	if (!path_ok) {
		fprintf(stderr, "rackpilot: request path too long\n");
		goto out;
	}
	if (c->verbose)
		fprintf(stderr, "> GET %s%s (websocket)\n", c->url, path + prefix);
	if (rp_cli_connect(c, &k.fd) < 0 || handshake(&k, host, path) != RP_CLI_OK)
		goto out;
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is an error from write */
	k.writer = !k.ro;
	k.stdin_open = 1;
	k.screen = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
	if (isatty(STDIN_FILENO)) {
		if (term_raw() < 0)
			goto out;
		k.raw = 1;
		note(&k, "connected to %s (escape: ~. to leave)", k.node);
	}
	frames(&k); /* what came with the handshake's answer */
	while (!k.done) {
		struct pollfd pf[2] = {{.fd = k.fd, .events = POLLIN}, {.fd = STDIN_FILENO}};
		int64_t deadline = k.closing ? k.closing : k.drain;
		int npf = 1, r;

		if (deadline && ms_left(deadline) == 0) {
			if (k.closing)
				break; /* no close frame came back: we are done waiting */
			k.drain = 0;
			start_close(&k, CLOSE_NORMAL, k.rc);
			continue;
		}
		if (k.tail > k.head)
			pf[0].events |= POLLOUT;
		if (k.stdin_open && room(&k) >= READ_ROOM) {
			pf[1].events = POLLIN;
			npf = 2;
		}
		r = poll(pf, (nfds_t)npf, k.more ? 0 : deadline ? ms_left(deadline) : -1);
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "rackpilot: console: poll: %s\n", strerror(errno));
			k.rc = RP_CLI_EAPI;
			break;
		}
		if (r > 0 && (pf[0].revents & POLLOUT))
			flush(&k);
		if (!k.dead &&
		    (k.more || (r > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))))
			receive(&k);
		if (r > 0 && npf == 2 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) && !k.done)
			typed(&k);
		if (k.tail > k.head && !k.dead)
			flush(&k); /* at once: typing is not held back for a poll round */
	}
	/* The close frame (and what was queued before it) on its way, a little while at most; the
	 * server may have gone already. */
	k.ending = 1;
	if (!k.dead) {
		int64_t deadline = now_ms() + 1000;
		struct pollfd pf = {.fd = k.fd, .events = POLLOUT};

		while (k.tail > k.head && flush(&k) == 0 && k.tail > k.head &&
		       ms_left(deadline) > 0)
			poll(&pf, 1, ms_left(deadline));
	}
	rc = k.rc;
	if (k.raw)
		note(&k, "connection to %s closed", k.node);
out:
	term_restore();
	rp_buf_free(&k.text);
	free(k.in);
	free(k.out);
	return rc;
}
