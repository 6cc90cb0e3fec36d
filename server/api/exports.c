/* Exports for the workload stack (viewer role), made from what the store knows of each node:
 * GET /v1/exports/prometheus (Prometheus HTTP service discovery: node_exporter and DCGM
 * exporter targets), /v1/exports/ansible (an Ansible dynamic inventory) and /v1/exports/hosts
 * (/etc/hosts lines). Each takes one of rack=, tag=, class= to narrow the nodes. A node without
 * an address (no ssh.address, no registered agent) cannot be scraped, reached or named in a
 * hosts file: Prometheus and Ansible leave it out (Ansible keeps it under its name, without
 * ansible_host); the hosts file says so in a comment. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* The selector a query names: a new {rack|tag|class: value} into *sel (NULL: none, every
 * node), after checking that nothing but those and extra (NULL-terminated) is asked. 0, or -1
 * with 400 BAD_QUERY replied. */
static int
query_selector(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *extra,
               json_t **sel)
{
	static const char *const keys[] = {"rack", "tag", "class"};
	const char *k, *which = NULL;
	json_t *v;
	size_t i;
	int known, n = 0;

	json_object_foreach(rq->query, k, v)
	{
		for (i = 0, known = 0; i < sizeof keys / sizeof *keys; i++)
			if (!strcmp(k, keys[i])) {
				known = 1;
				which = k;
				n++;
			}
		for (i = 0; extra && extra[i]; i++)
			known |= !strcmp(k, extra[i]);
		if (!known) {
			rp_api_errorf(rs, RP_ERR_BAD_QUERY, "unknown query parameter '%s'", k);
			return -1;
		}
	}
	if (n > 1) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "give at most one of rack, tag or class");
		return -1;
	}
	if (which && (!json_is_string(json_object_get(rq->query, which)) ||
	              !*json_string_value(json_object_get(rq->query, which)))) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "%s must name one", which);
		return -1;
	}
	*sel = which ? json_pack("{s:O}", which, json_object_get(rq->query, which)) : NULL;
	return 0;
}

/* The nodes the query picks (rp_store_export_nodes): 0 with *out, or -1 with rs filled. */
static int
export_nodes(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *extra, json_t **out)
{
	json_t *sel = NULL, *detail = NULL;
	enum rp_err e;

	if (query_selector(rq, rs, extra, &sel) < 0)
		return -1;
	e = rp_store_export_nodes(rq->api->store, sel, out, &detail);
	json_decref(sel);
	if (e != RP_ERR_OK) {
		rp_api_reply_store_error(rs, e, detail, "export");
		return -1;
	}
	return 0;
}

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* s as a host name or an address and nothing more (an agent says where it is, and may lie:
 * no spaces, colons but in an IPv6 address, newlines or comment signs into a target or a
 * hosts file), else NULL. */
static const char *
plain_host(const char *s)
{
	unsigned char a[sizeof(struct in6_addr)];
	size_t i, n = s ? strlen(s) : 0;

	if (n == 0 || n > 253)
		return NULL;
	if (inet_pton(AF_INET6, s, a) == 1)
		return s;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-'))
			return NULL;
	return s[0] == '-' || s[0] == '.' ? NULL : s;
}

/* The node's address, when it is a plain one. */
static const char *
address(json_t *n)
{
	return plain_host(str(n, "address"));
}

/* A port from the query (default def; 0 allowed where zero_ok: leave those targets out):
 * 0..65535 into *port, or -1 with 400 BAD_QUERY. */
static int
query_port(struct rp_api_req *rq, struct rp_api_resp *rs, const char *name, int def, int *port)
{
	const char *v = json_string_value(json_object_get(rq->query, name));
	char *end;
	long p;

	*port = def;
	if (v == NULL)
		return 0;
	p = strtol(v, &end, 10);
	if (!*v || *end || p < 0 || p > 65535) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "%s must be a port (1-65535, or 0: none)",
		              name);
		return -1;
	}
	*port = (int)p;
	return 0;
}

/* host:port as a Prometheus target ([v6]:port). */
static json_t *
target(const char *address, int port)
{
	char buf[320];
	struct in6_addr a6;

	snprintf(buf, sizeof buf, inet_pton(AF_INET6, address, &a6) == 1 ? "[%s]:%d" : "%s:%d",
	         address, port);
	return json_string(buf);
}

