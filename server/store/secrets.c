/*
 * Secrets at rest: BMC passwords and webhook secrets are sealed under the server's key file
 * (util secret.c) in bmcs.password_sealed and webhooks.secret_sealed; the key never enters
 * the database. This file seals and opens them for the rest of the store, and brings a
 * database in line with its key at start and at a key rotation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

enum rp_err
store_seal(struct conn *c, const char *plain, char **out)
{
	if (plain == NULL) {
		*out = NULL;
		return RP_ERR_OK;
	}
	if (c->st->secrets == NULL) {
		rp_log_error("store: no secret key loaded; cannot store a secret");
		return RP_ERR_INTERNAL;
	}
	if (rp_secrets_seal(c->st->secrets, plain, strlen(plain), out) < 0) {
		rp_log_error("store: cannot seal a secret: %s", strerror(errno));
		return RP_ERR_INTERNAL;
	}
	return RP_ERR_OK;
}

json_t *
store_unseal(struct conn *c, const char *sealed, const char *whose)
{
	char why[256], *plain = NULL;
	size_t len = 0;
	json_t *v;

	if (sealed == NULL)
		return NULL;
	if (c->st->secrets == NULL ||
	    rp_secrets_open(c->st->secrets, sealed, &plain, &len, why, sizeof why) < 0) {
		rp_log_error("%s: cannot open its sealed secret: %s", whose,
		             c->st->secrets ? why : "no secret key loaded");
		return NULL;
	}
	v = json_stringn(plain, len);
	rp_secrets_plain_free(plain, len);
	return v;
}

/* Key ids the sealed values carry: bit 0 some under the current key, bit 1 some under the
 * next one, bit 2 some under neither. */
static enum rp_err
key_ids(struct conn *c, const struct rp_secrets *sec, int *seen)
{
	struct stmt *s = STMT(
	        c, "SELECT password_sealed FROM bmcs WHERE password_sealed IS NOT NULL UNION "
	           "ALL SELECT password_pending_sealed FROM bmcs WHERE password_pending_sealed "
	           "IS NOT NULL UNION ALL SELECT secret_sealed FROM webhooks WHERE "
	           "secret_sealed IS NOT NULL UNION ALL SELECT deploy_user_data_sealed FROM "
	           "node_classes WHERE deploy_user_data_sealed IS NOT NULL UNION ALL SELECT "
	           "secret_sealed FROM jobs WHERE secret_sealed IS NOT NULL");
	const char *next = rp_secrets_next_key_id(sec);
	char id[RP_SECRET_KEY_ID_BUF];
	enum rp_err e;

	*seen = 0;
	while (store_next(c, s, "sealed key ids", &e)) {
		if (rp_secrets_sealed_key_id(sql_text(s, 0), id, sizeof id) < 0)
			*seen |= 4;
		else if (!strcmp(id, rp_secrets_key_id(sec)))
			*seen |= 1;
		else if (next && !strcmp(id, next))
			*seen |= 2;
		else
			*seen |= 4;
	}
	return e;
}

/* Seal every value again under the key rp_secrets_seal uses now (and every plaintext one an
 * older version left), in the caller's transaction. */
