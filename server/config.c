/* INI configuration with compiled-in defaults. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http/http.h"

void
rp_config_defaults(struct rp_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "127.0.0.1:8475");
	snprintf(c->data_dir, sizeof c->data_dir, "./var");
	c->threads = 0;
	c->max_body = 1 << 20;
	c->max_import_body = 64 << 20;
	c->conn_timeout_s = 60;
	c->conn_limit = 4096;
	c->access_log = 1;
	snprintf(c->log_level, sizeof c->log_level, "info");
	c->job_workers = 32;
	c->power_sync_interval = 60;
	c->power_sync_concurrency = 64;
	c->bmc_fault_threshold = 3;
	c->ssh_workers = 64;
	c->agent_heartbeat = 30;
	snprintf(c->agent_command, sizeof c->agent_command, "rackpilot-agent");
	c->image_dir[0] = '\0';
	c->boot_url[0] = '\0';
	c->discovery = 1;
	c->discovery_max_tokens = 64;
	c->bootstrap_ttl = 900;
	c->provision_timeout = 1800;
	c->max_upload = 64ULL << 30;
	c->dnsmasq_hosts[0] = '\0';
	c->dnsmasq_pidfile[0] = '\0';
}

/* A path setting: absolute, or empty to unset. */
static int
set_path(char *dst, size_t len, const char *v)
{
	if (strlen(v) >= len || (v[0] != '\0' && v[0] != '/'))
		return -1;
	snprintf(dst, len, "%s", v);
	return 0;
}

static int
parse_uint(const char *v, unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long n;

	if (!isdigit((unsigned char)v[0]))
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v)
		return -1;
	/* Sizes may carry a K/M/G suffix. */
	if (*end == 'K' || *end == 'k')
		n <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		n <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		n <<= 30, end++;
	if (*end != '\0' || n > max)
		return -1;
	*out = n;
	return 0;
}

static int
parse_bool(const char *v, int *out)
{
	if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
		*out = 1;
	else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "0"))
		*out = 0;
	else
		return -1;
	return 0;
}

