/*
 * bmc.h — one interface to baseboard management controllers, three drivers behind it:
 * `ipmi` (libfreeipmi, IPMI 2.0 RMCP+), `redfish` (libcurl + jansson) and `fake` (in
 * memory, for demos and benchmarks; it never stands in for a real protocol in tests).
 *
 * A caller opens a handle for one BMC, makes calls, closes it. Calls block for at most the
 * target's timeouts. Handles are not shared between threads; different handles may be used
 * from different threads at once.
 *
 * Errors say whether a retry can help (kind) and what happened (message). A message never
 * contains the password.
 */
#ifndef RP_BMC_H
#define RP_BMC_H

#include <stdint.h>

#include <jansson.h>

enum rp_bmc_errkind {
	RP_BMC_OK = 0,
	RP_BMC_UNREACHABLE, /* no answer, connection refused: the command was not received */
	RP_BMC_TIMEOUT,     /* no answer after sending: it may or may not have acted */
	RP_BMC_BUSY,        /* the BMC refused for now (503, 409, node busy): retry later */
	RP_BMC_AUTH,        /* bad credentials or privilege: permanent */
	RP_BMC_TLS, /* certificate not trusted: permanent until the node's settings change */
	RP_BMC_UNSUPPORTED, /* the BMC cannot do this: permanent */
	RP_BMC_REJECTED,    /* the BMC refused the request as invalid: permanent */
	RP_BMC_MISMATCH,    /* the BMC accepted a setting but reads back another one */
	RP_BMC_PROTOCOL,    /* a malformed or unexpected answer */
};

struct rp_bmc_err {
	enum rp_bmc_errkind kind;
	char msg[256];
};

/* 1 when a retry of an operation that failed this way may succeed. */
int rp_bmc_err_transient(enum rp_bmc_errkind kind);

/* Stable lowercase name of a kind ("unreachable", "auth"...), for API error codes. */
const char *rp_bmc_err_name(enum rp_bmc_errkind kind);

/* Where and how to reach a BMC. Strings are copied in by rp_bmc_target_from_json. */
struct rp_bmc_target {
	char driver[16]; /* ipmi | redfish | fake */
	char node[40];   /* node UUID: keys the fake driver's state and session caches */
	char host[256];
	unsigned port; /* 0: the driver's default (623, 443) */
	char username[64];
	char password[256];
	int tls_verify; /* redfish: verify the BMC's certificate (default on) */
	/* ipmi options */
	int cipher_suite;     /* default 3 */
	int privilege;        /* 2 user, 3 operator, 4 admin (default) */
	unsigned workarounds; /* libfreeipmi IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_* */
	int workarounds_set;  /* options.workarounds given (even []): used as is, never probed */
	unsigned session_timeout_ms;        /* default 5000 */
	unsigned retransmission_timeout_ms; /* default 500 */
	/* redfish options */
	unsigned http_timeout_ms; /* per request, default 15000 */
	unsigned retry_tries;     /* tries of one request on 503/429/lost answers, default 5 */
	unsigned retry_wait_ms;   /* one request's retries end within this of its first try,
	                           * default 30000 */
	char scheme[8];           /* https (default) or http */
	char system_id[64];       /* pick this ComputerSystem when a BMC manages several */
	/* the serial console (ipmi and redfish): 1 IPMI SOL, 0 none (options.console, "auto"
	 * resolved by the driver); console_port: a Redfish BMC's IPMI port */
	int console;
	unsigned console_port;
	/* fake options */
	unsigned fake_delay_ms;
	unsigned fake_power_w; /* draw while on */
	unsigned fake_inlet_c;
};

/* Fill t from a node's BMC object as the store gives it to jobs ({driver, address, port,
 * username, password, tls_verify, options}) plus the node UUID; options are read through
 * options.h's table (its defaults for those not given). 0, or -1 with err set (RP_BMC_REJECTED:
 * options that rp_bmc_options_validate refuses for the driver, no address for a network
 * driver). */
int rp_bmc_target_from_json(json_t *bmc, const char *node_uuid, struct rp_bmc_target *t,
                            struct rp_bmc_err *err);