static enum rp_err
reseal_all(struct conn *c, int *count)
{
	/* BMC passwords (in clear from an older version, or sealed), webhook secrets,
	 * rotations' pending BMC passwords, classes' deploy user data, then running jobs'
	 * secrets (a deploy's user data): "w" tells them apart (0 to 4). */
	struct stmt *s = STMT(c, "SELECT node_id, password, password_sealed, 0 FROM bmcs WHERE "
	                         "password IS NOT NULL OR password_sealed IS NOT NULL UNION ALL "
	                         "SELECT id, NULL, secret_sealed, 1 FROM webhooks WHERE "
	                         "secret_sealed IS NOT NULL UNION ALL SELECT node_id, NULL, "
	                         "password_pending_sealed, 2 FROM bmcs WHERE "
	                         "password_pending_sealed IS NOT NULL UNION ALL SELECT id, NULL, "
	                         "deploy_user_data_sealed, 3 FROM node_classes WHERE "
	                         "deploy_user_data_sealed IS NOT NULL UNION ALL SELECT id, NULL, "
	                         "secret_sealed, 4 FROM jobs WHERE secret_sealed IS NOT NULL");
	json_t *rows = json_array(), *row;
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i;

	if (rows == NULL)
		goto out;
	/* Read all first: the statement cannot stay open across the updates of its own rows. */
	while (store_next(c, s, "secrets read", &e)) {
		json_t *plain = NULL;

		if (sql_type(s, 2) != SQL_NULL) {
			char node[32];

			snprintf(node, sizeof node, "%s #%lld",
			         sql_int(s, 3) == 1   ? "webhook"
			         : sql_int(s, 3) == 3 ? "node class"
			         : sql_int(s, 3) == 4 ? "job"
			                              : "node",
			         (long long)sql_int(s, 0));
			if ((plain = store_unseal(c, sql_text(s, 2), node)) == NULL) {
				sql_reset(s);
				e = RP_ERR_CONFLICT;
				goto out;
			}
		} else if ((plain = json_string(sql_text(s, 1))) == NULL) {
			/* Not UTF-8 (not written through the API): say so rather than leave it in
			 * clear. */
			rp_log_error("node #%lld: its BMC password in clear is not valid UTF-8; "
			             "set it again",
			             (long long)sql_int(s, 0));
			sql_reset(s);
			e = RP_ERR_CONFLICT;
			goto out;
		}
		if (json_array_append_new(rows, json_pack("{s:I, s:o, s:I}", "id",
		                                          (json_int_t)sql_int(s, 0), "pw", plain,
		                                          "w", (json_int_t)sql_int(s, 3))) < 0) {
			sql_reset(s);
			e = RP_ERR_INTERNAL;
			goto out;
		}
	}
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(rows, i, row)
	{
		char *sealed = NULL;

		if ((e = store_seal(c, json_string_value(json_object_get(row, "pw")), &sealed)) !=
		    RP_ERR_OK)
			goto out;
		json_int_t w = json_integer_value(json_object_get(row, "w"));

		if (w == 1)
			s = STMT_ARGS(c, "UPDATE webhooks SET secret_sealed = ?2 WHERE id = ?1",
			              json_integer_value(json_object_get(row, "id")));
		else if (w == 3)
			s = STMT_ARGS(
			        c,
			        "UPDATE node_classes SET deploy_user_data_sealed = ?2 WHERE id = "
			        "?1",
			        json_integer_value(json_object_get(row, "id")));
		else if (w == 4)
			s = STMT_ARGS(c, "UPDATE jobs SET secret_sealed = ?2 WHERE id = ?1",
			              json_integer_value(json_object_get(row, "id")));
		else if (w == 2)
			s = STMT_ARGS(
			        c,
			        "UPDATE bmcs SET password_pending_sealed = ?2 WHERE node_id = ?1",
			        json_integer_value(json_object_get(row, "id")));
		else
			s = STMT_ARGS(c,
			              "UPDATE bmcs SET password_sealed = ?2, password = NULL WHERE "
			              "node_id = ?1",
			              json_integer_value(json_object_get(row, "id")));
		sql_bind_text_own(s, 2, sealed);
		if ((e = store_exec(c, s, "reseal")) != RP_ERR_OK)
			goto out;
	}
	*count = (int)json_array_size(rows);
	e = RP_ERR_OK;
out:
	/* The plaintexts are jansson strings: overwrite them before they are freed. */
	json_array_foreach(rows, i, row)
	{
		const char *pw = json_string_value(json_object_get(row, "pw"));

		if (pw)
			explicit_bzero((char *)pw, strlen(pw));
	}
	json_decref(rows);
	return e;
}

/* One transaction that seals everything again under the current sealing key. The driver
 * makes what was replaced unrecoverable from the database files (SQLite: cells zeroed as
 * they are rewritten and the WAL truncated after; with vacuum, after plaintext from an
 * older version, the whole file rewritten, free pages included). */
static enum rp_err
reseal(struct conn *c, int vacuum, int *count, char *why, size_t whylen)
{
	enum rp_err e;

	c->drv->begin_scrub(c->db);
	if ((e = store_begin(c)) != RP_ERR_OK)
		goto out;
	if ((e = reseal_all(c, count)) != RP_ERR_OK) {
		if (e == RP_ERR_CONFLICT)
			snprintf(why, whylen,
			         "a BMC password or webhook secret cannot be opened with the key "
			         "file or is unusable (the log names whose); nothing was changed");
		goto out;
	}
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
out:
	store_rollback(c);
	c->drv->end_scrub(c->db, e == RP_ERR_OK, vacuum);
	if (e != RP_ERR_OK && !why[0])
		snprintf(why, whylen, "cannot seal the BMC passwords and webhook secrets: %s",
		         rp_err_message(e));
	return e;
}

