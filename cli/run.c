/* The generic command: a row of the command table turned into one request and its output. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "rackpilot/common.h"

size_t
rp_cli_tok(const char *p, struct rp_cli_tok *t)
{
	size_t len = strcspn(p, " "), f, m;
	const char *q = p;

	memset(t, 0, sizeof *t);
	if (strchr("@%+", *q))
		t->sigil = *q++;
	f = strcspn(q, "=: ");
	t->valued = q[f] == '=';
	m = t->valued ? strcspn(q + f + 1, ": ") : 0;
	snprintf(t->flag, sizeof t->flag, "%.*s", (int)f, q);
	snprintf(t->member, sizeof t->member, "%.*s", m ? (int)m : (int)f, m ? q + f + 1 : q);
	q += f + t->valued + m;
	t->type = *q == ':' ? q[1] : 's';
	return len;
}

int
rp_cli_find(const char *spec, const char *name, struct rp_cli_tok *t)
{
	const char *p = spec;

	while (*p) {
		p += rp_cli_tok(p, t);
		p += *p == ' ';
		if ((t->sigil == 0 || t->sigil == '+') && !strcmp(t->flag, name))
			return 0;
	}
	return -1;
}

char *
rp_cli_read_file(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	struct rp_buf b;
	char chunk[65536], *out = NULL;
	size_t got;

	rp_buf_init(&b, RP_CLI_BODY_MAX);
	if (f == NULL) {
		fprintf(stderr, "rackpilot: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (rp_buf_append(&b, chunk, got) < 0)
			break;
	if (b.toobig) {
		fprintf(stderr, "rackpilot: %s: larger than 64 MiB\n", path);
		goto out;
	}
	if (b.oom || (b.data == NULL && (b.data = calloc(1, 1)) == NULL)) {
		fprintf(stderr, "rackpilot: %s: out of memory\n", path);
		goto out;
	}
	if (ferror(f)) {
		fprintf(stderr, "rackpilot: %s: read error\n", path);
		goto out;
	}
	*len = b.len;
	out = b.data;
	b.data = NULL;
out:
	if (f != stdin)
		fclose(f);
	rp_buf_free(&b);
	return out;
}

/* Choice "A|B" of s: A when first, else B (s itself without '|'). */
static const char *
pick(const char *s, int first, char *buf, size_t len)
{
	const char *bar = strchr(s, '|');

	if (bar == NULL)
		return s;
	snprintf(buf, len, "%.*s", first ? (int)(bar - s) : (int)strlen(bar + 1),
	         first ? s : bar + 1);
	return buf;
}

/* Sets o[path] (dotted; objects made on the way). Steals v. */
static int
set_path(json_t *o, const char *path, json_t *v)
{
	size_t n = strcspn(path, ".");
	char key[64];
	json_t *sub;

	if (path[n] == '\0')
		return json_object_set_new(o, path, v);
	snprintf(key, sizeof key, "%.*s", (int)n, path);
	if (!json_is_object(sub = json_object_get(o, key)) &&
	    json_object_set_new(o, key, sub = json_object()) < 0) {
		json_decref(v);
		return -1;
	}
	return set_path(sub, path + n + 1, v);
}

/* The value s of option t as JSON ("null" is null), or NULL (printed). */
static json_t *
typed(const struct rp_cli_tok *t, const char *s)
{
	json_t *v = NULL;
	char *end, *copy, *save = NULL, *x;
	double d;
	long i;

	if (!strcmp(s, "null"))
		return json_null();
	if (t->type == 'i') {
		errno = 0;
		i = strtol(s, &end, 10);
		if (errno == 0 && end != s && *end == '\0')
			return json_integer(i);
	} else if (t->type == 'n') {
		errno = 0;
		d = strtod(s, &end);
		if (errno == 0 && end != s && *end == '\0' && isfinite(d))
			return json_real(d);
	} else if (t->type == 'b') {
		if (!*s || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcmp(s, "1"))
			return json_true();
		if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcmp(s, "0"))
			return json_false();
	} else if (t->type == 'l' && (v = json_array()) && (copy = strdup(s))) {
		for (x = strtok_r(copy, ",", &save); x; x = strtok_r(NULL, ",", &save))
			json_array_append_new(v, json_string(x));
		free(copy);
		return v;
	} else if (t->type == 'j' && (v = json_loads(s, JSON_DECODE_ANY, NULL))) {
		return v;
	} else if (t->type == 's') {
		return json_string(s);
	}
	json_decref(v);
	fprintf(stderr, "rackpilot: --%s: expected %s\n", t->flag,
	        t->type == 'i'   ? "an integer"
	        : t->type == 'n' ? "a number"
	        : t->type == 'b' ? "true or false"
	                         : "a JSON value");
	return NULL;
}

/*
 * The body: --json FILE, then '@' tokens (the positionals from *used on) and the '%' token
 * (the verb), then each option that has a member, in the order given. RP_CLI_OK, or an exit
 * code (printed).
 */