void
rp_api_export_prometheus(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	static const char *const extra[] = {"node_exporter_port", "dcgm_port", NULL};
	static const struct {
		const char *exporter, *param;
		int def;
	} exporters[] = {{"node", "node_exporter_port", 9100}, {"dcgm", "dcgm_port", 9400}};
	json_t *nodes = NULL, *groups = NULL, *n;
	int ports[2];
	size_t i, x;

	if (query_port(rq, rs, "node_exporter_port", 9100, &ports[0]) < 0 ||
	    query_port(rq, rs, "dcgm_port", 9400, &ports[1]) < 0 ||
	    export_nodes(rq, rs, extra, &nodes) < 0)
		return;
	groups = json_array();
	json_array_foreach(nodes, i, n)
	{
		if (address(n) == NULL)
			continue;
		for (x = 0; x < 2; x++) {
			json_t *labels;

			if (ports[x] == 0)
				continue;
			/* Label names as Prometheus takes them ([a-zA-Z_][a-zA-Z0-9_]*); values
			 * are free text. */
			labels = json_pack("{s:s, s:s, s:s}", "rackpilot_node", str(n, "name"),
			                   "exporter", exporters[x].exporter, "provision_state",
			                   str(n, "provision_state"));
			if (str(n, "rack"))
				json_object_set_new(labels, "rack", json_string(str(n, "rack")));
			if (str(n, "node_class"))
				json_object_set_new(labels, "class",
				                    json_string(str(n, "node_class")));
			if (str(n, "gpu_model"))
				json_object_set_new(labels, "gpu_model",
				                    json_string(str(n, "gpu_model")));
			json_array_append_new(groups, json_pack("{s:[o], s:o}", "targets",
			                                        target(address(n), ports[x]),
			                                        "labels", labels));
		}
	}
	json_decref(nodes);
	rs->status = 200;
	rs->body = groups;
}

/* A group name as Ansible takes it: letters, digits and '_' only (others become '_'). */
static void
group_name(char *out, size_t len, const char *prefix, const char *value)
{
	size_t i, n = (size_t)snprintf(out, len, "%s_%s", prefix, value);

	for (i = strlen(prefix) + 1; i < n && i < len; i++)
		if (!((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') ||
		      (out[i] >= '0' && out[i] <= '9') || out[i] == '_'))
			out[i] = '_';
}

static void
add_to_group(json_t *inv, const char *prefix, const char *value, const char *host)
{
	char name[300];
	json_t *g, *children = json_object_get(json_object_get(inv, "all"), "children");
	size_t i;
	json_t *c;
	int seen = 0;

	if (value == NULL)
		return;
	group_name(name, sizeof name, prefix, value);
	if ((g = json_object_get(inv, name)) == NULL) {
		json_object_set_new(inv, name, json_pack("{s:[]}", "hosts"));
		g = json_object_get(inv, name);
		json_array_foreach(children, i, c) seen |= !strcmp(json_string_value(c), name);
		if (!seen)
			json_array_append_new(children, json_string(name));
	}
	json_array_append_new(json_object_get(g, "hosts"), json_string(host));
}

void
rp_api_export_ansible(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	json_t *nodes = NULL, *inv, *hostvars, *n, *t;
	size_t i, k;

	if (export_nodes(rq, rs, NULL, &nodes) < 0)
		return;
	inv = json_pack("{s:{s:{}}, s:{s:[]}}", "_meta", "hostvars", "all", "children");
	hostvars = json_object_get(json_object_get(inv, "_meta"), "hostvars");
	json_array_foreach(nodes, i, n)
	{
		const char *name = str(n, "name");
		/* Nothing secret: what the node is and where it is. */
		json_t *vars = json_pack(
		        "{s:s, s:s?, s:s?, s:s, s:O, s:s?, s:O?}", "rackpilot_node", name,
		        "rackpilot_rack", str(n, "rack"), "rackpilot_class", str(n, "node_class"),
		        "rackpilot_provision_state", str(n, "provision_state"), "rackpilot_tags",
		        json_object_get(n, "tags"), "rackpilot_gpu_model", str(n, "gpu_model"),
		        "rackpilot_gpu_count", json_object_get(n, "gpu_count"));

		if (address(n))
			json_object_set_new(vars, "ansible_host", json_string(address(n)));
		json_object_set_new(hostvars, name, vars);
		add_to_group(inv, "rack", str(n, "rack"), name);
		add_to_group(inv, "class", str(n, "node_class"), name);
		add_to_group(inv, "state", str(n, "provision_state"), name);
		json_array_foreach(json_object_get(n, "tags"), k, t)
		        add_to_group(inv, "tag", json_string_value(t), name);
	}
	json_decref(nodes);
	rs->status = 200;
	rs->body = inv;
}

void
rp_api_export_hosts(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	struct rp_buf b = {0};
	json_t *nodes = NULL, *n;
	unsigned char addr[sizeof(struct in6_addr)];
	size_t i;

	if (export_nodes(rq, rs, NULL, &nodes) < 0)
		return;
	rp_buf_printf(&b, "# rackpilot: %zu node(s)\n", json_array_size(nodes));
	json_array_foreach(nodes, i, n)
	{
		const char *a = address(n), *h = plain_host(str(n, "hostname"));

		if (a == NULL)
			rp_buf_printf(
			        &b,
			        "# %s: no address (no ssh.address, no registered agent, or not "
			        "a plain one)\n",
			        str(n, "name"));
		else if (inet_pton(AF_INET, a, addr) != 1 && inet_pton(AF_INET6, a, addr) != 1)
			rp_buf_printf(&b, "# %s: %s is a host name, not an address\n",
			              str(n, "name"), a);
		else if (h && strcmp(h, str(n, "name")) != 0)
			rp_buf_printf(&b, "%s\t%s %s\n", a, str(n, "name"), h);
		else
			rp_buf_printf(&b, "%s\t%s\n", a, str(n, "name"));
	}
	json_decref(nodes);
	rp_api_reply_buf(rs, &b, "text/plain; charset=utf-8");
}
