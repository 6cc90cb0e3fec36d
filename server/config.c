/* INI configuration with compiled-in defaults: one table says every setting's key, type,
 * range and place, and setting, printing and documenting all read it. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http/http.h"

enum ctype {
	C_STR,  /* a string into a char array; check() may refuse it */
	C_PATH, /* an absolute path, or "" to unset */
	C_UINT, /* unsigned in [min, max]; K/M/G suffixes for sizes */
	C_SIZE, /* size_t, same parsing */
	C_U64,  /* unsigned long long, same parsing */
	C_BOOL, /* true/yes/on/1, false/no/off/0; stored as int */
	C_ENUM  /* one of enums, into a char array */
};

struct setting {
	const char *key;
	enum ctype type;
	size_t off, len; /* where in struct rp_config; len: bytes of a char array */
	unsigned long long min, max;
	const char *const *enums;
	int (*check)(const char *v); /* C_STR: 0 to accept */
	size_t reserve;              /* C_STR/C_PATH: bytes kept free for what is appended */
};

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const tls_modes[] = {"auto", "on", "off", NULL};

static int
nonempty(const char *v)
{
	return v[0] ? 0 : -1;
}

/* It runs through the node's shell: keep it to a plain command line. */
static int
plain_command(const char *v)
{
	return v[0] == '\0' || strpbrk(v, ";&|`$<>\n\"'\\") != NULL ? -1 : 0;
}

