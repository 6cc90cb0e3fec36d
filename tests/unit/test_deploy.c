/*
 * The deploy seed (server/deploy): config checks with hostile input, network-config v2 from
 * an inventory, and the seed files judged by Debian's cloud-init itself (`cloud-init schema`
 * on every cloud-config part, `cloud-init devel net-convert` to netplan and ENI) and by
 * PyYAML (cloud-init's own loader) reading back what the YAML emitter wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "deploy/deploy.h"

static char dir[] = "/tmp/rp-deploy-XXXXXX";
static int have_cloud_init;

static const char *inventory_json =
        "{\"nics\": {\"items\": ["
        "{\"name\": \"eno1\", \"mac\": \"52:54:00:aa:00:01\", \"speed_mbps\": 25000},"
        "{\"name\": \"eno2\", \"mac\": \"52:54:00:aa:00:02\", \"speed_mbps\": 25000},"
        "{\"name\": \"eno3\", \"mac\": \"52:54:00:aa:00:03\"},"
        "{\"name\": \"ib0\", \"mac\": "
        "\"00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33\"}"
        "]}}";

static int
tool(const char *name)
{
	char cmd[256];

	snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

static int
setup(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(dir));
	have_cloud_init = tool("cloud-init") && tool("python3");
	if (!have_cloud_init && getenv("CI") && !strcmp(getenv("CI"), "true")) {
		fprintf(stderr, "cloud-init is not installed (CI=true: .ci/deps installs it)\n");
		return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (getenv("RP_KEEP")) {
		fprintf(stderr, "kept %s\n", dir);
		return 0;
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static json_t *
J(const char *text)
{
	json_error_t err;
	json_t *v = json_loads(text, 0, &err);

	if (v == NULL)
		fail_msg("bad test JSON: %s: %s", err.text, text);
	return v;
}

/* Check text as a config; expect e and, when field is not NULL, that field. */
static void
expect(const char *text, enum rp_err want, const char *field, const char *reason_part)
{
	json_t *cfg = J(text), *detail = NULL;
	enum rp_err e = rp_deploy_config_check(cfg, "config", &detail);

	if (e != want)
		fail_msg("%s: got %d, want %d (%s)", text, e, want,
		         json_string_value(json_object_get(detail, "reason")) ?: "no detail");
	if (field)
		assert_string_equal(json_string_value(json_object_get(detail, "field")), field);
	if (reason_part &&
	    !strstr(json_string_value(json_object_get(detail, "reason")) ?: "", reason_part))
		fail_msg("reason %s lacks %s",
		         json_string_value(json_object_get(detail, "reason")) ?: "(none)",
		         reason_part);
	json_decref(detail);
	json_decref(cfg);
}

