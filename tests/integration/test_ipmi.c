/*
 * The IPMI driver through the API, against OpenIPMI's ipmi_sim (tests/ipmi/bmcsim.sh).
 * Every action is checked from the BMC's side: ipmitool (an independent client) and the
 * simulator's own log of what it was told to do.
 *
 * Workaround detection is watched on the wire: some nodes reach their BMC through a UDP
 * relay in this process that counts the IPMI sessions rackpilotd tries to open (libfreeipmi
 * opens each session from a new socket, so one new source port sending RMCP is one attempt,
 * whatever it retransmits).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char run[64], run2[64], run3[64];
static int base, base2, base3;

/* ---- A counting UDP relay ------------------------------------------------------------ */

#define RELAY_PEERS 64

struct relay {
	int fd;       /* where rackpilotd sends */
	int port;     /* its port */
	int target;   /* the BMC's port */
	int drop;     /* 1: forward nothing (a BMC that is down), count all the same */
	int sessions; /* session attempts seen (atomic) */
	int stop;
	int n;
	int up[RELAY_PEERS];
	struct sockaddr_in peer[RELAY_PEERS];
	int counted[RELAY_PEERS];
	pthread_t th;
};

static struct relay r_detect, r_auth, r_down;

static void *
relay_main(void *arg)
{
	struct relay *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		struct pollfd p[RELAY_PEERS + 1];
		unsigned char buf[2048];
		int i, n = r->n;

		p[0].fd = r->fd;
		p[0].events = POLLIN;
		for (i = 0; i < n; i++) {
			p[i + 1].fd = r->up[i];
			p[i + 1].events = POLLIN;
		}
		if (poll(p, (nfds_t)n + 1, 50) <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			struct sockaddr_in from;
			socklen_t fl = sizeof from;
			ssize_t len =
			        recvfrom(r->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);

			for (i = 0; len > 0 && i < r->n; i++)
				if (r->peer[i].sin_port == from.sin_port &&
				    r->peer[i].sin_addr.s_addr == from.sin_addr.s_addr)
					break;
			if (len > 0 && i == r->n && r->n < RELAY_PEERS) {
				struct sockaddr_in to = {.sin_family = AF_INET,
				                         .sin_port = htons((uint16_t)r->target),
				                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
				int u = socket(AF_INET, SOCK_DGRAM, 0);

				if (u >= 0 && connect(u, (struct sockaddr *)&to, sizeof to) == 0) {
					r->up[r->n] = u;
					r->peer[r->n] = from;
					r->counted[r->n] = 0;
					r->n++;
				} else if (u >= 0) {
					close(u);
				}
			}
			/* An RMCP packet (06 00 ff 07) from a new socket: a session attempt. */
			if (len > 4 && i < r->n && !r->counted[i] && buf[0] == 0x06 &&
			    buf[3] == 0x07) {
				r->counted[i] = 1;
				__atomic_add_fetch(&r->sessions, 1, __ATOMIC_RELAXED);
			}
			if (len > 0 && i < r->n && !__atomic_load_n(&r->drop, __ATOMIC_RELAXED) &&
			    send(r->up[i], buf, (size_t)len, 0) < 0)
				continue;
		}
		for (i = 0; i < n; i++)
			if (p[i + 1].revents & POLLIN) {
				ssize_t len = recv(r->up[i], buf, sizeof buf, 0);

				if (len > 0 &&
				    sendto(r->fd, buf, (size_t)len, 0,
				           (struct sockaddr *)&r->peer[i], sizeof r->peer[i]) < 0)
					continue;
			}
	}
	return NULL;
}

static void
relay_start(struct relay *r, int target)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;

	memset(r, 0, sizeof *r);
	r->target = target;
	r->fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(r->fd >= 0);
	assert_int_equal(bind(r->fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(r->fd, (struct sockaddr *)&a, &al), 0);
	r->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&r->th, NULL, relay_main, r), 0);
}

static void
relay_stop(struct relay *r)
{
	int i;

	if (r->fd <= 0)
		return;
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELAXED);
	pthread_join(r->th, NULL);
	for (i = 0; i < r->n; i++)
		close(r->up[i]);
	close(r->fd);
	r->fd = 0;
}

