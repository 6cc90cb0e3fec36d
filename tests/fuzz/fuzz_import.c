/*
 * fuzz_import — the manifest import: the CSV parser (api/csv.c) on its own, then POST
 * /v1/import (api/import.c) through the real dispatcher with a CSV or JSON manifest.
 *
 * Input: byte 0 picks the mode (bit 0: 0 CSV, 1 JSON; bit 1: ?dry_run=true); the rest is
 * the manifest. Invariants: the parser either fails with a reason or returns an array of
 * objects with string values; every reply keeps fz_check_reply's promises.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
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

static void
check_rows(const char *text, size_t len)
{
	char why[256] = "";
	json_t *rows = NULL, *row, *v;
	const char *k;
	size_t i;

	if (rp_api_csv_parse(text, len, &rows, why, sizeof why) < 0) {
		if (rows != NULL || why[0] == '\0') {
			fprintf(stderr, "csv: failed without a reason, or with rows\n");
			abort();
		}
		return;
	}
	if (!json_is_array(rows)) {
		fprintf(stderr, "csv: success without an array\n");
		abort();
	}
	json_array_foreach(rows, i, row)
	{
		if (!json_is_object(row))
			abort();
		json_object_foreach(row, k, v) if (!json_is_string(v) && !json_is_integer(v))
		        abort();
	}
	json_decref(rows);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data + 1, *target;
	char auth[128];
	const char *hdr[3];
	struct fz_reply r;
	int json;

	if (size < 1)
		return 0;
	json = data[0] & 1;
	if (!json)
		check_rows(body, size - 1);
	fz_server_tick(2000);
	snprintf(auth, sizeof auth, "Authorization: %s", fz_admin_auth());
	hdr[0] = auth;
	hdr[1] = json ? "Content-Type: application/json" : "Content-Type: text/csv";
	hdr[2] = NULL;
	target = (data[0] & 2) ? "/v1/import?dry_run=true" : "/v1/import";
	if (fz_request("POST", target, hdr, body, size - 1, &r) < 0) {
		fprintf(stderr, "fuzz_import: no HTTP reply\n");
		abort();
	}
	fz_check_reply("POST", target, &r);
	fz_reply_clear(&r);
	return 0;
}
