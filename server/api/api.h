/*
 * api.h — the REST resources, independent of the HTTP library: http/ turns a request into a
 * struct rp_api_req, calls the route's handler, and sends the struct rp_api_resp it fills.
 *
 * A handler validates its input, makes one store call, maps the outcome and fills the
 * response. It never sees libmicrohttpd, and never SQL.
 */
#ifndef RP_API_H
#define RP_API_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "jobs/jobs.h"
#include "rackpilot/error.h"
#include "store/store.h"
#include "util/util.h"

/* Distinct tokens that may hold event streams at once (the server's cap on streams). */
#define RP_API_MAX_STREAM_TOKENS 256

/* Everything handlers share; owned by main. */
struct rp_api {
	struct rp_store *store;
	struct rp_metrics *metrics;
	int64_t started_at;         /* ms since epoch */
	size_t max_body;            /* for GET /v1 capabilities */
	struct rp_memo *auth_cache; /* token hash -> principal; may be NULL */
	struct rp_memo *get_cache;  /* single-object GET bodies; may be NULL */
	struct rp_jobs *jobs;       /* BMC jobs, step plans and power sync */
	const char *ssh_public_key; /* the server's SSH key, authorized_keys form; may be NULL */
	int agent_heartbeat_s;      /* period agents are told to heartbeat at */
	/* Network boot (docs/provisioning.md). */
	const char *image_dir;    /* the image store's directory */
	const char *boot_url;     /* base URL written into boot scripts; NULL/"": from Host */
	const char *image_url;    /* base URL BMCs and agents fetch firmware images from
	                             (BASE/boot/images/NAME): boot_url, or its default;
	                             NULL/"": none (firmware by SimpleUpdate cannot start) */
	int discovery;            /* unknown MACs get the discovery ramdisk */
	int discovery_max;        /* MACs with a live discovery token at most */
	int discovery_per_source; /* of those, per source address (0: no limit) */
	int discovery_max_nodes;  /* discovered nodes waiting for an operator at most (0: none) */
	int boot_source_check;    /* a script's token registers only from its fetcher's address */
	const char *agent_url;    /* rackpilot.url= in scripts; NULL/"": from the boot request */
	unsigned api_port;        /* the API listener's port when boot has its own listener, else
	                             0; set (atomically) before the boot listener starts */
	int tls;                  /* the API listener speaks TLS */
	/* Its public-key pin for rackpilot.tls_sha256= ("" without TLS): main replaces it when a
	 * SIGHUP reloads the certificate, so read it with rp_api_tls_pin. */
	pthread_mutex_t tls_mu;
	char tls_sha256[65];
	unsigned bootstrap_ttl_s;       /* lifetime of a token in a boot script */
	unsigned provision_timeout_s;   /* default wait for an agent in commission/deploy/release */
	unsigned deploy_boot_timeout_s; /* default wait for a deployed OS's first-boot report */
	int demo;                       /* the database holds demo data (GET /v1 says so) */
	unsigned max_streams_per_token; /* open event streams one token may hold */
	/* Open event streams per token (events.c); main initialises the mutex. */
	pthread_mutex_t streams_mu;
	struct {
		char token[40];
		unsigned open;
	} streams[RP_API_MAX_STREAM_TOKENS];
};

/* Operator roles are ordered (admin can do what viewer can). The agent role stands apart:
 * agent tokens reach only routes marked for it, and only for their own node. */
enum rp_role { RP_ROLE_NONE = 0, RP_ROLE_VIEWER, RP_ROLE_OPERATOR, RP_ROLE_ADMIN, RP_ROLE_AGENT };

/* Who is calling: the authenticated token. For agents, id and name are the node's. */
struct rp_principal {
	enum rp_role role;
	char id[40];
	char name[64];
	int64_t node_id; /* agents only */
};

#define RP_API_MAX_PARAMS 4

