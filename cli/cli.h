/*
 * cli/cli.h — the rackpilot command-line client: one module header for its files.
 *
 * main.c: the command table, the command line, the configuration. run.c: the generic command
 * (a row's method, path, options and output spec are the whole command). follow.c: what is
 * more than one request (jobs, batches, events, import). http.c talks to rackpilotd; out.c
 * formats. The CLI shares include/rackpilot/ with the server, and of server/util/ only the
 * capped buffer (struct rp_buf, util/buf.c: answers and files have hard caps).
 */
#ifndef RP_CLI_H
#define RP_CLI_H

#include <stddef.h>

#include <jansson.h>

#include <rackpilot/tls.h>

#define RP_CLI_BODY_MAX (64u << 20) /* cap on any answer, import file or --json file */
#define RP_CLI_OPTS_MAX 48

/* Exit codes. */
enum { RP_CLI_OK = 0, RP_CLI_EAPI = 1, RP_CLI_EUSAGE = 2, RP_CLI_EPARTIAL = 3 };

struct rp_cli;

/*
 * One row of the command table: `rackpilot NOUN [VERB] ARGS`. For the generic command
 * (rp_cli_run) the row is the whole command:
 *   path  "/v1/nodes/%s": each %s takes the next positional argument; "A|B": A when no
 *         positional is given, else B.
 *   opts  space-separated: "wait" a flag; "rack=" takes a value, sent as query parameter
 *         rack (GET) or body member rack; "u=u_position:i" names the member (dotted for
 *         nested objects) and its type (:i integer, :n number, :b boolean, :l comma list,
 *         default string; a flag with :b sets true); "+role=" a required option; "json=" the body
 *         from a file; "@name" the next unused positional argument is body member name;
 *         "%target" body member target is the verb ('-' as '_'); "%on:b" member on is
 *         true unless the verb is "off".
 *   out   GET: sections separated by ';': "." the object (arrays of objects left out),
 *         "KEY:HDR=path,..." a table of the answer's array KEY (empty KEY: its items, or the
 *         answer as one row). Other methods: a line with {path} from the answer, {0} for the
 *         first positional argument.
 */
struct rp_cli_cmd {
	const char *noun;
	const char *verb; /* NULL: the noun is the whole command (events) */
	int (*run)(struct rp_cli *c);
	int min_args, max_args;
	const char *method;
	const char *path;
	const char *opts;
	const char *out;
	const char *args; /* positional arguments, for the usage line */
	const char *help;
};

struct rp_cli_opt {
	const char *name;
	const char *value; /* "" for a flag */
};

struct rp_cli {
	char url[1024];   /* base URL, no trailing slash */
	char token[1024]; /* the API token: a secret, never printed */
	int json;         /* print the API's JSON */
	int verbose;      /* a stderr line per request: method, URL, status; never headers */
	int tty;          /* stdout is a terminal: progress bars */
	/* Server verification, "" for none. cacert: the chain against this file alone, and the
	 * host name. fingerprint: as given until configure(), then 64 lowercase hex digits; pin
	 * its CURLOPT_PINNEDPUBLICKEY value (without cacert, in place of the CA and host name
	 * checks). seen_fp: the server's key in the last handshake, when libcurl told. */
	char cacert[1024];
	char fingerprint[128];
	char pin[RP_TLS_PIN_MAX];
	char seen_fp[RP_TLS_FP_HEX];
	const struct rp_cli_cmd *cmd;
	int argc; /* positional arguments after noun and verb */
	char **argv;
	struct rp_cli_opt opts[RP_CLI_OPTS_MAX];
	int nopts;
	void *curl; /* CURL *, reused for every request */
	char *raw;  /* body of the last successful rp_cli_call, for --json */
	size_t rawlen;
};

struct rp_cli_resp {
	long status;
	char *body; /* NUL-terminated; owned, free with rp_cli_resp_free */
	size_t len;
};

/* ---- main.c ------------------------------------------------------------------------------ */

/* The value of option NAME ("" for a flag that was given), or NULL when it was not given. */
const char *rp_cli_opt(const struct rp_cli *c, const char *name);

/* Prints why (if not NULL) and the command's usage line to stderr; returns RP_CLI_EUSAGE. */
int rp_cli_usage(const struct rp_cli *c, const char *why);

/* ---- http.c ------------------------------------------------------------------------------ */