static void
test_config_check(void **state)
{
	(void)state;
	expect("{}", RP_ERR_OK, NULL, NULL);
	expect("{\"hostname\": \"gpu-r01-u07\", \"ssh_authorized_keys\": [\"ssh-ed25519 "
	       "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@x\"], "
	       "\"user_data\": \"#cloud-config\\npackages: [htop]\\n\", \"meta\": {\"site\": "
	       "\"fra1\"}, \"network\": {\"address\": \"10.0.0.5/24\", \"gateway\": \"10.0.0.1\", "
	       "\"nameservers\": [\"10.0.0.1\"], \"mtu\": 9000}}",
	       RP_ERR_OK, NULL, NULL);
	expect("{\"user_data\": \"#!/bin/sh\\necho hi\\n\"}", RP_ERR_OK, NULL, NULL);
	expect("{\"user_data\": \"## template: jinja\\n#cloud-config\\nhostname: {{ "
	       "ds.meta_data.rackpilot_node }}\\n\"}",
	       RP_ERR_OK, NULL, NULL);
	expect("{\"user_data\": \"#cloud-config\\n\"}", RP_ERR_OK, NULL, NULL);
	/* Hostile and wrong input: each names its field. */
	expect("{\"bogus\": 1}", RP_ERR_UNKNOWN_FIELD, "config.bogus", NULL);
	expect("[]", RP_ERR_INVALID_FIELD, "config", NULL);
	expect("{\"hostname\": \"-bad\"}", RP_ERR_INVALID_FIELD, "config.hostname", NULL);
	expect("{\"hostname\": \"a..b\"}", RP_ERR_INVALID_FIELD, "config.hostname", NULL);
	expect("{\"hostname\": \"a_b\"}", RP_ERR_INVALID_FIELD, "config.hostname", NULL);
	expect("{\"ssh_authorized_keys\": [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA\\nrm -rf /\"]}",
	       RP_ERR_INVALID_FIELD, "config.ssh_authorized_keys[0]", NULL);
	expect("{\"ssh_authorized_keys\": [\"not-a-key AAAAC3NzaC1lZDI1NTE5AAAA\"]}",
	       RP_ERR_INVALID_FIELD, "config.ssh_authorized_keys[0]", NULL);
	expect("{\"ssh_authorized_keys\": \"ssh-ed25519 AAAA\"}", RP_ERR_INVALID_FIELD,
	       "config.ssh_authorized_keys", NULL);
	expect("{\"user_data\": \"#cloud-config\\nruncmd:\\n  - [a, b\\n  bad: : :\\n\"}",
	       RP_ERR_INVALID_FIELD, "config.user_data", "line");
	expect("{\"user_data\": \"#cloud-config\\nkey: value\\n  other: x\\n\"}",
	       RP_ERR_INVALID_FIELD, "config.user_data", "not valid YAML");
	expect("{\"user_data\": \"#cloud-config\\n- a\\n- b\\n\"}", RP_ERR_INVALID_FIELD,
	       "config.user_data", "mapping");
	expect("{\"user_data\": \"#cloud-config\\na: 1\\n---\\nb: 2\\n\"}", RP_ERR_INVALID_FIELD,
	       "config.user_data", "several");
	expect("{\"user_data\": \"packages: [htop]\\n\"}", RP_ERR_INVALID_FIELD, "config.user_data",
	       "#cloud-config");
	expect("{\"user_data\": \"#cloud-configuration\\n\"}", RP_ERR_INVALID_FIELD,
	       "config.user_data", NULL);
	expect("{\"meta\": {\"instance-id\": \"x\"}}", RP_ERR_INVALID_FIELD,
	       "config.meta.instance-id", NULL);
	expect("{\"meta\": {\"a\": 1}}", RP_ERR_INVALID_FIELD, "config.meta.a", NULL);
	expect("{\"network\": {\"address\": \"10.0.0.5\"}}", RP_ERR_INVALID_FIELD,
	       "config.network.address", "prefix");
	expect("{\"network\": {\"address\": \"10.0.0.300/24\"}}", RP_ERR_INVALID_FIELD,
	       "config.network.address", NULL);
	expect("{\"network\": {\"address\": \"fd00::5/129\"}}", RP_ERR_INVALID_FIELD,
	       "config.network.address", NULL);
	expect("{\"network\": {\"gateway\": \"10.0.0.1\"}}", RP_ERR_INVALID_FIELD,
	       "config.network.gateway", "needs an address");
	expect("{\"network\": {\"address\": \"10.0.0.5/24\", \"interfaces\": [{\"name\": \"eno2\", "
	       "\"address\": \"10.0.0.5/16\"}]}}",
	       RP_ERR_INVALID_FIELD, "config.network.interfaces[0].address", "twice");
	expect("{\"network\": {\"bonds\": [{\"name\": \"bond0\", \"interfaces\": [\"eno1\", "
	       "\"eno1\"]}]}}",
	       RP_ERR_INVALID_FIELD, "config.network.bonds[0].interfaces[1]", "twice");
	expect("{\"network\": {\"bonds\": [{\"name\": \"bond0\", \"interfaces\": [\"eno1\"], "
	       "\"mode\": \"lacp\"}]}}",
	       RP_ERR_INVALID_FIELD, "config.network.bonds[0].mode", NULL);
	expect("{\"network\": {\"bonds\": [{\"name\": \"Bond 0\", \"interfaces\": [\"eno1\"]}]}}",
	       RP_ERR_INVALID_FIELD, "config.network.bonds[0].name", NULL);
	expect("{\"network\": {\"mtu\": 100}}", RP_ERR_INVALID_FIELD, "config.network.mtu", NULL);
	expect("{\"network\": {\"routes\": []}}", RP_ERR_UNKNOWN_FIELD, "config.network.routes",
	       NULL);
	expect("{\"network\": {\"version\": 1}}", RP_ERR_INVALID_FIELD, "config.network.version",
	       NULL);
	expect("{\"network\": {\"version\": 2, \"wifis\": {}}}", RP_ERR_UNKNOWN_FIELD,
	       "config.network.wifis", NULL);
	/* What YAML would refuse or read back otherwise. */
	expect("{\"meta\": {\"k\": \"a\\u007fb\"}}", RP_ERR_INVALID_FIELD, "config.meta.k", NULL);
	expect("{\"meta\": {\"k\": \"a\\u0085b\"}}", RP_ERR_INVALID_FIELD, "config.meta.k", NULL);
	expect("{\"meta\": {\"k\": \"a\\u2028b\"}}", RP_ERR_INVALID_FIELD, "config.meta.k", NULL);
	expect("{\"network\": {\"version\": 2, \"ethernets\": {\"e\": {\"mtu\": 1.5e20}}}}",
	       RP_ERR_INVALID_FIELD, "config.network", "fractional");
	expect("{\"network\": {\"version\": 2, \"ethernets\": {\"e\": {\"x\": "
	       "[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}}}",
	       RP_ERR_INVALID_FIELD, "config.network", "deeper");
	expect("{\"network\": {\"version\": 2, \"ethernets\": {\"e\\u0001\": {}}}}",
	       RP_ERR_INVALID_FIELD, "config.network", "keys");
}

