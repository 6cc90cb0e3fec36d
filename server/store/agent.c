/* The on-node agent: bootstrap tokens, registration, agent tokens, heartbeats, pinned SSH host
 * keys, and what an agent may see and say about its own jobs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "internal.h"

#define BOOT_COLS                                                                                  \
	"SELECT t.id AS _id, t.uuid AS id, n.name AS node, t.created_by, t.created_at AS "         \
	"\"created_at:time\", t.expires_at AS \"expires_at:time\", t.used_at AS "                  \
	"\"used_at:time\", "                                                                       \
	"t.used_by, CASE WHEN t.revoked_at IS NOT NULL THEN 'revoked' WHEN t.used_at IS NOT NULL " \
	"THEN 'used' WHEN t.expires_at <= ?1 THEN 'expired' ELSE 'live' END AS state "             \
	"FROM bootstrap_tokens t LEFT JOIN nodes n ON n.id = t.node_id "

enum rp_err
rp_store_bootstrap_create(struct rp_store *st, const char *node, const char *hash,
                          int64_t expires_at, const char *actor, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	struct node_ref n = {0};
	struct stmt *s;
	char uuid[RP_UUID_BUF], summary[200];
	json_t *obj = NULL;
	int64_t id, now = rp_time_now_ms();
	enum rp_err e;

	if (c == NULL || rp_uuid_new(uuid) < 0)
		return RP_ERR_INTERNAL;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if (node && (e = store_node_ref(c, node, &n)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c,
	              "INSERT INTO bootstrap_tokens(uuid, hash, node_id, created_by, created_at, "
	              "expires_at) VALUES (?,?,?,?,?,?)",
	              uuid, hash);
	if (n.id)
		sql_bind_int(s, 3, n.id);
	sql_bind_text(s, 4, actor);
	sql_bind_int(s, 5, now);
	sql_bind_int(s, 6, expires_at);
	if ((e = store_exec(c, s, "bootstrap insert")) != RP_ERR_OK)
		goto out;
	id = sql_last_id(c);
	if (n.id)
		snprintf(summary, sizeof summary, "bootstrap token created for %s", n.name);
	else
		snprintf(summary, sizeof summary,
		         "bootstrap token created for any machine (discovery)");
	if ((e = store_event(c, actor, "bootstrap_token.created", "bootstrap_token", uuid,
	                     n.id ? n.name : NULL, n.id, n.rack_id, summary, NULL)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c, BOOT_COLS "WHERE t.id = ?2", now, id);
	if ((e = store_one_row(c, s, "bootstrap read", &obj)) == RP_ERR_NOT_FOUND)
		e = RP_ERR_INTERNAL; /* inserted just now */
out:
	return store_end(c, e, obj, out);
}

enum rp_err
rp_store_bootstrap_list(struct rp_store *st, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);

	return store_all(c,
	                 STMT_ARGS(c,
	                           BOOT_COLS "WHERE t.used_at IS NULL AND t.revoked_at IS NULL AND "
	                                     "t.expires_at > ?1 ORDER BY t.id DESC LIMIT 1000",
	                           rp_time_now_ms()),
	                 out);
}

enum rp_err
rp_store_bootstrap_revoke(struct rp_store *st, const char *id, const char *actor)
{
	STORE_HOLD(st);
	struct conn *c = store_writer(st);
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	if (!rp_uuid_valid(id))
		return RP_ERR_NOT_FOUND;
	if ((e = store_begin(c)) != RP_ERR_OK)
		return e;
	if ((e = EXEC(c, "bootstrap revoke",
	              "UPDATE bootstrap_tokens SET revoked_at = ?2 WHERE uuid = lower(?1) AND "
	              "revoked_at IS NULL AND used_at IS NULL",
	              id, rp_time_now_ms())) != RP_ERR_OK)
		goto out;
	if (sql_changes(c) == 0) {
		e = RP_ERR_NOT_FOUND;
		goto out;
	}
	e = store_event(c, actor, "bootstrap_token.revoked", "bootstrap_token", id, NULL, 0, 0,
	                "bootstrap token revoked", NULL);
out:
	return store_end(c, e, NULL, NULL);
}

