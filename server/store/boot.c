/* Network boot: the image store, boot profiles, what a booting MAC gets, the bootstrap tokens
 * written into boot scripts, and the host list dnsmasq serves. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "rackpilot/agent.h"
#include "internal.h"

#define IMAGE_COLS                                                                                 \
	"SELECT id AS _id, uuid AS id, name, kind, file, size, sha256, description, version, "     \
	"created_by, created_at AS \"created_at:time\", updated_at AS \"updated_at:time\" FROM "   \
	"images "

#define PROFILE_COLS                                                                               \
	"SELECT p.id AS _id, p.uuid AS id, p.name, p.node_class, k.name AS kernel, i.name AS "     \
	"initrd, p.cmdline, p.description, (SELECT count(*) FROM nodes WHERE boot_profile_id = "   \
	"p.id) AS node_count, p.version, p.created_at AS \"created_at:time\", p.updated_at AS "    \
	"\"updated_at:time\" FROM boot_profiles p JOIN images k ON k.id = p.kernel_id JOIN "       \
	"images i ON i.id = p.initrd_id "

/* ---- Images ---------------------------------------------------------------------------- */

static enum rp_err
image_load(struct conn *c, int64_t id, json_t **out)
{
	struct stmt *s = STMT_ARGS(c, IMAGE_COLS "WHERE id = ?", id);

	return store_one_row(c, s, "image load", out);
}

enum rp_err
rp_store_image_create(struct rp_store *st, json_t *in, const char *actor, json_t **out,
                      json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	struct stmt *s;
	char uuid[RP_UUID_BUF], summary[300];
	json_t *obj = NULL;
	int64_t id = 0, now = rp_time_now_ms();
	enum rp_err e;

	if (c == NULL || rp_uuid_new(uuid) < 0)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	e = store_id_of(c, T_IMAGE, json_string_value(json_object_get(in, "name")), &id);
	if (e == RP_ERR_OK) {
		*detail = store_why("name", "an image named '%s' exists; delete it first",
		                    json_string_value(json_object_get(in, "name")));
		e = RP_ERR_DUPLICATE;
		goto out;
	}
	if (e != RP_ERR_NOT_FOUND)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "INSERT INTO images(uuid, name, kind, file, size, sha256, description, "
	              "created_by, created_at, updated_at) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?9)",
	              uuid);
	store_bind_str(s, 2, in, "name");
	store_bind_str(s, 3, in, "kind");
	store_bind_str(s, 4, in, "file");
	store_bind_int(s, 5, in, "size");
	store_bind_str(s, 6, in, "sha256");
	store_bind_str(s, 7, in, "description");
	sql_bind_text(s, 8, actor);
	sql_bind_int(s, 9, now);
	if ((e = store_exec(c, s, "image insert")) != RP_ERR_OK) {
		if (e == RP_ERR_CONFLICT) {
			*detail = store_why("file", "another image already uses that file");
			e = RP_ERR_DUPLICATE;
		}
		goto out;
	}
	if ((e = image_load(c, sql_last_id(c), &obj)) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "%s image %s added (%lld bytes, sha256 %.16s...)",
	         json_string_value(json_object_get(in, "kind")),
	         json_string_value(json_object_get(in, "name")),
	         (long long)json_integer_value(json_object_get(in, "size")),
	         json_string_value(json_object_get(in, "sha256")));
	e = store_event(c, actor, "image.created", "image", uuid,
	                json_string_value(json_object_get(in, "name")), 0, 0, summary, NULL);
out:
	return store_end(c, e, obj, out);
}

enum rp_err
rp_store_image_get(struct rp_store *st, const char *key, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	int64_t id = 0;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if ((e = store_id_of(c, T_IMAGE, key, &id)) != RP_ERR_OK)
		return e;
	return image_load(c, id, out);
}

enum rp_err
rp_store_image_list(struct rp_store *st, const struct rp_page_req *rq, struct rp_page *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (rq->sort_by_name) {
		s = STMT_ARGS(c,
		              IMAGE_COLS
		              "WHERE (?1 IS NULL OR name > ?1) AND (?2 IS NULL OR kind = ?2) "
		              "ORDER BY name LIMIT ?3",
		              rq->after_key);
	} else {
		s = STMT_ARGS(c,
		              IMAGE_COLS
		              "WHERE images.id > ?1 AND (?2 IS NULL OR kind = ?2) ORDER BY "
		              "images.id LIMIT ?3",
		              rq->after_id);
	}
	store_bind_str(s, 2, rq->filter, "kind");
	sql_bind_int(s, 3, rq->limit + 1);
	return store_page(c, s, rq, "name", out);
}