/* UNKNOWN also stands for transitions (Redfish PoweringOn/PoweringOff). */
enum rp_power { RP_POWER_UNKNOWN = 0, RP_POWER_ON, RP_POWER_OFF };
const char *rp_power_name(enum rp_power p);

enum rp_power_action {
	RP_POWER_ACT_ON,
	RP_POWER_ACT_OFF,      /* hard */
	RP_POWER_ACT_SOFT_OFF, /* graceful request; the caller falls back to hard after a wait */
	RP_POWER_ACT_CYCLE,
	RP_POWER_ACT_RESET,
};

enum rp_boot_device { RP_BOOT_NONE = 0, RP_BOOT_PXE, RP_BOOT_DISK, RP_BOOT_OTHER };

struct rp_boot {
	enum rp_boot_device device;
	int persistent; /* 0: next boot only */
	int uefi;       /* 1 UEFI, 0 legacy BIOS; -1 unknown when read back */
};

/* What a BMC says about the machine it manages. Empty strings where it does not say. */
struct rp_bmc_identity {
	char serial[128];
	char uuid[64];
	char manufacturer[128];
	char model[128];
	char bmc_firmware[64];
};

struct rp_bmc;

/* Open a handle (IPMI opens its session here; Redfish logs in lazily). NULL with err set. */
struct rp_bmc *rp_bmc_open(const struct rp_bmc_target *t, struct rp_bmc_err *err);

/* Close (Redfish keeps its session cached for the next handle to the same node). NULL ok. */
void rp_bmc_close(struct rp_bmc *b);

/* Each returns 0, or -1 with err set. */
int rp_bmc_power_get(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err);
int rp_bmc_power_set(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err);

/* Set the boot override. Callers read it back with rp_bmc_boot_get: BMCs are known to
 * answer success and keep something else. */
int rp_bmc_boot_set(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err);
int rp_bmc_boot_get(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err);

int rp_bmc_identity(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err);

/* IPMI workarounds that this handle found, at open, that its BMC needs. When the target names
 * none (workarounds_set 0) and the plain IPMI 2.0 session fails with an error that known
 * libfreeipmi workarounds cure (rp_bmc_ipmi_candidates), the ipmi driver tries those sets in
 * order and keeps the first that opens a session and answers Get Device ID. Then *names gets
 * a new array of their names (freeipmi's -W spelling, as options.workarounds takes them; the
 * caller owns it) and 1 is returned. 0, names untouched, when nothing was detected (the
 * session opened as configured; other drivers); -1 out of memory. */
int rp_bmc_detected_workarounds(struct rp_bmc *b, json_t **names);

/* The BMC's event log entries at or after since_ms (ms since the epoch), oldest first, at most
 * max: *out a new array (the caller owns it) of {id, at (RFC 3339 or null when the BMC gives
 * no time), severity ("critical" | "warning" | "ok"), message, source ("sel" |
 * "redfish:<log service id>")}. 0, or -1 with err (RP_BMC_UNSUPPORTED when the BMC has no
 * event log).
 * - Entries without a usable time (IPMI pre-init timestamps, a Redfish entry without
 *   Created) are kept: nothing says they came before since_ms. Their at is null.
 * - Severity is the BMC's own: libfreeipmi's SEL interpretation (as ipmi-sel --output-event-state
 *   shows it) for IPMI, LogEntry.Severity for Redfish. An entry neither classifies is "warning".
 * - IPMI: the SEL in record order, times from the BMC's SEL clock, message as ipmi-sel words
 *   the event. Redfish: the entries of every LogService (up to 16 per collection) of the
 *   ComputerSystem and of its Manager, all pages, merged by Created (undated ones first);
 *   id, message and source are cut to 128, 1024 and 72 bytes.
 * - Reading stops with RP_BMC_PROTOCOL rather than answer from part of a log that is too long
 *   to read (IPMI: 8192 records; Redfish: 128 pages per log service, 20000 entries, 1024
 *   entries fetched one by one).
 * - The fake driver has no event log: RP_BMC_UNSUPPORTED. */
int rp_bmc_events(struct rp_bmc *b, int64_t since_ms, size_t max, json_t **out,
                  struct rp_bmc_err *err);