/* ---- Registration ---------------------------------------------------------------------- */

/* The node owning mac, or 0. */
static enum rp_err
mac_owner(struct conn *c, const char *mac, int64_t *node_id)
{
	struct stmt *s = STMT_ARGS(c, "SELECT node_id FROM node_macs WHERE mac = ?", mac);
	enum rp_err e;

	if ((e = store_one(c, s, "mac owner")) == RP_ERR_NOT_FOUND) {
		*node_id = 0;
		return RP_ERR_OK;
	}
	if (e != RP_ERR_OK)
		return e;
	*node_id = sql_int(s, 0);
	sql_reset(s);
	return RP_ERR_OK;
}

/* Copy a short inventory string into a node field when it is usable as one. */
static void
take(json_t *node, const char *field, json_t *system, const char *key)
{
	const char *v = json_string_value(json_object_get(system, key));

	if (v && v[0] && strlen(v) <= 128)
		json_object_set_new(node, field, json_string(v));
}

/* An unknown machine becomes a `discovered` node named after its first MAC, carrying the
 * identity its inventory reports. */
static enum rp_err
discover(struct conn *c, json_t *macs, json_t *inventory, const char *actor, int64_t *id,
         json_t **detail)
{
	json_t *node = json_object(), *system = json_object_get(inventory, "system");
	const char *mac = json_string_value(json_array_get(macs, 0)), *u;
	char name[64], hex[13];
	int64_t other;
	enum rp_err e;
	int i, j;

	for (i = j = 0; mac[i] && j < 12; i++)
		if (mac[i] != ':')
			hex[j++] = mac[i];
	hex[j] = '\0';
	snprintf(name, sizeof name, "discovered-%s", hex);
	for (i = 2; store_id_of(c, T_NODE, name, &other) == RP_ERR_OK && i < 100; i++)
		snprintf(name, sizeof name, "discovered-%s-%d", hex, i);
	json_object_set_new(node, "name", json_string(name));
	json_object_set(node, "macs", macs);
	take(node, "serial", system, "serial");
	take(node, "vendor", system, "vendor");
	take(node, "model", system, "product");
	u = json_string_value(json_object_get(system, "uuid"));
	if (u && rp_uuid_valid(u)) {
		char lower[RP_UUID_BUF];

		for (i = 0; i < 36; i++)
			lower[i] = (char)((u[i] >= 'A' && u[i] <= 'F') ? u[i] + 32 : u[i]);
		lower[36] = '\0';
		json_object_set_new(node, "system_uuid", json_string(lower));
	}
	if ((e = store_node_insert(c, node, actor, id, detail)) != RP_ERR_OK)
		goto out;
	e = EXEC(c, "discover", "UPDATE nodes SET provision_state = 'discovered' WHERE id = ?",
	         *id);
out:
	json_decref(node);
	return e;
}