enum rp_err
rp_store_secrets_prepare(struct rp_store *st, int forget, char *why, size_t whylen)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct rp_secrets *sec = st->secrets;
	struct stmt *s;
	int seen = 0, legacy = 0, count = 0, bad = 0, total = 0, hooks = 0, bad_hooks = 0;
	char first[300] = "";
	enum rp_err e;

	why[0] = '\0';
	if (c == NULL || sec == NULL) {
		snprintf(why, whylen, "no database connection or no secret key");
		return RP_ERR_INTERNAL;
	}
	/* An interrupted rotation: the database is all under one key (one transaction), which
	 * decides whether the new key file is installed or dropped. */
	if (rp_secrets_next_key_id(sec)) {
		if ((e = key_ids(c, sec, &seen)) != RP_ERR_OK)
			return e;
		if ((seen & 3) == 3 && rp_secrets_rotate_begin(sec, why, whylen) == 0 &&
		    reseal(c, 0, &count, why, whylen) == RP_ERR_OK)
			seen = 2;
		/* Installed only when values need it; with none under the next key the current
		 * key stays (backups of the database may need it). */
		if ((seen & 2) && !(seen & 1)) {
			if (rp_secrets_rotate_finish(sec, why, whylen) < 0)
				return RP_ERR_INTERNAL;
			rp_log_warn("secrets: finished an interrupted key rotation (key %s)",
			            rp_secrets_key_id(sec));
		} else if (!(seen & 2)) {
			if (rp_secrets_rotate_abort(sec, why, whylen) < 0)
				return RP_ERR_INTERNAL;
			rp_log_warn("secrets: abandoned an interrupted key rotation; key %s stays",
			            rp_secrets_key_id(sec));
		} else {
			return RP_ERR_INTERNAL;
		}
	}
	/* Plaintext passwords of a database written before sealing existed. */
	s = STMT(c, "SELECT count(*) FROM bmcs WHERE password IS NOT NULL");
	if ((e = store_one(c, s, "legacy secrets")) == RP_ERR_OK) {
		legacy = sql_int(s, 0);
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND) {
		return e;
	}
	if (legacy > 0) {
		if ((e = reseal(c, 1, &count, why, whylen)) != RP_ERR_OK)
			return e;
		rp_log_info(
		        "secrets: sealed %d BMC password(s) stored in clear by an older version",
		        legacy);
	}
	/* Every value must open: a wrong key file found now is better than at the next job. */
	s = STMT(c,
	         "SELECT 'node', n.name, b.password_sealed FROM bmcs b JOIN nodes n ON n.id = "
	         "b.node_id WHERE b.password_sealed IS NOT NULL UNION ALL SELECT 'webhook', name, "
	         "secret_sealed FROM webhooks WHERE secret_sealed IS NOT NULL");
	while (store_next(c, s, "secrets check", &e)) {
		char r[256], *plain = NULL;
		size_t len = 0;
		int hook = !strcmp(sql_text(s, 0), "webhook");

		total += !hook;
		hooks += hook;
		if (rp_secrets_open(sec, sql_text(s, 2), &plain, &len, r, sizeof r) == 0) {
			rp_secrets_plain_free(plain, len);
			continue;
		}
		bad += !hook;
		bad_hooks += hook;
		if (!first[0])
			snprintf(first, sizeof first, "%s %s: %s", sql_text(s, 0), sql_text(s, 1),
			         r);
	}
	if (e != RP_ERR_OK)
		return e;
	if (bad == 0 && bad_hooks == 0)
		return RP_ERR_OK;
	if (!forget) {
		char what[160];

		if (bad && bad_hooks)
			snprintf(what, sizeof what,
			         "%d of %d BMC passwords and %d of %d webhook secrets", bad, total,
			         bad_hooks, hooks);
		else if (bad)
			snprintf(what, sizeof what, "%d of %d BMC passwords", bad, total);
		else
			snprintf(what, sizeof what, "%d of %d webhook secrets", bad_hooks, hooks);
		snprintf(why, whylen,
		         "%s cannot be opened with this secret key (%s). Restore the key file that "
		         "sealed them; or start once with --forget-secrets to clear them and enter "
		         "them again",
		         what, first);
		return RP_ERR_CONFLICT;
	}
	return rp_store_secrets_forget(st, why, whylen);
}

