/*
 * agent.h — rackpilot-agent's one module header: configuration, the HTTP client, downloads,
 * the step-output tail, plans and their steps, registration and heartbeats.
 * docs/agent-protocol.md is the contract; rackpilot/agent.h holds the shared constants.
 */
#ifndef RP_AGENT_AGENT_H
#define RP_AGENT_AGENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "inventory.h" /* rp_agent_inventory(): NULL only when memory runs out */
#include "run.h"       /* rp_agent_proc_run(): the one process runner */
#include "rackpilot/agent.h"
#include "rackpilot/tls.h"
#include "rackpilot/common.h"

/* ---- Configuration (config.c) --------------------------------------------------------- */

#define RP_AGENT_CONF_DEFAULT "/etc/rackpilot/agent.conf"
#define RP_AGENT_PATH_MAX     4096

struct rp_agent_config {
	char url[2048];
	char bootstrap_token[256];
	char token_file[RP_AGENT_PATH_MAX]; /* "" until load: then state_dir/token */
	char state_dir[RP_AGENT_PATH_MAX];
	char root[RP_AGENT_PATH_MAX];
	char ssh_host_key[RP_AGENT_PATH_MAX];
	char ssh_address[256];
	unsigned ssh_port; /* 0: not set (22 when ssh_address is) */
	char authorized_keys[RP_AGENT_PATH_MAX];
	char reboot_command[RP_AGENT_PATH_MAX];
	int tls_verify;
	char ca_file[RP_AGENT_PATH_MAX];
	/* The server's public key (rackpilot/tls.h), 64 lowercase hex digits; "" not pinned.
	 * Pinned and no ca_file: the pin replaces CA and host name verification. */
	char server_fingerprint[RP_TLS_FP_HEX];
	unsigned heartbeat_s; /* 0: the server's */
	unsigned file_set;    /* a bit per key (config.c's table) a file has set */
};

/* What the command line says; NULL members were not given. */
struct rp_agent_flags {
	const char *config; /* -c FILE: must exist */
	const char *root;
	const char *url;
};

/* Fill c with the compiled-in defaults. */
void rp_agent_config_defaults(struct rp_agent_config *c);

/* The keys table, row i (the order of docs/agent-protocol.md): returns the key, or NULL past
 * the last row. *def is its default as the doc writes it ("" when none), *unset what no value
 * means where the doc says more than "—" (else ""), *help one line that the doc's meaning of
 * the key contains. All static strings. */
const char *rp_agent_config_key(size_t i, const char **def, const char **unset, const char **help);

/* Apply one `key = value` setting. 0, or -1 with err set (c unchanged). */
int rp_agent_config_set(struct rp_agent_config *c, const char *key, const char *value, char *err,
                        size_t errlen);

/* Apply a config file: `key = value` lines, `#` comments, a value may be "quoted" to keep
 * blanks. A missing file is fine unless must_exist. 0, or -1 with err naming file:line (c is
 * then unchanged). */
int rp_agent_config_file(struct rp_agent_config *c, const char *path, int must_exist, char *err,
                         size_t errlen);

/* Apply rackpilot.url=, rackpilot.token= and rackpilot.tls_sha256= from a kernel command line,
 * except where a file already set url, bootstrap_token or server_fingerprint. Unknown words
 * and malformed values are ignored (a malformed tls_sha256 with a warning logged). */
void rp_agent_config_cmdline(struct rp_agent_config *c, const char *cmdline);

/* The whole precedence: defaults < ROOT/proc/cmdline < file (flags->config, else the default
 * path) < flags. Fills in token_file. 0 and *c set, or -1 with err set. */
int rp_agent_config_load(struct rp_agent_config *c, const struct rp_agent_flags *flags, char *err,
                         size_t errlen);

/* root joined with an absolute path rel ("/" + "/proc/x" = "/proc/x") into buf. 0, or -1
 * when it does not fit. */
