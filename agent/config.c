/* Agent configuration: defaults < kernel command line < config file < command-line flags.
 * One table says every key's type, place, default, kernel command line parameter and a line
 * of help; setting, defaults and the doc (docs/agent-protocol.md, checked by
 * tests/unit/test_config.c) all follow it. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"

enum ktype {
	K_STR,  /* a string into a char array; check() may refuse it */
	K_PATH, /* an absolute path */
	K_URL,  /* http:// or https:// */
	K_UINT, /* unsigned in [min, max] */
	K_BOOL, /* rp_bool_parse(): stored as int */
	K_FP    /* a TLS public key fingerprint (rackpilot/tls.h) */
};

struct key {
	const char *key;
	enum ktype type;
	size_t off, len; /* where in struct rp_agent_config; len: bytes of a char array */
	unsigned min, max;
	int (*check)(const char *v); /* K_STR: 0 to accept */
	const char *want;            /* what an error says is expected; NULL: by type */
	/* The kernel command line's parameter for it: a file's value wins over it (file_bit in
	 * file_set), and a malformed one is skipped, with a warning where K_WARN says so. */
	const char *cmdline;
	unsigned file_bit, flags;
	const char *def;   /* the default as docs/agent-protocol.md writes it; NULL: "" or 0 */
	const char *unset; /* what an unset value means there, where not "—" */
	const char *help;  /* one line; the doc's meaning of the key contains it */
};

enum {
	K_WARN = 1u << 0 /* a malformed value on the kernel command line is logged */
};

static int
bootstrap_token(const char *v)
{
	return strncmp(v, RP_TOKEN_PREFIX_BOOTSTRAP, 4) ? -1 : 0;
}

static int
host(const char *v)
{
	return rp_host_valid(v) ? 0 : -1;
}

static int
nonempty(const char *v)
{
	return v[0] ? 0 : -1;
}

#define F(field)                                                                                   \
	.off = offsetof(struct rp_agent_config, field),                                            \
	.len = sizeof(((struct rp_agent_config *)0)->field)

/* In the order of the table in docs/agent-protocol.md. */
static const struct key keys[] = {
        {"url", K_URL, F(url), .want = "an http:// or https:// URL",
         .cmdline = "rackpilot.url=", .file_bit = 1u << 0, .help = "server base URL"},
        {"bootstrap_token", K_STR, F(bootstrap_token), .check = bootstrap_token,
         .want = "a token starting with " RP_TOKEN_PREFIX_BOOTSTRAP,
         .cmdline = "rackpilot.token=", .file_bit = 1u << 1, .help = "for `register`"},
        {"token_file", K_PATH, F(token_file), .unset = "state_dir/token",
         .help = "where the agent token is kept (0600)"},
        {"state_dir", K_PATH, F(state_dir), .def = "/var/lib/rackpilot-agent",
         .help = "lock, token, downloaded images"},
        {"root", K_PATH, F(root), .def = "/", .help = "prefix for `/proc`, `/sys` reads"},
        {"ssh_host_key", K_PATH, F(ssh_host_key), .def = "/etc/ssh/ssh_host_ed25519_key.pub",
         .help = "public key reported at registration"},
        {"ssh_address", K_STR, F(ssh_address), .check = host, .want = "a host name or IP address",
         .help = "reported as `ssh` at registration"},
        {"ssh_port", K_UINT, F(ssh_port), .min = 1, .max = 65535, .want = "a port (1-65535)",
         .help = "reported as `ssh` at registration"},
        {"authorized_keys", K_PATH, F(authorized_keys),
         .help = "registration makes sure the server's key is in this file"},
        {"reboot_command", K_STR, F(reboot_command), .check = nonempty, .want = "a command",
         .def = "/sbin/reboot", .help = "run (detached) by a `reboot` step"},
        {"tls_verify", K_BOOL, F(tls_verify), .want = "true or false", .def = "true",
         .help = "verify the server's certificate"},
        {"ca_file", K_PATH, F(ca_file), .help = "CA bundle for the server"},
        {"server_fingerprint", K_FP, F(server_fingerprint), .want = RP_TLS_FP_WANT,
         .cmdline = "rackpilot.tls_sha256=", .file_bit = 1u << 2, .flags = K_WARN,
         .help = "pin the server's TLS public key"},
        {"heartbeat_s", K_UINT, F(heartbeat_s), .min = 1, .max = 86400, .want = "seconds (1-86400)",
         .unset = "from the server", .help = "heartbeat period of `daemon`"},
};

