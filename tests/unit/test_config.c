/* The settings tables of rackpilotd (server/config.c) and rackpilot-agent (agent/config.c):
 * the defaults come from them, and the shipped docs (docs/rackpilotd.conf, the agent's table
 * in docs/agent-protocol.md) show every key with the default its table says, its help line
 * among the words about it, and no key a table lacks; docs/openapi.yaml lists the job types
 * of include/rackpilot/jobtypes.h where it filters by them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "rackpilot/jobtypes.h"
#include "config.h"

#define DOC_MAX (1024 * 1024)

static char *
read_doc(const char *rel)
{
	char path[1024];
	char *buf = malloc(DOC_MAX);
	size_t n;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", RP_TEST_SRC, rel);
	f = fopen(path, "r");
	assert_non_null(buf);
	if (f == NULL)
		fail_msg("cannot read %s", path);
	n = fread(buf, 1, DOC_MAX - 1, f);
	assert_true(n < DOC_MAX - 1);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Runs of blanks (line breaks in prose included) as one space, so a help line matches the
 * doc wherever the doc wraps it. */
static void
squeeze(char *s)
{
	char *r = s, *w = s;

	while (*r) {
		if (*r == ' ' || *r == '\t' || *r == '\n') {
			while (*r == ' ' || *r == '\t' || *r == '\n')
				r++;
			if (w != s && *r)
				*w++ = ' ';
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
}

static int
contains(const char *text, const char *help)
{
	char a[8192], b[1024];

	snprintf(a, sizeof a, "%s", text);
	snprintf(b, sizeof b, "%s", help);
	squeeze(a);
	squeeze(b);
	return strstr(a, b) != NULL;
}

/* "key = value" or "#key = value" (a setting shown commented out); key is [a-z0-9_]. */
static int
setting_line(const char *line, char *key, size_t keylen, const char **value, int *commented)
{
	const char *p = line;
	size_t n;

	*commented = *p == '#';
	p += *commented;
	n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
	if (n == 0 || n >= keylen || strncmp(p + n, " =", 2) != 0)
		return 0;
	snprintf(key, keylen, "%.*s", (int)n, p);
	p += n + 2;
	*value = *p == ' ' ? p + 1 : p;
	return 1;
}

static void
test_server_defaults(void **state)
{
	struct rp_config a, b;
	const char *def, *help, *key;
	char why[256];
	size_t i;

	(void)state;
	rp_config_defaults(&a);
	/* Every row's default is a value its row accepts, and the defaults are exactly those. */
	memset(&b, 0, sizeof b);
	for (i = 0; (key = rp_config_key(i, &def, &help)) != NULL; i++) {
		assert_non_null(help);
		assert_true(help[0] != '\0');
		if (def[0] && rp_config_set(&b, key, def, why, sizeof why) < 0)
			fail_msg("%s: default '%s' refused: %s", key, def, why);
	}
	assert_true(i > 30);
	assert_memory_equal(&a, &b, sizeof a);
	/* The values the hard-coded list had. */
	assert_string_equal(a.listen, "127.0.0.1:8475");
	assert_string_equal(a.data_dir, "./var");
	assert_int_equal(a.threads, 0);
	assert_int_equal(a.max_body, 1 << 20);
	assert_int_equal(a.max_import_body, 64 << 20);
	assert_int_equal(a.max_inventory, 4 << 20);
	assert_int_equal(a.conn_timeout_s, 60);
	assert_int_equal(a.conn_limit, 4096);
	assert_int_equal(a.max_streams_per_token, 16);
	assert_int_equal(a.access_log, 1);
	assert_string_equal(a.log_level, "info");
	assert_string_equal(a.tls, "auto");
	assert_string_equal(a.tls_cert, "");
	assert_string_equal(a.secret_key, "");
	assert_int_equal(a.job_workers, 32);
	assert_int_equal(a.power_sync_interval, 60);
	assert_int_equal(a.power_sync_concurrency, 64);
	assert_int_equal(a.bmc_fault_threshold, 3);
	assert_int_equal(a.ssh_workers, 64);
	assert_int_equal(a.agent_heartbeat, 30);
	assert_string_equal(a.agent_command, "rackpilot-agent");
	assert_string_equal(a.boot_listen, "");
	assert_string_equal(a.boot_url, "");
	assert_int_equal(a.boot_rate, 20);
	assert_int_equal(a.boot_burst, 100);
	assert_int_equal(a.boot_source_check, 0);
	assert_int_equal(a.discovery, 1);
	assert_int_equal(a.discovery_max_tokens, 64);
	assert_int_equal(a.discovery_max_per_source, 4);
	assert_int_equal(a.discovery_max_nodes, 1000);
	assert_int_equal(a.bootstrap_ttl, 900);
	assert_int_equal(a.provision_timeout, 1800);
	assert_true(a.max_upload == 64ULL << 30);
	assert_string_equal(a.dnsmasq_hosts, "");
	/* Named row behaviour: boot_url and agent_url lose trailing slashes. */
	assert_int_equal(rp_config_set(&a, "boot_url", "http://10.0.0.1:8476//", why, sizeof why),
	                 0);
	assert_string_equal(a.boot_url, "http://10.0.0.1:8476");
	assert_int_equal(rp_config_set(&a, "threads", "257", why, sizeof why), -1);
	assert_string_equal(why, "invalid value '257' for threads");
	assert_int_equal(rp_config_set(&a, "threds", "1", why, sizeof why), -1);
	assert_string_equal(why, "unknown setting 'threds'");
}

/* Row i of the server's table whose key is key, or -1. */
static long
server_row(const char *key, const char **def, const char **help)
{
	const char *k;
	size_t i;

	for (i = 0; (k = rp_config_key(i, def, help)) != NULL; i++)
		if (!strcmp(k, key))
			return (long)i;
	return -1;
}

static void
test_server_doc(void **state)
{
	char *doc = read_doc("docs/rackpilotd.conf"), *line, *next;
	char prose[8192] = "", key[64];
	const char *def, *help, *value;
	size_t nseen = 0;
	long row;
	int commented, after_setting = 0;

	(void)state;
	for (line = doc; *line; line = next) {
		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		if (!setting_line(line, key, sizeof key, &value, &commented)) {
			/* Prose is the comment lines above a run of setting lines, in one block. */
			if (line[0] != '#' || after_setting)
				prose[0] = '\0';
			if (line[0] == '#' && strlen(prose) + strlen(line) + 2 < sizeof prose) {
				strcat(prose, line + 1);
				strcat(prose, "\n");
			}
			after_setting = 0;
			continue;
		}
		after_setting = 1;
		if ((row = server_row(key, &def, &help)) < 0)
			fail_msg("docs/rackpilotd.conf shows %s, which server/config.c lacks", key);
		if ((size_t)row < nseen)
			fail_msg("docs/rackpilotd.conf shows %s twice", key);
		if ((size_t)row != nseen)
			fail_msg("docs/rackpilotd.conf shows %s before %s (the table's order)", key,
			         rp_config_key(nseen, &def, &help));
		nseen++;
		if (def[0] && (commented || strcmp(value, def) != 0))
			fail_msg("docs/rackpilotd.conf: '%s', but the default is '%s = %s'", line,
			         key, def);
		if (!def[0] && !commented && value[0])
			fail_msg("docs/rackpilotd.conf: '%s', but %s has no default (show an "
			         "example "
			         "commented out)",
			         line, key);
		if (!contains(prose, help))
			fail_msg("docs/rackpilotd.conf: the text above %s lacks its help line '%s'",
			         key, help);
	}
	if (rp_config_key(nseen, &def, &help) != NULL)
		fail_msg("docs/rackpilotd.conf does not show %s",
		         rp_config_key(nseen, &def, &help));
	free(doc);
}

/* Row i of the agent's table whose key is key, or -1. */
static long
agent_row(const char *key, const char **def, const char **unset, const char **help)
{
	const char *k;
	size_t i;

	for (i = 0; (k = rp_agent_config_key(i, def, unset, help)) != NULL; i++)
		if (!strcmp(k, key))
			return (long)i;
	return -1;
}

static void
test_agent_defaults(void **state)
{
	struct rp_agent_config a, b;
	const char *def, *unset, *help, *key;
	char why[512];
	size_t i;

	(void)state;
	rp_agent_config_defaults(&a);
	memset(&b, 0, sizeof b);
	for (i = 0; (key = rp_agent_config_key(i, &def, &unset, &help)) != NULL; i++) {
		assert_true(help[0] != '\0');
		if (def[0] && rp_agent_config_set(&b, key, def, why, sizeof why) < 0)
			fail_msg("%s: default '%s' refused: %s", key, def, why);
	}
	assert_int_equal(i, 14);
	assert_memory_equal(&a, &b, sizeof a);
	/* The values the hard-coded list had. */
	assert_string_equal(a.state_dir, "/var/lib/rackpilot-agent");
	assert_string_equal(a.root, "/");
	assert_string_equal(a.ssh_host_key, "/etc/ssh/ssh_host_ed25519_key.pub");
	assert_string_equal(a.reboot_command, "/sbin/reboot");
	assert_int_equal(a.tls_verify, 1);
	assert_string_equal(a.url, "");
	assert_int_equal(a.ssh_port, 0);
	assert_int_equal(a.heartbeat_s, 0);
	/* Errors say what each key wants, as before the table. */
	assert_int_equal(rp_agent_config_set(&a, "url", "ftp://x", why, sizeof why), -1);
	assert_string_equal(why,
	                    "invalid value 'ftp://x' for url: expected an http:// or https:// URL");
	assert_int_equal(rp_agent_config_set(&a, "root", "rel", why, sizeof why), -1);
	assert_string_equal(why, "invalid value 'rel' for root: expected an absolute path");
	assert_int_equal(rp_agent_config_set(&a, "ssh_port", "0", why, sizeof why), -1);
	assert_string_equal(why, "invalid value '0' for ssh_port: expected a port (1-65535)");
	assert_int_equal(rp_agent_config_set(&a, "tls_verify", "maybe", why, sizeof why), -1);
	assert_string_equal(why, "invalid value 'maybe' for tls_verify: expected true or false");
	assert_int_equal(rp_agent_config_set(&a, "bogus", "1", why, sizeof why), -1);
	assert_string_equal(why, "unknown key 'bogus'");
	/* The kernel command line: a file's url wins, its absent token does not. */
	a.file_set = 0;
	assert_int_equal(rp_agent_config_set(&a, "url", "http://file", why, sizeof why), 0);
	a.file_set = 1u << 0;
	rp_agent_config_cmdline(&a, "quiet rackpilot.url=http://cmdline rackpilot.token=rpb_x "
	                            "rackpilot.tls_sha256=nothex");
	assert_string_equal(a.url, "http://file");
	assert_string_equal(a.bootstrap_token, "rpb_x");
	assert_string_equal(a.server_fingerprint, "");
}

/* The table under "## Agent configuration" in docs/agent-protocol.md: | keys | default |
 * meaning |. Rows naming no plain key (the kernel command line's) are skipped. */
static void
test_agent_doc(void **state)
{
	char *doc = read_doc("docs/agent-protocol.md"), *line, *next, *cell[3];
	const char *def, *unset, *help;
	int seen[64] = {0};
	size_t i, n;

	(void)state;
	line = strstr(doc, "\n## Agent configuration\n");
	assert_non_null(line);
	line = strstr(line, "\n| key | default | meaning |\n");
	assert_non_null(line);
	line = strchr(line + 1, '\n') + 1;
	line = strchr(line, '\n') + 1; /* |---|---|---| */
	for (; line[0] == '|'; line = next) {
		char keys[256], *k, *ksave = NULL, want[600];
		int plain = 1;

		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		cell[0] = line + 1;
		for (i = 1; i < 3; i++) {
			cell[i] = strstr(cell[i - 1], " | ");
			assert_non_null(cell[i]);
			*cell[i] = '\0';
			cell[i] += 3;
		}
		for (i = 0; i < 3; i++) {
			char *e = cell[i] + strlen(cell[i]);

			while (*cell[i] == ' ')
				cell[i]++;
			if (i == 2 && e > cell[i] && e[-1] == '|')
				*--e = '\0';
			while (e > cell[i] && e[-1] == ' ')
				*--e = '\0';
		}
		snprintf(keys, sizeof keys, "%s", cell[0]);
		for (k = strtok_r(keys, ", ", &ksave); k; k = strtok_r(NULL, ", ", &ksave)) {
			n = strlen(k);
			if (n < 3 || k[0] != '`' || k[n - 1] != '`' ||
			    strspn(k + 1, "abcdefghijklmnopqrstuvwxyz_") != n - 2)
				plain = 0;
		}
		if (!plain)
			continue;
		snprintf(keys, sizeof keys, "%s", cell[0]);
		for (k = strtok_r(keys, ", `", &ksave); k; k = strtok_r(NULL, ", `", &ksave)) {
			long row = agent_row(k, &def, &unset, &help);

			if (row < 0)
				fail_msg("docs/agent-protocol.md shows %s, which agent/config.c "
				         "lacks",
				         k);
			if (seen[row]++)
				fail_msg("docs/agent-protocol.md shows %s twice", k);
			if (def[0])
				snprintf(want, sizeof want, "`%s`", def);
			else
				snprintf(want, sizeof want, "%s", unset[0] ? unset : "—");
			if (strcmp(cell[1], want) &&
			    !(unset[0] && cell[1][0] == '`' &&
			      !strncmp(cell[1] + 1, unset, strlen(unset)) &&
			      !strcmp(cell[1] + 1 + strlen(unset), "`")))
				fail_msg("docs/agent-protocol.md: %s's default is '%s', the table "
				         "says '%s'",
				         k, cell[1], want);
			if (!contains(cell[2], help))
				fail_msg("docs/agent-protocol.md: the meaning of %s lacks its help "
				         "line '%s'",
				         k, help);
		}
	}
	for (i = 0; rp_agent_config_key(i, &def, &unset, &help); i++)
		if (!seen[i])
			fail_msg("docs/agent-protocol.md does not show %s",
			         rp_agent_config_key(i, &def, &unset, &help));
	free(doc);
}

/* docs/openapi.yaml's job type filter (GET /v1/jobs?type=) lists the job-type table, in its
 * order: a type the table gains is documented, or this fails. */
static void
test_job_types_doc(void **state)
{
	char *doc = read_doc("docs/openapi.yaml"), *p, *end, want[512] = "";
	size_t n = 0;

	(void)state;
	for (int i = 0; i < RP_JOB__COUNT; i++)
		n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", i ? ", " : "",
		                      rp_job_type_table[i].name);
	p = strstr(doc, "Only jobs of this type (the job types of include/rackpilot/jobtypes.h)");
	assert_non_null(p);
	p = strstr(p, "enum: [");
	assert_non_null(p);
	p += 7;
	end = strchr(p, ']');
	assert_non_null(end);
	*end = '\0';
	if (strcmp(p, want) != 0)
		fail_msg("docs/openapi.yaml job types [%s], the table [%s]", p, want);
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_server_defaults), cmocka_unit_test(test_server_doc),
	        cmocka_unit_test(test_agent_defaults),  cmocka_unit_test(test_agent_doc),
	        cmocka_unit_test(test_job_types_doc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
