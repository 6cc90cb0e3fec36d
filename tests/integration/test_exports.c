/* Exports for the workload stack, read by their real consumers: Prometheus's promtool checks a
 * configuration whose file service discovery holds GET /v1/exports/prometheus, Ansible's
 * ansible-inventory reads GET /v1/exports/ansible through an inventory script, Debian's
 * slurmctld reads GET /v1/exports/slurm (scontrol shows what it made of each node and
 * partition) and slurmd -G reads GET /v1/exports/slurm/gres.conf, and the hosts export is
 * checked line by line. The Slurm nodes report inventories the real agent collects from the
 * fixture trees (tests/fixtures/inventory). A viewer reads them; a bad query is a 400 that
 * changes nothing. Without promtool, ansible-inventory, slurmctld or munged the test fails
 * when CI=true, else skips that part. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char tmp[256];
static char slurm_dir[300]; /* where test_slurm's controller runs, once started */

static int
have(const char *tool)
{
	char cmd[200];

	snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static int
setup(void **state)
{
	struct reply r;

	group_setup(state);
	snprintf(tmp, sizeof tmp, "/tmp/rp-exports-%d", (int)getpid());
	sh("rm -rf '%s' && mkdir -m 700 '%s'", tmp, tmp);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r-01"), 201);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/gpu-a", &r,
	                      "{s:{s:{s:i, s:s}}}", "bom", "gpus", "count", 8, "model",
	                      "H100 80GB"),
	                 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:i, s:s, s:[s,s], s:{s:s}}", "name", "n1", "rack", "r-01",
	          "u_position", 2, "node_class", "gpu-a", "tags", "gpu", "hall-b", "ssh", "address",
	          "10.0.0.1");
	make_node(&S, "{s:s, s:s, s:i, s:{s:s}}", "name", "n2", "rack", "r-01", "u_position", 4,
	          "ssh", "address", "fd00::2");
	make_node(&S, "{s:s, s:{s:s}}", "name", "n3", "ssh", "address", "node3.example");
	make_node(&S, "{s:s}", "name", "n4");
	/* A model that Ansible would run as a template, were it not marked unsafe. */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/evil", &r, "{s:{s:{s:s}}}",
	                      "bom", "gpus", "model", "{{ lookup('pipe', 'echo PWNED') }}"),
	                 201);
	reply_free(&r);
	make_node(&S, "{s:s, s:s, s:{s:s}}", "name", "n5", "node_class", "evil", "ssh", "address",
	          "10.0.0.5");
	return 0;
}

static int
teardown(void **state)
{
	if (slurm_dir[0])
		sh("'%s/tests/slurm/slurmctld.sh' stop '%s'", rp_test_src, slurm_dir);
	sh("rm -rf '%s'", tmp);
	return group_teardown(state);
}

/* GET path as a viewer: 200 and its body into a file of tmp (returns its path). */
static const char *
fetch(const char *path, const char *file)
{
	static char out[400];
	char viewer[128];
	struct reply r;
	FILE *f;

	make_token(&S, "viewer", viewer);
	assert_int_equal(call(&S, viewer, "GET", path, &r, NULL), 200);
	snprintf(out, sizeof out, "%s/%s", tmp, file);
	assert_non_null(f = fopen(out, "w"));
	assert_int_equal(fwrite(r.body, 1, r.len, f), r.len);
	fclose(f);
	reply_free(&r);
	return out;
}

