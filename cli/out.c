/* Output: aligned tables from output specs, value formatting, template lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CELL_MAX 2048
#define COLS_MAX 16

json_t *
rp_cli_get(json_t *o, const char *path)
{
	char key[128];
	size_t n;

	while (o && path[n = strcspn(path, ".")] == '.') {
		snprintf(key, sizeof key, "%.*s", (int)n, path);
		o = json_object_get(o, key);
		path += n + 1;
	}
	return json_object_get(o, path);
}

const char *
rp_cli_str(json_t *o, const char *path, const char *dflt)
{
	const char *s = json_string_value(rp_cli_get(o, path));

	return s ? s : dflt;
}

/* Appends the values of o (in an array: an object reads as its values), space-separated. */
static size_t
fmt_values(json_t *o, char *buf, size_t len)
{
	const char *k;
	size_t n = 0;
	json_t *v;

	json_object_foreach(o, k, v)
	{
		if (n + 1 < len && n)
			buf[n++] = ' ';
		rp_cli_fmt(v, buf + n, len - n);
		n += strlen(buf + n);
	}
	return n;
}

const char *
rp_cli_fmt(json_t *v, char *buf, size_t len)
{
	size_t i, n = 0;
	json_t *x;
	char *d;

	buf[0] = '\0';
	if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
		snprintf(buf, len, "-");
	else if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, len, "%g", json_real_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
	else if (json_is_array(v))
		json_array_foreach(v, i, x)
		{
			if (n + 1 < len && i)
				buf[n++] = ',';
			if (json_is_object(x))
				n += fmt_values(x, buf + n, len - n);
			else
				n += strlen(rp_cli_fmt(x, buf + n, len - n));
		}
	else if ((d = json_dumps(v, JSON_COMPACT)) != NULL) {
		snprintf(buf, len, "%s", d);
		free(d);
	}
	return buf;
}

void
rp_cli_puts_clean(const char *s)
{
	for (; *s; s++)
		putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

/* Display width: UTF-8 code points. */
static size_t
width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

/* Prints rows (nrows x ncols cells) aligned, without trailing blanks. */
static void
print_table(char **cells, size_t nrows, int ncols)
{
	size_t w[COLS_MAX] = {0}, r, x;
	int i, last;

	for (r = 0; r < nrows; r++)
		for (i = 0; i < ncols; i++)
			if ((x = width(cells[r * ncols + i])) > w[i])
				w[i] = x;
	for (r = 0; r < nrows; r++) {
		for (last = ncols - 1; last > 0 && cells[r * ncols + last][0] == '\0'; last--)
			;
		for (i = 0; i <= last; i++) {
			rp_cli_puts_clean(cells[r * ncols + i]);
			if (i < last)
				printf("%*s", (int)(w[i] - width(cells[r * ncols + i]) + 2), "");
		}
		putchar('\n');
	}
}

struct cells {
	char **v;
	size_t n, cap;
};

static int
add(struct cells *t, const char *s)
{
	char **p;

	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		if ((p = realloc(t->v, t->cap * sizeof *p)) == NULL)
			return -1;
		t->v = p;
	}
	if ((t->v[t->n] = strdup(s)) == NULL)
		return -1;
	t->n++;
	return 0;
}

/* KEY VALUE cells of o, nested objects under dotted keys, arrays of objects left out. */
static int
flatten(struct cells *t, json_t *o, const char *prefix)
{
	char key[256], buf[CELL_MAX];
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
	{
		snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", k);
		if (json_is_array(v) && json_is_object(json_array_get(v, 0)))
			continue;
		if (json_is_object(v) && json_object_size(v) > 0) {
			if (flatten(t, v, key) < 0)
				return -1;
		} else if (add(t, key) < 0 || add(t, rp_cli_fmt(v, buf, sizeof buf)) < 0) {
			return -1;
		}
	}
	return 0;
}

/* A table of rows by cols "HDR=path,...". */
static int
columns(struct cells *t, json_t *rows, const char *cols, int *ncols)
{
	const char *path[COLS_MAX];
	char spec[1024], buf[CELL_MAX], *p, *save = NULL;
	json_t *row;
	size_t i;
	int n = 0, k;

	snprintf(spec, sizeof spec, "%s", cols);
	for (p = strtok_r(spec, ",", &save); p && n < COLS_MAX; p = strtok_r(NULL, ",", &save)) {
		path[n++] = p + strcspn(p, "=") + (p[strcspn(p, "=")] == '=');
		p[strcspn(p, "=")] = '\0';
		if (add(t, p) < 0)
			return -1;
	}
	json_array_foreach(rows, i,
	                   row) for (k = 0; k < n;
	                             k++) if (add(t, rp_cli_fmt(rp_cli_get(row, path[k]), buf,
	                                                        sizeof buf)) < 0) return -1;
	*ncols = n;
	return 0;
}

int
rp_cli_print(json_t *o, const char *spec)
{
	char sec[2048], *p, *save = NULL, *colon;
	json_t *rows, *one = NULL;
	int rc = -1, printed = 0, ncols;
	size_t i;

	snprintf(sec, sizeof sec, "%s", spec);
	for (p = strtok_r(sec, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
		struct cells t = {0};
		int r;

		colon = strchr(p, ':');
		if (colon)
			*colon = '\0';
		rows = colon && p[0] ? json_object_get(o, p) : json_object_get(o, "items");
		if (colon && p[0] && json_array_size(rows) == 0)
			continue; /* a named list that is empty says nothing */
		if (colon && !p[0] && !json_is_array(rows))
			rows = one = json_pack("[O]", o);
		ncols = 2;
		r = colon ? columns(&t, rows, colon + 1, &ncols) : flatten(&t, o, "");
		if (r == 0) {
			if (printed++)
				putchar('\n');
			print_table(t.v, t.n / (size_t)ncols, ncols);
		}
		for (i = 0; i < t.n; i++)
			free(t.v[i]);
		free(t.v);
		json_decref(one);
		one = NULL;
		if (r < 0)
			goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "rackpilot: out of memory\n");
	return rc;
}

void
rp_cli_print_line(const char *tmpl, json_t *o, const char *arg0)
{
	char line[4096], buf[CELL_MAX], path[128];
	size_t n = 0, k;

	while (*tmpl && n + 1 < sizeof line) {
		if (*tmpl != '{' || (k = strcspn(tmpl, "}")) >= sizeof path || tmpl[k] != '}') {
			line[n++] = *tmpl++;
			continue;
		}
		snprintf(path, sizeof path, "%.*s", (int)k - 1, tmpl + 1);
		tmpl += k + 1;
		if (!strcmp(path, "0"))
			snprintf(buf, sizeof buf, "%s", arg0 ? arg0 : "");
		else if (rp_cli_get(o, path) == NULL)
			buf[0] = '\0'; /* absent: nothing, null: "-" */
		else
			rp_cli_fmt(rp_cli_get(o, path), buf, sizeof buf);
		n += (size_t)snprintf(line + n, sizeof line - n, "%s", buf);
	}
	line[n < sizeof line ? n : sizeof line - 1] = '\0';
	for (n = strlen(line); n > 0 && line[n - 1] == ' '; n--)
		line[n - 1] = '\0';
	rp_cli_puts_clean(line);
	putchar('\n');
}
