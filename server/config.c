/* INI configuration with compiled-in defaults: one table says every setting's key, type,
 * range, place, default and a line of help, and setting, defaults, printing (`rackpilotd -n`)
 * and documenting (docs/rackpilotd.conf, checked by tests/unit/test_config.c) all read it. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http/http.h"
#include "store/store.h"
#include "util/util.h"

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
	unsigned flags;              /* S_*: what a row does beyond its type */
	const char *def;  /* the default as docs/rackpilotd.conf writes it; NULL: "" or 0 */
	const char *help; /* one line; the doc's text about the key contains it */
};

enum {
	S_NOSLASH = 1u << 0, /* trailing slashes dropped: scripts append paths to it */
	S_SECRET = 1u << 1   /* may hold a password: printed without it */
};

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const console_modes[] = {"active", "always", "off", NULL};
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

/* A job lease's owner: letters, digits, '.', '-', '_' (a host name fits), at most 63. */
static int
server_name(const char *v)
{
	size_t n = strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");

	return v[n] == '\0' && n < 64 ? 0 : -1;
}

/* Empty (SQLite in data_dir), or a PostgreSQL connection string: a postgresql:// or
 * postgres:// URI, or libpq's key=value form. */
static int
database_url(const char *v)
{
	return v[0] == '\0' || rp_store_is_url(v) ? 0 : -1;
}

/* v without its password: the user:password@ of a URI loses ":password", and a password=
 * parameter (URI or key=value) its value. */