static void
test_prometheus(void **state)
{
	struct reply r;
	json_t *sd, *g;
	json_error_t je;
	const char *file;
	size_t i;
	int node = 0, dcgm = 0;

	(void)state;
	file = fetch("/v1/exports/prometheus", "sd.json");
	assert_non_null(sd = json_load_file(file, 0, &je));
	/* Four nodes have an address, two exporters each; n4 has none. */
	assert_int_equal(json_array_size(sd), 8);
	json_array_foreach(sd, i, g)
	{
		json_t *l = json_object_get(g, "labels");
		const char *t = json_string_value(json_array_get(json_object_get(g, "targets"), 0));

		node += !strcmp(jstr(l, "exporter"), "node");
		dcgm += !strcmp(jstr(l, "exporter"), "dcgm");
		if (!strcmp(jstr(l, "rackpilot_node"), "n1") &&
		    !strcmp(jstr(l, "exporter"), "node")) {
			assert_string_equal(t, "10.0.0.1:9100");
			assert_string_equal(jstr(l, "rack"), "r-01");
			assert_string_equal(jstr(l, "class"), "gpu-a");
			assert_string_equal(jstr(l, "gpu_model"), "H100 80GB");
			assert_string_equal(jstr(l, "provision_state"), "enrolled");
		}
		if (!strcmp(jstr(l, "rackpilot_node"), "n2") &&
		    !strcmp(jstr(l, "exporter"), "dcgm"))
			assert_string_equal(t, "[fd00::2]:9400");
		assert_string_not_equal(jstr(l, "rackpilot_node"), "n4");
	}
	assert_int_equal(node, 4);
	assert_int_equal(dcgm, 4);
	json_decref(sd);
	/* Prometheus itself reads it as a file service discovery. */
	sh("printf 'scrape_configs:\\n- job_name: rackpilot\\n  file_sd_configs:\\n  - files: "
	   "[%s]\\n' > '%s/prometheus.yml'",
	   file, tmp);
	if (have("promtool"))
		sh("promtool check config '%s/prometheus.yml' >'%s/promtool.log' 2>&1 || "
		   "{ cat '%s/promtool.log'; exit 1; }",
		   tmp, tmp, tmp);
	else if (getenv("CI") && !strcmp(getenv("CI"), "true"))
		fail_msg("promtool (package prometheus) is required");
	/* Ports: another for node_exporter, none for DCGM; a rack's nodes only. */
	file = fetch("/v1/exports/prometheus?node_exporter_port=9101&dcgm_port=0&rack=r-01",
	             "sd2.json");
	assert_non_null(sd = json_load_file(file, 0, &je));
	assert_int_equal(json_array_size(sd), 2);
	assert_string_equal(json_string_value(json_array_get(
	                            json_object_get(json_array_get(sd, 0), "targets"), 0)),
	                    "10.0.0.1:9101");
	json_decref(sd);
	assert_int_equal(
	        call(&S, S.admin, "GET", "/v1/exports/prometheus?dcgm_port=70000", &r, NULL), 400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	/* A tag no node has (any more): no targets, not an error, so that Prometheus drops
	 * them rather than keep the last list it read. */
	file = fetch("/v1/exports/prometheus?tag=none-such", "sd3.json");
	assert_non_null(sd = json_load_file(file, 0, &je));
	assert_true(json_is_array(sd));
	assert_int_equal(json_array_size(sd), 0);
	json_decref(sd);
}

static void
test_ansible(void **state)
{
	char out[65536], cmd[2000];
	const char *file;
	json_t *inv, *hv;
	json_error_t je;
	FILE *p;
	size_t n;

	(void)state;
	file = fetch("/v1/exports/ansible", "inventory.json");
	/* An inventory script, as Ansible runs one: --list prints the export. */
	sh("printf '#!/bin/sh\\n[ \"$1\" = --list ] && exec cat %s\\necho {}\\n' > '%s/inv.sh' && "
	   "chmod +x '%s/inv.sh'",
	   file, tmp, tmp);
	if (!have("ansible-inventory")) {
		if (getenv("CI") && !strcmp(getenv("CI"), "true"))
			fail_msg("ansible-inventory (package ansible-core) is required");
		fprintf(stderr, "test_exports: no ansible-inventory: its part skipped\n");
		return;
	}
	snprintf(cmd, sizeof cmd,
	         "cd '%s' && HOME='%s' ANSIBLE_LOCAL_TEMP='%s' ANSIBLE_INVENTORY_ENABLED=script "
	         "ansible-inventory -i '%s/inv.sh' --list 2>'%s/ansible.log'",
	         tmp, tmp, tmp, tmp, tmp);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	if ((inv = json_loads(out, 0, &je)) == NULL)
		fail_msg("ansible-inventory printed no JSON: %.400s", out);
	/* Ansible's reading of it: the groups and their hosts, each host's vars. */
	hv = json_object_get(json_object_get(inv, "_meta"), "hostvars");
	assert_string_equal(jstr(json_object_get(hv, "n1"), "ansible_host"), "10.0.0.1");
	/* Values from the API reach Ansible marked unsafe (never templated). */
	assert_string_equal(jstr(json_object_get(json_object_get(hv, "n1"), "rackpilot_gpu_model"),
	                         "__ansible_unsafe"),
	                    "H100 80GB");
	assert_string_equal(jstr(json_object_get(hv, "n2"), "ansible_host"), "fd00::2");
	assert_null(json_object_get(json_object_get(hv, "n4"), "ansible_host"));
	/* Groups by rack, class, state and tag, one per name: r-01 is rack_r_2d01, which r_01
	 * or r.01 would never be. */
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(inv, "rack_r_2d01"), "hosts")), 2);
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(inv, "class_gpu_2da"), "hosts")),
	        1);
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(inv, "tag_hall_2db"), "hosts")), 1);
	assert_int_equal(
	        json_array_size(json_object_get(json_object_get(inv, "state_enrolled"), "hosts")),
	        5);
	/* Nothing secret in a host's vars. */
	assert_null(strstr(out, "password"));
	json_decref(inv);
	/* What a play sees of n5's model: the text, not what the template would run. */
	snprintf(cmd, sizeof cmd,
	         "cd '%s' && HOME='%s' ANSIBLE_LOCAL_TEMP='%s' ANSIBLE_INVENTORY_ENABLED=script "
	         "timeout 120 ansible n5 -i '%s/inv.sh' -c local -m debug -a "
	         "var=rackpilot_gpu_model 2>>'%s/ansible.log'",
	         tmp, tmp, tmp, tmp, tmp);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	if (strstr(out, "lookup('pipe', 'echo PWNED')") == NULL ||
	    strstr(out, "\"rackpilot_gpu_model\": \"PWNED\"") != NULL)
		fail_msg("Ansible templated the model: %.400s", out);
}