/* Pin key for node n, recording a first pin or a change as an event. */
static enum rp_err
pin(struct conn *c, const struct node_ref *n, const struct rp_sshkey *key, const char *why,
    const char *actor)
{
	struct stmt *s = STMT(c, "SELECT key_type, key_b64, fingerprint FROM ssh_host_keys "
	                         "WHERE node_id = ?");
	char old_fp[64] = "", summary[300];
	int same = 0, had = 0;
	json_t *d;
	enum rp_err e;

	sql_bind_int(s, 1, n->id);
	if ((e = store_one(c, s, "host key read")) == RP_ERR_OK) {
		had = 1;
		same = !strcmp(sql_text(s, 0), key->type) && !strcmp(sql_text(s, 1), key->b64);
		snprintf(old_fp, sizeof old_fp, "%s", sql_text(s, 2));
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		return e;
	if (same)
		return RP_ERR_OK;
	s = STMT_ARGS(
	        c,
	        "INSERT INTO ssh_host_keys(node_id, key_type, key_b64, fingerprint, pinned_at, "
	        "pinned_by) VALUES (?1,?2,?3,?4,?5,?6) ON CONFLICT(node_id) DO UPDATE SET "
	        "key_type = ?2, key_b64 = ?3, fingerprint = ?4, pinned_at = ?5, pinned_by = ?6",
	        n->id, key->type, key->b64, key->fingerprint, rp_time_now_ms(), actor);
	if ((e = store_exec(c, s, "host key pin")) != RP_ERR_OK)
		return e;
	if (had)
		snprintf(summary, sizeof summary, "SSH host key of %s re-pinned by %s: %s -> %s",
		         n->name, why, old_fp, key->fingerprint);
	else
		snprintf(summary, sizeof summary, "SSH host key of %s pinned by %s: %s", n->name,
		         why, key->fingerprint);
	d = json_pack("{s:s?, s:s, s:s}", "from", had ? old_fp : NULL, "to", key->fingerprint,
	              "type", key->type);
	e = store_event(c, actor, had ? "node.host_key_changed" : "node.host_key_pinned", "node",
	                n->uuid, n->name, n->id, n->rack_id, summary, d);
	json_decref(d);
	return e;
}

/* A live bootstrap token: its row, the node it is bound to (0: none), the MAC whose boot
 * script carried it and the address that fetched that script ("" when not from a script). */
struct boot_tok {
	int64_t id, node_id;
	char uuid[RP_UUID_BUF];
	char mac[RP_MAC_BUF];
	char source[64];
};

/* The live token with this hash. RP_ERR_UNAUTHORIZED with a reason when unknown, used,
 * expired or revoked. */
static enum rp_err
boot_lookup(struct conn *c, const char *hash, struct boot_tok *t, json_t **detail)
{
	struct stmt *s;
	char reason[64] = "";
	enum rp_err e;

	memset(t, 0, sizeof *t);
	s = STMT_ARGS(c,
	              "SELECT id, coalesce(node_id, 0), CASE WHEN revoked_at IS NOT NULL THEN "
	              "'revoked' WHEN used_at IS NOT NULL THEN 'already used' WHEN expires_at <= ? "
	              "THEN 'expired' END, coalesce(mac, ''), coalesce(source, ''), uuid "
	              "FROM bootstrap_tokens WHERE hash = ?",
	              rp_time_now_ms(), hash);
	if ((e = store_one(c, s, "bootstrap lookup")) == RP_ERR_OK) {
		t->id = sql_int(s, 0);
		t->node_id = sql_int(s, 1);
		if (sql_type(s, 2) != SQL_NULL)
			snprintf(reason, sizeof reason, "%s", sql_text(s, 2));
		snprintf(t->mac, sizeof t->mac, "%s", sql_text(s, 3));
		snprintf(t->source, sizeof t->source, "%s", sql_text(s, 4));
		snprintf(t->uuid, sizeof t->uuid, "%s", sql_text(s, 5));
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		return e;
	if (t->id == 0 || reason[0]) {
		*detail = store_why(NULL, "bootstrap token %s", t->id ? reason : "unknown");
		return RP_ERR_UNAUTHORIZED;
	}
	return RP_ERR_OK;
}

/* A real token presented once too often, too late or after its revocation: the operator
 * sees it (a replayed boot script, a clone, a slow ramdisk), once per token and address
 * however often it is replayed (store_refusal counts). Unknown tokens leave no trace, so a
 * flood of made-up ones cannot fill the event log. */
static void
bootstrap_refused(struct conn *c, const char *hash, const char *peer, json_t *why)
{
	struct stmt *s;
	char uuid[RP_UUID_BUF] = "", summary[200];
	int64_t node_id = 0;
	struct node_ref n = {0};
	const char *reason = json_string_value(json_object_get(why, "reason"));

	s = STMT_ARGS(c, "SELECT uuid, coalesce(node_id, 0) FROM bootstrap_tokens WHERE hash = ?",
	              hash);
	/* Best effort: no row or an error records nothing. */
	if (store_one(c, s, "bootstrap refused") != RP_ERR_OK)
		return;
	snprintf(uuid, sizeof uuid, "%s", sql_text(s, 0));
	node_id = sql_int(s, 1);
	sql_reset(s);
	if (node_id && store_node_by_id(c, node_id, &n) != RP_ERR_OK)
		return;
	snprintf(summary, sizeof summary, "refused a registration from %s: %s", peer ? peer : "?",
	         reason ? reason : "bootstrap token not valid");
	store_refusal(c, "bootstrap_token.refused", "bootstrap_token", uuid,
	              node_id ? n.name : NULL, node_id, peer, summary, NULL);
}

enum rp_err
rp_store_bootstrap_check(struct rp_store *st, const char *hash, const char *peer, json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = store_conn(st);
	struct boot_tok t;
	enum rp_err e;

	if (c == NULL)
		return RP_ERR_UNAVAILABLE;
	e = boot_lookup(c, hash, &t, detail);
	if (e == RP_ERR_UNAUTHORIZED)
		bootstrap_refused(c, hash, peer, *detail);
	return e;
}

/* Why a registration was refused, for the event written after the rollback: by default an
 * agent.register_refused about the node whose identity was at stake. */
struct refusal {
	const char *action, *otype; /* NULL: agent.register_refused, node */
	int64_t node_id;            /* the node whose identity was at stake, or 0 */
	char node[64];
	char uuid[RP_UUID_BUF]; /* the event's object id */
	char summary[300];
	json_t *detail; /* owned */
};

/* A live token presented the wrong way (another MAC, another address): like a replayed one,
 * the operator sees it as bootstrap_token.refused. */
static void
token_refused(struct refusal *f, const struct boot_tok *t, const char *why)
{
	f->action = "bootstrap_token.refused";
	f->otype = "bootstrap_token";
	f->node_id = t->node_id;
	snprintf(f->uuid, sizeof f->uuid, "%s", t->uuid);
	snprintf(f->summary, sizeof f->summary, "refused a registration: bootstrap token %s", why);
}

static enum rp_err refuse(struct refusal *f, const struct node_ref *n, json_t *detail,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Fill f (and so the event) from n and a summary; detail is taken. RP_ERR_CONFLICT. */
static enum rp_err
refuse(struct refusal *f, const struct node_ref *n, json_t *detail, const char *fmt, ...)
{
	va_list ap;

	if (n) {
		f->node_id = n->id;
		snprintf(f->node, sizeof f->node, "%s", n->name);
		snprintf(f->uuid, sizeof f->uuid, "%s", n->uuid);
	}
	va_start(ap, fmt);
	vsnprintf(f->summary, sizeof f->summary, fmt, ap);
	va_end(ap);
	json_decref(f->detail);
	f->detail = detail;
	return RP_ERR_CONFLICT;
}

static enum rp_err
node_state(struct conn *c, int64_t id, char *buf, size_t len)
{
	struct stmt *s = STMT_ARGS(c, "SELECT provision_state FROM nodes WHERE id = ?", id);
	enum rp_err e;

	if ((e = store_one(c, s, "node state")) != RP_ERR_OK)
		return e;
	snprintf(buf, len, "%s", sql_text(s, 0));
	sql_reset(s);
	return RP_ERR_OK;
}

static int
provisioning(const char *state)
{
	return !strcmp(state, "commissioning") || !strcmp(state, "deploying") ||
	       !strcmp(state, "releasing");
}

/* Which node a registration is for, by the rules of docs/agent-protocol.md "Trust": a token
 * bound to a node registers that node, and none of the MACs may be another node's; a token
 * bound to no node (discovery) creates a new `discovered` node, or re-registers the one
 * `discovered` node that owns the MAC the token was issued to, and may claim no MAC of any
 * other node. *node_id 0: create one. RP_ERR_CONFLICT with f filled when refused. */
static enum rp_err
whose(struct conn *c, const struct boot_tok *t, json_t *macs, int64_t *node_id, json_t **detail,
      struct refusal *f)
{
	json_t *m, *theirs = json_array();
	int64_t owner, target = t->node_id, other = 0;
	struct node_ref o = {0};
	char state[32] = "";
	enum rp_err e = RP_ERR_INTERNAL;
	size_t i;

	if (theirs == NULL)
		return RP_ERR_INTERNAL;
	/* Without a bound node, the first owned MAC names the candidate. */
	json_array_foreach(macs, i, m)
	{
		if ((e = mac_owner(c, json_string_value(m), &owner)) != RP_ERR_OK)
			goto out;
		if (owner == 0)
			continue;
		if (target == 0)
			target = owner;
		if (owner != target) {
			json_array_append(theirs, m);
			other = other ? other : owner;
		}
	}
	if (json_array_size(theirs) > 0) {
		if ((e = store_node_by_id(c, other, &o)) != RP_ERR_OK)
			goto out;
		*detail = json_pack("{s:s, s:s, s:O, s:s}", "field", "macs", "reason",
		                    "MAC addresses belong to another node", "macs", theirs, "node",
		                    o.name);
		e = refuse(f, &o, json_pack("{s:O}", "macs", theirs),
		           "refused a registration claiming %zu MAC address(es) of %s",
		           json_array_size(theirs), o.name);
		goto out;
	}
	if (t->node_id == 0 && target != 0) {
		if ((e = store_node_by_id(c, target, &o)) != RP_ERR_OK ||
		    (e = node_state(c, target, state, sizeof state)) != RP_ERR_OK ||
		    (t->mac[0] && (e = mac_owner(c, t->mac, &owner)) != RP_ERR_OK))
			goto out;
		if (strcmp(state, "discovered") != 0 || (t->mac[0] && owner != target)) {
			/* Name the MACs of that node the registration claimed. */
			json_array_foreach(macs, i, m)
			{
				if ((e = mac_owner(c, json_string_value(m), &owner)) != RP_ERR_OK)
					goto out;
				if (owner == target)
					json_array_append(theirs, m);
			}
			*detail = json_pack("{s:s, s:s, s:O, s:s}", "field", "macs", "reason",
			                    "a discovery token registers only a new machine or a "
			                    "discovered node that owns the MAC it was issued to; "
			                    "enrolled nodes need a token bound to them",
			                    "macs", theirs, "node", o.name);
			e = refuse(f, &o, json_pack("{s:O, s:s}", "macs", theirs, "state", state),
			           "refused a discovery registration claiming %zu MAC address(es) "
			           "of %s (%s)",
			           json_array_size(theirs), o.name, state);
			goto out;
		}
	}
	*node_id = target;
	e = RP_ERR_OK;
out:
	json_decref(theirs);
	return e;
}

/* May this registration replace n's pinned host key? Only a token bound to n, while n is
 * being commissioned, deployed or released (its ramdisk makes a new key every boot): a
 * stranger with the MAC, or a token left over from another time, cannot swap the key the
 * server trusts. OK when nothing is pinned or the key is the same; *why says which case
 * applies. RP_ERR_CONFLICT with f filled when refused. */
static enum rp_err
may_pin(struct conn *c, const struct boot_tok *t, const struct node_ref *n,
        const struct rp_sshkey *key, char *why, size_t whylen, json_t **detail, struct refusal *f)
{
	struct stmt *s = STMT(c, "SELECT key_type, key_b64, fingerprint FROM ssh_host_keys "
	                         "WHERE node_id = ?");
	char state[32] = "", fp[64] = "";
	int had = 0, same = 0;
	enum rp_err e;

	sql_bind_int(s, 1, n->id);
	if ((e = store_one(c, s, "host key read")) == RP_ERR_OK) {
		had = 1;
		same = !strcmp(sql_text(s, 0), key->type) && !strcmp(sql_text(s, 1), key->b64);
		snprintf(fp, sizeof fp, "%s", sql_text(s, 2));
		sql_reset(s);
	} else if (e != RP_ERR_NOT_FOUND)
		return e;
	if ((e = node_state(c, n->id, state, sizeof state)) != RP_ERR_OK)
		return e;
	snprintf(why, whylen, "agent registration (%s bootstrap token, %s)",
	         t->node_id ? "node-bound" : "discovery", state);
	if (!had || same)
		return RP_ERR_OK;
	if (t->node_id == n->id && provisioning(state))
		return RP_ERR_OK;
	*detail = json_pack("{s:s, s:s, s:s, s:s}", "field", "ssh_host_key", "reason",
	                    "the node has another SSH host key pinned; a registration replaces it "
	                    "only with a token bound to the node while it is commissioned, "
	                    "deployed or released (or an operator re-pins it: PUT or DELETE "
	                    "/v1/nodes/{node}/ssh-host-key)",
	                    "pinned", fp, "offered", key->fingerprint);
	return refuse(f, n,
	              json_pack("{s:s, s:s, s:s, s:s}", "pinned", fp, "offered", key->fingerprint,
	                        "state", state, "token", t->node_id ? "node-bound" : "discovery"),
	              "refused a registration of %s with another SSH host key (%s, %s token)",
	              n->name, state, t->node_id ? "node-bound" : "discovery");
}

enum rp_err
rp_store_agent_register(struct rp_store *st, const struct rp_agent_reg *r, json_t **out,
                        json_t **detail)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	json_t *body = r->body, *macs = json_object_get(body, "macs"), *m;
	json_t *inv = json_object_get(body, "inventory"), *ssh = json_object_get(body, "ssh");
	const char *address;
	struct refusal f = {0};
	struct boot_tok t;
	struct node_ref n;
	struct stmt *s;
	int64_t node_id = 0, now = rp_time_now_ms();
	char actor[96], summary[240], pin_why[120];
	enum rp_err e;
	int created = 0;
	size_t i;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = boot_lookup(c, r->bootstrap_hash, &t, detail)) != RP_ERR_OK)
		goto out;
	/* A token from a boot script belongs to the machine that asked for it. */
	if (t.mac[0]) {
		int mine = 0;

		json_array_foreach(macs, i, m) mine |= !strcmp(json_string_value(m), t.mac);
		if (!mine) {
			*detail = store_why("macs", "this bootstrap token was issued to %s", t.mac);
			e = RP_ERR_UNAUTHORIZED;
			token_refused(&f, &t, "presented without the MAC it was issued to");
			goto out;
		}
	}
	if (r->source_check && t.source[0] && (r->peer == NULL || strcmp(r->peer, t.source) != 0)) {
		*detail = store_why(NULL,
		                    "this bootstrap token was issued to %s; register from that "
		                    "address (boot_source_check)",
		                    t.source);
		e = RP_ERR_UNAUTHORIZED;
		token_refused(&f, &t,
		              "presented from another address than the one it was issued to");
		goto out;
	}
	if ((e = whose(c, &t, macs, &node_id, detail, &f)) != RP_ERR_OK)
		goto out;
	snprintf(actor, sizeof actor, "agent:%s",
	         json_string_value(json_object_get(body, "hostname")) ?: "unknown");
	if (node_id == 0) {
		if ((e = discover(c, macs, inv, actor, &node_id, detail)) != RP_ERR_OK)
			goto out;
		created = 1;
	}
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	if ((e = may_pin(c, &t, &n, r->host_key, pin_why, sizeof pin_why, detail, &f)) != RP_ERR_OK)
		goto out;
	snprintf(actor, sizeof actor, "agent:%s", n.name);
	/* MACs nobody claims yet join this node: the agent sees cabling the manifest missed. */
	json_array_foreach(macs, i, m)
	{
		if ((e = EXEC(c, "mac add",
		              "INSERT INTO node_macs(mac, node_id) VALUES (?, ?) ON CONFLICT DO "
		              "NOTHING",
		              json_string_value(m), n.id)) != RP_ERR_OK)
			goto out;
	}
	if (json_array_size(macs) > 0) {
		store_macs_changed(c);
		if ((e = store_node_lists(c, n.id)) != RP_ERR_OK)
			goto out;
	}
	if (json_is_object(inv) &&
	    (e = store_inventory_write(c, &n, "agent", inv, actor)) != RP_ERR_OK)
		goto out;
	if ((e = pin(c, &n, r->host_key, pin_why, actor)) != RP_ERR_OK)
		goto out;
	address = json_string_value(json_object_get(ssh, "address"));
	if (address == NULL)
		address = r->peer;
	s = STMT_ARGS(
	        c,
	        "INSERT INTO agents(node_id, token_hash, registered_at, seen_at, boot_id, version, "
	        "status, hostname, address, port) VALUES (?1,?2,?3,?3,?4,?5,'idle',?6,?7,?8) "
	        "ON CONFLICT(node_id) DO UPDATE SET token_hash = ?2, registered_at = ?3, "
	        "seen_at = ?3, boot_id = ?4, version = ?5, status = 'idle', hostname = ?6, "
	        "address = ?7, port = ?8",
	        n.id, r->token_hash, now);
	store_bind_str(s, 4, body, "boot_id");
	store_bind_str(s, 5, body, "agent_version");
	store_bind_str(s, 6, body, "hostname");
	sql_bind_text(s, 7, address);
	store_bind_int(s, 8, ssh, "port");
	if ((e = store_exec(c, s, "agent upsert")) != RP_ERR_OK)
		goto out;
	if ((e = EXEC(c, "bootstrap use",
	              "UPDATE bootstrap_tokens SET used_at = ?2, used_by = ?3 WHERE id = ?1", t.id,
	              now, n.name)) != RP_ERR_OK)
		goto out;
	/* The machine is in: whatever other boot script tokens were handed out for it (its other
	 * MACs, or someone else asking with its MAC) open nothing any more. */
	s = STMT_ARGS(
	        c,
	        "UPDATE bootstrap_tokens SET revoked_at = ?2 WHERE id != ?1 AND used_at IS NULL "
	        "AND revoked_at IS NULL AND created_by = 'boot' AND (node_id = ?3 OR (node_id IS "
	        "NULL AND mac IN (SELECT mac FROM node_macs WHERE node_id = ?3)))",
	        t.id, now, n.id);
	if ((e = store_exec(c, s, "bootstrap revoke others")) != RP_ERR_OK)
		goto out;
	/* A lifecycle job waiting for this agent runs at the scheduler's next tick, not at the end
	 * of its poll interval: registration is what it waits for. Only waits come early, never a
	 * retry's back-off. */
	s = STMT_ARGS(c,
	              "UPDATE jobs SET not_before = ?2 WHERE node_id = ?1 AND state = 'queued' AND "
	              "error_code = 'waiting' AND not_before > ?2",
	              n.id, now);
	if ((e = store_exec(c, s, "wake waiting jobs")) != RP_ERR_OK)
		goto out;
	snprintf(summary, sizeof summary, "agent on %s registered%s (%s)", n.name,
	         created ? " as a discovered machine" : "",
	         json_string_value(json_object_get(body, "hostname")) ?: "no hostname");
	if ((e = store_event(c, actor, "node.agent_registered", "node", n.uuid, n.name, n.id,
	                     n.rack_id, summary, NULL)) != RP_ERR_OK)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	*out = json_pack("{s:{s:s, s:s}, s:b}", "node", "id", n.uuid, "name", n.name, "created",
	                 created);
out:
	store_rollback(c);
	/* The refusal is recorded after the rollback: the registration changed nothing. */
	if (f.summary[0]) {
		json_t *d = json_pack("{s:O?, s:s}", "refused", f.detail, "token", t.uuid);

		store_refusal(c, f.action ? f.action : "agent.register_refused",
		              f.otype ? f.otype : "node", f.uuid[0] ? f.uuid : NULL,
		              f.node[0] ? f.node : NULL, f.node_id, r->peer, f.summary, d);
		json_decref(d);
	}
	json_decref(f.detail);
	return e;
}

