/* Replies, errors, auth and the small pieces every handler shares. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api.h"
#include "rackpilot/agent.h"

void
rp_api_reply_buf(struct rp_api_resp *rs, struct rp_buf *b, const char *content_type)
{
	if (b->oom) {
		rp_buf_free(b);
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return;
	}
	rs->status = 200;
	rs->text = b->data;
	rs->text_len = b->len;
	rs->content_type = content_type;
	memset(b, 0, sizeof *b);
}

void
rp_api_resp_clear(struct rp_api_resp *rs)
{
	json_decref(rs->body);
	if (rs->text)
		(rs->text_free ? rs->text_free : free)(rs->text);
	rs->body = NULL;
	rs->text = NULL;
	rs->text_free = NULL;
	rs->text_len = 0;
	if (rs->has_file)
		close(rs->file_fd);
	rs->has_file = 0;
	rs->content_range[0] = '\0';
	if (rs->stream_free)
		rs->stream_free(rs->stream_ctx);
	rs->stream_read = NULL;
	rs->stream_free = NULL;
	rs->stream_ctx = NULL;
	rs->headers = NULL;
}

void
rp_api_error(struct rp_api_resp *rs, enum rp_err e, json_t *detail)
{
	rp_api_resp_clear(rs);
	rs->status = rp_err_status(e);
	/* The database cannot take writes (full, read-only, failing): reads still work, and the
	 * next write after the operator fixes it succeeds without a restart. */
	if (e == RP_ERR_STORAGE_FULL || e == RP_ERR_STORAGE_READONLY || e == RP_ERR_STORAGE_IO) {
		const char *why =
		        e == RP_ERR_STORAGE_FULL
		                ? "the data directory's filesystem is full; nothing changed; "
		                  "writes succeed again once space is freed"
		                : "the database cannot be written now; nothing changed; "
		                  "reads keep working (GET /healthz says why)";

		rs->retry_after = 30;
		if (detail == NULL)
			detail = json_pack("{s:s}", "reason", why);
	}
	rs->body = json_pack("{s:{s:s, s:s, s:o}}", "error", "code", rp_err_code(e), "message",
	                     rp_err_message(e), "detail", detail ? detail : json_null());
}

void
rp_api_errorf(struct rp_api_resp *rs, enum rp_err e, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	rp_api_error(rs, e, json_pack("{s:s}", "reason", buf));
}

static const char *const roles[] = {"none", "viewer", "operator", "admin", "agent"};

const char *
rp_api_role_name(enum rp_role r)
{
	return (unsigned)r <= RP_ROLE_AGENT ? roles[r] : "none";
}

enum rp_role
rp_api_role_parse(const char *s)
{
	int i;

	for (i = 1; s && i < 4; i++)
		if (strcmp(s, roles[i]) == 0)
			return (enum rp_role)i;
	return RP_ROLE_NONE;
}

enum rp_err
rp_api_authenticate(struct rp_api *api, const char *authorization, struct rp_principal *out)
{
	struct rp_token_info info;
	char hash[RP_SHA256_HEX], *cached;
	const char *tok;
	size_t n, clen;
	uint64_t gen;
	enum rp_err e;

	if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
		return RP_ERR_UNAUTHORIZED;
	tok = authorization + 7;
	while (*tok == ' ')
		tok++;
	n = strlen(tok);
	while (n > 0 && tok[n - 1] == ' ')
		n--;
	if (n == 0 || n > 128)
		return RP_ERR_UNAUTHORIZED;
	rp_sha256_hex(tok, n, hash);
	/* Every request authenticates; remember answers until the next write (revocations are
	 * writes), and re-check expiry on each hit. */
	gen = rp_store_generation(api->store);
	if (api->auth_cache && (cached = rp_memo_get(api->auth_cache, hash, gen, &clen)) != NULL) {
		int ok = clen == sizeof info;

		if (ok)
			memcpy(&info, cached, sizeof info);
		rp_memo_release(cached);
		if (ok && (info.expires_at == 0 || info.expires_at > rp_time_now_ms()))
			goto found;
	}
	memset(&info, 0, sizeof info);
	e = strncmp(tok, RP_TOKEN_PREFIX_AGENT, 4) == 0
	            ? rp_store_agent_auth(api->store, hash, &info)
	            : rp_store_token_auth(api->store, hash, &info);
	if (e != RP_ERR_OK)
		return e;
	if (api->auth_cache)
		rp_memo_put(api->auth_cache, hash, gen, &info, sizeof info);
found:
	out->role = strcmp(info.role, "agent") == 0 ? RP_ROLE_AGENT : rp_api_role_parse(info.role);
	memcpy(out->id, info.id, sizeof out->id);
	memcpy(out->name, info.name, sizeof out->name);
	out->node_id = info.node_id;
	return out->role == RP_ROLE_NONE ? RP_ERR_UNAUTHORIZED : RP_ERR_OK;
}

