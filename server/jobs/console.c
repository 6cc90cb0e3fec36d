/*
 * Serial consoles: one thread keeps the nodes' SOL sessions (bmc/sol.c), logs what they print and
 * serves the WebSocket viewers attached to them.
 *
 * - A session is open while its node is to be logged (rp_store_console_wanted, asked every
 *   RECONCILE_MS) or has viewers; a dropped session comes back by itself, backing off from 2 s
 *   to a minute. At most console_max_sessions are open at once.
 * - Everything a session prints goes, line by line with a timestamp and without terminal
 *   control sequences, to the node's log (DIR/UUID.log, rolled over to UUID.log.1 at half of
 *   console_log_bytes, so the two hold at most that) and to a ring of its latest lines for the
 *   event streams (rp_jobs_console_read); the raw bytes go to the viewers.
 * - One viewer writes (the first operator that asked to; the next one that asked when it
 *   leaves); the others watch. The writer is let go after console_idle_s without input.
 *
 * The thread owns sessions and viewers; the ring and the pending attachments are also read and
 * written by HTTP threads, under mu.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "rackpilot/ws.h"

#define RECONCILE_MS   2000
#define RING_LINES     1024
#define LINE_MAX_BYTES 1024 /* a longer line is cut into several */
#define PARTIAL_MS     2000 /* a line without its end yet is logged after this */
#define VIEWER_OUT_MAX (1u << 20)
#define VIEWER_IN_MAX  (64u << 10)
#define BACKOFF_MIN_MS 2000
#define BACKOFF_MAX_MS 60000
#define VIEWERS_MAX    32    /* per node */
#define LINGER_MS      10000 /* a session nobody needs closes after this */
#define HASH_BUCKETS   1024
#define PING_MS        30000 /* a viewer is pinged this often... */
#define SILENT_MS      95000 /* ...and dropped when nothing came from it for this long */
#define CLOSING_MS     5000  /* a close that cannot be sent within this: dropped */

struct viewer {
	struct viewer *next;
	struct rp_console_conn conn;
	int wants_write, writer;
	char actor[96];
	uint8_t in[VIEWER_IN_MAX];
	size_t inlen;
	uint8_t *out;
	size_t outoff, outlen, outcap;
	int64_t last_input_ms;
	int64_t last_seen_ms, last_ping_ms, closing_ms;
	int frag;    /* RP_WS_BINARY while a fragmented message goes on, else 0 */
	int evented; /* console.attached was recorded: console.detached will be */
	int closing; /* a close frame is queued: flush, then close */
	int dead;    /* the connection failed: close now */
};

struct line {
	uint64_t seq;
	char *text;
};

struct session {
	struct session *next;
	char uuid[RP_UUID_BUF];
	char name[64];
	struct session *hnext; /* its hash bucket's next (under mu) */
	struct rp_bmc_sol *sol;
	int up;
	int wanted;
	int64_t next_try_ms, unneeded_since;
	unsigned backoff_ms;
	struct viewer *viewers;
	int logfd;
	off_t logsize;
	char partial[LINE_MAX_BYTES + 1];
	size_t plen;
	int64_t partial_ms;
	int esc;           /* 0 text, 1 after ESC, 2 in CSI, 3 in OSC, 4 OSC after ESC */
	struct line *ring; /* RING_LINES lines (under mu), allocated at the first */
	uint64_t head;     /* lines ever put in the ring (under mu) */
	char error[256];
};

struct pending {
	struct pending *next;
	char uuid[RP_UUID_BUF];
	char name[64];
	struct viewer *v;
};

struct rp_console {
	struct rp_jobs *j;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	int wake[2];
	int stop;
	struct session *sessions;
	struct session *hash[HASH_BUCKETS]; /* by uuid (under mu) */
	size_t open;                        /* sessions with SOL open, this round */
	struct pending *pending;            /* under mu */
	uint64_t seq;                       /* under mu: the last line's */
	struct rp_console_stats stats;      /* under mu: for rp_jobs_console_stats */
	uint64_t gen;                       /* atomic */
	int64_t next_reconcile;
	uint64_t looks; /* reconciles done (atomic): a waiter knows when one has seen its node */
};

/* ---- Small helpers -------------------------------------------------------------------- */

static void
wake(struct rp_console *c)
{
	char b = 1;

	if (write(c->wake[1], &b, 1) < 0 && errno != EAGAIN)
		rp_log_warn("console: cannot wake its thread: %s", strerror(errno));
}

static void
log_path(const char *dir, const char *uuid, int old, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.log%s", dir, uuid, old ? ".1" : "");
}

/* Queue bytes for a viewer; a viewer that reads too slowly to keep VIEWER_OUT_MAX is cut off. */
static void
viewer_queue(struct viewer *v, const void *p, size_t n)
{
	if (v->dead)
		return;
	if (v->outoff > 0 && v->outoff == v->outlen)
		v->outoff = v->outlen = 0;
	if (v->outlen + n > v->outcap) {
		size_t live = v->outlen - v->outoff, cap = v->outcap ? v->outcap : 4096;
		uint8_t *b;

		if (live + n > VIEWER_OUT_MAX) {
			v->dead = 1;
			return;
		}
		if (v->outoff > 0) {
			memmove(v->out, v->out + v->outoff, live);
			v->outoff = 0;
			v->outlen = live;
		}
		while (cap < live + n)
			cap *= 2;
		if (cap != v->outcap) {
			if ((b = realloc(v->out, cap)) == NULL) {
				v->dead = 1;
				return;
			}
			v->out = b;
			v->outcap = cap;
		}
	}
	memcpy(v->out + v->outlen, p, n);
	v->outlen += n;
}