#define NKEYS (sizeof keys / sizeof keys[0])

static int
parse_uint(const char *v, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long n;

	if (!isdigit((unsigned char)v[0]))
		return -1;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end != '\0' || n < min || n > max)
		return -1;
	*out = (unsigned)n;
	return 0;
}

/* One row's value into c: 0, or -1 with c unchanged. Paths must be absolute: the processes
 * that read them would otherwise depend on the working directory of whoever started the
 * agent. */
static int
apply(struct rp_agent_config *c, const struct key *k, const char *v)
{
	char *p = (char *)c + k->off;

	switch (k->type) {
	case K_URL:
		if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
			return -1;
		break;
	case K_PATH:
		if (v[0] != '/')
			return -1;
		break;
	case K_STR:
		if (k->check && k->check(v) < 0)
			return -1;
		break;
	case K_UINT:
		return parse_uint(v, k->min, k->max, (unsigned *)(void *)p);
	case K_BOOL:
		return rp_bool_parse(v, (int *)(void *)p);
	case K_FP:
		return rp_tls_fingerprint_parse(v, p);
	}
	if (strlen(v) >= k->len)
		return -1;
	memcpy(p, v, strlen(v) + 1);
	return 0;
}

static const struct key *
find(const char *key)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].key, key))
			return &keys[i];
	return NULL;
}

void
rp_agent_config_defaults(struct rp_agent_config *c)
{
	size_t i;

	memset(c, 0, sizeof *c);
	for (i = 0; i < NKEYS; i++)
		/* A default its own row refuses is a bug in the table (test_config catches it). */
		if (keys[i].def && apply(c, &keys[i], keys[i].def) < 0)
			abort();
}

const char *
rp_agent_config_key(size_t i, const char **def, const char **unset, const char **help)
{
	if (i >= NKEYS)
		return NULL;
	*def = keys[i].def ? keys[i].def : "";
	*unset = keys[i].unset ? keys[i].unset : "";
	*help = keys[i].help;
	return keys[i].key;
}

int
rp_agent_config_set(struct rp_agent_config *c, const char *key, const char *value, char *err,
                    size_t errlen)
{
	const struct key *k = find(key);

	if (k == NULL) {
		snprintf(err, errlen, "unknown key '%s'", key);
		return -1;
	}
	if (apply(c, k, value) < 0) {
		snprintf(err, errlen, "invalid value '%s' for %s: expected %s", value, key,
		         k->want ? k->want : "an absolute path");
		return -1;
	}
	return 0;
}

int
rp_agent_config_file(struct rp_agent_config *c, const char *path, int must_exist, char *err,
                     size_t errlen)
{
	struct rp_agent_config tmp = *c;
	char line[8192], msg[512];
	FILE *f;
	int n = 0, rc = -1;

	f = fopen(path, "re");
	if (f == NULL) {
		if (errno == ENOENT && !must_exist)
			return 0;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *k, *v;
		size_t vl;

		n++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line too long", path, n);
			goto out;
		}
		s = rp_str_trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "%s:%d: expected key = value", path, n);
			goto out;
		}
		*eq = '\0';
		k = rp_str_trim(s);
		v = rp_str_trim(eq + 1);
		vl = strlen(v);
		if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
			v[vl - 1] = '\0';
			v++;
		}
		if (rp_agent_config_set(&tmp, k, v, msg, sizeof msg) < 0) {
			snprintf(err, errlen, "%s:%d: %s", path, n, msg);
			goto out;
		}
		tmp.file_set |= find(k)->file_bit;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read %s", path);
		goto out;
	}
	*c = tmp;
	rc = 0;