/* Written into every boot script: http(s)://host[:port], nothing a script could misread. */
static int
script_url(const char *v)
{
	size_t i;

	if (v[0] && strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
		return -1;
	for (i = 0; v[i]; i++)
		if ((unsigned char)v[i] <= ' ' || (unsigned char)v[i] >= 0x7f ||
		    strchr("\"'\\", v[i]))
			return -1;
	return 0;
}

static int
listen_or_off(const char *v)
{
	char host[64];
	unsigned port;

	return v[0] == '\0' || !strcmp(v, "off") ||
	                       rp_http_parse_listen(v, host, sizeof host, &port) == 0
	               ? 0
	               : -1;
}

#define F(field) offsetof(struct rp_config, field), sizeof(((struct rp_config *)0)->field)

static const struct setting settings[] = {
        {"listen", C_STR, F(listen), 0, 0, NULL, nonempty, 0},
        {"data_dir", C_STR, F(data_dir), 0, 0, NULL, nonempty, 32},
        {"threads", C_UINT, F(threads), 0, 256, NULL, NULL, 0},
        {"max_body", C_SIZE, F(max_body), 1024, 1ULL << 30, NULL, NULL, 0},
        {"max_import_body", C_SIZE, F(max_import_body), 1024, 4ULL << 30, NULL, NULL, 0},
        {"max_inventory", C_SIZE, F(max_inventory), 64 << 10, 1ULL << 30, NULL, NULL, 0},
        {"connection_timeout", C_UINT, F(conn_timeout_s), 1, 86400, NULL, NULL, 0},
        {"connection_limit", C_UINT, F(conn_limit), 1, 1000000, NULL, NULL, 0},
        {"max_streams_per_token", C_UINT, F(max_streams_per_token), 1, 256, NULL, NULL, 0},
        {"access_log", C_BOOL, F(access_log), 0, 0, NULL, NULL, 0},
        {"log_level", C_ENUM, F(log_level), 0, 0, log_levels, NULL, 0},
        {"tls", C_ENUM, F(tls), 0, 0, tls_modes, NULL, 0},
        {"tls_cert", C_PATH, F(tls_cert), 0, 0, NULL, NULL, 0},
        {"tls_key", C_PATH, F(tls_key), 0, 0, NULL, NULL, 0},
        {"secret_key", C_PATH, F(secret_key), 0, 0, NULL, NULL, 8},
        {"job_workers", C_UINT, F(job_workers), 1, 1024, NULL, NULL, 0},
        {"power_sync_interval", C_UINT, F(power_sync_interval), 0, 86400, NULL, NULL, 0},
        {"power_sync_concurrency", C_UINT, F(power_sync_concurrency), 1, 4096, NULL, NULL, 0},
        {"bmc_fault_threshold", C_UINT, F(bmc_fault_threshold), 1, 1000, NULL, NULL, 0},
        {"ssh_workers", C_UINT, F(ssh_workers), 1, 4096, NULL, NULL, 0},
        {"agent_heartbeat", C_UINT, F(agent_heartbeat), 5, 3600, NULL, NULL, 0},
        {"agent_command", C_STR, F(agent_command), 0, 0, NULL, plain_command, 0},
        {"image_dir", C_PATH, F(image_dir), 0, 0, NULL, NULL, 32},
        {"boot_listen", C_STR, F(boot_listen), 0, 0, NULL, listen_or_off, 0},
        {"boot_url", C_STR, F(boot_url), 0, 0, NULL, script_url, 0},
        {"agent_url", C_STR, F(agent_url), 0, 0, NULL, script_url, 0},
        {"boot_rate", C_UINT, F(boot_rate), 0, 100000, NULL, NULL, 0},
        {"boot_burst", C_UINT, F(boot_burst), 1, 100000, NULL, NULL, 0},
        {"boot_source_check", C_BOOL, F(boot_source_check), 0, 0, NULL, NULL, 0},
        {"discovery", C_BOOL, F(discovery), 0, 0, NULL, NULL, 0},
        {"discovery_max_tokens", C_UINT, F(discovery_max_tokens), 1, 100000, NULL, NULL, 0},
        {"discovery_max_per_source", C_UINT, F(discovery_max_per_source), 0, 100000, NULL, NULL, 0},
        {"discovery_max_nodes", C_UINT, F(discovery_max_nodes), 0, 1000000, NULL, NULL, 0},
        {"bootstrap_ttl", C_UINT, F(bootstrap_ttl), 30, 7 * 86400, NULL, NULL, 0},
        {"provision_timeout", C_UINT, F(provision_timeout), 30, 7 * 86400, NULL, NULL, 0},
        {"max_upload", C_U64, F(max_upload), 1024, 1ULL << 50, NULL, NULL, 0},
        {"dnsmasq_hosts", C_PATH, F(dnsmasq_hosts), 0, 0, NULL, NULL, 0},
        {"dnsmasq_pidfile", C_PATH, F(dnsmasq_pidfile), 0, 0, NULL, NULL, 0},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

void
rp_config_defaults(struct rp_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "127.0.0.1:8475");
	snprintf(c->data_dir, sizeof c->data_dir, "./var");
	c->threads = 0;
	c->max_body = 1 << 20;
	c->max_import_body = 64 << 20;
	c->max_inventory = 4 << 20;
	c->conn_timeout_s = 60;
	c->conn_limit = 4096;
	c->max_streams_per_token = 16;
	c->access_log = 1;
	snprintf(c->log_level, sizeof c->log_level, "info");
	snprintf(c->tls, sizeof c->tls, "auto");
	c->job_workers = 32;
	c->power_sync_interval = 60;
	c->power_sync_concurrency = 64;
	c->bmc_fault_threshold = 3;
	c->ssh_workers = 64;
	c->agent_heartbeat = 30;
	snprintf(c->agent_command, sizeof c->agent_command, "rackpilot-agent");
	c->boot_rate = 20;
	c->boot_burst = 100;
	c->discovery = 1;
	c->discovery_max_tokens = 64;
	c->discovery_max_per_source = 4;
	c->discovery_max_nodes = 1000;
	c->bootstrap_ttl = 900;
	c->provision_timeout = 1800;
	c->max_upload = 64ULL << 30;
}

static int
parse_uint(const char *v, unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long n;
	unsigned shift = 0;

	if (!isdigit((unsigned char)v[0]))
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v)
		return -1;
	/* Sizes may carry a K/M/G suffix (refused where the shift would overflow). */
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (n > (~0ULL >> shift))
		return -1;
	n <<= shift;
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
	const struct setting *s = NULL;
	char *p;
	unsigned long long n;
	size_t i;

	for (i = 0; i < NSETTINGS && s == NULL; i++)
		if (strcmp(settings[i].key, key) == 0)
			s = &settings[i];
	if (s == NULL) {
		snprintf(why, whylen, "unknown setting '%s'", key);
		return -1;
	}
	p = (char *)c + s->off;
	switch (s->type) {
	case C_STR:
	case C_PATH:
		if (strlen(value) >= s->len - s->reserve ||
		    (s->type == C_PATH && value[0] != '\0' && value[0] != '/') ||
		    (s->check && s->check(value) < 0))
			goto bad;
		snprintf(p, s->len, "%s", value);
		break;
	case C_ENUM:
		for (i = 0; s->enums[i] && strcmp(s->enums[i], value); i++)
			;
		if (s->enums[i] == NULL)
			goto bad;
		snprintf(p, s->len, "%s", value);
		break;
	case C_BOOL:
		if (parse_bool(value, (int *)(void *)p) < 0)
			goto bad;
		break;
	case C_UINT:
	case C_SIZE:
	case C_U64:
		if (parse_uint(value, s->max, &n) < 0 || n < s->min)
			goto bad;
		if (s->type == C_UINT)
			*(unsigned *)(void *)p = (unsigned)n;
		else if (s->type == C_SIZE)
			*(size_t *)(void *)p = (size_t)n;
		else
			*(unsigned long long *)(void *)p = n;
		break;
	}
	/* Scripts append paths to it. */
	if (!strcmp(key, "boot_url") || !strcmp(key, "agent_url"))
		while (strlen(p) > 8 && p[strlen(p) - 1] == '/')
			p[strlen(p) - 1] = '\0';
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
				snprintf(why, whylen, "%s:%d: unknown section [%s]", path, n,
				         trim(s + 1));
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
		snprintf(why, whylen, "listen = %s: expected ADDR:PORT (e.g. 127.0.0.1:8475)",
		         c->listen);
		return -1;
	}
	if (c->max_import_body < c->max_body) {
		snprintf(why, whylen, "max_import_body must be at least max_body");
		return -1;
	}
	if (!c->tls_cert[0] != !c->tls_key[0]) {
		snprintf(why, whylen, "tls_cert and tls_key go together: set both or neither");
		return -1;
	}
	if (c->tls_cert[0] && !strcmp(c->tls, "off")) {
		snprintf(why, whylen, "tls = off, but tls_cert is set: drop one of them");
		return -1;
	}
	if (c->boot_listen[0] && strcmp(c->boot_listen, "off") != 0 &&
	    strcmp(c->boot_listen, c->listen) == 0) {
		snprintf(why, whylen, "boot_listen must differ from listen");
		return -1;
	}
	return 0;
}

void
rp_config_print(const struct rp_config *c, FILE *f)
{
	size_t i;

	fprintf(f, "[server]\n");
	for (i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *p = (const char *)c + s->off;

		fprintf(f, "%s = ", s->key);
		switch (s->type) {
		case C_STR:
		case C_PATH:
		case C_ENUM:
			fprintf(f, "%s\n", p);
			break;
		case C_BOOL:
			fprintf(f, "%s\n", *(const int *)(const void *)p ? "true" : "false");
			break;
		case C_UINT:
			fprintf(f, "%u\n", *(const unsigned *)(const void *)p);
			break;
		case C_SIZE:
			fprintf(f, "%zu\n", *(const size_t *)(const void *)p);
			break;
		case C_U64:
			fprintf(f, "%llu\n", *(const unsigned long long *)(const void *)p);
			break;
		}
	}
}