static void
viewer_frame(struct viewer *v, enum rp_ws_op op, const void *p, size_t n)
{
	uint8_t h[RP_WS_HEADER_MAX];

	viewer_queue(v, h, rp_ws_header(h, op, 1, n, NULL));
	viewer_queue(v, p, n);
}

/* A JSON control message: {"type", "writer", "message"}, and for "closed" whether the console
 * ended it for an error ("error"). */
static void
viewer_message(struct viewer *v, const char *type, const char *message, int error)
{
	json_t *o =
	        json_pack("{s:s, s:b, s:s}", "type", type, "writer", v->writer, "message", message);
	char *text;

	if (o && !strcmp(type, "closed"))
		json_object_set_new(o, "error", json_boolean(error));
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (text)
		viewer_frame(v, RP_WS_TEXT, text, strlen(text));
	else
		v->dead = 1;
	free(text);
	json_decref(o);
}

static void
viewer_status(struct viewer *v, const char *type, const char *message)
{
	viewer_message(v, type, message, 0);
}

/* Tell the viewer why, then close: 1000, or after a protocol error (error 2) 1002, after a
 * refusal (error 1) 1008. */
static void
viewer_say_close(struct viewer *v, const char *message, int error)
{
	uint8_t code[2] = {0x03, (uint8_t)(error == 2 ? 0xea : error ? 0xf0 : 0xe8)};

	viewer_message(v, "closed", message, error != 0);
	viewer_frame(v, RP_WS_CLOSE, code, 2);
	v->closing = 1;
	v->closing_ms = rp_time_now_ms();
}

static void
event(struct rp_console *c, struct session *s, struct viewer *v, const char *action,
      const char *what)
{
	char summary[256];

	snprintf(summary, sizeof summary, "console of %s %s by %s (%s)", s->name, what, v->actor,
	         v->writer ? "writer" : "read-only");
	json_t *detail = json_pack("{s:b, s:s?}", "writer", v->writer, "peer", v->conn.peer);

	if (rp_store_node_event(c->j->st, s->uuid, v->actor, action, summary, detail) != RP_ERR_OK)
		rp_log_warn("console: %s: could not record %s", s->name, action);
	json_decref(detail);
}

static void
viewer_free(struct rp_console *c, struct session *s, struct viewer *v, const char *why)
{
	if (s && v->evented)
		event(c, s, v, "console.detached", why);
	if (v->conn.close)
		v->conn.close(v->conn.arg);
	free(v->out);
	free(v);
}

/* ---- The log and the ring -------------------------------------------------------------- */

static void
log_open(struct rp_console *c, struct session *s)
{
	char path[512];
	struct stat sb;

	if (s->logfd >= 0)
		return;
	log_path(c->j->o.console_dir, s->uuid, 0, path, sizeof path);
	s->logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (s->logfd < 0) {
		rp_log_warn("console: %s: cannot open %s: %s", s->name, path, strerror(errno));
		return;
	}
	s->logsize = fstat(s->logfd, &sb) == 0 ? sb.st_size : 0;
}

/* Tokens a node prints are not for whoever reads its log: its boot script's
 * rackpilot.token=VALUE and anything shaped like a Rackpilot token (rp?_ and 16 or more token
 * characters) become '*'. In place. */
static void
redact(char *t, size_t n)
{
	static const char key[] = "rackpilot.token=";
	size_t i, j;

	for (i = 0; i < n; i++) {
		size_t from = n;

		if (n - i >= sizeof key - 1 && !memcmp(t + i, key, sizeof key - 1))
			from = i + sizeof key - 1;
		else if (n - i > 4 && t[i] == 'r' && t[i + 1] == 'p' && t[i + 2] >= 'a' &&
		         t[i + 2] <= 'z' && t[i + 3] == '_' &&
		         (i == 0 || t[i - 1] == ' ' || t[i - 1] == '=' || t[i - 1] == '"'))
			from = i + 4;
		if (from == n)
			continue;
		for (j = from; j < n && t[j] != ' ' && t[j] != '\t' && t[j] != '"' && t[j] != '\n';
		     j++)
			;
		if (from == i + 4 && j - from < 16)
			continue; /* too short for a token: a word */
		memset(t + from, '*', j - from);
		i = j;
	}
}

/* One line (text without its end) into the log and the ring. */
static void
line_out(struct rp_console *c, struct session *s, const char *text, size_t n)
{
	char ts[RP_TIME_BUF], *l;
	struct line *slot;
	size_t len;
	int k;

	rp_time_format(rp_time_now_ms(), ts);
	len = strlen(ts) + 1 + n + 1;
	if ((l = malloc(len + 1)) == NULL)
		return;
	k = snprintf(l, len + 1, "%s %.*s\n", ts, (int)n, text);
	redact(l, (size_t)k);
	log_open(c, s);
	if (s->logfd >= 0) {
		if ((uint64_t)s->logsize + (uint64_t)k > c->j->o.console_log_bytes / 2) {
			char cur[512], old[512];

			log_path(c->j->o.console_dir, s->uuid, 0, cur, sizeof cur);
			log_path(c->j->o.console_dir, s->uuid, 1, old, sizeof old);
			close(s->logfd);
			s->logfd = -1;
			if (rename(cur, old) < 0)
				rp_log_warn("console: %s: cannot roll its log over: %s", s->name,
				            strerror(errno));
			log_open(c, s);
		}
		if (s->logfd >= 0 && write(s->logfd, l, (size_t)k) == k)
			s->logsize += k;
	}
	l[k - 1] = '\0'; /* the ring keeps lines without their end */
	pthread_mutex_lock(&c->mu);
	if (s->ring == NULL && (s->ring = calloc(RING_LINES, sizeof *s->ring)) == NULL) {
		pthread_mutex_unlock(&c->mu);
		free(l);
		return;
	}
	c->seq++;
	slot = &s->ring[s->head++ % RING_LINES];
	free(slot->text);
	slot->seq = c->seq;
	slot->text = l;
	pthread_mutex_unlock(&c->mu);
	__atomic_add_fetch(&c->gen, 1, __ATOMIC_RELEASE);
}

