/* API tokens: only the SHA-256 of a secret is stored. */
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define TOKEN_COLS                                                                                 \
	"SELECT id AS _id, uuid AS id, name, role, created_at AS \"created_at:time\", "            \
	"created_by, expires_at AS \"expires_at:time\" FROM tokens "

static enum rp_err
insert(struct conn *c, const char *name, const char *role, const char *hash, int64_t expires_at,
       const char *actor, json_t **out)
{
	struct stmt *s;
	char uuid[RP_UUID_BUF], summary[160];
	int64_t id;
	enum rp_err e;

	if (rp_uuid_new(uuid) < 0)
		return RP_ERR_INTERNAL;
	s = STMT_ARGS(
	        c,
	        "INSERT INTO tokens(uuid, name, role, hash, created_at, created_by, expires_at) "
	        "VALUES (?,?,?,?,?,?,?)",
	        uuid, name, role, hash, rp_time_now_ms(), actor);
	if (expires_at > 0)
		sql_bind_int(s, 7, expires_at);
	if ((e = store_exec(c, s, "token insert")) != RP_ERR_OK)
		return e;
	id = sql_last_id(c);
	snprintf(summary, sizeof summary, "%s token '%s' created", role, name);
	if ((e = store_event(c, actor, "token.created", "token", uuid, name, 0, 0, summary,
	                     NULL)) != RP_ERR_OK)
		return e;
	if (out == NULL)
		return RP_ERR_OK;
	s = STMT_ARGS(c, TOKEN_COLS "WHERE id = ?", id);
	return store_one_row(c, s, "token read", out);
}

enum rp_err
rp_store_token_bootstrap(struct rp_store *st, const char *hash, int *created)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;
	int64_t n;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	s = STMT(c, "SELECT count(*) FROM tokens");
	if ((e = store_one(c, s, "token count")) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			e = RP_ERR_INTERNAL;
		goto out;
	}
	n = sql_int(s, 0);
	sql_reset(s);
	if (n == 0 && (e = insert(c, "admin", "admin", hash, 0, "rackpilotd", NULL)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*created = n == 0;
out:
	store_rollback(c);
	return e;
}

enum rp_err
rp_store_token_create(struct rp_store *st, const char *name, const char *role, const char *hash,
                      int64_t expires_at, const char *actor, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *obj = NULL;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	/* insert sets obj: a separate statement, as arguments are evaluated in no set order. */
	e = insert(c, name, role, hash, expires_at, actor, &obj);
	return store_end(c, e, obj, out);
}

/* The bearer of hash: an API token that is live now, or (agent) an enrolled agent's token. */
static enum rp_err
bearer(struct rp_store *st, int agent, const char *hash, struct rp_token_info *out)
{
	STORE_HOLD(st);
	static const char *const sql[] = {
	        "SELECT uuid, name, role, coalesce(expires_at, 0), 0 FROM tokens WHERE hash = ?1 "
	        "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?2)",
	        "SELECT n.uuid, n.name, 'agent', 0, n.id FROM agents a JOIN nodes n ON n.id = "
	        "a.node_id WHERE a.token_hash = ?1",
	};
	static int slots[2];
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	s = store_prep(c, &slots[agent], sql[agent]);
	sql_bind_text(s, 1, hash);
	if (!agent)
		sql_bind_int(s, 2, rp_time_now_ms());
	if ((e = store_one(c, s, agent ? "agent auth" : "token auth")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_UNAUTHORIZED : e;
	snprintf(out->id, sizeof out->id, "%s", sql_text(s, 0));
	snprintf(out->name, sizeof out->name, "%s", sql_text(s, 1));
	snprintf(out->role, sizeof out->role, "%s", sql_text(s, 2));
	out->expires_at = sql_int(s, 3);
	out->node_id = sql_int(s, 4);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
rp_store_token_auth(struct rp_store *st, const char *hash, struct rp_token_info *out)
{
	return bearer(st, 0, hash, out);
}

enum rp_err
rp_store_agent_auth(struct rp_store *st, const char *hash, struct rp_token_info *out)
{
	return bearer(st, 1, hash, out);
}

enum rp_err
rp_store_token_list(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return store_all(c,
	                 STMT_ARGS(c,
	                           TOKEN_COLS "WHERE revoked_at IS NULL AND (expires_at IS NULL OR "
	                                      "expires_at > ?) ORDER BY tokens.id DESC",
	                           rp_time_now_ms()),
	                 out);
}

enum rp_err
rp_store_token_revoke(struct rp_store *st, const char *id, const char *actor, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	enum rp_err e;
	char role[16] = "", name[64] = "", summary[160];
	int64_t now = rp_time_now_ms(), admins;
	int live;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT role, name, (SELECT count(*) FROM tokens WHERE role = 'admin' AND "
	              "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?2)), "
	              "(expires_at IS NULL OR expires_at > ?2) FROM tokens "
	              "WHERE uuid = ?1 AND revoked_at IS NULL",
	              id, now);
	if ((e = store_one(c, s, "token revoke")) != RP_ERR_OK)
		goto out;
	snprintf(role, sizeof role, "%s", sql_text(s, 0));
	snprintf(name, sizeof name, "%s", sql_text(s, 1));
	admins = sql_int(s, 2);
	live = sql_int(s, 3);
	sql_reset(s);
	/* Only a live admin token can be the last way in; an expired one may always go. */
	if (strcmp(role, "admin") == 0 && live && admins <= 1) {
		*detail = store_why(NULL, "this is the last admin token; create another one first");
		e = RP_ERR_CONFLICT;
		goto out;
	}
	s = STMT_ARGS(c, "UPDATE tokens SET revoked_at = ? WHERE uuid = ?", now, id);
	if ((e = store_exec(c, s, "token revoke")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "%s token '%s' revoked", role, name);
	if ((e = store_event(c, actor, "token.revoked", "token", id, name, 0, 0, summary, NULL)) !=
	    RP_ERR_OK)
		goto out;
out:
	return store_end(c, e, NULL, NULL);
}