static int
sessions(struct relay *r)
{
	return __atomic_load_n(&r->sessions, __ATOMIC_RELAXED);
}

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int
sim(const char *cmd, const char *dir, int port, int count)
{
	char line[700];

	if (count > 0)
		snprintf(line, sizeof line,
		         "BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s %d >/dev/null 2>&1", port,
		         rp_test_src, cmd, dir, count);
	else
		snprintf(line, sizeof line,
		         "BASE_PORT=%d sh %s/tests/ipmi/bmcsim.sh %s %s >/dev/null 2>&1", port,
		         rp_test_src, cmd, dir);
	return system(line);
}

static void
sim_start(char *dir, size_t len, int *port, int count)
{
	int attempt;

	for (attempt = 0; attempt < 8; attempt++) {
		snprintf(dir, len, "/tmp/rp-ipmi-XXXXXX");
		assert_non_null(mkdtemp(dir));
		*port = 30000 + (int)((getpid() * 13 + attempt * 101 + count) % 1500) * 16;
		if (sim("start", dir, *port, count) == 0)
			return;
		rmdir(dir);
	}
	fail_msg("ipmi_sim did not start");
}

/* The BMC's own view, through ipmitool: "on" or "off". */
static void
ipmitool(int port, const char *args, char *out, size_t len)
{
	char cmd[400];
	FILE *p;

	snprintf(cmd, sizeof cmd,
	         "ipmitool -I lanplus -C 3 -H 127.0.0.1 -p %d -U admin -P password %s 2>&1", port,
	         args);
	p = popen(cmd, "r");
	assert_non_null(p);
	out[0] = '\0';
	while (fgets(out + strlen(out), (int)(len - strlen(out)), p))
		;
	pclose(p);
}

static int
power_at(int port)
{
	char out[256];

	ipmitool(port, "chassis power status", out, sizeof out);
	if (strstr(out, "is on"))
		return 1;
	if (strstr(out, "is off"))
		return 0;
	fail_msg("ipmitool: %s", out);
	return -1;
}

static void
read_file(const char *dir, int bmc, const char *name, char *out, size_t len)
{
	char path[300];
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "%s/bmc%d/%s", dir, bmc, name);
	out[0] = '\0';
	f = fopen(path, "r");
	if (f == NULL)
		return;
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	fclose(f);
}

static void
clear_log(const char *dir, int bmc)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof path, "%s/bmc%d/ops.log", dir, bmc);
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void
add_node(const char *name, int port, int n, const char *password)
{
	char serial[32], guid[64];

	snprintf(serial, sizeof serial, "SIMSN%04d", n);
	snprintf(guid, sizeof guid, "5253494d-0000-4000-8000-%012d", n);
	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:[s], s:i, s:i}}}", "name",
	          name, "serial", serial, "system_uuid", guid, "bmc", "driver", "ipmi", "address",
	          "127.0.0.1", "port", port, "username", "admin", "password", password, "options",
	          "workarounds", "opensesspriv", "session_timeout_ms", 2000,
	          "retransmission_timeout_ms", 500);
}

/* A node enrolled the way an operator who knows nothing of workarounds would: no options
 * but short timeouts (a dead BMC then costs 2 s, not 5). workarounds: NULL leaves them out;
 * otherwise a JSON array text, set as given. */
static void
add_plain_node(const char *name, int port, int n, const char *password, const char *workarounds)
{
	char serial[32], guid[64];
	json_t *w = workarounds ? json_loads(workarounds, 0, NULL) : NULL;

	snprintf(serial, sizeof serial, "SIMSN%04d", n);
	snprintf(guid, sizeof guid, "5253494d-0000-4000-8000-%012d", n);
	make_node(&S, "{s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:s, s:{s:i, s:i, s:o*}}}", "name",
	          name, "serial", serial, "system_uuid", guid, "bmc", "driver", "ipmi", "address",
	          "127.0.0.1", "port", port, "username", "admin", "password", password, "options",
	          "session_timeout_ms", 2000, "retransmission_timeout_ms", 500, "workarounds", w);
}