out:
	fclose(f);
	return rc;
}

void
rp_agent_config_cmdline(struct rp_agent_config *c, const char *cmdline)
{
	char word[4096];
	const char *p = cmdline;
	const struct key *k;

	while (*p) {
		size_t n = 0;
		int quoted = 0;

		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0')
			break;
		/* The kernel lets double quotes protect blanks inside one parameter. */
		while (*p && (quoted || !isspace((unsigned char)*p))) {
			if (*p == '"')
				quoted = !quoted;
			else if (n + 1 < sizeof word)
				word[n++] = *p;
			p++;
		}
		word[n] = '\0';
		/* A malformed value is ignored rather than fatal: the cmdline is the weakest
		 * source and a node must still be able to use its file. */
		for (k = keys; k < keys + NKEYS; k++) {
			size_t pl = k->cmdline ? strlen(k->cmdline) : 0;

			if (pl == 0 || strncmp(word, k->cmdline, pl) || (c->file_set & k->file_bit))
				continue;
			if (apply(c, k, word + pl) < 0 && (k->flags & K_WARN))
				/* A self-signed server fails verification without it: say why. */
				rp_log_warn(
				        "ignoring %s%.100s on the kernel command line: expected %s",
				        k->cmdline, word + pl, k->want);
			break;
		}
	}
}

int
rp_agent_path(const char *root, const char *rel, char *buf, size_t n)
{
	size_t rl = strlen(root);
	int w;

	while (rl > 0 && root[rl - 1] == '/')
		rl--;
	w = snprintf(buf, n, "%.*s%s", (int)rl, root, rel);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

int
rp_agent_read_line(const char *root, const char *rel, char *buf, size_t n)
{
	char path[RP_AGENT_PATH_MAX], *data = NULL, *s, *e;
	int rc = -1;

	if (rp_agent_path(root, rel, path, sizeof path) < 0)
		return -1;
	if (rp_file_read(path, 64 * 1024, &data, NULL) < 0)
		return -1;
	s = data;
	while (isspace((unsigned char)*s))
		s++;
	e = strchr(s, '\n');
	if (e)
		*e = '\0';
	s = rp_str_trim(s);
	if (*s == '\0' || strlen(s) >= n)
		goto out;
	memcpy(buf, s, strlen(s) + 1);
	rc = 0;
out:
	free(data);
	return rc;
}

int
rp_agent_mkdir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) == 0)
		return 0;
	if (errno != EEXIST)
		return -1;
	if (stat(dir, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

int
rp_agent_config_load(struct rp_agent_config *c, const struct rp_agent_flags *flags, char *err,
                     size_t errlen)
{
	struct rp_agent_config tmp;
	char path[RP_AGENT_PATH_MAX], *cmdline = NULL;
	const char *file = flags->config ? flags->config : RP_AGENT_CONF_DEFAULT;

	rp_agent_config_defaults(&tmp);
	if (rp_agent_config_file(&tmp, file, flags->config != NULL, err, errlen) < 0)
		return -1;
	if (flags->root && rp_agent_config_set(&tmp, "root", flags->root, err, errlen) < 0)
		return -1;
	/* The file is read first only to learn root; its url and token still beat the cmdline
	 * because rp_agent_config_cmdline() respects file_set. */
	if (rp_agent_path(tmp.root, "/proc/cmdline", path, sizeof path) == 0 &&
	    rp_file_read(path, 64 * 1024, &cmdline, NULL) == 0) {
		rp_agent_config_cmdline(&tmp, cmdline);
		free(cmdline);
	}
	if (flags->url && rp_agent_config_set(&tmp, "url", flags->url, err, errlen) < 0)
		return -1;
	if (tmp.token_file[0] == '\0' && snprintf(tmp.token_file, sizeof tmp.token_file, "%s/token",
	                                          tmp.state_dir) >= (int)sizeof tmp.token_file) {
		snprintf(err, errlen, "state_dir is too long");
		return -1;
	}
	*c = tmp;
	return 0;
}
