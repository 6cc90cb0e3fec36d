/*
 * The acceptance job of one node (docs/acceptance.md): it runs the node's pending checks in a
 * fixed order. Checks that act on the machine do it through ordinary jobs it queues and then
 * follows — verify (bmc), power off/on/cycle (power), a commission with the burn-in recipes
 * (pxe, burn_in) — each queued in the transaction that marks the check running with it, so a
 * restart follows the same child and never queues a second. The others compare what the
 * store holds with the plan (accept/) or read the BMC's event log. While a child runs this
 * job holds no worker: it goes back to the queue and looks again.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept/accept.h"
#include "bmc/bmc.h"
#include "internal.h"

#define LOOK_AGAIN_MS 2000
#define HOLD_MAX_S    43200 /* a commission held for the tests across nodes, at most */
/* How long after a run starts its pxe check waits for a commission still ending. */
#define EARLIER_COMMISSION_MS (10 * 60 * 1000)

struct acc {
	struct work *w;
	struct rp_bmc *b;
	const char *run;
	json_t *info;               /* rp_store_accept_node */
	json_t *node;               /* rp_store_node_get */
	struct rp_job_outcome *out; /* the job's outcome once decided */
	unsigned look_ms; /* a check waiting asks to be looked at this soon (0: default) */
};

/* Store trouble: try again in a while. Always -1. */
static int
trouble(struct acc *a, const char *what, const char *check)
{
	a->out = jobs_later(a->w, LOOK_AGAIN_MS);
	jobs_set_error(a->out, "store", "%s (check %s); trying again", what, check);
	return -1;
}

static json_t *
result_row(struct acc *a, const char *check)
{
	json_t *r;
	size_t i;

	json_array_foreach(json_object_get(a->info, "results"), i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "check")) ?: "", check))
			return r;
	}
	return NULL;
}

static const char *
check_state(struct acc *a, const char *check)
{
	return json_string_value(json_object_get(result_row(a, check), "state"));
}

/* Settle check with state and a printf message; fix, evidence, findings may be NULL
 * (evidence and findings are taken). 0, or -1 with a->out set (store trouble). */
static int settle(struct acc *a, const char *check, const char *state, const char *fix,
                  json_t *evidence, json_t *findings, const char *fmt, ...)
        __attribute__((format(printf, 7, 8)));

static int
settle(struct acc *a, const char *check, const char *state, const char *fix, json_t *evidence,
       json_t *findings, const char *fmt, ...)
{
	char msg[1024];
	json_t *res;
	va_list ap;
	enum rp_err e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	res = json_pack("{s:s, s:s, s:s?, s:o?, s:o?}", "state", state, "message", msg, "fix", fix,
	                "evidence", evidence, "findings", findings);
	e = rp_store_accept_record(a->w->j->st, a->run, a->w->node_id, check, res);
	json_decref(res);
	if (e != RP_ERR_OK)
		return trouble(a, "could not record a result", check);
	if (result_row(a, check))
		json_object_set_new(result_row(a, check), "state", json_string(state));
	return 0;
}

/* Back to the queue until child moves on. Always -1 (a->out set). */
static int
wait_child(struct acc *a, const char *check, const char *child, const char *state)
{
	a->out = jobs_later(a->w, LOOK_AGAIN_MS);
	jobs_set_error(a->out, "accepting", "check %s: waiting for job %s (%s)", check, child,
	               state);
	return -1;
}

/* Queue a child for check (after prev in a chain, or NULL). 1 queued (a->out: wait), 0 the
 * check was settled instead (the node cannot take it), -1 trouble (a->out). */
static int
queue_child(struct acc *a, const char *check, const char *prev, const char *action, json_t *job)
{
	char child[RP_UUID_BUF + 8] = "";
	json_t *detail = NULL;
	enum rp_err e;

	e = rp_store_accept_child(a->w->j->st, a->run, a->w->node_id, check, prev, action, job,
	                          child, sizeof child, &detail);
	json_decref(job);
	if (e == RP_ERR_OK) {
		json_decref(detail);
		return wait_child(a, check, child, "queued");
	}
	if (e == RP_ERR_DUPLICATE) {
		/* Another round queued it: look again from the store. */
		json_decref(detail);
		return wait_child(a, check, "(queued)", "queued");
	}
	if (e == RP_ERR_INVALID_STATE && action && !strcmp(action, "commission") &&
	    !strcmp(json_string_value(json_object_get(detail, "state")) ?: "", "commissioning") &&
	    rp_time_now_ms() - json_integer_value(json_object_get(a->info, "created_at")) <
	            EARLIER_COMMISSION_MS) {
		/* The last run's commission still lets its node go (it holds until that run
		 * ends, then powers the node off): a while for it, not a failure. */
		json_decref(detail);
		return wait_child(a, check, "(the node's earlier commission)", "ending");
	}
	if (e == RP_ERR_CONFLICT || e == RP_ERR_INVALID_STATE || e == RP_ERR_BAD_REQUEST) {
		const char *why = json_string_value(json_object_get(detail, "reason"));
		int r = settle(a, check, "failed", "fix the node's state or BMC, then run acceptance again",
		               json_incref(detail), NULL, "the node cannot take the %s job: %s",
		               action ? action : json_string_value(json_object_get(job, "type")) ?: "?",
		               why ? why : rp_err_message(e));

		json_decref(detail);
		return r < 0 ? -1 : 0;
	}
	json_decref(detail);
	return trouble(a, "could not queue a job", check);
}

