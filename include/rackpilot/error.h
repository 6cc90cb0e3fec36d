/*
 * rackpilot/error.h — the one error registry, shared by rackpilotd, the agent and the CLI.
 *
 * Each entry is (NAME, http status, message). The wire code is NAME itself ("NOT_FOUND",
 * the style of Google's API status codes); every error body is
 * {"error": {"code", "message", "detail"}}. Codes are part of the wire format: add, never rename.
 */
#ifndef RACKPILOT_ERROR_H
#define RACKPILOT_ERROR_H

#define RP_ERRORS(X)                                                                               \
	X(OK, 200, "ok")                                                                           \
	X(BAD_JSON, 400, "request body is not valid JSON")                                         \
	X(BAD_REQUEST, 400, "invalid request")                                                     \
	X(MISSING_FIELD, 400, "a required field is missing")                                       \
	X(INVALID_FIELD, 400, "a field has an invalid value")                                      \
	X(UNKNOWN_FIELD, 400, "unknown field")                                                     \
	X(READ_ONLY_FIELD, 400, "field cannot be written")                                         \
	X(BAD_QUERY, 400, "invalid query parameter")                                               \
	X(BAD_CURSOR, 400, "invalid or expired pagination cursor")                                 \
	X(IMPORT_INVALID, 400, "manifest has invalid rows; nothing was imported")                  \
	X(UNAUTHORIZED, 401, "missing or invalid API token")                                       \
	X(FORBIDDEN, 403, "token role does not allow this request")                                \
	X(NOT_FOUND, 404, "no such resource")                                                      \
	X(METHOD_NOT_ALLOWED, 405, "method not allowed on this resource")                          \
	X(CONFLICT, 409, "request conflicts with the current state")                               \
	X(DUPLICATE, 409, "a resource with that name or key already exists")                       \
	X(SLOT_OCCUPIED, 409, "rack units are already occupied")                                   \
	X(IN_USE, 409, "resource is still referenced")                                             \
	X(INVALID_STATE, 409, "action not allowed in the current state")                           \
	X(PREFLIGHT_FAILED, 409, "something the operation needs is missing")                       \
	X(PRECONDITION_FAILED, 412, "resource changed since it was read (If-Match)")               \
	X(TOO_LARGE, 413, "request body too large")                                                \
	X(UNSUPPORTED_MEDIA_TYPE, 415, "unsupported content type")                                 \
	X(UPGRADE_REQUIRED, 426, "unsupported WebSocket version (Sec-WebSocket-Version: 13)")      \
	X(RATE_LIMITED, 429, "too many requests; retry later")                                     \
	X(INTERNAL, 500, "internal error")                                                         \
	X(UNAVAILABLE, 503, "service temporarily unavailable")                                     \
	X(STORAGE_FULL, 503, "the database's filesystem is full; free space")                      \
	X(STORAGE_READONLY, 503, "the database is read-only; writes are refused")                  \
	X(STORAGE_IO, 503, "the database's storage failed (I/O error)")                            \
	X(UNSUPPORTED, 409, "the node's hardware or settings cannot do this")

enum rp_err {
#define RP_ERR_ENUM(name, status, msg) RP_ERR_##name,
	RP_ERRORS(RP_ERR_ENUM)
#undef RP_ERR_ENUM
	        RP_ERR__COUNT
};

static const struct rp_err_entry {
	const char *code;
	int status;
	const char *message;
} rp_err_table[RP_ERR__COUNT] = {
#define RP_ERR_ROW(name, st, msg) [RP_ERR_##name] = {#name, st, msg},
        RP_ERRORS(RP_ERR_ROW)
#undef RP_ERR_ROW
};

/* Wire code of e ("NOT_FOUND"); "INTERNAL" for values out of range. Static storage. */
static inline const char *
rp_err_code(enum rp_err e)
{
	return rp_err_table[(unsigned)e < RP_ERR__COUNT ? e : RP_ERR_INTERNAL].code;
}

/* HTTP status of e; 500 for values out of range. */
static inline int
rp_err_status(enum rp_err e)
{
	return (unsigned)e < RP_ERR__COUNT ? rp_err_table[e].status : 500;
}

/* Default human message of e. Static storage. */
static inline const char *
rp_err_message(enum rp_err e)
{
	return rp_err_table[(unsigned)e < RP_ERR__COUNT ? e : RP_ERR_INTERNAL].message;
}

/* Reverse lookup of a wire code: 0 and *out set, or -1 when the code is unknown. */
static inline int
rp_err_from_code(const char *code, enum rp_err *out)
{
	unsigned i;

	for (i = 0; code != NULL && i < RP_ERR__COUNT; i++) {
		const char *a = rp_err_table[i].code, *b = code;

		while (*a && *a == *b)
			a++, b++;
		if (*a == *b) {
			*out = (enum rp_err)i;
			return 0;
		}
	}
	return -1;
}

#endif
