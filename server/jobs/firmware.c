/*
 * Firmware and BIOS on one node (docs/firmware.md), all on the BMC lane. This file: what the
 * three job types share (reading the Redfish firmware inventory and BIOS attributes into
 * the store) and firmware_refresh, which reads the firmware inventory, the BIOS attributes
 * and the BIOS attribute registry into the store. bios_apply is jobs/bios.c's,
 * firmware_update jobs/update.c's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmc/bmc.h"
#include "internal.h"

/* The store could not record progress: nothing was sent after it, so a retry is safe. */
struct rp_job_outcome *
jobs_fw_store_trouble(struct work *w, const char *what)
{
	struct rp_bmc_err busy = {RP_BMC_BUSY, ""};

	snprintf(busy.msg, sizeof busy.msg, "could not record %s in the database", what);
	return jobs_bmc_failure(w, &busy, 1);
}

/* ---- Inventory ----------------------------------------------------------------------- */

/*
 * Redfish inventory in the store's names: each SoftwareInventory Id lowercased ("BMC" ->
 * "bmc", "GPU3" -> "gpu3"), plus one row per family of numbered components ("gpu": the
 * members' common version, or "mixed") so a baseline can say "gpu" once. Each row keeps the
 * inventory URIs it stands for in "ids" (a family: its members).
 */
static json_t *
inventory_rows(json_t *inv)
{
	json_t *rows = json_array(), *fams = json_object(), *item, *f;
	const char *fname;
	size_t i;

	json_array_foreach(inv, i, item)
	{
		const char *id = json_string_value(json_object_get(item, "component"));
		const char *version = json_string_value(json_object_get(item, "version"));
		const char *uri = json_string_value(json_object_get(item, "id"));
		int upd = json_is_true(json_object_get(item, "updateable"));
		char name[128], fam[128];
		size_t n, k;

		if (id == NULL || version == NULL || version[0] == '\0')
			continue;
		for (n = 0; id[n] && n < sizeof name - 1; n++)
			name[n] = (char)tolower((unsigned char)id[n]);
		name[n] = '\0';
		json_array_append_new(rows,
		                      json_pack("{s:s, s:s, s:b, s:[s?]}", "component", name,
		                                "version", version, "updateable", upd, "ids", uri));
		for (k = n; k > 0 && isdigit((unsigned char)name[k - 1]); k--)
			;
		if (k == n || k == 0)
			continue;
		memcpy(fam, name, k);
		fam[k] = '\0';
		if ((f = json_object_get(fams, fam)) == NULL) {
			json_object_set_new(fams, fam,
			                    json_pack("{s:s, s:s, s:b, s:[]}", "component", fam,
			                              "version", version, "updateable", upd,
			                              "ids"));
			f = json_object_get(fams, fam);
		} else {
			if (strcmp(json_string_value(json_object_get(f, "version")), version) != 0)
				json_object_set_new(f, "version", json_string("mixed"));
			if (upd)
				json_object_set_new(f, "updateable", json_true());
		}
		if (uri)
			json_array_append_new(json_object_get(f, "ids"), json_string(uri));
	}
	json_object_foreach(fams, fname, f)
	{
		int taken = 0;

		json_array_foreach(rows, i, item)
		{
			taken |= !strcmp(json_string_value(json_object_get(item, "component")),
			                 fname);
		}
		if (!taken)
			json_array_append(rows, f);
	}
	json_decref(fams);
	return rows;
}

json_t *
jobs_fw_row(json_t *rows, const char *component)
{
	json_t *r;
	size_t i;

	json_array_foreach(rows, i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "component")), component))
			return r;
	}
	return NULL;
}

/* Read the firmware inventory and, with keep, store it (source redfish; one event per
 * stored reading, so polls in a wait loop do not keep). *rows as inventory_rows. */
int
jobs_fw_read_firmware(struct work *w, struct rp_bmc *b, json_t **rows, int keep,
                      struct rp_bmc_err *err)
{
	json_t *inv = NULL, *r;

