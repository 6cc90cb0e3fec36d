/* The server the API harnesses drive: see fuzz_server.h. */
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "api/api.h"
#include "bmc/bmc.h"
#include "fuzz_server.h"
#include "http/http.h"
#include "jobs/jobs.h"
#include "rackpilot/agent.h"
#include "ssh/ssh.h"
#include "store/store.h"
#include "util/util.h"

static char keydir[64];  /* survives resets: the sealing key and the SSH key */
static char datadir[64]; /* recreated by resets */
static char imgdir[96], updir[128];
static struct rp_secrets *secrets;
static struct rp_ssh_key *sshkey;
static struct rp_store *st;
static struct rp_jobs *jobs;
static struct rp_api api;
static struct rp_http *http;
static unsigned port;
static char admin_auth[RP_TOKEN_BUF + 16], agent_auth[RP_TOKEN_BUF + 16], agent_node[64],
        agent_job[64];
static unsigned runs;
static int started;

/* Fuzzed node records name BMC and SSH addresses anywhere; the job workers behind them must
 * only ever reach loopback. The executable's connect() comes before libc's for every
 * library (libcurl, libfreeipmi, libssh). */
int connect(int fd, const struct sockaddr *sa, socklen_t len);

int
connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);

	if (real == NULL)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT,
		                                                               "connect");
	if (sa && sa->sa_family == AF_INET &&
	    (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) != 127) {
		errno = ENETUNREACH;
		return -1;
	}
	if (sa && sa->sa_family == AF_INET6 &&
	    !IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr)) {
		errno = ENETUNREACH;
		return -1;
	}
	return real(fd, sa, len);
}

/* Fuzzed fake BMCs may pause up to a minute per call (options.delay_ms), and a reset waits
 * for the job workers: no sleep in this process lasts more than 3 s, so a reset stays well
 * within libFuzzer's -timeout. (3 s still outlasts the acceptance engine's 2 s look-again.) */
int nanosleep(const struct timespec *req, struct timespec *rem);

int
nanosleep(const struct timespec *req, struct timespec *rem)
{
	static int (*real)(const struct timespec *, struct timespec *);
	struct timespec capped;

	if (real == NULL)
		real = (int (*)(const struct timespec *, struct timespec *))dlsym(RTLD_NEXT,
		                                                                  "nanosleep");
	if (req && req->tv_sec >= 3) {
		capped.tv_sec = 3;
		capped.tv_nsec = 0;
		req = &capped;
	}
	return real(req, rem);
}

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

static void
die(const char *what)
{
	fprintf(stderr, "fuzz server: %s\n", what);
	abort();
}