static void
test_hosts(void **state)
{
	char buf[4096];

	(void)state;
	slurp(fetch("/v1/exports/hosts", "hosts"), buf, sizeof buf);
	assert_non_null(strstr(buf, "\n10.0.0.1\tn1\n"));
	assert_non_null(strstr(buf, "\nfd00::2\tn2\n"));
	assert_non_null(strstr(buf, "\n# n3: node3.example is a host name, not an address\n"));
	assert_non_null(strstr(buf, "\n# n4: no address"));
	assert_non_null(strstr(buf, "\n10.0.0.5\tn5\n"));
	/* By tag: n1 alone. */
	slurp(fetch("/v1/exports/hosts?tag=gpu", "hosts2"), buf, sizeof buf);
	assert_non_null(strstr(buf, "# rackpilot: 1 node(s)\n10.0.0.1\tn1\n"));
}

/* ---- Slurm ------------------------------------------------------------------------------ */

/* Enrol name (class klass, rack r-02, loopback address addr) and, unless fixture is NULL, have
 * its agent register with the inventory the real agent collects from that fixture tree, after
 * sed (may be NULL) has edited it: what a lying or broken machine would report. */
static void
slurm_node(const char *name, const char *klass, int addr, const char *fixture, const char *sed)
{
	char mac[32], ip[32], key[600], path[400];
	json_t *inv, *body;
	json_error_t je;
	struct reply r;
	char *text;

	snprintf(mac, sizeof mac, "02:5c:00:00:00:%02x", addr);
	snprintf(ip, sizeof ip, "127.0.0.%d", addr);
	make_node(&S, "{s:s, s:s, s:s, s:[s], s:{s:s}}", "name", name, "rack", "r-02", "node_class",
	          klass, "macs", mac, "ssh", "address", ip);
	if (fixture == NULL)
		return;
	snprintf(path, sizeof path, "%s/%s.key", tmp, name);
	sh("ssh-keygen -q -t ed25519 -N '' -C %s -f '%s'", name, path);
	snprintf(path + strlen(path), sizeof path - strlen(path), ".pub");
	slurp(path, key, sizeof key);
	key[strcspn(key, "\n")] = '\0';
	snprintf(path, sizeof path, "%s/%s.json", tmp, name);
	sh("%s --root '%s/tests/fixtures/inventory/%s' inventory > '%s'", RP_TEST_AGENT,
	   rp_test_src, fixture, path);
	if (sed)
		sh("sed -i '%s' '%s'", sed, path);
	assert_non_null(inv = json_load_file(path, 0, &je));
	assert_int_equal(
	        call(&S, S.admin, "POST", "/v1/bootstrap-tokens", &r, "{s:s}", "node", name), 201);
	body = json_pack("{s:i, s:s, s:[s], s:s, s:{s:s, s:i}, s:o}", "format", 1, "hostname", name,
	                 "macs", mac, "ssh_host_key", key, "ssh", "address", ip, "port", 22,
	                 "inventory", inv);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	{
		char tok[128];
		struct reply g;

		snprintf(tok, sizeof tok, "%s", jstr(r.json, "token"));
		reply_free(&r);
		assert_int_equal(req(&S, tok, "POST", "/v1/agent/register", "application/json",
		                     text, strlen(text), NULL, &g),
		                 200);
		reply_free(&g);
	}
	free(text);
}