/* The check's child job now, or NULL (it vanished: settled failed). *js its state. */
static json_t *
child_of(struct acc *a, const char *check, const char **js, int *rc)
{
	const char *id = json_string_value(json_object_get(result_row(a, check), "job"));
	json_t *job = NULL;

	*rc = 0;
	if (id == NULL || rp_store_job_get(a->w->j->st, id, &job) != RP_ERR_OK) {
		*rc = settle(a, check, "failed", NULL, NULL, NULL, "the check's job %s is gone",
		             id ? id : "(none)");
		return NULL;
	}
	*js = json_string_value(json_object_get(job, "state")) ?: "";
	return job;
}

static int
ended(const char *js)
{
	return strcmp(js, "queued") != 0 && strcmp(js, "running") != 0;
}

static const char *
job_error(json_t *job)
{
	return json_string_value(json_object_get(json_object_get(job, "error"), "message")) ?:
	       json_string_value(json_object_get(job, "state")) ?: "?";
}

/* 1: BMC reachable with the managed credentials, identity as enrolled (a verify job). */
static int
check_bmc(struct acc *a)
{
	const char *js;
	json_t *job, *checks;
	int rc, compared = 0;
	size_t i;

	if (!strcmp(check_state(a, "bmc"), "pending"))
		return queue_child(
		        a, "bmc", NULL, NULL,
		        json_pack("{s:s, s:{}, s:b}", "type", "verify", "params", "mutating", 0));
	if ((job = child_of(a, "bmc", &js, &rc)) == NULL)
		return rc;
	if (!ended(js)) {
		/* js and the id live in job: release it only after they are copied. */
		rc = wait_child(a, "bmc", json_string_value(json_object_get(job, "id")), js);
		json_decref(job);
		return rc;
	}
	checks = json_object_get(json_object_get(job, "result"), "checks");
	for (i = 0; i < json_array_size(checks); i++)
		compared += !strcmp(
		        json_string_value(json_object_get(json_array_get(checks, i), "status"))
		                ?: "",
		        "ok");
	if (strcmp(js, "succeeded") != 0)
		rc = settle(a, "bmc", "failed",
		            "check the BMC's cabling and address, and the managed credentials",
		            json_incref(json_object_get(job, "result")), NULL, "%s",
		            job_error(job));
	else if (compared == 0)
		rc = settle(a, "bmc", "skipped", "enroll the node's serial or system_uuid",
		            json_incref(json_object_get(job, "result")), NULL,
		            "the BMC answers, but there was no serial or UUID to compare");
	else
		rc = settle(a, "bmc", "passed", NULL, json_incref(json_object_get(job, "result")),
		            NULL, "BMC reachable; identity matches (%d of serial/UUID compared)",
		            compared);
	json_decref(job);
	return rc;
}

/* 2: off, then on, then a cycle, each observed at the BMC (power jobs wait for it). */
static int
check_power(struct acc *a)
{
	static const char *const steps[] = {"off", "on", "cycle", NULL};
	const char *js, *target;
	json_t *job;
	size_t i;
	int rc;

	if (!strcmp(check_state(a, "power"), "pending"))
		return queue_child(a, "power", NULL, NULL,
		                   json_pack("{s:s, s:{s:s}, s:b}", "type", "power", "params",
		                             "target", "off", "mutating", 1));
	if ((job = child_of(a, "power", &js, &rc)) == NULL)
		return rc;
	target = json_string_value(json_object_get(json_object_get(job, "params"), "target")) ?: "";
	if (!ended(js)) {
		rc = wait_child(a, "power", json_string_value(json_object_get(job, "id")), js);
	} else if (strcmp(js, "succeeded") != 0) {
		rc = settle(a, "power", "failed", "check the BMC's power control and the PSUs",
		            json_pack("{s:s, s:O?}", "step", target, "result",
		                      json_object_get(job, "result")),
		            NULL, "power %s: %s", target, job_error(job));
	} else {
		for (i = 0; steps[i] && strcmp(steps[i], target); i++)
			;
		if (steps[i] && steps[i + 1])
			rc = queue_child(a, "power", json_string_value(json_object_get(job, "id")),
			                 NULL,
			                 json_pack("{s:s, s:{s:s}, s:b}", "type", "power", "params",
			                           "target", steps[i + 1], "mutating", 1));
		else
			rc = settle(a, "power", "passed", NULL,
			            json_pack("{s:[s,s,s], s:O?}", "observed", "off", "on", "cycle",
			                      "last", json_object_get(job, "result")),
			            NULL, "off, on and cycle observed at the BMC");
	}
	json_decref(job);
	return rc;
}