/* The BMC's sensors as they read now: *out a new array (the caller owns it) of at most
 * RP_BMC_SENSORS_MAX objects
 *   {name, type, kind, value, unit, upper_warning?, upper_critical?, lower_warning?,
 *    lower_critical?, health, source}
 * - name: the BMC's own name for the sensor ("Inlet Temp", "CPU1 Temp", "PSU1"), cut to 63
 *   bytes, printable ASCII only (others become '?'); unique within the array (a repeated name
 *   gets " #2", " #3"...).
 * - type: "power" (watts drawn), "temperature", "fan" or "psu" (a power supply: its input watts
 *   where offered, else value null; its health either way).
 * - kind, where the sensor is: "system" (the whole node's draw), "inlet", "exhaust", "cpu",
 *   "gpu", "memory", "drive", "board", "psu", "fan" or "other".
 * - value: a number, or null when the BMC gives none or one no sensor can read (not finite;
 *   a temperature outside -273..1000 Cel; watts or RPM negative or over 10^7).
 * - unit: "W" (power, psu), "Cel" (temperature), "RPM" (fan; "%" when the BMC gives a fan's
 *   speed only as a percentage).
 * - thresholds: numbers in the value's unit, each present only when the BMC gives it
 *   (IPMI: upper non-critical / upper critical / lower non-critical / lower critical; Redfish:
 *   UpperCaution / UpperCritical / LowerCaution / LowerCritical).
 * - health: "ok", "warning" or "critical" as the BMC judges it (IPMI: the threshold state
 *   it reports; Redfish: Status.Health), or null when it does not say.
 * - source: where it was read: "dcmi", "sdr", "redfish:Sensors", "redfish:EnvironmentMetrics",
 *   "redfish:PowerSubsystem", "redfish:ThermalSubsystem", "redfish:Power", "redfish:Thermal",
 *   "redfish:Drive", "fake".
 * At most one entry has type "power" and kind "system": the node's draw (IPMI: DCMI Get Power
 * Reading, the current watts; Redfish: EnvironmentMetrics PowerWatts or, deprecated,
 * Power.PowerControl[0].PowerConsumedWatts). A BMC that answers with no sensor at all:
 * RP_BMC_UNSUPPORTED. A part the BMC lacks (no DCMI, no drive metrics) is left out, not an
 * error. 0, or -1 with err. */
#define RP_BMC_SENSORS_MAX 256
int rp_bmc_sensors(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err);

/* A node's power limit as its BMC enforces it (capping). watts: the limit; active: whether the
 * BMC enforces it now. */
struct rp_power_limit {
	unsigned watts; /* 0 with active 0: no limit set */
	int active;
};

/* Read the limit. IPMI: DCMI Get Power Limit (completion code 0x80, no limit set: watts 0,
 * active 0); Redfish: EnvironmentMetrics PowerLimitWatts (SetPoint, ControlMode other than
 * Disabled = active) or, deprecated, Power.PowerControl[0].PowerLimit.LimitInWatts (null: none).
 * RP_BMC_UNSUPPORTED when the BMC offers no power limit. */
int rp_bmc_power_limit_get(struct rp_bmc *b, struct rp_power_limit *out, struct rp_bmc_err *err);

/* Set the limit (active 1) or remove it (active 0, watts ignored). IPMI: DCMI Set Power Limit
 * (exception action: log to SEL only, never power off) then Activate/Deactivate Power Limit;
 * Redfish: PATCH of the same property the read uses. A value the BMC refuses (outside its
 * range): RP_BMC_REJECTED with the BMC's words. Callers read it back with
 * rp_bmc_power_limit_get. */
int rp_bmc_power_limit_set(struct rp_bmc *b, const struct rp_power_limit *want,
                           struct rp_bmc_err *err);

/* The chassis locator ("identify") light. on 1 lights it: for seconds (1 to
 * RP_BMC_IDENTIFY_TIMED_MAX) where the BMC can time it out by itself (IPMI: Chassis Identify
 * with that interval), else (seconds 0, longer, Redfish) until it is turned off (IPMI: Chassis
 * Identify with force on; Redfish: LocationIndicatorActive true on the ComputerSystem, or
 * IndicatorLED "Blinking" on a BMC that has only that). on 0 turns it off. *timed (may be
 * NULL) gets 1 when the BMC itself turns it off after seconds, 0 when the caller must.
 * RP_BMC_UNSUPPORTED when the BMC offers no such light. */