int rp_agent_path(const char *root, const char *rel, char *buf, size_t n);

/* First line of ROOT/rel, trimmed, into buf (n bytes). 0, or -1 when unreadable or empty. */
int rp_agent_read_line(const char *root, const char *rel, char *buf, size_t n);

/* Create dir (one level) with mode 0700 unless it exists. 0 or -1 with errno. */
int rp_agent_mkdir(const char *dir);

/* ---- HTTP client (client.c) ----------------------------------------------------------- */

/* Set from a signal handler: aborts transfers and backoff sleeps as soon as possible. */
extern volatile sig_atomic_t rp_agent_stopping;

/* Set when the job being run was cancelled (the server says so, or SIGTERM): the running
 * step's process group is stopped, downloads abort, and no further step starts. */
extern volatile sig_atomic_t rp_agent_cancelled;

/* Outcomes of rp_agent_call() that are not HTTP statuses. EPROTO also stands for a server
 * key that does not match server_fingerprint. */
#define RP_AGENT_ENET   (-1) /* no answer: DNS, connect, TLS, timeout (transient) */
#define RP_AGENT_EPROTO (-2) /* an answer we refuse: too large, not JSON (not transient) */
#define RP_AGENT_ELOCAL (-3) /* a failure on this side (files, memory); not transient */

struct rp_agent_client;

/* A client for cfg's url, tls_verify, ca_file and server_fingerprint (cfg must outlive it).
 * NULL on allocation failure. */
struct rp_agent_client *rp_agent_client_new(const struct rp_agent_config *cfg);
/* Accepts NULL. */
void rp_agent_client_free(struct rp_agent_client *cl);

/* Attempts rp_agent_call_retry() makes before giving up (default 6: waits 1+2+4+8+16 s). */
void rp_agent_client_set_attempts(struct rp_agent_client *cl, unsigned attempts);

/* One request: method to url + path with `Authorization: Bearer bearer` (unless NULL) and
 * body as JSON (unless NULL). Returns the HTTP status or RP_AGENT_ENET/EPROTO/ELOCAL. On 2xx
 * sets *answer to the parsed body (new reference; NULL for an empty body); otherwise err says
 * why, with the server's {"error": {code, message, detail}} when it sent one. Bodies over
 * 1 MiB are refused. With server_fingerprint set, a plain-http url is refused (ELOCAL) and a
 * server whose key does not match gets nothing, not even the request line (EPROTO). */
long rp_agent_call(struct rp_agent_client *cl, const char *method, const char *path,
                   const char *bearer, json_t *body, json_t **answer, char *err, size_t errlen);

/* The server's key as libcurl saw it in a transfer's handshake (see rp_agent_tls_setup). */
struct rp_agent_tls {
	char seen[RP_TLS_FP_HEX]; /* "" until seen */
};

/* TLS settings of one transfer on curl (a CURL *): tls_verify and ca_file, and, when pinned,
 * server_fingerprint, with t (which must outlive the transfer) catching the server's key for
 * rp_agent_tls_mismatch(). */
void rp_agent_tls_setup(void *curl, const struct rp_agent_config *cfg, int pinned,
                        struct rp_agent_tls *t);

/* err = what: the mismatch, naming the pinned fingerprint and the server's when seen. */
void rp_agent_tls_mismatch(const struct rp_agent_config *cfg, const struct rp_agent_tls *t,
                           const char *what, char *err, size_t errlen);

/* rp_agent_call(), repeated with backoff while the outcome is transient. */
long rp_agent_call_retry(struct rp_agent_client *cl, const char *method, const char *path,
                         const char *bearer, json_t *body, json_t **answer, char *err,
                         size_t errlen);

/* 1 when an outcome of rp_agent_call() is worth retrying (no answer, 408, 429, 5xx). */
int rp_agent_transient(long status);

/* Sleep ms milliseconds unless rp_agent_stopping is or becomes set. 0, or -1 when stopped. */
int rp_agent_sleep_ms(int64_t ms);

