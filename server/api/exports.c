/* Exports for the workload stack (viewer role), made from what the store knows of each node:
 * GET /v1/exports/prometheus (Prometheus HTTP service discovery: node_exporter and DCGM
 * exporter targets), /v1/exports/ansible (an Ansible dynamic inventory), /v1/exports/hosts
 * (/etc/hosts lines) and /v1/exports/slurm, /v1/exports/slurm/gres.conf (Slurm node, partition
 * and GRES lines). Each takes one of rack=, tag=, class= to narrow the nodes. A node without
 * an address (no ssh.address, no registered agent) cannot be scraped, reached or named in a
 * hosts file: Prometheus and Ansible leave it out (Ansible keeps it under its name, without
 * ansible_host); the hosts file says so in a comment. Slurm gets only nodes whose inventory
 * agrees with their class's bill of materials: what a node reports is what the scheduler
 * will hand out, so a node short of a GPU must not be offered with eight. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../accept/accept.h"
#include "api.h"

/* The selector a query names (one of rack, tag, class: NULL, every node), after checking
 * that nothing but those and extra (NULL-terminated) is asked; then each node
 * (rp_store_export_nodes, with inventory when asked) handed to fn: 0, or -1 with 400
 * BAD_QUERY replied (an unknown parameter, two selectors, an empty one, a rack that does not
 * exist) or the store's error. A selector that matches no node is an empty export, not an
 * error: a discovery whose fetch fails keeps its old targets. */
static int
each_node(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *extra, int inventory,
          enum rp_err (*fn)(json_t *node, void *arg), void *arg)
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
	e = rp_store_export_nodes(rq->api->store, by, value, inventory, fn, arg, &detail);
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

static enum rp_err
collect(json_t *node, void *arg)
{
	return json_array_append(arg, node) == 0 ? RP_ERR_OK : RP_ERR_INTERNAL;
}

/* each_node collecting the nodes (no inventory) into a new array *out. */
static int
export_nodes(struct rp_api_req *rq, struct rp_api_resp *rs, const char *const *extra, json_t **out)
{
	json_t *list = json_array();

	if (each_node(rq, rs, extra, 0, collect, list) < 0) {
		json_decref(list);
		return -1;
	}
	*out = list;
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

/* ---- Slurm ------------------------------------------------------------------------------ */

/* Bounds on what an agent may report for Slurm to be told it: well past any machine sold, well
 * within what Slurm holds. */
#define RP_SLURM_MAX_SOCKETS          64
#define RP_SLURM_MAX_THREADS_PER_CORE 16
#define RP_SLURM_MAX_GPUS             64
#define RP_SLURM_MAX_MEM_MIB          (1LL << 32) /* 4 PiB */

/* What a node is to Slurm, read from its inventory once that agreed with its class's BOM. */
struct slurm_node {
	const char *name, *klass, *rack, *addr;
	json_int_t cpus, sockets, cores, threads; /* cores and threads: the whole machine's */
	json_int_t mem_mib;
	json_int_t gpus;
	char gpu_type[64]; /* "" when nothing names the model */
};

/* A word Slurm reads as one: what rp_name_valid lets through ([A-Za-z0-9._-], names, racks,
 * classes); anything else would split or end a line. Checked again here: these lines are
 * configuration another program trusts. */
static int
slurm_word(const char *s)
{
	return s && *s &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	               strlen(s);
}

/* A GPU model as a GRES type, the way Slurm makes one of what NVML reports: lower case, spaces
 * as '_' ("NVIDIA A100-SXM4-80GB" → a100-sxm4-80gb, without the "nvidia_" that says nothing).
 * With AutoDetect=nvml Slurm takes a type that is part of the one it detects, whatever the case
 * (nvidia_h100_80gb_hbm3 holds the BOM's "H100 80GB" → h100_80gb). A model with any byte but
 * letters, digits, space, '.', '_' and '-' gets no type ("" in out): a bare gpu:N always
 * matches, a type Slurm would split must never reach its file. */
static void
gres_type(const char *model, char *out, size_t len)
{
	size_t n = 0;
	const unsigned char *p;

	out[0] = '\0';
	if (model == NULL || strlen(model) >= len)
		return;
	for (p = (const unsigned char *)model; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		    *p == '_' || *p == '-')
			out[n++] = (char)*p;
		else if (*p >= 'A' && *p <= 'Z')
			out[n++] = (char)(*p - 'A' + 'a');
		else if (*p == ' ')
			out[n++] = '_';
		else {
			out[0] = '\0';
			return;
		}
	}
	out[n] = '\0';
	if (!strncmp(out, "nvidia_", 7) && out[7])
		memmove(out, out + 7, strlen(out + 7) + 1);
}