#define RP_BMC_IDENTIFY_TIMED_MAX 255
int rp_bmc_identify_set(struct rp_bmc *b, int on, unsigned seconds, int *timed,
                        struct rp_bmc_err *err);

/* Whether the light is on: *on 1 lit, 0 off, -1 the BMC does not say (an IPMI BMC whose Get
 * Chassis Status does not report the identify state). */
int rp_bmc_identify_get(struct rp_bmc *b, int *on, struct rp_bmc_err *err);

/* Restart the BMC itself, not the host (IPMI: BMC Cold Reset; Redfish: Manager.Reset with
 * ForceRestart, or GracefulRestart where the BMC allows only that). A BMC often restarts
 * before its answer arrives: RP_BMC_TIMEOUT then says nothing either way, and the caller
 * learns the outcome by waiting for the BMC to answer again. The handle is of no further use
 * but to close. */
int rp_bmc_reset(struct rp_bmc *b, struct rp_bmc_err *err);

/* Set the password of the handle's own user (the target's username) to password (1 to
 * RP_BMC_PASSWORD_MAX bytes). IPMI: the user's ID is found with Get User Name over the
 * channel's user IDs, then Set User Password (the 20-byte form for a password over 16
 * bytes); Redfish: PATCH Password of the AccountService account whose UserName it is, or of
 * the account a PasswordChangeRequired answer names (the only one such a BMC lets a new
 * session touch). A password the BMC refuses (length, characters): RP_BMC_REJECTED with the
 * BMC's words, the password never in them. The caller proves the change by opening a new
 * handle with the new password (handles never reuse a session opened with another one). */
#define RP_BMC_PASSWORD_MAX 64
int rp_bmc_password_set(struct rp_bmc *b, const char *password, struct rp_bmc_err *err);

/* ---- Serial over LAN (sol.c, freeipmi's libipmiconsole) ------------------------------ */

/* A SOL session: libipmiconsole's engine threads run the IPMI session and the SOL payload; the
 * caller sees one socket (rp_bmc_sol_fd), non-blocking: console output to read, keystrokes to
 * write. Not tied to a handle of rp_bmc_open. */
struct rp_bmc_sol;

/* Start a SOL session on the BMC t names (its host, port, user, password, cipher suite,
 * privilege and IPMI workarounds, whatever its driver: a Redfish node's console goes through
 * its BMC's IPMI). It does not wait: the fd is usable at once and SOL comes up within the
 * session timeout (rp_bmc_sol_state). steal 1 deactivates another client's SOL session on the
 * BMC and takes over; 0 fails with RP_BMC_BUSY ("SOL in use") instead. NULL with err. */
struct rp_bmc_sol *rp_bmc_sol_open(const struct rp_bmc_target *t, int steal,
                                   struct rp_bmc_err *err);

/* The session's socket: readable with output, EOF when the session ended (read 0; write
 * EPIPE); then rp_bmc_sol_state says why. Owned by the session. */
int rp_bmc_sol_fd(const struct rp_bmc_sol *s);

/* 0 while SOL is coming up, 1 once it is up, -1 when it failed or ended, with err (the
 * library's reason by kind: RP_BMC_AUTH wrong user or password; RP_BMC_BUSY in use by
 * another client or taken over; RP_BMC_UNREACHABLE no answer or session timeout (a BMC that
 * rebooted); RP_BMC_UNSUPPORTED a BMC without SOL). The state stays 1 after a later failure
 * until the fd shows EOF: call it again then. */
int rp_bmc_sol_state(struct rp_bmc_sol *s, struct rp_bmc_err *err);

/* Send a serial break. 0, or -1 with err. */
int rp_bmc_sol_break(struct rp_bmc_sol *s, struct rp_bmc_err *err);

/* End the session (SOL deactivated by the library's engine in the background) and free s. The
 * password it held is wiped. Accepts NULL. */
void rp_bmc_sol_close(struct rp_bmc_sol *s);

/* Redfish only (RP_BMC_UNSUPPORTED elsewhere). Results are new objects the caller owns. */