/* ---- Downloads and hashing (download.c) ----------------------------------------------- */

/* Stream url (http/https, at most 5 redirects, HTTP >= 400 fails; a path starting with '/'
 * is relative to cfg's url) into fd, hashing what is written; the whole transfer may take
 * timeout_s. cfg supplies tls_verify and ca_file, and server_fingerprint for an https URL of
 * the server's own origin (scheme, host and port as written in url; it then holds for the
 * redirects too); no token is sent. 0 with hex and *bytes set, or -1 with err set (fd may
 * hold a partial download; *bytes still says how much was written). */
int rp_agent_download(const struct rp_agent_config *cfg, const char *url, int fd,
                      unsigned timeout_s, char hex[RP_SHA256_HEX], uint64_t *bytes, char *err,
                      size_t errlen);

/* Where a download goes (rp_agent_download_to): write() gets each piece in order, after it
 * is hashed, and returns 0, or -1 to stop the transfer (the sink keeps its own reason). */
struct rp_agent_sink {
	int (*write)(struct rp_agent_sink *s, const void *p, size_t n);
	void *arg;
	int64_t total;  /* set before the first write: the Content-Length, -1 when not sent */
	uint64_t bytes; /* bytes passed to write() so far */
};

/* rp_agent_download() into a sink instead of an fd (same URLs, TLS and timeout; sink->total
 * and sink->bytes are set here). 0 with hex set, or -1 with err set; when the sink stopped the
 * transfer, err says only that ("stopped by the writer") and the sink knows why. */
int rp_agent_download_to(const struct rp_agent_config *cfg, const char *url, unsigned timeout_s,
                         struct rp_agent_sink *sink, char hex[RP_SHA256_HEX], char *err,
                         size_t errlen);

/* 1 when s is 64 hex digits. */
int rp_agent_sha256_valid(const char *s);

/* ---- Images written as they stream in (image.c) -------------------------------------- */

/* clang-format off */
#define RP_AGENT_IMAGE_FORMATS(X)                                                                  \
	X(RAW, "raw")                                                                              \
	X(GZIP, "gzip")                                                                            \
	X(ZSTD, "zstd")                                                                            \
	X(XZ, "xz")                                                                                \
	X(QCOW2, "qcow2")

enum rp_agent_image_format {
#define RP_AGENT_IMAGE_FORMAT_ENUM(name, wire) RP_IMAGE_##name,
	RP_AGENT_IMAGE_FORMATS(RP_AGENT_IMAGE_FORMAT_ENUM)
#undef RP_AGENT_IMAGE_FORMAT_ENUM
	RP_IMAGE__COUNT
};
/* clang-format on */

/* The longest text of each member of an image step's seed (meta-data, user-data, ...). */
#define RP_AGENT_SEED_MAX RP_SEED_FILE_MAX

/* Hard caps on what a qcow2 image may ask of the agent. */
#define RP_QCOW2_L1_MAX         (4u << 20)  /* L1 entries (a 32 MiB table, as QEMU's cap) */
#define RP_QCOW2_PENDING_MAX    (1u << 20)  /* clusters known and not reached yet */
#define RP_QCOW2_LOOKBEHIND_MAX (64u << 20) /* bytes kept in case a later table needs them */

/* The wire name ("raw", "gzip", "zstd", "xz", "qcow2"); "?" out of range. Static storage. */
const char *rp_agent_image_format_name(enum rp_agent_image_format f);

/* 0 and *f set, or -1 when name is not a format. */
int rp_agent_image_format_parse(const char *name, enum rp_agent_image_format *f);

struct rp_agent_image;

/* A writer of a format-f download's decoded bytes to fd from offset 0: a block device when
 * blk (zeroed with BLKZEROOUT), else a regular file standing for a disk (holes punched; it
 * grows to the image's size at the end, and never shrinks). limit: the most bytes the target may
 * hold (its size), 0: no limit. fd stays the caller's. NULL on allocation failure. */