/* 3 (and 7's runs): one-time PXE, the agent checks in, the plan (with burn-in) runs. */
static int
check_pxe(struct acc *a)
{
	json_t *plan = json_object_get(jobs_params(a->w), "commission_plan");
	const char *js;
	json_t *job;
	int rc;

	if (!strcmp(check_state(a, "pxe"), "pending")) {
		json_t *cj = json_pack("{s:s, s:{s:o}, s:b, s:i}", "type", "commission", "params",
		                       "plan", plan ? json_incref(plan) : json_array(), "mutating",
		                       1, "max_attempts", 3);
		const char *f = check_state(a, "fabric"), *n = check_state(a, "nccl");

		/* The checks across nodes run in this boot: the agent stays up for them. */
		if ((f && !strcmp(f, "pending")) || (n && !strcmp(n, "pending")))
			json_object_set_new(
			        json_object_get(cj, "params"), "hold",
			        json_pack("{s:s, s:i}", "run", a->run, "timeout_s", HOLD_MAX_S));
		return queue_child(a, "pxe", NULL, "commission", cj);
	}
	if ((job = child_of(a, "pxe", &js, &rc)) == NULL)
		return rc;
	if (!ended(js) && !strcmp(json_string_value(json_object_get(job, "phase")) ?: "", "hold"))
		rc = settle(a, "pxe", "passed", NULL,
		            json_pack("{s:O?, s:s}", "job", json_object_get(job, "id"), "held",
		                      "for the rack's tests across nodes"),
		            NULL, "PXE honoured, the agent checked in and ran its plan");
	else if (!ended(js))
		rc = wait_child(a, "pxe", json_string_value(json_object_get(job, "id")), js);
	else if (strcmp(js, "succeeded") != 0)
		rc = settle(a, "pxe", "failed",
		            "watch the node's console: DHCP, the boot profile, the agent ramdisk",
		            json_pack("{s:O?, s:O?}", "phase", json_object_get(job, "phase"),
		                      "error", json_object_get(job, "error")),
		            NULL, "network boot: %s", job_error(job));
	else
		rc = settle(a, "pxe", "passed", NULL,
		            json_pack("{s:O?, s:O?}", "job", json_object_get(job, "id"),
		                      "finished_at", json_object_get(job, "finished_at")),
		            NULL, "PXE honoured, the agent checked in and ran its plan");
	json_decref(job);
	return rc;
}

/* What the checks after pxe read: NULL when they must wait for it; "" when they may go on;
 * else why they cannot (pxe did not pass). */
static const char *
after_pxe(struct acc *a)
{
	const char *p = check_state(a, "pxe");

	if (p == NULL || !strcmp(p, "passed"))
		return "";
	if (!strcmp(p, "pending") || !strcmp(p, "running"))
		return NULL;
	return "the pxe check did not pass, so nothing fresh was read from the node";
}

/* The node's stored inventory data, with its time in *at (RFC 3339). New reference or NULL. */
static json_t *
inventory(struct acc *a, char *at, size_t len)
{
	json_t *inv = NULL, *data;

	if (rp_store_node_inventory(a->w->j->st, jobs_node_uuid(a->w), &inv) != RP_ERR_OK)
		return NULL;
	snprintf(at, len, "%s", json_string_value(json_object_get(inv, "collected_at")) ?: "never");
	data = json_incref(json_object_get(inv, "data"));
	json_decref(inv);
	if (json_is_object(data))
		return data;
	json_decref(data);
	return NULL;
}

static json_t *
class_bom(struct acc *a, const char **cls)
{
	json_t *c = NULL, *bom;

	*cls = json_string_value(json_object_get(a->node, "node_class"));
	if (*cls == NULL || rp_store_class_get(a->w->j->st, *cls, &c) != RP_ERR_OK)
		return NULL;
	bom = json_incref(json_object_get(c, "bom"));
	json_decref(c);
	return bom;
}