/* Words Slurm keeps for itself: NodeName=DEFAULT sets defaults (and refuses NodeAddr), ALL
 * means every node; a partition named DEFAULT would vanish into the defaults. */
static int
slurm_reserved(const char *s)
{
	return !strcasecmp(s, "default") || !strcasecmp(s, "all");
}

static json_int_t
int_at(json_t *o, const char *section, const char *key)
{
	json_t *v = json_object_get(json_object_get(o, section), key);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Read row (an export node with inventory) into *n: 0, or -1 with why it is left out in why
 * (one line: findings quote what an agent reported, and an agent may lie). */
static int
slurm_node(json_t *row, struct slurm_node *n, char *why, size_t len)
{
	json_t *bom = json_object_get(row, "bom"), *inv = json_object_get(row, "inventory");
	json_t *findings = NULL, *items;
	const char *model;
	int rc = -1, k;
	char *p;

	memset(n, 0, sizeof *n);
	n->name = str(row, "name");
	n->klass = str(row, "node_class");
	n->rack = str(row, "rack");
	n->addr = address(row);
	if (!slurm_word(n->name) || (n->rack && !slurm_word(n->rack))) {
		snprintf(why, len, "its name or rack is not one Slurm can read");
		goto out;
	}
	if (n->klass == NULL || !slurm_word(n->klass)) {
		snprintf(why, len, "no node class: nothing to check its inventory against");
		goto out;
	}
	if (slurm_reserved(n->name) || slurm_reserved(n->klass)) {
		snprintf(why, len, "Slurm keeps the name %s for itself",
		         slurm_reserved(n->name) ? n->name : n->klass);
		goto out;
	}
	if (!json_is_object(bom)) {
		snprintf(why, len,
		         "class %s is not defined (PUT /v1/node-classes/%s with its bill of "
		         "materials)",
		         n->klass, n->klass);
		goto out;
	}
	if (!json_is_object(inv)) {
		snprintf(why, len, "no inventory: no agent has reported one (commission the node)");
		goto out;
	}
	findings = json_array();
	if ((k = rp_accept_bom(bom, inv, findings)) != 0) {
		snprintf(why, len, "its inventory disagrees with class %s: %s%s", n->klass,
		         k < 0 ? "unreadable"
		               : str(json_array_get(findings, 0), "message") ?: "a finding",
		         k > 1 ? " (and more: see its acceptance)" : "");
		goto out;
	}
	n->sockets = int_at(inv, "cpu", "sockets");
	n->cores = int_at(inv, "cpu", "cores");
	n->threads = int_at(inv, "cpu", "threads");
	if (n->sockets <= 0 || n->cores <= 0 || n->threads <= 0) {
		snprintf(why, len, "its inventory has no CPU topology (sockets, cores, threads)");
		goto out;
	}
	/* What an agent reports is bounded by what Slurm can hold (16-bit counts): one line it
	 * refuses would stop slurmctld reading the whole file. */
	if (n->sockets > RP_SLURM_MAX_SOCKETS || n->threads > 65535 ||
	    n->threads / n->cores > RP_SLURM_MAX_THREADS_PER_CORE) {
		snprintf(why, len,
		         "its CPU topology is past what a machine has (%lld sockets, %lld cores, "
		         "%lld threads)",
		         (long long)n->sockets, (long long)n->cores, (long long)n->threads);
		goto out;
	}
	if (n->cores % n->sockets || n->threads % n->cores) {
		snprintf(why, len,
		         "its CPU topology is uneven (%lld sockets, %lld cores, %lld threads)",
		         (long long)n->sockets, (long long)n->cores, (long long)n->threads);
		goto out;
	}
	n->cpus = n->threads;
	/* MemTotal, as slurmd itself counts RealMemory: a node configured with more than it
	 * has is drained ("Low RealMemory"). */
	if ((n->mem_mib = int_at(inv, "memory", "total_bytes")) <= 0) {
		snprintf(why, len, "its inventory has no memory total");
		goto out;
	}
	n->mem_mib /= 1024 * 1024;
	if (n->mem_mib < 1 || n->mem_mib > RP_SLURM_MAX_MEM_MIB) {
		snprintf(why, len, "its memory total is not a machine's (%lld MiB)",
		         (long long)n->mem_mib);
		goto out;
	}
	if ((n->gpus = int_at(inv, "gpus", "count")) < 0 &&
	    (n->gpus = int_at(inv, "pci", "gpu_count")) < 0)
		n->gpus = 0;
	if (n->gpus > RP_SLURM_MAX_GPUS) {
		snprintf(why, len, "it reports %lld GPUs, more than a machine holds",
		         (long long)n->gpus);
		goto out;
	}
	model = json_string_value(json_object_get(json_object_get(bom, "gpus"), "model"));
	items = json_object_get(json_object_get(inv, "gpus"), "items");
	if (model == NULL)
		model = str(json_array_get(items, 0), "name");
	gres_type(model, n->gpu_type, sizeof n->gpu_type);
	rc = 0;
out:
	json_decref(findings);
	for (p = why; rc < 0 && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return rc;
}

struct slurm_out {
	struct rp_buf lines, left; /* the nodes' lines; the left-out comments */
	const char *default_class; /* its partition gets Default=YES; NULL: none */
	json_t *classes;           /* {class: [node names]}: the partitions */
	int gres;                  /* gres.conf, not slurm.conf: 1 AutoDetect, 2 explicit */
	size_t nodes, out, gpu_nodes;
};

static enum rp_err
slurm_each(json_t *row, void *arg)
{
	struct slurm_out *o = arg;
	struct slurm_node n;
	char why[400];
	json_t *members;

	if (slurm_node(row, &n, why, sizeof why) < 0) {
		o->out++;
		rp_buf_printf(&o->left, "#   %s: %s\n", str(row, "name") ?: "?", why);
		return RP_ERR_OK;
	}
	o->nodes++;
	o->gpu_nodes += n.gpus > 0;
	if (o->gres) {
		/* Explicit lines name the device files; AutoDetect finds them itself. */
		if (o->gres == 2 && n.gpus > 0) {
			rp_buf_printf(&o->lines, "NodeName=%s Name=gpu%s%s File=/dev/nvidia",
			              n.name, n.gpu_type[0] ? " Type=" : "", n.gpu_type);
			if (n.gpus == 1)
				rp_buf_printf(&o->lines, "0\n");
			else
				rp_buf_printf(&o->lines, "[0-%lld]\n", (long long)n.gpus - 1);
		}
		return RP_ERR_OK;
	}
	rp_buf_printf(&o->lines, "NodeName=%s", n.name);
	if (n.addr)
		rp_buf_printf(&o->lines, " NodeAddr=%s", n.addr);
	rp_buf_printf(&o->lines,
	              " CPUs=%lld Sockets=%lld CoresPerSocket=%lld ThreadsPerCore=%lld "
	              "RealMemory=%lld",
	              (long long)n.cpus, (long long)n.sockets, (long long)(n.cores / n.sockets),
	              (long long)(n.threads / n.cores), (long long)n.mem_mib);
	if (n.gpus > 0)
		rp_buf_printf(&o->lines, " Gres=gpu%s%s:%lld", n.gpu_type[0] ? ":" : "", n.gpu_type,
		              (long long)n.gpus);
	rp_buf_printf(&o->lines, " Feature=%s%s%s State=UNKNOWN\n", n.klass, n.rack ? "," : "",
	              n.rack ? n.rack : "");
	if ((members = json_object_get(o->classes, n.klass)) == NULL &&
	    (json_object_set_new(o->classes, n.klass, json_array()) < 0 ||
	     (members = json_object_get(o->classes, n.klass)) == NULL))
		return RP_ERR_INTERNAL;
	return json_array_append_new(members, json_string(n.name)) == 0 ? RP_ERR_OK
	                                                                : RP_ERR_INTERNAL;
}

/* One name of a hostlist: a prefix of plen bytes, then a number of width digits (width 0:
 * none, and the prefix is the whole name). */
struct host {
	const char *name;
	size_t plen;
	int width;
	long num;
};

/* By prefix, then width, then number: a run's names end up next to each other, in order. */
static int
host_cmp(const void *a, const void *b)
{
	const struct host *x = a, *y = b;
	size_t m = x->plen < y->plen ? x->plen : y->plen;
	int c = strncmp(x->name, y->name, m);

	if (c != 0 || x->plen != y->plen)
		return c != 0 ? c : (x->plen > y->plen) - (x->plen < y->plen);
	if (x->width != y->width)
		return x->width - y->width;
	return (x->num > y->num) - (x->num < y->num);
}

/* names as a Slurm hostlist, into b: each run of names that differ only in a trailing number
 * of the same width as prefix[a-b,c] (gpu-r01-u01 … u42 → gpu-r01-u[01-42]); names without
 * one, or with more than 9 digits, as they are. Slurm reads [07-10] as 07, 08, 09, 10: equal
 * widths in a bracket keep the padding exact. */
static void
hostlist(struct rp_buf *b, json_t *names)
{
	size_t i, j, n = json_array_size(names);
	struct host *h = calloc(n ? n : 1, sizeof *h);

	if (h == NULL) {
		b->oom = 1;
		return;
	}
	for (i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(names, i));
		size_t len = strlen(s), d = len;

		while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9')
			d--;
		h[i].name = s;
		h[i].plen = len;
		if (d > 0 && len - d >= 1 && len - d <= 9) {
			h[i].plen = d;
			h[i].width = (int)(len - d);
			h[i].num = strtol(s + d, NULL, 10);
		}
	}
	qsort(h, n, sizeof *h, host_cmp);
	for (i = 0; i < n; i = j) {
		/* The run of names with h[i]'s prefix and width: j past its end. */
		for (j = i + 1; j < n && h[i].width && h[j].width == h[i].width &&
		                h[j].plen == h[i].plen && !strncmp(h[j].name, h[i].name, h[i].plen);
		     j++)
			;
		rp_buf_printf(b, "%s", i ? "," : "");
		if (j - i == 1) {
			rp_buf_printf(b, "%s", h[i].name);
			continue;
		}
		rp_buf_printf(b, "%.*s[", (int)h[i].plen, h[i].name);
		for (size_t k = i; k < j;) {
			size_t e = k;

			while (e + 1 < j && h[e + 1].num == h[e].num + 1)
				e++;
			rp_buf_printf(b, "%s%0*ld", k > i ? "," : "", h[k].width, h[k].num);
			if (e > k)
				rp_buf_printf(b, "-%0*ld", h[e].width, h[e].num);
			k = e + 1;
		}
		rp_buf_printf(b, "]");
	}
	free(h);
}

/* The Slurm exports: gres 0 slurm.conf lines, 1 gres.conf with AutoDetect=nvml, 2 gres.conf
 * with explicit lines. */
static void
export_slurm(struct rp_api_req *rq, struct rp_api_resp *rs, int gres)
{
	static const char *const gres_extra[] = {"autodetect", NULL};
	static const char *const conf_extra[] = {"default", NULL};
	struct slurm_out o = {.classes = json_object(), .gres = gres};
	struct rp_buf b = {0};
	const char *k;
	json_t *members;

	o.default_class = json_string_value(json_object_get(rq->query, "default"));
	if (!gres && o.default_class && !rp_name_valid(o.default_class)) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "default must name a node class");
		goto out;
	}
	if (each_node(rq, rs, gres ? gres_extra : conf_extra, 1, slurm_each, &o) < 0)
		goto out;
	if (gres) {
		rp_buf_printf(&b,
		              "# gres.conf from rackpilot: %zu node(s) with GPUs; %zu left out%s\n",
		              o.gpu_nodes, o.out, o.out ? " (below)" : "");
		if (gres == 1)
			rp_buf_printf(&b, "AutoDetect=nvml\n");
	} else {
		rp_buf_printf(&b,
		              "# slurm.conf node and partition lines from rackpilot: %zu node(s); "
		              "%zu left out%s\n",
		              o.nodes, o.out, o.out ? " (below)" : "");
		if (o.gpu_nodes)
			rp_buf_printf(&b, "# Gres= needs GresTypes=gpu in slurm.conf\n");
	}
	if (o.lines.oom || o.left.oom)
		b.oom = 1;
	rp_buf_append(&b, o.lines.data, o.lines.len);
	json_object_foreach(o.classes, k, members)
	{
		rp_buf_printf(&b, "PartitionName=%s Nodes=", k);
		hostlist(&b, members);
		rp_buf_printf(&b, "%s State=UP\n",
		              o.default_class && !strcmp(k, o.default_class) ? " Default=YES" : "");
	}
	if (o.out) {
		rp_buf_printf(&b, "# Left out:\n");
		rp_buf_append(&b, o.left.data, o.left.len);
	}
	rp_api_reply_buf(rs, &b, "text/plain; charset=utf-8");
out:
	rp_buf_free(&b);
	rp_buf_free(&o.lines);
	rp_buf_free(&o.left);
	json_decref(o.classes);
}

void
rp_api_export_slurm(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	export_slurm(rq, rs, 0);
}

void
rp_api_export_gres(struct rp_api_req *rq, struct rp_api_resp *rs)
{
	const char *a = json_string_value(json_object_get(rq->query, "autodetect"));

	if (a && strcmp(a, "nvml") && strcmp(a, "off")) {
		rp_api_errorf(rs, RP_ERR_BAD_QUERY, "autodetect must be nvml (default) or off");
		return;
	}
	export_slurm(rq, rs, a && !strcmp(a, "off") ? 2 : 1);
}
