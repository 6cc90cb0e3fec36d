/* Commands of more than one request: jobs and batches followed, events followed, import. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define POLL_MS        500
#define SSE_LINE_MAX   (16u << 20)
#define POLL_PAGES_MAX 100

static int
ended(const char *state)
{
	return !strcmp(state, "succeeded") || !strcmp(state, "failed") ||
	       !strcmp(state, "cancelled");
}

/* Copies the job's log from *off on to stdout. */
static void
copy_log(struct rp_cli *c, const char *id, long *off)
{
	struct rp_cli_resp r;
	char path[256] = "", n[32];

	snprintf(n, sizeof n, "%ld", *off);
	if (rp_cli_pathf(path, sizeof path, "/v1/jobs/%s/log", id) < 0 ||
	    rp_cli_query(path, sizeof path, "offset", n) < 0 ||
	    rp_cli_http(c, "GET", path, NULL, NULL, 0, &r) < 0)
		return;
	if (r.status == 200 && r.len > 0) {
		if (c->tty)
			printf("\r\033[K");
		fwrite(r.body, 1, r.len, stdout);
		if (r.body[r.len - 1] != '\n')
			putchar('\n');
		*off += (long)r.len;
		fflush(stdout);
	}
	rp_cli_resp_free(&r);
}

/*
 * A new state of what is followed (seen: the last, 128 bytes): on a terminal a bar with brief
 * on one short line, else a line with now; nothing with --json.
 */
static void
report(struct rp_cli *c, char *seen, const char *what, const char *id, long done, long total,
       const char *now, const char *brief)
{
	int fill = total > 0 ? (int)(done * 20 / total) : 0;

	if (c->json || !strcmp(seen, now))
		return;
	if (c->tty)
		printf("\r\033[K%s %.8s [%.*s%.*s] %ld/%ld %s", what, id, fill,
		       "####################", 20 - fill, "....................", done, total,
		       brief);
	else
		printf("%s %s: %s\n", what, id, now);
	fflush(stdout);
	snprintf(seen, 128, "%s", now);
}

int
rp_cli_job_follow(struct rp_cli *c, const char *id)
{
	char path[256] = "", seen[128] = "", now[128];
	json_t *j = NULL, *st;
	const char *state = "?";
	long off = 0, done, total;
	size_t i;
	int rc = RP_CLI_EAPI;

	if (rp_cli_pathf(path, sizeof path, "/v1/jobs/%s", id) < 0)
		return rp_cli_usage(c, "argument too long");
	do {
		if (j)
			rp_cli_sleep_ms(POLL_MS);
		json_decref(j);
		j = NULL;
		if (rp_cli_call(c, "GET", path, NULL, &j) != RP_CLI_OK)
			goto out;
		state = rp_cli_str(j, "state", "?");
		if (!c->json && json_integer_value(rp_cli_get(j, "log.bytes")) > off)
			copy_log(c, id, &off);
		/* A steps job counts its settled steps; others are one unit. */
		total = (long)json_array_size(json_object_get(j, "steps"));
		done = 0;
		json_array_foreach(json_object_get(j, "steps"), i, st) done +=
		        !strstr("pending running", rp_cli_str(st, "state", "pending"));
		snprintf(now, sizeof now, total ? "%s (%ld/%ld steps)" : "%s", state, done, total);
		/* Queued while something holds it back (a power-on waiting for room in its
		 * rack): say what. */
		if (!strcmp(state, "queued") && !strcmp(rp_cli_str(j, "error.code", ""), "waiting"))
			snprintf(now, sizeof now, "queued (%.100s)",
			         rp_cli_str(j, "error.message", "waiting"));
		report(c, seen, "job", id, total ? done : ended(state), total ? total : 1, now,
		       now);
	} while (!ended(state));
	if (c->tty && !c->json)
		putchar('\n');
	if (c->json)
		rp_cli_print_raw(c);
	else if (!strcmp(state, "succeeded"))
		rp_cli_print_line("result: {result}", j, NULL);
	if (strcmp(state, "succeeded")) {
		fprintf(stderr, "rackpilot: job %s %s: %s: %s\n", id, state,
		        rp_cli_str(j, "error.code", "?"), rp_cli_str(j, "error.message", ""));
		goto out;
	}
	rc = RP_CLI_OK;
out:
	json_decref(j);
	return rc;
}

