/*
 * fuzz_agent — agent messages (docs/agent-protocol.md) through the real dispatcher as the
 * registered node's agent: register (a fresh bootstrap token each time), heartbeat,
 * inventory, BIOS report, config, job state and step reports (api/agent.c, api/steps.c);
 * and the agent's own parser of what the server sends it, the step plan
 * (rp_agent_plan_parse, agent/plan.c).
 *
 * Input: byte 0 picks the message (modulo 8); for job and step routes line 1 names the
 * step (empty: "a") and byte 1 bit 0 swaps the job id for line 2; the rest is the body.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent.h"
#include "fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_server_init();
	return 0;
}

static size_t
next_line(const char **p, const char *end, const char **line)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);

	*line = *p;
	*p = nl ? nl + 1 : end;
	return n;
}

static void
plan(const char *text, size_t len)
{
	char err[256] = "";
	struct rp_agent_plan *pl = rp_agent_plan_parse(
	        text, len, "0b9f0000-0000-4000-8000-000000000000", err, sizeof err);

	if (pl == NULL && err[0] == '\0') {
		fprintf(stderr, "plan: refused without a reason\n");
		abort();
	}
	rp_agent_plan_free(pl);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[] = {"/v1/agent/register",
	                                    "/v1/agent/heartbeat",
	                                    "/v1/agent/inventory",
	                                    "/v1/agent/bios",
	                                    "/v1/agent/config",
	                                    NULL,
	                                    NULL};
	const char *p = (const char *)data + 2, *end = (const char *)data + size, *l;
	char target[700], step[200], job[200], auth[160];
	const char *hdr[3], *method = "POST", *body;
	struct fz_reply r;
	unsigned kind;
	size_t n;

	if (size < 2)
		return 0;
	kind = data[0] % 8;
	if (kind == 7) {
		plan(p, (size_t)(end - p));
		return 0;
	}
	fz_server_tick(3000);
	if (kind == 5 || kind == 6) {
		char enc[600];

		n = next_line(&p, end, &l);
		fz_target_encode(l, n > 150 ? 150 : n, enc, sizeof enc);
		snprintf(step, sizeof step, "%s", enc[0] ? enc : "a");
		n = next_line(&p, end, &l);
		fz_target_encode(l, n > 150 ? 150 : n, enc, sizeof enc);
		snprintf(job, sizeof job, "%s", (data[1] & 1) && enc[0] ? enc : fz_agent_job());
		if (kind == 5) {
			snprintf(target, sizeof target, "/v1/agent/jobs/%s", job);
			method = "GET";
		} else
			snprintf(target, sizeof target, "/v1/agent/jobs/%s/steps/%s", job, step);
	} else {
		snprintf(target, sizeof target, "%s", paths[kind]);
		if (kind == 4)
			method = "GET";
	}
	snprintf(auth, sizeof auth, "Authorization: %s",
	         kind == 0 ? fz_bootstrap_auth() : fz_agent_auth());
	hdr[0] = auth;
	hdr[1] = "Content-Type: application/json";
	hdr[2] = NULL;
	body = !strcmp(method, "GET") ? NULL : p;
	if (fz_request(method, target, hdr, body, body ? (size_t)(end - p) : 0, &r) < 0) {
		fprintf(stderr, "fuzz_agent: no HTTP reply to %s\n", target);
		abort();
	}
	fz_check_reply(method, target, &r);
	if (kind == 0 && r.status == 200) {
		json_t *rep = json_loadb(r.body, r.body_len, 0, NULL);
		const char *id =
		        json_string_value(json_object_get(json_object_get(rep, "node"), "id"));
		const char *tok = json_string_value(json_object_get(rep, "token"));

		if (id && tok && !strcmp(id, fz_agent_node()))
			fz_agent_auth_set(tok);
		json_decref(rep);
	}
	fz_reply_clear(&r);
	return 0;
}
