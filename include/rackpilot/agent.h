/*
 * rackpilot/agent.h — the agent wire protocol shared by rackpilotd and rackpilot-agent:
 * token prefixes, step types and states, the run-steps exit codes and hard caps.
 * docs/agent-protocol.md describes the JSON bodies; these constants keep both sides honest.
 */
#ifndef RACKPILOT_AGENT_H
#define RACKPILOT_AGENT_H

/* Format number carried by plans, registrations and inventories ("format": 1). */
#define RP_AGENT_FORMAT 1

/* Secrets carry their kind in a prefix, so a leaked string says what it opens. */
#define RP_TOKEN_PREFIX_API       "rpt_" /* operator/API tokens */
#define RP_TOKEN_PREFIX_AGENT     "rpa_" /* per-node agent tokens */
#define RP_TOKEN_PREFIX_BOOTSTRAP "rpb_" /* single-use registration tokens */

/* Step types of a plan, in wire spelling. */
#define RP_STEP_TYPES(X)                                                                           \
	X(SHELL, "shell")                                                                          \
	X(FILE, "file")                                                                            \
	X(REBOOT, "reboot")                                                                        \
	X(INVENTORY, "inventory")                                                                  \
	X(FIRMWARE, "firmware")                                                                    \
	X(BIOS, "bios")                                                                            \
	X(IMAGE, "image")

/* States of one step. pending: not started; running: started and not reported finished
 * (a resumed plan finds it so only when the runner died in it); skipped: never run because
 * an earlier step failed or the job was cancelled. */
#define RP_STEP_STATES(X)                                                                          \
	X(PENDING, "pending")                                                                      \
	X(RUNNING, "running")                                                                      \
	X(SUCCEEDED, "succeeded")                                                                  \
	X(FAILED, "failed")                                                                        \
	X(SKIPPED, "skipped")

/* Exit status of `rackpilot-agent run-steps`. */
#define RP_RUN_EXIT_OK        0 /* every step ended (succeeded, or failed with continue_on_error) */
#define RP_RUN_EXIT_FAILED    1 /* a step failed and stopped the plan */
#define RP_RUN_EXIT_USAGE     2 /* bad arguments, configuration or plan */
#define RP_RUN_EXIT_REBOOTING 3 /* a reboot step started the reboot: wait for a new boot_id */
#define RP_RUN_EXIT_SERVER    4 /* the server could not be reached to report a result */

/* Hard caps. */
#define RP_STEP_OUTPUT_TAIL (64 * 1024) /* bytes of output kept per step result */
#define RP_PLAN_MAX_STEPS   100
#define RP_PLAN_MAX_BYTES   (1024 * 1024) /* a plan on stdin */
#define RP_SEED_FILE_MAX    (256 * 1024)  /* one file of an image step's seed */
#define RP_STEP_ID_MAX      64
#define RP_FILE_CONTENT_MAX (256 * 1024) /* inline content of a file step */

#endif