int
rp_config_set(struct rp_config *c, const char *key, const char *value, char *why, size_t whylen)
{
	unsigned long long n;

	if (strcmp(key, "listen") == 0) {
		if (strlen(value) >= sizeof c->listen)
			goto bad;
		snprintf(c->listen, sizeof c->listen, "%s", value);
	} else if (strcmp(key, "data_dir") == 0) {
		if (value[0] == '\0' || strlen(value) >= sizeof c->data_dir - 32)
			goto bad;
		snprintf(c->data_dir, sizeof c->data_dir, "%s", value);
	} else if (strcmp(key, "threads") == 0) {
		if (parse_uint(value, 256, &n) < 0)
			goto bad;
		c->threads = (unsigned)n;
	} else if (strcmp(key, "max_body") == 0) {
		if (parse_uint(value, 1ULL << 30, &n) < 0 || n < 1024)
			goto bad;
		c->max_body = (size_t)n;
	} else if (strcmp(key, "max_import_body") == 0) {
		if (parse_uint(value, 4ULL << 30, &n) < 0 || n < 1024)
			goto bad;
		c->max_import_body = (size_t)n;
	} else if (strcmp(key, "connection_timeout") == 0) {
		if (parse_uint(value, 86400, &n) < 0 || n < 1)
			goto bad;
		c->conn_timeout_s = (unsigned)n;
	} else if (strcmp(key, "connection_limit") == 0) {
		if (parse_uint(value, 1000000, &n) < 0 || n < 1)
			goto bad;
		c->conn_limit = (unsigned)n;
	} else if (strcmp(key, "access_log") == 0) {
		if (parse_bool(value, &c->access_log) < 0)
			goto bad;
	} else if (strcmp(key, "job_workers") == 0) {
		if (parse_uint(value, 1024, &n) < 0 || n < 1)
			goto bad;
		c->job_workers = (unsigned)n;
	} else if (strcmp(key, "power_sync_interval") == 0) {
		if (parse_uint(value, 86400, &n) < 0)
			goto bad;
		c->power_sync_interval = (unsigned)n;
	} else if (strcmp(key, "power_sync_concurrency") == 0) {
		if (parse_uint(value, 4096, &n) < 0 || n < 1)
			goto bad;
		c->power_sync_concurrency = (unsigned)n;
	} else if (strcmp(key, "bmc_fault_threshold") == 0) {
		if (parse_uint(value, 1000, &n) < 0 || n < 1)
			goto bad;
		c->bmc_fault_threshold = (unsigned)n;
	} else if (strcmp(key, "ssh_workers") == 0) {
		if (parse_uint(value, 4096, &n) < 0 || n < 1)
			goto bad;
		c->ssh_workers = (unsigned)n;
	} else if (strcmp(key, "agent_heartbeat") == 0) {
		if (parse_uint(value, 3600, &n) < 0 || n < 5)
			goto bad;
		c->agent_heartbeat = (unsigned)n;
	} else if (strcmp(key, "agent_command") == 0) {
		/* It runs through the node's shell: keep it to a plain command line. */
		if (value[0] == '\0' || strlen(value) >= sizeof c->agent_command ||
		    strpbrk(value, ";&|`$<>\n\"'\\") != NULL)
			goto bad;
		snprintf(c->agent_command, sizeof c->agent_command, "%s", value);
	} else if (strcmp(key, "image_dir") == 0) {
		if (set_path(c->image_dir, sizeof c->image_dir - 32, value) < 0)
			goto bad;
	} else if (strcmp(key, "dnsmasq_hosts") == 0) {
		if (set_path(c->dnsmasq_hosts, sizeof c->dnsmasq_hosts, value) < 0)
			goto bad;
	} else if (strcmp(key, "dnsmasq_pidfile") == 0) {
		if (set_path(c->dnsmasq_pidfile, sizeof c->dnsmasq_pidfile, value) < 0)
			goto bad;
	} else if (strcmp(key, "boot_url") == 0) {
		/* Written into every boot script: http(s)://host[:port], nothing a script could
		 * misread. */
		size_t i;

		if (strlen(value) >= sizeof c->boot_url ||
		    (value[0] && strncmp(value, "http://", 7) && strncmp(value, "https://", 8)))
			goto bad;
		for (i = 0; value[i]; i++)
			if ((unsigned char)value[i] <= ' ' || strchr("\"'\\", value[i]))
				goto bad;
		snprintf(c->boot_url, sizeof c->boot_url, "%s", value);
		while (strlen(c->boot_url) > 8 && c->boot_url[strlen(c->boot_url) - 1] == '/')
			c->boot_url[strlen(c->boot_url) - 1] = '\0';
	} else if (strcmp(key, "discovery") == 0) {
		if (parse_bool(value, &c->discovery) < 0)
			goto bad;
	} else if (strcmp(key, "discovery_max_tokens") == 0) {
		if (parse_uint(value, 100000, &n) < 0 || n < 1)
			goto bad;
		c->discovery_max_tokens = (unsigned)n;
	} else if (strcmp(key, "bootstrap_ttl") == 0) {
		if (parse_uint(value, 7 * 86400, &n) < 0 || n < 30)
			goto bad;
		c->bootstrap_ttl = (unsigned)n;
	} else if (strcmp(key, "provision_timeout") == 0) {
		if (parse_uint(value, 7 * 86400, &n) < 0 || n < 30)
			goto bad;
		c->provision_timeout = (unsigned)n;
	} else if (strcmp(key, "max_upload") == 0) {
		if (parse_uint(value, 1ULL << 50, &n) < 0 || n < 1024)
			goto bad;
		c->max_upload = n;
	} else if (strcmp(key, "log_level") == 0) {
		if (strcmp(value, "error") && strcmp(value, "warn") && strcmp(value, "info") &&
		    strcmp(value, "debug"))
			goto bad;
		snprintf(c->log_level, sizeof c->log_level, "%s", value);
	} else {
		snprintf(why, whylen, "unknown setting '%s'", key);
		return -1;
	}
	return 0;
bad:
	snprintf(why, whylen, "invalid value '%s' for %s", value, key);
	return -1;
}

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int
rp_config_load(struct rp_config *c, const char *path, char *why, size_t whylen)
{
	FILE *f = fopen(path, "r");
	char line[1024], msg[256];
	int n = 0, rc = -1, in_server = 1;

	if (f == NULL) {
		snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s = trim(line), *eq, *k, *v;

		n++;
		if (*s == '\0' || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']');

			if (close == NULL || close[1] != '\0') {
				snprintf(why, whylen, "%s:%d: malformed section header", path, n);
				goto out;
			}
			*close = '\0';
			in_server = strcmp(trim(s + 1), "server") == 0;
			if (!in_server) {
				snprintf(why, whylen, "%s:%d: unknown section [%s]", path, n, trim(s + 1));
				goto out;
			}
			continue;
		}
		eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(why, whylen, "%s:%d: expected key = value", path, n);
			goto out;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		/* Values may be quoted to keep leading or trailing blanks. */
		if (strlen(v) >= 2 && v[0] == '"' && v[strlen(v) - 1] == '"') {
			v[strlen(v) - 1] = '\0';
			v++;
		}
		if (rp_config_set(c, k, v, msg, sizeof msg) < 0) {
			snprintf(why, whylen, "%s:%d: %s", path, n, msg);
			goto out;
		}
	}
	if (ferror(f)) {
		snprintf(why, whylen, "cannot read %s", path);
		goto out;
	}
	rc = 0;