void
rp_api_etag(json_t *obj, char out[40])
{
	json_t *v = json_object_get(obj, "version");
	const char *a = json_string_value(json_object_get(obj, "power_state_at"));
	const char *b =
	        json_string_value(json_object_get(json_object_get(obj, "bmc"), "checked_at"));
	const char *c =
	        json_string_value(json_object_get(json_object_get(obj, "agent"), "seen_at"));
	const char *d = json_string_value(json_object_get(obj, "provision_at"));
	uint64_t h = 1469598103934665603ULL;
	const char *p;

	if (!json_is_integer(v)) {
		out[0] = '\0';
		return;
	}
	if (a == NULL && b == NULL && c == NULL && d == NULL) {
		snprintf(out, 40, "\"%lld\"", (long long)json_integer_value(v));
		return;
	}
	for (p = a ? a : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ '|') * 1099511628211ULL;
	for (p = b ? b : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ '|') * 1099511628211ULL;
	for (p = c ? c : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ '|') * 1099511628211ULL;
	for (p = d ? d : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	snprintf(out, 40, "\"%lld-%08x\"", (long long)json_integer_value(v),
	         (unsigned)(h ^ (h >> 32)));
}

int64_t
rp_api_if_match(struct rp_api_req *req, struct rp_api_resp *rs)
{
	const char *h = req->if_match;
	char *end;
	long long v;

	if (h == NULL || strcmp(h, "*") == 0)
		return 0;
	if (strncmp(h, "W/", 2) == 0)
		h += 2;
	if (*h != '"')
		goto bad;
	v = strtoll(h + 1, &end, 10);
	if (*end == '-') /* an observed-state suffix: not part of what If-Match guards */
		end += 1 + strspn(end + 1, "0123456789abcdef");
	if (end == h + 1 || *end != '"' || end[1] != '\0' || v <= 0)
		goto bad;
	return v;
bad:
	rp_api_errorf(rs, RP_ERR_PRECONDITION_FAILED,
	              "If-Match must be an ETag from this API, "
	              "like \"3\"");
	return -1;
}

void
rp_api_reply_object(struct rp_api_req *req, struct rp_api_resp *rs, int status, json_t *obj)
{
	rp_api_etag(obj, rs->etag);
	if (status == 200 && rs->etag[0] && req->if_none_match && strcmp(req->method, "GET") == 0 &&
	    (strcmp(req->if_none_match, rs->etag) == 0 || strcmp(req->if_none_match, "*") == 0)) {
		json_decref(obj);
		rs->status = 304;
		return;
	}
	rs->status = status;
	rs->body = obj;
}

void
rp_api_reply_store_error(struct rp_api_resp *rs, enum rp_err e, json_t *detail, const char *what)
{
	if (e == RP_ERR_NOT_FOUND && detail == NULL && what)
		detail = json_pack("{s:s}", "reason", what);
	rp_api_error(rs, e, detail);
}

void
rp_api_reply_ref_error(struct rp_api_resp *rs, enum rp_err e, const char *field, const char *what)
{
	if (e == RP_ERR_NOT_FOUND)
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", field, "reason", what));
	else
		rp_api_error(rs, e, NULL);
}

int
rp_api_query_one_of(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name,
                    const char *const *values)
{
	const char *v = json_string_value(json_object_get(rq->query, name));
	char list[256] = "";
	size_t i, n = 0;

	if (v == NULL || rp_str_index(values, v) >= 0)
		return 0;
	for (i = 0; values[i] && n < sizeof list; i++)
		n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
		                      i == 0          ? ""
		                      : values[i + 1] ? ", "
		                                      : " or ",
		                      values[i]);
	rp_api_errorf(rs, RP_ERR_BAD_QUERY, "%s must be %s", name, list);
	return -1;
}

