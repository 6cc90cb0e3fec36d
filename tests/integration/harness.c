/* The integration harness: process control and an HTTP client. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "harness.h"

const char *rp_test_bin = RP_TEST_BIN;
const char *rp_test_src = RP_TEST_SRC;

struct server S;

int
group_setup(void **state)
{
	(void)state;
	server_start(&S, NULL, NULL);
	return 0;
}

int
group_teardown(void **state)
{
	(void)state;
	server_stop(&S, SIGTERM);
	server_cleanup(&S);
	return 0;
}

const char *
test_database(const char *dir)
{
	static char arg[512];
	char path[600], cmd[900], name[64] = "";
	const char *pg = getenv("RP_TEST_PG");
	FILE *f;

	if (pg == NULL || !*pg)
		return NULL;
	/* The directory's database, made at its first start and kept across restarts. */
	snprintf(path, sizeof path, "%s/.test-database", dir);
	if ((f = fopen(path, "r")) != NULL) {
		if (fgets(name, sizeof name, f) == NULL)
			name[0] = '\0';
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
	}
	if (!name[0]) {
		unsigned char r[8];
		int fd = open("/dev/urandom", O_RDONLY);

		assert_true(fd >= 0 && read(fd, r, sizeof r) == (ssize_t)sizeof r);
		close(fd);
		snprintf(name, sizeof name, "rp_%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
		         r[3], r[4], r[5], r[6], r[7]);
		snprintf(cmd, sizeof cmd,
		         "psql -qX 'host=%s user=rp dbname=postgres' -c 'CREATE DATABASE %s' "
		         ">/dev/null",
		         pg, name);
		assert_int_equal(system(cmd), 0);
		/* Before the server's first start the directory may not be there yet; it would
		 * make it private (0700) too. */
		mkdir(dir, 0700);
		assert_non_null(f = fopen(path, "w"));
		fprintf(f, "%s\n", name);
		fclose(f);
	}
	snprintf(arg, sizeof arg, "postgresql:///%s?host=%s&user=rp", name, pg);
	return arg;
}

const char *
test_database_flag(const char *dir)
{
	static char flag[600];
	const char *db = test_database(dir);

	if (db == NULL)
		return "";
	snprintf(flag, sizeof flag, " --database '%s'", db);
	return flag;
}

int
test_sql(const char *dir, const char *sql)
{
	char cmd[2400];
	const char *db = test_database(dir);

	if (db)
		snprintf(cmd, sizeof cmd, "psql -qX -v ON_ERROR_STOP=1 '%s' -c \"%s\" >/dev/null",
		         db, sql);
	else
		snprintf(cmd, sizeof cmd, "sqlite3 '%s/rackpilot.db' \"%s\"", dir, sql);
	return system(cmd);
}

static void
dump_log(struct server *s)
{
	char cmd[400];

	snprintf(cmd, sizeof cmd, "tail -n 30 '%s' >&2", s->log);
	if (system(cmd) != 0)
		fprintf(stderr, "(no server log)\n");
}