/* 4 and 6: inventory against the class's bill of materials; links and the cabling plan. */
static int
check_compare(struct acc *a, const char *check)
{
	json_t *inv, *bom, *findings;
	const char *cls, *gate = after_pxe(a);
	char at[64];
	int n, unv = 0, rc;

	if (gate == NULL)
		return 1;
	if (gate[0])
		return settle(a, check, "skipped", "fix the pxe check first", NULL, NULL, "%s",
		              gate);
	if ((inv = inventory(a, at, sizeof at)) == NULL)
		return settle(a, check, "failed", "commission the node (or run the pxe check)",
		              NULL, NULL, "the node has reported no inventory");
	bom = class_bom(a, &cls);
	if (bom == NULL && !strcmp(check, "inventory")) {
		json_decref(inv);
		return settle(a, check, "skipped", "PUT /v1/node-classes/CLASS with its bom", NULL,
		              NULL, "no bill of materials for class %s", cls ? cls : "(none)");
	}
	findings = json_array();
	if (!strcmp(check, "inventory"))
		n = rp_accept_bom(bom, inv, findings);
	else {
		if (bom == NULL)
			bom = json_object();
		n = rp_accept_links(bom, json_object_get(a->info, "cabling"), inv, findings, &unv);
	}
	if (n > unv) {
		/* The first real mismatch leads; unverifiable entries stay among the findings. */
		json_t *lead = NULL, *f;
		size_t i;

		json_array_foreach(findings, i, f)
		{
			if (lead == NULL &&
			    strcmp(json_string_value(json_object_get(f, "actual")) ?: "",
			           "not reported") != 0)
				lead = f;
		}
		if (lead == NULL)
			lead = json_array_get(findings, 0);
		rc = settle(a, check, "failed", json_string_value(json_object_get(lead, "fix")),
		            json_pack("{s:s, s:i}", "inventory_at", at, "unverified", unv),
		            findings, "%s%s", json_string_value(json_object_get(lead, "message")),
		            n > 1 ? " (and more)" : "");
	} else if (unv > 0) {
		/* lldpd (or IB neighbour data) absent: the cabling is not verified, which is
		 * neither a pass nor the rack's fault. */
		rc = settle(
		        a, check, "skipped", "run lldpd on the node's image",
		        json_pack("{s:s, s:i}", "inventory_at", at, "unverified", unv), findings,
		        "links up at rated speed; %d cabling entr%s not verifiable: %s", unv,
		        unv == 1 ? "y" : "ies",
		        json_string_value(json_object_get(json_array_get(findings, 0), "message")));
	} else {
		json_decref(findings);
		rc = settle(
		        a, check, "passed", NULL,
		        json_pack("{s:s, s:I}", "inventory_at", at, "cables",
		                  (json_int_t)json_array_size(json_object_get(a->info, "cabling"))),
		        NULL, "%s",
		        !strcmp(check, "inventory")
		                ? "inventory equals the bill of materials"
		                : "links up at rated speed, cabling as planned");
	}
	json_decref(inv);
	json_decref(bom);
	return rc;
}

/* 5: firmware at the baseline, BIOS equal to the profile (values read back). */
static int
check_desired(struct acc *a, const char *check)
{
	json_t *view = NULL, *findings = json_array(), *it;
	const char *gate = after_pxe(a);
	size_t i;
	int fw = !strcmp(check, "firmware"), rc;
	enum rp_err e;

	if (gate == NULL) {
		json_decref(findings);
		return 1;
	}
	e = fw ? rp_store_node_firmware(a->w->j->st, jobs_node_uuid(a->w), &view)
	       : rp_store_node_bios(a->w->j->st, jobs_node_uuid(a->w), &view);
	if (e != RP_ERR_OK) {
		json_decref(findings);
		return trouble(a, "cannot read the node's state", check);
	}
	if (fw ? !json_is_string(json_object_get(view, "baseline"))
	       : !json_is_object(json_object_get(view, "desired")) ||
	                    !json_is_string(
	                            json_object_get(json_object_get(view, "desired"), "profile"))) {
		rc = settle(a, check, "skipped",
		            fw ? "create a firmware baseline for the class"
		               : "create a BIOS profile for the class or node",
		            NULL, NULL, "no %s applies to the node",
		            fw ? "firmware baseline" : "BIOS profile");
		goto out;
	}
	if (fw) {
		json_array_foreach(json_object_get(view, "components"), i, it)
		{
			const char *st = json_string_value(json_object_get(it, "status")) ?: "";
			char msg[300];

			if (strcmp(st, "drift") != 0 && strcmp(st, "missing") != 0)
				continue;
			snprintf(msg, sizeof msg, "%s %s, baseline %s",
			         json_string_value(json_object_get(it, "component")),
			         json_string_value(json_object_get(it, "version"))
			                 ?: "not reported",
			         json_string_value(json_object_get(it, "desired")) ?: "?");
			json_array_append_new(
			        findings,
			        json_pack("{s:O, s:O, s:O, s:s, s:s}", "item",
			                  json_object_get(it, "component"), "expected",
			                  json_object_get(it, "desired"), "actual",
			                  json_object_get(it, "version"), "message", msg, "fix",
			                  "POST /v1/nodes/NODE/firmware/update (or a rollout)"));
		}
	} else {
		json_array_foreach(json_object_get(view, "diff"), i, it)
		{
			char msg[300],
			        *av = json_dumps(json_object_get(it, "actual") ?: json_null(),
			                         JSON_ENCODE_ANY),
			        *dv = json_dumps(json_object_get(it, "desired") ?: json_null(),
			                         JSON_ENCODE_ANY);

			snprintf(msg, sizeof msg, "%s is %s, profile wants %s",
			         json_string_value(json_object_get(it, "name")), av ? av : "?",
			         dv ? dv : "?");
			free(av);
			free(dv);
			json_array_append_new(
			        findings, json_pack("{s:O, s:O, s:O, s:s, s:s}", "item",
			                            json_object_get(it, "name"), "expected",
			                            json_object_get(it, "desired"), "actual",
			                            json_object_get(it, "actual"), "message", msg,
			                            "fix", "POST /v1/nodes/NODE/bios/apply"));
		}
	}
	if (json_array_size(findings) > 0) {
		rc = settle(
		        a, check, "failed",
		        json_string_value(json_object_get(json_array_get(findings, 0), "fix")),
		        NULL, json_incref(findings), "%s%s",
		        json_string_value(json_object_get(json_array_get(findings, 0), "message")),
		        json_array_size(findings) > 1 ? " (and more)" : "");
	} else
		rc = settle(a, check, "passed", NULL, NULL, NULL, "%s",
		            fw ? "firmware at the baseline" : "BIOS equals the profile");
out:
	json_decref(findings);
	json_decref(view);
	return rc;
}