int
rp_cli_batch_follow(struct rp_cli *c, json_t *created)
{
	static const char *const names[] = {"succeeded", "failed", "cancelled", "running",
	                                    "queued"};
	const char *id = rp_cli_str(created, "id", "");
	char path[256] = "", jpath[256] = "", seen[128] = "", now[128], brief[128];
	long n[5] = {0}, total;
	json_t *b = NULL, *jobs = NULL, *v;
	size_t i;
	int rc = RP_CLI_EAPI, k, bad = 0;

	if (rp_cli_pathf(path, sizeof path, "/v1/batches/%s", id) < 0 ||
	    rp_cli_pathf(jpath, sizeof jpath, "/v1/jobs?batch=%s", id) < 0)
		goto out;
	json_array_foreach(json_object_get(created, "skipped"), i, v)
	{
		fprintf(stderr, "rackpilot: skipped %s: %s\n", rp_cli_str(v, "node", "?"),
		        rp_cli_str(v, "reason", "?"));
		bad = 1;
	}
	do {
		if (b)
			rp_cli_sleep_ms(POLL_MS);
		json_decref(b);
		b = NULL;
		if (rp_cli_call(c, "GET", path, NULL, &b) != RP_CLI_OK)
			goto out;
		total = (long)json_integer_value(json_object_get(b, "total"));
		for (k = 0; k < 5; k++)
			n[k] = (long)json_integer_value(
			        rp_cli_get(json_object_get(b, "counts"), names[k]));
		snprintf(now, sizeof now,
		         "%ld/%ld done: %ld succeeded, %ld failed, %ld cancelled, %ld "
		         "running, %ld queued",
		         n[0] + n[1] + n[2], total, n[0], n[1], n[2], n[3], n[4]);
		snprintf(brief, sizeof brief, "%ld ok, %ld failed, %ld running, %ld queued", n[0],
		         n[1] + n[2], n[3], n[4]);
		report(c, seen, "batch", id, n[0] + n[1] + n[2], total, now, brief);
	} while (!json_is_true(json_object_get(b, "done")));
	if (c->tty && !c->json)
		putchar('\n');
	if (c->json)
		rp_cli_print_raw(c);
	if (n[1] + n[2] > 0) {
		bad = 1;
		if (rp_cli_list(c, jpath, 1, &jobs) != RP_CLI_OK)
			goto out;
		json_array_foreach(
		        json_object_get(jobs, "items"), i,
		        v) if (strstr("failed cancelled", rp_cli_str(v, "state", "succeeded")))
		        fprintf(stderr, "rackpilot: %s: %s: %s (job %s)\n",
		                rp_cli_str(v, "node", "?"), rp_cli_str(v, "error.code", "?"),
		                rp_cli_str(v, "error.message", ""), rp_cli_str(v, "id", "?"));
	}
	rc = bad ? RP_CLI_EPARTIAL : RP_CLI_OK;
out:
	json_decref(jobs);
	json_decref(b);
	return rc;
}

int
rp_cli_power(struct rp_cli *c)
{
	static const char *const keys[] = {"rack", "tag", "class"};
	json_t *body = NULL, *o = NULL, *sel = NULL, *v;
	int used = c->argc, n = c->argc, k, rc;

	for (k = 0; k < 3; k++)
		n += rp_cli_opt(c, keys[k]) != NULL;
	if (n != 1)
		return rp_cli_usage(c, "name one node, or one of --rack, --tag, --class");
	if (c->argc == 1)
		return rp_cli_run(c);
	if ((rc = rp_cli_body(c, &used, &body)) != RP_CLI_OK)
		return rc;
	rc = RP_CLI_EAPI;
	if ((sel = json_object()) == NULL)
		goto out;
	for (k = 0; k < 3; k++)
		if ((v = json_object_get(body, keys[k])) != NULL) {
			json_object_set(sel, keys[k], v);
			json_object_del(body, keys[k]);
		}
	json_object_set(body, "selector", sel);
	if ((rc = rp_cli_call(c, "POST", "/v1/actions/power", body, &o)) != RP_CLI_OK)
		goto out;
	if (!rp_cli_opt(c, "no-wait"))
		rc = rp_cli_batch_follow(c, o);
	else if (c->json)
		rp_cli_print_raw(c);
	else
		rp_cli_print_line("batch {id} queued: {jobs} jobs", o, NULL);
out:
	json_decref(sel);
	json_decref(o);
	json_decref(body);
	return rc;
}