/* Opens the curl handle: 0, or -1 (printed). rp_cli_http_free closes it and frees c->raw; it
 * accepts a c never opened. */
int rp_cli_http_init(struct rp_cli *c);
void rp_cli_http_free(struct rp_cli *c);

/*
 * One request to c->url + path (escaped already); body may be NULL, ctype is its type.
 * Returns 0 with *r filled for any HTTP status (free it with rp_cli_resp_free), or -1 after
 * printing why no answer came (a connection failure names the URL; a server key that does not
 * match c->pin names the pinned fingerprint and, when libcurl told, the server's; an answer
 * over the cap). The token goes only into the Authorization header, and only to a server that
 * passed the c->cacert and c->pin checks (they come before any byte of the request).
 */
int rp_cli_http(struct rp_cli *c, const char *method, const char *path, const char *ctype,
                const char *body, size_t blen, struct rp_cli_resp *r);

/* Frees what r holds and zeroes it; accepts a zeroed r. */
void rp_cli_resp_free(struct rp_cli_resp *r);

/* Prints "rackpilot: CODE: message (detail)" for an error answer to stderr. */
void rp_cli_print_error(const struct rp_cli *c, const struct rp_cli_resp *r);

/*
 * A JSON request: body (borrowed, may be NULL) goes as application/json. On 2xx returns
 * RP_CLI_OK, *out the answer (NULL for an empty body; out may be NULL) and c->raw its bytes;
 * otherwise prints the error and returns RP_CLI_EAPI.
 */
int rp_cli_call(struct rp_cli *c, const char *method, const char *path, json_t *body, json_t **out);

/*
 * GET a page list, following next_cursor to the end when all is set (path may carry a
 * query). *page is the first page with every item in its items; c->raw is that page's
 * bytes, or the merged page when there were more. RP_CLI_OK or RP_CLI_EAPI.
 */
int rp_cli_list(struct rp_cli *c, const char *path, int all, json_t **page);

/* Writes c->raw (the API's JSON, unchanged) to stdout, newline-terminated. */
void rp_cli_print_raw(const struct rp_cli *c);

/*
 * GET path as a stream: the chunks of a 200 answer whose Content-Type starts with ctype go
 * to sink (0: go on, -1: stop). last_id, when not NULL, is sent as Last-Event-ID. Returns
 * the HTTP status; 0 when no answer came (the reason printed).
 */
long rp_cli_stream(struct rp_cli *c, const char *path, const char *ctype, const char *last_id,
                   int (*sink)(const char *data, size_t len, void *arg), void *arg);

/*
 * Connects to the server of c->url with the checks of rp_cli_http (c->cacert, c->pin: a server
 * that fails them gets no byte) and stops there (CURLOPT_CONNECT_ONLY, HTTP/1.1 in ALPN); the
 * caller then speaks over c->curl with curl_easy_send and curl_easy_recv (non-blocking:
 * CURLE_AGAIN). *fd: the connection's socket, for poll. 0, or -1 after printing why (as
 * rp_cli_http). The connection lasts until the next request on c->curl or rp_cli_http_free.
 */
int rp_cli_connect(struct rp_cli *c, int *fd);

/* Appends fmt to out (size len), percent-encoding each %s argument (only %s is understood).
 * 0, or -1 when it does not fit. */
int rp_cli_pathf(char *out, size_t len, const char *fmt, ...);

/* Appends "?name=value" or "&name=value" (value encoded) when value is not NULL. 0 or -1. */
int rp_cli_query(char *out, size_t len, const char *name, const char *value);

/* Sleeps ms milliseconds. */
void rp_cli_sleep_ms(long ms);

/* ---- out.c ------------------------------------------------------------------------------- */

/* Member at a dotted path of o (borrowed), or NULL; rp_cli_str: its string, or dflt. */
json_t *rp_cli_get(json_t *o, const char *path);
const char *rp_cli_str(json_t *o, const char *path, const char *dflt);

/* A value for a cell, into buf: strings as they are, null "-", booleans yes/no, arrays
 * comma-joined (an object in one as its values), objects compact JSON. Returns buf. */
const char *rp_cli_fmt(json_t *v, char *buf, size_t len);

/* Prints o by the output spec of a GET row (see struct rp_cli_cmd). 0, or -1 (out of memory). */
int rp_cli_print(json_t *o, const char *spec);

/* Prints a template line: {path} from o, {0} for arg0 (see struct rp_cli_cmd). */
void rp_cli_print_line(const char *tmpl, json_t *o, const char *arg0);