enum rp_err
rp_store_agent_heartbeat(struct rp_store *st, int64_t node_id, json_t *hb)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	const char *boot = json_string_value(json_object_get(hb, "boot_id"));
	char before[64] = "", summary[200];
	struct node_ref n;
	struct stmt *s;
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	s = STMT_ARGS(c, "SELECT coalesce(boot_id, '') FROM agents WHERE node_id = ?", node_id);
	if ((e = store_one(c, s, "heartbeat read")) != RP_ERR_OK) {
		if (e == RP_ERR_NOT_FOUND)
			e = RP_ERR_UNAUTHORIZED;
		goto out;
	}
	snprintf(before, sizeof before, "%s", sql_text(s, 0));
	sql_reset(s);
	s = STMT_ARGS(
	        c,
	        "UPDATE agents SET seen_at = ?2, boot_id = coalesce(?3, boot_id), "
	        "version = coalesce(?4, version), status = coalesce(?5, status) WHERE node_id "
	        "= ?1",
	        node_id, rp_time_now_ms(), boot);
	store_bind_str(s, 4, hb, "agent_version");
	store_bind_str(s, 5, hb, "status");
	if ((e = store_exec(c, s, "heartbeat")) != RP_ERR_OK)
		goto out;
	if (boot && before[0] && strcmp(boot, before) != 0) {
		snprintf(summary, sizeof summary, "agent on %s is back from a reboot", n.name);
		if ((e = store_event(c, "rackpilotd", "node.agent_rebooted", "node", n.uuid, n.name,
		                     n.id, n.rack_id, summary, NULL)) != RP_ERR_OK)
			goto out;
	}
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_agent_inventory(struct rp_store *st, int64_t node_id, json_t *inventory)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	char actor[96];
	enum rp_err e;

	if ((e = store_write(st, &c)) != RP_ERR_OK)
		return e;
	if ((e = store_node_by_id(c, node_id, &n)) != RP_ERR_OK)
		goto out;
	snprintf(actor, sizeof actor, "agent:%s", n.name);
	e = store_inventory_write(c, &n, "agent", inventory, actor);