enum rp_err
rp_store_image_delete(struct rp_store *st, const char *key, const char *actor, json_t **out,
                      json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *obj = NULL;
	struct stmt *s;
	int64_t id = 0, users = 0;
	char summary[200];
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_id_of(c, T_IMAGE, key, &id)) != RP_ERR_OK ||
	    (e = image_load(c, id, &obj)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(
	        c, "SELECT count(*) FROM boot_profiles WHERE kernel_id = ?1 OR initrd_id = ?1", id);
	if ((e = store_one(c, s, "image users")) != RP_ERR_OK)
		goto out; /* an aggregate: always a row */
	users = sql_int(s, 0);
	sql_reset(s);
	e = RP_ERR_INTERNAL;
	if (users > 0) {
		*detail = store_why(NULL, "%lld boot profile(s) use this image", (long long)users);
		e = RP_ERR_IN_USE;
		goto out;
	}
	s = STMT_ARGS(c, "DELETE FROM images WHERE id = ?", id);
	if ((e = store_exec(c, s, "image delete")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "image %s deleted",
	         json_string_value(json_object_get(obj, "name")));
	e = store_event(c, actor, "image.deleted", "image",
	                json_string_value(json_object_get(obj, "id")),
	                json_string_value(json_object_get(obj, "name")), 0, 0, summary, NULL);
out:
	return store_end(c, e, obj, out);
}

/* ---- Boot profiles --------------------------------------------------------------------- */

/* Insert (*id == 0) or rewrite a profile from a whole object; checks names and images. */
static enum rp_err
profile_save(struct conn *c, struct store_res *r, int64_t *id, json_t *obj, json_t **detail)
{
	const char *name = json_string_value(json_object_get(obj, "name"));
	const char *cls = json_string_value(json_object_get(obj, "node_class"));
	const char *which[2] = {"kernel", "initrd"};
	int64_t other = 0, img[2];
	char uuid[RP_UUID_BUF];
	struct stmt *s;
	enum rp_err e;
	int i;

	(void)r;
	if ((e = store_id_of(c, T_BOOT_PROFILE, name, &other)) == RP_ERR_OK && other != *id) {
		*detail = store_why("name", "a boot profile named '%s' already exists", name);
		return RP_ERR_DUPLICATE;
	}
	if (e != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		return e;
	if (cls) {
		s = STMT_ARGS(c, "SELECT name FROM boot_profiles WHERE node_class = ? AND id != ?",
		              cls, *id);
		if ((e = store_one(c, s, "boot profile class")) == RP_ERR_OK) {
			*detail = store_why("node_class",
			                    "boot profile '%s' already applies to class '%s'",
			                    sql_text(s, 0), cls);
			sql_reset(s);
			return RP_ERR_DUPLICATE;
		}
		if (e != RP_ERR_NOT_FOUND)
			return e;
	}
	for (i = 0; i < 2; i++) {
		const char *key = json_string_value(json_object_get(obj, which[i]));

		if ((e = store_id_of(c, T_IMAGE, key, &img[i])) == RP_ERR_NOT_FOUND) {
			*detail = store_why(which[i], "no image named '%s'", key);
			return RP_ERR_INVALID_FIELD;
		}
		if (e != RP_ERR_OK)
			return e;
	}
	if (*id == 0) {
		if (rp_uuid_new(uuid) < 0)
			return RP_ERR_INTERNAL;
		s = STMT(c,
		         "INSERT INTO boot_profiles(uuid, name, node_class, kernel_id, initrd_id, "
		         "cmdline, description, created_at, updated_at) VALUES (?1,?2,?3,?4,?5,"
		         "coalesce(?6, ''),?7,?8,?8)");
	} else {
		s = STMT(c, "UPDATE boot_profiles SET name = ?2, node_class = ?3, kernel_id = ?4, "
		            "initrd_id = ?5, cmdline = coalesce(?6, ''), description = ?7, "
		            "version = version + 1, updated_at = ?8 WHERE id = ?9");
	}
	if (*id == 0)
		sql_bind_text(s, 1, uuid);
	else
		sql_bind_int(s, 9, *id);
	sql_bind_text(s, 2, name);
	sql_bind_text(s, 3, cls);
	sql_bind_int(s, 4, img[0]);
	sql_bind_int(s, 5, img[1]);
	store_bind_str(s, 6, obj, "cmdline");
	store_bind_str(s, 7, obj, "description");
	sql_bind_int(s, 8, rp_time_now_ms());
	if ((e = store_exec(c, s, "boot profile save")) != RP_ERR_OK)
		return e;
	if (*id == 0)
		*id = sql_last_id(c);
	return RP_ERR_OK;
}

static enum rp_err
profile_in_use(struct conn *c, struct store_res *r, int64_t id, json_t *before, json_t **detail)
{
	int64_t n = json_integer_value(json_object_get(before, "node_count"));

	(void)c, (void)r, (void)id;
	if (n == 0)
		return RP_ERR_OK;
	*detail = store_why(NULL, "%lld node(s) use this boot profile", (long long)n);
	return RP_ERR_IN_USE;
}

static const char *const profile_skip[] = {"version", "updated_at", "node_count", NULL};

static struct store_res profile_res = {
        .otype = "boot_profile",
        .noun = "boot profile",
        .diff_skip = profile_skip,
        .sql_load = PROFILE_COLS "WHERE p.id = ?",
        .sql_delete = "DELETE FROM boot_profiles WHERE id = ?",
        .sql_list_id = PROFILE_COLS "WHERE p.id > ?1 ORDER BY p.id LIMIT ?2",
        .sql_list_name = PROFILE_COLS "WHERE (?1 IS NULL OR p.name > ?1) ORDER BY p.name LIMIT ?2",
        .table = T_BOOT_PROFILE,
        .save = profile_save,
        .may_delete = profile_in_use,
};

STORE_RES_CALLS(boot_profile, &profile_res)

/* ---- Booting ----------------------------------------------------------------------------- */

enum rp_err
rp_store_boot_lookup(struct rp_store *st, const char *mac, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	json_t *node = NULL, *profile = NULL;
	enum rp_err e;

	if ((e = store_read(st, &c)) != RP_ERR_OK)
		return e;
	e = RP_ERR_INTERNAL;
	s = STMT_ARGS(c,
	              "SELECT n.id AS row_id, n.uuid AS id, n.name, n.provision_state AS state, "
	              "n.maintenance "
	              "AS \"maintenance:bool\", n.node_class, j.phase, n.boot_profile_id "
	              "FROM node_macs m JOIN nodes n ON n.id = m.node_id "
	              "LEFT JOIN jobs j ON j.id = n.provision_job_id WHERE m.mac = ?",
	              mac);
	if ((e = store_one_row(c, s, "boot lookup", &node)) != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		goto out;
	/* The node's own profile, else its class's, else "default". */
	s = STMT(c,
	         "SELECT p.name, p.cmdline, k.name AS kernel, i.name AS initrd FROM boot_profiles "
	         "p JOIN images k ON k.id = p.kernel_id JOIN images i ON i.id = p.initrd_id "
	         "WHERE p.id = ?1 OR (?1 IS NULL AND p.node_class = ?2) OR p.name = 'default' "
	         "ORDER BY (p.id = ?1) DESC, (p.node_class IS NOT DISTINCT FROM ?2 AND ?2 IS NOT "
	         "NULL) DESC LIMIT 1");
	if (node && json_is_integer(json_object_get(node, "boot_profile_id")))
		sql_bind_int(s, 1, json_integer_value(json_object_get(node, "boot_profile_id")));
	store_bind_str(s, 2, node, "node_class");
	if ((e = store_one_row(c, s, "boot profile", &profile)) != RP_ERR_OK &&
	    e != RP_ERR_NOT_FOUND)
		goto out;
	*out = json_pack("{s:o?, s:o?}", "node", node, "profile", profile);
	node = profile = NULL;
	e = RP_ERR_OK;
out:
	store_read_end(c);
	json_decref(node);
	json_decref(profile);
	return e;
}

/* The secret of a boot script's token: derived from the server's key and the token's id, so
 * the database holds only its hash yet a second fetch of the script can hand out the same
 * token (a fetch never revokes what the machine already has). */
static int
boot_secret(struct rp_store *st, const char *uuid, char out[RP_TOKEN_BUF])
{
	unsigned char d[32];

	if (st->secrets == NULL || rp_secrets_derive(st->secrets, "rackpilot bootstrap token v1",
	                                             uuid, strlen(uuid), d) < 0)
		return -1;
	memcpy(out, RP_TOKEN_PREFIX_BOOTSTRAP, 4);
	rp_b64url_encode(d, sizeof d, out + 4);
	explicit_bzero(d, sizeof d);
	return 0;
}

/* Tokens go a day after their expiry, used and revoked ones included (a replay then meets an
 * unknown token: refused, without an event). By the expiry index, at most limit rows per
 * call: a few per boot script here, a chunk per transaction when the leader prunes. */
enum rp_err
store_boot_prune(struct conn *c, int64_t now, int64_t limit)
{
	return EXEC(c, "bootstrap prune",
	            "DELETE FROM bootstrap_tokens WHERE id IN (SELECT id FROM "
	            "bootstrap_tokens WHERE expires_at < ?1 LIMIT ?2)",
	            now - RP_BOOT_TOKEN_RETAIN_MS, limit);
}

enum rp_err
rp_store_boot_token(struct rp_store *st, const struct rp_boot_req *r, char secret[RP_TOKEN_BUF],
                    char *why, size_t whylen)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct stmt *s;
	char uuid[RP_UUID_BUF] = "", token[RP_TOKEN_BUF], hash[RP_SHA256_HEX];
	int64_t now = rp_time_now_ms(), live = 0, mine = 0;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_boot_prune(c, now, 64)) != RP_ERR_OK)
		goto out;
	e = RP_ERR_INTERNAL;
	/* A live token of this machine with half its life ahead is handed out again. */
	s = STMT(c, "SELECT uuid, hash FROM bootstrap_tokens WHERE node_id IS NOT DISTINCT FROM ?1 "
	            "AND mac = ?2 AND "
	            "created_by = 'boot' AND used_at IS NULL AND revoked_at IS NULL AND "
	            "expires_at - ?3 >= ?4 / 2 AND (?5 IS NULL OR source = ?5) "
	            "ORDER BY id DESC LIMIT 1");
	if (r->node_id)
		sql_bind_int(s, 1, r->node_id);
	sql_bind_text(s, 2, r->mac);
	sql_bind_int(s, 3, now);
	sql_bind_int(s, 4, r->ttl_ms);
	if (r->bind_source)
		sql_bind_text(s, 5, r->source ? r->source : "");
	if ((e = store_one(c, s, "boot token lookup")) == RP_ERR_OK) {
		snprintf(uuid, sizeof uuid, "%s", sql_text(s, 0));
		snprintf(hash, sizeof hash, "%s", sql_text(s, 1));
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		goto out;
	e = RP_ERR_INTERNAL;
	if (uuid[0]) {
		char h[RP_SHA256_HEX];

		/* Made under a key since rotated: it still opens a registration, but its secret can
		 * no longer be derived; a new one is made below. */
		if (boot_secret(st, uuid, token) < 0)
			goto out;
		rp_sha256_hex(token, strlen(token), h);
		if (strcmp(h, hash) == 0) {
			e = store_commit(c);
			if (e == RP_ERR_OK)
				memcpy(secret, token, RP_TOKEN_BUF);
			goto out;
		}
	}
	/* A discovery slot per MAC, a few per address: made-up MACs from one host cannot take
	 * the slots a real new machine needs. */
	if (!r->node_id) {
		/* A MAC that holds a slot already (its token past half-life) keeps it. */
		s = STMT_ARGS(
		        c,
		        "SELECT count(DISTINCT mac), count(DISTINCT CASE WHEN source IS NOT "
		        "DISTINCT FROM ?2 THEN "
		        "mac "
		        "END) FROM bootstrap_tokens WHERE node_id IS NULL AND mac IS NOT NULL AND "
		        "mac != ?3 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?1",
		        now, r->source, r->mac);
		if ((e = store_one(c, s, "discovery slots")) != RP_ERR_OK)
			goto out; /* an aggregate: always a row */
		live = sql_int(s, 0);
		mine = sql_int(s, 1);
		sql_reset(s);
		e = RP_ERR_INTERNAL;
		if (live >= r->max_discovery) {
			snprintf(why, whylen,
			         "%lld machines are being discovered already; try later",
			         (long long)live);
			e = RP_ERR_UNAVAILABLE;
			goto out;
		}
		/* Every registration of a discovery token adds a node: they wait for an operator,
		 * and a host inventing MACs must not fill the database with them. */
		if (r->max_discovered > 0) {
			int64_t waiting = 0;

			s = STMT(c,
			         "SELECT count(*) FROM nodes WHERE provision_state = 'discovered'");
			if ((e = store_one(c, s, "discovered nodes")) != RP_ERR_OK)
				goto out;
			waiting = sql_int(s, 0);
			sql_reset(s);
			e = RP_ERR_INTERNAL;
			if (waiting >= r->max_discovered) {
				snprintf(why, whylen,
				         "%lld discovered nodes wait for an operator (adopt or "
				         "delete "
				         "them); no more are taken",
				         (long long)waiting);
				e = RP_ERR_UNAVAILABLE;
				goto out;
			}
		}
		if (r->max_per_source > 0 && mine >= r->max_per_source) {
			snprintf(why, whylen,
			         "%lld machines are being discovered from %s already; try later",
			         (long long)mine, r->source ? r->source : "this address");
			e = RP_ERR_UNAVAILABLE;
			goto out;
		}
	}
	if (rp_uuid_new(uuid) < 0 || boot_secret(st, uuid, token) < 0)
		goto out;
	rp_sha256_hex(token, strlen(token), hash);
	s = STMT_ARGS(c,
	              "INSERT INTO bootstrap_tokens(uuid, hash, node_id, mac, source, created_by, "
	              "created_at, expires_at) VALUES (?,?,?,?,?,'boot',?,?)",
	              uuid, hash);
	if (r->node_id)
		sql_bind_int(s, 3, r->node_id);
	sql_bind_text(s, 4, r->mac);
	sql_bind_text(s, 5, r->source);
	sql_bind_int(s, 6, now);
	sql_bind_int(s, 7, now + r->ttl_ms);
	if ((e = store_exec(c, s, "boot token")) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) == RP_ERR_OK)
		memcpy(secret, token, RP_TOKEN_BUF);
out:
	store_rollback(c);
	explicit_bzero(token, sizeof token);
	return e;
}

