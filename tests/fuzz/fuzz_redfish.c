/*
 * fuzz_redfish — the client side of Redfish (bmc/redfish.c): every response parser fed
 * arbitrary status lines, headers and bodies, through the public rp_bmc_* API.
 *
 * A responder thread on 127.0.0.1 answers the driver's requests, one connection each
 * (Connection: close), in order, with the input's canned responses. Input: byte 0 picks the
 * operation, then a line ARG, then responses separated by "\n%%\n". A response that starts with
 * "HTTP/" is status line, header lines, a blank line and the body (framed by frame());
 * anything else is the body of a 200 application/json reply (so
 * real bodies from the DMTF mockups work as seeds). When they run out: 404, empty body.
 * ARG is handed to rp_bmc_url_resolve as a link, and to bios_registry / task_poll /
 * task_find as their argument.
 *
 * Seeds: with RP_FUZZ_REDFISH_RECORD=DIR (a DMTF mockup tree, e.g. shared/redfish-mockups/
 * public-rackmount1) the responder serves DIR's files by path instead (sessions and actions
 * get canned answers) and each run writes what it served, as an input for that operation, to
 * $RP_FUZZ_REDFISH_OUT/<op>: run the harness once over one-byte inputs 0..13 (README.md).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "bmc/bmc.h"
#include "util/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RESP 16

static int lfd = -1;
static unsigned port;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *resp[MAX_RESP];
static size_t resp_len[MAX_RESP], nresp, next_resp;

static const char *record_dir; /* RP_FUZZ_REDFISH_RECORD */
static struct rp_buf recorded;

/* Read one request (headers, then Content-Length bytes), bounded in time; its first line
 * goes to line. */