static int
setup(void **state)
{
	static const char *const args[] = {"--power-sync-interval", "0", NULL};

	(void)state;
	sim_start(run, sizeof run, &base, 3);
	sim_start(run2, sizeof run2, &base2, 1);
	sim_start(run3, sizeof run3, &base3, 3);
	relay_start(&r_detect, base3);
	relay_start(&r_auth, base3 + 2);
	relay_start(&r_down, base3 + 2);
	__atomic_store_n(&r_down.drop, 1, __ATOMIC_RELAXED);
	server_start(&S, NULL, args);
	add_node("ip1", base, 1, "password");
	add_node("ip2", base + 1, 2, "password");
	add_node("ip3", base + 2, 3, "wrong");
	add_node("ip4", base2, 1, "password");
	add_plain_node("ipd", r_detect.port, 1, "password", NULL);
	add_plain_node("ipv", base3 + 1, 2, "password", NULL);
	add_plain_node("ipw", r_auth.port, 3, "wrong", NULL);
	add_plain_node("ipu", r_down.port, 3, "password", NULL);
	add_plain_node("ipn", base3 + 2, 3, "password", "[]");
	return 0;
}

static int
teardown(void **state)
{
	char cmd[300];

	relay_stop(&r_detect);
	relay_stop(&r_auth);
	relay_stop(&r_down);
	sim("stop", run, base, 0);
	sim("stop", run2, base2, 0);
	sim("stop", run3, base3, 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", run, run2, run3);
	if (system(cmd) != 0)
		return -1;
	return group_teardown(state);
}

static json_t *
act(const char *method, const char *path, const char *body)
{
	struct reply r;
	json_t *job;

	req(&S, S.admin, method, path, body ? "application/json" : NULL, body,
	    body ? strlen(body) : 0, NULL, &r);
	if (r.status != 202)
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body ? r.body : "");
	job = wait_job(&S, str(r.json, "id"), 60);
	reply_free(&r);
	return job;
}

static void
expect(json_t *job, const char *state)
{
	if (strcmp(str(job, "state"), state) != 0)
		fail_msg("%s job: expected %s, got %s: %s", str(job, "type"), state,
		         str(job, "state"), json_dumps(json_object_get(job, "error"), 0));
	json_decref(job);
}

static void
test_power(void **state)
{
	char log[512];

	(void)state;
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"on\"}"), "succeeded");
	assert_int_equal(power_at(base), 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"off\"}"), "succeeded");
	assert_int_equal(power_at(base), 0);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"on\"}"), "succeeded");
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set power 1\nset power 0\nset power 1\n");
	clear_log(run, 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"cycle\"}"), "succeeded");
	assert_int_equal(power_at(base), 1);
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set power 0\nset power 1\n");
	clear_log(run, 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"reset\"}"), "succeeded");
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set reset 1\n");
	clear_log(run, 1);
	expect(act("PUT", "/v1/nodes/ip1/power", "{\"target\":\"soft_off\"}"), "succeeded");
	read_file(run, 1, "ops.log", log, sizeof log);
	assert_string_equal(log, "set shutdown 1\n");
	assert_int_equal(power_at(base), 0);
}

static void
test_boot(void **state)
{
	char out[1024], log[256];
	json_t *job, *w;

	(void)state;
	clear_log(run, 2);
	job = act("PUT", "/v1/nodes/ip2/boot", "{\"device\":\"pxe\"}");
	assert_string_equal(str(job, "state"), "succeeded");
	/* ipmi_sim keeps only the device: the UEFI request is reported as not taken. */
	w = json_object_get(json_object_get(job, "result"), "warnings");
	assert_true(json_array_size(w) >= 1);
	assert_string_equal(str(json_array_get(w, json_array_size(w) - 1), "field"), "mode");
	json_decref(job);
	read_file(run, 2, "ops.log", log, sizeof log);
	assert_non_null(strstr(log, "set boot pxe"));
	ipmitool(base + 1, "chassis bootparam get 5", out, sizeof out);
	assert_non_null(strstr(out, "Force PXE"));
	expect(act("PUT", "/v1/nodes/ip2/boot", "{\"device\":\"disk\",\"mode\":\"legacy\"}"),
	       "succeeded");
	ipmitool(base + 1, "chassis bootparam get 5", out, sizeof out);
	assert_non_null(strstr(out, "Force Boot from default Hard-Drive"));
}