struct rp_api_req {
	struct rp_api *api;
	const char *method;
	const char *path;
	const char *params[RP_API_MAX_PARAMS]; /* {captures} of the route pattern, in order */
	json_t *query;                         /* object of query arguments (strings), NULL when
	                                          there are none; borrowed */
	json_t *body;                          /* parsed JSON body or NULL; borrowed */
	const char *raw;                       /* raw body (for CSV); may be NULL */
	size_t raw_len;
	const char *content_type; /* media type without parameters, or NULL */
	const char *if_match;     /* header values or NULL */
	const char *if_none_match;
	const struct rp_principal *who;
	const char *request_id;
	const char *authorization; /* raw Authorization header or NULL (for routes
	                              that check their own secret) */
	const char *peer;          /* client address, for RP_ROUTE_PEER routes */
	const char *host;          /* Host header or NULL */
	const char *range;         /* Range header or NULL */
	const char *last_event_id; /* Last-Event-ID header or NULL */
	/* RP_ROUTE_UPLOAD: the body, already on disk. The handler may rename the file; whatever
	 * is left at upload_path afterwards is removed. */
	const char *upload_path;
	uint64_t upload_size;
	const char *upload_sha256; /* hex */
};

/* A connection upgraded to a WebSocket (RP_ROUTE_WEBSOCKET), handed to the handler's ws_open:
 * fd carries frames both ways (rackpilot/ws.h: client frames masked), starting with the
 * client's first frame. Its owner reads and writes fd (non-blocking; send with MSG_NOSIGNAL)
 * and calls close(ws) exactly once when done, from any thread: that closes the connection and
 * frees ws. Never close(2) fd. Over TLS fd is one end of a socketpair that libmicrohttpd
 * relays through TLS, so no TCP socket options. A client that leaves reads as end of file
 * (over TLS within about half a second). When the server stops, fd is shut down (end of file;
 * writes fail) and the server waits up to 10 s for close(ws) before it closes the connection
 * itself; a close(ws) after that only frees ws. */
struct rp_api_ws {
	int fd;
	const char *peer;                    /* the client's address, for logs and events */
	void (*close)(struct rp_api_ws *ws); /* set by http/ */
	void *priv;                          /* http/'s */
};

struct rp_api_resp {
	int status;
	json_t *body; /* owned; sent as application/json */
	char *text;   /* owned alternative body, e.g. Prometheus text */
	size_t text_len;
	void (*text_free)(void *); /* releases text; NULL means free() */
	const char *content_type;  /* of text; static storage */
	char etag[40];             /* sent as ETag when non-empty (already quoted) */
	char location[256];        /* sent as Location when non-empty */
	/* A file body instead: file_fd (owned; closed by the server) from file_off, file_len
	 * bytes, sent without copying. */
	int has_file;
	int file_fd;
	uint64_t file_off, file_len;
	char content_range[96]; /* sent as Content-Range when non-empty */
	int accept_ranges;      /* send "Accept-Ranges: bytes" */
	/* A stream body instead (Server-Sent Events), sent until the client leaves or the server
	 * stops. stream_read writes up to max bytes to buf and returns how many; 0 when it has
	 * nothing now, after setting *idle_gen to the rp_api_generation it looked at (the server
	 * parks the connection until the generation moves or a keep-alive is due); -1 to end.
	 * stream_free releases stream_ctx, once. */
	long (*stream_read)(void *ctx, char *buf, size_t max, uint64_t *idle_gen);
	void (*stream_free)(void *ctx);
	void *stream_ctx;
	/* More headers: name/value pairs, NULL-terminated, static storage. A Cache-Control, a
	 * Content-Security-Policy or an X-Content-Type-Options here replaces the default
	 * (no-store; default-src 'none'; nosniff). */
	const char *const *headers;
	unsigned retry_after; /* seconds, sent as Retry-After when non-zero (429, 503) */
	/* RP_ROUTE_WEBSOCKET: to accept the upgrade the handler sets ws_open (and ws_ctx); the
	 * server answers 101 (status and body are ignored) and, once the connection is
	 * upgraded, calls ws_open(ws_ctx, ws), which then owns ws. ws_open runs on a server
	 * thread: hand ws over, never block. When that never happens (the client left, it sent
	 * data before the 101, the server is stopping) it calls ws_free(ws_ctx) instead (when
	 * set); exactly one of the two is called. A handler that does not set ws_open answers
	 * as any other (an error), and a ws_ctx it set anyway goes to ws_free. */
	void (*ws_open)(void *ctx, struct rp_api_ws *ws);
	void (*ws_free)(void *ctx);
	void *ws_ctx;
};

