/*
 * run.h — the agent's one process runner: shell steps (steps.c) and the inventory's tools
 * (inventory.c) both start, watch, time out and reap their processes with it. Depends on
 * libc only.
 */
#ifndef RP_AGENT_RUN_H
#define RP_AGENT_RUN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* One process to run. */
struct rp_agent_proc {
	const char *path;   /* executable, for execve */
	char *const *argv;  /* argv[0] included, NULL-terminated */
	char *const *envp;  /* the whole environment, NULL-terminated */
	const char *cwd;    /* NULL: ours */
	int stderr_output;  /* 1: stderr goes to output like stdout; 0: to /dev/null */
	int64_t timeout_ms; /* from the start */
	/* After the timeout (or cancel): SIGTERM to the group, SIGKILL grace_ms later; 0: SIGKILL
	 * at once. */
	int64_t grace_ms;
	const volatile sig_atomic_t *cancel; /* NULL, or: once nonzero, stop as at the timeout */
	/* Called with each chunk of output as it comes. -1 refuses it: the group gets SIGKILL
	 * and nothing more is read. */
	int (*output)(void *arg, const void *p, size_t n);
	/* NULL, or called with arg every tick_ms or so (from the start) while the process runs and
	 * is not being stopped; it must not block for long. */
	void (*tick)(void *arg);
	int64_t tick_ms;
	void *arg;
};

/* How it ended. */
struct rp_agent_proc_end {
	int timed_out;  /* the timeout stopped it */
	int cancelled;  /* *cancel stopped it */
	int refused;    /* output() refused a chunk */
	int exec_errno; /* execve failed with this errno (the child then exits 127) */
	int status;     /* waitpid() status; 0 when it cannot be learnt (SIGCHLD ignored) */
};

/*
 * Run p in a process group of its own (so that a timeout reaches whatever it started),
 * stdin /dev/null, signals at their defaults and none blocked; a cwd it cannot enter is said
 * on its stderr and it exits 127. Output is read with poll() until the process exits: then
 * what is in the pipe is read, but background children that keep it open are not waited for
 * (after a timeout with a grace, the group gets its grace period too). Fills *end. Returns 0
 * when the process was started (whatever became of it), -1 with errno when it could not be.
 */
int rp_agent_proc_run(const struct rp_agent_proc *p, struct rp_agent_proc_end *end);

#endif