static void
test_verify(void **state)
{
	struct reply r;
	json_t *job, *checks, *id;

	(void)state;
	job = act("POST", "/v1/nodes/ip1/verify", NULL);
	assert_string_equal(str(job, "state"), "succeeded");
	checks = json_object_get(json_object_get(job, "result"), "checks");
	assert_string_equal(str(json_array_get(checks, 0), "status"), "ok");
	assert_string_equal(str(json_array_get(checks, 1), "status"), "ok");
	id = json_object_get(json_object_get(job, "result"), "identity");
	assert_string_equal(str(id, "serial"), "SIMSN0001");
	assert_string_equal(str(id, "uuid"), "5253494d-0000-4000-8000-000000000001");
	assert_string_equal(str(id, "bmc_firmware"), "1.23");
	json_decref(job);
	/* The cables of ip1 and ip2 are swapped: ip1's address answers as machine 2. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/ip1", &r, "{s:{s:i}}", "bmc", "port",
	                      base + 1),
	                 200);
	reply_free(&r);
	job = act("POST", "/v1/nodes/ip1/verify", NULL);
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "identity_mismatch");
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"), "SIMSN0002"));
	json_decref(job);
	assert_int_equal(
	        call(&S, S.admin, "PATCH", "/v1/nodes/ip1", &r, "{s:{s:i}}", "bmc", "port", base),
	        200);
	reply_free(&r);
}

static int64_t
ms_between(json_t *job, const char *a, const char *b)
{
	int64_t x = 0, y = 0;
	struct tm tm = {0};
	int ms1 = 0, ms2 = 0;

	sscanf(str(job, a), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms1);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	x = (int64_t)timegm(&tm) * 1000 + ms1;
	sscanf(str(job, b), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms2);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	y = (int64_t)timegm(&tm) * 1000 + ms2;
	return y - x;
}

static void
test_failures(void **state)
{
	struct reply r;
	json_t *job;
	char path[160], out[256];
	int i;

	(void)state;
	/* Wrong password: refused at once, not retried. */
	job = act("PUT", "/v1/nodes/ip3/power", "{\"target\":\"on\"}");
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_auth");
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	assert_true(ms_between(job, "started_at", "finished_at") < 1000);
	json_decref(job);
	/* The BMC answers with an error completion code: a permanent refusal. */
	snprintf(path, sizeof path, "%s/bmc2/fail", run);
	fclose(fopen(path, "w"));
	job = act("PUT", "/v1/nodes/ip2/power", "{\"target\":\"on\"}");
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_rejected");
	json_decref(job);
	unlink(path);
	/* The BMC is down: an attempt fails within the configured 2 s session timeout; when it
	 * comes back, the retry succeeds. */
	sim("stop", run2, base2, 0);
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/ip4/power", &r, "{s:s}", "target", "on"), 202);
	snprintf(path, sizeof path, "/v1/jobs/%s", str(r.json, "id"));
	reply_free(&r);
	for (i = 0;; i++) {
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		if (json_integer_value(json_object_get(r.json, "attempts")) >= 1 &&
		    json_is_object(json_object_get(r.json, "error")))
			break;
		if (i == 80)
			fail_msg("no failed attempt recorded: %s", r.body);
		reply_free(&r);
		usleep(100000);
	}
	assert_string_equal(str(json_object_get(r.json, "error"), "code"), "bmc_unreachable");
	assert_true(ms_between(r.json, "started_at", "updated_at") < 4000);
	reply_free(&r);
	assert_int_equal(sim("start", run2, base2, 1), 0);
	job = wait_job(&S, path + strlen("/v1/jobs/"), 60);
	assert_string_equal(str(job, "state"), "succeeded");
	assert_true(json_integer_value(json_object_get(job, "attempts")) >= 2);
	json_decref(job);
	ipmitool(base2, "chassis power status", out, sizeof out);
	assert_non_null(strstr(out, "is on"));
}