/* Count one more open stream (events, consoles) for token: its slot, or -1 when the token
 * holds its share (max_streams_per_token) already or every slot is taken: one viewer token
 * must not hold every stream the server has. rp_api_stream_give(slot) when the stream ends
 * (slot -1: nothing). */
int rp_api_stream_take(struct rp_api *api, const char *token);
void rp_api_stream_give(struct rp_api *api, int slot);

/* What parked streams wait on: the store's generation plus the consoles' (rp_jobs_console_
 * generation): it moves with every committed change and every console line. */
uint64_t rp_api_generation(struct rp_api *api);

/* Route flags. */
#define RP_ROUTE_CSV       0x1  /* also accepts text/csv bodies */
#define RP_ROUTE_BIG_BODY  0x2  /* body cap is max_import_body instead of max_body */
#define RP_ROUTE_PEER      0x4  /* the handler needs the client's address */
#define RP_ROUTE_UPLOAD    0x8  /* the body (any media type, up to max_upload) streams to a file */
#define RP_ROUTE_BOOT      0x10 /* also served on the plain-HTTP boot listener (boot_listen) */
#define RP_ROUTE_LIMIT     0x20 /* unauthenticated: rate-limited per client address (boot_rate) */
#define RP_ROUTE_INVENTORY 0x40 /* the body is an agent inventory: cap max_inventory */
/* A WebSocket (RFC 6455) GET: the server checks the handshake (Upgrade: websocket, Connection:
 * Upgrade, Sec-WebSocket-Version 13, a valid Sec-WebSocket-Key: else 400, or 426
 * UPGRADE_REQUIRED with Sec-WebSocket-Version for another version) after the role and before
 * the handler, and takes the token from Authorization or, for browsers, from the
 * Sec-WebSocket-Protocol entry "rackpilot.bearer.<token>" (RP_WS_PROTOCOL_BEARER, offered with
 * RP_WS_PROTOCOL, which the answer then names); that token is never logged. At most 64
 * WebSockets are open at once (503 UNAVAILABLE past that). */
#define RP_ROUTE_WEBSOCKET 0x80

struct rp_route {
	const char *method;
	const char *pattern; /* "/v1/nodes/{id}": {name} captures one path segment */
	void (*handler)(struct rp_api_req *rq, struct rp_api_resp *rs);
	enum rp_role role; /* minimum role; RP_ROLE_NONE: no token needed */
	unsigned flags;
};

/* The one static route table, and its length. */
extern const struct rp_route rp_api_routes[];
extern const size_t rp_api_route_count;

/* Copy the current TLS public-key pin into out ("" without TLS); thread-safe. */
void rp_api_tls_pin(struct rp_api *api, char out[65]);

/* Replace it (main, after a certificate reload). */
void rp_api_tls_pin_set(struct rp_api *api, const char *hex);

/* Resolve "Bearer <token>" to a principal: an API token, or an agent token ("rpa_").
 * RP_ERR_UNAUTHORIZED when missing or unknown. */
enum rp_err rp_api_authenticate(struct rp_api *api, const char *authorization,
                                struct rp_principal *out);

/* Fill rs with the error body {"error": {code, message, detail}} and e's status. Takes
 * ownership of detail (may be NULL). */
void rp_api_error(struct rp_api_resp *rs, enum rp_err e, json_t *detail);

