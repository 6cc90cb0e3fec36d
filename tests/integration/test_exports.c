/* Exports for the workload stack, read by their real consumers: Prometheus's promtool checks a
 * configuration whose file service discovery holds GET /v1/exports/prometheus, Ansible's
 * ansible-inventory reads GET /v1/exports/ansible through an inventory script, and the hosts
 * export is checked line by line. A viewer reads them; a bad query is a 400 that changes
 * nothing. Without promtool or ansible-inventory the test fails when CI=true, else skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char tmp[256];

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
	        cmocka_unit_test(test_prometheus),
	        cmocka_unit_test(test_ansible),
	        cmocka_unit_test(test_hosts),
	        cmocka_unit_test(test_bad_queries),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