int
rp_cli_body(struct rp_cli *c, int *used, json_t **out)
{
	const char *file = rp_cli_opt(c, "json"), *p;
	struct rp_cli_tok t;
	char verb[32], *u;
	json_t *o, *v;
	int i, rc = RP_CLI_EAPI;

	if (file && strstr(c->cmd->opts, "json=")) {
		json_error_t je;
		size_t len;
		char *text = rp_cli_read_file(file, &len);

		o = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &je) : NULL;
		if (text && !json_is_object(o))
			fprintf(stderr, "rackpilot: %s: %s\n", file,
			        o ? "not a JSON object" : je.text);
		free(text);
		if (!json_is_object(o)) {
			json_decref(o);
			return RP_CLI_EAPI;
		}
	} else if ((o = json_object()) == NULL) {
		return RP_CLI_EAPI;
	}
	snprintf(verb, sizeof verb, "%s", c->cmd->verb ? c->cmd->verb : "");
	for (u = verb; (u = strchr(u, '-')) != NULL;)
		*u = '_';
	for (p = c->cmd->opts; *p; p += *p == ' ') {
		p += rp_cli_tok(p, &t);
		if (t.sigil == '@' && *used < c->argc)
			json_object_set_new(o, t.member, json_string(c->argv[(*used)++]));
		else if (t.sigil == '%' && t.type == 'b')
			json_object_set_new(o, t.member, json_boolean(strcmp(verb, "off") != 0));
		else if (t.sigil == '%')
			json_object_set_new(o, t.member, json_string(verb));
	}
	for (i = 0; i < c->nopts; i++) {
		/* Plain flags (--wait) and the body file are no members. */
		if (rp_cli_find(c->cmd->opts, c->opts[i].name, &t) < 0 || !strcmp(t.flag, "json") ||
		    (!t.valued && t.type == 's'))
			continue;
		if ((v = typed(&t, c->opts[i].value)) == NULL) {
			rc = rp_cli_usage(c, NULL);
			goto out;
		}
		if (set_path(o, t.member, v) < 0)
			goto out;
	}
	*out = o;
	o = NULL;
	rc = RP_CLI_OK;
out:
	json_decref(o);
	return rc;
}

/* The request path: the row's path with the positionals, and for GET every option with a
 * value as a query parameter. 0, or -1 when it does not fit. */
static int
build_path(struct rp_cli *c, char *path, size_t len, int *used)
{
	char pbuf[256];
	const char *fmt = pick(c->cmd->path, c->argc == 0, pbuf, sizeof pbuf);
	struct rp_cli_tok t;
	size_t n;
	int i;

	for (; *fmt; fmt++) {
		if (fmt[0] == '%' && fmt[1] == 's' && *used < c->argc) {
			if (rp_cli_pathf(path, len, "%s", c->argv[(*used)++]) < 0)
				return -1;
			fmt++;
		} else if ((n = strlen(path)) + 1 < len) {
			path[n] = *fmt;
			path[n + 1] = '\0';
		}
	}
	for (i = 0; !strcmp(c->cmd->method, "GET") && i < c->nopts; i++)
		if (rp_cli_find(c->cmd->opts, c->opts[i].name, &t) == 0 && t.valued &&
		    rp_cli_query(path, len, t.member, c->opts[i].value) < 0)
			return -1;
	return 0;
}

int
rp_cli_run(struct rp_cli *c)
{
	const struct rp_cli_cmd *k = c->cmd;
	char path[4096] = "", obuf[1024];
	const char *out = pick(k->out, c->argc == 0, obuf, sizeof obuf), *id;
	json_t *body = NULL, *o = NULL;
	int used = 0, rc;

	if (build_path(c, path, sizeof path, &used) < 0) {
		rc = rp_cli_usage(c, "argument too long");
		goto out;
	}
	/* "=": the answer as it is (an export: JSON or text for another program). */
	if (!strcmp(k->method, "GET") && !strcmp(out, "=")) {
		struct rp_cli_resp r = {0};

		rc = RP_CLI_EAPI;
		if (rp_cli_http(c, "GET", path, NULL, NULL, 0, &r) == 0) {
			if (r.status != 200) {
				rp_cli_print_error(c, &r);
			} else {
				fwrite(r.body, 1, r.len, stdout);
				if (r.len > 0 && r.body[r.len - 1] != '\n')
					putchar('\n');
				/* A full disk or a closed pipe is an error, not an export. */
				if (fflush(stdout) == 0 && !ferror(stdout))
					rc = RP_CLI_OK;
				else
					fprintf(stderr, "rackpilot: writing the answer: %s\n",
					        strerror(errno));
			}
		}
		rp_cli_resp_free(&r);
		goto out;
	}
	if (!strcmp(k->method, "GET")) {
		rc = out[0] == ':' ? rp_cli_list(c, path, !strstr(k->opts, "limit="), &o)
		                   : rp_cli_call(c, "GET", path, NULL, &o);
		if (rc == RP_CLI_OK && c->json)
			rp_cli_print_raw(c);
		else if (rc == RP_CLI_OK && rp_cli_print(o, out) < 0)
			rc = RP_CLI_EAPI;
		goto out;
	}
	if (strcmp(k->method, "DELETE") && (rc = rp_cli_body(c, &used, &body)) != RP_CLI_OK)
		goto out;
	if ((rc = rp_cli_call(c, k->method, path, body, &o)) != RP_CLI_OK)
		goto out;
	id = rp_cli_str(o, "job.id", rp_cli_str(o, "id", NULL));
	if (rp_cli_opt(c, "wait") && id)
		rc = rp_cli_job_follow(c, id);
	else if (c->json)
		rp_cli_print_raw(c);
	else
		rp_cli_print_line(out, o, c->argc ? c->argv[0] : NULL);
out:
	json_decref(body);
	json_decref(o);
	return rc;
}