struct rp_agent_image *rp_agent_image_new(int fd, int blk, enum rp_agent_image_format f,
                                          uint64_t limit);
/* Accepts NULL. */
void rp_agent_image_free(struct rp_agent_image *im);

/* The next n bytes of the download. The first ones are checked against the format (magic
 * numbers). 0, or -1 with rp_agent_image_error() saying why; after a failure it takes
 * nothing more. */
int rp_agent_image_feed(struct rp_agent_image *im, const void *p, size_t n);

/* The download is complete: write what is held, check that the stream ended where the format
 * says it does (a truncated stream fails), zero what a qcow2 image leaves unwritten and grow a
 * regular file shorter than the image (a decoded stream's length, a qcow2's virtual size). No
 * fsync. 0, or -1 with rp_agent_image_error(). */
int rp_agent_image_finish(struct rp_agent_image *im);

/* Why the last call failed ("" when none did); the writer's storage. */
const char *rp_agent_image_error(const struct rp_agent_image *im);

/* What a writer has done so far. */
struct rp_agent_image_stats {
	uint64_t bytes_in;      /* fed */
	uint64_t bytes_written; /* written to the target */
	uint64_t bytes_zeroed;  /* zeroed on the target (qcow2: clusters without data) */
	uint64_t size;          /* the image's size: qcow2's virtual size, else the decoded
	                           length so far */
};

void rp_agent_image_stats(const struct rp_agent_image *im, struct rp_agent_image_stats *st);

/* ---- Output tail (tail.c) ------------------------------------------------------------- */

/* The last RP_STEP_OUTPUT_TAIL bytes of a step's output, and how many there were. Zero it
 * to start. */
struct rp_agent_tail {
	unsigned char buf[RP_STEP_OUTPUT_TAIL];
	size_t head; /* where the next byte goes */
	size_t len;  /* bytes held, at most sizeof buf */
	uint64_t total;
};

/* Append n bytes; what no longer fits falls off the front. */
void rp_agent_tail_add(struct rp_agent_tail *t, const void *p, size_t n);

/* 1 when output was lost off the front (total > what a result can carry). */
int rp_agent_tail_truncated(const struct rp_agent_tail *t);

/* The held bytes as valid UTF-8 of at most RP_STEP_OUTPUT_TAIL bytes (see
 * rp_agent_utf8_clean; a partial leading sequence is dropped when bytes were lost). New
 * NUL-terminated buffer, length in *len; NULL on allocation failure. */
char *rp_agent_tail_text(const struct rp_agent_tail *t, size_t *len);

/* p[0..n) as valid UTF-8: every maximal invalid subsequence and every NUL (which JSON
 * parsers refuse) becomes U+FFFD. With skip_partial, continuation bytes at the very start
 * (the rest of a character cut off in front) are dropped instead. When the result would
 * exceed cap bytes, whole characters are dropped from the front. New NUL-terminated buffer,
 * length in *len; NULL on allocation failure. */
char *rp_agent_utf8_clean(const void *p, size_t n, int skip_partial, size_t cap, size_t *len);

/* ---- Plans (plan.c) ------------------------------------------------------------------- */

/* The X-macro lists end without a comma, which clang-format cannot see. */
/* clang-format off */
enum rp_step_type {
#define RP_STEP_TYPE_ENUM(name, wire) RP_STEP_##name,
	RP_STEP_TYPES(RP_STEP_TYPE_ENUM)
#undef RP_STEP_TYPE_ENUM
	RP_STEP__COUNT
};
/* clang-format on */

/* clang-format off */
enum rp_step_state {
#define RP_STEP_STATE_ENUM(name, wire) RP_STATE_##name,
	RP_STEP_STATES(RP_STEP_STATE_ENUM)
#undef RP_STEP_STATE_ENUM
	RP_STATE__COUNT
};
/* clang-format on */

