/* Agent configuration: defaults < kernel command line < config file < command-line flags. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"

/* Bit positions in file_set; only the keys the kernel command line also sets need one. */
enum { KEY_URL = 1u << 0, KEY_BOOTSTRAP_TOKEN = 1u << 1, KEY_SERVER_FINGERPRINT = 1u << 2 };

void
rp_agent_config_defaults(struct rp_agent_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->state_dir, sizeof c->state_dir, "/var/lib/rackpilot-agent");
	snprintf(c->root, sizeof c->root, "/");
	snprintf(c->ssh_host_key, sizeof c->ssh_host_key, "/etc/ssh/ssh_host_ed25519_key.pub");
	snprintf(c->reboot_command, sizeof c->reboot_command, "/sbin/reboot");
	c->tls_verify = 1;
}

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

static int
set_str(char *dst, size_t cap, const char *v)
{
	if (strlen(v) >= cap)
		return -1;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* Paths are used as given by the processes that read them, so a relative one would depend
 * on the working directory of whoever started the agent. */
static int
set_path(char *dst, size_t cap, const char *v)
{
	if (v[0] != '/')
		return -1;
	return set_str(dst, cap, v);
}

static int
set_url(char *dst, size_t cap, const char *v)
{
	if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
		return -1;
	return set_str(dst, cap, v);
}

int
rp_agent_config_set(struct rp_agent_config *c, const char *key, const char *value, char *err,
                    size_t errlen)
{
	const char *want = NULL;
	int r;

	if (!strcmp(key, "url")) {
		r = set_url(c->url, sizeof c->url, value);
		want = "an http:// or https:// URL";
	} else if (!strcmp(key, "bootstrap_token")) {
		r = strncmp(value, RP_TOKEN_PREFIX_BOOTSTRAP, 4)
		            ? -1
		            : set_str(c->bootstrap_token, sizeof c->bootstrap_token, value);
		want = "a token starting with " RP_TOKEN_PREFIX_BOOTSTRAP;
	} else if (!strcmp(key, "token_file")) {
		r = set_path(c->token_file, sizeof c->token_file, value);
	} else if (!strcmp(key, "state_dir")) {
		r = set_path(c->state_dir, sizeof c->state_dir, value);
	} else if (!strcmp(key, "root")) {
		r = set_path(c->root, sizeof c->root, value);
	} else if (!strcmp(key, "ssh_host_key")) {
		r = set_path(c->ssh_host_key, sizeof c->ssh_host_key, value);
	} else if (!strcmp(key, "ssh_address")) {
		r = rp_host_valid(value) ? set_str(c->ssh_address, sizeof c->ssh_address, value)
		                         : -1;
		want = "a host name or IP address";
	} else if (!strcmp(key, "ssh_port")) {
		r = parse_uint(value, 1, 65535, &c->ssh_port);
		want = "a port (1-65535)";
	} else if (!strcmp(key, "authorized_keys")) {
		r = set_path(c->authorized_keys, sizeof c->authorized_keys, value);
	} else if (!strcmp(key, "reboot_command")) {
		r = value[0] ? set_str(c->reboot_command, sizeof c->reboot_command, value) : -1;
		want = "a command";
	} else if (!strcmp(key, "tls_verify")) {
		r = parse_bool(value, &c->tls_verify);
		want = "true or false";
	} else if (!strcmp(key, "ca_file")) {
		r = set_path(c->ca_file, sizeof c->ca_file, value);
	} else if (!strcmp(key, "server_fingerprint")) {
		r = rp_tls_fingerprint_parse(value, c->server_fingerprint);
		want = RP_TLS_FP_WANT;
	} else if (!strcmp(key, "heartbeat_s")) {
		r = parse_uint(value, 1, 86400, &c->heartbeat_s);
		want = "seconds (1-86400)";
	} else {
		snprintf(err, errlen, "unknown key '%s'", key);
		return -1;
	}
	if (r < 0) {
		snprintf(err, errlen, "invalid value '%s' for %s: expected %s", value, key,
		         want ? want : "an absolute path");
		return -1;
	}
	return 0;
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
		s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "%s:%d: expected key = value", path, n);
			goto out;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		vl = strlen(v);
		if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
			v[vl - 1] = '\0';
			v++;
		}
		if (rp_agent_config_set(&tmp, k, v, msg, sizeof msg) < 0) {
			snprintf(err, errlen, "%s:%d: %s", path, n, msg);
			goto out;
		}
		if (!strcmp(k, "url"))
			tmp.file_set |= KEY_URL;
		else if (!strcmp(k, "bootstrap_token"))
			tmp.file_set |= KEY_BOOTSTRAP_TOKEN;
		else if (!strcmp(k, "server_fingerprint"))
			tmp.file_set |= KEY_SERVER_FINGERPRINT;
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
		if (!strncmp(word, "rackpilot.url=", 14) && !(c->file_set & KEY_URL))
			set_url(c->url, sizeof c->url, word + 14);
		else if (!strncmp(word, "rackpilot.token=", 16) &&
		         !(c->file_set & KEY_BOOTSTRAP_TOKEN) &&
		         !strncmp(word + 16, RP_TOKEN_PREFIX_BOOTSTRAP, 4))
			set_str(c->bootstrap_token, sizeof c->bootstrap_token, word + 16);
		else if (!strncmp(word, "rackpilot.tls_sha256=", 21) &&
		         !(c->file_set & KEY_SERVER_FINGERPRINT) &&
		         rp_tls_fingerprint_parse(word + 21, c->server_fingerprint) < 0)
			/* Without the pin a self-signed server fails verification: say why. */
			rp_log_warn(
			        "ignoring rackpilot.tls_sha256=%.100s on the kernel command line: "
			        "expected %s",
			        word + 21, RP_TLS_FP_WANT);
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
	s = trim(s);
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