static void
redact(const char *v, char *out, size_t len)
{
	const char *scheme = strstr(v, "://"), *at, *colon;
	char *pw;
	size_t n;

	snprintf(out, len, "%s", v);
	if (scheme && (at = strchr(scheme + 3, '@')) != NULL &&
	    (colon = memchr(scheme + 3, ':', (size_t)(at - scheme - 3))) != NULL &&
	    !memchr(scheme + 3, '/', (size_t)(at - scheme - 3)))
		snprintf(out, len, "%.*s%s", (int)(colon - v), v, at);
	if ((pw = strstr(out, "password=")) != NULL) {
		n = strcspn(pw + 9, "& ");
		memmove(pw + 9 + 3, pw + 9 + n, strlen(pw + 9 + n) + 1);
		memcpy(pw + 9, "***", 3);
	}
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

#define F(field)                                                                                   \
	.off = offsetof(struct rp_config, field), .len = sizeof(((struct rp_config *)0)->field)

/* In the order of docs/rackpilotd.conf and of `rackpilotd -n`. */
static const struct setting settings[] = {
        {"listen", C_STR, F(listen), .check = nonempty, .def = "127.0.0.1:8475",
         .help = "Address and port to listen on."},
        {"data_dir", C_STR, F(data_dir), .check = nonempty, .reserve = 32, .def = "./var",
         .help = "Holds the SQLite database (rackpilot.db), the secret key (secret.key), the "
                 "SSH and TLS keys and, on first start, admin.token."},
        {"database", C_STR, F(database), .check = database_url, .flags = S_SECRET,
         .help = "PostgreSQL to keep everything in, several servers sharing it: a libpq "
                 "connection string (postgresql://user@host/dbname, the password from "
                 "PGPASSFILE or the string, never logged); empty: SQLite in data_dir."},
        {"db_connections", C_UINT, F(db_connections), .min = 2, .max = 1024, .def = "16",
         .help = "Connections this server keeps to the database at most: each store call "
                 "takes one for its length (a job waiting on a BMC holds none); writers "
                 "queue for one write turn without one."},
        {"server_name", C_STR, F(server_name), .check = server_name,
         .help = "This server's name among those that share a database: the jobs it runs are "
                 "leased to it under this name. Empty: the host name."},
        {"threads", C_UINT, F(threads), .max = 256, .def = "0",
         .help = "HTTP worker threads; 0 means one per online CPU."},
        {"max_body", C_SIZE, F(max_body), .min = 1024, .max = 1ULL << 30, .def = "1M",
         .help = "Largest request body accepted, in bytes (K, M and G suffixes work)."},
        {"max_import_body", C_SIZE, F(max_import_body), .min = 1024, .max = 4ULL << 30,
         .def = "64M", .help = "Largest body for POST /v1/import (a manifest of a whole site)."},
        {"max_inventory", C_SIZE, F(max_inventory), .min = 64 << 10, .max = 1ULL << 30, .def = "4M",
         .help = "Largest agent inventory (POST /v1/agent/inventory, and the one a "
                 "registration carries)."},
        {"connection_timeout", C_UINT, F(conn_timeout_s), .min = 1, .max = 86400, .def = "60",
         .help = "Seconds an idle client connection is kept open."},
        {"connection_limit", C_UINT, F(conn_limit), .min = 1, .max = 1000000, .def = "4096",
         .help = "Simultaneous client connections."},
        {"max_streams_per_token", C_UINT, F(max_streams_per_token), .min = 1, .max = 256,
         .def = "16",
         .help = "Event streams (GET /v1/events/stream) one token may hold open; more: 429."},
        {"access_log", C_BOOL, F(access_log), .def = "true",
         .help = "One log line per request (method, path, status, duration, request id, token "
                 "name)."},
        {"log_level", C_ENUM, F(log_level), .enums = log_levels, .def = "info",
         .help = "error, warn, info or debug."},
        {"tls", C_ENUM, F(tls), .enums = tls_modes, .def = "auto",
         .help = "HTTPS on the API. auto: on unless `listen` is a loopback address."},
        {"tls_cert", C_PATH, F(tls_cert), .help = "The certificate (PEM, chain allowed)"},
        {"tls_key", C_PATH, F(tls_key), .help = "its unencrypted private key"},
        {"secret_key", C_PATH, F(secret_key), .reserve = 8,
         .help = "The key file that seals the BMC passwords in the database"},
        {"job_workers", C_UINT, F(job_workers), .min = 1, .max = 1024, .def = "32",
         .help = "BMC jobs (power, boot, verify) that run at once."},
        {"job_lease", C_UINT, F(job_lease), .min = 3, .max = 3600, .def = "30",
         .help = "Seconds a running job's lease lasts; its server renews it every third of "
                 "that. A job whose lease has run out is taken over (verified, not repeated)."},
        {"power_sync_interval", C_UINT, F(power_sync_interval), .max = 86400, .def = "60",
         .help = "Seconds between power-state sweeps of every node with a BMC (shared out "
                 "between the servers of a database); 0 turns the sweep off."},
        {"power_sync_concurrency", C_UINT, F(power_sync_concurrency), .min = 1, .max = 4096,
         .def = "64", .help = "BMCs a sweep reads at once."},
        {"sensor_sync_interval", C_UINT, F(sensor_sync_interval), .max = 86400, .def = "60",
         .help = "Seconds between sensor sweeps (power draw, temperatures, fans, PSUs) of every "
                 "node with a BMC (shared out as the power sweep is); 0 turns the sweep off."},
        {"sensor_history_hours", C_UINT, F(sensor_history_hours), .max = 24 * 366, .def = "24",
         .help = "Hours of sensor samples kept per node (a sample when a value moves past its dead "
                 "band, or every hour); 0 keeps them for good."},
        {"sensor_history_max_rows", C_UINT, F(sensor_history_max_rows), .max = 2000000000,
         .def = "15000000",
         .help = "Sensor samples kept at most (about 40 bytes each): past it, the oldest go "
                 "before sensor_history_hours is up; 0: no cap."},
        {"rack_history_days", C_UINT, F(rack_history_days), .max = 3650, .def = "30",
         .help = "Days of rack power totals kept (a peak and a latest value per 5 minutes); 0 "
                 "keeps them for good."},
        {"power_on_stagger", C_UINT, F(power_on_stagger), .max = 10000, .def = "8",
         .help = "Nodes per rack whose power-on is in flight at once (admission: docs/power.md); "
                 "0: no cap."},
        {"power_on_stagger_ms", C_UINT, F(power_on_stagger_ms), .max = 600000, .def = "250",
         .help = "Milliseconds between two power-ons in a rack, for inrush."},
        {"power_on_settle", C_UINT, F(power_on_settle), .max = 3600, .def = "20",
         .help = "Seconds after a power-on from which a sensor read measures the node: until "
                 "then its class's max_power_w stands for it in its rack's projection."},
        {"drive_temp_warning", C_UINT, F(drive_temp_warning), .max = 200, .def = "70",
         .help = "Degrees Celsius at which a drive whose BMC gives no upper warning of its own "
                 "is in warning; 0: only the BMC's thresholds."},
        {"console_log", C_ENUM, F(console_log), .enums = console_modes, .def = "active",
         .help = "Which serial consoles (IPMI SOL) are kept open and logged: active (while a node "
                 "is verified, commissioned, deployed, released or accepted), always, or off; a "
                 "node's console_log overrides it."},
        {"console_max_sessions", C_UINT, F(console_max_sessions), .min = 1, .max = 4096,
         .def = "64", .help = "Serial console (SOL) sessions open at once, logged or viewed."},
        {"console_log_bytes", C_SIZE, F(console_log_bytes), .min = 64 << 10, .max = 1ULL << 30,
         .def = "8M",
         .help = "One node's console log on disk (the latest lines; two files, each half)."},
        {"console_idle_timeout", C_UINT, F(console_idle_timeout), .max = 86400 * 7, .def = "3600",
         .help = "Seconds without input after which the console's writer is disconnected; 0: "
                 "never."},
        {"bmc_fault_threshold", C_UINT, F(bmc_fault_threshold), .min = 1, .max = 1000, .def = "3",
         .help = "Failed contacts in a row before a node's BMC is marked faulty (cleared by a "
                 "success)."},
        {"retention_days", C_UINT, F(retention_days), .max = 36500, .def = "90",
         .help = "Days events, the logs of ended jobs, and expired or revoked API tokens are "
                 "kept; 0 keeps them for good."},
        {"webhook_timeout", C_UINT, F(webhook_timeout), .min = 1, .max = 300, .def = "10",
         .help = "Seconds one webhook POST may take (connecting and the answer); past it, the "
                 "delivery is tried again."},
        {"webhook_max_age", C_UINT, F(webhook_max_age), .min = 1, .max = 30 * 86400, .def = "86400",
         .help = "Seconds a webhook delivery is retried after its event; then it is given up "
                 "(event webhook.gave_up) and the webhook's next one goes."},
        {"webhook_ca_file", C_PATH, F(webhook_ca_file),
         .help = "CA certificates (PEM) that https webhook receivers are verified with"},
        {"webhook_proxy", C_STR, F(webhook_proxy),
         .help = "An HTTP proxy for webhook POSTs (http://host:port)"},
        {"ssh_workers", C_UINT, F(ssh_workers), .min = 1, .max = 4096, .def = "64",
         .help = "Step plans (pushed to node agents over SSH) that run at once."},
        {"agent_heartbeat", C_UINT, F(agent_heartbeat), .min = 5, .max = 3600, .def = "30",
         .help = "Seconds between an agent's heartbeats (sent to agents at registration)."},
        {"agent_command", C_STR, F(agent_command), .check = plain_command, .def = "rackpilot-agent",
         .help = "The command rackpilotd runs over SSH on a node (plain words only, no shell "
                 "syntax)."},
        {"image_dir", C_PATH, F(image_dir), .reserve = 32,
         .help = "Where the image store keeps its files (kernels, initrds, OS and firmware "
                 "images)."},
        {"boot_listen", C_STR, F(boot_listen), .check = listen_or_off,
         .help = "A plain-HTTP listener for the boot endpoints only (/boot/ipxe, "
                 "/boot/images/*)"},
        {"boot_url", C_STR, F(boot_url), .check = script_url, .flags = S_NOSLASH,
         .help = "Base URL written into iPXE scripts for the kernel and initrd, as the nodes "
                 "reach this server."},
        {"agent_url", C_STR, F(agent_url), .check = script_url, .flags = S_NOSLASH,
         .help = "Where the agent reaches the API (the scripts' rackpilot.url=)."},
        {"boot_rate", C_UINT, F(boot_rate), .max = 100000, .def = "20",
         .help = "Requests per second (and the burst) one address may make to the endpoints "
                 "that take no token"},
        {"boot_burst", C_UINT, F(boot_burst), .min = 1, .max = 100000, .def = "100",
         .help = "(and the burst) one address may make to the endpoints that take no token"},
        {"boot_source_check", C_BOOL, F(boot_source_check), .def = "false",
         .help = "A boot script's bootstrap token registers only from the address that "
                 "fetched the script"},
        {"discovery", C_BOOL, F(discovery), .def = "true",
         .help = "Unknown MACs that network-boot get the agent ramdisk with a discovery token "
                 "and show up as `discovered` nodes"},
        {"discovery_max_tokens", C_UINT, F(discovery_max_tokens), .min = 1, .max = 100000,
         .def = "64", .help = "MACs that may hold a live discovery token at once"},
        {"discovery_max_per_source", C_UINT, F(discovery_max_per_source), .max = 100000, .def = "4",
         .help = "how many one source address may hold (0: no limit)"},
        {"discovery_max_nodes", C_UINT, F(discovery_max_nodes), .max = 1000000, .def = "1000",
         .help = "No new discovery while this many `discovered` nodes wait for an operator to "
                 "adopt or delete them"},
        {"bootstrap_ttl", C_UINT, F(bootstrap_ttl), .min = 30, .max = 7 * 86400, .def = "900",
         .help = "Seconds a bootstrap token in an iPXE script stays good"},
        {"provision_timeout", C_UINT, F(provision_timeout), .min = 30, .max = 7 * 86400,
         .def = "1800",
         .help = "Default seconds a commission, deploy or release waits for the node's agent "
                 "to register."},
        {"deploy_boot_timeout", C_UINT, F(deploy_boot_timeout), .min = 30, .max = 7 * 86400,
         .def = "1800",
         .help = "Default seconds a deploy waits, once the node boots its disk, for the "
                 "deployed OS to report its first boot."},
        {"max_upload", C_U64, F(max_upload), .min = 1024, .max = 1ULL << 50, .def = "64G",
         .help = "Largest image upload (PUT /v1/images/{name})"},
        {"dnsmasq_hosts", C_PATH, F(dnsmasq_hosts),
         .help = "dnsmasq's dhcp-hostsfile, kept current by rackpilotd"},
        {"dnsmasq_pidfile", C_PATH, F(dnsmasq_pidfile),
         .help = "the pid file of the dnsmasq to send SIGHUP after each change"},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

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

/* One row's value into c: 0, or -1 when the row refuses it (c may then be changed). */
static int
apply(struct rp_config *c, const struct setting *s, const char *value)
{
	char *p = (char *)c + s->off;
	unsigned long long n;

	switch (s->type) {
	case C_STR:
	case C_PATH:
		if (strlen(value) >= s->len - s->reserve ||
		    (s->type == C_PATH && value[0] != '\0' && value[0] != '/') ||
		    (s->check && s->check(value) < 0))
			return -1;
		snprintf(p, s->len, "%s", value);
		break;
	case C_ENUM:
		if (rp_str_index(s->enums, value) < 0)
			return -1;
		snprintf(p, s->len, "%s", value);
		break;
	case C_BOOL:
		if (rp_bool_parse(value, (int *)(void *)p) < 0)
			return -1;
		break;
	case C_UINT:
	case C_SIZE:
	case C_U64:
		if (parse_uint(value, s->max, &n) < 0 || n < s->min)
			return -1;
		if (s->type == C_UINT)
			*(unsigned *)(void *)p = (unsigned)n;
		else if (s->type == C_SIZE)
			*(size_t *)(void *)p = (size_t)n;
		else
			*(unsigned long long *)(void *)p = n;
		break;
	}
	if (s->flags & S_NOSLASH)
		while (strlen(p) > 8 && p[strlen(p) - 1] == '/')
			p[strlen(p) - 1] = '\0';
	return 0;
}

void
rp_config_defaults(struct rp_config *c)
{
	size_t i;

	memset(c, 0, sizeof *c);
	for (i = 0; i < NSETTINGS; i++)
		/* A default its own row refuses is a bug in the table (test_config catches it). */
		if (settings[i].def && apply(c, &settings[i], settings[i].def) < 0)
			abort();
}

const char *
rp_config_key(size_t i, const char **def, const char **help)
{
	if (i >= NSETTINGS)
		return NULL;
	*def = settings[i].def ? settings[i].def : "";
	*help = settings[i].help;
	return settings[i].key;
}

int
rp_config_set(struct rp_config *c, const char *key, const char *value, char *why, size_t whylen)
{
	size_t i;

	for (i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].key, key) == 0)
			break;
	if (i == NSETTINGS) {
		snprintf(why, whylen, "unknown setting '%s'", key);
		return -1;
	}
	if (apply(c, &settings[i], value) < 0) {
		snprintf(why, whylen, "invalid value '%s' for %s", value, key);
		return -1;
	}
	return 0;
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
		char *s = rp_str_trim(line), *eq, *k, *v;

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
			in_server = strcmp(rp_str_trim(s + 1), "server") == 0;
			if (!in_server) {
				snprintf(why, whylen, "%s:%d: unknown section [%s]", path, n,
				         rp_str_trim(s + 1));
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
		k = rp_str_trim(s);
		v = rp_str_trim(eq + 1);
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
			if (s->flags & S_SECRET) {
				char shown[1100];

				redact(p, shown, sizeof shown);
				fprintf(f, "%s\n", shown);
			} else {
				fprintf(f, "%s\n", p);
			}
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