/* Wire names; "?" out of range. Static storage. */
const char *rp_step_type_name(enum rp_step_type t);
const char *rp_step_state_name(enum rp_step_state s);

/* Parse a wire state name. 0 and *s set, or -1 when unknown. */
int rp_step_state_parse(const char *name, enum rp_step_state *s);

/* One checked step; strings and obj belong to the plan. */
struct rp_agent_step {
	const char *id;
	enum rp_step_type type;
	unsigned timeout_s;
	int continue_on_error;
	int rerun_interrupted;
	json_t *obj; /* type-specific members, all checked */
};

struct rp_agent_plan {
	json_t *json;
	const char *job;
	size_t nsteps;
	struct rp_agent_step steps[RP_PLAN_MAX_STEPS];
};

/* Parse and check a plan (docs/agent-protocol.md) sent for job: at most RP_PLAN_MAX_BYTES,
 * format 1, the same job, 1..RP_PLAN_MAX_STEPS steps with unique, well-formed ids, known
 * types, their required members and no unknown ones. New plan, or NULL with err naming the
 * offending step and member. */
struct rp_agent_plan *rp_agent_plan_parse(const char *text, size_t len, const char *job, char *err,
                                          size_t errlen);
/* Accepts NULL. */
void rp_agent_plan_free(struct rp_agent_plan *p);

/* What a resumed plan does with a step the server reports in state s. */
enum rp_agent_decision {
	RP_DECIDE_RUN,         /* report running, run, report the result */
	RP_DECIDE_SKIP,        /* already ended: leave it */
	RP_DECIDE_INTERRUPTED, /* its runner died in it and it may not rerun: report failed, stop */
};

enum rp_agent_decision rp_agent_decide(enum rp_step_state s, const struct rp_agent_step *st);

/* ---- Steps (steps.c: running one; runsteps.c: run-steps around them) ------------------ */

/* What running one step produced. */
struct rp_agent_outcome {
	int succeeded;
	int exit_code; /* -1: none (not a process, killed, timed out) */
	int64_t duration_ms;
	char error[1024];  /* "" when succeeded */
	json_t *result;    /* NULL or a new reference (inventory counts) */
	int echo_fd;       /* output is copied here as it comes; -1: nowhere */
	int at_line_start; /* last byte echoed was a newline (or nothing yet) */
	struct rp_agent_tail tail;
};

/* A fresh outcome whose output is echoed to echo_fd (-1: nowhere). NULL on allocation
 * failure. */
struct rp_agent_outcome *rp_agent_outcome_new(int echo_fd);
/* Accepts NULL. */
void rp_agent_outcome_free(struct rp_agent_outcome *o);

/* Append output (echo + tail). Echo write failures are ignored: a dropped SSH session must
 * not stop a step; a stalled one holds it up at most a few seconds. */
void rp_agent_output(struct rp_agent_outcome *o, const void *p, size_t n);

/* Write n bytes to the job log fd (-1: nowhere), the outcome's tail aside. A write that fails
 * is dropped; a non-blocking fd that stays full holds the caller up at most 5 s, then writes
 * are tried once each until one goes through whole. */
void rp_agent_echo(int fd, const void *data, size_t n);

