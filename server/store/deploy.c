/*
 * What a configured deploy keeps (docs/deploy.md): the first-boot token (derived from the
 * server's key and the job, so nothing to store and the same after a restart), the first
 * boot a deployed OS reports (once), a job's sealed secret payload, and the static
 * addresses deploys hand out (one node each).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define TOKEN_PREFIX "rpfb1."

enum rp_err
rp_store_first_boot_token(struct rp_store *st, const char *job, char *out, size_t len)
{
	unsigned char d[RP_SECRET_DERIVE_BYTES];
	char hex[2 * RP_SECRET_DERIVE_BYTES + 1];
	size_t i;

	if (st->secrets == NULL || rp_secrets_derive(st->secrets, "rackpilot first-boot token v1",
	                                             job, strlen(job), d) < 0)
		return RP_ERR_INTERNAL;
	for (i = 0; i < sizeof d; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	explicit_bzero(d, sizeof d);
	if ((size_t)snprintf(out, len, TOKEN_PREFIX "%s.%s", job, hex) >= len) {
		explicit_bzero(hex, sizeof hex);
		return RP_ERR_INTERNAL;
	}
	explicit_bzero(hex, sizeof hex);
	return RP_ERR_OK;
}

/* Equal, in time that depends on the length only (a token's bytes are not guessed one by
 * one). */
