/* Who this node is (MACs, host key, boot id), registration, heartbeats and the daemon. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "rackpilot/version.h"

#define MACS_MAX            64
#define DEFAULT_HEARTBEAT_S 30
#define BACKOFF_MAX_MS      60000

/* ---- MACs ---------------------------------------------------------------------------- */

static int
mac_usable(const char *name, const char *mac, char out[RP_MAC_BUF])
{
	if (name && !strcmp(name, "lo"))
		return 0;
	if (mac == NULL || rp_mac_normalize(mac, out) < 0)
		return 0;
	return strcmp(out, "00:00:00:00:00:00") != 0;
}

static void
add_unique(json_t *arr, const char *mac)
{
	size_t i;
	json_t *v;

	if (json_array_size(arr) >= MACS_MAX)
		return;
	json_array_foreach(arr, i, v) if (!strcmp(json_string_value(v), mac)) return;
	json_array_append_new(arr, json_string(mac));
}

/* From sysfs: an interface with a `device` link sits on a bus; one without is virtual. */
static void
macs_from_sysfs(const char *root, json_t *phys, json_t *other)
{
	char dir[RP_AGENT_PATH_MAX], rel[512], path[RP_AGENT_PATH_MAX], addr[64], mac[RP_MAC_BUF];
	struct dirent **names = NULL;
	struct stat st;
	int n, i;

	if (rp_agent_path(root, "/sys/class/net", dir, sizeof dir) < 0)
		return;
	n = scandir(dir, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		const char *ifname = names[i]->d_name;

		if (ifname[0] == '.')
			continue;
		snprintf(rel, sizeof rel, "/sys/class/net/%s/address", ifname);
		if (rp_agent_read_line(root, rel, addr, sizeof addr) < 0 ||
		    !mac_usable(ifname, addr, mac))
			continue;
		snprintf(rel, sizeof rel, "/sys/class/net/%s/device", ifname);
		if (rp_agent_path(root, rel, path, sizeof path) == 0 && lstat(path, &st) == 0)
			add_unique(phys, mac);
		else
			add_unique(other, mac);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

json_t *
rp_agent_macs(const json_t *inventory, const char *root)
{
	json_t *phys = json_array(), *other = json_array(), *items, *v;
	char mac[RP_MAC_BUF];
	size_t i;

	items = json_object_get(json_object_get(inventory, "nics"), "items");
	json_array_foreach(items, i, v)
	{
		json_t *pci = json_object_get(v, "pci");

		if (!mac_usable(json_string_value(json_object_get(v, "name")),
		                json_string_value(json_object_get(v, "mac")), mac) ||
		    json_is_true(json_object_get(v, "virtual")))
			continue;
		add_unique(json_is_string(pci) ? phys : other, mac);
	}
	if (json_array_size(phys) == 0 && json_array_size(other) == 0)
		macs_from_sysfs(root, phys, other);
	/* Containers and some test rigs have only virtual interfaces; their MACs still name the
	 * node better than nothing. */
	if (json_array_size(phys) > 0) {
		json_decref(other);
		return phys;
	}
	json_decref(phys);
	return other;
}

/* ---- authorized_keys ----------------------------------------------------------------- */

/* Split an authorized_keys line into words; double quotes (in options) protect blanks. */
static size_t
words(char *line, char **w, size_t max)
{
	size_t n = 0;
	char *p = line;

	while (*p && n < max) {
		int q = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		w[n++] = p;
		while (*p && (q || (*p != ' ' && *p != '\t'))) {
			if (*p == '"')
				q = !q;
			p++;
		}
		if (*p)
			*p++ = '\0';
	}
	return n;
}

int
rp_agent_authorized_keys_add(const char *path, const char *key, char *err, size_t errlen)
{
	char *data = NULL, *line, *save = NULL, *kw[3], kcopy[16384], dcopy[RP_AGENT_PATH_MAX];
	size_t len = 0, nk;
	struct stat st;
	int fd = -1, rc = -1, created = 0;
	char last = '\n';

	if (strlen(key) >= sizeof kcopy || strpbrk(key, "\r\n")) {
		snprintf(err, errlen, "server_ssh_key is not a single key line");
		return -1;
	}
	memcpy(kcopy, key, strlen(key) + 1);
	nk = words(kcopy, kw, 3);
	if (nk < 2) {
		snprintf(err, errlen, "server_ssh_key is not an OpenSSH public key");
		return -1;
	}
	if (rp_file_read(path, 4 * 1024 * 1024, &data, &len) < 0) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		created = 1;
	}
	/* The search below cuts data into words; remember whether the file ends a line. */
	if (len > 0)
		last = data[len - 1];
	for (line = data ? strtok_r(data, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *w[64];
		size_t n = words(line, w, 64), i;

		if (n > 0 && w[0][0] == '#')
			continue;
		for (i = 0; i + 1 < n; i++)
			if (!strcmp(w[i], kw[0]) && !strcmp(w[i + 1], kw[1])) {
				rc = 0;
				goto out;
			}
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	if (created) {
		/* sshd reads the file as the account's user: give it to whoever owns the
		 * directory (root writing into ~user/.ssh). */
		snprintf(dcopy, sizeof dcopy, "%s", path);
		if (geteuid() == 0 && stat(dirname(dcopy), &st) == 0 && st.st_uid != 0 &&
		    fchown(fd, st.st_uid, st.st_gid) < 0) {
			snprintf(err, errlen, "chown %s: %s", path, strerror(errno));
			goto out;
		}
	}
	if ((last != '\n' && write(fd, "\n", 1) != 1) ||
	    write(fd, key, strlen(key)) != (ssize_t)strlen(key) || write(fd, "\n", 1) != 1 ||
	    fsync(fd) < 0) {
		snprintf(err, errlen, "writing %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(data);
	return rc;
}

/* ---- Token --------------------------------------------------------------------------- */

int
rp_agent_token_read(const struct rp_agent_config *cfg, char *buf, size_t n, char *err,
                    size_t errlen)
{
	char tok[256];

	if (rp_agent_read_line("/", cfg->token_file, tok, sizeof tok) < 0) {
		snprintf(err, errlen, "no agent token in %s (not registered?)", cfg->token_file);
		return -1;
	}
	if (strncmp(tok, RP_TOKEN_PREFIX_AGENT, 4) != 0 || strlen(tok) >= n) {
		snprintf(err, errlen, "%s does not hold an agent token", cfg->token_file);
		explicit_bzero(tok, sizeof tok);
		return -1;
	}
	memcpy(buf, tok, strlen(tok) + 1);
	explicit_bzero(tok, sizeof tok);
	return 0;
}

static int
save_token(const struct rp_agent_config *cfg, const char *token, char *err, size_t errlen)
{
	char line[300], dir[RP_AGENT_PATH_MAX];
	int n = snprintf(line, sizeof line, "%s\n", token), fd, rc = -1;

	/* The default token_file lives in state_dir, which nothing may have created yet. */
	rp_agent_mkdir(cfg->state_dir);
	if (rp_file_write_private(cfg->token_file, line, (size_t)n, 0600) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", cfg->token_file, strerror(errno));
		goto out;
	}
	/* The rename is durable only once the directory is. */
	snprintf(dir, sizeof dir, "%s", cfg->token_file);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	rc = 0;
out:
	explicit_bzero(line, sizeof line);
	return rc;
}

/* ---- Register and heartbeat ---------------------------------------------------------- */

static void
hostname_of(const char *root, char *buf, size_t n)
{
	if (rp_agent_read_line(root, "/proc/sys/kernel/hostname", buf, n) == 0)
		return;
	if (gethostname(buf, n) < 0 || buf[0] == '\0')
		snprintf(buf, n, "localhost");
	buf[n - 1] = '\0';
}

long
rp_agent_register(const struct rp_agent_config *cfg, struct rp_agent_client *cl, json_t **answer,
                  char *err, size_t errlen)
{
	char host[256], boot[64], key[16384], why[1024];
	const char *token, *server_key;
	json_t *inv = NULL, *macs = NULL, *body = NULL, *ans = NULL;
	long st = RP_AGENT_ELOCAL;

	if (cfg->bootstrap_token[0] == '\0') {
		snprintf(err, errlen, "no bootstrap token (bootstrap_token or rackpilot.token=)");
		return RP_AGENT_ELOCAL;
	}
	hostname_of(cfg->root, host, sizeof host);
	if (rp_agent_read_line(cfg->root, "/proc/sys/kernel/random/boot_id", boot, sizeof boot) <
	    0) {
		snprintf(err, errlen, "cannot read boot_id under %s", cfg->root);
		goto out;
	}
	if (rp_agent_read_line("/", cfg->ssh_host_key, key, sizeof key) < 0) {
		snprintf(err, errlen, "cannot read the SSH host key %s", cfg->ssh_host_key);
		goto out;
	}
	inv = rp_agent_inventory(cfg->root);
	if (inv == NULL) {
		snprintf(err, errlen, "out of memory collecting the inventory");
		goto out;
	}
	macs = rp_agent_macs(inv, cfg->root);
	if (json_array_size(macs) == 0) {
		snprintf(err, errlen, "no network interface with a MAC address under %s",
		         cfg->root);
		goto out;
	}
	body = json_pack("{s:i, s:s, s:s, s:s, s:O, s:s, s:O}", "format", RP_AGENT_FORMAT,
	                 "agent_version", RP_VERSION, "hostname", host, "boot_id", boot, "macs",
	                 macs, "ssh_host_key", key, "inventory", inv);
	if (body == NULL) {
		snprintf(err, errlen, "cannot build the registration (hostname not UTF-8?)");
		goto out;
	}
	if (cfg->ssh_address[0])
		json_object_set_new(body, "ssh",
		                    json_pack("{s:s, s:i}", "address", cfg->ssh_address, "port",
		                              cfg->ssh_port ? (int)cfg->ssh_port : 22));
	st = rp_agent_call(cl, "POST", "/v1/agent/register", cfg->bootstrap_token, body, &ans, err,
	                   errlen);
	if (st < 200 || st > 299)
		goto out;
	st = RP_AGENT_EPROTO;
	token = json_string_value(json_object_get(ans, "token"));
	if (token == NULL || strncmp(token, RP_TOKEN_PREFIX_AGENT, 4) || strlen(token) > 255 ||
	    strpbrk(token, " \t\r\n")) {
		snprintf(err, errlen, "the registration answer has no agent token");
		goto out;
	}
	st = RP_AGENT_ELOCAL;
	if (save_token(cfg, token, err, errlen) < 0)
		goto out;
	server_key = json_string_value(json_object_get(ans, "server_ssh_key"));
	if (cfg->authorized_keys[0] && server_key && server_key[0] &&
	    rp_agent_authorized_keys_add(cfg->authorized_keys, server_key, why, sizeof why) < 0) {
		snprintf(err, errlen, "registered, but the server's SSH key: %s", why);
		goto out;
	}
	/* Nobody but the token file should keep the secret. */
	json_object_del(ans, "token");
	*answer = ans;
	ans = NULL;
	st = 0;
out:
	json_decref(ans);
	json_decref(body);
	json_decref(macs);
	json_decref(inv);
	return st;
}

long
rp_agent_heartbeat(const struct rp_agent_config *cfg, struct rp_agent_client *cl, const char *token,
                   json_t **answer, char *err, size_t errlen)
{
	char boot[64], up[128];
	json_t *body, *ans = NULL;
	long st;

	if (rp_agent_read_line(cfg->root, "/proc/sys/kernel/random/boot_id", boot, sizeof boot) <
	    0) {
		snprintf(err, errlen, "cannot read boot_id under %s", cfg->root);
		return RP_AGENT_ELOCAL;
	}
	if (rp_agent_read_line(cfg->root, "/proc/uptime", up, sizeof up) < 0)
		snprintf(up, sizeof up, "0");
	body = json_pack("{s:s, s:s, s:s, s:I}", "boot_id", boot, "agent_version", RP_VERSION,
	                 "status", rp_agent_busy(cfg) ? "busy" : "idle", "uptime_s",
	                 (json_int_t)strtoll(up, NULL, 10));
	if (body == NULL) {
		snprintf(err, errlen, "out of memory");
		return RP_AGENT_ELOCAL;
	}
	st = rp_agent_call(cl, "POST", "/v1/agent/heartbeat", token, body, &ans, err, errlen);
	json_decref(body);
	if (st < 200 || st > 299)
		return st;
	*answer = ans;
	return 0;
}

/* ---- daemon -------------------------------------------------------------------------- */

static void
on_stop(int sig)
{
	(void)sig;
	rp_agent_stopping = 1;
}

static unsigned
period_from(const struct rp_agent_config *cfg, json_t *ans, unsigned current)
{
	json_int_t s = json_integer_value(json_object_get(ans, "heartbeat_s"));

	if (cfg->heartbeat_s)
		return cfg->heartbeat_s;
	return s >= 1 && s <= 86400 ? (unsigned)s : current;
}

int
rp_agent_daemon(const struct rp_agent_config *cfg)
{
	struct sigaction sa = {.sa_handler = on_stop};
	struct rp_agent_client *cl;
	unsigned period = cfg->heartbeat_s ? cfg->heartbeat_s : DEFAULT_HEARTBEAT_S;
	int64_t backoff = 1000;
	int rejected = 0;
	char token[256], err[2048];

	/* No SA_RESTART: a stop request should cut a sleep short. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	cl = rp_agent_client_new(cfg);
	if (cl == NULL) {
		rp_log_error("out of memory");
		return 1;
	}
	rp_log_info("rackpilot-agent %s: heartbeats to %s", RP_VERSION, cfg->url);
	while (!rp_agent_stopping) {
		json_t *ans = NULL;
		long st;

		if (!rejected &&
		    rp_agent_token_read(cfg, token, sizeof token, err, sizeof err) == 0) {
			st = rp_agent_heartbeat(cfg, cl, token, &ans, err, sizeof err);
			explicit_bzero(token, sizeof token);
			if (st == 0) {
				period = period_from(cfg, ans, period);
				json_decref(ans);
				backoff = 1000;
				rp_agent_sleep_ms((int64_t)period * 1000);
			} else if (st == 401) {
				rp_log_warn("heartbeat: the agent token was refused: %s", err);
				rejected = 1;
			} else if (rp_agent_transient(st)) {
				rp_log_warn("heartbeat: %s; next try in %lld s", err,
				            (long long)backoff / 1000);
				rp_agent_sleep_ms(backoff);
				backoff =
				        backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			} else {
				rp_log_error("heartbeat: %s", err);
				rp_agent_sleep_ms((int64_t)period * 1000);
			}
			continue;
		}
		/* No usable token: register. Afterwards the token file is read again, so a
		 * token written by a manual `register` is picked up too. */
		rejected = 0;
		if (cfg->bootstrap_token[0] == '\0') {
			rp_log_error(
			        "no usable agent token and no bootstrap token; register with a "
			        "new bootstrap token");
			rp_agent_sleep_ms((int64_t)period * 1000);
			continue;
		}
		st = rp_agent_register(cfg, cl, &ans, err, sizeof err);
		if (st == 0) {
			rp_log_info("registered as node %s (%s)",
			            json_string_value(
			                    json_object_get(json_object_get(ans, "node"), "name")),
			            json_string_value(
			                    json_object_get(json_object_get(ans, "node"), "id")));
			period = period_from(cfg, ans, period);
			json_decref(ans);
			backoff = 1000;
		} else if (rp_agent_transient(st)) {
			rp_log_warn("register: %s; next try in %lld s", err,
			            (long long)backoff / 1000);
			rp_agent_sleep_ms(backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
		} else {
			rp_log_error(
			        "register: %s%s", err,
			        st == 401 ? "; the bootstrap token is used or expired: this node "
			                    "needs a new one"
			                  : "");
			rp_agent_sleep_ms((int64_t)period * 1000);
		}
	}
	rp_log_info("stopping");
	rp_agent_client_free(cl);
	return 0;
}