/* Mark o failed with a formatted error (cut to fit o->error). */
void rp_agent_failed(struct rp_agent_outcome *o, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* What a progress report of a running step says. */
enum rp_agent_progress_kind {
	RP_PROGRESS_IMAGE, /* how far an image step has come: the counters below */
	RP_PROGRESS_READY, /* a shell step's ready_port listens: {"ready": true}, nothing else */
};

/* A running step's progress. Zeroed, it is an image step's (kind RP_PROGRESS_IMAGE). */
struct rp_agent_progress {
	enum rp_agent_progress_kind kind;
	uint64_t bytes_read;    /* downloaded */
	uint64_t bytes_written; /* decoded, written to the device */
	int64_t total;          /* the download's Content-Length; -1: not known */
	uint64_t rate_bps;      /* bytes written per second over the last interval */
};

/* Seconds between two progress calls, at least (the last one, at the end, comes anyway). */
#define RP_AGENT_PROGRESS_S 2

/* Milliseconds between two looks at /proc/net/tcp{,6} while a shell step with ready_port runs,
 * and the most of each file read (the kernel lists listening sockets first, so a cut loses
 * only connections). */
#define RP_AGENT_READY_POLL_MS  100
#define RP_AGENT_READY_READ_MAX (1u << 20)

/* 1 when text (len bytes of a /proc/net/tcp or /proc/net/tcp6 file, no NUL needed) has a row
 * in state LISTEN (0A) whose local port is port, else 0. The header and rows that do not
 * parse are skipped. */
int rp_agent_tcp_listening(const char *text, size_t len, unsigned port);

/* What running steps needs beyond the step itself. */
struct rp_agent_runner {
	const struct rp_agent_config *cfg;
	struct rp_agent_client *client; /* NULL: steps that talk to the server fail */
	const char *token;              /* the agent token */
	int echo_fd;                    /* framing lines and output; -1: nowhere */
	/* Called from the step's thread with progress_arg: by an image step at most every
	 * RP_AGENT_PROGRESS_S and once at the end; by a shell step with ready_port once, when
	 * something first listens on that port while its command runs (RP_PROGRESS_READY). It must
	 * not block (run-steps hands it to a thread that posts it). NULL: progress goes nowhere. */
	void (*progress)(void *arg, const struct rp_agent_progress *p);
	void *progress_arg;
};

/* Run `/bin/sh -c command` in its own process group: env merged into ours, in cwd (NULL:
 * ours), stdin /dev/null, stdout and stderr into o. After timeout_s the group gets SIGTERM,
 * 5 s later SIGKILL. Sets o->succeeded, exit_code, error (not duration). 0 when it ran
 * (whatever its status), -1 when it could not start (o->error says why). */
int rp_agent_shell(const char *command, json_t *env, const char *cwd, unsigned timeout_s,
                   struct rp_agent_outcome *o);

/* Run one step of any type but reboot, filling o (duration included). Never reports. A shell
 * step with ready_port looks at ROOT/proc/net/tcp and tcp6 (cfg's root) every
 * RP_AGENT_READY_POLL_MS while its command runs; the first time the port listens it says so
 * in the step's output and calls r->progress once with RP_PROGRESS_READY. */
void rp_agent_step_run(const struct rp_agent_runner *r, const struct rp_agent_step *s,
                       struct rp_agent_outcome *o);

/* s shell-quoted ('…', with ' as '\''). New string; NULL on allocation failure. */
char *rp_agent_shell_quote(const char *s);

/* tmpl with every ${image} replaced by the shell-quoted path. New string; NULL on
 * allocation failure. */
char *rp_agent_subst_image(const char *tmpl, const char *path);

/* The body of a step result: state, run and boot_id (each NULL: left out), and for a final
 * state the outcome's exit_code, duration_ms, output, output_bytes, output_truncated, error
 * and result. run names this start of the step (a UUID), so that the server counts a
 * 'running' report sent again after a lost answer as the same start. New reference; NULL on
 * allocation failure. */
json_t *rp_agent_result_body(enum rp_step_state state, const char *run, const char *boot_id,
                             const struct rp_agent_outcome *o);

/* The body of a progress report: the 'running' report of run (boot_id: NULL left out) again,
 * with "progress": for RP_PROGRESS_IMAGE {"bytes_read", "bytes_written", "total" (null when
 * not known), "rate_bps"}, for RP_PROGRESS_READY {"ready": true}. New reference; NULL on
 * allocation failure. */
json_t *rp_agent_progress_body(const char *run, const char *boot_id,
                               const struct rp_agent_progress *p);

/* After an image step with "grow", "seed" or "uefi" (seed.c, docs/deploy.md): dev is the
 * device (or regular file) just written, synced and closed; step is the image step's object.
 * The partition table (MBR or GPT, 512- or 4096-byte sectors) is edited here, no tools run:
 * a GPT's backup moves to the disk's last sectors. "seed" adds a NoCloud partition at the
 * disk's end (FAT12/16 labelled CIDATA, at least 8 MiB, 1 MiB aligned; one left by an earlier
 * run is replaced and its old space wiped); its contents are secret: never in err, and wiped
 * from memory. "grow" moves the end of the partition that ends last, when it is a Linux one,
 * to the seed's start (or the disk's usable end); the filesystem in it is not resized
 * (cloud-init's resizefs does that on first boot). "uefi", under EFI firmware
 * (rp_agent_efi_dir exists), runs efibootmgr to add an entry for the ESP's loader, replacing
 * one an earlier run made. A block device's table is re-read by the kernel (BLKRRPART).
 * Everything that can fail without writing (the request, the table, room, efibootmgr, the
 * loader) is checked before the disk is written. 0 with result (an object) given
 * partition_table, seed, grown or not_grown, and efi as asked; or -1 with err set and result
 * untouched. */
int rp_agent_disk_finish(const char *dev, json_t *step, json_t *result, char *err, size_t errlen);

/* The directory whose presence means EFI firmware for rp_agent_disk_finish:
 * "/sys/firmware/efi". Tests point it elsewhere; nothing else sets it. */
extern const char *rp_agent_efi_dir;

/* POST a step result for job (retrying transient failures). 0, or -1 with err set. */
int rp_agent_step_report(const struct rp_agent_runner *r, const char *job, const char *step,
                         json_t *body, char *err, size_t errlen);

/* `run-steps --job job`: read the plan from in_fd and run it (docs/agent-protocol.md).
 * Returns an RP_RUN_EXIT_* status; a reboot step does not return (it exits 3). */
int rp_agent_run_steps(const struct rp_agent_config *cfg, const char *job, int in_fd);

/* 1 while some run-steps holds the lock in cfg's state_dir, else 0. */
int rp_agent_busy(const struct rp_agent_config *cfg);

/* ---- Registration and heartbeats (node.c) --------------------------------------------- */

/* The physical MACs to register, normalised and unique (at most 64): from the inventory's
 * nics items when it has any, else ROOT/sys/class/net/<if>/address. Loopback, all-zero and
 * virtual interfaces are left out. New array reference (possibly empty). */
json_t *rp_agent_macs(const json_t *inventory, const char *root);

/* Make sure the key line ("type base64 [comment]") is in the authorized_keys file at path:
 * append it unless a line holds the same type and base64 (options and comments aside).
 * Creates the file (0600) when missing. 0, or -1 with err set. */
int rp_agent_authorized_keys_add(const char *path, const char *key, char *err, size_t errlen);

/* The agent token from cfg's token_file into buf. 0, or -1 with err set. */
int rp_agent_token_read(const struct rp_agent_config *cfg, char *buf, size_t n, char *err,
                        size_t errlen);

/* POST /v1/agent/register with the bootstrap token; save the new agent token (atomically,
 * 0600) and the server's SSH key (authorized_keys). Returns 0 with *answer set (the server's
 * answer, new reference) or the HTTP status/RP_AGENT_E* that failed (err set). */
long rp_agent_register(const struct rp_agent_config *cfg, struct rp_agent_client *cl,
                       json_t **answer, char *err, size_t errlen);

/* POST /v1/agent/heartbeat with token. Returns 0 with *answer set or the failing
 * HTTP status/RP_AGENT_E* (err set). */
long rp_agent_heartbeat(const struct rp_agent_config *cfg, struct rp_agent_client *cl,
                        const char *token, json_t **answer, char *err, size_t errlen);

/* `daemon`: register when there is no token, then heartbeat until rp_agent_stopping.
 * Returns a process exit status. */
int rp_agent_daemon(const struct rp_agent_config *cfg);

#endif
