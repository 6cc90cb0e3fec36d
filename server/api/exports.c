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

/* The selector a query names (one of rack, tag, class: NULL, every node), after checking
 * that nothing but those and extra (NULL-terminated) is asked; then the nodes
 * (rp_store_export_nodes) into *out: 0, or -1 with 400 BAD_QUERY replied (an unknown
 * parameter, two selectors, an empty one, a rack that does not exist) or the store's error.
 * A selector that matches no node is an empty export, not an error: a discovery whose fetch
 * fails keeps its old targets. */
static int
export_nodes(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *extra, json_t **out)
{
	static const char *const keys[] = {"rack", "tag", "class"};
	const char *k, *by = NULL, *value = NULL;
	json_t *v, *detail = NULL;
	enum rp_err e;
	size_t i;
	int known, n = 0;

	json_object_foreach(rq->query, k, v)
	{
		for (i = 0, known = 0; i < sizeof keys / sizeof *keys; i++)
			if (!strcmp(k, keys[i])) {
				known = 1;
				by = keys[i];
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
	if (by &&
	    ((value = json_string_value(json_object_get(rq->query, by))) == NULL || !*value)) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "%s must name one", by);
		return -1;
	}
	e = rp_store_export_nodes(rq->api->store, by, value, out, &detail);
	if (e == RP_ERR_NOT_FOUND) {
		json_decref(detail);
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "no rack named '%s'", value);
		return -1;
	}
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

/* The node's address when it is a host name or an address and nothing more (rp_host_valid:
 * an agent says where it is, and may lie: no spaces, comment signs or ports into a target or
 * a hosts file) and does not start with '-' (ssh would take it for an option); else NULL. */
static const char *
address(json_t *n)
{
	const char *s = str(n, "address");

	return rp_host_valid(s) && s[0] != '-' ? s : NULL;
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

/* host:port as a Prometheus target ([v6]:port: rp_host_valid leaves colons to IPv6). */
static json_t *
target(const char *address, int port)
{
	char buf[320];

	snprintf(buf, sizeof buf, strchr(address, ':') ? "[%s]:%d" : "%s:%d", address, port);
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

/* A group name as Ansible takes it, one per value and never two values in one: letters and
 * digits as they are, '_' doubled, any other byte as '_' and its two hex digits (rack r-01:
 * rack_r_2d01). */
static void
group_name(char *out, size_t len, const char *prefix, const char *value)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = (size_t)snprintf(out, len, "%s_", prefix);
	const unsigned char *p;

	for (p = (const unsigned char *)value; *p && n + 4 < len; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9')) {
			out[n++] = (char)*p;
		} else if (*p == '_') {
			out[n++] = '_';
			out[n++] = '_';
		} else {
			out[n++] = '_';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	out[n] = '\0';
}

static void
add_to_group(json_t *inv, const char *prefix, const char *value, const char *host)
{
	char name[800];
	json_t *g, *children = json_object_get(json_object_get(inv, "all"), "children");

	if (value == NULL)
		return;
	group_name(name, sizeof name, prefix, value);
	if ((g = json_object_get(inv, name)) == NULL) {
		json_object_set_new(inv, name, json_pack("{s:[]}", "hosts"));
		g = json_object_get(inv, name);
		json_array_append_new(children, json_string(name));
	}
	json_array_append_new(json_object_get(g, "hosts"), json_string(host));
}

/* A value for Ansible that it must never template: names, tags and models come from the API,
 * and "{{ lookup('pipe', ...) }}" in one would run on the controller. NULL: null. */
static json_t *
unsafe(const char *s)
{
	return s ? json_pack("{s:s}", "__ansible_unsafe", s) : json_null();
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
		json_t *tags = json_array(), *vars;

		json_array_foreach(json_object_get(n, "tags"), k, t)
		        json_array_append_new(tags, unsafe(json_string_value(t)));
		/* Nothing secret: what the node is and where it is. */
		vars = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:O}", "rackpilot_node",
		                 unsafe(name), "rackpilot_rack", unsafe(str(n, "rack")),
		                 "rackpilot_class", unsafe(str(n, "node_class")),
		                 "rackpilot_provision_state", unsafe(str(n, "provision_state")),
		                 "rackpilot_tags", tags, "rackpilot_gpu_model",
		                 unsafe(str(n, "gpu_model")), "rackpilot_gpu_count",
		                 json_object_get(n, "gpu_count") ? json_object_get(n, "gpu_count")
		                                                 : json_null());
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
		const char *a = address(n);

		if (a == NULL)
			rp_buf_printf(
			        &b,
			        "# %s: no address (no ssh.address, no registered agent, or not "
			        "a plain one)\n",
			        str(n, "name"));
		else if (inet_pton(AF_INET, a, addr) != 1 && inet_pton(AF_INET6, a, addr) != 1)
			rp_buf_printf(&b, "# %s: %s is a host name, not an address\n",
			              str(n, "name"), a);
		else
			rp_buf_printf(&b, "%s\t%s\n", a, str(n, "name"));
	}
	json_decref(nodes);
	rp_api_reply_buf(rs, &b, "text/plain; charset=utf-8");
}
