/*
 * The agent protocol (docs/agent-protocol.md): bootstrap tokens, registration, heartbeats,
 * inventory and step results; pinned host keys; the server's own SSH key.
 *
 * Agent routes are open only to agent tokens, and every one of them acts on the caller's own
 * node (rq->who->node_id): a node cannot name another node here at all, and a job of another
 * node answers 403.
 */
#include <string.h>
#include <strings.h>

#include "api.h"
#include "deploy/deploy.h"
#include "rackpilot/agent.h"
#include "rackpilot/version.h"

#define BOOTSTRAP_DEFAULT_S 3600
#define BOOTSTRAP_MAX_S     (7 * 86400)

static const struct rp_field bootstrap_fields[] = {
        {"node", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"expires_in_s", RP_F_INT, 0, 60, BOOTSTRAP_MAX_S},
        {NULL},
};

static const struct rp_field reg_ssh_fields[] = {
        {"address", RP_F_HOST, RP_F_NULLABLE},
        {"port", RP_F_INT, RP_F_NULLABLE, 1, 65535},
        {NULL},
};

static const struct rp_field reg_fields[] = {
        {"format", RP_F_INT, RP_F_REQUIRED, RP_AGENT_FORMAT, RP_AGENT_FORMAT},
        {"agent_version", RP_F_STR, 0, 0, 32},
        {"hostname", RP_F_STR, 0, 0, 253},
        {"boot_id", RP_F_STR, 0, 0, 64},
        {"macs", RP_F_MACS, RP_F_REQUIRED, 0, 64},
        {"ssh_host_key", RP_F_STR, RP_F_REQUIRED, 0, 4096},
        {"ssh", RP_F_OBJECT, RP_F_NULLABLE, 0, 0, NULL, reg_ssh_fields},
        {"inventory", RP_F_ANY_OBJECT, RP_F_NULLABLE},
        {NULL},
};

static const char *const agent_states[] = {"idle", "busy", NULL};

static const struct rp_field heartbeat_fields[] = {
        {"boot_id", RP_F_STR, 0, 0, 64},
        {"agent_version", RP_F_STR, 0, 0, 32},
        {"status", RP_F_ENUM, 0, 0, 0, agent_states},
        {"uptime_s", RP_F_INT, 0, 0, 1e12},
        {NULL},
};

static const char *const report_states[] = {"running", "succeeded", "failed", NULL};

/* Either an image step's counts or a shell step's ready (its ready_port listens); every member
 * optional, so each kind sends only its own. */
static const struct rp_field progress_fields[] = {
        {"bytes_read", RP_F_INT, 0, 0, 1e15},
        {"bytes_written", RP_F_INT, 0, 0, 1e15},
        {"total", RP_F_INT, RP_F_NULLABLE, 0, 1e15},
        {"rate_bps", RP_F_INT, 0, 0, 1e12},
        {"ready", RP_F_BOOL, 0},
        {NULL},
};

static const struct rp_field report_fields[] = {
        {"state", RP_F_ENUM, RP_F_REQUIRED, 0, 0, report_states},
        {"run", RP_F_UUID, RP_F_NULLABLE},
        {"boot_id", RP_F_STR, RP_F_NULLABLE, 0, 64},
        {"exit_code", RP_F_INT, RP_F_NULLABLE, -1024, 1024},
        {"duration_ms", RP_F_INT, RP_F_NULLABLE, 0, 1e12},
        {"output", RP_F_STR, RP_F_NULLABLE, 0, RP_STEP_OUTPUT_TAIL},
        {"output_bytes", RP_F_INT, RP_F_NULLABLE, 0, 1e15},
        {"output_truncated", RP_F_BOOL, RP_F_NULLABLE},
        {"error", RP_F_STR, RP_F_NULLABLE, 0, 4096},
        {"result", RP_F_ANY_OBJECT, RP_F_NULLABLE},
        /* A running step's progress (image: bytes written, rate; shell: ready). */
        {"progress", RP_F_OBJECT, RP_F_NULLABLE, 0, 0, NULL, progress_fields},
        {NULL},
};

static const struct rp_field host_key_fields[] = {
        {"key", RP_F_STR, RP_F_REQUIRED, 0, 4096},
        {NULL},
};

/* The secret after "Bearer ", or NULL. */
static const char *
bearer(const char *h, size_t *len)
{
	size_t n;

	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	while (*h == ' ')
		h++;
	n = strlen(h);
	while (n > 0 && h[n - 1] == ' ')
		n--;
	if (n == 0 || n > 128)
		return NULL;
	*len = n;
	return h;
}

/* ---- Bootstrap tokens (operators) ------------------------------------------------------ */