int
rp_cli_import(struct rp_cli *c)
{
	char path[64] = "/v1/import", *text;
	struct rp_cli_resp r = {0};
	json_t *o = NULL;
	size_t len;
	int rc = RP_CLI_EAPI;

	if ((text = rp_cli_read_file(c->argv[0], &len)) == NULL)
		return RP_CLI_EAPI;
	if (rp_cli_opt(c, "dry-run"))
		rp_cli_query(path, sizeof path, "dry_run", "1");
	/* A JSON manifest or CSV, by its first character. */
	if (rp_cli_http(c, "POST", path,
	                text[strspn(text, " \t\r\n")] == '{' ? "application/json" : "text/csv",
	                text, len, &r) < 0)
		goto out;
	if (r.status != 200) {
		rp_cli_print_error(c, &r);
		goto out;
	}
	free(c->raw);
	c->raw = r.body;
	c->rawlen = r.len;
	r.body = NULL;
	if (c->json)
		rp_cli_print_raw(c);
	else if ((o = json_loads(c->raw, 0, NULL)) != NULL) {
		fputs(rp_cli_opt(c, "dry-run") ? "dry run, valid, nothing written: " : "imported: ",
		      stdout);
		rp_cli_print_line(c->cmd->out, o, NULL);
	}
	rc = RP_CLI_OK;
out:
	json_decref(o);
	rp_cli_resp_free(&r);
	free(text);
	return rc;
}

int
rp_cli_job_show(struct rp_cli *c)
{
	long off = 0;
	int rc = rp_cli_run(c);

	if (rc == RP_CLI_OK && rp_cli_opt(c, "log") && !c->json) {
		putchar('\n');
		copy_log(c, c->argv[0], &off);
	}
	return rc;
}

int
rp_cli_job_watch(struct rp_cli *c)
{
	return rp_cli_job_follow(c, c->argv[0]);
}

/* ---- events --follow ------------------------------------------------------------------- */

struct follow {
	struct rp_cli *c;
	json_int_t last; /* newest event printed */
	char *line;      /* SSE: the line being read */
	size_t len, cap;
};

/* An event newer than the last printed, on one line; with --json, its compact JSON. */
static void
print_event(struct follow *f, json_t *ev)
{
	json_int_t id = json_integer_value(json_object_get(ev, "id"));
	char *d;

	if (id <= f->last)
		return;
	f->last = id;
	if (f->c->json && (d = json_dumps(ev, JSON_COMPACT)) != NULL) {
		puts(d);
		free(d);
	} else if (!f->c->json) {
		rp_cli_print_line("{at}  {id}  {action}  {actor}  {summary}", ev, NULL);
	}
	fflush(stdout);
}

/* Polling: the events after f->last, oldest first, paging back as far as needed. */
static int
poll_once(struct follow *f, const char *base)
{
	char path[2048];
	const char *cursor = NULL;
	json_t *pages = json_array(), *page, *items;
	int rc = RP_CLI_EAPI, n, more = 1;
	size_t i, p;

	for (n = 0; pages && more && n < POLL_PAGES_MAX; n++) {
		snprintf(path, sizeof path, "%s", base);
		if (rp_cli_query(path, sizeof path, "limit", "100") < 0 ||
		    rp_cli_query(path, sizeof path, "cursor", cursor) < 0 ||
		    rp_cli_call(f->c, "GET", path, NULL, &page) != RP_CLI_OK)
			goto out;
		json_array_append_new(pages, page);
		items = json_object_get(page, "items");
		/* Newest first: far enough back once the oldest of a page is not new. */
		cursor = json_string_value(json_object_get(page, "next_cursor"));
		more = cursor &&
		       json_integer_value(rp_cli_get(
		               json_array_get(items, json_array_size(items) - 1), "id")) > f->last;
	}
	for (p = json_array_size(pages); p-- > 0;) {
		items = json_object_get(json_array_get(pages, p), "items");
		for (i = json_array_size(items); i-- > 0;)
			print_event(f, json_array_get(items, i));
	}
	rc = RP_CLI_OK;
out:
	json_decref(pages);
	return rc;
}