static int
same(const char *a, const char *b, size_t n)
{
	volatile unsigned char diff = 0;
	size_t i;

	for (i = 0; i < n; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
	return diff == 0;
}

enum rp_err
rp_store_first_boot_record(struct rp_store *st, const char *token, json_t *report,
                           const char *source, json_t **out, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	struct node_ref n;
	char job[RP_UUID_BUF], want[160], type[32] = "", state[16] = "", instance[64];
	char summary[600], *text = NULL;
	const char *dot;
	int64_t job_id = 0, node_id = 0, now = rp_time_now_ms();
	enum rp_err e;
	json_t *addrs;

	/* The token names its job; it is good only if the server's key derives it. Whatever
	 * is wrong with it, the answer is the same 401: it tells nothing of which jobs exist. */
	if (strncmp(token, TOKEN_PREFIX, strlen(TOKEN_PREFIX)) != 0 ||
	    (dot = strchr(token + strlen(TOKEN_PREFIX), '.')) == NULL ||
	    (size_t)(dot - token - strlen(TOKEN_PREFIX)) != RP_UUID_BUF - 1)
		return RP_ERR_UNAUTHORIZED;
	memcpy(job, token + strlen(TOKEN_PREFIX), RP_UUID_BUF - 1);
	job[RP_UUID_BUF - 1] = '\0';
	if ((e = rp_store_first_boot_token(st, job, want, sizeof want)) != RP_ERR_OK)
		return e;
	if (strlen(token) != strlen(want) || !same(token, want, strlen(want))) {
		explicit_bzero(want, sizeof want);
		return RP_ERR_UNAUTHORIZED;
	}
	explicit_bzero(want, sizeof want);
	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT_ARGS(c, "SELECT id, type, state, coalesce(node_id, 0) FROM jobs WHERE uuid = ?",
	              job);
	if ((e = store_one(c, s, "first boot job")) != RP_ERR_OK) {
		e = e == RP_ERR_NOT_FOUND ? RP_ERR_UNAUTHORIZED : e;
		goto out;
	}
	job_id = sql_int(s, 0);
	snprintf(type, sizeof type, "%s", sql_text(s, 1));
	snprintf(state, sizeof state, "%s", sql_text(s, 2));
	node_id = sql_int(s, 3);
	sql_reset(s);
	if (strcmp(type, "deploy") != 0 || node_id == 0) {
		e = RP_ERR_UNAUTHORIZED;
		goto out;
	}
	snprintf(instance, sizeof instance, "rp-%s", job);
	if (strcmp(json_string_value(json_object_get(report, "instance_id")) ?: "", instance)) {
		*detail = store_why("instance_id", "this token's deploy is instance %s", instance);
		e = RP_ERR_INVALID_FIELD;
		goto out;
	}
	s = STMT_ARGS(c, "SELECT 1 FROM first_boots WHERE job_id = ?", job_id);
	if ((e = store_one(c, s, "first boot")) == RP_ERR_OK) {
		sql_reset(s);
		*detail = store_why(NULL, "this deploy's first boot was already reported: the "
		                          "token is good once");
		e = RP_ERR_CONFLICT;
		goto out;
	} else if (e != RP_ERR_NOT_FOUND) {
		goto out;
	}
	if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0) {
		*detail = store_why(NULL, "the deploy already ended (%s)", state);
		e = RP_ERR_CONFLICT;
		goto out;
	}
	if ((text = store_canon(report)) == NULL) {
		e = RP_ERR_INTERNAL;
		goto out;
	}
	s = STMT_ARGS(c,
	              "INSERT INTO first_boots(job_id, node_id, reported_at, source, report) "
	              "VALUES (?1, ?2, ?3, ?4, ?5)",
	              job_id, node_id, now, source);
	sql_bind_text(s, 5, text);
	if ((e = store_exec(c, s, "first boot insert")) != RP_ERR_OK ||
	    (e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	addrs = json_object_get(report, "addresses");
	snprintf(summary, sizeof summary,
	         "%s came up from its disk as %s (kernel %s, %zu "
	         "address%s)",
	         n.name, json_string_value(json_object_get(report, "hostname")) ?: "?",
	         json_string_value(json_object_get(report, "kernel")) ?: "?",
	         json_array_size(addrs), json_array_size(addrs) == 1 ? "" : "es");
	if ((e = store_event(c, "rackpilotd", "node.first_boot", "node", n.uuid, n.name, n.id,
	                     n.rack_id, summary, report)) != RP_ERR_OK)
		goto out;
	e = store_commit(c);
	if (e == RP_ERR_OK) {
		char at[RP_TIME_BUF];

		*out = json_pack("{s:s, s:s, s:s}", "job", job, "node", n.name, "reported_at",
		                 rp_time_format(now, at));
	}
out:
	free(text);
	store_rollback(c);
	return e;
}

enum rp_err
rp_store_first_boot_get(struct rp_store *st, int64_t job_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s = STMT_ARGS(c,
	                           "SELECT report, reported_at, source FROM first_boots WHERE "
	                           "job_id = ?",
	                           job_id);
	json_t *r;
	enum rp_err e;

	if ((e = store_one(c, s, "first boot read")) != RP_ERR_OK)
		return e;
	r = json_loads(sql_text(s, 0), 0, NULL);
	if (r == NULL) {
		sql_reset(s);
		return RP_ERR_INTERNAL;
	}
	{
		char at[RP_TIME_BUF];

		json_object_set_new(r, "reported_at",
		                    json_string(rp_time_format(sql_int(s, 1), at)));
	}
	if (sql_type(s, 2) != SQL_NULL)
		json_object_set_new(r, "source", json_string(sql_text(s, 2)));
	sql_reset(s);
	*out = r;
	return RP_ERR_OK;
}

enum rp_err
rp_store_job_secret(struct rp_store *st, int64_t job_id, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s = STMT_ARGS(c, "SELECT secret_sealed FROM jobs WHERE id = ?", job_id);
	json_t *plain = NULL, *v = NULL;
	json_error_t jerr;
	enum rp_err e;

	if ((e = store_one(c, s, "job secret")) != RP_ERR_OK)
		return e;
	if (sql_type(s, 0) == SQL_NULL) {
		sql_reset(s);
		*out = NULL;
		return RP_ERR_OK;
	}
	plain = store_unseal(c, sql_text(s, 0), "job");
	sql_reset(s);
	if (plain == NULL)
		return RP_ERR_INTERNAL;
	v = json_loads(json_string_value(plain), 0, &jerr);
	explicit_bzero((char *)json_string_value(plain), json_string_length(plain));
	json_decref(plain);
	if (v == NULL) {
		rp_log_error("job #%lld: its sealed secret is no JSON: %s", (long long)job_id,
		             jerr.text);
		return RP_ERR_INTERNAL;
	}
	*out = v;
	return RP_ERR_OK;
}

enum rp_err
store_addresses_claim(struct conn *c, const struct node_ref *n, int64_t job_id, json_t *addresses,
                      json_t **detail)
{
	struct stmt *s;
	json_t *a;
	size_t i;
	enum rp_err e;

	/* A node's new deploy replaces what its last one held. */
	s = STMT_ARGS(c, "DELETE FROM node_addresses WHERE node_id = ?", n->id);
	if ((e = store_exec(c, s, "addresses release")) != RP_ERR_OK)
		return e;
	json_array_foreach(addresses, i, a)
	{
		s = STMT_ARGS(
		        c,
		        "SELECT n.name FROM node_addresses a JOIN nodes n ON n.id = a.node_id "
		        "WHERE a.address = ?",
		        json_string_value(a));
		if ((e = store_one(c, s, "address owner")) == RP_ERR_OK) {
			*detail =
			        store_why("config.network", "address %s is node %s's (its deploy)",
			                  json_string_value(a), sql_text(s, 0));
			sql_reset(s);
			return RP_ERR_INVALID_FIELD;
		}
		if (e != RP_ERR_NOT_FOUND)
			return e;
		s = STMT_ARGS(
		        c, "INSERT INTO node_addresses(address, node_id, job_id) VALUES (?, ?, ?)",
		        json_string_value(a), n->id, job_id);
		if ((e = store_exec(c, s, "address claim")) != RP_ERR_OK)
			return e;
	}
	return RP_ERR_OK;
}

enum rp_err
store_addresses_release(struct conn *c, int64_t node_id)
{
	return store_exec(c, STMT_ARGS(c, "DELETE FROM node_addresses WHERE node_id = ?", node_id),
	                  "addresses release");
}