static void
partial_flush(struct rp_console *c, struct session *s)
{
	if (s->plen > 0)
		line_out(c, s, s->partial, s->plen);
	s->plen = 0;
}

/* Console output to log lines: control sequences (CSI, OSC, two-byte escapes) and other
 * control characters out, CR ignored, LF ends a line, bytes outside ASCII as '?'. */
static void
log_bytes(struct rp_console *c, struct session *s, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint8_t b = p[i];

		switch (s->esc) {
		case 1:
			s->esc = b == '[' ? 2 : b == ']' ? 3 : 0;
			continue;
		case 2:
			if (b >= 0x40 && b <= 0x7e)
				s->esc = 0;
			continue;
		case 3:
			if (b == 0x07)
				s->esc = 0;
			else if (b == 0x1b)
				s->esc = 4;
			continue;
		case 4:
			s->esc = b == '\\' ? 0 : 3;
			continue;
		}
		if (b == 0x1b) {
			s->esc = 1;
		} else if (b == '\n') {
			partial_flush(c, s);
		} else if (b == '\t' || (b >= 0x20 && b < 0x7f) || b >= 0x80) {
			if (s->plen == 0)
				s->partial_ms = rp_time_now_ms();
			s->partial[s->plen++] = b >= 0x80 ? '?' : (char)b;
			if (s->plen == LINE_MAX_BYTES)
				partial_flush(c, s);
		}
	}
}

