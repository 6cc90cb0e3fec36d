/* RFC 4180 CSV with a header row: quoted fields, "" escapes, CRLF or LF line ends. */
#include <stdio.h>
#include <string.h>

#include "api.h"

#define MAX_COLS 64
#define MAX_CELL 4096

int
rp_api_csv_parse(const char *text, size_t len, json_t **rows, char *why, size_t whylen)
{
	json_t *header = json_array(), *out = json_array(), *row = NULL;
	char cell[MAX_CELL + 1];
	size_t i = 0, n, col = 0;
	int line = 1, row_line = 1, quoted, in_header = 1, rc = -1;

	while (i < len) {
		/* One cell. */
		n = 0;
		quoted = 0;
		if (text[i] == '"') {
			quoted = 1;
			i++;
			for (;;) {
				if (i >= len) {
					snprintf(why, whylen, "line %d: unterminated quoted field",
					         row_line);
					goto out;
				}
				if (text[i] == '"') {
					if (i + 1 < len && text[i + 1] == '"') {
						i += 2;
						if (n < MAX_CELL)
							cell[n++] = '"';
						else
							goto toolong;
						continue;
					}
					i++;
					break;
				}
				if (text[i] == '\n')
					line++;
				if (n >= MAX_CELL)
					goto toolong;
				cell[n++] = text[i++];
			}
			if (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
				snprintf(why, whylen, "line %d: text after a closing quote",
				         row_line);
				goto out;
			}
		} else {
			while (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
				if (text[i] == '"') {
					snprintf(why, whylen,
					         "line %d: quote inside an unquoted field",
					         row_line);
					goto out;
				}
				if (n >= MAX_CELL)
					goto toolong;
				cell[n++] = text[i++];
			}
		}
		cell[n] = '\0';
		if (memchr(cell, '\0', n)) {
			snprintf(why, whylen, "line %d: NUL character", row_line);
			goto out;
		}
		/* Trim surrounding blanks of unquoted cells: spreadsheets add them. */
		if (!quoted) {
			char *p = cell;

			while (*p == ' ' || *p == '\t')
				p++;
			memmove(cell, p, strlen(p) + 1);
			n = strlen(cell);
			while (n > 0 && (cell[n - 1] == ' ' || cell[n - 1] == '\t'))
				cell[--n] = '\0';
		}
		/* jansson refuses invalid UTF-8 (json_string gives NULL): say so rather than lose
		 * the cell. */
		{
			json_t *v = json_stringn(cell, n);

			if (v == NULL) {
				snprintf(why, whylen, "line %d: column %zu is not valid UTF-8",
				         row_line, col + 1);
				goto out;
			}
			json_decref(v);
		}
		if (in_header) {
			size_t j;

			if (col >= MAX_COLS) {
				snprintf(why, whylen, "line 1: more than %d columns", MAX_COLS);
				goto out;
			}
			if (n == 0) {
				snprintf(why, whylen, "line 1: header column %zu is empty",
				         col + 1);
				goto out;
			}
			for (j = 0; j < json_array_size(header); j++) {
				if (strcmp(json_string_value(json_array_get(header, j)), cell) ==
				    0) {
					snprintf(why, whylen,
					         "line 1: column '%.40s' appears twice", cell);
					goto out;
				}
			}
			json_array_append_new(header, json_string(cell));
		} else {
			if (row == NULL)
				row = json_pack("{s:i}", "_line", row_line);
			if (col >= json_array_size(header)) {
				snprintf(why, whylen, "line %d: more cells than header columns",
				         row_line);
				goto out;
			}
			if (n > 0)
				json_object_set_new(row,
				                    json_string_value(json_array_get(header, col)),
				                    json_string(cell));
		}
		col++;
		if (i < len && text[i] == ',') {
			i++;
			continue;
		}
		/* End of record. */
		if (i < len && text[i] == '\r')
			i++;
		if (i < len && text[i] == '\n')
			i++;
		if (in_header) {
			in_header = 0;
		} else if (row) {
			/* A row of empty cells is a blank line: skip it. */
			if (json_object_size(row) > 1)
				json_array_append(out, row);
			json_decref(row);
			row = NULL;
		}
		line++;
		row_line = line;
		col = 0;
	}
	if (json_array_size(header) == 0) {
		snprintf(why, whylen, "empty CSV: a header row is required");
		goto out;
	}
	*rows = out;
	out = NULL;
	rc = 0;
	goto out;
toolong:
	snprintf(why, whylen, "line %d: cell longer than %d bytes", row_line, MAX_CELL);
out:
	json_decref(header);
	json_decref(out);
	json_decref(row);
	return rc;
}