static void
read_request(int fd, char *line, size_t linelen)
{
	char buf[65536];
	size_t got = 0, want = 0;
	char *hend = NULL;

	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		int pr = poll(&p, 1, 2000);

		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return;
		n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		got += (size_t)n;
		buf[got] = '\0';
		if (hend == NULL && (hend = strstr(buf, "\r\n\r\n")) != NULL) {
			char *cl = strcasestr(buf, "\r\nContent-Length:");

			snprintf(line, linelen, "%.*s", (int)strcspn(buf, "\r\n"), buf);

			want = (size_t)(hend - buf) + 4 + (cl ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (hend && got >= want)
			return;
		if (got >= sizeof buf - 1)
			got = 0; /* a large upload: keep reading, keep nothing */
	}
}

static void
send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* A raw response from the input as well-formed HTTP/1.1: its status (200-599, else 200),
 * its header lines that are "Name: value" (CR, NUL dropped; framing headers replaced), its
 * body with a true Content-Length. What the driver parses (status, headers, body) stays the
 * input's; libcurl's own HTTP parser is not what this harness is for, and libcurl 7.88.1
 * has a use-after-free on some malformed status lines that would mask everything else
 * (README.md, "Findings"). */
static void
frame(const char *r, size_t n, struct rp_buf *out)
{
	const char *p = r, *end = r + n, *nl, *sp;
	char line[8192];
	int status = 200;
	size_t k;

	nl = memchr(p, '\n', n);
	sp = memchr(p, ' ', (size_t)((nl ? nl : end) - p));
	if (sp && sp + 4 <= end && sp[1] >= '2' && sp[1] <= '5' && sp[2] >= '0' && sp[2] <= '9' &&
	    sp[3] >= '0' && sp[3] <= '9')
		status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
	k = (size_t)snprintf(line, sizeof line, "HTTP/1.1 %d Fuzz\r\n", status);
	rp_buf_append(out, line, k);
	p = nl ? nl + 1 : end;
	while (p < end) {
		const char *e = memchr(p, '\n', (size_t)(end - p)), *c;
		size_t ln = (size_t)((e ? e : end) - p), o = 0, i;

		if (ln > 0 && p[ln - 1] == '\r')
			ln--;
		if (ln == 0) {
			p = e ? e + 1 : end;
			break; /* the blank line: the body follows */
		}
		c = memchr(p, ':', ln);
		if (c && c > p && ln < sizeof line - 3 && strncasecmp(p, "Content-Length", 14) &&
		    strncasecmp(p, "Transfer-Encoding", 17) && strncasecmp(p, "Connection", 10)) {
			for (i = 0; i < ln; i++)
				if (p[i] != '\r' && p[i] != '\0')
					line[o++] = p[i];
			line[o++] = '\r';
			line[o++] = '\n';
			if (memchr(line, ':', o) && line[0] != ' ' && line[0] != '\t' &&
			    line[0] != ':')
				rp_buf_append(out, line, o);
		}
		p = e ? e + 1 : end;
	}
	k = (size_t)snprintf(line, sizeof line, "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	                     (size_t)(end - p));
	rp_buf_append(out, line, k);
	rp_buf_append(out, p, (size_t)(end - p));
}

/* Record mode: the mockup's answer to "METHOD /path HTTP/1.1", as a new string. */
static char *
mockup_answer(const char *line, size_t *len)
{
	char method[16], path[1024], file[2048], *body = NULL, *out;
	FILE *f;
	long n;

	*len = 0;
	if (sscanf(line, "%15s %1023s", method, path) != 2)
		return NULL;
	if (strcmp(method, "POST") == 0 && strstr(path, "/Sessions"))
		return strdup("HTTP/1.1 201 Created\r\nX-Auth-Token: fuzz-token\r\nLocation: "
		              "/redfish/v1/SessionService/Sessions/1\r\nContent-Type: "
		              "application/json\r\n\r\n{\"Id\":\"1\"}");
	if (strcmp(method, "POST") == 0)
		return strdup(
		        "HTTP/1.1 202 Accepted\r\nLocation: /redfish/v1/TaskService/Tasks/545\r\n"
		        "Content-Length: 0\r\n\r\n");
	if (strcmp(method, "GET") != 0)
		return strdup("HTTP/1.1 204 No Content\r\n\r\n");
	path[strcspn(path, "?")] = '\0';
	if (strncmp(path, "/redfish/v1", 11) == 0)
		memmove(path, path + 11, strlen(path + 11) + 1);
	if (path[0] && path[strlen(path) - 1] == '/')
		path[strlen(path) - 1] = '\0';
	snprintf(file, sizeof file, "%s%s/index.json", record_dir, path);
	if ((f = fopen(file, "r")) == NULL)
		return strdup("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	if (n >= 0 && (body = malloc((size_t)n + 1)) != NULL &&
	    fread(body, 1, (size_t)n, f) == (size_t)n)
		body[n] = '\0';
	fclose(f);
	if (body == NULL)
		return NULL;
	/* As the fuzz input spells it: a bare body is a 200 JSON reply. */
	out = body;
	*len = (size_t)n;
	return out;
}

static void *
responder(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(lfd, NULL, NULL); /* EINTR: just another turn */
		char *r = NULL;
		size_t n = 0;
		char head[160];

		char line[1200] = "";

		if (fd < 0)
			continue;
		read_request(fd, line, sizeof line);
		pthread_mutex_lock(&mu);
		if (record_dir) {
			if ((r = mockup_answer(line, &n)) != NULL && n == 0)
				n = strlen(r);
			if (r) {
				if (recorded.len)
					rp_buf_append(&recorded, "\n%%\n", 4);
				rp_buf_append(&recorded, r, n);
			}
		}
		/* A copy: the run that gave it may end (and its input go) while this is sent. */
		if (!record_dir && next_resp < nresp &&
		    (r = malloc(resp_len[next_resp] + 1)) != NULL) {
			n = resp_len[next_resp];
			memcpy(r, resp[next_resp], n);
			next_resp++;
		}
		pthread_mutex_unlock(&mu);
		if (r == NULL) {
			static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: "
			                         "0\r\nConnection: close\r\n\r\n";
			send_all(fd, nf, sizeof nf - 1);
		} else if (n >= 5 && memcmp(r, "HTTP/", 5) == 0 && getenv("RP_FUZZ_REDFISH_RAW")) {
			/* As a hostile BMC would send it: libcurl's own parser too. */
			send_all(fd, r, n);
		} else if (n >= 5 && memcmp(r, "HTTP/", 5) == 0) {
			struct rp_buf f = {0};

			frame(r, n, &f);
			send_all(fd, f.data, f.len);
			free(f.data);
		} else {
			int h = snprintf(head, sizeof head,
			                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			                 n);

			send_all(fd, head, (size_t)h);
			send_all(fd, r, n);
		}
		free(r);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	return NULL;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_in sa = {0};
	socklen_t sl = sizeof sa;
	pthread_t t;

	(void)argc;
	(void)argv;
	record_dir = getenv("RP_FUZZ_REDFISH_RECORD");
	if (rp_bmc_global_init() < 0)
		abort();
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
		abort();
	port = ntohs(sa.sin_port);
	if (pthread_create(&t, NULL, responder, NULL) != 0)
		abort();
	pthread_detach(t);
	return 0;
}

static void
check_err(int rc, const struct rp_bmc_err *err)
{
	/* A failure always says what happened, and never in more than its buffer. */
	if (rc < 0 && (err->msg[0] == '\0' || memchr(err->msg, '\0', sizeof err->msg) == NULL)) {
		fprintf(stderr, "redfish: a failure without a message\n");
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_bmc_target t = {0};
	struct rp_bmc_err err = {0};
	struct rp_bmc *b;
	const char *p, *end = (const char *)data + size, *nl;
	char arg[512], out[RP_BMC_LINK_MAX + 64], why[256], task[512], origin[64];
	json_t *j = NULL;
	unsigned op;
	int rc = 0, done = 0, ok = 0;
	size_t an;

	if (size < 1)
		return 0;
	op = data[0];
	p = (const char *)data + 1;
	nl = memchr(p, '\n', (size_t)(end - p));
	an = nl ? (size_t)(nl - p) : (size_t)(end - p);
	if (an >= sizeof arg)
		an = sizeof arg - 1;
	memcpy(arg, p, an);
	arg[an] = '\0';
	p = nl ? nl + 1 : end; /* the responses follow the argument's line */

	snprintf(origin, sizeof origin, "http://127.0.0.1:%u", port);
	if (rp_bmc_url_resolve(origin, arg, out, sizeof out, why, sizeof why) == 0 &&
	    strncmp(out, origin, strlen(origin)) != 0) {
		fprintf(stderr, "url_resolve: %s left %s for %s\n", arg, origin, out);
		abort();
	}

	pthread_mutex_lock(&mu);
	nresp = 0;
	next_resp = 0;
	while (p < end && nresp < MAX_RESP) {
		const char *sep = memmem(p, (size_t)(end - p), "\n%%\n", 4);

		resp[nresp] = p;
		resp_len[nresp++] = (size_t)((sep ? sep : end) - p);
		p = sep ? sep + 4 : end;
	}
	pthread_mutex_unlock(&mu);

	snprintf(t.driver, sizeof t.driver, "redfish");
	snprintf(t.host, sizeof t.host, "127.0.0.1");
	t.port = port;
	snprintf(t.scheme, sizeof t.scheme, "http");
	snprintf(t.username, sizeof t.username, "admin");
	snprintf(t.password, sizeof t.password, "secret");
	t.node[0] = '\0'; /* no session cache across runs: each run starts from the root */
	t.http_timeout_ms = 2000;
	t.retry_tries = 1 + (op >> 7);
	t.retry_wait_ms = 50;
	if (op & 0x40)
		snprintf(t.system_id, sizeof t.system_id, "%s", "437XR1138R2");
	if ((b = rp_bmc_open(&t, &err)) == NULL) {
		check_err(-1, &err);
		goto out;
	}
	switch (op % 14) {
	case 0: {
		enum rp_power pw;

		rc = rp_bmc_power_get(b, &pw, &err);
		break;
	}
	case 1:
		rc = rp_bmc_power_set(b, (enum rp_power_action)((op >> 4) % 5), &err);
		break;
	case 2: {
		struct rp_boot bt;

		rc = rp_bmc_boot_get(b, &bt, &err);
		break;
	}
	case 3: {
		struct rp_boot bt = {.device = (enum rp_boot_device)(1 + (op >> 4) % 3),
		                     .persistent = (op >> 6) & 1,
		                     .uefi = 1};

		rc = rp_bmc_boot_set(b, &bt, &err);
		break;
	}
	case 4: {
		struct rp_bmc_identity id;

		rc = rp_bmc_identity(b, &id, &err);
		break;
	}
	case 5:
		rc = rp_bmc_bios_get(b, &j, &err);
		break;
	case 6:
		rc = rp_bmc_bios_registry(b, arg[0] ? arg : "BiosAttributeRegistryP89.v1_0_0", &j,
		                          &err);
		break;
	case 7:
		rc = rp_bmc_firmware_inventory(b, &j, &err);
		break;
	case 8:
		rc = rp_bmc_firmware_update(b, "http://127.0.0.1:1/boot/images/fw.bin", NULL, NULL,
		                            task, sizeof task, &err);
		break;
	case 9:
		rc = rp_bmc_task_poll(b, arg[0] == '/' ? arg : "/redfish/v1/TaskService/Tasks/1",
		                      &done, &ok, &j, &err);
		break;
	case 10:
		rc = rp_bmc_task_find(b, arg[0] ? arg : "fw.bin", task, sizeof task, &err);
		if (rc > 0)
			rc = 0;
		break;
	case 11:
		rc = rp_bmc_events(b, 0, 1000, &j, &err);
		break;
	case 12: {
		json_t *attrs = json_pack("{s:s, s:i}", "BootMode", "Uefi", "ProcCoreDisable", 0);

		rc = rp_bmc_bios_set(b, attrs, &err);
		json_decref(attrs);
		break;
	}
	default: {
		json_t *names = NULL;

		rc = rp_bmc_detected_workarounds(b, &names);
		json_decref(names);
		rc = 0;
		break;
	}
	}
	check_err(rc, &err);
	if (getenv("RP_FUZZ_VERBOSE"))
		fprintf(stderr, "op %u: rc %d %s\n", op % 14, rc, rc ? err.msg : "");
	rp_bmc_close(b);
out:
	pthread_mutex_lock(&mu);
	nresp = 0; /* the input is gone after this run */
	if (record_dir && getenv("RP_FUZZ_REDFISH_OUT")) {
		char path[600];
		FILE *f;

		snprintf(path, sizeof path, "%s/op%02u", getenv("RP_FUZZ_REDFISH_OUT"), op);
		if ((f = fopen(path, "w")) != NULL) {
			fputc((int)op, f);
			fputs(op % 14 == 6   ? "BiosAttributeRegistryP89.v1_0_0\n"
			      : op % 14 == 9 ? "/redfish/v1/TaskService/Tasks/545\n"
			                     : "\n",
			      f);
			fwrite(recorded.data, 1, recorded.len, f);
			fclose(f);
		}
	}
	recorded.len = 0;
	pthread_mutex_unlock(&mu);
	json_decref(j);
	return 0;
}
