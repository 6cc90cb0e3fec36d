/* /v1/webhooks (admin only: a receiver's URL can itself be a credential, as Slack's are):
 * subscriptions to events, POSTed signed by the leader's deliverer (docs/webhooks.md), and each
 * one's delivery log. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "api.h"

#define WEBHOOK_URL_MAX    2048
#define WEBHOOK_EVENTS_MAX 32

static const struct rp_field webhook_fields[] = {
        {"id", RP_F_READ_ONLY},
        {"name", RP_F_NAME}, /* default: webhook- and 8 digits of its UUID */
        {"url", RP_F_STR, RP_F_REQUIRED, 0, WEBHOOK_URL_MAX},
        {"events", RP_F_ANY_ARRAY, RP_F_REQUIRED, 0, WEBHOOK_EVENTS_MAX},
        {"secret", RP_F_STR, RP_F_REQUIRED, 0, 256},
        {"enabled", RP_F_BOOL},
        {"secret_set", RP_F_READ_ONLY},
        {"secret_updated_at", RP_F_READ_ONLY},
        {"pending", RP_F_READ_ONLY},
        {"version", RP_F_READ_ONLY},
        {"created_at", RP_F_READ_ONLY},
        {"updated_at", RP_F_READ_ONLY},
        {NULL},
};

static enum rp_err
why(json_t **detail, const char *field, const char *reason)
{
	*detail = json_pack("{s:s, s:s}", "field", field, "reason", reason);
	return RP_ERR_INVALID_FIELD;
}

/* An http or https URL with a host, nothing in it a log line or a header could be split by,
 * and no user:password@ (a credential in clear in the database). */
static int
url_ok(const char *u, const char **reason)
{
	const char *host, *end;
	size_t i;

	if (!strncasecmp(u, "https://", 8))
		host = u + 8;
	else if (!strncasecmp(u, "http://", 7))
		host = u + 7;
	else {
		*reason = "must be an http:// or https:// URL";
		return 0;
	}
	for (i = 0; u[i]; i++)
		if (!isgraph((unsigned char)u[i])) {
			*reason = "must not contain spaces or control characters";
			return 0;
		}
	end = host + strcspn(host, "/?#");
	if (end == host || *host == ':' || *host == '@') {
		*reason = "must name a host";
		return 0;
	}
	if (memchr(host, '@', (size_t)(end - host))) {
		*reason = "must not carry a user or password (user:password@): use the path, or "
		          "the signature";
		return 0;
	}
	if (strchr(u, '#')) {
		*reason = "must not have a fragment (#...)";
		return 0;
	}
	return 1;
}

/* An action ("rollout.completed"), or a prefix of one and '*' ("rollout.*",
 * "rack.acceptance_*", "*"): lower-case letters, digits, '_' and single dots inside. */
static int
pattern_ok(const char *p)
{
	size_t n = strlen(p), i;

	if (n == 0 || n > 64)
		return 0;
	if (p[n - 1] == '*')
		n--;
	for (i = 0; i < n; i++)
		if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || p[i] == '_' ||
		      (p[i] == '.' && i > 0 && p[i - 1] != '.')))
			return 0;
	return 1;
}

static enum rp_err
webhook_check(json_t *body, json_t **detail)
{
	json_t *url = json_object_get(body, "url"), *events = json_object_get(body, "events"),
	       *secret = json_object_get(body, "secret"), *p;
	const char *reason;
	size_t i;

	if (url && !url_ok(json_string_value(url), &reason))
		return why(detail, "url", reason);
	if (events) {
		if (json_array_size(events) == 0)
			return why(detail, "events", "name at least one event pattern");
		json_array_foreach(events, i, p)
		{
			char field[32];

			snprintf(field, sizeof field, "events[%zu]", i);
			if (!json_is_string(p) || !pattern_ok(json_string_value(p)))
				return why(
				        detail, field,
				        "must be \"*\", an action (node.created) or a prefix and "
				        ".* (rollout.*)");
		}
	}
	/* A short secret makes a signature anyone can forge by trying. */
	if (secret && json_string_length(secret) < 16)
		return why(detail, "secret", "at least 16 characters");
	return RP_ERR_OK;
}

static const char *const webhook_filters[] = {NULL};

static const struct rp_crud webhooks = {
        .what = "webhook",
        .collection = "/v1/webhooks",
        .spec = webhook_fields,
        .filters = webhook_filters,
        .sortable = 1,
        RP_CRUD_STORE(webhook),
        .check = webhook_check,
};

RP_CRUD_HANDLERS(webhooks, &webhooks)

static const struct rp_field delivery_fields[] = {
        {"id", RP_F_READ_ONLY},          {"event_id", RP_F_READ_ONLY},
        {"action", RP_F_READ_ONLY},      {"state", RP_F_READ_ONLY},
        {"attempts", RP_F_READ_ONLY},    {"created_at", RP_F_READ_ONLY},
        {"last_at", RP_F_READ_ONLY},     {"last_status", RP_F_READ_ONLY},
        {"last_error", RP_F_READ_ONLY},  {"next_at", RP_F_READ_ONLY},
        {"finished_at", RP_F_READ_ONLY}, {NULL},
};

void
rp_api_webhooks_deliveries(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const filters[] = {"state", NULL};
	static const char *const states[] = {"pending", "delivered", "failed", NULL};
	struct rp_page_req pr;
	struct rp_page pg = {0};
	json_t *filter = NULL;
	const char *state;
	char key[128];
	enum rp_err e;
	int ok = 0;

	if (rp_api_page_parse(rq, &pr, key, sizeof key, 0, rs) < 0 ||
	    rp_api_filter(rq, filters, &filter, rs) < 0)
		return;
	if ((state = json_string_value(json_object_get(filter, "state"))) != NULL) {
		for (const char *const *s = states; *s; s++)
			ok |= !strcmp(state, *s);
		if (!ok) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY,
			              "state must be pending, delivered or failed");
			goto out;
		}
	}
	pr.filter = filter;
	e = rp_store_webhook_deliveries(rq->api->store, rq->params[0], &pr, &pg);
	if (e != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else
		rp_api_page_reply(rq, rs, &pg, 0, delivery_fields);
out:
	json_decref(filter);
}