/* The RACKPILOT_RESULT line a shipped recipe ends with (docs/recipes.md): its object, when it
 * is one with a findings array of objects (a node's output is not trusted further: members
 * kept are strings and numbers as they came, and at most 64 findings). New reference or NULL. */
static json_t *
recipe_result(const char *out)
{
	const char *p = out, *last = NULL, *end;
	json_t *res, *f, *keep;
	size_t i;

	while ((p = strstr(p, "RACKPILOT_RESULT ")) != NULL) {
		if (p == out || p[-1] == '\n')
			last = p;
		p += 17;
	}
	if (last == NULL)
		return NULL;
	last += 17;
	end = strchr(last, '\n');
	res = json_loadb(last, end ? (size_t)(end - last) : strlen(last), 0, NULL);
	if (!json_is_object(res) || !json_is_array(json_object_get(res, "findings"))) {
		json_decref(res);
		return NULL;
	}
	keep = json_array();
	json_array_foreach(json_object_get(res, "findings"), i, f)
	{
		if (json_is_object(f) && json_array_size(keep) < 64)
			json_array_append_new(
			        keep, json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "item",
			                        json_is_string(json_object_get(f, "item"))
			                                ? json_object_get(f, "item")
			                                : NULL,
			                        "expected", json_object_get(f, "expected"),
			                        "actual", json_object_get(f, "actual"), "message",
			                        json_is_string(json_object_get(f, "message"))
			                                ? json_object_get(f, "message")
			                                : NULL,
			                        "fix",
			                        json_is_string(json_object_get(f, "fix"))
			                                ? json_object_get(f, "fix")
			                                : NULL));
	}
	json_object_set_new(res, "findings", keep);
	return res;
}

/* 7: the burn-in recipes' steps inside the pxe check's commission ("burn_in.RECIPE.STEP").
 * Exit 77 means the tool is absent: skipped with what the step printed. */
static int
check_burn_in(struct acc *a)
{
	const char *gate = after_pxe(a), *id;
	json_t *job = NULL, *st, *findings, *skips, *results;
	int rc, ran = 0;
	size_t i;

	if (gate == NULL)
		return 1;
	if (gate[0])
		return settle(a, "burn_in", "skipped", "fix the pxe check first", NULL, NULL, "%s",
		              gate);
	if (check_state(a, "pxe") == NULL)
		return settle(a, "burn_in", "skipped", "run burn-in together with the pxe check",
		              NULL, NULL,
		              "burn-in runs in the pxe check's boot, which this run leaves out");
	if ((id = json_string_value(json_object_get(result_row(a, "pxe"), "job"))) == NULL ||
	    rp_store_job_get(a->w->j->st, id, &job) != RP_ERR_OK) {
		/* A re-run kept a passed pxe check from before: burn-in needs a boot of its own. */
		return settle(a, "burn_in", "skipped", "run acceptance with the pxe check again",
		              NULL, NULL, "no boot of this run to read burn-in results from");
	}
	findings = json_array();
	skips = json_array();
	results = json_object();
	json_array_foreach(json_object_get(job, "steps"), i, st)
	{
		const char *sid = json_string_value(json_object_get(st, "id")) ?: "";
		const char *state = json_string_value(json_object_get(st, "state")) ?: "";
		const char *out = json_string_value(json_object_get(st, "output")) ?: "";
		json_int_t code = json_integer_value(json_object_get(st, "exit_code"));

		json_t *res;

		if (strncmp(sid, "burn_in.", 8) != 0)
			continue;
		ran++;
		/* A shipped recipe's verdict (docs/recipes.md): kept, and its findings are the
		 * check's. */
		if ((res = recipe_result(out)) != NULL)
			json_object_set_new(results, sid + 8, res);
		if (!strcmp(state, "succeeded"))
			continue;
		if (code == 77)
			json_array_append_new(
			        skips, json_pack("{s:s, s:s}", "step", sid + 8, "reason", out));
		else if (json_array_size(json_object_get(res, "findings")) > 0) {
			json_t *f;
			size_t k;

			json_array_foreach(json_object_get(res, "findings"), k, f)
			{
				json_t *one = json_deep_copy(f);
				char item[200];

				snprintf(item, sizeof item, "%s: %s", sid + 8,
				         json_string_value(json_object_get(f, "item")) ?: "?");
				json_object_set_new(one, "item", json_string(item));
				json_array_append_new(findings, one);
			}
		} else
			json_array_append_new(
			        findings,
			        json_pack("{s:s, s:s, s:s, s:s}", "item", sid + 8, "message",
			                  json_string_value(json_object_get(st, "error")) ?: state,
			                  "output", out, "fix",
			                  "look at the step's output; replace the failing part"));
	}
	if (ran == 0)
		rc = settle(a, "burn_in", "skipped", "name burn-in recipes when starting the run",
		            NULL, NULL, "no burn-in recipe was given");
	else if (json_array_size(findings) > 0)
		rc = settle(
		        a, "burn_in", "failed",
		        "look at the step's output; replace the failing part",
		        json_pack("{s:O, s:O}", "skipped", skips, "results", results),
		        json_incref(findings), "%s: %s",
		        json_string_value(json_object_get(json_array_get(findings, 0), "item")),
		        json_string_value(json_object_get(json_array_get(findings, 0), "message")));
	else if (json_array_size(skips) == (size_t)ran)
		rc = settle(a, "burn_in", "skipped", "install the burn-in tools on the agent image",
		            json_pack("{s:O}", "skipped", skips), NULL,
		            "every burn-in step lacked its tool (%s)",
		            json_string_value(json_object_get(json_array_get(skips, 0), "reason")));
	else
		rc = settle(a, "burn_in", "passed", NULL,
		            json_pack("{s:i, s:O, s:O}", "steps", ran, "skipped", skips, "results",
		                      results),
		            NULL, "%d burn-in step(s) passed, %zu skipped for a missing tool",
		            ran - (int)json_array_size(skips), json_array_size(skips));
	json_decref(findings);
	json_decref(skips);
	json_decref(results);
	json_decref(job);
	return rc;
}