/*
 * Server-Sent Events: "id: N", "event: ACTION", "data: JSON" and a blank line per event,
 * ":" comments as keep-alives. rackpilotd's data is one line of compact JSON that carries
 * the id, so the data line is the event.
 */
static int
sse_sink(const char *data, size_t len, void *arg)
{
	struct follow *f = arg;
	json_t *ev;
	size_t i;
	char *p;

	for (i = 0; i < len; i++) {
		if (data[i] != '\n') {
			if (f->len + 2 > f->cap) {
				if (f->cap * 2 > SSE_LINE_MAX ||
				    (p = realloc(f->line, f->cap ? f->cap * 2 : 4096)) == NULL) {
					fprintf(stderr, "rackpilot: event stream: line too long\n");
					return -1;
				}
				f->line = p;
				f->cap = f->cap ? f->cap * 2 : 4096;
			}
			f->line[f->len++] = data[i];
			continue;
		}
		f->len -= f->len && f->line[f->len - 1] == '\r';
		if (f->len > 5 && !strncmp(f->line, "data:", 5) &&
		    (ev = json_loadb(f->line + 5, f->len - 5, 0, NULL)) != NULL) {
			print_event(f, ev);
			json_decref(ev);
		}
		f->len = 0;
	}
	return 0;
}

int
rp_cli_events(struct rp_cli *c)
{
	static const char *const filters[] = {"node", "rack", "action"};
	struct follow f = {c, 0, NULL, 0, 0};
	const char *limit = rp_cli_opt(c, "limit");
	char base[2048] = "/v1/events", stream[2048] = "/v1/events/stream", first[2048], last[32];
	json_t *o = NULL, *items;
	size_t i;
	long status;
	int rc = RP_CLI_EUSAGE, k, poll = rp_cli_opt(c, "poll") != NULL;

	if (!rp_cli_opt(c, "follow"))
		return rp_cli_run(c);
	for (k = 0; k < 3; k++)
		if (rp_cli_query(base, sizeof base, filters[k], rp_cli_opt(c, filters[k])) < 0 ||
		    rp_cli_query(stream, sizeof stream, filters[k], rp_cli_opt(c, filters[k])) < 0)
			return rp_cli_usage(c, "argument too long");
	snprintf(first, sizeof first, "%s", base);
	if (rp_cli_query(first, sizeof first, "limit", limit ? limit : "20") < 0)
		return rp_cli_usage(c, "argument too long");
	rc = RP_CLI_EAPI;
	if (rp_cli_call(c, "GET", first, NULL, &o) != RP_CLI_OK)
		goto out;
	items = json_object_get(o, "items");
	for (i = json_array_size(items); i-- > 0;)
		print_event(&f, json_array_get(items, i));
	while (!poll) {
		snprintf(last, sizeof last, "%" JSON_INTEGER_FORMAT, f.last);
		f.len = 0;
		status = rp_cli_stream(c, stream, "text/event-stream", last, sse_sink, &f);
		if (status == 404) {
			poll = 1; /* a server without the stream */
		} else if (status != 200) {
			if (status)
				fprintf(stderr, "rackpilot: GET /v1/events/stream: HTTP %ld\n",
				        status);
			goto out;
		} else {
			rp_cli_sleep_ms(1000); /* the stream ended: take up after the last event */
		}
	}
	while (poll_once(&f, base) == RP_CLI_OK)
		rp_cli_sleep_ms(1000);
out:
	json_decref(o);
	free(f.line);
	return rc;
}
