/* /v1/events */
#include <string.h>

#include "api.h"

static const struct rp_field event_fields[] = {
    {"id", RP_F_READ_ONLY},      {"at", RP_F_READ_ONLY},      {"actor", RP_F_READ_ONLY},
    {"action", RP_F_READ_ONLY},  {"object", RP_F_READ_ONLY},  {"summary", RP_F_READ_ONLY},
    {"detail", RP_F_READ_ONLY},  {NULL},
};

static const char *const event_filters[] = {"node", "rack", "action", NULL};

static int
time_arg(struct rp_api_req *rq, const char *name, json_t *filter, struct rp_api_resp *rs)
{
	const char *v = json_string_value(json_object_get(rq->query, name));
	int64_t ms;

	if (v == NULL)
		return 0;
	if (rp_time_parse(v, &ms) < 0) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "%s must be RFC 3339 (2026-11-30T04:00:00Z) or Unix "
		                                    "seconds", name);
		return -1;
	}
	json_object_set_new(filter, name, json_integer(ms));
	return 0;
}

void
rp_api_events_list(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_page_req pr;
	struct rp_page pg = {0};
	json_t *filter = NULL;
	char key[128];
	enum rp_err e;

	if (rp_api_page_parse(rq, &pr, key, sizeof key, 0, rs) < 0)
		return;
	if (rp_api_filter(rq, event_filters, &filter, rs) < 0)
		return;
	if (json_object_get(filter, "node") && json_object_get(filter, "rack")) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "filter by node or by rack, not both");
		goto out;
	}
	if (time_arg(rq, "since", filter, rs) < 0 || time_arg(rq, "until", filter, rs) < 0)
		goto out;
	pr.filter = filter;
	e = rp_store_event_list(rq->api->store, &pr, &pg);
	if (e == RP_ERR_BAD_QUERY)
		rp_api_errorf(rs, e, "node or rack in the filter does not exist");
	else if (e != RP_ERR_OK)
		rp_api_error(rs, e, NULL);
	else
		rp_api_page_reply(rq, rs, &pg, 0, event_fields);
out:
	json_decref(filter);
}