/* While the pxe check's boot runs (burn-in among it), read the node's sensors for
 * power_thermal every SAMPLE_MS (at the looks, every LOOK_AGAIN_MS), whatever the sensor
 * sweep's interval: recorded as the sweep records its readings, each read marked in the
 * history. A failed read is left to a later look. */
#define SAMPLE_MS 4000

static void
sample_sensors(struct acc *a)
{
	struct rp_bmc_err err = {0};
	struct rp_sensor_opts so = jobs_sensor_opts(a->w->j);
	json_t *sensors = NULL, *reading;
	int64_t at = rp_time_now_ms(), last = 0;

	if (rp_store_sensor_read_at(a->w->j->st, a->w->node_id, &last) != RP_ERR_OK ||
	    at - last < SAMPLE_MS)
		return;

	so.mark_read = 1; /* power_thermal counts the reads that fall in burn-in */

	if (rp_bmc_sensors(a->b, &sensors, &err) < 0)
		return;
	reading = json_pack("[{s:I, s:I, s:b, s:o}]", "id", (json_int_t)a->w->node_id, "at",
	                    (json_int_t)at, "ok", 1, "sensors", sensors);
	if (rp_store_sensors_record(a->w->j->st, reading, &so, NULL) != RP_ERR_OK)
		rp_log_warn("job %s: could not record the node's sensors", a->w->uuid);
	json_decref(reading);
}

/* The time span of the pxe check's burn-in steps: 0 and [*t0, *t1] (ms), or -1 when none
 * started. */
static int
burn_in_window(json_t *job, int64_t *t0, int64_t *t1)
{
	json_t *st;
	size_t i;
	int64_t lo = 0, hi = 0, v;

	json_array_foreach(json_object_get(job, "steps"), i, st)
	{
		const char *sid = json_string_value(json_object_get(st, "id")) ?: "";
		const char *a = json_string_value(json_object_get(st, "started_at"));
		const char *b = json_string_value(json_object_get(st, "finished_at"));

		if (strncmp(sid, "burn_in.", 8) != 0 || a == NULL || rp_time_parse(a, &v) < 0)
			continue;
		if (lo == 0 || v < lo)
			lo = v;
		if (b && rp_time_parse(b, &v) == 0 && v > hi)
			hi = v;
		if (v > hi)
			hi = v;
	}
	if (lo == 0)
		return -1;
	*t0 = lo;
	*t1 = hi;
	return 0;
}

/* 8: during burn-in, no sensor of the node reached its upper warning (a drive without one of
 * its own: drive_temp_warning) and its rack stayed under its limit; the peaks are the
 * evidence. */