int
rp_api_query_known(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *known)
{
	const char *k;
	json_t *v;

	json_object_foreach(rq->query, k, v)
	{
		if (rp_str_index(known, k) < 0) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY, "unknown query parameter '%s'", k);
			return -1;
		}
	}
	return 0;
}

int
rp_api_query_time(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name, int64_t *out)
{
	const char *v = json_string_value(json_object_get(rq->query, name));
	int64_t ms;

	if (v == NULL)
		return 0;
	if (rp_time_parse(v, &ms) < 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY,
		              "%s must be RFC 3339 (2026-11-30T04:00:00Z) or Unix seconds", name);
		return -1;
	}
	*out = ms;
	return 1;
}

void
rp_api_reply_at(struct rp_api_resp *rs, int status, const char *collection, json_t *obj)
{
	snprintf(rs->location, sizeof rs->location, "%s/%s", collection,
	         json_string_value(json_object_get(obj, "id")));
	rs->status = status;
	rs->body = obj;
}

void
rp_api_node_job(struct rp_api_req *rq, struct rp_api_resp *rs, json_t *job)
{
	json_t *detail = NULL, *out = NULL;
	enum rp_err e = RP_ERR_INTERNAL;
	char actor[96];

	if (job != NULL)
		e = rp_jobs_submit(rq->api->jobs, rq->params[0], job, rp_api_actor(rq, actor), &out,
		                   &detail);
	json_decref(job);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such node");
		return;
	}
	rp_api_reply_at(rs, 202, "/v1/jobs", out);
}

int
rp_api_token_mint(struct rp_api_resp *rs, const char *prefix, char *secret,
                  char hash[RP_SHA256_HEX])
{
	if (rp_token_new(prefix, secret) < 0) {
		rp_api_error(rs, RP_ERR_INTERNAL, NULL);
		return -1;
	}
	rp_sha256_hex(secret, strlen(secret), hash);
	return 0;
}

void
rp_api_reply_token(struct rp_api_resp *rs, enum rp_err e, json_t *out, const char *secret,
                   const char *collection)
{
	if (e != RP_ERR_OK) {
		json_decref(out);
		rp_api_error(rs, e, NULL);
		return;
	}
	json_object_set_new(out, "token", json_string(secret));
	rp_api_reply_at(rs, 201, collection, out);
}

void
rp_api_reply_items(struct rp_api_resp *rs, enum rp_err e, json_t *items)
{
	if (e != RP_ERR_OK) {
		json_decref(items);
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 200;
	rs->body = json_pack("{s:o, s:n}", "items", items, "next_cursor");
}

int
rp_api_sha256_valid(const char *s)
{
	size_t i;

	for (i = 0; s && s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F')))
			return 0;
	return s && i == 64;
}

const char *
rp_api_actor(struct rp_api_req *req, char buf[96])
{
	if (req->who && req->who->role == RP_ROLE_AGENT)
		snprintf(buf, 96, "agent:%s", req->who->name);
	else
		snprintf(buf, 96, "token:%s", req->who ? req->who->name : "anonymous");
	return buf;
}

int
rp_api_filter(struct rp_api_req *req, const char *const *keys, json_t **out, struct rp_api_resp *rs)
{
	json_t *f = json_object(), *v;

	for (; *keys; keys++) {
		v = json_object_get(req->query, *keys);
		if (v == NULL)
			continue;
		if (json_string_length(v) == 0 || json_string_length(v) > 256) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY, "%s must be 1 to 256 characters",
			              *keys);
			json_decref(f);
			return -1;
		}
		json_object_set(f, *keys, v);
	}
	*out = f;
	return 0;
}

void
rp_api_tls_pin(struct rp_api *api, char out[65])
{
	pthread_mutex_lock(&api->tls_mu);
	memcpy(out, api->tls_sha256, 65);
	pthread_mutex_unlock(&api->tls_mu);
}

void
rp_api_tls_pin_set(struct rp_api *api, const char *hex)
{
	pthread_mutex_lock(&api->tls_mu);
	snprintf(api->tls_sha256, sizeof api->tls_sha256, "%s", hex ? hex : "");
	pthread_mutex_unlock(&api->tls_mu);
}

uint64_t
rp_api_generation(struct rp_api *api)
{
	return rp_store_generation(api->store) + rp_jobs_console_generation(api->jobs);
}