void
server_start(struct server *s, const char *dir, const char *const *extra)
{
	int out[2], i, n = 0;
	char line[256], path[400];
	const char *argv[32], *db;
	size_t got = 0;
	FILE *f;

	memset(s->base, 0, sizeof s->base);
	s->pin[0] = s->cacert[0] = '\0';
	if (dir) {
		snprintf(s->dir, sizeof s->dir, "%s", dir);
	} else {
		snprintf(s->dir, sizeof s->dir, "/tmp/rp-test-XXXXXX");
		assert_non_null(mkdtemp(s->dir));
	}
	snprintf(s->log, sizeof s->log, "%s.log", s->dir);
	assert_int_equal(pipe(out), 0);
	argv[n++] = rp_test_bin;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--data-dir";
	argv[n++] = s->dir;
	argv[n++] = "--threads";
	argv[n++] = "2";
	/* No sensor sweep unless a test asks (a later --sensor-sync-interval wins): its BMC
	 * traffic and events would mix into what other tests count. */
	argv[n++] = "--sensor-sync-interval";
	argv[n++] = "0";
	if ((db = test_database(s->dir)) != NULL) {
		argv[n++] = "--database";
		argv[n++] = db;
	}
	for (i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		int err = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(out[1], 1);
		if (err >= 0)
			dup2(err, 2);
		close(out[0]);
		execv(rp_test_bin, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	/* Wait (at most 20 s: sanitizer builds start slowly) for the line that names the port
	 * (and a moment more for the boot listener's, which follows it). */
	for (;;) {
		struct pollfd p = {out[0], POLLIN, 0};
		ssize_t r;

		if (poll(&p, 1, 20000) <= 0)
			break;
		r = read(out[0], line + got, sizeof line - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		line[got] = '\0';
		if (strchr(line, '\n')) {
			struct pollfd q = {out[0], POLLIN, 0};

			if (strstr(line, "\nboot listening on ") &&
			    strchr(strstr(line, "\nboot") + 1, '\n'))
				break;
			if (poll(&q, 1, 300) <= 0)
				break;
		}
	}
	close(out[0]);
	if (strncmp(line, "listening on ", 13) != 0 || got == 0) {
		dump_log(s);
		fail_msg("rackpilotd did not start");
	}
	/* A boot listener names itself on the next line, written with the first. */
	{
		char *b = strstr(line, "\nboot listening on ");

		s->boot[0] = '\0';
		if (b) {
			b += 19;
			b[strcspn(b, "\n")] = '\0';
			snprintf(s->boot, sizeof s->boot, "http://%.100s", b);
		}
	}
	line[strcspn(line, "\n")] = '\0';
	snprintf(s->base, sizeof s->base, "http://%.100s", line + 13);
	snprintf(path, sizeof path, "%s/admin.token", s->dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(s->admin, sizeof s->admin, f));
	s->admin[strcspn(s->admin, "\n")] = '\0';
	fclose(f);
}

void
server_tls(struct server *s, const char *pin, const char *cacert)
{
	char host[120];

	if (strncmp(s->base, "http://", 7) == 0) {
		snprintf(host, sizeof host, "%s", s->base + 7);
		snprintf(s->base, sizeof s->base, "https://%s", host);
	}
	snprintf(s->pin, sizeof s->pin, "%s", pin ? pin : "");
	snprintf(s->cacert, sizeof s->cacert, "%s", cacert ? cacert : "");
}

void
server_stop(struct server *s, int sig)
{
	int status;

	if (s->pid <= 0)
		return;
	kill(s->pid, sig);
	waitpid(s->pid, &status, 0);
	if (sig == SIGTERM && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		dump_log(s);
		fail_msg("rackpilotd did not exit cleanly on SIGTERM (status %d)", status);
	}
	s->pid = 0;
}

void
server_cleanup(struct server *s)
{
	char cmd[600];

	/* RP_KEEP=1 leaves the data dir and log for a post-mortem. */
	if (getenv("RP_KEEP") != NULL) {
		fprintf(stderr, "kept %s and %s\n", s->dir, s->log);
		return;
	}
	/* The PostgreSQL run's database goes with its directory (a cluster of hundreds of
	 * databases would fill the build directory). */
	if (test_database(s->dir)) {
		char name[64];

		snprintf(name, sizeof name, "%.*s", (int)strcspn(test_database(s->dir) + 14, "?"),
		         test_database(s->dir) + 14);
		snprintf(
		        cmd, sizeof cmd,
		        "psql -qX 'host=%s user=rp dbname=postgres' -c 'DROP DATABASE IF EXISTS %s "
		        "WITH (FORCE)' >/dev/null",
		        getenv("RP_TEST_PG"), name);
		if (system(cmd) != 0)
			fprintf(stderr, "dropping database %s failed\n", name);
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", s->dir, s->log);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", s->dir);
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	char *b = realloc(r->body, r->len + size * n + 1);

	if (b == NULL)
		return 0;
	memcpy(b + r->len, p, size * n);
	r->len += size * n;
	b[r->len] = '\0';
	r->body = b;
	return size * n;
}

static void
header_value(const char *line, size_t n, const char *name, char *out, size_t cap)
{
	size_t k = strlen(name);

	if (n > k + 1 && strncasecmp(line, name, k) == 0 && line[k] == ':') {
		const char *v = line + k + 1;
		size_t m;

		while (*v == ' ')
			v++;
		m = n - (size_t)(v - line);
		while (m > 0 && (v[m - 1] == '\r' || v[m - 1] == '\n'))
			m--;
		if (m >= cap)
			m = cap - 1;
		memcpy(out, v, m);
		out[m] = '\0';
	}
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;

	header_value(p, size * n, "ETag", r->etag, sizeof r->etag);
	header_value(p, size * n, "Location", r->location, sizeof r->location);
	header_value(p, size * n, "Allow", r->allow, sizeof r->allow);
	header_value(p, size * n, "Content-Type", r->ctype, sizeof r->ctype);
	header_value(p, size * n, "X-Request-Id", r->request_id, sizeof r->request_id);
	header_value(p, size * n, "Content-Security-Policy", r->csp, sizeof r->csp);
	header_value(p, size * n, "X-Content-Type-Options", r->nosniff, sizeof r->nosniff);
	header_value(p, size * n, "Retry-After", r->retry_after, sizeof r->retry_after);
	return size * n;
}

static __thread CURL *handle;
__thread const char *req_source;

long
req(struct server *s, const char *token, const char *method, const char *path, const char *ctype,
    const char *body, size_t len, const char *const *headers, struct reply *out)
{
	char url[1024];

	snprintf(url, sizeof url, "%s%s", s->base, path);
	return req_url(s, token, method, url, ctype, body, len, headers, out);
}

long
req_url(struct server *s, const char *token, const char *method, const char *url, const char *ctype,
        const char *body, size_t len, const char *const *headers, struct reply *out)
{
	struct curl_slist *h = NULL;
	char auth[200], ct[160];
	const char *path = url;
	size_t i;
	struct reply tmp;
	CURLcode rc;

	if (out == NULL)
		out = &tmp;
	memset(out, 0, sizeof *out);
	if (handle == NULL)
		handle = curl_easy_init();
	curl_easy_reset(handle);
	curl_easy_setopt(handle, CURLOPT_URL, url);
	if (req_source)
		curl_easy_setopt(handle, CURLOPT_INTERFACE, req_source);
	curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
	if (token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	if (ctype) {
		snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
		h = curl_slist_append(h, ct);
	}
	/* No "Expect: 100-continue" unless the test asks for it: a caller that wants to see a
	 * refusal before its body is sent (as curl(1) and libcurl do for big bodies) says so. */
	for (i = 0; headers && headers[i]; i++)
		if (strncasecmp(headers[i], "Expect:", 7) == 0)
			break;
	if (headers == NULL || headers[i] == NULL)
		h = curl_slist_append(h, "Expect:");
	for (; headers && *headers; headers++)
		h = curl_slist_append(h, *headers);
	curl_easy_setopt(handle, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(handle, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(handle, CURLOPT_HEADERDATA, out);
	curl_easy_setopt(handle, CURLOPT_TIMEOUT, 60L);
	/* A server under test with TLS is checked as the test says (its pin or CA); the mock
	 * BMC speaks TLS with a throwaway self-signed certificate nobody checks. */
	if (s->cacert[0]) {
		curl_easy_setopt(handle, CURLOPT_CAINFO, s->cacert);
	} else {
		curl_easy_setopt(handle, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(handle, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (s->pin[0])
		curl_easy_setopt(handle, CURLOPT_PINNEDPUBLICKEY, s->pin);
	rc = curl_easy_perform(handle);
	curl_slist_free_all(h);
	if (rc != CURLE_OK)
		fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &out->status);
	if (out->body && strncmp(out->ctype, "application/json", 16) == 0)
		out->json = json_loadb(out->body, out->len, 0, NULL);
	if (out == &tmp)
		reply_free(&tmp);
	return out->status;
}

long
call(struct server *s, const char *token, const char *method, const char *path, struct reply *out,
     const char *fmt, ...)
{
	json_t *j = NULL;
	char *text = NULL;
	va_list ap;
	long st;

	if (fmt) {
		json_error_t err;

		va_start(ap, fmt);
		j = json_vpack_ex(&err, 0, fmt, ap);
		va_end(ap);
		if (j == NULL)
			fail_msg("json_pack(%s): %s", fmt, err.text);
		text = json_dumps(j, JSON_COMPACT);
	}
	st = req(s, token, method, path, text ? "application/json" : NULL, text,
	         text ? strlen(text) : 0, NULL, out);
	free(text);
	json_decref(j);
	return st;
}

void
reply_free(struct reply *r)
{
	json_decref(r->json);
	free(r->body);
	r->json = NULL;
	r->body = NULL;
}

void
assert_error(struct reply *r, long status, const char *code)
{
	json_t *e = json_object_get(r->json, "error");

	if (r->status != status || !json_is_object(e) ||
	    strcmp(json_string_value(json_object_get(e, "code")) ?: "", code) != 0)
		fail_msg("expected %ld %s, got %ld: %s", status, code, r->status,
		         r->body ? r->body : "(no body)");
	assert_non_null(json_string_value(json_object_get(e, "message")));
	assert_non_null(json_object_get(e, "detail"));
	assert_true(strncmp(r->ctype, "application/json", 16) == 0);
}

void
make_token(struct server *s, const char *role, char *buf)
{
	struct reply r;

	assert_int_equal(call(s, s->admin, "POST", "/v1/tokens", &r, "{s:s, s:s}", "name", role,
	                      "role", role),
	                 201);
	snprintf(buf, 128, "%s", json_string_value(json_object_get(r.json, "token")));
	reply_free(&r);
}

long
count_all(struct server *s, const char *path)
{
	char url[600], cur[300] = "";
	long total = 0;
	struct reply r;

	for (;;) {
		snprintf(url, sizeof url, "%s%slimit=1000%s%s", path, strchr(path, '?') ? "&" : "?",
		         cur[0] ? "&cursor=" : "", cur);
		assert_int_equal(req(s, s->admin, "GET", url, NULL, NULL, 0, NULL, &r), 200);
		total += (long)json_array_size(json_object_get(r.json, "items"));
		if (!json_is_string(json_object_get(r.json, "next_cursor"))) {
			reply_free(&r);
			return total;
		}
		snprintf(cur, sizeof cur, "%s",
		         json_string_value(json_object_get(r.json, "next_cursor")));
		reply_free(&r);
	}
}

json_t *
wait_job(struct server *s, const char *id, int timeout_s)
{
	char path[200];
	struct reply r;
	int i;

	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	for (i = 0; i < timeout_s * 20; i++) {
		const char *state;

		if (req(s, s->admin, "GET", path, NULL, NULL, 0, NULL, &r) != 200)
			fail_msg("GET %s: %ld %s", path, r.status, r.body ? r.body : "");
		state = json_string_value(json_object_get(r.json, "state"));
		if (state && strcmp(state, "queued") != 0 && strcmp(state, "running") != 0) {
			json_t *j = json_incref(r.json);

			reply_free(&r);
			return j;
		}
		reply_free(&r);
		usleep(50000);
	}
	fail_msg("job %s did not end within %d s", id, timeout_s);
	return NULL;
}

void
make_node(struct server *s, const char *fmt, ...)
{
	json_t *j;
	json_error_t err;
	char *text;
	va_list ap;
	struct reply r;

	va_start(ap, fmt);
	j = json_vpack_ex(&err, 0, fmt, ap);
	va_end(ap);
	if (j == NULL)
		fail_msg("json_pack(%s): %s", fmt, err.text);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (req(s, s->admin, "POST", "/v1/nodes", "application/json", text, strlen(text), NULL,
	        &r) != 201)
		fail_msg("create node %s: %ld %s", text, r.status, r.body ? r.body : "");
	reply_free(&r);
	free(text);
}

static int
port_free(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

int
free_ports(int n)
{
	int attempt, base, i;

	for (attempt = 0; attempt < 200; attempt++) {
		base = 61000 + (int)((getpid() * 7 + attempt * 613) % (4000 - n));
		for (i = 0; i < n && port_free(base + i); i++)
			;
		if (i == n)
			return base;
	}
	fail_msg("no %d free loopback ports in 61000-64999", n);
	return -1;
}

void
mock_start(struct mock *m, int count, const char *const *extra)
{
	static int started;
	const char *argv[24];
	char script[400], base[16], cnt[16];
	int attempt, n, i;

	snprintf(script, sizeof script, "%s/tests/redfish/mock_bmc.py", rp_test_src);
	memset(m, 0, sizeof m->ready);
	for (attempt = 0; attempt < 8; attempt++) {
		/* Parallel test binaries must not fight over ports: spread by pid, retry on a
		 * clash. */
		m->base = 20000 + (int)((getpid() * 7 + (started + attempt) * 997) % 2000) * 16;
		m->count = count;
		snprintf(base, sizeof base, "%d", m->base);
		snprintf(cnt, sizeof cnt, "%d", count);
		snprintf(m->ready, sizeof m->ready, "/tmp/rp-mock-%d-%d.ready", (int)getpid(),
		         attempt);
		unlink(m->ready);
		n = 0;
		argv[n++] = "python3";
		argv[n++] = script;
		argv[n++] = "--port-base";
		argv[n++] = base;
		argv[n++] = "--count";
		argv[n++] = cnt;
		argv[n++] = "--ready-file";
		argv[n++] = m->ready;
		m->tls = 0;
		for (i = 0; extra && extra[i] && n < 22; i++) {
			if (!strcmp(extra[i], "--tls"))
				m->tls = 1;
			argv[n++] = extra[i];
		}
		argv[n] = NULL;
		m->pid = fork();
		assert_true(m->pid >= 0);
		if (m->pid == 0) {
			int null = open("/dev/null", O_WRONLY);

			dup2(null, 1);
			execvp("python3", (char *const *)argv);
			_exit(127);
		}
		for (i = 0; i < 200; i++) {
			int status;

			if (access(m->ready, F_OK) == 0) {
				started++;
				return;
			}
			if (waitpid(m->pid, &status, WNOHANG) == m->pid)
				break; /* exited: most likely a port in use */
			usleep(50000);
		}
		kill(m->pid, SIGKILL);
		waitpid(m->pid, NULL, 0);
	}
	fail_msg("the Redfish mock BMC did not start");
}

void
mock_stop(struct mock *m)
{
	if (m->pid > 0) {
		kill(m->pid, SIGTERM);
		waitpid(m->pid, NULL, 0);
		m->pid = 0;
	}
	unlink(m->ready);
}

static json_t *
mock_http(struct mock *m, int i, const char *method, const char *path, const char *json)
{
	struct server s;
	struct reply r;
	json_t *j;

	memset(&s, 0, sizeof s);
	snprintf(s.base, sizeof s.base, "%s://127.0.0.1:%d", m->tls ? "https" : "http",
	         m->base + i);
	if (req(&s, NULL, method, path, json ? "application/json" : NULL, json,
	        json ? strlen(json) : 0, NULL, &r) != 200)
		fail_msg("mock %s %s: %ld %s", method, path, r.status, r.body ? r.body : "");
	j = r.json ? json_incref(r.json) : NULL;
	reply_free(&r);
	return j;
}

json_t *
mock_get(struct mock *m, int i, const char *path)
{
	return mock_http(m, i, "GET", path, NULL);
}

void
mock_post(struct mock *m, int i, const char *path, const char *json)
{
	json_decref(mock_http(m, i, "POST", path, json));
}

static int
run_shell(char *cmd, size_t len, const char *fmt, va_list ap)
{
	int rc;

	vsnprintf(cmd, len, fmt, ap);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void
sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = run_shell(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	if (rc != 0)
		fail_msg("command failed (%d): %s", rc, cmd);
}

int
sh_rc(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = run_shell(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return rc;
}

const char *
slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (f) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

const char *
jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

json_t *
get_json(struct server *s, const char *path)
{
	struct reply r;
	json_t *j;

	assert_int_equal(call(s, s->admin, "GET", path, &r, NULL), 200);
	j = json_incref(r.json);
	reply_free(&r);
	return j;
}

json_t *
sensor_sync(struct server *s)
{
	struct reply r;
	json_t *st = NULL;
	int i;

	assert_int_equal(call(s, s->admin, "POST", "/v1/sensors/sync", &r, NULL), 202);
	reply_free(&r);
	for (i = 0; i < 400; i++) {
		st = get_json(s, "/v1/sensors/sync");
		if (!json_is_true(json_object_get(st, "running")))
			break;
		json_decref(st);
		st = NULL;
		usleep(50 * 1000);
	}
	if (st == NULL)
		fail_msg("the sensor sweep did not end within 20 s");
	return st;
}

int
simnode_waits(struct server *s, const struct simnode *n)
{
	char path[200];
	json_t *nd, *job;
	const char *id;
	int ok = 0;

	snprintf(path, sizeof path, "/v1/nodes/%.31s", n->name);
	nd = get_json(s, path);
	id = json_string_value(json_object_get(nd, "provision_job"));
	if (id && !strcmp(jstr(nd, "provision_state") ?: "", "commissioning")) {
		snprintf(path, sizeof path, "/v1/jobs/%s", id);
		job = get_json(s, path);
		ok = !strcmp(jstr(job, "phase") ?: "", "wait_agent");
		json_decref(job);
	}
	json_decref(nd);
	return ok;
}

void
simnode_boot(struct server *s, struct simnode *n, int port, const char *agent)
{
	char path[200], tok[128];
	struct reply r;
	const char *p;

	snprintf(path, sizeof path, "/boot/ipxe?mac=%s", n->mac);
	assert_int_equal(req(s, NULL, "GET", path, NULL, NULL, 0, NULL, &r), 200);
	p = strstr(r.body, "rackpilot.token=");
	if (p == NULL)
		fail_msg("%s got no ramdisk: %s", n->name, r.body);
	p += strlen("rackpilot.token=");
	snprintf(tok, sizeof tok, "%.*s", (int)strcspn(p, " \n"), p);
	reply_free(&r);
	if (!n->started) {
		sh("%s/tests/ssh/sshnode.sh start %s %s %d %s %s %s %s "
		   "%s/tests/fixtures/inventory/%s",
		   rp_test_src, n->dir, n->addr, port, s->base, tok, n->mac, agent, rp_test_src,
		   n->fixture);
		n->started = 1;
	} else {
		sh("sed -i 's/^bootstrap_token = .*/bootstrap_token = %s/' %s/agent.conf", tok,
		   n->dir);
	}
	assert_int_equal(
	        sh_rc("%s -c %s/agent.conf register >> %s/agent.log 2>&1", agent, n->dir, n->dir),
	        0);
}

json_t *
accept_result(json_t *run, const char *node, const char *check)
{
	json_t *r;
	size_t i;

	json_array_foreach(json_object_get(run, "results"), i, r)
	{
		if (!strcmp(jstr(r, "node") ?: "", node) && !strcmp(jstr(r, "check") ?: "", check))
			return r;
	}
	fail_msg("no result %s/%s", node, check);
	return NULL;
}

void
accept_expect(json_t *run, const char *node, const char *check, const char *want)
{
	json_t *r = accept_result(run, node, check);

	if (strcmp(jstr(r, "state") ?: "", want) != 0)
		fail_msg("%s %s: %s, expected %s: %s", node, check, jstr(r, "state"), want,
		         json_dumps(r, 0));
}

void
simrack_start(const char *tmpl, char *workdir, size_t wlen, char *conf, size_t clen,
              char *listen_at, size_t llen, int *port, const char *const *args)
{
	char path[400];
	struct reply r;
	FILE *f;

	snprintf(workdir, wlen, "%s", tmpl);
	assert_non_null(mkdtemp(workdir));
	*port = free_ports(2);
	/* A fixed port: the agents' configuration names the server, across a restart too. */
	snprintf(listen_at, llen, "127.0.0.1:%d", *port + 1);
	snprintf(conf, clen, "%s/rackpilotd.conf", workdir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[server]\npower_sync_interval = 0\n");
	fclose(f);
	server_start(&S, NULL, args);
	snprintf(path, sizeof path, "%s/kernel.bin", workdir);
	sh("head -c 1000 /dev/urandom > %s && curl -sf -o /dev/null -X PUT -H 'Authorization: "
	   "Bearer %s' --data-binary @%s '%s/v1/images/k?kind=kernel'",
	   path, S.admin, path, S.base);
	sh("curl -sf -o /dev/null -X PUT -H 'Authorization: Bearer %s' --data-binary @%s "
	   "'%s/v1/images/i?kind=initrd'",
	   S.admin, path, S.base);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/boot-profiles", &r, "{s:s, s:s, s:s}",
	                      "name", "default", "kernel", "k", "initrd", "i"),
	                 201);
	reply_free(&r);
}

int
simrack_stop(struct simnode *nodes, size_t n, const char *workdir, void **state)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (nodes[k].started)
			sh_rc("%s/tests/ssh/sshnode.sh stop %s", rp_test_src, nodes[k].dir);
	if (getenv("RP_KEEP") == NULL)
		sh_rc("rm -rf %s", workdir);
	return group_teardown(state);
}

int
node_wait_state(struct server *s, const char *node, const char *state, int tenths)
{
	char path[200];
	int i, at = 0;

	snprintf(path, sizeof path, "/v1/nodes/%.63s", node);
	for (i = 0; i < tenths && !at; i++) {
		json_t *n = get_json(s, path);

		at = !strcmp(jstr(n, "provision_state") ?: "", state);
		json_decref(n);
		if (!at)
			usleep(100000);
	}
	return at;
}