static int
check_power_thermal(struct acc *a)
{
	const char *gate = after_pxe(a), *id;
	json_t *job = NULL, *peaks = NULL, *findings, *hot, *s, *rack;
	double drive = a->w->j->o.drive_warning_c, node_w = -1;
	int64_t t0, t1;
	char ts0[RP_TIME_BUF], ts1[RP_TIME_BUF];
	size_t i;
	int rc;

	if (gate == NULL)
		return 1;
	if (gate[0])
		return settle(a, "power_thermal", "skipped", "fix the pxe check first", NULL, NULL,
		              "%s", gate);
	if (check_state(a, "pxe") == NULL ||
	    (id = json_string_value(json_object_get(result_row(a, "pxe"), "job"))) == NULL ||
	    rp_store_job_get(a->w->j->st, id, &job) != RP_ERR_OK)
		return settle(a, "power_thermal", "skipped", "run it together with the pxe check",
		              NULL, NULL, "no burn-in of this run to watch");
	if (burn_in_window(job, &t0, &t1) < 0) {
		json_decref(job);
		return settle(a, "power_thermal", "skipped",
		              "name burn-in recipes when starting the run", NULL, NULL,
		              "no burn-in step ran");
	}
	json_decref(job);
	if (rp_store_sensor_peaks(a->w->j->st, jobs_node_uuid(a->w), t0, t1 + 1, &peaks) !=
	    RP_ERR_OK)
		return trouble(a, "cannot read the node's sensor history", "power_thermal");
	if (json_integer_value(json_object_get(peaks, "samples")) == 0) {
		json_decref(peaks);
		return settle(a, "power_thermal", "skipped",
		              "check that the BMC reports sensors; burn-in must last a few seconds",
		              NULL, NULL, "no sensor read of the node during burn-in");
	}
	findings = json_array();
	hot = json_array();
	json_array_foreach(json_object_get(peaks, "sensors"), i, s)
	{
		json_t *pk = json_object_get(s, "peak"), *uw = json_object_get(s, "upper_warning");
		const char *type = json_string_value(json_object_get(s, "type")) ?: "";
		const char *kind = json_string_value(json_object_get(s, "kind")) ?: "";
		double warn = json_is_number(uw)                    ? json_number_value(uw)
		              : !strcmp(kind, "drive") && drive > 0 ? drive
		                                                    : -1;

		if (!json_is_number(pk))
			continue;
		if (!strcmp(type, "power") && !strcmp(kind, "system"))
			node_w = json_number_value(pk);
		if (!strcmp(type, "temperature"))
			json_array_append_new(
			        hot, json_pack("{s:O, s:O, s:o}", "sensor",
			                       json_object_get(s, "name"), "peak", pk, "warning",
			                       warn >= 0 ? json_real(warn) : json_null()));
		if (warn >= 0 && json_number_value(pk) >= warn)
			json_array_append_new(
			        findings,
			        json_pack("{s:O, s:f, s:O, s:s, s:s}", "item",
			                  json_object_get(s, "name"), "expected", warn, "actual",
			                  pk, "message", "reached its upper warning during burn-in",
			                  "fix",
			                  "check the airflow, fans and heat sinks of this part"));
	}
	rack = json_object_get(peaks, "rack");
	if (json_is_number(json_object_get(rack, "peak_w")) &&
	    json_is_number(json_object_get(rack, "limit_w")) &&
	    json_number_value(json_object_get(rack, "peak_w")) >
	            json_number_value(json_object_get(rack, "limit_w")))
		json_array_append_new(
		        findings, json_pack("{s:s, s:O, s:O, s:s, s:s}", "item", "rack power",
		                            "expected", json_object_get(rack, "limit_w"), "actual",
		                            json_object_get(rack, "peak_w"), "message",
		                            "the rack passed its power limit during burn-in", "fix",
		                            "cap the nodes' power or raise the rack's budget"));
	{
		json_t *ev = json_pack("{s:{s:s, s:s}, s:o, s:O, s:O}", "window", "from",
		                       rp_time_format(t0, ts0), "to", rp_time_format(t1, ts1),
		                       "node_peak_w", node_w >= 0 ? json_real(node_w) : json_null(),
		                       "rack", rack ? rack : json_null(), "temperatures", hot);

		if (json_array_size(findings) > 0)
			rc = settle(a, "power_thermal", "failed",
			            json_string_value(
			                    json_object_get(json_array_get(findings, 0), "fix")),
			            ev, json_incref(findings), "%s: %s",
			            json_string_value(
			                    json_object_get(json_array_get(findings, 0), "item")),
			            json_string_value(json_object_get(json_array_get(findings, 0),
			                                              "message")));
		else
			rc = settle(a, "power_thermal", "passed", NULL, ev, NULL,
			            "under every warning and the rack's limit during burn-in");
	}
	json_decref(findings);
	json_decref(hot);
	json_decref(peaks);
	return rc;
}

/* 11 and 12: the fabric pairs and the NCCL run across the rack's nodes (cross.c). */
static int
check_cross(struct acc *a, const char *check)
{
	json_t *res = NULL;
	char why[300] = "";
	unsigned look = LOOK_AGAIN_MS;
	int r = jobs_accept_cross(a->w, a->run, check, json_object_get(a->info, "cabling"), &res,
	                          &look, why, sizeof why);

	if (r < 0)
		return trouble(a, why, check);
	if (r == 1) {
		a->look_ms = look;
		return 1;
	}
	r = settle(a, check, json_string_value(json_object_get(res, "state")) ?: "failed",
	           json_string_value(json_object_get(res, "fix")),
	           json_incref(json_object_get(res, "evidence")),
	           json_incref(json_object_get(res, "findings")), "%s",
	           json_string_value(json_object_get(res, "message")) ?: "?");
	json_decref(res);
	return r;
}