	if (rp_bmc_firmware_inventory(b, &inv, err) < 0)
		return -1;
	r = inventory_rows(inv);
	json_decref(inv);
	if (keep && rp_store_node_firmware_set(w->j->st, jobs_node_uuid(w), "redfish", r,
	                                       "rackpilotd") != RP_ERR_OK) {
		json_decref(r);
		return rp_bmc_fail(err, RP_BMC_BUSY, "could not store the firmware inventory");
	}
	*rows = r;
	return 0;
}

/* Read BIOS attributes (and the registry they follow) and store them. *bios (may be NULL)
 * gets what rp_bmc_bios_get returned. A BMC without BIOS resources is not an error. */
int
jobs_fw_read_bios(struct work *w, struct rp_bmc *b, json_t **bios, int keep, struct rp_bmc_err *err)
{
	json_t *info = NULL, *defs = NULL;
	const char *reg;

	if (rp_bmc_bios_get(b, &info, err) < 0)
		return err->kind == RP_BMC_UNSUPPORTED ? 0 : -1;
	if (!keep) {
		*bios = info;
		return 0;
	}
	if (rp_store_node_bios_set(w->j->st, jobs_node_uuid(w), "redfish",
	                           json_object_get(info, "attributes"),
	                           "rackpilotd") != RP_ERR_OK) {
		json_decref(info);
		return rp_bmc_fail(err, RP_BMC_BUSY, "could not store the BIOS attributes");
	}
	reg = json_string_value(json_object_get(info, "registry"));
	if (reg && rp_bmc_bios_registry(b, reg, &defs, err) == 0) {
		rp_store_bios_registry_set(w->j->st, jobs_node_uuid(w), reg, defs);
		json_decref(defs);
	} else if (reg && err->kind != RP_BMC_UNSUPPORTED) {
		json_decref(info);
		return -1;
	}
	err->kind = RP_BMC_OK;
	if (bios)
		*bios = info;
	else
		json_decref(info);
	return 0;
}

int
jobs_firmware_read(struct work *w, struct rp_bmc *b, struct rp_bmc_err *err)
{
	json_t *rows = NULL;

	if (jobs_fw_read_firmware(w, b, &rows, 1, err) < 0 ||
	    jobs_fw_read_bios(w, b, NULL, 1, err) < 0)
		return -1;
	json_decref(rows);
	return 0;
}

struct rp_job_outcome *
jobs_run_firmware_refresh(struct work *w, struct rp_bmc *b)
{
	struct rp_bmc_err err = {0};
	json_t *rows = NULL, *bios = NULL;
	struct rp_job_outcome *o;

	if (jobs_fw_read_firmware(w, b, &rows, 1, &err) < 0 ||
	    jobs_fw_read_bios(w, b, &bios, 1, &err) < 0) {
		json_decref(rows);
		return jobs_bmc_failure(w, &err, 1);
	}
	o = jobs_outcome(w, RP_JOB_END_SUCCEEDED);
	jobs_set_result(
	        o, json_pack("{s:I, s:I, s:s?}", "components", (json_int_t)json_array_size(rows),
	                     "bios_attributes",
	                     (json_int_t)json_object_size(json_object_get(bios, "attributes")),
	                     "registry", json_string_value(json_object_get(bios, "registry"))));
	o->bmc_ok = 1;
	json_decref(rows);
	json_decref(bios);
	return o;
}

/* The last non-empty line a failed step of a steps job printed (the flasher's own words),
 * into buf ("" when none). */
void
jobs_failed_output(json_t *job, char *buf, size_t len)
{
	json_t *st;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(json_object_get(job, "steps"), i, st)
	{
		const char *out = json_string_value(json_object_get(st, "output"));
		const char *end, *start;

		if (strcmp(json_string_value(json_object_get(st, "state")) ?: "", "failed") != 0 ||
		    out == NULL)
			continue;
		end = out + strlen(out);
		while (end > out && isspace((unsigned char)end[-1]))
			end--;
		for (start = end; start > out && start[-1] != '\n'; start--)
			;
		snprintf(buf, len, "%.*s", (int)(end - start), start);
		return;
	}
}