/* BIOS: {attributes {}, pending {}, registry id, apply_times [...]}. */
int rp_bmc_bios_get(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err);
/* Stage attribute values in the pending settings, applied at the next reset; apply_time
 * "OnReset" is sent only when the BMC lists it. */
int rp_bmc_bios_set(struct rp_bmc *b, json_t *attributes, struct rp_bmc_err *err);
/* The BIOS attribute registry `registry` (the id rp_bmc_bios_get reports), fetched through
 * Registries/<file> -> Location Uri: [{name, type, read_only, values? [..], lower?, upper?,
 * max_length?}] (type as Redfish says: Enumeration, String, Integer, Boolean, Password).
 * RP_BMC_UNSUPPORTED when the BMC serves no such registry. */
int rp_bmc_bios_registry(struct rp_bmc *b, const char *registry, json_t **out,
                         struct rp_bmc_err *err);
/* Firmware inventory: [{component, id, version, updateable}]. */
int rp_bmc_firmware_inventory(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err);
/* Start an update from an image URL (SimpleUpdate) or, with a local file path, a multipart
 * push; targets: array of inventory ids or NULL. *task gets the task monitor URI to poll. */
int rp_bmc_firmware_update(struct rp_bmc *b, const char *image_uri, const char *local_file,
                           json_t *targets, char *task, size_t tasklen, struct rp_bmc_err *err);
/* Poll a task: *done 1 when terminal, *ok 1 when it succeeded, *status (new, caller owns)
 * the task body when there is one. */
int rp_bmc_task_poll(struct rp_bmc *b, const char *task, int *done, int *ok, json_t **status,
                     struct rp_bmc_err *err);

/* Find the newest task whose name or payload mentions needle (an image name): for a client
 * that lost the task URI of an update it started. 0 and the monitor (or task) URI in task;
 * 1 when no task mentions it; -1 with err. */
int rp_bmc_task_find(struct rp_bmc *b, const char *needle, char *task, size_t tasklen,
                     struct rp_bmc_err *err);

/* Where a link a Redfish BMC gave (an @odata.id, an action target, a Location header, a push
 * URI) leads, so that credentials and tokens only ever go to the BMC the node's settings name.
 * origin is that BMC, "http[s]://host[:port]" with no path (an IPv6 host in brackets).
 * - "/path..." joins the origin: out = origin + link.
 * - "http[s]://host[:port]/path..." is accepted only when its scheme, host (compared without
 *   regard to case; an IPv6 host as the same bracketed text) and port (80 or 443 when absent,
 *   on either side) are the origin's; out is then origin + its path (and query), never the
 *   link's own spelling of the host.
 * - Everything else is refused: another scheme, host or port; "//host/..."; user information
 *   ("http://user@host/"); a reference without a leading "/"; an empty link; a link over
 *   RP_BMC_LINK_MAX bytes; one with a space, a control character (CR, LF...), a backslash or
 *   a non-ASCII byte; a "." or ".." path segment; a result that does not fit in outlen.
 * 0 with the URL in out, or -1 with why set (the link quoted, cut to 96 bytes, unprintable
 * bytes as '?' and user information as "***", and the reason) and out untouched. */
#define RP_BMC_LINK_MAX 2048
int rp_bmc_url_resolve(const char *origin, const char *link, char *out, size_t outlen, char *why,
                       size_t whylen);

/* Process-wide set-up (libcurl) and tear-down (cached Redfish sessions logged out). */
int rp_bmc_global_init(void);
void rp_bmc_global_cleanup(void);

/* ---- Drivers (internal to bmc/) ---------------------------------------------------- */