/* Writes s to stdout, control characters as '?': the server's text never steers the terminal. */
void rp_cli_puts_clean(const char *s);

/* ---- run.c ------------------------------------------------------------------------------- */

/* One token of an opts spec (see struct rp_cli_cmd). */
struct rp_cli_tok {
	char sigil;      /* '@', '%', '+' (required) or 0 */
	char flag[32];   /* the option's name */
	char member[64]; /* body member or query parameter */
	char type;       /* 's', 'i', 'n', 'b', 'l', 'j' */
	int valued;      /* the option takes a value */
};

/* Parses the token at p (up to a space or the end) into *t; returns its length. */
size_t rp_cli_tok(const char *p, struct rp_cli_tok *t);

/* The token of option name in spec: 0 and *t, or -1 when spec has none. */
int rp_cli_find(const char *spec, const char *name, struct rp_cli_tok *t);

/* The request body from --json FILE, the positionals from *used on, the verb and the options
 * (see struct rp_cli_cmd). RP_CLI_OK and *out, or an exit code (the reason printed). */
int rp_cli_body(struct rp_cli *c, int *used, json_t **out);

/* The generic command: path, query or body, request, output (--wait follows the job). */
int rp_cli_run(struct rp_cli *c);

/* Reads a whole file ("-": stdin) up to RP_CLI_BODY_MAX. NUL-terminated, malloc'd; NULL with
 * a message printed. */
char *rp_cli_read_file(const char *path, size_t *len);

/* ---- follow.c: commands of more than one request ----------------------------------------- */

int rp_cli_power(struct rp_cli *c);  /* one node (generic), or a batch followed */
int rp_cli_import(struct rp_cli *c); /* a CSV or JSON file as it is */
int rp_cli_job_show(struct rp_cli *c);
int rp_cli_job_watch(struct rp_cli *c);
int rp_cli_events(struct rp_cli *c); /* --follow: Server-Sent Events, or polling */

/* Follows the batch whose 202 answer is created to its end (skipped nodes, then a line per
 * change of its counts, then each failed node's error). With --json, prints the final batch.
 * RP_CLI_OK, RP_CLI_EPARTIAL when a node failed or was skipped, or RP_CLI_EAPI. */
int rp_cli_batch_follow(struct rp_cli *c, json_t *created);

/* ---- power.c: sensors, rack power and power caps (docs/power.md) ------------------------- */

int rp_cli_sensors(struct rp_cli *c);      /* a node's sensors: a line, then a table */
int rp_cli_sensors_sync(struct rp_cli *c); /* --wait: until the sweep ends; exit 3 on failures */
int rp_cli_power_show(struct rp_cli *c);   /* every rack, or one rack and its nodes, in kW */
int rp_cli_power_cap(struct rp_cli *c);    /* plan a rack's caps, queue them; --wait follows */
int rp_cli_power_caps(struct rp_cli *c);   /* planned caps against the BMCs' (--rack, --drift) */

/* ---- console.c: a node's serial console over the server's WebSocket ---------------------- */

/*
 * `console NODE [--read-only]`: GET /v1/nodes/{node}/console as a WebSocket (the token in
 * Authorization, ?mode=read for --read-only). The console's bytes go to stdout as they come;
 * typed bytes go to the server while it lets this session write (else they are dropped, with
 * a notice). A terminal on stdin is put in raw mode (restored on every way out, SIGINT,
 * SIGTERM and SIGHUP included) and has ssh's escapes after '~' at a line's start: "." leaves,
 * "B" sends a serial break, "?" lists them, "~" sends one '~'. Other stdin is sent as it is;
 * its end closes the session a second later. The server's control messages go to stderr as
 * "[console: ...]". RP_CLI_OK when the session ended as asked (escape, stdin's end, the
 * server's normal close or a "closed" message without "error"); RP_CLI_EAPI for a refused
 * request (printed as API errors are), a lost connection, a protocol error (a frame over
 * 1 MiB among them) or the server's error close.
 */
int rp_cli_console(struct rp_cli *c);

/*
 * Follows job id until it ends: a progress bar on a terminal, else a line per state change;
 * its log goes to stdout as it grows. With --json, prints the final job. RP_CLI_OK when it
 * succeeded, RP_CLI_EAPI otherwise (the reason printed).
 */
int rp_cli_job_follow(struct rp_cli *c, const char *id);

#endif