static json_t *
resolve(const char *defaults, const char *cfg, json_t **detail, enum rp_err want)
{
	json_t *d = defaults ? J(defaults) : NULL, *c = cfg ? J(cfg) : NULL,
	       *inv = J(inventory_json);
	json_t *macs = J("[\"52:54:00:aa:00:09\", \"52:54:00:aa:00:01\"]"), *out = NULL;
	struct rp_deploy_node node = {"gpu-r01-u07", "r01", "hgx", macs, inv};
	enum rp_err e;

	*detail = NULL;
	if (d)
		assert_int_equal(rp_deploy_config_check(d, "deploy_defaults", detail), RP_ERR_OK);
	if (c)
		assert_int_equal(rp_deploy_config_check(c, "config", detail), RP_ERR_OK);
	e = rp_deploy_resolve(d, c, &node, &out, detail);
	if (e != want)
		fail_msg("resolve: got %d, want %d (%s)", e, want,
		         json_string_value(json_object_get(*detail, "reason")) ?: "no detail");
	json_decref(d);
	json_decref(c);
	json_decref(inv);
	json_decref(macs);
	return out;
}

static void
test_resolve(void **state)
{
	json_t *detail = NULL, *r, *eth;
	char *y;

	(void)state;
	/* Nothing given: the boot NIC (the first enrolled MAC the inventory shows) with DHCP. */
	r = resolve(NULL, NULL, &detail, RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(r, "hostname")), "gpu-r01-u07");
	eth = json_object_get(json_object_get(r, "network"), "ethernets");
	assert_int_equal(json_object_size(eth), 1);
	assert_true(json_is_true(json_object_get(json_object_get(eth, "eno1"), "dhcp4")));
	assert_string_equal(
	        json_string_value(json_object_get(
	                json_object_get(json_object_get(eth, "eno1"), "match"), "macaddress")),
	        "52:54:00:aa:00:01");
	json_decref(r);
	/* Class defaults under the request: keys of both once, user data of both, meta
	 * overlaid, the request's network. */
	r = resolve(
	        "{\"ssh_authorized_keys\": [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAclass "
	        "class@x\"], \"user_data\": \"#cloud-config\\npackages: [htop]\\n\", "
	        "\"meta\": {\"site\": \"fra1\", \"tier\": \"a\"}, \"network\": {\"mtu\": 9000}}",
	        "{\"hostname\": \"n7\", \"ssh_authorized_keys\": [\"ssh-ed25519 "
	        "AAAAC3NzaC1lZDI1NTE5AAAAclass class@x\", \"ssh-ed25519 "
	        "AAAAC3NzaC1lZDI1NTE5AAAAreq req@x\"], \"user_data\": \"#!/bin/sh\\ntrue\\n\", "
	        "\"meta\": {\"tier\": \"b\"}, \"network\": {\"address\": \"10.0.0.7/24\", "
	        "\"gateway\": \"10.0.0.1\", \"bonds\": [{\"name\": \"bond0\", \"interfaces\": "
	        "[\"eno2\", \"52:54:00:AA:00:03\"], \"mode\": \"802.3ad\", \"address\": "
	        "\"192.168.5.7/24\"}]}}",
	        &detail, RP_ERR_OK);
	assert_string_equal(json_string_value(json_object_get(r, "hostname")), "n7");
	assert_int_equal(json_array_size(json_object_get(r, "ssh_authorized_keys")), 2);
	assert_int_equal(json_array_size(json_object_get(r, "user_data")), 2);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "meta"), "tier")),
	                    "b");
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "meta"), "site")),
	                    "fra1");
	assert_int_equal(json_array_size(json_object_get(r, "addresses")), 2);
	y = rp_deploy_yaml(json_object_get(r, "network"));
	assert_non_null(strstr(y, "bond0:"));
	assert_non_null(strstr(y, "\"802.3ad\""));
	assert_non_null(strstr(y, "\"10.0.0.7/24\""));
	assert_null(strstr(y, "ib0")); /* InfiniBand is the workload stack's unless named */
	free(y);
	json_decref(r);
	/* The boot NIC in a bond: the bond takes DHCP. */
	r = resolve(NULL,
	            "{\"network\": {\"bonds\": [{\"name\": \"bond0\", \"interfaces\": [\"eno1\", "
	            "\"eno2\"]}]}}",
	            &detail, RP_ERR_OK);
	assert_true(json_is_true(json_object_get(
	        json_object_get(json_object_get(json_object_get(r, "network"), "bonds"), "bond0"),
	        "dhcp4")));
	json_decref(r);
	/* A NIC the inventory does not show; the boot NIC named again. */
	r = resolve(NULL,
	            "{\"network\": {\"bonds\": [{\"name\": \"bond0\", \"interfaces\": [\"eno2\", "
	            "\"eno9\"]}]}}",
	            &detail, RP_ERR_INVALID_FIELD);
	assert_null(r);
	assert_string_equal(json_string_value(json_object_get(detail, "field")),
	                    "config.network.bonds[0].interfaces[1]");
	json_decref(detail);
	/* The boot NIC in two bonds (once by name, once by MAC); a boot bond addressed twice. */
	r = resolve(NULL,
	            "{\"network\": {\"bonds\": [{\"name\": \"bond0\", \"interfaces\": [\"eno1\"]}, "
	            "{\"name\": \"bond1\", \"interfaces\": [\"52:54:00:aa:00:01\"]}]}}",
	            &detail, RP_ERR_INVALID_FIELD);
	assert_null(r);
	assert_string_equal(json_string_value(json_object_get(detail, "field")),
	                    "config.network.bonds[1].interfaces[0]");
	json_decref(detail);
	r = resolve(
	        NULL,
	        "{\"network\": {\"address\": \"10.0.0.7/24\", \"bonds\": [{\"name\": \"bond0\", "
	        "\"interfaces\": [\"eno1\", \"eno2\"], \"dhcp\": true}]}}",
	        &detail, RP_ERR_INVALID_FIELD);
	assert_null(r);
	assert_string_equal(json_string_value(json_object_get(detail, "field")),
	                    "config.network.address");
	json_decref(detail);
	/* A class's network that does not fit the node names the class's field. */
	r = resolve("{\"network\": {\"interfaces\": [{\"name\": \"eno7\", \"dhcp\": true}]}}", NULL,
	            &detail, RP_ERR_INVALID_FIELD);
	assert_null(r);
	assert_string_equal(json_string_value(json_object_get(detail, "field")),
	                    "deploy_defaults.network.interfaces[0].name");
	json_decref(detail);
	/* cloud-init's own form: its static addresses are claimed too. */
	r = resolve(NULL,
	            "{\"network\": {\"version\": 2, \"ethernets\": {\"a\": {\"match\": "
	            "{\"macaddress\": \"52:54:00:aa:00:01\"}, \"addresses\": [\"10.9.0.7/24\", "
	            "\"fd00::7/64\"]}}}}",
	            &detail, RP_ERR_OK);
	assert_int_equal(json_array_size(json_object_get(r, "addresses")), 2);
	assert_string_equal(json_string_value(json_array_get(json_object_get(r, "addresses"), 1)),
	                    "fd00::7");
	json_decref(r);
	r = resolve(NULL, "{\"network\": {\"interfaces\": [{\"name\": \"eno1\", \"dhcp\": true}]}}",
	            &detail, RP_ERR_INVALID_FIELD);
	assert_null(r);
	json_decref(detail);
	/* The agent's inventory is its word: a NIC without a name, or with a name no OS has,
	 * is no NIC (it must not crash anything). */
	{
		json_t *inv =
		        J("{\"nics\": {\"items\": [{\"name\": \"eno1\", \"mac\": "
		          "\"52:54:00:aa:00:01\"}, {\"mac\": \"52:54:00:aa:00:02\"}, {\"name\": "
		          "\"bad name\\n\", \"mac\": \"52:54:00:aa:00:03\"}, {\"name\": 7}]}}");
		json_t *macs = J("[\"52:54:00:aa:00:01\"]"), *c;
		struct rp_deploy_node node = {"n1", NULL, NULL, macs, inv};

		c = J("{\"network\": {\"interfaces\": [{\"name\": \"52:54:00:aa:00:02\", "
		      "\"dhcp\": true}]}}");
		assert_int_equal(rp_deploy_resolve(NULL, c, &node, &r, &detail),
		                 RP_ERR_INVALID_FIELD);
		json_decref(detail);
		json_decref(c);
		c = J("{\"network\": {\"bonds\": [{\"name\": \"bond0\", \"interfaces\": "
		      "[\"52:54:00:aa:00:03\"]}]}}");
		assert_int_equal(rp_deploy_resolve(NULL, c, &node, &r, &detail),
		                 RP_ERR_INVALID_FIELD);
		json_decref(detail);
		json_decref(c);
		json_decref(inv);
		json_decref(macs);
	}
	r = resolve(NULL,
	            "{\"network\": {\"interfaces\": [{\"name\": \"ib0\", \"address\": "
	            "\"10.10.0.7/16\"}]}}",
	            &detail, RP_ERR_OK);
	assert_int_equal(
	        json_object_size(json_object_get(json_object_get(r, "network"), "ethernets")), 2);
	json_decref(r);
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void
test_seed_cloud_init(void **state)
{
	json_t *detail = NULL, *r, *seed;
	struct rp_deploy_report rep = {
	        "https://10.99.1.1:8443/v1/agent/first-boot",
	        "rpfb1.0b7c1f6e-0000-4000-8000-000000000001.abcdef",
	        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"};
	char path[256];
	const char *ud;

	(void)state;
	if (!have_cloud_init)
		skip();
	r = resolve(
	        "{\"user_data\": \"#cloud-config\\npackages: [htop]\\nruncmd:\\n  - [echo, "
	        "class]\\n\"}",
	        "{\"ssh_authorized_keys\": [\"ssh-ed25519 "
	        "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@x\"], "
	        "\"user_data\": \"#cloud-config\\nwrite_files:\\n  - path: /etc/motd\\n    "
	        "content: hello\\n\", \"meta\": {\"site\": \"fra1\"}, \"network\": {\"address\": "
	        "\"10.0.0.7/24\", \"gateway\": \"10.0.0.1\", \"nameservers\": [\"10.0.0.1\"], "
	        "\"search\": [\"example.net\"], \"mtu\": 9000, \"bonds\": [{\"name\": \"bond0\", "
	        "\"interfaces\": [\"eno2\", \"eno3\"], \"mode\": \"802.3ad\", \"address\": "
	        "\"192.168.5.7/24\"}]}}",
	        &detail, RP_ERR_OK);
	seed = rp_deploy_seed(r, "rp-0b7c1f6e-0000-4000-8000-000000000001", &rep);
	assert_non_null(seed);
	snprintf(path, sizeof path, "%s/meta-data", dir);
	write_file(path, json_string_value(json_object_get(seed, "meta-data")));
	snprintf(path, sizeof path, "%s/network-config", dir);
	write_file(path, json_string_value(json_object_get(seed, "network-config")));
	snprintf(path, sizeof path, "%s/user-data", dir);
	ud = json_string_value(json_object_get(seed, "user-data"));
	write_file(path, ud);
	assert_non_null(strstr(ud, "Merge-Type: list(append)"));
	assert_non_null(strstr(ud, "text/x-shellscript"));
	assert_non_null(strstr(ud, "--pinnedpubkey"));
	/* meta-data as cloud-init's YAML loader reads it. */
	assert_int_equal(run("python3 -c 'import yaml,sys; m = yaml.safe_load(open(sys.argv[1])); "
	                     "assert m[\"instance-id\"] == "
	                     "\"rp-0b7c1f6e-0000-4000-8000-000000000001\", m; assert "
	                     "m[\"local-hostname\"] == \"gpu-r01-u07\"; assert m[\"site\"] == "
	                     "\"fra1\"; assert m[\"rackpilot_rack\"] == \"r01\"' %s/meta-data",
	                     dir),
	                 0);
	/* Every cloud-config part of user-data passes cloud-init's schema; the script part
	 * is POSIX sh (sh -n). */
	assert_int_equal(
	        run("cd %s && python3 -c '\n"
	            "import email, sys\n"
	            "msg = email.message_from_file(open(\"user-data\"))\n"
	            "n = 0\n"
	            "for i, p in enumerate(msg.walk()):\n"
	            "    t = p.get_content_type()\n"
	            "    if t == \"text/cloud-config\":\n"
	            "        open(\"part%%d.cfg\" %% i, \"w\").write(p.get_payload()); n += 1\n"
	            "    elif t == \"text/x-shellscript\":\n"
	            "        open(\"part%%d.sh\" %% i, \"w\").write(p.get_payload()); n += 1\n"
	            "sys.exit(0 if n == 4 else 1)' && for f in part*.cfg; do cloud-init schema "
	            "--config-file $f >/dev/null || exit 1; done && for f in part*.sh; do sh -n $f "
	            "|| exit 1; done",
	            dir),
	        0);
	/* network-config v2 through cloud-init's renderers. */
	assert_int_equal(
	        run("cd %s && cloud-init devel net-convert -p network-config -k yaml -D "
	            "debian -d netplan -O netplan >/dev/null 2>&1 && cloud-init devel "
	            "net-convert -p network-config -k yaml -D debian -d eni -O eni "
	            ">/dev/null 2>&1 && grep -rq 'bond0' netplan && grep -rq '10.0.0.7/24' "
	            "netplan && grep -rq '9000' netplan && grep -rq 'address "
	            "192.168.5.7/24' eni && grep -rq 'bond-mode 802.3ad' eni && grep -rq "
	            "'52:54:00:aa:00:01' netplan",
	            dir),
	        0);
	rp_deploy_seed_free(seed);
	json_decref(r);
}

static void
test_yaml_roundtrip(void **state)
{
	json_t *v =
	        J("{\"a\": \"plain\", \"yes\": \"quoted key\", \"quote\": \"she said \\\"hi\\\"\\n"
	          "next\", \"list\": [1, 2.5, true, null, \"x: y\", {\"k\": [\"- dash\", "
	          "\"#not a comment\"]}, []], \"empty\": {}, \"unicode\": \"\\u00e9\\u2603\", "
	          "\"8080\": \"numeric key\", \"nested\": {\"deep\": {\"deeper\": [[\"z\"]]}}}");
	char path[256], *y = rp_deploy_yaml(v), *j = json_dumps(v, JSON_SORT_KEYS);

	(void)state;
	if (!have_cloud_init)
		skip();
	assert_non_null(y);
	snprintf(path, sizeof path, "%s/rt.yaml", dir);
	write_file(path, y);
	snprintf(path, sizeof path, "%s/rt.json", dir);
	write_file(path, j);
	assert_int_equal(
	        run("python3 -c 'import yaml,json,sys; a = yaml.safe_load(open(sys.argv[1])); "
	            "b = json.load(open(sys.argv[2])); sys.exit(0 if a == b else 1)' "
	            "%s/rt.yaml %s/rt.json",
	            dir, dir),
	        0);
	free(y);
	free(j);
	json_decref(v);
}

static void
test_report_check(void **state)
{
	json_t *d = NULL, *b;

	(void)state;
	b = J("{\"instance_id\": \"rp-x\", \"hostname\": \"n1\", \"kernel\": \"6.1.0-13-amd64\", "
	      "\"addresses\": [\"10.0.0.7/24\", \"fd00::7\"]}");
	assert_int_equal(rp_deploy_report_check(b, &d), RP_ERR_OK);
	json_decref(b);
	b = J("{\"instance_id\": \"rp-x\", \"hostname\": \"n1; rm -rf /\"}");
	assert_int_equal(rp_deploy_report_check(b, &d), RP_ERR_INVALID_FIELD);
	json_decref(d);
	json_decref(b);
	b = J("{\"instance_id\": \"rp-x\", \"addresses\": [\"<script>\"]}");
	assert_int_equal(rp_deploy_report_check(b, &d), RP_ERR_INVALID_FIELD);
	assert_string_equal(json_string_value(json_object_get(d, "field")), "addresses[0]");
	json_decref(d);
	json_decref(b);
	b = J("{\"hostname\": \"n1\"}");
	assert_int_equal(rp_deploy_report_check(b, &d), RP_ERR_MISSING_FIELD);
	json_decref(d);
	json_decref(b);
	b = J("{\"instance_id\": \"rp-x\", \"extra\": 1}");
	assert_int_equal(rp_deploy_report_check(b, &d), RP_ERR_UNKNOWN_FIELD);
	json_decref(d);
	json_decref(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_config_check),    cmocka_unit_test(test_resolve),
	        cmocka_unit_test(test_seed_cloud_init), cmocka_unit_test(test_yaml_roundtrip),
	        cmocka_unit_test(test_report_check),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