enum rp_err
rp_store_secrets_forget(struct rp_store *st, char *why, size_t whylen)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	struct stmt *s;
	json_t *gone = json_array(), *g;
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i;

	why[0] = '\0';
	if (c == NULL || gone == NULL || (e = store_begin(c)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT(c, "SELECT b.node_id, n.uuid, n.name, coalesce(n.rack_id, 0), b.password_sealed, "
	            "0 FROM bmcs b JOIN nodes n ON n.id = b.node_id WHERE b.password_sealed IS NOT "
	            "NULL UNION ALL SELECT id, uuid, name, 0, secret_sealed, 1 FROM webhooks WHERE "
	            "secret_sealed IS NOT NULL");
	while (store_next(c, s, "secrets forget read", &e)) {
		char *plain = NULL;
		size_t len = 0;

		if (rp_secrets_open(st->secrets, sql_text(s, 4), &plain, &len, NULL, 0) == 0) {
			rp_secrets_plain_free(plain, len);
			continue;
		}
		json_array_append_new(gone, json_pack("{s:I, s:s, s:s, s:I, s:b}", "id",
		                                      (json_int_t)sql_int(s, 0), "uuid",
		                                      sql_text(s, 1), "name", sql_text(s, 2),
		                                      "rack", (json_int_t)sql_int(s, 3), "w",
		                                      (int)sql_int(s, 5)));
	}
	if (e != RP_ERR_OK)
		goto out;
	json_array_foreach(gone, i, g)
	{
		char summary[200];

		if (json_is_true(json_object_get(g, "w"))) {
			/* A webhook without its secret sends nothing until it is given one. */
			s = STMT_ARGS(c, "UPDATE webhooks SET secret_sealed = NULL WHERE id = ?",
			              json_integer_value(json_object_get(g, "id")));
			if ((e = store_exec(c, s, "secrets forget")) != RP_ERR_OK)
				goto out;
			snprintf(summary, sizeof summary,
			         "secret of webhook %s cleared: it could not be opened with the "
			         "secret key; it sends nothing until its secret is set again",
			         json_string_value(json_object_get(g, "name")));
			if ((e = store_event(c, "rackpilotd --forget-secrets",
			                     "webhook.secret_cleared", "webhook",
			                     json_string_value(json_object_get(g, "uuid")),
			                     json_string_value(json_object_get(g, "name")), 0, 0,
			                     summary, NULL)) != RP_ERR_OK)
				goto out;
			continue;
		}
		s = STMT_ARGS(c, "UPDATE bmcs SET password_sealed = NULL WHERE node_id = ?",
		              json_integer_value(json_object_get(g, "id")));
		if ((e = store_exec(c, s, "secrets forget")) != RP_ERR_OK)
			goto out;
		snprintf(summary, sizeof summary,
		         "BMC password of %s cleared: it could not be opened with the secret key; "
		         "set "
		         "bmc.password again",
		         json_string_value(json_object_get(g, "name")));
		if ((e = store_event(c, "rackpilotd --forget-secrets", "node.bmc_password_cleared",
		                     "node", json_string_value(json_object_get(g, "uuid")),
		                     json_string_value(json_object_get(g, "name")),
		                     json_integer_value(json_object_get(g, "id")),
		                     json_integer_value(json_object_get(g, "rack")), summary,
		                     NULL)) != RP_ERR_OK)
			goto out;
	}
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	rp_log_warn("secrets: cleared %zu BMC password(s) and webhook secret(s) that the key could "
	            "not open",
	            json_array_size(gone));
out:
	if (c)
		store_rollback(c);
	if (e != RP_ERR_OK && !why[0])
		snprintf(why, whylen, "cannot clear the BMC passwords: %s", rp_err_message(e));
	json_decref(gone);
	return e;
}

enum rp_err
rp_store_secrets_reseal(struct rp_store *st, int *count, char *why, size_t whylen)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	why[0] = '\0';
	if (c == NULL || st->secrets == NULL) {
		snprintf(why, whylen, "no database connection or no secret key");
		return RP_ERR_INTERNAL;
	}
	return reseal(c, 0, count, why, whylen);
}