/* ---- dnsmasq ---------------------------------------------------------------------------- */

enum rp_err
rp_store_macs_version(struct rp_store *st, int64_t *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s =
	        STMT(c, "SELECT CAST(value AS BIGINT) FROM meta WHERE key = 'macs_version'");
	enum rp_err e;

	/* The row is made by the schema: its absence is a broken database, not "none". */
	if ((e = store_one(c, s, "macs version")) != RP_ERR_OK)
		return e == RP_ERR_NOT_FOUND ? RP_ERR_INTERNAL : e;
	*out = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

enum rp_err
rp_store_dhcp_hosts(struct rp_store *st, struct rp_buf *out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct stmt *s;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	s = STMT(c, "SELECT m.mac, n.name FROM node_macs m JOIN nodes n ON n.id = m.node_id "
	            "ORDER BY m.mac");
	while (store_next(c, s, "dhcp hosts", &e)) {
		const char *name = sql_text(s, 1);
		char host[64];
		size_t i, n = 0;

		/* A DHCP host name is a DNS label: keep letters, digits and '-'. */
		for (i = 0; name[i] && n < sizeof host - 1; i++)
			host[n++] = (char)((name[i] >= 'a' && name[i] <= 'z') ||
			                                   (name[i] >= 'A' && name[i] <= 'Z') ||
			                                   (name[i] >= '0' && name[i] <= '9')
			                           ? name[i]
			                           : '-');
		host[n] = '\0';
		rp_buf_printf(out, "%s,%s\n", sql_text(s, 0), host);
	}
	if (e != RP_ERR_OK)
		return e;
	return out->oom ? RP_ERR_INTERNAL : RP_ERR_OK;
}