/* A line Rackpilot itself writes into the log ("[rackpilot] SOL connected"). */
static void log_note(struct rp_console *c, struct session *s, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void
log_note(struct rp_console *c, struct session *s, const char *fmt, ...)
{
	char text[400];
	va_list ap;
	int k;

	partial_flush(c, s);
	k = snprintf(text, sizeof text, "[rackpilot] ");
	va_start(ap, fmt);
	vsnprintf(text + k, sizeof text - (size_t)k, fmt, ap);
	va_end(ap);
	line_out(c, s, text, strlen(text));
}

/* ---- Sessions ------------------------------------------------------------------------- */

static unsigned
bucket(const char *uuid)
{
	unsigned h = 2166136261u;

	while (*uuid)
		h = (h ^ (unsigned char)*uuid++) * 16777619u;
	return h % HASH_BUCKETS;
}

/* The session of uuid, or NULL. The console thread calls it freely; others under mu. */
static struct session *
session_find(struct rp_console *c, const char *uuid)
{
	struct session *s;

	for (s = c->hash[bucket(uuid)]; s; s = s->hnext)
		if (!strcmp(s->uuid, uuid))
			return s;
	return NULL;
}

static struct session *
session_new(struct rp_console *c, const char *uuid, const char *name)
{
	struct session *s = calloc(1, sizeof *s);

	if (s == NULL)
		return NULL;
	snprintf(s->uuid, sizeof s->uuid, "%s", uuid);
	snprintf(s->name, sizeof s->name, "%s", name ? name : uuid);
	s->logfd = -1;
	s->backoff_ms = BACKOFF_MIN_MS;
	pthread_mutex_lock(&c->mu);
	s->next = c->sessions;
	c->sessions = s;
	s->hnext = c->hash[bucket(uuid)];
	c->hash[bucket(uuid)] = s;
	pthread_mutex_unlock(&c->mu);
	return s;
}

static void
broadcast_status(struct session *s, const char *message)
{
	struct viewer *v;

	for (v = s->viewers; v; v = v->next)
		viewer_status(v, "status", message);
}

static void
sol_down(struct rp_console *c, struct session *s, const char *why)
{
	char msg[400];

	rp_bmc_sol_close(s->sol);
	s->sol = NULL;
	s->up = 0;
	snprintf(s->error, sizeof s->error, "%s", why);
	s->next_try_ms = rp_time_now_ms() + s->backoff_ms;
	snprintf(msg, sizeof msg, "SOL closed: %s; trying again in %u s", why,
	         s->backoff_ms / 1000);
	log_note(c, s, "%s", msg);
	rp_log_info("console: %s: %s", s->name, msg);
	broadcast_status(s, msg);
	s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
}

/* Open SOL when it is time: the BMC's settings as the store has them now (a rotation may have
 * changed its password), within console_max_sessions (c->open, counted this round). */
static void
sol_try(struct rp_console *c, struct session *s, int64_t now)
{
	struct rp_power_target pt = {0};
	struct rp_bmc_target t;
	struct rp_bmc_err err = {0};
	enum rp_err e;

	if (s->sol || now < s->next_try_ms)
		return;
	if (c->open >= c->j->o.console_max_sessions) {
		/* Look again in a second, not every round: a fleet may be waiting. */
		s->next_try_ms = now + 1000;
		snprintf(s->error, sizeof s->error,
		         "waiting: %u consoles are open (console_max_sessions)",
		         c->j->o.console_max_sessions);
		return;
	}
	memset(&t, 0, sizeof t);
	e = rp_store_console_target(c->j->st, s->uuid, &pt);
	if (e != RP_ERR_OK || jobs_bmc_target(&pt.bmc, s->uuid, &t, &err) < 0 || !t.console) {
		if (e != RP_ERR_OK)
			snprintf(err.msg, sizeof err.msg, "its BMC settings: %s", rp_err_code(e));
		else if (err.msg[0] == '\0')
			snprintf(err.msg, sizeof err.msg,
			         "its BMC has no console (bmc.options.console)");
		rp_store_power_target_clear(&pt);
		explicit_bzero(&t, sizeof t);
		s->next_try_ms = now + BACKOFF_MAX_MS;
		snprintf(s->error, sizeof s->error, "%s", err.msg);
		return;
	}
	rp_store_power_target_clear(&pt);
	/* A Redfish node's console is its BMC's IPMI. */
	if (!strcmp(t.driver, "redfish")) {
		t.port = t.console_port;
		t.cipher_suite = t.cipher_suite ? t.cipher_suite : 3;
	}
	/* A viewer asked for this console: it takes SOL over from another client (a session
	 * of an earlier run of rackpilotd, until the BMC times it out, too). A console only
	 * logged waits for the other client to leave. */
	s->sol = rp_bmc_sol_open(&t, s->viewers != NULL, &err);
	explicit_bzero(&t, sizeof t);
	if (s->sol == NULL) {
		s->next_try_ms = now + s->backoff_ms;
		if (strcmp(s->error, err.msg))
			rp_log_warn("console: %s: %s", s->name, err.msg);
		snprintf(s->error, sizeof s->error, "%s", err.msg);
		s->backoff_ms =
		        s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
		return;
	}
	c->open++;
}

/* SOL came up, failed or sent output. */
static void
sol_service(struct rp_console *c, struct session *s, short revents)
{
	struct rp_bmc_err err = {0};
	uint8_t buf[16384];
	ssize_t n;
	int st;

	if (!s->up) {
		st = rp_bmc_sol_state(s->sol, &err);
		if (st < 0) {
			sol_down(c, s, err.msg);
			return;
		}
		if (st == 1) {
			s->up = 1;
			s->backoff_ms = BACKOFF_MIN_MS;
			s->error[0] = '\0';
			log_note(c, s, "SOL connected");
			rp_log_info("console: %s: SOL connected", s->name);
			broadcast_status(s, "SOL connected");
		}
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	for (;;) {
		n = read(rp_bmc_sol_fd(s->sol), buf, sizeof buf);
		if (n > 0) {
			struct viewer *v;

			log_bytes(c, s, buf, (size_t)n);
			for (v = s->viewers; v; v = v->next)
				viewer_frame(v, RP_WS_BINARY, buf, (size_t)n);
			if ((size_t)n < sizeof buf)
				return;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* EOF: the engine ended the session; it says why. */
		if (rp_bmc_sol_state(s->sol, &err) >= 0)
			snprintf(err.msg, sizeof err.msg, "the SOL session ended");
		sol_down(c, s, err.msg);
		return;
	}
}

/* ---- Viewers -------------------------------------------------------------------------- */

static void
promote(struct session *s, int quiet)
{
	struct viewer *v;

	for (v = s->viewers; v; v = v->next)
		if (v->writer)
			return;
	for (v = s->viewers; v; v = v->next) {
		if (v->wants_write && !v->closing && !v->dead) {
			v->writer = 1;
			v->last_input_ms = rp_time_now_ms();
			if (!quiet)
				viewer_status(v, "status", "you hold the console now");
			return;
		}
	}
}

static void
viewer_input(struct rp_console *c, struct session *s, struct viewer *v, const uint8_t *p, size_t n)
{
	ssize_t w;

	if (!v->writer) {
		viewer_status(v, "status", "read-only: input ignored");
		return;
	}
	v->last_input_ms = rp_time_now_ms();
	if (s->sol == NULL || !s->up) {
		viewer_status(v, "status", "input dropped: SOL is not connected");
		return;
	}
	w = write(rp_bmc_sol_fd(s->sol), p, n);
	if (w < 0 || (size_t)w < n)
		viewer_status(v, "status", "input dropped: the console is busy");
	(void)c;
}

/* Control messages from a viewer: {"type":"break"}. */
static void
viewer_control(struct session *s, struct viewer *v, const uint8_t *p, size_t n)
{
	json_t *o = json_loadb((const char *)p, n, 0, NULL);
	const char *type = json_string_value(json_object_get(o, "type"));
	struct rp_bmc_err err = {0};

	if (type && !strcmp(type, "break") && v->writer && s->sol && s->up) {
		v->last_input_ms = rp_time_now_ms();
		if (rp_bmc_sol_break(s->sol, &err) < 0)
			viewer_status(v, "status", err.msg);
	}
	json_decref(o);
}

/* Read what a viewer sent and act on whole frames. */
/* A client's protocol error: say so and close (what it sent after is not read). */
static void
viewer_bad(struct viewer *v, const char *why)
{
	viewer_say_close(v, why, 2);
	v->inlen = 0;
}

/* Read what a viewer sent and act on whole frames: binary messages (fragments of one too) are
 * input, a text message (one frame) a control message; nothing after its close frame counts. */
static void
viewer_read(struct rp_console *c, struct session *s, struct viewer *v)
{
	struct rp_ws_frame f;
	ssize_t n;
	int r;

	n = read(v->conn.fd, v->in + v->inlen, sizeof v->in - v->inlen);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		v->dead = 1;
		return;
	}
	if (n > 0) {
		v->inlen += (size_t)n;
		v->last_seen_ms = rp_time_now_ms();
	}
	if (v->closing) {
		v->inlen = 0; /* after its close, or ours: nothing is acted on */
		return;
	}
	/* A full buffer holds at least one whole frame: frames are capped below its size. */
	while (!v->closing &&
	       (r = rp_ws_parse(v->in, v->inlen, VIEWER_IN_MAX - RP_WS_HEADER_MAX, 1, &f)) == 1) {
		uint8_t *payload = v->in + f.header;
		size_t total = f.header + (size_t)f.len;

		rp_ws_unmask(payload, f.len, f.mask);
		switch (f.op) {
		case RP_WS_BINARY:
		case RP_WS_TEXT:
		case RP_WS_CONT:
			if ((f.op == RP_WS_CONT) != (v->frag != 0)) {
				viewer_bad(v, f.op == RP_WS_CONT ? "protocol error: a continuation "
				                                   "without a message"
				                                 : "protocol error: a new message "
				                                   "inside a fragmented one");
				return;
			}
			if (f.op == RP_WS_TEXT && !f.fin) {
				viewer_bad(v, "protocol error: a control message in fragments");
				return;
			}
			if (f.op == RP_WS_TEXT)
				viewer_control(s, v, payload, (size_t)f.len);
			else
				viewer_input(c, s, v, payload, (size_t)f.len);
			v->frag = f.fin ? 0 : RP_WS_BINARY;
			break;
		case RP_WS_PING:
			viewer_frame(v, RP_WS_PONG, payload, (size_t)f.len);
			break;
		case RP_WS_PONG:
			break;
		case RP_WS_CLOSE:
			viewer_frame(v, RP_WS_CLOSE, payload, f.len >= 2 ? 2 : 0);
			v->closing = 1;
			v->closing_ms = rp_time_now_ms();
			break;
		}
		memmove(v->in, v->in + total, v->inlen - total);
		v->inlen -= total;
	}
	if (r < 0)
		viewer_bad(v, "protocol error");
}

static void
viewer_write(struct viewer *v)
{
	while (v->outoff < v->outlen) {
		ssize_t n = write(v->conn.fd, v->out + v->outoff, v->outlen - v->outoff);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			v->dead = 1;
			return;
		}
		v->outoff += (size_t)n;
	}
}

/* Take the attachments HTTP threads queued. */
static void
attach_pending(struct rp_console *c)
{
	struct pending *p, *next;

	pthread_mutex_lock(&c->mu);
	p = c->pending;
	c->pending = NULL;
	pthread_mutex_unlock(&c->mu);
	for (; p; p = next) {
		struct session *s = session_find(c, p->uuid);
		struct viewer *v = p->v, *w;
		size_t count = 0;
		char msg[256];

		next = p->next;
		if (s == NULL && (s = session_new(c, p->uuid, p->name)) == NULL) {
			viewer_free(c, NULL, v, "");
			free(p);
			continue;
		}
		for (w = s->viewers; w; w = w->next)
			count++;
		v->next = s->viewers;
		s->viewers = v;
		free(p);
		if (count >= VIEWERS_MAX) {
			viewer_say_close(v, "too many viewers of this console", 1);
			continue;
		}
		if (s->sol == NULL && c->open >= c->j->o.console_max_sessions) {
			snprintf(msg, sizeof msg,
			         "the console limit is reached (%u open; console_max_sessions)",
			         c->j->o.console_max_sessions);
			viewer_say_close(v, msg, 1);
			continue;
		}
		s->next_try_ms = 0; /* a viewer is waiting: no back-off */
		promote(s, 1);
		if (v->writer) {
			snprintf(msg, sizeof msg, "connected to %s: you hold the console%s",
			         s->name, s->up ? "" : " (SOL connecting)");
		} else {
			struct viewer *holder = NULL;

			for (w = s->viewers; w; w = w->next)
				if (w->writer)
					holder = w;
			snprintf(msg, sizeof msg, "connected to %s read-only%s%s%s", s->name,
			         holder ? ": " : "", holder ? holder->actor : "",
			         holder ? " holds the console" : "");
		}
		viewer_status(v, "status", msg);
		event(c, s, v, "console.attached", "attached");
		v->evented = 1;
	}
}

/* ---- The loop ------------------------------------------------------------------------- */

/* Which consoles are to be logged now (their BMC settings are read when SOL is opened). */
static void
reconcile(struct rp_console *c)
{
	json_t *list = NULL, *v;
	struct session *s;
	size_t i;

	if (rp_store_console_wanted(c->j->st, c->j->o.console_mode, &list) != RP_ERR_OK)
		return;
	for (s = c->sessions; s; s = s->next)
		s->wanted = 0;
	json_array_foreach(list, i, v)
	{
		const char *uuid = json_string_value(json_object_get(v, "uuid"));
		const char *name = json_string_value(json_object_get(v, "name"));

		if (uuid == NULL || ((s = session_find(c, uuid)) == NULL &&
		                     (s = session_new(c, uuid, name)) == NULL))
			continue;
		s->wanted = 1;
	}
	json_decref(list);
	__atomic_add_fetch(&c->looks, 1, __ATOMIC_RELEASE);
}

static void
session_free(struct rp_console *c, struct session *s)
{
	size_t i;

	partial_flush(c, s);
	rp_bmc_sol_close(s->sol);
	if (s->logfd >= 0)
		close(s->logfd);
	for (i = 0; s->ring && i < RING_LINES; i++)
		free(s->ring[i].text);
	free(s->ring);
	free(s);
}

/* Close what nobody needs any more: dead and closed viewers, sessions neither logged nor
 * viewed (after LINGER_MS, so a viewer reconnecting finds its session). */
static void
sweep(struct rp_console *c, int64_t now)
{
	struct session **sp = &c->sessions, *s;

	while ((s = *sp) != NULL) {
		struct viewer **vp = &s->viewers, *v;
		int lost_writer = 0;

		while ((v = *vp) != NULL) {
			if (v->writer && !v->closing && c->j->o.console_idle_s > 0 &&
			    now - v->last_input_ms > (int64_t)c->j->o.console_idle_s * 1000) {
				char msg[128];

				snprintf(msg, sizeof msg,
				         "closed: no input for %u s (console_idle_s)",
				         c->j->o.console_idle_s);
				viewer_say_close(v, msg, 0);
			}
			/* Alive? A ping now and then; a viewer that says nothing back (a peer gone
			 * without a word) is dropped. */
			if (!v->closing && now - v->last_seen_ms > SILENT_MS) {
				v->dead = 1;
			} else if (!v->closing && now - v->last_ping_ms > PING_MS) {
				viewer_frame(v, RP_WS_PING, "", 0);
				v->last_ping_ms = now;
			}
			/* A closing viewer writes no more, and one whose close cannot get out (it
			 * stopped reading) is dropped. */
			if (v->closing && v->writer) {
				v->writer = 0;
				lost_writer = 1;
			}
			if (v->closing && now - v->closing_ms > CLOSING_MS)
				v->dead = 1;
			if (v->dead || (v->closing && v->outoff == v->outlen)) {
				*vp = v->next;
				lost_writer |= v->writer;
				viewer_free(c, s, v, v->dead ? "lost" : "closed");
				continue;
			}
			vp = &v->next;
		}
		if (lost_writer)
			promote(s, 0);
		if (s->wanted || s->viewers) {
			s->unneeded_since = 0;
		} else if (s->unneeded_since == 0) {
			s->unneeded_since = now;
		} else if (now - s->unneeded_since > LINGER_MS) {
			if (s->sol)
				log_note(c, s, "SOL closed: the console is not needed");
			struct session **hp = &c->hash[bucket(s->uuid)];

			pthread_mutex_lock(&c->mu);
			*sp = s->next;
			while (*hp != s)
				hp = &(*hp)->hnext;
			*hp = s->hnext;
			pthread_mutex_unlock(&c->mu);
			session_free(c, s);
			continue;
		}
		if (s->plen > 0 && now - s->partial_ms > PARTIAL_MS)
			partial_flush(c, s);
		sp = &s->next;
	}
}

static void *
console_thread(void *arg)
{
	struct rp_console *c = arg;
	struct pollfd *p = NULL;
	void **who = NULL;
	size_t cap = 0;

	for (;;) {
		struct session *s;
		struct viewer *v;
		size_t n = 0, i, need = 1;
		int64_t now = rp_time_now_ms();

		pthread_mutex_lock(&c->mu);
		if (c->stop) {
			pthread_mutex_unlock(&c->mu);
			break;
		}
		pthread_mutex_unlock(&c->mu);
		attach_pending(c);
		if (now >= __atomic_load_n(&c->next_reconcile, __ATOMIC_ACQUIRE)) {
			reconcile(c);
			__atomic_store_n(&c->next_reconcile, now + RECONCILE_MS, __ATOMIC_RELEASE);
		}
		c->open = 0;
		for (s = c->sessions; s; s = s->next)
			c->open += s->sol != NULL;
		for (s = c->sessions; s; s = s->next)
			if (s->wanted || s->viewers)
				sol_try(c, s, now);
		sweep(c, now);
		for (s = c->sessions; s; s = s->next) {
			need += 1;
			for (v = s->viewers; v; v = v->next)
				need++;
		}
		if (need > cap) {
			struct pollfd *np = realloc(p, need * sizeof *p);
			void **nw = np ? realloc(who, need * sizeof *who) : NULL;

			if (np)
				p = np;
			if (nw == NULL) {
				jobs_sleep_ms(100);
				continue;
			}
			who = nw;
			cap = need;
		}
		p[n].fd = c->wake[0];
		p[n].events = POLLIN;
		who[n++] = NULL;
		for (s = c->sessions; s; s = s->next) {
			if (s->sol) {
				p[n].fd = rp_bmc_sol_fd(s->sol);
				p[n].events = POLLIN;
				who[n++] = s;
			}
			for (v = s->viewers; v; v = v->next) {
				p[n].fd = v->conn.fd;
				p[n].events = (short)((v->closing ? 0 : POLLIN) |
				                      (v->outoff < v->outlen ? POLLOUT : 0));
				who[n++] = v;
			}
		}
		/* Short while a SOL session comes up: its state is polled, not signalled. */
		if (poll(p, n, 250) < 0 && errno != EINTR) {
			rp_log_warn("console: poll: %s", strerror(errno));
			jobs_sleep_ms(100);
			continue;
		}
		if (p[0].revents & POLLIN) {
			char drain[64];

			while (read(c->wake[0], drain, sizeof drain) > 0)
				;
		}
		i = 1;
		for (s = c->sessions; s && i < n; s = s->next) {
			if (s->sol && who[i] == s) {
				if (!s->up || p[i].revents)
					sol_service(c, s, p[i].revents);
				i++;
			}
			for (v = s->viewers; v && i < n; v = v->next, i++) {
				if (who[i] != v)
					break;
				if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
					viewer_read(c, s, v);
			}
		}
		/* What /metrics shows. */
		{
			struct rp_console_stats st = {0};

			for (s = c->sessions; s; s = s->next) {
				st.open += s->sol != NULL;
				st.up += s->up;
				for (v = s->viewers; v; v = v->next)
					st.viewers++;
			}
			pthread_mutex_lock(&c->mu);
			st.lines = c->seq;
			c->stats = st;
			pthread_mutex_unlock(&c->mu);
		}
		/* Output queued by this round goes out now. */
		for (s = c->sessions; s; s = s->next)
			for (v = s->viewers; v; v = v->next)
				if (v->outoff < v->outlen)
					viewer_write(v);
	}
	free(p);
	free(who);
	return NULL;
}

/* ---- The interface (jobs.h) ------------------------------------------------------------ */

int
jobs_console_start(struct rp_jobs *j)
{
	struct rp_console *c = calloc(1, sizeof *c);
	int fl;

	if (c == NULL)
		return -1;
	c->j = j;
	c->wake[0] = c->wake[1] = -1;
	pthread_mutex_init(&c->mu, NULL);
	if (pipe(c->wake) < 0 || (fl = fcntl(c->wake[0], F_GETFL)) < 0 ||
	    fcntl(c->wake[0], F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(c->wake[1], F_SETFL, fl | O_NONBLOCK) < 0)
		goto fail;
	if (j->o.console_dir && mkdir(j->o.console_dir, 0750) < 0 && errno != EEXIST) {
		rp_log_error("console: cannot create %s: %s", j->o.console_dir, strerror(errno));
		goto fail;
	}
	if (pthread_create(&c->thread, NULL, console_thread, c) != 0)
		goto fail;
	c->started = 1;
	j->console = c;
	return 0;
fail:
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return -1;
}

void
jobs_console_stop(struct rp_jobs *j)
{
	struct rp_console *c = j->console;
	struct session *s, *next;
	struct pending *p, *pn;

	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_mutex_unlock(&c->mu);
	wake(c);
	if (c->started)
		pthread_join(c->thread, NULL);
	for (s = c->sessions; s; s = next) {
		struct viewer *v, *vn;

		next = s->next;
		for (v = s->viewers; v; v = vn) {
			vn = v->next;
			viewer_say_close(v, "the server is stopping", 0);
			viewer_write(v);
			viewer_free(c, NULL, v, "");
		}
		session_free(c, s);
	}
	for (p = c->pending; p; p = pn) {
		pn = p->next;
		viewer_free(c, NULL, p->v, "");
		free(p);
	}
	close(c->wake[0]);
	close(c->wake[1]);
	pthread_mutex_destroy(&c->mu);
	free(c);
	j->console = NULL;
}

enum rp_err
rp_jobs_console_check(struct rp_jobs *j, const char *node, int need_console, char uuid[RP_UUID_BUF],
                      char *name, size_t namelen, char *why, size_t whylen)
{
	struct rp_power_target t = {0};
	struct rp_bmc_target bt;
	struct rp_bmc_err err = {0};
	enum rp_err e;

	if (!need_console)
		return rp_store_node_names(j->st, node, uuid, name, namelen);
	e = rp_store_console_target(j->st, node, &t);

	if (e == RP_ERR_CONFLICT)
		snprintf(why, whylen, "node %s has no IPMI or Redfish BMC with an address", node);
	if (e != RP_ERR_OK)
		return e;
	if (jobs_bmc_target(&t.bmc, t.uuid, &bt, &err) < 0) {
		snprintf(why, whylen, "%s", err.msg);
		e = RP_ERR_CONFLICT;
	} else if (!bt.console) {
		snprintf(why, whylen,
		         "node %s's BMC has no serial console Rackpilot can reach: a Redfish BMC "
		         "needs bmc.options.console \"ipmi\" (its IPMI Serial over LAN)",
		         t.name ? t.name : node);
		e = RP_ERR_UNSUPPORTED;
	} else {
		snprintf(uuid, RP_UUID_BUF, "%s", t.uuid);
		snprintf(name, namelen, "%s", t.name ? t.name : node);
	}
	explicit_bzero(&bt, sizeof bt);
	rp_store_power_target_clear(&t);
	return e;
}

enum rp_err
rp_jobs_console_attach(struct rp_jobs *j, const char *uuid, const char *name,
                       const struct rp_console_conn *conn, int write, const char *actor)
{
	struct rp_console *c = j->console;
	struct pending *p = calloc(1, sizeof *p);
	struct viewer *v = calloc(1, sizeof *v);

	if (c == NULL || p == NULL || v == NULL) {
		free(p);
		free(v);
		if (conn->close)
			conn->close(conn->arg);
		return RP_ERR_INTERNAL;
	}
	v->conn = *conn;
	v->wants_write = write;
	v->last_input_ms = v->last_seen_ms = v->last_ping_ms = rp_time_now_ms();
	snprintf(v->actor, sizeof v->actor, "%s", actor ? actor : "?");
	snprintf(p->uuid, sizeof p->uuid, "%s", uuid);
	snprintf(p->name, sizeof p->name, "%s", name);
	p->v = v;
	pthread_mutex_lock(&c->mu);
	p->next = c->pending;
	c->pending = p;
	pthread_mutex_unlock(&c->mu);
	wake(c);
	return RP_ERR_OK;
}

uint64_t
rp_jobs_console_generation(struct rp_jobs *j)
{
	return j && j->console ? __atomic_load_n(&j->console->gen, __ATOMIC_ACQUIRE) : 0;
}

long
rp_jobs_console_read(struct rp_jobs *j, const char *uuid, uint64_t *next, char *buf, size_t max)
{
	struct rp_console *c = j->console;
	struct session *s;
	size_t used = 0;
	int full = 0;

	if (c == NULL)
		return -1;
	pthread_mutex_lock(&c->mu);
	if (*next == 0)
		*next = c->seq + 1; /* from now */
	if ((s = session_find(c, uuid)) != NULL && s->ring) {
		uint64_t k = s->head > RING_LINES ? s->head - RING_LINES : 0;

		/* The ring holds its console's latest lines in order; those from *next on. */
		for (; k < s->head && !full; k++) {
			struct line *l = &s->ring[k % RING_LINES];
			int n;

			if (l->text == NULL || l->seq < *next)
				continue;
			n = snprintf(buf + used, max - used, "id: %llu\ndata: %s\n\n",
			             (unsigned long long)l->seq, l->text);
			if (n < 0 || (size_t)n >= max - used) {
				full = 1;
				break;
			}
			used += (size_t)n;
			*next = l->seq + 1;
		}
	}
	/* Nothing of this console up to now is left to send: skip past other consoles' lines. */
	if (!full && *next <= c->seq)
		*next = c->seq + 1;
	pthread_mutex_unlock(&c->mu);
	return (long)used;
}

enum rp_err
rp_jobs_console_log(struct rp_jobs *j, const char *node, unsigned tail, char **out, size_t *len)
{
	struct rp_buf b;
	char path[512], uuid[RP_UUID_BUF], name[64];
	int old, lines = 0;
	size_t start;
	enum rp_err e;

	if ((e = rp_store_node_names(j->st, node, uuid, name, sizeof name)) != RP_ERR_OK)
		return e;
	if (j->o.console_dir == NULL) {
		*out = strdup("");
		*len = 0;
		return *out ? RP_ERR_OK : RP_ERR_INTERNAL;
	}

	/* The older file first, then the current one; then from where the last tail lines
	 * begin. */
	rp_buf_init(&b, (size_t)j->o.console_log_bytes + 1);
	for (old = 1; old >= 0; old--) {
		char *data = NULL;
		size_t n = 0;

		log_path(j->o.console_dir, uuid, old, path, sizeof path);
		if (rp_file_read(path, (size_t)j->o.console_log_bytes, &data, &n) == 0) {
			rp_buf_append(&b, data, n);
			free(data);
		}
	}
	if (b.oom || b.toobig) {
		rp_buf_free(&b);
		return RP_ERR_INTERNAL;
	}
	/* Back from the end (past the last line's own end) to the tail-th line end. */
	start = b.len;
	if (start > 0 && b.data[start - 1] == '\n')
		start--;
	while (start > 0) {
		if (b.data[start - 1] == '\n' && ++lines == (int)tail)
			break;
		start--;
	}
	*len = b.len - start;
	if ((*out = malloc(*len + 1)) == NULL) {
		rp_buf_free(&b);
		return RP_ERR_INTERNAL;
	}
	if (*len)
		memcpy(*out, b.data + start, *len);
	(*out)[*len] = '\0';
	rp_buf_free(&b);
	return RP_ERR_OK;
}

void
rp_jobs_console_stats(struct rp_jobs *j, struct rp_console_stats *out)
{
	struct rp_console *c = j ? j->console : NULL;

	memset(out, 0, sizeof *out);
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	*out = c->stats;
	pthread_mutex_unlock(&c->mu);
}

void
jobs_console_wait(struct rp_jobs *j, const char *uuid, unsigned ms)
{
	struct rp_console *c = j->console;
	int64_t start = rp_time_now_ms();
	uint64_t looks;

	if (c == NULL || !strcmp(j->o.console_mode ?: "", "off"))
		return;
	/* Ask now, not at the next look: the node has just become one to log. */
	looks = __atomic_load_n(&c->looks, __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->next_reconcile, 0, __ATOMIC_RELEASE);
	wake(c);
	for (;;) {
		struct session *s;
		int up = 0, wanted = 0, failed = 0;
		int looked = __atomic_load_n(&c->looks, __ATOMIC_ACQUIRE) > looks;

		pthread_mutex_lock(&c->mu);
		if ((s = session_find(c, uuid)) != NULL) {
			up = __atomic_load_n(&s->up, __ATOMIC_ACQUIRE);
			wanted = __atomic_load_n(&s->wanted, __ATOMIC_ACQUIRE);
			/* A try that failed (no console, the session cap): the boot does not wait.
			 */
			failed = s->sol == NULL && s->error[0] != '\0';
		}
		pthread_mutex_unlock(&c->mu);
		/* Up; not to be logged (a look has seen the node since the ask); or no use. */
		if (up || failed || (looked && !wanted) || rp_time_now_ms() - start >= (int64_t)ms)
			return;
		jobs_sleep_ms(20);
	}
}