static void
start(void)
{
	char path[128], why[256], secret[RP_TOKEN_BUF], hash[RP_SHA256_HEX];
	struct rp_jobs_opts jo;
	struct rp_http_opts ho;
	struct fz_reply r = {0};
	json_t *j;
	int created = 0;

	if (mkdir(datadir, 0700) < 0 && errno != EEXIST)
		die("mkdir");
	snprintf(path, sizeof path, "%s/images", datadir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/images/.incoming", datadir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/rackpilot.db", datadir);
	if (rp_store_open(path, &st, why, sizeof why) != RP_ERR_OK)
		die(why);
	rp_store_set_secrets(st, secrets);
	if (rp_store_secrets_prepare(st, 0, why, sizeof why) != RP_ERR_OK)
		die(why);
	if (rp_token_new(RP_TOKEN_PREFIX_API, secret) < 0)
		die("token");
	rp_sha256_hex(secret, strlen(secret), hash);
	if (rp_store_token_bootstrap(st, hash, &created) != RP_ERR_OK || !created)
		die("admin token");
	snprintf(admin_auth, sizeof admin_auth, "Bearer %s", secret);

	rp_jobs_defaults(&jo);
	jo.image_dir = imgdir;
	jo.workers = 2;
	jo.ssh_workers = 1;
	jo.ssh_key = sshkey;
	jo.sweep_interval_s = 0;
	jo.ssh_connect_timeout_s = 1;
	jo.power_wait_s = 1;
	jo.retry_base_ms = 60000;
	if (rp_jobs_start(st, &jo, &jobs, why, sizeof why) < 0)
		die(why);

	api.store = st;
	api.jobs = jobs;
	api.ssh_public_key = rp_ssh_key_public(sshkey);
	api.agent_heartbeat_s = 30;
	api.image_dir = jo.image_dir;
	api.boot_url = "";
	api.discovery = 1;
	api.discovery_max = 64;
	api.discovery_per_source = 0;
	api.discovery_max_nodes = 64;
	api.agent_url = "";
	api.max_streams_per_token = 4;
	api.bootstrap_ttl_s = 3600;
	api.provision_timeout_s = 60;
	api.started_at = rp_time_now_ms();
	api.max_body = 1 << 20;
	if (api.metrics == NULL)
		api.metrics = rp_metrics_new(rp_api_route_count);
	if (api.auth_cache == NULL)
		api.auth_cache = rp_memo_new(64);
	if (api.get_cache == NULL)
		api.get_cache = rp_memo_new(256);
	if (api.metrics == NULL || api.auth_cache == NULL || api.get_cache == NULL)
		die("api caches");
	rp_api_tls_pin_set(&api, NULL);

	memset(&ho, 0, sizeof ho);
	ho.listen = "127.0.0.1:0";
	ho.threads = 1;
	ho.max_body = 1 << 20;
	ho.max_import_body = 4 << 20;
	ho.max_inventory = 1 << 20;
	ho.conn_timeout_s = 5;
	ho.conn_limit = 64;
	ho.max_upload = 1 << 20;
	ho.upload_dir = updir; /* the daemon keeps the pointer */
	if (rp_http_start(&ho, &api, &http, why, sizeof why) < 0)
		die(why);
	{
		char host[64];

		if (rp_http_parse_listen(rp_http_address(http), host, sizeof host, &port) < 0)
			die("address");
	}

	/* An agent token: a discovery bootstrap token, then a registration like an agent's. */
	if (rp_token_new(RP_TOKEN_PREFIX_BOOTSTRAP, secret) < 0)
		die("token");
	rp_sha256_hex(secret, strlen(secret), hash);
	j = NULL;
	if (rp_store_bootstrap_create(st, NULL, hash, rp_time_now_ms() + 3600000, "fuzz", &j) !=
	    RP_ERR_OK)
		die("bootstrap token");
	json_decref(j);
	{
		char auth[RP_TOKEN_BUF + 32];
		const char *h[] = {auth, "Content-Type: application/json", NULL};
		const char *body =
		        "{\"format\":1,\"agent_version\":\"0.1.0\",\"hostname\":\"fuzz-node\","
		        "\"boot_id\":\"5c6f0a2e-0000-4000-8000-000000000001\","
		        "\"macs\":[\"3c:ec:ef:00:00:01\"],"
		        "\"ssh_host_key\":\"ssh-ed25519 "
		        "AAAAC3NzaC1lZDI1NTE5AAAAIHx0WbZxLKlBY0oRf3ZbOwHV5ehvCqE5Ng3dFbrN1N4O "
		        "root@fuzz\","
		        "\"ssh\":{\"address\":\"127.0.0.1\",\"port\":1}}";
		json_t *rep;

		snprintf(auth, sizeof auth, "Authorization: Bearer %s", secret);
		if (fz_request("POST", "/v1/agent/register", h, body, strlen(body), &r) < 0 ||
		    r.status != 200)
			die(r.body ? r.body : "register");
		rep = json_loads(r.body, 0, NULL);
		if (rep == NULL || !json_is_string(json_object_get(rep, "token")))
			die("register reply");
		snprintf(agent_auth, sizeof agent_auth, "Bearer %s",
		         json_string_value(json_object_get(rep, "token")));
		snprintf(agent_node, sizeof agent_node, "%s",
		         json_string_value(json_object_get(json_object_get(rep, "node"), "id")));
		json_decref(rep);
		fz_reply_clear(&r);
	}
	/* A steps job of that node, for the agent's job and step routes. */
	{
		char auth[RP_TOKEN_BUF + 32], target[128];
		const char *h[] = {auth, "Content-Type: application/json", NULL};
		const char *body =
		        "{\"steps\":[{\"id\":\"a\",\"type\":\"shell\",\"command\":\"true\"},"
		        "{\"id\":\"b\",\"type\":\"reboot\"},{\"id\":\"c\",\"type\":"
		        "\"inventory\"}]}";
		json_t *rep;

		snprintf(auth, sizeof auth, "Authorization: %s", admin_auth);
		snprintf(target, sizeof target, "/v1/nodes/%s/steps", agent_node);
		if (fz_request("POST", target, h, body, strlen(body), &r) < 0 || r.status != 202)
			die(r.body ? r.body : "steps job");
		rep = json_loads(r.body, 0, NULL);
		snprintf(agent_job, sizeof agent_job, "%s",
		         json_string_value(json_object_get(rep, "id")) ?: "none");
		json_decref(rep);
		fz_reply_clear(&r);
	}
}

const char *
fz_agent_job(void)
{
	return agent_job;
}

void
fz_agent_auth_set(const char *token)
{
	snprintf(agent_auth, sizeof agent_auth, "Bearer %s", token);
}