out:
	return store_end(c, e, NULL, NULL);
}

enum rp_err
rp_store_node_host_key_set(struct rp_store *st, const char *key, const struct rp_sshkey *hk,
                           const char *actor, json_t **out)
{
	STORE_HOLD(st);
	struct conn *c = NULL;
	struct node_ref n;
	struct stmt *s;
	json_t *obj = NULL;
	enum rp_err e;

	if ((e = store_write_node(st, key, &c, &n)) != RP_ERR_OK)
		return e;
	if (hk) {
		if ((e = pin(c, &n, hk, "an operator", actor)) != RP_ERR_OK)
			goto out;
	} else {
		s = STMT_ARGS(c, "DELETE FROM ssh_host_keys WHERE node_id = ?", n.id);
		if ((e = store_exec(c, s, "host key unpin")) != RP_ERR_OK)
			goto out;
		if (sql_changes(c) == 0) {
			e = RP_ERR_NOT_FOUND;
			goto out;
		}
		{
			char summary[160];

			snprintf(summary, sizeof summary, "SSH host key of %s unpinned", n.name);
			if ((e = store_event(c, actor, "node.host_key_unpinned", "node", n.uuid,
			                     n.name, n.id, n.rack_id, summary, NULL)) != RP_ERR_OK)
				goto out;
		}
	}
	s = STMT_ARGS(
	        c,
	        "SELECT key_type AS type, fingerprint, pinned_at AS \"pinned_at:time\", pinned_by "
	        "FROM ssh_host_keys WHERE node_id = ?",
	        n.id);
	if ((e = store_one_row(c, s, "host key read", &obj)) != RP_ERR_OK && e != RP_ERR_NOT_FOUND)
		goto out;
	if ((e = store_commit(c)) != RP_ERR_OK)
		goto out;
	if (out) {
		*out = obj;
		obj = NULL;
	}
out:
	store_rollback(c);
	json_decref(obj);
	return e;
}