static int
ci(void)
{
	return getenv("CI") && !strcmp(getenv("CI"), "true");
}

/* haystack holds needle; else the test fails showing it. */
static void
has(const char *haystack, const char *needle)
{
	if (strstr(haystack, needle) == NULL)
		fail_msg("no \"%s\" in:\n%s", needle, haystack);
}

static void
hasnt(const char *haystack, const char *needle)
{
	if (strstr(haystack, needle) != NULL)
		fail_msg("\"%s\" in:\n%s", needle, haystack);
}

/* What a shell command prints (stdout and stderr) into buf: the Slurm controller's commands
 * are run with SLURM_CONF set to its slurm.conf. */
static const char *
capture(char *buf, size_t len, const char *fmt, ...)
{
	char cmd[1400];
	va_list ap;
	FILE *p;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(buf, 1, len - 1, p);
	buf[n] = '\0';
	pclose(p);
	return buf;
}

static void
test_slurm(void **state)
{
	char conf[16384], buf[4096], frag[400];
	const char *dir = slurm_dir;
	struct reply r;

	(void)state;
	assert_int_equal(call(&S, S.admin, "POST", "/v1/racks", &r, "{s:s}", "name", "r-02"), 201);
	reply_free(&r);
	/* What was ordered: the modelled HGX H100 (tests/fixtures/inventory/gpu-h100-8x). */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/hgx", &r,
	                      "{s:{s:{s:i, s:s}, s:{s:i, s:i}, s:{s:i}}}", "bom", "gpus", "count",
	                      8, "model", "H100 80GB", "memory", "total_gib", 2048, "dimms", 32,
	                      "cpu", "sockets", 2),
	                 201);
	reply_free(&r);
	/* A class that asks for nothing in particular: the VM this project is built on. */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/vm", &r, "{s:{}}", "bom"), 201);
	reply_free(&r);
	slurm_node("s-u01", "hgx", 11, "gpu-h100-8x", NULL);
	slurm_node("s-u02", "hgx", 12, "gpu-h100-8x", NULL);
	slurm_node("s-u03", "hgx", 13, "gpu-h100-8x", NULL);
	slurm_node("s-u10", "hgx", 20, "gpu-h100-8x", NULL);
	slurm_node("s-vm1", "vm", 21, "vm", NULL);
	/* Left out: a GPU and two DIMMs short, nothing reported, a class nobody defined. */
	slurm_node("s-u05", "hgx", 15, "gpu-h100-7x-missing", NULL);
	slurm_node("s-u06", "hgx", 16, NULL, NULL);
	slurm_node("s-u07", "ghost", 17, "gpu-h100-8x", NULL);
	/* An agent that lies with a line break in its GPU name: it names the finding, and must
	 * not become a line of slurm.conf. */
	slurm_node("s-u08", "hgx", 18, "gpu-h100-8x",
	           "s/\"NVIDIA H100 80GB HBM3\"/\"A100\\\\nNodeName=evil CPUs=1\"/");
	/* A class that pins nothing, an agent that claims more CPUs than Slurm can count: one
	 * line slurmctld refuses would stop it reading the whole file. */
	slurm_node("s-vm2", "vm", 22, "vm",
	           "s/\"cores\": 2,/\"cores\": 65536,/;s/\"threads\": 2,/\"threads\": 131072,/");
	/* A name Slurm keeps for itself. */
	slurm_node("Default", "vm", 23, "vm", NULL);
	/* A model with dashes, as NVML names it (NVIDIA A100-SXM4-80GB): Slurm keeps them. */
	assert_int_equal(call(&S, S.admin, "PUT", "/v1/node-classes/a100", &r, "{s:{s:{s:i, s:s}}}",
	                      "bom", "gpus", "count", 8, "model", "A100-SXM4-80GB"),
	                 201);
	reply_free(&r);
	slurm_node("s-a01", "a100", 24, "gpu-h100-8x",
	           "s/\"NVIDIA H100 80GB HBM3\"/\"NVIDIA A100-SXM4-80GB\"/g");

	snprintf(frag, sizeof frag, "%s",
	         fetch("/v1/exports/slurm?rack=r-02&default=hgx", "slurm.frag"));
	slurp(frag, conf, sizeof conf);
	has(conf, "\nNodeName=s-u01 NodeAddr=127.0.0.11 CPUs=224 Sockets=2 "
	          "CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2063300 "
	          "Gres=gpu:h100_80gb:8 Feature=hgx,r-02 State=UNKNOWN\n");
	has(conf, "\nNodeName=s-vm1 NodeAddr=127.0.0.21 CPUs=2 Sockets=1 "
	          "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105 "
	          "Feature=vm,r-02 State=UNKNOWN\n");
	has(conf, "\nPartitionName=hgx Nodes=s-u[01-03,10] Default=YES State=UP\n");
	has(conf, "\nPartitionName=vm Nodes=s-vm1 State=UP\n");
	has(conf, "\n#   s-u05: its inventory disagrees with class hgx: GPU "
	          "count 7, expected 8 (and more: see its acceptance)\n");
	has(conf, "\n#   s-u06: no inventory");
	has(conf, "\n#   s-u07: class ghost is not defined");
	has(conf, "\n#   s-u08: its inventory disagrees with class hgx: GPU 0 "
	          "is A100 NodeName=evil CPUs=1, expected H100 80GB\n");
	hasnt(conf, "\nNodeName=evil");
	has(conf, "\n#   s-vm2: its CPU topology is past what a machine has (1 sockets, 65536 "
	          "cores, 131072 threads)\n");
	has(conf, "\n#   Default: Slurm keeps the name Default for itself\n");
	has(conf, "\nNodeName=s-a01 NodeAddr=127.0.0.24 CPUs=224 Sockets=2 CoresPerSocket=56 "
	          "ThreadsPerCore=2 RealMemory=2063300 Gres=gpu:a100-sxm4-80gb:8 "
	          "Feature=a100,r-02 State=UNKNOWN\n");
	has(conf, ": 6 node(s); 6 left out (below)\n");
	/* By class: the partition holds what the selector picked. */
	slurp(fetch("/v1/exports/slurm?class=vm", "slurm-vm.frag"), buf, sizeof buf);
	has(buf, ": 1 node(s); 2 left out (below)\nNodeName=s-vm1 ");
	hasnt(buf, "hgx");

	/* gres.conf: AutoDetect by default; explicit device files on asking. */
	slurp(fetch("/v1/exports/slurm/gres.conf?rack=r-02", "gres-auto.conf"), buf, sizeof buf);
	has(buf, ": 5 node(s) with GPUs; 6 left out (below)\nAutoDetect=nvml\n");
	slurp(fetch("/v1/exports/slurm/gres.conf?rack=r-02&autodetect=off", "gres.conf"), buf,
	      sizeof buf);
	has(buf, "\nNodeName=s-u02 Name=gpu Type=h100_80gb File=/dev/nvidia[0-7]\n");
	hasnt(buf, "AutoDetect");
	hasnt(buf, "NodeName=s-vm1");
	assert_int_equal(
	        call(&S, S.admin, "GET", "/v1/exports/slurm/gres.conf?autodetect=yes", &r, NULL),
	        400);
	assert_error(&r, 400, "BAD_QUERY");
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/exports/slurm?autodetect=off", &r, NULL),
	                 400);
	reply_free(&r);

	/* Slurm's own reading: a controller that loads the lines, and scontrol's view of them. */
	if (!have("slurmctld") || !have("munged") || !have("scontrol")) {
		if (ci())
			fail_msg(
			        "slurmctld, scontrol and munged (packages slurmctld, slurm-client, "
			        "munge) are required");
		fprintf(stderr, "test_exports: no slurmctld/munged: Slurm's part skipped\n");
		return;
	}
	snprintf(slurm_dir, sizeof slurm_dir, "%s/slurm", tmp);
	sh("'%s/tests/slurm/slurmctld.sh' start '%s' '%s' %d", rp_test_src, dir, frag,
	   free_ports(2));
	capture(buf, sizeof buf, "SLURM_CONF='%s/slurm.conf' scontrol show node -o s-u02 2>&1",
	        dir);
	if (!strstr(buf, "NodeName=s-u02 ") || !strstr(buf, " CPUTot=224 ") ||
	    !strstr(buf, " Sockets=2 ") || !strstr(buf, " CoresPerSocket=56 ") ||
	    !strstr(buf, " ThreadsPerCore=2 ") || !strstr(buf, " RealMemory=2063300 ") ||
	    !strstr(buf, " Gres=gpu:h100_80gb:8 ") ||
	    !strstr(buf, " AvailableFeatures=hgx,r-02 ") || !strstr(buf, " NodeAddr=127.0.0.12 ") ||
	    !strstr(buf, " Partitions=hgx "))
		fail_msg("slurmctld's s-u02: %s", buf);
	capture(buf, sizeof buf, "SLURM_CONF='%s/slurm.conf' scontrol show node -o s-vm1 2>&1",
	        dir);
	if (!strstr(buf, " CPUTot=2 ") || !strstr(buf, " Partitions=vm ") ||
	    strstr(buf, "Gres=gpu"))
		fail_msg("slurmctld's s-vm1: %s", buf);
	/* Slurm has exactly the nodes exported, no others (no "evil"). */
	capture(buf, sizeof buf,
	        "SLURM_CONF='%s/slurm.conf' scontrol show node -o | cut -d' ' -f1 | sort | tr "
	        "'\\n' ' '",
	        dir);
	assert_string_equal(buf, "NodeName=s-a01 NodeName=s-u01 NodeName=s-u02 NodeName=s-u03 "
	                         "NodeName=s-u10 NodeName=s-vm1 ");
	/* The partition's hostlist, expanded by Slurm. */
	capture(buf, sizeof buf,
	        "SLURM_CONF='%s/slurm.conf' scontrol show hostnames $(SLURM_CONF='%s/slurm.conf' "
	        "scontrol show partition hgx -o | tr ' ' '\\n' | sed -n 's/^Nodes=//p') | tr "
	        "'\\n' ' '",
	        dir, dir);
	assert_string_equal(buf, "s-u01 s-u02 s-u03 s-u10 ");
	has(capture(buf, sizeof buf, "SLURM_CONF='%s/slurm.conf' scontrol show partition hgx", dir),
	    "Default=YES");
	/* slurmd reads the explicit gres.conf next to that slurm.conf, for a node of it (the
	 * device files stand in as links to /dev/null: slurmd wants character devices). */
	sh("sed 's|/dev/nvidia|%s/dev/nvidia|' '%s/gres.conf' > '%s/gres.conf' && mkdir -p "
	   "'%s/dev' && for i in 0 1 2 3 4 5 6 7; do ln -sf /dev/null '%s/dev/nvidia'$i; done",
	   dir, tmp, dir, dir, dir);
	capture(buf, sizeof buf,
	        "SLURM_CONF='%s/slurm.conf' timeout 20 slurmd -G -N s-u03 -f '%s/slurm.conf' 2>&1",
	        dir, dir);
	sh("'%s/tests/slurm/slurmctld.sh' stop '%s'", rp_test_src, dir);
	if (!strstr(buf, "Gres Name=gpu Type=h100_80gb Count=8 "))
		fail_msg("slurmd -G: %s", buf);
}