out:
	fclose(f);
	return rc;
}

int
rp_config_check(const struct rp_config *c, char *why, size_t whylen)
{
	char host[64];
	unsigned port;

	if (rp_http_parse_listen(c->listen, host, sizeof host, &port) < 0) {
		snprintf(why, whylen, "listen = %s: expected ADDR:PORT (e.g. 127.0.0.1:8475)", c->listen);
		return -1;
	}
	if (c->max_import_body < c->max_body) {
		snprintf(why, whylen, "max_import_body must be at least max_body");
		return -1;
	}
	return 0;
}

void
rp_config_print(const struct rp_config *c, FILE *f)
{
	fprintf(f, "[server]\n");
	fprintf(f, "listen = %s\n", c->listen);
	fprintf(f, "data_dir = %s\n", c->data_dir);
	fprintf(f, "threads = %u\n", c->threads);
	fprintf(f, "max_body = %zu\n", c->max_body);
	fprintf(f, "max_import_body = %zu\n", c->max_import_body);
	fprintf(f, "connection_timeout = %u\n", c->conn_timeout_s);
	fprintf(f, "connection_limit = %u\n", c->conn_limit);
	fprintf(f, "access_log = %s\n", c->access_log ? "true" : "false");
	fprintf(f, "log_level = %s\n", c->log_level);
	fprintf(f, "job_workers = %u\n", c->job_workers);
	fprintf(f, "power_sync_interval = %u\n", c->power_sync_interval);
	fprintf(f, "power_sync_concurrency = %u\n", c->power_sync_concurrency);
	fprintf(f, "bmc_fault_threshold = %u\n", c->bmc_fault_threshold);
	fprintf(f, "ssh_workers = %u\n", c->ssh_workers);
	fprintf(f, "agent_heartbeat = %u\n", c->agent_heartbeat);
	fprintf(f, "agent_command = %s\n", c->agent_command);
	fprintf(f, "image_dir = %s\n", c->image_dir);
	fprintf(f, "boot_url = %s\n", c->boot_url);
	fprintf(f, "discovery = %s\n", c->discovery ? "true" : "false");
	fprintf(f, "discovery_max_tokens = %u\n", c->discovery_max_tokens);
	fprintf(f, "bootstrap_ttl = %u\n", c->bootstrap_ttl);
	fprintf(f, "provision_timeout = %u\n", c->provision_timeout);
	fprintf(f, "max_upload = %llu\n", c->max_upload);
	fprintf(f, "dnsmasq_hosts = %s\n", c->dnsmasq_hosts);
	fprintf(f, "dnsmasq_pidfile = %s\n", c->dnsmasq_pidfile);
}