/* A sweep records what the BMCs say, including changes made behind Rackpilot's back. */
static void
test_sweep(void **state)
{
	struct reply r;
	char out[256];
	int i, done = 0;

	(void)state;
	ipmitool(base + 1, "chassis power on", out, sizeof out);
	assert_int_equal(call(&S, S.admin, "POST", "/v1/power/sync", &r, NULL), 202);
	reply_free(&r);
	for (i = 0; i < 200 && !done; i++) {
		usleep(50000);
		assert_int_equal(call(&S, S.admin, "GET", "/v1/power/sync", &r, NULL), 200);
		done = !json_is_true(json_object_get(r.json, "running")) &&
		       json_is_object(json_object_get(r.json, "last"));
		reply_free(&r);
	}
	assert_true(done);
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/ip2", &r, NULL), 200);
	assert_string_equal(str(r.json, "power_state"), "on");
	reply_free(&r);
	assert_true(count_all(&S, "/v1/events?node=ip2&action=node.power") >= 1);
	/* ip3's wrong password counts against its BMC, like any failed contact. */
	assert_int_equal(call(&S, S.admin, "GET", "/v1/nodes/ip3", &r, NULL), 200);
	assert_non_null(strstr(str(json_object_get(r.json, "bmc"), "last_error"), "password"));
	reply_free(&r);
}

/* The node's bmc.options.workarounds as compact JSON text ("null" when absent). */
static void
node_workarounds(const char *node, char *out, size_t len)
{
	struct reply r;
	char path[80], *t;

	snprintf(path, sizeof path, "/v1/nodes/%s", node);
	assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
	t = json_dumps(json_object_get(json_object_get(json_object_get(r.json, "bmc"), "options"),
	                               "workarounds"),
	               JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(out, len, "%s", t ? t : "null");
	free(t);
	reply_free(&r);
}

static long
detected_events(const char *node)
{
	char path[120];

	snprintf(path, sizeof path, "/v1/events?node=%s&action=bmc.workarounds_detected", node);
	return count_all(&S, path);
}

/* No workarounds configured; ipmi_sim needs opensesspriv: the first job finds it, saves it
 * with an event, and the next session opens directly. */
static void
test_detect(void **state)
{
	struct reply r;
	char w[128];
	json_t *job, *res;

	(void)state;
	node_workarounds("ipd", w, sizeof w);
	assert_string_equal(w, "null");
	expect(act("PUT", "/v1/nodes/ipd/power", "{\"target\":\"on\"}"), "succeeded");
	assert_int_equal(power_at(base3), 1);
	/* The plain session, refused ("privilege level cannot be obtained"), then opensesspriv. */
	assert_int_equal(sessions(&r_detect), 2);
	node_workarounds("ipd", w, sizeof w);
	assert_string_equal(w, "[\"opensesspriv\"]");
	assert_int_equal(detected_events("ipd"), 1);
	/* The second job opens one session, with the saved workaround, and saves nothing. */
	expect(act("PUT", "/v1/nodes/ipd/power", "{\"target\":\"off\"}"), "succeeded");
	assert_int_equal(power_at(base3), 0);
	assert_int_equal(sessions(&r_detect), 3);
	assert_int_equal(detected_events("ipd"), 1);
	/* Verify names the quirk the BMC needs. */
	job = act("POST", "/v1/nodes/ipd/verify", NULL);
	assert_string_equal(str(job, "state"), "succeeded");
	res = json_object_get(job, "result");
	assert_int_equal(json_array_size(json_object_get(res, "workarounds")), 1);
	assert_string_equal(
	        json_string_value(json_array_get(json_object_get(res, "workarounds"), 0)),
	        "opensesspriv");
	assert_null(json_object_get(res, "workarounds_detected"));
	json_decref(job);
	assert_int_equal(sessions(&r_detect), 4);
	/* Cleared by the operator (null): found again by the next job. */
	assert_int_equal(call(&S, S.admin, "PATCH", "/v1/nodes/ipd", &r, "{s:{s:{s:n}}}", "bmc",
	                      "options", "workarounds"),
	                 200);
	reply_free(&r);
	node_workarounds("ipd", w, sizeof w);
	assert_string_equal(w, "null");
	expect(act("PUT", "/v1/nodes/ipd/power", "{\"target\":\"on\"}"), "succeeded");
	assert_int_equal(sessions(&r_detect), 6);
	node_workarounds("ipd", w, sizeof w);
	assert_string_equal(w, "[\"opensesspriv\"]");
	assert_int_equal(detected_events("ipd"), 2);
}

/* A verify that is the node's first contact finds the quirk and says so. */
static void
test_detect_verify(void **state)
{
	char w[128];
	json_t *job, *res;

	(void)state;
	job = act("POST", "/v1/nodes/ipv/verify", NULL);
	assert_string_equal(str(job, "state"), "succeeded");
	res = json_object_get(job, "result");
	assert_string_equal(
	        json_string_value(json_array_get(json_object_get(res, "workarounds"), 0)),
	        "opensesspriv");
	assert_true(json_is_true(json_object_get(res, "workarounds_detected")));
	assert_string_equal(str(json_object_get(res, "identity"), "serial"), "SIMSN0002");
	json_decref(job);
	node_workarounds("ipv", w, sizeof w);
	assert_string_equal(w, "[\"opensesspriv\"]");
	assert_int_equal(detected_events("ipv"), 1);
}

/* A wrong password is refused at once: opensesspriv gets past the quirk to "password invalid",
 * which ends the probing (2 sessions, not 1 + 3), and nothing is saved. */
static void
test_detect_wrong_password(void **state)
{
	char w[128];
	json_t *job;

	(void)state;
	job = act("PUT", "/v1/nodes/ipw/power", "{\"target\":\"on\"}");
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_auth");
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"), "password invalid"));
	assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
	assert_true(ms_between(job, "started_at", "finished_at") < 1000);
	json_decref(job);
	assert_int_equal(sessions(&r_auth), 2);
	node_workarounds("ipw", w, sizeof w);
	assert_string_equal(w, "null");
	assert_int_equal(detected_events("ipw"), 0);
}

/* A BMC that does not answer at all costs one session timeout per attempt, no probing. */
static void
test_detect_unreachable(void **state)
{
	struct reply r;
	char path[160], w[128];
	int i;

	(void)state;
	assert_int_equal(
	        call(&S, S.admin, "PUT", "/v1/nodes/ipu/power", &r, "{s:s}", "target", "on"), 202);
	snprintf(path, sizeof path, "/v1/jobs/%s", str(r.json, "id"));
	reply_free(&r);
	for (i = 0;; i++) {
		assert_int_equal(call(&S, S.admin, "GET", path, &r, NULL), 200);
		if (json_integer_value(json_object_get(r.json, "attempts")) >= 1 &&
		    json_is_object(json_object_get(r.json, "error")))
			break;
		if (i == 80)
			fail_msg("no failed attempt recorded: %s", r.body);
		reply_free(&r);
		usleep(100000);
	}
	/* Read before the retry (1 s later) opens another. */
	assert_int_equal(sessions(&r_down), 1);
	assert_string_equal(str(json_object_get(r.json, "error"), "code"), "bmc_unreachable");
	assert_true(ms_between(r.json, "started_at", "updated_at") < 4000);
	reply_free(&r);
	assert_int_equal(call(&S, S.admin, "DELETE", path, &r, NULL), 200);
	reply_free(&r);
	node_workarounds("ipu", w, sizeof w);
	assert_string_equal(w, "null");
}

/* Workarounds an operator set stay as set: [] means none, and nothing else is tried. */
static void
test_configured(void **state)
{
	char w[128];
	json_t *job;

	(void)state;
	job = act("PUT", "/v1/nodes/ipn/power", "{\"target\":\"on\"}");
	assert_string_equal(str(job, "state"), "failed");
	assert_string_equal(str(json_object_get(job, "error"), "code"), "bmc_auth");
	assert_non_null(strstr(str(json_object_get(job, "error"), "message"),
	                       "options.workarounds is set"));
	json_decref(job);
	node_workarounds("ipn", w, sizeof w);
	assert_string_equal(w, "[]");
	assert_int_equal(detected_events("ipn"), 0);
	/* ip1 (["opensesspriv"] from its enrollment) has run many jobs by now. */
	node_workarounds("ip1", w, sizeof w);
	assert_string_equal(w, "[\"opensesspriv\"]");
	assert_int_equal(detected_events("ip1"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_power),
	        cmocka_unit_test(test_boot),
	        cmocka_unit_test(test_verify),
	        cmocka_unit_test(test_failures),
	        /* Before the sweep, which contacts every node. */
	        cmocka_unit_test(test_detect),
	        cmocka_unit_test(test_detect_verify),
	        cmocka_unit_test(test_detect_wrong_password),
	        cmocka_unit_test(test_detect_unreachable),
	        cmocka_unit_test(test_configured),
	        cmocka_unit_test(test_sweep),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