static void
test_bad_queries(void **state)
{
	static const struct {
		const char *path, *code;
		long status;
	} bad[] = {
	        {"/v1/exports/hosts?rack=r-01&tag=gpu", "BAD_QUERY", 400},
	        {"/v1/exports/hosts?color=red", "BAD_QUERY", 400},
	        {"/v1/exports/hosts?rack=", "BAD_QUERY", 400},
	        {"/v1/exports/ansible?rack=nope", "BAD_QUERY", 400},
	        {"/v1/exports/prometheus?node_exporter_port=x", "BAD_QUERY", 400},
	        {"/v1/exports/slurmish", "NOT_FOUND", 404},
	        {"/v1/exports/slurm?default=a%20b", "BAD_QUERY", 400},
	        {"/v1/exports/slurm/gres.conf?default=hgx", "BAD_QUERY", 400},
	};
	struct reply r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_int_equal(call(&S, S.admin, "GET", bad[i].path, &r, NULL), bad[i].status);
		assert_error(&r, bad[i].status, bad[i].code);
		reply_free(&r);
	}
	/* A token is needed. */
	assert_int_equal(req(&S, NULL, "GET", "/v1/exports/hosts", NULL, NULL, 0, NULL, &r), 401);
	reply_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_prometheus),  cmocka_unit_test(test_ansible),
	        cmocka_unit_test(test_hosts),       cmocka_unit_test(test_slurm),
	        cmocka_unit_test(test_bad_queries),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