struct rp_bmc_ops {
	const char *name;
	struct rp_bmc *(*open)(const struct rp_bmc_target *t, struct rp_bmc_err *err);
	void (*close)(struct rp_bmc *b);
	int (*power_get)(struct rp_bmc *b, enum rp_power *out, struct rp_bmc_err *err);
	int (*power_set)(struct rp_bmc *b, enum rp_power_action a, struct rp_bmc_err *err);
	int (*boot_set)(struct rp_bmc *b, const struct rp_boot *want, struct rp_bmc_err *err);
	int (*boot_get)(struct rp_bmc *b, struct rp_boot *out, struct rp_bmc_err *err);
	int (*identity)(struct rp_bmc *b, struct rp_bmc_identity *out, struct rp_bmc_err *err);
	int (*bios_get)(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err);
	int (*bios_set)(struct rp_bmc *b, json_t *attributes, struct rp_bmc_err *err);
	int (*bios_registry)(struct rp_bmc *b, const char *registry, json_t **out,
	                     struct rp_bmc_err *err);
	int (*firmware_inventory)(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err);
	int (*firmware_update)(struct rp_bmc *b, const char *image_uri, const char *local_file,
	                       json_t *targets, char *task, size_t tasklen, struct rp_bmc_err *err);
	int (*task_poll)(struct rp_bmc *b, const char *task, int *done, int *ok, json_t **status,
	                 struct rp_bmc_err *err);
	int (*task_find)(struct rp_bmc *b, const char *needle, char *task, size_t tasklen,
	                 struct rp_bmc_err *err);
	int (*events)(struct rp_bmc *b, int64_t since_ms, size_t max, json_t **out,
	              struct rp_bmc_err *err);
	int (*detected_workarounds)(struct rp_bmc *b, json_t **names);
	int (*sensors)(struct rp_bmc *b, json_t **out, struct rp_bmc_err *err);
	int (*power_limit_get)(struct rp_bmc *b, struct rp_power_limit *out,
	                       struct rp_bmc_err *err);
	int (*power_limit_set)(struct rp_bmc *b, const struct rp_power_limit *want,
	                       struct rp_bmc_err *err);
	int (*identify_set)(struct rp_bmc *b, int on, unsigned seconds, int *timed,
	                    struct rp_bmc_err *err);
	int (*identify_get)(struct rp_bmc *b, int *on, struct rp_bmc_err *err);
	int (*reset)(struct rp_bmc *b, struct rp_bmc_err *err);
	int (*password_set)(struct rp_bmc *b, const char *password, struct rp_bmc_err *err);
};

/* Every handle starts with this header so the dispatcher finds its driver. */
struct rp_bmc {
	const struct rp_bmc_ops *ops;
};

extern const struct rp_bmc_ops rp_bmc_ipmi_ops;
extern const struct rp_bmc_ops rp_bmc_redfish_ops;
extern const struct rp_bmc_ops rp_bmc_fake_ops;

/* The libfreeipmi IPMI 2.0 workarounds the IPMI driver knows (ipmi.c): their names
 * (options.workarounds spelling, freeipmi's -W values; NULL-terminated) and, at the same
 * index, their IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_* flags. options.c's table lists them as
 * the names and codes of options.workarounds. */
extern const char *const rp_bmc_ipmi_workaround_names[];
extern const long rp_bmc_ipmi_workaround_flags[];

/* The names of libfreeipmi 2.0 workaround flags, in the order of rp_bmc_ipmi_workaround_names:
 * a new array, NULL out of memory. */
json_t *rp_bmc_workaround_names(unsigned flags);

/* The IPMI driver's probing (ipmi.c), pure: the workaround sets worth trying, in order, when an
 * IPMI 2.0 session without workarounds fails with libfreeipmi error errnum (ipmi_ctx_errnum).
 * Writes up to max of them to sets (may be NULL when max is 0) and returns how many there are
 * in all (at most RP_BMC_IPMI_PROBES); 0 when no workaround is known to cure that error:
 * wrong credentials, timeouts (no answer), and all other errors are never probed. */
#define RP_BMC_IPMI_PROBES 3
size_t rp_bmc_ipmi_candidates(int errnum, unsigned *sets, size_t max);

/* Stop libipmiconsole's engine, SOL sessions closed cleanly (sol.c; rp_bmc_global_cleanup). */
void rp_bmc_sol_engine_stop(void);

/* A limit the environment may lower (tests: RP_BMC_SENSOR_DEADLINE_MS, RP_BMC_SENSOR_TRIES,
 * RP_BMC_SDR_MAX_AGE_MS, RP_BMC_SOL_SESSION_MS): its value when it is a number from 1 to under max;
 * else max. */
unsigned rp_bmc_env_limit(const char *name, unsigned max);

/* Set err (kind + printf message); returns -1 for `return rp_bmc_fail(...)`. */
int rp_bmc_fail(struct rp_bmc_err *err, enum rp_bmc_errkind kind, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif
