/*
 * Rack acceptance across nodes (docs/acceptance.md): the fabric check's pairs and the NCCL
 * run. Every node's acceptance job calls in here for its own fabric and nccl checks; a pair
 * is driven by its server's job (the NCCL run by the first node's), one step per look, each
 * step one store transaction that names the child jobs it queues, so a restart follows the
 * same children and never queues a second. The nodes stay in the agent ramdisk meanwhile: the
 * pxe check's commission holds in phase "hold" until their checks settle (provision.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept/accept.h"
#include "internal.h"

#define FABRIC_TCP_IPERF 5201
#define FABRIC_TCP_PERF  18515
#define NCCL_PORT        29500
#define DRIVE_LOOK_MS    500  /* while this job drives a test */
#define WAIT_LOOK_MS     1000 /* while it waits for others */
#define OUTPUT_KEEP      8192 /* of each side's output, kept as evidence */

struct cross {
	struct work *w;
	const char *run;
	json_t *view;    /* rp_store_accept_cross */
	json_t *cabling; /* the node's cabling entries (borrowed) */
	json_t *me;      /* this node's row in view.nodes */
	unsigned look_ms;
	char *why;
	size_t whylen;
};

static const char *
sval(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int
settled(const char *st)
{
	return st && (!strcmp(st, "passed") || !strcmp(st, "failed") || !strcmp(st, "skipped"));
}

static json_t *
node_row(struct cross *x, int64_t id)
{
	json_t *n;
	size_t i;

	json_array_foreach(json_object_get(x->view, "nodes"), i, n)
	{
		if (json_integer_value(json_object_get(n, "id")) == id)
			return n;
	}
	return NULL;
}

static const char *
node_name(struct cross *x, int64_t id)
{
	return sval(node_row(x, id), "name") ?: "(deleted node)";
}

/* Whether a node can take part: 1 its agent is up and held for the rack's tests; 0 it will
 * not be (why says so); -1 not yet (its pxe check runs). */
static int
available(json_t *n, char *why, size_t len)
{
	const char *pxe = sval(n, "pxe");

	if (json_is_true(json_object_get(n, "held")))
		return 1;
	if (!json_is_true(json_object_get(n, "alive"))) {
		snprintf(why, len, "%s's acceptance job ended (cancelled?)", sval(n, "name"));
		return 0;
	}
	if (pxe == NULL) {
		snprintf(why, len, "the run has no pxe check, whose boot the tests run in");
		return 0;
	}
	if (!strcmp(pxe, "pending") ||
	    (!strcmp(pxe, "running") && !json_is_true(json_object_get(n, "pxe_ended"))))
		return -1;
	snprintf(why, len, "%s did not stay in the agent ramdisk for the tests (pxe check %s)",
	         sval(n, "name"), pxe);
	return 0;
}

static json_t *
options(struct cross *x, const char *kind)
{
	json_t *o = json_object_get(json_object_get(x->view, "options"), kind);

	return json_is_object(o) ? o : NULL;
}

static int
opt_int(struct cross *x, const char *kind, const char *key, int dflt)
{
	json_t *v = json_object_get(options(x, kind), key);

	return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static json_t *
bom_of(struct cross *x, json_t *n)
{
	json_t *c = NULL, *bom;

	if (sval(n, "class") == NULL ||
	    rp_store_class_get(x->w->j->st, sval(n, "class"), &c) != RP_ERR_OK)
		return NULL;
	bom = json_incref(json_object_get(c, "bom"));
	json_decref(c);
	return bom;
}

static json_t *
inventory_of(struct cross *x, json_t *n)
{
	json_t *inv = NULL, *data;

	if (rp_store_node_inventory(x->w->j->st, sval(n, "uuid"), &inv) != RP_ERR_OK)
		return NULL;
	data = json_incref(json_object_get(inv, "data"));
	json_decref(inv);
	return data;
}

/* The address the node's SSH (and agent) is reached at, into buf; "" when none. */
static const char *
ssh_address(struct cross *x, json_t *n, char *buf, size_t len)
{
	json_t *t = NULL;

	buf[0] = '\0';
	if (rp_store_ssh_target(x->w->j->st, json_integer_value(json_object_get(n, "id")), &t) ==
	    RP_ERR_OK)
		snprintf(buf, len, "%s", sval(t, "address") ?: "");
	json_decref(t);
	return buf;
}

/* A steps job of one shell step, not mutating (the commission holds the node's slot), named
 * by a fresh id so that the pair's tests can name it in the same transaction. */
static json_t *
shell_job(const char *step, const char *command, json_t *env, int timeout_s, int ready_port,
          json_t *about, char uuid[RP_UUID_BUF])
{
	json_t *st;

	if (rp_uuid_new(uuid) < 0)
		return NULL;
	st = json_pack("{s:s, s:s, s:s, s:i}", "id", step, "type", "shell", "command", command,
	               "timeout_s", timeout_s);
	if (st && env)
		json_object_set(st, "env", env);
	if (st && ready_port > 0)
		json_object_set_new(st, "ready_port", json_integer(ready_port));
	return json_pack("{s:s, s:s, s:{s:[o], s:O}, s:b, s:i}", "type", "steps", "uuid", uuid,
	                 "params", "plan", st, "acceptance", about, "mutating", 0, "max_attempts",
	                 1);
}

/* A child job's state and its one step: NULL when it cannot be read now, with *gone set when
 * it does not exist (pruned, or never queued): the test cannot wait for it. */
static json_t *
child(struct cross *x, const char *uuid, json_t **step, int *gone)
{
	json_t *job = NULL;
	enum rp_err e = uuid ? rp_store_job_get(x->w->j->st, uuid, &job) : RP_ERR_NOT_FOUND;

	*gone = e == RP_ERR_NOT_FOUND;
	if (e != RP_ERR_OK)
		return NULL;
	*step = json_array_get(json_object_get(job, "steps"), 0);
	return job;
}

static int
job_ended(json_t *job)
{
	const char *st = sval(job, "state") ?: "";

	return strcmp(st, "queued") != 0 && strcmp(st, "running") != 0;
}

static void
cancel(struct cross *x, const char *uuid)
{
	json_t *out = NULL, *detail = NULL;

	if (uuid)
		rp_jobs_cancel(x->w->j, uuid, "rackpilotd", &out, &detail);
	json_decref(out);
	json_decref(detail);
}

/* The last OUTPUT_KEEP bytes of a step's output. */
static json_t *
output_of(json_t *step)
{
	const char *o = sval(step, "output") ?: "";
	size_t n = strlen(o);

	return json_string(n > OUTPUT_KEEP ? o + n - OUTPUT_KEEP : o);
}

/* The last non-empty line of a step's output, for messages. */
static const char *
last_line(json_t *step, char *buf, size_t len)
{
	const char *o = sval(step, "output") ?: "";
	size_t end = strlen(o), start;

	while (end > 0 && (o[end - 1] == '\n' || o[end - 1] == '\r'))
		end--;
	for (start = end; start > 0 && o[start - 1] != '\n'; start--)
		;
	snprintf(buf, len, "%.*s", (int)(end - start), o + start);
	return buf;
}

/* Write pair p back with upd (and the jobs to queue): 0, or 1 when someone moved it first
 * (look again), or -1 on store trouble. */
static int
update(struct cross *x, json_t *p, const char *state, const char *message, json_t *tests,
       json_t *jobs)
{
	json_t *upd = json_pack("{s:s, s:s?, s:O}", "state", state, "message", message, "tests",
	                        tests ? tests : json_null());
	enum rp_err e = rp_store_accept_pair_update(
	        x->w->j->st, x->run, sval(p, "kind"),
	        (int)json_integer_value(json_object_get(p, "round")),
	        json_integer_value(json_object_get(p, "server")),
	        json_integer_value(json_object_get(p, "rev")), upd, jobs);

	json_decref(upd);
	x->look_ms = DRIVE_LOOK_MS;
	if (e == RP_ERR_OK || e == RP_ERR_DUPLICATE)
		return e == RP_ERR_DUPLICATE;
	snprintf(x->why, x->whylen, "could not record a %s test: %s", sval(p, "kind"),
	         rp_err_message(e));
	return -1;
}

/* ---- Fabric ----------------------------------------------------------------------------- */

/* Lay the pairs out once, over the run's nodes with a fabric check, in rack order. */
static int
fabric_layout(struct cross *x)
{
	json_t *ids = json_array(), *n, *sched, *pairs = json_array(), *round, *pr;
	size_t i, r, k;
	enum rp_err e;

	json_array_foreach(json_object_get(x->view, "nodes"), i, n)
	{
		if (sval(n, "fabric"))
			json_array_append(ids, json_object_get(n, "id"));
	}
	sched = rp_accept_fabric_schedule(
	        json_array_size(ids),
	        json_is_true(json_object_get(options(x, "fabric"), "all_pairs")));
	json_array_foreach(sched, r, round)
	{
		json_array_foreach(round, k, pr)
		{
			json_array_append_new(
			        pairs,
			        json_pack("{s:I, s:O, s:O}", "round", (json_int_t)r, "server",
			                  json_array_get(ids,
			                                 json_integer_value(json_array_get(pr, 0))),
			                  "client",
			                  json_array_get(
			                          ids, json_integer_value(json_array_get(pr, 1)))));
		}
	}
	e = sched ? rp_store_accept_pairs_init(x->w->j->st, x->run, "fabric", pairs)
	          : RP_ERR_INTERNAL;
	json_decref(sched);
	json_decref(pairs);
	json_decref(ids);
	if (e != RP_ERR_OK) {
		snprintf(x->why, x->whylen, "could not lay out the fabric pairs: %s",
		         rp_err_message(e));
		return -1;
	}
	x->look_ms = DRIVE_LOOK_MS;
	return 0;
}

/* Start pair p: both nodes up, then its tests from the class's bom, the two inventories and
 * the server's cabling. */
static int
fabric_start(struct cross *x, json_t *p)
{
	json_t *s = node_row(x, json_integer_value(json_object_get(p, "server")));
	json_t *c = node_row(x, json_integer_value(json_object_get(p, "client")));
	json_t *bom = NULL, *inv_s = NULL, *inv_c = NULL, *tests = NULL, *t;
	char why[300] = "", addr[256];
	int as, ac, rc;
	size_t i;

	if (s == NULL || c == NULL)
		return update(x, p, "skipped", "a node of the pair was deleted", NULL, NULL);
	as = available(s, why, sizeof why);
	ac = as == 0 ? 0 : available(c, why, sizeof why);
	if (as == 0 || ac == 0)
		return update(x, p, "skipped", why, NULL, NULL);
	if (as < 0 || ac < 0)
		return 0; /* a node still boots */
	bom = bom_of(x, s);
	inv_s = inventory_of(x, s);
	inv_c = inventory_of(x, c);
	if (inv_s == NULL || inv_c == NULL) {
		snprintf(why, sizeof why, "%s reported no inventory", sval(inv_s ? c : s, "name"));
		rc = update(x, p, "skipped", why, NULL, NULL);
		goto out;
	}
	tests = rp_accept_fabric_tests(bom, inv_s, inv_c, x->cabling,
	                               ssh_address(x, s, addr, sizeof addr)[0] ? addr : NULL,
	                               options(x, "fabric"));
	if (tests == NULL || json_array_size(tests) == 0) {
		rc = update(x, p, "skipped",
		            "nothing to test: no InfiniBand/RoCE port both nodes have, and no "
		            "Ethernet interface in the cabling plan, the bom or the SSH address",
		            NULL, NULL);
		goto out;
	}
	json_array_foreach(tests, i, t) json_object_set_new(t, "state", json_string("pending"));
	rc = update(x, p, "running", NULL, tests, NULL);
out:
	json_decref(bom);
	json_decref(inv_s);
	json_decref(inv_c);
	json_decref(tests);
	return rc;
}

/* The pair's verdict from its settled tests. */
static int
fabric_finish(struct cross *x, json_t *p, json_t *tests)
{
	int passed = 0, failed = 0, skipped = 0;
	const char *first = NULL;
	char msg[600];
	json_t *t;
	size_t i;

	json_array_foreach(tests, i, t)
	{
		const char *st = sval(t, "state");

		passed += !strcmp(st, "passed");
		skipped += !strcmp(st, "skipped");
		if (!strcmp(st, "failed") && failed++ == 0)
			first = sval(t, "message");
	}
	if (failed) {
		snprintf(msg, sizeof msg, "%d of %zu test(s) failed: %s", failed,
		         json_array_size(tests), first ? first : "?");
		return update(x, p, "failed", msg, tests, NULL);
	}
	if (passed == 0) {
		snprintf(msg, sizeof msg, "every test skipped: %s",
		         sval(json_array_get(tests, 0), "message") ?: "?");
		return update(x, p, "skipped", msg, tests, NULL);
	}
	snprintf(msg, sizeof msg, "%d test(s) passed%s", passed, skipped ? ", some skipped" : "");
	return update(x, p, "passed", msg, tests, NULL);
}

/* A rate for people: Gb/s with two decimals, below 1 Gb/s in Mb/s (a 5 Mb/s link is not
 * "0.00 Gb/s"). */
static const char *
rate(double gbps, char *buf, size_t len)
{
	if (gbps >= 1 || gbps <= 0)
		snprintf(buf, len, "%.2f Gb/s", gbps);
	else
		snprintf(buf, len, "%.1f Mb/s", gbps * 1000);
	return buf;
}

/* When the server side's ready time counts from: its step's start on the node, or, before
 * the agent has started it, its queueing plus 30 s for the queue and the SSH session. */
static int64_t
ready_from(json_t *t, json_t *step)
{
	int64_t at;

	if (sval(step, "started_at") && rp_time_parse(sval(step, "started_at"), &at) == 0)
		return at;
	return json_integer_value(json_object_get(t, "started")) + 30000;
}

/* A test whose child job vanished (pruned by hand, a database restored): it cannot be
 * waited for. */
static int
test_gone(struct cross *x, json_t *p, json_t *tests, json_t *t, const char *side)
{
	char msg[200];

	snprintf(msg, sizeof msg, "the test's %s-side job is gone", side);
	json_object_set_new(t, "state", json_string("failed"));
	json_object_set_new(t, "message", json_string(msg));
	json_object_del(t, "verdict");
	return update(x, p, "running", NULL, tests, NULL);
}

/* One step of test t (index i) of pair p. */
static int
fabric_test(struct cross *x, json_t *p, json_t *tests, json_t *t)
{
	json_t *s = node_row(x, json_integer_value(json_object_get(p, "server")));
	json_t *c = node_row(x, json_integer_value(json_object_get(p, "client")));
	int dur = opt_int(x, "fabric", "duration_s", 10);
	int timeout = opt_int(x, "fabric", "timeout_s", dur + 120);
	int ready = opt_int(x, "fabric", "ready_timeout_s", 30);
	/* A port of the pair's own: nodes that share a network (a test rig, a VM host) must not
	 * see each other's listeners as their own. */
	int port = (!strcmp(sval(t, "tool") ?: "", "iperf3") ? FABRIC_TCP_IPERF : FABRIC_TCP_PERF) +
	           (int)(json_integer_value(json_object_get(s, "index")) % 4096);
	int gone = 0;
	int64_t now = rp_time_now_ms();
	json_t *sjob = NULL, *cjob = NULL, *sst = NULL, *cst = NULL, *jobs = NULL, *about;
	char scmd[2048], ccmd[2048], uuid[RP_UUID_BUF], msg[700], line[300];
	int rc = 0;

	if (sval(t, "skip")) {
		json_object_set_new(t, "state", json_string("skipped"));
		json_object_set_new(t, "message", json_string(sval(t, "skip")));
		return update(x, p, "running", NULL, tests, NULL);
	}
	/* The port chosen when the test began: the rack's order may change under a run. */
	if (json_is_integer(json_object_get(t, "tcp_port")))
		port = (int)json_integer_value(json_object_get(t, "tcp_port"));
	if (rp_accept_fabric_commands(t, port, dur, scmd, sizeof scmd, ccmd, sizeof ccmd) < 0) {
		json_object_set_new(t, "state", json_string("failed"));
		json_object_set_new(t, "message",
		                    json_string("rackpilotd could not build the test's commands"));
		return update(x, p, "running", NULL, tests, NULL);
	}
	about = json_pack("{s:s, s:s, s:O, s:O}", "run", x->run, "check", "fabric", "round",
	                  json_object_get(p, "round"), "port", json_object_get(t, "port"));
	if (sval(t, "server_job") == NULL) {
		/* 1: the server side, which says when it listens. */
		json_t *job =
		        shell_job("fabric-server", scmd, NULL, timeout + ready, port, about, uuid);

		if (job == NULL)
			goto out; /* out of memory: look again */
		json_object_set_new(t, "tcp_port", json_integer(port));
		json_object_set_new(t, "server_job", json_string(uuid));
		json_object_set_new(t, "started", json_integer(now));
		json_object_set_new(t, "server_command", json_string(scmd));
		jobs = json_pack("[{s:O, s:o}]", "node", json_object_get(s, "id"), "job", job);
		rc = update(x, p, "running", NULL, tests, jobs);
		goto out;
	}
	if ((sjob = child(x, sval(t, "server_job"), &sst, &gone)) == NULL) {
		if (gone)
			rc = test_gone(x, p, tests, t, "server");
		goto out; /* else not readable now: look again */
	}
	if (sval(t, "client_job") == NULL) {
		json_t *prog = json_object_get(sst, "progress");

		if (json_object_get(t, "verdict") && job_ended(sjob)) {
			/* Timed out, and the server side has ended since. */
			json_object_set(t, "state", json_object_get(t, "verdict"));
			json_object_del(t, "verdict");
			rc = update(x, p, "running", NULL, tests, NULL);
		} else if (job_ended(sjob)) {
			/* Ended before a client came: the tool is absent, or it failed to listen.
			 */
			int skip = json_integer_value(json_object_get(sst, "exit_code")) == 77;

			snprintf(msg, sizeof msg, "%s on %s %s: %s", sval(t, "tool"),
			         sval(s, "name"),
			         skip ? "cannot run" : "ended before a client connected",
			         last_line(sst, line, sizeof line)[0]
			                 ? line
			                 : sval(json_object_get(sjob, "error"), "message") ?: "?");
			json_object_set_new(t, "state", json_string(skip ? "skipped" : "failed"));
			json_object_set_new(t, "message", json_string(msg));
			json_object_set_new(t, "output",
			                    json_pack("{s:o}", "server", output_of(sst)));
			rc = update(x, p, "running", NULL, tests, NULL);
		} else if (json_object_get(t, "verdict") == NULL &&
		           json_is_true(json_object_get(prog, "ready"))) {
			/* 2: it listens: the client, on the other node. */
			json_t *job =
			        shell_job("fabric-client", ccmd, NULL, timeout, 0, about, uuid);

			if (job == NULL)
				goto out;
			json_object_set_new(t, "client_job", json_string(uuid));
			json_object_set_new(t, "client_started", json_integer(now));
			json_object_set_new(t, "client_command", json_string(ccmd));
			jobs = json_pack("[{s:O, s:o}]", "node", json_object_get(c, "id"), "job",
			                 job);
			rc = update(x, p, "running", NULL, tests, jobs);
		} else if (json_object_get(t, "verdict") == NULL &&
		           now - ready_from(t, sst) > (int64_t)ready * 1000) {
			/* Never ready: failed, settled once the server side has ended (4). */
			cancel(x, sval(t, "server_job"));
			snprintf(msg, sizeof msg,
			         "%s's server side on %s (port %s) did not listen within %d s",
			         sval(t, "tool"), sval(s, "name"), sval(t, "port"), ready);
			json_object_set_new(t, "verdict", json_string("failed"));
			json_object_set_new(t, "message", json_string(msg));
			json_object_set_new(t, "output",
			                    json_pack("{s:o}", "server", output_of(sst)));
			rc = update(x, p, "running", NULL, tests, NULL);
		} else if (json_object_get(t, "verdict"))
			cancel(x, sval(t, "server_job")); /* until it has ended */
		goto out;
	}
	if ((cjob = child(x, sval(t, "client_job"), &cst, &gone)) == NULL) {
		if (gone) {
			cancel(x, sval(t, "server_job"));
			rc = test_gone(x, p, tests, t, "client");
		}
		goto out;
	}
	if (!job_ended(cjob)) {
		if (now - json_integer_value(json_object_get(t, "client_started")) >
		    (int64_t)(timeout + 30) * 1000) {
			cancel(x, sval(t, "client_job"));
			cancel(x, sval(t, "server_job"));
		}
		goto out;
	}
	if (json_object_get(t, "verdict") == NULL) {
		/* 3: the client ended: the figure against the envelope. */
		double gbps = -1, min = json_number_value(json_object_get(t, "min_gbps"));
		const char *out = sval(cst, "output") ?: "";
		char why[256] = "";
		const char *v;
		int code = (int)json_integer_value(json_object_get(cst, "exit_code"));

		if (!strcmp(sval(cjob, "state"), "cancelled") && code != 77) {
			v = "failed";
			snprintf(msg, sizeof msg, "%s → %s on %s: no result within %d s",
			         sval(c, "name"), sval(s, "name"), sval(t, "port"), timeout);
		} else if (code == 77) {
			v = "skipped";
			snprintf(msg, sizeof msg, "%s on %s cannot run: %s", sval(t, "tool"),
			         sval(c, "name"), last_line(cst, line, sizeof line));
		} else if ((!strcmp(sval(t, "tool"), "iperf3")
		                    ? rp_accept_parse_iperf3(out, &gbps, why, sizeof why)
		                    : rp_accept_parse_perftest(out, &gbps, why, sizeof why)) < 0) {
			v = "failed";
			snprintf(msg, sizeof msg, "%s → %s on %s: %s (exit %d)", sval(c, "name"),
			         sval(s, "name"), sval(t, "port"), why, code);
		} else {
			char f1[32], f2[32], f3[32];
			double lr = json_number_value(json_object_get(t, "line_gbps"));

			v = gbps >= min ? "passed" : "failed";
			snprintf(msg, sizeof msg,
			         "%s → %s on %s: %s, expected at least %s (%.0f %% of %s)",
			         sval(c, "name"), sval(s, "name"), sval(t, "port"),
			         rate(gbps, f1, sizeof f1), rate(min, f2, sizeof f2),
			         lr > 0 ? 100.0 * min / lr : 0.0, rate(lr, f3, sizeof f3));
			json_object_set_new(t, "measured_gbps",
			                    json_real(round(gbps * 1000) / 1000));
		}
		json_object_set_new(t, "verdict", json_string(v));
		json_object_set_new(t, "message", json_string(msg));
		json_object_set_new(t, "output",
		                    json_pack("{s:o, s:o}", "client", output_of(cst), "server",
		                              output_of(sst)));
		if (!job_ended(sjob))
			cancel(x,
			       sval(t,
			            "server_job")); /* iperf3 -1 and perftest end by themselves */
		rc = update(x, p, "running", NULL, tests, NULL);
		goto out;
	}
	/* 4: settled once the server side has ended too, so the next test finds the port free. */
	if (!job_ended(sjob))
		cancel(x, sval(t, "server_job")); /* again: a cancel may come before it started */
	else {
		json_object_set(t, "state", json_object_get(t, "verdict"));
		json_object_del(t, "verdict");
		json_object_set_new(
		        t, "output",
		        json_pack("{s:O, s:o}", "client",
		                  json_object_get(json_object_get(t, "output"), "client"), "server",
		                  output_of(sst)));
		rc = update(x, p, "running", NULL, tests, NULL);
	}
out:
	json_decref(about);
	json_decref(sjob);
	json_decref(cjob);
	json_decref(jobs);
	return rc;
}

static int
fabric_drive(struct cross *x, json_t *p)
{
	json_t *tests, *t;
	size_t i;

	if (!strcmp(sval(p, "state"), "pending"))
		return fabric_start(x, p);
	tests = json_deep_copy(json_object_get(p, "tests"));
	json_array_foreach(tests, i, t)
	{
		if (!settled(sval(t, "state"))) {
			int rc = fabric_test(x, p, tests, t);

			json_decref(tests);
			return rc;
		}
	}
	{
		int rc = fabric_finish(x, p, tests);

		json_decref(tests);
		return rc;
	}
}

/* Whether every fabric pair node is in failed (and it is in one). */
static int
all_failed(struct cross *x, int64_t node)
{
	json_t *p;
	size_t i;
	int in = 0;

	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		if (strcmp(sval(p, "kind"), "fabric") != 0 ||
		    (json_integer_value(json_object_get(p, "server")) != node &&
		     json_integer_value(json_object_get(p, "client")) != node))
			continue;
		if (strcmp(sval(p, "state"), "failed") != 0)
			return 0;
		in = 1;
	}
	return in;
}

/* This node's fabric verdict from every settled pair it is in: 0 with *res, 1 not yet. A
 * failed pair counts against the node unless its peer failed every pair it is in while this
 * node passed one: then the peer is the likely cause, its result fails, and this one passes
 * saying so (a ring of three with one slow node fails that node, not all three). */
static int
fabric_verdict(struct cross *x, json_t **res)
{
	int64_t me = json_integer_value(json_object_get(x->me, "id"));
	json_t *p, *t, *findings = json_array(), *mine = json_array(), *blame = json_array();
	int passed = 0, failed = 0, skipped = 0, explained = 0, tskipped = 0;
	const char *tskipwhy = NULL;
	const char *skipwhy = NULL;
	size_t i, k;

	/* Every pair, not only this node's: whom a failure is blamed on needs them all. */
	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		if (!strcmp(sval(p, "kind"), "fabric") && !settled(sval(p, "state"))) {
			json_decref(findings);
			json_decref(mine);
			json_decref(blame);
			return 1;
		}
	}
	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		int64_t s = json_integer_value(json_object_get(p, "server"));
		int64_t c = json_integer_value(json_object_get(p, "client"));
		json_t *brief;

		if (strcmp(sval(p, "kind"), "fabric") != 0 || (s != me && c != me))
			continue;
		brief = json_array();
		json_array_foreach(json_object_get(p, "tests"), k, t)
		{
			json_array_append_new(
			        brief, json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "port",
			                         json_object_get(t, "port"), "tool",
			                         json_object_get(t, "tool"), "state",
			                         json_object_get(t, "state"), "measured_gbps",
			                         json_object_get(t, "measured_gbps"), "min_gbps",
			                         json_object_get(t, "min_gbps"), "line_gbps",
			                         json_object_get(t, "line_gbps")));
			if (!strcmp(sval(t, "state") ?: "", "skipped") && tskipped++ == 0)
				tskipwhy = sval(t, "message");
			if (!strcmp(sval(t, "state") ?: "", "failed"))
				json_array_append_new(
				        findings,
				        json_pack("{s:s, s:O?, s:O?, s:O?, s:s, s:s, s:s}", "item",
				                  sval(t, "port") ?: "?", "expected",
				                  json_object_get(t, "min_gbps"), "actual",
				                  json_object_get(t, "measured_gbps"), "message",
				                  json_object_get(t, "message"), "peer",
				                  node_name(x, s == me ? c : s), "node",
				                  node_name(x, me), "fix",
				                  "check the cables, transceivers and switch ports "
				                  "of this "
				                  "port on both nodes; a node whose every pair "
				                  "fails is "
				                  "the likely cause"));
		}
		json_array_append_new(mine,
		                      json_pack("{s:O, s:s, s:s, s:O, s:O?, s:o}", "round",
		                                json_object_get(p, "round"), "server",
		                                node_name(x, s), "client", node_name(x, c), "state",
		                                json_object_get(p, "state"), "message",
		                                json_object_get(p, "message"), "tests", brief));
		passed += !strcmp(sval(p, "state"), "passed");
		if (!strcmp(sval(p, "state"), "failed")) {
			failed++;
			if (all_failed(x, s == me ? c : s)) {
				explained++;
				json_array_append_new(blame,
				                      json_string(node_name(x, s == me ? c : s)));
			}
		}
		if (!strcmp(sval(p, "state"), "skipped") && skipped++ == 0)
			skipwhy = sval(p, "message");
	}
	if (failed && failed == explained && passed > 0) {
		char msg[400];

		snprintf(msg, sizeof msg,
		         "every pair at its expected rate but those with %s, which failed every "
		         "pair it is in (the likely cause)",
		         json_string_value(json_array_get(blame, 0)));
		*res = json_pack("{s:s, s:s, s:{s:O, s:O, s:O}}", "state", "passed", "message", msg,
		                 "evidence", "pairs", mine, "explained_by", blame, "findings",
		                 findings);
		json_decref(findings);
		json_decref(mine);
		json_decref(blame);
		return *res ? 0 : -1;
	}
	json_decref(blame);
	if (json_array_size(mine) == 0)
		*res = json_pack("{s:s, s:s, s:s}", "state", "skipped", "message",
		                 "no pair to test: the rack has fewer than two nodes with the "
		                 "fabric check",
		                 "fix", "run the fabric check over a rack of two nodes or more");
	else if (failed)
		*res = json_pack(
		        "{s:s, s:s+, s:s, s:{s:O}, s:O}", "state", "failed", "message",
		        json_string_value(json_object_get(json_array_get(findings, 0), "message"))
		                ?: "a pair failed",
		        json_array_size(findings) > 1 ? " (and more)" : "", "fix",
		        "check the cables, transceivers and switch ports named; a node "
		        "whose every pair fails is the likely cause",
		        "evidence", "pairs", mine, "findings", findings);
	else if (passed == 0)
		*res = json_pack("{s:s, s:s, s:s, s:{s:O}}", "state", "skipped", "message",
		                 skipwhy ? skipwhy : "every pair was skipped", "fix",
		                 "install iperf3 / perftest on the agent image and boot every node",
		                 "evidence", "pairs", mine);
	else {
		char msg[600];

		/* A port not tested is said, never passed over in silence. */
		if (tskipped)
			snprintf(msg, sizeof msg,
			         "every pair measured at its expected rate; %d test(s) skipped: %s",
			         tskipped, tskipwhy ? tskipwhy : "?");
		else
			snprintf(msg, sizeof msg, "%s",
			         skipped ? "every pair measured passed; some were skipped"
			                 : "every pair at its expected rate");
		*res = json_pack("{s:s, s:s, s:{s:O}}", "state", "passed", "message", msg,
		                 "evidence", "pairs", mine);
	}
	json_decref(findings);
	json_decref(mine);
	return *res ? 0 : -1;
}

static int
fabric(struct cross *x, json_t **res)
{
	int64_t me = json_integer_value(json_object_get(x->me, "id"));
	json_t *p;
	size_t i;
	int have = 0;
	json_int_t round = -1;

	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		if (strcmp(sval(p, "kind"), "fabric") != 0)
			continue;
		have = 1;
		if (!settled(sval(p, "state")) &&
		    (round < 0 || json_integer_value(json_object_get(p, "round")) < round))
			round = json_integer_value(json_object_get(p, "round"));
	}
	if (!have) {
		/* Fewer than two nodes: no pair, nothing laid out, and nothing to wait for. */
		size_t n = 0;
		json_t *nd;

		json_array_foreach(json_object_get(x->view, "nodes"), i, nd) n +=
		        sval(nd, "fabric") != NULL;
		if (n < 2)
			return fabric_verdict(x, res);
		return fabric_layout(x) < 0 ? -1 : 1;
	}
	/* A pair whose server's acceptance job has ended has no driver: any node settles it. */
	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		json_t *srv = node_row(x, json_integer_value(json_object_get(p, "server"))), *t;
		char why[300];
		size_t k;

		if (strcmp(sval(p, "kind"), "fabric") != 0 || settled(sval(p, "state")) ||
		    json_is_true(json_object_get(srv, "alive")))
			continue;
		json_array_foreach(json_object_get(p, "tests"), k, t)
		{
			cancel(x, sval(t, "server_job"));
			cancel(x, sval(t, "client_job"));
		}
		snprintf(why, sizeof why, "not tested: %s's acceptance job ended (cancelled?)",
		         srv ? sval(srv, "name") : "the server");
		return update(x, p, "skipped", why, json_object_get(p, "tests"), NULL) < 0 ? -1 : 1;
	}
	/* The round's pair this node serves, if any: one step of it. */
	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		if (!strcmp(sval(p, "kind"), "fabric") &&
		    json_integer_value(json_object_get(p, "round")) == round &&
		    json_integer_value(json_object_get(p, "server")) == me &&
		    !settled(sval(p, "state"))) {
			int rc = fabric_drive(x, p);

			if (rc < 0)
				return -1;
			if (x->look_ms > DRIVE_LOOK_MS)
				x->look_ms = DRIVE_LOOK_MS;
			return 1;
		}
	}
	return fabric_verdict(x, res);
}

/* ---- NCCL ------------------------------------------------------------------------------- */

/* all_reduce_perf on every node at once (RP_NCCL_* from the step's env; the values never
 * enter the shell text). */
static const char nccl_script[] =
        "command -v all_reduce_perf >/dev/null 2>&1 || { echo 'all_reduce_perf (nccl-tests) is "
        "not installed on this node'; exit 77; }\n"
        "command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' "
        "|| { echo 'no NVIDIA GPU on this node (nvidia-smi -L lists none)'; exit 77; }\n"
        "g=${RP_NCCL_GPUS:-$(nvidia-smi -L | grep -c '^GPU ')}\n"
        "if [ \"$RP_NCCL_LAUNCHER\" = mpirun ]; then\n"
        "  [ \"$RP_NCCL_RANK\" = 0 ] || { echo \"rank $RP_NCCL_RANK: mpirun on rank 0 starts "
        "this node's part\"; exit 0; }\n"
        "  command -v mpirun >/dev/null 2>&1 || { echo 'mpirun is not installed on rank 0'; "
        "exit 77; }\n"
        "  exec mpirun --allow-run-as-root -np \"$RP_NCCL_NRANKS\" -H \"$RP_NCCL_HOSTS\" -x "
        "NCCL_DEBUG=WARN all_reduce_perf -b 8 -e \"$RP_NCCL_MAX_BYTES\" -f 2 -g \"$g\"\n"
        "fi\n"
        "export NCCL_COMM_ID=\"$RP_NCCL_MASTER\" RANK=\"$RP_NCCL_RANK\" "
        "WORLD_SIZE=\"$RP_NCCL_NRANKS\"\n"
        "exec all_reduce_perf -b 8 -e \"$RP_NCCL_MAX_BYTES\" -f 2 -g \"$g\"\n";

static int
nccl_start(struct cross *x, json_t *p)
{
	json_t *nodes = json_object_get(x->view, "nodes"), *n, *ranks = json_array(), *jobs,
	       *tests = json_array(), *bom;
	char hosts[4096] = "", addr[256], master[300] = "", why[300], uuid[RP_UUID_BUF], num[32];
	size_t i;
	int rc, waiting = 0;
	json_int_t maxb = 8589934592LL, gpus = 0;

	json_array_foreach(nodes, i, n)
	{
		if (sval(n, "nccl") == NULL)
			continue;
		int av = available(n, why, sizeof why);

		waiting |= av < 0;
		if (av == 1)
			json_array_append(ranks, n);
	}
	/* Not while the fabric pairs load the links, nor before every node is up or gone. */
	json_array_foreach(json_object_get(x->view, "pairs"), i, n)
	{
		waiting |= !strcmp(sval(n, "kind"), "fabric") && !settled(sval(n, "state"));
	}
	if (waiting) {
		json_decref(ranks);
		json_decref(tests);
		return 0;
	}
	if (json_array_size(ranks) < 2) {
		snprintf(why, sizeof why,
		         "NCCL across nodes needs two nodes in the agent ramdisk; %zu are",
		         json_array_size(ranks));
		json_decref(ranks);
		json_decref(tests);
		return update(x, p, "skipped", why, NULL, NULL);
	}
	bom = bom_of(x, json_array_get(ranks, 0));
	if (json_is_integer(json_object_get(json_object_get(bom, "nccl"), "max_bytes")))
		maxb = json_integer_value(
		        json_object_get(json_object_get(bom, "nccl"), "max_bytes"));
	gpus = json_integer_value(json_object_get(json_object_get(bom, "nccl"), "gpus_per_node"));
	json_decref(bom);
	json_array_foreach(ranks, i, n)
	{
		size_t l = strlen(hosts);

		ssh_address(x, n, addr, sizeof addr);
		if (i == 0)
			snprintf(master, sizeof master, "%s:%d", addr,
			         opt_int(x, "nccl", "port", NCCL_PORT));
		snprintf(hosts + l, sizeof hosts - l, "%s%s", l ? "," : "", addr);
	}
	jobs = json_array();
	json_array_foreach(ranks, i, n)
	{
		json_t *env, *job, *about;

		/* A step's env holds strings only. */
		snprintf(num, sizeof num, "%lld", (long long)maxb);
		env = json_pack("{s:s, s:o, s:o, s:s, s:s, s:s}", "RP_NCCL_LAUNCHER",
		                sval(options(x, "nccl"), "launcher") ?: "env", "RP_NCCL_RANK",
		                json_sprintf("%zu", i), "RP_NCCL_NRANKS",
		                json_sprintf("%zu", json_array_size(ranks)), "RP_NCCL_MASTER",
		                master, "RP_NCCL_HOSTS", hosts, "RP_NCCL_MAX_BYTES", num);
		if (gpus > 0)
			json_object_set_new(env, "RP_NCCL_GPUS",
			                    json_sprintf("%lld", (long long)gpus));
		about = json_pack("{s:s, s:s, s:I}", "run", x->run, "check", "nccl", "rank",
		                  (json_int_t)i);
		job = shell_job("nccl", nccl_script, env, opt_int(x, "nccl", "timeout_s", 1800), 0,
		                about, uuid);
		json_decref(env);
		json_decref(about);
		json_array_append_new(jobs, json_pack("{s:O, s:o}", "node",
		                                      json_object_get(n, "id"), "job", job));
		json_array_append_new(tests,
		                      json_pack("{s:I, s:O, s:O, s:s, s:s}", "rank", (json_int_t)i,
		                                "node", json_object_get(n, "name"), "node_id",
		                                json_object_get(n, "id"), "job", uuid, "state",
		                                "pending"));
	}
	json_t *first = json_array_get(tests, 0);

	json_object_set_new(first, "started", json_integer(rp_time_now_ms()));
	rc = update(x, p, "running", NULL, tests, jobs);
	json_decref(jobs);
	json_decref(ranks);
	json_decref(tests);
	return rc;
}

static int
nccl_drive(struct cross *x, json_t *p)
{
	json_t *tests, *t, *job, *st, *r0 = NULL, *r0step = NULL, *bom, *lead = NULL;
	int64_t started, timeout;
	size_t i;
	int open = 0, rc, gone = 0;
	char msg[700], why[256], line[300];
	double busbw = -1, avg = -1, min;
	long long bytes = 0;

	if (!strcmp(sval(p, "state"), "pending"))
		return nccl_start(x, p);
	tests = json_deep_copy(json_object_get(p, "tests"));
	started = json_integer_value(json_object_get(json_array_get(tests, 0), "started"));
	timeout = (int64_t)opt_int(x, "nccl", "timeout_s", 1800) * 1000 + 30000;
	json_array_foreach(tests, i, t)
	{
		if ((job = child(x, sval(t, "job"), &st, &gone)) == NULL) {
			/* A rank whose job vanished never reports: the run fails with why. */
			if (gone && json_object_get(t, "exit_code") == NULL) {
				json_object_set_new(t, "state", json_string("failed"));
				json_object_set_new(t, "exit_code", json_integer(-1));
				json_object_set_new(t, "output", json_string("its job is gone"));
			} else if (!gone)
				open++;
			continue;
		}
		if (!job_ended(job)) {
			open++;
			if (rp_time_now_ms() - started > timeout)
				cancel(x, sval(t, "job"));
		} else {
			json_object_set(t, "state", json_object_get(job, "state"));
			json_object_set_new(t, "exit_code",
			                    json_incref(json_object_get(st, "exit_code")));
			json_object_set_new(t, "output", output_of(st));
		}
		if (i == 0) {
			r0 = job;
			r0step = st;
		} else
			json_decref(job);
	}
	if (open) {
		/* A rank that ended without a result: the others would wait in the bootstrap
		 * until their timeout. */
		int bad = 0;

		json_array_foreach(tests, i, t) bad |=
		        json_is_integer(json_object_get(t, "exit_code")) &&
		        json_integer_value(json_object_get(t, "exit_code")) != 0;
		if (bad)
			json_array_foreach(tests, i, t) cancel(x, sval(t, "job"));
		json_decref(r0);
		json_decref(tests);
		return 0;
	}
	/* The first rank that could not run, or failed, speaks for the run. */
	json_array_foreach(tests, i, t)
	{
		json_int_t code = json_integer_value(json_object_get(t, "exit_code"));

		if (json_is_integer(json_object_get(t, "exit_code")) && code != 0 && lead == NULL)
			lead = t;
	}
	if (lead && json_integer_value(json_object_get(lead, "exit_code")) == 77) {
		snprintf(msg, sizeof msg, "skipped: rank %lld on %s cannot run: %s",
		         (long long)json_integer_value(json_object_get(lead, "rank")),
		         sval(lead, "node"), last_line(lead, line, sizeof line));
		rc = update(x, p, "skipped", msg, tests, NULL);
		json_decref(r0);
		json_decref(tests);
		return rc;
	}
	if ((lead && lead != json_array_get(tests, 0)) || r0 == NULL) {
		if (lead == NULL)
			lead = json_array_get(tests, 0);
		snprintf(msg, sizeof msg, "rank %lld on %s failed (exit %lld)",
		         (long long)json_integer_value(json_object_get(lead, "rank")),
		         sval(lead, "node"),
		         (long long)json_integer_value(json_object_get(lead, "exit_code")));
		rc = update(x, p, "failed", msg, tests, NULL);
		json_decref(r0);
		json_decref(tests);
		return rc;
	}
	bom = bom_of(x, node_row(x, json_integer_value(json_object_get(p, "server"))));
	min = json_number_value(
	        json_object_get(json_object_get(bom, "nccl"), "min_busbw_gbytes_s"));
	json_decref(bom);
	if (!strcmp(sval(r0, "state") ?: "", "cancelled")) {
		snprintf(msg, sizeof msg, "all_reduce_perf gave no result within %d s",
		         opt_int(x, "nccl", "timeout_s", 1800));
		rc = update(x, p, "failed", msg, tests, NULL);
	} else if (rp_accept_parse_nccl(sval(r0step, "output") ?: "", &busbw, &avg, &bytes, why,
	                                sizeof why) < 0) {
		snprintf(msg, sizeof msg, "all_reduce_perf on %s: %s",
		         sval(json_array_get(tests, 0), "node"), why);
		rc = update(x, p, "failed", msg, tests, NULL);
	} else {
		json_t *r = json_array_get(tests, 0);

		json_object_set_new(r, "busbw_gbytes_s", json_real(busbw));
		json_object_set_new(r, "avg_busbw_gbytes_s",
		                    avg >= 0 ? json_real(avg) : json_null());
		json_object_set_new(r, "bytes", json_integer(bytes));
		if (min > 0) {
			snprintf(msg, sizeof msg,
			         "bus bandwidth %.2f GB/s at %lld bytes over %zu nodes, expected "
			         "at least "
			         "%.2f GB/s",
			         busbw, bytes, json_array_size(tests), min);
			json_object_set_new(r, "min_busbw_gbytes_s", json_real(min));
			rc = update(x, p, busbw >= min ? "passed" : "failed", msg, tests, NULL);
		} else {
			snprintf(msg, sizeof msg,
			         "bus bandwidth %.2f GB/s at %lld bytes over %zu nodes; the "
			         "class's bom "
			         "has no nccl.min_busbw_gbytes_s to hold it to",
			         busbw, bytes, json_array_size(tests));
			rc = update(x, p, "skipped", msg, tests, NULL);
		}
	}
	json_decref(r0);
	json_decref(tests);
	return rc;
}

static int
nccl(struct cross *x, json_t **res)
{
	int64_t me = json_integer_value(json_object_get(x->me, "id"));
	json_t *p, *row = NULL, *n, *first = NULL, *t;
	size_t i;
	int mine = 0;

	json_array_foreach(json_object_get(x->view, "pairs"), i, p)
	{
		if (!strcmp(sval(p, "kind"), "nccl"))
			row = p;
	}
	/* The driver: the first node with the check whose job still runs (a cancelled one's
	 * row is taken over). */
	json_array_foreach(json_object_get(x->view, "nodes"), i, n)
	{
		if (first == NULL && sval(n, "nccl") && json_is_true(json_object_get(n, "alive")))
			first = n;
	}
	if (row == NULL) {
		/* The first node with the check drives the run; it lays its row out. */
		json_t *pairs;
		enum rp_err e;

		if (first != x->me)
			return 1;
		pairs = json_pack("[{s:i, s:O, s:n}]", "round", 0, "server",
		                  json_object_get(first, "id"), "client");
		e = rp_store_accept_pairs_init(x->w->j->st, x->run, "nccl", pairs);
		json_decref(pairs);
		if (e != RP_ERR_OK) {
			snprintf(x->why, x->whylen, "could not lay out the NCCL run");
			return -1;
		}
		x->look_ms = DRIVE_LOOK_MS;
		return 1;
	}
	if (!settled(sval(row, "state"))) {
		if (first == x->me && nccl_drive(x, row) < 0)
			return -1;
		return 1;
	}
	json_array_foreach(json_object_get(row, "tests"), i, t) mine |=
	        json_integer_value(json_object_get(t, "node_id")) == me;
	if (!mine)
		*res = json_pack(
		        "{s:s, s:s, s:s}", "state", "skipped", "message",
		        !strcmp(sval(row, "state"), "skipped")
		                ? sval(row, "message")
		                : "this node was not in the rack's NCCL run (its agent was "
		                  "not up)",
		        "fix", "fix the node's pxe check, then run acceptance again");
	else
		*res = json_pack("{s:O, s:O?, s:s?, s:{s:O?}}", "state",
		                 json_object_get(row, "state"), "message",
		                 json_object_get(row, "message"), "fix",
		                 !strcmp(sval(row, "state"), "failed")
		                         ? "check the GPUs, NVLink and the fabric with the fabric "
		                           "check and the recipes (dcgm-diag, ib-ports)"
		                         : NULL,
		                 "evidence", "ranks", json_object_get(row, "tests"));
	if (*res && !strcmp(sval(row, "state"), "failed"))
		json_object_set_new(
		        *res, "findings",
		        json_pack("[{s:s, s:O?, s:O?, s:O?, s:s}]", "item", "nccl", "expected",
		                  json_object_get(json_array_get(json_object_get(row, "tests"), 0),
		                                  "min_busbw_gbytes_s"),
		                  "actual",
		                  json_object_get(json_array_get(json_object_get(row, "tests"), 0),
		                                  "busbw_gbytes_s"),
		                  "message", json_object_get(row, "message"), "fix",
		                  "compare with the fabric pairs; run dcgm-diag"));
	return *res ? 0 : -1;
}

int
jobs_accept_cross(struct work *w, const char *run, const char *check, json_t *cabling,
                  json_t **result, unsigned *look_ms, char *why, size_t len)
{
	struct cross x = {.w = w,
	                  .run = run,
	                  .cabling = cabling,
	                  .look_ms = WAIT_LOOK_MS,
	                  .why = why,
	                  .whylen = len};
	json_t *n;
	size_t i;
	int rc = -1;

	if (rp_store_accept_cross(w->j->st, run, &x.view) != RP_ERR_OK) {
		snprintf(why, len, "cannot read the run's nodes");
		return -1;
	}
	json_array_foreach(json_object_get(x.view, "nodes"), i, n)
	{
		if (json_integer_value(json_object_get(n, "id")) == w->node_id)
			x.me = n;
	}
	if (x.me == NULL)
		snprintf(why, len, "the node is not in the run");
	else
		rc = !strcmp(check, "fabric") ? fabric(&x, result) : nccl(&x, result);
	*look_ms = x.look_ms;
	json_decref(x.view);
	return rc;
}