void
rp_api_bootstrap_create(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL, *exp;
	char secret[RP_TOKEN_BUF], hash[RP_SHA256_HEX], actor[96];
	int64_t ttl = BOOTSTRAP_DEFAULT_S;
	enum rp_err e;

	/* No body at all: a discovery token with the default lifetime. */
	if (rq->body &&
	    (e = rp_api_validate(rq->body, bootstrap_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	exp = json_object_get(rq->body, "expires_in_s");
	if (json_is_integer(exp))
		ttl = json_integer_value(exp);
	if (rp_api_token_mint(rs, RP_TOKEN_PREFIX_BOOTSTRAP, secret, hash) < 0)
		return;
	e = rp_store_bootstrap_create(rq->api->store,
	                              json_string_value(json_object_get(rq->body, "node")), hash,
	                              rp_time_now_ms() + ttl * 1000, rp_api_actor(rq, actor), &out);
	if (e == RP_ERR_NOT_FOUND) {
		rp_api_reply_ref_error(rs, e, "node", "no such node");
		return;
	}
	rp_api_reply_token(rs, e, out, secret, "/v1/bootstrap-tokens");
}

void
rp_api_bootstrap_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *items = NULL;
	enum rp_err e = rp_store_bootstrap_list(rq->api->store, &items);

	rp_api_reply_items(rs, e, items);
}

void
rp_api_bootstrap_revoke(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	char actor[96];
	enum rp_err e =
	        rp_store_bootstrap_revoke(rq->api->store, rq->params[0], rp_api_actor(rq, actor));

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no unused bootstrap token with that id");
		return;
	}
	rs->status = 204;
}

/* ---- Host keys and the server key (operators) ------------------------------------------ */

void
rp_api_ssh_key(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_sshkey k;

	if (rq->api->ssh_public_key == NULL || rp_sshkey_parse(rq->api->ssh_public_key, &k) < 0) {
		rp_api_errorf(rs, RP_ERR_UNAVAILABLE, "rackpilotd has no SSH key");
		return;
	}
	rs->status = 200;
	rs->body = json_pack("{s:s, s:s, s:s}", "key", rq->api->ssh_public_key, "type", k.type,
	                     "fingerprint", k.fingerprint);
}

void
rp_api_nodes_host_key_set(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL;
	struct rp_sshkey k;
	char actor[96];
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, host_key_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if (rp_sshkey_parse(json_string_value(json_object_get(rq->body, "key")), &k) < 0) {
		rp_api_error(
		        rs, RP_ERR_INVALID_FIELD,
		        json_pack("{s:s, s:s}", "field", "key", "reason",
		                  "an OpenSSH public key line (\"ssh-ed25519 AAAA... comment\")"));
		return;
	}
	e = rp_store_node_host_key_set(rq->api->store, rq->params[0], &k, rp_api_actor(rq, actor),
	                               &out);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_nodes_host_key_clear(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	char actor[96];
	enum rp_err e = rp_store_node_host_key_set(rq->api->store, rq->params[0], NULL,
	                                           rp_api_actor(rq, actor), NULL);

	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such node, or no key pinned");
		return;
	}
	rs->status = 204;
}

/* ---- The agent's side ------------------------------------------------------------------ */

void
rp_api_agent_register(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL;
	struct rp_agent_reg reg = {0};
	struct rp_sshkey hk;
	char boot_hash[RP_SHA256_HEX], tok_hash[RP_SHA256_HEX], secret[RP_TOKEN_BUF];
	const char *tok;
	size_t n;
	enum rp_err e;

	/* The bootstrap token is this route's credential; check its shape before anything. */
	tok = bearer(rq->authorization, &n);
	if (tok == NULL || n < 4 || strncmp(tok, RP_TOKEN_PREFIX_BOOTSTRAP, 4) != 0) {
		rp_api_errorf(rs, RP_ERR_UNAUTHORIZED,
		              "registration needs a bootstrap token "
		              "(Authorization: Bearer rpb_...)");
		return;
	}
	rp_sha256_hex(tok, n, boot_hash);
	/* Strangers learn nothing, not even what a valid body looks like. */
	if ((e = rp_store_bootstrap_check(rq->api->store, boot_hash, rq->peer, &detail)) !=
	    RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, reg_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if (json_array_size(json_object_get(rq->body, "macs")) == 0) {
		rp_api_error(rs, RP_ERR_INVALID_FIELD,
		             json_pack("{s:s, s:s}", "field", "macs", "reason",
		                       "at least one MAC address"));
		return;
	}
	if (rp_sshkey_parse(json_string_value(json_object_get(rq->body, "ssh_host_key")), &hk) <
	    0) {
		rp_api_error(
		        rs, RP_ERR_INVALID_FIELD,
		        json_pack("{s:s, s:s}", "field", "ssh_host_key", "reason",
		                  "an OpenSSH public key line (\"ssh-ed25519 AAAA... comment\")"));
		return;
	}
	if (rp_api_token_mint(rs, RP_TOKEN_PREFIX_AGENT, secret, tok_hash) < 0)
		return;
	reg.bootstrap_hash = boot_hash;
	reg.token_hash = tok_hash;
	reg.body = rq->body;
	reg.host_key = &hk;
	reg.peer = rq->peer;
	reg.source_check = rq->api->boot_source_check;
	e = rp_store_agent_register(rq->api->store, &reg, &out, &detail);
	if (e != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	json_object_set_new(out, "token", json_string(secret));
	json_object_set_new(out, "heartbeat_s", json_integer(rq->api->agent_heartbeat_s));
	json_object_set_new(out, "server_ssh_key",
	                    rq->api->ssh_public_key ? json_string(rq->api->ssh_public_key)
	                                            : json_null());
	rs->status = 200;
	rs->body = out;
}

void
rp_api_agent_heartbeat(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, heartbeat_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	if ((e = rp_store_agent_heartbeat(rq->api->store, rq->who->node_id, rq->body)) !=
	    RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 200;
	rs->body = json_pack("{s:s, s:i}", "node", rq->who->name, "heartbeat_s",
	                     rq->api->agent_heartbeat_s);
}

void
rp_api_agent_inventory(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *f;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	f = json_object_get(rq->body, "format");
	if (f && !(json_is_integer(f) && json_integer_value(f) == RP_AGENT_FORMAT)) {
		rp_api_error(
		        rs, RP_ERR_INVALID_FIELD,
		        json_pack("{s:s, s:s}", "field", "format", "reason", "inventory format 1"));
		return;
	}
	if ((e = rp_store_agent_inventory(rq->api->store, rq->who->node_id, rq->body)) !=
	    RP_ERR_OK) {
		rp_api_error(rs, e, NULL);
		return;
	}
	rs->status = 204;
}

void
rp_api_agent_config(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	rs->status = 200;
	rs->body =
	        json_pack("{s:{s:s, s:s}, s:i, s:s?, s:s}", "node", "id", rq->who->id, "name",
	                  rq->who->name, "heartbeat_s", rq->api->agent_heartbeat_s,
	                  "server_ssh_key", rq->api->ssh_public_key, "server_version", RP_VERSION);
}

void
rp_api_agent_job(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *out = NULL;
	enum rp_err e = rp_store_agent_job(rq->api->store, rq->who->node_id, rq->params[0], &out);

	if (e == RP_ERR_FORBIDDEN) {
		rp_api_errorf(rs, e, "job belongs to another node");
		return;
	}
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, NULL, "no such steps job");
		return;
	}
	rs->status = 200;
	rs->body = out;
}

void
rp_api_agent_step(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL;
	enum rp_err e;

	if (rp_api_need_object(rq, rs) < 0)
		return;
	if ((e = rp_api_validate(rq->body, report_fields, 1, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		return;
	}
	e = rp_store_step_report(rq->api->store, rq->who->node_id, rq->params[0], rq->params[1],
	                         rq->body, &detail);
	if (e == RP_ERR_FORBIDDEN) {
		rp_api_errorf(rs, e, "job belongs to another node");
		return;
	}
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such job or step");
		return;
	}
	rs->status = 204;
}

/* POST /v1/agent/first-boot: a deployed OS says it came up (docs/deploy.md). Its credential
 * is the single-use token its seed carried, bound to its deploy; no API token. */
void
rp_api_agent_first_boot(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *detail = NULL, *out = NULL;
	char token[129];
	const char *tok;
	size_t n;
	enum rp_err e;

	tok = bearer(rq->authorization, &n);
	if (tok == NULL || n < 6 || strncmp(tok, "rpfb1.", 6) != 0) {
		rp_api_errorf(rs, RP_ERR_UNAUTHORIZED,
		              "a first-boot report needs its deploy's token (Authorization: Bearer "
		              "rpfb1....)");
		return;
	}
	memcpy(token, tok, n);
	token[n] = '\0';
	if (rp_api_need_object(rq, rs) < 0)
		goto out;
	if ((e = rp_deploy_report_check(rq->body, &detail)) != RP_ERR_OK) {
		rp_api_error(rs, e, detail);
		goto out;
	}
	e = rp_store_first_boot_record(rq->api->store, token, rq->body, rq->peer, &out, &detail);
	if (e == RP_ERR_UNAUTHORIZED) {
		rp_api_errorf(rs, e, "this first-boot token is not good here");
		goto out;
	}
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "no such deploy");
		goto out;
	}
	rs->status = 200;
	rs->body = out;
out:
	explicit_bzero(token, sizeof token);
}