/* Same with a printf-formatted {"reason": ...} detail. */
void rp_api_errorf(struct rp_api_resp *rs, enum rp_err e, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Release what a response owns. */
void rp_api_resp_clear(struct rp_api_resp *rs);

/* Role name <-> enum. rp_api_role_parse returns RP_ROLE_NONE for unknown names. */
const char *rp_api_role_name(enum rp_role r);
enum rp_role rp_api_role_parse(const char *s);

/* ---- Validation (validate.c) -------------------------------------------------------- */

enum rp_ftype {
	RP_F_STR,  /* string, max = max length */
	RP_F_NAME, /* resource name (rp_name_valid) */
	RP_F_KEY,  /* attribute/component key: 1-128 of A-Z a-z 0-9 . _ : / - [ ] */
	RP_F_INT,  /* integer in [min, max] */
	RP_F_NUM,  /* number in [min, max] */
	RP_F_BOOL,
	RP_F_ENUM,       /* string from `enums` */
	RP_F_ENUM_LIST,  /* array of at most max distinct strings from `enums` */
	RP_F_UUID,       /* a UUID string */
	RP_F_HOST,       /* host name or IP literal */
	RP_F_TAGS,       /* array of tags, at most max */
	RP_F_MACS,       /* array of MAC addresses, normalised in place, at most max */
	RP_F_OBJECT,     /* object validated by `sub` */
	RP_F_ANY_OBJECT, /* free-form object (manifest data) */
	RP_F_ANY_ARRAY,  /* array of at most max values; a `check` looks inside */
	RP_F_SCALAR_MAP, /* object of name -> string|number|bool (null allowed when patching) */
	RP_F_STRING_MAP, /* object of name -> string (null allowed when patching) */
	RP_F_LIST,       /* array of at most max objects, each validated by `sub` as a creation */
	RP_F_READ_ONLY,  /* present in responses, rejected in requests */
	RP_F_CHECK       /* any value, judged by `check` (another module's schema) */
};

#define RP_F_REQUIRED 0x1
#define RP_F_NULLABLE 0x2
#define RP_F_SECRET   0x4 /* write-only; never echoed */

struct rp_field {
	const char *name;
	enum rp_ftype type;
	unsigned flags;
	double min, max;
	const char *const *enums;
	const struct rp_field *sub;
	/* RP_F_CHECK: v (never JSON null) at path ("bmc.options"): RP_ERR_OK, or an error with
	 * *detail {field, reason} (the caller owns it). */
	enum rp_err (*check)(json_t *v, const char *path, json_t **detail);
};

/* Check obj against spec (terminated by a NULL name). create: required fields must be
 * present and nulls are rejected where not nullable; otherwise it is a patch. Normalises
 * MACs in place. RP_ERR_OK, or an error with *detail {field, reason} (caller owns). */
enum rp_err rp_api_validate(json_t *obj, const struct rp_field *spec, int create, json_t **detail);

/* The rack and node objects' fields (racks.c, nodes.c); import validates manifest rows
 * with them. */
extern const struct rp_field rp_api_rack_fields[];
extern const struct rp_field rp_api_node_fields[];

/* A node selector as jobs, batches and rollouts take it: {rack, tag, class, nodes}. */
extern const struct rp_field rp_api_selector_fields[];
/* A node class's writable members (classes.c), shared with the manifest import. */
extern const struct rp_field rp_api_class_fields[];

/* Checks across a node body's fields (driver options belong to the named driver). */
enum rp_err rp_api_node_check(json_t *body, json_t **detail);

/* Names a `fields=` selection may use for objects of spec. 1 when name is one. */
int rp_api_field_known(const struct rp_field *spec, const char *name);

/* ---- Pagination (cursor.c) ------------------------------------------------------------ */

/* Encode a page position as an opaque cursor into buf (RP_CURSOR_BUF bytes). */
#define RP_CURSOR_BUF 256
void rp_api_cursor_encode(int sort_by_name, int64_t last_id, const char *last_key,
                          char buf[RP_CURSOR_BUF]);

/* Decode a cursor for the given sort; fills after_id/after_key (key copied into keybuf of
 * keylen bytes). -1 when malformed or made for another sort order. */
int rp_api_cursor_decode(const char *cursor, int sort_by_name, int64_t *after_id, char *keybuf,
                         size_t keylen);

/* Parse limit/cursor/sort from the query into rq (filter untouched). Errors fill rs and
 * return -1. keybuf backs rq->after_key. */
int rp_api_page_parse(struct rp_api_req *req, struct rp_page_req *rq, char *keybuf, size_t keylen,
                      int sortable, struct rp_api_resp *rs);

/* Reply 200 with {"items": [...], "next_cursor": ...}, applying `fields=` against spec
 * (400 on unknown names). Takes the page's items. */
void rp_api_page_reply(struct rp_api_req *req, struct rp_api_resp *rs, struct rp_page *pg,
                       int sort_by_name, const struct rp_field *spec);

/* ---- Shared handler plumbing (common.c) -------------------------------------------- */

/* A resource's strong ETag: "<version>" or, for objects that also show observed state
 * (power_state_at, bmc.checked_at), "<version>-<digest of it>". out: 40 bytes. */
void rp_api_etag(json_t *obj, char out[40]);

/* Parse If-Match into the configuration version it names: 0 when absent or "*"; -1 (rs
 * filled with 412) when it cannot match any version. Only the version part counts: power
 * readings and BMC health change the ETag but must not fail an operator's edit. */
int64_t rp_api_if_match(struct rp_api_req *req, struct rp_api_resp *rs);

/* Reply with a resource object and its ETag (rp_api_etag); 304 for a GET whose
 * If-None-Match matches. Takes obj. */
void rp_api_reply_object(struct rp_api_req *req, struct rp_api_resp *rs, int status, json_t *obj);

/* Reply 200 with the text b holds as content_type (static storage), taking b's memory; a
 * buffer that ran out of memory (b->oom) is freed and answers 500 INTERNAL instead. */
void rp_api_reply_buf(struct rp_api_resp *rs, struct rp_buf *b, const char *content_type);

/* Map a store outcome to the response: errors get their body (detail taken). */
void rp_api_reply_store_error(struct rp_api_resp *rs, enum rp_err e, json_t *detail,
                              const char *what);

/* A failed lookup of what a request's field names: RP_ERR_NOT_FOUND answers 400 INVALID_FIELD
 * {field, reason: what} ("no such recipe"), any other error answers as itself. */
void rp_api_reply_ref_error(struct rp_api_resp *rs, enum rp_err e, const char *field,
                            const char *what);

/* The query argument name, when given, must be one of values (NULL-terminated): 0, or -1
 * with 400 BAD_QUERY replied ("<name> must be a, b or c"). */
int rp_api_query_one_of(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name,
                        const char *const *values);

/* Every query argument must be named in known (NULL-terminated): 0, or -1 with 400
 * BAD_QUERY replied ("unknown query parameter 'x'"). */
int rp_api_query_known(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *known);

/* The time in query argument name (RFC 3339 or Unix seconds) into *out (ms): 1; 0 when not
 * given (*out untouched); -1 with 400 BAD_QUERY replied when malformed. */
int rp_api_query_time(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name,
                      int64_t *out);

/* status with obj (taken) as the body and Location collection/<obj's id>. */
void rp_api_reply_at(struct rp_api_resp *rs, int status, const char *collection, json_t *obj);

/* Queue job (a job description for rp_jobs_submit, taken; NULL when building it ran out of
 * memory) for the node in params[0], as rq's caller: 202 with the job and its Location, or
 * the store's error (404 "no such node" for an unknown one). */
void rp_api_node_job(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *job);

/* A new bearer secret (prefix + random, RP_TOKEN_BUF bytes) into secret and its SHA-256 into
 * hash, the only form the store keeps: 0, or -1 with a 500 replied when the system's random
 * source fails. */
int rp_api_token_mint(struct rp_api_resp *rs, const char *prefix, char *secret,
                      char hash[RP_SHA256_HEX]);

/* The reply to creating a token whose secret is shown this once: e's error (out freed), or
 * 201 with out plus member "token": secret, and Location collection/<out's id>. */
void rp_api_reply_token(struct rp_api_resp *rs, enum rp_err e, json_t *out, const char *secret,
                        const char *collection);

/* The reply to an unpaged list: e's error, or 200 {items, next_cursor: null} (items taken). */
void rp_api_reply_items(struct rp_api_resp *rs, enum rp_err e, json_t *items);

/* 1 when s is a SHA-256 digest: 64 hex digits (either case). */
int rp_api_sha256_valid(const char *s);

/* The actor string recorded in events for this request: "token:<name>". buf 96 bytes. */
const char *rp_api_actor(struct rp_api_req *req, char buf[96]);

/* Copy the string query arguments named in keys (NULL-terminated) into a new filter object,
 * rejecting values over 256 bytes (-1, rs filled). */
int rp_api_filter(struct rp_api_req *req, const char *const *keys, json_t **out,
                  struct rp_api_resp *rs);

/* ---- Collections with the usual CRUD shape (crud.c) --------------------------------- */

struct rp_crud {
	const char *what;       /* "rack": used in messages */
	const char *collection; /* "/v1/racks": Location of created resources */
	const struct rp_field *spec;
	const char *const *filters; /* query arguments passed to list as filters */
	int sortable;               /* supports sort=name */
	enum rp_err (*create)(struct rp_store *, json_t *, const char *, json_t **, json_t **);
	enum rp_err (*get)(struct rp_store *, const char *, json_t **);
	enum rp_err (*list)(struct rp_store *, const struct rp_page_req *, struct rp_page *);
	enum rp_err (*update)(struct rp_store *, const char *, json_t *, int64_t, const char *,
	                      json_t **, json_t **);
	enum rp_err (*destroy)(struct rp_store *, const char *, int64_t, const char *, json_t **);
	/* Optional checks across fields after validation: RP_ERR_OK or an error + detail. */
	enum rp_err (*check)(json_t *body, json_t **detail);
};

/* The five store calls of an rp_crud for the resource store.h serves as rp_store_<name>_create,
 * _get, _list, _update and _delete. */
#define RP_CRUD_STORE(name)                                                                        \
	.create = rp_store_##name##_create, .get = rp_store_##name##_get,                          \
	.list = rp_store_##name##_list, .update = rp_store_##name##_update,                        \
	.destroy = rp_store_##name##_delete

/* POST collection: validate as create, store, 201 + Location + ETag. */
void rp_api_crud_create(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs);
/* GET collection: paging, filters, fields. */
void rp_api_crud_list(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs);
/* GET item params[0]. */
void rp_api_crud_get(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs);
/* PATCH item params[0]: validate as patch, honour If-Match. */
void rp_api_crud_update(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs);
/* DELETE item params[0]: 204, honour If-Match. */
void rp_api_crud_delete(const struct rp_crud *c, struct rp_api_req *rq, struct rp_api_resp *rs);

/* The route handlers rp_api_<prefix>_create, _list, _get, _update and _delete of the
 * collection crud describes, each its rp_api_crud_ call. */
#define RP_CRUD_HANDLERS(prefix, crud)                                                             \
	void rp_api_##prefix##_create(struct rp_api_req *rq, struct rp_api_resp *rs)               \
	{                                                                                          \
		rp_api_crud_create((crud), rq, rs);                                                \
	}                                                                                          \
	void rp_api_##prefix##_list(struct rp_api_req *rq, struct rp_api_resp *rs)                 \
	{                                                                                          \
		rp_api_crud_list((crud), rq, rs);                                                  \
	}                                                                                          \
	void rp_api_##prefix##_get(struct rp_api_req *rq, struct rp_api_resp *rs)                  \
	{                                                                                          \
		rp_api_crud_get((crud), rq, rs);                                                   \
	}                                                                                          \
	void rp_api_##prefix##_update(struct rp_api_req *rq, struct rp_api_resp *rs)               \
	{                                                                                          \
		rp_api_crud_update((crud), rq, rs);                                                \
	}                                                                                          \
	void rp_api_##prefix##_delete(struct rp_api_req *rq, struct rp_api_resp *rs)               \
	{                                                                                          \
		rp_api_crud_delete((crud), rq, rs);                                                \
	}

/* GET of a view the store builds for the key in params[0]; 404 names `what`. */
void rp_api_view(struct rp_api_req *rq, struct rp_api_resp *rs,
                 enum rp_err (*fn)(struct rp_store *, const char *, json_t **), const char *what);

/* GET of a fleet drift view, filtered by rack, class and node. */
void rp_api_drift(struct rp_api_req *rq, struct rp_api_resp *rs,
                  enum rp_err (*fn)(struct rp_store *, json_t *, json_t **));

/* POST of a reading {source, <member>} for the node in params[0], validated by spec; 204. */
void rp_api_reading(struct rp_api_req *rq, struct rp_api_resp *rs, const struct rp_field *spec,
                    const char *member,
                    enum rp_err (*fn)(struct rp_store *, const char *, const char *, json_t *,
                                      const char *));

/* 400 unless the request carries a JSON object body. Returns 0 when it does. */
int rp_api_need_object(struct rp_api_req *rq, struct rp_api_resp *rs);

/* Handlers, one group per resource file. */
void rp_api_healthz(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_root(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_metrics(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_tokens_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_tokens_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_tokens_revoke(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_elevation(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_inventory(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_profiles_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_profiles_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_profiles_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_profiles_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_profiles_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_node(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_node_readings(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_drift(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_baselines_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_baselines_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_baselines_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_baselines_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_baselines_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_firmware_node(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_firmware_node_readings(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_firmware_drift(struct rp_api_req *rq, struct rp_api_resp *rs);
/* Exports for the workload stack (exports.c; docs/deployment.md), each narrowed by one of
 * rack=, tag=, class=: Prometheus HTTP service discovery (node_exporter_port=, dcgm_port=;
 * 0 leaves those targets out), an Ansible dynamic inventory, /etc/hosts lines, Slurm's
 * slurm.conf node and partition lines and gres.conf (autodetect=nvml|off), of nodes whose
 * inventory agrees with their class's BOM (the others in comments, with why). */
void rp_api_export_prometheus(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_export_ansible(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_export_hosts(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_export_slurm(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_export_gres(struct rp_api_req *rq, struct rp_api_resp *rs);
/* Node firmware/BIOS actions (202 + job; docs/firmware.md): firmware_refresh, firmware_update
 * ({components?}), bios_apply ({profile?}). */
void rp_api_firmware_refresh(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_firmware_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bios_apply(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_bios(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_classes_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_classes_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_classes_put(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_classes_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_cabling_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_cabling_put(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_acceptance_start(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_acceptance_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_acceptance_signoff(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_events_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_events_stream(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_import(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_power(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_boot(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_verify(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_jobs_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_jobs_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_jobs_cancel(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_batches_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_actions_power(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_power_sync_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_power_sync_start(struct rp_api_req *rq, struct rp_api_resp *rs);

/* sensors.c */
void rp_api_nodes_sensors(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_sensor_history(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_power(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_power_history(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_power_overview(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_sensor_sync_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_sensor_sync_start(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_console(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_console_log(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_console_stream(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_identify(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_bmc_reset(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_bmc_rotate(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_racks_power_cap(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_power_caps(struct rp_api_req *rq, struct rp_api_resp *rs);

void rp_api_ssh_key(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bootstrap_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bootstrap_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_bootstrap_revoke(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_first_boot(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_register(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_heartbeat(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_inventory(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_config(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_job(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_agent_step(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_steps(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_actions_steps(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_host_key_set(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_host_key_clear(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_jobs_log(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_ipxe(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_image(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_images_upload(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_images_register(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_images_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_images_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_images_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_profiles_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_profiles_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_profiles_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_profiles_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_boot_profiles_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_nodes_provision(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_recipes_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_recipes_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_recipes_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_recipes_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_recipes_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
/* Webhooks (webhooks.c; docs/webhooks.md): the five of a collection, and GET
 * /v1/webhooks/{webhook}/deliveries (newest first; state=pending|delivered|failed). */
void rp_api_webhooks_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_webhooks_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_webhooks_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_webhooks_update(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_webhooks_delete(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_webhooks_deliveries(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_rollouts_create(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_rollouts_list(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_rollouts_get(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_rollouts_pause(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_rollouts_resume(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_rollouts_abort(struct rp_api_req *rq, struct rp_api_resp *rs);

/* ---- The web view (ui.c) ------------------------------------------------------------- */

/* One file of web/, compiled in by cmake/embed_web.cmake (web.c in the build directory):
 * static storage; etag is quoted, e.g. "\"0f3a...\"". */
struct rp_web_file {
	const char *name;
	const unsigned char *data;
	size_t len;
	const char *etag;
};
extern const struct rp_web_file rp_api_web_files[];
extern const size_t rp_api_web_file_count;

/* GET /ui (and /ui/): index.html; GET /ui/{file}: that file of web/, 404 for any other name.
 * No token needed; 304 when If-None-Match names the file's ETag. */
void rp_api_ui_index(struct rp_api_req *rq, struct rp_api_resp *rs);
void rp_api_ui_file(struct rp_api_req *rq, struct rp_api_resp *rs);

/* ---- Step plans (plan.c) ------------------------------------------------------------- */

/* Check a plan (array of steps, docs/agent-protocol.md) in place: fills default step ids
 * ("step-N"). templated: a recipe's plan, whose strings may hold ${arg} placeholders, so
 * formats (paths, digests, URLs) are checked only where no placeholder appears. RP_ERR_OK,
 * or an error with *detail {field: "steps[i].member", reason}. */
enum rp_err rp_api_plan_check(json_t *steps, int templated, json_t **detail);

/* Check a recipe's params {name: {required, default, description}}. */
enum rp_err rp_api_recipe_params_check(json_t *params, json_t **detail);

/* Expand a recipe's steps with args (validated against params: unknown → UNKNOWN_FIELD,
 * missing required → MISSING_FIELD) into a new plan in *out. Only declared names are
 * replaced; other ${...} (shell variables) stay as they are. */
enum rp_err rp_api_recipe_expand(json_t *recipe, json_t *args, json_t **out, json_t **detail);

/* Pre-flight of a firmware update, BIOS apply or rollout (docs/firmware.md, "Pre-flight"):
 * what (as rp_store_preflight's) is read from the store, each image file of a target is
 * checked against its recorded size and sha256 (each once), and rp_api_preflight_check says
 * what is missing. RP_ERR_OK when everything is in place; RP_ERR_PREFLIGHT_FAILED with *detail
 * {reason, missing [...]} naming every missing thing; or the store's error with its detail.
 * Reads only; nothing is stored. */
enum rp_err rp_api_preflight(struct rp_api *api, json_t *what, json_t **detail);

/* The pure part: facts from rp_store_preflight, images {name: {state: ok | missing | size |
 * digest, sha256?}} (what the image files hold; a name not listed counts as ok), image_url
 * (NULL/"": none). Returns a new array of {node, need, fix, ...}, empty when nothing is
 * missing: need boot_url, bmc, bmc_address, bmc_credentials, unsupported (the driver cannot
 * do it), image, image_file, image_digest, recipe, recipe_argument, attributes. */
json_t *rp_api_preflight_check(json_t *facts, json_t *images, const char *image_url);

/* Where a deployed OS reports its first boot: agent_url, else boot_url with the API's port
 * and scheme, else the API as rq reached it; with "/v1/agent/first-boot" appended. 0, or -1
 * (no usable host, or len too small). */
int rp_api_first_boot_url(struct rp_api_req *rq, char *buf, size_t len);

/* The plan a commission of a node of class cls (may be NULL) runs: recipe "commission" (or the
 * built-in inventory step), then "commission-<cls>" when it exists. 0 with *out a new array,
 * or -1 with rs filled. */
int rp_api_commission_plan(struct rp_api_req *rq, struct rp_api_resp *rs, const char *cls,
                           json_t **out);

/* Append recipe name's steps, expanded with args, to plan. 0, or -1 with rs filled (an unknown
 * recipe is 400 INVALID_FIELD). */
int rp_api_recipe_steps(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name,
                        json_t *args, json_t *plan);

/* Parse CSV text with a header row into an array of objects (header -> cell string; empty
 * cells omitted). Returns 0, or -1 with *why set to a message naming the line. */
int rp_api_csv_parse(const char *text, size_t len, json_t **rows, char *why, size_t whylen);

#endif
