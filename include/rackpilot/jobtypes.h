/*
 * rackpilot/jobtypes.h — every job type, in one table: the scheduler's lanes, the claim SQL
 * (store/internal.h builds its `type IN (...)` lists from it), the dispatcher's runners
 * (jobs/jobs.c), which node a job needs (a BMC or SSH) and the API's type checks all read
 * it. Pure data: no function of any module is declared here.
 *
 * X(ID, name, lane, rerun_safe, mutating, run):
 * - ID: RP_JOB_<ID> in enum rp_job_type.
 * - name: the wire name (jobs.type).
 * - lane: BMC (short BMC actions; the node needs a BMC) or SSH (step plans and lifecycle
 *   actions that push them; the node needs SSH). They run in separate worker pools.
 * - rerun_safe: 1 when running the job again after a crash is harmless (it never marks
 *   sent_at); 0 when an interrupted job verifies or resumes from its recorded progress
 *   instead of acting again.
 * - mutating: the default when a job is queued without saying (callers may narrow it: a
 *   recipe's child steps job is not mutating itself).
 * - run: the token naming the type's runner in server/jobs/ (other users ignore it).
 * A new job type is one row (and its runner).
 */
#ifndef RACKPILOT_JOBTYPES_H
#define RACKPILOT_JOBTYPES_H

#include <string.h>

#define RP_JOB_TYPES(X)                                                                            \
	X(POWER, "power", BMC, 0, 1, jobs_run_power)                                               \
	X(BOOT, "boot", BMC, 1, 1, jobs_run_boot)                                                  \
	X(VERIFY, "verify", BMC, 1, 0, jobs_run_verify)                                            \
	X(FIRMWARE_REFRESH, "firmware_refresh", BMC, 1, 0, jobs_run_firmware_refresh)              \
	X(BIOS_APPLY, "bios_apply", BMC, 0, 1, jobs_run_bios_apply)                                \
	X(FIRMWARE_UPDATE, "firmware_update", BMC, 0, 1, jobs_run_firmware_update)                 \
	X(ACCEPTANCE, "acceptance", BMC, 0, 0, jobs_run_acceptance)                                \
	X(POWER_CAP, "power_cap", BMC, 1, 0, jobs_run_power_cap)                                   \
	X(IDENTIFY, "identify", BMC, 1, 0, jobs_run_identify)                                      \
	X(BMC_RESET, "bmc_reset", BMC, 0, 1, jobs_run_bmc_reset)                                   \
	X(BMC_ROTATE, "bmc_rotate", BMC, 0, 1, jobs_run_bmc_rotate)                                \
	X(STEPS, "steps", SSH, 0, 1, jobs_run_steps)                                               \
	X(COMMISSION, "commission", SSH, 0, 1, jobs_run_provision)                                 \
	X(DEPLOY, "deploy", SSH, 0, 1, jobs_run_provision)                                         \
	X(RELEASE, "release", SSH, 0, 1, jobs_run_provision)

/* RP_JOB_UNKNOWN: a type no row names (a row written by a newer rackpilotd). */
enum rp_job_type {
	RP_JOB_UNKNOWN = -1,
#define RP_JOB_TYPE_ENUM(id, name, lane, rerun, mutating, run) RP_JOB_##id,
	RP_JOB_TYPES(RP_JOB_TYPE_ENUM)
#undef RP_JOB_TYPE_ENUM
	        RP_JOB__COUNT
};

enum rp_job_lane { RP_JOB_LANE_BMC, RP_JOB_LANE_SSH, RP_JOB_LANES };

static const struct rp_job_type_entry {
	const char *name;
	enum rp_job_lane lane;
	int rerun_safe;
	int mutating;
} rp_job_type_table[RP_JOB__COUNT] = {
#define RP_JOB_TYPE_ROW(id, nm, ln, rerun, mut, run)                                               \
	[RP_JOB_##id] = {                                                                          \
	        .name = nm, .lane = RP_JOB_LANE_##ln, .rerun_safe = rerun, .mutating = mut},
        RP_JOB_TYPES(RP_JOB_TYPE_ROW)
#undef RP_JOB_TYPE_ROW
};

/* The type named name, or RP_JOB_UNKNOWN (also for NULL). */
static inline enum rp_job_type
rp_job_type_find(const char *name)
{
	int i;

	for (i = 0; name && i < RP_JOB__COUNT; i++)
		if (!strcmp(rp_job_type_table[i].name, name))
			return (enum rp_job_type)i;
	return RP_JOB_UNKNOWN;
}

/* The row of t, or NULL for RP_JOB_UNKNOWN and values out of range. Static storage. */
static inline const struct rp_job_type_entry *
rp_job_type_get(enum rp_job_type t)
{
	return t >= 0 && t < RP_JOB__COUNT ? &rp_job_type_table[t] : NULL;
}

#endif