const char *
fz_bootstrap_auth(void)
{
	static char auth[RP_TOKEN_BUF + 16];
	char secret[RP_TOKEN_BUF], hash[RP_SHA256_HEX];
	json_t *j = NULL;

	if (rp_token_new(RP_TOKEN_PREFIX_BOOTSTRAP, secret) < 0)
		die("token");
	rp_sha256_hex(secret, strlen(secret), hash);
	if (rp_store_bootstrap_create(st, NULL, hash, rp_time_now_ms() + 3600000, "fuzz", &j) !=
	    RP_ERR_OK)
		die("bootstrap token");
	json_decref(j);
	snprintf(auth, sizeof auth, "Bearer %s", secret);
	return auth;
}

static void
stop(void)
{
	rp_http_stop(http);
	http = NULL;
	rp_jobs_stop(jobs);
	jobs = NULL;
	rp_store_free(st);
	st = NULL;
	nftw(datadir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void
cleanup(void)
{
	if (!started)
		return;
	stop();
	nftw(keydir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void
fz_server_init(void)
{
	char why[256], path[128];
	const char *base = getenv("RP_FUZZ_TMP");

	if (started)
		return;
	rp_log_set_level(RP_LOG_ERROR);
	/* A tmpfs keeps synchronous=FULL from turning every write into a disk flush. */
	if (base == NULL)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(keydir, sizeof keydir, "%s/rpfuzz.XXXXXX", base);
	if (mkdtemp(keydir) == NULL)
		die("mkdtemp");
	snprintf(datadir, sizeof datadir, "%s/data", keydir);
	snprintf(imgdir, sizeof imgdir, "%s/images", datadir);
	snprintf(updir, sizeof updir, "%s/.incoming", imgdir);
	snprintf(path, sizeof path, "%s/secret.key", keydir);
	if (rp_secrets_load(path, 1, &secrets, why, sizeof why) < 0)
		die(why);
	snprintf(path, sizeof path, "%s/ssh", keydir);
	if (rp_ssh_key_load(path, &sshkey, why, sizeof why) < 0)
		die(why);
	if (rp_bmc_global_init() < 0)
		die("libcurl");
	pthread_mutex_init(&api.streams_mu, NULL);
	pthread_mutex_init(&api.tls_mu, NULL);
	start();
	started = 1;
	atexit(cleanup);
}

void
fz_server_tick(unsigned every)
{
	if (++runs % every)
		return;
	stop();
	start();
}

const char *
fz_admin_auth(void)
{
	return admin_auth;
}

const char *
fz_agent_auth(void)
{
	return agent_auth;
}

const char *
fz_agent_node(void)
{
	return agent_node;
}

static int
send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* NUL-terminate b's contents without counting the NUL. */
static int
cstr(struct rp_buf *b)
{
	rp_buf_append(b, "", 1);
	if (b->oom)
		return -1;
	b->len--;
	return 0;
}

/* connect(2), resumed when a signal interrupts it: the connection goes on in the background,
 * so wait for it and read its outcome. */
static int
connect_fd(int fd, const struct sockaddr_in *sa)
{
	struct pollfd p = {fd, POLLOUT, 0};
	int e = 0, pr;
	socklen_t el = sizeof e;

	if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
		return 0;
	if (errno != EINTR && errno != EINPROGRESS)
		return -1;
	do
		pr = poll(&p, 1, 5000);
	while (pr < 0 && errno == EINTR);
	if (pr <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e != 0) {
		errno = e ? e : ETIMEDOUT;
		return -1;
	}
	return 0;
}

int
fz_request(const char *method, const char *target, const char *const *headers, const void *body,
           size_t len, struct fz_reply *out)
{
	struct sockaddr_in sa = {0};
	struct rp_buf req = {0}, in = {0};
	char line[64], *end, *p;
	int fd = -1, rc = -1, i;
	size_t hdr_len;

	memset(out, 0, sizeof *out);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 || connect_fd(fd, &sa) < 0) {
		fprintf(stderr, "fuzz server: connect: %s\n", strerror(errno));
		goto out;
	}
	rp_buf_append(&req, method, strlen(method));
	rp_buf_append(&req, " ", 1);
	rp_buf_append(&req, target, strlen(target));
	rp_buf_append(&req, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n", 47);
	for (i = 0; headers && headers[i]; i++) {
		rp_buf_append(&req, headers[i], strlen(headers[i]));
		rp_buf_append(&req, "\r\n", 2);
	}
	if (body) {
		snprintf(line, sizeof line, "Content-Length: %zu\r\n", len);
		rp_buf_append(&req, line, strlen(line));
	}
	rp_buf_append(&req, "\r\n", 2);
	if (body)
		rp_buf_append(&req, body, len);
	/* A server may answer and close before reading all of a request it refuses: what it
	 * said is still there to read. */
	if (req.oom ||
	    (send_all(fd, req.data, req.len) < 0 && errno != EPIPE && errno != ECONNRESET)) {
		fprintf(stderr, "fuzz server: send: %s\n", strerror(errno));
		goto out;
	}
	for (;;) {
		char b[16384];
		struct pollfd pfd = {fd, POLLIN, 0};
		ssize_t n;

		int pr;

		/* A server that neither answers nor closes within 20 s is hung: a finding.
		 * libFuzzer's SIGALRM (its -timeout) interrupts the wait now and then. */
		do
			pr = poll(&pfd, 1, 20000);
		while (pr < 0 && errno == EINTR);
		if (pr <= 0) {
			fprintf(stderr, "fuzz server: no reply to %s %s within 20 s\n", method,
			        target);
			abort();
		}
		n = recv(fd, b, sizeof b, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		rp_buf_append(&in, b, (size_t)n);
		if (cstr(&in) < 0)
			goto out;
		/* An event stream never ends: its headers are all there is to check. */
		if (strstr(in.data, "\r\n\r\n") &&
		    strcasestr(in.data, "content-type: text/event-stream"))
			break;
	}
	if (in.len == 0 || cstr(&in) < 0) {
		fprintf(stderr, "fuzz server: no reply to %s %s\n", method, target);
		goto out;
	}
	if (sscanf(in.data, "HTTP/1.%*c %d", &out->status) != 1)
		goto out;
	if ((end = strstr(in.data, "\r\n\r\n")) == NULL) {
		fprintf(stderr, "fuzz server: a reply without its headers' end\n");
		goto out;
	}
	hdr_len = (size_t)(end - in.data);
	for (p = in.data; p && p < end; p = strstr(p, "\r\n"), p = p ? p + 2 : NULL) {
		if (strncasecmp(p, "Content-Type:", 13) == 0) {
			const char *v = p + 13;
			size_t n;

			while (*v == ' ')
				v++;
			n = strcspn(v, "\r\n");
			if (n >= sizeof out->content_type)
				n = sizeof out->content_type - 1;
			memcpy(out->content_type, v, n);
			out->content_type[n] = '\0';
		}
	}
	out->buf = in.data;
	out->len = in.len;
	out->body = in.data + hdr_len + 4;
	out->body_len = in.len - hdr_len - 4;
	in.data = NULL;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(req.data);
	free(in.data);
	return rc;
}

void
fz_reply_clear(struct fz_reply *r)
{
	free(r->buf);
	memset(r, 0, sizeof *r);
}

static void
finding(const char *method, const char *target, const struct fz_reply *r, const char *what)
{
	fprintf(stderr, "fuzz: %s %s -> %d: %s\n%.*s\n", method, target, r->status, what,
	        (int)(r->len > 4096 ? 4096 : r->len), r->buf ? r->buf : "");
	abort();
}

void
fz_check_reply(const char *method, const char *target, const struct fz_reply *r)
{
	json_t *b, *err;
	const char *code;
	enum rp_err e;

	if (r->status < 100 || r->status > 599)
		finding(method, target, r, "no valid status");
	if (r->status >= 500 && r->status != 503)
		finding(method, target, r, "server error");
	if (r->status < 400)
		return;
	if (strncmp(r->content_type, "application/json", 16) != 0)
		finding(method, target, r, "error reply is not JSON");
	b = json_loadb(r->body, r->body_len, 0, NULL);
	err = json_object_get(b, "error");
	code = json_string_value(json_object_get(err, "code"));
	if (code == NULL || !json_is_string(json_object_get(err, "message")))
		finding(method, target, r, "error body is not {\"error\": {code, message}}");
	if (rp_err_from_code(code, &e) < 0)
		finding(method, target, r, "error code not in the registry");
	/* 416 is the one status the registry has no code of: it says BAD_REQUEST. */
	if (rp_err_status(e) != r->status && !(r->status == 416 && e == RP_ERR_BAD_REQUEST))
		finding(method, target, r, "error code's status differs from the reply's");
	json_decref(b);
}

void
fz_target_encode(const char *s, size_t n, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < n && o + 4 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c >= 0x7f || c == '#') {
			o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
		} else
			out[o++] = (char)c;
	}
	out[o] = '\0';
}

void
fz_header_clean(const char *s, size_t n, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < n && o + 1 < cap; i++)
		if (s[i] != '\r' && s[i] != '\n' && s[i] != '\0')
			out[o++] = s[i];
	out[o] = '\0';
}