/* 9: no critical entry in the BMC's event log since the run started. */
static int
check_sel(struct acc *a)
{
	int64_t since = json_integer_value(json_object_get(a->info, "created_at"));
	struct rp_bmc_err err = {0};
	json_t *events = NULL, *ev, *findings;
	size_t i, warnings = 0;
	int rc;

	if (rp_bmc_events(a->b, since, 10000, &events, &err) < 0) {
		if (err.kind == RP_BMC_UNSUPPORTED)
			return settle(a, "sel", "skipped", "read the BMC's event log by hand", NULL,
			              NULL, "the BMC keeps no event log this driver can read: %s",
			              err.msg);
		if (rp_bmc_err_transient(err.kind)) {
			a->out = jobs_bmc_failure(a->w, &err, 1); /* a retry, with backoff */
			return -1;
		}
		return settle(a, "sel", "failed", "check the BMC", NULL, NULL,
		              "cannot read the BMC's event log: %s", err.msg);
	}
	findings = json_array();
	json_array_foreach(events, i, ev)
	{
		const char *sev = json_string_value(json_object_get(ev, "severity")) ?: "";

		warnings += !strcmp(sev, "warning");
		if (!strcmp(sev, "critical"))
			json_array_append_new(
			        findings,
			        json_pack("{s:s, s:O, s:O, s:O, s:s}", "item", "sel", "actual", ev,
			                  "at", json_object_get(ev, "at"), "message",
			                  json_object_get(ev, "message"), "fix",
			                  "look the event up in the vendor's documentation"));
	}
	if (json_array_size(findings) > 0)
		rc = settle(
		        a, "sel", "failed", "look the event up in the vendor's documentation",
		        json_pack("{s:I, s:I}", "entries", (json_int_t)json_array_size(events),
		                  "warnings", (json_int_t)warnings),
		        json_incref(findings), "%zu critical event(s) since the run started: %s",
		        json_array_size(findings),
		        json_string_value(json_object_get(json_array_get(findings, 0), "message")));
	else
		rc = settle(a, "sel", "passed", NULL,
		            json_pack("{s:I, s:I}", "entries", (json_int_t)json_array_size(events),
		                      "warnings", (json_int_t)warnings),
		            NULL,
		            "no critical event since the run started (%zu entries, %zu warnings)",
		            json_array_size(events), warnings);
	json_decref(findings);
	json_decref(events);
	return rc;
}

struct rp_job_outcome *
jobs_run_acceptance(struct work *w, struct rp_bmc *b)
{
	struct acc a = {.w = w, .b = b};
	struct rp_job_outcome *o;
	size_t i;

	a.run = json_string_value(json_object_get(jobs_params(w), "run"));
	if (a.run == NULL ||
	    rp_store_accept_node(w->j->st, a.run, w->node_id, &a.info) != RP_ERR_OK ||
	    rp_store_node_get(w->j->st, jobs_node_uuid(w), &a.node) != RP_ERR_OK) {
		o = jobs_outcome(w, RP_JOB_END_FAILED);
		jobs_set_error(o, "no_run", "the acceptance run %s is gone",
		               a.run ? a.run : "(none)");
		goto out;
	}
	{
		const char *px = check_state(&a, "pxe"), *pt = check_state(&a, "power_thermal");

		if (px && !strcmp(px, "running") && pt &&
		    (!strcmp(pt, "pending") || !strcmp(pt, "running")))
			sample_sensors(&a);
	}
	for (i = 0; rp_accept_checks[i] && a.out == NULL; i++) {
		const char *c = rp_accept_checks[i], *st = check_state(&a, c);
		int r;

		if (st == NULL || (strcmp(st, "pending") != 0 && strcmp(st, "running") != 0))
			continue;
		if (jobs_stopping(w))
			break;
		if (!strcmp(c, "bmc"))
			r = check_bmc(&a);
		else if (!strcmp(c, "power"))
			r = check_power(&a);
		else if (!strcmp(c, "pxe"))
			r = check_pxe(&a);
		else if (!strcmp(c, "inventory") || !strcmp(c, "links"))
			r = check_compare(&a, c);
		else if (!strcmp(c, "firmware") || !strcmp(c, "bios"))
			r = check_desired(&a, c);
		else if (!strcmp(c, "burn_in"))
			r = check_burn_in(&a);
		else if (!strcmp(c, "power_thermal"))
			r = check_power_thermal(&a);
		else if (!strcmp(c, "fabric") || !strcmp(c, "nccl"))
			r = check_cross(&a, c);
		else
			r = check_sel(&a);
		if (r < 0)
			break;
		if (r == 1 && a.look_ms) {
			/* A check across nodes: driving a pair, or waiting for the others. */
			a.out = jobs_later(w, a.look_ms);
			jobs_set_error(a.out, "accepting", "check %s: across the rack's nodes", c);
			break;
		}
		if (r == 1) {
			/* Waits for the pxe check, which waits for its job. */
			wait_child(&a, c, "(the pxe check)", "waiting");
			break;
		}
	}
	if (a.out == NULL && jobs_stopping(w)) {
		o = NULL;
		goto out;
	}
	o = a.out ? a.out : jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	a.out = NULL;
out:
	json_decref(a.info);
	json_decref(a.node);
	rp_store_outcome_free(a.out);
	return o;
}
